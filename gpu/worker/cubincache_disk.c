/* cubincache_disk.c -- compiled kernels shared between hosts, the worker's
 * side: the notes of what a request compiled, entries given and taken over
 * the protocol, and the disk cache's size cap (LRU by file time). */
#include "gpu/cubincache.h"
#include "gpu/ship.h"
#include "gpu/worker/nvrtc.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int64_t gpu_cubincache_limit(void)
{
    const char *s = getenv("DITTO_CUBIN_CACHE_MB");
    if (s != NULL && *s) {
        char *end = NULL;
        long long mb = strtoll(s, &end, 10);
        if (*end == '\0' && mb >= 1 && mb <= 1048576)
            return (int64_t)mb << 20;
        dt_warn("DITTO_CUBIN_CACHE_MB='%s': expected 1 to 1048576 (MiB); using %d", s,
                GPU_CUBIN_DISK_DEFAULT_MB);
    }
    return (int64_t)GPU_CUBIN_DISK_DEFAULT_MB << 20;
}

void gpu_cubincache_touch(const char *meta_path)
{
    if (utimensat(AT_FDCWD, meta_path, NULL, 0) != 0)
        dt_debug("cubin cache: cannot mark %s used: %s", meta_path, strerror(errno));
}

typedef struct entry_stat {
    char key[17];
    int64_t bytes;
    long long when; /* the .json's mtime in ns; 0 when it has none */
    int json;       /* while collecting: this file is the .json */
} entry_stat;

static int by_key(const void *a, const void *b)
{
    return strcmp(((const entry_stat *)a)->key, ((const entry_stat *)b)->key);
}

static int by_age(const void *a, const void *b)
{
    const entry_stat *x = a, *y = b;
    return x->when < y->when ? -1 : x->when > y->when;
}

/* One pass over the folder, a sort by key to pair each .cubin with its
 * .json, a sort by age: O(n log n) in the files (the cache holds thousands
 * at its cap, and this runs while compiles wait). */
int gpu_cubincache_prune(const char *dir, int64_t max_bytes)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    entry_stat *fs = NULL;
    int nf = 0, cap = 0;
    int64_t total = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *dot = strrchr(de->d_name, '.');
        if (dot == NULL || dot - de->d_name != 16 ||
            (strcmp(dot, ".cubin") != 0 && strcmp(dot, ".json") != 0))
            continue;
        char key[17];
        memcpy(key, de->d_name, 16);
        key[16] = '\0';
        if (!gpu_cubincache_key_ok(key))
            continue;
        char *path = dt_xasprintf("%s/%s", dir, de->d_name);
        struct stat sb;
        int ok = stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
        free(path);
        if (!ok)
            continue;
        if (nf == cap) {
            cap = cap ? 2 * cap : 64;
            fs = dt_xrealloc(fs, (size_t)cap * sizeof *fs);
        }
        memset(&fs[nf], 0, sizeof fs[nf]);
        memcpy(fs[nf].key, key, 17);
        fs[nf].bytes = (int64_t)sb.st_size;
        fs[nf].when = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        fs[nf].json = strcmp(dot, ".json") == 0;
        total += (int64_t)sb.st_size;
        nf++;
    }
    closedir(d);
    int removed = 0;
    if (total > max_bytes) {
        /* files to entries: a key's sizes add up, its time is the .json's */
        qsort(fs, (size_t)nf, sizeof *fs, by_key);
        int n = 0;
        for (int i = 0; i < nf; i++) {
            if (n > 0 && strcmp(fs[n - 1].key, fs[i].key) == 0) {
                fs[n - 1].bytes += fs[i].bytes;
                if (fs[i].json)
                    fs[n - 1].when = fs[i].when;
                continue;
            }
            fs[n++] = fs[i];
        }
        qsort(fs, (size_t)n, sizeof *fs, by_age);
        int64_t goal = max_bytes / 10 * 9;
        for (int i = 0; i < n && total > goal; i++) {
            /* The .json first: a reader trusts a pair only with it. */
            char *meta = dt_xasprintf("%s/%s.json", dir, fs[i].key);
            char *bin = dt_xasprintf("%s/%s.cubin", dir, fs[i].key);
            if ((unlink(meta) != 0 && errno != ENOENT) || (unlink(bin) != 0 && errno != ENOENT))
                dt_warn("cubin cache: cannot remove %s or %s to stay under %lld MiB: %s", meta, bin,
                        (long long)(max_bytes >> 20), strerror(errno));
            else {
                total -= fs[i].bytes;
                removed++;
            }
            free(meta);
            free(bin);
        }
        dt_debug("cubin cache %s: %d least recently used entries removed (cap %lld MiB)", dir,
                 removed, (long long)(max_bytes >> 20));
    }
    free(fs);
    return removed;
}

void gpu_cubincache_prune_sometimes(const char *dir)
{
    static unsigned puts;
    if (puts++ % GPU_CUBIN_PRUNE_EVERY == 0)
        gpu_cubincache_prune_sometimes(dir);
}

/* ---- the request being served -------------------------------------------------- */

typedef struct note {
    char key[17];
    int cached;
    int compiled;
} note;

static note notes[GPU_CUBIN_ENTRIES_MAX];
static int nnotes;

void gpu_cubincache_begin(void)
{
    nnotes = 0;
}

void gpu_cubincache_note(const char *key, int cached, int compiled)
{
    for (int i = 0; i < nnotes; i++) {
        if (strcmp(notes[i].key, key) == 0) {
            notes[i].cached &= cached; /* compiled once in this request: a miss */
            return;
        }
    }
    if (nnotes == GPU_CUBIN_ENTRIES_MAX)
        return;
    snprintf(notes[nnotes].key, sizeof notes[nnotes].key, "%s", key);
    notes[nnotes].cached = cached;
    notes[nnotes].compiled = compiled;
    nnotes++;
}

/* Store one checked entry as HASH.cubin + HASH.json (the .json last, as
 * the compile cache writes them); *had: it was there already. 0, or -1
 * with why. */
static int store_entry(const char *dir, const cJSON *entry, const unsigned char *img, size_t size,
                       int *had, char *why, size_t len)
{
    const char *key = dt_json_str(entry, "key", "");
    char *bin = dt_xasprintf("%s/%s.cubin", dir, key);
    char *meta = dt_xasprintf("%s/%s.json", dir, key);
    int rc = 0;
    *had = dt_file_exists(meta) && dt_file_exists(bin);
    if (!*had) {
        dt_err e = {0};
        char *text = dt_json_print(cJSON_GetObjectItemCaseSensitive(entry, "meta"), 0);
        if (dt_mkdir_p(dir, &e) != 0 || dt_write_file_atomic(bin, img, size, &e) != 0 ||
            dt_write_file_atomic(meta, text, strlen(text), &e) != 0) {
            snprintf(why, len, "not stored: %s", e.msg);
            rc = -1;
        }
        free(text);
    }
    free(bin);
    free(meta);
    return rc;
}

void gpu_cubincache_take(const cJSON *req, cJSON *out)
{
    const cJSON *arr = cJSON_GetObjectItemCaseSensitive(req, "cubins");
    if (arr == NULL)
        return;
    cJSON *refused = dt_json_arr();
    cJSON *had_arr = dt_json_arr();
    char *dir = gpu_cache_disk_dir();
    int i = 0, stored = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, arr)
    {
        char why[300] = "";
        size_t size = 0;
        unsigned char *img = NULL;
        int had = 0;
        if (!cJSON_IsArray(arr) || i++ >= GPU_CUBIN_ENTRIES_MAX)
            snprintf(why, sizeof why, "cubins: expected an array of at most %d entries",
                     GPU_CUBIN_ENTRIES_MAX);
        else if (dir == NULL)
            snprintf(why, sizeof why, "this worker has no cache folder (no HOME)");
        else if ((img = gpu_cubincache_check(it, &size, why, sizeof why)) != NULL &&
                 store_entry(dir, it, img, size, &had, why, sizeof why) == 0) {
            if (had)
                cJSON_AddItemToArray(had_arr, cJSON_CreateString(dt_json_str(it, "key", "")));
            else
                stored++;
        }
        free(img);
        if (why[0]) {
            cJSON *o = dt_json_obj();
            const char *key = dt_json_str(it, "key", "");
            dt_json_set_str(o, "key", gpu_cubincache_key_ok(key) ? key : "?");
            dt_json_set_str(o, "reason", why);
            cJSON_AddItemToArray(refused, o);
            dt_warn("cubin %s from the client refused: %s (compiled here when needed)",
                    gpu_cubincache_key_ok(key) ? key : "?", why);
        }
    }
    if (stored > 0)
        gpu_cubincache_prune_sometimes(dir);
    free(dir);
    if (cJSON_GetArraySize(had_arr) > 0)
        dt_json_set_take(out, "cubins_had", had_arr);
    else
        cJSON_Delete(had_arr);
    if (cJSON_GetArraySize(refused) > 0)
        dt_json_set_take(out, "cubins_refused", refused);
    else
        cJSON_Delete(refused);
}

void gpu_cubincache_give(const cJSON *req, cJSON *out)
{
    if (nnotes == 0)
        return;
    int want = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(req, "want_cubins"));
    char *dir = want ? gpu_cache_disk_dir() : NULL;
    size_t given = 0;
    cJSON *arr = dt_json_arr();
    for (int i = 0; i < nnotes; i++) {
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "key", notes[i].key);
        dt_json_set_bool(o, "cached", notes[i].cached);
        if (dir != NULL && !notes[i].cached && notes[i].compiled) {
            char *bin = dt_xasprintf("%s/%s.cubin", dir, notes[i].key);
            char *meta = dt_xasprintf("%s/%s.json", dir, notes[i].key);
            struct stat sb;
            if (stat(bin, &sb) == 0 && (size_t)sb.st_size <= GPU_CUBIN_SHARE_MAX &&
                given + (size_t)sb.st_size <= GPU_CUBIN_REPLY_MAX) {
                size_t size = 0;
                char *img = dt_read_file(bin, &size, NULL);
                cJSON *m = img ? dt_json_read_file_max(meta, (size_t)16 << 20, NULL) : NULL;
                if (m != NULL) {
                    char *b64 = ship_b64_encode(img, size);
                    dt_json_set_take(o, "meta", m);
                    dt_json_set_str(o, "data", b64);
                    free(b64);
                    given += size;
                }
                free(img);
            }
            free(bin);
            free(meta);
        }
        cJSON_AddItemToArray(arr, o);
    }
    free(dir);
    dt_json_set_take(out, "cubins", arr);
}
