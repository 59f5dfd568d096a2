/* test_client.c -- the worker pool with real processes: replies, a worker
 * killed by SIGKILL, a hang past the deadline, a kernel fault, a launcher
 * that cannot start, and matrices reloaded after a restart. */
#include "tests/common/testutil.h"

#include "gpu/gpu.h"

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
