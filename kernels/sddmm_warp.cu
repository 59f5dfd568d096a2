/* sddmm_warp.cu -- SDDMM over CSR: a warp per row, A's row in registers. */
/*@manifest
{"strategy": "csr-warp-sddmm", "op": "sddmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 8, "values": [4, 8, 16, 32]},
            "ROWS_PER_WARP": {"default": 1, "values": [1, 2, 4, 8, 16, 32]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]},
            "SEG": {"default": 1048576, "values": [32, 64, 128, 256, 512, 1048576]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "warp per row (per SEG-long segment of a row); A[i, :] loaded once into registers, lane groups take the row's nonzeros and dot A[i, :] with Bt[j, :] over K in 16-byte vectors"}
@*/
/*@contract
{"entry": "sddmm_warp", "op": "sddmm", "format": "csr",
 "params": ["rows", "rowptr", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": ["32 * WARPS"], "grid": ["cdiv(rows, WARPS * ROWS_PER_WARP)", "cdiv(max(max_row, 1), SEG)"],
 "defines": {"K": "k"}}
@*/
/* out[k] = alpha * dot(A[i, :], Bt[j, :]) + beta * out[k] for each nonzero
 * k = (i, j); out holds S's values on entry (read only when beta != 0).
 *
 * Each lane owns VW consecutive elements of K (VEC clamped to 16 bytes and
 * to a divisor of K, so rows of A and Bt start aligned); L lanes (a group)
 * span K, looping over chunks when K is longer than L * VW. A warp holds G
 * = 32 / L groups: up to ROWS_PER_WARP of them take different rows, the
 * others share a row and take every GPR-th nonzero. A group loads its
 * row's A slice once and reuses it for every nonzero it takes (when K
 * fits KREG chunks per lane; longer K streams A from L1 instead), then per
 * nonzero loads one Bt row, multiplies, and folds the dot product across
 * its L lanes with shuffles masked to the group: groups run different trip
 * counts, so no collective spans more than one group.
 *
 * A round's column indices are loaded during the round before, so a
 * round waits on one load (Bt's rows) instead of two in a row.
 *
 * Long rows: blockIdx.y picks the SEG-long segment of each row a warp
 * takes, so a row of a few hundred nonzeros (pruned DL weights) spreads
 * over several warps instead of serialising one warp's loads; warps whose
 * segment lies past their row's end leave at once. SEG of 2^20 keeps one
 * warp per row. */
#include "ditto.cuh"

#if defined(DITTO_EPILOGUE_BIAS)
#error "sddmm has no bias epilogue (bias is per output row of SpMM/SpMV)"
#endif

#ifndef K
#define K 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef LANES
#define LANES 8
#endif
#ifndef ROWS_PER_WARP
#define ROWS_PER_WARP 1
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef SEG
#define SEG 1048576
#endif

#include "lanes.cuh"

static constexpr int KREG = 8;                    /* A chunks a lane may keep */
static constexpr int VW = vec_width(VEC, K, (int)sizeof(T));
static constexpr int NVK = K / VW;                /* vectors per row of A / Bt */
static constexpr int L = group_lanes(NVK, LANES); /* lanes per group */
static constexpr int G = 32 / L;                  /* groups per warp */
static constexpr int CHT = (NVK + L - 1) / L;     /* vectors per lane in all */
static constexpr int CH = CHT < KREG ? CHT : KREG; /* vectors per lane per pass */
static constexpr int PASSES = (CHT + CH - 1) / CH;
static constexpr int P = ROWS_PER_WARP < G ? ROWS_PER_WARP : G; /* rows in flight */
static constexpr int GPR = G / P;                 /* groups per row */
static constexpr int ROUNDS = ROWS_PER_WARP / P;

static_assert((ROWS_PER_WARP & (ROWS_PER_WARP - 1)) == 0, "ROWS_PER_WARP: a power of two");

/* VW values moved as one load. */
struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

/* This lane's slice of pass p of a K-long row. */
__device__ __forceinline__ void load_slice(S (&x)[CH][VW], const T *__restrict__ rowp, int p,
                                           int gl)
{
#pragma unroll
    for (int ch = 0; ch < CH; ch++) {
        const int v = (p * CH + ch) * L + gl;
        if (v < NVK) {
            const vec_t b = *reinterpret_cast<const vec_t *>(rowp + v * VW);
#pragma unroll
            for (int e = 0; e < VW; e++)
                x[ch][e] = DT_LOAD(b.e[e]);
        } else {
#pragma unroll
            for (int e = 0; e < VW; e++)
                x[ch][e] = S(0);
        }
    }
}

/* d += a . Bt[j, pass p slice of this lane]. */
__device__ __forceinline__ void dot_slice(S &d, const S (&a)[CH][VW], const T *__restrict__ brow,
                                          int p, int gl)
{
#pragma unroll
    for (int ch = 0; ch < CH; ch++) {
        const int v = (p * CH + ch) * L + gl;
        if (v < NVK) {
            const vec_t b = *reinterpret_cast<const vec_t *>(brow + v * VW);
#pragma unroll
            for (int e = 0; e < VW; e++)
                d += a[ch][e] * DT_LOAD(b.e[e]);
        }
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
sddmm_warp(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
           const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
           S beta)
{
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int rsub = grp / GPR;
    const int gsub = grp % GPR;
    /* The lanes of this group: every shuffle below names only them. */
    const unsigned gmask = (0xffffffffu >> (32 - L)) << (grp * L);
    const long long wrow = ((long long)blockIdx.x * WARPS + (threadIdx.x >> 5)) * ROWS_PER_WARP;

    for (int round = 0; round < ROUNDS; round++) {
        const long long r = wrow + round * P + rsub;
        if (r >= rows)
            continue; /* the same for the whole group */
        const int row = (int)r;
        const T *arow = A + (size_t)row * K;
        const int rbeg = rowptr[row] + (int)blockIdx.y * SEG;
        const int rend = rowptr[row + 1];
        if (rbeg >= rend)
            continue; /* this segment lies past the row's end */
        const int end = rend - rbeg > SEG ? rbeg + SEG : rend;
        S a[CH][VW];
        if (PASSES == 1)
            load_slice(a, arow, 0, gl);
        int k = rbeg + gsub;
        const int kfull = end - (UNROLL - 1) * GPR; /* full rounds start below */
        int jn[UNROLL];                             /* the next round's columns */
        if (k < kfull)
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                jn[u] = __ldg(col + k + u * GPR);
        for (; k < kfull; k += UNROLL * GPR) {
            int j[UNROLL];
            S d[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                j[u] = jn[u];
                d[u] = S(0);
            }
            if (k + UNROLL * GPR < kfull)
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    jn[u] = __ldg(col + k + UNROLL * GPR + u * GPR);
            for (int p = 0; p < PASSES; p++) {
                if (PASSES > 1)
                    load_slice(a, arow, p, gl);
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    dot_slice(d[u], a, Bt + (size_t)j[u] * K, p, gl);
            }
#pragma unroll
            for (int off = L / 2; off > 0; off /= 2)
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    d[u] += __shfl_xor_sync(gmask, d[u], off);
            if (gl == 0) {
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    T *o = out + k + u * GPR;
                    *o = DT_STORE(dt_epilogue(dt_axpby(alpha, d[u], beta, o), row, nullptr));
                }
            }
        }
        for (; k < end; k += GPR) {
            const int j = __ldg(col + k);
            S d = S(0);
            for (int p = 0; p < PASSES; p++) {
                if (PASSES > 1)
                    load_slice(a, arow, p, gl);
                dot_slice(d, a, Bt + (size_t)j * K, p, gl);
            }
#pragma unroll
            for (int off = L / 2; off > 0; off /= 2)
                d += __shfl_xor_sync(gmask, d, off);
            if (gl == 0) {
                T *o = out + k;
                *o = DT_STORE(dt_epilogue(dt_axpby(alpha, d, beta, o), row, nullptr));
            }
        }
    }
}
