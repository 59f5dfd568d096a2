/* spmm_ell.cu -- SpMM, row-major B and C, over row-major ELL (format "ell")
 * with the matrix's row count and padded width baked in: the warp-per-row
 * mapping of spmm_csr_warp.cu (N across lanes in 16-byte vectors of B,
 * groups of lanes splitting a row's slots or taking several rows when N is
 * small; spmm_warp_row.cuh), but a row's slots start at row * ELL_W, so no
 * row pointer is loaded before its column indices. On a matrix small enough
 * to stay in L2 the time is the chain of dependent loads, and that drops a
 * link of three (row pointer, index, row of B) to two. Padding (col -1,
 * value 0) ends a row; the contract refuses more than 4 slots per nonzero. */
/*@manifest
{"strategy": "ell-baked-spmm", "op": "spmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 32, "values": [4, 8, 16, 32]},
            "ROWS_PER_WARP": {"default": 1, "values": [1, 2, 4, 8]},
            "UNROLL": {"default": 4, "values": [2, 4, 8]},
            "TN": {"default": 128, "values": [32, 64, 128, 256]}},
 "constraints": [],
 "preprocessing": "ell (every row padded to the longest, row-major)",
 "summary": "rows and padded width baked in: warp per ELL row, N across lanes, no row pointers"}
@*/
/*@contract
{"entry": "spmm_ell", "op": "spmm", "format": "ell", "layout": "row", "format_params": {"row_major":
1}, "params": ["ell_col", "ell_val", "B", "C", "alpha", "beta", "bias"], "block": ["32 * WARPS"],
"grid": ["max(cdiv(rows, WARPS * ROWS_PER_WARP), 1)", "cdiv(n, TN)"], "defines": {"N": "n",
"ELL_ROWS": "rows", "ELL_W": "width"}, "requires": {"max_fill": 4}}
@*/
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
#define UNROLL 4
#endif
#ifndef TN
#define TN 128
#endif
#ifndef ELL_ROWS
#define ELL_ROWS 1024
#endif
#ifndef ELL_W
#define ELL_W 8
#endif

static_assert(UNROLL >= 1, "UNROLL: at least 1");
static_assert(ELL_ROWS >= 0 && ELL_W >= 0, "ELL_ROWS, ELL_W: the matrix's rows and padded width");

#include "spmm_warp_row.cuh"

extern "C" __global__ void __launch_bounds__(32 * WARPS)
    spmm_ell(const int *__restrict__ ell_col, const T *__restrict__ ell_val,
             const T *__restrict__ B, T *__restrict__ C, S alpha, S beta,
             const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int rsub = grp / GPR; /* which of the P rows in flight */
    const int gsub = grp % GPR; /* which share of that row's slots */
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
        if (r < ELL_ROWS) {
            const int *__restrict__ rc = ell_col + r * ELL_W;
            const T *__restrict__ rv = ell_val + r * ELL_W;
            /* UNROLL slots per step: their index and value loads, then
             * their rows of B, in flight together. A group's slots come
             * in order, so a step that ends in padding ends the row. */
            for (int k = gsub; k < ELL_W; k += UNROLL * GPR) {
                int c[UNROLL];
                S a[UNROLL];
#pragma unroll
                for (int u = 0; u < UNROLL; u++) {
                    c[u] = -1;
                    a[u] = S(0);
                    if (k + u * GPR < ELL_W) {
                        c[u] = __ldg(rc + k + u * GPR);
                        a[u] = DT_LOAD(rv[k + u * GPR]);
                    }
                }
#pragma unroll
                for (int u = 0; u < UNROLL; u++)
                    if (c[u] >= 0)
                        fma_brow(acc, a[u], B, c[u], col0, gl);
                if (c[UNROLL - 1] < 0)
                    break;
            }
        }
        fold_groups(acc);
        if (r < ELL_ROWS && gsub == 0)
            store_crow(acc, C, (int)r, col0, gl, alpha, beta, bias);
    }
}
