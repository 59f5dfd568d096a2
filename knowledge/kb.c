/* kb.c -- the knowledge base: shipped and user entries, validation with JSON
 * paths, proposals and reviews saved atomically, import, export, and
 * retrieval ranked by feature distance. */
#include "knowledge/knowledge.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KB_ID_MAX 128

/* ---- features --------------------------------------------------------------------- */

/* Counts and ratios that span decades are compared in log2(1 + x) space,
 * so that a 2x miss costs the same at 4 as at 4 million; fractions are
 * compared as they are. The unit keeps a narrow (or open-ended) range from
 * turning a small miss into a huge distance. knowledge/README.md documents
 * each feature; keep the two in step. */
typedef struct kb_feature {
    const char *name;
    int log;
    double unit;
    double absent; /* the value a query without the feature has; NAN: none, the range is skipped */
} kb_feature;

static const kb_feature features[] = {
    {"rows", 1, 1.0, NAN},
    {"cols", 1, 1.0, NAN},
    {"nnz", 1, 1.0, NAN},
    {"density", 0, 0.01, NAN},
    {"row_mean", 1, 1.0, NAN},
    {"row_cv", 0, 0.25, NAN},
    {"row_max", 1, 1.0, NAN},
    {"row_max_over_mean", 1, 1.0, NAN},
    {"row_gini", 0, 0.1, NAN},
    {"empty_rows_frac", 0, 0.05, NAN},
    {"bandwidth_frac", 0, 0.05, NAN},
    {"diagonals", 1, 1.0, NAN},
    {"block_fill_2", 0, 0.1, NAN},
    {"block_fill_4", 0, 0.1, NAN},
    {"block_fill_8", 0, 0.1, NAN},
    {"block_fill_16", 0, 0.1, NAN},
    {"x_lines_per_nnz", 0, 0.05, NAN},
    {"col_span_max", 1, 1.0, NAN},
    {"distinct_values", 1, 1.0, 4097.0}, /* absent: many (a value dictionary needs <= 255) */
    {"n", 1, 1.0, NAN},
};

static const kb_feature *feature_find(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(features); i++) {
        if (dt_streq(features[i].name, name))
            return &features[i];
    }
    return NULL;
}

const char *kb_feature_name(int i)
{
    return (i >= 0 && (size_t)i < DT_ARRAY_LEN(features)) ? features[i].name : NULL;
}

int kb_is_feature(const char *name)
{
    return feature_find(name) != NULL;
}

int kb_feature_is_log(const char *name)
{
    const kb_feature *f = feature_find(name);
    return f ? f->log : -1;
}

double kb_feature_unit(const char *name)
{
    const kb_feature *f = feature_find(name);
    return f ? f->unit : 0.0;
}

/* ---- validation ------------------------------------------------------------------- */

static const char *kinds[] = {"rule", "strategy", "pitfall", "error-explanation", "hardware-fact"};
static const char *statuses[] = {"proposed", "approved", "rejected"};
static const char *ops[] = {"spmv", "spmm", "sddmm"};
static const char *dtypes[] = {"fp32", "fp64", "fp16", "bf16"};
static const char *severities[] = {"error", "warning", "note"};

static const char *entry_keys[] = {"id",      "kind",       "title",    "applies_to",
                                   "content", "parameters", "evidence", "status",
                                   "review",  "created",    "updated"};
static const char *applies_keys[] = {"op", "dtype", "cc", "features"};
static const char *rule_keys[] = {"strategy", "params", "score"};
static const char *error_keys[] = {"pattern", "hint", "unless"};
static const char *pitfall_keys[] = {"rule_id", "severity",    "message", "pattern",
                                     "detect",  "explanation", "fix"};
static const char *evidence_keys[] = {"session",  "gpu",     "matrix",   "fingerprint",
                                      "features", "speedup", "measured", "note"};
static const char *review_keys[] = {"reviewer", "note", "at"};

/* Where problems go: each line is "WHERE: PATH: message". */
typedef struct vctx {
    const char *where;
    dt_buf *out;
    int n;
} vctx;

static void bad(vctx *v, const char *path, const char *fmt, ...) DT_PRINTF(3, 4);

static void bad(vctx *v, const char *path, const char *fmt, ...)
{
    v->n++;
    if (v->out == NULL)
        return;
    if (v->where != NULL)
        dt_buf_printf(v->out, "%s: ", v->where);
    dt_buf_printf(v->out, "%s: ", path);
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(v->out, fmt, ap);
    va_end(ap);
    dt_buf_putc(v->out, '\n');
}

/* One line into a problems buffer that may be NULL. */
static void say(dt_buf *p, const char *fmt, ...) DT_PRINTF(2, 3);

static void say(dt_buf *p, const char *fmt, ...)
{
    if (p == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(p, fmt, ap);
    va_end(ap);
    dt_buf_putc(p, '\n');
}

static const char *type_name(const cJSON *x)
{
    if (cJSON_IsString(x))
        return "a string";
    if (cJSON_IsNumber(x))
        return "a number";
    if (cJSON_IsBool(x))
        return "a boolean";
    if (cJSON_IsNull(x))
        return "null";
    if (cJSON_IsArray(x))
        return "an array";
    if (cJSON_IsObject(x))
        return "an object";
    return "invalid";
}

static int in_list(const char *s, const char **list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt_streq(s, list[i]))
            return 1;
    }
    return 0;
}

/* "a, b, c" for messages. */
static void join(dt_buf *b, const char **list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dt_buf_printf(b, "%s%s", i ? ", " : "", list[i]);
}

static int id_valid(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > KB_ID_MAX || !(islower((unsigned char)s[0]) || isdigit((unsigned char)s[0])))
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!(islower(c) || isdigit(c) || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int two_digits(const char *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

/* YYYY-MM-DDTHH:MM:SS, an optional .fraction, then Z or +HH:MM / -HH:MM. */
static int iso_time_valid(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (size_t i = 0; i < sizeof shape - 1; i++) {
        if (s[i] == '\0')
            return 0;
        if (shape[i] == 'd' ? !isdigit((unsigned char)s[i]) : s[i] != shape[i])
            return 0;
    }
    int mo = two_digits(s + 5), d = two_digits(s + 8);
    int h = two_digits(s + 11), mi = two_digits(s + 14), se = two_digits(s + 17);
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
        return 0;
    const char *p = s + sizeof shape - 1;
    if (*p == '.') {
        p++;
        if (!isdigit((unsigned char)*p))
            return 0;
        while (isdigit((unsigned char)*p))
            p++;
    }
    if (*p == 'Z')
        return p[1] == '\0';
    if (*p != '+' && *p != '-')
        return 0;
    p++;
    if (!isdigit((unsigned char)p[0]) || !isdigit((unsigned char)p[1]) || p[2] != ':' ||
        !isdigit((unsigned char)p[3]) || !isdigit((unsigned char)p[4]) || p[5] != '\0')
        return 0;
    return two_digits(p) <= 23 && two_digits(p + 3) <= 59;
}

/* "M.m" or, with plus allowed, "M.m+" -> major * 1000 + minor; -1 when
 * malformed. */
static long cc_parse(const char *s, int allow_plus, int *plus)
{
    if (plus)
        *plus = 0;
    if (s == NULL || !isdigit((unsigned char)*s))
        return -1;
    char *end = NULL;
    long major = strtol(s, &end, 10);
    if (*end != '.' || !isdigit((unsigned char)end[1]) || major > 99)
        return -1;
    long minor = strtol(end + 1, &end, 10);
    if (minor > 99)
        return -1;
    if (*end == '+' && allow_plus) {
        if (plus)
            *plus = 1;
        end++;
    }
    return *end == '\0' ? major * 1000 + minor : -1;
}

static void check_keys(vctx *v, const char *path, const cJSON *obj, const char **keys, size_t n)
{
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        if (in_list(it->string, keys, n))
            continue;
        dt_buf k = DT_BUF_INIT;
        join(&k, keys, n);
        bad(v, path, "unknown key \"%s\" (keys: %s)", it->string, dt_buf_str(&k));
        dt_buf_free(&k);
    }
}

/* A child path: "$.a" + "b" -> "$.a.b". */
static void sub(char *out, size_t n, const char *path, const char *key)
{
    snprintf(out, n, "%s.%s", path, key);
}

static void idx(char *out, size_t n, const char *path, int i)
{
    snprintf(out, n, "%s[%d]", path, i);
}

/* A required or optional non-empty string; one_line refuses newlines. */
static const char *want_str(vctx *v, const char *path, const cJSON *obj, const char *key,
                            int required, int one_line)
{
    char p[256];
    sub(p, sizeof p, path, key);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (x == NULL) {
        if (required)
            bad(v, p, "missing");
        return NULL;
    }
    if (!cJSON_IsString(x) || x->valuestring[0] == '\0') {
        bad(v, p, "expected a non-empty string, got %s",
            cJSON_IsString(x) ? "an empty string" : type_name(x));
        return NULL;
    }
    if (one_line && strchr(x->valuestring, '\n') != NULL) {
        bad(v, p, "expected one line, got a newline in the text");
        return NULL;
    }
    return x->valuestring;
}

static void want_enum(vctx *v, const char *path, const cJSON *obj, const char *key,
                      const char **choices, size_t n, int required)
{
    char p[256];
    sub(p, sizeof p, path, key);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (x == NULL) {
        if (required)
            bad(v, p, "missing");
        return;
    }
    if (cJSON_IsString(x) && in_list(x->valuestring, choices, n))
        return;
    dt_buf c = DT_BUF_INIT;
    join(&c, choices, n);
    if (cJSON_IsString(x))
        bad(v, p, "expected one of %s, got \"%s\"", dt_buf_str(&c), x->valuestring);
    else
        bad(v, p, "expected one of %s, got %s", dt_buf_str(&c), type_name(x));
    dt_buf_free(&c);
}

static void want_time(vctx *v, const char *path, const cJSON *obj, const char *key, int required)
{
    char p[256];
    sub(p, sizeof p, path, key);
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (x == NULL) {
        if (required)
            bad(v, p, "missing");
        return;
    }
    if (!cJSON_IsString(x))
        bad(v, p, "expected an ISO 8601 time such as \"2026-11-29T09:19:06Z\", got %s",
            type_name(x));
    else if (!iso_time_valid(x->valuestring))
        bad(v, p, "expected an ISO 8601 time such as \"2026-11-29T09:19:06Z\", got \"%s\"",
            x->valuestring);
}

/* applies_to.op / dtype: a non-empty array of names from choices. */
static void enum_array(vctx *v, const char *path, const cJSON *x, const char **choices, size_t n)
{
    if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) == 0) {
        bad(v, path, "expected a non-empty array of names, got %s",
            cJSON_IsArray(x) ? "an empty array (drop the key to match everything)" : type_name(x));
        return;
    }
    int i = 0;
    for (const cJSON *it = x->child; it != NULL; it = it->next, i++) {
        if (cJSON_IsString(it) && in_list(it->valuestring, choices, n))
            continue;
        char p[256];
        idx(p, sizeof p, path, i);
        dt_buf c = DT_BUF_INIT;
        join(&c, choices, n);
        if (cJSON_IsString(it))
            bad(v, p, "expected one of %s, got \"%s\"", dt_buf_str(&c), it->valuestring);
        else
            bad(v, p, "expected one of %s, got %s", dt_buf_str(&c), type_name(it));
        dt_buf_free(&c);
    }
}

static void feature_names_hint(dt_buf *b)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(features); i++)
        dt_buf_printf(b, "%s%s", i ? ", " : "", features[i].name);
}

static void unknown_feature(vctx *v, const char *path)
{
    dt_buf names = DT_BUF_INIT;
    feature_names_hint(&names);
    bad(v, path, "unknown feature (features: %s)", dt_buf_str(&names));
    dt_buf_free(&names);
}

/* One feature range: [min, max], numbers or null for an open end, min <=
 * max, not both open, none negative (every feature is >= 0). */
static void range_check(vctx *v, const char *path, const cJSON *r)
{
    if (!cJSON_IsArray(r) || cJSON_GetArraySize(r) != 2) {
        bad(v, path, "expected [min, max] (numbers, null for an open end), got %s",
            cJSON_IsArray(r) ? "an array of another length" : type_name(r));
        return;
    }
    const cJSON *lo = cJSON_GetArrayItem(r, 0), *hi = cJSON_GetArrayItem(r, 1);
    int ok = 1;
    const cJSON *ends[2] = {lo, hi};
    for (int i = 0; i < 2; i++) {
        char p[256];
        idx(p, sizeof p, path, i);
        if (cJSON_IsNull(ends[i]))
            continue;
        if (!cJSON_IsNumber(ends[i]) || !isfinite(ends[i]->valuedouble)) {
            bad(v, p, "expected a finite number or null, got %s", type_name(ends[i]));
            ok = 0;
        } else if (ends[i]->valuedouble < 0) {
            bad(v, p, "expected a number >= 0 (every feature is non-negative), got %g",
                ends[i]->valuedouble);
            ok = 0;
        }
    }
    if (!ok)
        return;
    if (cJSON_IsNull(lo) && cJSON_IsNull(hi))
        bad(v, path, "both ends are open, which matches everything: drop the feature");
    else if (!cJSON_IsNull(lo) && !cJSON_IsNull(hi) && lo->valuedouble > hi->valuedouble)
        bad(v, path, "min %g is greater than max %g", lo->valuedouble, hi->valuedouble);
}

static void applies_check(vctx *v, const char *path, const cJSON *a)
{
    if (!cJSON_IsObject(a)) {
        bad(v, path, "expected an object {op, dtype, cc, features}, got %s", type_name(a));
        return;
    }
    check_keys(v, path, a, applies_keys, DT_ARRAY_LEN(applies_keys));
    char p[256];
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, "op");
    if (x != NULL) {
        sub(p, sizeof p, path, "op");
        enum_array(v, p, x, ops, DT_ARRAY_LEN(ops));
    }
    x = cJSON_GetObjectItemCaseSensitive(a, "dtype");
    if (x != NULL) {
        sub(p, sizeof p, path, "dtype");
        enum_array(v, p, x, dtypes, DT_ARRAY_LEN(dtypes));
    }
    x = cJSON_GetObjectItemCaseSensitive(a, "cc");
    if (x != NULL) {
        sub(p, sizeof p, path, "cc");
        if (!cJSON_IsArray(x) || cJSON_GetArraySize(x) == 0) {
            bad(v, p, "expected a non-empty array such as [\"8.0\", \"9.0+\"], got %s",
                cJSON_IsArray(x) ? "an empty array (drop the key to match everything)"
                                 : type_name(x));
        } else {
            int i = 0;
            for (const cJSON *it = x->child; it != NULL; it = it->next, i++) {
                if (cJSON_IsString(it) && cc_parse(it->valuestring, 1, NULL) >= 0)
                    continue;
                char q[256];
                idx(q, sizeof q, p, i);
                if (cJSON_IsString(it))
                    bad(v, q, "expected a compute capability \"M.m\" or \"M.m+\", got \"%s\"",
                        it->valuestring);
                else
                    bad(v, q, "expected a compute capability \"M.m\" or \"M.m+\", got %s",
                        type_name(it));
            }
        }
    }
    x = cJSON_GetObjectItemCaseSensitive(a, "features");
    if (x != NULL) {
        sub(p, sizeof p, path, "features");
        if (!cJSON_IsObject(x)) {
            bad(v, p, "expected an object of NAME: [min, max], got %s", type_name(x));
            return;
        }
        for (const cJSON *it = x->child; it != NULL; it = it->next) {
            char q[256];
            sub(q, sizeof q, p, it->string);
            if (!kb_is_feature(it->string))
                unknown_feature(v, q);
            else
                range_check(v, q, it);
        }
    }
}

static void rule_params_check(vctx *v, const char *path, const cJSON *pr)
{
    check_keys(v, path, pr, rule_keys, DT_ARRAY_LEN(rule_keys));
    want_str(v, path, pr, "strategy", 1, 1);
    char p[256];
    sub(p, sizeof p, path, "params");
    const cJSON *ps = cJSON_GetObjectItemCaseSensitive(pr, "params");
    if (ps == NULL) {
        bad(v, p, "missing (an object of NAME: [values], {} when the strategy has none)");
    } else if (!cJSON_IsObject(ps)) {
        bad(v, p, "expected an object of NAME: [values], got %s", type_name(ps));
    } else {
        for (const cJSON *it = ps->child; it != NULL; it = it->next) {
            char q[256];
            sub(q, sizeof q, p, it->string);
            if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) == 0) {
                bad(v, q, "expected a non-empty array of values, got %s",
                    cJSON_IsArray(it) ? "an empty array" : type_name(it));
                continue;
            }
            int i = 0;
            for (const cJSON *val = it->child; val != NULL; val = val->next, i++) {
                if (cJSON_IsString(val) || (cJSON_IsNumber(val) && isfinite(val->valuedouble)))
                    continue;
                char r[256];
                idx(r, sizeof r, q, i);
                bad(v, r, "expected a number or a string, got %s", type_name(val));
            }
        }
    }
    sub(p, sizeof p, path, "score");
    const cJSON *sc = cJSON_GetObjectItemCaseSensitive(pr, "score");
    if (sc == NULL)
        bad(v, p, "missing (a number from 0 to 100: how strongly the rule recommends)");
    else if (!cJSON_IsNumber(sc) || !(sc->valuedouble >= 0 && sc->valuedouble <= 100))
        bad(v, p, "expected a number from 0 to 100, got %s",
            cJSON_IsNumber(sc) ? "a number outside that range" : type_name(sc));
}

static void pitfall_params_check(vctx *v, const char *path, const cJSON *pr)
{
    check_keys(v, path, pr, pitfall_keys, DT_ARRAY_LEN(pitfall_keys));
    char p[256];
    sub(p, sizeof p, path, "rule_id");
    const cJSON *rid = cJSON_GetObjectItemCaseSensitive(pr, "rule_id");
    if (rid != NULL) {
        if (!cJSON_IsString(rid) || !id_valid(rid->valuestring))
            bad(v, p, "expected a rule id of [a-z0-9._-], got %s",
                cJSON_IsString(rid) ? "a string with other characters" : type_name(rid));
    }
    /* A static rule is shown as a diagnostic: it needs its one-line message
     * and a severity. */
    want_str(v, path, pr, "message", rid != NULL, 1);
    want_enum(v, path, pr, "severity", severities, DT_ARRAY_LEN(severities), rid != NULL);
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(pr, "pattern");
    sub(p, sizeof p, path, "pattern");
    if (pat != NULL && !(cJSON_IsString(pat) && pat->valuestring[0] != '\0')) {
        if (!cJSON_IsArray(pat) || cJSON_GetArraySize(pat) == 0) {
            bad(v, p, "expected a non-empty string or array of strings, got %s", type_name(pat));
        } else {
            int i = 0;
            for (const cJSON *it = pat->child; it != NULL; it = it->next, i++) {
                if (cJSON_IsString(it) && it->valuestring[0] != '\0')
                    continue;
                char q[256];
                idx(q, sizeof q, p, i);
                bad(v, q, "expected a non-empty string, got %s", type_name(it));
            }
        }
    }
    want_str(v, path, pr, "detect", 0, 0);
    want_str(v, path, pr, "explanation", 0, 0);
    want_str(v, path, pr, "fix", 0, 0);
}

static void error_params_check(vctx *v, const char *path, const cJSON *pr)
{
    check_keys(v, path, pr, error_keys, DT_ARRAY_LEN(error_keys));
    want_str(v, path, pr, "pattern", 1, 1);
    want_str(v, path, pr, "hint", 1, 0);
    want_str(v, path, pr, "unless", 0, 1);
}

static void parameters_check(vctx *v, const char *path, const cJSON *entry, const char *kind)
{
    char p[256];
    sub(p, sizeof p, path, "parameters");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(entry, "parameters");
    if (pr == NULL) {
        if (dt_streq(kind, "rule"))
            bad(v, p, "missing (a rule needs {strategy, params, score})");
        else if (dt_streq(kind, "error-explanation"))
            bad(v, p, "missing (an error explanation needs {pattern, hint})");
        return;
    }
    if (!cJSON_IsObject(pr)) {
        bad(v, p, "expected an object, got %s", type_name(pr));
        return;
    }
    if (dt_streq(kind, "rule"))
        rule_params_check(v, p, pr);
    else if (dt_streq(kind, "error-explanation"))
        error_params_check(v, p, pr);
    else if (dt_streq(kind, "pitfall"))
        pitfall_params_check(v, p, pr);
}

static void evidence_check(vctx *v, const char *path, const cJSON *ev)
{
    char p[256];
    sub(p, sizeof p, path, "evidence");
    if (!cJSON_IsArray(ev)) {
        bad(v, p, "expected an array of {session, gpu, matrix, ...}, got %s", type_name(ev));
        return;
    }
    int i = 0;
    for (const cJSON *it = ev->child; it != NULL; it = it->next, i++) {
        char q[256];
        idx(q, sizeof q, p, i);
        if (!cJSON_IsObject(it)) {
            bad(v, q,
                "expected an object {session, gpu, matrix, fingerprint, features, "
                "speedup, measured, note}, got %s",
                type_name(it));
            continue;
        }
        check_keys(v, q, it, evidence_keys, DT_ARRAY_LEN(evidence_keys));
        static const char *strs[] = {"session", "gpu", "matrix", "fingerprint", "note"};
        for (size_t s = 0; s < DT_ARRAY_LEN(strs); s++)
            want_str(v, q, it, strs[s], 0, 0);
        char r[256];
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(it, "speedup");
        const cJSON *me = cJSON_GetObjectItemCaseSensitive(it, "measured");
        if (sp == NULL && me == NULL)
            bad(v, q, "an evidence item needs speedup or measured");
        sub(r, sizeof r, q, "speedup");
        if (sp != NULL && !(cJSON_IsNumber(sp) && isfinite(sp->valuedouble) && sp->valuedouble > 0))
            bad(v, r, "expected a positive number, got %s",
                cJSON_IsNumber(sp) ? "a number <= 0" : type_name(sp));
        sub(r, sizeof r, q, "measured");
        if (me != NULL && !cJSON_IsObject(me))
            bad(v, r, "expected an object of measured numbers, got %s", type_name(me));
        const cJSON *fe = cJSON_GetObjectItemCaseSensitive(it, "features");
        sub(r, sizeof r, q, "features");
        if (fe != NULL && !cJSON_IsObject(fe)) {
            bad(v, r, "expected an object of NAME: number, got %s", type_name(fe));
        } else if (fe != NULL) {
            for (const cJSON *f = fe->child; f != NULL; f = f->next) {
                char s[256];
                sub(s, sizeof s, r, f->string);
                if (!kb_is_feature(f->string))
                    unknown_feature(v, s);
                else if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
                    bad(v, s, "expected a finite number, got %s", type_name(f));
            }
        }
    }
}

static void review_check(vctx *v, const char *path, const cJSON *entry, const char *status)
{
    char p[256];
    sub(p, sizeof p, path, "review");
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(entry, "review");
    int reviewed = dt_streq(status, "approved") || dt_streq(status, "rejected");
    if (rv == NULL || cJSON_IsNull(rv)) {
        if (reviewed)
            bad(v, p, "missing: an %s entry needs {reviewer, note, at}", status);
        return;
    }
    if (!cJSON_IsObject(rv)) {
        bad(v, p, "expected an object {reviewer, note, at} or null, got %s", type_name(rv));
        return;
    }
    if (dt_streq(status, "proposed"))
        bad(v, p, "a proposed entry has no review yet: expected null");
    check_keys(v, p, rv, review_keys, DT_ARRAY_LEN(review_keys));
    want_str(v, p, rv, "reviewer", 1, 1);
    want_time(v, p, rv, "at", 1);
    const cJSON *note = cJSON_GetObjectItemCaseSensitive(rv, "note");
    char q[256];
    sub(q, sizeof q, p, "note");
    if (note != NULL && !cJSON_IsNull(note) && !cJSON_IsString(note))
        bad(v, q, "expected a string or null, got %s", type_name(note));
    else if (dt_streq(status, "rejected") &&
             (!cJSON_IsString(note) || note->valuestring[0] == '\0'))
        bad(v, q, "a rejection needs a note saying why");
}

static int validate_at(const cJSON *entry, const char *where, const char *root, dt_buf *out)
{
    vctx v = {where, out, 0};
    if (!cJSON_IsObject(entry)) {
        bad(&v, root, "expected an entry object, got %s", type_name(entry));
        return v.n;
    }
    check_keys(&v, root, entry, entry_keys, DT_ARRAY_LEN(entry_keys));

    char p[256];
    sub(p, sizeof p, root, "id");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(entry, "id");
    if (id == NULL)
        bad(&v, p, "missing");
    else if (!cJSON_IsString(id))
        bad(&v, p, "expected a string of [a-z0-9._-], got %s", type_name(id));
    else if (!id_valid(id->valuestring))
        bad(&v, p,
            "expected [a-z0-9._-] starting with a letter or digit, at most %d characters, "
            "got \"%s\"",
            KB_ID_MAX, id->valuestring);

    want_enum(&v, root, entry, "kind", kinds, DT_ARRAY_LEN(kinds), 1);
    want_str(&v, root, entry, "title", 1, 1);
    want_str(&v, root, entry, "content", 1, 0);
    want_enum(&v, root, entry, "status", statuses, DT_ARRAY_LEN(statuses), 1);

    const cJSON *a = cJSON_GetObjectItemCaseSensitive(entry, "applies_to");
    if (a != NULL) {
        sub(p, sizeof p, root, "applies_to");
        applies_check(&v, p, a);
    }
    const char *kind = dt_json_str(entry, "kind", "");
    if (in_list(kind, kinds, DT_ARRAY_LEN(kinds)))
        parameters_check(&v, root, entry, kind);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(entry, "evidence");
    if (ev != NULL)
        evidence_check(&v, root, ev);
    const char *status = dt_json_str(entry, "status", "");
    if (in_list(status, statuses, DT_ARRAY_LEN(statuses)))
        review_check(&v, root, entry, status);
    want_time(&v, root, entry, "created", 1);
    want_time(&v, root, entry, "updated", 1);
    return v.n;
}

int kb_validate(const cJSON *entry, const char *where, dt_buf *problems)
{
    return validate_at(entry, where, "$", problems);
}

/* ---- the handle --------------------------------------------------------------------- */

typedef struct kb_item {
    cJSON *entry; /* owned; valid */
    char *file;   /* where it was read from or saved to */
    int user;     /* from the user folder */
    int shipped;  /* a shipped entry has this id (overridden when user is set) */
} kb_item;

struct kb {
    char *user_dir;
    kb_item *items; /* sorted by id */
    int n, cap;
};

static const char *entry_id(const cJSON *e)
{
    return dt_json_str(e, "id", "");
}

/* Index of id, or -(insertion point) - 1 when absent. */
static int find(const kb *k, const char *id)
{
    int lo = 0, hi = k->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(entry_id(k->items[mid].entry), id);
        if (c == 0)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

/* Take entry and file into the table; a user entry replaces one of its id. */
static void put(kb *k, cJSON *entry, char *file, int user)
{
    int i = find(k, entry_id(entry));
    if (i >= 0) {
        kb_item *it = &k->items[i];
        cJSON_Delete(it->entry);
        free(it->file);
        it->entry = entry;
        it->file = file;
        it->shipped |= !user;
        it->user = user;
        return;
    }
    i = -i - 1;
    if (k->n == k->cap) {
        k->cap = k->cap ? 2 * k->cap : 64;
        k->items = dt_xrealloc(k->items, (size_t)k->cap * sizeof *k->items);
    }
    memmove(&k->items[i + 1], &k->items[i], (size_t)(k->n - i) * sizeof *k->items);
    k->items[i] = (kb_item){entry, file, user, !user};
    k->n++;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.json files of dir, sorted (caller frees each and the array). A
 * missing folder has none; another failure is reported in problems. */
static char **json_files(const char *dir, int *count, dt_buf *problems)
{
    *count = 0;
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno != ENOENT)
            say(problems, "%s: cannot read the folder: %s", dir, strerror(errno));
        return NULL;
    }
    char **names = NULL;
    int n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || !dt_endswith(de->d_name, ".json"))
            continue;
        char *path = dt_xasprintf("%s/%s", dir, de->d_name);
        if (!dt_file_exists(path)) {
            free(path);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 32;
            names = dt_xrealloc(names, (size_t)cap * sizeof *names);
        }
        names[n++] = path;
    }
    closedir(d);
    if (n > 0)
        qsort(names, (size_t)n, sizeof *names, cmp_str);
    *count = n;
    return names;
}

static void load_shipped(kb *k, const char *dir, dt_buf *problems)
{
    int n = 0;
    char **files = json_files(dir, &n, problems);
    for (int f = 0; f < n; f++) {
        dt_err e = {0};
        cJSON *doc = dt_json_read_file(files[f], &e);
        if (doc == NULL) {
            say(problems, "%s", e.msg);
            free(files[f]);
            continue;
        }
        int array = cJSON_IsArray(doc);
        if (!array && !cJSON_IsObject(doc)) {
            say(problems, "%s: $: expected an entry object or an array of entries, got %s",
                files[f], type_name(doc));
            cJSON_Delete(doc);
            free(files[f]);
            continue;
        }
        int i = 0;
        cJSON *next = NULL;
        for (cJSON *it = array ? doc->child : doc; it != NULL; it = next, i++) {
            next = array ? it->next : NULL;
            char root[64];
            if (array)
                idx(root, sizeof root, "$", i);
            else
                snprintf(root, sizeof root, "$");
            if (validate_at(it, files[f], root, problems) > 0)
                continue;
            int at = find(k, entry_id(it));
            if (at >= 0) {
                say(problems, "%s: %s.id: duplicate id \"%s\" (first in %s)", files[f], root,
                    entry_id(it), k->items[at].file);
                continue;
            }
            cJSON *entry = it;
            if (array)
                cJSON_DetachItemViaPointer(doc, it);
            else
                doc = NULL; /* taken whole */
            put(k, entry, dt_xstrdup(files[f]), 0);
        }
        cJSON_Delete(doc);
        free(files[f]);
    }
    free(files);
}

static void load_user(kb *k, dt_buf *problems)
{
    int n = 0;
    char **files = json_files(k->user_dir, &n, problems);
    for (int f = 0; f < n; f++) {
        dt_err e = {0};
        cJSON *doc = dt_json_read_file(files[f], &e);
        if (doc == NULL) {
            say(problems, "%s", e.msg);
        } else if (!cJSON_IsObject(doc)) {
            say(problems,
                "%s: $: expected one entry object (the user folder holds one entry per file, "
                "named ID.json), got %s",
                files[f], type_name(doc));
        } else if (validate_at(doc, files[f], "$", problems) == 0) {
            const char *base = strrchr(files[f], '/');
            base = base ? base + 1 : files[f];
            const char *id = entry_id(doc);
            if (strlen(base) != strlen(id) + 5 || strncmp(base, id, strlen(id)) != 0) {
                say(problems,
                    "%s: $.id: \"%s\" does not match the file name (rename the file "
                    "to %s.json)",
                    files[f], id, id);
            } else {
                put(k, doc, files[f], 1);
                continue; /* both taken */
            }
        }
        cJSON_Delete(doc);
        free(files[f]);
    }
    free(files);
}

kb *kb_open(const char *shipped_dir, const char *user_dir, dt_buf *problems, dt_err *e)
{
    char *udir = NULL;
    if (user_dir != NULL) {
        udir = dt_xstrdup(user_dir);
    } else {
        char *data = dt_data_dir();
        if (data == NULL) {
            dt_err_set(e, "no folder for the user's knowledge base: set XDG_DATA_HOME or HOME");
            return NULL;
        }
        udir = dt_xasprintf("%s/knowledge", data);
        free(data);
    }
    kb *k = dt_xcalloc(1, sizeof *k);
    k->user_dir = udir;
    char *sdir = shipped_dir ? dt_xstrdup(shipped_dir) : dt_share_path("knowledge");
    if (sdir == NULL) {
        if (problems)
            dt_buf_puts(problems, "knowledge: the shipped folder was not found (set DITTO_SHARE "
                                  "to the folder that holds knowledge/)\n");
    } else {
        load_shipped(k, sdir, problems);
    }
    free(sdir);
    load_user(k, problems);
    return k;
}

void kb_close(kb *k)
{
    if (k == NULL)
        return;
    for (int i = 0; i < k->n; i++) {
        cJSON_Delete(k->items[i].entry);
        free(k->items[i].file);
    }
    free(k->items);
    free(k->user_dir);
    free(k);
}

int kb_count(const kb *k)
{
    return k->n;
}

const cJSON *kb_get(const kb *k, const char *id)
{
    int i = id ? find(k, id) : -1;
    return i >= 0 ? k->items[i].entry : NULL;
}

const char *kb_origin(const kb *k, const char *id, const char **file)
{
    int i = id ? find(k, id) : -1;
    if (i < 0)
        return NULL;
    const kb_item *it = &k->items[i];
    if (file)
        *file = it->file;
    if (!it->user)
        return "shipped";
    return it->shipped ? "user (overrides shipped)" : "user";
}

const char *kb_user_dir(const kb *k)
{
    return k->user_dir;
}

static int matches_filter(const cJSON *e, const char *kind, const char *status)
{
    if (kind != NULL && *kind && !dt_streq(dt_json_str(e, "kind", ""), kind))
        return 0;
    if (status != NULL && *status && !dt_streq(dt_json_str(e, "status", ""), status))
        return 0;
    return 1;
}

cJSON *kb_list(const kb *k, const char *kind, const char *status)
{
    cJSON *arr = dt_json_arr();
    for (int i = 0; i < k->n; i++) {
        if (matches_filter(k->items[i].entry, kind, status))
            cJSON_AddItemReferenceToArray(arr, k->items[i].entry);
    }
    return arr;
}

cJSON *kb_export(const kb *k, const char *status)
{
    cJSON *arr = dt_json_arr();
    for (int i = 0; i < k->n; i++) {
        if (matches_filter(k->items[i].entry, NULL, status))
            cJSON_AddItemToArray(arr, cJSON_Duplicate(k->items[i].entry, 1));
    }
    return arr;
}

/* ---- changes ---------------------------------------------------------------------- */

static char *user_path(const kb *k, const char *id)
{
    return dt_xasprintf("%s/%s.json", k->user_dir, id);
}

/* Write entry to the user folder. Returns the path (caller frees) or NULL
 * with e set; nothing at the path changes on error. */
static char *save(const kb *k, const cJSON *entry, dt_err *e)
{
    if (dt_mkdir_p(k->user_dir, e) != 0) {
        dt_err_prefix(e, "cannot make the knowledge folder");
        return NULL;
    }
    char *path = user_path(k, entry_id(entry));
    char *text = dt_json_print(entry, 1);
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, text);
    dt_buf_putc(&b, '\n');
    free(text);
    int rc = dt_write_file_atomic(path, b.data, b.len, e);
    dt_buf_free(&b);
    if (rc != 0) {
        free(path);
        return NULL;
    }
    return path;
}

/* "first problem (and N more)" from a problems buffer, for one-line errors. */
static int first_problem(dt_err *e, const char *what, const dt_buf *p, int n)
{
    const char *s = dt_buf_str(p);
    const char *nl = strchr(s, '\n');
    int len = nl ? (int)(nl - s) : (int)strlen(s);
    if (n > 1)
        return dt_err_set(e, "%s: %.*s (and %d more)", what, len, s, n - 1);
    return dt_err_set(e, "%s: %.*s", what, len, s);
}

static void now_iso(char out[32])
{
    dt_iso_time(dt_wall_now(), out, 32);
}

int kb_propose(kb *k, const cJSON *entry, dt_err *e)
{
    if (!cJSON_IsObject(entry))
        return dt_err_set(e, "a proposal must be an entry object, got %s", type_name(entry));
    cJSON *c = cJSON_Duplicate(entry, 1);
    char now[32];
    now_iso(now);
    dt_json_set_str(c, "status", "proposed");
    dt_json_set_str(c, "created", now);
    dt_json_set_str(c, "updated", now);
    dt_json_set_take(c, "review", cJSON_CreateNull());
    dt_buf p = DT_BUF_INIT;
    int n = kb_validate(c, NULL, &p);
    if (n > 0) {
        first_problem(e, "invalid entry", &p, n);
        dt_buf_free(&p);
        cJSON_Delete(c);
        return -1;
    }
    dt_buf_free(&p);
    const char *id = entry_id(c);
    const char *origin = kb_origin(k, id, NULL);
    if (origin != NULL) {
        dt_err_set(e, "an entry with id \"%s\" exists already (%s): choose another id", id, origin);
        cJSON_Delete(c);
        return -1;
    }
    char *path = user_path(k, id);
    int exists = dt_file_exists(path);
    if (exists)
        dt_err_set(e, "%s exists but is not a valid entry: fix or remove it first", path);
    free(path);
    if (exists) {
        cJSON_Delete(c);
        return -1;
    }
    char *saved = save(k, c, e);
    if (saved == NULL) {
        cJSON_Delete(c);
        return -1;
    }
    put(k, c, saved, 1);
    return 0;
}

int kb_review(kb *k, const char *id, const char *status, const char *reviewer, const char *note,
              dt_err *e)
{
    if (!dt_streq(status, "approved") && !dt_streq(status, "rejected"))
        return dt_err_set(e, "a review's status is approved or rejected, got \"%s\"",
                          status ? status : "(none)");
    if (reviewer == NULL || reviewer[0] == '\0' || strchr(reviewer, '\n') != NULL)
        return dt_err_set(e, "a review needs the reviewer's name (one line)");
    if (dt_streq(status, "rejected") && (note == NULL || note[0] == '\0'))
        return dt_err_set(e, "rejecting needs a note saying why");
    int i = id ? find(k, id) : -1;
    if (i < 0)
        return dt_err_set(e, "no entry \"%s\" in the knowledge base", id ? id : "(none)");
    cJSON *c = cJSON_Duplicate(k->items[i].entry, 1);
    char now[32];
    now_iso(now);
    cJSON *rv = dt_json_obj();
    dt_json_set_str(rv, "reviewer", reviewer);
    if (note != NULL && note[0] != '\0')
        dt_json_set_str(rv, "note", note);
    else
        dt_json_set_take(rv, "note", cJSON_CreateNull());
    dt_json_set_str(rv, "at", now);
    dt_json_set_str(c, "status", status);
    dt_json_set_take(c, "review", rv);
    dt_json_set_str(c, "updated", now);
    /* Defensive: the entry was valid and the review is well-formed. */
    dt_buf p = DT_BUF_INIT;
    int n = kb_validate(c, NULL, &p);
    if (n > 0) {
        first_problem(e, "the reviewed entry would be invalid", &p, n);
        dt_buf_free(&p);
        cJSON_Delete(c);
        return -1;
    }
    dt_buf_free(&p);
    char *saved = save(k, c, e);
    if (saved == NULL) {
        cJSON_Delete(c);
        return -1;
    }
    put(k, c, saved, 1);
    return 0;
}

/* Equal apart from the times: importing the same file twice (as proposed,
 * which stamps updated) changes nothing. */
/* Whether two entries say the same: their times, status and review (what
 * a reviewer here decided) aside. */
static int same_entry(const cJSON *a, const cJSON *b)
{
    cJSON *x = cJSON_Duplicate(a, 1), *y = cJSON_Duplicate(b, 1);
    static const char *times[] = {"created", "updated", "status", "review"};
    for (size_t i = 0; i < DT_ARRAY_LEN(times); i++) {
        cJSON_DeleteItemFromObjectCaseSensitive(x, times[i]);
        cJSON_DeleteItemFromObjectCaseSensitive(y, times[i]);
    }
    int same = cJSON_Compare(x, y, 1);
    cJSON_Delete(x);
    cJSON_Delete(y);
    return same;
}

int kb_import(kb *k, const char *path, dt_buf *problems, dt_err *e)
{
    cJSON *doc = dt_json_read_file(path, e);
    if (doc == NULL)
        return -1;
    if (!cJSON_IsObject(doc) && !cJSON_IsArray(doc)) {
        dt_err_set(e, "%s: $: expected an entry object or an array of entries, got %s", path,
                   type_name(doc));
        cJSON_Delete(doc);
        return -1;
    }
    int array = cJSON_IsArray(doc);
    int count = array ? cJSON_GetArraySize(doc) : 1;
    cJSON **todo = dt_xcalloc((size_t)count + 1, sizeof *todo);
    int ntodo = 0, nbad = 0;
    char now[32];
    now_iso(now);
    int i = 0;
    for (cJSON *it = array ? doc->child : doc; it != NULL; it = array ? it->next : NULL, i++) {
        char root[64];
        if (array)
            idx(root, sizeof root, "$", i);
        else
            snprintf(root, sizeof root, "$");
        cJSON *c = cJSON_Duplicate(it, 1);
        /* Someone else's approval is no review here: every imported entry
         * arrives proposed, for a local reviewer. */
        if (cJSON_IsObject(c)) {
            dt_json_set_str(c, "status", "proposed");
            dt_json_set_take(c, "review", cJSON_CreateNull());
            dt_json_set_str(c, "updated", now);
            if (cJSON_GetObjectItemCaseSensitive(c, "created") == NULL)
                dt_json_set_str(c, "created", now);
        }
        int n = validate_at(c, path, root, problems);
        nbad += n;
        if (n > 0) {
            cJSON_Delete(c);
            continue;
        }
        const char *id = entry_id(c);
        int dup = 0;
        for (int j = 0; j < ntodo && !dup; j++)
            dup = dt_streq(entry_id(todo[j]), id);
        int at = find(k, id);
        char *file = user_path(k, id);
        if (dup) {
            say(problems, "%s: %s.id: \"%s\" appears twice in the file", path, root, id);
            nbad++;
        } else if (at >= 0 && same_entry(k->items[at].entry, c)) {
            /* already there, unchanged: nothing to do */
        } else if (at >= 0 && k->items[at].user) {
            say(problems,
                "%s: %s.id: \"%s\" is already in your knowledge base with other content (%s): "
                "remove that file or rename the entry",
                path, root, id, k->items[at].file);
            nbad++;
        } else if (at < 0 && dt_file_exists(file)) {
            say(problems, "%s: %s.id: %s exists but is not a valid entry: fix or remove it first",
                path, root, file);
            nbad++;
        } else {
            todo[ntodo++] = c;
            c = NULL;
        }
        free(file);
        cJSON_Delete(c);
    }
    cJSON_Delete(doc);
    if (nbad > 0) {
        for (int j = 0; j < ntodo; j++)
            cJSON_Delete(todo[j]);
        free(todo);
        return dt_err_set(e, "%s: nothing imported: %d problem%s", path, nbad,
                          nbad == 1 ? "" : "s");
    }
    /* Write every file first, then change the table, so that a failed
     * write leaves both the folder and the handle as they were. */
    char **saved = dt_xcalloc((size_t)ntodo + 1, sizeof *saved);
    for (int j = 0; j < ntodo; j++) {
        saved[j] = save(k, todo[j], e);
        if (saved[j] == NULL) {
            for (int m = 0; m < j; m++) {
                unlink(saved[m]);
                free(saved[m]);
            }
            for (int m = 0; m < ntodo; m++)
                cJSON_Delete(todo[m]);
            free(saved);
            free(todo);
            return dt_err_prefix(e, "%s: nothing imported", path);
        }
    }
    for (int j = 0; j < ntodo; j++)
        put(k, todo[j], saved[j], 1);
    free(saved);
    free(todo);
    return ntodo;
}

/* ---- retrieval -------------------------------------------------------------------- */

static int list_has(const cJSON *arr, const char *s)
{
    for (const cJSON *it = arr ? arr->child : NULL; it != NULL; it = it->next) {
        if (cJSON_IsString(it) && dt_streq(it->valuestring, s))
            return 1;
    }
    return 0;
}

static int cc_matches(const cJSON *arr, const char *cc)
{
    long want = cc_parse(cc, 0, NULL);
    for (const cJSON *it = arr->child; it != NULL; it = it->next) {
        int plus = 0;
        long have = cJSON_IsString(it) ? cc_parse(it->valuestring, 1, &plus) : -1;
        if (have < 0 || want < 0)
            continue;
        if (plus ? want >= have : want == have)
            return 1;
    }
    return 0;
}

static int applies(const cJSON *entry, const char *op, const char *dtype, const char *cc)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(entry, "applies_to");
    if (a == NULL)
        return 1;
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(a, "op");
    if (op && *op && x != NULL && !list_has(x, op))
        return 0;
    x = cJSON_GetObjectItemCaseSensitive(a, "dtype");
    if (dtype && *dtype && x != NULL && !list_has(x, dtype))
        return 0;
    x = cJSON_GetObjectItemCaseSensitive(a, "cc");
    if (cc && *cc && x != NULL && !cc_matches(x, cc))
        return 0;
    return 1;
}

static double scaled(const kb_feature *f, double x)
{
    return f->log ? log2(1.0 + (x > 0 ? x : 0)) : x;
}

/* The distance of the query from the entry's feature ranges; *matched
 * counts the ranges the query has a value inside (what makes an entry
 * about this problem rather than merely not against it). */
static double distance(const cJSON *entry, const cJSON *query, int *matched)
{
    *matched = 0;
    const cJSON *fs = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(entry, "applies_to"), "features");
    double d = 0.0;
    for (const cJSON *r = fs ? fs->child : NULL; r != NULL; r = r->next) {
        const kb_feature *f = feature_find(r->string);
        const cJSON *q = cJSON_GetObjectItemCaseSensitive(query, r->string);
        if (f == NULL)
            continue;
        double qv = cJSON_IsNumber(q) ? q->valuedouble : f->absent;
        if (!isfinite(qv))
            continue;
        const cJSON *lo = cJSON_GetArrayItem(r, 0), *hi = cJSON_GetArrayItem(r, 1);
        int has_lo = cJSON_IsNumber(lo), has_hi = cJSON_IsNumber(hi);
        double v = scaled(f, qv);
        double l = has_lo ? scaled(f, lo->valuedouble) : 0;
        double h = has_hi ? scaled(f, hi->valuedouble) : 0;
        double out = 0.0;
        if (has_lo && v < l)
            out = l - v;
        else if (has_hi && v > h)
            out = v - h;
        if (out <= 0) {
            *matched += cJSON_IsNumber(q) && (has_lo || has_hi);
            continue;
        }
        double width = (has_lo && has_hi) ? h - l : 0.0;
        d += out / (width > f->unit ? width : f->unit);
    }
    return d;
}

typedef struct scored {
    const cJSON *entry;
    double d;
    int matched; /* feature ranges the query falls inside */
} scored;

static int cmp_scored(const void *a, const void *b)
{
    const scored *x = a, *y = b;
    if (x->d < y->d)
        return -1;
    if (x->d > y->d)
        return 1;
    if (x->matched != y->matched)
        return x->matched > y->matched ? -1 : 1;
    return strcmp(entry_id(x->entry), entry_id(y->entry));
}

cJSON *kb_retrieve(const kb *k, const char *kind, const char *op, const char *dtype, const char *cc,
                   const cJSON *features_q, int max)
{
    scored *s = dt_xcalloc((size_t)k->n + 1, sizeof *s);
    int n = 0;
    for (int i = 0; i < k->n; i++) {
        const cJSON *e = k->items[i].entry;
        if (!matches_filter(e, kind, "approved") || !applies(e, op, dtype, cc))
            continue;
        s[n].entry = e;
        s[n].d = distance(e, features_q, &s[n].matched);
        n++;
    }
    qsort(s, (size_t)n, sizeof *s, cmp_scored);
    cJSON *arr = dt_json_arr();
    for (int i = 0; i < n && (max <= 0 || i < max); i++) {
        cJSON *c = cJSON_Duplicate(s[i].entry, 1);
        dt_json_set_num(c, "distance", s[i].d);
        dt_json_set_int(c, "matched", s[i].matched);
        cJSON_AddItemToArray(arr, c);
    }
    free(s);
    return arr;
}
