/* cubincache.c -- compiled kernels shared between hosts, what both sides
 * apply: the key and architecture checks and the entry check (the worker's
 * notes, entries given and taken, and the disk cache's cap are
 * gpu/worker/cubincache_disk.c). */
#include "gpu/cubincache.h"
#include "gpu/ship.h"

#include <stdlib.h>
#include <string.h>

int gpu_cubincache_key_ok(const char *s)
{
    if (s == NULL || strlen(s) != 16)
        return 0;
    for (const char *c = s; *c; c++)
        if (!((*c >= '0' && *c <= '9') || (*c >= 'a' && *c <= 'f')))
            return 0;
    return 1;
}

int gpu_cubincache_arch_ok(const char *s)
{
    if (s == NULL || strncmp(s, "sm_", 3) != 0)
        return 0;
    const char *d = s + 3;
    size_t n = strspn(d, "0123456789");
    if (n < 2 || n > 3)
        return 0;
    return d[n] == '\0' || ((d[n] == 'a' || d[n] == 'f') && d[n + 1] == '\0');
}

unsigned char *gpu_cubincache_check(const cJSON *entry, size_t *size, char *why, size_t len)
{
    const char *key = dt_json_str(entry, "key", NULL);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(entry, "meta");
    const char *data = dt_json_str(entry, "data", NULL);
    if (!gpu_cubincache_key_ok(key)) {
        snprintf(why, len, "key: expected 16 lowercase hex digits");
        return NULL;
    }
    if (!cJSON_IsObject(meta) || data == NULL) {
        snprintf(why, len, "meta (an object) or data (base64) missing");
        return NULL;
    }
    size_t dlen = strlen(data);
    if (dlen > (GPU_CUBIN_SHARE_MAX + 2) / 3 * 4) {
        snprintf(why, len, "data: over %zu bytes", GPU_CUBIN_SHARE_MAX);
        return NULL;
    }
    unsigned char *img = dt_xmalloc(dlen / 4 * 3 + 3);
    long n = ship_b64_decode(data, dlen, img, dlen / 4 * 3 + 3);
    int64_t msize = -1;
    char fnv[17] = "";
    if (n >= 0)
        dt_hash_hex(dt_hash64(img, (size_t)n, DT_HASH_SEED), fnv);
    if (n < 0)
        snprintf(why, len, "data: not base64");
    else if (!dt_streq(dt_json_str(meta, "key", NULL), key))
        snprintf(why, len, "meta.key is not the entry's key");
    else if (dt_json_to_int(cJSON_GetObjectItemCaseSensitive(meta, "size"), 1,
                            (int64_t)GPU_CUBIN_SHARE_MAX, &msize, NULL) != 0 ||
             msize != n)
        snprintf(why, len, "size differs: %ld bytes received, meta.size says %lld", n,
                 (long long)msize);
    else if (!dt_streq(dt_json_str(meta, "image_hash", NULL), fnv))
        snprintf(why, len, "image hash differs: received bytes hash to %s, meta says %s", fnv,
                 dt_json_str(meta, "image_hash", "none"));
    else if (n < 4 || memcmp(img, "\177ELF", 4) != 0)
        snprintf(why, len, "not an ELF image");
    else {
        *size = (size_t)n;
        return img;
    }
    free(img);
    return NULL;
}
