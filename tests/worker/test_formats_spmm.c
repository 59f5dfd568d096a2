/* test_formats_spmm.c -- SpMM/SDDMM templates against the formats they name, for any n and k. */
#include "tests/common/testutil.h"

#include "gpu/worker/dev.h"
#include "gpu/worker/worker.h"

#include <stdlib.h>
#include <string.h>

/* The templates of the SpMM / SDDMM half of the library. */
static const char *templates[] = {
    "spmm_csr_warp.cu",  "spmm_csr_warp_col.cu", "spmm_csr_smem.cu",
    "spmm_csr_tiled.cu", "spmm_csr_split.cu",    "spmm_bsr_mma.cu",
    "sddmm_warp.cu",     "sddmm_rowgroup.cu",    "sddmm_nnz.cu",         "spmm_ell.cu",
};

/* Parse a template from kernels/ with its manifest defaults (or params). */
static void load_template(const char *file, const cJSON *params, wk_kernel *kn)
{
    char *path = dt_xasprintf("%s/kernels/%s", tu_src_dir(), file);
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    cJSON *req = cJSON_CreateObject();
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    dt_json_set_str(k, "name", file);
    if (params)
        dt_json_set_take(k, "params", cJSON_Duplicate(params, 1));
    dt_json_set_take(req, "kernel", k);
    cr_assert_eq(wk_kernel_parse(req, kn, &e), 0, "%s: %s", file, e.msg);
    cJSON_Delete(req);
    free(src);
    free(path);
}

static int64_t eval(const char *x, const gpu_vars *v)
{
    int64_t r = -1;
    dt_err e = {0};
    cr_assert_eq(gpu_eval(x, v, &r, &e), 0, "%s: %s", x, e.msg);
    return r;
}

static int64_t param(const wk_kernel *kn, const char *name)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(kn->params, name);
    cr_assert(cJSON_IsNumber(p), "no parameter %s", name);
    return (int64_t)p->valuedouble;
}

Test(formats_spmm, bsr_should_give_the_mma_template_every_variable_its_contract_uses)
{
    const char *name = NULL;
    dt_err e = {0};
    sp_csr *a = wk_edge_matrix(3, &name, &e); /* 1237 x 1031 */
    cr_assert_not_null(a, "%s", e.msg);
    wk_kernel kn;
    load_template("spmm_bsr_mma.cu", NULL, &kn);
    cr_assert_str_eq(kn.contract.format, "bsr");
    dev_fmt f;
    cr_assert_eq(
        dev_fmt_build(a, kn.contract.format, kn.contract.format_params, SP_FP16, 0, &f, &e), 0,
        "%s", e.msg);
    cr_assert_eq(f.on_device, 0);
    int64_t b = -1, brows = -1, nblocks = -1;
    cr_assert_eq(gpu_vars_get(&f.vars, "b", &b), 0);
    cr_assert_eq(gpu_vars_get(&f.vars, "brows", &brows), 0);
    cr_assert_eq(gpu_vars_get(&f.vars, "nblocks", &nblocks), 0);
    cr_assert_eq(b, 16);
    cr_assert_eq(brows, (1237 + 15) / 16);
    cr_assert_gt(nblocks, 0);
    wk_problem p = {.op = SP_SPMM, .dtype = SP_FP16, .n = 100, .alpha = 1};
    gpu_vars v;
    wk_kernel_vars(&kn, &f.vars, &p, &v);
    /* A warp per block row and WN columns: every output row and column. */
    int64_t warps = param(&kn, "WARPS"), wn = param(&kn, "WN");
    cr_assert_eq(eval(kn.contract.block[0], &v), 32 * warps);
    cr_assert_geq(eval(kn.contract.grid[0], &v) * warps * 16, 1237);
    cr_assert_geq(eval(kn.contract.grid[1], &v) * wn, 100);
    /* The block size is baked in from the format, so the two agree. */
    const cJSON *bs = cJSON_GetObjectItemCaseSensitive(kn.contract.defines, "BS");
    cr_assert(cJSON_IsString(bs));
    cr_assert_eq(eval(bs->valuestring, &v), 16);
    dev_fmt_free(&f);
    wk_kernel_clear(&kn);
    sp_csr_free(a);
}

/* csr-split: the grid is the short-row blocks then one block per CHUNK of the
 * long rows' nonzeros, exactly as the kernel counts them from blockIdx, and
 * scratch holds the kernel's layout: a counter per (long row, column tile)
 * rounded up to 16 bytes, then head and tail, n values of up to 8 bytes per
 * piece each. */
Test(formats_spmm, split_should_size_its_grid_and_scratch_as_the_kernel_lays_them_out)
{
    static const char *sets[] = {"{}", "{\"SORTED\": 1}", "{\"CHUNK\": 32, \"TN\": 32}",
                                 "{\"ROWS_PER_WARP\": 8, \"WARPS\": 1, \"CHUNK\": 2048}"};
    for (int i = 0; i < WK_NEDGE; i++) {
        const char *name = NULL;
        dt_err e = {0};
        sp_csr *a = wk_edge_matrix(i, &name, &e);
        cr_assert_not_null(a, "%s", e.msg);
        for (size_t s = 0; s < DT_ARRAY_LEN(sets); s++) {
            cJSON *over = cJSON_Parse(sets[s]);
            wk_kernel base;
            load_template("spmm_csr_split.cu", NULL, &base);
            cJSON *params = cJSON_Duplicate(base.params, 1);
            wk_kernel_clear(&base);
            const cJSON *o;
            cJSON_ArrayForEach(o, over) dt_json_set_num(params, o->string, o->valuedouble);
            cJSON_Delete(over);
            wk_kernel kn;
            load_template("spmm_csr_split.cu", params, &kn);
            cJSON_Delete(params);
            const gpu_contract *c = &kn.contract;
            cr_assert_str_eq(c->format, "bins");
            dev_fmt f;
            cr_assert_eq(dev_fmt_build(a, c->format, c->format_params, SP_FP64, 0, &f, &e), 0, "%s",
                         e.msg);
            int64_t bin6 = -1, long_nnz = -1, long_row = -1;
            cr_assert_eq(gpu_vars_get(&f.vars, "bin6", &bin6), 0);
            cr_assert_eq(gpu_vars_get(&f.vars, "long_nnz", &long_nnz), 0);
            cr_assert_eq(gpu_vars_get(&f.vars, "long_row", &long_row), 0);
            if (i == 1)
                cr_assert(bin6 == 1 && long_nnz == 5000, "the 5000-entry row is the long bin");
            int64_t warps = param(&kn, "WARPS"), rpw = param(&kn, "ROWS_PER_WARP");
            int64_t chunk = param(&kn, "CHUNK"), tn = param(&kn, "TN");
            int64_t sorted = param(&kn, "SORTED");
            for (int n = 1; n <= 512; n += 73) {
                wk_problem p = {.op = SP_SPMM, .dtype = SP_FP64, .n = n, .alpha = 1};
                gpu_vars v;
                wk_kernel_vars(&kn, &f.vars, &p, &v);
                int64_t count = a->rows - sorted * bin6, per = warps * rpw;
                int64_t pieces = (long_nnz + chunk - 1) / chunk, tiles = (n + tn - 1) / tn;
                cr_assert_eq(eval(c->grid[0], &v), (count + per - 1) / per + pieces, "%s %s n %d",
                             name, sets[s], n);
                cr_assert_eq(eval(c->grid[1], &v), tiles);
                int64_t need = (bin6 * tiles + 3) / 4 * 16 + 2 * pieces * n * 8;
                int64_t have = c->scratch_bytes ? eval(c->scratch_bytes, &v) : 0;
                cr_assert_geq(have, need, "%s %s n %d", name, sets[s], n);
                cr_assert(bin6 > 0 || have == 0, "no long rows, no scratch (no memset)");
            }
            dev_fmt_free(&f);
            wk_kernel_clear(&kn);
        }
        sp_csr_free(a);
    }
}

Test(formats_spmm, every_template_should_launch_enough_threads_for_every_output)
{
    for (int i = 0; i < WK_NEDGE; i++) {
        const char *name = NULL;
        dt_err e = {0};
        sp_csr *a = wk_edge_matrix(i, &name, &e);
        cr_assert_not_null(a, "%s", e.msg);
        for (size_t t = 0; t < DT_ARRAY_LEN(templates); t++) {
            wk_kernel kn;
            load_template(templates[t], NULL, &kn);
            const gpu_contract *c = &kn.contract;
            sp_dtype dt = strcmp(c->format, "bsr") == 0 ? SP_FP16 : SP_FP32;
            dev_fmt f;
            cr_assert_eq(dev_fmt_build(a, c->format, c->format_params, dt, 0, &f, &e), 0,
                         "%s on %s: %s", templates[t], name, e.msg);
            for (int n = 1; n <= 200; n += 33) {
                wk_problem p = {.op = c->op, .dtype = dt, .n = n, .alpha = 1};
                gpu_vars v;
                wk_kernel_vars(&kn, &f.vars, &p, &v);
                int64_t threads = 1, blocks = 1;
                for (int d = 0; d < 3; d++) {
                    int64_t bl = eval(c->block[d], &v), g = eval(c->grid[d], &v);
                    cr_assert(bl >= 1 && g >= 1, "%s on %s, n %d: empty launch dimension %d",
                              templates[t], name, n, d);
                    threads *= bl;
                    blocks *= g;
                }
                cr_assert_leq(threads, 1024, "%s: block of %lld threads", templates[t],
                              (long long)threads);
                cr_assert_eq(threads % 32, 0, "%s: partial warps", templates[t]);
                /* Every template gives each row (block row) at most one warp
                 * per grid.y tile, so the warps launched must reach every
                 * row. */
                int64_t units = strcmp(c->format, "bsr") == 0 ? (a->rows + 15) / 16 : a->rows;
                int64_t per_warp = 1;
                if (cJSON_GetObjectItemCaseSensitive(kn.params, "ROWS_PER_WARP"))
                    per_warp = param(&kn, "ROWS_PER_WARP");
                else if (cJSON_GetObjectItemCaseSensitive(kn.params, "RW"))
                    per_warp = param(&kn, "RW");
                else if (cJSON_GetObjectItemCaseSensitive(kn.params, "RG"))
                    per_warp = param(&kn, "RG");
                int64_t warps_x = eval(c->grid[0], &v) * (threads / 32);
                if (c->op == SP_SDDMM && cJSON_GetObjectItemCaseSensitive(kn.params, "CHUNK"))
                    /* Split by nonzeros: the warps' chunks must reach the last one. */
                    cr_assert_geq(warps_x * param(&kn, "CHUNK"), a->nnz, "%s on %s", templates[t],
                                  name);
                else if (cJSON_GetObjectItemCaseSensitive(kn.params, "RPB"))
                    cr_assert_geq(eval(c->grid[0], &v) * param(&kn, "RPB"), units);
                else
                    cr_assert_geq(warps_x * per_warp, units, "%s on %s: %lld warps for %lld rows",
                                  templates[t], name, (long long)warps_x, (long long)units);
            }
            dev_fmt_free(&f);
            wk_kernel_clear(&kn);
        }
        sp_csr_free(a);
    }
}

Test(formats_spmm, templates_should_compile_for_n_and_k_that_no_vector_divides, .timeout = 900)
{
    wk_state w;
    TU_NVRTC_OR_SKIP(w);
    dt_err e = {0};
    const char *name = NULL;
    sp_csr *a = wk_edge_matrix(3, &name, &e);
    cr_assert_not_null(a, "%s", e.msg);
    dt_buf fails = DT_BUF_INIT;
    const int ns[] = {1, 6, 33, 100, 160};
    for (size_t t = 0; t < DT_ARRAY_LEN(templates); t++) {
        wk_kernel kn;
        load_template(templates[t], NULL, &kn);
        const gpu_contract *c = &kn.contract;
        sp_dtype dt = strcmp(c->format, "bsr") == 0 ? SP_FP16 : SP_FP32;
        dev_fmt f;
        cr_assert_eq(dev_fmt_build(a, c->format, c->format_params, dt, 0, &f, &e), 0, "%s", e.msg);
        for (size_t i = 0; i < DT_ARRAY_LEN(ns); i++) {
            wk_problem p = {.op = c->op, .dtype = dt, .n = ns[i], .alpha = 1};
            gpu_cubin *cb = NULL;
            w.arch = "sm_90";
            if (wk_compile_for(&w, &f.vars, &kn, &p, &cb, &e) != 0)
                dt_buf_printf(&fails, "%s n=%d: %s\n", templates[t], ns[i], e.msg);
            else if (!cb->compiled)
                dt_buf_printf(&fails, "%s n=%d: does not compile:\n%s\n", templates[t], ns[i],
                              cb->log);
            gpu_cubin_free(cb);
        }
        dev_fmt_free(&f);
        wk_kernel_clear(&kn);
    }
    cr_assert_eq(fails.len, 0, "%s", dt_buf_str(&fails));
    dt_buf_free(&fails);
    sp_csr_free(a);
    gpu_nvrtc_free(w.nvrtc);
}

/* A request that names some of a template's parameters gets the manifest's
 * default for the others: sell16-dict's grid reads RPT, which a request
 * written before RPT existed does not name (session 21's GPU suite failed
 * on exactly that). Named values stay as named. */
Test(formats_spmm, a_partial_request_should_get_the_manifest_defaults_for_the_rest)
{
    cJSON *p = cJSON_Parse("{\"BLOCK\": 128, \"VEC\": 2}");
    wk_kernel kn;
    load_template("spmv_sell16_dict.cu", p, &kn);
    cr_expect_eq(param(&kn, "BLOCK"), 128);
    cr_expect_eq(param(&kn, "VEC"), 2);
    cr_expect_eq(param(&kn, "RPT"), 1);
    cr_expect_eq(param(&kn, "UNROLL"), 8);
    cr_expect_eq(param(&kn, "SIGMA"), 1);
    cr_expect_eq(cJSON_GetArraySize(kn.params), 5);
    wk_kernel_clear(&kn);
    cJSON_Delete(p);
}
