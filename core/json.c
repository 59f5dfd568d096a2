/* json.c -- helpers over cJSON: parsing with line/column errors, lookups with
 * defaults, builders that abort on out-of-memory. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

cJSON *dt_json_parse(const char *text, size_t len, const char *name, dt_err *e)
{
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (v != NULL)
        return v;
    /* cJSON reports where parsing stopped through end; turn it into a
     * line and column. */
    size_t off = (end != NULL && end >= text) ? (size_t)(end - text) : 0;
    if (off > len)
        off = len;
    int line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (off >= len)
        dt_err_set(e, "%s:%d:%d: invalid JSON: unexpected end of input", name, line, col);
    else
        dt_err_set(e, "%s:%d:%d: invalid JSON near '%.20s'", name, line, col, text + off);
    return NULL;
}

cJSON *dt_json_read_file(const char *path, dt_err *e)
{
    size_t len = 0;
    char *text = dt_read_file(path, &len, e);
    if (text == NULL)
        return NULL;
    cJSON *v = dt_json_parse(text, len, path, e);
    free(text);
    return v;
}

char *dt_json_print(const cJSON *v, int pretty)
{
    char *s = pretty ? cJSON_Print(v) : cJSON_PrintUnformatted(v);
    if (s == NULL) {
        fprintf(stderr, "ditto: out of memory printing JSON\n");
        abort();
    }
    return s;
}

double dt_json_num(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

const char *dt_json_str(const cJSON *obj, const char *key, const char *dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

int dt_json_bool(const cJSON *obj, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (cJSON_IsBool(v))
        return cJSON_IsTrue(v);
    return dflt;
}

static cJSON *check(cJSON *v)
{
    if (v == NULL) {
        fprintf(stderr, "ditto: out of memory building JSON\n");
        abort();
    }
    return v;
}

cJSON *dt_json_obj(void)
{
    return check(cJSON_CreateObject());
}

cJSON *dt_json_arr(void)
{
    return check(cJSON_CreateArray());
}

void dt_json_set_take(cJSON *obj, const char *key, cJSON *v)
{
    check(v);
    if (cJSON_GetObjectItemCaseSensitive(obj, key) != NULL)
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
    else
        cJSON_AddItemToObject(obj, key, v);
}

void dt_json_set_num(cJSON *obj, const char *key, double v)
{
    dt_json_set_take(obj, key, cJSON_CreateNumber(v));
}

void dt_json_set_int(cJSON *obj, const char *key, int64_t v)
{
    dt_json_set_take(obj, key, cJSON_CreateNumber((double)v));
}

void dt_json_set_str(cJSON *obj, const char *key, const char *v)
{
    dt_json_set_take(obj, key, v ? cJSON_CreateString(v) : cJSON_CreateNull());
}

void dt_json_set_bool(cJSON *obj, const char *key, int v)
{
    dt_json_set_take(obj, key, cJSON_CreateBool(v));
}
