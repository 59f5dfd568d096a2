/* float_acc_spmm.cu -- cheat class 15 (already caught before issue 36), run
 * in fp64: the values are loaded as doubles but summed in fp32 ("twice the
 * FMA rate"), 24 bits of mantissa for a result the fp64 tolerance bounds
 * near 53.
 * Must be caught by: "matches the fp64 reference". */
/*@contract
{"entry": "float_acc_spmm", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 4)"], "defines": {"N": "n"}}
@*/
#include "ditto.cuh"

#ifndef N
#define N 32
#endif

/* A warp per row of C, lanes across N. */
extern "C" __global__ void __launch_bounds__(128)
float_acc_spmm(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
               const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
               S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * 4 + (threadIdx.x >> 5);
    if (row >= rows)
        return;
    const int start = rowptr[row], end = rowptr[row + 1];
    for (int j = lane; j < N; j += 32) {
        float acc = 0.0f;
        for (int k = start; k < end; k++)
            acc = fmaf((float)DT_LOAD(val[k]), (float)DT_LOAD(B[(size_t)col[k] * N + j]), acc);
        T *c = C + (size_t)row * N + j;
        *c = DT_STORE(dt_epilogue(dt_axpby(alpha, (S)acc, beta, c), row, bias));
    }
}
