/* pane.c -- what every pane shares: its window, scrolling, the cursor line,
 * search highlights, and repainting only when something changed. */
#include "tui/ui.h"

#include <string.h>

int tui_pane_rows(const tui_pane *p)
{
    return p->r.h > 2 ? p->r.h - 2 : 0;
}

int tui_pane_cols(const tui_pane *p)
{
    return p->r.w > 2 ? p->r.w - 2 : 0;
}

void tui_pane_place(tui_pane *p, tui_rect r, int shown)
{
    if (r.h < 3 || r.w < 3)
        shown = 0;
    if (r.h < 3)
        r.h = 3;
    if (r.w < 3)
        r.w = 3;
    int resized = r.w != p->r.w || r.h != p->r.h;
    if (p->win == NULL) {
        p->win = newwin(r.h, r.w, r.y, r.x);
        p->panel = new_panel(p->win);
        p->stale = 1;
    } else if (resized || r.y != p->r.y || r.x != p->r.x) {
        /* shrink before moving so the window never leaves the screen */
        wresize(p->win, r.h, r.w);
        move_panel(p->panel, r.y, r.x);
    }
    if (resized || r.w - 2 != p->built_w)
        p->stale = 1;
    p->r = r;
    p->shown = shown;
    if (shown)
        show_panel(p->panel);
    else
        hide_panel(p->panel);
    p->redraw = 1;
}

static void clamp(tui_pane *p)
{
    int rows = tui_pane_rows(p);
    int n = p->lines.n;
    if (p->ops->cursor) {
        if (p->cur >= n)
            p->cur = n - 1;
        if (p->cur < 0)
            p->cur = n > 0 ? 0 : -1;
        if (p->cur >= 0 && p->cur < p->top)
            p->top = p->cur;
        if (p->cur >= p->top + rows)
            p->top = p->cur - rows + 1;
    }
    if (p->top > n - rows)
        p->top = n - rows;
    if (p->top < 0)
        p->top = 0;
    if (p->left < 0)
        p->left = 0;
}

void tui_pane_scroll_to(tui_pane *p, int line)
{
    int rows = tui_pane_rows(p);
    if (p->ops->cursor)
        p->cur = line;
    if (line < p->top || line >= p->top + rows)
        p->top = line - rows / 3;
    p->follow = 0;
    clamp(p);
    p->redraw = 1;
}

void tui_pane_refresh(tui_pane *p, tui_app *a)
{
    int cols = tui_pane_cols(p), rows = tui_pane_rows(p);
    if (p->win == NULL || (!p->stale && p->built_w == cols))
        return;
    /* builds replace the lines (the reasoning pane may only extend them) */
    p->ops->build(p, a, cols);
    p->built_w = cols;
    p->stale = 0;
    /* a build may scroll on purpose (a jump), which ends following */
    if (p->follow) {
        p->top = p->lines.n - rows;
        if (p->ops->cursor)
            p->cur = p->lines.n - 1;
    }
    clamp(p);
    p->redraw = 1;
}

void tui_pane_draw(tui_pane *p, tui_app *a)
{
    if (!p->shown || p->win == NULL)
        return;
    int cols = tui_pane_cols(p), rows = tui_pane_rows(p);
    tui_pane_refresh(p, a);
    if (!p->redraw)
        return;
    p->redraw = 0;
    int focused = a->focus == (int)p->id && a->modal != TUI_MODAL_KB;
    wattr_set(p->win, A_NORMAL, 0, NULL);
    werase(p->win);
    char note[96] = "";
    if (p->ops->note)
        p->ops->note(p, a, note, sizeof note);
    tui_frame(p->win, p->ops->title, note, focused, a->utf8);
    for (int i = 0; i < rows; i++) {
        int idx = p->top + i;
        if (idx >= p->lines.n)
            break;
        int base = -1;
        if (p->ops->cursor && idx == p->cur)
            base = focused ? TUI_R_CURSOR : TUI_R_CURSOR_DIM;
        const tui_line *ln = &p->lines.v[idx];
        tui_put_line(p->win, 1 + i, 1, ln, p->left, cols, base, p->search, a->utf8);
        /* a line that goes on past the right edge says so (Right scrolls) */
        if (cols > 4 && tui_str_width(ln->text, ln->len) - p->left > cols) {
            int r = base >= 0 ? base : TUI_R_DIM;
            tui_put(p->win, 1 + i, cols, a->utf8 ? "\xe2\x80\xa6" : ">", a->utf8 ? 3 : 1, 0, 1,
                    tui_attr(r), tui_pair(r), a->utf8);
        }
    }
    /* where we are, when not everything fits */
    int pw = 0;
    if (p->lines.n > rows && p->r.w > 24) {
        char pos[48];
        int last = p->top + rows < p->lines.n ? p->top + rows : p->lines.n;
        snprintf(pos, sizeof pos, " %d-%d/%d ", p->top + 1, last, p->lines.n);
        pw = (int)strlen(pos);
        tui_put(p->win, p->r.h - 1, p->r.w - 2 - pw, pos, pw, 0, pw, tui_attr(TUI_R_TITLE),
                tui_pair(TUI_R_TITLE), a->utf8);
    }
    /* what shares this place and is hidden behind it */
    char hidden[200];
    if (tui_pane_hidden_note(a, (int)p->id, hidden, sizeof hidden) > 0)
        tui_put_fit(p->win, p->r.h - 1, 2, hidden, -1, p->r.w - 4 - pw - 1,
                    tui_attr(TUI_R_TITLE_FOCUS), tui_pair(TUI_R_TITLE_FOCUS), a->utf8);
}

int tui_pane_hidden_note(tui_app *a, int pane, char *buf, size_t n)
{
    int k = 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int i = 0; i < TUI_NPANES; i++) {
        if (i == pane || a->lay.slot[i] != a->lay.slot[pane])
            continue;
        char note[96] = "";
        if (i == TUI_P_DIAG && a->panes[i].ops->note)
            a->panes[i].ops->note(&a->panes[i], a, note, sizeof note);
        int w = snprintf(buf + used, n - used, "%s%s%s%s%s", k ? ", " : " Tab: ",
                         a->panes[i].ops->title, note[0] ? " (" : "", note, note[0] ? ")" : "");
        if (w < 0 || (size_t)w >= n - used)
            break;
        used += (size_t)w;
        k++;
    }
    if (k > 0 && used + 2 < n) {
        buf[used++] = ' ';
        buf[used] = '\0';
    }
    return k;
}

int tui_pane_key(tui_pane *p, tui_app *a, int key)
{
    (void)a;
    int rows = tui_pane_rows(p);
    int n = p->lines.n;
    int page = rows > 1 ? rows - 1 : 1;
    int *pos = p->ops->cursor ? &p->cur : &p->top;
    switch (key) {
    case KEY_UP:
        (*pos)--;
        break;
    case KEY_DOWN:
        (*pos)++;
        break;
    case KEY_PPAGE:
        *pos -= page;
        if (p->ops->cursor)
            p->top -= page;
        break;
    case KEY_NPAGE:
        *pos += page;
        if (p->ops->cursor)
            p->top += page;
        break;
    case KEY_HOME:
    case 'g':
        *pos = 0;
        p->top = 0;
        break;
    case KEY_END:
    case 'G':
        *pos = p->ops->cursor ? n - 1 : n - rows;
        p->top = n - rows;
        break;
    case KEY_LEFT:
        p->left -= 8;
        break;
    case KEY_RIGHT:
        p->left += 8;
        break;
    default:
        return 0;
    }
    clamp(p);
    /* Following the end again once the person scrolled back down to it. */
    p->follow = p->ops->cursor ? p->cur == n - 1 : p->top >= n - rows;
    p->redraw = 1;
    return 1;
}

void tui_pane_free(tui_pane *p)
{
    tui_lines_clear(&p->lines);
    if (p->panel)
        del_panel(p->panel);
    if (p->win)
        delwin(p->win);
    p->panel = NULL;
    p->win = NULL;
}
