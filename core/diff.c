/* diff.c -- line and word diff: Myers' O(ND) algorithm in linear space. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

/* ---- interning: equal lines (or tokens) get equal ids ------------------- */

/* Sequences are compared as ints so the inner loops of the algorithm never
 * touch text; a hash table gives each distinct string one id. */
typedef struct intern {
    const char **s;
    int *len;
    uint64_t *h;
    int *id;
    size_t cap; /* slots, a power of two */
    int next;
} intern;

static void intern_init(intern *t, size_t expect)
{
    size_t cap = 16;
    while (cap < expect * 2 + 1)
        cap <<= 1;
    t->cap = cap;
    t->s = dt_xcalloc(cap, sizeof *t->s);
    t->len = dt_xcalloc(cap, sizeof *t->len);
    t->h = dt_xcalloc(cap, sizeof *t->h);
    t->id = dt_xcalloc(cap, sizeof *t->id);
    t->next = 0;
}

static void intern_free(intern *t)
{
    free(t->s);
    free(t->len);
    free(t->h);
    free(t->id);
}

/* The table is sized for every string up front (expect), so it never fills. */
static int intern_id(intern *t, const char *s, int len)
{
    uint64_t h = dt_hash64(s, (size_t)len, DT_HASH_SEED);
    size_t i = (size_t)h & (t->cap - 1);
    while (t->s[i] != NULL) {
        if (t->h[i] == h && t->len[i] == len && memcmp(t->s[i], s, (size_t)len) == 0)
            return t->id[i];
        i = (i + 1) & (t->cap - 1);
    }
    t->s[i] = s;
    t->len[i] = len;
    t->h[i] = h;
    t->id[i] = t->next++;
    return t->id[i];
}

/* ---- the algorithm ------------------------------------------------------ */

/* Marks changed elements: da[i] = 1 when a[i] is deleted, db[j] = 1 when
 * b[j] is inserted. The V arrays are allocated once for the whole problem
 * and reused by every bisection (each call finishes with them before it
 * recurses). */
typedef struct myers {
    const int *a, *b;
    char *da, *db;
    int *v1, *v2;
} myers;

static void compare(myers *m, int a0, int a1, int b0, int b1);

/* The middle snake of a[a0..a1) x b[b0..b1) (both non-empty, no common
 * prefix or suffix), after diff-match-patch's bisect: forward and reverse
 * D-paths grow until they overlap; the overlap splits the problem into two
 * halves whose edit distances add up to the minimum. */
static void bisect(myers *m, int a0, int a1, int b0, int b1)
{
    const int *a = m->a + a0, *b = m->b + b0;
    int n = a1 - a0, mm = b1 - b0;
    int max_d = (n + mm + 1) / 2;
    int off = max_d, vlen = 2 * max_d + 2;
    int *v1 = m->v1, *v2 = m->v2;
    for (int i = 0; i < vlen; i++) {
        v1[i] = -1;
        v2[i] = -1;
    }
    v1[off + 1] = 0;
    v2[off + 1] = 0;
    int delta = n - mm;
    int front = (delta & 1) != 0; /* odd: the forward path meets the reverse one */
    int k1start = 0, k1end = 0, k2start = 0, k2end = 0;
    for (int d = 0; d < max_d; d++) {
        for (int k1 = -d + k1start; k1 <= d - k1end; k1 += 2) {
            int k1o = off + k1;
            int x1;
            if (k1 == -d || (k1 != d && v1[k1o - 1] < v1[k1o + 1]))
                x1 = v1[k1o + 1];
            else
                x1 = v1[k1o - 1] + 1;
            int y1 = x1 - k1;
            while (x1 < n && y1 < mm && a[x1] == b[y1]) {
                x1++;
                y1++;
            }
            v1[k1o] = x1;
            if (x1 > n) {
                k1end += 2; /* ran off the right edge */
            } else if (y1 > mm) {
                k1start += 2; /* ran off the bottom */
            } else if (front) {
                int k2o = off + delta - k1;
                if (k2o >= 0 && k2o < vlen && v2[k2o] != -1) {
                    int x2 = n - v2[k2o];
                    if (x1 >= x2) {
                        compare(m, a0, a0 + x1, b0, b0 + y1);
                        compare(m, a0 + x1, a1, b0 + y1, b1);
                        return;
                    }
                }
            }
        }
        for (int k2 = -d + k2start; k2 <= d - k2end; k2 += 2) {
            int k2o = off + k2;
            int x2;
            if (k2 == -d || (k2 != d && v2[k2o - 1] < v2[k2o + 1]))
                x2 = v2[k2o + 1];
            else
                x2 = v2[k2o - 1] + 1;
            int y2 = x2 - k2;
            while (x2 < n && y2 < mm && a[n - x2 - 1] == b[mm - y2 - 1]) {
                x2++;
                y2++;
            }
            v2[k2o] = x2;
            if (x2 > n) {
                k2end += 2;
            } else if (y2 > mm) {
                k2start += 2;
            } else if (!front) {
                int k1o = off + delta - k2;
                if (k1o >= 0 && k1o < vlen && v1[k1o] != -1) {
                    int x1 = v1[k1o];
                    int y1 = off + x1 - k1o;
                    if (x1 >= n - x2) {
                        compare(m, a0, a0 + x1, b0, b0 + y1);
                        compare(m, a0 + x1, a1, b0 + y1, b1);
                        return;
                    }
                }
            }
        }
    }
    /* No common element at all: everything goes. */
    memset(m->da + a0, 1, (size_t)n);
    memset(m->db + b0, 1, (size_t)mm);
}

static void compare(myers *m, int a0, int a1, int b0, int b1)
{
    /* Common prefix and suffix cost nothing and guarantee the bisection
     * makes progress. */
    while (a0 < a1 && b0 < b1 && m->a[a0] == m->b[b0]) {
        a0++;
        b0++;
    }
    while (a0 < a1 && b0 < b1 && m->a[a1 - 1] == m->b[b1 - 1]) {
        a1--;
        b1--;
    }
    if (a0 == a1) {
        memset(m->db + b0, 1, (size_t)(b1 - b0));
        return;
    }
    if (b0 == b1) {
        memset(m->da + a0, 1, (size_t)(a1 - a0));
        return;
    }
    bisect(m, a0, a1, b0, b1);
}

/* Diff two id sequences into change marks (da, db caller-allocated, zeroed). */
static void diff_ids(const int *a, int n, const int *b, int mm, char *da, char *db)
{
    myers m = {.a = a, .b = b, .da = da, .db = db};
    int vlen = (n + mm + 1) / 2 * 2 + 4;
    m.v1 = dt_xmalloc((size_t)vlen * sizeof(int));
    m.v2 = dt_xmalloc((size_t)vlen * sizeof(int));
    compare(&m, 0, n, 0, mm);
    free(m.v1);
    free(m.v2);
}

/* ---- lines -------------------------------------------------------------- */

static int split_lines(char *text, const char ***line, int **len)
{
    int n = 0, cap = 0;
    *line = NULL;
    *len = NULL;
    char *p = text;
    while (*p) {
        char *nl = strchr(p, '\n');
        int l = nl ? (int)(nl - p) : (int)strlen(p);
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            *line = dt_xrealloc((void *)*line, (size_t)cap * sizeof **line);
            *len = dt_xrealloc(*len, (size_t)cap * sizeof **len);
        }
        (*line)[n] = p;
        (*len)[n] = l;
        n++;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    return n;
}

/* Walk the marks into a script: within a change block deletes come first. */
static int build_script(const char *da, int n, const char *db, int mm, dt_diff_line *ops)
{
    int i = 0, j = 0, k = 0;
    while (i < n || j < mm) {
        if (i < n && da[i]) {
            ops[k++] = (dt_diff_line){DT_DIFF_DELETE, i++, -1};
        } else if (j < mm && db[j]) {
            ops[k++] = (dt_diff_line){DT_DIFF_INSERT, -1, j++};
        } else {
            ops[k++] = (dt_diff_line){DT_DIFF_EQUAL, i++, j++};
        }
    }
    return k;
}

void dt_diff_text(const char *a, const char *b, dt_diff *out)
{
    memset(out, 0, sizeof *out);
    out->a_text = dt_xstrdup(a ? a : "");
    out->b_text = dt_xstrdup(b ? b : "");
    out->na = split_lines(out->a_text, &out->a_line, &out->a_len);
    out->nb = split_lines(out->b_text, &out->b_line, &out->b_len);
    int n = out->na, mm = out->nb;
    intern t;
    intern_init(&t, (size_t)n + (size_t)mm);
    int *ia = dt_xmalloc(((size_t)n + 1) * sizeof *ia);
    int *ib = dt_xmalloc(((size_t)mm + 1) * sizeof *ib);
    for (int i = 0; i < n; i++)
        ia[i] = intern_id(&t, out->a_line[i], out->a_len[i]);
    for (int j = 0; j < mm; j++)
        ib[j] = intern_id(&t, out->b_line[j], out->b_len[j]);
    intern_free(&t);
    char *da = dt_xcalloc((size_t)n + 1, 1);
    char *db = dt_xcalloc((size_t)mm + 1, 1);
    diff_ids(ia, n, ib, mm, da, db);
    out->ops = dt_xmalloc(((size_t)n + (size_t)mm + 1) * sizeof *out->ops);
    out->nops = build_script(da, n, db, mm, out->ops);
    for (int i = 0; i < n; i++)
        out->ndel += da[i];
    for (int j = 0; j < mm; j++)
        out->nins += db[j];
    free(ia);
    free(ib);
    free(da);
    free(db);
}

void dt_diff_free(dt_diff *d)
{
    if (d == NULL)
        return;
    free(d->ops);
    free((void *)d->a_line);
    free((void *)d->b_line);
    free(d->a_len);
    free(d->b_len);
    free(d->a_text);
    free(d->b_text);
    memset(d, 0, sizeof *d);
}

int dt_diff_hunks(const dt_diff *d, int context, dt_diff_hunk **out)
{
    *out = NULL;
    if (context < 0)
        context = 0;
    int n = 0, cap = 0;
    int i = 0;
    while (i < d->nops) {
        if (d->ops[i].op == DT_DIFF_EQUAL) {
            i++;
            continue;
        }
        int start = i - context < 0 ? 0 : i - context;
        /* a change: extend over changes separated by at most 2*context equals */
        int end = i;
        for (;;) {
            while (end < d->nops && d->ops[end].op != DT_DIFF_EQUAL)
                end++;
            int eq = end;
            while (eq < d->nops && d->ops[eq].op == DT_DIFF_EQUAL && eq - end <= 2 * context)
                eq++;
            if (eq < d->nops && d->ops[eq].op != DT_DIFF_EQUAL && eq - end <= 2 * context) {
                end = eq;
                continue;
            }
            end = end + context > d->nops ? d->nops : end + context;
            break;
        }
        /* the first lines of each side the hunk covers */
        int a0 = -1, b0 = -1, alen = 0, blen = 0;
        for (int k = start; k < end; k++) {
            const dt_diff_line *l = &d->ops[k];
            if (l->a >= 0) {
                if (a0 < 0)
                    a0 = l->a;
                alen++;
            }
            if (l->b >= 0) {
                if (b0 < 0)
                    b0 = l->b;
                blen++;
            }
        }
        /* An empty side sits before the line that follows (unified's rule:
         * "-0,0" at the top, else the line before it). */
        if (a0 < 0) {
            a0 = 0;
            for (int k = start; k >= 0; k--)
                if (d->ops[k].a >= 0) {
                    a0 = d->ops[k].a + 1;
                    break;
                }
        }
        if (b0 < 0) {
            b0 = 0;
            for (int k = start; k >= 0; k--)
                if (d->ops[k].b >= 0) {
                    b0 = d->ops[k].b + 1;
                    break;
                }
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            *out = dt_xrealloc(*out, (size_t)cap * sizeof **out);
        }
        (*out)[n++] = (dt_diff_hunk){start, end, a0, alen, b0, blen};
        i = end;
    }
    return n;
}

/* ---- words -------------------------------------------------------------- */

static int is_word(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c >= 0x80;
}

/* Token boundaries of s: starts[i], with starts[n] = len. Bytes >= 0x80
 * join word runs, so a UTF-8 sequence is never cut. */
static int tokenize(const char *s, int len, int **starts)
{
    int n = 0;
    *starts = dt_xmalloc(((size_t)len + 1) * sizeof **starts);
    int i = 0;
    while (i < len) {
        (*starts)[n++] = i;
        unsigned char c = (unsigned char)s[i];
        if (is_word(c)) {
            while (i < len && is_word((unsigned char)s[i]))
                i++;
        } else if (c == ' ' || c == '\t') {
            while (i < len && (s[i] == ' ' || s[i] == '\t'))
                i++;
        } else {
            i++;
        }
    }
    (*starts)[n] = len;
    return n;
}

static int spans_from_marks(const char *mark, const int *starts, int n, dt_diff_span **out)
{
    int cnt = 0;
    *out = NULL;
    for (int i = 0; i < n; i++) {
        if (!mark[i])
            continue;
        int off = starts[i], end = starts[i + 1];
        while (i + 1 < n && mark[i + 1])
            end = starts[++i + 1];
        *out = dt_xrealloc(*out, (size_t)(cnt + 1) * sizeof **out);
        (*out)[cnt++] = (dt_diff_span){off, end - off};
    }
    return cnt;
}

void dt_diff_words(const char *a, int alen, const char *b, int blen, dt_diff_span **adel,
                   int *nadel, dt_diff_span **bins, int *nbins)
{
    int *sa, *sb;
    int n = tokenize(a, alen, &sa);
    int mm = tokenize(b, blen, &sb);
    intern t;
    intern_init(&t, (size_t)n + (size_t)mm);
    int *ia = dt_xmalloc(((size_t)n + 1) * sizeof *ia);
    int *ib = dt_xmalloc(((size_t)mm + 1) * sizeof *ib);
    for (int i = 0; i < n; i++)
        ia[i] = intern_id(&t, a + sa[i], sa[i + 1] - sa[i]);
    for (int j = 0; j < mm; j++)
        ib[j] = intern_id(&t, b + sb[j], sb[j + 1] - sb[j]);
    intern_free(&t);
    char *da = dt_xcalloc((size_t)n + 1, 1);
    char *db = dt_xcalloc((size_t)mm + 1, 1);
    diff_ids(ia, n, ib, mm, da, db);
    *nadel = spans_from_marks(da, sa, n, adel);
    *nbins = spans_from_marks(db, sb, mm, bins);
    free(ia);
    free(ib);
    free(da);
    free(db);
    free(sa);
    free(sb);
}

/* ---- unified ------------------------------------------------------------ */

static void range(dt_buf *out, int start, int len)
{
    if (len == 1)
        dt_buf_printf(out, "%d", start + 1);
    else
        dt_buf_printf(out, "%d,%d", len ? start + 1 : start, len);
}

void dt_diff_unified(const dt_diff *d, const char *a_name, const char *b_name, int context,
                     dt_buf *out)
{
    dt_diff_hunk *h;
    int nh = dt_diff_hunks(d, context, &h);
    if (nh == 0)
        return;
    dt_buf_printf(out, "--- %s\n+++ %s\n", a_name ? a_name : "a", b_name ? b_name : "b");
    for (int i = 0; i < nh; i++) {
        /* as GNU diff writes them: lines from 1, an empty side names the
         * line before it, a count of one is left out */
        dt_buf_puts(out, "@@ -");
        range(out, h[i].a0, h[i].alen);
        dt_buf_puts(out, " +");
        range(out, h[i].b0, h[i].blen);
        dt_buf_puts(out, " @@\n");
        for (int k = h[i].start; k < h[i].end; k++) {
            const dt_diff_line *l = &d->ops[k];
            if (l->op == DT_DIFF_INSERT) {
                dt_buf_putc(out, '+');
                dt_buf_append(out, d->b_line[l->b], (size_t)d->b_len[l->b]);
            } else {
                dt_buf_putc(out, l->op == DT_DIFF_DELETE ? '-' : ' ');
                dt_buf_append(out, d->a_line[l->a], (size_t)d->a_len[l->a]);
            }
            dt_buf_putc(out, '\n');
        }
    }
    free(h);
}
