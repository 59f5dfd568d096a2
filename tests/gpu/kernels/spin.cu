/* spin.cu -- a kernel that never ends: it waits for rowptr[0] to become -1,
 * which never happens. Only the client's deadline (SIGKILL) stops it. */
/*@contract
{"entry": "spin", "op": "spmv", "params": ["rows", "rowptr", "y"], "block": [32], "grid": [1]}
@*/
#include "ditto.cuh"
extern "C" __global__ void spin(int rows, const int *rowptr, T *y)
{
    while (*(volatile const int *)&rowptr[0] != -1)
        __nanosleep(1000);
    if (threadIdx.x < rows)
        y[threadIdx.x] = DT_STORE(S(0));
}
