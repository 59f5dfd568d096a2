/* spmv_csr_vector.cu -- SpMV over CSR with a sub-warp of LANES threads per
 * row and a shuffle reduction. LANES near the typical row length keeps
 * every lane busy and the loads of a row in one or two transactions; VEC > 1
 * makes each lane load VEC consecutive entries at once (16-byte loads of
 * col and val at VEC = 4 for fp32), from the row start rounded down to a
 * multiple of VEC so every vector is aligned, masking the entries that
 * belong to the neighbouring rows. Good for regular rows of 8 to a few
 * hundred entries; skewed rows waste lanes (csr-adaptive, merge-path). */
/*@manifest
{"strategy": "csr-vector", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"LANES": {"default": 8, "values": [2, 4, 8, 16, 32]},
            "VEC": {"default": 1, "values": [1, 2, 4, 8]},
            "BLOCK": {"default": 256, "values": [64, 128, 256, 512, 1024]},
            "UNROLL": {"default": 2, "values": [1, 2]}},
 "constraints": ["BLOCK % 32 == 0", "VEC * LANES <= 128", "VEC * UNROLL <= 16"],
 "preprocessing": "none",
 "summary": "LANES threads per row with a shuffle reduction, optional VEC-wide aligned loads"}
@*/
/*@contract
{"entry": "spmv_csr_vector", "op": "spmv", "format": "csr",
 "params": ["rows", "nnz", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(rows, BLOCK / LANES)"]}
@*/
#include "ditto.cuh"

#ifndef LANES
#define LANES 8
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#include "spmv_rowdot.cuh"

static_assert(BLOCK % 32 == 0, "BLOCK: whole warps (the shuffles name all 32 lanes)");

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr_vector(int rows, int nnz, const int *__restrict__ rowptr, const int *__restrict__ col,
                const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x % LANES;
    const int row = blockIdx.x * (BLOCK / LANES) + threadIdx.x / LANES;
    /* Lanes past the last row stay to the end with an empty range: the
     * shuffles below need the whole warp. */
    int start = 0, end = 0;
    if (row < rows) {
        start = rowptr[row];
        end = rowptr[row + 1];
    }
    S acc = row_dot<int>(start, end, nnz, lane, col, val, x);
#pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, LANES);
    if (lane == 0 && row < rows)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
