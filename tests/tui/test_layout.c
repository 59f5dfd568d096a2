/* test_layout.c -- pane rectangles for terminal sizes (tui/layout.c). */
#include "tests/tui/tuitest.h"

#include <string.h>

/* Distinct slots tile the area above the status rows exactly: every cell
 * belongs to one slot, and panes sharing a slot share its rectangle. */
static void check_tiling(const tui_layout *l)
{
    int cols = l->cols, rows = l->rows - 2;
    cr_assert_eq(l->status.y, l->rows - 2);
    cr_assert_eq(l->status.h, 2);
    cr_assert_eq(l->status.w, cols);
    static unsigned char owner[300 * 100];
    cr_assert(cols <= 300 && rows <= 100);
    memset(owner, 0xff, sizeof owner);
    for (int i = 0; i < TUI_NPANES; i++) {
        const tui_rect *r = &l->pane[i];
        cr_assert_geq(r->h, 3, "%dx%d: pane %d is %d rows", l->cols, l->rows, i, r->h);
        cr_assert_geq(r->w, 3);
        cr_assert(r->y >= 0 && r->x >= 0 && r->y + r->h <= rows && r->x + r->w <= cols,
                  "%dx%d: pane %d outside", l->cols, l->rows, i);
        for (int j = 0; j < i; j++)
            if (l->slot[j] == l->slot[i])
                cr_assert(memcmp(&l->pane[j], r, sizeof *r) == 0, "a slot has two rectangles");
        for (int y = r->y; y < r->y + r->h; y++)
            for (int x = r->x; x < r->x + r->w; x++) {
                unsigned char *o = &owner[y * 300 + x];
                cr_assert(*o == 0xff || *o == l->slot[i], "%dx%d: cell %d,%d in two slots",
                          l->cols, l->rows, y, x);
                *o = (unsigned char)l->slot[i];
            }
    }
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < cols; x++)
            cr_assert_neq(owner[y * 300 + x], 0xff, "%dx%d: cell %d,%d unused", l->cols, l->rows,
                          y, x);
}

static int distinct_slots(const tui_layout *l)
{
    int seen = 0, n = 0;
    for (int i = 0; i < TUI_NPANES; i++)
        if (!(seen & (1 << l->slot[i]))) {
            seen |= 1 << l->slot[i];
            n++;
        }
    return n;
}

Test(layout, an_80x24_terminal_should_share_one_slot_among_three_panes)
{
    tui_layout l;
    tui_layout_compute(80, 24, &l);
    cr_assert_eq(l.too_small, 0);
    cr_assert_eq(l.tier, TUI_TIER_SMALL);
    check_tiling(&l);
    cr_assert_eq(distinct_slots(&l), 3);
    cr_assert_eq(l.slot[TUI_P_SOURCE], l.slot[TUI_P_DIAG]);
    cr_assert_eq(l.slot[TUI_P_SOURCE], l.slot[TUI_P_PERF]);
    cr_assert_neq(l.slot[TUI_P_STEPS], l.slot[TUI_P_REASON]);
    /* steps down the left, full height; the source below the reasoning */
    cr_assert_eq(l.pane[TUI_P_STEPS].x, 0);
    cr_assert_eq(l.pane[TUI_P_STEPS].h, 22);
    cr_assert_geq(l.pane[TUI_P_STEPS].w, 20);
    cr_assert_gt(l.pane[TUI_P_SOURCE].y, l.pane[TUI_P_REASON].y);
    cr_assert_geq(l.pane[TUI_P_SOURCE].h, 10, "the kernel needs room");
    /* the current step's reasoning and outcome get half the height */
    cr_assert_geq(l.pane[TUI_P_REASON].h, 11);
    cr_assert_eq(l.side_by_side, 0);
}

Test(layout, a_200x60_terminal_should_show_every_pane_and_two_columns_of_code)
{
    tui_layout l;
    tui_layout_compute(200, 60, &l);
    cr_assert_eq(l.tier, TUI_TIER_WIDE);
    check_tiling(&l);
    cr_assert_eq(distinct_slots(&l), TUI_NPANES);
    cr_assert_eq(l.side_by_side, 1);
    /* performance on the right, full height, wide enough for the figure */
    cr_assert_eq(l.pane[TUI_P_PERF].x + l.pane[TUI_P_PERF].w, 200);
    cr_assert_eq(l.pane[TUI_P_PERF].h, 58);
    cr_assert_geq(l.pane[TUI_P_PERF].w, 60);
    cr_assert_geq(l.pane[TUI_P_SOURCE].w, 96);
}

Test(layout, a_120x40_terminal_should_show_reasoning_source_diagnostics_and_performance_at_once)
{
    /* 120 x 40 and what lies between it and the wide tier */
    static const int sizes[][2] = {{120, 40}, {110, 30}, {150, 44}, {179, 60}, {200, 44}};
    for (size_t i = 0; i < DT_ARRAY_LEN(sizes); i++) {
        tui_layout l;
        tui_layout_compute(sizes[i][0], sizes[i][1], &l);
        cr_assert_eq(l.tier, TUI_TIER_MEDIUM, "%dx%d", sizes[i][0], sizes[i][1]);
        check_tiling(&l);
        cr_assert_eq(distinct_slots(&l), TUI_NPANES, "%dx%d: every pane its own place",
                     sizes[i][0], sizes[i][1]);
        /* the measurements table needs 38 columns inside the border */
        cr_assert_geq(l.pane[TUI_P_PERF].w - 2, 38);
        cr_assert_geq(l.pane[TUI_P_SOURCE].h - 2, 8, "%dx%d: room for code", sizes[i][0],
                      sizes[i][1]);
        cr_assert_geq(l.pane[TUI_P_REASON].h - 2, 6);
        cr_assert_geq(l.pane[TUI_P_DIAG].h - 2, 3);
    }
    tui_layout l;
    tui_layout_compute(120, 40, &l);
    cr_assert_geq(l.pane[TUI_P_REASON].h - 2, 9);
    cr_assert_geq(l.pane[TUI_P_SOURCE].w - 2, 78, "a kernel line of 78 columns fits");
}

Test(layout, every_size_should_tile_and_tiny_ones_should_say_so)
{
    for (int cols = TUI_MIN_COLS; cols <= 300; cols += 7)
        for (int rows = TUI_MIN_ROWS; rows <= 100; rows += 5) {
            tui_layout l;
            tui_layout_compute(cols, rows, &l);
            cr_assert_eq(l.too_small, 0);
            check_tiling(&l);
        }
    tui_layout l;
    tui_layout_compute(30, 10, &l);
    cr_assert_eq(l.too_small, 1);
    tui_layout_compute(TUI_MIN_COLS - 1, 40, &l);
    cr_assert_eq(l.too_small, 1);
}

Test(layout, a_failed_gate_on_a_small_terminal_should_give_the_reasoning_the_room)
{
    tui_layout l, before;
    tui_layout_compute(80, 24, &before);
    l = before;
    tui_layout_give_reason(&l);
    check_tiling(&l);
    /* the error, its source line and the choices: 14 rows inside the frame */
    cr_assert_eq(l.pane[TUI_P_REASON].h, 16, "reasoning %d rows", l.pane[TUI_P_REASON].h);
    cr_assert_gt(l.pane[TUI_P_REASON].h, before.pane[TUI_P_REASON].h);
    /* the source stays, smaller, below it: the rows around the error */
    cr_assert_eq(l.pane[TUI_P_SOURCE].h, 6);
    cr_assert_eq(l.pane[TUI_P_SOURCE].y, 16);
    cr_assert_eq(l.pane[TUI_P_STEPS].h, 22, "the steps keep their column");
    /* every small size still tiles; the reasoning never shrinks */
    for (int cols = TUI_MIN_COLS; cols < 110; cols += 7)
        for (int rows = TUI_MIN_ROWS; rows <= 100; rows += 3) {
            tui_layout_compute(cols, rows, &before);
            l = before;
            tui_layout_give_reason(&l);
            if (!l.too_small)
                check_tiling(&l);
            cr_assert_geq(l.pane[TUI_P_REASON].h, before.pane[TUI_P_REASON].h);
        }
    /* where every pane has its own place nothing moves */
    tui_layout_compute(120, 40, &before);
    l = before;
    tui_layout_give_reason(&l);
    cr_assert(memcmp(&l, &before, sizeof l) == 0);
}
