/* test_orch.c -- the orchestrator's state machine (agents/orch.c), driven
 * in-process through a scripted fake worker (tests/agents/fake-orch-worker.sh)
 * on the CPU path: every forward transition, the feedback edges (a compile
 * error, a failed verification, a kernel fault and a slow measurement go
 * back with feedback; a check violation re-plans), the iteration caps
 * (per edge, overall generate attempts, rejections per step kind), the
 * review decisions (reject with a reason, retry, edit, stop, approve the
 * rest, a review hook) and the resume points (after an approved, a failed,
 * a rejected and a cut-off step; edge counts carried over; a closed
 * session refused). Each test asserts the exact sequence of steps. */
#include "tests/common/testutil.h"

#include "agents/internal.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the fixture ------------------------------------------------------------------------- */

typedef struct ofx {
    char *dir;
    char *report; /* the PatternReport the fake worker answers load_matrix with */
    char *log;    /* the fake worker's request log */
    dt_loop *loop;
    gpu_pool *pool;
    sp_spec spec;
    ag_opts o;
    ag_run *run;
    cJSON *events; /* everything this run emitted, in order */
    int rule_fail; /* the custom rules report an error for this many more calls */
} ofx;

static void pool_quiet(int w, const char *line, void *ud)
{
    (void)w;
    (void)line;
    (void)ud;
}

static void collect(ag_run *r, const cJSON *ev, void *ud)
{
    (void)r;
    ofx *f = ud;
    cJSON_AddItemToArray(f->events, cJSON_Duplicate(ev, 1));
}

/* Custom rules (as Lua's ditto.rule): an error finding while rule_fail lasts. */
static cJSON *fake_rules(ag_run *r, const char *source, dt_buf *errors, void *ud)
{
    (void)r;
    (void)source;
    (void)errors;
    ofx *f = ud;
    cJSON *found = dt_json_arr();
    if (f->rule_fail > 0) {
        f->rule_fail--;
        cJSON_AddItemToArray(found, cJSON_Parse("{\"id\": \"fake.rule\", \"severity\": \"error\","
                                                " \"line\": 1, \"message\": \"FAKE-RULE no\"}"));
    }
    return found;
}

static void start_pool(ofx *f, const char *env)
{
    char *la = dt_xasprintf("env FAKE_ORCH_REPORT='%s' FAKE_ORCH_LOG='%s' %s "
                            "'%s/tests/agents/fake-orch-worker.sh'",
                            f->report, f->log, env, tu_src_dir());
    gpu_pool_opts po = {
        .workers = 1, .launcher = la, .deadline_s = 30, .start_deadline_s = 20, .log = pool_quiet};
    dt_err e = {0};
    f->pool = gpu_pool_new(f->loop, &po, &e);
    cr_assert_not_null(f->pool, "%s", e.msg);
    free(la);
}

/* A problem, a fake worker answering as env (FAKE_ORCH_* assignments) says,
 * and options every step reviewed automatically; the test may change f->o
 * before ofx_start. */
static void ofx_init(ofx *f, const char *env)
{
    memset(f, 0, sizeof *f);
    f->dir = tu_tmpdir();
    char *cache = dt_xasprintf("%s/cache", f->dir);
    setenv("XDG_CACHE_HOME", cache, 1); /* the tuner's cache: this test's own */
    setenv("DITTO_SELECTOR", "none", 1);
    free(cache);
    sp_spec_init(&f->spec);
    cJSON *sj = cJSON_Parse("{\"op\": \"spmv\", \"matrix\": "
                            "\"gen:uniform:rows=3000,nnz=30000,seed=2\", \"dtype\": \"fp32\"}");
    dt_buf probs = DT_BUF_INIT;
    cr_assert_eq(sp_spec_from_json(&f->spec, sj, "spec", &probs), 0, "%s", dt_buf_str(&probs));
    cJSON_Delete(sj);
    dt_buf_free(&probs);
    dt_err e = {0};
    sp_csr *a = sp_generate(f->spec.matrix, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_report rep;
    cr_assert_eq(sp_report_compute(a, f->spec.n, f->spec.n, &rep, &e), 0, "%s", e.msg);
    cJSON *rj = sp_report_json(&rep);
    char *text = dt_json_print(rj, 0);
    f->report = tu_write(f->dir, "report.json", text);
    free(text);
    cJSON_Delete(rj);
    sp_csr_free(a);
    f->log = dt_xasprintf("%s/requests.log", f->dir);
    f->loop = dt_loop_new();
    start_pool(f, env);
    f->o = (ag_opts){.spec = &f->spec,
                     .pool = f->pool,
                     .backend = "expert",
                     .out_dir = f->dir, /* best_kernel.cu */
                     .tune_budget_variants = 2,
                     .tune_budget_s = 20,
                     .rules = fake_rules,
                     .hook_ud = f};
    f->events = cJSON_CreateArray();
}

static void ofx_start(ofx *f, const cJSON *resume_events)
{
    dt_err e = {0};
    f->run = ag_run_new(f->loop, &f->o, &e);
    cr_assert_not_null(f->run, "%s", e.msg);
    ag_add_sink(f->run, collect, f);
    cr_assert_eq(ag_run_start(f->run, resume_events, &e), 0, "%s", e.msg);
}

/* Run the loop until a gate waits or the run is done. */
static void ofx_until_gate(ofx *f)
{
    double t0 = dt_now();
    while (!ag_run_done(f->run) && ag_awaiting(f->run) == NULL) {
        cr_assert_lt(dt_now() - t0, 90.0, "the run neither finished nor waited within 90 s");
        dt_loop_run_once(f->loop, 200);
    }
}

static void ofx_until_done(ofx *f)
{
    ofx_until_gate(f);
    cr_assert(ag_run_done(f->run), "a gate waits (%s) where the run should have finished",
              ag_kind_name(ag_step_kind(ag_awaiting(f->run))));
}

/* A fresh run and worker (env) on the same folder: the one before is gone,
 * as after a crash. Its events start empty. */
static void ofx_restart(ofx *f, const char *env)
{
    ag_run_free(f->run);
    f->run = NULL;
    gpu_pool_free(f->pool);
    unlink(f->log); /* the new worker's lists start from their first word */
    start_pool(f, env);
    f->o.pool = f->pool;
    cJSON_Delete(f->events);
    f->events = cJSON_CreateArray();
}

static void ofx_free(ofx *f)
{
    ag_run_free(f->run);
    gpu_pool_free(f->pool);
    dt_loop_free(f->loop);
    sp_spec_clear(&f->spec);
    cJSON_Delete(f->events);
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->report);
    free(f->log);
}

/* ---- reading the events ------------------------------------------------------------------ */

static const char *type_of(const cJSON *e)
{
    return dt_json_str(e, "type", "");
}

/* The kinds of the steps started, in order, space-separated. Caller frees. */
static char *kinds(const cJSON *ev)
{
    dt_buf b = DT_BUF_INIT;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(type_of(e), "step_started"))
            dt_buf_printf(&b, "%s%s", b.len ? " " : "", dt_json_str(e, "kind", "?"));
    }
    return dt_buf_take(&b);
}

/* The feedback edges taken, in order: "compile->generate#1 ...". Caller frees. */
static char *edges(const cJSON *ev)
{
    dt_buf b = DT_BUF_INIT;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(type_of(e), "transition") && dt_json_str(e, "edge", NULL))
            dt_buf_printf(&b, "%s%s#%d", b.len ? " " : "", dt_json_str(e, "edge", ""),
                          dt_json_int(e, "iteration", 0));
    }
    return dt_buf_take(&b);
}

/* The step_started event of a kind's version, or NULL. */
static const cJSON *started(const cJSON *ev, const char *kind, int version)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(type_of(e), "step_started") && dt_streq(dt_json_str(e, "kind", ""), kind) &&
            dt_json_int(e, "version", 0) == version)
            return e;
    }
    return NULL;
}

static int step_of(const cJSON *ev, const char *kind, int version)
{
    const cJSON *s = started(ev, kind, version);
    cr_assert_not_null(s, "no %s v%d", kind, version);
    return dt_json_int(s, "step", 0);
}

/* The first event of a type for step id (0: any step), or NULL. */
static const cJSON *event_of(const cJSON *ev, const char *type, int step)
{
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(type_of(e), type) && (step == 0 || dt_json_int(e, "step", 0) == step))
            return e;
    }
    return NULL;
}

static const char *feedback_of(const cJSON *ev, const char *kind, int version)
{
    const cJSON *s = started(ev, kind, version);
    cr_assert_not_null(s, "no %s v%d", kind, version);
    return dt_json_str(cJSON_GetObjectItem(s, "inputs"), "feedback", "");
}

/* The plan artifact's strategy of plan vN. */
static const char *strategy_of(const cJSON *ev, int version)
{
    int id = step_of(ev, "plan", version);
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(type_of(e), "artifact") && dt_json_int(e, "step", 0) == id)
            return dt_json_str(cJSON_GetObjectItem(e, "json"), "strategy", "");
    }
    cr_assert_fail("no artifact for plan v%d", version);
    return "";
}

static const cJSON *result_of(const cJSON *ev)
{
    const cJSON *fin = event_of(ev, "session_finished", 0);
    cr_assert_not_null(fin, "no session_finished");
    return cJSON_GetObjectItem(fin, "result");
}

/* The events up to and including the step_finished of kind vN: a log cut
 * there. Caller frees. */
static cJSON *cut_after_finished(const cJSON *ev, const char *kind, int version)
{
    int id = step_of(ev, kind, version);
    cJSON *out = cJSON_CreateArray();
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        cJSON_AddItemToArray(out, cJSON_Duplicate(e, 1));
        if (dt_streq(type_of(e), "step_finished") && dt_json_int(e, "step", 0) == id)
            return out;
    }
    cr_assert_fail("%s v%d never finished", kind, version);
    return out;
}

/* The events up to and including the step_started of kind vN: a log cut
 * while that step ran (kill -9). Caller frees. */
static cJSON *cut_after_started(const cJSON *ev, const char *kind, int version)
{
    const cJSON *s = started(ev, kind, version);
    cr_assert_not_null(s, "no %s v%d", kind, version);
    cJSON *out = cJSON_CreateArray();
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        cJSON_AddItemToArray(out, cJSON_Duplicate(e, 1));
        if (e == s)
            break;
    }
    return out;
}

#define EXPECT_KINDS(ev, want)                                                                     \
    do {                                                                                           \
        char *k_ = kinds(ev);                                                                      \
        cr_assert_str_eq(k_, want, "steps: %s\nexpected: %s", k_, want);                           \
        free(k_);                                                                                  \
    } while (0)

#define EXPECT_EDGES(ev, want)                                                                     \
    do {                                                                                           \
        char *g_ = edges(ev);                                                                      \
        cr_assert_str_eq(g_, want, "edges: %s\nexpected: %s", g_, want);                           \
        free(g_);                                                                                  \
    } while (0)

#define FULL "profile plan check generate compile verify measure tune learn"

/* ---- forward transitions ------------------------------------------------------------------ */

Test(orch, a_clean_run_should_visit_every_step_once_and_finish_verified, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, FULL);
    EXPECT_EDGES(f.events, "");
    /* each forward transition says why, in order */
    static const char *hops[][2] = {{"profile", "plan"},   {"plan", "check"},
                                    {"check", "generate"}, {"generate", "compile"},
                                    {"compile", "verify"}, {"verify", "measure"},
                                    {"measure", "tune"},   {"tune", "learn"}};
    int i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, f.events)
    {
        if (!dt_streq(type_of(e), "transition"))
            continue;
        cr_assert_lt(i, 8, "an extra transition");
        cr_expect_str_eq(dt_json_str(e, "from", ""), hops[i][0]);
        cr_expect_str_eq(dt_json_str(e, "to", ""), hops[i][1]);
        i++;
    }
    cr_assert_eq(i, 8);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    const cJSON *res = result_of(f.events);
    cr_assert(dt_json_bool(res, "verified", 0));
    cr_assert(!dt_json_bool(res, "resumable", 1), "a success closes the session");
    /* every step approved automatically */
    for (int s = 0; s < ag_step_count(f.run); s++)
        cr_expect_eq(ag_step_status(ag_step_at(f.run, s)), AG_APPROVED, "step %d", s + 1);
    ofx_free(&f);
}

Test(orch, a_matrix_that_cannot_be_profiled_should_end_the_run_resumably, .timeout = 60)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_LOAD=err");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_ERROR);
    const cJSON *res = result_of(f.events);
    cr_assert(strstr(dt_json_str(res, "reason", ""), "could not be profiled"), "%s",
              dt_json_str(res, "reason", ""));
    cr_assert(dt_json_bool(res, "resumable", 0));
    cr_assert_eq(ag_step_status(ag_step_at(f.run, 0)), AG_FAILED);
    ofx_free(&f);
}

Test(orch, without_a_gpu_the_run_should_stop_after_compile_with_exit_3, .timeout = 60)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_NOGPU=1");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NO_GPU);
    cr_assert(dt_json_bool(result_of(f.events), "resumable", 0));
    ofx_free(&f);
}

Test(orch, a_tune_that_verifies_nothing_should_still_learn_and_keep_the_measured_best,
     .timeout = 120)
{
    ofx f;
    /* the pipeline's verify passes; every one the tuner asks for fails */
    ofx_init(&f, "FAKE_ORCH_VERIFY='ok fail fail fail fail fail fail fail fail fail fail fail'");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, FULL);
    const ag_step *tune = ag_step_at(f.run, 7);
    cr_assert_eq(ag_step_kind(tune), AG_TUNE);
    cr_assert_eq(ag_step_status(tune), AG_FAILED);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    const cJSON *best = cJSON_GetObjectItem(result_of(f.events), "best");
    cr_assert_eq(dt_json_int(best, "version", 0), 1, "the measured kernel v1 is the best");
    cr_assert_float_eq(dt_json_num(best, "speedup", 0), 2.0, 1e-9);
    ofx_free(&f);
}

/* ---- feedback edges -------------------------------------------------------------------------- */

Test(orch, a_compile_error_should_go_back_to_the_generator_with_the_diagnostic, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE=err");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile generate compile verify measure "
                           "tune learn");
    EXPECT_EDGES(f.events, "compile->generate#1");
    const char *fb = feedback_of(f.events, "generate", 2);
    cr_assert(strstr(fb, "line 3: error: FAKE-SYNTAX") && strstr(fb, "(v1)"), "feedback: %s", fb);
    cr_assert_eq(ag_step_status(ag_step_at(f.run, 4)), AG_FAILED);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, a_failed_verification_should_go_back_to_the_generator_with_the_failed_check,
     .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_VERIFY=fail");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify generate compile verify "
                           "measure tune learn");
    EXPECT_EDGES(f.events, "verify->generate#1");
    const char *fb = feedback_of(f.events, "generate", 2);
    cr_assert(strstr(fb, "failed verification") &&
                  strstr(fb, "- set 0: matches the fp64 reference: FAKE-WRONG 17 outputs") &&
                  strstr(fb, "every output written") == NULL,
              "feedback: %s", fb);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, a_kernel_fault_should_be_feedback_for_the_generator_not_the_end, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_VERIFY=fault");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify generate compile verify "
                           "measure tune learn");
    EXPECT_EDGES(f.events, "verify->generate#1");
    cr_assert(strstr(feedback_of(f.events, "generate", 2), "FAKE-FAULT"), "%s",
              feedback_of(f.events, "generate", 2));
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, verify_without_a_device_should_end_with_exit_3_not_retry, .timeout = 60)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_VERIFY=nodev");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify");
    EXPECT_EDGES(f.events, "");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NO_GPU);
    ofx_free(&f);
}

Test(orch, a_check_violation_should_send_the_plan_back_with_the_violation, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    f.rule_fail = 1; /* the check step's custom rules fail once */
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check plan check generate compile verify measure tune "
                           "learn");
    EXPECT_EDGES(f.events, "check->plan#1");
    const char *fb = feedback_of(f.events, "plan", 2);
    cr_assert(strstr(fb, "constraint violation: custom rule fake.rule: line 1: FAKE-RULE no"),
              "feedback: %s", fb);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, a_measurement_below_the_goal_should_replan_with_another_strategy, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_MEASURE=0.5");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify measure plan check "
                           "generate compile verify measure tune learn");
    EXPECT_EDGES(f.events, "measure->plan#1");
    cr_assert_str_neq(strategy_of(f.events, 1), strategy_of(f.events, 2),
                      "the slow strategy was planned again");
    cr_assert(strstr(feedback_of(f.events, "plan", 2), "0.50x is below the goal of 1.00x"), "%s",
              feedback_of(f.events, "plan", 2));
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, a_failed_measurement_should_move_to_the_next_candidate, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_MEASURE=err");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify measure plan check "
                           "generate compile verify measure tune learn");
    EXPECT_EDGES(f.events, "generate->plan#1");
    cr_assert_str_neq(strategy_of(f.events, 1), strategy_of(f.events, 2));
    cr_assert(strstr(feedback_of(f.events, "plan", 2), "FAKE-SLOW"), "%s",
              feedback_of(f.events, "plan", 2));
    ofx_free(&f);
}

/* Parameter spaces (as Lua's ditto.param_space) of one point: every
 * candidate's space narrowed to its own parameters. */
static cJSON *single_points(ag_run *r, void *ud)
{
    (void)ud;
    cJSON *all = dt_json_obj();
    const cJSON *c, *p;
    cJSON_ArrayForEach(c, r->candidates)
    {
        cJSON *one = dt_json_obj();
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(c, "space"))
        {
            cJSON *v = dt_json_arr();
            cJSON_AddItemToArray(
                v, cJSON_CreateNumber(dt_json_num(cJSON_GetObjectItem(c, "params"), p->string, 0)));
            dt_json_set_take(one, p->string, v);
        }
        dt_json_set_take(all, dt_json_str(c, "strategy", "?"), one);
    }
    return all;
}

Test(orch, a_generator_that_cannot_make_a_new_version_should_move_to_the_next_candidate,
     .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE=err");
    f.o.spaces = single_points; /* the expert has no other point to try */
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile generate plan check generate "
                           "compile verify measure tune learn");
    EXPECT_EDGES(f.events, "compile->generate#1 generate->plan#1");
    cr_assert_eq(ag_step_status(ag_step_at(f.run, 5)), AG_FAILED);
    cr_assert(strstr(feedback_of(f.events, "plan", 2), "every point of this template's space"),
              "%s", feedback_of(f.events, "plan", 2));
    cr_assert_str_neq(strategy_of(f.events, 1), strategy_of(f.events, 2));
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

/* ---- iteration caps -------------------------------------------------------------------------- */

Test(orch, compile_errors_past_the_edge_cap_should_move_to_the_next_candidate, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE='err err err'");
    f.o.max_edge = 2;
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile generate compile generate "
                           "compile plan check generate compile verify measure tune learn");
    EXPECT_EDGES(f.events, "compile->generate#1 compile->generate#2 generate->plan#1");
    cr_assert_str_neq(strategy_of(f.events, 1), strategy_of(f.events, 2));
    /* the feedback of the abandoned plan does not follow the new one */
    cr_assert_str_eq(feedback_of(f.events, "generate", 4), "");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, the_overall_generate_cap_should_end_the_run_unverified, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE='err err err err err'");
    f.o.max_iterations = 2;
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile generate compile");
    EXPECT_EDGES(f.events, "compile->generate#1");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NOT_VERIFIED);
    const cJSON *res = result_of(f.events);
    cr_assert(strstr(dt_json_str(res, "reason", ""), "no kernel passed verification"), "%s",
              dt_json_str(res, "reason", ""));
    cr_assert(dt_json_bool(res, "resumable", 0));
    cr_assert(!dt_json_bool(res, "verified", 1));
    ofx_free(&f);
}

Test(orch, the_candidate_cap_should_end_the_run_after_max_edge_plus_two_new_plans, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_MEASURE='err err err err err'");
    f.o.max_edge = 1; /* generate->plan is allowed max_edge + 2 = 3 times */
    ofx_start(&f, NULL);
    ofx_until_done(&f);
#define ONE_PLAN "plan check generate compile verify measure"
    EXPECT_KINDS(f.events, "profile " ONE_PLAN " " ONE_PLAN " " ONE_PLAN " " ONE_PLAN);
#undef ONE_PLAN
    EXPECT_EDGES(f.events, "generate->plan#1 generate->plan#2 generate->plan#3");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NOT_VERIFIED);
    cr_assert(dt_json_bool(result_of(f.events), "resumable", 0));
    ofx_free(&f);
}

Test(orch, the_measure_edge_cap_should_send_a_slow_kernel_to_tuning, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_MEASURE='0.5 0.5 0.5'");
    f.o.max_edge = 1;
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify measure plan check "
                           "generate compile verify measure tune learn");
    EXPECT_EDGES(f.events, "measure->plan#1");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

/* ---- review decisions ------------------------------------------------------------------------ */

static void ask_everything(ofx *f)
{
    for (int k = 0; k < AG_NKINDS; k++)
        f->o.policy[k] = AG_POLICY_ASK;
}

/* Wait for the gate of kind and decide it; the decision must be taken. */
static void decide_at(ofx *f, const char *kind, ag_decision d, const char *reason)
{
    ofx_until_gate(f);
    const ag_step *s = ag_awaiting(f->run);
    cr_assert_not_null(s, "the run finished before the %s gate", kind);
    cr_assert_str_eq(ag_kind_name(ag_step_kind(s)), kind);
    dt_err e = {0};
    cr_assert_eq(ag_decide(f->run, d, NULL, reason, &e), 0, "%s", e.msg);
}

Test(orch, a_rejected_plan_should_be_replanned_without_its_strategy_and_with_the_reason,
     .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_REJECT, "I do not trust this one");
    decide_at(&f, "plan", AG_APPROVE, NULL);
    EXPECT_KINDS(f.events, "profile plan plan check");
    cr_assert_str_neq(strategy_of(f.events, 1), strategy_of(f.events, 2));
    cr_assert(strstr(feedback_of(f.events, "plan", 2), "I do not trust this one"), "%s",
              feedback_of(f.events, "plan", 2));
    const cJSON *d = event_of(f.events, "decision", step_of(f.events, "plan", 1));
    cr_assert_str_eq(dt_json_str(d, "decision", ""), "reject");
    cr_assert_str_eq(dt_json_str(d, "by", ""), "person");
    cr_assert_eq(ag_step_status(ag_step_at(f.run, 1)), AG_REJECTED);
    ag_approve_rest(f.run);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan plan check generate compile verify measure tune learn");
    ofx_free(&f);
}

Test(orch, a_rejected_verify_should_go_to_the_generator_not_run_the_same_source_again,
     .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_APPROVE, NULL);
    decide_at(&f, "check", AG_APPROVE, NULL);
    decide_at(&f, "generate", AG_APPROVE, NULL);
    decide_at(&f, "compile", AG_APPROVE, NULL);
    decide_at(&f, "verify", AG_REJECT, "check it on the skewed rows too");
    decide_at(&f, "generate", AG_APPROVE, NULL);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify generate compile");
    cr_assert(strstr(feedback_of(f.events, "generate", 2),
                     "A reviewer rejected the previous attempt: check it on the skewed rows too"),
              "%s", feedback_of(f.events, "generate", 2));
    ag_stop(f.run);
    ofx_until_done(&f);
    ofx_free(&f);
}

Test(orch, a_rejection_past_the_generate_cap_should_end_the_run_unverified, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    f.o.max_iterations = 1;
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_APPROVE, NULL);
    decide_at(&f, "check", AG_APPROVE, NULL);
    decide_at(&f, "generate", AG_APPROVE, NULL);
    decide_at(&f, "compile", AG_REJECT, "too many registers");
    /* one generate attempt allowed overall, and it is spent: the code
     * generator cannot be asked again, nor another candidate tried */
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NOT_VERIFIED);
    cr_assert(strstr(dt_json_str(result_of(f.events), "reason", ""), "too many registers"), "%s",
              dt_json_str(result_of(f.events), "reason", ""));
    ofx_free(&f);
}

Test(orch, retry_should_run_the_same_step_kind_again, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_APPROVE, NULL);
    decide_at(&f, "check", AG_RETRY, NULL);
    decide_at(&f, "check", AG_APPROVE, NULL);
    decide_at(&f, "generate", AG_APPROVE, NULL);
    EXPECT_KINDS(f.events, "profile plan check check generate compile");
    ag_stop(f.run);
    ofx_until_done(&f);
    ofx_free(&f);
}

Test(orch, rejecting_every_plan_should_end_the_run_when_no_candidate_is_left, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    f.o.max_reviews = 1000;
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    int rejected = 0;
    for (ofx_until_gate(&f); ag_awaiting(f.run) && ag_awaiting(f.run)->ok && rejected < 100;
         ofx_until_gate(&f)) {
        decide_at(&f, "plan", AG_REJECT, "not this one");
        rejected++;
    }
    cr_assert_gt(rejected, 1);
    /* every plan a different strategy, then one that found none: it fails,
     * and at its gate it cannot be approved, only sent on */
    for (int v = 1; v <= rejected; v++)
        for (int w = 1; w < v; w++)
            cr_assert_str_neq(strategy_of(f.events, v), strategy_of(f.events, w), "v%d, v%d", v, w);
    const ag_step *last = ag_awaiting(f.run);
    cr_assert_not_null(last, "the run ended without a failed plan at its gate");
    cr_assert_eq(ag_step_kind(last), AG_PLAN);
    cr_assert_eq(ag_step_version(last), rejected + 1);
    dt_err e = {0};
    cr_assert_eq(ag_decide(f.run, AG_APPROVE, NULL, NULL, &e), -1);
    decide_at(&f, "plan", AG_REJECT, "then stop");
    cr_assert(ag_run_done(f.run));
    cr_assert_eq(ag_step_status(last), AG_REJECTED);
    EXPECT_EDGES(f.events, "");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NOT_VERIFIED);
    cr_assert(
        strstr(dt_json_str(result_of(f.events), "reason", ""), "every candidate was rejected"),
        "%s", dt_json_str(result_of(f.events), "reason", ""));
    ofx_free(&f);
}

Test(orch, the_review_cap_should_end_the_run_after_too_many_rejections, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    f.o.max_reviews = 2;
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_REJECT, "no");
    decide_at(&f, "plan", AG_REJECT, "no again");
    decide_at(&f, "plan", AG_REJECT, "still no");
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan plan plan");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NOT_VERIFIED);
    const char *why = dt_json_str(result_of(f.events), "reason", "");
    cr_assert(strstr(why, "rejected 3 times, more than the cap of 2") && strstr(why, "still no"),
              "%s", why);
    ofx_free(&f);
}

Test(orch, a_failed_step_should_refuse_approval_and_go_back_with_the_reviewers_note, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE=err");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_APPROVE, NULL);
    decide_at(&f, "check", AG_APPROVE, NULL);
    decide_at(&f, "generate", AG_APPROVE, NULL);
    ofx_until_gate(&f);
    const ag_step *s = ag_awaiting(f.run);
    cr_assert_eq(ag_step_kind(s), AG_COMPILE);
    const cJSON *aw = event_of(f.events, "awaiting_review", ag_step_id(s));
    cr_assert(dt_json_bool(aw, "failed", 0));
    dt_err e = {0};
    cr_assert_eq(ag_decide(f.run, AG_APPROVE, NULL, NULL, &e), -1);
    cr_assert(strstr(e.msg, "cannot be approved"), "%s", e.msg);
    cr_assert_eq(ag_awaiting(f.run), s, "the gate stopped waiting");
    decide_at(&f, "compile", AG_REJECT, "mind the semicolons");
    decide_at(&f, "generate", AG_APPROVE, NULL);
    EXPECT_KINDS(f.events, "profile plan check generate compile generate compile");
    EXPECT_EDGES(f.events, "compile->generate#1");
    const char *fb = feedback_of(f.events, "generate", 2);
    cr_assert(strstr(fb, "FAKE-SYNTAX") && strstr(fb, "A reviewer sent it back: mind the "
                                                      "semicolons"),
              "%s", fb);
    ag_stop(f.run);
    ofx_until_done(&f);
    ofx_free(&f);
}

Test(orch, approving_the_rest_at_a_failed_step_should_take_its_edge_then_go_on_alone,
     .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_VERIFY=fail");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_APPROVE, NULL);
    decide_at(&f, "check", AG_APPROVE, NULL);
    decide_at(&f, "generate", AG_APPROVE, NULL);
    decide_at(&f, "compile", AG_APPROVE, NULL);
    ofx_until_gate(&f);
    cr_assert_eq(ag_step_kind(ag_awaiting(f.run)), AG_VERIFY);
    ag_approve_rest(f.run);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify generate compile verify "
                           "measure tune learn");
    EXPECT_EDGES(f.events, "verify->generate#1");
    const cJSON *d = event_of(f.events, "decision", step_of(f.events, "verify", 1));
    cr_assert_str_eq(dt_json_str(d, "decision", ""), "reject");
    cr_assert_str_eq(dt_json_str(d, "by", ""), "auto");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    ofx_free(&f);
}

Test(orch, an_edited_kernel_at_a_failed_compile_should_become_a_new_version, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE=err");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_APPROVE, NULL);
    decide_at(&f, "check", AG_APPROVE, NULL);
    decide_at(&f, "generate", AG_APPROVE, NULL);
    ofx_until_gate(&f);
    const ag_step *s = ag_awaiting(f.run);
    cr_assert_eq(ag_step_kind(s), AG_COMPILE);
    cJSON *view = ag_step_view(f.run, s);
    char *src = dt_xasprintf("// fixed by hand\n%s", dt_json_str(view, "source", ""));
    cJSON_Delete(view);
    cJSON *text = cJSON_CreateString(src);
    dt_err e = {0};
    cr_assert_eq(ag_decide(f.run, AG_EDIT, text, NULL, &e), 0, "%s", e.msg);
    cJSON_Delete(text);
    decide_at(&f, "compile", AG_APPROVE, NULL);
    EXPECT_KINDS(f.events, "profile plan check generate compile generate compile verify");
    const cJSON *g2 = started(f.events, "generate", 2);
    cr_assert_str_eq(dt_json_str(g2, "agent", ""), "a person");
    cr_assert_eq(dt_json_int(cJSON_GetObjectItem(g2, "inputs"), "edited_from_step", 0),
                 step_of(f.events, "compile", 1));
    /* the new version is the edited text, approved as edited */
    cr_assert_str_eq(dt_json_str(ag_step_artifact(ag_step_at(f.run, 5)), "source", ""), src);
    cr_assert_eq(ag_step_status(ag_step_at(f.run, 5)), AG_EDITED);
    free(src);
    ag_stop(f.run);
    ofx_until_done(&f);
    ofx_free(&f);
}

Test(orch, a_person_stop_should_close_the_session_and_an_unattended_one_keep_it_open,
     .timeout = 120)
{
    for (int unattended = 0; unattended < 2; unattended++) {
        ofx f;
        ofx_init(&f, "");
        ask_everything(&f);
        ofx_start(&f, NULL);
        decide_at(&f, "profile", AG_APPROVE, NULL);
        ofx_until_gate(&f);
        if (unattended)
            ag_stop_unattended(f.run, "stdin is closed");
        else
            ag_stop(f.run);
        cr_assert(ag_run_done(f.run));
        EXPECT_KINDS(f.events, "profile plan");
        cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_STOPPED);
        const cJSON *res = result_of(f.events);
        cr_assert_eq(dt_json_bool(res, "resumable", -1), unattended);
        const cJSON *d = event_of(f.events, "decision", step_of(f.events, "plan", 1));
        cr_assert_str_eq(dt_json_str(d, "decision", ""), "stop");
        cr_assert_str_eq(dt_json_str(d, "by", ""), unattended ? "unattended" : "person");
        ofx_free(&f);
    }
}

/* A review hook (Lua's, under --review auto) rejecting the first plan. */
static int reject_first_plan(ag_run *r, const ag_step *s, dt_buf *reason, void *ud)
{
    (void)r;
    int *n = ud;
    if (ag_step_kind(s) == AG_PLAN && (*n)++ == 0) {
        dt_buf_puts(reason, "hook says no");
        return AG_REJECT;
    }
    return -1;
}

Test(orch, a_review_hook_should_decide_under_auto_and_its_rejection_replan, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    int n = 0;
    f.o.reviewer = reject_first_plan;
    f.o.reviewer_ud = &n;
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan plan check generate compile verify measure tune learn");
    const cJSON *d = event_of(f.events, "decision", step_of(f.events, "plan", 1));
    cr_assert_str_eq(dt_json_str(d, "by", ""), "lua");
    cr_assert_str_eq(dt_json_str(d, "reason", ""), "hook says no");
    cr_assert_str_neq(strategy_of(f.events, 1), strategy_of(f.events, 2));
    ofx_free(&f);
}

Test(orch, a_tune_request_should_tune_after_measure_even_below_the_goal, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_MEASURE=0.5");
    ofx_start(&f, NULL);
    ag_request_tune(f.run);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, FULL);
    EXPECT_EDGES(f.events, "");
    int found = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, f.events)
    {
        found |= dt_streq(type_of(e), "transition") &&
                 dt_streq(dt_json_str(e, "reason", ""), "tune requested");
    }
    cr_assert(found, "no transition says the tune was requested");
    ofx_free(&f);
}

/* ---- resume points --------------------------------------------------------------------------- */

Test(orch, resume_after_an_approved_step_should_continue_with_the_next_one, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    cJSON *log = cut_after_finished(f.events, "check", 1);
    ofx_restart(&f, "");
    ofx_start(&f, log);
    ofx_until_done(&f);
    cr_assert_eq(ag_step_count(f.run), 3 + 6, "the 3 restored steps are not kept");
    cr_assert_not_null(event_of(f.events, "session_resumed", 0));
    EXPECT_KINDS(f.events, "generate compile verify measure tune learn");
    /* the restored plan is the one generated from */
    cr_assert_eq(dt_json_int(started(f.events, "generate", 1), "step", 0), 4);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, resume_after_a_cut_off_step_should_run_that_step_again, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    cJSON *log = cut_after_started(f.events, "compile", 1);
    ofx_restart(&f, "");
    ofx_start(&f, log);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "compile verify measure tune learn");
    cr_assert_eq(dt_json_int(started(f.events, "compile", 1), "step", 0), 5,
                 "the re-run keeps its step id and version");
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, resume_after_a_failed_step_should_take_its_feedback_edge, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_VERIFY=fail");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    cJSON *log = cut_after_finished(f.events, "verify", 1);
    ofx_restart(&f, "");
    ofx_start(&f, log);
    ofx_until_done(&f);
    /* never the same source verified again: the generator goes next */
    EXPECT_KINDS(f.events, "generate compile verify measure tune learn");
    EXPECT_EDGES(f.events, "verify->generate#1");
    cr_assert(strstr(feedback_of(f.events, "generate", 2), "FAKE-WRONG"), "%s",
              feedback_of(f.events, "generate", 2));
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, resume_after_a_rejected_plan_should_plan_again_without_its_strategy, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ask_everything(&f);
    ofx_start(&f, NULL);
    decide_at(&f, "profile", AG_APPROVE, NULL);
    decide_at(&f, "plan", AG_REJECT, "not this strategy");
    ofx_until_gate(&f);
    char *first = dt_xstrdup(strategy_of(f.events, 1));
    ag_stop_unattended(f.run, "the test stops here");
    cJSON *log = cut_after_finished(f.events, "plan", 1);
    ofx_restart(&f, "");
    for (int k = 0; k < AG_NKINDS; k++)
        f.o.policy[k] = AG_POLICY_AUTO;
    ofx_start(&f, log);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "plan check generate compile verify measure tune learn");
    cr_assert_eq(dt_json_int(started(f.events, "plan", 2), "version", 0), 2);
    cr_assert_str_neq(strategy_of(f.events, 2), first, "the rejected strategy came back");
    free(first);
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, resume_should_keep_the_edge_counts_so_caps_hold_across_runs, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_COMPILE='err err'");
    f.o.max_edge = 2;
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    /* cut once generate v3 is done: both compile->generate edges the cap
     * allows were taken before it */
    cJSON *log = cut_after_finished(f.events, "generate", 3);
    EXPECT_EDGES(log, "compile->generate#1 compile->generate#2");
    ofx_restart(&f, "FAKE_ORCH_COMPILE=err");
    ofx_start(&f, log);
    ofx_until_done(&f);
    /* the resumed compile fails: the restored count is at the cap, so the
     * next candidate is planned, not a fourth generate */
    EXPECT_KINDS(f.events, "compile plan check generate compile verify measure tune learn");
    EXPECT_EDGES(f.events, "generate->plan#1");
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, resume_of_a_run_that_failed_should_rerun_the_failed_step, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_LOAD=err");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    cr_assert(dt_json_bool(result_of(f.events), "resumable", 0));
    cJSON *log = cJSON_Duplicate(f.events, 1);
    /* the resume's own reload fails first: nothing runs */
    ofx_restart(&f, "FAKE_ORCH_LOAD=err");
    ofx_start(&f, log);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "");
    cr_assert(strstr(dt_json_str(result_of(f.events), "reason", ""), "could not be reloaded"));
    /* a readable matrix now: the profile that failed runs again */
    ofx_restart(&f, "");
    ofx_start(&f, log);
    ofx_until_done(&f);
    EXPECT_KINDS(f.events, "profile plan check generate compile verify measure tune learn");
    const cJSON *e;
    int rerun = 0;
    cJSON_ArrayForEach(e, f.events)
    {
        rerun |= dt_streq(type_of(e), "transition") &&
                 strstr(dt_json_str(e, "reason", ""), "re-running the step that failed") != NULL;
    }
    cr_assert(rerun);
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, a_compile_only_session_resumed_where_there_is_a_gpu_should_verify_next, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "FAKE_ORCH_NOGPU=1");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_NO_GPU);
    cJSON *log = cJSON_Duplicate(f.events, 1);
    ofx_restart(&f, "");
    ofx_start(&f, log);
    ofx_until_done(&f);
    /* the compiled kernel is not compiled again */
    EXPECT_KINDS(f.events, "verify measure tune learn");
    cr_assert_eq(ag_run_exit_code(f.run), AG_EXIT_OK);
    cJSON_Delete(log);
    ofx_free(&f);
}

Test(orch, resume_of_a_closed_session_should_be_refused, .timeout = 120)
{
    ofx f;
    ofx_init(&f, "");
    ofx_start(&f, NULL);
    ofx_until_done(&f);
    cJSON *log = cJSON_Duplicate(f.events, 1);
    ofx_restart(&f, "");
    dt_err e = {0};
    f.run = ag_run_new(f.loop, &f.o, &e);
    cr_assert_not_null(f.run);
    cr_assert_eq(ag_run_start(f.run, log, &e), -1);
    cr_assert(strstr(e.msg, "already finished"), "%s", e.msg);
    cJSON_Delete(log);
    ofx_free(&f);
}
