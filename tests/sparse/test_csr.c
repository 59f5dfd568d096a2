/* test_csr.c -- COO -> CSR, validation, transpose, fingerprints, names. */
#include "tests/common/testutil.h"
#include "tests/sparse/sparse_fixtures.h"

#include <math.h>
#include <string.h>

Test(csr, coo_to_csr_should_sort_rows_and_sum_duplicates)
{
    int32_t r[] = {2, 0, 0, 2, 0, 1};
    int32_t c[] = {1, 3, 0, 1, 3, 2};
    double v[] = {1, 2, 3, 4, 5, 6};
    sp_csr *a = fx_csr(3, 4, 6, r, c, v);
    cr_assert_not_null(a);
    cr_assert_eq(a->nnz, 4);
    int64_t rp[] = {0, 2, 3, 4};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(a->rowptr[i], rp[i]);
    cr_assert_eq(a->col[0], 0);
    cr_assert_eq(a->val[0], 3.0);
    cr_assert_eq(a->col[1], 3);
    cr_assert_eq(a->val[1], 7.0); /* 2 + 5 */
    cr_assert_eq(a->col[3], 1);
    cr_assert_eq(a->val[3], 5.0); /* 1 + 4 */
    dt_err e = {0};
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    sp_csr_free(a);
}

Test(csr, coo_to_csr_should_sort_a_long_row_without_quadratic_time)
{
    enum { N = 20000 };
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(1, N, 4, &e);
    for (int i = 0; i < N; i++)
        cr_assert_eq(sp_coo_push(coo, 0, N - 1 - i, i, &e), 0);
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    cr_assert_eq(a->nnz, N);
    for (int i = 0; i < N; i++) {
        cr_assert_eq(a->col[i], i);
        cr_assert_eq(a->val[i], (double)(N - 1 - i));
    }
    sp_csr_free(a);
}

Test(csr, validate_should_name_the_broken_row)
{
    int32_t r[] = {0, 1};
    int32_t c[] = {0, 1};
    sp_csr *a = fx_csr(2, 2, 2, r, c, NULL);
    dt_err e = {0};
    a->col[1] = 5;
    cr_assert_eq(sp_csr_validate(a, &e), -1);
    cr_assert(strstr(e.msg, "row 1") && strstr(e.msg, "out of range"), "%s", e.msg);
    a->col[1] = 1;
    a->val[0] = NAN;
    cr_assert_eq(sp_csr_validate(a, &e), -1);
    cr_assert(strstr(e.msg, "not finite"), "%s", e.msg);
    sp_csr_free(a);
}

Test(csr, transpose_twice_should_give_the_same_matrix)
{
    int32_t r[] = {0, 0, 1, 2, 2, 2};
    int32_t c[] = {1, 4, 0, 0, 2, 4};
    double v[] = {1, 2, 3, 4, 5, 6};
    sp_csr *a = fx_csr(3, 5, 6, r, c, v);
    dt_err e = {0};
    sp_csr *t = sp_csr_transpose(a, &e);
    cr_assert_eq(t->rows, 5);
    cr_assert_eq(t->cols, 3);
    cr_assert_eq(sp_csr_validate(t, &e), 0, "%s", e.msg);
    sp_csr *tt = sp_csr_transpose(t, &e);
    char f1[17], f2[17];
    sp_csr_fingerprint(a, f1);
    sp_csr_fingerprint(tt, f2);
    cr_assert_str_eq(f1, f2);
    sp_csr_fingerprint(t, f2);
    cr_assert_str_neq(f1, f2);
    sp_csr_free(a);
    sp_csr_free(t);
    sp_csr_free(tt);
}

Test(csr, names_should_round_trip)
{
    for (int t = 0; t < 4; t++) {
        sp_dtype d;
        cr_assert_eq(sp_dtype_parse(sp_dtype_name((sp_dtype)t), &d), 0);
        cr_assert_eq((int)d, t);
    }
    sp_op op;
    cr_assert_eq(sp_op_parse("sddmm", &op), 0);
    cr_assert_eq(op, SP_SDDMM);
    cr_assert_eq(sp_op_parse("spgemm", &op), -1);
    cr_assert_eq(sp_dtype_size(SP_BF16), 2);
}

Test(csr, device_bytes_should_count_32bit_offsets_and_dtype)
{
    int32_t r[] = {0, 1};
    int32_t c[] = {0, 1};
    sp_csr *a = fx_csr(2, 2, 2, r, c, NULL);
    cr_assert_eq(sp_csr_device_bytes(a, SP_FP32), 3 * 4 + 2 * 8);
    cr_assert_eq(sp_csr_device_bytes(a, SP_FP64), 3 * 4 + 2 * 12);
    sp_csr_free(a);
}
