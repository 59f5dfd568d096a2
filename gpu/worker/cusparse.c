/* cusparse.c -- cuSPARSE loaded at run time (dlopen) as the baseline: SpMV, SpMM and SDDMM
 * through the generic API, timed with the same dev_time harness as candidate kernels. */

/* cusparse.h marks the legacy API's types deprecated and then uses them in its own
 * declarations, which warns on every include in C. We use none of them. */
#define DISABLE_CUSPARSE_DEPRECATED

#include "gpu/worker/baseline.h"

#include <cusparse.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Symbols every libcusparse.so.12 exports. */
#define GPU_CS_FUNCS(X)                                                                          \
    X(cusparseCreate)                                                                            \
    X(cusparseDestroy)                                                                           \
    X(cusparseGetErrorName)                                                                      \
    X(cusparseGetErrorString)                                                                    \
    X(cusparseGetProperty)                                                                       \
    X(cusparseSetStream)                                                                         \
    X(cusparseSetPointerMode)                                                                    \
    X(cusparseCreateCsr)                                                                         \
    X(cusparseCreateCoo)                                                                         \
    X(cusparseDestroySpMat)                                                                      \
    X(cusparseCreateDnVec)                                                                       \
    X(cusparseDestroyDnVec)                                                                      \
    X(cusparseCreateDnMat)                                                                       \
    X(cusparseDestroyDnMat)                                                                      \
    X(cusparseSpMV_bufferSize)                                                                   \
    X(cusparseSpMV)                                                                              \
    X(cusparseSpMM_bufferSize)                                                                   \
    X(cusparseSpMM_preprocess)                                                                   \
    X(cusparseSpMM)                                                                              \
    X(cusparseSDDMM_bufferSize)                                                                  \
    X(cusparseSDDMM_preprocess)                                                                  \
    X(cusparseSDDMM)

/* Symbols later 12.x releases added: without them the algorithm that needs them says so
 * and everything else still works. */
#define GPU_CS_OPTIONAL(X)                                                                       \
    X(cusparseCreateSlicedEll)                                                                   \
    X(cusparseSpMV_preprocess)

#define GPU_CS_STR2(x) #x
#define GPU_CS_STR(x) GPU_CS_STR2(x)

/* cuSPARSE's sliced ELL has no row permutation (sigma 1); 32 rows per slice is a warp. */
#define GPU_CS_SLICE 32

static struct {
    void *lib;
    char path[1024];
    char version[32];
    cusparseHandle_t handle; /* created on first run, kept for the worker's lifetime */
    CUstream stream;         /* the stream the handle is set to */
#define GPU_CS_FIELD(name) __typeof__(name) *name;
    GPU_CS_FUNCS(GPU_CS_FIELD)
    GPU_CS_OPTIONAL(GPU_CS_FIELD)
#undef GPU_CS_FIELD
} S;

#define CS(fn) (S.fn)

/* ---- loading -------------------------------------------------------------- */

int gpu_cusparse_loaded(void)
{
    return S.lib != NULL;
}

const char *gpu_cusparse_path(void)
{
    return S.lib ? S.path : "";
}

const char *gpu_cusparse_version(void)
{
    return S.lib ? S.version : "";
}

/* Try one candidate. Returns 0 when it loaded with every required symbol; otherwise -1
 * with the reason appended to tried. */
static int try_load(const char *path, dt_buf *tried)
{
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        dt_buf_printf(tried, "%s%s", tried->len ? "; " : "", why ? why : path);
        return -1;
    }
#define GPU_CS_RESOLVE(name)                                                                     \
    S.name = (__typeof__(name) *)dlsym(lib, GPU_CS_STR(name));                                   \
    if (S.name == NULL) {                                                                        \
        dt_buf_printf(tried, "%s%s: missing symbol %s", tried->len ? "; " : "", path,            \
                      GPU_CS_STR(name));                                                         \
        dlclose(lib);                                                                            \
        memset(&S, 0, sizeof S);                                                                 \
        return -1;                                                                               \
    }
    GPU_CS_FUNCS(GPU_CS_RESOLVE)
#undef GPU_CS_RESOLVE
#define GPU_CS_RESOLVE_OPT(name) S.name = (__typeof__(name) *)dlsym(lib, GPU_CS_STR(name));
    GPU_CS_OPTIONAL(GPU_CS_RESOLVE_OPT)
#undef GPU_CS_RESOLVE_OPT
    int major = 0, minor = 0, patch = 0;
    CS(cusparseGetProperty)(MAJOR_VERSION, &major);
    CS(cusparseGetProperty)(MINOR_VERSION, &minor);
    CS(cusparseGetProperty)(PATCH_LEVEL, &patch);
    if (major != CUSPARSE_VER_MAJOR) {
        /* Enum values and descriptor semantics are only promised within a major. */
        dt_buf_printf(tried, "%s%s is cuSPARSE %d.%d, ditto was built for %d.x",
                      tried->len ? "; " : "", path, major, minor, CUSPARSE_VER_MAJOR);
        dlclose(lib);
        memset(&S, 0, sizeof S);
        return -1;
    }
    snprintf(S.version, sizeof S.version, "%d.%d.%d", major, minor, patch);
    snprintf(S.path, sizeof S.path, "%s", path);
    S.lib = lib;
    return 0;
}

int gpu_cusparse_load(dt_err *e)
{
    if (S.lib != NULL)
        return 0;
    char home[1024] = "";
    const char *cuda_home = getenv("CUDA_HOME");
    if (cuda_home && *cuda_home)
        snprintf(home, sizeof home, "%s/lib64/libcusparse.so.12", cuda_home);
    const char *cands[] = {
        getenv("DITTO_LIBCUSPARSE"),
        home,
        "/usr/local/cuda/lib64/libcusparse.so.12",
        "libcusparse.so.12",
        "libcusparse.so",
    };
    dt_buf tried = DT_BUF_INIT;
    for (size_t i = 0; i < DT_ARRAY_LEN(cands); i++) {
        if (cands[i] == NULL || cands[i][0] == '\0')
            continue;
        if (try_load(cands[i], &tried) == 0) {
            dt_buf_free(&tried);
            return 0;
        }
    }
    dt_err_set(e, "cuSPARSE not loaded: %s", dt_buf_str(&tried));
    dt_buf_free(&tried);
    return -1;
}

/* ---- errors ---------------------------------------------------------------- */

/* 1 while the worker stream is being captured into a graph: no synchronisation then. */
static int capturing(void)
{
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    return CU(cuStreamIsCapturing)(dev_stream(), &st) == CUDA_SUCCESS &&
           st != CU_STREAM_CAPTURE_STATUS_NONE;
}

/* Check a cuSPARSE status. A failing call can be the first to notice that earlier work
 * faulted (EXECUTION_FAILED): then the fault is what the caller must see, with
 * DEV_EFAULT, because the worker has to exit. Returns 0 or -1. */
static int cs_check(cusparseStatus_t st, const char *call, dt_err *e)
{
    if (st == CUSPARSE_STATUS_SUCCESS)
        return 0;
    if (!capturing()) {
        dt_err fe = {0};
        if (dev_sync(&fe) != 0 && fe.code == DEV_EFAULT) {
            if (e)
                *e = fe;
            return dt_err_prefix(e, "%s", call);
        }
    }
    const char *name = CS(cusparseGetErrorName)(st);
    const char *text = CS(cusparseGetErrorString)(st);
    int oom = st == CUSPARSE_STATUS_ALLOC_FAILED || st == CUSPARSE_STATUS_INSUFFICIENT_RESOURCES;
    if (e)
        e->code = oom ? DEV_ENOMEM : DEV_ECUDA;
    return dt_err_set(e, "%s: %s (%s)", call, name ? name : "cuSPARSE error",
                      text ? text : "no description");
}

/* A failure that is not CUDA's: a bad argument or a combination cuSPARSE does not offer.
 * Returns -1. */
static int cs_refuse(dt_err *e, const char *fmt, ...) DT_PRINTF(2, 3);

static int cs_refuse(dt_err *e, const char *fmt, ...)
{
    char msg[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (e)
        e->code = 1;
    return dt_err_set(e, "%s", msg);
}

/* ---- the algorithms ------------------------------------------------------- */

typedef enum { CS_CSR, CS_COO, CS_SELL } cs_format;

typedef struct cs_alg {
    const char *name;
    sp_op op;
    cs_format format;
    int id;         /* the cusparse*Alg_t value */
    int preprocess; /* has a cusparse*_preprocess that does something */
} cs_alg;

/* The fixed order gpu_cusparse_algs reports. */
static const cs_alg ALGS[] = {
    {"CSR_ALG1", SP_SPMV, CS_CSR, CUSPARSE_SPMV_CSR_ALG1, 1},
    {"CSR_ALG2", SP_SPMV, CS_CSR, CUSPARSE_SPMV_CSR_ALG2, 1},
    {"COO_ALG1", SP_SPMV, CS_COO, CUSPARSE_SPMV_COO_ALG1, 0},
    {"COO_ALG2", SP_SPMV, CS_COO, CUSPARSE_SPMV_COO_ALG2, 0},
    {"SELL_ALG1", SP_SPMV, CS_SELL, CUSPARSE_SPMV_SELL_ALG1, 0},
    /* The cuSPARSE docs: SpMM preprocessing helps CSR_ALG1 and CSR_ALG3 and has no effect
     * on the other algorithms. */
    {"CSR_ALG1", SP_SPMM, CS_CSR, CUSPARSE_SPMM_CSR_ALG1, 1},
    {"CSR_ALG2", SP_SPMM, CS_CSR, CUSPARSE_SPMM_CSR_ALG2, 0},
    {"CSR_ALG3", SP_SPMM, CS_CSR, CUSPARSE_SPMM_CSR_ALG3, 1},
    {"CSR_ALG_DEFAULT", SP_SDDMM, CS_CSR, CUSPARSE_SDDMM_ALG_DEFAULT, 1},
};

static const cs_alg *find_alg(sp_op op, const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(ALGS); i++)
        if (ALGS[i].op == op && dt_streq(ALGS[i].name, name))
            return &ALGS[i];
    return NULL;
}

/* Why alg does not apply to dtype t (from the data-type tables of the cuSPARSE 12.x
 * documentation), or NULL when it does. */
static const char *not_applicable(const cs_alg *a, sp_dtype t)
{
    int half = t == SP_FP16 || t == SP_BF16;
    if (a->op == SP_SPMM && half && a->id != CUSPARSE_SPMM_CSR_ALG3)
        return "cuSPARSE computes mixed-precision CSR SpMM with CSR_ALG3 whatever algorithm is "
               "asked for, so this would time CSR_ALG3 under another name";
    if (a->op == SP_SDDMM && t == SP_BF16)
        return "cuSPARSE SDDMM takes bf16 inputs only for BSR matrices, not CSR";
    return NULL;
}

int gpu_cusparse_algs(sp_op op, sp_dtype t, const char **names, int max)
{
    int n = 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(ALGS) && n < max; i++)
        if (ALGS[i].op == op && not_applicable(&ALGS[i], t) == NULL)
            names[n++] = ALGS[i].name;
    return n;
}

/* ---- one run ---------------------------------------------------------------- */

typedef struct cs_run {
    sp_op op;
    int alg;
    const char *call; /* "cusparseSpMV", for messages */
    cudaDataType vt;  /* storage type of every operand */
    cudaDataType ct;  /* compute type */
    float alpha_f, beta_f;
    double alpha_d, beta_d;
    const void *alpha, *beta; /* host pointers to the scalars in the compute type */
    cusparseSpMatDescr_t sp;  /* SpMV/SpMM: A; SDDMM: the output pattern with out as values */
    cusparseDnVecDescr_t x, y;
    cusparseDnMatDescr_t d1, d2; /* SpMM: B, C; SDDMM: A, Bt */
    dev_buf work;                /* cuSPARSE's workspace */
    dev_buf coo_row;             /* COO row indices */
    dev_buf sell_off, sell_col, sell_val;
    dev_buf saved; /* the output, kept across preprocessing and timing */
    void *buf;
} cs_run;

static void *ptr(CUdeviceptr p)
{
    return (void *)(uintptr_t)p;
}

static cudaDataType value_type(sp_dtype t)
{
    switch (t) {
    case SP_FP64:
        return CUDA_R_64F;
    case SP_FP16:
        return CUDA_R_16F;
    case SP_BF16:
        return CUDA_R_16BF;
    case SP_FP32:
        break;
    }
    return CUDA_R_32F;
}

static cusparseStatus_t cs_buffer_size(const cs_run *c, size_t *bytes)
{
    const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE;
    switch (c->op) {
    case SP_SPMV:
        return CS(cusparseSpMV_bufferSize)(S.handle, N, c->alpha, c->sp, c->x, c->beta, c->y,
                                           c->ct, (cusparseSpMVAlg_t)c->alg, bytes);
    case SP_SPMM:
        return CS(cusparseSpMM_bufferSize)(S.handle, N, N, c->alpha, c->sp, c->d1, c->beta, c->d2,
                                           c->ct, (cusparseSpMMAlg_t)c->alg, bytes);
    case SP_SDDMM:
        return CS(cusparseSDDMM_bufferSize)(S.handle, N, CUSPARSE_OPERATION_TRANSPOSE, c->alpha,
                                            c->d1, c->d2, c->beta, c->sp, c->ct,
                                            (cusparseSDDMMAlg_t)c->alg, bytes);
    }
    return CUSPARSE_STATUS_INVALID_VALUE;
}

/* Only called for the algorithms whose table entry says preprocess (and, for SpMV, when
 * this libcusparse exports cusparseSpMV_preprocess). */
static cusparseStatus_t cs_preprocess(const cs_run *c)
{
    const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE;
    switch (c->op) {
    case SP_SPMV:
        return CS(cusparseSpMV_preprocess)(S.handle, N, c->alpha, c->sp, c->x, c->beta, c->y,
                                           c->ct, (cusparseSpMVAlg_t)c->alg, c->buf);
    case SP_SPMM:
        return CS(cusparseSpMM_preprocess)(S.handle, N, N, c->alpha, c->sp, c->d1, c->beta, c->d2,
                                           c->ct, (cusparseSpMMAlg_t)c->alg, c->buf);
    case SP_SDDMM:
        return CS(cusparseSDDMM_preprocess)(S.handle, N, CUSPARSE_OPERATION_TRANSPOSE, c->alpha,
                                            c->d1, c->d2, c->beta, c->sp, c->ct,
                                            (cusparseSDDMMAlg_t)c->alg, c->buf);
    }
    return CUSPARSE_STATUS_INVALID_VALUE;
}

/* SDDMM's B is our Bt (cols x K, row-major) taken transposed: op(B) = Bt^T is K x cols,
 * which is what C = alpha (A op(B)) o spy(C) + beta C needs, and row-major with
 * opB = TRANSPOSE is the combination the cuSPARSE docs name as the fast one. */
static cusparseStatus_t cs_compute(const cs_run *c)
{
    const cusparseOperation_t N = CUSPARSE_OPERATION_NON_TRANSPOSE;
    switch (c->op) {
    case SP_SPMV:
        return CS(cusparseSpMV)(S.handle, N, c->alpha, c->sp, c->x, c->beta, c->y, c->ct,
                                (cusparseSpMVAlg_t)c->alg, c->buf);
    case SP_SPMM:
        return CS(cusparseSpMM)(S.handle, N, N, c->alpha, c->sp, c->d1, c->beta, c->d2, c->ct,
                                (cusparseSpMMAlg_t)c->alg, c->buf);
    case SP_SDDMM:
        return CS(cusparseSDDMM)(S.handle, N, CUSPARSE_OPERATION_TRANSPOSE, c->alpha, c->d1, c->d2,
                                 c->beta, c->sp, c->ct, (cusparseSDDMMAlg_t)c->alg, c->buf);
    }
    return CUSPARSE_STATUS_INVALID_VALUE;
}

/* The dev_time callback: one compute call on the stream dev_time times. */
static int cs_enqueue(void *ud, CUstream s, dt_err *e)
{
    const cs_run *c = ud;
    if (s != S.stream) {
        if (cs_check(CS(cusparseSetStream)(S.handle, s), "cusparseSetStream", e) != 0)
            return -1;
        S.stream = s;
    }
    return cs_check(cs_compute(c), c->call, e);
}

static void cs_run_free(cs_run *c)
{
    /* Descriptors are host objects: destroying them is safe even after a fault. */
    if (c->sp)
        CS(cusparseDestroySpMat)(c->sp);
    if (c->x)
        CS(cusparseDestroyDnVec)(c->x);
    if (c->y)
        CS(cusparseDestroyDnVec)(c->y);
    if (c->d1)
        CS(cusparseDestroyDnMat)(c->d1);
    if (c->d2)
        CS(cusparseDestroyDnMat)(c->d2);
    dev_free(&c->work);
    dev_free(&c->coo_row);
    dev_free(&c->sell_off);
    dev_free(&c->sell_col);
    dev_free(&c->sell_val);
    dev_free(&c->saved);
}

static int cs_handle(dt_err *e)
{
    if (S.handle != NULL)
        return 0;
    cusparseHandle_t h = NULL;
    if (cs_check(CS(cusparseCreate)(&h), "cusparseCreate", e) != 0)
        return -1;
    /* alpha and beta live on the host; every call goes on the worker stream. */
    if (cs_check(CS(cusparseSetPointerMode)(h, CUSPARSE_POINTER_MODE_HOST),
                 "cusparseSetPointerMode", e) != 0 ||
        cs_check(CS(cusparseSetStream)(h, dev_stream()), "cusparseSetStream", e) != 0) {
        CS(cusparseDestroy)(h);
        return -1;
    }
    S.handle = h;
    S.stream = dev_stream();
    return 0;
}

static int64_t fmt_var(const dev_fmt *f, const char *name)
{
    int64_t v = -1;
    gpu_vars_get(&f->vars, name, &v);
    return v;
}

/* COO: the CSR's col and val arrays with a row index per nonzero built on the host (rows
 * are sorted, as cuSPARSE's COO wants). */
static int setup_coo(const gpu_cs_problem *p, cs_run *c, int64_t rows, int64_t cols,
                     int64_t nnz, dev_buf col, dev_buf val, dt_err *e)
{
    const sp_csr *h = p->host;
    int32_t *ri = malloc((size_t)(nnz > 0 ? nnz : 1) * sizeof *ri);
    if (ri == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "out of host memory building COO row indices");
    }
    for (int32_t i = 0; i < h->rows; i++)
        for (int64_t k = h->rowptr[i]; k < h->rowptr[i + 1]; k++)
            ri[k] = i;
    int rc = dev_upload(&c->coo_row, ri, (size_t)nnz * sizeof *ri, e);
    free(ri);
    if (rc != 0)
        return -1;
    return cs_check(CS(cusparseCreateCoo)(&c->sp, rows, cols, nnz, ptr(c->coo_row.ptr),
                                          ptr(col.ptr), ptr(val.ptr), CUSPARSE_INDEX_32I,
                                          CUSPARSE_INDEX_BASE_ZERO, c->vt),
                    "cusparseCreateCoo", e);
}

/* Sliced ELL from sp_csr_to_sell(host, 32, sigma 1). cuSPARSE reads slice s (rows
 * s*C .. s*C+C-1) from offset sellSliceOffsets[s] with entry k of the slice's row r at
 * offset + k*C + r (column-major within the slice, every slice C x its width, the last
 * one too, padding column -1 and value 0), and sellValuesSize counts every stored entry,
 * padding included. That is sp_sell's layout when sigma is 1; the checks below make sure
 * the conversion really produced it rather than trusting it. */
static int setup_sell(const gpu_cs_problem *p, cs_run *c, sp_dtype t, dt_err *e)
{
    if (CS(cusparseCreateSlicedEll) == NULL)
        return cs_refuse(e, "%s (cuSPARSE %s) has no cusparseCreateSlicedEll: sliced ELL needs a "
                            "newer cuSPARSE 12.x",
                         S.path, S.version);
    const sp_csr *h = p->host;
    sp_sell *m = sp_csr_to_sell(h, GPU_CS_SLICE, 1, e);
    if (m == NULL)
        return -1;
    int rc = -1;
    int32_t *off = NULL;
    void *vals = NULL;
    const int64_t C = GPU_CS_SLICE;
    if (m->C != GPU_CS_SLICE || m->nslices != (h->rows + C - 1) / C ||
        m->stored > INT32_MAX || m->slice_ptr[0] != 0 || m->slice_ptr[m->nslices] != m->stored) {
        dt_err_set(e, "internal: sp_csr_to_sell gave %d slices of %d rows holding %lld entries, "
                      "not the sliced ELL cuSPARSE reads",
                   m->nslices, m->C, (long long)m->stored);
        goto out;
    }
    for (int32_t i = 0; i < h->rows; i++) {
        if (m->perm[i] != i) {
            dt_err_set(e, "internal: sp_csr_to_sell with sigma 1 moved row %d to position %d, "
                          "but cuSPARSE's sliced ELL keeps rows in order",
                       m->perm[i], i);
            goto out;
        }
    }
    off = malloc(((size_t)m->nslices + 1) * sizeof *off);
    vals = malloc((size_t)(m->stored > 0 ? m->stored : 1) * (size_t)sp_dtype_size(t));
    if (off == NULL || vals == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        dt_err_set(e, "out of host memory building the sliced ELL arrays");
        goto out;
    }
    for (int32_t s = 0; s <= m->nslices; s++) {
        if (s < m->nslices && m->slice_ptr[s + 1] - m->slice_ptr[s] != C * m->slice_len[s]) {
            dt_err_set(e, "internal: slice %d holds %lld entries, not %lld rows x width %d", s,
                       (long long)(m->slice_ptr[s + 1] - m->slice_ptr[s]), (long long)C,
                       m->slice_len[s]);
            goto out;
        }
        off[s] = (int32_t)m->slice_ptr[s];
    }
    sp_to_dtype(m->val, vals, (size_t)m->stored, t);
    if (dev_upload(&c->sell_off, off, ((size_t)m->nslices + 1) * sizeof *off, e) != 0 ||
        dev_upload(&c->sell_col, m->col, (size_t)m->stored * sizeof *m->col, e) != 0 ||
        dev_upload(&c->sell_val, vals, (size_t)m->stored * (size_t)sp_dtype_size(t), e) != 0)
        goto out;
    rc = cs_check(CS(cusparseCreateSlicedEll)(&c->sp, h->rows, h->cols, m->nnz, m->stored, C,
                                              ptr(c->sell_off.ptr), ptr(c->sell_col.ptr),
                                              ptr(c->sell_val.ptr), CUSPARSE_INDEX_32I,
                                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, c->vt),
                  "cusparseCreateSlicedEll", e);
out:
    free(off);
    free(vals);
    sp_sell_free(m);
    return rc;
}

/* Descriptors for p with alg a; sets c->sp, c->x/y or c->d1/d2. */
static int setup(const gpu_cs_problem *p, const cs_alg *a, cs_run *c, dt_err *e)
{
    const dev_fmt *f = p->csr;
    dev_buf rowptr, col, val;
    if (dev_fmt_find(f, "rowptr", &rowptr) != 0 || dev_fmt_find(f, "col", &col) != 0 ||
        dev_fmt_find(f, "val", &val) != 0)
        return cs_refuse(e, "the device matrix %s is not in csr format (rowptr, col, val)",
                         f->key);
    int64_t rows = fmt_var(f, "rows"), cols = fmt_var(f, "cols"), nnz = fmt_var(f, "nnz");
    if (rows < 0 || cols < 0 || nnz < 0)
        return cs_refuse(e, "the device matrix %s has no sizes", f->key);
    const sp_csr *h = p->host;
    if (a->format != CS_CSR && p->op == SP_SPMV) {
        if (h == NULL)
            return cs_refuse(e, "%s needs the host matrix for its %s conversion", a->name,
                             a->format == CS_COO ? "COO" : "sliced ELL");
        if (h->rows != rows || h->cols != cols || h->nnz != nnz)
            return cs_refuse(e, "the host matrix (%d x %d, %lld nonzeros) is not the device one "
                                "(%lld x %lld, %lld)",
                             h->rows, h->cols, (long long)h->nnz, (long long)rows,
                             (long long)cols, (long long)nnz);
    }
    if (p->op == SP_SPMV) {
        int st;
        if (a->format == CS_COO)
            st = setup_coo(p, c, rows, cols, nnz, col, val, e);
        else if (a->format == CS_SELL)
            st = setup_sell(p, c, p->dtype, e);
        else
            st = cs_check(CS(cusparseCreateCsr)(&c->sp, rows, cols, nnz, ptr(rowptr.ptr),
                                                ptr(col.ptr), ptr(val.ptr), CUSPARSE_INDEX_32I,
                                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                                c->vt),
                          "cusparseCreateCsr", e);
        if (st != 0)
            return -1;
        if (cs_check(CS(cusparseCreateDnVec)(&c->x, cols, ptr(p->x), c->vt), "cusparseCreateDnVec",
                     e) != 0 ||
            cs_check(CS(cusparseCreateDnVec)(&c->y, rows, ptr(p->y), c->vt), "cusparseCreateDnVec",
                     e) != 0)
            return -1;
        return 0;
    }
    int64_t n = p->n;
    if (p->op == SP_SPMM) {
        /* B is cols x n, C rows x n; row-major: ld = n, column-major: ld = rows of that
         * matrix (ld must be positive even for an empty matrix). */
        int row_major = p->layout == SP_ROW_MAJOR;
        cusparseOrder_t order = row_major ? CUSPARSE_ORDER_ROW : CUSPARSE_ORDER_COL;
        int64_t ldb = row_major ? n : cols, ldc = row_major ? n : rows;
        if (cs_check(CS(cusparseCreateCsr)(&c->sp, rows, cols, nnz, ptr(rowptr.ptr), ptr(col.ptr),
                                           ptr(val.ptr), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                           CUSPARSE_INDEX_BASE_ZERO, c->vt),
                     "cusparseCreateCsr", e) != 0 ||
            cs_check(CS(cusparseCreateDnMat)(&c->d1, cols, n, ldb > 0 ? ldb : 1, ptr(p->B), c->vt,
                                             order),
                     "cusparseCreateDnMat", e) != 0 ||
            cs_check(CS(cusparseCreateDnMat)(&c->d2, rows, n, ldc > 0 ? ldc : 1, ptr(p->C), c->vt,
                                             order),
                     "cusparseCreateDnMat", e) != 0)
            return -1;
        return 0;
    }
    /* SDDMM: A is rows x K row-major, Bt cols x K row-major (used transposed, see
     * cs_compute), and the output a CSR sharing the matrix's rowptr and col with out as
     * its values. */
    if (cs_check(CS(cusparseCreateDnMat)(&c->d1, rows, n, n, ptr(p->A), c->vt, CUSPARSE_ORDER_ROW),
                 "cusparseCreateDnMat", e) != 0 ||
        cs_check(CS(cusparseCreateDnMat)(&c->d2, cols, n, n, ptr(p->Bt), c->vt,
                                         CUSPARSE_ORDER_ROW),
                 "cusparseCreateDnMat", e) != 0 ||
        cs_check(CS(cusparseCreateCsr)(&c->sp, rows, cols, nnz, ptr(rowptr.ptr), ptr(col.ptr),
                                       ptr(p->out), CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I,
                                       CUSPARSE_INDEX_BASE_ZERO, c->vt),
                 "cusparseCreateCsr", e) != 0)
        return -1;
    return 0;
}

/* Problems with the arguments themselves, before anything is allocated. */
static int check_problem(const gpu_cs_problem *p, dt_err *e)
{
    if (p->csr == NULL)
        return cs_refuse(e, "no device matrix");
    switch (p->op) {
    case SP_SPMV:
        if (p->x == 0 || p->y == 0)
            return cs_refuse(e, "SpMV needs x and y");
        break;
    case SP_SPMM:
        if (p->B == 0 || p->C == 0 || p->n < 1)
            return cs_refuse(e, "SpMM needs B, C and n >= 1");
        break;
    case SP_SDDMM:
        if (p->A == 0 || p->Bt == 0 || p->out == 0 || p->n < 1)
            return cs_refuse(e, "SDDMM needs A, Bt, out and K >= 1");
        break;
    }
    return 0;
}

static int copy_dtod(CUdeviceptr dst, CUdeviceptr src, size_t bytes, dt_err *e)
{
    if (bytes == 0)
        return 0;
    if (dev_check(CU(cuMemcpyDtoDAsync)(dst, src, bytes, dev_stream()), "copying the output",
                  e) != 0)
        return -1;
    return dev_sync(e);
}

/* The cuSPARSE side's observer: the output put back before every sample
 * and, in graph mode, before every captured call -- the treatment the
 * candidate's side gets (its refill re-seeds its output), so that both
 * sides are timed by one method (dev_observer). */
typedef struct cs_obs {
    CUdeviceptr dst, src;
    size_t bytes;
} cs_obs;

static int cs_refill(void *ud, CUstream s, dt_err *e)
{
    const cs_obs *o = ud;
    if (o->bytes == 0)
        return 0;
    return dev_check(CU(cuMemcpyDtoDAsync)(o->dst, o->src, o->bytes, s), "re-seeding the output",
                     e);
}

static int cs_prep(void *ud, CUstream s, unsigned sample, dt_err *e)
{
    (void)sample;
    return cs_refill(ud, s, e);
}

/* Everything before the first compute call: checks, handle, descriptors,
 * conversions, workspace, the output saved, preprocessing (timed into r).
 * *outp / *out_bytes: the output the compute call writes. On failure c
 * holds what was made (cs_run_free it) and le says why. */
static int cs_open(const gpu_cs_problem *p, const char *alg, cs_run *c, gpu_cs_result *r,
                   CUdeviceptr *outp_, size_t *out_bytes_, dt_err *le)
{
    int rc = -1;
    const cs_alg *a = find_alg(p->op, alg);
    if (a == NULL) {
        cs_refuse(le, "unknown cuSPARSE algorithm '%s' for %s", alg ? alg : "(null)",
                  sp_op_name(p->op));
        goto out;
    }
    const char *na = not_applicable(a, p->dtype);
    if (na != NULL) {
        cs_refuse(le, "%s does not apply to %s %s: %s", a->name, sp_dtype_name(p->dtype),
                  sp_op_name(p->op), na);
        goto out;
    }
    if (check_problem(p, le) != 0 || gpu_cusparse_load(le) != 0)
        goto out;
    if (!dev_ready()) {
        le->code = DEV_ENODEV;
        dt_err_set(le, "no device");
        goto out;
    }
    if (dev_poisoned()) {
        le->code = DEV_EFAULT;
        dt_err_set(le, "the CUDA context is unusable after an earlier fault");
        goto out;
    }
    if (cs_handle(le) != 0)
        goto out;
    if (S.stream != dev_stream()) {
        if (cs_check(CS(cusparseSetStream)(S.handle, dev_stream()), "cusparseSetStream", le) != 0)
            goto out;
        S.stream = dev_stream();
    }

    c->op = p->op;
    c->alg = a->id;
    c->call = p->op == SP_SPMV   ? "cusparseSpMV"
             : p->op == SP_SPMM ? "cusparseSpMM"
                                : "cusparseSDDMM";
    c->vt = value_type(p->dtype);
    /* fp16 and bf16 inputs always compute in fp32 (cuSPARSE's mixed precision); the
     * scalars are of the compute type. */
    if (p->dtype == SP_FP64) {
        c->ct = CUDA_R_64F;
        c->alpha_d = p->alpha;
        c->beta_d = p->beta;
        c->alpha = &c->alpha_d;
        c->beta = &c->beta_d;
    } else {
        c->ct = CUDA_R_32F;
        c->alpha_f = (float)p->alpha;
        c->beta_f = (float)p->beta;
        c->alpha = &c->alpha_f;
        c->beta = &c->beta_f;
    }

    /* Setup: conversions, uploads, descriptors and the workspace. */
    double t0 = dt_now();
    if (setup(p, a, c, le) != 0)
        goto out;
    size_t bytes = 0;
    if (cs_check(cs_buffer_size(c, &bytes), p->op == SP_SPMV   ? "cusparseSpMV_bufferSize"
                                              : p->op == SP_SPMM ? "cusparseSpMM_bufferSize"
                                                                 : "cusparseSDDMM_bufferSize",
                 le) != 0 ||
        dev_alloc(&c->work, bytes, le) != 0)
        goto out;
    c->buf = ptr(c->work.ptr);
    r->buffer_bytes = bytes;
    r->setup_us = (dt_now() - t0) * 1e6;

    /* The output as the caller gave it (beta != 0 reads it), so that preprocessing cannot
     * change what the one verified run starts from. */
    int64_t rows = fmt_var(p->csr, "rows"), nnz = fmt_var(p->csr, "nnz");
    size_t esz = (size_t)sp_dtype_size(p->dtype);
    CUdeviceptr outp = p->op == SP_SPMV ? p->y : p->op == SP_SPMM ? p->C : p->out;
    size_t out_bytes = p->op == SP_SPMV   ? (size_t)rows * esz
                       : p->op == SP_SPMM ? (size_t)rows * (size_t)p->n * esz
                                          : (size_t)nnz * esz;
    if (dev_alloc(&c->saved, out_bytes, le) != 0 ||
        copy_dtod(c->saved.ptr, outp, out_bytes, le) != 0)
        goto out;

    int has_pre = a->preprocess && (p->op != SP_SPMV || CS(cusparseSpMV_preprocess) != NULL);
    if (has_pre) {
        if (dev_sync(le) != 0)
            goto out;
        double t1 = dt_now();
        if (cs_check(cs_preprocess(c), p->op == SP_SPMV   ? "cusparseSpMV_preprocess"
                                        : p->op == SP_SPMM ? "cusparseSpMM_preprocess"
                                                           : "cusparseSDDMM_preprocess",
                     le) != 0 ||
            dev_sync(le) != 0)
            goto out;
        r->preprocess_us = (dt_now() - t1) * 1e6;
        if (copy_dtod(outp, c->saved.ptr, out_bytes, le) != 0)
            goto out;
    }
    *outp_ = outp;
    *out_bytes_ = out_bytes;
    rc = 0;
out:
    return rc;
}

int gpu_cusparse_run(const gpu_cs_problem *p, const char *alg, unsigned modes, int min_runs,
                     double min_seconds, gpu_cs_result *r, dt_err *e)
{
    memset(r, 0, sizeof *r);
    snprintf(r->alg, sizeof r->alg, "%s", alg ? alg : "");
    dt_err le = {0};
    cs_run c;
    memset(&c, 0, sizeof c);
    int rc = -1;
    CUdeviceptr outp = 0;
    size_t out_bytes = 0;
    if (cs_open(p, alg, &c, r, &outp, &out_bytes, &le) != 0)
        goto out;

    /* The one run whose output the caller verifies; timing runs overwrite (or, with
     * beta != 0, accumulate into) the output, so it is put back afterwards. */
    if (cs_enqueue(&c, dev_stream(), &le) != 0 || dev_sync(&le) != 0 ||
        copy_dtod(c.saved.ptr, outp, out_bytes, &le) != 0)
        goto out;

    /* At least min_runs and min_seconds, as for candidates; the wall-time cap only stops
     * a slow algorithm from holding the worker far longer than asked. */
    double max_seconds = 20.0 * min_seconds > 2.0 ? 20.0 * min_seconds : 2.0;
    for (int m = DEV_TIME_COLD; m <= DEV_TIME_GRAPH; m++) {
        if (!(modes & (1u << m)))
            continue;
        dev_stats *st = m == DEV_TIME_COLD ? &r->cold : m == DEV_TIME_WARM ? &r->warm : &r->graph;
        dt_err te = {0};
        cs_obs co = {outp, c.saved.ptr, out_bytes};
        dev_observer ob = {cs_prep, cs_refill, NULL, &co};
        if (dev_time_obs(cs_enqueue, &c, &ob, (dev_time_mode)m, min_runs, min_seconds,
                         max_seconds, st, &te) == 0)
            continue;
        if (m == DEV_TIME_GRAPH && te.code != DEV_EFAULT && !dev_poisoned()) {
            /* cuSPARSE may do things a stream capture refuses (allocations,
             * synchronisation): graph timing is then unavailable, not the whole run. */
            memset(st, 0, sizeof *st);
            snprintf(r->note, sizeof r->note, "graph timing unavailable: %s", te.msg);
            continue;
        }
        le = te;
        goto out;
    }
    if (copy_dtod(outp, c.saved.ptr, out_bytes, &le) != 0)
        goto out;
    r->ok = 1;
    rc = 0;
out:
    cs_run_free(&c);
    if (rc != 0) {
        snprintf(r->error, sizeof r->error, "%s", le.msg);
        if (e)
            *e = le;
    }
    return rc;
}

int gpu_cusparse_pair(const gpu_cs_problem *p, const char *alg, dev_time_mode mode,
                      dev_enqueue_fn cand, void *cand_ud, const dev_observer *cand_obs,
                      int min_rounds, double min_seconds, dev_pair_stats *ps, dt_err *e)
{
    memset(ps, 0, sizeof *ps);
    gpu_cs_result r;
    memset(&r, 0, sizeof r);
    dt_err le = {0};
    cs_run c;
    memset(&c, 0, sizeof c);
    CUdeviceptr outp = 0;
    size_t out_bytes = 0;
    int rc = -1;
    double max_seconds = 40.0 * min_seconds > 4.0 ? 40.0 * min_seconds : 4.0;
    cs_obs co = {0, 0, 0};
    dev_observer ob = {cs_prep, cs_refill, NULL, &co};
    if (cs_open(p, alg, &c, &r, &outp, &out_bytes, &le) != 0)
        goto out;
    co = (cs_obs){outp, c.saved.ptr, out_bytes};
    if (dev_time_pair_obs(cand, cand_ud, cand_obs, cs_enqueue, &c, &ob, mode, min_rounds,
                          min_seconds, max_seconds, ps, &le) != 0 ||
        copy_dtod(outp, c.saved.ptr, out_bytes, &le) != 0)
        goto out;
    rc = 0;
out:
    cs_run_free(&c);
    if (rc != 0 && e)
        *e = le;
    return rc;
}
