/* fault.cu -- a kernel that writes through a pointer into unmapped memory:
 * an illegal address that poisons the CUDA context. The worker must answer
 * kernel_fault and exit; the client must restart it. (A huge offset from y
 * can land in the shared or local window instead and fault differently.) */
/*@contract
{"entry": "fault", "op": "spmv", "params": ["rows", "y"], "block": [128],
 "grid": ["cdiv(rows, 128)"]}
@*/
#include "ditto.cuh"
extern "C" __global__ void fault(int rows, T *y)
{
    int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row < rows) {
        T *bad = (T *)((unsigned long long)y ^ (1ull << 46)); /* a global address nothing maps */
        bad[row] = DT_STORE(S(1));
    }
}
