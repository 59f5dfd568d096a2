/* measure.c -- the measure request: a candidate timed next to cuSPARSE in
 * paired rounds, with the observers that keep timed launches honest
 * (rotated inputs, re-poisoned outputs, checked after every sample). */
#include "gpu/worker/runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- measure ------------------------------------------------------------------ */

/* Timed launches are observable (gpu/PROTOCOL.md, measure). Two input sets
 * with their references live on the device beside the kernel's operands;
 * the second equals the first but for about one value in 64 (a kernel that
 * keys a cache on a few inputs replays the wrong answer). Before every
 * sample, outside the timing events: a set chosen at random is copied into
 * the operands, the output re-seeded (beta != 0: the set's y0; beta == 0:
 * the NaN poison or finite random values, at random, so that no kernel can
 * work only when it sees the poison), scratch zeroed where the contract
 * keeps it zeroed. Graph replays refill the output before every launch
 * (dev_observer). After a sample its output is checked against the set's
 * reference: every sample when the output is at most 8 MiB, else a share
 * (8 MiB over the output's size, at least one in 16) chosen after the
 * sample ran (and always the first), by a generator seeded from the clock,
 * which no kernel sees. */
#define OBS_SETS 2

typedef struct observe {
    instance *in;
    const wk_problem *p;
    const gpu_contract *c;
    sp_layout layout;
    size_t nout;
    const operands *ops; /* OBS_SETS of them, the matrix's cache */
    dev_buf in1[OBS_SETS], in2[OBS_SETS], bias[OBS_SETS], init[OBS_SETS];
    dev_buf poison, fill; /* fill: what refills copy into the output */
    CUdeviceptr live[3];  /* in1, in2, out as bound now (placements move them) */
    int cur, cur_poison;  /* the sample in flight: its set, whether the output held poison */
    uint64_t rng;
    double check_p;
    long samples, checked, spot_checked;
    double check_s;    /* in observe_after: downloads and comparisons */
    double check_dl_s; /* the downloads' part of check_s */
    int failed;
    int check_fmt; /* re-hash the format after timing (a full measure, or a small format) */
    char msg[512];
    unsigned char *raw, *unt;
    int raw_pinned;          /* raw is page-locked host memory (cuMemHostAlloc) */
    dev_buf spot;            /* the spot runs gathered on the device */
    unsigned char *spot_raw; /* and downloaded here, page-locked (or malloc'd) */
    int spot_pinned;
    double *got;
} observe;

void run_observe_moved(struct observe *ob, int which, CUdeviceptr to)
{
    if (ob != NULL && which >= 0 && which < 3)
        ob->live[which] = to;
}

/* The host side of the observed sets, cached on the matrix. */
typedef struct obs_sets {
    operands ops[OBS_SETS];
} obs_sets;

static void obs_sets_free(void *p)
{
    obs_sets *c = p;
    if (c == NULL)
        return;
    for (int k = 0; k < OBS_SETS; k++)
        run_operands_free(&c->ops[k]);
    free(c);
}

/* Host buffers the checks download into: page-locked where the driver
 * gives it (a pageable copy goes through the driver's staging buffer, in
 * pieces, at a fraction of the link's speed), else malloc'd. */
static void *host_alloc(size_t bytes, int *pinned)
{
    void *h = NULL;
    *pinned = 0;
    if (bytes >= 65536 && CU(cuMemHostAlloc)(&h, bytes, 0) == CUDA_SUCCESS && h != NULL) {
        *pinned = 1;
        return h;
    }
    return malloc(bytes);
}

static void host_free(void *h, int pinned)
{
    if (h == NULL)
        return;
    if (pinned)
        CU(cuMemFreeHost)(h);
    else
        free(h);
}

static void observe_free(observe *ob)
{
    for (int k = 0; k < OBS_SETS; k++) {
        dev_free(&ob->in1[k]);
        dev_free(&ob->in2[k]);
        dev_free(&ob->bias[k]);
        dev_free(&ob->init[k]);
    }
    dev_free(&ob->poison);
    dev_free(&ob->fill);
    dev_free(&ob->spot);
    host_free(ob->raw, ob->raw_pinned);
    host_free(ob->spot_raw, ob->spot_pinned);
    free(ob->unt);
    free(ob->got);
}

#define OBS_SPOTS      64
#define OBS_SPOT_BYTES 65536

/* The elements of one spot run. */
static size_t spot_per(const observe *ob)
{
    size_t per = OBS_SPOT_BYTES / ob->in->esize;
    return per > ob->nout ? ob->nout : per;
}

/* The spot runs' device gather buffer and its host copy: one download a
 * sample instead of OBS_SPOTS synchronous ones. */
static int spot_open(observe *ob, dt_err *e)
{
    size_t bytes = (size_t)OBS_SPOTS * spot_per(ob) * ob->in->esize;
    if (bytes == 0)
        return 0;
    if (dev_alloc(&ob->spot, bytes, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    ob->spot_raw = host_alloc(bytes, &ob->spot_pinned);
    if (ob->spot_raw == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    return 0;
}

static int observe_open(observe *ob, wk_matrix *m, instance *in, const wk_problem *p,
                        const gpu_contract *c, dt_err *e)
{
    memset(ob, 0, sizeof *ob);
    ob->in = in;
    ob->p = p;
    ob->c = c;
    ob->layout = c->layout;
    ob->rng = mix64((uint64_t)(dt_now() * 1e9) ^ (uint64_t)getpid() ^ (uintptr_t)ob);
    size_t es = in->esize;
    /* The sets depend on the problem, not on the kernel: the tuner's many
     * measures of one problem build them once. Their seed is drawn when
     * they are built, as unpredictable as every other. */
    char key[192];
    snprintf(key, sizeof key, "%d/%d/%d/%.17g/%.17g/%d/%d", (int)p->op, (int)p->dtype, (int)p->n,
             p->alpha, p->beta, (int)p->epilogue, (int)ob->layout);
    if (m->obs_sets == NULL || strcmp(m->obs_key, key) != 0) {
        if (m->obs_free)
            m->obs_free(m->obs_sets);
        m->obs_sets = NULL;
        m->obs_free = NULL;
        obs_sets *cs = dt_xmalloc(sizeof *cs);
        memset(cs, 0, sizeof *cs);
        wk_problem q = *p;
        q.seed = run_fresh_seed(0x0b5e);
        for (int k = 0; k < OBS_SETS; k++)
            if (run_make_operands_near(in->a, in->av, &q, ob->layout, 16 + k,
                                       k ? &cs->ops[0] : NULL, &cs->ops[k], e) != 0) {
                obs_sets_free(cs);
                return -1;
            }
        m->obs_sets = cs;
        m->obs_free = obs_sets_free;
        snprintf(m->obs_key, sizeof m->obs_key, "%s", key);
    }
    ob->ops = ((const obs_sets *)m->obs_sets)->ops;
    for (int k = 0; k < OBS_SETS; k++) {
        const operands *o = &ob->ops[k];
        if (dev_alloc(&ob->in1[k], o->nin1 * es, e) != 0 ||
            (o->nin2 && dev_alloc(&ob->in2[k], o->nin2 * es, e) != 0) ||
            dev_alloc(&ob->bias[k], (size_t)in->a->rows * es, e) != 0 ||
            dev_alloc(&ob->init[k], o->nout * es, e) != 0 ||
            run_put(&ob->in1[k], o->in1, o->nin1, p->dtype, e) != 0 ||
            (o->nin2 && run_put(&ob->in2[k], o->in2, o->nin2, p->dtype, e) != 0) ||
            run_put(&ob->bias[k], o->bias, (size_t)in->a->rows, p->dtype, e) != 0 ||
            run_put(&ob->init[k], o->out0, o->nout, p->dtype, e) != 0) {
            e->code = wk_from_dev(e->code);
            return -1;
        }
    }
    ob->nout = ob->ops[0].nout;
    unsigned char *tmp = malloc(ob->nout * es + 8);
    if (tmp == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    poison_job pj = {tmp, es, run_poison_bits(p->dtype)};
    sp_parallel_for((int64_t)ob->nout, (int64_t)ob->nout, run_poison_range, &pj);
    int rc = dev_alloc(&ob->poison, ob->nout * es, e) != 0 ||
                     dev_alloc(&ob->fill, ob->nout * es, e) != 0 ||
                     (ob->nout && dev_copy_in(ob->poison.ptr, tmp, ob->nout * es, e) != 0)
                 ? -1
                 : 0;
    free(tmp);
    if (rc != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    ob->raw = host_alloc(ob->nout * es + 8, &ob->raw_pinned);
    ob->unt = malloc(ob->nout + 1);
    ob->got = run_xalloc_doubles(ob->nout, e);
    if (ob->raw == NULL || ob->unt == NULL || ob->got == NULL) {
        e->code = WK_ENOMEM;
        return dt_err_set(e, "out of host memory");
    }
    ob->live[0] = in->in1.ptr;
    ob->live[1] = in->in2.ptr;
    ob->live[2] = in->out.ptr;
    /* Every sample while the output is at most 8 MiB; beyond, fewer (the
     * download and the comparison take milliseconds), never under 1 in 16. */
    double ob_bytes = (double)(ob->nout * es);
    ob->check_p = ob_bytes <= 8.0 * 1048576.0 ? 1.0 : 8.0 * 1048576.0 / ob_bytes;
    if (ob->check_p < 1.0 / 16.0)
        ob->check_p = 1.0 / 16.0;
    if (ob->check_p < 1.0 && spot_open(ob, e) != 0)
        return -1;
    return 0;
}

static int obs_copy(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s, dt_err *e)
{
    if (bytes == 0 || dst == 0 || src == 0)
        return 0;
    return dev_check(CU(cuMemcpyDtoDAsync)(dst, src, bytes, s), "rotating the inputs", e);
}

static int observe_prep(void *ud, CUstream s, unsigned sample, dt_err *e)
{
    observe *ob = ud;
    instance *in = ob->in;
    size_t es = in->esize;
    ob->rng = mix64(ob->rng + GOLDEN);
    int k = (int)(ob->rng % OBS_SETS);
    const operands *o = &ob->ops[k];
    int beta0 = ob->p->beta == 0.0;
    /* beta == 0: poison or the other set's finite y0, at random */
    ob->cur_poison = beta0 && ((ob->rng >> 8) & 1);
    const dev_buf *init = !beta0           ? &ob->init[k]
                          : ob->cur_poison ? &ob->poison
                                           : &ob->init[(k + 1) % OBS_SETS];
    ob->cur = k;
    (void)sample;
    if (obs_copy(ob->live[0], ob->in1[k].ptr, o->nin1 * es, s, e) != 0 ||
        obs_copy(ob->live[1], ob->in2[k].ptr, o->nin2 * es, s, e) != 0 ||
        obs_copy(in->bias.ptr, ob->bias[k].ptr, (size_t)in->a->rows * es, s, e) != 0 ||
        obs_copy(ob->fill.ptr, init->ptr, ob->nout * es, s, e) != 0 ||
        obs_copy(ob->live[2], init->ptr, ob->nout * es, s, e) != 0)
        return -1;
    if (in->k.scratch_bytes && ob->c->scratch_once && in->scratch.ptr &&
        dev_check(CU(cuMemsetD8Async)(in->scratch.ptr, 0, in->scratch.bytes, s),
                  "clearing the scratch", e) != 0)
        return -1;
    return 0;
}

/* Before every launch of a graph sample (a node of the graph, timed again
 * alone and subtracted): the output refilled, and a "once" scratch zeroed.
 * The launches of one sample share their inputs, so state a kernel left in
 * its scratch -- an answer memoised on the whole of x, say, right every
 * time -- would let every launch after the first skip the work; zeroed, the
 * scratch holds nothing from the launch before. A kernel that keeps its
 * promise leaves it zeroed anyway (counters), or writes before it reads. */
static int observe_refill(void *ud, CUstream s, dt_err *e)
{
    observe *ob = ud;
    instance *in = ob->in;
    if (obs_copy(ob->live[2], ob->fill.ptr, ob->nout * in->esize, s, e) != 0)
        return -1;
    if (in->k.scratch_bytes && ob->c->scratch_once && in->scratch.ptr)
        return dev_check(CU(cuMemsetD8Async)(in->scratch.ptr, 0, in->scratch.bytes, s),
                         "clearing the scratch", e);
    return 0;
}

/* The comparison of downloaded outputs [a, b): converted, their poison
 * flagged (when the sample started from it) and compared, in blocks that
 * stay in cache, one pass instead of three over the whole range. */
#define OBS_BLOCK 4096

static void tally_merge(tally *r, const tally *t)
{
    if (r->bad == 0 && t->bad > 0)
        r->first_bad = t->first_bad;
    if (r->other == 0 && t->other > 0)
        r->first_other = t->first_other;
    r->bad += t->bad;
    r->other += t->other;
    if (t->max_err > r->max_err)
        r->max_err = t->max_err;
    if (t->max_ratio > r->max_ratio)
        r->max_ratio = t->max_ratio;
}

static void obs_compare(const observe *ob, const cmp_arrays *ca, size_t a, size_t b, tally *acc)
{
    size_t es = ob->in->esize;
    tally r = {0};
    for (size_t lo = a; lo < b; lo += OBS_BLOCK) {
        size_t hi = b - lo > OBS_BLOCK ? lo + OBS_BLOCK : b;
        sp_from_dtype(ob->raw + lo * es, ob->got + lo, hi - lo, ob->p->dtype);
        if (ob->cur_poison) {
            poison_job pj = {ob->raw, es, run_poison_bits(ob->p->dtype), ob->unt};
            run_poison_flags_range(&pj, (int64_t)lo, (int64_t)hi, 0);
        }
        tally t;
        run_reference_tally(ca, lo, hi, &t);
        tally_merge(&r, &t);
    }
    *acc = r;
}

/* Parts of a parallel comparison: the whole output (runs == NULL) in
 * contiguous ranges, or the spot runs, one tally each. */
typedef struct obs_job {
    const observe *ob;
    const cmp_arrays *ca;
    const size_t *runs; /* spot runs' first outputs, or NULL */
    const size_t *ends; /* and their ends, the runs apart and ascending */
    tally *run_tally;   /* one per spot run */
    tally part[SP_PAR_MAX];
} obs_job;

static void obs_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    obs_job *j = ctx;
    if (j->runs == NULL) {
        obs_compare(j->ob, j->ca, (size_t)lo, (size_t)hi, &j->part[part]);
        return;
    }
    for (int64_t k = lo; k < hi; k++)
        obs_compare(j->ob, j->ca, j->runs[k], j->ends[k], &j->run_tally[k]);
}

/* Work for sp_parallel_for: the comparison costs several multiply-adds an
 * output (the conversion, the flags, the tolerance), so that an output of a
 * few million elements or a sample's spot runs spread over the cores. */
#define OBS_WORK_PER_OUTPUT 8

/* Check the output now in the operands against set k's reference; 0 with
 * ob->failed and ob->msg set on a wrong output. what: "timed launch ..." */
static int observe_check(observe *ob, const char *what, dt_err *e)
{
    size_t es = ob->in->esize;
    const operands *o = &ob->ops[ob->cur];
    dev_buf live = {ob->live[2], ob->nout * es};
    double t0 = dt_now();
    if (ob->nout && dev_download(ob->raw, &live, ob->nout * es, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    ob->check_dl_s += dt_now() - t0;
    cmp_arrays ca = {
        .got = ob->got, .ref = o->ref, .tol = o->tol, .untouched = ob->cur_poison ? ob->unt : NULL};
    obs_job j = {.ob = ob, .ca = &ca};
    int parts = sp_parallel_for((int64_t)ob->nout, OBS_WORK_PER_OUTPUT * (int64_t)ob->nout,
                                obs_range, &j);
    tally t = {0};
    for (int q = 0; q < parts; q++)
        tally_merge(&t, &j.part[q]);
    ob->checked++;
    if (t.bad == 0 && t.other == 0)
        return 0;
    ob->failed = 1;
    size_t idx = t.bad ? t.first_bad : t.first_other;
    snprintf(ob->msg, sizeof ob->msg,
             "%s (input set %d): %zu of %zu outputs wrong, %zu never written (first: output %zu, "
             "expected %.9g, got %.9g): a kernel must compute the same function when timed as "
             "when verified",
             what, ob->cur, t.bad, ob->nout, t.other, idx, o->ref[idx], ob->got[idx]);
    return 0;
}

/* A sample the draw in observe_after leaves unchecked (outputs past 8 MiB)
 * still gets a spot check: OBS_SPOTS runs of OBS_SPOT_BYTES of the output at
 * offsets drawn after it ran, each compared as the full check compares. A
 * kernel that skips work in the samples it hopes go unchecked must do so in
 * most of them to move a median, and is found in any where a run falls on
 * what it skipped: a tenth of the rows skipped escapes a sample's 64 runs
 * about once in 850. */

static int observe_spot(observe *ob, unsigned sample, dt_err *e)
{
    size_t es = ob->in->esize;
    size_t per = spot_per(ob);
    if (per == 0 || ob->spot.ptr == 0 || ob->spot_raw == NULL)
        return 0;
    /* The offsets drawn now, after the sample ran; the runs gathered on the
     * device (copies on the sample's stream, behind its launches) and
     * brought back in one download. */
    size_t lo[OBS_SPOTS];
    CUstream s = dev_stream();
    for (int k = 0; k < OBS_SPOTS; k++) {
        ob->rng = mix64(ob->rng + GOLDEN);
        lo[k] = (size_t)(ob->rng % (uint64_t)(ob->nout - per + 1));
        if (dev_check(CU(cuMemcpyDtoDAsync)(ob->spot.ptr + (CUdeviceptr)((size_t)k * per * es),
                                            ob->live[2] + (CUdeviceptr)(lo[k] * es), per * es, s),
                      "gathering the spot checks", e) != 0) {
            e->code = wk_from_dev(e->code);
            return -1;
        }
    }
    double t0 = dt_now();
    if (dev_download(ob->spot_raw, &ob->spot, (size_t)OBS_SPOTS * per * es, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    ob->check_dl_s += dt_now() - t0;
    const operands *o = &ob->ops[ob->cur];
    cmp_arrays ca = {
        .got = ob->got, .ref = o->ref, .tol = o->tol, .untouched = ob->cur_poison ? ob->unt : NULL};
    for (int k = 0; k < OBS_SPOTS; k++)
        memcpy(ob->raw + lo[k] * es, ob->spot_raw + (size_t)k * per * es, per * es);
    /* The runs in order, each cut to begin where the one before ended: no
     * output is compared by two threads. */
    for (int k = 1; k < OBS_SPOTS; k++)
        for (int q = k; q > 0 && lo[q - 1] > lo[q]; q--) {
            size_t x = lo[q];
            lo[q] = lo[q - 1];
            lo[q - 1] = x;
        }
    size_t end[OBS_SPOTS];
    for (int k = 0; k < OBS_SPOTS; k++) {
        end[k] = lo[k] + per;
        if (k > 0 && lo[k] < end[k - 1])
            lo[k] = end[k - 1] < end[k] ? end[k - 1] : end[k];
    }
    tally rt[OBS_SPOTS];
    obs_job j = {.ob = ob, .ca = &ca, .runs = lo, .ends = end, .run_tally = rt};
    sp_parallel_for(OBS_SPOTS, OBS_WORK_PER_OUTPUT * (int64_t)OBS_SPOTS * (int64_t)per, obs_range,
                    &j);
    for (int k = 0; k < OBS_SPOTS; k++) {
        const tally *t = &rt[k];
        if (t->bad == 0 && t->other == 0)
            continue;
        ob->failed = 1;
        size_t idx = t->bad ? t->first_bad : t->first_other;
        snprintf(ob->msg, sizeof ob->msg,
                 "timed launch: sample %u (input set %d), spot check of outputs %zu to %zu: %zu "
                 "wrong, %zu never written (first: output %zu, expected %.9g, got %.9g): a kernel "
                 "must compute the same function when timed as when verified",
                 sample + 1, ob->cur, lo[k], end[k] - 1, t->bad, t->other, idx, o->ref[idx],
                 ob->got[idx]);
        return 0;
    }
    ob->spot_checked++;
    return 0;
}

static int observe_after(void *ud, unsigned sample, dt_err *e)
{
    observe *ob = ud;
    ob->samples++;
    if (ob->failed)
        return 0;
    double t0 = dt_now();
    ob->rng = mix64(ob->rng + GOLDEN);
    double u = (double)(ob->rng >> 11) * 0x1.0p-53;
    int rc;
    if (sample != 0 && u >= ob->check_p) {
        rc = observe_spot(ob, sample, e);
    } else {
        char what[96];
        snprintf(what, sizeof what, "timed launch: sample %u", sample + 1);
        rc = observe_check(ob, what, e);
    }
    ob->check_s += dt_now() - t0;
    return rc;
}

/* After all timing: verification once more on the module that was timed
 * (set 0, the poison, one launch), and the inputs read back unchanged. */
static int observe_final(observe *ob, dt_err *e)
{
    if (ob->failed)
        return 0;
    CUstream s = dev_stream();
    ob->cur = 0;
    ob->cur_poison = ob->p->beta == 0.0;
    const dev_buf *init = ob->cur_poison ? &ob->poison : &ob->init[0];
    size_t es = ob->in->esize;
    const operands *o = &ob->ops[0];
    if (obs_copy(ob->live[0], ob->in1[0].ptr, o->nin1 * es, s, e) != 0 ||
        obs_copy(ob->live[1], ob->in2[0].ptr, o->nin2 * es, s, e) != 0 ||
        obs_copy(ob->in->bias.ptr, ob->bias[0].ptr, (size_t)ob->in->a->rows * es, s, e) != 0 ||
        obs_copy(ob->live[2], init->ptr, ob->nout * es, s, e) != 0 ||
        (ob->in->k.scratch_bytes && ob->c->scratch_once && ob->in->scratch.ptr &&
         dev_check(CU(cuMemsetD8Async)(ob->in->scratch.ptr, 0, ob->in->scratch.bytes, s),
                   "clearing the scratch", e) != 0) ||
        dev_launch(&ob->in->k, ob->c, &ob->in->bind, s, e) != 0 || dev_sync(e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    if (observe_check(ob, "after timing: a verification launch on the timed module", e) != 0 ||
        ob->failed)
        return ob->failed ? 0 : -1;
    /* What timing left behind: the matrix's format arrays as built (a kernel
     * may not convert its format in place while timed, where verification
     * would not see it), and the guards around the operands unchanged (an
     * out-of-bounds write, or state stashed past a buffer, during timing). */
    const char *which = NULL;
    /* the format as built, then each copy the paired rounds timed it at */
    for (int j = -1; ob->check_fmt && which == NULL && j < ob->in->nmoved_fmt; j++)
        if (dev_fmt_changed(j < 0 ? ob->in->fmt : ob->in->moved_fmt[j], &which, e) != 0) {
            e->code = wk_from_dev(e->code);
            return -1;
        }
    if (which != NULL) {
        ob->failed = 1;
        ob->in->fmt_dirty = 1;
        snprintf(ob->msg, sizeof ob->msg,
                 "after timing: the kernel changed its format array '%s' while timed (the "
                 "matrix's arrays are read-only; a conversion belongs in the format's "
                 "preprocessing, which is reported apart)",
                 which);
        return 0;
    }
    static const char *const gnames[4][3] = {
        {"x", "B", "A"}, {"-", "-", "Bt"}, {"y", "C", "out"}, {"bias", "bias", "bias"}};
    int op = ob->p->op;
    const char *names[4] = {gnames[0][op], gnames[1][op], gnames[2][op], gnames[3][op]};
    int before = 0;
    if (run_guards_intact(ob->in, names, &which, &before, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    if (which != NULL) {
        ob->failed = 1;
        snprintf(ob->msg, sizeof ob->msg,
                 "after timing: the %d bytes of guard %s '%s' changed while timed: an "
                 "out-of-bounds write",
                 WK_GUARD, before ? "before the start of" : "past the end of", which);
        return 0;
    }
    /* Beyond the guards: the slack of every allocation the timed launches
     * could reach, the operands' and format's copies at each placement too
     * (a memo kept there would be right at every launch of a sample). */
    char sbuf[200];
    if (run_slack_intact(ob->in, names, &which, sbuf, sizeof sbuf, e) != 0) {
        e->code = wk_from_dev(e->code);
        return -1;
    }
    if (which != NULL) {
        ob->failed = 1;
        snprintf(ob->msg, sizeof ob->msg,
                 "after timing: the kernel wrote past the end of %s while timed, where the "
                 "allocation's pages run on: an out-of-bounds write, or state kept outside "
                 "the buffers",
                 which);
    }
    return 0;
}

void run_stats_into(cJSON *o, const char *key, const dev_stats *s)
{
    dt_json_set_take(o, key, dev_stats_json(s));
}

/* Time cold, warm and (under 20 us warm) graph replay. fast: only what the
 * comparison method needs -- cold for data beyond L2; warm and graph for
 * L2-resident data (cold too when graph replay does not apply). */
static int time_modes(dev_enqueue_fn fn, void *ud, const dev_observer *obs, int min_runs,
                      double min_s, int l2_resident, int fast, dev_stats st[3], char *graph_note,
                      size_t nlen, dt_err *e)
{
    memset(st, 0, 3 * sizeof st[0]);
    if (fast && !l2_resident)
        return dev_time_obs(fn, ud, obs, DEV_TIME_COLD, min_runs, min_s, 5.0, &st[0], e);
    if (!fast && dev_time_obs(fn, ud, obs, DEV_TIME_COLD, min_runs, min_s, 5.0, &st[0], e) != 0)
        return -1;
    if (dev_time_obs(fn, ud, obs, DEV_TIME_WARM, min_runs, min_s, 5.0, &st[1], e) != 0)
        return -1;
    if (st[1].median_us < 20.0) {
        dt_err ge = {0};
        if (dev_time_obs(fn, ud, obs, DEV_TIME_GRAPH, min_runs, min_s, 5.0, &st[2], &ge) != 0) {
            if (ge.code == DEV_EFAULT) {
                *e = ge;
                return -1;
            }
            snprintf(graph_note, nlen, "graph replay unavailable: %s", ge.msg);
        }
    }
    if (fast && !st[2].valid)
        return dev_time_obs(fn, ud, obs, DEV_TIME_COLD, min_runs, min_s, 5.0, &st[0], e);
    return 0;
}

/* What decides what a launch computes and how: the CUBIN, the grid, block,
 * shared memory and scratch (and whether a memset precedes each launch),
 * and the format with its parameters. Two
 * parameter points of a template with the same key run the same code the
 * same way (at N=32 ell-baked-spmm's TN 64 and 128, or fp32 VEC 4 and 8,
 * which the template clamps to the same tile and vector), so the tuner
 * times only the first. 128 bits of two FNV-1a chains: a collision would
 * only cost the tuner a variant, never a wrong result. */
static void kernel_key_into(const instance *in, const wk_kernel *kn, cJSON *out)
{
    int64_t geo[8] = {in->k.grid[0],  in->k.grid[1],  in->k.grid[2], in->k.block[0],
                      in->k.block[1], in->k.block[2], in->k.smem,    (int64_t)in->k.scratch_bytes};
    const int32_t once = kn->contract.scratch_once;
    uint64_t h[2] = {DT_HASH_SEED, DT_HASH_SEED ^ 0x9e3779b97f4a7c15ULL};
    dt_err fe = {0};
    cJSON *fp = wk_format_params(kn, &fe);
    char *fps = fp ? dt_json_print(fp, 0) : NULL;
    for (int i = 0; i < 2; i++) {
        h[i] = dt_hash64(&in->cubin->size, sizeof in->cubin->size, h[i]);
        h[i] = dt_hash64(in->cubin->image, in->cubin->size, h[i]);
        h[i] = dt_hash64(geo, sizeof geo, h[i]);
        h[i] = dt_hash64(&once, sizeof once, h[i]);
        h[i] = dt_hash_str(kn->contract.format ? kn->contract.format : "csr", h[i]);
        h[i] = dt_hash_str(fps ? fps : "", h[i]);
    }
    free(fps);
    cJSON_Delete(fp);
    char hex[2][17], key[33];
    dt_hash_hex(h[0], hex[0]);
    dt_hash_hex(h[1], hex[1]);
    snprintf(key, sizeof key, "%s%s", hex[0], hex[1]);
    dt_json_set_str(out, "kernel_key", key);
}

int wk_measure(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = run_request_begin(w, req, &p, "measure needs a GPU", e);
    if (m == NULL)
        return -1;
    wk_kernel kn;
    if (wk_kernel_parse(req, &kn, e) != 0)
        return -1;
    double t_begin = dt_now(), t_sets = 0, t_timed = 0, t_base = 0, t_final = 0;
    int min_runs = dt_json_int(req, "min_runs", 20);
    double min_s = dt_json_num(req, "min_seconds", 0.05);
    int want_base = dt_json_bool(req, "baseline", 1);
    int fast = dt_json_bool(req, "fast", 0);
    instance in;
    int prc = run_instance_prepare(w, m, m->a, &kn, &p, &in, e);
    if (prc != 0) {
        if (prc == 1) {
            e->code = WK_ECOMPILE;
            dt_err_set(e, "the kernel does not compile (run compile or verify for the "
                          "diagnostics)");
            run_instance_release(&in, 0);
        }
        wk_kernel_clear(&kn);
        return -1;
    }
    operands o;
    int rc = -1;
    char gnote[512] = "";
    dev_stats st[3];
    if (run_make_operands(m->a, in.av, &p, kn.contract.layout, 0, 0, &o, e) != 0) {
        run_instance_release(&in, 0);
        wk_kernel_clear(&kn);
        return -1;
    }
    observe ob;
    int observed = dt_json_bool(req, "observe", 1);
    run_poison_seed(p.seed ^ (uint64_t)(dt_now() * 1e6));
    if (observed && observe_open(&ob, m, &in, &p, &kn.contract, e) != 0) {
        observe_free(&ob);
        run_operands_free(&o);
        run_instance_release(&in, 0);
        wk_kernel_clear(&kn);
        return -1;
    }
    if (!observed)
        memset(&ob, 0, sizeof ob);
    t_sets = dt_now();
    if (observed) {
        /* Re-hashing a large format after every quick timing would cost the
         * tuner more than the timing; a full measure always does it. */
        double fmt_bytes = 0;
        for (int i = 0; i < in.fmt->narr; i++)
            fmt_bytes += (double)in.fmt->arr[i].bytes;
        ob.check_fmt = !fast || fmt_bytes <= 64.0 * 1048576.0;
    }
    dev_observer dob = {observe_prep, observe_refill, observe_after, &ob};
    const dev_observer *obs = observed ? &dob : NULL;
    launch_ud lu = {&in, &kn.contract, observed ? &ob : NULL};
    double flops = 0, bytes = 0;
    sp_cost(m->a->rows, m->a->cols, m->a->nnz, p.op, p.dtype, p.n, &flops, &bytes);
    int l2_resident = bytes <= 0.5 * (double)w->dev.l2_bytes;
    if (run_upload_inputs(&in, &p, &o, e) != 0 || run_init_output(&in, &p, &o, e) != 0 ||
        time_modes(run_enqueue_kernel, &lu, obs, min_runs, min_s, l2_resident, fast, st, gnote,
                   sizeof gnote, e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    t_timed = dt_now();
    double check_timed = ob.check_s;
    const char *method = (l2_resident && st[2].valid) ? "graph" : "cold";
    const dev_stats *prim = (l2_resident && st[2].valid) ? &st[2] : &st[0];
    double us = prim->median_us;
    cJSON *cand = dt_json_obj();
    run_stats_into(cand, "cold", &st[0]);
    run_stats_into(cand, "warm", &st[1]);
    run_stats_into(cand, "graph", &st[2]);
    if (gnote[0])
        dt_json_set_str(cand, "graph_note", gnote);
    dt_json_set_take(out, "candidate", cand);
    dt_json_set_str(out, "method", method);
    dt_json_set_num(out, "us", us);
    dt_json_set_num(out, "preprocess_us", in.fmt->prep_us);
    dt_json_set_num(out, "min_bytes", bytes);
    dt_json_set_num(out, "flops", flops);
    dt_json_set_num(out, "gbps", bytes / (us * 1e-6) / 1e9);
    dt_json_set_num(out, "gflops", flops / (us * 1e-6) / 1e9);
    double bw = wk_copy_gbps > 0 ? wk_copy_gbps : 0;
    /* The physical floor: the fewest bytes the kernel can have moved, at
     * copy bandwidth. min_bytes counts the matrix as CSR with 4-byte
     * columns; a format that stores it in fewer bytes (16-bit column
     * offsets: 6 bytes an fp32 nonzero instead of 8) lowers the floor to
     * its own size, or a sell16 kernel at 94 % of copy bandwidth on
     * n1024-l1 x 32M reads as "below the floor" (59.2 against 62.9 us). */
    double fbytes = 0;
    for (int i = 0; i < in.fmt->narr; i++)
        fbytes += (double)in.fmt->arr[i].bytes;
    double sparse = (m->a->nnz >= INT32_MAX ? 8.0 : 4.0) * ((double)m->a->rows + 1) +
                    (double)m->a->nnz * (4.0 + (p.op == SP_SDDMM ? 0 : (double)in.esize));
    double floor_bytes = fbytes > 0 && fbytes < sparse ? bytes - sparse + fbytes : bytes;
    double floor_us =
        bw > 0 ? floor_bytes / (bw * 1e9) * 1e6 * (strcmp(method, "cold") ? 0.25 : 1.0) : 0;
    dt_json_set_num(out, "floor_us", floor_us);
    dt_json_set_num(out, "floor_bytes", floor_bytes);
    dt_json_set_num(out, "copy_gbps", bw);
    dt_json_set_bool(out, "copy_measured", wk_copy_measured);
    int suspect = floor_us > 0 && us < 0.95 * floor_us;
    dt_json_set_bool(out, "suspect", suspect);
    dt_json_set_int(out, "registers", in.k.regs);
    dt_json_set_int(out, "static_smem", in.k.static_smem);
    dt_json_set_int(out, "local_bytes", in.k.local_bytes);
    cJSON *launch = dt_json_obj();
    cJSON *g = dt_json_arr(), *bl = dt_json_arr();
    for (int i = 0; i < 3; i++) {
        cJSON_AddItemToArray(g, cJSON_CreateNumber(in.k.grid[i]));
        cJSON_AddItemToArray(bl, cJSON_CreateNumber(in.k.block[i]));
    }
    dt_json_set_take(launch, "grid", g);
    dt_json_set_take(launch, "block", bl);
    dt_json_set_int(launch, "smem", in.k.smem);
    dt_json_set_take(out, "launch", launch);
    kernel_key_into(&in, &kn, out);
    if (suspect) {
        e->code = WK_ESUSPECT;
        dt_err_set(e,
                   "suspect: %.2f us is below the physical floor of %.2f us (%.0f bytes at "
                   "%.0f GB/s): the kernel cannot have done its work",
                   us, floor_us, floor_bytes, bw);
        goto done;
    }
    if (want_base) {
        cJSON *base = dt_json_obj();
        dt_err be = {0};
        if (wk_baseline_into(m, &p, kn.contract.layout, min_runs, min_s, method, fast,
                             run_enqueue_kernel, run_replace_operands, &lu, obs, base, &be) != 0) {
            if (be.code == WK_EFAULT) {
                *e = be;
                cJSON_Delete(base);
                goto done;
            }
            dt_json_set_str(base, "error", be.msg);
        }
        /* The speedup is the paired one (the median of per-round ratios,
         * candidate and best algorithm timed alternately), which drift
         * between the two separate timings cannot move; the separate
         * quotient stays beside it. */
        double bus = dt_json_num(base, "us", 0);
        const cJSON *pr = cJSON_GetObjectItem(base, "paired");
        if (bus > 0)
            dt_json_set_num(out, "speedup_separate", bus / us);
        if (pr && dt_json_num(pr, "speedup", 0) > 0)
            dt_json_set_num(out, "speedup", dt_json_num(pr, "speedup", 0));
        else if (bus > 0)
            dt_json_set_num(out, "speedup", bus / us);
        dt_json_set_take(out, "baseline", base);
    }
    t_base = dt_now();
    if (observed) {
        if (observe_final(&ob, e) != 0)
            goto done;
        cJSON *tc = dt_json_obj();
        dt_json_set_int(tc, "samples", ob.samples);
        dt_json_set_int(tc, "checked", ob.checked);
        dt_json_set_int(tc, "spot_checked", ob.spot_checked);
        dt_json_set_bool(tc, "passed", !ob.failed);
        dt_json_set_take(out, "timed_checks", tc);
        t_final = dt_now();
        /* Where the call's time went (the checks are outside the timed
         * region but lengthen the call): the kernel's preparation and the
         * observed sets, the kernel's timing, cuSPARSE's and the paired
         * rounds, the final verification and read-backs; checks_s is the
         * part of timing and baseline spent checking samples. */
        cJSON *cs = dt_json_obj();
        dt_json_set_num(cs, "prepare", t_sets - t_begin);
        dt_json_set_num(cs, "timing", t_timed - t_sets);
        dt_json_set_num(cs, "timing_checks", check_timed);
        dt_json_set_num(cs, "baseline", t_base - t_timed);
        dt_json_set_num(cs, "baseline_checks", ob.check_s - check_timed);
        dt_json_set_num(cs, "checks_download", ob.check_dl_s);
        dt_json_set_bool(cs, "checks_pinned", ob.raw_pinned);
        dt_json_set_num(cs, "final", t_final - t_base);
        dt_json_set_num(cs, "total", t_final - t_begin);
        dt_json_set_take(out, "cost_s", cs);
        if (ob.failed) {
            e->code = WK_ESUSPECT;
            dt_err_set(e, "%s", ob.msg);
            goto done;
        }
    }
    rc = 0;
done:
    if (observed)
        observe_free(&ob);
    run_operands_free(&o);
    run_instance_release(&in, 0);
    wk_kernel_clear(&kn);
    return rc;
}
