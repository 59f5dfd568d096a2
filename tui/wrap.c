/* wrap.c -- UTF-8 decoding, display widths by wcwidth, and word wrapping. */
#include "tui/internal.h"

#include <string.h>
#include <wchar.h>

int tui_utf8_next(const char *s, int n, unsigned *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    if (n <= 0) {
        *cp = 0;
        return 1;
    }
    unsigned c = u[0];
    int need;
    unsigned min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    } else if ((c & 0xE0) == 0xC0) {
        need = 1;
        c &= 0x1F;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        need = 2;
        c &= 0x0F;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        need = 3;
        c &= 0x07;
        min = 0x10000;
    } else {
        *cp = 0xFFFD;
        return 1;
    }
    if (n < need + 1) {
        *cp = 0xFFFD;
        return 1;
    }
    for (int i = 1; i <= need; i++) {
        if ((u[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        c = (c << 6) | (u[i] & 0x3F);
    }
    /* overlong forms, surrogates and values past Unicode are invalid */
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) {
        *cp = 0xFFFD;
        return 1;
    }
    *cp = c;
    return need + 1;
}

int tui_cp_width(unsigned cp)
{
    if (cp < 0x80)
        return 1; /* controls included: they are drawn as '?' */
    int w = wcwidth((wchar_t)cp);
    return w < 0 ? 1 : w;
}

int tui_str_width(const char *s, int len)
{
    int w = 0;
    for (int i = 0; i < len;) {
        unsigned cp;
        i += tui_utf8_next(s + i, len - i, &cp);
        w += tui_cp_width(cp);
    }
    return w;
}

int tui_fit(const char *s, int len, int cols, int *used)
{
    int w = 0, i = 0;
    while (i < len) {
        unsigned cp;
        int n = tui_utf8_next(s + i, len - i, &cp);
        int cw = tui_cp_width(cp);
        if (w + cw > cols)
            break;
        w += cw;
        i += n;
    }
    /* combining marks that follow belong with the last character */
    while (i < len) {
        unsigned cp;
        int n = tui_utf8_next(s + i, len - i, &cp);
        if (tui_cp_width(cp) != 0)
            break;
        i += n;
    }
    if (used)
        *used = w;
    return i;
}

int tui_col_to_byte(const char *s, int len, int col)
{
    int w = 0, i = 0;
    while (i < len) {
        unsigned cp;
        int n = tui_utf8_next(s + i, len - i, &cp);
        int cw = tui_cp_width(cp);
        if (w + cw > col)
            return i;
        w += cw;
        i += n;
    }
    return len;
}

int tui_wrap(const char *text, int len, int width, tui_wrap_fn *fn, void *ud)
{
    if (width < 1)
        width = 1;
    int pieces = 0;
    int i = 0;
    while (i < len) {
        /* one paragraph: up to the next newline */
        int end = i;
        while (end < len && text[end] != '\n')
            end++;
        int p = i;
        if (p == end) {
            fn(text + p, 0, ud);
            pieces++;
        }
        while (p < end) {
            int used;
            int fit = tui_fit(text + p, end - p, width, &used);
            if (p + fit >= end) {
                fn(text + p, end - p, ud);
                pieces++;
                break;
            }
            /* break after the last blank inside what fits */
            int brk = -1;
            for (int k = fit; k > 0; k--) {
                if (text[p + k] == ' ') {
                    brk = k;
                    break;
                }
            }
            if (brk > 0) {
                int l = brk;
                while (l > 0 && text[p + l - 1] == ' ')
                    l--;
                fn(text + p, l, ud);
                p += brk;
                while (p < end && text[p] == ' ')
                    p++;
            } else {
                if (fit == 0) /* a character wider than the pane: show it alone */
                    fit = tui_utf8_next(text + p, end - p, &(unsigned){0});
                fn(text + p, fit, ud);
                p += fit;
            }
            pieces++;
        }
        i = end + 1;
    }
    return pieces;
}

static void add_piece(const char *s, int len, void *ud)
{
    tui_lines_add(ud, s, len, TUI_R_NORMAL);
}

int tui_wrap_lines(const char *text, int width, tui_lines *out)
{
    return tui_wrap(text, (int)strlen(text), width, add_piece, out);
}
