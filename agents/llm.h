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
 * handed to callbacks are borrowed for the call.
 *
 * Re-entrancy: delta and done callbacks may call llm_submit, llm_cancel and
 * llm_free on the same client; the client defers what libcurl forbids inside
 * its own callbacks (removing or adding transfers) until it is back in the
 * loop, so a cancel from a delta callback delivers no further delta and
 * calls done before the loop's next poll.
 *
 * Retries: 429 (rate limit), 500, 502, 503, 504, 529 (overloaded),
 * connection failures, connect timeouts, stalls, a stream that ends early
 * and an overloaded / rate-limit error event inside the stream are retried,
 * up to max_retries times, waiting Retry-After when the server sends it
 * (a wait longer than backoff_max_s ends the request instead), otherwise
 * backoff_base_s doubled per retry, capped at backoff_max_s, with jitter
 * (each wait is between half and all of that). Never retried: 401/403
 * ("auth"), a spend-limit or quota answer ("spend_limit"), 400 and other
 * 4xx ("bad_request"), an answer that is not the promised protocol
 * ("protocol"). A request that has delivered any delta is never retried,
 * because a restart would repeat text the caller already has: it fails
 * with the error of the failed attempt, and the message says that the
 * output is partial. */
#ifndef DITTO_LLM_H
#define DITTO_LLM_H

#include "core/core.h"

typedef enum { LLM_OPENAI, LLM_ANTHROPIC } llm_api;

typedef struct llm_config {
    llm_api api;
    char *endpoint; /* base URL: "https://api.openai.com/v1",
                       "http://localhost:11434/v1", "https://api.anthropic.com/v1" */
    char *model;
    char *api_key_env;        /* e.g. "OPENAI_API_KEY"; NULL or "" for none (Ollama) */
    double price_in;          /* USD per million input tokens (0: unknown) */
    double price_out;         /* USD per million output tokens */
    double connect_timeout_s; /* default 10 */
    double stall_timeout_s;   /* no byte for this long ends the attempt; default 60 */
    int max_retries;          /* on 429 / 5xx / 529 / connection errors; default 4 */
    double backoff_base_s;    /* first backoff; doubled each retry, with jitter; default 1 */
    double backoff_max_s;     /* longest wait between attempts; default 30 */
    int max_tokens;           /* default 4096 */
    double temperature;       /* default 0.2 */
    char *cache_dir;          /* NULL: $XDG_CACHE_HOME/ditto/llm; "" disables */
    size_t max_answer_bytes;  /* an answer growing past this ends the request ("too_large");
                                 default 1 MiB */
    double request_timeout_s; /* the whole request, retries and waits included, ends
                                 ("timeout") after this; default 600 */
} llm_config;

/* Defaults for everything (api openai, endpoint/model/api_key_env/cache_dir
 * NULL). This function can't fail. */
void llm_config_init(llm_config *c);
/* Free the strings and reset c to the defaults. */
void llm_config_clear(llm_config *c);
/* Fill c (initialised by llm_config_init) from a JSON object:
 *   {"api": "openai"|"anthropic", "endpoint": URL, "model": name,
 *    "api_key_env": NAME|""|null, "price": {"input": x, "output": y},
 *    "timeouts": {"connect": s, "stall": s}, "backoff": {"base": s, "max": s},
 *    "max_retries": n, "max_tokens": n, "temperature": t, "cache_dir": path|"",
 *    "max_answer_bytes": n, "request_timeout_s": s}
 * "model" is required. Without "endpoint" the vendor's URL is used and,
 * only then, "api_key_env" defaults to OPENAI_API_KEY / ANTHROPIC_API_KEY:
 * a key is never sent to an endpoint the user named unless the user also
 * named the variable. Unknown keys are problems. Every problem is appended
 * to problems as "$.key: what is wrong\n". Returns 0, or -1 when there was
 * a problem (c then holds the valid fields only; clear it either way). */
int llm_config_from_json(llm_config *c, const cJSON *j, dt_buf *problems);

typedef struct llm_client llm_client;

/* The config is copied. On error (no endpoint or model, a URL that is not
 * http(s), a negative timeout) returns NULL with e set. */
llm_client *llm_new(dt_loop *loop, const llm_config *c, dt_err *e);
/* Cancels every request (done gets "cancelled"), releases curl's sockets
 * and timers from the loop. Free of NULL is a no-op. Safe inside this
 * client's callbacks: the memory is released when the callback returns. */
void llm_free(llm_client *cl);

/* The result of one request. */
typedef struct llm_result {
    int ok;
    const char *text;           /* the whole answer ("" when none; on failure the
                                   partial text that was delivered) */
    const char *error;          /* NULL when ok, else one of:
                                   "rate_limited" 429 still after the retries,
                                   "auth"         401/403, or the key variable unset,
                                   "spend_limit"  quota or billing limit reached,
                                   "server"       5xx / 529 / an error event,
                                   "timeout"      no connection within connect_timeout_s,
                                                  or no whole answer within request_timeout_s,
                                   "too_large"    the answer passed max_answer_bytes,
                                   "stalled"      no byte for stall_timeout_s,
                                   "connect"      refused, unresolvable, reset,
                                   "protocol"     not JSON, not SSE, ended early,
                                   "bad_request"  400 / other 4xx, or bad messages,
                                   "cancelled"    llm_cancel or llm_free */
    const char *message;        /* one line for people (no secrets) */
    int http_status;            /* last HTTP status, 0 when none */
    long tokens_in, tokens_out; /* as the server reported, summed over attempts */
    double cost;                /* USD from the price table (0 when unknown or cached) */
    int attempts;               /* 1 + retries (0 for a cache hit or a refused request) */
    int cached;                 /* served from the response cache */
    const char *finish_reason;  /* "stop", "length", "end_turn", ... or NULL */
} llm_result;

typedef void llm_delta_fn(const char *text, size_t len, void *ud);
typedef void llm_done_fn(const llm_result *r, void *ud);

/* Called when a failed attempt will be retried: which attempt failed, how
 * long until the next (ms), the error class and a message (no secrets). */
typedef void llm_retry_fn(int attempt, long wait_ms, const char *error, const char *message,
                          void *ud);
/* Set (or, fn NULL, clear) the client's retry hook. This function can't fail. */
void llm_set_retry_hook(llm_client *cl, llm_retry_fn *fn, void *ud);

/* Start a request. messages: [{"role": "system"|"user"|"assistant",
 * "content": "..."}] (the system message is moved to Anthropic's "system"
 * field). Returns a request id > 0; done is always called exactly once
 * (possibly before llm_submit returns, for a cache hit or a bad request).
 * delta may be NULL. A cache hit delivers the whole text as one delta, then
 * done with cached = 1, cost 0, and adds nothing to the session totals. */
long llm_submit(llm_client *cl, const cJSON *messages, llm_delta_fn *delta, llm_done_fn *done,
                void *ud);
/* The same with a structured-output request: format is OpenAI's
 * response_format ({"type": "json_schema", "json_schema": {"name": ...,
 * "schema": {...}}}; llama.cpp's server, vLLM and OpenAI accept it), sent as
 * given to an OpenAI-compatible endpoint and left out for Anthropic's; it is
 * part of the cache key. NULL: llm_submit. An endpoint that refuses it
 * answers "bad_request": the caller may ask again without it. */
long llm_submit_format(llm_client *cl, const cJSON *messages, const cJSON *format,
                       llm_delta_fn *delta, llm_done_fn *done, void *ud);
/* Cancel; done is called with error "cancelled" (at once, or -- inside a
 * delta callback -- before the loop's next poll). An unknown or finished id
 * is ignored. */
void llm_cancel(llm_client *cl, long id);
/* Number of requests not yet done (streaming or waiting to retry). */
int llm_busy(const llm_client *cl);
/* Session totals: every attempt's reported usage, cache hits excluded. */
void llm_totals(const llm_client *cl, long *tokens_in, long *tokens_out, double *cost);

/* The cache key: hash of (api, endpoint, model, messages, max_tokens,
 * temperature), 16 hex digits. The API key plays no part. */
void llm_cache_key(const llm_config *c, const cJSON *messages, char out[17]);

/* SSE parsing, exposed for tests: feed bytes in arbitrary chunks; each
 * complete event's (event name, data) is passed to fn. Lines end at \n (a
 * \r before it is dropped); a blank line ends an event; lines starting with
 * ':' are comments; one space after "field:" is stripped; several data
 * lines are joined with \n; an event without data is not dispatched; the
 * name is "message" when the event had no "event:" line. */
typedef struct llm_sse llm_sse;
typedef void llm_sse_fn(const char *event, const char *data, void *ud);
llm_sse *llm_sse_new(llm_sse_fn *fn, void *ud);
/* Returns 0, or -1 once a line or an event's data has grown past 8 MiB:
 * the parser then drops everything fed to it (the stream is broken). */
int llm_sse_feed(llm_sse *s, const char *bytes, size_t len);
/* Nonzero when a partial line or an undispatched event is buffered: the
 * stream ended mid-event. */
int llm_sse_pending(const llm_sse *s);
void llm_sse_free(llm_sse *s);

#endif /* DITTO_LLM_H */
