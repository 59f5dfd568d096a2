/* llmtest.h -- helpers for the LLM client tests: the fake server process,
 * configs with short timeouts, and running one request to its end. */
#ifndef DITTO_LLMTEST_H
#define DITTO_LLMTEST_H

#include "tests/common/testutil.h"

#include "agents/llm.h"

#include <sys/types.h>

/* The key the tests put in the environment; it must never come back out. */
#define LT_KEY_ENV "DITTO_TEST_LLM_KEY"
#define LT_KEY     "sk-test-9f8e7d6c5b4a-SECRET"

/* A fake server started from a transcript (JSON text); stopped by
 * lt_server_stop or, should the test fail first, by the fixture below. */
typedef struct lt_server {
    pid_t pid;
    int port;
    char *dir;      /* temporary folder: transcript, request log, cache */
    char *log;      /* the server's request log (JSON lines) */
    char *endpoint; /* http://127.0.0.1:PORT/v1 */
} lt_server;

lt_server *lt_server_start(const char *transcript);
void lt_server_stop(lt_server *s);
/* Every request the server received, as a JSON array (caller deletes). */
cJSON *lt_server_requests(const lt_server *s);
int lt_server_count(const lt_server *s);
/* Criterion .fini: stops a server a failed assertion left running. */
void lt_teardown(void);

/* A config for the fake server: api, endpoint, model "fake-model", the test
 * key variable, connect 2 s, stall 5 s, 3 retries, backoff 0.05 s doubling
 * to 1.5 s (over the 1 s Retry-After the tests use), prices 2 and 10 USD
 * per million tokens, no cache. Clear it with llm_config_clear. */
void lt_config(llm_config *c, llm_api api, const char *endpoint);

/* What one request delivered, copied out of the borrowed callback data. */
typedef struct lt_call {
    int done; /* times done was called */
    int ok;
    char *text, *error, *message, *finish;
    int http_status, attempts, cached;
    long tokens_in, tokens_out;
    double cost;
    dt_buf deltas; /* every delta, concatenated */
    int ndeltas;
    double delta_at[64]; /* dt_now() of the first 64 deltas */
    double started, ended;
    /* optional actions inside callbacks */
    llm_client *cl;
    long id;
    int cancel_in_delta; /* call llm_cancel(cl, id) from the first delta */
    int free_in_delta;   /* call llm_free(cl) from the first delta */
} lt_call;

void lt_delta(const char *text, size_t len, void *ud);
void lt_done(const llm_result *r, void *ud);
void lt_call_free(lt_call *c);
/* Submit and turn the loop until done (or timeout_s, which fails the test). */
void lt_run(dt_loop *l, llm_client *cl, const cJSON *messages, lt_call *c, double timeout_s);
/* Turn the loop until c->done or timeout_s; returns c->done. */
int lt_wait(dt_loop *l, lt_call *c, double timeout_s);
/* [{"role": "user", "content": text}] with an optional system message first. */
cJSON *lt_messages(const char *system, const char *user);
/* A port on 127.0.0.1 where nothing listens (bound, then closed). */
int lt_closed_port(void);

#endif
