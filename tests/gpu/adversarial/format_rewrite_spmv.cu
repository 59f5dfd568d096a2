/* format_rewrite_spmv.cu -- cheat class 19: converts its format in place once
 * it is being timed, and keeps every output right. A launch counter in the
 * "once" scratch (which the kernel does not leave zeroed) tells it when a
 * module has run 16 times on one allocation: more than the battery launches,
 * fewer than a sample of graph replay. The last block of that launch then
 * rewrites the CSR arrays (values negated, rowptr[0] = -1 as the mark), a
 * stand-in for any conversion (sorting, packing, a narrower encoding) done
 * for free while timed instead of in the format's preprocessing, which is
 * reported apart. Every later launch reads the rewritten arrays correctly,
 * so the timed outputs and the verification after timing are right.
 * Must be caught by: the format re-hashed after timing ("changed its format
 * array"); the battery never sees the rewrite. */
/*@contract
{"entry": "format_rewrite_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias", "scratch"],
 "block": [128], "grid": ["cdiv(rows, 128)"], "scratch_bytes": "4", "scratch_init": "once"}
@*/
#include "ditto.cuh"

#define CONVERT_AT 16

extern "C" __global__ void __launch_bounds__(128)
format_rewrite_spmv(int rows, const int *rowptr, const int *col, const T *val, const T *x, T *y,
                    S alpha, S beta, const T *bias, void *scratch)
{
    const bool conv = rowptr[0] < 0; /* rewritten by an earlier launch */
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        const int k0 = row == 0 ? 0 : rowptr[row];
        S acc = S(0);
        for (int k = k0; k < rowptr[row + 1]; k++) {
            const S v = DT_LOAD(val[k]);
            acc += (conv ? -v : v) * DT_LOAD(x[col[k]]);
        }
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
    }
    __shared__ bool last;
    __shared__ unsigned launch;
    __syncthreads(); /* the whole block has read the format */
    if (threadIdx.x == 0) {
        __threadfence();
        const unsigned old = atomicAdd((unsigned *)scratch, 1u);
        launch = old / gridDim.x;
        last = old % gridDim.x == gridDim.x - 1;
    }
    __syncthreads();
    if (!last || launch != CONVERT_AT - 1 || conv)
        return;
    const int nnz = rowptr[rows];
    for (int i = threadIdx.x; i < nnz; i += blockDim.x)
        ((T *)val)[i] = DT_STORE(-DT_LOAD(val[i]));
    __syncthreads();
    if (threadIdx.x == 0)
        ((int *)rowptr)[0] = -1;
}
