/* config.c -- $XDG_CONFIG_HOME/ditto/config.json: the LLM endpoint and model,
 * the review policy, the worker launcher and pool, tuning budgets. Secrets
 * never live here: the file names the environment variable holding the key.
 *
 * Every problem is reported with its JSON path; a missing file is not an
 * error (the defaults apply). */
#include "cli/cli.h"

#include "core/schema.h"

#include <stdlib.h>
#include <string.h>

/* The file's schema. "llm" is the LLM client's own (llm_config_from_json
 * checks it when the llm backend is used); "review" and "hooks" are kept
 * for the front ends that read them. */
static const char *const ship_names[] = {"auto", "always", "never", NULL};
static const char *const backend_names[] = {"expert", "llm", NULL};

static const dt_schema count_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 64};
static const dt_schema launcher_s = {.type = DT_SCHEMA_STR,
                                     .min_len = 1,
                                     .max_len = 4096,
                                     .what = "a command line with {exe} and {device}"};
static const dt_schema ship_s = {
    .type = DT_SCHEMA_STR,
    .choices = ship_names,
    .what = "\"auto\", \"always\" or \"never\" (sending matrix files to workers, README)"};
static const dt_schema_field workers_fields[] = {
    {"count", &count_s, 0}, {"launcher", &launcher_s, 0}, {"ship", &ship_s, 0}, {NULL, NULL, 0}};
static const dt_schema workers_s = {.type = DT_SCHEMA_OBJ, .fields = workers_fields};
static const dt_schema backend_s = {.type = DT_SCHEMA_STR, .choices = backend_names};
static const dt_schema variants_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 100000};
static const dt_schema seconds_s = {
    .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_GT_MIN, .min = 0, .max = 7 * 86400};
static const dt_schema_field tune_fields[] = {
    {"variants", &variants_s, 0}, {"seconds", &seconds_s, 0}, {NULL, NULL, 0}};
static const dt_schema tune_s = {.type = DT_SCHEMA_OBJ, .fields = tune_fields};
static const dt_schema goal_s = {
    .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_GT_MIN, .min = 0, .max = 1e6};
/* At most 1000, as --max-reviews allows; the iteration cap likewise. */
static const dt_schema iterations_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 1000};
static const dt_schema_field config_fields[] = {
    {"backend", &backend_s, 0},   {"review", NULL, 0},          {"llm", NULL, 0},
    {"workers", &workers_s, 0},   {"tune", &tune_s, 0},         {"goal_speedup", &goal_s, 0},
    {"max_iterations", &iterations_s, 0}, {"max_reviews", &iterations_s, 0}, {"hooks", NULL, 0},
    {NULL, NULL, 0}};
static const dt_schema config_schema = {.type = DT_SCHEMA_OBJ, .fields = config_fields};

int cli_ship_mode(const cJSON *workers)
{
    const char *s = dt_json_str(workers, "ship", "auto");
    return dt_streq(s, "always") ? 1 : dt_streq(s, "never") ? -1 : 0;
}

char *cli_config_path(void)
{
    const char *env = getenv("DITTO_CONFIG");
    if (env && *env)
        return dt_xstrdup(env);
    char *dir = dt_config_dir();
    if (dir == NULL)
        return NULL;
    char *p = dt_xasprintf("%s/config.json", dir);
    free(dir);
    return p;
}

cJSON *cli_config_load(dt_buf *problems)
{
    char *path = cli_config_path();
    if (path == NULL || !dt_file_exists(path)) {
        free(path);
        return dt_json_obj();
    }
    dt_err e = {0};
    cJSON *c = dt_json_read_file_max(path, (size_t)1 << 20, &e); /* a config is a few KB */
    if (c == NULL) {
        dt_buf_printf(problems, "%s\n", e.msg);
        free(path);
        return dt_json_obj();
    }
    dt_schema_ctx ctx = {.file = path, .out = problems};
    if (dt_schema_check(&config_schema, c, &ctx) > 0 && !cJSON_IsObject(c)) {
        cJSON_Delete(c);
        c = dt_json_obj();
    }
    free(path);
    return c;
}
