/* spec.c -- GPU spec files: schema check, loading, listing, gpu: auto, calibration copies. */
#include "hardware/hardware.h"

#include "core/schema.h"

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

/* ---- the schema ---------------------------------------------------------- */

/* Every check keeps going after a failure so that a file with five
 * mistakes is fixed in one round, not five. */

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

static int cc_ok(const cJSON *v)
{
    int ma = 0, mi = 0;
    return parse_cc(v->valuestring, &ma, &mi) == 0 && ma >= 7;
}

/* The name is the file's name. */
static int name_ok(const cJSON *v)
{
    for (const char *p = v->valuestring; *p; p++) {
        if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '-'))
            return 0;
    }
    return 1;
}

static int pow2_ok(const cJSON *v)
{
    return is_pow2((long long)v->valuedouble); /* an integer in range: checked before */
}

#define INT_S(lo, hi)                                                                              \
    {                                                                                              \
        .type = DT_SCHEMA_INT, .min = (lo), .max = (hi)                                            \
    }
#define POS_S(hi, fl)                                                                              \
    {                                                                                              \
        .type = DT_SCHEMA_NUM, .flags = DT_SCHEMA_GT_MIN | (fl), .min = 0, .max = (hi)             \
    }
#define STR_S(n, fl)                                                                               \
    {                                                                                              \
        .type = DT_SCHEMA_STR, .flags = (fl), .min_len = 1, .max_len = (n)                         \
    }

static const dt_schema name_s = {.type = DT_SCHEMA_STR,
                                 .min_len = 1,
                                 .max_len = 31,
                                 .valid = name_ok,
                                 .what = "a file name of a-z, 0-9 and '-', at most 31 characters"};
static const dt_schema str95_s = STR_S(95, 0), str31_s = STR_S(31, 0), str15_s = STR_S(15, 0);
static const dt_schema str47_s = STR_S(47, 0), str63_s = STR_S(63, 0);
static const dt_schema str1000_s = STR_S(1000, 0), notes_s = STR_S(4000, 0);
static const dt_schema date_s = STR_S(39, DT_SCHEMA_NULL), method_s = STR_S(200, DT_SCHEMA_NULL);
static const dt_schema aliases_s = {
    .type = DT_SCHEMA_ARR, .max_len = HW_MAX_NAMES, .items = &str47_s};
static const dt_schema device_names_s = {.type = DT_SCHEMA_ARR,
                                         .min_len = 1,
                                         .max_len = HW_MAX_NAMES,
                                         .items = &str63_s,
                                         .what = "a non-empty array of at most 16 device-name "
                                                 "patterns (gpu: auto matches them)"};
static const dt_schema cc_s = {.type = DT_SCHEMA_STR,
                               .max_len = 8,
                               .valid = cc_ok,
                               .what = "a compute capability x.y of 7.0 or later, such as \"9.0\" "
                                       "(ditto has no occupancy rules before 7.0)"};

/* shared_memory */
static const dt_schema smem_s_ = INT_S(1, 16 << 20), reserved_s = INT_S(0, 1 << 16);
static const dt_schema gran_s = {.type = DT_SCHEMA_INT,
                                 .min = 1,
                                 .max = 1 << 16,
                                 .valid = pow2_ok,
                                 .what = "a power of two from 1 to 65536"};
static const dt_schema carve_kb_s = INT_S(0, 1 << 14);
static const dt_schema carveouts_s = {.type = DT_SCHEMA_ARR,
                                      .min_len = 1,
                                      .max_len = HW_MAX_CARVEOUTS,
                                      .items = &carve_kb_s,
                                      .what = "a non-empty array of at most 16 sizes in KB, "
                                              "ascending"};

/* "expected WHAT (other), got obj.key", for rules across fields. */
static void versus(dt_schema_ctx *c, const char *path, const char *key, const cJSON *obj,
                   const char *what, long long other)
{
    char p[DT_SCHEMA_PATH_MAX];
    dt_schema_path(p, sizeof p, path, key);
    dt_schema_expected(c, p, cJSON_GetObjectItemCaseSensitive(obj, key), "%s (%lld)", what, other);
}

static void smem_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *sm)
{
    int64_t per_sm, per_block, optin, reserved;
    int ok_sm = dt_schema_get_int(s, sm, "per_sm_bytes", &per_sm) == 0;
    int ok_blk = dt_schema_get_int(s, sm, "per_block_bytes", &per_block) == 0;
    int ok_opt = dt_schema_get_int(s, sm, "per_block_optin_bytes", &optin) == 0;
    int ok_res = dt_schema_get_int(s, sm, "reserved_per_block_bytes", &reserved) == 0;
    if (ok_sm && ok_blk && per_block > per_sm)
        versus(c, path, "per_block_bytes", sm, "at most shared_memory.per_sm_bytes",
               (long long)per_sm);
    if (ok_blk && ok_opt && optin < per_block)
        versus(c, path, "per_block_optin_bytes", sm,
               "at least the default shared_memory.per_block_bytes", (long long)per_block);
    if (ok_sm && ok_opt && ok_res && optin + reserved > per_sm)
        versus(c, path, "per_block_optin_bytes", sm,
               "at most shared_memory.per_sm_bytes less the reserved bytes per block",
               (long long)(per_sm - reserved));
    const cJSON *co = dt_schema_get(s, sm, "carveout_kb");
    if (co == NULL)
        return;
    char p[DT_SCHEMA_PATH_MAX], q[DT_SCHEMA_PATH_MAX];
    dt_schema_path(p, sizeof p, path, "carveout_kb");
    double prev = -1;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, co)
    {
        dt_schema_index(q, sizeof q, p, i++);
        if (it->valuedouble <= prev) {
            dt_schema_expected(c, q, it, "more than the entry before (%g): sizes ascend strictly",
                               prev);
            return;
        }
        prev = it->valuedouble;
    }
    if (ok_sm && prev * 1024 != (double)per_sm)
        dt_schema_expected(c, q, cJSON_GetArrayItem(co, i - 1),
                           "the largest carveout to be shared_memory.per_sm_bytes in KB (%g)",
                           (double)per_sm / 1024);
}

static const dt_schema_field smem_fields[] = {{"per_sm_bytes", &smem_s_, 1},
                                              {"per_block_bytes", &smem_s_, 1},
                                              {"per_block_optin_bytes", &smem_s_, 1},
                                              {"reserved_per_block_bytes", &reserved_s, 1},
                                              {"alloc_granularity_bytes", &gran_s, 1},
                                              {"carveout_kb", &carveouts_s, 1},
                                              {NULL, NULL, 0}};
static const dt_schema smem_s = {.type = DT_SCHEMA_OBJ, .fields = smem_fields, .check = smem_rules};

/* registers */
static const char *const warp_only[] = {"warp", NULL};
static const dt_schema regs_n_s = INT_S(1, 1 << 24), per_thread_s = INT_S(1, 256);
static const dt_schema parts_s = INT_S(1, 16);
static const dt_schema unit_s = {.type = DT_SCHEMA_INT,
                                 .min = 1,
                                 .max = 1 << 16,
                                 .valid = pow2_ok,
                                 .what = "a power of two from 1 to 65536"};
static const dt_schema regs_gran_s = {
    .type = DT_SCHEMA_STR,
    .choices = warp_only,
    .what = "\"warp\" (cc 7.0 and later allocate registers per warp)"};

static void regs_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *r)
{
    int64_t per_sm, per_block, parts;
    int ok_sm = dt_schema_get_int(s, r, "per_sm", &per_sm) == 0;
    if (ok_sm && dt_schema_get_int(s, r, "per_block", &per_block) == 0 && per_block > per_sm)
        versus(c, path, "per_block", r, "at most registers.per_sm", (long long)per_sm);
    if (ok_sm && dt_schema_get_int(s, r, "sub_partitions", &parts) == 0 && per_sm % parts != 0)
        versus(c, path, "sub_partitions", r, "a divisor of registers.per_sm", (long long)per_sm);
}

static const dt_schema_field regs_fields[] = {{"per_sm", &regs_n_s, 1},
                                              {"per_block", &regs_n_s, 1},
                                              {"per_thread_max", &per_thread_s, 1},
                                              {"alloc_unit", &unit_s, 1},
                                              {"alloc_granularity", &regs_gran_s, 1},
                                              {"sub_partitions", &parts_s, 1},
                                              {NULL, NULL, 0}};
static const dt_schema regs_s = {.type = DT_SCHEMA_OBJ, .fields = regs_fields, .check = regs_rules};

/* limits */
static const dt_schema warp_s = {
    .type = DT_SCHEMA_INT, .min = 32, .max = 32, .what = "32 (every CUDA GPU has 32)"};
static const dt_schema lim1k_s = INT_S(1, 1024), lim64k_s = INT_S(1, 1 << 16);

static void limits_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *l)
{
    int64_t ws, mw, mt, mtb;
    int ok_ws = dt_schema_get_int(s, l, "warp_size", &ws) == 0;
    int ok_mt = dt_schema_get_int(s, l, "max_threads_per_sm", &mt) == 0;
    int ok_mtb = dt_schema_get_int(s, l, "max_threads_per_block", &mtb) == 0;
    if (ok_ws && ok_mt && dt_schema_get_int(s, l, "max_warps_per_sm", &mw) == 0 && mt != mw * ws)
        versus(c, path, "max_threads_per_sm", l, "limits.max_warps_per_sm x limits.warp_size",
               (long long)(mw * ws));
    if (ok_mt && ok_mtb && mtb > mt)
        versus(c, path, "max_threads_per_block", l, "at most limits.max_threads_per_sm",
               (long long)mt);
    if (ok_ws && ok_mtb && mtb % ws != 0)
        versus(c, path, "max_threads_per_block", l, "a multiple of the warp size", (long long)ws);
}

static const dt_schema_field limits_fields[] = {{"warp_size", &warp_s, 1},
                                                {"max_warps_per_sm", &lim1k_s, 1},
                                                {"max_threads_per_sm", &lim64k_s, 1},
                                                {"max_blocks_per_sm", &lim1k_s, 1},
                                                {"max_threads_per_block", &lim64k_s, 1},
                                                {NULL, NULL, 0}};
static const dt_schema limits_s = {
    .type = DT_SCHEMA_OBJ, .fields = limits_fields, .check = limits_rules};

/* memory, peaks, measured */
static const dt_schema clock_s = POS_S(10000, 0), size_gb_s = POS_S(1e5, 0);
static const dt_schema bw_s = POS_S(1e6, 0), bw_null_s = POS_S(1e6, DT_SCHEMA_NULL);
static const dt_schema bus_s = INT_S(1, 1 << 16), sms_s = INT_S(1, 4096);
static const dt_schema l2_s = INT_S(1, 1LL << 40);
static const dt_schema_field mem_fields[] = {{"type", &str15_s, 1},
                                             {"size_gb", &size_gb_s, 1},
                                             {"bus_width_bits", &bus_s, 1},
                                             {"bandwidth_gbs", &bw_s, 1},
                                             {NULL, NULL, 0}};
static const dt_schema mem_s = {.type = DT_SCHEMA_OBJ, .fields = mem_fields};
static const dt_schema peak_s = POS_S(1e6, DT_SCHEMA_NULL);
static const dt_schema fp32_s = {.type = DT_SCHEMA_NUM,
                                 .flags = DT_SCHEMA_GT_MIN,
                                 .min = 0,
                                 .max = 1e6,
                                 .what = "a number above 0 and at most 1000000 (every GPU has FP32 "
                                         "units)"};
/* In hw_dtype order (dtype_names). */
static const dt_schema_field peak_fields[] = {
    {"fp64", &peak_s, 1}, {"fp32", &fp32_s, 1}, {"tf32", &peak_s, 1}, {"fp16", &peak_s, 1},
    {"bf16", &peak_s, 1}, {"fp8", &peak_s, 1},  {"int8", &peak_s, 1}, {NULL, NULL, 0}};
static const dt_schema peaks_s = {.type = DT_SCHEMA_OBJ, .fields = peak_fields};
static const dt_schema_field mpeak_fields[] = {
    {"fp64", &peak_s, 1}, {"fp32", &peak_s, 1}, {"tf32", &peak_s, 1}, {"fp16", &peak_s, 1},
    {"bf16", &peak_s, 1}, {"fp8", &peak_s, 1},  {"int8", &peak_s, 1}, {NULL, NULL, 0}};
static const dt_schema mpeaks_s = {.type = DT_SCHEMA_OBJ, .fields = mpeak_fields};
static const dt_schema_field measured_fields[] = {{"bandwidth_gbs", &bw_null_s, 1},
                                                  {"peak_tflops", &mpeaks_s, 1},
                                                  {"date", &date_s, 1},
                                                  {"method", &method_s, 1},
                                                  {NULL, NULL, 0}};
static const dt_schema measured_s = {.type = DT_SCHEMA_OBJ, .fields = measured_fields};

/* sources */
static const dt_schema key_names_s = {.type = DT_SCHEMA_ARR, .min_len = 1, .items = &str1000_s};
static const dt_schema_field source_fields[] = {
    {"keys", &key_names_s, 1}, {"source", &str1000_s, 1}, {NULL, NULL, 0}};
static const dt_schema source_s = {.type = DT_SCHEMA_OBJ, .fields = source_fields};
static const dt_schema sources_s = {.type = DT_SCHEMA_ARR,
                                    .min_len = 1,
                                    .items = &source_s,
                                    .what = "a non-empty array of {\"keys\": [...], \"source\": "
                                            "\"...\"}"};

static void hw_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *doc);

static const dt_schema_field hw_fields[] = {{"name", &name_s, 1},
                                            {"full_name", &str95_s, 1},
                                            {"architecture", &str31_s, 1},
                                            {"compute_capability", &cc_s, 1},
                                            {"sm_count", &sms_s, 1},
                                            {"shared_memory", &smem_s, 1},
                                            {"registers", &regs_s, 1},
                                            {"limits", &limits_s, 1},
                                            {"boost_clock_mhz", &clock_s, 1},
                                            {"memory", &mem_s, 1},
                                            {"l2_bytes", &l2_s, 1},
                                            {"peak_tflops", &peaks_s, 1},
                                            {"measured", &measured_s, 1},
                                            {"aliases", &aliases_s, 1},
                                            {"device_names", &device_names_s, 1},
                                            {"sources", &sources_s, 1},
                                            {"notes", &notes_s, 0},
                                            {NULL, NULL, 0}};
static const dt_schema hw_s = {.type = DT_SCHEMA_OBJ,
                               .fields = hw_fields,
                               .check = hw_rules,
                               .what = "a hardware file's object"};

/* ---- sources: every number says where it comes from ---------------------- */

/* Is a dotted path one of the schema's keys (present in the file or not)? */
static int schema_key(const char *path)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s", path);
    const dt_schema *s = &hw_s;
    char *save = NULL;
    for (char *part = strtok_r(buf, ".", &save); part != NULL; part = strtok_r(NULL, ".", &save)) {
        const dt_schema_field *f = s != NULL && s->type == DT_SCHEMA_OBJ ? s->fields : NULL;
        while (f != NULL && f->key != NULL && strcmp(f->key, part) != 0)
            f++;
        if (f == NULL || f->key == NULL)
            return 0;
        s = f->schema;
    }
    return 1;
}

/* Does some sources[].keys entry cover path (equal, or a parent of it)? */
static int covered(const cJSON *sources, const char *path)
{
    const cJSON *src;
    cJSON_ArrayForEach(src, sources)
    {
        const cJSON *k;
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(src, "keys"))
        {
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
        cur = cJSON_IsObject(cur) ? cJSON_GetObjectItemCaseSensitive(cur, part) : NULL;
        if (cur == NULL)
            return 0;
    }
    return 1;
}

/* Every number (leaf) under the sourced groups must have a source. */
static void check_sources_cover(dt_schema_ctx *c, const cJSON *sources, const cJSON *v,
                                const char *key)
{
    if (covered(sources, key))
        return;
    if (!cJSON_IsObject(v)) {
        dt_schema_bad(c, "$.sources", "expected a source for %s, got none", key);
        return;
    }
    for (const cJSON *it = v->child; it != NULL; it = it->next) {
        char sub[160];
        snprintf(sub, sizeof sub, "%s.%s", key, it->string);
        check_sources_cover(c, sources, it, sub);
    }
}

static const char *const sourced_groups[] = {
    "compute_capability", "sm_count", "boost_clock_mhz", "memory",   "l2_bytes", "shared_memory",
    "registers",          "limits",   "peak_tflops",     "measured", NULL};

/* Rules across the file: peaks the SMs can reach, measurements the
 * datasheet allows, and a source for every number. */
static void hw_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *doc)
{
    (void)path;
    int64_t sms;
    double clock, bw, mbw, fp32;
    const cJSON *pk = dt_schema_get(s, doc, "peak_tflops");
    if (dt_schema_get_int(s, doc, "sm_count", &sms) == 0 &&
        dt_schema_get_num(s, doc, "boost_clock_mhz", &clock) == 0 &&
        dt_schema_get_num(&peaks_s, pk, "fp32", &fp32) == 0) {
        double cap = 1.25 * (double)sms * 256.0 * clock * 1e6 / 1e12;
        if (fp32 > cap)
            dt_schema_bad(c, "$.peak_tflops.fp32",
                          "expected at most %.1f TFLOP/s (sm_count x 256 FLOP/clock x "
                          "boost_clock_mhz, with 25%% to spare), got %g",
                          cap, fp32);
    }
    const cJSON *ms = dt_schema_get(s, doc, "measured");
    if (dt_schema_get_num(&mem_s, dt_schema_get(s, doc, "memory"), "bandwidth_gbs", &bw) == 0 &&
        dt_schema_get_num(&measured_s, ms, "bandwidth_gbs", &mbw) == 0 && mbw > 1.1 * bw)
        dt_schema_bad(c, "$.measured.bandwidth_gbs",
                      "expected at most 1.1 x memory.bandwidth_gbs (%g GB/s), got %g", 1.1 * bw,
                      mbw);

    const cJSON *src = dt_schema_get(s, doc, "sources");
    if (src == NULL)
        return;
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, src)
    {
        int j = 0;
        const cJSON *k;
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(it, "keys"))
        {
            /* a schema key that is missing is reported as missing already */
            if (!path_exists(doc, k->valuestring) && !schema_key(k->valuestring)) {
                char p[DT_SCHEMA_PATH_MAX];
                snprintf(p, sizeof p, "$.sources[%d].keys[%d]", i, j);
                dt_schema_expected(c, p, k, "a key of this file");
            }
            j++;
        }
        i++;
    }
    for (const char *const *g = sourced_groups; *g != NULL; g++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(doc, *g);
        if (v != NULL)
            check_sources_cover(c, src, v, *g);
    }
}

int hw_check_json(const cJSON *doc, const char *file, dt_buf *report)
{
    dt_schema_ctx c = {.file = file ? file : "(spec)", .out = report};
    return dt_schema_check(&hw_s, doc, &c);
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

hw_spec *hw_load_file(const char *path, dt_err *e)
{
    cJSON *doc = dt_json_read_file(path, e);
    if (doc == NULL)
        return NULL;
    if (dt_schema_validate_all(&hw_s, doc, path, e) != 0) {
        cJSON_Delete(doc);
        return NULL;
    }
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
    if (dt_schema_validate_all(&hw_s, g->doc, g->name, e) != 0)
        return -1;
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
