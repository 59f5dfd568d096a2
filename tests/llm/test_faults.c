/* test_faults.c -- the LLM client against a failing fake server: what is
 * retried and how long it waits, what is not, stalls, truncation, broken
 * bodies and a closed port. */
#include "tests/common/llmtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct fixture {
    dt_loop *loop;
    lt_server *srv;
    llm_config c;
    llm_client *cl;
    lt_call call;
} fixture;

typedef void tweak_fn(llm_config *c);

/* Start the server and the client (its config adjusted by tweak), and run
 * one request to its end. */
static void run_with(fixture *f, llm_api api, const char *transcript, tweak_fn *tweak)
{
    f->loop = dt_loop_new();
    f->srv = lt_server_start(transcript);
    lt_config(&f->c, api, f->srv->endpoint);
    if (tweak)
        tweak(&f->c);
    dt_err e = {0};
    f->cl = llm_new(f->loop, &f->c, &e);
    cr_assert_not_null(f->cl, "%s", e.msg);
    cJSON *m = lt_messages("sys", "go");
    lt_run(f->loop, f->cl, m, &f->call, 30);
    cJSON_Delete(m);
}

static void run(fixture *f, llm_api api, const char *transcript)
{
    run_with(f, api, transcript, NULL);
}

static void one_retry(llm_config *c)
{
    c->max_retries = 1;
}

static void stall_1s(llm_config *c)
{
    c->stall_timeout_s = 1;
}

static void stall_1s_no_retry(llm_config *c)
{
    c->stall_timeout_s = 1;
    c->max_retries = 0;
}

static void no_key(llm_config *c)
{
    free(c->api_key_env);
    c->api_key_env = NULL;
}

static double took(const fixture *f)
{
    return f->call.ended - f->call.started;
}

static void finish(fixture *f)
{
    llm_free(f->cl);
    llm_config_clear(&f->c);
    lt_server_stop(f->srv);
    dt_loop_free(f->loop);
    lt_call_free(&f->call);
}

static void expect_ok(const fixture *f, const char *text, int attempts)
{
    cr_assert(f->call.ok, "%s: %s", f->call.error, f->call.message);
    cr_assert_str_eq(f->call.text, text);
    cr_assert_eq(f->call.attempts, attempts);
    cr_assert_eq(lt_server_count(f->srv), attempts);
}

static void expect_error(const fixture *f, const char *error, int attempts)
{
    cr_assert_not(f->call.ok);
    cr_assert_str_eq(f->call.error, error, "%s", f->call.message);
    cr_assert_eq(f->call.attempts, attempts, "%s", f->call.message);
    cr_assert_null(strstr(f->call.message, LT_KEY), "key in: %s", f->call.message);
}

/* Stop a server a failed assertion left running; never hang the run. */
TestSuite(faults, .fini = lt_teardown, .timeout = 60);

Test(faults, a_429_should_wait_the_retry_after_seconds_then_succeed)
{
    fixture f = {0};
    run(&f, LLM_OPENAI,
        "[{\"fault\": \"rate_limit\", \"retry_after\": 1}, {\"text\": \"after the wait\"}]");
    expect_ok(&f, "after the wait", 2);
    /* The backoff alone would be 0.05 s: only Retry-After explains 1 s. */
    cr_assert_geq(took(&f), 1.0, "took %.3f s", took(&f));
    cr_assert_lt(took(&f), 5.0, "took %.3f s", took(&f));
    finish(&f);
}

Test(faults, a_retry_after_longer_than_backoff_max_should_end_the_request)
{
    fixture f = {0};
    run(&f, LLM_ANTHROPIC,
        "[{\"fault\": \"rate_limit\", \"retry_after\": 120}, {\"text\": \"never\"}]");
    expect_error(&f, "rate_limited", 1);
    cr_assert_eq(f.call.http_status, 429);
    cr_assert(strstr(f.call.message, "HTTP 429: Rate limit reached"), "%s", f.call.message);
    cr_assert(strstr(f.call.message, "120"), "%s", f.call.message);
    cr_assert_lt(took(&f), 2.0);
    finish(&f);
}

Test(faults, a_429_that_persists_should_end_as_rate_limited_after_the_retries)
{
    fixture f = {0};
    run(&f, LLM_OPENAI,
        "[{\"fault\": \"rate_limit\", \"retry_after\": 0},"
        " {\"fault\": \"rate_limit\", \"retry_after\": 0},"
        " {\"fault\": \"rate_limit\", \"retry_after\": 0},"
        " {\"fault\": \"rate_limit\", \"retry_after\": 0}, {\"text\": \"too late\"}]");
    expect_error(&f, "rate_limited", 4);
    cr_assert(strstr(f.call.message, "(4 attempts)"), "%s", f.call.message);
    cr_assert_eq(lt_server_count(f.srv), 4);
    finish(&f);
}

Test(faults, a_500_should_be_retried)
{
    fixture f = {0};
    run(&f, LLM_OPENAI, "[{\"fault\": \"server_error\"}, {\"text\": \"second time\"}]");
    expect_ok(&f, "second time", 2);
    cr_assert_eq(f.call.http_status, 200);
    finish(&f);
}

Test(faults, a_529_overloaded_should_be_retried)
{
    fixture f = {0};
    run(&f, LLM_ANTHROPIC,
        "[{\"fault\": \"overloaded\"}, {\"fault\": \"overloaded\"}, {\"text\": \"third time\"}]");
    expect_ok(&f, "third time", 3);
    finish(&f);
}

Test(faults, a_502_html_page_should_be_retried_then_reported_with_its_text)
{
    fixture f = {0};
    run_with(&f, LLM_OPENAI, "[{\"fault\": \"bad_gateway\"}, {\"fault\": \"bad_gateway\"}]",
             one_retry);
    expect_error(&f, "server", 2);
    cr_assert_eq(f.call.http_status, 502);
    cr_assert(strstr(f.call.message, "HTTP 502: <html><body><h1>502 Bad Gateway"), "%s",
              f.call.message);
    finish(&f);
}

Test(faults, an_in_stream_overloaded_event_before_any_text_should_be_retried)
{
    fixture f = {0};
    run(&f, LLM_ANTHROPIC, "[{\"text\": \"x\", \"error_after\": 0}, {\"text\": \"clean\"}]");
    expect_ok(&f, "clean", 2);
    finish(&f);
}

Test(faults, an_in_stream_error_after_text_should_fail_with_the_partial_text)
{
    fixture f = {0};
    run(&f, LLM_OPENAI, "[{\"text\": \"half of it\", \"error_after\": 2}, {\"text\": \"no\"}]");
    expect_error(&f, "server", 1);
    cr_assert_str_eq(f.call.text, "half of ");
    cr_assert(strstr(f.call.message, "partial output"), "%s", f.call.message);
    cr_assert_eq(lt_server_count(f.srv), 1);
    finish(&f);
}

static void auth(llm_api api)
{
    fixture f = {0};
    run(&f, api, "[{\"fault\": \"auth\"}, {\"text\": \"must not be asked\"}]");
    expect_error(&f, "auth", 1);
    cr_assert_eq(f.call.http_status, 401);
    cr_assert_eq(lt_server_count(f.srv), 1);
    /* The server echoed the key; the message keeps the rest. */
    cr_assert(strstr(f.call.message, "[key]"), "%s", f.call.message);
    finish(&f);
}

Test(faults, a_401_should_not_be_retried_and_its_echoed_key_scrubbed)
{
    auth(LLM_OPENAI);
}

Test(faults, an_anthropic_401_should_not_be_retried_and_its_echoed_key_scrubbed)
{
    auth(LLM_ANTHROPIC);
}

Test(faults, insufficient_quota_should_end_as_spend_limit_without_retry)
{
    fixture f = {0};
    run(&f, LLM_OPENAI, "[{\"fault\": \"quota\"}, {\"text\": \"no\"}]");
    expect_error(&f, "spend_limit", 1);
    cr_assert_eq(f.call.http_status, 429);
    cr_assert(strstr(f.call.message, "exceeded your current quota"), "%s", f.call.message);
    cr_assert_eq(lt_server_count(f.srv), 1);
    finish(&f);
}

Test(faults, anthropic_credit_balance_should_end_as_spend_limit_without_retry)
{
    fixture f = {0};
    run(&f, LLM_ANTHROPIC, "[{\"fault\": \"quota\"}, {\"text\": \"no\"}]");
    expect_error(&f, "spend_limit", 1);
    cr_assert_eq(f.call.http_status, 400);
    cr_assert_eq(lt_server_count(f.srv), 1);
    finish(&f);
}

Test(faults, a_400_should_end_as_bad_request_without_retry)
{
    fixture f = {0};
    run(&f, LLM_OPENAI, "[{\"fault\": \"bad_request\"}, {\"text\": \"no\"}]");
    expect_error(&f, "bad_request", 1);
    cr_assert_str_eq(f.call.message, "HTTP 400: max_tokens: must be positive");
    finish(&f);
}

Test(faults, a_stream_that_stalls_after_text_should_fail_within_the_stall_timeout)
{
    fixture f = {0};
    run_with(&f, LLM_OPENAI, "[{\"text\": \"a b c d\", \"stall_after\": 2}, {\"text\": \"no\"}]",
             stall_1s);
    expect_error(&f, "stalled", 1);
    cr_assert_str_eq(f.call.text, "a b ");
    cr_assert(strstr(f.call.message, "no data for 1 s"), "%s", f.call.message);
    cr_assert(strstr(f.call.message, "partial output"), "%s", f.call.message);
    double t = f.call.ended - f.call.delta_at[1];
    cr_assert(t >= 0.95 && t < 2.5, "stall noticed %.3f s after the last byte", t);
    finish(&f);
}

Test(faults, a_stall_before_any_text_should_be_retried)
{
    fixture f = {0};
    run_with(&f, LLM_ANTHROPIC, "[{\"text\": \"a\", \"stall_after\": 0}, {\"text\": \"fresh\"}]",
             stall_1s);
    expect_ok(&f, "fresh", 2);
    cr_assert_eq(f.call.ndeltas, 1, "nothing from the stalled attempt");
    cr_assert(took(&f) >= 0.95 && took(&f) < 4, "took %.3f s", took(&f));
    finish(&f);
}

/* Truncation (the server closes mid-event): a protocol error, retried like
 * any transient failure while nothing has been delivered. */
Test(faults, a_stream_cut_mid_event_after_text_should_be_a_protocol_error)
{
    fixture f = {0};
    run(&f, LLM_OPENAI,
        "[{\"text\": \"one two three\", \"truncate_after\": 1}, {\"text\": \"no\"}]");
    expect_error(&f, "protocol", 1);
    cr_assert_str_eq(f.call.text, "one ");
    cr_assert(strstr(f.call.message, "ended without its final event"), "%s", f.call.message);
    cr_assert_eq(lt_server_count(f.srv), 1);
    finish(&f);
}

Test(faults, a_stream_cut_mid_event_before_text_should_be_retried_cleanly)
{
    fixture f = {0};
    run(&f, LLM_ANTHROPIC,
        "[{\"text\": \"lost\", \"truncate_after\": 0}, {\"text\": \"whole answer\"}]");
    expect_ok(&f, "whole answer", 2);
    cr_assert_str_eq(dt_buf_str(&f.call.deltas), "whole answer");
    finish(&f);
}

Test(faults, a_cut_before_the_end_marker_should_not_pass_as_success)
{
    fixture f = {0};
    /* Every text piece arrives, then the stream is cut inside the final
     * chunk: without the finish reason and [DONE] the answer may be short. */
    run(&f, LLM_OPENAI, "[{\"text\": \"a b\", \"truncate_after\": 2}]");
    expect_error(&f, "protocol", 1);
    cr_assert_str_eq(f.call.text, "a b");
    finish(&f);
}

Test(faults, headers_then_nothing_should_be_retried)
{
    fixture f = {0};
    run(&f, LLM_OPENAI, "[{\"fault\": \"empty\"}, {\"text\": \"ok now\"}]");
    expect_ok(&f, "ok now", 2);
    finish(&f);
}

Test(faults, events_that_are_not_json_should_be_a_protocol_error)
{
    fixture f = {0};
    run(&f, LLM_OPENAI, "[{\"fault\": \"non_json\"}, {\"text\": \"no\"}]");
    expect_error(&f, "protocol", 1);
    cr_assert(strstr(f.call.message, "not JSON: <html>this is not json</html>"), "%s",
              f.call.message);
    cr_assert_eq(lt_server_count(f.srv), 1);
    finish(&f);
}

Test(faults, a_server_that_never_answers_should_be_a_stall)
{
    fixture f = {0};
    run_with(&f, LLM_OPENAI, "[{\"fault\": \"hang\", \"stall_s\": 5}, {\"text\": \"no\"}]",
             stall_1s_no_retry);
    expect_error(&f, "stalled", 1);
    cr_assert_eq(f.call.http_status, 0);
    cr_assert(took(&f) >= 0.95 && took(&f) < 2.5, "took %.3f s", took(&f));
    finish(&f);
}

/* A listening socket whose accept queue is full: SYNs go unanswered, as
 * with a firewalled host. */
static int full_listener(int *port, int clients[3])
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    cr_assert(listen(fd, 0) == 0);
    socklen_t len = sizeof a;
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    for (int i = 0; i < 3; i++) {
        clients[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        connect(clients[i], (struct sockaddr *)&a, sizeof a);
    }
    usleep(100000);
    *port = ntohs(a.sin_port);
    return fd;
}

Test(faults, no_connection_within_the_connect_timeout_should_end_as_timeout)
{
    int port = 0, clients[3];
    int lfd = full_listener(&port, clients);
    dt_loop *l = dt_loop_new();
    char *ep = dt_xasprintf("http://127.0.0.1:%d/v1", port);
    llm_config c;
    lt_config(&c, LLM_OPENAI, ep);
    c.connect_timeout_s = 0.3;
    c.max_retries = 1;
    c.backoff_base_s = 0.01;
    dt_err e = {0};
    llm_client *cl = llm_new(l, &c, &e);
    cJSON *m = lt_messages(NULL, "go");
    lt_call call = {0};
    lt_run(l, cl, m, &call, 20);
    cr_assert_str_eq(call.error, "timeout", "%s", call.message);
    cr_assert_eq(call.attempts, 2);
    cr_assert(strstr(call.message, "no connection within 0.3 s"), "%s", call.message);
    double t = call.ended - call.started;
    cr_assert(t >= 0.55 && t < 2.0, "took %.3f s", t);
    cJSON_Delete(m);
    lt_call_free(&call);
    llm_free(cl);
    llm_config_clear(&c);
    free(ep);
    dt_loop_free(l);
    for (int i = 0; i < 3; i++)
        close(clients[i]);
    close(lfd);
}

Test(faults, a_closed_port_should_end_as_connect_after_the_retries)
{
    dt_loop *l = dt_loop_new();
    char *ep = dt_xasprintf("http://127.0.0.1:%d/v1", lt_closed_port());
    llm_config c;
    lt_config(&c, LLM_OPENAI, ep);
    c.max_retries = 2;
    c.backoff_base_s = 0.01;
    c.backoff_max_s = 0.05;
    dt_err e = {0};
    llm_client *cl = llm_new(l, &c, &e);
    cJSON *m = lt_messages(NULL, "go");
    lt_call call = {0};
    lt_run(l, cl, m, &call, 20);
    cr_assert_not(call.ok);
    cr_assert_str_eq(call.error, "connect", "%s", call.message);
    cr_assert_eq(call.attempts, 3);
    cr_assert_eq(call.http_status, 0);
    cr_assert(strstr(call.message, "(3 attempts)"), "%s", call.message);
    cr_assert_lt(call.ended - call.started, 2.0);
    cJSON_Delete(m);
    lt_call_free(&call);
    llm_free(cl);
    llm_config_clear(&c);
    free(ep);
    dt_loop_free(l);
}

Test(faults, an_unset_key_variable_should_fail_as_auth_before_any_request)
{
    fixture f = {0};
    f.loop = dt_loop_new();
    f.srv = lt_server_start("[{\"text\": \"no\"}]");
    lt_config(&f.c, LLM_OPENAI, f.srv->endpoint);
    unsetenv(LT_KEY_ENV);
    dt_err e = {0};
    f.cl = llm_new(f.loop, &f.c, &e);
    cJSON *m = lt_messages(NULL, "go");
    long id = llm_submit(f.cl, m, lt_delta, lt_done, &f.call);
    cr_assert_gt(id, 0);
    cr_assert_eq(f.call.done, 1);
    cr_assert_str_eq(f.call.error, "auth");
    cr_assert_str_eq(f.call.message, "the API key variable " LT_KEY_ENV " is not set");
    cr_assert_eq(lt_server_count(f.srv), 0);
    cJSON_Delete(m);
    finish(&f);
}

Test(faults, no_key_variable_should_send_no_key)
{
    fixture f = {0};
    run_with(&f, LLM_OPENAI, "[{\"text\": \"local model\"}]", no_key);
    cr_assert(f.call.ok, "%s", f.call.message);
    cJSON *reqs = lt_server_requests(f.srv);
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(reqs, 0), "headers");
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(h, "authorization"));
    cr_assert_null(cJSON_GetObjectItemCaseSensitive(h, "x-api-key"));
    cJSON_Delete(reqs);
    finish(&f);
}

/* issue 37: answers had no size cap (9 MB answers went back to the
 * endpoint) and no overall deadline (a slow drip streamed past 300 s). */
static void cap_1k(llm_config *c)
{
    c->max_answer_bytes = 1024;
}

Test(faults, an_answer_past_max_answer_bytes_should_end_as_too_large)
{
    fixture f = {0};
    dt_buf t = DT_BUF_INIT;
    dt_buf_puts(&t, "[{\"text\": [");
    for (int i = 0; i < 100; i++)
        dt_buf_printf(&t, "%s\"%048d\"", i ? ", " : "", i);
    dt_buf_puts(&t, "]}, {\"text\": \"no\"}]");
    run_with(&f, LLM_OPENAI, t.data, cap_1k);
    expect_error(&f, "too_large", 1);
    cr_assert_leq(strlen(f.call.text), 1024);
    cr_assert(strstr(f.call.message, "passed 1024 bytes (llm.max_answer_bytes)"), "%s",
              f.call.message);
    dt_buf_free(&t);
    finish(&f);
}

static void deadline_1500ms(llm_config *c)
{
    c->request_timeout_s = 1.5;
}

Test(faults, a_slow_drip_should_end_at_the_request_timeout)
{
    fixture f = {0};
    /* A byte every 0.4 s never stalls, and would take 4 s in all. */
    run_with(&f, LLM_OPENAI, "[{\"text\": \"a b c d e f g h i j\", \"delay\": 0.4}]",
             deadline_1500ms);
    expect_error(&f, "timeout", 1);
    cr_assert(strstr(f.call.message, "no whole answer within 1.5 s (llm.request_timeout_s)"), "%s",
              f.call.message);
    cr_assert(took(&f) >= 1.4 && took(&f) < 3.0, "ended after %.3f s", took(&f));
    finish(&f);
}
