/* expert.c -- the expert backend: features of a matrix for the knowledge
 * base's rules, the ranking of kernel templates by the approved rules that
 * fire, plans built from the ranking, template instantiation, hints for
 * compiler messages, and the librarian's knowledge-base proposal. No
 * network: every decision names the rule behind it.
 * Over 1,000 lines: one backend, every step of the pipeline it answers. */
#include "agents/internal.h"
#include "gpu/contract.h"
#include "knowledge/knowledge.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int is_dropped(const ag_run *r, const char *strat);
static const cJSON *find_wish(const ag_run *r, const char *kind);
static int choose_candidate(ag_run *r, ag_step *s, char *why, size_t len);
static void plan_apply_params(ag_run *r, ag_step *s, cJSON *plan, cJSON *cand);
static char *template_text(const cJSON *c);

/* ---- features -------------------------------------------------------------------- */

cJSON *ag_features(const cJSON *rep, const sp_spec *spec)
{
    cJSON *f = dt_json_obj();
    const cJSON *rl = cJSON_GetObjectItem(rep, "row_length");
    double rows = dt_json_num(rep, "rows", 0), nnz = dt_json_num(rep, "nnz", 0);
    double mean = dt_json_num(rl, "mean", 0), mx = dt_json_num(rl, "max", 0);
    dt_json_set_num(f, "rows", rows);
    dt_json_set_num(f, "cols", dt_json_num(rep, "cols", 0));
    dt_json_set_num(f, "nnz", nnz);
    dt_json_set_num(f, "density", dt_json_num(rep, "density", 0));
    dt_json_set_num(f, "row_mean", mean);
    dt_json_set_num(f, "row_cv", dt_json_num(rl, "cv", 0));
    dt_json_set_num(f, "row_max", mx);
    dt_json_set_num(f, "row_max_over_mean", mean > 0 ? mx / mean : 0);
    dt_json_set_num(f, "row_gini", dt_json_num(rl, "gini", 0));
    dt_json_set_num(f, "empty_rows_frac", rows > 0 ? dt_json_num(rep, "empty_rows", 0) / rows : 0);
    double cols = dt_json_num(rep, "cols", 0);
    double wide = rows > cols ? rows : cols;
    dt_json_set_num(f, "bandwidth_frac", wide > 0 ? dt_json_num(rep, "bandwidth", 0) / wide : 0);
    dt_json_set_num(f, "diagonals", dt_json_num(rep, "diagonals", 0));
    const cJSON *b;
    cJSON_ArrayForEach(b, cJSON_GetObjectItem(rep, "block_fill"))
    {
        char name[32];
        snprintf(name, sizeof name, "block_fill_%d", dt_json_int(b, "b", 0));
        dt_json_set_num(f, name, dt_json_num(b, "fill", 0));
    }
    dt_json_set_num(f, "x_lines_per_nnz",
                    dt_json_num(cJSON_GetObjectItem(rep, "locality"), "x_lines_per_nnz", 0));
    dt_json_set_num(f, "col_span_max", dt_json_num(rep, "col_span_max", 0));
    /* A report without the count (older caches) reads as many values. */
    dt_json_set_num(f, "distinct_values", dt_json_num(rep, "distinct_values", SP_DISTINCT_CAP + 1));
    dt_json_set_num(f, "n", spec->op == SP_SPMV ? 1 : spec->n);
    return f;
}

/* ---- templates ---------------------------------------------------------------------- */

typedef struct tmpl {
    char *path;     /* "kernels/spmv_csr_thread.cu" (relative to the share folder) */
    gpu_manifest m;
    int max_values;  /* its contract's requires.max_values, -1 when none */
    double max_fill; /* its contract's requires.max_fill, -1 when none */
} tmpl;

static int load_templates(const sp_spec *spec, tmpl **out, int *n, dt_err *e)
{
    *out = NULL;
    *n = 0;
    char *dir = dt_share_path("kernels");
    if (dir == NULL)
        return dt_err_set(e, "the kernel template folder was not found (set DITTO_SHARE)");
    DIR *d = opendir(dir);
    if (d == NULL) {
        free(dir);
        return dt_err_set(e, "cannot read the template folder");
    }
    struct dirent *de;
    int cap = 0;
    while ((de = readdir(d)) != NULL) {
        if (!dt_endswith(de->d_name, ".cu"))
            continue;
        char *p = dt_xasprintf("%s/%s", dir, de->d_name);
        char *src = dt_read_file(p, NULL, NULL);
        free(p);
        if (src == NULL)
            continue;
        gpu_manifest m;
        dt_err me = {0};
        if (gpu_manifest_from_source(src, &m, &me) == 0) {
            if (m.op == spec->op && (m.dtypes & (1u << spec->dtype))) {
                if (*n == cap) {
                    cap = cap ? 2 * cap : 16;
                    *out = dt_xrealloc(*out, (size_t)cap * sizeof **out);
                }
                (*out)[*n].path = dt_xasprintf("kernels/%s", de->d_name);
                (*out)[*n].m = m;
                (*out)[*n].max_values = -1;
                (*out)[*n].max_fill = -1;
                gpu_contract c;
                if (gpu_contract_from_source(src, &c, NULL) == 0) {
                    (*out)[*n].max_values = dt_json_int(c.requires, "max_values", -1);
                    (*out)[*n].max_fill = dt_json_num(c.requires, "max_fill", -1);
                    gpu_contract_clear(&c);
                }
                (*n)++;
            } else {
                gpu_manifest_clear(&m);
            }
        }
        free(src);
    }
    closedir(d);
    free(dir);
    return 0;
}

static void templates_free(tmpl *t, int n)
{
    for (int i = 0; i < n; i++) {
        free(t[i].path);
        gpu_manifest_clear(&t[i].m);
    }
    free(t);
}

static int cmp_rule_id(const void *a, const void *b)
{
    const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;
    return strcmp(dt_json_str(x, "id", ""), dt_json_str(y, "id", ""));
}

/* The rules that fire (distance 0), in id order: a later rule's parameter
 * values override an earlier one's, whatever order retrieval ranks them
 * in. Caller frees the array (the items are borrowed). */
static const cJSON **firing_rules(const cJSON *rules, int *n)
{
    const cJSON **out = dt_xcalloc((size_t)cJSON_GetArraySize(rules) + 1, sizeof *out);
    *n = 0;
    const cJSON *r;
    cJSON_ArrayForEach(r, rules)
        if (dt_json_num(r, "distance", 1) == 0)
            out[(*n)++] = r;
    qsort(out, (size_t)*n, sizeof *out, cmp_rule_id);
    return out;
}

static int cmp_cand(const void *a, const void *b)
{
    const cJSON *x = *(cJSON *const *)a, *y = *(cJSON *const *)b;
    double sx = dt_json_num(x, "score", 0), sy = dt_json_num(y, "score", 0);
    if (sx != sy)
        return sx > sy ? -1 : 1;
    return strcmp(dt_json_str(x, "strategy", ""), dt_json_str(y, "strategy", ""));
}

cJSON *ag_rank_templates(const cJSON *report, const sp_spec *spec, const char *cc, void *kbv,
                         dt_err *e)
{
    kb *k = kbv;
    kb *own = NULL;
    if (k == NULL) {
        own = kb_open(NULL, NULL, NULL, e);
        k = own;
    }
    tmpl *ts = NULL;
    int nt = 0;
    if (load_templates(spec, &ts, &nt, e) != 0) {
        kb_close(own);
        return NULL;
    }
    cJSON *features = ag_features(report, spec);
    cJSON *rules = k ? kb_retrieve(k, "rule", sp_op_name(spec->op), sp_dtype_name(spec->dtype),
                                   cc && *cc ? cc : NULL, features, 1000)
                     : dt_json_arr();
    cJSON **cands = dt_xcalloc((size_t)(nt ? nt : 1), sizeof *cands);
    int nc = 0, nfire = 0;
    const cJSON **fire = firing_rules(rules, &nfire);
    double nvals = dt_json_num(features, "distinct_values", SP_DISTINCT_CAP + 1);
    double frows = dt_json_num(features, "rows", 0), fnnz = dt_json_num(features, "nnz", 0);
    double fmax = dt_json_num(features, "row_max", 0);
    for (int i = 0; i < nt; i++) {
        gpu_manifest *m = &ts[i].m;
        /* A template whose contract refuses the matrix is no candidate (the
         * worker would refuse every variant, and the case would tune one
         * strategy fewer): a value dictionary on a matrix of more values
         * than it holds; rows padded to the longest (ELL) past the slots per
         * nonzero its contract allows, a bound that replication keeps. */
        if (ts[i].max_values >= 0 && nvals > ts[i].max_values)
            continue;
        if (ts[i].max_fill >= 0 && frows * fmax > ts[i].max_fill * (fnnz > 0 ? fnnz : 1))
            continue;
        cJSON *c = dt_json_obj();
        dt_json_set_str(c, "strategy", m->strategy);
        dt_json_set_str(c, "template", ts[i].path);
        dt_json_set_str(c, "summary", m->summary);
        cJSON *params = gpu_manifest_defaults(m);
        cJSON *space = dt_json_obj();
        for (int p = 0; p < m->nparams; p++) {
            cJSON *vals = dt_json_arr();
            for (int v = 0; v < m->params[p].nvalues; v++)
                cJSON_AddItemToArray(vals, cJSON_CreateNumber((double)m->params[p].values[v]));
            dt_json_set_take(space, m->params[p].name, vals);
        }
        double score = 0;
        cJSON *why = dt_json_arr();
        for (int ri = 0; ri < nfire; ri++) {
            const cJSON *r = fire[ri]; /* only rules whose feature ranges hold fire */
            const cJSON *rp = cJSON_GetObjectItem(r, "parameters");
            if (!dt_streq(dt_json_str(rp, "strategy", ""), m->strategy))
                continue;
            double sc = dt_json_num(rp, "score", 1);
            score += sc;
            cJSON *w = dt_json_obj();
            dt_json_set_str(w, "rule", dt_json_str(r, "id", ""));
            dt_json_set_str(w, "text", dt_json_str(r, "title", dt_json_str(r, "content", "")));
            dt_json_set_num(w, "score", sc);
            cJSON_AddItemToArray(why, w);
            /* A rule may narrow the space: keep the legal values it names,
             * and take its first as the starting point. */
            const cJSON *nv;
            cJSON_ArrayForEach(nv, cJSON_GetObjectItem(rp, "params"))
            {
                cJSON *legal = cJSON_GetObjectItem(space, nv->string);
                if (legal == NULL || !cJSON_IsArray(nv) || cJSON_GetArraySize(nv) == 0)
                    continue;
                cJSON *narrowed = dt_json_arr();
                const cJSON *x;
                cJSON_ArrayForEach(x, nv)
                {
                    const cJSON *y;
                    cJSON_ArrayForEach(y, legal)
                        if (y->valuedouble == x->valuedouble)
                            cJSON_AddItemToArray(narrowed, cJSON_CreateNumber(x->valuedouble));
                }
                if (cJSON_GetArraySize(narrowed) > 0) {
                    dt_json_set_num(params, nv->string, cJSON_GetArrayItem(narrowed, 0)->valuedouble);
                    dt_json_set_take(space, nv->string, narrowed);
                } else {
                    cJSON_Delete(narrowed);
                }
            }
        }
        if (cJSON_GetArraySize(why) == 0) {
            cJSON *w = dt_json_obj();
            dt_json_set_str(w, "rule", NULL);
            dt_json_set_str(w, "text", "no approved rule fired for this strategy on this matrix");
            dt_json_set_num(w, "score", 0);
            cJSON_AddItemToArray(why, w);
        }
        dt_json_set_num(c, "score", score);
        dt_json_set_take(c, "params", params);
        dt_json_set_take(c, "space", space);
        dt_json_set_take(c, "rationale", why);
        cands[nc++] = c;
    }
    qsort(cands, (size_t)nc, sizeof *cands, cmp_cand);
    cJSON *out = dt_json_arr();
    for (int i = 0; i < nc; i++)
        cJSON_AddItemToArray(out, cands[i]);
    free(cands);
    ag_selector_apply(out, report, spec);
    ag_ensure_skew_safe(out, report, spec->op, AG_SKEW_SAFE_WITHIN);
    free(fire);
    cJSON_Delete(rules);
    cJSON_Delete(features);
    templates_free(ts, nt);
    kb_close(own);
    return out;
}

/* ---- plans ------------------------------------------------------------------------------ */

cJSON *ag_plan_from_candidate(ag_run *r, const cJSON *c, dt_err *e)
{
    (void)r;
    const char *tpl = dt_json_str(c, "template", NULL);
    char *path = tpl ? dt_share_path(tpl) : NULL;
    char *src = path ? dt_read_file(path, NULL, e) : NULL;
    free(path);
    if (src == NULL) {
        dt_err_set(e, "template %s cannot be read", tpl ? tpl : "(none)");
        return NULL;
    }
    gpu_contract ct;
    if (gpu_contract_from_source(src, &ct, e) != 0) {
        free(src);
        return NULL;
    }
    cJSON *plan = dt_json_obj();
    dt_json_set_str(plan, "strategy", dt_json_str(c, "strategy", ""));
    dt_json_set_str(plan, "template", tpl);
    dt_json_set_str(plan, "summary", dt_json_str(c, "summary", ""));
    dt_json_set_str(plan, "format", ct.format);
    dt_json_set_take(plan, "params", cJSON_Duplicate(cJSON_GetObjectItem(c, "params"), 1));
    dt_json_set_take(plan, "space", cJSON_Duplicate(cJSON_GetObjectItem(c, "space"), 1));
    dt_json_set_take(plan, "contract", gpu_contract_json(&ct));
    dt_json_set_take(plan, "rationale", cJSON_Duplicate(cJSON_GetObjectItem(c, "rationale"), 1));
    dt_json_set_num(plan, "score", dt_json_num(c, "score", 0));
    gpu_contract_clear(&ct);
    free(src);
    return plan;
}

int ag_plan_validate(ag_run *r, const cJSON *plan, dt_buf *problems)
{
    (void)r;
    int bad = 0;
    if (!cJSON_IsObject(plan)) {
        dt_buf_puts(problems, "$: expected a plan object");
        return -1;
    }
    const char *tpl = dt_json_str(plan, "template", NULL);
    char *path = tpl ? dt_share_path(tpl) : NULL;
    char *src = path ? dt_read_file(path, NULL, NULL) : NULL;
    free(path);
    if (src == NULL) {
        dt_buf_printf(problems, "$.template: '%s' is not a template of kernels/; ",
                      tpl ? tpl : "(missing)");
        return -1;
    }
    gpu_manifest m;
    dt_err e = {0};
    if (gpu_manifest_from_source(src, &m, &e) == 0) {
        const cJSON *params = cJSON_GetObjectItem(plan, "params");
        if (!cJSON_IsObject(params)) {
            dt_buf_puts(problems, "$.params: expected an object of template parameters; ");
            bad = 1;
        } else if (gpu_manifest_check(&m, params, NULL, &e) != 0) {
            dt_buf_printf(problems, "$.params: %s; ", e.msg);
            bad = 1;
        }
        const cJSON *p;
        cJSON_ArrayForEach(p, params)
        {
            int known = 0;
            for (int i = 0; i < m.nparams; i++)
                known |= strcmp(m.params[i].name, p->string) == 0;
            if (!known) {
                dt_buf_printf(problems, "$.params.%s: %s has no such parameter; ", p->string,
                              m.strategy);
                bad = 1;
            }
        }
        gpu_manifest_clear(&m);
    } else {
        dt_buf_printf(problems, "%s; ", e.msg);
        bad = 1;
    }
    gpu_contract c;
    if (gpu_contract_parse(cJSON_GetObjectItem(plan, "contract"), &c, &e) != 0) {
        /* an edited plan may omit the contract: it is the template's */
        gpu_contract t;
        if (gpu_contract_from_source(src, &t, &e) != 0) {
            dt_buf_printf(problems, "$.contract: %s; ", e.msg);
            bad = 1;
        } else {
            gpu_contract_clear(&t);
        }
    } else {
        gpu_contract_clear(&c);
    }
    free(src);
    return bad ? -1 : 0;
}

void ag_expert_plan(ag_run *r, ag_step *s)
{
    dt_err e = {0};
    if (r->candidates == NULL) {
        r->candidates = ag_rank_templates(r->report, &r->spec, r->cc, r->o.kb, &e);
        if (r->candidates == NULL) {
            ag_complete(r, s, NULL, 0, e.msg);
            return;
        }
        ag_text(r, s, "Ranked %d templates for %s %s by the approved rules that fire on this "
                      "matrix:\n",
                cJSON_GetArraySize(r->candidates), sp_op_name(r->spec.op),
                sp_dtype_name(r->spec.dtype));
        const cJSON *c;
        cJSON_ArrayForEach(c, r->candidates)
            ag_text(r, s, "  %-16s score %4.1f  (%s)\n", dt_json_str(c, "strategy", ""),
                    dt_json_num(c, "score", 0), dt_json_str(c, "template", ""));
        ag_narrow_spaces(r, s);
    }
    const char *fb = dt_json_str(s->inputs, "feedback", NULL);
    if (fb)
        ag_text(r, s, "Feedback from the last attempt:\n%s", fb);
    ag_wishes_show(r, s);
    int n = cJSON_GetArraySize(r->candidates);
    char why[600];
    int ci = choose_candidate(r, s, why, sizeof why);
    if (ci < 0) {
        ag_complete(r, s, NULL, 0, why);
        return;
    }
    r->cand_index = ci;
    cJSON *c = cJSON_GetArrayItem(r->candidates, r->cand_index);
    cJSON *plan = ag_plan_from_candidate(r, c, &e);
    if (plan == NULL) {
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
    plan_apply_params(r, s, plan, c);
    /* A before hook (Lua) may have narrowed params in the inputs. */
    const cJSON *hp = cJSON_GetObjectItem(s->inputs, "params");
    const cJSON *p;
    cJSON_ArrayForEach(p, hp)
    {
        if (cJSON_IsArray(p) && cJSON_GetArraySize(p) > 0) {
            dt_json_set_take(cJSON_GetObjectItem(plan, "space"), p->string, cJSON_Duplicate(p, 1));
            dt_json_set_num(cJSON_GetObjectItem(plan, "params"), p->string,
                            cJSON_GetArrayItem(p, 0)->valuedouble);
        } else if (cJSON_IsNumber(p)) {
            dt_json_set_num(cJSON_GetObjectItem(plan, "params"), p->string, p->valuedouble);
        }
    }
    ag_text(r, s, "Decision: %s (%s), candidate %d of %d%s.\n", dt_json_str(plan, "strategy", ""),
            dt_json_str(plan, "summary", ""), r->cand_index + 1, n,
            find_wish(r, "use") ? ", the one a reviewer named" : "");
    const cJSON *w;
    cJSON_ArrayForEach(w, cJSON_GetObjectItem(plan, "rationale"))
    {
        const char *rule = dt_json_str(w, "rule", NULL);
        if (rule)
            ag_text(r, s, "  because [%s] %s\n", rule, dt_json_str(w, "text", ""));
        else
            ag_text(r, s, "  %s\n", dt_json_str(w, "text", ""));
    }
    char *ps = dt_json_print(cJSON_GetObjectItem(plan, "params"), 0);
    char *sp = dt_json_print(cJSON_GetObjectItem(plan, "space"), 0);
    ag_text(r, s, "Parameters %s; the tuner will search %s.\n", ps, sp);
    free(ps);
    free(sp);
    /* Alternatives for the reader. */
    cJSON *alts = dt_json_arr();
    for (int i = 0, k = 0; i < n && k < 3; i++) {
        const cJSON *a = cJSON_GetArrayItem(r->candidates, i);
        if (i == r->cand_index || is_dropped(r, dt_json_str(a, "strategy", "")))
            continue;
        k++;
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "strategy", dt_json_str(a, "strategy", ""));
        dt_json_set_num(o, "score", dt_json_num(a, "score", 0));
        cJSON_AddItemToArray(alts, o);
    }
    dt_json_set_take(plan, "alternatives", alts);
    ag_complete(r, s, plan, 1, NULL);
}

/* ---- generate ---------------------------------------------------------------------------- */

char *ag_instantiate(const char *template_path, const cJSON *params, dt_err *e)
{
    char *path = dt_share_path(template_path);
    char *src = path ? dt_read_file(path, NULL, e) : NULL;
    free(path);
    if (src == NULL) {
        dt_err_set(e, "template %s cannot be read", template_path);
        return NULL;
    }
    dt_buf out = DT_BUF_INIT;
    dt_buf_printf(&out, "/* Generated by ditto %s from %s with", DT_VERSION, template_path);
    const cJSON *p;
    cJSON_ArrayForEach(p, params)
        dt_buf_printf(&out, " %s=%lld", p->string, (long long)dt_json_as_i64(p, 0));
    dt_buf_puts(&out, ". */\n");
    cJSON_ArrayForEach(p, params)
        dt_buf_printf(&out, "#define %s %lld\n", p->string, (long long)dt_json_as_i64(p, 0));
    dt_buf_puts(&out, src);
    free(src);
    return dt_buf_take(&out);
}

/* Whether an earlier kernel version of this run has exactly this source. */
static int generated_before(const ag_run *r, const ag_step *self, const char *src)
{
    for (int i = 0; i < r->nsteps; i++) {
        const ag_step *g = r->steps[i];
        if (g != self && g->kind == AG_GENERATE && g->artifact &&
            dt_streq(dt_json_str(g->artifact, "source", ""), src))
            return 1;
    }
    return 0;
}

/* The i-th point of the plan's space in mixed-radix order (i from 0), or
 * NULL past the end. Caller frees. */
static cJSON *space_point(const cJSON *space, long i)
{
    cJSON *pt = dt_json_obj();
    const cJSON *p;
    cJSON_ArrayForEach(p, space)
    {
        int n = cJSON_GetArraySize(p);
        if (n == 0) {
            cJSON_Delete(pt);
            return NULL;
        }
        dt_json_set_num(pt, p->string, cJSON_GetArrayItem(p, (int)(i % n))->valuedouble);
        i /= n;
    }
    if (i > 0) {
        cJSON_Delete(pt);
        return NULL;
    }
    return pt;
}

void ag_expert_generate(ag_run *r, ag_step *s)
{
    const char *fb = dt_json_str(s->inputs, "feedback", NULL);
    const char *tpl = dt_json_str(r->plan, "template", "");
    dt_err e = {0};
    ag_wishes_show(r, s);
    char *tsrc = template_text(r->plan);
    char why[400];
    if (tsrc && ag_wishes_refuse(r, tsrc, why, sizeof why)) {
        char msg[600];
        snprintf(msg, sizeof msg, "the plan's template %s cannot be used: %s", tpl, why);
        free(tsrc);
        ag_complete(r, s, NULL, 0, msg);
        return;
    }
    free(tsrc);
    /* parameter wishes said since the plan was made apply to this kernel */
    if (find_wish(r, "param")) {
        cJSON *cand = NULL, *c;
        cJSON_ArrayForEach(c, r->candidates)
            if (dt_streq(dt_json_str(c, "strategy", ""), dt_json_str(r->plan, "strategy", "")))
                cand = c;
        plan_apply_params(r, s, r->plan, cand);
    }
    cJSON *params = cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "params"), 1);
    char *src = ag_instantiate(tpl, params, &e);
    if (src == NULL) {
        cJSON_Delete(params);
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
    if (fb && r->plan_generates > 1) {
        /* The expert cannot rewrite code: after a failure (or a reviewer's
         * rejection) it moves to a point of the plan's space whose source
         * no earlier version had -- never the same source again. */
        ag_text(r, s, "Feedback on the previous version:\n%s", fb);
        const cJSON *space = cJSON_GetObjectItem(r->plan, "space");
        long i = 0;
        while (generated_before(r, s, src)) {
            free(src);
            src = NULL;
            cJSON_Delete(params);
            params = space_point(space, i++);
            if (params == NULL || i > 100000)
                break;
            src = ag_instantiate(tpl, params, &e);
            if (src == NULL)
                break;
        }
        if (src == NULL) {
            cJSON_Delete(params);
            ag_complete(r, s, NULL, 0,
                        "the expert backend instantiates templates and cannot repair one; every "
                        "point of this template's space was generated already");
            return;
        }
        ag_text(r, s, "The expert backend does not rewrite code: trying parameters of the same "
                      "template that no earlier version had.\n");
    }
    char *ps = dt_json_print(params, 0);
    ag_text(r, s, "Instantiated %s with %s: parameters become #defines at the top; the launch "
                  "contract and the template body are kept as written.\n",
            tpl, ps);
    free(ps);
    /* The params in effect go into the plan so compile/verify/measure bind
     * the same values. */
    dt_json_set_take(r->plan, "params", cJSON_Duplicate(params, 1));
    cJSON *art = dt_json_obj();
    dt_json_set_str(art, "source", src);
    dt_json_set_take(art, "params", params);
    dt_json_set_str(art, "template", tpl);
    free(src);
    ag_complete(r, s, art, 1, NULL);
}

/* ---- compiler messages ----------------------------------------------------------------- */

static const struct {
    const char *pattern, *hint;
} builtin_hints[] = {
    {"is undefined", "an identifier NVRTC does not know: a missing #include (cuda_fp16.h for "
                     "__half intrinsics), a typo, or an intrinsic that needs a newer -arch"},
    {"expected a \";\"", "a statement is not terminated: look at the end of the line before"},
    {"too many resources requested", "the block needs more registers or shared memory than an "
                                     "SM has: lower the block size or __launch_bounds__"},
    {"uses too much shared data", "static shared memory is limited to 48 KB: use dynamic shared "
                                  "memory with an opt-in above it"},
    {"cannot open source file", "NVRTC only sees the toolkit and ditto's kernels/ folder on its "
                                "include path: inline the header or include ditto.cuh"},
    {"spill", "registers spilled to local memory: reduce live values or raise --maxrregcount"},
};

const char *ag_explain_diagnostic(void *kbv, const char *message)
{
    if (message == NULL)
        return NULL;
    kb *k = kbv;
    if (k != NULL) {
        cJSON *list = kb_list(k, "error-explanation", "approved");
        const cJSON *en;
        static char hint[512];
        cJSON_ArrayForEach(en, list)
        {
            const cJSON *p = cJSON_GetObjectItem(en, "parameters");
            const char *pat = dt_json_str(p, "pattern", NULL);
            const char *unless = dt_json_str(p, "unless", NULL);
            if (pat && *pat && strstr(message, pat) && !(unless && *unless && strstr(message, unless))) {
                snprintf(hint, sizeof hint, "%s", dt_json_str(p, "hint", ""));
                cJSON_Delete(list);
                return hint;
            }
        }
        cJSON_Delete(list);
    }
    for (size_t i = 0; i < DT_ARRAY_LEN(builtin_hints); i++)
        if (strstr(message, builtin_hints[i].pattern))
            return builtin_hints[i].hint;
    return NULL;
}

/* ---- the librarian ----------------------------------------------------------------------- */

cJSON *ag_kb_proposal(ag_run *r)
{
    cJSON *entry = dt_json_obj();
    const char *strat = dt_json_str(r->best, "strategy", "?");
    char id[160];
    char fp[32];
    snprintf(fp, sizeof fp, "%s", r->session[0] ? r->session : "run");
    for (char *c = fp; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9')))
            *c = '-';
    snprintf(id, sizeof id, "strategy.%s.%s.%s.%s", sp_op_name(r->spec.op), strat,
             dt_json_str(r->report, "class", "matrix"), fp);
    for (char *c = id; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    dt_json_set_str(entry, "id", id);
    dt_json_set_str(entry, "kind", "strategy");
    char title[300];
    snprintf(title, sizeof title, "%s for %s %s on %s matrices: %.2fx the best cuSPARSE", strat,
             sp_op_name(r->spec.op), sp_dtype_name(r->spec.dtype),
             dt_json_str(r->report, "class", "?"), dt_json_num(r->best, "speedup", 0));
    dt_json_set_str(entry, "title", title);
    /* applies_to: this op/dtype/cc and feature ranges around this matrix. */
    cJSON *ap = dt_json_obj();
    cJSON *ops = dt_json_arr();
    cJSON_AddItemToArray(ops, cJSON_CreateString(sp_op_name(r->spec.op)));
    dt_json_set_take(ap, "op", ops);
    cJSON *dts = dt_json_arr();
    cJSON_AddItemToArray(dts, cJSON_CreateString(sp_dtype_name(r->spec.dtype)));
    dt_json_set_take(ap, "dtype", dts);
    if (r->cc[0]) {
        cJSON *ccs = dt_json_arr();
        cJSON_AddItemToArray(ccs, cJSON_CreateString(r->cc));
        dt_json_set_take(ap, "cc", ccs);
    }
    cJSON *features = ag_features(r->report, &r->spec);
    cJSON *ranges = dt_json_obj();
    static const char *keep[] = {"row_mean", "row_cv", "row_max_over_mean", "row_gini",
                                 "block_fill_4", "x_lines_per_nnz"};
    for (size_t i = 0; i < DT_ARRAY_LEN(keep); i++) {
        double v = dt_json_num(features, keep[i], 0);
        cJSON *rg = dt_json_arr();
        cJSON_AddItemToArray(rg, cJSON_CreateNumber(v * 0.8));
        cJSON_AddItemToArray(rg, cJSON_CreateNumber(v * 1.25 + 1e-9));
        dt_json_set_take(ranges, keep[i], rg);
    }
    dt_json_set_take(ap, "features", ranges);
    dt_json_set_take(entry, "applies_to", ap);
    char content[1200];
    char *ps = dt_json_print(cJSON_GetObjectItem(r->best, "params"), 0);
    snprintf(content, sizeof content,
             "On %s (%s), %s with %s ran in %.2f us, %.2fx the best cuSPARSE algorithm (%s), "
             "verified by the full battery and timed with the same method (%s).",
             r->spec.matrix, dt_json_str(r->report, "class_reason", ""), strat, ps,
             dt_json_num(r->best, "us", 0), dt_json_num(r->best, "speedup", 0),
             dt_json_str(r->best, "baseline", "?"), dt_json_str(r->best, "method", "?"));
    free(ps);
    dt_json_set_str(entry, "content", content);
    cJSON *params = dt_json_obj();
    dt_json_set_str(params, "strategy", strat);
    cJSON *pp = dt_json_obj();
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(r->best, "params"))
    {
        cJSON *one = dt_json_arr();
        cJSON_AddItemToArray(one, cJSON_CreateNumber(p->valuedouble));
        dt_json_set_take(pp, p->string, one);
    }
    dt_json_set_take(params, "params", pp);
    dt_json_set_num(params, "score", 1);
    dt_json_set_take(entry, "parameters", params);
    cJSON *ev = dt_json_arr();
    cJSON *one = dt_json_obj();
    dt_json_set_str(one, "session", r->session);
    dt_json_set_str(one, "gpu", r->gpu_name);
    dt_json_set_str(one, "matrix", r->spec.matrix);
    dt_json_set_take(one, "features", features);
    dt_json_set_num(one, "speedup", dt_json_num(r->best, "speedup", 0));
    cJSON *meas = dt_json_obj();
    dt_json_set_num(meas, "us", dt_json_num(r->best, "us", 0));
    dt_json_set_num(meas, "gbps", dt_json_num(r->best, "gbps", 0));
    dt_json_set_str(meas, "method", dt_json_str(r->best, "method", ""));
    dt_json_set_take(one, "measured", meas);
    cJSON_AddItemToArray(ev, one);
    dt_json_set_take(entry, "evidence", ev);
    if (r->o.kb) {
        dt_err e = {0};
        if (kb_propose(r->o.kb, entry, &e) != 0)
            ag_log(r, "warning", "the knowledge base refused the proposal: %s", e.msg);
    }
    return entry;
}

/* ---- reasons are instructions ------------------------------------------------------------ */

/* Wishes are objects {kind, said, ...}:
 *   use       {strategy}            the reviewer named a strategy to use
 *   avoid     {strategy}            ... or one not to use
 *   param     {param, lo, hi}       a value (lo == hi) or a range of a parameter
 *   no-atomics, no-smem             templates that use them are left out
 *   fewer-registers                 NVRTC gets a register cap
 *   faster, simpler                 how the remaining candidates are ordered
 * They are kept for the rest of the session; a later wish of the same kind
 * (and strategy or parameter) replaces an earlier one. */

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
}

static int word_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
           (c >= 'A' && c <= 'Z');
}

/* The first whole-word occurrence of w in text (both lower case), or NULL. */
static const char *find_word(const char *text, const char *w)
{
    size_t n = strlen(w);
    for (const char *p = strstr(text, w); p; p = strstr(p + 1, w)) {
        if ((p == text || !word_char(p[-1])) && !word_char(p[n]))
            return p;
    }
    return NULL;
}

/* Whether a negation ("no", "not", "avoid", "without", "instead of", "don't")
 * stands among the few words before at. */
static int negated(const char *text, const char *at)
{
    const char *from = at - 24 > text ? at - 24 : text;
    char before[32];
    snprintf(before, sizeof before, "%.*s", (int)(at - from), from);
    static const char *neg[] = {"no ", "not ", "avoid ", "without ", "instead of ", "don't ",
                                "dont ", "never ", "except ", "drop ", "stop using "};
    for (size_t i = 0; i < DT_ARRAY_LEN(neg); i++) {
        const char *p = strstr(before, neg[i]);
        /* only the words right before: no sentence end in between */
        if (p && !strpbrk(p, ".;,!?"))
            return 1;
    }
    return 0;
}

/* A resource named in a rejection is a complaint ("uses atomics", "no
 * shared memory") unless the words right before ask for it ("use atomics",
 * "with shared memory"). */
static int complaint(const char *text, const char *at)
{
    if (negated(text, at))
        return 1;
    const char *from = at - 12 > text ? at - 12 : text;
    char before[16];
    snprintf(before, sizeof before, "%.*s", (int)(at - from), from);
    size_t n = strlen(before);
    static const char *ask[] = {"use ", "with ", "allow ", "try ", "more "};
    for (size_t i = 0; i < DT_ARRAY_LEN(ask); i++) {
        size_t l = strlen(ask[i]);
        if (n >= l && strcmp(before + n - l, ask[i]) == 0 &&
            !(n >= l + 1 && before[n - l - 1] != ' ' && word_char(before[n - l - 1])))
            return 0;
    }
    return 1;
}

static void add_wish(ag_run *r, cJSON *w)
{
    /* a newer wish of the same kind and subject replaces the older one;
     * use and avoid of one strategy replace each other */
    const char *k = dt_json_str(w, "kind", "");
    const char *subj = dt_json_str(w, "strategy", dt_json_str(w, "param", ""));
    int strat = dt_streq(k, "use") || dt_streq(k, "avoid");
    for (int i = cJSON_GetArraySize(r->wishes) - 1; i >= 0; i--) {
        const cJSON *o = cJSON_GetArrayItem(r->wishes, i);
        const char *ok = dt_json_str(o, "kind", "");
        const char *os = dt_json_str(o, "strategy", dt_json_str(o, "param", ""));
        int ostrat = dt_streq(ok, "use") || dt_streq(ok, "avoid");
        if ((dt_streq(ok, k) && dt_streq(os, subj)) || (strat && ostrat && dt_streq(os, subj)) ||
            (dt_streq(k, "use") && dt_streq(ok, "use")))
            cJSON_DeleteItemFromArray(r->wishes, i);
    }
    cJSON_AddItemToArray(r->wishes, w);
}

static cJSON *wish(const char *kind, const char *said)
{
    cJSON *w = dt_json_obj();
    dt_json_set_str(w, "kind", kind);
    dt_json_set_str(w, "said", said);
    return w;
}

/* The parameter names of the candidates' spaces (union). Caller frees. */
static cJSON *param_names(const ag_run *r)
{
    cJSON *names = dt_json_arr();
    const cJSON *c, *p;
    cJSON_ArrayForEach(c, r->candidates)
    {
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(c, "space"))
        {
            int have = 0;
            const cJSON *n;
            cJSON_ArrayForEach(n, names)
                have |= dt_streq(n->valuestring, p->string);
            if (!have)
                cJSON_AddItemToArray(names, cJSON_CreateString(p->string));
        }
    }
    return names;
}

/* The value of a parameter in the latest plan, or -1. */
static double current_param(const ag_run *r, const char *name)
{
    for (int i = r->nsteps - 1; i >= 0; i--) {
        const ag_step *s = r->steps[i];
        if (s->kind == AG_PLAN && s->artifact && cJSON_GetObjectItem(s->artifact, "params"))
            return dt_json_num(cJSON_GetObjectItem(s->artifact, "params"), name, -1);
    }
    return dt_json_num(cJSON_GetObjectItem(r->plan, "params"), name, -1);
}

static int read_num(const char **p, double *v)
{
    while (**p == ' ')
        (*p)++;
    char *end;
    double x = strtod(*p, &end);
    if (end == *p || !(*p[0] >= '0' && *p[0] <= '9'))
        return -1;
    *p = end;
    *v = x;
    return 0;
}

static int eat(const char **p, const char *w)
{
    const char *q = *p;
    while (*q == ' ')
        q++;
    size_t n = strlen(w);
    if (strncmp(q, w, n) != 0)
        return 0;
    *p = q + n;
    return 1;
}

/* A parameter wish from the text after the parameter's name, or from a
 * comparative before it. 1 when one was found (lo, hi set). */
static int param_range(const char *text, const char *at, size_t n, double cur, double *lo,
                       double *hi)
{
    const char *p = at + n;
    double a, b;
    *lo = -1e300;
    *hi = 1e300;
    if (eat(&p, "<=") || eat(&p, "at most") || eat(&p, "no more than") || eat(&p, "up to")) {
        if (read_num(&p, hi) == 0)
            return 1;
    } else if (eat(&p, "<") || eat(&p, "below") || eat(&p, "under") || eat(&p, "less than") ||
               eat(&p, "smaller than")) {
        if (read_num(&p, &a) == 0) {
            *hi = a - 1;
            return 1;
        }
    } else if (eat(&p, ">=") || eat(&p, "at least") || eat(&p, "no less than")) {
        if (read_num(&p, lo) == 0)
            return 1;
    } else if (eat(&p, ">") || eat(&p, "above") || eat(&p, "over") || eat(&p, "more than") ||
               eat(&p, "larger than") || eat(&p, "greater than")) {
        if (read_num(&p, &a) == 0) {
            *lo = a + 1;
            return 1;
        }
    } else if (eat(&p, "between") || eat(&p, "from") || eat(&p, "in [") || eat(&p, "in")) {
        if (read_num(&p, &a) == 0 &&
            (eat(&p, "and") || eat(&p, "to") || eat(&p, "..") || eat(&p, ",") || eat(&p, "-")) &&
            read_num(&p, &b) == 0) {
            *lo = a < b ? a : b;
            *hi = a < b ? b : a;
            return 1;
        }
    } else {
        (void)(eat(&p, "=") || eat(&p, ":") || eat(&p, "of") || eat(&p, "to") || eat(&p, "at") ||
               eat(&p, "be"));
        (void)(eat(&p, "=") || eat(&p, "to"));
        if (read_num(&p, &a) == 0) {
            if (eat(&p, "..") || eat(&p, "-")) {
                if (read_num(&p, &b) == 0) {
                    *lo = a < b ? a : b;
                    *hi = a < b ? b : a;
                    return 1;
                }
            }
            *lo = *hi = a;
            return 1;
        }
    }
    /* "smaller BLOCK", "a larger block" */
    const char *from = at - 12 > text ? at - 12 : text;
    char before[16];
    snprintf(before, sizeof before, "%.*s", (int)(at - from), from);
    if (cur > 0 && (strstr(before, "smaller") || strstr(before, "lower") || strstr(before, "less") ||
                    strstr(before, "fewer") || strstr(before, "reduce"))) {
        *hi = cur - 1;
        return 1;
    }
    if (cur > 0 && (strstr(before, "larger") || strstr(before, "bigger") ||
                    strstr(before, "higher") || strstr(before, "more") ||
                    strstr(before, "increase"))) {
        *lo = cur + 1;
        return 1;
    }
    return 0;
}

static void say_range(dt_buf *b, const char *name, double lo, double hi)
{
    if (lo == hi)
        dt_buf_printf(b, "%s = %g", name, lo);
    else if (lo <= -1e300)
        dt_buf_printf(b, "%s <= %g", name, hi);
    else if (hi >= 1e300)
        dt_buf_printf(b, "%s >= %g", name, lo);
    else
        dt_buf_printf(b, "%s in [%g, %g]", name, lo, hi);
}

/* The register count of the latest compiled kernel, or 0. */
static int last_registers(const ag_run *r)
{
    for (int i = r->nsteps - 1; i >= 0; i--) {
        const ag_step *s = r->steps[i];
        if (s->kind != AG_COMPILE || s->artifact == NULL)
            continue;
        const cJSON *k = cJSON_GetArrayItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(s->artifact, "nvrtc"), "kernels"), 0);
        if (k)
            return (int)dt_json_num(k, "registers", 0);
    }
    return 0;
}

/* A register cap the text names, or 0: "maxrregcount=64", "registers <= 64",
 * "registers to 64", "at most 64 registers", "max 64 registers", "under 64
 * registers" (63). A count without such a word ("it uses 128 registers")
 * names no cap. */
static int said_register_cap(const char *t)
{
    double v;
    const char *at = strstr(t, "maxrregcount");
    if (at) {
        const char *p = at + strlen("maxrregcount");
        if (!eat(&p, "="))
            eat(&p, ":");
        if (read_num(&p, &v) == 0)
            return (int)v;
    }
    static const char *le[] = {"<=", "at most",   "no more than", "up to", "to",
                               "=",  "capped at", "cap of",       "max"};
    static const char *lt[] = {"<", "below", "under", "less than", "fewer than"};
    for (at = strstr(t, "register"); at; at = strstr(at + 1, "register")) {
        /* after: "registers <= 64", "registers per thread to 64" */
        const char *p = at + strlen("register");
        if (*p == 's')
            p++;
        eat(&p, "per thread");
        int strict = -1;
        for (size_t i = 0; i < DT_ARRAY_LEN(le) && strict < 0; i++)
            if (eat(&p, le[i]))
                strict = 0;
        for (size_t i = 0; i < DT_ARRAY_LEN(lt) && strict < 0; i++)
            if (eat(&p, lt[i]))
                strict = 1;
        if (strict >= 0 && read_num(&p, &v) == 0)
            return (int)v - strict;
        /* before: "at most 64 registers", "under 64 registers" */
        const char *e = at;
        while (e > t && e[-1] == ' ')
            e--;
        const char *num = e;
        while (num > t && num[-1] >= '0' && num[-1] <= '9')
            num--;
        if (num == e)
            continue;
        const char *w = num;
        while (w > t && w[-1] == ' ')
            w--;
        for (size_t i = 0; i < DT_ARRAY_LEN(le) + DT_ARRAY_LEN(lt); i++) {
            const char *word = i < DT_ARRAY_LEN(le) ? le[i] : lt[i - DT_ARRAY_LEN(le)];
            size_t n = strlen(word);
            if ((size_t)(w - t) >= n && strncmp(w - n, word, n) == 0 &&
                (w - n == t || !word_char(w[-(long)n - 1]) || !word_char(word[0])))
                return atoi(num) - (i >= DT_ARRAY_LEN(le));
        }
    }
    return 0;
}

int ag_wishes_from_reason(ag_run *r, ag_kind k, const char *reason)
{
    if (reason == NULL || *reason == '\0')
        return 0;
    int level = 0; /* 1: parameters or registers only; 2: the strategy too */
    char said[600];
    snprintf(said, sizeof said, "%s", reason);
    char *t = dt_xstrdup(reason);
    lower(t);
    dt_buf got = DT_BUF_INIT;
    int n0 = cJSON_GetArraySize(r->wishes), acted = 0;
    /* strategy and template names, longest first so that "csr16-stream" is
     * not read as "csr16" */
    int nc = cJSON_GetArraySize(r->candidates);
    char *taken = dt_xcalloc(strlen(t) + 1, 1);
    for (int pass = 0; pass < 2; pass++) {
        for (int len = 64; len > 1; len--) {
            for (int i = 0; i < nc; i++) {
                const cJSON *c = cJSON_GetArrayItem(r->candidates, i);
                char name[128];
                if (pass == 0) {
                    snprintf(name, sizeof name, "%s", dt_json_str(c, "strategy", ""));
                } else {
                    /* the template's file name: kernels/spmv_merge_path.cu -> spmv_merge_path */
                    const char *tp = dt_json_str(c, "template", "");
                    const char *b = strrchr(tp, '/');
                    snprintf(name, sizeof name, "%s", b ? b + 1 : tp);
                    char *dot = strstr(name, ".cu");
                    if (dot)
                        *dot = '\0';
                }
                lower(name);
                if ((int)strlen(name) != len)
                    continue;
                for (int sp = 0; sp < 2; sp++) {
                    char alt[128];
                    snprintf(alt, sizeof alt, "%s", name);
                    if (sp == 1) { /* "merge path" for merge-path */
                        int changed = 0;
                        for (char *x = alt; *x; x++)
                            if (*x == '-') {
                                *x = ' ';
                                changed = 1;
                            }
                        if (!changed)
                            continue;
                    }
                    const char *at = find_word(t, alt);
                    if (at == NULL || taken[at - t])
                        continue;
                    memset(taken + (at - t), 1, strlen(alt));
                    const char *strat = dt_json_str(c, "strategy", "");
                    cJSON *w = wish(negated(t, at) ? "avoid" : "use", said);
                    dt_json_set_str(w, "strategy", strat);
                    level = 2;
                    dt_buf_printf(&got, "  %s strategy %s\n",
                                  dt_streq(dt_json_str(w, "kind", ""), "use") ? "use" : "do not use",
                                  strat);
                    add_wish(r, w);
                }
            }
        }
    }
    /* parameters */
    cJSON *names = param_names(r);
    const cJSON *nm;
    cJSON_ArrayForEach(nm, names)
    {
        char ln[64];
        snprintf(ln, sizeof ln, "%s", nm->valuestring);
        lower(ln);
        const char *at = find_word(t, ln);
        if (at == NULL || taken[at - t])
            continue;
        double lo, hi;
        if (!param_range(t, at, strlen(ln), current_param(r, nm->valuestring), &lo, &hi))
            continue;
        cJSON *w = wish("param", said);
        dt_json_set_str(w, "param", nm->valuestring);
        dt_json_set_num(w, "lo", lo);
        dt_json_set_num(w, "hi", hi);
        if (level < 1)
            level = 1;
        dt_buf_puts(&got, "  ");
        say_range(&got, nm->valuestring, lo, hi);
        dt_buf_puts(&got, "\n");
        add_wish(r, w);
    }
    cJSON_Delete(names);
    /* resources and direction */
    const char *at;
    if ((at = strstr(t, "atomic")) != NULL && complaint(t, at)) {
        add_wish(r, wish("no-atomics", said));
        level = 2;
        dt_buf_puts(&got, "  no template that uses atomics\n");
    }
    if ((((at = strstr(t, "shared mem")) != NULL || (at = strstr(t, "smem")) != NULL ||
          (at = strstr(t, "__shared__")) != NULL) &&
         complaint(t, at))) {
        add_wish(r, wish("no-smem", said));
        level = 2;
        dt_buf_puts(&got, "  no template that uses shared memory\n");
    }
    int named_cap = said_register_cap(t);
    if ((strstr(t, "register") &&
         (strstr(t, "fewer") || strstr(t, "less") || strstr(t, "lower") || strstr(t, "reduce") ||
          strstr(t, "pressure") || strstr(t, "too many"))) ||
        named_cap > 0) {
        int regs = last_registers(r);
        int cap = regs > 0 ? (regs * 3 / 4) / 8 * 8 : 32;
        if (named_cap > 0)
            cap = named_cap; /* the person's number, not ours */
        /* NVRTC's range for --maxrregcount; outside it, said below */
        int asked = cap;
        if (cap < 16)
            cap = 16;
        if (cap > 255)
            cap = 255;
        free(r->kernel_option);
        r->kernel_option = dt_xasprintf("--maxrregcount=%d", cap);
        if (level < 1)
            level = 1;
        cJSON *w = wish("fewer-registers", said);
        dt_json_set_int(w, "cap", cap);
        add_wish(r, w);
        if (named_cap > 0 && asked != cap)
            dt_buf_printf(&got,
                          "  NVRTC caps registers at %d per thread (you named %d; a cap "
                          "must lie in [16, 255])\n",
                          cap, asked);
        else if (named_cap > 0)
            dt_buf_printf(&got, "  NVRTC caps registers at %d per thread, as you named\n", cap);
        else if (regs > 0)
            dt_buf_printf(&got, "  NVRTC caps registers at %d per thread (the last kernel used %d)\n",
                          cap, regs);
        else
            dt_buf_printf(&got, "  NVRTC caps registers at %d per thread (nothing compiled yet)\n",
                          cap);
    }
    if (strstr(t, "faster") || strstr(t, "too slow") || strstr(t, "quicker") ||
        strstr(t, "speed up")) {
        add_wish(r, wish("faster", said));
        level = 2;
        r->tune_requested = 1;
        dt_buf_puts(&got, "  the highest-scored candidate left, and the tuner after measuring\n");
    }
    if (strstr(t, "simpler") || strstr(t, "simple") || strstr(t, "less complex") ||
        strstr(t, "too complex") || strstr(t, "easier")) {
        add_wish(r, wish("simpler", said));
        level = 2;
        dt_buf_puts(&got, "  the shortest template left first\n");
    }
    acted = got.len > 0 || cJSON_GetArraySize(r->wishes) != n0;
    if (acted) {
        dt_buf_printf(&r->news, "Because you said \"%s\" (at the %s review), from now on:\n%s", said,
                      ag_kind_name(k), got.data);
    } else {
        dt_buf_printf(&r->news,
                      "I cannot act on \"%s\" (at the %s review): I understand strategy or "
                      "template names (",
                      said, ag_kind_name(k));
        for (int i = 0; i < nc && i < 12; i++)
            dt_buf_printf(&r->news, "%s%s", i ? ", " : "",
                          dt_json_str(cJSON_GetArrayItem(r->candidates, i), "strategy", ""));
        dt_buf_puts(&r->news, "), parameter values or ranges (\"BLOCK 128\", \"BLOCK <= 256\", "
                              "\"smaller BLOCK\"), \"no atomics\", \"no shared memory\", \"fewer "
                              "registers\" (or \"at most 64 registers\"), \"faster\" and "
                              "\"simpler\". The reason stays in the "
                              "feedback");
        dt_buf_puts(&r->news, k == AG_PLAN ? "; the rejected strategy is set aside.\n" : ".\n");
    }
    if (acted && level == 1 && k == AG_PLAN)
        dt_buf_puts(&r->news, "(Only parameters were asked for: the same strategy stays, with them.)\n");
    dt_buf_free(&got);
    free(taken);
    free(t);
    return level;
}

void ag_wishes_show(ag_run *r, ag_step *s)
{
    if (cJSON_GetArraySize(r->wishes) == 0)
        return;
    ag_text(r, s, "What reviewers asked, kept for this session:\n");
    const cJSON *w;
    cJSON_ArrayForEach(w, r->wishes)
    {
        const char *k = dt_json_str(w, "kind", "");
        dt_buf b = DT_BUF_INIT;
        if (dt_streq(k, "use"))
            dt_buf_printf(&b, "use %s", dt_json_str(w, "strategy", ""));
        else if (dt_streq(k, "avoid"))
            dt_buf_printf(&b, "not %s", dt_json_str(w, "strategy", ""));
        else if (dt_streq(k, "param"))
            say_range(&b, dt_json_str(w, "param", ""), dt_json_num(w, "lo", 0),
                      dt_json_num(w, "hi", 0));
        else if (dt_streq(k, "no-atomics"))
            dt_buf_puts(&b, "no atomics");
        else if (dt_streq(k, "no-smem"))
            dt_buf_puts(&b, "no shared memory");
        else if (dt_streq(k, "fewer-registers"))
            dt_buf_printf(&b, "at most %d registers per thread (--maxrregcount)",
                          (int)dt_json_num(w, "cap", 0));
        else
            dt_buf_puts(&b, k);
        ag_text(r, s, "  because you said \"%s\": %s\n", dt_json_str(w, "said", ""), b.data);
        dt_buf_free(&b);
    }
}

static int uses_atomics(const char *code)
{
    for (const char *p = strstr(code, "atomic"); p; p = strstr(p + 1, "atomic")) {
        if (p > code && word_char(p[-1]))
            continue;
        if (p[6] >= 'A' && p[6] <= 'Z') {
            const char *q = p + 6;
            while (word_char(*q))
                q++;
            while (*q == ' ')
                q++;
            if (*q == '(')
                return 1;
        }
    }
    return 0;
}

int ag_wishes_refuse(ag_run *r, const char *src, char *why, size_t len)
{
    char *code = dt_code_only(src);
    int bad = 0;
    const cJSON *w;
    cJSON_ArrayForEach(w, r->wishes)
    {
        const char *k = dt_json_str(w, "kind", "");
        if (!bad && dt_streq(k, "no-atomics") && uses_atomics(code)) {
            snprintf(why, len, "it uses atomics, and you said \"%s\"", dt_json_str(w, "said", ""));
            bad = 1;
        }
        if (!bad && dt_streq(k, "no-smem") && strstr(code, "__shared__")) {
            snprintf(why, len, "it uses shared memory, and you said \"%s\"",
                     dt_json_str(w, "said", ""));
            bad = 1;
        }
    }
    free(code);
    return bad;
}

/* ---- choosing a candidate ------------------------------------------------------------------ */

static int is_dropped(const ag_run *r, const char *strat)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, r->dropped)
        if (dt_streq(d->valuestring, strat))
            return 1;
    return 0;
}

void ag_drop_strategy(ag_run *r, const char *strat, const char *why)
{
    if (strat == NULL || *strat == '\0' || is_dropped(r, strat))
        return;
    cJSON_AddItemToArray(r->dropped, cJSON_CreateString(strat));
    /* a wish to use it is spent once it failed or was rejected */
    for (int i = cJSON_GetArraySize(r->wishes) - 1; i >= 0; i--) {
        const cJSON *w = cJSON_GetArrayItem(r->wishes, i);
        if (dt_streq(dt_json_str(w, "kind", ""), "use") &&
            dt_streq(dt_json_str(w, "strategy", ""), strat)) {
            dt_buf_printf(&r->news, "%s, which you asked for, is set aside (%s): that wish is "
                                    "spent.\n",
                          strat, why ? why : "");
            cJSON_DeleteItemFromArray(r->wishes, i);
        }
    }
}

int ag_candidates_left(const ag_run *r)
{
    int n = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, r->candidates)
        n += !is_dropped(r, dt_json_str(c, "strategy", ""));
    return n;
}

static const cJSON *find_wish(const ag_run *r, const char *kind)
{
    const cJSON *w, *found = NULL;
    cJSON_ArrayForEach(w, r->wishes)
        if (dt_streq(dt_json_str(w, "kind", ""), kind))
            found = w;
    return found;
}

static char *template_text(const cJSON *c)
{
    char *path = dt_share_path(dt_json_str(c, "template", ""));
    char *src = path ? dt_read_file(path, NULL, NULL) : NULL;
    free(path);
    return src;
}

/* Whether candidate c can satisfy every wish; why says which one it breaks. */
static int candidate_fits(ag_run *r, const cJSON *c, char *why, size_t len)
{
    const char *strat = dt_json_str(c, "strategy", "");
    const cJSON *w;
    cJSON_ArrayForEach(w, r->wishes)
    {
        if (dt_streq(dt_json_str(w, "kind", ""), "avoid") &&
            dt_streq(dt_json_str(w, "strategy", ""), strat)) {
            snprintf(why, len, "you said \"%s\"", dt_json_str(w, "said", ""));
            return 0;
        }
        if (dt_streq(dt_json_str(w, "kind", ""), "param")) {
            const cJSON *vals = cJSON_GetObjectItem(cJSON_GetObjectItem(c, "space"),
                                                    dt_json_str(w, "param", ""));
            if (vals == NULL)
                continue;
            int any = 0;
            const cJSON *v;
            cJSON_ArrayForEach(v, vals)
                any |= v->valuedouble >= dt_json_num(w, "lo", 0) &&
                       v->valuedouble <= dt_json_num(w, "hi", 0);
            if (!any) {
                snprintf(why, len, "no legal %s fits \"%s\"", dt_json_str(w, "param", ""),
                         dt_json_str(w, "said", ""));
                return 0;
            }
        }
    }
    char *src = template_text(c);
    int ok = src == NULL || !ag_wishes_refuse(r, src, why, len);
    free(src);
    return ok;
}

/* The candidate the wishes and the ranking pick, or -1 (why says why). */
static int choose_candidate(ag_run *r, ag_step *s, char *why, size_t len)
{
    int n = cJSON_GetArraySize(r->candidates);
    const cJSON *use = find_wish(r, "use");
    if (use) {
        const char *want = dt_json_str(use, "strategy", "");
        for (int i = 0; i < n; i++) {
            const cJSON *c = cJSON_GetArrayItem(r->candidates, i);
            if (!dt_streq(dt_json_str(c, "strategy", ""), want))
                continue;
            char w2[300];
            if (!candidate_fits(r, c, w2, sizeof w2))
                ag_text(r, s, "You asked for %s, though it breaks another wish (%s): your named "
                              "strategy wins.\n",
                        want, w2);
            return i;
        }
    }
    int simpler = find_wish(r, "simpler") != NULL;
    int best = -1;
    size_t best_len = 0;
    for (int i = 0; i < n; i++) {
        const cJSON *c = cJSON_GetArrayItem(r->candidates, i);
        const char *strat = dt_json_str(c, "strategy", "");
        if (is_dropped(r, strat))
            continue;
        char w2[300];
        if (!candidate_fits(r, c, w2, sizeof w2)) {
            ag_text(r, s, "  %s left out: %s.\n", strat, w2);
            continue;
        }
        if (!simpler)
            return i;
        char *src = template_text(c);
        size_t l = src ? strlen(src) : (size_t)-1;
        free(src);
        if (best < 0 || l < best_len) {
            best = i;
            best_len = l;
        }
    }
    if (best < 0)
        snprintf(why, len, "no template candidate left for this problem: %d of %d were rejected "
                           "or failed, the rest break what reviewers asked",
                 cJSON_GetArraySize(r->dropped), n);
    return best;
}

/* Apply the parameter wishes to a plan (and its candidate's space, which
 * the tuner searches). */
static void plan_apply_params(ag_run *r, ag_step *s, cJSON *plan, cJSON *cand)
{
    const cJSON *w;
    cJSON_ArrayForEach(w, r->wishes)
    {
        if (!dt_streq(dt_json_str(w, "kind", ""), "param"))
            continue;
        const char *name = dt_json_str(w, "param", "");
        double lo = dt_json_num(w, "lo", 0), hi = dt_json_num(w, "hi", 0);
        cJSON *space = cJSON_GetObjectItem(plan, "space");
        const cJSON *vals = cJSON_GetObjectItem(space, name);
        if (vals == NULL) {
            ag_text(r, s, "  (%s is not a parameter of %s: \"%s\" does not apply to it)\n", name,
                    dt_json_str(plan, "strategy", ""), dt_json_str(w, "said", ""));
            continue;
        }
        cJSON *keep = dt_json_arr();
        const cJSON *v;
        cJSON_ArrayForEach(v, vals)
            if (v->valuedouble >= lo && v->valuedouble <= hi)
                cJSON_AddItemToArray(keep, cJSON_CreateNumber(v->valuedouble));
        if (cJSON_GetArraySize(keep) == 0) {
            char *legal = dt_json_print(vals, 0);
            ag_text(r, s, "  I cannot honour \"%s\" for %s: no legal %s in that range (legal: %s).\n",
                    dt_json_str(w, "said", ""), dt_json_str(plan, "strategy", ""), name, legal);
            free(legal);
            cJSON_Delete(keep);
            continue;
        }
        double cur = dt_json_num(cJSON_GetObjectItem(plan, "params"), name, 0);
        double pick = cJSON_GetArrayItem(keep, 0)->valuedouble;
        cJSON_ArrayForEach(v, keep)
            if (v->valuedouble == cur)
                pick = cur;
        /* "smaller": the largest value below; "larger": the smallest above */
        if (lo <= -1e300 && hi < 1e300 && pick != cur)
            pick = cJSON_GetArrayItem(keep, cJSON_GetArraySize(keep) - 1)->valuedouble;
        dt_json_set_num(cJSON_GetObjectItem(plan, "params"), name, pick);
        if (cand)
            dt_json_set_take(cJSON_GetObjectItem(cand, "space"), name, cJSON_Duplicate(keep, 1));
        dt_json_set_take(space, name, keep);
        char *ks = dt_json_print(cJSON_GetObjectItem(space, name), 0);
        ag_text(r, s, "  because you said \"%s\": %s = %g, the tuner keeps to %s\n",
                dt_json_str(w, "said", ""), name, pick, ks);
        free(ks);
    }
}

/* ---- spaces from hooks ------------------------------------------------------------------------- */

void ag_narrow_spaces(ag_run *r, ag_step *s)
{
    if (r->o.spaces == NULL)
        return;
    cJSON *all = r->o.spaces(r, r->o.hook_ud);
    const cJSON *st;
    cJSON_ArrayForEach(st, all)
    {
        cJSON *cand = NULL;
        cJSON *c;
        cJSON_ArrayForEach(c, r->candidates)
            if (dt_streq(dt_json_str(c, "strategy", ""), st->string))
                cand = c;
        if (cand == NULL) {
            if (s)
                ag_text(r, s, "ditto.param_space names %s, which is no candidate here.\n",
                        st->string);
            continue;
        }
        const cJSON *p;
        cJSON_ArrayForEach(p, st)
        {
            cJSON *legal = cJSON_GetObjectItem(cJSON_GetObjectItem(cand, "space"), p->string);
            if (legal == NULL) {
                if (s)
                    ag_text(r, s, "ditto.param_space: %s has no parameter %s: ignored.\n",
                            st->string, p->string);
                continue;
            }
            cJSON *keep = dt_json_arr();
            const cJSON *v, *l;
            cJSON_ArrayForEach(v, p)
                cJSON_ArrayForEach(l, legal)
                    if (cJSON_IsNumber(v) && v->valuedouble == l->valuedouble)
                        cJSON_AddItemToArray(keep, cJSON_CreateNumber(v->valuedouble));
            char *ks = dt_json_print(p, 0), *ls = dt_json_print(legal, 0);
            if (cJSON_GetArraySize(keep) == 0) {
                if (s)
                    ag_text(r, s, "ditto.param_space: %s %s %s has no legal value (legal: %s): "
                                  "ignored.\n",
                            st->string, p->string, ks, ls);
                cJSON_Delete(keep);
            } else {
                if (s)
                    ag_text(r, s, "ditto.param_space (a hook) narrows %s %s from %s to %s.\n",
                            st->string, p->string, ls, ks);
                double cur = dt_json_num(cJSON_GetObjectItem(cand, "params"), p->string, 0);
                int in = 0;
                cJSON_ArrayForEach(v, keep)
                    in |= v->valuedouble == cur;
                if (!in)
                    dt_json_set_num(cJSON_GetObjectItem(cand, "params"), p->string,
                                    cJSON_GetArrayItem(keep, 0)->valuedouble);
                dt_json_set_take(cJSON_GetObjectItem(cand, "space"), p->string, keep);
            }
            free(ks);
            free(ls);
        }
    }
    cJSON_Delete(all);
}

/* ---- edits --------------------------------------------------------------------------------------- */

void ag_wish_from_plan_edit(ag_run *r, const cJSON *plan, int changed)
{
    if (changed) {
        cJSON *w = wish("use", "(your edit of the plan)");
        dt_json_set_str(w, "strategy", dt_json_str(plan, "strategy", ""));
        add_wish(r, w);
    }
    dt_buf_printf(&r->reasons, "- at the plan review: a person edited the plan to %s with %s\n",
                  dt_json_str(plan, "strategy", ""), "its parameters");
}

cJSON *ag_plan_rederive(ag_run *r, const cJSON *edited, dt_err *e)
{
    if (!cJSON_IsObject(edited)) {
        dt_err_set(e, "the edited plan is not a JSON object");
        return NULL;
    }
    const char *strat = dt_json_str(edited, "strategy", NULL);
    const char *tpl = dt_json_str(edited, "template", NULL);
    const char *old_strat = dt_json_str(r->cur ? r->cur->artifact : NULL, "strategy", "");
    const char *old_tpl = dt_json_str(r->cur ? r->cur->artifact : NULL, "template", "");
    const cJSON *by_s = NULL, *by_t = NULL, *c;
    int idx_s = -1, idx_t = -1, i = 0;
    cJSON_ArrayForEach(c, r->candidates)
    {
        if (strat && dt_streq(dt_json_str(c, "strategy", ""), strat)) {
            by_s = c;
            idx_s = i;
        }
        if (tpl && dt_streq(dt_json_str(c, "template", ""), tpl)) {
            by_t = c;
            idx_t = i;
        }
        i++;
    }
    int s_changed = strat && !dt_streq(strat, old_strat);
    int t_changed = tpl && !dt_streq(tpl, old_tpl);
    const cJSON *cand = NULL;
    int idx = -1;
    if (s_changed && t_changed && by_s && by_t && by_s != by_t) {
        dt_err_set(e, "strategy %s and template %s disagree (%s is %s's template): change one of "
                      "them",
                   strat, tpl, dt_json_str(by_s, "template", ""), strat);
        return NULL;
    }
    if (s_changed) {
        cand = by_s;
        idx = idx_s;
    } else if (t_changed) {
        cand = by_t;
        idx = idx_t;
    } else {
        cand = by_s ? by_s : by_t;
        idx = by_s ? idx_s : idx_t;
    }
    if (cand == NULL) {
        dt_buf names = DT_BUF_INIT;
        cJSON_ArrayForEach(c, r->candidates)
            dt_buf_printf(&names, "%s%s", names.len ? ", " : "", dt_json_str(c, "strategy", ""));
        dt_err_set(e, "%s '%s' is not a template for %s %s here; the strategies are: %s",
                   s_changed || !t_changed ? "strategy" : "template",
                   s_changed || !t_changed ? (strat ? strat : "(missing)") : tpl,
                   sp_op_name(r->spec.op), sp_dtype_name(r->spec.dtype), names.data);
        dt_buf_free(&names);
        return NULL;
    }
    cJSON *plan = ag_plan_from_candidate(r, cand, e);
    if (plan == NULL)
        return NULL;
    dt_buf notes = DT_BUF_INIT;
    /* The contract is the template's: an edited one is refused, a stale one
     * (from the strategy before the edit) replaced. */
    const cJSON *ec = cJSON_GetObjectItem(edited, "contract");
    if (ec && !s_changed && !t_changed && !cJSON_Compare(ec, cJSON_GetObjectItem(plan, "contract"), 1)) {
        dt_err_set(e, "the launch contract is the template's (%s) and cannot be edited in the plan: "
                      "edit the kernel source at the generate review, or pick another strategy",
                   dt_json_str(plan, "template", ""));
        cJSON_Delete(plan);
        dt_buf_free(&notes);
        return NULL;
    }
    if (ec && (s_changed || t_changed))
        dt_buf_printf(&notes, "the contract is %s's own", dt_json_str(plan, "template", ""));
    /* Parameters: the edited ones that the template has, checked against its
     * manifest; names from the old strategy are dropped when it changed. */
    cJSON *params = cJSON_GetObjectItem(plan, "params");
    const cJSON *space = cJSON_GetObjectItem(plan, "space");
    const cJSON *p;
    cJSON_ArrayForEach(p, cJSON_GetObjectItem(edited, "params"))
    {
        if (cJSON_GetObjectItem(space, p->string) == NULL) {
            if (s_changed || t_changed) {
                dt_buf_printf(&notes, "%s%s is not a parameter of %s (dropped)", notes.len ? "; " : "",
                              p->string, dt_json_str(plan, "strategy", ""));
                continue;
            }
            dt_err_set(e, "$.params.%s: %s has no such parameter", p->string,
                       dt_json_str(plan, "strategy", ""));
            cJSON_Delete(plan);
            dt_buf_free(&notes);
            return NULL;
        }
        if (!cJSON_IsNumber(p)) {
            dt_err_set(e, "$.params.%s: expected an integer", p->string);
            cJSON_Delete(plan);
            dt_buf_free(&notes);
            return NULL;
        }
        dt_json_set_num(params, p->string, p->valuedouble);
    }
    dt_buf probs = DT_BUF_INIT;
    if (ag_plan_validate(r, plan, &probs) != 0) {
        dt_err_set(e, "the edited plan is invalid: %s", probs.data);
        dt_buf_free(&probs);
        cJSON_Delete(plan);
        dt_buf_free(&notes);
        return NULL;
    }
    dt_buf_free(&probs);
    /* A narrower space the person wrote, of legal values only, is kept. */
    const cJSON *es = cJSON_GetObjectItem(edited, "space");
    cJSON_ArrayForEach(p, es)
    {
        const cJSON *legal = cJSON_GetObjectItem(space, p->string);
        if (legal == NULL || !cJSON_IsArray(p) || cJSON_GetArraySize(p) == 0)
            continue;
        int ok = 1;
        const cJSON *v, *l;
        cJSON_ArrayForEach(v, p)
        {
            int in = 0;
            cJSON_ArrayForEach(l, legal)
                in |= cJSON_IsNumber(v) && v->valuedouble == l->valuedouble;
            ok &= in;
        }
        if (ok && !s_changed && !t_changed)
            dt_json_set_take(cJSON_GetObjectItem(plan, "space"), p->string, cJSON_Duplicate(p, 1));
    }
    r->cand_index = idx;
    ag_wish_from_plan_edit(r, plan, s_changed || t_changed);
    if (r->cur) {
        ag_text(r, r->cur, "\nYour edit is used: %s (%s) re-derived from %s%s%s.\n",
                dt_json_str(plan, "strategy", ""), dt_json_str(plan, "summary", ""),
                dt_json_str(plan, "template", ""), notes.len ? "; " : "", dt_buf_str(&notes));
    }
    dt_json_set_str(plan, "edited_note", notes.len ? notes.data : NULL);
    dt_buf_free(&notes);
    return plan;
}
