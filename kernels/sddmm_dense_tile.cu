/* sddmm_dense_tile.cu -- SDDMM by dense tiles of the product (format
 * "dtile"): a block computes the whole TM x TN tile of A * Bt that holds
 * some of S's nonzeros, from A's and Bt's rows staged in shared memory, and
 * stores the entries the pattern samples. */
/*@manifest
{"strategy": "dense-tile-sddmm", "op": "sddmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"TM": {"default": 64, "values": [32, 64, 128]},
            "TN": {"default": 64, "values": [32, 64]},
            "RM": {"default": 4, "values": [2, 4, 8]},
            "RN": {"default": 4, "values": [2, 4, 8]}},
 "constraints": ["(TM / RM) * (TN / RN) >= 32", "(TM / RM) * (TN / RN) <= 512"],
 "preprocessing": "dtile (the TM x TN tiles of S holding a nonzero; per tile row, a TN-bit mask of
its nonzeros and the position of the first)",
 "summary": "a block per non-empty TM x TN tile: A's and Bt's rows staged in shared memory, every
product of the tile in registers (RM x RN a thread), the pattern's entries stored -- for patterns
whose tiles are mostly full (block-sparse and banded attention masks; pruned weights a fifth set or
more at small K), where gathering a row of Bt per nonzero costs more than computing the whole tile"}
@*/
/*@contract
{"entry": "sddmm_dense_tile", "op": "sddmm", "format": "dtile",
 "format_params": {"tm": "TM", "tn": "TN"},
 "params": ["rows", "cols", "ntiles", "tile_rc", "tile_rbase", "tile_rmask", "A", "Bt",
            "out", "alpha", "beta"],
 "block": ["(TM / RM) * (TN / RN)"], "grid": ["max(ntiles, 1)"],
 "defines": {"K": "k"}}
@*/
/* out[k] = alpha * dot(A[i, :], Bt[j, :]) + beta * out[k] for each nonzero
 * k = (i, j); out holds S's values on entry (read only when beta != 0).
 *
 * The gathering templates load a row of Bt (and of A, unless a warp keeps
 * it) for every nonzero: at K = 32 that is 128 bytes from L1 or L2 a
 * nonzero, and on pruned DL weights (10-30 % dense, rows of hundreds of
 * nonzeros) the kernel runs at the rate of those loads. Here a block takes
 * one TM x TN tile of the output that holds at least one nonzero: it
 * stages A's TM rows and Bt's TN rows in shared memory, KC elements of K
 * at a time (k-major, so a thread's RM values of A and RN of Bt are one
 * vector load each), and every thread accumulates an RM x RN block of the
 * dense product in registers, as a GEMM would. The loads are (TM + TN) * K
 * values a tile instead of about 2 * K a nonzero, and the FMAs TM * TN *
 * K a tile: worth it when a tile is dense enough, not on FEM or graph
 * matrices, which the planner leaves to the other templates. On the H200
 * at original size (`ditto bench --regime orig`): 64 x 64 blocks at 6.25 % took 3.25x
 * cuSPARSE at K = 32 against csr-warp-sddmm's 1.09x; rn50's final dense
 * weight (20 % set) 1.20x against 1.09x; at 10 % it lost. At K = 32 the
 * kernel is bound by issuing its FMAs and by the latency of staging, not
 * by memory.
 *
 * The format lists the non-empty tiles (tile_rc: tile row, tile column)
 * and, for each of a tile's TM rows, a TN-bit mask of its nonzeros
 * (tile_rmask) and the CSR position of the first (tile_rbase). A thread
 * finds the position of its first sampled entry in a row by counting the
 * mask's bits left of its columns, then stores its entries in order: the
 * output stays in CSR order with no position stored per nonzero, and the
 * threads of a row store consecutive positions. Empty tiles are not
 * launched at all. */
#include "ditto.cuh"

#if defined(DITTO_EPILOGUE_BIAS)
#error "sddmm has no bias epilogue (bias is per output row of SpMM/SpMV)"
#endif

#ifndef K
#define K 32
#endif
#ifndef TM
#define TM 64
#endif
#ifndef TN
#define TN 64
#endif
#ifndef RM
#define RM 4
#endif
#ifndef RN
#define RN 4
#endif

#include "lanes.cuh"

static_assert(TN <= 64, "TN: a tile row's mask is 64 bits");
static_assert(TM % RM == 0 && TN % RN == 0, "RM, RN: divisors of TM, TN");
static_assert(RN <= 8, "RN: at most 8");

static constexpr int TX = TN / RN;       /* threads across a tile's columns */
static constexpr int NT = (TM / RM) * TX; /* threads a block */
static constexpr int VW = vec_width(8, K, (int)sizeof(T)); /* T values a global load */
/* K staged a round: 32 values of 4 bytes (16 of 8), all of K when shorter;
 * a multiple of VW, which divides K, so a vector is wholly in or out. */
static constexpr int KCMAX = sizeof(S) == 8 ? 16 : 32;
static constexpr int KC = K < KCMAX ? K : KCMAX;
static constexpr int KV = KC / VW;         /* global vectors a staged row */
static constexpr int PAD = 16 / sizeof(S); /* keeps rows 16-byte aligned */

struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

/* n values of S as one load: 16 bytes, or the whole fragment if smaller. */
template <int N> struct __align__((N * sizeof(S)) < 16 ? N * sizeof(S) : 16) frag_t {
    S e[N];
};

/* One round's share of a thread: rows [g0, g0 + R) of a row-major matrix
 * of `lim` rows, values [k0, k0 + KC) of each, zero past either end.
 * Vector v is row v / KV, piece v % KV, so a warp's loads take whole runs
 * of consecutive rows. Every load of the round is issued (fetch) before
 * the first store to shared memory (put): a loop that stored each vector
 * as it arrived waited out one L2 round trip per vector. */
template <int R> struct share_t {
    static constexpr int N = (R * KV + NT - 1) / NT;
    vec_t x[N];
};

template <int R>
__device__ __forceinline__ void fetch(share_t<R> &sh, const T *__restrict__ src, int g0, int lim,
                                      int k0, int tid)
{
#pragma unroll
    for (int u = 0; u < share_t<R>::N; u++) {
        const int v = tid + u * NT, m = v / KV, kk = k0 + (v % KV) * VW;
#pragma unroll
        for (int e = 0; e < VW; e++)
            sh.x[u].e[e] = DT_STORE(S(0));
        if (v < R * KV && g0 + m < lim && kk < K)
            sh.x[u] = *reinterpret_cast<const vec_t *>(src + (size_t)(g0 + m) * K + kk);
    }
}

/* Into k-major shared memory, as S. */
template <int R>
__device__ __forceinline__ void put(S (*dst)[R + PAD], const share_t<R> &sh, int tid)
{
#pragma unroll
    for (int u = 0; u < share_t<R>::N; u++) {
        const int v = tid + u * NT;
        if (v < R * KV)
#pragma unroll
            for (int e = 0; e < VW; e++)
                dst[(v % KV) * VW + e][v / KV] = DT_LOAD(sh.x[u].e[e]);
    }
}

extern "C" __global__ void __launch_bounds__(NT)
sddmm_dense_tile(int rows, int cols, int ntiles, const int *__restrict__ tile_rc,
                 const int *__restrict__ tile_rbase,
                 const unsigned long long *__restrict__ tile_rmask, const T *__restrict__ A,
                 const T *__restrict__ Bt, T *__restrict__ out, S alpha, S beta)
{
    __shared__ __align__(16) S As[KC][TM + PAD];
    __shared__ __align__(16) S Bs[KC][TN + PAD];

    const int tile = blockIdx.x;
    if (tile >= ntiles)
        return;
    const int tid = threadIdx.x;
    const int tx = tid % TX, ty = tid / TX;
    const int r0 = tile_rc[2 * tile] * TM, c0 = tile_rc[2 * tile + 1] * TN;

    /* The pattern of this thread's rows (ty * RM + i), loaded before the
     * product needs it. */
    int base[RM];
    unsigned long long msk[RM];
#pragma unroll
    for (int i = 0; i < RM; i++) {
        const size_t t = (size_t)tile * TM + ty * RM + i;
        base[i] = __ldg(tile_rbase + t);
        msk[i] = __ldg(tile_rmask + t);
    }

    S acc[RM][RN];
#pragma unroll
    for (int i = 0; i < RM; i++)
#pragma unroll
        for (int j = 0; j < RN; j++)
            acc[i][j] = S(0);

    for (int k0 = 0; k0 < K; k0 += KC) {
        if (k0 > 0)
            __syncthreads(); /* the previous round's reads are done */
        share_t<TM> sa;
        share_t<TN> sb;
        fetch<TM>(sa, A, r0, rows, k0, tid);
        fetch<TN>(sb, Bt, c0, cols, k0, tid);
        put<TM>(As, sa, tid);
        put<TN>(Bs, sb, tid);
        __syncthreads();
#pragma unroll
        for (int k = 0; k < KC; k++) {
            const frag_t<RM> a = *reinterpret_cast<const frag_t<RM> *>(&As[k][ty * RM]);
            const frag_t<RN> b = *reinterpret_cast<const frag_t<RN> *>(&Bs[k][tx * RN]);
#pragma unroll
            for (int i = 0; i < RM; i++)
#pragma unroll
                for (int j = 0; j < RN; j++)
                    acc[i][j] += a.e[i] * b.e[j];
        }
    }

    /* Store the sampled entries: the bits of each row's mask left of this
     * thread's columns (tx * RN + j) count the row's entries before its
     * first. */
    const int sh = tx * RN; /* < TN <= 64 */
#pragma unroll
    for (int i = 0; i < RM; i++) {
        const unsigned bits = (unsigned)(msk[i] >> sh) & ((1u << RN) - 1u);
        if (bits == 0)
            continue;
        int pos = base[i] + __popcll(msk[i] & ((1ull << sh) - 1ull));
#pragma unroll
        for (int j = 0; j < RN; j++) {
            if (bits >> j & 1u) {
                T *o = out + pos;
                *o = DT_STORE(dt_epilogue(dt_axpby(alpha, acc[i][j], beta, o), r0 + ty * RM + i,
                                          nullptr));
                pos++;
            }
        }
    }
}
