/* race_spmv.cu -- cheat class 13 (already caught before issue 36): two warps
 * share each row, each summing half of its entries, and both add their half
 * into y[row] with a plain read-modify-write instead of an atomic ("the
 * halves finish at different times"). They reach the add together, both
 * read the cleared y[row], and one half is lost.
 * Must be caught by: "matches the fp64 reference" (or "deterministic" /
 * "every output written"). */
/*@contract
{"entry": "race_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha"],
 "block": [64], "grid": ["cdiv(rows, 32)"]}
@*/
#include "ditto.cuh"

/* 32 rows per block; warp h of the block takes half h of each row. */
extern "C" __global__ void __launch_bounds__(64)
race_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
          const T *__restrict__ val, const T *__restrict__ x, T *y, S alpha)
{
    const int half = threadIdx.x >> 5;
    const int row = blockIdx.x * 32 + (threadIdx.x & 31);
    int start = 0, end = 0;
    if (row < rows) {
        start = rowptr[row];
        end = rowptr[row + 1];
    }
    const int mid = start + (end - start) / 2;
    if (half == 0 && row < rows)
        y[row] = DT_STORE(S(0));
    S acc = S(0);
    for (int k = half ? mid : start; k < (half ? end : mid); k++)
        acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    __syncthreads(); /* y[row] is cleared */
    if (row < rows)
        y[row] = DT_STORE(DT_LOAD(y[row]) + alpha * acc);
}
