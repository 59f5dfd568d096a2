/* test_occupancy.c -- occupancy against hand-worked cases per compute capability; what-ifs. */
#include "tests/hardware/hwtest.h"

#include <stdlib.h>
#include <string.h>

TestSuite(occupancy, .init = hwt_setup, .fini = hwt_teardown);

typedef struct occ_case {
    const char *gpu;
    int threads, regs, smem, dyn, carveout, optin;
    int blocks, warps;
    double pct;
    unsigned limiters; /* every resource at the minimum */
    const char *why;   /* the arithmetic, checked by hand */
} occ_case;

#define W   HW_LIM_WARPS
#define B   HW_LIM_BLOCKS
#define R   HW_LIM_REGS
#define S   HW_LIM_SMEM
#define DEF HW_CARVEOUT_DEFAULT

static void run_cases(const occ_case *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        hw_spec *g = hwt_load(c[i].gpu);
        hw_occ o;
        dt_err e = {0};
        cr_assert_eq(hw_occupancy(g, c[i].threads, c[i].regs, (size_t)c[i].smem, (size_t)c[i].dyn,
                                  c[i].carveout, c[i].optin, &o, &e),
                     0, "%s: %s", c[i].why, e.msg);
        cr_expect_eq(o.blocks, c[i].blocks, "%s: blocks %d", c[i].why, o.blocks);
        cr_expect_eq(o.warps, c[i].warps, "%s: warps %d", c[i].why, o.warps);
        cr_expect_float_eq(o.pct, c[i].pct, 0.05, "%s: pct %g", c[i].why, o.pct);
        cr_expect_eq(o.limiters, c[i].limiters, "%s: limiters %#x", c[i].why, o.limiters);
        hw_spec_free(g);
    }
}

/* The must-show cases on the H200 (cc 9.0: 64 warps, 32 blocks,
 * 65536 registers in 4 sub-partitions, 228 KB shared, 1 KB reserved). */
Test(occupancy, h200_must_show_cases)
{
    static const occ_case c[] = {
        /* 8 warps/block; warps 64/8 = 8; regs 32*32 = 1024/warp, 16384/1024 = 16 per
         * sub-partition x 4 = 64 warps / 8 = 8; smem roundup(0+1024,128) = 1024,
         * 233472/1024 = 228; blocks 32 -> 8 blocks, 64 warps, 100% */
        {"h200", 256, 32, 0, 0, DEF, 1, 8, 64, 100, W | R, "256t 32r"},
        /* regs 64*32 = 2048/warp, 16384/2048 = 8 x 4 = 32 warps / 8 = 4 blocks -> 50% */
        {"h200", 256, 64, 0, 0, DEF, 1, 4, 32, 50, R, "256t 64r"},
        /* 16 warps/block: warps 4, regs 64/16 = 4; smem roundup(100000+1024,128) =
         * 101120, 233472/101120 = 2.3 -> 2 blocks, 32 warps, 50% */
        {"h200", 512, 32, 100000, 0, DEF, 1, 2, 32, 50, S, "512t 32r 100000B"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

Test(occupancy, smem_above_48kb_should_say_it_needs_the_optin)
{
    hw_spec *g = hwt_load("h200");
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, 512, 32, 0, 100000, DEF, 1, &o, NULL), 0);
    cr_assert_eq(o.needs_optin, 1);
    int said = 0;
    for (int i = 0; i < o.nnotes; i++)
        said |= strstr(o.notes[i], "must opt in") != NULL &&
                strstr(o.notes[i], "cudaFuncAttributeMaxDynamicSharedMemorySize") != NULL;
    cr_assert(said, "no opt-in note");
    /* without the opt-in the block does not fit at all */
    cr_assert_eq(hw_occupancy(g, 512, 32, 0, 100000, DEF, 0, &o, NULL), 0);
    cr_assert_eq(o.blocks, 0);
    cr_assert_eq(o.lim_smem, 0);
    cr_assert_eq(o.limiter, HW_LIM_SMEM);
    said = 0;
    for (int i = 0; i < o.nnotes; i++)
        said |= strstr(o.notes[i], "has not opted in") != NULL;
    cr_assert(said);
    /* 48 KB exactly needs no opt-in: 49152 + 1024 = 50176 <= 48 KB + 1 KB */
    cr_assert_eq(hw_occupancy(g, 128, 32, 0, 49152, DEF, 0, &o, NULL), 0);
    cr_assert_eq(o.needs_optin, 0);
    cr_assert_eq(o.blocks, 4); /* 233472 / 50176 = 4.65 */
    hw_spec_free(g);
}

/* cc 7.0 (V100): 64 warps, 32 blocks, 96 KB shared, 256-byte granularity,
 * nothing reserved, carveouts 0/8/16/32/64/96 KB. */
Test(occupancy, cc70_hand_worked)
{
    static const occ_case c[] = {
        /* 32 warps/block: warps 64/32 = 2; regs 16*32 = 512/warp, 16384/512 = 32 x 4 =
         * 128 warps / 32 = 4; smem 0 (no reserve on 7.x) = unlimited -> 2, warps */
        {"v100", 1024, 16, 0, 0, DEF, 1, 2, 64, 100, W, "cc7.0 warps"},
        /* 1 warp/block: warps 64, regs 128, blocks 32 -> 32 blocks, 32 warps, 50% */
        {"v100", 32, 16, 0, 0, DEF, 1, 32, 32, 50, B, "cc7.0 blocks"},
        /* 33 regs: 33*32 = 1056 -> 1280 (5 x 256), i.e. 40/thread; 16384/1280 = 12.8 ->
         * 12 x 4 = 48 warps / 8 = 6 (unrounded 1056 would give 15 x 4 / 8 = 7) */
        {"v100", 256, 33, 0, 0, DEF, 1, 6, 48, 75, R, "cc7.0 33 regs round to 40"},
        /* 14000 B -> roundup to 256 = 14080; 98304/14080 = 6.98 -> 6 (14000 unrounded
         * would give 7.02 -> 7); warps 16, regs 16 -> 6 blocks, 24 warps, 37.5% */
        {"v100", 128, 32, 14000, 0, DEF, 1, 6, 24, 37.5, S, "cc7.0 smem granularity 256"},
        /* carveout 25%: 98304/4 = 24576 -> 32 KB carveout; 8192 B/block -> 4 */
        {"v100", 128, 32, 8192, 0, 25, 1, 4, 16, 25, S, "cc7.0 carveout 25%"},
        /* opt-in: 60000 dynamic -> 60160 > 48 KB, limit 96 KB (no reserve added on
         * 7.x); 98304/60160 = 1 */
        {"v100", 256, 32, 0, 60000, DEF, 1, 1, 8, 12.5, S, "cc7.0 opt-in 60000"},
        /* the same without the opt-in cannot launch */
        {"v100", 256, 32, 0, 60000, DEF, 0, 0, 0, 0, S, "cc7.0 no opt-in"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

/* cc 7.5 (T4): 32 warps, 16 blocks, 64 KB shared, carveouts 32/64 KB only. */
Test(occupancy, cc75_hand_worked)
{
    static const occ_case c[] = {
        /* 32 warps/block: warps 32/32 = 1; regs 1024/warp -> 64/32 = 2 -> 1, 100% */
        {"t4", 1024, 32, 0, 0, DEF, 1, 1, 32, 100, W, "cc7.5 warps"},
        /* 1 warp/block: warps 32, blocks 16 -> 16 blocks, 16 warps, 50% */
        {"t4", 32, 32, 0, 0, DEF, 1, 16, 16, 50, B, "cc7.5 blocks"},
        /* 72 regs: 2304/warp (9 x 256); 16384/2304 = 7.1 -> 7 x 4 = 28 warps / 4 = 7;
         * warps 8 -> 7 blocks, 28 warps, 87.5% */
        {"t4", 128, 72, 0, 0, DEF, 1, 7, 28, 87.5, R, "cc7.5 regs"},
        /* 20000 B -> 20224; default carveout 64 KB: 65536/20224 = 3.2 -> 3 */
        {"t4", 128, 32, 0, 20000, DEF, 1, 3, 12, 37.5, S, "cc7.5 smem default carveout"},
        /* carveout 0% asks for 0 B, which rounds up to Turing's smallest, 32 KB:
         * 32768/20224 = 1 */
        {"t4", 128, 32, 0, 20000, 0, 1, 1, 4, 12.5, S, "cc7.5 carveout 0 -> 32 KB"},
        /* 64 KB is the whole SM and the opt-in limit: 1 block */
        {"t4", 128, 32, 0, 65536, DEF, 1, 1, 4, 12.5, S, "cc7.5 64 KB"},
        /* one byte more rounds to 65792 > 65536: no block */
        {"t4", 128, 32, 0, 65537, DEF, 1, 0, 0, 0, S, "cc7.5 64 KB + 1"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

/* cc 8.0 (A100): 64 warps, 32 blocks, 164 KB shared, 1 KB reserved, 128-byte
 * granularity, carveouts up to 164 KB. */
Test(occupancy, cc80_hand_worked)
{
    static const occ_case c[] = {
        /* 20000 + 1024 = 21024 -> 21120 (165 x 128); 167936/21120 = 7.95 -> 7 (without
         * the reserve: 20096 -> 8.36 -> 8); warps 8, regs 8 -> 7, 56 warps */
        {"a100-40gb-sxm", 256, 32, 20000, 0, DEF, 1, 7, 56, 87.5, S, "cc8.0 reserved 1 KB"},
        /* carveout 50%: 83968 -> 100 KB; 102400/21120 = 4.8 -> 4 */
        {"a100-40gb-sxm", 256, 32, 20000, 0, 50, 1, 4, 32, 50, S, "cc8.0 carveout 50%"},
        /* carveout 10%: 16793 -> 32 KB, less than one block (40000 + 1024 -> 41088):
         * the driver takes the smallest carveout that holds one, 64 KB -> 1 */
        {"a100-40gb-sxm", 256, 32, 40000, 0, 10, 1, 1, 8, 12.5, S, "cc8.0 carveout too small"},
        /* 100 threads = 4 warps (the last partial); regs 64: 2048/warp, 8 x 4 = 32
         * warps / 4 = 8; warps 64/4 = 16 -> 8 blocks, 32 warps, 50% */
        {"a100-40gb-sxm", 100, 64, 0, 0, DEF, 1, 8, 32, 50, R, "cc8.0 100 threads"},
        /* 1024 threads x 64 regs = 65536 registers: exactly the per-block limit -> 1 */
        {"a100-40gb-sxm", 1024, 64, 0, 0, DEF, 1, 1, 32, 50, R, "cc8.0 64K regs per block"},
        /* 65 regs: 2080 -> 2304/warp x 32 warps = 73728 > 65536 -> cannot launch */
        {"a100-40gb-sxm", 1024, 65, 0, 0, DEF, 1, 0, 0, 0, R, "cc8.0 regs per block exceeded"},
        /* opt-in maximum: 166912 + 1024 = 167936 = the whole SM -> 1 */
        {"a100-40gb-sxm", 256, 32, 0, 166912, DEF, 1, 1, 8, 12.5, S, "cc8.0 163 KB"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

/* cc 8.6 (RTX 3090): 48 warps, 16 blocks, 100 KB shared, 1 KB reserved. */
Test(occupancy, cc86_hand_worked)
{
    static const occ_case c[] = {
        /* 16 warps/block: warps 48/16 = 3; regs 64/16 = 4 -> 3 blocks, 48 warps, 100% */
        {"rtx3090", 512, 32, 0, 0, DEF, 1, 3, 48, 100, W, "cc8.6 warps"},
        /* 544 threads = 17 warps: 48/17 = 2 -> 34 warps, 70.8% */
        {"rtx3090", 544, 32, 0, 0, DEF, 1, 2, 34, 34.0 / 48 * 100, W, "cc8.6 544 threads"},
        /* 2 warps/block: warps 24, blocks 16 -> 16 blocks, 32 warps, 66.7% */
        {"rtx3090", 64, 16, 0, 0, DEF, 1, 16, 32, 32.0 / 48 * 100, B, "cc8.6 blocks"},
        /* 25000 + 1024 = 26024 -> 26112; 102400/26112 = 3.9 -> 3 (without the reserve:
         * 25088 -> 4.08 -> 4); warps 12 -> 3 blocks, 12 warps, 25% */
        {"rtx3090", 128, 32, 0, 25000, DEF, 1, 3, 12, 25, S, "cc8.6 reserved"},
        /* opt-in maximum 101376 + 1024 = 102400 = the SM -> 1; one byte more -> 0 */
        {"rtx3090", 128, 32, 0, 101376, DEF, 1, 1, 4, 4.0 / 48 * 100, S, "cc8.6 99 KB"},
        {"rtx3090", 128, 32, 0, 101377, DEF, 1, 0, 0, 0, S, "cc8.6 99 KB + 1"},
        /* 40 regs: 1280/warp, 12 x 4 = 48 warps / 8 = 6; warps 48/8 = 6 -> tie */
        {"rtx3090", 256, 40, 0, 0, DEF, 1, 6, 48, 100, W | R, "cc8.6 40 regs"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

/* cc 8.9 (L40S, RTX 4090): 48 warps, 24 blocks, 100 KB shared. */
Test(occupancy, cc89_hand_worked)
{
    static const occ_case c[] = {
        /* 1 warp/block: warps 48, blocks 24 -> 24 blocks, 24 warps, 50% (cc 8.6: 16) */
        {"l40s", 32, 32, 0, 0, DEF, 1, 24, 24, 50, B, "cc8.9 blocks"},
        /* 8 warps/block: 48/8 = 6; regs 8 -> 6 blocks, 48 warps, 100% */
        {"rtx4090", 256, 32, 0, 0, DEF, 1, 6, 48, 100, W, "cc8.9 warps"},
        /* 48 regs: 1536/warp; 16384/1536 = 10.7 -> 10 x 4 = 40 warps / 8 = 5 -> 83.3% */
        {"l40s", 256, 48, 0, 0, DEF, 1, 5, 40, 40.0 / 48 * 100, R, "cc8.9 regs"},
        /* 16384 + 1024 = 17408; 102400/17408 = 5.9 -> 5 */
        {"rtx4090", 256, 32, 16384, 0, DEF, 1, 5, 40, 40.0 / 48 * 100, S, "cc8.9 smem"},
        /* 33 threads = 2 warps; warps 48/2 = 24; blocks 24; regs 24 x 4... 1024/warp,
         * 64 warps / 2 = 32 -> 24 blocks tie warps and blocks, 48 warps, 100% */
        {"l40s", 33, 32, 0, 0, DEF, 1, 24, 48, 100, W | B, "cc8.9 33 threads"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

/* cc 9.0 (H100, H200): 64 warps, 32 blocks, 228 KB shared, carveouts to 228 KB. */
Test(occupancy, cc90_hand_worked)
{
    static const occ_case c[] = {
        /* per sub-partition: 40 regs -> 1280/warp; 16384/1280 = 12 per sub-partition,
         * 48 warps / 2 per block = 24 (the whole file, 65536/1280 = 51 warps, would
         * wrongly give 25) */
        {"h100-sxm", 64, 40, 0, 0, DEF, 1, 24, 48, 75, R, "cc9.0 sub-partitions"},
        /* 33 regs -> 1280/warp: 48 warps / 4 = 12; warps 16 -> 75% */
        {"h200", 128, 33, 0, 0, DEF, 1, 12, 48, 75, R, "cc9.0 33 regs"},
        /* 1 warp/block: 32 blocks, 32 warps, 50% */
        {"h100-pcie", 32, 16, 0, 0, DEF, 1, 32, 32, 50, B, "cc9.0 blocks"},
        /* carveout 50%: 116736 -> 132 KB = 135168; 30000 + 1024 -> 31104;
         * 135168/31104 = 4.3 -> 4 (default carveout: 233472/31104 = 7) */
        {"h200", 256, 32, 30000, 0, 50, 1, 4, 32, 50, S, "cc9.0 carveout 50%"},
        {"h200", 256, 32, 30000, 0, DEF, 1, 7, 56, 87.5, S, "cc9.0 default carveout"},
        /* 1025 threads exceed the block limit */
        {"h200", 1025, 32, 0, 0, DEF, 1, 0, 0, 0, W, "cc9.0 1025 threads"},
        /* 255 regs: 8160 -> 8192/warp, 2 warps per sub-partition -> 8 warps / 1 */
        {"h200", 32, 255, 0, 0, DEF, 1, 8, 8, 12.5, R, "cc9.0 255 regs"},
        /* 0 regs: registers limit nothing */
        {"h200", 1024, 0, 0, 0, DEF, 1, 2, 64, 100, W, "cc9.0 0 regs"},
    };
    run_cases(c, DT_ARRAY_LEN(c));
}

Test(occupancy, allocation_details_should_show_the_rounding)
{
    hw_spec *g = hwt_load("h200");
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, 100, 33, 1000, 3000, DEF, 1, &o, NULL), 0);
    cr_assert_eq(o.warps_per_block, 4);  /* ceil(100 / 32) */
    cr_assert_eq(o.regs_per_warp, 1280); /* 33 * 32 = 1056 -> 1280 */
    cr_assert_eq(o.regs_per_thread_alloc, 40);
    cr_assert_eq(o.regs_per_block, 5120);
    cr_assert_eq(o.smem_per_block, 5120);    /* 1000 + 3000 + 1024 = 5024 -> 5120 */
    cr_assert_eq(o.smem_block_limit, 50176); /* 48 KB + 1 KB reserved */
    cr_assert_eq(o.smem_config, 233472);
    cr_assert_eq(o.lim_smem, 45); /* 233472 / 5120 = 45.6 */
    int rounding = 0, partial = 0;
    for (int i = 0; i < o.nnotes; i++) {
        rounding |= strstr(o.notes[i], "rounded up to 1280, i.e. 40 per thread") != NULL;
        partial |= strstr(o.notes[i], "not a multiple of the warp size") != NULL;
    }
    cr_assert(rounding);
    cr_assert(partial);
    hw_spec_free(g);
}

Test(occupancy, register_limited_kernel_should_say_what_fits_one_more_block)
{
    hw_spec *g = hwt_load("h200");
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, 256, 64, 0, 0, DEF, 1, &o, NULL), 0);
    /* 5 blocks need 40 warps: 10 per sub-partition, 16384 / 10 = 1638 -> 1536 per
     * warp = 48 per thread */
    cr_assert_eq(o.regs_for_next, 48);
    cr_assert_eq(hw_occupancy(g, 512, 32, 100000, 0, DEF, 1, &o, NULL), 0);
    /* 3 blocks: 233472 / 3 = 77824 per block, less 1024 reserved = 76800 */
    cr_assert_eq(o.smem_for_next, 76800);
    hw_spec_free(g);
}

Test(occupancy, impossible_inputs_should_be_errors)
{
    hw_spec *g = hwt_load("h200");
    hw_occ o;
    dt_err e = {0};
    cr_assert_eq(hw_occupancy(g, 0, 32, 0, 0, DEF, 1, &o, &e), -1);
    cr_assert(strstr(e.msg, "threads") != NULL, "%s", e.msg);
    cr_assert_eq(hw_occupancy(g, 128, -1, 0, 0, DEF, 1, &o, &e), -1);
    cr_assert(strstr(e.msg, "registers") != NULL, "%s", e.msg);
    cr_assert_eq(hw_occupancy(g, 128, 32, 0, 0, 101, 1, &o, &e), -1);
    cr_assert(strstr(e.msg, "carveout") != NULL, "%s", e.msg);
    cr_assert_eq(hw_occupancy(NULL, 128, 32, 0, 0, DEF, 1, &o, &e), -1);
    cr_assert_eq(hw_occupancy(g, 100000, 32, 0, 0, DEF, 1, &o, &e), -1);
    cr_assert_eq(hw_occupancy(g, 128, 32, (size_t)1 << 30, 0, DEF, 1, &o, &e), -1);
    cr_assert(strstr(e.msg, "512 MB") != NULL, "%s", e.msg);
    /* 256 registers: more than a thread can have -> 0 blocks and a note, not an error */
    cr_assert_eq(hw_occupancy(g, 128, 256, 0, 0, DEF, 1, &o, &e), 0);
    cr_assert_eq(o.blocks, 0);
    cr_assert_eq(o.limiter, HW_LIM_REGS);
    hw_spec_free(g);
}

static void check_nonincreasing(const hw_occ_curve *c, const char *what)
{
    for (int i = 1; i < c->n; i++)
        cr_assert_leq(c->pts[i].warps, c->pts[i - 1].warps, "%s: warps rise from x=%d to x=%d",
                      what, c->pts[i - 1].x, c->pts[i].x);
}

Test(occupancy, whatif_curves_should_cover_their_range_and_be_monotone_where_they_must)
{
    static const char *const gpus[] = {"v100", "t4", "a100-40gb-sxm", "rtx3090", "l40s", "h200"};
    for (size_t k = 0; k < DT_ARRAY_LEN(gpus); k++) {
        hw_spec *g = hwt_load(gpus[k]);
        hw_occ o;
        cr_assert_eq(hw_occupancy(g, 256, 40, 2048, 4096, DEF, 1, &o, NULL), 0);
        hw_occ_curve c;
        dt_err e = {0};
        /* registers: 0..255, more registers never help */
        cr_assert_eq(hw_occ_curve_make(g, &o, HW_AXIS_REGS, &c, &e), 0, "%s", e.msg);
        cr_assert_eq(c.n, 256);
        cr_assert_eq(c.pts[0].x, 0);
        cr_assert_eq(c.pts[255].x, 255);
        cr_assert_eq(c.pts[c.current].x, 40);
        cr_assert_eq(c.pts[c.current].warps, o.warps);
        check_nonincreasing(&c, gpus[k]);
        cr_assert_lt(c.pts[255].warps, c.pts[0].warps);
        hw_occ_curve_free(&c);
        /* shared memory: 0..opt-in max in 512 B steps, more never helps */
        cr_assert_eq(hw_occ_curve_make(g, &o, HW_AXIS_SMEM, &c, &e), 0, "%s", e.msg);
        cr_assert_eq(c.pts[0].x, 0);
        cr_assert_leq(c.pts[c.n - 1].x, g->smem_per_block_optin);
        cr_assert_gt(c.pts[c.n - 1].x + 512, g->smem_per_block_optin);
        cr_assert_eq(c.pts[c.current].x, 6144);
        cr_assert_eq(c.pts[c.current].warps, o.warps);
        check_nonincreasing(&c, gpus[k]);
        hw_occ_curve_free(&c);
        /* block size: 32..1024 by warps; not monotone (a sawtooth), but each point
         * is the calculator's answer and never above the SM's warps */
        cr_assert_eq(hw_occ_curve_make(g, &o, HW_AXIS_THREADS, &c, &e), 0, "%s", e.msg);
        cr_assert_eq(c.n, 32);
        cr_assert_eq(c.pts[c.current].x, 256);
        for (int i = 0; i < c.n; i++) {
            hw_occ p;
            cr_assert_eq(hw_occupancy(g, c.pts[i].x, 40, 2048, 4096, DEF, 1, &p, NULL), 0);
            cr_assert_eq(c.pts[i].warps, p.warps);
            cr_assert_leq(c.pts[i].warps, g->max_warps_per_sm);
        }
        hw_occ_curve_free(&c);
        hw_spec_free(g);
    }
}

Test(occupancy, whatif_smem_without_optin_should_drop_to_zero_above_48kb)
{
    hw_spec *g = hwt_load("a100-40gb-sxm");
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, 128, 32, 0, 0, DEF, 0, &o, NULL), 0);
    hw_occ_curve c;
    cr_assert_eq(hw_occ_curve_make(g, &o, HW_AXIS_SMEM, &c, NULL), 0);
    cr_assert_eq(c.pts[c.n - 1].x, 49152);
    cr_assert_gt(c.pts[c.n - 1].blocks, 0);
    hw_occ_curve_free(&c);
    hw_spec_free(g);
}

Test(occupancy, json_should_carry_the_limits_and_the_limiter)
{
    hw_spec *g = hwt_load("h200");
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, 256, 64, 0, 0, DEF, 1, &o, NULL), 0);
    cJSON *j = hw_occ_json(g, &o);
    cr_assert_eq(dt_json_num(j, "blocks_per_sm", -1), 4);
    cr_assert_str_eq(dt_json_str(j, "limiter", ""), "registers");
    const cJSON *lim = cJSON_GetObjectItemCaseSensitive(j, "block_limits");
    cr_assert_eq(dt_json_num(lim, "warps", -1), 8);
    cr_assert_eq(dt_json_num(lim, "registers", -1), 4);
    cr_assert_eq(dt_json_num(lim, "blocks", -1), 32);
    cr_assert_eq(dt_json_num(lim, "shared_memory", -1), 228);
    cJSON_Delete(j);
    hw_spec_free(g);
}
