/* sddmm_coo.cu -- SDDMM over CSR with a row index per nonzero (format
 * "coo"): lane groups take consecutive nonzeros, each finding its row and
 * column in one pair of independent loads. */
/*@manifest
{"strategy": "coo-sddmm", "op": "sddmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 8, "values": [2, 4, 8, 16, 32]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]}},
 "constraints": [],
 "preprocessing": "coo (CSR plus the row of every nonzero, 4 bytes each)",
 "summary": "lane group per nonzero, its row and column loaded side by side: two dependent loads to the output instead of three (row pointer, column, operands) -- for small matrices, where latency is the cost"}
@*/
/*@contract
{"entry": "sddmm_coo", "op": "sddmm", "format": "coo",
 "params": ["nnz", "coo_row", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": ["32 * WARPS"], "grid": ["max(cdiv(nnz, WARPS * (32 / LANES) * UNROLL), 1)"],
 "defines": {"K": "k"}}
@*/
/* out[k] = alpha * dot(A[i, :], Bt[j, :]) + beta * out[k] for each nonzero
 * k = (i, j); out holds S's values on entry (read only when beta != 0).
 *
 * The CSR kernels reach a nonzero's operands through three dependent loads:
 * the row pointer, the column, then A's and Bt's rows. Here the row of
 * every nonzero is stored beside its column (4 more bytes a nonzero, built
 * once by the worker), so both come in one round trip and the operands in
 * the next. On an L2-resident matrix under graph replay that round trip is
 * a good part of the kernel's time: for small matrices the CSR kernels ran
 * at 2.0-2.6 us at K=32 against cuSPARSE's 2.1-2.3 us on the H200.
 *
 * A group of exactly LANES lanes takes a nonzero: each lane owns VW
 * consecutive elements of K (VEC clamped to 16 bytes and to a divisor of
 * K), looping when K is longer than LANES * VW; lanes past K's end add
 * zeros (so LANES * VW above K only wastes lanes, and the tuner moves on).
 * A block takes WARPS * (32 / LANES) * UNROLL consecutive nonzeros: each
 * group UNROLL of them, a block-width apart, their indices loaded together
 * before any operand, and every operand load of the UNROLL nonzeros issued
 * before the first product. No reuse of A's row across a row's nonzeros:
 * on L2-resident data the second read of a row is an L1 or L2 hit. */
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
#ifndef UNROLL
#define UNROLL 2
#endif

#include "lanes.cuh"

static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
              "LANES: a power of two up to 32");
static_assert(UNROLL >= 1, "UNROLL: at least 1");

static constexpr int VW = vec_width(VEC, K, (int)sizeof(T));
static constexpr int NVK = K / VW;                   /* vectors per row of A / Bt */
static constexpr int CH = (NVK + LANES - 1) / LANES; /* vectors per lane */
static constexpr int G = 32 / LANES;                 /* groups per warp */
static constexpr int GB = WARPS * G;                 /* groups per block */

/* VW values moved as one load. */
struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

extern "C" __global__ void __launch_bounds__(32 * WARPS)
sddmm_coo(int nnz, const int *__restrict__ coo_row, const int *__restrict__ col,
          const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
          S beta)
{
    const int lane = threadIdx.x & 31;
    const int gl = lane % LANES;
    const int gi = (threadIdx.x >> 5) * G + lane / LANES; /* group in the block */
    const unsigned gmask = (0xffffffffu >> (32 - LANES)) << (lane / LANES * LANES);
    const long long k0 = (long long)blockIdx.x * GB * UNROLL + gi;

    int r[UNROLL], c[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const long long k = k0 + (long long)u * GB;
        r[u] = -1;
        c[u] = 0;
        if (k < nnz) {
            r[u] = __ldg(coo_row + k);
            c[u] = __ldg(col + k);
        }
    }
    vec_t a[UNROLL][CH], b[UNROLL][CH];
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int ch = 0; ch < CH; ch++) {
            const int v = ch * LANES + gl;
            if (r[u] >= 0 && v < NVK) {
                a[u][ch] = *reinterpret_cast<const vec_t *>(A + (size_t)r[u] * K + v * VW);
                b[u][ch] = *reinterpret_cast<const vec_t *>(Bt + (size_t)c[u] * K + v * VW);
            }
        }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        S d = S(0);
#pragma unroll
        for (int ch = 0; ch < CH; ch++)
            if (r[u] >= 0 && ch * LANES + gl < NVK)
#pragma unroll
                for (int e = 0; e < VW; e++)
                    d += DT_LOAD(a[u][ch].e[e]) * DT_LOAD(b[u][ch].e[e]);
#pragma unroll
        for (int off = LANES / 2; off > 0; off /= 2)
            d += __shfl_xor_sync(gmask, d, off);
        if (gl == 0 && r[u] >= 0) {
            T *o = out + k0 + (long long)u * GB;
            *o = DT_STORE(dt_epilogue(dt_axpby(alpha, d, beta, o), r[u], nullptr));
        }
    }
}
