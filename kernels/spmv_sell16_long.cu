/* spmv_sell16_long.cu -- sell16-thread for the short rows, a warp for each
 * row longer than LONG (format "sell16" with long = LONG): the rows past
 * LONG entries are left out of the slices and kept as a small CSR beside
 * them, so one long row no longer pads its slice, and every row is
 * summed by exactly one owner in one launch.
 *
 * Made for matrices of short rows with a few very long ones (adder_dcop_05:
 * one row of 1310 entries, 12 % of its nonzeros, among rows of at most 13):
 * SELL over all rows pads them 4.6x, csr-stream streams them at 70 % of the
 * copy bandwidth, while SELL over the short rows alone pads 1.02x.
 * Measured on the H200 (32M-nonzero replicas, L2 flushed, `ditto check
 * KERNEL rep:MATRIX:nnz=32M --op spmv`): adder_dcop_05 fp32 100.4 us against csr-stream's 106.5 and
 * CSR_ALG1's 117.9, fp64 154.4 against 154.2 and 177.4; hangGlider_2 fp32
 * 73.1 against CSR_ALG1's 108.1. The long rows' blocks come first: launched
 * last they measured the same (100.45 us), so adder's remaining gap to the
 * copy bandwidth is its scattered gathers of x, not a tail. */
/*@manifest
{"strategy": "sell16-long", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512]},
            "UNROLL": {"default": 8, "values": [1, 2, 4, 8]},
            "SIGMA": {"default": 256, "values": [256, 1024, 8192]},
            "VEC": {"default": 1, "values": [1, 2, 4, 8]},
            "LONG": {"default": 64, "values": [32, 64, 256]}},
 "constraints": ["BLOCK % 32 == 0", "VEC * UNROLL <= 32"],
 "preprocessing": "sell16 with long = LONG (rows of more than LONG entries left out of the slices
and kept as CSR: long_rows, long_ptr, long_col, long_val)", "summary": "sell16-thread over the rows
of up to LONG entries, a warp per longer row, in one launch"}
@*/
/*@contract
{"entry": "spmv_sell16_long", "op": "spmv", "format": "sell16",
 "format_params": {"C": 32, "sigma": "SIGMA", "vec": "VEC", "long": "LONG"},
 "params": ["nslices", "sell_ptr", "sell_len", "sell_perm", "col16", "slice_base", "sell_val",
            "nlong", "long_rows", "long_ptr", "long_col", "long_val",
            "x", "y", "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(nlong * 32, BLOCK) + cdiv(nslices * C, BLOCK)"],
 "defines": {"SELL_C": "C"}}
@*/
#include "ditto.cuh"

#ifndef VEC
#define VEC 1
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: the format's vec");

#include "spmv_sell_row.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK)
    spmv_sell16_long(int nslices, const int *__restrict__ sell_ptr,
                     const int *__restrict__ sell_len, const int *__restrict__ sell_perm,
                     const unsigned short *__restrict__ col16, const int *__restrict__ slice_base,
                     const T *__restrict__ sell_val, int nlong, const int *__restrict__ long_rows,
                     const int *__restrict__ long_ptr, const int *__restrict__ long_col,
                     const T *__restrict__ long_val, const T *__restrict__ x, T *__restrict__ y,
                     S alpha, S beta, const T *__restrict__ bias)
{
    /* The first blocks take the long rows, a warp each, so that their
     * longer dependent chains start first and overlap the slices' streaming
     * instead of trailing it; the rest cover the slices exactly as
     * sell16-thread's grid does (the long rows' slots hold -1 and store
     * nothing). */
    const int nlongblk = (int)(((long long)nlong * 32 + BLOCK - 1) / BLOCK);
    if ((int)blockIdx.x >= nlongblk) {
        sell_thread<unsigned short, unsigned, 0xFFFFu, VEC, T, true>(
            nslices, sell_ptr, sell_len, sell_perm, col16, slice_base, sell_val, x, y, alpha, beta,
            bias, blockIdx.x - nlongblk);
        return;
    }
    /* A warp per long row, eight loads a lane in flight. */
    const long long w = ((long long)blockIdx.x * BLOCK + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    if (w >= nlong)
        return;
    const int row = long_rows[w];
    const int b = long_ptr[w], e = long_ptr[w + 1];
    S acc = S(0);
    for (int k = b + lane; k < e; k += 8 * 32) {
        int c[8];
        S v[8];
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int at = k + u * 32;
            c[u] = at < e ? long_col[at] : -1;
            v[u] = at < e ? DT_LOAD(long_val[at]) : S(0);
        }
#pragma unroll
        for (int u = 0; u < 8; u++)
            if (c[u] >= 0)
                acc += v[u] * DT_LOAD(x[c[u]]);
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
