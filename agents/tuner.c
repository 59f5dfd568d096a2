/* tuner.c -- successive halving over kernel parameter spaces through the
 * worker pool: cheap timings for every variant, the full verification
 * battery and a full measurement next to cuSPARSE for the survivors, and a
 * cache of results by matrix, problem, GPU and template.
 * Over 1,000 lines: the stages share one variant table and one pump; split,
 * each part would reach into the others' state. */
#include "agents/internal.h"
#include "gpu/contract.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct variant {
    int strategy;     /* index into strategies */
    cJSON *params;
    char *source;
    double quick_us;  /* stage 1; <= 0 when it failed */
    char *error;
    int finalist;
    int s2;           /* stage 2: 0 to verify, 1 verifying, 2 to measure, 3 measuring, 4 done */
    int verified;     /* -1 not run */
    cJSON *measure;   /* stage 2 reply (no baseline) */
    int winner;       /* its strategy's winner: 1 measured again with the baseline,
                       * 2 not compared (its full time far behind: compare_winners) */
    cJSON *final;     /* that measurement, with the cuSPARSE comparison */
    int reserve;      /* 1: held back, measured only in place of a variant found
                       * to be the same kernel as an earlier one */
    int same_as;      /* -1, or the earlier variant it turned out to be */
    char *key;        /* the worker's kernel_key (CUBIN, launch, format) */
    int round;        /* 0: chosen before any timing; r > 0: by refinement round r */
    int compiled;     /* -1 not yet; 0 failed; 1 compiled (the compile stage's answer) */
    int worker;       /* the worker of its last answer, -1 */
    int timeouts;     /* compiles of it that hung past their deadline */
    cJSON *checks;    /* compile-only: registers, spills and static-rule findings */
} variant;

typedef struct strat {
    cJSON *cand;      /* borrowed from the candidates copy */
    int cached;       /* its variant is a cached winner: no search */
    int around;       /* the variant the last refinement round moved from, -1 */
} strat;

/* Every variant of strategy si (refinement appends variants at the end, so
 * a strategy's variants are not one contiguous run). */
#define FOR_STRAT_VARIANTS(t, si, it)                                                              \
    for (variant *it = (t)->v; it < (t)->v + (t)->nv; it++)                                        \
        if (it->strategy != (si)) {                                                                \
        } else

struct ag_tuner {
    ag_tune_opts o;
    cJSON *cands;     /* owned copy */
    strat *st;
    int nst;
    variant *v;
    int nv, capv;
    int stage;        /* 0 precompile, 1 quick, 2 finalists, 3 winners vs cuSPARSE, 4 done */
    int inflight;
    int next;         /* next variant to submit in the stage */
    double t0;
    int done;
    int freeing;
    long *ids;        /* every request submitted, to cancel on free: a reply */
    int nids, capids; /* after the free would reach freed memory */
    int round;        /* refinement rounds done */
    int round_from;   /* the first variant of the latest round (0 before any) */
    char cache_path[4096];
    int cached;
    /* widening: cuSPARSE's time from the first quick timing (asked only
     * when there are strategies to widen to), the next of o.more to add */
    int base_asked;
    double base_us;
    char base_alg[64];
    cJSON *more;    /* owned copy of o.more */
    int more_next;
    cJSON *widened; /* [{fastest_us, cusparse, cusparse_us, added: [...]}] */
    int *per_worker; /* answers per worker, for the progress lines */
    int npw;
    char (*timing_dev)[96]; /* devices with a timing in flight ("host:index") */
    int ntiming;
    /* per SpMM layout (row, col): the fastest cuSPARSE timed beside a
     * final measurement in that layout, 0 when none (layout_floor) */
    double floor_us[2];
    char floor_alg[2][64];
    char model[128];  /* the GPU model timings run on: o.gpu, else the first fit worker's */
    gpu_cubin_stats cubins0; /* the pool's compile counts when the tune started */
    cJSON *options;    /* owned copy of o.options: every variant's compile options */
    char *options_why; /* owned copy of o.options_why */
};

static void progress(ag_tuner *t, const char *fmt, ...) DT_PRINTF(2, 3);

static void progress(ag_tuner *t, const char *fmt, ...)
{
    if (t->o.progress == NULL)
        return;
    /* Each line starts with the seconds since the tuner started, so that a
     * long tune shows where its time goes. */
    char line[1024];
    int at = snprintf(line, sizeof line, "%7.1f s ", dt_now() - t->t0);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + at, sizeof line - (size_t)at, fmt, ap);
    va_end(ap);
    t->o.progress(line, t->o.ud);
}

static void add_variant(ag_tuner *t, int si, cJSON *params, dt_err *e)
{
    char *src = ag_instantiate(dt_json_str(t->st[si].cand, "template", ""), params, e);
    if (src == NULL) {
        cJSON_Delete(params);
        return;
    }
    if (t->nv == t->capv) {
        t->capv = t->capv ? 2 * t->capv : 32;
        t->v = dt_xrealloc(t->v, (size_t)t->capv * sizeof *t->v);
    }
    variant *v = &t->v[t->nv++];
    memset(v, 0, sizeof *v);
    v->strategy = si;
    v->params = params;
    v->source = src;
    v->verified = -1;
    v->same_as = -1;
    v->compiled = -1;
    v->worker = -1;
}

/* ---- which variants to measure ------------------------------------------------ */

static const gpu_mparam *mparam(const gpu_manifest *m, const char *name)
{
    for (int i = 0; m && i < m->nparams; i++)
        if (dt_streq(m->params[i].name, name))
            return &m->params[i];
    return NULL;
}

static int same_point(const cJSON *a, const cJSON *b)
{
    const cJSON *p;
    cJSON_ArrayForEach(p, a)
        if (dt_json_num(b, p->string, -1) != p->valuedouble)
            return 0;
    return cJSON_GetArraySize(a) == cJSON_GetArraySize(b);
}

/* The points chosen so far, why each was chosen (when asked), the
 * manifest and the budget. */
typedef struct picks {
    cJSON *out, *why;
    const gpu_manifest *m;
    int budget;
} picks;

static int offer(picks *k, cJSON *pt, const char *fmt, ...) DT_PRINTF(3, 4);

/* Appends pt (taken) unless the list is full, pt breaks the manifest's
 * constraints, or it is already there; fmt says why it was chosen.
 * Returns 1 while there is room. */
static int offer(picks *k, cJSON *pt, const char *fmt, ...)
{
    dt_err ce = {0};
    const cJSON *q;
    int dup = 0;
    cJSON_ArrayForEach(q, k->out)
        dup |= same_point(q, pt);
    if (dup || cJSON_GetArraySize(k->out) >= k->budget ||
        (k->m && gpu_manifest_check(k->m, pt, NULL, &ce) != 0)) {
        cJSON_Delete(pt);
    } else {
        cJSON_AddItemToArray(k->out, pt);
        if (k->why) {
            char line[160];
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(line, sizeof line, fmt, ap);
            va_end(ap);
            cJSON_AddItemToArray(k->why, cJSON_CreateString(line));
        }
    }
    return cJSON_GetArraySize(k->out) < k->budget;
}

/* own with one parameter changed. */
static cJSON *moved(const cJSON *own, const char *name, double value)
{
    cJSON *pt = cJSON_Duplicate(own, 1);
    dt_json_set_num(pt, name, value);
    return pt;
}

/* Where own's value sits in a list of values: its index, else the index of
 * the nearest value. */
static int index_in(const cJSON *vals, double v)
{
    int best = 0, i = 0;
    double gap = INFINITY;
    const cJSON *x;
    cJSON_ArrayForEach(x, vals)
    {
        if (fabs(x->valuedouble - v) < gap) {
            gap = fabs(x->valuedouble - v);
            best = i;
        }
        i++;
    }
    return best;
}

/* Whether a rule named vals: fewer values than the manifest lists, or the
 * same ones in another order (a rule that keeps every value but puts its
 * best guesses first). A list the manifest gave unchanged names nothing. */
static int rule_named(const cJSON *vals, const gpu_mparam *mp)
{
    if (cJSON_GetArraySize(vals) != mp->nvalues)
        return cJSON_GetArraySize(vals) < mp->nvalues;
    int i = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, vals)
        if (x->valuedouble != (double)mp->values[i++])
            return 1;
    return 0;
}

/* Every point of the space that m's constraints allow, in mixed-radix
 * order (the first parameter varying fastest). */
static cJSON *legal_points(const cJSON *own, const cJSON *space, const gpu_manifest *m)
{
    cJSON *all = dt_json_arr();
    const cJSON *p;
    int np = cJSON_GetArraySize(space), idx[GPU_MAX_MPARAMS] = {0};
    long total = np > 0 && np <= GPU_MAX_MPARAMS ? 1 : 0;
    cJSON_ArrayForEach(p, space)
        total *= cJSON_GetArraySize(p) > 0 ? cJSON_GetArraySize(p) : 1;
    for (long k = 0; k < total; k++) {
        cJSON *pt = cJSON_Duplicate(own, 1);
        int i = 0;
        cJSON_ArrayForEach(p, space)
        {
            if (cJSON_GetArraySize(p) > 0)
                dt_json_set_num(pt, p->string, cJSON_GetArrayItem(p, idx[i])->valuedouble);
            i++;
        }
        dt_err ce = {0};
        if (m == NULL || gpu_manifest_check(m, pt, NULL, &ce) == 0)
            cJSON_AddItemToArray(all, pt);
        else
            cJSON_Delete(pt);
        i = 0;
        cJSON_ArrayForEach(p, space)
        {
            if (++idx[i] < cJSON_GetArraySize(p))
                break;
            idx[i] = 0;
            i++;
        }
    }
    return all;
}

cJSON *ag_tune_points(const cJSON *cand, const gpu_manifest *m, int budget, cJSON *why)
{
    const cJSON *space = cJSON_GetObjectItem(cand, "space");
    const cJSON *own = cJSON_GetObjectItem(cand, "params");
    cJSON *out = dt_json_arr();
    if (budget <= 0)
        return out;
    /* The planner's own point, legal or not: it is what the plan says. */
    cJSON_AddItemToArray(out, own ? cJSON_Duplicate(own, 1) : dt_json_obj());
    if (why)
        cJSON_AddItemToArray(why, cJSON_CreateString("the planner's point"));
    if (budget == 1 || own == NULL)
        return out;
    picks k = {out, why, m, budget};
    int room = 1, longest = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, space)
        if (cJSON_GetArraySize(p) > longest)
            longest = cJSON_GetArraySize(p);
    cJSON *all = legal_points(own, space, m);
    int n = cJSON_GetArraySize(all);
    /* 1. The values a rule named: a parameter whose space is narrower
     * than its manifest's list or in another order, one value at a time,
     * the parameters in turn (each rule lists its values best guess
     * first). Without the reordered lists, the H200 bench at 12 variants
     * never reached UNROLL 8 of ell-baked-spmm's [4, 2, 8], which 24
     * variants found fastest on five small matrices at N=32 (bcsstk10
     * 2.09 -> 1.81 us). */
    for (int r = 0; r < longest && room; r++)
        cJSON_ArrayForEach(p, space)
        {
            const gpu_mparam *mp = mparam(m, p->string);
            const cJSON *x = cJSON_GetArrayItem(p, r);
            if (room && mp && x && rule_named(p, mp))
                room = offer(&k, moved(own, p->string, x->valuedouble), "a rule's value: %s %g",
                             p->string, x->valuedouble);
        }
    /* 2. The first legal point of the space and its middle one: every
     * parameter at the first value of its list (with ascending lists the
     * finest-grained variant: one-warp blocks, narrow vectors and tiles,
     * short segments, the most blocks in flight), and the same with the
     * last parameters at mid-list. Small (L2-resident) problems favour
     * them: in the H200 bench at original size a one-warp-block variant
     * from these two was the fastest verified kernel of 27 of 34 SDDMM
     * K=128 cases; without them, one-step moves from the planner's point
     * left G51 at 13.83 us against 3.83 us. Then the template's own
     * defaults, when the rules moved away from them. */
    if (room && n > 0)
        room = offer(&k, cJSON_Duplicate(cJSON_GetArrayItem(all, 0), 1), "the space's first point");
    if (room && n > 0)
        room = offer(&k, cJSON_Duplicate(cJSON_GetArrayItem(all, n / 2), 1),
                     "the space's middle point");
    if (room && m)
        room = offer(&k, gpu_manifest_defaults(m), "the template's defaults");
    /* 3. One parameter at a time, one step along its list from the
     * planner's value (down, then up), then two steps, ...: the
     * neighbourhood of the point the rules chose, in manifest order. */
    for (int d = 1; d < longest && room; d++)
        cJSON_ArrayForEach(p, space)
        {
            int i = index_in(p, dt_json_num(own, p->string, 0)), len = cJSON_GetArraySize(p);
            for (int dir = -1; dir <= 1 && room; dir += 2) {
                int j = i + dir * d;
                if (j >= 0 && j < len)
                    room = offer(&k, moved(own, p->string, cJSON_GetArrayItem(p, j)->valuedouble),
                                 "%s %g: %d step%s %s", p->string,
                                 cJSON_GetArrayItem(p, j)->valuedouble, d, d > 1 ? "s" : "",
                                 dir < 0 ? "down" : "up");
            }
        }
    /* 4. A larger budget: an even spread over the rest of the legal space,
     * then whatever is left of it. */
    int want = budget - cJSON_GetArraySize(out);
    for (int i = 0; i < want && i < n && room; i++)
        room = offer(&k, cJSON_Duplicate(cJSON_GetArrayItem(all, (int)((double)i * n / want)), 1),
                     "spread over the space");
    for (int i = 0; i < n && room; i++)
        room = offer(&k, cJSON_Duplicate(cJSON_GetArrayItem(all, i), 1), "the rest of the space");
    cJSON_Delete(all);
    return out;
}

/* The manifest of a candidate's template into m; 0 when there is none to
 * read (then m is untouched and needs no clearing). */
static int cand_manifest(const cJSON *cand, gpu_manifest *m)
{
    char *path = dt_share_path(dt_json_str(cand, "template", ""));
    char *src = path ? dt_read_file(path, NULL, NULL) : NULL;
    free(path);
    dt_err me = {0};
    int have_m = src && gpu_manifest_from_source(src, m, &me) == 0;
    free(src);
    return have_m;
}

cJSON *ag_tune_variants(const cJSON *cand, int budget, cJSON *why)
{
    gpu_manifest m;
    int have_m = cand_manifest(cand, &m);
    cJSON *pts = ag_tune_points(cand, have_m ? &m : NULL, budget, why);
    if (have_m)
        gpu_manifest_clear(&m);
    return pts;
}

/* A strategy's variants: the budget's points, then a reserve of as many
 * again twice over (the next points of a three-times-larger budget) that
 * take the place of any variant the worker finds to be the same kernel as
 * an earlier one. At N=32 in fp32 a quarter to a half of the 12 points of
 * an SpMM template are such repeats (TN 64..256 all clamp to one 32-column
 * tile, VEC 8 to 16-byte vectors of 4, LANES 16 and 32 to groups of 8). */
static void enumerate(ag_tuner *t, int si, dt_err *e)
{
    int budget = t->o.budget_variants;
    cJSON *pts = ag_tune_variants(t->st[si].cand, budget, NULL);
    cJSON *more = ag_tune_variants(t->st[si].cand, 3 * budget, NULL);
    const cJSON *pt, *q;
    cJSON_ArrayForEach(pt, pts)
        add_variant(t, si, cJSON_Duplicate(pt, 1), e);
    cJSON_ArrayForEach(pt, more)
    {
        int dup = 0;
        cJSON_ArrayForEach(q, pts)
            dup |= same_point(q, pt);
        if (dup)
            continue;
        int at = t->nv;
        add_variant(t, si, cJSON_Duplicate(pt, 1), e);
        if (t->nv > at)
            t->v[at].reserve = 1;
    }
    cJSON_Delete(pts);
    cJSON_Delete(more);
}

/* v's quick reply named the kernel it ran: when an earlier variant of its
 * strategy ran the same one, v is set aside (it would only time that
 * kernel again) and the strategy's next reserve point is measured in its
 * place. Returns the earlier variant, or NULL. */
static const variant *fold_same(ag_tuner *t, variant *v, const cJSON *reply)
{
    const char *key = dt_json_str(reply, "kernel_key", NULL);
    if (key == NULL)
        return NULL;
    free(v->key);
    v->key = dt_xstrdup(key);
    const variant *first = NULL;
    FOR_STRAT_VARIANTS(t, v->strategy, u)
    {
        if (first == NULL && u != v && !u->reserve && u->same_as < 0 && u->key &&
            dt_streq(u->key, key))
            first = u;
    }
    if (first == NULL)
        return NULL;
    v->same_as = (int)(first - t->v);
    v->quick_us = 0;
    /* A refinement round's point gives way without a stand-in: the round
     * took the neighbours there were. */
    if (v->round > 0)
        return first;
    FOR_STRAT_VARIANTS(t, v->strategy, u)
    {
        if (u->reserve) {
            u->reserve = 0;
            break;
        }
    }
    return first;
}

static cJSON *request(ag_tuner *t, const char *name, const variant *v)
{
    cJSON *r = dt_json_obj();
    dt_json_set_str(r, "req", name);
    dt_json_set_str(r, "matrix", t->o.matrix);
    const sp_spec *s = t->o.spec;
    dt_json_set_str(r, "op", sp_op_name(s->op));
    dt_json_set_str(r, "dtype", sp_dtype_name(s->dtype));
    dt_json_set_int(r, "n", s->n);
    dt_json_set_num(r, "alpha", s->alpha);
    dt_json_set_num(r, "beta", s->beta);
    dt_json_set_str(r, "epilogue", sp_epilogue_name(s->epilogue));
    cJSON *k = dt_json_obj();
    dt_json_set_str(k, "source", v->source);
    dt_json_set_str(k, "name", "variant.cu");
    dt_json_set_take(k, "params", cJSON_Duplicate(v->params, 1));
    if (t->options)
        dt_json_set_take(k, "options", cJSON_Duplicate(t->options, 1));
    dt_json_set_take(r, "kernel", k);
    return r;
}

static void pump(ag_tuner *t);
static int variant_layout(const variant *v);

typedef struct job {
    ag_tuner *t;
    int vi;
    int kind; /* 0 quick, 1 verify, 2 measure, 3 final (with baseline), 4 compile */
    int base; /* a quick timing that also timed cuSPARSE */
    char dev[96]; /* the device it times on ("" for a compile) */
} job;

static void finish(ag_tuner *t);

/* Why a verify reply did not pass: its first failed check, by name and
 * detail ("failed the verification battery: set 1: agrees with cuSPARSE:
 * ..."), so a table's failed case says what to look at. */
char *ag_battery_failure(const cJSON *reply)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(reply, "checks"))
    {
        if (dt_json_bool(c, "passed", 1))
            continue;
        const char *detail = dt_json_str(c, "detail", NULL);
        return dt_xasprintf("failed the verification battery: %s%s%s", dt_json_str(c, "name", "?"),
                            detail ? ": " : "", detail ? detail : "");
    }
    return dt_xstrdup("failed the verification battery");
}

/* A finalist failed the battery: when none of its strategy's finalists
 * has passed or is still to be verified, the fastest variant not yet a
 * finalist takes its place, up to three failures per strategy, so that
 * one wrong fast variant does not cost the strategy its result. Returns 1
 * when one was promoted. */
static int promote_next(ag_tuner *t, int si)
{
    int failed = 0;
    variant *next = NULL;
    FOR_STRAT_VARIANTS(t, si, v)
    {
        if (v->finalist && v->verified != 0)
            return 0; /* passed, or not verified yet */
        failed += v->finalist;
        if (!v->finalist && v->quick_us > 0 && (next == NULL || v->quick_us < next->quick_us))
            next = v;
    }
    if (next == NULL || failed >= 3)
        return 0;
    next->finalist = 1;
    next->s2 = 0;
    return 1;
}

/* ---- which worker: timings one at a time per GPU, compiles anywhere ---------------- */

/* Can worker i time at all: a GPU, and "measure" among the capabilities
 * its hello lists (a worker whose CUDA libraries fall short compiles
 * only)? Its device object, or NULL. */
static const cJSON *measuring_device(const ag_tuner *t, int i)
{
    const cJSON *h = gpu_pool_hello(t->o.pool, i);
    const cJSON *d = cJSON_GetObjectItem(h, "device");
    if (!dt_json_bool(d, "present", 0))
        return NULL;
    const cJSON *caps = cJSON_GetObjectItem(h, "capabilities"), *c;
    int measure = !cJSON_IsArray(caps);
    cJSON_ArrayForEach(c, caps)
        measure |= cJSON_IsString(c) && dt_streq(c->valuestring, "measure");
    return measure ? d : NULL;
}

/* The GPU model every timing of this tune runs on: the target's when one
 * is named, else the model of the first worker that can time (timings on
 * two models would not compare). Pinned once known; "" until then. */
static const char *timing_model(ag_tuner *t)
{
    if (t->model[0] == '\0' && t->o.gpu && *t->o.gpu)
        snprintf(t->model, sizeof t->model, "%s", t->o.gpu);
    for (int i = 0; t->model[0] == '\0' && i < gpu_pool_size(t->o.pool); i++) {
        const cJSON *d = measuring_device(t, i);
        if (d == NULL)
            continue;
        snprintf(t->model, sizeof t->model, "%s", dt_json_str(d, "name", "?"));
        for (int k = i + 1; k < gpu_pool_size(t->o.pool); k++) {
            const cJSON *o = measuring_device(t, k);
            if (o != NULL && !dt_streq(dt_json_str(o, "name", ""), t->model))
                progress(t, "timings on %s (worker %d's GPU): worker %d's %s compiles only",
                         t->model, i, k, dt_json_str(o, "name", "?"));
        }
    }
    return t->model;
}

/* The architecture of the GPU timings run on ("sm_90") into arch, so that
 * compiles on any worker (one without a GPU included) build what the
 * timing worker loads; 0 when no worker can time. */
static int timing_arch(ag_tuner *t, char arch[16])
{
    const char *model = timing_model(t);
    for (int i = 0; i < gpu_pool_size(t->o.pool); i++) {
        const cJSON *d = measuring_device(t, i);
        const char *cc = dt_json_str(d, "cc", NULL);
        int major = 0, minor = 0;
        if (d != NULL && dt_streq(dt_json_str(d, "name", ""), model) && cc != NULL &&
            sscanf(cc, "%d.%d", &major, &minor) == 2 && major > 0 && major < 100 && minor >= 0 &&
            minor < 10) {
            snprintf(arch, 16, "sm_%d%d", major, minor);
            return 1;
        }
    }
    return 0;
}

/* Worker i's device as "host:index" into key when it can time for this
 * tune (measuring_device, of the model timing_model pins); 0 when not. */
static int timing_device(ag_tuner *t, int i, char key[96])
{
    const cJSON *h = gpu_pool_hello(t->o.pool, i);
    const cJSON *d = measuring_device(t, i);
    if (d == NULL || !dt_streq(dt_json_str(d, "name", ""), timing_model(t)))
        return 0;
    snprintf(key, 96, "%s:%d", dt_json_str(h, "host", "?"), (int)dt_json_num(d, "index", 0));
    return 1;
}

static int device_busy(const ag_tuner *t, const char *key)
{
    for (int k = 0; k < t->ntiming; k++)
        if (strcmp(t->timing_dev[k], key) == 0)
            return 1;
    return 0;
}

/* How many timings may run at once: one per distinct fit GPU (workers that
 * share a GPU share its slot), 1 when no worker reports one (worker 0
 * times, as with a single worker). */
static int timing_slots(ag_tuner *t)
{
    char keys[64][96];
    int n = 0;
    for (int i = 0; i < gpu_pool_size(t->o.pool) && n < 64; i++) {
        char k[96];
        if (!timing_device(t, i, k))
            continue;
        int seen = 0;
        for (int q = 0; q < n; q++)
            seen |= strcmp(keys[q], k) == 0;
        if (!seen)
            snprintf(keys[n++], 96, "%s", k);
    }
    return n > 0 ? n : 1;
}

/* A worker whose GPU has no timing in flight, its device key into key;
 * -1 when every fit GPU is busy. */
static int timing_worker(ag_tuner *t, char key[96])
{
    int any = 0;
    for (int i = 0; i < gpu_pool_size(t->o.pool); i++) {
        if (!timing_device(t, i, key))
            continue;
        any = 1;
        if (!device_busy(t, key))
            return i;
    }
    if (any)
        return -1;
    snprintf(key, 96, "worker 0");
    return device_busy(t, key) ? -1 : 0;
}

static void device_release(ag_tuner *t, const char *key)
{
    for (int k = 0; k < t->ntiming; k++) {
        if (strcmp(t->timing_dev[k], key) == 0) {
            memmove(t->timing_dev[k], t->timing_dev[k + 1],
                    (size_t)(t->ntiming - k - 1) * sizeof *t->timing_dev);
            t->ntiming--;
            return;
        }
    }
}

/* compile-only: what the compile answer says of the variant (its kernels'
 * registers and spills, the contract it parsed to) and what the static
 * rules find in its source. */
static void record_compile(variant *v, const cJSON *reply)
{
    cJSON_Delete(v->checks);
    v->checks = dt_json_obj();
    v->compiled = dt_json_bool(reply, "ok", 0) && dt_json_bool(reply, "compiled", 0);
    cJSON *ks = dt_json_arr();
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(reply, "kernels"))
    {
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "name", dt_json_str(k, "name", ""));
        dt_json_set_int(o, "registers", (int)dt_json_num(k, "registers", 0));
        dt_json_set_int(o, "spill_stores", (int)dt_json_num(k, "spill_stores", 0));
        dt_json_set_int(o, "smem", (int)dt_json_num(k, "smem", 0));
        cJSON_AddItemToArray(ks, o);
    }
    dt_json_set_take(v->checks, "kernels", ks);
    dt_json_set_num(v->checks, "seconds", dt_json_num(reply, "seconds", 0)); /* the worker's */
    const cJSON *ct = cJSON_GetObjectItem(reply, "contract");
    if (v->compiled)
        dt_json_set_take(v->checks, "static", ag_static_rules(v->source, ct));
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(reply, "diagnostics"), 0);
    if (!v->compiled && d && v->error == NULL)
        v->error = dt_xasprintf("compile error: %s:%d: %s", dt_json_str(d, "file", "?"),
                                (int)dt_json_num(d, "line", 0), dt_json_str(d, "message", ""));
}

static int submit(ag_tuner *t, int vi, int kind);


/* "; the call took T s, C of it checking timed outputs" from a full
 * measure's cost_s (the worker's), or "" without one. */
static void cost_note(const cJSON *reply, char *buf, size_t len)
{
    const cJSON *cs = cJSON_GetObjectItem(reply, "cost_s");
    buf[0] = 0;
    if (cs != NULL)
        snprintf(buf, len, "; the call took %.1f s, %.1f of it checking timed outputs",
                 dt_json_num(cs, "total", 0),
                 dt_json_num(cs, "timing_checks", 0) + dt_json_num(cs, "baseline_checks", 0) +
                     dt_json_num(cs, "final", 0));
}

static void on_job(gpu_pool *p, const cJSON *reply, void *ud)
{
    (void)p;
    job *j = ud;
    ag_tuner *t = j->t;
    int vi = j->vi, kind = j->kind, base = j->base;
    char dev[96];
    snprintf(dev, sizeof dev, "%s", j->dev);
    free(j);
    if (t->freeing)
        return;
    t->inflight--;
    if (dev[0])
        device_release(t, dev);
    variant *v = &t->v[vi];
    char buf[1200];
    const char *sname = dt_json_str(t->st[v->strategy].cand, "strategy", "");
    char *ps = dt_json_print(v->params, 0);
    int wi = (int)dt_json_num(reply, "worker", -1);
    if (wi >= 0 && wi < t->npw) {
        v->worker = wi;
        t->per_worker[wi]++;
    }
    char wtag[32] = ""; /* each line names the worker that answered */
    if (wi >= 0)
        snprintf(wtag, sizeof wtag, " [worker %d]", wi);
    if (kind == 4 && v->timeouts == 0 && dt_streq(dt_json_str(reply, "error", ""), "timeout")) {
        /* A compile that hung: its worker was killed. A node gone silent
         * (ssh or srun that never closes) looks the same as NVRTC stuck on
         * the source, so it gets one more try, on whichever worker is free
         * first; a second hang is the variant's own. */
        v->timeouts++;
        progress(t, "  %-16s %-40s compile %s: once more%s", sname, ps,
                 gpu_reply_error(reply, buf, sizeof buf), wtag);
        free(ps);
        submit(t, vi, 4);
        return;
    }
    if (kind == 4 && t->o.compile_only) {
        int ok = dt_json_bool(reply, "ok", 0);
        if (ok)
            record_compile(v, reply);
        else
            v->error = dt_xstrdup(gpu_reply_error(reply, buf, sizeof buf));
        int findings = cJSON_GetArraySize(cJSON_GetObjectItem(v->checks, "static"));
        const cJSON *k0 = cJSON_GetArrayItem(cJSON_GetObjectItem(v->checks, "kernels"), 0);
        if (v->compiled == 1)
            progress(t, "  %-16s %-40s compiled: %d registers, %d static finding%s%s%s", sname, ps,
                     (int)dt_json_num(k0, "registers", 0), findings, findings == 1 ? "" : "s",
                     dt_json_bool(reply, "retried", 0) ? ", retried" : "", wtag);
        else
            progress(t, "  %-16s %-40s %s%s", sname, ps, v->error ? v->error : "not compiled",
                     wtag);
    } else if (kind == 4) {
        /* precompiled into the shared disk cache; errors show up again later */
    } else if (kind == 3) {
        if (dt_json_bool(reply, "ok", 0)) {
            cJSON_Delete(v->final);
            v->final = cJSON_Duplicate(reply, 1);
            char cost[96];
            cost_note(reply, cost, sizeof cost);
            progress(t, "  %-16s %-40s %9.2f us vs cuSPARSE %s %.2f us: %.2fx%s%s", sname, ps,
                     dt_json_num(reply, "us", 0),
                     dt_json_str(cJSON_GetObjectItem(reply, "baseline"), "best", "?"),
                     dt_json_num(cJSON_GetObjectItem(reply, "baseline"), "us", 0),
                     dt_json_num(reply, "speedup", 0), cost, wtag);
        } else {
            progress(t, "  %-16s %-40s comparison failed: %s%s", sname, ps,
                     gpu_reply_error(reply, buf, sizeof buf), wtag);
        }
    } else if (kind == 0) {
        const cJSON *bl = cJSON_GetObjectItem(reply, "baseline");
        if (base && dt_json_bool(reply, "ok", 0) && dt_json_num(bl, "us", 0) > 0) {
            t->base_us = dt_json_num(bl, "us", 0);
            snprintf(t->base_alg, sizeof t->base_alg, "%s", dt_json_str(bl, "best", "?"));
            progress(t, "  cuSPARSE %s: %.2f us (quick, the line the ranked strategies must beat)",
                     t->base_alg, t->base_us);
        } else if (base) {
            t->base_asked = 0; /* ask again with the next quick timing */
        }
        if (dt_json_bool(reply, "ok", 0)) {
            v->quick_us = dt_json_num(reply, "us", 0);
            double us = v->quick_us;
            const variant *same = fold_same(t, v, reply);
            char *sp = same ? dt_json_print(same->params, 0) : NULL;
            progress(t, "  %-16s %-40s %9.2f us (quick, %s)%s%s%s%s", sname, ps, us,
                     dt_json_str(reply, "method", "?"),
                     sp ? ": the same kernel and launch as " : "", sp ? sp : "",
                     sp ? ", the next point in its place" : "", wtag);
            free(sp);
        } else {
            v->error = dt_xstrdup(gpu_reply_error(reply, buf, sizeof buf));
            progress(t, "  %-16s %-40s failed: %s%s", sname, ps, v->error, wtag);
        }
    } else if (kind == 1) {
        v->verified = dt_json_bool(reply, "ok", 0) && dt_json_bool(reply, "passed", 0);
        if (!v->verified) {
            free(v->error);
            v->error = dt_json_bool(reply, "ok", 0) ? ag_battery_failure(reply)
                                                    : dt_xstrdup(gpu_reply_error(reply, buf, sizeof buf));
        }
        v->s2 = v->verified ? 2 : 4;
        progress(t, "  %-16s %-40s verify: %s%s", sname, ps, v->verified ? "passed" : v->error,
                 wtag);
        if (!v->verified && promote_next(t, v->strategy))
            progress(t, "  %-16s the next fastest variant takes its place as a finalist", sname);
    } else {
        v->s2 = 4;
        if (dt_json_bool(reply, "ok", 0)) {
            cJSON_Delete(v->measure);
            v->measure = cJSON_Duplicate(reply, 1);
            char cost[96];
            cost_note(reply, cost, sizeof cost);
            progress(t, "  %-16s %-40s %9.2f us (%s, full)%s%s", sname, ps,
                     dt_json_num(reply, "us", 0), dt_json_str(reply, "method", ""), cost, wtag);
        } else {
            free(v->error);
            v->error = dt_xstrdup(gpu_reply_error(reply, buf, sizeof buf));
            progress(t, "  %-16s %-40s measure failed: %s%s", sname, ps, v->error, wtag);
        }
    }
    free(ps);
    pump(t);
}

/* Returns 0, or -1 when a timing has no free GPU (nothing was sent). */
static int submit(ag_tuner *t, int vi, int kind)
{
    static const char *names[] = {"measure", "verify", "measure", "measure", "compile"};
    cJSON *r = request(t, names[kind], &t->v[vi]);
    if (kind == 0) {
        dt_json_set_int(r, "min_runs", 5);
        dt_json_set_num(r, "min_seconds", 0.005);
    }
    if (kind == 0 || kind == 2 || kind == 3)
        dt_json_set_bool(r, "fast", 1);
    /* The first quick timing also times cuSPARSE when there are further
     * strategies to widen to: the line the quick timings are held to. */
    int base = kind == 0 && !t->base_asked && t->more_next < cJSON_GetArraySize(t->more);
    if ((kind == 0 && !base) || kind == 2)
        dt_json_set_bool(r, "baseline", 0);
    /* Timings and verifications go to a worker whose GPU has nothing else
     * timing (two kernels timed at once on one GPU would slow each other),
     * of the target's model. Compiles go anywhere, a worker without a GPU
     * included (they fill the disk cache). */
    char dev[96] = "";
    int target = -1;
    char arch[16];
    if (kind == 4 && timing_arch(t, arch))
        dt_json_set_str(r, "arch", arch);
    if (kind != 4) {
        target = timing_worker(t, dev);
        if (target < 0) {
            cJSON_Delete(r);
            return -1;
        }
        t->timing_dev =
            dt_xrealloc(t->timing_dev, (size_t)(t->ntiming + 1) * sizeof *t->timing_dev);
        snprintf(t->timing_dev[t->ntiming++], sizeof *t->timing_dev, "%s", dev);
    }
    t->base_asked |= base;
    job *j = dt_xcalloc(1, sizeof *j);
    j->t = t;
    j->vi = vi;
    j->kind = kind;
    j->base = base;
    snprintf(j->dev, sizeof j->dev, "%s", dev);
    t->inflight++;
    long id = gpu_pool_submit(t->o.pool, r, target, 600, on_job, j);
    if (t->nids == t->capids) {
        t->capids = t->capids ? 2 * t->capids : 256;
        t->ids = dt_xrealloc(t->ids, (size_t)t->capids * sizeof *t->ids);
    }
    t->ids[t->nids++] = id;
    return 0;
}

static int cmp_quick(const void *a, const void *b)
{
    const variant *x = *(variant *const *)a, *y = *(variant *const *)b;
    double ux = x->quick_us > 0 ? x->quick_us : 1e300, uy = y->quick_us > 0 ? y->quick_us : 1e300;
    return ux < uy ? -1 : ux > uy;
}

/* How far behind its strategy's fastest quick time a third or later
 * finalist may be. Quick timings of one point scatter by about 1% (the H200,
 * cold at 32M nonzeros and graph replay at original size alike). */
#define FINALIST_WINDOW 1.03

static void pick_finalists(ag_tuner *t)
{
    for (int si = 0; si < t->nst; si++) {
        variant **sorted = dt_xcalloc((size_t)(t->nv ? t->nv : 1), sizeof *sorted);
        int ok = 0, count = 0;
        FOR_STRAT_VARIANTS(t, si, v)
        {
            sorted[count++] = v;
            ok += v->quick_us > 0;
        }
        qsort(sorted, (size_t)count, sizeof *sorted, cmp_quick);
        int keep = (ok + 2) / 3;
        if (keep < 2)
            keep = ok < 2 ? ok : 2;
        if (t->o.max_finalists > 0 && keep > t->o.max_finalists)
            keep = t->o.max_finalists;
        /* Past the two fastest, only points within FINALIST_WINDOW of the
         * fastest quick time: each finalist costs a battery and a full
         * measure (5.6 s at 32M nonzeros on the H200), and one further
         * behind than quick timings scatter does not win. */
        for (int k = 0; k < keep; k++)
            if (k < 2 || sorted[k]->quick_us <= FINALIST_WINDOW * sorted[0]->quick_us)
                sorted[k]->finalist = 1;
        free(sorted);
    }
}

/* ---- refinement: a local search from the fastest quick timing ------------------- */

/* How many rounds at most; a round stops the search for a strategy whose
 * fastest point did not change. */
#define REFINE_ROUNDS 2

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* One round: for each strategy whose fastest quick point is new (the first
 * round, or one the last round found), its neighbours one step away along
 * each parameter of the candidate's space (the values sorted ascending),
 * legal under the manifest and not measured before, appended as variants of
 * this round. They are taken a parameter at a time, in the space's order,
 * one step each (down where there is one) before any parameter gets its
 * second, and at most t->o.refine of them or one per parameter, whichever
 * is more: with the steps taken parameter by parameter under a cap of four,
 * sell16-thread's fifth parameter (SEQ) was never moved (crack fp64 kept
 * SEQ 2 at 130.75 us where SEQ 1 takes 127.6, session 23). The points ag_tune_points picks are one
 * move from the planner's point; on the H200 the faster points of SDDMM at K=32 were two or three
 * moves away (csr-warp-sddmm's SEG and WARPS together, coo-sddmm's LANES and UNROLL), and this
 * reaches them by way of the best point measured. Returns the variants added. */
static int refine(ag_tuner *t)
{
    int per = t->o.refine, added = 0;
    t->round++;
    t->round_from = t->nv;
    for (int si = 0; si < t->nst; si++) {
        strat *st = &t->st[si];
        variant *best = NULL;
        FOR_STRAT_VARIANTS(t, si, v)
        {
            if (v->quick_us > 0 && (best == NULL || v->quick_us < best->quick_us))
                best = v;
        }
        if (st->cached || best == NULL || (int)(best - t->v) == st->around)
            continue;
        st->around = (int)(best - t->v);
        const cJSON *space = cJSON_GetObjectItem(st->cand, "space");
        gpu_manifest m;
        int have_m = cand_manifest(st->cand, &m);
        cJSON *from = cJSON_Duplicate(best->params, 1);
        char *fs = dt_json_print(from, 0);
        /* Each parameter's legal, new steps: down first, then up. */
        enum { MAXP = 32 };
        cJSON *steps[MAXP][2] = {{NULL}};
        int np = 0;
        const cJSON *p;
        cJSON_ArrayForEach(p, space)
        {
            int len = cJSON_GetArraySize(p);
            if (len < 2 || len > 64 || np == MAXP)
                continue;
            double vals[64];
            for (int i = 0; i < len; i++)
                vals[i] = cJSON_GetArrayItem(p, i)->valuedouble;
            qsort(vals, (size_t)len, sizeof vals[0], cmp_double);
            double at = dt_json_num(from, p->string, vals[0]);
            int i = 0;
            for (int k = 1; k < len; k++)
                if (fabs(vals[k] - at) < fabs(vals[i] - at))
                    i = k;
            int ns = 0;
            for (int dir = -1; dir <= 1; dir += 2) {
                int j = i + dir;
                if (j < 0 || j >= len || vals[j] == at)
                    continue;
                cJSON *pt = moved(from, p->string, vals[j]);
                dt_err ce = {0};
                int seen = have_m && gpu_manifest_check(&m, pt, NULL, &ce) != 0;
                FOR_STRAT_VARIANTS(t, si, u)
                {
                    seen |= !u->reserve && same_point(u->params, pt);
                }
                if (seen)
                    cJSON_Delete(pt);
                else
                    steps[np][ns++] = pt;
            }
            np++;
        }
        const int cap = per > np ? per : np;
        int got = 0;
        for (int pass = 0; pass < 2; pass++) {
            for (int q = 0; q < np; q++) {
                cJSON *pt = steps[q][pass];
                steps[q][pass] = NULL;
                if (pt == NULL)
                    continue;
                if (got >= cap) {
                    cJSON_Delete(pt);
                    continue;
                }
                dt_err e = {0};
                int before = t->nv;
                add_variant(t, si, pt, &e); /* takes pt */
                if (t->nv > before) {
                    t->v[before].round = t->round;
                    got++;
                }
            }
        }
        if (got > 0)
            progress(t, "  %-16s refinement round %d: %d point%s one step from the fastest, %s",
                     dt_json_str(st->cand, "strategy", ""), t->round, got, got == 1 ? "" : "s", fs);
        added += got;
        free(fs);
        cJSON_Delete(from);
        if (have_m)
            gpu_manifest_clear(&m);
    }
    return added;
}

/* When every quick timing is slower than cuSPARSE's, add the next
 * o.widen strategies of o.more (those not tuned already) with their
 * variants. Returns the variants added (0: nothing to add). */
static int widen(ag_tuner *t)
{
    double fastest = 0;
    for (int i = 0; i < t->nv; i++)
        if (t->v[i].quick_us > 0 && (fastest == 0 || t->v[i].quick_us < fastest))
            fastest = t->v[i].quick_us;
    if (t->base_us <= 0 || (fastest > 0 && fastest <= t->base_us))
        return 0;
    int per = t->o.widen > 0 ? t->o.widen : 2;
    int from = t->nv, added = 0;
    cJSON *names = dt_json_arr();
    while (added < per && t->more_next < cJSON_GetArraySize(t->more)) {
        const cJSON *c = cJSON_GetArrayItem(t->more, t->more_next++);
        int dup = 0;
        for (int si = 0; si < t->nst; si++)
            dup |= dt_streq(dt_json_str(t->st[si].cand, "strategy", ""),
                            dt_json_str(c, "strategy", "?"));
        if (dup)
            continue;
        cJSON *own = cJSON_Duplicate(c, 1);
        cJSON_AddItemToArray(t->cands, own);
        t->st = dt_xrealloc(t->st, (size_t)(t->nst + 1) * sizeof *t->st);
        memset(&t->st[t->nst], 0, sizeof t->st[t->nst]);
        t->st[t->nst].cand = own;
        t->st[t->nst].around = -1;
        dt_err e = {0};
        enumerate(t, t->nst++, &e);
        cJSON_AddItemToArray(names, cJSON_CreateString(dt_json_str(c, "strategy", "?")));
        added++;
    }
    if (added == 0) {
        cJSON_Delete(names);
        return 0;
    }
    char *ns = dt_json_print(names, 0);
    if (fastest > 0)
        progress(t, "quick timings: the fastest, %.2f us, loses to cuSPARSE %s at %.2f us: "
                    "widening the search to %s",
                 fastest, t->base_alg, t->base_us, ns);
    else
        progress(t, "quick timings: no variant ran: widening the search to %s", ns);
    free(ns);
    if (t->widened == NULL)
        t->widened = dt_json_arr();
    cJSON *w = dt_json_obj();
    if (fastest > 0)
        dt_json_set_num(w, "fastest_us", fastest);
    dt_json_set_str(w, "cusparse", t->base_alg);
    dt_json_set_num(w, "cusparse_us", t->base_us);
    dt_json_set_take(w, "added", names);
    cJSON_AddItemToArray(t->widened, w);
    t->round_from = from;
    int active = 0;
    for (int i = from; i < t->nv; i++)
        active += !t->v[i].reserve;
    return active;
}

/* How far behind the fastest strategy's full time (in its layout) another
 * strategy's winner may be and still be compared with cuSPARSE. */
#define COMPARE_WINDOW 1.10

/* The comparison with every cuSPARSE algorithm and the paired rounds take
 * seconds at HBM size (6.5 s at 32M nonzeros on the H200), once per
 * strategy: with the search widened to 13 strategies that was 75 s. A
 * strategy whose winner's full time is more than COMPARE_WINDOW behind the
 * fastest cannot be the result, so it is not compared (winner 2): its
 * result keeps its full time and an estimate against the cuSPARSE time the
 * compared ones met, marked as such. The fastest of each SpMM layout is
 * always compared: its cuSPARSE time is the line the other layout's
 * kernels are held to (layout_floor). */
static void compare_winners(ag_tuner *t)
{
    double fastest = 0, lfast[2] = {0, 0};
    int lbest[2] = {-1, -1};
    int spmm = t->o.spec != NULL && t->o.spec->op == SP_SPMM;
    for (int i = 0; i < t->nv; i++) {
        const variant *v = &t->v[i];
        double us = v->winner ? dt_json_num(v->measure, "us", 0) : 0;
        if (us <= 0)
            continue;
        int l = spmm ? variant_layout(v) : 0;
        l = l < 0 ? 0 : l;
        if (fastest == 0 || us < fastest)
            fastest = us;
        if (lbest[l] < 0 || us < lfast[l]) {
            lfast[l] = us;
            lbest[l] = i;
        }
    }
    for (int i = 0; i < t->nv; i++) {
        variant *v = &t->v[i];
        double us = v->winner ? dt_json_num(v->measure, "us", 0) : 0;
        if (us <= 0 || us <= COMPARE_WINDOW * fastest || i == lbest[0] || i == lbest[1])
            continue;
        v->winner = 2;
        char *ps = dt_json_print(v->params, 0);
        progress(t,
                 "  %-16s %-40s %9.2f us (full): %.0f%% behind the fastest, %.2f us; not "
                 "compared with cuSPARSE",
                 dt_json_str(t->st[v->strategy].cand, "strategy", ""), ps, us,
                 100.0 * (us / fastest - 1.0), fastest);
        free(ps);
    }
}

static void pump(ag_tuner *t)
{
    if (t->done)
        return;
    int workers = gpu_pool_size(t->o.pool);
    int parallel = timing_slots(t); /* one timing at a time per GPU */
    double elapsed = dt_now() - t->t0;
    if (t->stage == 0) {
        /* With several workers, compile every variant in parallel first. */
        while (t->inflight < workers && t->next < t->nv) {
            int vi = t->next++;
            if (!t->v[vi].reserve)
                submit(t, vi, 4);
        }
        if (t->inflight > 0)
            return;
        if (t->o.compile_only) {
            finish(t);
            return;
        }
        t->stage = 1;
        t->next = t->round_from;
    }
    if (t->stage == 1) {
        /* The quick stage stops taking new variants at half the budget. */
        while (t->inflight < parallel && t->next < t->nv && elapsed < 0.5 * t->o.budget_s) {
            int vi = t->next++;
            if (!t->v[vi].reserve && submit(t, vi, 0) != 0) {
                t->next--; /* no GPU free: its reply will pump again */
                break;
            }
        }
        if (t->inflight > 0)
            return;
        int untimed = 0, active = 0;
        for (int i = 0; i < t->nv; i++) {
            active += !t->v[i].reserve;
            untimed += !t->v[i].reserve && i >= t->next;
        }
        if (untimed > 0)
            progress(t, "time budget: %d of %d variants not timed", untimed, active);
        /* Losing to cuSPARSE on every quick timing: the next strategies
         * of the ranking, while the quick stage's half of the budget
         * lasts, before refining the losers. */
        if (untimed == 0 && elapsed < 0.5 * t->o.budget_s && widen(t) > 0) {
            t->next = t->round_from;
            t->stage = gpu_pool_size(t->o.pool) > 1 ? 0 : 1;
            pump(t);
            return;
        }
        /* Refinement rounds while the time lasts: the new points are
         * compiled (several workers) and timed like the first ones. */
        if (untimed == 0 && t->o.refine > 0 && t->round < REFINE_ROUNDS &&
            elapsed < 0.5 * t->o.budget_s && refine(t) > 0) {
            t->next = t->round_from;
            t->stage = gpu_pool_size(t->o.pool) > 1 ? 0 : 1;
            pump(t);
            return;
        }
        pick_finalists(t);
        t->stage = 2;
        t->next = 0;
        progress(t, "finalists: full verification battery and measurement next to cuSPARSE");
    }
    if (t->stage == 2) {
        /* Each finalist is verified first; only a verified one is measured. */
        while (t->inflight < parallel) {
            int pick = -1, kind = 0;
            for (int i = 0; i < t->nv && pick < 0; i++)
                if (t->v[i].finalist && t->v[i].s2 == 2) {
                    pick = i;
                    kind = 2;
                }
            for (int i = 0; i < t->nv && pick < 0; i++)
                if (t->v[i].finalist && t->v[i].s2 == 0) {
                    pick = i;
                    kind = 1;
                }
            if (pick < 0)
                break;
            t->v[pick].s2 = kind == 1 ? 1 : 3;
            if (submit(t, pick, kind) != 0) {
                t->v[pick].s2 = kind == 1 ? 0 : 2;
                break;
            }
        }
        if (t->inflight > 0)
            return;
        /* Each strategy's fastest verified finalist is measured once more
         * with every cuSPARSE algorithm, the same method for both. */
        for (int si = 0; si < t->nst; si++) {
            variant *w = NULL;
            FOR_STRAT_VARIANTS(t, si, v)
            {
                if (v->verified == 1 && v->measure &&
                    (w == NULL || dt_json_num(v->measure, "us", 1e300) <
                                      dt_json_num(w->measure, "us", 1e300)))
                    w = v;
            }
            if (w)
                w->winner = 1;
        }
        compare_winners(t);
        t->stage = 3;
        t->next = 0;
    }
    if (t->stage == 3) {
        while (t->inflight < parallel && t->next < t->nv) {
            int vi = t->next++;
            if (t->v[vi].winner == 1 && submit(t, vi, 3) != 0) {
                t->next--;
                break;
            }
        }
        if (t->inflight > 0)
            return;
        finish(t);
    }
}

/* The layout (0 row-major, 1 column-major) of a variant's kernel, -1 when
 * its contract does not parse. */
static int variant_layout(const variant *v)
{
    gpu_contract c;
    dt_err e = {0};
    if (v->source == NULL || gpu_contract_from_source(v->source, &c, &e) != 0)
        return -1;
    int l = c.layout == SP_COL_MAJOR;
    gpu_contract_clear(&c);
    return l;
}

/* An SpMM kernel chooses its B and C layout and is timed beside cuSPARSE
 * in that layout. The problem's caller may then call cuSPARSE in either
 * layout too, so when finalists of both layouts were measured every
 * speedup is taken against the faster cuSPARSE of the two (variant_json):
 * a column-major kernel is not credited for beating cuSPARSE's slower
 * column-major algorithms when its row-major ones are faster. */
static void layout_floor(ag_tuner *t)
{
    memset(t->floor_us, 0, sizeof t->floor_us);
    if (t->o.spec == NULL || t->o.spec->op != SP_SPMM)
        return;
    for (int i = 0; i < t->nv; i++) {
        const variant *v = &t->v[i];
        const cJSON *b = v->final ? cJSON_GetObjectItem(v->final, "baseline") : NULL;
        double us = dt_json_num(b, "us", 0);
        int l = us > 0 ? variant_layout(v) : -1;
        if (l < 0 || (t->floor_us[l] > 0 && t->floor_us[l] <= us))
            continue;
        t->floor_us[l] = us;
        snprintf(t->floor_alg[l], sizeof t->floor_alg[l], "%s", dt_json_str(b, "best", ""));
    }
}

static cJSON *variant_json(const ag_tuner *t, const variant *v)
{
    cJSON *o = dt_json_obj();
    dt_json_set_str(o, "strategy", dt_json_str(t->st[v->strategy].cand, "strategy", ""));
    dt_json_set_take(o, "params", cJSON_Duplicate(v->params, 1));
    if (v->quick_us > 0)
        dt_json_set_num(o, "quick_us", v->quick_us);
    dt_json_set_bool(o, "finalist", v->finalist);
    if (v->round > 0)
        dt_json_set_int(o, "round", v->round);
    if (v->verified >= 0)
        dt_json_set_bool(o, "verified", v->verified);
    const cJSON *m = v->final ? v->final : v->measure;
    if (m) {
        dt_json_set_num(o, "us", dt_json_num(m, "us", 0));
        dt_json_set_num(o, "gbps", dt_json_num(m, "gbps", 0));
        dt_json_set_num(o, "gflops", dt_json_num(m, "gflops", 0));
        dt_json_set_str(o, "method", dt_json_str(m, "method", ""));
        dt_json_set_num(o, "preprocess_us", dt_json_num(m, "preprocess_us", 0));
        dt_json_set_num(o, "copy_gbps", dt_json_num(m, "copy_gbps", 0));
    }
    if (v->final) {
        const cJSON *b = cJSON_GetObjectItem(v->final, "baseline");
        dt_json_set_num(o, "speedup", dt_json_num(v->final, "speedup", 0));
        dt_json_set_str(o, "baseline", dt_json_str(b, "best", ""));
        dt_json_set_num(o, "baseline_us", dt_json_num(b, "us", 0));
        const cJSON *alg;
        cJSON_ArrayForEach(alg, cJSON_GetObjectItem(b, "algs"))
            if (dt_streq(dt_json_str(alg, "name", ""), dt_json_str(b, "best", "")))
                dt_json_set_num(o, "baseline_preprocess_us",
                                dt_json_num(alg, "preprocess_us", 0) + dt_json_num(alg, "setup_us", 0));
        int l = t->floor_us[0] > 0 && t->floor_us[1] > 0 ? variant_layout(v) : -1;
        double us = dt_json_num(v->final, "us", 0);
        if (l >= 0 && us > 0 && t->floor_us[!l] < dt_json_num(b, "us", 0)) {
            /* cuSPARSE is faster in the other layout: the line to beat */
            dt_json_set_num(o, "speedup_own_layout", dt_json_num(v->final, "speedup", 0));
            dt_json_set_num(o, "speedup", t->floor_us[!l] / us);
            char name[96];
            snprintf(name, sizeof name, "%s (%s-major)", t->floor_alg[!l], l ? "row" : "column");
            dt_json_set_str(o, "baseline", name);
            dt_json_set_num(o, "baseline_us", t->floor_us[!l]);
        }
    }
    if (v->winner == 2 && v->measure && v->final == NULL) {
        /* Not compared (compare_winners): its full time against the
         * cuSPARSE time the compared ones met in its layout, an estimate. */
        dt_json_set_bool(o, "compared", 0);
        int spmm = t->o.spec != NULL && t->o.spec->op == SP_SPMM;
        int l = spmm ? variant_layout(v) : 0;
        double base = 0;
        const char *alg = "";
        for (int i = 0; i < t->nv; i++) {
            const variant *u = &t->v[i];
            const cJSON *b = u->final ? cJSON_GetObjectItem(u->final, "baseline") : NULL;
            double bu = dt_json_num(b, "us", 0);
            if (bu > 0 && (!spmm || variant_layout(u) == l) && (base == 0 || bu < base)) {
                base = bu;
                alg = dt_json_str(b, "best", "");
            }
        }
        double us = dt_json_num(v->measure, "us", 0);
        if (base > 0 && us > 0) {
            dt_json_set_num(o, "speedup_estimated", base / us);
            dt_json_set_str(o, "baseline", alg);
            dt_json_set_num(o, "baseline_us", base);
        }
    }
    if (v->same_as >= 0)
        dt_json_set_take(o, "same_as", cJSON_Duplicate(t->v[v->same_as].params, 1));
    if (v->compiled >= 0)
        dt_json_set_bool(o, "compiled", v->compiled);
    if (v->checks) {
        dt_json_set_take(o, "kernels",
                         cJSON_Duplicate(cJSON_GetObjectItem(v->checks, "kernels"), 1));
        dt_json_set_num(o, "compile_seconds", dt_json_num(v->checks, "seconds", 0));
        const cJSON *st = cJSON_GetObjectItem(v->checks, "static");
        if (st)
            dt_json_set_take(o, "static", cJSON_Duplicate(st, 1));
    }
    if (v->worker >= 0)
        dt_json_set_int(o, "worker", v->worker);
    if (v->error)
        dt_json_set_str(o, "error", v->error);
    return o;
}

/* Where the fastest verified kernel is slower than the best cuSPARSE
 * algorithm timed beside it, say so and name the algorithm to call:
 * res.cusparse_faster and res.use {library, alg, us, kernel_us, speedup}. */
static void honest_outcome(ag_tuner *t, cJSON *res)
{
    const cJSON *b = cJSON_GetObjectItem(res, "best");
    double sp = dt_json_num(b, "speedup", 0);
    if (b == NULL || sp <= 0)
        return;
    dt_json_set_bool(res, "cusparse_faster", sp < 1.0);
    if (sp >= 1.0)
        return;
    cJSON *u = dt_json_obj();
    dt_json_set_str(u, "library", "cusparse");
    dt_json_set_str(u, "alg", dt_json_str(b, "baseline", ""));
    dt_json_set_num(u, "us", dt_json_num(b, "baseline_us", 0));
    dt_json_set_num(u, "kernel_us", dt_json_num(b, "us", 0));
    dt_json_set_num(u, "speedup", sp);
    dt_json_set_take(res, "use", u);
    progress(t,
             "no generated kernel beats cuSPARSE here: the fastest verified one, %s, takes "
             "%.2f us, %.2fx cuSPARSE %s at %.2f us; call cuSPARSE %s",
             dt_json_str(b, "strategy", ""), dt_json_num(b, "us", 0), sp,
             dt_json_str(b, "baseline", ""), dt_json_num(b, "baseline_us", 0),
             dt_json_str(b, "baseline", ""));
}

/* The compile cache over this tune: the workers' hits and compiles, and
 * the cubins that went between hosts (gpu/PROTOCOL.md, "Sharing compiled
 * kernels"), into res and one progress line. */
static void compile_cache_summary(ag_tuner *t, cJSON *res)
{
    gpu_cubin_stats now;
    const gpu_cubin_stats *a = &t->cubins0;
    gpu_pool_cubin_stats(t->o.pool, &now);
    long hits = now.hits - a->hits, misses = now.misses - a->misses;
    long sent = now.sent - a->sent, fetched = now.fetched - a->fetched;
    long refused = now.refused - a->refused;
    int64_t sent_bytes = now.sent_bytes - a->sent_bytes;
    cJSON *o = dt_json_obj();
    dt_json_set_int(o, "hits", hits);
    dt_json_set_int(o, "compiles", misses);
    dt_json_set_int(o, "sent", sent);
    dt_json_set_int(o, "sent_bytes", sent_bytes);
    dt_json_set_int(o, "fetched", fetched);
    dt_json_set_int(o, "refused", refused);
    dt_json_set_take(res, "compile_cache", o);
    if (hits + misses + sent + fetched + refused == 0)
        return; /* workers that report no compiles (fakes, old workers) */
    char sz[32];
    dt_fmt_bytes((double)sent_bytes, sz, sizeof sz);
    progress(t,
             "compile cache: %ld hit%s, %ld compile%s; %ld cubin%s sent to workers that lacked "
             "them (%s), %ld kept from the workers that compiled them, %ld refused by the hash "
             "check",
             hits, hits == 1 ? "" : "s", misses, misses == 1 ? "" : "s", sent, sent == 1 ? "" : "s",
             sz, fetched, refused);
}

static void finish(ag_tuner *t)
{
    t->stage = 4;
    t->done = 1;
    layout_floor(t);
    cJSON *res = dt_json_obj();
    cJSON *strats = dt_json_arr();
    const variant *best = NULL;
    for (int si = 0; si < t->nst; si++) {
        strat *s = &t->st[si];
        cJSON *so = dt_json_obj();
        dt_json_set_str(so, "strategy", dt_json_str(s->cand, "strategy", ""));
        dt_json_set_str(so, "template", dt_json_str(s->cand, "template", ""));
        cJSON *vs = dt_json_arr();
        const variant *sbest = NULL;
        FOR_STRAT_VARIANTS(t, si, v)
        {
            if (v->reserve)
                continue; /* never measured */
            cJSON_AddItemToArray(vs, variant_json(t, v));
            if (v->verified == 1 && ((v->winner == 1 && v->final) || (v->winner == 2 && v->measure)))
                sbest = v;
        }
        dt_json_set_take(so, "variants", vs);
        if (sbest) {
            cJSON *b = variant_json(t, sbest);
            dt_json_set_str(b, "source", sbest->source);
            dt_json_set_take(so, "best", b);
            if (sbest->final != NULL &&
                (best == NULL ||
                 dt_json_num(sbest->final, "us", 1e300) < dt_json_num(best->final, "us", 1e300)))
                best = sbest;
        } else {
            int failed_all = 1;
            FOR_STRAT_VARIANTS(t, si, v)
            {
                failed_all &= v->verified != 1;
            }
            dt_json_set_str(so, "status", failed_all ? "no variant passed verification"
                                                     : "not measured");
        }
        cJSON_AddItemToArray(strats, so);
    }
    dt_json_set_take(res, "strategies", strats);
    if (best) {
        cJSON *b = variant_json(t, best);
        dt_json_set_str(b, "source", best->source);
        dt_json_set_str(b, "template", dt_json_str(t->st[best->strategy].cand, "template", ""));
        if (t->options)
            dt_json_set_take(b, "options", cJSON_Duplicate(t->options, 1));
        dt_json_set_take(res, "best", b);
    }
    if (t->options)
        dt_json_set_take(res, "options", cJSON_Duplicate(t->options, 1));
    if (t->base_us > 0) {
        cJSON *qb = dt_json_obj();
        dt_json_set_str(qb, "alg", t->base_alg);
        dt_json_set_num(qb, "us", t->base_us);
        dt_json_set_take(res, "quick_baseline", qb);
    }
    if (t->widened) {
        dt_json_set_take(res, "widened", t->widened);
        t->widened = NULL;
    }
    honest_outcome(t, res);
    dt_json_set_num(res, "seconds", dt_now() - t->t0);
    int active = 0;
    for (int i = 0; i < t->nv; i++)
        active += !t->v[i].reserve;
    dt_json_set_int(res, "variants", active);
    dt_json_set_bool(res, "cached", t->cached);
    if (t->o.compile_only) {
        /* Every variant is accounted for: compiled, refused by NVRTC with
         * its diagnostic, or lost with the pool's error. */
        int ok = 0, bad = 0, lost = 0;
        for (int i = 0; i < t->nv; i++) {
            if (t->v[i].reserve)
                continue;
            ok += t->v[i].compiled == 1;
            bad += t->v[i].compiled == 0;
            lost += t->v[i].compiled < 0;
        }
        dt_json_set_bool(res, "compile_only", 1);
        dt_json_set_int(res, "compiled", ok);
        dt_json_set_int(res, "not_compiled", bad);
        dt_json_set_int(res, "lost", lost);
        progress(t,
                 "%d variants: %d compiled and checked, %d refused by the compiler, %d lost "
                 "(%.1f s, %.1f variants per minute)",
                 active, ok, bad, lost, dt_now() - t->t0, active / ((dt_now() - t->t0) / 60.0));
    }
    cJSON *pw = dt_json_arr();
    dt_buf line = DT_BUF_INIT;
    for (int i = 0; i < t->npw; i++) {
        cJSON_AddItemToArray(pw, cJSON_CreateNumber(t->per_worker[i]));
        dt_buf_printf(&line, "%sworker %d: %d", i ? ", " : "", i, t->per_worker[i]);
    }
    dt_json_set_take(res, "per_worker", pw);
    if (t->npw > 1)
        progress(t, "answers per worker: %s (restarts: %d)", dt_buf_str(&line),
                 gpu_pool_restarts(t->o.pool));
    dt_buf_free(&line);
    compile_cache_summary(t, res);
    /* Cache the winners' params (not their timings, which are re-measured). */
    if (t->o.use_cache && t->cache_path[0] && best) {
        cJSON *c = dt_json_obj();
        cJSON *w = dt_json_obj();
        for (int si = 0; si < t->nst; si++) {
            const cJSON *sb = cJSON_GetObjectItem(cJSON_GetArrayItem(strats, si), "best");
            if (sb)
                dt_json_set_take(w, dt_json_str(t->st[si].cand, "strategy", ""),
                                 cJSON_Duplicate(cJSON_GetObjectItem(sb, "params"), 1));
        }
        dt_json_set_take(c, "winners", w);
        char *text = dt_json_print(c, 1);
        dt_err e = {0};
        if (dt_write_file_atomic(t->cache_path, text, strlen(text), &e) != 0)
            dt_debug("tune cache: %s", e.msg);
        free(text);
        cJSON_Delete(c);
    }
    if (t->o.done)
        t->o.done(res, t->o.ud);
    else
        cJSON_Delete(res);
}

static void cache_key(ag_tuner *t)
{
    char *dir = dt_cache_dir();
    if (dir == NULL || !t->o.use_cache) {
        free(dir);
        return;
    }
    uint64_t h = DT_HASH_SEED;
    h = dt_hash_str(t->o.fingerprint ? t->o.fingerprint : "", h);
    h = dt_hash_str(sp_op_name(t->o.spec->op), h);
    h = dt_hash_str(sp_dtype_name(t->o.spec->dtype), h);
    h = dt_hash64(&t->o.spec->n, sizeof t->o.spec->n, h);
    h = dt_hash_str(t->o.gpu ? t->o.gpu : "", h);
    if (t->options) {
        /* a winner found without a register cap is no winner with one */
        char *op = dt_json_print(t->options, 0);
        h = dt_hash_str(op, h);
        free(op);
    }
    for (int si = 0; si < t->nst; si++) {
        char *path = dt_share_path(dt_json_str(t->st[si].cand, "template", ""));
        char *src = path ? dt_read_file(path, NULL, NULL) : NULL;
        h = dt_hash_str(src ? src : "", h);
        char *sp = dt_json_print(cJSON_GetObjectItem(t->st[si].cand, "space"), 0);
        h = dt_hash_str(sp, h);
        free(sp);
        free(src);
        free(path);
    }
    char hex[17];
    dt_hash_hex(h, hex);
    char *tdir = dt_xasprintf("%s/tune", dir);
    dt_err e = {0};
    if (dt_mkdir_p(tdir, &e) == 0)
        snprintf(t->cache_path, sizeof t->cache_path, "%s/%s.json", tdir, hex);
    free(tdir);
    free(dir);
}

ag_tuner *ag_tuner_start(const ag_tune_opts *o, dt_err *e)
{
    if (o->pool == NULL || o->spec == NULL || !cJSON_IsArray(o->candidates)) {
        dt_err_set(e, "tuner: a pool, a spec and candidates are needed");
        return NULL;
    }
    ag_tuner *t = dt_xcalloc(1, sizeof *t);
    t->o = *o;
    if (t->o.budget_variants <= 0)
        t->o.budget_variants = 24;
    if (t->o.budget_s <= 0)
        t->o.budget_s = 120;
    t->cands = cJSON_Duplicate(o->candidates, 1);
    t->more = cJSON_IsArray(o->more) ? cJSON_Duplicate(o->more, 1) : NULL;
    t->nst = cJSON_GetArraySize(t->cands);
    t->st = dt_xcalloc((size_t)(t->nst ? t->nst : 1), sizeof *t->st);
    int i = 0;
    cJSON *c;
    cJSON_ArrayForEach(c, t->cands)
        t->st[i++].cand = c;
    for (int si = 0; si < t->nst; si++)
        t->st[si].around = -1;
    if (t->o.refine == 0)
        t->o.refine = t->o.budget_variants / 2 > 2 ? t->o.budget_variants / 2 : 2;
    t->t0 = dt_now();
    if (cJSON_IsArray(o->options) && cJSON_GetArraySize(o->options) > 0) {
        t->options = cJSON_Duplicate(o->options, 1);
        t->options_why = o->options_why ? dt_xstrdup(o->options_why) : NULL;
    }
    t->o.options = NULL; /* borrowed for the call: the copies above are used */
    t->o.options_why = NULL;
    cache_key(t);
    cJSON *cached = t->cache_path[0] ? dt_json_read_file(t->cache_path, NULL) : NULL;
    const cJSON *winners = cJSON_GetObjectItem(cached, "winners");
    for (int si = 0; si < t->nst; si++) {
        const cJSON *w = cJSON_GetObjectItem(winners, dt_json_str(t->st[si].cand, "strategy", ""));
        if (w != NULL && !t->o.compile_only) {
            /* A cached winner: verify and measure it again, skip the search. */
            add_variant(t, si, cJSON_Duplicate(w, 1), e);
            t->st[si].cached = 1;
            t->cached = 1;
        } else {
            enumerate(t, si, e);
        }
    }
    cJSON_Delete(cached);
    int reserve = 0;
    for (int k = 0; k < t->nv; k++)
        reserve += t->v[k].reserve;
    progress(t,
             "tuning %d strateg%s, %d variants%s (budget %d per strategy, %.0f s; %d more in "
             "reserve for variants that turn out to be the same kernel as an earlier one)",
             t->nst, t->nst == 1 ? "y" : "ies", t->nv - reserve,
             t->cached ? ", some from the cache" : "", t->o.budget_variants, t->o.budget_s,
             reserve);
    if (t->options) {
        dt_buf ob = DT_BUF_INIT;
        const cJSON *op;
        cJSON_ArrayForEach(op, t->options)
        {
            dt_buf_printf(&ob, "%s%s", ob.len ? " " : "",
                          cJSON_IsString(op) ? op->valuestring : "?");
        }
        progress(t, "every variant is compiled with %s%s%s", dt_buf_str(&ob),
                 t->options_why ? ": " : "", t->options_why ? t->options_why : "");
        dt_buf_free(&ob);
    }
    t->npw = gpu_pool_size(t->o.pool);
    t->per_worker = dt_xcalloc((size_t)t->npw, sizeof *t->per_worker);
    gpu_pool_cubin_stats(t->o.pool, &t->cubins0);
    t->stage = gpu_pool_size(t->o.pool) > 1 || t->o.compile_only ? 0 : 1;
    pump(t);
    return t;
}

int ag_tuner_done(const ag_tuner *t)
{
    return t->done;
}

void ag_tuner_free(ag_tuner *t)
{
    if (t == NULL)
        return;
    t->freeing = 1;
    for (int i = 0; i < t->nids; i++)
        gpu_pool_cancel(t->o.pool, t->ids[i]);
    free(t->ids);
    for (int i = 0; i < t->nv; i++) {
        cJSON_Delete(t->v[i].params);
        free(t->v[i].source);
        free(t->v[i].error);
        cJSON_Delete(t->v[i].measure);
        cJSON_Delete(t->v[i].final);
        free(t->v[i].key);
        cJSON_Delete(t->v[i].checks);
    }
    free(t->per_worker);
    free(t->timing_dev);
    free(t->v);
    free(t->st);
    cJSON_Delete(t->cands);
    cJSON_Delete(t->widened);
    cJSON_Delete(t->more);
    cJSON_Delete(t->options);
    free(t->options_why);
    free(t);
}

/* ---- the orchestrator's tune step ------------------------------------------------- */

static void tune_progress(const char *line, void *ud)
{
    ag_run *r = ud;
    if (r->cur && r->cur->kind == AG_TUNE)
        ag_text(r, r->cur, "%s\n", line);
}

static void tune_done(cJSON *res, void *ud)
{
    ag_run *r = ud;
    ag_step *s = r->cur;
    if (s == NULL || s->kind != AG_TUNE) {
        cJSON_Delete(res);
        return;
    }
    cJSON *b = cJSON_GetObjectItem(res, "best");
    if (b) {
        /* The tuned kernel is a new version of the code: name it by the
         * generate version it grew from. */
        dt_json_set_int(b, "version", r->kernel_version);
        char *ps = dt_json_print(cJSON_GetObjectItem(b, "params"), 0);
        ag_text(r, s, "Best variant: %s %s: %.2f us, %.2fx the best cuSPARSE (%s).\n",
                dt_json_str(b, "strategy", ""), ps, dt_json_num(b, "us", 0),
                dt_json_num(b, "speedup", 0), dt_json_str(b, "baseline", ""));
        free(ps);
        const cJSON *u = cJSON_GetObjectItem(res, "use");
        if (u)
            ag_text(r, s,
                    "No generated kernel beats cuSPARSE on this problem: call cuSPARSE %s "
                    "(%.2f us; the best kernel is %.2fx of it). `ditto export` names the call.\n",
                    dt_json_str(u, "alg", ""), dt_json_num(u, "us", 0),
                    dt_json_num(u, "speedup", 0));
    }
    /* The tuned best must beat the untuned best to replace it (adopt()). */
    ag_complete(r, s, res, b != NULL, b ? NULL : "no tuned variant passed verification");
}

void ag_tune(ag_run *r, ag_step *s)
{
    if (!r->have_gpu || r->plan == NULL) {
        ag_text(r, s, "Nothing to tune.\n");
        ag_complete(r, s, dt_json_obj(), 1, NULL);
        return;
    }
    /* Tune the strategy of the best verified version so far (the last plan
     * may have been a worse alternative tried after it), with the space
     * the ranking gave it. */
    const char *sname = r->best ? dt_json_str(r->best, "strategy", "") : dt_json_str(r->plan, "strategy", "");
    const cJSON *from = NULL, *c0;
    cJSON_ArrayForEach(c0, r->candidates)
        if (dt_streq(dt_json_str(c0, "strategy", ""), sname))
            from = c0;
    cJSON *cands = dt_json_arr();
    cJSON *c = dt_json_obj();
    if (from) {
        dt_json_set_str(c, "strategy", sname);
        dt_json_set_str(c, "template", dt_json_str(from, "template", ""));
        dt_json_set_take(c, "space", cJSON_Duplicate(cJSON_GetObjectItem(from, "space"), 1));
    } else {
        dt_json_set_str(c, "strategy", dt_json_str(r->plan, "strategy", ""));
        dt_json_set_str(c, "template", dt_json_str(r->plan, "template", ""));
        dt_json_set_take(c, "space", cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "space"), 1));
    }
    const cJSON *own = r->best ? cJSON_GetObjectItem(r->best, "params")
                               : cJSON_GetObjectItem(r->plan, "params");
    dt_json_set_take(c, "params", cJSON_Duplicate(own, 1));
    cJSON_AddItemToArray(cands, c);
    ag_text(r, s, "Tuning %s, the strategy of the best verified version so far.\n", sname);
    /* a reviewer's register cap holds for every variant, not only the
     * kernel it was said about */
    cJSON *opts = NULL;
    char why[700] = "";
    if (r->kernel_option) {
        opts = dt_json_arr();
        cJSON_AddItemToArray(opts, cJSON_CreateString(r->kernel_option));
        const cJSON *w;
        cJSON_ArrayForEach(w, r->wishes)
        {
            if (dt_streq(dt_json_str(w, "kind", ""), "fewer-registers"))
                snprintf(why, sizeof why, "because you said \"%s\"", dt_json_str(w, "said", ""));
        }
    }
    ag_tune_opts o = {.pool = r->o.pool,
                      .spec = &r->spec,
                      .matrix = "m",
                      .fingerprint = r->fingerprint,
                      .gpu = r->gpu_name,
                      .candidates = cands,
                      .more = r->candidates, /* the ranking, to widen to (sname is skipped) */
                      .budget_variants = r->o.tune_budget_variants,
                      .budget_s = r->o.tune_budget_s,
                      .use_cache = 1,
                      .options = opts,
                      .options_why = why[0] ? why : NULL,
                      .progress = tune_progress,
                      .done = tune_done,
                      .ud = r};
    dt_err e = {0};
    ag_tuner_free(r->tuner);
    r->tuner = ag_tuner_start(&o, &e);
    cJSON_Delete(cands);
    cJSON_Delete(opts);
    if (r->tuner == NULL)
        ag_complete(r, s, NULL, 0, e.msg);
}

void ag_tune_free(ag_run *r)
{
    ag_tuner_free(r->tuner);
    r->tuner = NULL;
}
