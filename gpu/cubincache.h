/* cubincache.h -- compiled kernels shared between workers on different
 * hosts (gpu/PROTOCOL.md, "Sharing compiled kernels"): the worker's side
 * (which cubins a request used, entries taken from and given to a request,
 * the disk cache's size cap) and the entry check both sides apply.
 *
 * The checks are gpu/cubincache.c (both sides), the worker's side
 * gpu/worker/cubincache_disk.c. Internal to gpu/ and gpu/worker/. Prefix
 * gpu_cubincache_. The notes of the request being
 * served are process state, as the compile cache itself is: a worker serves
 * one request at a time. */
#ifndef DITTO_GPU_CUBINCACHE_H
#define DITTO_GPU_CUBINCACHE_H

#include "core/core.h"

/* The largest image one entry may carry either way (raw bytes), and the
 * most that one reply carries in all: a request line stays under the
 * worker's 16 MiB. */
#define GPU_CUBIN_SHARE_MAX ((size_t)4 << 20)
#define GPU_CUBIN_REPLY_MAX ((size_t)8 << 20)
/* Entries one request or reply may carry. */
#define GPU_CUBIN_ENTRIES_MAX 64
/* The disk cache's cap when DITTO_CUBIN_CACHE_MB does not set one. */
#define GPU_CUBIN_DISK_DEFAULT_MB 1024

/* Is s a 16-digit lowercase hex key? */
int gpu_cubincache_key_ok(const char *s);
/* Is s a real architecture NVRTC can target ("sm_90", "sm_100a")? */
int gpu_cubincache_arch_ok(const char *s);

/* Check a shared entry {"key", "meta", "data"}: data is base64 of at most
 * GPU_CUBIN_SHARE_MAX bytes starting with the ELF magic, and meta (the
 * compile cache's HASH.json) names the same key, that size and the FNV-1a
 * hash of those bytes. Returns the image (caller frees, *size its bytes),
 * or NULL with the reason in why. */
unsigned char *gpu_cubincache_check(const cJSON *entry, size_t *size, char *why, size_t len);

/* The worker's cap on its disk cache in bytes: DITTO_CUBIN_CACHE_MB (1 to
 * 1048576) or GPU_CUBIN_DISK_DEFAULT_MB. Can't fail. */
int64_t gpu_cubincache_limit(void);
/* Remove the least recently used entries (HASH.cubin + HASH.json, by the
 * .json's modification time, which a hit refreshes) of dir until it holds
 * at most 90 % of max_bytes, when it holds more than max_bytes. Returns the
 * entries removed; a file that cannot be removed is logged and skipped. */
int gpu_cubincache_prune(const char *dir, int64_t max_bytes);
/* The same with gpu_cubincache_limit(), on a process's first save into the
 * cache and every GPU_CUBIN_PRUNE_EVERY-th after it: the folder walk costs a
 * stat per file, and between walks the cache outgrows its cap by at most
 * that many entries. */
#define GPU_CUBIN_PRUNE_EVERY 32
void gpu_cubincache_prune_sometimes(const char *dir);
/* Mark a disk entry used now (its .json's time), for the LRU above. */
void gpu_cubincache_touch(const char *meta_path);

/* The notes of one request: forget them (a request starts), and note a
 * compile result (gpu_compile calls it: key, served from a cache or not,
 * produced a cubin or not). At most GPU_CUBIN_ENTRIES_MAX are kept. */
void gpu_cubincache_begin(void);
void gpu_cubincache_note(const char *key, int cached, int compiled);

/* Store the entries of the request's "cubins" array in the disk cache
 * before the request runs; each one refused (malformed, corrupted, or not
 * storable) is listed in out's "cubins_refused" as {"key", "reason"} and
 * simply compiled again when needed; the keys of those the cache held
 * already in "cubins_had". Can't fail. */
void gpu_cubincache_take(const cJSON *req, cJSON *out);
/* After the request ran: out's "cubins" lists the compiles it made,
 * {"key", "cached"}; with the request's "want_cubins" true, an entry for a
 * cubin compiled by this request carries "meta" and "data" too (within
 * GPU_CUBIN_REPLY_MAX). Nothing is added when it compiled nothing. */
void gpu_cubincache_give(const cJSON *req, cJSON *out);

#endif /* DITTO_GPU_CUBINCACHE_H */
