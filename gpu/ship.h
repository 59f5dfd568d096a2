/* ship.h -- matrices sent to a worker over the protocol (gpu/PROTOCOL.md,
 * "Shipping files"): base64 for the chunks, the content hash, and the
 * worker's store of received files. Internal to gpu/ and gpu/worker/. */
#ifndef DITTO_GPU_SHIP_H
#define DITTO_GPU_SHIP_H

#include "core/core.h"

/* Raw bytes per blob_chunk, at most: the line stays under 1.4 MB. */
#define SHIP_CHUNK_MAX (1024 * 1024)
/* The largest file a worker accepts (64 GiB). */
#define SHIP_FILE_MAX ((int64_t)64 << 30)

/* Base64 (RFC 4648, with padding) of n bytes into a new string. Can't fail. */
char *ship_b64_encode(const void *data, size_t n);
/* Decode s (length len) into out (room for cap bytes). Returns the byte
 * count, or -1 on a malformed string or one that does not fit. */
long ship_b64_decode(const char *s, size_t len, unsigned char *out, size_t cap);

/* The content hash of a whole file (FNV-1a 64 over its bytes, 16 hex
 * digits into hex), read in bounded blocks; its size into *size. Returns
 * 0, or -1 with e set (naming the file). */
int ship_hash_file(const char *path, char hex[17], int64_t *size, dt_err *e);

/* A name fit for the store: 1 to 128 of [A-Za-z0-9._+-], not starting
 * with a dot. */
int ship_name_ok(const char *name);

/* Worker side, in gpu/worker/ship_store.c: blob_begin, blob_chunk,
 * blob_end (the handlers' shape of gpu/worker/worker.c; state kept in *st,
 * freed by ship_worker_free). */
typedef struct ship_worker ship_worker;
int ship_begin(ship_worker **st, const cJSON *req, cJSON *out, dt_err *e);
int ship_chunk(ship_worker **st, const cJSON *req, cJSON *out, dt_err *e);
int ship_end(ship_worker **st, const cJSON *req, cJSON *out, dt_err *e);
void ship_worker_free(ship_worker *st);
/* The stored file for "HASH/NAME" (a load_matrix's "blob"), a new string,
 * or NULL with e set (code not_found) when this worker holds no such file. */
char *ship_stored_path(const char *blob, dt_err *e);

#endif /* DITTO_GPU_SHIP_H */
