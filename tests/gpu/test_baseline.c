/* test_baseline.c -- cuSPARSE baselines (every algorithm, fp32 and fp64, against the fp64
 * CPU references) and CUPTI metrics on a real GPU; the tests that need one skip without. */
#include "tests/common/testutil.h"

#include "gpu/worker/baseline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- helpers ---------------------------------------------------------------- */

static void open_or_skip(void)
{
    dev_info info;
    dev_open(0, &info);
    if (!info.present)
        cr_skip_test("no GPU: %s", info.reason);
}

static void load_or_skip(void)
{
    dt_err e = {0};
    if (gpu_cusparse_load(&e) != 0)
        cr_skip_test("%s", e.msg);
}

/* Uniform in +-[0.5, 1.5): never zero, as the verifier's inputs. */
static double rnd(dt_rng *r)
{
    double v = 0.5 + dt_rng_uniform(r);
    return dt_rng_below(r, 2) ? v : -v;
}

/* rows x cols with about per_row random columns per row, row 3 empty and row 5 holding
 * half the columns; rows not a multiple of 32, so the last sliced-ELL slice is partial. */
static sp_csr *random_csr(int32_t rows, int32_t cols, int per_row, uint64_t seed)
{
    dt_err e = {0};
    dt_rng r;
    dt_rng_seed(&r, seed);
    sp_coo *c = sp_coo_new(rows, cols, (int64_t)rows * per_row + cols, &e);
    cr_assert_not_null(c, "%s", e.msg);
    for (int32_t i = 0; i < rows; i++) {
        if (i == 3)
            continue;
        int len = i == 5 ? cols / 2 : 1 + (int)dt_rng_below(&r, (uint64_t)(2 * per_row));
        for (int k = 0; k < len; k++) {
            int32_t j = (int32_t)dt_rng_below(&r, (uint64_t)cols);
            cr_assert_eq(sp_coo_push(c, i, j, rnd(&r), &e), 0, "%s", e.msg);
        }
    }
    sp_csr *a = sp_coo_to_csr(c, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_coo_free(c);
    return a;
}

/* The matrix as the device holds it in dtype t (values rounded), or with |values|. */
static sp_csr *csr_copy(const sp_csr *a, sp_dtype t, int absolute)
{
    dt_err e = {0};
    sp_csr *b = sp_csr_dup(a, &e);
    cr_assert_not_null(b, "%s", e.msg);
    for (int64_t k = 0; k < b->nnz; k++) {
        b->val[k] = sp_round(b->val[k], t);
        if (absolute)
            b->val[k] = fabs(b->val[k]);
    }
    return b;
}

/* n random values already rounded to dtype t (what the device will see). */
static double *random_vals(size_t n, sp_dtype t, uint64_t seed)
{
    dt_rng r;
    dt_rng_seed(&r, seed);
    double *v = malloc((n ? n : 1) * sizeof *v);
    cr_assert_not_null(v);
    for (size_t i = 0; i < n; i++)
        v[i] = sp_round(rnd(&r), t);
    return v;
}

static double *abs_vals(const double *v, size_t n)
{
    double *a = malloc((n ? n : 1) * sizeof *a);
    cr_assert_not_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = fabs(v[i]);
    return a;
}

static double *filled(size_t n, double v)
{
    double *a = malloc((n ? n : 1) * sizeof *a);
    cr_assert_not_null(a);
    for (size_t i = 0; i < n; i++)
        a[i] = v;
    return a;
}

/* Upload into b (allocated on first use) n values converted to dtype t. */
static void put(dev_buf *b, const double *v, size_t n, sp_dtype t)
{
    dt_err e = {0};
    size_t bytes = n * (size_t)sp_dtype_size(t);
    void *tmp = malloc(bytes ? bytes : 1);
    cr_assert_not_null(tmp);
    sp_to_dtype(v, tmp, n, t);
    if (b->ptr == 0)
        cr_assert_eq(dev_alloc(b, bytes, &e), 0, "%s", e.msg);
    if (bytes)
        cr_assert_eq(dev_copy_in(b->ptr, tmp, bytes, &e), 0, "%s", e.msg);
    free(tmp);
}

static double *get(const dev_buf *b, size_t n, sp_dtype t)
{
    dt_err e = {0};
    size_t bytes = n * (size_t)sp_dtype_size(t);
    void *tmp = malloc(bytes ? bytes : 1);
    double *v = malloc((n ? n : 1) * sizeof *v);
    cr_assert(tmp && v);
    cr_assert_eq(dev_download(tmp, b, bytes, &e), 0, "%s", e.msg);
    sp_from_dtype(tmp, v, n, t);
    free(tmp);
    return v;
}

/* Element i must satisfy |got - ref| <= gamma(len_i + 2) * absref_i + u |ref_i| + tiny,
 * the worst-case bound for a sum of len_i terms in any order (PROTOCOL.md, verify), with
 * absref the same computation on |values| and |alpha|, |beta|. len_of maps an element to
 * its number of summed terms. */
static void check_close(const char *what, const double *got, const double *ref,
                        const double *absref, size_t n, sp_dtype t,
                        int64_t (*len_of)(size_t i, const void *ctx), const void *ctx)
{
    double u = t == SP_FP64 ? ldexp(1.0, -53) : ldexp(1.0, -24);
    for (size_t i = 0; i < n; i++) {
        double m = (double)(len_of(i, ctx) + 2) * u;
        double bound = m / (1 - m) * absref[i] + u * fabs(ref[i]) + 1e-300;
        cr_assert(isfinite(got[i]) && fabs(got[i] - ref[i]) <= bound,
                  "%s: element %zu is %.17g, reference %.17g (bound %.3g)", what, i, got[i],
                  ref[i], bound);
    }
}

static void check_stats(const char *what, const dev_stats *s, int min_runs)
{
    cr_assert(s->valid, "%s: no stats", what);
    cr_assert(s->runs >= min_runs, "%s: %d runs", what, s->runs);
    cr_assert(s->min_us > 0 && s->median_us >= s->min_us && s->max_us >= s->median_us,
              "%s: min %g median %g max %g", what, s->min_us, s->median_us, s->max_us);
}

static void check_result(const char *what, const gpu_cs_result *r, unsigned modes, int min_runs)
{
    cr_assert(r->ok, "%s: %s", what, r->error);
    cr_assert(r->preprocess_us >= 0 && r->setup_us >= 0, "%s: setup %g preprocess %g", what,
              r->setup_us, r->preprocess_us);
    if (modes & (1u << DEV_TIME_COLD))
        check_stats(what, &r->cold, min_runs);
    if (modes & (1u << DEV_TIME_WARM))
        check_stats(what, &r->warm, min_runs);
    if (modes & (1u << DEV_TIME_GRAPH)) {
        if (r->graph.valid)
            check_stats(what, &r->graph, min_runs);
        else
            cr_assert(r->note[0] != '\0', "%s: graph timing missing without a reason", what);
    }
}

#define ALL_MODES ((1u << DEV_TIME_COLD) | (1u << DEV_TIME_WARM) | (1u << DEV_TIME_GRAPH))
#define MIN_RUNS 5
/* Written where cuSPARSE must write: still there means an output was skipped. */
#define POISON 1e30

static int64_t row_len(const sp_csr *a, int32_t i)
{
    return a->rowptr[i + 1] - a->rowptr[i];
}

/* ---- SpMV ------------------------------------------------------------------------ */

static int64_t spmv_len(size_t i, const void *ctx)
{
    return row_len(ctx, (int32_t)i);
}

static void spmv_all(sp_dtype t)
{
    open_or_skip();
    load_or_skip();
    dt_err e = {0};
    sp_csr *a = random_csr(1000, 800, 8, 11);
    sp_csr *ar = csr_copy(a, t, 0), *aa = csr_copy(a, t, 1);
    dev_fmt f;
    cr_assert_eq(dev_fmt_build(a, "csr", NULL, t, 1, &f, &e), 0, "%s", e.msg);
    double *x = random_vals((size_t)a->cols, t, 21), *y0 = random_vals((size_t)a->rows, t, 22);
    double *ax = abs_vals(x, (size_t)a->cols), *ay0 = abs_vals(y0, (size_t)a->rows);
    double *poison = filled((size_t)a->rows, POISON);
    dev_buf dx = {0}, dy = {0};
    put(&dx, x, (size_t)a->cols, t);

    const char *names[16];
    int n = gpu_cusparse_algs(SP_SPMV, t, names, 16);
    cr_assert_eq(n, 5);
    for (int k = 0; k < n; k++) {
        gpu_cs_problem p = {.op = SP_SPMV, .dtype = t, .host = a, .csr = &f, .x = dx.ptr};
        gpu_cs_result r;
        char what[96];
        /* beta 0: every output written, none read. */
        snprintf(what, sizeof what, "spmv %s %s beta 0", sp_dtype_name(t), names[k]);
        put(&dy, poison, (size_t)a->rows, t);
        p.y = dy.ptr;
        p.alpha = 1.0;
        p.beta = 0.0;
        cr_assert_eq(gpu_cusparse_run(&p, names[k], 0, MIN_RUNS, 0.001, &r, &e), 0, "%s: %s",
                     what, e.msg);
        check_result(what, &r, 0, MIN_RUNS);
        double *ref = filled((size_t)a->rows, 0), *aref = filled((size_t)a->rows, 0);
        sp_ref_spmv(ar, x, 1.0, 0.0, ref);
        sp_ref_spmv(aa, ax, 1.0, 0.0, aref);
        double *got = get(&dy, (size_t)a->rows, t);
        check_close(what, got, ref, aref, (size_t)a->rows, t, spmv_len, a);
        free(got);
        /* alpha and beta both in play, timed in every mode; the output left behind must
         * still be one application (timing runs accumulate into y). */
        snprintf(what, sizeof what, "spmv %s %s", sp_dtype_name(t), names[k]);
        put(&dy, y0, (size_t)a->rows, t);
        p.alpha = 1.5;
        p.beta = 0.5;
        cr_assert_eq(gpu_cusparse_run(&p, names[k], ALL_MODES, MIN_RUNS, 0.001, &r, &e), 0,
                     "%s: %s", what, e.msg);
        check_result(what, &r, ALL_MODES, MIN_RUNS);
        memcpy(ref, y0, (size_t)a->rows * sizeof *ref);
        memcpy(aref, ay0, (size_t)a->rows * sizeof *aref);
        sp_ref_spmv(ar, x, 1.5, 0.5, ref);
        sp_ref_spmv(aa, ax, 1.5, 0.5, aref);
        got = get(&dy, (size_t)a->rows, t);
        check_close(what, got, ref, aref, (size_t)a->rows, t, spmv_len, a);
        free(got);
        free(ref);
        free(aref);
    }
    dev_free(&dx);
    dev_free(&dy);
    dev_fmt_free(&f);
    free(x);
    free(y0);
    free(ax);
    free(ay0);
    free(poison);
    sp_csr_free(a);
    sp_csr_free(ar);
    sp_csr_free(aa);
}

Test(cusparse, spmv_every_algorithm_should_match_the_fp32_reference)
{
    spmv_all(SP_FP32);
}

Test(cusparse, spmv_every_algorithm_should_match_the_fp64_reference)
{
    spmv_all(SP_FP64);
}

/* ---- SpMM ------------------------------------------------------------------------ */

typedef struct spmm_ctx {
    const sp_csr *a;
    int32_t n;
    sp_layout layout;
} spmm_ctx;

static int64_t spmm_len(size_t i, const void *ctx)
{
    const spmm_ctx *c = ctx;
    size_t row = c->layout == SP_ROW_MAJOR ? i / (size_t)c->n : i % (size_t)c->a->rows;
    return row_len(c->a, (int32_t)row);
}

static void spmm_all(sp_dtype t, sp_layout layout)
{
    open_or_skip();
    load_or_skip();
    dt_err e = {0};
    const int32_t n = 13; /* no multiple of any tile */
    sp_csr *a = random_csr(700, 500, 6, 31);
    sp_csr *ar = csr_copy(a, t, 0), *aa = csr_copy(a, t, 1);
    dev_fmt f;
    cr_assert_eq(dev_fmt_build(a, "csr", NULL, t, 1, &f, &e), 0, "%s", e.msg);
    size_t nb = (size_t)a->cols * n, nc = (size_t)a->rows * n;
    double *b = random_vals(nb, t, 41), *c0 = random_vals(nc, t, 42);
    double *ab = abs_vals(b, nb), *ac0 = abs_vals(c0, nc), *poison = filled(nc, POISON);
    dev_buf db = {0}, dc = {0};
    put(&db, b, nb, t);
    spmm_ctx ctx = {a, n, layout};

    const char *names[16];
    int cnt = gpu_cusparse_algs(SP_SPMM, t, names, 16);
    cr_assert_eq(cnt, 3);
    for (int k = 0; k < cnt; k++) {
        gpu_cs_problem p = {.op = SP_SPMM, .dtype = t, .n = n, .layout = layout, .host = a,
                            .csr = &f, .B = db.ptr};
        gpu_cs_result r;
        char what[96];
        snprintf(what, sizeof what, "spmm %s %s %s beta 0", sp_dtype_name(t),
                 layout == SP_ROW_MAJOR ? "row" : "col", names[k]);
        put(&dc, poison, nc, t);
        p.C = dc.ptr;
        p.alpha = 1.0;
        p.beta = 0.0;
        int rc = gpu_cusparse_run(&p, names[k], 0, MIN_RUNS, 0.001, &r, &e);
        /* The 12.x docs give CSR_ALG3 no layout restriction, older ones were read as row-
         * major only; should cuSPARSE refuse it, that is an honest "not supported" (the
         * baseline reports it so), not a wrong answer. */
        if (rc != 0 && layout == SP_COL_MAJOR && strcmp(names[k], "CSR_ALG3") == 0 &&
            strstr(e.msg, "CUSPARSE_STATUS_NOT_SUPPORTED") != NULL) {
            cr_log_warn("%s: %s", what, e.msg);
            continue;
        }
        cr_assert_eq(rc, 0, "%s: %s", what, e.msg);
        check_result(what, &r, 0, MIN_RUNS);
        double *ref = filled(nc, 0), *aref = filled(nc, 0);
        sp_ref_spmm(ar, b, n, layout, 1.0, 0.0, ref);
        sp_ref_spmm(aa, ab, n, layout, 1.0, 0.0, aref);
        double *got = get(&dc, nc, t);
        check_close(what, got, ref, aref, nc, t, spmm_len, &ctx);
        free(got);

        snprintf(what, sizeof what, "spmm %s %s %s", sp_dtype_name(t),
                 layout == SP_ROW_MAJOR ? "row" : "col", names[k]);
        put(&dc, c0, nc, t);
        p.alpha = -0.75;
        p.beta = 0.5;
        cr_assert_eq(gpu_cusparse_run(&p, names[k], ALL_MODES, MIN_RUNS, 0.001, &r, &e), 0,
                     "%s: %s", what, e.msg);
        check_result(what, &r, ALL_MODES, MIN_RUNS);
        memcpy(ref, c0, nc * sizeof *ref);
        memcpy(aref, ac0, nc * sizeof *aref);
        sp_ref_spmm(ar, b, n, layout, -0.75, 0.5, ref);
        sp_ref_spmm(aa, ab, n, layout, 0.75, 0.5, aref);
        got = get(&dc, nc, t);
        check_close(what, got, ref, aref, nc, t, spmm_len, &ctx);
        free(got);
        free(ref);
        free(aref);
    }
    dev_free(&db);
    dev_free(&dc);
    dev_fmt_free(&f);
    free(b);
    free(c0);
    free(ab);
    free(ac0);
    free(poison);
    sp_csr_free(a);
    sp_csr_free(ar);
    sp_csr_free(aa);
}

Test(cusparse, spmm_row_major_should_match_the_fp32_reference)
{
    spmm_all(SP_FP32, SP_ROW_MAJOR);
}

Test(cusparse, spmm_column_major_should_match_the_fp32_reference)
{
    spmm_all(SP_FP32, SP_COL_MAJOR);
}

Test(cusparse, spmm_row_major_should_match_the_fp64_reference)
{
    spmm_all(SP_FP64, SP_ROW_MAJOR);
}

Test(cusparse, spmm_column_major_should_match_the_fp64_reference)
{
    spmm_all(SP_FP64, SP_COL_MAJOR);
}

/* ---- SDDMM ----------------------------------------------------------------------- */

static int64_t sddmm_len(size_t i, const void *ctx)
{
    (void)i;
    return *(const int32_t *)ctx;
}

static void sddmm_all(sp_dtype t)
{
    open_or_skip();
    load_or_skip();
    dt_err e = {0};
    const int32_t k = 37;
    sp_csr *s = random_csr(600, 450, 7, 51);
    sp_csr *sr = csr_copy(s, t, 0), *sa = csr_copy(s, t, 1);
    dev_fmt f;
    cr_assert_eq(dev_fmt_build(s, "csr", NULL, t, 1, &f, &e), 0, "%s", e.msg);
    size_t na = (size_t)s->rows * k, nbt = (size_t)s->cols * k, nnz = (size_t)s->nnz;
    double *A = random_vals(na, t, 61), *Bt = random_vals(nbt, t, 62);
    double *aA = abs_vals(A, na), *aBt = abs_vals(Bt, nbt), *poison = filled(nnz, POISON);
    dev_buf dA = {0}, dB = {0}, dout = {0};
    put(&dA, A, na, t);
    put(&dB, Bt, nbt, t);

    const char *names[4];
    cr_assert_eq(gpu_cusparse_algs(SP_SDDMM, t, names, 4), 1);
    gpu_cs_problem p = {.op = SP_SDDMM, .dtype = t, .n = k, .host = s, .csr = &f, .A = dA.ptr,
                        .Bt = dB.ptr};
    gpu_cs_result r;
    char what[96];
    snprintf(what, sizeof what, "sddmm %s beta 0", sp_dtype_name(t));
    put(&dout, poison, nnz, t);
    p.out = dout.ptr;
    p.alpha = 1.0;
    p.beta = 0.0;
    cr_assert_eq(gpu_cusparse_run(&p, names[0], 0, MIN_RUNS, 0.001, &r, &e), 0, "%s: %s", what,
                 e.msg);
    check_result(what, &r, 0, MIN_RUNS);
    double *ref = filled(nnz, 0), *aref = filled(nnz, 0);
    sp_ref_sddmm(sr, A, Bt, k, 1.0, 0.0, ref);
    sp_ref_sddmm(sa, aA, aBt, k, 1.0, 0.0, aref);
    double *got = get(&dout, nnz, t);
    check_close(what, got, ref, aref, nnz, t, sddmm_len, &k);
    free(got);

    /* beta != 0 scales the matrix values, which the caller puts in out first. */
    snprintf(what, sizeof what, "sddmm %s", sp_dtype_name(t));
    put(&dout, sr->val, nnz, t);
    p.alpha = 2.0;
    p.beta = -0.5;
    cr_assert_eq(gpu_cusparse_run(&p, names[0], ALL_MODES, MIN_RUNS, 0.001, &r, &e), 0, "%s: %s",
                 what, e.msg);
    check_result(what, &r, ALL_MODES, MIN_RUNS);
    sp_ref_sddmm(sr, A, Bt, k, 2.0, -0.5, ref);
    sp_ref_sddmm(sa, aA, aBt, k, 2.0, 0.5, aref);
    got = get(&dout, nnz, t);
    check_close(what, got, ref, aref, nnz, t, sddmm_len, &k);
    free(got);

    free(ref);
    free(aref);
    dev_free(&dA);
    dev_free(&dB);
    dev_free(&dout);
    dev_fmt_free(&f);
    free(A);
    free(Bt);
    free(aA);
    free(aBt);
    free(poison);
    sp_csr_free(s);
    sp_csr_free(sr);
    sp_csr_free(sa);
}

Test(cusparse, sddmm_should_match_the_fp32_reference)
{
    sddmm_all(SP_FP32);
}

Test(cusparse, sddmm_should_match_the_fp64_reference)
{
    sddmm_all(SP_FP64);
}

/* ---- without a GPU -------------------------------------------------------------- */

Test(cusparse, algs_should_list_the_documented_algorithms_in_order)
{
    const char *names[16];
    const char *spmv[] = {"CSR_ALG1", "CSR_ALG2", "COO_ALG1", "COO_ALG2", "SELL_ALG1"};
    cr_assert_eq(gpu_cusparse_algs(SP_SPMV, SP_FP32, names, 16), 5);
    for (int i = 0; i < 5; i++)
        cr_assert_str_eq(names[i], spmv[i]);
    cr_assert_eq(gpu_cusparse_algs(SP_SPMV, SP_FP32, names, 2), 2, "max must be honoured");
    cr_assert_eq(gpu_cusparse_algs(SP_SPMM, SP_FP64, names, 16), 3);
    cr_assert_eq(gpu_cusparse_algs(SP_SPMM, SP_FP16, names, 16), 1);
    cr_assert_str_eq(names[0], "CSR_ALG3");
    cr_assert_eq(gpu_cusparse_algs(SP_SDDMM, SP_FP32, names, 16), 1);
    cr_assert_str_eq(names[0], "CSR_ALG_DEFAULT");
    cr_assert_eq(gpu_cusparse_algs(SP_SDDMM, SP_BF16, names, 16), 0);
}

Test(cusparse, run_should_refuse_an_inapplicable_algorithm_with_the_reason)
{
    dev_fmt f;
    memset(&f, 0, sizeof f);
    gpu_cs_problem p = {.op = SP_SPMM, .dtype = SP_BF16, .n = 8, .csr = &f, .B = 1, .C = 2};
    gpu_cs_result r;
    dt_err e = {0};
    cr_assert_eq(gpu_cusparse_run(&p, "CSR_ALG2", 0, 1, 0, &r, &e), -1);
    cr_assert(!r.ok);
    cr_assert(strstr(r.error, "CSR_ALG3") != NULL, "%s", r.error);
    cr_assert_str_eq(r.error, e.msg);
    cr_assert_eq(gpu_cusparse_run(&p, "NO_SUCH_ALG", 0, 1, 0, &r, &e), -1);
    cr_assert(strstr(r.error, "unknown") != NULL, "%s", r.error);
}

Test(cusparse, load_should_report_path_and_version)
{
    load_or_skip();
    cr_assert(gpu_cusparse_loaded());
    cr_assert(gpu_cusparse_path()[0] != '\0');
    const char *v = gpu_cusparse_version();
    cr_assert(v[0] >= '1' && v[0] <= '9' && strchr(v, '.') != NULL, "version '%s'", v);
}

/* ---- CUPTI ---------------------------------------------------------------------- */

/* extern "C" __global__ void ditto_scale(float *y, const float *x, float a, int n)
 * { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i]; }
 * compiled by nvcc 13.0 with -ptx -arch=compute_75 (the driver JIT-compiles it for the
 * GPU at hand); only .version is lowered from 9.0 so that CUDA 12 drivers accept it too,
 * the instructions being as old as PTX. */
static const char SCALE_PTX[] =
    ".version 7.0\n"
    ".target sm_75\n"
    ".address_size 64\n"
    ".visible .entry ditto_scale(\n"
    "    .param .u64 ditto_scale_param_0,\n"
    "    .param .u64 ditto_scale_param_1,\n"
    "    .param .f32 ditto_scale_param_2,\n"
    "    .param .u32 ditto_scale_param_3\n"
    ")\n"
    "{\n"
    "    .reg .pred %p<2>;\n"
    "    .reg .f32 %f<4>;\n"
    "    .reg .b32 %r<6>;\n"
    "    .reg .b64 %rd<8>;\n"
    "    ld.param.u64 %rd1, [ditto_scale_param_0];\n"
    "    ld.param.u64 %rd2, [ditto_scale_param_1];\n"
    "    ld.param.f32 %f1, [ditto_scale_param_2];\n"
    "    ld.param.u32 %r2, [ditto_scale_param_3];\n"
    "    mov.u32 %r3, %ctaid.x;\n"
    "    mov.u32 %r4, %ntid.x;\n"
    "    mov.u32 %r5, %tid.x;\n"
    "    mad.lo.s32 %r1, %r3, %r4, %r5;\n"
    "    setp.ge.s32 %p1, %r1, %r2;\n"
    "    @%p1 bra $L__BB0_2;\n"
    "    cvta.to.global.u64 %rd3, %rd2;\n"
    "    mul.wide.s32 %rd4, %r1, 4;\n"
    "    add.s64 %rd5, %rd3, %rd4;\n"
    "    ld.global.f32 %f2, [%rd5];\n"
    "    mul.f32 %f3, %f2, %f1;\n"
    "    cvta.to.global.u64 %rd6, %rd1;\n"
    "    add.s64 %rd7, %rd6, %rd4;\n"
    "    st.global.f32 [%rd7], %f3;\n"
    "$L__BB0_2:\n"
    "    ret;\n"
    "}\n";

typedef struct scale_work {
    CUmodule mod;
    CUfunction fn;
    dev_buf x, y;
    float a;
    int n;
} scale_work;

static int scale_enqueue(void *ud, CUstream s, dt_err *e)
{
    scale_work *w = ud;
    void *args[] = {&w->y.ptr, &w->x.ptr, &w->a, &w->n};
    unsigned grid = (unsigned)((w->n + 255) / 256);
    return dev_check(CU(cuLaunchKernel)(w->fn, grid, 1, 1, 256, 1, 1, 0, s, args, NULL),
                     "cuLaunchKernel", e);
}

/* Work with no kernel at all: CUPTI's ranges are kernels. */
static int memset_enqueue(void *ud, CUstream s, dt_err *e)
{
    scale_work *w = ud;
    return dev_check(CU(cuMemsetD32Async)(w->y.ptr, 0, (size_t)w->n, s), "cuMemsetD32Async", e);
}

/* The scale kernel over 16M floats (64 MB each way, beyond any L2). Skips (the reason
 * is the test's message) when the device or CUPTI cannot give metrics. */
static void scale_setup(scale_work *w)
{
    open_or_skip();
    char why[512] = "";
    if (gpu_cupti_probe(why, sizeof why) != 0) {
        cr_assert(why[0] != '\0', "the probe failed without a reason");
        cr_skip_test("metrics unavailable: %s", why);
    }
    dt_err e = {0};
    memset(w, 0, sizeof *w);
    w->n = 1 << 24;
    w->a = 3.0f;
    cr_assert_eq(dev_check(CU(cuModuleLoadData)(&w->mod, SCALE_PTX), "cuModuleLoadData", &e), 0,
                 "%s", e.msg);
    cr_assert_eq(dev_check(CU(cuModuleGetFunction)(&w->fn, w->mod, "ditto_scale"),
                           "cuModuleGetFunction", &e),
                 0, "%s", e.msg);
    cr_assert_eq(dev_alloc(&w->x, (size_t)w->n * 4, &e), 0, "%s", e.msg);
    cr_assert_eq(dev_alloc(&w->y, (size_t)w->n * 4, &e), 0, "%s", e.msg);
    /* x[i] = 2.0f (0x40000000) */
    cr_assert_eq(dev_check(CU(cuMemsetD32Async)(w->x.ptr, 0x40000000u, (size_t)w->n, dev_stream()),
                           "cuMemsetD32Async", &e),
                 0, "%s", e.msg);
    cr_assert_eq(dev_sync(&e), 0, "%s", e.msg);
}

static void scale_teardown(scale_work *w)
{
    dev_free(&w->x);
    dev_free(&w->y);
    if (w->mod)
        CU(cuModuleUnload)(w->mod);
}

Test(cupti, probe_should_say_why_when_there_is_no_device)
{
    dev_info info;
    dev_open(0, &info);
    if (info.present)
        cr_skip_test("a GPU is present");
    char why[512] = "";
    cr_assert_eq(gpu_cupti_probe(why, sizeof why), -1);
    cr_assert(why[0] != '\0');
}

Test(cupti, collect_should_measure_time_and_dram_bytes_of_a_kernel)
{
    scale_work w;
    scale_setup(&w);
    const char *metrics[] = {"gpu__time_duration.sum", "dram__bytes_read.sum"};
    double v[2];
    char why[512] = "";
    int rc = gpu_cupti_collect(metrics, 2, scale_enqueue, &w, v, why, sizeof why);
    cr_assert_eq(rc, 0, "%s", why);
    cr_assert(v[0] > 0 && isfinite(v[0]), "gpu__time_duration.sum = %g", v[0]);
    cr_assert(v[1] > 0 && isfinite(v[1]), "dram__bytes_read.sum = %g", v[1]);
    /* The kernel ran (KernelReplay restores memory between passes, and the result must
     * be the single run's). */
    float y[4];
    dt_err e = {0};
    dev_buf head = {w.y.ptr, sizeof y};
    cr_assert_eq(dev_download(y, &head, sizeof y, &e), 0, "%s", e.msg);
    for (int i = 0; i < 4; i++)
        cr_assert_float_eq(y[i], 6.0f, 0);
    scale_teardown(&w);
}

Test(cupti, collect_should_leave_an_unknown_metric_nan_and_keep_the_others)
{
    scale_work w;
    scale_setup(&w);
    const char *metrics[] = {"gpu__time_duration.sum", "ditto__no_such_metric.sum",
                             "dram__bytes_read.sum"};
    double v[3];
    char why[512] = "";
    cr_assert_eq(gpu_cupti_collect(metrics, 3, scale_enqueue, &w, v, why, sizeof why), 0, "%s",
                 why);
    cr_assert(v[0] > 0, "gpu__time_duration.sum = %g", v[0]);
    cr_assert(isnan(v[1]), "unknown metric = %g", v[1]);
    cr_assert(v[2] > 0, "dram__bytes_read.sum = %g", v[2]);
    scale_teardown(&w);
}

Test(cupti, collect_should_refuse_work_without_a_kernel)
{
    scale_work w;
    scale_setup(&w);
    const char *metrics[] = {"gpu__time_duration.sum"};
    double v[1];
    char why[512] = "";
    cr_assert_eq(gpu_cupti_collect(metrics, 1, memset_enqueue, &w, v, why, sizeof why), -1);
    cr_assert(strstr(why, "kernel") != NULL, "%s", why);
    cr_assert(isnan(v[0]));
    scale_teardown(&w);
}
