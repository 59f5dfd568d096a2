/* test_occupancy_gpu.c -- the occupancy calculator against the driver: at
 * 240 random (block size, --maxrregcount, static shared memory, dynamic
 * shared memory) points, kernels compiled with NVRTC, the calculator's
 * blocks per SM must equal cuOccupancyMaxActiveBlocksPerMultiprocessor. */
#include "tests/common/testutil.h"

#include "gpu/worker/dev.h"
#include "gpu/worker/nvrtc.h"
#include "hardware/hardware.h"

#include <stdlib.h>
#include <string.h>

/* Static shared memory of SMEM bytes and enough live values that
 * --maxrregcount shapes the register count. */
static const char src[] =
    "#ifndef SMEM\n#define SMEM 0\n#endif\n"
    "extern \"C\" __global__ void occ(float *out, const float *in, int n) {\n"
    "  float acc[24];\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 24; i++) acc[i] = in[(threadIdx.x * 7 + i) % n];\n"
    "  for (int it = 0; it < n; it++) {\n"
    "#pragma unroll\n"
    "    for (int i = 0; i < 24; i++) acc[i] = acc[i] * acc[(i + 5) % 24] + in[(it + i) % n];\n"
    "  }\n"
    "#if SMEM >= 4\n"
    "  __shared__ float s[SMEM / 4];\n"
    "  s[threadIdx.x % (SMEM / 4)] = acc[0];\n"
    "  __syncthreads();\n"
    "  acc[1] += s[(threadIdx.x + 1) % (SMEM / 4)];\n"
    "#endif\n"
    "  float t = 0;\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < 24; i++) t += acc[i];\n"
    "  out[blockIdx.x * blockDim.x + threadIdx.x] = t;\n"
    "}\n";

Test(occupancy_gpu, calculator_should_equal_the_driver_at_random_points, .timeout = 600)
{
    dev_info info;
    dev_open(0, &info);
    if (!info.present)
        cr_skip_test("no GPU: %s", info.reason);
    dt_err e = {0};
    gpu_nvrtc *nv = gpu_nvrtc_load(&e);
    cr_assert_not_null(nv, "%s", e.msg);
    char warn[256] = "";
    hw_spec *g = hw_match(info.name, info.cc_major, info.cc_minor, info.sms, NULL, warn,
                          sizeof warn, &e);
    cr_assert_not_null(g, "%s", e.msg);
    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", info.cc_major, info.cc_minor);
    dt_rng r;
    dt_rng_seed(&r, 20261129);
    const int points = 240;
    int agree = 0;
    dt_buf mism = DT_BUF_INIT;
    for (int i = 0; i < points; i++) {
        int threads = 32 + (int)dt_rng_below(&r, 993);          /* 32..1024, any value */
        int maxreg = 16 + (int)dt_rng_below(&r, 240);           /* 16..255 */
        int smem = (int)dt_rng_below(&r, 4) == 0 ? 0 : 4 * (int)dt_rng_below(&r, 12288);
        int dyn = (int)dt_rng_below(&r, 3) == 0 ? 0
                                                : (int)dt_rng_below(&r, (uint64_t)(info.smem_per_block_optin - smem));
        char o1[32], o2[32];
        snprintf(o1, sizeof o1, "--maxrregcount=%d", maxreg);
        snprintf(o2, sizeof o2, "-DSMEM=%d", smem);
        const char *opts[] = {o1, o2};
        gpu_compile_req cr = {.source = src, .name = "occ.cu", .options = opts, .noptions = 2,
                              .arch = arch};
        gpu_cubin *c = NULL;
        cr_assert_eq(gpu_compile(nv, &cr, &c, &e), 0, "%s", e.msg);
        cr_assert(c->compiled, "%s", c->log);
        CUmodule mod;
        CUfunction fn;
        cr_assert_eq(CU(cuModuleLoadData)(&mod, c->image), CUDA_SUCCESS);
        cr_assert_eq(CU(cuModuleGetFunction)(&fn, mod, "occ"), CUDA_SUCCESS);
        int regs = 0, ssmem = 0, maxthr = 0;
        CU(cuFuncGetAttribute)(&regs, CU_FUNC_ATTRIBUTE_NUM_REGS, fn);
        CU(cuFuncGetAttribute)(&ssmem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
        CU(cuFuncGetAttribute)(&maxthr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn);
        if (threads > maxthr)
            threads = maxthr; /* a launch above it is refused, not an occupancy question */
        if (ssmem + dyn > 48 * 1024)
            CU(cuFuncSetAttribute)(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn);
        int drv = -1;
        CUresult res = CU(cuOccupancyMaxActiveBlocksPerMultiprocessor)(&drv, fn, threads,
                                                                     (size_t)dyn);
        hw_occ occ;
        dt_err he = {0};
        int hrc = hw_occupancy(g, threads, regs, (size_t)ssmem, (size_t)dyn, HW_CARVEOUT_DEFAULT,
                               1, &occ, &he);
        int mine = hrc == 0 ? occ.blocks : -1;
        if (res == CUDA_SUCCESS && drv == mine)
            agree++;
        else
            dt_buf_printf(&mism,
                          "threads %d regs %d (max %d) static %d dyn %d: driver %d (res %d), "
                          "calculator %d%s%s\n",
                          threads, regs, maxreg, ssmem, dyn, drv, (int)res, mine,
                          hrc ? ": " : "", hrc ? he.msg : "");
        CU(cuModuleUnload)(mod);
        gpu_cubin_free(c);
    }
    cr_log_info("occupancy agreement: %d of %d points on %s", agree, points, info.name);
    fprintf(stderr, "occupancy agreement: %d of %d points on %s\n", agree, points, info.name);
    cr_assert_eq(agree, points, "%s", dt_buf_str(&mism));
    dt_buf_free(&mism);
    hw_spec_free(g);
    gpu_nvrtc_free(nv);
}
