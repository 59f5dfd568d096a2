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
#include "spmv_sell_row.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_sell(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
          const int *__restrict__ sell_perm, const int *__restrict__ sell_col,
          const T *__restrict__ sell_val, const T *__restrict__ x, T *__restrict__ y, S alpha,
          S beta, const T *__restrict__ bias)
{
    sell_thread<int, int, -1, 1, T, false>(nslices, sell_ptr, sell_len, sell_perm, sell_col,
                                           nullptr, sell_val, x, y, alpha, beta, bias, blockIdx.x);
}
