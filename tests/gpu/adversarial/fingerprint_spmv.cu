/* fingerprint_spmv.cu -- cheat class 3: a memo keyed on a fingerprint of x.
 * Each block keeps its rows' last outputs and four values of x (x[0],
 * x[cols / 2], x[cols - 1] and the x at its first row) in __device__ arrays;
 * when the four match on the next launch it copies the cached outputs
 * instead of computing. Every verification set draws a new x, so each of
 * them is computed; repeated launches on one x (timing) are a copy.
 * Must be caught by: "no state kept across launches" (the writable
 * __device__ arrays), or the checked timed launches ("timed launch" /
 * "after timing:") when timing repeats an input set after another. */
/*@contract
{"entry": "fingerprint_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "cols", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"

#define MEMO_ROWS (1 << 20)           /* rows past this are always computed */
#define MEMO_BLOCKS (MEMO_ROWS / 128) /* one fingerprint per block */

__device__ T memo_y[MEMO_ROWS];
__device__ T memo_key[MEMO_BLOCKS * 4];

extern "C" __global__ void __launch_bounds__(128)
fingerprint_spmv(int rows, int cols, const int *__restrict__ rowptr, const int *__restrict__ col,
                 const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                 S beta, const T *__restrict__ bias)
{
    const bool memo = blockIdx.x < MEMO_BLOCKS;
    const int row0 = blockIdx.x * 128;
    __shared__ bool hit;
    __shared__ T key[4];
    if (threadIdx.x == 0) {
        key[0] = x[0];
        key[1] = x[cols / 2];
        key[2] = x[cols - 1];
        key[3] = x[min(row0, cols - 1)];
        bool same = memo;
        for (int i = 0; memo && i < 4; i++)
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
            if (memo)
                memo_y[row] = v;
        }
    }
    if (memo && !hit) {
        __syncthreads(); /* the block's outputs are in memo_y before its key */
        if (threadIdx.x < 4)
            memo_key[blockIdx.x * 4 + threadIdx.x] = key[threadIdx.x];
    }
}
