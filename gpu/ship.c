/* ship.c -- files sent to a worker over the protocol, what both sides
 * share: base64 chunks and the content hash that names them (the worker's
 * store of received files is gpu/worker/ship_store.c). */
#include "gpu/ship.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *ship_b64_encode(const void *data, size_t n)
{
    const unsigned char *s = data;
    char *out = dt_xmalloc(4 * ((n + 2) / 3) + 1);
    size_t o = 0, i = 0;
    for (; i + 2 < n; i += 3) {
        unsigned v = (unsigned)s[i] << 16 | (unsigned)s[i + 1] << 8 | s[i + 2];
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = b64[(v >> 6) & 63];
        out[o++] = b64[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)s[i] << 16 | (i + 1 < n ? (unsigned)s[i + 1] << 8 : 0);
        out[o++] = b64[v >> 18];
        out[o++] = b64[(v >> 12) & 63];
        out[o++] = i + 1 < n ? b64[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_value(char c)
{
    const char *p = c ? strchr(b64, c) : NULL;
    return p ? (int)(p - b64) : -1;
}

long ship_b64_decode(const char *s, size_t len, unsigned char *out, size_t cap)
{
    if (len % 4 != 0)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 4) {
        int v[4], pad = 0;
        for (int k = 0; k < 4; k++) {
            if (s[i + k] == '=' && i + 4 == len && k >= 2) {
                v[k] = 0;
                pad++;
            } else if (pad > 0 || (v[k] = b64_value(s[i + k])) < 0) {
                return -1; /* a character outside the alphabet, or data after '=' */
            }
        }
        unsigned x =
            (unsigned)v[0] << 18 | (unsigned)v[1] << 12 | (unsigned)v[2] << 6 | (unsigned)v[3];
        int got = 3 - pad;
        if (o + (size_t)got > cap)
            return -1;
        out[o++] = (unsigned char)(x >> 16);
        if (got > 1)
            out[o++] = (unsigned char)(x >> 8);
        if (got > 2)
            out[o++] = (unsigned char)x;
    }
    return (long)o;
}

int ship_hash_file(const char *path, char hex[17], int64_t *size, dt_err *e)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return dt_err_set(e, "%s: cannot read it to ship it to a worker: %s", path,
                          strerror(errno));
    unsigned char *buf = dt_xmalloc(SHIP_CHUNK_MAX);
    uint64_t h = DT_HASH_SEED;
    int64_t total = 0;
    ssize_t n;
    while ((n = read(fd, buf, SHIP_CHUNK_MAX)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            dt_err_set(e, "%s: read failed at byte %lld: %s", path, (long long)total,
                       strerror(errno));
            break;
        }
        h = dt_hash64(buf, (size_t)n, h);
        total += n;
    }
    free(buf);
    close(fd);
    if (n < 0)
        return -1;
    dt_hash_hex(h, hex);
    *size = total;
    return 0;
}

int ship_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || name[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == '+'))
            return 0;
    }
    return 1;
}
