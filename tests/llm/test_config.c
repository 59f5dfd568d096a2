/* test_config.c -- the LLM config from JSON, llm_new's checks and the cache
 * key. */
#include "tests/common/llmtest.h"

#include <stdlib.h>
#include <string.h>

static int from_json(llm_config *c, const char *text, dt_buf *problems)
{
    cJSON *j = cJSON_Parse(text);
    cr_assert_not_null(j, "%s", text);
    llm_config_init(c);
    int rc = llm_config_from_json(c, j, problems);
    cJSON_Delete(j);
    return rc;
}

Test(config, init_should_give_the_documented_defaults)
{
    llm_config c;
    llm_config_init(&c);
    cr_assert_eq(c.api, LLM_OPENAI);
    cr_assert_null(c.endpoint);
    cr_assert_null(c.model);
    cr_assert_eq(c.connect_timeout_s, 10);
    cr_assert_eq(c.stall_timeout_s, 60);
    cr_assert_eq(c.max_retries, 4);
    cr_assert_eq(c.backoff_base_s, 1);
    cr_assert_eq(c.backoff_max_s, 30);
    cr_assert_eq(c.max_tokens, 4096);
    cr_assert_float_eq(c.temperature, 0.2, 1e-12);
    cr_assert_null(c.cache_dir);
    llm_config_clear(&c);
}

Test(config, a_full_object_should_fill_every_field)
{
    llm_config c;
    dt_buf p = DT_BUF_INIT;
    int rc = from_json(&c,
                       "{\"api\": \"anthropic\", \"endpoint\": \"http://h:1/v1\", \"model\": \"m\","
                       " \"api_key_env\": \"K\", \"price\": {\"input\": 3, \"output\": 15},"
                       " \"timeouts\": {\"connect\": 4, \"stall\": 20},"
                       " \"backoff\": {\"base\": 0.5, \"max\": 8}, \"max_retries\": 2,"
                       " \"max_tokens\": 100, \"temperature\": 0.7, \"cache_dir\": \"\"}",
                       &p);
    cr_assert_eq(rc, 0, "%s", dt_buf_str(&p));
    cr_assert_str_eq(dt_buf_str(&p), "");
    cr_assert_eq(c.api, LLM_ANTHROPIC);
    cr_assert_str_eq(c.endpoint, "http://h:1/v1");
    cr_assert_str_eq(c.model, "m");
    cr_assert_str_eq(c.api_key_env, "K");
    cr_assert_eq(c.price_in, 3);
    cr_assert_eq(c.price_out, 15);
    cr_assert_eq(c.connect_timeout_s, 4);
    cr_assert_eq(c.stall_timeout_s, 20);
    cr_assert_eq(c.backoff_base_s, 0.5);
    cr_assert_eq(c.backoff_max_s, 8);
    cr_assert_eq(c.max_retries, 2);
    cr_assert_eq(c.max_tokens, 100);
    cr_assert_float_eq(c.temperature, 0.7, 1e-12);
    cr_assert_str_eq(c.cache_dir, "");
    llm_config_clear(&c);
    cr_assert_null(c.model);
    dt_buf_free(&p);
}

Test(config, every_problem_should_be_reported_with_its_path)
{
    llm_config c;
    dt_buf p = DT_BUF_INIT;
    int rc = from_json(&c,
                       "{\"api\": \"gemini\", \"endpoint\": \"ftp://x\", \"model\": \"\","
                       " \"price\": {\"input\": -1, \"outptu\": 2}, \"timeouts\": 5,"
                       " \"backoff\": {\"base\": \"1\"}, \"max_retries\": 1.5,"
                       " \"max_tokens\": 0, \"temperature\": 3, \"colour\": \"red\","
                       " \"api_key_env\": 7}",
                       &p);
    const char *out = dt_buf_str(&p);
    cr_assert_eq(rc, -1);
    /* one line per problem, in core/schema's words */
    static const char *const want[] = {
        "$.api: expected one of openai, anthropic, got \"gemini\"\n",
        "$.endpoint: expected an http:// or https:// URL, got \"ftp://x\"\n",
        "$.model: expected a non-empty one-line string of at most 256 characters, got an empty "
        "string\n",
        "$.price.input: expected a number from 0 to 1000000, got -1\n",
        "$.price.outptu: expected one of the keys input, output, got an unknown key\n",
        "$.timeouts: expected an object, got 5\n",
        "$.backoff.base: expected a number from 0 to 86400, got \"1\"\n",
        "$.max_retries: expected an integer from 0 to 100, got 1.5\n",
        "$.max_tokens: expected an integer from 1 to 10000000, got 0\n",
        "$.temperature: expected a number from 0 to 2, got 3\n",
        ("$.colour: expected one of the keys api, endpoint, model, api_key_env, price, timeouts, "
         "backoff, max_retries, max_tokens, temperature, cache_dir, max_answer_bytes, "
         "request_timeout_s, got an unknown key\n"),
        "$.api_key_env: expected a one-line string of at most 4096 characters or null, got 7\n",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(want); i++)
        cr_assert(strstr(out, want[i]), "missing: %s\nin:\n%s", want[i], out);
    int lines = 0;
    for (const char *s = out; *s; s++)
        lines += *s == '\n';
    cr_assert_eq(lines, (int)DT_ARRAY_LEN(want), "%s", out);
    llm_config_clear(&c);
    dt_buf_free(&p);
}

Test(config, not_an_object_and_a_missing_model_should_be_problems)
{
    llm_config c;
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(from_json(&c, "[1]", &p), -1);
    cr_assert_str_eq(dt_buf_str(&p), "$: expected an object, got an array of 1 item\n");
    llm_config_clear(&c);
    dt_buf_reset(&p);
    cr_assert_eq(from_json(&c, "{\"api\": \"openai\"}", &p), -1);
    cr_assert_str_eq(dt_buf_str(&p), "$.model: missing (the model name the endpoint serves)\n");
    llm_config_clear(&c);
    dt_buf_free(&p);
}

Test(config, the_vendor_endpoint_should_bring_its_key_variable_but_a_custom_one_none)
{
    llm_config c;
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(from_json(&c, "{\"api\": \"anthropic\", \"model\": \"claude\"}", &p), 0);
    cr_assert_str_eq(c.endpoint, "https://api.anthropic.com/v1");
    cr_assert_str_eq(c.api_key_env, "ANTHROPIC_API_KEY");
    llm_config_clear(&c);
    cr_assert_eq(from_json(&c, "{\"model\": \"gpt\"}", &p), 0);
    cr_assert_str_eq(c.endpoint, "https://api.openai.com/v1");
    cr_assert_str_eq(c.api_key_env, "OPENAI_API_KEY");
    llm_config_clear(&c);
    /* An endpoint the user names (Ollama, a proxy) gets no key unless the
     * user names the variable too. */
    cr_assert_eq(
        from_json(&c, "{\"endpoint\": \"http://localhost:11434/v1\", \"model\": \"q\"}", &p), 0);
    cr_assert_null(c.api_key_env);
    llm_config_clear(&c);
    cr_assert_eq(from_json(&c, "{\"model\": \"gpt\", \"api_key_env\": null}", &p), 0);
    cr_assert_str_eq(c.api_key_env, "");
    llm_config_clear(&c);
    cr_assert_str_eq(dt_buf_str(&p), "");
    dt_buf_free(&p);
}

Test(config, backoff_max_below_base_should_be_a_problem)
{
    llm_config c;
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(from_json(&c, "{\"model\": \"m\", \"backoff\": {\"base\": 5, \"max\": 2}}", &p),
                 -1);
    cr_assert_str_eq(dt_buf_str(&p), "$.backoff.max: 2 is less than $.backoff.base 5\n");
    llm_config_clear(&c);
    dt_buf_free(&p);
}

Test(config, llm_new_should_refuse_a_config_it_cannot_use)
{
    dt_loop *l = dt_loop_new();
    llm_config c;
    llm_config_init(&c);
    dt_err e = {0};
    cr_assert_null(llm_new(l, &c, &e));
    cr_assert(strstr(e.msg, "endpoint"), "%s", e.msg);
    c.endpoint = dt_xstrdup("http://127.0.0.1:9/v1");
    cr_assert_null(llm_new(l, &c, &e));
    cr_assert(strstr(e.msg, "model"), "%s", e.msg);
    c.model = dt_xstrdup("m");
    c.stall_timeout_s = 0;
    cr_assert_null(llm_new(l, &c, &e));
    c.stall_timeout_s = 1;
    llm_client *cl = llm_new(l, &c, &e);
    cr_assert_not_null(cl, "%s", e.msg);
    cr_assert_eq(llm_busy(cl), 0);
    llm_free(cl);
    llm_free(NULL);
    llm_config_clear(&c);
    dt_loop_free(l);
}

Test(config, the_cache_key_should_change_with_what_shapes_the_answer_only)
{
    llm_config c;
    lt_config(&c, LLM_OPENAI, "http://127.0.0.1:9/v1");
    cJSON *m = lt_messages("sys", "hello");
    char base[17], k[17];
    llm_cache_key(&c, m, base);
    cr_assert_eq(strlen(base), 16);
    llm_cache_key(&c, m, k);
    cr_assert_str_eq(k, base, "not deterministic");

    /* Not part of the key: where the secret lives, prices, timeouts. */
    free(c.api_key_env);
    c.api_key_env = dt_xstrdup("OTHER_KEY");
    c.price_in = 99;
    c.stall_timeout_s = 77;
    c.max_retries = 0;
    llm_cache_key(&c, m, k);
    cr_assert_str_eq(k, base);

    c.temperature = 0.5;
    llm_cache_key(&c, m, k);
    cr_assert_str_neq(k, base, "temperature");
    c.temperature = 0;
    c.max_tokens = 257;
    llm_cache_key(&c, m, k);
    cr_assert_str_neq(k, base, "max_tokens");
    c.max_tokens = 256;
    c.api = LLM_ANTHROPIC;
    llm_cache_key(&c, m, k);
    cr_assert_str_neq(k, base, "api");
    c.api = LLM_OPENAI;
    free(c.model);
    c.model = dt_xstrdup("fake-model2");
    llm_cache_key(&c, m, k);
    cr_assert_str_neq(k, base, "model");
    free(c.model);
    c.model = dt_xstrdup("fake-model");
    free(c.endpoint);
    c.endpoint = dt_xstrdup("http://127.0.0.1:10/v1");
    llm_cache_key(&c, m, k);
    cr_assert_str_neq(k, base, "endpoint");
    free(c.endpoint);
    c.endpoint = dt_xstrdup("http://127.0.0.1:9/v1");
    llm_cache_key(&c, m, k);
    cr_assert_str_eq(k, base);
    cJSON *m2 = lt_messages("sys", "hello!");
    llm_cache_key(&c, m2, k);
    cr_assert_str_neq(k, base, "messages");
    cJSON_Delete(m2);
    cJSON_Delete(m);
    llm_config_clear(&c);
}
