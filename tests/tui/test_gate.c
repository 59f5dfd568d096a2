/* test_gate.c -- a failed step at its gate in the workbench, at 80x24 (issue
 * 38): the NVRTC error and its source line are on the screen, `a` is
 * refused at once and records nothing, `r` sends the step back with the
 * reason and the error to the coder, `e` edits the failed kernel into a new
 * version that is compiled, and `s` stops the run. */
#include "tests/tui/tuitest.h"

#include "sessions/sessions.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOW  90.0
#define QUICK 30.0

static void setup(void)
{
    if (system("tmux -V >/dev/null 2>&1") != 0)
        cr_skip_test("tmux is not installed");
}

TestSuite(gate, .init = setup, .fini = tt_fini);

/* The workbench at 80x24 on a live expert run whose editor (every call is
 * copied to DIR/seen.N first) breaks the kernel the first time it is called
 * and, the second time, replaces the broken line with another one. */
static void start_broken(tt_term *t)
{
    tt_init(t);
    char *ed = tu_write(t->dir, "edit.sh",
                        "#!/bin/sh\n"
                        "n=$(ls \"$(dirname \"$0\")\"/seen.* 2>/dev/null | wc -l)\n"
                        "cp \"$1\" \"$(dirname \"$0\")/seen.$n\"\n"
                        "if [ \"$n\" = 0 ]; then\n"
                        "  echo 'int broken = not_a_symbol;' >> \"$1\"\n"
                        "else\n"
                        "  sed -i 's/not_a_symbol/still_not_a_symbol/' \"$1\"\n"
                        "fi\n"
                        "exit 0\n");
    char *extra = dt_xasprintf("chmod +x '%s'; export EDITOR='%s'; unset VISUAL", ed, ed);
    char *sp = tu_write(t->dir, "spec.json",
                        "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=20000,bw=1\", "
                        "\"dtype\": \"fp32\", \"backend\": \"expert\", \"review\": \"ask\"}\n");
    char *args = dt_xasprintf("tui '%s' --session-dir '%s/sessions'", sp, t->dir);
    tt_start(t, 80, 24, "C.UTF-8", extra, args);
    free(args);
    free(sp);
    free(extra);
    free(ed);
    /* approve profile, plan and check; the kernel is broken at its review */
    TT_EXPECT(t, "review profile v1", SLOW);
    tt_keys(t, "a");
    TT_EXPECT(t, "review plan v1", SLOW);
    tt_keys(t, "a");
    TT_EXPECT(t, "review check v1", SLOW);
    tt_keys(t, "a");
    TT_EXPECT(t, "review generate v1", SLOW);
    tt_keys(t, "e");
    TT_EXPECT(t, "FAILED: send back", SLOW);
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

/* No step was recorded as approved while it had failed. */
static void assert_no_failed_approval(const cJSON *events)
{
    const cJSON *ev;
    cJSON_ArrayForEach(ev, events)
    {
        if (dt_streq(dt_json_str(ev, "type", ""), "decision") &&
            dt_streq(dt_json_str(ev, "decision", ""), "approve"))
            cr_assert_neq(dt_json_int(ev, "step", 0), 5, "the failed compile was approved");
        if (dt_streq(dt_json_str(ev, "type", ""), "step_finished") &&
            dt_streq(dt_json_str(ev, "status", ""), "approved"))
            cr_assert(dt_json_bool(ev, "ok", 1), "step %d approved while failed",
                      dt_json_int(ev, "step", 0));
    }
}

Test(gate, a_failed_compile_at_80x24_should_show_its_error_refuse_a_and_send_back_the_reason,
     .timeout = 300)
{
    tt_term t;
    start_broken(&t);
    /* the error, its source line and the choices, on this small screen */
    TT_EXPECT(&t, "FAILED: compile v1", QUICK);
    TT_EXPECT(&t, "identifier \"not_a_symbol\" is undefined", QUICK);
    TT_EXPECT(&t, "115 | int broken = not_a_symbol;", QUICK);
    TT_EXPECT(&t, "r  send it back to the coder", QUICK);
    TT_EXPECT(&t, "s  stop the run", QUICK);
    /* the key row, once the edit's message is gone */
    TT_EXPECT(&t, "r send back  e edit  s stop", QUICK);
    char *s = tt_screen(&t);
    cr_assert_null(strstr(s, "a approve"), "a failed step offers no approval:\n%s", s);
    cr_assert_null(strstr(s, "review compile v1"), "not a normal review:\n%s", s);
    free(s);
    /* a is refused at once: nothing is staged, nothing recorded */
    tt_keys(&t, "a");
    TT_EXPECT(&t, "a failed step cannot be approved", QUICK);
    nap_ms(4000);
    s = tt_screen(&t);
    cr_assert_null(strstr(s, "approving (step"), "an approval was staged:\n%s", s);
    cr_assert(strstr(s, "compile v1 FAILED"), "the gate still waits:\n%s", s);
    free(s);
    /* r: the reason goes back to the coder with the error */
    tt_keys(&t, "r");
    TT_EXPECT(&t, "Send back: your reason goes to the agent with the error", QUICK);
    tt_type(&t, "drop the global you added");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "sending back (step 5)", QUICK);
    TT_EXPECT(&t, "review generate v2", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    sess_log *log = the_session(&t);
    assert_no_failed_approval(log->events);
    int sent = 0, fed = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (dt_streq(type, "decision") && dt_json_int(ev, "step", 0) == 5)
            sent = dt_streq(dt_json_str(ev, "decision", ""), "reject") &&
                   dt_streq(dt_json_str(ev, "by", ""), "person") &&
                   dt_streq(dt_json_str(ev, "reason", ""), "drop the global you added");
        if (dt_streq(type, "step_started") && dt_streq(dt_json_str(ev, "kind", ""), "generate") &&
            dt_json_int(ev, "version", 0) == 2) {
            const char *fb = dt_json_str(cJSON_GetObjectItem(ev, "inputs"), "feedback", "");
            fed = strstr(fb, "drop the global you added") && strstr(fb, "not_a_symbol");
            cr_assert(fed, "the coder's feedback lacks the reason or the error:\n%s", fb);
        }
    }
    cr_assert(sent, "the send-back with its reason was not recorded");
    cr_assert(fed, "no generate v2 started");
    sess_log_free(log);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(gate, a_failed_compile_should_be_edited_into_a_new_version_or_stopped, .timeout = 300)
{
    tt_term t;
    start_broken(&t);
    /* e opens the failed kernel itself (with the broken line) */
    tt_keys(&t, "e");
    TT_EXPECT(&t, "edited: your kernel is a new version, compiled again", QUICK);
    char *p1 = dt_xasprintf("%s/seen.1", t.dir);
    char *opened = dt_read_file(p1, NULL, NULL);
    cr_assert(opened && strstr(opened, "int broken = not_a_symbol;"),
              "e at the failed compile did not open its kernel:\n%s", opened ? opened : "");
    free(opened);
    free(p1);
    /* the edit was compiled: it fails again, on the edited line */
    TT_EXPECT(&t, "identifier \"still_not_a_symbol\" is", SLOW);
    TT_EXPECT(&t, "compile v2 FAILED", QUICK);
    /* s stops the run, after the undo window */
    tt_keys(&t, "s");
    TT_EXPECT(&t, "stopping the run (step", QUICK);
    TT_EXPECT(&t, "stopped by person at compile", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    sess_log *log = the_session(&t);
    assert_no_failed_approval(log->events);
    int edited = 0, stopped = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (dt_streq(type, "artifact") && dt_streq(dt_json_str(ev, "name", ""), "kernel") &&
            strstr(dt_json_str(ev, "content", ""), "still_not_a_symbol"))
            edited = dt_json_bool(cJSON_GetObjectItem(ev, "json"), "edited", 0);
        if (dt_streq(type, "decision") && dt_streq(dt_json_str(ev, "decision", ""), "stop"))
            stopped = dt_streq(dt_json_str(ev, "by", ""), "person");
    }
    cr_assert(edited, "the edited kernel is not a recorded version");
    cr_assert(stopped, "the stop was not recorded as the person's");
    sess_log_free(log);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

/* A verification that fails (the launcher fakes a GPU whose battery finds a
 * wrong value: tests/agents/fake-gpu-worker.sh) at 80x24: the failed check
 * is on the screen, a is refused, and e edits the verified kernel into a
 * new version that is compiled and verified again. */
Test(gate, a_failed_verification_at_80x24_should_show_the_check_and_edit_the_kernel,
     .timeout = 300)
{
    tt_term t;
    tt_init(&t);
    char *ed = tu_write(t.dir, "edit.sh",
                        "#!/bin/sh\n"
                        "cp \"$1\" \"$(dirname \"$0\")/seen\"\n"
                        "echo '/* checked by hand */' >> \"$1\"\n");
    char *extra = dt_xasprintf("chmod +x '%s'; export EDITOR='%s' FAKE_GPU_VERIFY_FAIL=1; "
                               "unset VISUAL",
                               ed, ed);
    char *sp = tu_write(t.dir, "spec.json",
                        "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=20000,bw=1\", "
                        "\"dtype\": \"fp32\", \"backend\": \"expert\", \"review\": \"ask\"}\n");
    char *args = dt_xasprintf("tui '%s' --session-dir '%s/sessions' --launcher "
                              "'%s/tests/agents/fake-gpu-worker.sh {exe} {device}'",
                              sp, t.dir, tu_src_dir());
    tt_start(&t, 80, 24, "C.UTF-8", extra, args);
    free(args);
    free(sp);
    free(extra);
    static const char *gates[] = {"review profile v1", "review plan v1", "review check v1",
                                  "review generate v1", "review compile v1"};
    for (size_t i = 0; i < DT_ARRAY_LEN(gates); i++) {
        TT_EXPECT(&t, gates[i], SLOW);
        tt_keys(&t, "a");
    }
    TT_EXPECT(&t, "verify v1 FAILED: send back, edit or stop", SLOW);
    TT_EXPECT(&t, "FAILED: verify v1, 1 error; it cannot be approved", QUICK);
    TT_EXPECT(&t, "agrees with cuSPARSE: row 7: 3.5 vs 4.0", QUICK);
    TT_EXPECT(&t, "r send back  e edit  s stop", QUICK);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "verify v1 failed: a failed step cannot be approved", QUICK);
    tt_keys(&t, "e");
    TT_EXPECT(&t, "edited: your kernel is a new version, compiled again", QUICK);
    char *p = dt_xasprintf("%s/seen", t.dir);
    char *opened = dt_read_file(p, NULL, NULL);
    cr_assert(opened && strstr(opened, "#define BLOCK"),
              "e at the failed verify did not open its kernel:\n%s", opened ? opened : "");
    free(opened);
    free(p);
    free(ed);
    /* the edit is compiled, then verified again (and fails again here) */
    TT_EXPECT(&t, "review compile v2", SLOW);
    tt_keys(&t, "a");
    TT_EXPECT(&t, "verify v2 FAILED", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "(y/n)", QUICK);
    tt_keys(&t, "y");
    TT_EXPECT(&t, "DITTO-EXIT 4", QUICK);
    sess_log *log = the_session(&t);
    int edited = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (dt_streq(type, "artifact") && dt_streq(dt_json_str(ev, "name", ""), "kernel") &&
            strstr(dt_json_str(ev, "content", ""), "checked by hand"))
            edited = dt_json_bool(cJSON_GetObjectItem(ev, "json"), "edited", 0);
        if (dt_streq(type, "step_finished") && dt_streq(dt_json_str(ev, "status", ""), "approved"))
            cr_assert(dt_json_bool(ev, "ok", 1), "step %d approved while failed",
                      dt_json_int(ev, "step", 0));
    }
    cr_assert(edited, "the edited kernel is not a recorded version");
    sess_log_free(log);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}
