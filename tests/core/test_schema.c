/* test_schema.c -- the declarative JSON checker: every type, paths, limits,
 * unknown keys, huge numbers, bounded depth, one message style. */
#include "tests/common/testutil.h"

#include "core/schema.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define HAS(out, s) cr_assert(strstr((out), (s)) != NULL, "missing [%s] in:\n%s", (s), (out))

/* Problems of text against s, as lines "f.json: ..."; returns the count. */
static int check(const dt_schema *s, const char *text, dt_buf *out)
{
    dt_err e = {0};
    cJSON *j = dt_json_parse(text, strlen(text), "t", &e);
    cr_assert_not_null(j, "%s", e.msg);
    dt_buf_reset(out);
    dt_schema_ctx c = {.file = "f.json", .out = out};
    int n = dt_schema_check(s, j, &c);
    cr_assert_eq(n, c.n);
    cJSON_Delete(j);
    return n;
}

static int lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static const char *const colours[] = {"red", "green", NULL};
static const dt_schema colour_s = {.type = DT_SCHEMA_STR, .choices = colours};
static const dt_schema name_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = 8};
static const dt_schema count_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 64};
static const dt_schema big_s = {.type = DT_SCHEMA_INT};
static const dt_schema ratio_s = {
    .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_GT_MIN, .min = 0, .max = 1};
static const dt_schema any_num_s = {.type = DT_SCHEMA_NUM};
static const dt_schema flag_s = {.type = DT_SCHEMA_BOOL};
static const dt_schema tags_s = {
    .type = DT_SCHEMA_ARR, .min_len = 1, .max_len = 3, .items = &name_s};
static const dt_schema opt_s = {
    .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_NULL, .min = 0, .max = HUGE_VAL};
static const dt_schema_field inner_fields[] = {
    {"count", &count_s, 1}, {"tags", &tags_s, 0}, {NULL, NULL, 0}};
static const dt_schema inner_s = {.type = DT_SCHEMA_OBJ, .fields = inner_fields};
static const dt_schema list_s = {.type = DT_SCHEMA_ARR, .items = &inner_s};
static const dt_schema *const either_alts[] = {&colour_s, &list_s, NULL};
static const dt_schema either_s = {.type = DT_SCHEMA_ONEOF, .alts = either_alts};
static const dt_schema free_s = {.type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN};
static const dt_schema_field top_fields[] = {
    {"colour", &colour_s, 1}, {"name", &name_s, 0}, {"big", &big_s, 0},    {"ratio", &ratio_s, 0},
    {"x", &any_num_s, 0},     {"flag", &flag_s, 0}, {"items", &list_s, 0}, {"either", &either_s, 0},
    {"opt", &opt_s, 0},       {"free", &free_s, 0}, {"anything", NULL, 0}, {NULL, NULL, 0}};
static const dt_schema top_s = {.type = DT_SCHEMA_OBJ, .fields = top_fields};

Test(schema, a_valid_document_should_have_no_problem)
{
    dt_buf out = DT_BUF_INIT;
    cr_assert_eq(check(&top_s,
                       "{\"colour\": \"red\", \"name\": \"n\", \"big\": -9007199254740992,"
                       " \"ratio\": 1, \"x\": -1e300, \"flag\": false,"
                       " \"items\": [{\"count\": 64, \"tags\": [\"a\", \"b\"]}, {\"count\": 1}],"
                       " \"either\": [], \"opt\": null, \"free\": {\"q\": [1]},"
                       " \"anything\": {\"deep\": [null]}}",
                       &out),
                 0, "%s", dt_buf_str(&out));
    cr_assert_eq(out.len, 0);
    dt_buf_free(&out);
}

Test(schema, every_type_should_say_what_it_expected_and_what_it_got)
{
    dt_buf out = DT_BUF_INIT;
    int n = check(&top_s,
                  "{\"colour\": \"blue\", \"name\": 7, \"big\": 1.5, \"ratio\": 0,"
                  " \"x\": \"1\", \"flag\": 1, \"items\": {}, \"either\": 3, \"opt\": -2,"
                  " \"free\": [], \"anything\": 1}",
                  &out);
    const char *o = dt_buf_str(&out);
    HAS(o, "f.json: $.colour: expected one of red, green, got \"blue\"\n");
    HAS(o, "f.json: $.name: expected a non-empty one-line string of at most 8 characters, got 7\n");
    HAS(o, "f.json: $.big: expected an integer, got 1.5\n");
    HAS(o, "f.json: $.ratio: expected a number above 0 and at most 1, got 0\n");
    HAS(o, "f.json: $.x: expected a finite number, got \"1\"\n");
    HAS(o, "f.json: $.flag: expected true or false, got 1\n");
    HAS(o, "f.json: $.items: expected an array, got an object\n");
    HAS(o, "f.json: $.either: expected one of red, green or an array, got 3\n");
    HAS(o, "f.json: $.opt: expected a number >= 0 or null, got -2\n");
    HAS(o, "f.json: $.free: expected an object, got an empty array\n");
    cr_assert_eq(n, 10, "%s", o);
    cr_assert_eq(lines(o), 10, "%s", o);
    dt_buf_free(&out);
}

Test(schema, nested_problems_should_carry_their_path)
{
    dt_buf out = DT_BUF_INIT;
    int n = check(&top_s,
                  "{\"colour\": \"red\", \"items\": [{\"count\": 1}, {\"tags\": []},"
                  " {\"count\": 65, \"tags\": [\"ok\", \"two\\nlines\", \"\", \"x\"]}],"
                  " \"either\": [{\"count\": 0}]}",
                  &out);
    const char *o = dt_buf_str(&out);
    HAS(o, "f.json: $.items[1].count: expected an integer from 1 to 64, got nothing\n");
    HAS(o, "f.json: $.items[1].tags: expected a non-empty array of at most 3 items, got an empty "
           "array\n");
    HAS(o, "f.json: $.items[2].count: expected an integer from 1 to 64, got 65\n");
    HAS(o, "f.json: $.items[2].tags: expected a non-empty array of at most 3 items, got an array "
           "of 4 items\n");
    HAS(o, "f.json: $.either[0].count: expected an integer from 1 to 64, got 0\n");
    cr_assert_eq(n, 5, "%s", o);
    /* Within its bounds, each item is checked in turn. */
    n = check(&top_s,
              "{\"colour\": \"red\", \"items\": [{\"count\": 2, \"tags\": [\"a\\nb\", "
              "\"\", \"waytoolong\"]}]}",
              &out);
    o = dt_buf_str(&out);
    HAS(o, "f.json: $.items[0].tags[0]: expected one line, got a newline in the text\n");
    HAS(o, "f.json: $.items[0].tags[1]: expected a non-empty one-line string of at most 8 "
           "characters, got an empty string\n");
    HAS(o, "f.json: $.items[0].tags[2]: expected at most 8 characters, got 10\n");
    cr_assert_eq(n, 3, "%s", o);
    dt_buf_free(&out);
}

Test(schema, unknown_keys_should_be_named_unless_the_object_is_open)
{
    dt_buf out = DT_BUF_INIT;
    int n = check(&top_s, "{\"colour\": \"red\", \"colr\": 1, \"free\": {\"any\": 2}}", &out);
    cr_assert_eq(n, 1, "%s", dt_buf_str(&out));
    HAS(dt_buf_str(&out), "f.json: $.colr: expected one of the keys colour, name, big, ratio, x, "
                          "flag, items, either, opt, free, anything, got an unknown key\n");
    dt_buf_free(&out);
}

Test(schema, huge_and_odd_numbers_should_be_refused_without_undefined_casts)
{
    dt_buf out = DT_BUF_INIT;
    /* 2^63 is one past int64's range; 1e999 parses as infinity. */
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"{\"colour\": \"red\", \"big\": 9223372036854775808}",
         "$.big: expected an integer, got 9.22337203685478e+18"},
        {"{\"colour\": \"red\", \"big\": -1e300}", "$.big: expected an integer, got -1e+300"},
        {"{\"colour\": \"red\", \"big\": 1e999}", "$.big: expected an integer, got a non-finite"},
        {"{\"colour\": \"red\", \"x\": -1e999}", "$.x: expected a finite number, got a non-finite"},
        {"{\"colour\": \"red\", \"items\": [{\"count\": 2.2e21}]}",
         "$.items[0].count: expected an integer from 1 to 64, got 2.2e+21"},
        {"{\"colour\": \"red\", \"items\": [{\"count\": 1.0000001}]}",
         "$.items[0].count: expected an integer from 1 to 64, got 1.0000001"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        cr_assert_eq(check(&top_s, cases[i].text, &out), 1, "%s: %s", cases[i].text,
                     dt_buf_str(&out));
        HAS(dt_buf_str(&out), cases[i].want);
    }
    /* The largest integer below 2^63 that a double holds passes and reads back. */
    cJSON *j = cJSON_Parse("{\"colour\": \"red\", \"big\": 9223372036854774784}");
    cr_assert(dt_schema_valid(&top_s, j));
    int64_t v = 0;
    cr_assert_eq(dt_schema_get_int(&top_s, j, "big", &v), 0);
    cr_assert_eq(v, INT64_C(9223372036854774784));
    cr_assert_eq(dt_schema_get_int(&top_s, j, "name", &v), -1);
    cJSON_Delete(j);
    dt_buf_free(&out);
}

/* A schema that refers to itself: the walk still stops. */
static const dt_schema nest_s;
static const dt_schema_field nest_fields[] = {{"a", &nest_s, 0}, {NULL, NULL, 0}};
static const dt_schema nest_s = {.type = DT_SCHEMA_OBJ, .fields = nest_fields};

Test(schema, deep_nesting_should_be_bounded)
{
    dt_buf text = DT_BUF_INIT;
    for (int i = 0; i < 200; i++)
        dt_buf_puts(&text, "{\"a\": ");
    dt_buf_puts(&text, "{}");
    for (int i = 0; i < 200; i++)
        dt_buf_putc(&text, '}');
    dt_buf out = DT_BUF_INIT;
    cr_assert_eq(check(&nest_s, dt_buf_str(&text), &out), 1, "%s", dt_buf_str(&out));
    HAS(dt_buf_str(&out), "expected at most 32 levels of nesting, got more\n");
    /* The path was cut, not overrun. */
    cr_assert_lt(strlen(dt_buf_str(&out)), DT_SCHEMA_PATH_MAX + 100);
    dt_buf_free(&text);
    dt_buf_free(&out);
}

static int even_key(const char *k)
{
    return strlen(k) % 2 == 0;
}

static int small_odd(const cJSON *v)
{
    return ((int64_t)v->valuedouble & 1) == 1;
}

static const dt_schema odd_s = {.type = DT_SCHEMA_INT,
                                .min = 0,
                                .max = 99,
                                .valid = small_odd,
                                .what = "an odd number below 100"};
static const dt_schema map_s = {.type = DT_SCHEMA_MAP,
                                .max_len = 3,
                                .items = &odd_s,
                                .key_valid = even_key,
                                .key_what = "a name of even length"};

Test(schema, maps_should_check_names_values_and_their_count)
{
    dt_buf out = DT_BUF_INIT;
    cr_assert_eq(check(&map_s, "{\"ab\": 3, \"abcd\": 99}", &out), 0, "%s", dt_buf_str(&out));
    int n = check(&map_s, "{\"abc\": 3, \"ab\": 4, \"cd\": 200}", &out);
    HAS(dt_buf_str(&out), "f.json: $.abc: expected a name of even length, got \"abc\"\n");
    HAS(dt_buf_str(&out), "f.json: $.ab: expected an odd number below 100, got 4\n");
    HAS(dt_buf_str(&out), "f.json: $.cd: expected an odd number below 100, got 200\n");
    cr_assert_eq(n, 3, "%s", dt_buf_str(&out));
    n = check(&map_s, "{\"ab\": 1, \"cd\": 1, \"ef\": 1, \"gh\": 1}", &out);
    cr_assert_eq(n, 1, "%s", dt_buf_str(&out));
    HAS(dt_buf_str(&out), "f.json: $: expected an object of 0 to 3 names, got 4\n");
    dt_buf_free(&out);
}

static void sum_rule(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    int64_t a = 0, b = 0;
    if (dt_schema_get_int(s, v, "a", &a) != 0 || dt_schema_get_int(s, v, "b", &b) != 0)
        return;
    if (a > b) {
        char p[DT_SCHEMA_PATH_MAX];
        dt_schema_path(p, sizeof p, path, "b");
        dt_schema_expected(c, p, cJSON_GetObjectItem(v, "b"), "at least a (%lld)", (long long)a);
    }
}

static const dt_schema_field pair_fields[] = {
    {"a", &count_s, 1}, {"b", &count_s, 1}, {NULL, NULL, 0}};
static const dt_schema pair_s = {.type = DT_SCHEMA_OBJ, .fields = pair_fields, .check = sum_rule};

Test(schema, hooks_should_see_only_fields_that_are_right_on_their_own)
{
    dt_buf out = DT_BUF_INIT;
    cr_assert_eq(check(&pair_s, "{\"a\": 5, \"b\": 5}", &out), 0);
    cr_assert_eq(check(&pair_s, "{\"a\": 5, \"b\": 4}", &out), 1);
    cr_assert_str_eq(dt_buf_str(&out), "f.json: $.b: expected at least a (5), got 4\n");
    /* a out of range: its own problem, and no rule built on it */
    cr_assert_eq(check(&pair_s, "{\"a\": 500, \"b\": 4}", &out), 1, "%s", dt_buf_str(&out));
    HAS(dt_buf_str(&out), "$.a: expected an integer from 1 to 64, got 500");
    dt_buf_free(&out);
}

Test(schema, output_should_be_bounded_and_safe_for_a_terminal)
{
    /* 1,000 bad items: every one counted, only max written. */
    dt_buf text = DT_BUF_INIT;
    dt_buf_puts(&text, "{\"colour\": \"red\", \"items\": [");
    for (int i = 0; i < 1000; i++)
        dt_buf_printf(&text, "%s{\"count\": 0}", i ? "," : "");
    dt_buf_puts(&text, "]}");
    cJSON *j = cJSON_Parse(dt_buf_str(&text));
    dt_buf out = DT_BUF_INIT;
    dt_schema_ctx c = {.file = "f.json", .out = &out, .max = 5};
    cr_assert_eq(dt_schema_check(&top_s, j, &c), 1000);
    cr_assert_eq(lines(dt_buf_str(&out)), 5);
    cJSON_Delete(j);

    /* A key with an escape sequence and a long value: shown safely, cut. */
    j = cJSON_Parse(
        "{\"colour\": \"red\", \"\\u001b[31mzz\": 1, \"name\": "
        "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}");
    dt_buf_reset(&out);
    c = (dt_schema_ctx){.file = "f.json", .out = &out};
    cr_assert_eq(dt_schema_check(&top_s, j, &c), 2);
    cr_assert_null(strchr(dt_buf_str(&out), '\x1b'), "%s", dt_buf_str(&out));
    HAS(dt_buf_str(&out), "f.json: $.^[[31mzz: expected one of the keys");
    HAS(dt_buf_str(&out), "$.name: expected at most 8 characters, got 73\n");
    cJSON_Delete(j);

    /* A long key is cut in the path. */
    char key[300];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = '\0';
    j = dt_json_obj();
    dt_json_set_str(j, "colour", "red");
    dt_json_set_int(j, key, 1);
    dt_buf_reset(&out);
    c = (dt_schema_ctx){.out = &out};
    cr_assert_eq(dt_schema_check(&top_s, j, &c), 1);
    HAS(dt_buf_str(&out), "kkk...: expected one of the keys");
    cr_assert(dt_startswith(dt_buf_str(&out), "$.k"), "%s", dt_buf_str(&out));
    cJSON_Delete(j);
    dt_buf_free(&text);
    dt_buf_free(&out);
}

Test(schema, validate_should_give_the_first_problem_and_count_the_rest)
{
    cJSON *j = cJSON_Parse("{\"name\": \"\", \"flag\": null}");
    dt_err e = {0};
    cr_assert_eq(dt_schema_validate(&top_s, j, "req", &e), -1);
    cr_assert_str_eq(e.msg, "req: $.colour: expected one of red, green, got nothing (and 2 more)");
    cr_assert_eq(dt_schema_validate_all(&top_s, j, "req", &e), -1);
    cr_assert_str_eq(e.msg, "req: $.colour: expected one of red, green, got nothing; $.name: "
                            "expected a non-empty one-line string of at most 8 characters, got "
                            "an empty string; $.flag: expected true or false, got null "
                            "(3 problems)");
    cJSON_Delete(j);
    cr_assert_eq(dt_schema_validate(&top_s, NULL, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "$: expected an object, got nothing");
    j = cJSON_Parse("{\"colour\": \"green\"}");
    cr_assert_eq(dt_schema_validate(&top_s, j, NULL, NULL), 0);
    cr_assert(dt_schema_valid(&top_s, j));
    cr_assert_null(dt_schema_get(&top_s, j, "name"));
    cr_assert_not_null(dt_schema_get(&top_s, j, "colour"));
    cJSON_Delete(j);
}

Test(schema, string_lengths_should_count_characters_not_bytes)
{
    dt_buf out = DT_BUF_INIT;
    /* eight two-byte characters fit in 8; nine do not */
    cr_assert_eq(check(&top_s,
                       "{\"colour\": \"red\", \"name\": \"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                       "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}",
                       &out),
                 0, "%s", dt_buf_str(&out));
    cr_assert_eq(check(&top_s,
                       "{\"colour\": \"red\", \"name\": \"\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
                       "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\"}",
                       &out),
                 1);
    HAS(dt_buf_str(&out), "expected at most 8 characters, got 9");
    dt_buf_free(&out);
}

static const dt_schema exactly_s = {.type = DT_SCHEMA_INT, .min = 32, .max = 32};
static const dt_schema below_s = {.type = DT_SCHEMA_NUM, .min = -HUGE_VAL, .max = -1};

Test(schema, equal_and_one_sided_bounds_should_hold)
{
    cJSON *v = cJSON_CreateNumber(32);
    cr_assert(dt_schema_valid(&exactly_s, v));
    cJSON_SetNumberValue(v, 31);
    dt_err e = {0};
    cr_assert_eq(dt_schema_validate(&exactly_s, v, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "$: expected 32, got 31");
    cr_assert_eq(dt_schema_validate(&below_s, v, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "$: expected a number <= -1, got 31");
    cJSON_SetNumberValue(v, -1e300);
    cr_assert(dt_schema_valid(&below_s, v));
    cJSON_Delete(v);
}

static const dt_schema blob_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_BYTES, .min_len = 1, .max_len = 4};
static const dt_schema_field maybe_fields[] = {{"b", &blob_s, 1}, {NULL, NULL, 0}};
static const dt_schema maybe_s = {
    .type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_NULL, .fields = maybe_fields};

Test(schema, byte_limits_and_nullable_objects_should_hold)
{
    dt_err e = {0};
    cJSON *v = cJSON_Parse("{\"b\": \"\xc3\xa9\xc3\xa9\"}"); /* 2 characters, 4 bytes */
    cr_assert_eq(dt_schema_validate(&maybe_s, v, NULL, &e), 0, "%s", e.msg);
    cJSON_Delete(v);
    v = cJSON_Parse("{\"b\": \"\xc3\xa9\xc3\xa9x\"}");
    cr_assert_eq(dt_schema_validate(&maybe_s, v, NULL, &e), -1);
    cr_assert_str_eq(e.msg, "$.b: expected at most 4 bytes, got 5");
    cJSON_Delete(v);
    v = cJSON_CreateNull();
    cr_assert(dt_schema_valid(&maybe_s, v));
    cJSON_Delete(v);
    v = cJSON_CreateTrue();
    cr_assert_eq(dt_schema_validate(&maybe_s, v, "f", &e), -1);
    cr_assert_str_eq(e.msg, "f: $: expected an object or null, got true");
    cJSON_Delete(v);
}
