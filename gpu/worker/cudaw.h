/* cudaw.h -- the CUDA driver API loaded at run time (dlopen of libcuda.so.1)
 * into a function table, so that ditto runs, profiles and compiles on a
 * machine with no GPU driver at all.
 *
 * Internal to gpu/ (the worker). The table's fields are declared with the
 * header's own prototypes (__typeof__), and cuda.h's version macros
 * (cuMemAlloc -> cuMemAlloc_v2) apply to the field names and to the symbol
 * looked up alike, so a call reads like the plain API: CU(cuMemAlloc)(...). */
#ifndef DITTO_GPU_CUDAW_H
#define DITTO_GPU_CUDAW_H

#include <cuda.h>

#include "core/core.h"

#define GPU_CU_FUNCS(X)                                                                          \
    X(cuInit)                                                                                    \
    X(cuDriverGetVersion)                                                                        \
    X(cuGetErrorName)                                                                            \
    X(cuGetErrorString)                                                                          \
    X(cuDeviceGetCount)                                                                          \
    X(cuDeviceGet)                                                                               \
    X(cuDeviceGetName)                                                                           \
    X(cuDeviceGetAttribute)                                                                      \
    X(cuDeviceTotalMem)                                                                          \
    X(cuDevicePrimaryCtxRetain)                                                                  \
    X(cuDevicePrimaryCtxRelease)                                                                 \
    X(cuCtxSetCurrent)                                                                           \
    X(cuCtxGetCurrent)                                                                           \
    X(cuCtxGetDevice)                                                                            \
    X(cuCtxSynchronize)                                                                          \
    X(cuMemGetInfo)                                                                              \
    X(cuModuleLoadData)                                                                          \
    X(cuModuleUnload)                                                                            \
    X(cuModuleGetFunction)                                                                       \
    X(cuFuncGetAttribute)                                                                        \
    X(cuFuncSetAttribute)                                                                        \
    X(cuLaunchKernel)                                                                            \
    X(cuMemAlloc)                                                                                \
    X(cuMemFree)                                                                                 \
    X(cuMemcpyHtoDAsync)                                                                         \
    X(cuMemcpyDtoH)                                                                              \
    X(cuMemcpyDtoDAsync)                                                                         \
    X(cuMemsetD8Async)                                                                           \
    X(cuMemsetD32Async)                                                                          \
    X(cuStreamCreate)                                                                            \
    X(cuStreamDestroy)                                                                           \
    X(cuStreamSynchronize)                                                                       \
    X(cuStreamIsCapturing)                                                                       \
    X(cuEventCreate)                                                                             \
    X(cuEventDestroy)                                                                            \
    X(cuEventRecord)                                                                             \
    X(cuEventSynchronize)                                                                        \
    X(cuEventElapsedTime)                                                                        \
    X(cuStreamBeginCapture)                                                                      \
    X(cuStreamEndCapture)                                                                        \
    X(cuGraphInstantiate)                                                                        \
    X(cuGraphLaunch)                                                                             \
    X(cuGraphExecDestroy)                                                                        \
    X(cuGraphDestroy)                                                                            \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor)                                               \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags)                                      \
    X(cuMemHostAlloc)                                                                            \
    X(cuMemHostGetDevicePointer)                                                                 \
    X(cuMemFreeHost)                                                                             \
    X(cuStreamWaitValue32)

typedef struct gpu_cu {
    void *lib;
#define GPU_CU_FIELD(name) __typeof__(name) *name;
    GPU_CU_FUNCS(GPU_CU_FIELD)
#undef GPU_CU_FIELD
} gpu_cu;

/* The process-wide table (the worker drives one device). */
extern gpu_cu gpu_cuda;
#define CU(fn) (gpu_cuda.fn)

/* dlopen libcuda.so.1 (or $DITTO_LIBCUDA) and resolve every function; on
 * failure every pointer stays NULL and e says which library or symbol was
 * missing. Idempotent. */
int gpu_cuda_load(dt_err *e);
int gpu_cuda_loaded(void);
/* "CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered" */
const char *gpu_cu_errstr(CUresult r, char *buf, size_t len);
/* 1 for the errors that leave the context unusable (sticky faults). */
int gpu_cu_fatal(CUresult r);
/* The protocol's short fault text for a sticky error ("illegal address"). */
const char *gpu_cu_fault_text(CUresult r);

#endif /* DITTO_GPU_CUDAW_H */
