/* spmv_sell16_dict.cu -- sell16-thread (spmv_sell16.cu) with the values in
 * a dictionary: each entry stores a one-byte index into a table of at most
 * 256 values (entry 0 is 0, for padding), which a block copies to shared
 * memory before it starts. SpMV at HBM size is bound by the bytes it
 * streams; with 16-bit column offsets and a one-byte value an entry costs 3
 * bytes, where sell16 needs 6 in fp32 and 10 in fp64 and CSR 8 and 12. Exact
 * (the table holds the values as the dtype stores them), and only for
 * matrices with at most 255 distinct nonzero values: patterns (graphs,
 * meshes read as structure), stencils and matrices assembled from a few
 * coefficients. The format refuses any other matrix (CSR-VI, Kourtis,
 * Goumas and Koziris, "Optimizing sparse matrix-vector multiplication using
 * index and value compression", CF 2008; iso-valued matrices in
 * SuiteSparse:GraphBLAS are the one-value case).
 *
 * RPT 2 gives a thread two rows a block-width apart and issues both rows'
 * loads before either's gathers (sell_thread_rpt in spmv_sell_row.cuh): at
 * 3 bytes an entry a row of a few entries is a chain of round trips with
 * little behind it, and a second chain in flight per thread is what the
 * short rows of Franz6 needed: in the HBM bench 1.35x SELL_ALG1 at RPT 1,
 * 1.50x at RPT 2, BLOCK 128, VEC 1, UNROLL 4 (32 registers). */
/*@manifest
{"strategy": "sell16-dict", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512]},
            "UNROLL": {"default": 8, "values": [1, 2, 4, 8]},
            "SIGMA": {"default": 1, "values": [1, 256]},
            "VEC": {"default": 1, "values": [1, 2, 4, 8]},
            "RPT": {"default": 1, "values": [1, 2]}},
 "constraints": ["BLOCK % 32 == 0", "VEC * UNROLL * RPT <= 32"],
 "preprocessing": "sell16 with vdict (rows sorted by length within windows of SIGMA rows, slices of
32, 16-bit column offsets from a per-slice base, a one-byte index per entry into a table of the
matrix's distinct values)", "summary": "sell16-thread with a one-byte index per entry into a table
of at most 256 values: 3 bytes an entry; RPT rows a thread with their loads in flight together"}
@*/
/*@contract
{"entry": "spmv_sell16_dict", "op": "spmv", "format": "sell16",
 "format_params": {"C": 32, "sigma": "SIGMA", "vec": "VEC", "vdict": 1},
 "params": ["nslices", "sell_ptr", "sell_len", "sell_perm", "col16", "slice_base", "sell_vidx",
            "vtab", "x", "y", "alpha", "beta", "bias"],
 "requires": {"max_values": 255},
 "block": ["BLOCK"], "grid": ["cdiv(nslices * C, BLOCK * RPT)"],
 "defines": {"SELL_C": "C", "NVALS": "nvals", "ROWS": "rows"}}
@*/
#include "ditto.cuh"

#ifndef NVALS
#define NVALS 256 /* the table's entries in use (the format's nvals) */
#endif
static_assert(NVALS >= 1 && NVALS <= 256, "NVALS: a one-byte index names 256 values at most");

__shared__ T s_vtab[NVALS]; /* the block's copy of the table */

/* The walks of spmv_sell_row.cuh over one-byte values; declared before it,
 * so that its templates find them. */
__device__ __forceinline__ S sell_value(unsigned char i)
{
    return DT_LOAD(s_vtab[i]);
}
__device__ __forceinline__ void sell_pad(unsigned char &i)
{
    i = 0;
}

#ifndef VEC
#define VEC 1
#endif
#ifndef RPT
#define RPT 1 /* rows a thread, their chains in flight together (sell_thread_rpt) */
#endif
static_assert(RPT >= 1 && RPT <= 4, "RPT: 1 to 4 rows a thread");
static_assert(VEC == 1 || VEC == 2 || VEC == 4 || VEC == 8, "VEC: the format's vec");

#include "spmv_sell_row.cuh"

/* Unsorted rows (SIGMA 1): the slices hold rows in order, and the kernel
 * computes a thread's row instead of loading it (sell_thread's IDROWS). */
#if defined(SIGMA) && SIGMA == 1 && defined(ROWS)
#define SELL_IDROWS ((long long)(ROWS))
#else
#define SELL_IDROWS (-1LL)
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_sell16_dict(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
                 const int *__restrict__ sell_perm, const unsigned short *__restrict__ col16,
                 const int *__restrict__ slice_base, const unsigned char *__restrict__ sell_vidx,
                 const T *__restrict__ vtab, const T *__restrict__ x, T *__restrict__ y, S alpha,
                 S beta, const T *__restrict__ bias)
{
    for (int i = threadIdx.x; i < NVALS; i += BLOCK)
        s_vtab[i] = vtab[i];
    __syncthreads();
    if constexpr (RPT == 1)
        sell_thread<unsigned short, unsigned, 0xFFFFu, VEC, unsigned char, true, SELL_IDROWS>(
            nslices, sell_ptr, sell_len, sell_perm, col16, slice_base, sell_vidx, x, y, alpha, beta,
            bias, blockIdx.x);
    else
        sell_thread_rpt<unsigned short, unsigned, 0xFFFFu, VEC, unsigned char, true, SELL_IDROWS,
                        RPT>(nslices, sell_ptr, sell_len, sell_perm, col16, slice_base, sell_vidx,
                             x, y, alpha, beta, bias, blockIdx.x);
}
