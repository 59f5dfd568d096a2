/* poison_spmm.cu -- cheat class 1 (SpMM): a row of C is computed only when
 * its first element still holds NaN ("rows already produced are kept").
 * Verification poisons C with NaN before every launch, so it sees an honest
 * kernel; timed launches after the first return at once. Not guarded by
 * beta: with beta != 0 C holds y0 and the row is skipped.
 * Must be caught by: the scalar set (alpha != 1, beta != 0: its checks'
 * names hold "(alpha "), or the checked timed launches ("timed launch" /
 * "after timing:"), or a poison that is not NaN. */
/*@contract
{"entry": "poison_spmm", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 4)"], "defines": {"N": "n"}}
@*/
#include "ditto.cuh"

#ifndef N
#define N 32
#endif

/* A warp per row of C, its lanes across the N columns. */
extern "C" __global__ void __launch_bounds__(128)
poison_spmm(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
            const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha, S beta,
            const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    T *c = C + (size_t)row * N;
    const bool done = !isnan((double)DT_LOAD(c[0]));
    __syncwarp(); /* every lane has read c[0] before lane 0 overwrites it */
    if (done)
        return;
    const int start = rowptr[row], end = rowptr[row + 1];
    for (int j = lane; j < N; j += 32) {
        S acc = S(0);
        for (int k = start; k < end; k++)
            acc += DT_LOAD(val[k]) * DT_LOAD(B[(size_t)col[k] * N + j]);
        c[j] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &c[j]), row, bias));
    }
}
