/* oob_before_spmv.cu -- cheat class 8, the other end (SpMV): the thread of
 * row 0 also stores a zero at y[-1], "the identity a following segmented
 * scan reads before row 0". Every output is right; the store lands in
 * whatever precedes y's allocation, and nothing faults without the
 * sanitizer.
 * Must be caught by: a guard zone before y ("no writes outside the
 * buffers", detail "wrote before the start of 'y'"). */
/*@contract
{"entry": "oob_before_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 16)"]}
@*/
#include "ditto.cuh"

/* 8 lanes per row, 16 rows per block. */
extern "C" __global__ void __launch_bounds__(128)
oob_before_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
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
    if (row == 0)
        y[-1] = DT_STORE(S(0)); /* the scan's identity */
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
