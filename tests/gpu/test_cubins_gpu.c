/* test_cubins_gpu.c -- a kernel compiled by one worker is timed by another
 * that has its own cache (another "host") without compiling it again: the
 * cubin goes through the client (gpu/PROTOCOL.md, "Sharing compiled
 * kernels"). Both workers use GPU 0. Skips without a GPU. */
#include "tests/common/testutil.h"

#include "gpu/gpu.h"

#include <stdlib.h>
#include <string.h>

static void say(int w, const char *line, void *ud)
{
    (void)ud;
    fprintf(stderr, "[worker %d] %s\n", w, line);
}

typedef struct slot {
    cJSON *reply;
    int done;
} slot;

static void done(gpu_pool *p, const cJSON *reply, void *ud)
{
    (void)p;
    slot *s = ud;
    s->reply = cJSON_Duplicate(reply, 1);
    s->done = 1;
}

/* req on matrix m with kernels/spmv_csr_thread.cu, on worker w. */
static cJSON *on(dt_loop *l, gpu_pool *p, const char *req, int w)
{
    char *path = dt_xasprintf("%s/kernels/spmv_csr_thread.cu", tu_src_dir());
    char *src = dt_read_file(path, NULL, NULL);
    cr_assert_not_null(src, "%s", path);
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", req);
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", "spmv");
    dt_json_set_str(r, "dtype", "fp32");
    if (dt_streq(req, "measure"))
        dt_json_set_bool(r, "fast", 1);
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    dt_json_set_str(k, "name", "spmv_csr_thread.cu");
    dt_json_set_take(r, "kernel", k);
    free(src);
    free(path);
    slot s = {NULL, 0};
    gpu_pool_submit(p, r, w, 300, done, &s);
    while (!s.done)
        dt_loop_run_once(l, 1000);
    char buf[512];
    cr_assert(dt_json_bool(s.reply, "ok", 0), "%s on worker %d: %s", req, w,
              gpu_reply_error(s.reply, buf, sizeof buf));
    return s.reply;
}

Test(cubins_gpu, a_kernel_compiled_on_one_host_should_be_timed_on_another_without_a_recompile,
     .timeout = 600)
{
    char *dir = tu_tmpdir();
    dt_loop *l = dt_loop_new();
    char *la = dt_xasprintf("env XDG_CACHE_HOME='%s/h{device}' '%s' worker --device 0", dir,
                            tu_ditto_bin());
    gpu_pool_opts o = {.workers = 2, .launcher = la, .deadline_s = 300, .ship = 1, .log = say};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_eq(gpu_pool_wait_ready(p, 60), 2);
    const cJSON *dev = cJSON_GetObjectItem(gpu_pool_hello(p, 1), "device");
    if (!dt_json_bool(dev, "present", 0)) {
        gpu_pool_free(p);
        dt_loop_free(l);
        free(la);
        tu_rmtree(dir);
        free(dir);
        cr_skip_test("no GPU");
    }
    cJSON *lr = cJSON_Parse("{\"req\":\"load_matrix\",\"matrix\":\"gen:banded:rows=20000,bw=3\"}");
    cJSON *rep = gpu_pool_load(p, "m", lr, 0);
    cr_assert(dt_json_bool(rep, "ok", 0));
    cJSON_Delete(rep);
    cJSON *c = on(l, p, "compile", 0);
    const cJSON *ce = cJSON_GetArrayItem(cJSON_GetObjectItem(c, "cubins"), 0);
    cr_assert_not_null(ce, "the compile reports no cubin: %s", cJSON_PrintUnformatted(c));
    cr_assert(!dt_json_bool(ce, "cached", 1));
    cJSON *m = on(l, p, "measure", 1);
    const cJSON *me;
    int hit = 0;
    cJSON_ArrayForEach(me, cJSON_GetObjectItem(m, "cubins"))
        hit |= dt_streq(dt_json_str(me, "key", ""), dt_json_str(ce, "key", "?")) &&
               dt_json_bool(me, "cached", 0);
    cr_assert(hit, "worker 1 compiled the kernel again: %s",
              cJSON_PrintUnformatted(cJSON_GetObjectItem(m, "cubins")));
    gpu_cubin_stats st;
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.sent, 1);
    cr_assert_eq(st.refused, 0);
    cJSON_Delete(c);
    cJSON_Delete(m);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
    tu_rmtree(dir);
    free(dir);
}
