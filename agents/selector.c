/* selector.c -- a strategy selector fitted from `ditto bench` measurements:
 * the corpus split into a fit part and a validate part, k nearest
 * neighbours over PatternReport features fitted on one part and reported
 * on the other, and the planner's use of it (a score for the strategies
 * the nearest fitted cases won with). */
#include "agents/agents.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- the split ------------------------------------------------------------------------- */

int ag_split_validates(const char *name)
{
    /* the stem: the name without its extension */
    char stem[512];
    snprintf(stem, sizeof stem, "%s", name);
    char *dot = strrchr(stem, '.');
    char *slash = strrchr(stem, '/');
    if (dot != NULL && (slash == NULL || dot > slash))
        *dot = '\0';
    return (dt_hash_str(stem, DT_HASH_SEED) & 1) == 0;
}

#define SPLIT_MAX_BYTES (4 << 20)

cJSON *ag_split_read(const char *path, dt_err *e)
{
    size_t len = 0;
    char *text = dt_read_file(path, &len, e);
    if (text == NULL)
        return NULL;
    if (len > SPLIT_MAX_BYTES) {
        free(text);
        dt_err_set(e, "%s: %zu bytes, more than a split file may have (%d)", path, len,
                   SPLIT_MAX_BYTES);
        return NULL;
    }
    cJSON *out = dt_json_obj();
    int lineno = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        if (line[0] == '#' || line[0] == '\0' || dt_startswith(line, "name\t"))
            continue;
        char *tab = strchr(line, '\t');
        char *tab2 = tab ? strchr(tab + 1, '\t') : NULL;
        if (tab2 != NULL)
            *tab2 = '\0';
        if (tab == NULL || tab == line || tab[1] == '\0') {
            dt_err_set(e, "%s:%d: expected NAME<tab>PART<tab>FOLDER, got '%.80s'", path, lineno,
                       line);
            cJSON_Delete(out);
            free(text);
            return NULL;
        }
        *tab = '\0';
        if (cJSON_GetObjectItem(out, line) != NULL) {
            dt_err_set(e, "%s:%d: %s is listed twice", path, lineno, line);
            cJSON_Delete(out);
            free(text);
            return NULL;
        }
        dt_json_set_str(out, line, tab + 1);
    }
    free(text);
    return out;
}

/* ---- features ------------------------------------------------------------------------- */

/* The features the neighbours are measured over: ag_features' names, each
 * through a transform that makes equal steps mean alike changes. */
typedef enum { T_LOG10, T_LOG1P, T_RAW } xform;

static const struct sfeat {
    const char *name;
    xform t;
} sfeats[] = {
    {"rows", T_LOG10},
    {"nnz", T_LOG10},
    {"row_mean", T_LOG10},
    {"row_cv", T_LOG1P},
    {"row_max_over_mean", T_LOG1P},
    {"row_gini", T_RAW},
    {"empty_rows_frac", T_RAW},
    {"bandwidth_frac", T_RAW},
    {"block_fill_4", T_RAW},
    {"block_fill_16", T_RAW},
    {"x_lines_per_nnz", T_RAW},
    {"aspect", T_LOG10},
};
#define NFEAT ((int)DT_ARRAY_LEN(sfeats))

static const char *xform_name(xform t)
{
    return t == T_LOG10 ? "log10" : t == T_LOG1P ? "log10(1 + x)" : "x";
}

/* The transformed feature vector of a problem from ag_features' object. */
static void feature_vector(const cJSON *f, double *x)
{
    for (int i = 0; i < NFEAT; i++) {
        double v;
        if (dt_streq(sfeats[i].name, "aspect")) {
            double r = dt_json_num(f, "rows", 1), c = dt_json_num(f, "cols", 1);
            v = r > 0 ? c / r : 1;
        } else {
            v = dt_json_num(f, sfeats[i].name, 0);
        }
        if (sfeats[i].t == T_LOG10)
            x[i] = log10(v > 1e-9 ? v : 1e-9);
        else if (sfeats[i].t == T_LOG1P)
            x[i] = log10(1.0 + (v > 0 ? v : 0));
        else
            x[i] = v;
    }
}

/* ---- the bench's op names ------------------------------------------------------------- */

int ag_selector_op_parse(const char *key, sp_spec *spec)
{
    static const struct {
        const char *name;
        sp_op op;
        sp_dtype t;
        int n;
    } ops[] = {
        {"spmv-fp32", SP_SPMV, SP_FP32, 1},   {"spmv-fp64", SP_SPMV, SP_FP64, 1},
        {"spmm-n32", SP_SPMM, SP_FP32, 32},   {"spmm-n128", SP_SPMM, SP_FP32, 128},
        {"sddmm-k32", SP_SDDMM, SP_FP32, 32}, {"sddmm-k128", SP_SDDMM, SP_FP32, 128},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(ops); i++)
        if (dt_streq(ops[i].name, key)) {
            spec->op = ops[i].op;
            spec->dtype = ops[i].t;
            spec->n = ops[i].n;
            return 0;
        }
    return -1;
}

/* The bench's name for a problem ("spmm-n32"), "" for one it does not run. */
static void op_key(const sp_spec *s, char *out, size_t len)
{
    if (s->op == SP_SPMV && (s->dtype == SP_FP32 || s->dtype == SP_FP64))
        snprintf(out, len, "spmv-%s", sp_dtype_name(s->dtype));
    else if (s->op == SP_SPMM && s->dtype == SP_FP32)
        snprintf(out, len, "spmm-n%d", s->n);
    else if (s->op == SP_SDDMM && s->dtype == SP_FP32)
        snprintf(out, len, "sddmm-k%d", s->n);
    else
        out[0] = '\0';
}

/* ---- prediction ----------------------------------------------------------------------- */

typedef struct nb {
    const cJSON *c;
    double d;
} nb;

static int cmp_nb(const void *a, const void *b)
{
    const nb *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return strcmp(dt_json_str(x->c, "matrix", ""), dt_json_str(y->c, "matrix", ""));
}

/* The prediction for a transformed feature vector x, leaving out the
 * fitted cases of matrix `skip` (NULL: none). */
static cJSON *predict_x(const cJSON *model, const char *opkey, const double *x, const char *skip)
{
    const cJSON *fs = cJSON_GetObjectItem(model, "features");
    const cJSON *cases = cJSON_GetObjectItem(model, "cases");
    int k = (int)dt_json_num(model, "k", 3);
    /* neighbours farther than the reach do not vote: the selector abstains
     * on a problem unlike every fitted one rather than extrapolate */
    double reach = dt_json_num(model, "reach", 0);
    if (cJSON_GetArraySize(fs) != NFEAT || k < 1)
        return NULL;     /* fitted over other features: not comparable */
    double scale[NFEAT]; /* distances need the scales only (the means cancel) */
    for (int i = 0; i < NFEAT; i++) {
        const cJSON *f = cJSON_GetArrayItem(fs, i);
        scale[i] = dt_json_num(f, "scale", 1);
        if (!(scale[i] > 0))
            scale[i] = 1;
    }
    int n = cJSON_GetArraySize(cases), m = 0;
    nb *all = dt_xcalloc((size_t)(n ? n : 1), sizeof *all);
    const cJSON *c;
    cJSON_ArrayForEach(c, cases)
    {
        if (!dt_streq(dt_json_str(c, "op", ""), opkey) ||
            (skip != NULL && dt_streq(dt_json_str(c, "matrix", ""), skip)))
            continue;
        const cJSON *cx = cJSON_GetObjectItem(c, "x");
        if (cJSON_GetArraySize(cx) != NFEAT)
            continue;
        double d = 0;
        for (int i = 0; i < NFEAT; i++) {
            double dz = (x[i] - cJSON_GetArrayItem(cx, i)->valuedouble) / scale[i];
            d += dz * dz;
        }
        if (reach > 0 && sqrt(d) > reach)
            continue;
        all[m].c = c;
        all[m].d = sqrt(d);
        m++;
    }
    if (m == 0) {
        free(all);
        return NULL;
    }
    qsort(all, (size_t)m, sizeof *all, cmp_nb);
    if (k > m)
        k = m;
    /* Votes for the winners, each weighed by 1 / (distance + 0.25). */
    cJSON *votes = dt_json_obj(), *near = dt_json_arr();
    double total = 0;
    for (int i = 0; i < k; i++) {
        double w = 1.0 / (all[i].d + 0.25);
        const char *s = dt_json_str(all[i].c, "winner", "?");
        dt_json_set_num(votes, s, dt_json_num(votes, s, 0) + w);
        total += w;
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "matrix", dt_json_str(all[i].c, "matrix", ""));
        dt_json_set_str(o, "regime", dt_json_str(all[i].c, "regime", ""));
        dt_json_set_str(o, "winner", s);
        dt_json_set_num(o, "speedup", dt_json_num(all[i].c, "speedup", 0));
        dt_json_set_num(o, "distance", all[i].d);
        cJSON_AddItemToArray(near, o);
    }
    free(all);
    /* as an array, largest share first (ties by name) */
    cJSON *ranked = dt_json_arr();
    for (;;) {
        const cJSON *best = NULL, *v;
        cJSON_ArrayForEach(v, votes) if (v->valuedouble >= 0 &&
                                         (best == NULL || v->valuedouble > best->valuedouble ||
                                          (v->valuedouble == best->valuedouble &&
                                           strcmp(v->string, best->string) < 0))) best = v;
        if (best == NULL)
            break;
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "strategy", best->string);
        dt_json_set_num(o, "share", best->valuedouble / total);
        cJSON_AddItemToArray(ranked, o);
        cJSON_SetNumberValue(cJSON_GetObjectItem(votes, best->string), -1.0);
    }
    cJSON_Delete(votes);
    cJSON *out = dt_json_obj();
    dt_json_set_take(out, "votes", ranked);
    dt_json_set_take(out, "neighbours", near);
    return out;
}

cJSON *ag_selector_predict(const cJSON *model, const char *opkey, const cJSON *features)
{
    double x[NFEAT];
    feature_vector(features, x);
    return predict_x(model, opkey, x, NULL);
}

/* ---- the planner's use ---------------------------------------------------------------- */

#define SELECTOR_MAX_BYTES (16 << 20)
#define SELECTOR_SCORE     100.0 /* for a unanimous vote: above any one rule's score */

char *ag_selector_path(void)
{
    const char *env = getenv("DITTO_SELECTOR");
    if (env != NULL && *env != '\0')
        return dt_streq(env, "none") ? NULL : dt_xstrdup(env);
    return dt_share_path("knowledge/selector/model.json");
}

static int cmp_score(const void *a, const void *b)
{
    const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;
    double sx = dt_json_num(x, "score", 0), sy = dt_json_num(y, "score", 0);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(dt_json_str(x, "strategy", ""), dt_json_str(y, "strategy", ""));
}

void ag_selector_apply(cJSON *cands, const cJSON *report, const sp_spec *spec)
{
    char key[32];
    op_key(spec, key, sizeof key);
    char *path = ag_selector_path();
    if (key[0] == '\0' || path == NULL || !cJSON_IsArray(cands)) {
        free(path);
        return;
    }
    size_t len = 0;
    char *text = dt_read_file(path, &len, NULL);
    cJSON *model = text && len <= SELECTOR_MAX_BYTES ? cJSON_Parse(text) : NULL;
    free(text);
    if (model == NULL) {
        if (len > 0)
            dt_debug("selector %s: not read (over %d bytes or not JSON)", path, SELECTOR_MAX_BYTES);
        free(path);
        return;
    }
    cJSON *f = ag_features(report, spec);
    cJSON *pred = ag_selector_predict(model, key, f);
    cJSON_Delete(f);
    const cJSON *v;
    cJSON_ArrayForEach(v, cJSON_GetObjectItem(pred, "votes"))
    {
        cJSON *c;
        cJSON_ArrayForEach(c, cands)
        {
            if (!dt_streq(dt_json_str(c, "strategy", ""), dt_json_str(v, "strategy", "")))
                continue;
            double add = SELECTOR_SCORE * dt_json_num(v, "share", 0);
            cJSON_SetNumberValue(cJSON_GetObjectItem(c, "score"), dt_json_num(c, "score", 0) + add);
            dt_buf t = DT_BUF_INIT;
            dt_buf_printf(&t,
                          "fitted selector (%s, %s): %.0f%% of the votes of the nearest fitted "
                          "cases:",
                          path,
                          dt_json_str(cJSON_GetObjectItem(model, "provenance"), "summary", ""),
                          100.0 * dt_json_num(v, "share", 0));
            const cJSON *nbr;
            int i = 0;
            cJSON_ArrayForEach(nbr, cJSON_GetObjectItem(pred, "neighbours"))
                dt_buf_printf(&t, "%s %s (%s) won with %s at %.2fx", i++ ? ";" : "",
                              dt_json_str(nbr, "matrix", ""), dt_json_str(nbr, "regime", ""),
                              dt_json_str(nbr, "winner", ""), dt_json_num(nbr, "speedup", 0));
            cJSON *w = dt_json_obj();
            dt_json_set_str(w, "rule", "selector.knn");
            dt_json_set_str(w, "text", dt_buf_str(&t));
            dt_json_set_num(w, "score", add);
            dt_buf_free(&t);
            cJSON *rat = cJSON_GetObjectItem(c, "rationale");
            /* the "no approved rule fired" line no longer holds */
            if (cJSON_GetArraySize(rat) == 1 &&
                cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(rat, 0), "rule")))
                cJSON_DeleteItemFromArray(rat, 0);
            if (cJSON_IsArray(rat))
                cJSON_AddItemToArray(rat, w);
            else
                cJSON_Delete(w);
        }
    }
    cJSON_Delete(pred);
    cJSON_Delete(model);
    free(path);
    /* re-rank: take every item out, sort, put them back */
    int n = cJSON_GetArraySize(cands);
    cJSON **items = dt_xcalloc((size_t)(n ? n : 1), sizeof *items);
    for (int i = n - 1; i >= 0; i--)
        items[i] = cJSON_DetachItemFromArray(cands, i);
    qsort(items, (size_t)n, sizeof *items, cmp_score);
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(cands, items[i]);
    free(items);
}

/* ---- fitting -------------------------------------------------------------------------- */

#define CSV_MAX_BYTES  (64 << 20)
#define CSV_MAX_FIELDS 32

/* One case of a bench CSV. */
typedef struct fcase {
    char matrix[256], regime[8], op[16], winner[64];
    double nnz, speedup;
    int slower;
    cJSON *strategies; /* {name: speedup} from the strategies column, or NULL */
    char part[16];
    double x[NFEAT];
    int have_x;
} fcase;

static int field_index(char **names, int n, const char *want)
{
    for (int i = 0; i < n; i++)
        if (dt_streq(names[i], want))
            return i;
    return -1;
}

/* Split a CSV line at commas in place. A field may be quoted ("a,b", a
 * doubled quote inside standing for one): the bench quotes matrix names
 * that hold commas (generator specs). */
static int split_csv(char *line, char **out, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        if (n == max)
            return -1;
        if (*p == '"') {
            char *w = ++p;
            out[n++] = w;
            while (*p && !(*p == '"' && p[1] != '"')) {
                if (*p == '"')
                    p++; /* "" -> " */
                *w++ = *p++;
            }
            if (*p == '"')
                p++;
            char *after = p;
            *w = '\0';
            if (*after != ',')
                break;
            p = after + 1;
            continue;
        }
        out[n++] = p;
        char *c = strchr(p, ',');
        if (c == NULL)
            break;
        *c = '\0';
        p = c + 1;
    }
    char *cr = strchr(out[n - 1], '\r');
    if (cr)
        *cr = '\0';
    return n;
}

static cJSON *parse_strategies(const char *s)
{
    if (s == NULL || *s == '\0')
        return NULL;
    cJSON *o = dt_json_obj();
    char *copy = dt_xstrdup(s), *save = NULL;
    for (char *t = strtok_r(copy, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(t, '=');
        double v = 0;
        if (eq == NULL || dt_parse_double(eq + 1, &v) != 0)
            continue;
        *eq = '\0';
        dt_json_set_num(o, t, v);
    }
    free(copy);
    return o;
}

/* Append the verified cases of one bench CSV to *cs. */
static int read_csv(const char *path, fcase **cs, int *n, int *cap, int *skipped, int *superseded,
                    dt_err *e)
{
    size_t len = 0;
    char *text = dt_read_file(path, &len, e);
    if (text == NULL)
        return -1;
    if (len > CSV_MAX_BYTES) {
        free(text);
        return dt_err_set(e, "%s: %zu bytes, more than a bench CSV may have (%d)", path, len,
                          CSV_MAX_BYTES);
    }
    char *save = NULL, *hdr[CSV_MAX_FIELDS], *f[CSV_MAX_FIELDS];
    char *line = strtok_r(text, "\n", &save);
    int nh = line ? split_csv(line, hdr, CSV_MAX_FIELDS) : -1;
    int ireg = nh > 0 ? field_index(hdr, nh, "regime") : -1;
    int imat = nh > 0 ? field_index(hdr, nh, "matrix") : -1;
    int iop = nh > 0 ? field_index(hdr, nh, "op") : -1;
    int inz = nh > 0 ? field_index(hdr, nh, "nnz") : -1;
    int ist = nh > 0 ? field_index(hdr, nh, "status") : -1;
    int istr = nh > 0 ? field_index(hdr, nh, "strategy") : -1;
    int isp = nh > 0 ? field_index(hdr, nh, "speedup") : -1;
    int islow = nh > 0 ? field_index(hdr, nh, "cusparse_faster") : -1;
    int iall = nh > 0 ? field_index(hdr, nh, "strategies") : -1;
    if (ireg < 0 || imat < 0 || iop < 0 || ist < 0 || istr < 0 || isp < 0) {
        free(text);
        return dt_err_set(e,
                          "%s:1: not a `ditto bench` CSV: the header needs regime, matrix, op, "
                          "status, strategy and speedup",
                          path);
    }
    int lineno = 1;
    while ((line = strtok_r(NULL, "\n", &save)) != NULL) {
        lineno++;
        int nf = split_csv(line, f, CSV_MAX_FIELDS);
        if (nf < 0 || nf < nh) {
            free(text);
            return dt_err_set(e, "%s:%d: %d fields where the header names %d", path, lineno,
                              nf < 0 ? CSV_MAX_FIELDS : nf, nh);
        }
        if (!dt_streq(f[ist], "verified")) {
            (*skipped)++;
            continue;
        }
        /* A case measured again (a later row, or a later CSV) replaces
         * the earlier measurement: each case counts once. */
        fcase *c = NULL;
        for (int j = 0; j < *n && c == NULL; j++)
            if (dt_streq((*cs)[j].matrix, f[imat]) && dt_streq((*cs)[j].regime, f[ireg]) &&
                dt_streq((*cs)[j].op, f[iop]))
                c = &(*cs)[j];
        if (c != NULL) {
            cJSON_Delete(c->strategies);
            (*superseded)++;
        } else {
            if (*n == *cap) {
                *cap = *cap ? 2 * *cap : 64;
                *cs = dt_xrealloc(*cs, (size_t)*cap * sizeof **cs);
            }
            c = &(*cs)[(*n)++];
        }
        memset(c, 0, sizeof *c);
        snprintf(c->matrix, sizeof c->matrix, "%s", f[imat]);
        snprintf(c->regime, sizeof c->regime, "%s", f[ireg]);
        snprintf(c->op, sizeof c->op, "%s", f[iop]);
        snprintf(c->winner, sizeof c->winner, "%s", f[istr]);
        c->nnz = inz >= 0 ? atof(f[inz]) : 0;
        c->speedup = atof(f[isp]);
        c->slower = islow >= 0 ? atoi(f[islow]) : c->speedup < 1.0;
        c->strategies = iall >= 0 ? parse_strategies(f[iall]) : NULL;
    }
    free(text);
    return 0;
}

/* The source sp_load takes for a case: the matrix found in one of dirs
 * (generator specs as they are), replicated for the HBM regime to the
 * CSV's nnz as the bench did. NULL when no folder has it. */
static char *case_source(const fcase *c, const char *const *dirs, int ndirs)
{
    char *path = NULL;
    if (dt_startswith(c->matrix, "gen:") || dt_startswith(c->matrix, "rep:")) {
        path = dt_xstrdup(c->matrix);
    } else {
        for (int i = 0; i < ndirs && path == NULL; i++) {
            char *p = dt_xasprintf("%s/%s", dirs[i], c->matrix);
            FILE *fp = fopen(p, "r");
            if (fp) {
                fclose(fp);
                path = p;
            } else {
                free(p);
            }
        }
    }
    if (path == NULL || !dt_streq(c->regime, "hbm") || c->nnz <= 0)
        return path;
    char *rep = dt_xasprintf("rep:%s:nnz=%.0f", path, c->nnz);
    free(path);
    return rep;
}

static int compute_x(fcase *c, const char *src, dt_err *e)
{
    sp_spec spec;
    sp_spec_init(&spec);
    if (ag_selector_op_parse(c->op, &spec) != 0) {
        sp_spec_clear(&spec);
        return dt_err_set(e, "op '%s' is none of the bench's", c->op);
    }
    sp_csr *a = sp_load(src, NULL, e);
    if (a == NULL) {
        sp_spec_clear(&spec);
        return -1;
    }
    sp_report r;
    int rc = sp_report_compute(a, spec.n, spec.n, &r, e);
    sp_csr_free(a);
    if (rc == 0) {
        cJSON *rep = sp_report_json(&r);
        cJSON *f = ag_features(rep, &spec);
        feature_vector(f, c->x);
        c->have_x = 1;
        cJSON_Delete(f);
        cJSON_Delete(rep);
    }
    sp_spec_clear(&spec);
    return rc;
}

/* The features of every case, each matrix's report computed once per
 * (source, op's n). */
static void features_of_all(fcase *cs, int n, const char *const *dirs, int ndirs, dt_buf *log)
{
    for (int i = 0; i < n; i++) {
        if (cs[i].part[0] == '\0')
            continue;
        for (int j = 0; j < i; j++) {
            sp_spec a, b;
            sp_spec_init(&a);
            sp_spec_init(&b);
            int same = cs[j].have_x && dt_streq(cs[j].matrix, cs[i].matrix) &&
                       dt_streq(cs[j].regime, cs[i].regime) &&
                       ag_selector_op_parse(cs[j].op, &a) == 0 &&
                       ag_selector_op_parse(cs[i].op, &b) == 0 && a.n == b.n && a.op == b.op;
            sp_spec_clear(&a);
            sp_spec_clear(&b);
            if (same) {
                memcpy(cs[i].x, cs[j].x, sizeof cs[i].x);
                cs[i].have_x = 1;
                break;
            }
        }
        if (cs[i].have_x)
            continue;
        char *src = case_source(&cs[i], dirs, ndirs);
        dt_err e = {0};
        if (src == NULL)
            dt_buf_printf(log, "%s (%s %s): not found in the matrix folders: left out\n",
                          cs[i].matrix, cs[i].regime, cs[i].op);
        else if (compute_x(&cs[i], src, &e) != 0)
            dt_buf_printf(log, "%s (%s %s): %s: left out\n", cs[i].matrix, cs[i].regime, cs[i].op,
                          e.msg);
        free(src);
    }
}

static double geomean(const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++)
        s += log(v[i]);
    return n ? exp(s / n) : 0;
}

static const char *report_ops[] = {"spmv-fp32", "spmv-fp64", "spmm-n32",
                                   "spmm-n128", "sddmm-k32", "sddmm-k128"};

/* The held-out report: for each validate case, the selector's first
 * strategy against the measured winner, and that strategy's measured
 * speedup where the CSV's strategies column has it. */
static void validation_report(const cJSON *model, fcase *cs, int n, const char *vpart, dt_buf *md)
{
    dt_buf_printf(md,
                  "| op | regime | validate cases | selector's pick = winner | geomean of the "
                  "winner (as tuned) | geomean of the pick (cases measured) | cuSPARSE faster |\n"
                  "|---|---|---|---|---|---|---|\n");
    dt_buf rows = DT_BUF_INIT;
    for (size_t o = 0; o < DT_ARRAY_LEN(report_ops); o++) {
        for (int g = 0; g < 2; g++) {
            const char *reg = g ? "hbm" : "orig";
            int cnt = 0, agree = 0, picked = 0, slower = 0;
            double *win = dt_xcalloc((size_t)(n ? n : 1), sizeof *win);
            double *pick = dt_xcalloc((size_t)(n ? n : 1), sizeof *pick);
            for (int i = 0; i < n; i++) {
                fcase *c = &cs[i];
                if (!c->have_x || !dt_streq(c->part, vpart) || !dt_streq(c->op, report_ops[o]) ||
                    !dt_streq(c->regime, reg) || c->speedup <= 0)
                    continue;
                cJSON *pred = predict_x(model, c->op, c->x, NULL);
                const char *p = dt_json_str(
                    cJSON_GetArrayItem(cJSON_GetObjectItem(pred, "votes"), 0), "strategy", "-");
                cnt++;
                agree += dt_streq(p, c->winner);
                slower += c->slower;
                win[cnt - 1] = c->speedup;
                double ps = dt_streq(p, c->winner) ? c->speedup : dt_json_num(c->strategies, p, 0);
                if (ps > 0)
                    pick[picked++] = ps;
                char pst[32] = "(not tuned in that case)";
                if (ps > 0)
                    snprintf(pst, sizeof pst, "%.2fx", ps);
                dt_buf_printf(&rows, "| %s | %s | %s | %s %.2fx | %s %s |\n", c->matrix, reg, c->op,
                              c->winner, c->speedup, p, pst);
                cJSON_Delete(pred);
            }
            if (cnt > 0)
                dt_buf_printf(md, "| %s | %s | %d | %d (%.0f%%) | %.2fx | %.2fx (%d) | %d |\n",
                              report_ops[o], reg, cnt, agree, 100.0 * agree / cnt,
                              geomean(win, cnt), geomean(pick, picked), picked, slower);
            free(win);
            free(pick);
        }
    }
    if (rows.len == 0)
        dt_buf_printf(md,
                      "\nNo verified case of the '%s' part is in the CSVs given: measure it "
                      "(`ditto bench --part %s ...`) and give its CSV too.\n",
                      vpart, vpart);
    dt_buf_puts(md, "\n### Every validate case\n\n| matrix | regime | op | measured winner | "
                    "selector's pick |\n|---|---|---|---|---|\n");
    dt_buf_puts(md, dt_buf_str(&rows));
    dt_buf_free(&rows);
}

/* On the fit part itself, each matrix predicted from the others' cases
 * (leave one matrix out): how often the pick is the winner, per op. */
static void leave_one_out(const cJSON *model, const fcase *cs, int n, const char *fpart, dt_buf *md)
{
    dt_buf_printf(md, "\n### The fit part, each matrix left out of its own prediction\n\n"
                      "| op | fit cases | pick = winner |\n|---|---|---|\n");
    for (size_t o = 0; o < DT_ARRAY_LEN(report_ops); o++) {
        int cnt = 0, agree = 0;
        for (int i = 0; i < n; i++) {
            const fcase *c = &cs[i];
            if (!c->have_x || !dt_streq(c->part, fpart) || !dt_streq(c->op, report_ops[o]))
                continue;
            cJSON *pred = predict_x(model, c->op, c->x, c->matrix);
            const char *p = dt_json_str(cJSON_GetArrayItem(cJSON_GetObjectItem(pred, "votes"), 0),
                                        "strategy", "");
            cnt++;
            agree += dt_streq(p, c->winner);
            cJSON_Delete(pred);
        }
        if (cnt > 0)
            dt_buf_printf(md, "| %s | %d | %d (%.0f%%) |\n", report_ops[o], cnt, agree,
                          100.0 * agree / cnt);
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The reach: twice the median, over the fitted cases, of the distance from
 * a case to its nearest case of another matrix and the same op. A query
 * farther than that from every case is unlike the corpus (an HBM-size
 * problem when only original sizes were fitted, say). 0: too few cases. */
static double fit_reach(const cJSON *model)
{
    const cJSON *fs = cJSON_GetObjectItem(model, "features");
    const cJSON *cases = cJSON_GetObjectItem(model, "cases");
    int n = cJSON_GetArraySize(cases), m = 0;
    double scale[NFEAT];
    for (int i = 0; i < NFEAT; i++) {
        scale[i] = dt_json_num(cJSON_GetArrayItem(fs, i), "scale", 1);
        if (!(scale[i] > 0))
            scale[i] = 1;
    }
    double *near = dt_xcalloc((size_t)(n ? n : 1), sizeof *near);
    for (int i = 0; i < n; i++) {
        const cJSON *a = cJSON_GetArrayItem(cases, i), *ax = cJSON_GetObjectItem(a, "x");
        double best = -1;
        for (int j = 0; j < n; j++) {
            const cJSON *b = cJSON_GetArrayItem(cases, j), *bx = cJSON_GetObjectItem(b, "x");
            if (!dt_streq(dt_json_str(a, "op", ""), dt_json_str(b, "op", "")) ||
                dt_streq(dt_json_str(a, "matrix", ""), dt_json_str(b, "matrix", "")))
                continue;
            double d = 0;
            for (int k = 0; k < NFEAT; k++) {
                double dz = (cJSON_GetArrayItem(ax, k)->valuedouble -
                             cJSON_GetArrayItem(bx, k)->valuedouble) /
                            scale[k];
                d += dz * dz;
            }
            if (best < 0 || sqrt(d) < best)
                best = sqrt(d);
        }
        if (best >= 0)
            near[m++] = best;
    }
    double r = 0;
    if (m >= 4) {
        qsort(near, (size_t)m, sizeof *near, cmp_double);
        r = 2.0 * near[m / 2];
    }
    free(near);
    return r;
}

cJSON *ag_selector_fit(const ag_fit_opts *o, dt_buf *report, dt_buf *log, dt_err *e)
{
    fcase *cs = NULL;
    int n = 0, cap = 0, skipped = 0, superseded = 0;
    cJSON *model = NULL, *split = NULL, *inputs = dt_json_arr();
    for (int i = 0; i < o->ncsv; i++) {
        int before = n, before_sup = superseded;
        if (read_csv(o->csv[i], &cs, &n, &cap, &skipped, &superseded, e) != 0)
            goto done;
        char *text = dt_read_file(o->csv[i], NULL, NULL);
        char hex[17];
        dt_hash_hex(dt_hash_str(text ? text : "", DT_HASH_SEED), hex);
        free(text);
        cJSON *in = dt_json_obj();
        dt_json_set_str(in, "file", o->csv[i]);
        dt_json_set_str(in, "fnv1a64", hex);
        dt_json_set_int(in, "verified_cases", n - before + superseded - before_sup);
        if (superseded > before_sup)
            dt_json_set_int(in, "replaced_earlier", superseded - before_sup);
        cJSON_AddItemToArray(inputs, in);
    }
    if (superseded > 0)
        dt_buf_printf(log,
                      "%d case%s measured again in a later CSV: the later measurement counts, "
                      "once\n",
                      superseded, superseded == 1 ? "" : "s");
    split = ag_split_read(o->split, e);
    if (split == NULL)
        goto done;
    int unlisted = 0;
    for (int i = 0; i < n; i++) {
        const char *p = dt_json_str(split, cs[i].matrix, NULL);
        if (p == NULL) {
            if (unlisted++ < 5)
                dt_buf_printf(log, "%s: not in %s: left out\n", cs[i].matrix, o->split);
            continue;
        }
        snprintf(cs[i].part, sizeof cs[i].part, "%s", p);
    }
    if (unlisted > 5)
        dt_buf_printf(log, "... %d cases in all whose matrix the split does not list: left out\n",
                      unlisted);
    features_of_all(cs, n, o->dirs, o->ndirs, log);
    /* standardise over the fit part */
    double mean[NFEAT] = {0}, sq[NFEAT] = {0};
    int nf = 0;
    for (int i = 0; i < n; i++) {
        if (!cs[i].have_x || !dt_streq(cs[i].part, o->fit_part))
            continue;
        nf++;
        for (int k = 0; k < NFEAT; k++) {
            mean[k] += cs[i].x[k];
            sq[k] += cs[i].x[k] * cs[i].x[k];
        }
    }
    if (nf == 0) {
        dt_err_set(e,
                   "no verified case of the '%s' part in %d CSV file%s (%d cases read): "
                   "nothing to fit",
                   o->fit_part, o->ncsv, o->ncsv == 1 ? "" : "s", n);
        goto done;
    }
    model = dt_json_obj();
    dt_json_set_str(model, "kind", "selector");
    dt_json_set_str(model, "method",
                    "k nearest neighbours over PatternReport features, "
                    "standardised over the fitted cases; each neighbour within "
                    "the reach (twice the median nearest-neighbour distance "
                    "of the fitted cases) votes for the strategy that won its "
                    "case, weighed by 1 / (distance + 0.25)");
    dt_json_set_int(model, "k", o->k > 0 ? o->k : 3);
    cJSON *fs = dt_json_arr();
    for (int k = 0; k < NFEAT; k++) {
        double m = mean[k] / nf, var = sq[k] / nf - m * m;
        cJSON *f = dt_json_obj();
        dt_json_set_str(f, "name", sfeats[k].name);
        dt_json_set_str(f, "transform", xform_name(sfeats[k].t));
        dt_json_set_num(f, "mean", m);
        dt_json_set_num(f, "scale", var > 1e-12 ? sqrt(var) : 1.0);
        cJSON_AddItemToArray(fs, f);
    }
    dt_json_set_take(model, "features", fs);
    cJSON *cases = dt_json_arr();
    for (int i = 0; i < n; i++) {
        if (!cs[i].have_x || !dt_streq(cs[i].part, o->fit_part))
            continue;
        cJSON *c = dt_json_obj();
        dt_json_set_str(c, "op", cs[i].op);
        dt_json_set_str(c, "matrix", cs[i].matrix);
        dt_json_set_str(c, "regime", cs[i].regime);
        dt_json_set_str(c, "winner", cs[i].winner);
        dt_json_set_num(c, "speedup", cs[i].speedup);
        cJSON *x = dt_json_arr();
        for (int k = 0; k < NFEAT; k++)
            cJSON_AddItemToArray(x, cJSON_CreateNumber(cs[i].x[k]));
        dt_json_set_take(c, "x", x);
        if (cs[i].strategies)
            dt_json_set_take(c, "strategies", cJSON_Duplicate(cs[i].strategies, 1));
        cJSON_AddItemToArray(cases, c);
    }
    dt_json_set_take(model, "cases", cases);
    double reach = fit_reach(model);
    if (reach > 0)
        dt_json_set_num(model, "reach", reach);
    cJSON *pv = dt_json_obj();
    char summary[200];
    int matrices = 0;
    for (int i = 0; i < n; i++) {
        int first = cs[i].have_x && dt_streq(cs[i].part, o->fit_part);
        for (int j = 0; j < i && first; j++)
            first = !(cs[j].have_x && dt_streq(cs[j].part, o->fit_part) &&
                      dt_streq(cs[j].matrix, cs[i].matrix));
        matrices += first;
    }
    snprintf(summary, sizeof summary, "fitted on %d cases of %d matrices, the '%s' part of %s", nf,
             matrices, o->fit_part, o->split);
    dt_json_set_str(pv, "summary", summary);
    dt_json_set_str(pv, "command", o->command ? o->command : "");
    dt_json_set_take(pv, "inputs", inputs);
    inputs = NULL;
    dt_json_set_str(pv, "split", o->split);
    dt_json_set_str(pv, "fit_part", o->fit_part);
    dt_json_set_str(pv, "validate_part", o->validate_part);
    dt_json_set_int(pv, "cases_skipped_not_verified", skipped);
    char date[32];
    time_t now = (time_t)dt_wall_now();
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    dt_json_set_str(pv, "fitted_at", date);
    dt_json_set_take(model, "provenance", pv);
    if (report) {
        dt_buf_printf(report,
                      "## Selector validation: fitted on '%s', reported on '%s'\n\n"
                      "Written by `%s` on %s. The selector (%s) was %s. Below, each case of "
                      "the '%s' part: the strategy the selector ranks first against the one "
                      "that won when the bench tuned the planner's candidates, and the pick's "
                      "own measured speedup where that case tuned it.\n\n",
                      o->fit_part, o->validate_part, o->command ? o->command : "ditto kb fit", date,
                      dt_json_str(model, "method", ""), summary, o->validate_part);
        validation_report(model, cs, n, o->validate_part, report);
        leave_one_out(model, cs, n, o->fit_part, report);
    }
done:
    for (int i = 0; i < n; i++)
        cJSON_Delete(cs[i].strategies);
    free(cs);
    cJSON_Delete(split);
    cJSON_Delete(inputs);
    return model;
}
