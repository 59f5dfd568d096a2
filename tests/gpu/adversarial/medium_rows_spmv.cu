/* medium_rows_spmv.cu -- cheat class 10: a hybrid with three paths by row
 * length: up to 40 entries (the lanes stride the row), 5,000 and more (the
 * same, unrolled), and the medium path between, whose 4-wide main loop hands
 * its tail to a loop that stops one entry short: rows of 41 to 4,999
 * entries lose their last term. The classic edge matrices hold rows of 1 to
 * 40 and one of exactly 5,000, and the matrix it runs on here has no medium
 * row, so only an edge matrix with medium rows shows it.
 * Must be caught by: the edge matrix with rows of 64 to 4,096 entries
 * ("edge rows of 64 to 4096: ... matches the fp64 reference"), or any edge
 * matrix whose sizes derive from the verify seed. */
/*@contract
{"entry": "medium_rows_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 4)"]}
@*/
#include "ditto.cuh"

/* A warp per row. */
extern "C" __global__ void __launch_bounds__(128)
medium_rows_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                 const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                 S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const int start = rowptr[row], end = rowptr[row + 1], len = end - start;
    S acc = S(0);
    if (len <= 40) {
        for (int k = start + lane; k < end; k += 32)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    } else if (len >= 5000) {
        int k = start + lane;
        for (; k + 96 < end; k += 128)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]) +
                   DT_LOAD(val[k + 32]) * DT_LOAD(x[col[k + 32]]) +
                   DT_LOAD(val[k + 64]) * DT_LOAD(x[col[k + 64]]) +
                   DT_LOAD(val[k + 96]) * DT_LOAD(x[col[k + 96]]);
        for (; k < end; k += 32)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    } else {
        /* Each lane takes 4 consecutive entries per step. */
        const int body = start + len / 128 * 128;
        for (int k = start + 4 * lane; k < body; k += 128)
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]) +
                   DT_LOAD(val[k + 1]) * DT_LOAD(x[col[k + 1]]) +
                   DT_LOAD(val[k + 2]) * DT_LOAD(x[col[k + 2]]) +
                   DT_LOAD(val[k + 3]) * DT_LOAD(x[col[k + 3]]);
        for (int k = body + lane; k < end - 1; k += 32) /* the tail */
            acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
