/* worker.h -- internals of `ditto worker`: its state (matrices, compiled
 * kernels), and the runner that prepares a kernel on a matrix, feeds it input
 * sets, checks it against the fp64 reference (the verification battery) and
 * times it next to cuSPARSE.
 *
 * Internal to gpu/. Prefix wk_. Handlers answer with a cJSON object they
 * fill (success fields) or return -1 with e->code set to a WK_* error and
 * the message in e->msg. */
#ifndef DITTO_GPU_WORKER_H
#define DITTO_GPU_WORKER_H

#include "gpu/worker/baseline.h"
#include "gpu/contract.h"
#include "gpu/worker/dev.h"
#include "gpu/worker/nvrtc.h"
#include "sparse/sparse.h"

/* Error codes carried in dt_err.code, mapped to the protocol's names. */
enum {
    WK_EBAD = 100,    /* bad_request */
    WK_ENOTFOUND,     /* not_found */
    WK_ELOAD,         /* load_failed */
    WK_ECOMPILE,      /* compile_failed */
    WK_ENODEV,        /* no_device */
    WK_EUNAVAIL,      /* unavailable */
    WK_ECONTRACT,     /* contract */
    WK_ELAUNCH,       /* launch_failed */
    WK_EFAULT,        /* kernel_fault */
    WK_ECUDA,         /* cuda_error */
    WK_ENOMEM,        /* out_of_memory */
    WK_ESUSPECT,      /* suspect */
    WK_EINTERNAL,     /* internal */
};

const char *wk_error_name(int code);
/* Map a dev_* error code into the WK_* space (other codes pass through). */
int wk_from_dev(int code);

#define WK_MAX_FMTS 8

typedef struct wk_matrix {
    char *handle;
    char *source;
    sp_csr *a;
    sp_report report;
    char fingerprint[17];
    double load_seconds;
    /* Device copies, least recently used first. Each lives on the heap so
     * that a pointer handed out stays valid while others come and go. */
    dev_fmt *fmts[WK_MAX_FMTS];
    int nfmts;
    double *rounded[4];        /* values as the device sees them, per dtype */
    /* measure's observed input sets with their references (measure.c), kept
     * for the next measure of the same problem (obs_key); freed with
     * obs_free. */
    void *obs_sets;
    char obs_key[192];
    void (*obs_free)(void *);
    struct wk_matrix *next;
} wk_matrix;

typedef struct wk_state {
    dev_info dev;
    gpu_nvrtc *nvrtc;
    char nvrtc_error[1024];
    int nvrtc_tried;
    wk_matrix *matrices;
    gpu_cubin **cubins; /* compile request results by handle "c<N>" */
    int ncubins;
    char exe[4096];     /* this binary, for sanitize's child */
    const char *arch;   /* compile target override ("sm_80"); NULL: the device's */
    struct ship_worker *ship; /* a file being received (gpu/ship.c), NULL */
} wk_state;

/* NVRTC, loaded on first use. NULL with e set (WK_ECOMPILE) when missing. */
gpu_nvrtc *wk_nvrtc(wk_state *w, dt_err *e);
wk_matrix *wk_matrix_find(wk_state *w, const char *handle);

/* The problem a kernel computes. */
typedef struct wk_problem {
    sp_op op;
    sp_dtype dtype;
    int32_t n;          /* SpMM N or SDDMM K */
    double alpha, beta;
    sp_epilogue epilogue;
    uint64_t seed;
} wk_problem;

/* Parse op, dtype, n, alpha, beta, epilogue, seed from a request. */
int wk_problem_parse(const cJSON *req, wk_problem *p, dt_err *e);

/* A kernel as requests carry it. */
typedef struct wk_kernel {
    char *source;
    char *name;
    char *options[64];
    int noptions;
    gpu_contract contract;
    cJSON *params; /* template parameters NAME -> integer: -DNAME=V and
                      contract variables; from the request's kernel.params,
                      else the defaults of the source's manifest block */
} wk_kernel;

int wk_kernel_parse(const cJSON *req, wk_kernel *k, dt_err *e);
/* The variables a kernel's formulas see on a matrix: the format's, n, k and
 * the template parameters. Names borrow from k and fvars. */
void wk_kernel_vars(const wk_kernel *k, const gpu_vars *fvars, const wk_problem *p, gpu_vars *out);
void wk_kernel_clear(wk_kernel *k);
/* The contract's format_params with string values evaluated over the
 * kernel's parameters (e.g. "sigma": "SIGMA"); a new object, NULL when the
 * contract has none or (e set) an expression fails. */
cJSON *wk_format_params(const wk_kernel *k, dt_err *e);

/* Compile a kernel as it would run on a matrix whose format variables are
 * fvars (dtype and epilogue macros, the contract's defines evaluated on
 * them). Works without a device. 0 when NVRTC ran (see (*out)->compiled). */
/* Preconditions of a contract's `requires` on a matrix: NULL when they
 * hold, else the reason (a static buffer). A precondition is a number or
 * an expression over the kernel's parameters (params, may be NULL), such
 * as seg16's "max_row": "BLOCK * U * 8". */
const char *wk_requires_violated(const gpu_contract *c, const cJSON *params, const sp_csr *a);

int wk_compile_for(wk_state *w, const gpu_vars *fvars, const wk_kernel *kn, const wk_problem *p,
                   gpu_cubin **out, dt_err *e);

/* Handlers (verify.c, measure.c, baseline.c, runner.c, calib.c). Each fills
 * `out` with the success fields. */
int wk_verify(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);
int wk_measure(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);
int wk_baseline(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);
int wk_metrics(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);
int wk_reference(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);
int wk_calibrate(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);
int wk_sanitize(wk_state *w, const cJSON *req, cJSON *out, dt_err *e);

/* Paired timings of L2-resident problems are repeated over this many
 * operand placements (see wk_baseline_into). */
#define WK_PLACEMENTS 7
/* Bytes of NaN guard before and after each operand buffer of a kernel
 * under verification (a multiple of 256: the buffers stay aligned). */
#define WK_GUARD 512
/* Moves a candidate's dense operands (of op) to new device addresses. */
typedef int (*wk_place_fn)(void *ud, int op, dt_err *e);

/* Time every applicable cuSPARSE algorithm on m (set-0 inputs) with the
 * given comparison method ("cold" or "graph"), check each one's output
 * against the reference, and fill out with algs, best and us. With cand
 * (a candidate's launch on cand_ud), the candidate and the best algorithm
 * are then timed again in alternating rounds (dev_time_pair): for graph
 * timing over WK_PLACEMENTS placements of both sides' dense operands
 * (place moves the candidate's; cuSPARSE is set up afresh each time), for
 * cold timing once. out gets "paired": {placements, placement_speedups,
 * rounds, candidate_us, baseline_us, speedup (median over placements of
 * each one's median per-round ratio), speedup_p10, speedup_p90}. */
int wk_baseline_into(wk_matrix *m, const wk_problem *p, sp_layout layout, int min_runs,
                     double min_s, const char *method, int fast, dev_enqueue_fn cand,
                     wk_place_fn place, void *cand_ud, const dev_observer *cand_obs, cJSON *out,
                     dt_err *e);

/* Copy bandwidth (GB/s, read + write) for the physical-floor check: the
 * calibrated value of the hardware spec when there is one, else the
 * datasheet's; 0 when unknown (no floor check). Set by worker.c. */
extern double wk_copy_gbps;
extern int wk_copy_measured; /* 1: wk_copy_gbps was measured (calibration), 0: the datasheet's */
/* The copy bandwidth for a device from its hardware spec (measured when
 * calibrated, else the datasheet), GB/s; 0 when no spec matches. */
double gpu_copy_gbps_for(const dev_info *d, int *measured);

/* Parse compute-sanitizer output into findings (exposed for tests). */
cJSON *wk_parse_sanitizer(const char *text, int *errors);

/* Edge matrices of the battery, by index 0..WK_NEDGE-1; NULL past the end.
 * name receives a short description. wk_edge_matrix is seed 0: the classic
 * sizes (257, 300, 1, 1237 rows; the rows of 64 to 4096 entries 128 rows);
 * another seed moves every size and draw, so that no kernel can recognise
 * the edge matrices by their shapes (verify passes its seed). */
#define WK_NEDGE 5
sp_csr *wk_edge_matrix(int i, const char **name, dt_err *e);
sp_csr *wk_edge_matrix_seeded(int i, uint64_t seed, const char **name, dt_err *e);

#endif /* DITTO_GPU_WORKER_H */
