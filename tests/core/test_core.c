/* test_core.c -- buffers, size parsing, hashing, rng, JSON errors, atomic writes. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

Test(core, buf_should_grow_and_stay_nul_terminated)
{
    dt_buf b = DT_BUF_INIT;
    cr_assert_str_eq(dt_buf_str(&b), "");
    for (int i = 0; i < 1000; i++)
        dt_buf_printf(&b, "%d,", i);
    cr_assert_eq(b.data[b.len], '\0');
    cr_assert(dt_startswith(b.data, "0,1,2,"));
    cr_assert(dt_endswith(b.data, "998,999,"));
    char *s = dt_buf_take(&b);
    cr_assert_null(b.data);
    free(s);
}

Test(core, parse_size_should_accept_suffixes_and_reject_garbage)
{
    int64_t v = 0;
    cr_assert_eq(dt_parse_size("16M", &v), 0);
    cr_assert_eq(v, 16000000);
    cr_assert_eq(dt_parse_size("1Ki", &v), 0);
    cr_assert_eq(v, 1024);
    cr_assert_eq(dt_parse_size("1.5K", &v), 0);
    cr_assert_eq(v, 1500);
    cr_assert_eq(dt_parse_size("42", &v), 0);
    cr_assert_eq(v, 42);
    cr_assert_eq(dt_parse_size("", &v), -1);
    cr_assert_eq(dt_parse_size("12x", &v), -1);
    cr_assert_eq(dt_parse_size("-3", &v), -1);
    cr_assert_eq(dt_parse_size("1.5", &v), -1);
    cr_assert_eq(dt_parse_size("99999999999999999999", &v), -1);
    cr_assert_eq(dt_parse_size("9999999999G", &v), -1);
}

Test(core, rng_should_be_deterministic_and_in_range)
{
    dt_rng a, b;
    dt_rng_seed(&a, 7);
    dt_rng_seed(&b, 7);
    for (int i = 0; i < 100; i++)
        cr_assert_eq(dt_rng_next(&a), dt_rng_next(&b));
    dt_rng_seed(&b, 8);
    cr_assert_neq(dt_rng_next(&a), dt_rng_next(&b));
    int seen[10] = {0};
    for (int i = 0; i < 10000; i++) {
        uint64_t x = dt_rng_below(&a, 10);
        cr_assert_lt(x, 10);
        seen[x]++;
        double u = dt_rng_uniform(&a);
        cr_assert(u >= 0.0 && u < 1.0);
    }
    for (int i = 0; i < 10; i++)
        cr_assert(seen[i] > 800 && seen[i] < 1200, "bucket %d has %d", i, seen[i]);
}

Test(core, hash_should_differ_for_different_input)
{
    cr_assert_neq(dt_hash_str("a", DT_HASH_SEED), dt_hash_str("b", DT_HASH_SEED));
    char hex[17];
    dt_hash_hex(0x0123456789abcdefULL, hex);
    cr_assert_str_eq(hex, "0123456789abcdef");
}

Test(core, json_parse_error_should_name_line_and_column)
{
    dt_err e = {0};
    const char *text = "{\n  \"a\": 1,\n  \"b\": ]\n}";
    cJSON *v = dt_json_parse(text, strlen(text), "spec.json", &e);
    cr_assert_null(v);
    cr_assert(strstr(e.msg, "spec.json:3:") != NULL, "got: %s", e.msg);
}

Test(core, atomic_write_should_replace_file_contents)
{
    char *dir = tu_tmpdir();
    char *p = dt_xasprintf("%s/f.txt", dir);
    dt_err e = {0};
    cr_assert_eq(dt_write_file_atomic(p, "one", 3, &e), 0);
    cr_assert_eq(dt_write_file_atomic(p, "two!", 4, &e), 0);
    size_t n = 0;
    char *s = dt_read_file(p, &n, &e);
    cr_assert_str_eq(s, "two!");
    cr_assert_eq(n, 4);
    free(s);
    cr_assert_null(dt_read_file("/nonexistent/x", NULL, &e));
    cr_assert(strstr(e.msg, "/nonexistent/x") != NULL);
    char *deep = dt_xasprintf("%s/a/b/c", dir);
    cr_assert_eq(dt_mkdir_p(deep, &e), 0);
    free(deep);
    free(p);
    tu_rmtree(dir);
    free(dir);
}

Test(core, strtod_should_ignore_the_locale)
{
    double v = 0;
    cr_assert_eq(dt_parse_double("1.5e3", &v), 0);
    cr_assert_float_eq(v, 1500.0, 0);
    cr_assert_eq(dt_parse_double("1,5", &v), -1);
    cr_assert_eq(dt_parse_double("nan", &v), -1);
}

/* What may be recorded of an endpoint: no user information, query or
 * fragment (where credentials ride); a plain URL comes back whole. */
Test(core, url_redact_should_drop_credentials_and_keep_the_rest)
{
    char out[256];
    cr_assert_eq(dt_url_redact("http://localhost:11434/v1", out, sizeof out), 0);
    cr_assert_str_eq(out, "http://localhost:11434/v1");
    cr_assert_eq(dt_url_redact("https://alice:s3cret@api.example.com/v1", out, sizeof out), 1);
    cr_assert_str_eq(out, "https://api.example.com/v1");
    cr_assert_eq(dt_url_redact("https://h/v1?api_key=s3cret#x", out, sizeof out), 1);
    cr_assert_str_eq(out, "https://h/v1");
    cr_assert_eq(dt_url_redact("https://u:p@w@h:8/v1/chat", out, sizeof out), 1);
    cr_assert_str_eq(out, "https://h:8/v1/chat");
    cr_assert(strstr(out, "p") == NULL || strstr(out, "p@") == NULL);
    cr_assert_eq(dt_url_redact("h/path@x", out, sizeof out), 0, "an @ after the host is no user");
    cr_assert_str_eq(out, "h/path@x");
}

/* issue 37: a JSON number becomes an integer only through checked helpers;
 * (int64_t)2.2e21 is undefined behaviour. */
Test(core, json_integers_should_be_checked_before_conversion)
{
    cJSON *j = cJSON_Parse("{\"ok\": 42, \"huge\": 2.2e21, \"neg\": -3, \"frac\": 2.5,"
                           " \"inf\": 1e400, \"s\": \"7\", \"edge\": 9223372036854775807}");
    cr_assert_not_null(j);
    int64_t x = 0;
    dt_err e = {0};
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "ok"), 0, 100, &x, &e), 0);
    cr_assert_eq(x, 42);
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "huge"), INT64_MIN, INT64_MAX, &x, &e), -1);
    cr_assert(strstr(e.msg, "out of range"), "%s", e.msg);
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "frac"), 0, 100, &x, &e), -1);
    cr_assert(strstr(e.msg, "2.5"), "%s", e.msg);
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "inf"), INT64_MIN, INT64_MAX, &x, &e), -1);
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "neg"), 0, 100, &x, &e), -1);
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "s"), 0, 100, &x, &e), -1);
    cr_assert(strstr(e.msg, "a string"), "%s", e.msg);
    cr_assert_eq(dt_json_to_int(NULL, 0, 100, &x, &e), -1);
    /* 9223372036854775807 is 2^63 as a double: one past the range. */
    cr_assert_eq(dt_json_to_int(cJSON_GetObjectItem(j, "edge"), INT64_MIN, INT64_MAX, &x, &e), -1);
    cr_assert_eq(dt_json_i64(j, "huge", -1), -1);
    cr_assert_eq(dt_json_i64(j, "inf", -1), -1);
    cr_assert_eq(dt_json_i64(j, "frac", -1), 2);
    cr_assert_eq(dt_json_i64(j, "missing", 9), 9);
    cr_assert_eq(dt_json_int(j, "huge", 5), 5);
    cr_assert_eq(dt_json_int(j, "ok", 5), 42);
    cr_assert_eq(dt_json_size(j, "neg", 8), 8);
    cr_assert_eq(dt_json_size(j, "ok", 8), 42);
    cJSON_Delete(j);
}

/* Found by fuzz_spec (issue 37): the error message quoted the text after
 * the error with %.20s, reading past a buffer that does not end in a NUL. */
Test(core, json_parse_error_should_not_read_past_the_buffer)
{
    char *text = dt_xmalloc(3);
    memcpy(text, "{\n}", 3); /* no NUL after it */
    text[1] = 'x';
    dt_err e = {0};
    cr_assert_null(dt_json_parse(text, 3, "t.json", &e));
    cr_assert(strstr(e.msg, "t.json:1:3: invalid JSON near '}'"), "%s", e.msg);
    free(text);
}

Test(core, code_only_should_blank_comments_and_literals_and_keep_lines)
{
    const char *src = "int a; // atomicAdd here\n"
                      "/* two\n lines */ int b = '\\''; char *s = \"x\\\"/*y\";\n"
                      "int c; /* unterminated";
    char *c = dt_code_only(src);
    cr_assert_eq(strlen(c), strlen(src), "same length: offsets stay right");
    cr_expect_null(strstr(c, "atomicAdd"));
    cr_expect_null(strstr(c, "two"));
    cr_expect_null(strstr(c, "x"), "a literal with an escaped quote is blanked whole");
    cr_expect_null(strstr(c, "unterminated"));
    cr_expect(strstr(c, "int a;") && strstr(c, "int b =") && strstr(c, "int c;"), "%s", c);
    int lines = 0;
    for (const char *p = c; *p; p++)
        lines += *p == '\n';
    cr_expect_eq(lines, 3, "newlines kept");
    free(c);
}
