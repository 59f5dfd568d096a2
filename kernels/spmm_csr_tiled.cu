/* spmm_csr_tiled.cu -- SpMM over CSR in row x column tiles; long rows split over warps. */
/*@manifest
{"strategy": "csr-tiled-spmm", "op": "spmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 8, "values": [2, 4, 8, 16]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 32, "values": [4, 8, 16, 32]},
            "RPB": {"default": 64, "values": [16, 32, 64, 128, 256]},
            "LONG": {"default": 256, "values": [64, 128, 256, 512, 1024, 2048]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]},
            "TN": {"default": 128, "values": [32, 64, 128, 256]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "block per tile of RPB rows x TN columns; short rows one lane group each, rows of LONG nonzeros or more split over every warp with a shared-memory reduction"}
@*/
/*@contract
{"entry": "spmm_csr_tiled", "op": "spmm", "format": "csr", "layout": "row",
 "params": ["rows", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": ["32 * WARPS"], "grid": ["cdiv(rows, RPB)", "cdiv(n, TN)"],
 "defines": {"N": "n"}}
@*/
/* A block owns the output tile rows [RPB * bx, +RPB) x columns [TN * by,
 * +TN). Its warps are cut into groups of L lanes, each lane holding VW
 * consecutive columns (as in spmm_csr_warp), GB = WARPS * 32 / L groups in
 * all. Phase 1: every row shorter than LONG goes to one group, which walks
 * it alone and writes its output. Phase 2: each row of LONG or more
 * nonzeros is taken by all GB groups at once (nonzero k to group k % GB);
 * a warp folds its groups with shuffles, the warps meet in shared memory,
 * and the block writes the row with coalesced stores. Skewed matrices (a
 * few rows far longer than the rest) stop waiting on one warp per long
 * row; the split order is fixed, so results are deterministic. */
#include "ditto.cuh"

#ifndef N
#define N 32
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef LANES
#define LANES 32
#endif
#ifndef RPB
#define RPB 64
#endif
#ifndef LONG
#define LONG 256
#endif
#ifndef UNROLL
#define UNROLL 2
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
static constexpr int GB = WARPS * G;              /* groups per block */
static constexpr int NCH = (NVT + L - 1) / L;     /* vectors per lane */
static constexpr bool FULL_TILES = N % TN == 0 || N <= TN;

static_assert(TN % 8 == 0 && TE % VW == 0, "column tile must hold whole vectors");

#include "spmm_tile.cuh"

extern "C" __global__ void __launch_bounds__(32 * WARPS)
spmm_csr_tiled(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
               const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
               S beta, const T *__restrict__ bias)
{
    __shared__ S red[WARPS][TE];
    const int w = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int q = w * G + grp; /* group index in the block */
    const int col0 = blockIdx.y * TE; /* TE = TN, or N in the one tile when TN >= N */
    const long long tile = (long long)blockIdx.x * RPB;
    const int nrows = rows - tile < RPB ? (int)(rows - tile) : RPB;
    S acc[NCH][VW];

    /* Phase 1: short rows, one group each, no barriers. */
    for (int i = q; i < nrows; i += GB) {
        const int row = (int)(tile + i);
        const int beg = rowptr[row];
        const int end = rowptr[row + 1];
        if (end - beg >= LONG)
            continue;
        row_segment(acc, beg, end, 1, col, val, B, col0, gl);
        T *crow = C + (size_t)row * N + col0;
#pragma unroll
        for (int ch = 0; ch < NCH; ch++) {
            const int v = ch * L + gl;
            if (vec_in(v, col0)) {
                vec_t *dst = reinterpret_cast<vec_t *>(crow + v * VW);
                /* C is read (as one vector) only when beta needs it: with
                 * beta == 0 it may hold NaN. */
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

    /* Phase 2: long rows, the whole block each. Every test below reads the
     * same values in every thread, so the barriers are reached uniformly. */
    for (int i = 0; i < nrows; i++) {
        const int row = (int)(tile + i);
        const int beg = rowptr[row];
        const int end = rowptr[row + 1];
        if (end - beg < LONG)
            continue;
        row_segment(acc, beg + q, end, GB, col, val, B, col0, gl);
#pragma unroll
        for (int off = L; off < 32; off *= 2)
#pragma unroll
            for (int ch = 0; ch < NCH; ch++)
#pragma unroll
                for (int e = 0; e < VW; e++)
                    acc[ch][e] += __shfl_xor_sync(0xffffffffu, acc[ch][e], off);
        if (grp == 0) {
#pragma unroll
            for (int ch = 0; ch < NCH; ch++) {
                const int v = ch * L + gl;
                if (vec_in(v, col0))
#pragma unroll
                    for (int e = 0; e < VW; e++)
                        red[w][v * VW + e] = acc[ch][e];
            }
        }
        __syncthreads();
        T *crow = C + (size_t)row * N + col0;
        for (int c = threadIdx.x; c < TE; c += 32 * WARPS) {
            if (FULL_TILES || col0 + c < N) {
                S s = S(0);
#pragma unroll
                for (int ww = 0; ww < WARPS; ww++)
                    s += red[ww][c];
                crow[c] = DT_STORE(dt_epilogue(dt_axpby(alpha, s, beta, crow + c), row, bias));
            }
        }
        /* red is reused by the next long row. */
        __syncthreads();
    }
}
