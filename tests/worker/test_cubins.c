/* test_cubins.c -- compiled kernels shared between hosts (gpu/PROTOCOL.md,
 * "Sharing compiled kernels"): a worker gives the cubins it compiled and
 * takes those the client sends, checked by hash; the pool sends a worker
 * on another "host" (its own cache folder) what another compiled, keeps
 * nothing corrupted, and counts hits and compiles; the disk cache is
 * capped. Real workers and NVRTC, no GPU. */
#include "tests/common/testutil.h"

#include "gpu/cubincache.h"
#include "gpu/cubinstore.h"
#include "gpu/gpu.h"
#include "gpu/ship.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/* A kernel whose contract bakes in the matrix's row count. */
#define KERNEL_JSON                                                                                \
    "{\"name\":\"k.cu\",\"source\":\"/*@contract {\\\"entry\\\": \\\"k\\\", \\\"params\\\": "      \
    "[\\\"y\\\"], \\\"block\\\": [32], \\\"grid\\\": [1], \\\"defines\\\": {\\\"ROWS\\\": "        \
    "\\\"rows\\\"}} @*/\\nextern \\\"C\\\" __global__ void k(DITTO_T *y) { y[threadIdx.x] = "      \
    "(DITTO_T)ROWS; }\\n\"}"

/* Run one worker over lines with XDG_CACHE_HOME=dir/cache; its replies. */
static cJSON *worker_talk(const char *dir, const char *lines)
{
    char *f = tu_write(dir, "in.jsonl", lines);
    tu_proc p = tu_run("XDG_CACHE_HOME='%s/cache' '%s' worker < '%s'", dir, tu_ditto_bin(), f);
    cr_assert_eq(p.status, 0, "worker exit %d; stderr: %s", p.status, p.err);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *l = strtok_r(p.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "not JSON: %s", l);
        cJSON_AddItemToArray(arr, j);
    }
    tu_proc_free(&p);
    free(f);
    return arr;
}

static const char compile_line[] =
    "{\"id\":1,\"req\":\"compile\",\"name\":\"k.cu\",\"want_cubins\":true,\"source\":\"extern "
    "\\\"C\\\" __global__ void k(float *y) { y[threadIdx.x] = 3.0f; }\\n\"%s}\n";

static void skip_without_nvrtc(const cJSON *rep)
{
    if (dt_streq(dt_json_str(rep, "error", ""), "compile_failed"))
        cr_skip_test("NVRTC not available here");
}

Test(cubins, a_worker_should_give_what_it_compiled_and_take_only_an_intact_cubin)
{
    char *a = tu_tmpdir(), *b = tu_tmpdir(), *c = tu_tmpdir();
    char *line = dt_xasprintf(compile_line, "");
    cJSON *ra = worker_talk(a, line);
    cJSON *first = cJSON_GetArrayItem(ra, 0);
    skip_without_nvrtc(first);
    cr_assert(dt_json_bool(first, "compiled", 0), "%s", dt_json_str(first, "message", ""));
    cr_assert(!dt_json_bool(first, "cached", 1));
    /* Asked for: the entry of what it compiled, with the image. */
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(first, "cubins"), 0);
    cr_assert_not_null(e, "no cubins in %s", cJSON_PrintUnformatted(first));
    cr_assert(!dt_json_bool(e, "cached", 1));
    size_t size = 0;
    char why[300] = "";
    unsigned char *img = gpu_cubincache_check(e, &size, why, sizeof why);
    cr_assert_not_null(img, "%s", why);
    char *stored = dt_xasprintf("%s/cache/ditto/cubin/%s.cubin", a, dt_json_str(e, "key", ""));
    size_t slen = 0;
    char *orig = dt_read_file(stored, &slen, NULL);
    cr_assert(orig != NULL && slen == size && memcmp(orig, img, size) == 0);

    /* One base64 character changed: refused by its hash, compiled afresh. */
    cJSON *bad = cJSON_Duplicate(e, 1);
    char *d = dt_xstrdup(dt_json_str(bad, "data", ""));
    d[40] = d[40] == 'A' ? 'B' : 'A';
    dt_json_set_str(bad, "data", d);
    char *bj = cJSON_PrintUnformatted(bad);
    char *extra = dt_xasprintf(",\"cubins\":[%s,{\"key\":\"../../etc\",\"data\":\"x\"}]", bj);
    char *bline = dt_xasprintf(compile_line, extra);
    cJSON *rb = worker_talk(b, bline);
    cJSON *got = cJSON_GetArrayItem(rb, 0);
    cr_assert(dt_json_bool(got, "compiled", 0));
    cr_assert(!dt_json_bool(got, "cached", 1), "a corrupted cubin was used");
    const cJSON *ref = cJSON_GetObjectItem(got, "cubins_refused");
    cr_assert_eq(cJSON_GetArraySize(ref), 2, "%s", cJSON_PrintUnformatted(got));
    cr_assert(strstr(dt_json_str(cJSON_GetArrayItem(ref, 0), "reason", ""), "hash differs"), "%s",
              cJSON_PrintUnformatted(ref));
    cr_assert(strstr(dt_json_str(cJSON_GetArrayItem(ref, 1), "reason", ""), "key"));
    /* What it stored is its own compile, byte for byte the right image. */
    char *bstored = dt_xasprintf("%s/cache/ditto/cubin/%s.cubin", b, dt_json_str(e, "key", ""));
    char *bcopy = dt_read_file(bstored, &slen, NULL);
    cr_assert(bcopy != NULL && slen == size && memcmp(bcopy, img, size) == 0);

    /* Intact: stored, and the compile is a cache hit. */
    char *gj = cJSON_PrintUnformatted(e);
    char *gextra = dt_xasprintf(",\"cubins\":[%s]", gj);
    char *gline = dt_xasprintf(compile_line, gextra);
    cJSON *rc = worker_talk(c, gline);
    got = cJSON_GetArrayItem(rc, 0);
    cr_assert_null(cJSON_GetObjectItem(got, "cubins_refused"), "%s", cJSON_PrintUnformatted(got));
    cr_assert(dt_json_bool(got, "cached", 0), "the cubin sent was not used");
    cr_assert_eq(dt_json_num(got, "seconds", 1), 0);
    cr_assert_null(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(got, "cubins"), 0), "data"),
        "a cached cubin is not sent back");
    cJSON_Delete(ra);
    cJSON_Delete(rb);
    cJSON_Delete(rc);
    cJSON_Delete(bad);
    free(img), free(orig), free(stored), free(d), free(bj), free(extra), free(bline);
    free(bstored), free(bcopy), free(gj), free(gextra), free(gline), free(line);
    tu_rmtree(a), tu_rmtree(b), tu_rmtree(c);
    free(a), free(b), free(c);
}

/* ---- through the pool ------------------------------------------------------------------ */

typedef struct log_cap {
    dt_buf text;
} log_cap;

static void capture(int w, const char *line, void *ud)
{
    log_cap *c = ud;
    dt_buf_printf(&c->text, "worker %d: %s\n", w, line);
}

/* Two workers, each its own "host" (cache folder dir/hN), sharing forced
 * on (they do share a host name); FILTER0/FILTER1 sit on worker N's
 * stdout or stdin when given (a damaged channel). */
static gpu_pool *two_hosts(dt_loop *l, const char *dir, const char *in1, const char *out0,
                           log_cap *cap)
{
    char *script = dt_xasprintf(
        "f_in() { %s; }\nf_out() { %s; }\n"
        "if [ \"$1\" = 1 ]; then f_in; else cat; fi | XDG_CACHE_HOME='%s/h'\"$1\" '%s' worker |\n"
        "if [ \"$1\" = 0 ]; then f_out; else cat; fi\n",
        in1 ? in1 : "cat", out0 ? out0 : "cat", dir, tu_ditto_bin());
    char *sp = tu_write(dir, "launch.sh", script);
    char *la = dt_xasprintf("sh '%s' {device}", sp);
    free(script);
    free(sp);
    gpu_pool_opts o = {.workers = 2,
                       .launcher = la,
                       .deadline_s = 60,
                       .start_deadline_s = 20,
                       .ship = 1,
                       .log = capture,
                       .log_ud = cap};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    free(la);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 2);
    cJSON *lr = cJSON_Parse("{\"req\":\"load_matrix\",\"matrix\":\"gen:banded:rows=777,bw=2\"}");
    cJSON *rep = gpu_pool_load(p, "m", lr, 0);
    cr_assert(dt_json_bool(rep, "ok", 0), "%s", cJSON_PrintUnformatted(rep));
    cJSON_Delete(rep);
    return p;
}

typedef struct call_slot {
    cJSON *reply;
    int done;
} call_slot;

static void call_done(gpu_pool *p, const cJSON *reply, void *ud)
{
    (void)p;
    call_slot *s = ud;
    s->reply = cJSON_Duplicate(reply, 1);
    s->done = 1;
}

/* The kernel compiled for matrix m on worker w. */
static cJSON *compile_on(dt_loop *l, gpu_pool *p, int w)
{
    cJSON *r = cJSON_Parse(
        "{\"req\":\"compile\",\"matrix\":\"m\",\"op\":\"spmv\",\"kernel\":" KERNEL_JSON "}");
    cr_assert_not_null(r);
    call_slot s = {NULL, 0};
    gpu_pool_submit(p, r, w, 60, call_done, &s);
    while (!s.done)
        dt_loop_run_once(l, 1000);
    cr_assert_eq(dt_json_num(s.reply, "worker", -1), w);
    return s.reply;
}

static char *cubin_file(const char *dir, int host, const cJSON *rep)
{
    const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(rep, "cubins"), 0);
    return dt_xasprintf("%s/h%d/ditto/cubin/%s.cubin", dir, host, dt_json_str(e, "key", "?"));
}

Test(cubins, a_kernel_compiled_on_one_host_should_reach_another_without_a_recompile, .timeout = 120)
{
    char *dir = tu_tmpdir();
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool *p = two_hosts(l, dir, NULL, NULL, &cap);
    cJSON *r0 = compile_on(l, p, 0);
    skip_without_nvrtc(r0);
    cr_assert(dt_json_bool(r0, "compiled", 0), "%s", cJSON_PrintUnformatted(r0));
    cr_assert(!dt_json_bool(r0, "cached", 1));
    const cJSON *e0 = cJSON_GetArrayItem(cJSON_GetObjectItem(r0, "cubins"), 0);
    cr_assert_not_null(e0);
    cr_assert_null(cJSON_GetObjectItem(e0, "data"), "the image reached the caller");
    cJSON *r1 = compile_on(l, p, 1);
    cr_assert(dt_json_bool(r1, "compiled", 0));
    cr_assert(dt_json_bool(r1, "cached", 0), "worker 1 compiled again: %s", dt_buf_str(&cap.text));
    gpu_cubin_stats st;
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.misses, 1);
    cr_assert_eq(st.hits, 1);
    cr_assert_eq(st.fetched, 1);
    cr_assert_eq(st.sent, 1);
    cr_assert_eq(st.refused, 0);
    cr_assert_gt(st.sent_bytes, 1000);
    cr_assert_eq(st.sent_bytes, st.fetched_bytes);
    /* The same bytes in both hosts' caches. */
    char *f0 = cubin_file(dir, 0, r0), *f1 = cubin_file(dir, 1, r1);
    size_t n0 = 0, n1 = 0;
    char *b0 = dt_read_file(f0, &n0, NULL), *b1 = dt_read_file(f1, &n1, NULL);
    cr_assert(b0 && b1 && n0 == n1 && memcmp(b0, b1, n0) == 0, "%s / %s", f0, f1);
    /* Once there, it is not sent again. */
    cJSON *r2 = compile_on(l, p, 1);
    cr_assert(dt_json_bool(r2, "cached", 0));
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.sent, 1);
    cr_assert_eq(st.hits, 2);
    cJSON_Delete(r0), cJSON_Delete(r1), cJSON_Delete(r2);
    free(f0), free(f1), free(b0), free(b1);
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    tu_rmtree(dir);
    free(dir);
}

/* The ELF magic's base64 ("f0VMR...") changed on the way. */
#define DAMAGE "sed -u 's/\"data\":\"f0VMR/\"data\":\"f0VMS/'"

Test(cubins, a_cubin_damaged_on_its_way_to_a_worker_should_be_refused_and_compiled_there,
     .timeout = 120)
{
    char *dir = tu_tmpdir();
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool *p = two_hosts(l, dir, DAMAGE, NULL, &cap);
    cJSON *r0 = compile_on(l, p, 0);
    skip_without_nvrtc(r0);
    cJSON *r1 = compile_on(l, p, 1);
    cr_assert(dt_json_bool(r1, "compiled", 0));
    cr_assert(!dt_json_bool(r1, "cached", 1), "a damaged cubin was used");
    gpu_cubin_stats st;
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.fetched, 1);
    cr_assert_eq(st.sent, 0);
    cr_assert_eq(st.refused, 1);
    cr_assert_eq(st.misses, 2);
    cr_assert(strstr(dt_buf_str(&cap.text), "refused by this worker: not an ELF image") ||
                  strstr(dt_buf_str(&cap.text), "refused by this worker: image hash differs"),
              "%s", dt_buf_str(&cap.text));
    char *f0 = cubin_file(dir, 0, r0), *f1 = cubin_file(dir, 1, r1);
    size_t n0 = 0, n1 = 0;
    char *b0 = dt_read_file(f0, &n0, NULL), *b1 = dt_read_file(f1, &n1, NULL);
    cr_assert(b0 && b1 && n0 == n1 && memcmp(b0, b1, n0) == 0, "worker 1's own compile");
    cJSON_Delete(r0), cJSON_Delete(r1);
    free(f0), free(f1), free(b0), free(b1);
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    tu_rmtree(dir);
    free(dir);
}

Test(cubins, a_cubin_damaged_on_its_way_to_the_client_should_not_be_kept, .timeout = 120)
{
    char *dir = tu_tmpdir();
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool *p = two_hosts(l, dir, NULL, DAMAGE, &cap);
    cJSON *r0 = compile_on(l, p, 0);
    skip_without_nvrtc(r0);
    cr_assert(dt_json_bool(r0, "compiled", 0));
    gpu_cubin_stats st;
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.fetched, 0);
    cr_assert_eq(st.refused, 1);
    cJSON *r1 = compile_on(l, p, 1);
    cr_assert(!dt_json_bool(r1, "cached", 1), "nothing should have been sent");
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.sent, 0);
    cr_assert_eq(st.fetched, 1, "worker 1's own compile is kept");
    cr_assert(strstr(dt_buf_str(&cap.text), "from this worker not kept"), "%s",
              dt_buf_str(&cap.text));
    cJSON_Delete(r0), cJSON_Delete(r1);
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    tu_rmtree(dir);
    free(dir);
}

Test(cubins, workers_on_one_host_should_not_exchange_cubins_unless_asked, .timeout = 120)
{
    /* ship auto, a local launcher, one host name: nothing is sent either
     * way (the disk cache is shared on a host); hits and compiles count. */
    char *dir = tu_tmpdir();
    dt_loop *l = dt_loop_new();
    char *la = dt_xasprintf("env XDG_CACHE_HOME='%s/h{device}' '%s' worker", dir, tu_ditto_bin());
    gpu_pool_opts o = {.workers = 2, .launcher = la, .deadline_s = 60, .start_deadline_s = 20};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 2);
    cJSON *lr = cJSON_Parse("{\"req\":\"load_matrix\",\"matrix\":\"gen:banded:rows=777,bw=2\"}");
    cJSON_Delete(gpu_pool_load(p, "m", lr, 0));
    cJSON *r0 = compile_on(l, p, 0);
    skip_without_nvrtc(r0);
    cJSON *r0b = compile_on(l, p, 0);
    cJSON *r1 = compile_on(l, p, 1);
    cr_assert(dt_json_bool(r0b, "cached", 0));
    cr_assert(!dt_json_bool(r1, "cached", 1));
    gpu_cubin_stats st;
    gpu_pool_cubin_stats(p, &st);
    cr_assert_eq(st.hits, 1);
    cr_assert_eq(st.misses, 2);
    cr_assert_eq(st.fetched + st.sent, 0);
    cJSON_Delete(r0), cJSON_Delete(r0b), cJSON_Delete(r1);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
    tu_rmtree(dir);
    free(dir);
}

/* ---- the disk cache's cap ------------------------------------------------------------------ */

static void entry_at(const char *dir, int i, size_t bytes, time_t when)
{
    char name[64];
    char *body = dt_xmalloc(bytes + 1);
    memset(body, 'x', bytes);
    body[bytes] = '\0';
    snprintf(name, sizeof name, "%016x.cubin", i);
    free(tu_write(dir, name, body));
    snprintf(name, sizeof name, "%016x.json", i);
    char *meta = tu_write(dir, name, "{}");
    struct timespec ts[2] = {{when, 0}, {when, 0}};
    cr_assert_eq(utimensat(AT_FDCWD, meta, ts, 0), 0);
    free(meta);
    free(body);
}

static int entry_there(const char *dir, int i)
{
    char *p = dt_xasprintf("%s/%016x.cubin", dir, i);
    char *q = dt_xasprintf("%s/%016x.json", dir, i);
    int a = dt_file_exists(p), b = dt_file_exists(q);
    free(p);
    free(q);
    cr_assert_eq(a, b, "entry %d half removed", i);
    return a;
}

Test(cubins, the_disk_cache_should_drop_its_least_recently_used_entries_past_its_cap)
{
    char *dir = tu_tmpdir();
    /* Ten entries of 1000 + 2 bytes, entry i last used at time 1000 + i,
     * but entry 0 used most recently of all. */
    for (int i = 0; i < 10; i++)
        entry_at(dir, i, 1000, i == 0 ? 5000 : 1000 + i);
    free(tu_write(dir, "README", "not an entry"));
    cr_assert_eq(gpu_cubincache_prune(dir, 20000), 0, "under the cap: nothing goes");
    /* Cap 6000 bytes: down to 90 % (5400), so five entries stay. */
    cr_assert_eq(gpu_cubincache_prune(dir, 6000), 5);
    cr_assert(entry_there(dir, 0), "the most recently used went");
    for (int i = 1; i <= 5; i++)
        cr_assert(!entry_there(dir, i), "entry %d (old) stayed", i);
    for (int i = 6; i < 10; i++)
        cr_assert(entry_there(dir, i), "entry %d (recent) went", i);
    char *readme = dt_xasprintf("%s/README", dir);
    cr_assert(dt_file_exists(readme), "a file that is no entry was removed");
    free(readme);
    tu_rmtree(dir);
    free(dir);
}

Test(cubins, the_cap_should_come_from_the_environment_within_bounds)
{
    setenv("DITTO_CUBIN_CACHE_MB", "3", 1);
    cr_assert_eq(gpu_cubincache_limit(), (int64_t)3 << 20);
    setenv("DITTO_CUBIN_CACHE_MB", "0", 1);
    cr_assert_eq(gpu_cubincache_limit(), (int64_t)GPU_CUBIN_DISK_DEFAULT_MB << 20);
    setenv("DITTO_CUBIN_CACHE_MB", "12x", 1);
    cr_assert_eq(gpu_cubincache_limit(), (int64_t)GPU_CUBIN_DISK_DEFAULT_MB << 20);
    unsetenv("DITTO_CUBIN_CACHE_MB");
    cr_assert(gpu_cubincache_arch_ok("sm_90") && gpu_cubincache_arch_ok("sm_100a"));
    cr_assert(!gpu_cubincache_arch_ok("compute_90") && !gpu_cubincache_arch_ok("sm_9") &&
              !gpu_cubincache_arch_ok("sm_90;rm") && !gpu_cubincache_arch_ok(NULL));
}

/* ---- the client's store ------------------------------------------------------------------ */

/* A reply entry for a fake cubin of `bytes` bytes (the ELF magic, then
 * byte i), its key i in hex. */
static cJSON *fake_entry(int i, size_t bytes)
{
    unsigned char *img = dt_xmalloc(bytes);
    memset(img, i, bytes);
    memcpy(img, "\177ELF", 4);
    char key[17], fnv[17];
    snprintf(key, sizeof key, "%016x", i);
    dt_hash_hex(dt_hash64(img, bytes, DT_HASH_SEED), fnv);
    cJSON *meta = dt_json_obj();
    dt_json_set_str(meta, "key", key);
    dt_json_set_int(meta, "size", (int64_t)bytes);
    dt_json_set_str(meta, "image_hash", fnv);
    cJSON *e = dt_json_obj();
    dt_json_set_str(e, "key", key);
    dt_json_set_bool(e, "cached", 0);
    dt_json_set_take(e, "meta", meta);
    char *b64 = ship_b64_encode(img, bytes);
    dt_json_set_str(e, "data", b64);
    free(b64);
    free(img);
    return e;
}

static void no_mark(const char *key, void *ud)
{
    (void)key;
    (void)ud;
}

static int holds_none(const char *key, void *ud)
{
    (void)key;
    (void)ud;
    return 0;
}

static void quiet_log(int w, const char *line, void *ud)
{
    (void)w;
    (void)line;
    (void)ud;
}

Test(cubins, the_client_store_should_stay_within_its_cap_and_hand_no_image_to_callers)
{
    /* Room for about three 10 KB images (base64 and metadata counted). */
    gpu_cubinstore *s = gpu_cubinstore_new(45000);
    cJSON *req = cJSON_Parse("{\"req\":\"compile\",\"source\":\"x\"}");
    cJSON *hello = cJSON_Parse("{\"device\":{\"present\":true,\"cc\":\"8.0\"},"
                               "\"libs\":{\"nvrtc\":{\"version\":\"13.0\"}}}");
    char id[4][17];
    for (int i = 0; i < 4; i++) {
        cJSON *r = dt_json_obj();
        dt_json_set_str(req, "source", i == 0 ? "a" : i == 1 ? "b" : i == 2 ? "c" : "d");
        cr_assert(gpu_cubinstore_ident(req, hello, NULL, id[i]));
        cJSON *arr = dt_json_arr();
        cJSON_AddItemToArray(arr, fake_entry(i + 1, 10000));
        dt_json_set_take(r, "cubins", arr);
        gpu_cubinstore_learn(s, id[i], req, r, no_mark, NULL, quiet_log, NULL, 0);
        const cJSON *e = cJSON_GetArrayItem(cJSON_GetObjectItem(r, "cubins"), 0);
        cr_assert_null(cJSON_GetObjectItem(e, "data"), "the image reached the caller");
        cr_assert_null(cJSON_GetObjectItem(e, "meta"));
        cr_assert_not_null(cJSON_GetObjectItem(e, "key"));
        cJSON_Delete(r);
    }
    gpu_cubin_stats st;
    gpu_cubinstore_stats(s, &st);
    cr_assert_eq(st.fetched, 4);
    cr_assert_eq(st.misses, 4);
    /* The first (least recently used) made room for the fourth. */
    cJSON *out = cJSON_Parse("{\"req\":\"compile\"}");
    cr_assert_eq(gpu_cubinstore_attach(s, id[0], out, holds_none, NULL), 0);
    for (int i = 1; i < 4; i++) {
        cr_assert_eq(gpu_cubinstore_attach(s, id[i], out, holds_none, NULL), 1, "entry %d", i);
        size_t size = 0;
        char why[300];
        unsigned char *img = gpu_cubincache_check(
            cJSON_GetArrayItem(cJSON_GetObjectItem(out, "cubins"), 0), &size, why, sizeof why);
        cr_assert_not_null(img, "%s", why);
        cr_assert_eq(size, 10000);
        cr_assert_eq(img[9999], i + 1);
        free(img);
    }
    cJSON_Delete(out);
    cJSON_Delete(req);
    cJSON_Delete(hello);
    gpu_cubinstore_free(s);
}

Test(cubins, a_compile_should_be_known_by_what_the_worker_compiles_and_nothing_else)
{
    cJSON *h90 = cJSON_Parse("{\"device\":{\"present\":true,\"cc\":\"9.0\"},"
                             "\"libs\":{\"nvrtc\":{\"version\":\"13.0\"}}}");
    cJSON *h80 = cJSON_Parse("{\"device\":{\"present\":true,\"cc\":\"8.0\"},"
                             "\"libs\":{\"nvrtc\":{\"version\":\"13.0\"}}}");
    cJSON *none = cJSON_Parse("{\"device\":{\"present\":false},"
                              "\"libs\":{\"nvrtc\":{\"version\":\"13.0\"}}}");
    cJSON *nv12 = cJSON_Parse("{\"device\":{\"present\":false},"
                              "\"libs\":{\"nvrtc\":{\"version\":\"12.8\"}}}");
    cJSON *m = cJSON_Parse("{\"req\":\"measure\",\"matrix\":\"m\",\"op\":\"spmv\",\"fast\":true,"
                           "\"kernel\":{\"source\":\"s\",\"params\":{\"A\":1}}}");
    cJSON *c =
        cJSON_Parse("{\"req\":\"compile\",\"matrix\":\"m\",\"op\":\"spmv\",\"arch\":\"sm_90\","
                    "\"kernel\":{\"source\":\"s\",\"params\":{\"A\":1}}}");
    cJSON *load = cJSON_Parse("{\"req\":\"load_matrix\",\"matrix\":\"a.mtx\",\"handle\":\"m\"}");
    cJSON *shipped = cJSON_Parse("{\"req\":\"load_matrix\",\"matrix\":\"a.mtx\",\"handle\":\"m\","
                                 "\"blob\":\"0123456789abcdef/a.mtx\"}");
    cJSON *other = cJSON_Parse("{\"req\":\"load_matrix\",\"matrix\":\"b.mtx\",\"handle\":\"m\"}");
    char a[17], b[17];
    /* A measure on an sm_90 GPU, a compile for sm_90 without one: the same. */
    cr_assert(gpu_cubinstore_ident(m, h90, load, a));
    cr_assert(gpu_cubinstore_ident(c, none, shipped, b));
    cr_assert_str_eq(a, b);
    /* Another GPU, another NVRTC, another matrix, another parameter: not. */
    cr_assert(gpu_cubinstore_ident(m, h80, load, b));
    cr_assert_str_neq(a, b);
    cr_assert(gpu_cubinstore_ident(c, nv12, load, b));
    cr_assert_str_neq(a, b);
    cr_assert(gpu_cubinstore_ident(m, h90, other, b));
    cr_assert_str_neq(a, b);
    cJSON_ReplaceItemInObject(cJSON_GetObjectItem(m, "kernel"), "params", cJSON_Parse("{\"A\":2}"));
    cr_assert(gpu_cubinstore_ident(m, h90, load, b));
    cr_assert_str_neq(a, b);
    /* A request that compiles nothing has no identity. */
    cJSON *ref = cJSON_Parse("{\"req\":\"reference\",\"matrix\":\"m\"}");
    cr_assert(!gpu_cubinstore_ident(ref, h90, load, b));
    cJSON_Delete(ref), cJSON_Delete(h90), cJSON_Delete(h80), cJSON_Delete(none), cJSON_Delete(nv12);
    cJSON_Delete(m), cJSON_Delete(c), cJSON_Delete(load), cJSON_Delete(shipped),
        cJSON_Delete(other);
}
