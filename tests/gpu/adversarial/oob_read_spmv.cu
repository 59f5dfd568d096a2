/* oob_read_spmv.cu -- cheat class 9 (SpMV): every row is padded to a multiple
 * of 4 entries ELL-style, the padding pointing at column `cols` with value 0,
 * so the unrolled loop reads x[cols], one past x's end, and adds 0 * x[cols]
 * ("x is always allocated with a spare zero"). Whatever finite value lies
 * there, the result is right.
 * Must be caught by: the guard zone after x holding NaN (0 * NaN = NaN):
 * "matches the fp64 reference" or "every output written" fails, or the
 * guard check reports the read ("outside the buffers"). */
/*@contract
{"entry": "oob_read_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "cols", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"

extern "C" __global__ void __launch_bounds__(128)
oob_read_spmv(int rows, int cols, const int *__restrict__ rowptr, const int *__restrict__ col,
              const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
              S beta, const T *__restrict__ bias)
{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    const int start = rowptr[row], end = rowptr[row + 1];
    const int padded = start + (end - start + 3) / 4 * 4;
    S acc = S(0);
    for (int k = start; k < padded; k += 4) {
#pragma unroll
        for (int u = 0; u < 4; u++) {
            const bool in = k + u < end;
            const int c = in ? col[k + u] : cols; /* the padding column */
            const S v = in ? DT_LOAD(val[k + u]) : S(0);
            acc += v * DT_LOAD(x[c]);
        }
    }
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
