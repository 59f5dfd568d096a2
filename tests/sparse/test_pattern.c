/* test_pattern.c -- PatternReport features and classes on hand-made matrices. */
#include "tests/common/testutil.h"
#include "tests/sparse/sparse_fixtures.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static sp_report report_of(sp_csr *a)
{
    sp_report r;
    dt_err e = {0};
    cr_assert_eq(sp_report_compute(a, 0, 0, &r, &e), 0, "%s", e.msg);
    return r;
}

static sp_csr *from_lengths(int32_t rows, int32_t cols, const int *len)
{
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(rows, cols, 16, &e);
    for (int32_t i = 0; i < rows; i++)
        for (int t = 0; t < len[i]; t++)
            sp_coo_push(coo, i, t, 1.0, &e);
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    return a;
}

Test(pattern, identity_should_be_diagonal)
{
    int32_t r[] = {0, 1, 2, 3}, c[] = {0, 1, 2, 3};
    sp_csr *a = fx_csr(4, 4, 4, r, c, NULL);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.cls, SP_CLASS_DIAGONAL);
    cr_assert_eq(rep.bandwidth, 0);
    cr_assert_eq(rep.diagonals, 1);
    cr_assert_float_eq(rep.diag_fraction, 1.0, 0);
    cr_assert(strstr(rep.cls_reason, "4 nonzeros") != NULL, "%s", rep.cls_reason);
    sp_csr_free(a);
}

/* Distinct nonzero values, what a value dictionary needs: zeros do not
 * count, -0.0 does (its bits differ), counting stops past the cap, and a
 * pattern-only matrix counts as many (the worker gives it random values). */
Test(pattern, distinct_values_should_count_nonzero_values_up_to_the_cap)
{
    int len[] = {3, 3, 3, 3};
    sp_csr *a = from_lengths(4, 4, len);
    const double v[12] = {1, 2, 2, 0, 1, 3, -0.0, 2, 1, 3, 3, 0};
    memcpy(a->val, v, sizeof v);
    cr_assert_eq(sp_csr_distinct_values(a, 4096), 4, "1, 2, 3 and -0.0");
    cr_assert_eq(sp_csr_distinct_values(a, 3), 4, "past the cap: cap + 1");
    cr_assert_eq(sp_csr_distinct_values(a, 2), 3);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.distinct_values, 4);
    dt_buf t = DT_BUF_INIT;
    sp_report_text(&rep, &t);
    cr_assert(strstr(dt_buf_str(&t), "values      4 distinct nonzero values") != NULL, "%s",
              dt_buf_str(&t));
    dt_buf_free(&t);
    cJSON *j = sp_report_json(&rep);
    cr_assert_eq(dt_json_num(j, "distinct_values", 0), 4);
    cJSON_Delete(j);
    for (int64_t k = 0; k < a->nnz; k++)
        a->val[k] = (double)k + 1.0;
    cr_assert_eq(sp_csr_distinct_values(a, 10), 11);
    a->pattern = 1;
    rep = report_of(a);
    cr_assert_eq(rep.distinct_values, SP_DISTINCT_CAP + 1);
    sp_report_text(&rep, &t);
    cr_assert(strstr(dt_buf_str(&t), "values      none stored (a pattern") != NULL, "%s",
              dt_buf_str(&t));
    dt_buf_free(&t);
    sp_csr_free(a);
}

Test(pattern, row_length_moments_gini_and_histogram_should_match_hand_values)
{
    int len[] = {0, 1, 1, 2};
    sp_csr *a = from_lengths(4, 4, len);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.empty_rows, 1);
    cr_assert_float_eq(rep.row_mean, 1.0, 1e-12);
    cr_assert_float_eq(rep.row_std, sqrt(0.5), 1e-12);
    cr_assert_float_eq(rep.row_cv, sqrt(0.5), 1e-12);
    /* sorted 0,1,1,2: sum (2i - 5) x_i = -1 + 1 + 6 = 6; 6 / (4 * 4) */
    cr_assert_float_eq(rep.row_gini, 0.375, 1e-12);
    cr_assert_eq(rep.row_min, 0);
    cr_assert_eq(rep.row_max, 2);
    cr_assert_eq(rep.row_hist[0], 1);
    cr_assert_eq(rep.row_hist[1], 2);
    cr_assert_eq(rep.row_hist[2], 1);
    sp_csr_free(a);
}

Test(pattern, equal_rows_should_have_zero_gini_and_be_uniform)
{
    int len[64];
    for (int i = 0; i < 64; i++)
        len[i] = 40;
    sp_csr *a = from_lengths(64, 64, len);
    sp_report rep = report_of(a);
    cr_assert_float_eq(rep.row_gini, 0.0, 1e-12);
    cr_assert_float_eq(rep.row_cv, 0.0, 1e-12);
    /* Every row covers columns 0..39: dense 40-wide strip, blocks full at
     * b = 2, 4, 8 -> block-structured, which is right for such a strip. */
    cr_assert_eq(rep.cls, SP_CLASS_BLOCK);
    sp_csr_free(a);
}

Test(pattern, tridiagonal_should_be_banded_with_three_diagonals)
{
    enum { N = 200 };
    int32_t r[3 * N], c[3 * N];
    int n = 0;
    for (int i = 0; i < N; i++)
        for (int d = -1; d <= 1; d++)
            if (i + d >= 0 && i + d < N) {
                r[n] = i;
                c[n] = i + d;
                n++;
            }
    sp_csr *a = fx_csr(N, N, n, r, c, NULL);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.diagonals, 3);
    cr_assert_eq(rep.bandwidth, 1);
    cr_assert_eq(rep.cls, SP_CLASS_BANDED, "class %s: %s", sp_class_name(rep.cls), rep.cls_reason);
    sp_csr_free(a);
}

Test(pattern, dense_diagonal_blocks_should_report_fill_per_block_size)
{
    int32_t r[64], c[64];
    int n = 0;
    for (int blk = 0; blk < 4; blk++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 4; j++) {
                r[n] = blk * 4 + i;
                c[n] = blk * 4 + j;
                n++;
            }
    sp_csr *a = fx_csr(16, 16, n, r, c, NULL);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.blocks[0], 16);
    cr_assert_float_eq(rep.block_fill[0], 1.0, 1e-12);
    cr_assert_eq(rep.blocks[1], 4);
    cr_assert_float_eq(rep.block_fill[1], 1.0, 1e-12);
    cr_assert_float_eq(rep.block_fill[2], 0.5, 1e-12);
    cr_assert_float_eq(rep.block_fill[3], 0.25, 1e-12);
    cr_assert_eq(rep.cls, SP_CLASS_BLOCK);
    cr_assert(strstr(rep.cls_reason, "4x4") != NULL, "%s", rep.cls_reason);
    sp_csr_free(a);
}

static sp_csr *with_lengths_random_cols(int32_t rows, int32_t cols, const int *len)
{
    dt_err e = {0};
    sp_coo *coo = sp_coo_new(rows, cols, 16, &e);
    dt_rng g;
    dt_rng_seed(&g, 1);
    for (int32_t i = 0; i < rows; i++)
        for (int t = 0; t < len[i]; t++)
            sp_coo_push(coo, i, (int32_t)(((int64_t)t * 7919 + i) % cols), 1.0, &e);
    sp_csr *a = sp_coo_to_csr(coo, &e);
    sp_coo_free(coo);
    return a;
}

Test(pattern, zipf_row_lengths_should_be_power_law)
{
    enum { ROWS = 1000 };
    int len[ROWS];
    for (int i = 0; i < ROWS; i++)
        len[i] = (1000 + i) / (i + 1); /* ceil(1000 / (i + 1)) */
    sp_csr *a = with_lengths_random_cols(ROWS, 4096, len);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.row_max, 1000);
    cr_assert_eq(rep.cls, SP_CLASS_POWER_LAW, "class %s: %s", sp_class_name(rep.cls),
                 rep.cls_reason);
    cr_assert(strstr(rep.cls_reason, "gini") != NULL);
    sp_csr_free(a);
}

Test(pattern, one_long_row_among_equal_ones_should_be_skewed_not_power_law)
{
    enum { ROWS = 1000 };
    int len[ROWS];
    for (int i = 0; i < ROWS; i++)
        len[i] = 6;
    len[500] = 1000;
    sp_csr *a = with_lengths_random_cols(ROWS, 4096, len);
    sp_report rep = report_of(a);
    cr_assert_lt(rep.row_gini, 0.5);
    cr_assert_eq(rep.cls, SP_CLASS_SKEWED, "class %s: %s", sp_class_name(rep.cls),
                 rep.cls_reason);
    sp_csr_free(a);
}

Test(pattern, x_locality_should_count_distinct_cache_lines)
{
    /* Row 0: columns 0..63 (2 lines); row 1: columns 0, 32, 64, 96 (4 lines). */
    int32_t r[68], c[68];
    int n = 0;
    for (int j = 0; j < 64; j++) {
        r[n] = 0;
        c[n++] = j;
    }
    for (int j = 0; j < 4; j++) {
        r[n] = 1;
        c[n++] = 32 * j;
    }
    sp_csr *a = fx_csr(2, 128, n, r, c, NULL);
    sp_report rep = report_of(a);
    cr_assert_float_eq(rep.x_lines_per_row, 3.0, 1e-12);
    cr_assert_float_eq(rep.x_lines_per_nnz, 6.0 / 68.0, 1e-12);
    sp_csr_free(a);
}

Test(pattern, cost_model_should_count_each_array_once)
{
    int32_t r[] = {0, 0, 2, 2}, c[] = {0, 2, 0, 1};
    sp_csr *a = fx_csr(3, 3, 4, r, c, NULL);
    sp_report rep;
    dt_err e = {0};
    cr_assert_eq(sp_report_compute(a, 8, 16, &rep, &e), 0);
    /* offsets 4 * 4 + 4 nnz * (4 + 4) + x 3 * 4 + y 3 * 4 */
    cr_assert_float_eq(rep.spmv_bytes[SP_FP32], 16 + 32 + 12 + 12, 0);
    cr_assert_float_eq(rep.spmv_bytes[SP_FP64], 16 + 48 + 24 + 24, 0);
    cr_assert_float_eq(rep.spmv_flops, 8, 0);
    cr_assert_float_eq(rep.spmm_flops, 2 * 4 * 8, 0);
    cr_assert_float_eq(rep.spmm_bytes[SP_FP32], 16 + 32 + 4.0 * 8 * (3 + 3), 0);
    cr_assert_float_eq(rep.sddmm_bytes[SP_FP32], 16 + 16 + 4.0 * 16 * 6 + 16, 0);
    cr_assert_float_eq(rep.spmv_ai[SP_FP32], 8.0 / 72.0, 1e-12);
    sp_csr_free(a);
}

Test(pattern, json_should_hold_every_group)
{
    int len[] = {3, 1, 0, 2};
    sp_csr *a = from_lengths(4, 4, len);
    sp_report rep = report_of(a);
    cJSON *j = sp_report_json(&rep);
    cr_assert_eq(dt_json_num(j, "nnz", -1), 6);
    const cJSON *rl = cJSON_GetObjectItem(j, "row_length");
    cr_assert_eq(dt_json_num(rl, "max", -1), 3);
    cr_assert(cJSON_IsArray(cJSON_GetObjectItem(rl, "histogram")));
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "block_fill")), 4);
    const cJSON *cost = cJSON_GetObjectItem(j, "cost");
    cr_assert_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(cost, "spmm"), "min_bytes"));
    cr_assert_not_null(dt_json_str(j, "class", NULL));
    cJSON_Delete(j);
    dt_buf t = DT_BUF_INIT;
    sp_report_text(&rep, &t);
    cr_assert(strstr(t.data, "class") && strstr(t.data, "bandwidth"));
    dt_buf_free(&t);
    sp_csr_free(a);
}

Test(pattern, empty_matrix_should_not_divide_by_zero)
{
    dt_err e = {0};
    sp_csr *a = sp_csr_new(5, 5, 0, &e);
    sp_report rep = report_of(a);
    cr_assert_eq(rep.empty_rows, 5);
    cr_assert_float_eq(rep.row_gini, 0, 0);
    cr_assert(!isnan(rep.row_cv) && !isnan(rep.x_lines_per_nnz) && !isnan(rep.spmv_ai[0]));
    sp_csr_free(a);
}

/* ---- the class explanation states only true comparisons ------------------------------ */

/* Every "A OP B" in reason (OP one of < <= > >=, spaces around it, A and B
 * numbers, an 'x' or '%' suffix allowed) must hold for the printed numbers.
 * Returns how many were checked, or -1 with why set at the first that is
 * false or unreadable. */
static int check_reason(const char *reason, char *why, size_t n)
{
    int checked = 0;
    for (const char *p = reason; (p = strpbrk(p, "<>")) != NULL; p++) {
        const int eq = p[1] == '=';
        const char *after = p + 1 + eq;
        if (p == reason || p[-1] != ' ' || *after != ' ') {
            snprintf(why, n, "'%s': an operator without spaces around it", reason);
            return -1;
        }
        const char *start = p - 1;
        while (start > reason && start[-1] != ' ')
            start--;
        char *end = NULL;
        double a = strtod(start, &end);
        if (end == start || (end != p - 1 && *end != 'x' && *end != '%')) {
            snprintf(why, n, "'%s': no number before '%c'", reason, *p);
            return -1;
        }
        double b = strtod(after + 1, &end);
        if (end == after + 1) {
            snprintf(why, n, "'%s': no number after '%c'", reason, *p);
            return -1;
        }
        int ok = *p == '>' ? (eq ? a >= b : a > b) : (eq ? a <= b : a < b);
        if (!ok) {
            snprintf(why, n, "'%s' states %g %c%s %g, which is false", reason, a, *p, eq ? "=" : "",
                     b);
            return -1;
        }
        checked++;
    }
    return checked;
}

static void check_report_of(const char *path, int *n)
{
    dt_err e = {0};
    sp_read_opts o = {.quiet = 1};
    sp_csr *a = sp_load(path, &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_report r = report_of(a);
    char why[512] = "";
    int k = check_reason(r.cls_reason, why, sizeof why);
    cr_assert_geq(k, 0, "%s: %s", path, why);
    cr_assert(k > 0 || r.cls == SP_CLASS_DIAGONAL, "%s: class %s, no comparison in '%s'", path,
              sp_class_name(r.cls), r.cls_reason);
    sp_csr_free(a);
    (*n)++;
}

static void check_folder(const char *dir, int *n)
{
    tu_proc p = tu_run("cd '%s' && find . -name '*.mtx' -o -name '*.mtx.gz' -o -name '*.smtx' "
                       "-o -name '*.smtx.gz' | sort",
                       dir);
    cr_assert_eq(p.status, 0, "%s", p.err);
    char *save = NULL;
    for (char *l = strtok_r(p.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        char *path = dt_xasprintf("%s/%s", dir, l + 2);
        check_report_of(path, n);
        free(path);
    }
    tu_proc_free(&p);
}

Test(pattern, the_checker_should_catch_the_old_false_statements)
{
    char why[512];
    /* what cv 0.4996 and max/mean 3.96 printed as, rounded: false */
    static const char *bad[] = {"cv 0.50 > 0.5", "cv 0.49 > 0.5 (gini 0.3)", "max/mean row 3.8 > 4",
                                "mean row 32.0 < 32", "cv 0.5>0.5"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++)
        cr_assert_eq(check_reason(bad[i], why, sizeof why), -1, "%s passed", bad[i]);
    cr_assert_eq(check_reason("cv 0.52 > 0.5, max/mean row 4.21 > 4 (max row 40)", why, sizeof why),
                 2, "%s", why);
    cr_assert_eq(check_reason("bandwidth 51 <= 51.15 (5% of 1003 rows, plus 1)", why, sizeof why),
                 1, "%s", why);
}

Test(pattern, class_reasons_should_state_only_true_comparisons_on_every_test_matrix, .timeout = 300)
{
    int n = 0;
    check_folder(tu_data_dir(), &n);
    cr_assert_geq(n, 34, "only %d matrices in %s", n, tu_data_dir());
    const char *shared = tu_matrices_dir();
    if (shared) {
        check_folder(shared, &n);
        cr_log_info("also checked the matrices in %s: %d in all", shared, n);
    }
}

/* Row lengths that put cv and max/mean a hair from the skew thresholds,
 * where rounding to two decimals used to print a false comparison. */
Test(pattern, class_reasons_should_stay_true_next_to_the_thresholds)
{
    enum { ROWS = 400 };
    int len[ROWS];
    int checked = 0;
    for (int top = 30; top <= 50; top++) {
        for (int alt = 4; alt <= 16; alt++) {
            for (int i = 0; i < ROWS; i++)
                len[i] = i == 0 ? top : (i % 2 ? 10 : alt);
            sp_csr *a = from_lengths(ROWS, 64, len);
            sp_report r = report_of(a);
            char why[512] = "";
            int k = check_reason(r.cls_reason, why, sizeof why);
            cr_assert_geq(k, 0, "top %d, alt %d: %s", top, alt, why);
            checked += k;
            sp_csr_free(a);
        }
    }
    cr_assert_gt(checked, 0);
}

typedef struct rows_log {
    int calls;
    int64_t last, total;
    int backwards;
} rows_log;

static void rows_cb(void *ud, int64_t done, int64_t total)
{
    rows_log *l = ud;
    l->backwards |= done <= l->last;
    l->last = done;
    l->total = total;
    l->calls++;
}

/* The report's progress counts rows up through its main pass, and the
 * report is the one sp_report_compute gives. */
Test(pattern, report_progress_should_count_the_rows_and_change_nothing)
{
    dt_err e = {0};
    sp_csr *a = sp_generate("gen:uniform:rows=300000,nnz=600000,seed=3", &e);
    cr_assert_not_null(a, "%s", e.msg);
    rows_log l = {0};
    sp_report r1, r2;
    cr_assert_eq(sp_report_compute_progress(a, 0, 0, &r1, &e, rows_cb, &l), 0, "%s", e.msg);
    cr_assert_eq(sp_report_compute(a, 0, 0, &r2, &e), 0, "%s", e.msg);
    cr_assert_eq(l.calls, 300000 / 65536, "%d calls", l.calls);
    cr_assert(!l.backwards);
    cr_assert_eq(l.total, 300000);
    cr_assert_lt(l.last, 300000);
    cr_assert_eq(r1.cls, r2.cls);
    cr_assert_str_eq(r1.cls_reason, r2.cls_reason);
    cr_assert_eq(r1.row_max, r2.row_max);
    cr_assert_eq(r1.bandwidth, r2.bandwidth);
    sp_csr_free(a);
}
