/* cached.cu -- a cheating SpMV: the first launch computes y and keeps a copy
 * in device memory; every later launch replays that copy whatever x is. The
 * battery's "no cached answers" check must catch it. */
/*@contract
{"entry": "cached", "op": "spmv", "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha"],
 "block": [128], "grid": ["cdiv(rows, 128)"], "requires": {"max_row": 100000}}
@*/
#include "ditto.cuh"
#define CACHE (1 << 22)
__device__ T cache_y[CACHE];
__device__ int cache_launches;
extern "C" __global__ void cached(int rows, const int *rowptr, const int *col, const T *val,
                                  const T *x, T *y, S alpha)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    __shared__ int first;
    if (threadIdx.x == 0)
        first = *(volatile int *)&cache_launches < (int)gridDim.x;
    __syncthreads();
    if (threadIdx.x == 0)
        atomicAdd(&cache_launches, 1);
    if (row >= rows || row >= CACHE)
        return;
    if (first) {
        S acc = 0;
        for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
        cache_y[row] = DT_STORE(alpha * acc);
    }
    y[row] = cache_y[row];
}
