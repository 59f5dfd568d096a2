/* tuitest.h -- helpers for the workbench's tests: a terminal driven through
 * tmux, a recorded session with measurements, and events for the model. */
#ifndef DITTO_TUITEST_H
#define DITTO_TUITEST_H

#include "tests/common/testutil.h"
#include "tui/internal.h"

/* ---- a terminal under tmux ----------------------------------------------
 * Each terminal has its own tmux socket (-L), so tests never share a
 * server; tt_stop kills it, and the suite's fini stops any a failed test
 * left behind. The command runs from a script in the terminal's folder
 * that records whether the tty modes came back (TTY-RESTORED) and the exit
 * status (DITTO-EXIT N), then stays open so the screen can be read. */

typedef struct tt_term {
    char sock[64];
    char dir[512]; /* a fresh folder: data, config, sessions, sanitizer logs */
    int running;
} tt_term;

/* Make the folder (tt->dir) without starting anything. */
void tt_init(tt_term *t);
/* Start `ditto ARGS` (ARGS is shell text) in a cols x rows terminal with
 * LANG=lang, XDG_* inside the folder, sanitizer logs into it, and extra
 * (shell text, may be NULL) exported first. */
void tt_start(tt_term *t, int cols, int rows, const char *lang, const char *extra,
              const char *args);
/* The screen as text (UTF-8). Caller frees. */
char *tt_screen(tt_term *t);
/* Poll the screen (every 100 ms) until it contains text; 1 when it did
 * within timeout_s, else 0. */
int tt_wait(tt_term *t, const char *text, double timeout_s);
/* Poll until text is gone. */
int tt_wait_gone(tt_term *t, const char *text, double timeout_s);
/* send-keys: key names ("Enter", "Tab", "C-c", "a"). */
void tt_keys(tt_term *t, const char *keys);
/* send-keys -l: literal text. */
void tt_type(tt_term *t, const char *text);
void tt_resize(tt_term *t, int cols, int rows);
/* The pid of ditto (the script's child), 0 when gone. */
int tt_ditto_pid(tt_term *t);
/* Fail the test when a sanitizer wrote a report into the folder. */
void tt_assert_no_sanitizer_reports(tt_term *t);
/* Kill the tmux server and remove the folder. */
void tt_stop(tt_term *t);
/* Suite fini: stop the terminal a test registered (tt_start does). */
void tt_fini(void);

/* Wait or fail with the screen in the message. */
#define TT_EXPECT(t, text, secs)                                                                 \
    do {                                                                                         \
        if (!tt_wait((t), (text), (secs))) {                                                     \
            char *scr_ = tt_screen(t);                                                           \
            cr_assert_fail("waited %g s for [%s]; the screen:\n%s", (double)(secs), (text), scr_);     \
            free(scr_);                                                                          \
        }                                                                                        \
    } while (0)

/* ---- recorded sessions ---------------------------------------------------- */

/* Write a finished session under root: profile, a plan whose rationale
 * names rule.spmv.sell16-for-regular-rows, check and compile with
 * occupancy, two kernel versions, a compiler warning on line 3, and two
 * measurements with CUPTI metrics against cuSPARSE CSR_ALG1. Returns the
 * session id (caller frees); *nev gets the event count. */
char *tt_write_session(const char *root, int *nev);
/* The same events as an array (caller frees). */
cJSON *tt_session_events(void);

/* ---- the model --------------------------------------------------------------- */

/* Feed every event of the array to a fresh model. */
void tt_model_from(tui_model *m, const cJSON *events);
/* Does any line contain s? Index or -1. */
int tt_lines_find(const tui_lines *l, const char *s);

#endif
