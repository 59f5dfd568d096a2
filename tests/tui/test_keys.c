/* test_keys.c -- keys in a real terminal (tmux): Esc answers without the
 * escape delay, and the tail of a key's sequence split off in transit is
 * never read as keys. Timing is measured by tests/tui/bench/keys.py, not
 * asserted here. */
#include "tests/tui/tuitest.h"

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

TestSuite(keys, .init = setup, .fini = tt_fini);

static void start_live(tt_term *t)
{
    tt_init(t);
    char *sp = tu_write(t->dir, "spec.json",
                        "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=20000,bw=1\", "
                        "\"dtype\": \"fp32\", \"backend\": \"expert\", \"review\": \"ask\"}\n");
    char *args = dt_xasprintf("tui '%s' --session-dir '%s/sessions'", sp, t->dir);
    tt_start(t, 120, 40, "C.UTF-8", "unset ESCDELAY", args);
    free(args);
    free(sp);
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

Test(keys, a_sequence_split_after_its_esc_should_not_be_read_as_keys)
{
    tt_term t;
    start_live(&t);
    TT_EXPECT(&t, "review profile v1", SLOW);
    /* Up arrives as Esc, then "[A" 40 ms later (a slow link): read as
     * keys, "A" would approve this and every later step */
    tt_keys(&t, "Escape");
    nap_ms(40);
    tt_type(&t, "[A");
    nap_ms(500);
    char *s = tt_screen(&t);
    cr_assert_null(strstr(s, "approving this and every later step"), "%s", s);
    cr_assert_not_null(strstr(s, "review profile v1"), "%s", s);
    free(s);
    /* whole sequences still are keys: Down, Up; Esc closes at once */
    tt_keys(&t, "?");
    TT_EXPECT(&t, "┌─ Keys", QUICK);
    tt_keys(&t, "Down Down Up");
    tt_keys(&t, "Escape");
    cr_assert(tt_wait_gone(&t, "┌─ Keys", QUICK));
    /* a key typed well after an Esc is a key again */
    nap_ms(200);
    tt_keys(&t, "Escape");
    nap_ms(200);
    tt_type(&t, "A");
    TT_EXPECT(&t, "approving this and every later step", QUICK);
    TT_EXPECT(&t, "finished (exit 3)", SLOW);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    TT_EXPECT(&t, "TTY-RESTORED", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(keys, an_unknown_gpu_should_be_refused_with_the_known_ones)
{
    tt_term t;
    tt_init(&t);
    char *sp = tu_write(t.dir, "spec.json",
                        "{\"op\": \"spmv\", \"matrix\": \"gen:banded:rows=100,bw=1\", "
                        "\"dtype\": \"fp32\"}\n");
    tu_proc p = tu_run("'%s' tui '%s' --gpu no-such-gpu </dev/null", tu_ditto_bin(), sp);
    cr_assert_eq(p.status, 2);
    cr_assert_not_null(strstr(p.err, "--gpu: unknown GPU 'no-such-gpu'; known:"), "%s", p.err);
    cr_assert_not_null(strstr(p.err, "h200"), "%s", p.err);
    tu_proc_free(&p);
    /* a known one passes the check (and meets the terminal's) */
    p = tu_run("'%s' tui '%s' --gpu l40s </dev/null", tu_ditto_bin(), sp);
    cr_assert_eq(p.status, 2);
    cr_assert_not_null(strstr(p.err, "needs a terminal"), "%s", p.err);
    tu_proc_free(&p);
    free(sp);
    tt_stop(&t);
}
