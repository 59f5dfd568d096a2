/* cubinstore.h -- the client's store of compiled kernels (gpu/PROTOCOL.md,
 * "Sharing compiled kernels"): cubins received from the workers that
 * compiled them, hash-checked, bounded in bytes (least recently used out),
 * sent with a request to a worker that lacks them; and the counts of cache
 * hits and compiles the workers report.
 *
 * Internal to gpu/ (the client). Prefix gpu_cubinstore_. The store never
 * decides what a worker runs: the worker computes every cache key itself,
 * and an entry sent that it does not need is only bytes. */
#ifndef DITTO_GPU_CUBINSTORE_H
#define DITTO_GPU_CUBINSTORE_H

#include "gpu/gpu.h"

/* The store's default cap on the bytes it holds. */
#define GPU_CUBINSTORE_DEFAULT_BYTES ((int64_t)256 << 20)

typedef struct gpu_cubinstore gpu_cubinstore;

/* max_bytes <= 0: GPU_CUBINSTORE_DEFAULT_BYTES. Can't fail. */
gpu_cubinstore *gpu_cubinstore_new(int64_t max_bytes);
void gpu_cubinstore_free(gpu_cubinstore *s); /* NULL is a no-op */

/* What req compiles on a worker, as 16 hex digits into id: a hash of the
 * fields a compile depends on (the kernel or source, options, the matrix
 * as its load request says, op, dtype, n, k, epilogue), the architecture
 * (the request's, else the worker's GPU's as its hello says, else sm_90)
 * and the worker's NVRTC version. load: the pool's load request of the
 * matrix handle req names (NULL when none). Returns 0 when req compiles
 * nothing (no kernel and no source). */
int gpu_cubinstore_ident(const cJSON *req, const cJSON *hello, const cJSON *load, char id[17]);

/* Add to req's "cubins" the stored entries of ident the worker lacks
 * (holds(key, ud) is 0), at most GPU_CUBIN_ENTRIES_MAX and
 * GPU_CUBIN_REPLY_MAX bytes of images; any "cubins" req carried before is
 * replaced. Returns the number added. */
int gpu_cubinstore_attach(gpu_cubinstore *s, const char *ident, cJSON *req,
                          int (*holds)(const char *key, void *ud), void *ud);

/* Learn from a worker's reply to req: count its "cubins" hits and compiles,
 * remember them under ident, mark(key, ud) each one the worker now holds
 * (reported, or sent with req and not in "cubins_refused"), keep every
 * entry that carries an image which passes gpu_cubincache_check, and strip
 * images from rep (callers see {"key", "cached"} only). A refused entry,
 * either way, is counted and logged through log. Can't fail. */
void gpu_cubinstore_learn(gpu_cubinstore *s, const char *ident, const cJSON *req, cJSON *rep,
                          void (*mark)(const char *key, void *ud), void *ud, gpu_log_fn *log,
                          void *log_ud, int worker);

void gpu_cubinstore_stats(const gpu_cubinstore *s, gpu_cubin_stats *out);

#endif /* DITTO_GPU_CUBINSTORE_H */
