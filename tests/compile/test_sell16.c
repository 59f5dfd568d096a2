/* test_sell16.c -- sell16-thread's vector walk compiles without spills at
 * every VEC and UNROLL its manifest allows, and the manifest refuses the
 * batch that would spill (the corner sweep of test_kernels.c never reaches
 * VEC > 1: VEC 8 at the default UNROLL 8 is outside the constraints); at
 * SIGMA 1 sell16 and sell16-dict take rows from slots, not sell_perm. */
#include "tests/common/testutil.h"

#include "gpu/worker/worker.h"

#include <stdlib.h>
#include <string.h>

static char *sell16_source(void)
{
    char *path = dt_xasprintf("%s/kernels/spmv_sell16.cu", tu_src_dir());
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    free(path);
    return src;
}

static cJSON *params(int block, int unroll, int sigma, int vec)
{
    cJSON *p = cJSON_CreateObject();
    dt_json_set_int(p, "BLOCK", block);
    dt_json_set_int(p, "UNROLL", unroll);
    dt_json_set_int(p, "SIGMA", sigma);
    dt_json_set_int(p, "VEC", vec);
    return p;
}

/* Compiles src (named name) at params for dtype t on sm_90 as the worker
 * would, over a matrix of 1000 slices and 31990 rows; NULL with e set when
 * the worker refuses before NVRTC runs. */
static gpu_cubin *compile_src(wk_state *w, const char *name, const char *src, const cJSON *ps,
                              sp_dtype t, dt_err *e)
{
    cJSON *req = cJSON_CreateObject();
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    dt_json_set_str(k, "name", name);
    dt_json_set_take(k, "params", cJSON_Duplicate(ps, 1));
    dt_json_set_take(req, "kernel", k);
    wk_kernel kn;
    cr_assert_eq(wk_kernel_parse(req, &kn, e), 0, "%s", e->msg);
    cJSON_Delete(req);
    wk_problem p = {.op = kn.contract.op, .dtype = t, .n = 32, .alpha = 1, .beta = 0};
    gpu_vars v = {.n = 0};
    gpu_vars_set(&v, "nslices", 1000);
    gpu_vars_set(&v, "C", 32);
    gpu_vars_set(&v, "rows", 31990); /* every format sets it; ROWS is baked in */
    gpu_vars_set(&v, "nvals", 3);
    gpu_cubin *c = NULL;
    w->arch = "sm_90";
    int rc = wk_compile_for(w, &v, &kn, &p, &c, e);
    wk_kernel_clear(&kn);
    return rc == 0 ? c : NULL;
}

/* Compiles at params for dtype t on sm_90 as the worker would; appends a
 * line to fails when it does not compile or spills. */
static void compile_one(wk_state *w, const char *src, const cJSON *ps, sp_dtype t, dt_buf *fails)
{
    dt_err e = {0};
    gpu_cubin *c = compile_src(w, "spmv_sell16.cu", src, ps, t, &e);
    char *s = cJSON_PrintUnformatted(ps);
    if (c == NULL) {
        dt_buf_printf(fails, "%s %s: %s\n", sp_dtype_name(t), s, e.msg);
    } else if (!c->compiled) {
        dt_buf_printf(fails, "%s %s: does not compile:\n%s\n", sp_dtype_name(t), s, c->log);
    } else {
        for (int i = 0; i < c->nkinfo; i++)
            if (c->kinfo[i].spill_stores > 0 || c->kinfo[i].spill_loads > 0)
                dt_buf_printf(fails, "%s %s: %d registers, spills %d/%d bytes\n", sp_dtype_name(t),
                              s, c->kinfo[i].registers, c->kinfo[i].spill_stores,
                              c->kinfo[i].spill_loads);
    }
    free(s);
    gpu_cubin_free(c);
}

/* BLOCK 512 leaves a thread the fewest registers (128). Every legal VEC >
 * 1 batch in fp32 and fp64 (fp64 at VEC 8: four 16-byte value loads a
 * chunk), and the widest legal batch of each VEC in fp16 and bf16. */
Test(sell16, every_legal_vec_batch_should_compile_without_spills, .timeout = 600)
{
    wk_state w;
    TU_NVRTC_OR_SKIP(w);
    dt_err e = {0};
    char *src = sell16_source();
    gpu_manifest m;
    cr_assert_eq(gpu_manifest_from_source(src, &m, &e), 0, "%s", e.msg);
    dt_buf fails = DT_BUF_INIT;
    int compiles = 0;
    for (int t = 0; t < 4; t++)
        for (int vec = 2; vec <= 8; vec *= 2) {
            int widest = 0;
            for (int unroll = 8; unroll >= 1 && widest == 0; unroll /= 2) {
                cJSON *ps = params(512, unroll, 256, vec);
                if (gpu_manifest_check(&m, ps, NULL, &e) == 0)
                    widest = unroll;
                cJSON_Delete(ps);
            }
            cr_assert_gt(widest, 0, "no legal UNROLL at VEC %d", vec);
            for (int unroll = 1; unroll <= widest; unroll *= 2) {
                if ((t == SP_FP16 || t == SP_BF16) && unroll != widest)
                    continue;
                cJSON *ps = params(512, unroll, 256, vec);
                compile_one(&w, src, ps, (sp_dtype)t, &fails);
                compiles++;
                cJSON_Delete(ps);
            }
        }
    cr_log_info("%d compiles", compiles);
    cr_assert_eq(fails.len, 0, "%s", dt_buf_str(&fails));
    dt_buf_free(&fails);
    gpu_manifest_clear(&m);
    free(src);
    gpu_nvrtc_free(w.nvrtc);
}

/* VEC 8 UNROLL 8 (64 entries a thread in flight) spills in fp64 at BLOCK
 * 512; the manifest keeps VEC * UNROLL at most 32. */
Test(sell16, the_manifest_should_refuse_batches_past_32_entries)
{
    char *src = sell16_source();
    gpu_manifest m;
    dt_err e = {0};
    cr_assert_eq(gpu_manifest_from_source(src, &m, &e), 0, "%s", e.msg);
    cJSON *ok = params(256, 4, 256, 8);
    cr_expect_eq(gpu_manifest_check(&m, ok, NULL, &e), 0, "%s", e.msg);
    cJSON *bad = params(256, 8, 256, 8);
    dt_err be = {0};
    cr_expect_neq(gpu_manifest_check(&m, bad, NULL, &be), 0);
    cr_expect(strstr(be.msg, "VEC * UNROLL") != NULL, "%s", be.msg);
    cJSON_Delete(ok);
    cJSON_Delete(bad);
    gpu_manifest_clear(&m);
    free(src);
}

/* At SIGMA 1 sell16-thread and sell16-dict take a thread's row from its
 * slot over the ROWS the contract bakes in, and load no sell_perm; at
 * SIGMA 256 they load it. Checked at compile time: each source, with a
 * static_assert on SELL_IDROWS appended, compiles only when the worker
 * defined what the path needs. */
Test(sell16, sigma_1_should_take_rows_from_slots_and_sigma_256_from_sell_perm)
{
    wk_state w;
    TU_NVRTC_OR_SKIP(w);
    dt_err e = {0};
    static const char *files[] = {"spmv_sell16.cu", "spmv_sell16_dict.cu"};
    for (size_t f = 0; f < DT_ARRAY_LEN(files); f++) {
        char *path = dt_xasprintf("%s/kernels/%s", tu_src_dir(), files[f]);
        char *src = dt_read_file(path, NULL, &e);
        cr_assert_not_null(src, "%s", e.msg);
        for (int sigma = 1; sigma <= 256; sigma += 255) {
            char *probe =
                dt_xasprintf("%s\nstatic_assert(SELL_IDROWS == %s, \"rows at SIGMA %d\");\n", src,
                             sigma == 1 ? "31990" : "-1", sigma);
            cJSON *ps = params(256, 4, sigma, 2);
            dt_err ce = {0};
            gpu_cubin *c = compile_src(&w, files[f], probe, ps, SP_FP32, &ce);
            cr_assert_not_null(c, "%s SIGMA %d: %s", files[f], sigma, ce.msg);
            cr_expect(c->compiled, "%s SIGMA %d does not compile:\n%s", files[f], sigma, c->log);
            gpu_cubin_free(c);
            cJSON_Delete(ps);
            free(probe);
        }
        free(src);
        free(path);
    }
    gpu_nvrtc_free(w.nvrtc);
}
