/* runner.c -- runs a kernel under its launch contract: preparation (compile
 * per matrix, device format, operand buffers), input sets, the fp64
 * reference with per-element tolerances, the verification battery, timing
 * next to cuSPARSE, and the reference-only request. */
#include "gpu/worker.h"
#include "gpu/gpu.h"
#include "gpu/sandbox.h"

#include "core/schema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- requests ---------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z);

/* A seed no kernel can predict: the clock, the process and a counter, mixed;
 * below 2^53 so that it survives JSON. */
static uint64_t fresh_seed(uint64_t salt)
{
    uint64_t z = (uint64_t)(dt_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^ (salt * 0x9e3779b97f4a7c15ULL);
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
    {"op", &op_s, 0},         {"dtype", &dtype_s, 0}, {"epilogue", &epilogue_s, 0},
    {"n", &n_s, 0},           {"alpha", &scalar_s, 0}, {"beta", &scalar_s, 0},
    {"seed", &seed_s, 0},     {NULL, NULL, 0}};
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
static const dt_schema source_s = {.type = DT_SCHEMA_STR,
                                   .flags = DT_SCHEMA_BYTES,
                                   .min_len = 1,
                                   .max_len = GPU_MAX_SOURCE_BYTES};
static const dt_schema kname_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = 255};
static const dt_schema option_s = {.type = DT_SCHEMA_STR, .max_len = 4096};
static const dt_schema options_s = {.type = DT_SCHEMA_ARR, .max_len = 48, .items = &option_s};
static const dt_schema param_s = {.type = DT_SCHEMA_INT};
static const dt_schema params_s = {.type = DT_SCHEMA_MAP, .max_len = 256, .items = &param_s};
static const dt_schema_field kernel_fields[] = {{"source", &source_s, 1},
                                                {"name", &kname_s, 0},
                                                {"options", &options_s, 0},
                                                {"contract", NULL, 0},
                                                {"params", &params_s, 0},
                                                {NULL, NULL, 0}};
static const dt_schema kernel_s = {.type = DT_SCHEMA_OBJ,
                                   .flags = DT_SCHEMA_OPEN,
                                   .fields = kernel_fields,
                                   .what = "a kernel object {\"source\": ..., \"contract\"?: ...}"};
static const dt_schema_field kernel_request_fields[] = {{"kernel", &kernel_s, 1},
                                                        {NULL, NULL, 0}};
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

/* The contract's format parameters with every string value evaluated as an
 * expression over the kernel's parameters ("sigma": "SIGMA" lets the tuner
 * pick the format's sorting window as it picks BLOCK). A new object; NULL
 * with e set when an expression fails. */
cJSON *wk_format_params(const wk_kernel *k, dt_err *e)
{
    const cJSON *fp = k->contract.format_params;
    if (fp == NULL)
        return NULL;
    gpu_vars vars = {.n = 0};
    const cJSON *pv;
    cJSON_ArrayForEach(pv, k->params) gpu_vars_set(&vars, pv->string, dt_json_as_i64(pv, 0));
    cJSON *out = cJSON_Duplicate(fp, 1);
    cJSON *it;
    cJSON_ArrayForEach(it, out)
    {
        if (!cJSON_IsString(it))
            continue;
        int64_t v = 0;
        dt_err ee = {0};
        if (gpu_eval(it->valuestring, &vars, &v, &ee) != 0) {
            e->code = WK_ECONTRACT;
            dt_err_set(e, "launch contract: format_params.%s: %s", it->string, ee.msg);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *num = cJSON_CreateNumber((double)v);
        char *key = dt_xstrdup(it->string);
        cJSON_ReplaceItemInObjectCaseSensitive(out, key, num); /* frees it, names num */
        free(key);
        it = num;
    }
    return out;
}

/* ---- host-side operands ------------------------------------------------------ */

static double u_of(sp_dtype t)
{
    switch (t) {
    case SP_FP64:
        return ldexp(1.0, -53);
    case SP_FP32:
        return ldexp(1.0, -24);
    case SP_FP16:
        return ldexp(1.0, -11);
    case SP_BF16:
        return ldexp(1.0, -8);
    }
    return ldexp(1.0, -24);
}

/* Accumulation is fp32 for every type but fp64: a kernel that sums in half
 * precision fails verification, deliberately. */
static double u_acc(sp_dtype t)
{
    return t == SP_FP64 ? ldexp(1.0, -53) : ldexp(1.0, -24);
}

typedef struct operands {
    size_t nin1, nin2, nout;
    double *in1;  /* x | B | A */
    double *in2;  /* - | - | Bt */
    double *out0; /* y0 | C0 | S values (beta != 0) */
    double *bias; /* rows */
    double *ref, *tol;
} operands;

static void operands_free(operands *o)
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

#define FILL_CHUNK ((int64_t)1 << 16)    /* values per generator */
#define GOLDEN     0x9e3779b97f4a7c15ULL /* splitmix64's increment */

/* splitmix64's output function: a bijection that mixes every bit. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The arrays of an input set, each drawn from its own streams. */
enum { FILL_IN1, FILL_IN2, FILL_BIAS, FILL_OUT0 };

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
                v[i] = dev_round(fill_draw(&s), j->t);
            break;
        }
    }
}

/* Never zeros: magnitudes uniform in [0.5, 1.5) (53-bit steps) with a
 * random sign, rounded to the dtype so that the reference sees exactly what
 * the device sees. The values depend on (seed, set, which, index) only --
 * not on the thread count. */
static void fill_random(double *v, size_t n, uint64_t seed, int set, int which, sp_dtype t)
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
static double *xalloc_doubles(size_t n, dt_err *e)
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
static void epilogue_on_host(const wk_problem *p, const sp_csr *a, sp_layout layout,
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
 * tolerance in place. */
typedef struct tol_job {
    const sp_csr *a;
    const wk_problem *p;
    sp_layout layout;
    const operands *o;
    double ua, uo, tiny; /* accumulation and output unit roundoff, the floor */
    int with_out0;       /* beta's term: with beta == 0 it adds exactly 0 */
} tol_job;

/* A statistical bound, c sqrt(len) u, rather than the worst case len u:
 * the worst case is loose enough on long rows to let a missing term
 * through, and random-sign inputs keep real accumulation error far below
 * this. This is c for a sum of len terms. */
static inline double tol_c(double len)
{
    return 4.0 * sqrt(len + 2.0) + 8.0;
}

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
    double t = c * j->ua * m + 2.0 * j->uo * fabs(o->ref[idx]) + j->tiny;
    if (p->epilogue == SP_EPI_GELU)
        t = 1.2 * t + 8.0 * j->ua * fabs(o->ref[idx]);
    o->tol[idx] = t;
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
        double c = tol_c(p->n);
        for (; idx < end; idx++)
            tol_one(j, idx, 0, c);
    } else if (p->op == SP_SPMM && j->layout == SP_ROW_MAJOR) {
        size_t n = (size_t)p->n;
        for (size_t row = idx / n; idx < end; row++) {
            double c = tol_c(row_len(a, row));
            size_t stop = (row + 1) * n < end ? (row + 1) * n : end;
            for (; idx < stop; idx++)
                tol_one(j, idx, row, c);
        }
    } else { /* SpMV (row idx) or column-major SpMM (row idx % rows) */
        size_t rows = (size_t)a->rows;
        size_t row = p->op == SP_SPMM ? idx % rows : idx;
        for (; idx < end; idx++) {
            tol_one(j, idx, row, tol_c(row_len(a, row)));
            if (++row == rows)
                row = 0;
        }
    }
}

/* Generate set `set` of inputs for matrix a (values already rounded to the
 * dtype in av) and, when with_ref, compute the fp64 reference and the
 * tolerance per output. Timing and counters need only the inputs: the
 * reference costs two host passes over the matrix, seconds at 32M nonzeros. */
static int make_operands_near(const sp_csr *a, const double *av, const wk_problem *p,
                              sp_layout layout, int set, const operands *near, operands *o,
                              dt_err *e);
static int make_operands_any(const sp_csr *a, const double *av, const wk_problem *p,
                             sp_layout layout, int set, int with_ref, const operands *near,
                             int wide, operands *o, dt_err *e);

static int make_operands(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                         int set, int with_ref, operands *o, dt_err *e)
{
    if (with_ref)
        return make_operands_any(a, av, p, layout, set, 1, NULL, 0, o, e);
    return make_operands_any(a, av, p, layout, set, 0, NULL, 0, o, e);
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

static int make_operands_near(const sp_csr *a, const double *av, const wk_problem *p,
                              sp_layout layout, int set, const operands *near, operands *o,
                              dt_err *e)
{
    return make_operands_any(a, av, p, layout, set, 1, near, 0, o, e);
}

static int make_operands_any(const sp_csr *a, const double *av, const wk_problem *p,
                             sp_layout layout, int set, int with_ref, const operands *near,
                             int wide, operands *o, dt_err *e)
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
    o->in1 = xalloc_doubles(o->nin1, e);
    o->in2 = o->nin2 ? xalloc_doubles(o->nin2, e) : NULL;
    o->out0 = xalloc_doubles(o->nout, e);
    o->bias = xalloc_doubles(rows, e);
    o->ref = xalloc_doubles(o->nout, e);
    o->tol = xalloc_doubles(o->nout, e);
    if (!o->in1 || (o->nin2 && !o->in2) || !o->out0 || !o->bias || !o->ref || !o->tol) {
        operands_free(o);
        return -1;
    }
    fill_random(o->in1, o->nin1, p->seed, set, FILL_IN1, p->dtype);
    if (o->in2)
        fill_random(o->in2, o->nin2, p->seed, set, FILL_IN2, p->dtype);
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
    fill_random(o->bias, rows, p->seed, set, FILL_BIAS, p->dtype);
    if (p->op == SP_SDDMM)
        par_copy(o->out0, av, o->nout);
    else
        fill_random(o->out0, o->nout, p->seed, set, FILL_OUT0, p->dtype);
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
                  .uo = u_of(p->dtype),
                  .tiny = (p->dtype == SP_FP16 || p->dtype == SP_BF16) ? 1e-4 : 1e-30,
                  /* finite random values but for SDDMM, whose S may hold Inf */
                  .with_out0 = p->beta != 0.0 || p->op == SP_SDDMM};
    sp_parallel_for((int64_t)o->nout, 8 * (int64_t)o->nout, tol_range, &tj);
    return 0;
}

/* ---- instances: a kernel ready to run on one matrix --------------------------- */

typedef struct instance {
    const sp_csr *a;
    const double *av;   /* rounded values */
    const dev_fmt *fmt; /* borrowed (cached) or owned */
    dev_fmt own_fmt;
    int owns_fmt;
    gpu_cubin *cubin;
    dev_kernel k;
    int loaded;
    dev_buf in1, in2, out, bias, scratch;
    dev_bind bind;
    size_t esize;
    dev_buf moved[3 * WK_PLACEMENTS]; /* operand copies made by replace_operands */
    int nmoved;
    dev_fmt *moved_fmt[WK_PLACEMENTS]; /* format copies made by replace_operands */
    int nmoved_fmt;
    /* in1, in2, out and bias sit GUARD bytes into these allocations, with
     * GUARD bytes of guard_pat (the dtype's NaN) before and after each. */
    dev_buf gbase[4];
    unsigned char guard_pat[WK_GUARD];
} instance;

static void fmt_clone_free(dev_fmt *c);

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
        fmt_clone_free(in->moved_fmt[i]);
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
    double *v = xalloc_doubles((size_t)a->nnz, e);
    if (v == NULL)
        return NULL;
    for (int64_t k = 0; k < a->nnz; k++)
        v[k] = dev_round(a->val[k], t);
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

static const double *matrix_rounded(wk_matrix *m, sp_dtype t, dt_err *e)
{
    if (m->rounded[t] == NULL)
        m->rounded[t] = rounded_values(m->a, t, e);
    return m->rounded[t];
}

static const dev_fmt *matrix_fmt(wk_matrix *m, const char *format, const cJSON *params, sp_dtype t,
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

double wk_requires_num(const gpu_contract *c, const cJSON *params, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->requires, key);
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (!cJSON_IsString(v))
        return dflt;
    gpu_vars vars = {.n = 0};
    const cJSON *pv;
    cJSON_ArrayForEach(pv, params) gpu_vars_set(&vars, pv->string, dt_json_as_i64(pv, 0));
    int64_t x = 0;
    dt_err e = {0};
    return gpu_eval(v->valuestring, &vars, &x, &e) == 0 ? (double)x : dflt;
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
    double mx = wk_requires_num(c, params, "max_row", -1);
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

static uint64_t poison_bits(sp_dtype t);

/* The operand buffer use (bytes long) inside a guarded allocation base:
 * WK_GUARD bytes of in->guard_pat on either side. The guards are NaNs of
 * the dtype, so that a kernel reading one element past an input (x[cols])
 * puts a NaN into its result, and guards_intact finds a write past an
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
static int guards_intact(const instance *in, const char *const names[4], const char **which,
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

/* Compile the kernel for this matrix, load it, allocate operands. On a
 * compile failure returns 1 with the cubin (and its diagnostics) in
 * in->cubin; on success 0; -1 on errors. */
static int instance_prepare(wk_state *w, wk_matrix *m, const sp_csr *a, const wk_kernel *kn,
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
        in->av = matrix_rounded(m, p->dtype, e);
        in->fmt = in->av ? matrix_fmt(m, c->format, fparams, p->dtype, e) : NULL;
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
        uint64_t pb = poison_bits(p->dtype);
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

static void instance_release(instance *in, int owns_values)
{
    if (owns_values)
        free((double *)in->av);
    in->av = NULL;
    instance_free(in);
}

/* Upload a double array converted to the dtype. */
static int put(dev_buf *b, const double *v, size_t n, sp_dtype t, dt_err *e)
{
    if (n == 0)
        return 0;
    size_t es = (size_t)sp_dtype_size(t);
    void *tmp = malloc(n * es);
    if (tmp == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    dev_to_dtype(v, tmp, n, t);
    int rc = dev_copy_in(b->ptr, tmp, n * es, e);
    free(tmp);
    return rc;
}

/* The poison's NaN payload, drawn from the request's seed (poison_seed)
 * so that no kernel can recognise one fixed bit pattern. The worker answers
 * one request at a time. */
static uint64_t poison_salt = 0xdeaddeaddeadULL;

static void poison_seed(uint64_t seed)
{
    poison_salt = mix64(seed ^ 0x5bd1e9955bd1e995ULL) | 1;
}

/* A quiet NaN of the dtype with a non-zero payload from poison_salt. */
static uint64_t poison_bits(sp_dtype t)
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

/* Poison elements [lo, hi) of an output of es-byte elements, or, given the
 * downloaded output, flag those that still hold it. */
typedef struct poison_job {
    unsigned char *raw;
    size_t es;
    uint64_t bits;        /* the dtype's poison (poison_bits), es bytes of it */
    unsigned char *flags; /* poison_flags_range: 1 where raw still holds it */
} poison_job;

static void poison_range(void *ctx, int64_t lo, int64_t hi, int part)
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

static void poison_flags_range(void *ctx, int64_t lo, int64_t hi, int part)
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

static int upload_inputs(instance *in, const wk_problem *p, const operands *o, dt_err *e)
{
    if (put(&in->in1, o->in1, o->nin1, p->dtype, e) != 0 ||
        put(&in->in2, o->in2, o->nin2, p->dtype, e) != 0 ||
        put(&in->bias, o->bias, (size_t)in->a->rows, p->dtype, e) != 0)
        return -1;
    return 0;
}

/* Output buffer before a run: NaN poison when beta is 0 (so unwritten
 * outputs are caught), the random initial output otherwise (then an
 * unwritten output still differs from the reference). */
static int init_output(instance *in, const wk_problem *p, const operands *o, dt_err *e)
{
    int poison = p->beta == 0.0 && p->op != SP_SDDMM;
    if (p->op == SP_SDDMM && p->beta == 0.0)
        poison = 1;
    if (!poison)
        return put(&in->out, o->out0, o->nout, p->dtype, e);
    size_t es = in->esize;
    unsigned char *tmp = malloc(o->nout * es + 8);
    if (tmp == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    poison_job pj = {tmp, es, poison_bits(p->dtype)};
    sp_parallel_for((int64_t)o->nout, (int64_t)o->nout, poison_range, &pj);
    int rc = o->nout ? dev_copy_in(in->out.ptr, tmp, o->nout * es, e) : 0;
    free(tmp);
    return rc;
}

struct observe;

typedef struct launch_ud {
    instance *in;
    const gpu_contract *c;
    struct observe *ob; /* measure's observer (NULL: none), told where operands move */
} launch_ud;

/* A copy of b at a new address (b itself is kept alive, so the allocator
 * cannot hand the same memory back): *nb. */
static int copy_placed(const dev_buf *b, dev_buf *nb, dt_err *e)
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
 * variables and hashes are shared with f (fmt_clone_free frees only the
 * arrays). */
static int fmt_clone_placed(const dev_fmt *f, dev_fmt *c, dt_err *e)
{
    *c = *f;
    c->keep_host = 0;
    for (int i = 0; i < f->narr; i++) {
        c->host[i] = NULL;
        c->arr[i].ptr = 0;
        c->arr[i].bytes = 0;
    }
    for (int i = 0; i < f->narr; i++)
        if (copy_placed(&f->arr[i], &c->arr[i], e) != 0) {
            fmt_clone_free(c);
            return -1;
        }
    return 0;
}

static void fmt_clone_free(dev_fmt *c)
{
    for (int i = 0; i < c->narr; i++)
        dev_free(&c->arr[i]);
}

static void observe_moved(struct observe *ob, int which, CUdeviceptr to);

/* wk_place_fn for a candidate: its matrix arrays and dense operands move
 * to new addresses (the kernel is rebound to them). L2-resident timings
 * depend on where the data sit (which L2 slices, which partition) by
 * several per cent: pairing over a few placements averages that out. */
static int replace_operands(void *ud, int op, dt_err *e)
{
    launch_ud *l = ud;
    instance *in = l->in;
    if (in->fmt->on_device && in->nmoved_fmt < WK_PLACEMENTS) {
        dev_fmt *c = dt_xmalloc(sizeof *c);
        if (fmt_clone_placed(in->fmt, c, e) != 0) {
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
        if (copy_placed(src[i], &nb, e) != 0)
            return -1;
        in->moved[in->nmoved++] = nb;
        dev_bind_ptr(&in->bind, names[i], nb.ptr);
        observe_moved(l->ob, i, nb.ptr);
    }
    return 0;
}

static int enqueue_kernel(void *ud, CUstream s, dt_err *e)
{
    launch_ud *l = ud;
    return dev_launch(&l->in->k, l->c, &l->in->bind, s, e);
}

/* Run once on the uploaded inputs; download the output as doubles plus a
 * flag per element saying whether it still holds the poison. */
static int run_once(instance *in, const gpu_contract *c, size_t nout, sp_dtype t, double *got,
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
    dev_from_dtype(raw, got, nout, t);
    if (untouched) {
        poison_job pj = {raw, es, poison_bits(t), untouched};
        sp_parallel_for((int64_t)nout, (int64_t)nout, poison_flags_range, &pj);
    }
    free(raw);
    return 0;
}

/* ---- checks ------------------------------------------------------------------- */

static cJSON *check_new(cJSON *checks, const char *name, int passed)
{
    cJSON *c = dt_json_obj();
    dt_json_set_str(c, "name", name);
    dt_json_set_bool(c, "passed", passed);
    cJSON_AddItemToArray(checks, c);
    return c;
}

static void set_first_bad(cJSON *c, size_t idx, const sp_csr *a, const wk_problem *p,
                          sp_layout layout, double expected, double got, int untouched)
{
    cJSON *fb = dt_json_obj();
    dt_json_set_int(fb, "index", (int64_t)idx);
    if (p->op == SP_SPMM) {
        size_t n = (size_t)p->n;
        size_t rows = (size_t)a->rows;
        dt_json_set_int(fb, "row", (int64_t)(layout == SP_ROW_MAJOR ? idx / n : idx % rows));
        dt_json_set_int(fb, "col", (int64_t)(layout == SP_ROW_MAJOR ? idx % n : idx / rows));
    } else if (p->op == SP_SDDMM) {
        int32_t lo = 0, hi = a->rows; /* find the row of nonzero idx */
        while (hi - lo > 1) {
            int32_t mid = (lo + hi) / 2;
            if (a->rowptr[mid] <= (int64_t)idx)
                lo = mid;
            else
                hi = mid;
        }
        dt_json_set_int(fb, "row", lo);
        dt_json_set_int(fb, "col", a->col[idx]);
    } else {
        dt_json_set_int(fb, "row", (int64_t)idx);
    }
    dt_json_set_num(fb, "expected", expected);
    if (untouched)
        dt_json_set_str(fb, "got", "never written (NaN poison)");
    else if (isnan(got))
        dt_json_set_str(fb, "got", "NaN");
    else if (isinf(got))
        dt_json_set_str(fb, "got", got > 0 ? "Inf" : "-Inf");
    else
        dt_json_set_num(fb, "got", got);
    dt_json_set_take(c, "first_bad", fb);
}

/* Counts over the outputs, for a check's verdict. The loops run in parts
 * over threads; merged in part order, which is index order, a tally is
 * exactly what one serial pass gives: the same first index, counts and
 * maxima (NaN never enters a maximum). */
typedef struct tally {
    size_t bad, first_bad;     /* outputs failing the check, and the lowest */
    size_t other, first_other; /* a second count, per check, and its lowest */
    double max_err, max_ratio;
} tally;

/* The arrays a check compares; each tally function uses some. */
typedef struct cmp_arrays {
    const double *got, *got2; /* downloaded outputs */
    const double *ref, *ref2, *tol, *tol2;
    const unsigned char *untouched;
} cmp_arrays;

/* Tally outputs [lo, hi) into *t, every field of it written. */
typedef void (*tally_fn)(const cmp_arrays *c, size_t lo, size_t hi, tally *t);

typedef struct tally_job {
    tally_fn fn;
    const cmp_arrays *c;
    tally part[SP_PAR_MAX];
} tally_job;

static void tally_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    tally_job *j = ctx;
    j->fn(j->c, (size_t)lo, (size_t)hi, &j->part[part]);
}

/* Run fn over outputs [0, n) in parts and merge the parts in order. */
static tally tally_outputs(size_t n, tally_fn fn, const cmp_arrays *c)
{
    tally_job j = {.fn = fn, .c = c};
    int parts = sp_parallel_for((int64_t)n, 2 * (int64_t)n, tally_range, &j);
    tally r = {0};
    for (int p = 0; p < parts; p++) {
        const tally *t = &j.part[p];
        if (r.bad == 0 && t->bad > 0)
            r.first_bad = t->first_bad;
        if (r.other == 0 && t->other > 0)
            r.first_other = t->first_other;
        r.bad += t->bad;
        r.other += t->other;
        if (t->max_err > r.max_err)
            r.max_err = t->max_err;
        if (t->max_ratio > r.max_ratio)
            r.max_ratio = t->max_ratio;
    }
    return r;
}

/* Against the reference: other counts the outputs never written (still
 * poison), which are not compared; bad those outside their tolerance. */
static void reference_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got = c->got, *ref = c->ref, *tol = c->tol;
    const unsigned char *untouched = c->untouched;
    tally r = {0}; /* in registers: t's fields would be stored every output */
    for (size_t i = lo; i < hi; i++) {
        if (untouched != NULL && untouched[i]) {
            if (r.other++ == 0)
                r.first_other = i;
            continue;
        }
        double err = fabs(got[i] - ref[i]);
        if (isnan(got[i]) || !(err <= tol[i])) {
            if (r.bad++ == 0)
                r.first_bad = i;
        }
        if (!isnan(err) && err > r.max_err)
            r.max_err = err;
        double ratio = err / tol[i];
        if (!isnan(ratio) && ratio > r.max_ratio)
            r.max_ratio = ratio;
    }
    *t = r;
}

/* Compare against the reference; returns 1 when every element is within its
 * tolerance (NaN never is). */
static int check_reference(cJSON *checks, const char *label, const operands *o, const double *got,
                           const unsigned char *untouched, const sp_csr *a, const wk_problem *p,
                           sp_layout layout)
{
    cmp_arrays ca = {.got = got, .ref = o->ref, .tol = o->tol, .untouched = untouched};
    tally t = tally_outputs(o->nout, reference_tally, &ca);
    size_t bad = t.bad, unwritten = t.other, first = t.first_bad, first_unw = t.first_other;
    double max_err = t.max_err, max_ratio = t.max_ratio;
    char name[128];
    snprintf(name, sizeof name, "%s: every output written", label);
    cJSON *cw = check_new(checks, name, unwritten == 0);
    if (unwritten) {
        char d[128];
        snprintf(d, sizeof d, "%zu of %zu outputs never written", unwritten, o->nout);
        dt_json_set_str(cw, "detail", d);
        set_first_bad(cw, first_unw, a, p, layout, o->ref[first_unw], NAN, 1);
    }
    snprintf(name, sizeof name, "%s: matches the fp64 reference", label);
    cJSON *cr = check_new(checks, name, bad == 0);
    dt_json_set_num(cr, "max_err", max_err);
    dt_json_set_num(cr, "max_ratio", max_ratio);
    if (bad) {
        char d[160];
        snprintf(d, sizeof d, "%zu of %zu written outputs outside tolerance", bad,
                 o->nout - unwritten);
        dt_json_set_str(cr, "detail", d);
        set_first_bad(cr, first, a, p, layout, o->ref[first], got[first], 0);
    }
    return unwritten == 0 && bad == 0;
}

typedef struct battery {
    cJSON *checks;
    int passed;
} battery;

static void fail_check(battery *b, const char *name, const char *detail)
{
    cJSON *c = check_new(b->checks, name, 0);
    dt_json_set_str(c, "detail", detail);
    b->passed = 0;
}

/* The candidate (got) against cuSPARSE (got2): bad counts the outputs
 * apart by more than twice the tolerance; other those where cuSPARSE itself
 * is outside it. tol2, where set, is the slack of cuSPARSE's own extra
 * rounding (see check_cusparse), added to both bounds. */
static void cusparse_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got = c->got, *cs = c->got2, *ref = c->ref, *tol = c->tol, *slack = c->tol2;
    tally r = {0};
    for (size_t i = lo; i < hi; i++) {
        const double sl = slack ? slack[i] : 0.0;
        if (!(fabs(cs[i] - ref[i]) <= tol[i] + sl))
            r.other++;
        if (!(fabs(got[i] - cs[i]) <= 2.0 * tol[i] + sl) && r.bad++ == 0)
            r.first_bad = i;
    }
    *t = r;
}

/* No cached answers, sets 0 and 1: other counts the outputs whose
 * references differ by more than both tolerances, bad those of them where
 * the two outputs are nevertheless equal. */
static void cached_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got0 = c->got, *got1 = c->got2, *ref0 = c->ref, *ref1 = c->ref2;
    const double *tol0 = c->tol, *tol1 = c->tol2;
    tally r = {0};
    for (size_t i = lo; i < hi; i++) {
        if (fabs(ref0[i] - ref1[i]) > tol0[i] + tol1[i]) {
            r.other++;
            if (got0[i] == got1[i] && r.bad++ == 0)
                r.first_bad = i;
        }
    }
    *t = r;
}

/* Determinism, got against the rerun got2: other counts the outputs not
 * bit-identical, bad those of them apart by more than the tolerance. */
static void rerun_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got = c->got, *again = c->got2, *tol = c->tol;
    tally r = {0};
    for (size_t i = lo; i < hi; i++) {
        if (memcmp(&again[i], &got[i], sizeof(double)) != 0) {
            r.other++;
            if (!(fabs(again[i] - got[i]) <= tol[i]) && r.bad++ == 0)
                r.first_bad = i;
        }
    }
    *t = r;
}

/* Run the cuSPARSE CSR_ALG1 (or the SDDMM default) on the same inputs and
 * compare the candidate with it. */
static void check_cusparse(battery *b, wk_matrix *m, const wk_problem *p, sp_layout layout,
                           const operands *o, const double *got, dt_err *e)
{
    const char *name = "set 0: agrees with cuSPARSE";
    dt_err le = {0};
    if (gpu_cusparse_load(&le) != 0) {
        cJSON *c = check_new(b->checks, name, 1);
        dt_json_set_bool(c, "skipped", 1);
        dt_json_set_str(c, "detail", "cuSPARSE not loaded");
        return;
    }
    const dev_fmt *csr = matrix_fmt(m, "csr", NULL, p->dtype, e);
    if (csr == NULL)
        return;
    size_t es = (size_t)sp_dtype_size(p->dtype);
    dev_buf in1 = {0}, in2 = {0}, out = {0};
    double *cs = xalloc_doubles(o->nout, e);
    gpu_cs_problem cp = {.op = p->op,
                         .dtype = p->dtype,
                         .n = p->n,
                         .layout = layout,
                         .host = m->a,
                         .csr = csr,
                         .alpha = p->alpha,
                         .beta = p->beta};
    gpu_cs_result r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    if (cs == NULL || dev_alloc(&in1, o->nin1 * es, e) != 0 ||
        (o->nin2 && dev_alloc(&in2, o->nin2 * es, e) != 0) || dev_alloc(&out, o->nout * es, e) != 0)
        goto done;
    if (put(&in1, o->in1, o->nin1, p->dtype, e) != 0 || put(&in2, o->in2, o->nin2, p->dtype, e) ||
        put(&out, o->out0, o->nout, p->dtype, e) != 0)
        goto done;
    if (p->op == SP_SPMV) {
        cp.x = in1.ptr;
        cp.y = out.ptr;
    } else if (p->op == SP_SPMM) {
        cp.B = in1.ptr;
        cp.C = out.ptr;
    } else {
        cp.A = in1.ptr;
        cp.Bt = in2.ptr;
        cp.out = out.ptr;
    }
    const char *alg = p->op == SP_SDDMM ? "CSR_ALG_DEFAULT" : "CSR_ALG1";
    dt_err ce = {0};
    if (gpu_cusparse_run(&cp, alg, 0, 1, 0, &r, &ce) != 0) {
        if (ce.code == DEV_EFAULT) {
            *e = ce;
            e->code = WK_EFAULT;
            goto done;
        }
        cJSON *c = check_new(b->checks, name, 1);
        dt_json_set_bool(c, "skipped", 1);
        dt_json_set_str(c, "detail", ce.msg);
        rc = 0;
        goto done;
    }
    unsigned char *raw = malloc(o->nout * es + 8);
    if (raw == NULL || dev_download(raw, &out, o->nout * es, e) != 0) {
        free(raw);
        goto done;
    }
    dev_from_dtype(raw, cs, o->nout, p->dtype);
    free(raw);
    /* cuSPARSE has no epilogue: its output was rounded to the dtype before
     * the host applies the bias or GeLU, where the kernel and the reference
     * round once, after it. That extra rounding is at most u |v| of the
     * value before the epilogue (GeLU's slope stays below 1.13), which in
     * fp16 and bf16 can pass the tolerance by itself (bf16 Franz6 with a
     * bias: 107 outputs); ReLU commutes with rounding and needs none. */
    double *slack = NULL;
    if (p->epilogue == SP_EPI_BIAS || p->epilogue == SP_EPI_GELU) {
        slack = xalloc_doubles(o->nout, e);
        if (slack == NULL)
            goto done;
        const double k = (p->epilogue == SP_EPI_GELU ? 1.13 : 1.0) * u_of(p->dtype);
        for (size_t i = 0; i < o->nout; i++)
            slack[i] = k * fabs(cs[i]);
    }
    epilogue_on_host(p, m->a, layout, o->bias, cs, o->nout);
    cmp_arrays ca = {.got = got, .got2 = cs, .ref = o->ref, .tol = o->tol, .tol2 = slack};
    tally t = tally_outputs(o->nout, cusparse_tally, &ca);
    free(slack);
    size_t bad = t.bad, first = t.first_bad, cs_bad = t.other;
    cJSON *c = check_new(b->checks, name, bad == 0);
    dt_json_set_str(c, "algorithm", alg);
    if (cs_bad) {
        char d[160];
        snprintf(d, sizeof d,
                 "note: cuSPARSE itself is outside the reference tolerance at %zu "
                 "outputs",
                 cs_bad);
        dt_json_set_str(c, "note", d);
    }
    if (bad) {
        char d[128];
        snprintf(d, sizeof d, "%zu outputs differ from cuSPARSE by more than twice the tolerance",
                 bad);
        dt_json_set_str(c, "detail", d);
        set_first_bad(c, first, m->a, p, layout, cs[first], got[first], 0);
        b->passed = 0;
    }
    rc = 0;
done:
    (void)rc;
    free(cs);
    dev_free(&in1);
    dev_free(&in2);
    dev_free(&out);
}

/* Read the inputs back and compare with what was uploaded. */
static int inputs_unchanged(instance *in, const wk_problem *p, const operands *o,
                            const char **which, dt_err *e)
{
    if (dev_fmt_changed(in->fmt, which, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    if (*which != NULL)
        return 0;
    size_t es = in->esize;
    struct {
        const dev_buf *b;
        const double *v;
        size_t n;
        const char *name;
    } arrs[] = {{&in->in1, o->in1, o->nin1,
                 p->op == SP_SPMV   ? "x"
                 : p->op == SP_SPMM ? "B"
                                    : "A"},
                {&in->in2, o->in2, o->nin2, "Bt"},
                {&in->bias, o->bias, (size_t)in->a->rows, "bias"}};
    for (size_t i = 0; i < DT_ARRAY_LEN(arrs); i++) {
        if (arrs[i].n == 0)
            continue;
        unsigned char *raw = malloc(arrs[i].n * es);
        unsigned char *want = malloc(arrs[i].n * es);
        if (raw == NULL || want == NULL) {
            free(raw);
            free(want);
            e->code = WK_ENOMEM;
            return dt_err_set(e, "out of host memory");
        }
        dev_to_dtype(arrs[i].v, want, arrs[i].n, p->dtype);
        if (dev_download(raw, arrs[i].b, arrs[i].n * es, e) != 0) {
            free(raw);
            free(want);
            e->code = wk_from_dev(e->code);
            return -1;
        }
        int same = memcmp(raw, want, arrs[i].n * es) == 0;
        free(raw);
        free(want);
        if (!same) {
            *which = arrs[i].name;
            return 0;
        }
    }
    return 0;
}

/* The battery on one matrix. m is the worker's matrix (cached formats and
 * the cuSPARSE cross-check) or NULL for an edge matrix. Returns -1 only for
 * errors that end the request (faults, contract, memory); kernel failures
 * are recorded as failed checks. */
/* 1 when the contract's parameters name `name` (alpha, beta). */
static int takes_param(const gpu_contract *c, const char *name)
{
    for (int i = 0; i < c->nparams; i++)
        if (strcmp(c->params[i], name) == 0)
            return 1;
    return 0;
}

/* The scalars of the battery's scalar set, drawn from the seed: alpha and
 * beta away from 0 and 1 (|v| in [0.5, 1.75), either sign, exact in every
 * dtype), each only where the contract takes it. */
static void scalar_set(const gpu_contract *c, const wk_problem *p, wk_problem *q)
{
    *q = *p;
    uint64_t r = mix64(p->seed ^ 0xa5a5a5a5a5a5a5a5ULL);
    double a = 0.5 + (double)(r & 0xf) / 16.0 + ((r & 0xf) == 8 ? 0.0625 : 0.0);
    double bt = 0.5 + (double)((r >> 4) & 0xf) / 16.0 + (((r >> 4) & 0xf) == 8 ? 0.0625 : 0.0);
    if (takes_param(c, "alpha"))
        q->alpha = (r >> 8) & 1 ? -a : a;
    if (takes_param(c, "beta"))
        q->beta = (r >> 9) & 1 ? -bt : bt;
}

static int run_battery(wk_state *w, wk_matrix *m, const sp_csr *a, const wk_kernel *kn,
                       const wk_problem *p, int sets, int scalars, const char *label, battery *b,
                       dt_err *e)
{
    instance in;
    int prc = instance_prepare(w, m, a, kn, p, &in, e);
    if (prc < 0) {
        if (e->code == WK_ELAUNCH) { /* the kernel's resources, not ditto's fault */
            char nm[128];
            snprintf(nm, sizeof nm, "%s: launch", label);
            fail_check(b, nm, e->msg);
            dt_err_clear(e);
            return 0;
        }
        return -1;
    }
    char nm[160];
    if (prc == 1) {
        snprintf(nm, sizeof nm, "%s: compile", label);
        cJSON *c = check_new(b->checks, nm, 0);
        cJSON *cj = gpu_cubin_json(in.cubin);
        dt_json_set_take(c, "diagnostics",
                         cJSON_Duplicate(cJSON_GetObjectItem(cj, "diagnostics"), 1));
        cJSON_Delete(cj);
        dt_json_set_str(c, "detail", "the kernel does not compile for this matrix");
        b->passed = 0;
        instance_release(&in, m == NULL);
        return 0;
    }
    const gpu_contract *c = &kn->contract;
    sp_layout layout = c->layout;
    int rc = -1;
    operands ops[2];
    memset(ops, 0, sizeof ops);
    double *got[3] = {NULL, NULL, NULL};
    unsigned char *unt = NULL;
    int nsets = sets < 1 ? 1 : sets > 128 ? 128 : sets; /* check and verify take at most 100 */
    /* Which set runs first, and how many unchecked launches (with another
     * set's inputs, the output re-poisoned after) come before each checked
     * one, follow the seed and the label: no fixed launch sequence marks a
     * verification. The scalar set is the last index (a third set). */
    int order[128];
    uint64_t rs = mix64(p->seed ^ dt_hash_str(label, DT_HASH_SEED));
    for (int s = 0; s < nsets; s++)
        order[s] = s;
    for (int s = nsets - 1; s > 0; s--) {
        rs = mix64(rs + GOLDEN);
        int j = (int)(rs % (uint64_t)(s + 1));
        int t = order[s];
        order[s] = order[j];
        order[j] = t;
    }
    static const char *const gnames[4][3] = {
        {"x", "B", "A"}, {"-", "-", "Bt"}, {"y", "C", "out"}, {"bias", "bias", "bias"}};
    const char *names[4] = {gnames[0][p->op], gnames[1][p->op], gnames[2][p->op],
                            gnames[3][p->op]};
    for (int k = 0; k < nsets; k++) {
        int s = order[k];
        wk_problem q = *p;
        int scal = scalars && nsets >= 3 && s == nsets - 1;
        if (scal)
            scalar_set(c, p, &q);
        char sl[96];
        if (scal && (q.alpha != p->alpha || q.beta != p->beta))
            snprintf(sl, sizeof sl, "set %d (alpha %g, beta %g)", s, q.alpha, q.beta);
        else
            snprintf(sl, sizeof sl, "set %d", s);
        operands cur, base;
        /* Set 1 is set 0 but for about one input value in 64: a kernel that
         * keys a memo (in its scratch, say) on a few inputs replays a wrong
         * answer. Set 0's inputs are drawn again for it, without a reference. */
        int near = s == 1 && !scal;
        if (near && make_operands(a, in.av, &q, layout, 0, 0, &base, e) != 0)
            goto out;
        int mrc = make_operands_any(a, in.av, &q, layout, s, 1, near ? &base : NULL, scal, &cur, e);
        if (near)
            operands_free(&base);
        if (mrc != 0)
            goto out;
        double *g = xalloc_doubles(cur.nout, e);
        if (g == NULL || (unt == NULL && (unt = malloc(cur.nout + 1)) == NULL)) {
            free(g);
            operands_free(&cur);
            e->code = WK_ENOMEM;
            goto out;
        }
        in.bind.alpha = q.alpha;
        in.bind.beta = q.beta;
        rs = mix64(rs + GOLDEN);
        int decoys = (int)(rs % 3);
        int drc = upload_inputs(&in, &q, &cur, e);
        for (int d = 0; drc == 0 && d < decoys; d++)
            drc = init_output(&in, &q, &cur, e) != 0 ||
                          dev_launch(&in.k, c, &in.bind, dev_stream(), e) != 0 || dev_sync(e) != 0
                      ? -1
                      : 0;
        if (drc != 0 || init_output(&in, &q, &cur, e) != 0 ||
            run_once(&in, c, cur.nout, q.dtype, g, unt, e) != 0) {
            free(g);
            operands_free(&cur);
            in.bind.alpha = p->alpha;
            in.bind.beta = p->beta;
            e->code = wk_from_dev(e->code);
            goto out;
        }
        in.bind.alpha = p->alpha;
        in.bind.beta = p->beta;
        {
            const char *gw = NULL;
            int before = 0;
            dt_err ge = {0};
            if (guards_intact(&in, names, &gw, &before, &ge) != 0) {
                *e = ge;
                e->code = wk_from_dev(e->code);
                free(g);
                operands_free(&cur);
                goto out;
            }
            snprintf(nm, sizeof nm, "%s%s: no writes outside the buffers", label, sl);
            cJSON *gk = check_new(b->checks, nm, gw == NULL);
            if (gw != NULL) {
                char d[160];
                snprintf(d, sizeof d,
                         "wrote %s '%s' (the %d bytes of guard there changed): an out-of-bounds "
                         "write",
                         before ? "before the start of" : "past the end of", gw, WK_GUARD);
                dt_json_set_str(gk, "detail", d);
                b->passed = 0;
            }
        }
        snprintf(nm, sizeof nm, "%s%s", label, sl);
        if (!check_reference(b->checks, nm, &cur, g, unt, a, &q, layout))
            b->passed = 0;
        const char *which = NULL;
        dt_err ue = {0};
        if (inputs_unchanged(&in, &q, &cur, &which, &ue) != 0) {
            *e = ue;
            free(g);
            operands_free(&cur);
            goto out;
        }
        snprintf(nm, sizeof nm, "%s%s: inputs unchanged", label, sl);
        cJSON *ck = check_new(b->checks, nm, which == NULL);
        if (which) {
            char d[96];
            snprintf(d, sizeof d, "the kernel wrote into its input '%s'", which);
            dt_json_set_str(ck, "detail", d);
            b->passed = 0;
        }
        if (m != NULL && s == 0)
            check_cusparse(b, m, p, layout, &cur, g, e);
        if (e->code == WK_EFAULT) {
            free(g);
            operands_free(&cur);
            goto out;
        }
        if (s < 2 && !scal) {
            got[s] = g;
            ops[s] = cur;
        } else {
            free(g);
            operands_free(&cur);
        }
    }
    if (nsets >= 2) {
        /* No cached answers: where the references of two sets differ by
         * more than both tolerances, the outputs must differ too. */
        cmp_arrays ca = {.got = got[0],
                         .got2 = got[1],
                         .ref = ops[0].ref,
                         .ref2 = ops[1].ref,
                         .tol = ops[0].tol,
                         .tol2 = ops[1].tol};
        tally t = tally_outputs(ops[0].nout, cached_tally, &ca);
        size_t same = t.bad, first = t.first_bad, cmp = t.other;
        snprintf(nm, sizeof nm, "%sno cached answers", label);
        cJSON *ck = check_new(b->checks, nm, same == 0);
        if (same) {
            char d[160];
            snprintf(d, sizeof d, "%zu of %zu outputs identical across two different input sets",
                     same, cmp);
            dt_json_set_str(ck, "detail", d);
            set_first_bad(ck, first, a, p, layout, ops[1].ref[first], got[1][first], 0);
            b->passed = 0;
        }
    }
    /* Determinism: set 0 again. */
    {
        double *g2 = xalloc_doubles(ops[0].nout, e);
        if (g2 == NULL)
            goto out;
        if (upload_inputs(&in, p, &ops[0], e) != 0 || init_output(&in, p, &ops[0], e) != 0 ||
            run_once(&in, c, ops[0].nout, p->dtype, g2, NULL, e) != 0) {
            free(g2);
            e->code = wk_from_dev(e->code);
            goto out;
        }
        cmp_arrays ca = {.got = got[0], .got2 = g2, .tol = ops[0].tol};
        tally t = tally_outputs(ops[0].nout, rerun_tally, &ca);
        size_t diff = t.other, beyond = t.bad, first = t.first_bad;
        snprintf(nm, sizeof nm, "%sdeterministic", label);
        cJSON *ck = check_new(b->checks, nm, beyond == 0);
        char d[160];
        if (diff == 0)
            snprintf(d, sizeof d, "bit-identical on a second run");
        else
            snprintf(d, sizeof d, "%zu outputs differ on a second run (%zu beyond tolerance)", diff,
                     beyond);
        dt_json_set_str(ck, "detail", d);
        if (beyond) {
            set_first_bad(ck, first, a, p, layout, got[0][first], g2[first], 0);
            b->passed = 0;
        }
        free(g2);
    }
    rc = 0;
out:
    for (int s = 0; s < 2; s++) {
        free(got[s]);
        operands_free(&ops[s]);
    }
    free(unt);
    instance_release(&in, m == NULL);
    return rc;
}

sp_csr *wk_edge_matrix(int i, const char **name, dt_err *e)
{
    return wk_edge_matrix_seeded(i, 0, name, e);
}

sp_csr *wk_edge_matrix_seeded(int i, uint64_t seed, const char **name, dt_err *e)
{
    dt_rng g;
    dt_rng_seed(&g, 777 + (uint64_t)i + (seed ? mix64(seed) : 0));
    /* Seed 0 keeps the classic sizes; another moves each by up to +-12 %. */
    int32_t jig = seed ? (int32_t)(mix64(seed + (uint64_t)i) % 25) - 12 : 0;
#define EDGE_SIZE(v) ((int32_t)((v) + (int64_t)(v) * jig / 100))
    int32_t rows, cols;
    switch (i) {
    case 0:
        *name = "empty rows";
        rows = EDGE_SIZE(257);
        cols = EDGE_SIZE(300);
        break;
    case 1:
        *name = "one very long row";
        rows = EDGE_SIZE(300);
        cols = 6000;
        break;
    case 2:
        *name = "1x1";
        rows = cols = 1;
        break;
    case 3:
        *name = "sizes no multiple of any tile";
        rows = EDGE_SIZE(1237);
        cols = EDGE_SIZE(1031);
        break;
    case 4:
        *name = "rows of 64 to 4096";
        rows = EDGE_SIZE(128);
        cols = 4608;
        break;
    default:
        return NULL;
    }
#undef EDGE_SIZE
    int32_t long_row = i == 1 ? (int32_t)(7 + (seed ? dt_rng_below(&g, 200) : 0)) : -1;
    sp_coo *c = sp_coo_new(rows, cols, 1024, e);
    if (c == NULL)
        return NULL;
    for (int32_t r = 0; r < rows; r++) {
        int len;
        if (i == 0)
            len = r % 3 == 0 ? 0 : 1 + (int)dt_rng_below(&g, 40);
        else if (i == 1)
            len = r == long_row ? 5000 : 1 + (int)dt_rng_below(&g, 3);
        else if (i == 2)
            len = 1;
        else if (i == 3)
            len = 1 + (int)dt_rng_below(&g, 13);
        else /* log-uniform in [64, 4096], every eighth row short */
            len = r % 8 == 5 ? 1 + (int)dt_rng_below(&g, 8)
                             : (int)(64.0 * pow(64.0, dt_rng_uniform(&g)));
        if (len > cols)
            len = cols;
        int32_t step = i == 4 && len > 0 ? cols / len : 0;
        int32_t off = i == 4 && step > 1 ? (int32_t)dt_rng_below(&g, (uint64_t)step) : 0;
        for (int t = 0; t < len; t++) {
            int32_t col = (i == 1 && r == long_row) ? (int32_t)(t * cols / 5000)
                          : i == 4                  ? (int32_t)(t * step + off)
                                   : (int32_t)dt_rng_below(&g, (uint64_t)cols);
            double v = 0.5 + dt_rng_uniform(&g);
            if (sp_coo_push(c, r, col, (dt_rng_next(&g) & 1) ? v : -v, e) != 0) {
                sp_coo_free(c);
                return NULL;
            }
        }
    }
    sp_csr *a = sp_coo_to_csr(c, e);
    sp_coo_free(c);
    return a;
}

/* The start of a request on a loaded matrix: its problem, the matrix it
 * names, and -- when need names the request ("verify needs a GPU") -- a
 * device. NULL with e otherwise. */
static wk_matrix *request_begin(wk_state *w, const cJSON *req, wk_problem *p, const char *need,
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

/* The matrix's own pattern with freshly drawn values, its format rebuilt
 * from them as a user's would be when the values change: a kernel may
 * specialise on the pattern, never silently on the values. Where the
 * contract caps the distinct values (a value dictionary), the draw takes
 * that many at most (8 at most), so the format still fits. Skipped with a
 * note past 64M nonzeros (the host copy and the second format). */
static int fresh_values_battery(wk_state *w, wk_matrix *m, const wk_kernel *kn,
                                const wk_problem *p, battery *b, dt_err *e)
{
    const sp_csr *a = m->a;
    if (a->nnz > ((int64_t)64 << 20)) {
        cJSON *c = check_new(b->checks, "fresh values", 1);
        dt_json_set_bool(c, "skipped", 1);
        dt_json_set_str(c, "detail", "over 64M nonzeros: the pattern with fresh values is not run");
        return 0;
    }
    sp_csr *f = sp_csr_new(a->rows, a->cols, a->nnz, e);
    if (f == NULL) {
        e->code = WK_ENOMEM;
        return -1;
    }
    memcpy(f->rowptr, a->rowptr, ((size_t)a->rows + 1) * sizeof *f->rowptr);
    if (a->nnz)
        memcpy(f->col, a->col, (size_t)a->nnz * sizeof *f->col);
    f->pattern = 0;
    double mv = dt_json_num(kn->contract.requires, "max_values", -1);
    uint64_t seed = mix64(p->seed ^ 0x3c6ef372fe94f82bULL);
    if (mv >= 1) {
        double pool[8];
        int np = mv < 8 ? (int)mv : 8;
        fill_random(pool, (size_t)np, seed, 0, FILL_IN1, p->dtype);
        for (int64_t i = 0; i < a->nnz; i++)
            f->val[i] = pool[mix64(seed + (uint64_t)i) % (uint64_t)np];
    } else {
        fill_random(f->val, (size_t)a->nnz, seed, 0, FILL_IN1, p->dtype);
    }
    int rc = 0;
    const char *why = wk_requires_violated(&kn->contract, kn->params, f);
    if (why != NULL) {
        char d[512];
        snprintf(d, sizeof d,
                 "the matrix's pattern with fresh values breaks the kernel's preconditions (%s): "
                 "it depends on the values it was built for",
                 why);
        fail_check(b, "fresh values", d);
    } else {
        wk_problem q = *p;
        q.seed = seed;
        rc = run_battery(w, NULL, f, kn, &q, 1, 0, "fresh values: ", b, e);
    }
    sp_csr_free(f);
    return rc;
}

int wk_verify(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = request_begin(w, req, &p, "verify needs a GPU", e);
    if (m == NULL)
        return -1;
    wk_kernel kn;
    if (wk_kernel_parse(req, &kn, e) != 0)
        return -1;
    if (kn.contract.op != p.op) {
        e->code = WK_ECONTRACT;
        dt_err_set(e, "the kernel's contract is for %s, the request for %s",
                   sp_op_name(kn.contract.op), sp_op_name(p.op));
        wk_kernel_clear(&kn);
        return -1;
    }
    int sets = dt_json_int(req, "sets", 3);
    int edge = dt_json_bool(req, "edge", 1);
    int fresh = dt_json_bool(req, "fresh", 1);
    /* The verify seed: the request's, else a fresh one per request (the
     * reply reports it, so a run can be repeated), so that the battery's
     * launch order, poison, scalars and edge-matrix sizes differ from run
     * to run and no kernel can learn them. */
    if (cJSON_GetObjectItem(req, "seed") == NULL) {
        static uint64_t calls;
        p.seed = fresh_seed(++calls);
    }
    poison_seed(p.seed);
    battery b = {dt_json_arr(), 1};
    int rc = 0;
    {
        char vname[64];
        int vline = 0;
        int st = gpu_device_state(kn.source, vname, sizeof vname, &vline);
        cJSON *c = check_new(b.checks, "no state kept across launches", !st);
        if (st) {
            char d[256];
            snprintf(d, sizeof d,
                     "line %d: writable __device__ variable '%s' outlives the launch: a kernel "
                     "can count launches or replay answers with it (keep such data in the "
                     "contract's scratch)",
                     vline, vname);
            dt_json_set_str(c, "detail", d);
            b.passed = 0;
        }
    }
    const char *why = wk_requires_violated(&kn.contract, kn.params, m->a);
    if (why != NULL) {
        fail_check(&b, "preconditions", why);
    } else {
        rc = run_battery(w, m, m->a, &kn, &p, sets < 2 ? 2 : sets, 1, "", &b, e);
        if (rc == 0 && fresh)
            rc = fresh_values_battery(w, m, &kn, &p, &b, e);
    }
    for (int i = 0; rc == 0 && edge && i < WK_NEDGE; i++) {
        const char *name = NULL;
        sp_csr *a = wk_edge_matrix_seeded(i, p.seed, &name, e);
        if (a == NULL) {
            rc = -1;
            break;
        }
        char label[96];
        snprintf(label, sizeof label, "edge %s: ", name);
        const char *v = wk_requires_violated(&kn.contract, kn.params, a);
        if (v != NULL) {
            char nm[128];
            snprintf(nm, sizeof nm, "edge %s", name);
            cJSON *c = check_new(b.checks, nm, 1);
            dt_json_set_bool(c, "skipped", 1);
            dt_json_set_str(c, "detail", v);
        } else {
            rc = run_battery(w, NULL, a, &kn, &p, 1, 0, label, &b, e);
        }
        sp_csr_free(a);
    }
    wk_kernel_clear(&kn);
    if (rc != 0) {
        cJSON_Delete(b.checks);
        return -1;
    }
    dt_json_set_bool(out, "passed", b.passed);
    dt_json_set_int(out, "seed", (int64_t)p.seed);
    int n = 0, failed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, b.checks)
    {
        n++;
        failed += !dt_json_bool(c, "passed", 0);
    }
    dt_json_set_int(out, "checks_run", n);
    dt_json_set_int(out, "checks_failed", failed);
    dt_json_set_take(out, "checks", b.checks);
    return 0;
}

/* ---- measure ------------------------------------------------------------------ */

/* Timed launches are observable (gpu/PROTOCOL.md, measure). Two input sets
 * with their references live on the device beside the kernel's operands;
 * the second equals the first but for about one value in 64 (a kernel that
 * keys a cache on a few inputs replays the wrong answer). Before every
 * sample, outside the timing events: a set chosen at random is copied into
 * the operands, the output re-seeded (beta != 0: the set's y0; beta == 0:
 * the NaN poison or finite random values, at random, so that no kernel can
 * work only when it sees the poison), scratch zeroed where the contract
 * keeps it zeroed. Graph replays refill the output before every launch
 * (dev_observer). After a sample its output is checked against the set's
 * reference: every sample when the output is at most 8 MiB, else a share
 * (8 MiB over the output's size, at least one in 16) chosen after the
 * sample ran (and always the first), by a generator seeded from the clock,
 * which no kernel sees. */
#define OBS_SETS 2

typedef struct observe {
    instance *in;
    const wk_problem *p;
    const gpu_contract *c;
    sp_layout layout;
    size_t nout;
    const operands *ops; /* OBS_SETS of them, the matrix's cache */
    dev_buf in1[OBS_SETS], in2[OBS_SETS], bias[OBS_SETS], init[OBS_SETS];
    dev_buf poison, fill; /* fill: what refills copy into the output */
    CUdeviceptr live[3];  /* in1, in2, out as bound now (placements move them) */
    int cur, cur_poison;  /* the sample in flight: its set, whether the output held poison */
    uint64_t rng;
    double check_p;
    long samples, checked;
    int failed;
    char msg[512];
    unsigned char *raw, *unt;
    double *got;
} observe;

static void observe_moved(struct observe *ob, int which, CUdeviceptr to)
{
    if (ob != NULL && which >= 0 && which < 3)
        ob->live[which] = to;
}

/* The host side of the observed sets, cached on the matrix. */
typedef struct obs_sets {
    operands ops[OBS_SETS];
} obs_sets;

static void obs_sets_free(void *p)
{
    obs_sets *c = p;
    if (c == NULL)
        return;
    for (int k = 0; k < OBS_SETS; k++)
        operands_free(&c->ops[k]);
    free(c);
}

static void observe_free(observe *ob)
{
    for (int k = 0; k < OBS_SETS; k++) {
        dev_free(&ob->in1[k]);
        dev_free(&ob->in2[k]);
        dev_free(&ob->bias[k]);
        dev_free(&ob->init[k]);
    }
    dev_free(&ob->poison);
    dev_free(&ob->fill);
    free(ob->raw);
    free(ob->unt);
    free(ob->got);
}

static int observe_open(observe *ob, wk_matrix *m, instance *in, const wk_problem *p,
                        const gpu_contract *c, dt_err *e)
{
    memset(ob, 0, sizeof *ob);
    ob->in = in;
    ob->p = p;
    ob->c = c;
    ob->layout = c->layout;
    ob->rng = mix64((uint64_t)(dt_now() * 1e9) ^ (uint64_t)getpid() ^ (uintptr_t)ob);
    size_t es = in->esize;
    /* The sets depend on the problem, not on the kernel: the tuner's many
     * measures of one problem build them once. Their seed is drawn when
     * they are built, as unpredictable as every other. */
    char key[192];
    snprintf(key, sizeof key, "%d/%d/%d/%.17g/%.17g/%d/%d", (int)p->op, (int)p->dtype, (int)p->n,
             p->alpha, p->beta, (int)p->epilogue, (int)ob->layout);
    if (m->obs_sets == NULL || strcmp(m->obs_key, key) != 0) {
        if (m->obs_free)
            m->obs_free(m->obs_sets);
        m->obs_sets = NULL;
        m->obs_free = NULL;
        obs_sets *cs = dt_xmalloc(sizeof *cs);
        memset(cs, 0, sizeof *cs);
        wk_problem q = *p;
        q.seed = fresh_seed(0x0b5e);
        for (int k = 0; k < OBS_SETS; k++)
            if (make_operands_near(in->a, in->av, &q, ob->layout, 16 + k,
                                   k ? &cs->ops[0] : NULL, &cs->ops[k], e) != 0) {
                obs_sets_free(cs);
                return -1;
            }
        m->obs_sets = cs;
        m->obs_free = obs_sets_free;
        snprintf(m->obs_key, sizeof m->obs_key, "%s", key);
    }
    ob->ops = ((const obs_sets *)m->obs_sets)->ops;
    for (int k = 0; k < OBS_SETS; k++) {
        const operands *o = &ob->ops[k];
        if (dev_alloc(&ob->in1[k], o->nin1 * es, e) != 0 ||
            (o->nin2 && dev_alloc(&ob->in2[k], o->nin2 * es, e) != 0) ||
            dev_alloc(&ob->bias[k], (size_t)in->a->rows * es, e) != 0 ||
            dev_alloc(&ob->init[k], o->nout * es, e) != 0 ||
            put(&ob->in1[k], o->in1, o->nin1, p->dtype, e) != 0 ||
            (o->nin2 && put(&ob->in2[k], o->in2, o->nin2, p->dtype, e) != 0) ||
            put(&ob->bias[k], o->bias, (size_t)in->a->rows, p->dtype, e) != 0 ||
            put(&ob->init[k], o->out0, o->nout, p->dtype, e) != 0) {
            e->code = wk_from_dev(e->code);
            return -1;
        }
    }
    ob->nout = ob->ops[0].nout;
    unsigned char *tmp = malloc(ob->nout * es + 8);
    if (tmp == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    poison_job pj = {tmp, es, poison_bits(p->dtype)};
    sp_parallel_for((int64_t)ob->nout, (int64_t)ob->nout, poison_range, &pj);
    int rc = dev_alloc(&ob->poison, ob->nout * es, e) != 0 ||
                     dev_alloc(&ob->fill, ob->nout * es, e) != 0 ||
                     (ob->nout && dev_copy_in(ob->poison.ptr, tmp, ob->nout * es, e) != 0)
                 ? -1
                 : 0;
    free(tmp);
    if (rc != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    ob->raw = malloc(ob->nout * es + 8);
    ob->unt = malloc(ob->nout + 1);
    ob->got = xalloc_doubles(ob->nout, e);
    if (ob->raw == NULL || ob->unt == NULL || ob->got == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    ob->live[0] = in->in1.ptr;
    ob->live[1] = in->in2.ptr;
    ob->live[2] = in->out.ptr;
    /* Every sample while the output is at most 8 MiB; beyond, fewer (the
     * download and the comparison take milliseconds), never under 1 in 16. */
    double ob_bytes = (double)(ob->nout * es);
    ob->check_p = ob_bytes <= 8.0 * 1048576.0 ? 1.0 : 8.0 * 1048576.0 / ob_bytes;
    if (ob->check_p < 1.0 / 16.0)
        ob->check_p = 1.0 / 16.0;
    return 0;
}

static int obs_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s, dt_err *e)
{
    if (bytes == 0 || dst == 0 || src == 0)
        return 0;
    return dev_check(CU(cuMemcpyDtoDAsync)(dst, src, bytes, s), "rotating the inputs", e);
}

static int observe_prep(void *ud, CUstream s, unsigned sample, dt_err *e)
{
    observe *ob = ud;
    instance *in = ob->in;
    size_t es = in->esize;
    ob->rng = mix64(ob->rng + GOLDEN);
    int k = (int)(ob->rng % OBS_SETS);
    const operands *o = &ob->ops[k];
    int beta0 = ob->p->beta == 0.0;
    /* beta == 0: poison or the other set's finite y0, at random */
    ob->cur_poison = beta0 && ((ob->rng >> 8) & 1);
    const dev_buf *init = !beta0 ? &ob->init[k] : ob->cur_poison ? &ob->poison
                                                                  : &ob->init[(k + 1) % OBS_SETS];
    ob->cur = k;
    (void)sample;
    if (obs_copy(ob->live[0], ob->in1[k].ptr, o->nin1 * es, s, e) != 0 ||
        obs_copy(ob->live[1], ob->in2[k].ptr, o->nin2 * es, s, e) != 0 ||
        obs_copy(in->bias.ptr, ob->bias[k].ptr, (size_t)in->a->rows * es, s, e) != 0 ||
        obs_copy(ob->fill.ptr, init->ptr, ob->nout * es, s, e) != 0 ||
        obs_copy(ob->live[2], init->ptr, ob->nout * es, s, e) != 0)
        return -1;
    if (in->k.scratch_bytes && ob->c->scratch_once && in->scratch.ptr &&
        dev_check(CU(cuMemsetD8Async)(in->scratch.ptr, 0, in->scratch.bytes, s),
                  "clearing the scratch", e) != 0)
        return -1;
    return 0;
}

static int observe_refill(void *ud, CUstream s, dt_err *e)
{
    observe *ob = ud;
    return obs_copy(ob->live[2], ob->fill.ptr, ob->nout * ob->in->esize, s, e);
}

/* Check the output now in the operands against set k's reference; 0 with
 * ob->failed and ob->msg set on a wrong output. what: "timed launch ..." */
static int observe_check(observe *ob, const char *what, dt_err *e)
{
    size_t es = ob->in->esize;
    const operands *o = &ob->ops[ob->cur];
    dev_buf live = {ob->live[2], ob->nout * es};
    if (ob->nout && dev_download(ob->raw, &live, ob->nout * es, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    dev_from_dtype(ob->raw, ob->got, ob->nout, ob->p->dtype);
    if (ob->cur_poison) {
        poison_job pj = {ob->raw, es, poison_bits(ob->p->dtype), ob->unt};
        sp_parallel_for((int64_t)ob->nout, (int64_t)ob->nout, poison_flags_range, &pj);
    }
    cmp_arrays ca = {.got = ob->got,
                     .ref = o->ref,
                     .tol = o->tol,
                     .untouched = ob->cur_poison ? ob->unt : NULL};
    tally t = tally_outputs(ob->nout, reference_tally, &ca);
    ob->checked++;
    if (t.bad == 0 && t.other == 0)
        return 0;
    ob->failed = 1;
    size_t idx = t.bad ? t.first_bad : t.first_other;
    snprintf(ob->msg, sizeof ob->msg,
             "%s (input set %d): %zu of %zu outputs wrong, %zu never written (first: output %zu, "
             "expected %.9g, got %.9g): a kernel must compute the same function when timed as "
             "when verified",
             what, ob->cur, t.bad, ob->nout, t.other, idx, o->ref[idx], ob->got[idx]);
    return 0;
}

static int observe_after(void *ud, unsigned sample, dt_err *e)
{
    observe *ob = ud;
    ob->samples++;
    if (ob->failed)
        return 0;
    ob->rng = mix64(ob->rng + GOLDEN);
    double u = (double)(ob->rng >> 11) * 0x1.0p-53;
    if (sample != 0 && u >= ob->check_p)
        return 0;
    char what[96];
    snprintf(what, sizeof what, "timed launch: sample %u", sample + 1);
    return observe_check(ob, what, e);
}

/* After all timing: verification once more on the module that was timed
 * (set 0, the poison, one launch), and the inputs read back unchanged. */
static int observe_final(observe *ob, dt_err *e)
{
    if (ob->failed)
        return 0;
    CUstream s = dev_stream();
    ob->cur = 0;
    ob->cur_poison = ob->p->beta == 0.0;
    const dev_buf *init = ob->cur_poison ? &ob->poison : &ob->init[0];
    size_t es = ob->in->esize;
    const operands *o = &ob->ops[0];
    if (obs_copy(ob->live[0], ob->in1[0].ptr, o->nin1 * es, s, e) != 0 ||
        obs_copy(ob->live[1], ob->in2[0].ptr, o->nin2 * es, s, e) != 0 ||
        obs_copy(ob->in->bias.ptr, ob->bias[0].ptr, (size_t)ob->in->a->rows * es, s, e) != 0 ||
        obs_copy(ob->live[2], init->ptr, ob->nout * es, s, e) != 0 ||
        dev_launch(&ob->in->k, ob->c, &ob->in->bind, s, e) != 0 || dev_sync(e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    return observe_check(ob, "after timing: a verification launch on the timed module", e);
}


static void stats_into(cJSON *o, const char *key, const dev_stats *s)
{
    dt_json_set_take(o, key, dev_stats_json(s));
}

/* Time cold, warm and (under 20 us warm) graph replay. fast: only what the
 * comparison method needs -- cold for data beyond L2; warm and graph for
 * L2-resident data (cold too when graph replay does not apply). */
static int time_modes(dev_enqueue_fn fn, void *ud, const dev_observer *obs, int min_runs, double min_s, int l2_resident,
                      int fast, dev_stats st[3], char *graph_note, size_t nlen, dt_err *e)
{
    memset(st, 0, 3 * sizeof st[0]);
    if (fast && !l2_resident)
        return dev_time_obs(fn, ud, obs, DEV_TIME_COLD, min_runs, min_s, 5.0, &st[0], e);
    if (!fast && dev_time_obs(fn, ud, obs, DEV_TIME_COLD, min_runs, min_s, 5.0, &st[0], e) != 0)
        return -1;
    if (dev_time_obs(fn, ud, obs, DEV_TIME_WARM, min_runs, min_s, 5.0, &st[1], e) != 0)
        return -1;
    if (st[1].median_us < 20.0) {
        dt_err ge = {0};
        if (dev_time_obs(fn, ud, obs, DEV_TIME_GRAPH, min_runs, min_s, 5.0, &st[2], &ge) != 0) {
            if (ge.code == DEV_EFAULT) {
                *e = ge;
                return -1;
            }
            snprintf(graph_note, nlen, "graph replay unavailable: %s", ge.msg);
        }
    }
    if (fast && !st[2].valid)
        return dev_time_obs(fn, ud, obs, DEV_TIME_COLD, min_runs, min_s, 5.0, &st[0], e);
    return 0;
}

/* What decides what a launch computes and how: the CUBIN, the grid, block,
 * shared memory and scratch (and whether a memset precedes each launch),
 * and the format with its parameters. Two
 * parameter points of a template with the same key run the same code the
 * same way (at N=32 ell-baked-spmm's TN 64 and 128, or fp32 VEC 4 and 8,
 * which the template clamps to the same tile and vector), so the tuner
 * times only the first. 128 bits of two FNV-1a chains: a collision would
 * only cost the tuner a variant, never a wrong result. */
static void kernel_key_into(const instance *in, const wk_kernel *kn, cJSON *out)
{
    int64_t geo[8] = {in->k.grid[0],  in->k.grid[1],  in->k.grid[2], in->k.block[0],
                      in->k.block[1], in->k.block[2], in->k.smem,    (int64_t)in->k.scratch_bytes};
    const int32_t once = kn->contract.scratch_once;
    uint64_t h[2] = {DT_HASH_SEED, DT_HASH_SEED ^ 0x9e3779b97f4a7c15ULL};
    dt_err fe = {0};
    cJSON *fp = wk_format_params(kn, &fe);
    char *fps = fp ? dt_json_print(fp, 0) : NULL;
    for (int i = 0; i < 2; i++) {
        h[i] = dt_hash64(&in->cubin->size, sizeof in->cubin->size, h[i]);
        h[i] = dt_hash64(in->cubin->image, in->cubin->size, h[i]);
        h[i] = dt_hash64(geo, sizeof geo, h[i]);
        h[i] = dt_hash64(&once, sizeof once, h[i]);
        h[i] = dt_hash_str(kn->contract.format ? kn->contract.format : "csr", h[i]);
        h[i] = dt_hash_str(fps ? fps : "", h[i]);
    }
    free(fps);
    cJSON_Delete(fp);
    char hex[2][17], key[33];
    dt_hash_hex(h[0], hex[0]);
    dt_hash_hex(h[1], hex[1]);
    snprintf(key, sizeof key, "%s%s", hex[0], hex[1]);
    dt_json_set_str(out, "kernel_key", key);
}

int wk_measure(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = request_begin(w, req, &p, "measure needs a GPU", e);
    if (m == NULL)
        return -1;
    wk_kernel kn;
    if (wk_kernel_parse(req, &kn, e) != 0)
        return -1;
    int min_runs = dt_json_int(req, "min_runs", 20);
    double min_s = dt_json_num(req, "min_seconds", 0.05);
    int want_base = dt_json_bool(req, "baseline", 1);
    int fast = dt_json_bool(req, "fast", 0);
    instance in;
    int prc = instance_prepare(w, m, m->a, &kn, &p, &in, e);
    if (prc != 0) {
        if (prc == 1) {
            e->code = WK_ECOMPILE;
            dt_err_set(e, "the kernel does not compile (run compile or verify for the "
                          "diagnostics)");
            instance_release(&in, 0);
        }
        wk_kernel_clear(&kn);
        return -1;
    }
    operands o;
    int rc = -1;
    char gnote[512] = "";
    dev_stats st[3];
    if (make_operands(m->a, in.av, &p, kn.contract.layout, 0, 0, &o, e) != 0) {
        instance_release(&in, 0);
        wk_kernel_clear(&kn);
        return -1;
    }
    observe ob;
    int observed = dt_json_bool(req, "observe", 1);
    poison_seed(p.seed ^ (uint64_t)(dt_now() * 1e6));
    if (observed && observe_open(&ob, m, &in, &p, &kn.contract, e) != 0) {
        observe_free(&ob);
        operands_free(&o);
        instance_release(&in, 0);
        wk_kernel_clear(&kn);
        return -1;
    }
    if (!observed)
        memset(&ob, 0, sizeof ob);
    dev_observer dob = {observe_prep, observe_refill, observe_after, &ob};
    const dev_observer *obs = observed ? &dob : NULL;
    launch_ud lu = {&in, &kn.contract, observed ? &ob : NULL};
    double flops = 0, bytes = 0;
    sp_cost(m->a->rows, m->a->cols, m->a->nnz, p.op, p.dtype, p.n, &flops, &bytes);
    int l2_resident = bytes <= 0.5 * (double)w->dev.l2_bytes;
    if (upload_inputs(&in, &p, &o, e) != 0 || init_output(&in, &p, &o, e) != 0 ||
        time_modes(enqueue_kernel, &lu, obs, min_runs, min_s, l2_resident, fast, st, gnote,
                   sizeof gnote, e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    const char *method = (l2_resident && st[2].valid) ? "graph" : "cold";
    const dev_stats *prim = (l2_resident && st[2].valid) ? &st[2] : &st[0];
    double us = prim->median_us;
    cJSON *cand = dt_json_obj();
    stats_into(cand, "cold", &st[0]);
    stats_into(cand, "warm", &st[1]);
    stats_into(cand, "graph", &st[2]);
    if (gnote[0])
        dt_json_set_str(cand, "graph_note", gnote);
    dt_json_set_take(out, "candidate", cand);
    dt_json_set_str(out, "method", method);
    dt_json_set_num(out, "us", us);
    dt_json_set_num(out, "preprocess_us", in.fmt->prep_us);
    dt_json_set_num(out, "min_bytes", bytes);
    dt_json_set_num(out, "flops", flops);
    dt_json_set_num(out, "gbps", bytes / (us * 1e-6) / 1e9);
    dt_json_set_num(out, "gflops", flops / (us * 1e-6) / 1e9);
    double bw = wk_copy_gbps > 0 ? wk_copy_gbps : 0;
    /* The physical floor: the fewest bytes the kernel can have moved, at
     * copy bandwidth. min_bytes counts the matrix as CSR with 4-byte
     * columns; a format that stores it in fewer bytes (16-bit column
     * offsets: 6 bytes an fp32 nonzero instead of 8) lowers the floor to
     * its own size, or a sell16 kernel at 94 % of copy bandwidth on
     * n1024-l1 x 32M reads as "below the floor" (59.2 against 62.9 us). */
    double fbytes = 0;
    for (int i = 0; i < in.fmt->narr; i++)
        fbytes += (double)in.fmt->arr[i].bytes;
    double sparse = (m->a->nnz >= INT32_MAX ? 8.0 : 4.0) * ((double)m->a->rows + 1) +
                    (double)m->a->nnz * (4.0 + (p.op == SP_SDDMM ? 0 : (double)in.esize));
    double floor_bytes = fbytes > 0 && fbytes < sparse ? bytes - sparse + fbytes : bytes;
    double floor_us =
        bw > 0 ? floor_bytes / (bw * 1e9) * 1e6 * (strcmp(method, "cold") ? 0.25 : 1.0) : 0;
    dt_json_set_num(out, "floor_us", floor_us);
    dt_json_set_num(out, "floor_bytes", floor_bytes);
    dt_json_set_num(out, "copy_gbps", bw);
    dt_json_set_bool(out, "copy_measured", wk_copy_measured);
    int suspect = floor_us > 0 && us < 0.95 * floor_us;
    dt_json_set_bool(out, "suspect", suspect);
    dt_json_set_int(out, "registers", in.k.regs);
    dt_json_set_int(out, "static_smem", in.k.static_smem);
    dt_json_set_int(out, "local_bytes", in.k.local_bytes);
    cJSON *launch = dt_json_obj();
    cJSON *g = dt_json_arr(), *bl = dt_json_arr();
    for (int i = 0; i < 3; i++) {
        cJSON_AddItemToArray(g, cJSON_CreateNumber(in.k.grid[i]));
        cJSON_AddItemToArray(bl, cJSON_CreateNumber(in.k.block[i]));
    }
    dt_json_set_take(launch, "grid", g);
    dt_json_set_take(launch, "block", bl);
    dt_json_set_int(launch, "smem", in.k.smem);
    dt_json_set_take(out, "launch", launch);
    kernel_key_into(&in, &kn, out);
    if (suspect) {
        e->code = WK_ESUSPECT;
        dt_err_set(e,
                   "suspect: %.2f us is below the physical floor of %.2f us (%.0f bytes at "
                   "%.0f GB/s): the kernel cannot have done its work",
                   us, floor_us, floor_bytes, bw);
        goto done;
    }
    if (want_base) {
        cJSON *base = dt_json_obj();
        dt_err be = {0};
        if (wk_baseline_into(m, &p, kn.contract.layout, min_runs, min_s, method, fast,
                             enqueue_kernel, replace_operands, &lu, obs, base, &be) != 0) {
            if (be.code == WK_EFAULT) {
                *e = be;
                cJSON_Delete(base);
                goto done;
            }
            dt_json_set_str(base, "error", be.msg);
        }
        /* The speedup is the paired one (the median of per-round ratios,
         * candidate and best algorithm timed alternately), which drift
         * between the two separate timings cannot move; the separate
         * quotient stays beside it. */
        double bus = dt_json_num(base, "us", 0);
        const cJSON *pr = cJSON_GetObjectItem(base, "paired");
        if (bus > 0)
            dt_json_set_num(out, "speedup_separate", bus / us);
        if (pr && dt_json_num(pr, "speedup", 0) > 0)
            dt_json_set_num(out, "speedup", dt_json_num(pr, "speedup", 0));
        else if (bus > 0)
            dt_json_set_num(out, "speedup", bus / us);
        dt_json_set_take(out, "baseline", base);
    }
    if (observed) {
        if (observe_final(&ob, e) != 0)
            goto done;
        cJSON *tc = dt_json_obj();
        dt_json_set_int(tc, "samples", ob.samples);
        dt_json_set_int(tc, "checked", ob.checked);
        dt_json_set_bool(tc, "passed", !ob.failed);
        dt_json_set_take(out, "timed_checks", tc);
        if (ob.failed) {
            e->code = WK_ESUSPECT;
            dt_err_set(e, "%s", ob.msg);
            goto done;
        }
    }
    rc = 0;
done:
    if (observed)
        observe_free(&ob);
    operands_free(&o);
    instance_release(&in, 0);
    wk_kernel_clear(&kn);
    return rc;
}

/* ---- baseline ------------------------------------------------------------------ */

/* Median of v[0..n) (reordered). */
static double median_of(double *v, int n)
{
    if (n <= 0)
        return 0;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int wk_baseline_into(wk_matrix *m, const wk_problem *p, sp_layout layout, int min_runs,
                     double min_s, const char *method, int fast, dev_enqueue_fn cand,
                     wk_place_fn place, void *cand_ud, const dev_observer *cand_obs, cJSON *out,
                     dt_err *e)
{
    dt_err le = {0};
    if (gpu_cusparse_load(&le) != 0) {
        e->code = WK_EUNAVAIL;
        return dt_err_set(e, "cuSPARSE not available: %s", le.msg);
    }
    const dev_fmt *csr = matrix_fmt(m, "csr", NULL, p->dtype, e);
    const double *av = matrix_rounded(m, p->dtype, e);
    if (csr == NULL || av == NULL)
        return -1;
    operands o;
    if (make_operands(m->a, av, p, layout, 0, 1, &o, e) != 0)
        return -1;
    size_t es = (size_t)sp_dtype_size(p->dtype);
    dev_buf in1 = {0}, in2 = {0}, ob = {0};
    int rc = -1;
    double *got = xalloc_doubles(o.nout, e);
    unsigned char *raw = malloc(o.nout * es + 8);
    if (got == NULL || raw == NULL || dev_alloc(&in1, o.nin1 * es, e) != 0 ||
        (o.nin2 && dev_alloc(&in2, o.nin2 * es, e) != 0) || dev_alloc(&ob, o.nout * es, e) != 0 ||
        put(&in1, o.in1, o.nin1, p->dtype, e) != 0 || put(&in2, o.in2, o.nin2, p->dtype, e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    gpu_cs_problem cp = {.op = p->op,
                         .dtype = p->dtype,
                         .n = p->n,
                         .layout = layout,
                         .host = m->a,
                         .csr = csr,
                         .alpha = p->alpha,
                         .beta = p->beta};
    if (p->op == SP_SPMV) {
        cp.x = in1.ptr;
        cp.y = ob.ptr;
    } else if (p->op == SP_SPMM) {
        cp.B = in1.ptr;
        cp.C = ob.ptr;
    } else {
        cp.A = in1.ptr;
        cp.Bt = in2.ptr;
        cp.out = ob.ptr;
    }
    const char *algs[16];
    int nalgs = gpu_cusparse_algs(p->op, p->dtype, algs, 16);
    cJSON *arr = dt_json_arr();
    const char *best = NULL;
    double best_us = 0;
    int l2_graph = strcmp(method, "graph") == 0;
    for (int i = 0; i < nalgs; i++) {
        cJSON *aj = dt_json_obj();
        dt_json_set_str(aj, "name", algs[i]);
        cJSON_AddItemToArray(arr, aj);
        if (put(&ob, o.out0, o.nout, p->dtype, e) != 0) {
            e->code = wk_from_dev(e->code);
            goto done_arr;
        }
        gpu_cs_result r;
        memset(&r, 0, sizeof r);
        dt_err ce = {0};
        unsigned modes = fast ? (l2_graph ? 1u << DEV_TIME_GRAPH : 1u << DEV_TIME_COLD)
                              : (1u << DEV_TIME_COLD) | (1u << DEV_TIME_WARM) |
                                    (l2_graph ? (1u << DEV_TIME_GRAPH) : 0u);
        if (gpu_cusparse_run(&cp, algs[i], modes, min_runs, min_s, &r, &ce) != 0) {
            if (ce.code == DEV_EFAULT) {
                *e = ce;
                e->code = WK_EFAULT;
                goto done_arr;
            }
            dt_json_set_bool(aj, "ok", 0);
            dt_json_set_str(aj, "error", ce.msg);
            continue;
        }
        dt_json_set_bool(aj, "ok", 1);
        dt_json_set_num(aj, "buffer_bytes", (double)r.buffer_bytes);
        dt_json_set_num(aj, "setup_us", r.setup_us);
        dt_json_set_num(aj, "preprocess_us", r.preprocess_us);
        stats_into(aj, "cold", &r.cold);
        stats_into(aj, "warm", &r.warm);
        stats_into(aj, "graph", &r.graph);
        /* The comparison uses one method for both sides: an algorithm that
         * cannot be timed with it is listed but not eligible as the best. */
        const dev_stats *prim = l2_graph ? &r.graph : &r.cold;
        if (!prim->valid) {
            dt_json_set_str(aj, "note",
                            l2_graph ? "not graph-capturable: not comparable"
                                     : "no cold timing: not comparable");
            continue;
        }
        dt_json_set_num(aj, "us", prim->median_us);
        /* Correctness of the baseline itself, for beta == 0 where repeated
         * runs leave the same output (with beta != 0 the timing runs have
         * accumulated into it). */
        int verified = -1;
        if (p->beta == 0.0) {
            if (dev_download(raw, &ob, o.nout * es, e) != 0) {
                e->code = wk_from_dev(e->code);
                goto done_arr;
            }
            dev_from_dtype(raw, got, o.nout, p->dtype);
            epilogue_on_host(p, m->a, layout, o.bias, got, o.nout);
            size_t bad = 0;
            for (size_t k = 0; k < o.nout; k++)
                bad += !(fabs(got[k] - o.ref[k]) <= o.tol[k]);
            verified = bad == 0;
            if (bad)
                dt_json_set_int(aj, "outputs_outside_tolerance", (int64_t)bad);
        }
        if (verified >= 0)
            dt_json_set_bool(aj, "verified", verified);
        if (verified != 0 && prim->valid && (best == NULL || prim->median_us < best_us)) {
            best = algs[i];
            best_us = prim->median_us;
        }
    }
    dt_json_set_str(out, "method", method);
    if (best) {
        dt_json_set_str(out, "best", best);
        dt_json_set_num(out, "us", best_us);
    }
    dt_json_set_take(out, "algs", arr);
    arr = NULL;
    if (best && cand) {
        /* Paired timing over placements: for each, the candidate's and the
         * baseline's dense operands sit at new addresses and cuSPARSE is set
         * up afresh (its own COO indices and workspace move too). Data beyond
         * L2 streams from DRAM, where placement does not matter: one. */
        int nplace = l2_graph ? WK_PLACEMENTS : 1;
        double place_sp[WK_PLACEMENTS], place_a[WK_PLACEMENTS], place_b[WK_PLACEMENTS];
        double place_amin[WK_PLACEMENTS], place_bmin[WK_PLACEMENTS];
        int np = 0, rounds = 0;
        double p10 = 0, p90 = 0;
        dev_buf moved[3 * WK_PLACEMENTS];
        int nmoved = 0;
        dev_fmt *mfmt[WK_PLACEMENTS];
        int nmfmt = 0;
        dev_time_mode mode = l2_graph ? DEV_TIME_GRAPH : DEV_TIME_COLD;
        dt_err pe = {0};
        for (int r = 0; r < nplace; r++) {
            gpu_cs_problem cq = cp;
            if (r > 0) {
                if ((place && place(cand_ud, p->op, &pe) != 0))
                    break;
                dev_fmt *c = dt_xmalloc(sizeof *c);
                if (fmt_clone_placed(csr, c, &pe) != 0) {
                    free(c);
                    break;
                }
                mfmt[nmfmt++] = c;
                cq.csr = c;
                dev_buf *bs[3] = {&in1, &in2, &ob};
                CUdeviceptr np3[3] = {0, 0, 0};
                int bad = 0;
                for (int i = 0; i < 3 && !bad; i++) {
                    if (copy_placed(bs[i], &moved[nmoved], &pe) != 0) {
                        bad = 1;
                        break;
                    }
                    np3[i] = moved[nmoved++].ptr;
                }
                if (bad)
                    break;
                if (p->op == SP_SPMV) {
                    cq.x = np3[0];
                    cq.y = np3[2];
                } else if (p->op == SP_SPMM) {
                    cq.B = np3[0];
                    cq.C = np3[2];
                } else {
                    cq.A = np3[0];
                    cq.Bt = np3[1];
                    cq.out = np3[2];
                }
            }
            dev_pair_stats ps;
            if (gpu_cusparse_pair(&cq, best, mode, cand, cand_ud, cand_obs, min_runs,
                                  min_s / nplace, &ps, &pe) != 0)
                break;
            if (!ps.valid)
                continue;
            place_sp[np] = ps.ratio.median_us;
            place_a[np] = ps.a.median_us;
            place_b[np] = ps.b.median_us;
            place_amin[np] = ps.a.min_us;
            place_bmin[np] = ps.b.min_us;
            if (np == 0 || ps.ratio.p10_us < p10)
                p10 = ps.ratio.p10_us;
            if (np == 0 || ps.ratio.p90_us > p90)
                p90 = ps.ratio.p90_us;
            rounds += ps.rounds;
            np++;
        }
        for (int i = 0; i < nmoved; i++)
            dev_free(&moved[i]);
        for (int i = 0; i < nmfmt; i++) {
            fmt_clone_free(mfmt[i]);
            free(mfmt[i]);
        }
        if (pe.code == DEV_EFAULT || dev_poisoned()) {
            *e = pe;
            e->code = WK_EFAULT;
            goto done;
        }
        if (pe.msg[0])
            dt_json_set_str(out, "paired_error", pe.msg);
        if (np > 0) {
            cJSON *pj = dt_json_obj(), *pl = dt_json_arr();
            for (int i = 0; i < np; i++)
                cJSON_AddItemToArray(pl, cJSON_CreateNumber(place_sp[i]));
            dt_json_set_int(pj, "placements", np);
            dt_json_set_take(pj, "placement_speedups", pl);
            dt_json_set_int(pj, "rounds", rounds);
            dt_json_set_num(pj, "candidate_us", median_of(place_a, np));
            dt_json_set_num(pj, "baseline_us", median_of(place_b, np));
            dt_json_set_num(pj, "candidate_min_us", median_of(place_amin, np));
            dt_json_set_num(pj, "baseline_min_us", median_of(place_bmin, np));
            dt_json_set_num(pj, "speedup", median_of(place_sp, np));
            dt_json_set_num(pj, "speedup_p10", p10);
            dt_json_set_num(pj, "speedup_p90", p90);
            dt_json_set_take(out, "paired", pj);
        }
    }
    rc = 0;
done_arr:
    cJSON_Delete(arr);
done:
    free(got);
    free(raw);
    dev_free(&in1);
    dev_free(&in2);
    dev_free(&ob);
    operands_free(&o);
    return rc;
}

int wk_baseline(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = request_begin(w, req, &p, "baseline needs a GPU", e);
    if (m == NULL)
        return -1;
    const char *lay = dt_json_str(req, "layout", "row");
    sp_layout layout = strcmp(lay, "col") == 0 ? SP_COL_MAJOR : SP_ROW_MAJOR;
    double flops = 0, bytes = 0;
    sp_cost(m->a->rows, m->a->cols, m->a->nnz, p.op, p.dtype, p.n, &flops, &bytes);
    const char *method = bytes <= 0.5 * (double)w->dev.l2_bytes ? "graph" : "cold";
    if (wk_baseline_into(m, &p, layout, dt_json_int(req, "min_runs", 20),
                         dt_json_num(req, "min_seconds", 0.05), method,
                         dt_json_bool(req, "fast", 0), NULL, NULL, NULL, NULL, out, e) != 0)
        return -1;
    dt_json_set_num(out, "min_bytes", bytes);
    dt_json_set_num(out, "flops", flops);
    double us = dt_json_num(out, "us", 0);
    if (us > 0) {
        dt_json_set_num(out, "gbps", bytes / (us * 1e-6) / 1e9);
        dt_json_set_num(out, "gflops", flops / (us * 1e-6) / 1e9);
    }
    return 0;
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
    j.norm = xalloc_doubles(2 * (size_t)blocks, e);
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
    wk_matrix *m = request_begin(w, req, &p, NULL, e);
    if (m == NULL)
        return -1;
    const double *av = matrix_rounded(m, p.dtype, e);
    if (av == NULL)
        return -1;
    double t0 = dt_now();
    operands o;
    const char *lay = dt_json_str(req, "layout", "row");
    if (make_operands(m->a, av, &p, strcmp(lay, "col") == 0 ? SP_COL_MAJOR : SP_ROW_MAJOR, 0, 1, &o,
                      e) != 0)
        return -1;
    double norm = 0, sum = 0, maxtol = 0;
    if (summarize(&o, &norm, &sum, &maxtol, e) != 0) {
        operands_free(&o);
        return -1;
    }
    dt_json_set_int(out, "outputs", (int64_t)o.nout);
    dt_json_set_num(out, "norm2", sqrt(norm));
    dt_json_set_num(out, "checksum", sum);
    dt_json_set_num(out, "max_tolerance", maxtol);
    if (o.nout > 0)
        dt_json_set_num(out, "first", o.ref[0]);
    dt_json_set_num(out, "seconds", dt_now() - t0);
    operands_free(&o);
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
    wk_matrix *m = request_begin(w, req, &p, "metrics need a GPU", e);
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
    int prc = instance_prepare(w, m, m->a, &kn, &p, &in, e);
    if (prc != 0) {
        if (prc == 1) {
            e->code = WK_ECOMPILE;
            dt_err_set(e, "the kernel does not compile");
            instance_release(&in, 0);
        }
        wk_kernel_clear(&kn);
        return -1;
    }
    operands o;
    int rc = -1;
    if (make_operands(m->a, in.av, &p, kn.contract.layout, 0, 0, &o, e) != 0)
        goto done_noops;
    if (upload_inputs(&in, &p, &o, e) != 0 || init_output(&in, &p, &o, e) != 0 ||
        dev_sync(e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    double vals[32];
    launch_ud lu = {&in, &kn.contract};
    if (gpu_cupti_collect(names, nnames, enqueue_kernel, &lu, vals, why, sizeof why) != 0) {
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
    operands_free(&o);
done_noops:
    instance_release(&in, 0);
    wk_kernel_clear(&kn);
    return rc;
}
