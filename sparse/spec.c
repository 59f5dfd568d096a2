/* spec.c -- the problem spec (op, matrix, dtype, sizes, epilogue, gpu, backend,
 * review policy): validation that reports every problem with its JSON path. */
#include "sparse/sparse.h"

#include "core/schema.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void sp_spec_init(sp_spec *s)
{
    memset(s, 0, sizeof *s);
    s->op = SP_SPMV;
    s->dtype = SP_FP32;
    s->n = 32;
    s->alpha = 1.0;
    s->beta = 0.0;
    s->epilogue = SP_EPI_NONE;
    s->gpu = dt_xstrdup("auto");
    s->backend = dt_xstrdup("expert");
    s->review = dt_xstrdup("ask");
}

void sp_spec_clear(sp_spec *s)
{
    free(s->matrix);
    free(s->gpu);
    free(s->backend);
    free(s->review);
    cJSON_Delete(s->review_map);
    memset(s, 0, sizeof *s);
}

/* ---- the schema ------------------------------------------------------------ */

static const char *const op_names[] = {"spmv", "spmm", "sddmm", NULL};
static const char *const dtype_names[] = {"fp32", "fp64", "fp16", "bf16", NULL};
static const char *const epilogue_names[] = {"none", "relu", "gelu", "bias", NULL};
static const char *const backend_names[] = {"expert", "llm", NULL};
static const char *const ask_auto_names[] = {"ask", "auto", NULL};

static const dt_schema op_s = {.type = DT_SCHEMA_STR, .choices = op_names};
static const dt_schema dtype_s = {.type = DT_SCHEMA_STR, .choices = dtype_names};
static const dt_schema epilogue_s = {.type = DT_SCHEMA_STR, .choices = epilogue_names};
static const dt_schema backend_s = {.type = DT_SCHEMA_STR, .choices = backend_names};
static const dt_schema ask_auto_s = {.type = DT_SCHEMA_STR, .choices = ask_auto_names};
static const dt_schema matrix_s = {
    .type = DT_SCHEMA_STR,
    .min_len = 1,
    .max_len = 4096,
    .what = "a .mtx/.smtx path or a generator such as \"gen:rmat:rows=1M,nnz=16M\""};
static const dt_schema n_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 65536};
static const dt_schema scalar_s = {.type = DT_SCHEMA_NUM};
static const dt_schema gpu_s = {.type = DT_SCHEMA_STR,
                                .min_len = 1,
                                .max_len = 64,
                                .what = "a hardware name (see 'ditto hw list') or \"auto\""};
static const dt_schema_field review_steps[] = {
    {"profile", &ask_auto_s, 0}, {"plan", &ask_auto_s, 0},    {"check", &ask_auto_s, 0},
    {"generate", &ask_auto_s, 0}, {"compile", &ask_auto_s, 0}, {"verify", &ask_auto_s, 0},
    {"measure", &ask_auto_s, 0}, {"tune", &ask_auto_s, 0},    {"learn", &ask_auto_s, 0},
    {NULL, NULL, 0}};
static const dt_schema review_map_s = {
    .type = DT_SCHEMA_OBJ, .fields = review_steps, .what = "an object of step: \"ask\"|\"auto\""};
static const dt_schema *const review_alts[] = {&ask_auto_s, &review_map_s, NULL};
static const dt_schema review_s = {.type = DT_SCHEMA_ONEOF, .alts = review_alts};

/* Rules across fields, for values that are right on their own. */
static void spec_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *j)
{
    const cJSON *op = dt_schema_get(s, j, "op");
    const cJSON *epi = dt_schema_get(s, j, "epilogue");
    if (op == NULL || !dt_streq(op->valuestring, "sddmm"))
        return;
    char p[DT_SCHEMA_PATH_MAX];
    if (epi != NULL && dt_streq(epi->valuestring, "bias")) {
        dt_schema_path(p, sizeof p, path, "epilogue");
        dt_schema_expected(c, p, epi, "none, relu or gelu for sddmm (bias applies to dense "
                                      "outputs: spmv, spmm)");
    }
    int64_t n = 0;
    if (dt_schema_get_int(s, j, "n", &n) == 0 && n > SP_SDDMM_MAX_K) {
        dt_schema_path(p, sizeof p, path, "n");
        dt_schema_expected(c, p, cJSON_GetObjectItemCaseSensitive(j, "n"),
                           "SDDMM's inner dimension K of at most %d (the kernels unroll over K, "
                           "and compile time grows with it: about 7 s for one kernel at K = "
                           "1024, 15 s at 2048)",
                           SP_SDDMM_MAX_K);
    }
}

static const dt_schema_field spec_fields[] = {
    {"op", &op_s, 0},         {"matrix", &matrix_s, 1},     {"dtype", &dtype_s, 0},
    {"n", &n_s, 0},           {"alpha", &scalar_s, 0},      {"beta", &scalar_s, 0},
    {"epilogue", &epilogue_s, 0}, {"gpu", &gpu_s, 0},       {"backend", &backend_s, 0},
    {"review", &review_s, 0}, {NULL, NULL, 0}};
static const dt_schema spec_schema = {
    .type = DT_SCHEMA_OBJ, .fields = spec_fields, .check = spec_rules};

static void set_str(char **dst, const char *v)
{
    if (v == NULL)
        return;
    free(*dst);
    *dst = dt_xstrdup(v);
}

int sp_spec_from_json(sp_spec *s, const cJSON *j, const char *name, dt_buf *p)
{
    dt_schema_ctx c = {.file = name, .out = p};
    if (dt_schema_check(&spec_schema, j, &c) > 0)
        return -1;
    /* Valid: every lookup below finds its type and range. */
    const char *v = dt_json_str(j, "op", NULL);
    if (v != NULL)
        sp_op_parse(v, &s->op);
    if ((v = dt_json_str(j, "dtype", NULL)) != NULL)
        sp_dtype_parse(v, &s->dtype);
    if ((v = dt_json_str(j, "epilogue", NULL)) != NULL)
        sp_epilogue_parse(v, &s->epilogue);
    set_str(&s->matrix, dt_json_str(j, "matrix", NULL));
    s->n = (int32_t)dt_json_i64(j, "n", s->n);
    s->alpha = dt_json_num(j, "alpha", s->alpha);
    s->beta = dt_json_num(j, "beta", s->beta);
    set_str(&s->gpu, dt_json_str(j, "gpu", NULL));
    set_str(&s->backend, dt_json_str(j, "backend", NULL));
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "review");
    if (cJSON_IsString(r)) {
        set_str(&s->review, r->valuestring);
    } else if (cJSON_IsObject(r)) {
        cJSON_Delete(s->review_map);
        s->review_map = cJSON_Duplicate(r, 1);
        set_str(&s->review, "map");
    }
    return 0;
}

static int spec_is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* A relative matrix path (or rep: source) that names no file from the
 * current folder, but does next to the spec file, becomes that file's
 * absolute path: `ditto run proj/spmv.json` finds proj/A.mtx for "A.mtx",
 * and a session records where it was. A path found from the current folder
 * keeps its old meaning; one found in neither is left for the loader (and
 * $DITTO_MATRIX_PATH) to report. */
static void spec_anchor_matrix(sp_spec *s, const char *spec_path)
{
    const char *m = s->matrix;
    if (m == NULL || strcmp(m, "-") == 0 || strncmp(m, "gen:", 4) == 0)
        return;
    size_t pre = 0, flen = strlen(m);
    if (strncmp(m, "rep:", 4) == 0) {
        const char *colon = strrchr(m + 4, ':');
        if (colon == NULL)
            return;
        pre = 4;
        flen = (size_t)(colon - (m + 4));
        if (strncmp(m + 4, "gen:", 4) == 0)
            return;
    }
    const char *slash = strrchr(spec_path, '/');
    if (flen == 0 || m[pre] == '/' || slash == NULL)
        return; /* absolute, or the spec sits in the current folder */
    char *file = dt_xasprintf("%.*s", (int)flen, m + pre);
    char *cand = dt_xasprintf("%.*s/%s", (int)(slash - spec_path), spec_path, file);
    char abs[PATH_MAX];
    if (!spec_is_file(file) && spec_is_file(cand) && realpath(cand, abs) != NULL) {
        char *now = dt_xasprintf("%.*s%s%s", (int)pre, m, abs, m + pre + flen);
        free(s->matrix);
        s->matrix = now;
    }
    free(cand);
    free(file);
}

int sp_spec_load(sp_spec *s, const char *path, dt_buf *problems)
{
    dt_err e = {0};
    cJSON *j = dt_json_read_file_max(path, SP_SPEC_MAX_BYTES, &e);
    if (j == NULL) {
        if (problems != NULL)
            dt_buf_printf(problems, "%s\n", e.msg);
        return -1;
    }
    int rc = sp_spec_from_json(s, j, path, problems);
    cJSON_Delete(j);
    if (rc == 0)
        spec_anchor_matrix(s, path);
    return rc;
}

cJSON *sp_spec_json(const sp_spec *s)
{
    cJSON *o = dt_json_obj();
    dt_json_set_str(o, "op", sp_op_name(s->op));
    dt_json_set_str(o, "matrix", s->matrix);
    dt_json_set_str(o, "dtype", sp_dtype_name(s->dtype));
    dt_json_set_int(o, "n", s->n);
    dt_json_set_num(o, "alpha", s->alpha);
    dt_json_set_num(o, "beta", s->beta);
    dt_json_set_str(o, "epilogue", sp_epilogue_name(s->epilogue));
    dt_json_set_str(o, "gpu", s->gpu);
    dt_json_set_str(o, "backend", s->backend);
    if (s->review_map != NULL)
        dt_json_set_take(o, "review", cJSON_Duplicate(s->review_map, 1));
    else
        dt_json_set_str(o, "review", s->review);
    return o;
}
