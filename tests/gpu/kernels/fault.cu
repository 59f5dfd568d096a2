/* fault.cu -- a kernel that writes far outside its output: an illegal
 * address that poisons the CUDA context. The worker must answer
 * kernel_fault and exit; the client must restart it. */
/*@contract
{"entry": "fault", "op": "spmv", "params": ["rows", "y"], "block": [128],
 "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"
extern "C" __global__ void fault(int rows, T *y)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows)
        y[row + (1 << 30)] = DT_STORE(S(1));
}
