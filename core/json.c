/* json.c -- helpers over cJSON: parsing with line/column errors, lookups with
 * defaults, builders that abort on out-of-memory. */
#include "core.h"

#include <limits.h>
#include <math.h>
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
        /* text need not end in a NUL: quote at most what is left of it. */
        dt_err_set(e, "%s:%d:%d: invalid JSON near '%.*s'", name, line, col,
                   (int)(len - off < 20 ? len - off : 20), text + off);
    return NULL;
}

cJSON *dt_json_read_file(const char *path, dt_err *e)
{
    return dt_json_read_file_max(path, DT_READ_MAX, e);
}

cJSON *dt_json_read_file_max(const char *path, size_t max, dt_err *e)
{
    size_t len = 0;
    char *text = dt_read_file_max(path, max, &len, e);
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

/* 2^63 exactly as a double: every double below it (and >= -2^63) converts
 * to int64_t without overflow. */
#define TWO63 9223372036854775808.0

static int i64_of(double d, int64_t *out)
{
    if (!(d >= -TWO63 && d < TWO63)) /* also false for NaN */
        return -1;
    *out = (int64_t)d;
    return 0;
}

int dt_json_to_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out, dt_err *e)
{
    if (!cJSON_IsNumber(v))
        return dt_err_set(e, "expected an integer, got %s",
                          v == NULL ? "nothing" : cJSON_IsString(v) ? "a string" : "another type");
    double d = v->valuedouble;
    int64_t x = 0;
    if (!isfinite(d))
        return dt_err_set(e, "expected an integer, got a non-finite number");
    if (d != floor(d))
        return dt_err_set(e, "expected an integer, got %.17g", d);
    if (i64_of(d, &x) != 0 || x < lo || x > hi)
        return dt_err_set(e, "%.17g is out of range (%lld to %lld)", d, (long long)lo,
                          (long long)hi);
    *out = x;
    return 0;
}

int64_t dt_json_as_i64(const cJSON *v, int64_t dflt)
{
    int64_t x = dflt;
    if (!cJSON_IsNumber(v) || i64_of(v->valuedouble, &x) != 0)
        return dflt;
    return x;
}

int64_t dt_json_i64(const cJSON *obj, const char *key, int64_t dflt)
{
    return dt_json_as_i64(cJSON_GetObjectItemCaseSensitive(obj, key), dflt);
}

int dt_json_int(const cJSON *obj, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble > (double)INT_MIN - 1.0) ||
        !(v->valuedouble < (double)INT_MAX + 1.0))
        return dflt;
    return (int)v->valuedouble;
}

size_t dt_json_size(const cJSON *obj, const char *key, size_t dflt)
{
    int64_t x = dt_json_i64(obj, key, -1);
    return x < 0 ? dflt : (size_t)x;
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
