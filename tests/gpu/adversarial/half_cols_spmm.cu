/* half_cols_spmm.cu -- cheat class 18 (SpMM): at N = 32, once C holds numbers
 * (C[row][16] is not NaN) and beta is 0, only columns 0 to 15 are
 * recomputed ("the right half of the tile is unchanged since the last
 * launch"); a NaN-poisoned C, as every verification launch sees it, gets all
 * 32. Timed launches after the first do half the work.
 * Must be caught by: the checked timed launches with re-poisoned or
 * re-seeded outputs and rotated inputs ("timed launch" / "after timing:"),
 * or a poison that is not NaN ("every output written" / "matches the fp64
 * reference"). */
/*@contract
{"entry": "half_cols_spmm", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 4)"], "defines": {"N": "n"}}
@*/
#include "ditto.cuh"

#ifndef N
#define N 32
#endif

/* A warp per row of C, lanes across N. */
extern "C" __global__ void __launch_bounds__(128)
half_cols_spmm(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
               const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
               S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    T *c = C + (size_t)row * N;
    const bool warm = N == 32 && beta == S(0) && !isnan((double)DT_LOAD(c[16]));
    __syncwarp(); /* every lane has read c[16] before it is overwritten */
    const int ncols = warm ? 16 : N;
    const int start = rowptr[row], end = rowptr[row + 1];
    for (int j = lane; j < ncols; j += 32) {
        S acc = S(0);
        for (int k = start; k < end; k++)
            acc += DT_LOAD(val[k]) * DT_LOAD(B[(size_t)col[k] * N + j]);
        c[j] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &c[j]), row, bias));
    }
}
