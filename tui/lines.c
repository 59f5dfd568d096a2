/* lines.c -- styled lines: what every pane builds and draws. */
#include "tui/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

tui_line *tui_lines_add(tui_lines *l, const char *text, int len, int role)
{
    if (len < 0)
        len = (int)strlen(text);
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = dt_xrealloc(l->v, (size_t)l->cap * sizeof *l->v);
    }
    tui_line *ln = &l->v[l->n++];
    memset(ln, 0, sizeof *ln);
    ln->role = role;
    /* Tabs become spaces and control bytes '?': a terminal would move the
     * cursor for them, and widths would no longer add up. */
    int tabs = 0;
    for (int i = 0; i < len; i++)
        tabs += text[i] == '\t';
    ln->text = dt_xmalloc((size_t)len + (size_t)tabs * 3 + 1);
    int o = 0;
    for (int i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == '\t') {
            int n = 4 - (o % 4);
            for (int k = 0; k < n; k++)
                ln->text[o++] = ' ';
        } else if (c < 0x20 || c == 0x7f) {
            ln->text[o++] = '?';
        } else {
            ln->text[o++] = (char)c;
        }
    }
    ln->text[o] = '\0';
    ln->len = o;
    return ln;
}

tui_line *tui_lines_addf(tui_lines *l, int role, const char *fmt, ...)
{
    dt_buf b = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    tui_line *ln = tui_lines_add(l, dt_buf_str(&b), (int)b.len, role);
    dt_buf_free(&b);
    return ln;
}

void tui_line_span(tui_line *ln, int off, int len, int role)
{
    if (off < 0 || len <= 0 || off >= ln->len)
        return;
    if (off + len > ln->len)
        len = ln->len - off;
    ln->spans = dt_xrealloc(ln->spans, (size_t)(ln->nspans + 1) * sizeof *ln->spans);
    ln->spans[ln->nspans++] = (tui_span){off, len, role};
}

void tui_line_set_link(tui_line *ln, const char *id)
{
    free(ln->link);
    ln->link = id ? dt_xstrdup(id) : NULL;
}

void tui_lines_clear(tui_lines *l)
{
    for (int i = 0; i < l->n; i++) {
        free(l->v[i].text);
        free(l->v[i].spans);
        free(l->v[i].link);
    }
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

static int contains_nocase(const char *hay, const char *needle)
{
    size_t n = strlen(needle);
    if (n == 0)
        return 0;
    for (const char *p = hay; *p; p++) {
        size_t i = 0;
        while (i < n && p[i]) {
            char a = p[i], b = needle[i];
            if (a >= 'A' && a <= 'Z')
                a = (char)(a - 'A' + 'a');
            if (b >= 'A' && b <= 'Z')
                b = (char)(b - 'A' + 'a');
            if (a != b)
                break;
            i++;
        }
        if (i == n)
            return 1;
    }
    return 0;
}

int tui_lines_find(const tui_lines *l, const char *needle, int from, int dir)
{
    if (l->n == 0 || needle == NULL || *needle == '\0')
        return -1;
    if (from < 0)
        from = 0;
    if (from >= l->n)
        from = l->n - 1;
    for (int k = 0; k < l->n; k++) {
        int i = ((from + (dir < 0 ? -k : k)) % l->n + l->n) % l->n;
        if (contains_nocase(l->v[i].text, needle))
            return i;
    }
    return -1;
}
