/* test_gen.c -- matrix generators (gen:KIND:...) and block-diagonal replication. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Generate, fail the test with the generator's message if it refuses, and
 * check every CSR invariant (sorted unique columns, offsets, finite values). */
static sp_csr *gen(const char *spec)
{
    dt_err e = {0};
    sp_csr *a = sp_generate(spec, &e);
    cr_assert_not_null(a, "%s: %s", spec, e.msg);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s: %s", spec, e.msg);
    return a;
}

static int64_t len(const sp_csr *a, int32_t i)
{
    return a->rowptr[i + 1] - a->rowptr[i];
}

static int64_t max_len(const sp_csr *a)
{
    int64_t m = 0;
    for (int32_t i = 0; i < a->rows; i++)
        m = len(a, i) > m ? len(a, i) : m;
    return m;
}

static void fingerprint(const char *spec, char out[17])
{
    sp_csr *a = gen(spec);
    sp_csr_fingerprint(a, out);
    sp_csr_free(a);
}

/* One spec per kind; the seed is appended. */
static const char *seeded_specs[] = {
    "gen:stencil5:rows=400",
    "gen:stencil7:rows=216",
    "gen:stencil27:rows=125",
    "gen:banded:rows=300,bw=4",
    "gen:uniform:rows=500,cols=700,nnz=6000",
    "gen:rmat:rows=1000,nnz=12000",
    "gen:block:rows=240,nnz=4000,b=4",
    "gen:dl:rows=300,cols=256,nnz=5000",
    "gen:arrow:rows=400,nnz=3000,hubs=2",
    "gen:powerlaw:rows=500,cols=900,nnz=6000,exp=1.2",
    "gen:blockdiag:rows=300,b=12",
    "gen:bandout:rows=300,bw=2,outliers=40",
    "gen:uniform:rows=500,nnz=6000,empty=0.25",
};

Test(gen, same_seed_should_give_identical_matrix_and_another_seed_a_different_one)
{
    for (size_t k = 0; k < DT_ARRAY_LEN(seeded_specs); k++) {
        char spec[128], f1[17], f2[17], f3[17];
        snprintf(spec, sizeof spec, "%s,seed=5", seeded_specs[k]);
        fingerprint(spec, f1);
        fingerprint(spec, f2);
        cr_assert_str_eq(f1, f2, "%s is not deterministic", spec);
        snprintf(spec, sizeof spec, "%s,seed=6", seeded_specs[k]);
        fingerprint(spec, f3);
        cr_assert_str_neq(f1, f3, "%s: seeds 5 and 6 gave the same matrix", spec);
    }
}

Test(gen, seed_should_default_to_1)
{
    char f1[17], f2[17];
    fingerprint("gen:uniform:rows=100,nnz=900", f1);
    fingerprint("gen:uniform:rows=100,nnz=900,seed=1", f2);
    cr_assert_str_eq(f1, f2);
}

/* The generators inline their own copy of xoshiro256** for speed; these
 * fingerprints pin the streams (structure and values) so that a change of
 * algorithm, platform or compiler that alters a generated matrix is caught.
 * They were recorded from this implementation. */
Test(gen, generated_matrices_should_match_recorded_fingerprints)
{
    static const struct {
        const char *spec, *fp;
    } pinned[] = {
        {"gen:uniform:rows=1000,cols=800,nnz=9000,seed=3", "5095a003202fe8ee"},
        {"gen:rmat:rows=1000,nnz=9000,seed=3", "f28de014920f3b50"},
        {"gen:dl:rows=100,cols=90,nnz=4321,seed=3", "75cc8eb0a4a5d61f"},
        {"gen:block:rows=100,nnz=2000,b=5,seed=3", "e2f10e53b8c834f7"},
        {"gen:uniform:rows=300,cols=20,nnz=5000,seed=3",
         "6a41ef92f9da6e82"}, /* rows drawn as complements */
    };
    for (size_t k = 0; k < DT_ARRAY_LEN(pinned); k++) {
        char fp[17];
        fingerprint(pinned[k].spec, fp);
        cr_expect_str_eq(fp, pinned[k].fp, "%s", pinned[k].spec);
    }
}

Test(gen, random_kinds_should_meet_rows_and_nnz_exactly)
{
    static const struct {
        const char *spec;
        int32_t rows, cols;
        int64_t nnz;
    } want[] = {
        {"gen:uniform:rows=4000,nnz=50000", 4000, 4000, 50000},
        {"gen:uniform:rows=300,cols=20,nnz=5000", 300, 20, 5000}, /* dense: complement path */
        {"gen:uniform:rows=8,cols=8,nnz=64", 8, 8, 64},           /* completely full */
        {"gen:dl:rows=1000,cols=3000,nnz=12345", 1000, 3000, 12345},
        {"gen:rmat:rows=4K,nnz=64K", 4000, 4000, 64000},
        {"gen:rmat:rows=4096,cols=1000,nnz=16000", 4096, 1000, 16000},
        {"gen:rmat:rows=1000,cols=5000,nnz=30000", 1000, 5000, 30000},
        {"gen:rmat:rows=1,nnz=1", 1, 1, 1},
        {"gen:uniform:rows=10,nnz=0", 10, 10, 0},
    };
    for (size_t k = 0; k < DT_ARRAY_LEN(want); k++) {
        sp_csr *a = gen(want[k].spec);
        cr_assert_eq(a->rows, want[k].rows, "%s", want[k].spec);
        cr_assert_eq(a->cols, want[k].cols, "%s", want[k].spec);
        cr_assert_eq(a->nnz, want[k].nnz, "%s: nnz %lld", want[k].spec, (long long)a->nnz);
        cr_assert_eq(a->pattern, 0);
        sp_csr_free(a);
    }
}

/* Rows that R-MAT asks to be nearly full stop drawing after a budget; the
 * documented tolerance is that only such rows fall short. Here every row of
 * a 5 x 1000 matrix is asked for 600 skewed columns on average. */
Test(gen, rmat_with_saturated_rows_should_stay_within_ten_percent)
{
    sp_csr *a = gen("gen:rmat:rows=5,cols=1000,nnz=3000");
    cr_assert_leq(a->nnz, 3000);
    cr_assert_geq(a->nnz, 2700, "nnz %lld", (long long)a->nnz);
    for (int32_t i = 0; i < a->rows; i++)
        cr_assert_leq(len(a, i), 1000);
    sp_csr_free(a);
    /* matrices asked to be completely full do get there: the last edges
     * find the few rows with room, and full rows need no column draws */
    a = gen("gen:rmat:rows=6,nnz=36");
    cr_assert_eq(a->nnz, 36);
    sp_csr_free(a);
    a = gen("gen:rmat:rows=20000,cols=8,nnz=160000");
    cr_assert_eq(a->nnz, 160000);
    sp_csr_free(a);
    /* nearly full: rows keep their counts, short only where columns run out */
    a = gen("gen:rmat:rows=20000,cols=8,nnz=150000");
    cr_assert_geq(a->nnz, 135000, "nnz %lld", (long long)a->nnz);
    sp_csr_free(a);
}

Test(gen, rmat_should_be_skewed_and_uniform_should_not)
{
    sp_csr *r = gen("gen:rmat:rows=64K,nnz=1M");
    sp_csr *u = gen("gen:uniform:rows=64K,nnz=1M");
    double mean = 1e6 / 64e3;
    cr_assert_gt((double)max_len(r), 20 * mean, "rmat max row %lld", (long long)max_len(r));
    cr_assert_lt((double)max_len(u), 4 * mean, "uniform max row %lld", (long long)max_len(u));
    /* R-MAT's heaviest rows are those with few 1 bits: row 0 leads */
    cr_assert_eq(len(r, 0), max_len(r));
    /* binomial row lengths: the variance is close to the mean */
    double s2 = 0;
    for (int32_t i = 0; i < u->rows; i++)
        s2 += (len(u, i) - mean) * (len(u, i) - mean);
    s2 /= u->rows;
    cr_assert(s2 > 0.8 * mean && s2 < 1.2 * mean, "uniform row-length variance %g", s2);
    sp_csr_free(r);
    sp_csr_free(u);
}

Test(gen, rmat_with_equal_quadrants_should_look_uniform)
{
    sp_csr *a = gen("gen:rmat:rows=4096,nnz=64K,a=0.25,b=0.25,c=0.25");
    cr_assert_lt(max_len(a), 4 * 16, "max row %lld", (long long)max_len(a));
    sp_csr_free(a);
}

/* Every row of a 2D grid: 5 entries inside, 4 on an edge, 3 in a corner. */
Test(gen, stencil5_should_have_the_five_point_pattern)
{
    sp_csr *a = gen("gen:stencil5:rows=100");
    int32_t n = 10;
    cr_assert_eq(a->rows, n * n);
    cr_assert_eq(a->cols, n * n);
    cr_assert_eq(a->nnz, 5 * n * n - 4 * n);
    for (int32_t y = 0; y < n; y++) {
        for (int32_t x = 0; x < n; x++) {
            int32_t i = y * n + x;
            int border = (x == 0 || x == n - 1) + (y == 0 || y == n - 1);
            cr_assert_eq(len(a, i), 5 - border, "row %d", i);
            /* the diagonal and the neighbours, nothing else */
            for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
                int32_t j = a->col[k];
                int d = abs(j % n - x) + abs(j / n - y);
                cr_assert_leq(d, 1, "row %d has column %d", i, j);
            }
        }
    }
    sp_csr_free(a);
    /* rows round to the nearest square: sqrt(90) = 9.49, sqrt(91) = 9.54 */
    a = gen("gen:stencil5:rows=90");
    cr_assert_eq(a->rows, 81);
    sp_csr_free(a);
    a = gen("gen:stencil5:rows=91");
    cr_assert_eq(a->rows, 100);
    sp_csr_free(a);
}

Test(gen, stencil7_and_27_should_have_3d_patterns)
{
    int32_t n = 5;
    sp_csr *a = gen("gen:stencil7:rows=125");
    cr_assert_eq(a->rows, n * n * n);
    cr_assert_eq(a->nnz, 7 * n * n * n - 6 * n * n);
    int32_t centre = (2 * n + 2) * n + 2;
    cr_assert_eq(len(a, centre), 7);
    cr_assert_eq(len(a, 0), 4);
    sp_csr_free(a);
    a = gen("gen:stencil27:rows=125");
    cr_assert_eq(a->nnz, (3 * n - 2) * (3 * n - 2) * (3 * n - 2));
    cr_assert_eq(len(a, centre), 27);
    cr_assert_eq(len(a, 0), 8);
    for (int64_t k = a->rowptr[centre]; k < a->rowptr[centre + 1]; k++) {
        int32_t j = a->col[k];
        int32_t dx = abs(j % n - 2), dy = abs(j / n % n - 2), dz = abs(j / (n * n) - 2);
        cr_assert(dx <= 1 && dy <= 1 && dz <= 1, "centre row has column %d", j);
    }
    sp_csr_free(a);
    /* cube rounding: cbrt(91) = 4.498 -> 64 rows, cbrt(92) = 4.514 -> 125 */
    a = gen("gen:stencil7:rows=91");
    cr_assert_eq(a->rows, 64);
    sp_csr_free(a);
    a = gen("gen:stencil27:rows=92");
    cr_assert_eq(a->rows, 125);
    sp_csr_free(a);
}

static void check_full_band(const sp_csr *a, int64_t bw)
{
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t lo = i - bw < 0 ? 0 : i - bw;
        int64_t hi = i + bw > a->cols - 1 ? a->cols - 1 : i + bw;
        cr_assert_eq(len(a, i), hi >= lo ? hi - lo + 1 : 0, "row %d", i);
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++)
            cr_assert_eq(a->col[k], lo + (k - a->rowptr[i]), "row %d", i);
    }
}

Test(gen, banded_should_fill_exactly_the_band)
{
    sp_csr *a = gen("gen:banded:rows=50,bw=3");
    check_full_band(a, 3);
    cr_assert_eq(a->nnz, 50 * 7 - 12);
    sp_csr_free(a);
    /* from nnz: 7000 over 1000 rows is half-width 3 (6988 entries) */
    a = gen("gen:banded:rows=1000,nnz=7000");
    check_full_band(a, 3);
    cr_assert_eq(a->nnz, 6988);
    sp_csr_free(a);
    /* rectangular: rows past the last column are empty */
    a = gen("gen:banded:rows=20,cols=6,bw=2");
    check_full_band(a, 2);
    cr_assert_eq(len(a, 19), 0);
    sp_csr_free(a);
}

/* Every aligned b x b block that holds an entry is full. */
static void check_block_fill(const char *spec, int32_t b, int64_t blocks)
{
    sp_csr *a = gen(spec);
    dt_err e = {0};
    sp_bsr *m = sp_csr_to_bsr(a, b, &e);
    cr_assert_not_null(m, "%s", e.msg);
    cr_assert_eq(m->nblocks, blocks, "%s: %lld blocks", spec, (long long)m->nblocks);
    cr_assert_eq(a->nnz, blocks * b * b, "%s: block fill is not 1", spec);
    sp_bsr_free(m);
    sp_csr_free(a);
}

Test(gen, block_should_have_fill_one_at_its_block_size)
{
    check_block_fill("gen:block:rows=256,nnz=4096,b=4", 4, 256);
    check_block_fill("gen:block:rows=64,cols=128,nnz=6400,b=8", 8, 100);
    check_block_fill("gen:block:rows=30,nnz=900,b=3", 3, 100); /* completely full */
    /* at a finer block size the same matrix is still full, at a coarser one not */
    sp_csr *a = gen("gen:block:rows=256,nnz=4096,b=4");
    dt_err e = {0};
    sp_bsr *m = sp_csr_to_bsr(a, 8, &e);
    cr_assert_not_null(m);
    cr_assert_lt(a->nnz, m->nblocks * 64);
    sp_bsr_free(m);
    sp_csr_free(a);
}

Test(gen, block_edges_should_be_cut_at_the_matrix_border)
{
    /* 10 x 9 with b = 3: the last block row has one row; nnz counts what
     * survives the cut, the block count is round(60 / 9) = 7 */
    sp_csr *a = gen("gen:block:rows=10,cols=9,nnz=60,b=3");
    dt_err e = {0};
    sp_bsr *m = sp_csr_to_bsr(a, 3, &e);
    cr_assert_not_null(m);
    cr_assert_eq(m->nblocks, 7);
    int64_t expect = 0;
    for (int32_t br = 0; br < m->brows; br++)
        expect += (m->browptr[br + 1] - m->browptr[br]) * (br == 3 ? 3 : 9);
    cr_assert_eq(a->nnz, expect);
    sp_bsr_free(m);
    sp_csr_free(a);
}

Test(gen, dl_rows_should_be_within_one_of_the_mean)
{
    static const char *specs[] = {
        "gen:dl:rows=1000,cols=500,nnz=12345",
        "gen:dl:rows=10,cols=100,nnz=905", /* 90+ of 100 columns: complement path */
        "gen:dl:rows=7,cols=7,nnz=49",
    };
    for (size_t k = 0; k < DT_ARRAY_LEN(specs); k++) {
        sp_csr *a = gen(specs[k]);
        int64_t lo = a->nnz / a->rows, hi = lo + (a->nnz % a->rows != 0);
        int64_t total = 0;
        for (int32_t i = 0; i < a->rows; i++) {
            cr_assert(len(a, i) == lo || len(a, i) == hi, "%s: row %d has %lld", specs[k], i,
                      (long long)len(a, i));
            total += len(a, i);
        }
        cr_assert_eq(total, a->nnz);
        sp_csr_free(a);
    }
}

/* Column choice must not favour any region: with 100 columns and 40 000
 * entries, every column should get about 400. */
Test(gen, uniform_and_dl_columns_should_be_spread_evenly)
{
    static const char *specs[] = {"gen:uniform:rows=2000,cols=100,nnz=40000",
                                  "gen:dl:rows=800,cols=100,nnz=40000"};
    for (size_t s = 0; s < DT_ARRAY_LEN(specs); s++) {
        sp_csr *a = gen(specs[s]);
        int64_t hits[100] = {0};
        for (int64_t k = 0; k < a->nnz; k++)
            hits[a->col[k]]++;
        for (int j = 0; j < 100; j++)
            cr_assert(hits[j] > 300 && hits[j] < 500, "%s: column %d has %lld", specs[s], j,
                      (long long)hits[j]);
        sp_csr_free(a);
    }
}

Test(gen, values_should_be_in_range_and_away_from_zero)
{
    sp_csr *a = gen("gen:uniform:rows=1000,nnz=20000");
    int neg = 0, pos = 0;
    double sum = 0;
    for (int64_t k = 0; k < a->nnz; k++) {
        double v = a->val[k];
        cr_assert(v >= -1.0 && v < 1.0 && fabs(v) >= 1.0 / 64, "value %g", v);
        neg += v < 0;
        pos += v > 0;
        sum += v;
    }
    cr_assert(neg > 9000 && pos > 9000);
    cr_assert_lt(fabs(sum / (double)a->nnz), 0.02);
    sp_csr_free(a);
}

Test(gen, sizes_should_accept_suffixes)
{
    sp_csr *a = gen("gen:uniform:rows=2K,cols=1Ki,nnz=0.01M");
    cr_assert_eq(a->rows, 2000);
    cr_assert_eq(a->cols, 1024);
    cr_assert_eq(a->nnz, 10000);
    sp_csr_free(a);
}

Test(gen, bad_specs_should_fail_with_one_clear_line)
{
    static const struct {
        const char *spec, *msg;
    } bad[] = {
        {"gen:rmat:rowz=5,nnz=10",
         "gen:rmat: unknown key 'rowz' (keys: rows, cols, nnz, seed, empty, a, b, c)"},
        {"gen:foo:rows=5", "gen: unknown kind 'foo' (kinds: stencil5, stencil7, stencil27, banded, "
                           "uniform, rmat, block, dl, arrow, powerlaw, blockdiag, bandout)"},
        {"gen:uniform:rows=4,nnz=100", "gen:uniform: nnz 100 > rows*cols 16"},
        {"gen:dl:rows=4,cols=2,nnz=9", "gen:dl: nnz 9 > rows*cols 8"},
        {"uniform:rows=4", "gen: expected gen:KIND:key=value,... (got 'uniform:rows=4')"},
        {"gen:uniform:rows=3G,nnz=1", "gen:uniform: rows 3000000000 out of range (1..2147483647)"},
        {"gen:uniform:rows=4,cols=2147483648,nnz=1",
         "gen:uniform: cols 2147483648 out of range (1..2147483647)"},
        {"gen:uniform:rows=0,nnz=0", "gen:uniform: rows 0 out of range (1..2147483647)"},
        {"gen:uniform:rows=4", "gen:uniform: missing nnz (keys: rows, cols, nnz, seed, empty)"},
        {"gen:stencil5", "gen:stencil5: missing rows (keys: rows, seed, empty)"},
        {"gen:stencil5:rows=100,nnz=5", "gen:stencil5: unknown key 'nnz' (keys: rows, seed, empty)"},
        {"gen:stencil5:rows=2147483647", "gen:stencil5: rows 2147483647 gives a side-46341 grid of "
                                         "2147488281 rows, over 2147483647"},
        {"gen:dl:rows=4,nnz=x",
         "gen:dl: bad nnz 'x' (expected a whole number, K/M/G suffixes allowed)"},
        {"gen:dl:rows=4,nnz=-1",
         "gen:dl: bad nnz '-1' (expected a whole number, K/M/G suffixes allowed)"},
        {"gen:rmat:rows",
         "gen:rmat: expected key=value, got 'rows' (keys: rows, cols, nnz, seed, empty, a, b, c)"},
        {"gen:rmat:rows=4,rows=5", "gen:rmat: key 'rows' given twice"},
        {"gen:rmat:rows=4,nnz=4,a=zz", "gen:rmat: bad a 'zz' (expected a probability in [0, 1])"},
        {"gen:rmat:rows=4,nnz=4,c=1.5", "gen:rmat: bad c '1.5' (expected a probability in [0, 1])"},
        {"gen:rmat:rows=4,nnz=4,a=0.9,b=0.1,c=0.1",
         "gen:rmat: a + b + c = 1.1 is over 1 (d = 1 - a - b - c)"},
        {"gen:rmat:rows=4,nnz=4,a=0,b=0.5,c=0.25",
         "gen:rmat: a=0 b=0.5 c=0.25 d=0.25: a+b, c+d, a/(a+b) and c/(c+d) must each be at least "
         "0.001"},
        {"gen:banded:rows=10,nnz=20,bw=1", "gen:banded: give nnz or bw, not both"},
        {"gen:banded:rows=10", "gen:banded: missing nnz or bw (keys: rows, cols, nnz, bw, seed, empty)"},
        {"gen:banded:rows=10,bw=3000000000",
         "gen:banded: bw 3000000000 out of range (0..2147483647)"},
        {"gen:block:rows=4,nnz=4,b=8", "gen:block: b 8 is larger than the matrix (4 x 4)"},
        {"gen:block:rows=4000,nnz=4,b=0", "gen:block: b 0 out of range (1..1024)"},
        {"gen:dl:rows=4,nnz=4,seed=x",
         "gen:dl: bad seed 'x' (expected a whole number, K/M/G suffixes allowed)"},
        {"gen:dl:rows=4,nnz=4,bw=2", "gen:dl: unknown key 'bw' (keys: rows, cols, nnz, seed, empty)"},
        {"gen:uniform:rows=4,nnz=4,empty=1", "gen:uniform: bad empty '1' (expected a fraction of "
                                            "rows in [0, 1))"},
        {"gen:arrow:rows=100,nnz=50", "gen:arrow: nnz 50 is less than the 199 the hubs take (hubs "
                                      "* hublen + (rows - hubs) * hubs)"},
        {"gen:arrow:rows=10,nnz=20,hubs=11", "gen:arrow: hubs 11 out of range (1..10)"},
        {"gen:arrow:rows=10,nnz=20,hubs=2,hublen=1", "gen:arrow: hublen 1 out of range (2..10)"},
        {"gen:powerlaw:rows=10,nnz=5", "gen:powerlaw: nnz 5 is less than rows 10 (every row gets "
                                       "an entry)"},
        {"gen:powerlaw:rows=10,nnz=50,exp=-1",
         "gen:powerlaw: bad exp '-1' (expected a number from 0 to 8)"},
        {"gen:blockdiag:rows=10,b=0", "gen:blockdiag: b 0 out of range (1..4096)"},
        {"gen:bandout:rows=10,bw=1", "gen:bandout: missing outliers (keys: rows, cols, bw, "
                                     "outliers, seed, empty)"},
        {"gen:bandout:rows=4,bw=1,outliers=7",
         "gen:bandout: outliers 7 > the 6 positions outside the band"},
    };
    for (size_t k = 0; k < DT_ARRAY_LEN(bad); k++) {
        dt_err e = {0};
        sp_csr *a = sp_generate(bad[k].spec, &e);
        cr_expect_null(a, "%s was accepted", bad[k].spec);
        sp_csr_free(a);
        cr_expect_str_eq(e.msg, bad[k].msg, "%s", bad[k].spec);
        cr_expect_null(strchr(e.msg, '\n'));
    }
}

Test(gen, null_error_handle_should_be_allowed)
{
    cr_assert_null(sp_generate("gen:foo", NULL));
}

Test(gen, replicate_should_tile_block_diagonally)
{
    sp_csr *a = gen("gen:uniform:rows=30,cols=20,nnz=200");
    dt_err e = {0};
    sp_csr *r = sp_replicate(a, 3, &e);
    cr_assert_not_null(r, "%s", e.msg);
    cr_assert_eq(sp_csr_validate(r, &e), 0, "%s", e.msg);
    cr_assert_eq(r->rows, 90);
    cr_assert_eq(r->cols, 60);
    cr_assert_eq(r->nnz, 600);
    for (int32_t t = 0; t < 3; t++) {
        for (int32_t i = 0; i < a->rows; i++) {
            int32_t ri = t * a->rows + i;
            cr_assert_eq(len(r, ri), len(a, i));
            for (int64_t k = 0; k < len(a, i); k++) {
                cr_assert_eq(r->col[r->rowptr[ri] + k], a->col[a->rowptr[i] + k] + t * a->cols);
                cr_assert_eq(r->val[r->rowptr[ri] + k], a->val[a->rowptr[i] + k]);
            }
        }
    }
    sp_csr_free(r);
    /* k = 1 is a copy; the pattern flag travels */
    a->pattern = 1;
    r = sp_replicate(a, 1, &e);
    char f1[17], f2[17];
    sp_csr_fingerprint(a, f1);
    sp_csr_fingerprint(r, f2);
    cr_assert_str_eq(f1, f2);
    cr_assert_eq(r->pattern, 1);
    sp_csr_free(r);
    sp_csr_free(a);
}

Test(gen, replicate_should_reject_bad_counts)
{
    sp_csr *a = gen("gen:uniform:rows=3000,nnz=10");
    dt_err e = {0};
    cr_assert_null(sp_replicate(a, 0, &e));
    cr_assert_str_eq(e.msg, "replicate: k must be at least 1 (got 0)");
    cr_assert_null(sp_replicate(a, 1000000, &e));
    cr_assert_str_eq(
        e.msg, "replicate: 3000 x 3000 tiled 1000000 times exceeds 2147483647 rows or columns");
    sp_csr_free(a);
    /* an empty matrix tiles to a larger empty one */
    sp_csr *z = sp_csr_new(2, 3, 0, &e);
    sp_csr *r = sp_replicate(z, 4, &e);
    cr_assert_not_null(r);
    cr_assert_eq(r->rows, 8);
    cr_assert_eq(r->nnz, 0);
    cr_assert_eq(sp_csr_validate(r, &e), 0, "%s", e.msg);
    sp_csr_free(r);
    sp_csr_free(z);
}

/* ---- shapes of real matrices ---------------------------------------------- */

Test(gen, arrow_should_have_dense_hub_rows_and_columns_and_exact_nnz)
{
    sp_csr *a = gen("gen:arrow:rows=3000,cols=2500,nnz=40000,hubs=3,seed=7");
    cr_assert_eq(a->rows, 3000);
    cr_assert_eq(a->cols, 2500);
    cr_assert_eq(a->nnz, 40000);
    for (int32_t i = 0; i < 3; i++)
        cr_expect_eq(len(a, i), 2500, "hub row %d has %lld entries", i, (long long)len(a, i));
    int64_t most_other = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        for (int32_t j = 0; j < 3; j++)
            cr_expect_eq(a->col[a->rowptr[i] + j], j, "row %d lacks hub column %d", i, j);
        if (i >= 3)
            most_other = len(a, i) > most_other ? len(a, i) : most_other;
    }
    /* the rest share what is left evenly: (40000 - 7500 - 2997 * 3) / 2997 = 7.8 */
    cr_expect_leq(most_other, 3 + 8, "a non-hub row has %lld entries", (long long)most_other);
    sp_csr_free(a);
    /* hublen: hub rows of a set length, not dense */
    a = gen("gen:arrow:rows=2000,nnz=30000,hubs=2,hublen=700");
    cr_expect_eq(len(a, 0), 700);
    cr_expect_eq(len(a, 1), 700);
    cr_expect_eq(a->nnz, 30000);
    sp_csr_free(a);
}

static int cmp_desc(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return a < b ? 1 : a > b ? -1 : 0;
}

/* The exponent read back from the sorted row lengths: log(L[0] / L[r]) /
 * log(r + 1). */
static double rank_exponent(const sp_csr *a, int32_t r)
{
    int64_t *l = malloc((size_t)a->rows * sizeof *l);
    for (int32_t i = 0; i < a->rows; i++)
        l[i] = len(a, i);
    qsort(l, (size_t)a->rows, sizeof *l, cmp_desc);
    double ex = log((double)l[0] / (double)l[r]) / log((double)r + 1);
    free(l);
    return ex;
}

Test(gen, powerlaw_rows_should_follow_the_set_exponent)
{
    static const struct {
        const char *spec;
        double ex;
    } cases[] = {
        {"gen:powerlaw:rows=20000,cols=100000,nnz=400000,exp=1", 1.0},
        {"gen:powerlaw:rows=20000,cols=1000000,nnz=400000,exp=1.5", 1.5},
        {"gen:powerlaw:rows=20000,cols=100000,nnz=400000,exp=0.6", 0.6},
    };
    for (size_t k = 0; k < DT_ARRAY_LEN(cases); k++) {
        sp_csr *a = gen(cases[k].spec);
        cr_expect_eq(a->nnz, 400000, "%s: nnz %lld", cases[k].spec, (long long)a->nnz);
        int32_t empty = 0;
        for (int32_t i = 0; i < a->rows; i++)
            empty += len(a, i) == 0;
        cr_expect_eq(empty, 0, "%s: %d empty rows", cases[k].spec, empty);
        double ex = rank_exponent(a, 9);
        cr_expect(fabs(ex - cases[k].ex) < 0.05 * cases[k].ex, "%s: exponent %.3f", cases[k].spec,
                  ex);
        sp_csr_free(a);
    }
    /* the longest row is not always row 0: ranks are shuffled */
    sp_csr *a = gen("gen:powerlaw:rows=5000,nnz=50000,exp=1,seed=3");
    cr_expect_lt(len(a, 0), max_len(a));
    sp_csr_free(a);
}

Test(gen, powerlaw_should_make_wide_and_tall_skewed_matrices)
{
    sp_csr *w = gen("gen:powerlaw:rows=1000,cols=60000,nnz=50000,exp=1.2");
    sp_csr *t = gen("gen:powerlaw:rows=60000,cols=1000,nnz=200000,exp=0.8");
    cr_expect_eq(w->rows, 1000);
    cr_expect_eq(w->cols, 60000);
    cr_expect_eq(w->nnz, 50000);
    cr_expect_eq(t->rows, 60000);
    cr_expect_eq(t->cols, 1000);
    cr_expect_eq(t->nnz, 200000);
    /* skewed: the longest row far past the mean */
    cr_expect_gt(max_len(w), 20 * 50);
    cr_expect_gt(max_len(t), 20 * 200000 / 60000);
    cr_expect_leq(max_len(t), 1000);
    sp_csr_free(w);
    sp_csr_free(t);
}

Test(gen, empty_should_empty_that_fraction_of_rows)
{
    static const char *specs[] = {
        "gen:uniform:rows=10000,nnz=100000,empty=0.3",
        "gen:rmat:rows=8192,nnz=120000,empty=0.5,seed=2",
        "gen:powerlaw:rows=10000,cols=20000,nnz=80000,exp=1,empty=0.2",
        "gen:stencil5:rows=10000,empty=0.1",
    };
    static const double frac[] = {0.3, 0.5, 0.2, 0.1};
    for (size_t k = 0; k < DT_ARRAY_LEN(specs); k++) {
        sp_csr *a = gen(specs[k]);
        int32_t empty = 0;
        for (int32_t i = 0; i < a->rows; i++)
            empty += len(a, i) == 0;
        double f = (double)empty / a->rows;
        /* exactly round(frac * rows) emptied, plus rows the kind left empty
         * (R-MAT leaves some) */
        cr_expect_geq(empty, (int32_t)(frac[k] * a->rows + 0.5), "%s: %.4f empty", specs[k], f);
        cr_expect_leq(f, frac[k] + (k == 1 ? 0.25 : 0.01), "%s: %.4f empty", specs[k], f);
        sp_csr_free(a);
    }
    /* uniform rows are all alike, so nnz drops by about the fraction */
    sp_csr *a = gen("gen:uniform:rows=10000,nnz=100000,empty=0.3");
    cr_expect(fabs((double)a->nnz - 70000) < 0.02 * 70000, "nnz %lld", (long long)a->nnz);
    sp_csr_free(a);
}

Test(gen, blockdiag_should_have_full_diagonal_blocks_of_the_drawn_sizes)
{
    sp_csr *a = gen("gen:blockdiag:rows=5000,b=24,seed=4");
    cr_assert_eq(a->rows, 5000);
    int32_t at = 0, blocks = 0;
    int sizes_seen[25] = {0};
    while (at < a->rows) {
        int64_t sz = len(a, at);
        cr_assert_gt(sz, 0);
        cr_assert_eq(a->col[a->rowptr[at]], at, "block at row %d does not start on the diagonal",
                     at);
        if (at + sz < a->rows) { /* the last one may be cut */
            cr_expect_geq(sz, 12);
            cr_expect_leq(sz, 24);
            sizes_seen[sz]++;
        }
        for (int32_t i = at; i < at + sz; i++) {
            cr_assert_eq(len(a, i), sz, "row %d of the block at %d", i, at);
            for (int64_t k = 0; k < sz; k++)
                cr_assert_eq(a->col[a->rowptr[i] + k], at + k);
        }
        at += (int32_t)sz;
        blocks++;
    }
    int distinct = 0;
    for (int s = 12; s <= 24; s++)
        distinct += sizes_seen[s] > 0;
    cr_expect_geq(distinct, 10, "block sizes barely vary: %d distinct", distinct);
    cr_expect_gt(blocks, 5000 / 24);
    sp_csr_free(a);
}

Test(gen, bandout_should_fill_the_band_and_place_exactly_the_outliers)
{
    static const char *specs[] = {
        "gen:bandout:rows=4000,bw=3,outliers=500,seed=9",
        "gen:bandout:rows=300,cols=5000,bw=2,outliers=800",  /* wide */
        "gen:bandout:rows=5000,cols=300,bw=2,outliers=800",  /* tall: rows past the band */
        "gen:bandout:rows=20,bw=1,outliers=342",             /* every position outside */
    };
    static const int64_t outliers[] = {500, 800, 800, 342};
    for (size_t s = 0; s < DT_ARRAY_LEN(specs); s++) {
        sp_csr *a = gen(specs[s]);
        int64_t out = 0, in = 0, band = 0;
        for (int32_t i = 0; i < a->rows; i++) {
            for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
                int64_t d = (int64_t)a->col[k] - i;
                if (d < -3 || d > 3 || (s > 0 && (d < -(s == 3 ? 1 : 2) || d > (s == 3 ? 1 : 2))))
                    out++;
                else
                    in++;
            }
        }
        int64_t bw = s == 0 ? 3 : s == 3 ? 1 : 2;
        for (int32_t i = 0; i < a->rows; i++)
            for (int64_t j = i - bw; j <= i + bw; j++)
                band += j >= 0 && j < a->cols;
        cr_expect_eq(out, outliers[s], "%s: %lld outliers", specs[s], (long long)out);
        cr_expect_eq(in, band, "%s: band holds %lld of %lld", specs[s], (long long)in,
                     (long long)band);
        sp_csr_free(a);
    }
}

/* issue 37: gen:rmat with 2e9 rows grew to 8.8 GB without answering. A
 * matrix is admitted only when it fits in the memory available. */
Test(gen, a_matrix_larger_than_free_memory_should_be_refused_at_once, .timeout = 10)
{
    setenv("DITTO_MEM_AVAILABLE", "2G", 1);
    dt_err e = {0};
    double t0 = dt_now();
    sp_csr *a = sp_generate("gen:rmat:rows=2000000000,nnz=1000", &e);
    cr_assert_null(a);
    cr_assert_lt(dt_now() - t0, 1.0);
    cr_assert(strstr(e.msg, "2000000000 x 2000000000 matrix with 1000 entries needs about 32.0 GB") &&
                  strstr(e.msg, "2.0 GB is available"),
              "%s", e.msg);
    /* The same limit lets an ordinary matrix through. */
    a = sp_generate("gen:uniform:rows=1000,nnz=5000", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
    unsetenv("DITTO_MEM_AVAILABLE");
    /* Without the override the machine's own figure is used. */
    cr_assert_gt(dt_mem_available(), 0);
}

/* Found by fuzz_gen (a 21 s input): R-MAT draws indices on a power-of-two
 * grid and draws again past rows; with a + b near its floor and rows just
 * past a power of two nearly every draw is rejected. The work is bounded
 * and the refusal says why. */
Test(gen, rmat_whose_indices_are_too_improbable_should_stop_and_say_so, .timeout = 30)
{
    dt_err e = {0};
    double t0 = dt_now();
    sp_csr *a =
        sp_generate("gen:rmat:rows=1025,cols=1025,nnz=200000,a=0.0006,b=0.0005,c=0.9", &e);
    cr_assert_null(a);
    cr_expect(strstr(e.msg, "too improbable"), "%s", e.msg);
    cr_expect(strstr(e.msg, "rows=1025"), "%s", e.msg);
    cr_expect_lt(dt_now() - t0, 5.0, "bounded work");
    /* the same skew on a power-of-two grid rejects nothing */
    a = sp_generate("gen:rmat:rows=1024,cols=1024,nnz=20000,a=0.0006,b=0.0005,c=0.9", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
}

/* Found by fuzz_gen: the band's entry count was a loop over rows, asked
 * about 31 times by the nnz search, so 2^31 rows took minutes before the
 * memory admission refused the matrix. Now it is closed-form. */
/* Found by fuzz_gen (run 4): both walked 2^31 rows (6 s and 100 s in the
 * release build) before the admission of the matrix refused it. */
Test(gen, huge_block_matrices_should_be_refused_before_any_walk_over_rows, .timeout = 30)
{
    setenv("DITTO_MEM_AVAILABLE", "16M", 1);
    dt_err e = {0};
    double t0 = dt_now();
    sp_csr *a = sp_generate("gen:blockdiag:rows=2147483647,b=1", &e);
    cr_assert_null(a);
    cr_expect(strstr(e.msg, "16.0 MB is available"), "%s", e.msg);
    a = sp_generate("gen:block:rows=2147483647,nnz=3000000", &e);
    cr_assert_null(a);
    cr_expect(strstr(e.msg, "16.0 MB is available"), "%s", e.msg);
    cr_expect_lt(dt_now() - t0, 2.0, "refused before walking the rows");
    /* what fits is still built */
    a = sp_generate("gen:blockdiag:rows=1000,b=8", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
    a = sp_generate("gen:block:rows=1000,nnz=8000", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr_free(a);
    unsetenv("DITTO_MEM_AVAILABLE");
}

Test(gen, a_huge_band_should_be_refused_at_once, .timeout = 30)
{
    setenv("DITTO_MEM_AVAILABLE", "16M", 1);
    dt_err e = {0};
    double t0 = dt_now();
    sp_csr *a = sp_generate("gen:banded:rows=2G,nnz=3G", &e);
    cr_assert_null(a);
    cr_expect(strstr(e.msg, "16.0 MB is available"), "%s", e.msg);
    a = sp_generate("gen:banded:rows=849M,bw=4M", &e);
    cr_assert_null(a);
    cr_expect_lt(dt_now() - t0, 2.0, "closed form, not a loop over rows");
    unsetenv("DITTO_MEM_AVAILABLE");
    /* the counts themselves: a 5 x 3 band of half-width 1 holds 2 + 3 + 2 + 1 */
    a = sp_generate("gen:banded:rows=5,cols=3,bw=1", &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_expect_eq(a->nnz, 8);
    sp_csr_free(a);
}
