/* spec.c -- the problem spec (op, matrix, dtype, sizes, epilogue, gpu, backend,
 * review policy): validation that reports every problem with its JSON path. */
#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *spec_keys[] = {"op",       "matrix",  "dtype",   "n",     "alpha",
                                  "beta",     "epilogue", "gpu",    "backend", "review"};
static const char *review_steps[] = {"profile", "plan",    "check",   "generate", "compile",
                                     "verify",  "measure", "tune",    "learn"};

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

static void problem(dt_buf *p, const char *name, const char *fmt, ...) DT_PRINTF(3, 4);

static void problem(dt_buf *p, const char *name, const char *fmt, ...)
{
    if (p == NULL)
        return;
    if (name != NULL)
        dt_buf_printf(p, "%s: ", name);
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(p, fmt, ap);
    va_end(ap);
    dt_buf_putc(p, '\n');
}

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsBool(v))
        return "a boolean";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    return "invalid";
}

/* Look up a string-enum key; on a problem records it and returns NULL. */
static const char *enum_field(const cJSON *j, const char *key, const char *choices,
                              const char *name, dt_buf *p, int *bad)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
    if (v == NULL)
        return NULL;
    if (!cJSON_IsString(v)) {
        problem(p, name, "$.%s: expected one of %s, got %s", key, choices, type_name(v));
        *bad = 1;
        return NULL;
    }
    return v->valuestring;
}

int sp_spec_from_json(sp_spec *s, const cJSON *j, const char *name, dt_buf *p)
{
    int bad = 0;
    if (!cJSON_IsObject(j)) {
        problem(p, name, "$: expected an object, got %s", type_name(j));
        return -1;
    }
    for (const cJSON *it = j->child; it != NULL; it = it->next) {
        int known = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(spec_keys); i++)
            known |= dt_streq(it->string, spec_keys[i]);
        if (!known) {
            problem(p, name,
                    "$.%s: unknown key (keys: op, matrix, dtype, n, alpha, beta, epilogue, gpu, "
                    "backend, review)",
                    it->string);
            bad = 1;
        }
    }

    const char *v;
    v = enum_field(j, "op", "spmv, spmm, sddmm", name, p, &bad);
    if (v != NULL && sp_op_parse(v, &s->op) != 0) {
        problem(p, name, "$.op: expected one of spmv, spmm, sddmm, got \"%s\"", v);
        bad = 1;
    }

    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "matrix");
    if (m == NULL) {
        problem(p, name, "$.matrix: missing (a .mtx/.smtx path or a generator such as "
                         "\"gen:rmat:rows=1M,nnz=16M\")");
        bad = 1;
    } else if (!cJSON_IsString(m) || m->valuestring[0] == '\0') {
        problem(p, name, "$.matrix: expected a non-empty string, got %s", type_name(m));
        bad = 1;
    } else {
        free(s->matrix);
        s->matrix = dt_xstrdup(m->valuestring);
    }

    v = enum_field(j, "dtype", "fp32, fp64, fp16, bf16", name, p, &bad);
    if (v != NULL && sp_dtype_parse(v, &s->dtype) != 0) {
        problem(p, name, "$.dtype: expected one of fp32, fp64, fp16, bf16, got \"%s\"", v);
        bad = 1;
    }

    const cJSON *n = cJSON_GetObjectItemCaseSensitive(j, "n");
    if (n != NULL) {
        if (!cJSON_IsNumber(n) || n->valuedouble != floor(n->valuedouble) ||
            n->valuedouble < 1 || n->valuedouble > 65536) {
            problem(p, name, "$.n: expected an integer from 1 to 65536, got %s",
                    cJSON_IsNumber(n) ? "a number outside that range" : type_name(n));
            bad = 1;
        } else {
            s->n = (int32_t)n->valuedouble;
        }
    }

    static const char *scalars[] = {"alpha", "beta"};
    for (int i = 0; i < 2; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, scalars[i]);
        if (x == NULL)
            continue;
        if (!cJSON_IsNumber(x) || !isfinite(x->valuedouble)) {
            problem(p, name, "$.%s: expected a finite number, got %s", scalars[i], type_name(x));
            bad = 1;
        } else if (i == 0) {
            s->alpha = x->valuedouble;
        } else {
            s->beta = x->valuedouble;
        }
    }

    v = enum_field(j, "epilogue", "none, relu, gelu, bias", name, p, &bad);
    if (v != NULL && sp_epilogue_parse(v, &s->epilogue) != 0) {
        problem(p, name, "$.epilogue: expected one of none, relu, gelu, bias, got \"%s\"", v);
        bad = 1;
    }

    const cJSON *g = cJSON_GetObjectItemCaseSensitive(j, "gpu");
    if (g != NULL) {
        if (!cJSON_IsString(g) || g->valuestring[0] == '\0') {
            problem(p, name, "$.gpu: expected a hardware name (see 'ditto hw list') or \"auto\", "
                             "got %s",
                    type_name(g));
            bad = 1;
        } else {
            free(s->gpu);
            s->gpu = dt_xstrdup(g->valuestring);
        }
    }

    v = enum_field(j, "backend", "expert, llm", name, p, &bad);
    if (v != NULL) {
        if (!dt_streq(v, "expert") && !dt_streq(v, "llm")) {
            problem(p, name, "$.backend: expected one of expert, llm, got \"%s\"", v);
            bad = 1;
        } else {
            free(s->backend);
            s->backend = dt_xstrdup(v);
        }
    }

    const cJSON *r = cJSON_GetObjectItemCaseSensitive(j, "review");
    if (r != NULL) {
        if (cJSON_IsString(r)) {
            if (!dt_streq(r->valuestring, "ask") && !dt_streq(r->valuestring, "auto")) {
                problem(p, name,
                        "$.review: expected \"ask\", \"auto\" or an object of step -> "
                        "\"ask\"|\"auto\", got \"%s\"",
                        r->valuestring);
                bad = 1;
            } else {
                free(s->review);
                s->review = dt_xstrdup(r->valuestring);
            }
        } else if (cJSON_IsObject(r)) {
            int map_bad = 0;
            for (const cJSON *it = r->child; it != NULL; it = it->next) {
                int known = 0;
                for (size_t i = 0; i < DT_ARRAY_LEN(review_steps); i++)
                    known |= dt_streq(it->string, review_steps[i]);
                if (!known) {
                    problem(p, name,
                            "$.review.%s: unknown step (steps: profile, plan, check, generate, "
                            "compile, verify, measure, tune, learn)",
                            it->string);
                    map_bad = 1;
                } else if (!cJSON_IsString(it) ||
                           (!dt_streq(it->valuestring, "ask") &&
                            !dt_streq(it->valuestring, "auto"))) {
                    problem(p, name, "$.review.%s: expected \"ask\" or \"auto\"", it->string);
                    map_bad = 1;
                }
            }
            if (!map_bad) {
                cJSON_Delete(s->review_map);
                s->review_map = cJSON_Duplicate(r, 1);
                free(s->review);
                s->review = dt_xstrdup("map");
            }
            bad |= map_bad;
        } else {
            problem(p, name, "$.review: expected \"ask\", \"auto\" or an object, got %s",
                    type_name(r));
            bad = 1;
        }
    }

    if (s->epilogue == SP_EPI_BIAS && s->op == SP_SDDMM) {
        problem(p, name, "$.epilogue: bias applies to dense outputs (spmv, spmm), not sddmm");
        bad = 1;
    }
    if (s->op == SP_SDDMM && s->n > SP_SDDMM_MAX_K) {
        problem(p, name,
                "$.n: SDDMM's inner dimension K is at most %d (the kernels unroll over K, and "
                "compile time grows with it: about 7 s for one kernel at K = 1024, 15 s at 2048), "
                "got %d",
                SP_SDDMM_MAX_K, (int)s->n);
        bad = 1;
    }
    return bad ? -1 : 0;
}

int sp_spec_load(sp_spec *s, const char *path, dt_buf *problems)
{
    dt_err e = {0};
    cJSON *j = dt_json_read_file_max(path, SP_SPEC_MAX_BYTES, &e);
    if (j == NULL) {
        problem(problems, NULL, "%s", e.msg);
        return -1;
    }
    int rc = sp_spec_from_json(s, j, path, problems);
    cJSON_Delete(j);
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
