/* layout.c -- pane rectangles for a terminal size (pure arithmetic). */
#include "tui/internal.h"

#include <string.h>

static int clampi(int v, int lo, int hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static tui_rect rect(int y, int x, int h, int w)
{
    return (tui_rect){y, x, h, w};
}

void tui_layout_compute(int cols, int rows, tui_layout *out)
{
    memset(out, 0, sizeof *out);
    out->cols = cols;
    out->rows = rows;
    if (cols < TUI_MIN_COLS || rows < TUI_MIN_ROWS) {
        out->too_small = 1;
        out->status = rect(rows > 2 ? rows - 2 : 0, 0, rows > 2 ? 2 : rows, cols);
        return;
    }
    /* Two rows at the bottom: the status line and the keys that apply. */
    out->status = rect(rows - 2, 0, 2, cols);
    int h = rows - 2;
    if (cols >= 180 && rows >= 45) {
        out->tier = TUI_TIER_WIDE;
        int lw = clampi(cols / 5, 34, 56);
        int rw = clampi(cols * 31 / 100, 60, 90);
        int mw = cols - lw - rw;
        int sh = clampi(h * 11 / 20, 8, h - 6);
        int rh = clampi(h * 7 / 20, 6, h - 8);
        out->pane[TUI_P_STEPS] = rect(0, 0, sh, lw);
        out->pane[TUI_P_DIAG] = rect(sh, 0, h - sh, lw);
        out->pane[TUI_P_REASON] = rect(0, lw, rh, mw);
        out->pane[TUI_P_SOURCE] = rect(rh, lw, h - rh, mw);
        out->pane[TUI_P_PERF] = rect(0, lw + mw, h, rw);
        for (int i = 0; i < TUI_NPANES; i++)
            out->slot[i] = i;
        out->nslots = TUI_NPANES;
    } else if (cols >= 110 && rows >= 30) {
        /* Every pane in its own place: steps over roofline and occupancy
         * on the left (the measurements table needs about 38 columns),
         * reasoning, source and diagnostics stacked on the right. */
        out->tier = TUI_TIER_MEDIUM;
        int lw = clampi(cols / 3, 40, 56);
        int mw = cols - lw;
        int sh = clampi(h * 2 / 5, 8, h - 10);
        int rh = clampi(h * 3 / 10, 6, h - 12);
        int dh = clampi(h / 4, 5, h - rh - 6);
        out->pane[TUI_P_STEPS] = rect(0, 0, sh, lw);
        out->pane[TUI_P_PERF] = rect(sh, 0, h - sh, lw);
        out->pane[TUI_P_REASON] = rect(0, lw, rh, mw);
        out->pane[TUI_P_SOURCE] = rect(rh, lw, h - rh - dh, mw);
        out->pane[TUI_P_DIAG] = rect(h - dh, lw, dh, mw);
        for (int i = 0; i < TUI_NPANES; i++)
            out->slot[i] = i;
        out->nslots = TUI_NPANES;
    } else {
        /* The steps down the left; the current step's reasoning over one
         * slot that source, diagnostics and performance share (the slot's
         * frame names the hidden ones). */
        out->tier = TUI_TIER_SMALL;
        int lw = clampi(cols * 3 / 10, 20, 30);
        int mw = cols - lw;
        int rh = clampi(h / 2, 4, h - 6);
        out->pane[TUI_P_STEPS] = rect(0, 0, h, lw);
        out->pane[TUI_P_REASON] = rect(0, lw, rh, mw);
        out->pane[TUI_P_SOURCE] = rect(rh, lw, h - rh, mw);
        out->pane[TUI_P_DIAG] = out->pane[TUI_P_SOURCE];
        out->pane[TUI_P_PERF] = out->pane[TUI_P_SOURCE];
        out->slot[TUI_P_STEPS] = 0;
        out->slot[TUI_P_REASON] = 1;
        out->slot[TUI_P_SOURCE] = out->slot[TUI_P_DIAG] = out->slot[TUI_P_PERF] = 2;
        out->nslots = 3;
    }
    /* Two columns of code need about 2 x 42 cells beside the gutters. */
    out->side_by_side = out->pane[TUI_P_SOURCE].w >= 96;
}

void tui_layout_give_reason(tui_layout *l)
{
    if (l->too_small || l->tier != TUI_TIER_SMALL)
        return;
    int h = l->rows - 2;
    tui_rect *r = &l->pane[TUI_P_REASON];
    /* the shared slot keeps 6 rows (4 of source around the error) */
    int rh = clampi(h - 6, r->h, h - 3 > r->h ? h - 3 : r->h);
    if (rh <= r->h)
        return;
    r->h = rh;
    for (int i = 0; i < TUI_NPANES; i++) {
        if (l->slot[i] == l->slot[TUI_P_SOURCE]) {
            l->pane[i].y = rh;
            l->pane[i].h = h - rh;
        }
    }
}
