/* sddmm_deal.cuh -- the step shared by the SDDMM templates that deal a
 * run of nonzeros out to lane groups (sddmm_rowgroup.cu, sddmm_nnz.cu):
 * a warp takes G * UNROLL consecutive nonzeros at a time, one per group of
 * L lanes per unroll slot; each group dots A's row with Bt's row in
 * VW-wide vectors, the warp folds the products with full-warp shuffles
 * whose xor stays inside each group, and lane 0 of a group writes its
 * outputs. Include after lanes.cuh, with K, VEC, LANES and UNROLL defined. */
#pragma once

static constexpr int VW = vec_width(VEC, K, (int)sizeof(T));
static constexpr int NVK = K / VW;                /* vectors per row of A / Bt */
static constexpr int L = group_lanes(NVK, LANES); /* lanes per group */
static constexpr int G = 32 / L;                  /* groups per warp */
static constexpr int CHT = (NVK + L - 1) / L;     /* vectors per lane */

/* VW values moved as one load. */
struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

/* out[k] for k = k0 + u * G + grp below kend, the nonzero of row row[u]
 * and column j[u]. Every lane of the warp must call it (the loop around
 * it is warp-uniform). */
__device__ __forceinline__ void deal_step(const int (&row)[UNROLL], const int (&j)[UNROLL], int k0,
                                          int kend, int grp, int gl, const T *__restrict__ A,
                                          const T *__restrict__ Bt, T *__restrict__ out, S alpha,
                                          S beta)
{
    S d[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        d[u] = S(0);
        const int kk = k0 + u * G + grp;
        if (kk < kend) { /* the same for the whole group */
            const T *arow = A + (size_t)row[u] * K;
            const T *brow = Bt + (size_t)j[u] * K;
            /* Partial unroll: K may be long (CHT is K / (L * VW)). */
#pragma unroll 8
            for (int ch = 0; ch < CHT; ch++) {
                const int v = ch * L + gl;
                if (v < NVK) {
                    const vec_t a = *reinterpret_cast<const vec_t *>(arow + v * VW);
                    const vec_t b = *reinterpret_cast<const vec_t *>(brow + v * VW);
#pragma unroll
                    for (int e = 0; e < VW; e++)
                        d[u] += DT_LOAD(a.e[e]) * DT_LOAD(b.e[e]);
                }
            }
        }
    }
#pragma unroll
    for (int off = L / 2; off > 0; off /= 2)
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            d[u] += __shfl_xor_sync(0xffffffffu, d[u], off);
    if (gl == 0) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int kk = k0 + u * G + grp;
            if (kk < kend) {
                T *o = out + kk;
                *o = DT_STORE(dt_epilogue(dt_axpby(alpha, d[u], beta, o), row[u], nullptr));
            }
        }
    }
}
