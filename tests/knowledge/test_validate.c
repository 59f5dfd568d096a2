/* test_validate.c -- entry validation: every problem at once, each with its
 * JSON path. */
#include "tests/knowledge/kbtest.h"

#include <stdlib.h>
#include <string.h>

static int validate(const char *text, const char *where, dt_buf *p)
{
    cJSON *j = kbt_parse(text);
    int n = kb_validate(j, where, p);
    cJSON_Delete(j);
    return n;
}

#define HAS(out, s) cr_assert(strstr((out), (s)) != NULL, "missing [%s] in:\n%s", (s), (out))

Test(validate, complete_rule_should_pass)
{
    const char *text =
        "{\"id\": \"rule.spmv.merge-path-for-power-law\", \"kind\": \"rule\","
        " \"title\": \"Power-law rows: merge-path\","
        " \"applies_to\": {\"op\": [\"spmv\"], \"dtype\": [\"fp32\", \"fp64\"],"
        "   \"cc\": [\"8.0\", \"9.0+\"],"
        "   \"features\": {\"row_cv\": [2, null], \"row_max_over_mean\": [32, null],"
        "                  \"nnz\": [0, 1e9], \"block_fill_16\": [0.5, 0.5]}},"
        " \"content\": \"Split the work evenly.\\nTwo lines are fine here.\","
        " \"parameters\": {\"strategy\": \"merge-path\","
        "   \"params\": {\"ITEMS_PER_THREAD\": [4, 7], \"MODE\": [\"a\", \"b\"]}, \"score\": 80},"
        " \"evidence\": [{\"session\": \"s1\", \"gpu\": \"h200\", \"matrix\": \"rmat\","
        "   \"fingerprint\": \"0123456789abcdef\", \"features\": {\"row_cv\": 6.8},"
        "   \"speedup\": 1.7, \"measured\": {\"us\": 12.5}, \"note\": \"first\"},"
        "   {\"measured\": {\"us\": 3}}],"
        " \"status\": \"approved\","
        " \"review\": {\"reviewer\": \"alice\", \"note\": null, \"at\": \"2026-11-29T09:19:06Z\"},"
        " \"created\": \"2026-11-29T09:19:06.250Z\", \"updated\": \"2026-11-29T10:19:06+01:00\"}";
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(validate(text, "t.json", &p), 0, "%s", dt_buf_str(&p));
    cr_assert_eq(p.len, 0);
    dt_buf_free(&p);
}

Test(validate, every_problem_should_be_reported_at_once_with_its_path)
{
    const char *text =
        "{\"id\": \"Bad Id\", \"kind\": \"x\", \"title\": \"two\\nlines\", \"content\": \"\","
        " \"applies_to\": {\"op\": [\"spgemm\"], \"dtype\": \"fp32\", \"cc\": [\"9\"],"
        "   \"features\": {\"gini\": [0, 1], \"row_cv\": [3, 1], \"rows\": [1],"
        "                  \"nnz\": [null, null], \"row_mean\": [-1, 4]}, \"colour\": 1},"
        " \"evidence\": [{\"gpu\": \"h200\"}, 3,"
        "                {\"speedup\": -1, \"features\": {\"row_cv\": \"x\"}}],"
        " \"status\": \"approved\", \"review\": null, \"created\": \"yesterday\","
        " \"extra\": true}";
    dt_buf p = DT_BUF_INIT;
    int n = validate(text, "t.json", &p);
    const char *out = dt_buf_str(&p);
    HAS(out, "t.json: $.extra: expected one of the keys id, kind, title, applies_to, content, "
             "parameters, evidence, status, review, created, updated, got an unknown key");
    HAS(out, "t.json: $.id: expected [a-z0-9._-] starting with a letter or digit, at most 128 "
             "characters, got \"Bad Id\"");
    HAS(out, "t.json: $.kind: expected one of rule, strategy, pitfall, error-explanation, "
             "hardware-fact, got \"x\"");
    HAS(out, "t.json: $.title: expected one line, got a newline in the text");
    HAS(out, "t.json: $.content: expected a non-empty string of at most 1500 characters, got an "
             "empty string");
    HAS(out, "t.json: $.applies_to.colour: expected one of the keys op, dtype, cc, features, got "
             "an unknown key");
    HAS(out, "t.json: $.applies_to.op[0]: expected one of spmv, spmm, sddmm, got \"spgemm\"");
    HAS(out, "t.json: $.applies_to.dtype: expected a non-empty array (drop the key to match "
             "everything), got \"fp32\"");
    HAS(out, "t.json: $.applies_to.cc[0]: expected a compute capability \"M.m\" or \"M.m+\", "
             "got \"9\"");
    HAS(out, "t.json: $.applies_to.features.gini: expected a feature name (rows, cols");
    HAS(out, "t.json: $.applies_to.features.row_cv: expected min <= max, got min 3 and max 1");
    HAS(out, "t.json: $.applies_to.features.rows: expected [min, max] (numbers, null for an open "
             "end), got an array of 1 item");
    HAS(out, "t.json: $.applies_to.features.nnz: expected at least one bound, got both open");
    HAS(out, "t.json: $.applies_to.features.row_mean[0]: expected a number >= 0 or null, got -1");
    HAS(out, "t.json: $.evidence[0]: expected speedup or measured in an evidence item, got "
             "neither");
    HAS(out, "t.json: $.evidence[1]: expected an object, got 3");
    HAS(out, "t.json: $.evidence[2].speedup: expected a number above 0, got -1");
    HAS(out, "t.json: $.evidence[2].features.row_cv: expected a finite number, got \"x\"");
    HAS(out, "t.json: $.review: expected {reviewer, note, at} for an approved entry, got null");
    HAS(out, "t.json: $.created: expected an ISO 8601 time such as \"2026-11-29T09:19:06Z\", "
             "got \"yesterday\"");
    HAS(out, "t.json: $.updated: expected an ISO 8601 time such as \"2026-11-29T09:19:06Z\", "
             "got nothing");
    cr_assert_eq(kbt_lines(out), 21, "%s", out);
    cr_assert_eq(n, 21);
    dt_buf_free(&p);
}

Test(validate, empty_object_should_name_every_missing_key)
{
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(validate("{}", NULL, &p), 7, "%s", dt_buf_str(&p));
    static const char *keys[] = {"id", "kind", "title", "content", "status", "created", "updated"};
    for (size_t i = 0; i < DT_ARRAY_LEN(keys); i++) {
        char line[64];
        snprintf(line, sizeof line, "$.%s: expected ", keys[i]);
        HAS(dt_buf_str(&p), line);
    }
    int nothing = 0;
    for (const char *c = dt_buf_str(&p); (c = strstr(c, ", got nothing\n")) != NULL; c++)
        nothing++;
    cr_assert_eq(nothing, 7, "%s", dt_buf_str(&p));
    /* Without a WHERE the lines start at the path. */
    cr_assert(dt_startswith(dt_buf_str(&p), "$."), "%s", dt_buf_str(&p));
    dt_buf_free(&p);
}

Test(validate, non_object_should_be_one_problem)
{
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(validate("[1, 2]", "f.json", &p), 1);
    cr_assert_str_eq(dt_buf_str(&p),
                     "f.json: $: expected an entry object, got an array of 2 items\n");
    cr_assert_eq(kb_validate(NULL, "f.json", NULL), 1); /* problems may be NULL */
    dt_buf_free(&p);
}

Test(validate, ids_should_follow_the_documented_format)
{
    static const char *good[] = {"a", "9abc", "rule.spmv.x_y-z", "e.0"};
    static const char *bad[] = {"", ".hidden", "-x", "_x", "Rule", "a/b", "a b", "é"};
    for (size_t i = 0; i < DT_ARRAY_LEN(good); i++) {
        cJSON *e = kbt_entry(good[i], "strategy", "proposed");
        cr_assert_eq(kb_validate(e, NULL, NULL), 0, "%s", good[i]);
        cJSON_Delete(e);
    }
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *e = kbt_entry(bad[i], "strategy", "proposed");
        dt_buf p = DT_BUF_INIT;
        cr_assert_eq(kb_validate(e, NULL, &p), 1, "'%s': %s", bad[i], dt_buf_str(&p));
        cr_assert(dt_startswith(dt_buf_str(&p), "$.id: expected"), "%s", dt_buf_str(&p));
        dt_buf_free(&p);
        cJSON_Delete(e);
    }
    char longid[130];
    memset(longid, 'a', 129);
    longid[129] = '\0';
    cJSON *e = kbt_entry(longid, "strategy", "proposed");
    cr_assert_eq(kb_validate(e, NULL, NULL), 1);
    longid[128] = '\0';
    dt_json_set_str(e, "id", longid);
    cr_assert_eq(kb_validate(e, NULL, NULL), 0);
    dt_json_set_num(e, "id", 3);
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    HAS(dt_buf_str(&p), "$.id: expected [a-z0-9._-] starting with a letter or digit, at most 128 "
                        "characters, got 3");
    dt_buf_free(&p);
    cJSON_Delete(e);
}

Test(validate, timestamps_should_be_iso_8601)
{
    static const char *good[] = {"2026-11-29T09:19:06Z", "2026-11-29T09:19:06.123Z",
                                 "2026-11-29T09:19:06+01:00", "2026-02-28T23:59:60-05:30"};
    static const char *bad[] = {"2026-13-01T00:00:00Z",     "2026-11-29 09:19:06Z",
                                "2026-11-29T09:19:06",      "2026-11-29T25:00:00Z",
                                "2026-11-29T09:19:06.Z",    "2026-11-29T09:19:06Zx",
                                "2026-11-29T09:19:06+1:00", "2026-11-00T09:19:06Z"};
    cJSON *e = kbt_entry("t", "strategy", "proposed");
    for (size_t i = 0; i < DT_ARRAY_LEN(good); i++) {
        dt_json_set_str(e, "created", good[i]);
        cr_assert_eq(kb_validate(e, NULL, NULL), 0, "%s", good[i]);
    }
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        dt_json_set_str(e, "created", bad[i]);
        dt_buf p = DT_BUF_INIT;
        cr_assert_eq(kb_validate(e, NULL, &p), 1, "%s accepted", bad[i]);
        HAS(dt_buf_str(&p), "$.created: expected an ISO 8601 time");
        dt_buf_free(&p);
    }
    dt_json_set_num(e, "created", 12);
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    HAS(dt_buf_str(&p), "$.created: expected an ISO 8601 time such as \"2026-11-29T09:19:06Z\", "
                        "got 12");
    dt_buf_free(&p);
    cJSON_Delete(e);
}

Test(validate, rule_parameters_should_be_checked)
{
    cJSON *e = kbt_entry("r", "rule", "proposed");
    dt_json_set_take(e, "parameters",
                     kbt_parse("{\"params\": {\"LANES\": [], \"B\": 4, \"C\": [1, {}]},"
                               " \"score\": 150, \"scor\": 1}"));
    dt_buf p = DT_BUF_INIT;
    int n = kb_validate(e, NULL, &p);
    const char *out = dt_buf_str(&p);
    HAS(out, "$.parameters.scor: expected one of the keys strategy, params, score, got an unknown "
             "key");
    HAS(out, "$.parameters.strategy: expected a non-empty one-line string of at most 1500 "
             "characters, got nothing");
    HAS(out, "$.parameters.params.LANES: expected a non-empty array, got an empty array");
    HAS(out, "$.parameters.params.B: expected a non-empty array, got 4");
    HAS(out, "$.parameters.params.C[1]: expected a string of at most 1500 characters or a finite "
             "number, got an object");
    HAS(out, "$.parameters.score: expected a number from 0 to 100, got 150");
    cr_assert_eq(n, 6, "%s", out);
    dt_buf_free(&p);

    cJSON_DeleteItemFromObject(e, "parameters");
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    HAS(dt_buf_str(&p), "$.parameters: expected {strategy, params, score} for a rule, got nothing");
    dt_buf_free(&p);
    cJSON_Delete(e);
}

Test(validate, error_and_pitfall_parameters_should_be_checked)
{
    cJSON *e = kbt_entry("e", "error-explanation", "proposed");
    dt_json_set_take(e, "parameters", kbt_parse("{\"pattern\": \"x\\ny\", \"unless\": 3}"));
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(kb_validate(e, NULL, &p), 3, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.parameters.pattern: expected one line, got a newline in the text");
    HAS(dt_buf_str(&p), "$.parameters.hint: expected a non-empty string of at most 1500 "
                        "characters, got nothing");
    HAS(dt_buf_str(&p), "$.parameters.unless: expected a non-empty one-line string of at most "
                        "1500 characters, got 3");
    dt_buf_free(&p);
    cJSON_Delete(e);

    /* A static rule needs its diagnostic message and a severity; a pitfall
     * without rule_id needs neither. */
    e = kbt_entry("p", "pitfall", "proposed");
    dt_json_set_take(e, "parameters", kbt_parse("{\"rule_id\": \"Bad\", \"pattern\": [\"\"]}"));
    cr_assert_eq(kb_validate(e, NULL, &p), 4, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.parameters.rule_id: expected a rule id of [a-z0-9._-] starting with a "
                        "letter or digit, at most 128 characters, got \"Bad\"");
    HAS(dt_buf_str(&p), "$.parameters.message: expected a one-line message (a pitfall with a "
                        "rule_id is a diagnostic), got nothing");
    HAS(dt_buf_str(&p), "$.parameters.severity: expected one of error, warning, note (a pitfall "
                        "with a rule_id is a diagnostic), got nothing");
    HAS(dt_buf_str(&p), "$.parameters.pattern[0]: expected a non-empty one-line string of at "
                        "most 1500 characters, got an empty string");
    dt_buf_free(&p);
    dt_json_set_take(e, "parameters",
                     kbt_parse("{\"rule_id\": \"shfl-no-sync\", \"severity\": \"fatal\","
                               " \"message\": \"m\"}"));
    cr_assert_eq(kb_validate(e, NULL, &p), 1, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.parameters.severity: expected one of error, warning, note, got "
                        "\"fatal\"");
    dt_buf_free(&p);
    dt_json_set_take(e, "parameters", kbt_parse("{\"explanation\": \"why\"}"));
    cr_assert_eq(kb_validate(e, NULL, NULL), 0);
    cJSON_Delete(e);

    /* Strategies and hardware facts take free-form parameters. */
    e = kbt_entry("h", "hardware-fact", "proposed");
    dt_json_set_take(e, "parameters", kbt_parse("{\"anything\": [1, {\"x\": null}]}"));
    cr_assert_eq(kb_validate(e, NULL, NULL), 0);
    cJSON_Delete(e);
}

Test(validate, review_should_match_the_status)
{
    cJSON *e = kbt_entry("r", "strategy", "proposed");
    dt_json_set_take(e, "review",
                     kbt_parse("{\"reviewer\": \"a\", \"at\": \"2026-01-01T00:00:00Z\"}"));
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(kb_validate(e, NULL, &p), 1, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.review: expected null for a proposed entry (it has no review yet), got "
                        "an object");
    dt_buf_free(&p);

    dt_json_set_str(e, "status", "rejected");
    cr_assert_eq(kb_validate(e, NULL, &p), 1, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.review.note: expected a note saying why for a rejected entry, got "
                        "nothing");
    dt_buf_free(&p);

    dt_json_set_str(e, "status", "approved");
    dt_json_set_take(e, "review", kbt_parse("{\"reviewer\": \"\", \"at\": \"soon\", \"by\": 1}"));
    cr_assert_eq(kb_validate(e, NULL, &p), 3, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.review.by: expected one of the keys reviewer, note, at, got an unknown "
                        "key");
    HAS(dt_buf_str(&p), "$.review.reviewer: expected a non-empty one-line string of at most 500 "
                        "characters, got an empty string");
    HAS(dt_buf_str(&p), "$.review.at: expected an ISO 8601 time such as \"2026-11-29T09:19:06Z\", "
                        "got \"soon\"");
    dt_buf_free(&p);

    /* The review's own problems stand whatever the status. */
    dt_json_set_str(e, "status", "done");
    cr_assert_eq(kb_validate(e, NULL, &p), 4, "%s", dt_buf_str(&p));
    HAS(dt_buf_str(&p), "$.status: expected one of proposed, approved, rejected, got \"done\"");
    dt_buf_free(&p);
    cJSON_Delete(e);
}

Test(validate, feature_names_should_be_the_documented_list)
{
    static const char *names[] = {"rows",
                                  "cols",
                                  "nnz",
                                  "density",
                                  "row_mean",
                                  "row_cv",
                                  "row_max",
                                  "row_max_over_mean",
                                  "row_gini",
                                  "empty_rows_frac",
                                  "bandwidth_frac",
                                  "diagonals",
                                  "block_fill_2",
                                  "block_fill_4",
                                  "block_fill_8",
                                  "block_fill_16",
                                  "x_lines_per_nnz",
                                  "col_span_max",
                                  "distinct_values",
                                  "n"};
    int i = 0;
    for (; kb_feature_name(i) != NULL; i++) {
        cr_assert_lt((size_t)i, DT_ARRAY_LEN(names));
        cr_assert_str_eq(kb_feature_name(i), names[i]);
        cr_assert(kb_is_feature(names[i]));
        cr_assert_gt(kb_feature_unit(names[i]), 0);
    }
    cr_assert_eq((size_t)i, DT_ARRAY_LEN(names));
    cr_assert_null(kb_feature_name(-1));
    cr_assert(!kb_is_feature("gini"));
    cr_assert_eq(kb_feature_is_log("nnz"), 1);
    cr_assert_eq(kb_feature_is_log("row_cv"), 0);
    cr_assert_eq(kb_feature_is_log("gini"), -1);
    cr_assert_eq(kb_feature_unit("gini"), 0);

    /* Every name is documented in knowledge/README.md. */
    char *path = dt_xasprintf("%s/knowledge/README.md", tu_src_dir());
    dt_err e = {0};
    char *readme = dt_read_file(path, NULL, &e);
    cr_assert_not_null(readme, "%s", e.msg);
    for (size_t j = 0; j < DT_ARRAY_LEN(names); j++) {
        char cell[64];
        snprintf(cell, sizeof cell, "| `%s` |", names[j]);
        if (dt_startswith(names[j], "block_fill_"))
            snprintf(cell, sizeof cell, "`block_fill_2`, `_4`, `_8`, `_16`");
        HAS(readme, cell);
    }
    free(readme);
    free(path);
}

/* issue 39: an entry states one claim a reviewer can check; free text is
 * bounded, counted in characters (not bytes). */
Test(validate, free_text_should_be_bounded_in_characters)
{
    cJSON *e = kbt_entry("t", "strategy", "proposed");
    char title[KB_TITLE_MAX * 2 + 8];
    /* KB_TITLE_MAX two-byte characters: within the limit */
    title[0] = '\0';
    for (int i = 0; i < KB_TITLE_MAX; i++)
        strcat(title, "\xc3\xa9");
    dt_json_set_str(e, "title", title);
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(kb_validate(e, NULL, &p), 0, "%s", dt_buf_str(&p));
    strcat(title, "x");
    dt_json_set_str(e, "title", title);
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    HAS(dt_buf_str(&p), "$.title: expected at most 120 characters, got 121");
    dt_buf_reset(&p);

    dt_json_set_str(e, "title", "t");
    char *content = dt_xcalloc(KB_TEXT_MAX + 2, 1);
    memset(content, 'a', KB_TEXT_MAX);
    dt_json_set_str(e, "content", content);
    cr_assert_eq(kb_validate(e, NULL, &p), 0, "%s", dt_buf_str(&p));
    content[KB_TEXT_MAX] = 'a';
    dt_json_set_str(e, "content", content);
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    HAS(dt_buf_str(&p), "$.content: expected at most 1500 characters, got 1501");
    dt_buf_reset(&p);
    free(content);

    dt_json_set_str(e, "content", "c");
    char note[KB_NOTE_MAX + 2];
    memset(note, 'n', KB_NOTE_MAX + 1);
    note[KB_NOTE_MAX + 1] = '\0';
    dt_json_set_take(e, "evidence", kbt_parse("[{\"speedup\": 2}]"));
    dt_json_set_str(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "evidence"), 0), "note", note);
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    HAS(dt_buf_str(&p), "$.evidence[0].note: expected at most 500 characters, got 501");
    dt_buf_free(&p);
    cJSON_Delete(e);
}

Test(validate, unknown_feature_message_should_list_every_feature)
{
    cJSON *e = kbt_entry("t", "strategy", "proposed");
    dt_json_set_take(e, "applies_to", kbt_parse("{\"features\": {\"gini\": [0, 1]}}"));
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(kb_validate(e, NULL, &p), 1);
    for (int i = 0; kb_feature_name(i) != NULL; i++) {
        char name[64];
        snprintf(name, sizeof name, "%s%s%s", i ? " " : "(", kb_feature_name(i),
                 kb_feature_name(i + 1) ? "," : ")");
        HAS(dt_buf_str(&p), name);
    }
    dt_buf_free(&p);
    cJSON_Delete(e);
}
