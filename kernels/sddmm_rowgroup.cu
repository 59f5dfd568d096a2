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
#include "sddmm_deal.cuh"

static_assert(RG >= 1 && RG <= 32, "RG: at most one row end per lane");

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
        int row[UNROLL], j[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int kk = k0 + u * G + grp;
            row[u] = first + rowoff[u];
            j[u] = kk < kend ? __ldg(col + kk) : 0;
        }
        deal_step(row, j, k0, kend, grp, gl, A, Bt, out, alpha, beta);
    }
}
