/* test_cli.c -- `ditto sessions` and `ditto sessions show` end to end on the
 * sanitized binary, over sessions this test records in a temporary folder:
 * a finished one, one cut off by a crash, an empty one and a corrupted one. */
#include "tests/common/testutil.h"
#include "tests/sessions/sesstest.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The four sessions, newest first as the listing must show them. */
typedef struct fixture {
    char *root;
    char *empty, *corrupt, *crashed, *finished; /* ids */
    double now;
} fixture;

static void add(sess *s, const char *fmt, ...) DT_PRINTF(2, 3);

static void add(sess *s, const char *fmt, ...)
{
    dt_buf b = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    cJSON *ev = cJSON_Parse(b.data);
    cr_assert_not_null(ev, "bad fixture event %s", b.data);
    dt_err e = {0};
    cr_assert_eq(sess_append(s, ev, &e), 0, "%s", e.msg);
    cJSON_Delete(ev);
    dt_buf_free(&b);
}

static void artifact(sess *s, const char *name, const char *text)
{
    dt_err e = {0};
    cr_assert_eq(sess_write_artifact(s, name, text, strlen(text), &e), 0, "%s", e.msg);
}

static void set_created(const char *root, const char *id, double when)
{
    char *p = dt_xasprintf("%s/%s/spec.json", root, id);
    struct timespec ts[2] = {{(time_t)when, 0}, {(time_t)when, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
    free(p);
}

static fixture make_fixture(void)
{
    fixture f = {0};
    f.root = tu_tmpdir();
    f.now = dt_wall_now();
    double t = f.now - 600;

    sess *s = st_create(f.root);
    f.finished = dt_xstrdup(sess_id(s));
    add(s, "{\"seq\":1,\"t\":%.3f,\"type\":\"session_started\",\"session\":\"%s\"}", t, f.finished);
    add(s,
        "{\"seq\":2,\"t\":%.3f,\"type\":\"step_started\",\"step\":1,\"kind\":\"profile\","
        "\"version\":1,\"agent\":\"Pattern Profiler\"}",
        t + 1);
    add(s, "{\"seq\":3,\"t\":%.3f,\"type\":\"text\",\"step\":1,\"text\":\"power-law rows\"}",
        t + 1);
    artifact(s, "report_v1.json", "{\"class\": \"power-law\"}\n");
    add(s,
        "{\"seq\":4,\"t\":%.3f,\"type\":\"artifact\",\"step\":1,\"name\":\"report\","
        "\"version\":1,\"json\":{\"class\":\"power-law\"}}",
        t + 2);
    add(s,
        "{\"seq\":5,\"t\":%.3f,\"type\":\"step_finished\",\"step\":1,\"status\":\"approved\","
        "\"seconds\":0.42}",
        t + 2);
    add(s,
        "{\"seq\":6,\"t\":%.3f,\"type\":\"step_started\",\"step\":2,\"kind\":\"generate\","
        "\"version\":1}",
        t + 3);
    artifact(s, "kernel_v1.cu", "__global__ void spmv() {}\n");
    add(s,
        "{\"seq\":7,\"t\":%.3f,\"type\":\"artifact\",\"step\":2,\"name\":\"kernel\","
        "\"version\":1,\"content\":\"__global__ void spmv() {}\\n\"}",
        t + 4);
    add(s, "{\"seq\":8,\"t\":%.3f,\"type\":\"awaiting_review\",\"step\":2,\"policy\":\"ask\"}",
        t + 4);
    add(s,
        "{\"seq\":9,\"t\":%.3f,\"type\":\"decision\",\"step\":2,\"decision\":\"edit\","
        "\"by\":\"person\",\"reason\":null}",
        t + 5);
    add(s,
        "{\"seq\":10,\"t\":%.3f,\"type\":\"step_finished\",\"step\":2,\"status\":\"edited\","
        "\"seconds\":1.5}",
        t + 5);
    add(s,
        "{\"seq\":11,\"t\":%.3f,\"type\":\"step_started\",\"step\":3,\"kind\":\"compile\","
        "\"version\":1}",
        t + 6);
    add(s,
        "{\"seq\":12,\"t\":%.3f,\"type\":\"artifact\",\"step\":3,\"name\":\"compile\","
        "\"version\":1,\"json\":{}}",
        t + 6);
    add(s,
        "{\"seq\":13,\"t\":%.3f,\"type\":\"step_finished\",\"step\":3,\"status\":\"failed\","
        "\"seconds\":0.1}",
        t + 7);
    add(s,
        "{\"seq\":14,\"t\":%.3f,\"type\":\"session_finished\",\"result\":{\"verified\":true,"
        "\"best\":{\"version\":1,\"us\":12.5,\"speedup\":1.83,\"gbps\":512.3},\"exit\":0,"
        "\"reason\":\"done\"}}",
        t + 8);
    sess_close(s);

    s = st_create(f.root);
    f.crashed = dt_xstrdup(sess_id(s));
    dt_err e = {0};
    cr_assert_eq(st_run(s, 1, 8, f.now - 300, &e), 0, "%s", e.msg);
    char *path = dt_xasprintf("%s/events.jsonl", sess_dir(s));
    int fd = open(path, O_WRONLY | O_APPEND);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, "{\"seq\":9,\"ty", 12), 12);
    close(fd);
    free(path);
    sess_close(s);

    s = st_create(f.root);
    f.corrupt = dt_xstrdup(sess_id(s));
    add(s, "{\"seq\":1,\"t\":%.3f,\"type\":\"session_started\"}", f.now - 200);
    add(s, "{\"seq\":2,\"t\":%.3f,\"type\":\"log\",\"level\":\"info\"}", f.now - 199);
    path = dt_xasprintf("%s/events.jsonl", sess_dir(s));
    fd = open(path, O_WRONLY | O_APPEND);
    const char bad[] = "{\"seq\":1,\"type\":\"log\"}\n{\"seq\":3,\"type\":\"log\"}\n";
    cr_assert_eq(write(fd, bad, strlen(bad)), (ssize_t)strlen(bad));
    close(fd);
    free(path);
    sess_close(s);
    set_created(f.root, f.corrupt, f.now - 100);

    s = st_create(f.root);
    f.empty = dt_xstrdup(sess_id(s));
    sess_close(s);
    set_created(f.root, f.empty, f.now - 10);
    return f;
}

static void free_fixture(fixture *f)
{
    tu_rmtree(f->root);
    free(f->root);
    free(f->empty);
    free(f->corrupt);
    free(f->crashed);
    free(f->finished);
}

static void no_sanitizer(const tu_proc *p)
{
    cr_assert(!strstr(p->err, "Sanitizer") && !strstr(p->err, "runtime error"), "%s", p->err);
}

/* The line of out that contains needle (caller frees), or fail. */
static char *line_with(const char *out, const char *needle)
{
    const char *hit = strstr(out, needle);
    cr_assert_not_null(hit, "no line with '%s' in:\n%s", needle, out);
    const char *start = hit;
    while (start > out && start[-1] != '\n')
        start--;
    const char *end = strchr(hit, '\n');
    return dt_xstrndup(start, end ? (size_t)(end - start) : strlen(start));
}

static void line_has(const char *line, const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert(strstr(line, words[i]), "'%s' lacks '%s'", line, words[i]);
}

Test(cli_sessions, the_table_should_list_newest_first_with_states_and_warn_of_corruption)
{
    fixture f = make_fixture();
    tu_proc p = tu_run("'%s' sessions --session-dir '%s'", tu_ditto_bin(), f.root);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    cr_assert_eq(st_lines(p.out), 5, "%s", p.out);
    cr_assert(dt_startswith(p.out, "ID "), "%s", p.out);
    const char *h = p.out;
    const char *order[] = {f.empty, f.corrupt, f.crashed, f.finished};
    for (int i = 0; i < 4; i++) {
        const char *at = strstr(p.out, order[i]);
        cr_assert(at && at > h, "%s out of order in:\n%s", order[i], p.out);
        h = at;
    }
    char *l = line_with(p.out, f.finished);
    const char *fin[] = {"spmv", "gen:rmat:rows=1M,nnz=16M,seed=1", "finished", "1.83x", "     3"};
    line_has(l, fin, DT_ARRAY_LEN(fin));
    char when[32];
    time_t st = (time_t)(f.now - 600);
    struct tm tm;
    localtime_r(&st, &tm);
    strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
    cr_assert(strstr(l, when), "'%s' lacks the start time %s", l, when);
    free(l);
    l = line_with(p.out, f.crashed);
    const char *cra[] = {"running or crashed", "     2", " -"};
    line_has(l, cra, DT_ARRAY_LEN(cra));
    free(l);
    l = line_with(p.out, f.empty);
    const char *emp[] = {"empty", "     0"};
    line_has(l, emp, DT_ARRAY_LEN(emp));
    free(l);
    l = line_with(p.out, f.corrupt);
    cr_assert(strstr(l, "corrupted"), "%s", l);
    free(l);
    /* one warning, for the corrupted log, naming file and line */
    cr_assert_eq(st_lines(p.err), 1, "%s", p.err);
    char *want = dt_xasprintf("ditto sessions: warning: %s/%s/events.jsonl:3: seq 1 after 2\n",
                              f.root, f.corrupt);
    cr_assert_str_eq(p.err, want);
    free(want);
    tu_proc_free(&p);
    free_fixture(&f);
}

Test(cli_sessions, the_table_as_json_should_carry_the_same_rows)
{
    fixture f = make_fixture();
    tu_proc p = tu_run("'%s' sessions --json --session-dir='%s'", tu_ditto_bin(), f.root);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "%s", p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert(cJSON_IsArray(j), "%s", p.out);
    cr_assert_eq(cJSON_GetArraySize(j), 4);
    const char *ids[] = {f.empty, f.corrupt, f.crashed, f.finished};
    const char *states[] = {"empty", "corrupted", "running or crashed", "finished"};
    const int steps[] = {0, 0, 2, 3};
    for (int i = 0; i < 4; i++) {
        const cJSON *r = cJSON_GetArrayItem(j, i);
        cr_assert_str_eq(dt_json_str(r, "id", ""), ids[i]);
        cr_assert_str_eq(dt_json_str(r, "state", ""), states[i]);
        cr_assert_eq(dt_json_num(r, "steps", -1), steps[i], "row %d", i);
    }
    const cJSON *fin = cJSON_GetArrayItem(j, 3);
    cr_assert_float_eq(dt_json_num(fin, "best_speedup", 0), 1.83, 1e-9);
    cr_assert_float_eq(dt_json_num(fin, "started", 0), f.now - 600, 1e-3);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 2), "best_speedup")));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "started")));
    cJSON_Delete(j);
    tu_proc_free(&p);
    free_fixture(&f);
}

Test(cli_sessions, show_should_give_spec_fingerprint_steps_result_and_files)
{
    fixture f = make_fixture();
    tu_proc p =
        tu_run("'%s' sessions show %s --session-dir '%s'", tu_ditto_bin(), f.finished, f.root);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert_str_eq(p.err, "");
    char *l = line_with(p.out, "state ");
    cr_assert(strstr(l, "finished"), "%s", l);
    free(l);
    l = line_with(p.out, "  matrix");
    cr_assert(strstr(l, "gen:rmat:rows=1M,nnz=16M,seed=1"), "%s", l);
    free(l);
    l = line_with(p.out, "NVIDIA H200");
    cr_assert(dt_startswith(l, "  gpu "), "%s", l);
    free(l);
    l = line_with(p.out, "  gpu            h200"); /* the spec's */
    cr_assert(strstr(p.out, "\nspec\n") < strstr(p.out, l), "%s", p.out);
    free(l);
    l = line_with(p.out, "  seeds");
    cr_assert(strstr(l, "42"), "%s", l);
    free(l);
    l = line_with(p.out, " profile ");
    const char *s1[] = {"approved", "0.42", "report v1 (report_v1.json)"};
    line_has(l, s1, DT_ARRAY_LEN(s1));
    free(l);
    l = line_with(p.out, " generate ");
    const char *s2[] = {"edited", "1.50", "kernel v1 (kernel_v1.cu)"};
    line_has(l, s2, DT_ARRAY_LEN(s2));
    free(l);
    l = line_with(p.out, " compile ");
    const char *s3[] = {"failed", "0.10", "compile v1 (in the log only)"};
    line_has(l, s3, DT_ARRAY_LEN(s3));
    free(l);
    l = line_with(p.out, "result ");
    const char *r[] = {"verified", "best v1", "12.50 us", "1.83x", "512.3 GB/s", "exit 0: done"};
    line_has(l, r, DT_ARRAY_LEN(r));
    free(l);
    l = line_with(p.out, "  kernel_v1.cu ");
    cr_assert(strstr(l, "26 B"), "%s", l);
    free(l);
    cr_assert(!strstr(p.out, "events.jsonl"), "the store's files are not artifacts:\n%s", p.out);
    cr_assert(!strstr(p.out, "\nevents\n"), "raw events without --events");
    tu_proc_free(&p);
    free_fixture(&f);
}

Test(cli_sessions, show_events_should_print_the_log_as_it_is)
{
    fixture f = make_fixture();
    tu_proc p = tu_run("'%s' sessions show %s --events --session-dir '%s'", tu_ditto_bin(),
                       f.finished, f.root);
    cr_assert_eq(p.status, 0, "%s", p.err);
    char *dir = dt_xasprintf("%s/%s", f.root, f.finished);
    char *log = st_log_text(dir);
    char *tail = strstr(p.out, "\nevents\n");
    cr_assert_not_null(tail, "%s", p.out);
    cr_assert_str_eq(tail + strlen("\nevents\n"), log);
    free(log);
    tu_proc_free(&p);

    /* and as JSON, with the steps folded */
    p = tu_run("'%s' sessions show '%s' --json --events", tu_ditto_bin(), dir);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "%s", p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "%s", p.out);
    cr_assert_str_eq(dt_json_str(j, "state", ""), "finished");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "events")), 14);
    const cJSON *steps = cJSON_GetObjectItem(j, "steps");
    cr_assert_eq(cJSON_GetArraySize(steps), 3);
    const cJSON *gen = cJSON_GetArrayItem(steps, 1);
    cr_assert_str_eq(dt_json_str(gen, "kind", ""), "generate");
    cr_assert_eq(dt_json_num(gen, "version", 0), 1);
    cr_assert_str_eq(dt_json_str(gen, "status", ""), "edited");
    cr_assert_float_eq(dt_json_num(gen, "seconds", 0), 1.5, 1e-9);
    const cJSON *art = cJSON_GetArrayItem(cJSON_GetObjectItem(gen, "artifacts"), 0);
    cr_assert_str_eq(dt_json_str(art, "file", ""), "kernel_v1.cu");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "files")), 2);
    cr_assert_float_eq(
        dt_json_num(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "result"), "best"), "speedup", 0),
        1.83, 1e-9);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "warnings")), 0);
    cJSON_Delete(j);
    tu_proc_free(&p);
    free(dir);
    free_fixture(&f);
}

Test(cli_sessions, show_of_a_crashed_session_should_warn_and_change_nothing)
{
    fixture f = make_fixture();
    char *dir = dt_xasprintf("%s/%s", f.root, f.crashed);
    char *before = st_log_text(dir);
    tu_proc p =
        tu_run("'%s' sessions show %s --session-dir '%s'", tu_ditto_bin(), f.crashed, f.root);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "%s", p.err);
    char *want = dt_xasprintf("ditto sessions: warning: %s/events.jsonl:9: partial last line "
                              "dropped",
                              dir);
    cr_assert(dt_startswith(p.err, want), "%s", p.err);
    cr_assert_eq(st_lines(p.err), 1, "%s", p.err);
    char *l = line_with(p.out, "state ");
    cr_assert(strstr(l, "running or crashed (the last line was cut off mid-write)"), "%s", l);
    free(l);
    l = line_with(p.out, " profile ");
    const char *s1[] = {"approved", "0.25", "profile v1 (profile_v1.json)"};
    line_has(l, s1, DT_ARRAY_LEN(s1));
    free(l);
    /* step 2 was cut off before its artifact: still running, no time */
    l = line_with(p.out, " plan ");
    const char *s2[] = {"running", "        -  -"};
    line_has(l, s2, DT_ARRAY_LEN(s2));
    free(l);
    char *after = st_log_text(dir);
    cr_assert_str_eq(after, before, "show modified the log");
    free(after);
    free(before);
    free(want);
    free(dir);
    tu_proc_free(&p);
    free_fixture(&f);
}

Test(cli_sessions, a_corrupted_or_unknown_session_should_give_one_clear_line)
{
    fixture f = make_fixture();
    tu_proc p =
        tu_run("'%s' sessions show %s --session-dir '%s'", tu_ditto_bin(), f.corrupt, f.root);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 1);
    cr_assert_str_eq(p.out, "");
    char *want =
        dt_xasprintf("ditto sessions: %s/%s/events.jsonl:3: seq 1 after 2\n", f.root, f.corrupt);
    cr_assert_str_eq(p.err, want);
    free(want);
    tu_proc_free(&p);

    p = tu_run("'%s' sessions show 20990101-000000-nope --session-dir '%s'", tu_ditto_bin(),
               f.root);
    no_sanitizer(&p);
    cr_assert_eq(p.status, 66);
    want = dt_xasprintf("ditto sessions: no session '20990101-000000-nope' under %s "
                        "(ditto sessions lists them)\n",
                        f.root);
    cr_assert_str_eq(p.err, want);
    free(want);
    tu_proc_free(&p);
    free_fixture(&f);
}

Test(cli_sessions, misuse_should_exit_2_and_point_at_help)
{
    const char *bad[] = {"sessions show", "sessions --bogus",  "sessions --events",
                         "sessions frob", "sessions show a b", "sessions --session-dir"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        tu_proc p = tu_run("'%s' %s", tu_ditto_bin(), bad[i]);
        cr_assert_eq(p.status, 2, "%s: exit %d", bad[i], p.status);
        cr_assert(strstr(p.err, "ditto sessions: ") && strstr(p.err, "--help"), "%s: %s", bad[i],
                  p.err);
        tu_proc_free(&p);
    }
    tu_proc p = tu_run("'%s' sessions --help", tu_ditto_bin());
    cr_assert_eq(p.status, 0);
    cr_assert(dt_startswith(p.out, "usage: ditto sessions"), "%s", p.out);
    cr_assert(strstr(p.out, "show ID"), "%s", p.out);
    tu_proc_free(&p);
    p = tu_run("'%s' --help", tu_ditto_bin());
    cr_assert(strstr(p.out, "  sessions "), "%s", p.out);
    tu_proc_free(&p);
}

Test(cli_sessions, the_default_folder_should_come_from_xdg_data_home)
{
    char *data = tu_tmpdir();
    char *root = dt_xasprintf("%s/ditto/sessions", data);
    sess *s = st_create(root);
    char *id = dt_xstrdup(sess_id(s));
    sess_close(s);
    tu_proc p = tu_run("XDG_DATA_HOME='%s' '%s' sessions", data, tu_ditto_bin());
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, id), "%s", p.out);
    tu_proc_free(&p);
    p = tu_run("XDG_DATA_HOME='%s' '%s' sessions show %s --json", data, tu_ditto_bin(), id);
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "\"state\": \"empty\"") || strstr(p.out, "\"state\":\t\"empty\""), "%s",
              p.out);
    tu_proc_free(&p);
    p = tu_run("env -u HOME -u XDG_DATA_HOME '%s' sessions", tu_ditto_bin());
    cr_assert_eq(p.status, 1);
    cr_assert(strstr(p.err, "--session-dir") && st_lines(p.err) == 1, "%s", p.err);
    tu_proc_free(&p);
    /* an empty or missing folder is not an error */
    p = tu_run("'%s' sessions --session-dir '%s/none'", tu_ditto_bin(), data);
    cr_assert_eq(p.status, 0, "%s", p.err);
    char *want = dt_xasprintf("no sessions under %s/none\n", data);
    cr_assert_str_eq(p.out, want);
    free(want);
    tu_proc_free(&p);
    p = tu_run("'%s' sessions --json --session-dir '%s/none'", tu_ditto_bin(), data);
    cr_assert_str_eq(p.out, "[]\n");
    tu_proc_free(&p);
    free(id);
    free(root);
    tu_rmtree(data);
    free(data);
}

/* issue 37: folder names and spec fields reached the terminal raw, OSC 52
 * clipboard writes included. */
Test(cli_sessions, escapes_in_folder_names_and_spec_fields_should_not_reach_the_terminal)
{
    char *root = tu_tmpdir();
    char *dir = dt_xasprintf("%s/evil\x1b]52;c;cHduZWQ=\x07", root);
    cr_assert_eq(mkdir(dir, 0700), 0);
    free(tu_write(dir, "spec.json",
                  "{\"op\": \"spmv\", \"matrix\": \"\\u001b[2J\\u001b]0;owned\\u0007m.mtx\\u009b31m\"}"));
    free(tu_write(dir, "events.jsonl",
                  "{\"seq\": 1, \"t\": 1, \"type\": \"session_started\", \"spec\": {\"matrix\": "
                  "\"\\u001b[31mred\"}}\n"));
    tu_proc p = tu_run("'%s' sessions --session-dir '%s'", tu_ditto_bin(), root);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.out, "evil^[]52;c;cHduZWQ=^G"), "the folder is not listed: %s", p.out);
    for (const char *s = p.out; *s; s++)
        cr_assert(*s != '\x1b' && *s != '\x07', "a control character in: %s", p.out);
    cr_assert_null(strstr(p.out, "\xc2\x9b"), "a C1 control in: %s", p.out);
    tu_proc_free(&p);
    p = tu_run("'%s' sessions show '%s' --events", tu_ditto_bin(), dir);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    for (const char *s = p.out; *s; s++)
        cr_assert(*s != '\x1b' && *s != '\x07', "a control character in: %s", p.out);
    for (const char *s = p.err; *s; s++)
        cr_assert(*s != '\x1b' && *s != '\x07', "a control character in: %s", p.err);
    cr_assert_null(strstr(p.out, "\xc2\x9b"), "a C1 control in: %s", p.out);
    tu_proc_free(&p);
    free(dir);
    tu_rmtree(root);
    free(root);
}
