/* llm_config.c -- the LLM client's configuration: defaults and the JSON
 * form, with every problem reported by its path. */
#include "agents/llm.h"

#include "core/schema.h"

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

/* ---- config.json's "llm" object, as a core/schema table ----------------------- */

static int url_valid(const cJSON *v)
{
    return dt_startswith(v->valuestring, "http://") || dt_startswith(v->valuestring, "https://");
}

static const char *const api_names[] = {"openai", "anthropic", NULL};
static const dt_schema api_s = {.type = DT_SCHEMA_STR, .choices = api_names};
static const dt_schema endpoint_s = {
    .type = DT_SCHEMA_STR, .valid = url_valid, .what = "an http:// or https:// URL"};
static const dt_schema model_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = 256};
/* "" or null: none (api_key_env: no key; cache_dir: no cache) */
static const dt_schema maybe_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_NULL | DT_SCHEMA_ONELINE, .max_len = 4096};
static const dt_schema price_n = {.type = DT_SCHEMA_NUM, .min = 0, .max = 1e6};
static const dt_schema timeout_n = {.type = DT_SCHEMA_NUM, .min = 0.001, .max = 86400};
static const dt_schema backoff_n = {.type = DT_SCHEMA_NUM, .min = 0, .max = 86400};
static const dt_schema_field price_f[] = {
    {"input", &price_n, 0}, {"output", &price_n, 0}, {NULL, NULL, 0}};
static const dt_schema_field timeouts_f[] = {
    {"connect", &timeout_n, 0}, {"stall", &timeout_n, 0}, {NULL, NULL, 0}};
static const dt_schema_field backoff_f[] = {
    {"base", &backoff_n, 0}, {"max", &backoff_n, 0}, {NULL, NULL, 0}};
static const dt_schema price_s = {.type = DT_SCHEMA_OBJ, .fields = price_f};
static const dt_schema timeouts_s = {.type = DT_SCHEMA_OBJ, .fields = timeouts_f};
static const dt_schema backoff_s = {.type = DT_SCHEMA_OBJ, .fields = backoff_f};
static const dt_schema retries_s = {.type = DT_SCHEMA_INT, .min = 0, .max = 100};
static const dt_schema tokens_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 10000000};
static const dt_schema temperature_s = {.type = DT_SCHEMA_NUM, .min = 0, .max = 2};
static const dt_schema answer_s = {
    .type = DT_SCHEMA_INT, .min = 1024, .max = 256.0 * 1024 * 1024};
static const dt_schema request_timeout_s = {.type = DT_SCHEMA_NUM, .min = 1, .max = 86400};
static const dt_schema_field llm_fields[] = {
    {"api", &api_s, 0},
    {"endpoint", &endpoint_s, 0},
    {"model", &model_s, 0},
    {"api_key_env", &maybe_s, 0},
    {"price", &price_s, 0},
    {"timeouts", &timeouts_s, 0},
    {"backoff", &backoff_s, 0},
    {"max_retries", &retries_s, 0},
    {"max_tokens", &tokens_s, 0},
    {"temperature", &temperature_s, 0},
    {"cache_dir", &maybe_s, 0},
    {"max_answer_bytes", &answer_s, 0},
    {"request_timeout_s", &request_timeout_s, 0},
    {NULL, NULL, 0}};
static const dt_schema llm_s = {.type = DT_SCHEMA_OBJ, .fields = llm_fields};

static void set_str(const cJSON *j, const char *key, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (v == NULL)
        return;
    free(*out);
    *out = dt_xstrdup(cJSON_IsString(v) ? v->valuestring : ""); /* null: "" */
}

static void set_num(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (v != NULL)
        *out = v->valuedouble;
}

int llm_config_from_json(llm_config *c, const cJSON *j, dt_buf *problems)
{
    dt_schema_ctx ctx = {.out = problems};
    int bad = dt_schema_check(&llm_s, j, &ctx) != 0;
    if (!cJSON_IsObject(j))
        return -1;
    if (cJSON_GetObjectItemCaseSensitive(j, "model") == NULL && c->model == NULL) {
        if (problems)
            dt_buf_puts(problems, "$.model: missing (the model name the endpoint serves)\n");
        bad = 1;
    }
    if (bad)
        return -1;
    /* Valid: every value below is of its type and in range. */
    const char *api = dt_json_str(j, "api", NULL);
    if (api != NULL)
        c->api = dt_streq(api, "anthropic") ? LLM_ANTHROPIC : LLM_OPENAI;
    if (cJSON_GetObjectItemCaseSensitive(j, "endpoint") != NULL) {
        set_str(j, "endpoint", &c->endpoint);
    } else if (c->endpoint == NULL) {
        c->endpoint = dt_xstrdup(c->api == LLM_ANTHROPIC ? "https://api.anthropic.com/v1"
                                                         : "https://api.openai.com/v1");
        /* The vendor's own endpoint: its usual variable holds its key. */
        if (cJSON_GetObjectItemCaseSensitive(j, "api_key_env") == NULL && c->api_key_env == NULL)
            c->api_key_env =
                dt_xstrdup(c->api == LLM_ANTHROPIC ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY");
    }
    set_str(j, "model", &c->model);
    set_str(j, "api_key_env", &c->api_key_env);
    set_str(j, "cache_dir", &c->cache_dir);
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(j, "price");
    set_num(o, "input", &c->price_in);
    set_num(o, "output", &c->price_out);
    o = cJSON_GetObjectItemCaseSensitive(j, "timeouts");
    set_num(o, "connect", &c->connect_timeout_s);
    set_num(o, "stall", &c->stall_timeout_s);
    o = cJSON_GetObjectItemCaseSensitive(j, "backoff");
    set_num(o, "base", &c->backoff_base_s);
    set_num(o, "max", &c->backoff_max_s);
    c->max_retries = (int)dt_json_i64(j, "max_retries", c->max_retries);
    c->max_tokens = (int)dt_json_i64(j, "max_tokens", c->max_tokens);
    set_num(j, "temperature", &c->temperature);
    c->max_answer_bytes = (size_t)dt_json_i64(j, "max_answer_bytes", (int64_t)c->max_answer_bytes);
    set_num(j, "request_timeout_s", &c->request_timeout_s);
    if (c->backoff_max_s < c->backoff_base_s) {
        if (problems)
            dt_buf_printf(problems, "$.backoff.max: %g is less than $.backoff.base %g\n",
                          c->backoff_max_s, c->backoff_base_s);
        return -1;
    }
    return 0;
}
