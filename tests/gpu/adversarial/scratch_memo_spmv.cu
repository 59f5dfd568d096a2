/* scratch_memo_spmv.cu -- cheat class 17: the memo of fingerprint_spmv.cu, kept
 * in the contract's scratch instead of __device__ variables, so no static
 * rule on global variables sees it. The contract says "scratch_init": "once"
 * (zeroed when allocated, and the kernel promises to leave it zeroed); the
 * kernel leaves its last outputs and, per block of 128 rows, four values of
 * x there, and copies the outputs back when the four values match again.
 * Must be caught by: the battery's set 1, which equals set 0 but for about
 * one x value in 64, so the four keys mostly match and the memo replays a
 * wrong answer ("matches the fp64 reference", "no cached answers"); with
 * some verify seeds (they order the sets and runs) the determinism check
 * sees it first, a replayed run differing from a computed one
 * ("deterministic"); in
 * timing the worker zeroes a "once" scratch before every sample and checks
 * the outputs ("timed launch" / "after timing:"). */
/*@contract
{"entry": "scratch_memo_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "cols", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias", "scratch"],
 "block": [128], "grid": ["cdiv(rows, 128)"],
 "scratch_bytes": "(cdiv(rows, 128) * 4 + rows) * value_bytes", "scratch_init": "once"}
@*/
#include "ditto.cuh"

extern "C" __global__ void __launch_bounds__(128)
scratch_memo_spmv(int rows, int cols, const int *__restrict__ rowptr, const int *__restrict__ col,
                  const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                  S beta, const T *__restrict__ bias, void *scratch)
{
    T *memo_key = (T *)scratch;                              /* 4 per block */
    T *memo_y = memo_key + (size_t)((rows + 127) / 128) * 4; /* one per row */
    const int row0 = blockIdx.x * 128;
    __shared__ bool hit;
    __shared__ T key[4];
    if (threadIdx.x == 0) {
        key[0] = x[0];
        key[1] = x[cols / 2];
        key[2] = x[cols - 1];
        key[3] = x[min(row0, cols - 1)];
        bool same = true;
        for (int i = 0; i < 4; i++)
            same = same && DT_LOAD(memo_key[blockIdx.x * 4 + i]) == DT_LOAD(key[i]);
        hit = same;
    }
    __syncthreads();
    const int row = row0 + threadIdx.x;
    if (row < rows) {
        if (hit) {
            y[row] = memo_y[row];
        } else {
            S acc = S(0);
            for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
                acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
            const T v = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
            y[row] = v;
            memo_y[row] = v;
        }
    }
    if (!hit) {
        __syncthreads();
        if (threadIdx.x < 4)
            memo_key[blockIdx.x * 4 + threadIdx.x] = key[threadIdx.x];
    }
}
