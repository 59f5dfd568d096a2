/* test_tmux.c -- the workbench end to end in a real terminal: ditto (the
 * sanitized build) runs inside tmux, keys go in with send-keys, and the
 * screen comes back with capture-pane. No GPU: a live run stops after
 * compiling; the screens that need measurements replay a recorded session. */
#include "tests/tui/tuitest.h"

#include "knowledge/knowledge.h"
#include "sessions/sessions.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Generous: the sanitized ditto and its worker on a loaded 2-core machine. */
#define SLOW 90.0
#define QUICK 30.0

static void setup(void)
{
    if (system("tmux -V >/dev/null 2>&1") != 0)
        cr_skip_test("tmux is not installed");
}

TestSuite(tmux, .init = setup, .fini = tt_fini, .timeout = 600);

/* A problem whose matrix loads in a blink and whose plan fires a shipped
 * rule (short regular rows: csr-thread), reviewed at every step. */
static char *spec(tt_term *t)
{
    return tu_write(t->dir, "spec.json",
                    "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=20000,bw=1\", "
                    "\"dtype\": \"fp32\", \"backend\": \"expert\", \"review\": \"ask\"}\n");
}

static void start_live(tt_term *t, int cols, int rows, const char *extra)
{
    tt_init(t);
    char *sp = spec(t);
    char *args = dt_xasprintf("tui '%s' --session-dir '%s/sessions'", sp, t->dir);
    tt_start(t, cols, rows, "C.UTF-8", extra, args);
    free(args);
    free(sp);
}

static void quit_and_expect(tt_term *t, int status)
{
    char want[32];
    snprintf(want, sizeof want, "DITTO-EXIT %d", status);
    TT_EXPECT(t, want, QUICK);
    TT_EXPECT(t, "TTY-RESTORED", QUICK);
    char *s = tt_screen(t);
    cr_assert_null(strstr(s, "┌─ Steps"), "the workbench is still on the screen:\n%s", s);
    free(s);
    tt_assert_no_sanitizer_reports(t);
}

/* The one session under DIR/sessions, read back. */
static sess_log *the_session(tt_term *t)
{
    char *root = dt_xasprintf("%s/sessions", t->dir);
    sess_info *info = NULL;
    int n = 0;
    dt_err e = {0};
    cr_assert_eq(sess_list(root, &info, &n, NULL, &e), 0, "%s", e.msg);
    cr_assert_eq(n, 1);
    sess_log *log = sess_log_read(root, info[0].id, &e);
    cr_assert_not_null(log, "%s", e.msg);
    free(info);
    free(root);
    return log;
}

static int screen_has_braille(tt_term *t)
{
    char *s = tt_screen(t);
    int n = (int)strlen(s), found = 0;
    for (int i = 0; i < n && !found;) {
        unsigned cp;
        i += tui_utf8_next(s + i, n - i, &cp);
        found = cp > 0x2800 && cp <= 0x28FF;
    }
    free(s);
    return found;
}

/* Does one screen line hold both texts? */
static int same_line(tt_term *t, const char *a, const char *b)
{
    char *s = tt_screen(t);
    int found = 0;
    for (char *line = strtok(s, "\n"); line && !found; line = strtok(NULL, "\n"))
        found = strstr(line, a) && strstr(line, b);
    free(s);
    return found;
}

Test(tmux, the_workbench_should_show_steps_and_source_and_quit_cleanly)
{
    tt_term t;
    start_live(&t, 120, 40, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    TT_EXPECT(&t, "1 profile  v1", QUICK);
    TT_EXPECT(&t, "no GPU: compile-only", QUICK);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    /* the teaching path, live: the plan names its rule; Enter opens it */
    TT_EXPECT(&t, "rule.spmv.ell-baked-for-small-even-rows", QUICK);
    tt_keys(&t, "Tab");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "Knowledge: rule.spmv.ell-baked-for-small-even-rows", QUICK);
    TT_EXPECT(&t, "Small matrix, short rows of nearly equal", QUICK);
    tt_keys(&t, "Escape");
    cr_assert(tt_wait_gone(&t, "Knowledge: rule.spmv", QUICK));
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review check v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review generate v1", SLOW);
    /* the source pane shows the kernel the generator wrote */
    TT_EXPECT(&t, "kernel v1 (step 4)", QUICK);
    TT_EXPECT(&t, "#define BLOCK 128", QUICK);
    tt_keys(&t, "A");
    TT_EXPECT(&t, "finished (exit 3)", SLOW);
    TT_EXPECT(&t, "compiled without a GPU", QUICK);
    /* at 120x40 the performance pane has its own place; it says which GPU
     * it assumes, and that measuring needs one */
    TT_EXPECT(&t, "Roofline & occupancy", QUICK);
    TT_EXPECT(&t, "GPU assumed: NVIDIA H200 (no GPU", QUICK);
    TT_EXPECT(&t, "theoretical 100%", QUICK);
    /* the focus is on the reasoning (Enter on the rule above): three Tabs
     * on is the performance pane */
    tt_keys(&t, "Tab Tab Tab");
    tt_keys(&t, "G");
    TT_EXPECT(&t, "no GPU: verification and", QUICK);
    TT_EXPECT(&t, "Roofline: NVIDIA H200 (assumed), fp32", QUICK);
    /* the predicted point from the PatternReport, and no tune on offer */
    TT_EXPECT(&t, "predicted AI", QUICK);
    char *scr = tt_screen(&t);
    cr_assert_null(strstr(scr, "t tune"), "no GPU: no tune on offer:\n%s", scr);
    free(scr);
    tt_keys(&t, "t");
    TT_EXPECT(&t, "tuning times kernels on a GPU, and this machine has none", QUICK);
    /* H: the figures for another GPU, named */
    tt_keys(&t, "H");
    TT_EXPECT(&t, "GPU for the figures", QUICK);
    tt_type(&t, "a100-80gb-sxm");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "the figures assume NVIDIA A100", QUICK);
    TT_EXPECT(&t, "Roofline: NVIDIA A100", QUICK);
    tt_keys(&t, "g");
    TT_EXPECT(&t, "(picked with H)", QUICK);
    tt_keys(&t, "H");
    tt_type(&t, "no-such-gpu");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "no-such-gpu", QUICK);
    tt_keys(&t, "q");
    quit_and_expect(&t, 0);
    tt_stop(&t);
}

Test(tmux, a_rejection_should_rerun_the_step_with_the_reason)
{
    tt_term t;
    start_live(&t, 120, 40, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review check v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review generate v1", SLOW);
    tt_keys(&t, "r");
    TT_EXPECT(&t, "Reject -- reason for the agent:", QUICK);
    tt_type(&t, "please try a smaller block");
    TT_EXPECT(&t, "please try a smaller block", QUICK);
    tt_keys(&t, "Enter");
    /* a new attempt at the same step, with the reason in its reasoning */
    TT_EXPECT(&t, "review generate v2", SLOW);
    TT_EXPECT(&t, "5 generate v2", QUICK);
    TT_EXPECT(&t, "✗  4 generate v1", QUICK);
    TT_EXPECT(&t, "rejected the previous attempt: please try a smaller block", QUICK);
    /* quitting while the run waits: asked first, then the stop is recorded */
    tt_keys(&t, "q");
    TT_EXPECT(&t, "stop it and quit? (y/n)", QUICK);
    tt_keys(&t, "y");
    quit_and_expect(&t, 4);
    sess_log *log = the_session(&t);
    int found = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events)
    {
        if (dt_streq(dt_json_str(ev, "type", ""), "decision") &&
            dt_streq(dt_json_str(ev, "reason", ""), "please try a smaller block"))
            found = dt_streq(dt_json_str(ev, "by", ""), "person");
    }
    cr_assert(found, "the session records the person's rejection");
    cr_assert(log->finished, "a stop at a gate ends the session properly");
    sess_log_free(log);
    tt_stop(&t);
}

Test(tmux, an_edit_in_the_editor_should_make_a_new_version_and_a_diff)
{
    tt_term t;
    tt_init(&t);
    char *ed = tu_write(t.dir, "edit.sh",
                        "#!/bin/sh\nsed -i '1i /* reviewed by the test */' \"$1\"\n");
    char *extra = dt_xasprintf("chmod +x '%s'; export EDITOR='%s'; unset VISUAL", ed, ed);
    char *sp = spec(&t);
    char *args = dt_xasprintf("tui '%s' --session-dir '%s/sessions'", sp, t.dir);
    tt_start(&t, 120, 40, "C.UTF-8", extra, args);
    free(args);
    free(sp);
    free(extra);
    free(ed);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review check v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review generate v1", SLOW);
    tt_keys(&t, "e");
    /* back from the editor: a new version, diffed against the one before */
    TT_EXPECT(&t, "kernel v1 edited (step 4) against v1 (step 4): +1 -0", SLOW);
    TT_EXPECT(&t, "v1 edited vs v1", QUICK);
    TT_EXPECT(&t, "    1 +/* reviewed by the test */", QUICK);
    TT_EXPECT(&t, "✎  4 generate v1", QUICK);
    /* the edit is checked and compiled like any version */
    TT_EXPECT(&t, "review compile v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "finished (exit 3)", SLOW);
    tt_keys(&t, "q");
    quit_and_expect(&t, 0);
    sess_log *log = the_session(&t);
    char *path = dt_xasprintf("%s/kernel_v1.cu", log->dir);
    char *src = dt_read_file(path, NULL, NULL);
    cr_assert_not_null(src);
    cr_assert(dt_startswith(src, "/* reviewed by the test */"), "the session keeps the edit");
    free(src);
    free(path);
    sess_log_free(log);
    tt_stop(&t);
}

Test(tmux, a_resize_should_lay_the_panes_out_again)
{
    tt_term t;
    start_live(&t, 120, 40, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    TT_EXPECT(&t, "┌─ Diagnostics", QUICK); /* 120 x 40: a place of its own */
    tt_resize(&t, 80, 24);
    cr_assert(tt_wait_gone(&t, "┌─ Diagnostics", QUICK), "80 x 24 shares its slot");
    TT_EXPECT(&t, "┌─ Steps", QUICK);
    TT_EXPECT(&t, "┌─ Source", QUICK);
    TT_EXPECT(&t, " a approve  r reject", QUICK);
    /* Tab brings the hidden pane forward in the shared slot */
    tt_keys(&t, "Tab Tab Tab");
    TT_EXPECT(&t, "┌─ Diagnostics", QUICK);
    cr_assert(tt_wait_gone(&t, "┌─ Source", QUICK));
    /* wide: every pane at once, the roofline on the right */
    tt_resize(&t, 200, 60);
    TT_EXPECT(&t, "┌─ Roofline & occupancy", QUICK);
    TT_EXPECT(&t, "┌─ Source", QUICK);
    TT_EXPECT(&t, "┌─ Diagnostics", QUICK);
    TT_EXPECT(&t, "┌─ Reasoning", QUICK);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    quit_and_expect(&t, 4);
    tt_stop(&t);
}

Test(tmux, an_llm_stream_should_flow_into_the_reasoning_pane_in_order)
{
    /* The fake OpenAI server streams 90 numbered words, then stalls with
     * the connection open: the plan step stays running with exactly that
     * text, each token having been drawn as it came (the pane re-wraps only
     * the paragraph a token extends). */
    tt_term t;
    tt_init(&t);
    dt_buf tr = DT_BUF_INIT;
    dt_buf_puts(&tr, "[{\"text\": [");
    for (int i = 1; i <= 90; i++)
        dt_buf_printf(&tr, "%s\"w%02d%s\"", i > 1 ? ", " : "", i, i % 30 == 0 ? "\\n" : " ");
    dt_buf_puts(&tr, "], \"delay\": 0.01, \"stall_after\": 90, \"stall_s\": 120}]");
    char *tpath = tu_write(t.dir, "transcript.json", tr.data);
    dt_buf_free(&tr);
    char *extra = dt_xasprintf(
        "export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1\n"
        "python3 '%s/tests/llm/fake_llm_server.py' '%s' llm.log >port 2>llm.err &\n"
        "echo $! >llm.pid\n"
        "for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done\n"
        "PORT=$(head -n 1 port)",
        tu_src_dir(), tpath);
    char *sp = spec(&t);
    char *args = dt_xasprintf("tui '%s' --review auto --backend llm --api openai --endpoint "
                              "\"http://127.0.0.1:$PORT/v1\" --model fake-model --no-session",
                              sp);
    tt_start(&t, 120, 40, "C.UTF-8", extra, args);
    free(args);
    free(sp);
    free(extra);
    free(tpath);
    TT_EXPECT(&t, "| llm fake-model |", SLOW);
    TT_EXPECT(&t, "w90", SLOW);
    char *scr = tt_screen(&t);
    const char *prev = scr;
    for (int i = 1; i <= 90; i++) {
        char w[8];
        snprintf(w, sizeof w, "w%02d", i);
        const char *at = strstr(scr, w);
        cr_assert_not_null(at, "%s is missing:\n%s", w, scr);
        cr_assert_null(strstr(at + 3, w), "%s twice:\n%s", w, scr);
        cr_assert_geq(at, prev, "%s out of order:\n%s", w, scr);
        prev = at;
    }
    free(scr);
    TT_EXPECT(&t, "| running plan", QUICK);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    quit_and_expect(&t, 4);
    char *pidf = dt_xasprintf("%s/llm.pid", t.dir);
    char *pid = dt_read_file(pidf, NULL, NULL);
    if (pid && atoi(pid) > 0)
        kill(atoi(pid), SIGTERM);
    free(pid);
    free(pidf);
    tt_stop(&t);
}

static void start_replay(tt_term *t, int cols, int rows, const char *extra, int *nev)
{
    tt_init(t);
    char *root = dt_xasprintf("%s/sessions", t->dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    char *id = tt_write_session(root, nev);
    char *args = dt_xasprintf("replay %s --session-dir '%s'", id, root);
    tt_start(t, cols, rows, "C.UTF-8", extra, args);
    free(args);
    free(id);
    free(root);
}

Test(tmux, a_replay_should_show_measurements_the_roofline_and_occupancy)
{
    tt_term t;
    int nev;
    start_replay(&t, 200, 60, NULL, &nev);
    char at[64];
    snprintf(at, sizeof at, "event 0/%d", nev);
    TT_EXPECT(&t, at, SLOW);
    tt_keys(&t, "'$'");
    snprintf(at, sizeof at, "event %d/%d", nev, nev);
    TT_EXPECT(&t, at, QUICK);
    TT_EXPECT(&t, "Roofline: NVIDIA H200, fp32", QUICK);
    cr_assert(screen_has_braille(&t), "the roofline is drawn in braille");
    TT_EXPECT(&t, "algorithm, CSR_ALG1", QUICK);
    cr_assert(same_line(&t, "v1 ", "12.34"), "v1's time in the table");
    cr_assert(same_line(&t, "v2 ", "8.76"), "v2's time in the table");
    TT_EXPECT(&t, "achieved     88%", QUICK);
    TT_EXPECT(&t, "limiter     registers", QUICK);
    TT_EXPECT(&t, "1 v1 ", QUICK);
    TT_EXPECT(&t, "3 cuSPARSE", QUICK);
    /* wide: the two versions side by side */
    cr_assert(same_line(&t, "#define BLOCK 256", "#define BLOCK 128"));
    /* stepping back and forth */
    tt_keys(&t, ",");
    snprintf(at, sizeof at, "event %d/%d", nev - 1, nev);
    TT_EXPECT(&t, at, QUICK);
    tt_keys(&t, "0");
    snprintf(at, sizeof at, "event 0/%d", nev);
    TT_EXPECT(&t, at, QUICK);
    TT_EXPECT(&t, "starting...", QUICK);
    tt_keys(&t, "'>'");
    TT_EXPECT(&t, "1 profile  v1", QUICK);
    cr_assert(!same_line(&t, "2 plan", "v1"), "one step at a time");
    tt_keys(&t, "'$'");
    /* a diagnostic's Enter shows its line in the version it is about */
    tt_keys(&t, "Tab Tab Tab");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "kernel v1 (step 4)", QUICK);
    /* the teaching path offline: select the plan, open its rule (the jump
     * left the focus on the source: three Tabs on is the steps pane) */
    tt_keys(&t, "Tab Tab Tab");
    tt_keys(&t, "g Down Tab Enter");
    TT_EXPECT(&t, "Knowledge: rule.spmv.sell16-for-regular-rows", QUICK);
    tt_keys(&t, "Escape");
    cr_assert(tt_wait_gone(&t, "Knowledge: rule.spmv", QUICK));
    /* any two versions: the picker, older first */
    tt_keys(&t, "v");
    TT_EXPECT(&t, "Compare versions: pick the older one", QUICK);
    tt_keys(&t, "Down Enter");
    TT_EXPECT(&t, "Compare versions: pick the newer one", QUICK);
    tt_keys(&t, "Down Enter");
    TT_EXPECT(&t, "v2 vs v1 (picked)", QUICK);
    /* search in the focused pane */
    tt_keys(&t, "Tab");
    tt_keys(&t, "/");
    TT_EXPECT(&t, "Search:", QUICK);
    tt_type(&t, "no-such-text");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "not found in Source: no-such-text", QUICK);
    /* help names the keys of the mode */
    tt_keys(&t, "?");
    TT_EXPECT(&t, "next / previous event", QUICK);
    TT_EXPECT(&t, "Tab, Shift-Tab", QUICK);
    tt_keys(&t, "Escape");
    cr_assert(tt_wait_gone(&t, "next / previous event", QUICK));
    tt_keys(&t, "q");
    quit_and_expect(&t, 0);
    tt_stop(&t);
}

static const char entry_id[] = "strategy.spmv.test-banded-csr-thread";

Test(tmux, the_knowledge_screen_should_approve_a_proposal_with_a_note)
{
    tt_term t;
    tt_init(&t);
    /* a proposal in the user knowledge base the workbench will open */
    char *udir = dt_xasprintf("%s/data/ditto/knowledge", t.dir);
    dt_buf probs = DT_BUF_INIT;
    dt_err e = {0};
    kb *k = kb_open(NULL, udir, &probs, &e);
    cr_assert_not_null(k, "%s", e.msg);
    cJSON *entry = cJSON_Parse(
        "{\"id\": \"strategy.spmv.test-banded-csr-thread\", \"kind\": \"strategy\","
        " \"title\": \"Banded rows: one thread per row\", \"applies_to\": {\"op\": [\"spmv\"]},"
        " \"content\": \"A test proposal.\", \"parameters\": {},"
        " \"evidence\": [{\"session\": \"20261129-000000-test\", \"gpu\": \"NVIDIA H200\","
        " \"matrix\": \"gen:banded:rows=20000,bw=1\", \"speedup\": 1.93,"
        " \"features\": {\"row_mean\": 3}}]}");
    cr_assert_eq(kb_propose(k, entry, &e), 0, "%s", e.msg);
    cJSON_Delete(entry);
    /* the shipped base holds proposals of its own; ours sorts last */
    cJSON *props = kb_list(k, NULL, "proposed");
    int nprop = cJSON_GetArraySize(props);
    cr_assert_str_eq(dt_json_str(cJSON_GetArrayItem(props, nprop - 1), "id", ""), entry_id);
    cJSON_Delete(props);
    kb_close(k);
    dt_buf_free(&probs);
    int nev;
    char *root = dt_xasprintf("%s/sessions", t.dir);
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    char *id = tt_write_session(root, &nev);
    char *args = dt_xasprintf("replay %s --session-dir '%s'", id, root);
    tt_start(&t, 120, 40, "C.UTF-8", "export USER=tester", args);
    free(args);
    free(id);
    free(root);
    TT_EXPECT(&t, "event 0/", SLOW);
    tt_keys(&t, "k");
    char want[64];
    snprintf(want, sizeof want, "Knowledge review: %d proposed", nprop);
    TT_EXPECT(&t, want, QUICK);
    tt_keys(&t, "G");
    TT_EXPECT(&t, "│ strategy.spmv.test-banded-csr-thread", QUICK);
    TT_EXPECT(&t, "1.93x the best cuSPARSE on NVIDIA H200", QUICK);
    TT_EXPECT(&t, "20261129-000000-test", QUICK);
    /* a rejection without a note is refused */
    tt_keys(&t, "r");
    TT_EXPECT(&t, "Reject -- note (required):", QUICK);
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "a rejection needs a note", QUICK);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "Approve -- note (optional):", QUICK);
    tt_type(&t, "checked on banded matrices");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "approved strategy.spmv.test-banded-csr-thread", QUICK);
    snprintf(want, sizeof want, "Knowledge review: %d proposed", nprop - 1);
    TT_EXPECT(&t, want, QUICK);
    tt_keys(&t, "Escape");
    tt_keys(&t, "q");
    quit_and_expect(&t, 0);
    k = kb_open(NULL, udir, &probs, &e);
    cr_assert_not_null(k);
    const cJSON *got = kb_get(k, entry_id);
    cr_assert_not_null(got);
    cr_assert_str_eq(dt_json_str(got, "status", ""), "approved");
    const cJSON *rv = cJSON_GetObjectItem(got, "review");
    cr_assert_str_eq(dt_json_str(rv, "reviewer", ""), "tester");
    cr_assert_str_eq(dt_json_str(rv, "note", ""), "checked on banded matrices");
    kb_close(k);
    dt_buf_free(&probs);
    free(udir);
    tt_stop(&t);
}

/* A descendant of pid whose command line holds "worker", or 0. */
static int worker_of(int pid)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int found = 0;
    while (d && (de = readdir(d)) != NULL && !found) {
        int p = atoi(de->d_name);
        if (p <= 0)
            continue;
        char path[64];
        snprintf(path, sizeof path, "/proc/%d/cmdline", p);
        size_t len = 0;
        char *cmd = dt_read_file(path, &len, NULL);
        if (cmd == NULL)
            continue;
        for (size_t i = 0; i + 1 < len; i++)
            if (cmd[i] == '\0')
                cmd[i] = ' ';
        if (strstr(cmd, "ditto") && strstr(cmd, " worker")) {
            /* walk up to see whether pid is an ancestor */
            int q = p;
            for (int hop = 0; hop < 4 && q > 1 && !found; hop++) {
                snprintf(path, sizeof path, "/proc/%d/stat", q);
                char *st = dt_read_file(path, NULL, NULL);
                char *rp = st ? strrchr(st, ')') : NULL;
                int ppid = 0;
                char state;
                if (rp == NULL || sscanf(rp + 2, "%c %d", &state, &ppid) != 2)
                    ppid = 0;
                free(st);
                if (ppid == pid)
                    found = p;
                q = ppid;
            }
        }
        free(cmd);
    }
    if (d)
        closedir(d);
    return found;
}

Test(tmux, a_killed_worker_and_a_signal_should_leave_a_usable_terminal)
{
    tt_term t;
    start_live(&t, 120, 40, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    int pid = tt_ditto_pid(&t);
    cr_assert_gt(pid, 0);
    int w = worker_of(pid);
    cr_assert_gt(w, 0, "no worker under ditto %d", pid);
    /* a worker dying under the workbench is the pool's business */
    cr_assert_eq(kill(w, SIGKILL), 0);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    cr_assert_eq(tt_ditto_pid(&t), pid, "the workbench survived its worker");
    /* a kill of ditto itself: the handler restores the terminal, then dies */
    cr_assert_eq(kill(pid, SIGTERM), 0);
    TT_EXPECT(&t, "DITTO-EXIT 143", SLOW);
    TT_EXPECT(&t, "TTY-RESTORED", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(tmux, an_abort_should_restore_the_terminal_and_still_dump)
{
    tt_term t;
    int nev;
    start_replay(&t, 100, 30, NULL, &nev);
    TT_EXPECT(&t, "event 0/", SLOW);
    int pid = tt_ditto_pid(&t);
    cr_assert_gt(pid, 0);
    cr_assert_eq(kill(pid, SIGABRT), 0);
    TT_EXPECT(&t, "DITTO-EXIT 134", QUICK);
    TT_EXPECT(&t, "TTY-RESTORED", QUICK);
    tt_stop(&t);
}

Test(tmux, ctrl_c_should_restore_the_terminal)
{
    tt_term t;
    int nev;
    start_replay(&t, 100, 30, NULL, &nev);
    TT_EXPECT(&t, "event 0/", SLOW);
    tt_keys(&t, "C-c");
    TT_EXPECT(&t, "DITTO-EXIT 130", QUICK);
    TT_EXPECT(&t, "TTY-RESTORED", QUICK);
    tt_stop(&t);
}

/* Any SGR colour (30-38, 40-48, 90-107) in a capture made with -e. */
static int screen_has_colour(tt_term *t)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s capture-pane -e -p -t T", t->sock);
    int found = 0;
    for (const char *c = p.out; *c && !found; c++) {
        if (c[0] != '\033' || c[1] != '[')
            continue;
        const char *q = c + 2;
        while (*q && *q != 'm' && !found) {
            int v = atoi(q);
            found = (v >= 30 && v <= 38) || (v >= 40 && v <= 48) || (v >= 90 && v <= 107);
            while (*q >= '0' && *q <= '9')
                q++;
            if (*q == ';')
                q++;
            else if (*q != 'm')
                break;
        }
    }
    tu_proc_free(&p);
    return found;
}

Test(tmux, ascii_only_terminals_should_get_an_ascii_workbench)
{
    tt_term t;
    int nev;
    tt_init(&t);
    char *root = dt_xasprintf("%s/sessions", t.dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    char *id = tt_write_session(root, &nev);
    char *args = dt_xasprintf("replay %s --session-dir '%s'", id, root);
    tt_start(&t, 200, 60, "C", "export NO_COLOR=1", args);
    free(args);
    free(id);
    free(root);
    TT_EXPECT(&t, "event 0/", SLOW);
    tt_keys(&t, "'$'");
    /* NO_COLOR: the roles fall back to bold, reverse and underline */
    TT_EXPECT(&t, "Roofline", QUICK);
    cr_assert(!screen_has_colour(&t), "colours despite NO_COLOR");
    TT_EXPECT(&t, "Roofline: NVIDIA H200, fp32", QUICK);
    TT_EXPECT(&t, "algorithm, CSR_ALG1", QUICK);
    cr_assert(!screen_has_braille(&t), "no braille without UTF-8");
    /* the steps use ASCII glyphs */
    TT_EXPECT(&t, "+  1 profile", QUICK);
    tt_keys(&t, "q");
    quit_and_expect(&t, 0);
    tt_stop(&t);
}

Test(tmux, ditto_alone_should_open_the_workbench_on_the_default_problem)
{
    tt_term t;
    tt_init(&t);
    tt_start(&t, 120, 40, "C.UTF-8", NULL, "");
    /* the matrix path shortened with an ellipsis where the row is short */
    TT_EXPECT(&t, "spmv fp32 gen:rmat:rows=1M", SLOW);
    TT_EXPECT(&t, "profile  v1", SLOW);
    /* quitting while the profile still runs: asked, then abandoned */
    tt_keys(&t, "q");
    TT_EXPECT(&t, "stop it and quit? (y/n)", QUICK);
    tt_keys(&t, "n");
    cr_assert(tt_wait_gone(&t, "(y/n)", QUICK));
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", SLOW);
    TT_EXPECT(&t, "TTY-RESTORED", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

/* ---- without a terminal ---------------------------------------------------------- */

Test(tmux, without_a_terminal_the_commands_should_say_what_to_use)
{
    char *dir = tu_tmpdir();
    tu_proc p = tu_run("XDG_DATA_HOME='%s' '%s' tui </dev/null", dir, tu_ditto_bin());
    cr_assert_eq(p.status, 2);
    cr_assert_not_null(strstr(p.err, "give a problem spec"), "%s", p.err);
    tu_proc_free(&p);
    char *sp = tu_write(dir, "spec.json", "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=99\"}");
    p = tu_run("XDG_DATA_HOME='%s' '%s' tui '%s' </dev/null", dir, tu_ditto_bin(), sp);
    cr_assert_eq(p.status, 2);
    cr_assert_not_null(strstr(p.err, "needs a terminal"), "%s", p.err);
    cr_assert_not_null(strstr(p.err, "ditto run"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' replay nosuch --session-dir '%s' </dev/null", tu_ditto_bin(), dir);
    cr_assert_eq(p.status, 66);
    cr_assert_not_null(strstr(p.err, "no session 'nosuch'"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' replay", tu_ditto_bin());
    cr_assert_eq(p.status, 2);
    tu_proc_free(&p);
    p = tu_run("'%s' --help", tu_ditto_bin());
    cr_assert_not_null(strstr(p.out, "  tui "));
    cr_assert_not_null(strstr(p.out, "  replay "));
    tu_proc_free(&p);
    p = tu_run("'%s' tui --help", tu_ditto_bin());
    cr_assert_eq(p.status, 0);
    cr_assert_not_null(strstr(p.out, "usage: ditto tui SPEC.json"));
    tu_proc_free(&p);
    /* `ditto` alone in a pipe: the old profile of the default problem, said so */
    p = tu_run("XDG_DATA_HOME='%s' '%s' </dev/null | cat", dir, tu_ditto_bin());
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert_not_null(strstr(p.out, "no command and no terminal"), "%s", p.out);
    cr_assert_not_null(strstr(p.out, "gen:rmat:rows=1M,nnz=16M,seed=1"));
    tu_proc_free(&p);
    free(sp);
    tu_rmtree(dir);
    free(dir);
}
