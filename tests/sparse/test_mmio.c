/* test_mmio.c -- Matrix Market and .smtx readers and writers: formats, round trips, errors. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---------------------------------------------------------------- */

static sp_csr *mm_text(const char *text, const sp_read_opts *o, dt_err *e)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    sp_csr *a = sp_mm_read_stream(f, "m.mtx", o, e);
    fclose(f);
    return a;
}

static sp_csr *smtx_text(const char *text, dt_err *e)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    sp_csr *a = sp_smtx_read_stream(f, "w.smtx", NULL, e);
    fclose(f);
    return a;
}

static double *dense_text(const char *text, int32_t *rows, int32_t *cols, dt_err *e)
{
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    cr_assert_not_null(f);
    sp_read_opts o = {.quiet = 1};
    double *a = sp_mm_read_dense(f, "d.mtx", rows, cols, &o, e);
    fclose(f);
    return a;
}

/* "r,c=v" per entry, row-major, 0-based: compact to compare against. */
static char *csr_str(const sp_csr *a)
{
    dt_buf b = DT_BUF_INIT;
    for (int32_t i = 0; i < a->rows; i++) {
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++)
            dt_buf_printf(&b, "%s%d,%d=%g", b.len ? " " : "", i, a->col[k], a->val[k]);
    }
    return dt_buf_take(&b);
}

static void expect_matrix(const char *text, int32_t rows, int32_t cols, const char *want)
{
    dt_err e = {0};
    sp_read_opts o = {.quiet = 1};
    sp_csr *a = mm_text(text, &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->rows, rows);
    cr_assert_eq(a->cols, cols);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    char *s = csr_str(a);
    cr_assert_str_eq(s, want);
    free(s);
    sp_csr_free(a);
}

static void mm_fails(const char *text, const char *want)
{
    dt_err e = {0};
    sp_read_opts o = {.quiet = 1};
    sp_csr *a = mm_text(text, &o, &e);
    cr_assert_null(a, "accepted:\n%s", text);
    cr_assert(strstr(e.msg, want) != NULL, "want \"%s\"\n got \"%s\"", want, e.msg);
    cr_assert_null(strchr(e.msg, '\n'), "message is not one line: %s", e.msg);
}

static void smtx_fails(const char *text, const char *want)
{
    dt_err e = {0};
    sp_csr *a = smtx_text(text, &e);
    cr_assert_null(a, "accepted:\n%s", text);
    cr_assert(strstr(e.msg, want) != NULL, "want \"%s\"\n got \"%s\"", want, e.msg);
}

static void dense_fails(const char *text, const char *want)
{
    dt_err e = {0};
    int32_t r = -1, c = -1;
    double *d = dense_text(text, &r, &c, &e);
    cr_assert_null(d, "accepted:\n%s", text);
    cr_assert(strstr(e.msg, want) != NULL, "want \"%s\"\n got \"%s\"", want, e.msg);
}

static int same_csr(const sp_csr *a, const sp_csr *b)
{
    return a->rows == b->rows && a->cols == b->cols && a->nnz == b->nnz &&
           a->pattern == b->pattern &&
           memcmp(a->rowptr, b->rowptr, ((size_t)a->rows + 1) * sizeof *a->rowptr) == 0 &&
           memcmp(a->col, b->col, (size_t)a->nnz * sizeof *a->col) == 0 &&
           memcmp(a->val, b->val, (size_t)a->nnz * sizeof *a->val) == 0;
}

/* A random CSR whose values are arbitrary finite bit patterns plus the
 * awkward ones, so that a round trip proves every bit survives. */
static sp_csr *random_csr(int32_t rows, int32_t cols, int per_row, uint64_t seed)
{
    static const double special[] = {0.0,     -0.0,  DBL_MAX, -DBL_MAX, DBL_MIN, 4.9e-324,
                                     -1e-310, 1e300, 0.1,     1.0 / 3,  -2.5,    123456789.0};
    dt_rng r;
    dt_rng_seed(&r, seed);
    sp_csr *a = sp_csr_new(rows, cols, (int64_t)rows * per_row, NULL);
    cr_assert_not_null(a);
    int64_t k = 0;
    for (int32_t i = 0; i < rows; i++) {
        a->rowptr[i] = k;
        int32_t c = -1;
        for (int t = 0; t < per_row; t++) {
            c += 1 + (int32_t)dt_rng_below(&r, 3);
            if (c >= cols)
                break;
            a->col[k] = c;
            double v;
            if (dt_rng_below(&r, 8) == 0) {
                v = special[dt_rng_below(&r, DT_ARRAY_LEN(special))];
            } else {
                do {
                    uint64_t bits = dt_rng_next(&r);
                    memcpy(&v, &bits, sizeof v);
                } while (!isfinite(v));
            }
            a->val[k++] = v;
        }
    }
    a->rowptr[rows] = k;
    a->nnz = k;
    return a;
}

/* Run fn with stderr going to a file; returns what was written. */
static char *capture_stderr(void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/ditto-test-stderr-XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    dup2(fd, 2);
    fn(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    char *out = dt_read_file(path, NULL, NULL);
    unlink(path);
    cr_assert_not_null(out);
    return out;
}

/* ---- coordinate: fields and symmetries --------------------------------------- */

Test(mmio, mm_should_read_real_general_into_sorted_rows_keeping_explicit_zeros)
{
    expect_matrix("%%MatrixMarket matrix coordinate real general\n"
                  "3 4 5\n"
                  "3 4 -2.5\n"
                  "1 3 0\n"
                  "1 1 1.5e2\n"
                  "3 1 .25\n"
                  "2 2 -7\n",
                  3, 4, "0,0=150 0,2=0 1,1=-7 2,0=0.25 2,3=-2.5");
}

Test(mmio, mm_should_sum_duplicate_entries)
{
    expect_matrix("%%MatrixMarket matrix coordinate real general\n"
                  "2 2 4\n"
                  "1 1 1\n"
                  "2 2 5\n"
                  "1 1 2.5\n"
                  "1 1 -0.5\n",
                  2, 2, "0,0=3 1,1=5");
}

Test(mmio, mm_should_read_integer_values)
{
    expect_matrix("%%MatrixMarket matrix coordinate integer general\n"
                  "2 3 3\n"
                  "1 3 -4\n"
                  "2 1 12\n"
                  "2 2 +7\n",
                  2, 3, "0,2=-4 1,0=12 1,1=7");
}

Test(mmio, mm_should_read_pattern_as_ones_and_mark_it_even_when_repeated)
{
    dt_err e = {0};
    sp_csr *a = mm_text("%%MatrixMarket matrix coordinate pattern general\n"
                        "2 2 3\n"
                        "2 1\n"
                        "1 2\n"
                        "2 1\n",
                        NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->pattern, 1);
    char *s = csr_str(a);
    cr_assert_str_eq(s, "0,1=1 1,0=1");
    free(s);
    sp_csr_free(a);
}

Test(mmio, mm_should_keep_the_real_part_of_complex_values)
{
    expect_matrix("%%MatrixMarket matrix coordinate complex general\n"
                  "2 2 2\n"
                  "1 2 1.5 -3\n"
                  "2 1 -2 4e5\n",
                  2, 2, "0,1=1.5 1,0=-2");
}

static void read_complex(void *quiet)
{
    dt_err e = {0};
    sp_read_opts o = {.quiet = *(int *)quiet};
    sp_csr *a = mm_text("%%MatrixMarket matrix coordinate complex general\n"
                        "2 2 3\n"
                        "1 1 1 1\n"
                        "1 2 2 2\n"
                        "2 2 3 3\n",
                        &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
}

Test(mmio, mm_should_warn_once_about_dropped_imaginary_parts_unless_quiet)
{
    int quiet = 0;
    char *err = capture_stderr(read_complex, &quiet);
    const char *first = strstr(err, "m.mtx: complex");
    cr_assert_not_null(first, "no warning in: %s", err);
    cr_assert_null(strstr(first + 1, "m.mtx: complex"), "warned more than once: %s", err);
    free(err);
    quiet = 1;
    err = capture_stderr(read_complex, &quiet);
    cr_assert_str_eq(err, "");
    free(err);
}

Test(mmio, mm_should_mirror_symmetric_without_doubling_the_diagonal)
{
    expect_matrix("%%MatrixMarket matrix coordinate real symmetric\n"
                  "3 3 4\n"
                  "1 1 4\n"
                  "2 1 -1\n"
                  "3 2 2\n"
                  "3 3 9\n",
                  3, 3, "0,0=4 0,1=-1 1,0=-1 1,2=2 2,1=2 2,2=9");
}

Test(mmio, mm_should_negate_the_mirror_of_skew_symmetric)
{
    expect_matrix("%%MatrixMarket matrix coordinate real skew-symmetric\n"
                  "3 3 2\n"
                  "2 1 5\n"
                  "3 1 -1.5\n",
                  3, 3, "0,1=-5 0,2=1.5 1,0=5 2,0=-1.5");
}

Test(mmio, mm_should_mirror_the_real_part_of_hermitian)
{
    expect_matrix("%%MatrixMarket matrix coordinate complex hermitian\n"
                  "2 2 2\n"
                  "1 1 3 0\n"
                  "2 1 1 -2\n",
                  2, 2, "0,0=3 0,1=1 1,0=1");
}

Test(mmio, mm_should_mirror_symmetric_pattern)
{
    expect_matrix("%%MatrixMarket matrix coordinate pattern symmetric\n"
                  "3 3 3\n"
                  "1 1\n"
                  "3 1\n"
                  "3 2\n",
                  3, 3, "0,0=1 0,2=1 1,2=1 2,0=1 2,1=1");
}

Test(mmio, mm_should_accept_any_case_comments_blank_lines_tabs_and_crlf)
{
    expect_matrix("%%matrixmarket MATRIX Coordinate REAL General\r\n"
                  "% a comment\r\n"
                  "\r\n"
                  "%another\n"
                  "   \t\n"
                  "  2 2\t2  \r\n"
                  "\t1 1\t1e0\r\n"
                  "2  2  -1E-1 \r\n"
                  "\n",
                  2, 2, "0,0=1 1,1=-0.1");
}

Test(mmio, mm_should_read_a_last_line_without_newline)
{
    expect_matrix("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 42", 1, 1, "0,0=42");
}

Test(mmio, mm_should_read_a_matrix_with_no_entries)
{
    dt_err e = {0};
    sp_csr *a = mm_text("%%MatrixMarket matrix coordinate real general\n4 5 0\n", NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->rows, 4);
    cr_assert_eq(a->cols, 5);
    cr_assert_eq(a->nnz, 0);
    cr_assert_eq(a->rowptr[4], 0);
    sp_csr_free(a);
}

Test(mmio, mm_should_parse_every_value_exactly_as_strtod)
{
    /* Values past Clinger's fast path (17 digits, large exponents,
     * subnormals, more than 19 digits, near-halfway cases) sit beside easy
     * ones; every one must equal strtod's double bit for bit. */
    enum { N = 6000 };
    dt_rng r;
    dt_rng_seed(&r, 2024);
    char(*vals)[64] = calloc(N, sizeof *vals);
    dt_buf b = DT_BUF_INIT;
    dt_buf_printf(&b, "%%%%MatrixMarket matrix coordinate real general\n1 %d %d\n", N, N);
    for (int k = 0; k < N; k++) {
        double v;
        uint64_t bits = dt_rng_next(&r);
        memcpy(&v, &bits, sizeof v);
        if (!isfinite(v))
            v = 1.0;
        switch (k % 8) {
        case 0:
            snprintf(vals[k], 64, "%.17g", v);
            break;
        case 1:
            snprintf(vals[k], 64, "%.*e", (int)dt_rng_below(&r, 17), v);
            break;
        case 2:
            snprintf(vals[k], 64, "%.17g", (dt_rng_uniform(&r) - 0.5) * 1e-2);
            break;
        case 3: { /* 1 to 30 digits, any exponent */
            int n = 1 + (int)dt_rng_below(&r, 30), p = 0;
            for (int i = 0; i < n; i++)
                vals[k][p++] = (char)('0' + dt_rng_below(&r, 10));
            snprintf(vals[k] + p, (size_t)(64 - p), "e%d", (int)dt_rng_below(&r, 700) - 360);
            break;
        }
        case 4: { /* exactly halfway between two doubles, printed in full */
            double lo = fabs(v) / 4, hi = nextafter(lo, INFINITY);
            long double mid = (long double)lo + ((long double)hi - (long double)lo) / 2;
            snprintf(vals[k], 64, "%.40Lg", mid);
            break;
        }
        case 5:
            snprintf(vals[k], 64, "%.17g", ldexp(dt_rng_uniform(&r), -1030)); /* subnormal */
            break;
        case 6:
            snprintf(vals[k], 64, "%.3f", (dt_rng_uniform(&r) - 0.5) * 1e6);
            break;
        default:
            snprintf(vals[k], 64, "-%llu.%llue-5", (unsigned long long)dt_rng_below(&r, 100000),
                     (unsigned long long)dt_rng_below(&r, 1000000000));
            break;
        }
        dt_buf_printf(&b, "1 %d %s\n", k + 1, vals[k]);
    }
    dt_err e = {0};
    sp_read_opts o = {.allow_nonfinite = 1}; /* some exponents overflow, as in strtod */
    sp_csr *a = mm_text(b.data, &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->nnz, N);
    for (int k = 0; k < N; k++) {
        double want = dt_strtod(vals[k], NULL);
        cr_assert(memcmp(&a->val[k], &want, sizeof want) == 0, "%s: read %.17g, strtod %.17g",
                  vals[k], a->val[k], want);
    }
    sp_csr_free(a);
    dt_buf_free(&b);
    free(vals);
}

Test(mmio, mm_should_accept_nan_and_inf_when_allowed)
{
    dt_err e = {0};
    sp_read_opts o = {.allow_nonfinite = 1};
    sp_csr *a = mm_text("%%MatrixMarket matrix coordinate real general\n"
                        "1 4 4\n"
                        "1 1 nan\n"
                        "1 2 -Inf\n"
                        "1 3 infinity\n"
                        "1 4 1e400\n",
                        &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert(isnan(a->val[0]));
    cr_assert(isinf(a->val[1]) && a->val[1] < 0);
    cr_assert(isinf(a->val[2]) && a->val[2] > 0);
    cr_assert(isinf(a->val[3]));
    sp_csr_free(a);
}

Test(mmio, mm_should_read_across_read_chunks)
{
    /* Several MiB, so lines straddle the 1 MiB chunks of the reader. */
    sp_csr *a = random_csr(3000, 5000, 40, 7);
    char *dir = tu_tmpdir();
    char *path = dt_xasprintf("%s/big.mtx", dir);
    dt_err e = {0};
    cr_assert_eq(sp_mm_write(a, path, &e), 0, "%s", e.msg);
    sp_csr *b = sp_mm_read(path, NULL, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert(same_csr(a, b));
    sp_csr_free(a);
    sp_csr_free(b);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

Test(mmio, mm_read_should_name_the_path_it_cannot_open)
{
    dt_err e = {0};
    cr_assert_null(sp_mm_read("/nonexistent/m.mtx", NULL, &e));
    cr_assert(strstr(e.msg, "/nonexistent/m.mtx: No such file or directory") != NULL, "%s", e.msg);
}

/* ---- coordinate: errors ---------------------------------------------------- */

Test(mmio, mm_should_reject_a_missing_banner_on_line_1)
{
    mm_fails("3 3 1\n1 1 1\n",
             "m.mtx:1: not a Matrix Market file: expected '%%MatrixMarket' banner");
    mm_fails("", "m.mtx:1: not a Matrix Market file");
    mm_fails("%%MatrixMarketmatrix coordinate real general\n1 1 0\n",
             "m.mtx:1: not a Matrix Market file");
    mm_fails("%%MatrixMarket matrix coordinate real\n1 1 0\n",
             "m.mtx:1: banner: expected '%%MatrixMarket matrix FORMAT FIELD SYMMETRY'");
    mm_fails("%%MatrixMarket matrix coordinate real general extra\n1 1 0\n",
             "m.mtx:1: banner: unexpected 'extra' after the symmetry");
}

Test(mmio, mm_should_reject_unsupported_object_format_field_and_symmetry)
{
    mm_fails("%%MatrixMarket vector coordinate real general\n1 1 0\n",
             "m.mtx:1: unsupported object 'vector' (expected 'matrix')");
    mm_fails("%%MatrixMarket matrix sparse real general\n1 1 0\n",
             "m.mtx:1: unsupported format 'sparse' (expected 'coordinate' or 'array')");
    mm_fails("%%MatrixMarket matrix coordinate quaternion general\n1 1 0\n",
             "m.mtx:1: unsupported field 'quaternion' (expected real, integer, pattern or "
             "complex)");
    mm_fails("%%MatrixMarket matrix coordinate real diagonal\n1 1 0\n",
             "m.mtx:1: unsupported symmetry 'diagonal' (expected general, symmetric, "
             "skew-symmetric or hermitian)");
}

Test(mmio, mm_should_reject_field_and_symmetry_that_do_not_go_together)
{
    mm_fails("%%MatrixMarket matrix coordinate pattern skew-symmetric\n1 1 0\n",
             "m.mtx:1: field 'pattern' cannot be skew-symmetric");
    mm_fails("%%MatrixMarket matrix coordinate real hermitian\n1 1 0\n",
             "m.mtx:1: symmetry 'hermitian' needs field 'complex', not 'real'");
}

Test(mmio, mm_should_reject_the_array_format_in_the_sparse_reader)
{
    mm_fails("%%MatrixMarket matrix array real general\n1 1\n1\n",
             "m.mtx:1: format 'array' is dense; this reader takes 'coordinate'");
}

Test(mmio, mm_should_reject_a_bad_size_line_with_its_line)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 3\n",
             "m.mtx:2: size line: expected 'rows cols nnz'");
    mm_fails("%%MatrixMarket matrix coordinate real general\n% c\n\n3 -3 1\n",
             "m.mtx:4: size line: expected 'rows cols nnz'");
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 3 1 9\n",
             "m.mtx:2: size line: expected 'rows cols nnz'");
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 3 1.0\n",
             "m.mtx:2: size line: expected 'rows cols nnz'");
    mm_fails("%%MatrixMarket matrix coordinate real general\n% only comments\n",
             "m.mtx:3: file ends before the size line");
}

Test(mmio, mm_should_reject_sizes_beyond_32_bits)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n3000000000 3 1\n",
             "m.mtx:2: rows 3000000000 exceed the 32-bit limit (2147483647)");
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 99999999999999999999999 1\n",
             "m.mtx:2: cols 99999999999999999999999 exceed the 32-bit limit (2147483647)");
}

Test(mmio, mm_should_reject_a_non_square_symmetric_matrix)
{
    mm_fails("%%MatrixMarket matrix coordinate real symmetric\n3 4 1\n1 1 1\n",
             "m.mtx:2: a symmetric matrix must be square, this one is 3 x 4");
}

Test(mmio, mm_should_reject_index_out_of_range_with_its_line)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n"
             "2003 2003 3\n"
             "1 1 1\n"
             "2004 1 1\n"
             "2 2 2\n",
             "m.mtx:4: row index 2004 out of range [1, 2003]");
    mm_fails("%%MatrixMarket matrix coordinate real general\n"
             "% comment\n"
             "3 5 2\n"
             "1 1 1\n"
             "2 6 1\n",
             "m.mtx:5: column index 6 out of range [1, 5]");
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 5 1\n0 1 1\n",
             "m.mtx:3: row index 0 out of range [1, 3]");
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 5 1\n1 -1 1\n",
             "m.mtx:3: column index '-1' is not a positive integer");
    mm_fails("%%MatrixMarket matrix coordinate real general\n3 5 1\n1 99999999999999999999 1\n",
             "m.mtx:3: column index 99999999999999999999 out of range [1, 5]");
}

Test(mmio, mm_should_reject_a_file_that_ends_early_with_the_counts)
{
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, "%%MatrixMarket matrix coordinate real general\n100 100 96\n");
    for (int i = 1; i <= 80; i++)
        dt_buf_printf(&b, "%d %d 1\n", i, i);
    mm_fails(b.data, "m.mtx:83: file ends after 80 of 96 declared entries");
    dt_buf_free(&b);
}

Test(mmio, mm_should_reject_more_entries_than_declared)
{
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, "%%MatrixMarket matrix coordinate real general\n100 100 96\n");
    for (int i = 1; i <= 97; i++)
        dt_buf_printf(&b, "%d %d 1\n", i, i);
    mm_fails(b.data, "m.mtx:99: more entries than the 96 declared");
    dt_buf_free(&b);
}

Test(mmio, mm_should_reject_a_value_that_is_not_a_number)
{
    const char *head = "%%MatrixMarket matrix coordinate real general\n"
                       "3 3 9\n1 1 1\n1 2 2\n1 3 3\n2 1 4\n2 2 5\n2 3 6\n3 1 7\n3 2 8\n";
    char text[512];
    snprintf(text, sizeof text, "%s3 3 abc\n", head);
    mm_fails(text, "m.mtx:11: value 'abc' is not a number");
    snprintf(text, sizeof text, "%s3 3 1.5x\n", head);
    mm_fails(text, "m.mtx:11: value '1.5x' is not a number");
    snprintf(text, sizeof text, "%s3 3 1e\n", head);
    mm_fails(text, "m.mtx:11: value '1e' is not a number");
    snprintf(text, sizeof text, "%s3 3 0x1p3\n", head);
    mm_fails(text, "m.mtx:11: value '0x1p3' is not a number");
    snprintf(text, sizeof text, "%s3 3 .\n", head);
    mm_fails(text, "m.mtx:11: value '.' is not a number");
    snprintf(text, sizeof text, "%s3 3 --1\n", head);
    mm_fails(text, "m.mtx:11: value '--1' is not a number");
}

Test(mmio, mm_should_reject_nan_and_inf_by_default)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 NaN\n",
             "m.mtx:4: value is NaN or Inf (use --allow-nonfinite to accept)");
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 -inf\n",
             "m.mtx:3: value is NaN or Inf (use --allow-nonfinite to accept)");
    mm_fails("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 1 nan\n",
             "m.mtx:3: value is NaN or Inf");
}

Test(mmio, mm_should_reject_values_beyond_the_double_range)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 -1e400\n",
             "m.mtx:3: value '-1e400' is out of the double range");
}

Test(mmio, mm_should_reject_duplicates_that_sum_past_the_double_range)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 3\n1 1 1e308\n2 2 1\n"
             "1 1 1.7e308\n",
             "m.mtx:5: the duplicates of entry (1, 1) sum past the double range");
}

Test(mmio, mm_should_reject_missing_values_and_trailing_garbage)
{
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\n",
             "m.mtx:3: expected 'row col value'");
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 1\n1\n",
             "m.mtx:3: expected 'row col value'");
    mm_fails("%%MatrixMarket matrix coordinate complex general\n2 2 1\n1 1 2\n",
             "m.mtx:3: expected 'row col real imaginary'");
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 2 junk\n",
             "m.mtx:3: unexpected 'junk' after the entry");
    mm_fails("%%MatrixMarket matrix coordinate pattern general\n2 2 1\n1 1 2\n",
             "m.mtx:3: unexpected '2' after the entry");
    mm_fails("%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 2\n% late comment\n",
             "m.mtx:4: row index '%' is not a positive integer");
}

Test(mmio, mm_should_reject_a_line_longer_than_the_limit)
{
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 ");
    for (int i = 0; i < 70000; i++)
        dt_buf_putc(&b, '1');
    dt_buf_puts(&b, "\n");
    mm_fails(b.data, "m.mtx:3: line is longer than 65536 bytes");
    dt_buf_free(&b);
}

Test(mmio, mm_should_reject_a_nul_byte_with_its_line)
{
    static const char text[] = "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1\0 2\n";
    FILE *f = fmemopen((void *)text, sizeof text - 1, "r");
    dt_err e = {0};
    cr_assert_null(sp_mm_read_stream(f, "m.mtx", NULL, &e));
    fclose(f);
    cr_assert(strstr(e.msg, "m.mtx:3: NUL byte in the line") != NULL, "%s", e.msg);
    static const char head[] = "%%MatrixMarket matrix coordinate real general\n% a\0b\n2 2 0\n";
    f = fmemopen((void *)head, sizeof head - 1, "r");
    cr_assert_null(sp_mm_read_stream(f, "m.mtx", NULL, &e));
    fclose(f);
    cr_assert(strstr(e.msg, "m.mtx:2: NUL byte in the line") != NULL, "%s", e.msg);
}

Test(mmio, mm_should_reject_a_diagonal_entry_in_skew_symmetric)
{
    mm_fails("%%MatrixMarket matrix coordinate real skew-symmetric\n3 3 2\n2 1 1\n3 3 1\n",
             "m.mtx:4: diagonal entry (3, 3) in a skew-symmetric matrix");
}

Test(mmio, mm_should_refuse_a_matrix_over_the_memory_limit)
{
    dt_err e = {0};
    sp_read_opts o = {.max_bytes = 1000000};
    cr_assert_null(mm_text("%%MatrixMarket matrix coordinate real general\n"
                           "2000000000 2000000000 1\n1 1 1\n",
                           &o, &e));
    cr_assert(strstr(e.msg, "m.mtx:2: the matrix needs 16.0 GB, over the limit of 1.0 MB") != NULL,
              "%s", e.msg);
    /* A matrix under the limit reads as usual. */
    sp_csr *a = mm_text("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1\n", &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
}

/* ---- writers ------------------------------------------------------------------- */

static char *write_to_string(const sp_csr *a)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    dt_err e = {0};
    cr_assert_eq(sp_mm_write_stream(a, f, &e), 0, "%s", e.msg);
    fclose(f);
    return text;
}

Test(mmio, mm_write_should_emit_1_based_coordinate_real_general)
{
    sp_csr *a = sp_csr_new(2, 3, 3, NULL);
    int64_t rp[] = {0, 2, 3};
    int32_t col[] = {0, 2, 1};
    double val[] = {0.1, -2, 1e-300};
    memcpy(a->rowptr, rp, sizeof rp);
    memcpy(a->col, col, sizeof col);
    memcpy(a->val, val, sizeof val);
    char *text = write_to_string(a);
    cr_assert_str_eq(text, "%%MatrixMarket matrix coordinate real general\n"
                           "2 3 3\n"
                           "1 1 0.10000000000000001\n"
                           "1 3 -2\n"
                           "2 2 1e-300\n");
    free(text);
    a->pattern = 1;
    text = write_to_string(a);
    cr_assert_str_eq(text, "%%MatrixMarket matrix coordinate pattern general\n"
                           "2 3 3\n"
                           "1 1\n"
                           "1 3\n"
                           "2 2\n");
    free(text);
    sp_csr_free(a);
}

Test(mmio, mm_round_trip_should_keep_every_bit)
{
    sp_csr *a = random_csr(60, 45, 12, 3);
    char *text = write_to_string(a);
    dt_err e = {0};
    sp_csr *b = mm_text(text, NULL, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert(same_csr(a, b));
    free(text);
    sp_csr_free(b);
    /* The pattern flag and structure survive as well. */
    a->pattern = 1;
    for (int64_t k = 0; k < a->nnz; k++)
        a->val[k] = 1.0;
    text = write_to_string(a);
    b = mm_text(text, NULL, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert(same_csr(a, b));
    free(text);
    sp_csr_free(b);
    sp_csr_free(a);
}

Test(mmio, mm_write_should_report_a_path_it_cannot_create)
{
    sp_csr *a = random_csr(3, 3, 2, 1);
    dt_err e = {0};
    cr_assert_eq(sp_mm_write(a, "/nonexistent/dir/m.mtx", &e), -1);
    cr_assert(strstr(e.msg, "/nonexistent/dir/m.mtx: No such file or directory") != NULL, "%s",
              e.msg);
    sp_csr_free(a);
}

/* ---- dense array ------------------------------------------------------------------ */

Test(mmio, mm_dense_should_read_column_major)
{
    dt_err e = {0};
    int32_t r = 0, c = 0;
    double *d = dense_text("%%MatrixMarket matrix array real general\n"
                           "% 2 x 3\n"
                           "2 3\n"
                           "1\n2\n3\n4\n5\n-6.5\n",
                           &r, &c, &e);
    cr_assert_not_null(d, "%s", e.msg);
    cr_assert_eq(r, 2);
    cr_assert_eq(c, 3);
    double want[] = {1, 2, 3, 4, 5, -6.5};
    cr_assert_arr_eq(d, want, sizeof want);
    free(d);
}

Test(mmio, mm_dense_should_expand_symmetric_and_skew_symmetric_triangles)
{
    dt_err e = {0};
    int32_t r = 0, c = 0;
    /* Lower triangle column by column: (1,1) (2,1) (3,1) (2,2) (3,2) (3,3). */
    double *d = dense_text("%%MatrixMarket matrix array real symmetric\n3 3\n1\n2\n3\n4\n5\n6\n",
                           &r, &c, &e);
    cr_assert_not_null(d, "%s", e.msg);
    double sym[] = {1, 2, 3, 2, 4, 5, 3, 5, 6};
    cr_assert_arr_eq(d, sym, sizeof sym);
    free(d);
    d = dense_text("%%MatrixMarket matrix array real skew-symmetric\n3 3\n1\n2\n3\n", &r, &c, &e);
    cr_assert_not_null(d, "%s", e.msg);
    double skew[] = {0, 1, 2, -1, 0, 3, -2, -3, 0};
    cr_assert_arr_eq(d, skew, sizeof skew);
    free(d);
    d = dense_text("%%MatrixMarket matrix array complex general\n1 2\n1 9\n-2 9\n", &r, &c, &e);
    cr_assert_not_null(d, "%s", e.msg);
    double cplx[] = {1, -2};
    cr_assert_arr_eq(d, cplx, sizeof cplx);
    free(d);
}

Test(mmio, mm_dense_round_trip_should_keep_every_bit)
{
    enum { R = 7, C = 5 };
    double a[R * C];
    dt_rng r;
    dt_rng_seed(&r, 11);
    for (int k = 0; k < R * C; k++) {
        do {
            uint64_t bits = dt_rng_next(&r);
            memcpy(&a[k], &bits, sizeof bits);
        } while (!isfinite(a[k]));
    }
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    dt_err e = {0};
    cr_assert_eq(sp_mm_write_dense(f, a, R, C, &e), 0, "%s", e.msg);
    fclose(f);
    cr_assert(dt_startswith(text, "%%MatrixMarket matrix array real general\n7 5\n"), "%s", text);
    int32_t rows = 0, cols = 0;
    double *b = dense_text(text, &rows, &cols, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert_eq(rows, R);
    cr_assert_eq(cols, C);
    cr_assert(memcmp(a, b, sizeof a) == 0);
    free(b);
    free(text);
}

Test(mmio, mm_dense_should_reject_wrong_counts_and_the_coordinate_format)
{
    dense_fails("%%MatrixMarket matrix array real general\n2 2\n1\n2\n3\n",
                "d.mtx:6: file ends after 3 of 4 declared entries");
    dense_fails("%%MatrixMarket matrix array real general\n1 2\n1\n2\n3\n",
                "d.mtx:5: more entries than the 2 declared");
    dense_fails("%%MatrixMarket matrix array real general\n2 2 4\n",
                "d.mtx:2: size line: expected 'rows cols'");
    dense_fails("%%MatrixMarket matrix array real general\n1 1\n1 2\n",
                "d.mtx:3: unexpected '2' after the entry");
    dense_fails("%%MatrixMarket matrix array pattern general\n1 1\n",
                "d.mtx:1: field 'pattern' is not allowed with format 'array'");
    dense_fails("%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 1\n",
                "d.mtx:1: format 'coordinate' is sparse; this reader takes 'array'");
    dense_fails("%%MatrixMarket matrix array real symmetric\n2 3\n",
                "d.mtx:2: a symmetric matrix must be square, this one is 2 x 3");
}

/* ---- .smtx ------------------------------------------------------------------------ */

Test(mmio, smtx_should_read_offsets_and_columns_as_a_pattern)
{
    dt_err e = {0};
    sp_csr *a = smtx_text("3, 4, 5\n0 2 2 5\n1 3 0 2 3\n", &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->rows, 3);
    cr_assert_eq(a->cols, 4);
    cr_assert_eq(a->nnz, 5);
    cr_assert_eq(a->pattern, 1);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    char *s = csr_str(a);
    cr_assert_str_eq(s, "0,1=1 0,3=1 2,0=1 2,2=1 2,3=1");
    free(s);
    sp_csr_free(a);
}

Test(mmio, smtx_should_accept_trailing_blanks_crlf_and_a_missing_final_newline)
{
    dt_err e = {0};
    sp_csr *a = smtx_text("2,2,2 \r\n0 1 2 \r\n1 0 ", &e);
    cr_assert_not_null(a, "%s", e.msg);
    char *s = csr_str(a);
    cr_assert_str_eq(s, "0,1=1 1,0=1");
    free(s);
    sp_csr_free(a);
}

Test(mmio, smtx_should_sort_unsorted_rows)
{
    dt_err e = {0};
    sp_csr *a = smtx_text("2, 6, 6\n0 4 6\n5 0 3 1 2 1\n", &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    char *s = csr_str(a);
    cr_assert_str_eq(s, "0,0=1 0,1=1 0,3=1 0,5=1 1,1=1 1,2=1");
    free(s);
    sp_csr_free(a);
}

Test(mmio, smtx_should_read_empty_rows_and_an_empty_matrix)
{
    dt_err e = {0};
    sp_csr *a = smtx_text("3, 3, 1\n0 0 1 1\n2\n", &e);
    cr_assert_not_null(a, "%s", e.msg);
    char *s = csr_str(a);
    cr_assert_str_eq(s, "1,2=1");
    free(s);
    sp_csr_free(a);
    a = smtx_text("2, 3, 0\n0 0 0\n", &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->nnz, 0);
    sp_csr_free(a);
    a = smtx_text("2, 3, 0\n0 0 0\n\n", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
}

Test(mmio, smtx_should_reject_duplicate_columns_in_a_row)
{
    smtx_fails("2, 4, 4\n0 1 4\n0 3 1 3\n", "w.smtx:3: duplicate column 3 in row 1");
}

Test(mmio, smtx_should_reject_a_bad_first_line)
{
    smtx_fails("", "w.smtx:1: expected 'rows, cols, nnz'");
    smtx_fails("3, 4\n", "w.smtx:1: expected 'rows, cols, nnz'");
    smtx_fails("3; 4; 5\n", "w.smtx:1: expected 'rows, cols, nnz'");
    smtx_fails("3, 4, 5, 6\n", "w.smtx:1: unexpected ',' after 'rows, cols, nnz'");
    smtx_fails("3000000000, 4, 5\n", "w.smtx:1: rows 3000000000 exceed the 32-bit limit");
    smtx_fails("2, 2, 5\n0 2 5\n0 1 0 1 1\n", "w.smtx:1: nnz 5 exceeds rows x cols = 4");
}

Test(mmio, smtx_should_reject_bad_row_offsets)
{
    smtx_fails("2, 4, 2\n1 1 2\n0 1\n", "w.smtx:2: first row offset is 1, expected 0");
    smtx_fails("3, 4, 3\n0 2 1 3\n0 1 2\n", "w.smtx:2: row offsets decrease at row 1 (1 after 2)");
    smtx_fails("2, 4, 3\n0 1 2\n0 1 2\n", "w.smtx:2: last row offset is 2, expected nnz 3");
    smtx_fails("2, 4, 2\n0 1\n0 1\n", "w.smtx:2: expected 3 row offsets (rows + 1), found 2");
    smtx_fails("2, 4, 2\n0 1 2 2\n0 1\n",
               "w.smtx:2: more than the 3 row offsets expected (rows + 1)");
    smtx_fails("2, 4, 2\n0 x 2\n0 1\n", "w.smtx:2: row offset 1: expected a number, found 'x'");
    smtx_fails("2, 4, 2\n0 9 2\n0 1\n", "w.smtx:2: row offset 9 (row 0) exceeds nnz 2");
    smtx_fails("2, 4, 2\n", "w.smtx:2: expected 3 row offsets (rows + 1), found 0");
}

Test(mmio, smtx_should_reject_bad_column_indices)
{
    smtx_fails("2, 4, 3\n0 1 3\n0 1 4\n", "w.smtx:3: column index 4 (row 1) out of range [0, 3]");
    smtx_fails("2, 4, 3\n0 1 3\n0 1\n", "w.smtx:3: expected 3 column indices, found 2");
    smtx_fails("2, 4, 3\n0 1 3\n", "w.smtx:3: expected 3 column indices, found 0");
    smtx_fails("2, 4, 3\n0 1 3\n0 1 2 3\n", "w.smtx:3: more than the 3 column indices declared");
    smtx_fails("2, 4, 3\n0 1 3\n0 -1 2\n",
               "w.smtx:3: column index 1: expected a number, found '-'");
    smtx_fails("2, 4, 3\n0 1 3\n0 1 2\n7\n", "w.smtx:4: unexpected '7' after the column indices");
    smtx_fails("2, 4, 3\n0 1 3\n0 1 2 x\n", "w.smtx:3: unexpected 'x' after the column indices");
}

Test(mmio, smtx_should_read_lines_longer_than_a_read_chunk)
{
    /* Line 3 alone is several MiB: .smtx lines have no length limit. */
    enum { ROWS = 1500, COLS = 3000, PER = 700 };
    dt_buf b = DT_BUF_INIT;
    dt_buf_printf(&b, "%d, %d, %d\n", ROWS, COLS, ROWS * PER);
    for (int i = 0; i <= ROWS; i++)
        dt_buf_printf(&b, "%d ", i * PER);
    dt_buf_puts(&b, "\n");
    for (int i = 0; i < ROWS; i++) {
        for (int k = 0; k < PER; k++)
            dt_buf_printf(&b, "%d ", (k * 4 + i) % COLS);
    }
    dt_buf_puts(&b, "\n");
    char *dir = tu_tmpdir();
    char *path = tu_write(dir, "big.smtx", b.data);
    dt_err e = {0};
    sp_csr *a = sp_smtx_read(path, NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->nnz, ROWS * PER);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    /* Row 500 was written unsorted (it wraps past COLS) and must come back sorted. */
    cr_assert_eq(a->col[a->rowptr[1]], 1);
    cr_assert_eq(a->col[a->rowptr[500]], 0);
    sp_csr_free(a);
    free(path);
    tu_rmtree(dir);
    free(dir);
    dt_buf_free(&b);
}

Test(mmio, smtx_read_should_name_the_path_it_cannot_open)
{
    dt_err e = {0};
    cr_assert_null(sp_smtx_read("/nonexistent/w.smtx", NULL, &e));
    cr_assert(strstr(e.msg, "/nonexistent/w.smtx: No such file or directory") != NULL, "%s", e.msg);
}

/* ---- progress and compressed input --------------------------------------------------- */

typedef struct prog_log {
    int calls;
    int64_t last_done, total;
    int decreasing;
} prog_log;

static void prog_cb(void *ud, int64_t done, int64_t total)
{
    prog_log *l = ud;
    l->decreasing |= done < l->last_done;
    l->calls++;
    l->last_done = done;
    l->total = total;
}

/* The callback sees every chunk: the bytes read so far, rising to the
 * whole file, and the file's size; through gzip the size is unknown (-1)
 * and the bytes are the decompressed ones. */
Test(mmio, progress_should_count_the_bytes_read_up_to_the_file_size)
{
    char *gz = tu_matrix("fidapex6.mtx"); /* 1,321,187 bytes uncompressed: two chunks */
    char *dir = tu_tmpdir();
    tu_proc p = tu_run("gzip -dc '%s' > '%s/m.mtx'", gz, dir);
    cr_assert_eq(p.status, 0, "%s", p.err);
    tu_proc_free(&p);
    char *plain = dt_xasprintf("%s/m.mtx", dir);
    prog_log l = {0};
    sp_read_opts o = {.progress = prog_cb, .progress_ud = &l};
    dt_err e = {0};
    sp_csr *a = sp_mm_read(plain, &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_geq(l.calls, 2);
    cr_assert(!l.decreasing);
    cr_assert_eq(l.last_done, 1321187);
    cr_assert_eq(l.total, 1321187);
    sp_csr *b = sp_mm_read(gz, &(sp_read_opts){.progress = prog_cb, .progress_ud = &l}, &e);
    cr_assert_not_null(b, "%s", e.msg);
    cr_assert_eq(l.total, -1);
    cr_assert_eq(l.last_done, 1321187);
    char fa[17], fb[17];
    sp_csr_fingerprint(a, fa);
    sp_csr_fingerprint(b, fb);
    cr_assert_str_eq(fa, fb, "the .gz reads as another matrix");
    sp_csr_free(a);
    sp_csr_free(b);
    free(plain);
    free(gz);
    tu_rmtree(dir);
    free(dir);
}

/* A truncated .gz stream is an error naming the file (zlib's words), never a
 * shorter matrix. */
Test(mmio, a_truncated_gzip_file_should_fail_naming_it)
{
    char *gz = tu_matrix("bcsstk13.mtx");
    char *dir = tu_tmpdir();
    tu_proc p = tu_run("head -c 100000 '%s' > '%s/cut.mtx.gz'", gz, dir);
    cr_assert_eq(p.status, 0, "%s", p.err);
    tu_proc_free(&p);
    char *cut = dt_xasprintf("%s/cut.mtx.gz", dir);
    dt_err e = {0};
    sp_read_opts o = {.quiet = 1};
    cr_assert_null(sp_mm_read(cut, &o, &e));
    cr_assert(strstr(e.msg, "cut.mtx.gz"), "%s", e.msg);
    cr_assert_null(sp_load(cut, &o, &e));
    free(cut);
    free(gz);
    tu_rmtree(dir);
    free(dir);
}

/* The in-place fast path and the line-by-line path read the same matrix
 * (a file whose lines mix both forms across chunk boundaries), and an error
 * on a line of the fast form is reported as before, with its line. */
Test(mmio, fast_and_line_by_line_entries_should_read_the_same_and_fail_the_same)
{
    dt_err e = {0};
    sp_csr *g = sp_generate("gen:uniform:rows=20000,nnz=200000,seed=7", &e);
    cr_assert_not_null(g, "%s", e.msg);
    char *dir = tu_tmpdir();
    char *plain = dt_xasprintf("%s/plain.mtx", dir), *mixed = dt_xasprintf("%s/mixed.mtx", dir);
    cr_assert_eq(sp_mm_write(g, plain, &e), 0, "%s", e.msg);
    /* every third entry line with tabs, every fifth with CRLF, every seventh
     * with two spaces: the fast path takes none of those */
    tu_proc p = tu_run("awk 'NR > 2 && NR %% 3 == 0 { gsub(/ /, \"\\t\") } "
                       "NR > 2 && NR %% 5 == 0 { $0 = $0 \"\\r\" } "
                       "NR > 2 && NR %% 7 == 0 { sub(/ /, \"  \") } { print }' '%s' > '%s'",
                       plain, mixed);
    cr_assert_eq(p.status, 0, "%s", p.err);
    tu_proc_free(&p);
    sp_csr *a = sp_mm_read(plain, NULL, &e), *b = sp_mm_read(mixed, NULL, &e);
    cr_assert(a && b, "%s", e.msg);
    char fg[17], fa[17], fb[17];
    sp_csr_fingerprint(g, fg);
    sp_csr_fingerprint(a, fa);
    sp_csr_fingerprint(b, fb);
    cr_assert_str_eq(fa, fg);
    cr_assert_str_eq(fb, fg);
    sp_csr_free(a);
    sp_csr_free(b);
    /* line 100003 (entry 100001): a row index past the size, in the fast form */
    p = tu_run("awk 'NR == 100003 { $1 = 20001 } { print }' '%s' > '%s/bad.mtx'", plain, dir);
    cr_assert_eq(p.status, 0, "%s", p.err);
    tu_proc_free(&p);
    char *bad = dt_xasprintf("%s/bad.mtx", dir);
    cr_assert_null(sp_mm_read(bad, NULL, &e));
    cr_assert(strstr(e.msg, "bad.mtx:100003: row index 20001 out of range [1, 20000]"), "%s",
              e.msg);
    free(bad);
    sp_csr_free(g);
    free(plain);
    free(mixed);
    tu_rmtree(dir);
    free(dir);
}

/* A three-line file declaring 2^31 - 1 rows: its sorted entries took the
 * path that skipped the admission, which callocs and walks the row array
 * (16 GB: the system killed ditto after 190 s). Now the header's sizes are
 * admitted before any entry is read, whichever path follows. */
Test(mmio, a_header_declaring_more_rows_than_memory_should_be_refused_before_the_entries)
{
    setenv("DITTO_MEM_AVAILABLE", "16M", 1);
    static const char *const files[] = {
        "%%MatrixMarket matrix coordinate real general\n2147483647 2147483647 1\n1 1 1.0\n",
        "%%MatrixMarket matrix coordinate real general\n134217728 4 2\n1 1 1.0\n2 2 1.0\n",
        "%%MatrixMarket matrix coordinate pattern symmetric\n134217728 134217728 1\n2 1\n",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(files); i++) {
        dt_err e = {0};
        sp_csr *a = mm_text(files[i], NULL, &e);
        cr_expect_null(a, "file %zu was read", i);
        sp_csr_free(a);
        cr_expect(strstr(e.msg, "m.mtx:2: a "), "%s", e.msg);
        cr_expect(strstr(e.msg, "16.0 MB is available"), "%s", e.msg);
    }
    /* a small one still reads under the same limit */
    dt_err e = {0};
    sp_csr *a = mm_text("%%MatrixMarket matrix coordinate real general\n3 3 1\n1 1 2.0\n", NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
    unsetenv("DITTO_MEM_AVAILABLE");
}
