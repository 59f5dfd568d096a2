/* spmv_csr_stream.cu -- SpMV over CSR for many short rows at sizes that
 * stream from HBM (the "CSR-Stream" mode of CSR-Adaptive, Greathouse &
 * Daga, without the row-block preprocessing). A block owns ROWS = BLOCK *
 * RPT consecutive rows, so its nonzeros are one contiguous range; it loads
 * that range ITEMS per thread at a time with every col and val load issued
 * before the first product, stages the products in shared memory, and each
 * thread then sums its rows from there. Three dependent trips to memory per
 * block (row offsets, col and val, x) move a whole tile, where a sub-warp
 * per row makes one short row's worth of bytes wait on the same three trips:
 * with rows of a few entries that leaves too few bytes in flight to reach
 * the memory bandwidth. A range longer than the tile is taken in several
 * tiles; a row of more than 32 products in a tile is summed by its warp.
 * Rows far longer than a tile belong to merge-path or csr-adaptive. */
/*@manifest
{"strategy": "csr-stream", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [128, 256, 512]},
            "RPT": {"default": 1, "values": [1, 2, 4]},
            "ITEMS": {"default": 8, "values": [4, 8, 12, 16]}},
 "constraints": ["BLOCK % 32 == 0", "BLOCK * ITEMS <= 4096", "BLOCK * RPT <= 2048"],
 "preprocessing": "none",
 "summary": "a block streams the nonzeros of BLOCK * RPT consecutive rows through shared memory"}
@*/
/*@contract
{"entry": "spmv_csr_stream", "op": "spmv", "format": "csr",
 "params": ["rows", "nnz", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
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

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr_stream(int rows, int nnz, const int *__restrict__ rowptr, const int *__restrict__ col,
                const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                S beta, const T *__restrict__ bias)
{
    (void)nnz;
    stream_rows<int>(rows, rowptr, col, val, x, y, alpha, beta, bias);
}
