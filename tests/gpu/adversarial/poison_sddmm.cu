/* poison_sddmm.cu -- cheat class 1 (SDDMM): a nonzero's output is computed
 * only while out[e] still holds NaN, guarded by beta == 0 (with beta != 0
 * out holds the old values and must be read anyway). Verification poisons
 * out before every launch; timed launches after the first return at once.
 * Must be caught by: the checked timed launches (measure error "suspect",
 * "timed launch" / "after timing:"), or a poison that is not NaN ("every
 * output written" / "matches the fp64 reference"). */
/*@contract
{"entry": "poison_sddmm", "op": "sddmm", "format": "coo",
 "params": ["nnz", "coo_row", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": [128], "grid": ["max(cdiv(nnz, 4), 1)"], "defines": {"K": "k"}}
@*/
#include "ditto.cuh"

#ifndef K
#define K 32
#endif

/* A warp per nonzero, its lanes across K. */
extern "C" __global__ void __launch_bounds__(128)
poison_sddmm(int nnz, const int *__restrict__ coo_row, const int *__restrict__ col,
             const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
             S beta)
{
    const int lane = threadIdx.x & 31;
    const int e = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (e >= nnz)
        return;
    const bool done = beta == S(0) && !isnan((double)DT_LOAD(out[e]));
    __syncwarp();
    if (done)
        return;
    const int r = coo_row[e], c = col[e];
    S d = S(0);
    for (int t = lane; t < K; t += 32)
        d += DT_LOAD(A[(size_t)r * K + t]) * DT_LOAD(Bt[(size_t)c * K + t]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        d += __shfl_down_sync(0xffffffffu, d, off);
    if (lane == 0)
        out[e] = DT_STORE(dt_epilogue(dt_axpby(alpha, d, beta, &out[e]), r, nullptr));
}
