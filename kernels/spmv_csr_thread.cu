/* spmv_csr_thread.cu -- SpMV over CSR with one thread per row: the simplest
 * mapping. Good for short, regular rows (each thread's loads stay in a few
 * cache lines); poor for long or skewed rows (one thread walks the whole
 * row while its warp waits). */
/*@manifest
{"strategy": "csr-thread", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512, 1024]}},
 "constraints": ["BLOCK % 32 == 0"],
 "preprocessing": "none",
 "summary": "one thread per row"}
@*/
/*@contract
{"entry": "spmv_csr_thread", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(rows, BLOCK)"]}
@*/
#include "ditto.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr_thread(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                S beta, const T *__restrict__ bias)
{
    int row = blockIdx.x * BLOCK + threadIdx.x;
    if (row >= rows)
        return;
    S acc = S(0);
    int end = rowptr[row + 1];
    for (int k = rowptr[row]; k < end; k++)
        acc += DT_LOAD(val[k]) * DT_LOAD(__ldg(&x[col[k]]));
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
