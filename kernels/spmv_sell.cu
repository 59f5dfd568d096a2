/* spmv_sell.cu -- SpMV over SELL-C-sigma (format "sell"): one thread per
 * row of a slice of C rows stored column-major, so the C threads of a slice
 * read C consecutive indices and values per step, fully coalesced, with no
 * row pointers and no reduction. Rows are sorted by length within windows of
 * sigma rows so a slice's rows are alike and padding stays small; a thread
 * stops at its row's first padding entry (col -1). Good for regular short
 * rows; padding makes it lose on skewed ones. */
/*@manifest
{"strategy": "sell-thread", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512, 1024]},
            "UNROLL": {"default": 4, "values": [1, 2, 4, 8]}},
 "constraints": ["BLOCK % 32 == 0"],
 "format_params": {"C": {"default": 32, "values": [8, 16, 32]},
                   "sigma": {"default": 256, "values": [1, 32, 256, 1024, 4096]}},
 "preprocessing": "sell (rows sorted within sigma windows, slices of C padded and transposed)",
 "summary": "one thread per row of a column-major SELL slice; C comes from the format"}
@*/
/*@contract
{"entry": "spmv_sell", "op": "spmv", "format": "sell", "format_params": {"C": 32, "sigma": 256},
 "params": ["nslices", "sell_ptr", "sell_len", "sell_perm", "sell_col", "sell_val", "x", "y",
            "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(nslices * C, BLOCK)"],
 "defines": {"SELL_C": "C"}}
@*/
#include "ditto.cuh"

#ifndef SELL_C
#define SELL_C 32
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

static_assert(SELL_C >= 1 && SELL_C <= 1024, "SELL_C: the format's slice height");
static_assert(UNROLL >= 1, "UNROLL: at least 1");

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_sell(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
          const int *__restrict__ sell_perm, const int *__restrict__ sell_col,
          const T *__restrict__ sell_val, const T *__restrict__ x, T *__restrict__ y, S alpha,
          S beta, const T *__restrict__ bias)
{
    const long long g = (long long)blockIdx.x * BLOCK + threadIdx.x;
    const int slice = (int)(g / SELL_C);
    const int j = (int)(g % SELL_C);
    if (slice >= nslices)
        return;
    const int row = sell_perm[(long long)slice * SELL_C + j];
    if (row < 0)
        return; /* padding row of the last slice */
    const int *__restrict__ c = sell_col + sell_ptr[slice] + j;
    const T *__restrict__ v = sell_val + sell_ptr[slice] + j;
    const int len = sell_len[slice];
    S acc = S(0);
    /* UNROLL steps at a time: their index loads are independent, so they
     * are in flight together. A row's entries come first in its column of
     * the slice, padding (col -1) after them: the first -1 ends the row. */
    bool done = false;
    for (int k = 0; k < len && !done; k += UNROLL) {
        int cc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            cc[u] = k + u < len ? c[(long long)(k + u) * SELL_C] : -1;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            if (cc[u] >= 0)
                acc += DT_LOAD(v[(long long)(k + u) * SELL_C]) * DT_LOAD(__ldg(&x[cc[u]]));
            else
                done = true;
        }
    }
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
