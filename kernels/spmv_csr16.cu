/* spmv_csr16.cu -- SpMV over csr16: CSR whose column indices are 16-bit
 * offsets from a 32-bit base per slice of rows (format "csr16"), read by a
 * sub-warp of LANES threads per row with VEC-wide aligned loads. SpMV moves
 * its matrix once and does one FMA per 8 bytes of fp32 CSR; 2-byte offsets
 * make that 6 bytes, which is the headroom over any kernel reading 32-bit
 * indices. Applies when every slice's columns span at most 65536 (banded,
 * stencil, FEM and block-diagonal matrices; the builder refuses the rest). */
/*@manifest
{"strategy": "csr16-vector", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"LANES": {"default": 8, "values": [1, 2, 4, 8, 16, 32]},
            "VEC": {"default": 4, "values": [1, 2, 4, 8]},
            "BLOCK": {"default": 256, "values": [64, 128, 256, 512, 1024]},
            "UNROLL": {"default": 1, "values": [1, 2, 4]}},
 "constraints": ["BLOCK % 32 == 0", "VEC * LANES <= 128", "VEC * UNROLL <= 16"],
 "format_params": {"slice": {"default": 1, "values": [1, 2, 4, 8, 16, 32, 64]}},
 "preprocessing": "csr16 (16-bit column offsets from a base per slice of rows)",
 "summary": "LANES threads per row over 16-bit column offsets, VEC-wide aligned loads"}
@*/
/*@contract
{"entry": "spmv_csr16", "op": "spmv", "format": "csr16", "format_params": {"slice": 1},
 "params": ["rows", "nnz", "slice_shift", "rowptr", "col16", "slice_base", "val", "x", "y",
            "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(rows, BLOCK / LANES)"]}
@*/
#include "ditto.cuh"

#ifndef LANES
#define LANES 8
#endif
#ifndef VEC
#define VEC 4
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 1
#endif

#include "spmv_rowdot.cuh"

static_assert(BLOCK % 32 == 0, "BLOCK: whole warps (the shuffles name all 32 lanes)");

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr16(int rows, int nnz, int slice_shift, const int *__restrict__ rowptr,
           const unsigned short *__restrict__ col16, const int *__restrict__ slice_base,
           const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
           const T *__restrict__ bias)
{
    const int lane = threadIdx.x % LANES;
    const int row = blockIdx.x * (BLOCK / LANES) + threadIdx.x / LANES;
    /* Lanes past the last row keep an empty range and stay for the
     * shuffles. */
    int start = 0, end = 0, base = 0;
    if (row < rows) {
        start = rowptr[row];
        end = rowptr[row + 1];
        base = slice_base[row >> slice_shift];
    }
    const T *__restrict__ xb = x + base; /* offsets index x from the row's base */
    S acc = row_dot<unsigned short>(start, end, nnz, lane, col16, val, xb);
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, LANES);
    if (lane == 0 && row < rows)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
