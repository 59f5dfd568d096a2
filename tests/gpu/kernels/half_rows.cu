/* half_rows.cu -- a broken SpMV for the battery's tests: it computes only the
 * first half of the rows. The "every output written" check must catch it. */
/*@contract
{"entry": "half_rows", "op": "spmv", "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"
extern "C" __global__ void half_rows(int rows, const int *rowptr, const int *col, const T *val,
                                     const T *x, T *y, S alpha)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows / 2)
        return;
    S acc = 0;
    for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
        acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    y[row] = DT_STORE(alpha * acc);
}
