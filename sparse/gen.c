/* gen.c -- synthetic matrix generators (gen:KIND:key=value,...) and block-diagonal replication.
 * Over 1,000 lines: one small function per generator, a dozen generators. */
#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Every generator builds its CSR row by row: row lengths are drawn first
 * (into rowptr, which is part of the result), then each row's columns are
 * drawn straight into the row, deduplicated through a hash set sized for the
 * longest row, and sorted in place. No COO, no global sort: extra memory is
 * O(longest row), which is what lets a 32M-entry R-MAT matrix fit in little
 * more than its CSR.
 *
 * Values are a separate pass in CSR order from their own stream, so a
 * generator's structure and its values never depend on each other's number
 * of draws. Same spec, same bits, on every platform: the only floating point
 * in structure decisions is IEEE-exact (+, *, /, sqrt, comparisons); cube
 * roots and square roots for grid sides are settled with integer tests. */

/* ---- random helpers ----------------------------------------------------- */

/* dt_rng_next, repeated here so that it inlines: the generators spend most
 * of their time drawing numbers, and a call per number through core's
 * out-of-line copy costs a third of the run. It must stay the same
 * algorithm (xoshiro256**): the test suite pins generated matrices by
 * fingerprint, which catches any drift between the two. */
static inline uint64_t rng_next(dt_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = ((s[1] * 5) << 7 | (s[1] * 5) >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = (s[3] << 45) | (s[3] >> 19);
    return result;
}

/* Keeps the upper half of a 64-bit draw for the next 32-bit request: the
 * generators mostly need numbers below 2^31, and one xoshiro step gives two. */
typedef struct bits32 {
    dt_rng r;
    uint64_t spare;
    int has_spare;
} bits32;

static void bits32_seed(bits32 *b, uint64_t seed)
{
    dt_rng_seed(&b->r, seed);
    b->has_spare = 0;
}

static inline uint32_t bits32_next(bits32 *b)
{
    if (b->has_spare) {
        b->has_spare = 0;
        return (uint32_t)(b->spare >> 32);
    }
    b->spare = rng_next(&b->r);
    b->has_spare = 1;
    return (uint32_t)b->spare;
}

/* Uniform in [0, n) for 0 < n <= 2^32, unbiased: Lemire's multiply-shift
 * with rejection of the short interval. */
static inline uint32_t below32(bits32 *b, uint64_t n)
{
    uint64_t m = (uint64_t)bits32_next(b) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t t = (uint32_t)((0x100000000ULL - n) % n); /* 2^32 mod n */
        while (low < t) {
            m = (uint64_t)bits32_next(b) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

/* Uniform in [-1, 1) without the band |v| < 1/64: values that small make
 * relative-error checks meaningless and look like explicit zeros in fp16. */
static double gen_value(dt_rng *r)
{
    for (;;) {
        double v = (double)(rng_next(r) >> 11) * 0x1.0p-53 * 2.0 - 1.0; /* dt_rng_uniform */
        if (fabs(v) >= 1.0 / 64.0)
            return v;
    }
}

/* Value stream for a seed: structure uses the seed itself. */
static void fill_values(sp_csr *a, uint64_t seed)
{
    dt_rng r;
    dt_rng_seed(&r, seed ^ 0x9e3779b97f4a7c15ULL);
    for (int64_t k = 0; k < a->nnz; k++)
        a->val[k] = gen_value(&r);
}

/* ---- sorting column lists -------------------------------------------------- */

/* Sort non-negative int32 keys ascending: insertion for short lists, LSD
 * radix on bytes past that, with only as many passes as the largest key
 * needs (small count arrays: this runs once per row). tmp holds n. */
static void sort_cols(int32_t *a, int64_t n, int32_t *tmp)
{
    if (n <= 64) {
        for (int64_t i = 1; i < n; i++) {
            int32_t v = a[i];
            int64_t j = i - 1;
            while (j >= 0 && a[j] > v) {
                a[j + 1] = a[j];
                j--;
            }
            a[j + 1] = v;
        }
        return;
    }
    uint32_t max = 0;
    for (int64_t i = 0; i < n; i++)
        max = (uint32_t)a[i] > max ? (uint32_t)a[i] : max;
    int32_t *src = a, *dst = tmp;
    for (int shift = 0; shift < 32 && (max >> shift) != 0; shift += 8) {
        int64_t count[257] = {0};
        for (int64_t i = 0; i < n; i++)
            count[(((uint32_t)src[i] >> shift) & 255u) + 1]++;
        for (int d = 0; d < 256; d++)
            count[d + 1] += count[d];
        for (int64_t i = 0; i < n; i++)
            dst[count[((uint32_t)src[i] >> shift) & 255u]++] = src[i];
        int32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != a)
        memcpy(a, src, (size_t)n * sizeof *a);
}

/* ---- filling one row with distinct columns ------------------------------ */

/* A source of column candidates for one row: draw(d, out, n) writes n
 * candidates. fill_distinct does the deduplication. */
typedef struct rmat_plan rmat_plan;
typedef struct drawer drawer;
struct drawer {
    void (*draw)(drawer *d, int32_t *out, int n);
    bits32 *bits;
    uint64_t limit;        /* uniform: candidates in [0, limit) */
    rmat_plan *plan;       /* R-MAT: the alias tables ... */
    int32_t row;           /* ... and the row whose columns are drawn */
};

/* Scratch shared by the rows of one matrix: an open-addressing set of the
 * columns a row already holds, sized for the longest row, which doubles as
 * the radix sort's buffer once the row is complete. */
typedef struct row_scratch {
    int32_t *table;
    int64_t cap; /* power of two >= 2 * longest row */
} row_scratch;

static int64_t set_cap(int64_t want)
{
    int64_t cap = 16;
    while (cap < 2 * want)
        cap *= 2;
    return cap;
}

static int scratch_init(row_scratch *s, int64_t longest, dt_err *e)
{
    s->cap = set_cap(longest);
    s->table = malloc((size_t)s->cap * sizeof *s->table);
    if (s->table == NULL)
        return dt_err_set(e, "out of memory for a row of %lld entries", (long long)longest);
    return 0;
}

static void scratch_free(row_scratch *s)
{
    free(s->table);
}

#define DRAW_BATCH 256

/* Fill dst with up to `want` distinct columns from d, sorted: candidates are
 * drawn in batches and kept when the set has not seen them. Stops early only
 * after `budget` draws (a row asking for nearly every column an R-MAT row
 * can reach would otherwise wait for ever for its rarest columns). Returns
 * the number placed. The result does not depend on the hash: it is the set
 * of the first `want` distinct draws. */
static int64_t fill_distinct(drawer *d, int32_t *dst, int64_t want, row_scratch *s, int64_t budget)
{
    int64_t cap = set_cap(want);
    int shift = 0;
    while (((int64_t)1 << (32 - shift)) > cap)
        shift++;
    uint32_t mask = (uint32_t)(cap - 1);
    int32_t *table = s->table;
    memset(table, 0xff, (size_t)cap * sizeof *table); /* -1: empty */
    int32_t batch[DRAW_BATCH];
    int64_t have = 0, drawn = 0;
    while (have < want && drawn < budget) {
        /* never more than the row still needs, so `have` cannot pass want */
        int n = want - have < DRAW_BATCH ? (int)(want - have) : DRAW_BATCH;
        d->draw(d, batch, n);
        drawn += n;
        for (int k = 0; k < n; k++) {
            int32_t c = batch[k];
            uint32_t h = (uint32_t)(((uint64_t)(uint32_t)c * 0x9e3779b1u) & 0xffffffffu) >> shift;
            while (table[h] != -1 && table[h] != c)
                h = (h + 1) & mask;
            if (table[h] == -1) {
                table[h] = c;
                dst[have++] = c;
            }
        }
    }
    sort_cols(dst, have, table);
    return have;
}

static void draw_uniform(drawer *d, int32_t *out, int n)
{
    for (int k = 0; k < n; k++)
        out[k] = (int32_t)below32(d->bits, d->limit);
}

/* `want` distinct columns uniform over [0, cols), sorted, into dst. A row
 * more than half full is drawn as its complement (the columns left out) so
 * that each draw is accepted with probability at least one half. */
static void fill_uniform_row(bits32 *bits, int32_t *dst, int64_t want, int32_t cols, row_scratch *s)
{
    drawer d = {.draw = draw_uniform, .bits = bits, .limit = (uint64_t)cols};
    if (want <= cols / 2) {
        fill_distinct(&d, dst, want, s, INT64_MAX);
        return;
    }
    /* The excluded columns go to dst's front first (skip < want, so they
     * fit), then to the scratch table, free again, while the complement is
     * written over dst. */
    int64_t skip = cols - want;
    fill_distinct(&d, dst, skip, s, INT64_MAX);
    memcpy(s->table, dst, (size_t)skip * sizeof *dst);
    int64_t w = 0, x = 0;
    for (int32_t c = 0; c < cols; c++) {
        if (x < skip && s->table[x] == c) {
            x++;
            continue;
        }
        dst[w++] = c;
    }
}

/* ---- spec parsing --------------------------------------------------------- */

enum {
    K_ROWS,
    K_COLS,
    K_NNZ,
    K_SEED,
    K_BW,
    K_A,
    K_B,
    K_C,
    K_EMPTY,
    K_HUBS,
    K_HUBLEN,
    K_EXP,
    K_OUTLIERS,
    K_COUNT
};
static const char *key_names[K_COUNT] = {"rows", "cols",  "nnz",  "seed",   "bw",
                                         "a",    "b",     "c",    "empty",  "hubs",
                                         "hublen", "exp", "outliers"};

typedef struct gen_args {
    const char *kind;
    const char *keys;         /* the kind's keys, for messages */
    const char *val[K_COUNT]; /* NULL when absent; point into a copy of the spec */
    int32_t rows, cols;
    int64_t nnz;
    uint64_t seed;
} gen_args;

typedef sp_csr *(*gen_fn)(gen_args g, dt_err *e);

static sp_csr *gen_stencil5(gen_args g, dt_err *e);
static sp_csr *gen_stencil7(gen_args g, dt_err *e);
static sp_csr *gen_stencil27(gen_args g, dt_err *e);
static sp_csr *gen_banded(gen_args g, dt_err *e);
static sp_csr *gen_uniform(gen_args g, dt_err *e);
static sp_csr *gen_rmat(gen_args g, dt_err *e);
static sp_csr *gen_block(gen_args g, dt_err *e);
static sp_csr *gen_dl(gen_args g, dt_err *e);
static sp_csr *gen_arrow(gen_args g, dt_err *e);
static sp_csr *gen_powerlaw(gen_args g, dt_err *e);
static sp_csr *gen_blockdiag(gen_args g, dt_err *e);
static sp_csr *gen_bandout(gen_args g, dt_err *e);

#define KB(k) (1u << (k))
/* Every kind takes a seed and an empty-row fraction (applied after the
 * kind has built its matrix, see empty_rows). */
#define KALL (KB(K_SEED) | KB(K_EMPTY))
static const struct gen_kind {
    const char *name;
    unsigned keys; /* bit per K_* */
    const char *key_list;
    gen_fn fn;
} kinds[] = {
    {"stencil5", KB(K_ROWS) | KALL, "rows, seed, empty", gen_stencil5},
    {"stencil7", KB(K_ROWS) | KALL, "rows, seed, empty", gen_stencil7},
    {"stencil27", KB(K_ROWS) | KALL, "rows, seed, empty", gen_stencil27},
    {"banded", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KB(K_BW) | KALL,
     "rows, cols, nnz, bw, seed, empty", gen_banded},
    {"uniform", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KALL, "rows, cols, nnz, seed, empty",
     gen_uniform},
    {"rmat", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KALL | KB(K_A) | KB(K_B) | KB(K_C),
     "rows, cols, nnz, seed, empty, a, b, c", gen_rmat},
    {"block", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KB(K_B) | KALL,
     "rows, cols, nnz, b, seed, empty", gen_block},
    {"dl", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KALL, "rows, cols, nnz, seed, empty", gen_dl},
    {"arrow", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KB(K_HUBS) | KB(K_HUBLEN) | KALL,
     "rows, cols, nnz, hubs, hublen, seed, empty", gen_arrow},
    {"powerlaw", KB(K_ROWS) | KB(K_COLS) | KB(K_NNZ) | KB(K_EXP) | KALL,
     "rows, cols, nnz, exp, seed, empty", gen_powerlaw},
    {"blockdiag", KB(K_ROWS) | KB(K_B) | KALL, "rows, b, seed, empty", gen_blockdiag},
    {"bandout", KB(K_ROWS) | KB(K_COLS) | KB(K_BW) | KB(K_OUTLIERS) | KALL,
     "rows, cols, bw, outliers, seed, empty", gen_bandout},
};
#define KIND_LIST                                                                                  \
    "stencil5, stencil7, stencil27, banded, uniform, rmat, block, dl, arrow, powerlaw, blockdiag, "  \
    "bandout"

/* An integer key through dt_parse_size, checked against [lo, hi]. */
static int arg_size(const gen_args *g, int key, int64_t lo, int64_t hi, int64_t *out, dt_err *e)
{
    const char *s = g->val[key];
    int64_t v = 0;
    if (dt_parse_size(s, &v) != 0)
        return dt_err_set(e,
                          "gen:%s: bad %s '%s' (expected a whole number, K/M/G suffixes allowed)",
                          g->kind, key_names[key], s);
    if (v < lo || v > hi)
        return dt_err_set(e, "gen:%s: %s %lld out of range (%lld..%lld)", g->kind, key_names[key],
                          (long long)v, (long long)lo, (long long)hi);
    *out = v;
    return 0;
}

static int need_key(const gen_args *g, int key, dt_err *e)
{
    if (g->val[key] == NULL)
        return dt_err_set(e, "gen:%s: missing %s (keys: %s)", g->kind, key_names[key], g->keys);
    return 0;
}

/* rows, cols (default rows), and nnz when the kind needs it (checked
 * against rows * cols). */
static int common_args(gen_args *g, int want_nnz, dt_err *e)
{
    int64_t v = 0;
    if (need_key(g, K_ROWS, e) || arg_size(g, K_ROWS, 1, INT32_MAX, &v, e))
        return -1;
    g->rows = (int32_t)v;
    g->cols = g->rows;
    if (g->val[K_COLS] != NULL) {
        if (arg_size(g, K_COLS, 1, INT32_MAX, &v, e))
            return -1;
        g->cols = (int32_t)v;
    }
    g->nnz = 0;
    if (want_nnz) {
        if (need_key(g, K_NNZ, e) || arg_size(g, K_NNZ, 0, INT64_MAX, &g->nnz, e))
            return -1;
        int64_t cap = (int64_t)g->rows * g->cols; /* < 2^62, no overflow */
        if (g->nnz > cap)
            return dt_err_set(e, "gen:%s: nnz %lld > rows*cols %lld", g->kind, (long long)g->nnz,
                              (long long)cap);
    }
    return 0;
}

/* Split "KIND:key=value,..." (modified in place) into g. Returns the kind,
 * or NULL with e set. */
static const struct gen_kind *parse_spec(char *text, gen_args *g, dt_err *e)
{
    char *params = strchr(text, ':');
    if (params != NULL)
        *params++ = '\0';
    const struct gen_kind *kind = NULL;
    for (size_t i = 0; i < DT_ARRAY_LEN(kinds); i++) {
        if (strcmp(text, kinds[i].name) == 0)
            kind = &kinds[i];
    }
    if (kind == NULL) {
        dt_err_set(e, "gen: unknown kind '%s' (kinds: " KIND_LIST ")", text);
        return NULL;
    }
    g->kind = kind->name;
    g->keys = kind->key_list;
    /* key=value pairs separated by commas; an empty parameter list is fine
     * here and reported by the kind as the key it lacks. */
    char *save = NULL;
    for (char *item = params ? strtok_r(params, ",", &save) : NULL; item != NULL;
         item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (eq == NULL || eq == item) {
            dt_err_set(e, "gen:%s: expected key=value, got '%s' (keys: %s)", g->kind, item,
                       g->keys);
            return NULL;
        }
        *eq = '\0';
        int key = -1;
        for (int k = 0; k < K_COUNT; k++) {
            if ((kind->keys & KB(k)) && strcmp(item, key_names[k]) == 0)
                key = k;
        }
        if (key < 0) {
            dt_err_set(e, "gen:%s: unknown key '%s' (keys: %s)", g->kind, item, g->keys);
            return NULL;
        }
        if (g->val[key] != NULL) {
            dt_err_set(e, "gen:%s: key '%s' given twice", g->kind, item);
            return NULL;
        }
        g->val[key] = eq + 1;
    }
    return kind;
}

static int empty_rows(sp_csr *a, double frac, uint64_t seed, dt_err *e);

sp_csr *sp_generate(const char *spec, dt_err *e)
{
    if (spec == NULL || !dt_startswith(spec, "gen:")) {
        dt_err_set(e, "gen: expected gen:KIND:key=value,... (got '%s')", spec ? spec : "(null)");
        return NULL;
    }
    char *text = dt_xstrdup(spec + 4); /* g's strings point into it */
    gen_args g;
    memset(&g, 0, sizeof g);
    sp_csr *a = NULL;
    const struct gen_kind *kind = parse_spec(text, &g, e);
    /* every kind takes a seed; the values below need it too */
    int64_t seed = 1;
    if (kind != NULL && g.val[K_SEED] != NULL && arg_size(&g, K_SEED, 0, INT64_MAX, &seed, e))
        kind = NULL;
    g.seed = (uint64_t)seed;
    double empty = 0;
    if (kind != NULL && g.val[K_EMPTY] != NULL &&
        (dt_parse_double(g.val[K_EMPTY], &empty) != 0 || !(empty >= 0 && empty < 1))) {
        dt_err_set(e, "gen:%s: bad empty '%s' (expected a fraction of rows in [0, 1))", g.kind,
                   g.val[K_EMPTY]);
        kind = NULL;
    }
    if (kind != NULL)
        a = kind->fn(g, e); /* by value: a kind's parsing stays its own */
    if (a != NULL && empty > 0 && empty_rows(a, empty, g.seed, e) != 0) {
        sp_csr_free(a);
        a = NULL;
    }
    if (a != NULL)
        fill_values(a, g.seed);
    free(text);
    return a;
}

/* ---- stencils ----------------------------------------------------------- */

/* The integer nearest to rows^(1/dim), decided by integer comparisons:
 * s rounds up when rows >= (s + 1/2)^dim, i.e. 2^dim * rows >= (2s + 1)^dim. */
static int64_t grid_side(int64_t rows, int dim)
{
    int64_t s = (int64_t)(dim == 2 ? sqrt((double)rows) : cbrt((double)rows));
    for (;;) { /* correct the libm estimate to the exact floor */
        int64_t p = dim == 2 ? s * s : s * s * s;
        if (p > rows) {
            s--;
            continue;
        }
        int64_t q = dim == 2 ? (s + 1) * (s + 1) : (s + 1) * (s + 1) * (s + 1);
        if (q <= rows) {
            s++;
            continue;
        }
        break;
    }
    int64_t t = 2 * s + 1;
    int64_t lhs = (dim == 2 ? 4 : 8) * rows, rhs = dim == 2 ? t * t : t * t * t;
    return lhs >= rhs ? s + 1 : s;
}

/* Stencil matrices carry random values like every generator (the header
 * promises generated values in [-1, 1) away from zero); only the pattern is
 * the Laplacian's. Neighbours are every offset in {-1, 0, 1}^dim (27-point,
 * `full`) or only those along one axis (5- and 7-point). */
static sp_csr *gen_stencil(gen_args *g, int dim, int full, dt_err *e)
{
    int64_t v = 0;
    if (need_key(g, K_ROWS, e) || arg_size(g, K_ROWS, 1, INT32_MAX, &v, e))
        return NULL;
    int64_t n = grid_side(v, dim);
    if (n < 1)
        n = 1;
    int64_t rows = dim == 2 ? n * n : n * n * n;
    if (rows > INT32_MAX) {
        dt_err_set(e, "gen:%s: rows %lld gives a side-%lld grid of %lld rows, over %d", g->kind,
                   (long long)v, (long long)n, (long long)rows, INT32_MAX);
        return NULL;
    }
    int64_t nnz;
    if (dim == 2)
        nnz = 5 * n * n - 4 * n;
    else if (!full)
        nnz = 7 * n * n * n - 6 * n * n;
    else
        nnz = (3 * n - 2) * (3 * n - 2) * (3 * n - 2);
    sp_csr *a = sp_csr_new((int32_t)rows, (int32_t)rows, nnz, e);
    if (a == NULL)
        return NULL;
    int64_t k = 0;
    int64_t nz = dim == 2 ? 1 : n;
    for (int64_t z = 0; z < nz; z++) {
        for (int64_t y = 0; y < n; y++) {
            for (int64_t x = 0; x < n; x++) {
                /* Offsets in increasing column order: z, then y, then x. */
                for (int dz = -1; dz <= 1; dz++) {
                    if (dim == 2 && dz != 0)
                        continue;
                    for (int dy = -1; dy <= 1; dy++) {
                        for (int dx = -1; dx <= 1; dx++) {
                            int nonzero_axes = (dz != 0) + (dy != 0) + (dx != 0);
                            if (!full && nonzero_axes > 1)
                                continue;
                            int64_t zz = z + dz, yy = y + dy, xx = x + dx;
                            if (zz < 0 || zz >= nz || yy < 0 || yy >= n || xx < 0 || xx >= n)
                                continue;
                            a->col[k++] = (int32_t)((zz * n + yy) * n + xx);
                        }
                    }
                }
                a->rowptr[(z * n + y) * n + x + 1] = k;
            }
        }
    }
    return a;
}

static sp_csr *gen_stencil5(gen_args g, dt_err *e)
{
    return gen_stencil(&g, 2, 0, e);
}

static sp_csr *gen_stencil7(gen_args g, dt_err *e)
{
    return gen_stencil(&g, 3, 0, e);
}

static sp_csr *gen_stencil27(gen_args g, dt_err *e)
{
    return gen_stencil(&g, 3, 1, e);
}

/* ---- banded ------------------------------------------------------------- */

/* Entries of a full band of half-width bw in a rows x cols matrix. */
/* sum over d = 0..bw of max(0, min(n, m - d)): the lengths of the
 * diagonals d = j - i >= 0 of an n x m matrix (or, swapped, those below). */
static int64_t diag_sum(int64_t n, int64_t m, int64_t bw)
{
    int64_t total = 0;
    if (n <= 0 || m <= 0)
        return 0;
    int64_t full = m - n < bw ? m - n : bw; /* d = 0..full: each n long */
    if (full >= 0)
        total += (full + 1) * n;
    int64_t d0 = m - n + 1 > 0 ? m - n + 1 : 0, d1 = bw < m - 1 ? bw : m - 1;
    if (d1 >= d0) /* d = d0..d1: each m - d long */
        total += (d1 - d0 + 1) * m - (d0 + d1) * (d1 - d0 + 1) / 2;
    return total;
}

/* Positions within bw of the diagonal of a rows x cols matrix, in closed
 * form: the nnz search below asks it about 31 times, and rows may be 2^31. */
static int64_t band_count(int32_t rows, int32_t cols, int64_t bw)
{
    if (rows <= 0 || cols <= 0)
        return 0;
    return diag_sum(rows, cols, bw) + diag_sum(cols, rows, bw) - (rows < cols ? rows : cols);
}

/* Every position within bw of the diagonal is filled. With nnz instead of bw
 * the half-width is the one whose full band comes closest to nnz (about
 * nnz / (2 rows); ties go to the narrower band). */
static sp_csr *gen_banded(gen_args g, dt_err *e)
{
    if (g.val[K_BW] != NULL && g.val[K_NNZ] != NULL) {
        dt_err_set(e, "gen:banded: give nnz or bw, not both");
        return NULL;
    }
    if (g.val[K_BW] == NULL && g.val[K_NNZ] == NULL) {
        dt_err_set(e, "gen:banded: missing nnz or bw (keys: %s)", g.keys);
        return NULL;
    }
    if (common_args(&g, g.val[K_NNZ] != NULL, e))
        return NULL;
    int64_t widest = (g.rows > g.cols ? g.rows : g.cols) - 1;
    int64_t bw = 0;
    if (g.val[K_BW] != NULL) {
        if (arg_size(&g, K_BW, 0, INT32_MAX, &bw, e))
            return NULL;
        if (bw > widest)
            bw = widest; /* a wider band adds nothing */
    } else {
        int64_t lo = 0, hi = widest; /* smallest bw whose band holds >= nnz */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (band_count(g.rows, g.cols, mid) >= g.nnz)
                hi = mid;
            else
                lo = mid + 1;
        }
        bw = lo;
        if (bw > 0 &&
            g.nnz - band_count(g.rows, g.cols, bw - 1) <= band_count(g.rows, g.cols, bw) - g.nnz)
            bw--;
    }
    sp_csr *a = sp_csr_new(g.rows, g.cols, band_count(g.rows, g.cols, bw), e);
    if (a == NULL)
        return NULL;
    int64_t k = 0;
    for (int64_t i = 0; i < g.rows; i++) {
        int64_t lo = i - bw < 0 ? 0 : i - bw;
        int64_t hi = i + bw > g.cols - 1 ? g.cols - 1 : i + bw;
        for (int64_t j = lo; j <= hi; j++)
            a->col[k++] = (int32_t)j;
        a->rowptr[i + 1] = k;
    }
    return a;
}

/* ---- uniform (Erdos-Renyi) and dl ---------------------------------------- */

/* Longest row of counts held in a->rowptr[1..rows] (before the prefix sum). */
static int64_t longest_count(const sp_csr *a)
{
    int64_t m = 0;
    for (int32_t i = 0; i < a->rows; i++)
        m = a->rowptr[i + 1] > m ? a->rowptr[i + 1] : m;
    return m;
}

/* Turn per-row counts in rowptr[1..rows] into offsets and fill each row with
 * distinct uniform columns. The scratch only has to hold what a row draws:
 * its count, or for a row more than half full the columns it leaves out. */
static int fill_uniform_rows(sp_csr *a, bits32 *bits, dt_err *e)
{
    int64_t most = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t want = a->rowptr[i + 1];
        int64_t drawn = want <= a->cols / 2 ? want : a->cols - want;
        most = drawn > most ? drawn : most;
    }
    row_scratch s;
    if (scratch_init(&s, most, e))
        return -1;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t want = a->rowptr[i + 1];
        a->rowptr[i + 1] = a->rowptr[i] + want;
        fill_uniform_row(bits, a->col + a->rowptr[i], want, a->cols, &s);
    }
    scratch_free(&s);
    return 0;
}

/* Each of the nnz entries picks its row uniformly (a full row is re-drawn,
 * which keeps nnz exact up to nnz = rows * cols); the row lengths are then
 * multinomial, each binomial(nnz, 1/rows). Columns are uniform and distinct. */
static sp_csr *gen_uniform(gen_args g, dt_err *e)
{
    if (common_args(&g, 1, e))
        return NULL;
    sp_csr *a = sp_csr_new(g.rows, g.cols, g.nnz, e);
    if (a == NULL)
        return NULL;
    bits32 bits;
    bits32_seed(&bits, g.seed);
    for (int64_t k = 0; k < g.nnz; k++) {
        uint32_t r;
        do {
            r = below32(&bits, (uint64_t)g.rows);
        } while (a->rowptr[r + 1] == g.cols);
        a->rowptr[r + 1]++;
    }
    if (fill_uniform_rows(a, &bits, e)) {
        sp_csr_free(a);
        return NULL;
    }
    return a;
}

/* Row i gets floor((i+1) nnz / rows) - floor(i nnz / rows) entries: every
 * row nnz/rows rounded down or up, the longer rows spread evenly, the total
 * exact. Columns uniform and distinct, as in magnitude-pruned weights. */
static sp_csr *gen_dl(gen_args g, dt_err *e)
{
    if (common_args(&g, 1, e))
        return NULL;
    sp_csr *a = sp_csr_new(g.rows, g.cols, g.nnz, e);
    if (a == NULL)
        return NULL;
    /* nnz < 2^62 and rows < 2^31: (i + 1) * nnz could overflow, so split the
     * quotient: i * nnz / rows = i * q + i * r / rows with r < rows. */
    int64_t q = g.nnz / g.rows, rem = g.nnz % g.rows;
    for (int64_t i = 0; i < g.rows; i++)
        a->rowptr[i + 1] = q + ((i + 1) * rem / g.rows - i * rem / g.rows);
    bits32 bits;
    bits32_seed(&bits, g.seed);
    if (fill_uniform_rows(a, &bits, e)) {
        sp_csr_free(a);
        return NULL;
    }
    return a;
}

/* ---- R-MAT ---------------------------------------------------------------- */

/* The recursive quadrant choice with probabilities a, b, c, d makes the row
 * bit of every level independent with P(1) = c + d, and the column bit,
 * given the row bit at that level, 1 with probability b / (a + b) (row bit
 * 0) or d / (c + d) (row bit 1). An index is drawn a chunk of up to 8 levels
 * at a time: the chunk's bits, independent with those per-level
 * probabilities, form a value whose product distribution is sampled with one
 * Walker alias table and one 32-bit draw. That is the same distribution as
 * bit by bit, for about a fifth of the random numbers. */
#define RMAT_MAX_CHUNKS 4 /* 31 levels in chunks of at most 8 */

typedef struct alias_tab {
    uint32_t thr[256]; /* coin below thr[v]: v itself, else alias[v] */
    uint8_t alias[256];
} alias_tab;

struct rmat_plan {
    int row_chunks, col_chunks;
    int row_w[RMAT_MAX_CHUNKS], col_w[RMAT_MAX_CHUNKS]; /* levels per chunk */
    int col_start[RMAT_MAX_CHUNKS];                     /* first level of the chunk */
    int row_levels;                                     /* Lr */
    int32_t cols;
    alias_tab row_tab[RMAT_MAX_CHUNKS];
    /* column chunk k: 2^w tables indexed by the row's bits at those levels */
    alias_tab *col_tab[RMAT_MAX_CHUNKS];
    /* draws rejected for an index past rows or cols, and how many may be:
     * a bound on the work whatever the probabilities (rmat_reject) */
    int64_t rejected, reject_cap;
};

/* Count one rejected draw; 1 once past the cap (the caller gives up). */
static inline int rmat_reject(rmat_plan *p)
{
    return ++p->rejected > p->reject_cap;
}

/* Alias table (Vose) for w bits where bit (w-1-j) of a value is 1 with
 * probability q[j]. The order of the work lists is fixed, so the table is the
 * same on every IEEE platform. */
static void alias_build(alias_tab *t, int w, const double *q)
{
    int n = 1 << w;
    double s[256];
    int small[256], large[256], ns = 0, nl = 0;
    for (int v = 0; v < n; v++) {
        double p = 1.0;
        for (int j = 0; j < w; j++)
            p *= ((v >> (w - 1 - j)) & 1) ? q[j] : 1.0 - q[j];
        s[v] = p * n;
        if (s[v] < 1.0)
            small[ns++] = v;
        else
            large[nl++] = v;
    }
    double one = (double)(1u << (32 - w)); /* coin range */
    for (int v = 0; v < n; v++) {
        t->thr[v] = (uint32_t)one; /* until paired: always itself */
        t->alias[v] = (uint8_t)v;
    }
    while (ns > 0 && nl > 0) {
        int l = small[--ns], g = large[--nl];
        double th = s[l] * one + 0.5;
        t->thr[l] = th >= one ? (uint32_t)one : (uint32_t)th;
        t->alias[l] = (uint8_t)g;
        s[g] = (s[g] + s[l]) - 1.0;
        if (s[g] < 1.0)
            small[ns++] = g;
        else
            large[nl++] = g;
    }
    /* leftovers (rounding) keep probability 1 of themselves */
}

static inline uint32_t alias_draw(const alias_tab *t, int w, uint32_t x)
{
    uint32_t v = x >> (32 - w);
    uint32_t coin = x & ((1u << (32 - w)) - 1);
    return coin < t->thr[v] ? v : t->alias[v];
}

/* Split `levels` into the fewest chunks of at most 8, as even as possible. */
static int split_levels(int levels, int *w, int *start)
{
    int n = (levels + 7) / 8;
    for (int k = 0, at = 0; k < n; k++) {
        w[k] = levels / n + (k < levels % n);
        start[k] = at;
        at += w[k];
    }
    return n;
}

static int ceil_log2(int32_t n)
{
    int l = 0;
    while (((int64_t)1 << l) < n)
        l++;
    return l;
}

/* Rows and cols that are not powers of two are drawn on the 2^Lr x 2^Lc
 * grid (Lr = ceil(log2 rows), Lc = ceil(log2 cols)) and an index >= rows
 * (cols) is rejected and the whole index drawn again: R-MAT conditioned on
 * landing inside the matrix. When Lr != Lc the levels are aligned at the
 * most significant bit, and a column level below the row's last level uses
 * the column marginal b + d. */
static int rmat_plan_init(rmat_plan *p, int32_t rows, int32_t cols, double a, double b, double c,
                          double d, dt_err *e)
{
    memset(p, 0, sizeof *p);
    p->row_levels = ceil_log2(rows);
    p->cols = cols;
    int start[RMAT_MAX_CHUNKS];
    p->row_chunks = split_levels(p->row_levels, p->row_w, start);
    double q[8];
    for (int j = 0; j < 8; j++)
        q[j] = c + d;
    for (int k = 0; k < p->row_chunks; k++)
        alias_build(&p->row_tab[k], p->row_w[k], q);
    p->col_chunks = split_levels(ceil_log2(cols), p->col_w, p->col_start);
    for (int k = 0; k < p->col_chunks; k++) {
        int w = p->col_w[k];
        p->col_tab[k] = malloc(((size_t)1 << w) * sizeof *p->col_tab[k]);
        if (p->col_tab[k] == NULL)
            return dt_err_set(e, "gen:rmat: out of memory for sampling tables");
        for (int pat = 0; pat < (1 << w); pat++) {
            for (int j = 0; j < w; j++) {
                int level = p->col_start[k] + j;
                int rowbit = (pat >> (w - 1 - j)) & 1;
                if (level >= p->row_levels)
                    q[j] = b + d;
                else
                    q[j] = rowbit ? d / (c + d) : b / (a + b);
            }
            alias_build(&p->col_tab[k][pat], w, q);
        }
    }
    return 0;
}

static void rmat_plan_free(rmat_plan *p)
{
    for (int k = 0; k < RMAT_MAX_CHUNKS; k++)
        free(p->col_tab[k]);
}

static inline uint32_t rmat_row(const rmat_plan *p, bits32 *bits)
{
    uint32_t idx = 0;
    for (int k = 0; k < p->row_chunks; k++)
        idx = (idx << p->row_w[k]) | alias_draw(&p->row_tab[k], p->row_w[k], bits32_next(bits));
    return idx;
}

/* A row index below rows (rejecting those past it on the power-of-two grid). */
static uint32_t rmat_row_in(rmat_plan *p, bits32 *bits, int32_t rows)
{
    uint32_t i;
    do {
        i = rmat_row(p, bits);
        if (i >= (uint32_t)rows && rmat_reject(p))
            return 0; /* past the cap: a valid row, and gen_rmat stops */
    } while (i >= (uint32_t)rows);
    return i;
}

#define RMAT_AHEAD 32
#if defined(__GNUC__)
#define prefetch_write(p) __builtin_prefetch((p), 1)
#else
#define prefetch_write(p) ((void)(p))
#endif

/* The row's bits at the levels of column chunk k (0 past the row's levels). */
static int rmat_row_pattern(const rmat_plan *p, int32_t row, int k)
{
    int pat = 0;
    for (int j = 0; j < p->col_w[k]; j++) {
        int level = p->col_start[k] + j;
        int bit = 0;
        if (level < p->row_levels)
            bit = (int)(((uint32_t)row >> (p->row_levels - 1 - level)) & 1u);
        pat = (pat << 1) | bit;
    }
    return pat;
}

static void draw_rmat(drawer *d, int32_t *out, int n)
{
    rmat_plan *p = d->plan;
    const alias_tab *tab[RMAT_MAX_CHUNKS];
    for (int k = 0; k < p->col_chunks; k++)
        tab[k] = &p->col_tab[k][rmat_row_pattern(p, d->row, k)];
    bits32 bits = *d->bits; /* a local copy stays in registers */
    for (int i = 0; i < n; i++) {
        uint32_t c;
        do {
            c = 0;
            for (int k = 0; k < p->col_chunks; k++)
                c = (c << p->col_w[k]) | alias_draw(tab[k], p->col_w[k], bits32_next(&bits));
            if (c >= (uint32_t)p->cols && rmat_reject(p))
                c = 0; /* past the cap: gen_rmat stops after this row */
        } while (c >= (uint32_t)p->cols);
        out[i] = (int32_t)c;
    }
    *d->bits = bits;
}

#define RMAT_REDRAWS 4

/* "Next row with room" as a union-find over rows: roomy[i] == i when row i
 * has room, else a row further on to look at (rows itself: none left).
 * Built from the counts so far, in m->rowptr[1..rows]. */
static int roomy_init(int32_t **roomy, const sp_csr *m, dt_err *e)
{
    *roomy = malloc(((size_t)m->rows + 1) * sizeof **roomy);
    if (*roomy == NULL)
        return dt_err_set(e, "gen:rmat: out of memory for %d rows", m->rows);
    for (int32_t i = 0; i < m->rows; i++)
        (*roomy)[i] = m->rowptr[i + 1] == m->cols ? i + 1 : i;
    (*roomy)[m->rows] = m->rows;
    return 0;
}

/* The first row >= i with room (rows when there is none), compressing the
 * path on the way. A row filled after roomy_init points past itself. */
static int32_t roomy_find(int32_t *roomy, int32_t i)
{
    int32_t r = i;
    while (roomy[r] != r)
        r = roomy[r];
    while (roomy[i] != r) {
        int32_t next = roomy[i];
        roomy[i] = r;
        i = next;
    }
    return r;
}

/* R-MAT without an edge list:
 *   1. every edge draws its row index (P(row bit = 1) = c + d at each
 *      level) and only the row's count is kept, in rowptr; a row already
 *      holding cols entries is drawn again, so no row asks for more than
 *      cols columns and the total stays nnz;
 *   2. each row then draws its columns with the conditional probabilities of
 *      its own row bits, dropping duplicates and drawing again until the row
 *      has its count.
 * A row whose count approaches the number of columns it can reach would
 * spend for ever on its rarest columns: it stops after 16 * count + 256
 * column draws with what it has, so nnz can come out below the request
 * (only for rows that dense). */
static sp_csr *gen_rmat(gen_args g, dt_err *e)
{
    if (common_args(&g, 1, e))
        return NULL;
    double p[3] = {0.57, 0.19, 0.19};
    for (int k = 0; k < 3; k++) {
        if (g.val[K_A + k] == NULL)
            continue;
        if (dt_parse_double(g.val[K_A + k], &p[k]) != 0 || p[k] < 0 || p[k] > 1) {
            dt_err_set(e, "gen:rmat: bad %s '%s' (expected a probability in [0, 1])",
                       key_names[K_A + k], g.val[K_A + k]);
            return NULL;
        }
    }
    double a = p[0], b = p[1], c = p[2], d = 1.0 - a - b - c;
    if (d < -1e-12) {
        dt_err_set(e, "gen:rmat: a + b + c = %g is over 1 (d = 1 - a - b - c)", a + b + c);
        return NULL;
    }
    if (d < 0)
        d = 0;
    /* Rejection needs indices below rows (cols) to be reasonably likely; a
     * top bit of 0 suffices, with probability a + b for rows and a / (a + b)
     * or c / (c + d) for columns. */
    if (a + b < 1e-3 || c + d < 1e-3 || a / (a + b) < 1e-3 || c / (c + d) < 1e-3) {
        dt_err_set(e,
                   "gen:rmat: a=%g b=%g c=%g d=%g: a+b, c+d, a/(a+b) and c/(c+d) must each be "
                   "at least 0.001",
                   a, b, c, d);
        return NULL;
    }
    rmat_plan *plan = malloc(sizeof *plan);
    if (plan == NULL) {
        dt_err_set(e, "gen:rmat: out of memory for sampling tables");
        return NULL;
    }
    sp_csr *m = NULL;
    row_scratch s = {0};
    int32_t *roomy = NULL; /* next row with room, made when first needed */
    if (rmat_plan_init(plan, g.rows, g.cols, a, b, c, d, e))
        goto fail;
    /* Indices past rows (cols) are drawn again: with a + b near 0.001 and
     * rows just past a power of two that is most draws. At most 64 rejected
     * draws an edge on average (and 2^20 more) bound the work. */
    plan->rejected = 0;
    plan->reject_cap = 64 * g.nnz + (1 << 20);
    m = sp_csr_new(g.rows, g.cols, g.nnz, e);
    if (m == NULL)
        goto fail;
    bits32 bits;
    bits32_seed(&bits, g.seed);
    /* The counts are scattered over 8 * rows bytes, mostly outside the
     * cache: rows are drawn RMAT_AHEAD edges before they are counted and
     * their counts prefetched, so that the misses overlap. */
    uint32_t ahead[RMAT_AHEAD];
    for (int k = 0; k < RMAT_AHEAD; k++) {
        ahead[k] = rmat_row_in(plan, &bits, g.rows);
        prefetch_write(&m->rowptr[ahead[k] + 1]);
    }
    for (int64_t k = 0; k < g.nnz; k++) {
        uint32_t i = ahead[k % RMAT_AHEAD];
        uint32_t next = rmat_row_in(plan, &bits, g.rows);
        ahead[k % RMAT_AHEAD] = next;
        prefetch_write(&m->rowptr[next + 1]);
        for (int tries = 0; m->rowptr[i + 1] == g.cols; tries++) {
            /* full: the edge goes elsewhere. When rows are asked to be
             * nearly full the rows left with room can be too improbable
             * to hit, so after RMAT_REDRAWS tries the edge takes the next
             * row with room instead (nnz <= rows * cols: one exists). */
            if (tries < RMAT_REDRAWS) {
                i = rmat_row_in(plan, &bits, g.rows);
                continue;
            }
            if (roomy == NULL && roomy_init(&roomy, m, e))
                goto fail;
            i = (uint32_t)roomy_find(roomy, (int32_t)i);
            if (i == (uint32_t)g.rows)
                i = (uint32_t)roomy_find(roomy, 0);
        }
        m->rowptr[i + 1]++;
        if (roomy != NULL && m->rowptr[i + 1] == g.cols)
            roomy[i] = (int32_t)i + 1; /* full now: point past it */
        if (plan->rejected > plan->reject_cap)
            goto improbable;
    }
    free(roomy);
    roomy = NULL;
    if (scratch_init(&s, longest_count(m), e))
        goto fail;
    drawer dr = {.draw = draw_rmat, .bits = &bits, .plan = plan};
    for (int32_t i = 0; i < g.rows; i++) {
        int64_t want = m->rowptr[i + 1];
        dr.row = i;
        /* Rows are written back to back, so a short row shifts the rest. A
         * row asked for every column has them all, without drawing. */
        int32_t *dst = m->col + m->rowptr[i];
        int64_t got = want;
        if (want == g.cols) {
            for (int32_t j = 0; j < g.cols; j++)
                dst[j] = j;
        } else {
            got = fill_distinct(&dr, dst, want, &s, 16 * want + 256);
        }
        m->rowptr[i + 1] = m->rowptr[i] + got;
        if (plan->rejected > plan->reject_cap)
            goto improbable;
    }
    scratch_free(&s);
    rmat_plan_free(plan);
    free(plan);
    if (m->rowptr[m->rows] < m->nnz) {
        m->nnz = m->rowptr[m->rows];
        size_t n = (size_t)(m->nnz ? m->nnz : 1);
        int32_t *col = realloc(m->col, n * sizeof *col); /* shrinking: keep the old on failure */
        double *val = realloc(m->val, n * sizeof *val);
        if (col != NULL)
            m->col = col;
        if (val != NULL)
            m->val = val;
    }
    return m;
improbable:
    dt_err_set(e,
               "gen:rmat: a=%g b=%g c=%g d=%g: indices below rows=%d and cols=%d are too "
               "improbable (%lld draws past them for %lld nonzeros, at most 64 each): make a + b "
               "and a / (a + b) larger, or rows and cols a power of two",
               a, b, c, d, g.rows, g.cols, (long long)plan->rejected, (long long)g.nnz);
fail:
    free(roomy);
    scratch_free(&s);
    rmat_plan_free(plan);
    free(plan);
    sp_csr_free(m);
    return NULL;
}

/* ---- block ---------------------------------------------------------------- */

/* round(nnz / (b * b)) dense blocks (at least one when nnz > 0) on the
 * aligned block grid: block rows drawn uniformly per block (a full block row
 * is drawn again), distinct uniform block columns within a block row, as in
 * gen_uniform one level up. Blocks on the last block row or column are cut
 * at the matrix edge, so nnz is nblocks * b * b less what the edges cut. */
static sp_csr *gen_block(gen_args g, dt_err *e)
{
    if (common_args(&g, 1, e))
        return NULL;
    int64_t bs = 4;
    if (g.val[K_B] != NULL && arg_size(&g, K_B, 1, 1024, &bs, e))
        return NULL;
    if (bs > g.rows || bs > g.cols) {
        dt_err_set(e, "gen:block: b %lld is larger than the matrix (%d x %d)", (long long)bs,
                   g.rows, g.cols);
        return NULL;
    }
    int32_t b = (int32_t)bs;
    int32_t brows = (int32_t)((g.rows + (int64_t)b - 1) / b);
    int32_t bcols = (int32_t)((g.cols + (int64_t)b - 1) / b);
    int64_t nblocks = (g.nnz + (int64_t)b * b / 2) / ((int64_t)b * b);
    if (nblocks == 0 && g.nnz > 0)
        nblocks = 1;
    /* nnz <= rows * cols keeps nblocks <= brows * bcols. */
    /* The matrix's row array and a block's worth of entries must fit before
     * the block pattern is built: walking 2^31 rows' block pattern ran 100 s
     * before the final admission refused it. */
    if (sp_csr_admit(g.rows, g.cols, nblocks, e) != 0)
        return NULL;

    /* A CSR of the block pattern itself, built like a uniform matrix. */
    sp_csr *blk = sp_csr_new(brows, bcols, nblocks, e);
    if (blk == NULL)
        return NULL;
    bits32 bits;
    bits32_seed(&bits, g.seed);
    for (int64_t k = 0; k < nblocks; k++) {
        uint32_t r;
        do {
            r = below32(&bits, (uint64_t)brows);
        } while (blk->rowptr[r + 1] == bcols);
        blk->rowptr[r + 1]++;
    }
    if (fill_uniform_rows(blk, &bits, e)) {
        sp_csr_free(blk);
        return NULL;
    }
    /* Exact nnz: a block covers min(b, rows - top) x min(b, cols - left). */
    int64_t nnz = 0;
    for (int32_t br = 0; br < brows; br++) {
        int64_t h = g.rows - (int64_t)br * b < b ? g.rows - (int64_t)br * b : b;
        for (int64_t k = blk->rowptr[br]; k < blk->rowptr[br + 1]; k++) {
            int64_t left = (int64_t)blk->col[k] * b;
            nnz += h * (g.cols - left < b ? g.cols - left : b);
        }
    }
    sp_csr *a = sp_csr_new(g.rows, g.cols, nnz, e);
    if (a == NULL) {
        sp_csr_free(blk);
        return NULL;
    }
    int64_t out = 0;
    for (int32_t i = 0; i < g.rows; i++) {
        int32_t br = i / b;
        for (int64_t k = blk->rowptr[br]; k < blk->rowptr[br + 1]; k++) {
            int64_t left = (int64_t)blk->col[k] * b;
            int64_t right = left + b < g.cols ? left + b : g.cols;
            for (int64_t j = left; j < right; j++)
                a->col[out++] = (int32_t)j;
        }
        a->rowptr[i + 1] = out;
    }
    sp_csr_free(blk);
    return a;
}

/* ---- shapes of real matrices: empty rows, arrow, powerlaw, blockdiag, bandout ---- */

/* round(frac * rows) rows, chosen uniformly from their own stream (a
 * partial Fisher-Yates shuffle), lose their entries; the rest move up. So
 * at least that fraction of rows is empty (rows the kind left empty add to
 * it) and nnz is about (1 - frac) of what the kind made. */
static int empty_rows(sp_csr *a, double frac, uint64_t seed, dt_err *e)
{
    int64_t drop = (int64_t)(frac * a->rows + 0.5);
    if (drop <= 0)
        return 0;
    int32_t *idx = malloc((size_t)a->rows * sizeof *idx);
    uint8_t *gone = calloc((size_t)a->rows, 1);
    if (idx == NULL || gone == NULL) {
        free(idx);
        free(gone);
        return dt_err_set(e, "gen: out of memory choosing %lld empty rows", (long long)drop);
    }
    for (int32_t i = 0; i < a->rows; i++)
        idx[i] = i;
    bits32 bits;
    bits32_seed(&bits, seed ^ 0x5851f42d4c957f2dULL);
    for (int64_t k = 0; k < drop; k++) {
        int64_t j = k + below32(&bits, (uint64_t)(a->rows - k));
        int32_t t = idx[k];
        idx[k] = idx[j];
        idx[j] = t;
        gone[idx[k]] = 1;
    }
    int64_t w = 0, hi = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t lo = hi; /* rowptr[i] is already the compacted offset */
        hi = a->rowptr[i + 1];
        if (!gone[i])
            for (int64_t k = lo; k < hi; k++)
                a->col[w++] = a->col[k];
        a->rowptr[i + 1] = w;
    }
    a->nnz = w;
    free(idx);
    free(gone);
    return 0;
}

/* A fraction key in [0, 1] or a positive real, through dt_parse_double. */
static int arg_real(const gen_args *g, int key, double lo, double hi, double *out, dt_err *e)
{
    double v = 0;
    if (dt_parse_double(g->val[key], &v) != 0 || !(v >= lo && v <= hi))
        return dt_err_set(e, "gen:%s: bad %s '%s' (expected a number from %g to %g)", g->kind,
                          key_names[key], g->val[key], lo, hi);
    *out = v;
    return 0;
}

/* Fill row i's `want` columns as `fixed` leading columns 0..fixed-1 then
 * distinct uniform columns from [fixed, cols): the arrow's hub columns. */
static void fill_after_hubs(bits32 *bits, int32_t *dst, int32_t fixed, int64_t want, int32_t cols,
                            row_scratch *s)
{
    for (int32_t j = 0; j < fixed; j++)
        dst[j] = j;
    if (want <= fixed)
        return;
    fill_uniform_row(bits, dst + fixed, want - fixed, cols - fixed, s);
    for (int64_t k = fixed; k < want; k++)
        dst[k] += fixed;
}

/* Arrowhead / hub rows: rows 0..hubs-1 hold hublen columns each (default
 * every column: dense rows), columns 0..hubs-1 are in every row (dense
 * columns), and the other rows share what nnz leaves as evenly as gen:dl
 * does, uniform distinct columns past the hubs. nnz is exact unless the
 * hubs alone need more (an error) or a row would overflow (an error). */
static sp_csr *gen_arrow(gen_args g, dt_err *e)
{
    if (common_args(&g, 1, e))
        return NULL;
    int64_t hubs = 1, hublen = g.cols;
    int32_t narrow = g.rows < g.cols ? g.rows : g.cols;
    if (g.val[K_HUBS] != NULL && arg_size(&g, K_HUBS, 1, narrow, &hubs, e))
        return NULL;
    if (g.val[K_HUBLEN] != NULL && arg_size(&g, K_HUBLEN, hubs, g.cols, &hublen, e))
        return NULL;
    int64_t rest_rows = g.rows - hubs;
    int64_t fixed = hubs * hublen + rest_rows * hubs;
    if (g.nnz < fixed) {
        dt_err_set(e, "gen:arrow: nnz %lld is less than the %lld the hubs take (hubs * hublen + "
                      "(rows - hubs) * hubs)",
                   (long long)g.nnz, (long long)fixed);
        return NULL;
    }
    int64_t spread = g.nnz - fixed;
    if (spread > rest_rows * (g.cols - hubs)) {
        dt_err_set(e, "gen:arrow: nnz %lld does not fit: the rows past the hubs hold at most %lld",
                   (long long)g.nnz, (long long)(fixed + rest_rows * (g.cols - hubs)));
        return NULL;
    }
    sp_csr *a = sp_csr_new(g.rows, g.cols, g.nnz, e);
    if (a == NULL)
        return NULL;
    int64_t q = rest_rows ? spread / rest_rows : 0, rem = rest_rows ? spread % rest_rows : 0;
    int64_t most = hublen;
    for (int64_t i = 0; i < g.rows; i++) {
        int64_t len = hublen;
        if (i >= hubs) {
            int64_t r = i - hubs;
            len = hubs + q + ((r + 1) * rem / rest_rows - r * rem / rest_rows);
        }
        a->rowptr[i + 1] = a->rowptr[i] + len;
        most = len > most ? len : most;
    }
    row_scratch s;
    if (scratch_init(&s, most, e)) {
        sp_csr_free(a);
        return NULL;
    }
    bits32 bits;
    bits32_seed(&bits, g.seed);
    for (int32_t i = 0; i < g.rows; i++)
        fill_after_hubs(&bits, a->col + a->rowptr[i], (int32_t)hubs,
                        a->rowptr[i + 1] - a->rowptr[i], g.cols, &s);
    scratch_free(&s);
    return a;
}

/* Power-law rows by rank: the row of rank k (0 the longest) is asked for
 * c * (k + 1)^-exp entries, rounded, at least 1 and at most cols, with c
 * the largest for which the total stays within nnz; what rounding leaves
 * goes one entry a row to the longest rows with room, so nnz is exact.
 * Ranks are dealt to rows by a seeded shuffle, columns are uniform and
 * distinct. exp (default 1) is the rank-size exponent: a row-length
 * distribution with tail P(len >= x) ~ x^(-1/exp). The lengths use pow(),
 * so the same bits wherever libm's pow is the same. */
static sp_csr *gen_powerlaw(gen_args g, dt_err *e)
{
    if (common_args(&g, 1, e))
        return NULL;
    double ex = 1.0;
    if (g.val[K_EXP] != NULL && arg_real(&g, K_EXP, 0.0, 8.0, &ex, e))
        return NULL;
    if (g.nnz < g.rows) {
        dt_err_set(e, "gen:powerlaw: nnz %lld is less than rows %d (every row gets an entry)",
                   (long long)g.nnz, g.rows);
        return NULL;
    }
    double *w = malloc((size_t)g.rows * sizeof *w);
    int64_t *len = malloc((size_t)g.rows * sizeof *len);
    int32_t *perm = malloc((size_t)g.rows * sizeof *perm);
    sp_csr *a = NULL;
    if (w == NULL || len == NULL || perm == NULL) {
        dt_err_set(e, "gen:powerlaw: out of memory for %d rows", g.rows);
        goto done;
    }
    for (int32_t k = 0; k < g.rows; k++)
        w[k] = pow((double)k + 1.0, -ex);
    /* The total is monotone in c: bisect (geometrically: c spans many
     * orders of magnitude) for the largest c within nnz. At c = cols *
     * rows^exp every row is full. */
    double lo = 1e-9, hi = (double)g.cols * pow((double)g.rows, ex) + 1.0;
    for (int it = 0; it < 200; it++) {
        double c = sqrt(lo * hi), total = 0;
        for (int32_t k = 0; k < g.rows && total <= (double)g.nnz; k++) {
            double l = floor(c * w[k] + 0.5);
            total += l < 1 ? 1 : l > g.cols ? g.cols : l;
        }
        if (total <= (double)g.nnz)
            lo = c;
        else
            hi = c;
    }
    int64_t total = 0;
    for (int32_t k = 0; k < g.rows; k++) {
        double l = floor(lo * w[k] + 0.5);
        len[k] = l < 1 ? 1 : l > g.cols ? g.cols : (int64_t)l;
        total += len[k];
    }
    for (int32_t k = 0; total < g.nnz; k = (k + 1) % g.rows) {
        if (len[k] < g.cols) {
            len[k]++;
            total++;
        }
    }
    a = sp_csr_new(g.rows, g.cols, g.nnz, e);
    if (a == NULL)
        goto done;
    bits32 bits;
    bits32_seed(&bits, g.seed);
    for (int32_t i = 0; i < g.rows; i++)
        perm[i] = i;
    for (int32_t i = g.rows - 1; i > 0; i--) {
        int32_t j = (int32_t)below32(&bits, (uint64_t)i + 1);
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int32_t k = 0; k < g.rows; k++)
        a->rowptr[perm[k] + 1] = len[k];
    if (fill_uniform_rows(a, &bits, e)) {
        sp_csr_free(a);
        a = NULL;
    }
done:
    free(w);
    free(len);
    free(perm);
    return a;
}

/* Dense square blocks down the diagonal, each of a size drawn uniformly
 * from [ceil(b / 2), b] (default b 16), the last cut at the border: nnz
 * is the sum of the squares, about rows * 0.6 b. */
static sp_csr *gen_blockdiag(gen_args g, dt_err *e)
{
    int64_t v = 0;
    if (need_key(&g, K_ROWS, e) || arg_size(&g, K_ROWS, 1, INT32_MAX, &v, e))
        return NULL;
    g.rows = g.cols = (int32_t)v;
    int64_t b = 16;
    if (g.val[K_B] != NULL && arg_size(&g, K_B, 1, 4096, &b, e))
        return NULL;
    int64_t bmin = (b + 1) / 2;
    /* Every row but those of the last, cut block lies in a block of at
     * least bmin rows: refuse what cannot fit before drawing the block
     * sizes one by one (2^31 rows of b = 1 were 6 s of draws). */
    if (sp_csr_admit(g.rows, g.cols, g.rows > b ? (g.rows - b) * bmin : 0, e) != 0)
        return NULL;
    /* Two passes over the same stream: sizes (for nnz), then the matrix. */
    bits32 bits;
    int64_t nnz = 0;
    bits32_seed(&bits, g.seed);
    for (int64_t at = 0; at < g.rows;) {
        int64_t sz = bmin + below32(&bits, (uint64_t)(b - bmin + 1));
        if (sz > g.rows - at)
            sz = g.rows - at;
        nnz += sz * sz;
        at += sz;
    }
    sp_csr *a = sp_csr_new(g.rows, g.cols, nnz, e);
    if (a == NULL)
        return NULL;
    bits32_seed(&bits, g.seed);
    int64_t k = 0;
    for (int64_t at = 0; at < g.rows;) {
        int64_t sz = bmin + below32(&bits, (uint64_t)(b - bmin + 1));
        if (sz > g.rows - at)
            sz = g.rows - at;
        for (int64_t i = at; i < at + sz; i++) {
            for (int64_t j = at; j < at + sz; j++)
                a->col[k++] = (int32_t)j;
            a->rowptr[i + 1] = k;
        }
        at += sz;
    }
    return a;
}

/* A full band of half-width bw (as gen:banded) plus `outliers` distinct
 * entries outside it: each picks its row uniformly among the rows with
 * room outside the band, then each row draws that many distinct columns
 * uniformly from outside its band. nnz is exact: band plus outliers. */
static sp_csr *gen_bandout(gen_args g, dt_err *e)
{
    if (common_args(&g, 0, e) || need_key(&g, K_BW, e) || need_key(&g, K_OUTLIERS, e))
        return NULL;
    int64_t bw = 0, out = 0;
    if (arg_size(&g, K_BW, 0, INT32_MAX, &bw, e) ||
        arg_size(&g, K_OUTLIERS, 0, INT64_MAX, &out, e))
        return NULL;
    int64_t widest = (g.rows > g.cols ? g.rows : g.cols) - 1;
    if (bw > widest)
        bw = widest;
    int64_t band = band_count(g.rows, g.cols, bw);
    int64_t room = (int64_t)g.rows * g.cols - band;
    if (out > room) {
        dt_err_set(e, "gen:bandout: outliers %lld > the %lld positions outside the band",
                   (long long)out, (long long)room);
        return NULL;
    }
    /* Outlier counts per row first, in a CSR used as the count array. */
    sp_csr *cnt = sp_csr_new(g.rows, g.cols, out, e);
    if (cnt == NULL)
        return NULL;
    bits32 bits;
    bits32_seed(&bits, g.seed);
    for (int64_t k = 0; k < out; k++) {
        uint32_t r;
        int64_t free_r;
        do {
            r = below32(&bits, (uint64_t)g.rows);
            int64_t lo = (int64_t)r - bw < 0 ? 0 : (int64_t)r - bw;
            int64_t hi = (int64_t)r + bw > g.cols - 1 ? g.cols - 1 : (int64_t)r + bw;
            free_r = g.cols - (hi >= lo ? hi - lo + 1 : 0) - cnt->rowptr[r + 1];
        } while (free_r <= 0);
        cnt->rowptr[r + 1]++;
    }
    int64_t most = 0;
    for (int32_t i = 0; i < g.rows; i++)
        most = cnt->rowptr[i + 1] > most ? cnt->rowptr[i + 1] : most;
    sp_csr *a = sp_csr_new(g.rows, g.cols, band + out, e);
    row_scratch s = {0};
    int32_t *tmp = malloc((size_t)(most ? most : 1) * sizeof *tmp);
    if (a == NULL || tmp == NULL || scratch_init(&s, most, e)) {
        if (tmp == NULL)
            dt_err_set(e, "gen:bandout: out of memory");
        sp_csr_free(a);
        sp_csr_free(cnt);
        free(tmp);
        scratch_free(&s);
        return NULL;
    }
    int64_t k = 0;
    for (int64_t i = 0; i < g.rows; i++) {
        int64_t lo = i - bw < 0 ? 0 : i - bw;
        int64_t hi = i + bw > g.cols - 1 ? g.cols - 1 : i + bw;
        int64_t inband = hi >= lo ? hi - lo + 1 : 0;
        if (hi < lo) /* the band misses this row (a wide tall matrix) */
            lo = hi = g.cols;
        int64_t want = cnt->rowptr[i + 1];
        /* want distinct columns of the cols - inband outside, mapped past
         * the band: monotone, so they stay sorted. */
        fill_uniform_row(&bits, tmp, want, (int32_t)(g.cols - inband), &s);
        int64_t o = 0;
        for (; o < want && tmp[o] < lo; o++)
            a->col[k++] = tmp[o];
        for (int64_t j = lo; j <= hi && j < g.cols; j++)
            a->col[k++] = (int32_t)j;
        for (; o < want; o++)
            a->col[k++] = (int32_t)(tmp[o] + inband);
        a->rowptr[i + 1] = k;
    }
    free(tmp);
    scratch_free(&s);
    sp_csr_free(cnt);
    return a;
}

/* ---- replication ---------------------------------------------------------- */

sp_csr *sp_replicate(const sp_csr *a, int32_t k, dt_err *e)
{
    if (k < 1) {
        dt_err_set(e, "replicate: k must be at least 1 (got %d)", k);
        return NULL;
    }
    if ((int64_t)a->rows * k > INT32_MAX || (int64_t)a->cols * k > INT32_MAX) {
        dt_err_set(e, "replicate: %d x %d tiled %d times exceeds %d rows or columns", a->rows,
                   a->cols, k, INT32_MAX);
        return NULL;
    }
    if (a->nnz > INT64_MAX / k) {
        dt_err_set(e, "replicate: %lld entries tiled %d times overflow", (long long)a->nnz, k);
        return NULL;
    }
    sp_csr *r = sp_csr_new(a->rows * k, a->cols * k, a->nnz * k, e);
    if (r == NULL)
        return NULL;
    r->pattern = a->pattern;
    for (int32_t t = 0; t < k; t++) {
        int64_t base = a->nnz * t;
        int32_t shift = a->cols * t;
        for (int32_t i = 0; i < a->rows; i++)
            r->rowptr[(int64_t)a->rows * t + i + 1] = base + a->rowptr[i + 1];
        for (int64_t j = 0; j < a->nnz; j++)
            r->col[base + j] = a->col[j] + shift;
        memcpy(r->val + base, a->val, (size_t)a->nnz * sizeof *a->val);
    }
    return r;
}
