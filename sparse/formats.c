/* formats.c -- CSR to ELLPACK, SELL-C-sigma and BSR, and BSR back to CSR. */
#include "sparse/sparse.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* malloc that never asks for 0 bytes (malloc(0) may return NULL, which would
 * read as out of memory for an empty matrix) and refuses sizes whose byte
 * count overflows size_t. */
static void *alloc_n(int64_t count, size_t size)
{
    if (count < 0 || (uint64_t)count > SIZE_MAX / size)
        return NULL;
    return malloc((size_t)(count > 0 ? count : 1) * size);
}

static int64_t row_len(const sp_csr *a, int32_t i)
{
    return a->rowptr[i + 1] - a->rowptr[i];
}

/* ---- ELLPACK ---------------------------------------------------------------- */

sp_ell *sp_csr_to_ell(const sp_csr *a, int64_t max_entries, dt_err *e)
{
    int64_t width = 0;
    for (int32_t i = 0; i < a->rows; i++)
        width = row_len(a, i) > width ? row_len(a, i) : width;
    /* width <= cols < 2^31 and rows < 2^31, so the product fits int64. */
    int64_t total = (int64_t)a->rows * width;
    if (max_entries > 0 && total > max_entries) {
        dt_err_set(e,
                   "ELL: the longest row has %lld entries, so %d rows x width %lld = %lld "
                   "entries, over the limit of %lld",
                   (long long)width, a->rows, (long long)width, (long long)total,
                   (long long)max_entries);
        return NULL;
    }
    sp_ell *m = calloc(1, sizeof *m);
    if (m == NULL)
        goto oom;
    m->rows = a->rows;
    m->cols = a->cols;
    m->width = (int32_t)width;
    m->nnz = a->nnz;
    m->col = alloc_n(total, sizeof *m->col);
    m->val = alloc_n(total, sizeof *m->val);
    if (m->col == NULL || m->val == NULL)
        goto oom;
    for (int64_t k = 0; k < total; k++) {
        m->col[k] = -1;
        m->val[k] = 0.0;
    }
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t b = a->rowptr[i];
        for (int64_t k = 0; k < row_len(a, i); k++) {
            m->col[k * a->rows + i] = a->col[b + k];
            m->val[k * a->rows + i] = a->val[b + k];
        }
    }
    return m;
oom:
    sp_ell_free(m);
    dt_err_set(e, "ELL: out of memory for %d rows x width %lld", a->rows, (long long)width);
    return NULL;
}

void sp_ell_free(sp_ell *m)
{
    if (m == NULL)
        return;
    free(m->col);
    free(m->val);
    free(m);
}

/* ---- SELL-C-sigma ------------------------------------------------------------ */

/* Sort key for rows within a sigma window: longer rows first, ties in the
 * order the window lists them (pos), so the permutation is fully
 * determined, and the same from qsort as from the stable counting sort. */
typedef struct row_key {
    int64_t len;
    int32_t row;
    int32_t pos;
} row_key;

static int cmp_row_key(const void *pa, const void *pb)
{
    const row_key *x = pa, *y = pb;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

/* The longest row a window may hold for the counting sort below; windows
 * with a longer one fall back to qsort. */
#define SELL_COUNT_MAX 4096

/* Sorts a window of n keys (given in row order) as cmp_row_key would:
 * a stable counting sort by length, longest first, when every length is
 * at most SELL_COUNT_MAX (tmp: n keys, cnt: SELL_COUNT_MAX + 1 slots);
 * qsort otherwise. At 32M nonzeros in windows of 256 rows, qsort took a
 * fifth of the sell16 format's build. */
static void sort_window(row_key *k, int64_t n, row_key *tmp, int64_t *cnt)
{
    int64_t max = 0;
    for (int64_t i = 0; i < n; i++)
        max = k[i].len > max ? k[i].len : max;
    if (max > SELL_COUNT_MAX) {
        qsort(k, (size_t)n, sizeof *k, cmp_row_key);
        return;
    }
    memset(cnt, 0, ((size_t)max + 1) * sizeof *cnt);
    for (int64_t i = 0; i < n; i++)
        cnt[k[i].len]++;
    int64_t at = 0;
    for (int64_t len = max; len >= 0; len--) {
        int64_t c = cnt[len];
        cnt[len] = at;
        at += c;
    }
    for (int64_t i = 0; i < n; i++)
        tmp[cnt[k[i].len]++] = k[i];
    memcpy(k, tmp, (size_t)n * sizeof *k);
}

int32_t *sp_sell_perm(const sp_csr *a, int32_t C, int32_t sigma, dt_err *e)
{
    return sp_sell_perm_cap(a, C, sigma, 0, e);
}

int32_t *sp_sell_perm_cap(const sp_csr *a, int32_t C, int32_t sigma, int64_t long_row, dt_err *e)
{
    return sp_sell_perm_ordered(a, C, sigma, long_row, NULL, e);
}

/* ---- Cuthill-McKee row order ------------------------------------------------- */

typedef struct cm_key {
    int64_t deg;
    int32_t row;
} cm_key;

static int cmp_cm_key(const void *pa, const void *pb)
{
    const cm_key *x = pa, *y = pb;
    if (x->deg != y->deg)
        return x->deg < y->deg ? -1 : 1;
    return (x->row > y->row) - (x->row < y->row);
}

int32_t *sp_row_order_cm(const sp_csr *a, dt_err *e)
{
    const int32_t n = a->rows;
    int32_t *order = alloc_n(n, sizeof *order);
    if (order == NULL)
        goto oom0;
    if (a->rows != a->cols) {
        for (int32_t i = 0; i < n; i++)
            order[i] = i;
        return order;
    }
    /* The transpose's pattern (CSC of A), so that a row's neighbours are
     * its columns and the rows with an entry in its column: A + A^T. */
    int64_t *tptr = alloc_n((int64_t)n + 1, sizeof *tptr);
    int32_t *trow = alloc_n(a->nnz, sizeof *trow);
    cm_key *keys = alloc_n(n, sizeof *keys);
    cm_key *nb = NULL;
    unsigned char *seen = calloc((size_t)(n > 0 ? n : 1), 1);
    if (tptr == NULL || trow == NULL || keys == NULL || seen == NULL)
        goto oom;
    memset(tptr, 0, ((size_t)n + 1) * sizeof *tptr);
    for (int64_t k = 0; k < a->nnz; k++)
        tptr[a->col[k] + 1]++;
    for (int32_t i = 0; i < n; i++)
        tptr[i + 1] += tptr[i];
    for (int32_t i = 0; i < n; i++)
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++)
            trow[tptr[a->col[k]]++] = i;
    for (int32_t i = n; i > 0; i--)
        tptr[i] = tptr[i - 1];
    tptr[0] = 0;
    int64_t maxdeg = 0;
    for (int32_t i = 0; i < n; i++) {
        keys[i].row = i;
        keys[i].deg = row_len(a, i) + (tptr[i + 1] - tptr[i]);
        maxdeg = keys[i].deg > maxdeg ? keys[i].deg : maxdeg;
    }
    nb = alloc_n(maxdeg, sizeof *nb);
    if (nb == NULL)
        goto oom;
    int32_t tail = 0;
    for (int32_t s = 0; s < n; s++) {
        if (seen[s])
            continue;
        /* The component of s, in the matrix's order of its first row (so
         * that the copies of a block-diagonal matrix stay apart), walked
         * twice: once to find its least connected row, then breadth first
         * from that row. */
        const int32_t first = tail;
        for (int pass = 0; pass < 2; pass++) {
            int32_t start = s;
            if (pass == 1) {
                for (int32_t q = first; q < tail; q++) {
                    seen[order[q]] = 0;
                    if (cmp_cm_key(&keys[order[q]], &keys[start]) < 0)
                        start = order[q];
                }
                tail = first;
            }
            seen[start] = 1;
            order[tail++] = start;
            for (int32_t head = first; head < tail;) {
                const int32_t u = order[head++];
                int64_t m = 0;
                for (int side = 0; side < 2; side++) {
                    const int64_t b = side ? tptr[u] : a->rowptr[u];
                    const int64_t end = side ? tptr[u + 1] : a->rowptr[u + 1];
                    for (int64_t k = b; k < end; k++) {
                        const int32_t v = side ? trow[k] : a->col[k];
                        if (seen[v])
                            continue;
                        seen[v] = 1;
                        nb[m++] = keys[v];
                    }
                }
                /* Unvisited neighbours least connected first. */
                qsort(nb, (size_t)m, sizeof *nb, cmp_cm_key);
                for (int64_t k = 0; k < m; k++)
                    order[tail++] = nb[k].row;
            }
        }
    }
    free(nb);
    free(seen);
    free(keys);
    free(trow);
    free(tptr);
    return order;
oom:
    free(nb);
    free(seen);
    free(keys);
    free(trow);
    free(tptr);
    free(order);
oom0:
    dt_err_set(e, "row order: out of memory for %d rows and %lld nonzeros", a->rows,
               (long long)a->nnz);
    return NULL;
}

/* ---- groups of similar rows --------------------------------------------------- */

static int cmp_i32(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* The state of one group's growth in sp_row_groups_similar. */
typedef struct grow_state {
    const sp_csr *a;
    const int64_t *tptr; /* the pattern's transpose: rows of column c */
    const int32_t *trow;
    unsigned char *used;
    int32_t *cnt;     /* an unused row's columns in the group's union */
    int32_t *touched; /* the rows with cnt > 0 */
    int32_t *stamp;   /* column -> the last group whose union holds it, + 1 */
    int64_t nt, budget;
} grow_state;

/* Row i joins group g's union: its columns not yet there are marked, and
 * every unused row with an entry in one of them counts it, while the
 * budget of column entries lasts (past it the counts are a lower bound). */
static void grow_add(grow_state *s, int32_t i, int32_t g)
{
    for (int64_t k = s->a->rowptr[i]; k < s->a->rowptr[i + 1]; k++) {
        const int32_t c = s->a->col[k];
        if (s->stamp[c] == g + 1)
            continue;
        s->stamp[c] = g + 1;
        for (int64_t q = s->tptr[c]; q < s->tptr[c + 1] && s->budget > 0; q++, s->budget--) {
            const int32_t j = s->trow[q];
            if (s->used[j])
                continue;
            if (s->cnt[j]++ == 0)
                s->touched[s->nt++] = j;
        }
    }
}

/* The unused row that adds the fewest new columns to the union (its length
 * less its count), ties to the one sharing more, then to the nearest to
 * seed; -1 when no unused row shares a column. */
static int32_t grow_pick(const grow_state *s, int32_t seed)
{
    int32_t best = -1;
    int64_t bnew = 0, bcnt = 0, bdist = 0;
    for (int64_t q = 0; q < s->nt; q++) {
        const int32_t j = s->touched[q];
        if (s->used[j])
            continue;
        const int64_t nw = row_len(s->a, j) - s->cnt[j], c = s->cnt[j];
        const int64_t d = j > seed ? (int64_t)j - seed : (int64_t)seed - j;
        if (best < 0 || nw < bnew || (nw == bnew && (c > bcnt || (c == bcnt && d < bdist)))) {
            best = j;
            bnew = nw;
            bcnt = c;
            bdist = d;
        }
    }
    return best;
}

int32_t *sp_row_groups_similar(const sp_csr *a, int32_t r, int64_t *ngroups, dt_err *e)
{
    if (r < 1 || r > 64) {
        dt_err_set(e, "row groups: r must be 1 to 64, got %d", r);
        return NULL;
    }
    const int32_t n = a->rows;
    int64_t nonempty = 0;
    for (int32_t i = 0; i < n; i++)
        nonempty += row_len(a, i) > 0;
    const int64_t ng = (nonempty + r - 1) / r;
    int32_t *out = alloc_n(ng * r, sizeof *out);
    int64_t *tptr = alloc_n((int64_t)a->cols + 1, sizeof *tptr);
    int32_t *trow = alloc_n(a->nnz, sizeof *trow);
    grow_state s = {.a = a, .tptr = tptr, .trow = trow};
    s.used = calloc((size_t)(n > 0 ? n : 1), 1);
    s.cnt = calloc((size_t)(n > 0 ? n : 1), sizeof *s.cnt);
    s.touched = alloc_n(n, sizeof *s.touched);
    s.stamp = calloc((size_t)(a->cols > 0 ? a->cols : 1), sizeof *s.stamp);
    if (out == NULL || tptr == NULL || trow == NULL || s.used == NULL || s.cnt == NULL ||
        s.touched == NULL || s.stamp == NULL) {
        free(out);
        out = NULL;
        dt_err_set(e, "row groups: out of memory for %d rows and %lld nonzeros", n,
                   (long long)a->nnz);
        goto done;
    }
    memset(tptr, 0, ((size_t)a->cols + 1) * sizeof *tptr);
    for (int64_t k = 0; k < a->nnz; k++)
        tptr[a->col[k] + 1]++;
    for (int32_t c = 0; c < a->cols; c++)
        tptr[c + 1] += tptr[c];
    for (int32_t i = 0; i < n; i++)
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++)
            trow[tptr[a->col[k]]++] = i;
    for (int32_t c = a->cols; c > 0; c--)
        tptr[c] = tptr[c - 1];
    tptr[0] = 0;
    int64_t g = 0;
    int32_t next = 0; /* the first row that may still be unused */
    for (int32_t seed = 0; seed < n; seed++) {
        if (s.used[seed] || row_len(a, seed) == 0)
            continue;
        int32_t *grp = out + g * r;
        int32_t m = 0;
        s.used[seed] = 1;
        grp[m++] = seed;
        s.nt = 0;
        s.budget = 128 * row_len(a, seed) + 1024;
        grow_add(&s, seed, (int32_t)g);
        while (m < r) {
            int32_t j = grow_pick(&s, seed);
            if (j < 0) { /* nothing shares a column: the next unused row */
                while (next < n && (s.used[next] || row_len(a, next) == 0))
                    next++;
                if (next == n)
                    break;
                j = next;
            }
            s.used[j] = 1;
            grp[m++] = j;
            grow_add(&s, j, (int32_t)g);
        }
        for (int64_t q = 0; q < s.nt; q++)
            s.cnt[s.touched[q]] = 0;
        qsort(grp, (size_t)m, sizeof *grp, cmp_i32);
        while (m < r)
            grp[m++] = -1;
        g++;
    }
    *ngroups = g;
done:
    free(s.stamp);
    free(s.touched);
    free(s.cnt);
    free(s.used);
    free(trow);
    free(tptr);
    return out;
}

/* The windows [lo, hi) of sp_sell_perm_ordered, on one thread with its own
 * keys and counts: each window's rows keyed, sorted and written to perm. */
typedef struct perm_job {
    const sp_csr *a;
    const int32_t *order;
    int64_t long_row;
    int32_t sigma;
    int32_t *perm;
    atomic_int failed; /* a part ran out of memory */
} perm_job;

static void perm_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    perm_job *j = ctx;
    const sp_csr *a = j->a;
    const int64_t sigma = j->sigma;
    row_key *keys = alloc_n(sigma, sizeof *keys);
    row_key *tmp = sigma > 1 ? alloc_n(sigma, sizeof *tmp) : NULL;
    int64_t *cnt = sigma > 1 ? alloc_n(SELL_COUNT_MAX + 1, sizeof *cnt) : NULL;
    if (keys == NULL || (sigma > 1 && (tmp == NULL || cnt == NULL))) {
        atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
        goto out;
    }
    for (int64_t w = lo; w < hi; w++) {
        const int64_t first = w * sigma;
        const int64_t n = a->rows - first < sigma ? a->rows - first : sigma;
        for (int64_t q = 0; q < n; q++) {
            const int32_t i = (int32_t)(first + q);
            const int32_t r = j->order ? j->order[i] : i;
            keys[q].len = row_len(a, r);
            keys[q].row = r;
            keys[q].pos = i;
            if (j->long_row > 0 && keys[q].len > j->long_row) {
                keys[q].len = 0;
                keys[q].row = -1; /* left out: -1 in perm where it would sit */
            }
        }
        if (sigma > 1)
            sort_window(keys, n, tmp, cnt);
        for (int64_t q = 0; q < n; q++)
            j->perm[first + q] = keys[q].row;
    }
out:
    free(cnt);
    free(tmp);
    free(keys);
}

int32_t *sp_sell_perm_ordered(const sp_csr *a, int32_t C, int32_t sigma, int64_t long_row,
                              const int32_t *order, dt_err *e)
{
    if (C < 1 || C > 1024) {
        dt_err_set(e, "SELL: slice height C must be 1..1024 (got %d)", C);
        return NULL;
    }
    if (sigma < 1 || (sigma != 1 && sigma % C != 0)) {
        dt_err_set(e,
                   "SELL: sorting window sigma must be 1 or a positive multiple of C = %d "
                   "(got %d)",
                   C, sigma);
        return NULL;
    }
    int64_t nslices = ((int64_t)a->rows + C - 1) / C;
    int64_t padded_rows = nslices * C; /* < 2^31 + 1024, fits int64 */
    if (padded_rows > INT32_MAX) {
        dt_err_set(e, "SELL: %d rows padded to slices of %d exceed %d", a->rows, C, INT32_MAX);
        return NULL;
    }
    int32_t *perm = alloc_n(padded_rows, sizeof *perm);
    if (perm == NULL)
        goto oom;
    /* Windows are independent: sorted in parallel (at 32M nonzeros the
     * sort was the largest serial part of building sell16). */
    perm_job job = {a, order, long_row, sigma, perm};
    atomic_init(&job.failed, 0);
    const int64_t nwin = ((int64_t)a->rows + sigma - 1) / sigma;
    sp_parallel_for(nwin, a->rows, perm_range, &job);
    if (atomic_load(&job.failed))
        goto oom;
    for (int64_t i = a->rows; i < padded_rows; i++)
        perm[i] = -1;
    return perm;
oom:
    free(perm);
    dt_err_set(e, "SELL: out of memory for %d rows (C = %d, sigma = %d)", a->rows, C, sigma);
    return NULL;
}

sp_sell *sp_csr_to_sell(const sp_csr *a, int32_t C, int32_t sigma, dt_err *e)
{
    int32_t *perm = sp_sell_perm(a, C, sigma, e);
    if (perm == NULL)
        return NULL;
    int64_t nslices = ((int64_t)a->rows + C - 1) / C;
    sp_sell *m = calloc(1, sizeof *m);
    if (m == NULL) {
        free(perm);
        goto oom;
    }
    m->rows = a->rows;
    m->cols = a->cols;
    m->C = C;
    m->sigma = sigma;
    m->nslices = (int32_t)nslices;
    m->nnz = a->nnz;
    m->perm = perm;
    m->slice_ptr = alloc_n(nslices + 1, sizeof *m->slice_ptr);
    m->slice_len = alloc_n(nslices, sizeof *m->slice_len);
    if (m->slice_ptr == NULL || m->slice_len == NULL)
        goto oom;

    /* Slice widths and offsets; a slice holds C rows of its widest row. */
    m->slice_ptr[0] = 0;
    for (int64_t s = 0; s < nslices; s++) {
        int64_t width = 0;
        for (int64_t r = s * C; r < (s + 1) * C && r < a->rows; r++)
            width = row_len(a, m->perm[r]) > width ? row_len(a, m->perm[r]) : width;
        m->slice_len[s] = (int32_t)width;
        m->slice_ptr[s + 1] = m->slice_ptr[s] + width * C;
    }
    m->stored = m->slice_ptr[nslices];
    m->col = alloc_n(m->stored, sizeof *m->col);
    m->val = alloc_n(m->stored, sizeof *m->val);
    if (m->col == NULL || m->val == NULL)
        goto oom;
    for (int64_t k = 0; k < m->stored; k++) {
        m->col[k] = -1;
        m->val[k] = 0.0;
    }
    /* Entry k of the row at slice position j: slice_ptr[s] + k * C + j. */
    for (int64_t p = 0; p < a->rows; p++) {
        int64_t s = p / C, j = p % C;
        int32_t row = m->perm[p];
        int64_t b = a->rowptr[row];
        for (int64_t k = 0; k < row_len(a, row); k++) {
            m->col[m->slice_ptr[s] + k * C + j] = a->col[b + k];
            m->val[m->slice_ptr[s] + k * C + j] = a->val[b + k];
        }
    }
    return m;
oom:
    sp_sell_free(m);
    dt_err_set(e, "SELL: out of memory for %d rows (C = %d, sigma = %d)", a->rows, C, sigma);
    return NULL;
}

void sp_sell_free(sp_sell *m)
{
    if (m == NULL)
        return;
    free(m->slice_ptr);
    free(m->slice_len);
    free(m->perm);
    free(m->col);
    free(m->val);
    free(m);
}

/* ---- BSR ----------------------------------------------------------------------- */

/* Explicit zeros stored in the CSR become indistinguishable from fill-in, so
 * sp_bsr_to_csr drops them too. */
sp_bsr *sp_csr_to_bsr(const sp_csr *a, int32_t b, dt_err *e)
{
    if (b < 1 || b > 64) {
        dt_err_set(e, "BSR: block size b must be 1..64 (got %d)", b);
        return NULL;
    }
    sp_bsr *m = calloc(1, sizeof *m);
    int32_t *slot = NULL; /* per block column: its block index in the current block row, or -1 */
    if (m == NULL)
        goto oom;
    m->rows = a->rows;
    m->cols = a->cols;
    m->b = b;
    m->brows = (int32_t)(((int64_t)a->rows + b - 1) / b);
    m->bcols = (int32_t)(((int64_t)a->cols + b - 1) / b);
    m->nnz = a->nnz;
    m->browptr = alloc_n((int64_t)m->brows + 1, sizeof *m->browptr);
    slot = alloc_n(m->bcols, sizeof *slot);
    if (m->browptr == NULL || slot == NULL)
        goto oom;
    for (int32_t j = 0; j < m->bcols; j++)
        slot[j] = -1;

    /* Pass 1: count the distinct block columns of each block row. slot[]
     * holds the block row that last touched a block column. */
    m->browptr[0] = 0;
    for (int32_t br = 0; br < m->brows; br++) {
        int64_t count = 0;
        int64_t top = (int64_t)br * b, bottom = top + b < a->rows ? top + b : a->rows;
        for (int64_t i = top; i < bottom; i++) {
            for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
                int32_t bc = a->col[k] / b;
                if (slot[bc] != br) {
                    slot[bc] = br;
                    count++;
                }
            }
        }
        m->browptr[br + 1] = m->browptr[br] + count;
    }
    m->nblocks = m->browptr[m->brows];
    int64_t bb = (int64_t)b * b;
    if (m->nblocks > INT64_MAX / bb)
        goto oom;
    m->bcol = alloc_n(m->nblocks, sizeof *m->bcol);
    m->val = alloc_n(m->nblocks * bb, sizeof *m->val);
    if (m->bcol == NULL || m->val == NULL)
        goto oom;
    memset(m->val, 0, (size_t)(m->nblocks * bb) * sizeof *m->val);

    /* Pass 2: a block row's block columns in ascending order (a marker walk
     * over bcols would cost O(brows * bcols); sorting the few found is
     * cheaper), then scatter the values. slot[] now maps a block column to
     * its block index, valid for the block row being filled. */
    for (int32_t j = 0; j < m->bcols; j++)
        slot[j] = -1;
    for (int32_t br = 0; br < m->brows; br++) {
        int64_t base = m->browptr[br], n = 0;
        int64_t top = (int64_t)br * b, bottom = top + b < a->rows ? top + b : a->rows;
        for (int64_t i = top; i < bottom; i++) {
            for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
                int32_t bc = a->col[k] / b;
                if (slot[bc] < 0) {
                    slot[bc] = 0; /* seen; the index is set after sorting */
                    m->bcol[base + n++] = bc;
                }
            }
        }
        /* insertion sort: block rows rarely hold many blocks, and each row's
         * columns arrive sorted, so the list is nearly sorted already */
        int32_t *bc = m->bcol + base;
        for (int64_t x = 1; x < n; x++) {
            int32_t v = bc[x];
            int64_t y = x - 1;
            while (y >= 0 && bc[y] > v) {
                bc[y + 1] = bc[y];
                y--;
            }
            bc[y + 1] = v;
        }
        for (int64_t x = 0; x < n; x++)
            slot[bc[x]] = (int32_t)x;
        for (int64_t i = top; i < bottom; i++) {
            for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
                int32_t c = a->col[k];
                int64_t blk = base + slot[c / b];
                m->val[blk * bb + (i - top) * b + c % b] = a->val[k];
            }
        }
        for (int64_t x = 0; x < n; x++)
            slot[bc[x]] = -1;
    }
    free(slot);
    return m;
oom:
    free(slot);
    dt_err_set(e, "BSR: out of memory for %lld blocks of %d x %d", m ? (long long)m->nblocks : 0LL,
               b, b);
    sp_bsr_free(m);
    return NULL;
}

void sp_bsr_free(sp_bsr *m)
{
    if (m == NULL)
        return;
    free(m->browptr);
    free(m->bcol);
    free(m->val);
    free(m);
}

sp_csr *sp_bsr_to_csr(const sp_bsr *m, dt_err *e)
{
    int32_t b = m->b;
    int64_t bb = (int64_t)b * b;
    /* Pass 1 counts the nonzeros of each original row (padding rows and
     * columns past the matrix edge hold only fill-in zeros). */
    int64_t nnz = 0;
    for (int32_t br = 0; br < m->brows; br++) {
        for (int32_t r = 0; r < b && (int64_t)br * b + r < m->rows; r++) {
            for (int64_t blk = m->browptr[br]; blk < m->browptr[br + 1]; blk++) {
                const double *v = m->val + blk * bb + (int64_t)r * b;
                for (int32_t c = 0; c < b; c++)
                    nnz += v[c] != 0.0;
            }
        }
    }
    sp_csr *a = sp_csr_new(m->rows, m->cols, nnz, e);
    if (a == NULL)
        return NULL;
    /* Blocks of a block row are in ascending block column, so walking them
     * in order leaves every row sorted. */
    int64_t out = 0;
    for (int32_t br = 0; br < m->brows; br++) {
        for (int32_t r = 0; r < b && (int64_t)br * b + r < m->rows; r++) {
            for (int64_t blk = m->browptr[br]; blk < m->browptr[br + 1]; blk++) {
                const double *v = m->val + blk * bb + (int64_t)r * b;
                for (int32_t c = 0; c < b; c++) {
                    if (v[c] != 0.0) {
                        a->col[out] = m->bcol[blk] * b + c;
                        a->val[out] = v[c];
                        out++;
                    }
                }
            }
            a->rowptr[(int64_t)br * b + r + 1] = out;
        }
    }
    return a;
}
