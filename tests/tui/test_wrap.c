/* test_wrap.c -- display widths and wrapping of wide characters (tui/wrap.c). */
#include "tests/tui/tuitest.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

static void utf8_locale(void)
{
    if (setlocale(LC_CTYPE, "C.UTF-8") == NULL)
        cr_skip_test("no C.UTF-8 locale");
}

TestSuite(wrap, .init = utf8_locale);

typedef struct pieces {
    char *p[64];
    int n;
} pieces;

static void collect(const char *s, int len, void *ud)
{
    pieces *ps = ud;
    cr_assert_lt(ps->n, 64);
    ps->p[ps->n++] = dt_xstrndup(s, (size_t)len);
}

static void free_pieces(pieces *ps)
{
    for (int i = 0; i < ps->n; i++)
        free(ps->p[i]);
    ps->n = 0;
}

static int valid_utf8(const char *s)
{
    int n = (int)strlen(s);
    for (int i = 0; i < n;) {
        unsigned cp;
        int k = tui_utf8_next(s + i, n - i, &cp);
        if (cp == 0xFFFD)
            return 0;
        i += k;
    }
    return 1;
}

Test(wrap, widths_should_count_columns_not_bytes)
{
    cr_assert_eq(tui_str_width("abc", 3), 3);
    cr_assert_eq(tui_str_width("日本語", (int)strlen("日本語")), 6);
    cr_assert_eq(tui_str_width("größe", (int)strlen("größe")), 5);
    /* a combining acute accent adds no column */
    cr_assert_eq(tui_str_width("e\xcc\x81", 3), 1);
    /* braille (the roofline) is one column a cell */
    cr_assert_eq(tui_str_width("⣿⣀", (int)strlen("⣿⣀")), 2);
    /* an invalid byte is shown as one '?' */
    cr_assert_eq(tui_str_width("a\xffz", 3), 3);
    unsigned cp;
    cr_assert_eq(tui_utf8_next("\xc0\xaf", 2, &cp), 1, "overlong form");
    cr_assert_eq(cp, 0xFFFD);
    cr_assert_eq(tui_utf8_next("\xe2\x82", 2, &cp), 1, "cut short");
    cr_assert_eq(tui_utf8_next("€", 3, &cp), 3);
    cr_assert_eq(cp, 0x20AC);
}

Test(wrap, fitting_should_never_split_a_wide_character)
{
    const char *s = "日本語";
    int used;
    cr_assert_eq(tui_fit(s, (int)strlen(s), 5, &used), 6);
    cr_assert_eq(used, 4);
    cr_assert_eq(tui_fit(s, (int)strlen(s), 1, &used), 0);
    cr_assert_eq(tui_fit(s, (int)strlen(s), 6, &used), 9);
    /* the combining mark stays with its letter */
    cr_assert_eq(tui_fit("e\xcc\x81x", 4, 1, &used), 3);
    cr_assert_eq(tui_col_to_byte(s, (int)strlen(s), 3), 3);
    cr_assert_eq(tui_col_to_byte(s, (int)strlen(s), 4), 6);
}

Test(wrap, words_should_break_at_blanks)
{
    pieces ps = {0};
    const char *t = "the quick brown fox jumps";
    cr_assert_eq(tui_wrap(t, (int)strlen(t), 10, collect, &ps), 3);
    cr_assert_str_eq(ps.p[0], "the quick");
    cr_assert_str_eq(ps.p[1], "brown fox");
    cr_assert_str_eq(ps.p[2], "jumps");
    free_pieces(&ps);
    /* a word longer than the line is cut at the edge */
    t = "abcdefghijklmnop qr";
    tui_wrap(t, (int)strlen(t), 6, collect, &ps);
    cr_assert_str_eq(ps.p[0], "abcdef");
    cr_assert_str_eq(ps.p[1], "ghijkl");
    cr_assert_str_eq(ps.p[2], "mnop");
    cr_assert_str_eq(ps.p[3], "qr");
    free_pieces(&ps);
    /* newlines end lines; an empty line stays */
    t = "one\n\ntwo\n";
    cr_assert_eq(tui_wrap(t, (int)strlen(t), 20, collect, &ps), 3);
    cr_assert_str_eq(ps.p[1], "");
    free_pieces(&ps);
    cr_assert_eq(tui_wrap("", 0, 20, collect, &ps), 0);
}

Test(wrap, wide_text_should_wrap_by_columns)
{
    pieces ps = {0};
    const char *t = "日本語のテキストを折り返す";
    tui_wrap(t, (int)strlen(t), 5, collect, &ps);
    dt_buf joined = DT_BUF_INIT;
    for (int i = 0; i < ps.n; i++) {
        int w = tui_str_width(ps.p[i], (int)strlen(ps.p[i]));
        cr_assert_leq(w, 5, "piece %d is %d columns", i, w);
        if (i < ps.n - 1)
            cr_assert_geq(w, 4, "piece %d wastes the line", i);
        cr_assert(valid_utf8(ps.p[i]), "piece %d cut a character", i);
        dt_buf_puts(&joined, ps.p[i]);
    }
    cr_assert_str_eq(joined.data, t);
    cr_assert_eq(ps.n, 7);
    free_pieces(&ps);
    dt_buf_free(&joined);
    /* mixed: blanks still win over the edge */
    t = "カーネル v2 は 1.93x 速い";
    tui_wrap(t, (int)strlen(t), 12, collect, &ps);
    for (int i = 0; i < ps.n; i++)
        cr_assert_leq(tui_str_width(ps.p[i], (int)strlen(ps.p[i])), 12);
    cr_assert_str_eq(ps.p[0], "カーネル v2");
    free_pieces(&ps);
    /* a character wider than the pane still comes out, alone */
    tui_wrap("日本", 6, 1, collect, &ps);
    cr_assert_eq(ps.n, 2);
    cr_assert_str_eq(ps.p[0], "日");
    free_pieces(&ps);
}
