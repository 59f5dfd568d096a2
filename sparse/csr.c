/* csr.c -- CSR and COO storage: allocation, validation, COO -> CSR with
 * sorting and duplicate summing, transpose, fingerprints, and the names of
 * dtypes, ops and epilogues. */
#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- names ------------------------------------------------------------- */

static const char *dtype_names[] = {"fp32", "fp64", "fp16", "bf16"};
static const char *op_names[] = {"spmv", "spmm", "sddmm"};
static const char *epi_names[] = {"none", "relu", "gelu", "bias"};

const char *sp_dtype_name(sp_dtype t)
{
    return (unsigned)t < DT_ARRAY_LEN(dtype_names) ? dtype_names[t] : "?";
}

int sp_dtype_parse(const char *s, sp_dtype *out)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(dtype_names); i++) {
        if (dt_streq(s, dtype_names[i])) {
            *out = (sp_dtype)i;
            return 0;
        }
    }
    return -1;
}

int sp_dtype_size(sp_dtype t)
{
    switch (t) {
    case SP_FP32:
        return 4;
    case SP_FP64:
        return 8;
    case SP_FP16:
    case SP_BF16:
        return 2;
    }
    return 4;
}

const char *sp_op_name(sp_op op)
{
    return (unsigned)op < DT_ARRAY_LEN(op_names) ? op_names[op] : "?";
}

int sp_op_parse(const char *s, sp_op *out)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(op_names); i++) {
        if (dt_streq(s, op_names[i])) {
            *out = (sp_op)i;
            return 0;
        }
    }
    return -1;
}

const char *sp_epilogue_name(sp_epilogue e)
{
    return (unsigned)e < DT_ARRAY_LEN(epi_names) ? epi_names[e] : "?";
}

int sp_epilogue_parse(const char *s, sp_epilogue *out)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(epi_names); i++) {
        if (dt_streq(s, epi_names[i])) {
            *out = (sp_epilogue)i;
            return 0;
        }
    }
    return -1;
}

/* ---- CSR --------------------------------------------------------------- */

int sp_csr_admit(int32_t rows, int32_t cols, int64_t nnz, dt_err *e)
{
    if (rows < 0 || cols < 0 || nnz < 0)
        return dt_err_set(e, "invalid matrix size %d x %d with %lld entries", rows, cols,
                          (long long)nnz);
    /* Admission (issue 37): the arrays, and about as much again for what
     * follows a new matrix (the pattern report, a format built from it),
     * must fit in the memory available now; otherwise the allocation
     * succeeds lazily and the process grows until the system kills it. */
    double need = 2.0 * ((double)rows + 1) * sizeof(int64_t) +
                  2.0 * (double)nnz * (sizeof(int32_t) + sizeof(double));
    int64_t avail = dt_mem_available();
    if (avail >= 0 && need > (double)avail) {
        char n1[32], n2[32];
        dt_err_set(e,
                   "a %d x %d matrix with %lld entries needs about %s of memory (its arrays and "
                   "as much again to analyse and convert them); %s is available: use a smaller "
                   "matrix",
                   rows, cols, (long long)nnz, dt_fmt_bytes(need, n1, sizeof n1),
                   dt_fmt_bytes((double)avail, n2, sizeof n2));
        return -1;
    }
    return 0;
}

sp_csr *sp_csr_new(int32_t rows, int32_t cols, int64_t nnz, dt_err *e)
{
    if (sp_csr_admit(rows, cols, nnz, e) != 0)
        return NULL;
    sp_csr *a = calloc(1, sizeof *a);
    if (a == NULL)
        goto oom;
    a->rows = rows;
    a->cols = cols;
    a->nnz = nnz;
    a->rowptr = calloc((size_t)rows + 1, sizeof *a->rowptr);
    a->col = malloc((size_t)(nnz ? nnz : 1) * sizeof *a->col);
    a->val = malloc((size_t)(nnz ? nnz : 1) * sizeof *a->val);
    if (a->rowptr == NULL || a->col == NULL || a->val == NULL)
        goto oom;
    return a;
oom:
    sp_csr_free(a);
    dt_err_set(e, "out of memory for a %d x %d matrix with %lld entries", rows, cols,
               (long long)nnz);
    return NULL;
}

void sp_csr_free(sp_csr *a)
{
    if (a == NULL)
        return;
    free(a->rowptr);
    free(a->col);
    free(a->val);
    free(a);
}

sp_csr *sp_csr_dup(const sp_csr *a, dt_err *e)
{
    sp_csr *b = sp_csr_new(a->rows, a->cols, a->nnz, e);
    if (b == NULL)
        return NULL;
    memcpy(b->rowptr, a->rowptr, ((size_t)a->rows + 1) * sizeof *a->rowptr);
    memcpy(b->col, a->col, (size_t)a->nnz * sizeof *a->col);
    memcpy(b->val, a->val, (size_t)a->nnz * sizeof *a->val);
    b->pattern = a->pattern;
    return b;
}

int sp_csr_validate(const sp_csr *a, dt_err *e)
{
    if (a->rows < 0 || a->cols < 0)
        return dt_err_set(e, "negative size %d x %d", a->rows, a->cols);
    if (a->rowptr[0] != 0)
        return dt_err_set(e, "rowptr[0] is %lld, not 0", (long long)a->rowptr[0]);
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t b = a->rowptr[i], end = a->rowptr[i + 1];
        if (end < b)
            return dt_err_set(e, "row %d: offsets decrease (%lld > %lld)", i, (long long)b,
                              (long long)end);
        if (end > a->nnz)
            return dt_err_set(e, "row %d: offset %lld past nnz %lld", i, (long long)end,
                              (long long)a->nnz);
        for (int64_t k = b; k < end; k++) {
            if (a->col[k] < 0 || a->col[k] >= a->cols)
                return dt_err_set(e, "row %d: column %d out of range [0, %d)", i, a->col[k],
                                  a->cols);
            if (k > b && a->col[k] <= a->col[k - 1])
                return dt_err_set(e, "row %d: columns not sorted and unique (%d after %d)", i,
                                  a->col[k], a->col[k - 1]);
            if (!isfinite(a->val[k]))
                return dt_err_set(e, "row %d, column %d: value is not finite", i, a->col[k]);
        }
    }
    if (a->rowptr[a->rows] != a->nnz)
        return dt_err_set(e, "rowptr[rows] is %lld, nnz is %lld", (long long)a->rowptr[a->rows],
                          (long long)a->nnz);
    return 0;
}

size_t sp_csr_bytes(const sp_csr *a)
{
    return ((size_t)a->rows + 1) * sizeof(int64_t) +
           (size_t)a->nnz * (sizeof(int32_t) + sizeof(double));
}

size_t sp_csr_device_bytes(const sp_csr *a, sp_dtype t)
{
    size_t off = a->nnz >= INT32_MAX ? 8 : 4;
    return ((size_t)a->rows + 1) * off + (size_t)a->nnz * (4 + (size_t)sp_dtype_size(t));
}

void sp_csr_fingerprint(const sp_csr *a, char out[17])
{
    uint64_t h = DT_HASH_SEED;
    h = dt_hash64(&a->rows, sizeof a->rows, h);
    h = dt_hash64(&a->cols, sizeof a->cols, h);
    h = dt_hash64(&a->nnz, sizeof a->nnz, h);
    h = dt_hash64(a->rowptr, ((size_t)a->rows + 1) * sizeof *a->rowptr, h);
    h = dt_hash64(a->col, (size_t)a->nnz * sizeof *a->col, h);
    h = dt_hash64(a->val, (size_t)a->nnz * sizeof *a->val, h);
    dt_hash_hex(h, out);
}

void sp_csr_randomize_pattern_values(sp_csr *a)
{
    dt_rng g;
    char fp[17];
    sp_csr_fingerprint(a, fp);
    dt_rng_seed(&g, dt_hash_str(fp, DT_HASH_SEED));
    for (int64_t k = 0; k < a->nnz; k++) {
        double m = 0.5 + dt_rng_uniform(&g);
        a->val[k] = (dt_rng_next(&g) & 1) ? m : -m;
    }
}

int sp_csr_distinct_values(const sp_csr *a, int cap)
{
    enum { SLOTS = 8192 }; /* open addressing, at most 4096 used */
    cap = cap < 1 ? 1 : cap > SLOTS / 2 ? SLOTS / 2 : cap;
    uint64_t key[SLOTS];
    unsigned char used[SLOTS] = {0};
    int n = 0;
    for (int64_t k = 0; k < a->nnz; k++) {
        double v = a->val[k];
        if (v == 0.0 && !signbit(v))
            continue;
        uint64_t b;
        memcpy(&b, &v, sizeof b);
        size_t h = (size_t)((b * 0x9e3779b97f4a7c15ULL) >> 51) & (SLOTS - 1);
        while (used[h] && key[h] != b)
            h = (h + 1) & (SLOTS - 1);
        if (!used[h]) {
            if (n == cap)
                return cap + 1;
            used[h] = 1;
            key[h] = b;
            n++;
        }
    }
    return n;
}

sp_csr *sp_csr_transpose(const sp_csr *a, dt_err *e)
{
    sp_csr *t = sp_csr_new(a->cols, a->rows, a->nnz, e);
    if (t == NULL)
        return NULL;
    t->pattern = a->pattern;
    for (int64_t k = 0; k < a->nnz; k++)
        t->rowptr[a->col[k] + 1]++;
    for (int32_t j = 0; j < a->cols; j++)
        t->rowptr[j + 1] += t->rowptr[j];
    int64_t *next = malloc(((size_t)a->cols + 1) * sizeof *next);
    if (next == NULL) {
        sp_csr_free(t);
        dt_err_set(e, "out of memory transposing");
        return NULL;
    }
    memcpy(next, t->rowptr, ((size_t)a->cols + 1) * sizeof *next);
    /* Walking rows in order leaves each output row sorted by column. */
    for (int32_t i = 0; i < a->rows; i++) {
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            int64_t dst = next[a->col[k]]++;
            t->col[dst] = i;
            t->val[dst] = a->val[k];
        }
    }
    free(next);
    return t;
}

/* ---- COO --------------------------------------------------------------- */

sp_coo *sp_coo_new(int32_t rows, int32_t cols, int64_t cap, dt_err *e)
{
    sp_coo *c = calloc(1, sizeof *c);
    if (c == NULL) {
        dt_err_set(e, "out of memory");
        return NULL;
    }
    c->rows = rows;
    c->cols = cols;
    if (cap < 16)
        cap = 16;
    c->cap = cap;
    c->row = malloc((size_t)cap * sizeof *c->row);
    c->col = malloc((size_t)cap * sizeof *c->col);
    c->val = malloc((size_t)cap * sizeof *c->val);
    if (c->row == NULL || c->col == NULL || c->val == NULL) {
        sp_coo_free(c);
        dt_err_set(e, "out of memory for %lld entries", (long long)cap);
        return NULL;
    }
    return c;
}

void sp_coo_free(sp_coo *c)
{
    if (c == NULL)
        return;
    free(c->row);
    free(c->col);
    free(c->val);
    free(c);
}

int sp_coo_push(sp_coo *c, int32_t r, int32_t col, double v, dt_err *e)
{
    if (c->nnz == c->cap) {
        int64_t cap = c->cap * 2;
        int32_t *nr = realloc(c->row, (size_t)cap * sizeof *nr);
        if (nr == NULL)
            return dt_err_set(e, "out of memory for %lld entries", (long long)cap);
        c->row = nr;
        int32_t *nc = realloc(c->col, (size_t)cap * sizeof *nc);
        if (nc == NULL)
            return dt_err_set(e, "out of memory for %lld entries", (long long)cap);
        c->col = nc;
        double *nv = realloc(c->val, (size_t)cap * sizeof *nv);
        if (nv == NULL)
            return dt_err_set(e, "out of memory for %lld entries", (long long)cap);
        c->val = nv;
        c->cap = cap;
    }
    c->row[c->nnz] = r;
    c->col[c->nnz] = col;
    c->val[c->nnz] = v;
    c->nnz++;
    return 0;
}

/* Sort (col, val) pairs of one row by column: insertion sort for the short
 * rows that dominate real matrices, heap sort past that so that a single
 * huge row cannot go quadratic. */
static void sift_down(int32_t *col, double *val, int64_t start, int64_t n)
{
    int64_t root = start;
    for (;;) {
        int64_t child = 2 * root + 1;
        if (child >= n)
            return;
        if (child + 1 < n && col[child + 1] > col[child])
            child++;
        if (col[root] >= col[child])
            return;
        int32_t tc = col[root];
        col[root] = col[child];
        col[child] = tc;
        double tv = val[root];
        val[root] = val[child];
        val[child] = tv;
        root = child;
    }
}

static void sort_row(int32_t *col, double *val, int64_t n)
{
    if (n <= 32) {
        for (int64_t i = 1; i < n; i++) {
            int32_t c = col[i];
            double v = val[i];
            int64_t j = i - 1;
            while (j >= 0 && col[j] > c) {
                col[j + 1] = col[j];
                val[j + 1] = val[j];
                j--;
            }
            col[j + 1] = c;
            val[j + 1] = v;
        }
        return;
    }
    for (int64_t s = n / 2 - 1; s >= 0; s--)
        sift_down(col, val, s, n);
    for (int64_t end = n - 1; end > 0; end--) {
        int32_t tc = col[0];
        col[0] = col[end];
        col[end] = tc;
        double tv = val[0];
        val[0] = val[end];
        val[end] = tv;
        sift_down(col, val, 0, end);
    }
}

sp_csr *sp_coo_to_csr(const sp_coo *c, dt_err *e)
{
    /* Counting sort by row, then sort each row by column and sum duplicates
     * in place; the arrays are sized for the entries before merging and the
     * CSR keeps the slack (at most the number of duplicates). */
    sp_csr *a = sp_csr_new(c->rows, c->cols, c->nnz, e);
    if (a == NULL)
        return NULL;
    for (int64_t k = 0; k < c->nnz; k++)
        a->rowptr[c->row[k] + 1]++;
    for (int32_t i = 0; i < c->rows; i++)
        a->rowptr[i + 1] += a->rowptr[i];
    int64_t *next = malloc(((size_t)c->rows + 1) * sizeof *next);
    if (next == NULL) {
        sp_csr_free(a);
        dt_err_set(e, "out of memory converting to CSR");
        return NULL;
    }
    memcpy(next, a->rowptr, ((size_t)c->rows + 1) * sizeof *next);
    for (int64_t k = 0; k < c->nnz; k++) {
        int64_t dst = next[c->row[k]]++;
        a->col[dst] = c->col[k];
        a->val[dst] = c->val[k];
    }
    free(next);
    int64_t out = 0;
    for (int32_t i = 0; i < c->rows; i++) {
        int64_t b = a->rowptr[i], end = a->rowptr[i + 1];
        sort_row(a->col + b, a->val + b, end - b);
        a->rowptr[i] = out;
        for (int64_t k = b; k < end; k++) {
            if (out > a->rowptr[i] && a->col[out - 1] == a->col[k]) {
                a->val[out - 1] += a->val[k]; /* duplicate policy: sum */
            } else {
                a->col[out] = a->col[k];
                a->val[out] = a->val[k];
                out++;
            }
        }
    }
    a->rowptr[c->rows] = out;
    a->nnz = out;
    return a;
}
