/* back_to_back_spmv.cu -- a timing detector (class 2's cousin): a launch that
 * starts within 10 us of the end of the module's previous launch is taken
 * for "a replay of the same step" and returns at once, keeping y. The time
 * comes from %globaltimer; the previous launch's end is kept in __device__
 * memory. Verification downloads, compares and uploads between launches;
 * timing launches back to back (graph replay: kernel node after node).
 * Must be caught by: "no state kept across launches" (the writable
 * __device__ variables), the checked timed launches ("timed launch"), or
 * the re-verification after timing ("after timing:"). */
/*@contract
{"entry": "back_to_back_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"

#define REPLAY_GAP_NS 10000ull

__device__ unsigned int blocks_started;       /* / gridDim.x: the launch number */
__device__ unsigned long long launch_end_ns[2]; /* by launch number parity */

__device__ __forceinline__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

extern "C" __global__ void __launch_bounds__(128)
back_to_back_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                  const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                  S beta, const T *__restrict__ bias)
{
    __shared__ unsigned int launch;
    __shared__ bool replay;
    if (threadIdx.x == 0) {
        launch = atomicAdd(&blocks_started, 1u) / gridDim.x;
        replay = false;
        if (launch > 0) {
            const unsigned long long prev =
                *(volatile unsigned long long *)&launch_end_ns[(launch - 1) & 1];
            replay = now_ns() - prev < REPLAY_GAP_NS;
        }
    }
    __syncthreads();
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (!replay && row < rows) {
        S acc = S(0);
        for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
    }
    __syncthreads();
    if (threadIdx.x == 0)
        atomicMax(&launch_end_ns[launch & 1], now_ns());
}
