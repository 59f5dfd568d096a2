/* test_diff.c -- the line and word diff (core/diff.c) the source pane draws. */
#include "tests/tui/tuitest.h"

#include <stdlib.h>
#include <string.h>

/* Every line of both texts appears once, in order, and the equal pairs
 * really are equal: the script rebuilds both sides. */
static void check_script(const dt_diff *d)
{
    int ia = 0, ib = 0, del = 0, ins = 0;
    for (int k = 0; k < d->nops; k++) {
        const dt_diff_line *l = &d->ops[k];
        if (l->op != DT_DIFF_INSERT)
            cr_assert_eq(l->a, ia++, "op %d: a %d", k, l->a);
        if (l->op != DT_DIFF_DELETE)
            cr_assert_eq(l->b, ib++, "op %d: b %d", k, l->b);
        if (l->op == DT_DIFF_EQUAL) {
            cr_assert_eq(d->a_len[l->a], d->b_len[l->b]);
            cr_assert(memcmp(d->a_line[l->a], d->b_line[l->b], (size_t)d->a_len[l->a]) == 0);
        }
        del += l->op == DT_DIFF_DELETE;
        ins += l->op == DT_DIFF_INSERT;
    }
    cr_assert_eq(ia, d->na);
    cr_assert_eq(ib, d->nb);
    cr_assert_eq(del, d->ndel);
    cr_assert_eq(ins, d->nins);
}

/* Lines as one character each: "abc" -> "a\nb\nc\n". */
static char *chars_as_lines(const char *s)
{
    dt_buf b = DT_BUF_INIT;
    for (; *s; s++) {
        dt_buf_putc(&b, *s);
        dt_buf_putc(&b, '\n');
    }
    return dt_buf_take(&b);
}

static int lcs(const char *a, const char *b)
{
    int n = (int)strlen(a), m = (int)strlen(b);
    int *t = dt_xcalloc((size_t)(n + 1) * (size_t)(m + 1), sizeof *t);
    for (int i = n - 1; i >= 0; i--)
        for (int j = m - 1; j >= 0; j--)
            t[i * (m + 1) + j] = a[i] == b[j] ? 1 + t[(i + 1) * (m + 1) + j + 1]
                                 : t[(i + 1) * (m + 1) + j] > t[i * (m + 1) + j + 1]
                                     ? t[(i + 1) * (m + 1) + j]
                                     : t[i * (m + 1) + j + 1];
    int r = t[0];
    free(t);
    return r;
}

Test(diff, equal_texts_should_have_no_change)
{
    dt_diff d;
    dt_diff_text("a\nb\nc\n", "a\nb\nc", &d);
    cr_assert_eq(d.na, 3);
    cr_assert_eq(d.nb, 3);
    cr_assert_eq(d.ndel + d.nins, 0);
    check_script(&d);
    dt_diff_hunk *h;
    cr_assert_eq(dt_diff_hunks(&d, 3, &h), 0);
    cr_assert_null(h);
    dt_buf u = DT_BUF_INIT;
    dt_diff_unified(&d, "a", "b", 3, &u);
    cr_assert_eq(u.len, 0);
    dt_diff_free(&d);
    dt_diff_free(&d); /* freed twice: a no-op */
}

Test(diff, empty_sides_should_be_all_inserts_or_all_deletes)
{
    dt_diff d;
    dt_diff_text(NULL, "x\ny\n", &d);
    cr_assert_eq(d.nins, 2);
    cr_assert_eq(d.ndel, 0);
    check_script(&d);
    dt_diff_free(&d);
    dt_diff_text("x\ny\n", "", &d);
    cr_assert_eq(d.ndel, 2);
    cr_assert_eq(d.nins, 0);
    check_script(&d);
    dt_diff_free(&d);
}

Test(diff, the_paper_example_should_take_five_edits)
{
    /* Myers' example: abcabba -> cbabac has edit distance 5. */
    char *a = chars_as_lines("abcabba"), *b = chars_as_lines("cbabac");
    dt_diff d;
    dt_diff_text(a, b, &d);
    cr_assert_eq(d.ndel + d.nins, 5);
    check_script(&d);
    dt_diff_free(&d);
    free(a);
    free(b);
}

Test(diff, random_texts_should_get_a_minimal_script)
{
    /* Against a dynamic-programming LCS: D = n + m - 2 LCS. A small
     * alphabet makes many equal lines, where a wrong snake shows. */
    dt_rng r;
    dt_rng_seed(&r, 7);
    for (int trial = 0; trial < 300; trial++) {
        char a[80], b[80];
        int n = (int)dt_rng_below(&r, 60), m = (int)dt_rng_below(&r, 60);
        int sigma = 2 + (int)dt_rng_below(&r, 4);
        for (int i = 0; i < n; i++)
            a[i] = (char)('a' + dt_rng_below(&r, (uint64_t)sigma));
        for (int i = 0; i < m; i++)
            b[i] = (char)('a' + dt_rng_below(&r, (uint64_t)sigma));
        a[n] = b[m] = '\0';
        char *la = chars_as_lines(a), *lb = chars_as_lines(b);
        dt_diff d;
        dt_diff_text(la, lb, &d);
        check_script(&d);
        cr_assert_eq(d.ndel + d.nins, n + m - 2 * lcs(a, b), "trial %d: %s -> %s", trial, a, b);
        dt_diff_free(&d);
        free(la);
        free(lb);
    }
}

/* 2,000 distinct lines of kernel-like code. */
static char *code_lines(int n, dt_buf *b)
{
    for (int i = 0; i < n; i++)
        dt_buf_printf(b, "    acc%d += val[k + %d] * x[col[k + %d]];\n", i, i, i);
    return b->data;
}

Test(diff, a_2000_line_kernel_should_diff_exactly_and_fast)
{
    dt_buf a = DT_BUF_INIT;
    code_lines(2000, &a);
    /* b: 20 lines replaced, 15 deleted, 25 inserted, at scattered places */
    dt_buf b = DT_BUF_INIT;
    const char *p = a.data;
    int line = 0, rep = 0, del = 0, ins = 0;
    while (*p) {
        const char *nl = strchr(p, '\n');
        if (line % 97 == 5 && rep < 20) {
            dt_buf_printf(&b, "    acc%d = fmaf(val[k], x[col[k]], acc%d); // v2\n", line, line);
            rep++;
        } else if (line % 89 == 7 && del < 15) {
            del++;
        } else {
            dt_buf_append(&b, p, (size_t)(nl - p + 1));
        }
        if (line % 79 == 11 && ins < 25) {
            dt_buf_printf(&b, "    __syncwarp(); // inserted %d\n", ins);
            ins++;
        }
        line++;
        p = nl + 1;
    }
    cr_assert_eq(rep, 20);
    cr_assert_eq(del, 15);
    cr_assert_eq(ins, 25);
    double t0 = dt_now();
    dt_diff d;
    dt_diff_text(a.data, b.data, &d);
    double secs = dt_now() - t0;
    check_script(&d);
    /* every line is distinct, so the minimal script is exactly the edits */
    cr_assert_eq(d.ndel, rep + del);
    cr_assert_eq(d.nins, rep + ins);
    cr_assert_lt(secs, 2.0, "took %.3f s", secs);
    dt_diff_free(&d);

    /* nothing in common: D = 4,000, still linear memory */
    dt_buf c = DT_BUF_INIT;
    for (int i = 0; i < 2000; i++)
        dt_buf_printf(&c, "other %d\n", i);
    dt_diff_text(a.data, c.data, &d);
    check_script(&d);
    cr_assert_eq(d.ndel, 2000);
    cr_assert_eq(d.nins, 2000);
    dt_diff_free(&d);
    dt_buf_free(&a);
    dt_buf_free(&b);
    dt_buf_free(&c);
}

Test(diff, unified_output_should_match_gnu_diff)
{
    const char *a = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n";
    const char *b = "0\n1\n2\n3\n4\nfive\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n18\n19\n20\n";
    dt_diff d;
    dt_diff_text(a, b, &d);
    dt_buf u = DT_BUF_INIT;
    dt_diff_unified(&d, "a", "b", 3, &u);
    /* what `diff -u` prints for these files: the first two changes share a
     * hunk (their contexts touch), the third stands alone */
    cr_assert_str_eq(u.data, "--- a\n+++ b\n"
                             "@@ -1,8 +1,9 @@\n+0\n 1\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
                             "@@ -14,7 +15,6 @@\n 14\n 15\n 16\n-17\n 18\n 19\n 20\n");
    dt_diff_hunk *h;
    cr_assert_eq(dt_diff_hunks(&d, 3, &h), 2);
    cr_assert_eq(h[0].a0, 0);
    cr_assert_eq(h[0].alen, 8);
    cr_assert_eq(h[1].b0, 14);
    free(h);
    /* no context: each change its own hunk */
    cr_assert_eq(dt_diff_hunks(&d, 0, &h), 3);
    free(h);
    dt_buf_free(&u);
    dt_diff_free(&d);

    dt_diff_text("x\n", "new\nx\n", &d);
    dt_diff_unified(&d, "a", "b", 3, &u);
    cr_assert_str_eq(u.data, "--- a\n+++ b\n@@ -1 +1,2 @@\n+new\n x\n");
    dt_buf_free(&u);
    dt_diff_free(&d);
}

Test(diff, words_should_mark_only_what_changed)
{
    const char *a = "    int x = a + b;";
    const char *b = "    int y = a + c;";
    dt_diff_span *da, *db;
    int na, nb;
    dt_diff_words(a, (int)strlen(a), b, (int)strlen(b), &da, &na, &db, &nb);
    cr_assert_eq(na, 2);
    cr_assert_eq(nb, 2);
    cr_assert_eq(da[0].off, 8);
    cr_assert_eq(da[0].len, 1);
    cr_assert_eq(a[da[1].off], 'b');
    cr_assert_eq(b[db[1].off], 'c');
    free(da);
    free(db);
    /* a UTF-8 word is one token: never cut inside a character */
    const char *u1 = "// größe bleibt", *u2 = "// grösse bleibt";
    dt_diff_words(u1, (int)strlen(u1), u2, (int)strlen(u2), &da, &na, &db, &nb);
    cr_assert_eq(na, 1);
    cr_assert_eq(nb, 1);
    cr_assert_eq(da[0].off, 3);
    cr_assert_eq(da[0].len, (int)strlen("größe"));
    cr_assert_eq(db[0].len, (int)strlen("grösse"));
    free(da);
    free(db);
    /* equal lines: nothing */
    dt_diff_words(a, (int)strlen(a), a, (int)strlen(a), &da, &na, &db, &nb);
    cr_assert_eq(na + nb, 0);
    cr_assert_null(da);
    cr_assert_null(db);
}
