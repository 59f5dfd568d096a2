/* spmv_ell.cu -- SpMV over ELL (format "ell") with the matrix's row count
 * and padded width baked in as constants. Every row holds ELL_W slots, so a
 * thread finds its row's entries from its row number alone: no row pointer
 * is loaded, and the loads of a row's indices and values are all issued
 * before the first gather of x. A kernel that small matrices keep in L2 is
 * bound by its chain of dependent loads, and CSR's is three long (row
 * pointer, then index, then x); this one is two (index, then x). The price
 * is padding: every row costs the longest row's slots, so it is for short
 * rows of nearly equal length (the contract refuses more than 4 slots per
 * nonzero).
 *
 * LANES = 1: one thread per row over the column-major layout (slot k of
 * row r at k * ELL_ROWS + r), so a warp's loads of one slot are contiguous.
 * LANES > 1: a sub-warp per row over the row-major layout (r * ELL_W + k),
 * lane l taking slots l, l + LANES, ..., and a shuffle reduction; for
 * longer rows, where one thread per row would leave most of the GPU idle.
 * The contract asks the worker for the row-major layout exactly then. */
/*@manifest
{"strategy": "ell-baked", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"LANES": {"default": 1, "values": [1, 2, 4, 8, 16, 32]},
            "BLOCK": {"default": 128, "values": [64, 128, 256, 512]},
            "UNROLL": {"default": 8, "values": [4, 8, 16, 32]}},
 "constraints": ["BLOCK % 32 == 0"],
 "preprocessing": "ell (every row padded to the longest; column-major for LANES 1, row-major
otherwise)", "summary": "rows and padded width baked in: LANES threads per ELL row, no row
pointers"}
@*/
/*@contract
{"entry": "spmv_ell", "op": "spmv", "format": "ell", "format_params": {"row_major": "min(LANES - 1,
1)"}, "params": ["ell_col", "ell_val", "x", "y", "alpha", "beta", "bias"], "block": ["BLOCK"],
"grid": ["max(cdiv(rows, BLOCK / LANES), 1)"], "defines": {"ELL_ROWS": "rows", "ELL_W": "width"},
 "requires": {"max_fill": 4}}
@*/
#include "ditto.cuh"

#ifndef LANES
#define LANES 1
#endif
#ifndef BLOCK
#define BLOCK 128
#endif
#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef ELL_ROWS
#define ELL_ROWS 1024
#endif
#ifndef ELL_W
#define ELL_W 8
#endif

static_assert(BLOCK % 32 == 0, "BLOCK: whole warps (the shuffles name all 32 lanes)");
static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
              "LANES: a power of two up to 32");
static_assert(UNROLL >= 1, "UNROLL: at least 1");
static_assert(ELL_ROWS >= 0 && ELL_W >= 0, "ELL_ROWS, ELL_W: the matrix's rows and padded width");

/* Slots per lane, and where slot k of row r lives. */
#define ELL_PER ((ELL_W + LANES - 1) / LANES)
#if LANES == 1
#define ELL_AT(r, k) ((long long)(k)*ELL_ROWS + (r))
#else
#define ELL_AT(r, k) ((long long)(r)*ELL_W + (k))
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
    spmv_ell(const int *__restrict__ ell_col, const T *__restrict__ ell_val,
             const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
             const T *__restrict__ bias)
{
    const int lane = threadIdx.x % LANES;
    const int row = blockIdx.x * (BLOCK / LANES) + threadIdx.x / LANES;
    S acc = S(0);
    if (row < ELL_ROWS) {
        /* A batch of UNROLL slots: every load of the batch, then every
         * gather. A row's entries come first and its padding (col -1)
         * after, so a batch that ends in padding ends the row. */
        bool done = false;
#pragma unroll
        for (int b = 0; b < ELL_PER; b += UNROLL) {
            if (done)
                break;
            int c[UNROLL];
            T v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int k = (b + u) * LANES + lane;
                c[u] = -1;
                v[u] = DT_STORE(S(0));
                if (b + u < ELL_PER && k < ELL_W) {
                    c[u] = ell_col[ELL_AT(row, k)];
                    v[u] = ell_val[ELL_AT(row, k)];
                }
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
                if (c[u] >= 0)
                    acc += DT_LOAD(v[u]) * DT_LOAD(__ldg(&x[c[u]]));
            done = c[UNROLL - 1] < 0;
        }
    }
#if LANES > 1
    /* Lanes past the last row carry 0: the shuffles need the whole warp. */
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, LANES);
#endif
    if (lane == 0 && row < ELL_ROWS)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
