/* export.c -- `ditto export`: a session's best kernel as a standalone CUDA source, a
 * harness (from the shipped export/harness.cu) that checks it against an fp64 reference with
 * ditto's tolerance and times it next to cuSPARSE the way the session did, a Makefile for
 * nvcc and a README with the session's numbers (export/export.h).
 * Over 1,000 lines: reading a session's events, specialising its kernel and contract to the
 * matrix and writing the harness's C are one pass over one context (ex_ctx). */
#include "export/export.h"
#include "gpu/contract.h"
#include "hardware/hardware.h"
#include "sessions/sessions.h"
#include "sparse/sparse.h"

#include <ctype.h>
#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- what the session's events say about each kernel version ------------------------- */

typedef struct ex_version {
    int version;
    const char *source;   /* the last kernel artifact's content (borrowed from the log) */
    const cJSON *params;  /* the generate step's params */
    char strategy[64];    /* the plan in effect when it was generated */
    int compiled;         /* -1 unknown, 0 failed, 1 compiled */
    int verified;         /* -1 unknown, 0 failed, 1 passed */
    const cJSON *verify;  /* the verify artifact */
    const cJSON *measure; /* the measure artifact when it timed the kernel */
} ex_version;

typedef struct ex_scan {
    ex_version *v;
    int n, cap;
    const cJSON *tune;     /* the tune artifact */
    const cJSON *report;   /* the PatternReport */
    const cJSON *finished; /* session_finished's result.best */
} ex_scan;

static ex_version *version_get(ex_scan *s, int version)
{
    for (int i = 0; i < s->n; i++)
        if (s->v[i].version == version)
            return &s->v[i];
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 16;
        s->v = dt_xrealloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    ex_version *x = &s->v[s->n++];
    memset(x, 0, sizeof *x);
    x->version = version;
    x->compiled = x->verified = -1;
    return x;
}

/* Walk the events in order: artifacts as agents/orch.c emits them (a later artifact of
 * the same step replaces an earlier one, as after an edit). */
static void scan_events(const sess_log *log, ex_scan *s)
{
    memset(s, 0, sizeof *s);
    char strategy[64] = "";
    const cJSON *ev;
    cJSON_ArrayForEach(ev, log->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (strcmp(type, "session_finished") == 0) {
            const cJSON *b = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "result"), "best");
            if (cJSON_IsObject(b))
                s->finished = b;
            continue;
        }
        if (strcmp(type, "artifact") != 0)
            continue;
        const char *name = dt_json_str(ev, "name", "");
        int v = dt_json_int(ev, "version", 0);
        const cJSON *j = cJSON_GetObjectItem(ev, "json");
        int ok = dt_json_bool(j, "ok", 0);
        if (strcmp(name, "report") == 0) {
            if (cJSON_IsObject(cJSON_GetObjectItem(j, "report")))
                s->report = cJSON_GetObjectItem(j, "report");
        } else if (strcmp(name, "plan") == 0) {
            if (ok)
                snprintf(strategy, sizeof strategy, "%s", dt_json_str(j, "strategy", ""));
        } else if (strcmp(name, "kernel") == 0) {
            const char *src = dt_json_str(ev, "content", dt_json_str(j, "source", NULL));
            if (src == NULL || *src == '\0')
                continue;
            ex_version *x = version_get(s, v);
            x->source = src;
            x->params = cJSON_GetObjectItem(j, "params");
            snprintf(x->strategy, sizeof x->strategy, "%s", strategy);
        } else if (strcmp(name, "compile") == 0) {
            version_get(s, v)->compiled = ok;
        } else if (strcmp(name, "verify") == 0) {
            ex_version *x = version_get(s, v);
            x->verified = ok && dt_json_bool(j, "passed", 0);
            x->verify = j;
        } else if (strcmp(name, "measure") == 0) {
            if (ok && dt_json_num(j, "us", 0) > 0)
                version_get(s, v)->measure = j;
        } else if (strcmp(name, "tune") == 0) {
            s->tune = j;
        }
    }
}

/* ---- when cuSPARSE is faster ------------------------------------------------------------- */

/* Whether the session found the best cuSPARSE algorithm faster than the
 * kernel it exports: then the harness and the README name the call to use. */
#define CUSPARSE_FASTER(b) ((b)->measured && (b)->speedup > 0 && (b)->speedup < 1.0 && (b)->baseline[0])

/* The cuSPARSE generic-API call of algorithm `alg` ("CSR_ALG1", as the
 * worker and the harness name them) for an op, as C text into o. */
static void cusparse_call_text(dt_buf *o, sp_op op, sp_dtype t, const char *alg)
{
    const char *ct = t == SP_FP64 ? "CUDA_R_64F" : "CUDA_R_32F";
    if (op == SP_SPMV)
        dt_buf_printf(o,
                      "cusparseSpMV(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, x, "
                      "&beta, y, %s, CUSPARSE_SPMV_%s, buffer);",
                      ct, alg);
    else if (op == SP_SPMM)
        dt_buf_printf(o,
                      "cusparseSpMM(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, "
                      "CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, B, &beta, C, %s, "
                      "CUSPARSE_SPMM_%s, buffer);",
                      ct, alg);
    else
        dt_buf_printf(o,
                      "cusparseSDDMM(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, "
                      "CUSPARSE_OPERATION_TRANSPOSE, &alpha, A, Bt, &beta, S, %s, "
                      "CUSPARSE_SDDMM_ALG_DEFAULT, buffer);",
                      ct);
}

/* ---- the kernel to export -------------------------------------------------------------- */

typedef struct ex_best {
    char label[96]; /* "v3 csr-thread", "tuned csr-thread" */
    int version;    /* 0 for a tuned variant, which has no version of its own */
    char *source;   /* owned */
    char from[512]; /* the file (or "events.jsonl") the source was read from */
    cJSON *params;  /* owned; {} when none */
    char strategy[64];
    int measured;
    double us, base_us, speedup, gbps;
    char method[16];
    char baseline[32];
    const cJSON *measure; /* the full measure artifact when there is one (borrowed) */
    const cJSON *verify;  /* the verify artifact (borrowed) */
    char status[200];     /* why it was never measured */
} ex_best;

static void best_free(ex_best *b)
{
    free(b->source);
    cJSON_Delete(b->params);
}

/* A session file, NULL when missing or not readable. */
static char *session_file(const sess_log *log, const char *name)
{
    char *path = dt_xasprintf("%s/%s", log->dir, name);
    char *text = dt_read_file(path, NULL, NULL);
    free(path);
    return text;
}

/* The source of the best kernel: best_kernel.cu beside the session (or where the run put
 * it), else kernel_vN.cu, else the kernel artifact in the log, else the tuner's variant. */
static int best_source(const sess_log *log, const ex_scan *s, ex_best *b, const char *path)
{
    char vfile[64];
    snprintf(vfile, sizeof vfile, "kernel_v%d.cu", b->version);
    if (path != NULL && s->finished != NULL) {
        if ((b->source = session_file(log, "best_kernel.cu")) != NULL) {
            snprintf(b->from, sizeof b->from, "best_kernel.cu");
            return 0;
        }
        if (*path && (b->source = dt_read_file(path, NULL, NULL)) != NULL) {
            snprintf(b->from, sizeof b->from, "best_kernel.cu (%s)", path);
            return 0;
        }
    }
    if (b->version > 0) {
        if ((b->source = session_file(log, vfile)) != NULL) {
            snprintf(b->from, sizeof b->from, "%s", vfile);
            return 0;
        }
        for (int i = 0; i < s->n; i++) {
            if (s->v[i].version == b->version && s->v[i].source) {
                b->source = dt_xstrdup(s->v[i].source);
                snprintf(b->from, sizeof b->from, "events.jsonl (kernel v%d)", b->version);
                return 0;
            }
        }
    }
    const cJSON *tb = cJSON_GetObjectItem(s->tune, "best");
    char *tune_text = session_file(log, "tune.json");
    cJSON *tj = tune_text ? cJSON_Parse(tune_text) : NULL;
    free(tune_text);
    const char *src =
        dt_json_str(cJSON_GetObjectItem(tj, "best"), "source", dt_json_str(tb, "source", NULL));
    if (b->version == 0 && src != NULL && *src) {
        b->source = dt_xstrdup(src);
        snprintf(b->from, sizeof b->from, "tune.json");
    }
    cJSON_Delete(tj);
    return b->source ? 0 : -1;
}

static void set_label(ex_best *b)
{
    if (b->version > 0)
        snprintf(b->label, sizeof b->label, "v%d%s%s", b->version, b->strategy[0] ? " " : "",
                 b->strategy);
    else
        snprintf(b->label, sizeof b->label, "tuned %s", b->strategy[0] ? b->strategy : "variant");
}

/* Numbers of a measure artifact (the worker's measure answer). */
static void from_measure(ex_best *b, const cJSON *m)
{
    const cJSON *base = cJSON_GetObjectItem(m, "baseline");
    b->measured = 1;
    b->measure = m;
    b->us = dt_json_num(m, "us", 0);
    b->speedup = dt_json_num(m, "speedup", 0);
    b->gbps = dt_json_num(m, "gbps", 0);
    b->base_us = dt_json_num(base, "us", 0);
    snprintf(b->method, sizeof b->method, "%s", dt_json_str(m, "method", ""));
    snprintf(b->baseline, sizeof b->baseline, "%s", dt_json_str(base, "best", ""));
}

/* Numbers of a tuner's best variant (agents/tuner.c variant_json). */
static void from_tuned(ex_best *b, const cJSON *t)
{
    b->measured = 1;
    b->us = dt_json_num(t, "us", 0);
    b->speedup = dt_json_num(t, "speedup", 0);
    b->gbps = dt_json_num(t, "gbps", 0);
    b->base_us = dt_json_num(t, "baseline_us", 0);
    snprintf(b->method, sizeof b->method, "%s", dt_json_str(t, "method", ""));
    snprintf(b->baseline, sizeof b->baseline, "%s", dt_json_str(t, "baseline", ""));
    snprintf(b->strategy, sizeof b->strategy, "%s", dt_json_str(t, "strategy", ""));
}

/* The best kernel: session_finished's result.best; else the fastest measured version or
 * tuned variant (the orchestrator's own rule for `best`); else the last verified,
 * compiled or generated version, unmeasured. -1 with e when the session has no kernel. */
static int choose_best(const sess_log *log, const ex_scan *s, ex_best *b, dt_err *e)
{
    memset(b, 0, sizeof *b);
    const cJSON *tb = cJSON_GetObjectItem(s->tune, "best");
    if (s->finished != NULL) {
        const cJSON *f = s->finished;
        b->version = dt_json_int(f, "version", 0);
        b->measured = 1;
        b->us = dt_json_num(f, "us", 0);
        b->speedup = dt_json_num(f, "speedup", 0);
        b->gbps = dt_json_num(f, "gbps", 0);
        snprintf(b->method, sizeof b->method, "%s", dt_json_str(f, "method", ""));
        snprintf(b->baseline, sizeof b->baseline, "%s", dt_json_str(f, "baseline", ""));
        snprintf(b->strategy, sizeof b->strategy, "%s", dt_json_str(f, "strategy", ""));
        b->params = cJSON_Duplicate(cJSON_GetObjectItem(f, "params"), 1);
        for (int i = 0; i < s->n; i++) {
            if (b->version > 0 && s->v[i].version == b->version) {
                b->measure = s->v[i].measure;
                b->verify = s->v[i].verify;
            }
        }
        if (b->measure != NULL)
            b->base_us = dt_json_num(cJSON_GetObjectItem(b->measure, "baseline"), "us", 0);
        else if (tb != NULL && dt_json_num(tb, "us", -1) == b->us)
            b->base_us = dt_json_num(tb, "baseline_us", 0);
        if (b->base_us <= 0 && b->speedup > 0)
            b->base_us = b->us * b->speedup;
        set_label(b);
        if (best_source(log, s, b, dt_json_str(f, "path", "")) != 0)
            return dt_err_set(e,
                              "session %s finished with kernel %s, but neither "
                              "best_kernel.cu nor its source is in the session",
                              log->id, b->label);
        return 0;
    }
    const ex_version *fast = NULL;
    for (int i = 0; i < s->n; i++)
        if (s->v[i].measure && s->v[i].source &&
            (fast == NULL ||
             dt_json_num(s->v[i].measure, "us", 0) < dt_json_num(fast->measure, "us", 0)))
            fast = &s->v[i];
    if (tb != NULL && dt_json_num(tb, "us", 0) > 0 && dt_json_bool(s->tune, "ok", 0) &&
        (fast == NULL || dt_json_num(tb, "us", 0) < dt_json_num(fast->measure, "us", 0))) {
        from_tuned(b, tb);
        b->params = cJSON_Duplicate(cJSON_GetObjectItem(tb, "params"), 1);
        set_label(b);
        if (best_source(log, s, b, NULL) == 0)
            return 0;
        best_free(b);
        memset(b, 0, sizeof *b);
    }
    if (fast != NULL) {
        b->version = fast->version;
        from_measure(b, fast->measure);
        b->verify = fast->verify;
        b->params = cJSON_Duplicate(fast->params, 1);
        snprintf(b->strategy, sizeof b->strategy, "%s", fast->strategy);
        set_label(b);
        return best_source(log, s, b, NULL) == 0
                   ? 0
                   : dt_err_set(e, "kernel %s of session %s has no source", b->label, log->id);
    }
    /* Never measured: the furthest the pipeline got. */
    const ex_version *pick = NULL;
    const char *how = "generated";
    static const char *hows[] = {"verified", "compiled", "generated"};
    for (int pass = 0; pass < 3 && pick == NULL; pass++) {
        for (int i = s->n - 1; i >= 0 && pick == NULL; i--) {
            const ex_version *x = &s->v[i];
            int fits = pass == 0 ? x->verified == 1 : pass == 1 ? x->compiled == 1 : 1;
            if (x->source && fits) {
                pick = x;
                how = hows[pass];
            }
        }
    }
    if (pick == NULL)
        return dt_err_set(e,
                          "session %s has no kernel to export (no generate step produced "
                          "one)",
                          log->id);
    b->version = pick->version;
    b->verify = pick->verify;
    b->params = cJSON_Duplicate(pick->params, 1);
    snprintf(b->strategy, sizeof b->strategy, "%s", pick->strategy);
    set_label(b);
    snprintf(b->status, sizeof b->status,
             "the session never measured a kernel; this is the last %s version (%s)", how,
             pick->verified == 1   ? "it passed verification"
             : pick->verified == 0 ? "it failed verification"
             : pick->compiled == 1 ? "compiled, never verified: no GPU, or the run stopped"
             : pick->compiled == 0 ? "it did not compile"
                                   : "never compiled");
    return best_source(log, s, b, NULL) == 0
               ? 0
               : dt_err_set(e, "kernel %s of session %s has no source", b->label, log->id);
}

/* Version `want` of the session, measured or not. -1 with e naming the versions there are. */
static int choose_version(const sess_log *log, const ex_scan *s, int want, ex_best *b, dt_err *e)
{
    memset(b, 0, sizeof *b);
    for (int i = 0; i < s->n; i++) {
        const ex_version *x = &s->v[i];
        if (x->version != want || x->source == NULL)
            continue;
        b->version = want;
        if (x->measure)
            from_measure(b, x->measure);
        else
            snprintf(b->status, sizeof b->status,
                     "version %d was never measured in the session (%s)", want,
                     x->verified == 1   ? "it passed verification"
                     : x->verified == 0 ? "it failed verification"
                                        : "never verified");
        b->verify = x->verify;
        b->params = cJSON_Duplicate(x->params, 1);
        snprintf(b->strategy, sizeof b->strategy, "%s", x->strategy);
        set_label(b);
        return best_source(log, s, b, NULL) == 0
                   ? 0
                   : dt_err_set(e, "kernel %s of session %s has no source", b->label, log->id);
    }
    dt_buf have = DT_BUF_INIT;
    for (int i = 0; i < s->n; i++)
        if (s->v[i].source)
            dt_buf_printf(&have, "%sv%d %s", have.len ? ", " : "", s->v[i].version,
                          s->v[i].strategy);
    dt_err_set(e, "session %s has no kernel version %d (it has: %s)", log->id, want,
               have.len ? have.data : "none");
    dt_buf_free(&have);
    return -1;
}

/* Whether the harness can build a kernel's format: CSR, or COO beside it (coo_row, the
 * row of each nonzero, which the harness derives from CSR). */
static int harness_format(const char *format)
{
    return format == NULL || strcmp(format, "csr") == 0 || strcmp(format, "coo") == 0;
}

/* The measured versions of the session whose kernels the harness can run, as "v1
 * csr-vector 3.07 us, ..." for an error message; "" when none. */
static void csr_versions(const ex_scan *s, char *out, size_t len)
{
    out[0] = '\0';
    size_t used = 0;
    for (int i = 0; i < s->n && used + 1 < len; i++) {
        const ex_version *x = &s->v[i];
        if (x->source == NULL || x->measure == NULL)
            continue;
        gpu_contract c;
        dt_err ce = {0};
        if (gpu_contract_from_source(x->source, &c, &ce) != 0)
            continue;
        int csr = harness_format(c.format);
        gpu_contract_clear(&c);
        if (!csr)
            continue;
        int n = snprintf(out + used, len - used, "%sv%d %s (%.2f us, %.2fx)", used ? ", " : "",
                         x->version, x->strategy, dt_json_num(x->measure, "us", 0),
                         dt_json_num(x->measure, "speedup", 0));
        if (n < 0)
            break;
        used += (size_t)n < len - used ? (size_t)n : len - used - 1;
    }
}

/* ---- the export itself ----------------------------------------------------------------- */

typedef struct ex_ctx {
    const sess_log *log;
    sp_spec spec;
    ex_best best;
    gpu_contract c;
    int have_contract;
    int64_t rows, cols, nnz, max_row; /* the session's matrix; -1 unknown */
    int64_t sms;
    char sms_from[160];
    gpu_vars vars; /* the session's matrix and params, for the contract */
    int64_t grid[3], block[3], smem, scratch;
    int evaluated;  /* the launch above was computed */
    dt_buf defines; /* "#define NAME VALUE" lines */
    int ndefines;
    char matrix_default[4096]; /* MATRIX for `make run` */
    char matrix_note[600];     /* how matrix.mtx came to be, or why there is none */
    sp_csr *matrix;            /* the session's matrix, to be written as matrix.mtx */
    int write_matrix;          /* matrix.mtx is written */
    sp_fmt fmt;                /* a format other than CSR or COO, built from matrix */
    gpu_vars fvars;            /* its variables */
    int have_fmt;
    uint64_t fmt_sum;   /* csr_sum of the matrix it was built from */
    int pattern_values; /* a pattern given the worker's seeded values */
    char arch[16];
} ex_ctx;

static void ctx_free(ex_ctx *x)
{
    sp_spec_clear(&x->spec);
    best_free(&x->best);
    sp_csr_free(x->matrix);
    if (x->have_fmt)
        sp_fmt_free(&x->fmt);
    if (x->have_contract)
        gpu_contract_clear(&x->c);
    dt_buf_free(&x->defines);
}

/* Parameters a CSR (or COO) kernel of op can bind, as the worker's dev_launch does. */
static int param_bindable(const char *p, sp_op op, const char *format)
{
    if (strcmp(p, "coo_row") == 0)
        return format != NULL && strcmp(format, "coo") == 0;
    static const char *common[] = {"rows", "cols", "nnz",   "n",    "k",    "max_row", "rowptr",
                                   "col",  "val",  "alpha", "beta", "bias", "scratch"};
    for (size_t i = 0; i < DT_ARRAY_LEN(common); i++)
        if (strcmp(p, common[i]) == 0)
            return 1;
    if (op == SP_SPMV)
        return strcmp(p, "x") == 0 || strcmp(p, "y") == 0;
    if (op == SP_SPMM)
        return strcmp(p, "B") == 0 || strcmp(p, "C") == 0;
    return strcmp(p, "A") == 0 || strcmp(p, "Bt") == 0 || strcmp(p, "out") == 0;
}

/* The variables every harness knows, from the matrix it loads and its device. */
static const char *const harness_vars[] = {"rows", "cols", "nnz", "n", "k", "max_row", "sms"};

static int is_harness_var(const char *name)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(harness_vars); i++)
        if (strcmp(name, harness_vars[i]) == 0)
            return 1;
    return 0;
}

/* The index of a format array or variable named name, -1 when there is none. */
static int fmt_array(const ex_ctx *x, const char *name)
{
    for (int i = 0; x->have_fmt && i < x->fmt.narr; i++)
        if (strcmp(x->fmt.name[i], name) == 0)
            return i;
    return -1;
}

static int fmt_var(const ex_ctx *x, const char *name, int64_t *val)
{
    return x->have_fmt && gpu_vars_get(&x->fvars, name, val) == 0;
}

static int is_expr_var(const char *name, size_t len, const cJSON *params, const gpu_vars *fv)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(harness_vars); i++)
        if (strlen(harness_vars[i]) == len && strncmp(name, harness_vars[i], len) == 0)
            return 1;
    for (int i = 0; fv != NULL && i < fv->n; i++)
        if (strlen(fv->name[i]) == len && strncmp(name, fv->name[i], len) == 0)
            return 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, params)
    {
        if (strlen(p->string) == len && strncmp(name, p->string, len) == 0)
            return 1;
    }
    return 0;
}

/* A contract expression as C: cdiv/min/max become the harness's dx_ helpers, the size
 * variables are locals of dx_contract_dims and the parameters are kernel.cu's macros.
 * -1 with e for a name that is neither. */
static int expr_to_c(const char *expr, const cJSON *params, const gpu_vars *fv, dt_buf *out,
                     dt_err *e)
{
    dt_err se = {0};
    if (gpu_expr_check(expr, &se) != 0)
        return dt_err_set(e, "%s", se.msg);
    dt_buf_putc(out, '(');
    for (const char *p = expr; *p;) {
        if (isalpha((unsigned char)*p) || *p == '_') {
            const char *s = p;
            while (isalnum((unsigned char)*p) || *p == '_')
                p++;
            size_t len = (size_t)(p - s);
            if ((len == 4 && strncmp(s, "cdiv", 4) == 0) ||
                (len == 3 && strncmp(s, "min", 3) == 0) ||
                (len == 3 && strncmp(s, "max", 3) == 0)) {
                dt_buf_puts(out, "dx_");
            } else if (!is_expr_var(s, len, params, fv)) {
                return dt_err_set(e,
                                  "'%s' uses '%.*s', which is neither a size variable of the "
                                  "matrix or its format nor one of the kernel's parameters",
                                  expr, (int)len, s);
            } else if (!is_expr_var(s, len, params, NULL)) {
                /* A format variable: a constant of the harness, prefixed so that names
                 * such as `long` stay identifiers. */
                dt_buf_puts(out, "dx_fv_");
            }
            dt_buf_append(out, s, len);
        } else {
            dt_buf_putc(out, *p++);
        }
    }
    dt_buf_putc(out, ')');
    return 0;
}

/* The session's matrix sizes from report.json (the profile step's artifact). */
static void session_matrix(ex_ctx *x, const ex_scan *s)
{
    char *text = session_file(x->log, "report.json");
    cJSON *file = text ? cJSON_Parse(text) : NULL;
    free(text);
    const cJSON *rep = cJSON_GetObjectItem(file, "report");
    if (rep == NULL)
        rep = s->report;
    x->rows = dt_json_i64(rep, "rows", -1);
    x->cols = dt_json_i64(rep, "cols", -1);
    x->nnz = dt_json_i64(rep, "nnz", -1);
    x->max_row = dt_json_i64(cJSON_GetObjectItem(rep, "row_length"), "max", -1);
    if (x->rows < 0 || x->cols < 0 || x->nnz < 0 || x->max_row < 0)
        x->rows = x->cols = x->nnz = x->max_row = -1;
    cJSON_Delete(file);
}

/* The multiprocessor count of the session's GPU, for contracts that use `sms`: from the
 * hardware spec matching the fingerprint, else an H200's 132. */
static void session_sms(ex_ctx *x)
{
    const cJSON *fp = x->log->fingerprint;
    const char *gpu = dt_json_str(fp, "gpu", "");
    int maj = 0, min = 0;
    sscanf(dt_json_str(fp, "cc", ""), "%d.%d", &maj, &min);
    x->sms = 132;
    snprintf(x->sms_from, sizeof x->sms_from, "132 SMs (an H200's: the session's GPU is unknown)");
    if (*gpu && strcmp(gpu, "none") != 0) {
        dt_err e = {0};
        char warn[256] = "";
        hw_spec *g = hw_match(gpu, maj, min, 0, NULL, warn, sizeof warn, &e);
        if (g != NULL && g->sm_count > 0) {
            x->sms = g->sm_count;
            snprintf(x->sms_from, sizeof x->sms_from, "%d SMs (ditto's spec of %s)", g->sm_count,
                     g->full_name);
        }
        hw_spec_free(g);
    }
    if (maj > 0)
        snprintf(x->arch, sizeof x->arch, "sm_%d%d", maj, min);
}

/* Parse the contract, check that the harness can run it, evaluate the defines and the
 * launch on the session's matrix. -1 with e. */
/* FNV-1a over a CSR's sizes, row offsets, columns and values (their bits): the harness
 * computes the same sum of the matrix it reads, and a kernel whose format was built here
 * runs only on that matrix. */
static uint64_t csr_sum(const sp_csr *a)
{
    uint64_t h = 0xcbf29ce484222325ULL;
#define MIX(w) (h = (h ^ (uint64_t)(w)) * 0x100000001b3ULL)
    MIX(a->rows);
    MIX(a->cols);
    MIX(a->nnz);
    for (int64_t r = 0; r <= a->rows; r++)
        MIX(a->rowptr[r]);
    for (int64_t t = 0; t < a->nnz; t++) {
        uint64_t bits;
        memcpy(&bits, &a->val[t], sizeof bits);
        MIX((uint32_t)a->col[t]);
        MIX(bits);
    }
#undef MIX
    return h;
}

/* A kernel over another format than CSR or COO: load the session's matrix and build the
 * format as the worker does (its format_params evaluated over the kernel's parameters),
 * keeping the arrays on the host for format/. -1 with e. */
static int prebuild_format(ex_ctx *x, dt_err *e)
{
    const ex_best *b = &x->best;
    if (x->matrix == NULL) {
        sp_read_opts ro = {.quiet = 1};
        dt_err le = {0};
        x->matrix = sp_load(x->spec.matrix, &ro, &le);
        if (x->matrix == NULL)
            return dt_err_set(e,
                              "kernel %s needs the '%s' format, which export builds from the "
                              "session's matrix, and %s cannot be loaded here: %s",
                              b->label, x->c.format, x->spec.matrix, le.msg);
    }
    if (x->matrix->pattern) {
        /* The values the session's worker ran on; matrix.mtx then carries them, so the
         * harness reads the matrix the format was built from. */
        sp_csr_randomize_pattern_values(x->matrix);
        x->matrix->pattern = 0;
        x->pattern_values = 1;
    }
    dt_err fe = {0};
    cJSON *fp = gpu_format_params(&x->c, b->params, &fe);
    if (fp == NULL && x->c.format_params != NULL)
        return dt_err_set(e, "kernel %s: contract format_params: %s", b->label, fe.msg);
    if (x->matrix->nnz >= 1000000) /* seconds of work: say so */
        fprintf(stderr, "ditto export: building the %s format of %s (%lld nonzeros)\n", x->c.format,
                x->spec.matrix, (long long)x->matrix->nnz);
    int rc = sp_fmt_build(x->matrix, x->c.format, fp, x->spec.dtype, &x->fmt, &fe);
    cJSON_Delete(fp);
    if (rc != 0)
        return dt_err_set(e, "kernel %s: building its '%s' format from the session's matrix: %s",
                          b->label, x->c.format, fe.msg);
    x->have_fmt = 1;
    for (int i = 0; i < x->fmt.nvars; i++)
        gpu_vars_set(&x->fvars, x->fmt.var_name[i], x->fmt.var_val[i]); /* static names */
    x->fmt_sum = csr_sum(x->matrix);
    /* The kernel is specialised to the matrix its format was built from. */
    const sp_csr *a = x->matrix;
    if (x->rows >= 0 && (a->rows != x->rows || a->cols != x->cols || a->nnz != x->nnz))
        fprintf(stderr,
                "ditto export: warning: %s loads as %d x %d, %lld nonzeros here, but the "
                "session profiled %lld x %lld, %lld; the kernel and its format are exported "
                "for the matrix loaded here\n",
                x->spec.matrix, a->rows, a->cols, (long long)a->nnz, (long long)x->rows,
                (long long)x->cols, (long long)x->nnz);
    x->rows = a->rows;
    x->cols = a->cols;
    x->nnz = a->nnz;
    gpu_vars_get(&x->fvars, "max_row", &x->max_row);
    return 0;
}

/* Every parameter of the contract binds: for CSR and COO kernels what the harness builds
 * from the matrix; for another format its arrays and variables (as the worker binds them,
 * no CSR arrays unless the format has them), the operands and the scalars. */
static int check_params(const ex_ctx *x, const char *fmt, dt_err *e)
{
    const ex_best *b = &x->best;
    for (int i = 0; i < x->c.nparams; i++) {
        const char *p = x->c.params[i];
        int64_t v;
        if (!x->have_fmt) {
            if (!param_bindable(p, x->spec.op, fmt))
                return dt_err_set(e,
                                  "kernel %s takes '%s', which nothing binds to for a CSR %s "
                                  "kernel",
                                  b->label, p, sp_op_name(x->spec.op));
            continue;
        }
        if (fmt_array(x, p) >= 0 || fmt_var(x, p, &v) ||
            (param_bindable(p, x->spec.op, "csr") && strcmp(p, "rowptr") != 0 &&
             strcmp(p, "col") != 0 && strcmp(p, "val") != 0))
            continue;
        dt_buf arrays = DT_BUF_INIT;
        for (int j = 0; j < x->fmt.narr; j++)
            dt_buf_printf(&arrays, "%s%s", j ? ", " : "", x->fmt.name[j]);
        dt_err_set(e,
                   "kernel %s takes '%s', which the '%s' format does not provide (its arrays: "
                   "%s)",
                   b->label, p, fmt, dt_buf_str(&arrays));
        dt_buf_free(&arrays);
        return -1;
    }
    return 0;
}

/* Parse the contract, check that the harness can run it, evaluate the defines and the
 * launch on the session's matrix. -1 with e. */
static int prepare_contract(ex_ctx *x, dt_err *e)
{
    ex_best *b = &x->best;
    dt_err ce = {0};
    if (gpu_contract_from_source(b->source, &x->c, &ce) != 0)
        return dt_err_set(e, "kernel %s (%s) has no usable launch contract: %s", b->label, b->from,
                          ce.msg);
    x->have_contract = 1;
    const char *fmt = x->c.format ? x->c.format : "csr";
    if (x->c.op != x->spec.op)
        return dt_err_set(e, "kernel %s's contract is for %s, the session's problem is %s",
                          b->label, sp_op_name(x->c.op), sp_op_name(x->spec.op));
    /* As the worker does: the manifest's default for each parameter the
     * kernel's params do not name (a session from before a template gained
     * a parameter names none for it, and a format formula may read it). */
    if (!cJSON_IsObject(b->params)) {
        cJSON_Delete(b->params);
        b->params = dt_json_obj();
    }
    gpu_manifest m;
    dt_err me = {0};
    if (gpu_manifest_from_source(b->source, &m, &me) == 0) {
        cJSON *d = gpu_manifest_defaults(&m);
        const cJSON *dv;
        cJSON_ArrayForEach(dv, d)
        {
            if (cJSON_GetObjectItemCaseSensitive(b->params, dv->string) == NULL)
                cJSON_AddNumberToObject(b->params, dv->string, dv->valuedouble);
        }
        cJSON_Delete(d);
        gpu_manifest_clear(&m);
    }
    const cJSON *p;
    cJSON_ArrayForEach(p, b->params)
    {
        if (!cJSON_IsNumber(p) || p->valuedouble != floor(p->valuedouble))
            return dt_err_set(e, "kernel %s: parameter %s is not an integer", b->label, p->string);
    }
    if (!harness_format(fmt) && prebuild_format(x, e) != 0)
        return -1;
    if (check_params(x, fmt, e) != 0)
        return -1;
    gpu_vars *v = &x->vars;
    v->n = 0;
    /* The format's variables (nslices, C, slice_shift, ...), then the harness's own. */
    for (int i = 0; x->have_fmt && i < x->fvars.n; i++)
        if (!is_harness_var(x->fvars.name[i]))
            gpu_vars_set(v, x->fvars.name[i], x->fvars.val[i]);
    gpu_vars_set(v, "rows", x->rows);
    gpu_vars_set(v, "cols", x->cols);
    gpu_vars_set(v, "nnz", x->nnz);
    gpu_vars_set(v, "max_row", x->max_row);
    gpu_vars_set(v, "n", x->spec.op == SP_SPMM ? x->spec.n : 0);
    gpu_vars_set(v, "k", x->spec.op == SP_SDDMM ? x->spec.n : 0);
    gpu_vars_set(v, "sms", x->sms);
    cJSON_ArrayForEach(p, b->params)
    {
        gpu_vars_set(v, p->string, dt_json_as_i64(p, 0));
    }
    int known = x->rows >= 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, x->c.defines)
    {
        int64_t val = 0;
        dt_err de = {0};
        if (cJSON_IsNumber(d)) {
            val = dt_json_as_i64(d, 0);
        } else if (!known) {
            return dt_err_set(e,
                              "kernel %s bakes matrix constants (defines.%s), but the session "
                              "has no report.json with its matrix's sizes",
                              b->label, d->string);
        } else if (gpu_eval(d->valuestring, v, &val, &de) != 0) {
            return dt_err_set(e, "kernel %s: contract defines.%s: %s", b->label, d->string, de.msg);
        }
        dt_buf_printf(&x->defines, "#define %s %lld%s%s%s\n", d->string, (long long)val,
                      cJSON_IsString(d) ? " /* " : "", cJSON_IsString(d) ? d->valuestring : "",
                      cJSON_IsString(d) ? " */" : "");
        x->ndefines++;
    }
    /* Every launch expression must be C the harness can compile, and the launch on the
     * session's matrix goes into the README. */
    const char *exprs[8] = {x->c.grid[0],  x->c.grid[1],  x->c.grid[2], x->c.block[0],
                            x->c.block[1], x->c.block[2], x->c.smem,    x->c.scratch_bytes};
    int64_t *outs[8] = {&x->grid[0],  &x->grid[1],  &x->grid[2], &x->block[0],
                        &x->block[1], &x->block[2], &x->smem,    &x->scratch};
    x->evaluated = known;
    for (int i = 0; i < 8; i++) {
        dt_buf tmp = DT_BUF_INIT;
        dt_err xe = {0};
        const char *ex = exprs[i] ? exprs[i] : "0";
        int rc = expr_to_c(ex, b->params, x->have_fmt ? &x->fvars : NULL, &tmp, &xe);
        dt_buf_free(&tmp);
        if (rc != 0)
            return dt_err_set(e, "kernel %s: contract expression %s", b->label, xe.msg);
        if (known && gpu_eval(ex, v, outs[i], &xe) != 0)
            x->evaluated = 0;
    }
    return 0;
}

/* ---- writing helpers ------------------------------------------------------------------- */

/* s as a C string literal. */
static void c_string(dt_buf *b, const char *s)
{
    dt_buf_putc(b, '"');
    for (; s && *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            dt_buf_printf(b, "\\%c", ch);
        else if (ch == '?')
            dt_buf_puts(b, "\\?"); /* no trigraphs */
        else if (ch < 0x20 || ch >= 0x7f)
            dt_buf_printf(b, "\\%03o", ch);
        else
            dt_buf_putc(b, (char)ch);
    }
    dt_buf_putc(b, '"');
}

/* A double as a C floating literal (always with a '.' or an exponent). */
static void c_double(dt_buf *b, double v)
{
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%.17g", v);
    dt_buf_puts(b, tmp);
    if (strpbrk(tmp, ".eE") == NULL)
        dt_buf_puts(b, ".0");
}

static const char *dtype_macro(sp_dtype t)
{
    return t == SP_FP64 ? "FP64" : t == SP_FP16 ? "FP16" : t == SP_BF16 ? "BF16" : "FP32";
}

static const char *t_name(sp_dtype t)
{
    return t == SP_FP64   ? "double"
           : t == SP_FP16 ? "__half"
           : t == SP_BF16 ? "__nv_bfloat16"
                          : "float";
}

static int epi_code(sp_epilogue ep)
{
    return ep == SP_EPI_RELU ? 1 : ep == SP_EPI_GELU ? 2 : ep == SP_EPI_BIAS ? 3 : 0;
}

/* "#include "NAME"" or "#include <NAME>" on this line: NAME into name. */
static int include_name(const char *line, size_t len, char *name, size_t cap)
{
    const char *p = line, *end = line + len;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || *p != '#')
        return 0;
    p++;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if ((size_t)(end - p) < 7 || strncmp(p, "include", 7) != 0)
        return 0;
    p += 7;
    while (p < end && (*p == ' ' || *p == '\t'))
        p++;
    if (p == end || (*p != '"' && *p != '<'))
        return 0;
    char close = *p == '"' ? '"' : '>';
    const char *s = ++p;
    while (p < end && *p != close)
        p++;
    if (p == end || (size_t)(p - s) >= cap || p == s)
        return 0;
    memcpy(name, s, (size_t)(p - s));
    name[p - s] = '\0';
    return 1;
}

/* Copy src into out with every include of a file in ditto's kernels/ folder (ditto.cuh,
 * what the worker puts on NVRTC's include path) replaced by that file, recursively.
 * Other includes (the toolkit's) stay. -1 with e when ditto.cuh is needed but missing. */
static int inline_includes(const char *src, dt_buf *out, int depth, dt_err *e)
{
    for (const char *line = src; *line;) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char name[256];
        char *path = NULL;
        if (include_name(line, len, name, sizeof name) && strstr(name, "..") == NULL &&
            name[0] != '/') {
            char *rel = dt_xasprintf("kernels/%s", name);
            path = dt_share_path(rel);
            free(rel);
            if (path == NULL && strcmp(name, "ditto.cuh") == 0)
                return dt_err_set(e, "kernels/ditto.cuh, which the kernel includes, was not found "
                                     "(set DITTO_SHARE to ditto's source or share folder)");
        }
        char *text = path ? dt_read_file(path, NULL, NULL) : NULL;
        if (text != NULL && depth < 4) {
            dt_buf_printf(out, "/* ---- %s, inlined by ditto export ---- */\n", name);
            int rc = inline_includes(text, out, depth + 1, e);
            if (out->len && out->data[out->len - 1] != '\n')
                dt_buf_putc(out, '\n');
            dt_buf_printf(out, "/* ---- end of %s ---- */\n", name);
            free(text);
            free(path);
            if (rc != 0)
                return -1;
        } else {
            free(text);
            free(path);
            dt_buf_append(out, line, len);
            if (nl)
                dt_buf_putc(out, '\n');
        }
        line += len + (nl != NULL);
    }
    return 0;
}

static void params_text(const cJSON *params, char *out, size_t cap)
{
    char *s = dt_json_print(params, 0);
    snprintf(out, cap, "%s", s);
    free(s);
}

static char *kernel_file(ex_ctx *x, dt_err *e)
{
    const ex_best *b = &x->best;
    dt_buf o = DT_BUF_INIT;
    char ps[512];
    params_text(b->params, ps, sizeof ps);
    dt_buf_printf(&o,
                  "/* kernel.cu -- exported by ditto %s from session %s: kernel %s, params %s.\n",
                  DT_VERSION, x->log->id, b->label, ps);
    dt_buf_puts(&o, " * Standalone: ditto.cuh is inlined where the source included it, and the "
                    "macros ditto's\n * worker passed to NVRTC are defined first: the dtype and "
                    "epilogue, the parameters");
    if (x->ndefines)
        dt_buf_printf(&o,
                      ",\n * and the contract's defines evaluated on the session's matrix (%lld "
                      "x %lld, %lld nonzeros,\n * longest row %lld): this kernel is "
                      "specialised to that matrix.",
                      (long long)x->rows, (long long)x->cols, (long long)x->nnz,
                      (long long)x->max_row);
    else
        dt_buf_puts(&o, ". Its contract bakes no matrix constant in.");
    dt_buf_puts(
        &o,
        "\n * The launch contract is the @contract comment below; harness.cu launches it. */\n");
    dt_buf_printf(&o,
                  /* "1", as the worker's -DDITTO_DTYPE_X defines them: re-checking
                   * the file with `ditto check` redefines them compatibly. */
                  "#define DITTO_T %s\n#define DITTO_S %s\n#define DITTO_DTYPE_%s 1\n"
                  "#define DITTO_EPILOGUE_%s 1\n",
                  t_name(x->spec.dtype), x->spec.dtype == SP_FP64 ? "double" : "float",
                  dtype_macro(x->spec.dtype),
                  x->spec.epilogue == SP_EPI_RELU   ? "RELU"
                  : x->spec.epilogue == SP_EPI_GELU ? "GELU"
                  : x->spec.epilogue == SP_EPI_BIAS ? "BIAS"
                                                    : "NONE");
    const cJSON *p;
    if (cJSON_GetArraySize(b->params) > 0)
        dt_buf_puts(&o, "/* the kernel's parameters */\n");
    cJSON_ArrayForEach(p, b->params)
    {
        dt_buf_printf(&o, "#define %s %lld\n", p->string, (long long)dt_json_as_i64(p, 0));
    }
    if (x->ndefines) {
        dt_buf_puts(&o, "/* the contract's defines on the session's matrix */\n");
        dt_buf_puts(&o, x->defines.data);
    }
    dt_buf_puts(&o, "\n");
    if (inline_includes(b->source, &o, 0, e) != 0) {
        dt_buf_free(&o);
        return NULL;
    }
    return dt_buf_take(&o);
}

/* ---- the harness template (export/harness.cu, shipped data) ------------------------------ */

#define HARNESS_HEAD     "//@ditto-export:head\n"
#define HARNESS_CONTRACT "//@ditto-export:contract\n"
#define HARNESS_TOL      "#include \"sparse/tolerance.h\"\n"

/* The text of shipped file rel (export/harness.cu, sparse/tolerance.h), a new string, or NULL
 * with e naming what is missing and where it was looked for. */
static char *share_text(const char *rel, dt_err *e)
{
    char *path = dt_share_path(rel);
    if (path == NULL) {
        dt_err_set(e,
                   "%s, which every exported harness is made from, was not found (set "
                   "DITTO_SHARE to ditto's source or share folder, or reinstall ditto)",
                   rel);
        return NULL;
    }
    dt_err re = {0};
    char *text = dt_read_file_max(path, (size_t)1 << 20, NULL, &re);
    if (text == NULL)
        dt_err_set(e, "%s", re.msg);
    free(path);
    return text;
}

int export_harness_parts(char **head, char **tail, dt_err *e)
{
    *head = *tail = NULL;
    char *t = share_text("export/harness.cu", e);
    if (t == NULL)
        return -1;
    char *h = strstr(t, HARNESS_HEAD);
    char *c = h ? strstr(h, HARNESS_CONTRACT) : NULL;
    char *inc = h && c ? strstr(h, HARNESS_TOL) : NULL;
    if (inc == NULL || inc > c) {
        const char *missing = h == NULL ? HARNESS_HEAD : c == NULL ? HARNESS_CONTRACT : HARNESS_TOL;
        dt_err_set(e,
                   "export/harness.cu: the line %.*s is missing (a damaged install: reinstall "
                   "ditto or point DITTO_SHARE at its source)",
                   (int)strlen(missing) - 1, missing);
        free(t);
        return -1;
    }
    char *tol = share_text("sparse/tolerance.h", e);
    if (tol == NULL) {
        free(t);
        return -1;
    }
    dt_buf o = DT_BUF_INIT;
    dt_buf_append(&o, h + strlen(HARNESS_HEAD), (size_t)(inc - h) - strlen(HARNESS_HEAD));
    dt_buf_puts(&o, "/* ---- sparse/tolerance.h, inlined by ditto export ---- */\n");
    dt_buf_puts(&o, tol);
    if (o.len && o.data[o.len - 1] != '\n')
        dt_buf_putc(&o, '\n');
    dt_buf_puts(&o, "/* ---- end of sparse/tolerance.h ---- */\n");
    const char *after = inc + strlen(HARNESS_TOL);
    dt_buf_append(&o, after, (size_t)(c - after));
    *head = dt_buf_take(&o);
    *tail = dt_xstrdup(c + strlen(HARNESS_CONTRACT));
    free(tol);
    free(t);
    return 0;
}

/* The generated part of harness.cu: what the session ran, the launch contract as C. */
static char *harness_file(ex_ctx *x, dt_err *e)
{
    char *head, *tail;
    if (export_harness_parts(&head, &tail, e) != 0)
        return NULL;
    const ex_best *b = &x->best;
    const sp_spec *sp = &x->spec;
    const cJSON *fp = x->log->fingerprint;
    dt_buf o = DT_BUF_INIT;
    dt_buf_printf(&o,
                  "/* harness.cu -- generated by ditto %s export from session %s: reads a "
                  "Matrix Market file,\n * runs kernel %s under its launch contract, checks "
                  "every output against an fp64 CPU\n * reference and times it next to "
                  "cuSPARSE the way the session did. See README.md. */\n",
                  DT_VERSION, x->log->id, b->label);
    dt_buf_puts(&o, "#include \"kernel.cu\"\n\n/* ---- what the session ran (generated) ---- */\n");
    dt_buf_puts(&o, "#define DX_SESSION ");
    c_string(&o, x->log->id);
    dt_buf_puts(&o, "\n#define DX_KERNEL_NAME ");
    c_string(&o, b->label);
    dt_buf_printf(&o, "\n#define DX_OP %d /* 0 spmv, 1 spmm, 2 sddmm */\n", (int)sp->op);
    dt_buf_printf(&o, "#define DX_OP_NAME \"%s\"\n", sp_op_name(sp->op));
    dt_buf_printf(&o, "#define DX_N %d /* SpMM columns of B, SDDMM inner dimension K */\n",
                  sp->op == SP_SPMV ? 1 : (int)sp->n);
    dt_buf_puts(&o, "#define DX_ALPHA ");
    c_double(&o, sp->alpha);
    dt_buf_puts(&o, "\n#define DX_BETA ");
    c_double(&o, sp->beta);
    dt_buf_printf(&o, "\n#define DX_EPI %d /* 0 none, 1 relu, 2 gelu, 3 bias */\n",
                  epi_code(sp->epilogue));
    dt_buf_printf(&o, "#define DX_EPI_NAME \"%s\"\n", sp_epilogue_name(sp->epilogue));
    dt_buf_printf(&o, "#define DX_COL_MAJOR %d /* SpMM B and C layout */\n",
                  x->c.layout == SP_COL_MAJOR);
    dt_buf_printf(&o, "#define DX_COO %d /* the kernel takes coo_row, each nonzero's row */\n",
                  x->c.format != NULL && strcmp(x->c.format, "coo") == 0);
    dt_buf_printf(&o,
                  "#define DX_FMT_N %d /* arrays of the format ditto export built, in "
                  "format/ (0: CSR) */\n",
                  x->have_fmt ? x->fmt.narr : 0);
    dt_buf_puts(&o, "#define DX_FMT_NAME ");
    c_string(&o, x->have_fmt ? x->c.format : "csr");
    dt_buf_printf(&o,
                  "\n#define DX_FMT_SUM 0x%016llxULL /* the matrix it was built from "
                  "(dx_csr_sum) */\n",
                  (unsigned long long)x->fmt_sum);
    dt_buf_printf(&o,
                  "#define DX_SCRATCH_ONCE %d /* 1: scratch zeroed once, the kernel leaves it "
                  "zeroed; 0: before each launch */\n",
                  x->c.scratch_once);
    dt_buf_puts(&o, "#define DX_METHOD ");
    c_string(&o, b->measured && b->method[0] ? b->method : "auto");
    dt_buf_puts(&o, " /* the session's timing method; auto: graph when L2-resident */\n");
    dt_buf_puts(&o, "#define DX_BASELINE ");
    c_string(&o, b->baseline);
    dt_buf_puts(&o, " /* the session's best cuSPARSE algorithm */\n");
    dt_buf_printf(&o,
                  "#define DX_USE_CUSPARSE %d /* 1: in the session DX_BASELINE was faster than "
                  "this kernel: call it (dx_cs_compute makes that call) */\n",
                  CUSPARSE_FASTER(b));
    dt_buf_puts(&o, "#define DX_SEED 12345ULL /* ditto's verification seed */\n");
    dt_buf_printf(&o, "#define DX_BAKED %d /* the contract bakes matrix constants in */\n",
                  x->ndefines > 0);
    dt_buf_printf(&o, "#define DX_ROWS %lldLL /* the session's matrix; -1 unknown */\n",
                  (long long)x->rows);
    dt_buf_printf(&o, "#define DX_COLS %lldLL\n#define DX_NNZ %lldLL\n#define DX_MAX_ROW %lldLL\n",
                  (long long)x->cols, (long long)x->nnz, (long long)x->max_row);
    const cJSON *rq = x->c.requires;
    dt_buf_printf(&o, "#define DX_REQ_UNIFORM %d /* the contract's requires */\n",
                  dt_json_bool(rq, "uniform_rows", 0));
    dt_buf_printf(&o, "#define DX_REQ_MAX_ROW %lldLL\n#define DX_REQ_MIN_ROWS %lldLL\n",
                  (long long)gpu_requires_num(&x->c, b->params, "max_row", -1),
                  (long long)dt_json_i64(rq, "min_rows", -1));
    dt_buf_printf(&o, "#define DX_REQ_SQUARE %d\n", dt_json_bool(rq, "square", 0));
    dt_buf_puts(&o, "#define DX_S_US ");
    c_double(&o, b->measured ? b->us : 0);
    dt_buf_puts(&o, " /* the session's numbers; 0: never measured */\n#define DX_S_BASE_US ");
    c_double(&o, b->measured ? b->base_us : 0);
    dt_buf_puts(&o, "\n#define DX_S_SPEEDUP ");
    c_double(&o, b->measured ? b->speedup : 0);
    char gpu[400];
    snprintf(gpu, sizeof gpu, "measured on %s%s%s%s, ditto %s",
             dt_json_str(fp, "gpu", "an unknown GPU"), dt_json_str(fp, "cc", "")[0] ? " (cc " : "",
             dt_json_str(fp, "cc", ""), dt_json_str(fp, "cc", "")[0] ? ")" : "",
             dt_json_str(fp, "ditto", "?"));
    if (!b->measured)
        snprintf(gpu, sizeof gpu, "never measured this kernel (%s)",
                 dt_json_str(fp, "gpu", "no GPU recorded"));
    dt_buf_puts(&o, "\n#define DX_SESSION_GPU ");
    c_string(&o, gpu);
    dt_buf_puts(&o, "\n\n");
    dt_buf_puts(&o, head);
    free(head);
    /* The contract as C. */
    dt_buf_puts(
        &o, "/* ---- the launch contract of kernel.cu's @contract block (generated) ---- */\n\n");
    dt_buf_printf(&o, "#define DX_ENTRY %s\n\n", x->c.entry);
    dt_buf_puts(&o, "/* The format's arrays: format/NAME.bin, raw, of these sizes in bytes. */\n"
                    "static const char *const dx_fmt_files[] = {");
    for (int i = 0; i < (x->have_fmt ? x->fmt.narr : 0); i++) {
        dt_buf_puts(&o, i ? ", " : "");
        c_string(&o, x->fmt.name[i]);
    }
    dt_buf_puts(&o, x->have_fmt && x->fmt.narr ? "};\n" : "\"\"};\n");
    dt_buf_puts(&o, "static const unsigned long long dx_fmt_bytes[] = {");
    for (int i = 0; i < (x->have_fmt ? x->fmt.narr : 0); i++)
        dt_buf_printf(&o, "%s%zuULL", i ? ", " : "", x->fmt.bytes[i]);
    dt_buf_puts(&o, x->have_fmt && x->fmt.narr ? "};\n\n" : "0};\n\n");
    dt_buf_puts(&o, "static void dx_contract_dims(const dx_vars *v, dx_dims *d)\n{\n"
                    "    const long long rows = v->rows, cols = v->cols, nnz = v->nnz, n = v->n, "
                    "k = v->k;\n"
                    "    const long long max_row = v->max_row, sms = v->sms;\n"
                    "    (void)rows;\n    (void)cols;\n    (void)nnz;\n    (void)n;\n    (void)k;\n"
                    "    (void)max_row;\n    (void)sms;\n");
    for (int i = 0; x->have_fmt && i < x->fvars.n; i++) {
        const char *name = x->fvars.name[i];
        if (!is_harness_var(name))
            dt_buf_printf(&o,
                          "    const long long dx_fv_%s = %lldLL; /* the format's %s */\n"
                          "    (void)dx_fv_%s;\n",
                          name, (long long)x->fvars.val[i], name, name);
    }
    static const char *dim_names[8] = {"grid[0]",  "grid[1]",  "grid[2]", "block[0]",
                                       "block[1]", "block[2]", "smem",    "scratch"};
    const char *exprs[8] = {x->c.grid[0],  x->c.grid[1],  x->c.grid[2], x->c.block[0],
                            x->c.block[1], x->c.block[2], x->c.smem,    x->c.scratch_bytes};
    for (int i = 0; i < 8; i++) {
        dt_buf c = DT_BUF_INIT;
        dt_err ee = {0};
        expr_to_c(exprs[i] ? exprs[i] : "0", x->best.params, x->have_fmt ? &x->fvars : NULL, &c,
                  &ee); /* checked before */
        dt_buf_printf(&o, "    d->%s = %s;\n", dim_names[i], c.data);
        dt_buf_free(&c);
    }
    dt_buf_puts(&o, "}\n\n");
    dt_buf_puts(&o, "/* The parameters in contract order; pointers bind whatever their declared "
                    "type. */\n");
    dt_buf_puts(&o, "static void dx_contract_launch(const dx_args *a, const dx_dims *d, "
                    "cudaStream_t s)\n{\n"
                    "    dim3 grid((unsigned)d->grid[0], (unsigned)d->grid[1], "
                    "(unsigned)d->grid[2]);\n"
                    "    dim3 block((unsigned)d->block[0], (unsigned)d->block[1], "
                    "(unsigned)d->block[2]);\n");
    dt_buf_printf(&o, "    %s<<<grid, block, (size_t)d->smem, s>>>(", x->c.entry);
    for (int i = 0; i < x->c.nparams; i++) {
        const char *p = x->c.params[i];
        int64_t fv;
        if (i)
            dt_buf_puts(&o, ", ");
        if (strcmp(p, "alpha") == 0 || strcmp(p, "beta") == 0)
            dt_buf_printf(&o, "(S)a->%s", p);
        else if (strcmp(p, "rows") == 0 || strcmp(p, "cols") == 0 || strcmp(p, "nnz") == 0 ||
                 strcmp(p, "n") == 0 || strcmp(p, "k") == 0 || strcmp(p, "max_row") == 0)
            dt_buf_printf(&o, "a->%s", p);
        else if (fmt_array(x, p) >= 0)
            dt_buf_printf(&o, "dx_p(a->fmt[%d]) /* %s */", fmt_array(x, p), p);
        else if (fmt_var(x, p, &fv))
            dt_buf_printf(&o, "(int)%lldLL /* %s */", (long long)fv, p);
        else
            dt_buf_printf(&o, "dx_p(a->%s)", p);
    }
    dt_buf_puts(&o, ");\n}\n\n");
    dt_buf_puts(&o, tail);
    free(tail);
    return dt_buf_take(&o);
}

static char *makefile_file(const ex_ctx *x)
{
    dt_buf o = DT_BUF_INIT;
    dt_buf_printf(&o,
                  "# Makefile -- builds the harness of ditto session %s's kernel %s (GNU make).\n"
                  "#\n"
                  "#   make                  ./harness (nvcc -O3 -arch=$(ARCH), linked with "
                  "cuSPARSE)\n"
                  "#   make run              ./harness $(MATRIX)\n"
                  "#   make ARCH=sm_80       another GPU architecture\n"
                  "#   make run MATRIX=m.mtx another Matrix Market file\n"
                  "# No GPU is needed to build.\n\n",
                  x->log->id, x->best.label);
    dt_buf_puts(&o,
                "NVCC ?= $(shell command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)\n"
                "CUDA_HOME ?= $(patsubst %/bin/,%,$(dir $(NVCC)))\n");
    dt_buf_printf(&o, "ARCH ?= %s\n", x->arch[0] ? x->arch : "sm_90");
    dt_buf_puts(&o, "NVCCFLAGS ?= -O3\n");
    dt_buf_printf(&o, "MATRIX ?= %s\n\n", x->matrix_default);
    dt_buf_puts(&o,
                "# The rpath finds libcusparse without LD_LIBRARY_PATH.\n"
                "harness: harness.cu kernel.cu\n"
                "\t$(NVCC) $(NVCCFLAGS) -arch=$(ARCH) -o harness harness.cu -lcusparse \\\n"
                "\t  -Xlinker -rpath -Xlinker $(CUDA_HOME)/lib64\n\n"
                "run: harness\n"
                "\t@test -n \"$(MATRIX)\" || { echo 'make run: give MATRIX=path/to/matrix.mtx'; "
                "exit 2; }\n"
                "\t./harness \"$(MATRIX)\"\n\n"
                "clean:\n\trm -f harness\n\n.PHONY: run clean\n");
    return dt_buf_take(&o);
}

static void readme_stats(dt_buf *o, const char *what, const cJSON *st)
{
    if (!cJSON_IsObject(st))
        return;
    dt_buf_printf(o, "| %s | %.3f | %.3f | %.3f | %.0f |\n", what, dt_json_num(st, "median_us", 0),
                  dt_json_num(st, "p10_us", 0), dt_json_num(st, "p90_us", 0),
                  dt_json_num(st, "runs", 0));
}

static const char *method_text(const char *method)
{
    if (strcmp(method, "graph") == 0)
        return "`graph`: the matrix's minimum bytes fit in half the L2, so 50 launches are "
               "captured in a CUDA graph and replayed, and the time per launch is the replay's "
               "time over 50 (CUDA events around each replay); 3 warm-up launches first; the "
               "median of at least 20 replays and 50 ms of measured time";
    return "`cold`: the L2 is flushed before every run by writing a buffer twice its size; CUDA "
           "events around the launch only; 3 warm-up launches first; the median of at least 20 "
           "runs and 50 ms of measured time";
}

static char *readme_file(const ex_ctx *x)
{
    const ex_best *b = &x->best;
    const sp_spec *sp = &x->spec;
    const cJSON *fp = x->log->fingerprint;
    dt_buf o = DT_BUF_INIT;
    char ps[512];
    params_text(b->params, ps, sizeof ps);
    dt_buf_printf(&o, "# ditto export: session `%s`, kernel %s\n\n", x->log->id, b->label);
    dt_buf_printf(&o,
                  "A standalone copy of %s kernel of the ditto session `%s`, with a harness "
                  "that checks it against an fp64 CPU reference and times it next to "
                  "cuSPARSE the way the session did. Exported by ditto %s.\n\n",
                  b->measured ? "the best" : "the last", x->log->id, DT_VERSION);
    dt_buf_puts(&o, "| file | what |\n|---|---|\n"
                    "| `kernel.cu` | the kernel: `ditto.cuh` inlined; the dtype and epilogue "
                    "macros, its parameters and its contract's defines at the top; the launch "
                    "contract kept in its `@contract` comment |\n"
                    "| `harness.cu` | host code: reads a Matrix Market file, builds CSR (and each "
                    "nonzero's row for a coo kernel), runs and "
                    "checks the kernel, times it and cuSPARSE |\n"
                    "| `Makefile` | `make` builds `./harness`; `make run` runs it on `MATRIX` |\n");
    if (x->write_matrix)
        dt_buf_printf(&o,
                      "| `matrix.mtx` | the session's matrix, `%s`, written as Matrix Market "
                      "|\n",
                      sp->matrix);
    if (x->have_fmt) {
        dt_buf_printf(&o,
                      "| `format/` | the kernel's `%s` format, built by ditto export from the "
                      "session's matrix as ditto's worker builds it, one raw `NAME.bin` per "
                      "array (",
                      x->c.format);
        for (int i = 0; i < x->fmt.narr; i++)
            dt_buf_printf(&o, "%s`%s` %zu B", i ? ", " : "", x->fmt.name[i], x->fmt.bytes[i]);
        dt_buf_puts(&o, "); the harness loads them (`DX_FORMAT_DIR` names another folder) and "
                        "runs only on that matrix, which it checks by a sum of its rows, "
                        "columns and values |\n");
    }
    dt_buf_puts(&o, "\n## The problem\n\n");
    dt_buf_printf(&o, "- operation: %s, %s, ", sp_op_name(sp->op), sp_dtype_name(sp->dtype));
    if (sp->op != SP_SPMV)
        dt_buf_printf(&o, "%s = %d, ",
                      sp->op == SP_SPMM ? "n (columns of B)"
                                        : "k (inner "
                                          "dimension)",
                      (int)sp->n);
    dt_buf_printf(&o, "alpha = %g, beta = %g, epilogue %s", sp->alpha, sp->beta,
                  sp_epilogue_name(sp->epilogue));
    if (sp->op == SP_SPMM)
        dt_buf_printf(&o, ", %s-major B and C", x->c.layout == SP_COL_MAJOR ? "column" : "row");
    dt_buf_printf(&o, "\n- matrix: `%s`", sp->matrix);
    if (x->rows >= 0)
        dt_buf_printf(&o, ": %lld x %lld, %lld nonzeros, longest row %lld", (long long)x->rows,
                      (long long)x->cols, (long long)x->nnz, (long long)x->max_row);
    dt_buf_printf(&o, "\n- kernel: %s, entry `%s`, params `%s` (source: the session's `%s`)\n",
                  b->label, x->c.entry, ps, b->from);
    if (x->evaluated)
        dt_buf_printf(&o,
                      "- launch on that matrix: grid [%lld, %lld, %lld], block [%lld, %lld, "
                      "%lld], %lld B dynamic shared memory%s\n",
                      (long long)x->grid[0], (long long)x->grid[1], (long long)x->grid[2],
                      (long long)x->block[0], (long long)x->block[1], (long long)x->block[2],
                      (long long)x->smem,
                      x->scratch <= 0      ? ""
                      : x->c.scratch_once ? ", scratch zeroed once (the kernel leaves it zeroed)"
                                          : ", scratch cleared before each launch");

    dt_buf_puts(&o, "\n## Measured in the session\n\n");
    const cJSON *drv = cJSON_GetObjectItem(fp, "driver");
    char dtext[64];
    if (cJSON_IsNumber(drv) && drv->valuedouble > 0)
        snprintf(dtext, sizeof dtext, "%d.%d", (int)(dt_json_as_i64(drv, 0) / 1000),
                 (int)(dt_json_as_i64(drv, 0) % 1000 / 10));
    else
        snprintf(dtext, sizeof dtext, "%s", cJSON_IsString(drv) ? drv->valuestring : "?");
    if (!b->measured) {
        dt_buf_printf(&o,
                      "**Never measured.** %s. The harness still checks it and times it next "
                      "to cuSPARSE (with `graph` timing when the matrix's minimum bytes fit "
                      "in half the L2, else `cold`, ditto's own rule).\n\n",
                      b->status);
    }
    dt_buf_puts(&o, "| | |\n|---|---|\n");
    dt_buf_printf(&o, "| GPU | %s%s%s%s |\n", dt_json_str(fp, "gpu", "?"),
                  dt_json_str(fp, "cc", "")[0] ? " (cc " : "", dt_json_str(fp, "cc", ""),
                  dt_json_str(fp, "cc", "")[0] ? ")" : "");
    dt_buf_printf(&o, "| driver / CUDA / NVRTC / cuSPARSE | %s / %s / %s / %s |\n", dtext,
                  dt_json_str(fp, "cuda", "?"), dt_json_str(fp, "nvrtc", "?"),
                  dt_json_str(fp, "cusparse", "?"));
    dt_buf_printf(&o, "| ditto | %s |\n", dt_json_str(fp, "ditto", "?"));
    if (b->measured) {
        dt_buf_printf(&o, "| kernel | %.3f us (%s timing) |\n", b->us, b->method);
        if (b->baseline[0])
            dt_buf_printf(&o, "| best cuSPARSE algorithm | %s, %.3f us |\n", b->baseline,
                          b->base_us);
        dt_buf_printf(&o, "| speedup | %.2fx |\n", b->speedup);
        if (CUSPARSE_FASTER(b)) {
            dt_buf_printf(&o,
                          "| **use cuSPARSE** | no generated kernel beat cuSPARSE %s here "
                          "(%.2fx): call it, `",
                          b->baseline, b->speedup);
            cusparse_call_text(&o, x->spec.op, x->spec.dtype, b->baseline);
            dt_buf_puts(&o, "` (the harness's `dx_cs_compute` makes this call) |\n");
        }
        if (b->gbps > 0)
            dt_buf_printf(&o,
                          "| bandwidth | %.0f GB/s over the minimum bytes (each input read "
                          "once, each output written once) |\n",
                          b->gbps);
    }
    if (b->verify)
        dt_buf_printf(
            &o,
            "| verification | %s (%.0f checks: fresh random inputs, NaN-poisoned "
            "outputs, fp64 reference and cuSPARSE, edge matrices) |\n",
            dt_json_bool(b->verify, "passed", 0) ? "passed" : "failed",
            dt_json_num(b->verify, "checks_run",
                        (double)cJSON_GetArraySize(cJSON_GetObjectItem(b->verify, "checks"))));
    const cJSON *m = b->measure;
    if (m) {
        const cJSON *cand = cJSON_GetObjectItem(m, "candidate");
        dt_buf_printf(&o,
                      "\nEvery timing of this version (`measure_v%d.json`), in microseconds:\n\n"
                      "| | median | p10 | p90 | runs |\n|---|---|---|---|---|\n",
                      b->version);
        readme_stats(&o, "kernel, cold", cJSON_GetObjectItem(cand, "cold"));
        readme_stats(&o, "kernel, warm", cJSON_GetObjectItem(cand, "warm"));
        readme_stats(&o, "kernel, graph", cJSON_GetObjectItem(cand, "graph"));
        const cJSON *alg;
        cJSON_ArrayForEach(alg, cJSON_GetObjectItem(cJSON_GetObjectItem(m, "baseline"), "algs"))
        {
            char what[96];
            static const char *modes[] = {"cold", "warm", "graph"};
            for (int i = 0; i < 3; i++) {
                snprintf(what, sizeof what, "cuSPARSE %s, %s", dt_json_str(alg, "name", "?"),
                         modes[i]);
                readme_stats(&o, what, cJSON_GetObjectItem(alg, modes[i]));
            }
            if (!dt_json_bool(alg, "ok", 1))
                dt_buf_printf(&o, "| cuSPARSE %s | failed: %s | | | |\n",
                              dt_json_str(alg, "name", "?"), dt_json_str(alg, "error", "?"));
        }
        if (dt_json_num(m, "preprocess_us", 0) > 0)
            dt_buf_printf(&o,
                          "\nThe kernel's format preparation took %.1f us, reported apart "
                          "and not timed.\n",
                          dt_json_num(m, "preprocess_us", 0));
    }

    dt_buf_puts(&o, "\n## How it was measured\n\n");
    if (b->measured)
        dt_buf_printf(&o,
                      "Method %s. The best cuSPARSE algorithm was timed in the same call with "
                      "the same method (its preprocessing done before, not timed), on the "
                      "same inputs; the speedup is its median over the kernel's.\n\n",
                      method_text(b->method));
    dt_buf_printf(&o, "The session's fingerprint says: %s. Inputs: %s.\n\n",
                  dt_json_str(fp, "timing", "(no timing note)"), dt_json_str(fp, "seeds", "?"));
    dt_buf_puts(&o, "The harness times the same way: the kernel first, then cuSPARSE, with the "
                    "session's method (`--method` overrides it), on one random input set, and "
                    "prints both medians and the speedup next to the session's.\n");

    dt_buf_puts(&o, "\n## Build and run\n\n```sh\nmake                      # nvcc, no GPU needed "
                    "to build\n");
    if (x->matrix_default[0])
        dt_buf_printf(&o, "make run                  # ./harness %s\n", x->matrix_default);
    dt_buf_puts(&o, "make run MATRIX=other.mtx # another Matrix Market file\n"
                    "make ARCH=sm_80           # another architecture (default: the session's "
                    "GPU, else sm_90)\n"
                    "./harness MATRIX.mtx [--method cold|graph] [--seed N]\n```\n\n");
    dt_buf_printf(&o, "%s\n\n", x->matrix_note);
    dt_buf_puts(&o, "The harness reads coordinate real, integer or pattern matrices, general, "
                    "symmetric or skew-symmetric; sorts each row by column and sums duplicates, "
                    "as ditto does; gives a pattern seeded random values in ±[0.5, 1.5). It "
                    "needs `libcusparse` (linked with an rpath to `$(CUDA_HOME)/lib64`). Exit "
                    "status: 0 every output correct, 1 a wrong output, 2 bad arguments or "
                    "matrix, 3 a CUDA error.\n");

    dt_buf_puts(&o, "\n## What the harness checks\n\n"
                    "Two fresh random input sets (values in ±[0.5, 1.5), never zero, rounded to "
                    "the dtype so that the reference sees what the GPU sees); before each run the "
                    "output is poisoned with a NaN pattern when beta is 0, so an output the "
                    "kernel never writes is caught. Every output must match the fp64 CPU "
                    "reference within ditto's tolerance (`gpu/worker/runner.c`):\n\n"
                    "    tol_i = (4 sqrt(len_i + 2) + 8) u_acc m_i + 2 u_out |ref_i| + tiny\n\n"
                    "where `len_i` is the row length (K for SDDMM), `m_i` = |alpha| sum_k "
                    "|a_ik x_k| + |beta y0_i| (+ |bias_i|), `u_acc` the unit roundoff of the "
                    "accumulation (fp32 for fp32/fp16/bf16, fp64 for fp64), `u_out` that of the "
                    "output type, and `tiny` 1e-4 for half types, 1e-30 otherwise; the GELU "
                    "epilogue widens it to 1.2 tol + 8 u_acc |ref|. NaN never passes. "
                    "cuSPARSE's output is checked against the same reference (a note, not a "
                    "failure).\n");

    dt_buf_puts(&o, "\n## Specialised to the session's matrix\n\n");
    if (x->ndefines)
        dt_buf_printf(&o,
                      "`kernel.cu` bakes constants of the session's matrix in (its contract's "
                      "`defines`, evaluated on %lld x %lld, %lld nonzeros, longest row %lld, "
                      "%s):\n\n```c\n%s```\n\nso it is correct only for that matrix; "
                      "the harness refuses a matrix of other sizes.",
                      (long long)x->rows, (long long)x->cols, (long long)x->nnz,
                      (long long)x->max_row, x->sms_from, x->defines.data);
    else
        dt_buf_puts(&o, "This kernel's contract bakes no matrix constant in: the harness runs it "
                        "on any Matrix Market file, computing the launch from the contract's "
                        "formulas. Its parameters were tuned for the session's matrix, though, "
                        "and the session's numbers apply to that matrix only (the harness says "
                        "so when the sizes differ).");
    dt_buf_puts(&o, " The launch (grid, block, shared memory) is computed by the contract's "
                    "formulas on the matrix the harness loads, on the GPU it runs on (`sms`).\n");
    return dt_buf_take(&o);
}

/* ---- the matrix -------------------------------------------------------------------------- */

/* 1 when path is a Matrix Market file the harness reads (coordinate real, integer or
 * pattern; general, symmetric or skew-symmetric). */
static int harness_reads(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    char line[256] = "";
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (got == NULL)
        return 0;
    for (char *c = line; *c; c++)
        *c = (char)tolower((unsigned char)*c);
    char obj[32], fmt[32], field[32], sym[32];
    if (sscanf(line, "%%%%matrixmarket %31s %31s %31s %31s", obj, fmt, field, sym) != 4)
        return 0;
    return strcmp(obj, "matrix") == 0 && strcmp(fmt, "coordinate") == 0 &&
           (strcmp(field, "real") == 0 || strcmp(field, "integer") == 0 ||
            strcmp(field, "pattern") == 0) &&
           (strcmp(sym, "general") == 0 || strcmp(sym, "symmetric") == 0 ||
            strcmp(sym, "skew-symmetric") == 0);
}

/* Decide MATRIX for `make run`: the session's file when the harness reads it, else the
 * session's matrix loaded here (a generator, rep:, .smtx) to be written as matrix.mtx. */
static void plan_matrix(ex_ctx *x, int no_matrix)
{
    const char *src = x->spec.matrix;
    dt_err e = {0};
    /* A format built here runs on the matrix it was built from: matrix.mtx, written from
     * that CSR, reads back exactly (the harness checks its sum). */
    char *path = (x->have_fmt || dt_startswith(src, "gen:") || dt_startswith(src, "rep:"))
                     ? NULL
                     : sp_resolve_path(src, &e);
    if (path != NULL && harness_reads(path)) {
        char *abs = realpath(path, NULL);
        snprintf(x->matrix_default, sizeof x->matrix_default, "%s", abs ? abs : path);
        snprintf(x->matrix_note, sizeof x->matrix_note,
                 "`make run` uses the session's matrix file, `%s`; on another machine give "
                 "`MATRIX=` its copy.",
                 x->matrix_default);
        free(abs);
        free(path);
        return;
    }
    free(path);
    if (no_matrix) {
        if (x->have_fmt)
            snprintf(x->matrix_note, sizeof x->matrix_note,
                     "The session's matrix, `%s`, was not written (--no-matrix): the harness "
                     "runs the kernel's %s format, built from it, only on a Matrix Market "
                     "copy of that matrix with the same values (`make run MATRIX=...`).",
                     src, x->c.format);
        else
            snprintf(x->matrix_note, sizeof x->matrix_note,
                     "The session's matrix, `%s`, is not a Matrix Market file the harness reads "
                     "and was not written (--no-matrix): write it with ditto (`sp_mm_write`) or "
                     "convert it, then `make run MATRIX=...`.",
                     src);
        return;
    }
    sp_read_opts ro = {.quiet = 1};
    dt_err le = {0};
    if (x->matrix == NULL)
        x->matrix = sp_load(src, &ro, &le);
    if (x->matrix == NULL) {
        fprintf(stderr,
                "ditto export: warning: the session's matrix cannot be loaded here (%s): "
                "no matrix.mtx\n",
                le.msg);
        snprintf(x->matrix_note, sizeof x->matrix_note,
                 "The session's matrix, `%s`, could not be loaded where this was exported (%s): "
                 "give the harness a Matrix Market copy with `make run MATRIX=...`.",
                 src, le.msg);
        return;
    }
    if (x->rows >= 0 &&
        (x->matrix->rows != x->rows || x->matrix->cols != x->cols || x->matrix->nnz != x->nnz))
        fprintf(stderr,
                "ditto export: warning: %s loads as %d x %d, %lld nonzeros here, but the "
                "session profiled %lld x %lld, %lld\n",
                src, x->matrix->rows, x->matrix->cols, (long long)x->matrix->nnz,
                (long long)x->rows, (long long)x->cols, (long long)x->nnz);
    x->write_matrix = 1;
    snprintf(x->matrix_default, sizeof x->matrix_default, "matrix.mtx");
    snprintf(x->matrix_note, sizeof x->matrix_note,
             "`matrix.mtx` is the session's matrix, `%s`, loaded by ditto and written as Matrix "
             "Market (values with 17 significant digits, so they read back exactly)%s.",
             src,
             x->pattern_values ? "; the file is a pattern, and its values are the seeded "
                                 "random ones ditto's worker gave it"
                               : "");
}

/* 1 when dir exists and holds anything. */
static int dir_nonempty(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *de;
    int any = 0;
    while (!any && (de = readdir(d)) != NULL)
        any = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(d);
    return any;
}

static int write_text(const char *dir, const char *name, const char *text, dt_err *e)
{
    char *path = dt_xasprintf("%s/%s", dir, name);
    int rc = dt_write_file_atomic(path, text, strlen(text), e);
    free(path);
    return rc;
}

/* format/NAME.bin for every array of the format built here, as the worker uploads it. */
static int write_format(const ex_ctx *x, const char *out, dt_err *e)
{
    char *dir = dt_xasprintf("%s/format", out);
    int rc = dt_mkdir_p(dir, e);
    for (int i = 0; rc == 0 && i < x->fmt.narr; i++) {
        size_t bytes = 0;
        const void *host = sp_fmt_get(&x->fmt, x->fmt.name[i], &bytes);
        char *path = dt_xasprintf("%s/%s.bin", dir, x->fmt.name[i]);
        rc = dt_write_file_atomic(path, host, bytes, e);
        free(path);
    }
    free(dir);
    return rc;
}

/* ---- the command --------------------------------------------------------------------------- */

int export_session(const char *id, const export_opts *opts, dt_err *e)
{
    const char *out = opts->out;
    const int version = opts->version;
    struct stat st;
    if (stat(out, &st) == 0 && !S_ISDIR(st.st_mode))
        return dt_err_set(e, "%s exists and is not a folder", out);
    if (!opts->force && dir_nonempty(out))
        return dt_err_set(e, "%s is not empty (--force overwrites the exported files in it)", out);
    char *root = sess_root(opts->session_dir);
    sess_log *log = sess_log_read(root, id, e);
    free(root);
    if (log == NULL)
        return -1;
    ex_ctx x;
    memset(&x, 0, sizeof x);
    x.log = log;
    sp_spec_init(&x.spec);
    ex_scan s;
    scan_events(log, &s);
    int status = -1;
    dt_buf probs = DT_BUF_INIT;
    char *kernel = NULL, *harness = NULL, *make = NULL, *readme = NULL;
    if (log->spec == NULL || sp_spec_from_json(&x.spec, log->spec, NULL, &probs) != 0) {
        while (probs.len && probs.data[probs.len - 1] == '\n')
            probs.data[--probs.len] = '\0';
        dt_err_set(e, "session %s: spec.json is missing or invalid%s%s", log->id,
                   probs.len ? ": " : "", dt_buf_str(&probs));
        goto done;
    }
    if ((version > 0 ? choose_version(log, &s, version, &x.best, e)
                     : choose_best(log, &s, &x.best, e)) != 0)
        goto done;
    session_matrix(&x, &s);
    session_sms(&x);
    if (prepare_contract(&x, e) != 0) {
        char alt[600] = "";
        if (x.have_contract && !harness_format(x.c.format))
            csr_versions(&s, alt, sizeof alt);
        if (alt[0]) {
            char msg[sizeof e->msg];
            snprintf(msg, sizeof msg, "%s", e->msg);
            dt_err_set(e, "%s; measured CSR versions, for --version N: %s", msg, alt);
        }
        goto done;
    }
    kernel = kernel_file(&x, e);
    if (kernel == NULL)
        goto done;
    plan_matrix(&x, opts->no_matrix);
    harness = harness_file(&x, e);
    if (harness == NULL)
        goto done;
    make = makefile_file(&x);
    readme = readme_file(&x);

    if (dt_mkdir_p(out, e) != 0 || write_text(out, "kernel.cu", kernel, e) != 0 ||
        write_text(out, "harness.cu", harness, e) != 0 ||
        write_text(out, "Makefile", make, e) != 0 ||
        write_text(out, "README.md", readme, e) != 0)
        goto done;
    if (x.have_fmt && write_format(&x, out, e) != 0)
        goto done;
    if (x.write_matrix) {
        if (x.matrix->nnz >= 1000000)
            fprintf(stderr, "ditto export: writing %s/matrix.mtx (%lld nonzeros)\n", out,
                    (long long)x.matrix->nnz);
        char *mpath = dt_xasprintf("%s/matrix.mtx", out);
        int rc = sp_mm_write(x.matrix, mpath, e);
        free(mpath);
        if (rc != 0)
            goto done;
    }
    if (!x.best.measured)
        fprintf(stderr, "ditto export: warning: %s\n", x.best.status);
    printf("exported session %s, kernel %s (%s), to %s: kernel.cu harness.cu Makefile "
           "README.md%s%s\n",
           log->id, x.best.label, x.best.from, out, x.write_matrix ? " matrix.mtx" : "",
           x.have_fmt ? " format/" : "");
    if (x.best.measured)
        printf("session: %.3f us (%s timing), %.2fx cuSPARSE %s\n", x.best.us, x.best.method,
               x.best.speedup, x.best.baseline[0] ? x.best.baseline : "?");
    printf("build: make -C %s    run: make -C %s run%s\n", out, out,
           x.matrix_default[0] ? "" : " MATRIX=path.mtx");
    status = 0;
done:
    free(kernel);
    free(harness);
    free(make);
    free(readme);
    dt_buf_free(&probs);
    free(s.v);
    ctx_free(&x);
    sess_log_free(log);
    return status;
}
