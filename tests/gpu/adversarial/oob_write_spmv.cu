/* oob_write_spmv.cu -- cheat class 8 (SpMV, run in fp64): one thread more than
 * there are rows, and that thread writes y[rows] = 0 ("clears the sentinel
 * slot a following scan reads"). The allocation's padding absorbs the write,
 * so without the sanitizer nothing faults and every output is right.
 * Must be caught by: the guard zone after y ("no writes outside the
 * buffers", detail "wrote past the end of 'y'"). */
/*@contract
{"entry": "oob_write_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows + 1, 128)"]}
@*/
#include "ditto.cuh"

extern "C" __global__ void __launch_bounds__(128)
oob_write_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
               const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
               S beta, const T *__restrict__ bias)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row > rows)
        return;
    if (row == rows) {
        y[rows] = DT_STORE(S(0)); /* the sentinel */
        return;
    }
    S acc = S(0);
    for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
        acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
