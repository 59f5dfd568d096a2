/* oob_write_sddmm.cu -- cheat class 8 (SDDMM): the grid is rounded up to whole
 * blocks of 128 nonzeros and the threads past the end store a zero at
 * out[nnz] ("a padding slot"), instead of returning. Every real output is
 * right, and the allocation's slack absorbs the extra write.
 * Must be caught by: the guard zone after out ("no writes outside the
 * buffers", detail "wrote past the end of 'out'"). */
/*@contract
{"entry": "oob_write_sddmm", "op": "sddmm", "format": "coo",
 "params": ["nnz", "coo_row", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": [128], "grid": ["cdiv(nnz + 1, 128)"], "defines": {"K": "k"}}
@*/
#include "ditto.cuh"

#ifndef K
#define K 32
#endif

/* A thread per nonzero, K unrolled by 4. */
extern "C" __global__ void __launch_bounds__(128)
oob_write_sddmm(int nnz, const int *__restrict__ coo_row, const int *__restrict__ col,
                const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
                S beta)
{
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= nnz) {
        out[nnz] = DT_STORE(S(0)); /* padding slot */
        return;
    }
    const int r = coo_row[e], c = col[e];
    const T *a = A + (size_t)r * K, *b = Bt + (size_t)c * K;
    S d = S(0);
    int t = 0;
    for (; t + 3 < K; t += 4)
        d += DT_LOAD(a[t]) * DT_LOAD(b[t]) + DT_LOAD(a[t + 1]) * DT_LOAD(b[t + 1]) +
             DT_LOAD(a[t + 2]) * DT_LOAD(b[t + 2]) + DT_LOAD(a[t + 3]) * DT_LOAD(b[t + 3]);
    for (; t < K; t++)
        d += DT_LOAD(a[t]) * DT_LOAD(b[t]);
    out[e] = DT_STORE(dt_epilogue(dt_axpby(alpha, d, beta, &out[e]), r, nullptr));
}
