/* spec.c -- GPU spec files: schema check, loading, listing, gpu: auto, calibration copies. */
#include "hardware/hardware.h"

#include <ctype.h>
#include <dirent.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const dtype_names[HW_NDTYPES] = {"fp64", "fp32", "tf32", "fp16",
                                                    "bf16", "fp8",  "int8"};

const char *hw_dtype_name(hw_dtype t)
{
    return (t >= 0 && t < HW_NDTYPES) ? dtype_names[t] : "?";
}

int hw_dtype_parse(const char *s, hw_dtype *out)
{
    for (int i = 0; s != NULL && i < HW_NDTYPES; i++) {
        if (strcasecmp(s, dtype_names[i]) == 0) {
            *out = (hw_dtype)i;
            return 0;
        }
    }
    return -1;
}

/* ---- the schema check ---------------------------------------------------- */

/* Collects problems; every check keeps going after a failure so that a file
 * with five mistakes is fixed in one round, not five. */
typedef struct chk {
    const char *file;
    dt_buf *report;
    int n;
} chk;

static void problem(chk *c, const char *key, const char *fmt, ...) DT_PRINTF(3, 4);

static void problem(chk *c, const char *key, const char *fmt, ...)
{
    c->n++;
    if (c->report == NULL)
        return;
    dt_buf_printf(c->report, "%s: %s: ", c->file, key);
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(c->report, fmt, ap);
    va_end(ap);
    dt_buf_putc(c->report, '\n');
}

static void join_key(char *out, size_t len, const char *parent, const char *key)
{
    if (parent != NULL && *parent)
        snprintf(out, len, "%s.%s", parent, key);
    else
        snprintf(out, len, "%s", key);
}

static const char *type_name(const cJSON *v)
{
    if (cJSON_IsNumber(v))
        return "a number";
    if (cJSON_IsString(v))
        return "a string";
    if (cJSON_IsArray(v))
        return "an array";
    if (cJSON_IsObject(v))
        return "an object";
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsBool(v))
        return "a boolean";
    return "invalid";
}

/* The member or NULL after reporting it missing. */
static const cJSON *member(chk *c, const cJSON *obj, const char *parent, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (v == NULL) {
        char path[160];
        join_key(path, sizeof path, parent, key);
        problem(c, path, "missing");
    }
    return v;
}

static const cJSON *need_object(chk *c, const cJSON *obj, const char *parent, const char *key)
{
    const cJSON *v = member(c, obj, parent, key);
    if (v != NULL && !cJSON_IsObject(v)) {
        char path[160];
        join_key(path, sizeof path, parent, key);
        problem(c, path, "must be an object, not %s", type_name(v));
        return NULL;
    }
    return v;
}

/* An integer in [lo, hi]; *out is 0 after a problem. */
static int need_int(chk *c, const cJSON *obj, const char *parent, const char *key, long long lo,
                    long long hi, long long *out)
{
    *out = 0;
    if (obj == NULL)
        return -1;
    const cJSON *v = member(c, obj, parent, key);
    if (v == NULL)
        return -1;
    char path[160];
    join_key(path, sizeof path, parent, key);
    if (!cJSON_IsNumber(v)) {
        problem(c, path, "must be an integer, not %s", type_name(v));
        return -1;
    }
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d)) {
        problem(c, path, "must be an integer, not %g", d);
        return -1;
    }
    if (d < (double)lo || d > (double)hi) {
        problem(c, path, "%.0f is impossible: expected %lld to %lld", d, lo, hi);
        return -1;
    }
    *out = (long long)d;
    return 0;
}

/* A finite number in (0, hi]; null accepted (and *out = 0) when nullable. */
static int need_pos(chk *c, const cJSON *obj, const char *parent, const char *key, double hi,
                    int nullable, double *out)
{
    *out = 0;
    if (obj == NULL)
        return -1;
    const cJSON *v = member(c, obj, parent, key);
    if (v == NULL)
        return -1;
    char path[160];
    join_key(path, sizeof path, parent, key);
    if (nullable && cJSON_IsNull(v))
        return 0;
    if (!cJSON_IsNumber(v)) {
        problem(c, path, "must be a number%s, not %s", nullable ? " or null" : "", type_name(v));
        return -1;
    }
    double d = v->valuedouble;
    if (!isfinite(d) || d <= 0 || d > hi) {
        problem(c, path, "%g is impossible: expected more than 0 and at most %g", d, hi);
        return -1;
    }
    *out = d;
    return 0;
}

static const char *need_str(chk *c, const cJSON *obj, const char *parent, const char *key,
                            size_t maxlen, int nullable)
{
    if (obj == NULL)
        return NULL;
    const cJSON *v = member(c, obj, parent, key);
    if (v == NULL)
        return NULL;
    char path[160];
    join_key(path, sizeof path, parent, key);
    if (nullable && cJSON_IsNull(v))
        return NULL;
    if (!cJSON_IsString(v)) {
        problem(c, path, "must be a string%s, not %s", nullable ? " or null" : "", type_name(v));
        return NULL;
    }
    size_t len = strlen(v->valuestring);
    if (len == 0 || len > maxlen) {
        problem(c, path, "must be 1 to %zu characters long, not %zu", maxlen, len);
        return NULL;
    }
    return v->valuestring;
}

/* The schema's keys, per object; anything else is reported as unknown. */
static const char *const top_keys[] = {"name",
                                       "full_name",
                                       "architecture",
                                       "compute_capability",
                                       "sm_count",
                                       "shared_memory",
                                       "registers",
                                       "limits",
                                       "boost_clock_mhz",
                                       "memory",
                                       "l2_bytes",
                                       "peak_tflops",
                                       "measured",
                                       "aliases",
                                       "device_names",
                                       "sources",
                                       "notes",
                                       NULL};
static const char *const smem_keys[] = {"per_sm_bytes",
                                        "per_block_bytes",
                                        "per_block_optin_bytes",
                                        "reserved_per_block_bytes",
                                        "alloc_granularity_bytes",
                                        "carveout_kb",
                                        NULL};
static const char *const regs_keys[] = {"per_sm",     "per_block",         "per_thread_max",
                                        "alloc_unit", "alloc_granularity", "sub_partitions",
                                        NULL};
static const char *const limits_keys[] = {
    "warp_size",         "max_warps_per_sm",      "max_threads_per_sm",
    "max_blocks_per_sm", "max_threads_per_block", NULL};
static const char *const mem_keys[] = {"type", "size_gb", "bus_width_bits", "bandwidth_gbs", NULL};
static const char *const peak_keys[] = {"fp64", "fp32", "tf32", "fp16",
                                        "bf16", "fp8",  "int8", NULL};
static const char *const measured_keys[] = {"bandwidth_gbs", "peak_tflops", "date", "method", NULL};

static int in_list(const char *const *list, const char *s)
{
    for (; *list != NULL; list++) {
        if (strcmp(*list, s) == 0)
            return 1;
    }
    return 0;
}

/* Is a dotted path one of the schema's keys (present in the file or not)? */
static int schema_key(const char *path)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s", path);
    char *save = NULL;
    char *a = strtok_r(buf, ".", &save);
    char *b = a ? strtok_r(NULL, ".", &save) : NULL;
    char *c = b ? strtok_r(NULL, ".", &save) : NULL;
    if (a == NULL || strtok_r(NULL, ".", &save) != NULL)
        return 0;
    if (b == NULL)
        return in_list(top_keys, a);
    static const struct {
        const char *group;
        const char *const *keys;
    } groups[] = {{"shared_memory", smem_keys}, {"registers", regs_keys},
                  {"limits", limits_keys},      {"memory", mem_keys},
                  {"peak_tflops", peak_keys},   {"measured", measured_keys}};
    if (c != NULL)
        return strcmp(a, "measured") == 0 && strcmp(b, "peak_tflops") == 0 && in_list(peak_keys, c);
    for (size_t i = 0; i < DT_ARRAY_LEN(groups); i++) {
        if (strcmp(a, groups[i].group) == 0)
            return in_list(groups[i].keys, b);
    }
    return 0;
}

static void no_unknown_keys(chk *c, const cJSON *obj, const char *parent,
                            const char *const *allowed)
{
    if (obj == NULL)
        return;
    for (const cJSON *it = obj->child; it != NULL; it = it->next) {
        if (!in_list(allowed, it->string)) {
            char path[160];
            join_key(path, sizeof path, parent, it->string);
            problem(c, path, "unknown key (a typo?)");
        }
    }
}

static void need_str_array(chk *c, const cJSON *obj, const char *key, int maxn, size_t maxlen)
{
    const cJSON *v = member(c, obj, NULL, key);
    if (v == NULL)
        return;
    if (!cJSON_IsArray(v)) {
        problem(c, key, "must be an array of strings, not %s", type_name(v));
        return;
    }
    int i = 0;
    for (const cJSON *it = v->child; it != NULL; it = it->next, i++) {
        char path[160];
        snprintf(path, sizeof path, "%s[%d]", key, i);
        if (!cJSON_IsString(it) || it->valuestring[0] == '\0' || strlen(it->valuestring) > maxlen)
            problem(c, path, "must be a non-empty string of at most %zu characters", maxlen);
    }
    if (i > maxn)
        problem(c, key, "has %d entries; at most %d are supported", i, maxn);
}

/* Does some sources[].keys entry cover path (equal, or a parent of it)? */
static int covered(const cJSON *sources, const char *path)
{
    const cJSON *src;
    cJSON_ArrayForEach(src, sources)
    {
        const cJSON *keys = cJSON_GetObjectItemCaseSensitive(src, "keys");
        const cJSON *k;
        cJSON_ArrayForEach(k, keys)
        {
            if (!cJSON_IsString(k))
                continue;
            size_t n = strlen(k->valuestring);
            if (strcmp(path, k->valuestring) == 0 ||
                (strncmp(path, k->valuestring, n) == 0 && path[n] == '.'))
                return 1;
        }
    }
    return 0;
}

/* Does a dotted path name a key of doc? */
static int path_exists(const cJSON *doc, const char *path)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = doc;
    char *save = NULL;
    for (char *part = strtok_r(buf, ".", &save); part != NULL; part = strtok_r(NULL, ".", &save)) {
        if (!cJSON_IsObject(cur))
            return 0;
        cur = cJSON_GetObjectItemCaseSensitive(cur, part);
        if (cur == NULL)
            return 0;
    }
    return 1;
}

/* Every number (leaf) under the sourced groups must have a source. */
static void check_sources_cover(chk *c, const cJSON *sources, const cJSON *v, const char *path)
{
    if (cJSON_IsObject(v)) {
        if (covered(sources, path))
            return;
        for (const cJSON *it = v->child; it != NULL; it = it->next) {
            char sub[160];
            join_key(sub, sizeof sub, path, it->string);
            check_sources_cover(c, sources, it, sub);
        }
        return;
    }
    if (!covered(sources, path))
        problem(c, "sources", "no source names %s", path);
}

static const char *const sourced_groups[] = {
    "compute_capability", "sm_count", "boost_clock_mhz", "memory",   "l2_bytes", "shared_memory",
    "registers",          "limits",   "peak_tflops",     "measured", NULL};

static void check_sources(chk *c, const cJSON *doc)
{
    const cJSON *s = member(c, doc, NULL, "sources");
    if (s == NULL)
        return;
    if (!cJSON_IsArray(s) || cJSON_GetArraySize(s) == 0) {
        problem(c, "sources",
                "must be a non-empty array of {\"keys\": [...], \"source\": \"...\"}");
        return;
    }
    int i = 0;
    const cJSON *src;
    cJSON_ArrayForEach(src, s)
    {
        char path[64];
        snprintf(path, sizeof path, "sources[%d]", i++);
        if (!cJSON_IsObject(src)) {
            problem(c, path, "must be an object, not %s", type_name(src));
            continue;
        }
        static const char *const allowed[] = {"keys", "source", NULL};
        no_unknown_keys(c, src, path, allowed);
        need_str(c, src, path, "source", 1000, 0);
        const cJSON *keys = member(c, src, path, "keys");
        if (keys == NULL)
            continue;
        char kpath[96];
        snprintf(kpath, sizeof kpath, "%s.keys", path);
        if (!cJSON_IsArray(keys) || cJSON_GetArraySize(keys) == 0) {
            problem(c, kpath, "must be a non-empty array of key names");
            continue;
        }
        const cJSON *k;
        cJSON_ArrayForEach(k, keys)
        {
            if (!cJSON_IsString(k))
                problem(c, kpath, "must hold strings, not %s", type_name(k));
            else if (!path_exists(doc, k->valuestring) && !schema_key(k->valuestring))
                /* a schema key that is missing is reported as missing already */
                problem(c, kpath, "'%s' names no key of this file", k->valuestring);
        }
    }
    for (const char *const *g = sourced_groups; *g != NULL; g++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, *g);
        if (v != NULL)
            check_sources_cover(c, s, v, *g);
    }
}

static int is_pow2(long long v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

/* Parse "x.y" (one digit after the dot, as every CUDA compute capability). */
static int parse_cc(const char *s, int *major, int *minor)
{
    if (s == NULL || !isdigit((unsigned char)s[0]))
        return -1;
    char *end = NULL;
    long ma = strtol(s, &end, 10);
    if (end == NULL || end[0] != '.' || !isdigit((unsigned char)end[1]) || end[2] != '\0' ||
        ma > 99)
        return -1;
    *major = (int)ma;
    *minor = end[1] - '0';
    return 0;
}

static void check_names(chk *c, const cJSON *doc)
{
    const char *name = need_str(c, doc, NULL, "name", 31, 0);
    if (name != NULL) {
        for (const char *p = name; *p; p++) {
            if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-')) {
                problem(c, "name", "'%s' may hold only a-z, 0-9 and '-' (it is a file name)", name);
                break;
            }
        }
    }
    need_str(c, doc, NULL, "full_name", 95, 0);
    need_str(c, doc, NULL, "architecture", 31, 0);
    need_str_array(c, doc, "aliases", HW_MAX_NAMES, 47);
    need_str_array(c, doc, "device_names", HW_MAX_NAMES, 63);
    const cJSON *dn = cJSON_GetObjectItemCaseSensitive(doc, "device_names");
    if (cJSON_IsArray(dn) && cJSON_GetArraySize(dn) == 0)
        problem(c, "device_names", "must hold at least one device-name pattern for gpu: auto");
}

static void check_smem(chk *c, const cJSON *doc)
{
    const char *P = "shared_memory";
    const cJSON *sm = need_object(c, doc, NULL, P);

    no_unknown_keys(c, sm, P, smem_keys);
    long long per_sm, per_block, optin, reserved, gran;
    int ok_sm = need_int(c, sm, P, "per_sm_bytes", 1, 16LL << 20, &per_sm) == 0;
    int ok_blk = need_int(c, sm, P, "per_block_bytes", 1, 16LL << 20, &per_block) == 0;
    int ok_opt = need_int(c, sm, P, "per_block_optin_bytes", 1, 16LL << 20, &optin) == 0;
    int ok_res = need_int(c, sm, P, "reserved_per_block_bytes", 0, 1 << 16, &reserved) == 0;
    if (need_int(c, sm, P, "alloc_granularity_bytes", 1, 1 << 16, &gran) == 0 && !is_pow2(gran))
        problem(c, "shared_memory.alloc_granularity_bytes", "%lld is not a power of two", gran);
    if (ok_sm && ok_blk && per_block > per_sm)
        problem(c, "shared_memory.per_block_bytes",
                "%lld is larger than shared_memory.per_sm_bytes (%lld)", per_block, per_sm);
    if (ok_blk && ok_opt && optin < per_block)
        problem(c, "shared_memory.per_block_optin_bytes",
                "%lld is smaller than the default shared_memory.per_block_bytes (%lld)", optin,
                per_block);
    if (ok_sm && ok_opt && ok_res && optin + reserved > per_sm)
        problem(c, "shared_memory.per_block_optin_bytes",
                "%lld plus %lld reserved is larger than shared_memory.per_sm_bytes (%lld)", optin,
                reserved, per_sm);
    const cJSON *co = sm != NULL ? member(c, sm, P, "carveout_kb") : NULL;
    if (co == NULL)
        return;
    const char *K = "shared_memory.carveout_kb";
    if (!cJSON_IsArray(co) || cJSON_GetArraySize(co) == 0) {
        problem(c, K, "must be a non-empty array of sizes in KB, ascending");
        return;
    }
    if (cJSON_GetArraySize(co) > HW_MAX_CARVEOUTS)
        problem(c, K, "has %d entries; at most %d are supported", cJSON_GetArraySize(co),
                HW_MAX_CARVEOUTS);
    double prev = -1, last = -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, co)
    {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) ||
            it->valuedouble < 0) {
            problem(c, K, "entries must be whole KB (0 or more), found %s", type_name(it));
            return;
        }
        if (it->valuedouble <= prev) {
            problem(c, K, "must ascend strictly (%g after %g)", it->valuedouble, prev);
            return;
        }
        prev = last = it->valuedouble;
    }
    if (ok_sm && last * 1024 != (double)per_sm)
        problem(c, K, "the largest carveout (%g KB) must equal shared_memory.per_sm_bytes (%lld B)",
                last, per_sm);
}

static void check_regs(chk *c, const cJSON *doc)
{
    const char *P = "registers";
    const cJSON *r = need_object(c, doc, NULL, P);

    no_unknown_keys(c, r, P, regs_keys);
    long long per_sm, per_block, per_thread, unit, parts;
    int ok_sm = need_int(c, r, P, "per_sm", 1, 1 << 24, &per_sm) == 0;
    int ok_blk = need_int(c, r, P, "per_block", 1, 1 << 24, &per_block) == 0;
    need_int(c, r, P, "per_thread_max", 1, 256, &per_thread);
    if (need_int(c, r, P, "alloc_unit", 1, 1 << 16, &unit) == 0 && !is_pow2(unit))
        problem(c, "registers.alloc_unit", "%lld is not a power of two", unit);
    int ok_parts = need_int(c, r, P, "sub_partitions", 1, 16, &parts) == 0;
    const char *g = need_str(c, r, P, "alloc_granularity", 16, 0);
    if (g != NULL && strcmp(g, "warp") != 0)
        problem(c, "registers.alloc_granularity",
                "'%s' is not supported: cc 7.0 and later allocate registers per warp", g);
    if (ok_sm && ok_blk && per_block > per_sm)
        problem(c, "registers.per_block", "%lld is larger than registers.per_sm (%lld)", per_block,
                per_sm);
    if (ok_sm && ok_parts && per_sm % parts != 0)
        problem(c, "registers.sub_partitions", "%lld does not divide registers.per_sm (%lld)",
                parts, per_sm);
}

static void check_limits(chk *c, const cJSON *doc)
{
    const char *P = "limits";
    const cJSON *l = need_object(c, doc, NULL, P);

    no_unknown_keys(c, l, P, limits_keys);
    long long ws, mw, mt, mb, mtb;
    int ok_ws = need_int(c, l, P, "warp_size", 1, 64, &ws) == 0;
    if (ok_ws && ws != 32) {
        problem(c, "limits.warp_size", "%lld is impossible: every CUDA GPU has 32", ws);
        ok_ws = 0;
    }
    int ok_mw = need_int(c, l, P, "max_warps_per_sm", 1, 1024, &mw) == 0;
    int ok_mt = need_int(c, l, P, "max_threads_per_sm", 1, 1 << 16, &mt) == 0;
    need_int(c, l, P, "max_blocks_per_sm", 1, 1024, &mb);
    int ok_mtb = need_int(c, l, P, "max_threads_per_block", 1, 1 << 16, &mtb) == 0;
    if (ok_ws && ok_mw && ok_mt && mt != mw * ws)
        problem(c, "limits.max_threads_per_sm",
                "%lld is not limits.max_warps_per_sm x limits.warp_size (%lld)", mt, mw * ws);
    if (ok_mt && ok_mtb && mtb > mt)
        problem(c, "limits.max_threads_per_block",
                "%lld is larger than limits.max_threads_per_sm (%lld)", mtb, mt);
    if (ok_ws && ok_mtb && mtb % ws != 0)
        problem(c, "limits.max_threads_per_block", "%lld is not a multiple of the warp size", mtb);
}

static void check_peaks(chk *c, const cJSON *obj, const char *P, int required_fp32, double fp32_cap)
{
    for (int i = 0; i < HW_NDTYPES; i++) {
        double v;
        need_pos(c, obj, P, dtype_names[i], 1e6, 1, &v);
        if (i == HW_FP32 && required_fp32 && obj != NULL &&
            cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(obj, "fp32")))
            problem(c, "peak_tflops.fp32", "must be a number: every GPU has FP32 units");
        if (i == HW_FP32 && fp32_cap > 0 && v > fp32_cap)
            problem(c, "peak_tflops.fp32",
                    "%g TFLOP/s is impossible: sm_count x 256 FLOP/clock x boost_clock_mhz "
                    "allows at most %.1f",
                    v, fp32_cap);
    }

    no_unknown_keys(c, obj, P, peak_keys);
}

int hw_check_json(const cJSON *doc, const char *file, dt_buf *report)
{
    chk c = {file ? file : "(spec)", report, 0};
    if (!cJSON_IsObject(doc)) {
        problem(&c, "(top)", "a hardware file must be a JSON object, not %s", type_name(doc));
        return c.n;
    }

    no_unknown_keys(&c, doc, NULL, top_keys);
    check_names(&c, doc);

    const char *cc = need_str(&c, doc, NULL, "compute_capability", 8, 0);
    int ma = 0, mi = 0;
    if (cc != NULL) {
        if (parse_cc(cc, &ma, &mi) != 0)
            problem(&c, "compute_capability", "'%s' is not of the form x.y (e.g. \"9.0\")", cc);
        else if (ma < 7)
            problem(&c, "compute_capability",
                    "%s is older than 7.0, for which ditto has no occupancy rules", cc);
    }
    long long sms;
    double clock;
    int ok_sms = need_int(&c, doc, NULL, "sm_count", 1, 4096, &sms) == 0;
    int ok_clock = need_pos(&c, doc, NULL, "boost_clock_mhz", 10000, 0, &clock) == 0;
    check_smem(&c, doc);
    check_regs(&c, doc);
    check_limits(&c, doc);

    const cJSON *mem = need_object(&c, doc, NULL, "memory");

    no_unknown_keys(&c, mem, "memory", mem_keys);
    need_str(&c, mem, "memory", "type", 15, 0);
    double size_gb, bw;
    long long bus;
    need_pos(&c, mem, "memory", "size_gb", 1e5, 0, &size_gb);
    need_int(&c, mem, "memory", "bus_width_bits", 1, 1 << 16, &bus);
    int ok_bw = need_pos(&c, mem, "memory", "bandwidth_gbs", 1e6, 0, &bw) == 0;
    long long l2;
    need_int(&c, doc, NULL, "l2_bytes", 1, 1LL << 40, &l2);

    const cJSON *pk = need_object(&c, doc, NULL, "peak_tflops");
    double cap = (ok_sms && ok_clock) ? 1.25 * (double)sms * 256.0 * clock * 1e6 / 1e12 : 0;
    check_peaks(&c, pk, "peak_tflops", 1, cap);

    const cJSON *ms = need_object(&c, doc, NULL, "measured");

    no_unknown_keys(&c, ms, "measured", measured_keys);
    double mbw;
    if (need_pos(&c, ms, "measured", "bandwidth_gbs", 1e6, 1, &mbw) == 0 && ok_bw && mbw > 1.1 * bw)
        problem(&c, "measured.bandwidth_gbs",
                "%g GB/s is impossible: more than memory.bandwidth_gbs (%g) allows", mbw, bw);
    const cJSON *mpk = ms != NULL ? need_object(&c, ms, "measured", "peak_tflops") : NULL;
    check_peaks(&c, mpk, "measured.peak_tflops", 0, 0);
    need_str(&c, ms, "measured", "date", 39, 1);
    need_str(&c, ms, "measured", "method", 200, 1);

    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(doc, "notes");
    if (notes != NULL && !cJSON_IsString(notes))
        problem(&c, "notes", "must be a string, not %s", type_name(notes));
    check_sources(&c, doc);
    return c.n;
}

int hw_check_file(const char *path, dt_buf *report)
{
    dt_err e = {0};
    cJSON *doc = dt_json_read_file(path, &e);
    if (doc == NULL) {
        if (report != NULL) {
            dt_buf_puts(report, e.msg);
            dt_buf_putc(report, '\n');
        }
        return 1;
    }
    int n = hw_check_json(doc, path, report);
    cJSON_Delete(doc);
    return n;
}

/* ---- loading ------------------------------------------------------------- */

static int json_int(const cJSON *obj, const char *key)
{
    return dt_json_int(obj, key, 0);
}

static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

static void read_peaks(const cJSON *obj, double out[HW_NDTYPES])
{
    for (int i = 0; i < HW_NDTYPES; i++)
        out[i] = dt_json_num(obj, dtype_names[i], 0); /* null: no such unit / not measured */
}

/* Fill g from a document that passed the check. */
static void fill(hw_spec *g, const cJSON *d)
{
    copy_str(g->name, sizeof g->name, dt_json_str(d, "name", ""));
    copy_str(g->full_name, sizeof g->full_name, dt_json_str(d, "full_name", ""));
    copy_str(g->arch, sizeof g->arch, dt_json_str(d, "architecture", ""));
    parse_cc(dt_json_str(d, "compute_capability", ""), &g->cc_major, &g->cc_minor);
    g->sm_count = json_int(d, "sm_count");
    g->boost_clock_mhz = dt_json_num(d, "boost_clock_mhz", 0);
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(d, "memory");
    copy_str(g->mem_type, sizeof g->mem_type, dt_json_str(mem, "type", ""));
    g->mem_size_gb = dt_json_num(mem, "size_gb", 0);
    g->mem_bandwidth_gbs = dt_json_num(mem, "bandwidth_gbs", 0);
    g->l2_bytes = (long long)dt_json_i64(d, "l2_bytes", 0);

    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(d, "shared_memory");
    g->smem_per_sm = json_int(sm, "per_sm_bytes");
    g->smem_per_block = json_int(sm, "per_block_bytes");
    g->smem_per_block_optin = json_int(sm, "per_block_optin_bytes");
    g->smem_reserved = json_int(sm, "reserved_per_block_bytes");
    g->smem_granularity = json_int(sm, "alloc_granularity_bytes");
    const cJSON *it;
    g->ncarveouts = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(sm, "carveout_kb"))
    {
        if (g->ncarveouts < HW_MAX_CARVEOUTS)
            g->carveout_kb[g->ncarveouts++] = it->valueint;
    }

    const cJSON *r = cJSON_GetObjectItemCaseSensitive(d, "registers");
    g->regs_per_sm = json_int(r, "per_sm");
    g->regs_per_block = json_int(r, "per_block");
    g->regs_per_thread = json_int(r, "per_thread_max");
    g->reg_alloc_unit = json_int(r, "alloc_unit");
    g->sub_partitions = json_int(r, "sub_partitions");

    const cJSON *l = cJSON_GetObjectItemCaseSensitive(d, "limits");
    g->warp_size = json_int(l, "warp_size");
    g->max_warps_per_sm = json_int(l, "max_warps_per_sm");
    g->max_threads_per_sm = json_int(l, "max_threads_per_sm");
    g->max_blocks_per_sm = json_int(l, "max_blocks_per_sm");
    g->max_threads_per_block = json_int(l, "max_threads_per_block");

    read_peaks(cJSON_GetObjectItemCaseSensitive(d, "peak_tflops"), g->peak_tflops);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(d, "measured");
    g->measured_bandwidth_gbs = dt_json_num(ms, "bandwidth_gbs", 0);
    read_peaks(cJSON_GetObjectItemCaseSensitive(ms, "peak_tflops"), g->measured_tflops);
    copy_str(g->measured_date, sizeof g->measured_date, dt_json_str(ms, "date", ""));

    g->naliases = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(d, "aliases"))
    {
        if (g->naliases < HW_MAX_NAMES)
            copy_str(g->aliases[g->naliases++], sizeof g->aliases[0], it->valuestring);
    }
    g->ndevice_names = 0;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(d, "device_names"))
    {
        if (g->ndevice_names < HW_MAX_NAMES)
            copy_str(g->device_names[g->ndevice_names++], sizeof g->device_names[0],
                     it->valuestring);
    }
}

/* Join the report's lines with "; " into e. */
static void report_to_err(const dt_buf *report, int n, dt_err *e)
{
    dt_buf b = DT_BUF_INIT;
    const char *s = dt_buf_str(report);
    size_t len = strlen(s);
    while (len > 0 && s[len - 1] == '\n')
        len--;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\n')
            dt_buf_puts(&b, "; ");
        else
            dt_buf_putc(&b, s[i]);
    }
    if (n > 1)
        dt_buf_printf(&b, " (%d problems)", n);
    dt_err_set(e, "%s", dt_buf_str(&b));
    dt_buf_free(&b);
}

hw_spec *hw_load_file(const char *path, dt_err *e)
{
    cJSON *doc = dt_json_read_file(path, e);
    if (doc == NULL)
        return NULL;
    dt_buf report = DT_BUF_INIT;
    int n = hw_check_json(doc, path, &report);
    if (n > 0) {
        report_to_err(&report, n, e);
        dt_buf_free(&report);
        cJSON_Delete(doc);
        return NULL;
    }
    dt_buf_free(&report);
    hw_spec *g = dt_xcalloc(1, sizeof *g);
    fill(g, doc);
    g->doc = doc;
    g->path = dt_xstrdup(path);
    return g;
}

void hw_spec_free(hw_spec *g)
{
    if (g == NULL)
        return;
    cJSON_Delete(g->doc);
    free(g->path);
    free(g);
}

char *hw_shipped_dir(void)
{
    /* Found through its README rather than the folder itself: build/dbg/
     * holds a hardware/ folder of object files, which dt_share_path's
     * EXEDIR/hardware layout would otherwise take for the data. */
    char *readme = dt_share_path("hardware/README.md");
    if (readme == NULL)
        return dt_share_path("hardware");
    char *slash = strrchr(readme, '/');
    *slash = '\0';
    /* "build/dbg/../../hardware" reads badly in messages */
    char *real = realpath(readme, NULL);
    if (real == NULL)
        return readme;
    free(readme);
    return real;
}

char *hw_user_dir(void)
{
    char *d = dt_data_dir();
    if (d == NULL)
        return NULL;
    char *p = dt_xasprintf("%s/hardware", d);
    free(d);
    return p;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.json files of dir, sorted; -1 when dir cannot be opened. */
static int json_files(const char *dir, char ***out, int *n)
{
    *out = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int cap = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (ent->d_name[0] == '.' || !dt_endswith(ent->d_name, ".json"))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            *out = dt_xrealloc(*out, (size_t)cap * sizeof **out);
        }
        (*out)[(*n)++] = dt_xasprintf("%s/%s", dir, ent->d_name);
    }
    closedir(d);
    if (*n > 0)
        qsort(*out, (size_t)*n, sizeof **out, cmp_str);
    return 0;
}

static void free_strs(char **v, int n)
{
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static int cmp_spec(const void *a, const void *b)
{
    return strcmp((*(hw_spec *const *)a)->name, (*(hw_spec *const *)b)->name);
}

/* Load every file of dir into (*specs, *n), replacing entries of the same
 * name; user marks them as user copies. */
static void load_dir(const char *dir, int user, hw_spec ***specs, int *n, int *cap,
                     dt_buf *problems)
{
    char **files;
    int nf;
    if (json_files(dir, &files, &nf) != 0)
        return;
    for (int i = 0; i < nf; i++) {
        dt_err e = {0};
        hw_spec *g = hw_load_file(files[i], &e);
        if (g == NULL) {
            if (problems != NULL)
                dt_buf_printf(problems, "%s\n", e.msg);
            continue;
        }
        g->user_copy = user;
        int j;
        for (j = 0; j < *n; j++) {
            if (strcmp((*specs)[j]->name, g->name) == 0)
                break;
        }
        if (j < *n) {
            hw_spec_free((*specs)[j]);
            (*specs)[j] = g;
            continue;
        }
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 16;
            *specs = dt_xrealloc(*specs, (size_t)*cap * sizeof **specs);
        }
        (*specs)[(*n)++] = g;
    }
    free_strs(files, nf);
}

int hw_list(hw_spec ***out, int *n, dt_buf *problems, dt_err *e)
{
    *out = NULL;
    *n = 0;
    char *shipped = hw_shipped_dir();
    if (shipped == NULL)
        return dt_err_set(e, "the hardware/ folder was not found (set DITTO_SHARE to the folder "
                             "that holds it)");
    char **files;
    int nf;
    if (json_files(shipped, &files, &nf) != 0) {
        dt_err_set(e, "%s: cannot read the folder", shipped);
        free(shipped);
        return -1;
    }
    free_strs(files, nf);
    int cap = 0;
    load_dir(shipped, 0, out, n, &cap, problems);
    free(shipped);
    char *user = hw_user_dir();
    if (user != NULL)
        load_dir(user, 1, out, n, &cap, problems);
    free(user);
    if (*n > 1)
        qsort(*out, (size_t)*n, sizeof **out, cmp_spec);
    return 0;
}

void hw_list_free(hw_spec **specs, int n)
{
    for (int i = 0; i < n; i++)
        hw_spec_free(specs[i]);
    free(specs);
}

char *hw_known_names(void)
{
    hw_spec **v;
    int n;
    if (hw_list(&v, &n, NULL, NULL) != 0)
        return dt_xstrdup("(none: the hardware/ folder was not found)");
    dt_buf b = DT_BUF_INIT;
    for (int i = 0; i < n; i++)
        dt_buf_printf(&b, "%s%s", i ? ", " : "", v[i]->name);
    hw_list_free(v, n);
    return dt_buf_take(&b);
}

static int name_matches(const hw_spec *g, const char *name)
{
    if (strcasecmp(g->name, name) == 0)
        return 1;
    for (int i = 0; i < g->naliases; i++) {
        if (strcasecmp(g->aliases[i], name) == 0)
            return 1;
    }
    return 0;
}

/* Take specs[i] out of the list (so hw_list_free leaves it alone). */
static hw_spec *take(hw_spec **specs, int i)
{
    hw_spec *g = specs[i];
    specs[i] = NULL;
    return g;
}

hw_spec *hw_load(const char *name, dt_err *e)
{
    if (name == NULL || *name == '\0') {
        dt_err_set(e, "no GPU name given");
        return NULL;
    }
    /* A path loads that file, for specs kept outside the folders. */
    if (strchr(name, '/') != NULL || dt_endswith(name, ".json"))
        return hw_load_file(name, e);
    /* The file named after the GPU, user copy first, so that a broken file
     * reports its own problems instead of "unknown GPU". */
    char lower[64];
    size_t i;
    for (i = 0; name[i] && i + 1 < sizeof lower; i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    lower[i] = '\0';
    char *dirs[2] = {hw_user_dir(), hw_shipped_dir()};
    hw_spec *found = NULL;
    int tried = 0;
    for (int d = 0; d < 2 && found == NULL && !tried; d++) {
        if (dirs[d] == NULL)
            continue;
        char *p = dt_xasprintf("%s/%s.json", dirs[d], lower);
        if (dt_file_exists(p)) {
            tried = 1;
            found = hw_load_file(p, e);
            if (found != NULL)
                found->user_copy = d == 0;
        }
        free(p);
    }
    free(dirs[0]);
    free(dirs[1]);
    if (found != NULL || tried)
        return found;
    hw_spec **v;
    int n;
    if (hw_list(&v, &n, NULL, e) != 0)
        return NULL;
    for (int k = 0; k < n; k++) {
        if (name_matches(v[k], name)) {
            found = take(v, k);
            break;
        }
    }
    if (found == NULL) {
        dt_buf b = DT_BUF_INIT;
        for (int k = 0; k < n; k++)
            dt_buf_printf(&b, "%s%s", k ? ", " : "", v[k]->name);
        dt_err_set(e, "unknown GPU '%s'; known: %s", name, n ? dt_buf_str(&b) : "(none)");
        if (e)
            e->code = HW_ENOTFOUND;
        dt_buf_free(&b);
    }
    hw_list_free(v, n);
    return found;
}

/* ---- gpu: auto ------------------------------------------------------------ */

static int cc_num(int major, int minor)
{
    return major * 10 + minor;
}

hw_spec *hw_match(const char *device_name, int cc_major, int cc_minor, int sm_count,
                  hw_match_kind *how, char *warning, size_t warning_len, dt_err *e)
{
    if (warning != NULL && warning_len > 0)
        warning[0] = '\0';
    hw_spec **v;
    int n;
    if (hw_list(&v, &n, NULL, e) != 0)
        return NULL;
    if (n == 0) {
        hw_list_free(v, n);
        dt_err_set(e, "no valid hardware files to match the device against");
        return NULL;
    }
    const char *dev = device_name ? device_name : "";
    int cc = cc_major > 0 ? cc_num(cc_major, cc_minor) : -1;
    hw_spec *g = NULL;
    /* 1. the device's own name, when its compute capability agrees */
    for (int i = 0; i < n && g == NULL && *dev; i++) {
        for (int k = 0; k < v[i]->ndevice_names; k++) {
            if (fnmatch(v[i]->device_names[k], dev, FNM_CASEFOLD) == 0 &&
                (cc < 0 || cc == cc_num(v[i]->cc_major, v[i]->cc_minor))) {
                g = take(v, i);
                break;
            }
        }
    }
    if (g != NULL) {
        if (how)
            *how = HW_MATCH_NAME;
        hw_list_free(v, n);
        return g;
    }
    /* 2. and 3.: the nearest compute capability (equal when there is one),
     * then the nearest SM count, then the name order for determinism. A tie
     * in capability distance prefers the older part, whose limits are the
     * more conservative. */
    int best = -1;
    long best_key[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) {
        int gcc = cc_num(v[i]->cc_major, v[i]->cc_minor);
        long key[3] = {cc < 0 ? 0 : labs((long)gcc - cc), cc < 0 ? 0 : (gcc > cc),
                       sm_count > 0 ? labs((long)v[i]->sm_count - sm_count) : 0};
        if (best < 0 || key[0] < best_key[0] ||
            (key[0] == best_key[0] &&
             (key[1] < best_key[1] || (key[1] == best_key[1] && key[2] < best_key[2])))) {
            best = i;
            memcpy(best_key, key, sizeof key);
        }
    }
    g = take(v, best);
    hw_list_free(v, n);
    char smtxt[32] = "";
    if (sm_count > 0)
        snprintf(smtxt, sizeof smtxt, ", %d SMs", sm_count);
    char cctxt[32] = "cc unknown";
    if (cc >= 0)
        snprintf(cctxt, sizeof cctxt, "cc %d.%d", cc_major, cc_minor);
    int same = cc >= 0 && best_key[0] == 0;
    if (how)
        *how = same ? HW_MATCH_CC : HW_MATCH_NEAREST;
    if (warning != NULL && warning_len > 0) {
        if (same)
            snprintf(warning, warning_len,
                     "no hardware file names '%s' (%s%s): using %s (%s), a part of the same "
                     "compute capability; its clocks, bandwidth and peaks may differ",
                     dev, cctxt, smtxt, g->name, g->full_name);
        else
            snprintf(warning, warning_len,
                     "no hardware file for '%s' (%s%s): using %s (%s, cc %d.%d), the nearest "
                     "known part; occupancy limits and peaks may be wrong -- add "
                     "hardware/NAME.json for this GPU",
                     dev, cctxt, smtxt, g->name, g->full_name, g->cc_major, g->cc_minor);
    }
    return g;
}

/* ---- calibration ---------------------------------------------------------- */

static cJSON *obj_child(cJSON *obj, const char *key)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsObject(v)) {
        v = dt_json_obj();
        dt_json_set_take(obj, key, v);
    }
    return v;
}

int hw_set_measured(hw_spec *g, double bandwidth_gbs, const double tflops[HW_NDTYPES],
                    const char *method, dt_err *e)
{
    if (!isfinite(bandwidth_gbs))
        return dt_err_set(e, "measured bandwidth is not a finite number");
    for (int i = 0; tflops != NULL && i < HW_NDTYPES; i++) {
        if (!isfinite(tflops[i]))
            return dt_err_set(e, "measured %s peak is not a finite number", dtype_names[i]);
    }
    if (bandwidth_gbs > 1.1 * g->mem_bandwidth_gbs)
        return dt_err_set(e,
                          "measured bandwidth %.0f GB/s is above the datasheet's %.0f GB/s: "
                          "the measurement is wrong",
                          bandwidth_gbs, g->mem_bandwidth_gbs);
    cJSON *ms = obj_child(g->doc, "measured");
    cJSON *pk = obj_child(ms, "peak_tflops");
    if (bandwidth_gbs > 0) {
        g->measured_bandwidth_gbs = bandwidth_gbs;
        dt_json_set_num(ms, "bandwidth_gbs", bandwidth_gbs);
    }
    for (int i = 0; tflops != NULL && i < HW_NDTYPES; i++) {
        if (tflops[i] > 0) {
            g->measured_tflops[i] = tflops[i];
            dt_json_set_num(pk, dtype_names[i], tflops[i]);
        }
    }
    char when[32];
    dt_iso_time(dt_wall_now(), when, sizeof when);
    copy_str(g->measured_date, sizeof g->measured_date, when);
    dt_json_set_str(ms, "date", when);
    if (method != NULL)
        dt_json_set_str(ms, "method", method);
    return 0;
}

int hw_save_user_copy(const hw_spec *g, char **path_out, dt_err *e)
{
    if (path_out)
        *path_out = NULL;
    dt_buf report = DT_BUF_INIT;
    int n = hw_check_json(g->doc, g->name, &report);
    if (n > 0) {
        report_to_err(&report, n, e);
        dt_buf_free(&report);
        return -1;
    }
    dt_buf_free(&report);
    char *dir = hw_user_dir();
    if (dir == NULL)
        return dt_err_set(e, "no data folder: neither XDG_DATA_HOME nor HOME is set");
    if (dt_mkdir_p(dir, e) != 0) {
        free(dir);
        return -1;
    }
    char *path = dt_xasprintf("%s/%s.json", dir, g->name);
    free(dir);
    char *text = dt_json_print(g->doc, 1);
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, text);
    dt_buf_putc(&b, '\n');
    free(text);
    int rc = dt_write_file_atomic(path, b.data, b.len, e);
    dt_buf_free(&b);
    if (rc != 0 || path_out == NULL)
        free(path);
    else
        *path_out = path;
    return rc;
}

double hw_bandwidth(const hw_spec *g, int use_measured, int *measured)
{
    int m = use_measured && g->measured_bandwidth_gbs > 0;
    if (measured)
        *measured = m;
    return (m ? g->measured_bandwidth_gbs : g->mem_bandwidth_gbs) * 1e9;
}

double hw_peak_flops(const hw_spec *g, hw_dtype t, int use_measured, int *measured)
{
    if (t < 0 || t >= HW_NDTYPES) {
        if (measured)
            *measured = 0;
        return 0;
    }
    int m = use_measured && g->measured_tflops[t] > 0;
    if (measured)
        *measured = m;
    return (m ? g->measured_tflops[t] : g->peak_tflops[t]) * 1e12;
}
