/* ignore_beta_spmm.cu -- cheat class 6 (SpMM): C = alpha * A B, never reading
 * the old C ("beta is always 0 in practice", and skipping the read of C
 * saves a third of the output traffic). Right at the default beta = 0, the
 * only beta a battery of defaults ever verifies.
 * Must be caught by: the scalar set (beta != 0 with a random y0: its
 * checks' names hold "(alpha "). */
/*@contract
{"entry": "ignore_beta_spmm", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 4)"], "defines": {"N": "n"}}
@*/
#include "ditto.cuh"

#ifndef N
#define N 32
#endif

/* A warp per row of C, lanes across N, UNROLL 2 over the row's nonzeros. */
extern "C" __global__ void __launch_bounds__(128)
ignore_beta_spmm(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                 const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
                 S beta, const T *__restrict__ bias)
{
    (void)beta; /* write-only output: no read of C */
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const int start = rowptr[row], end = rowptr[row + 1];
    for (int j = lane; j < N; j += 32) {
        S a0 = S(0), a1 = S(0);
        int k = start;
        for (; k + 1 < end; k += 2) {
            a0 += DT_LOAD(val[k]) * DT_LOAD(B[(size_t)col[k] * N + j]);
            a1 += DT_LOAD(val[k + 1]) * DT_LOAD(B[(size_t)col[k + 1] * N + j]);
        }
        if (k < end)
            a0 += DT_LOAD(val[k]) * DT_LOAD(B[(size_t)col[k] * N + j]);
        C[(size_t)row * N + j] = DT_STORE(dt_epilogue(alpha * (a0 + a1), row, bias));
    }
}
