/* test_formats_dev.c -- the worker's side of device formats: a layout
 * (sparse/layout.c) for every template's contract on every edge matrix of
 * the battery, format parameters and preconditions evaluated over a
 * kernel's parameters, the hashes of the unchanged-inputs check, and the
 * error codes dev_fmt_build gives the protocol. No device needed. */
#include "tests/common/testutil.h"

#include "gpu/contract.h"
#include "gpu/worker/dev.h"
#include "gpu/worker/worker.h"

#include <dirent.h>
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

static void build_host(const sp_csr *a, const char *format, const char *params_json, sp_dtype t,
                       sp_fmt *f)
{
    cJSON *p = params_json ? params_of(params_json) : NULL;
    dt_err e = {0};
    cr_assert_eq(sp_fmt_build(a, format, p, t, f, &e), 0, "%s %s: %s", format,
                 params_json ? params_json : "{}", e.msg);
    cJSON_Delete(p);
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

/* Without uploading, dev_fmt_build keeps the layout's variables and adds
 * sms; a refusal by the layout is the protocol's contract error, as is an
 * unknown format. */
Test(formats_dev, fmt_build_should_keep_the_layouts_variables_and_code_refusals_as_contract_errors)
{
    static const int lens[] = {3, 0, 5};
    sp_csr *a = rows_of(3, 10, lens, NULL);
    dev_fmt f;
    dt_err e = {0};
    cJSON *p = params_of("{\"C\": 2, \"sigma\": 2}");
    cr_assert_eq(dev_fmt_build(a, "sell16", p, SP_FP32, 0, &f, &e), 0, "%s", e.msg);
    int64_t v = -1;
    cr_expect(gpu_vars_get(&f.vars, "nslices", &v) == 0 && v == 2, "nslices %lld", (long long)v);
    cr_expect(gpu_vars_get(&f.vars, "max_row", &v) == 0 && v == 5, "max_row %lld", (long long)v);
    cr_expect(gpu_vars_get(&f.vars, "value_bytes", &v) == 0 && v == 4);
    cr_expect_eq(gpu_vars_get(&f.vars, "sms", &v), 0, "sms is always a variable");
    cr_expect_eq(f.narr, 0, "nothing uploaded");
    cr_expect_str_eq(f.key, "sell16{\"C\":2,\"sigma\":2}/fp32");
    dev_fmt_free(&f);
    cJSON_Delete(p);
    p = params_of("{\"vec\": 3}");
    cr_assert_eq(dev_fmt_build(a, "sell16", p, SP_FP32, 0, &f, &e), -1);
    cr_expect_eq(e.code, DEV_ECONTRACT, "%s", e.msg);
    cJSON_Delete(p);
    dt_err_clear(&e);
    cr_assert_eq(dev_fmt_build(a, "nosuch", NULL, SP_FP32, 0, &f, &e), -1);
    cr_expect_eq(e.code, DEV_ECONTRACT, "%s", e.msg);
    cr_expect(strstr(e.msg, "unknown format 'nosuch'"), "%s", e.msg);
    sp_csr_free(a);
}

/* A contract's requires.max_values: the matrix's distinct nonzero values
 * against a value dictionary's size, with the reason when it is refused. */
Test(formats_dev, max_values_should_refuse_a_matrix_of_more_values)
{
    static const int lens[] = {2, 2};
    sp_csr *a = rows_of(2, 4, lens, NULL); /* values 1, 1.5, 2, 2.5 */
    gpu_contract c = {0};
    c.requires = params_of("{\"max_values\": 4}");
    cr_assert_null(wk_requires_violated(&c, NULL, a));
    cJSON_Delete(c.requires);
    c.requires = params_of("{\"max_values\": 3}");
    const char *why = wk_requires_violated(&c, NULL, a);
    cr_assert_not_null(why);
    cr_assert_str_eq(why, "requires at most 3 distinct nonzero values; has more");
    cJSON_Delete(c.requires);
    sp_csr_free(a);
}

Test(formats_dev, new_array_names_should_be_in_the_parameter_vocabulary)
{
    const char *names[] = {"bin_rows", "bin_ptr",   "bin_long_ptr", "bin6",       "long_nnz",
                           "long_row", "col16",     "slice_base",   "slice_span", "slice_shift",
                           "coo_row",  "sell_vidx", "vtab"};
    for (size_t i = 0; i < DT_ARRAY_LEN(names); i++)
        cr_assert(gpu_param_known(names[i]), "%s", names[i]);
}

/* Every template in kernels/ gets its format, with its contract's format
 * parameters, on every edge matrix of the verification battery: the worker
 * builds exactly this before it runs a kernel there. */
Test(formats_dev, every_template_format_should_build_on_every_edge_matrix)
{
    char *dir = dt_xasprintf("%s/kernels", tu_src_dir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "no kernels/ folder at %s", dir);
    char *names[64];
    size_t nnames = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && nnames < DT_ARRAY_LEN(names))
        if (dt_endswith(de->d_name, ".cu"))
            names[nnames++] = dt_xstrdup(de->d_name);
    closedir(d);
    free(dir);
    cr_assert_gt(nnames, 20, "only %zu templates found", nnames);
    for (size_t t = 0; t < nnames; t++) {
        char *path = dt_xasprintf("%s/kernels/%s", tu_src_dir(), names[t]);
        dt_err e = {0};
        char *src = dt_read_file(path, NULL, &e);
        cr_assert_not_null(src, "%s", e.msg);
        wk_kernel k = {0};
        cr_assert_eq(gpu_contract_from_source(src, &k.contract, &e), 0, "%s: %s", names[t], e.msg);
        gpu_manifest m;
        cr_assert_eq(gpu_manifest_from_source(src, &m, &e), 0, "%s: %s", names[t], e.msg);
        k.params = gpu_manifest_defaults(&m);
        /* The format parameters as the worker resolves them: expressions
         * over the template's parameters at their defaults. */
        cJSON *fp = wk_format_params(&k, &e);
        cr_assert(fp != NULL || k.contract.format_params == NULL, "%s: %s", names[t], e.msg);
        const gpu_contract c = k.contract;
        for (int i = 0; i < WK_NEDGE; i++) {
            const char *mname = NULL;
            sp_csr *a = wk_edge_matrix(i, &mname, &e);
            cr_assert_not_null(a, "%s", e.msg);
            if (wk_requires_violated(&c, k.params, a) != NULL) { /* the battery skips it too */
                sp_csr_free(a);
                continue;
            }
            sp_fmt f;
            int rc = sp_fmt_build(a, c.format, fp, SP_FP32, &f, &e);
            cr_expect_eq(rc, 0, "%s (format %s) on edge matrix '%s': %s", names[t], c.format, mname,
                         e.msg);
            if (rc == 0)
                sp_fmt_free(&f);
            sp_csr_free(a);
        }
        cJSON_Delete(fp);
        cJSON_Delete(k.params);
        gpu_manifest_clear(&m);
        gpu_contract_clear(&k.contract);
        free(src);
        free(path);
        free(names[t]);
    }
}

/* A contract's format parameter may name the template's parameters: the
 * tuner then picks the format (here SELL's sorting window) as it picks a
 * block size, and the worker builds the format that variant asked for. */
Test(formats_dev, format_params_should_evaluate_over_the_kernel_parameters)
{
    wk_kernel k = {0};
    k.contract.format_params = cJSON_Parse("{\"C\": 32, \"sigma\": \"SIGMA\", \"w\": \"2 * B\"}");
    k.params = cJSON_Parse("{\"SIGMA\": 256, \"B\": 64}");
    dt_err e = {0};
    cJSON *fp = wk_format_params(&k, &e);
    cr_assert_not_null(fp, "%s", e.msg);
    cr_expect_eq(dt_json_num(fp, "C", -1), 32);
    cr_expect_eq(dt_json_num(fp, "sigma", -1), 256);
    cr_expect_eq(dt_json_num(fp, "w", -1), 128);
    cr_expect_eq(cJSON_GetArraySize(fp), 3);
    /* The built format is the one asked for: rows sorted within 256. */
    int lens[300];
    for (int i = 0; i < 300; i++)
        lens[i] = 1 + i % 7;
    sp_csr *a = rows_of(300, 64, lens, NULL);
    sp_fmt f;
    cr_assert_eq(sp_fmt_build(a, "sell16", fp, SP_FP32, &f, &e), 0, "%s", e.msg);
    cr_expect_eq(var(&f, "sigma"), 256);
    sp_fmt_free(&f);
    sp_csr_free(a);
    cJSON_Delete(fp);

    /* An unknown name is an error that names the parameter. */
    cJSON_Delete(k.params);
    k.params = cJSON_Parse("{\"B\": 64}");
    fp = wk_format_params(&k, &e);
    cr_expect_null(fp);
    cr_expect_eq(e.code, WK_ECONTRACT);
    cr_expect(strstr(e.msg, "format_params.sigma") != NULL, "%s", e.msg);
    cr_expect(strstr(e.msg, "SIGMA") != NULL, "%s", e.msg);
    cJSON_Delete(k.params);
    cJSON_Delete(k.contract.format_params);
}

/* sell16 with order 1 builds on every edge matrix of the battery (empty,
 * one row, not square, empty rows, a dense row, ...), each row in exactly
 * one slot and the slots past the last row -1. */
Test(formats_dev, sell16_order_should_build_on_every_edge_matrix)
{
    cJSON *p = params_of("{\"C\": 32, \"sigma\": 64, \"order\": 1, \"long\": 16}");
    for (int i = 0; i < WK_NEDGE; i++) {
        const char *mname = NULL;
        dt_err e = {0};
        sp_csr *a = wk_edge_matrix(i, &mname, &e);
        cr_assert_not_null(a, "%s", e.msg);
        sp_fmt f;
        cr_assert_eq(sp_fmt_build(a, "sell16", p, SP_FP32, &f, &e), 0, "%s: %s", mname, e.msg);
        size_t np;
        const int32_t *perm = arr(&f, "sell_perm", &np);
        unsigned char *seen = calloc((size_t)a->rows + 1, 1);
        size_t placed = 0;
        for (size_t q = 0; q < np; q++) {
            const int32_t r = perm[q];
            cr_assert(r >= -1 && r < a->rows, "%s: slot %zu holds %d", mname, q, r);
            if (r < 0)
                continue;
            cr_assert(!seen[r], "%s: row %d in two slots", mname, r);
            seen[r] = 1;
            placed++;
        }
        size_t longer = 0;
        for (int32_t r = 0; r < a->rows; r++)
            longer += a->rowptr[r + 1] - a->rowptr[r] > 16;
        cr_assert_eq(placed + longer, (size_t)a->rows, "%s: %zu rows placed, %zu long, of %d",
                     mname, placed, longer, a->rows);
        free(seen);
        sp_fmt_free(&f);
        sp_csr_free(a);
    }
    cJSON_Delete(p);
}

/* The hash of array i of layout f, as dev_fmt keeps it. */
#define H(f, i) dev_hash((f).data[i], (f).bytes[i])

/* The format's hashes (the unchanged-inputs check) over arrays past one
 * 1 MiB chunk, hashed in parallel: the same on four threads as on one, and
 * a change to one value late in the matrix changes sell_val's hash and no
 * other. The perm and the slices built on four threads match
 * sp_sell_perm_cap's window order on one, slice by slice. */
Test(formats_dev, sell16_hashes_should_be_stable_and_see_one_changed_value)
{
    enum { ROWS = 60000 };
    int *lens;
    int32_t *first;
    sp_csr *a = striped(ROWS, 7, 9, 50000, &lens, &first);
    const char *pj = "{\"C\": 32, \"sigma\": 256, \"vec\": 2}";
    sp_fmt f1, f2, f3;
    sp_ref_set_threads(4);
    build_host(a, "sell16", pj, SP_FP32, &f1);
    sp_ref_set_threads(1);
    build_host(a, "sell16", pj, SP_FP32, &f2);
    size_t nv;
    sp_fmt_get(&f1, "sell_val", &nv);
    cr_assert_gt(nv, (size_t)1 << 20,
                 "sell_val is %zu bytes: one chunk, the test checks too little", nv);
    cr_assert_eq(f1.narr, f2.narr);
    for (int i = 0; i < f1.narr; i++)
        cr_assert_eq(H(f1, i), H(f2, i), "%s: two builds, two hashes", f1.name[i]);
    a->val[a->nnz - 1] += 1.0;
    sp_ref_set_threads(4);
    build_host(a, "sell16", pj, SP_FP32, &f3);
    sp_ref_set_threads(1);
    for (int i = 0; i < f1.narr; i++) {
        if (strcmp(f1.name[i], "sell_val") == 0)
            cr_assert_neq(H(f1, i), H(f3, i), "sell_val: a changed value, the same hash");
        else
            cr_assert_eq(H(f1, i), H(f3, i), "%s: changed by a value", f1.name[i]);
    }
    dt_err e = {0};
    int32_t *want = sp_sell_perm_cap(a, 32, 256, 0, &e);
    cr_assert_not_null(want, "%s", e.msg);
    size_t np, n;
    const int32_t *perm = arr(&f1, "sell_perm", &np);
    cr_assert_arr_eq(perm, want, np * sizeof *perm);
    const int32_t *len = arr(&f1, "sell_len", &n);
    const int32_t *base = arr(&f1, "slice_base", &n);
    for (size_t s = 0; s < n; s++) {
        int w = 0, lo = INT32_MAX;
        for (int q = 0; q < 32; q++) {
            const int32_t r = want[s * 32 + (size_t)q];
            if (r < 0)
                continue;
            w = lens[r] > w ? lens[r] : w;
            lo = first[r] < lo ? first[r] : lo;
        }
        cr_assert_eq(len[s], (w + 1) / 2 * 2, "slice %zu width", s);
        cr_assert_eq(base[s], lo, "slice %zu base", s);
    }
    sp_ref_set_threads(0);
    free(want);
    sp_fmt_free(&f1);
    sp_fmt_free(&f2);
    sp_fmt_free(&f3);
    sp_csr_free(a);
    free(lens);
    free(first);
}

/* requires.max_row may be an expression over the kernel's parameters:
 * seg16 takes rows of up to BLOCK * U * 8 entries. */
Test(formats_dev, requires_should_evaluate_expressions_over_the_kernel_parameters)
{
    gpu_contract c = {0};
    c.requires = cJSON_Parse("{\"max_row\": \"BLOCK * U * 8\"}");
    static const int lens[] = {3, 1500};
    sp_csr *a = rows_of(2, 2000, lens, NULL);
    cJSON *small = params_of("{\"BLOCK\": 128, \"U\": 1}"),
          *big = params_of("{\"BLOCK\": 256, \"U\": 1}");
    const char *why = wk_requires_violated(&c, small, a);
    cr_assert_not_null(why);
    cr_expect(strstr(why, "at most 1024 entries; longest is 1500"), "%s", why);
    cr_expect_null(wk_requires_violated(&c, big, a));
    cr_expect_eq(gpu_requires_num(&c, big, "max_row", -1), 2048);
    cr_expect_eq(gpu_requires_num(&c, NULL, "max_row", -1), -1, "unevaluable: no precondition");
    cJSON_Delete(small);
    cJSON_Delete(big);
    cJSON_Delete(c.requires);
    sp_csr_free(a);
}
