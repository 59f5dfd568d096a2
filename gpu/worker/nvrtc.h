/* nvrtc.h -- the worker's run-time compiler: NVRTC loaded with dlopen, CUBINs,
 * diagnostics and the ptxas resource report, and the compile cache.
 *
 * Internal to gpu/ (the worker). Prefix gpu_. Works with no GPU and no
 * libcuda: only libnvrtc (and its builtins library) must be loadable.
 *
 * Ownership: gpu_nvrtc_load returns a handle freed by gpu_nvrtc_free;
 * gpu_compile returns a gpu_cubin the caller frees with gpu_cubin_free
 * (the cache keeps its own copy). */
#ifndef DITTO_GPU_NVRTC_H
#define DITTO_GPU_NVRTC_H

#include <stddef.h>

#include "core/core.h"

typedef struct gpu_nvrtc gpu_nvrtc;

/* Load NVRTC. Tried in order: $DITTO_NVRTC (a path), $CUDA_HOME/lib64/
 * libnvrtc.so, /usr/local/cuda/lib64/libnvrtc.so, then the loader's search
 * for libnvrtc.so.13, libnvrtc.so.12, libnvrtc.so. On failure returns NULL
 * and e holds every path tried with dlerror's text. */
gpu_nvrtc *gpu_nvrtc_load(dt_err *e);
/* The same, trying exactly these candidates in order (a path, or a bare
 * name for the loader's search). A candidate counts only when every NVRTC
 * entry point resolves and libnvrtc-builtins.so.MAJOR.MINOR can be pinned:
 * from the folder of the loaded file first (NVRTC itself looks for it only
 * on the loader's path, so a library loaded by absolute path outside that
 * path would fail every compile), else through the loader's search. On
 * failure returns NULL and e lists each candidate with its reason. */
gpu_nvrtc *gpu_nvrtc_load_paths(const char *const *paths, int npaths, dt_err *e);
void gpu_nvrtc_free(gpu_nvrtc *nv); /* NULL is a no-op */
/* The file that was loaded (borrowed; never NULL for a loaded handle). */
const char *gpu_nvrtc_path(const gpu_nvrtc *nv);
/* The builtins library that was pinned (borrowed). */
const char *gpu_nvrtc_builtins_path(const gpu_nvrtc *nv);
/* "13.0" */
const char *gpu_nvrtc_version(const gpu_nvrtc *nv);

/* One compiler message. */
typedef struct gpu_diag {
    char *file;        /* as given to NVRTC (the request's name), or an
                          included file's; NULL when the message names no
                          file (option errors, ptxas, "At end of source") */
    int line;          /* 1-based; 0 when the message has no line */
    int column;        /* 1-based from the caret line; 0 when unknown */
    char severity[16]; /* "error", "warning", "remark", "note", "fatal" */
    char code[32];     /* "20", "177-D", "" when none */
    char *message;
    char *source_line; /* the offending source line, or NULL */
} gpu_diag;

/* ptxas resource usage of one kernel. */
typedef struct gpu_kinfo {
    char *name;        /* mangled (as ptxas prints it) */
    int registers;
    int smem;          /* static shared memory bytes */
    int cmem;          /* constant bank 0 bytes */
    int stack;         /* stack frame bytes */
    int spill_stores;  /* bytes */
    int spill_loads;   /* bytes */
    int barriers;
} gpu_kinfo;

typedef struct gpu_compile_req {
    const char *source;
    const char *name;           /* file name for messages; default "kernel.cu" */
    const char *const *options; /* caller's NVRTC options */
    int noptions;
    const char *arch;           /* "sm_90" */
    const char *const *names;   /* name expressions to lower, e.g. "spmv<4>" */
    int nnames;
} gpu_compile_req;

typedef struct gpu_cubin {
    int compiled;       /* 1 when a CUBIN was produced */
    void *image;        /* the CUBIN (NULL when not compiled) */
    size_t size;
    gpu_diag *diags;
    int ndiags;
    gpu_kinfo *kinfo;
    int nkinfo;
    char **lowered;     /* nnames lowered names (NULL entries when missing) */
    char **names;       /* the request's name expressions, nlowered of them */
    int nlowered;
    char *arch;         /* the architecture compiled for, "sm_90" */
    char nvrtc_version[16]; /* "13.0" */
    char *log;          /* the raw program log */
    char hash[17];      /* cache key */
    int cached;         /* 1 when served from the memory or disk cache */
    double seconds;     /* compile time (0 for a cache hit) */
} gpu_cubin;

/* Compile (or fetch from the cache). Returns 0 when NVRTC ran, whether or
 * not the source compiled (see out->compiled and out->diags); -1 when NVRTC
 * itself failed (out of memory, invalid option list, crash of the library):
 * e says what, and *out is NULL.
 *
 * A source that does not compile always carries at least one diagnostic of
 * severity "error" or "fatal": an unknown option gives one without a line,
 * a virtual architecture (compute_XX, which yields PTX only) gives "arch
 * must be a real sm_XX", and a failure NVRTC leaves out of its log (static
 * shared memory over 48 KB is one) gives a message saying so. A NULL source,
 * option or name expression, or a negative count, is misuse: -1. */
int gpu_compile(gpu_nvrtc *nv, const gpu_compile_req *req, gpu_cubin **out, dt_err *e);
void gpu_cubin_free(gpu_cubin *c); /* NULL is a no-op */
/* The protocol's compile answer fields (everything but the cubin handle):
 * compiled, cached, seconds, nvrtc_version, arch, diagnostics (line, column,
 * file, code and source_line are null when unknown), kernels (name is the
 * name expression when one lowered to this kernel, with "lowered" the
 * mangled name; otherwise the name ptxas printed and no "lowered"), log.
 * Never fails (aborts on out-of-memory). */
cJSON *gpu_cubin_json(const gpu_cubin *c);

/* Pure parsers, exposed for tests. gpu_parse_log appends to the arrays
 * (callers start with NULL / 0) every diagnostic and every ptxas resource
 * block found in an NVRTC program log; source is used to fill source_line
 * and may be NULL (the log's echo of the line is used then). Lines it does
 * not recognise are skipped, so it can't fail. Free the arrays with
 * gpu_diags_free / gpu_kinfo_free. */
void gpu_parse_log(const char *log, const char *source, gpu_diag **diags, int *ndiags,
                   gpu_kinfo **kinfo, int *nkinfo);
void gpu_diags_free(gpu_diag *d, int n);
void gpu_kinfo_free(gpu_kinfo *k, int n);

/* The compile cache: memory (LRU, bounded) in front of
 * $XDG_CACHE_HOME/ditto/cubin/HASH.cubin + HASH.json. The key is
 * hash(source, file name, options, arch, name expressions, NVRTC version).
 * Only compiled results go to disk; failures stay in memory. Disk errors
 * are logged and ignored: the cache only ever saves work. */
/* Override the folder that holds HASH.cubin + HASH.json directly (tests use
 * a temporary one); NULL restores the default. Copies dir. */
void gpu_cache_set_dir(const char *dir);
/* Drop every memory entry (the disk cache stays). Can't fail. */
void gpu_cache_clear_memory(void);
/* The folder of the disk entries (caller frees), or NULL without a home.
 * Its size is capped (gpu/cubincache.h); entries may arrive from other
 * hosts through the client (gpu/PROTOCOL.md, "Sharing compiled kernels"). */
char *gpu_cache_disk_dir(void);
#endif /* DITTO_GPU_NVRTC_H */
