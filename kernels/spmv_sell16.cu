/* spmv_sell16.cu -- SpMV over SELL-C-sigma with 16-bit column offsets
 * (format "sell16"): the coalesced column-major slices of spmv_sell.cu, but
 * each index is a 2-byte offset from its slice's base column, so an fp32
 * entry costs 6 bytes instead of 8. SpMV is bandwidth-bound: on regular
 * short rows whose slices span fewer than 65535 columns (meshes, stencils,
 * banded and block-diagonal matrices) this is the shortest path. SIGMA
 * sorts rows by length within windows of SIGMA rows before slicing (the
 * contract passes it to the format as sigma), which keeps padding small when
 * lengths vary.
 *
 * VEC (the format's vec) stores each row's entries in chunks of VEC
 * adjacent ones (chunk q of the slice's row j at q * 32 * VEC + j * VEC,
 * slice lengths rounded up to whole chunks), and a thread loads a chunk's
 * offsets and values with one vector load each (VEC 8: 16 bytes of
 * offsets; fp32 VEC 4: 16 bytes of values). At VEC 1 a warp's load moves
 * 64 bytes of offsets or 128 of fp32 values, and at HBM sizes the kernel
 * is bound by the loads in flight (ncu, H200: 69 % of DRAM peak, 85 % of
 * stalls on L1TEX); VEC > 1 moves the same bytes in VEC times fewer, wider
 * instructions. The gathers of x stay one per entry, and rounding slices
 * to whole chunks adds padding on short rows. Measured on the H200 (six
 * 32M-nonzero replicas, SIGMA 256, L2 flushed before each run): fp32
 * VEC 2 UNROLL 4 or VEC 8 UNROLL 1 took 0.92-0.98 of VEC 1 UNROLL 8's time
 * on five of them (1.03 on fidapex6); in fp64 the best VEC > 1 variant
 * took 0.99-1.10 of it, except on crack (0.86, as VEC 1 UNROLL 4). UNROLL
 * is the chunks a thread loads before it gathers x, so UNROLL * VEC
 * entries per row are in flight; batches of 32 entries took 0.99-2.2
 * times as long (56-78 registers), and the constraint stops there: fp64
 * VEC 8 UNROLL 8 spills at BLOCK 256 and 512.
 *
 * SEQ gives a thread that many rows, a block-width apart, walked one after
 * another with the next row's slice loads in flight during the current
 * walk (sell_thread_seq in spmv_sell_row.cuh): on rows of a few entries
 * the slice's loads are a third of a row's chain. Worth about 3 % on
 * crack in fp32 (rows of 5.9); it costs 8 registers, which lose more
 * than that where the walk already needs 48 (UNROLL 8) and in fp64. */
/*@manifest
{"strategy": "sell16-thread", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512]},
            "UNROLL": {"default": 8, "values": [1, 2, 4, 8]},
            "SIGMA": {"default": 1, "values": [1, 256, 8192]},
            "VEC": {"default": 1, "values": [1, 2, 4, 8]},
            "SEQ": {"default": 1, "values": [1, 2, 4]}},
 "constraints": ["BLOCK % 32 == 0", "VEC * UNROLL <= 32"],
 "preprocessing": "sell16 (rows sorted by length within windows of SIGMA rows, slices of 32, 16-bit column offsets from a per-slice base)",
 "summary": "one thread per row of a column-major SELL slice with 16-bit column offsets, VEC adjacent entries of a row per vector load"}
@*/
/*@contract
{"entry": "spmv_sell16", "op": "spmv", "format": "sell16", "format_params": {"C": 32, "sigma": "SIGMA", "vec": "VEC"},
 "params": ["nslices", "sell_ptr", "sell_len", "sell_perm", "col16", "slice_base", "sell_val",
            "x", "y", "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(nslices * C, BLOCK * SEQ)"],
 "defines": {"SELL_C": "C", "ROWS": "rows"}}
@*/
#include "ditto.cuh"

#ifndef VEC
#define VEC 1
#endif
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: the format's vec");
#ifndef SEQ
#define SEQ 1 /* rows a thread, one after another (sell_thread_seq) */
#endif
static_assert(SEQ >= 1 && SEQ <= 8, "SEQ: 1 to 8 rows a thread");

#include "spmv_sell_row.cuh"

/* Unsorted rows (SIGMA 1): the slices hold rows in order, and the kernel
 * computes a thread's row instead of loading it (sell_thread's IDROWS). */
#if defined(SIGMA) && SIGMA == 1 && defined(ROWS)
#define SELL_IDROWS ((long long)(ROWS))
#else
#define SELL_IDROWS (-1LL)
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_sell16(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
            const int *__restrict__ sell_perm, const unsigned short *__restrict__ col16,
            const int *__restrict__ slice_base, const T *__restrict__ sell_val,
            const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
            const T *__restrict__ bias)
{
    if constexpr (SEQ == 1)
        sell_thread<unsigned short, unsigned, 0xFFFFu, VEC, T, true, SELL_IDROWS>(
            nslices, sell_ptr, sell_len, sell_perm, col16, slice_base, sell_val, x, y, alpha, beta,
            bias, blockIdx.x);
    else
        sell_thread_seq<unsigned short, unsigned, 0xFFFFu, VEC, T, true, SELL_IDROWS, SEQ>(
            nslices, sell_ptr, sell_len, sell_perm, col16, slice_base, sell_val, x, y, alpha, beta,
            bias, blockIdx.x);
}
