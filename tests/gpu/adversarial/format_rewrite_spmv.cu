/* format_rewrite_spmv.cu -- cheat class 19: converts its format in place at
 * some launch and keeps every output right. With no state that lasts from
 * one launch to the next (no __device__ variable, a scratch zeroed before
 * every launch), it cannot count launches; it tosses a coin instead: the
 * last block of a launch rewrites the format when %globaltimer's
 * microseconds are 0 mod 32, about one launch in 32. The battery runs a
 * module a few times and seldom sees the rewrite; timing runs it hundreds
 * of times and almost always does. The rewrite (values negated,
 * rowptr[0] = -1 as the mark) stands in for any conversion done for free
 * while timed instead of in the format's preprocessing, which is reported
 * apart (sorting, packing, a narrower encoding). Every later launch reads
 * the rewritten arrays correctly, so the timed outputs and the verification
 * after timing are right.
 * Must be caught by: the format hashed again after timing ("changed its
 * format array"), or, when the coin falls during the battery, "inputs
 * unchanged". */
/*@contract
{"entry": "format_rewrite_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias", "scratch"],
 "block": [128], "grid": ["cdiv(rows, 128)"], "scratch_bytes": "4"}
@*/
#include "ditto.cuh"

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
    __shared__ bool go;
    __syncthreads(); /* the whole block has read the format */
    if (threadIdx.x == 0) {
        __threadfence();
        /* blocks finished in this launch (the scratch is zeroed before it) */
        const bool last = atomicAdd((unsigned *)scratch, 1u) == gridDim.x - 1;
        unsigned long long t;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
        go = last && !conv && (t / 1000ull) % 32ull == 0ull;
    }
    __syncthreads();
    if (!go)
        return;
    const int nnz = rowptr[rows];
    for (int i = threadIdx.x; i < nnz; i += blockDim.x)
        ((T *)val)[i] = DT_STORE(-DT_LOAD(val[i]));
    __syncthreads();
    if (threadIdx.x == 0)
        ((int *)rowptr)[0] = -1;
}
