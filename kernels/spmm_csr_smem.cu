/* spmm_csr_smem.cu -- SpMM over CSR with (col, val) chunks staged in shared memory. */
/*@manifest
{"strategy": "csr-smem-spmm", "op": "spmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8, 16]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 32, "values": [4, 8, 16, 32]},
            "UNROLL": {"default": 4, "values": [1, 2, 4, 8]},
            "TN": {"default": 128, "values": [32, 64, 128, 256, 512]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "warp per row; 32 (col, val) pairs loaded coalesced into shared memory, then reused by all lanes across the N columns"}
@*/
/*@contract
{"entry": "spmm_csr_smem", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": ["32 * WARPS"], "grid": ["cdiv(rows, WARPS)", "cdiv(n, TN)"],
 "defines": {"N": "n"}}
@*/
/* In the plain warp-per-row kernel every lane loads each (col, val) pair
 * itself: a broadcast, but one load instruction per nonzero per lane. Here
 * the warp loads 32 pairs with one coalesced load each, parks them in
 * shared memory, and the lanes read them back from there while the next
 * 32 are already on their way (prefetched into registers). Columns of B
 * are spread as in spmm_csr_warp (VW-element vectors, L lanes per group,
 * G = 32 / L groups); the G groups split the 32 staged pairs and fold their
 * sums with shuffles at the end. Best for rows of 32 nonzeros and more. */
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
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef TN
#define TN 128
#endif

#include "lanes.cuh"

static constexpr int VW = vec_width(VEC, N, (int)sizeof(T));
static constexpr int TE = N < TN ? N : TN;        /* columns of one tile */
static constexpr int NVT = TE / VW;               /* vectors per tile row */
static constexpr int L = group_lanes(NVT, LANES); /* lanes per group */
static constexpr int G = 32 / L;                  /* groups per warp */
static constexpr int NCH = (NVT + L - 1) / L;     /* vectors per lane */
static constexpr int PER = 32 / G;                /* staged pairs per group */
static constexpr int U = UNROLL < PER ? UNROLL : PER;
static constexpr bool FULL_TILES = N % TN == 0 || N <= TN;

static_assert(TN % 8 == 0 && TE % VW == 0, "column tile must hold whole vectors");
static_assert(PER % U == 0, "UNROLL must divide the pairs per group");

/* VW values moved as one load or store. */
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
spmm_csr_smem(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
              const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
              S beta, const T *__restrict__ bias)
{
    __shared__ int s_col[WARPS][32];
    __shared__ S s_val[WARPS][32];
    const int w = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int col0 = blockIdx.y * TE; /* TE = TN, or N in the one tile when TN >= N */
    const long long r = (long long)blockIdx.x * WARPS + w;
    /* A whole warp leaves together, and only warp-level barriers follow. */
    if (r >= rows)
        return;
    const int row = (int)r;
    const int beg = rowptr[row];
    const int end = rowptr[row + 1];

    S acc[NCH][VW];
#pragma unroll
    for (int ch = 0; ch < NCH; ch++)
#pragma unroll
        for (int e = 0; e < VW; e++)
            acc[ch][e] = S(0);

    /* The pair each lane stages next, loaded one chunk ahead. */
    int pc = 0;
    S pv = S(0);
    if (lane < end - beg) {
        pc = __ldg(col + beg + lane);
        pv = DT_LOAD(val[beg + lane]);
    }
    for (int base = beg; base < end; base += 32) {
        const int cnt = end - base < 32 ? end - base : 32;
        s_col[w][lane] = pc;
        s_val[w][lane] = pv;
        __syncwarp();
        if (lane < end - base - 32) {
            pc = __ldg(col + base + 32 + lane);
            pv = DT_LOAD(val[base + 32 + lane]);
        }
        if (cnt == 32) {
            /* Full chunk: a fixed trip count, so loads unroll UNROLL deep. */
            for (int i = 0; i < PER; i += U) {
#pragma unroll
                for (int u = 0; u < U; u++) {
                    const int t = grp + (i + u) * G;
                    fma_brow(acc, s_val[w][t], B, s_col[w][t], col0, gl);
                }
            }
        } else {
            for (int t = grp; t < cnt; t += G)
                fma_brow(acc, s_val[w][t], B, s_col[w][t], col0, gl);
        }
        /* Everyone is done reading this chunk before it is overwritten. */
        __syncwarp();
    }
    /* Fold the G groups' partial sums (all 32 lanes are here). */
#pragma unroll
    for (int off = L; off < 32; off *= 2)
#pragma unroll
        for (int ch = 0; ch < NCH; ch++)
#pragma unroll
            for (int e = 0; e < VW; e++)
                acc[ch][e] += __shfl_xor_sync(0xffffffffu, acc[ch][e], off);
    if (grp != 0)
        return;
    T *crow = C + (size_t)row * N + col0;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
        const int v = ch * L + gl;
        if (v < NVT && (FULL_TILES || col0 + v * VW < N)) {
            vec_t *dst = reinterpret_cast<vec_t *>(crow + v * VW);
            /* C is read (as one vector) only when beta needs it: with beta
             * == 0 it may hold NaN. */
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
