/* cudaw.c -- the CUDA driver API table: dlopen, dlsym and error texts. */
#include "gpu/worker/cudaw.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

gpu_cu gpu_cuda;

/* Stringify after macro expansion: the symbol for cuMemAlloc is
 * "cuMemAlloc_v2". */
#define GPU_STR2(x) #x
#define GPU_STR(x) GPU_STR2(x)

int gpu_cuda_loaded(void)
{
    return gpu_cuda.lib != NULL;
}

int gpu_cuda_load(dt_err *e)
{
    if (gpu_cuda.lib != NULL)
        return 0;
    const char *path = getenv("DITTO_LIBCUDA");
    if (path == NULL || *path == '\0')
        path = "libcuda.so.1";
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        const char *why = dlerror();
        return dt_err_set(e, "%s", why ? why : "dlopen failed");
    }
    gpu_cu t;
    memset(&t, 0, sizeof t);
#define GPU_CU_RESOLVE(name)                                                                     \
    t.name = (__typeof__(name) *)dlsym(lib, GPU_STR(name));                                      \
    if (t.name == NULL) {                                                                        \
        dlclose(lib);                                                                            \
        return dt_err_set(e, "%s: missing symbol %s (driver older than the CUDA %d.%d headers "  \
                             "ditto was built with?)",                                           \
                          path, GPU_STR(name), CUDA_VERSION / 1000, CUDA_VERSION % 1000 / 10);   \
    }
    GPU_CU_FUNCS(GPU_CU_RESOLVE)
#undef GPU_CU_RESOLVE
    t.lib = lib;
    gpu_cuda = t;
    return 0;
}

const char *gpu_cu_errstr(CUresult r, char *buf, size_t len)
{
    const char *name = NULL, *text = NULL;
    if (gpu_cuda.lib) {
        CU(cuGetErrorName)(r, &name);
        CU(cuGetErrorString)(r, &text);
    }
    snprintf(buf, len, "%s: %s", name ? name : "CUDA error", text ? text : "unknown");
    if (name == NULL)
        snprintf(buf, len, "CUDA error %d", (int)r);
    return buf;
}

int gpu_cu_fatal(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return 1;
    default:
        return 0;
    }
}

const char *gpu_cu_fault_text(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
        return "illegal address";
    case CUDA_ERROR_MISALIGNED_ADDRESS:
        return "misaligned address";
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
        return "illegal instruction";
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
        return "invalid address space";
    case CUDA_ERROR_INVALID_PC:
        return "invalid program counter";
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
        return "hardware stack error";
    case CUDA_ERROR_ASSERT:
        return "device-side assert";
    case CUDA_ERROR_LAUNCH_TIMEOUT:
        return "launch timeout";
    case CUDA_ERROR_ECC_UNCORRECTABLE:
        return "uncorrectable ECC error";
    default:
        return "launch failed";
    }
}
