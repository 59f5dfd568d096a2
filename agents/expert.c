/* expert.c -- the expert backend: features of a matrix for the knowledge
 * base's rules, the ranking of kernel templates by the approved rules that
 * fire, plans built from the ranking, template instantiation, hints for
 * compiler messages, and the librarian's knowledge-base proposal. No
 * network: every decision names the rule behind it. */
#include "agents/internal.h"
#include "gpu/contract.h"
#include "knowledge/knowledge.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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
    int max_values; /* its contract's requires.max_values, -1 when none */
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
                gpu_contract c;
                if (gpu_contract_from_source(src, &c, NULL) == 0) {
                    (*out)[*n].max_values = dt_json_int(c.requires, "max_values", -1);
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
    int nc = 0;
    double nvals = dt_json_num(features, "distinct_values", SP_DISTINCT_CAP + 1);
    for (int i = 0; i < nt; i++) {
        gpu_manifest *m = &ts[i].m;
        /* A template whose contract refuses the matrix is no candidate: a
         * value dictionary on a matrix of more values than it holds. */
        if (ts[i].max_values >= 0 && nvals > ts[i].max_values)
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
        const cJSON *r;
        cJSON_ArrayForEach(r, rules)
        {
            if (dt_json_num(r, "distance", 1) != 0)
                continue; /* only rules whose feature ranges hold fire */
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
    }
    const char *fb = dt_json_str(s->inputs, "feedback", NULL);
    if (fb)
        ag_text(r, s, "Feedback from the last attempt:\n%s", fb);
    int n = cJSON_GetArraySize(r->candidates);
    if (r->cand_index >= n) {
        ag_complete(r, s, NULL, 0, "no template candidate left for this problem");
        return;
    }
    const cJSON *c = cJSON_GetArrayItem(r->candidates, r->cand_index);
    cJSON *plan = ag_plan_from_candidate(r, c, &e);
    if (plan == NULL) {
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
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
    ag_text(r, s, "Decision: %s (%s), candidate %d of %d.\n", dt_json_str(plan, "strategy", ""),
            dt_json_str(plan, "summary", ""), r->cand_index + 1, n);
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
    for (int i = r->cand_index + 1; i < n && i <= r->cand_index + 3; i++) {
        const cJSON *a = cJSON_GetArrayItem(r->candidates, i);
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

/* The expert cannot rewrite code: after a failure of this version it moves
 * to another point of the plan's space it has not generated yet. */
static cJSON *next_params(ag_run *r)
{
    const cJSON *space = cJSON_GetObjectItem(r->plan, "space");
    const cJSON *cur = cJSON_GetObjectItem(r->plan, "params");
    int tried = r->plan_generates - 1; /* this attempt is number plan_generates */
    /* Walk the space in mixed-radix order and take the tried-th point that
     * differs from the plan's own params. */
    int nparams = cJSON_GetArraySize(space);
    if (nparams == 0)
        return NULL;
    int idx[GPU_MAX_MPARAMS] = {0};
    int count = 0;
    for (;;) {
        cJSON *cand = dt_json_obj();
        int i = 0;
        const cJSON *p;
        int same = 1;
        cJSON_ArrayForEach(p, space)
        {
            double v = cJSON_GetArrayItem(p, idx[i])->valuedouble;
            dt_json_set_num(cand, p->string, v);
            same &= dt_json_num(cur, p->string, v) == v;
            i++;
        }
        if (!same && ++count == tried)
            return cand;
        cJSON_Delete(cand);
        /* increment */
        i = 0;
        cJSON_ArrayForEach(p, space)
        {
            if (++idx[i] < cJSON_GetArraySize(p))
                break;
            idx[i] = 0;
            i++;
        }
        if (i == nparams)
            return NULL;
    }
}

void ag_expert_generate(ag_run *r, ag_step *s)
{
    const char *fb = dt_json_str(s->inputs, "feedback", NULL);
    cJSON *params = NULL;
    if (fb && r->plan_generates > 1) {
        ag_text(r, s, "Feedback on the previous version:\n%s", fb);
        params = next_params(r);
        if (params == NULL) {
            ag_complete(r, s, NULL, 0,
                        "the expert backend instantiates templates and cannot repair one; no "
                        "untried parameters are left for this template");
            return;
        }
        ag_text(r, s, "The expert backend does not rewrite code: trying other parameters of the "
                      "same template.\n");
    } else {
        params = cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "params"), 1);
    }
    dt_err e = {0};
    char *src = ag_instantiate(dt_json_str(r->plan, "template", ""), params, &e);
    if (src == NULL) {
        cJSON_Delete(params);
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
    char *ps = dt_json_print(params, 0);
    ag_text(r, s, "Instantiated %s with %s: parameters become #defines at the top; the launch "
                  "contract and the template body are kept as written.\n",
            dt_json_str(r->plan, "template", ""), ps);
    free(ps);
    /* The params in effect go into the plan so compile/verify/measure bind
     * the same values. */
    dt_json_set_take(r->plan, "params", cJSON_Duplicate(params, 1));
    cJSON *art = dt_json_obj();
    dt_json_set_str(art, "source", src);
    dt_json_set_take(art, "params", params);
    dt_json_set_str(art, "template", dt_json_str(r->plan, "template", ""));
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
