/* config.c -- $XDG_CONFIG_HOME/ditto/config.json: the LLM endpoint and model,
 * the review policy, the worker launcher and pool, tuning budgets. Secrets
 * never live here: the file names the environment variable holding the key.
 *
 * Every problem is reported with its JSON path; a missing file is not an
 * error (the defaults apply). */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

static const char *top_keys[] = {"backend", "review", "llm", "workers", "tune", "goal_speedup",
                                 "max_iterations", "max_reviews", "hooks"};

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
    if (!cJSON_IsObject(c)) {
        dt_buf_printf(problems, "%s: $: expected an object\n", path);
        cJSON_Delete(c);
        free(path);
        return dt_json_obj();
    }
    for (const cJSON *it = c->child; it; it = it->next) {
        int known = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(top_keys); i++)
            known |= dt_streq(it->string, top_keys[i]);
        if (!known)
            dt_buf_printf(problems,
                          "%s: $.%s: unknown key (keys: backend, review, llm, workers, tune, "
                          "goal_speedup, max_iterations, max_reviews, hooks)\n",
                          path, it->string);
    }
    const cJSON *w = cJSON_GetObjectItem(c, "workers");
    if (w && !cJSON_IsObject(w))
        dt_buf_printf(problems, "%s: $.workers: expected {\"count\": N, \"launcher\": \"...\"}\n",
                      path);
    if (w && cJSON_GetObjectItem(w, "count") &&
        (!cJSON_IsNumber(cJSON_GetObjectItem(w, "count")) || dt_json_num(w, "count", 0) < 1 ||
         dt_json_num(w, "count", 0) > 64))
        dt_buf_printf(problems, "%s: $.workers.count: expected 1 to 64\n", path);
    if (w && cJSON_GetObjectItem(w, "launcher") && !cJSON_IsString(cJSON_GetObjectItem(w, "launcher")))
        dt_buf_printf(problems, "%s: $.workers.launcher: expected a command line with {exe} and "
                                "{device}\n",
                      path);
    const cJSON *ship = cJSON_GetObjectItem(w, "ship");
    if (ship && (!cJSON_IsString(ship) || (!dt_streq(ship->valuestring, "auto") &&
                                           !dt_streq(ship->valuestring, "always") &&
                                           !dt_streq(ship->valuestring, "never"))))
        dt_buf_printf(problems,
                      "%s: $.workers.ship: expected \"auto\", \"always\" or \"never\" (sending "
                      "matrix files to workers, README)\n",
                      path);
    const cJSON *b = cJSON_GetObjectItem(c, "backend");
    if (b && (!cJSON_IsString(b) || (!dt_streq(b->valuestring, "expert") &&
                                     !dt_streq(b->valuestring, "llm"))))
        dt_buf_printf(problems, "%s: $.backend: expected \"expert\" or \"llm\"\n", path);
    free(path);
    return c;
}
