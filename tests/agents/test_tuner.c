/* test_tuner.c -- what the tuner says about a variant that failed the
 * verification battery (the first failed check, by name and detail), and
 * which parameter points it spends its budget on. */
#include "tests/common/testutil.h"

#include "agents/internal.h"
#include "gpu/contract.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(tuner, battery_failure_should_name_the_first_failed_check)
{
    cJSON *r = cJSON_Parse(
        "{\"ok\": true, \"passed\": false, \"checks\": ["
        "{\"name\": \"set 0: every output written\", \"passed\": true},"
        "{\"name\": \"set 0: matches the fp64 reference\", \"passed\": false,"
        " \"detail\": \"17 of 4096 outputs beyond the tolerance\"},"
        "{\"name\": \"set 1: agrees with cuSPARSE\", \"passed\": false, \"detail\": \"x\"}]}");
    cr_assert_not_null(r);
    char *why = ag_battery_failure(r);
    cr_assert_str_eq(why, "failed the verification battery: set 0: matches the fp64 reference: "
                          "17 of 4096 outputs beyond the tolerance");
    free(why);
    cJSON_Delete(r);

    /* A failed check without a detail, and a reply without checks. */
    r = cJSON_Parse("{\"ok\": true, \"passed\": false, \"checks\": ["
                    "{\"name\": \"no cached answers\", \"passed\": false}]}");
    why = ag_battery_failure(r);
    cr_assert_str_eq(why, "failed the verification battery: no cached answers");
    free(why);
    cJSON_Delete(r);
    r = cJSON_Parse("{\"ok\": true, \"passed\": false}");
    why = ag_battery_failure(r);
    cr_assert_str_eq(why, "failed the verification battery");
    free(why);
    cJSON_Delete(r);
}

/* A manifest of three parameters with one constraint, and a candidate as
 * the planner makes it: a rule narrowed ROWS to [2, 1, 4] and started
 * from its first value. */
static const char manifest_src[] =
    "/*@manifest\n"
    "{\"strategy\": \"t\", \"op\": \"spmm\", \"dtypes\": [\"fp32\"],\n"
    " \"params\": {\"WARPS\": {\"default\": 4, \"values\": [1, 2, 4, 8]},\n"
    "            \"ROWS\": {\"default\": 1, \"values\": [1, 2, 4, 8, 16]},\n"
    "            \"UNROLL\": {\"default\": 2, \"values\": [1, 2, 4]}},\n"
    " \"constraints\": [\"WARPS * UNROLL <= 16\"], \"preprocessing\": \"none\"}\n"
    "@*/\n";

static cJSON *points(const char *cand, int budget, int with_manifest)
{
    gpu_manifest m;
    dt_err e = {0};
    cr_assert_eq(gpu_manifest_from_source(manifest_src, &m, &e), 0, "%s", e.msg);
    cJSON *c = cJSON_Parse(cand);
    cr_assert_not_null(c);
    cJSON *pts = ag_tune_points(c, with_manifest ? &m : NULL, budget, NULL);
    cJSON_Delete(c);
    gpu_manifest_clear(&m);
    return pts;
}

static void expect_point(const cJSON *pts, int i, int warps, int rows, int unroll)
{
    const cJSON *p = cJSON_GetArrayItem(pts, i);
    cr_assert_not_null(p, "no point %d", i);
    char *s = dt_json_print(p, 0);
    cr_expect(dt_json_num(p, "WARPS", 0) == warps && dt_json_num(p, "ROWS", 0) == rows &&
                  dt_json_num(p, "UNROLL", 0) == unroll,
              "point %d is %s, expected WARPS %d ROWS %d UNROLL %d", i, s, warps, rows, unroll);
    free(s);
}

static const char narrowed[] = "{\"params\": {\"WARPS\": 4, \"ROWS\": 2, \"UNROLL\": 2},"
                               " \"space\": {\"WARPS\": [1, 2, 4, 8], \"ROWS\": [2, 1, 4],"
                               " \"UNROLL\": [1, 2, 4]}}";

Test(tuner, a_small_budget_should_go_to_the_rules_values_the_spread_then_neighbours)
{
    cJSON *pts = points(narrowed, 7, 1);
    cr_assert_eq(cJSON_GetArraySize(pts), 7);
    expect_point(pts, 0, 4, 2, 2); /* the planner's point */
    expect_point(pts, 1, 4, 1, 2); /* the rule's other values for ROWS */
    expect_point(pts, 2, 4, 4, 2);
    /* The first legal point (every list's first value) and the middle
     * one: 33 legal points, WARPS varying fastest, index 16. The
     * manifest's defaults (4, 1, 2) are already there. */
    expect_point(pts, 3, 1, 2, 1);
    expect_point(pts, 4, 1, 1, 2);
    expect_point(pts, 5, 2, 2, 2); /* WARPS one step down, then up */
    expect_point(pts, 6, 8, 2, 2);
    cJSON_Delete(pts);

    /* ROWS one step is already there; UNROLL one step down; its step up
     * (4 * 4 > 16) breaks the constraint and is left out. */
    pts = points(narrowed, 8, 1);
    cr_assert_eq(cJSON_GetArraySize(pts), 8);
    expect_point(pts, 7, 4, 2, 1);
    cJSON_Delete(pts);

    pts = points(narrowed, 1, 1);
    cr_assert_eq(cJSON_GetArraySize(pts), 1);
    expect_point(pts, 0, 4, 2, 2);
    cJSON_Delete(pts);

    /* Why each was chosen, one line per point. */
    gpu_manifest m;
    dt_err e = {0};
    cr_assert_eq(gpu_manifest_from_source(manifest_src, &m, &e), 0, "%s", e.msg);
    cJSON *c = cJSON_Parse(narrowed), *why = dt_json_arr();
    pts = ag_tune_points(c, &m, 8, why);
    static const char *want[] = {"the planner's point",      "a rule's value: ROWS 1",
                                 "a rule's value: ROWS 4",   "the space's first point",
                                 "the space's middle point", "WARPS 2: 1 step down",
                                 "WARPS 8: 1 step up",       "UNROLL 1: 1 step down"};
    cr_assert_eq(cJSON_GetArraySize(why), 8);
    for (int i = 0; i < 8; i++)
        cr_expect_str_eq(cJSON_GetArrayItem(why, i)->valuestring, want[i]);
    cJSON_Delete(why);
    cJSON_Delete(pts);
    cJSON_Delete(c);
    gpu_manifest_clear(&m);
}

Test(tuner, a_rule_that_reorders_every_value_should_have_them_offered_first)
{
    /* UNROLL keeps all three of the manifest's values, best guess 4 then
     * 4's far side 1 (the manifest lists 1, 2, 4); ROWS is the
     * manifest's own list, so its values wait for the neighbourhood. */
    static const char reordered[] = "{\"params\": {\"WARPS\": 2, \"ROWS\": 1, \"UNROLL\": 4},"
                                    " \"space\": {\"WARPS\": [1, 2, 4, 8],"
                                    " \"ROWS\": [1, 2, 4, 8, 16], \"UNROLL\": [4, 1, 2]}}";
    gpu_manifest m;
    dt_err e = {0};
    cr_assert_eq(gpu_manifest_from_source(manifest_src, &m, &e), 0, "%s", e.msg);
    cJSON *c = cJSON_Parse(reordered), *why = dt_json_arr();
    cJSON *pts = ag_tune_points(c, &m, 3, why);
    cr_assert_eq(cJSON_GetArraySize(pts), 3);
    expect_point(pts, 0, 2, 1, 4);
    expect_point(pts, 1, 2, 1, 1);
    expect_point(pts, 2, 2, 1, 2);
    cr_expect_str_eq(cJSON_GetArrayItem(why, 1)->valuestring, "a rule's value: UNROLL 1");
    cJSON_Delete(why);
    cJSON_Delete(pts);
    cJSON_Delete(c);
    gpu_manifest_clear(&m);
}

Test(tuner, a_budget_past_the_space_should_take_every_legal_point_once)
{
    /* 4 x 3 x 3 = 36 points; WARPS * UNROLL > 16 rules out (8, 4) for
     * each of the 3 ROWS values. */
    cJSON *pts = points(narrowed, 100, 1);
    cr_assert_eq(cJSON_GetArraySize(pts), 33);
    for (int i = 0; i < 33; i++) {
        const cJSON *a = cJSON_GetArrayItem(pts, i);
        cr_expect(dt_json_num(a, "WARPS", 0) * dt_json_num(a, "UNROLL", 0) <= 16);
        for (int j = 0; j < i; j++) {
            const cJSON *b = cJSON_GetArrayItem(pts, j);
            cr_expect(!(dt_json_num(a, "WARPS", 0) == dt_json_num(b, "WARPS", 0) &&
                        dt_json_num(a, "ROWS", 0) == dt_json_num(b, "ROWS", 0) &&
                        dt_json_num(a, "UNROLL", 0) == dt_json_num(b, "UNROLL", 0)),
                      "points %d and %d are the same", j, i);
        }
    }
    cJSON_Delete(pts);

    /* Without a manifest nothing is narrowed or ruled out and there are
     * no defaults: the first and middle of all 36 points, then the
     * neighbours in the order of the space. */
    pts = points(narrowed, 100, 0);
    cr_assert_eq(cJSON_GetArraySize(pts), 36);
    expect_point(pts, 1, 1, 2, 1);
    expect_point(pts, 2, 4, 1, 2); /* index 18 */
    expect_point(pts, 3, 2, 2, 2);
    expect_point(pts, 4, 8, 2, 2);
    expect_point(pts, 5, 4, 2, 1); /* ROWS [2, 1, 4] one step up is index 2 above */
    cJSON_Delete(pts);
}

Test(tuner, a_value_off_the_list_should_step_from_the_nearest)
{
    /* WARPS 3 is not in the list: its neighbours are those of 2 (the
     * nearer of 2 and 4 found first): 1 and 4. */
    cJSON *pts = points("{\"params\": {\"WARPS\": 3, \"ROWS\": 8, \"UNROLL\": 2},"
                        " \"space\": {\"WARPS\": [1, 2, 4, 8], \"ROWS\": [1, 2, 4, 8, 16],"
                        " \"UNROLL\": [1, 2, 4]}}",
                        6, 1);
    cr_assert_eq(cJSON_GetArraySize(pts), 6);
    expect_point(pts, 0, 3, 8, 2);
    expect_point(pts, 1, 1, 1, 1); /* first */
    expect_point(pts, 2, 8, 2, 2); /* middle: 55 legal points, index 27 */
    expect_point(pts, 3, 4, 1, 2); /* the manifest's defaults */
    /* A step from WARPS 3 keeps ROWS 8, UNROLL 2 and moves to a listed
     * WARPS; the points with WARPS 3 break the manifest and are left out. */
    expect_point(pts, 4, 1, 8, 2);
    expect_point(pts, 5, 4, 8, 2);
    cJSON_Delete(pts);
}

typedef struct tune_wait {
    cJSON *result;
    int done;
} tune_wait;

static void tune_quiet(const char *line, void *ud)
{
    (void)line;
    (void)ud;
}

/* The tuner's lines, for tests that read them (one test at a time). */
static cJSON *tune_lines;

static void tune_collect(const char *line, void *ud)
{
    (void)ud;
    if (tune_lines)
        cJSON_AddItemToArray(tune_lines, cJSON_CreateString(line));
}

static void tune_done(cJSON *res, void *ud)
{
    tune_wait *w = ud;
    w->result = res;
    w->done = 1;
}

static void pool_quiet(int w, const char *line, void *ud)
{
    (void)w;
    (void)line;
    (void)ud;
}

/* Tune one ell-baked-spmm candidate through a pool of fake workers
 * (tests/agents/fake-tune-worker.sh) whose kernel_key ignores TN: every TN
 * of a point is one kernel. refine as in ag_tune_opts (-1: none). Returns
 * the tuner's result; caller frees. */
/* Set by a test for the next tune_with_fake_workers_in: the compile options
 * every variant gets (and why), and whether the result cache is used. */
static const cJSON *tune_options;
static const char *tune_options_why;
static int tune_use_cache;

static cJSON *tune_with_fake_workers_in(int workers, int budget, int refine, const char *space)
{
    dt_loop *l = dt_loop_new();
    char *la = dt_xasprintf("%s/tests/agents/fake-tune-worker.sh", tu_src_dir());
    gpu_pool_opts po = {.workers = workers,
                        .launcher = la,
                        .deadline_s = 30,
                        .start_deadline_s = 20,
                        .log = pool_quiet};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &po, &e);
    cr_assert_not_null(p, "%s", e.msg);
    sp_spec spec;
    sp_spec_init(&spec);
    spec.op = SP_SPMM;
    spec.n = 32;
    cJSON *cands =
        cJSON_Parse("[{\"strategy\": \"ell-baked-spmm\", \"template\": \"kernels/spmm_ell.cu\","
                    "  \"params\": {\"WARPS\": 4, \"VEC\": 8, \"LANES\": 32, \"ROWS_PER_WARP\": 1,"
                    "               \"UNROLL\": 4, \"TN\": 128}}]");
    cr_assert_not_null(cands);
    cJSON *sp = cJSON_Parse(space);
    cr_assert_not_null(sp, "%s", space);
    cJSON_AddItemToObject(cJSON_GetArrayItem(cands, 0), "space", sp);
    tune_wait w = {0};
    ag_tune_opts o = {.pool = p,
                      .spec = &spec,
                      .matrix = "m",
                      .candidates = cands,
                      .budget_variants = budget,
                      .refine = refine,
                      .budget_s = 60,
                      .use_cache = tune_use_cache,
                      .options = tune_options,
                      .options_why = tune_options_why,
                      .progress = tune_lines ? tune_collect : tune_quiet,
                      .done = tune_done,
                      .ud = &w};
    ag_tuner *t = ag_tuner_start(&o, &e);
    cr_assert_not_null(t, "%s", e.msg);
    double t0 = dt_now();
    while (!w.done && dt_now() - t0 < 60)
        if (dt_loop_run_once(l, 200) < 0)
            break;
    cr_assert(w.done, "the tuner did not finish within 60 s");
    ag_tuner_free(t);
    cJSON_Delete(cands);
    sp_spec_clear(&spec);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
    return w.result;
}

static cJSON *tune_with_fake_workers(int workers, int budget, int refine)
{
    return tune_with_fake_workers_in(
        workers, budget, refine,
        "{\"WARPS\": [1, 2, 4, 8], \"UNROLL\": [2, 4, 8], \"TN\": [32, 64, 128, 256]}");
}

static int same_kernel(const cJSON *a, const cJSON *b)
{
    return dt_json_num(a, "WARPS", 0) == dt_json_num(b, "WARPS", 0) &&
           dt_json_num(a, "UNROLL", 0) == dt_json_num(b, "UNROLL", 0);
}

/* The budget buys distinct kernels: a variant the worker reports as the
 * same kernel and launch as an earlier one is set aside (same_as) and the
 * next point of the longer list is measured in its place, through the
 * compile stage (several workers) and without it (one). */
Test(tuner, a_variant_that_is_the_same_kernel_as_an_earlier_one_should_give_way, .timeout = 120)
{
    for (int workers = 1; workers <= 2; workers++) {
        cJSON *res = tune_with_fake_workers(workers, 6, -1);
        const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0);
        const cJSON *vs = cJSON_GetObjectItem(s, "variants");
        int distinct = 0, folded = 0;
        const cJSON *v, *u;
        cJSON_ArrayForEach(v, vs)
        {
            const cJSON *pv = cJSON_GetObjectItem(v, "params");
            const cJSON *same = cJSON_GetObjectItem(v, "same_as");
            char *ps = dt_json_print(pv, 0);
            if (same != NULL) {
                folded++;
                cr_expect(same_kernel(pv, same), "%d workers: %s folded into another kernel",
                          workers, ps);
                cr_expect(!cJSON_GetObjectItem(v, "quick_us") && !dt_json_bool(v, "finalist", 0),
                          "%d workers: folded %s still ranked", workers, ps);
            } else {
                distinct++;
                cr_expect(dt_json_num(v, "quick_us", 0) > 0, "%d workers: %s not timed", workers,
                          ps);
                cJSON_ArrayForEach(u, vs)
                {
                    if (u == v)
                        break;
                    cr_expect(cJSON_GetObjectItem(u, "same_as") ||
                                  !same_kernel(cJSON_GetObjectItem(u, "params"), pv),
                              "%d workers: %s measured twice as distinct", workers, ps);
                }
            }
            free(ps);
        }
        /* The planner's point (TN 128) is followed by TN 64 and 256 within
         * the first six: at least one fold, and still six kernels. */
        cr_expect_gt(folded, 0, "%d workers: no variant was folded", workers);
        cr_expect_eq(distinct, 6, "%d workers: %d distinct kernels measured, budget 6", workers,
                     distinct);
        cr_expect_eq(dt_json_num(res, "variants", 0), distinct + folded);
        cr_expect_not_null(cJSON_GetObjectItem(res, "best"), "%d workers: no best variant",
                           workers);
        cJSON_Delete(res);
    }
}

/* Finalists: a third of the timed kernels at most, and past the two fastest
 * only those within 3% of the fastest quick time. On the slope (100 - WARPS
 * - UNROLL us: 84 us the fastest, then 88, 88 and 90) twelve distinct kernels
 * would make four finalists; the window keeps the two fastest. */
Test(tuner, finalists_past_the_two_fastest_should_be_close_to_the_fastest, .timeout = 120)
{
    setenv("FAKE_TUNE_SLOPE", "1", 1);
    cJSON *res =
        tune_with_fake_workers_in(1, 12, -1, "{\"WARPS\": [1, 2, 4, 8], \"UNROLL\": [2, 4, 8]}");
    unsetenv("FAKE_TUNE_SLOPE");
    const cJSON *vs = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0), "variants");
    int timed = 0, finalists = 0;
    double fastest = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, vs)
    {
        double us = dt_json_num(v, "quick_us", 0);
        timed += us > 0;
        if (us > 0 && (fastest == 0 || us < fastest))
            fastest = us;
    }
    cJSON_ArrayForEach(v, vs)
    {
        if (!dt_json_bool(v, "finalist", 0))
            continue;
        finalists++;
        cr_expect_leq(dt_json_num(v, "quick_us", 0), 88.0, "a finalist at %.1f us",
                      dt_json_num(v, "quick_us", 0));
    }
    cr_assert_eq(timed, 12, "%d kernels timed", timed);
    cr_expect_eq(fastest, 84.0);
    cr_expect_eq(finalists, 2, "%d finalists", finalists);
    cJSON_Delete(res);
}

/* Where v's params differ from from's: the one parameter's name, NULL when
 * they differ in none or in more than one. */
static const char *one_move(const cJSON *from, const cJSON *v)
{
    const char *moved = NULL;
    int n = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, v) if (dt_json_num(from, p->string, -1) != p->valuedouble)
    {
        moved = p->string;
        n++;
    }
    return n == 1 ? moved : NULL;
}

/* Refinement: after the budget's quick timings, the points one step from
 * the fastest quick point along each parameter of the space (sorted
 * values), legal, new, at most `refine` a round, are timed too; a second
 * round moves from the fastest point only if the first round found it.
 * The fake worker's timings are a hash of the params, so which point is
 * fastest is fixed but arbitrary. */
Test(tuner, refinement_should_time_the_neighbours_of_the_fastest_quick_point, .timeout = 120)
{
    static const char *space_json =
        "{\"WARPS\": [1, 2, 4, 8], \"UNROLL\": [2, 4, 8], \"TN\": [32, 64, 128, 256]}";
    cJSON *space = cJSON_Parse(space_json);
    for (int run = 0; run < 4; run++) {
        const int workers = 1 + run % 2;
        /* Runs 2 and 3: a landscape where the fastest point lies two moves
         * from the planner's (WARPS 8, UNROLL 8 from 4, 4), so a second
         * round must follow the first. */
        if (run == 2)
            setenv("FAKE_TUNE_SLOPE", "1", 1);
        cJSON *res = tune_with_fake_workers(workers, 6, 4);
        const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0);
        const cJSON *vs = cJSON_GetObjectItem(s, "variants");
        int rounds[3] = {0};
        for (int r = 1; r <= 2; r++) {
            /* The fastest point timed before round r. */
            const cJSON *best = NULL, *v;
            cJSON_ArrayForEach(
                v, vs) if (dt_json_num(v, "round", 0) < r && dt_json_num(v, "quick_us", 0) > 0 &&
                           (best == NULL || dt_json_num(v, "quick_us", 0) <
                                                dt_json_num(best, "quick_us", 0))) best = v;
            cr_assert_not_null(best, "%d workers: nothing timed", workers);
            const cJSON *from = cJSON_GetObjectItem(best, "params");
            cJSON_ArrayForEach(v, vs)
            {
                if (dt_json_num(v, "round", 0) != r)
                    continue;
                rounds[r]++;
                const cJSON *pv = cJSON_GetObjectItem(v, "params");
                char *ps = dt_json_print(pv, 0);
                const char *name = one_move(from, pv);
                cr_assert_not_null(name, "%d workers: round %d point %s is not one move", workers,
                                   r, ps);
                /* One step along the sorted list (the lists here ascend). */
                const cJSON *vals = cJSON_GetObjectItem(space, name);
                int i = -1, j = -1, k = 0;
                const cJSON *x;
                cJSON_ArrayForEach(x, vals)
                {
                    if (x->valuedouble == dt_json_num(from, name, -1))
                        i = k;
                    if (x->valuedouble == dt_json_num(pv, name, -1))
                        j = k;
                    k++;
                }
                cr_assert(i >= 0 && j >= 0 && abs(i - j) == 1,
                          "%d workers: round %d point %s is not one step of %s", workers, r, ps,
                          name);
                cr_assert(dt_json_num(v, "quick_us", 0) > 0 || cJSON_GetObjectItem(v, "same_as"),
                          "%d workers: round %d point %s not timed", workers, r, ps);
                /* Never a point measured before. */
                const cJSON *u;
                cJSON_ArrayForEach(u, vs)
                    cr_assert(u == v || !cJSON_Compare(cJSON_GetObjectItem(u, "params"), pv, 1),
                              "%d workers: %s measured twice", workers, ps);
                free(ps);
            }
            cr_assert_leq(rounds[r], 4, "%d workers: round %d took %d points", workers, r,
                          rounds[r]);
            /* A second round only from a point the first one found. */
            if (r == 2 && rounds[2] > 0)
                cr_assert_eq(dt_json_num(best, "round", 0), 1,
                             "%d workers: round 2 without a faster round-1 point", workers);
        }
        cr_assert_gt(rounds[1], 0, "%d workers: no refinement round", workers);
        if (run >= 2) {
            cr_assert_gt(rounds[2], 0, "%d workers: no second round on the slope", workers);
            const cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "best"), "params");
            cr_assert(dt_json_num(b, "WARPS", 0) == 8 && dt_json_num(b, "UNROLL", 0) == 8,
                      "%d workers: the search did not reach WARPS 8, UNROLL 8", workers);
        }
        cr_expect_not_null(cJSON_GetObjectItem(res, "best"), "%d workers: no best variant",
                           workers);
        cJSON_Delete(res);
    }
    unsetenv("FAKE_TUNE_SLOPE");
    cJSON_Delete(space);
}

/* A space of more parameters than the cap of a round: every parameter gets a
 * step from the fastest point before any gets a second, and the round takes
 * one per parameter even past the cap (`--refine 2` over five parameters), so
 * the last parameter of the space is moved too -- unless each of its steps was
 * measured before the round. Session 23's tuner took the steps parameter by
 * parameter and stopped at the cap: sell16-thread's fifth parameter, SEQ, was
 * never moved. */
Test(tuner, refinement_should_step_every_parameter_before_any_twice, .timeout = 120)
{
    static const char *space_json = "{\"WARPS\": [1, 2, 4, 8], \"VEC\": [1, 2, 4, 8], "
                                    "\"LANES\": [4, 8, 16, 32], \"ROWS_PER_WARP\": [1, 2, 4, 8], "
                                    "\"UNROLL\": [2, 4, 8]}";
    cJSON *space = cJSON_Parse(space_json);
    for (int workers = 1; workers <= 2; workers++) {
        cJSON *res = tune_with_fake_workers_in(workers, 4, 2, space_json);
        const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0);
        const cJSON *vs = cJSON_GetObjectItem(s, "variants");
        const cJSON *best = NULL, *v;
        cJSON_ArrayForEach(
            v, vs) if (dt_json_num(v, "round", 0) < 1 && dt_json_num(v, "quick_us", 0) > 0 &&
                       (best == NULL ||
                        dt_json_num(v, "quick_us", 0) < dt_json_num(best, "quick_us", 0))) best = v;
        cr_assert_not_null(best, "%d workers: nothing timed", workers);
        const cJSON *from = cJSON_GetObjectItem(best, "params");
        int round1 = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, space)
        {
            /* This parameter's steps: one place down or up its ascending list. */
            int moves = 0, open = 0, len = cJSON_GetArraySize(p), at = -1;
            for (int i = 0; i < len; i++)
                if (cJSON_GetArrayItem(p, i)->valuedouble == dt_json_num(from, p->string, -1))
                    at = i;
            cr_assert_geq(at, 0, "%s not in the space", p->string);
            for (int d = -1; d <= 1; d += 2) {
                if (at + d < 0 || at + d >= len)
                    continue;
                cJSON *pt = cJSON_Duplicate(from, 1);
                cJSON_ReplaceItemInObject(
                    pt, p->string, cJSON_CreateNumber(cJSON_GetArrayItem(p, at + d)->valuedouble));
                int before = 0;
                cJSON_ArrayForEach(v, vs)
                {
                    if (!cJSON_Compare(cJSON_GetObjectItem(v, "params"), pt, 1))
                        continue;
                    if (dt_json_num(v, "round", 0) == 1)
                        moves++;
                    else if (dt_json_num(v, "round", 0) == 0)
                        before = 1;
                }
                open += !before;
                cJSON_Delete(pt);
            }
            cr_assert(moves > 0 || open == 0, "%d workers: round 1 never moved %s from %s", workers,
                      p->string, dt_json_print(from, 0));
            cr_assert_leq(moves, 1 + (open > 1), "%s", p->string);
            round1 += moves;
        }
        cr_assert_geq(round1, 3, "%d workers: round 1 took %d points", workers, round1);
        cJSON_ArrayForEach(v, vs)
            cr_assert(dt_json_num(v, "round", 0) != 1 ||
                          one_move(from, cJSON_GetObjectItem(v, "params")) != NULL,
                      "%d workers: a round-1 point is not one move", workers);
        cJSON_Delete(res);
    }
    cJSON_Delete(space);
}

/* ---- widening the search when the quick timings lose to cuSPARSE -------- */

/* The ranked candidate of `strategy` for SpMM fp32 N=32 on a small matrix. */
static cJSON *ranked_cand(const cJSON *ranked, const char *strategy)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, ranked) if (dt_streq(dt_json_str(c, "strategy", ""),
                                               strategy)) return cJSON_Duplicate(c, 1);
    cr_assert_fail("%s is not among the ranked templates", strategy);
    return NULL;
}

/* Tune ell-baked-spmm with csr-warp-spmm, csr-split-spmm and csr-smem-spmm
 * to widen to, through one fake worker whose cuSPARSE takes base_us
 * (FAKE_TUNE_BASELINE_US) and whose csr-split-spmm variants take 0.25 us
 * when fast_split. Returns the result; caller frees. */
static cJSON *tune_widening_in(const char *base_us, int fast_split, double budget_s, cJSON **lines)
{
    setenv("FAKE_TUNE_BASELINE_US", base_us, 1);
    if (fast_split)
        setenv("FAKE_TUNE_FAST_STRATEGY", "csr-split-spmm", 1);
    else
        unsetenv("FAKE_TUNE_FAST_STRATEGY");
    sp_spec spec;
    sp_spec_init(&spec);
    spec.op = SP_SPMM;
    spec.n = 32;
    dt_err e = {0};
    sp_csr *a = sp_generate("gen:uniform:rows=500,nnz=5000", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_report r;
    cr_assert_eq(sp_report_compute(a, 32, 32, &r, &e), 0, "%s", e.msg);
    cJSON *rep = sp_report_json(&r);
    cJSON *ranked = ag_rank_templates(rep, &spec, "9.0", NULL, &e);
    cr_assert_not_null(ranked, "%s", e.msg);
    cJSON *cands = dt_json_arr(), *more = dt_json_arr();
    cJSON_AddItemToArray(cands, ranked_cand(ranked, "ell-baked-spmm"));
    cJSON_AddItemToArray(more, ranked_cand(ranked, "ell-baked-spmm")); /* already tuned: skipped */
    cJSON_AddItemToArray(more, ranked_cand(ranked, "csr-warp-spmm"));
    cJSON_AddItemToArray(more, ranked_cand(ranked, "csr-split-spmm"));
    cJSON_AddItemToArray(more, ranked_cand(ranked, "csr-smem-spmm"));

    dt_loop *l = dt_loop_new();
    char *la = dt_xasprintf("%s/tests/agents/fake-tune-worker.sh", tu_src_dir());
    gpu_pool_opts po = {
        .workers = 1, .launcher = la, .deadline_s = 30, .start_deadline_s = 20, .log = pool_quiet};
    gpu_pool *p = gpu_pool_new(l, &po, &e);
    cr_assert_not_null(p, "%s", e.msg);
    tune_wait w = {0};
    *lines = dt_json_arr();
    ag_tune_opts o = {.pool = p,
                      .spec = &spec,
                      .matrix = "m",
                      .candidates = cands,
                      .more = more,
                      .budget_variants = 2,
                      .refine = -1,
                      .budget_s = budget_s,
                      .use_cache = 0,
                      .progress = tune_collect,
                      .done = tune_done,
                      .ud = &w};
    tune_lines = *lines;
    ag_tuner *t = ag_tuner_start(&o, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cJSON_Delete(more); /* the tuner keeps its own copy */
    double t0 = dt_now();
    while (!w.done && dt_now() - t0 < 60)
        if (dt_loop_run_once(l, 200) < 0)
            break;
    cr_assert(w.done, "the tuner did not finish within 60 s");
    ag_tuner_free(t);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
    cJSON_Delete(cands);
    cJSON_Delete(ranked);
    cJSON_Delete(rep);
    sp_csr_free(a);
    sp_spec_clear(&spec);
    return w.result;
}

static cJSON *tune_widening(const char *base_us, int fast_split, cJSON **lines)
{
    return tune_widening_in(base_us, fast_split, 60, lines);
}

static int has_line(const cJSON *lines, const char *needle)
{
    const cJSON *l;
    cJSON_ArrayForEach(l, lines) if (strstr(l->valuestring, needle)) return 1;
    return 0;
}

static const char *strategy_of(const cJSON *res, int i)
{
    return dt_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), i), "strategy",
                       "(none)");
}

Test(tuner, quick_timings_losing_to_cusparse_should_widen_to_the_next_strategies, .timeout = 120)
{
    cJSON *lines = NULL;
    cJSON *res = tune_widening("0.5", 1, &lines);
    /* every ell-baked-spmm variant (1 to 7.9 us) loses to 0.5 us: the next
     * two strategies not tuned yet are added; csr-split-spmm wins (0.25) */
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(res, "strategies")), 3);
    cr_expect_str_eq(strategy_of(res, 1), "csr-warp-spmm");
    cr_expect_str_eq(strategy_of(res, 2), "csr-split-spmm");
    const cJSON *wd = cJSON_GetObjectItem(res, "widened");
    cr_assert_eq(cJSON_GetArraySize(wd), 1, "widened once, then a quick timing won");
    cr_expect_eq(dt_json_num(cJSON_GetArrayItem(wd, 0), "cusparse_us", 0), 0.5);
    cr_expect_str_eq(dt_json_str(cJSON_GetObjectItem(res, "quick_baseline"), "alg", ""),
                     "CSR_ALG1");
    cr_expect(has_line(lines, "loses to cuSPARSE CSR_ALG1 at 0.50 us: widening the search to "
                              "[\"csr-warp-spmm\",\"csr-split-spmm\"]"));
    const cJSON *b = cJSON_GetObjectItem(res, "best");
    cr_expect_str_eq(dt_json_str(b, "strategy", ""), "csr-split-spmm");
    cr_expect(!dt_json_bool(res, "cusparse_faster", 1));
    cr_expect_null(cJSON_GetObjectItem(res, "use"));
    /* the two strategies at 1 us or more, four times the winner's 0.25 us,
     * are not compared with cuSPARSE: their results carry their full time
     * and an estimate against the 0.5 us the winner's comparison met */
    for (int i = 0; i < 2; i++) {
        const cJSON *sb = cJSON_GetObjectItem(
            cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), i), "best");
        cr_assert_not_null(sb, "strategy %d kept no result", i);
        cr_expect(cJSON_IsFalse(cJSON_GetObjectItem(sb, "compared")), "strategy %d was compared",
                  i);
        cr_expect_null(cJSON_GetObjectItem(sb, "speedup"), "strategy %d has a measured speedup", i);
        double us = dt_json_num(sb, "us", 0);
        cr_assert_geq(us, 1.0);
        cr_expect_float_eq(dt_json_num(sb, "speedup_estimated", 0), 0.5 / us, 1e-9);
    }
    cr_expect_null(cJSON_GetObjectItem(b, "compared"));
    cr_expect_float_eq(dt_json_num(b, "speedup", 0), 2.0, 1e-9, "0.5 us / 0.25 us, compared");
    cr_expect(has_line(lines, "behind the fastest, 0.25 us; not compared with cuSPARSE"));
    cJSON_Delete(res);
    cJSON_Delete(lines);
}

Test(tuner, a_search_that_never_beats_cusparse_should_say_so_and_name_the_call, .timeout = 120)
{
    cJSON *lines = NULL;
    cJSON *res = tune_widening("0.5", 0, &lines);
    /* widened twice (two, then the last one), every strategy tried */
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(res, "strategies")), 4);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(res, "widened")), 2);
    cr_expect(dt_json_bool(res, "cusparse_faster", 0));
    const cJSON *u = cJSON_GetObjectItem(res, "use");
    cr_assert_not_null(u, "no cuSPARSE call named");
    cr_expect_str_eq(dt_json_str(u, "library", ""), "cusparse");
    cr_expect_str_eq(dt_json_str(u, "alg", ""), "CSR_ALG1");
    cr_expect_lt(dt_json_num(u, "speedup", 1), 1.0);
    cr_expect(has_line(lines, "no generated kernel beats cuSPARSE here"));
    cr_expect(has_line(lines, "call cuSPARSE CSR_ALG1"));
    cJSON_Delete(res);
    cJSON_Delete(lines);
}

Test(tuner, quick_timings_that_beat_cusparse_should_not_widen, .timeout = 120)
{
    cJSON *lines = NULL;
    cJSON *res = tune_widening("100", 0, &lines);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(res, "strategies")), 1);
    cr_expect_null(cJSON_GetObjectItem(res, "widened"));
    cr_expect_eq(dt_json_num(cJSON_GetObjectItem(res, "quick_baseline"), "us", 0), 100);
    cr_expect(!dt_json_bool(res, "cusparse_faster", 1));
    cJSON_Delete(res);
    cJSON_Delete(lines);
}

/* Widening happens within the quick stage's half of the budget: with a
 * budget spent before the first timing comes back, losing to cuSPARSE adds
 * nothing. */
Test(tuner, widening_should_stay_within_the_time_budget, .timeout = 120)
{
    cJSON *lines = NULL;
    cJSON *res = tune_widening_in("0.5", 0, 0.001, &lines);
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(res, "strategies")), 1);
    cr_expect_null(cJSON_GetObjectItem(res, "widened"));
    cr_expect(has_line(lines, "time budget:"));
    cJSON_Delete(res);
    cJSON_Delete(lines);
}

/* A column-major SpMM kernel is timed beside cuSPARSE in its own layout,
 * where cuSPARSE is slow (20 us here) while it takes 2 us row-major: its
 * speedup is taken against the faster of the two. */
Test(tuner, a_kernel_should_be_held_to_the_faster_cusparse_layout, .timeout = 120)
{
    setenv("FAKE_TUNE_BASELINE_US", "2", 1);
    setenv("FAKE_TUNE_COL_BASELINE_US", "20", 1);
    setenv("FAKE_TUNE_FAST_STRATEGY", "csr-warp-spmm-col", 1);
    sp_spec spec;
    sp_spec_init(&spec);
    spec.op = SP_SPMM;
    spec.n = 32;
    dt_err e = {0};
    sp_csr *a = sp_generate("gen:uniform:rows=500,nnz=5000", &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_report r;
    cr_assert_eq(sp_report_compute(a, 32, 32, &r, &e), 0, "%s", e.msg);
    cJSON *rep = sp_report_json(&r);
    cJSON *ranked = ag_rank_templates(rep, &spec, "9.0", NULL, &e);
    cr_assert_not_null(ranked, "%s", e.msg);
    cJSON *cands = dt_json_arr();
    cJSON_AddItemToArray(cands, ranked_cand(ranked, "ell-baked-spmm"));
    cJSON_AddItemToArray(cands, ranked_cand(ranked, "csr-warp-spmm-col"));
    dt_loop *l = dt_loop_new();
    char *la = dt_xasprintf("%s/tests/agents/fake-tune-worker.sh", tu_src_dir());
    gpu_pool_opts po = {
        .workers = 1, .launcher = la, .deadline_s = 30, .start_deadline_s = 20, .log = pool_quiet};
    gpu_pool *p = gpu_pool_new(l, &po, &e);
    cr_assert_not_null(p, "%s", e.msg);
    tune_wait w = {0};
    tune_lines = dt_json_arr();
    ag_tune_opts o = {.pool = p,
                      .spec = &spec,
                      .matrix = "m",
                      .candidates = cands,
                      .budget_variants = 2,
                      .refine = 0,
                      .budget_s = 60,
                      .use_cache = 0,
                      .progress = tune_collect,
                      .done = tune_done,
                      .ud = &w};
    ag_tuner *t = ag_tuner_start(&o, &e);
    cr_assert_not_null(t, "%s", e.msg);
    double t0 = dt_now();
    while (!w.done && dt_now() - t0 < 60)
        if (dt_loop_run_once(l, 200) < 0)
            break;
    cr_assert(w.done, "the tuner did not finish within 60 s");
    const cJSON *b = cJSON_GetObjectItem(w.result, "best");
    cr_expect_str_eq(dt_json_str(b, "strategy", ""), "csr-warp-spmm-col");
    cr_expect_float_eq(dt_json_num(b, "speedup", 0), 8.0, 1e-9, "2 us row-major / 0.25 us");
    cr_expect_float_eq(dt_json_num(b, "speedup_own_layout", 0), 80.0, 1e-6);
    cr_expect_str_eq(dt_json_str(b, "baseline", ""), "CSR_ALG1 (row-major)");
    cr_expect_eq(dt_json_num(b, "baseline_us", 0), 2.0);
    /* the row-major kernel keeps its own, equal, line */
    const cJSON *so, *rowb = NULL;
    cJSON_ArrayForEach(
        so,
        cJSON_GetObjectItem(w.result, "strategies")) if (dt_streq(dt_json_str(so, "strategy", ""),
                                                                  "ell-baked-spmm")) rowb =
        cJSON_GetObjectItem(so, "best");
    cr_assert_not_null(rowb);
    cr_expect_null(cJSON_GetObjectItem(rowb, "speedup_own_layout"));
    unsetenv("FAKE_TUNE_COL_BASELINE_US");
    unsetenv("FAKE_TUNE_FAST_STRATEGY");
    unsetenv("FAKE_TUNE_BASELINE_US");
    ag_tuner_free(t);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
    cJSON_Delete(w.result);
    cJSON_Delete(tune_lines);
    tune_lines = NULL;
    cJSON_Delete(cands);
    cJSON_Delete(ranked);
    cJSON_Delete(rep);
    sp_csr_free(a);
    sp_spec_clear(&spec);
}

/* ---- scheduling over a pool: compile-only, a lost worker, one timing per GPU ---------- */

/* Tune one ell-baked-spmm candidate (12 points) through `workers` fake
 * workers started by "env ENV fake-tune-worker.sh" (ENV may use {device}).
 * gpu: the target's model (NULL: any). Returns the result; caller frees. */
static cJSON *tune_scheduled(const char *env, int workers, const char *gpu, int compile_only,
                             int *restarts)
{
    dt_loop *l = dt_loop_new();
    char *la = dt_xasprintf("env %s %s/tests/agents/fake-tune-worker.sh", env, tu_src_dir());
    /* Every request capped at 3 s (a person's --deadline): a hang ends soon. */
    gpu_pool_opts po = {.workers = workers,
                        .launcher = la,
                        .deadline_s = 30,
                        .start_deadline_s = 20,
                        .max_deadline_s = 3,
                        .log = pool_quiet};
    dt_err e = {0};
    gpu_pool *p = gpu_pool_new(l, &po, &e);
    cr_assert_not_null(p, "%s", e.msg);
    cr_assert_eq(gpu_pool_wait_ready(p, 20), workers);
    sp_spec spec;
    sp_spec_init(&spec);
    spec.op = SP_SPMM;
    spec.n = 32;
    cJSON *cands = cJSON_Parse(
        "[{\"strategy\": \"ell-baked-spmm\", \"template\": \"kernels/spmm_ell.cu\","
        "  \"params\": {\"WARPS\": 4, \"VEC\": 8, \"LANES\": 32, \"ROWS_PER_WARP\": 1,"
        "               \"UNROLL\": 4, \"TN\": 32},"
        "  \"space\": {\"WARPS\": [1, 2, 4, 8], \"UNROLL\": [2, 4, 8], \"TN\": [32]}}]");
    cr_assert_not_null(cands);
    tune_wait w = {0};
    ag_tune_opts o = {.pool = p,
                      .spec = &spec,
                      .matrix = "m",
                      .gpu = gpu,
                      .candidates = cands,
                      .budget_variants = 12,
                      .refine = -1,
                      .budget_s = 60,
                      .use_cache = 0,
                      .compile_only = compile_only,
                      .progress = tune_collect, /* into tune_lines when a test sets it */
                      .done = tune_done,
                      .ud = &w};
    ag_tuner *t = ag_tuner_start(&o, &e);
    cr_assert_not_null(t, "%s", e.msg);
    double t0 = dt_now();
    while (!w.done && dt_now() - t0 < 60)
        if (dt_loop_run_once(l, 200) < 0)
            break;
    cr_assert(w.done, "the tuner did not finish within 60 s");
    if (restarts)
        *restarts = gpu_pool_restarts(p);
    ag_tuner_free(t);
    cJSON_Delete(cands);
    sp_spec_clear(&spec);
    gpu_pool_free(p);
    dt_loop_free(l);
    free(la);
    return w.result;
}

Test(tuner, compile_only_should_account_for_every_variant_when_a_worker_keeps_dying, .timeout = 120)
{
    /* Worker 1 dies at its second compile, every time it is started. */
    int restarts = 0;
    cJSON *res =
        tune_scheduled("FAKE_TUNE_DIE_AT=$(( {device} == 1 ? 2 : 0 ))", 3, NULL, 1, &restarts);
    cr_assert(dt_json_bool(res, "compile_only", 0));
    cr_assert_eq(dt_json_num(res, "variants", 0), 12);
    cr_assert_eq(dt_json_num(res, "compiled", 0), 12, "lost: %g", dt_json_num(res, "lost", -1));
    cr_assert_eq(dt_json_num(res, "lost", -1), 0);
    cr_assert(restarts >= 1, "worker 1 never died");
    const cJSON *vs = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0), "variants");
    cr_assert_eq(cJSON_GetArraySize(vs), 12);
    const cJSON *v;
    int per[3] = {0, 0, 0};
    cJSON_ArrayForEach(v, vs)
    {
        cr_assert(dt_json_bool(v, "compiled", 0));
        cr_assert(!cJSON_GetObjectItem(v, "quick_us"), "compile-only timed a variant");
        cr_assert(dt_json_num(cJSON_GetArrayItem(cJSON_GetObjectItem(v, "kernels"), 0), "registers",
                              0) >= 16);
        int w = (int)dt_json_num(v, "worker", -1);
        cr_assert(w >= 0 && w < 3);
        per[w]++;
    }
    /* Spread over the workers; the dying one compiled at most one per start. */
    cr_assert(per[0] > 0 && per[2] > 0, "%d %d %d", per[0], per[1], per[2]);
    cr_assert(per[1] <= restarts + 1, "%d %d %d (restarts %d)", per[0], per[1], per[2], restarts);
    cJSON_Delete(res);
}

Test(tuner, timings_should_run_one_at_a_time_per_gpu_and_only_on_the_targets_model, .timeout = 120)
{
    char *dir = tu_tmpdir();
    /* Workers 0..3 share two FakeGPUs (0 and 1); worker 4 has another
     * model; worker 5 a FakeGPU of its own (2) but no "measure" capability. */
    char *env =
        dt_xasprintf("FAKE_TUNE_LOCKS='%s' FAKE_TUNE_GPU=$(( {device} == 5 ? 2 : {device} %% 2 )) "
                     "FAKE_TUNE_NAME=$( [ {device} = 4 ] && echo OtherGPU || echo FakeGPU) "
                     "FAKE_TUNE_CAPS=$( [ {device} = 5 ] && echo '\"compile\"' || echo "
                     "'\"compile\",\"measure\"')",
                     dir);
    cJSON *res = tune_scheduled(env, 6, "FakeGPU", 0, NULL);
    const cJSON *vs = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0), "variants");
    const cJSON *v;
    cJSON_ArrayForEach(v, vs)
        cr_assert(dt_json_num(v, "quick_us", 0) > 0 || cJSON_GetObjectItem(v, "same_as"),
                  "a variant was not timed: %s", cJSON_PrintUnformatted(v));
    char *p = dt_xasprintf("%s/overlaps", dir);
    char *overlaps = dt_read_file(p, NULL, NULL);
    cr_assert_null(overlaps, "two timings at once on one GPU: %s", overlaps);
    free(p);
    p = dt_xasprintf("%s/timed", dir);
    char *timed = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(timed);
    cr_assert(strstr(timed, "FakeGPU 0") && strstr(timed, "FakeGPU 1"), "both GPUs time: %s",
              timed);
    cr_assert_null(strstr(timed, "OtherGPU"), "another model timed: %s", timed);
    cr_assert_null(strstr(timed, "FakeGPU 2"), "a worker without measure timed: %s", timed);
    free(timed);
    free(p);
    cJSON_Delete(res);
    free(env);
    tu_rmtree(dir);
    free(dir);
}

Test(tuner, a_compile_that_hangs_should_be_tried_once_more_and_every_variant_accounted_for,
     .timeout = 120)
{
    /* The first compile sent is never answered (a node gone silent). */
    char *dir = tu_tmpdir();
    char *env = dt_xasprintf("FAKE_TUNE_HANG_ONCE='%s/hung'", dir);
    int restarts = 0;
    cJSON *res = tune_scheduled(env, 2, NULL, 1, &restarts);
    cr_assert_eq(dt_json_num(res, "compiled", 0), 12, "lost: %g", dt_json_num(res, "lost", -1));
    cr_assert_eq(dt_json_num(res, "lost", -1), 0);
    cr_assert_eq(restarts, 1, "the hung worker should have been killed and restarted once");
    cJSON_Delete(res);
    free(env);
    tu_rmtree(dir);
    free(dir);
}

Test(tuner, without_a_named_gpu_timings_should_stay_on_the_first_workers_model, .timeout = 120)
{
    /* Workers 0 and 1: FakeGPU 0 and 1 (sm_80); worker 2: OtherGPU 2. No
     * target named: timings on two models would not compare. */
    char *dir = tu_tmpdir();
    char *env = dt_xasprintf("FAKE_TUNE_LOCKS='%s' FAKE_TUNE_GPU={device} FAKE_TUNE_CC=8.0 "
                             "FAKE_TUNE_LOG='%s/requests' "
                             "FAKE_TUNE_NAME=$( [ {device} = 2 ] && echo OtherGPU || echo FakeGPU)",
                             dir, dir);
    tune_lines = dt_json_arr();
    cJSON *res = tune_scheduled(env, 3, NULL, 0, NULL);
    const cJSON *vs = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0), "variants");
    const cJSON *v;
    cJSON_ArrayForEach(v, vs)
        cr_assert(dt_json_num(v, "quick_us", 0) > 0 || cJSON_GetObjectItem(v, "same_as"),
                  "a variant was not timed: %s", cJSON_PrintUnformatted(v));
    char *p = dt_xasprintf("%s/timed", dir);
    char *timed = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(timed);
    cr_assert_null(strstr(timed, "OtherGPU"), "another model timed: %s", timed);
    cr_assert(strstr(timed, "FakeGPU"), "%s", timed);
    cr_assert(has_line(tune_lines, "timings on FakeGPU (worker 0's GPU): worker 2's OtherGPU "
                                   "compiles only"));
    /* Compiles, wherever they run, are for the timing GPU's architecture. */
    free(p);
    p = dt_xasprintf("%s/requests", dir);
    char *reqs = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(reqs);
    int compiles = 0;
    for (char *line = strstr(reqs, "compile arch="); line;
         line = strstr(line + 1, "compile arch=")) {
        cr_assert(strncmp(line, "compile arch=sm_80\n", 19) == 0,
                  "a compile for another arch: %.40s", line);
        compiles++;
    }
    cr_assert(compiles > 0, "no precompile was sent");
    free(reqs);
    free(timed);
    free(p);
    cJSON_Delete(res);
    cJSON_Delete(tune_lines);
    tune_lines = NULL;
    free(env);
    tu_rmtree(dir);
    free(dir);
}

Test(tuner, the_summary_should_count_the_workers_compile_cache_hits_and_compiles, .timeout = 120)
{
    /* Two workers share one cache (FAKE_TUNE_CUBINS): each variant is
     * compiled once, by its precompile; every later request hits. */
    char *dir = tu_tmpdir();
    char *env = dt_xasprintf("FAKE_TUNE_GPU={device} FAKE_TUNE_CUBINS='%s'", dir);
    tune_lines = dt_json_arr();
    cJSON *res = tune_scheduled(env, 2, NULL, 0, NULL);
    const cJSON *cc = cJSON_GetObjectItem(res, "compile_cache");
    cr_assert_not_null(cc, "no compile_cache in the result");
    const cJSON *vs = cJSON_GetObjectItem(
        cJSON_GetArrayItem(cJSON_GetObjectItem(res, "strategies"), 0), "variants");
    int timed = 0;
    const cJSON *v;
    cJSON_ArrayForEach(v, vs) timed += dt_json_num(v, "quick_us", 0) > 0;
    /* Once per variant (12, and a reserve point the precompile may take),
     * not once per request. */
    int compiles = (int)dt_json_num(cc, "compiles", -1);
    cr_assert(compiles >= 12 && compiles <= 14, "%s", cJSON_PrintUnformatted(cc));
    cr_assert(dt_json_num(cc, "hits", 0) >= timed, "%s (timed %d)", cJSON_PrintUnformatted(cc),
              timed);
    char want[80];
    snprintf(want, sizeof want, "compile cache: %d hits, %d compiles",
             (int)dt_json_num(cc, "hits", 0), compiles);
    cr_assert(has_line(tune_lines, want), "no line '%s'", want);
    cJSON_Delete(res);
    cJSON_Delete(tune_lines);
    tune_lines = NULL;
    free(env);
    tu_rmtree(dir);
    free(dir);
}

/* A reviewer's register cap ("fewer registers") holds for every variant the
 * tuner compiles, verifies and times, the tuner says so, the result names
 * it, and a winner cached without the cap is not reused under it. */
Test(tuner, a_register_cap_should_reach_every_variant_and_be_said, .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *log = dt_xasprintf("%s/opts.log", dir);
    char *cache = dt_xasprintf("%s/cache", dir);
    setenv("XDG_CACHE_HOME", cache, 1);
    setenv("FAKE_TUNE_OPTS_LOG", log, 1);
    tune_use_cache = 1;
    /* without a cap first: its winner goes into the cache */
    cJSON *res = tune_with_fake_workers(1, 4, -1);
    cr_assert_not_null(cJSON_GetObjectItem(res, "best"));
    cr_assert_null(cJSON_GetObjectItem(res, "options"));
    cJSON_Delete(res);
    char *text = dt_read_file(log, NULL, NULL);
    cr_assert(text && strstr(text, "measure none"), "%s", text ? text : "");
    cr_assert_null(strstr(text, "maxrregcount"));
    free(text);
    unlink(log);
    /* with the cap: every kernel the workers get carries it */
    cJSON *opts = cJSON_Parse("[\"--maxrregcount=40\"]");
    tune_options = opts;
    tune_options_why = "because you said \"fewer registers\"";
    tune_lines = cJSON_CreateArray();
    res = tune_with_fake_workers(2, 4, -1);
    tune_options = NULL;
    tune_options_why = NULL;
    cr_assert_not(dt_json_bool(res, "cached", 1),
                  "the winner cached without the cap was reused under it");
    text = dt_read_file(log, NULL, NULL);
    cr_assert_not_null(text);
    int kernels = 0, capped = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (dt_startswith(l, "measure ") || dt_startswith(l, "verify ") ||
            dt_startswith(l, "compile ")) {
            kernels++;
            capped += strstr(l, "\"--maxrregcount=40\"") != NULL;
        }
    }
    cr_assert_gt(kernels, 4, "the variants were compiled and timed");
    cr_assert_eq(capped, kernels, "%d of %d kernels sent without the cap", kernels - capped,
                 kernels);
    free(text);
    int said = 0;
    const cJSON *ln;
    cJSON_ArrayForEach(ln, tune_lines)
    {
        said |= strstr(ln->valuestring, "every variant is compiled with --maxrregcount=40: "
                                        "because you said \"fewer registers\"") != NULL;
    }
    cr_assert(said, "the tuner did not say it applies the cap");
    cJSON_Delete(tune_lines);
    tune_lines = NULL;
    cr_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(res, "options"), 0)->valuestring,
                     "--maxrregcount=40");
    const cJSON *bo = cJSON_GetObjectItem(cJSON_GetObjectItem(res, "best"), "options");
    cr_assert(cJSON_IsArray(bo) &&
                  dt_streq(cJSON_GetArrayItem(bo, 0)->valuestring, "--maxrregcount=40"),
              "the best variant does not name its cap");
    cJSON_Delete(res);
    cJSON_Delete(opts);
    tune_use_cache = 0;
    unsetenv("FAKE_TUNE_OPTS_LOG");
    unsetenv("XDG_CACHE_HOME");
    free(cache);
    free(log);
    tu_rmtree(dir);
    free(dir);
}
