/* test_client.c -- the worker pool with real processes: replies, a worker
 * killed by SIGKILL, a hang past the deadline, a kernel fault, a launcher
 * that cannot start, and matrices reloaded after a restart. */
#include "tests/common/testutil.h"

#include "gpu/gpu.h"
#include "gpu/ship.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *fake_launcher(void)
{
    return dt_xasprintf("%s/tests/worker/fake-worker.sh", tu_src_dir());
}

static char *real_launcher(void)
{
    return dt_xasprintf("'%s' worker --device {device}", tu_ditto_bin());
}

static void quiet(int w, const char *line, void *ud)
{
    (void)w;
    (void)line;
    (void)ud;
}

static gpu_pool *pool_max(dt_loop *l, const char *launcher, int workers, double max_deadline)
{
    gpu_pool_opts o = {.workers = workers, .launcher = launcher, .deadline_s = 60,
                       .start_deadline_s = 20, .max_deadline_s = max_deadline, .log = quiet};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    return p;
}

static gpu_pool *pool(dt_loop *l, const char *launcher, int workers)
{
    return pool_max(l, launcher, workers, 0);
}

static cJSON *req(const char *name)
{
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", name);
    return r;
}

static void expect_ok(cJSON *rep)
{
    char buf[512];
    cr_assert(dt_json_bool(rep, "ok", 0), "%s", gpu_reply_error(rep, buf, sizeof buf));
}

Test(client, requests_should_flow_through_a_real_worker)
{
    dt_loop *l = dt_loop_new();
    char *la = real_launcher();
    gpu_pool *p = pool(l, la, 1);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 1);
    cr_assert_not_null(gpu_pool_hello(p, 0));
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "gen:banded:rows=2000,bw=3");
    cJSON *rep = gpu_pool_load(p, "m1", lr, 0);
    expect_ok(rep);
    cJSON_Delete(rep);
    cJSON *rr = req("reference");
    dt_json_set_str(rr, "matrix", "m1");
    rep = gpu_pool_call(p, rr, 0);
    expect_ok(rep);
    cr_assert_eq(dt_json_num(rep, "outputs", 0), 2000);
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_restarts(p), 0);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_hang_past_the_deadline_should_time_out_and_the_pool_carry_on)
{
    dt_loop *l = dt_loop_new();
    char *la = fake_launcher();
    gpu_pool *p = pool(l, la, 1);
    double t0 = dt_now();
    cJSON *rep = gpu_pool_call(p, req("sleep"), 1.0);
    double took = dt_now() - t0;
    cr_assert_str_eq(dt_json_str(rep, "error", ""), "timeout");
    cr_assert_str_eq(dt_json_str(rep, "message", ""), "timeout after 1 s");
    cr_assert(took < 10, "took %.1f s", took);
    cJSON_Delete(rep);
    rep = gpu_pool_call(p, req("ping"), 10);
    expect_ok(rep);
    cr_assert_str_eq(dt_json_str(rep, "echo", ""), "ping");
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_restarts(p), 1);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_worker_killed_by_sigkill_should_fail_only_its_request)
{
    dt_loop *l = dt_loop_new();
    char *la = fake_launcher();
    gpu_pool *p = pool(l, la, 1);
    cJSON *rep = gpu_pool_call(p, req("die"), 10);
    cr_assert_str_eq(dt_json_str(rep, "error", ""), "worker_exited");
    cr_assert_str_eq(dt_json_str(rep, "message", ""), "worker exited: signal 9");
    cr_assert(dt_json_bool(rep, "retried", 0)); /* it died on the fresh worker too */
    cJSON_Delete(rep);
    rep = gpu_pool_call(p, req("ping"), 10);
    expect_ok(rep);
    cJSON_Delete(rep);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_kernel_fault_should_be_reported_as_such_and_the_worker_restarted)
{
    dt_loop *l = dt_loop_new();
    char *la = fake_launcher();
    gpu_pool *p = pool(l, la, 1);
    cJSON *rep = gpu_pool_call(p, req("fault"), 10);
    char buf[256];
    cr_assert_str_eq(gpu_reply_error(rep, buf, sizeof buf), "kernel_fault: illegal address");
    cJSON_Delete(rep);
    /* The next request must not be sent to the exiting worker. */
    rep = gpu_pool_call(p, req("ping"), 10);
    expect_ok(rep);
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_restarts(p), 1);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_launcher_that_cannot_start_should_fail_requests_clearly)
{
    dt_loop *l = dt_loop_new();
    gpu_pool *p = pool(l, "/nonexistent/ditto worker", 1);
    cr_assert_eq(gpu_pool_wait_ready(p, 20), 0);
    cJSON *rep = gpu_pool_call(p, req("hello"), 5);
    cr_assert_str_eq(dt_json_str(rep, "error", ""), "worker_start");
    cr_assert(strstr(dt_json_str(rep, "message", ""), "cannot start"), "%s",
              dt_json_str(rep, "message", ""));
    cJSON_Delete(rep);
    gpu_pool_free(p);
    dt_loop_free(l);
}

Test(client, a_restarted_worker_should_reload_the_pool_matrices)
{
    dt_loop *l = dt_loop_new();
    char *la = real_launcher();
    gpu_pool *p = pool(l, la, 1);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 1);
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "gen:uniform:rows=3000,nnz=30000");
    cJSON *rep = gpu_pool_load(p, "m", lr, 0);
    expect_ok(rep);
    cJSON_Delete(rep);
    pid_t pid = (pid_t)dt_json_num(gpu_pool_hello(p, 0), "pid", 0);
    cr_assert(pid > 0);
    /* A request in flight while the worker is killed from outside. */
    cJSON *rr = req("reference");
    dt_json_set_str(rr, "matrix", "m");
    dt_json_set_str(rr, "op", "spmm");
    dt_json_set_int(rr, "n", 4096);
    kill(pid, SIGKILL);
    /* Retried once on the fresh worker, after the matrix was replayed. */
    rep = gpu_pool_call(p, rr, 30);
    expect_ok(rep);
    cr_assert(dt_json_bool(rep, "retried", 0));
    cJSON_Delete(rep);
    /* The restarted worker has the matrix again. */
    rr = req("reference");
    dt_json_set_str(rr, "matrix", "m");
    rep = gpu_pool_call(p, rr, 30);
    expect_ok(rep);
    cr_assert_eq(dt_json_num(rep, "outputs", 0), 3000);
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_restarts(p), 1);
    cr_assert_neq((pid_t)dt_json_num(gpu_pool_hello(p, 0), "pid", 0), pid);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, two_workers_should_share_the_queue)
{
    dt_loop *l = dt_loop_new();
    char *la = fake_launcher();
    gpu_pool *p = pool(l, la, 2);
    cr_assert_eq(gpu_pool_wait_ready(p, 20), 2);
    /* One worker hangs; the other must still answer. */
    long hung = gpu_pool_submit(p, req("sleep"), 0, 30, NULL, NULL);
    cJSON *rep = gpu_pool_call(p, req("ping"), 10);
    expect_ok(rep);
    cJSON_Delete(rep);
    gpu_pool_cancel(p, hung);
    cr_assert_eq(gpu_pool_pending(p), 0);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_matrix_loaded_by_a_plain_request_should_be_replayed_after_a_restart)
{
    dt_loop *l = dt_loop_new();
    char *la = real_launcher();
    gpu_pool *p = pool(l, la, 1);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 1);
    /* as the pipeline loads it: a load_matrix submitted like any request */
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "gen:banded:rows=1500,bw=2");
    dt_json_set_str(lr, "handle", "m");
    cJSON *rep = gpu_pool_call(p, lr, 30);
    expect_ok(rep);
    cJSON_Delete(rep);
    pid_t pid = (pid_t)dt_json_num(gpu_pool_hello(p, 0), "pid", 0);
    kill(pid, SIGKILL);
    /* let the pool notice and restart it before the next request */
    for (int i = 0; i < 100 && gpu_pool_restarts(p) == 0; i++)
        dt_loop_run_once(l, 100);
    cr_assert_eq(gpu_pool_restarts(p), 1);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 1);
    cJSON *rr = req("reference");
    dt_json_set_str(rr, "matrix", "m");
    rep = gpu_pool_call(p, rr, 30);
    expect_ok(rep);
    cr_assert_eq(dt_json_num(rep, "outputs", 0), 1500);
    cr_assert_not(dt_json_bool(rep, "retried", 0));
    cJSON_Delete(rep);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

static void expect_protocol_error(const char *name, const char *says)
{
    dt_loop *l = dt_loop_new();
    char *la = fake_launcher();
    gpu_pool *p = pool(l, la, 1);
    cJSON *rep = gpu_pool_call(p, req(name), 10);
    /* refused twice: on the first worker and on the fresh one */
    cr_assert_str_eq(dt_json_str(rep, "error", ""), "protocol");
    cr_assert(strstr(dt_json_str(rep, "message", ""), says), "%s", dt_json_str(rep, "message", ""));
    cr_assert(dt_json_bool(rep, "retried", 0));
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_restarts(p), 2);
    rep = gpu_pool_call(p, req("ping"), 10);
    expect_ok(rep);
    cJSON_Delete(rep);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_reply_with_the_wrong_id_should_kill_the_worker_as_a_protocol_error)
{
    expect_protocol_error("misid", "reply id");
}

Test(client, a_reply_without_an_id_should_kill_the_worker_as_a_protocol_error)
{
    expect_protocol_error("noid", "without an id");
}

Test(client, a_line_that_is_not_json_should_kill_the_worker_as_a_protocol_error)
{
    expect_protocol_error("garble", "no JSON object");
}

Test(client, a_max_deadline_should_cap_a_longer_deadline_asked_for)
{
    dt_loop *l = dt_loop_new();
    char *la = fake_launcher();
    gpu_pool *p = pool_max(l, la, 1, 1.0);
    double t0 = dt_now();
    cJSON *rep = gpu_pool_call(p, req("sleep"), 60);
    cr_assert_str_eq(dt_json_str(rep, "error", ""), "timeout");
    cr_assert_str_eq(dt_json_str(rep, "message", ""), "timeout after 1 s");
    cr_assert(dt_now() - t0 < 10);
    cJSON_Delete(rep);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

typedef struct ref_slot {
    int done, ok;
} ref_slot;

static void ref_done(gpu_pool *p, const cJSON *reply, void *ud)
{
    (void)p;
    ref_slot *s = ud;
    s->done = 1;
    s->ok = dt_json_bool(reply, "ok", 0);
}

Test(client, a_matrix_loaded_on_one_worker_should_reach_every_worker, .timeout = 120)
{
    dt_loop *l = dt_loop_new();
    char *la = real_launcher();
    gpu_pool *p = pool(l, la, 2);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 2);
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "gen:banded:rows=1200,bw=2");
    dt_json_set_str(lr, "handle", "m");
    cJSON *rep = gpu_pool_call(p, lr, 30);
    expect_ok(rep);
    cJSON_Delete(rep);
    /* one request pinned on each worker: both must know "m" */
    ref_slot s[2] = {{0, 0}, {0, 0}};
    for (int i = 0; i < 2; i++) {
        cJSON *rr = req("reference");
        dt_json_set_str(rr, "matrix", "m");
        gpu_pool_submit(p, rr, i, 30, ref_done, &s[i]);
    }
    while (!(s[0].done && s[1].done))
        dt_loop_run_once(l, 100);
    cr_assert(s[0].ok && s[1].ok, "worker 0 %s, worker 1 %s", s[0].ok ? "ok" : "failed",
              s[1].ok ? "ok" : "failed");
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

/* ---- shipping matrices to workers that cannot see them -------------------------------- */

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

typedef struct log_cap {
    dt_buf text;
} log_cap;

static void capture(int w, const char *line, void *ud)
{
    log_cap *c = ud;
    dt_buf_printf(&c->text, "worker %d: %s\n", w, line);
}

/* A Matrix Market file of about `rows` x 5 entries (a band), in dir. */
static char *band_matrix(const char *dir, const char *name, int rows)
{
    dt_buf b = DT_BUF_INIT;
    dt_buf_printf(&b, "%%%%MatrixMarket matrix coordinate real general\n%d %d %d\n", rows, rows,
                  5 * rows - 6);
    for (int i = 1; i <= rows; i++)
        for (int d = -2; d <= 2; d++)
            if (i + d >= 1 && i + d <= rows)
                dt_buf_printf(&b, "%d %d %.17g\n", i, i + d, 0.5 + (i * 7 + d) % 13 / 13.0);
    char *p = tu_write(dir, name, dt_buf_str(&b));
    dt_buf_free(&b);
    return p;
}

/* Workers started in / (env -C), each with its own store: a relative path
 * of the client's folder is nothing they can see. */
static gpu_pool *blind_pool(dt_loop *l, const char *dir, int workers, log_cap *cap)
{
    char *la =
        dt_xasprintf("env -C / XDG_CACHE_HOME='%s/store{device}' '%s' worker --device {device}",
                     dir, tu_ditto_bin());
    gpu_pool_opts o = {.workers = workers,
                       .launcher = la,
                       .deadline_s = 60,
                       .start_deadline_s = 20,
                       .log = capture,
                       .log_ud = cap};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    free(la);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), workers);
    return p;
}

static size_t count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *s = strstr(hay, needle); s; s = strstr(s + 1, needle))
        n++;
    return n;
}

Test(client, a_worker_that_cannot_see_a_matrix_should_receive_it_once_by_hash, .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *abs = band_matrix(dir, "band.mtx", 2000);
    cr_assert_eq(chdir(dir), 0);
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool *p = blind_pool(l, dir, 2, &cap);
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "band.mtx"); /* relative: only the client sees it */
    cJSON *rep = gpu_pool_load(p, "m", lr, 0);
    expect_ok(rep);
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(rep, "report"), "rows", 0), 2000);
    char fp[17];
    snprintf(fp, sizeof fp, "%s", dt_json_str(rep, "fingerprint", ""));
    cJSON_Delete(rep);
    int64_t bytes = 0;
    cr_assert_eq(gpu_pool_shipments(p, &bytes), 2, "%s", dt_buf_str(&cap.text));
    size_t len = 0;
    char *orig = dt_read_file(abs, &len, NULL);
    cr_assert_eq(bytes, 2 * (int64_t)len);
    /* Stored under its hash on each worker's host, byte for byte. */
    char hash[17];
    int64_t size;
    dt_err e = {0};
    cr_assert_eq(ship_hash_file(abs, hash, &size, &e), 0, "%s", e.msg);
    for (int w = 0; w < 2; w++) {
        char *stored = dt_xasprintf("%s/store%d/ditto/blob/%s/band.mtx", dir, w, hash);
        size_t slen = 0;
        char *copy = dt_read_file(stored, &slen, NULL);
        cr_assert_not_null(copy, "%s missing", stored);
        cr_assert(slen == len && memcmp(copy, orig, len) == 0);
        free(copy);
        free(stored);
    }
    /* Every worker answers from the shipped copy (the same fingerprint). */
    for (int w = 0; w < 2; w++) {
        cJSON *rr = req("reference");
        dt_json_set_str(rr, "matrix", "m");
        long id = gpu_pool_submit(p, rr, w, 0, NULL, NULL);
        cr_assert(id > 0);
    }
    /* Again under another handle: each worker holds it, nothing is sent. */
    lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "band.mtx");
    rep = gpu_pool_load(p, "m2", lr, 0);
    expect_ok(rep);
    cr_assert_str_eq(dt_json_str(rep, "fingerprint", ""), fp);
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_shipments(p, NULL), 2, "%s", dt_buf_str(&cap.text));
    cr_assert_eq(count_of(dt_buf_str(&cap.text), "it cannot see the path"), 2,
                 "once per worker, on the first load only: %s", dt_buf_str(&cap.text));
    /* A worker restarted: the replay finds the file in its host's store. */
    cr_assert_eq(gpu_pool_pending(p), 0);
    pid_t pid = (pid_t)dt_json_num(gpu_pool_hello(p, 0), "pid", 0);
    kill(pid, SIGKILL);
    cJSON *rr = req("reference");
    dt_json_set_str(rr, "matrix", "m2");
    call_slot cs = {NULL, 0};
    gpu_pool_submit(p, rr, 0, 30, call_done, &cs); /* on the restarted worker */
    while (!cs.done)
        dt_loop_run_once(l, 1000);
    expect_ok(cs.reply);
    cr_assert_eq(dt_json_num(cs.reply, "worker", -1), 0);
    cJSON_Delete(cs.reply);
    cr_assert_eq(gpu_pool_shipments(p, NULL), 2, "%s", dt_buf_str(&cap.text));
    cr_assert(strstr(dt_buf_str(&cap.text), "already holds it"), "%s", dt_buf_str(&cap.text));
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    free(orig);
    free(abs);
    tu_rmtree(dir);
    free(dir);
}

Test(client, a_large_matrix_should_be_shipped_in_bounded_chunks_with_progress, .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *abs = band_matrix(dir, "big.mtx", 200000); /* about 6 MB: six chunks or more */
    cr_assert_eq(chdir(dir), 0);
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool *p = blind_pool(l, dir, 1, &cap);
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "big.mtx");
    dt_json_set_str(lr, "handle", "m");
    /* While it waits for its file, the load counts as pending. */
    call_slot cs = {NULL, 0};
    gpu_pool_submit(p, lr, 0, 0, call_done, &cs);
    int parked = 0, parked_pending = 0;
    while (!cs.done) {
        const char *t = dt_buf_str(&cap.text);
        if (strstr(t, "to this worker") && !strstr(t, "stored, hash checked")) {
            parked++;
            parked_pending += gpu_pool_pending(p) == 1;
        }
        dt_loop_run_once(l, 1000);
    }
    cr_assert(parked > 0 && parked_pending == parked, "%d of %d", parked_pending, parked);
    cJSON *rep = cs.reply;
    expect_ok(rep);
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(rep, "report"), "nnz", 0), 5 * 200000 - 6);
    cJSON_Delete(rep);
    size_t len = 0;
    char *orig = dt_read_file(abs, &len, NULL);
    cr_assert(len > 5 * 1024 * 1024, "%zu", len);
    int64_t bytes = 0;
    cr_assert_eq(gpu_pool_shipments(p, &bytes), 1);
    cr_assert_eq(bytes, (int64_t)len);
    const char *t = dt_buf_str(&cap.text);
    cr_assert(strstr(t, ": 25%") && strstr(t, ": 50%") && strstr(t, ": 75%"), "%s", t);
    cr_assert(strstr(t, "stored, hash checked"), "%s", t);
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    free(orig);
    free(abs);
    tu_rmtree(dir);
    free(dir);
}

Test(client, a_file_no_worker_or_client_can_read_should_fail_its_load_naming_it)
{
    char *dir = tu_tmpdir();
    cr_assert_eq(chdir(dir), 0);
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool *p = blind_pool(l, dir, 1, &cap);
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "nowhere.mtx");
    cJSON *rep = gpu_pool_load(p, "m", lr, 0);
    cr_assert_not(dt_json_bool(rep, "ok", 1));
    cr_assert_str_eq(dt_json_str(rep, "error", ""), "not_found");
    cr_assert(strstr(dt_json_str(rep, "message", ""), "nowhere.mtx: cannot read it to ship it"),
              "%s", dt_json_str(rep, "message", ""));
    cJSON_Delete(rep);
    cr_assert_eq(gpu_pool_shipments(p, NULL), 0);
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    tu_rmtree(dir);
    free(dir);
}

/* ---- a lost worker: its job elsewhere, its restarts spaced ----------------------------- */

Test(client, a_job_of_a_worker_that_dies_should_be_retried_on_another_worker, .timeout = 120)
{
    dt_loop *l = dt_loop_new();
    char *la = real_launcher();
    gpu_pool *p = pool(l, la, 2);
    cr_assert_eq(gpu_pool_wait_ready(p, 30), 2);
    cJSON *lr = req("load_matrix");
    dt_json_set_str(lr, "matrix", "gen:uniform:rows=3000,nnz=30000");
    cJSON *rep = gpu_pool_load(p, "m", lr, 0);
    expect_ok(rep);
    cJSON_Delete(rep);
    pid_t pid = (pid_t)dt_json_num(gpu_pool_hello(p, 0), "pid", 0);
    /* Both idle: the first worker takes it; it is killed under it. */
    cJSON *rr = req("reference");
    dt_json_set_str(rr, "matrix", "m");
    dt_json_set_str(rr, "op", "spmm");
    dt_json_set_int(rr, "n", 4096);
    call_slot s = {NULL, 0};
    gpu_pool_submit(p, rr, -1, 30, call_done, &s);
    kill(pid, SIGKILL);
    while (!s.done)
        dt_loop_run_once(l, 1000);
    expect_ok(s.reply);
    cr_assert(dt_json_bool(s.reply, "retried", 0));
    cr_assert_eq(dt_json_num(s.reply, "worker", -1), 1, "retried on the worker that was up");
    cJSON_Delete(s.reply);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
}

Test(client, a_worker_that_keeps_dying_should_be_restarted_with_growing_delays, .timeout = 60)
{
    /* Says hello, then dies at its first request, every time. */
    char *dir = tu_tmpdir();
    char *log = dt_xasprintf("%s/starts", dir);
    char *la =
        dt_xasprintf("env FAKE_WORKER_LOG='%s' %s/tests/worker/fake-worker.sh", log, tu_src_dir());
    dt_loop *l = dt_loop_new();
    log_cap cap = {DT_BUF_INIT};
    gpu_pool_opts o = {.workers = 1,
                       .launcher = la,
                       .deadline_s = 10,
                       .start_deadline_s = 10,
                       .log = capture,
                       .log_ud = &cap};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &o, &e);
    cr_assert_not_null(p, "%s", e.msg);
    double t0 = dt_now();
    for (int i = 0; i < 3; i++) {
        cJSON *rep = gpu_pool_call(p, req("die"), 20);
        cr_assert_str_eq(dt_json_str(rep, "error", ""), "worker_exited");
        cJSON_Delete(rep);
    }
    cJSON *rep = gpu_pool_call(p, req("ping"), 10);
    expect_ok(rep);
    cJSON_Delete(rep);
    double took = dt_now() - t0;
    /* 6 deaths in a row (each request is retried once): no wait after the
     * first, then 0.25, 0.5, 1, 2 and 4 s: 7.75 s in all, where immediate
     * restarts take well under one. */
    const char *t = dt_buf_str(&cap.text);
    cr_assert(strstr(t, "restarting it in 0.25 s") && strstr(t, "restarting it in 4.00 s"), "%s",
              t);
    cr_assert(took >= 7.5, "%.2f s: %s", took, t);
    cr_assert_eq(gpu_pool_restarts(p), 6);
    gpu_pool_free(p);
    dt_loop_free(l);
    dt_buf_free(&cap.text);
    free(la);
    free(log);
    tu_rmtree(dir);
    free(dir);
}
