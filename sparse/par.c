/* par.c -- a parallel for over an index range, on the references' thread policy.
 *
 * The host loops around a GPU kernel (filling operands, converting dtypes,
 * comparing hundreds of millions of outputs) are as large as the fp64
 * reference itself at the benchmark's sizes, so they share its threads:
 * sp_ref_threads decides how many, small ranges stay on the caller. */
#include "sparse/sparse.h"

#include <pthread.h>

typedef struct par_part {
    sp_range_fn fn;
    void *ctx;
    int64_t lo, hi;
    int part;
} par_part;

static void *par_run(void *arg)
{
    const par_part *p = arg;
    p->fn(p->ctx, p->lo, p->hi, p->part);
    return NULL;
}

int sp_parallel_for(int64_t n, int64_t work, sp_range_fn fn, void *ctx)
{
    if (n <= 0)
        return 0;
    int parts = sp_ref_threads(work);
    if (parts > SP_PAR_MAX)
        parts = SP_PAR_MAX; /* defensive: sp_ref_threads already caps it */
    if (parts > n)
        parts = (int)n;
    if (parts <= 1) {
        fn(ctx, 0, n, 0);
        return 1;
    }
    par_part jobs[SP_PAR_MAX];
    pthread_t tid[SP_PAR_MAX];
    int started[SP_PAR_MAX] = {0};
    for (int p = 0; p < parts; p++) {
        /* n * p cannot overflow: n is an array length, p < 64. */
        jobs[p] = (par_part){fn, ctx, n * p / parts, n * (p + 1) / parts, p};
        /* The caller takes the last part; a failed pthread_create runs the
         * part inline: slower, same result. */
        if (p + 1 < parts && pthread_create(&tid[p], NULL, par_run, &jobs[p]) == 0)
            started[p] = 1;
        else
            par_run(&jobs[p]);
    }
    for (int p = 0; p < parts; p++)
        if (started[p])
            pthread_join(tid[p], NULL);
    return parts;
}
