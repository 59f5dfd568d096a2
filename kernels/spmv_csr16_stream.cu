/* spmv_csr16_stream.cu -- csr-stream over csr16: a block streams the
 * contiguous nonzeros of BLOCK * RPT consecutive rows through shared memory
 * (see spmv_csr_stream.cu), reading 16-bit column offsets from one base per
 * slice of 512 rows, so an fp32 nonzero costs 6 bytes instead of 8 and an
 * fp64 one 10 instead of 12. A block's rows lie in one slice (512 is a
 * multiple of BLOCK * RPT), so the block needs a single base. For the many
 * short, skewed rows of power-law matrices at HBM sizes whose 512-row
 * slices span at most 65536 columns (banded, FEM, block-diagonal); the
 * format builder refuses the others, naming the rows. */
/*@manifest
{"strategy": "csr16-stream", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [128, 256, 512]},
            "RPT": {"default": 1, "values": [1, 2, 4]},
            "ITEMS": {"default": 8, "values": [4, 8, 12, 16]}},
 "constraints": ["BLOCK % 32 == 0", "BLOCK * ITEMS <= 4096", "BLOCK * RPT <= 512"],
 "format_params": {"slice": {"default": 512, "values": [512]}},
 "preprocessing": "csr16 (16-bit column offsets from a base per slice of 512 rows)",
 "summary": "csr-stream over 16-bit column offsets: 6 bytes per fp32 nonzero"}
@*/
/*@contract
{"entry": "spmv_csr16_stream", "op": "spmv", "format": "csr16", "format_params": {"slice": 512},
 "params": ["rows", "nnz", "slice_shift", "rowptr", "col16", "slice_base", "val", "x", "y",
            "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(rows, BLOCK * RPT)"]}
@*/
#include "ditto.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef RPT
#define RPT 1
#endif
#ifndef ITEMS
#define ITEMS 8
#endif

#include "spmv_stream.cuh"

static_assert(512 % ROWS == 0, "BLOCK * RPT: a block's rows must lie in one 512-row slice");

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr16_stream(int rows, int nnz, int slice_shift, const int *__restrict__ rowptr,
                  const unsigned short *__restrict__ col16, const int *__restrict__ slice_base,
                  const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                  S beta, const T *__restrict__ bias)
{
    (void)nnz;
    /* Every row of the block lies in one slice, so one base serves them all. */
    const T *__restrict__ xb = x + slice_base[(blockIdx.x * ROWS) >> slice_shift];
    stream_rows<unsigned short>(rows, rowptr, col16, val, xb, y, alpha, beta, bias);
}
