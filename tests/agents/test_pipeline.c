/* test_pipeline.c -- the pipeline end to end on the built binary, no GPU:
 * the expert backend through compile, reviews answered on stdin (a
 * rejection's reason reaching the agent), the event stream, the session log,
 * resume after kill -9, Lua hooks that loop or escape the sandbox, and a
 * scripted LLM whose feedback (compiler line, broken rule) reaches the next
 * prompt -- with the API key never written anywhere. */
#include "tests/common/testutil.h"
#include "tests/common/llmtest.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char *write_spec(const char *dir, const char *review)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,seed=2\", "
             "\"dtype\": \"fp32\", \"review\": \"%s\"}",
             review);
    return tu_write(dir, "spec.json", text);
}

/* The single session folder under DIR/sessions. Caller frees. */
static char *only_session(const char *dir)
{
    tu_proc p = tu_run("ls -d '%s'/ditto/sessions/*/ | head -n 1", dir);
    char *s = dt_xstrdup(p.out);
    tu_proc_free(&p);
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '/'))
        s[--n] = '\0';
    cr_assert(n > 0, "no session under %s", dir);
    return s;
}

static cJSON *events_of(const char *sdir)
{
    char *p = dt_xasprintf("%s/events.jsonl", sdir);
    char *text = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(text, "no %s", p);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "bad line in %s: %s", p, l);
        cJSON_AddItemToArray(arr, j);
    }
    free(text);
    free(p);
    return arr;
}

static int count_type(const cJSON *ev, const char *type)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        n += dt_streq(dt_json_str(e, "type", ""), type);
    return n;
}

static int text_of_step_contains(const cJSON *ev, int step, const char *needle)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "text") && (int)dt_json_num(e, "step", 0) == step &&
            strstr(dt_json_str(e, "text", ""), needle))
            return 1;
    }
    return 0;
}

#define ENV(dir) "XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' XDG_CONFIG_HOME='%s/config' "

Test(pipeline, expert_run_without_a_gpu_should_stop_after_compile_with_exit_3, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' < /dev/null", dir, dir, dir, tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 3, "exit %d\nstdout:\n%s\nstderr:\n%s", p.status, p.out, p.err);
    cr_assert(strstr(p.out, "profile ") && strstr(p.out, "plan ") && strstr(p.out, "check ") &&
                  strstr(p.out, "generate ") && strstr(p.out, "compile "),
              "%s", p.out);
    cr_assert(strstr(p.out, "verification and measurement need one"), "%s", p.out);
    char *sd = only_session(dir);
    char *k = dt_xasprintf("%s/kernel_v1.cu", sd);
    cr_assert(dt_file_exists(k), "%s missing", k);
    char *log = dt_xasprintf("%s/compile_v1.log", sd);
    cr_assert(dt_file_exists(log), "%s missing", log);
    cJSON *ev = events_of(sd);
    cr_assert_eq(count_type(ev, "session_started"), 1);
    cr_assert_eq(count_type(ev, "session_finished"), 1);
    cr_assert_eq(count_type(ev, "step_started"), 5);
    long last = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        long seq = (long)dt_json_num(e, "seq", 0);
        cr_assert_eq(seq, last + 1, "seq %ld after %ld", seq, last);
        last = seq;
    }
    cJSON_Delete(ev);
    free(k);
    free(log);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(pipeline, a_rejection_reason_should_reach_the_agents_next_attempt, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    tu_proc p = tu_run("printf 'a\\nr use a smaller block for this matrix\\na\\na\\na\\na\\na\\n' | " ENV(
                           dir) "'%s' run '%s'",
                       dir, dir, dir, tu_ditto_bin(), spec);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    /* step 2 (plan v1) was rejected; step 3 is plan v2 and its reasoning
     * quotes the reason */
    int found = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "decision") &&
            dt_streq(dt_json_str(e, "decision", ""), "reject"))
            found = (int)dt_json_num(e, "step", 0);
    }
    cr_assert_eq(found, 2, "no rejection of step 2:\n%s", p.out);
    cr_assert(text_of_step_contains(ev, 3, "use a smaller block for this matrix"),
              "the reason is not in plan v2's reasoning\n%s", p.out);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(pipeline, json_mode_should_print_one_event_per_line_in_order, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --json --no-session < /dev/null", dir, dir, dir,
                       tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 3, "%s", p.err);
    long last = 0;
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(p.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "not JSON: %s", l);
        cr_assert_eq((long)dt_json_num(j, "seq", 0), last + 1);
        last++;
        n++;
        cJSON_Delete(j);
    }
    cr_assert_gt(n, 20);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

static char *file_hash(const char *path)
{
    size_t n = 0;
    char *t = dt_read_file(path, &n, NULL);
    cr_assert_not_null(t, "%s missing", path);
    char hex[17];
    dt_hash_hex(dt_hash64(t, n, DT_HASH_SEED), hex);
    free(t);
    return dt_xstrdup(hex);
}

Test(pipeline, resume_after_kill_9_should_keep_every_approved_step, .timeout = 300)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    char *fifo = dt_xasprintf("%s/stdin", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    char *out = dt_xasprintf("%s/run.out", dir);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *cmd = dt_xasprintf(ENV(dir) "exec '%s' run '%s' < '%s' > '%s' 2>&1", dir, dir, dir,
                                 tu_ditto_bin(), spec, fifo, out);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int fd = open(fifo, O_WRONLY);
    cr_assert(fd >= 0);
    /* approve profile and plan; leave the check step waiting */
    cr_assert_eq(write(fd, "a\na\n", 4), 4);
    char *sd = NULL;
    for (int i = 0; i < 600; i++) {
        usleep(100000);
        tu_proc q = tu_run("ls -d '%s'/ditto/sessions/*/ 2>/dev/null | head -n 1", dir);
        if (q.out[0] && sd == NULL) {
            free(sd);
            sd = dt_xstrdup(q.out);
            sd[strcspn(sd, "\n")] = '\0';
            if (sd[strlen(sd) - 1] == '/')
                sd[strlen(sd) - 1] = '\0';
        }
        tu_proc_free(&q);
        if (sd == NULL)
            continue;
        cJSON *ev = events_of(sd);
        int waiting_check = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, ev)
            if (dt_streq(dt_json_str(e, "type", ""), "awaiting_review") &&
                (int)dt_json_num(e, "step", 0) == 3)
                waiting_check = 1;
        cJSON_Delete(ev);
        if (waiting_check)
            break;
    }
    cr_assert_not_null(sd, "no session appeared");
    char *rp = dt_xasprintf("%s/report.json", sd), *pp = dt_xasprintf("%s/plan_v1.json", sd);
    char *h1 = file_hash(rp), *h2 = file_hash(pp);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    close(fd);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    const char *id = strrchr(sd, '/') + 1;
    tu_proc p = tu_run(ENV(dir) "'%s' resume '%s' --review auto < /dev/null", dir, dir, dir,
                       tu_ditto_bin(), id);
    cr_assert_eq(p.status, 3, "resume exit %d\n%s\n%s", p.status, p.out, p.err);
    char *h1b = file_hash(rp), *h2b = file_hash(pp);
    cr_assert_str_eq(h1, h1b, "report.json changed");
    cr_assert_str_eq(h2, h2b, "plan_v1.json changed");
    cJSON *ev = events_of(sd);
    cr_assert_eq(count_type(ev, "session_started"), 1);
    cr_assert_eq(count_type(ev, "session_finished"), 1);
    /* profile and plan were not run again */
    int profiles = 0, plans = 0;
    long last = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "step_started")) {
            profiles += dt_streq(dt_json_str(e, "kind", ""), "profile");
            plans += dt_streq(dt_json_str(e, "kind", ""), "plan");
        }
        long seq = (long)dt_json_num(e, "seq", 0);
        cr_assert_gt(seq, last);
        last = seq;
    }
    cr_assert_eq(profiles, 1);
    cr_assert_eq(plans, 1);
    char *k = dt_xasprintf("%s/kernel_v1.cu", sd);
    cr_assert(dt_file_exists(k), "resumed run did not generate the kernel");
    cJSON_Delete(ev);
    free(k);
    free(h1);
    free(h2);
    free(h1b);
    free(h2b);
    free(rp);
    free(pp);
    tu_proc_free(&p);
    free(sd);
    free(out);
    free(fifo);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(pipeline, hooks_that_loop_or_escape_the_sandbox_should_not_stop_the_run, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    char *loop = tu_write(dir, "loop.lua",
                          "ditto.on('plan', 'before', function(data)\n  while true do end\nend)\n");
    char *osx = tu_write(dir, "escape.lua",
                         "ditto.on('generate', 'before', function(data)\n"
                         "  os.execute('touch /tmp/ditto-sandbox-escaped')\nend)\n");
    unlink("/tmp/ditto-sandbox-escaped");
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --hook '%s' --hook '%s' --json < /dev/null", dir, dir,
                       dir, tu_ditto_bin(), spec, loop, osx);
    cr_assert_eq(p.status, 3, "exit %d\n%s", p.status, p.err);
    cr_assert(strstr(p.out, "loop.lua:2"), "no budget error naming loop.lua:2");
    cr_assert(strstr(p.out, "instruction budget") || strstr(p.out, "budget"),
              "the budget overrun is not reported");
    cr_assert(strstr(p.out, "os is not available in the sandbox"), "no sandbox message");
    cr_assert(!dt_file_exists("/tmp/ditto-sandbox-escaped"), "the sandbox let os.execute run");
    tu_proc_free(&p);
    free(loop);
    free(osx);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* ---- the LLM backend, scripted ---------------------------------------------------------- */

static char *template_src(void)
{
    char *p = dt_xasprintf("%s/kernels/spmv_csr_thread.cu", tu_src_dir());
    char *s = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(s);
    free(p);
    return s;
}

/* The template with `insert` placed before the line starting with `before`. */
static char *with_insert(const char *src, const char *before, const char *insert, int *line)
{
    const char *at = strstr(src, before);
    cr_assert_not_null(at, "'%s' not in the template", before);
    *line = 1;
    for (const char *c = src; c < at; c++)
        *line += *c == '\n';
    dt_buf b = DT_BUF_INIT;
    dt_buf_append(&b, src, (size_t)(at - src));
    dt_buf_puts(&b, insert);
    dt_buf_puts(&b, at);
    return dt_buf_take(&b);
}

static void add_answer(cJSON *t, const char *text)
{
    cJSON *a = cJSON_CreateObject();
    dt_json_set_str(a, "text", text);
    cJSON *u = cJSON_CreateObject();
    dt_json_set_int(u, "input", 1000);
    dt_json_set_int(u, "output", 200);
    dt_json_set_take(a, "usage", u);
    cJSON_AddItemToArray(t, a);
}

Test(pipeline, llm_feedback_should_reach_the_next_prompt_and_the_key_nowhere, .timeout = 300)
{
    char *tpl = template_src();
    int l1 = 0, l2 = 0;
    /* v1: a compile error on a known line (the generated file has the
     * plan's #defines on top: the line numbers are those of the answer). */
    char *bad1 = with_insert(tpl, "    y[row] = DT_STORE", "    acc += not_a_symbol;\n", &l1);
    /* v2: compiles, but breaks a rule: a barrier after a thread-dependent
     * return. */
    char *bad2 = with_insert(tpl, "    y[row] = DT_STORE", "    __syncthreads();\n", &l2);
    cJSON *t = cJSON_CreateArray();
    add_answer(t, "{\"factors\": [\"short regular rows\"], \"tradeoffs\": [\"one candidate\"], "
                  "\"decision\": {\"strategy\": \"csr-thread\", \"params\": {\"BLOCK\": 128}}, "
                  "\"rationale\": [{\"decision\": \"csr-thread\", \"rule\": null, \"text\": "
                  "\"rows are short and even\"}]}");
    char *a1 = dt_xasprintf("```cuda\n%s```\n", bad1);
    char *a2 = dt_xasprintf("```cuda\n%s```\n", bad2);
    char *a3 = dt_xasprintf("Here it is.\n```cuda\n%s```\n", tpl);
    add_answer(t, a1);
    add_answer(t, a2);
    add_answer(t, a3);
    char *ts = cJSON_PrintUnformatted(t);
    lt_server *srv = lt_server_start(ts);
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    setenv(LT_KEY_ENV, LT_KEY, 1);
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --backend llm --endpoint '%s' --model fake-model "
                                "--api-key-env %s -v < /dev/null",
                       dir, dir, dir, tu_ditto_bin(), spec, srv->endpoint, LT_KEY_ENV);
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cJSON *reqs = lt_server_requests(srv);
    cr_assert_eq(cJSON_GetArraySize(reqs), 4, "%d requests", cJSON_GetArraySize(reqs));
    /* The 3rd request (second coder prompt) carries v1's compiler message
     * with its line; the 4th carries v2's rule finding. */
    char *r3 = cJSON_PrintUnformatted(cJSON_GetArrayItem(reqs, 2));
    char *r4 = cJSON_PrintUnformatted(cJSON_GetArrayItem(reqs, 3));
    char want1[64];
    snprintf(want1, sizeof want1, "line %d", l1);
    cr_assert(strstr(r3, "not_a_symbol") && strstr(r3, want1), "prompt 3 lacks the diagnostic");
    cr_assert(strstr(r4, "barrier-divergent"), "prompt 4 lacks the rule finding");
    /* the key was sent ... */
    char *r1 = cJSON_PrintUnformatted(cJSON_GetArrayItem(reqs, 0));
    cr_assert(strstr(r1, LT_KEY), "the key was not sent to the endpoint");
    /* ... and written nowhere */
    cr_assert(!strstr(p.out, LT_KEY) && !strstr(p.err, LT_KEY), "the key leaked to the output");
    tu_proc g = tu_run("grep -rl '%s' '%s' || true", LT_KEY, dir);
    cr_assert_str_eq(g.out, "", "the key was written to: %s", g.out);
    tu_proc_free(&g);
    free(r1);
    free(r3);
    free(r4);
    cJSON_Delete(reqs);
    lt_server_stop(srv);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
    free(ts);
    cJSON_Delete(t);
    free(a1);
    free(a2);
    free(a3);
    free(bad1);
    free(bad2);
    free(tpl);
}

/* issue 37: a model that refuses used to end the run (exit 5). The step's
 * unusable answers (AG_LLM_ATTEMPTS of them) now hand that step to the
 * expert backend. */
Test(pipeline, a_model_refusal_should_fall_back_to_the_expert_for_that_step, .timeout = 300)
{
    cJSON *t = cJSON_CreateArray();
    for (int i = 0; i < 4; i++)
        add_answer(t, "I'm sorry, but I can't help with that request.");
    char *ts = cJSON_PrintUnformatted(t);
    lt_server *srv = lt_server_start(ts);
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    setenv(LT_KEY_ENV, LT_KEY, 1);
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --backend llm --endpoint '%s' --model fake-model "
                                "--api-key-env %s -v < /dev/null",
                       dir, dir, dir, tu_ditto_bin(), spec, srv->endpoint, LT_KEY_ENV);
    /* Plan and code from the expert; compiled; no GPU here for the rest. */
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cr_assert(strstr(p.out, "the expert backend does this step"), "%s", p.out);
    /* the plan's three attempts at least reached the model */
    cr_assert_geq(lt_server_count(srv), 3, "%d requests", lt_server_count(srv));
    lt_server_stop(srv);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
    free(ts);
    cJSON_Delete(t);
}
