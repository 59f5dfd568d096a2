/* layout.c -- device layouts: a CSR matrix converted on the host into the
 * named arrays and variables a kernel's format reads (csr, coo, ell, sell,
 * bsr, bins, csr16, sell16, seg16, dtile, runion). The worker uploads them
 * as they are; export writes them to disk. Needs no device.
 * Over 1,000 lines: one builder per format with the comment that defines its
 * arrays, kept beside the table that names them all. */
#include "sparse/sparse.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Append a copy of bytes bytes at host as array name. */
static int add_arr(sp_fmt *f, const char *name, const void *host, size_t bytes, dt_err *e)
{
    if (f->narr == SP_FMT_MAX_ARRS)
        return dt_err_set(e, "internal: too many arrays in format %s", f->key);
    void *copy = malloc(bytes ? bytes : 1);
    if (copy == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        return dt_err_set(e, "out of host memory keeping %zu bytes of %s", bytes, name);
    }
    memcpy(copy, host, bytes);
    f->name[f->narr] = dt_xstrdup(name);
    f->data[f->narr] = copy;
    f->bytes[f->narr] = bytes;
    f->narr++;
    return 0;
}

/* Append the malloc'd array p (bytes bytes) as array name, taking it; on error it stays the
 * caller's. The large arrays go this way, uncopied, through TAKE, which sets the caller's
 * pointer to NULL once f owns the array (so the builders' cleanup frees it only on error). */
static int take_arr(sp_fmt *f, const char *name, void *p, size_t bytes, dt_err *e)
{
    if (f->narr == SP_FMT_MAX_ARRS)
        return dt_err_set(e, "internal: too many arrays in format %s", f->key);
    f->name[f->narr] = dt_xstrdup(name);
    f->data[f->narr] = p;
    f->bytes[f->narr] = bytes;
    f->narr++;
    return 0;
}
#define TAKE(f, name, ptr, bytes, e)                                                               \
    (take_arr((f), (name), (ptr), (bytes), (e)) == 0 ? ((ptr) = NULL, 0) : -1)

static int add_vals(sp_fmt *f, const char *name, const double *v, size_t n, sp_dtype t, dt_err *e)
{
    size_t bytes = n * (size_t)sp_dtype_size(t);
    void *tmp = malloc(bytes ? bytes : 1);
    if (tmp == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        return dt_err_set(e, "out of host memory converting %zu values", n);
    }
    sp_to_dtype(v, tmp, n, t);
    int rc = TAKE(f, name, tmp, bytes, e);
    free(tmp);
    return rc;
}

/* Set (or replace) variable name, a string that outlives f. */
static void set_var(sp_fmt *f, const char *name, int64_t val)
{
    for (int i = 0; i < f->nvars; i++) {
        if (strcmp(f->var_name[i], name) == 0) {
            f->var_val[i] = val;
            return;
        }
    }
    assert(f->nvars < SP_FMT_MAX_VARS); /* the builders below set at most 17 */
    if (f->nvars == SP_FMT_MAX_VARS)
        return;
    f->var_name[f->nvars] = name;
    f->var_val[f->nvars++] = val;
}

static int32_t *narrow_offsets(const int64_t *p, size_t n, dt_err *e)
{
    int32_t *o = malloc((n ? n : 1) * sizeof *o);
    if (o == NULL) {
        dt_err_set(e, "out of host memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        o[i] = (int32_t)p[i];
    return o;
}

static int64_t fparam(const cJSON *params, const char *key, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
    return dt_json_as_i64(v, dflt);
}

static int build_csr(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    (void)params;
    int32_t *rp = narrow_offsets(a->rowptr, (size_t)a->rows + 1, e);
    if (rp == NULL)
        return -1;
    int rc = add_arr(f, "rowptr", rp, ((size_t)a->rows + 1) * 4, e);
    free(rp);
    if (rc != 0 || add_arr(f, "col", a->col, (size_t)a->nnz * 4, e) != 0 ||
        add_vals(f, "val", a->val, (size_t)a->nnz, t, e) != 0)
        return -1;
    return 0;
}

/* COO beside CSR: CSR's arrays and coo_row, the row of every nonzero in
 * CSR order, so a kernel that takes nonzeros whatever their rows finds a
 * nonzero's row and column in one pair of independent loads. */
static int build_coo(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    if (build_csr(a, params, t, f, e) != 0)
        return -1;
    int32_t *row = malloc((a->nnz ? (size_t)a->nnz : 1) * sizeof *row);
    if (row == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        return dt_err_set(e, "out of host memory for coo (%lld nonzeros)", (long long)a->nnz);
    }
    for (int32_t r = 0; r < a->rows; r++)
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++)
            row[k] = r;
    int rc = TAKE(f, "coo_row", row, (size_t)a->nnz * 4, e);
    free(row);
    return rc;
}

/* ELL: column-major (slot k of row r at k * rows + r) unless the format
 * parameter row_major is 1 (r * width + k). */
static int build_ell(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    int64_t row_major = fparam(params, "row_major", 0);
    if (row_major != 0 && row_major != 1)
        return dt_err_set(e, "ELL: format parameter row_major is %lld; expected 0 or 1",
                          (long long)row_major);
    sp_ell *m = sp_csr_to_ell(a, (int64_t)1 << 31, e);
    if (m == NULL)
        return -1;
    size_t rows = (size_t)m->rows, w = (size_t)m->width, n = rows * w;
    if (row_major && w > 1) {
        int32_t *col = malloc((n ? n : 1) * sizeof *col);
        double *val = malloc((n ? n : 1) * sizeof *val);
        if (col == NULL || val == NULL) {
            free(col);
            free(val);
            sp_ell_free(m);
            if (e)
                e->code = SP_ENOMEM;
            return dt_err_set(e, "ELL: out of host memory for %zu slots", n);
        }
        for (size_t r = 0; r < rows; r++)
            for (size_t k = 0; k < w; k++) {
                col[r * w + k] = m->col[k * rows + r];
                val[r * w + k] = m->val[k * rows + r];
            }
        free(m->col);
        free(m->val);
        m->col = col;
        m->val = val;
    }
    int rc = add_arr(f, "ell_col", m->col, n * 4, e);
    if (rc == 0)
        rc = add_vals(f, "ell_val", m->val, n, t, e);
    set_var(f, "width", m->width);
    set_var(f, "row_major", row_major);
    sp_ell_free(m);
    return rc;
}

static int build_sell(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    int32_t C = (int32_t)fparam(params, "C", 32);
    int32_t sigma = (int32_t)fparam(params, "sigma", C);
    sp_sell *m = sp_csr_to_sell(a, C, sigma, e);
    if (m == NULL)
        return -1;
    int32_t *ptr = narrow_offsets(m->slice_ptr, (size_t)m->nslices + 1, e);
    int rc = ptr ? 0 : -1;
    if (rc == 0)
        rc = add_arr(f, "sell_ptr", ptr, ((size_t)m->nslices + 1) * 4, e);
    free(ptr);
    if (rc == 0)
        rc = add_arr(f, "sell_len", m->slice_len, (size_t)m->nslices * 4, e);
    if (rc == 0)
        rc = add_arr(f, "sell_perm", m->perm, (size_t)m->nslices * (size_t)C * 4, e);
    if (rc == 0)
        rc = add_arr(f, "sell_col", m->col, (size_t)m->stored * 4, e);
    if (rc == 0)
        rc = add_vals(f, "sell_val", m->val, (size_t)m->stored, t, e);
    set_var(f, "nslices", m->nslices);
    set_var(f, "C", C);
    set_var(f, "sigma", sigma);
    sp_sell_free(m);
    return rc;
}

static int build_bsr(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    int32_t b = (int32_t)fparam(params, "b", 4);
    sp_bsr *m = sp_csr_to_bsr(a, b, e);
    if (m == NULL)
        return -1;
    int32_t *ptr = narrow_offsets(m->browptr, (size_t)m->brows + 1, e);
    int rc = ptr ? 0 : -1;
    if (rc == 0)
        rc = add_arr(f, "bsr_ptr", ptr, ((size_t)m->brows + 1) * 4, e);
    free(ptr);
    if (rc == 0)
        rc = add_arr(f, "bsr_col", m->bcol, (size_t)m->nblocks * 4, e);
    if (rc == 0)
        rc = add_vals(f, "bsr_val", m->val, (size_t)m->nblocks * (size_t)b * (size_t)b, t, e);
    set_var(f, "brows", m->brows);
    set_var(f, "bcols", m->bcols);
    set_var(f, "nblocks", m->nblocks);
    set_var(f, "b", b);
    sp_bsr_free(m);
    return rc;
}

/* Rows grouped into bins by length, for kernels that give each bin its own
 * mapping in one launch (csr-adaptive). The CSR arrays as they are, plus:
 * bin_rows, the row ids bin after bin (ascending within a bin, so a bin's
 * outputs stay close together); bin_ptr, BINS_N + 1 offsets into bin_rows;
 * bin_long_ptr, the running nonzero count over the last bin's rows (its
 * length + 1), which lets blocks split those rows by nonzeros.
 *
 * Bin b < BINS_N - 1 holds the rows a sub-warp of 2^b lanes suits: length
 * at most per_lane * 2^b (bin 0 takes the empty rows; the warp bin, 5, also
 * takes everything up to long_row). The last bin holds rows longer than
 * long_row. Variables: nbins, bin0 ... bin6 (rows per bin), long_nnz
 * (nonzeros in the last bin), per_lane, long_row. */
#define BINS_N 7

static int build_bins(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    static const char *count_names[BINS_N] = {"bin0", "bin1", "bin2", "bin3",
                                              "bin4", "bin5", "bin6"};
    int64_t per_lane = fparam(params, "per_lane", 4);
    int64_t long_row = fparam(params, "long_row", 4096);
    if (per_lane < 1 || per_lane > (1 << 20))
        return dt_err_set(e, "bins: per_lane must be 1..%d (got %lld)", 1 << 20,
                          (long long)per_lane);
    if (long_row < 1 || long_row > INT32_MAX)
        return dt_err_set(e, "bins: long_row must be 1..%d (got %lld)", INT32_MAX,
                          (long long)long_row);
    size_t rows = (size_t)a->rows;
    int32_t *bin_rows = malloc((rows ? rows : 1) * sizeof *bin_rows);
    unsigned char *bin_of = malloc(rows ? rows : 1);
    int32_t bin_ptr[BINS_N + 1] = {0};
    int64_t count[BINS_N] = {0};
    int32_t *long_ptr = NULL;
    int rc = -1;
    if (bin_rows == NULL || bin_of == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        dt_err_set(e, "out of host memory binning %d rows", a->rows);
        goto out;
    }
    for (size_t i = 0; i < rows; i++) {
        int64_t len = a->rowptr[i + 1] - a->rowptr[i];
        int b = BINS_N - 1;
        if (len <= long_row) {
            b = 0;
            while (b < BINS_N - 2 && len > per_lane << b)
                b++;
        }
        bin_of[i] = (unsigned char)b;
        count[b]++;
    }
    for (int b = 0; b < BINS_N; b++)
        bin_ptr[b + 1] = bin_ptr[b] + (int32_t)count[b];
    /* A counting sort keeps rows ascending within each bin. */
    int32_t next[BINS_N];
    memcpy(next, bin_ptr, sizeof next);
    for (size_t i = 0; i < rows; i++)
        bin_rows[next[bin_of[i]]++] = (int32_t)i;
    size_t nlong = (size_t)count[BINS_N - 1];
    long_ptr = malloc((nlong + 1) * sizeof *long_ptr);
    if (long_ptr == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        dt_err_set(e, "out of host memory binning %d rows", a->rows);
        goto out;
    }
    long_ptr[0] = 0;
    for (size_t j = 0; j < nlong; j++) {
        int32_t r = bin_rows[bin_ptr[BINS_N - 1] + (int32_t)j];
        long_ptr[j + 1] = long_ptr[j] + (int32_t)(a->rowptr[r + 1] - a->rowptr[r]);
    }
    if (build_csr(a, params, t, f, e) != 0 || add_arr(f, "bin_rows", bin_rows, rows * 4, e) != 0 ||
        add_arr(f, "bin_ptr", bin_ptr, sizeof bin_ptr, e) != 0 ||
        add_arr(f, "bin_long_ptr", long_ptr, (nlong + 1) * 4, e) != 0)
        goto out;
    set_var(f, "nbins", BINS_N);
    for (int b = 0; b < BINS_N; b++)
        set_var(f, count_names[b], count[b]);
    set_var(f, "long_nnz", long_ptr[nlong]);
    set_var(f, "per_lane", per_lane);
    set_var(f, "long_row", long_row);
    rc = 0;
out:
    free(bin_rows);
    free(bin_of);
    free(long_ptr);
    return rc;
}

/* CSR with 16-bit column offsets: col16[k] = col[k] - slice_base[row >>
 * slice_shift], where a slice is `slice` consecutive rows (a power of two,
 * 1 by default: a base per row) and its base is its smallest column. 6
 * bytes per fp32 nonzero instead of 8. slice_span[s] is the number of
 * columns slice s reaches (last - base + 1, 0 for a slice without
 * entries): the window of x a kernel may stage for it. Refused, naming the
 * first offending rows, when a slice's columns span more than 65536: the
 * kernels' 16-bit offsets could not reach them. Variables: slice,
 * slice_shift, slice_span_max. */
/* Rows [r0, r1)'s smallest and largest column (hi -1 when they have no
 * entries); columns are sorted within a row, so its first and last are
 * its span. */
static void csr16_span(const sp_csr *a, int32_t r0, int32_t r1, int32_t *lo, int32_t *hi)
{
    *lo = INT32_MAX;
    *hi = -1;
    for (int32_t r = r0; r < r1; r++) {
        if (a->rowptr[r + 1] == a->rowptr[r])
            continue;
        const int32_t c0 = a->col[a->rowptr[r]], c1 = a->col[a->rowptr[r + 1] - 1];
        *lo = c0 < *lo ? c0 : *lo;
        *hi = c1 > *hi ? c1 : *hi;
    }
}

/* csr16's slices [lo, hi): base, span (-1 when wider than 16-bit offsets
 * reach, its offsets then left unwritten) and every entry's offset. */
typedef struct csr16_job {
    const sp_csr *a;
    int shift;
    int32_t *base, *span;
    uint16_t *col16;
} csr16_job;

static void csr16_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const csr16_job *j = ctx;
    const sp_csr *a = j->a;
    for (int64_t s = lo; s < hi; s++) {
        const int32_t r0 = (int32_t)(s << j->shift);
        const int32_t r1 = r0 + (1 << j->shift) < a->rows ? r0 + (int32_t)(1 << j->shift) : a->rows;
        int32_t clo, chi;
        csr16_span(a, r0, r1, &clo, &chi);
        if (chi >= 0 && (int64_t)chi - clo > 65535) {
            j->span[s] = -1;
            continue;
        }
        j->base[s] = chi >= 0 ? clo : 0;
        j->span[s] = chi >= 0 ? chi - clo + 1 : 0;
        for (int64_t k = a->rowptr[r0]; k < a->rowptr[r1]; k++)
            j->col16[k] = (uint16_t)(a->col[k] - j->base[s]);
    }
}

static int build_csr16(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    int64_t slice = fparam(params, "slice", 1);
    int shift = 0;
    while (shift < 12 && ((int64_t)1 << shift) < slice)
        shift++;
    if (slice < 1 || ((int64_t)1 << shift) != slice)
        return dt_err_set(e, "csr16: slice must be a power of two from 1 to 4096 (got %lld)",
                          (long long)slice);
    size_t nslices = ((size_t)a->rows + (size_t)slice - 1) >> shift;
    int32_t *base = malloc((nslices ? nslices : 1) * sizeof *base);
    int32_t *span = malloc((nslices ? nslices : 1) * sizeof *span);
    uint16_t *col16 = malloc((a->nnz ? (size_t)a->nnz : 1) * sizeof *col16);
    int32_t span_max = 0;
    int rc = -1;
    if (base == NULL || span == NULL || col16 == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        dt_err_set(e, "out of host memory for csr16 (%lld nonzeros)", (long long)a->nnz);
        goto out;
    }
    /* The slices in parallel (each writes its own base, span and offsets);
     * then, in order, the first one too wide, and the widest. */
    csr16_job cj = {a, shift, base, span, col16};
    sp_parallel_for((int64_t)nslices, a->nnz, csr16_range, &cj);
    for (size_t s = 0; s < nslices; s++) {
        if (span[s] < 0) {
            const int32_t r0 = (int32_t)(s << shift);
            const int32_t r1 = r0 + (int32_t)slice < a->rows ? r0 + (int32_t)slice : a->rows;
            int32_t lo, hi;
            csr16_span(a, r0, r1, &lo, &hi);
            if (slice == 1)
                dt_err_set(e,
                           "csr16: row %d spans columns %d..%d, more than the 65536 a 16-bit "
                           "offset reaches",
                           r0, lo, hi);
            else
                dt_err_set(e,
                           "csr16: rows %d..%d span columns %d..%d, more than the 65536 a "
                           "16-bit offset reaches (a smaller slice may fit)",
                           r0, r1 - 1, lo, hi);
            goto out;
        }
        span_max = span[s] > span_max ? span[s] : span_max;
    }
    int32_t *rp = narrow_offsets(a->rowptr, (size_t)a->rows + 1, e);
    if (rp == NULL)
        goto out;
    rc = add_arr(f, "rowptr", rp, ((size_t)a->rows + 1) * 4, e);
    free(rp);
    if (rc != 0 || TAKE(f, "col16", col16, (size_t)a->nnz * 2, e) != 0 ||
        add_arr(f, "slice_base", base, nslices * 4, e) != 0 ||
        add_arr(f, "slice_span", span, nslices * 4, e) != 0 ||
        add_vals(f, "val", a->val, (size_t)a->nnz, t, e) != 0) {
        rc = -1;
        goto out;
    }
    set_var(f, "slice", slice);
    set_var(f, "slice_shift", shift);
    set_var(f, "slice_span_max", span_max);
out:
    free(base);
    free(span);
    free(col16);
    return rc;
}

/* A dictionary of at most 256 values, entry 0 the value 0 (padding and
 * explicit zeros): idx[i] = the entry holding v[i] as the dtype stores it.
 * Values are compared by their bits after rounding to t, so -0.0 and 0.0,
 * or two doubles that round to one float, are told apart only where the
 * device would tell them apart. Returns the number of entries, or -1 (and
 * sets e) past 256. */
static int value_dict_serial(const double *v, size_t n, sp_dtype t, uint8_t *idx, double tab[256],
                             dt_err *e)
{
    enum { SLOTS = 1024 }; /* open addressing, at most 256 used */
    uint64_t key[SLOTS];
    int16_t at[SLOTS];
    memset(at, -1, sizeof at);
    int ntab = 1;
    tab[0] = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = sp_round(v[i], t);
        if (r == 0.0 && !signbit(r)) {
            idx[i] = 0;
            continue;
        }
        uint64_t b;
        memcpy(&b, &r, sizeof b);
        size_t h = (size_t)((b * 0x9e3779b97f4a7c15ULL) >> 54) & (SLOTS - 1);
        while (at[h] >= 0 && key[h] != b)
            h = (h + 1) & (SLOTS - 1);
        if (at[h] < 0) {
            if (ntab == 256)
                return dt_err_set(
                    e,
                    "value dictionary: more than 255 distinct nonzero values (the "
                    "256th at nonzero %zu in CSR order); a one-byte index cannot name them",
                    i);
            key[h] = b;
            at[h] = (int16_t)ntab;
            tab[ntab++] = r;
        }
        idx[i] = (uint8_t)at[h];
    }
    return ntab;
}

/* value_dict on several threads: each part lists its distinct values in
 * order of first appearance (at most 255), the lists are merged in part
 * order (so the table is the serial one's, entry for entry), and the
 * indices are filled in parallel from the merged table. Past 255 values
 * it runs value_dict_serial for the same message. */
#define VD_SLOTS 1024 /* open addressing, at most 256 used */

typedef struct vd_table {
    uint64_t key[VD_SLOTS];
    int16_t at[VD_SLOTS];
} vd_table;

/* Where bits b sits in t, or the empty slot it would take. */
static size_t vd_find(const vd_table *t, uint64_t b)
{
    size_t h = (size_t)((b * 0x9e3779b97f4a7c15ULL) >> 54) & (VD_SLOTS - 1);
    while (t->at[h] >= 0 && t->key[h] != b)
        h = (h + 1) & (VD_SLOTS - 1);
    return h;
}

typedef struct vd_job {
    const double *v;
    sp_dtype t;
    double vals[SP_PAR_MAX][256]; /* each part's distinct values, first seen first */
    int cnt[SP_PAR_MAX];
    int over[SP_PAR_MAX]; /* a part saw more than 255 */
    vd_table global;
    uint8_t *idx;
} vd_job;

static void vd_collect(void *ctx, int64_t lo, int64_t hi, int part)
{
    vd_job *j = ctx;
    vd_table *t = malloc(sizeof *t);
    if (t == NULL) {
        j->over[part] = 1; /* the serial path reports it */
        return;
    }
    memset(t->at, -1, sizeof t->at);
    for (int64_t i = lo; i < hi; i++) {
        const double r = sp_round(j->v[i], j->t);
        if (r == 0.0 && !signbit(r))
            continue;
        uint64_t b;
        memcpy(&b, &r, sizeof b);
        const size_t h = vd_find(t, b);
        if (t->at[h] >= 0)
            continue;
        if (j->cnt[part] == 255) {
            j->over[part] = 1;
            break;
        }
        t->key[h] = b;
        t->at[h] = (int16_t)j->cnt[part];
        j->vals[part][j->cnt[part]++] = r;
    }
    free(t);
}

static void vd_index(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    vd_job *j = ctx;
    for (int64_t i = lo; i < hi; i++) {
        const double r = sp_round(j->v[i], j->t);
        if (r == 0.0 && !signbit(r)) {
            j->idx[i] = 0;
            continue;
        }
        uint64_t b;
        memcpy(&b, &r, sizeof b);
        j->idx[i] = (uint8_t)j->global.at[vd_find(&j->global, b)];
    }
}

static int value_dict(const double *v, size_t n, sp_dtype t, uint8_t *idx, double tab[256],
                      dt_err *e)
{
    vd_job *j = sp_ref_threads((int64_t)n) > 1 ? calloc(1, sizeof *j) : NULL;
    if (j == NULL)
        return value_dict_serial(v, n, t, idx, tab, e);
    j->v = v;
    j->t = t;
    j->idx = idx;
    sp_parallel_for((int64_t)n, (int64_t)n, vd_collect, j);
    memset(j->global.at, -1, sizeof j->global.at);
    int ntab = 1;
    tab[0] = 0.0;
    for (int p = 0; p < SP_PAR_MAX; p++) {
        if (j->over[p])
            goto serial;
        for (int q = 0; q < j->cnt[p]; q++) {
            uint64_t b;
            memcpy(&b, &j->vals[p][q], sizeof b);
            const size_t h = vd_find(&j->global, b);
            if (j->global.at[h] >= 0)
                continue;
            if (ntab == 256)
                goto serial;
            j->global.key[h] = b;
            j->global.at[h] = (int16_t)ntab;
            tab[ntab++] = j->vals[p][q];
        }
    }
    sp_parallel_for((int64_t)n, (int64_t)n, vd_index, j);
    free(j);
    return ntab;
serial:
    free(j);
    return value_dict_serial(v, n, t, idx, tab, e);
}

/* SELL-C-sigma with 16-bit column offsets from a per-slice base: 6 bytes per
 * stored fp32 entry instead of 8, for matrices whose slices each span fewer
 * than 65535 columns. Padding entries carry the offset 0xFFFF (and value 0).
 *
 * The format parameter vec (1, 2, 4 or 8) lets a thread load vec entries of
 * its row at once: each slice's length (sell_len, entries per row, padding
 * included) is rounded up to a multiple of vec, and entry k of the slice's
 * row j sits at sell_ptr[s] + (k / vec) * C * vec + j * vec + k % vec, so
 * a row's vec consecutive entries are adjacent and every slice starts at a
 * multiple of C * vec elements (vector loads stay aligned). vec 1 is the
 * plain column-major slice.
 *
 * With vdict 1 the values are not stored per entry: sell_vidx holds a
 * one-byte index per entry into vtab, 256 values of which entry 0 is 0
 * (padding). Exact, and refused when the matrix has more than 255 distinct
 * nonzero values. An fp32 entry then costs 3 bytes, an fp64 one 3 instead
 * of 10. Variables: nslices, C, sigma, vec, vdict, nvals. */
/* One slice range of build_sell16's arrays: padding first, then every
 * entry of the slice's rows scattered to its place. */
typedef struct sell16_job {
    const sp_csr *a;
    const int32_t *perm, *ptr, *len, *base;
    int32_t C;
    int vec, vshift, esize;
    uint16_t *col16;
    const uint8_t *src_vals; /* the CSR's values in the dtype (esize bytes each), or */
    const uint8_t *src_vidx; /* their dictionary indices (vdict) */
    uint8_t *vals;
    uint8_t *vidx;
} sell16_job;

static void sell16_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const sell16_job *j = ctx;
    const int64_t C = j->C, vec = j->vec;
    for (int64_t s = lo; s < hi; s++) {
        const int64_t to0 = j->ptr[s], n = (int64_t)j->len[s] * C;
        memset(j->col16 + to0, 0xFF, (size_t)n * sizeof *j->col16);
        if (j->vidx)
            memset(j->vidx + to0, 0, (size_t)n);
        else
            memset(j->vals + to0 * j->esize, 0, (size_t)(n * j->esize));
        for (int64_t slot = 0; slot < C; slot++) {
            const int32_t r = j->perm[s * C + slot];
            if (r < 0)
                continue;
            const int64_t rb = j->a->rowptr[r], rl = j->a->rowptr[r + 1] - rb;
            for (int64_t k = 0; k < rl; k++) {
                const int64_t to = to0 + ((k >> j->vshift) * C + slot) * vec + (k & (vec - 1));
                j->col16[to] = (uint16_t)(j->a->col[rb + k] - j->base[s]);
                if (j->vidx) {
                    j->vidx[to] = j->src_vidx[rb + k];
                } else {
                    switch (j->esize) {
                    case 2:
                        ((uint16_t *)j->vals)[to] = ((const uint16_t *)j->src_vals)[rb + k];
                        break;
                    case 4:
                        ((uint32_t *)j->vals)[to] = ((const uint32_t *)j->src_vals)[rb + k];
                        break;
                    default:
                        ((uint64_t *)j->vals)[to] = ((const uint64_t *)j->src_vals)[rb + k];
                    }
                }
            }
        }
    }
}

/* sell16's slices [lo, hi): each one's width rounded up to whole vectors
 * in len (-1 when its columns span more than 16-bit offsets reach) and its
 * base column. */
typedef struct slice_job {
    const sp_csr *a;
    const int32_t *perm;
    int32_t C;
    int64_t vec;
    int32_t *base, *len;
} slice_job;

/* Slice sl's longest row (width, when not NULL) and its smallest and
 * largest column (hi -1 when it has no entries). */
static void slice_span(const slice_job *j, int64_t sl, int64_t *width, int32_t *lo, int32_t *hi)
{
    const sp_csr *a = j->a;
    int64_t w = 0;
    *lo = INT32_MAX;
    *hi = -1;
    for (int64_t q = sl * j->C; q < (sl + 1) * j->C; q++) {
        const int32_t r = j->perm[q];
        if (r < 0)
            continue;
        const int64_t rl = a->rowptr[r + 1] - a->rowptr[r];
        w = rl > w ? rl : w;
        if (rl > 0) {
            *lo = a->col[a->rowptr[r]] < *lo ? a->col[a->rowptr[r]] : *lo;
            *hi = a->col[a->rowptr[r + 1] - 1] > *hi ? a->col[a->rowptr[r + 1] - 1] : *hi;
        }
    }
    if (width)
        *width = w;
}

static void slice_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const slice_job *j = ctx;
    for (int64_t sl = lo; sl < hi; sl++) {
        int64_t width;
        int32_t clo, chi;
        slice_span(j, sl, &width, &clo, &chi);
        j->base[sl] = chi >= 0 ? clo : 0;
        const int64_t l = (width + j->vec - 1) / j->vec * j->vec;
        /* A width past INT32_MAX is caught as too many stored entries. */
        j->len[sl] = chi >= 0 && (int64_t)chi - clo >= 0xFFFF ? -1
                     : l > INT32_MAX                          ? INT32_MAX
                                                              : (int32_t)l;
    }
}

static int build_sell16(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    int32_t C = (int32_t)fparam(params, "C", 32);
    int32_t sigma = (int32_t)fparam(params, "sigma", C);
    int64_t vec = fparam(params, "vec", 1), vdict = fparam(params, "vdict", 0);
    int64_t long_row = fparam(params, "long", 0);
    if (vec != 1 && vec != 2 && vec != 4 && vec != 8)
        return dt_err_set(e, "sell16: format parameter vec is %lld; legal values are 1, 2, 4, 8",
                          (long long)vec);
    if (long_row < 0)
        return dt_err_set(e,
                          "sell16: format parameter long is %lld; it must be 0 (none) or a "
                          "row length",
                          (long long)long_row);
    if (vdict != 0 && vdict != 1)
        return dt_err_set(e, "sell16: format parameter vdict is %lld; legal values are 0, 1",
                          (long long)vdict);
    int64_t order = fparam(params, "order", 0);
    if (order != 0 && order != 1)
        return dt_err_set(e,
                          "sell16: format parameter order is %lld; legal values are 0 (the "
                          "matrix's) and 1 (Cuthill-McKee)",
                          (long long)order);
    /* The row order is SELL's (sp_sell_perm); the arrays are built from the
     * CSR directly, without sp_csr_to_sell's 12 bytes an entry in between
     * (crack x32M, fp32, SIGMA 256, vec 2, on the host: 1.41 s with that
     * converter and qsort, 1.0 s with the counting sort, and this). With
     * order 1 the windows cut a Cuthill-McKee order of the rows instead, so
     * a block's rows share more of their columns of x. */
    int32_t *cm = NULL;
    if (order == 1 && (cm = sp_row_order_cm(a, e)) == NULL)
        return -1;
    int32_t *perm = sp_sell_perm_ordered(a, C, sigma, long_row, cm, e);
    free(cm);
    if (perm == NULL)
        return -1;
    int rc = -1;
    const size_t ns = ((size_t)a->rows + (size_t)C - 1) / (size_t)C;
    int32_t *lrows = NULL, *lptr = NULL, *lcol = NULL;
    uint8_t *lval = NULL;
    const int esize = sp_dtype_size(t);
    int32_t *base = malloc((ns + 1) * sizeof *base);
    int32_t *ptr = malloc((ns + 1) * sizeof *ptr);
    int32_t *len = malloc((ns + 1) * sizeof *len);
    uint16_t *col16 = NULL;
    uint8_t *vals = NULL, *vidx = NULL, *csr_vals = NULL, *csr_vidx = NULL;
    if (base == NULL || ptr == NULL || len == NULL)
        goto nomem;
    /* Per slice: its width rounded up to whole vectors, and its base, the
     * smallest column of its rows (the first of each, columns ascending),
     * in parallel; then the offsets in order. */
    slice_job sj = {a, perm, C, vec, base, len};
    sp_parallel_for((int64_t)ns, a->rows, slice_range, &sj);
    int64_t stored = 0; /* with every slice rounded up to whole vectors */
    ptr[0] = 0;
    for (size_t sl = 0; sl < ns; sl++) {
        if (len[sl] < 0) {
            int32_t lo, hi;
            slice_span(&sj, (int64_t)sl, NULL, &lo, &hi);
            dt_err_set(e,
                       "sell16: slice %zu spans columns %d..%d, more than a 16-bit offset reaches "
                       "(65534)",
                       sl, lo, hi);
            goto out;
        }
        stored += (int64_t)len[sl] * C;
        if (stored > INT32_MAX) {
            dt_err_set(e,
                       "sell16: more than %d stored entries (vec %lld) exceed the 32-bit offsets "
                       "of sell_ptr",
                       INT32_MAX, (long long)vec);
            goto out;
        }
        ptr[sl + 1] = (int32_t)stored;
    }
    double tab[256] = {0};
    int ntab = 0;
    col16 = malloc(((size_t)stored + 1) * sizeof *col16);
    if (col16 == NULL)
        goto nomem;
    if (vdict) {
        csr_vidx = malloc((size_t)a->nnz + 1);
        vidx = malloc((size_t)stored + 1);
        if (csr_vidx == NULL || vidx == NULL)
            goto nomem;
        dt_err de = {0};
        ntab = value_dict(a->val, (size_t)a->nnz, t, csr_vidx, tab, &de);
        if (ntab < 0) {
            dt_err_set(e, "sell16 vdict: %s", de.msg);
            goto out;
        }
    } else {
        vals = malloc(((size_t)stored + 1) * (size_t)esize);
        if (vals == NULL)
            goto nomem;
        if (t != SP_FP64) {
            csr_vals = malloc(((size_t)a->nnz + 1) * (size_t)esize);
            if (csr_vals == NULL)
                goto nomem;
            sp_to_dtype(a->val, csr_vals, (size_t)a->nnz, t);
        }
    }
    sell16_job job = {a,
                      perm,
                      ptr,
                      len,
                      base,
                      C,
                      (int)vec,
                      vec == 1   ? 0
                      : vec == 2 ? 1
                      : vec == 4 ? 2
                                 : 3,
                      esize,
                      col16,
                      t == SP_FP64 ? (const uint8_t *)a->val : csr_vals,
                      csr_vidx,
                      vals,
                      vidx};
    sp_parallel_for((int64_t)ns, stored, sell16_range, &job);
    if (add_arr(f, "sell_ptr", ptr, (ns + 1) * 4, e) != 0 ||
        add_arr(f, "sell_len", len, ns * 4, e) != 0 ||
        add_arr(f, "sell_perm", perm, ns * (size_t)C * 4, e) != 0 ||
        TAKE(f, "col16", col16, (size_t)stored * 2, e) != 0 ||
        add_arr(f, "slice_base", base, ns * 4, e) != 0)
        goto out;
    if (vdict) {
        if (TAKE(f, "sell_vidx", vidx, (size_t)stored, e) != 0 ||
            add_vals(f, "vtab", tab, 256, t, e) != 0)
            goto out;
        set_var(f, "nvals", ntab);
    } else if (TAKE(f, "sell_val", vals, (size_t)stored * (size_t)esize, e) != 0) {
        goto out;
    }
    if (long_row > 0) {
        /* The rows left out of the slices, as CSR: long_rows (their
         * numbers), long_ptr, long_col, long_val. */
        int64_t nl = 0, lnnz = 0;
        for (int32_t r = 0; r < a->rows; r++)
            if (a->rowptr[r + 1] - a->rowptr[r] > long_row) {
                nl++;
                lnnz += a->rowptr[r + 1] - a->rowptr[r];
            }
        lrows = malloc(((size_t)nl + 1) * sizeof *lrows);
        lptr = malloc(((size_t)nl + 1) * sizeof *lptr);
        lcol = malloc(((size_t)lnnz + 1) * sizeof *lcol);
        lval = malloc(((size_t)lnnz + 1) * (size_t)esize);
        if (lrows == NULL || lptr == NULL || lcol == NULL || lval == NULL)
            goto nomem;
        int64_t li = 0, lk = 0;
        lptr[0] = 0;
        for (int32_t r = 0; r < a->rows; r++) {
            const int64_t b = a->rowptr[r], n = a->rowptr[r + 1] - b;
            if (n <= long_row)
                continue;
            lrows[li] = r;
            memcpy(lcol + lk, a->col + b, (size_t)n * sizeof *lcol);
            sp_to_dtype(a->val + b, lval + lk * esize, (size_t)n, t);
            lk += n;
            lptr[++li] = (int32_t)lk;
        }
        if (add_arr(f, "long_rows", lrows, (size_t)nl * 4, e) != 0 ||
            add_arr(f, "long_ptr", lptr, ((size_t)nl + 1) * 4, e) != 0 ||
            add_arr(f, "long_col", lcol, (size_t)lnnz * 4, e) != 0 ||
            add_arr(f, "long_val", lval, (size_t)lnnz * (size_t)esize, e) != 0)
            goto out;
        set_var(f, "nlong", nl);
    }
    set_var(f, "long", long_row);
    set_var(f, "nslices", (int64_t)ns);
    set_var(f, "C", C);
    set_var(f, "sigma", sigma);
    set_var(f, "vec", vec);
    set_var(f, "vdict", vdict);
    set_var(f, "order", order);
    rc = 0;
    goto out;
nomem:
    if (e)
        e->code = SP_ENOMEM;
    dt_err_set(e, "out of host memory for sell16 (%d rows)", a->rows);
out:
    free(lval);
    free(lcol);
    free(lptr);
    free(lrows);
    free(csr_vidx);
    free(csr_vals);
    free(vidx);
    free(vals);
    free(col16);
    free(len);
    free(ptr);
    free(base);
    free(perm);
    return rc;
}

/* seg16: the nonzeros as one flat stream for a segmented-sum SpMV
 * (kernels/spmv_seg16.cu), cut into tiles of whole consecutive rows, each
 * padded to exactly `tile` entries (a multiple of 8; the kernel's BLOCK *
 * U * 8). seg_col[k] is the entry's column offset from tile_base[t] in 15
 * bits, with bit 15 set on the last entry of its row; an empty row holds
 * one entry of value 0 (offset 0, flagged) so that every row ends in its
 * tile; the padding after a tile's last row is offset 0, value 0,
 * unflagged. tile_row[t] is tile t's first row (ntiles + 1 entries, the
 * last being rows). Tiles are filled greedily: a row starts a new tile
 * when it would overflow the current one or widen its columns past 32768.
 * Refused, naming the row, when one row alone does either. Variables:
 * ntiles, tile, seg_entries (stored entries, padding included). */
typedef struct seg16_job {
    const sp_csr *a;
    const int32_t *trow, *tbase;
    int64_t tile;
    uint16_t *col;
    unsigned char *val; /* tile entries of `size` bytes each */
    int size;
    sp_dtype t;
} seg16_job;

static void seg16_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const seg16_job *j = ctx;
    const sp_csr *a = j->a;
    for (int64_t t = lo; t < hi; t++) {
        int64_t k = t * j->tile;
        for (int32_t r = j->trow[t]; r < j->trow[t + 1]; r++) {
            const int64_t p0 = a->rowptr[r], p1 = a->rowptr[r + 1];
            if (p0 == p1) {
                j->col[k++] = 0x8000u; /* the value stays the zero it was set to */
                continue;
            }
            for (int64_t p = p0; p < p1; p++)
                j->col[k + p - p0] =
                    (uint16_t)((a->col[p] - j->tbase[t]) | (p == p1 - 1 ? 0x8000 : 0));
            sp_to_dtype(a->val + p0, j->val + (size_t)k * (size_t)j->size, (size_t)(p1 - p0), j->t);
            k += p1 - p0;
        }
    }
}

static int build_seg16(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    const int64_t tile = fparam(params, "tile", 2048);
    if (tile < 8 || tile > (1 << 20) || tile % 8 != 0)
        return dt_err_set(e, "seg16: tile must be a multiple of 8 from 8 to 1048576 (got %lld)",
                          (long long)tile);
    /* The tiles' first rows and column bases, in order. */
    size_t cap = 1024, nt = 0;
    int32_t *trow = malloc(cap * sizeof *trow), *tbase = malloc(cap * sizeof *tbase);
    uint16_t *col = NULL;
    unsigned char *val = NULL;
    int rc = -1;
    if (trow == NULL || tbase == NULL)
        goto oom;
    for (int32_t r = 0; r < a->rows;) {
        const int32_t r0 = r;
        int64_t k = 0;
        int32_t lo = INT32_MAX, hi = -1;
        for (; r < a->rows; r++) {
            const int64_t len = a->rowptr[r + 1] - a->rowptr[r];
            int32_t nlo = lo, nhi = hi;
            if (len > 0) {
                const int32_t c0 = a->col[a->rowptr[r]], c1 = a->col[a->rowptr[r + 1] - 1];
                nlo = c0 < lo ? c0 : lo;
                nhi = c1 > hi ? c1 : hi;
            }
            if (k + (len > 0 ? len : 1) > tile || (nhi >= 0 && (int64_t)nhi - nlo > 32767))
                break;
            lo = nlo;
            hi = nhi;
            k += len > 0 ? len : 1;
        }
        if (r == r0) {
            const int64_t len = a->rowptr[r + 1] - a->rowptr[r];
            if (len > tile)
                dt_err_set(e,
                           "seg16: row %d has %lld entries, more than a tile of %lld holds "
                           "(a larger BLOCK * U fits it)",
                           r, (long long)len, (long long)tile);
            else
                dt_err_set(e,
                           "seg16: row %d spans columns %d..%d, more than the 32768 a 15-bit "
                           "offset reaches",
                           r, a->col[a->rowptr[r]], a->col[a->rowptr[r + 1] - 1]);
            goto out;
        }
        if (nt + 1 == cap) {
            cap *= 2;
            int32_t *nr = realloc(trow, cap * sizeof *trow);
            if (nr == NULL)
                goto oom;
            trow = nr;
            int32_t *nb = realloc(tbase, cap * sizeof *tbase);
            if (nb == NULL)
                goto oom;
            tbase = nb;
        }
        trow[nt] = r0;
        tbase[nt] = hi >= 0 ? lo : 0;
        nt++;
    }
    trow[nt] = a->rows;
    const size_t entries = nt * (size_t)tile;
    const int size = sp_dtype_size(t);
    col = calloc(entries ? entries : 1, sizeof *col);
    val = calloc(entries ? entries : 1, (size_t)size);
    if (col == NULL || val == NULL)
        goto oom;
    seg16_job j = {a, trow, tbase, tile, col, val, size, t};
    sp_parallel_for((int64_t)nt, a->nnz, seg16_range, &j);
    if (add_arr(f, "tile_row", trow, (nt + 1) * 4, e) != 0 ||
        add_arr(f, "tile_base", tbase, (nt ? nt : 1) * 4, e) != 0 ||
        TAKE(f, "seg_col", col, entries * 2, e) != 0 ||
        TAKE(f, "seg_val", val, entries * (size_t)size, e) != 0)
        goto out;
    set_var(f, "ntiles", (int64_t)nt);
    set_var(f, "tile", tile);
    set_var(f, "seg_entries", (int64_t)entries);
    rc = 0;
    goto out;
oom:
    if (e)
        e->code = SP_ENOMEM;
    dt_err_set(e, "out of host memory for seg16 (%lld nonzeros)", (long long)a->nnz);
out:
    free(trow);
    free(tbase);
    free(col);
    free(val);
    return rc;
}

static int cmp_int32(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* dtile: the TM x TN tiles of S that hold a nonzero, for SDDMM by dense
 * tiles of the product (kernels/sddmm_dense_tile.cu). tile_rc holds each
 * tile's (tile row, tile column), ordered by tile row, then column; for
 * each of a tile's `tm` rows (rows past the matrix's end included, with
 * nothing set) tile_rmask has bit c set when column c of the tile holds a
 * nonzero, and tile_rbase the CSR position of the row's first nonzero in
 * the tile (0 when it has none). A row's nonzeros in a tile are
 * consecutive in CSR, in column order, so a kernel finds any entry's
 * position from the mask alone. Variables: ntiles, tm, tn. */
static int build_dtile(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    (void)t;
    const int64_t tm = fparam(params, "tm", 64), tn = fparam(params, "tn", 64);
    if (tm < 1 || tm > 4096 || tn < 1 || tn > 64)
        return dt_err_set(e,
                          "dtile: tm must be 1..4096 and tn 1..64 (a row's mask is 64 bits); "
                          "got tm %lld, tn %lld",
                          (long long)tm, (long long)tn);
    const int64_t ntr = (a->rows + tm - 1) / tm, ntc = (a->cols + tn - 1) / tn;
    int32_t *stamp = calloc(ntc ? (size_t)ntc : 1, sizeof *stamp);  /* tile row + 1 */
    int32_t *slot = malloc((ntc ? (size_t)ntc : 1) * sizeof *slot); /* tile column -> tile */
    int32_t *rc = NULL, *rbase = NULL;
    uint64_t *rmask = NULL;
    int out = -1;
    if (stamp == NULL || slot == NULL)
        goto oom;
    /* Count the tiles first: the slots' arrays are sized by them. */
    int64_t nt = 0;
    for (int64_t tr = 0; tr < ntr; tr++) {
        const int32_t r1 = (int32_t)((tr + 1) * tm < a->rows ? (tr + 1) * tm : a->rows);
        for (int32_t r = (int32_t)(tr * tm); r < r1; r++)
            for (int64_t p = a->rowptr[r]; p < a->rowptr[r + 1]; p++) {
                const int32_t tc = (int32_t)(a->col[p] / tn);
                if (stamp[tc] != tr + 1) {
                    stamp[tc] = (int32_t)(tr + 1);
                    nt++;
                }
            }
    }
    if (nt * tm > ((int64_t)1 << 28)) {
        dt_err_set(e,
                   "dtile: %lld tiles of %lld x %lld would take %lld MiB of masks for %lld "
                   "nonzeros (the pattern is too sparse for dense tiles)",
                   (long long)nt, (long long)tm, (long long)tn, (long long)(nt * tm * 12 >> 20),
                   (long long)a->nnz);
        goto done;
    }
    rc = malloc((size_t)(nt ? nt : 1) * 2 * sizeof *rc);
    rbase = calloc((size_t)(nt ? nt * tm : 1), sizeof *rbase);
    rmask = calloc((size_t)(nt ? nt * tm : 1), sizeof *rmask);
    if (rc == NULL || rbase == NULL || rmask == NULL)
        goto oom;
    memset(stamp, 0, (size_t)(ntc ? ntc : 1) * sizeof *stamp);
    int64_t next = 0;
    for (int64_t tr = 0; tr < ntr; tr++) {
        const int32_t r0 = (int32_t)(tr * tm);
        const int32_t r1 = (int32_t)((tr + 1) * tm < a->rows ? (tr + 1) * tm : a->rows);
        /* This tile row's tile columns, in order. */
        const int64_t first = next;
        for (int32_t r = r0; r < r1; r++)
            for (int64_t p = a->rowptr[r]; p < a->rowptr[r + 1]; p++) {
                const int32_t tc = (int32_t)(a->col[p] / tn);
                if (stamp[tc] != tr + 1) {
                    stamp[tc] = (int32_t)(tr + 1);
                    rc[2 * next++] = tc; /* sorted on, then moved */
                }
            }
        qsort(rc + 2 * first, (size_t)(next - first), 2 * sizeof *rc, cmp_int32);
        for (int64_t i = first; i < next; i++) {
            rc[2 * i + 1] = rc[2 * i];
            rc[2 * i] = (int32_t)tr;
            slot[rc[2 * i + 1]] = (int32_t)i;
        }
        for (int32_t r = r0; r < r1; r++)
            for (int64_t p = a->rowptr[r]; p < a->rowptr[r + 1]; p++) {
                const int32_t c = a->col[p];
                const size_t s = (size_t)slot[c / tn] * (size_t)tm + (size_t)(r - r0);
                if (rmask[s] == 0)
                    rbase[s] = (int32_t)p;
                rmask[s] |= 1ull << (c % tn);
            }
    }
    if (add_arr(f, "tile_rc", rc, (size_t)(nt ? nt : 1) * 8, e) != 0 ||
        add_arr(f, "tile_rbase", rbase, (size_t)(nt ? nt * tm : 1) * 4, e) != 0 ||
        add_arr(f, "tile_rmask", rmask, (size_t)(nt ? nt * tm : 1) * 8, e) != 0)
        goto done;
    set_var(f, "ntiles", nt);
    set_var(f, "tm", tm);
    set_var(f, "tn", tn);
    out = 0;
    goto done;
oom:
    if (e)
        e->code = SP_ENOMEM;
    dt_err_set(e, "out of host memory for dtile (%lld nonzeros)", (long long)a->nnz);
done:
    free(stamp);
    free(slot);
    free(rc);
    free(rbase);
    free(rmask);
    return out;
}

/* runion: SDDMM over the union of the columns of each group of `r` rows
 * (kernels/sddmm_union.cu), so that a row of Bt several of the group's
 * rows use is loaded once. With `sim` 0 the groups are r consecutive rows;
 * with `sim` 1 they are rows that share columns (sp_row_groups_similar),
 * or consecutive rows again where those give fewer entries. un_ent holds
 * one entry per distinct (group, column), in group then column order, `ues`
 * int32 each (whole 16-byte loads): the column, the group, then for each
 * of the group's r slots the CSR position of its row's nonzero in that
 * column, or -1 when it has none (or the slot has no row); with sim 1 the
 * slots' rows follow (-1 for none); the rest is -1. r is 2, 4 or 8.
 * Variables: nent, ur, ues, usim. */
/* A group of runion's merge: the next column any of its r rows holds past
 * cur, each row's position there (or -1) in pos, and cur moved past it;
 * INT32_MAX when the group is done. */
static int32_t runion_next(const sp_csr *a, int64_t r, int64_t *cur, const int64_t *end,
                           int32_t *pos)
{
    int32_t c = INT32_MAX;
    for (int64_t i = 0; i < r; i++)
        if (cur[i] < end[i] && a->col[cur[i]] < c)
            c = a->col[cur[i]];
    for (int64_t i = 0; i < r; i++) {
        pos[i] = -1;
        if (c != INT32_MAX && cur[i] < end[i] && a->col[cur[i]] == c)
            pos[i] = (int32_t)cur[i]++;
    }
    return c;
}

/* Start a group's merge over its r rows (-1: no row). */
static void runion_group(const sp_csr *a, const int32_t *rows, int64_t r, int64_t *cur,
                         int64_t *end)
{
    for (int64_t i = 0; i < r; i++) {
        cur[i] = rows[i] >= 0 ? a->rowptr[rows[i]] : 0;
        end[i] = rows[i] >= 0 ? a->rowptr[rows[i] + 1] : 0;
    }
}

/* The entries of ng groups of r rows each (grows[g * r + i]). */
static int64_t runion_count(const sp_csr *a, const int32_t *grows, int64_t ng, int64_t r)
{
    int64_t cur[8], end[8], nent = 0;
    int32_t pos[8];
    for (int64_t g = 0; g < ng; g++)
        for (runion_group(a, grows + g * r, r, cur, end);
             runion_next(a, r, cur, end, pos) != INT32_MAX;)
            nent++;
    return nent;
}

static int build_runion(const sp_csr *a, const cJSON *params, sp_dtype t, sp_fmt *f, dt_err *e)
{
    (void)t;
    const int64_t r = fparam(params, "r", 2), sim = fparam(params, "sim", 0);
    if (r != 2 && r != 4 && r != 8)
        return dt_err_set(e, "runion: r (rows a group) must be 2, 4 or 8; got %lld", (long long)r);
    if (sim != 0 && sim != 1)
        return dt_err_set(e,
                          "runion: sim must be 0 (consecutive rows) or 1 (similar rows); got %lld",
                          (long long)sim);
    const int64_t es = (2 + r * (1 + sim) + 3) / 4 * 4;
    /* Consecutive groups, and with sim the similar ones where they give
     * fewer entries. */
    int64_t ng = (a->rows + r - 1) / r;
    int32_t *grows = malloc((size_t)(ng ? ng * r : 1) * sizeof *grows);
    if (grows == NULL) {
        if (e)
            e->code = SP_ENOMEM;
        return dt_err_set(e, "out of host memory for runion (%lld groups)", (long long)ng);
    }
    for (int64_t k = 0; k < ng * r; k++)
        grows[k] = k < a->rows ? (int32_t)k : -1;
    int64_t nent = runion_count(a, grows, ng, r);
    if (sim) {
        int64_t sng = 0;
        int32_t *sg = sp_row_groups_similar(a, (int32_t)r, &sng, e);
        if (sg == NULL) {
            free(grows);
            if (e)
                e->code = SP_ENOMEM;
            return -1;
        }
        const int64_t snent = runion_count(a, sg, sng, r);
        if (snent < nent) {
            free(grows);
            grows = sg;
            ng = sng;
            nent = snent;
        } else {
            free(sg);
        }
    }
    if (nent * es > ((int64_t)1 << 28)) {
        free(grows);
        return dt_err_set(e, "runion: %lld entries of %lld bytes exceed 1 GiB", (long long)nent,
                          (long long)(es * 4));
    }
    int32_t *ent = malloc((size_t)(nent ? nent * es : es) * sizeof *ent);
    if (ent == NULL) {
        free(grows);
        if (e)
            e->code = SP_ENOMEM;
        return dt_err_set(e, "out of host memory for runion (%lld entries)", (long long)nent);
    }
    int64_t cur[8], end[8];
    int32_t pos[8];
    int32_t *en = ent;
    for (int64_t g = 0; g < ng; g++) {
        const int32_t *gr = grows + g * r;
        runion_group(a, gr, r, cur, end);
        for (int32_t c; (c = runion_next(a, r, cur, end, pos)) != INT32_MAX; en += es) {
            en[0] = c;
            en[1] = (int32_t)g;
            for (int64_t j = 2; j < es; j++)
                en[j] = j - 2 < r ? pos[j - 2] : sim && j - 2 < 2 * r ? gr[j - 2 - r] : -1;
        }
    }
    free(grows);
    int rc = TAKE(f, "un_ent", ent, (size_t)(nent ? nent * es : es) * 4, e);
    free(ent);
    if (rc != 0)
        return -1;
    set_var(f, "nent", nent);
    set_var(f, "ur", r);
    set_var(f, "ues", es);
    set_var(f, "usim", sim);
    return 0;
}

typedef int (*fmt_builder)(const sp_csr *, const cJSON *, sp_dtype, sp_fmt *, dt_err *);

static const struct {
    const char *name;
    fmt_builder build;
} formats[] = {
    {"csr", build_csr},     {"coo", build_coo},       {"ell", build_ell},
    {"sell", build_sell},   {"bsr", build_bsr},       {"bins", build_bins},
    {"csr16", build_csr16}, {"sell16", build_sell16}, {"seg16", build_seg16},
    {"dtile", build_dtile}, {"runion", build_runion},
};

int sp_fmt_build(const sp_csr *a, const char *format, const cJSON *params, sp_dtype t, sp_fmt *f,
                 dt_err *e)
{
    memset(f, 0, sizeof *f);
    if (a->nnz >= INT32_MAX)
        return dt_err_set(e, "%lld nonzeros exceed the 32-bit offsets device formats use",
                          (long long)a->nnz);
    char *ps = params ? dt_json_print(params, 0) : dt_xstrdup("{}");
    snprintf(f->key, sizeof f->key, "%s%s/%s", format, ps, sp_dtype_name(t));
    free(ps);
    int32_t max_row = 0;
    for (int32_t i = 0; i < a->rows; i++)
        if (a->rowptr[i + 1] - a->rowptr[i] > max_row)
            max_row = (int32_t)(a->rowptr[i + 1] - a->rowptr[i]);
    set_var(f, "rows", a->rows);
    set_var(f, "cols", a->cols);
    set_var(f, "nnz", a->nnz);
    set_var(f, "max_row", max_row);
    set_var(f, "value_bytes", sp_dtype_size(t));
    for (size_t i = 0; i < DT_ARRAY_LEN(formats); i++) {
        if (strcmp(formats[i].name, format) != 0)
            continue;
        double t0 = dt_now();
        if (formats[i].build(a, params, t, f, e) != 0) {
            sp_fmt_free(f);
            return -1;
        }
        f->prep_us = (dt_now() - t0) * 1e6;
        return 0;
    }
    return dt_err_set(e,
                      "unknown format '%s' (formats: csr, coo, ell, sell, sell16, bsr, bins, "
                      "csr16, seg16, dtile, runion)",
                      format);
}

void sp_fmt_free(sp_fmt *f)
{
    if (f == NULL)
        return;
    for (int i = 0; i < f->narr; i++) {
        free(f->name[i]);
        free(f->data[i]);
        f->name[i] = NULL;
        f->data[i] = NULL;
    }
    f->narr = 0;
    f->nvars = 0;
}

const void *sp_fmt_get(const sp_fmt *f, const char *name, size_t *bytes)
{
    for (int i = 0; i < f->narr; i++) {
        if (strcmp(f->name[i], name) == 0) {
            if (bytes)
                *bytes = f->bytes[i];
            return f->data[i];
        }
    }
    return NULL;
}

int sp_fmt_var(const sp_fmt *f, const char *name, int64_t *out)
{
    for (int i = 0; i < f->nvars; i++) {
        if (strcmp(f->var_name[i], name) == 0) {
            *out = f->var_val[i];
            return 0;
        }
    }
    return -1;
}
