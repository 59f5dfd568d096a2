/* ignore_bias_spmv.cu -- cheat class 7 (SpMV, run with epilogue "bias"): a
 * fast path for alpha = 1, beta = 0 applies the epilogue; the general path
 * (alpha * acc + beta * y0) forgets it. Verified with only the defaults
 * (alpha 1, beta 0) it is always right, bias included.
 * Must be caught by: the scalar set with the requested epilogue (alpha != 1,
 * beta != 0: its checks' names hold "(alpha "). */
/*@contract
{"entry": "ignore_bias_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 16)"]}
@*/
#include "ditto.cuh"

/* 8 lanes per row, 16 rows per block. */
extern "C" __global__ void __launch_bounds__(128)
ignore_bias_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                 const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                 S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 7;
    const int row = blockIdx.x * 16 + (threadIdx.x >> 3);
    S acc = S(0);
    if (row < rows)
        for (int k = rowptr[row] + lane; k < rowptr[row + 1]; k += 8)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
#pragma unroll
    for (int off = 4; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, 8);
    if (lane != 0 || row >= rows)
        return;
    if (alpha == S(1) && beta == S(0))
        y[row] = DT_STORE(dt_epilogue(acc, row, bias)); /* the common case */
    else
        y[row] = DT_STORE(alpha * acc + beta * DT_LOAD(y[row]));
}
