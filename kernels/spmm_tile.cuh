/* spmm_tile.cuh -- the row walk shared by csr-tiled-spmm (spmm_csr_tiled.cu)
 * and csr-split-spmm (spmm_csr_split.cu): a lane group accumulates a run of
 * a row's nonzeros times rows of B over the columns of one tile. The
 * including kernel defines T, S, N, UNROLL and the lane layout: VW (elements
 * per vector), NVT (vectors per tile row), L (lanes per group), NCH
 * (vectors per lane) and FULL_TILES (every tile full: no column check). */
#pragma once

/* VW values moved as one load or store: the alignment makes it a single 16-byte (or
 * narrower) access. */
struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

__device__ __forceinline__ bool vec_in(int v, int col0)
{
    return v < NVT && (FULL_TILES || col0 + v * VW < N);
}

/* acc += a * B[c, tile columns owned by this lane]. */
__device__ __forceinline__ void fma_brow(S (&acc)[NCH][VW], S a, const T *__restrict__ B, int c,
                                         int col0, int gl)
{
    const T *brow = B + (size_t)c * N + col0;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
        const int v = ch * L + gl;
        if (vec_in(v, col0)) {
            const vec_t b = *reinterpret_cast<const vec_t *>(brow + v * VW);
#pragma unroll
            for (int e = 0; e < VW; e++)
                acc[ch][e] += a * DT_LOAD(b.e[e]);
        }
    }
}

/* acc = sum over k = beg, beg + step, ... < end of val[k] * B[col[k], :], UNROLL nonzeros
 * in flight: their column loads, then their B loads, are independent. (end - ... rather
 * than k + ... so that nothing overflows.) */
__device__ __forceinline__ void row_segment(S (&acc)[NCH][VW], int beg, int end, int step,
                                            const int *__restrict__ col,
                                            const T *__restrict__ val, const T *__restrict__ B,
                                            int col0, int gl)
{
#pragma unroll
    for (int ch = 0; ch < NCH; ch++)
#pragma unroll
        for (int e = 0; e < VW; e++)
            acc[ch][e] = S(0);
    int k = beg;
    for (; k < end - (UNROLL - 1) * step; k += UNROLL * step) {
        int c[UNROLL];
        S a[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            c[u] = __ldg(col + k + u * step);
            a[u] = DT_LOAD(val[k + u * step]);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            fma_brow(acc, a[u], B, c[u], col0, gl);
    }
    for (; k < end; k += step)
        fma_brow(acc, DT_LOAD(val[k]), B, __ldg(col + k), col0, gl);
}
