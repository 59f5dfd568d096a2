/* counter.cu -- an SpMV that counts its launches in scratch and never sets the count
 * back: y[r] = A x + (launches before this one). Right on a zeroed scratch only, so
 * with "scratch_init": "once" the battery's second run on the same allocation must
 * fail it, and with "launch" (a memset before every launch) it must pass. */
/*@contract
{"entry": "counter", "op": "spmv", "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha",
 "scratch"], "block": [128], "grid": ["cdiv(rows, 128)"], "scratch_bytes": "rows * 4",
 "scratch_init": "once"}
@*/
#include "ditto.cuh"
extern "C" __global__ void counter(int rows, const int *rowptr, const int *col, const T *val,
                                   const T *x, T *y, S alpha, void *scratch)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    S acc = 0;
    for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
        acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    const unsigned before = atomicAdd((unsigned *)scratch + row, 1u);
    y[row] = DT_STORE(alpha * acc + S(before));
}
