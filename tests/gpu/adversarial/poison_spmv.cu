/* poison_spmv.cu -- cheat class 1 (SpMV): it computes a row only while y[row]
 * still holds NaN, "skipping rows an earlier launch already produced". The
 * battery poisons y with NaN before every verification launch, so verify
 * sees an honest kernel; a timed launch after the first finds y written and
 * returns at once. Guarded by beta == 0 so that a scalar set with beta != 0
 * (y0 in y) does not expose it.
 * Must be caught by: the timed launches' outputs being checked (measure
 * error "suspect", "timed launch ..." or "after timing: ..."), or a poison
 * that is not NaN ("every output written" / "matches the fp64 reference"). */
/*@contract
{"entry": "poison_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [256], "grid": ["cdiv(rows, 8)"]}
@*/
#include "ditto.cuh"

/* A warp per row, 8 rows per block. */
extern "C" __global__ void __launch_bounds__(256)
poison_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
            const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
            const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= rows)
        return; /* the whole warp: row is the warp's */
    /* Incremental update: a row whose output is already a number was
     * produced by an earlier launch on the same operands. */
    if (beta == S(0) && !isnan((double)DT_LOAD(y[row])))
        return;
    S acc = S(0);
    for (int k = rowptr[row] + lane; k < rowptr[row + 1]; k += 32)
        acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
