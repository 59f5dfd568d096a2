/* test_kernels.c -- every template in kernels/ compiles for sm_80 and sm_90,
 * for every dtype its manifest names and at the corners of its parameter
 * space (defaults, then each parameter at its smallest and largest legal
 * value), exactly as the worker compiles it. */
#include "tests/common/testutil.h"

#include "gpu/worker/worker.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static gpu_vars matrix_vars(void)
{
    /* A plausible matrix for formulas and defines: every variable a format
     * can define. */
    gpu_vars v = {.n = 0};
    const char *names[] = {"rows",    "cols",  "nnz",   "max_row", "sms",   "width",
                           "nslices", "C",     "sigma", "brows",   "bcols", "nblocks",
                           "b",       "nbins", "nvals", "nlong"};
    int64_t vals[] = {1000, 1200, 16000, 40, 132, 40, 32, 32, 256, 250, 300, 2000, 4, 4, 200, 20};
    for (size_t i = 0; i < DT_ARRAY_LEN(names); i++)
        gpu_vars_set(&v, names[i], vals[i]);
    return v;
}

static int compile_one(wk_state *w, const char *path, const char *src, const cJSON *params,
                       sp_dtype t, const char *arch, dt_buf *fails)
{
    cJSON *req = cJSON_CreateObject();
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    dt_json_set_str(k, "name", path);
    dt_json_set_take(k, "params", cJSON_Duplicate(params, 1));
    dt_json_set_take(req, "kernel", k);
    wk_kernel kn;
    dt_err e = {0};
    cr_assert_eq(wk_kernel_parse(req, &kn, &e), 0, "%s: %s", path, e.msg);
    cJSON_Delete(req);
    wk_problem p = {.op = kn.contract.op, .dtype = t, .n = 32, .alpha = 1, .beta = 0};
    gpu_vars v = matrix_vars();
    gpu_cubin *c = NULL;
    w->arch = arch;
    int rc = wk_compile_for(w, &v, &kn, &p, &c, &e);
    char *ps = cJSON_PrintUnformatted(params);
    if (rc != 0) {
        dt_buf_printf(fails, "%s %s %s %s: %s\n", path, arch, sp_dtype_name(t), ps, e.msg);
    } else if (!c->compiled) {
        dt_buf_printf(fails, "%s %s %s %s: does not compile:\n%s\n", path, arch, sp_dtype_name(t),
                      ps, c->log);
    }
    free(ps);
    gpu_cubin_free(c);
    wk_kernel_clear(&kn);
    return rc == 0;
}

Test(kernels, every_template_should_compile_across_its_manifest_corners, .timeout = 900)
{
    wk_state w;
    TU_NVRTC_OR_SKIP(w);
    dt_err e = {0};
    char *dir = dt_xasprintf("%s/kernels", tu_src_dir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "no kernels/ folder at %s", dir);
    struct dirent *de;
    int templates = 0, compiles = 0;
    dt_buf fails = DT_BUF_INIT;
    while ((de = readdir(d)) != NULL) {
        if (!dt_endswith(de->d_name, ".cu"))
            continue;
        char *path = dt_xasprintf("%s/%s", dir, de->d_name);
        char *src = dt_read_file(path, NULL, &e);
        cr_assert_not_null(src, "%s", e.msg);
        gpu_manifest m;
        cr_assert_eq(gpu_manifest_from_source(src, &m, &e), 0, "%s: %s", de->d_name, e.msg);
        templates++;
        /* Corners: the defaults, then each parameter at its extremes. */
        cJSON *corners = cJSON_CreateArray();
        cJSON_AddItemToArray(corners, gpu_manifest_defaults(&m));
        for (int i = 0; i < m.nparams; i++) {
            int64_t lo = m.params[i].values[0], hi = lo;
            for (int k = 0; k < m.params[i].nvalues; k++) {
                lo = m.params[i].values[k] < lo ? m.params[i].values[k] : lo;
                hi = m.params[i].values[k] > hi ? m.params[i].values[k] : hi;
            }
            int64_t ends[2] = {lo, hi};
            for (int x = 0; x < 2; x++) {
                cJSON *c = gpu_manifest_defaults(&m);
                dt_json_set_int(c, m.params[i].name, ends[x]);
                gpu_vars v = matrix_vars();
                dt_err ce = {0};
                if (gpu_manifest_check(&m, c, &v, &ce) == 0)
                    cJSON_AddItemToArray(corners, c);
                else
                    cJSON_Delete(c); /* an illegal corner is not a template bug */
            }
        }
        const char *archs[] = {"sm_80", "sm_90"};
        for (int t = 0; t < 4; t++) {
            if (!(m.dtypes & (1u << t)))
                continue;
            const cJSON *c;
            cJSON_ArrayForEach(c, corners)
            {
                for (int a = 0; a < 2; a++) {
                    /* The full corner set on sm_90; defaults only on sm_80. */
                    if (a == 0 && c != corners->child)
                        continue;
                    compile_one(&w, de->d_name, src, c, (sp_dtype)t, archs[a], &fails);
                    compiles++;
                }
            }
        }
        cJSON_Delete(corners);
        gpu_manifest_clear(&m);
        free(src);
        free(path);
    }
    closedir(d);
    free(dir);
    cr_log_info("%d templates, %d compiles", templates, compiles);
    cr_assert_gt(templates, 0, "no templates found");
    cr_assert_eq(fails.len, 0, "%s", dt_buf_str(&fails));
    dt_buf_free(&fails);
    gpu_nvrtc_free(w.nvrtc);
}

/* The image of one template at params (a JSON object) for an SpMM problem
 * of n columns in fp32, as the worker compiles it for sm_90; caller frees. */
static gpu_cubin *image_of(wk_state *w, const char *file, const char *params, int n)
{
    char *path = dt_xasprintf("%s/kernels/%s", tu_src_dir(), file);
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    cJSON *req = cJSON_CreateObject();
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    dt_json_set_str(k, "name", file);
    dt_json_set_take(k, "params", cJSON_Parse(params));
    dt_json_set_take(req, "kernel", k);
    wk_kernel kn;
    cr_assert_eq(wk_kernel_parse(req, &kn, &e), 0, "%s: %s", file, e.msg);
    cJSON_Delete(req);
    wk_problem p = {.op = kn.contract.op, .dtype = SP_FP32, .n = n, .alpha = 1, .beta = 0};
    gpu_vars v = matrix_vars();
    gpu_cubin *c = NULL;
    w->arch = "sm_90";
    cr_assert_eq(wk_compile_for(w, &v, &kn, &p, &c, &e), 0, "%s %s: %s", file, params, e.msg);
    cr_assert(c->compiled, "%s %s does not compile:\n%s", file, params, c->log);
    wk_kernel_clear(&kn);
    free(src);
    free(path);
    return c;
}

static int same_image(const gpu_cubin *a, const gpu_cubin *b)
{
    return a->size == b->size && memcmp(a->image, b->image, a->size) == 0;
}

/* The tuner folds variants whose CUBIN and launch are the same (worker
 * compile replies carry a kernel_key). That rests on NVRTC giving
 * byte-identical images for parameter values the template clamps away:
 * ell-baked-spmm at N=32 uses min(TN, N) columns a tile, and fp32 vectors
 * of at most 4 elements (16 bytes), so TN 64 and 128, and VEC 4 and 8, are
 * one kernel; at N=128 TN 32 and 64 are not. */
Test(kernels, parameter_values_a_template_clamps_away_should_give_the_same_image)
{
    wk_state w;
    TU_NVRTC_OR_SKIP(w);
    /* ell-baked-spmm at (TN, VEC, n): TN 128 at N=32 first, the image the
     * others are compared with. */
    static const struct {
        int tn, vec, n, same;
        const char *what;
    } cases[] = {{64, 8, 32, 1, "TN 64 at N=32 (one 32-column tile)"},
                 {128, 4, 32, 1, "VEC 4 in fp32 (VEC 8 is 4 elements too)"},
                 {32, 8, 128, 0, "TN 32 at N=128"},
                 {64, 8, 128, 0, "TN 64 at N=128"}};
    char params[160];
#define ELL_PARAMS                                                                                 \
    "{\"WARPS\":4,\"VEC\":%d,\"LANES\":32,\"ROWS_PER_WARP\":1,\"UNROLL\":4,\"TN\":%d}"
    snprintf(params, sizeof params, ELL_PARAMS, 8, 128);
    gpu_cubin *ref = image_of(&w, "spmm_ell.cu", params, 32), *prev = NULL;
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        snprintf(params, sizeof params, ELL_PARAMS, cases[i].vec, cases[i].tn);
        gpu_cubin *c = image_of(&w, "spmm_ell.cu", params, cases[i].n);
        cr_expect_eq(same_image(ref, c), cases[i].same, "%s: %s the image of TN 128 at N=32",
                     cases[i].what, cases[i].same ? "differs from" : "is");
        /* The two N=128 tile widths differ from each other too. */
        if (prev && i == DT_ARRAY_LEN(cases) - 1)
            cr_expect(!same_image(prev, c), "TN 32 and TN 64 at N=128 gave the same image");
        gpu_cubin_free(prev);
        prev = c;
    }
#undef ELL_PARAMS
    gpu_cubin_free(prev);
    gpu_cubin_free(ref);
    gpu_nvrtc_free(w.nvrtc);
}
