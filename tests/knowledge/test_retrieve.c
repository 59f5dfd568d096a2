/* test_retrieve.c -- retrieval: approved entries only, matched by op, dtype
 * and compute capability, ranked by a hand-computed feature distance. */
#include "tests/knowledge/kbtest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(retrieve, .init = kbt_setup, .fini = kbt_teardown);

static cJSON *with(const char *id, const char *kind, const char *status, const char *applies)
{
    cJSON *e = kbt_entry(id, kind, status);
    if (applies != NULL)
        dt_json_set_take(e, "applies_to", kbt_parse(applies));
    return e;
}

/* The fixture base: one shipped file holding every entry. */
static kb *fixture(void)
{
    cJSON *arr = dt_json_arr();
    cJSON_AddItemToArray(arr, with("rule.a", "rule", "approved",
                                   "{\"op\": [\"spmv\"], \"features\": {\"row_cv\": [0, 0.5]}}"));
    cJSON_AddItemToArray(arr, with("rule.b", "rule", "approved",
                                   "{\"op\": [\"spmv\"], \"features\": {\"row_cv\": [2, null]}}"));
    cJSON_AddItemToArray(arr, with("rule.c", "rule", "approved",
                                   "{\"op\": [\"spmv\"], \"features\": {\"row_mean\": [8, 16]}}"));
    cJSON_AddItemToArray(arr, with("rule.d-proposed", "rule", "proposed", "{\"op\": [\"spmv\"]}"));
    cJSON_AddItemToArray(arr, with("rule.e-rejected", "rule", "rejected", "{\"op\": [\"spmv\"]}"));
    cJSON_AddItemToArray(arr, with("rule.f-spmm", "rule", "approved", "{\"op\": [\"spmm\"]}"));
    cJSON_AddItemToArray(arr, with("pitfall.g", "pitfall", "approved", NULL));
    cJSON_AddItemToArray(arr, with("rule.h-half", "rule", "approved",
                                   "{\"op\": [\"spmv\", \"spmm\"], \"dtype\": [\"fp16\"],"
                                   " \"cc\": [\"8.0+\"]}"));
    cJSON_AddItemToArray(arr, with("hw.i", "hardware-fact", "approved", "{\"cc\": [\"9.0\"]}"));
    cJSON_AddItemToArray(arr, with("rule.j-big", "rule", "approved",
                                   "{\"op\": [\"spmv\"], \"features\": {\"nnz\": [1000000, null],"
                                   " \"row_cv\": [0, 10]}}"));
    char *dir = dt_xasprintf("%s/shipped", kbt_scratch());
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(dir, &e), 0);
    free(kbt_write_doc(dir, "all.json", arr));
    cJSON_Delete(arr);
    dt_buf p = DT_BUF_INIT;
    kb *k = kbt_open(dir, &p);
    cr_assert_eq(p.len, 0, "%s", dt_buf_str(&p));
    cr_assert_eq(kb_count(k), 10);
    dt_buf_free(&p);
    free(dir);
    return k;
}

/* The ids of a result, space-separated, into a static buffer. */
static const char *ids(const cJSON *hits)
{
    static char buf[1024];
    buf[0] = '\0';
    for (const cJSON *e = hits->child; e != NULL; e = e->next) {
        strcat(buf, dt_json_str(e, "id", "?"));
        if (e->next)
            strcat(buf, " ");
    }
    return buf;
}

static double dist(const cJSON *hits, const char *id)
{
    for (const cJSON *e = hits->child; e != NULL; e = e->next) {
        if (dt_streq(dt_json_str(e, "id", ""), id))
            return dt_json_num(e, "distance", -1);
    }
    cr_assert_fail("%s not retrieved", id);
    return -1;
}

Test(retrieve, rules_should_rank_by_the_documented_distance)
{
    kb *k = fixture();
    cJSON *q = kbt_parse("{\"row_cv\": 1.0, \"row_mean\": 3, \"nnz\": 250000}");
    cJSON *hits = kb_retrieve(k, "rule", "spmv", "fp32", "9.0", q, 0);
    /* rule.a: row_cv 1.0 is 0.5 above [0, 0.5]; width 0.5 > unit 0.25: 0.5 / 0.5 = 1.
     * rule.b: 1.0 below [2, open): no width, unit 0.25: 1.0 / 0.25 = 4.
     * rule.c: row_mean (log) log2(1+3) = 2 below log2(9); width log2(17) - log2(9) =
     *         0.918 < unit 1: log2(9) - 2 = 1.1699.
     * rule.j: nnz (log) log2(250001) below log2(1000001), open: 2.0; row_cv inside. */
    cr_assert_str_eq(ids(hits), "rule.a rule.c rule.j-big rule.b");
    cr_assert_float_eq(dist(hits, "rule.a"), 1.0, 1e-12);
    cr_assert_float_eq(dist(hits, "rule.b"), 4.0, 1e-12);
    cr_assert_float_eq(dist(hits, "rule.c"), log2(9.0) - 2.0, 1e-12);
    cr_assert_float_eq(dist(hits, "rule.j-big"), log2(1000001.0 / 250001.0), 1e-12);
    cJSON_Delete(hits);

    /* Inside every range (ends included) is 0. */
    cJSON_Delete(q);
    q = kbt_parse("{\"row_cv\": 0.5, \"row_mean\": 16, \"nnz\": 1000000}");
    hits = kb_retrieve(k, "rule", "spmv", NULL, NULL, q, 0);
    cr_assert_eq(dist(hits, "rule.a"), 0);
    cr_assert_eq(dist(hits, "rule.c"), 0);
    cr_assert_eq(dist(hits, "rule.j-big"), 0);
    cr_assert_float_eq(dist(hits, "rule.b"), 6.0, 1e-12);
    cJSON_Delete(hits);
    cJSON_Delete(q);
    kb_close(k);
}

Test(retrieve, only_approved_entries_should_be_retrieved)
{
    kb *k = fixture();
    cJSON *hits = kb_retrieve(k, NULL, NULL, NULL, NULL, NULL, 0);
    const char *got = ids(hits);
    cr_assert(strstr(got, "proposed") == NULL, "%s", got);
    cr_assert(strstr(got, "rejected") == NULL, "%s", got);
    cr_assert_eq(cJSON_GetArraySize(hits), 8, "%s", got);
    /* No features: every distance is 0 and the order is by id. */
    cr_assert_str_eq(got, "hw.i pitfall.g rule.a rule.b rule.c rule.f-spmm rule.h-half rule.j-big");
    for (const cJSON *e = hits->child; e != NULL; e = e->next)
        cr_assert_eq(dt_json_num(e, "distance", -1), 0);
    cJSON_Delete(hits);
    kb_close(k);
}

Test(retrieve, op_dtype_and_cc_should_filter)
{
    kb *k = fixture();
    cJSON *hits = kb_retrieve(k, NULL, "spmm", NULL, NULL, NULL, 0);
    cr_assert_str_eq(ids(hits), "hw.i pitfall.g rule.f-spmm rule.h-half");
    cJSON_Delete(hits);
    /* fp32 excludes the fp16-only rule; cc 7.5 is below "8.0+"; 8.6 is above
     * it but not "9.0". */
    hits = kb_retrieve(k, NULL, "spmm", "fp32", "9.0", NULL, 0);
    cr_assert_str_eq(ids(hits), "hw.i pitfall.g rule.f-spmm");
    cJSON_Delete(hits);
    hits = kb_retrieve(k, NULL, "spmm", "fp16", "7.5", NULL, 0);
    cr_assert_str_eq(ids(hits), "pitfall.g rule.f-spmm");
    cJSON_Delete(hits);
    hits = kb_retrieve(k, NULL, "spmm", "fp16", "8.6", NULL, 0);
    cr_assert_str_eq(ids(hits), "pitfall.g rule.f-spmm rule.h-half");
    cJSON_Delete(hits);
    hits = kb_retrieve(k, NULL, "spmm", "fp16", "10.0", NULL, 0);
    cr_assert_str_eq(ids(hits), "pitfall.g rule.f-spmm rule.h-half");
    cJSON_Delete(hits);
    /* A malformed cc query matches only entries without a cc part. */
    hits = kb_retrieve(k, NULL, "spmm", "fp16", "nine", NULL, 0);
    cr_assert_str_eq(ids(hits), "pitfall.g rule.f-spmm");
    cJSON_Delete(hits);
    /* kind filters too; "" is no filter. */
    hits = kb_retrieve(k, "hardware-fact", "", "", "9.0", NULL, 0);
    cr_assert_str_eq(ids(hits), "hw.i");
    cJSON_Delete(hits);
    hits = kb_retrieve(k, "strategy", NULL, NULL, NULL, NULL, 0);
    cr_assert_eq(cJSON_GetArraySize(hits), 0);
    cJSON_Delete(hits);
    kb_close(k);
}

Test(retrieve, max_missing_and_unknown_features_and_copies)
{
    kb *k = fixture();
    cJSON *q = kbt_parse("{\"row_cv\": 1.0, \"row_mean\": 3, \"nnz\": 250000}");
    cJSON *hits = kb_retrieve(k, "rule", "spmv", "fp32", NULL, q, 2);
    cr_assert_str_eq(ids(hits), "rule.a rule.c");
    /* Results are copies with the distance added; the base is untouched. */
    cr_assert_null(cJSON_GetObjectItem(kb_get(k, "rule.a"), "distance"));
    cJSON_Delete(hits);
    cJSON_Delete(q);
    /* A feature the query lacks does not count; a name that is not a feature
     * and a non-number are ignored. */
    q = kbt_parse("{\"row_mean\": 64, \"gini\": 9, \"row_cv\": \"high\"}");
    hits = kb_retrieve(k, "rule", "spmv", NULL, NULL, q, 0);
    cr_assert_eq(dist(hits, "rule.a"), 0);
    cr_assert_eq(dist(hits, "rule.b"), 0);
    cr_assert_float_eq(dist(hits, "rule.c"), log2(65.0) - log2(17.0), 1e-12);
    cr_assert_str_eq(ids(hits), "rule.a rule.b rule.h-half rule.j-big rule.c");
    cJSON_Delete(hits);
    cJSON_Delete(q);
    kb_close(k);
}

Test(retrieve, ranking_should_be_deterministic)
{
    kb *k = fixture();
    cJSON *q = kbt_parse("{\"row_cv\": 3, \"row_mean\": 10}");
    cJSON *first = kb_retrieve(k, NULL, "spmv", NULL, NULL, q, 0);
    for (int i = 0; i < 5; i++) {
        cJSON *again = kb_retrieve(k, NULL, "spmv", NULL, NULL, q, 0);
        cr_assert(cJSON_Compare(first, again, 1));
        cJSON_Delete(again);
    }
    double prev = -1;
    for (const cJSON *e = first->child; e != NULL; e = e->next) {
        cr_assert_geq(dt_json_num(e, "distance", -1), prev);
        prev = dt_json_num(e, "distance", -1);
    }
    cJSON_Delete(first);
    cJSON_Delete(q);
    kb_close(k);
}

Test(retrieve, entries_matching_the_features_should_rank_above_those_that_merely_do_not_conflict)
{
    kb *k = fixture();
    /* rule.j-big holds on two features, rule.a and rule.c on one each; the
     * entries without feature ranges (hw.i, pitfall.g, rule.h-half) are at
     * distance 0 too but say nothing about this matrix; rule.b misses. */
    cJSON *q = kbt_parse("{\"row_cv\": 0.3, \"row_mean\": 12, \"nnz\": 2000000}");
    cJSON *hits = kb_retrieve(k, NULL, "spmv", NULL, NULL, q, 0);
    cr_assert_str_eq(ids(hits), "rule.j-big rule.a rule.c hw.i pitfall.g rule.h-half rule.b");
    cr_assert_eq(dt_json_num(cJSON_GetArrayItem(hits, 0), "matched", -1), 2);
    cr_assert_eq(dt_json_num(cJSON_GetArrayItem(hits, 3), "matched", -1), 0);
    cJSON_Delete(hits);
    cJSON_Delete(q);
    kb_close(k);
}
