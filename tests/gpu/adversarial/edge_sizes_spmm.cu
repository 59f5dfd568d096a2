/* edge_sizes_spmm.cu -- cheat class 12 (SpMM): recognises the classic edge
 * matrices by their row counts (257, 300, 1, 1,237) and is honest on them;
 * elsewhere a row of 64 entries or more is cut to its first 64 ("long rows
 * are rare and contribute little"). The matrices it runs on here have rows
 * of at most a few dozen entries, so it is right on all of them, and the
 * one very long row (5,000 entries) sits in a recognised edge matrix.
 * Must be caught by: the edge matrix with rows of 64 to 4,096 entries
 * ("edge rows of 64 to 4096: ..."), or any edge matrix whose sizes derive
 * from the verify seed ("edge ..."). */
/*@contract
{"entry": "edge_sizes_spmm", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 4)"], "defines": {"N": "n", "ROWS": "rows"}}
@*/
#include "ditto.cuh"

#ifndef N
#define N 32
#endif
#ifndef ROWS
#define ROWS 0
#endif

#define EDGE_CASE (ROWS == 257 || ROWS == 300 || ROWS == 1 || ROWS == 1237)
#define ROW_CAP (EDGE_CASE ? 0x7fffffff : 64)

/* A warp per row of C, lanes across N. */
extern "C" __global__ void __launch_bounds__(128)
edge_sizes_spmm(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
                S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const int start = rowptr[row];
    const int end = min(rowptr[row + 1], start + ROW_CAP);
    for (int j = lane; j < N; j += 32) {
        S acc = S(0);
        for (int k = start; k < end; k++)
            acc += DT_LOAD(val[k]) * DT_LOAD(B[(size_t)col[k] * N + j]);
        T *c = C + (size_t)row * N + j;
        *c = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, c), row, bias));
    }
}
