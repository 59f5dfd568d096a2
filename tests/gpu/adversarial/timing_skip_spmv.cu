/* timing_skip_spmv.cu -- cheat class 4: after its module has run 6 launches
 * (verification runs 2 to 4), every 4th block of rows returns at once, so
 * timing skips a quarter of the rows while y still holds them from earlier
 * launches on the same x. Too small a cut for the physical-floor check.
 * Must be caught by: "no state kept across launches" (the writable
 * __device__ counter), the checked timed launches ("timed launch"), or the
 * re-verification after timing ("after timing:"). */
/*@contract
{"entry": "timing_skip_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [256], "grid": ["cdiv(rows, 32)"]}
@*/
#include "ditto.cuh"

__device__ unsigned int launch_blocks; /* blocks started, all launches */

/* 8 lanes per row, 32 rows per block. */
extern "C" __global__ void __launch_bounds__(256)
timing_skip_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                 const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                 S beta, const T *__restrict__ bias)
{
    __shared__ bool skip;
    if (threadIdx.x == 0) {
        const unsigned launch = atomicAdd(&launch_blocks, 1u) / gridDim.x;
        skip = launch > 6 && blockIdx.x % 4 == 3;
    }
    __syncthreads();
    if (skip)
        return;
    const int lane = threadIdx.x & 7;
    const int row = blockIdx.x * 32 + (threadIdx.x >> 3);
    S acc = S(0);
    if (row < rows)
        for (int k = rowptr[row] + lane; k < rowptr[row + 1]; k += 8)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
#pragma unroll
    for (int off = 4; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, 8);
    if (lane == 0 && row < rows)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
