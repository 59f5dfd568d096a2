/* slack_memo_spmv.cu -- cheat class 20: a memo keyed on the whole of x (and
 * alpha, and the bias of its rows), kept past the end of y beyond its guard:
 * 4 KiB on, in the rest of y's allocation, where no check of the buffers
 * themselves reads. Any changed input value changes the key, so every set,
 * the near set and the determinism check get right answers; under graph
 * replay, whose 50 launches of a sample share their inputs, each launch
 * after the first would copy the memo instead of computing. It keeps a memo
 * only when beta is 0 (the output's old value is then not an input).
 * Must be caught by: the allocations' slack, read back after verification
 * ("no writes in the slack past the buffers") and after timing ("after
 * timing: the kernel wrote past the end of"). */
/*@contract
{"entry": "slack_memo_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "cols", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"

extern "C" __global__ void __launch_bounds__(128)
slack_memo_spmv(int rows, int cols, const int *__restrict__ rowptr, const int *__restrict__ col,
                const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                S beta, const T *__restrict__ bias)
{
    unsigned *keys = (unsigned *)((char *)(y + rows) + 4096);
    T *memo = (T *)(keys + gridDim.x);
    const int row = blockIdx.x * 128 + threadIdx.x;
    __shared__ unsigned h;
    __shared__ bool hit;
    if (threadIdx.x == 0)
        h = 2166136261u ^ (unsigned)rows ^ __float_as_uint((float)alpha) * 16777619u;
    __syncthreads();
    unsigned mine = 0;
    for (int i = threadIdx.x; i < cols; i += 128) {
        unsigned w = __float_as_uint((float)DT_LOAD(x[i])) ^ ((unsigned)i * 2654435761u);
        w *= 0x9E3779B1u;
        mine += w ^ (w >> 15);
    }
    if (bias != NULL && row < rows)
        mine += __float_as_uint((float)DT_LOAD(bias[row])) * 0x85EBCA6Bu;
    atomicAdd(&h, mine); /* a sum: the same whatever order the threads add in */
    __syncthreads();
    if (threadIdx.x == 0)
        hit = beta == S(0) && keys[blockIdx.x] == h;
    __syncthreads();
    if (row < rows) {
        if (hit) {
            y[row] = memo[row];
        } else {
            S acc = S(0);
            for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
                acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
            const T v = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
            y[row] = v;
            if (beta == S(0))
                memo[row] = v;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0 && !hit && beta == S(0)) {
        __threadfence();
        keys[blockIdx.x] = h;
    }
}
