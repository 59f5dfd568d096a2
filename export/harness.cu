/* harness.cu -- the fixed parts of the harness.cu that `ditto export` writes: CUDA C++ host
 * code, compiled by nvcc in the exported folder (never by ditto's build), that reads a Matrix
 * Market file, checks the exported kernel against an fp64 reference with ditto's tolerance and
 * times it next to cuSPARSE with ditto's method. Shipped as data like kernels/ (found through
 * DITTO_SHARE or share/ditto/export/, installed by `make install` and `make bundle`).
 *
 * export/export.c writes what follows the //@ditto-export:head line: the session's settings
 * (#define DX_...) go before it, the #include "sparse/tolerance.h" is replaced by that file
 * (the worker's one definition of the tolerance), and the launch contract, as C, goes where
 * the //@ditto-export:contract line is. This comment and the marker lines are not written. */
//@ditto-export:head
/* ---- the harness: types and helpers --------------------------------------------------- */
#include <cuda_runtime.h>
#include <cusparse.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sparse/tolerance.h"

/* The unit roundoffs and floor of ditto's tolerance (sparse/tolerance.h): every type but fp64
 * accumulates in fp32. */
#if defined(DITTO_DTYPE_FP64)
#define DX_DTYPE "fp64"
#define DX_VT CUDA_R_64F
#define DX_CT CUDA_R_64F
#define DX_U_ACC SP_TOL_U_FP64
#define DX_U_OUT SP_TOL_U_FP64
#define DX_TINY SP_TOL_TINY
#define DX_HALF 0
#elif defined(DITTO_DTYPE_FP16)
#define DX_DTYPE "fp16"
#define DX_VT CUDA_R_16F
#define DX_CT CUDA_R_32F
#define DX_U_ACC SP_TOL_U_FP32
#define DX_U_OUT SP_TOL_U_FP16
#define DX_TINY SP_TOL_TINY_HALF
#define DX_HALF 1
#elif defined(DITTO_DTYPE_BF16)
#define DX_DTYPE "bf16"
#define DX_VT CUDA_R_16BF
#define DX_CT CUDA_R_32F
#define DX_U_ACC SP_TOL_U_FP32
#define DX_U_OUT SP_TOL_U_BF16
#define DX_TINY SP_TOL_TINY_HALF
#define DX_HALF 1
#else
#define DX_DTYPE "fp32"
#define DX_VT CUDA_R_32F
#define DX_CT CUDA_R_32F
#define DX_U_ACC SP_TOL_U_FP32
#define DX_U_OUT SP_TOL_U_FP32
#define DX_TINY SP_TOL_TINY
#define DX_HALF 0
#endif

/* A CUDA runtime error ends the run (exit 3): after a fault the context is unusable. */
#define DX_CUDA(call)                                                                           \
    do {                                                                                        \
        cudaError_t dx_e_ = (call);                                                             \
        if (dx_e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "harness: %s: %s (%s line %d)\n", #call, cudaGetErrorString(dx_e_), \
                    __FILE__, __LINE__);                                                        \
            exit(3);                                                                            \
        }                                                                                       \
    } while (0)

static void *dx_alloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL) {
        fprintf(stderr, "harness: out of host memory (%zu bytes)\n", n);
        exit(3);
    }
    return p;
}

static T dx_to_T(double v)
{
#if defined(DITTO_DTYPE_FP16)
    return __float2half_rn((float)v);
#elif defined(DITTO_DTYPE_BF16)
    return __float2bfloat16_rn((float)v);
#else
    return (T)v;
#endif
}

static double dx_from_T(T v)
{
#if defined(DITTO_DTYPE_FP16)
    return (double)__half2float(v);
#elif defined(DITTO_DTYPE_BF16)
    return (double)__bfloat162float(v);
#else
    return (double)v;
#endif
}

/* The NaN patterns ditto poisons outputs with, so an output never written is told apart
 * from one computed as NaN. */
static void dx_poison_bits(unsigned char *out)
{
    uint64_t bits = sizeof(T) == 8 ? 0x7ff8deaddeaddeadULL
                    : sizeof(T) == 4 ? 0x7fc0deadULL
#if defined(DITTO_DTYPE_BF16)
                                     : 0x7fdaULL;
#else
                                     : 0x7e5aULL;
#endif
    memcpy(out, &bits, sizeof(T)); /* little-endian: the low bytes hold the pattern */
}

/* splitmix64: inputs are reproducible from --seed. */
typedef struct dx_rng {
    uint64_t s;
} dx_rng;

static uint64_t dx_next(dx_rng *g)
{
    uint64_t z = (g->s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Never zero: magnitudes in [0.5, 1.5) with a random sign, as ditto's inputs. */
static double dx_signed(dx_rng *g)
{
    double m = 0.5 + (double)(dx_next(g) >> 11) * (1.0 / 9007199254740992.0);
    return (dx_next(g) & 1) ? m : -m;
}

static double dx_round(double v)
{
    return dx_from_T(dx_to_T(v));
}

/* Any pointer parameter binds to a device buffer whatever its declared type (float4 *,
 * const int2 *), as the worker's driver-API launch passes untyped addresses. */
struct dx_ptr {
    void *p;
    template <class DxT> operator DxT *() const
    {
        return (DxT *)p;
    }
};

static dx_ptr dx_p(void *p)
{
    dx_ptr r;
    r.p = p;
    return r;
}

/* The variables of the contract's expressions, and what they evaluate to. */
typedef struct dx_vars {
    long long rows, cols, nnz, n, k, max_row, sms;
} dx_vars;

typedef struct dx_dims {
    long long grid[3], block[3], smem, scratch;
} dx_dims;

/* Every parameter of the vocabulary a CSR kernel can take; the generated launch passes
 * those its contract lists, in order. */
typedef struct dx_args {
    int rows, cols, nnz, n, k, max_row;
    void *rowptr, *col, *val, *coo_row;
    void *x, *y, *B, *C, *A, *Bt, *out, *bias, *scratch;
    void *fmt[DX_FMT_N > 0 ? DX_FMT_N : 1]; /* the format's arrays, as format/ has them */
    double alpha, beta;
} dx_args;

/* The functions of the contract's expression language (gpu/contract.h); not static, so that
 * a contract that uses none of them compiles without a warning. */
inline long long dx_cdiv(long long a, long long b)
{
    return b == 0 ? 0 : (a + b - 1) / b;
}

inline long long dx_min(long long a, long long b)
{
    return a < b ? a : b;
}

inline long long dx_max(long long a, long long b)
{
    return a > b ? a : b;
}

//@ditto-export:contract

/* ---- Matrix Market --------------------------------------------------------------------- */

typedef struct dx_csr {
    int rows, cols, nnz, max_row;
    int *rowptr, *col;
    double *val;
    int pattern;
} dx_csr;

typedef struct dx_entry {
    int c;
    double v;
} dx_entry;

/* FNV-1a over the matrix's sizes, row offsets, columns and values (their bits), as ditto
 * export sums the matrix it built format/ from (DX_FMT_SUM). */
static unsigned long long dx_csr_sum(const dx_csr *a)
{
    unsigned long long h = 0xcbf29ce484222325ULL;
#define DX_MIX(w) (h = (h ^ (unsigned long long)(w)) * 0x100000001b3ULL)
    DX_MIX((long long)a->rows);
    DX_MIX((long long)a->cols);
    DX_MIX((long long)a->nnz);
    for (int r = 0; r <= a->rows; r++)
        DX_MIX((long long)a->rowptr[r]);
    for (int t = 0; t < a->nnz; t++) {
        unsigned long long bits;
        memcpy(&bits, &a->val[t], sizeof bits);
        DX_MIX((unsigned)a->col[t]);
        DX_MIX(bits);
    }
#undef DX_MIX
    return h;
}

static int dx_cmp_entry(const void *a, const void *b)
{
    int x = ((const dx_entry *)a)->c, y = ((const dx_entry *)b)->c;
    return (x > y) - (x < y);
}

static void dx_lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
}

static int dx_mtx_fail(const char *path, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "harness: %s: ", path);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

/* Coordinate real, integer or pattern; general, symmetric or skew-symmetric (the other
 * triangle mirrored). Rows sorted by column, duplicates summed, as ditto reads them. A
 * pattern gets seeded random values in +-[0.5, 1.5), as ditto's worker gives it. */
static int dx_read_mtx(const char *path, unsigned long long seed, dx_csr *a)
{
    memset(a, 0, sizeof *a);
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "harness: %s: %s\n", path, strerror(errno));
        return -1;
    }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = (char *)dx_alloc((size_t)(size > 0 ? size : 0) + 1);
    size_t got = size > 0 ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    text[got] = '\0';
    char head[256], obj[32] = "", fmt[32] = "", field[32] = "", sym[32] = "";
    snprintf(head, sizeof head, "%.*s", (int)strcspn(text, "\n"), text);
    dx_lower(head);
    if (sscanf(head, "%%%%matrixmarket %31s %31s %31s %31s", obj, fmt, field, sym) != 4) {
        free(text);
        return dx_mtx_fail(path, "not a Matrix Market file (no %%%%MatrixMarket header line)");
    }
    int pattern = strcmp(field, "pattern") == 0;
    int general = strcmp(sym, "general") == 0, skew = strcmp(sym, "skew-symmetric") == 0;
    if (strcmp(obj, "matrix") != 0 || strcmp(fmt, "coordinate") != 0 ||
        !(pattern || strcmp(field, "real") == 0 || strcmp(field, "integer") == 0) ||
        !(general || skew || strcmp(sym, "symmetric") == 0)) {
        fprintf(stderr,
                "harness: %s: '%s %s %s %s' is not supported (coordinate real, integer or pattern; "
                "general, symmetric or skew-symmetric)\n",
                path, obj, fmt, field, sym);
        free(text);
        return -1;
    }
    /* Past the header and the comment lines to the size line. */
    char *p = strchr(text, '\n');
    while (p != NULL && (p[1] == '%' || p[1] == '\n' || p[1] == '\r'))
        p = strchr(p + 1, '\n');
    char *end = NULL;
    long long rows = p ? strtoll(p, &end, 10) : -1;
    long long cols = end ? strtoll(end, &end, 10) : -1;
    long long nz = end ? strtoll(end, &end, 10) : -1;
    if (p == NULL || rows < 0 || cols < 0 || nz < 0 || rows > INT_MAX - 1 || cols > INT_MAX) {
        free(text);
        return dx_mtx_fail(path, "no valid size line (rows, columns, entries; sizes must fit an int)");
    }
    p = end;
    long long cap = general ? nz : 2 * nz;
    int *ri = (int *)dx_alloc((size_t)cap * sizeof(int));
    int *ci = (int *)dx_alloc((size_t)cap * sizeof(int));
    double *vv = (double *)dx_alloc((size_t)cap * sizeof(double));
    long long m = 0;
    int rc = 0;
    for (long long e = 0; e < nz && rc == 0; e++) {
        long long i = strtoll(p, &end, 10), j = 0;
        if (end != p) {
            p = end;
            j = strtoll(p, &end, 10);
        }
        if (end == p) {
            rc = dx_mtx_fail(path, "entry %lld of %lld is missing or malformed", e + 1, nz);
            break;
        }
        p = end;
        double v = 1.0;
        if (!pattern) {
            v = strtod(p, &end);
            if (end == p || !isfinite(v)) {
                rc = dx_mtx_fail(path, "entry %lld of %lld has no finite value", e + 1, nz);
                break;
            }
            p = end;
        }
        if (i < 1 || i > rows || j < 1 || j > cols) {
            rc = dx_mtx_fail(path, "entry (%lld, %lld) is outside the matrix", i, j);
            break;
        }
        if (skew && i == j) {
            rc = dx_mtx_fail(path, "diagonal entry (%lld, %lld) in a skew-symmetric matrix", i, j);
            break;
        }
        ri[m] = (int)(i - 1);
        ci[m] = (int)(j - 1);
        vv[m++] = v;
        if (!general && i != j) {
            ri[m] = (int)(j - 1);
            ci[m] = (int)(i - 1);
            vv[m++] = skew ? -v : v;
        }
    }
    free(text);
    if (rc != 0) {
        free(ri);
        free(ci);
        free(vv);
        return -1;
    }
    /* CSR: counting sort by row, each row sorted by column, duplicates summed. */
    long long *start = (long long *)dx_alloc(((size_t)rows + 1) * sizeof(long long));
    memset(start, 0, ((size_t)rows + 1) * sizeof(long long));
    for (long long t = 0; t < m; t++)
        start[ri[t] + 1]++;
    for (long long r = 0; r < rows; r++)
        start[r + 1] += start[r];
    dx_entry *ent = (dx_entry *)dx_alloc((size_t)m * sizeof(dx_entry));
    long long *next = (long long *)dx_alloc(((size_t)rows + 1) * sizeof(long long));
    memcpy(next, start, ((size_t)rows + 1) * sizeof(long long));
    for (long long t = 0; t < m; t++) {
        long long d = next[ri[t]]++;
        ent[d].c = ci[t];
        ent[d].v = vv[t];
    }
    free(next);
    free(ri);
    free(ci);
    free(vv);
    long long out = 0;
    a->rowptr = (int *)dx_alloc(((size_t)rows + 1) * sizeof(int));
    for (long long r = 0; r < rows; r++) {
        long long b = start[r], e = start[r + 1];
        int sorted = 1;
        for (long long t = b + 1; t < e && sorted; t++)
            sorted = ent[t - 1].c < ent[t].c;
        if (!sorted)
            qsort(ent + b, (size_t)(e - b), sizeof *ent, dx_cmp_entry);
        if (out > INT_MAX) {
            free(start);
            free(ent);
            free(a->rowptr);
            return dx_mtx_fail(path, "more than %lld nonzeros after expansion (row %lld): the harness uses int32 offsets", (long long)INT_MAX, r + 1);
        }
        a->rowptr[r] = (int)out;
        for (long long t = b; t < e; t++) {
            if (t > b && ent[t].c == ent[out - 1].c)
                ent[out - 1].v += ent[t].v;
            else
                ent[out++] = ent[t];
        }
    }
    free(start);
    if (out > INT_MAX) {
        free(ent);
        free(a->rowptr);
        return dx_mtx_fail(path, "%lld nonzeros after expansion: the harness uses int32 offsets (at most %lld)", out, (long long)INT_MAX);
    }
    a->rowptr[rows] = (int)out;
    a->rows = (int)rows;
    a->cols = (int)cols;
    a->nnz = (int)out;
    a->pattern = pattern;
    a->col = (int *)dx_alloc((size_t)out * sizeof(int));
    a->val = (double *)dx_alloc((size_t)out * sizeof(double));
    dx_rng g = {seed ^ 0x5eedf00dULL};
    int finite = 1;
    for (long long t = 0; t < out; t++) {
        a->col[t] = ent[t].c;
        a->val[t] = pattern ? dx_signed(&g) : ent[t].v;
        finite &= isfinite(a->val[t]) != 0;
    }
    free(ent);
    if (!finite) {
        free(a->rowptr);
        free(a->col);
        free(a->val);
        return dx_mtx_fail(path, "duplicate entries sum past the double range");
    }
    for (int r = 0; r < a->rows; r++)
        if (a->rowptr[r + 1] - a->rowptr[r] > a->max_row)
            a->max_row = a->rowptr[r + 1] - a->rowptr[r];
    return 0;
}

/* ---- inputs, the fp64 reference and its tolerance ------------------------------------------ */

typedef struct dx_ops {
    size_t nin1, nin2, nout;
    double *in1, *in2; /* x | B | A, and Bt for SDDMM */
    double *out0;      /* the output before the run: read when beta != 0 */
    double *bias;
    double *ref, *tol;
} dx_ops;

static void dx_ops_free(dx_ops *o)
{
    free(o->in1);
    free(o->in2);
    free(o->out0);
    free(o->bias);
    free(o->ref);
    free(o->tol);
    memset(o, 0, sizeof *o);
}

static double dx_epilogue(double v, double bias)
{
#if DX_EPI == 1
    (void)bias;
    return v > 0 ? v : 0;
#elif DX_EPI == 2
    (void)bias;
    return 0.5 * v * (1.0 + tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
#elif DX_EPI == 3
    return v + bias;
#else
    (void)bias;
    return v;
#endif
}

/* ditto's tolerance (sparse/tolerance.h, inlined above) for a sum of len terms whose
 * magnitudes add up to mag, around the reference ref. */
static double dx_tol(double len, double mag, double ref)
{
    return sp_tol_bound(sp_tol_c(len), DX_U_ACC, DX_U_OUT, DX_TINY, mag, ref, DX_EPI == 2);
}

/* Input set `set`, rounded to T so the reference sees what the device sees, and the
 * reference with a tolerance per output. */
static void dx_make_ops(const dx_csr *a, const double *av, int set, unsigned long long seed,
                        dx_ops *o)
{
    memset(o, 0, sizeof *o);
    dx_rng g = {seed * 1000003ULL + (unsigned long long)set};
    const size_t rows = (size_t)a->rows;
#if DX_OP == 0
    const size_t cols = (size_t)a->cols;
    o->nin1 = cols;
    o->nout = rows;
#elif DX_OP == 1
    const size_t cols = (size_t)a->cols, n = (size_t)DX_N;
    o->nin1 = cols * n;
    o->nout = rows * n;
#else
    const size_t n = (size_t)DX_N;
    o->nin1 = rows * n;
    o->nin2 = (size_t)a->cols * n;
    o->nout = (size_t)a->nnz;
#endif
    o->in1 = (double *)dx_alloc(o->nin1 * sizeof(double));
    o->in2 = (double *)dx_alloc(o->nin2 * sizeof(double));
    o->out0 = (double *)dx_alloc(o->nout * sizeof(double));
    o->bias = (double *)dx_alloc(rows * sizeof(double));
    o->ref = (double *)dx_alloc(o->nout * sizeof(double));
    o->tol = (double *)dx_alloc(o->nout * sizeof(double));
    for (size_t i = 0; i < o->nin1; i++)
        o->in1[i] = dx_round(dx_signed(&g));
    for (size_t i = 0; i < o->nin2; i++)
        o->in2[i] = dx_round(dx_signed(&g));
    for (size_t i = 0; i < rows; i++)
        o->bias[i] = dx_round(dx_signed(&g));
#if DX_OP == 2
    memcpy(o->out0, av, o->nout * sizeof(double)); /* SDDMM's beta scales the matrix values */
#else
    for (size_t i = 0; i < o->nout; i++)
        o->out0[i] = dx_round(dx_signed(&g));
#endif
    const double alpha = DX_ALPHA, beta = DX_BETA;
#if DX_OP == 0
    for (size_t i = 0; i < rows; i++) {
        double acc = 0, mag = 0;
        for (int t = a->rowptr[i]; t < a->rowptr[i + 1]; t++) {
            acc += av[t] * o->in1[a->col[t]];
            mag += fabs(av[t] * o->in1[a->col[t]]);
        }
        double r = beta == 0.0 ? alpha * acc : alpha * acc + beta * o->out0[i];
        double m = fabs(alpha) * mag + fabs(beta) * fabs(o->out0[i]);
        if (DX_EPI == 3)
            m += fabs(o->bias[i]);
        o->ref[i] = dx_epilogue(r, o->bias[i]);
        o->tol[i] = dx_tol((double)(a->rowptr[i + 1] - a->rowptr[i]), m, o->ref[i]);
    }
#elif DX_OP == 1
    double *acc = (double *)dx_alloc(n * sizeof(double));
    double *mag = (double *)dx_alloc(n * sizeof(double));
    for (size_t i = 0; i < rows; i++) {
        for (size_t j = 0; j < n; j++)
            acc[j] = mag[j] = 0;
        for (int t = a->rowptr[i]; t < a->rowptr[i + 1]; t++) {
            size_t c = (size_t)a->col[t];
            for (size_t j = 0; j < n; j++) {
                double b = DX_COL_MAJOR ? o->in1[j * cols + c] : o->in1[c * n + j];
                acc[j] += av[t] * b;
                mag[j] += fabs(av[t] * b);
            }
        }
        for (size_t j = 0; j < n; j++) {
            size_t idx = DX_COL_MAJOR ? j * rows + i : i * n + j;
            double r = beta == 0.0 ? alpha * acc[j] : alpha * acc[j] + beta * o->out0[idx];
            double m = fabs(alpha) * mag[j] + fabs(beta) * fabs(o->out0[idx]);
            if (DX_EPI == 3)
                m += fabs(o->bias[i]);
            o->ref[idx] = dx_epilogue(r, o->bias[i]);
            o->tol[idx] = dx_tol((double)(a->rowptr[i + 1] - a->rowptr[i]), m, o->ref[idx]);
        }
    }
    free(acc);
    free(mag);
#else
    for (size_t i = 0; i < rows; i++) {
        for (int t = a->rowptr[i]; t < a->rowptr[i + 1]; t++) {
            const double *ar = o->in1 + i * n, *br = o->in2 + (size_t)a->col[t] * n;
            double d = 0, mag = 0;
            for (size_t q = 0; q < n; q++) {
                d += ar[q] * br[q];
                mag += fabs(ar[q] * br[q]);
            }
            double r = beta == 0.0 ? alpha * d : alpha * d + beta * av[t];
            double m = fabs(alpha) * mag + fabs(beta) * fabs(av[t]);
            o->ref[t] = dx_epilogue(r, 0.0);
            o->tol[t] = dx_tol((double)n, m, o->ref[t]);
        }
    }
#endif
}

static void dx_upload(void *dst, const double *v, size_t n)
{
    if (n == 0)
        return;
    T *tmp = (T *)dx_alloc(n * sizeof(T));
    for (size_t i = 0; i < n; i++)
        tmp[i] = dx_to_T(v[i]);
    DX_CUDA(cudaMemcpy(dst, tmp, n * sizeof(T), cudaMemcpyHostToDevice));
    /* A copy from pageable memory may still be in flight when cudaMemcpy returns, and the
     * harness stream does not wait for the legacy stream. */
    DX_CUDA(cudaDeviceSynchronize());
    free(tmp);
}

/* The output before a run: NaN poison when beta is 0, so that an output the kernel never
 * writes is caught; the random initial output otherwise. */
static void dx_init_output(void *dst, const dx_ops *o)
{
    if (DX_BETA != 0.0) {
        dx_upload(dst, o->out0, o->nout);
        return;
    }
    unsigned char *tmp = (unsigned char *)dx_alloc(o->nout * sizeof(T));
    for (size_t i = 0; i < o->nout; i++)
        dx_poison_bits(tmp + i * sizeof(T));
    DX_CUDA(cudaMemcpy(dst, tmp, o->nout * sizeof(T), cudaMemcpyHostToDevice));
    DX_CUDA(cudaDeviceSynchronize());
    free(tmp);
}

/* Compare a device output with the reference; prints one line, returns 1 when every output
 * was written and is within its tolerance (NaN never is). */
static int dx_check(const char *label, const void *dev_out, const dx_ops *o, int poisoned)
{
    unsigned char *raw = (unsigned char *)dx_alloc(o->nout * sizeof(T));
    DX_CUDA(cudaMemcpy(raw, dev_out, o->nout * sizeof(T), cudaMemcpyDeviceToHost));
    unsigned char poison[8];
    dx_poison_bits(poison);
    size_t unwritten = 0, bad = 0, first = 0;
    double worst = 0, first_got = 0;
    int first_unw = 0;
    for (size_t i = 0; i < o->nout; i++) {
        double got = NAN;
        int unw = poisoned && memcmp(raw + i * sizeof(T), poison, sizeof(T)) == 0;
        if (!unw) {
            T v;
            memcpy(&v, raw + i * sizeof(T), sizeof(T));
            got = dx_from_T(v);
        }
        double err = fabs(got - o->ref[i]);
        if (unw || !(err <= o->tol[i])) {
            if (unwritten + bad == 0) {
                first = i;
                first_got = got;
                first_unw = unw;
            }
            unwritten += unw;
            bad += !unw;
        } else if (err / o->tol[i] > worst) {
            worst = err / o->tol[i];
        }
    }
    free(raw);
    if (unwritten == 0 && bad == 0) {
        printf("check     %s: all %zu outputs written and within tolerance (worst |err|/tol "
               "%.3g)\n",
               label, o->nout, worst);
        return 1;
    }
    printf("check     %s: FAILED: %zu of %zu outputs never written, %zu outside tolerance; first "
           "bad: output %zu, expected %.9g, got %.9g%s (tolerance %.3g)\n",
           label, unwritten, o->nout, bad, first, o->ref[first], first_got,
           first_unw ? " (never written)" : "", o->tol[first]);
    return 0;
}

/* ---- timing: CUDA events around the launch only, as ditto's gpu/worker/dev.c ----------------------- */

#define DX_MIN_RUNS 20
#define DX_MIN_SECONDS 0.05
#define DX_MAX_RUNS 20000
#define DX_GRAPH_LAUNCHES 50

typedef cudaError_t (*dx_enqueue)(void *ud, cudaStream_t s);

typedef struct dx_stats {
    int valid, runs;
    double median, min, max, p10, p90; /* microseconds per launch */
} dx_stats;

static int dx_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double dx_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct dx_timer {
    cudaStream_t s;
    void *flush; /* twice the L2, written before every cold run */
    size_t flush_bytes;
} dx_timer;

/* Warm-up (3 launches), then runs until at least 20 and 50 ms of measured time (a wall
 * cap of max_seconds after 3 runs). cold: the flush buffer is written before every run;
 * graph: 50 launches captured in a CUDA graph, replayed, time per launch. Returns a
 * CUDA error (a failed graph capture included) or cudaSuccess. */
static cudaError_t dx_time(const dx_timer *tm, dx_enqueue fn, void *ud, int graph,
                           double max_seconds, dx_stats *st)
{
    memset(st, 0, sizeof *st);
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    double *samples = NULL;
    cudaError_t rc;
#define DX_TRY(call)                                                                            \
    do {                                                                                        \
        rc = (call);                                                                            \
        if (rc != cudaSuccess)                                                                  \
            goto out;                                                                           \
    } while (0)
    DX_TRY(cudaEventCreate(&e0));
    DX_TRY(cudaEventCreate(&e1));
    for (int w = 0; w < 3; w++)
        DX_TRY(fn(ud, tm->s));
    DX_TRY(cudaStreamSynchronize(tm->s));
    if (graph) {
        DX_TRY(cudaStreamBeginCapture(tm->s, cudaStreamCaptureModeThreadLocal));
        cudaError_t cap = cudaSuccess;
        for (int i = 0; i < DX_GRAPH_LAUNCHES && cap == cudaSuccess; i++)
            cap = fn(ud, tm->s);
        rc = cudaStreamEndCapture(tm->s, &g);
        if (cap != cudaSuccess)
            rc = cap;
        if (rc != cudaSuccess)
            goto out;
        DX_TRY(cudaGraphInstantiate(&ge, g, 0));
        for (int w = 0; w < 2; w++)
            DX_TRY(cudaGraphLaunch(ge, tm->s));
        DX_TRY(cudaStreamSynchronize(tm->s));
    }
    {
        samples = (double *)dx_alloc(DX_MAX_RUNS * sizeof(double));
        int n = 0;
        double total = 0, start = dx_wall();
        while (n < DX_MAX_RUNS) {
            if (n >= DX_MIN_RUNS && total >= DX_MIN_SECONDS)
                break;
            if (n >= 3 && dx_wall() - start > max_seconds)
                break;
            if (!graph)
                DX_TRY(cudaMemsetAsync(tm->flush, n & 0xff, tm->flush_bytes, tm->s));
            DX_TRY(cudaEventRecord(e0, tm->s));
            if (graph)
                DX_TRY(cudaGraphLaunch(ge, tm->s));
            else
                DX_TRY(fn(ud, tm->s));
            DX_TRY(cudaEventRecord(e1, tm->s));
            DX_TRY(cudaEventSynchronize(e1));
            float ms = 0;
            DX_TRY(cudaEventElapsedTime(&ms, e0, e1));
            double us = 1000.0 * ms;
            total += us * 1e-6;
            samples[n++] = graph ? us / DX_GRAPH_LAUNCHES : us;
        }
        qsort(samples, (size_t)n, sizeof *samples, dx_cmp_double);
        st->valid = n > 0;
        st->runs = n;
        if (n > 0) {
            st->min = samples[0];
            st->max = samples[n - 1];
            st->median = n % 2 ? samples[n / 2] : 0.5 * (samples[n / 2 - 1] + samples[n / 2]);
            st->p10 = samples[(int)floor(0.1 * (n - 1) + 0.5)];
            st->p90 = samples[(int)floor(0.9 * (n - 1) + 0.5)];
        }
    }
    rc = cudaSuccess;
out:
#undef DX_TRY
    free(samples);
    if (ge)
        cudaGraphExecDestroy(ge);
    if (g)
        cudaGraphDestroy(g);
    if (e0)
        cudaEventDestroy(e0);
    if (e1)
        cudaEventDestroy(e1);
    return rc;
}

/* ---- the kernel under its contract ----------------------------------------------------------- */

typedef struct dx_kernel {
    dx_args args;
    dx_dims dims;
} dx_kernel;

static cudaError_t dx_kernel_enqueue(void *ud, cudaStream_t s)
{
    dx_kernel *k = (dx_kernel *)ud;
    /* Scratch is cleared before every launch and timed with it, as the worker does, unless
     * the contract says the kernel leaves it zeroed (then it was zeroed once, at allocation). */
    if (k->dims.scratch > 0 && !DX_SCRATCH_ONCE) {
        cudaError_t e = cudaMemsetAsync(k->args.scratch, 0, (size_t)k->dims.scratch, s);
        if (e != cudaSuccess)
            return e;
    }
    if (k->dims.grid[0] == 0 || k->dims.grid[1] == 0 || k->dims.grid[2] == 0)
        return cudaSuccess; /* nothing to do (an empty matrix) */
    dx_contract_launch(&k->args, &k->dims, s);
    return cudaGetLastError();
}

/* ---- cuSPARSE, set up as ditto's gpu/worker/cusparse.c ------------------------------------------------ */

typedef struct dx_alg {
    const char *name;
    int op;     /* DX_OP */
    int format; /* 0 CSR, 1 COO, 2 sliced ELL */
    int id;
    int preprocess;
} dx_alg;

static const dx_alg dx_algs[] = {
    {"CSR_ALG1", 0, 0, (int)CUSPARSE_SPMV_CSR_ALG1, 1},
    {"CSR_ALG2", 0, 0, (int)CUSPARSE_SPMV_CSR_ALG2, 1},
    {"COO_ALG1", 0, 1, (int)CUSPARSE_SPMV_COO_ALG1, 0},
    {"COO_ALG2", 0, 1, (int)CUSPARSE_SPMV_COO_ALG2, 0},
    {"SELL_ALG1", 0, 2, (int)CUSPARSE_SPMV_SELL_ALG1, 0},
    {"CSR_ALG1", 1, 0, (int)CUSPARSE_SPMM_CSR_ALG1, 1},
    {"CSR_ALG2", 1, 0, (int)CUSPARSE_SPMM_CSR_ALG2, 0},
    {"CSR_ALG3", 1, 0, (int)CUSPARSE_SPMM_CSR_ALG3, 1},
    {"CSR_ALG_DEFAULT", 2, 0, (int)CUSPARSE_SDDMM_ALG_DEFAULT, 1},
};

typedef struct dx_cs {
    const dx_alg *alg;
    cusparseHandle_t h;
    cusparseSpMatDescr_t sp;
    cusparseDnVecDescr_t x, y;
    cusparseDnMatDescr_t d1, d2; /* SpMM: B, C; SDDMM: A, Bt */
    void *buf, *coo_row, *sell_off, *sell_col, *sell_val;
    float af, bf;
    double ad, bd;
    const void *alpha, *beta;
} dx_cs;

static void dx_cs_free(dx_cs *c)
{
    if (c->sp)
        cusparseDestroySpMat(c->sp);
    if (c->x)
        cusparseDestroyDnVec(c->x);
    if (c->y)
        cusparseDestroyDnVec(c->y);
    if (c->d1)
        cusparseDestroyDnMat(c->d1);
    if (c->d2)
        cusparseDestroyDnMat(c->d2);
    cudaFree(c->buf);
    cudaFree(c->coo_row);
    cudaFree(c->sell_off);
    cudaFree(c->sell_col);
    cudaFree(c->sell_val);
    cusparseHandle_t h = c->h;
    memset(c, 0, sizeof *c);
    c->h = h;
}

/* Why an algorithm does not apply to this dtype (cuSPARSE 12 data-type tables), or NULL. */
static const char *dx_not_applicable(const dx_alg *a)
{
    if (DX_HALF && a->op == 1 && strcmp(a->name, "CSR_ALG3") != 0)
        return "cuSPARSE computes mixed-precision CSR SpMM with CSR_ALG3 whatever is asked";
#if defined(DITTO_DTYPE_BF16)
    if (a->op == 2)
        return "cuSPARSE SDDMM takes bf16 inputs only for BSR matrices";
#endif
    return NULL;
}

static const dx_alg *dx_find_alg(const char *name)
{
    for (size_t i = 0; i < sizeof dx_algs / sizeof dx_algs[0]; i++)
        if (dx_algs[i].op == DX_OP && strcmp(dx_algs[i].name, name) == 0)
            return &dx_algs[i];
    return NULL;
}

static int dx_cs_fail(char *why, size_t len, const char *call, cusparseStatus_t st)
{
    snprintf(why, len, "%s: %s", call, cusparseGetErrorString(st));
    return -1;
}

#define DX_CS(call)                                                                             \
    do {                                                                                        \
        cusparseStatus_t dx_s_ = (call);                                                        \
        if (dx_s_ != CUSPARSE_STATUS_SUCCESS)                                                   \
            return dx_cs_fail(why, wlen, #call, dx_s_);                                         \
    } while (0)

static cusparseStatus_t dx_cs_compute(const dx_cs *c)
{
    const cusparseOperation_t dx_nt = CUSPARSE_OPERATION_NON_TRANSPOSE;
#if DX_OP == 0
    return cusparseSpMV(c->h, dx_nt, c->alpha, c->sp, c->x, c->beta, c->y, DX_CT,
                        (cusparseSpMVAlg_t)c->alg->id, c->buf);
#elif DX_OP == 1
    return cusparseSpMM(c->h, dx_nt, dx_nt, c->alpha, c->sp, c->d1, c->beta, c->d2, DX_CT,
                        (cusparseSpMMAlg_t)c->alg->id, c->buf);
#else
    /* B is our Bt (cols x K, row-major) taken transposed. */
    return cusparseSDDMM(c->h, dx_nt, CUSPARSE_OPERATION_TRANSPOSE, c->alpha, c->d1, c->d2, c->beta,
                         c->sp, DX_CT, (cusparseSDDMMAlg_t)c->alg->id, c->buf);
#endif
}

static cudaError_t dx_cs_enqueue(void *ud, cudaStream_t s)
{
    (void)s; /* the handle is bound to the harness stream */
    const dx_cs *c = (const dx_cs *)ud;
    return dx_cs_compute(c) == CUSPARSE_STATUS_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

/* Descriptors, conversions, the workspace and preprocessing for one algorithm on the
 * device CSR (d_rowptr, d_col, d_val) and operands. -1 with the reason in why when it
 * cannot be set up here. */
static int dx_cs_setup(dx_cs *c, const dx_alg *alg, const dx_csr *a, const double *av,
                       const dx_args *k, char *why, size_t wlen)
{
    c->alg = alg;
    const char *na = dx_not_applicable(alg);
    if (na != NULL) {
        snprintf(why, wlen, "%s", na);
        return -1;
    }
#if DX_OP == 0
    if (alg->format == 1) {
        int *ri = (int *)dx_alloc((size_t)a->nnz * sizeof(int));
        for (int i = 0; i < a->rows; i++)
            for (int t = a->rowptr[i]; t < a->rowptr[i + 1]; t++)
                ri[t] = i;
        DX_CUDA(cudaMalloc(&c->coo_row, (size_t)a->nnz * sizeof(int) + 4));
        DX_CUDA(cudaMemcpy(c->coo_row, ri, (size_t)a->nnz * sizeof(int), cudaMemcpyHostToDevice));
        free(ri);
        DX_CS(cusparseCreateCoo(&c->sp, a->rows, a->cols, a->nnz, c->coo_row, k->col, k->val,
                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, DX_VT));
    } else if (alg->format == 2) {
#if CUSPARSE_VERSION >= 12100
        /* Sliced ELL, slices of 32 rows in order (no sigma sort), column-major within a
         * slice, padding column -1 and value 0, as ditto's sp_csr_to_sell(32, 1). */
        const int C = 32;
        int ns = (a->rows + C - 1) / C;
        int *off = (int *)dx_alloc(((size_t)ns + 1) * sizeof(int));
        long long stored = 0;
        off[0] = 0;
        for (int s = 0; s < ns; s++) {
            int w = 0;
            for (int r = s * C; r < a->rows && r < (s + 1) * C; r++)
                w = w > a->rowptr[r + 1] - a->rowptr[r] ? w : a->rowptr[r + 1] - a->rowptr[r];
            stored += (long long)C * w;
            if (stored > INT_MAX) {
                free(off);
                snprintf(why, wlen, "the sliced ELL form holds more than 2^31 entries");
                return -1;
            }
            off[s + 1] = (int)stored;
        }
        int *sc = (int *)dx_alloc((size_t)stored * sizeof(int));
        T *sv = (T *)dx_alloc((size_t)stored * sizeof(T));
        for (long long t = 0; t < stored; t++) {
            sc[t] = -1;
            sv[t] = dx_to_T(0.0);
        }
        for (int r = 0; r < a->rows; r++) {
            int s = r / C, lane = r % C;
            for (int t = a->rowptr[r]; t < a->rowptr[r + 1]; t++) {
                long long at = off[s] + (long long)(t - a->rowptr[r]) * C + lane;
                sc[at] = a->col[t];
                sv[at] = dx_to_T(av[t]);
            }
        }
        DX_CUDA(cudaMalloc(&c->sell_off, ((size_t)ns + 1) * sizeof(int)));
        DX_CUDA(cudaMalloc(&c->sell_col, (size_t)stored * sizeof(int) + 4));
        DX_CUDA(cudaMalloc(&c->sell_val, (size_t)stored * sizeof(T) + 8));
        DX_CUDA(cudaMemcpy(c->sell_off, off, ((size_t)ns + 1) * sizeof(int), cudaMemcpyHostToDevice));
        DX_CUDA(cudaMemcpy(c->sell_col, sc, (size_t)stored * sizeof(int), cudaMemcpyHostToDevice));
        DX_CUDA(cudaMemcpy(c->sell_val, sv, (size_t)stored * sizeof(T), cudaMemcpyHostToDevice));
        free(off);
        free(sc);
        free(sv);
        DX_CS(cusparseCreateSlicedEll(&c->sp, a->rows, a->cols, a->nnz, stored, C, c->sell_off,
                                      c->sell_col, c->sell_val, CUSPARSE_INDEX_32I,
                                      CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, DX_VT));
#else
        snprintf(why, wlen, "this cuSPARSE (%d) has no sliced ELL (needs 12.1 or later)",
                 CUSPARSE_VERSION);
        return -1;
#endif
    } else {
        DX_CS(cusparseCreateCsr(&c->sp, a->rows, a->cols, a->nnz, k->rowptr, k->col, k->val,
                                CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                                DX_VT));
    }
    DX_CS(cusparseCreateDnVec(&c->x, a->cols, k->x, DX_VT));
    DX_CS(cusparseCreateDnVec(&c->y, a->rows, k->y, DX_VT));
#elif DX_OP == 1
    (void)av;
    cusparseOrder_t order = DX_COL_MAJOR ? CUSPARSE_ORDER_COL : CUSPARSE_ORDER_ROW;
    long long ldb = DX_COL_MAJOR ? a->cols : DX_N, ldc = DX_COL_MAJOR ? a->rows : DX_N;
    DX_CS(cusparseCreateCsr(&c->sp, a->rows, a->cols, a->nnz, k->rowptr, k->col, k->val,
                            CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                            DX_VT));
    DX_CS(cusparseCreateDnMat(&c->d1, a->cols, DX_N, ldb > 0 ? ldb : 1, k->B, DX_VT, order));
    DX_CS(cusparseCreateDnMat(&c->d2, a->rows, DX_N, ldc > 0 ? ldc : 1, k->C, DX_VT, order));
#else
    (void)av;
    DX_CS(cusparseCreateDnMat(&c->d1, a->rows, DX_N, DX_N, k->A, DX_VT, CUSPARSE_ORDER_ROW));
    DX_CS(cusparseCreateDnMat(&c->d2, a->cols, DX_N, DX_N, k->Bt, DX_VT, CUSPARSE_ORDER_ROW));
    DX_CS(cusparseCreateCsr(&c->sp, a->rows, a->cols, a->nnz, k->rowptr, k->col, k->out,
                            CUSPARSE_INDEX_32I, CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO,
                            DX_VT));
#endif
    if (DX_CT == CUDA_R_64F) {
        c->ad = DX_ALPHA;
        c->bd = DX_BETA;
        c->alpha = &c->ad;
        c->beta = &c->bd;
    } else {
        c->af = (float)DX_ALPHA;
        c->bf = (float)DX_BETA;
        c->alpha = &c->af;
        c->beta = &c->bf;
    }
    const cusparseOperation_t dx_nt = CUSPARSE_OPERATION_NON_TRANSPOSE;
    size_t bytes = 0;
#if DX_OP == 0
    DX_CS(cusparseSpMV_bufferSize(c->h, dx_nt, c->alpha, c->sp, c->x, c->beta, c->y, DX_CT,
                                  (cusparseSpMVAlg_t)alg->id, &bytes));
#elif DX_OP == 1
    DX_CS(cusparseSpMM_bufferSize(c->h, dx_nt, dx_nt, c->alpha, c->sp, c->d1, c->beta, c->d2, DX_CT,
                                  (cusparseSpMMAlg_t)alg->id, &bytes));
#else
    DX_CS(cusparseSDDMM_bufferSize(c->h, dx_nt, CUSPARSE_OPERATION_TRANSPOSE, c->alpha, c->d1, c->d2,
                                   c->beta, c->sp, DX_CT, (cusparseSDDMMAlg_t)alg->id, &bytes));
#endif
    DX_CUDA(cudaMalloc(&c->buf, bytes ? bytes : 16));
    /* Preprocessing is setup, kept out of the timed runs, as in the session. */
    if (alg->preprocess) {
#if DX_OP == 0
#if CUSPARSE_VERSION >= 12300
        DX_CS(cusparseSpMV_preprocess(c->h, dx_nt, c->alpha, c->sp, c->x, c->beta, c->y, DX_CT,
                                      (cusparseSpMVAlg_t)alg->id, c->buf));
#endif
#elif DX_OP == 1
        DX_CS(cusparseSpMM_preprocess(c->h, dx_nt, dx_nt, c->alpha, c->sp, c->d1, c->beta, c->d2, DX_CT,
                                      (cusparseSpMMAlg_t)alg->id, c->buf));
#else
        DX_CS(cusparseSDDMM_preprocess(c->h, dx_nt, CUSPARSE_OPERATION_TRANSPOSE, c->alpha, c->d1,
                                       c->d2, c->beta, c->sp, DX_CT, (cusparseSDDMMAlg_t)alg->id,
                                       c->buf));
#endif
    }
    DX_CUDA(cudaDeviceSynchronize());
    return 0;
}

typedef struct dx_row {
    char name[64];
    dx_stats st;
} dx_row;

/* Set up one algorithm, run it once on a fresh output and check it like the kernel, then
 * time it. 0 with the timing in row, or -1 with the reason in why. */
static int dx_baseline(dx_cs *cs, const dx_alg *alg, const dx_csr *a, const double *av,
                       const dx_args *k, const dx_ops *o, const dx_timer *tm, int graph,
                       dx_row *row, char *why, size_t wlen)
{
    void *out = DX_OP == 0 ? k->y : DX_OP == 1 ? k->C : k->out;
    dx_upload(out, o->out0, o->nout);
    if (dx_cs_setup(cs, alg, a, av, k, why, wlen) != 0) {
        dx_cs_free(cs);
        return -1;
    }
    dx_upload(out, o->out0, o->nout);
    if (dx_cs_compute(cs) != CUSPARSE_STATUS_SUCCESS) {
        snprintf(why, wlen, "%s failed on this matrix", alg->name);
        dx_cs_free(cs);
        return -1;
    }
    DX_CUDA(cudaStreamSynchronize(tm->s));
    snprintf(row->name, sizeof row->name, "cuSPARSE %s", alg->name);
    /* cuSPARSE has no epilogue, and the reference has one: nothing to compare then. */
    if (DX_EPI != 0)
        printf("check     %s: not compared (cuSPARSE has no %s epilogue; timed without it)\n",
               row->name, DX_EPI_NAME);
    else if (!dx_check(row->name, out, o, 0))
        printf("note      cuSPARSE %s is outside the reference tolerance (timed all the same)\n",
               alg->name);
    cudaError_t te = dx_time(tm, dx_cs_enqueue, cs, graph, 2.0, &row->st);
    if (te != cudaSuccess && graph) {
        /* cuSPARSE may do what a stream capture refuses: then cold, and said so (the
         * session's worker does the same). */
        cudaGetLastError();
        printf("note      cuSPARSE %s cannot be captured in a CUDA graph (%s): timed cold\n",
               alg->name, cudaGetErrorString(te));
        te = dx_time(tm, dx_cs_enqueue, cs, 0, 2.0, &row->st);
    }
    DX_CUDA(te);
    dx_cs_free(cs);
    return 0;
}

/* ---- main ---------------------------------------------------------------------------------------- */

static double dx_min_bytes(const dx_csr *a)
{
    /* ditto's sp_cost: every input read once, every output written once, int32 indices. */
    double off = 4.0 * ((double)a->rows + 1), z = (double)a->nnz, s = (double)sizeof(T);
    double n = DX_OP == 0 ? 1.0 : (double)DX_N;
    if (DX_OP == 2)
        return off + z * 4.0 + s * n * ((double)a->rows + (double)a->cols) + z * s;
    return off + z * (4.0 + s) + s * n * ((double)a->cols + (double)a->rows);
}

/* The format's arrays from format/NAME.bin (DX_FORMAT_DIR overrides the folder) to the
 * device. Exits 2 on a missing or short file. */
static void dx_load_format(dx_args *k)
{
    const char *dir = getenv("DX_FORMAT_DIR");
    if (dir == NULL || *dir == '\0')
        dir = "format";
    for (int i = 0; i < DX_FMT_N; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.bin", dir, dx_fmt_files[i]);
        FILE *f = fopen(path, "rb");
        if (f == NULL) {
            fprintf(stderr, "harness: %s: %s (the %s format's arrays that ditto export wrote; run "
                            "from the export folder or set DX_FORMAT_DIR)\n", path, strerror(errno),
                    DX_FMT_NAME);
            exit(2);
        }
        size_t n = (size_t)dx_fmt_bytes[i];
        char *h = (char *)dx_alloc(n + 16);
        size_t got = fread(h, 1, n, f);
        int more = fgetc(f);
        fclose(f);
        if (got != n || more != EOF) {
            fprintf(stderr, "harness: %s: %s than the %llu bytes ditto export wrote\n", path,
                    got != n ? "shorter" : "longer", dx_fmt_bytes[i]);
            exit(2);
        }
        DX_CUDA(cudaMalloc(&k->fmt[i], n + 16));
        DX_CUDA(cudaMemcpy(k->fmt[i], h, n, cudaMemcpyHostToDevice));
        free(h);
    }
}

static void dx_usage(void)
{
    printf("usage: ./harness MATRIX.mtx [--method cold|graph] [--seed N]\n"
           "\n"
           "Loads MATRIX (Matrix Market, coordinate), runs the exported kernel (kernel.cu) on\n"
           "two random input sets and checks every output against an fp64 CPU reference, then\n"
           "times it next to cuSPARSE with the method the session used (or --method).\n"
           "Exit status: 0 correct, 1 a wrong output, 2 bad arguments or matrix, 3 a CUDA error.\n");
}

static void dx_print_row(const dx_row *r, double min_bytes)
{
    printf("  %-28s %11.3f %11.3f %11.3f %7d %9.1f\n", r->name, r->st.median, r->st.p10,
           r->st.p90, r->st.runs, min_bytes / (r->st.median * 1e-6) / 1e9);
}

int main(int argc, char **argv)
{
    const char *path = NULL, *method = DX_METHOD;
    unsigned long long seed = DX_SEED;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            dx_usage();
            return 0;
        } else if (strcmp(argv[i], "--method") == 0 && i + 1 < argc) {
            method = argv[++i];
            if (strcmp(method, "cold") != 0 && strcmp(method, "graph") != 0) {
                fprintf(stderr, "harness: --method: expected cold or graph, got '%s'\n", method);
                return 2;
            }
        } else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc) {
            seed = strtoull(argv[++i], NULL, 10);
        } else if (argv[i][0] == '-' || path != NULL) {
            fprintf(stderr, "harness: unexpected argument '%s' (try --help)\n", argv[i]);
            return 2;
        } else {
            path = argv[i];
        }
    }
    if (path == NULL) {
        dx_usage();
        return 2;
    }
    printf("kernel    %s from ditto session %s: %s %s, alpha %g, beta %g, epilogue %s\n",
           DX_KERNEL_NAME, DX_SESSION, DX_OP_NAME, DX_DTYPE, (double)DX_ALPHA, (double)DX_BETA,
           DX_EPI_NAME);
    dx_csr a;
    if (dx_read_mtx(path, seed, &a) != 0)
        return 2;
    printf("matrix    %s: %d x %d, %d nonzeros, longest row %d%s\n", path, a.rows, a.cols, a.nnz,
           a.max_row, a.pattern ? " (pattern: random values)" : "");
    int same = a.rows == DX_ROWS && a.cols == DX_COLS && a.nnz == DX_NNZ && a.max_row == DX_MAX_ROW;
    if (!same && DX_ROWS >= 0) {
        if (DX_BAKED) {
            fprintf(stderr,
                    "harness: kernel.cu is specialised to the session's matrix (%lld x %lld, %lld "
                    "nonzeros, longest row %lld) through its contract's defines; this matrix "
                    "differs: export a session run on it\n",
                    (long long)DX_ROWS, (long long)DX_COLS, (long long)DX_NNZ,
                    (long long)DX_MAX_ROW);
            return 2;
        }
        printf("note      not the session's matrix (%lld x %lld, %lld nonzeros, longest row "
               "%lld): the session's numbers do not apply\n",
               (long long)DX_ROWS, (long long)DX_COLS, (long long)DX_NNZ, (long long)DX_MAX_ROW);
    }
    if (DX_FMT_N > 0 && dx_csr_sum(&a) != DX_FMT_SUM) {
        fprintf(stderr,
                "harness: kernel.cu runs on the %s format that ditto export built from the "
                "session's matrix (format/); this matrix is not that one (its rows, columns or "
                "values differ): run it on the exported matrix.mtx, or export a session run on "
                "this matrix\n",
                DX_FMT_NAME);
        return 2;
    }
    if (DX_OP != 0 && DX_N < 1) {
        fprintf(stderr, "harness: n must be at least 1\n");
        return 2;
    }
    /* The contract's preconditions. */
    {
        int minlen = a.rows ? INT_MAX : 0;
        for (int r = 0; r < a.rows; r++)
            minlen = a.rowptr[r + 1] - a.rowptr[r] < minlen ? a.rowptr[r + 1] - a.rowptr[r] : minlen;
        const char *why = NULL;
        if (DX_REQ_UNIFORM && minlen != a.max_row)
            why = "uniform row lengths";
        else if (DX_REQ_MAX_ROW >= 0 && a.max_row > DX_REQ_MAX_ROW)
            why = "rows no longer than its max_row";
        else if (DX_REQ_MIN_ROWS >= 0 && a.rows < DX_REQ_MIN_ROWS)
            why = "at least min_rows rows";
        else if (DX_REQ_SQUARE && a.rows != a.cols)
            why = "a square matrix";
        if (why != NULL) {
            fprintf(stderr, "harness: the kernel's contract requires %s; this matrix has not\n",
                    why);
            return 2;
        }
    }

    /* The device. */
    int dev = 0, sms = 0, l2 = 0, optin = 0, drv = 0, rt = 0, csv = 0;
    DX_CUDA(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    DX_CUDA(cudaGetDeviceProperties(&prop, dev));
    DX_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    DX_CUDA(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev));
    DX_CUDA(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    cusparseHandle_t h;
    if (cusparseCreate(&h) != CUSPARSE_STATUS_SUCCESS) {
        fprintf(stderr, "harness: cusparseCreate failed\n");
        return 3;
    }
    cusparseGetVersion(h, &csv);
    printf("device    %s (cc %d.%d, %d SMs, %d MiB L2), driver %d.%d, runtime %d.%d, cuSPARSE "
           "%d.%d.%d\n",
           prop.name, prop.major, prop.minor, sms, l2 >> 20, drv / 1000, drv % 1000 / 10,
           rt / 1000, rt % 1000 / 10, csv / 1000, csv % 1000 / 100, csv % 100);
    printf("session   %s\n", DX_SESSION_GPU);

    /* The launch the contract computes for this matrix. */
    dx_kernel kern;
    memset(&kern, 0, sizeof kern);
    dx_vars v = {a.rows, a.cols, a.nnz, DX_OP == 1 ? DX_N : 0, DX_OP == 2 ? DX_N : 0, a.max_row,
                 sms};
    dx_contract_dims(&v, &kern.dims);
    const dx_dims *d = &kern.dims;
    printf("launch    grid [%lld, %lld, %lld], block [%lld, %lld, %lld], %lld B dynamic shared "
           "memory%s\n",
           d->grid[0], d->grid[1], d->grid[2], d->block[0], d->block[1], d->block[2], d->smem,
           d->scratch <= 0   ? ""
           : DX_SCRATCH_ONCE ? ", scratch zeroed once (the kernel leaves it zeroed)"
                             : ", scratch cleared before each launch");
    cudaFuncAttributes fa;
    DX_CUDA(cudaFuncGetAttributes(&fa, DX_ENTRY));
    long long threads = d->block[0] * d->block[1] * d->block[2];
    if (threads < 1 || threads > fa.maxThreadsPerBlock || d->grid[0] < 0 ||
        d->grid[0] > INT_MAX || d->grid[1] < 0 || d->grid[1] > 65535 || d->grid[2] < 0 ||
        d->grid[2] > 65535 || d->smem < 0 || d->smem + (long long)fa.sharedSizeBytes > optin) {
        fprintf(stderr, "harness: the launch is impossible on this device: block of %lld "
                        "threads (at most %d with %d registers), %lld + %zu B shared (at most %d)\n",
                threads, fa.maxThreadsPerBlock, fa.numRegs, d->smem, fa.sharedSizeBytes, optin);
        return 3;
    }
    if (d->smem + (long long)fa.sharedSizeBytes > 48 * 1024)
        DX_CUDA(cudaFuncSetAttribute(DX_ENTRY, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     (int)d->smem));
    printf("          %d registers, %zu B static shared memory per thread block\n", fa.numRegs,
           fa.sharedSizeBytes);

    /* Device buffers: the CSR, the operands, the bias, the scratch and the L2 flush. */
    double *av = (double *)dx_alloc((size_t)a.nnz * sizeof(double));
    for (int t = 0; t < a.nnz; t++) {
        av[t] = dx_round(a.val[t]);
        if (!isfinite(av[t]) && isfinite(a.val[t])) { /* fp16 past 65504, as ditto refuses */
            fprintf(stderr, "harness: the matrix's value %g (nonzero %d) is beyond %s's range: "
                            "run it in fp32, or scale the matrix\n", a.val[t], t, DX_DTYPE);
            return 2;
        }
    }
    dx_ops ops[2];
    dx_make_ops(&a, av, 0, seed, &ops[0]);
    dx_args *k = &kern.args;
    k->rows = a.rows;
    k->cols = a.cols;
    k->nnz = a.nnz;
    k->n = DX_OP == 1 ? DX_N : 0;
    k->k = DX_OP == 2 ? DX_N : 0;
    k->max_row = a.max_row;
    k->alpha = DX_ALPHA;
    k->beta = DX_BETA;
    void *in1 = NULL, *in2 = NULL, *out = NULL;
    DX_CUDA(cudaMalloc(&k->rowptr, ((size_t)a.rows + 1) * sizeof(int)));
    DX_CUDA(cudaMalloc(&k->col, (size_t)a.nnz * sizeof(int) + 4));
    DX_CUDA(cudaMalloc(&k->val, (size_t)a.nnz * sizeof(T) + 8));
    DX_CUDA(cudaMalloc(&in1, ops[0].nin1 * sizeof(T) + 8));
    DX_CUDA(cudaMalloc(&in2, ops[0].nin2 * sizeof(T) + 8));
    DX_CUDA(cudaMalloc(&out, ops[0].nout * sizeof(T) + 8));
    DX_CUDA(cudaMalloc(&k->bias, (size_t)a.rows * sizeof(T) + 8));
    if (d->scratch > 0) {
        DX_CUDA(cudaMalloc(&k->scratch, (size_t)d->scratch));
        DX_CUDA(cudaMemset(k->scratch, 0, (size_t)d->scratch));
    }
    DX_CUDA(cudaMemcpy(k->rowptr, a.rowptr, ((size_t)a.rows + 1) * sizeof(int),
                       cudaMemcpyHostToDevice));
    DX_CUDA(cudaMemcpy(k->col, a.col, (size_t)a.nnz * sizeof(int), cudaMemcpyHostToDevice));
    if (DX_COO) {
        /* The coo format: CSR's arrays and the row of every nonzero, in CSR order. */
        int *ri = (int *)dx_alloc((size_t)a.nnz * sizeof(int) + 4);
        for (int i = 0; i < a.rows; i++)
            for (int t = a.rowptr[i]; t < a.rowptr[i + 1]; t++)
                ri[t] = i;
        DX_CUDA(cudaMalloc(&k->coo_row, (size_t)a.nnz * sizeof(int) + 4));
        DX_CUDA(cudaMemcpy(k->coo_row, ri, (size_t)a.nnz * sizeof(int), cudaMemcpyHostToDevice));
        free(ri);
    }
    if (DX_FMT_N > 0)
        dx_load_format(k);
    DX_CUDA(cudaDeviceSynchronize());
    dx_upload(k->val, av, (size_t)a.nnz);
    if (DX_OP == 0) {
        k->x = in1;
        k->y = out;
    } else if (DX_OP == 1) {
        k->B = in1;
        k->C = out;
    } else {
        k->A = in1;
        k->Bt = in2;
        k->out = out;
    }
    dx_timer tm;
    DX_CUDA(cudaStreamCreateWithFlags(&tm.s, cudaStreamNonBlocking));
    tm.flush_bytes = 2 * (size_t)(l2 > 0 ? l2 : 64 << 20);
    DX_CUDA(cudaMalloc(&tm.flush, tm.flush_bytes));
    cusparseSetStream(h, tm.s);

    /* Correctness: two fresh input sets, outputs poisoned before each run (beta 0). */
    int correct = 1;
    for (int set = 0; set < 2; set++) {
        if (set == 1)
            dx_make_ops(&a, av, 1, seed, &ops[1]);
        dx_upload(in1, ops[set].in1, ops[set].nin1);
        dx_upload(in2, ops[set].in2, ops[set].nin2);
        dx_upload(k->bias, ops[set].bias, (size_t)a.rows);
        dx_init_output(out, &ops[set]);
        DX_CUDA(dx_kernel_enqueue(&kern, tm.s));
        DX_CUDA(cudaStreamSynchronize(tm.s));
        char label[32];
        snprintf(label, sizeof label, "set %d", set);
        correct &= dx_check(label, out, &ops[set], DX_BETA == 0.0);
    }
    dx_ops_free(&ops[1]);

    /* Timing on set 0, the kernel first, then cuSPARSE, the same method for both. */
    dx_upload(in1, ops[0].in1, ops[0].nin1);
    dx_upload(in2, ops[0].in2, ops[0].nin2);
    dx_upload(k->bias, ops[0].bias, (size_t)a.rows);
    double min_bytes = dx_min_bytes(&a);
    if (strcmp(method, "auto") == 0)
        method = min_bytes <= 0.5 * (double)l2 ? "graph" : "cold";
    int graph = strcmp(method, "graph") == 0;
    dx_init_output(out, &ops[0]);
    dx_row rows_[8];
    int nrows = 0;
    snprintf(rows_[0].name, sizeof rows_[0].name, "kernel %s", DX_KERNEL_NAME);
    DX_CUDA(dx_time(&tm, dx_kernel_enqueue, &kern, graph, 5.0, &rows_[0].st));
    nrows = 1;

    /* The session's best cuSPARSE algorithm when it can run here, else the CSR ones. */
    char why[256] = "";
    dx_cs cs;
    memset(&cs, 0, sizeof cs);
    cs.h = h;
    double best_base = 0;
    const char *best_name = NULL;
    const dx_alg *alg0 = DX_BASELINE[0] ? dx_find_alg(DX_BASELINE) : NULL;
    if (alg0 == NULL)
        snprintf(why, sizeof why, "%s", DX_BASELINE[0] ? "an algorithm the harness does not know"
                                                        : "the session recorded none");
    else if (dx_baseline(&cs, alg0, &a, av, k, &ops[0], &tm, graph, &rows_[nrows], why,
                         sizeof why) == 0)
        best_name = alg0->name;
    if (best_name != NULL) {
        best_base = rows_[nrows++].st.median;
    } else {
        static const char *fallback[3][3] = {{"CSR_ALG1", "CSR_ALG2", NULL},
                                             {"CSR_ALG1", "CSR_ALG2", "CSR_ALG3"},
                                             {"CSR_ALG_DEFAULT", NULL, NULL}};
        printf("note      the session's best cuSPARSE algorithm (%s) cannot run here: %s; "
               "trying the CSR algorithms instead\n",
               DX_BASELINE[0] ? DX_BASELINE : "none", why);
        for (int i = 0; i < 3; i++) {
            const dx_alg *alg = fallback[DX_OP][i] ? dx_find_alg(fallback[DX_OP][i]) : NULL;
            if (alg == NULL || alg == alg0)
                continue;
            if (dx_baseline(&cs, alg, &a, av, k, &ops[0], &tm, graph, &rows_[nrows], why,
                            sizeof why) != 0) {
                printf("note      cuSPARSE %s: %s\n", alg->name, why);
                continue;
            }
            if (best_name == NULL || rows_[nrows].st.median < best_base) {
                best_name = alg->name;
                best_base = rows_[nrows].st.median;
            }
            nrows++;
        }
        if (best_name == NULL)
            printf("note      no cuSPARSE algorithm could run: no speedup to report\n");
    }
    int base_ok = best_name != NULL;

    printf("\ntiming    %s: %s\n", method,
           graph ? "50 launches captured in a CUDA graph and replayed, time per launch; CUDA "
                   "events around each replay; 3 warm-up launches; median of >= 20 replays and "
                   ">= 50 ms"
                 : "L2 flushed (a buffer of twice the L2 written) before every run; CUDA events "
                   "around the launch only; 3 warm-up launches; median of >= 20 runs and >= 50 "
                   "ms");
    printf("  %-28s %11s %11s %11s %7s %9s\n", "", "median us", "p10 us", "p90 us", "runs",
           "GB/s");
    for (int i = 0; i < nrows; i++)
        dx_print_row(&rows_[i], min_bytes);
    double speedup = base_ok ? best_base / rows_[0].st.median : 0;
    if (base_ok)
        printf("  %-28s %10.2fx  (best cuSPARSE: %s)\n", "speedup", speedup, best_name);
    /* A variable, not the macro: a session that measured nothing has
     * DX_S_SPEEDUP 0, and a literal x / 0.0 in a branch never taken still
     * draws nvcc's division-by-zero warning. */
    double s_speedup = (double)DX_S_SPEEDUP;
    if (DX_S_US > 0) {
        printf("  %-28s %11.3f us kernel, %.3f us cuSPARSE %s, %.2fx (%s timing)\n",
               "in the session", (double)DX_S_US, (double)DX_S_BASE_US, DX_BASELINE,
               s_speedup, DX_METHOD);
        /* Comparable only on the session's matrix, method and cuSPARSE algorithm. */
        if (base_ok && s_speedup > 0 && same && strcmp(method, DX_METHOD) == 0 &&
            strcmp(best_name, DX_BASELINE) == 0)
            printf("  %-28s %10.2f   (speedup here / speedup in the session)\n", "reproduced",
                   speedup / s_speedup);
        else
            printf("  %-28s not comparable: another matrix, method or cuSPARSE algorithm\n",
                   "reproduced");
    } else {
        printf("  (the session never measured this kernel)\n");
    }
    if (DX_USE_CUSPARSE)
        printf("\nuse       cuSPARSE %s: in the session no generated kernel beat it "
               "(%.2fx); dx_cs_compute() is the call to make\n", DX_BASELINE,
               (double)DX_S_SPEEDUP);
    printf("\nresult    %s\n", correct ? "CORRECT: every output within tolerance"
                                       : "WRONG: see the check lines above");
    dx_ops_free(&ops[0]);
    free(av);
    cusparseDestroy(h);
    return correct ? 0 : 1;
}
