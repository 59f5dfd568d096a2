/* llm.c -- the LLM client: OpenAI / Anthropic streaming over libcurl multi,
 * driven by dt_loop, with retries, stall detection, usage, cost and a cache.
 * Over 1,000 lines: two providers' wire formats over one streaming client. */
#include "agents/llm.h"

#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* An error body is for a one-line message; a plain JSON answer (a server
 * that ignored "stream") can be longer but not unbounded. */
#define BODY_MAX (4u << 20)
#define MSG_MAX  300

typedef struct llm_req llm_req;

struct llm_req {
    llm_client *cl;
    long id;
    llm_req *next;
    llm_delta_fn *delta;
    llm_done_fn *done;
    void *ud;
    char key[17]; /* cache key, "" when the cache is off */
    char *secret; /* the API key, only to scrub messages; wiped on free */
    CURL *easy;
    struct curl_slist *headers;
    char curl_err[CURL_ERROR_SIZE];
    int in_multi;            /* easy is added to the multi handle */
    int cancel_pending;      /* cancelled where curl forbids removal; service finishes it */
    int start_pending;       /* submitted inside a curl callback; service starts it */
    long long backoff_timer; /* waiting to retry, 0 when not */
    long long stall_timer;   /* 0 when no attempt runs */
    long long request_timer; /* the whole request's deadline; 0 when none */
    double last_byte;        /* dt_now() of the last byte (or the attempt's start) */
    int attempts;
    /* this attempt */
    llm_sse *sse;
    long status;      /* HTTP status, 0 before the first body byte */
    int got_body;     /* a body byte arrived */
    int is_stream;    /* the body is parsed as SSE (else buffered in body) */
    dt_buf body;      /* error body or a non-streamed answer */
    int stream_done;  /* [DONE] / message_stop seen */
    const char *fail; /* an error decided inside a callback; aborts the transfer */
    char *fail_msg;
    int fail_retry;       /* that error is transient */
    long retry_after_ms;  /* from a retry-after-ms header, -1 when none */
    long att_in, att_out; /* usage reported in this attempt */
    char *finish_reason;
    /* the whole request */
    long tokens_in, tokens_out;
    long last_status;
    dt_buf text;   /* every delta delivered */
    int delivered; /* a delta went to the caller: no more retries */
};

struct llm_client {
    dt_loop *loop;
    llm_config c;    /* deep copy */
    char *cache_dir; /* resolved; NULL when the cache is off */
    CURLM *multi;
    long long curl_timer; /* the timeout curl asked for, 0 when none */
    int *fds;             /* sockets watched for curl, so none outlives the client */
    int nfds, capfds;
    llm_req *reqs; /* running or waiting to retry, in submit order */
    long next_id;
    long tokens_in, tokens_out;
    double cost;
    dt_rng rng;  /* backoff jitter */
    llm_retry_fn *on_retry; /* told of each retry, or NULL */
    void *on_retry_ud;
    int defer;   /* inside curl (or a delivery): add/remove must wait */
    int depth;   /* nested entries from the loop or the caller */
    int closing; /* llm_free was called; destroyed when depth drops to 0 */
};

static void service(llm_client *cl);
static void start_attempt(llm_req *req);

/* ---- small helpers -------------------------------------------------------- */

static void config_copy(llm_config *dst, const llm_config *src)
{
    *dst = *src;
    dst->endpoint = src->endpoint ? dt_xstrdup(src->endpoint) : NULL;
    dst->model = src->model ? dt_xstrdup(src->model) : NULL;
    dst->api_key_env = src->api_key_env ? dt_xstrdup(src->api_key_env) : NULL;
    dst->cache_dir = src->cache_dir ? dt_xstrdup(src->cache_dir) : NULL;
}

static const char *api_name(llm_api api)
{
    return api == LLM_ANTHROPIC ? "anthropic" : "openai";
}

void llm_cache_key(const llm_config *c, const cJSON *messages, char out[17])
{
    uint64_t h = dt_hash_str("ditto-llm-cache-1", DT_HASH_SEED);
    const char *parts[3] = {api_name(c->api), c->endpoint ? c->endpoint : "",
                            c->model ? c->model : ""};
    for (int i = 0; i < 3; i++) {
        h = dt_hash_str(parts[i], h);
        h = dt_hash64("", 1, h); /* a separator, so that ("ab","c") != ("a","bc") */
    }
    char *m = messages ? cJSON_PrintUnformatted(messages) : NULL;
    h = dt_hash_str(m ? m : "null", h);
    free(m);
    char tail[64];
    snprintf(tail, sizeof tail, "|%d|%.17g", c->max_tokens, c->temperature);
    h = dt_hash_str(tail, h);
    dt_hash_hex(h, out);
}

/* s with every occurrence of secret replaced, cut to one line of at most
 * MSG_MAX bytes. Caller frees. */
static char *clean_message(const char *s, const char *secret)
{
    dt_buf b = DT_BUF_INIT;
    size_t klen = secret ? strlen(secret) : 0;
    while (*s) {
        if (klen > 0 && strncmp(s, secret, klen) == 0) {
            dt_buf_puts(&b, "[key]");
            s += klen;
            continue;
        }
        char ch = *s++;
        if (ch == '\n' || ch == '\r' || ch == '\t')
            ch = ' ';
        dt_buf_putc(&b, ch);
    }
    /* Scrub before cutting: a cut through the key would leave a prefix that
     * no longer matches it. */
    if (b.len > MSG_MAX) {
        b.len = MSG_MAX;
        b.data[b.len] = '\0';
        dt_buf_puts(&b, "...");
    }
    return dt_buf_take(&b);
}

static double cost_of(const llm_config *c, long in, long out)
{
    return ((double)in * c->price_in + (double)out * c->price_out) / 1e6;
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = s ? dt_xstrdup(s) : NULL;
}

static void wipe_free(char *s)
{
    if (s == NULL)
        return;
    volatile char *v = s;
    while (*v)
        *v++ = '\0';
    free(s);
}

/* ---- the response cache --------------------------------------------------- */

static char *cache_path(const llm_client *cl, const char *key)
{
    return dt_xasprintf("%s/%s.json", cl->cache_dir, key);
}

/* A hit fills text (caller frees), usage and finish reason (caller frees).
 * A missing, unreadable or corrupt file is a miss. */
static int cache_load(const llm_client *cl, const char *key, char **text, long *in, long *out,
                      char **finish)
{
    char *path = cache_path(cl, key);
    cJSON *j = NULL;
    size_t len = 0;
    char *data = dt_file_exists(path) ? dt_read_file(path, &len, NULL) : NULL;
    if (data != NULL)
        j = cJSON_ParseWithLength(data, len);
    free(data);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "text");
    int hit = cJSON_IsObject(j) && dt_json_num(j, "version", 0) == 1 && cJSON_IsString(t);
    if (hit) {
        *text = dt_xstrdup(t->valuestring);
        *in = dt_json_i64(j, "tokens_in", 0);
        *out = dt_json_i64(j, "tokens_out", 0);
        const char *f = dt_json_str(j, "finish_reason", NULL);
        *finish = f ? dt_xstrdup(f) : NULL;
    } else if (j != NULL || data != NULL) {
        dt_debug("llm: cache: ignoring %s (not a cache entry)", path);
    }
    cJSON_Delete(j);
    free(path);
    return hit;
}

static void cache_store(const llm_client *cl, const llm_req *req)
{
    /* An answer that repeats the key (the prompt carried it) is not worth a
     * secret on disk. */
    if (req->secret && req->secret[0] && strstr(dt_buf_str(&req->text), req->secret))
        return;
    dt_err e = {0};
    if (dt_mkdir_p(cl->cache_dir, &e) != 0) {
        dt_debug("llm: cache: %s", e.msg);
        return;
    }
    cJSON *j = dt_json_obj();
    dt_json_set_int(j, "version", 1);
    dt_json_set_str(j, "api", api_name(cl->c.api));
    dt_json_set_str(j, "model", cl->c.model);
    dt_json_set_str(j, "text", dt_buf_str(&req->text));
    dt_json_set_int(j, "tokens_in", req->tokens_in);
    dt_json_set_int(j, "tokens_out", req->tokens_out);
    if (req->finish_reason)
        dt_json_set_str(j, "finish_reason", req->finish_reason);
    char when[32];
    dt_json_set_str(j, "created", dt_iso_time(dt_wall_now(), when, sizeof when));
    char *s = dt_json_print(j, 1);
    char *path = cache_path(cl, req->key);
    if (dt_write_file_atomic(path, s, strlen(s), &e) != 0)
        dt_debug("llm: cache: %s", e.msg);
    free(path);
    free(s);
    cJSON_Delete(j);
}

/* ---- request lifetime ----------------------------------------------------- */

static void enter(llm_client *cl)
{
    cl->depth++;
}

static void destroy(llm_client *cl)
{
    /* Every request was finished by the cancellation in llm_free. */
    curl_multi_cleanup(cl->multi);
    /* curl closes its cached connections without a REMOVE callback: the
     * loop must not poll their (closed, soon reused) descriptors. */
    for (int i = 0; i < cl->nfds; i++)
        dt_loop_del_fd(cl->loop, cl->fds[i], 0);
    free(cl->fds);
    if (cl->curl_timer)
        dt_loop_del_timer(cl->loop, cl->curl_timer);
    llm_config_clear(&cl->c);
    free(cl->cache_dir);
    free(cl);
    curl_global_cleanup();
}

/* Returns 1 when the client was destroyed: the caller must not touch it. */
static int leave(llm_client *cl)
{
    if (--cl->depth == 0 && cl->closing) {
        destroy(cl);
        return 1;
    }
    return 0;
}

static void unlink_req(llm_req *req)
{
    for (llm_req **pp = &req->cl->reqs; *pp; pp = &(*pp)->next) {
        if (*pp == req) {
            *pp = req->next;
            break;
        }
    }
    req->next = NULL;
}

static llm_req *find_req(const llm_client *cl, long id)
{
    for (llm_req *r = cl->reqs; r; r = r->next)
        if (r->id == id)
            return r;
    return NULL;
}

static void reset_attempt(llm_req *req)
{
    llm_sse_free(req->sse);
    req->sse = NULL;
    req->status = 0;
    req->got_body = 0;
    req->is_stream = 0;
    dt_buf_reset(&req->body);
    req->stream_done = 0;
    req->fail = NULL;
    free(req->fail_msg);
    req->fail_msg = NULL;
    req->fail_retry = 0;
    req->retry_after_ms = -1;
    req->att_in = req->att_out = 0;
    free(req->finish_reason);
    req->finish_reason = NULL;
    req->curl_err[0] = '\0';
}

/* Take the transfer out of curl and count what it reported. Never inside a
 * curl callback (the caller checks cl->defer). */
static void end_attempt(llm_req *req)
{
    llm_client *cl = req->cl;
    if (req->in_multi) {
        curl_multi_remove_handle(cl->multi, req->easy);
        req->in_multi = 0;
    }
    if (req->stall_timer) {
        dt_loop_del_timer(cl->loop, req->stall_timer);
        req->stall_timer = 0;
    }
    req->tokens_in += req->att_in;
    req->tokens_out += req->att_out;
    req->att_in = req->att_out = 0;
    if (req->status > 0)
        req->last_status = req->status;
}

static void free_req(llm_req *req)
{
    if (req->easy)
        curl_easy_cleanup(req->easy);
    if (req->headers) {
        /* The header strings hold the key. */
        for (struct curl_slist *h = req->headers; h; h = h->next) {
            volatile char *v = h->data;
            while (*v)
                *v++ = '\0';
        }
        curl_slist_free_all(req->headers);
    }
    wipe_free(req->secret);
    llm_sse_free(req->sse);
    dt_buf_free(&req->body);
    dt_buf_free(&req->text);
    free(req->fail_msg);
    free(req->finish_reason);
    free(req);
}

/* Call done once and release req. error NULL is success. cached: a cache
 * hit (no cost, no totals). */
static void finish(llm_req *req, const char *error, const char *message, int cached)
{
    llm_client *cl = req->cl;
    unlink_req(req);
    end_attempt(req);
    if (req->backoff_timer) {
        dt_loop_del_timer(cl->loop, req->backoff_timer);
        req->backoff_timer = 0;
    }
    if (req->request_timer) {
        dt_loop_del_timer(cl->loop, req->request_timer);
        req->request_timer = 0;
    }
    char *msg = clean_message(message ? message : "", req->secret);
    llm_result r = {0};
    r.ok = error == NULL;
    r.text = dt_buf_str(&req->text);
    r.error = error;
    r.message = msg;
    r.http_status = (int)req->last_status;
    r.tokens_in = req->tokens_in;
    r.tokens_out = req->tokens_out;
    r.cost = cached ? 0 : cost_of(&cl->c, req->tokens_in, req->tokens_out);
    r.attempts = req->attempts;
    r.cached = cached;
    r.finish_reason = req->finish_reason;
    if (!cached) {
        cl->tokens_in += req->tokens_in;
        cl->tokens_out += req->tokens_out;
        cl->cost += r.cost;
    }
    if (r.ok && !cached && req->key[0] && cl->cache_dir)
        cache_store(cl, req);
    if (error)
        dt_debug("llm: request %ld: %s: %s", req->id, error, msg);
    req->done(&r, req->ud);
    free(msg);
    free_req(req);
}

static void finish_cancelled(llm_req *req)
{
    finish(req, "cancelled", req->delivered ? "cancelled (partial output)" : "cancelled", 0);
}

static void set_fail(llm_req *req, const char *error, int retry, const char *fmt, ...)
    DT_PRINTF(4, 5);

static void deliver(llm_req *req, const char *s, size_t n)
{
    if (n == 0 || req->cancel_pending || req->fail)
        return;
    if (req->text.len + n > req->cl->c.max_answer_bytes) {
        /* A runaway answer would be sent back to the endpoint and kept in
         * the session: stop reading it (the transfer aborts). */
        set_fail(req, "too_large", 0, "the answer passed %zu bytes (llm.max_answer_bytes)",
                 req->cl->c.max_answer_bytes);
        return;
    }
    dt_buf_append(&req->text, s, n);
    req->delivered = 1;
    if (req->delta)
        req->delta(s, n, req->ud);
}

/* Record an error found inside a curl callback; the transfer is aborted by
 * the write callback and the error used when curl reports it done. */
static void set_fail(llm_req *req, const char *error, int retry, const char *fmt, ...)
{
    if (req->fail)
        return;
    dt_buf b = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    req->fail = error;
    req->fail_retry = retry;
    req->fail_msg = dt_buf_take(&b);
}

/* ---- retries -------------------------------------------------------------- */

static long backoff_cb(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    llm_req *req = ud;
    llm_client *cl = req->cl;
    req->backoff_timer = 0;
    enter(cl);
    start_attempt(req);
    leave(cl);
    return DT_LOOP_NOMORE;
}

/* The attempt ended with error (NULL: success). Retry it or finish. */
static void attempt_over(llm_req *req, const char *error, const char *message, int retry)
{
    llm_client *cl = req->cl;
    end_attempt(req);
    if (error == NULL) {
        finish(req, NULL, "ok", 0);
        return;
    }
    dt_buf m = DT_BUF_INIT;
    dt_buf_puts(&m, message);
    long wait_ms = -1;
    if (req->delivered) {
        /* A restart would repeat what the caller already has. */
        dt_buf_printf(&m, " (partial output of %zu bytes%s)", req->text.len,
                      retry ? ", not retried" : "");
        retry = 0;
    }
    if (retry && req->attempts > cl->c.max_retries)
        retry = 0;
    if (retry) {
        curl_off_t ra = 0;
        curl_easy_getinfo(req->easy, CURLINFO_RETRY_AFTER, &ra);
        if (req->retry_after_ms >= 0)
            wait_ms = req->retry_after_ms;
        else if (ra > 0)
            wait_ms = (long)ra * 1000;
        if (wait_ms > (long)(cl->c.backoff_max_s * 1000)) {
            dt_buf_printf(&m, " (the server asks to wait %.1f s, more than backoff max %g s)",
                          (double)wait_ms / 1000, cl->c.backoff_max_s);
            retry = 0;
        } else if (wait_ms < 0) {
            double d = cl->c.backoff_base_s * pow(2, req->attempts - 1);
            if (d > cl->c.backoff_max_s)
                d = cl->c.backoff_max_s;
            d *= 0.5 + 0.5 * dt_rng_uniform(&cl->rng);
            wait_ms = (long)(d * 1000);
        }
    }
    if (retry) {
        char *clean = clean_message(m.data, req->secret);
        dt_debug("llm: request %ld attempt %d: %s: %s; retrying in %.2f s", req->id, req->attempts,
                 error, clean, (double)wait_ms / 1000);
        if (cl->on_retry)
            cl->on_retry(req->attempts, wait_ms, error, clean, cl->on_retry_ud);
        free(clean);
        dt_buf_free(&m);
        req->backoff_timer = dt_loop_add_timer(cl->loop, wait_ms, backoff_cb, req);
        return;
    }
    if (req->attempts > 1)
        dt_buf_printf(&m, " (%d attempts)", req->attempts);
    finish(req, error, m.data, 0);
    dt_buf_free(&m);
}

/* ---- reading answers ------------------------------------------------------ */

/* The error object of a JSON error body or event: {"error": {"message",
 * "type", "code"}} (OpenAI), {"type": "error", "error": {...}} (Anthropic). */
static const cJSON *error_object(const cJSON *j)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    return cJSON_IsObject(e) ? e : NULL;
}

static int is_spend_limit(const cJSON *err)
{
    const char *type = dt_json_str(err, "type", "");
    const char *code = dt_json_str(err, "code", "");
    const char *msg = dt_json_str(err, "message", "");
    /* A rate limit says so, even when its text suggests adding a payment
     * method ("... Visit .../account/billing ..."): it passes. */
    if (strcmp(type, "rate_limit_error") == 0 || strcmp(code, "rate_limit_exceeded") == 0)
        return 0;
    if (strcmp(type, "insufficient_quota") == 0 || strcmp(code, "insufficient_quota") == 0 ||
        strcmp(type, "billing_error") == 0 || strcmp(code, "billing_hard_limit_reached") == 0)
        return 1;
    static const char *const words[] = {"credit balance", "exceeded your current quota",
                                        "spend limit", "usage limit"};
    for (size_t i = 0; i < DT_ARRAY_LEN(words); i++)
        if (strcasestr(msg, words[i]))
            return 1;
    return 0;
}

/* Classify an HTTP error answer. */
static void http_error(llm_req *req, long status)
{
    cJSON *j = cJSON_ParseWithLength(req->body.data ? req->body.data : "", req->body.len);
    const cJSON *err = error_object(j);
    dt_buf m = DT_BUF_INIT;
    dt_buf_printf(&m, "HTTP %ld", status);
    const char *smsg = err ? dt_json_str(err, "message", NULL) : NULL;
    if (smsg && *smsg)
        dt_buf_printf(&m, ": %s", smsg);
    else if (req->body.len > 0)
        dt_buf_printf(&m, ": %.200s", req->body.data);
    const char *error;
    int retry = 0;
    if (err && (status == 400 || status == 402 || status == 403 || status == 429) &&
        is_spend_limit(err)) {
        error = "spend_limit";
    } else if (status == 402) {
        error = "spend_limit";
    } else if (status == 401 || status == 403) {
        error = "auth";
    } else if (status == 429) {
        error = "rate_limited";
        retry = 1;
    } else if (status == 500 || status == 502 || status == 503 || status == 504 || status == 529) {
        error = "server";
        retry = 1;
    } else if (status >= 500) {
        error = "server";
    } else if (status >= 400) {
        error = "bad_request";
    } else {
        error = "protocol"; /* 1xx / 3xx: redirects are not followed */
    }
    cJSON_Delete(j);
    attempt_over(req, error, m.data, retry);
    dt_buf_free(&m);
}

/* A server that ignored "stream": one JSON answer. */
static void plain_answer(llm_req *req)
{
    llm_client *cl = req->cl;
    cJSON *j = cJSON_ParseWithLength(req->body.data ? req->body.data : "", req->body.len);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        attempt_over(req, "protocol", "the answer is neither an event stream nor JSON", 0);
        return;
    }
    dt_buf t = DT_BUF_INIT;
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    int found = 0;
    if (cl->c.api == LLM_OPENAI) {
        const cJSON *c0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(j, "choices"), 0);
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(c0, "message");
        const char *s = dt_json_str(msg, "content", NULL);
        found = s != NULL;
        dt_buf_puts(&t, s ? s : "");
        set_str(&req->finish_reason, dt_json_str(c0, "finish_reason", NULL));
        req->att_in = dt_json_i64(usage, "prompt_tokens", 0);
        req->att_out = dt_json_i64(usage, "completion_tokens", 0);
    } else {
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(j, "content");
        const cJSON *blk;
        cJSON_ArrayForEach(blk, content)
        {
            if (dt_streq(dt_json_str(blk, "type", ""), "text")) {
                dt_buf_puts(&t, dt_json_str(blk, "text", ""));
                found = 1;
            }
        }
        set_str(&req->finish_reason, dt_json_str(j, "stop_reason", NULL));
        req->att_in = dt_json_i64(usage, "input_tokens", 0);
        req->att_out = dt_json_i64(usage, "output_tokens", 0);
    }
    cJSON_Delete(j);
    if (!found) {
        dt_buf_free(&t);
        attempt_over(req, "protocol", "the JSON answer holds no text", 0);
        return;
    }
    /* A delta callback here may cancel or submit: let service do those. */
    cl->defer++;
    deliver(req, t.data ? t.data : "", t.len);
    cl->defer--;
    dt_buf_free(&t);
    if (req->cancel_pending)
        return; /* service finishes it as cancelled */
    if (req->fail) { /* too large */
        char *m = req->fail_msg;
        req->fail_msg = NULL;
        attempt_over(req, req->fail, m, 0);
        free(m);
        return;
    }
    attempt_over(req, NULL, NULL, 0);
}

/* An error object inside the stream: Anthropic's "error" event or an
 * OpenAI-compatible chunk {"error": {...}}. */
static void stream_error(llm_req *req, const cJSON *err)
{
    const char *type = dt_json_str(err, "type", "");
    const char *msg = dt_json_str(err, "message", "unknown error");
    if (strcmp(type, "overloaded_error") == 0 || strcmp(type, "api_error") == 0 ||
        strcmp(type, "server_error") == 0)
        set_fail(req, "server", 1, "error event %s: %s", type, msg);
    else if (strcmp(type, "rate_limit_error") == 0)
        set_fail(req, "rate_limited", 1, "error event %s: %s", type, msg);
    else
        set_fail(req, "server", 0, "error event %s: %s", type[0] ? type : "(no type)", msg);
}

static void openai_event(llm_req *req, const cJSON *j)
{
    const cJSON *err = error_object(j);
    if (err) {
        stream_error(req, err);
        return;
    }
    const cJSON *choices = cJSON_GetObjectItemCaseSensitive(j, "choices");
    const cJSON *c0 = cJSON_IsArray(choices) ? cJSON_GetArrayItem(choices, 0) : NULL;
    if (c0) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(c0, "delta");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(d, "content");
        if (cJSON_IsString(content))
            deliver(req, content->valuestring, strlen(content->valuestring));
        const char *fr = dt_json_str(c0, "finish_reason", NULL);
        if (fr)
            set_str(&req->finish_reason, fr);
    }
    const cJSON *usage = cJSON_GetObjectItemCaseSensitive(j, "usage");
    if (cJSON_IsObject(usage)) {
        req->att_in = dt_json_i64(usage, "prompt_tokens", req->att_in);
        req->att_out = dt_json_i64(usage, "completion_tokens", req->att_out);
    }
}

static void anthropic_event(llm_req *req, const char *event, const cJSON *j)
{
    const char *type = strcmp(event, "message") == 0 ? dt_json_str(j, "type", "") : event;
    if (strcmp(type, "message_start") == 0) {
        const cJSON *msg = cJSON_GetObjectItemCaseSensitive(j, "message");
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(msg, "usage");
        req->att_in = dt_json_i64(u, "input_tokens", 0);
        req->att_out = dt_json_i64(u, "output_tokens", 0);
    } else if (strcmp(type, "content_block_delta") == 0) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "delta");
        /* thinking and tool-input deltas are not the answer's text */
        if (dt_streq(dt_json_str(d, "type", ""), "text_delta")) {
            const char *s = dt_json_str(d, "text", "");
            deliver(req, s, strlen(s));
        }
    } else if (strcmp(type, "message_delta") == 0) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "delta");
        const char *sr = dt_json_str(d, "stop_reason", NULL);
        if (sr)
            set_str(&req->finish_reason, sr);
        const cJSON *u = cJSON_GetObjectItemCaseSensitive(j, "usage");
        /* output_tokens is cumulative: the last one is the total */
        req->att_out = dt_json_i64(u, "output_tokens", req->att_out);
        req->att_in = dt_json_i64(u, "input_tokens", req->att_in);
    } else if (strcmp(type, "message_stop") == 0) {
        req->stream_done = 1;
    } else if (strcmp(type, "error") == 0) {
        const cJSON *err = error_object(j);
        stream_error(req, err ? err : j);
    }
    /* ping, content_block_start/stop: nothing to do */
}

static void on_sse(const char *event, const char *data, void *ud)
{
    llm_req *req = ud;
    if (req->fail || req->cancel_pending || req->stream_done)
        return;
    if (req->cl->c.api == LLM_OPENAI && strcmp(data, "[DONE]") == 0) {
        req->stream_done = 1;
        return;
    }
    cJSON *j = cJSON_Parse(data);
    if (!cJSON_IsObject(j)) {
        set_fail(req, "protocol", 0, "a stream event is not JSON: %.80s", data);
    } else if (req->cl->c.api == LLM_OPENAI) {
        openai_event(req, j);
    } else {
        anthropic_event(req, event, j);
    }
    cJSON_Delete(j);
}

/* ---- curl callbacks ------------------------------------------------------- */

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
    llm_req *req = ud;
    size_t len = size * n;
    req->last_byte = dt_now();
    if (len >= 5 && strncmp(p, "HTTP/", 5) == 0)
        req->retry_after_ms = -1; /* a new response (after a 100 Continue) */
    else if (len > 15 && strncasecmp(p, "retry-after-ms:", 15) == 0)
        req->retry_after_ms = strtol(p + 15, NULL, 10);
    return len;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
    llm_req *req = ud;
    size_t len = size * n;
    req->last_byte = dt_now();
    if (req->fail || req->cancel_pending)
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    if (!req->got_body) {
        req->got_body = 1;
        curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &req->status);
        char *ct = NULL;
        curl_easy_getinfo(req->easy, CURLINFO_CONTENT_TYPE, &ct);
        /* Lenient: only an explicit JSON type is read as a plain answer, so
         * a proxy that relabels the stream does not break it. */
        req->is_stream = req->status >= 200 && req->status < 300 &&
                         !(ct && strncasecmp(ct, "application/json", 16) == 0);
        if (req->is_stream)
            req->sse = llm_sse_new(on_sse, req);
    }
    if (req->is_stream) {
        if (llm_sse_feed(req->sse, p, len) != 0)
            set_fail(req, "protocol", 0, "an event stream line longer than 8 MiB");
    } else if (req->body.len + len <= BODY_MAX) {
        dt_buf_append(&req->body, p, len);
    } else {
        set_fail(req, "protocol", 0, "an answer body longer than %u bytes", BODY_MAX);
    }
    if (req->fail || req->cancel_pending)
        return 0;
    return len;
}

/* Whether the attempt got past connecting. The pre-transfer time, unlike
 * the connect time, is also set on a reused connection. */
static int request_sent(llm_req *req)
{
    curl_off_t t = 0;
    curl_easy_getinfo(req->easy, CURLINFO_PRETRANSFER_TIME_T, &t);
    return t > 0 || req->got_body;
}

/* curl is done with an attempt: decide what it was. */
static void transfer_done(llm_req *req, CURLcode rc)
{
    llm_client *cl = req->cl;
    long status = 0;
    curl_easy_getinfo(req->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status > 0)
        req->status = status;
    if (req->fail) {
        char *m = req->fail_msg;
        req->fail_msg = NULL;
        attempt_over(req, req->fail, m, req->fail_retry);
        free(m);
        return;
    }
    const char *cerr = req->curl_err[0] ? req->curl_err : curl_easy_strerror(rc);
    char msg[CURL_ERROR_SIZE + 256];
    int broken = rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
                 rc == CURLE_SEND_ERROR;
    if (status >= 200 && status < 300 && (rc == CURLE_OK || broken)) {
        if (!req->got_body) {
            /* Headers and nothing else: as transient as a cut stream. */
            attempt_over(req, "protocol", "HTTP 2xx with an empty body", 1);
        } else if (!req->is_stream) {
            plain_answer(req);
        } else if (req->stream_done ||
                   (rc == CURLE_OK && req->finish_reason && !llm_sse_pending(req->sse))) {
            attempt_over(req, NULL, NULL, 0);
        } else {
            snprintf(msg, sizeof msg, "the event stream ended without its final event%s%s",
                     llm_sse_pending(req->sse) ? ", in the middle of an event" : "",
                     rc == CURLE_OK ? "" : " (connection closed)");
            attempt_over(req, "protocol", msg, 1);
        }
        return;
    }
    if (status >= 300 && rc != CURLE_OPERATION_TIMEDOUT) {
        http_error(req, status);
        return;
    }
    switch (rc) {
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
    case CURLE_COULDNT_CONNECT:
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
        snprintf(msg, sizeof msg, "%s", cerr);
        attempt_over(req, "connect", msg, 1);
        return;
    case CURLE_OPERATION_TIMEDOUT: {
        if (!request_sent(req)) {
            snprintf(msg, sizeof msg, "no connection within %g s: %s", cl->c.connect_timeout_s,
                     cerr);
            attempt_over(req, "timeout", msg, 1);
        } else {
            snprintf(msg, sizeof msg, "no data for %g s: %s", cl->c.stall_timeout_s, cerr);
            attempt_over(req, "stalled", msg, 1);
        }
        return;
    }
    default:
        /* TLS and other local failures: retrying would fail the same way. */
        snprintf(msg, sizeof msg, "%s", cerr);
        attempt_over(req, "connect", msg, 0);
        return;
    }
}

static long stall_cb(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    llm_req *req = ud;
    llm_client *cl = req->cl;
    double stall = cl->c.stall_timeout_s;
    double idle = dt_now() - req->last_byte;
    if (idle < stall)
        return (long)((stall - idle) * 1000) + 1;
    if (!request_sent(req)) {
        /* Connecting is CURLOPT_CONNECTTIMEOUT's to judge. */
        req->last_byte = dt_now();
        return (long)(stall * 1000);
    }
    req->stall_timer = 0;
    char msg[128];
    snprintf(msg, sizeof msg, "no data for %g s", stall);
    enter(cl);
    attempt_over(req, "stalled", msg, 1);
    leave(cl);
    return DT_LOOP_NOMORE;
}

/* The whole request ran past request_timeout_s: end it, whatever it is
 * doing (streaming a drip, waiting to retry). */
static long request_cb(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    llm_req *req = ud;
    llm_client *cl = req->cl;
    req->request_timer = 0;
    char msg[160];
    snprintf(msg, sizeof msg, "no whole answer within %g s (llm.request_timeout_s)",
             cl->c.request_timeout_s);
    enter(cl);
    attempt_over(req, "timeout", msg, 0);
    leave(cl);
    return DT_LOOP_NOMORE;
}

static void start_attempt(llm_req *req)
{
    llm_client *cl = req->cl;
    reset_attempt(req);
    req->attempts++;
    req->last_byte = dt_now();
    CURLMcode mc = curl_multi_add_handle(cl->multi, req->easy);
    if (mc != CURLM_OK) {
        finish(req, "connect", curl_multi_strerror(mc), 0);
        return;
    }
    req->in_multi = 1;
    req->stall_timer =
        dt_loop_add_timer(cl->loop, (long)(cl->c.stall_timeout_s * 1000), stall_cb, req);
}

/* Completions, then what callbacks left for later: cancellations and
 * submissions made where curl forbids them. Runs until nothing is left,
 * since each step calls back into the caller. */
static void service(llm_client *cl)
{
    for (;;) {
        int progressed = 0;
        CURLMsg *m;
        int left;
        while ((m = curl_multi_info_read(cl->multi, &left)) != NULL) {
            if (m->msg != CURLMSG_DONE)
                continue;
            char *p = NULL;
            curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &p);
            CURLcode rc = m->data.result;
            llm_req *req = (llm_req *)p;
            if (req->cancel_pending)
                finish_cancelled(req);
            else
                transfer_done(req, rc);
            progressed = 1;
        }
        for (llm_req *r = cl->reqs; r; r = r->next) {
            if (r->cancel_pending) {
                finish_cancelled(r);
                progressed = 1;
                break; /* the list changed: scan again */
            }
            if (r->start_pending) {
                r->start_pending = 0;
                start_attempt(r);
                progressed = 1;
                break;
            }
        }
        if (!progressed)
            return;
    }
}

static void drive(llm_client *cl, curl_socket_t s, int ev)
{
    int running = 0;
    enter(cl);
    cl->defer++;
    curl_multi_socket_action(cl->multi, s, ev, &running);
    cl->defer--;
    service(cl);
    leave(cl);
}

static void on_fd(dt_loop *l, int fd, int mask, void *ud)
{
    (void)l;
    drive(ud, fd, (mask & DT_READABLE) ? CURL_CSELECT_IN : CURL_CSELECT_OUT);
}

static int on_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)e;
    (void)socketp;
    llm_client *cl = userp;
    /* Replace whatever was watched: curl states the whole interest. */
    dt_loop_del_fd(cl->loop, s, 0);
    int known = -1;
    for (int i = 0; i < cl->nfds; i++)
        if (cl->fds[i] == s)
            known = i;
    if (what == CURL_POLL_REMOVE) {
        if (known >= 0)
            cl->fds[known] = cl->fds[--cl->nfds];
        return 0;
    }
    if (known < 0) {
        if (cl->nfds == cl->capfds) {
            cl->capfds = cl->capfds ? 2 * cl->capfds : 8;
            cl->fds = dt_xrealloc(cl->fds, (size_t)cl->capfds * sizeof *cl->fds);
        }
        cl->fds[cl->nfds++] = s;
    }
    int mask = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        mask |= DT_READABLE;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        mask |= DT_WRITABLE;
    if (mask)
        dt_loop_add_fd(cl->loop, s, mask, on_fd, cl);
    return 0;
}

static long on_loop_timer(dt_loop *l, long long id, void *ud)
{
    (void)l;
    llm_client *cl = ud;
    if (cl->curl_timer == id)
        cl->curl_timer = 0;
    drive(cl, CURL_SOCKET_TIMEOUT, 0);
    return DT_LOOP_NOMORE;
}

static int on_curl_timer(CURLM *m, long timeout_ms, void *userp)
{
    (void)m;
    llm_client *cl = userp;
    if (cl->curl_timer) {
        dt_loop_del_timer(cl->loop, cl->curl_timer);
        cl->curl_timer = 0;
    }
    if (timeout_ms >= 0)
        cl->curl_timer = dt_loop_add_timer(cl->loop, timeout_ms, on_loop_timer, cl);
    return 0;
}

/* ---- the public calls ----------------------------------------------------- */

void llm_set_retry_hook(llm_client *cl, llm_retry_fn *fn, void *ud)
{
    cl->on_retry = fn;
    cl->on_retry_ud = ud;
}

llm_client *llm_new(dt_loop *loop, const llm_config *c, dt_err *e)
{
    if (c->endpoint == NULL ||
        !(dt_startswith(c->endpoint, "http://") || dt_startswith(c->endpoint, "https://"))) {
        dt_err_set(e, "llm: endpoint: expected an http:// or https:// URL");
        return NULL;
    }
    if (c->model == NULL || c->model[0] == '\0') {
        dt_err_set(e, "llm: no model");
        return NULL;
    }
    if (!(c->connect_timeout_s > 0) || !(c->stall_timeout_s > 0) || !(c->request_timeout_s > 0) ||
        c->max_answer_bytes == 0 || c->max_retries < 0 ||
        !(c->backoff_base_s >= 0) || !(c->backoff_max_s >= 0) || c->max_tokens < 1) {
        dt_err_set(e, "llm: timeouts must be positive, retries, backoff and max_tokens in range");
        return NULL;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        dt_err_set(e, "llm: libcurl failed to initialise");
        return NULL;
    }
    llm_client *cl = dt_xcalloc(1, sizeof *cl);
    cl->loop = loop;
    config_copy(&cl->c, c);
    if (c->cache_dir == NULL) {
        char *base = dt_cache_dir();
        cl->cache_dir = base ? dt_xasprintf("%s/llm", base) : NULL;
        free(base);
    } else if (c->cache_dir[0] != '\0') {
        cl->cache_dir = dt_xstrdup(c->cache_dir);
    }
    cl->multi = curl_multi_init();
    if (cl->multi == NULL) {
        dt_err_set(e, "llm: libcurl failed to create a multi handle");
        llm_config_clear(&cl->c);
        free(cl->cache_dir);
        free(cl);
        curl_global_cleanup();
        return NULL;
    }
    curl_multi_setopt(cl->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(cl->multi, CURLMOPT_SOCKETDATA, cl);
    curl_multi_setopt(cl->multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(cl->multi, CURLMOPT_TIMERDATA, cl);
    dt_rng_seed(&cl->rng, (uint64_t)getpid() ^ (uint64_t)(dt_wall_now() * 1e6));
    return cl;
}

void llm_free(llm_client *cl)
{
    if (cl == NULL)
        return;
    enter(cl);
    cl->closing = 1;
    for (llm_req *r = cl->reqs; r; r = r->next)
        r->cancel_pending = 1;
    /* Inside curl the cancellations wait for service, after curl returns. */
    if (!cl->defer)
        service(cl);
    leave(cl);
}

int llm_busy(const llm_client *cl)
{
    int n = 0;
    for (const llm_req *r = cl->reqs; r; r = r->next)
        n++;
    return n;
}

void llm_totals(const llm_client *cl, long *tokens_in, long *tokens_out, double *cost)
{
    if (tokens_in)
        *tokens_in = cl->tokens_in;
    if (tokens_out)
        *tokens_out = cl->tokens_out;
    if (cost)
        *cost = cl->cost;
}

void llm_cancel(llm_client *cl, long id)
{
    llm_req *req = find_req(cl, id);
    if (req == NULL)
        return;
    if (cl->defer) {
        req->cancel_pending = 1;
        return;
    }
    enter(cl);
    finish_cancelled(req);
    leave(cl);
}

/* "" when messages are well formed, else what is wrong (static text). */
static const char *check_messages(const cJSON *messages, char *buf, size_t len, llm_api api)
{
    if (!cJSON_IsArray(messages) || cJSON_GetArraySize(messages) == 0)
        return "messages: expected a non-empty array";
    int i = 0, convo = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const char *role = dt_json_str(m, "role", NULL);
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || role == NULL ||
            !(strcmp(role, "system") == 0 || strcmp(role, "user") == 0 ||
              strcmp(role, "assistant") == 0)) {
            snprintf(buf, len, "messages[%d].role: expected system, user or assistant", i);
            return buf;
        }
        if (!cJSON_IsString(content)) {
            snprintf(buf, len, "messages[%d].content: expected a string", i);
            return buf;
        }
        convo += strcmp(role, "system") != 0;
        i++;
    }
    if (api == LLM_ANTHROPIC && convo == 0)
        return "messages: Anthropic needs a user message besides the system text";
    return "";
}

static char *request_body(const llm_config *c, const cJSON *messages, const cJSON *format)
{
    cJSON *b = dt_json_obj();
    dt_json_set_str(b, "model", c->model);
    cJSON *msgs = dt_json_arr();
    dt_buf sys = DT_BUF_INIT;
    const char *sep = ""; /* "\n\n" once a system text was seen */
    const cJSON *m;
    cJSON_ArrayForEach(m, messages)
    {
        const char *role = dt_json_str(m, "role", "");
        const char *content = dt_json_str(m, "content", "");
        if (c->api == LLM_ANTHROPIC && strcmp(role, "system") == 0) {
            /* Anthropic takes one system text beside the messages. */
            dt_buf_puts(&sys, sep);
            dt_buf_puts(&sys, content);
            sep = "\n\n";
            continue;
        }
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "role", role);
        dt_json_set_str(o, "content", content);
        cJSON_AddItemToArray(msgs, o);
    }
    if (sep[0] != '\0')
        dt_json_set_str(b, "system", dt_buf_str(&sys));
    dt_buf_free(&sys);
    dt_json_set_take(b, "messages", msgs);
    dt_json_set_int(b, "max_tokens", c->max_tokens);
    dt_json_set_num(b, "temperature", c->temperature);
    dt_json_set_bool(b, "stream", 1);
    if (c->api == LLM_OPENAI) {
        cJSON *so = dt_json_obj();
        dt_json_set_bool(so, "include_usage", 1);
        dt_json_set_take(b, "stream_options", so);
        if (format)
            dt_json_set_take(b, "response_format", cJSON_Duplicate(format, 1));
    }
    char *s = dt_json_print(b, 0);
    cJSON_Delete(b);
    return s;
}

/* The easy handle of a request; the key goes into a header only. */
static void setup_easy(llm_req *req, const cJSON *messages, const cJSON *format,
                       const char *secret)
{
    llm_client *cl = req->cl;
    const llm_config *c = &cl->c;
    size_t n = strlen(c->endpoint);
    while (n > 0 && c->endpoint[n - 1] == '/')
        n--;
    char *url = dt_xasprintf("%.*s/%s", (int)n, c->endpoint,
                             c->api == LLM_ANTHROPIC ? "messages" : "chat/completions");
    char *body = request_body(c, messages, format);
    struct curl_slist *h = NULL;
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Accept: text/event-stream");
    h = curl_slist_append(h, "Expect:"); /* no 100-continue round trip */
    if (c->api == LLM_ANTHROPIC)
        h = curl_slist_append(h, "anthropic-version: 2023-06-01");
    if (secret && secret[0]) {
        char *line = c->api == LLM_ANTHROPIC ? dt_xasprintf("x-api-key: %s", secret)
                                             : dt_xasprintf("Authorization: Bearer %s", secret);
        h = curl_slist_append(h, line);
        wipe_free(line);
    }
    req->headers = h;
    CURL *e = curl_easy_init();
    req->easy = e;
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, body);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(e, CURLOPT_USERAGENT, "ditto/" DT_VERSION);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, req);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, req);
    curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)req);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, req->curl_err);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)(c->connect_timeout_s * 1000));
    /* A backstop for the loop's own stall timer: curl averages speed over
     * several seconds, so it notices a stall later than stall_cb does. No
     * CURLOPT_TIMEOUT: a long answer is not a failure. */
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)ceil(c->stall_timeout_s));
    free(url);
    free(body);
}

long llm_submit(llm_client *cl, const cJSON *messages, llm_delta_fn *delta, llm_done_fn *done,
                void *ud)
{
    return llm_submit_format(cl, messages, NULL, delta, done, ud);
}

long llm_submit_format(llm_client *cl, const cJSON *messages, const cJSON *format,
                       llm_delta_fn *delta, llm_done_fn *done, void *ud)
{
    llm_req *req = dt_xcalloc(1, sizeof *req);
    req->cl = cl;
    req->id = ++cl->next_id;
    req->delta = delta;
    req->done = done;
    req->ud = ud;
    req->retry_after_ms = -1;
    long id = req->id;
    enter(cl);
    /* Until it is linked, nothing can cancel it: the early finishes below
     * run with the request out of reach of llm_cancel. */
    char buf[160];
    const char *bad = check_messages(messages, buf, sizeof buf, cl->c.api);
    if (cl->closing) {
        finish(req, "cancelled", "the client is being freed", 0);
        leave(cl);
        return id;
    }
    if (bad[0]) {
        finish(req, "bad_request", bad, 0);
        leave(cl);
        return id;
    }
    if (cl->cache_dir) {
        if (format) {
            /* the format is part of what was asked */
            cJSON *keyed = cJSON_Duplicate(messages, 1);
            cJSON_AddItemToArray(keyed, cJSON_Duplicate(format, 1));
            llm_cache_key(&cl->c, keyed, req->key);
            cJSON_Delete(keyed);
        } else {
            llm_cache_key(&cl->c, messages, req->key);
        }
        char *text = NULL, *fr = NULL;
        long in = 0, out = 0;
        if (cache_load(cl, req->key, &text, &in, &out, &fr)) {
            req->tokens_in = in;
            req->tokens_out = out;
            req->finish_reason = fr;
            cl->defer++; /* a cancel or submit from the delta waits for service */
            deliver(req, text, strlen(text));
            cl->defer--;
            free(text);
            finish(req, NULL, "from the cache", 1);
            if (!cl->defer)
                service(cl);
            leave(cl);
            return id;
        }
    }
    const char *env = cl->c.api_key_env;
    const char *secret = (env && env[0]) ? getenv(env) : NULL;
    if (env && env[0] && (secret == NULL || secret[0] == '\0')) {
        char m[256];
        snprintf(m, sizeof m, "the API key variable %s is not set", env);
        finish(req, "auth", m, 0);
        leave(cl);
        return id;
    }
    req->secret = secret ? dt_xstrdup(secret) : NULL;
    setup_easy(req, messages, format, secret);
    req->request_timer =
        dt_loop_add_timer(cl->loop, (long)(cl->c.request_timeout_s * 1000), request_cb, req);
    llm_req **pp = &cl->reqs;
    while (*pp)
        pp = &(*pp)->next;
    *pp = req;
    if (cl->defer)
        req->start_pending = 1;
    else
        start_attempt(req);
    leave(cl);
    return id;
}
