/* pattern.c -- pattern features of a CSR matrix: the PatternReport.
 *
 * One pass over the rows gathers every structural feature; extra memory is
 * O(rows + cols) (a histogram of row lengths, a bitmap of diagonals and one
 * marker array per block size), never O(nnz), so a 32M-nonzero matrix is
 * profiled within its own footprint. */
#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const int block_sizes[SP_NBLOCK] = {2, 4, 8, 16};

static const char *class_names[] = {"diagonal",   "banded",       "block-structured",
                                    "power-law",  "skewed",       "uniform-long",
                                    "uniform-short"};

const char *sp_class_name(sp_class c)
{
    return (unsigned)c < DT_ARRAY_LEN(class_names) ? class_names[c] : "?";
}

/* Thresholds of the classifier, in one place so the reasons quote them. */
#define BLOCK_FILL_MIN 0.6   /* block-structured: fill at some b >= 2 */
#define BANDED_DIAGS_MAX 64  /* banded: at most this many distinct diagonals */
#define BANDED_BW_FRAC 0.05  /* ... and bandwidth at most this fraction of rows */
#define POWER_GINI_MIN 0.5   /* power-law: Gini of row lengths at least this */
#define POWER_MAXMEAN_MIN 8  /* ... and max row at least this many times the mean */
#define SKEW_CV_MIN 0.5      /* skewed: cv above this, or ... */
#define SKEW_MAXMEAN_MIN 4   /* ... max row above this many times the mean */
#define LONG_ROW_MEAN 32     /* uniform-long: mean row length at least a warp */

/* "NAME VALUE OP THRESHOLD" appended to b, with VALUE printed to as many
 * decimals (from digits up to 6) as it takes for the printed number to
 * satisfy the comparison the unrounded one does: cv 0.4996 is not printed
 * as "0.50 > 0.5". The caller only states comparisons that hold. */
static void rel(dt_buf *b, const char *name, double v, const char *op, double thr, int digits)
{
    char num[64];
    for (int d = digits; d <= 6; d++) {
        snprintf(num, sizeof num, "%.*f", d, v);
        double pv = strtod(num, NULL);
        int ok = op[0] == '>' ? (op[1] == '=' ? pv >= thr : pv > thr)
                              : (op[1] == '=' ? pv <= thr : pv < thr);
        if (ok)
            break;
    }
    dt_buf_printf(b, "%s%s %s %s %g", b->len ? ", " : "", name, num, op, thr);
}

static void set_reason(sp_report *r, dt_buf *b)
{
    snprintf(r->cls_reason, sizeof r->cls_reason, "%s", dt_buf_str(b));
    dt_buf_free(b);
}

static void classify(sp_report *r)
{
    dt_buf b = DT_BUF_INIT;
    double maxmean = r->row_mean > 0 ? r->row_max / r->row_mean : 0;
    if (r->nnz > 0 && r->diag_fraction == 1.0) {
        r->cls = SP_CLASS_DIAGONAL;
        dt_buf_printf(&b, "all %lld nonzeros on the main diagonal", (long long)r->nnz);
        set_reason(r, &b);
        return;
    }
    int best_b = -1;
    for (int i = SP_NBLOCK - 1; i >= 0; i--) {
        if (r->block_fill[i] >= BLOCK_FILL_MIN) {
            best_b = i;
            break;
        }
    }
    if (best_b >= 0) {
        r->cls = SP_CLASS_BLOCK;
        char name[48];
        snprintf(name, sizeof name, "block fill at %dx%d blocks", block_sizes[best_b],
                 block_sizes[best_b]);
        rel(&b, name, r->block_fill[best_b], ">=", BLOCK_FILL_MIN, 2);
        set_reason(r, &b);
        return;
    }
    const double bw_max = BANDED_BW_FRAC * r->rows + 1;
    if (r->diagonals <= BANDED_DIAGS_MAX && r->rows > 0 && r->bandwidth <= bw_max) {
        r->cls = SP_CLASS_BANDED;
        rel(&b, "diagonals", (double)r->diagonals, "<=", BANDED_DIAGS_MAX, 0);
        rel(&b, "bandwidth", r->bandwidth, "<=", bw_max, 0);
        dt_buf_printf(&b, " (%.0f%% of %d rows, plus 1)", BANDED_BW_FRAC * 100, r->rows);
        set_reason(r, &b);
        return;
    }
    if (r->row_gini >= POWER_GINI_MIN && maxmean >= POWER_MAXMEAN_MIN) {
        r->cls = SP_CLASS_POWER_LAW;
        rel(&b, "gini", r->row_gini, ">=", POWER_GINI_MIN, 2);
        rel(&b, "max/mean row", maxmean, ">=", POWER_MAXMEAN_MIN, 1);
        dt_buf_printf(&b, " (max row %d, mean %.1f)", r->row_max, r->row_mean);
        set_reason(r, &b);
        return;
    }
    if (r->row_cv > SKEW_CV_MIN || maxmean > SKEW_MAXMEAN_MIN) {
        r->cls = SP_CLASS_SKEWED;
        /* Either condition makes it skewed: state the ones that hold. */
        if (r->row_cv > SKEW_CV_MIN)
            rel(&b, "cv", r->row_cv, ">", SKEW_CV_MIN, 2);
        if (maxmean > SKEW_MAXMEAN_MIN)
            rel(&b, "max/mean row", maxmean, ">", SKEW_MAXMEAN_MIN, 1);
        dt_buf_printf(&b, " (max row %d, mean %.1f, gini %.2f)", r->row_max, r->row_mean,
                      r->row_gini);
        set_reason(r, &b);
        return;
    }
    /* Not skewed: cv and max/mean are at most the skew thresholds. */
    rel(&b, "cv", r->row_cv, "<=", SKEW_CV_MIN, 2);
    rel(&b, "max/mean row", maxmean, "<=", SKEW_MAXMEAN_MIN, 1);
    if (r->row_mean >= LONG_ROW_MEAN) {
        r->cls = SP_CLASS_UNIFORM_LONG;
        rel(&b, "mean row", r->row_mean, ">=", LONG_ROW_MEAN, 1);
    } else {
        r->cls = SP_CLASS_UNIFORM_SHORT;
        rel(&b, "mean row", r->row_mean, "<", LONG_ROW_MEAN, 1);
    }
    set_reason(r, &b);
}

void sp_cost(int32_t rows, int32_t cols, int64_t nnz, sp_op op, sp_dtype t, int32_t n,
             double *flops, double *bytes)
{
    double off = (nnz >= INT32_MAX ? 8.0 : 4.0) * ((double)rows + 1);
    double z = (double)nnz, s = sp_dtype_size(t), dn = n > 0 ? n : 1;
    switch (op) {
    case SP_SPMV:
        *flops = 2.0 * z;
        *bytes = off + z * (4.0 + s) + s * ((double)cols + (double)rows);
        break;
    case SP_SPMM:
        *flops = 2.0 * z * dn;
        *bytes = off + z * (4.0 + s) + s * dn * ((double)cols + (double)rows);
        break;
    case SP_SDDMM:
        /* The pattern (no values with beta = 0), A (rows x K), B (cols x K),
         * one output value per nonzero. */
        *flops = 2.0 * z * dn;
        *bytes = off + z * 4.0 + s * dn * ((double)rows + (double)cols) + z * s;
        break;
    }
}

static void cost_model(sp_report *r)
{
    for (int t = 0; t < 4; t++) {
        sp_cost(r->rows, r->cols, r->nnz, SP_SPMV, (sp_dtype)t, 1, &r->spmv_flops,
                &r->spmv_bytes[t]);
        sp_cost(r->rows, r->cols, r->nnz, SP_SPMM, (sp_dtype)t, r->n_spmm, &r->spmm_flops,
                &r->spmm_bytes[t]);
        sp_cost(r->rows, r->cols, r->nnz, SP_SDDMM, (sp_dtype)t, r->k_sddmm, &r->sddmm_flops,
                &r->sddmm_bytes[t]);
        r->spmv_ai[t] = r->spmv_bytes[t] > 0 ? r->spmv_flops / r->spmv_bytes[t] : 0;
        r->spmm_ai[t] = r->spmm_bytes[t] > 0 ? r->spmm_flops / r->spmm_bytes[t] : 0;
        r->sddmm_ai[t] = r->sddmm_bytes[t] > 0 ? r->sddmm_flops / r->sddmm_bytes[t] : 0;
    }
}

int sp_report_compute(const sp_csr *a, int32_t n, int32_t k, sp_report *r, dt_err *e)
{
    return sp_report_compute_progress(a, n, k, r, e, NULL, NULL);
}

int sp_report_compute_progress(const sp_csr *a, int32_t n, int32_t k, sp_report *r, dt_err *e,
                               void (*progress)(void *ud, int64_t done, int64_t total), void *ud)
{
    double t0 = dt_now();
    memset(r, 0, sizeof *r);
    r->rows = a->rows;
    r->cols = a->cols;
    r->nnz = a->nnz;
    r->n_spmm = n > 0 ? n : 32;
    r->k_sddmm = k > 0 ? k : 32;
    r->density = (a->rows > 0 && a->cols > 0)
                     ? (double)a->nnz / ((double)a->rows * (double)a->cols)
                     : 0.0;

    /* Row-length histogram by exact length (for the Gini coefficient) needs
     * max row + 1 counters; the longest row is found first. */
    int32_t maxlen = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t len = a->rowptr[i + 1] - a->rowptr[i];
        if (len > maxlen)
            maxlen = (int32_t)len;
    }
    int64_t *lencount = calloc((size_t)maxlen + 1, sizeof *lencount);
    int64_t ndiag_bits = (int64_t)a->rows + a->cols; /* offsets j - i + rows - 1 */
    uint64_t *diag = calloc((size_t)(ndiag_bits / 64 + 1), sizeof *diag);
    int32_t *marker[SP_NBLOCK] = {0};
    int ok = lencount != NULL && diag != NULL;
    for (int b = 0; b < SP_NBLOCK && ok; b++) {
        size_t nb = (size_t)a->cols / (size_t)block_sizes[b] + 1;
        marker[b] = malloc(nb * sizeof *marker[b]);
        if (marker[b] == NULL)
            ok = 0;
        else
            memset(marker[b], 0xff, nb * sizeof *marker[b]); /* -1: no block row yet */
    }
    if (!ok) {
        free(lencount);
        free(diag);
        for (int b = 0; b < SP_NBLOCK; b++)
            free(marker[b]);
        return dt_err_set(e, "out of memory profiling a %d x %d matrix", a->rows, a->cols);
    }

    int64_t on_diag = 0, lines = 0, nonempty = 0;
    int32_t bandwidth = 0;
    int32_t minlen = a->rows > 0 ? INT32_MAX : 0;
    for (int32_t i = 0; i < a->rows; i++) {
        if (progress && (i & 0xFFFF) == 0 && i > 0)
            progress(ud, i, a->rows);
        int64_t beg = a->rowptr[i], end = a->rowptr[i + 1];
        int32_t len = (int32_t)(end - beg);
        lencount[len]++;
        if (len < minlen)
            minlen = len;
        int bucket = 0;
        while (bucket < SP_HIST_BUCKETS - 1 && (int64_t)len >= ((int64_t)1 << bucket))
            bucket++;
        r->row_hist[bucket]++;
        if (len == 0) {
            r->empty_rows++;
            continue;
        }
        nonempty++;
        int32_t span = a->col[end - 1] - a->col[beg];
        if (span > r->col_span_max)
            r->col_span_max = span;
        int32_t prev_line = -1;
        for (int64_t p = beg; p < end; p++) {
            int32_t j = a->col[p];
            int64_t d = (int64_t)j - i;
            int32_t ad = (int32_t)(d < 0 ? -d : d);
            if (ad > bandwidth)
                bandwidth = ad;
            if (d == 0)
                on_diag++;
            int64_t bit = d + a->rows - 1;
            diag[bit >> 6] |= 1ULL << (bit & 63);
            /* Columns are sorted, so distinct 128-byte lines of an fp32 x
             * are the changes of j / 32 along the row. */
            if ((j >> 5) != prev_line) {
                lines++;
                prev_line = j >> 5;
            }
            for (int b = 0; b < SP_NBLOCK; b++) {
                int32_t bi = i / block_sizes[b], bj = j / block_sizes[b];
                if (marker[b][bj] != bi) {
                    marker[b][bj] = bi;
                    r->blocks[b]++;
                }
            }
        }
    }
    r->row_min = minlen;
    r->row_max = maxlen;
    r->bandwidth = bandwidth;
    r->diag_fraction = a->nnz > 0 ? (double)on_diag / (double)a->nnz : 0.0;
    for (int64_t w = 0; w < ndiag_bits / 64 + 1; w++)
        r->diagonals += __builtin_popcountll(diag[w]);
    for (int b = 0; b < SP_NBLOCK; b++) {
        double bb = (double)block_sizes[b] * block_sizes[b];
        r->block_fill[b] = r->blocks[b] > 0 ? (double)a->nnz / ((double)r->blocks[b] * bb) : 0.0;
    }
    r->x_lines_per_row = nonempty > 0 ? (double)lines / (double)nonempty : 0.0;
    r->x_lines_per_nnz = a->nnz > 0 ? (double)lines / (double)a->nnz : 0.0;

    /* Moments and Gini from the exact length histogram, ascending. */
    double rows = a->rows > 0 ? (double)a->rows : 1.0;
    r->row_mean = (double)a->nnz / rows;
    double var = 0.0, weighted = 0.0, seen = 0.0;
    for (int32_t len = 0; len <= maxlen; len++) {
        double c = (double)lencount[len];
        if (c == 0)
            continue;
        double dlen = len - r->row_mean;
        var += c * dlen * dlen;
        /* Sorted ranks seen+1 .. seen+c each contribute (2 rank - n - 1) len. */
        double ranks = c * (2.0 * seen + c + 1.0);
        weighted += (ranks - c * (rows + 1.0)) * len;
        seen += c;
    }
    r->row_std = sqrt(var / rows);
    r->row_cv = r->row_mean > 0 ? r->row_std / r->row_mean : 0.0;
    r->row_gini = a->nnz > 0 ? weighted / (rows * (double)a->nnz) : 0.0;
    /* A pattern-only file has no values to compress: the worker gives it
     * random ones (so that a kernel ignoring values fails), so it counts as
     * many. */
    r->pattern = a->pattern;
    r->distinct_values =
        a->pattern ? SP_DISTINCT_CAP + 1 : sp_csr_distinct_values(a, SP_DISTINCT_CAP);

    free(lencount);
    free(diag);
    for (int b = 0; b < SP_NBLOCK; b++)
        free(marker[b]);

    cost_model(r);
    classify(r);
    r->seconds = dt_now() - t0;
    return 0;
}

static cJSON *per_dtype(const double v[4])
{
    cJSON *o = dt_json_obj();
    for (int t = 0; t < 4; t++)
        dt_json_set_num(o, sp_dtype_name((sp_dtype)t), v[t]);
    return o;
}

static cJSON *op_cost(double flops, const double bytes[4], const double ai[4], const char *dim,
                      int32_t dimval)
{
    cJSON *o = dt_json_obj();
    if (dim != NULL)
        dt_json_set_int(o, dim, dimval);
    dt_json_set_num(o, "flops", flops);
    dt_json_set_take(o, "min_bytes", per_dtype(bytes));
    dt_json_set_take(o, "intensity", per_dtype(ai));
    return o;
}

cJSON *sp_report_json(const sp_report *r)
{
    cJSON *o = dt_json_obj();
    dt_json_set_int(o, "rows", r->rows);
    dt_json_set_int(o, "cols", r->cols);
    dt_json_set_int(o, "nnz", r->nnz);
    dt_json_set_num(o, "density", r->density);
    dt_json_set_int(o, "empty_rows", r->empty_rows);

    cJSON *rl = dt_json_obj();
    dt_json_set_num(rl, "mean", r->row_mean);
    dt_json_set_num(rl, "std", r->row_std);
    dt_json_set_num(rl, "cv", r->row_cv);
    dt_json_set_int(rl, "min", r->row_min);
    dt_json_set_int(rl, "max", r->row_max);
    dt_json_set_num(rl, "gini", r->row_gini);
    cJSON *hist = dt_json_arr();
    for (int b = 0; b < SP_HIST_BUCKETS; b++) {
        if (r->row_hist[b] == 0)
            continue;
        cJSON *h = dt_json_obj();
        int64_t lo = b == 0 ? 0 : (int64_t)1 << (b - 1);
        int64_t hi = b == 0 ? 0 : ((int64_t)1 << b) - 1;
        dt_json_set_int(h, "min", lo);
        dt_json_set_int(h, "max", hi);
        dt_json_set_int(h, "rows", r->row_hist[b]);
        cJSON_AddItemToArray(hist, h);
    }
    dt_json_set_take(rl, "histogram", hist);
    dt_json_set_take(o, "row_length", rl);

    dt_json_set_int(o, "bandwidth", r->bandwidth);
    dt_json_set_int(o, "col_span_max", r->col_span_max);
    dt_json_set_int(o, "diagonals", r->diagonals);
    dt_json_set_num(o, "diag_fraction", r->diag_fraction);

    cJSON *blocks = dt_json_arr();
    for (int b = 0; b < SP_NBLOCK; b++) {
        cJSON *bo = dt_json_obj();
        dt_json_set_int(bo, "b", block_sizes[b]);
        dt_json_set_int(bo, "blocks", r->blocks[b]);
        dt_json_set_num(bo, "fill", r->block_fill[b]);
        cJSON_AddItemToArray(blocks, bo);
    }
    dt_json_set_take(o, "block_fill", blocks);

    cJSON *loc = dt_json_obj();
    dt_json_set_num(loc, "x_lines_per_row", r->x_lines_per_row);
    dt_json_set_num(loc, "x_lines_per_nnz", r->x_lines_per_nnz);
    dt_json_set_take(o, "locality", loc);
    /* values: what a value dictionary would need (SP_DISTINCT_CAP + 1: more) */
    dt_json_set_int(o, "distinct_values", r->distinct_values);

    cJSON *cost = dt_json_obj();
    dt_json_set_take(cost, "spmv", op_cost(r->spmv_flops, r->spmv_bytes, r->spmv_ai, NULL, 0));
    dt_json_set_take(cost, "spmm",
                     op_cost(r->spmm_flops, r->spmm_bytes, r->spmm_ai, "n", r->n_spmm));
    dt_json_set_take(cost, "sddmm",
                     op_cost(r->sddmm_flops, r->sddmm_bytes, r->sddmm_ai, "k", r->k_sddmm));
    dt_json_set_take(o, "cost", cost);

    dt_json_set_str(o, "class", sp_class_name(r->cls));
    dt_json_set_str(o, "class_reason", r->cls_reason);
    dt_json_set_num(o, "seconds", r->seconds);
    return o;
}

void sp_report_text(const sp_report *r, dt_buf *out)
{
    char b1[32], b2[32];
    dt_buf_printf(out, "size        %d x %d, %lld nonzeros, density %.3g\n", r->rows, r->cols,
                  (long long)r->nnz, r->density);
    dt_buf_printf(out, "class       %s: %s\n", sp_class_name(r->cls), r->cls_reason);
    dt_buf_printf(out,
                  "row length  mean %.2f, std %.2f, cv %.2f, min %d, max %d, gini %.2f, "
                  "%d empty rows\n",
                  r->row_mean, r->row_std, r->row_cv, r->row_min, r->row_max, r->row_gini,
                  r->empty_rows);
    dt_buf_puts(out, "rows by length\n");
    int64_t most = 1;
    for (int b = 0; b < SP_HIST_BUCKETS; b++)
        if (r->row_hist[b] > most)
            most = r->row_hist[b];
    for (int b = 0; b < SP_HIST_BUCKETS; b++) {
        if (r->row_hist[b] == 0)
            continue;
        char range[48];
        if (b == 0)
            snprintf(range, sizeof range, "0");
        else if (b == 1)
            snprintf(range, sizeof range, "1");
        else
            snprintf(range, sizeof range, "%lld-%lld", (long long)1 << (b - 1),
                     ((long long)1 << b) - 1);
        int bar = (int)(40.0 * (double)r->row_hist[b] / (double)most + 0.5);
        dt_buf_printf(out, "  %13s %10lld  ", range, (long long)r->row_hist[b]);
        for (int i = 0; i < bar; i++)
            dt_buf_putc(out, '#');
        dt_buf_putc(out, '\n');
    }
    dt_buf_printf(out,
                  "shape       bandwidth %d, %lld diagonals, %.1f%% on the main diagonal, widest "
                  "row spans %d columns\n",
                  r->bandwidth, (long long)r->diagonals, 100.0 * r->diag_fraction,
                  r->col_span_max);
    dt_buf_puts(out, "block fill ");
    for (int b = 0; b < SP_NBLOCK; b++)
        dt_buf_printf(out, " %dx%d %.2f (%lld blocks)%s", block_sizes[b], block_sizes[b],
                      r->block_fill[b], (long long)r->blocks[b], b + 1 < SP_NBLOCK ? "," : "");
    dt_buf_putc(out, '\n');
    dt_buf_printf(out,
                  "x locality  %.2f distinct 128-byte lines of x per row, %.3f per nonzero "
                  "(1/32 = 0.031 is ideal)\n",
                  r->x_lines_per_row, r->x_lines_per_nnz);
    if (r->pattern)
        dt_buf_puts(out, "values      none stored (a pattern; the GPU worker gives it random "
                         "values, so it counts as many)\n");
    else if (r->distinct_values > SP_DISTINCT_CAP)
        dt_buf_printf(out, "values      more than %d distinct nonzero values\n", SP_DISTINCT_CAP);
    else
        dt_buf_printf(out, "values      %d distinct nonzero value%s\n", r->distinct_values,
                      r->distinct_values == 1 ? "" : "s");
    dt_buf_puts(out, "cost (minimum bytes, each input read once, beta = 0)\n");
    dt_buf_printf(out, "  spmv        %.3g flop  fp32 %s  fp64 %s  AI %.3f / %.3f flop/B\n",
                  r->spmv_flops, dt_fmt_bytes(r->spmv_bytes[SP_FP32], b1, sizeof b1),
                  dt_fmt_bytes(r->spmv_bytes[SP_FP64], b2, sizeof b2), r->spmv_ai[SP_FP32],
                  r->spmv_ai[SP_FP64]);
    dt_buf_printf(out, "  spmm n=%-4d %.3g flop  fp32 %s  fp64 %s  AI %.3f / %.3f flop/B\n",
                  r->n_spmm, r->spmm_flops, dt_fmt_bytes(r->spmm_bytes[SP_FP32], b1, sizeof b1),
                  dt_fmt_bytes(r->spmm_bytes[SP_FP64], b2, sizeof b2), r->spmm_ai[SP_FP32],
                  r->spmm_ai[SP_FP64]);
    dt_buf_printf(out, "  sddmm k=%-3d %.3g flop  fp32 %s  fp64 %s  AI %.3f / %.3f flop/B\n",
                  r->k_sddmm, r->sddmm_flops,
                  dt_fmt_bytes(r->sddmm_bytes[SP_FP32], b1, sizeof b1),
                  dt_fmt_bytes(r->sddmm_bytes[SP_FP64], b2, sizeof b2), r->sddmm_ai[SP_FP32],
                  r->sddmm_ai[SP_FP64]);
    dt_buf_printf(out, "profiled in %.3f s\n", r->seconds);
}
