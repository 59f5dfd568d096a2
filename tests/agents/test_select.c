/* test_select.c -- the planner's guarantee that a strategy safe for skewed
 * rows is always among the candidates tuned, whatever rules fire. */
#include "tests/common/testutil.h"

#include "agents/agents.h"

#include <stdlib.h>
#include <string.h>

static cJSON *parse(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    cr_assert_not_null(j, "%s", s);
    return j;
}

static const char *strategy_at(const cJSON *cands, int i)
{
    return dt_json_str(cJSON_GetArrayItem(cands, i), "strategy", "(none)");
}

/* A report with a longest row of `max` entries and rows spanning `span` columns. */
static cJSON *report_with(int max, int span)
{
    char buf[160];
    snprintf(buf, sizeof buf, "{\"row_length\": {\"max\": %d}, \"col_span_max\": %d}", max, span);
    return parse(buf);
}

Test(select, a_safe_strategy_ranked_low_should_be_moved_to_the_third_place)
{
    cJSON *rep = report_with(100000, 100000);
    cJSON *c = parse("[{\"strategy\": \"csr-vector\", \"score\": 80},"
                     " {\"strategy\": \"csr-stream\", \"score\": 60},"
                     " {\"strategy\": \"bsr-group\", \"score\": 40},"
                     " {\"strategy\": \"ell-baked\", \"score\": 30},"
                     " {\"strategy\": \"seg16\", \"score\": 20},"
                     " {\"strategy\": \"merge-path\", \"score\": 0},"
                     " {\"strategy\": \"csr-adaptive\", \"score\": 0}]");
    ag_ensure_skew_safe(c, rep, SP_SPMV, 3);
    cr_assert_eq(cJSON_GetArraySize(c), 7, "nothing is dropped");
    /* seg16 scores highest of the safe-looking ones, but its tile cannot
     * hold a row of 100000: merge-path (ties to the table's order) moves */
    cr_expect_str_eq(strategy_at(c, 2), "merge-path");
    cr_expect_str_eq(strategy_at(c, 3), "bsr-group");
    const cJSON *m = cJSON_GetArrayItem(c, 2);
    cr_expect(dt_json_bool(m, "skew_safe", 0));
    cr_expect(!dt_json_bool(cJSON_GetArrayItem(c, 0), "skew_safe", 1));
    const cJSON *last = NULL, *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(m, "rationale")) last = w;
    cr_assert_not_null(last, "the move has no rationale");
    cr_expect_str_eq(dt_json_str(last, "rule", ""), "planner.skew-safe");
    cr_expect_not_null(strstr(dt_json_str(last, "text", ""), "placed 3"));
    const cJSON *s16 = NULL;
    cJSON_ArrayForEach(w, c) if (dt_streq(dt_json_str(w, "strategy", ""), "seg16")) s16 = w;
    cr_expect(!dt_json_bool(s16, "skew_safe", 1), "seg16 marked safe for a row of 100000");
    cJSON_Delete(c);
    cJSON_Delete(rep);

    /* short rows within seg16's tile: it is safe, and it scored highest */
    rep = report_with(900, 5000);
    c = parse("[{\"strategy\": \"csr-vector\", \"score\": 80},"
              " {\"strategy\": \"csr-stream\", \"score\": 60},"
              " {\"strategy\": \"bsr-group\", \"score\": 40},"
              " {\"strategy\": \"seg16\", \"score\": 20},"
              " {\"strategy\": \"merge-path\", \"score\": 0}]");
    ag_ensure_skew_safe(c, rep, SP_SPMV, 3);
    cr_expect_str_eq(strategy_at(c, 2), "seg16");
    cJSON_Delete(c);
    cJSON_Delete(rep);
}

Test(select, a_ranking_with_a_safe_strategy_in_place_should_be_left_alone)
{
    cJSON *rep = report_with(10, 10);
    cJSON *c = parse("[{\"strategy\": \"csr-warp-spmm\", \"score\": 80},"
                     " {\"strategy\": \"csr-split-spmm\", \"score\": 60},"
                     " {\"strategy\": \"ell-baked-spmm\", \"score\": 40}]");
    char *before = dt_json_print(c, 0);
    ag_ensure_skew_safe(c, rep, SP_SPMM, 3);
    cr_expect_str_eq(strategy_at(c, 1), "csr-split-spmm");
    cr_expect(dt_json_bool(cJSON_GetArrayItem(c, 1), "skew_safe", 0));
    cr_expect_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(c, 1), "rationale")), 0,
                 "a rationale was added to %s", before);
    free(before);
    cJSON_Delete(c);
    cJSON_Delete(rep);
}

Test(select, a_cut_should_keep_a_safe_strategy_as_an_extra)
{
    cJSON *rep = report_with(10, 10);
    cJSON *c = parse("[{\"strategy\": \"coo-sddmm\", \"score\": 9},"
                     " {\"strategy\": \"csr-warp-sddmm\", \"score\": 8},"
                     " {\"strategy\": \"row-union-sddmm\", \"score\": 7},"
                     " {\"strategy\": \"dense-tile-sddmm\", \"score\": 6}]");
    ag_ensure_skew_safe(c, rep, SP_SDDMM, 3);
    cJSON *d = cJSON_Duplicate(c, 1);
    ag_candidates_cut(c, 2);
    cr_expect_eq(cJSON_GetArraySize(c), 2, "coo-sddmm is safe and first: a plain cut");
    cJSON_Delete(c);
    /* With the safe one third, a cut to one keeps it as a second. */
    cJSON_Delete(d);
    d = parse("[{\"strategy\": \"csr-warp-sddmm\", \"score\": 8, \"skew_safe\": false},"
              " {\"strategy\": \"row-union-sddmm\", \"score\": 7, \"skew_safe\": false},"
              " {\"strategy\": \"coo-sddmm\", \"score\": 6, \"skew_safe\": true},"
              " {\"strategy\": \"csr-nnz-sddmm\", \"score\": 5, \"skew_safe\": true}]");
    ag_candidates_cut(d, 1);
    cr_assert_eq(cJSON_GetArraySize(d), 2);
    cr_expect_str_eq(strategy_at(d, 0), "csr-warp-sddmm");
    cr_expect_str_eq(strategy_at(d, 1), "coo-sddmm");
    cJSON_Delete(d);
    cJSON_Delete(rep);
}

/* The case list the bench runs: op, dtype, n. */
static const struct {
    sp_op op;
    sp_dtype t;
    int n;
} ops[] = {{SP_SPMV, SP_FP32, 1},   {SP_SPMV, SP_FP64, 1},   {SP_SPMM, SP_FP32, 32},
           {SP_SPMM, SP_FP32, 128}, {SP_SDDMM, SP_FP32, 32}, {SP_SDDMM, SP_FP32, 128}};

/* Every op's ranking, cut to 1, 2 and 3 as `ditto bench --strategies N`
 * cuts it, holds a strategy safe for skewed rows on `source`. */
static void every_cut_should_hold_a_safe_strategy(const char *source)
{
    dt_err e = {0};
    sp_csr *a = sp_load(source, NULL, &e);
    cr_assert_not_null(a, "%s: %s", source, e.msg);
    for (size_t o = 0; o < DT_ARRAY_LEN(ops); o++) {
        sp_report r;
        cr_assert_eq(sp_report_compute(a, ops[o].n, ops[o].n, &r, &e), 0, "%s", e.msg);
        cJSON *rep = sp_report_json(&r);
        sp_spec spec;
        sp_spec_init(&spec);
        spec.op = ops[o].op;
        spec.dtype = ops[o].t;
        spec.n = ops[o].n;
        cJSON *ranked = ag_rank_templates(rep, &spec, "9.0", NULL, &e);
        cr_assert_not_null(ranked, "%s: %s", source, e.msg);
        for (int n = 1; n <= 3; n++) {
            cJSON *c = cJSON_Duplicate(ranked, 1);
            ag_candidates_cut(c, n);
            int safe = 0;
            const cJSON *x;
            cJSON_ArrayForEach(x, c)
            {
                safe |= dt_json_bool(x, "skew_safe", 0);
                cr_expect_eq(dt_json_bool(x, "skew_safe", 0),
                             ag_skew_safe(spec.op, dt_json_str(x, "strategy", ""), rep, NULL));
            }
            cr_expect(safe, "%s %s %s n=%d: no skew-safe strategy among the first %d", source,
                      sp_op_name(spec.op), sp_dtype_name(spec.dtype), spec.n, n);
            cr_expect_leq(cJSON_GetArraySize(c), n + 1);
            cJSON_Delete(c);
        }
        cJSON_Delete(ranked);
        cJSON_Delete(rep);
        sp_spec_clear(&spec);
    }
    sp_csr_free(a);
}

Test(select, arrowhead_and_power_law_rankings_should_always_hold_a_safe_strategy, .timeout = 120)
{
    static const char *sources[] = {
        "gen:arrow:rows=20000,nnz=200000,hubs=2",
        "gen:arrow:rows=3000,cols=9000,nnz=60000,hubs=4,hublen=4000",
        "gen:powerlaw:rows=30000,cols=30000,nnz=300000,exp=1.1",
        "gen:powerlaw:rows=2000,cols=40000,nnz=100000,exp=0.9,empty=0.3", /* wide, empty rows */
        "gen:rmat:rows=16384,nnz=160000",
        "gen:stencil5:rows=40000",
        /* past the rules' 2M-nonzero line, where the HBM-size rules fire */
        "rep:gen:arrow:rows=20000,nnz=200000,hubs=2:nnz=4M",
        "rep:gen:powerlaw:rows=30000,cols=30000,nnz=300000,exp=1.1:nnz=4M",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(sources); i++)
        every_cut_should_hold_a_safe_strategy(sources[i]);
}

/* Whether `strategy` is anywhere in the ranking of `source` for op. */
static int ranked_anywhere(const char *source, sp_op op, int n, const char *strategy)
{
    dt_err e = {0};
    sp_csr *a = sp_load(source, NULL, &e);
    cr_assert_not_null(a, "%s: %s", source, e.msg);
    sp_report r;
    cr_assert_eq(sp_report_compute(a, n, n, &r, &e), 0, "%s", e.msg);
    cJSON *rep = sp_report_json(&r);
    sp_spec spec;
    sp_spec_init(&spec);
    spec.op = op;
    spec.dtype = SP_FP32;
    spec.n = n;
    cJSON *ranked = ag_rank_templates(rep, &spec, "9.0", NULL, &e);
    cr_assert_not_null(ranked, "%s: %s", source, e.msg);
    int found = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, ranked)
        found |= dt_streq(dt_json_str(x, "strategy", ""), strategy);
    cJSON_Delete(ranked);
    cJSON_Delete(rep);
    sp_spec_clear(&spec);
    sp_csr_free(a);
    return found;
}

/* The ELL templates' contracts refuse more than 4 slots per nonzero once
 * rows are padded to the longest: a matrix with a hub row must not spend a
 * candidate's place on them (the worker would refuse every variant). */
Test(select, a_template_whose_padding_the_contract_refuses_should_not_be_ranked)
{
    const char *hub = "gen:arrow:rows=300,nnz=1400,hubs=1";
    const char *even = "gen:stencil5:rows=400";
    cr_expect(!ranked_anywhere(hub, SP_SPMV, 1, "ell-baked"), "ell-baked ranked on %s", hub);
    cr_expect(!ranked_anywhere(hub, SP_SPMM, 32, "ell-baked-spmm"), "ell-baked-spmm ranked on %s",
              hub);
    cr_expect(ranked_anywhere(even, SP_SPMV, 1, "ell-baked"), "ell-baked missing on %s", even);
    cr_expect(ranked_anywhere(even, SP_SPMM, 32, "ell-baked-spmm"), "ell-baked-spmm missing on %s",
              even);
}
