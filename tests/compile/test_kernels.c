/* test_kernels.c -- every template in kernels/ compiles for sm_80 and sm_90,
 * for every dtype its manifest names and at the corners of its parameter
 * space (defaults, then each parameter at its smallest and largest legal
 * value), exactly as the worker compiles it. */
#include "tests/common/testutil.h"

#include "gpu/worker.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static gpu_vars matrix_vars(void)
{
    /* A plausible matrix for formulas and defines: every variable a format
     * can define. */
    gpu_vars v = {.n = 0};
    const char *names[] = {"rows", "cols", "nnz", "max_row", "sms", "width", "nslices", "C",
                           "sigma", "brows", "bcols", "nblocks", "b", "nbins"};
    int64_t vals[] = {1000, 1200, 16000, 40, 132, 40, 32, 32, 256, 250, 300, 2000, 4, 4};
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
    memset(&w, 0, sizeof w);
    dt_err e = {0};
    if (wk_nvrtc(&w, &e) == NULL)
        cr_skip_test("NVRTC is not available here: %s", e.msg);
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
