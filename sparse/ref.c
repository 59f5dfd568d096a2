/* ref.c -- CPU fp64 reference SpMV, SpMM and SDDMM, split over threads by rows.
 *
 * These are the ground truth the verifier compares GPU kernels against, so
 * they favour clarity and exact fp64 accumulation in row order over speed;
 * threads only shorten the wait on large matrices. Rows are split so that
 * each thread gets about the same number of nonzeros, not of rows, since a
 * power-law matrix can hold half its entries in a few rows. */
#include "sparse/sparse.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static int ref_threads = 0; /* 0: online CPUs */

void sp_ref_set_threads(int n)
{
    ref_threads = n < 0 ? 0 : n;
}

static int nthreads_for(int64_t work)
{
    int n = ref_threads;
    if (n == 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    if (n > 64)
        n = 64;
    /* Below ~64K nonzeros a thread costs more than it saves. */
    int64_t most = work / 65536 + 1;
    if (n > most)
        n = (int)most;
    return n < 1 ? 1 : n;
}

typedef struct ref_job {
    const sp_csr *a;
    int32_t r0, r1; /* rows [r0, r1) */
    const double *x, *b;
    double alpha, beta;
    double *y;
    double *mag; /* NULL, or the same products with every term made positive */
    int32_t n;   /* SpMM columns / SDDMM K */
    sp_layout layout;
    void (*fn)(struct ref_job *);
} ref_job;

/* First row of each part so that parts hold about nnz / parts entries. */
static void split_rows(const sp_csr *a, int parts, int32_t *bounds)
{
    bounds[0] = 0;
    int32_t r = 0;
    for (int p = 1; p < parts; p++) {
        int64_t target = a->nnz * p / parts;
        while (r < a->rows && a->rowptr[r] < target)
            r++;
        bounds[p] = r;
    }
    bounds[parts] = a->rows;
}

static void *run_job(void *arg)
{
    ref_job *j = arg;
    j->fn(j);
    return NULL;
}

static void run_parallel(ref_job proto, int64_t work)
{
    int parts = nthreads_for(work);
    if (proto.a->rows == 0)
        return;
    if (parts == 1) {
        proto.r0 = 0;
        proto.r1 = proto.a->rows;
        proto.fn(&proto);
        return;
    }
    int32_t bounds[65];
    split_rows(proto.a, parts, bounds);
    ref_job jobs[64];
    pthread_t tid[64];
    int started[64] = {0};
    for (int p = 0; p < parts; p++) {
        jobs[p] = proto;
        jobs[p].r0 = bounds[p];
        jobs[p].r1 = bounds[p + 1];
        /* The calling thread takes the last part; a failed pthread_create
         * falls back to running the part inline. */
        if (p + 1 < parts && pthread_create(&tid[p], NULL, run_job, &jobs[p]) == 0)
            started[p] = 1;
        else
            jobs[p].fn(&jobs[p]);
    }
    for (int p = 0; p < parts; p++)
        if (started[p])
            pthread_join(tid[p], NULL);
}

static void spmv_rows(ref_job *j)
{
    const sp_csr *a = j->a;
    for (int32_t i = j->r0; i < j->r1; i++) {
        double s = 0.0, m = 0.0;
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            s += a->val[k] * j->x[a->col[k]];
            m += fabs(a->val[k] * j->x[a->col[k]]);
        }
        /* beta == 0 must not read y: it may hold NaN poison. */
        j->y[i] = j->beta == 0.0 ? j->alpha * s : j->alpha * s + j->beta * j->y[i];
        if (j->mag)
            j->mag[i] = m;
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
    run_parallel(j, a->nnz);
}

static void spmm_rows(ref_job *j)
{
    const sp_csr *a = j->a;
    int32_t n = j->n;
    /* acc: the row's n sums; accm: the same with every term made positive. */
    double *acc = calloc(2 * (size_t)(n > 0 ? n : 1), sizeof *acc);
    if (acc == NULL)
        abort(); /* 2n doubles; cannot fail in practice */
    double *accm = acc + (n > 0 ? n : 1);
    for (int32_t i = j->r0; i < j->r1; i++) {
        for (int32_t c = 0; c < n; c++)
            acc[c] = accm[c] = 0.0;
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            double v = a->val[k];
            int32_t r = a->col[k];
            if (j->layout == SP_ROW_MAJOR) {
                const double *brow = j->b + (size_t)r * (size_t)n;
                for (int32_t c = 0; c < n; c++) {
                    acc[c] += v * brow[c];
                    accm[c] += fabs(v * brow[c]);
                }
            } else {
                for (int32_t c = 0; c < n; c++) {
                    double t = v * j->b[(size_t)c * (size_t)a->cols + (size_t)r];
                    acc[c] += t;
                    accm[c] += fabs(t);
                }
            }
        }
        for (int32_t c = 0; c < n; c++) {
            size_t idx = j->layout == SP_ROW_MAJOR ? (size_t)i * (size_t)n + (size_t)c
                                                   : (size_t)c * (size_t)a->rows + (size_t)i;
            j->y[idx] =
                j->beta == 0.0 ? j->alpha * acc[c] : j->alpha * acc[c] + j->beta * j->y[idx];
            if (j->mag)
                j->mag[idx] = accm[c];
        }
    }
    free(acc);
}

void sp_ref_spmm(const sp_csr *a, const double *b, int32_t n, sp_layout layout, double alpha,
                 double beta, double *c)
{
    sp_ref_spmm_mag(a, b, n, layout, alpha, beta, c, NULL);
}

void sp_ref_spmm_mag(const sp_csr *a, const double *b, int32_t n, sp_layout layout, double alpha,
                     double beta, double *c, double *mag)
{
    ref_job j = {.a = a,
                 .b = b,
                 .n = n,
                 .layout = layout,
                 .alpha = alpha,
                 .beta = beta,
                 .y = c,
                 .mag = mag,
                 .fn = spmm_rows};
    run_parallel(j, a->nnz * (n > 0 ? n : 1));
}

static void sddmm_rows(ref_job *j)
{
    const sp_csr *s = j->a;
    int32_t kdim = j->n;
    for (int32_t i = j->r0; i < j->r1; i++) {
        const double *arow = j->x + (size_t)i * (size_t)kdim;
        for (int64_t k = s->rowptr[i]; k < s->rowptr[i + 1]; k++) {
            const double *brow = j->b + (size_t)s->col[k] * (size_t)kdim;
            double d = 0.0, m = 0.0;
            for (int32_t t = 0; t < kdim; t++) {
                d += arow[t] * brow[t];
                m += fabs(arow[t] * brow[t]);
            }
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
                 .n = k,
                 .alpha = alpha,
                 .beta = beta,
                 .y = out,
                 .mag = mag,
                 .fn = sddmm_rows};
    run_parallel(j, s->nnz * (k > 0 ? k : 1));
}
