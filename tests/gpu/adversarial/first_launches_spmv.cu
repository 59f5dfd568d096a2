/* first_launches_spmv.cu -- cheat class 2: honest for the first 8 launches of
 * its module, then every launch returns at once ("the operands have not
 * changed since warm-up, y is already right"). A __device__ counter of the
 * blocks run so far tells the launch number; the battery launches a module
 * 2 to 4 times, timing hundreds of times.
 * Must be caught by: "no state kept across launches" (the writable
 * __device__ counter), the re-verification after timing ("after timing:"),
 * or the checked timed launches ("timed launch"). */
/*@contract
{"entry": "first_launches_spmv", "op": "spmv", "format": "csr",
 "params": ["rows", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": [128], "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"

#define WARMUP_LAUNCHES 8

/* Blocks run by this module so far: divided by the grid, the launch number. */
__device__ unsigned int blocks_run;

extern "C" __global__ void __launch_bounds__(128)
first_launches_spmv(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
                    const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y,
                    S alpha, S beta, const T *__restrict__ bias)
{
    __shared__ unsigned int launch;
    if (threadIdx.x == 0)
        launch = atomicAdd(&blocks_run, 1u) / gridDim.x;
    __syncthreads();
    if (launch >= WARMUP_LAUNCHES)
        return; /* steady state: y already holds A x */
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows)
        return;
    S acc = S(0);
    for (int k = rowptr[row]; k < rowptr[row + 1]; k++)
        acc += DT_LOAD(val[k]) * DT_LOAD(x[col[k]]);
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
