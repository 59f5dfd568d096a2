/* test_worker_gpu.c -- the worker on a real GPU through the pool: a correct
 * kernel passes the battery and is measured against cuSPARSE; a kernel that
 * writes half its rows, one that faults, one that never ends and one that
 * replays a cached answer are each caught with the right message, and the
 * pool survives every one. Skips without a GPU. */
#include "tests/common/testutil.h"

#include "gpu/gpu.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    dt_loop *loop;
    gpu_pool *pool;
} fixture;

static void quiet(int w, const char *line, void *ud)
{
    (void)ud;
    fprintf(stderr, "[worker %d] %s\n", w, line);
}

static fixture open_pool(void)
{
    fixture f;
    f.loop = dt_loop_new();
    char *la = dt_xasprintf("'%s' worker --device {device}", tu_ditto_bin());
    gpu_pool_opts o = {.workers = 1, .launcher = la, .deadline_s = 300, .log = quiet};
    dt_err e = {0};
    f.pool = gpu_pool_new(f.loop, &o, &e);
    free(la);
    cr_assert_not_null(f.pool, "%s", e.msg);
    cr_assert_eq(gpu_pool_wait_ready(f.pool, 60), 1);
    const cJSON *dev = cJSON_GetObjectItem(gpu_pool_hello(f.pool, 0), "device");
    if (!dt_json_bool(dev, "present", 0)) {
        char reason[512];
        snprintf(reason, sizeof reason, "%s", dt_json_str(dev, "reason", "?"));
        gpu_pool_free(f.pool); /* frees the hello that dev points into */
        dt_loop_free(f.loop);
        cr_skip_test("no GPU: %s", reason);
    }
    return f;
}

static void close_pool(fixture *f)
{
    gpu_pool_free(f->pool);
    dt_loop_free(f->loop);
}

static void load(fixture *f, const char *matrix)
{
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "matrix", matrix);
    cJSON *rep = gpu_pool_load(f->pool, "m", r, 0);
    char buf[512];
    cr_assert(dt_json_bool(rep, "ok", 0), "%s", gpu_reply_error(rep, buf, sizeof buf));
    cJSON_Delete(rep);
}

static cJSON *kernel_obj(const char *rel)
{
    char *path = dt_xasprintf("%s/%s", tu_src_dir(), rel);
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    const char *base = strrchr(rel, '/');
    dt_json_set_str(k, "name", base ? base + 1 : rel);
    free(src);
    free(path);
    return k;
}

static cJSON *call(fixture *f, const char *req, const char *kernel, double deadline)
{
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", req);
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", "spmv");
    dt_json_set_str(r, "dtype", "fp32");
    if (kernel)
        dt_json_set_take(r, "kernel", kernel_obj(kernel));
    return gpu_pool_call(f->pool, r, deadline);
}

static const cJSON *find_check(const cJSON *v, const char *suffix)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(v, "checks"))
    {
        if (dt_endswith(dt_json_str(c, "name", ""), suffix))
            return c;
    }
    return NULL;
}

Test(worker_gpu, a_correct_kernel_should_pass_and_measure_reproducibly, .timeout = 600)
{
    fixture f = open_pool();
    char *m = tu_matrix("bcsstk13.mtx");
    load(&f, m);
    cJSON *v = call(&f, "verify", "kernels/spmv_csr_thread.cu", 0);
    char *s = cJSON_Print(v);
    cr_assert(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0), "%s", s);
    free(s);
    cr_assert_gt(dt_json_num(v, "checks_run", 0), 10);
    cJSON_Delete(v);
    double sp[2];
    for (int i = 0; i < 2; i++) {
        cJSON *me = call(&f, "measure", "kernels/spmv_csr_thread.cu", 0);
        s = cJSON_Print(me);
        cr_assert(dt_json_bool(me, "ok", 0), "%s", s);
        sp[i] = dt_json_num(me, "speedup", 0);
        cr_assert_gt(sp[i], 0, "%s", s);
        const cJSON *b = cJSON_GetObjectItem(me, "baseline");
        const cJSON *pr = cJSON_GetObjectItem(b, "paired");
        cr_assert_not_null(pr, "no paired timing: %s", s);
        char *pl = cJSON_PrintUnformatted(cJSON_GetObjectItem(pr, "placement_speedups"));
        fprintf(stderr,
                "measure %d: %.2f us (%s) vs %s %.2f us; paired speedup %.3f over %d rounds "
                "(%.2f vs %.2f us), apart %.3f; placements %s\n",
                i, dt_json_num(me, "us", 0), dt_json_str(me, "method", ""),
                dt_json_str(b, "best", ""), dt_json_num(b, "us", 0), sp[i],
                (int)dt_json_num(pr, "rounds", 0), dt_json_num(pr, "candidate_us", 0),
                dt_json_num(pr, "baseline_us", 0), dt_json_num(me, "speedup_separate", 0),
                pl ? pl : "?");
        free(pl);
        free(s);
        cJSON_Delete(me);
    }
    cr_assert(fabs(sp[0] - sp[1]) <= 0.05 * sp[0], "speedups %.3f and %.3f differ by > 5%%", sp[0],
              sp[1]);
    free(m);
    close_pool(&f);
}

/* Regression: a template whose format is not CSR, verified first thing on a
 * freshly loaded matrix. The battery's cuSPARSE cross-check then builds the
 * CSR copy; the format cache once moved its entries on insertion, leaving
 * the kernel bound to the CSR arrays ("parameter 'nslices' has nothing to
 * bind to"). */
Test(worker_gpu, every_spmv_template_should_pass_on_a_fresh_matrix, .timeout = 600)
{
    fixture f = open_pool();
    char *m = tu_matrix("bcsstk13.mtx");
    const char *tpl[] = {"kernels/spmv_sell.cu",         "kernels/spmv_sell16.cu",
                         "kernels/spmv_bsr.cu",          "kernels/spmv_csr16.cu",
                         "kernels/spmv_csr_adaptive.cu", "kernels/spmv_merge_path.cu",
                         "kernels/spmv_csr_vector.cu",   "kernels/spmv_csr_thread.cu",
                         "kernels/spmv_csr_stream.cu",   "kernels/spmv_csr16_stream.cu",
                         "kernels/spmv_csr16_xstage.cu", "kernels/spmv_ell.cu",
                         "kernels/spmv_seg16.cu"};
    /* spmv_sell16_dict.cu needs a matrix of few values: its own test. */
    for (size_t i = 0; i < sizeof tpl / sizeof tpl[0]; i++) {
        load(&f, m); /* replaces "m": an empty format cache */
        cJSON *v = call(&f, "verify", tpl[i], 0);
        char *s = cJSON_Print(v);
        cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0), "%s: %s", tpl[i], s);
        free(s);
        cJSON_Delete(v);
    }
    free(m);
    close_pool(&f);
}

/* seg16 in every dtype and tile shape, with alpha, beta and an epilogue, on
 * a matrix of short skewed rows (ca-GrQc: rows of 1 to 81) and on the edge
 * matrices: every row's sum comes from a block-wide segmented scan over
 * rounds and warps, so each (BLOCK, U) walks a different path through it.
 * The edge matrix with a row of 5000 is skipped by the contract's
 * max_row (BLOCK * U * 8), never failed. */
Test(worker_gpu, seg16_should_pass_in_every_dtype_and_tile_shape, .timeout = 600)
{
    fixture f = open_pool();
    char *m = tu_matrix("ca-GrQc.mtx");
    load(&f, m);
    static const char *dtypes[] = {"fp32", "fp64", "fp16", "bf16"};
    static const int shapes[][2] = {{128, 1}, {256, 2}, {128, 4}, {512, 1}};
    static const char *epi[] = {"none", "relu", "bias", "gelu"};
    for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++) {
        for (size_t s = 0; s < DT_ARRAY_LEN(shapes); s++) {
            cJSON *r = cJSON_CreateObject();
            dt_json_set_str(r, "req", "verify");
            dt_json_set_str(r, "matrix", "m");
            dt_json_set_str(r, "op", "spmv");
            dt_json_set_str(r, "dtype", dtypes[t]);
            dt_json_set_num(r, "alpha", s % 2 ? 1.5 : 1.0);
            dt_json_set_num(r, "beta", s % 2 ? 0.5 : 0.0);
            dt_json_set_str(r, "epilogue", epi[(t + s) % 4]);
            cJSON *k = kernel_obj("kernels/spmv_seg16.cu");
            cJSON *pr = cJSON_AddObjectToObject(k, "params");
            cJSON_AddNumberToObject(pr, "BLOCK", shapes[s][0]);
            cJSON_AddNumberToObject(pr, "U", shapes[s][1]);
            dt_json_set_take(r, "kernel", k);
            cJSON *v = gpu_pool_call(f.pool, r, 0);
            char *out = cJSON_Print(v);
            cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
                      "%s BLOCK %d U %d: %s", dtypes[t], shapes[s][0], shapes[s][1], out);
            const cJSON *lr = find_check(v, "edge one very long row");
            cr_expect(lr != NULL && dt_json_bool(lr, "skipped", 0),
                      "the row of 5000 is skipped: %s", out);
            free(out);
            cJSON_Delete(v);
        }
    }
    free(m);
    close_pool(&f);
}

/* One verify of an SDDMM template at K = n with the given parameters
 * (name, value pairs up to a NULL name) on matrix "m"; expects it passed. */
static void verify_sddmm_at(fixture *f, const char *tpl, const char *dtype, int n, double alpha,
                            double beta, const char *epi, const char *const *names, const int *vals)
{
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", "verify");
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", "sddmm");
    dt_json_set_str(r, "dtype", dtype);
    dt_json_set_int(r, "n", n);
    dt_json_set_num(r, "alpha", alpha);
    dt_json_set_num(r, "beta", beta);
    dt_json_set_str(r, "epilogue", epi);
    cJSON *k = kernel_obj(tpl);
    cJSON *pr = cJSON_AddObjectToObject(k, "params");
    for (int i = 0; names[i] != NULL; i++)
        cJSON_AddNumberToObject(pr, names[i], vals[i]);
    dt_json_set_take(r, "kernel", k);
    cJSON *v = gpu_pool_call(f->pool, r, 0);
    char *out = cJSON_Print(v);
    cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
              "%s %s K=%d %s=%d %s=%d: %s", tpl, dtype, n, names[0], vals[0], names[1], vals[1],
              out);
    free(out);
    cJSON_Delete(v);
}

/* The dense-tile templates (format dtile) in every dtype they list, at
 * tile shapes that stage K in one round, in four (K=128) and in a padded
 * one (K=20), with alpha, beta and the epilogues, on a pruned weight
 * (transformer magnitude 0.7 q: 512 x 512, 30 % set) and on the edge
 * matrices: a thread finds each output's position from its tile row's
 * mask, so a wrong count shows as a misplaced entry. The tensor-core
 * version (3xTF32) is fp32 only and must stay within the fp32 tolerance. */
Test(worker_gpu, dense_tile_sddmm_should_pass_in_every_dtype_tile_shape_and_k, .timeout = 600)
{
    fixture f = open_pool();
    char *m = tu_matrix("dlmc/transformer__magnitude_pruning__0.7__body_encoder_layer_0_self_"
                        "attention_multihead_attention_q_fully_connected.smtx");
    load(&f, m);
    static const char *dtypes[] = {"fp32", "fp64", "fp16", "bf16"};
    static const char *epi[] = {"none", "relu", "gelu"};
    static const int ks[] = {32, 128, 20};
    static const char *const fma[] = {"TM", "TN", "RM", "RN", NULL};
    static const int fshape[][4] = {
        {64, 64, 4, 4}, {32, 32, 2, 2}, {128, 64, 8, 8}, {64, 32, 8, 4}};
    for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++)
        for (size_t s = 0; s < DT_ARRAY_LEN(fshape); s++)
            verify_sddmm_at(&f, "kernels/sddmm_dense_tile.cu", dtypes[t], ks[(t + s) % 3],
                            s % 2 ? 1.5 : 1.0, s % 2 ? 0.5 : 0.0, epi[(t + s) % 3], fma, fshape[s]);
    static const char *const tc[] = {"TM", "TN", "WM", "WN", NULL};
    static const int tshape[][4] = {
        {64, 64, 2, 2}, {32, 32, 1, 1}, {128, 64, 4, 2}, {64, 32, 2, 4}};
    for (size_t s = 0; s < DT_ARRAY_LEN(tshape); s++)
        for (size_t i = 0; i < DT_ARRAY_LEN(ks); i++)
            verify_sddmm_at(&f, "kernels/sddmm_dense_tile_tf32.cu", "fp32", ks[i],
                            i % 2 ? 1.5 : 1.0, i % 2 ? 0.5 : 0.0, epi[(s + i) % 3], tc, tshape[s]);
    free(m);
    close_pool(&f);
}

/* row-union-sddmm (format runion) in every dtype, at every group size R,
 * with one vector a lane (LANES 8 at K=32), several (LANES 2 and 4) and a
 * padded K (20), alpha, beta and the epilogues, on a mesh (dwt_992: groups
 * of rows sharing columns, so most entries serve several rows) and on the
 * edge matrices: the butterfly leaves each row's sum in its own lanes, so a
 * wrong mapping shows as an output of the wrong row. SIM 1 groups dwt_992's
 * rows by the columns they share (2.0-4.1 nonzeros an entry against
 * 1.5-2.6 for consecutive rows), so its entries name rows far apart. */
Test(worker_gpu, row_union_sddmm_should_pass_in_every_dtype_group_size_and_k, .timeout = 600)
{
    fixture f = open_pool();
    char *m = tu_matrix("dwt_992.mtx");
    load(&f, m);
    static const char *dtypes[] = {"fp32", "fp64", "fp16", "bf16"};
    static const char *epi[] = {"none", "relu", "gelu"};
    static const int ks[] = {32, 128, 20};
    static const char *const names[] = {"R", "LANES", "WARPS", "UNROLL", "SIM", NULL};
    static const int shape[][5] = {{4, 8, 8, 1, 0}, {2, 4, 4, 2, 1},  {8, 8, 2, 4, 1},
                                   {2, 2, 4, 2, 0}, {4, 16, 4, 1, 1}, {4, 8, 8, 1, 1}};
    for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++)
        for (size_t s = 0; s < DT_ARRAY_LEN(shape); s++)
            verify_sddmm_at(&f, "kernels/sddmm_union.cu", dtypes[t], ks[(t + s) % 3],
                            s % 2 ? 1.5 : 1.0, s % 2 ? 0.5 : 0.0, epi[(t + s) % 3], names,
                            shape[s]);
    free(m);
    close_pool(&f);
}

/* Verifies sell16 at the given parameters on matrix "m", and at xval of
 * the parameter xname where xval > 0 (the worker fills in the manifest's
 * default for any parameter a request leaves out). */
static cJSON *verify_sell16_tpl_x(fixture *f, const char *tpl, const char *dtype, int unroll,
                                  int sigma, int vec, const char *xname, int xval)
{
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", "verify");
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", "spmv");
    dt_json_set_str(r, "dtype", dtype);
    cJSON *k = kernel_obj(tpl);
    cJSON *pr = cJSON_AddObjectToObject(k, "params");
    cJSON_AddNumberToObject(pr, "BLOCK", 128);
    cJSON_AddNumberToObject(pr, "UNROLL", unroll);
    cJSON_AddNumberToObject(pr, "SIGMA", sigma);
    cJSON_AddNumberToObject(pr, "VEC", vec);
    if (xval > 0)
        cJSON_AddNumberToObject(pr, xname, xval);
    dt_json_set_take(r, "kernel", k);
    return gpu_pool_call(f->pool, r, 0);
}

static cJSON *verify_sell16_tpl_rpt(fixture *f, const char *tpl, const char *dtype, int unroll,
                                    int sigma, int vec, int rpt)
{
    return verify_sell16_tpl_x(f, tpl, dtype, unroll, sigma, vec, "RPT", rpt);
}

static cJSON *verify_sell16_tpl(fixture *f, const char *tpl, const char *dtype, int unroll,
                                int sigma, int vec)
{
    return verify_sell16_tpl_rpt(f, tpl, dtype, unroll, sigma, vec, 0);
}

static void verify_sell16(fixture *f, const char *dtype, int unroll, int sigma, int vec)
{
    cJSON *v = verify_sell16_tpl(f, "kernels/spmv_sell16.cu", dtype, unroll, sigma, vec);
    char *s = cJSON_Print(v);
    cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
              "SIGMA %d VEC %d UNROLL %d %s: %s", sigma, vec, unroll, dtype, s);
    free(s);
    cJSON_Delete(v);
}

/* sell16 unsorted (SIGMA 1, the manifest's default, which the test above
 * covers) and sorted (SIGMA 256: rows permuted within windows of 256, the
 * form the HBM bench picks on most regular matrices), in fp32 and fp64, on
 * a matrix whose row lengths vary (bcsstk13: 5 to 95 a row), so a store
 * through a wrong permutation or a slice padded to the wrong width fails. */
Test(worker_gpu, the_sell16_template_should_pass_sorted_and_unsorted, .timeout = 300)
{
    fixture f = open_pool();
    char *m = tu_matrix("bcsstk13.mtx");
    load(&f, m);
    free(m);
    for (int sigma = 1; sigma <= 256; sigma *= 256)
        for (int fp64 = 0; fp64 <= 1; fp64++)
            verify_sell16(&f, fp64 ? "fp64" : "fp32", 8, sigma, 1);
    close_pool(&f);
}

/* sell16 with rows in chunks of VEC entries, each loaded as one vector: at
 * every VEC, with a batch of one chunk (the loop's exit on a padded chunk
 * every step), of several, and of the most the manifest allows (VEC *
 * UNROLL = 32), sorted and unsorted, in fp32 and fp64 (two 16-byte loads
 * per chunk at VEC 4, four at VEC 8) on bcsstk13, and in fp16 on a random
 * matrix (bcsstk13's entries reach 1.2e12, past fp16's range). The
 * battery's edge matrices add empty rows, a row longer than any slice of
 * bcsstk13 and a last slice of padding rows. */
Test(worker_gpu, the_sell16_template_should_pass_at_every_vec, .timeout = 600)
{
    static const struct {
        int vec, unroll;
    } cases[] = {{2, 8}, {2, 1}, {4, 1}, {4, 8}, {8, 2}, {8, 4}};
    static const char *dtypes[] = {"fp32", "fp64", "fp16"};
    fixture f = open_pool();
    char *m = tu_matrix("bcsstk13.mtx");
    for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++) {
        load(&f, t < 2 ? m : "gen:uniform:rows=5000,nnz=60000");
        for (int sigma = 1; sigma <= 256; sigma *= 256)
            for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++)
                verify_sell16(&f, dtypes[t], cases[i].unroll, sigma, cases[i].vec);
    }
    free(m);
    close_pool(&f);
}

/* sell16 with SEQ rows a thread walked in turn (sell_thread_seq): SEQ 2
 * and 4 at VEC 1 (the predicated walk) and VEC 2 and 8 (the vector walk),
 * sorted and unsorted, in fp32 and fp64 on bcsstk13 (rows of 5 to 95;
 * 2003 rows, so the last block's later slots lie past the last slice) and
 * in fp16 on a random matrix. The battery's edge matrices add empty rows
 * and a last slice of padding rows. */
Test(worker_gpu, the_sell16_template_should_pass_with_several_rows_a_thread, .timeout = 600)
{
    static const struct {
        int vec, unroll;
    } cases[] = {{1, 4}, {2, 4}, {8, 1}};
    static const char *dtypes[] = {"fp32", "fp64", "fp16"};
    fixture f = open_pool();
    char *m = tu_matrix("bcsstk13.mtx");
    for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++) {
        load(&f, t < 2 ? m : "gen:uniform:rows=5000,nnz=60000");
        for (int seq = 2; seq <= 4; seq *= 2)
            for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
                int sigma = i % 2 ? 256 : 1;
                cJSON *v = verify_sell16_tpl_x(&f, "kernels/spmv_sell16.cu", dtypes[t],
                                               cases[i].unroll, sigma, cases[i].vec, "SEQ", seq);
                char *s = cJSON_Print(v);
                cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
                          "SIGMA %d VEC %d UNROLL %d SEQ %d %s: %s", sigma, cases[i].vec,
                          cases[i].unroll, seq, dtypes[t], s);
                free(s);
                cJSON_Delete(v);
            }
    }
    free(m);
    close_pool(&f);
}

/* sell16-dict: sell16's walk with a one-byte index per entry into a table
 * of the matrix's values, staged in shared memory. On matrices with few
 * distinct values: Franz6 (3, short rows, rectangular), olm1000 (6) and
 * lund_a (231, near the 255 a byte names; 147 rows, so the last slice is
 * part padding), at VEC 1 (the predicated walk), 2, 4 and 8 (the vector
 * walk, padding adding table entry 0), sorted and unsorted, in fp32 and
 * fp64, and in fp16 on Franz6 (values of 1, -1 and 38; olm1000's rows sum
 * past fp16's range). The battery's edge matrices have random values and are
 * skipped (the contract's max_values); these matrices stand in for them.
 * RPT 2 (two rows a thread, a block-width apart) runs the same cases: on
 * lund_a the second row of many threads lies past the last slice. On
 * bcsstk13 (13781 values) the contract refuses the matrix. */
Test(worker_gpu, the_sell16_dict_template_should_pass_on_few_values_and_refuse_many, .timeout = 600)
{
    static const struct {
        int vec, unroll;
    } cases[] = {{1, 8}, {2, 4}, {4, 1}, {8, 4}};
    static const char *mats[] = {"Franz6_id1959_aug.mtx", "olm1000.mtx", "lund_a.mtx"};
    static const char *dtypes[] = {"fp32", "fp64", "fp16"};
    fixture f = open_pool();
    for (size_t mi = 0; mi < DT_ARRAY_LEN(mats); mi++) {
        char *m = tu_matrix(mats[mi]);
        load(&f, m);
        free(m);
        for (size_t t = 0; t < (mi == 0 ? 3u : 2u); t++)
            for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++)
                for (int rpt = 1; rpt <= 2; rpt++) {
                    int sigma = i % 2 ? 256 : 1;
                    /* VEC * UNROLL * RPT <= 32 (the manifest's constraint) */
                    int unroll = rpt == 2 && cases[i].vec * cases[i].unroll > 16
                                     ? cases[i].unroll / 2
                                     : cases[i].unroll;
                    cJSON *v = verify_sell16_tpl_rpt(&f, "kernels/spmv_sell16_dict.cu", dtypes[t],
                                                     unroll, sigma, cases[i].vec, rpt);
                    char *s = cJSON_Print(v);
                    cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
                              "%s SIGMA %d VEC %d UNROLL %d RPT %d %s: %s", mats[mi], sigma,
                              cases[i].vec, unroll, rpt, dtypes[t], s);
                    free(s);
                    cJSON_Delete(v);
                }
    }
    char *m = tu_matrix("bcsstk13.mtx");
    load(&f, m);
    free(m);
    /* RPT named too, though the worker would fill in its default (the grid
     * reads it). */
    cJSON *v = verify_sell16_tpl_rpt(&f, "kernels/spmv_sell16_dict.cu", "fp32", 8, 1, 1, 1);
    char *s = cJSON_Print(v);
    cr_expect(!dt_json_bool(v, "passed", 1), "%s", s);
    cr_expect(strstr(s, "at most 255 distinct nonzero values") != NULL, "%s", s);
    free(s);
    cJSON_Delete(v);
    close_pool(&f);
}

/* coo-sddmm: a lane group per nonzero, its row from the coo format's
 * coo_row. At K=32 and K=128, with one lane group per nonzero spanning K
 * (LANES 8 at K=32), with groups wider than K needs (LANES 32 at K=32:
 * lanes past K add zeros), narrower ones looping over K (LANES 2), one and
 * four nonzeros per group, in fp32, fp64 and fp16 (fp16 on a random
 * matrix: bcsstk13's entries reach 1.2e12), on bcsstk13 (rows of 5-95)
 * and Erdos971 (a power-law graph with empty rows). nnz not a multiple of
 * a block's nonzeros leaves the last block part empty. */
Test(worker_gpu, the_coo_sddmm_template_should_pass_at_both_k, .timeout = 600)
{
    static const struct {
        int lanes, unroll;
    } cases[] = {{8, 1}, {32, 2}, {2, 4}, {4, 2}};
    static const char *mats[] = {"bcsstk13.mtx", "Erdos971.mtx", NULL};
    static const char *dtypes[] = {"fp32", "fp64", "fp16"};
    fixture f = open_pool();
    for (size_t mi = 0; mi < DT_ARRAY_LEN(mats); mi++) {
        char *m = mats[mi] ? tu_matrix(mats[mi]) : dt_xstrdup("gen:uniform:rows=3000,nnz=40000");
        load(&f, m);
        for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++) {
            if ((mats[mi] == NULL) != (t == 2))
                continue; /* fp16 only on the random matrix, which only it uses */
            for (int kk = 32; kk <= 128; kk *= 4)
                for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
                    cJSON *r = cJSON_CreateObject();
                    dt_json_set_str(r, "req", "verify");
                    dt_json_set_str(r, "matrix", "m");
                    dt_json_set_str(r, "op", "sddmm");
                    dt_json_set_str(r, "dtype", dtypes[t]);
                    dt_json_set_int(r, "n", kk);
                    cJSON *k = kernel_obj("kernels/sddmm_coo.cu");
                    cJSON *pr = cJSON_AddObjectToObject(k, "params");
                    cJSON_AddNumberToObject(pr, "WARPS", 4);
                    cJSON_AddNumberToObject(pr, "VEC", 8);
                    cJSON_AddNumberToObject(pr, "LANES", cases[i].lanes);
                    cJSON_AddNumberToObject(pr, "UNROLL", cases[i].unroll);
                    dt_json_set_take(r, "kernel", k);
                    cJSON *v = gpu_pool_call(f.pool, r, 0);
                    char *s = cJSON_Print(v);
                    cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
                              "%s %s K=%d LANES %d UNROLL %d: %s", m, dtypes[t], kk,
                              cases[i].lanes, cases[i].unroll, s);
                    free(s);
                    cJSON_Delete(v);
                }
        }
        free(m);
    }
    close_pool(&f);
}

/* csr-split-spmm on adder_dcop_05 (rows up to 1310, past long_row 128): rows cut
 * into pieces of 32 and 128 nonzeros, summed by the block that counts a row last.
 * Its scratch is zeroed once ("scratch_init": "once"): the counters must be back at
 * zero after every launch, which the battery's three input sets and its second run,
 * all on one allocation, check. N=32 and N=128 over 32-column tiles (a counter per row
 * and tile), fp32 and fp64, and beta with ReLU (a cut row's beta term added once). */
Test(worker_gpu, the_split_spmm_template_should_leave_its_counters_at_zero, .timeout = 300)
{
    static const struct {
        int chunk, n, tn, lanes;
        double beta;
        const char *epilogue;
    } cases[] = {{128, 32, 128, 32, 0, "none"},
                 {32, 32, 128, 4, 0, "none"},
                 {32, 128, 32, 8, 0, "none"},
                 {128, 32, 128, 4, 0.5, "relu"}};
    static const char *dtypes[] = {"fp32", "fp64"};
    fixture f = open_pool();
    char *m = tu_matrix("adder_dcop_05.mtx");
    load(&f, m);
    for (size_t t = 0; t < DT_ARRAY_LEN(dtypes); t++)
        for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
            cJSON *r = cJSON_CreateObject();
            dt_json_set_str(r, "req", "verify");
            dt_json_set_str(r, "matrix", "m");
            dt_json_set_str(r, "op", "spmm");
            dt_json_set_str(r, "dtype", dtypes[t]);
            dt_json_set_int(r, "n", cases[i].n);
            cJSON_AddNumberToObject(r, "beta", cases[i].beta);
            dt_json_set_str(r, "epilogue", cases[i].epilogue);
            cJSON *k = kernel_obj("kernels/spmm_csr_split.cu");
            cJSON *pr = cJSON_AddObjectToObject(k, "params");
            cJSON_AddNumberToObject(pr, "WARPS", 8);
            cJSON_AddNumberToObject(pr, "VEC", 8);
            cJSON_AddNumberToObject(pr, "LANES", cases[i].lanes);
            cJSON_AddNumberToObject(pr, "ROWS_PER_WARP", 1);
            cJSON_AddNumberToObject(pr, "SORTED", 0);
            cJSON_AddNumberToObject(pr, "UNROLL", 8);
            cJSON_AddNumberToObject(pr, "CHUNK", cases[i].chunk);
            cJSON_AddNumberToObject(pr, "TN", cases[i].tn);
            dt_json_set_take(r, "kernel", k);
            cJSON *v = gpu_pool_call(f.pool, r, 0);
            char *s = cJSON_Print(v);
            cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0),
                      "%s case %zu (CHUNK %d N %d TN %d LANES %d): %s", dtypes[t], i,
                      cases[i].chunk, cases[i].n, cases[i].tn, cases[i].lanes, s);
            free(s);
            cJSON_Delete(v);
        }
    free(m);
    close_pool(&f);
}

/* ell-baked in both layouts: column-major at LANES 1, row-major (the
 * contract's format parameter follows LANES) at 8; and a matrix with one
 * long row breaks its max_fill, which verify reports and measure refuses
 * before building a format of rows x the longest row. */
Test(worker_gpu, the_ell_template_should_pass_in_both_layouts_and_refuse_heavy_padding,
     .timeout = 300)
{
    fixture f = open_pool();
    char *m = tu_matrix("bcsstk13.mtx");
    load(&f, m);
    free(m);
    for (int lanes = 1; lanes <= 8; lanes *= 8) {
        cJSON *r = cJSON_CreateObject();
        dt_json_set_str(r, "req", "verify");
        dt_json_set_str(r, "matrix", "m");
        dt_json_set_str(r, "op", "spmv");
        dt_json_set_str(r, "dtype", "fp64");
        cJSON *k = kernel_obj("kernels/spmv_ell.cu");
        cJSON *pr = cJSON_AddObjectToObject(k, "params");
        cJSON_AddNumberToObject(pr, "LANES", lanes);
        cJSON_AddNumberToObject(pr, "BLOCK", 128);
        cJSON_AddNumberToObject(pr, "UNROLL", 8);
        dt_json_set_take(r, "kernel", k);
        cJSON *v = gpu_pool_call(f.pool, r, 0);
        char *s = cJSON_Print(v);
        cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0), "LANES %d: %s", lanes,
                  s);
        free(s);
        cJSON_Delete(v);
    }
    /* hangGlider_2: 1647 rows, the longest 1463 entries, 14754 nonzeros. */
    m = tu_matrix("hangGlider_2.mtx");
    load(&f, m);
    free(m);
    cJSON *v = call(&f, "verify", "kernels/spmv_ell.cu", 0);
    const cJSON *c = find_check(v, "preconditions");
    cr_assert_not_null(c, "no preconditions check");
    cr_expect(!dt_json_bool(c, "passed", 1));
    cr_expect(strstr(dt_json_str(c, "detail", ""), "1647 rows x 1463") != NULL, "%s",
              dt_json_str(c, "detail", ""));
    cJSON_Delete(v);
    v = call(&f, "measure", "kernels/spmv_ell.cu", 0);
    char buf[512];
    const char *err = gpu_reply_error(v, buf, sizeof buf);
    cr_expect(dt_startswith(err, "contract: the kernel's contract requires at most 4 slots"), "%s",
              err);
    cJSON_Delete(v);
    close_pool(&f);
}

Test(worker_gpu, a_kernel_writing_half_the_rows_should_fail_the_written_check, .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=5000,nnz=50000");
    cJSON *v = call(&f, "verify", "tests/gpu/kernels/half_rows.cu", 0);
    cr_assert(dt_json_bool(v, "ok", 0));
    cr_assert(!dt_json_bool(v, "passed", 1));
    const cJSON *c = find_check(v, "set 0: every output written");
    cr_assert_not_null(c);
    cr_assert(!dt_json_bool(c, "passed", 1));
    cr_assert(strstr(dt_json_str(c, "detail", ""), "2500 of 5000 outputs never written"), "%s",
              dt_json_str(c, "detail", ""));
    cJSON_Delete(v);
    close_pool(&f);
}

Test(worker_gpu, a_faulting_kernel_should_be_reported_and_the_pool_survive, .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=5000,nnz=50000");
    cJSON *v = call(&f, "verify", "tests/gpu/kernels/fault.cu", 0);
    char buf[512];
    const char *err = gpu_reply_error(v, buf, sizeof buf);
    cr_assert(dt_startswith(err, "kernel_fault: illegal address"), "%s", err);
    cJSON_Delete(v);
    /* restarted, matrix reloaded */
    v = call(&f, "verify", "kernels/spmv_csr_thread.cu", 0);
    cr_assert(dt_json_bool(v, "passed", 0), "%s", gpu_reply_error(v, buf, sizeof buf));
    cJSON_Delete(v);
    cr_assert_eq(gpu_pool_restarts(f.pool), 1);
    close_pool(&f);
}

Test(worker_gpu, a_kernel_that_never_ends_should_time_out_and_the_pool_survive, .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=5000,nnz=50000");
    cJSON *v = call(&f, "verify", "tests/gpu/kernels/spin.cu", 10);
    cr_assert_str_eq(dt_json_str(v, "error", ""), "timeout");
    cr_assert_str_eq(dt_json_str(v, "message", ""), "timeout after 10 s");
    cJSON_Delete(v);
    v = call(&f, "verify", "kernels/spmv_csr_thread.cu", 0);
    char buf[512];
    cr_assert(dt_json_bool(v, "passed", 0), "%s", gpu_reply_error(v, buf, sizeof buf));
    cJSON_Delete(v);
    close_pool(&f);
}

Test(worker_gpu, a_kernel_replaying_a_cached_answer_should_be_caught, .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=5000,nnz=50000");
    cJSON *v = call(&f, "verify", "tests/gpu/kernels/cached.cu", 0);
    cr_assert(dt_json_bool(v, "ok", 0));
    cr_assert(!dt_json_bool(v, "passed", 1));
    const cJSON *c = find_check(v, "no cached answers");
    cr_assert_not_null(c);
    cr_assert(!dt_json_bool(c, "passed", 1), "%s", dt_json_str(c, "detail", ""));
    cJSON_Delete(v);
    close_pool(&f);
}

/* A kernel whose contract says it leaves its scratch zeroed ("scratch_init": "once",
 * so the worker clears it only when allocating it) but does not: the battery's second
 * input set, run on the same allocation, must fail it. The same kernel with the memset
 * before every launch ("launch") is right and must pass. */
Test(worker_gpu, a_kernel_that_leaves_its_scratch_dirty_should_fail_only_without_a_memset,
     .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=5000,nnz=50000");
    for (int memset_each = 0; memset_each <= 1; memset_each++) {
        cJSON *r = cJSON_CreateObject();
        dt_json_set_str(r, "req", "verify");
        dt_json_set_str(r, "matrix", "m");
        dt_json_set_str(r, "op", "spmv");
        dt_json_set_str(r, "dtype", "fp32");
        cJSON *k = kernel_obj("tests/gpu/kernels/counter.cu");
        if (memset_each) {
            const char *src = dt_json_str(k, "source", "");
            const char *once = "\"scratch_init\": \"once\"";
            const char *at = strstr(strstr(src, "/*@contract"), once); /* not the prose's */
            cr_assert_not_null(at);
            char *alt = dt_xasprintf("%.*s\"scratch_init\": \"launch\"%s", (int)(at - src), src,
                                     at + strlen(once));
            dt_json_set_str(k, "source", alt);
            free(alt);
        }
        dt_json_set_take(r, "kernel", k);
        cJSON *v = gpu_pool_call(f.pool, r, 0);
        char *s = cJSON_Print(v);
        cr_assert(dt_json_bool(v, "ok", 0), "%s", s);
        cr_assert_eq(dt_json_bool(v, "passed", 0), memset_each, "memset each launch %d: %s",
                     memset_each, s);
        if (!memset_each) {
            /* The sets run in an order drawn from the seed, with unchecked
             * launches between them: some set's reference check fails. */
            int wrong = 0;
            const cJSON *c;
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(v, "checks"))
            {
                const char *nm = dt_json_str(c, "name", "");
                wrong += dt_startswith(nm, "set ") &&
                         strstr(nm, ": matches the fp64 reference") != NULL &&
                         !dt_json_bool(c, "passed", 1);
            }
            cr_assert_gt(wrong, 0, "no set failed its reference check: %s", s);
        }
        free(s);
        cJSON_Delete(v);
    }
    close_pool(&f);
}

/* Under graph replay the 50 launches of a sample share their inputs: a
 * "once" scratch must be zeroed before each of them, or state one launch
 * leaves (a memo keyed on the whole input would be right every time) carries
 * to the next. counter.cu adds the launches it has seen on its scratch to
 * every output: measured (without the battery, which fails it) it must be
 * right in every checked timed launch. */
Test(worker_gpu, a_once_scratch_should_be_zeroed_before_every_launch_of_a_graph_sample,
     .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=5000,nnz=50000");
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", "measure");
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", "spmv");
    dt_json_set_str(r, "dtype", "fp32");
    dt_json_set_int(r, "min_runs", 20);
    dt_json_set_bool(r, "baseline", 0);
    dt_json_set_take(r, "kernel", kernel_obj("tests/gpu/kernels/counter.cu"));
    cJSON *m = gpu_pool_call(f.pool, r, 0);
    char *s = cJSON_Print(m);
    cr_assert(dt_json_bool(m, "ok", 0), "%s", s);
    cr_expect_str_eq(dt_json_str(m, "method", ""), "graph", "%s", s);
    const cJSON *tc = cJSON_GetObjectItem(m, "timed_checks");
    cr_expect(dt_json_bool(tc, "passed", 0), "%s", s);
    cr_expect_gt(dt_json_int(tc, "checked", 0), 0, "%s", s);
    free(s);
    cJSON_Delete(m);
    close_pool(&f);
}

/* An output past 8 MiB is checked in full in a share of the samples and spot
 * checked in the others: an honest kernel passes both, and the spot checks
 * run (SpMM N = 128 on 262,144 rows: a 128 MiB output, 1 sample in 16 in
 * full). */
Test(worker_gpu, a_large_output_should_be_spot_checked_in_the_other_samples, .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=262144,nnz=2600000");
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", "measure");
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", "spmm");
    dt_json_set_str(r, "dtype", "fp32");
    dt_json_set_int(r, "n", 128);
    dt_json_set_int(r, "min_runs", 20);
    dt_json_set_bool(r, "baseline", 0);
    dt_json_set_take(r, "kernel", kernel_obj("kernels/spmm_csr_warp.cu"));
    cJSON *m = gpu_pool_call(f.pool, r, 0);
    char *s = cJSON_Print(m);
    cr_assert(dt_json_bool(m, "ok", 0), "%s", s);
    const cJSON *tc = cJSON_GetObjectItem(m, "timed_checks");
    cr_expect(dt_json_bool(tc, "passed", 0), "%s", s);
    cr_expect_gt(dt_json_int(tc, "spot_checked", 0), 0, "%s", s);
    cr_expect_gt(dt_json_int(tc, "checked", 0), 0, "%s", s);
    free(s);
    cJSON_Delete(m);
    close_pool(&f);
}

Test(worker_gpu, metrics_should_come_back_or_say_why, .timeout = 300)
{
    fixture f = open_pool();
    load(&f, "gen:uniform:rows=200000,nnz=4000000");
    cJSON *v = call(&f, "metrics", "kernels/spmv_csr_thread.cu", 0);
    char *s = cJSON_Print(v);
    fprintf(stderr, "metrics: %s\n", s);
    cr_assert(dt_json_bool(v, "ok", 0), "%s", s);
    if (dt_json_bool(v, "available", 0)) {
        const cJSON *m = cJSON_GetObjectItem(v, "metrics");
        cr_assert_gt(dt_json_num(m, "gpu__time_duration.sum", 0), 0, "%s", s);
        cr_assert_gt(dt_json_num(m, "dram__bytes_read.sum", 0), 0, "%s", s);
    } else {
        cr_assert(strlen(dt_json_str(v, "reason", "")) > 0, "%s", s);
    }
    free(s);
    cJSON_Delete(v);
    close_pool(&f);
}

Test(worker_gpu, baseline_and_calibrate_should_produce_numbers, .timeout = 300)
{
    /* Before the worker starts, which inherits it: no real config touched,
     * and the machine starts uncalibrated. */
    char *dir = tu_tmpdir();
    setenv("XDG_DATA_HOME", dir, 1);
    fixture f = open_pool();
    const cJSON *hello = gpu_pool_hello(f.pool, 0);
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(hello, "copy_measured")),
              "an uncalibrated worker should say its copy bandwidth is the datasheet's");
    load(&f, "gen:uniform:rows=100000,nnz=2000000");
    cJSON *b = call(&f, "baseline", NULL, 0);
    char *s = cJSON_Print(b);
    cr_assert(dt_json_bool(b, "ok", 0), "%s", s);
    cr_assert_not_null(dt_json_str(b, "best", NULL), "%s", s);
    cr_assert_gt(dt_json_num(b, "us", 0), 0);
    free(s);
    cJSON_Delete(b);
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", "calibrate");
    cJSON *c = gpu_pool_call(f.pool, r, 120);
    s = cJSON_Print(c);
    fprintf(stderr, "calibrate: %s\n", s);
    cr_assert(dt_json_bool(c, "ok", 0), "%s", s);
    const double copy = dt_json_num(c, "copy_gbps", 0);
    cr_assert_gt(copy, 500, "%s", s);
    free(s);
    cJSON_Delete(c);
    /* From then on the floor check divides by the measured bandwidth, and
     * a measure answer says so. */
    cJSON *m = call(&f, "measure", "kernels/spmv_csr_thread.cu", 0);
    s = cJSON_Print(m);
    cr_assert(dt_json_bool(m, "ok", 0), "%s", s);
    cr_assert(dt_json_bool(m, "copy_measured", 0), "%s", s);
    cr_assert_float_eq(dt_json_num(m, "copy_gbps", 0), copy, 1e-6 * copy, "%s", s);
    free(s);
    cJSON_Delete(m);
    close_pool(&f);
    tu_rmtree(dir);
    free(dir);
}
