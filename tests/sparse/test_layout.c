/* test_layout.c -- the device layouts of sparse/layout.c (bins, csr16,
 * sell16, seg16, dtile, runion, coo, ell): variables, array contents,
 * invariants, refusals. No device and no CUDA header. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A matrix whose row i has lens[i] entries in consecutive columns starting
 * at first[i] (or 0 when first is NULL). */
static sp_csr *rows_of(int32_t rows, int32_t cols, const int *lens, const int32_t *first)
{
    dt_err e = {0};
    sp_coo *c = sp_coo_new(rows, cols, 64, &e);
    cr_assert_not_null(c, "%s", e.msg);
    for (int32_t r = 0; r < rows; r++)
        for (int k = 0; k < lens[r]; k++)
            cr_assert_eq(sp_coo_push(c, r, (first ? first[r] : 0) + k, 1.0 + r + 0.5 * k, &e), 0);
    sp_csr *a = sp_coo_to_csr(c, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_coo_free(c);
    return a;
}

static int64_t var(const sp_fmt *f, const char *name)
{
    int64_t v = -1;
    cr_assert_eq(sp_fmt_var(f, name, &v), 0, "no variable %s", name);
    return v;
}

static const int32_t *arr(const sp_fmt *f, const char *name, size_t *n)
{
    size_t bytes = 0;
    const void *p = sp_fmt_get(f, name, &bytes);
    cr_assert_not_null(p, "no host copy of %s", name);
    *n = bytes / 4;
    return p;
}

static cJSON *params_of(const char *json)
{
    cJSON *p = cJSON_Parse(json);
    cr_assert_not_null(p);
    return p;
}

/* format built from a with the parameters of params_json, host copies
 * kept; fails the test when the builder refuses. */
static void build_host(const sp_csr *a, const char *format, const char *params_json, sp_dtype t,
                       sp_fmt *f)
{
    cJSON *p = params_json ? params_of(params_json) : NULL;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, format, p, t, f, &e), 0, "%s %s: %s", format,
                 params_json ? params_json : "{}", e.msg);
    cJSON_Delete(p);
}

Test(layout, bins_should_group_rows_by_length_keeping_row_order_within_a_bin)
{
    /* per_lane 4: bin b holds lengths up to 4 << b, bin 5 up to long_row. */
    static const int lens[] = {0, 5, 4, 9, 17, 33, 1, 65, 300, 16, 8, 2};
    int32_t rows = (int32_t)DT_ARRAY_LEN(lens);
    sp_csr *a = rows_of(rows, 400, lens, NULL);
    cJSON *p = params_of("{\"per_lane\": 4, \"long_row\": 100}");
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "bins", p, SP_FP32, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&f, "nbins"), 7);
    /* bin0: 0, 4, 1, 2 -> rows 0, 2, 6, 11; bin1: 5, 8 -> rows 1, 10;
     * bin2: 9, 16 -> rows 3, 9; bin3: 17 -> 4; bin4: 33 -> 5;
     * bin5: 65 -> 7; bin6: 300 -> 8. */
    int64_t want_counts[] = {4, 2, 2, 1, 1, 1, 1};
    const char *names[] = {"bin0", "bin1", "bin2", "bin3", "bin4", "bin5", "bin6"};
    for (int b = 0; b < 7; b++)
        cr_assert_eq(var(&f, names[b]), want_counts[b], "%s", names[b]);
    cr_assert_eq(var(&f, "long_nnz"), 300);
    cr_assert_eq(var(&f, "per_lane"), 4);
    cr_assert_eq(var(&f, "long_row"), 100);
    size_t n;
    const int32_t *br = arr(&f, "bin_rows", &n);
    int32_t want_rows[] = {0, 2, 6, 11, 1, 10, 3, 9, 4, 5, 7, 8};
    cr_assert_eq(n, (size_t)rows);
    for (int32_t i = 0; i < rows; i++)
        cr_assert_eq(br[i], want_rows[i], "bin_rows[%d] = %d, want %d", i, br[i], want_rows[i]);
    const int32_t *bp = arr(&f, "bin_ptr", &n);
    int32_t want_ptr[] = {0, 4, 6, 8, 9, 10, 11, 12};
    cr_assert_eq(n, 8);
    for (int b = 0; b < 8; b++)
        cr_assert_eq(bp[b], want_ptr[b], "bin_ptr[%d]", b);
    const int32_t *lp = arr(&f, "bin_long_ptr", &n);
    cr_assert_eq(n, 2);
    cr_assert(lp[0] == 0 && lp[1] == 300);
    /* The CSR arrays travel with the bins. */
    cr_assert_not_null(sp_fmt_get(&f, "rowptr", NULL));
    cr_assert_not_null(sp_fmt_get(&f, "col", NULL));
    cr_assert_not_null(sp_fmt_get(&f, "val", NULL));
    sp_fmt_free(&f);
    cJSON_Delete(p);
    sp_csr_free(a);
}

Test(layout, bins_should_give_the_long_bin_a_running_nonzero_count)
{
    static const int lens[] = {5000, 3, 4097, 0, 4096};
    sp_csr *a = rows_of(5, 6000, lens, NULL);
    sp_fmt f;
    dt_err e = {0};
    /* Defaults: per_lane 4, long_row 4096. */
    cr_assert_eq(sp_fmt_build(a, "bins", NULL, SP_FP64, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&f, "bin6"), 2);
    cr_assert_eq(var(&f, "bin5"), 1); /* 4096 is not longer than long_row */
    cr_assert_eq(var(&f, "long_nnz"), 5000 + 4097);
    size_t n;
    const int32_t *lp = arr(&f, "bin_long_ptr", &n);
    cr_assert_eq(n, 3);
    cr_assert(lp[0] == 0 && lp[1] == 5000 && lp[2] == 9097);
    const int32_t *br = arr(&f, "bin_rows", &n);
    const int32_t *bp = arr(&f, "bin_ptr", &n);
    cr_assert(br[bp[6]] == 0 && br[bp[6] + 1] == 2);
    size_t vbytes = 0;
    cr_assert_not_null(sp_fmt_get(&f, "val", &vbytes));
    cr_assert_eq(vbytes, (size_t)a->nnz * 8, "fp64 values");
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, bins_should_handle_a_matrix_without_rows)
{
    sp_csr *a = rows_of(0, 0, NULL, NULL);
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "bins", NULL, SP_FP32, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&f, "bin0"), 0);
    cr_assert_eq(var(&f, "long_nnz"), 0);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, bins_should_refuse_thresholds_below_one)
{
    static const int lens[] = {1, 2};
    sp_csr *a = rows_of(2, 4, lens, NULL);
    const char *bad[] = {"{\"per_lane\": 0}", "{\"long_row\": 0}", "{\"per_lane\": -3}"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *p = params_of(bad[i]);
        sp_fmt f;
        dt_err e = {0};
        cr_assert_eq(sp_fmt_build(a, "bins", p, SP_FP32, &f, &e), -1, "%s accepted", bad[i]);
        cr_assert_eq(e.code, 1, "%s", bad[i]);
        cr_assert(strstr(e.msg, "bins:"), "%s", e.msg);
        cJSON_Delete(p);
    }
    sp_csr_free(a);
}

Test(layout, csr16_should_rebuild_every_column_from_its_row_base)
{
    static const int lens[] = {3, 0, 4, 1, 2};
    static const int32_t first[] = {70000, 0, 5, 200000, 65534};
    sp_csr *a = rows_of(5, 300000, lens, first);
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "csr16", NULL, SP_FP32, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&f, "slice"), 1);
    cr_assert_eq(var(&f, "slice_shift"), 0);
    size_t nb, nc;
    const int32_t *base = arr(&f, "slice_base", &nb);
    cr_assert_eq(nb, 5);
    cr_assert_eq(base[1], 0, "an empty row's base is 0");
    size_t ns;
    const int32_t *span = arr(&f, "slice_span", &ns);
    cr_assert_eq(ns, 5);
    cr_assert(span[0] == 3 && span[1] == 0 && span[2] == 4, "spans %d %d %d", span[0], span[1],
              span[2]);
    cr_assert_eq(var(&f, "slice_span_max"), 4);
    cr_assert_eq(var(&f, "value_bytes"), 4, "fp32");
    const uint16_t *c16 = sp_fmt_get(&f, "col16", &nc);
    cr_assert_eq(nc, (size_t)a->nnz * 2);
    for (int32_t r = 0; r < a->rows; r++)
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++)
            cr_assert_eq(base[r] + c16[k], a->col[k], "row %d entry %lld", r, (long long)k);
    size_t nv;
    cr_assert_not_null(sp_fmt_get(&f, "val", &nv));
    cr_assert_eq(nv, (size_t)a->nnz * 4);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

/* ELL in both layouts: slot k of row r at k * rows + r by default, at
 * r * width + k with row_major 1; padding is column -1 with value 0. */
Test(layout, ell_should_lay_rows_out_column_or_row_major_as_asked)
{
    static const int lens[] = {2, 0, 3};
    static const int32_t first[] = {4, 0, 1};
    sp_csr *a = rows_of(3, 8, lens, first);
    static const int32_t colmaj[] = {4, -1, 1, 5, -1, 2, -1, -1, 3};
    static const int32_t rowmaj[] = {4, 5, -1, -1, -1, -1, 1, 2, 3};
    for (int rm = 0; rm <= 1; rm++) {
        cJSON *p = params_of(rm ? "{\"row_major\": 1}" : "{}");
        sp_fmt f;
        dt_err e = {0};
        cr_assert_eq(sp_fmt_build(a, "ell", p, SP_FP64, &f, &e), 0, "%s", e.msg);
        cr_assert_eq(var(&f, "width"), 3);
        cr_assert_eq(var(&f, "row_major"), rm);
        size_t n, nv;
        const int32_t *col = arr(&f, "ell_col", &n);
        cr_assert_eq(n, 9);
        const double *val = sp_fmt_get(&f, "ell_val", &nv);
        cr_assert_eq(nv, 9 * sizeof(double));
        for (int i = 0; i < 9; i++) {
            cr_assert_eq(col[i], rm ? rowmaj[i] : colmaj[i], "layout %d slot %d", rm, i);
            if (col[i] < 0)
                cr_assert_eq(val[i], 0.0, "padding value at %d", i);
        }
        /* Row 2's third entry: 1 + 2 + 0.5 * 2. */
        cr_assert_eq(val[8], 4.0); /* the last slot in both layouts */
        sp_fmt_free(&f);
        cJSON_Delete(p);
    }
    cJSON *bad = params_of("{\"row_major\": 2}");
    sp_fmt f;
    dt_err e = {0};
    cr_assert_neq(sp_fmt_build(a, "ell", bad, SP_FP32, &f, &e), 0);
    cr_assert(strstr(e.msg, "row_major is 2; expected 0 or 1"), "%s", e.msg);
    cJSON_Delete(bad);
    sp_csr_free(a);
}

Test(layout, csr16_should_share_a_base_across_a_slice)
{
    static const int lens[] = {2, 2, 2, 2, 2, 2};
    static const int32_t first[] = {10, 4, 900, 60000, 100, 100};
    sp_csr *a = rows_of(6, 70000, lens, first);
    cJSON *p = params_of("{\"slice\": 4}");
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "csr16", p, SP_FP16, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&f, "slice_shift"), 2);
    size_t nb;
    const int32_t *base = arr(&f, "slice_base", &nb);
    cr_assert_eq(nb, 2);
    cr_assert(base[0] == 4 && base[1] == 100, "bases %d %d", base[0], base[1]);
    /* The window each slice reaches: rows 0..3 columns 4..60001, rows 4..5
     * columns 100..101. */
    size_t ns;
    const int32_t *span = arr(&f, "slice_span", &ns);
    cr_assert_eq(ns, 2);
    cr_assert(span[0] == 59998 && span[1] == 2, "spans %d %d", span[0], span[1]);
    cr_assert_eq(var(&f, "slice_span_max"), 59998);
    cr_assert_eq(var(&f, "value_bytes"), 2, "fp16");
    const uint16_t *c16 = sp_fmt_get(&f, "col16", NULL);
    for (int32_t r = 0; r < a->rows; r++)
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++)
            cr_assert_eq(base[r >> 2] + c16[k], a->col[k]);
    sp_fmt_free(&f);
    cJSON_Delete(p);
    sp_csr_free(a);
}

Test(layout, csr16_should_refuse_a_row_spanning_more_than_16_bits)
{
    static const int lens[] = {1, 2, 1};
    sp_csr *a = rows_of(3, 70000, lens, NULL);
    /* Row 1: columns 0 and 65536, one past what 16 bits reach. */
    a->col[a->rowptr[1] + 1] = 65536;
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "csr16", NULL, SP_FP32, &f, &e), -1);
    cr_assert_eq(e.code, 1);
    cr_assert(strstr(e.msg, "csr16: row 1 spans columns 0..65536"), "%s", e.msg);
    /* 65535 apart is the most a row may span. */
    a->col[a->rowptr[1] + 1] = 65535;
    dt_err ok = {0};
    cr_assert_eq(sp_fmt_build(a, "csr16", NULL, SP_FP32, &f, &ok), 0, "%s", ok.msg);
    const uint16_t *c16 = sp_fmt_get(&f, "col16", NULL);
    cr_assert_not_null(c16);
    cr_assert_eq(c16[a->rowptr[1] + 1], 65535, "the widest offset 16 bits hold");
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, csr16_should_refuse_a_slice_whose_rows_drift_apart)
{
    static const int lens[] = {1, 1};
    static const int32_t first[] = {0, 65536};
    sp_csr *a = rows_of(2, 70000, lens, first);
    cJSON *p = params_of("{\"slice\": 2}");
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "csr16", p, SP_FP32, &f, &e), -1);
    cr_assert(strstr(e.msg, "rows 0..1 span columns 0..65536") && strstr(e.msg, "smaller slice"),
              "%s", e.msg);
    cJSON_Delete(p);
    dt_err ok = {0};
    cr_assert_eq(sp_fmt_build(a, "csr16", NULL, SP_FP32, &f, &ok), 0, "per row it fits");
    sp_fmt_free(&f);
    const char *bad[] = {"{\"slice\": 3}", "{\"slice\": 0}", "{\"slice\": 8192}"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *q = params_of(bad[i]);
        dt_err be = {0};
        cr_assert_eq(sp_fmt_build(a, "csr16", q, SP_FP32, &f, &be), -1, "%s accepted", bad[i]);
        cr_assert(strstr(be.msg, "power of two"), "%s", be.msg);
        cJSON_Delete(q);
    }
    sp_csr_free(a);
}

/* sell16 at vec V: entry k of the slice's row j at sell_ptr[s] + (k / V) *
 * C * V + j * V + k % V, every slice's length a multiple of V (the
 * smallest one that holds its longest row), padding (0xFFFF, 0) in every
 * other slot. 77 rows (two and a bit slices of 32), empty rows, rows of 1
 * to 41 entries; unsorted and sorted within windows of 64; values in
 * fp64, fp32 and fp16, bit for bit what sp_to_dtype makes of them. */
Test(layout, sell16_should_lay_out_chunks_of_vec_entries_per_row)
{
    enum { ROWS = 77, C = 32 };
    int lens[ROWS];
    int32_t first[ROWS];
    for (int i = 0; i < ROWS; i++) {
        lens[i] = i % 7 == 3 ? 0 : 1 + (i * 5) % 13;
        first[i] = (i * 37) % 900;
    }
    lens[40] = 41;
    sp_csr *a = rows_of(ROWS, 1000, lens, first);
    static const int vecs[] = {1, 2, 4, 8};
    static const sp_dtype types[] = {SP_FP64, SP_FP32, SP_FP16};
    for (size_t ti = 0; ti < DT_ARRAY_LEN(types); ti++)
        for (int sigma = 1; sigma <= 64; sigma *= 64)
            for (size_t vi = 0; vi < DT_ARRAY_LEN(vecs); vi++) {
                const int V = vecs[vi];
                const sp_dtype t = types[ti];
                const size_t es = (size_t)sp_dtype_size(t);
                char json[96];
                snprintf(json, sizeof json, "{\"C\": %d, \"sigma\": %d, \"vec\": %d} %s", C, sigma,
                         V, sp_dtype_name(t));
                char pj[64];
                snprintf(pj, sizeof pj, "{\"C\": %d, \"sigma\": %d, \"vec\": %d}", C, sigma, V);
                cJSON *p = params_of(pj);
                sp_fmt f;
                dt_err e = {0};
                cr_assert_eq(sp_fmt_build(a, "sell16", p, t, &f, &e), 0, "%s: %s", json, e.msg);
                cr_assert_eq(var(&f, "vec"), V, "%s", json);
                const int64_t ns = var(&f, "nslices");
                cr_assert_eq(ns, 3, "%s", json);
                size_t n, nperm, nbase, ncol, nval;
                const int32_t *ptr = arr(&f, "sell_ptr", &n);
                cr_assert_eq(n, (size_t)ns + 1);
                const int32_t *len = arr(&f, "sell_len", &n);
                cr_assert_eq(n, (size_t)ns);
                const int32_t *perm = arr(&f, "sell_perm", &nperm);
                cr_assert_eq(nperm, (size_t)ns * C);
                const int32_t *base = arr(&f, "slice_base", &nbase);
                const uint16_t *col16 = sp_fmt_get(&f, "col16", &ncol);
                const unsigned char *val = sp_fmt_get(&f, "sell_val", &nval);
                cr_assert_eq(ncol / 2, (size_t)ptr[ns], "%s: col16 holds every slot", json);
                cr_assert_eq(nval / es, (size_t)ptr[ns], "%s: sell_val holds every slot", json);
                unsigned char *seen = calloc((size_t)ptr[ns] + 1, 1);
                int rows_seen = 0;
                cr_assert_eq(ptr[0], 0);
                for (int64_t sl = 0; sl < ns; sl++) {
                    int longest = 0;
                    for (int j = 0; j < C; j++) {
                        int32_t r = perm[sl * C + j];
                        if (r >= 0 && lens[r] > longest)
                            longest = lens[r];
                    }
                    cr_assert_eq(len[sl] % V, 0, "%s: slice %lld length %d", json, (long long)sl,
                                 len[sl]);
                    cr_assert(len[sl] >= longest && len[sl] < longest + V,
                              "%s: slice %lld length %d for a longest row of %d", json,
                              (long long)sl, len[sl], longest);
                    cr_assert_eq(ptr[sl + 1] - ptr[sl], len[sl] * C, "%s: slice %lld", json,
                                 (long long)sl);
                    cr_assert_eq(ptr[sl] % (C * V), 0, "%s: slice %lld starts at %d", json,
                                 (long long)sl, ptr[sl]);
                    for (int j = 0; j < C; j++) {
                        int32_t r = perm[sl * C + j];
                        int rl = r >= 0 ? lens[r] : 0;
                        rows_seen += r >= 0;
                        for (int k = 0; k < len[sl]; k++) {
                            int64_t at =
                                ptr[sl] + (int64_t)(k / V) * C * V + (int64_t)j * V + k % V;
                            cr_assert(at >= ptr[sl] && at < ptr[sl + 1] && !seen[at],
                                      "%s: slot %lld out of its slice or visited twice", json,
                                      (long long)at);
                            seen[at] = 1;
                            if (k < rl) {
                                int64_t src = a->rowptr[r] + k;
                                cr_assert_eq(base[sl] + col16[at], a->col[src],
                                             "%s: row %d entry %d at %lld", json, r, k,
                                             (long long)at);
                                unsigned char want[8];
                                sp_to_dtype(&a->val[src], want, 1, t);
                                cr_assert(memcmp(val + at * (int64_t)es, want, es) == 0,
                                          "%s: row %d entry %d value", json, r, k);
                            } else {
                                cr_assert_eq(col16[at], 0xFFFF, "%s: row %d slot %d is not padding",
                                             json, r, k);
                                static const unsigned char zero[8] = {0};
                                cr_assert(memcmp(val + at * (int64_t)es, zero, es) == 0,
                                          "%s: row %d padding value", json, r);
                            }
                        }
                    }
                }
                cr_assert_eq(rows_seen, ROWS, "%s: every row in one slot", json);
                free(seen);
                sp_fmt_free(&f);
                cJSON_Delete(p);
            }
    sp_csr_free(a);
}

/* sell16 with vdict 1: the same layout, each value replaced by a one-byte
 * index into vtab (entry 0 the 0 of padding); the table gives back every
 * value of the plain build, position by position. */
Test(layout, sell16_vdict_should_give_every_entry_its_value_through_the_table)
{
    static const int lens[] = {3, 0, 4, 1, 2, 6, 1};
    sp_csr *a = rows_of(7, 64, lens, NULL);
    for (int64_t k = 0; k < a->nnz; k++)
        a->val[k] = (k % 3 == 0) ? 2.5 : (k % 3 == 1 ? -1.0 : 0.0); /* an explicit 0 too */
    cJSON *pv = params_of("{\"C\": 4, \"sigma\": 4, \"vec\": 2}");
    cJSON *pd = params_of("{\"C\": 4, \"sigma\": 4, \"vec\": 2, \"vdict\": 1}");
    sp_fmt fv, fd;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "sell16", pv, SP_FP64, &fv, &e), 0, "%s", e.msg);
    cr_assert_eq(sp_fmt_build(a, "sell16", pd, SP_FP64, &fd, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&fd, "vdict"), 1);
    cr_assert_eq(var(&fd, "nvals"), 3, "0 (padding and the explicit zeros), 2.5 and -1");
    cr_assert_null(sp_fmt_get(&fd, "sell_val", NULL), "no per-entry values with vdict");
    size_t nval, nidx, ntab, nc16v, nc16d;
    const double *val = sp_fmt_get(&fv, "sell_val", &nval);
    const uint8_t *idx = sp_fmt_get(&fd, "sell_vidx", &nidx);
    const double *tab = sp_fmt_get(&fd, "vtab", &ntab);
    cr_assert_eq(nidx, nval / 8, "one byte an entry where fp64 took eight");
    cr_assert_eq(ntab, 256 * 8);
    cr_assert_eq(tab[0], 0.0);
    const void *c16v = sp_fmt_get(&fv, "col16", &nc16v);
    const void *c16d = sp_fmt_get(&fd, "col16", &nc16d);
    cr_assert(nc16v == nc16d && memcmp(c16v, c16d, nc16v) == 0, "the layout is sell16's");
    for (size_t i = 0; i < nidx; i++)
        cr_assert_eq(tab[idx[i]], val[i], "entry %zu: table %g, value %g", i, tab[idx[i]], val[i]);
    sp_fmt_free(&fv);
    sp_fmt_free(&fd);
    /* 300 distinct values do not fit a one-byte index. */
    static int ones[300];
    for (int i = 0; i < 300; i++)
        ones[i] = 1;
    sp_csr *b = rows_of(300, 2, ones, NULL);
    for (int64_t k = 0; k < b->nnz; k++)
        b->val[k] = 1.0 + (double)k;
    cr_assert_eq(sp_fmt_build(b, "sell16", pd, SP_FP32, &fd, &e), -1);
    cr_assert(strstr(e.msg, "more than 255 distinct nonzero values") != NULL, "%s", e.msg);
    cJSON_Delete(pv);
    cJSON_Delete(pd);
    sp_csr_free(a);
    sp_csr_free(b);
}

Test(layout, sell16_should_refuse_a_vec_other_than_1_2_4_8)
{
    static const int lens[] = {3, 0, 5};
    sp_csr *a = rows_of(3, 10, lens, NULL);
    const char *bad[] = {"{\"vec\": 3}", "{\"vec\": 0}", "{\"vec\": 16}", "{\"vec\": -2}"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *p = params_of(bad[i]);
        sp_fmt f;
        dt_err e = {0};
        cr_assert_eq(sp_fmt_build(a, "sell16", p, SP_FP32, &f, &e), -1, "%s accepted", bad[i]);
        cr_assert_eq(e.code, 1, "%s", bad[i]);
        cr_assert(strstr(e.msg, "sell16: format parameter vec") && strstr(e.msg, "1, 2, 4, 8"),
                  "%s: %s", bad[i], e.msg);
        cJSON_Delete(p);
    }
    /* A matrix without rows still builds at every legal vec. */
    sp_csr *z = rows_of(0, 0, NULL, NULL);
    cJSON *p = params_of("{\"vec\": 8}");
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(z, "sell16", p, SP_FP16, &f, &e), 0, "%s", e.msg);
    cr_assert_eq(var(&f, "nslices"), 0);
    sp_fmt_free(&f);
    cJSON_Delete(p);
    sp_csr_free(z);
    sp_csr_free(a);
}

/* coo: CSR's arrays unchanged, and coo_row[k] the row of nonzero k in CSR
 * order, empty rows (first, middle, last) holding none. */
Test(layout, coo_should_give_every_nonzero_its_row_beside_csr)
{
    static const int lens[] = {0, 3, 0, 1, 5, 2, 0};
    sp_csr *a = rows_of(7, 20, lens, NULL);
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "coo", NULL, SP_FP32, &f, &e), 0, "%s", e.msg);
    size_t nr, nc, np;
    const int32_t *row = arr(&f, "coo_row", &nr);
    const int32_t *col = arr(&f, "col", &nc);
    const int32_t *rp = arr(&f, "rowptr", &np);
    cr_assert_eq(nr, (size_t)a->nnz);
    cr_assert_eq(nc, (size_t)a->nnz);
    cr_assert_eq(np, (size_t)a->rows + 1);
    for (int32_t r = 0; r < a->rows; r++) {
        cr_assert_eq(rp[r], a->rowptr[r], "rowptr[%d]", r);
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++) {
            cr_assert_eq(row[k], r, "coo_row[%lld]", (long long)k);
            cr_assert_eq(col[k], a->col[k], "col[%lld]", (long long)k);
        }
    }
    sp_fmt_free(&f);
    sp_csr_free(a);
}

/* sell16 with long = L: rows of more than L entries are left out of the
 * slices (-1 in sell_perm, no slot stored) and kept as CSR in long_rows,
 * long_ptr, long_col and long_val, in row order; every other row sits in
 * one slot with its entries. Without long nothing of the kind is built. */
Test(layout, sell16_long_should_keep_long_rows_out_of_the_slices)
{
    enum { ROWS = 70 };
    int lens[ROWS];
    int32_t first[ROWS];
    for (int i = 0; i < ROWS; i++) {
        lens[i] = 1 + i % 5;
        first[i] = i * 3;
    }
    lens[3] = 300;
    lens[40] = 65;
    lens[41] = 64; /* at the threshold: stays in the slices */
    sp_csr *a = rows_of(ROWS, 1000, lens, first);
    sp_fmt f;
    build_host(a, "sell16", "{\"C\": 32, \"sigma\": 64, \"vec\": 2, \"long\": 64}", SP_FP32, &f);
    cr_assert_eq(var(&f, "nlong"), 2);
    cr_assert_eq(var(&f, "long"), 64);
    size_t n, np;
    const int32_t *perm = arr(&f, "sell_perm", &np);
    int seen[ROWS] = {0};
    for (size_t q = 0; q < np; q++)
        if (perm[q] >= 0)
            seen[perm[q]]++;
    for (int r = 0; r < ROWS; r++)
        cr_assert_eq(seen[r], r == 3 || r == 40 ? 0 : 1, "row %d in %d slots", r, seen[r]);
    const int32_t *lrows = arr(&f, "long_rows", &n);
    cr_assert(n == 2 && lrows[0] == 3 && lrows[1] == 40, "long rows");
    const int32_t *lptr = arr(&f, "long_ptr", &n);
    cr_assert(n == 3 && lptr[0] == 0 && lptr[1] == 300 && lptr[2] == 365, "long_ptr");
    const int32_t *lcol = arr(&f, "long_col", &n);
    cr_assert_eq(n, 365);
    const float *lval = sp_fmt_get(&f, "long_val", &n);
    cr_assert_eq(n, 365 * sizeof(float));
    for (int i = 0; i < 2; i++)
        for (int32_t k = lptr[i]; k < lptr[i + 1]; k++) {
            const int64_t src = a->rowptr[lrows[i]] + (k - lptr[i]);
            cr_assert_eq(lcol[k], a->col[src], "long row %d entry %d", lrows[i], k);
            cr_assert_eq(lval[k], (float)a->val[src], "long row %d value %d", lrows[i], k);
        }
    /* The slices hold exactly the other rows' entries. */
    const uint16_t *col16 = sp_fmt_get(&f, "col16", &n);
    size_t real = 0;
    for (size_t k = 0; k < n / 2; k++)
        real += col16[k] != 0xFFFF;
    cr_assert_eq(real, (size_t)a->nnz - 365);
    sp_fmt_free(&f);
    build_host(a, "sell16", "{\"C\": 32, \"sigma\": 64, \"vec\": 2}", SP_FP32, &f);
    cr_assert_null(sp_fmt_get(&f, "long_rows", &n), "no long rows without long");
    cr_assert_eq(var(&f, "long"), 0);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

/* sell16 with order 1 cuts its sigma windows from a Cuthill-McKee order of
 * the rows (sp_row_order_cm), at sigma 1 too, where sell_perm is then that
 * order itself; every row keeps its entries; order 2 is refused, naming
 * the legal values. */
Test(layout, sell16_order_should_cut_windows_from_a_cuthill_mckee_order)
{
    enum { ROWS = 150, C = 32 };
    int lens[ROWS];
    int32_t first[ROWS];
    for (int i = 0; i < ROWS; i++) {
        lens[i] = 1 + (i * 5) % 7;
        first[i] = (int32_t)((i * 61) % (ROWS - 8)); /* scattered: the order matters */
    }
    sp_csr *a = rows_of(ROWS, ROWS, lens, first);
    dt_err e = {0};
    int32_t *cm = sp_row_order_cm(a, &e);
    cr_assert_not_null(cm, "%s", e.msg);
    for (int sigma = 1; sigma <= 64; sigma *= 64) {
        char pj[80];
        snprintf(pj, sizeof pj, "{\"C\": %d, \"sigma\": %d, \"order\": 1}", C, sigma);
        sp_fmt f;
        build_host(a, "sell16", pj, SP_FP32, &f);
        int32_t *want = sp_sell_perm_ordered(a, C, sigma, 0, cm, &e);
        cr_assert_not_null(want, "%s", e.msg);
        size_t np, n;
        const int32_t *perm = arr(&f, "sell_perm", &np);
        const int32_t *ptr = arr(&f, "sell_ptr", &n);
        const int32_t *base = arr(&f, "slice_base", &n);
        const uint16_t *col16 = sp_fmt_get(&f, "col16", &n);
        cr_assert_arr_eq(perm, want, np * sizeof *perm, "%s: sell_perm", pj);
        cr_assert_eq(var(&f, "order"), 1, "%s", pj);
        int identity = 1;
        for (int i = 0; i < ROWS; i++)
            identity &= perm[i] == i;
        cr_assert(!identity, "%s: the order left the rows as they were", pj);
        for (size_t s = 0; s * C < np; s++)
            for (int j = 0; j < C; j++) {
                const int32_t r = perm[s * C + (size_t)j];
                for (int k = 0; r >= 0 && k < lens[r]; k++)
                    cr_assert_eq(base[s] + col16[ptr[s] + (int64_t)k * C + j],
                                 a->col[a->rowptr[r] + k], "%s: row %d entry %d", pj, r, k);
            }
        free(want);
        sp_fmt_free(&f);
    }
    cJSON *p = params_of("{\"C\": 32, \"sigma\": 64, \"order\": 2}");
    sp_fmt f;
    cr_assert_neq(sp_fmt_build(a, "sell16", p, SP_FP32, &f, &e), 0);
    cr_assert(strstr(e.msg, "order is 2; legal values are 0") != NULL, "%s", e.msg);
    cJSON_Delete(p);
    free(cm);
    sp_csr_free(a);
}

/* A rows x rows matrix big enough for the builders' threads: row i has
 * 1 + (i * lmul) % lmod entries from column (i * 13) % fspan on (lens and
 * first returned; the caller frees them). */
static sp_csr *striped(int32_t rows, int lmul, int lmod, int32_t fspan, int **lens, int32_t **first)
{
    *lens = malloc((size_t)rows * sizeof **lens);
    *first = malloc((size_t)rows * sizeof **first);
    cr_assert(*lens != NULL && *first != NULL);
    for (int32_t i = 0; i < rows; i++) {
        (*lens)[i] = 1 + (int)(((int64_t)i * lmul) % lmod);
        (*first)[i] = (int32_t)(((int64_t)i * 13) % fspan);
    }
    return rows_of(rows, rows, *lens, *first);
}

/* The value dictionary and csr16 built on four threads are the ones built
 * on one, byte for byte: the table in order of first appearance (values
 * first seen late in the matrix included), every entry's index, every
 * offset; and past 255 values both refuse with the same message. */
Test(layout, value_dictionary_and_csr16_should_not_depend_on_the_thread_count)
{
    int *lens;
    int32_t *first;
    sp_csr *a = striped(40000, 1, 5, 30000, &lens, &first);
    /* 199 distinct values, the last 50 only in the last tenth of the rows;
     * the period is prime so that no part starts where the first does. */
    for (int64_t k = 0; k < a->nnz; k++)
        a->val[k] = k < a->nnz * 9 / 10 ? 1.0 + (double)((k * 7) % 149) : 500.0 + (double)(k % 50);
    static const struct {
        const char *format, *params, *arrays[3];
    } cases[] = {
        {"sell16", "{\"C\": 32, \"sigma\": 1, \"vdict\": 1}", {"vtab", "sell_vidx", "col16"}},
        {"csr16", "{\"slice\": 16}", {"col16", "slice_base", "slice_span"}},
    };
    for (size_t c = 0; c < DT_ARRAY_LEN(cases); c++) {
        sp_fmt f1, f4;
        sp_ref_set_threads(1);
        build_host(a, cases[c].format, cases[c].params, SP_FP32, &f1);
        sp_ref_set_threads(4);
        build_host(a, cases[c].format, cases[c].params, SP_FP32, &f4);
        for (int q = 0; q < 3; q++) {
            size_t n1, n4;
            const void *p1 = sp_fmt_get(&f1, cases[c].arrays[q], &n1);
            const void *p4 = sp_fmt_get(&f4, cases[c].arrays[q], &n4);
            cr_assert(p1 != NULL && p4 != NULL && n1 == n4, "%s %s", cases[c].format,
                      cases[c].arrays[q]);
            cr_assert(memcmp(p1, p4, n1) == 0, "%s: %s differs on 4 threads", cases[c].format,
                      cases[c].arrays[q]);
        }
        sp_fmt_free(&f1);
        sp_fmt_free(&f4);
    }
    /* 300 distinct values: the same refusal on either count. */
    for (int64_t k = 0; k < a->nnz; k++)
        a->val[k] = 1.0 + (double)((k * 7) % 300);
    cJSON *p = params_of("{\"C\": 32, \"sigma\": 1, \"vdict\": 1}");
    char msg[2][512];
    for (int r = 0; r < 2; r++) {
        sp_ref_set_threads(r ? 4 : 1);
        dt_err e = {0};
        sp_fmt f;
        cr_assert_neq(sp_fmt_build(a, "sell16", p, SP_FP32, &f, &e), 0);
        snprintf(msg[r], sizeof msg[r], "%s", e.msg);
    }
    cr_assert_str_eq(msg[1], msg[0]);
    cr_assert(strstr(msg[0], "more than 255 distinct") != NULL, "%s", msg[0]);
    sp_ref_set_threads(0);
    cJSON_Delete(p);
    sp_csr_free(a);
    free(lens);
    free(first);
}

/* seg16 read back as spmv_seg16.cu reads it: a walk of every tile's entries,
 * summing into the row its flags reach, must give every row of A x
 * (fp64, x[c] = 1 + c % 7) and store each row exactly once. */
static void seg16_walk_should_match_csr(const sp_csr *a, const sp_fmt *f)
{
    const int64_t tile = var(f, "tile"), nt = var(f, "ntiles");
    size_t ntr, ntb, nc, nv;
    const int32_t *trow = arr(f, "tile_row", &ntr);
    const int32_t *tbase = arr(f, "tile_base", &ntb);
    const uint16_t *col = sp_fmt_get(f, "seg_col", &nc);
    const double *val = sp_fmt_get(f, "seg_val", &nv);
    cr_assert(ntr == (size_t)nt + 1 && ntb == (size_t)(nt ? nt : 1), "%zu %zu tiles", ntr, ntb);
    cr_assert_eq(nc, (size_t)(nt * tile) * 2);
    cr_assert_eq(nv, (size_t)(nt * tile) * 8, "fp64 values");
    cr_assert_eq(var(f, "seg_entries"), nt * tile);
    cr_assert(trow[0] == 0 && trow[nt] == a->rows);
    double *y = calloc((size_t)a->rows + 1, sizeof *y);
    int *stored = calloc((size_t)a->rows + 1, sizeof *stored);
    for (int64_t t = 0; t < nt; t++) {
        int32_t r = trow[t];
        double s = 0;
        for (int64_t k = t * tile; k < (t + 1) * tile; k++) {
            const int32_t c = tbase[t] + (col[k] & 0x7fff);
            cr_assert(c >= 0 && c < (a->cols ? a->cols : 1), "tile %lld entry %lld: column %d",
                      (long long)t, (long long)k, c);
            s += val[k] * (1 + c % 7);
            if (col[k] & 0x8000) {
                cr_assert_lt(r, trow[t + 1], "tile %lld ends more rows than it holds",
                             (long long)t);
                y[r] = s;
                stored[r]++;
                r++;
                s = 0;
            } else if (r == trow[t + 1]) {
                cr_assert_eq(val[k], 0, "padding holds value 0");
            }
        }
        cr_assert_eq(r, trow[t + 1], "tile %lld: every row ends inside it", (long long)t);
    }
    for (int32_t r = 0; r < a->rows; r++) {
        double want = 0;
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++)
            want += a->val[k] * (1 + a->col[k] % 7);
        cr_assert_eq(stored[r], 1, "row %d stored %d times", r, stored[r]);
        cr_assert_float_eq(y[r], want, 1e-12, "row %d: %g, want %g", r, y[r], want);
    }
    free(y);
    free(stored);
}

Test(layout, seg16_tiles_should_hold_whole_rows_flagged_at_their_ends)
{
    /* Empty rows, a row that fills a tile exactly, rows that do not fit
     * the tile they would start in, columns far from 0. */
    static const int lens[] = {3, 0, 5, 16, 1, 0, 0, 7, 9, 2, 16, 4};
    static const int32_t first[] = {40000, 0,     40003, 40010, 40100, 0,
                                    0,     40200, 40001, 40020, 9,     12};
    sp_csr *a = rows_of(12, 60000, lens, first);
    sp_fmt f;
    build_host(a, "seg16", "{\"tile\": 16}", SP_FP64, &f);
    size_t n;
    const int32_t *trow = arr(&f, "tile_row", &n);
    const int32_t *tbase = arr(&f, "tile_base", &n);
    /* Greedy: rows 0-2 (3 + 1 + 5 entries; an empty row takes one), row 3
     * alone (16), rows 4-7 (1 + 1 + 1 + 7: row 8's 9 would overflow), rows
     * 8-9 (9 + 2), row 10 alone (16), row 11. */
    static const int32_t want[] = {0, 3, 4, 8, 10, 11, 12};
    cr_assert_eq(var(&f, "ntiles"), 6);
    for (int i = 0; i < 7; i++)
        cr_expect_eq(trow[i], want[i], "tile %d starts at row %d, want %d", i, trow[i], want[i]);
    cr_expect_eq(tbase[0], 40000, "the tile's smallest column");
    cr_expect_eq(tbase[2], 40100, "empty rows widen nothing");
    cr_expect_eq(tbase[3], 40001, "rows 8 and 9 span 40001..40021");
    cr_expect_eq(tbase[4], 9);
    seg16_walk_should_match_csr(a, &f);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, seg16_should_start_a_tile_where_columns_would_span_past_15_bits)
{
    static const int lens[] = {2, 2, 2, 2};
    static const int32_t first[] = {0, 32766, 32767, 100000};
    sp_csr *a = rows_of(4, 200000, lens, first);
    sp_fmt f;
    build_host(a, "seg16", NULL, SP_FP64, &f);
    cr_assert_eq(var(&f, "tile"), 2048, "the default tile");
    size_t n;
    const int32_t *trow = arr(&f, "tile_row", &n);
    /* Rows 0-1 reach column 32767 (span 32767: fits), row 2 would reach
     * 32768 and starts a tile, row 3 is far from it. */
    cr_assert_eq(var(&f, "ntiles"), 3);
    cr_expect(trow[1] == 2 && trow[2] == 3, "tiles start at rows 0, %d, %d", trow[1], trow[2]);
    seg16_walk_should_match_csr(a, &f);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, seg16_should_refuse_a_row_longer_than_a_tile_or_too_wide_naming_it)
{
    static const int lens[] = {3, 17, 2};
    sp_csr *a = rows_of(3, 100, lens, NULL);
    cJSON *p = params_of("{\"tile\": 16}");
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "seg16", p, SP_FP32, &f, &e), -1);
    cr_expect(strstr(e.msg, "row 1 has 17 entries") && strstr(e.msg, "BLOCK * U"), "%s", e.msg);
    cJSON_Delete(p);
    sp_csr_free(a);
    /* One row whose first and last columns are 40000 apart. */
    sp_coo *c = sp_coo_new(2, 50000, 4, &e);
    cr_assert_eq(sp_coo_push(c, 0, 3, 1.0, &e), 0);
    cr_assert_eq(sp_coo_push(c, 1, 5, 1.0, &e), 0);
    cr_assert_eq(sp_coo_push(c, 1, 40005, 1.0, &e), 0);
    a = sp_coo_to_csr(c, &e);
    sp_coo_free(c);
    dt_err e2 = {0};
    cr_assert_eq(sp_fmt_build(a, "seg16", NULL, SP_FP32, &f, &e2), -1);
    cr_expect(strstr(e2.msg, "row 1 spans columns 5..40005"), "%s", e2.msg);
    const char *bad[] = {"{\"tile\": 12}", "{\"tile\": 0}"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *q = params_of(bad[i]);
        dt_err be = {0};
        cr_expect_eq(sp_fmt_build(a, "seg16", q, SP_FP32, &f, &be), -1, "%s", bad[i]);
        cr_expect(strstr(be.msg, "multiple of 8"), "%s", be.msg);
        cJSON_Delete(q);
    }
    sp_csr_free(a);
}

/* Builds `format` at each of `nshapes` parameter sets on each generated
 * matrix of `specs` and reads it back with walk. */
static void walk_generated(const char *format, const char *const *specs, size_t nspecs,
                           const char *const *shapes, size_t nshapes,
                           void (*walk)(const sp_csr *, const sp_fmt *))
{
    for (size_t i = 0; i < nspecs; i++) {
        dt_err e = {0};
        sp_csr *a = sp_generate(specs[i], &e);
        cr_assert_not_null(a, "%s", e.msg);
        for (size_t j = 0; j < nshapes; j++) {
            sp_fmt f;
            build_host(a, format, shapes[j], SP_FP64, &f);
            walk(a, &f);
            sp_fmt_free(&f);
        }
        sp_csr_free(a);
    }
}

/* `format` refuses each of `nbad` parameter sets on a small matrix, saying `why`. */
static void expect_refused(const char *format, const char *const *bad, size_t nbad, const char *why)
{
    static const int lens[] = {3, 2};
    sp_csr *a = rows_of(2, 100, lens, NULL);
    for (size_t i = 0; i < nbad; i++) {
        cJSON *q = params_of(bad[i]);
        sp_fmt f;
        dt_err e = {0};
        cr_expect_eq(sp_fmt_build(a, format, q, SP_FP32, &f, &e), -1, "%s %s", format, bad[i]);
        cr_expect(strstr(e.msg, why) != NULL, "%s", e.msg);
        cJSON_Delete(q);
    }
    sp_csr_free(a);
}

/* dtile read back as sddmm_dense_tile.cu reads it: every set bit of a tile
 * row's mask, at position rbase + (bits left of it), must name a nonzero of
 * A at that row and column, each nonzero exactly once; tiles come in (tile
 * row, tile column) order and none is empty. */
static void dtile_walk_should_match_csr(const sp_csr *a, const sp_fmt *f)
{
    const int64_t tm = var(f, "tm"), tn = var(f, "tn"), nt = var(f, "ntiles");
    size_t nrc, nb, nm;
    const int32_t *rc = arr(f, "tile_rc", &nrc);
    const int32_t *rbase = arr(f, "tile_rbase", &nb);
    const uint64_t *rmask = sp_fmt_get(f, "tile_rmask", &nm);
    cr_assert_eq(nrc, (size_t)(nt ? 2 * nt : 2));
    cr_assert(nb == (size_t)(nt ? nt * tm : 1) && nm == nb * 8, "%zu %zu", nb, nm);
    int *seen = calloc((size_t)a->nnz + 1, sizeof *seen);
    for (int64_t t = 0; t < nt; t++) {
        if (t > 0)
            cr_assert(rc[2 * t] > rc[2 * t - 2] ||
                          (rc[2 * t] == rc[2 * t - 2] && rc[2 * t + 1] > rc[2 * t - 1]),
                      "tile %lld out of order", (long long)t);
        int any = 0;
        for (int64_t lr = 0; lr < tm; lr++) {
            const uint64_t m = rmask[t * tm + lr];
            const int64_t r = rc[2 * t] * tm + lr;
            for (int c = 0; c < tn; c++) {
                if (!(m >> c & 1))
                    continue;
                any = 1;
                const int64_t p = rbase[t * tm + lr] + __builtin_popcountll(m & ((1ull << c) - 1));
                cr_assert(r < a->rows && p >= a->rowptr[r] && p < a->rowptr[r + 1],
                          "tile %lld row %lld bit %d: position %lld outside the row", (long long)t,
                          (long long)r, c, (long long)p);
                cr_assert_eq(a->col[p], rc[2 * t + 1] * tn + c, "tile %lld row %lld bit %d",
                             (long long)t, (long long)r, c);
                seen[p]++;
            }
        }
        cr_assert(any, "tile %lld is empty", (long long)t);
    }
    for (int64_t p = 0; p < a->nnz; p++)
        cr_assert_eq(seen[p], 1, "nonzero %lld reached %d times", (long long)p, seen[p]);
    free(seen);
}

Test(layout, dtile_should_list_occupied_tiles_with_each_rows_mask_and_first_position)
{
    /* 70 rows x 200 columns, tiles of 32 x 64: row 0 crosses a tile
     * boundary (columns 60..67), rows 1-3 are empty, row 40 reaches the
     * last, partial tile column (192..199), row 69 sits in the partial last
     * tile row. */
    int lens[70] = {0};
    int32_t first[70] = {0};
    lens[0] = 8, first[0] = 60;
    lens[5] = 3, first[5] = 0;
    lens[40] = 10, first[40] = 190;
    lens[69] = 64, first[69] = 64;
    sp_csr *a = rows_of(70, 200, lens, first);
    sp_fmt f;
    build_host(a, "dtile", "{\"tm\": 32, \"tn\": 64}", SP_FP32, &f);
    size_t n;
    const int32_t *rc = arr(&f, "tile_rc", &n);
    /* (0,0) rows 0 and 5, (0,1) row 0; (1,2) and (1,3) row 40; (2,1) row 69. */
    static const int32_t want[] = {0, 0, 0, 1, 1, 2, 1, 3, 2, 1};
    cr_assert_eq(var(&f, "ntiles"), 5);
    for (int i = 0; i < 10; i++)
        cr_expect_eq(rc[i], want[i], "tile_rc[%d] = %d, want %d", i, rc[i], want[i]);
    const uint64_t *m = sp_fmt_get(&f, "tile_rmask", &n);
    const int32_t *b = arr(&f, "tile_rbase", &n);
    cr_expect_eq(m[0], 0xfull << 60, "row 0's columns 60..63 in the first tile");
    cr_expect_eq(m[32], 0xfull, "row 0's columns 64..67 in the second");
    cr_expect_eq(b[32], 4, "after the row's four entries in the tile before");
    cr_expect_eq(m[4 * 32 + 5], ~0ull, "row 69 fills its tile row");
    dtile_walk_should_match_csr(a, &f);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, dtile_should_cover_every_nonzero_of_generated_matrices_at_every_tile_shape)
{
    static const char *const specs[] = {"gen:uniform:rows=300,cols=500,nnz=20000,seed=3",
                                        "gen:block:rows=256,cols=256,nnz=8192,b=16,seed=2",
                                        "gen:rmat:rows=1000,nnz=6000,seed=1"};
    static const char *const shapes[] = {"{\"tm\": 32, \"tn\": 32}", "{\"tm\": 64, \"tn\": 64}",
                                         "{\"tm\": 128, \"tn\": 64}", "{\"tm\": 1, \"tn\": 1}"};
    walk_generated("dtile", specs, DT_ARRAY_LEN(specs), shapes, DT_ARRAY_LEN(shapes),
                   dtile_walk_should_match_csr);
}

Test(layout, dtile_should_refuse_tiles_wider_than_a_mask_naming_the_limit)
{
    static const char *const bad[] = {"{\"tm\": 32, \"tn\": 65}", "{\"tm\": 0, \"tn\": 32}"};
    expect_refused("dtile", bad, DT_ARRAY_LEN(bad), "tn 1..64");
}

/* runion read back as sddmm_union.cu reads it: every entry's positions must
 * name nonzeros of its group's rows in its column, each nonzero exactly
 * once; entries come in (group, column) order, no entry is empty, and the
 * padding is -1. With usim the entry names its slots' rows after the
 * positions: the same rows in every entry of a group, each row in one
 * group only. */
static void runion_walk_should_match_csr(const sp_csr *a, const sp_fmt *f)
{
    const int64_t r = var(f, "ur"), es = var(f, "ues"), n = var(f, "nent"), sim = var(f, "usim");
    cr_assert_eq(es, (2 + r * (1 + sim) + 3) / 4 * 4, "r %lld sim %lld: entries of %lld ints",
                 (long long)r, (long long)sim, (long long)es);
    size_t len;
    const int32_t *en = arr(f, "un_ent", &len);
    cr_assert_eq(len, (size_t)(n ? n * es : es));
    int *seen = calloc((size_t)a->nnz + 1, sizeof *seen);
    int32_t *group_of = malloc(((size_t)a->rows + 1) * sizeof *group_of);
    for (int32_t i = 0; i < a->rows; i++)
        group_of[i] = -1;
    for (int64_t k = 0; k < n; k++) {
        const int32_t *x = en + k * es;
        const int same_group = k > 0 && x[1] == x[1 - es];
        if (k > 0)
            cr_assert(x[1] > x[1 - es] || (same_group && x[0] > x[-es]), "entry %lld out of order",
                      (long long)k);
        int any = 0;
        for (int64_t i = 0; i < r; i++) {
            const int64_t row = sim ? x[2 + r + i] : (int64_t)x[1] * r + i;
            if (sim && same_group)
                cr_assert_eq(x[2 + r + i], x[2 + r + i - es], "entry %lld: rows differ in a group",
                             (long long)k);
            if (sim && row >= 0 && !same_group) {
                cr_assert(row < a->rows, "entry %lld: row %lld", (long long)k, (long long)row);
                cr_assert_eq(group_of[row], -1, "row %lld in groups %d and %d", (long long)row,
                             group_of[row], x[1]);
                group_of[row] = x[1];
            }
            const int32_t p = x[2 + i];
            if (p < 0)
                continue;
            any = 1;
            cr_assert(row >= 0 && row < a->rows && p >= a->rowptr[row] && p < a->rowptr[row + 1],
                      "entry %lld row %lld: position %d outside the row", (long long)k,
                      (long long)row, p);
            cr_assert_eq(a->col[p], x[0], "entry %lld row %lld", (long long)k, (long long)row);
            seen[p]++;
        }
        for (int64_t j = 2 + r * (1 + sim); j < es; j++)
            cr_assert_eq(x[j], -1, "entry %lld padding", (long long)k);
        cr_assert(any, "entry %lld names no nonzero", (long long)k);
    }
    for (int64_t p = 0; p < a->nnz; p++)
        cr_assert_eq(seen[p], 1, "nonzero %lld reached %d times", (long long)p, seen[p]);
    free(group_of);
    free(seen);
}

Test(layout, runion_should_list_each_groups_distinct_columns_with_every_rows_position)
{
    /* 5 rows x 10 columns in groups of 2: rows 0 and 1 share columns 2..3
     * (row 0: 1..3, row 1: 2..5), row 2 is empty beside row 3 (0..1), and
     * row 4 is alone in the last group, its partner past the matrix. */
    static const int lens[] = {3, 4, 0, 2, 1};
    static const int32_t first[] = {1, 2, 0, 0, 9};
    sp_csr *a = rows_of(5, 10, lens, first);
    sp_fmt f;
    build_host(a, "runion", "{\"r\": 2}", SP_FP32, &f);
    cr_assert_eq(var(&f, "nent"), 5 + 2 + 1);
    cr_assert_eq(var(&f, "ues"), 4);
    size_t n;
    const int32_t *en = arr(&f, "un_ent", &n);
    static const int32_t want[] = {
        1, 0, 0,  -1, /* column 1: row 0's first nonzero */
        2, 0, 1,  3,  /* column 2: both rows */
        3, 0, 2,  4,  /* column 3: both */
        4, 0, -1, 5,  /* row 1 only */
        5, 0, -1, 6,  /* row 1 only */
        0, 1, -1, 7,  /* group 1: row 3's two */
        1, 1, -1, 8,  /* */
        9, 2, 9,  -1, /* group 2: row 4, no row 5 */
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(want); i++)
        cr_expect_eq(en[i], want[i], "un_ent[%zu] = %d, want %d", i, en[i], want[i]);
    runion_walk_should_match_csr(a, &f);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

Test(layout, runion_should_cover_every_nonzero_of_generated_matrices_at_every_group_size_and_sim)
{
    static const char *const specs[] = {"gen:uniform:rows=301,cols=500,nnz=20000,seed=3",
                                        "gen:banded:rows=999,cols=999,bw=7,seed=2",
                                        "gen:rmat:rows=1000,nnz=6000,seed=1"};
    static const char *const shapes[] = {"{\"r\": 2}",
                                         "{\"r\": 4}",
                                         "{\"r\": 8}",
                                         "{\"r\": 2, \"sim\": 1}",
                                         "{\"r\": 4, \"sim\": 1}",
                                         "{\"r\": 8, \"sim\": 1}"};
    walk_generated("runion", specs, DT_ARRAY_LEN(specs), shapes, DT_ARRAY_LEN(shapes),
                   runion_walk_should_match_csr);
}

Test(layout, runion_should_refuse_a_group_size_other_than_2_4_8)
{
    static const char *const bad[] = {"{\"r\": 3}", "{\"r\": 1}", "{\"r\": 16}"};
    expect_refused("runion", bad, DT_ARRAY_LEN(bad), "2, 4 or 8");
}

Test(layout, runion_should_group_rows_that_share_columns_with_sim)
{
    /* Rows 0 and 2 hold columns 0..2, rows 1 and 3 columns 5..7: consecutive
     * pairs share nothing (12 entries), the similar pairs {0, 2} and {1, 3}
     * everything (6), and each entry names its pair after the positions. */
    static const int lens[] = {3, 3, 3, 3};
    static const int32_t first[] = {0, 5, 0, 5};
    sp_csr *a = rows_of(4, 8, lens, first);
    sp_fmt f;
    build_host(a, "runion", "{\"r\": 2, \"sim\": 0}", SP_FP32, &f);
    cr_assert_eq(var(&f, "nent"), 12);
    sp_fmt_free(&f);
    build_host(a, "runion", "{\"r\": 2, \"sim\": 1}", SP_FP32, &f);
    cr_assert_eq(var(&f, "nent"), 6);
    cr_assert_eq(var(&f, "ues"), 8);
    cr_assert_eq(var(&f, "usim"), 1);
    size_t n;
    const int32_t *en = arr(&f, "un_ent", &n);
    static const int32_t want[] = {
        0, 0, 0, 6,  0, 2, -1, -1, /* group 0 = rows 0 and 2, column 0 */
        1, 0, 1, 7,  0, 2, -1, -1, /* */
        2, 0, 2, 8,  0, 2, -1, -1, /* */
        5, 1, 3, 9,  1, 3, -1, -1, /* group 1 = rows 1 and 3 */
        6, 1, 4, 10, 1, 3, -1, -1, /* */
        7, 1, 5, 11, 1, 3, -1, -1, /* */
    };
    cr_assert_eq(n, DT_ARRAY_LEN(want));
    for (size_t i = 0; i < DT_ARRAY_LEN(want); i++)
        cr_expect_eq(en[i], want[i], "un_ent[%zu] = %d, want %d", i, en[i], want[i]);
    runion_walk_should_match_csr(a, &f);
    sp_fmt_free(&f);
    sp_csr_free(a);
}

/* On the shared matrices sim never gives more entries than consecutive
 * groups (it keeps those when they give fewer), finds n1024-l1's rows that
 * repeat every 64 (a group of 8 identical rows: nnz / 8 entries, against
 * 1.78 nonzeros an entry for consecutive rows) and the nodes of dwt_992
 * and bcsstk10 that straddle consecutive groups. */
Test(layout, runion_sim_should_find_the_rows_that_share_columns_in_real_matrices)
{
    static const struct {
        const char *name;
        int r;
        double gain; /* at least this many times fewer entries with sim */
    } cases[] = {
        {"n1024-l1.mtx", 8, 4.0}, {"n1024-l1.mtx", 2, 1.4}, {"dwt_992.mtx", 4, 1.3},
        {"bcsstk10.mtx", 4, 1.3}, {"bcsstk21.mtx", 8, 1.2}, {"fidapex6.mtx", 4, 1.0},
        {"nnc1374.mtx", 8, 1.0},  {"crack.mtx", 4, 1.2},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        char *path = tu_matrix(cases[i].name);
        dt_err e = {0};
        sp_csr *a = sp_load(path, &(sp_read_opts){0}, &e);
        cr_assert_not_null(a, "%s", e.msg);
        char p0[64], p1[64];
        snprintf(p0, sizeof p0, "{\"r\": %d, \"sim\": 0}", cases[i].r);
        snprintf(p1, sizeof p1, "{\"r\": %d, \"sim\": 1}", cases[i].r);
        sp_fmt f0, f1;
        build_host(a, "runion", p0, SP_FP32, &f0);
        build_host(a, "runion", p1, SP_FP32, &f1);
        const int64_t n0 = var(&f0, "nent"), n1 = var(&f1, "nent");
        cr_expect_geq((double)n0 / (double)n1, cases[i].gain,
                      "%s r %d: %lld entries, %lld with sim", cases[i].name, cases[i].r,
                      (long long)n0, (long long)n1);
        if (strcmp(cases[i].name, "n1024-l1.mtx") == 0 && cases[i].r == 8)
            cr_expect_eq(n1, a->nnz / 8);
        runion_walk_should_match_csr(a, &f1);
        sp_fmt_free(&f0);
        sp_fmt_free(&f1);
        sp_csr_free(a);
        free(path);
    }
}

Test(layout, runion_should_refuse_a_sim_other_than_0_or_1)
{
    static const char *const bad[] = {"{\"r\": 2, \"sim\": 2}", "{\"r\": 4, \"sim\": -1}"};
    expect_refused("runion", bad, DT_ARRAY_LEN(bad), "sim must be 0");
}

/* csr, coo, sell and bsr hold the matrix as sparse/formats.c converts it,
 * in 32-bit offsets and the dtype's values: read back, every nonzero is
 * where the CSR has it. */
Test(layout, csr_sell_bsr_should_hold_every_nonzero_where_the_csr_has_it)
{
    static const int lens[] = {2, 0, 5, 1, 3, 0, 4};
    static const int32_t first[] = {0, 0, 3, 9, 1, 0, 6};
    sp_csr *a = rows_of(7, 12, lens, first);
    sp_fmt f;
    build_host(a, "csr", NULL, SP_FP64, &f);
    size_t n;
    const int32_t *rp = arr(&f, "rowptr", &n);
    cr_assert_eq(n, (size_t)a->rows + 1);
    for (int32_t r = 0; r <= a->rows; r++)
        cr_assert_eq(rp[r], a->rowptr[r], "rowptr[%d]", r);
    const int32_t *col = arr(&f, "col", &n);
    cr_assert_eq(n, (size_t)a->nnz);
    cr_assert_arr_eq(col, a->col, n * 4);
    size_t vb;
    const double *val = sp_fmt_get(&f, "val", &vb);
    cr_assert_eq(vb, (size_t)a->nnz * 8);
    cr_assert_arr_eq(val, a->val, vb);
    sp_fmt_free(&f);

    /* SELL: each slot of a slice's column-major block is its row's entry or padding. */
    build_host(a, "sell", "{\"C\": 4, \"sigma\": 4}", SP_FP32, &f);
    cr_assert_eq(var(&f, "nslices"), 2);
    const int32_t *sp = arr(&f, "sell_ptr", &n), *sl = arr(&f, "sell_len", &n);
    const int32_t *perm = arr(&f, "sell_perm", &n), *sc = arr(&f, "sell_col", &n);
    const float *sv = sp_fmt_get(&f, "sell_val", NULL);
    int64_t seen = 0;
    for (int s = 0; s < 2; s++)
        for (int slot = 0; slot < 4; slot++) {
            const int32_t r = perm[s * 4 + slot];
            if (r < 0)
                continue;
            cr_assert_geq(sl[s], lens[r], "slice %d narrower than row %d", s, r);
            for (int k = 0; k < lens[r]; k++) {
                const int64_t at = sp[s] + (int64_t)k * 4 + slot;
                cr_assert_eq(sc[at], a->col[a->rowptr[r] + k], "row %d entry %d", r, k);
                cr_assert_float_eq(sv[at], (float)a->val[a->rowptr[r] + k], 0.0);
                seen++;
            }
        }
    cr_assert_eq(seen, a->nnz);
    sp_fmt_free(&f);

    /* BSR: a nonzero (r, c) sits at entry (r % b, c % b) of its block. */
    build_host(a, "bsr", "{\"b\": 2}", SP_FP64, &f);
    const int64_t b = var(&f, "b"), nb = var(&f, "nblocks");
    cr_assert_eq(b, 2);
    const int32_t *bp = arr(&f, "bsr_ptr", &n), *bc = arr(&f, "bsr_col", &n);
    cr_assert_eq(n, (size_t)nb);
    const double *bv = sp_fmt_get(&f, "bsr_val", &vb);
    cr_assert_eq(vb, (size_t)(nb * b * b) * 8);
    for (int32_t r = 0; r < a->rows; r++)
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++) {
            const int32_t c = a->col[k];
            int found = 0;
            for (int32_t q = bp[r / 2]; q < bp[r / 2 + 1]; q++)
                if (bc[q] == c / 2) {
                    cr_assert_eq(bv[(size_t)q * 4 + (size_t)(r % 2) * 2 + (size_t)(c % 2)],
                                 a->val[k], "(%d, %d)", r, c);
                    found = 1;
                }
            cr_assert(found, "(%d, %d) in no block", r, c);
        }
    sp_fmt_free(&f);
    sp_csr_free(a);
}

/* Every format, at every dtype: the matrix's sizes as variables, and each
 * value array a whole number of value_bytes elements. */
Test(layout, every_format_should_carry_the_matrix_sizes_and_dtype_width)
{
    static const int lens[] = {3, 0, 2, 7, 1};
    sp_csr *a = rows_of(5, 16, lens, NULL);
    static const char *formats[] = {"csr",   "coo",    "ell",   "sell",  "bsr",   "bins",
                                    "csr16", "sell16", "seg16", "dtile", "runion"};
    static const char *values[] = {"val", "ell_val", "sell_val", "bsr_val", "seg_val"};
    const sp_dtype ts[] = {SP_FP32, SP_FP64, SP_FP16, SP_BF16};
    for (size_t i = 0; i < DT_ARRAY_LEN(formats); i++)
        for (size_t t = 0; t < DT_ARRAY_LEN(ts); t++) {
            sp_fmt f;
            build_host(a, formats[i], NULL, ts[t], &f);
            cr_expect_eq(var(&f, "rows"), 5, "%s", formats[i]);
            cr_expect_eq(var(&f, "cols"), 16, "%s", formats[i]);
            cr_expect_eq(var(&f, "nnz"), 13, "%s", formats[i]);
            cr_expect_eq(var(&f, "max_row"), 7, "%s", formats[i]);
            cr_expect_eq(var(&f, "value_bytes"), sp_dtype_size(ts[t]), "%s", formats[i]);
            cr_expect_gt(f.narr, 0, "%s", formats[i]);
            cr_expect(strstr(f.key, formats[i]) == f.key && strstr(f.key, sp_dtype_name(ts[t])),
                      "%s", f.key);
            for (size_t v = 0; v < DT_ARRAY_LEN(values); v++) {
                size_t bytes;
                if (sp_fmt_get(&f, values[v], &bytes) != NULL)
                    cr_expect_eq(bytes % (size_t)sp_dtype_size(ts[t]), 0, "%s %s", formats[i],
                                 values[v]);
            }
            sp_fmt_free(&f);
            cr_expect_eq(f.narr, 0);
            sp_fmt_free(&f); /* twice: a no-op */
        }
    sp_fmt f;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, "hyb", NULL, SP_FP32, &f, &e), -1);
    cr_expect(strstr(e.msg, "unknown format 'hyb'"), "%s", e.msg);
    cr_expect_eq(f.narr, 0);
    int64_t v;
    build_host(a, "csr", NULL, SP_FP32, &f);
    cr_expect_eq(sp_fmt_var(&f, "nslices", &v), -1, "csr has no slices");
    cr_expect_null(sp_fmt_get(&f, "col16", NULL));
    sp_fmt_free(&f);
    sp_csr_free(a);
}

/* The host conversions round to nearest even as the device's stores do,
 * keep infinities and NaN, and reach fp16's subnormals. */
Test(layout, dtype_conversion_should_round_to_nearest_even_and_keep_specials)
{
    const double half_ulp16 = ldexp(1.0, -11), half_ulpbf = ldexp(1.0, -8);
    cr_expect_eq(sp_round(1.0 + half_ulp16, SP_FP16), 1.0, "a tie goes to the even 1.0");
    cr_expect_eq(sp_round(1.0 + 3 * half_ulp16, SP_FP16), 1.0 + ldexp(1.0, -9),
                 "a tie goes to the even neighbour above");
    cr_expect_eq(sp_round(1.0 + half_ulpbf, SP_BF16), 1.0);
    cr_expect_eq(sp_round(1.0 + 3 * half_ulpbf, SP_BF16), 1.0 + ldexp(1.0, -6));
    cr_expect(isinf(sp_round(65520.0, SP_FP16)), "65520 rounds past fp16's largest, 65504");
    cr_expect_eq(sp_round(65504.0, SP_FP16), 65504.0);
    cr_expect_eq(sp_round(ldexp(1.0, -24), SP_FP16), ldexp(1.0, -24), "the smallest subnormal");
    cr_expect_eq(sp_round(ldexp(1.0, -26), SP_FP16), 0.0);
    cr_expect(isnan(sp_round(NAN, SP_FP16)) && isnan(sp_round(NAN, SP_BF16)));
    cr_expect(signbit(sp_round(-0.0, SP_BF16)), "the sign of zero is kept");
    cr_expect_eq(sp_round(0.1, SP_FP32), (double)0.1f);
    cr_expect_eq(sp_round(0.1, SP_FP64), 0.1);
    uint16_t h[2];
    const double in[2] = {1.0, -2.0};
    sp_to_dtype(in, h, 2, SP_FP16);
    cr_expect_eq(h[0], 0x3c00);
    cr_expect_eq(h[1], 0xc000);
    sp_to_dtype(in, h, 2, SP_BF16);
    cr_expect_eq(h[0], 0x3f80);
    cr_expect_eq(h[1], 0xc000);
    double back[2];
    sp_from_dtype(h, back, 2, SP_BF16);
    cr_expect(back[0] == 1.0 && back[1] == -2.0);
    /* Past the inline size the conversion runs on threads, with the same bits. */
    enum { N = 200000 };
    double *src = malloc(N * sizeof *src), *got = malloc(N * sizeof *got);
    uint16_t *par = malloc(N * sizeof *par);
    cr_assert(src && got && par);
    for (int i = 0; i < N; i++)
        src[i] = (i - N / 2) * 1.0009765625 / 7.0;
    sp_ref_set_threads(4);
    sp_to_dtype(src, par, N, SP_FP16);
    sp_from_dtype(par, got, N, SP_FP16);
    sp_ref_set_threads(0);
    for (int i = 0; i < N; i += 997)
        cr_assert_eq(got[i], sp_round(src[i], SP_FP16), "element %d", i);
    free(src);
    free(got);
    free(par);
}
