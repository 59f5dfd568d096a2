/* sddmm_dense_tile_tf32.cu -- SDDMM by dense tiles of the product on the
 * tensor cores (format "dtile"), fp32 to fp32 accuracy with three TF32
 * products: a block computes the whole TM x TN tile of A * Bt that holds
 * some of S's nonzeros and stores the entries the pattern samples. */
/*@manifest
{"strategy": "dense-tile-tf32-sddmm", "op": "sddmm", "dtypes": ["fp32"],
 "params": {"TM": {"default": 64, "values": [32, 64, 128]},
            "TN": {"default": 64, "values": [32, 64]},
            "WM": {"default": 2, "values": [1, 2, 4]},
            "WN": {"default": 2, "values": [1, 2, 4]}},
 "constraints": ["TM % (16 * WM) == 0", "TN % (8 * WN) == 0"],
 "preprocessing": "dtile (the TM x TN tiles of S holding a nonzero; per tile row, a TN-bit mask of
its nonzeros and the position of the first)",
 "summary": "dense-tile-sddmm's tiles on the tensor cores: each warp computes its (TM / WM) x (TN /
WN) part of the tile with mma.sync m16n8k8 TF32, every fp32 operand split into a TF32 value and its
TF32 remainder, three products a step (3xTF32), so the sums keep fp32's accuracy"}
@*/
/*@contract
{"entry": "sddmm_dense_tile_tf32", "op": "sddmm", "format": "dtile",
 "format_params": {"tm": "TM", "tn": "TN"},
 "params": ["rows", "cols", "ntiles", "tile_rc", "tile_rbase", "tile_rmask", "A", "Bt",
            "out", "alpha", "beta"],
 "block": ["32 * WM * WN"], "grid": ["max(ntiles, 1)"],
 "defines": {"K": "k"}}
@*/
/* out[k] = alpha * dot(A[i, :], Bt[j, :]) + beta * out[k] for each nonzero
 * k = (i, j); out holds S's values on entry (read only when beta != 0).
 *
 * The same tiles, format and stores as dense-tile-sddmm (see
 * sddmm_dense_tile.cu for why whole tiles), with the products on the
 * tensor cores: on pruned DL weights the FMA version spends its time
 * issuing TM * TN * K FMAs, most of them for entries the pattern drops.
 *
 * Accuracy: a TF32 product keeps 10 bits of each operand's mantissa, far
 * from fp32's 23. Each operand x is split into big = tf32(x) and small =
 * tf32(x - big), which together carry 21 or more bits, and a step
 * accumulates small * big', big * small' and big * big' in fp32 (the
 * small * small' term, under 2^-20 of the product, is dropped): the
 * 3xTF32 scheme, within a few fp32 roundings of an FMA dot product. A
 * non-finite operand makes the remainder NaN, so the products of an Inf
 * come out NaN rather than Inf.
 *
 * A and Bt are staged row-major with 4 floats of padding (rows 36 floats
 * apart at K >= 32), so that a fragment's loads -- lane (g, t) reads row
 * g, column t of an 8 x 4 piece -- fall in 32 different banks. Fragment
 * layouts are PTX's for mma.m16n8k8 .tf32: A's a0..a3 at (g, t), (g + 8,
 * t), (g, t + 4), (g + 8, t + 4); B's b0, b1 at (k t, column g) and (k t +
 * 4, column g); C's c0..c3 at (g, 2t), (g, 2t + 1), (g + 8, 2t), (g + 8,
 * 2t + 1), with g = lane / 4 and t = lane % 4. */
#include "ditto.cuh"

#if defined(DITTO_EPILOGUE_BIAS)
#error "sddmm has no bias epilogue (bias is per output row of SpMM/SpMV)"
#endif
#if !defined(DITTO_DTYPE_FP32)
#error "dense-tile-tf32-sddmm computes fp32 only (its manifest lists fp32)"
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
#ifndef WM
#define WM 2
#endif
#ifndef WN
#define WN 2
#endif

#include "lanes.cuh"

static_assert(TN <= 64, "TN: a tile row's mask is 64 bits");
static_assert(TM % (16 * WM) == 0 && TN % (8 * WN) == 0,
              "a warp's part of the tile is whole 16 x 8 mma tiles");

static constexpr int NT = 32 * WM * WN;   /* threads a block */
static constexpr int MI = TM / WM / 16;   /* mma tiles down a warp's part */
static constexpr int NI = TN / WN / 8;    /* and across */
static constexpr int VW = vec_width(4, K, 4); /* floats a global load */
/* K staged a round: 32 floats, all of K when shorter, rounded up to the
 * mma's 8 with zeros; VW divides K, so a vector is wholly in or out. */
static constexpr int KC = K < 32 ? K : 32;
static constexpr int KP = (KC + 7) / 8 * 8;
static constexpr int KR = KP + 4; /* a staged row, padded */
static constexpr int KV = KP / VW;

struct __align__(VW * 4) vec_t {
    float e[VW];
};

/* One round's share of a thread: rows [g0, g0 + R) of a row-major matrix
 * of `lim` rows, values [k0, k0 + KC) of each, zero past either end.
 * Vector v is row v / KV, piece v % KV, so a warp's loads take whole
 * 128-byte runs of consecutive rows. Every load of the round is issued
 * (fetch) before the first store to shared memory (put): a loop that
 * stored each vector as it arrived waited out one L2 round trip per
 * vector. */
template <int R> struct share_t {
    static constexpr int N = (R * KV + NT - 1) / NT;
    vec_t x[N];
};

template <int R>
__device__ __forceinline__ void fetch(share_t<R> &sh, const float *__restrict__ src, int g0,
                                      int lim, int k0, int tid)
{
#pragma unroll
    for (int u = 0; u < share_t<R>::N; u++) {
        const int v = tid + u * NT, m = v / KV, kc = (v % KV) * VW, kk = k0 + kc;
#pragma unroll
        for (int e = 0; e < VW; e++)
            sh.x[u].e[e] = 0.0f;
        if (v < R * KV && g0 + m < lim && kc < KC && kk < K)
            sh.x[u] = *reinterpret_cast<const vec_t *>(src + (size_t)(g0 + m) * K + kk);
    }
}

template <int R>
__device__ __forceinline__ void put(float (*dst)[KR], const share_t<R> &sh, int tid)
{
#pragma unroll
    for (int u = 0; u < share_t<R>::N; u++) {
        const int v = tid + u * NT;
        if (v < R * KV)
            *reinterpret_cast<vec_t *>(&dst[v / KV][(v % KV) * VW]) = sh.x[u];
    }
}

/* x as a TF32 value and the TF32 of what it leaves over. */
__device__ __forceinline__ void split_tf32(float x, unsigned &big, unsigned &small)
{
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(big) : "f"(x));
    const float rest = x - __uint_as_float(big);
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(small) : "f"(rest));
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const unsigned (&a)[4],
                                         const unsigned (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

extern "C" __global__ void __launch_bounds__(NT)
sddmm_dense_tile_tf32(int rows, int cols, int ntiles, const int *__restrict__ tile_rc,
                      const int *__restrict__ tile_rbase,
                      const unsigned long long *__restrict__ tile_rmask,
                      const float *__restrict__ A, const float *__restrict__ Bt,
                      float *__restrict__ out, float alpha, float beta)
{
    __shared__ __align__(16) float As[TM][KR];
    __shared__ __align__(16) float Bs[TN][KR];

    const int tile = blockIdx.x;
    if (tile >= ntiles)
        return;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const int wr = warp / WN * (TM / WM), wc = warp % WN * (TN / WN); /* the warp's part */
    const int r0 = tile_rc[2 * tile] * TM, c0 = tile_rc[2 * tile + 1] * TN;

    /* The pattern of this thread's 2 * MI rows (wr + 16 mi + g + 8 h),
     * loaded before the product needs it. */
    int base[MI][2];
    unsigned long long msk[MI][2];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const size_t s = (size_t)tile * TM + wr + 16 * mi + g + 8 * h;
            base[mi][h] = __ldg(tile_rbase + s);
            msk[mi][h] = __ldg(tile_rmask + s);
        }

    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int ni = 0; ni < NI; ni++)
#pragma unroll
            for (int q = 0; q < 4; q++)
                acc[mi][ni][q] = 0.0f;

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
        for (int ks = 0; ks < KP; ks += 8) {
            unsigned ab[MI][4], as[MI][4], bb[NI][2], bs[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; mi++) {
                const int r = wr + 16 * mi + g;
                split_tf32(As[r][ks + t], ab[mi][0], as[mi][0]);
                split_tf32(As[r + 8][ks + t], ab[mi][1], as[mi][1]);
                split_tf32(As[r][ks + t + 4], ab[mi][2], as[mi][2]);
                split_tf32(As[r + 8][ks + t + 4], ab[mi][3], as[mi][3]);
            }
#pragma unroll
            for (int ni = 0; ni < NI; ni++) {
                const int c = wc + 8 * ni + g;
                split_tf32(Bs[c][ks + t], bb[ni][0], bs[ni][0]);
                split_tf32(Bs[c][ks + t + 4], bb[ni][1], bs[ni][1]);
            }
#pragma unroll
            for (int mi = 0; mi < MI; mi++)
#pragma unroll
                for (int ni = 0; ni < NI; ni++) {
                    mma_tf32(acc[mi][ni], as[mi], bb[ni]);
                    mma_tf32(acc[mi][ni], ab[mi], bs[ni]);
                    mma_tf32(acc[mi][ni], ab[mi], bb[ni]);
                }
        }
    }

    /* Store the sampled entries: the bits of a row's mask left of a column
     * count the row's entries in the tile before it. */
#pragma unroll
    for (int mi = 0; mi < MI; mi++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const unsigned long long m = msk[mi][h];
            if (m == 0)
                continue;
#pragma unroll
            for (int ni = 0; ni < NI; ni++)
#pragma unroll
                for (int q = 0; q < 2; q++) {
                    const int c = wc + 8 * ni + 2 * t + q; /* < TN <= 64 */
                    if (m >> c & 1ull) {
                        float *o = out + base[mi][h] + __popcll(m & ((1ull << c) - 1ull));
                        *o = dt_epilogue(dt_axpby(alpha, acc[mi][ni][2 * h + q], beta, o),
                                         r0 + wr + 16 * mi + g + 8 * h, nullptr);
                    }
                }
        }
}
