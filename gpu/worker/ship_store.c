/* ship_store.c -- the worker's store of files shipped to it
 * ($XDG_CACHE_HOME/ditto/blob/HASH/NAME): blob_begin, blob_chunk, blob_end,
 * so that a worker on a host that cannot see a matrix's path loads the same
 * bytes (gpu/PROTOCOL.md, "Shipping files"). */
#include "gpu/ship.h"
#include "gpu/worker/worker.h"

#include "core/schema.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int hash_ok(const char *h)
{
    if (h == NULL || strlen(h) != 16)
        return 0;
    for (int i = 0; i < 16; i++)
        if (!((h[i] >= '0' && h[i] <= '9') || (h[i] >= 'a' && h[i] <= 'f')))
            return 0;
    return 1;
}

/* One transfer at a time: a new blob_begin abandons the one before. */
struct ship_worker {
    char hash[17];
    char *dir;   /* store/HASH */
    char *final; /* store/HASH/NAME */
    char *part;  /* store/HASH/.NAME.PID.part */
    int fd;
    int64_t bytes, received;
    uint64_t h; /* running hash of what was received */
    unsigned char *buf;
};

void ship_worker_free(ship_worker *st)
{
    if (st == NULL)
        return;
    if (st->fd >= 0) {
        close(st->fd);
        unlink(st->part); /* an unfinished transfer leaves nothing behind */
    }
    free(st->dir);
    free(st->final);
    free(st->part);
    free(st->buf);
    free(st);
}

static char *store_dir(dt_err *e)
{
    char *c = dt_cache_dir();
    if (c == NULL) {
        e->code = WK_EINTERNAL;
        dt_err_set(e, "no cache folder for received files (set XDG_CACHE_HOME or HOME on the "
                      "worker's host)");
        return NULL;
    }
    char *d = dt_xasprintf("%s/blob", c);
    free(c);
    return d;
}

char *ship_stored_path(const char *blob, dt_err *e)
{
    const char *slash = blob ? strchr(blob, '/') : NULL;
    char hash[17] = "";
    if (slash && slash - blob == 16)
        memcpy(hash, blob, 16);
    if (!hash_ok(hash) || !ship_name_ok(slash + 1)) {
        e->code = WK_EBAD;
        dt_err_set(e, "blob: expected HASH/NAME (16 hex digits, a plain file name), got '%.80s'",
                   blob ? blob : "");
        return NULL;
    }
    char *d = store_dir(e);
    if (d == NULL)
        return NULL;
    char *p = dt_xasprintf("%s/%s", d, blob);
    free(d);
    if (access(p, R_OK) != 0) {
        e->code = WK_ENOTFOUND;
        dt_err_set(e, "blob %s: this worker holds no such file (%s); send it with blob_begin first",
                   blob, strerror(errno));
        free(p);
        return NULL;
    }
    return p;
}

/* ---- the requests' fields ---------------------------------------------------- */

static int hash_valid(const cJSON *v)
{
    return hash_ok(v->valuestring);
}

static int name_valid(const cJSON *v)
{
    return ship_name_ok(v->valuestring);
}

static const dt_schema hash_s = {
    .type = DT_SCHEMA_STR, .valid = hash_valid, .what = "16 lowercase hex digits"};
static const dt_schema name_s = {
    .type = DT_SCHEMA_STR,
    .valid = name_valid,
    .what = "a plain file name (1 to 128 of A-Z a-z 0-9 . _ + -, no leading dot)"};
static const dt_schema bytes_s = {.type = DT_SCHEMA_INT, .min = 0, .max = (double)SHIP_FILE_MAX};
static const dt_schema data_s = {.type = DT_SCHEMA_STR,
                                 .flags = DT_SCHEMA_BYTES,
                                 .max_len = 4 * ((SHIP_CHUNK_MAX + 2) / 3),
                                 .what = "base64 of at most one chunk (chunk_bytes of blob_begin)"};
static const dt_schema_field begin_fields[] = {
    {"hash", &hash_s, 1}, {"name", &name_s, 1}, {"bytes", &bytes_s, 1}, {NULL, NULL, 0}};
static const dt_schema begin_s = {
    .type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN, .fields = begin_fields};
static const dt_schema_field chunk_fields[] = {
    {"hash", &hash_s, 1}, {"offset", &bytes_s, 1}, {"data", &data_s, 1}, {NULL, NULL, 0}};
static const dt_schema chunk_s = {
    .type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN, .fields = chunk_fields};

int ship_begin(ship_worker **stp, const cJSON *req, cJSON *out, dt_err *e)
{
    if (dt_schema_validate(&begin_s, req, NULL, e) != 0) {
        e->code = WK_EBAD;
        return -1;
    }
    const char *hash = dt_json_str(req, "hash", "");
    const char *name = dt_json_str(req, "name", "");
    int64_t bytes = dt_json_i64(req, "bytes", 0);
    ship_worker_free(*stp);
    *stp = NULL;
    char *root = store_dir(e);
    if (root == NULL)
        return -1;
    ship_worker *st = dt_xcalloc(1, sizeof *st);
    st->fd = -1;
    snprintf(st->hash, sizeof st->hash, "%s", hash);
    st->dir = dt_xasprintf("%s/%s", root, hash);
    st->final = dt_xasprintf("%s/%s", st->dir, name);
    st->part = dt_xasprintf("%s/.%s.%ld.part", st->dir, name, (long)getpid());
    free(root);
    st->bytes = bytes;
    st->h = DT_HASH_SEED;
    struct stat sb;
    char *rel = dt_xasprintf("%s/%s", hash, name);
    dt_json_set_str(out, "blob", rel);
    free(rel);
    dt_json_set_num(out, "chunk_bytes", SHIP_CHUNK_MAX);
    if (stat(st->final, &sb) == 0 && sb.st_size == st->bytes) {
        /* Stored under its hash by an earlier transfer that passed the
         * check at its end (this worker's or another's on this host). */
        dt_json_set_bool(out, "have", 1);
        ship_worker_free(st);
        return 0;
    }
    if (dt_mkdir_p(st->dir, e) != 0) {
        e->code = WK_EINTERNAL;
        ship_worker_free(st);
        return -1;
    }
    st->fd = open(st->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (st->fd < 0) {
        e->code = WK_EINTERNAL;
        dt_err_set(e, "%s: cannot create: %s", st->part, strerror(errno));
        ship_worker_free(st);
        return -1;
    }
    st->buf = dt_xmalloc(SHIP_CHUNK_MAX);
    dt_json_set_bool(out, "have", 0);
    *stp = st;
    return 0;
}

int ship_chunk(ship_worker **stp, const cJSON *req, cJSON *out, dt_err *e)
{
    ship_worker *st = *stp;
    e->code = WK_EBAD;
    if (dt_schema_validate(&chunk_s, req, NULL, e) != 0)
        return -1;
    const char *hash = dt_json_str(req, "hash", "");
    const char *data = dt_json_str(req, "data", "");
    int64_t off = dt_json_i64(req, "offset", 0);
    if (st == NULL || strcmp(hash, st->hash) != 0)
        return dt_err_set(e, "blob_chunk: no transfer of %.20s in progress (send blob_begin first)",
                          hash);
    if (off != st->received)
        return dt_err_set(e, "$.offset: expected %lld (the bytes received so far), got %lld",
                          (long long)st->received, (long long)off);
    size_t len = strlen(data);
    long n = ship_b64_decode(data, len, st->buf, SHIP_CHUNK_MAX);
    if (n < 0)
        return dt_err_set(e, "$.data: not base64 (RFC 4648, with padding)");
    if (st->received + n > st->bytes)
        return dt_err_set(e, "$.data: %lld bytes past the %lld announced by blob_begin",
                          (long long)(st->received + n - st->bytes), (long long)st->bytes);
    for (long w = 0; w < n;) {
        ssize_t k = write(st->fd, st->buf + w, (size_t)(n - w));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            e->code = errno == ENOSPC ? WK_ENOMEM : WK_EINTERNAL;
            dt_err_set(e, "%s: write failed at byte %lld: %s", st->part,
                       (long long)(st->received + w), strerror(errno));
            ship_worker_free(st);
            *stp = NULL;
            return -1;
        }
        w += k;
    }
    st->h = dt_hash64(st->buf, (size_t)n, st->h);
    st->received += n;
    dt_json_set_num(out, "received", (double)st->received);
    e->code = 0;
    return 0;
}

int ship_end(ship_worker **stp, const cJSON *req, cJSON *out, dt_err *e)
{
    ship_worker *st = *stp;
    const char *hash = dt_json_str(req, "hash", "");
    e->code = WK_EBAD;
    if (st == NULL || strcmp(hash, st->hash) != 0)
        return dt_err_set(e, "blob_end: no transfer of %.20s in progress", hash);
    *stp = NULL;
    if (st->received != st->bytes) {
        dt_err_set(e, "blob_end: %lld of %lld bytes received", (long long)st->received,
                   (long long)st->bytes);
        ship_worker_free(st);
        return -1;
    }
    char got[17];
    dt_hash_hex(st->h, got);
    if (strcmp(got, st->hash) != 0) {
        dt_err_set(e,
                   "blob_end: the bytes received hash to %s, not %s: the transfer was "
                   "corrupted (nothing was stored; send it again)",
                   got, st->hash);
        ship_worker_free(st);
        return -1;
    }
    if (fsync(st->fd) != 0 || close(st->fd) != 0) {
        st->fd = -1;
        unlink(st->part);
        e->code = WK_EINTERNAL;
        dt_err_set(e, "%s: %s", st->part, strerror(errno));
        ship_worker_free(st);
        return -1;
    }
    st->fd = -1;
    /* Checked, then renamed: the store never holds a torn file. */
    if (rename(st->part, st->final) != 0) {
        e->code = WK_EINTERNAL;
        dt_err_set(e, "%s: cannot rename into the store: %s", st->final, strerror(errno));
        unlink(st->part);
        ship_worker_free(st);
        return -1;
    }
    const char *slash = strrchr(st->final, '/');
    char *rel = dt_xasprintf("%s/%s", st->hash, slash + 1);
    dt_json_set_str(out, "blob", rel);
    free(rel);
    dt_json_set_num(out, "bytes", (double)st->bytes);
    ship_worker_free(st);
    e->code = 0;
    return 0;
}
