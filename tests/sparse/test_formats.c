/* test_formats.c -- CSR to ELL, SELL-C-sigma and BSR: layout, padding, round trips, errors. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"
#include "tests/sparse/sparse_fixtures.h"

#include <stdlib.h>
#include <string.h>

static int64_t len(const sp_csr *a, int32_t i)
{
    return a->rowptr[i + 1] - a->rowptr[i];
}

static void assert_same_csr(const sp_csr *a, const sp_csr *b, const char *what)
{
    cr_assert_eq(a->rows, b->rows, "%s: rows", what);
    cr_assert_eq(a->cols, b->cols, "%s: cols", what);
    cr_assert_eq(a->nnz, b->nnz, "%s: nnz %lld vs %lld", what, (long long)a->nnz,
                 (long long)b->nnz);
    for (int32_t i = 0; i <= a->rows; i++)
        cr_assert_eq(a->rowptr[i], b->rowptr[i], "%s: rowptr[%d]", what, i);
    for (int64_t k = 0; k < a->nnz; k++) {
        cr_assert_eq(a->col[k], b->col[k], "%s: col[%lld]", what, (long long)k);
        cr_assert_eq(a->val[k], b->val[k], "%s: val[%lld]", what, (long long)k);
    }
}

/* ---- test matrices ---------------------------------------------------------- */

static sp_csr *gen(const char *spec)
{
    dt_err e = {0};
    sp_csr *a = sp_generate(spec, &e);
    cr_assert_not_null(a, "%s: %s", spec, e.msg);
    return a;
}

/* A CSR from a row-length list, columns spread over the row, values k + 1. */
static sp_csr *from_lengths(int32_t rows, int32_t cols, const int32_t *lens)
{
    int64_t nnz = 0;
    for (int32_t i = 0; i < rows; i++)
        nnz += lens[i];
    dt_err e = {0};
    sp_csr *a = sp_csr_new(rows, cols, nnz, &e);
    cr_assert_not_null(a);
    int64_t k = 0;
    for (int32_t i = 0; i < rows; i++) {
        for (int32_t j = 0; j < lens[i]; j++) {
            a->col[k] = (int32_t)((int64_t)j * cols / lens[i]);
            a->val[k] = (double)(k + 1);
            k++;
        }
        a->rowptr[i + 1] = k;
    }
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    return a;
}

/* Generated matrices plus the edge shapes: empty, all rows empty, 1 x 1, one
 * very long row among short ones, sizes that are no multiple of any C or b. */
static sp_csr **test_matrices(int *count)
{
    static const char *specs[] = {
        "gen:uniform:rows=333,cols=517,nnz=4000",
        "gen:rmat:rows=1000,nnz=15000",
        "gen:stencil5:rows=120",
        "gen:stencil27:rows=64",
        "gen:banded:rows=101,bw=5",
        "gen:block:rows=99,cols=70,nnz=2000,b=3",
        "gen:dl:rows=77,cols=1000,nnz=3000",
    };
    int n = (int)DT_ARRAY_LEN(specs);
    sp_csr **m = calloc((size_t)n + 5, sizeof *m);
    for (int k = 0; k < n; k++)
        m[k] = gen(specs[k]);
    dt_err e = {0};
    m[n++] = sp_csr_new(0, 0, 0, &e);
    m[n] = sp_csr_new(13, 7, 0, &e);
    n++;
    int32_t one = 1;
    m[n++] = from_lengths(1, 1, &one);
    int32_t lens[37];
    for (int i = 0; i < 37; i++)
        lens[i] = i % 5 == 0 ? 0 : i % 3;
    lens[17] = 29; /* one long row */
    m[n++] = from_lengths(37, 29, lens);
    *count = n;
    return m;
}

static void free_matrices(sp_csr **m, int n)
{
    for (int k = 0; k < n; k++)
        sp_csr_free(m[k]);
    free(m);
}

/* ---- ELL ------------------------------------------------------------------------ */

static void check_ell(const sp_csr *a)
{
    dt_err e = {0};
    sp_ell *m = sp_csr_to_ell(a, 0, &e);
    cr_assert_not_null(m, "%s", e.msg);
    int64_t width = 0;
    for (int32_t i = 0; i < a->rows; i++)
        width = len(a, i) > width ? len(a, i) : width;
    cr_assert_eq(m->width, width);
    cr_assert_eq(m->nnz, a->nnz);
    cr_assert_eq(m->rows, a->rows);
    cr_assert_eq(m->cols, a->cols);
    /* back to CSR through the column-major layout; padding is col -1, val 0 */
    sp_csr *b = sp_csr_new(a->rows, a->cols, a->nnz, &e);
    int64_t out = 0;
    for (int32_t i = 0; i < m->rows; i++) {
        for (int32_t k = 0; k < m->width; k++) {
            int32_t c = m->col[(int64_t)k * m->rows + i];
            double v = m->val[(int64_t)k * m->rows + i];
            if (k >= len(a, i)) {
                cr_assert_eq(c, -1, "row %d slot %d is not marked as padding", i, k);
                cr_assert_eq(v, 0.0);
                continue;
            }
            cr_assert_leq(out, a->nnz);
            b->col[out] = c;
            b->val[out] = v;
            out++;
        }
        b->rowptr[i + 1] = out;
    }
    assert_same_csr(a, b, "ELL round trip");
    sp_csr_free(b);
    sp_ell_free(m);
}

Test(formats, ell_should_round_trip_and_mark_padding)
{
    int n = 0;
    sp_csr **m = test_matrices(&n);
    for (int k = 0; k < n; k++)
        check_ell(m[k]);
    free_matrices(m, n);
}

Test(formats, ell_over_the_limit_should_name_width_and_limit)
{
    int32_t lens[4] = {1, 9, 2, 0};
    sp_csr *a = from_lengths(4, 10, lens);
    dt_err e = {0};
    cr_assert_null(sp_csr_to_ell(a, 35, &e));
    cr_assert_str_eq(e.msg, "ELL: the longest row has 9 entries, so 4 rows x width 9 = 36 "
                            "entries, over the limit of 35");
    sp_ell *m = sp_csr_to_ell(a, 36, &e); /* exactly at the limit is fine */
    cr_assert_not_null(m, "%s", e.msg);
    sp_ell_free(m);
    sp_csr_free(a);
}

/* ---- SELL-C-sigma ------------------------------------------------------------------ */

static void check_sell(const sp_csr *a, int32_t C, int32_t sigma)
{
    dt_err e = {0};
    sp_sell *m = sp_csr_to_sell(a, C, sigma, &e);
    cr_assert_not_null(m, "C=%d sigma=%d: %s", C, sigma, e.msg);
    int64_t nslices = ((int64_t)a->rows + C - 1) / C;
    cr_assert_eq(m->nslices, nslices);
    cr_assert_eq(m->C, C);
    cr_assert_eq(m->sigma, sigma);
    cr_assert_eq(m->nnz, a->nnz);

    /* perm: a permutation of the rows, -1 past them, each row staying in its
     * sigma window, sorted by decreasing length within it */
    char *seen = calloc((size_t)a->rows + 1, 1);
    for (int64_t p = 0; p < nslices * C; p++) {
        int32_t r = m->perm[p];
        if (p >= a->rows) {
            cr_assert_eq(r, -1, "padding position %lld holds row %d", (long long)p, r);
            continue;
        }
        cr_assert(r >= 0 && r < a->rows, "perm[%lld] = %d", (long long)p, r);
        cr_assert_not(seen[r], "row %d appears twice in perm", r);
        seen[r] = 1;
        if (sigma == 1) {
            cr_assert_eq(r, p, "sigma 1 must not reorder");
        } else {
            cr_assert_eq(r / sigma, p / sigma, "row %d left its window", r);
            if (p % sigma != 0)
                cr_assert_geq(len(a, m->perm[p - 1]), len(a, r), "window not sorted at %lld",
                              (long long)p);
        }
    }
    free(seen);

    /* slices: width = longest row in the slice, offsets consistent */
    cr_assert_eq(m->slice_ptr[0], 0);
    int64_t real = 0;
    for (int64_t s = 0; s < nslices; s++) {
        int64_t width = 0;
        for (int64_t p = s * C; p < (s + 1) * C && p < a->rows; p++)
            width = len(a, m->perm[p]) > width ? len(a, m->perm[p]) : width;
        cr_assert_eq(m->slice_len[s], width, "slice %lld", (long long)s);
        cr_assert_eq(m->slice_ptr[s + 1] - m->slice_ptr[s], width * C);
        for (int64_t k = m->slice_ptr[s]; k < m->slice_ptr[s + 1]; k++)
            real += m->col[k] >= 0;
    }
    cr_assert_eq(m->stored, m->slice_ptr[nslices]);
    cr_assert_eq(real, a->nnz, "entries not marked as padding: %lld", (long long)real);

    /* back to CSR: row perm[p] at slice_ptr[s] + k * C + j, padding -1 / 0 */
    sp_csr *b = sp_csr_new(a->rows, a->cols, a->nnz, &e);
    for (int64_t p = 0; p < a->rows; p++)
        b->rowptr[m->perm[p] + 1] = len(a, m->perm[p]);
    for (int32_t i = 0; i < a->rows; i++)
        b->rowptr[i + 1] += b->rowptr[i];
    for (int64_t p = 0; p < nslices * C; p++) {
        int64_t s = p / C, j = p % C;
        int32_t r = m->perm[p];
        for (int32_t k = 0; k < m->slice_len[s]; k++) {
            int64_t at = m->slice_ptr[s] + (int64_t)k * C + j;
            if (r < 0 || k >= len(a, r)) {
                cr_assert_eq(m->col[at], -1, "slice %lld lane %lld slot %d not padding",
                             (long long)s, (long long)j, k);
                cr_assert_eq(m->val[at], 0.0);
                continue;
            }
            b->col[b->rowptr[r] + k] = m->col[at];
            b->val[b->rowptr[r] + k] = m->val[at];
        }
    }
    assert_same_csr(a, b, "SELL round trip");
    sp_csr_free(b);
    sp_sell_free(m);
}

Test(formats, sell_should_round_trip_with_a_valid_permutation)
{
    static const int32_t shapes[][2] = {{1, 1},   {4, 1},     {4, 8}, {8, 64},
                                        {32, 32}, {32, 1024}, {3, 9}, {1024, 1024}};
    int n = 0;
    sp_csr **m = test_matrices(&n);
    for (int k = 0; k < n; k++) {
        for (size_t s = 0; s < DT_ARRAY_LEN(shapes); s++)
            check_sell(m[k], shapes[s][0], shapes[s][1]);
    }
    free_matrices(m, n);
}

Test(formats, sell_should_sort_long_rows_first_within_a_window)
{
    int32_t lens[6] = {1, 3, 2, 0, 5, 4};
    sp_csr *a = from_lengths(6, 8, lens);
    dt_err e = {0};
    sp_sell *m = sp_csr_to_sell(a, 2, 4, &e);
    cr_assert_not_null(m, "%s", e.msg);
    /* window [0, 4) sorted: 1 (3), 2 (2), 0 (1), 3 (0); window [4, 6): 4, 5 */
    int32_t want[6] = {1, 2, 0, 3, 4, 5};
    for (int p = 0; p < 6; p++)
        cr_assert_eq(m->perm[p], want[p], "perm[%d]", p);
    int32_t widths[3] = {3, 1, 5};
    for (int s = 0; s < 3; s++)
        cr_assert_eq(m->slice_len[s], widths[s]);
    cr_assert_eq(m->stored, 2 * (3 + 1 + 5));
    sp_sell_free(m);
    sp_csr_free(a);
}

Test(formats, sell_should_reject_bad_c_and_sigma)
{
    sp_csr *a = gen("gen:uniform:rows=10,nnz=20");
    dt_err e = {0};
    cr_assert_null(sp_csr_to_sell(a, 0, 1, &e));
    cr_assert_str_eq(e.msg, "SELL: slice height C must be 1..1024 (got 0)");
    cr_assert_null(sp_csr_to_sell(a, 1025, 1, &e));
    cr_assert_str_eq(e.msg, "SELL: slice height C must be 1..1024 (got 1025)");
    cr_assert_null(sp_csr_to_sell(a, 4, 6, &e));
    cr_assert_str_eq(
        e.msg, "SELL: sorting window sigma must be 1 or a positive multiple of C = 4 (got 6)");
    cr_assert_null(sp_csr_to_sell(a, 4, 0, &e));
    cr_assert_str_eq(
        e.msg, "SELL: sorting window sigma must be 1 or a positive multiple of C = 4 (got 0)");
    cr_assert_null(sp_csr_to_sell(a, 4, -8, &e));
    sp_csr_free(a);
}

/* ---- BSR ------------------------------------------------------------------------ */

static void check_bsr(const sp_csr *a, int32_t b)
{
    dt_err e = {0};
    sp_bsr *m = sp_csr_to_bsr(a, b, &e);
    cr_assert_not_null(m, "b=%d: %s", b, e.msg);
    cr_assert_eq(m->b, b);
    cr_assert_eq(m->brows, (a->rows + b - 1) / b);
    cr_assert_eq(m->bcols, (a->cols + b - 1) / b);
    cr_assert_eq(m->nnz, a->nnz);
    /* block columns ascending and unique per block row; every block holds
     * at least one entry (no empty blocks), and the count matches the
     * distinct (i / b, j / b) pairs */
    int64_t distinct = 0;
    int32_t *last = malloc(((size_t)m->bcols + 1) * sizeof *last);
    for (int32_t j = 0; j < m->bcols; j++)
        last[j] = -1;
    for (int32_t i = 0; i < a->rows; i++) {
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            int32_t bc = a->col[k] / b;
            if (last[bc] != i / b) {
                last[bc] = i / b;
                distinct++;
            }
        }
    }
    free(last);
    cr_assert_eq(m->nblocks, distinct, "b=%d: %lld blocks, %lld distinct", b, (long long)m->nblocks,
                 (long long)distinct);
    for (int32_t br = 0; br < m->brows; br++) {
        for (int64_t k = m->browptr[br]; k < m->browptr[br + 1]; k++) {
            if (k > m->browptr[br])
                cr_assert_gt(m->bcol[k], m->bcol[k - 1], "block row %d not sorted", br);
            int any = 0;
            for (int64_t x = 0; x < (int64_t)b * b; x++)
                any |= m->val[k * b * b + x] != 0.0;
            cr_assert(any, "block %lld is empty", (long long)k);
        }
    }
    /* entry (i, j) sits at block (i / b, j / b), offset (i % b) * b + j % b */
    for (int32_t i = 0; i < a->rows; i++) {
        int32_t br = i / b;
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            int64_t blk = m->browptr[br];
            while (m->bcol[blk] != a->col[k] / b)
                blk++;
            cr_assert_lt(blk, m->browptr[br + 1]);
            cr_assert_eq(m->val[blk * b * b + (i % b) * b + a->col[k] % b], a->val[k]);
        }
    }
    sp_csr *back = sp_bsr_to_csr(m, &e);
    cr_assert_not_null(back, "%s", e.msg);
    assert_same_csr(a, back, "BSR round trip");
    sp_csr_free(back);
    sp_bsr_free(m);
}

Test(formats, bsr_should_round_trip_at_every_block_size)
{
    static const int32_t sizes[] = {1, 2, 3, 4, 7, 8, 16, 64};
    int n = 0;
    sp_csr **m = test_matrices(&n);
    for (int k = 0; k < n; k++) {
        for (size_t s = 0; s < DT_ARRAY_LEN(sizes); s++)
            check_bsr(m[k], sizes[s]);
    }
    free_matrices(m, n);
}

Test(formats, bsr_should_drop_explicit_zeros_on_the_way_back)
{
    int32_t lens[3] = {2, 2, 1};
    sp_csr *a = from_lengths(3, 4, lens);
    a->val[1] = 0.0; /* an explicit zero */
    dt_err e = {0};
    sp_bsr *m = sp_csr_to_bsr(a, 2, &e);
    cr_assert_not_null(m);
    cr_assert_eq(m->nnz, 5);
    sp_csr *back = sp_bsr_to_csr(m, &e);
    cr_assert_eq(back->nnz, 4);
    cr_assert_eq(sp_csr_validate(back, &e), 0, "%s", e.msg);
    sp_csr_free(back);
    sp_bsr_free(m);
    sp_csr_free(a);
}

Test(formats, bsr_should_reject_bad_block_sizes)
{
    sp_csr *a = gen("gen:uniform:rows=10,nnz=20");
    dt_err e = {0};
    cr_assert_null(sp_csr_to_bsr(a, 0, &e));
    cr_assert_str_eq(e.msg, "BSR: block size b must be 1..64 (got 0)");
    cr_assert_null(sp_csr_to_bsr(a, 65, &e));
    cr_assert_str_eq(e.msg, "BSR: block size b must be 1..64 (got 65)");
    sp_csr_free(a);
}

Test(formats, free_of_null_should_be_a_no_op)
{
    sp_ell_free(NULL);
    sp_sell_free(NULL);
    sp_bsr_free(NULL);
}

/* ---- real matrices ----------------------------------------------------------------- */

static sp_csr *read_mtx(const char *name)
{
    char *path = tu_matrix(name);
    dt_err e = {0};
    sp_csr *a = sp_mm_read(path, NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    free(path);
    return a;
}

/* Matrix Market files from ../shared/matrices; explicit zeros are removed
 * before the BSR comparison because BSR cannot tell them from fill-in. */
static void check_real(const char *name)
{
    sp_csr *a = read_mtx(name);
    check_ell(a);
    check_sell(a, 32, 1);
    check_sell(a, 32, 256);
    check_sell(a, 8, 8);
    int64_t out = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t b = a->rowptr[i];
        a->rowptr[i] = out;
        for (int64_t k = b; k < a->rowptr[i + 1]; k++) {
            if (a->val[k] != 0.0) {
                a->col[out] = a->col[k];
                a->val[out] = a->val[k];
                out++;
            }
        }
    }
    a->rowptr[a->rows] = out;
    a->nnz = out;
    check_bsr(a, 1);
    check_bsr(a, 4);
    check_bsr(a, 6);
    sp_csr_free(a);
}

Test(formats, real_matrices_should_round_trip)
{
    check_real("bcsstk13.mtx");
    check_real("west0479.mtx");
}

/* Erdos971 has empty rows (isolated vertices). */
Test(formats, real_matrix_with_empty_rows_should_round_trip)
{
    sp_csr *a = read_mtx("Erdos971.mtx");
    int empty = 0;
    for (int32_t i = 0; i < a->rows; i++)
        empty += len(a, i) == 0;
    cr_assert_gt(empty, 0, "expected empty rows in Erdos971");
    sp_csr_free(a);
    check_real("Erdos971.mtx");
}

/* Ties keep row order (the counting sort is stable), and a window holding
 * a row past the counting sort's 4096 (its qsort fallback) sorts the same
 * way: the whole permutation against a reference by (length desc, row). */
Test(formats, sell_should_keep_row_order_among_equal_lengths)
{
    enum { ROWS = 40, SIGMA = 8 };
    int32_t lens[ROWS];
    for (int i = 0; i < ROWS; i++)
        lens[i] = (i * 7 + 3) % 5; /* lengths 0..4, many ties in every window */
    lens[17] = 5000;               /* window [16, 24) takes the fallback */
    sp_csr *a = from_lengths(ROWS, 6000, lens);
    dt_err e = {0};
    sp_sell *m = sp_csr_to_sell(a, 4, SIGMA, &e);
    cr_assert_not_null(m, "%s", e.msg);
    for (int w = 0; w < ROWS; w += SIGMA) {
        int32_t want[SIGMA], n = 0;
        for (int32_t len = 5000; len >= 0; len--)
            for (int32_t r = w; r < w + SIGMA; r++)
                if (lens[r] == len)
                    want[n++] = r;
        cr_assert_eq(n, SIGMA);
        for (int p = 0; p < SIGMA; p++)
            cr_assert_eq(m->perm[w + p], want[p], "window %d position %d: row %d, want %d", w, p,
                         m->perm[w + p], want[p]);
    }
    sp_sell_free(m);
    sp_csr_free(a);
}

/* A path 0 - 1 - 2 - ... - (N-1) whose rows are numbered by a shuffle, so
 * that neighbours in the path sit far apart in the matrix's own order: a
 * Cuthill-McKee order walks the path, every edge joining rows at most 2
 * places apart (breadth first from an end of the path: 1 apart; the
 * least connected row is an end). It is a permutation of the rows, and a
 * matrix that is not square keeps its own order. */
Test(formats, cuthill_mckee_should_put_the_rows_of_a_shuffled_path_side_by_side)
{
    enum { N = 97 };
    int32_t name[N], r[2 * N], c[2 * N];
    for (int i = 0; i < N; i++)
        name[i] = (int32_t)((i * 37 + 11) % N); /* 37 is prime to 97: a shuffle */
    int n = 0;
    for (int i = 0; i + 1 < N; i++) {
        r[n] = name[i], c[n++] = name[i + 1];
        r[n] = name[i + 1], c[n++] = name[i];
    }
    sp_csr *a = fx_csr(N, N, n, r, c, NULL);
    dt_err e = {0};
    int32_t *order = sp_row_order_cm(a, &e);
    cr_assert_not_null(order, "%s", e.msg);
    int32_t at[N], seen[N] = {0};
    for (int p = 0; p < N; p++) {
        cr_assert(order[p] >= 0 && order[p] < N && !seen[order[p]], "order[%d] = %d", p, order[p]);
        seen[order[p]] = 1;
        at[order[p]] = p;
    }
    int widest = 0, before = 0;
    for (int i = 0; i + 1 < N; i++) {
        int d = abs(at[name[i]] - at[name[i + 1]]);
        widest = d > widest ? d : widest;
        d = abs(name[i] - name[i + 1]);
        before = d > before ? d : before;
    }
    cr_assert_eq(widest, 1, "an edge spans %d places in the order", widest);
    cr_assert_gt(before, 10, "the shuffle left the path in order (widest edge %d)", before);
    free(order);
    sp_csr_free(a);
    /* Not square: the matrix's own order. */
    int32_t rr[2] = {0, 2}, cc[2] = {4, 1};
    sp_csr *b = fx_csr(3, 5, 2, rr, cc, NULL);
    order = sp_row_order_cm(b, &e);
    cr_assert_not_null(order, "%s", e.msg);
    for (int p = 0; p < 3; p++)
        cr_assert_eq(order[p], p);
    free(order);
    sp_csr_free(b);
}

/* sp_sell_perm_ordered cuts its windows from the given order: window w
 * holds exactly the rows order[w*sigma .. w*sigma + sigma - 1], longest
 * first, ties in the order's order, and rows past long_row as -1 where
 * they would sit; NULL is the matrix's order (sp_sell_perm_cap). */
Test(formats, sell_windows_should_be_cut_from_the_given_row_order)
{
    enum { ROWS = 40, SIGMA = 8, LONG = 4 };
    int32_t lens[ROWS], order[ROWS];
    for (int i = 0; i < ROWS; i++) {
        lens[i] = (i * 7 + 3) % 6; /* 0..5: ties, and rows past LONG */
        order[i] = (int32_t)((i * 13 + 5) % ROWS);
    }
    sp_csr *a = from_lengths(ROWS, 64, lens);
    dt_err e = {0};
    int32_t *perm = sp_sell_perm_ordered(a, 4, SIGMA, LONG, order, &e);
    cr_assert_not_null(perm, "%s", e.msg);
    for (int w = 0; w < ROWS; w += SIGMA) {
        int32_t want[SIGMA], n = 0;
        for (int32_t len = LONG; len >= 0; len--)
            for (int p = w; p < w + SIGMA; p++) {
                const int32_t row = order[p], l = lens[row] > LONG ? 0 : lens[row];
                if (l == len)
                    want[n++] = lens[row] > LONG ? -1 : row;
            }
        cr_assert_eq(n, SIGMA);
        for (int p = 0; p < SIGMA; p++)
            cr_assert_eq(perm[w + p], want[p], "window %d position %d: row %d, want %d", w, p,
                         perm[w + p], want[p]);
    }
    free(perm);
    int32_t *plain = sp_sell_perm_ordered(a, 4, SIGMA, LONG, NULL, &e);
    int32_t *cap = sp_sell_perm_cap(a, 4, SIGMA, LONG, &e);
    cr_assert(plain != NULL && cap != NULL, "%s", e.msg);
    cr_assert_arr_eq(plain, cap, ROWS * sizeof *plain);
    free(plain);
    free(cap);
    sp_csr_free(a);
}

/* sp_row_groups_similar on rows that repeat with period P, shuffled, with
 * empty rows between: each group is r copies of one pattern, every
 * nonempty row is in exactly one group, empty rows in none, each group's
 * rows ascending, and -1 only at the end of the last group. */
Test(formats, similar_row_groups_should_gather_rows_with_one_pattern)
{
    enum { P = 6, COPIES = 8, EMPTY = 5, ROWS = P * COPIES + EMPTY, W = 4 };
    int32_t r[P * COPIES * W], c[P * COPIES * W], pat[ROWS];
    int n = 0, k0 = 0;
    for (int32_t i = 0; i < ROWS; i++) {
        pat[i] = -1;
        if (i % 11 == 3 && i / 11 < EMPTY)
            continue;                       /* empty rows 3, 14, 25, 36, 47 */
        pat[i] = (int32_t)((k0++ * 5) % P); /* neighbours differ; COPIES rows each */
        for (int k = 0; k < W; k++) {
            r[n] = i;
            c[n++] = pat[i] * 3 + k * 5; /* patterns p and p + 5 share a column */
        }
    }
    cr_assert_eq(n, P * COPIES * W);
    sp_csr *a = fx_csr(ROWS, 100, n, r, c, NULL);
    dt_err e = {0};
    for (int32_t gsz = 2; gsz <= 8; gsz *= 2) {
        int64_t ng = -1;
        int32_t *g = sp_row_groups_similar(a, gsz, &ng, &e);
        cr_assert_not_null(g, "%s", e.msg);
        cr_assert_eq(ng, (P * COPIES + gsz - 1) / gsz, "r %d: %lld groups", gsz, (long long)ng);
        int seen[ROWS] = {0};
        for (int64_t q = 0; q < ng; q++)
            for (int i = 0; i < gsz; i++) {
                const int32_t row = g[q * gsz + i];
                if (row < 0) {
                    cr_assert_eq(q, ng - 1, "r %d: a hole in group %lld", gsz, (long long)q);
                    continue;
                }
                cr_assert(row < ROWS && pat[row] >= 0 && !seen[row], "r %d: row %d", gsz, row);
                seen[row] = 1;
                if (i > 0)
                    cr_assert_gt(row, g[q * gsz + i - 1], "r %d: group %lld not ascending", gsz,
                                 (long long)q);
                /* 8 copies of each pattern: groups of 2, 4 and 8 hold one. */
                cr_assert_eq(pat[row], pat[g[q * gsz]], "r %d: group %lld mixes patterns", gsz,
                             (long long)q);
            }
        for (int32_t i = 0; i < ROWS; i++)
            cr_assert_eq(seen[i], pat[i] >= 0, "r %d: row %d", gsz, i);
        free(g);
    }
    int64_t ng;
    cr_assert_null(sp_row_groups_similar(a, 0, &ng, &e));
    cr_assert(strstr(e.msg, "1 to 64") != NULL, "%s", e.msg);
    sp_csr_free(a);
}
