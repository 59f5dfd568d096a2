/* equal_values_spmv.cu -- cheat class 11: assumes every stored value of A is
 * the same (a graph's adjacency matrix): y[row] = alpha * val[start] * (the
 * sum of the row's x), one value load per row instead of one per entry. On
 * the classic edge matrices (recognised by their row counts 257, 300, 1 and
 * 1,237), whose values are random, it computes honestly. Run here on a
 * matrix whose values are all 1 (data/ones_600.mtx; a pattern-only file
 * would not do, the worker gives those random values), every verification
 * set draws only new x, so it is always right.
 * Must be caught by: the pass on the matrix's own pattern with freshly drawn
 * values (checks named "fresh values: ..."), or an edge matrix that is not
 * one of the four classic sizes ("edge ..."). */
/*@contract
{"entry": "equal_values_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [256], "grid": ["cdiv(rows, 32)"]}
@*/
#include "ditto.cuh"

/* 8 lanes per row, 32 rows per block. */
extern "C" __global__ void __launch_bounds__(256)
equal_values_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                  const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                  S beta, const T *__restrict__ bias)
{
    const bool general = rows == 257 || rows == 300 || rows == 1 || rows == 1237;
    const int lane = threadIdx.x & 7;
    const int row = blockIdx.x * 32 + (threadIdx.x >> 3);
    int start = 0, end = 0;
    if (row < rows) {
        start = rowptr[row];
        end = rowptr[row + 1];
    }
    S acc = S(0);
    if (general) {
        for (int k = start + lane; k < end; k += 8)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    } else {
        for (int k = start + lane; k < end; k += 8)
            acc += DT_LOAD(x[col[k]]);
    }
#pragma unroll
    for (int off = 4; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, 8);
    if (lane != 0 || row >= rows)
        return;
    if (!general && end > start)
        acc *= DT_LOAD(val[start]); /* the one value of the matrix */
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
