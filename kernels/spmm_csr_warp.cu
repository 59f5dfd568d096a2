/* spmm_csr_warp.cu -- SpMM, row-major B and C, over CSR: a warp per row, N across lanes. */
/*@manifest
{"strategy": "csr-warp-spmm", "op": "spmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 32, "values": [4, 8, 16, 32]},
            "ROWS_PER_WARP": {"default": 1, "values": [1, 2, 4, 8, 16, 32]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]},
            "TN": {"default": 128, "values": [32, 64, 128, 256, 512]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "warp per row, N across lanes in 16-byte vectors of B, lanes split over rows or nonzeros when N is small"}
@*/
/*@contract
{"entry": "spmm_csr_warp", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": ["32 * WARPS"], "grid": ["cdiv(rows, WARPS * ROWS_PER_WARP)", "cdiv(n, TN)"],
 "defines": {"N": "n"}}
@*/
/* Mapping. Each lane owns VW consecutive columns (one 16-byte load of B for
 * every dtype at VEC=8); L lanes (a "group") cover a tile of TN columns, looping
 * over NCH chunks when the tile is wider than L * VW. When N is small a
 * warp holds G = 32 / L groups: up to ROWS_PER_WARP of them take different
 * rows, the rest split a row's nonzeros and fold their sums with shuffles.
 *
 * VW is VEC clamped to 16 bytes and halved until it divides N, so that
 * every row of B and C starts on a VW-element boundary (aligned vector
 * accesses, no tails). Columns past N in the last tile are skipped whole
 * vectors at a time. grid.y tiles N so that the accumulators stay in
 * registers for any N. */
#include "ditto.cuh"

#ifndef N
#define N 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef LANES
#define LANES 32
#endif
#ifndef ROWS_PER_WARP
#define ROWS_PER_WARP 1
#endif
#ifndef UNROLL
#define UNROLL 2
#endif
#ifndef TN
#define TN 128
#endif

#include "lanes.cuh"

static constexpr int VW = vec_width(VEC, N, (int)sizeof(T));
static constexpr int TE = N < TN ? N : TN;          /* columns of one tile */
static constexpr int NVT = TE / VW;                 /* vectors per tile row */
static constexpr int L = group_lanes(NVT, LANES);   /* lanes per group */
static constexpr int G = 32 / L;                    /* groups per warp */
static constexpr int NCH = (NVT + L - 1) / L;       /* vectors per lane */
static constexpr int P = ROWS_PER_WARP < G ? ROWS_PER_WARP : G; /* rows in flight */
static constexpr int GPR = G / P;                   /* groups per row */
static constexpr int ROUNDS = ROWS_PER_WARP / P;
/* Every tile but possibly the last is full: the column check folds away. */
static constexpr bool FULL_TILES = N % TN == 0 || N <= TN;

static_assert(TN % 8 == 0 && TE % VW == 0, "column tile must hold whole vectors");
static_assert((ROWS_PER_WARP & (ROWS_PER_WARP - 1)) == 0, "ROWS_PER_WARP: a power of two");

/* VW values moved as one load or store: the alignment makes it a single
 * 16-byte (or narrower) access. */
struct __align__(VW * sizeof(T)) vec_t {
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

extern "C" __global__ void __launch_bounds__(32 * WARPS)
spmm_csr_warp(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
              const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
              S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int rsub = grp / GPR; /* which of the P rows in flight */
    const int gsub = grp % GPR; /* which share of that row's nonzeros */
    const int col0 = blockIdx.y * TN;
    const long long wrow = ((long long)blockIdx.x * WARPS + (threadIdx.x >> 5)) * ROWS_PER_WARP;

    for (int round = 0; round < ROUNDS; round++) {
        const long long r = wrow + round * P + rsub;
        S acc[NCH][VW];
#pragma unroll
        for (int ch = 0; ch < NCH; ch++)
#pragma unroll
            for (int e = 0; e < VW; e++)
                acc[ch][e] = S(0);
        if (r < rows) {
            const int end = rowptr[r + 1];
            int k = rowptr[r] + gsub;
            /* UNROLL nonzeros per step: their column loads, then their B
             * loads, are independent, so several are in flight at once.
             * (end - ... rather than k + ... so that nothing overflows.) */
            for (; k < end - (UNROLL - 1) * GPR; k += UNROLL * GPR) {
                int c[UNROLL];
                S a[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    c[u] = __ldg(col + k + u * GPR);
                    a[u] = DT_LOAD(val[k + u * GPR]);
                }
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    fma_brow(acc, a[u], B, c[u], col0, gl);
            }
            for (; k < end; k += GPR)
                fma_brow(acc, DT_LOAD(val[k]), B, __ldg(col + k), col0, gl);
        }
        /* Groups of one row summed disjoint nonzeros; fold them (lanes of a
         * row are contiguous, so xor by L..GPR*L/2 stays inside the row).
         * Every lane takes part, rows past the end with zeros. */
#pragma unroll
        for (int off = L; off < L * GPR; off *= 2)
#pragma unroll
            for (int ch = 0; ch < NCH; ch++)
#pragma unroll
                for (int e = 0; e < VW; e++)
                    acc[ch][e] += __shfl_xor_sync(0xffffffffu, acc[ch][e], off);
        if (r < rows && gsub == 0) {
            const int row = (int)r;
            T *crow = C + (size_t)row * N + col0;
#pragma unroll
            for (int ch = 0; ch < NCH; ch++) {
                const int v = ch * L + gl;
                if (v < NVT && (FULL_TILES || col0 + v * VW < N)) {
                    vec_t *dst = reinterpret_cast<vec_t *>(crow + v * VW);
                    /* C is read (as one vector) only when beta needs it: with
                     * beta == 0 it may hold NaN. Reading it element-wise
                     * inside dt_axpby would split the store below too. */
                    vec_t old = {}, o;
                    if (beta != S(0))
                        old = *dst;
#pragma unroll
                    for (int e = 0; e < VW; e++)
                        o.e[e] = DT_STORE(
                            dt_epilogue(dt_axpby(alpha, acc[ch][e], beta, &old.e[e]), row, bias));
                    *dst = o;
                }
            }
        }
    }
}
