/* test_battery.c -- what the battery's inputs are, without a GPU: the edge
 * matrices keep their classic shapes at seed 0 and move with any other
 * seed (no kernel can recognise them by their row counts), and the new edge
 * matrix holds rows of 64 to 4096 entries beside a few short ones; and the
 * reference comparison the checks of timed outputs run. */
#include "tests/common/testutil.h"

#include "gpu/worker/runner.h"
#include "gpu/worker/worker.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

static sp_csr *edge(int i, uint64_t seed, const char **name)
{
    dt_err e = {0};
    sp_csr *a = wk_edge_matrix_seeded(i, seed, name, &e);
    cr_assert_not_null(a, "edge %d seed %llu: %s", i, (unsigned long long)seed, e.msg);
    return a;
}

Test(battery, the_edge_matrices_should_keep_their_classic_sizes_at_seed_zero)
{
    static const int32_t rows[WK_NEDGE] = {257, 300, 1, 1237, 128};
    for (int i = 0; i < WK_NEDGE; i++) {
        const char *name = NULL;
        sp_csr *a = edge(i, 0, &name);
        cr_expect_eq(a->rows, rows[i], "%s: %d rows", name, a->rows);
        dt_err e = {0};
        const char *n2 = NULL;
        sp_csr *b = wk_edge_matrix(i, &n2, &e);
        cr_assert_not_null(b);
        cr_expect_eq(a->nnz, b->nnz, "wk_edge_matrix is seed 0");
        sp_csr_free(a);
        sp_csr_free(b);
    }
}

Test(battery, the_edge_matrices_should_move_with_the_seed)
{
    for (int i = 0; i < WK_NEDGE; i++) {
        if (i == 2)
            continue; /* 1x1 stays 1x1 */
        int32_t seen[32];
        int nseen = 0;
        const char *name = NULL;
        sp_csr *base = edge(i, 0, &name);
        for (uint64_t seed = 1; seed <= 24; seed++) {
            sp_csr *a = edge(i, seed * 7919, &name);
            cr_expect(a->rows >= base->rows * 87 / 100 && a->rows <= base->rows * 113 / 100,
                      "%s: %d rows against %d", name, a->rows, base->rows);
            int dup = 0;
            for (int k = 0; k < nseen; k++)
                dup |= seen[k] == a->rows;
            if (!dup && nseen < 32)
                seen[nseen++] = a->rows;
            sp_csr_free(a);
        }
        cr_expect(nseen >= 6, "%s: only %d distinct row counts over 24 seeds", name, nseen);
        sp_csr_free(base);
    }
}

Test(battery, the_mid_length_edge_matrix_should_hold_rows_of_64_to_4096)
{
    for (uint64_t seed = 0; seed < 4; seed++) {
        const char *name = NULL;
        sp_csr *a = edge(4, seed * 104729, &name);
        cr_assert_str_eq(name, "rows of 64 to 4096");
        int lo = 0, mid = 0, over1k = 0;
        for (int32_t r = 0; r < a->rows; r++) {
            int64_t len = a->rowptr[r + 1] - a->rowptr[r];
            cr_expect(len <= 4096, "row %d has %lld entries", r, (long long)len);
            if (len < 64)
                lo++;
            else
                mid++;
            if (len > 1000)
                over1k++;
        }
        cr_expect(lo >= a->rows / 10 && lo <= a->rows / 6, "%d short rows of %d", lo, a->rows);
        cr_expect(over1k >= 10, "only %d rows over 1000 entries", over1k);
        cr_expect(mid > 0);
        sp_csr_free(a);
    }
}

/* The comparison a timed-output check runs: the largest error over its
 * tolerance is found without a division an output, and must be the one a
 * division everywhere gives, NaN errors and zero tolerances included. */
Test(battery, the_reference_tally_should_find_the_largest_error_ratio_of_a_division_everywhere)
{
    enum { N = 4096 };
    double *got = malloc(N * sizeof *got), *ref = malloc(N * sizeof *ref),
           *tol = malloc(N * sizeof *tol);
    cr_assert(got && ref && tol);
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ref[i] = (double)(x % 1000) / 7.0;
        tol[i] = (i % 97 == 0) ? 0.0 : 1e-3 * (double)(1 + (x >> 20) % 50);
        got[i] = ref[i] + ((i % 5 == 0) ? 0.0 : (double)((x >> 30) % 100) * 1e-5);
        if (tol[i] == 0.0)
            got[i] = ref[i]; /* tolerance 0, no error: 0/0, not a ratio */
        if (i % 211 == 0)
            got[i] = NAN;
    }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            got[194] = ref[194] + 1.0; /* tolerance 0 with an error: an infinite ratio */
        double want = 0, want_err = 0;
        size_t bad = 0;
        for (int i = 0; i < N; i++) {
            double err = fabs(got[i] - ref[i]);
            if (isnan(got[i]) || !(err <= tol[i]))
                bad++;
            if (!isnan(err) && err > want_err)
                want_err = err;
            double r = err / tol[i];
            if (!isnan(r) && r > want)
                want = r;
        }
        cmp_arrays ca = {.got = got, .ref = ref, .tol = tol};
        tally t;
        run_reference_tally(&ca, 0, N, &t);
        cr_expect_eq(t.bad, bad, "pass %d: %zu bad, expected %zu", pass, t.bad, bad);
        cr_expect(t.max_ratio == want, "pass %d: max ratio %.17g, expected %.17g", pass,
                  t.max_ratio, want);
        cr_expect(t.max_err == want_err, "pass %d: max error %.17g, expected %.17g", pass,
                  t.max_err, want_err);
        cr_expect(pass == 0 ? isfinite(t.max_ratio) && t.max_ratio > 0.5 : isinf(t.max_ratio),
                  "pass %d: max ratio %g", pass, t.max_ratio);
    }
    free(got);
    free(ref);
    free(tol);
}
