/* llm.h -- the LLM client: OpenAI-compatible Chat Completions and Anthropic
 * Messages, streamed (SSE) through the libcurl multi interface inside ditto's
 * event loop, with retries, cancellation, token and cost accounting and a
 * response cache.
 *
 * Prefix llm_. Depends on core and libcurl. Never blocks: a request runs as
 * the loop turns, calling back with text deltas as they arrive and once with
 * the final result.
 *
 * Secrets: the API key is read from the environment variable the config
 * names (api_key_env), at request time, and is never written to a log, an
 * event, a session, a cache file or an error message; error texts taken
 * from a server response are scrubbed of the key before they are returned.
 *
 * Ownership: llm_new returns a client freed by llm_free (which cancels what
 * is running, calling each done callback with error "cancelled"). Results
 * handed to callbacks are borrowed for the call. */
#ifndef DITTO_LLM_H
#define DITTO_LLM_H

#include "core/core.h"

typedef enum { LLM_OPENAI, LLM_ANTHROPIC } llm_api;

typedef struct llm_config {
    llm_api api;
    char *endpoint;        /* base URL: "https://api.openai.com/v1",
                              "http://localhost:11434/v1", "https://api.anthropic.com/v1" */
    char *model;
    char *api_key_env;     /* e.g. "OPENAI_API_KEY"; NULL or "" for none (Ollama) */
    double price_in;       /* USD per million input tokens (0: unknown) */
    double price_out;      /* USD per million output tokens */
    double connect_timeout_s; /* default 10 */
    double stall_timeout_s;   /* no byte for this long ends the attempt; default 60 */
    int max_retries;          /* on 429 / 5xx / 529 / connection errors; default 4 */
    double backoff_base_s;    /* first backoff; doubled each retry, with jitter; default 1 */
    double backoff_max_s;     /* default 30 */
    int max_tokens;           /* default 4096 */
    double temperature;       /* default 0.2 */
    char *cache_dir;          /* NULL: $XDG_CACHE_HOME/ditto/llm; "" disables */
} llm_config;

/* Defaults for everything (api openai, endpoint/model NULL). */
void llm_config_init(llm_config *c);
void llm_config_clear(llm_config *c);
/* Fill from a JSON object ({"api": "openai"|"anthropic", "endpoint", "model",
 * "api_key_env", "price": {"input": x, "output": y}, "timeouts": {...},
 * "max_retries", "max_tokens", "temperature"}); unknown keys are problems.
 * Every problem is appended to problems as "$.key: what is wrong". */
int llm_config_from_json(llm_config *c, const cJSON *j, dt_buf *problems);

typedef struct llm_client llm_client;

llm_client *llm_new(dt_loop *loop, const llm_config *c, dt_err *e);
void llm_free(llm_client *cl);

/* The result of one request. */
typedef struct llm_result {
    int ok;
    const char *text;        /* the whole answer */
    const char *error;       /* "rate_limited", "auth", "spend_limit", "server",
                                "timeout", "stalled", "connect", "protocol",
                                "cancelled" (NULL when ok) */
    const char *message;     /* one line for people (no secrets) */
    int http_status;         /* last HTTP status, 0 when none */
    long tokens_in, tokens_out;
    double cost;             /* USD from the price table (0 when unknown) */
    int attempts;            /* 1 + retries */
    int cached;              /* served from the response cache */
    const char *finish_reason;
} llm_result;

typedef void llm_delta_fn(const char *text, size_t len, void *ud);
typedef void llm_done_fn(const llm_result *r, void *ud);

/* Start a request. messages: [{"role": "system"|"user"|"assistant",
 * "content": "..."}] (the system message is moved to Anthropic's "system"
 * field). Returns a request id > 0; done is always called exactly once
 * (possibly before llm_submit returns, for a cache hit or a bad request). */
long llm_submit(llm_client *cl, const cJSON *messages, llm_delta_fn *delta, llm_done_fn *done,
                void *ud);
/* Cancel; done is called with error "cancelled". */
void llm_cancel(llm_client *cl, long id);
int llm_busy(const llm_client *cl);
/* Session totals. */
void llm_totals(const llm_client *cl, long *tokens_in, long *tokens_out, double *cost);

/* The cache key: hash of (api, endpoint, model, messages, max_tokens,
 * temperature), 16 hex digits. */
void llm_cache_key(const llm_config *c, const cJSON *messages, char out[17]);

/* SSE parsing, exposed for tests: feed bytes in arbitrary chunks; each
 * complete event's (event name, data) is passed to fn. */
typedef struct llm_sse llm_sse;
typedef void llm_sse_fn(const char *event, const char *data, void *ud);
llm_sse *llm_sse_new(llm_sse_fn *fn, void *ud);
void llm_sse_feed(llm_sse *s, const char *bytes, size_t len);
void llm_sse_free(llm_sse *s);

#endif /* DITTO_LLM_H */
