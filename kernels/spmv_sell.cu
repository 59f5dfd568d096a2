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
            "UNROLL": {"default": 8, "values": [1, 2, 4, 8]}},
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
#define UNROLL 8
#endif

static_assert(SELL_C >= 1 && SELL_C <= 1024, "SELL_C: the format's slice height");
static_assert(UNROLL >= 1, "UNROLL: at least 1");

#include "spmv_sell_row.cuh"

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
    /* The thread's row, the slice's offset and width: independent loads, in
     * flight together (the row is only needed for the store; a padding row
     * of the last slice, -1, has only padding entries). */
    const int row = sell_perm[(long long)slice * SELL_C + j];
    const int start = sell_ptr[slice];
    const int len = sell_len[slice];
    const int *__restrict__ c = sell_col + start + j;
    const T *__restrict__ v = sell_val + start + j;
    const S acc = sell_row<int, int, -1>(c, v, x, len);
    if (row >= 0)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
