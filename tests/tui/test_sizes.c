/* test_sizes.c -- the workbench at 80x24, 120x40 and 200x50 in tmux: what
 * each size shows at once, and that nothing is cut without an ellipsis.
 * With DITTO_SCREENS_OUT=DIR each screen is also written there as text
 * (docs/screens/ holds the copies: make screens). */
#include "tests/tui/tuitest.h"

#include <stdlib.h>
#include <string.h>

#define SLOW  90.0
#define QUICK 30.0

static void setup(void)
{
    if (system("tmux -V >/dev/null 2>&1") != 0)
        cr_skip_test("tmux is not installed");
}

TestSuite(sizes, .init = setup, .fini = tt_fini);

/* The recorded session (measurements, two versions) replayed to its end. */
static int replay_at_end(tt_term *t, int cols, int rows)
{
    tt_init(t);
    char *root = dt_xasprintf("%s/sessions", t->dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    int nev;
    char *id = tt_write_session(root, &nev);
    char *args = dt_xasprintf("replay %s --session-dir '%s'", id, root);
    tt_start(t, cols, rows, "C.UTF-8", NULL, args);
    char at[64];
    snprintf(at, sizeof at, "event 0/%d", nev);
    TT_EXPECT(t, at, SLOW);
    tt_keys(t, "'$'");
    snprintf(at, sizeof at, "event %d/%d", nev, nev);
    TT_EXPECT(t, at, QUICK);
    free(args);
    free(id);
    free(root);
    return nev;
}

/* Write the screen to $DITTO_SCREENS_OUT/NAME when asked. */
static void keep_screen(tt_term *t, const char *name)
{
    const char *dir = getenv("DITTO_SCREENS_OUT");
    if (dir == NULL || *dir == '\0')
        return;
    char *s = tt_screen(t);
    free(tu_write(dir, name, s));
    free(s);
}

static int same_line(tt_term *t, const char *a, const char *b)
{
    char *s = tt_screen(t);
    int found = 0;
    for (char *line = strtok(s, "\n"); line && !found; line = strtok(NULL, "\n"))
        found = strstr(line, a) && strstr(line, b);
    free(s);
    return found;
}

/* Every screen line is at most cols columns; the line holding `row_text`
 * ends in an ellipsis (the text went on). */
static void assert_fits(tt_term *t, int cols)
{
    char *s = tt_screen(t);
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n"))
        cr_assert_leq(tui_str_width(line, (int)strlen(line)), cols, "a line wider than %d: %s",
                      cols, line);
    free(s);
}

Test(sizes, at_80x24_the_steps_the_reasoning_and_one_switchable_pane_should_show)
{
    tt_term t;
    replay_at_end(&t, 80, 24);
    char *s = tt_screen(&t);
    cr_assert_not_null(strstr(s, "┌─ Steps"), "%s", s);
    cr_assert_not_null(strstr(s, "┌─ Reasoning"), "%s", s);
    cr_assert_not_null(strstr(s, "┌─ Source"), "%s", s);
    free(s);
    /* the steps in order, the selected step's outcome */
    TT_EXPECT(&t, "measure  v2", QUICK);
    TT_EXPECT(&t, "took 2.00 s", QUICK);
    /* what the shared place hides, with the diagnostics' count */
    TT_EXPECT(&t, "Tab: Diagnostics, Roofline & occupancy", QUICK);
    /* the status row is too narrow for all: the state stays, the rest
     * gives way, and what is cut ends in an ellipsis */
    TT_EXPECT(&t, "finished: a verified kernel", QUICK);
    TT_EXPECT(&t, "…", QUICK);
    assert_fits(&t, 80);
    keep_screen(&t, "replay-80x24.txt");
    /* Tab brings a hidden pane forward; the indicator follows */
    tt_keys(&t, "Tab Tab Tab");
    TT_EXPECT(&t, "┌─ Diagnostics", QUICK);
    TT_EXPECT(&t, "Tab: Source, Roofline & occupancy", QUICK);
    tt_keys(&t, "Tab");
    TT_EXPECT(&t, "┌─ Roofline & occupancy", QUICK);
    keep_screen(&t, "replay-80x24-roofline.txt");
    /* the help overlay wraps its lines instead of cutting them */
    tt_keys(&t, "?");
    TT_EXPECT(&t, "┌─ Keys", QUICK);
    TT_EXPECT(&t, "(a hidden", QUICK);
    TT_EXPECT(&t, "pane comes forward)", QUICK);
    TT_EXPECT(&t, "arrows scroll", QUICK);
    assert_fits(&t, 80);
    keep_screen(&t, "help-80x24.txt");
    tt_keys(&t, "Escape");
    cr_assert(tt_wait_gone(&t, "┌─ Keys", QUICK));
    /* too small: the message is wrapped, not cut */
    tt_resize(&t, 30, 8);
    TT_EXPECT(&t, "ditto: the terminal is too", QUICK);
    TT_EXPECT(&t, "needs 40x12). Make it larger,", QUICK);
    keep_screen(&t, "too-small-30x8.txt");
    tt_resize(&t, 80, 24);
    TT_EXPECT(&t, "┌─ Steps", QUICK);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(sizes, at_120x40_reasoning_source_diagnostics_and_roofline_should_show_at_once)
{
    tt_term t;
    replay_at_end(&t, 120, 40);
    char *s = tt_screen(&t);
    static const char *panes[] = {"┌─ Steps", "┌─ Reasoning", "┌─ Source", "┌─ Diagnostics",
                                  "┌─ Roofline & occupancy"};
    for (size_t i = 0; i < DT_ARRAY_LEN(panes); i++)
        cr_assert_not_null(strstr(s, panes[i]), "no %s:\n%s", panes[i], s);
    cr_assert_null(strstr(s, "Tab: "), "nothing hides at 120x40:\n%s", s);
    free(s);
    /* source as a diff, the warning, the occupancy and measurements */
    TT_EXPECT(&t, "#define BLOCK 128", QUICK);
    TT_EXPECT(&t, "177-D", QUICK);
    TT_EXPECT(&t, "limiter     registers", QUICK);
    cr_assert(same_line(&t, "v2 ", "8.76"), "v2's time in the table");
    /* agent names are cut with an ellipsis */
    TT_EXPECT(&t, "Performanc…", QUICK);
    assert_fits(&t, 120);
    keep_screen(&t, "replay-120x40.txt");
    /* the roofline (at the pane's end) names its unit */
    tt_keys(&t, "Tab Tab Tab Tab G");
    TT_EXPECT(&t, "FLOP/B", QUICK);
    TT_EXPECT(&t, "Roofline: NVIDIA H200, fp32", QUICK);
    keep_screen(&t, "replay-120x40-roofline.txt");
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}

Test(sizes, at_200x50_every_pane_and_two_columns_of_code_should_show)
{
    tt_term t;
    replay_at_end(&t, 200, 50);
    char *s = tt_screen(&t);
    static const char *panes[] = {"┌─ Steps", "┌─ Reasoning", "┌─ Source", "┌─ Diagnostics",
                                  "┌─ Roofline & occupancy"};
    for (size_t i = 0; i < DT_ARRAY_LEN(panes); i++)
        cr_assert_not_null(strstr(s, panes[i]), "no %s:\n%s", panes[i], s);
    free(s);
    cr_assert(same_line(&t, "#define BLOCK 256", "#define BLOCK 128"), "side by side");
    TT_EXPECT(&t, "FLOP/B", QUICK);
    TT_EXPECT(&t, "Performance Evaluator", QUICK);
    TT_EXPECT(&t, "| step 9/9 | 0 tok $0.0000 | finished: a verified kernel", QUICK);
    assert_fits(&t, 200);
    keep_screen(&t, "replay-200x50.txt");
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
}
