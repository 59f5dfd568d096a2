/* dev.h -- the worker's device layer: one device and context, buffers,
 * matrices uploaded per dtype and format, kernel modules, launches bound to
 * a launch contract, and the timing harness shared by candidate kernels and
 * cuSPARSE (so both are measured the same way).
 *
 * Internal to gpu/. Prefix dev_. Every function that can fail returns 0 or
 * -1 with the reason in a dt_err whose code is one of the DEV_E* values, so
 * the request layer can map it to a protocol error; a DEV_EFAULT leaves the
 * context poisoned and the worker must exit after answering. */
#ifndef DITTO_GPU_DEV_H
#define DITTO_GPU_DEV_H

#include "gpu/contract.h"
#include "gpu/worker/cudaw.h"
#include "sparse/sparse.h"

enum {
    DEV_ENODEV = 10, /* no device / driver */
    DEV_EFAULT,      /* sticky kernel fault: context poisoned */
    DEV_ECUDA,       /* other CUDA error */
    DEV_ENOMEM,      /* device or host memory */
    DEV_ELAUNCH,     /* launch refused (resources, bad grid) */
    DEV_ECONTRACT,   /* contract does not bind */
};

typedef struct dev_info {
    int present;
    int index;
    char name[256];
    int cc_major, cc_minor;
    int sms;
    int l2_bytes;
    size_t mem_bytes;
    int smem_per_sm, smem_per_block, smem_per_block_optin;
    int regs_per_sm, max_threads_per_sm, max_blocks_per_sm;
    int clock_mhz, mem_clock_mhz, bus_width;
    int driver_version;
    char reason[512]; /* why not present */
} dev_info;

/* Open device index (loads libcuda first). Without a usable device info->
 * present is 0 and info->reason says why; this is not an error. */
void dev_open(int index, dev_info *info);
int dev_ready(void);
/* The stream every worker operation is queued on. */
CUstream dev_stream(void);
/* Set when a sticky fault happened; the worker exits after answering. */
int dev_poisoned(void);
/* Turn a CUresult into a dt_err with the right DEV_E* code; returns -1
 * (0 for CUDA_SUCCESS). what names the operation. */
int dev_check(CUresult r, const char *what, dt_err *e);

/* ---- buffers ---- */
typedef struct dev_buf {
    CUdeviceptr ptr;
    size_t bytes;
} dev_buf;

/* An allocation is rounded up to whole pages of DEV_SLACK_PAGE bytes (and at
 * least DEV_SLACK_MIN past the end); the rest, its slack, holds a fixed
 * pattern (dev.c). b->bytes stays the size asked for. */
#define DEV_SLACK_PAGE ((size_t)2 << 20)
#define DEV_SLACK_MIN  ((size_t)256)
#define DEV_SLACK_WORD 0x7FC17FC1u
#define DEV_SLACK_BYTE 0xC1
int dev_alloc(dev_buf *b, size_t bytes, dt_err *e);
/* Is the slack after b's bytes (b as dev_alloc returned it) as dev_alloc
 * filled it? 0 yes, 1 no (*off: the first changed byte's offset past the
 * end of b), -1 when it could not be read back. */
int dev_slack_changed(const dev_buf *b, size_t *off, dt_err *e);
void dev_free(dev_buf *b);
int dev_upload(dev_buf *b, const void *host, size_t bytes, dt_err *e); /* alloc + copy */
/* Host to device on the worker's stream, complete on return. Every upload
 * goes through here, never through a legacy-stream copy (see dev.c). */
int dev_copy_in(CUdeviceptr dst, const void *host, size_t bytes, dt_err *e);
int dev_download(void *host, const dev_buf *b, size_t bytes, dt_err *e);
/* Every byte of b set to 0 on the worker's stream, complete on return. */
int dev_zero(const dev_buf *b, dt_err *e);

/* ---- a matrix prepared for a format on the device ---- */
#define DEV_MAX_ARRS SP_FMT_MAX_ARRS
typedef struct dev_fmt {
    char key[128]; /* format + params + dtype */
    char *names[DEV_MAX_ARRS];
    dev_buf arr[DEV_MAX_ARRS];
    int narr;
    gpu_vars vars;               /* sizes and format variables (names are static) */
    double prep_us;              /* host conversion time */
    int on_device;               /* 0: variables only (built with upload = 0) */
    uint64_t hash[DEV_MAX_ARRS]; /* of the host copy, for the unchanged check */
} dev_fmt;

/* Build the layout a contract asks for on the host (sp_fmt_build, every
 * format sparse/layout.c knows) and upload its arrays. With upload = 0 only
 * the variables are kept (no device needed): what compiling a kernel for a
 * matrix needs. The variables are the layout's plus sms. */
int dev_fmt_build(const sp_csr *a, const char *format, const cJSON *params, sp_dtype t, int upload,
                  dev_fmt *f, dt_err *e);
void dev_fmt_free(dev_fmt *f);
int dev_fmt_find(const dev_fmt *f, const char *name, dev_buf *out);
/* The hash dev_fmt keeps of each uploaded array (n bytes at p; the same
 * value whatever the thread count). */
uint64_t dev_hash(const void *p, size_t n);
/* Re-hash every array from the device and compare with the upload: *which
 * gets the name of the first array that changed, or NULL. Returns -1 when
 * the arrays could not be read back. */
int dev_fmt_changed(const dev_fmt *f, const char **which, dt_err *e);

/* ---- modules and launches ---- */
typedef struct dev_kernel {
    CUmodule mod;
    CUfunction fn;
    int block[3], grid[3];
    int smem; /* dynamic */
    size_t scratch_bytes;
    int regs, static_smem, local_bytes, max_threads;
} dev_kernel;

/* Load a CUBIN, find entry, evaluate the contract's formulas with vars,
 * check block and shared-memory limits (raising the dynamic smem limit
 * above 48 KB when the device allows it). */
int dev_kernel_load(const void *cubin, const char *entry, const gpu_contract *c,
                    const gpu_vars *vars, dev_kernel *k, dt_err *e);
void dev_kernel_unload(dev_kernel *k);

/* The buffers and scalars a launch binds by name. */
typedef struct dev_bind {
    const dev_fmt *fmt;
    const char *names[12];
    CUdeviceptr ptrs[12];
    int n;
    double alpha, beta; /* passed as S (float unless fp64) */
    sp_dtype dtype;
    dev_buf scratch;
} dev_bind;

void dev_bind_ptr(dev_bind *b, const char *name, CUdeviceptr p);
/* Enqueue one launch, after the scratch memset when the kernel has scratch and its
 * contract's scratch_init is "launch" (with "once" the scratch was zeroed when allocated
 * and the kernel leaves it zeroed). */
int dev_launch(const dev_kernel *k, const gpu_contract *c, const dev_bind *b, CUstream s,
               dt_err *e);
/* Wait for the stream; faults become DEV_EFAULT. */
int dev_sync(dt_err *e);

/* ---- timing ---- */
typedef int (*dev_enqueue_fn)(void *ud, CUstream s, dt_err *e);

typedef struct dev_stats {
    int valid;
    double median_us, min_us, max_us, p10_us, p90_us;
    int runs;
} dev_stats;

typedef enum { DEV_TIME_COLD, DEV_TIME_WARM, DEV_TIME_GRAPH } dev_time_mode;

/* Time fn with CUDA events around the enqueued work only: cold (L2 flushed
 * before every run), warm, or graph (50 captured launches replayed, per
 * launch). At least min_runs runs and at least min_seconds of measured time,
 * at most max_seconds of wall time. Warm-up runs are not counted. */
int dev_time(dev_enqueue_fn fn, void *ud, dev_time_mode mode, int min_runs, double min_seconds,
             double max_seconds, dev_stats *out, dt_err *e);

/* What makes timed launches observable (gpu/PROTOCOL.md, measure): hooks
 * the timing harness calls around each sample of one side, none of them
 * inside the timing events.
 * - prep: enqueued on s before the sample's L2 flush and first event (and
 *   before the warm-up): rotate the inputs, re-seed or re-poison the
 *   output. sample counts the side's samples from 0; the warm-up is
 *   DEV_SAMPLE_WARMUP.
 * - refill (graph mode): enqueued before every captured launch, so no
 *   launch of a replay sees the output its predecessor left. A graph of
 *   the refills alone is replayed beside every sample and its time
 *   subtracted, for both sides of a comparison alike.
 * - after: on the host once the sample has finished (the output holds
 *   what the sample's last launch wrote): check it. Non-zero ends the
 *   timing with e set.
 * Any hook may be NULL. */
#define DEV_SAMPLE_WARMUP 0xffffffffu
typedef struct dev_observer {
    int (*prep)(void *ud, CUstream s, unsigned sample, dt_err *e);
    int (*refill)(void *ud, CUstream s, dt_err *e);
    int (*after)(void *ud, unsigned sample, dt_err *e);
    void *ud;
} dev_observer;
/* dev_time with an observer (NULL: none). */
int dev_time_obs(dev_enqueue_fn fn, void *ud, const dev_observer *obs, dev_time_mode mode,
                 int min_runs, double min_seconds, double max_seconds, dev_stats *out, dt_err *e);
/* Time fa and fb in alternating rounds (one sample of each per round, the
 * order swapped every round) with the same mode, so that clock, thermal and
 * neighbour drift reaches both sides alike. ratio holds the per-round
 * quotients b / a (a speedup when a is the candidate and b the baseline);
 * its median is the paired comparison. At least min_rounds rounds and
 * min_seconds of measured time (both sides), at most max_seconds wall. */
typedef struct dev_pair_stats {
    int valid, rounds;
    dev_stats a, b, ratio; /* ratio's "_us" fields hold plain quotients */
} dev_pair_stats;
int dev_time_pair(dev_enqueue_fn fa, void *ua, dev_enqueue_fn fb, void *ub, dev_time_mode mode,
                  int min_rounds, double min_seconds, double max_seconds, dev_pair_stats *out,
                  dt_err *e);
/* dev_time_pair with an observer per side (NULL: none). */
int dev_time_pair_obs(dev_enqueue_fn fa, void *ua, const dev_observer *oa, dev_enqueue_fn fb,
                      void *ub, const dev_observer *ob, dev_time_mode mode, int min_rounds,
                      double min_seconds, double max_seconds, dev_pair_stats *out, dt_err *e);
cJSON *dev_stats_json(const dev_stats *s);

#endif /* DITTO_GPU_DEV_H */
