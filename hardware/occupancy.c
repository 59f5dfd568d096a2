/* occupancy.c -- theoretical occupancy by the rules of cuda_occupancy.h, and what-ifs. */
#include "hardware/hardware.h"

#include <stdlib.h>
#include <string.h>

/* The rules, as cudaOccMaxActiveBlocksPerMultiprocessor (CUDA 13.0) applies
 * them on cc 7.0 and later, with the per-part numbers from the spec file:
 *
 * warps      blocks = max_warps_per_sm / ceil(threads / 32); 0 when threads
 *            exceed the per-block maximum.
 * blocks     the per-SM block limit.
 * registers  per warp: roundup(regs x 32, 256). The register file is split
 *            evenly between the 4 sub-partitions and a warp lives in one, so
 *            warps = floor((regs_per_sm / 4) / per_warp) x 4 and blocks =
 *            warps / warps_per_block. A launch fails (0 blocks) when
 *            per_warp x warps_per_block, or per_warp x warps_per_block rounded
 *            up to a multiple of 4 (the hardware checks as if every
 *            sub-partition were filled at once), exceeds the per-block
 *            register limit, or regs exceed the per-thread maximum.
 * shared     per block: roundup(static + dynamic + reserved, granularity).
 *            0 blocks when that exceeds the per-block limit: the default
 *            (48 KB) or, after the opt-in, the opt-in maximum, plus the
 *            reserved 1 KB on cc 8.0+. The per-SM pool is the carveout
 *            preference (percent of the SM's shared memory, the maximum
 *            by default, as the driver does with no preference) rounded up
 *            to a supported carveout; when one block needs more than that,
 *            the smallest carveout that holds one block. blocks = pool /
 *            per block.
 *
 * Two rules of cuda_occupancy.h do not apply: partitioned global caching is
 * a cc 5.2/6.x feature, and the Hopper block-barrier limit (2 barriers per
 * block slot, 1 per block) allows twice the block limit, so it never binds.
 * Virtual resources (cc 10.0+) are not modelled. */

const char *hw_limiter_name(hw_limiter l)
{
    switch (l) {
    case HW_LIM_WARPS:
        return "warps";
    case HW_LIM_BLOCKS:
        return "blocks";
    case HW_LIM_REGS:
        return "registers";
    case HW_LIM_SMEM:
        return "shared memory";
    }
    return "?";
}

static int div_up(long long x, long long y)
{
    return (int)((x + y - 1) / y);
}

static long long round_up(long long x, long long y)
{
    return y * ((x + y - 1) / y);
}

static int imin(int a, int b)
{
    return a < b ? a : b;
}

/* The smallest supported carveout holding `bytes`, or -1 above the largest
 * (cudaOccAlignUpShmemSizeVoltaPlus). */
static long long carveout_for(const hw_spec *g, long long bytes)
{
    for (int i = 0; i < g->ncarveouts; i++) {
        long long c = (long long)g->carveout_kb[i] * 1024;
        if (bytes <= c)
            return c;
    }
    return -1;
}

static void note(hw_occ *o, const char *fmt, ...) DT_PRINTF(2, 3);

static void note(hw_occ *o, const char *fmt, ...)
{
    if (o->nnotes >= HW_OCC_MAX_NOTES)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(o->notes[o->nnotes++], sizeof o->notes[0], fmt, ap);
    va_end(ap);
}

/* Blocks per SM from registers alone (see the rules above). */
static int regs_limit(const hw_spec *g, int regs, int wpb, int *per_warp_out, int *per_block_out,
                      int *assumed_out)
{
    long long per_warp = round_up((long long)regs * g->warp_size, g->reg_alloc_unit);
    long long per_block = per_warp * wpb;
    long long assumed = per_warp * round_up(wpb, g->sub_partitions);
    if (per_warp_out)
        *per_warp_out = (int)per_warp;
    if (per_block_out)
        *per_block_out = (int)per_block;
    if (assumed_out)
        *assumed_out = (int)assumed;
    if (assumed > g->regs_per_block || per_block > g->regs_per_block || regs > g->regs_per_thread)
        return 0;
    if (per_warp == 0)
        return HW_UNLIMITED;
    long long per_part = g->regs_per_sm / g->sub_partitions;
    long long warps = (per_part / per_warp) * g->sub_partitions;
    return (int)(warps / wpb);
}

typedef struct smem_res {
    long long alloc; /* per block, rounded, reserved included */
    long long limit; /* per-block limit applied */
    long long pref;  /* per-SM pool the preference asks for */
    long long pool;  /* per-SM pool used */
    int blocks;
} smem_res;

static int smem_limit(const hw_spec *g, long long stat, long long dyn, int carveout, int optin,
                      smem_res *s, dt_err *e)
{
    long long per_sm = g->smem_per_sm;
    long long pref = carveout < 0 ? per_sm : (long long)carveout * per_sm / 100;
    s->pref = carveout_for(g, pref);
    if (s->pref < 0)
        return dt_err_set(e, "%s: no carveout holds %lld bytes", g->name, pref);
    long long stat_total = stat + g->smem_reserved;
    s->alloc = round_up(stat_total + dyn, g->smem_granularity);
    /* With the opt-in the kernel's dynamic maximum is at least dyn, so the
     * opt-in limit applies as soon as static + reserved + dyn exceeds the
     * default (cudaOccSMemPerBlock with FUNC_SHMEM_LIMIT_OPTIN). */
    long long max_usage = stat_total + (optin ? dyn : 0);
    s->limit =
        (optin && max_usage > g->smem_per_block) ? g->smem_per_block_optin : g->smem_per_block;
    if (g->cc_major >= 8)
        s->limit += g->smem_reserved;
    s->pool = s->pref;
    if (s->alloc > s->limit) {
        s->blocks = 0;
        return 0;
    }
    if (s->pref < s->alloc) {
        s->pool = carveout_for(g, s->alloc);
        if (s->pool < 0) {
            s->blocks = 0;
            s->pool = s->pref;
            return 0;
        }
    }
    s->blocks = s->alloc > 0 ? (int)(s->pool / s->alloc) : HW_UNLIMITED;
    return 0;
}

/* The core, without notes: what the what-if curves call many times. */
static int compute(const hw_spec *g, int threads, int regs, long long stat, long long dyn,
                   int carveout, int optin, hw_occ *o, smem_res *s, dt_err *e)
{
    int wpb = div_up(threads, g->warp_size);
    o->warps_per_block = wpb;
    o->max_warps = g->max_warps_per_sm;
    o->lim_warps = threads > g->max_threads_per_block ? 0 : g->max_warps_per_sm / wpb;
    o->lim_blocks = g->max_blocks_per_sm;
    o->lim_regs = regs_limit(g, regs, wpb, &o->regs_per_warp, &o->regs_per_block, NULL);
    o->regs_per_thread_alloc = o->regs_per_warp / g->warp_size;
    if (smem_limit(g, stat, dyn, carveout, optin, s, e) != 0)
        return -1;
    o->lim_smem = s->blocks;
    o->smem_per_block = (int)s->alloc;
    o->smem_block_limit = (int)s->limit;
    o->smem_pref = (int)s->pref;
    o->smem_config = (int)s->pool;
    o->blocks = imin(imin(o->lim_warps, o->lim_blocks), imin(o->lim_regs, o->lim_smem));
    o->limiters = 0;
    if (o->blocks == o->lim_warps)
        o->limiters |= HW_LIM_WARPS;
    if (o->blocks == o->lim_blocks)
        o->limiters |= HW_LIM_BLOCKS;
    if (o->blocks == o->lim_regs)
        o->limiters |= HW_LIM_REGS;
    if (o->blocks == o->lim_smem)
        o->limiters |= HW_LIM_SMEM;
    static const hw_limiter order[] = {HW_LIM_WARPS, HW_LIM_BLOCKS, HW_LIM_REGS, HW_LIM_SMEM};
    o->limiter = HW_LIM_WARPS;
    for (size_t i = 0; i < DT_ARRAY_LEN(order); i++) {
        if (o->limiters & order[i]) {
            o->limiter = order[i];
            break;
        }
    }
    o->warps = o->blocks * wpb;
    o->pct = 100.0 * o->warps / o->max_warps;
    o->needs_optin = stat + dyn > g->smem_per_block;
    return 0;
}

static int check_inputs(const hw_spec *g, int threads, int regs, size_t stat, size_t dyn,
                        int carveout, dt_err *e)
{
    if (g == NULL)
        return dt_err_set(e, "no GPU spec");
    if (g->cc_major < 7)
        return dt_err_set(e, "%s: compute capability %d.%d is older than 7.0; no occupancy rules",
                          g->name, g->cc_major, g->cc_minor);
    if (threads < 1)
        return dt_err_set(e, "threads per block must be at least 1, not %d", threads);
    /* bounds far above any GPU's limits, which keep every product in an int */
    if (threads > 65536)
        return dt_err_set(e, "%d threads per block is not meaningful", threads);
    if (regs < 0 || regs > 1024)
        return dt_err_set(e, "registers per thread must be 0 to 1024, not %d", regs);
    if (carveout < HW_CARVEOUT_DEFAULT || carveout > 100)
        return dt_err_set(
            e, "carveout preference must be 0 to 100 percent (or the default), not %d", carveout);
    if (stat > (size_t)1 << 29 || dyn > (size_t)1 << 29)
        return dt_err_set(e, "shared memory per block above 512 MB is not meaningful");
    return 0;
}

static int blocks_at(const hw_spec *g, const hw_occ *in, int axis_regs, int x)
{
    hw_occ t;
    memset(&t, 0, sizeof t);
    smem_res s;
    int regs = axis_regs ? x : in->regs;
    long long stat = axis_regs ? (long long)in->static_smem : 0;
    long long dyn = axis_regs ? (long long)in->dyn_smem : x;
    if (compute(g, in->threads, regs, stat, dyn, in->carveout, in->optin, &t, &s, NULL) != 0)
        return 0;
    return t.blocks;
}

/* The largest registers per thread (axis_regs) or shared bytes per block in
 * [lo, hi] at which more than in->blocks blocks fit; 0 when none does. Both
 * only lose blocks as they grow (every carveout is less than twice the one
 * below it, so a larger pool never holds two blocks that a smaller one did
 * not), which makes a binary search exact. */
static int best_for_next(const hw_spec *g, const hw_occ *in, int axis_regs, int lo, int hi)
{
    if (hi < lo || blocks_at(g, in, axis_regs, lo) <= in->blocks)
        return 0;
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (blocks_at(g, in, axis_regs, mid) > in->blocks)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

static void explain(const hw_spec *g, hw_occ *o)
{
    long long total = (long long)o->static_smem + (long long)o->dyn_smem;
    if (o->threads > g->max_threads_per_block)
        note(o, "%d threads per block is above the %d-thread limit: the launch fails", o->threads,
             g->max_threads_per_block);
    else if (o->threads % g->warp_size != 0)
        note(o,
             "%d threads is not a multiple of the warp size: the last warp is partial but is "
             "allocated whole (%d warps, %d thread slots, per block)",
             o->threads, o->warps_per_block, o->warps_per_block * g->warp_size);
    if (o->regs > g->regs_per_thread)
        note(o, "%d registers per thread is above the %d-register limit: the launch fails", o->regs,
             g->regs_per_thread);
    else if (o->regs > 0 && o->regs_per_thread_alloc != o->regs)
        note(o,
             "registers are allocated per warp in units of %d: %d per thread x %d = %d per warp, "
             "rounded up to %d, i.e. %d per thread",
             g->reg_alloc_unit, o->regs, g->warp_size, o->regs * g->warp_size, o->regs_per_warp,
             o->regs_per_thread_alloc);
    int assumed = 0;
    regs_limit(g, o->regs, o->warps_per_block, NULL, NULL, &assumed);
    if (o->lim_regs == 0 && o->regs <= g->regs_per_thread)
        note(o,
             "%d warps x %d registers per warp = %d registers per block (%d counting warps "
             "rounded up to %d sub-partitions): above the %d-register per-block limit, the launch "
             "fails",
             o->warps_per_block, o->regs_per_warp, o->regs_per_block, assumed, g->sub_partitions,
             g->regs_per_block);
    if (o->needs_optin) {
        if (total > g->smem_per_block_optin)
            note(o,
                 "%lld bytes of shared memory per block is above this GPU's maximum of %d bytes "
                 "per block even with the opt-in: the launch fails",
                 total, g->smem_per_block_optin);
        else if (o->optin)
            note(o,
                 "%lld bytes of shared memory per block is above the default %d-byte (48 KB) "
                 "limit: the kernel must opt in with cudaFuncSetAttribute(kernel, "
                 "cudaFuncAttributeMaxDynamicSharedMemorySize, bytes) (up to %d bytes here)",
                 total, g->smem_per_block, g->smem_per_block_optin);
        else
            note(o,
                 "%lld bytes of shared memory per block is above the default %d-byte (48 KB) "
                 "limit and the kernel has not opted in: the launch fails",
                 total, g->smem_per_block);
        if ((long long)o->static_smem > g->smem_per_block)
            note(o,
                 "static shared memory is limited to %d bytes by the compiler: declare the rest "
                 "as dynamic (extern __shared__) shared memory",
                 g->smem_per_block);
    }
    if (o->smem_per_block > 0 && (g->smem_reserved > 0 || o->smem_per_block != total))
        note(o,
             "shared memory per block: %lld requested + %d reserved by the driver, rounded up to "
             "%d bytes = %d bytes",
             total, g->smem_reserved, g->smem_granularity, o->smem_per_block);
    if (o->lim_smem > 0 && o->smem_config != o->smem_pref)
        note(o,
             "the carveout preference gives %d KB of shared memory per SM, less than one block "
             "needs: the driver configures %d KB",
             o->smem_pref / 1024, o->smem_config / 1024);
    if (o->blocks == 0)
        note(o, "no block fits on an SM: the kernel cannot launch with this configuration");
    if (o->blocks > 0 && (o->limiters & HW_LIM_REGS) &&
        !(o->limiters & (HW_LIM_WARPS | HW_LIM_BLOCKS))) {
        o->regs_for_next = best_for_next(g, o, 1, 1, o->regs - 1);
        if (o->regs_for_next > 0)
            note(o,
                 "at most %d registers per thread would fit %d blocks per SM "
                 "(__launch_bounds__(%d, %d) asks the compiler for it)",
                 o->regs_for_next, o->blocks + 1, o->threads, o->blocks + 1);
    }
    if (o->blocks > 0 && (o->limiters & HW_LIM_SMEM) &&
        !(o->limiters & (HW_LIM_WARPS | HW_LIM_BLOCKS)) && total > 0) {
        o->smem_for_next = best_for_next(g, o, 0, 0, (int)total - 1);
        if (o->smem_for_next > 0)
            note(o, "at most %d bytes of shared memory per block would fit %d blocks per SM",
                 o->smem_for_next, o->blocks + 1);
    }
}

int hw_occupancy(const hw_spec *g, int threads, int regs, size_t static_smem, size_t dyn_smem,
                 int carveout, int optin, hw_occ *out, dt_err *e)
{
    if (check_inputs(g, threads, regs, static_smem, dyn_smem, carveout, e) != 0)
        return -1;
    hw_occ o;
    memset(&o, 0, sizeof o);
    o.threads = threads;
    o.regs = regs;
    o.static_smem = static_smem;
    o.dyn_smem = dyn_smem;
    o.carveout = carveout;
    o.optin = optin != 0;
    smem_res s;
    if (compute(g, threads, regs, (long long)static_smem, (long long)dyn_smem, carveout, o.optin,
                &o, &s, e) != 0)
        return -1;
    explain(g, &o);
    *out = o;
    return 0;
}

/* ---- what-ifs -------------------------------------------------------------- */

const char *hw_occ_axis_name(hw_occ_axis a)
{
    switch (a) {
    case HW_AXIS_REGS:
        return "registers";
    case HW_AXIS_THREADS:
        return "threads";
    case HW_AXIS_SMEM:
        return "shared_memory";
    }
    return "?";
}

#define SMEM_STEP 512

int hw_occ_curve_make(const hw_spec *g, const hw_occ *base, hw_occ_axis axis, hw_occ_curve *out,
                      dt_err *e)
{
    memset(out, 0, sizeof *out);
    out->axis = axis;
    if (check_inputs(g, base->threads, base->regs, base->static_smem, base->dyn_smem,
                     base->carveout, e) != 0)
        return -1;
    int lo, hi, step, cur;
    long long total = (long long)base->static_smem + (long long)base->dyn_smem;
    switch (axis) {
    case HW_AXIS_REGS:
        lo = 0, hi = g->regs_per_thread, step = 1, cur = base->regs;
        break;
    case HW_AXIS_THREADS:
        lo = g->warp_size, hi = g->max_threads_per_block, step = g->warp_size, cur = base->threads;
        break;
    case HW_AXIS_SMEM:
        lo = 0, hi = base->optin ? g->smem_per_block_optin : g->smem_per_block, step = SMEM_STEP;
        cur = total > hi ? hi : (int)total;
        break;
    default:
        return dt_err_set(e, "unknown what-if axis %d", (int)axis);
    }
    out->n = (hi - lo) / step + 1;
    out->pts = dt_xcalloc((size_t)out->n, sizeof *out->pts);
    out->current = 0;
    for (int i = 0; i < out->n; i++) {
        int x = lo + i * step;
        int threads = base->threads, regs = base->regs;
        long long stat = (long long)base->static_smem, dyn = (long long)base->dyn_smem;
        if (axis == HW_AXIS_REGS)
            regs = x;
        else if (axis == HW_AXIS_THREADS)
            threads = x;
        else {
            /* vary the total; what exceeds the static part is dynamic */
            stat = stat < x ? stat : x;
            dyn = x - stat;
        }
        hw_occ t;
        memset(&t, 0, sizeof t);
        smem_res s;
        if (compute(g, threads, regs, stat, dyn, base->carveout, base->optin, &t, &s, e) != 0) {
            hw_occ_curve_free(out);
            return -1;
        }
        out->pts[i] = (hw_occ_pt){x, t.blocks, t.warps, t.pct, t.limiters};
        if (x <= cur)
            out->current = i;
    }
    return 0;
}

void hw_occ_curve_free(hw_occ_curve *c)
{
    if (c == NULL)
        return;
    free(c->pts);
    c->pts = NULL;
    c->n = 0;
}

/* ---- JSON ------------------------------------------------------------------ */

static void set_limit(cJSON *obj, const char *key, int v)
{
    if (v == HW_UNLIMITED)
        dt_json_set_take(obj, key, cJSON_CreateNull());
    else
        dt_json_set_int(obj, key, v);
}

static cJSON *limiter_array(unsigned limiters)
{
    cJSON *a = dt_json_arr();
    static const hw_limiter order[] = {HW_LIM_WARPS, HW_LIM_BLOCKS, HW_LIM_REGS, HW_LIM_SMEM};
    for (size_t i = 0; i < DT_ARRAY_LEN(order); i++) {
        if (limiters & order[i])
            cJSON_AddItemToArray(a, cJSON_CreateString(hw_limiter_name(order[i])));
    }
    return a;
}

cJSON *hw_occ_json(const hw_spec *g, const hw_occ *o)
{
    cJSON *j = dt_json_obj();
    dt_json_set_str(j, "gpu", g->name);
    char cc[16];
    snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
    dt_json_set_str(j, "compute_capability", cc);
    cJSON *in = dt_json_obj();
    dt_json_set_int(in, "threads", o->threads);
    dt_json_set_int(in, "registers_per_thread", o->regs);
    dt_json_set_int(in, "static_smem", (int64_t)o->static_smem);
    dt_json_set_int(in, "dynamic_smem", (int64_t)o->dyn_smem);
    if (o->carveout < 0)
        dt_json_set_str(in, "carveout", "default");
    else
        dt_json_set_int(in, "carveout", o->carveout);
    dt_json_set_bool(in, "optin", o->optin);
    dt_json_set_take(j, "input", in);
    dt_json_set_int(j, "blocks_per_sm", o->blocks);
    dt_json_set_int(j, "warps_per_sm", o->warps);
    dt_json_set_int(j, "max_warps_per_sm", o->max_warps);
    dt_json_set_num(j, "occupancy_pct", o->pct);
    dt_json_set_str(j, "limiter", hw_limiter_name(o->limiter));
    dt_json_set_take(j, "limiters", limiter_array(o->limiters));
    cJSON *lim = dt_json_obj();
    set_limit(lim, "warps", o->lim_warps);
    set_limit(lim, "blocks", o->lim_blocks);
    set_limit(lim, "registers", o->lim_regs);
    set_limit(lim, "shared_memory", o->lim_smem);
    dt_json_set_take(j, "block_limits", lim);
    cJSON *al = dt_json_obj();
    dt_json_set_int(al, "warps_per_block", o->warps_per_block);
    dt_json_set_int(al, "registers_per_thread", o->regs_per_thread_alloc);
    dt_json_set_int(al, "registers_per_warp", o->regs_per_warp);
    dt_json_set_int(al, "registers_per_block", o->regs_per_block);
    dt_json_set_int(al, "smem_per_block", o->smem_per_block);
    dt_json_set_int(al, "smem_block_limit", o->smem_block_limit);
    dt_json_set_int(al, "smem_carveout_preferred", o->smem_pref);
    dt_json_set_int(al, "smem_per_sm_configured", o->smem_config);
    dt_json_set_take(j, "allocation", al);
    dt_json_set_bool(j, "needs_optin", o->needs_optin);
    if (o->regs_for_next > 0)
        dt_json_set_int(j, "registers_for_next_block", o->regs_for_next);
    if (o->smem_for_next > 0)
        dt_json_set_int(j, "smem_for_next_block", o->smem_for_next);
    cJSON *notes = dt_json_arr();
    for (int i = 0; i < o->nnotes; i++)
        cJSON_AddItemToArray(notes, cJSON_CreateString(o->notes[i]));
    dt_json_set_take(j, "notes", notes);
    return j;
}

cJSON *hw_occ_curve_json(const hw_occ_curve *c)
{
    cJSON *j = dt_json_obj();
    dt_json_set_str(j, "axis", hw_occ_axis_name(c->axis));
    dt_json_set_int(j, "current", c->current);
    cJSON *x = dt_json_arr(), *b = dt_json_arr(), *w = dt_json_arr(), *p = dt_json_arr(),
          *l = dt_json_arr();
    for (int i = 0; i < c->n; i++) {
        cJSON_AddItemToArray(x, cJSON_CreateNumber(c->pts[i].x));
        cJSON_AddItemToArray(b, cJSON_CreateNumber(c->pts[i].blocks));
        cJSON_AddItemToArray(w, cJSON_CreateNumber(c->pts[i].warps));
        cJSON_AddItemToArray(p, cJSON_CreateNumber(c->pts[i].pct));
        hw_limiter first = HW_LIM_WARPS;
        static const hw_limiter order[] = {HW_LIM_WARPS, HW_LIM_BLOCKS, HW_LIM_REGS, HW_LIM_SMEM};
        for (size_t k = 0; k < DT_ARRAY_LEN(order); k++) {
            if (c->pts[i].limiters & order[k]) {
                first = order[k];
                break;
            }
        }
        cJSON_AddItemToArray(l, cJSON_CreateString(hw_limiter_name(first)));
    }
    dt_json_set_take(j, "x", x);
    dt_json_set_take(j, "blocks_per_sm", b);
    dt_json_set_take(j, "warps_per_sm", w);
    dt_json_set_take(j, "occupancy_pct", p);
    dt_json_set_take(j, "limiter", l);
    return j;
}
