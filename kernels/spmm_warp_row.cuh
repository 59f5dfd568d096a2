/* spmm_warp_row.cuh -- the lane mapping and the per-row pieces shared by
 * the warp-per-row SpMM templates over CSR (spmm_csr_warp.cu) and ELL
 * (spmm_ell.cu): which columns of B and C a lane owns, the FMA of one
 * nonzero against its row of B, the fold of a row's groups and the store
 * with the epilogue. The including kernel defines N, VEC, LANES,
 * ROWS_PER_WARP and TN. */
#pragma once

#include "lanes.cuh"

static constexpr int VW = vec_width(VEC, N, (int)sizeof(T));
static constexpr int TE = N < TN ? N : TN;                      /* columns of one tile */
static constexpr int NVT = TE / VW;                             /* vectors per tile row */
static constexpr int L = group_lanes(NVT, LANES);               /* lanes per group */
static constexpr int G = 32 / L;                                /* groups per warp */
static constexpr int NCH = (NVT + L - 1) / L;                   /* vectors per lane */
static constexpr int P = ROWS_PER_WARP < G ? ROWS_PER_WARP : G; /* rows in flight */
static constexpr int GPR = G / P;                               /* groups per row */
static constexpr int ROUNDS = ROWS_PER_WARP / P;
/* Every tile but possibly the last is full: the column check folds away. */
static constexpr bool FULL_TILES = N % TN == 0 || N <= TN;

static_assert(TN % 8 == 0 && TE % VW == 0, "column tile must hold whole vectors");
static_assert((ROWS_PER_WARP & (ROWS_PER_WARP - 1)) == 0, "ROWS_PER_WARP: a power of two");

/* VW values moved as one load or store: the alignment makes it a single
 * 16-byte (or narrower) access. */
struct __align__(VW * sizeof(T)) vec_t
{
    T e[VW];
};

/* acc += a * B[c, tile columns owned by this lane]. */
__device__ __forceinline__ void fma_brow(S (&acc)[NCH][VW], S a, const T *__restrict__ B, int c,
                                         int col0, int gl)
{
    const T *brow = B + (size_t)c * N + col0;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
        const int v = ch * L + gl;
        if (v < NVT && (FULL_TILES || col0 + v * VW < N)) {
            const vec_t b = *reinterpret_cast<const vec_t *>(brow + v * VW);
#pragma unroll
            for (int e = 0; e < VW; e++)
                acc[ch][e] += a * DT_LOAD(b.e[e]);
        }
    }
}

/* Every lane: sum the GPR groups of one row (they summed disjoint
 * nonzeros; lanes of a row are contiguous, so xor by L..GPR*L/2 stays
 * inside the row). Rows past the end take part with zeros. */
__device__ __forceinline__ void fold_groups(S (&acc)[NCH][VW])
{
#pragma unroll
    for (int off = L; off < L * GPR; off *= 2)
#pragma unroll
        for (int ch = 0; ch < NCH; ch++)
#pragma unroll
            for (int e = 0; e < VW; e++)
                acc[ch][e] += __shfl_xor_sync(0xffffffffu, acc[ch][e], off);
}

/* C[row, this lane's tile columns] = epilogue(alpha * acc + beta * C). */
__device__ __forceinline__ void store_crow(const S (&acc)[NCH][VW], T *__restrict__ C, int row,
                                           int col0, int gl, S alpha, S beta,
                                           const T *__restrict__ bias)
{
    T *crow = C + (size_t)row * N + col0;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
        const int v = ch * L + gl;
        if (v < NVT && (FULL_TILES || col0 + v * VW < N)) {
            vec_t *dst = reinterpret_cast<vec_t *>(crow + v * VW);
            /* C is read (as one vector) only when beta needs it: with beta
             * == 0 it may hold NaN. Reading it element-wise inside dt_axpby
             * would split the store below too. */
            vec_t old = {}, o;
            if (beta != S(0))
                old = *dst;
#pragma unroll
            for (int e = 0; e < VW; e++)
                o.e[e] =
                    DT_STORE(dt_epilogue(dt_axpby(alpha, acc[ch][e], beta, &old.e[e]), row, bias));
            *dst = o;
        }
    }
}
