/* test_ref.c -- CPU fp64 references against hand-computed results and across
 * thread counts. */
#include "tests/common/testutil.h"
#include "tests/sparse/sparse_fixtures.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A = [1 0 2; 0 0 0; 3 4 0], 3 x 3 with an empty row. */
static sp_csr *small(void)
{
    int32_t r[] = {0, 0, 2, 2};
    int32_t c[] = {0, 2, 0, 1};
    double v[] = {1, 2, 3, 4};
    return fx_csr(3, 3, 4, r, c, v);
}

Test(ref, spmv_should_apply_alpha_and_beta)
{
    sp_csr *a = small();
    double x[] = {1, 2, 3};
    double y[] = {10, 20, 30};
    sp_ref_spmv(a, x, 2.0, 0.5, y);
    cr_assert_float_eq(y[0], 2 * (1 + 6) + 5, 0);
    cr_assert_float_eq(y[1], 10, 0);
    cr_assert_float_eq(y[2], 2 * (3 + 8) + 15, 0);
    sp_csr_free(a);
}

Test(ref, spmv_with_beta_zero_should_not_read_y)
{
    sp_csr *a = small();
    double x[] = {1, 2, 3};
    double y[] = {NAN, NAN, NAN};
    sp_ref_spmv(a, x, 1.0, 0.0, y);
    cr_assert_float_eq(y[0], 7, 0);
    cr_assert_float_eq(y[1], 0, 0);
    cr_assert_float_eq(y[2], 11, 0);
    sp_csr_free(a);
}

Test(ref, spmm_row_and_column_major_should_agree)
{
    sp_csr *a = small();
    /* B is 3 x 2. */
    double brow[] = {1, 2, 3, 4, 5, 6};
    double bcol[] = {1, 3, 5, 2, 4, 6};
    double crow[6], ccol[6];
    sp_ref_spmm(a, brow, 2, SP_ROW_MAJOR, 1.0, 0.0, crow);
    sp_ref_spmm(a, bcol, 2, SP_COL_MAJOR, 1.0, 0.0, ccol);
    /* row 0: 1*B0 + 2*B2 = (1+10, 2+12) */
    cr_assert_float_eq(crow[0], 11, 0);
    cr_assert_float_eq(crow[1], 14, 0);
    cr_assert_float_eq(crow[4], 3 * 1 + 4 * 3, 0);
    cr_assert_float_eq(crow[5], 3 * 2 + 4 * 4, 0);
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 2; j++)
            cr_assert_float_eq(crow[i * 2 + j], ccol[j * 3 + i], 0);
    sp_csr_free(a);
}

Test(ref, sddmm_should_compute_dot_products_on_the_pattern)
{
    sp_csr *s = small();
    /* A is 3 x 2, B is 3 x 2 (row j of B pairs with column j of S). */
    double a[] = {1, 2, 3, 4, 5, 6};
    double b[] = {1, 0, 0, 1, 1, 1};
    double out[4];
    sp_ref_sddmm(s, a, b, 2, 1.0, 1.0, out);
    /* entry (0,0): A0.B0 = 1, + S = 1 */
    cr_assert_float_eq(out[0], 1 + 1, 0);
    /* (0,2): A0.B2 = 3, + 2 */
    cr_assert_float_eq(out[1], 3 + 2, 0);
    /* (2,0): A2.B0 = 5, + 3 */
    cr_assert_float_eq(out[2], 5 + 3, 0);
    /* (2,1): A2.B1 = 6, + 4 */
    cr_assert_float_eq(out[3], 6 + 4, 0);
    sp_csr_free(s);
}

/* 3000 x 2500 with uneven rows: runs of empty rows (the first and last
 * rows among them), short rows, and row 17 holding about a third of the
 * nonzeros, so that a nonzero split (SDDMM) cuts it across threads and a
 * row split (SpMV, SpMM) gives it a thread of its own. */
static sp_csr *uneven(dt_rng *g)
{
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(3000, 2500, 1, &e);
    for (int i = 0; i < 3000; i++) {
        int len = i == 17                             ? 30000
                  : (i < 3 || i > 2990 || i % 97 < 9) ? 0
                                                      : 1 + (int)dt_rng_below(g, 40);
        for (int t = 0; t < len; t++)
            sp_coo_push(coo, i, (int32_t)dt_rng_below(g, 2500), dt_rng_uniform(g) - 0.5, &e);
    }
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    cr_assert_not_null(a, "%s", e.msg);
    return a;
}

enum { TN = 11, TK = 9 }; /* SpMM columns (a block of 8 and a tail), SDDMM K */

/* Every reference -- plain and _mag, both SpMM layouts, beta 0 (over NaN
 * poison, which it must not read) and beta != 0 -- at `threads` threads,
 * the outputs one after the other in out. Returns the number written. */
static size_t all_refs(const sp_csr *a, const double *b, const double *b2, int threads, double *out)
{
    size_t rows = (size_t)a->rows, nnz = (size_t)a->nnz, o = 0;
    sp_ref_set_threads(threads);
    for (int bi = 0; bi < 2; bi++) {
        double beta = bi ? -0.75 : 0.0, fill = bi ? 0.5 : NAN;
        size_t n = rows;
        for (size_t i = 0; i < 2 * n; i++)
            out[o + i] = fill;
        sp_ref_spmv(a, b, 1.5, beta, out + o);
        sp_ref_spmv_mag(a, b, 1.5, beta, out + o + n, out + o + 2 * n);
        o += 3 * n;
        for (int l = 0; l < 2; l++) {
            sp_layout lay = l ? SP_COL_MAJOR : SP_ROW_MAJOR;
            n = rows * TN;
            for (size_t i = 0; i < 2 * n; i++)
                out[o + i] = fill;
            sp_ref_spmm(a, b, TN, lay, 1.5, beta, out + o);
            sp_ref_spmm_mag(a, b, TN, lay, 1.5, beta, out + o + n, out + o + 2 * n);
            o += 3 * n;
        }
        n = nnz;
        for (size_t i = 0; i < 2 * n; i++)
            out[o + i] = fill; /* SDDMM reads S, never out */
        sp_ref_sddmm(a, b, b2, TK, 1.5, beta, out + o);
        sp_ref_sddmm_mag(a, b, b2, TK, 1.5, beta, out + o + n, out + o + 2 * n);
        o += 3 * n;
    }
    sp_ref_set_threads(0);
    return o;
}

Test(ref, results_should_be_bit_identical_for_every_thread_count)
{
    dt_rng g;
    dt_rng_seed(&g, 3);
    sp_csr *a = uneven(&g);
    size_t rows = (size_t)a->rows, nnz = (size_t)a->nnz;
    size_t nb = (size_t)a->cols * TN + rows * TK; /* B (SpMV x, SpMM B, SDDMM A) */
    double *b = malloc(nb * sizeof *b), *b2 = malloc(nb * sizeof *b2);
    for (size_t i = 0; i < nb; i++) {
        b[i] = dt_rng_uniform(&g) - 0.5;
        b2[i] = dt_rng_uniform(&g) - 0.5;
    }
    size_t total = 2 * 3 * (rows + 2 * rows * TN + nnz);
    double *one = malloc(total * sizeof *one), *many = malloc(total * sizeof *many);
    cr_assert_eq(all_refs(a, b, b2, 1, one), total);
    for (size_t i = 0; i < total; i++)
        cr_assert(!isnan(one[i]), "output %zu is NaN: beta 0 read the output", i);
    int counts[] = {2, 3, 7, 64};
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
        all_refs(a, b, b2, counts[c], many);
        for (size_t i = 0; i < total; i++)
            cr_assert(memcmp(&one[i], &many[i], sizeof one[i]) == 0,
                      "%d threads: output %zu is %.17g, one thread gave %.17g", counts[c], i,
                      many[i], one[i]);
    }
    free(one);
    free(many);
    free(b);
    free(b2);
    sp_csr_free(a);
}

Test(ref, more_threads_than_rows_or_nonzeros_should_change_nothing)
{
    sp_csr *a = small();
    double x[] = {1, 2, 3, 4, 5, 6}, y1[6], y64[6], s1[4], s64[4];
    sp_ref_set_threads(1);
    sp_ref_spmm(a, x, 2, SP_ROW_MAJOR, 1.0, 0.0, y1);
    sp_ref_sddmm(a, x, x, 2, 1.0, 0.0, s1);
    sp_ref_set_threads(64);
    sp_ref_spmm(a, x, 2, SP_ROW_MAJOR, 1.0, 0.0, y64);
    sp_ref_sddmm(a, x, x, 2, 1.0, 0.0, s64);
    sp_ref_set_threads(0);
    cr_assert(memcmp(y1, y64, sizeof y1) == 0);
    cr_assert(memcmp(s1, s64, sizeof s1) == 0);
    sp_csr_free(a);
}

Test(ref, thread_count_should_follow_the_env_and_stay_on_one_thread_for_small_work)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int dflt = cpus > 32 ? 32 : cpus < 1 ? 1 : (int)cpus;
    int64_t big = (int64_t)1 << 40;
    unsetenv("DITTO_REF_THREADS");
    cr_assert_eq(sp_ref_threads(big), dflt);
    cr_assert_eq(sp_ref_threads(1000), 1, "small work must not start threads");
    cr_assert_eq(sp_ref_threads((int64_t)3 << 20), dflt < 3 ? dflt : 3);
    setenv("DITTO_REF_THREADS", "5", 1);
    cr_assert_eq(sp_ref_threads(big), 5);
    cr_assert_eq(sp_ref_threads(1000), 1);
    setenv("DITTO_REF_THREADS", "1000", 1);
    cr_assert_eq(sp_ref_threads(big), 64);
    setenv("DITTO_REF_THREADS", "4x", 1); /* not a count: the default */
    cr_assert_eq(sp_ref_threads(big), dflt);
    setenv("DITTO_REF_THREADS", "0", 1);
    cr_assert_eq(sp_ref_threads(big), dflt);
    sp_ref_set_threads(7); /* forced: whatever the work */
    cr_assert_eq(sp_ref_threads(1000), 7);
    sp_ref_set_threads(0);
    cr_assert_eq(sp_ref_threads(1000), 1);
    unsetenv("DITTO_REF_THREADS");
}

/* The _mag variants write the same results and, from the same pass, the
 * product with every term made positive: bit for bit what the plain
 * functions give on |A| and |B| (|a b| = |a| |b| exactly in floating point,
 * and the order of the sums is the same). */
Test(ref, mag_variants_should_equal_the_plain_references_on_absolute_values)
{
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(400, 300, 1, &e);
    dt_rng g;
    dt_rng_seed(&g, 11);
    for (int i = 0; i < 400; i++) {
        int len = i == 5 ? 250 : (int)dt_rng_below(&g, 12); /* empty rows and a long one */
        for (int t = 0; t < len; t++)
            sp_coo_push(coo, i, (int32_t)dt_rng_below(&g, 300), dt_rng_uniform(&g) - 0.5, &e);
    }
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    sp_csr *aa = sp_csr_dup(a, &e);
    cr_assert_not_null(aa, "%s", e.msg);
    for (int64_t k = 0; k < aa->nnz; k++)
        aa->val[k] = fabs(aa->val[k]);
    const int n = 5;
    size_t nb = (size_t)400 * n; /* big enough for every operand below */
    double *b = malloc(nb * sizeof *b), *bb = malloc(nb * sizeof *bb),
           *b2 = malloc(nb * sizeof *b2), *bb2 = malloc(nb * sizeof *bb2);
    for (size_t i = 0; i < nb; i++) {
        b[i] = dt_rng_uniform(&g) - 0.5;
        bb[i] = fabs(b[i]);
        b2[i] = dt_rng_uniform(&g) - 0.5;
        bb2[i] = fabs(b2[i]);
    }
    double *y = malloc(nb * sizeof *y), *mag = malloc(nb * sizeof *mag),
           *want = malloc(nb * sizeof *want), *wmag = malloc(nb * sizeof *wmag);
    size_t nnz = (size_t)a->nnz;
    double *o = malloc(nnz * sizeof *o), *om = malloc(nnz * sizeof *om),
           *wo = malloc(nnz * sizeof *wo), *wom = malloc(nnz * sizeof *wom);

    sp_ref_spmv_mag(a, b, -1.5, 0.0, y, mag);
    sp_ref_spmv(a, b, -1.5, 0.0, want);
    sp_ref_spmv(aa, bb, 1.0, 0.0, wmag);
    for (int i = 0; i < 400; i++) {
        cr_assert_eq(y[i], want[i], "spmv row %d", i);
        cr_assert_eq(mag[i], wmag[i], "spmv |.| row %d", i);
    }
    for (int l = 0; l < 2; l++) {
        sp_layout lay = l ? SP_COL_MAJOR : SP_ROW_MAJOR;
        for (size_t i = 0; i < nb; i++)
            y[i] = want[i] = b2[i]; /* beta != 0 reads C */
        sp_ref_spmm_mag(a, b, n, lay, 0.5, 2.0, y, mag);
        sp_ref_spmm(a, b, n, lay, 0.5, 2.0, want);
        sp_ref_spmm(aa, bb, n, lay, 1.0, 0.0, wmag);
        for (size_t i = 0; i < (size_t)400 * n; i++) {
            cr_assert_eq(y[i], want[i], "spmm layout %d output %zu", l, i);
            cr_assert_eq(mag[i], wmag[i], "spmm |.| layout %d output %zu", l, i);
        }
    }
    sp_ref_sddmm_mag(a, b, b2, n, 1.0, 0.25, o, om);
    sp_ref_sddmm(a, b, b2, n, 1.0, 0.25, wo);
    sp_ref_sddmm(aa, bb, bb2, n, 1.0, 0.0, wom);
    for (size_t k = 0; k < nnz; k++) {
        cr_assert_eq(o[k], wo[k], "sddmm entry %zu", k);
        cr_assert_eq(om[k], wom[k], "sddmm |.| entry %zu", k);
    }
    double *all[] = {b, bb, b2, bb2, y, mag, want, wmag, o, om, wo, wom};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
    sp_csr_free(a);
    sp_csr_free(aa);
}
