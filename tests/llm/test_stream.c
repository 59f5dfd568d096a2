/* test_stream.c -- the LLM client against the fake server: both APIs
 * streaming, usage and cost, the body and headers sent, and the plain-JSON
 * fallback. */
#include "tests/common/llmtest.h"

#include <stdlib.h>
#include <string.h>

typedef struct fixture {
    dt_loop *loop;
    lt_server *srv;
    llm_config c;
    llm_client *cl;
} fixture;

static void setup(fixture *f, const char *transcript, llm_api api)
{
    f->loop = dt_loop_new();
    f->srv = lt_server_start(transcript);
    lt_config(&f->c, api, f->srv->endpoint);
}

static void connect_client(fixture *f)
{
    dt_err e = {0};
    f->cl = llm_new(f->loop, &f->c, &e);
    cr_assert_not_null(f->cl, "%s", e.msg);
}

static void teardown(fixture *f)
{
    llm_free(f->cl);
    llm_config_clear(&f->c);
    lt_server_stop(f->srv);
    dt_loop_free(f->loop);
}

static const cJSON *request(const cJSON *reqs, int i)
{
    const cJSON *r = cJSON_GetArrayItem(reqs, i);
    cr_assert_not_null(r, "no request %d", i);
    return r;
}

static const char *header(const cJSON *req, const char *name)
{
    return dt_json_str(cJSON_GetObjectItemCaseSensitive(req, "headers"), name, NULL);
}

/* Stop a server a failed assertion left running; never hang the run. */
TestSuite(stream, .fini = lt_teardown, .timeout = 60);

Test(stream, openai_should_stream_deltas_in_order_and_report_usage_and_cost)
{
    fixture f = {0};
    setup(&f,
          "[{\"text\": [\"The \", \"quick \", \"brown \", \"fox\"],"
          "  \"usage\": {\"input\": 1000, \"output\": 500}}]",
          LLM_OPENAI);
    connect_client(&f);
    cJSON *m = lt_messages("Be terse.", "Say it.");
    lt_call call = {0};
    lt_run(f.loop, f.cl, m, &call, 20);
    cr_assert(call.ok, "%s: %s", call.error, call.message);
    cr_assert_str_eq(call.text, "The quick brown fox");
    cr_assert_eq(call.ndeltas, 4);
    cr_assert_str_eq(dt_buf_str(&call.deltas), "The quick brown fox");
    cr_assert_str_eq(call.finish, "stop");
    cr_assert_eq(call.http_status, 200);
    cr_assert_eq(call.attempts, 1);
    cr_assert_eq(call.cached, 0);
    cr_assert_eq(call.tokens_in, 1000);
    cr_assert_eq(call.tokens_out, 500);
    cr_assert_float_eq(call.cost, 1000 * 2e-6 + 500 * 10e-6, 1e-12);
    long tin, tout;
    double cost;
    llm_totals(f.cl, &tin, &tout, &cost);
    cr_assert_eq(tin, 1000);
    cr_assert_eq(tout, 500);
    cr_assert_float_eq(cost, call.cost, 1e-12);
    cr_assert_eq(llm_busy(f.cl), 0);

    cJSON *reqs = lt_server_requests(f.srv);
    cr_assert_eq(cJSON_GetArraySize(reqs), 1);
    const cJSON *r = request(reqs, 0);
    cr_assert_str_eq(dt_json_str(r, "path", ""), "/v1/chat/completions");
    cr_assert_str_eq(header(r, "authorization"), "Bearer " LT_KEY);
    cr_assert_null(header(r, "x-api-key"));
    cr_assert_str_eq(header(r, "content-type"), "application/json");
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "body");
    cr_assert_str_eq(dt_json_str(b, "model", ""), "fake-model");
    cr_assert(dt_json_bool(b, "stream", 0));
    cr_assert(
        dt_json_bool(cJSON_GetObjectItemCaseSensitive(b, "stream_options"), "include_usage", 0));
    cr_assert_eq(dt_json_num(b, "max_tokens", 0), 256);
    cr_assert_eq(dt_json_num(b, "temperature", -1), 0);
    char *sent = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "messages"));
    cr_assert_str_eq(sent, "[{\"role\":\"system\",\"content\":\"Be terse.\"},"
                           "{\"role\":\"user\",\"content\":\"Say it.\"}]");
    free(sent);
    cJSON_Delete(reqs);
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(stream, anthropic_should_stream_with_the_system_text_apart_and_its_headers)
{
    fixture f = {0};
    setup(
        &f,
        "[{\"text\": \"Sparse rows vary in length.\", \"usage\": {\"input\": 321, \"output\": 7}}]",
        LLM_ANTHROPIC);
    connect_client(&f);
    cJSON *m = cJSON_Parse("[{\"role\": \"system\", \"content\": \"You are an expert.\"},"
                           " {\"role\": \"user\", \"content\": \"Why CSR?\"},"
                           " {\"role\": \"assistant\", \"content\": \"Because.\"},"
                           " {\"role\": \"system\", \"content\": \"Be brief.\"},"
                           " {\"role\": \"user\", \"content\": \"More.\"}]");
    lt_call call = {0};
    lt_run(f.loop, f.cl, m, &call, 20);
    cr_assert(call.ok, "%s: %s", call.error, call.message);
    cr_assert_str_eq(call.text, "Sparse rows vary in length.");
    cr_assert_eq(call.ndeltas, 5);
    cr_assert_str_eq(call.finish, "end_turn");
    cr_assert_eq(call.tokens_in, 321);
    cr_assert_eq(call.tokens_out, 7);
    cr_assert_float_eq(call.cost, 321 * 2e-6 + 7 * 10e-6, 1e-12);

    cJSON *reqs = lt_server_requests(f.srv);
    const cJSON *r = request(reqs, 0);
    cr_assert_str_eq(dt_json_str(r, "path", ""), "/v1/messages");
    cr_assert_str_eq(header(r, "x-api-key"), LT_KEY);
    cr_assert_str_eq(header(r, "anthropic-version"), "2023-06-01");
    cr_assert_null(header(r, "authorization"));
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(r, "body");
    cr_assert_str_eq(dt_json_str(b, "system", ""), "You are an expert.\n\nBe brief.");
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(b, "stream_options"));
    cr_assert(dt_json_bool(b, "stream", 0));
    cr_assert_eq(dt_json_num(b, "max_tokens", 0), 256);
    char *sent = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(b, "messages"));
    cr_assert_str_eq(sent, "[{\"role\":\"user\",\"content\":\"Why CSR?\"},"
                           "{\"role\":\"assistant\",\"content\":\"Because.\"},"
                           "{\"role\":\"user\",\"content\":\"More.\"}]");
    free(sent);
    cJSON_Delete(reqs);
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

/* Events written 7 bytes at a time, \r\n endings and keep-alive comments:
 * the write callback sees lines cut anywhere. */
static void torn_stream(llm_api api)
{
    fixture f = {0};
    setup(&f,
          "[{\"text\": \"one two three four\", \"usage\": {\"input\": 5, \"output\": 4},"
          "  \"split\": true, \"crlf\": true, \"comments\": true}]",
          api);
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "count");
    lt_call call = {0};
    lt_run(f.loop, f.cl, m, &call, 20);
    cr_assert(call.ok, "%s: %s", call.error, call.message);
    cr_assert_str_eq(call.text, "one two three four");
    cr_assert_eq(call.ndeltas, 4);
    cr_assert_eq(call.tokens_in, 5);
    cr_assert_eq(call.tokens_out, 4);
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(stream, openai_events_torn_into_pieces_with_crlf_and_comments_should_parse)
{
    torn_stream(LLM_OPENAI);
}

Test(stream, anthropic_events_torn_into_pieces_with_crlf_and_comments_should_parse)
{
    torn_stream(LLM_ANTHROPIC);
}

static void plain_json(llm_api api, const char *finish)
{
    fixture f = {0};
    setup(&f,
          "[{\"fault\": \"plain_json\", \"text\": \"all at once\","
          "  \"usage\": {\"input\": 3, \"output\": 3}}]",
          api);
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "hi");
    lt_call call = {0};
    lt_run(f.loop, f.cl, m, &call, 20);
    cr_assert(call.ok, "%s: %s", call.error, call.message);
    cr_assert_str_eq(call.text, "all at once");
    cr_assert_eq(call.ndeltas, 1);
    cr_assert_str_eq(call.finish, finish);
    cr_assert_eq(call.tokens_out, 3);
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(stream, a_server_that_ignores_stream_should_still_be_understood)
{
    plain_json(LLM_OPENAI, "stop");
}

Test(stream, an_anthropic_server_that_ignores_stream_should_still_be_understood)
{
    plain_json(LLM_ANTHROPIC, "end_turn");
}

Test(stream, requests_should_add_up_in_the_session_totals)
{
    fixture f = {0};
    setup(&f,
          "[{\"text\": \"a\", \"usage\": {\"input\": 10, \"output\": 1}},"
          " {\"text\": \"b\", \"usage\": {\"input\": 20, \"output\": 2}}]",
          LLM_OPENAI);
    connect_client(&f);
    cJSON *m1 = lt_messages(NULL, "first");
    cJSON *m2 = lt_messages(NULL, "second");
    lt_call a = {0}, b = {0};
    /* Both in flight at once on one client. */
    a.cl = b.cl = f.cl;
    a.id = llm_submit(f.cl, m1, lt_delta, lt_done, &a);
    b.id = llm_submit(f.cl, m2, lt_delta, lt_done, &b);
    cr_assert_neq(a.id, b.id);
    cr_assert_eq(llm_busy(f.cl), 2);
    cr_assert(lt_wait(f.loop, &a, 20));
    cr_assert(lt_wait(f.loop, &b, 20));
    cr_assert(a.ok && b.ok);
    long tin, tout;
    double cost;
    llm_totals(f.cl, &tin, &tout, &cost);
    cr_assert_eq(tin, 30);
    cr_assert_eq(tout, 3);
    cr_assert_float_eq(cost, 30 * 2e-6 + 3 * 10e-6, 1e-12);
    cJSON_Delete(m1);
    cJSON_Delete(m2);
    lt_call_free(&a);
    lt_call_free(&b);
    teardown(&f);
}

Test(stream, malformed_messages_should_fail_at_once_without_a_request)
{
    fixture f = {0};
    setup(&f, "[]", LLM_ANTHROPIC);
    connect_client(&f);
    static const char *const bad[] = {
        "[]", "{}", "[{\"role\": \"robot\", \"content\": \"x\"}]",
        "[{\"role\": \"user\", \"content\": 5}]",
        "[{\"role\": \"system\", \"content\": \"only a system text\"}]"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *m = cJSON_Parse(bad[i]);
        lt_call call = {0};
        /* done runs inside llm_submit */
        long id = llm_submit(f.cl, m, lt_delta, lt_done, &call);
        cr_assert_gt(id, 0);
        cr_assert_eq(call.done, 1, "%s", bad[i]);
        cr_assert_str_eq(call.error, "bad_request", "%s", bad[i]);
        cr_assert_eq(call.attempts, 0);
        cr_assert(strstr(call.message, "messages"), "%s", call.message);
        cJSON_Delete(m);
        lt_call_free(&call);
    }
    cr_assert_eq(llm_busy(f.cl), 0);
    cr_assert_eq(lt_server_count(f.srv), 0);
    teardown(&f);
}
