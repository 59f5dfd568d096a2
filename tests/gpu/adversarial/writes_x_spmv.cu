/* writes_x_spmv.cu -- cheat class 14 (already caught before issue 36): the
 * last block to finish (a counter in the zeroed scratch) rounds x to fp16 in
 * place, "a compact copy for the next launch to read". Every block has read
 * x by then, so this launch's y is right; x is not what the caller gave.
 * Must be caught by: "inputs unchanged" (detail "the kernel wrote into its
 * input 'x'"). */
/*@contract
{"entry": "writes_x_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "cols", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias", "scratch"],
 "block": [128], "grid": ["cdiv(rows, 128)"], "scratch_bytes": "4", "scratch_init": "launch"}
@*/
#include "ditto.cuh"
#include <cuda_fp16.h>

extern "C" __global__ void __launch_bounds__(128)
writes_x_spmv(int rows, int cols, const int *__restrict__ rowptr, const int *__restrict__ col,
              const T *__restrict__ val, T *x, T *__restrict__ y, S alpha, S beta,
              const T *__restrict__ bias, void *scratch)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        S acc = S(0);
        for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
    }
    __shared__ bool last;
    __syncthreads(); /* the whole block has read x */
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd((unsigned *)scratch, 1u) == gridDim.x - 1;
    }
    __syncthreads();
    if (last)
        for (int i = threadIdx.x; i < cols; i += blockDim.x)
            x[i] = DT_STORE((S)__half2float(__float2half_rn((float)DT_LOAD(x[i]))));
}
