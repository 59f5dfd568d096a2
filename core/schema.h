/* schema.h -- one declarative checker for the JSON that comes from outside
 * (specs, config, knowledge entries, hardware files, worker requests).
 *
 * A schema is a static const table: the type, whether null is accepted,
 * bounds (numbers), lengths (strings, arrays), the allowed strings, the
 * fields of an object (required or not) and what to do with other keys,
 * the schema of array elements or map values. One walker checks a value
 * against it and writes one line per problem, in one style everywhere:
 *
 *     FILE: $.path.to[3].field: expected WHAT, got WHAT
 *
 * What a table cannot say (a minimum that is another field, a rule that
 * spans keys) is a hook: it runs after the value's own checks and reports
 * through dt_schema_bad/dt_schema_expected with the same prefix.
 *
 * The walk descends only where the schema does, and no deeper than
 * DT_SCHEMA_MAX_DEPTH, so its stack and time are bounded by the schema,
 * not by the input. Everything written is made safe for a terminal.
 * Ownership: nothing here takes or keeps the checked values. */
#ifndef DITTO_SCHEMA_H
#define DITTO_SCHEMA_H

#include "core/core.h"

typedef enum dt_schema_type {
    DT_SCHEMA_ANY,   /* any value, not looked into */
    DT_SCHEMA_STR,   /* a string: choices, min_len/max_len (bytes), valid */
    DT_SCHEMA_NUM,   /* a finite number within [min, max] */
    DT_SCHEMA_INT,   /* an integral number within [min, max] and int64's range */
    DT_SCHEMA_BOOL,  /* true or false */
    DT_SCHEMA_OBJ,   /* an object of the listed fields */
    DT_SCHEMA_ARR,   /* an array of items, min_len to max_len of them */
    DT_SCHEMA_MAP,   /* an object of NAME: items, names checked by key_valid */
    DT_SCHEMA_ONEOF, /* the first of alts whose JSON type the value has */
} dt_schema_type;

/* flags */
#define DT_SCHEMA_NULL    1u  /* null is accepted as well */
#define DT_SCHEMA_ONELINE 2u  /* STR: no newline */
#define DT_SCHEMA_OPEN    4u  /* OBJ: keys not listed are accepted */
#define DT_SCHEMA_GT_MIN  8u  /* NUM: strictly above min */
#define DT_SCHEMA_BYTES   16u /* STR: min_len/max_len count bytes, not characters */

/* The deepest the walker goes; deeper values are one problem. */
#define DT_SCHEMA_MAX_DEPTH 32
/* A path longer than this is cut (with "..."): keys come from the input. */
#define DT_SCHEMA_PATH_MAX 256

typedef struct dt_schema dt_schema;
typedef struct dt_schema_ctx dt_schema_ctx;

typedef struct dt_schema_field {
    const char *key;         /* NULL ends a field list */
    const dt_schema *schema; /* NULL: any value */
    int required;
} dt_schema_field;

struct dt_schema {
    dt_schema_type type;
    unsigned flags;
    double min, max;                /* NUM, INT: bounds unless both 0 (may be +-HUGE_VAL) */
    size_t min_len, max_len;        /* STR bytes, ARR items, MAP names; max 0: unbounded */
    const char *const *choices;     /* STR: allowed values, NULL-terminated */
    const dt_schema_field *fields;  /* OBJ */
    const dt_schema *items;         /* ARR elements, MAP values (NULL: any) */
    const dt_schema *const *alts;   /* ONEOF, NULL-terminated */
    int (*valid)(const cJSON *v);   /* STR, NUM, INT: a further rule; 0 fails */
    int (*key_valid)(const char *); /* MAP: a name rule; 0 fails */
    const char *key_what;           /* MAP: what a name must be, for messages */
    /* Runs after v passed its type check (its children may have failed):
     * rules across fields. s is this schema, path v's path. */
    void (*check)(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v);
    const char *what; /* the "expected ..." text; NULL: made from the table */
};

/* Where problems go. Zero-initialise, then set what applies. */
struct dt_schema_ctx {
    const char *file; /* each line starts "FILE: "; NULL: with the path */
    dt_buf *out;      /* problems, one per line; NULL: only counted */
    int max;          /* lines written at most (0: all); all are counted */
    int n;            /* problems found so far */
    void *ud;         /* for hooks, untouched */
};

/* Check v against s at path "$" (root: another start, such as "$[3]").
 * Returns the number of problems this call found (0: valid). Never
 * fails otherwise; v may be NULL (a missing document). */
int dt_schema_check(const dt_schema *s, const cJSON *v, dt_schema_ctx *c);
int dt_schema_check_at(const dt_schema *s, const cJSON *v, const char *root, dt_schema_ctx *c);
/* Whether v passes s, writing nothing. */
int dt_schema_valid(const dt_schema *s, const cJSON *v);
/* One call for callers that want one error: 0 when v passes, else -1 with
 * the first problem in e (FILE: $.path: expected ..., got ...), and
 * "(and N more)" when there are more. file may be NULL. */
int dt_schema_validate(const dt_schema *s, const cJSON *v, const char *file, dt_err *e);
/* The same with every problem after "FILE: ", joined by "; ", and "(N
 * problems)" when there are several (as much as a dt_err holds). */
int dt_schema_validate_all(const dt_schema *s, const cJSON *v, const char *file, dt_err *e);

/* For hooks. A problem at path in the house style. */
void dt_schema_bad(dt_schema_ctx *c, const char *path, const char *fmt, ...) DT_PRINTF(3, 4);
/* "expected WHAT, got V" (V as the walker shows values; NULL: nothing). */
void dt_schema_expected(dt_schema_ctx *c, const char *path, const cJSON *v, const char *fmt, ...)
    DT_PRINTF(4, 5);
/* obj[key] when it is present and passes the schema s gives it (s an
 * OBJ schema); NULL otherwise. For rules across fields: they apply only
 * to values that are right on their own. */
const cJSON *dt_schema_get(const dt_schema *s, const cJSON *obj, const char *key);
/* The same for an INT or NUM field, as a number: 0 and *out set when
 * valid, else -1 and *out untouched. */
int dt_schema_get_int(const dt_schema *s, const cJSON *obj, const char *key, int64_t *out);
int dt_schema_get_num(const dt_schema *s, const cJSON *obj, const char *key, double *out);
/* "PATH.key" or "PATH[i]" into out (n bytes; cut with "..." when long). */
void dt_schema_path(char *out, size_t n, const char *path, const char *key);
void dt_schema_index(char *out, size_t n, const char *path, int i);
/* How the walker shows a value in "got ...": "\"text\"" (cut), 42, true,
 * null, an array, an object, nothing. */
void dt_schema_show(dt_buf *b, const cJSON *v);

#endif /* DITTO_SCHEMA_H */
