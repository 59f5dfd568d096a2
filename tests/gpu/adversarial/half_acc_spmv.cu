/* half_acc_spmv.cu -- cheat class 15 (already caught before issue 36), fp32:
 * the products are summed in half precision ("tensor-core friendly"), 11
 * bits of mantissa for a result the fp32 tolerance bounds near 24.
 * Must be caught by: "matches the fp64 reference". */
/*@contract
{"entry": "half_acc_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"
#include <cuda_fp16.h>

extern "C" __global__ void __launch_bounds__(128)
half_acc_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
              const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
              S beta, const T *__restrict__ bias)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    __half acc = __float2half_rn(0.0f);
    for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
        acc = __hadd(acc, __float2half_rn((float)(DT_LOAD(val[k]) * DT_LOAD(x[col[k]]))));
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, (S)__half2float(acc), beta, &y[row]), row, bias));
}
