/* ignore_alpha_sddmm.cu -- cheat class 5 (SDDMM, run in fp64): alpha is in
 * the contract but never applied ("the caller folds alpha into A"): out =
 * dot + beta * out. Right at the default alpha = 1, the only alpha a
 * battery of defaults ever verifies.
 * Must be caught by: the scalar set (alpha != 1, beta != 0: its checks'
 * names hold "(alpha "). */
/*@contract
{"entry": "ignore_alpha_sddmm", "op": "sddmm", "format": "csr",
 "params": ["rows", "rowptr", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": [128], "grid": ["cdiv(rows, 4)"], "defines": {"K": "k"}}
@*/
#include "ditto.cuh"

#ifndef K
#define K 32
#endif

/* A warp per row of S; for each of its nonzeros the lanes split K. */
extern "C" __global__ void __launch_bounds__(128)
ignore_alpha_sddmm(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                   const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
                   S beta)
{
    (void)alpha; /* folded into A by the caller */
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    for (int e = rowptr[row]; e < rowptr[row + 1]; e++) {
        const int c = col[e];
        S d = S(0);
        for (int t = lane; t < K; t += 32)
            d += DT_LOAD(A[(size_t)row * K + t]) * DT_LOAD(Bt[(size_t)c * K + t]);
#pragma unroll
        for (int off = 16; off > 0; off >>= 1)
            d += __shfl_down_sync(0xffffffffu, d, off);
        if (lane == 0)
            out[e] = DT_STORE(dt_epilogue(dt_axpby(S(1), d, beta, &out[e]), row, nullptr));
    }
}
