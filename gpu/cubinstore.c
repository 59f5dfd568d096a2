/* cubinstore.c -- the client's bounded store of compiled kernels: kept
 * from the worker that compiled them, sent to a worker that lacks them,
 * and the hit and compile counts the workers report. */
#include "gpu/cubinstore.h"
#include "gpu/cubincache.h"

#include <stdlib.h>
#include <string.h>

/* Compile identities remembered, and keys per identity (a verify compiles
 * the kernel for its matrix and for each edge matrix). */
#define IDENTS_MAX     4096
#define KEYS_PER_IDENT 32

typedef struct entry {
    char key[17];
    cJSON *meta;   /* the compile cache's HASH.json */
    char *data;    /* the image, base64 */
    size_t size;   /* image bytes */
    int64_t cost;  /* what it counts against the cap */
    uint64_t used; /* tick of the last use */
} entry;

typedef struct ident {
    char id[17];
    char keys[KEYS_PER_IDENT][17];
    int nkeys;
} ident;

struct gpu_cubinstore {
    int64_t max_bytes, bytes;
    entry *e;
    int ne, cap;
    ident *ids; /* a ring of IDENTS_MAX */
    int nids, next_id;
    uint64_t tick;
    gpu_cubin_stats st;
};

gpu_cubinstore *gpu_cubinstore_new(int64_t max_bytes)
{
    gpu_cubinstore *s = dt_xcalloc(1, sizeof *s);
    s->max_bytes = max_bytes > 0 ? max_bytes : GPU_CUBINSTORE_DEFAULT_BYTES;
    return s;
}

static void entry_clear(entry *e)
{
    cJSON_Delete(e->meta);
    free(e->data);
}

void gpu_cubinstore_free(gpu_cubinstore *s)
{
    if (s == NULL)
        return;
    for (int i = 0; i < s->ne; i++)
        entry_clear(&s->e[i]);
    free(s->e);
    free(s->ids);
    free(s);
}

void gpu_cubinstore_stats(const gpu_cubinstore *s, gpu_cubin_stats *out)
{
    *out = s->st;
}

/* ---- identities -------------------------------------------------------------------- */

static uint64_t hash_str(uint64_t h, const char *s)
{
    return dt_hash64(s, strlen(s) + 1, h);
}

static uint64_t hash_json(uint64_t h, const char *name, const cJSON *v)
{
    h = hash_str(h, name);
    if (v == NULL)
        return hash_str(h, "");
    char *t = dt_json_print(v, 0);
    h = hash_str(h, t);
    free(t);
    return h;
}

int gpu_cubinstore_ident(const cJSON *req, const cJSON *hello, const cJSON *load, char id[17])
{
    const cJSON *kernel = cJSON_GetObjectItemCaseSensitive(req, "kernel");
    const cJSON *source = cJSON_GetObjectItemCaseSensitive(req, "source");
    if (kernel == NULL && !cJSON_IsString(source))
        return 0;
    static const char *fields[] = {"kernel", "source", "name", "options", "names",
                                   "op",     "dtype",  "n",    "k",       "epilogue"};
    uint64_t h = DT_HASH_SEED;
    for (size_t i = 0; i < DT_ARRAY_LEN(fields); i++)
        h = hash_json(h, fields[i], cJSON_GetObjectItemCaseSensitive(req, fields[i]));
    /* The matrix as loaded (a handle names different matrices in turn),
     * less what differs between workers for the same file. */
    h = hash_json(h, "matrix", cJSON_GetObjectItemCaseSensitive(req, "matrix"));
    for (const cJSON *f = load ? load->child : NULL; f != NULL; f = f->next)
        if (!dt_streq(f->string, "blob") && !dt_streq(f->string, "id"))
            h = hash_json(h, f->string, f);
    char arch[32];
    const cJSON *dev = cJSON_GetObjectItemCaseSensitive(hello, "device");
    const char *cc = dt_json_str(dev, "cc", NULL);
    if (dt_json_str(req, "arch", NULL) != NULL)
        snprintf(arch, sizeof arch, "%s", dt_json_str(req, "arch", ""));
    else if (dt_json_bool(dev, "present", 0) && cc != NULL && strchr(cc, '.') != NULL)
        snprintf(arch, sizeof arch, "sm_%.*s%s", (int)(strchr(cc, '.') - cc), cc,
                 strchr(cc, '.') + 1);
    else
        snprintf(arch, sizeof arch, "sm_90"); /* the worker's default without a GPU */
    h = hash_str(h, arch);
    const cJSON *nv =
        cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(hello, "libs"), "nvrtc");
    h = hash_str(h, dt_json_str(nv, "version", "?"));
    dt_hash_hex(h, id);
    return 1;
}

static ident *ident_find(gpu_cubinstore *s, const char *id)
{
    for (int i = 0; i < s->nids; i++)
        if (strcmp(s->ids[i].id, id) == 0)
            return &s->ids[i];
    return NULL;
}

static void ident_add(gpu_cubinstore *s, const char *id, const char *key)
{
    ident *d = ident_find(s, id);
    if (s->ids == NULL)
        s->ids = dt_xcalloc(IDENTS_MAX, sizeof *s->ids); /* on first use: 2.3 MB */
    if (d == NULL) {
        /* The oldest identity gives way when the ring is full. */
        d = &s->ids[s->next_id];
        s->next_id = (s->next_id + 1) % IDENTS_MAX;
        if (s->nids < IDENTS_MAX)
            s->nids++;
        memset(d, 0, sizeof *d);
        snprintf(d->id, sizeof d->id, "%s", id);
    }
    for (int i = 0; i < d->nkeys; i++)
        if (strcmp(d->keys[i], key) == 0)
            return;
    if (d->nkeys < KEYS_PER_IDENT)
        snprintf(d->keys[d->nkeys++], 17, "%s", key);
}

/* ---- entries ----------------------------------------------------------------------- */

static entry *entry_find(gpu_cubinstore *s, const char *key)
{
    for (int i = 0; i < s->ne; i++)
        if (strcmp(s->e[i].key, key) == 0)
            return &s->e[i];
    return NULL;
}

/* Keep a checked entry (meta duplicated, data copied), evicting the least
 * recently used ones past the cap. One larger than the whole cap is not
 * kept. */
static void entry_put(gpu_cubinstore *s, const char *key, const cJSON *meta, const char *data,
                      size_t size)
{
    char *mt = dt_json_print(meta, 0);
    int64_t cost = (int64_t)strlen(data) + (int64_t)strlen(mt);
    free(mt);
    if (cost > s->max_bytes)
        return;
    while (s->bytes + cost > s->max_bytes && s->ne > 0) {
        int old = 0;
        for (int i = 1; i < s->ne; i++)
            if (s->e[i].used < s->e[old].used)
                old = i;
        s->bytes -= s->e[old].cost;
        entry_clear(&s->e[old]);
        s->e[old] = s->e[--s->ne];
    }
    if (s->ne == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->e = dt_xrealloc(s->e, (size_t)s->cap * sizeof *s->e);
    }
    entry *e = &s->e[s->ne++];
    memset(e, 0, sizeof *e);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->meta = cJSON_Duplicate(meta, 1);
    e->data = dt_xstrdup(data);
    e->size = size;
    e->cost = cost;
    e->used = ++s->tick;
    s->bytes += cost;
}

int gpu_cubinstore_attach(gpu_cubinstore *s, const char *id, cJSON *req,
                          int (*holds)(const char *key, void *ud), void *ud)
{
    cJSON_DeleteItemFromObjectCaseSensitive(req, "cubins");
    ident *d = ident_find(s, id);
    if (d == NULL)
        return 0;
    cJSON *arr = NULL;
    size_t bytes = 0;
    int n = 0;
    for (int i = 0; i < d->nkeys && n < GPU_CUBIN_ENTRIES_MAX; i++) {
        entry *e = entry_find(s, d->keys[i]);
        if (e == NULL || holds(e->key, ud) || bytes + e->size > GPU_CUBIN_REPLY_MAX)
            continue;
        if (arr == NULL)
            arr = dt_json_arr();
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "key", e->key);
        dt_json_set_take(o, "meta", cJSON_Duplicate(e->meta, 1));
        dt_json_set_str(o, "data", e->data);
        cJSON_AddItemToArray(arr, o);
        e->used = ++s->tick;
        bytes += e->size;
        n++;
    }
    if (arr != NULL)
        dt_json_set_take(req, "cubins", arr);
    return n;
}

/* Log that entry key was refused (sent: by the worker; else by us). */
static void say(gpu_log_fn *log, void *log_ud, int worker, int sent, const char *key,
                const char *why)
{
    char m[600];
    if (sent)
        snprintf(m, sizeof m,
                 "compiled kernel %s refused by this worker: %s (it compiles it itself)", key, why);
    else
        snprintf(m, sizeof m, "compiled kernel %s from this worker not kept: %s", key, why);
    log(worker, m, log_ud);
}

void gpu_cubinstore_learn(gpu_cubinstore *s, const char *id, const cJSON *req, cJSON *rep,
                          void (*mark)(const char *key, void *ud), void *ud, gpu_log_fn *log,
                          void *log_ud, int worker)
{
    const cJSON *refused = cJSON_GetObjectItemCaseSensitive(rep, "cubins_refused");
    const cJSON *r;
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "cubins"))
    {
        const char *key = dt_json_str(it, "key", "");
        const char *why = NULL;
        cJSON_ArrayForEach(r, refused) if (dt_streq(dt_json_str(r, "key", NULL), key)) why =
            dt_json_str(r, "reason", "?");
        /* Either way the worker is not sent it again: it holds it now, or
         * compiles it itself. */
        mark(key, ud);
        if (why != NULL) {
            s->st.refused++;
            say(log, log_ud, worker, 1, key, why);
            continue;
        }
        cJSON_ArrayForEach(r, cJSON_GetObjectItemCaseSensitive(
                                  rep, "cubins_had")) if (cJSON_IsString(r) &&
                                                          dt_streq(r->valuestring, key)) why = "";
        if (why != NULL)
            continue; /* its host had it: nothing was gained */
        entry *e = entry_find(s, key);
        s->st.sent++;
        s->st.sent_bytes += e ? (int64_t)e->size : 0;
    }
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(rep, "cubins"))
    {
        const char *key = dt_json_str(it, "key", NULL);
        if (!gpu_cubincache_key_ok(key))
            continue;
        if (dt_json_bool(it, "cached", 0))
            s->st.hits++;
        else
            s->st.misses++;
        mark(key, ud);
        if (id != NULL)
            ident_add(s, id, key);
        if (cJSON_GetObjectItemCaseSensitive(it, "data") == NULL)
            continue;
        char why[300];
        size_t size = 0;
        unsigned char *img = gpu_cubincache_check(it, &size, why, sizeof why);
        if (img == NULL) {
            s->st.refused++;
            say(log, log_ud, worker, 0, key, why);
        } else if (entry_find(s, key) == NULL) {
            entry_put(s, key, cJSON_GetObjectItemCaseSensitive(it, "meta"),
                      dt_json_str(it, "data", ""), size);
            s->st.fetched++;
            s->st.fetched_bytes += (int64_t)size;
        }
        free(img);
        cJSON_DeleteItemFromObjectCaseSensitive(it, "meta");
        cJSON_DeleteItemFromObjectCaseSensitive(it, "data");
    }
}
