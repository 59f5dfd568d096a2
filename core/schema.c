/* schema.c -- the one walker over declarative JSON schemas (schema.h): every
 * validator of outside JSON reports through it, in one message style. */
#include "core/schema.h"

#include <math.h>
#include <string.h>

/* Quoted strings in messages are cut here: a 1 MB value is one line, not
 * a screenful. */
#define SHOW_MAX 60
/* Keys in paths are cut here. */
#define KEY_MAX 64

/* ---- describing values and schemas -------------------------------------- */

/* Characters, not bytes: what a person counts (UTF-8 continuation bytes do
 * not start one). */
static size_t chars(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* Integers in full (2^53 is 9007199254740992, not 9.00719925474099e+15),
 * other numbers in 15 significant digits. */
static void put_num(dt_buf *b, double d)
{
    if (d == floor(d) && fabs(d) < 1e18)
        dt_buf_printf(b, "%.0f", d);
    else
        dt_buf_printf(b, "%.15g", d);
}

void dt_schema_show(dt_buf *b, const cJSON *v)
{
    if (v == NULL) {
        dt_buf_puts(b, "nothing");
    } else if (cJSON_IsString(v)) {
        size_t n = strlen(v->valuestring);
        if (n == 0)
            dt_buf_puts(b, "an empty string");
        else if (n <= SHOW_MAX)
            dt_buf_printf(b, "\"%s\"", v->valuestring);
        else
            dt_buf_printf(b, "\"%.*s...\"", SHOW_MAX, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        if (isfinite(v->valuedouble))
            put_num(b, v->valuedouble);
        else
            dt_buf_puts(b, "a non-finite number");
    } else if (cJSON_IsBool(v)) {
        dt_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        dt_buf_puts(b, "null");
    } else if (cJSON_IsArray(v)) {
        int n = cJSON_GetArraySize(v);
        if (n == 0)
            dt_buf_puts(b, "an empty array");
        else
            dt_buf_printf(b, "an array of %d item%s", n, n == 1 ? "" : "s");
    } else if (cJSON_IsObject(v)) {
        dt_buf_puts(b, "an object");
    } else {
        dt_buf_puts(b, "an invalid value");
    }
}

static void describe(dt_buf *b, const dt_schema *s);

/* Bounds apply unless both are 0 (the zero-initialised table). */
static int bounded(const dt_schema *s)
{
    return s->min != 0 || s->max != 0;
}

static void describe_num(dt_buf *b, const dt_schema *s)
{
    int integer = s->type == DT_SCHEMA_INT;
    const char *noun = integer ? "an integer" : "a number";
    if (!bounded(s)) {
        dt_buf_puts(b, integer ? "an integer" : "a finite number");
    } else if (s->min == s->max) {
        put_num(b, s->min);
    } else if (s->flags & DT_SCHEMA_GT_MIN) {
        dt_buf_printf(b, "%s above ", noun);
        put_num(b, s->min);
        if (isfinite(s->max)) {
            dt_buf_puts(b, " and at most ");
            put_num(b, s->max);
        }
    } else if (!isfinite(s->max)) {
        dt_buf_printf(b, "%s >= ", noun);
        put_num(b, s->min);
    } else if (!isfinite(s->min)) {
        dt_buf_printf(b, "%s <= ", noun);
        put_num(b, s->max);
    } else {
        dt_buf_printf(b, "%s from ", noun);
        put_num(b, s->min);
        dt_buf_puts(b, " to ");
        put_num(b, s->max);
    }
}

static void describe_len(dt_buf *b, const dt_schema *s, const char *unit)
{
    if (s->max_len > 0 && s->min_len == s->max_len)
        dt_buf_printf(b, " of %zu %s", s->max_len, unit);
    else if (s->max_len > 0 && s->min_len > 1)
        dt_buf_printf(b, " of %zu to %zu %s", s->min_len, s->max_len, unit);
    else if (s->max_len > 0)
        dt_buf_printf(b, " of at most %zu %s", s->max_len, unit);
    else if (s->min_len > 1)
        dt_buf_printf(b, " of at least %zu %s", s->min_len, unit);
}

static void describe(dt_buf *b, const dt_schema *s)
{
    if (s == NULL) {
        dt_buf_puts(b, "any value");
        return;
    }
    if (s->what != NULL) {
        dt_buf_puts(b, s->what);
    } else {
        switch (s->type) {
        case DT_SCHEMA_ANY:
            dt_buf_puts(b, "any value");
            break;
        case DT_SCHEMA_STR:
            if (s->choices != NULL) {
                dt_buf_puts(b, "one of ");
                for (const char *const *c = s->choices; *c != NULL; c++)
                    dt_buf_printf(b, "%s%s", c == s->choices ? "" : ", ", *c);
                break;
            }
            dt_buf_printf(b, "a %s%sstring", s->min_len == 1 ? "non-empty " : "",
                          (s->flags & DT_SCHEMA_ONELINE) ? "one-line " : "");
            describe_len(b, s, (s->flags & DT_SCHEMA_BYTES) ? "bytes" : "characters");
            break;
        case DT_SCHEMA_NUM:
        case DT_SCHEMA_INT:
            describe_num(b, s);
            break;
        case DT_SCHEMA_BOOL:
            dt_buf_puts(b, "true or false");
            break;
        case DT_SCHEMA_OBJ:
        case DT_SCHEMA_MAP:
            dt_buf_puts(b, "an object");
            break;
        case DT_SCHEMA_ARR:
            dt_buf_printf(b, "a%s array", s->min_len == 1 ? " non-empty" : "n");
            describe_len(b, s, "items");
            break;
        case DT_SCHEMA_ONEOF:
            for (const dt_schema *const *a = s->alts; a != NULL && *a != NULL; a++) {
                if (a != s->alts)
                    dt_buf_puts(b, " or ");
                describe(b, *a);
            }
            break;
        }
    }
    if (s->flags & DT_SCHEMA_NULL)
        dt_buf_puts(b, " or null");
}

/* ---- reporting ------------------------------------------------------------ */

static void line(dt_schema_ctx *c, const char *path, const char *msg)
{
    c->n++;
    if (c->out == NULL || (c->max > 0 && c->n > c->max))
        return;
    dt_buf l = DT_BUF_INIT;
    if (c->file != NULL)
        dt_buf_printf(&l, "%s: ", c->file);
    dt_buf_printf(&l, "%s: %s", path, msg);
    /* Paths and values come from the input: no terminal controls. */
    dt_buf_put_term(c->out, l.data, l.len, 0);
    dt_buf_putc(c->out, '\n');
    dt_buf_free(&l);
}

void dt_schema_bad(dt_schema_ctx *c, const char *path, const char *fmt, ...)
{
    dt_buf m = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&m, fmt, ap);
    va_end(ap);
    line(c, path, dt_buf_str(&m));
    dt_buf_free(&m);
}

void dt_schema_expected(dt_schema_ctx *c, const char *path, const cJSON *v, const char *fmt, ...)
{
    dt_buf m = DT_BUF_INIT;
    dt_buf_puts(&m, "expected ");
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&m, fmt, ap);
    va_end(ap);
    dt_buf_puts(&m, ", got ");
    dt_schema_show(&m, v);
    line(c, path, dt_buf_str(&m));
    dt_buf_free(&m);
}

/* "expected <the schema>, got <v>". */
static void mismatch(dt_schema_ctx *c, const char *path, const dt_schema *s, const cJSON *v)
{
    dt_buf d = DT_BUF_INIT;
    describe(&d, s);
    dt_schema_expected(c, path, v, "%s", dt_buf_str(&d));
    dt_buf_free(&d);
}

void dt_schema_path(char *out, size_t n, const char *path, const char *key)
{
    size_t k = strlen(key);
    snprintf(out, n, "%s.%.*s%s", path, (int)(k > KEY_MAX ? KEY_MAX : k), key,
             k > KEY_MAX ? "..." : "");
}

void dt_schema_index(char *out, size_t n, const char *path, int i)
{
    snprintf(out, n, "%s[%d]", path, i);
}

/* ---- the walk ------------------------------------------------------------- */

static int fits(const dt_schema *s, const cJSON *v)
{
    switch (s->type) {
    case DT_SCHEMA_ANY:
        return 1;
    case DT_SCHEMA_STR:
        return cJSON_IsString(v);
    case DT_SCHEMA_NUM:
    case DT_SCHEMA_INT:
        return cJSON_IsNumber(v);
    case DT_SCHEMA_BOOL:
        return cJSON_IsBool(v);
    case DT_SCHEMA_OBJ:
    case DT_SCHEMA_MAP:
        return cJSON_IsObject(v);
    case DT_SCHEMA_ARR:
        return cJSON_IsArray(v);
    case DT_SCHEMA_ONEOF:
        for (const dt_schema *const *a = s->alts; a != NULL && *a != NULL; a++) {
            if (fits(*a, v))
                return 1;
        }
        return 0;
    }
    return 0;
}

static void walk(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path, int depth);

static void check_str(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path)
{
    const char *str = v->valuestring;
    if (s->choices != NULL) {
        for (const char *const *ch = s->choices; *ch != NULL; ch++) {
            if (strcmp(*ch, str) == 0)
                return;
        }
        mismatch(c, path, s, v);
        return;
    }
    int bytes = (s->flags & DT_SCHEMA_BYTES) != 0;
    size_t n = bytes ? strlen(str) : chars(str);
    if (n < s->min_len) {
        mismatch(c, path, s, v);
        return;
    }
    if (s->max_len > 0 && n > s->max_len) {
        dt_schema_bad(c, path, "expected at most %zu %s, got %zu", s->max_len,
                      bytes ? "bytes" : "characters", n);
        return;
    }
    if ((s->flags & DT_SCHEMA_ONELINE) && strchr(str, '\n') != NULL) {
        dt_schema_bad(c, path, "expected one line, got a newline in the text");
        return;
    }
    if (s->valid != NULL && !s->valid(v))
        mismatch(c, path, s, v);
}

/* 2^63: every double in [-2^63, 2^63) converts to int64_t. */
#define TWO63 9223372036854775808.0

static void check_num(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path)
{
    double d = v->valuedouble;
    int ok = isfinite(d);
    if (ok && s->type == DT_SCHEMA_INT)
        ok = d == floor(d) && d >= -TWO63 && d < TWO63;
    if (ok && bounded(s))
        ok = ((s->flags & DT_SCHEMA_GT_MIN) ? d > s->min : d >= s->min) && d <= s->max;
    if (ok && s->valid != NULL)
        ok = s->valid(v);
    if (!ok)
        mismatch(c, path, s, v);
}

static int listed(const dt_schema_field *f, const char *key)
{
    for (; f != NULL && f->key != NULL; f++) {
        if (strcmp(f->key, key) == 0)
            return 1;
    }
    return 0;
}

static void check_obj(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path,
                      int depth)
{
    char sub[DT_SCHEMA_PATH_MAX];
    if (!(s->flags & DT_SCHEMA_OPEN)) {
        for (const cJSON *it = v->child; it != NULL; it = it->next) {
            if (listed(s->fields, it->string))
                continue;
            dt_buf keys = DT_BUF_INIT;
            for (const dt_schema_field *f = s->fields; f != NULL && f->key != NULL; f++)
                dt_buf_printf(&keys, "%s%s", f == s->fields ? "" : ", ", f->key);
            dt_schema_path(sub, sizeof sub, path, it->string);
            dt_schema_bad(c, sub, "expected one of the keys %s, got an unknown key",
                          dt_buf_str(&keys));
            dt_buf_free(&keys);
        }
    }
    for (const dt_schema_field *f = s->fields; f != NULL && f->key != NULL; f++) {
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(v, f->key);
        dt_schema_path(sub, sizeof sub, path, f->key);
        if (m == NULL) {
            if (f->required)
                mismatch(c, sub, f->schema, NULL);
            continue;
        }
        walk(c, f->schema, m, sub, depth + 1);
    }
}

static void check_arr(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path,
                      int depth)
{
    int n = cJSON_GetArraySize(v);
    if ((size_t)n < s->min_len || (s->max_len > 0 && (size_t)n > s->max_len)) {
        mismatch(c, path, s, v);
        return;
    }
    char sub[DT_SCHEMA_PATH_MAX];
    int i = 0;
    for (const cJSON *it = v->child; it != NULL; it = it->next, i++) {
        dt_schema_index(sub, sizeof sub, path, i);
        walk(c, s->items, it, sub, depth + 1);
    }
}

static void check_map(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path,
                      int depth)
{
    int n = cJSON_GetArraySize(v);
    if ((size_t)n < s->min_len || (s->max_len > 0 && (size_t)n > s->max_len)) {
        dt_buf d = DT_BUF_INIT;
        describe(&d, s);
        dt_buf_printf(&d, " of ");
        if (s->max_len > 0)
            dt_buf_printf(&d, "%zu to %zu names", s->min_len, s->max_len);
        else
            dt_buf_printf(&d, "at least %zu name%s", s->min_len, s->min_len == 1 ? "" : "s");
        dt_schema_bad(c, path, "expected %s, got %d", dt_buf_str(&d), n);
        dt_buf_free(&d);
        return;
    }
    char sub[DT_SCHEMA_PATH_MAX];
    for (const cJSON *it = v->child; it != NULL; it = it->next) {
        dt_schema_path(sub, sizeof sub, path, it->string);
        if (s->key_valid != NULL && !s->key_valid(it->string)) {
            cJSON name = {0};
            name.type = cJSON_String;
            name.valuestring = it->string;
            dt_schema_expected(c, sub, &name, "%s", s->key_what ? s->key_what : "a known name");
            continue;
        }
        walk(c, s->items, it, sub, depth + 1);
    }
}

static void walk(dt_schema_ctx *c, const dt_schema *s, const cJSON *v, const char *path, int depth)
{
    if (s == NULL)
        return;
    if (depth > DT_SCHEMA_MAX_DEPTH) {
        dt_schema_bad(c, path, "expected at most %d levels of nesting, got more",
                      DT_SCHEMA_MAX_DEPTH);
        return;
    }
    if ((s->flags & DT_SCHEMA_NULL) && cJSON_IsNull(v))
        return;
    if (v == NULL || !fits(s, v)) {
        mismatch(c, path, s, v);
        return;
    }
    switch (s->type) {
    case DT_SCHEMA_ONEOF:
        for (const dt_schema *const *a = s->alts; *a != NULL; a++) {
            if (fits(*a, v)) {
                walk(c, *a, v, path, depth + 1);
                break;
            }
        }
        break;
    case DT_SCHEMA_STR:
        check_str(c, s, v, path);
        break;
    case DT_SCHEMA_NUM:
    case DT_SCHEMA_INT:
        check_num(c, s, v, path);
        break;
    case DT_SCHEMA_OBJ:
        check_obj(c, s, v, path, depth);
        break;
    case DT_SCHEMA_ARR:
        check_arr(c, s, v, path, depth);
        break;
    case DT_SCHEMA_MAP:
        check_map(c, s, v, path, depth);
        break;
    case DT_SCHEMA_ANY:
    case DT_SCHEMA_BOOL:
        break;
    }
    if (s->check != NULL)
        s->check(c, s, path, v);
}

int dt_schema_check_at(const dt_schema *s, const cJSON *v, const char *root, dt_schema_ctx *c)
{
    int before = c->n;
    char path[DT_SCHEMA_PATH_MAX];
    snprintf(path, sizeof path, "%s", root ? root : "$");
    walk(c, s, v, path, 0);
    return c->n - before;
}

int dt_schema_check(const dt_schema *s, const cJSON *v, dt_schema_ctx *c)
{
    return dt_schema_check_at(s, v, "$", c);
}

int dt_schema_valid(const dt_schema *s, const cJSON *v)
{
    dt_schema_ctx c = {0};
    return dt_schema_check(s, v, &c) == 0;
}

/* dt_schema_validate and _all: "FILE: " and the first problem with a count
 * of the rest, or every problem (up to what a dt_err holds) joined by "; ". */
static int validate(const dt_schema *s, const cJSON *v, const char *file, int all, dt_err *e)
{
    dt_buf out = DT_BUF_INIT;
    dt_schema_ctx c = {.out = &out, .max = all ? 32 : 1};
    int n = dt_schema_check(s, v, &c);
    if (n == 0) {
        dt_buf_free(&out);
        return 0;
    }
    dt_buf msg = DT_BUF_INIT;
    if (file != NULL) /* once, not before every problem */
        dt_buf_printf(&msg, "%s: ", file);
    for (size_t i = 0; i < out.len; i++) {
        if (out.data[i] != '\n')
            dt_buf_putc(&msg, out.data[i]);
        else if (i + 1 < out.len)
            dt_buf_puts(&msg, "; ");
    }
    if (n > 1 && all)
        dt_buf_printf(&msg, " (%d problems)", n);
    else if (n > 1)
        dt_buf_printf(&msg, " (and %d more)", n - 1);
    dt_err_set(e, "%s", dt_buf_str(&msg));
    dt_buf_free(&msg);
    dt_buf_free(&out);
    return -1;
}

int dt_schema_validate(const dt_schema *s, const cJSON *v, const char *file, dt_err *e)
{
    return validate(s, v, file, 0, e);
}

int dt_schema_validate_all(const dt_schema *s, const cJSON *v, const char *file, dt_err *e)
{
    return validate(s, v, file, 1, e);
}

/* ---- for hooks ------------------------------------------------------------ */

const cJSON *dt_schema_get(const dt_schema *s, const cJSON *obj, const char *key)
{
    if (s == NULL || !cJSON_IsObject(obj))
        return NULL;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (m == NULL)
        return NULL;
    for (const dt_schema_field *f = s->fields; f != NULL && f->key != NULL; f++) {
        if (strcmp(f->key, key) == 0)
            return dt_schema_valid(f->schema, m) ? m : NULL;
    }
    return NULL;
}

int dt_schema_get_int(const dt_schema *s, const cJSON *obj, const char *key, int64_t *out)
{
    const cJSON *m = dt_schema_get(s, obj, key);
    return dt_json_to_int(m, INT64_MIN, INT64_MAX, out, NULL);
}

int dt_schema_get_num(const dt_schema *s, const cJSON *obj, const char *key, double *out)
{
    const cJSON *m = dt_schema_get(s, obj, key);
    if (!cJSON_IsNumber(m) || !isfinite(m->valuedouble))
        return -1;
    *out = m->valuedouble;
    return 0;
}
