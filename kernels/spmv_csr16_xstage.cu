/* spmv_csr16_xstage.cu -- csr16-stream with the block's window of x staged
 * in shared memory. At HBM sizes the gathers of x, not the matrix stream,
 * can bound csr-stream: each product reads 4 bytes of x through a 32-byte
 * sector, and when a block's rows scatter their columns (ca-GrQc, a
 * collaboration network: L1 hit rate 48 %, the L2 at 80 % of its
 * throughput while DRAM sat at 48 %) most of those sectors come from L2.
 * Here the format's slice is the block's BLOCK * RPT rows, so the 16-bit
 * offsets count from the block's own smallest column and slice_span says
 * how many columns it reaches. A block whose window fits XW values loads it
 * once with coalesced reads, then gathers from shared memory at the offset
 * itself; a block whose window is wider gathers from global memory as
 * csr16-stream does. Rows stay in order, so y needs no permutation.
 * Measured on the H200 at 32M nonzeros (fp32, against CSR_ALG1):
 * adder_dcop_05, rows within 1812 columns, 1.09x where csr-stream reached
 * 1.04x; ca-GrQc, rows over the whole 5242-column replica, 0.85x where
 * csr-stream reached 0.90x: there a block of 1024 rows stages 5242 or more
 * values of x for about 5600 products, and staging did not pay. */
/*@manifest
{"strategy": "csr16-xstage", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [128, 256, 512]},
            "RPT": {"default": 4, "values": [1, 2, 4, 8]},
            "ITEMS": {"default": 8, "values": [4, 8, 12, 16]},
            "XW": {"default": 8192, "values": [2048, 4096, 8192, 16384]}},
 "constraints": ["BLOCK % 32 == 0", "BLOCK * ITEMS <= 4096", "BLOCK * RPT <= 2048"],
 "preprocessing": "csr16 with one base per block of BLOCK * RPT rows (16-bit column offsets, the span of columns each block reaches)",
 "summary": "csr-stream over 16-bit offsets, gathering x from a window staged in shared memory when the block's columns span at most XW"}
@*/
/*@contract
{"entry": "spmv_csr16_xstage", "op": "spmv", "format": "csr16",
 "format_params": {"slice": "BLOCK * RPT"},
 "params": ["rows", "nnz", "slice_shift", "rowptr", "col16", "slice_base", "slice_span", "val",
            "x", "y", "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(rows, BLOCK * RPT)"],
 "smem": "min(XW, slice_span_max) * value_bytes"}
@*/
#include "ditto.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef RPT
#define RPT 4
#endif
#ifndef ITEMS
#define ITEMS 8
#endif
#ifndef XW
#define XW 8192
#endif

#include "spmv_stream.cuh"

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr16_xstage(int rows, int nnz, int slice_shift, const int *__restrict__ rowptr,
                  const unsigned short *__restrict__ col16, const int *__restrict__ slice_base,
                  const int *__restrict__ slice_span, const T *__restrict__ val,
                  const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
                  const T *__restrict__ bias)
{
    (void)nnz;
    /* The launch gives min(XW, the widest slice) values: every window of
     * at most XW fits. */
    extern __shared__ __align__(16) unsigned char s_raw[];
    T *s_x = reinterpret_cast<T *>(s_raw);
    /* The contract makes a slice exactly this block's rows, so the
     * slice's base and span serve all of them. */
    const int s = (int)(((long long)blockIdx.x * ROWS) >> slice_shift);
    const T *__restrict__ xb = x + slice_base[s];
    const int span = slice_span[s];
    const bool staged = span <= XW;
    if (staged)
        for (int i = threadIdx.x; i < span; i += BLOCK)
            s_x[i] = __ldg(&xb[i]);
    /* stream_rows synchronises after staging its row offsets, before any
     * gather, so the window is complete when the first product reads it. */
    stream_rows<unsigned short, true>(rows, rowptr, col16, val, xb, y, alpha, beta, bias, s_x,
                                      staged);
}
