/* ref.c -- CPU fp64 reference SpMV, SpMM and SDDMM, split over threads.
 *
 * These are the ground truth the verifier compares GPU kernels against, so
 * every output is one fp64 sum taken in the matrix's storage order, written
 * by exactly one thread: the result does not depend on the thread count or
 * on how the loops below are blocked. SpMV and SpMM split the rows so that
 * each thread gets about the same nonzeros plus rows (a power-law matrix
 * can hold half its entries in a few rows); SDDMM, one output per nonzero,
 * splits the nonzeros themselves, mid-row where needed. */
#include "sparse/sparse.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

/* The order of the additions is the reference's definition: no fused
 * multiply-add (GCC already contracts nothing under -std=c11). */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

#define REF_MAX_THREADS SP_PAR_MAX /* hard limit, DITTO_REF_THREADS included */
#define REF_CPU_CAP     32         /* the default takes at most this many CPUs */
#define REF_GRAIN       (1 << 20)  /* multiply-adds that make a thread worth starting */

static atomic_int ref_forced; /* > 0: sp_ref_set_threads' count */

void sp_ref_set_threads(int n)
{
    atomic_store(&ref_forced, n < 0 ? 0 : n);
}

/* DITTO_REF_THREADS when it is a positive integer, else the online CPUs. */
static int threads_default(void)
{
    const char *env = getenv("DITTO_REF_THREADS");
    if (env != NULL && *env != '\0') {
        char *end;
        long v = strtol(env, &end, 10);
        if (*end == '\0' && v >= 1) /* anything else: as if unset */
            return v > REF_MAX_THREADS ? REF_MAX_THREADS : (int)v;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c > REF_CPU_CAP)
        c = REF_CPU_CAP;
    return c > 0 ? (int)c : 1;
}

int sp_ref_threads(int64_t work)
{
    int n = atomic_load(&ref_forced);
    if (n > 0)
        return n > REF_MAX_THREADS ? REF_MAX_THREADS : n;
    /* One thread per REF_GRAIN, so that small problems (the verifier's edge
     * matrices, SpMV under a million nonzeros) pay no thread start-up. */
    int64_t most = work / REF_GRAIN;
    if (most <= 1) /* before threads_default: sysconf reads /sys, and the
                    * host loops ask for every array, however short */
        return 1;
    n = threads_default();
    if (n > most)
        n = (int)most;
    return n < 1 ? 1 : n;
}

typedef struct ref_job {
    const sp_csr *a;
    int32_t r0, r1; /* rows [r0, r1) (SpMV, SpMM) */
    int64_t k0, k1; /* nonzeros [k0, k1) (SDDMM) */
    const double *x, *b;
    double alpha, beta;
    double *y;
    double *mag; /* NULL, or the same products with every term made positive */
    int32_t n;   /* SpMM columns / SDDMM K */
    sp_layout layout;
    void (*fn)(const struct ref_job *);
} ref_job;

/* First row r with rowptr[r] + r >= target: rows [0, r) hold about target
 * units of work, a nonzero and a row (its outputs) one unit each. */
static int32_t row_at_work(const sp_csr *a, int64_t target)
{
    int32_t lo = 0, hi = a->rows;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (a->rowptr[mid] + mid < target)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* The row holding nonzero k (k < nnz): the last r with rowptr[r] <= k. */
static int32_t row_of(const sp_csr *a, int64_t k)
{
    int32_t lo = 0, hi = a->rows - 1;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (a->rowptr[mid] <= k)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void *run_job(void *arg)
{
    const ref_job *j = arg;
    j->fn(j);
    return NULL;
}

/* Run proto over the whole matrix in parts; by_nnz splits the nonzeros
 * (k0, k1), otherwise the rows (r0, r1). Each part writes only its own
 * outputs, and the calling thread takes the last part. */
static void run_parallel(ref_job proto, int64_t work, int by_nnz)
{
    const sp_csr *a = proto.a;
    if (a->rows == 0 || (by_nnz && a->nnz == 0))
        return;
    int parts = sp_ref_threads(work);
    int64_t total = by_nnz ? a->nnz : a->nnz + a->rows;
    if (parts > total)
        parts = (int)total;
    ref_job jobs[REF_MAX_THREADS];
    pthread_t tid[REF_MAX_THREADS];
    int started[REF_MAX_THREADS] = {0};
    for (int p = 0; p < parts; p++) {
        ref_job *j = &jobs[p];
        *j = proto;
        int64_t lo = total * p / parts, hi = total * (p + 1) / parts;
        if (by_nnz) {
            j->k0 = lo;
            j->k1 = hi;
        } else {
            j->r0 = p == 0 ? 0 : row_at_work(a, lo);
            j->r1 = p + 1 == parts ? a->rows : row_at_work(a, hi);
        }
        /* A failed pthread_create runs the part inline: slower, same result. */
        if (p + 1 < parts && pthread_create(&tid[p], NULL, run_job, j) == 0)
            started[p] = 1;
        else
            j->fn(j);
    }
    for (int p = 0; p < parts; p++)
        if (started[p])
            pthread_join(tid[p], NULL);
}

/* Write one output: beta == 0 must not read it, it may hold NaN poison. */
static inline void put_out(const ref_job *j, size_t idx, double sum, double msum)
{
    j->y[idx] = j->beta == 0.0 ? j->alpha * sum : j->alpha * sum + j->beta * j->y[idx];
    if (j->mag)
        j->mag[idx] = msum;
}

static void spmv_rows(const ref_job *j)
{
    const sp_csr *a = j->a;
    for (int32_t i = j->r0; i < j->r1; i++) {
        double s = 0.0, m = 0.0;
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            double t = a->val[k] * j->x[a->col[k]];
            s += t;
            m += fabs(t);
        }
        put_out(j, (size_t)i, s, m);
    }
}

void sp_ref_spmv(const sp_csr *a, const double *x, double alpha, double beta, double *y)
{
    sp_ref_spmv_mag(a, x, alpha, beta, y, NULL);
}

void sp_ref_spmv_mag(const sp_csr *a, const double *x, double alpha, double beta, double *y,
                     double *mag)
{
    ref_job j = {.a = a, .x = x, .alpha = alpha, .beta = beta, .y = y, .mag = mag, .fn = spmv_rows};
    run_parallel(j, a->nnz + a->rows, 0);
}

/* SpMM takes a row's columns SPMM_W at a time with the sums in registers:
 * each sum still adds the row's terms in storage order, and in row-major B
 * a block is one 64-byte line of each row of B it reads. */
enum { SPMM_W = 8 };

/* Output columns [c0, c0 + w) of row i, w <= SPMM_W. Inlined, so that where
 * w is the constant SPMM_W the sums stay in registers. */
static inline __attribute__((always_inline)) void spmm_block(const ref_job *j, int32_t i,
                                                             int32_t c0, int w)
{
    const sp_csr *a = j->a;
    size_t n = (size_t)j->n, ldb = (size_t)a->cols;
    double acc[SPMM_W] = {0}, accm[SPMM_W] = {0}; /* the sums, and with every term made positive */
    if (j->layout == SP_ROW_MAJOR) {
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            double v = a->val[k];
            const double *brow = j->b + (size_t)a->col[k] * n + (size_t)c0;
#pragma GCC unroll 8
            for (int c = 0; c < w; c++) {
                double t = v * brow[c];
                acc[c] += t;
                accm[c] += fabs(t);
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < w; c++)
            put_out(j, (size_t)i * n + (size_t)(c0 + c), acc[c], accm[c]);
    } else {
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            double v = a->val[k];
            const double *bcol = j->b + (size_t)c0 * ldb + (size_t)a->col[k];
#pragma GCC unroll 8
            for (int c = 0; c < w; c++) {
                double t = v * bcol[(size_t)c * ldb];
                acc[c] += t;
                accm[c] += fabs(t);
            }
        }
#pragma GCC unroll 8
        for (int c = 0; c < w; c++)
            put_out(j, (size_t)(c0 + c) * (size_t)a->rows + (size_t)i, acc[c], accm[c]);
    }
}

static void spmm_rows(const ref_job *j)
{
    for (int32_t i = j->r0; i < j->r1; i++) {
        int32_t c0 = 0;
        for (; c0 + SPMM_W <= j->n; c0 += SPMM_W)
            spmm_block(j, i, c0, SPMM_W);
        if (c0 < j->n)
            spmm_block(j, i, c0, (int)(j->n - c0));
    }
}

void sp_ref_spmm(const sp_csr *a, const double *b, int32_t n, sp_layout layout, double alpha,
                 double beta, double *c)
{
    sp_ref_spmm_mag(a, b, n, layout, alpha, beta, c, NULL);
}

void sp_ref_spmm_mag(const sp_csr *a, const double *b, int32_t n, sp_layout layout, double alpha,
                     double beta, double *c, double *mag)
{
    if (n <= 0)
        return;
    ref_job j = {.a = a,
                 .b = b,
                 .n = n,
                 .layout = layout,
                 .alpha = alpha,
                 .beta = beta,
                 .y = c,
                 .mag = mag,
                 .fn = spmm_rows};
    run_parallel(j, (a->nnz + a->rows) * n, 0);
}

static void sddmm_nnz(const ref_job *j)
{
    const sp_csr *s = j->a;
    size_t kdim = (size_t)j->n;
    for (int32_t i = row_of(s, j->k0); i < s->rows && s->rowptr[i] < j->k1; i++) {
        const double *arow = j->x + (size_t)i * kdim;
        int64_t k0 = s->rowptr[i] > j->k0 ? s->rowptr[i] : j->k0;
        int64_t k1 = s->rowptr[i + 1] < j->k1 ? s->rowptr[i + 1] : j->k1;
        for (int64_t k = k0; k < k1; k++) {
            const double *brow = j->b + (size_t)s->col[k] * kdim;
            double d = 0.0, m = 0.0;
            for (size_t t = 0; t < kdim; t++) {
                double p = arow[t] * brow[t];
                d += p;
                m += fabs(p);
            }
            /* The initial output is S's value; beta == 0 reads neither. */
            j->y[k] = j->beta == 0.0 ? j->alpha * d : j->alpha * d + j->beta * s->val[k];
            if (j->mag)
                j->mag[k] = m;
        }
    }
}

void sp_ref_sddmm(const sp_csr *s, const double *a, const double *b, int32_t k, double alpha,
                  double beta, double *out)
{
    sp_ref_sddmm_mag(s, a, b, k, alpha, beta, out, NULL);
}

void sp_ref_sddmm_mag(const sp_csr *s, const double *a, const double *b, int32_t k, double alpha,
                      double beta, double *out, double *mag)
{
    ref_job j = {.a = s,
                 .x = a,
                 .b = b,
                 .n = k < 0 ? 0 : k,
                 .alpha = alpha,
                 .beta = beta,
                 .y = out,
                 .mag = mag,
                 .fn = sddmm_nnz};
    run_parallel(j, s->nnz * (k > 1 ? k : 1), 1);
}
