/* baseline.h -- cuSPARSE (loaded with dlopen) as the baseline every candidate
 * is measured against, and CUPTI range-profiler metrics (the one C++ file,
 * cupti_shim.cpp, holds the host-API part).
 *
 * Internal to gpu/. Prefix gpu_. cuSPARSE and CUPTI are optional: when they
 * do not load, the functions answer with a reason and nothing else fails. */
#ifndef DITTO_GPU_BASELINE_H
#define DITTO_GPU_BASELINE_H

#include "gpu/worker/dev.h"

/* ---- cuSPARSE ----------------------------------------------------------- */

/* dlopen libcusparse (tried: $DITTO_LIBCUSPARSE, $CUDA_HOME/lib64/
 * libcusparse.so.12, /usr/local/cuda/lib64/libcusparse.so.12, then the
 * loader's libcusparse.so.12 and libcusparse.so). Idempotent. */
int gpu_cusparse_load(dt_err *e);
int gpu_cusparse_loaded(void);
const char *gpu_cusparse_path(void);
/* cusparseGetProperty major.minor.patch, "" when not loaded. */
const char *gpu_cusparse_version(void);

/* One baseline problem, on buffers the caller owns. The CSR arrays are the
 * caller's "csr" format (rowptr, col, val in dtype); dense operands are in
 * dtype. SpMM uses B (cols x n) and C (rows x n) in `layout`; SDDMM uses A
 * (rows x k) and Bt (cols x k) row-major and writes one value per nonzero
 * to out (initialised by the caller to the matrix values when beta != 0). */
typedef struct gpu_cs_problem {
    sp_op op;
    sp_dtype dtype;
    int32_t n;          /* SpMM columns of B, or SDDMM K */
    sp_layout layout;   /* SpMM */
    const sp_csr *host; /* for COO / SELL conversions */
    const dev_fmt *csr; /* device CSR */
    CUdeviceptr x, y;   /* SpMV */
    CUdeviceptr B, C;   /* SpMM */
    CUdeviceptr A, Bt, out; /* SDDMM */
    double alpha, beta;
} gpu_cs_problem;

typedef struct gpu_cs_result {
    char alg[32];
    int ok;             /* ran (set up, computed, timed) */
    char error[256];    /* why not, when !ok */
    size_t buffer_bytes;
    double setup_us;    /* host conversion for COO / SELL + uploads + descriptors + workspace */
    double preprocess_us; /* cusparse*_preprocess, 0 when the alg has none */
    dev_stats cold, warm, graph;
    char note[256];     /* why a requested mode has no stats although ok (cuSPARSE refused
                           graph capture), "" otherwise */
} gpu_cs_result;

/* The algorithms that apply to op and dtype, in a fixed order ("CSR_ALG1",
 * "CSR_ALG2", "COO_ALG1", ...). Returns how many were written (<= max). Left out:
 * SpMM CSR_ALG1/ALG2 for fp16/bf16 (cuSPARSE runs mixed precision with CSR_ALG3
 * whatever is asked) and SDDMM for bf16 (CSR takes no bf16); gpu_cusparse_run says
 * so when asked for them. */
int gpu_cusparse_algs(sp_op op, sp_dtype t, const char **names, int max);
/* Set up alg, run its preprocessing (timed), run it once (the output is left
 * in y / C / out for the caller to verify), then time it in each mode of
 * modes (a bit mask of 1 << DEV_TIME_*), with the same dev_time harness as
 * candidates. Returns 0 when the run happened (r->ok), -1 with e set when
 * it could not (unsupported combination, cuSPARSE error); a DEV_EFAULT in e
 * means the context is gone. */
int gpu_cusparse_run(const gpu_cs_problem *p, const char *alg, unsigned modes, int min_runs,
                     double min_seconds, gpu_cs_result *r, dt_err *e);
/* Set up alg as gpu_cusparse_run does, then time the candidate (cand, as
 * side a) and alg (side b) in alternating rounds with dev_time_pair:
 * ps->ratio is the per-round speedup of the candidate. cand_obs (or NULL)
 * observes the candidate's samples; cuSPARSE's output is put back before each
 * of its samples and, in graph mode, before each captured call, as a
 * candidate's refill does. The output buffer is left as the caller gave it. */
int gpu_cusparse_pair(const gpu_cs_problem *p, const char *alg, dev_time_mode mode,
                      dev_enqueue_fn cand, void *cand_ud, const dev_observer *cand_obs,
                      int min_rounds, double min_seconds, dev_pair_stats *ps, dt_err *e);

/* ---- CUPTI range profiler ------------------------------------------------ */

/* Load CUPTI and check the device can be profiled. 0 when metrics can be
 * taken; otherwise -1 and why (the library, the chip, the permission:
 * CUPTI_ERROR_INSUFFICIENT_PRIVILEGES, a virtualized device...). */
int gpu_cupti_probe(char *why, size_t whylen);
/* Collect metrics for the work fn enqueues (one kernel launch, or a few),
 * AutoRange + KernelReplay, summed over the ranges. values[i] gets metric
 * i; NaN when the metric could not be evaluated (a name CUPTI does not know
 * for the chip is skipped, the others are still collected). Returns 0, or -1
 * with why. Never poisons the context on its own; a fault of the work itself
 * does, and dev_poisoned() then says so. */
int gpu_cupti_collect(const char *const *metrics, int nmetrics, dev_enqueue_fn fn, void *ud,
                      double *values, char *why, size_t whylen);

#endif /* DITTO_GPU_BASELINE_H */
