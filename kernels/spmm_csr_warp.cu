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

#include "spmm_warp_row.cuh"

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
    const int col0 = blockIdx.y * TE; /* TE = TN, or N in the one tile when TN >= N */
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
        fold_groups(acc);
        if (r < rows && gsub == 0)
            store_crow(acc, C, (int)r, col0, gl, alpha, beta, bias);
    }
}
