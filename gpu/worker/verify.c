/* verify.c -- the verification battery: outputs against the fp64
 * reference and cuSPARSE, cached and fresh values, poison and guards, the
 * edge matrices, and the verify request. */
#include "gpu/worker/runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- checks ------------------------------------------------------------------- */

static cJSON *check_new(cJSON *checks, const char *name, int passed)
{
    cJSON *c = dt_json_obj();
    dt_json_set_str(c, "name", name);
    dt_json_set_bool(c, "passed", passed);
    cJSON_AddItemToArray(checks, c);
    return c;
}

static void set_first_bad(cJSON *c, size_t idx, const sp_csr *a, const wk_problem *p,
                          sp_layout layout, double expected, double got, int untouched)
{
    cJSON *fb = dt_json_obj();
    dt_json_set_int(fb, "index", (int64_t)idx);
    if (p->op == SP_SPMM) {
        size_t n = (size_t)p->n;
        size_t rows = (size_t)a->rows;
        dt_json_set_int(fb, "row", (int64_t)(layout == SP_ROW_MAJOR ? idx / n : idx % rows));
        dt_json_set_int(fb, "col", (int64_t)(layout == SP_ROW_MAJOR ? idx % n : idx / rows));
    } else if (p->op == SP_SDDMM) {
        int32_t lo = 0, hi = a->rows; /* find the row of nonzero idx */
        while (hi - lo > 1) {
            int32_t mid = (lo + hi) / 2;
            if (a->rowptr[mid] <= (int64_t)idx)
                lo = mid;
            else
                hi = mid;
        }
        dt_json_set_int(fb, "row", lo);
        dt_json_set_int(fb, "col", a->col[idx]);
    } else {
        dt_json_set_int(fb, "row", (int64_t)idx);
    }
    dt_json_set_num(fb, "expected", expected);
    if (untouched)
        dt_json_set_str(fb, "got", "never written (NaN poison)");
    else if (isnan(got))
        dt_json_set_str(fb, "got", "NaN");
    else if (isinf(got))
        dt_json_set_str(fb, "got", got > 0 ? "Inf" : "-Inf");
    else
        dt_json_set_num(fb, "got", got);
    dt_json_set_take(c, "first_bad", fb);
}

typedef struct tally_job {
    tally_fn fn;
    const cmp_arrays *c;
    tally part[SP_PAR_MAX];
} tally_job;

static void tally_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    tally_job *j = ctx;
    j->fn(j->c, (size_t)lo, (size_t)hi, &j->part[part]);
}

/* Run fn over outputs [0, n) in parts and merge the parts in order. */
tally run_tally_outputs(size_t n, tally_fn fn, const cmp_arrays *c)
{
    tally_job j = {.fn = fn, .c = c};
    int parts = sp_parallel_for((int64_t)n, 2 * (int64_t)n, tally_range, &j);
    tally r = {0};
    for (int p = 0; p < parts; p++) {
        const tally *t = &j.part[p];
        if (r.bad == 0 && t->bad > 0)
            r.first_bad = t->first_bad;
        if (r.other == 0 && t->other > 0)
            r.first_other = t->first_other;
        r.bad += t->bad;
        r.other += t->other;
        if (t->max_err > r.max_err)
            r.max_err = t->max_err;
        if (t->max_ratio > r.max_ratio)
            r.max_ratio = t->max_ratio;
    }
    return r;
}

/* Against the reference: other counts the outputs never written (still
 * poison), which are not compared; bad those outside their tolerance. */
void run_reference_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got = c->got, *ref = c->ref, *tol = c->tol;
    const unsigned char *untouched = c->untouched;
    tally r = {0}; /* in registers: t's fields would be stored every output */
    for (size_t i = lo; i < hi; i++) {
        if (untouched != NULL && untouched[i]) {
            if (r.other++ == 0)
                r.first_other = i;
            continue;
        }
        double err = fabs(got[i] - ref[i]);
        if (isnan(got[i]) || !(err <= tol[i])) {
            if (r.bad++ == 0)
                r.first_bad = i;
        }
        if (!isnan(err) && err > r.max_err)
            r.max_err = err;
        /* The division only where the ratio can grow (the same maximum:
         * a NaN error or tolerance compares false both ways). */
        if (err > r.max_ratio * tol[i]) {
            double ratio = err / tol[i];
            if (!isnan(ratio) && ratio > r.max_ratio)
                r.max_ratio = ratio;
        }
    }
    *t = r;
}

/* Compare against the reference; returns 1 when every element is within its
 * tolerance (NaN never is). */
static int check_reference(cJSON *checks, const char *label, const operands *o, const double *got,
                           const unsigned char *untouched, const sp_csr *a, const wk_problem *p,
                           sp_layout layout)
{
    cmp_arrays ca = {.got = got, .ref = o->ref, .tol = o->tol, .untouched = untouched};
    tally t = run_tally_outputs(o->nout, run_reference_tally, &ca);
    size_t bad = t.bad, unwritten = t.other, first = t.first_bad, first_unw = t.first_other;
    double max_err = t.max_err, max_ratio = t.max_ratio;
    char name[128];
    snprintf(name, sizeof name, "%s: every output written", label);
    cJSON *cw = check_new(checks, name, unwritten == 0);
    if (unwritten) {
        char d[128];
        snprintf(d, sizeof d, "%zu of %zu outputs never written", unwritten, o->nout);
        dt_json_set_str(cw, "detail", d);
        set_first_bad(cw, first_unw, a, p, layout, o->ref[first_unw], NAN, 1);
    }
    snprintf(name, sizeof name, "%s: matches the fp64 reference", label);
    cJSON *cr = check_new(checks, name, bad == 0);
    dt_json_set_num(cr, "max_err", max_err);
    dt_json_set_num(cr, "max_ratio", max_ratio);
    if (bad) {
        char d[160];
        snprintf(d, sizeof d, "%zu of %zu written outputs outside tolerance", bad,
                 o->nout - unwritten);
        dt_json_set_str(cr, "detail", d);
        set_first_bad(cr, first, a, p, layout, o->ref[first], got[first], 0);
    }
    return unwritten == 0 && bad == 0;
}

typedef struct battery {
    cJSON *checks;
    int passed;
} battery;

static void fail_check(battery *b, const char *name, const char *detail)
{
    cJSON *c = check_new(b->checks, name, 0);
    dt_json_set_str(c, "detail", detail);
    b->passed = 0;
}

/* The candidate (got) against cuSPARSE (got2): bad counts the outputs
 * apart by more than twice the tolerance; other those where cuSPARSE itself
 * is outside it. tol2, where set, is the slack of cuSPARSE's own extra
 * rounding (see check_cusparse), added to both bounds. */
static void cusparse_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got = c->got, *cs = c->got2, *ref = c->ref, *tol = c->tol, *slack = c->tol2;
    tally r = {0};
    for (size_t i = lo; i < hi; i++) {
        const double sl = slack ? slack[i] : 0.0;
        if (!(fabs(cs[i] - ref[i]) <= tol[i] + sl))
            r.other++;
        if (!(fabs(got[i] - cs[i]) <= 2.0 * tol[i] + sl) && r.bad++ == 0)
            r.first_bad = i;
    }
    *t = r;
}

/* No cached answers, sets 0 and 1: other counts the outputs whose
 * references differ by more than both tolerances, bad those of them where
 * the two outputs are nevertheless equal. */
static void cached_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got0 = c->got, *got1 = c->got2, *ref0 = c->ref, *ref1 = c->ref2;
    const double *tol0 = c->tol, *tol1 = c->tol2;
    tally r = {0};
    for (size_t i = lo; i < hi; i++) {
        if (fabs(ref0[i] - ref1[i]) > tol0[i] + tol1[i]) {
            r.other++;
            if (got0[i] == got1[i] && r.bad++ == 0)
                r.first_bad = i;
        }
    }
    *t = r;
}

/* Determinism, got against the rerun got2: other counts the outputs not
 * bit-identical, bad those of them apart by more than the tolerance. */
static void rerun_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t)
{
    const double *got = c->got, *again = c->got2, *tol = c->tol;
    tally r = {0};
    for (size_t i = lo; i < hi; i++) {
        if (memcmp(&again[i], &got[i], sizeof(double)) != 0) {
            r.other++;
            if (!(fabs(again[i] - got[i]) <= tol[i]) && r.bad++ == 0)
                r.first_bad = i;
        }
    }
    *t = r;
}

/* Run the cuSPARSE CSR_ALG1 (or the SDDMM default) on the same inputs and
 * compare the candidate with it. */
static void check_cusparse(battery *b, wk_matrix *m, const wk_problem *p, sp_layout layout,
                           const operands *o, const double *got, dt_err *e)
{
    const char *name = "set 0: agrees with cuSPARSE";
    dt_err le = {0};
    if (gpu_cusparse_load(&le) != 0) {
        cJSON *c = check_new(b->checks, name, 1);
        dt_json_set_bool(c, "skipped", 1);
        dt_json_set_str(c, "detail", "cuSPARSE not loaded");
        return;
    }
    const dev_fmt *csr = run_matrix_fmt(m, "csr", NULL, p->dtype, e);
    if (csr == NULL)
        return;
    size_t es = (size_t)sp_dtype_size(p->dtype);
    dev_buf in1 = {0}, in2 = {0}, out = {0};
    double *cs = run_xalloc_doubles(o->nout, e);
    gpu_cs_problem cp = {.op = p->op,
                         .dtype = p->dtype,
                         .n = p->n,
                         .layout = layout,
                         .host = m->a,
                         .csr = csr,
                         .alpha = p->alpha,
                         .beta = p->beta};
    gpu_cs_result r;
    memset(&r, 0, sizeof r);
    int rc = -1;
    if (cs == NULL || dev_alloc(&in1, o->nin1 * es, e) != 0 ||
        (o->nin2 && dev_alloc(&in2, o->nin2 * es, e) != 0) || dev_alloc(&out, o->nout * es, e) != 0)
        goto done;
    if (run_put(&in1, o->in1, o->nin1, p->dtype, e) != 0 ||
        run_put(&in2, o->in2, o->nin2, p->dtype, e) ||
        run_put(&out, o->out0, o->nout, p->dtype, e) != 0)
        goto done;
    if (p->op == SP_SPMV) {
        cp.x = in1.ptr;
        cp.y = out.ptr;
    } else if (p->op == SP_SPMM) {
        cp.B = in1.ptr;
        cp.C = out.ptr;
    } else {
        cp.A = in1.ptr;
        cp.Bt = in2.ptr;
        cp.out = out.ptr;
    }
    const char *alg = p->op == SP_SDDMM ? "CSR_ALG_DEFAULT" : "CSR_ALG1";
    dt_err ce = {0};
    if (gpu_cusparse_run(&cp, alg, 0, 1, 0, &r, &ce) != 0) {
        if (ce.code == DEV_EFAULT) {
            *e = ce;
            e->code = WK_EFAULT;
            goto done;
        }
        cJSON *c = check_new(b->checks, name, 1);
        dt_json_set_bool(c, "skipped", 1);
        dt_json_set_str(c, "detail", ce.msg);
        rc = 0;
        goto done;
    }
    unsigned char *raw = malloc(o->nout * es + 8);
    if (raw == NULL || dev_download(raw, &out, o->nout * es, e) != 0) {
        free(raw);
        goto done;
    }
    sp_from_dtype(raw, cs, o->nout, p->dtype);
    free(raw);
    /* cuSPARSE has no epilogue: its output was rounded to the dtype before
     * the host applies the bias or GeLU, where the kernel and the reference
     * round once, after it. That extra rounding is at most u |v| of the
     * value before the epilogue (GeLU's slope stays below 1.13), which in
     * fp16 and bf16 can pass the tolerance by itself (bf16 Franz6 with a
     * bias: 107 outputs); ReLU commutes with rounding and needs none. */
    double *slack = NULL;
    if (p->epilogue == SP_EPI_BIAS || p->epilogue == SP_EPI_GELU) {
        slack = run_xalloc_doubles(o->nout, e);
        if (slack == NULL)
            goto done;
        const double k = (p->epilogue == SP_EPI_GELU ? 1.13 : 1.0) * run_u_of(p->dtype);
        for (size_t i = 0; i < o->nout; i++)
            slack[i] = k * fabs(cs[i]);
    }
    run_epilogue_on_host(p, m->a, layout, o->bias, cs, o->nout);
    cmp_arrays ca = {.got = got, .got2 = cs, .ref = o->ref, .tol = o->tol, .tol2 = slack};
    tally t = run_tally_outputs(o->nout, cusparse_tally, &ca);
    free(slack);
    size_t bad = t.bad, first = t.first_bad, cs_bad = t.other;
    cJSON *c = check_new(b->checks, name, bad == 0);
    dt_json_set_str(c, "algorithm", alg);
    if (cs_bad) {
        char d[160];
        snprintf(d, sizeof d,
                 "note: cuSPARSE itself is outside the reference tolerance at %zu "
                 "outputs",
                 cs_bad);
        dt_json_set_str(c, "note", d);
    }
    if (bad) {
        char d[128];
        snprintf(d, sizeof d, "%zu outputs differ from cuSPARSE by more than twice the tolerance",
                 bad);
        dt_json_set_str(c, "detail", d);
        set_first_bad(c, first, m->a, p, layout, cs[first], got[first], 0);
        b->passed = 0;
    }
    rc = 0;
done:
    (void)rc;
    free(cs);
    dev_free(&in1);
    dev_free(&in2);
    dev_free(&out);
}

/* Read the inputs back and compare with what was uploaded. */
static int inputs_unchanged(instance *in, const wk_problem *p, const operands *o,
                            const char **which, dt_err *e)
{
    if (dev_fmt_changed(in->fmt, which, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    if (*which != NULL) {
        in->fmt_dirty = 1;
        return 0;
    }
    size_t es = in->esize;
    struct {
        const dev_buf *b;
        const double *v;
        size_t n;
        const char *name;
    } arrs[] = {{&in->in1, o->in1, o->nin1,
                 p->op == SP_SPMV   ? "x"
                 : p->op == SP_SPMM ? "B"
                                    : "A"},
                {&in->in2, o->in2, o->nin2, "Bt"},
                {&in->bias, o->bias, (size_t)in->a->rows, "bias"}};
    for (size_t i = 0; i < DT_ARRAY_LEN(arrs); i++) {
        if (arrs[i].n == 0)
            continue;
        unsigned char *raw = malloc(arrs[i].n * es);
        unsigned char *want = malloc(arrs[i].n * es);
        if (raw == NULL || want == NULL) {
            free(raw);
            free(want);
            e->code = WK_ENOMEM;
            return dt_err_set(e, "out of host memory");
        }
        sp_to_dtype(arrs[i].v, want, arrs[i].n, p->dtype);
        if (dev_download(raw, arrs[i].b, arrs[i].n * es, e) != 0) {
            free(raw);
            free(want);
            e->code = wk_from_dev(e->code);
            return -1;
        }
        int same = memcmp(raw, want, arrs[i].n * es) == 0;
        free(raw);
        free(want);
        if (!same) {
            *which = arrs[i].name;
            return 0;
        }
    }
    return 0;
}

/* The battery on one matrix. m is the worker's matrix (cached formats and
 * the cuSPARSE cross-check) or NULL for an edge matrix. Returns -1 only for
 * errors that end the request (faults, contract, memory); kernel failures
 * are recorded as failed checks. */
/* 1 when the contract's parameters name `name` (alpha, beta). */
static int takes_param(const gpu_contract *c, const char *name)
{
    for (int i = 0; i < c->nparams; i++)
        if (strcmp(c->params[i], name) == 0)
            return 1;
    return 0;
}

/* The scalars of the battery's scalar set, drawn from the seed: alpha and
 * beta away from 0 and 1 (|v| in [0.5, 1.75), either sign, exact in every
 * dtype), each only where the contract takes it. */
static void scalar_set(const gpu_contract *c, const wk_problem *p, wk_problem *q)
{
    *q = *p;
    uint64_t r = mix64(p->seed ^ 0xa5a5a5a5a5a5a5a5ULL);
    double a = 0.5 + (double)(r & 0xf) / 16.0 + ((r & 0xf) == 8 ? 0.0625 : 0.0);
    double bt = 0.5 + (double)((r >> 4) & 0xf) / 16.0 + (((r >> 4) & 0xf) == 8 ? 0.0625 : 0.0);
    if (takes_param(c, "alpha"))
        q->alpha = (r >> 8) & 1 ? -a : a;
    if (takes_param(c, "beta"))
        q->beta = (r >> 9) & 1 ? -bt : bt;
}

static int run_battery(wk_state *w, wk_matrix *m, const sp_csr *a, const wk_kernel *kn,
                       const wk_problem *p, int sets, int scalars, const char *label, battery *b,
                       dt_err *e)
{
    instance in;
    int prc = run_instance_prepare(w, m, a, kn, p, &in, e);
    if (prc < 0) {
        if (e->code == WK_ELAUNCH) { /* the kernel's resources, not ditto's fault */
            char nm[128];
            snprintf(nm, sizeof nm, "%s: launch", label);
            fail_check(b, nm, e->msg);
            dt_err_clear(e);
            return 0;
        }
        return -1;
    }
    char nm[160];
    if (prc == 1) {
        snprintf(nm, sizeof nm, "%s: compile", label);
        cJSON *c = check_new(b->checks, nm, 0);
        cJSON *cj = gpu_cubin_json(in.cubin);
        dt_json_set_take(c, "diagnostics",
                         cJSON_Duplicate(cJSON_GetObjectItem(cj, "diagnostics"), 1));
        cJSON_Delete(cj);
        dt_json_set_str(c, "detail", "the kernel does not compile for this matrix");
        b->passed = 0;
        run_instance_release(&in, m == NULL);
        return 0;
    }
    const gpu_contract *c = &kn->contract;
    sp_layout layout = c->layout;
    int rc = -1;
    operands ops[2];
    memset(ops, 0, sizeof ops);
    double *got[3] = {NULL, NULL, NULL};
    unsigned char *unt = NULL;
    int nsets = sets < 1 ? 1 : sets > 128 ? 128 : sets; /* check and verify take at most 100 */
    /* Which set runs first, and how many unchecked launches (the output
     * re-poisoned after each) come before each checked one, follow the seed
     * and the label: no fixed launch sequence marks a verification. The
     * scalar set is the last index (a third set). */
    int order[128];
    uint64_t rs = mix64(p->seed ^ dt_hash_str(label, DT_HASH_SEED));
    for (int s = 0; s < nsets; s++)
        order[s] = s;
    for (int s = nsets - 1; s > 0; s--) {
        rs = mix64(rs + GOLDEN);
        int j = (int)(rs % (uint64_t)(s + 1));
        int t = order[s];
        order[s] = order[j];
        order[j] = t;
    }
    static const char *const gnames[4][3] = {
        {"x", "B", "A"}, {"-", "-", "Bt"}, {"y", "C", "out"}, {"bias", "bias", "bias"}};
    const char *names[4] = {gnames[0][p->op], gnames[1][p->op], gnames[2][p->op], gnames[3][p->op]};
    for (int k = 0; k < nsets; k++) {
        int s = order[k];
        wk_problem q = *p;
        int scal = scalars && nsets >= 3 && s == nsets - 1;
        if (scal)
            scalar_set(c, p, &q);
        char sl[96];
        if (scal && (q.alpha != p->alpha || q.beta != p->beta))
            snprintf(sl, sizeof sl, "set %d (alpha %g, beta %g)", s, q.alpha, q.beta);
        else
            snprintf(sl, sizeof sl, "set %d", s);
        operands cur, base;
        /* Set 1 is set 0 but for about one input value in 64, and its
         * unchecked launches (one or two) run on set 0's inputs: a kernel
         * that keys a memo (in its scratch, say) on a few inputs replays set
         * 0's answer at set 1's checked launch, whichever order the sets run
         * in. Set 0's inputs are drawn again for it, without a reference. */
        int near = s == 1 && !scal;
        if (near && run_make_operands(a, in.av, &q, layout, 0, 0, &base, e) != 0)
            goto out;
        int mrc =
            run_make_operands_any(a, in.av, &q, layout, s, 1, near ? &base : NULL, scal, &cur, e);
        if (mrc != 0) {
            if (near)
                run_operands_free(&base);
            goto out;
        }
        double *g = run_xalloc_doubles(cur.nout, e);
        if (g == NULL || (unt == NULL && (unt = malloc(cur.nout + 1)) == NULL)) {
            free(g);
            run_operands_free(&cur);
            if (near)
                run_operands_free(&base);
            e->code = WK_ENOMEM;
            goto out;
        }
        in.bind.alpha = q.alpha;
        in.bind.beta = q.beta;
        rs = mix64(rs + GOLDEN);
        int decoys = near ? 1 + (int)(rs % 2) : (int)(rs % 3);
        const operands *dop = near ? &base : &cur;
        int drc = run_upload_inputs(&in, &q, dop, e);
        for (int d = 0; drc == 0 && d < decoys; d++)
            drc = run_init_output(&in, &q, dop, e) != 0 ||
                          dev_launch(&in.k, c, &in.bind, dev_stream(), e) != 0 || dev_sync(e) != 0
                      ? -1
                      : 0;
        if (near) {
            if (drc == 0)
                drc = run_upload_inputs(&in, &q, &cur, e);
            run_operands_free(&base);
        }
        if (drc != 0 || run_init_output(&in, &q, &cur, e) != 0 ||
            run_once(&in, c, cur.nout, q.dtype, g, unt, e) != 0) {
            free(g);
            run_operands_free(&cur);
            in.bind.alpha = p->alpha;
            in.bind.beta = p->beta;
            e->code = wk_from_dev(e->code);
            goto out;
        }
        in.bind.alpha = p->alpha;
        in.bind.beta = p->beta;
        {
            const char *gw = NULL;
            int before = 0;
            dt_err ge = {0};
            if (run_guards_intact(&in, names, &gw, &before, &ge) != 0) {
                *e = ge;
                e->code = wk_from_dev(e->code);
                free(g);
                run_operands_free(&cur);
                goto out;
            }
            snprintf(nm, sizeof nm, "%s%s: no writes outside the buffers", label, sl);
            cJSON *gk = check_new(b->checks, nm, gw == NULL);
            if (gw != NULL) {
                char d[160];
                snprintf(d, sizeof d,
                         "wrote %s '%s' (the %d bytes of guard there changed): an out-of-bounds "
                         "write",
                         before ? "before the start of" : "past the end of", gw, WK_GUARD);
                dt_json_set_str(gk, "detail", d);
                b->passed = 0;
            }
        }
        snprintf(nm, sizeof nm, "%s%s", label, sl);
        if (!check_reference(b->checks, nm, &cur, g, unt, a, &q, layout))
            b->passed = 0;
        const char *which = NULL;
        dt_err ue = {0};
        if (inputs_unchanged(&in, &q, &cur, &which, &ue) != 0) {
            *e = ue;
            free(g);
            run_operands_free(&cur);
            goto out;
        }
        snprintf(nm, sizeof nm, "%s%s: inputs unchanged", label, sl);
        cJSON *ck = check_new(b->checks, nm, which == NULL);
        if (which) {
            char d[96];
            snprintf(d, sizeof d, "the kernel wrote into its input '%s'", which);
            dt_json_set_str(ck, "detail", d);
            b->passed = 0;
        }
        if (m != NULL && s == 0)
            check_cusparse(b, m, p, layout, &cur, g, e);
        if (e->code == WK_EFAULT) {
            free(g);
            run_operands_free(&cur);
            goto out;
        }
        if (s < 2 && !scal) {
            got[s] = g;
            ops[s] = cur;
        } else {
            free(g);
            run_operands_free(&cur);
        }
    }
    if (nsets >= 2) {
        /* No cached answers: where the references of two sets differ by
         * more than both tolerances, the outputs must differ too. */
        cmp_arrays ca = {.got = got[0],
                         .got2 = got[1],
                         .ref = ops[0].ref,
                         .ref2 = ops[1].ref,
                         .tol = ops[0].tol,
                         .tol2 = ops[1].tol};
        tally t = run_tally_outputs(ops[0].nout, cached_tally, &ca);
        size_t same = t.bad, first = t.first_bad, cmp = t.other;
        snprintf(nm, sizeof nm, "%sno cached answers", label);
        cJSON *ck = check_new(b->checks, nm, same == 0);
        if (same) {
            char d[160];
            snprintf(d, sizeof d, "%zu of %zu outputs identical across two different input sets",
                     same, cmp);
            dt_json_set_str(ck, "detail", d);
            set_first_bad(ck, first, a, p, layout, ops[1].ref[first], got[1][first], 0);
            b->passed = 0;
        }
    }
    /* Determinism: set 0 again. */
    {
        double *g2 = run_xalloc_doubles(ops[0].nout, e);
        if (g2 == NULL)
            goto out;
        if (run_upload_inputs(&in, p, &ops[0], e) != 0 ||
            run_init_output(&in, p, &ops[0], e) != 0 ||
            run_once(&in, c, ops[0].nout, p->dtype, g2, NULL, e) != 0) {
            free(g2);
            e->code = wk_from_dev(e->code);
            goto out;
        }
        cmp_arrays ca = {.got = got[0], .got2 = g2, .tol = ops[0].tol};
        tally t = run_tally_outputs(ops[0].nout, rerun_tally, &ca);
        size_t diff = t.other, beyond = t.bad, first = t.first_bad;
        snprintf(nm, sizeof nm, "%sdeterministic", label);
        cJSON *ck = check_new(b->checks, nm, beyond == 0);
        char d[160];
        if (diff == 0)
            snprintf(d, sizeof d, "bit-identical on a second run");
        else
            snprintf(d, sizeof d, "%zu outputs differ on a second run (%zu beyond tolerance)", diff,
                     beyond);
        dt_json_set_str(ck, "detail", d);
        if (beyond) {
            set_first_bad(ck, first, a, p, layout, got[0][first], g2[first], 0);
            b->passed = 0;
        }
        free(g2);
    }
    /* The slack past every buffer the launches could reach (dev.c): state
     * kept beyond the guards, where no other check reads. */
    {
        const char *sw = NULL;
        char sbuf[200];
        dt_err se = {0};
        if (run_slack_intact(&in, names, &sw, sbuf, sizeof sbuf, &se) != 0) {
            *e = se;
            e->code = wk_from_dev(e->code);
            goto out;
        }
        snprintf(nm, sizeof nm, "%sno writes in the slack past the buffers", label);
        cJSON *sk = check_new(b->checks, nm, sw == NULL);
        if (sw != NULL) {
            char d[320];
            snprintf(d, sizeof d,
                     "wrote past the end of %s, where the allocation's pages run on: an "
                     "out-of-bounds write, or state kept outside the buffers",
                     sw);
            dt_json_set_str(sk, "detail", d);
            b->passed = 0;
        }
    }
    rc = 0;
out:
    for (int s = 0; s < 2; s++) {
        free(got[s]);
        run_operands_free(&ops[s]);
    }
    free(unt);
    run_instance_release(&in, m == NULL);
    return rc;
}

sp_csr *wk_edge_matrix(int i, const char **name, dt_err *e)
{
    return wk_edge_matrix_seeded(i, 0, name, e);
}

sp_csr *wk_edge_matrix_seeded(int i, uint64_t seed, const char **name, dt_err *e)
{
    dt_rng g;
    dt_rng_seed(&g, 777 + (uint64_t)i + (seed ? mix64(seed) : 0));
    /* Seed 0 keeps the classic sizes; another moves each by up to +-12 %. */
    int32_t jig = seed ? (int32_t)(mix64(seed + (uint64_t)i) % 25) - 12 : 0;
#define EDGE_SIZE(v) ((int32_t)((v) + (int64_t)(v)*jig / 100))
    int32_t rows, cols;
    switch (i) {
    case 0:
        *name = "empty rows";
        rows = EDGE_SIZE(257);
        cols = EDGE_SIZE(300);
        break;
    case 1:
        *name = "one very long row";
        rows = EDGE_SIZE(300);
        cols = 6000;
        break;
    case 2:
        *name = "1x1";
        rows = cols = 1;
        break;
    case 3:
        *name = "sizes no multiple of any tile";
        rows = EDGE_SIZE(1237);
        cols = EDGE_SIZE(1031);
        break;
    case 4:
        *name = "rows of 64 to 4096";
        rows = EDGE_SIZE(128);
        cols = 4608;
        break;
    default:
        return NULL;
    }
#undef EDGE_SIZE
    int32_t long_row = i == 1 ? (int32_t)(7 + (seed ? dt_rng_below(&g, 200) : 0)) : -1;
    sp_coo *c = sp_coo_new(rows, cols, 1024, e);
    if (c == NULL)
        return NULL;
    for (int32_t r = 0; r < rows; r++) {
        int len;
        if (i == 0)
            len = r % 3 == 0 ? 0 : 1 + (int)dt_rng_below(&g, 40);
        else if (i == 1)
            len = r == long_row ? 5000 : 1 + (int)dt_rng_below(&g, 3);
        else if (i == 2)
            len = 1;
        else if (i == 3)
            len = 1 + (int)dt_rng_below(&g, 13);
        else /* log-uniform in [64, 4096], every eighth row short */
            len = r % 8 == 5 ? 1 + (int)dt_rng_below(&g, 8)
                             : (int)(64.0 * pow(64.0, dt_rng_uniform(&g)));
        if (len > cols)
            len = cols;
        int32_t step = i == 4 && len > 0 ? cols / len : 0;
        int32_t off = i == 4 && step > 1 ? (int32_t)dt_rng_below(&g, (uint64_t)step) : 0;
        for (int t = 0; t < len; t++) {
            int32_t col = (i == 1 && r == long_row) ? (int32_t)(t * cols / 5000)
                          : i == 4                  ? (int32_t)(t * step + off)
                                                    : (int32_t)dt_rng_below(&g, (uint64_t)cols);
            double v = 0.5 + dt_rng_uniform(&g);
            if (sp_coo_push(c, r, col, (dt_rng_next(&g) & 1) ? v : -v, e) != 0) {
                sp_coo_free(c);
                return NULL;
            }
        }
    }
    sp_csr *a = sp_coo_to_csr(c, e);
    sp_coo_free(c);
    return a;
}

/* The matrix's own pattern with freshly drawn values, its format rebuilt
 * from them as a user's would be when the values change: a kernel may
 * specialise on the pattern, never silently on the values. Where the
 * contract caps the distinct values (a value dictionary), the draw takes
 * that many at most (8 at most), so the format still fits. Skipped with a
 * note past 64M nonzeros (the host copy and the second format). */
static int fresh_values_battery(wk_state *w, wk_matrix *m, const wk_kernel *kn, const wk_problem *p,
                                battery *b, dt_err *e)
{
    const sp_csr *a = m->a;
    if (a->nnz > ((int64_t)64 << 20)) {
        cJSON *c = check_new(b->checks, "fresh values", 1);
        dt_json_set_bool(c, "skipped", 1);
        dt_json_set_str(c, "detail", "over 64M nonzeros: the pattern with fresh values is not run");
        return 0;
    }
    sp_csr *f = sp_csr_new(a->rows, a->cols, a->nnz, e);
    if (f == NULL) {
        e->code = WK_ENOMEM;
        return -1;
    }
    memcpy(f->rowptr, a->rowptr, ((size_t)a->rows + 1) * sizeof *f->rowptr);
    if (a->nnz)
        memcpy(f->col, a->col, (size_t)a->nnz * sizeof *f->col);
    f->pattern = 0;
    double mv = dt_json_num(kn->contract.requires, "max_values", -1);
    uint64_t seed = mix64(p->seed ^ 0x3c6ef372fe94f82bULL);
    if (mv >= 1) {
        double pool[8];
        int np = mv < 8 ? (int)mv : 8;
        run_fill_random(pool, (size_t)np, seed, 0, FILL_IN1, p->dtype);
        for (int64_t i = 0; i < a->nnz; i++)
            f->val[i] = pool[mix64(seed + (uint64_t)i) % (uint64_t)np];
    } else {
        run_fill_random(f->val, (size_t)a->nnz, seed, 0, FILL_IN1, p->dtype);
    }
    int rc = 0;
    const char *why = wk_requires_violated(&kn->contract, kn->params, f);
    if (why != NULL) {
        char d[512];
        snprintf(d, sizeof d,
                 "the matrix's pattern with fresh values breaks the kernel's preconditions (%s): "
                 "it depends on the values it was built for",
                 why);
        fail_check(b, "fresh values", d);
    } else {
        wk_problem q = *p;
        q.seed = seed;
        rc = run_battery(w, NULL, f, kn, &q, 1, 0, "fresh values: ", b, e);
    }
    sp_csr_free(f);
    return rc;
}

int wk_verify(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = run_request_begin(w, req, &p, "verify needs a GPU", e);
    if (m == NULL)
        return -1;
    wk_kernel kn;
    if (wk_kernel_parse(req, &kn, e) != 0)
        return -1;
    if (kn.contract.op != p.op) {
        e->code = WK_ECONTRACT;
        dt_err_set(e, "the kernel's contract is for %s, the request for %s",
                   sp_op_name(kn.contract.op), sp_op_name(p.op));
        wk_kernel_clear(&kn);
        return -1;
    }
    int sets = dt_json_int(req, "sets", 3);
    int edge = dt_json_bool(req, "edge", 1);
    int fresh = dt_json_bool(req, "fresh", 1);
    /* The verify seed: the request's, else a fresh one per request (the
     * reply reports it, so a run can be repeated), so that the battery's
     * launch order, poison, scalars and edge-matrix sizes differ from run
     * to run and no kernel can learn them. */
    if (cJSON_GetObjectItem(req, "seed") == NULL) {
        static uint64_t calls;
        p.seed = run_fresh_seed(++calls);
    }
    run_poison_seed(p.seed);
    battery b = {dt_json_arr(), 1};
    int rc = 0;
    {
        char vname[64];
        int vline = 0;
        int st = gpu_device_state(kn.source, vname, sizeof vname, &vline);
        cJSON *c = check_new(b.checks, "no state kept across launches", !st);
        if (st) {
            char d[256];
            snprintf(d, sizeof d,
                     "line %d: writable __device__ variable '%s' outlives the launch: a kernel "
                     "can count launches or replay answers with it (keep such data in the "
                     "contract's scratch)",
                     vline, vname);
            dt_json_set_str(c, "detail", d);
            b.passed = 0;
        }
    }
    const char *why = wk_requires_violated(&kn.contract, kn.params, m->a);
    if (why != NULL) {
        fail_check(&b, "preconditions", why);
    } else {
        rc = run_battery(w, m, m->a, &kn, &p, sets < 2 ? 2 : sets, 1, "", &b, e);
        if (rc == 0 && fresh)
            rc = fresh_values_battery(w, m, &kn, &p, &b, e);
    }
    for (int i = 0; rc == 0 && edge && i < WK_NEDGE; i++) {
        const char *name = NULL;
        sp_csr *a = wk_edge_matrix_seeded(i, p.seed, &name, e);
        if (a == NULL) {
            rc = -1;
            break;
        }
        char label[96];
        snprintf(label, sizeof label, "edge %s: ", name);
        const char *v = wk_requires_violated(&kn.contract, kn.params, a);
        if (v != NULL) {
            char nm[128];
            snprintf(nm, sizeof nm, "edge %s", name);
            cJSON *c = check_new(b.checks, nm, 1);
            dt_json_set_bool(c, "skipped", 1);
            dt_json_set_str(c, "detail", v);
        } else {
            rc = run_battery(w, NULL, a, &kn, &p, 1, 0, label, &b, e);
        }
        sp_csr_free(a);
    }
    wk_kernel_clear(&kn);
    if (rc != 0) {
        cJSON_Delete(b.checks);
        return -1;
    }
    dt_json_set_bool(out, "passed", b.passed);
    dt_json_set_int(out, "seed", (int64_t)p.seed);
    int n = 0, failed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, b.checks)
    {
        n++;
        failed += !dt_json_bool(c, "passed", 0);
    }
    dt_json_set_int(out, "checks_run", n);
    dt_json_set_int(out, "checks_failed", failed);
    dt_json_set_take(out, "checks", b.checks);
    return 0;
}
