/* sddmm_rowgroup.cu -- SDDMM over CSR for short rows: nonzeros of a row group dealt out. */
/*@manifest
{"strategy": "csr-rowgroup-sddmm", "op": "sddmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 8, "values": [4, 8, 16, 32]},
            "RG": {"default": 16, "values": [2, 4, 8, 16, 32]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "warp per RG consecutive rows; their nonzeros, contiguous in CSR, are dealt round-robin to sub-warps of LANES lanes (row found with one ballot), each dotting A[i, :] with Bt[j, :] in 16-byte vectors"}
@*/
/*@contract
{"entry": "sddmm_rowgroup", "op": "sddmm", "format": "csr",
 "params": ["rows", "rowptr", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": ["32 * WARPS"], "grid": ["cdiv(rows, WARPS * RG)"],
 "defines": {"K": "k"}}
@*/
/* When rows are shorter than a warp has groups, giving each group a row
 * (sddmm_warp) leaves groups idle on the shortest rows. Here the RG rows
 * of a warp are one contiguous range of nonzeros [rowptr[r0],
 * rowptr[r0 + RG]); the warp walks it G * UNROLL nonzeros at a time, every
 * group busy until the last step. Lane l < RG holds the end of row r0 + l;
 * the row of nonzero k is r0 + (number of those ends <= k), one ballot and
 * popcount per nonzero in flight. A[i, :] is re-read per nonzero (the RG
 * rows of A stay in L1), Bt[j, :] once per nonzero. The walk is
 * warp-uniform, so the shuffles span the full warp. */
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
#ifndef RG
#define RG 16
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#include "lanes.cuh"

static constexpr int VW = vec_width(VEC, K, (int)sizeof(T));
static constexpr int NVK = K / VW;                /* vectors per row of A / Bt */
static constexpr int L = group_lanes(NVK, LANES); /* lanes per group */
static constexpr int G = 32 / L;                  /* groups per warp */
static constexpr int CHT = (NVK + L - 1) / L;     /* vectors per lane */

static_assert(RG >= 1 && RG <= 32, "RG: at most one row end per lane");

/* VW values moved as one load. */
struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

extern "C" __global__ void __launch_bounds__(32 * WARPS)
sddmm_rowgroup(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
               const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha,
               S beta)
{
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const long long r0 = ((long long)blockIdx.x * WARPS + (threadIdx.x >> 5)) * RG;
    if (r0 >= rows)
        return; /* the whole warp */
    const int first = (int)r0;
    const int nr = rows - first < RG ? rows - first : RG;
    const int kbeg = rowptr[first];
    const int kend = rowptr[first + nr];
    /* Lanes past the group's rows never count as "ended at or before k". */
    const int rend = lane < nr ? rowptr[first + lane + 1] : 0x7fffffff;

    for (int k0 = kbeg; k0 < kend; k0 += G * UNROLL) {
        int rowoff[UNROLL];
#pragma unroll
        for (int q = 0; q < G * UNROLL; q++) {
            /* q = u * G + group: the q-th nonzero of this step. */
            const unsigned ended = __ballot_sync(0xffffffffu, (long long)rend <= (long long)k0 + q);
            if (q % G == grp)
                rowoff[q / G] = __popc(ended);
        }
        S d[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            d[u] = S(0);
            const int kk = k0 + u * G + grp;
            if (kk < kend) { /* the same for the whole group */
                const T *arow = A + (size_t)(first + rowoff[u]) * K;
                const T *brow = Bt + (size_t)__ldg(col + kk) * K;
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
        /* Every lane is here (the loop is warp-uniform): full-warp shuffles
         * whose xor stays inside each group. */
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
                    *o = DT_STORE(
                        dt_epilogue(dt_axpby(alpha, d[u], beta, o), first + rowoff[u], nullptr));
                }
            }
        }
    }
}
