/* kb.c -- the knowledge base: shipped and user entries, validation with JSON
 * paths, proposals and reviews saved atomically, import, export, and
 * retrieval ranked by feature distance.
 * Over 1,000 lines: the store and its review life cycle are one set of
 * invariants (what is approved, by whom, overriding what). */
#include "knowledge/knowledge.h"

#include "core/schema.h"

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

static int id_ok(const cJSON *v)
{
    return id_valid(v->valuestring);
}

static int time_ok(const cJSON *v)
{
    return iso_time_valid(v->valuestring);
}

static int cc_ok(const cJSON *v)
{
    return cc_parse(v->valuestring, 1, NULL) >= 0;
}

static const char *const kinds[] = {"rule",          "strategy", "pitfall", "error-explanation",
                                    "hardware-fact", NULL};
static const char *const statuses[] = {"proposed", "approved", "rejected", NULL};
static const char *const ops[] = {"spmv", "spmm", "sddmm", NULL};
static const char *const dtypes[] = {"fp32", "fp64", "fp16", "bf16", NULL};
static const char *const severities[] = {"error", "warning", "note", NULL};

#define ID_WHAT "[a-z0-9._-] starting with a letter or digit, at most 128 characters"
static const dt_schema id_s = {.type = DT_SCHEMA_STR, .valid = id_ok, .what = ID_WHAT};
static const dt_schema rule_id_s = {
    .type = DT_SCHEMA_STR, .valid = id_ok, .what = "a rule id of " ID_WHAT};
static const dt_schema time_s = {.type = DT_SCHEMA_STR,
                                 .valid = time_ok,
                                 .what = "an ISO 8601 time such as \"2026-11-29T09:19:06Z\""};
static const dt_schema kind_s = {.type = DT_SCHEMA_STR, .choices = kinds};
static const dt_schema status_s = {.type = DT_SCHEMA_STR, .choices = statuses};
static const dt_schema severity_s = {.type = DT_SCHEMA_STR, .choices = severities};
static const dt_schema title_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = KB_TITLE_MAX};
static const dt_schema content_s = {.type = DT_SCHEMA_STR, .min_len = 1, .max_len = KB_TEXT_MAX};
static const dt_schema line_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = KB_TEXT_MAX};
static const dt_schema short_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_ONELINE, .min_len = 1, .max_len = KB_NOTE_MAX};
static const dt_schema note_s = {.type = DT_SCHEMA_STR, .min_len = 1, .max_len = KB_NOTE_MAX};

/* applies_to */
static const dt_schema op_s = {.type = DT_SCHEMA_STR, .choices = ops};
static const dt_schema dtype_s = {.type = DT_SCHEMA_STR, .choices = dtypes};
static const dt_schema cc_s = {
    .type = DT_SCHEMA_STR, .valid = cc_ok, .what = "a compute capability \"M.m\" or \"M.m+\""};
#define NAMES_WHAT "a non-empty array (drop the key to match everything)"
static const dt_schema ops_s = {
    .type = DT_SCHEMA_ARR, .min_len = 1, .items = &op_s, .what = NAMES_WHAT};
static const dt_schema dtypes_s = {
    .type = DT_SCHEMA_ARR, .min_len = 1, .items = &dtype_s, .what = NAMES_WHAT};
static const dt_schema ccs_s = {
    .type = DT_SCHEMA_ARR, .min_len = 1, .items = &cc_s, .what = NAMES_WHAT};
/* Every feature is non-negative; null is an open end. */
static const dt_schema range_end_s = {
    .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_NULL, .min = 0, .max = HUGE_VAL};

/* [min, max]: not both open, min <= max. */
static void range_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *r)
{
    (void)s;
    const cJSON *lo = cJSON_GetArrayItem(r, 0), *hi = cJSON_GetArrayItem(r, 1);
    if (!dt_schema_valid(&range_end_s, lo) || !dt_schema_valid(&range_end_s, hi))
        return;
    if (cJSON_IsNull(lo) && cJSON_IsNull(hi))
        dt_schema_bad(c, path,
                      "expected at least one bound, got both open (which matches "
                      "everything: drop the feature)");
    else if (!cJSON_IsNull(lo) && !cJSON_IsNull(hi) && lo->valuedouble > hi->valuedouble)
        dt_schema_bad(c, path, "expected min <= max, got min %g and max %g", lo->valuedouble,
                      hi->valuedouble);
}

static const dt_schema range_s = {.type = DT_SCHEMA_ARR,
                                  .min_len = 2,
                                  .max_len = 2,
                                  .items = &range_end_s,
                                  .check = range_rules,
                                  .what = "[min, max] (numbers, null for an open end)"};
/* The names of features[] above, in order (a test holds the two equal). */
#define FEATURE_WHAT                                                                               \
    "a feature name (rows, cols, nnz, density, row_mean, row_cv, row_max, row_max_over_mean, "     \
    "row_gini, empty_rows_frac, bandwidth_frac, diagonals, block_fill_2, block_fill_4, "           \
    "block_fill_8, block_fill_16, x_lines_per_nnz, col_span_max, distinct_values, n)"

static const dt_schema ranges_s = {
    .type = DT_SCHEMA_MAP, .items = &range_s, .key_valid = kb_is_feature, .key_what = FEATURE_WHAT};
static const dt_schema_field applies_fields[] = {{"op", &ops_s, 0},
                                                 {"dtype", &dtypes_s, 0},
                                                 {"cc", &ccs_s, 0},
                                                 {"features", &ranges_s, 0},
                                                 {NULL, NULL, 0}};
static const dt_schema applies_s = {.type = DT_SCHEMA_OBJ, .fields = applies_fields};

/* parameters, by kind */
static const dt_schema value_str_s = {.type = DT_SCHEMA_STR, .max_len = KB_TEXT_MAX};
static const dt_schema value_num_s = {.type = DT_SCHEMA_NUM};
static const dt_schema *const value_alts[] = {&value_str_s, &value_num_s, NULL};
static const dt_schema value_s = {.type = DT_SCHEMA_ONEOF, .alts = value_alts};
static const dt_schema values_s = {.type = DT_SCHEMA_ARR, .min_len = 1, .items = &value_s};
static const dt_schema params_s = {.type = DT_SCHEMA_MAP, .items = &values_s};
static const dt_schema score_s = {.type = DT_SCHEMA_NUM, .min = 0, .max = 100};
static const dt_schema_field rule_fields[] = {
    {"strategy", &line_s, 1}, {"params", &params_s, 1}, {"score", &score_s, 1}, {NULL, NULL, 0}};
static const dt_schema rule_s = {.type = DT_SCHEMA_OBJ, .fields = rule_fields};
static const dt_schema_field error_fields[] = {
    {"pattern", &line_s, 1}, {"hint", &content_s, 1}, {"unless", &line_s, 0}, {NULL, NULL, 0}};
static const dt_schema error_s = {.type = DT_SCHEMA_OBJ, .fields = error_fields};
static const dt_schema patterns_s = {.type = DT_SCHEMA_ARR, .min_len = 1, .items = &line_s};
static const dt_schema *const pattern_alts[] = {&line_s, &patterns_s, NULL};
static const dt_schema pattern_s = {.type = DT_SCHEMA_ONEOF, .alts = pattern_alts};

/* A static rule is shown as a diagnostic: it needs its one-line message
 * and a severity. */
static void pitfall_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    if (cJSON_GetObjectItemCaseSensitive(v, "rule_id") == NULL)
        return;
    static const char *const need[] = {"message", "severity"};
    for (size_t i = 0; i < DT_ARRAY_LEN(need); i++) {
        if (cJSON_GetObjectItemCaseSensitive(v, need[i]) != NULL)
            continue;
        char p[DT_SCHEMA_PATH_MAX];
        dt_schema_path(p, sizeof p, path, need[i]);
        dt_schema_expected(c, p, NULL, "%s (a pitfall with a rule_id is a diagnostic)",
                           i == 0 ? "a one-line message" : "one of error, warning, note");
    }
    (void)s;
}

static const dt_schema_field pitfall_fields[] = {
    {"rule_id", &rule_id_s, 0}, {"severity", &severity_s, 0},
    {"message", &line_s, 0},    {"pattern", &pattern_s, 0},
    {"detect", &content_s, 0},  {"explanation", &content_s, 0},
    {"fix", &content_s, 0},     {NULL, NULL, 0}};
static const dt_schema pitfall_s = {
    .type = DT_SCHEMA_OBJ, .fields = pitfall_fields, .check = pitfall_rules};
/* Strategies and hardware facts take free-form parameters. */
static const dt_schema parameters_s = {.type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN};

/* evidence */
static const dt_schema feature_value_s = {.type = DT_SCHEMA_NUM};
static const dt_schema feature_values_s = {.type = DT_SCHEMA_MAP,
                                           .items = &feature_value_s,
                                           .key_valid = kb_is_feature,
                                           .key_what = FEATURE_WHAT};
static const dt_schema speedup_s = {
    .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_GT_MIN, .min = 0, .max = HUGE_VAL};
static const dt_schema measured_s = {.type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN};

static void evidence_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    (void)s;
    if (cJSON_GetObjectItemCaseSensitive(v, "speedup") == NULL &&
        cJSON_GetObjectItemCaseSensitive(v, "measured") == NULL)
        dt_schema_bad(c, path, "expected speedup or measured in an evidence item, got neither");
}

static const dt_schema_field evidence_fields[] = {{"session", &short_s, 0},
                                                  {"gpu", &short_s, 0},
                                                  {"matrix", &short_s, 0},
                                                  {"fingerprint", &short_s, 0},
                                                  {"features", &feature_values_s, 0},
                                                  {"speedup", &speedup_s, 0},
                                                  {"measured", &measured_s, 0},
                                                  {"note", &note_s, 0},
                                                  {NULL, NULL, 0}};
static const dt_schema evidence_item_s = {
    .type = DT_SCHEMA_OBJ, .fields = evidence_fields, .check = evidence_rules};
static const dt_schema evidence_s = {.type = DT_SCHEMA_ARR, .items = &evidence_item_s};

/* review */
static const dt_schema review_note_s = {
    .type = DT_SCHEMA_STR, .flags = DT_SCHEMA_NULL, .max_len = KB_NOTE_MAX};
static const dt_schema_field review_fields[] = {
    {"reviewer", &short_s, 1}, {"note", &review_note_s, 0}, {"at", &time_s, 1}, {NULL, NULL, 0}};
static const dt_schema review_s = {
    .type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_NULL, .fields = review_fields};

/* What the kind and the status ask of parameters and review. */
static void entry_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    char p[DT_SCHEMA_PATH_MAX];
    const cJSON *kind = dt_schema_get(s, v, "kind");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(v, "parameters");
    dt_schema_path(p, sizeof p, path, "parameters");
    static const struct {
        const char *kind;
        const dt_schema *schema;
        const char *what; /* NULL: parameters are optional */
    } by_kind[] = {{"rule", &rule_s, "{strategy, params, score} for a rule"},
                   {"error-explanation", &error_s, "{pattern, hint} for an error explanation"},
                   {"pitfall", &pitfall_s, NULL}};
    for (size_t i = 0; kind != NULL && i < DT_ARRAY_LEN(by_kind); i++) {
        if (!dt_streq(kind->valuestring, by_kind[i].kind))
            continue;
        if (pr == NULL && by_kind[i].what != NULL)
            dt_schema_expected(c, p, NULL, "%s", by_kind[i].what);
        else if (cJSON_IsObject(pr))
            dt_schema_check_at(by_kind[i].schema, pr, p, c);
    }

    const cJSON *status = dt_schema_get(s, v, "status");
    const cJSON *rv = dt_schema_get(s, v, "review");
    if (status == NULL || (cJSON_GetObjectItemCaseSensitive(v, "review") != NULL && rv == NULL))
        return;
    const char *st = status->valuestring;
    dt_schema_path(p, sizeof p, path, "review");
    if (!dt_streq(st, "proposed") && !cJSON_IsObject(rv)) {
        dt_schema_expected(c, p, rv, "{reviewer, note, at} for an %s entry", st);
    } else if (dt_streq(st, "proposed") && cJSON_IsObject(rv)) {
        dt_schema_expected(c, p, rv, "null for a proposed entry (it has no review yet)");
    } else if (dt_streq(st, "rejected")) {
        const cJSON *note = cJSON_GetObjectItemCaseSensitive(rv, "note");
        if (!cJSON_IsString(note) || note->valuestring[0] == '\0') {
            char q[DT_SCHEMA_PATH_MAX];
            dt_schema_path(q, sizeof q, p, "note");
            dt_schema_expected(c, q, note, "a note saying why for a rejected entry");
        }
    }
}

static const dt_schema_field entry_fields[] = {{"id", &id_s, 1},
                                               {"kind", &kind_s, 1},
                                               {"title", &title_s, 1},
                                               {"applies_to", &applies_s, 0},
                                               {"content", &content_s, 1},
                                               {"parameters", &parameters_s, 0},
                                               {"evidence", &evidence_s, 0},
                                               {"status", &status_s, 1},
                                               {"review", &review_s, 0},
                                               {"created", &time_s, 1},
                                               {"updated", &time_s, 1},
                                               {NULL, NULL, 0}};
static const dt_schema entry_s = {
    .type = DT_SCHEMA_OBJ, .fields = entry_fields, .check = entry_rules, .what = "an entry object"};

static int validate_at(const cJSON *entry, const char *where, const char *root, dt_buf *out)
{
    dt_schema_ctx c = {.file = where, .out = out};
    return dt_schema_check_at(&entry_s, entry, root, &c);
}

int kb_validate(const cJSON *entry, const char *where, dt_buf *problems)
{
    return validate_at(entry, where, "$", problems);
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

/* What a file holds, before its entries are checked one by one. */
static const dt_schema one_s = {
    .type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN, .what = "an entry object"};
static const dt_schema many_s = {.type = DT_SCHEMA_ARR};
static const dt_schema *const doc_alts[] = {&one_s, &many_s, NULL};
static const dt_schema doc_s = {
    .type = DT_SCHEMA_ONEOF, .alts = doc_alts, .what = "an entry object or an array of entries"};
static const dt_schema user_doc_s = {.type = DT_SCHEMA_OBJ,
                                     .flags = DT_SCHEMA_OPEN,
                                     .what = "one entry object (the user folder holds one entry "
                                             "per file, named ID.json)"};

/* The path of entry i of a file ("$" when the file is one entry). */
static void entry_root(char *out, size_t n, int array, int i)
{
    if (array)
        dt_schema_index(out, n, "$", i);
    else
        snprintf(out, n, "$");
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
        dt_schema_ctx c = {.file = files[f], .out = problems};
        if (dt_schema_check(&doc_s, doc, &c) > 0) {
            cJSON_Delete(doc);
            free(files[f]);
            continue;
        }
        int i = 0;
        cJSON *next = NULL;
        for (cJSON *it = array ? doc->child : doc; it != NULL; it = next, i++) {
            next = array ? it->next : NULL;
            char root[64];
            entry_root(root, sizeof root, array, i);
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
        } else if (!dt_schema_valid(&user_doc_s, doc)) {
            dt_schema_ctx c = {.file = files[f], .out = problems};
            dt_schema_check(&user_doc_s, doc, &c);
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

static void now_iso(char out[32])
{
    dt_iso_time(dt_wall_now(), out, 32);
}

int kb_propose(kb *k, const cJSON *entry, dt_err *e)
{
    if (dt_schema_validate(&one_s, entry, "the proposal", e) != 0)
        return -1;
    cJSON *c = cJSON_Duplicate(entry, 1);
    char now[32];
    now_iso(now);
    dt_json_set_str(c, "status", "proposed");
    dt_json_set_str(c, "created", now);
    dt_json_set_str(c, "updated", now);
    dt_json_set_take(c, "review", cJSON_CreateNull());
    if (dt_schema_validate(&entry_s, c, "invalid entry", e) != 0) {
        cJSON_Delete(c);
        return -1;
    }
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
    if (dt_schema_validate(&entry_s, c, "the reviewed entry would be invalid", e) != 0) {
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
    if (dt_schema_validate(&doc_s, doc, path, e) != 0) {
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
        entry_root(root, sizeof root, array, i);
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
