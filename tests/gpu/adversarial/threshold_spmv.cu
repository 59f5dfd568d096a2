/* threshold_spmv.cu -- a data-dependent skip that the default inputs never
 * show: terms with |x[col]| < 0.25 are dropped. The battery's ordinary sets
 * draw |x| in [0.5, 1.5), so they pass it; the scalar set draws magnitudes
 * down to 2^-7 and sees the missing terms.
 * Must be caught by: "(alpha " (the scalar set's reference check). */
/*@contract
{"entry": "threshold_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 16)"]}
@*/
#include "ditto.cuh"

#define NEGLIGIBLE 0.25

/* 8 lanes per row, 16 rows per block. */
extern "C" __global__ void __launch_bounds__(128)
threshold_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
              const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
              S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 7;
    const int row = blockIdx.x * 16 + (threadIdx.x >> 3);
    S acc = S(0);
    if (row < rows)
        for (int k = rowptr[row] + lane; k < rowptr[row + 1]; k += 8) {
            const S xv = DT_LOAD(x[col[k]]);
            if (fabs((double)xv) >= NEGLIGIBLE)
                acc += DT_LOAD(val[k]) * xv;
        }
#pragma unroll
    for (int off = 4; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, 8);
    if (lane == 0 && row < rows)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
