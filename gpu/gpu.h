/* gpu.h -- the GPU module's public face: `ditto worker` (everything CUDA, in
 * its own process) and the client that starts, feeds, watches and restarts
 * workers from ditto's event loop.
 *
 * Prefix gpu_. The client side loads no CUDA library: a kernel that faults
 * or hangs kills only a worker, and the pool answers the request with a
 * precise error ("kernel_fault: illegal address", "timeout after 10 s",
 * "worker exited: signal 9"), restarts the worker, reloads its matrices and
 * carries on with the queue. The protocol is gpu/PROTOCOL.md.
 *
 * Recovery: every matrix a successful load_matrix left on a worker (through
 * gpu_pool_load or a plain submit) is remembered until unloaded, and
 * replayed on a restarted worker before it takes any other request. A
 * request whose worker died under it (exited, or broke the protocol) is
 * sent once more to the fresh worker; its reply then carries "retried":
 * true. Replies are matched to requests by id: a line that is no JSON
 * object, a wrong or missing id, or a reply nobody asked for kills the
 * worker (error "protocol" when the retry fails too). Workers get
 * PR_SET_PDEATHSIG: they die with ditto however it ends.
 *
 * Scale-out: a retry goes to another worker when one is up (unless the
 * caller named the worker); a worker that keeps dying soon after its start
 * is restarted with a doubling delay; a worker that cannot see a matrix's
 * path (or any worker of an ssh/srun launcher) is sent the file's bytes,
 * content-addressed, once per worker (PROTOCOL.md, "Shipping files").
 * Replies carry "worker", the index of the worker that answered.
 *
 * Ownership: requests passed to the pool are taken (the pool frees them);
 * replies handed to callbacks are borrowed for the duration of the call;
 * gpu_pool_call returns a reply the caller frees with cJSON_Delete. */
#ifndef DITTO_GPU_H
#define DITTO_GPU_H

#include "core/core.h"
#include "gpu/contract.h"

#define GPU_PROTOCOL_VERSION 1

/* Bounds on what a request may carry (issue 37): a kernel source (the
 * templates are under 40 KB; a larger one is refused with a message, not
 * compiled into a reply of gigabytes), and one request line (the worker
 * answers an error and skips the rest of a longer line). */
#define GPU_MAX_SOURCE_BYTES ((size_t)1 << 20)
#define GPU_MAX_REQUEST_BYTES ((size_t)16 << 20)

/* `ditto worker [--device N] [--once]`: serve the protocol on stdin/stdout.
 * Returns the process exit status (3 after a kernel fault). */
int gpu_worker_main(int argc, char **argv);

typedef struct gpu_pool gpu_pool;

/* Where worker stderr lines go (each without its newline). */
typedef void gpu_log_fn(int worker, const char *line, void *ud);

typedef struct gpu_pool_opts {
    int workers;            /* how many (default 1) */
    /* Command line run by /bin/sh for each worker; {exe} is this binary,
     * {device} the worker's index. Default "{exe} worker --device {device}".
     * Anything that ends up speaking the protocol works, e.g.
     * "ssh gpu1 ditto worker --device {device}". */
    const char *launcher;
    double deadline_s;      /* default per-request deadline (default 300 s) */
    double start_deadline_s; /* for the hello after a start (default 30 s) */
    double max_deadline_s;  /* > 0: a cap on every request's deadline, even one a caller
                             * asked for (a person's --deadline); 0: none */
    /* Shipping matrix files to workers (PROTOCOL.md, "Shipping files"):
     * 0 (auto) when the launcher runs ssh or srun, or once a worker said
     * it cannot see a path; 1 always; -1 never. */
    int ship;
    /* Compiled kernels follow the same setting: shared between workers
     * when it is 1, or 0 and the workers run on more than one host (the
     * launcher or their hellos say so); the client keeps at most this many
     * bytes of them (0: 256 MiB). PROTOCOL.md, "Sharing compiled kernels". */
    int64_t cubin_store_bytes;
    gpu_log_fn *log;        /* default: stderr with a "worker N: " prefix */
    void *log_ud;
} gpu_pool_opts;

/* Start the workers (asynchronously: requests queue until each has said
 * hello). On error (the launcher cannot be run at all) returns NULL and e. */
gpu_pool *gpu_pool_new(dt_loop *loop, const gpu_pool_opts *o, dt_err *e);
/* Ask every worker to shut down, wait briefly, kill what remains. Pending
 * requests are answered with error "cancelled". NULL is a no-op. */
void gpu_pool_free(gpu_pool *p);

/* reply: the worker's response ({"id", "ok", ...}) or one the pool made
 * ({"ok": false, "error": "timeout" | "worker_exited" | "worker_start" |
 * "protocol" | "cancelled", "message": ...}). Borrowed. */
typedef void gpu_reply_fn(gpu_pool *p, const cJSON *reply, void *ud);

/* Queue req (taken; its "id" is replaced by the pool's) for the next free
 * worker, or for worker `worker` when >= 0. deadline_s <= 0 takes the
 * default. Returns the request id (> 0). */
long gpu_pool_submit(gpu_pool *p, cJSON *req, int worker, double deadline_s, gpu_reply_fn *fn,
                     void *ud);
/* Blocking: submit and run the loop until the reply arrives. */
cJSON *gpu_pool_call(gpu_pool *p, cJSON *req, double deadline_s);
/* Load a matrix on every worker under `handle` (req: a load_matrix request,
 * taken). Remembered: a restarted worker loads it again before taking other
 * work. Blocking; returns the first worker's reply (caller frees). */
cJSON *gpu_pool_load(gpu_pool *p, const char *handle, cJSON *req, double deadline_s);
/* Forget a matrix (unload it everywhere). */
void gpu_pool_unload(gpu_pool *p, const char *handle);

int gpu_pool_size(const gpu_pool *p);
/* The last hello reply of a worker, or NULL before it arrived. Borrowed. */
const cJSON *gpu_pool_hello(const gpu_pool *p, int worker);
/* Wait (running the loop) until every worker said hello or failed to
 * start; returns the number that are up. */
int gpu_pool_wait_ready(gpu_pool *p, double timeout_s);
/* How many times workers were restarted. */
int gpu_pool_restarts(const gpu_pool *p);
/* Files shipped to workers (each stored and hash-checked) and their bytes. */
int gpu_pool_shipments(const gpu_pool *p, int64_t *bytes);
/* Compiled kernels, over the pool's life. */
typedef struct gpu_cubin_stats {
    long hits;             /* compiles a worker served from its cache (memory or disk) */
    long misses;           /* compiles NVRTC ran */
    long sent;             /* cubins sent to a worker that lacked them, and stored there */
    long fetched;          /* cubins received from the worker that compiled them, kept */
    long refused;          /* entries refused by the hash or format check, either way */
    int64_t sent_bytes;    /* image bytes of those sent */
    int64_t fetched_bytes; /* and of those fetched */
} gpu_cubin_stats;
/* Fill out. Can't fail. */
void gpu_pool_cubin_stats(const gpu_pool *p, gpu_cubin_stats *out);
/* Requests queued or running. */
int gpu_pool_pending(const gpu_pool *p);
/* Cancel a queued or running request: a running one kills its worker (the
 * only way to stop a kernel) and the worker is restarted. */
void gpu_pool_cancel(gpu_pool *p, long id);

/* The short error text of a reply: "kernel_fault: illegal address",
 * "timeout after 10 s"; "" for a success. Borrowed from reply or static. */
const char *gpu_reply_error(const cJSON *reply, char *buf, size_t len);

#endif /* DITTO_GPU_H */
