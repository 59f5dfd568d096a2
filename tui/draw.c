/* draw.c -- putting UTF-8 text, styled lines and frames into windows. */
#include "tui/ui.h"

#include <stdlib.h>
#include <string.h>
#include <wchar.h>

int tui_put(WINDOW *w, int y, int x, const char *s, int len, int skip, int cols, attr_t a,
            short pair, int utf8)
{
    if (cols <= 0)
        return 0;
    wchar_t buf[512];
    int nb = 0, col = 0, drawn = 0;
    wattr_set(w, a, pair, NULL);
    wmove(w, y, x);
    for (int i = 0; i < len && drawn < cols;) {
        unsigned cp;
        i += tui_utf8_next(s + i, len - i, &cp);
        int cw = tui_cp_width(cp);
        if (!utf8 && cp >= 0x80)
            cp = '?';
        else if (cp == 0xFFFD || cp < 0x20 || cp == 0x7f || (cp >= 0x80 && wcwidth((wchar_t)cp) < 0))
            cp = '?';
        if (col < skip) {
            /* a wide character cut by the left edge leaves a blank */
            if (col + cw > skip) {
                for (int k = 0; k < col + cw - skip && drawn < cols; k++) {
                    buf[nb++] = L' ';
                    drawn++;
                }
            }
            col += cw;
            continue;
        }
        if (drawn + cw > cols)
            break;
        buf[nb++] = (wchar_t)cp;
        drawn += cw;
        col += cw;
        if (nb >= (int)DT_ARRAY_LEN(buf) - 4) {
            waddnwstr(w, buf, nb);
            nb = 0;
        }
    }
    if (nb > 0)
        waddnwstr(w, buf, nb);
    return drawn;
}

int tui_put_fit(WINDOW *w, int y, int x, const char *s, int len, int cols, attr_t a, short pair,
                int utf8)
{
    if (len < 0)
        len = (int)strlen(s);
    if (cols <= 0)
        return 0;
    if (tui_str_width(s, len) <= cols)
        return tui_put(w, y, x, s, len, 0, cols, a, pair, utf8);
    const char *ell = utf8 ? "\xe2\x80\xa6" : "...";
    int ew = utf8 ? 1 : 3;
    if (cols <= ew)
        return tui_put(w, y, x, ell, (int)strlen(ell), 0, cols, a, pair, utf8);
    int used;
    int n = tui_fit(s, len, cols - ew, &used);
    tui_put(w, y, x, s, n, 0, used, a, pair, utf8);
    tui_put(w, y, x + used, ell, (int)strlen(ell), 0, ew, a, pair, utf8);
    return used + ew;
}

/* Roles per byte: the line's, then spans, then search matches on top. */
static void line_roles(const tui_line *ln, int base_role, const char *search, unsigned char *r)
{
    int role = base_role >= 0 ? base_role : ln->role;
    memset(r, role, (size_t)ln->len);
    if (base_role < 0) {
        for (int i = 0; i < ln->nspans; i++)
            memset(r + ln->spans[i].off, ln->spans[i].role, (size_t)ln->spans[i].len);
    }
    size_t n = search ? strlen(search) : 0;
    if (n == 0)
        return;
    for (int i = 0; i + (int)n <= ln->len; i++) {
        if (strncasecmp(ln->text + i, search, n) == 0) {
            memset(r + i, TUI_R_SEARCH, n);
            i += (int)n - 1;
        }
    }
}

void tui_put_line(WINDOW *w, int y, int x, const tui_line *ln, int skip, int cols, int base_role,
                  const char *search, int utf8)
{
    unsigned char stack[512];
    unsigned char *r = ln->len <= (int)sizeof stack ? stack : dt_xmalloc((size_t)ln->len);
    line_roles(ln, base_role, search, r);
    int col = 0, x0 = x;
    int i = 0;
    while (i < ln->len && col < skip + cols) {
        int j = i;
        while (j < ln->len && r[j] == r[i])
            j++;
        int rw = tui_str_width(ln->text + i, j - i);
        int c0 = col, c1 = col + rw;
        if (c1 > skip) {
            int vis0 = c0 > skip ? c0 : skip;
            int vis1 = c1 < skip + cols ? c1 : skip + cols;
            if (vis1 > vis0)
                tui_put(w, y, x0 + vis0 - skip, ln->text + i, j - i, vis0 - c0, vis1 - vis0,
                        tui_attr(r[i]), tui_pair(r[i]), utf8);
        }
        col = c1;
        i = j;
    }
    /* a cursor bar spans the pane, not just the text */
    int used = col - skip;
    if (used < 0)
        used = 0;
    if (base_role >= 0 && used < cols) {
        wattr_set(w, tui_attr(base_role), tui_pair(base_role), NULL);
        mvwhline(w, y, x0 + used, ' ', cols - used);
    }
    if (r != stack)
        free(r);
}

void tui_frame(WINDOW *w, const char *title, const char *note, int focused, int utf8)
{
    int h, wd;
    getmaxyx(w, h, wd);
    (void)h;
    int br = focused ? TUI_R_BORDER_FOCUS : TUI_R_BORDER;
    chtype a = tui_attr(br) | (chtype)COLOR_PAIR(tui_pair(br));
    /* wborder renders with the window's current attributes too: start
     * from none, or the last drawn line's cursor bar leaks into the frame */
    wattr_set(w, A_NORMAL, 0, NULL);
    wborder(w, ACS_VLINE | a, ACS_VLINE | a, ACS_HLINE | a, ACS_HLINE | a, ACS_ULCORNER | a,
            ACS_URCORNER | a, ACS_LLCORNER | a, ACS_LRCORNER | a);
    int tr = focused ? TUI_R_TITLE_FOCUS : TUI_R_TITLE;
    int used = 0;
    if (title && wd > 6) {
        char t[160];
        snprintf(t, sizeof t, " %s ", title);
        used = tui_put_fit(w, 0, 2, t, -1, wd - 4, tui_attr(tr), tui_pair(tr), utf8);
    }
    if (note && *note && wd > used + 10) {
        char t[160];
        snprintf(t, sizeof t, " %s ", note);
        int room = wd - 4 - used - 2;
        int nw = tui_str_width(t, (int)strlen(t));
        if (nw > room)
            nw = room;
        tui_put_fit(w, 0, wd - 2 - nw, t, -1, nw, tui_attr(TUI_R_TITLE), tui_pair(TUI_R_TITLE),
                    utf8);
    }
}
