/* llm_config.c -- the LLM client's configuration: defaults and the JSON
 * form, with every problem reported by its path. */
#include "agents/llm.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void llm_config_init(llm_config *c)
{
    memset(c, 0, sizeof *c);
    c->api = LLM_OPENAI;
    c->connect_timeout_s = 10;
    c->stall_timeout_s = 60;
    c->max_retries = 4;
    c->backoff_base_s = 1;
    c->backoff_max_s = 30;
    c->max_tokens = 4096;
    c->temperature = 0.2;
    c->max_answer_bytes = (size_t)1 << 20;
    c->request_timeout_s = 600;
}

void llm_config_clear(llm_config *c)
{
    free(c->endpoint);
    free(c->model);
    free(c->api_key_env);
    free(c->cache_dir);
    llm_config_init(c);
}

static void problem(dt_buf *p, const char *fmt, ...) DT_PRINTF(2, 3);

static void problem(dt_buf *p, const char *fmt, ...)
{
    if (p == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(p, fmt, ap);
    va_end(ap);
    dt_buf_putc(p, '\n');
}

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "invalid";
}

/* Report keys of obj that are not in keys[]; path is "$" or "$.price". */
static int unknown_keys(const cJSON *obj, const char *path, const char *const *keys, size_t n,
                        const char *list, dt_buf *p)
{
    int bad = 0;
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        int known = 0;
        for (size_t i = 0; i < n; i++)
            known |= dt_streq(it->string, keys[i]);
        if (!known) {
            problem(p, "%s.%s: unknown key (keys: %s)", path, it->string, list);
            bad = 1;
        }
    }
    return bad;
}

/* A number in [lo, hi] (an integer when integral); absent leaves *out. */
static int num_field(const cJSON *obj, const char *key, const char *path, double lo, double hi,
                     int integral, double *out, dt_buf *p)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (v == NULL)
        return 0;
    double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!cJSON_IsNumber(v) || !isfinite(x) || x < lo || x > hi || (integral && x != floor(x))) {
        if (cJSON_IsNumber(v))
            problem(p, "%s.%s: expected %s from %g to %g, got %g", path, key,
                    integral ? "an integer" : "a number", lo, hi, x);
        else
            problem(p, "%s.%s: expected %s from %g to %g, got %s", path, key,
                    integral ? "an integer" : "a number", lo, hi, type_name(v));
        return 1;
    }
    *out = x;
    return 0;
}

/* A string; with allow_empty "" and null are accepted (null gives ""). */
static int str_field(const cJSON *obj, const char *key, int allow_empty, char **out, dt_buf *p)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (v == NULL)
        return 0;
    if (allow_empty && cJSON_IsNull(v)) {
        free(*out);
        *out = dt_xstrdup("");
        return 0;
    }
    if (!cJSON_IsString(v) || (!allow_empty && v->valuestring[0] == '\0')) {
        problem(p, "$.%s: expected a non-empty string%s, got %s", key,
                allow_empty ? " or \"\"" : "", cJSON_IsString(v) ? "\"\"" : type_name(v));
        return 1;
    }
    free(*out);
    *out = dt_xstrdup(v->valuestring);
    return 0;
}

/* An optional sub-object of numbers {a: x, b: y}, each > 0 (or >= 0). */
static int sub_numbers(const cJSON *j, const char *key, const char *const names[2], double *outs[2],
                       double lo, double hi, dt_buf *p)
{
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, key);
    if (o == NULL)
        return 0;
    char path[64];
    snprintf(path, sizeof path, "$.%s", key);
    if (!cJSON_IsObject(o)) {
        problem(p, "%s: expected an object {\"%s\": x, \"%s\": y}, got %s", path, names[0],
                names[1], type_name(o));
        return 1;
    }
    char list[64];
    snprintf(list, sizeof list, "%s, %s", names[0], names[1]);
    int bad = unknown_keys(o, path, names, 2, list, p);
    for (int i = 0; i < 2; i++)
        bad |= num_field(o, names[i], path, lo, hi, 0, outs[i], p);
    return bad;
}

int llm_config_from_json(llm_config *c, const cJSON *j, dt_buf *problems)
{
    static const char *const keys[] = {"api",        "endpoint",    "model",    "api_key_env",
                                       "price",      "timeouts",    "backoff",  "max_retries",
                                       "max_tokens", "temperature", "cache_dir",
                                       "max_answer_bytes", "request_timeout_s"};
    if (!cJSON_IsObject(j)) {
        problem(problems, "$: expected an object, got %s", type_name(j));
        return -1;
    }
    int bad = unknown_keys(j, "$", keys, DT_ARRAY_LEN(keys),
                           "api, endpoint, model, api_key_env, price, timeouts, backoff, "
                           "max_retries, max_tokens, temperature, cache_dir, max_answer_bytes, "
                           "request_timeout_s",
                           problems);
    const cJSON *api = cJSON_GetObjectItemCaseSensitive(j, "api");
    if (api != NULL) {
        if (cJSON_IsString(api) && strcmp(api->valuestring, "openai") == 0) {
            c->api = LLM_OPENAI;
        } else if (cJSON_IsString(api) && strcmp(api->valuestring, "anthropic") == 0) {
            c->api = LLM_ANTHROPIC;
        } else {
            if (cJSON_IsString(api))
                problem(problems, "$.api: expected one of openai, anthropic, got \"%s\"",
                        api->valuestring);
            else
                problem(problems, "$.api: expected one of openai, anthropic, got %s",
                        type_name(api));
            bad = 1;
        }
    }
    const cJSON *ep = cJSON_GetObjectItemCaseSensitive(j, "endpoint");
    if (ep != NULL) {
        if (cJSON_IsString(ep) && (dt_startswith(ep->valuestring, "http://") ||
                                   dt_startswith(ep->valuestring, "https://"))) {
            free(c->endpoint);
            c->endpoint = dt_xstrdup(ep->valuestring);
        } else {
            if (cJSON_IsString(ep))
                problem(problems, "$.endpoint: expected an http:// or https:// URL, got \"%s\"",
                        ep->valuestring);
            else
                problem(problems, "$.endpoint: expected an http:// or https:// URL, got %s",
                        type_name(ep));
            bad = 1;
        }
    } else if (c->endpoint == NULL) {
        c->endpoint = dt_xstrdup(c->api == LLM_ANTHROPIC ? "https://api.anthropic.com/v1"
                                                         : "https://api.openai.com/v1");
        /* The vendor's own endpoint: its usual variable holds its key. */
        if (cJSON_GetObjectItemCaseSensitive(j, "api_key_env") == NULL && c->api_key_env == NULL)
            c->api_key_env =
                dt_xstrdup(c->api == LLM_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    }
    if (cJSON_GetObjectItemCaseSensitive(j, "model") == NULL && c->model == NULL) {
        problem(problems, "$.model: missing (the model name the endpoint serves)");
        bad = 1;
    }
    bad |= str_field(j, "model", 0, &c->model, problems);
    bad |= str_field(j, "api_key_env", 1, &c->api_key_env, problems);
    bad |= str_field(j, "cache_dir", 1, &c->cache_dir, problems);

    static const char *const price[2] = {"input", "output"};
    double *price_out[2] = {&c->price_in, &c->price_out};
    bad |= sub_numbers(j, "price", price, price_out, 0, 1e6, problems);
    static const char *const timeouts[2] = {"connect", "stall"};
    double *timeouts_out[2] = {&c->connect_timeout_s, &c->stall_timeout_s};
    bad |= sub_numbers(j, "timeouts", timeouts, timeouts_out, 0.001, 86400, problems);
    static const char *const backoff[2] = {"base", "max"};
    double *backoff_out[2] = {&c->backoff_base_s, &c->backoff_max_s};
    bad |= sub_numbers(j, "backoff", backoff, backoff_out, 0, 86400, problems);

    double x = c->max_retries;
    bad |= num_field(j, "max_retries", "$", 0, 100, 1, &x, problems);
    c->max_retries = (int)x;
    x = c->max_tokens;
    bad |= num_field(j, "max_tokens", "$", 1, 10000000, 1, &x, problems);
    c->max_tokens = (int)x;
    bad |= num_field(j, "temperature", "$", 0, 2, 0, &c->temperature, problems);
    x = (double)c->max_answer_bytes;
    bad |= num_field(j, "max_answer_bytes", "$", 1024, 256.0 * 1024 * 1024, 1, &x, problems);
    c->max_answer_bytes = (size_t)x;
    bad |= num_field(j, "request_timeout_s", "$", 1, 86400, 0, &c->request_timeout_s, problems);
    if (c->backoff_max_s < c->backoff_base_s) {
        problem(problems, "$.backoff.max: %g is less than $.backoff.base %g", c->backoff_max_s,
                c->backoff_base_s);
        bad = 1;
    }
    return bad ? -1 : 0;
}
