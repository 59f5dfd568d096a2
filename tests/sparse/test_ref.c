/* test_ref.c -- CPU fp64 references against hand-computed results and across
 * thread counts. */
#include "tests/common/testutil.h"
#include "tests/sparse/sparse_fixtures.h"

#include <math.h>
#include <stdlib.h>

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

Test(ref, results_should_not_depend_on_the_thread_count)
{
    /* A matrix big enough to be split: 3000 rows with a long row. */
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(3000, 3000, 1, &e);
    dt_rng g;
    dt_rng_seed(&g, 3);
    for (int i = 0; i < 3000; i++) {
        int len = i == 17 ? 2500 : 1 + (int)dt_rng_below(&g, 60);
        for (int t = 0; t < len; t++)
            sp_coo_push(coo, i, (int32_t)dt_rng_below(&g, 3000), dt_rng_uniform(&g) - 0.5, &e);
    }
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    double *x = malloc(3000 * sizeof *x), *y1 = malloc(3000 * sizeof *y1),
           *y4 = malloc(3000 * sizeof *y4);
    for (int i = 0; i < 3000; i++)
        x[i] = dt_rng_uniform(&g);
    sp_ref_set_threads(1);
    sp_ref_spmv(a, x, 1.0, 0.0, y1);
    sp_ref_set_threads(4);
    sp_ref_spmv(a, x, 1.0, 0.0, y4);
    sp_ref_set_threads(0);
    for (int i = 0; i < 3000; i++)
        cr_assert_eq(y1[i], y4[i], "row %d differs", i); /* same order: bit-identical */
    free(x);
    free(y1);
    free(y4);
    sp_csr_free(a);
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
