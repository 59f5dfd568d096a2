/* runner.c -- runs a kernel under its launch contract: requests,
 * preparation (compile per matrix, device format, operand buffers), input
 * sets, the fp64 reference with per-element tolerances, poison and one run,
 * and the reference-only and metrics requests; verify.c, measure.c and
 * baseline.c build on it (runner.h).
 * Over 1,000 lines: operands, tolerances and an instance's life are one
 * contract that every request shares. */
#include "gpu/worker/runner.h"
#include "sparse/tolerance.h"

#include "core/schema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- requests ---------------------------------------------------------------- */

/* A seed no kernel can predict: the clock, the process and a counter, mixed;
 * below 2^53 so that it survives JSON. */
uint64_t run_fresh_seed(uint64_t salt)
{
    uint64_t z =
        (uint64_t)(dt_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^ (salt * 0x9e3779b97f4a7c15ULL);
    return mix64(z) >> 11;
}

/* The problem fields of a request (gpu/PROTOCOL.md); other keys belong to
 * the request's own schema (worker.c). */
static const char *const op_names[] = {"spmv", "spmm", "sddmm", NULL};
static const char *const dtype_names[] = {"fp32", "fp64", "fp16", "bf16", NULL};
static const char *const epilogue_names[] = {"none", "relu", "gelu", "bias", NULL};
static const dt_schema op_s = {.type = DT_SCHEMA_STR, .choices = op_names};
static const dt_schema dtype_s = {.type = DT_SCHEMA_STR, .choices = dtype_names};
static const dt_schema epilogue_s = {.type = DT_SCHEMA_STR, .choices = epilogue_names};
static const dt_schema n_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 65536};
static const dt_schema scalar_s = {.type = DT_SCHEMA_NUM};
static const dt_schema seed_s = {.type = DT_SCHEMA_INT, .min = 0, .max = 9007199254740992.0};

static void problem_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    (void)path;
    const cJSON *op = dt_schema_get(s, v, "op");
    const cJSON *epi = dt_schema_get(s, v, "epilogue");
    if (op != NULL && epi != NULL && dt_streq(op->valuestring, "sddmm") &&
        dt_streq(epi->valuestring, "bias"))
        dt_schema_expected(c, "$.epilogue", epi, "none, relu or gelu for sddmm");
}

static const dt_schema_field problem_fields[] = {
    {"op", &op_s, 0},        {"dtype", &dtype_s, 0}, {"epilogue", &epilogue_s, 0}, {"n", &n_s, 0},
    {"alpha", &scalar_s, 0}, {"beta", &scalar_s, 0}, {"seed", &seed_s, 0},         {NULL, NULL, 0}};
static const dt_schema problem_s = {.type = DT_SCHEMA_OBJ,
                                    .flags = DT_SCHEMA_OPEN,
                                    .fields = problem_fields,
                                    .check = problem_rules};

int wk_problem_parse(const cJSON *req, wk_problem *p, dt_err *e)
{
    memset(p, 0, sizeof *p);
    if (dt_schema_validate(&problem_s, req, NULL, e) != 0) {
        e->code = WK_EBAD;
        return -1;
    }
    /* Valid: each name parses, each number is in range. */
    sp_op_parse(dt_json_str(req, "op", "spmv"), &p->op);
    sp_dtype_parse(dt_json_str(req, "dtype", "fp32"), &p->dtype);
    sp_epilogue_parse(dt_json_str(req, "epilogue", "none"), &p->epilogue);
    p->n = p->op == SP_SPMV ? 1 : (int32_t)dt_json_i64(req, "n", 32);
    p->alpha = dt_json_num(req, "alpha", 1.0);
    p->beta = dt_json_num(req, "beta", 0.0);
    /* Without a seed: 12345, but verify draws a fresh one (wk_verify). */
    p->seed = (uint64_t)dt_json_i64(req, "seed", 12345);
    return 0;
}

void wk_kernel_clear(wk_kernel *k)
{
    free(k->source);
    free(k->name);
    for (int i = 0; i < k->noptions; i++)
        free(k->options[i]);
    gpu_contract_clear(&k->contract);
    cJSON_Delete(k->params);
    memset(k, 0, sizeof *k);
}

/* A request's kernel object; the contract has its own parser
 * (gpu_contract_parse), the sandbox reads the source and the options. */
static const dt_schema source_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_BYTES, .min_len = 1, .max_len = GPU_MAX_SOURCE_BYTES};
static const dt_schema kname_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = 255};
static const dt_schema option_s = {.type = DT_SCHEMA_STR, .max_len = 4096};
static const dt_schema options_s = {.type = DT_SCHEMA_ARR, .max_len = 48, .items = &option_s};
static const dt_schema param_s = {.type = DT_SCHEMA_INT};
static const dt_schema params_s = {.type = DT_SCHEMA_MAP, .max_len = 256, .items = &param_s};
static const dt_schema_field kernel_fields[] = {{"source", &source_s, 1},   {"name", &kname_s, 0},
                                                {"options", &options_s, 0}, {"contract", NULL, 0},
                                                {"params", &params_s, 0},   {NULL, NULL, 0}};
static const dt_schema kernel_s = {.type = DT_SCHEMA_OBJ,
                                   .flags = DT_SCHEMA_OPEN,
                                   .fields = kernel_fields,
                                   .what = "a kernel object {\"source\": ..., \"contract\"?: ...}"};
static const dt_schema_field kernel_request_fields[] = {{"kernel", &kernel_s, 1}, {NULL, NULL, 0}};
static const dt_schema wk_kernel_request_schema = {
    .type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN, .fields = kernel_request_fields};

int wk_kernel_parse(const cJSON *req, wk_kernel *k, dt_err *e)
{
    memset(k, 0, sizeof *k);
    if (dt_schema_validate(&wk_kernel_request_schema, req, NULL, e) != 0) {
        e->code = WK_EBAD;
        return -1;
    }
    const cJSON *kj = cJSON_GetObjectItemCaseSensitive(req, "kernel");
    const char *src = dt_json_str(kj, "source", NULL);
    const char *kname = dt_json_str(kj, "name", "kernel.cu");
    if (gpu_sandbox_check(src, strlen(src), kname, e) != 0) {
        e->code = WK_EBAD;
        return -1;
    }
    k->source = dt_xstrdup(src);
    k->name = dt_xstrdup(kname);
    const cJSON *opts = cJSON_GetObjectItemCaseSensitive(kj, "options");
    const cJSON *o;
    cJSON_ArrayForEach(o, opts)
    {
        if (gpu_sandbox_option(o->valuestring, k->noptions ? k->options[k->noptions - 1] : NULL,
                               e) != 0) {
            e->code = WK_EBAD;
            dt_err_prefix(e, "kernel.options");
            wk_kernel_clear(k);
            return -1;
        }
        k->options[k->noptions++] = dt_xstrdup(o->valuestring);
    }
    const cJSON *cj = cJSON_GetObjectItemCaseSensitive(kj, "contract");
    int rc = cj ? gpu_contract_parse(cj, &k->contract, e)
                : gpu_contract_from_source(k->source, &k->contract, e);
    if (rc != 0) {
        e->code = WK_ECONTRACT;
        wk_kernel_clear(k);
        return -1;
    }
    /* The request's params, and the manifest's default for each parameter
     * it does not name: a grid or format formula may read any of them. */
    const cJSON *pj = cJSON_GetObjectItemCaseSensitive(kj, "params");
    gpu_manifest man;
    dt_err me = {0};
    int have_man = gpu_manifest_from_source(k->source, &man, &me) == 0;
    if (pj != NULL) {
        k->params = cJSON_Duplicate(pj, 1);
        if (have_man) {
            cJSON *d = gpu_manifest_defaults(&man);
            const cJSON *dv;
            cJSON_ArrayForEach(dv, d)
            {
                if (cJSON_IsObject(k->params) &&
                    cJSON_GetObjectItemCaseSensitive(k->params, dv->string) == NULL)
                    cJSON_AddNumberToObject(k->params, dv->string, dv->valuedouble);
            }
            cJSON_Delete(d);
        }
    } else if (have_man) {
        k->params = gpu_manifest_defaults(&man);
    } else if (me.code != GPU_ENOMANIFEST) {
        e->code = WK_ECONTRACT;
        dt_err_set(e, "%s", me.msg);
        wk_kernel_clear(k);
        return -1;
    }
    if (have_man)
        gpu_manifest_clear(&man);
    const cJSON *pv;
    cJSON_ArrayForEach(pv, k->params)
    {
        int64_t iv = 0;
        dt_err ie = {0};
        if (dt_json_to_int(pv, INT64_MIN, INT64_MAX, &iv, &ie) != 0) {
            e->code = WK_EBAD;
            dt_err_set(e, "kernel.params.%s: %s", pv->string, ie.msg);
            wk_kernel_clear(k);
            return -1;
        }
    }
    return 0;
}

void wk_kernel_vars(const wk_kernel *k, const gpu_vars *fvars, const wk_problem *p, gpu_vars *out)
{
    *out = *fvars;
    gpu_vars_set(out, "n", p->op == SP_SPMM ? p->n : 0);
    gpu_vars_set(out, "k", p->op == SP_SDDMM ? p->n : 0);
    const cJSON *pv;
    cJSON_ArrayForEach(pv, k->params) gpu_vars_set(out, pv->string, dt_json_as_i64(pv, 0));
}

/* gpu_format_params for a kernel, a failure coded WK_ECONTRACT. */
cJSON *wk_format_params(const wk_kernel *k, dt_err *e)
{
    cJSON *out = gpu_format_params(&k->contract, k->params, e);
    if (out == NULL && k->contract.format_params != NULL && e)
        e->code = WK_ECONTRACT;
    return out;
}

/* ---- host-side operands ------------------------------------------------------ */

/* The unit roundoff of a dtype's storage (sparse/tolerance.h). */
double run_u_of(sp_dtype t)
{
    switch (t) {
    case SP_FP64:
        return SP_TOL_U_FP64;
    case SP_FP32:
        return SP_TOL_U_FP32;
    case SP_FP16:
        return SP_TOL_U_FP16;
    case SP_BF16:
        return SP_TOL_U_BF16;
    }
    return SP_TOL_U_FP32;
}

/* Accumulation is fp32 for every type but fp64: a kernel that sums in half
 * precision fails verification, deliberately. */
static double u_acc(sp_dtype t)
{
    return t == SP_FP64 ? SP_TOL_U_FP64 : SP_TOL_U_FP32;
}

void run_operands_free(operands *o)
{
    free(o->in1);
    free(o->in2);
    free(o->out0);
    free(o->bias);
    free(o->ref);
    free(o->tol);
    memset(o, 0, sizeof *o);
}

/* ---- inputs: one generator per chunk, so threads change nothing ---- */

#define FILL_CHUNK ((int64_t)1 << 16) /* values per generator */

typedef struct fill_job {
    double *v;
    int64_t n;
    uint64_t key; /* (seed, set, array) hashed; the chunk index is added per chunk */
    sp_dtype t;
} fill_job;

/* The next value of stream *s, before rounding: one draw per value, bits
 * 11..63 for the magnitude and bit 0 for the sign (independent bits of a
 * mixed word). */
static inline double fill_draw(uint64_t *s)
{
    uint64_t r = mix64(*s += GOLDEN);
    double m = 0.5 + (double)(r >> 11) * 0x1.0p-53;
    uint64_t bits;
    memcpy(&bits, &m, sizeof bits);
    bits ^= (~r & 1) << 63; /* (r & 1) ? m : -m without a branch, a coin toss to predict */
    memcpy(&m, &bits, sizeof m);
    return m;
}

/* Chunks [c0, c1): chunk c is a splitmix64 stream started at a hash of
 * (key, c), the same whichever thread draws it. */
static void fill_chunks(void *ctx, int64_t c0, int64_t c1, int part)
{
    (void)part;
    const fill_job *j = ctx;
    double *v = j->v;
    for (int64_t c = c0; c < c1; c++) {
        uint64_t s = mix64(j->key + GOLDEN * (uint64_t)(c + 1));
        int64_t lo = c * FILL_CHUNK, hi = lo + FILL_CHUNK < j->n ? lo + FILL_CHUNK : j->n;
        switch (j->t) { /* fp64 and fp32 round inline */
        case SP_FP64:
            for (int64_t i = lo; i < hi; i++)
                v[i] = fill_draw(&s);
            break;
        case SP_FP32:
            for (int64_t i = lo; i < hi; i++)
                v[i] = (double)(float)fill_draw(&s);
            break;
        case SP_FP16:
        case SP_BF16:
            for (int64_t i = lo; i < hi; i++)
                v[i] = sp_round(fill_draw(&s), j->t);
            break;
        }
    }
}

/* Never zeros: magnitudes uniform in [0.5, 1.5) (53-bit steps) with a
 * random sign, rounded to the dtype so that the reference sees exactly what
 * the device sees. The values depend on (seed, set, which, index) only --
 * not on the thread count. */
void run_fill_random(double *v, size_t n, uint64_t seed, int set, int which, sp_dtype t)
{
    uint64_t key = mix64(seed + GOLDEN);
    key = mix64(key + GOLDEN * (uint64_t)(set + 1));
    key = mix64(key + GOLDEN * (uint64_t)(which + 1));
    fill_job j = {v, (int64_t)n, key, t};
    int64_t chunks = ((int64_t)n + FILL_CHUNK - 1) / FILL_CHUNK;
    sp_parallel_for(chunks, 4 * (int64_t)n, fill_chunks, &j);
}

/* Operands at HBM sizes run to gigabytes (32M nonzeros x n = 32: 1.8 GB an
 * array); asking for transparent huge pages cuts the page faults of first
 * touch, which took more time than the arithmetic of the reference. */
double *run_xalloc_doubles(size_t n, dt_err *e)
{
    size_t bytes = (n ? n : 1) * sizeof(double);
    double *p = malloc(bytes);
    if (p == NULL) {
        e->code = WK_ENOMEM;
        dt_err_set(e, "out of host memory for %zu values", n);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    const uintptr_t huge = (uintptr_t)2 << 20;
    if (bytes >= 4 * huge) {
        uintptr_t lo = ((uintptr_t)p + huge - 1) & ~(huge - 1);
        uintptr_t hi = ((uintptr_t)p + bytes) & ~(huge - 1);
        if (hi > lo)
            (void)madvise((void *)lo, hi - lo, MADV_HUGEPAGE); /* a hint: failure is harmless */
    }
#endif
    return p;
}

static void epilogue_apply(sp_epilogue ep, const double *bias, size_t idx_row, double *v)
{
    switch (ep) {
    case SP_EPI_NONE:
        break;
    case SP_EPI_RELU:
        *v = *v > 0 ? *v : 0;
        break;
    case SP_EPI_GELU: {
        double x = *v;
        *v = 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
        break;
    }
    case SP_EPI_BIAS:
        *v += bias[idx_row];
        break;
    }
}

/* cuSPARSE computes alpha op + beta out only: the problem's epilogue is
 * applied to its outputs (v, in output order) on the host, so that they
 * compare with the reference, which includes it. The timed baseline stays
 * without the epilogue (a fused epilogue is part of what ditto offers). */
void run_epilogue_on_host(const wk_problem *p, const sp_csr *a, sp_layout layout,
                          const double *bias, double *v, size_t nout)
{
    if (p->epilogue == SP_EPI_NONE)
        return;
    size_t rows = (size_t)a->rows, n = p->n > 0 ? (size_t)p->n : 1;
    for (size_t i = 0; i < nout; i++) {
        size_t row = p->op == SP_SPMV   ? i
                     : p->op == SP_SPMM ? (layout == SP_COL_MAJOR ? i % rows : i / n)
                                        : 0; /* SDDMM: no bias */
        epilogue_apply(p->epilogue, bias, row, &v[i]);
    }
}

typedef struct copy_job {
    double *dst;
    const double *src;
} copy_job;

static void copy_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const copy_job *j = ctx;
    memcpy(j->dst + lo, j->src + lo, (size_t)(hi - lo) * sizeof *j->dst);
}

/* memcpy of n doubles over threads: the first touch of a fresh array's
 * pages is most of the cost, and that spreads. */
static void par_copy(double *dst, const double *src, size_t n)
{
    copy_job j = {dst, src};
    sp_parallel_for((int64_t)n, (int64_t)n, copy_range, &j);
}

/* The tolerance pass over the outputs: the epilogue applied to the
 * reference, and tol, holding |A| |B| per output on entry, turned into the
 * tolerance in place, as sparse/tolerance.h defines it. */
typedef struct tol_job {
    const sp_csr *a;
    const wk_problem *p;
    sp_layout layout;
    const operands *o;
    double ua, uo, tiny; /* accumulation and output unit roundoff, the floor */
    int with_out0;       /* beta's term: with beta == 0 it adds exactly 0 */
} tol_job;

static inline double row_len(const sp_csr *a, size_t row)
{
    return (double)(a->rowptr[row + 1] - a->rowptr[row]);
}

/* Output idx, in row `row` (bias), whose sum has the factor c. Inlined
 * into each of tol_range's loops. */
static inline __attribute__((always_inline)) void tol_one(const tol_job *j, size_t idx, size_t row,
                                                          double c)
{
    const wk_problem *p = j->p;
    const operands *o = j->o;
    double m = fabs(p->alpha) * o->tol[idx];
    if (j->with_out0)
        m += fabs(p->beta) * fabs(o->out0[idx]);
    if (p->epilogue == SP_EPI_BIAS)
        m += fabs(o->bias[row]);
    epilogue_apply(p->epilogue, o->bias, row, &o->ref[idx]);
    o->tol[idx] =
        sp_tol_bound(c, j->ua, j->uo, j->tiny, m, o->ref[idx], p->epilogue == SP_EPI_GELU);
}

/* Outputs [lo, hi), walking the rows along rather than dividing per output. */
static void tol_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const tol_job *j = ctx;
    const sp_csr *a = j->a;
    const wk_problem *p = j->p;
    size_t idx = (size_t)lo, end = (size_t)hi;
    if (p->op == SP_SDDMM) { /* one dot product of n terms per output */
        double c = sp_tol_c(p->n);
        for (; idx < end; idx++)
            tol_one(j, idx, 0, c);
    } else if (p->op == SP_SPMM && j->layout == SP_ROW_MAJOR) {
        size_t n = (size_t)p->n;
        for (size_t row = idx / n; idx < end; row++) {
            double c = sp_tol_c(row_len(a, row));
            size_t stop = (row + 1) * n < end ? (row + 1) * n : end;
            for (; idx < stop; idx++)
                tol_one(j, idx, row, c);
        }
    } else { /* SpMV (row idx) or column-major SpMM (row idx % rows) */
        size_t rows = (size_t)a->rows;
        size_t row = p->op == SP_SPMM ? idx % rows : idx;
        for (; idx < end; idx++) {
            tol_one(j, idx, row, sp_tol_c(row_len(a, row)));
            if (++row == rows)
                row = 0;
        }
    }
}

/* Generate set `set` of inputs for matrix a (values already rounded to the
 * dtype in av) and, when with_ref, compute the fp64 reference and the
 * tolerance per output. Timing and counters need only the inputs: the
 * reference costs two host passes over the matrix, seconds at 32M nonzeros. */

int run_make_operands(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                      int set, int with_ref, operands *o, dt_err *e)
{
    if (with_ref)
        return run_make_operands_any(a, av, p, layout, set, 1, NULL, 0, o, e);
    return run_make_operands_any(a, av, p, layout, set, 0, NULL, 0, o, e);
}

/* Scale each value by 2^-k, k in 0..7 drawn per index: exact in every
 * dtype (no value falls below fp16's normal range). */
static void widen(double *v, size_t n, uint64_t salt)
{
    for (size_t i = 0; i < n; i++)
        v[i] = ldexp(v[i], -(int)(mix64(salt + GOLDEN * (uint64_t)i) % 8));
}

/* Inputs of near, but for about one value in 64 of in1 and in2, which keep
 * this set's own draws. */
static void keep_near(double *v, const double *nv, size_t n, uint64_t salt)
{
    for (size_t i = 0; i < n; i++)
        if (mix64(salt + GOLDEN * (uint64_t)i) % 64 != 0)
            v[i] = nv[i];
}

int run_make_operands_near(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                           int set, const operands *near, operands *o, dt_err *e)
{
    return run_make_operands_any(a, av, p, layout, set, 1, near, 0, o, e);
}

int run_make_operands_any(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                          int set, int with_ref, const operands *near, int wide, operands *o,
                          dt_err *e)
{
    memset(o, 0, sizeof *o);
    size_t rows = (size_t)a->rows, cols = (size_t)a->cols, n = (size_t)p->n;
    switch (p->op) {
    case SP_SPMV:
        o->nin1 = cols;
        o->nout = rows;
        break;
    case SP_SPMM:
        o->nin1 = cols * n;
        o->nout = rows * n;
        break;
    case SP_SDDMM:
        o->nin1 = rows * n;
        o->nin2 = cols * n;
        o->nout = (size_t)a->nnz;
        break;
    }
    o->in1 = run_xalloc_doubles(o->nin1, e);
    o->in2 = o->nin2 ? run_xalloc_doubles(o->nin2, e) : NULL;
    o->out0 = run_xalloc_doubles(o->nout, e);
    o->bias = run_xalloc_doubles(rows, e);
    o->ref = run_xalloc_doubles(o->nout, e);
    o->tol = run_xalloc_doubles(o->nout, e);
    if (!o->in1 || (o->nin2 && !o->in2) || !o->out0 || !o->bias || !o->ref || !o->tol) {
        run_operands_free(o);
        return -1;
    }
    run_fill_random(o->in1, o->nin1, p->seed, set, FILL_IN1, p->dtype);
    if (o->in2)
        run_fill_random(o->in2, o->nin2, p->seed, set, FILL_IN2, p->dtype);
    if (wide) { /* magnitudes over 2^-7 .. 1.5: no threshold on |x| goes unseen */
        uint64_t salt = mix64(p->seed ^ (uint64_t)set ^ 0x77ULL);
        widen(o->in1, o->nin1, salt);
        if (o->in2)
            widen(o->in2, o->nin2, salt ^ GOLDEN);
    }
    if (near != NULL && near->nin1 == o->nin1 && near->nin2 == o->nin2) {
        uint64_t salt = mix64(p->seed + (uint64_t)set);
        keep_near(o->in1, near->in1, o->nin1, salt);
        if (o->in2)
            keep_near(o->in2, near->in2, o->nin2, salt ^ GOLDEN);
    }
    run_fill_random(o->bias, rows, p->seed, set, FILL_BIAS, p->dtype);
    if (p->op == SP_SDDMM)
        par_copy(o->out0, av, o->nout);
    else
        run_fill_random(o->out0, o->nout, p->seed, set, FILL_OUT0, p->dtype);
    if (!with_ref) {
        free(o->ref);
        free(o->tol);
        o->ref = o->tol = NULL;
        return 0;
    }

    sp_csr va = *a; /* a view with the device's values */
    va.val = (double *)av;
    /* The reference and, from the same pass, |A| |B| per output into tol
     * (turned into the tolerance in place below): the scale of the rounding
     * error the tolerance allows. At 32M nonzeros and n = 32 each of these
     * arrays is 1.8 GB, so none is spent on a copy. */
    double *mag = o->tol;
    /* With beta == 0 the references neither read an output (nor, for SDDMM,
     * S's values) and write every one: nothing to start them from. */
    if (p->beta != 0.0)
        par_copy(o->ref, o->out0, o->nout);
    switch (p->op) {
    case SP_SPMV:
        sp_ref_spmv_mag(&va, o->in1, p->alpha, p->beta, o->ref, mag);
        break;
    case SP_SPMM:
        sp_ref_spmm_mag(&va, o->in1, p->n, layout, p->alpha, p->beta, o->ref, mag);
        break;
    case SP_SDDMM:
        sp_ref_sddmm_mag(&va, o->in1, o->in2, p->n, p->alpha, p->beta, o->ref, mag);
        break;
    }
    tol_job tj = {.a = a,
                  .p = p,
                  .layout = layout,
                  .o = o,
                  .ua = u_acc(p->dtype),
                  .uo = run_u_of(p->dtype),
                  .tiny =
                      (p->dtype == SP_FP16 || p->dtype == SP_BF16) ? SP_TOL_TINY_HALF : SP_TOL_TINY,
                  /* finite random values but for SDDMM, whose S may hold Inf */
                  .with_out0 = p->beta != 0.0 || p->op == SP_SDDMM};
    sp_parallel_for((int64_t)o->nout, 8 * (int64_t)o->nout, tol_range, &tj);
    return 0;
}

/* ---- instances: a kernel ready to run on one matrix --------------------------- */

static void instance_free(instance *in)
{
    if (in->loaded)
        dev_kernel_unload(&in->k);
    gpu_cubin_free(in->cubin);
    for (int i = 0; i < 4; i++)
        dev_free(&in->gbase[i]);
    memset(&in->in1, 0, sizeof in->in1);
    memset(&in->in2, 0, sizeof in->in2);
    memset(&in->out, 0, sizeof in->out);
    memset(&in->bias, 0, sizeof in->bias);
    dev_free(&in->scratch);
    for (int i = 0; i < in->nmoved; i++)
        dev_free(&in->moved[i]);
    for (int i = 0; i < in->nmoved_fmt; i++) {
        run_fmt_clone_free(in->moved_fmt[i]);
        free(in->moved_fmt[i]);
    }
    if (in->owns_fmt)
        dev_fmt_free(&in->own_fmt);
    memset(in, 0, sizeof *in);
}

static const char *t_name(sp_dtype t)
{
    switch (t) {
    case SP_FP64:
        return "double";
    case SP_FP16:
        return "__half";
    case SP_BF16:
        return "__nv_bfloat16";
    default:
        return "float";
    }
}

/* Values of a matrix as the device sees them in dtype t. For the worker's
 * own matrices they are cached. A finite value that the dtype rounds to an
 * infinity (fp16 past 65504) is refused, naming it: every reference and
 * every kernel would be NaN there, and the battery's message would not say
 * why. */
static double *rounded_values(const sp_csr *a, sp_dtype t, dt_err *e)
{
    double *v = run_xalloc_doubles((size_t)a->nnz, e);
    if (v == NULL)
        return NULL;
    for (int64_t k = 0; k < a->nnz; k++)
        v[k] = sp_round(a->val[k], t);
    if (t == SP_FP64 || t == SP_FP32)
        return v; /* fp32 reaches 3.4e38: a finite double past it is not a matrix value */
    for (int64_t k = 0; k < a->nnz; k++) {
        if (isfinite(v[k]) || !isfinite(a->val[k]))
            continue;
        int32_t r = 0;
        while (a->rowptr[r + 1] <= k)
            r++;
        double big = 0;
        for (int64_t q = 0; q < a->nnz; q++)
            big = fabs(a->val[q]) > big ? fabs(a->val[q]) : big;
        free(v);
        e->code = WK_EBAD;
        dt_err_set(e,
                   "dtype %s: the matrix's value %g at row %d, column %d is beyond %s's range "
                   "(largest finite %g; the matrix reaches %g): run it in fp32, or scale the "
                   "matrix",
                   sp_dtype_name(t), a->val[k], r, a->col[k], sp_dtype_name(t),
                   t == SP_FP16 ? 65504.0 : 3.3895313892515355e38, big);
        return NULL;
    }
    return v;
}

const double *run_matrix_rounded(wk_matrix *m, sp_dtype t, dt_err *e)
{
    if (m->rounded[t] == NULL)
        m->rounded[t] = rounded_values(m->a, t, e);
    return m->rounded[t];
}

const dev_fmt *run_matrix_fmt(wk_matrix *m, const char *format, const cJSON *params, sp_dtype t,
                              dt_err *e)
{
    char *ps = params ? dt_json_print(params, 0) : dt_xstrdup("{}");
    char key[128];
    snprintf(key, sizeof key, "%s%s/%s", format, ps, sp_dtype_name(t));
    free(ps);
    /* A hit moves to the most recent end, so the format a request holds is
     * never the one the same request's next miss evicts. */
    for (int i = 0; i < m->nfmts; i++) {
        if (strcmp(m->fmts[i]->key, key) == 0) {
            dev_fmt *hit = m->fmts[i];
            memmove(&m->fmts[i], &m->fmts[i + 1], (size_t)(m->nfmts - i - 1) * sizeof hit);
            m->fmts[m->nfmts - 1] = hit;
            return hit;
        }
    }
    dev_fmt *f = malloc(sizeof *f);
    if (f == NULL) {
        e->code = WK_ENOMEM;
        dt_err_set(e, "out of host memory");
        return NULL;
    }
    if (dev_fmt_build(m->a, format, params, t, 1, f, e) != 0) {
        e->code = wk_from_dev(e->code);
        free(f);
        return NULL;
    }
    if (m->nfmts == WK_MAX_FMTS) {
        dev_fmt_free(m->fmts[0]);
        free(m->fmts[0]);
        memmove(&m->fmts[0], &m->fmts[1], (size_t)(WK_MAX_FMTS - 1) * sizeof f);
        m->nfmts--;
    }
    m->fmts[m->nfmts++] = f;
    return f;
}

const char *wk_requires_violated(const gpu_contract *c, const cJSON *params, const sp_csr *a)
{
    static char why[256];
    if (c->requires == NULL)
        return NULL;
    int32_t minlen = INT32_MAX, maxlen = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int32_t len = (int32_t)(a->rowptr[i + 1] - a->rowptr[i]);
        minlen = len < minlen ? len : minlen;
        maxlen = len > maxlen ? len : maxlen;
    }
    if (a->rows == 0)
        minlen = 0;
    if (dt_json_bool(c->requires, "uniform_rows", 0) && minlen != maxlen) {
        snprintf(why, sizeof why, "requires uniform rows; lengths range %d..%d", minlen, maxlen);
        return why;
    }
    double mx = gpu_requires_num(c, params, "max_row", -1);
    if (mx >= 0 && maxlen > mx) {
        snprintf(why, sizeof why, "requires rows of at most %.0f entries; longest is %d", mx,
                 maxlen);
        return why;
    }
    /* max_fill: the slots of every row padded to the longest, per nonzero
     * (ELL's footprint over CSR's). */
    double fill = dt_json_num(c->requires, "max_fill", -1);
    double slots = (double)a->rows * maxlen, nz = a->nnz > 0 ? (double)a->nnz : 1.0;
    if (fill >= 0 && slots > fill * nz) {
        snprintf(why, sizeof why,
                 "requires at most %g slots per nonzero with rows padded to the longest; "
                 "%d rows x %d = %.0f slots for %lld nonzeros",
                 fill, a->rows, maxlen, slots, (long long)a->nnz);
        return why;
    }
    double mn = dt_json_num(c->requires, "min_rows", -1);
    if (mn >= 0 && a->rows < mn) {
        snprintf(why, sizeof why, "requires at least %.0f rows; has %d", mn, a->rows);
        return why;
    }
    if (dt_json_bool(c->requires, "square", 0) && a->rows != a->cols) {
        snprintf(why, sizeof why, "requires a square matrix; is %d x %d", a->rows, a->cols);
        return why;
    }
    /* max_values: a value dictionary's size (sell16 with vdict). */
    double mv = dt_json_num(c->requires, "max_values", -1);
    if (mv >= 0) {
        int cap = mv < 4096 ? (int)mv : 4096;
        int nv = sp_csr_distinct_values(a, cap);
        if (nv > cap) {
            snprintf(why, sizeof why, "requires at most %d distinct nonzero values; has more", cap);
            return why;
        }
    }
    return NULL;
}

int wk_compile_for(wk_state *w, const gpu_vars *fvars, const wk_kernel *kn, const wk_problem *p,
                   gpu_cubin **out, dt_err *e)
{
    *out = NULL;
    const gpu_contract *c = &kn->contract;
    gpu_vars vars;
    wk_kernel_vars(kn, fvars, p, &vars);
    /* Options: the caller's, the dtype and epilogue macros, the toolkit's
     * headers, the contract's defines evaluated on this matrix. */
    dt_buf owned_store[100];
    const char *opts[100];
    int nopt = 0, nowned = 0;
    for (int i = 0; i < kn->noptions && nopt < 48; i++)
        opts[nopt++] = kn->options[i];
#define OWN(...)                                                                                   \
    do {                                                                                           \
        owned_store[nowned] = (dt_buf)DT_BUF_INIT;                                                 \
        dt_buf_printf(&owned_store[nowned], __VA_ARGS__);                                          \
        opts[nopt++] = owned_store[nowned++].data;                                                 \
    } while (0)
    OWN("-DDITTO_T=%s", t_name(p->dtype));
    OWN("-DDITTO_S=%s", p->dtype == SP_FP64 ? "double" : "float");
    OWN("-DDITTO_DTYPE_%s", p->dtype == SP_FP64   ? "FP64"
                            : p->dtype == SP_FP16 ? "FP16"
                            : p->dtype == SP_BF16 ? "BF16"
                                                  : "FP32");
    OWN("-DDITTO_EPILOGUE_%s", p->epilogue == SP_EPI_RELU   ? "RELU"
                               : p->epilogue == SP_EPI_GELU ? "GELU"
                               : p->epilogue == SP_EPI_BIAS ? "BIAS"
                                                            : "NONE");
    /* cuda_fp16.h and cuda_bf16.h for half-precision kernels: NVRTC does
     * not look in the toolkit by itself. */
    const char *cuda_home = getenv("CUDA_HOME");
    char *hdr = dt_xasprintf("%s/include/cuda_fp16.h",
                             cuda_home && *cuda_home ? cuda_home : "/usr/local/cuda");
    if (dt_file_exists(hdr)) {
        hdr[strlen(hdr) - strlen("/cuda_fp16.h")] = '\0';
        OWN("--include-path=%s", hdr);
    }
    free(hdr);
    /* ditto.cuh, shared by the templates and usable by hand-written kernels. */
    char *kdir = dt_share_path("kernels");
    if (kdir != NULL) {
        OWN("--include-path=%s", kdir);
        free(kdir);
    }
    const cJSON *pv;
    cJSON_ArrayForEach(pv, kn->params)
    {
        if (nowned < 80)
            OWN("-D%s=%lld", pv->string, (long long)dt_json_as_i64(pv, 0));
    }
    int rc = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, c->defines)
    {
        int64_t v = 0;
        dt_err de = {0};
        if (cJSON_IsNumber(d)) {
            v = dt_json_as_i64(d, 0);
        } else if (gpu_eval(d->valuestring, &vars, &v, &de) != 0) {
            e->code = WK_ECONTRACT;
            dt_err_set(e, "launch contract: defines.%s: %s", d->string, de.msg);
            rc = -1;
            break;
        }
        if (nowned < 90)
            OWN("-D%s=%lld", d->string, (long long)v);
    }
#undef OWN
    if (rc == 0) {
        gpu_nvrtc *nv = wk_nvrtc(w, e);
        int is_expr = strpbrk(c->entry, "<(:") != NULL;
        const char *names[1] = {c->entry};
        char arch[16];
        if (w->arch != NULL)
            snprintf(arch, sizeof arch, "%s", w->arch);
        else if (w->dev.present)
            snprintf(arch, sizeof arch, "sm_%d%d", w->dev.cc_major, w->dev.cc_minor);
        else
            snprintf(arch, sizeof arch, "sm_90");
        gpu_compile_req creq = {.source = kn->source,
                                .name = kn->name,
                                .options = opts,
                                .noptions = nopt,
                                .arch = arch,
                                .names = is_expr ? names : NULL,
                                .nnames = is_expr ? 1 : 0};
        if (nv == NULL || gpu_compile(nv, &creq, out, e) != 0) {
            e->code = WK_ECOMPILE;
            rc = -1;
        }
    }
    for (int i = 0; i < nowned; i++)
        dt_buf_free(&owned_store[i]);
    return rc;
}

/* The operand buffer use (bytes long) inside a guarded allocation base:
 * WK_GUARD bytes of in->guard_pat on either side. The guards are NaNs of
 * the dtype, so that a kernel reading one element past an input (x[cols])
 * puts a NaN into its result, and run_guards_intact finds a write past an
 * output or input without the sanitizer. */
static int guarded_alloc(instance *in, dev_buf *base, dev_buf *use, size_t bytes, dt_err *e)
{
    memset(use, 0, sizeof *use);
    if (dev_alloc(base, bytes + 2 * WK_GUARD, e) != 0)
        return -1;
    use->ptr = base->ptr + WK_GUARD;
    use->bytes = bytes;
    if (dev_copy_in(base->ptr, in->guard_pat, WK_GUARD, e) != 0 ||
        dev_copy_in(base->ptr + WK_GUARD + bytes, in->guard_pat, WK_GUARD, e) != 0)
        return -1;
    return 0;
}

/* After a verification launch: are the guards of in1, in2, out and bias as
 * they were? *which names the first buffer written outside (NULL: none),
 * *before says on which side. */
int run_guards_intact(const instance *in, const char *const names[4], const char **which,
                      int *before, dt_err *e)
{
    *which = NULL;
    const dev_buf *use[4] = {&in->in1, &in->in2, &in->out, &in->bias};
    unsigned char got[WK_GUARD];
    for (int i = 0; i < 4; i++) {
        if (in->gbase[i].ptr == 0)
            continue;
        for (int side = 0; side < 2; side++) {
            dev_buf g = {side == 0 ? in->gbase[i].ptr : use[i]->ptr + use[i]->bytes, WK_GUARD};
            if (dev_download(got, &g, WK_GUARD, e) != 0)
                return -1;
            if (memcmp(got, in->guard_pat, WK_GUARD) != 0) {
                *which = names[i];
                *before = side == 0;
                return 0;
            }
        }
    }
    return 0;
}

/* Is the slack of every allocation a launch of in points into (dev.c: the
 * rest of its pages past the end, beyond any guard) as dev_alloc filled it?
 * State kept there would survive every check of the buffers themselves.
 * *which gets, in buf, the buffer written past and by how many bytes (NULL:
 * none). A format array's slack written sets fmt_dirty: the matrix's cache
 * must not lend that format again. */
int run_slack_intact(instance *in, const char *const names[4], const char **which, char *buf,
                     size_t len, dt_err *e)
{
    *which = NULL;
    size_t off = 0;
    int r = 0;
    for (int i = 0; i < 4 && r == 0; i++)
        if ((r = dev_slack_changed(&in->gbase[i], &off, e)) == 1)
            snprintf(buf, len, "'%s' (written %zu bytes past its end, beyond its guard)", names[i],
                     off + WK_GUARD);
    if (r == 0 && (r = dev_slack_changed(&in->scratch, &off, e)) == 1)
        snprintf(buf, len, "the scratch (written %zu bytes past its end)", off);
    for (int j = 0; r == 0 && in->fmt != NULL && in->fmt->on_device && j < in->fmt->narr; j++)
        if ((r = dev_slack_changed(&in->fmt->arr[j], &off, e)) == 1) {
            snprintf(buf, len, "format array '%s' (written %zu bytes past its end)",
                     in->fmt->names[j] ? in->fmt->names[j] : "?", off);
            in->fmt_dirty = 1;
        }
    for (int j = 0; r == 0 && j < in->nmoved; j++)
        if ((r = dev_slack_changed(&in->moved[j], &off, e)) == 1)
            snprintf(buf, len,
                     "an operand's copy at another placement (written %zu bytes past its end)",
                     off);
    for (int j = 0; r == 0 && j < in->nmoved_fmt; j++)
        for (int k = 0; r == 0 && k < in->moved_fmt[j]->narr; k++)
            if ((r = dev_slack_changed(&in->moved_fmt[j]->arr[k], &off, e)) == 1)
                snprintf(buf, len,
                         "format array '%s' at another placement (written %zu bytes past its end)",
                         in->moved_fmt[j]->names[k] ? in->moved_fmt[j]->names[k] : "?", off);
    if (r < 0)
        return -1;
    if (r == 1)
        *which = buf;
    return 0;
}

/* Compile the kernel for this matrix, load it, allocate operands. On a
 * compile failure returns 1 with the cubin (and its diagnostics) in
 * in->cubin; on success 0; -1 on errors. */
int run_instance_prepare(wk_state *w, wk_matrix *m, const sp_csr *a, const wk_kernel *kn,
                         const wk_problem *p, instance *in, dt_err *e)
{
    memset(in, 0, sizeof *in);
    const gpu_contract *c = &kn->contract;
    /* Timing a kernel on a matrix its contract refuses would measure a
     * wrong answer (and may build a format far larger than the matrix). */
    const char *why = wk_requires_violated(c, kn->params, a);
    if (why != NULL) {
        e->code = WK_ECONTRACT;
        return dt_err_set(e, "the kernel's contract %s", why);
    }
    in->a = a;
    in->esize = (size_t)sp_dtype_size(p->dtype);
    dt_err fe = {0};
    cJSON *fparams = wk_format_params(kn, &fe);
    if (c->format_params != NULL && fparams == NULL) {
        *e = fe;
        return -1;
    }
    if (m != NULL) {
        in->m = m;
        in->av = run_matrix_rounded(m, p->dtype, e);
        in->fmt = in->av ? run_matrix_fmt(m, c->format, fparams, p->dtype, e) : NULL;
    } else {
        in->av = rounded_values(a, p->dtype, e);
        if (in->av && dev_fmt_build(a, c->format, fparams, p->dtype, 1, &in->own_fmt, e) == 0) {
            in->fmt = &in->own_fmt;
            in->owns_fmt = 1;
        } else {
            e->code = wk_from_dev(e->code);
        }
    }
    cJSON_Delete(fparams);
    if (in->av == NULL || in->fmt == NULL)
        goto fail;
    if (wk_compile_for(w, &in->fmt->vars, kn, p, &in->cubin, e) != 0)
        goto fail;
    if (!in->cubin->compiled)
        return 1;
    const char *entry = c->entry;
    if (strpbrk(c->entry, "<(:") != NULL) {
        if (in->cubin->nlowered < 1 || in->cubin->lowered[0] == NULL) {
            e->code = WK_ECONTRACT;
            dt_err_set(e, "name expression '%s' was not lowered by NVRTC", c->entry);
            goto fail;
        }
        entry = in->cubin->lowered[0];
    }
    gpu_vars vars;
    wk_kernel_vars(kn, &in->fmt->vars, p, &vars);
    if (dev_kernel_load(in->cubin->image, entry, c, &vars, &in->k, e) != 0) {
        e->code = wk_from_dev(e->code);
        goto fail;
    }
    in->loaded = 1;

    /* Operand buffers. */
    size_t rows = (size_t)a->rows, cols = (size_t)a->cols, n = (size_t)p->n;
    size_t nin1 = p->op == SP_SPMV ? cols : p->op == SP_SPMM ? cols * n : rows * n;
    size_t nin2 = p->op == SP_SDDMM ? cols * n : 0;
    size_t nout = p->op == SP_SPMV ? rows : p->op == SP_SPMM ? rows * n : (size_t)a->nnz;
    {
        uint64_t pb = run_poison_bits(p->dtype);
        for (size_t i = 0; i < WK_GUARD; i += in->esize)
            memcpy(in->guard_pat + i, &pb, in->esize); /* little-endian: the low bytes */
    }
    if (guarded_alloc(in, &in->gbase[0], &in->in1, nin1 * in->esize, e) != 0 ||
        (nin2 && guarded_alloc(in, &in->gbase[1], &in->in2, nin2 * in->esize, e) != 0) ||
        guarded_alloc(in, &in->gbase[2], &in->out, nout * in->esize, e) != 0 ||
        guarded_alloc(in, &in->gbase[3], &in->bias, rows * in->esize, e) != 0 ||
        (in->k.scratch_bytes && dev_alloc(&in->scratch, in->k.scratch_bytes, e) != 0) ||
        (in->k.scratch_bytes && c->scratch_once && dev_zero(&in->scratch, e) != 0)) {
        e->code = wk_from_dev(e->code);
        goto fail;
    }
    in->bind.fmt = in->fmt;
    in->bind.dtype = p->dtype;
    in->bind.alpha = p->alpha;
    in->bind.beta = p->beta;
    in->bind.scratch = in->scratch;
    static const char *in1_names[] = {"x", "B", "A"};
    static const char *out_names[] = {"y", "C", "out"};
    dev_bind_ptr(&in->bind, in1_names[p->op], in->in1.ptr);
    dev_bind_ptr(&in->bind, out_names[p->op], in->out.ptr);
    if (nin2)
        dev_bind_ptr(&in->bind, "Bt", in->in2.ptr);
    dev_bind_ptr(&in->bind, "bias", in->bias.ptr);
    return 0;
fail:
    if (m == NULL)
        free((double *)in->av);
    in->av = NULL;
    instance_free(in);
    return -1;
}

/* Drop a format a kernel changed from the matrix's cache, so that the next
 * request builds it again instead of running on what the kernel left. */
static void matrix_fmt_forget(wk_matrix *m, const dev_fmt *f)
{
    for (int i = 0; i < m->nfmts; i++) {
        if (m->fmts[i] == f) {
            dev_fmt_free(m->fmts[i]);
            free(m->fmts[i]);
            memmove(&m->fmts[i], &m->fmts[i + 1], (size_t)(m->nfmts - i - 1) * sizeof m->fmts[0]);
            m->nfmts--;
            return;
        }
    }
}

void run_instance_release(instance *in, int owns_values)
{
    if (in->fmt_dirty && !in->owns_fmt && in->m != NULL && in->fmt != NULL)
        matrix_fmt_forget(in->m, in->fmt);
    if (owns_values)
        free((double *)in->av);
    in->av = NULL;
    instance_free(in);
}

/* Upload a double array converted to the dtype. */
int run_put(dev_buf *b, const double *v, size_t n, sp_dtype t, dt_err *e)
{
    if (n == 0)
        return 0;
    size_t es = (size_t)sp_dtype_size(t);
    void *tmp = malloc(n * es);
    if (tmp == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    sp_to_dtype(v, tmp, n, t);
    int rc = dev_copy_in(b->ptr, tmp, n * es, e);
    free(tmp);
    return rc;
}

/* The poison's NaN payload, drawn from the request's seed (run_poison_seed)
 * so that no kernel can recognise one fixed bit pattern. The worker answers
 * one request at a time. */
static uint64_t poison_salt = 0xdeaddeaddeadULL;

void run_poison_seed(uint64_t seed)
{
    poison_salt = mix64(seed ^ 0x5bd1e9955bd1e995ULL) | 1;
}

/* A quiet NaN of the dtype with a non-zero payload from poison_salt. */
uint64_t run_poison_bits(sp_dtype t)
{
    switch (t) {
    case SP_FP64:
        return 0x7ff8000000000000ULL | (poison_salt & 0x0007ffffffffffffULL);
    case SP_FP32:
        return 0x7fc00000ULL | (poison_salt & 0x3fffffULL);
    case SP_FP16:
        return 0x7e00ULL | (poison_salt & 0x1ffULL);
    case SP_BF16:
        return 0x7fc0ULL | (poison_salt & 0x3fULL);
    }
    return 0;
}

void run_poison_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const poison_job *j = ctx;
    unsigned char *raw = j->raw;
    switch (j->es) { /* constant sizes, so that the copies become stores */
    case 2: {
        uint16_t b = (uint16_t)j->bits;
        for (int64_t i = lo; i < hi; i++)
            memcpy(raw + (size_t)i * 2, &b, 2);
        break;
    }
    case 4: {
        uint32_t b = (uint32_t)j->bits;
        for (int64_t i = lo; i < hi; i++)
            memcpy(raw + (size_t)i * 4, &b, 4);
        break;
    }
    default: /* 8 */
        for (int64_t i = lo; i < hi; i++)
            memcpy(raw + (size_t)i * 8, &j->bits, 8);
        break;
    }
}

void run_poison_flags_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const poison_job *j = ctx;
    const unsigned char *raw = j->raw;
    unsigned char *flags = j->flags;
    switch (j->es) { /* constant sizes, so that the copies become loads */
    case 2: {
        uint16_t b = (uint16_t)j->bits, v;
        for (int64_t i = lo; i < hi; i++) {
            memcpy(&v, raw + (size_t)i * 2, 2);
            flags[i] = v == b;
        }
        break;
    }
    case 4: {
        uint32_t b = (uint32_t)j->bits, v;
        for (int64_t i = lo; i < hi; i++) {
            memcpy(&v, raw + (size_t)i * 4, 4);
            flags[i] = v == b;
        }
        break;
    }
    default: { /* 8 */
        uint64_t v;
        for (int64_t i = lo; i < hi; i++) {
            memcpy(&v, raw + (size_t)i * 8, 8);
            flags[i] = v == j->bits;
        }
        break;
    }
    }
}

int run_upload_inputs(instance *in, const wk_problem *p, const operands *o, dt_err *e)
{
    if (run_put(&in->in1, o->in1, o->nin1, p->dtype, e) != 0 ||
        run_put(&in->in2, o->in2, o->nin2, p->dtype, e) != 0 ||
        run_put(&in->bias, o->bias, (size_t)in->a->rows, p->dtype, e) != 0)
        return -1;
    return 0;
}

/* Output buffer before a run: NaN poison when beta is 0 (so unwritten
 * outputs are caught), the random initial output otherwise (then an
 * unwritten output still differs from the reference). */
int run_init_output(instance *in, const wk_problem *p, const operands *o, dt_err *e)
{
    int poison = p->beta == 0.0 && p->op != SP_SDDMM;
    if (p->op == SP_SDDMM && p->beta == 0.0)
        poison = 1;
    if (!poison)
        return run_put(&in->out, o->out0, o->nout, p->dtype, e);
    size_t es = in->esize;
    unsigned char *tmp = malloc(o->nout * es + 8);
    if (tmp == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    poison_job pj = {tmp, es, run_poison_bits(p->dtype)};
    sp_parallel_for((int64_t)o->nout, (int64_t)o->nout, run_poison_range, &pj);
    int rc = o->nout ? dev_copy_in(in->out.ptr, tmp, o->nout * es, e) : 0;
    free(tmp);
    return rc;
}

/* A copy of b at a new address (b itself is kept alive, so the allocator
 * cannot hand the same memory back): *nb. */
int run_copy_placed(const dev_buf *b, dev_buf *nb, dt_err *e)
{
    memset(nb, 0, sizeof *nb);
    if (b->ptr == 0 || b->bytes == 0)
        return 0;
    if (dev_alloc(nb, b->bytes, e) != 0 ||
        dev_check(CU(cuMemcpyDtoDAsync)(nb->ptr, b->ptr, b->bytes, dev_stream()),
                  "copying an operand", e) != 0 ||
        dev_sync(e) != 0) {
        dev_free(nb);
        return -1;
    }
    return 0;
}

/* A copy of a device format whose arrays sit at new addresses; the names,
 * variables and hashes are shared with f (run_fmt_clone_free frees only the
 * arrays). */
int run_fmt_clone_placed(const dev_fmt *f, dev_fmt *c, dt_err *e)
{
    *c = *f;
    for (int i = 0; i < f->narr; i++) {
        c->arr[i].ptr = 0;
        c->arr[i].bytes = 0;
    }
    for (int i = 0; i < f->narr; i++)
        if (run_copy_placed(&f->arr[i], &c->arr[i], e) != 0) {
            run_fmt_clone_free(c);
            return -1;
        }
    return 0;
}

void run_fmt_clone_free(dev_fmt *c)
{
    for (int i = 0; i < c->narr; i++)
        dev_free(&c->arr[i]);
}

/* wk_place_fn for a candidate: its matrix arrays and dense operands move
 * to new addresses (the kernel is rebound to them). L2-resident timings
 * depend on where the data sit (which L2 slices, which partition) by
 * several per cent: pairing over a few placements averages that out. */
int run_replace_operands(void *ud, int op, dt_err *e)
{
    launch_ud *l = ud;
    instance *in = l->in;
    if (in->fmt->on_device && in->nmoved_fmt < WK_PLACEMENTS) {
        dev_fmt *c = dt_xmalloc(sizeof *c);
        if (run_fmt_clone_placed(in->fmt, c, e) != 0) {
            free(c);
            return -1;
        }
        in->moved_fmt[in->nmoved_fmt++] = c;
        in->bind.fmt = c;
    }
    static const char *in1_names[] = {"x", "B", "A"};
    static const char *out_names[] = {"y", "C", "out"};
    const dev_buf *src[3] = {&in->in1, &in->in2, &in->out};
    const char *names[3] = {in1_names[op], "Bt", out_names[op]};
    for (int i = 0; i < 3; i++) {
        if (src[i]->ptr == 0 || in->nmoved >= (int)DT_ARRAY_LEN(in->moved))
            continue;
        dev_buf nb;
        if (run_copy_placed(src[i], &nb, e) != 0)
            return -1;
        in->moved[in->nmoved++] = nb;
        dev_bind_ptr(&in->bind, names[i], nb.ptr);
        run_observe_moved(l->ob, i, nb.ptr);
    }
    return 0;
}

int run_enqueue_kernel(void *ud, CUstream s, dt_err *e)
{
    launch_ud *l = ud;
    return dev_launch(&l->in->k, l->c, &l->in->bind, s, e);
}

/* Run once on the uploaded inputs; download the output as doubles plus a
 * flag per element saying whether it still holds the poison. */
int run_once(instance *in, const gpu_contract *c, size_t nout, sp_dtype t, double *got,
             unsigned char *untouched, dt_err *e)
{
    if (dev_launch(&in->k, c, &in->bind, dev_stream(), e) != 0 || dev_sync(e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    size_t es = in->esize;
    unsigned char *raw = malloc(nout * es + 8);
    if (raw == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    if (dev_download(raw, &in->out, nout * es, e) != 0) {
        e->code = wk_from_dev(e->code);
        free(raw);
        return -1;
    }
    sp_from_dtype(raw, got, nout, t);
    if (untouched) {
        poison_job pj = {raw, es, run_poison_bits(t), untouched};
        sp_parallel_for((int64_t)nout, (int64_t)nout, run_poison_flags_range, &pj);
    }
    free(raw);
    return 0;
}

/* The start of a request on a loaded matrix: its problem, the matrix it
 * names, and -- when need names the request ("verify needs a GPU") -- a
 * device. NULL with e otherwise. */
wk_matrix *run_request_begin(wk_state *w, const cJSON *req, wk_problem *p, const char *need,
                             dt_err *e)
{
    if (wk_problem_parse(req, p, e) != 0)
        return NULL;
    wk_matrix *m = wk_matrix_find(w, dt_json_str(req, "matrix", ""));
    if (m == NULL) {
        e->code = WK_ENOTFOUND;
        dt_err_set(e, "matrix: no loaded matrix '%s'", dt_json_str(req, "matrix", ""));
        return NULL;
    }
    if (need != NULL && !w->dev.present) {
        e->code = WK_ENODEV;
        dt_err_set(e, "%s: %s", need, w->dev.reason);
        return NULL;
    }
    return m;
}

/* ---- reference (no GPU needed) ------------------------------------------------ */

#define SUM_BLOCK ((int64_t)1 << 16) /* outputs per partial sum */

typedef struct sum_job {
    const operands *o;
    double *norm, *sum;        /* per block */
    double maxtol[SP_PAR_MAX]; /* per part */
} sum_job;

static void sum_blocks(void *ctx, int64_t b0, int64_t b1, int part)
{
    sum_job *j = ctx;
    const double *ref = j->o->ref, *tol = j->o->tol;
    int64_t n = (int64_t)j->o->nout;
    double mt = 0;
    for (int64_t b = b0; b < b1; b++) {
        int64_t lo = b * SUM_BLOCK, hi = lo + SUM_BLOCK < n ? lo + SUM_BLOCK : n;
        double nb = 0, sb = 0;
        for (int64_t i = lo; i < hi; i++) {
            nb += ref[i] * ref[i];
            sb += ref[i];
            if (tol[i] > mt)
                mt = tol[i];
        }
        j->norm[b] = nb;
        j->sum[b] = sb;
    }
    j->maxtol[part] = mt;
}

/* The sum of squares and the sum of the reference and its largest
 * tolerance. The sums add fixed blocks of outputs, then the blocks in
 * order: the same bits for any thread count. -1 with e (WK_ENOMEM). */
static int summarize(const operands *o, double *norm, double *sum, double *maxtol, dt_err *e)
{
    int64_t blocks = ((int64_t)o->nout + SUM_BLOCK - 1) / SUM_BLOCK;
    sum_job j = {.o = o};
    j.norm = run_xalloc_doubles(2 * (size_t)blocks, e);
    if (j.norm == NULL)
        return -1;
    j.sum = j.norm + blocks;
    int parts = sp_parallel_for(blocks, 2 * (int64_t)o->nout, sum_blocks, &j);
    for (int64_t b = 0; b < blocks; b++) {
        *norm += j.norm[b];
        *sum += j.sum[b];
    }
    for (int p = 0; p < parts; p++)
        if (j.maxtol[p] > *maxtol)
            *maxtol = j.maxtol[p];
    free(j.norm);
    return 0;
}

int wk_reference(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = run_request_begin(w, req, &p, NULL, e);
    if (m == NULL)
        return -1;
    const double *av = run_matrix_rounded(m, p.dtype, e);
    if (av == NULL)
        return -1;
    double t0 = dt_now();
    operands o;
    const char *lay = dt_json_str(req, "layout", "row");
    if (run_make_operands(m->a, av, &p, strcmp(lay, "col") == 0 ? SP_COL_MAJOR : SP_ROW_MAJOR, 0, 1,
                          &o, e) != 0)
        return -1;
    double norm = 0, sum = 0, maxtol = 0;
    if (summarize(&o, &norm, &sum, &maxtol, e) != 0) {
        run_operands_free(&o);
        return -1;
    }
    dt_json_set_int(out, "outputs", (int64_t)o.nout);
    dt_json_set_num(out, "norm2", sqrt(norm));
    dt_json_set_num(out, "checksum", sum);
    dt_json_set_num(out, "max_tolerance", maxtol);
    if (o.nout > 0)
        dt_json_set_num(out, "first", o.ref[0]);
    dt_json_set_num(out, "seconds", dt_now() - t0);
    run_operands_free(&o);
    return 0;
}

/* ---- metrics (CUPTI) ------------------------------------------------------------ */

static const char *default_metrics[] = {
    "gpu__time_duration.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate.pct",
};

int wk_metrics(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = run_request_begin(w, req, &p, "metrics need a GPU", e);
    if (m == NULL)
        return -1;
    char why[512] = "";
    if (gpu_cupti_probe(why, sizeof why) != 0) {
        /* Not an error: counters are often restricted; the answer says why. */
        dt_json_set_bool(out, "available", 0);
        dt_json_set_str(out, "reason", why);
        return 0;
    }
    const char *names[32];
    int nnames = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "metrics"))
    {
        if (cJSON_IsString(it) && nnames < 32)
            names[nnames++] = it->valuestring;
    }
    if (nnames == 0)
        for (size_t i = 0; i < DT_ARRAY_LEN(default_metrics); i++)
            names[nnames++] = default_metrics[i];
    wk_kernel kn;
    if (wk_kernel_parse(req, &kn, e) != 0)
        return -1;
    instance in;
    int prc = run_instance_prepare(w, m, m->a, &kn, &p, &in, e);
    if (prc != 0) {
        if (prc == 1) {
            e->code = WK_ECOMPILE;
            dt_err_set(e, "the kernel does not compile");
            run_instance_release(&in, 0);
        }
        wk_kernel_clear(&kn);
        return -1;
    }
    operands o;
    int rc = -1;
    if (run_make_operands(m->a, in.av, &p, kn.contract.layout, 0, 0, &o, e) != 0)
        goto done_noops;
    if (run_upload_inputs(&in, &p, &o, e) != 0 || run_init_output(&in, &p, &o, e) != 0 ||
        dev_sync(e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    double vals[32];
    launch_ud lu = {&in, &kn.contract};
    if (gpu_cupti_collect(names, nnames, run_enqueue_kernel, &lu, vals, why, sizeof why) != 0) {
        if (dev_poisoned()) {
            e->code = WK_EFAULT;
            dt_err_set(e, "%s", why);
            goto done;
        }
        dt_json_set_bool(out, "available", 0);
        dt_json_set_str(out, "reason", why);
        rc = 0;
        goto done;
    }
    dt_json_set_bool(out, "available", 1);
    cJSON *mj = dt_json_obj();
    for (int i = 0; i < nnames; i++) {
        if (isnan(vals[i]))
            dt_json_set_take(mj, names[i], cJSON_CreateNull());
        else
            dt_json_set_num(mj, names[i], vals[i]);
    }
    dt_json_set_take(out, "metrics", mj);
    double flops = 0, bytes = 0;
    sp_cost(m->a->rows, m->a->cols, m->a->nnz, p.op, p.dtype, p.n, &flops, &bytes);
    dt_json_set_num(out, "min_bytes", bytes);
    dt_json_set_num(out, "flops", flops);
    rc = 0;
done:
    run_operands_free(&o);
done_noops:
    run_instance_release(&in, 0);
    wk_kernel_clear(&kn);
    return rc;
}
