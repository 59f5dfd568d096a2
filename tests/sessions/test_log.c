/* test_log.c -- reading logs back: bad lines named by file and line, a
 * partial last line tolerated and cut off on resume, and the listing's
 * order and states. */
#include "tests/common/testutil.h"
#include "tests/sessions/sesstest.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const double base = 1.8e9;

/* A closed session under root whose events.jsonl holds exactly text[0..len). */
static char *session_with_log(const char *root, const char *text, size_t len)
{
    sess *s = st_create(root);
    char *dir = dt_xstrdup(sess_dir(s));
    sess_close(s);
    char *path = dt_xasprintf("%s/events.jsonl", dir);
    dt_err e = {0};
    cr_assert_eq(dt_write_file_atomic(path, text, len, &e), 0, "%s", e.msg);
    free(path);
    return dir;
}

/* The lines of events 1..n, then extra appended. */
static char *lines_then(long n, const char *extra)
{
    dt_buf b = DT_BUF_INIT;
    for (long i = 1; i <= n; i++) {
        char *l = st_line(i, base);
        dt_buf_puts(&b, l);
        free(l);
    }
    dt_buf_puts(&b, extra);
    return dt_buf_take(&b);
}

/* The log must be refused with exactly "DIR/events.jsonl:" + want, by the
 * reader and by sess_open, which must leave the file alone. */
static void expect_corrupt(const char *text, const char *want)
{
    char *root = tu_tmpdir();
    char *dir = session_with_log(root, text, strlen(text));
    dt_err e = {0};
    cr_assert_null(sess_log_read(NULL, dir, &e), "accepted: %s", want);
    cr_assert_eq(e.code, SESS_ECORRUPT, "%s", want);
    char *full = dt_xasprintf("%s/events.jsonl:%s", dir, want);
    cr_assert(dt_startswith(e.msg, full), "wanted '%s...'\n got '%s'", full, e.msg);
    dt_err_clear(&e);
    cr_assert_null(sess_open(NULL, dir, &e), "sess_open accepted: %s", want);
    cr_assert(dt_startswith(e.msg, full), "sess_open: %s", e.msg);
    char *after = st_log_text(dir);
    cr_assert_str_eq(after, text, "sess_open changed a corrupted log");
    free(after);
    free(full);
    free(dir);
    tu_rmtree(root);
    free(root);
}

Test(log, bad_json_in_the_middle_should_name_the_line)
{
    char *t = lines_then(3, "{\"seq\": 4, \"type\": \"text\", oops}\n");
    char *t2 = dt_xasprintf("%s%s", t, "{\"seq\": 5, \"type\": \"text\"}\n");
    expect_corrupt(t2, "4: not JSON: ");
    free(t2);
    free(t);
    t = lines_then(2, "\n{\"seq\": 3, \"type\": \"text\"}\n");
    expect_corrupt(t, "3: not JSON: empty line");
    free(t);
    t = lines_then(1, "{\"seq\": 2, \"type\": \"text\"} trailing\n{\"seq\": 3, \"type\": \"x\"}\n");
    expect_corrupt(t, "2: not JSON: text after the value");
    free(t);
}

Test(log, events_without_type_or_seq_should_name_the_line)
{
    char *t = lines_then(2, "{\"seq\": 3, \"text\": \"no type\"}\n{\"seq\": 4, \"type\": \"x\"}\n");
    expect_corrupt(t, "3: missing \"type\"");
    free(t);
    t = lines_then(4, "{\"type\": \"text\"}\n{\"seq\": 6, \"type\": \"x\"}\n");
    expect_corrupt(t, "5: missing \"seq\"");
    free(t);
    t = lines_then(1, "[1, 2]\n{\"seq\": 3, \"type\": \"x\"}\n");
    expect_corrupt(t, "2: not a JSON object");
    free(t);
    t = lines_then(1, "{\"seq\": -4, \"type\": \"x\"}\n{\"seq\": 3, \"type\": \"x\"}\n");
    expect_corrupt(t, "2: seq -4 is not a positive integer");
    free(t);
}

Test(log, seq_going_backwards_should_name_the_line_and_both_numbers)
{
    const char *t = "{\"seq\": 8, \"type\": \"a\"}\n{\"seq\": 9, \"type\": \"b\"}\n"
                    "{\"seq\": 7, \"type\": \"c\"}\n{\"seq\": 10, \"type\": \"d\"}\n";
    expect_corrupt(t, "3: seq 7 after 9");
    expect_corrupt("{\"seq\": 3, \"type\": \"a\"}\n{\"seq\": 3, \"type\": \"b\"}\n"
                   "{\"seq\": 4, \"type\": \"a\"}\n",
                   "2: seq 3 after 3");
}

Test(log, a_partial_last_line_should_be_tolerated_and_reported)
{
    char *root = tu_tmpdir();
    /* cut mid-event, mid-string */
    char *t = lines_then(3, "{\"seq\": 4, \"type\": \"te");
    char *dir = session_with_log(root, t, strlen(t));
    dt_err e = {0};
    sess_log *l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(cJSON_GetArraySize(l->events), 3);
    cr_assert_eq(l->truncated, 1);
    char *want = dt_xasprintf("%s/events.jsonl:4: partial last line dropped", dir);
    cr_assert(dt_startswith(dt_buf_str(&l->warnings), want), "%s", dt_buf_str(&l->warnings));
    cr_assert_eq(st_lines(dt_buf_str(&l->warnings)), 1);
    sess_log_free(l);
    /* reading changes nothing */
    char *after = st_log_text(dir);
    cr_assert_str_eq(after, t);
    free(after);
    free(want);
    free(dir);
    free(t);

    /* a whole event without its newline was still cut mid-write */
    t = lines_then(2, "{\"seq\":3,\"type\":\"text\"}");
    dir = session_with_log(root, t, strlen(t));
    l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(cJSON_GetArraySize(l->events), 2);
    cr_assert_eq(l->truncated, 1);
    cr_assert(strstr(dt_buf_str(&l->warnings), "events.jsonl:3: partial last line"));
    sess_log_free(l);
    free(dir);
    free(t);

    /* a last line of zeros (what a file system can show after a power
     * loss) ending in a newline */
    char *head = lines_then(2, "");
    size_t hl = strlen(head);
    char *raw = dt_xmalloc(hl + 5);
    memcpy(raw, head, hl);
    memcpy(raw + hl, "\0\0\0\0\n", 5);
    dir = session_with_log(root, raw, hl + 5);
    l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(cJSON_GetArraySize(l->events), 2);
    cr_assert_eq(l->truncated, 1);
    cr_assert(
        strstr(dt_buf_str(&l->warnings), "events.jsonl:3: partial last line dropped (not JSON"),
        "%s", dt_buf_str(&l->warnings));
    sess_log_free(l);
    free(raw);
    free(head);
    free(dir);
    tu_rmtree(root);
    free(root);
}

Test(log, only_the_last_line_may_be_partial)
{
    /* a cut line followed by more lines is corruption, not a crash */
    char *t = lines_then(2, "{\"seq\": 3, \"type\": \"te\n");
    char *t2 = dt_xasprintf("%s{\"seq\": 4, \"type\": \"x\"}\n", t);
    expect_corrupt(t2, "3: not JSON: ");
    /* and one before a partial tail */
    char *t3 = dt_xasprintf("%s{\"seq\": 4, \"ty", t);
    expect_corrupt(t3, "3: not JSON: ");
    free(t);
    free(t2);
    free(t3);
}

Test(log, open_should_cut_the_partial_line_and_append_on_a_fresh_line)
{
    char *root = tu_tmpdir();
    char *good = lines_then(7, "");
    char *t = dt_xasprintf("%s{\"seq\": 8, \"type\": \"step_fi", good);
    char *dir = session_with_log(root, t, strlen(t));
    dt_err e = {0};
    sess *s = sess_open(NULL, dir, &e);
    cr_assert_not_null(s, "%s", e.msg);
    char *want = dt_xasprintf("%s/events.jsonl:8: partial last line dropped", dir);
    cr_assert(dt_startswith(sess_warnings(s), want), "%s", sess_warnings(s));
    cr_assert_eq(sess_next_seq(s), 8);
    /* cut off in the file itself, before any append */
    char *now = st_log_text(dir);
    cr_assert_str_eq(now, good);
    free(now);
    cr_assert_eq(st_run(s, 8, 13, base, &e), 0, "%s", e.msg);
    sess_close(s);
    char *all = lines_then(13, "");
    now = st_log_text(dir);
    cr_assert_str_eq(now, all);
    sess_log *l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(l->truncated, 0);
    cr_assert_str_eq(dt_buf_str(&l->warnings), "");
    cr_assert_eq(cJSON_GetArraySize(l->events), 13);
    sess_log_free(l);
    free(all);
    free(now);
    free(want);
    free(t);
    free(good);
    free(dir);
    tu_rmtree(root);
    free(root);
}

Test(log, missing_spec_files_should_be_warnings_not_errors)
{
    char *root = tu_tmpdir();
    char *t = lines_then(2, "");
    char *dir = session_with_log(root, t, strlen(t));
    char *spec = dt_xasprintf("%s/spec.json", dir);
    char *fp = dt_xasprintf("%s/fingerprint.json", dir);
    unlink(spec);
    cr_assert_eq(dt_write_file_atomic(fp, "{nope", 5, NULL), 0);
    dt_err e = {0};
    sess_log *l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_null(l->spec);
    cr_assert_null(l->fingerprint);
    const char *w = dt_buf_str(&l->warnings);
    cr_assert(strstr(w, "spec.json: missing") && strstr(w, "fingerprint.json:1:"), "%s", w);
    cr_assert_eq(cJSON_GetArraySize(l->events), 2);
    sess_log_free(l);
    free(spec);
    free(fp);
    free(t);
    free(dir);
    tu_rmtree(root);
    free(root);
}

/* ---- listing ------------------------------------------------------------ */

static void set_created(const char *dir, double when)
{
    char *p = dt_xasprintf("%s/spec.json", dir);
    struct timespec ts[2] = {{(time_t)when, 0}, {(time_t)when, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, p, ts, 0), 0);
    free(p);
}

static char *make_session(const char *root, const char *events)
{
    return session_with_log(root, events, strlen(events));
}

Test(list, sessions_should_come_newest_first_with_their_states)
{
    char *root = tu_tmpdir();
    double now = dt_wall_now();
    char buf[1024];
    /* A: finished long ago, with a best speedup */
    snprintf(
        buf, sizeof buf,
        "{\"seq\":1,\"t\":%.3f,\"type\":\"session_started\"}\n"
        "{\"seq\":2,\"t\":%.3f,\"type\":\"step_started\",\"step\":1,\"kind\":\"profile\"}\n"
        "{\"seq\":3,\"t\":%.3f,\"type\":\"step_finished\",\"step\":1,\"status\":\"approved\"}\n"
        "{\"seq\":4,\"t\":%.3f,\"type\":\"step_started\",\"step\":2,\"kind\":\"plan\"}\n"
        "{\"seq\":5,\"t\":%.3f,\"type\":\"session_finished\",\"result\":{\"verified\":true,"
        "\"best\":{\"version\":2,\"speedup\":1.83}}}\n",
        now - 300, now - 299, now - 298, now - 297, now - 296);
    char *a = make_session(root, buf);
    /* B: cut off mid-step, its spec.json lost but kept in the first event */
    snprintf(buf, sizeof buf,
             "{\"seq\":1,\"t\":%.3f,\"type\":\"session_started\",\"spec\":{\"op\":\"sddmm\","
             "\"matrix\":\"gen:dl:rows=512,cols=512,nnz=9000\"}}\n"
             "{\"seq\":2,\"t\":%.3f,\"type\":\"step_started\",\"step\":1,\"kind\":\"profile\"}\n"
             "{\"seq\":3,\"t\":%.3f,\"type\":\"te",
             now - 100, now - 99, now - 98);
    char *b = make_session(root, buf);
    char *bspec = dt_xasprintf("%s/spec.json", b);
    unlink(bspec);
    /* D: corrupted, created before C */
    char *d = make_session(root, "{\"seq\":2,\"type\":\"a\"}\n{\"seq\":1,\"type\":\"b\"}\n");
    set_created(d, now - 50);
    /* C: no events yet */
    char *c = make_session(root, "");
    set_created(c, now - 10);
    /* what is not a session */
    char *junk = dt_xasprintf("%s/junk", root);
    cr_assert_eq(dt_mkdir_p(junk, NULL), 0);
    char *f = tu_write(root, "README", "not a session");
    char *hidden = dt_xasprintf("%s/.new-20990101-000000-abcd", root);
    cr_assert_eq(dt_mkdir_p(hidden, NULL), 0);
    char *hs = tu_write(hidden, "spec.json", "{}");

    sess_info *rows = NULL;
    int n = 0;
    dt_buf warn = DT_BUF_INIT;
    dt_err e = {0};
    cr_assert_eq(sess_list(root, &rows, &n, &warn, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 4, "n = %d; warnings: %s", n, dt_buf_str(&warn));
    const char *order[] = {c, d, b, a};
    const char *states[] = {"empty", "corrupted", "running or crashed", "finished"};
    const int steps[] = {0, 0, 1, 2};
    for (int i = 0; i < 4; i++) {
        cr_assert_str_eq(rows[i].dir, order[i], "row %d", i);
        cr_assert(dt_endswith(order[i], rows[i].id), "row %d id %s", i, rows[i].id);
        cr_assert_str_eq(rows[i].state, states[i], "row %d", i);
        cr_assert_eq(rows[i].steps, steps[i], "row %d", i);
    }
    cr_assert_float_eq(rows[3].best_speedup, 1.83, 1e-9);
    cr_assert_eq(rows[2].best_speedup, 0);
    cr_assert_float_eq(rows[3].started, now - 300, 1e-3);
    cr_assert_eq(rows[0].started, 0);
    cr_assert_str_eq(rows[3].op, "spmv");
    cr_assert_str_eq(rows[3].matrix, "gen:rmat:rows=1M,nnz=16M,seed=1");
    cr_assert_str_eq(rows[2].op, "sddmm");
    cr_assert_str_eq(rows[2].matrix, "gen:dl:rows=512,cols=512,nnz=9000");
    cr_assert_str_eq(rows[1].op, "spmv"); /* a corrupted log still has its spec */
    const char *w = dt_buf_str(&warn);
    char *corrupt = dt_xasprintf("%s/events.jsonl:2: seq 1 after 2", d);
    cr_assert(strstr(w, corrupt), "%s", w);
    cr_assert(strstr(w, "junk: skipped: not a session folder"), "%s", w);
    cr_assert(strstr(w, "README: skipped"), "%s", w);
    cr_assert(!strstr(w, ".new-"), "a session being created was reported: %s", w);
    cr_assert(!strstr(w, "partial"), "a crashed session is not a listing problem: %s", w);
    free(corrupt);
    free(rows);
    dt_buf_free(&warn);
    free(a);
    free(b);
    free(bspec);
    free(c);
    free(d);
    free(junk);
    free(f);
    free(hidden);
    free(hs);
    tu_rmtree(root);
    free(root);
}

Test(list, equal_start_times_should_order_by_id_and_a_missing_root_be_empty)
{
    char *root = tu_tmpdir();
    const char *ev = "{\"seq\":1,\"t\":1800000000.5,\"type\":\"session_started\"}\n";
    char *x = make_session(root, ev);
    char *y = make_session(root, ev);
    sess_info *rows = NULL;
    int n = 0;
    cr_assert_eq(sess_list(root, &rows, &n, NULL, NULL), 0);
    cr_assert_eq(n, 2);
    cr_assert_gt(strcmp(rows[0].id, rows[1].id), 0);
    free(rows);
    free(x);
    free(y);
    char *none = dt_xasprintf("%s/not-yet", root);
    rows = (sess_info *)1;
    n = 7;
    dt_err e = {0};
    cr_assert_eq(sess_list(none, &rows, &n, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 0);
    cr_assert_null(rows);
    free(none);
    /* a root that is a file cannot be read */
    char *file = tu_write(root, "file", "x");
    cr_assert_eq(sess_list(file, &rows, &n, NULL, &e), -1);
    cr_assert(strstr(e.msg, "file"), "%s", e.msg);
    free(file);
    tu_rmtree(root);
    free(root);
}
