/* test_review.c -- review in the workbench: undo within the window before
 * the next step starts, the multi-line reason editor (never cut at 255
 * characters), refused edits kept for the next e, and per-hunk decisions
 * (tui_hunks_apply, and in tmux). */
#include "tests/tui/tuitest.h"

#include "sessions/sessions.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOW  90.0
#define QUICK 30.0

Test(hunks, rejected_hunks_should_keep_their_old_lines_and_accepted_ones_their_new)
{
    const char *a = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n";
    const char *b = "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\nELEVEN\nzwolf\n";
    cr_assert_eq(tui_hunks_count(a, b), 2, "two changes 9 lines apart: two hunks");
    unsigned char none[2] = {0, 0}, first[2] = {1, 0}, second[2] = {0, 1}, both[2] = {1, 1};
    char *t = tui_hunks_apply(a, b, none, 2);
    cr_assert_str_eq(t, b, "nothing rejected: the new text");
    free(t);
    t = tui_hunks_apply(a, b, first, 2);
    cr_assert_str_eq(t,
                     "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\nELEVEN\nzwolf\n");
    free(t);
    t = tui_hunks_apply(a, b, second, 2);
    cr_assert_str_eq(t, "ONE\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven\n");
    free(t);
    t = tui_hunks_apply(a, b, both, 2);
    cr_assert_str_eq(t, a, "everything rejected: the old text");
    free(t);
    /* without a final newline the new text's ending stays */
    t = tui_hunks_apply("x\ny", "x\nz", none, 0);
    cr_assert_str_eq(t, "x\nz");
    free(t);
    cr_assert_eq(tui_hunks_count(a, a), 0);
}

static void setup(void)
{
    if (system("tmux -V >/dev/null 2>&1") != 0)
        cr_skip_test("tmux is not installed");
}

TestSuite(review, .init = setup, .fini = tt_fini);

static void start_live(tt_term *t, const char *extra)
{
    if (t->dir[0] == '\0')
        tt_init(t);
    char *sp = tu_write(t->dir, "spec.json",
                        "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=20000,bw=1\", "
                        "\"dtype\": \"fp32\", \"backend\": \"expert\", \"review\": \"ask\"}\n");
    char *args = dt_xasprintf("tui '%s' --session-dir '%s/sessions'", sp, t->dir);
    tt_start(t, 120, 40, "C.UTF-8", extra, args);
    free(args);
    free(sp);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

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

Test(review, u_should_take_a_decision_back_before_the_next_step_starts)
{
    tt_term t;
    memset(&t, 0, sizeof t);
    start_live(&t, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "approving (step 1) in", QUICK);
    TT_EXPECT(&t, "u undoes", QUICK);
    tt_keys(&t, "u");
    TT_EXPECT(&t, "undone: step 1 awaits your review again", QUICK);
    /* past the window: nothing was sent, the step still waits */
    nap_ms((3 + 1) * 1000);
    char *s = tt_screen(&t);
    cr_assert_not_null(strstr(s, "review profile v1"), "%s", s);
    cr_assert_null(strstr(s, "plan     v1"), "no plan step started:\n%s", s);
    free(s);
    /* with nothing waiting, u says what it does */
    tt_keys(&t, "u");
    TT_EXPECT(&t, "nothing to undo: a decision can be taken back", QUICK);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    sess_log *log = the_session(&t);
    int decisions = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events) decisions +=
        dt_streq(dt_json_str(ev, "type", ""), "decision") && dt_json_num(ev, "step", 0) == 1;
    cr_assert_eq(decisions, 1, "the undone approval was never recorded; the second was");
    sess_log_free(log);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(review, a_long_reason_of_many_lines_should_reach_the_agent_whole)
{
    tt_term t;
    memset(&t, 0, sizeof t);
    start_live(&t, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, "A");
    TT_EXPECT(&t, "approving this and every later step", QUICK);
    tt_keys(&t, "u");
    TT_EXPECT(&t, "undone", QUICK);
    tt_keys(&t, "r");
    TT_EXPECT(&t, "Reject: your reason goes back to the agent", QUICK);
    /* 320 characters, then a second line */
    char reason[400];
    int n = 0;
    for (int i = 0; n < 320; i++)
        n += snprintf(reason + n, sizeof reason - (size_t)n, "word%03d ", i);
    reason[320] = '\0';
    tt_type(&t, reason);
    tt_keys(&t, "C-j");
    tt_type(&t, "the second line");
    TT_EXPECT(&t, "the second line", QUICK);
    TT_EXPECT(&t, "336/16384 characters", QUICK);
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "rejecting (step 1)", QUICK);
    TT_EXPECT(&t, "profile  v2", SLOW);
    TT_EXPECT(&t, "review profile v2", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    sess_log *log = the_session(&t);
    char *want = dt_xasprintf("%s\nthe second line", reason);
    int found = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events)
    {
        if (dt_streq(dt_json_str(ev, "type", ""), "decision") &&
            dt_streq(dt_json_str(ev, "decision", ""), "reject"))
            found = dt_streq(dt_json_str(ev, "reason", ""), want);
    }
    cr_assert(found, "the session keeps all 336 characters of the reason, both lines");
    free(want);
    sess_log_free(log);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(review, a_refused_edit_should_come_back_at_the_next_e)
{
    tt_term t;
    tt_init(&t);
    /* the first edit breaks the plan's JSON; every edit is copied aside */
    char *ed = tu_write(t.dir, "edit.sh",
                        "#!/bin/sh\n"
                        "n=$(ls \"$(dirname \"$0\")\"/seen.* 2>/dev/null | wc -l)\n"
                        "cp \"$1\" \"$(dirname \"$0\")/seen.$n\"\n"
                        "[ \"$n\" = 0 ] && sed -i '1i this is not JSON' \"$1\"\n"
                        "exit 0\n");
    char *extra = dt_xasprintf("chmod +x '%s'; export EDITOR='%s'; unset VISUAL", ed, ed);
    start_live(&t, extra);
    free(extra);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    tt_keys(&t, "e");
    TT_EXPECT(&t, "the edit was refused", QUICK);
    TT_EXPECT(&t, "e reopens your edit", QUICK);
    tt_keys(&t, "e");
    TT_EXPECT(&t, "the edit was refused", QUICK);
    char *p1 = dt_xasprintf("%s/seen.1", t.dir);
    char *second = dt_read_file(p1, NULL, NULL);
    cr_assert_not_null(second, "the editor ran twice");
    cr_assert_not_null(strstr(second, "this is not JSON"),
                       "the second e opened the refused "
                       "edit, not the agent's plan:\n%s",
                       second);
    free(second);
    free(p1);
    free(ed);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(review, the_palette_should_switch_the_backend_for_the_next_steps_and_record_it)
{
    tt_term t;
    memset(&t, 0, sizeof t);
    start_live(&t, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, ":");
    TT_EXPECT(&t, ": model NAME | endpoint URL | backend expert|llm", QUICK);
    tt_type(&t, "backend llm");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "no LLM configured: start with --backend llm", QUICK);
    tt_keys(&t, ":");
    tt_type(&t, "backend expert");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "backend is expert from the next step on (recorded in the session)", QUICK);
    tt_keys(&t, ":");
    tt_type(&t, "colour blue");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "'colour' cannot be switched (backend, model or endpoint)", QUICK);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    sess_log *log = the_session(&t);
    int found = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events) found +=
        dt_streq(dt_json_str(ev, "setting", ""), "backend") &&
        dt_streq(dt_json_str(ev, "value", ""), "expert") &&
        dt_streq(dt_json_str(ev, "by", ""), "person");
    cr_assert_eq(found, 1, "the session records the one switch that was made");
    sess_log_free(log);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

/* The workbench on an LLM run against the fake server with transcript
 * (JSON text). */
static void start_llm(tt_term *t, const char *transcript, const char *review)
{
    tt_init(t);
    char *tpath = tu_write(t->dir, "transcript.json", transcript);
    char *extra =
        dt_xasprintf("export no_proxy=127.0.0.1 NO_PROXY=127.0.0.1\n"
                     "python3 '%s/tests/llm/fake_llm_server.py' '%s' llm.log >port 2>llm.err &\n"
                     "echo $! >llm.pid\n"
                     "for i in $(seq 100); do [ -s port ] && break; sleep 0.1; done\n"
                     "PORT=$(head -n 1 port)",
                     tu_src_dir(), tpath);
    char *sp = tu_write(t->dir, "spec.json",
                        "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=20000,bw=1\", "
                        "\"dtype\": \"fp32\", \"backend\": \"llm\"}\n");
    char *args = dt_xasprintf("tui '%s' --review %s --backend llm --api openai --endpoint "
                              "\"http://127.0.0.1:$PORT/v1\" --model fake-model --no-session",
                              sp, review);
    tt_start(t, 160, 40, "C.UTF-8", extra, args);
    free(args);
    free(sp);
    free(extra);
    free(tpath);
}

static void stop_llm(tt_term *t)
{
    char *pidf = dt_xasprintf("%s/llm.pid", t->dir);
    char *pid = dt_read_file(pidf, NULL, NULL);
    if (pid && atoi(pid) > 0)
        kill(atoi(pid), SIGTERM);
    free(pid);
    free(pidf);
    tt_stop(t);
}

Test(review, a_retry_should_count_down_and_a_fallback_say_why)
{
    tt_term t;
    start_llm(&t,
              "[{\"fault\": \"rate_limit\", \"retry_after\": 4},"
              " {\"text\": \"after the wait\", \"delay\": 0.2}]",
              "ask");
    TT_EXPECT(&t, "| llm fake-model |", SLOW);
    TT_EXPECT(&t, "review profile v1", SLOW);
    char *s0 = tt_screen(&t);
    cr_assert_null(strstr(s0, "streaming"), "the profiler is no LLM stream:\n%s", s0);
    free(s0);
    /* the palette: another model for the next steps */
    tt_keys(&t, ":");
    tt_type(&t, "model second-model");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "| llm second-model |", QUICK);
    tt_keys(&t, "a");
    /* the wait the server asked for, counted down on the status row */
    TT_EXPECT(&t, "LLM rate_limited, retry 2 in", SLOW);
    cr_assert(tt_wait_gone(&t, "retry 2 in", SLOW), "the countdown ends with the answer");
    /* that answer is no plan, and the send-back finds the endpoint done
     * (the transcript is exhausted): the expert takes over, and says why */
    TT_EXPECT(&t, "fell back to expert: HTTP 400", SLOW);
    char *logp = dt_xasprintf("%s/llm.log", t.dir);
    char *reqs = dt_read_file(logp, NULL, NULL);
    cr_assert(reqs && strstr(reqs, "second-model") && !strstr(reqs, "fake-model"),
              "every request after the switch asked for second-model:\n%s", reqs ? reqs : "");
    free(reqs);
    free(logp);
    TT_EXPECT(&t, "review plan v1", SLOW);
    char *s = tt_screen(&t);
    cr_assert_null(strstr(s, "llm fake-model"), "the LLM is no longer named:\n%s", s);
    free(s);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    stop_llm(&t);
}

Test(review, x_should_mark_a_hunk_of_the_kernel_under_review)
{
    tt_term t;
    memset(&t, 0, sizeof t);
    start_live(&t, NULL);
    TT_EXPECT(&t, "review profile v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review plan v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review check v1", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "review generate v1", SLOW);
    /* v1 has nothing before it: no hunks to mark */
    tt_keys(&t, "Tab Tab");
    tt_keys(&t, "x");
    TT_EXPECT(&t, "x marks hunks of a kernel awaiting review", QUICK);
    tt_keys(&t, "r");
    TT_EXPECT(&t, "Reject: your reason goes back to the agent", QUICK);
    tt_type(&t, "use two lanes");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "review generate v2", SLOW);
    TT_EXPECT(&t, "kernel v2 (step 5) against v1 (step 4)", QUICK);
    tt_keys(&t, "x");
    TT_EXPECT(&t, "hunk 1 of 1 rejected", QUICK);
    TT_EXPECT(&t, "v2 vs v1, 1 of 1 hunks rejected", QUICK);
    /* all of it rejected is a rejection, which needs a reason */
    tt_keys(&t, "a");
    TT_EXPECT(&t, "every hunk is rejected: r rejects the step", QUICK);
    tt_keys(&t, "x");
    TT_EXPECT(&t, "hunk 1 of 1 accepted again", QUICK);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "approving (step 5)", QUICK);
    TT_EXPECT(&t, "review compile v", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}
