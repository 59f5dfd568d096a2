/* test_occ_reference.c -- hw_occupancy against NVIDIA's own cuda_occupancy.h on random launches. */
#include "tests/hardware/hwtest.h"

#include <string.h>

TestSuite(occ_reference, .init = hwt_setup, .fini = hwt_teardown);

/* cuda_occupancy.h is a header-only host calculator shipped with the CUDA
 * toolkit (no library, no device). When the toolkit's headers are on the
 * include path it is the reference; without them the test is skipped. */
#if defined(__has_include)
#if __has_include(<cuda_occupancy.h>)
#define HAVE_CUDA_OCCUPANCY 1
#endif
#endif

#ifdef HAVE_CUDA_OCCUPANCY
#include <cuda_occupancy.h>

/* cudaOcc's limiting-factor bits in this module's order. */
static unsigned to_hw_limiters(unsigned f)
{
    return ((f & OCC_LIMIT_WARPS) ? HW_LIM_WARPS : 0) |
           ((f & OCC_LIMIT_BLOCKS) ? HW_LIM_BLOCKS : 0) |
           ((f & OCC_LIMIT_REGISTERS) ? HW_LIM_REGS : 0) |
           ((f & OCC_LIMIT_SHARED_MEMORY) ? HW_LIM_SMEM : 0);
}

Test(occ_reference, should_agree_with_cuda_occupancy_h_on_random_launches)
{
    static const char *const gpus[] = {"v100", "t4", "a100-40gb-sxm", "rtx3090", "l40s", "h200"};
    dt_rng rng;
    dt_rng_seed(&rng, 20261129);
    long checked = 0;
    for (size_t k = 0; k < DT_ARRAY_LEN(gpus); k++) {
        hw_spec *g = hwt_load(gpus[k]);
        cudaOccDeviceProp p;
        memset(&p, 0, sizeof p);
        p.computeMajor = g->cc_major;
        p.computeMinor = g->cc_minor;
        p.maxThreadsPerBlock = g->max_threads_per_block;
        p.maxThreadsPerMultiprocessor = g->max_threads_per_sm;
        p.regsPerBlock = g->regs_per_block;
        p.regsPerMultiprocessor = g->regs_per_sm;
        p.warpSize = g->warp_size;
        p.sharedMemPerBlock = (size_t)g->smem_per_block;
        p.sharedMemPerMultiprocessor = (size_t)g->smem_per_sm;
        p.numSms = g->sm_count;
        p.sharedMemPerBlockOptin = (size_t)g->smem_per_block_optin;
        p.reservedSharedMemPerBlock = (size_t)g->smem_reserved;
        for (int it = 0; it < 20000; it++) {
            int threads = 1 + (int)dt_rng_below(&rng, 1100);
            /* 0..255: cuda_occupancy.h accepts 256, which no compiler emits */
            int regs = (int)dt_rng_below(&rng, 256);
            size_t stat = dt_rng_below(&rng, 3) ? 0 : dt_rng_below(&rng, 50000);
            size_t dyn = dt_rng_below(&rng, 2) ? 0 : dt_rng_below(&rng, 240000);
            int carve = dt_rng_below(&rng, 3) ? -1 : (int)dt_rng_below(&rng, 101);
            int optin = (int)dt_rng_below(&rng, 2);
            cudaOccFuncAttributes a;
            memset(&a, 0, sizeof a);
            a.maxThreadsPerBlock = 1024;
            a.numRegs = regs;
            a.sharedSizeBytes = stat;
            a.partitionedGCConfig = PARTITIONED_GC_OFF;
            a.shmemLimitConfig = optin ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
            a.maxDynamicSharedSizeBytes = optin ? dyn : 0;
            a.numBlockBarriers = 1; /* as cudaFuncAttributes converts */
            cudaOccDeviceState s;
            memset(&s, 0, sizeof s);
            s.cacheConfig = CACHE_PREFER_NONE;
            s.carveoutConfig = carve;
            cudaOccResult r;
            memset(&r, 0, sizeof r);
            cudaOccError err =
                cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, threads, dyn);
            hw_occ o;
            dt_err e = {0};
            cr_assert_eq(hw_occupancy(g, threads, regs, stat, dyn, carve, optin, &o, &e), 0, "%s",
                         e.msg);
            if (err != CUDA_OCC_SUCCESS) {
                /* the reference gives up (e.g. a carveout it cannot align); no block
                 * may be claimed then */
                cr_assert_eq(o.blocks, 0, "%s t%d r%d s%zu d%zu c%d o%d", gpus[k], threads, regs,
                             stat, dyn, carve, optin);
                continue;
            }
            checked++;
            cr_assert_eq(o.blocks, r.activeBlocksPerMultiprocessor,
                         "%s t%d r%d s%zu d%zu c%d o%d: %d blocks, reference %d", gpus[k], threads,
                         regs, stat, dyn, carve, optin, o.blocks, r.activeBlocksPerMultiprocessor);
            cr_assert_eq(o.lim_warps, r.blockLimitWarps);
            cr_assert_eq(o.lim_blocks, r.blockLimitBlocks);
            cr_assert_eq(o.lim_regs, r.blockLimitRegs);
            cr_assert_eq(o.lim_smem, r.blockLimitSharedMem);
            cr_assert_eq(o.limiters, to_hw_limiters(r.limitingFactors));
            cr_assert_eq((size_t)o.smem_per_block, r.allocatedSharedMemPerBlock);
            cr_assert_eq(o.regs_per_block, r.allocatedRegistersPerBlock);
        }
        hw_spec_free(g);
    }
    cr_assert_gt(checked, 100000);
}
#else
Test(occ_reference, should_agree_with_cuda_occupancy_h_on_random_launches)
{
    cr_skip_test("cuda_occupancy.h is not on the include path (set CUDA_HOME)");
}
#endif
