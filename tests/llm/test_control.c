/* test_control.c -- the LLM client in the loop: slow tokens, a loop that
 * stays responsive, cancellation (from outside, inside a delta, during a
 * backoff, by llm_free), the response cache, and the key kept secret. */
#include "tests/common/llmtest.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

typedef struct ticker {
    int ticks;
    double at[512];
} ticker;

static long tick(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    ticker *t = ud;
    if (t->ticks < (int)DT_ARRAY_LEN(t->at))
        t->at[t->ticks] = dt_now();
    t->ticks++;
    return 20;
}

/* Stop a server a failed assertion left running; never hang the run. */
TestSuite(control, .fini = lt_teardown, .timeout = 60);

Test(control, slow_tokens_should_arrive_as_separate_deltas_while_timers_keep_firing)
{
    fixture f = {0};
    setup(&f, "[{\"text\": \"s l o w !\", \"delay\": 0.15, \"usage\": {\"output\": 5}}]",
          LLM_OPENAI);
    connect_client(&f);
    ticker t = {0};
    long long timer = dt_loop_add_timer(f.loop, 20, tick, &t);
    cJSON *m = lt_messages(NULL, "slowly");
    lt_call call = {0};
    lt_run(f.loop, f.cl, m, &call, 20);
    dt_loop_del_timer(f.loop, timer);
    cr_assert(call.ok, "%s", call.message);
    cr_assert_str_eq(call.text, "s l o w !");
    cr_assert_eq(call.ndeltas, 5);
    for (int i = 1; i < 5; i++)
        cr_assert_geq(call.delta_at[i] - call.delta_at[i - 1], 0.1, "deltas %d and %d %.3f s apart",
                      i - 1, i, call.delta_at[i] - call.delta_at[i - 1]);
    /* The 20 ms timer ran between the first and the last delta, about 30
     * times: the stream never held the loop. */
    int during = 0;
    for (int i = 0; i < t.ticks && i < (int)DT_ARRAY_LEN(t.at); i++)
        during += t.at[i] > call.delta_at[0] && t.at[i] < call.delta_at[4];
    cr_assert_geq(during, 15, "%d ticks during the stream", during);
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(control, cancel_after_the_first_delta_should_end_with_cancelled_and_no_more_deltas)
{
    fixture f = {0};
    setup(&f, "[{\"text\": \"a b c d e f\", \"delay\": 0.1}]", LLM_OPENAI);
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "go");
    lt_call call = {0};
    call.cl = f.cl;
    call.id = llm_submit(f.cl, m, lt_delta, lt_done, &call);
    double until = dt_now() + 10;
    while (call.ndeltas == 0 && dt_now() < until)
        dt_loop_run_once(f.loop, 50);
    cr_assert_eq(call.ndeltas, 1);
    llm_cancel(f.cl, call.id);
    cr_assert_eq(call.done, 1, "done at once");
    cr_assert_str_eq(call.error, "cancelled");
    cr_assert_str_eq(call.text, "a ");
    cr_assert_eq(llm_busy(f.cl), 0);
    /* Nothing more arrives: a delta after done fails in lt_delta. */
    double stop = dt_now() + 0.5;
    while (dt_now() < stop)
        dt_loop_run_once(f.loop, 50);
    cr_assert_eq(call.ndeltas, 1);
    llm_cancel(f.cl, call.id); /* a finished id is ignored */
    cr_assert_eq(call.done, 1);
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(control, cancel_inside_a_delta_callback_should_stop_the_stream)
{
    fixture f = {0};
    setup(&f, "[{\"text\": \"a b c d e f g h\"}]", LLM_ANTHROPIC);
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "go");
    lt_call call = {.cancel_in_delta = 1};
    lt_run(f.loop, f.cl, m, &call, 10);
    cr_assert_str_eq(call.error, "cancelled");
    cr_assert_eq(call.ndeltas, 1, "%d deltas", call.ndeltas);
    cr_assert_str_eq(call.text, "a ");
    cr_assert_str_eq(call.message, "cancelled (partial output)");
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(control, cancel_during_a_backoff_should_end_it_without_another_attempt)
{
    fixture f = {0};
    setup(&f, "[{\"fault\": \"rate_limit\", \"retry_after\": 1}, {\"text\": \"no\"}]", LLM_OPENAI);
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "go");
    lt_call call = {0};
    call.id = llm_submit(f.cl, m, lt_delta, lt_done, &call);
    /* Wait until the 429 came back: then the request sleeps for 1 s. */
    double until = dt_now() + 10;
    while (lt_server_count(f.srv) == 0 && dt_now() < until)
        dt_loop_run_once(f.loop, 20);
    double stop = dt_now() + 0.3;
    while (dt_now() < stop)
        dt_loop_run_once(f.loop, 20);
    cr_assert_eq(call.done, 0);
    cr_assert_eq(llm_busy(f.cl), 1);
    llm_cancel(f.cl, call.id);
    cr_assert_eq(call.done, 1);
    cr_assert_str_eq(call.error, "cancelled");
    cr_assert_eq(call.attempts, 1);
    stop = dt_now() + 1.2;
    while (dt_now() < stop)
        dt_loop_run_once(f.loop, 50);
    cr_assert_eq(lt_server_count(f.srv), 1, "retried after the cancel");
    cJSON_Delete(m);
    lt_call_free(&call);
    teardown(&f);
}

Test(control, llm_free_should_cancel_everything_running)
{
    fixture f = {0};
    setup(&f,
          "[{\"text\": \"a b c\", \"delay\": 0.2}, {\"fault\": \"server_error\"},"
          " {\"text\": \"x\", \"delay\": 0.2}]",
          LLM_OPENAI);
    f.c.backoff_base_s = 1; /* the 500's request waits in its backoff */
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "go");
    lt_call a = {0}, b = {0};
    llm_submit(f.cl, m, lt_delta, lt_done, &a);
    llm_submit(f.cl, m, lt_delta, lt_done, &b);
    double until = dt_now() + 10;
    while (lt_server_count(f.srv) < 2 && dt_now() < until)
        dt_loop_run_once(f.loop, 20);
    double stop = dt_now() + 0.2;
    while (dt_now() < stop)
        dt_loop_run_once(f.loop, 20);
    cr_assert_eq(llm_busy(f.cl), 2);
    llm_free(f.cl);
    f.cl = NULL;
    cr_assert_eq(a.done, 1);
    cr_assert_eq(b.done, 1);
    cr_assert_str_eq(a.error, "cancelled");
    cr_assert_str_eq(b.error, "cancelled");
    /* The loop holds nothing of the client's any more: with no fd and no
     * timer, an unbounded iteration returns at once (a leftover closed fd
     * would wake it with POLLNVAL, a timer would run). */
    double t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(f.loop, -1), 0);
    cr_assert_lt(dt_now() - t0, 0.1);
    cJSON_Delete(m);
    lt_call_free(&a);
    lt_call_free(&b);
    teardown(&f);
}

/* A done callback that starts the next request on the same client. */
typedef struct chain {
    llm_client *cl;
    cJSON *m;
    lt_call second;
    int firsts;
} chain;

static void chain_done(const llm_result *r, void *ud)
{
    chain *c = ud;
    cr_assert(r->ok, "%s", r->message);
    c->firsts++;
    c->second.cl = c->cl;
    c->second.free_in_delta = 1;
    c->second.id = llm_submit(c->cl, c->m, lt_delta, lt_done, &c->second);
}

Test(control, callbacks_should_be_able_to_submit_and_free_the_client)
{
    fixture f = {0};
    setup(&f, "[{\"text\": \"first\"}, {\"text\": \"second and more\"}]", LLM_OPENAI);
    connect_client(&f);
    chain c = {.cl = f.cl, .m = lt_messages(NULL, "go")};
    llm_submit(f.cl, c.m, NULL, chain_done, &c);
    /* The second request frees the client from its first delta. */
    double until = dt_now() + 10;
    while (!c.second.done && dt_now() < until)
        dt_loop_run_once(f.loop, 50);
    f.cl = NULL;
    cr_assert_eq(c.firsts, 1);
    cr_assert_eq(c.second.done, 1);
    cr_assert_str_eq(c.second.error, "cancelled");
    cr_assert_eq(c.second.ndeltas, 1);
    double t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(f.loop, -1), 0);
    cr_assert_lt(dt_now() - t0, 0.1);
    cJSON_Delete(c.m);
    lt_call_free(&c.second);
    teardown(&f);
}

static char *read_dir_files(const char *dir, int *count)
{
    dt_buf all = DT_BUF_INIT;
    *count = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *p = dt_xasprintf("%s/%s", dir, de->d_name);
        char *text = dt_read_file(p, NULL, NULL);
        cr_assert_not_null(text, "%s", p);
        dt_buf_puts(&all, text);
        free(text);
        free(p);
        (*count)++;
    }
    closedir(d);
    return dt_buf_take(&all);
}

Test(control, an_identical_request_should_be_served_from_the_cache)
{
    fixture f = {0};
    setup(&f,
          "[{\"text\": \"cache me if you can\", \"usage\": {\"input\": 40, \"output\": 6}},"
          " {\"text\": \"a warmer answer\", \"usage\": {\"input\": 40, \"output\": 3}}]",
          LLM_ANTHROPIC);
    free(f.c.cache_dir);
    f.c.cache_dir = dt_xasprintf("%s/cache/llm", f.srv->dir); /* created on first write */
    connect_client(&f);
    cJSON *m = lt_messages("sys", "same question");
    lt_call first = {0}, second = {0};
    lt_run(f.loop, f.cl, m, &first, 20);
    cr_assert(first.ok, "%s", first.message);
    cr_assert_eq(first.cached, 0);

    long id = llm_submit(f.cl, m, lt_delta, lt_done, &second);
    cr_assert_gt(id, 0);
    cr_assert_eq(second.done, 1, "a hit answers inside llm_submit");
    cr_assert(second.ok);
    cr_assert_eq(second.cached, 1);
    cr_assert_str_eq(second.text, "cache me if you can");
    cr_assert_eq(second.ndeltas, 1);
    cr_assert_str_eq(dt_buf_str(&second.deltas), "cache me if you can");
    cr_assert_eq(second.cost, 0);
    cr_assert_eq(second.attempts, 0);
    cr_assert_eq(second.tokens_in, 40);
    cr_assert_eq(second.tokens_out, 6);
    cr_assert_str_eq(second.finish, "end_turn");
    cr_assert_eq(lt_server_count(f.srv), 1, "the hit reached the server");
    long tin, tout;
    double cost;
    llm_totals(f.cl, &tin, &tout, &cost);
    cr_assert_eq(tin, 40, "a hit added to the totals");
    cr_assert_float_eq(cost, first.cost, 1e-12);

    /* Another temperature is another question. */
    llm_free(f.cl);
    f.c.temperature = 0.9;
    connect_client(&f);
    lt_call third = {0};
    lt_run(f.loop, f.cl, m, &third, 20);
    cr_assert_eq(third.cached, 0);
    cr_assert_str_eq(third.text, "a warmer answer");
    cr_assert_eq(lt_server_count(f.srv), 2);
    int files = 0;
    char *all = read_dir_files(f.c.cache_dir, &files);
    cr_assert_eq(files, 2, "one file per key, no temporaries left");
    free(all);
    cJSON_Delete(m);
    lt_call_free(&first);
    lt_call_free(&second);
    lt_call_free(&third);
    teardown(&f);
}

Test(control, failures_should_not_be_cached_and_corrupt_entries_ignored)
{
    fixture f = {0};
    setup(&f, "[{\"fault\": \"bad_request\"}, {\"text\": \"real\"}, {\"text\": \"again\"}]",
          LLM_OPENAI);
    free(f.c.cache_dir);
    f.c.cache_dir = dt_xasprintf("%s/cache", f.srv->dir);
    connect_client(&f);
    cJSON *m = lt_messages(NULL, "q");
    lt_call a = {0}, b = {0}, c = {0};
    lt_run(f.loop, f.cl, m, &a, 20);
    cr_assert_str_eq(a.error, "bad_request");
    /* A corrupt entry where the answer would be. */
    char key[17];
    llm_cache_key(&f.c, m, key);
    dt_mkdir_p(f.c.cache_dir, NULL);
    char *name = dt_xasprintf("%s.json", key);
    free(tu_write(f.c.cache_dir, name, "{\"version\": 1, \"text\": [not json"));
    lt_run(f.loop, f.cl, m, &b, 20);
    cr_assert(b.ok, "%s", b.message);
    cr_assert_eq(b.cached, 0);
    cr_assert_str_eq(b.text, "real");
    /* ... replaced by the good answer. */
    lt_run(f.loop, f.cl, m, &c, 20);
    cr_assert_eq(c.cached, 1);
    cr_assert_str_eq(c.text, "real");
    cr_assert_eq(lt_server_count(f.srv), 2);
    free(name);
    cJSON_Delete(m);
    lt_call_free(&a);
    lt_call_free(&b);
    lt_call_free(&c);
    teardown(&f);
}

Test(control, the_key_should_reach_the_server_and_nowhere_else)
{
    fixture f = {0};
    setup(&f,
          "[{\"fault\": \"auth\"},"
          " {\"fault\": \"rate_limit\", \"retry_after\": 0}, {\"text\": \"fine\"},"
          " {\"text\": \"cut short\", \"stall_after\": 1, \"stall_s\": 3}]",
          LLM_OPENAI);
    free(f.c.cache_dir);
    f.c.cache_dir = dt_xasprintf("%s/cache", f.srv->dir);
    f.c.stall_timeout_s = 1;
    /* Everything the library logs, at its most talkative, into a file. */
    char *errlog = dt_xasprintf("%s/stderr.txt", f.srv->dir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(errlog, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert(fd >= 0 && saved >= 0);
    dup2(fd, 2);
    close(fd);
    dt_log_level level = dt_log_get_level();
    dt_log_set_level(DT_LOG_DEBUG);
    connect_client(&f);
    lt_call calls[3] = {{0}};
    static const char *const questions[3] = {"one", "two", "three"};
    for (int i = 0; i < 3; i++) {
        cJSON *m = lt_messages(NULL, questions[i]);
        lt_run(f.loop, f.cl, m, &calls[i], 20);
        cJSON_Delete(m);
    }
    llm_free(f.cl);
    f.cl = NULL;
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    dt_log_set_level(level);

    cr_assert_str_eq(calls[0].error, "auth");
    cr_assert(calls[1].ok, "%s", calls[1].message);
    cr_assert_str_eq(calls[2].error, "stalled");
    /* The server saw the key on every request ... */
    cJSON *reqs = lt_server_requests(f.srv);
    cr_assert_eq(cJSON_GetArraySize(reqs), 4);
    const cJSON *r;
    cJSON_ArrayForEach(r, reqs)
    {
        const cJSON *h = cJSON_GetObjectItemCaseSensitive(r, "headers");
        cr_assert_str_eq(dt_json_str(h, "authorization", ""), "Bearer " LT_KEY);
    }
    cJSON_Delete(reqs);
    /* ... and no result, log line or cache file holds it. */
    for (int i = 0; i < 3; i++) {
        cr_assert_null(strstr(calls[i].message, LT_KEY), "%s", calls[i].message);
        cr_assert_null(strstr(calls[i].text, LT_KEY));
        lt_call_free(&calls[i]);
    }
    char *logged = dt_read_file(errlog, NULL, NULL);
    cr_assert_not_null(logged);
    cr_assert(strstr(logged, "retrying in"), "debug logging was not captured:\n%s", logged);
    cr_assert(strstr(logged, "Incorrect API key provided: [key]"), "%s", logged);
    cr_assert_null(strstr(logged, LT_KEY), "%s", logged);
    int files = 0;
    char *cached = read_dir_files(f.c.cache_dir, &files);
    cr_assert_eq(files, 1);
    cr_assert(strstr(cached, "fine"), "%s", cached);
    cr_assert_null(strstr(cached, LT_KEY));
    cr_assert_null(strstr(cached, "9f8e7d6c5b4a"), "a part of the key");
    free(cached);
    free(logged);
    free(errlog);
    teardown(&f);
}
