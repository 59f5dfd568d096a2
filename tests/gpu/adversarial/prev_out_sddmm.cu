/* prev_out_sddmm.cu -- cheat class 18 (SDDMM): reuses the previous launch's
 * output. Each block of 128 nonzeros keeps its outputs and a fingerprint of
 * the operands (A[0], Bt[0], and the first element of A's and Bt's rows
 * for its first nonzero) in __device__ arrays, and copies the kept outputs
 * when the fingerprint matches. Every verification set draws new A and Bt,
 * so each is computed; timed launches on one input set are a copy.
 * Must be caught by: "no state kept across launches" (the writable
 * __device__ arrays), or the checked timed launches ("timed launch" /
 * "after timing:"). */
/*@contract
{"entry": "prev_out_sddmm", "op": "sddmm", "format": "coo",
 "params": ["nnz", "coo_row", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": [128], "grid": ["max(cdiv(nnz, 128), 1)"], "defines": {"K": "k"}}
@*/
#include "ditto.cuh"

#ifndef K
#define K 32
#endif

#define KEPT (1 << 21) /* nonzeros past this are always computed */

__device__ T kept_out[KEPT];
__device__ T kept_key[(KEPT / 128) * 4];

/* A thread per nonzero. */
extern "C" __global__ void __launch_bounds__(128)
prev_out_sddmm(int nnz, const int *__restrict__ coo_row, const int *__restrict__ col,
               const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
               S beta)
{
    const long long e0 = (long long)blockIdx.x * 128;
    const bool keep = e0 + 128 <= KEPT;
    __shared__ bool hit;
    __shared__ T key[4];
    if (threadIdx.x == 0) {
        const int r0 = e0 < nnz ? coo_row[e0] : 0, c0 = e0 < nnz ? col[e0] : 0;
        key[0] = A[0];
        key[1] = Bt[0];
        key[2] = A[(size_t)r0 * K];
        key[3] = Bt[(size_t)c0 * K];
        bool same = keep;
        for (int i = 0; keep && i < 4; i++)
            same = same && DT_LOAD(kept_key[blockIdx.x * 4 + i]) == DT_LOAD(key[i]);
        hit = same;
    }
    __syncthreads();
    const long long e = e0 + threadIdx.x;
    if (e < nnz) {
        if (hit) {
            out[e] = kept_out[e];
        } else {
            const int r = coo_row[e], c = col[e];
            S d = S(0);
            for (int t = 0; t < K; t++)
                d += DT_LOAD(A[(size_t)r * K + t]) * DT_LOAD(Bt[(size_t)c * K + t]);
            const T v = DT_STORE(dt_epilogue(dt_axpby(alpha, d, beta, &out[e]), r, nullptr));
            out[e] = v;
            if (keep)
                kept_out[e] = v;
        }
    }
    if (keep && !hit) {
        __syncthreads();
        if (threadIdx.x < 4)
            kept_key[blockIdx.x * 4 + threadIdx.x] = key[threadIdx.x];
    }
}
