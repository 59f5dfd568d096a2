/* test_par.c -- sp_parallel_for: the parts it hands out, and reductions
 * merged in part order giving what one serial pass gives. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

typedef struct ranges {
    int64_t lo[SP_PAR_MAX], hi[SP_PAR_MAX];
    atomic_int calls;
} ranges;

static void record(void *ctx, int64_t lo, int64_t hi, int part)
{
    ranges *r = ctx;
    r->lo[part] = lo;
    r->hi[part] = hi;
    atomic_fetch_add(&r->calls, 1);
}

Test(par, parts_should_cover_the_range_once_in_ascending_order)
{
    const int64_t ns[] = {1, 2, 5, 63, 64, 65, 1000, 123457};
    for (int t = 1; t <= SP_PAR_MAX; t++) {
        sp_ref_set_threads(t);
        for (size_t k = 0; k < DT_ARRAY_LEN(ns); k++) {
            ranges r;
            memset(&r, 0, sizeof r);
            int parts = sp_parallel_for(ns[k], ns[k], record, &r);
            int want = ns[k] < t ? (int)ns[k] : t;
            cr_assert_eq(parts, want, "%d threads, n %lld: %d parts", t, (long long)ns[k], parts);
            cr_assert_eq(atomic_load(&r.calls), parts);
            int64_t next = 0;
            for (int p = 0; p < parts; p++) {
                cr_assert_eq(r.lo[p], next, "%d threads, part %d starts at %lld", t, p,
                             (long long)r.lo[p]);
                cr_assert_gt(r.hi[p], r.lo[p], "%d threads: part %d is empty", t, p);
                next = r.hi[p];
            }
            cr_assert_eq(next, ns[k]);
        }
    }
    sp_ref_set_threads(0);
}

Test(par, an_empty_range_should_call_nothing)
{
    ranges r;
    memset(&r, 0, sizeof r);
    sp_ref_set_threads(8);
    cr_assert_eq(sp_parallel_for(0, 1 << 30, record, &r), 0);
    cr_assert_eq(sp_parallel_for(-3, 1 << 30, record, &r), 0);
    sp_ref_set_threads(0);
    cr_assert_eq(atomic_load(&r.calls), 0);
}

Test(par, small_work_should_stay_on_the_calling_thread)
{
    ranges r;
    memset(&r, 0, sizeof r);
    sp_ref_set_threads(0);
    cr_assert_eq(sp_parallel_for(1000000, 1000, record, &r), 1);
    cr_assert_eq(r.lo[0], 0);
    cr_assert_eq(r.hi[0], 1000000);
}

/* The verifier's kind of reduction: count the bad entries (NaN or beyond a
 * bound), keep the first, take the largest finite error. */
typedef struct red {
    size_t bad, first;
    double max;
} red;

typedef struct red_job {
    const double *v;
    red part[SP_PAR_MAX];
} red_job;

static void red_scan(const double *v, size_t lo, size_t hi, red *r)
{
    memset(r, 0, sizeof *r);
    for (size_t i = lo; i < hi; i++) {
        double err = fabs(v[i]);
        if (isnan(v[i]) || !(err <= 1.0)) {
            if (r->bad++ == 0)
                r->first = i;
        }
        if (!isnan(err) && err > r->max)
            r->max = err;
    }
}

static void red_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    red_job *j = ctx;
    red_scan(j->v, (size_t)lo, (size_t)hi, &j->part[part]);
}

Test(par, a_first_bad_index_merged_in_part_order_should_equal_the_serial_one)
{
    enum { N = 100003 };
    double *v = malloc(N * sizeof *v);
    dt_rng g;
    dt_rng_seed(&g, 11);
    for (size_t i = 0; i < N; i++)
        v[i] = dt_rng_uniform(&g) * 2.0 - 1.0;
    /* Bad entries late in the array, then one earlier at a part boundary
     * of some counts and one inside: whichever thread finds its bad entry
     * first, the reported one must be the lowest index. */
    v[N - 1] = NAN;
    v[90000] = 7.0;
    v[N / 2] = INFINITY;
    v[N / 3] = -2.5;
    v[12345] = NAN;
    red serial;
    red_scan(v, 0, N, &serial);
    cr_assert_eq(serial.first, 12345);
    cr_assert_eq(serial.bad, 5);
    for (int t = 1; t <= SP_PAR_MAX; t++) {
        sp_ref_set_threads(t);
        red_job j = {.v = v};
        int parts = sp_parallel_for(N, N, red_range, &j);
        red m = {0};
        for (int p = 0; p < parts; p++) {
            if (m.bad == 0 && j.part[p].bad > 0)
                m.first = j.part[p].first;
            m.bad += j.part[p].bad;
            if (j.part[p].max > m.max)
                m.max = j.part[p].max;
        }
        cr_assert_eq(m.bad, serial.bad, "%d threads", t);
        cr_assert_eq(m.first, serial.first, "%d threads: first bad %zu", t, m.first);
        cr_assert(memcmp(&m.max, &serial.max, sizeof m.max) == 0, "%d threads", t);
    }
    sp_ref_set_threads(0);
    free(v);
}
