/* contract.c -- launch contracts: parsing, the parameter vocabulary and the
 * integer expression evaluator for grid, block and shared-memory formulas. */
#include "gpu/contract.h"

#include "core/schema.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* clang-format off */
static const char *vocabulary[] = {
    /* sizes */
    "rows", "cols", "nnz", "n", "k", "max_row",
    /* CSR, and COO's row of each nonzero */
    "rowptr", "col", "val", "coo_row",
    /* ELL */
    "ell_col", "ell_val", "width",
    /* SELL-C-sigma */
    "sell_ptr", "sell_len", "sell_perm", "sell_col", "sell_val", "nslices",
    /* a value dictionary: one-byte indices into 256 values */
    "sell_vidx", "vtab",
    /* BSR */
    "bsr_ptr", "bsr_col", "bsr_val", "brows", "b",
    /* row bins (CSR with rows grouped by length); the long bin's row and
     * nonzero counts and threshold, for kernels that split its rows */
    "bin_rows", "bin_ptr", "bin_long_ptr", "bin6", "long_nnz", "long_row",
    /* compressed column offsets */
    "col16", "slice_base", "slice_span", "slice_shift",
    /* sell16's long rows left out of the slices, as CSR */
    "nlong", "long_rows", "long_ptr", "long_col", "long_val",
    /* seg16: tiles of whole rows as one flat stream of flagged entries */
    "ntiles", "tile_row", "tile_base", "seg_col", "seg_val",
    /* dtile: SDDMM's non-empty dense tiles, a mask and a first position a tile row */
    "tile_rc", "tile_rbase", "tile_rmask",
    /* runion: one entry per (group of rows, column): column, group, positions */
    "nent", "un_ent",
    /* dense operands */
    "x", "y", "B", "C", "A", "Bt", "out", "bias",
    /* scalars and scratch */
    "alpha", "beta", "scratch",
};
/* clang-format on */

int gpu_param_known(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(vocabulary); i++)
        if (strcmp(name, vocabulary[i]) == 0)
            return 1;
    return 0;
}

/* ---- variables ----------------------------------------------------------- */

void gpu_vars_set(gpu_vars *v, const char *name, int64_t val)
{
    for (int i = 0; i < v->n; i++) {
        if (strcmp(v->name[i], name) == 0) {
            v->val[i] = val;
            return;
        }
    }
    if (v->n < GPU_MAX_VARS) {
        v->name[v->n] = name;
        v->val[v->n] = val;
        v->n++;
    }
}

int gpu_vars_get(const gpu_vars *v, const char *name, int64_t *out)
{
    for (int i = 0; v != NULL && i < v->n; i++) {
        if (strcmp(v->name[i], name) == 0) {
            *out = v->val[i];
            return 0;
        }
    }
    return -1;
}

/* ---- expressions: recursive descent ------------------------------------- */

/* The evaluator is total: every input ends in a value or an error. Integer
 * arithmetic is checked (overflow, INT64_MIN / -1, division by zero are
 * errors, never undefined behaviour or SIGFPE), and nesting -- parentheses,
 * unary operators, function calls -- is limited so that a hostile
 * expression cannot exhaust the stack. Expressions come from generated
 * kernels, edited plans and sessions on disk. */
#define EXPR_MAX_DEPTH 64
#define EXPR_MAX_LEN 4096

typedef struct parser {
    const char *src;
    const char *p;
    const gpu_vars *vars; /* NULL: syntax check only */
    dt_err *e;
    int failed;
    int depth; /* current nesting of parentheses, unary operators and calls */
} parser;

static int64_t parse_sum(parser *ps);
static int64_t parse_or(parser *ps);

static void fail(parser *ps, const char *what)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    dt_err_set(ps->e, "expression '%.200s%s': %s at position %d", ps->src,
               strlen(ps->src) > 200 ? "..." : "", what, (int)(ps->p - ps->src) + 1);
}

static void skip_ws(parser *ps)
{
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static int accept(parser *ps, char c)
{
    skip_ws(ps);
    if (*ps->p == c) {
        ps->p++;
        return 1;
    }
    return 0;
}

/* Enter one level of nesting; 0 when the limit is reached (and the parse
 * has failed). */
static int enter(parser *ps)
{
    if (ps->depth >= EXPR_MAX_DEPTH) {
        fail(ps, "nested too deeply (at most 64 levels of parentheses, unary operators and calls)");
        return 0;
    }
    ps->depth++;
    return 1;
}

/* Checked arithmetic: on overflow the parse fails with what overflowed. */
static int64_t checked(parser *ps, char op, int64_t a, int64_t b)
{
    int64_t r = 0;
    int over = 0;
    switch (op) {
    case '+':
        over = __builtin_add_overflow(a, b, &r);
        break;
    case '-':
        over = __builtin_sub_overflow(a, b, &r);
        break;
    case '*':
        over = __builtin_mul_overflow(a, b, &r);
        break;
    default: /* '/' and '%' */
        if (b == 0) {
            fail(ps, op == '/' ? "division by zero" : "remainder by zero");
            return 0;
        }
        if (a == INT64_MIN && b == -1) {
            if (op == '%')
                return 0;
            over = 1;
            break;
        }
        r = op == '/' ? a / b : a % b;
        break;
    }
    if (over) {
        char msg[96];
        snprintf(msg, sizeof msg, "integer overflow in '%c' (the result is outside 64 bits)", op);
        fail(ps, msg);
        return 0;
    }
    return r;
}

static int64_t parse_call(parser *ps, const char *name, size_t len)
{
    int64_t a = parse_or(ps);
    if (!accept(ps, ',')) {
        fail(ps, "expected ',' between the two arguments");
        return 0;
    }
    int64_t b = parse_or(ps);
    if (!accept(ps, ')')) {
        fail(ps, "expected ')'");
        return 0;
    }
    if (ps->failed || ps->vars == NULL)
        return 1;
    if (len == 4 && strncmp(name, "cdiv", 4) == 0) {
        if (b == 0) {
            fail(ps, "cdiv by zero");
            return 0;
        }
        /* Ceiling of a / b for every sign, without forming a + b - 1. */
        int64_t q = checked(ps, '/', a, b);
        if (!ps->failed && a % b != 0 && (a < 0) == (b < 0))
            q++; /* |q| < |a| here, so this cannot overflow */
        return q;
    }
    if (len == 3 && strncmp(name, "min", 3) == 0)
        return a < b ? a : b;
    return a > b ? a : b; /* max: the only other name parse_atom lets through */
}

static int64_t parse_atom(parser *ps)
{
    skip_ws(ps);
    const char *s = ps->p;
    if (*s == '(') {
        if (!enter(ps))
            return 0;
        ps->p++;
        int64_t v = parse_or(ps);
        if (!accept(ps, ')'))
            fail(ps, "expected ')'");
        ps->depth--;
        return v;
    }
    if (*s == '-') {
        if (!enter(ps))
            return 0;
        ps->p++;
        int64_t v = parse_atom(ps);
        ps->depth--;
        return ps->failed ? 0 : checked(ps, '-', 0, v);
    }
    if (*s == '!' && s[1] != '=') {
        if (!enter(ps))
            return 0;
        ps->p++;
        int64_t v = !parse_atom(ps);
        ps->depth--;
        return v;
    }
    if (isdigit((unsigned char)*s)) {
        int64_t v = 0;
        while (isdigit((unsigned char)*ps->p)) {
            if (v > (INT64_MAX - 9) / 10) {
                fail(ps, "number too large");
                return 0;
            }
            v = v * 10 + (*ps->p - '0');
            ps->p++;
        }
        return v;
    }
    if (isalpha((unsigned char)*s) || *s == '_') {
        while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
            ps->p++;
        size_t len = (size_t)(ps->p - s);
        if (accept(ps, '(')) {
            if ((len == 4 && strncmp(s, "cdiv", 4) == 0) || (len == 3 && strncmp(s, "min", 3) == 0) ||
                (len == 3 && strncmp(s, "max", 3) == 0)) {
                if (!enter(ps))
                    return 0;
                int64_t v = parse_call(ps, s, len);
                ps->depth--;
                return v;
            }
            ps->p = s;
            fail(ps, "unknown function (functions: cdiv, min, max)");
            return 0;
        }
        if (ps->vars == NULL)
            return 1;
        char name[64];
        if (len >= sizeof name) {
            fail(ps, "name too long");
            return 0;
        }
        memcpy(name, s, len);
        name[len] = '\0';
        int64_t v = 0;
        if (gpu_vars_get(ps->vars, name, &v) != 0) {
            ps->p = s;
            char msg[128];
            snprintf(msg, sizeof msg, "unknown variable '%s'", name);
            fail(ps, msg);
            return 0;
        }
        return v;
    }
    fail(ps, *s ? "unexpected character" : "unexpected end");
    return 0;
}

static int64_t parse_product(parser *ps)
{
    int64_t v = parse_atom(ps);
    for (;;) {
        skip_ws(ps);
        char op = *ps->p;
        if (ps->failed || (op != '*' && op != '/' && op != '%'))
            return v;
        ps->p++;
        int64_t r = parse_atom(ps);
        if (ps->failed)
            return 0;
        if (ps->vars != NULL)
            v = checked(ps, op, v, r);
    }
}

static int64_t parse_sum(parser *ps)
{
    int64_t v = parse_product(ps);
    for (;;) {
        skip_ws(ps);
        char op = *ps->p;
        if (ps->failed || (op != '+' && op != '-'))
            return v;
        ps->p++;
        int64_t r = parse_product(ps);
        if (ps->failed)
            return 0;
        if (ps->vars != NULL)
            v = checked(ps, op, v, r);
    }
}

/* Comparisons give 0 or 1; && and || do not short-circuit (there are no
 * side effects to skip). Used by manifest constraints. */
static int64_t parse_cmp(parser *ps)
{
    int64_t v = parse_sum(ps);
    skip_ws(ps);
    const char *q = ps->p;
    int op = 0;
    if (q[0] == '=' && q[1] == '=')
        op = 1;
    else if (q[0] == '!' && q[1] == '=')
        op = 2;
    else if (q[0] == '<' && q[1] == '=')
        op = 3;
    else if (q[0] == '>' && q[1] == '=')
        op = 4;
    else if (q[0] == '<')
        op = 5;
    else if (q[0] == '>')
        op = 6;
    if (op == 0)
        return v;
    ps->p += op <= 4 ? 2 : 1;
    int64_t r = parse_sum(ps);
    switch (op) {
    case 1:
        return v == r;
    case 2:
        return v != r;
    case 3:
        return v <= r;
    case 4:
        return v >= r;
    case 5:
        return v < r;
    default:
        return v > r;
    }
}

static int64_t parse_and(parser *ps)
{
    int64_t v = parse_cmp(ps);
    for (;;) {
        skip_ws(ps);
        if (ps->p[0] != '&' || ps->p[1] != '&')
            return v;
        ps->p += 2;
        int64_t r = parse_cmp(ps);
        v = v && r;
    }
}

static int64_t parse_or(parser *ps)
{
    int64_t v = parse_and(ps);
    for (;;) {
        skip_ws(ps);
        if (ps->p[0] != '|' || ps->p[1] != '|')
            return v;
        ps->p += 2;
        int64_t r = parse_and(ps);
        v = v || r;
    }
}

static int run_parser(const char *expr, const gpu_vars *v, int64_t *out, dt_err *e)
{
    if (strlen(expr) > EXPR_MAX_LEN)
        return dt_err_set(e, "expression of %zu bytes: longer than the %d allowed", strlen(expr),
                          EXPR_MAX_LEN);
    parser ps = {expr, expr, v, e, 0, 0};
    int64_t r = parse_or(&ps);
    skip_ws(&ps);
    if (!ps.failed && *ps.p != '\0')
        fail(&ps, "unexpected text after the expression");
    if (ps.failed)
        return -1;
    if (out)
        *out = r;
    return 0;
}

int gpu_eval(const char *expr, const gpu_vars *v, int64_t *out, dt_err *e)
{
    static const gpu_vars empty = {.n = 0};
    return run_parser(expr, v ? v : &empty, out, e);
}

int gpu_expr_check(const char *expr, dt_err *e)
{
    return run_parser(expr, NULL, NULL, e);
}

/* ---- contracts ------------------------------------------------------------ */

void gpu_contract_clear(gpu_contract *c)
{
    free(c->entry);
    free(c->format);
    cJSON_Delete(c->format_params);
    for (int i = 0; i < c->nparams; i++)
        free(c->params[i]);
    for (int i = 0; i < 3; i++) {
        free(c->block[i]);
        free(c->grid[i]);
    }
    free(c->smem);
    free(c->scratch_bytes);
    cJSON_Delete(c->defines);
    cJSON_Delete(c->requires);
    memset(c, 0, sizeof *c);
}

/* An expression field: a string, or a number written as one. */
static char *expr_of(const cJSON *v)
{
    if (cJSON_IsString(v))
        return dt_xstrdup(v->valuestring);
    int64_t x = 0;
    if (cJSON_IsNumber(v))
        return dt_json_to_int(v, INT64_MIN, INT64_MAX, &x, NULL) == 0
                   ? dt_xasprintf("%lld", (long long)x)
                   : NULL; /* 2.5 or 2.2e21: not an integer expression */
    return NULL;
}

/* ---- the contract's schema ------------------------------------------------------ */

static int param_ok(const cJSON *v)
{
    return gpu_param_known(v->valuestring);
}

/* An expression must parse; the evaluator's message says where not. */
static void expr_rule(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    (void)s;
    dt_err e = {0};
    if (gpu_expr_check(v->valuestring, &e) != 0)
        dt_schema_expected(c, path, v, "an expression (%s)", e.msg);
}

static const dt_schema expr_str_s = {.type = DT_SCHEMA_STR, .min_len = 1, .check = expr_rule};
static const dt_schema text_s = {.type = DT_SCHEMA_STR, .min_len = 1};
static const dt_schema whole_s = {.type = DT_SCHEMA_INT};
static const dt_schema *const expr_alts[] = {&expr_str_s, &whole_s, NULL};
static const dt_schema expr_s = {
    .type = DT_SCHEMA_ONEOF, .alts = expr_alts, .what = "an expression or a whole number"};
/* smem and scratch_bytes are checked when evaluated, on the matrix */
static const dt_schema *const late_alts[] = {&text_s, &whole_s, NULL};
static const dt_schema late_expr_s = {
    .type = DT_SCHEMA_ONEOF, .alts = late_alts, .what = "an expression or a whole number"};
static const dt_schema dims_s = {.type = DT_SCHEMA_ARR,
                                 .min_len = 1,
                                 .max_len = 3,
                                 .items = &expr_s,
                                 .what = "an array of 1 to 3 expressions"};
/* The entry is written as C by `ditto export` (the harness's launch and a
 * #define), so it must be a name: an identifier, or a name expression of
 * identifiers, numbers, `::`, commas and balanced <> (k<256>,
 * ns::spmv<float, 4>); no parenthesis, brace, semicolon or quote that a
 * session file could use to put code there. */
static int ident_ok(const cJSON *v)
{
    const char *p = v->valuestring;
    if (!(isalpha((unsigned char)*p) || *p == '_'))
        return 0;
    int depth = 0;
    for (; *p; p++) {
        if (*p == '<')
            depth++;
        else if (*p == '>' && --depth < 0)
            return 0;
        else if (!(isalnum((unsigned char)*p) || *p == '_' || *p == ':' || *p == ',' ||
                   *p == ' ' || *p == '<' || *p == '>'))
            return 0;
    }
    return depth == 0;
}

static const dt_schema entry_s = {.type = DT_SCHEMA_STR,
                                  .min_len = 1,
                                  .max_len = 256,
                                  .valid = ident_ok,
                                  .what = "the kernel's name (an identifier or a name expression such as k<256>)"};
static const char *const op_names[] = {"spmv", "spmm", "sddmm", NULL};
static const dt_schema op_s = {.type = DT_SCHEMA_STR, .choices = op_names};
static const dt_schema param_s = {
    .type = DT_SCHEMA_STR, .valid = param_ok, .what = "a parameter name (gpu/PROTOCOL.md)"};
static const dt_schema params_s = {.type = DT_SCHEMA_ARR,
                                   .max_len = GPU_MAX_PARAMS,
                                   .items = &param_s,
                                   .what = "the kernel's parameters in order"};
static const dt_schema object_s = {.type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN};
static const dt_schema defines_s = {
    .type = DT_SCHEMA_MAP, .items = &expr_s, .what = "an object of NAME: expression"};
static const char *const scratch_inits[] = {"launch", "once", NULL};
static const dt_schema scratch_init_s = {
    .type = DT_SCHEMA_STR,
    .choices = scratch_inits,
    .what = "\"launch\" (zeroed before every launch, the default) or \"once\" (zeroed when "
            "allocated; the kernel leaves it zeroed)"};
static const char *const layouts[] = {"row", "col", NULL};
static const dt_schema layout_s = {.type = DT_SCHEMA_STR, .choices = layouts};

/* Scratch memory needs its size. */
static void contract_rules(dt_schema_ctx *c, const dt_schema *s, const char *path,
                           const cJSON *j)
{
    (void)path;
    if (cJSON_GetObjectItemCaseSensitive(j, "scratch_bytes") != NULL)
        return;
    const cJSON *p;
    cJSON_ArrayForEach(p, dt_schema_get(s, j, "params"))
    {
        if (strcmp(p->valuestring, "scratch") == 0)
            dt_schema_expected(c, "$.scratch_bytes", NULL,
                               "an expression (params has 'scratch': its size in bytes)");
    }
    const cJSON *si = dt_schema_get(s, j, "scratch_init");
    if (si != NULL && strcmp(si->valuestring, "once") == 0)
        dt_schema_expected(c, "$.scratch_init", si,
                           "\"launch\" or nothing: the contract has no scratch_bytes");
}

/* Keys not listed are accepted: a generated kernel's contract may carry
 * notes of its own. */
static const dt_schema_field contract_fields[] = {{"entry", &entry_s, 1},
                                                  {"op", &op_s, 0},
                                                  {"format", &text_s, 0},
                                                  {"format_params", &object_s, 0},
                                                  {"params", &params_s, 1},
                                                  {"block", &dims_s, 1},
                                                  {"grid", &dims_s, 1},
                                                  {"smem", &late_expr_s, 0},
                                                  {"scratch_bytes", &late_expr_s, 0},
                                                  {"scratch_init", &scratch_init_s, 0},
                                                  {"defines", &defines_s, 0},
                                                  {"requires", &object_s, 0},
                                                  {"layout", &layout_s, 0},
                                                  {NULL, NULL, 0}};
static const dt_schema contract_s = {.type = DT_SCHEMA_OBJ,
                                     .flags = DT_SCHEMA_OPEN,
                                     .fields = contract_fields,
                                     .check = contract_rules,
                                     .what = "a JSON object"};

static void dims(const cJSON *j, const char *key, char *out[3])
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, key);
    for (int i = 0; i < 3; i++) {
        const cJSON *d = cJSON_GetArrayItem(a, i);
        out[i] = d ? expr_of(d) : dt_xstrdup("1");
    }
}

int gpu_contract_parse(const cJSON *j, gpu_contract *c, dt_err *e)
{
    memset(c, 0, sizeof *c);
    if (dt_schema_validate_all(&contract_s, j, "launch contract", e) != 0)
        return -1;
    /* Valid: every field below has its type. */
    c->entry = dt_xstrdup(dt_json_str(j, "entry", ""));
    sp_op_parse(dt_json_str(j, "op", "spmv"), &c->op);
    c->format = dt_xstrdup(dt_json_str(j, "format", "csr"));
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(j, "format_params");
    if (fp != NULL)
        c->format_params = cJSON_Duplicate(fp, 1);
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(j, "params"))
    c->params[c->nparams++] = dt_xstrdup(p->valuestring);
    dims(j, "block", c->block);
    dims(j, "grid", c->grid);
    const cJSON *smem = cJSON_GetObjectItemCaseSensitive(j, "smem");
    c->smem = smem ? expr_of(smem) : dt_xstrdup("0");
    const cJSON *sb = cJSON_GetObjectItemCaseSensitive(j, "scratch_bytes");
    if (sb != NULL)
        c->scratch_bytes = expr_of(sb);
    c->scratch_once = dt_streq(dt_json_str(j, "scratch_init", "launch"), "once");
    const cJSON *defs = cJSON_GetObjectItemCaseSensitive(j, "defines");
    if (defs != NULL)
        c->defines = cJSON_Duplicate(defs, 1);
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(j, "requires");
    if (req != NULL)
        c->requires = cJSON_Duplicate(req, 1);
    c->layout = dt_streq(dt_json_str(j, "layout", "row"), "col") ? SP_COL_MAJOR : SP_ROW_MAJOR;
    return 0;
}

char *gpu_contract_extract(const char *src)
{
    const char *b = strstr(src, "/*@contract");
    if (b == NULL)
        return NULL;
    b += strlen("/*@contract");
    const char *end = strstr(b, "@*/");
    if (end == NULL)
        return NULL;
    return dt_xstrndup(b, (size_t)(end - b));
}

int gpu_contract_from_source(const char *src, gpu_contract *c, dt_err *e)
{
    memset(c, 0, sizeof *c);
    char *text = gpu_contract_extract(src);
    if (text == NULL)
        return dt_err_set(e, "no launch contract: the source has no /*@contract {...} @*/ block "
                             "and the request gave none");
    /* Line numbers in JSON errors should match the source file: count the
     * lines before the block. */
    int line0 = 1;
    const char *b = strstr(src, "/*@contract");
    for (const char *q = src; q < b; q++)
        line0 += *q == '\n';
    dt_err je = {0};
    cJSON *j = dt_json_parse(text, strlen(text), "contract", &je);
    free(text);
    if (j == NULL)
        return dt_err_set(e, "launch contract (block starting at source line %d): %s", line0,
                          je.msg);
    int rc = gpu_contract_parse(j, c, e);
    cJSON_Delete(j);
    return rc;
}

static cJSON *str_arr(char *const *v, int n)
{
    cJSON *a = dt_json_arr();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(v[i]));
    return a;
}

cJSON *gpu_contract_json(const gpu_contract *c)
{
    cJSON *o = dt_json_obj();
    dt_json_set_str(o, "entry", c->entry);
    dt_json_set_str(o, "op", sp_op_name(c->op));
    dt_json_set_str(o, "format", c->format);
    if (c->format_params)
        dt_json_set_take(o, "format_params", cJSON_Duplicate(c->format_params, 1));
    dt_json_set_take(o, "params", str_arr(c->params, c->nparams));
    dt_json_set_take(o, "block", str_arr(c->block, 3));
    dt_json_set_take(o, "grid", str_arr(c->grid, 3));
    dt_json_set_str(o, "smem", c->smem);
    if (c->scratch_bytes)
        dt_json_set_str(o, "scratch_bytes", c->scratch_bytes);
    if (c->scratch_once)
        dt_json_set_str(o, "scratch_init", "once");
    if (c->defines)
        dt_json_set_take(o, "defines", cJSON_Duplicate(c->defines, 1));
    if (c->requires)
        dt_json_set_take(o, "requires", cJSON_Duplicate(c->requires, 1));
    dt_json_set_str(o, "layout", c->layout == SP_COL_MAJOR ? "col" : "row");
    return o;
}

/* ---- manifests ----------------------------------------------------------------- */

void gpu_manifest_clear(gpu_manifest *m)
{
    free(m->strategy);
    free(m->summary);
    free(m->preprocessing);
    for (int i = 0; i < m->nparams; i++) {
        free(m->params[i].name);
        free(m->params[i].values);
    }
    for (int i = 0; i < m->nconstraints; i++)
        free(m->constraints[i]);
    cJSON_Delete(m->raw);
    memset(m, 0, sizeof *m);
}

/* ---- the manifest's schema ------------------------------------------------------ */

static const dt_schema strategy_s = {
    .type = DT_SCHEMA_STR, .min_len = 1, .what = "a short name such as \"csr-vector\""};
static const char *const dtype_names[] = {"fp32", "fp64", "fp16", "bf16", NULL};
static const dt_schema dtype_s = {.type = DT_SCHEMA_STR, .choices = dtype_names};
static const dt_schema dtypes_s = {.type = DT_SCHEMA_ARR, .items = &dtype_s};
static const dt_schema int32_s = {.type = DT_SCHEMA_INT, .min = INT32_MIN, .max = INT32_MAX};
static const dt_schema values_s = {.type = DT_SCHEMA_ARR, .min_len = 1, .items = &int32_s};

static void mparam_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    int64_t dflt = 0;
    const cJSON *vals = dt_schema_get(s, v, "values");
    if (dt_schema_get_int(s, v, "default", &dflt) != 0 || vals == NULL)
        return;
    const cJSON *x;
    cJSON_ArrayForEach(x, vals)
    {
        if (x->valuedouble == (double)dflt)
            return;
    }
    char p[DT_SCHEMA_PATH_MAX];
    dt_schema_path(p, sizeof p, path, "default");
    dt_schema_expected(c, p, cJSON_GetObjectItemCaseSensitive(v, "default"),
                       "one of the values");
}

static const dt_schema_field mparam_fields[] = {
    {"default", &int32_s, 1}, {"values", &values_s, 1}, {NULL, NULL, 0}};
static const dt_schema mparam_s = {.type = DT_SCHEMA_OBJ,
                                   .fields = mparam_fields,
                                   .check = mparam_rules,
                                   .what = "{\"default\": N, \"values\": [N, ...]}"};
static const dt_schema mparams_s = {
    .type = DT_SCHEMA_MAP, .max_len = GPU_MAX_MPARAMS, .items = &mparam_s};
static const dt_schema constraints_s = {
    .type = DT_SCHEMA_ARR, .max_len = GPU_MAX_MPARAMS, .items = &expr_str_s};
static const dt_schema_field manifest_fields[] = {{"strategy", &strategy_s, 1},
                                                  {"summary", &text_s, 0},
                                                  {"preprocessing", &text_s, 0},
                                                  {"op", &op_s, 0},
                                                  {"dtypes", &dtypes_s, 0},
                                                  {"params", &mparams_s, 0},
                                                  {"constraints", &constraints_s, 0},
                                                  {NULL, NULL, 0}};
static const dt_schema manifest_s = {.type = DT_SCHEMA_OBJ,
                                     .flags = DT_SCHEMA_OPEN,
                                     .fields = manifest_fields,
                                     .what = "a JSON object"};

int gpu_manifest_parse(const cJSON *j, gpu_manifest *m, dt_err *e)
{
    memset(m, 0, sizeof *m);
    if (dt_schema_validate_all(&manifest_s, j, "manifest", e) != 0)
        return -1;
    /* Valid: every field below has its type and range. */
    m->raw = cJSON_Duplicate(j, 1);
    m->strategy = dt_xstrdup(dt_json_str(j, "strategy", ""));
    m->summary = dt_xstrdup(dt_json_str(j, "summary", ""));
    m->preprocessing = dt_xstrdup(dt_json_str(j, "preprocessing", "none"));
    sp_op_parse(dt_json_str(j, "op", "spmv"), &m->op);
    const cJSON *dts = cJSON_GetObjectItemCaseSensitive(j, "dtypes");
    const cJSON *d;
    if (dts == NULL)
        m->dtypes = (1u << SP_FP32) | (1u << SP_FP64);
    cJSON_ArrayForEach(d, dts)
    {
        sp_dtype t = SP_FP32;
        sp_dtype_parse(d->valuestring, &t);
        m->dtypes |= 1u << t;
    }
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(j, "params"))
    {
        gpu_mparam *mp = &m->params[m->nparams++];
        const cJSON *vals = cJSON_GetObjectItemCaseSensitive(d, "values");
        mp->name = dt_xstrdup(d->string);
        mp->dflt = dt_json_i64(d, "default", 0);
        mp->nvalues = cJSON_GetArraySize(vals);
        mp->values = dt_xcalloc((size_t)mp->nvalues, sizeof *mp->values);
        int k = 0;
        const cJSON *v;
        cJSON_ArrayForEach(v, vals)
        mp->values[k++] = dt_json_as_i64(v, 0);
    }
    cJSON_ArrayForEach(d, cJSON_GetObjectItemCaseSensitive(j, "constraints"))
    m->constraints[m->nconstraints++] = dt_xstrdup(d->valuestring);
    return 0;
}

int gpu_manifest_from_source(const char *src, gpu_manifest *m, dt_err *e)
{
    memset(m, 0, sizeof *m);
    const char *b = strstr(src, "/*@manifest");
    if (b == NULL) {
        dt_err_set(e, "no manifest block (/*@manifest {...} @*/)");
        if (e)
            e->code = GPU_ENOMANIFEST;
        return -1;
    }
    b += strlen("/*@manifest");
    const char *end = strstr(b, "@*/");
    if (end == NULL)
        return dt_err_set(e, "manifest block not closed with @*/");
    dt_err je = {0};
    cJSON *j = dt_json_parse(b, (size_t)(end - b), "manifest", &je);
    if (j == NULL)
        return dt_err_set(e, "%s", je.msg);
    int rc = gpu_manifest_parse(j, m, e);
    cJSON_Delete(j);
    return rc;
}

cJSON *gpu_manifest_defaults(const gpu_manifest *m)
{
    cJSON *o = dt_json_obj();
    for (int i = 0; i < m->nparams; i++)
        dt_json_set_int(o, m->params[i].name, m->params[i].dflt);
    return o;
}

int gpu_manifest_check(const gpu_manifest *m, const cJSON *params, const gpu_vars *vars,
                       dt_err *e)
{
    gpu_vars v = vars ? *vars : (gpu_vars){.n = 0};
    for (int i = 0; i < m->nparams; i++) {
        const gpu_mparam *mp = &m->params[i];
        const cJSON *pv = cJSON_GetObjectItemCaseSensitive(params, mp->name);
        int64_t val = mp->dflt;
        dt_err ie = {0};
        if (pv != NULL && dt_json_to_int(pv, INT32_MIN, INT32_MAX, &val, &ie) != 0)
            return dt_err_set(e, "%s: %s", mp->name, ie.msg);
        int legal = 0;
        for (int k = 0; k < mp->nvalues; k++)
            legal |= mp->values[k] == val;
        if (!legal) {
            dt_buf vals = {0};
            for (int k = 0; k < mp->nvalues; k++)
                dt_buf_printf(&vals, "%s%lld", k ? ", " : "", (long long)mp->values[k]);
            dt_err_set(e, "%s = %lld is not a legal value for %s (legal: %s)", mp->name,
                       (long long)val, m->strategy, vals.data ? vals.data : "none");
            dt_buf_free(&vals);
            return -1;
        }
        gpu_vars_set(&v, mp->name, val);
    }
    for (int i = 0; i < m->nconstraints; i++) {
        int64_t ok = 0;
        dt_err ce = {0};
        if (gpu_eval(m->constraints[i], &v, &ok, &ce) != 0)
            return dt_err_set(e, "constraint '%s': %s", m->constraints[i], ce.msg);
        if (!ok)
            return dt_err_set(e, "constraint '%s' does not hold", m->constraints[i]);
    }
    return 0;
}

cJSON *gpu_format_params(const gpu_contract *c, const cJSON *params, dt_err *e)
{
    const cJSON *fp = c->format_params;
    if (fp == NULL)
        return NULL;
    gpu_vars vars = {.n = 0};
    const cJSON *pv;
    cJSON_ArrayForEach(pv, params) gpu_vars_set(&vars, pv->string, dt_json_as_i64(pv, 0));
    cJSON *out = cJSON_Duplicate(fp, 1);
    cJSON *it;
    cJSON_ArrayForEach(it, out)
    {
        if (!cJSON_IsString(it))
            continue;
        int64_t v = 0;
        dt_err ee = {0};
        if (gpu_eval(it->valuestring, &vars, &v, &ee) != 0) {
            dt_err_set(e, "launch contract: format_params.%s: %s", it->string, ee.msg);
            cJSON_Delete(out);
            return NULL;
        }
        cJSON *num = cJSON_CreateNumber((double)v);
        char *key = dt_xstrdup(it->string);
        cJSON_ReplaceItemInObjectCaseSensitive(out, key, num); /* frees it, names num */
        free(key);
        it = num;
    }
    return out;
}

double gpu_requires_num(const gpu_contract *c, const cJSON *params, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(c->requires, key);
    if (cJSON_IsNumber(v))
        return v->valuedouble;
    if (!cJSON_IsString(v))
        return dflt;
    gpu_vars vars = {.n = 0};
    const cJSON *pv;
    cJSON_ArrayForEach(pv, params) gpu_vars_set(&vars, pv->string, dt_json_as_i64(pv, 0));
    int64_t x = 0;
    dt_err e = {0};
    return gpu_eval(v->valuestring, &vars, &x, &e) == 0 ? (double)x : dflt;
}
