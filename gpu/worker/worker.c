/* worker.c -- `ditto worker`: the request loop of gpu/PROTOCOL.md, matrices,
 * compile requests, hello and shutdown. */
#include "gpu/gpu.h"
#include "gpu/ship.h"
#include "gpu/cubincache.h"
#include "gpu/worker/worker.h"
#include "gpu/sandbox.h"

#include "core/schema.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

double wk_copy_gbps = 0.0;
int wk_copy_measured = 0;

static const char *error_names[] = {
    "bad_request", "not_found",     "load_failed", "compile_failed", "no_device",
    "unavailable", "contract",      "launch_failed", "kernel_fault", "cuda_error",
    "out_of_memory", "suspect",     "internal",
};

const char *wk_error_name(int code)
{
    if (code >= WK_EBAD && code <= WK_EINTERNAL)
        return error_names[code - WK_EBAD];
    return "internal";
}

int wk_from_dev(int code)
{
    switch (code) {
    case DEV_ENODEV:
        return WK_ENODEV;
    case DEV_EFAULT:
        return WK_EFAULT;
    case DEV_ECUDA:
        return WK_ECUDA;
    case DEV_ENOMEM:
        return WK_ENOMEM;
    case DEV_ELAUNCH:
        return WK_ELAUNCH;
    case DEV_ECONTRACT:
        return WK_ECONTRACT;
    default:
        return code >= WK_EBAD && code <= WK_EINTERNAL ? code : WK_EINTERNAL;
    }
}

gpu_nvrtc *wk_nvrtc(wk_state *w, dt_err *e)
{
    if (w->nvrtc == NULL && !w->nvrtc_tried) {
        dt_err le = {0};
        w->nvrtc_tried = 1;
        w->nvrtc = gpu_nvrtc_load(&le);
        if (w->nvrtc == NULL)
            snprintf(w->nvrtc_error, sizeof w->nvrtc_error, "%s", le.msg);
    }
    if (w->nvrtc == NULL) {
        e->code = WK_ECOMPILE;
        dt_err_set(e, "NVRTC not available: %s", w->nvrtc_error);
    }
    return w->nvrtc;
}

wk_matrix *wk_matrix_find(wk_state *w, const char *handle)
{
    for (wk_matrix *m = w->matrices; m; m = m->next)
        if (strcmp(m->handle, handle) == 0)
            return m;
    return NULL;
}

static void matrix_free(wk_matrix *m)
{
    for (int i = 0; i < m->nfmts; i++) {
        dev_fmt_free(m->fmts[i]);
        free(m->fmts[i]);
    }
    for (int t = 0; t < 4; t++)
        free(m->rounded[t]);
    if (m->obs_free)
        m->obs_free(m->obs_sets);
    sp_csr_free(m->a);
    free(m->handle);
    free(m->source);
    free(m);
}

static void matrix_remove(wk_state *w, const char *handle)
{
    for (wk_matrix **pp = &w->matrices; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->handle, handle) == 0) {
            wk_matrix *m = *pp;
            *pp = m->next;
            matrix_free(m);
            return;
        }
    }
}

/* ---- hello ---------------------------------------------------------------------- */

static cJSON *lib_json(int loaded, const char *path, const char *version, const char *error)
{
    cJSON *o = dt_json_obj();
    dt_json_set_bool(o, "loaded", loaded);
    if (path && *path)
        dt_json_set_str(o, "path", path);
    if (version && *version)
        dt_json_set_str(o, "version", version);
    if (!loaded && error)
        dt_json_set_str(o, "error", error);
    return o;
}

static int do_hello(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    (void)req;
    dt_json_set_int(out, "protocol", GPU_PROTOCOL_VERSION);
    dt_json_set_str(out, "version", DT_VERSION);
    dt_json_set_int(out, "pid", getpid());
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    dt_json_set_str(out, "host", host); /* with device.index, names the GPU for the pool */
    cJSON *d = dt_json_obj();
    const dev_info *di = &w->dev;
    dt_json_set_bool(d, "present", di->present);
    dt_json_set_int(d, "index", di->index);
    if (di->present) {
        char cc[16];
        snprintf(cc, sizeof cc, "%d.%d", di->cc_major, di->cc_minor);
        dt_json_set_str(d, "name", di->name);
        dt_json_set_str(d, "cc", cc);
        dt_json_set_int(d, "sms", di->sms);
        dt_json_set_int(d, "l2_bytes", di->l2_bytes);
        dt_json_set_num(d, "mem_bytes", (double)di->mem_bytes);
        dt_json_set_int(d, "smem_per_sm", di->smem_per_sm);
        dt_json_set_int(d, "smem_per_block", di->smem_per_block);
        dt_json_set_int(d, "smem_per_block_optin", di->smem_per_block_optin);
        dt_json_set_int(d, "regs_per_sm", di->regs_per_sm);
        dt_json_set_int(d, "max_threads_per_sm", di->max_threads_per_sm);
        dt_json_set_int(d, "max_blocks_per_sm", di->max_blocks_per_sm);
        dt_json_set_int(d, "clock_mhz", di->clock_mhz);
        dt_json_set_int(d, "mem_clock_mhz", di->mem_clock_mhz);
        dt_json_set_int(d, "bus_width", di->bus_width);
    } else {
        dt_json_set_str(d, "reason", di->reason);
    }
    dt_json_set_take(out, "device", d);
    if (di->driver_version) {
        char v[32];
        dt_json_set_int(out, "driver_version", di->driver_version);
        snprintf(v, sizeof v, "%d.%d", di->driver_version / 1000, di->driver_version % 1000 / 10);
        dt_json_set_str(out, "cuda_version", v);
    }
    cJSON *libs = dt_json_obj();
    dt_err ce = {0};
    int cuda_ok = gpu_cuda_load(&ce) == 0;
    dt_json_set_take(libs, "cuda", lib_json(cuda_ok, "libcuda.so.1", NULL, ce.msg));
    dt_err ne = {0};
    gpu_nvrtc *nv = wk_nvrtc(w, &ne);
    dt_json_set_take(libs, "nvrtc", lib_json(nv != NULL, nv ? gpu_nvrtc_path(nv) : NULL,
                                             nv ? gpu_nvrtc_version(nv) : NULL, w->nvrtc_error));
    dt_err se = {0};
    int cs_ok = gpu_cusparse_load(&se) == 0;
    dt_json_set_take(libs, "cusparse", lib_json(cs_ok, gpu_cusparse_path(),
                                                gpu_cusparse_version(), se.msg));
    char why[512] = "";
    int cupti_ok = di->present && gpu_cupti_probe(why, sizeof why) == 0;
    if (!di->present)
        snprintf(why, sizeof why, "no device");
    dt_json_set_take(libs, "cupti", lib_json(cupti_ok, NULL, NULL, why));
    dt_json_set_take(out, "libs", libs);
    cJSON *caps = dt_json_arr();
    const char *always[] = {"load_matrix", "reference"};
    for (size_t i = 0; i < DT_ARRAY_LEN(always); i++)
        cJSON_AddItemToArray(caps, cJSON_CreateString(always[i]));
    if (nv)
        cJSON_AddItemToArray(caps, cJSON_CreateString("compile"));
    if (di->present && nv) {
        const char *gpu_caps[] = {"verify", "measure", "calibrate", "sanitize"};
        for (size_t i = 0; i < DT_ARRAY_LEN(gpu_caps); i++)
            cJSON_AddItemToArray(caps, cJSON_CreateString(gpu_caps[i]));
    }
    if (di->present && cs_ok)
        cJSON_AddItemToArray(caps, cJSON_CreateString("baseline"));
    if (cupti_ok && nv)
        cJSON_AddItemToArray(caps, cJSON_CreateString("metrics"));
    dt_json_set_take(out, "capabilities", caps);
    dt_json_set_num(out, "copy_gbps", wk_copy_gbps);
    dt_json_set_bool(out, "copy_measured", wk_copy_measured);
    (void)e;
    return 0;
}

/* ---- matrices --------------------------------------------------------------------- */

static int do_load(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    const char *src = dt_json_str(req, "matrix", ""); /* required: load_s */
    static int counter = 0;
    char hbuf[32];
    const char *handle = dt_json_str(req, "handle", NULL);
    if (handle == NULL) {
        snprintf(hbuf, sizeof hbuf, "m%d", ++counter);
        handle = hbuf;
    }
    sp_read_opts ro = {.allow_nonfinite = dt_json_bool(req, "allow_nonfinite", 0), .quiet = 1};
    /* A file shipped to this worker (gpu/PROTOCOL.md, "Shipping files")
     * stands in for a path it cannot see. */
    const char *blob = dt_json_str(req, "blob", NULL);
    char *stored = blob ? ship_stored_path(blob, e) : NULL;
    if (blob && stored == NULL)
        return -1;
    if (stored == NULL && strncmp(src, "gen:", 4) != 0 && strncmp(src, "rep:", 4) != 0 &&
        access(src, R_OK) != 0) {
        /* Said apart from a file that does not parse (path_missing): the
         * client ships it. */
        char host[256] = "?";
        gethostname(host, sizeof host - 1);
        e->code = WK_ELOAD;
        dt_json_set_bool(out, "path_missing", 1);
        return dt_err_set(e, "%s: cannot be read on this worker's host (%s, pid %ld): %s", src,
                          host, (long)getpid(), strerror(errno));
    }
    double t0 = dt_now();
    sp_csr *a = sp_load(stored ? stored : src, &ro, e);
    free(stored);
    if (a == NULL) {
        e->code = WK_ELOAD;
        return -1;
    }
    if (a->pattern)
        sp_csr_randomize_pattern_values(a);
    wk_matrix *m = dt_xcalloc(1, sizeof *m);
    m->a = a;
    m->load_seconds = dt_now() - t0;
    if (sp_report_compute(a, dt_json_int(req, "n", 32), dt_json_int(req, "k", 32),
                          &m->report, e) != 0) {
        e->code = WK_ENOMEM;
        sp_csr_free(a);
        free(m);
        return -1;
    }
    matrix_remove(w, handle);
    m->handle = dt_xstrdup(handle);
    m->source = dt_xstrdup(src);
    sp_csr_fingerprint(a, m->fingerprint);
    m->next = w->matrices;
    w->matrices = m;
    dt_json_set_str(out, "handle", m->handle);
    dt_json_set_str(out, "fingerprint", m->fingerprint);
    dt_json_set_bool(out, "pattern_only", a->pattern);
    dt_json_set_num(out, "load_seconds", m->load_seconds);
    dt_json_set_take(out, "report", sp_report_json(&m->report));
    return 0;
}

static int do_unload(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    (void)out;
    const char *h = dt_json_str(req, "handle", "");
    if (wk_matrix_find(w, h) == NULL) {
        e->code = WK_ENOTFOUND;
        return dt_err_set(e, "handle: no loaded matrix '%s'", h);
    }
    matrix_remove(w, h);
    return 0;
}

/* ---- compile ---------------------------------------------------------------------- */

static void cubin_into(wk_state *w, gpu_cubin *c, const char *arch, cJSON *out)
{
    cJSON *cj = gpu_cubin_json(c);
    for (cJSON *f = cj->child; f; f = f->next)
        dt_json_set_take(out, f->string, cJSON_Duplicate(f, 1));
    cJSON_Delete(cj);
    dt_json_set_str(out, "arch", arch);
    if (w->nvrtc)
        dt_json_set_str(out, "nvrtc_version", gpu_nvrtc_version(w->nvrtc));
    if (c->compiled) {
        w->cubins = dt_xrealloc(w->cubins, (size_t)(w->ncubins + 1) * sizeof *w->cubins);
        w->cubins[w->ncubins++] = c;
        char h[32];
        snprintf(h, sizeof h, "c%d", w->ncubins);
        dt_json_set_str(out, "cubin", h);
    } else {
        gpu_cubin_free(c);
    }
}

/* compile with a kernel object and a matrix: exactly as verify and measure
 * will compile it (dtype macros, the contract's defines on that matrix). */
static int compile_kernel_for(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    if (wk_problem_parse(req, &p, e) != 0)
        return -1;
    wk_kernel kn;
    if (wk_kernel_parse(req, &kn, e) != 0)
        return -1;
    gpu_vars vars = {.n = 0};
    dev_fmt f;
    const char *mh = dt_json_str(req, "matrix", NULL);
    int have_fmt = 0;
    if (mh != NULL) {
        wk_matrix *m = wk_matrix_find(w, mh);
        if (m == NULL) {
            wk_kernel_clear(&kn);
            e->code = WK_ENOTFOUND;
            return dt_err_set(e, "matrix: no loaded matrix '%s'", mh);
        }
        cJSON *fparams = wk_format_params(&kn, e);
        if ((kn.contract.format_params != NULL && fparams == NULL) ||
            dev_fmt_build(m->a, kn.contract.format, fparams, p.dtype, 0, &f, e) != 0) {
            cJSON_Delete(fparams);
            wk_kernel_clear(&kn);
            e->code = WK_ECONTRACT;
            return -1;
        }
        cJSON_Delete(fparams);
        have_fmt = 1;
        vars = f.vars;
    }
    gpu_cubin *c = NULL;
    /* "arch": compile for the GPU that will run it (a worker without one
     * compiles for the pool's timing GPUs), as the plain compile does. */
    const char *want = dt_json_str(req, "arch", NULL);
    int rc = 0;
    if (want != NULL && !gpu_cubincache_arch_ok(want)) {
        e->code = WK_EBAD;
        rc = dt_err_set(e, "arch: expected a real architecture such as sm_90, got '%.40s'", want);
    } else {
        w->arch = want;
        rc = wk_compile_for(w, &vars, &kn, &p, &c, e);
        w->arch = NULL;
    }
    if (rc == 0) {
        char arch[16];
        snprintf(arch, sizeof arch, "sm_%d%d", w->dev.present ? w->dev.cc_major : 9,
                 w->dev.present ? w->dev.cc_minor : 0);
        cubin_into(w, c, want ? want : arch, out);
        dt_json_set_take(out, "contract", gpu_contract_json(&kn.contract));
    }
    if (have_fmt)
        dev_fmt_free(&f);
    wk_kernel_clear(&kn);
    return rc;
}

static int do_compile(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    if (cJSON_GetObjectItemCaseSensitive(req, "kernel") != NULL)
        return compile_kernel_for(w, req, out, e);
    const char *src = dt_json_str(req, "source", ""); /* one of source, kernel: compile_s */
    const char *opts[64];
    const char *names[16];
    int nopt = 0, nnames = 0;
    const cJSON *it;
    /* compile_s: at most 64 options and 16 names, all strings */
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "options"))
    {
        if (gpu_sandbox_option(it->valuestring, nopt ? opts[nopt - 1] : NULL, e) != 0) {
            e->code = WK_EBAD;
            return dt_err_prefix(e, "options");
        }
        opts[nopt++] = it->valuestring;
    }
    if (gpu_sandbox_check(src, strlen(src), dt_json_str(req, "name", "kernel.cu"), e) != 0) {
        e->code = WK_EBAD;
        return -1;
    }
    gpu_nvrtc *nv = wk_nvrtc(w, e);
    if (nv == NULL)
        return -1;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(req, "names"))
    names[nnames++] = it->valuestring;
    char arch[16];
    if (w->dev.present)
        snprintf(arch, sizeof arch, "sm_%d%d", w->dev.cc_major, w->dev.cc_minor);
    else
        snprintf(arch, sizeof arch, "sm_90");
    gpu_compile_req cr = {.source = src,
                          .name = dt_json_str(req, "name", "kernel.cu"),
                          .options = opts,
                          .noptions = nopt,
                          .arch = dt_json_str(req, "arch", arch),
                          .names = names,
                          .nnames = nnames};
    gpu_cubin *c = NULL;
    if (gpu_compile(nv, &cr, &c, e) != 0) {
        e->code = WK_ECOMPILE;
        return -1;
    }
    cubin_into(w, c, cr.arch, out);
    return 0;
}

/* ---- dispatch --------------------------------------------------------------------- */

typedef int (*handler)(wk_state *, const cJSON *, cJSON *, dt_err *);

static int do_shutdown(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    (void)w;
    (void)req;
    (void)out;
    (void)e;
    return 0;
}

static int do_blob_begin(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    return ship_begin(&w->ship, req, out, e);
}

static int do_blob_chunk(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    return ship_chunk(&w->ship, req, out, e);
}

static int do_blob_end(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    return ship_end(&w->ship, req, out, e);
}

/* ---- request schemas (gpu/PROTOCOL.md) ------------------------------------------ */

/* Each request's own fields, checked before its handler runs; the problem
 * fields (op, dtype, n, ...) and the kernel object are checked where they
 * are parsed (wk_problem_parse, wk_kernel_parse). Keys not listed are
 * accepted: a newer client may send more than this worker reads. */
static const dt_schema rq_str_s = {.type = DT_SCHEMA_STR, .min_len = 1, .max_len = 4096};
static const dt_schema rq_name_s = {.type = DT_SCHEMA_STR, .min_len = 1, .max_len = 255};
static const dt_schema rq_bool_s = {.type = DT_SCHEMA_BOOL};
static const dt_schema rq_size_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 65536};
static const dt_schema rq_source_s = {.type = DT_SCHEMA_STR,
                                      .flags = DT_SCHEMA_BYTES,
                                      .min_len = 1,
                                      .max_len = GPU_MAX_SOURCE_BYTES};
static const dt_schema rq_options_s = {.type = DT_SCHEMA_ARR, .max_len = 64, .items = &rq_str_s};
static const dt_schema rq_names_s = {.type = DT_SCHEMA_ARR, .max_len = 16, .items = &rq_str_s};
static const dt_schema rq_strs_s = {.type = DT_SCHEMA_ARR, .max_len = 32, .items = &rq_str_s};
static const dt_schema rq_sets_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 128};
static const dt_schema rq_runs_s = {.type = DT_SCHEMA_INT, .min = 1, .max = 1000000};
static const dt_schema rq_seconds_s = {.type = DT_SCHEMA_NUM, .min = 0, .max = 3600};
static const char *const rq_layouts[] = {"row", "col", NULL};
static const dt_schema rq_layout_s = {.type = DT_SCHEMA_STR, .choices = rq_layouts};
static const char *const rq_tools[] = {"memcheck", "racecheck", "initcheck", "synccheck", NULL};
static const dt_schema rq_tool_s = {.type = DT_SCHEMA_STR, .choices = rq_tools};

#define RQ_SCHEMA(var, ...)                                                              \
    static const dt_schema_field var##_fields[] = {__VA_ARGS__, {NULL, NULL, 0}};       \
    static const dt_schema var = {.type = DT_SCHEMA_OBJ, .flags = DT_SCHEMA_OPEN, .fields = var##_fields}

static void compile_rules(dt_schema_ctx *c, const dt_schema *s, const char *path, const cJSON *v)
{
    (void)s;
    (void)path;
    if (cJSON_GetObjectItemCaseSensitive(v, "kernel") == NULL &&
        cJSON_GetObjectItemCaseSensitive(v, "source") == NULL)
        dt_schema_expected(c, "$.source", NULL, "a CUDA source (or a kernel object in $.kernel)");
}

RQ_SCHEMA(envelope_s, {"id", NULL, 0},
          {"req", &(const dt_schema){.type = DT_SCHEMA_STR, .what = "a request name"}, 1});
RQ_SCHEMA(load_s, {"matrix", &rq_str_s, 1}, {"handle", &rq_name_s, 0},
          {"allow_nonfinite", &rq_bool_s, 0}, {"blob", &rq_str_s, 0}, {"n", &rq_size_s, 0},
          {"k", &rq_size_s, 0});
RQ_SCHEMA(unload_s, {"handle", &rq_name_s, 1});
static const dt_schema_field compile_fields[] = {
    {"source", &rq_source_s, 0}, {"name", &rq_name_s, 0},       {"options", &rq_options_s, 0},
    {"names", &rq_names_s, 0},   {"arch", &rq_name_s, 0},       {"matrix", &rq_name_s, 0},
    {"kernel", NULL, 0},         {NULL, NULL, 0}};
static const dt_schema compile_s = {.type = DT_SCHEMA_OBJ,
                                    .flags = DT_SCHEMA_OPEN,
                                    .fields = compile_fields,
                                    .check = compile_rules};
RQ_SCHEMA(verify_s, {"matrix", &rq_name_s, 1}, {"sets", &rq_sets_s, 0}, {"edge", &rq_bool_s, 0},
          {"fresh", &rq_bool_s, 0});
RQ_SCHEMA(measure_s, {"matrix", &rq_name_s, 1}, {"min_runs", &rq_runs_s, 0},
          {"min_seconds", &rq_seconds_s, 0}, {"baseline", &rq_bool_s, 0}, {"fast", &rq_bool_s, 0},
          {"observe", &rq_bool_s, 0});
RQ_SCHEMA(baseline_s, {"matrix", &rq_name_s, 1}, {"layout", &rq_layout_s, 0},
          {"min_runs", &rq_runs_s, 0}, {"min_seconds", &rq_seconds_s, 0}, {"fast", &rq_bool_s, 0},
          {"algs", &rq_strs_s, 0});
RQ_SCHEMA(metrics_s, {"matrix", &rq_name_s, 1}, {"metrics", &rq_strs_s, 0});
RQ_SCHEMA(sanitize_s, {"matrix", &rq_name_s, 1}, {"tool", &rq_tool_s, 0});
RQ_SCHEMA(reference_s, {"matrix", &rq_name_s, 1}, {"layout", &rq_layout_s, 0});

static const struct {
    const char *name;
    handler fn;
    const dt_schema *schema; /* NULL: the handler reads no field (or checks its own) */
} handlers[] = {
    {"hello", do_hello, NULL},
    {"load_matrix", do_load, &load_s},
    {"unload", do_unload, &unload_s},
    {"compile", do_compile, &compile_s},
    {"verify", wk_verify, &verify_s},
    {"measure", wk_measure, &measure_s},
    {"baseline", wk_baseline, &baseline_s},
    {"metrics", wk_metrics, &metrics_s},
    {"calibrate", wk_calibrate, NULL},
    {"sanitize", wk_sanitize, &sanitize_s},
    {"reference", wk_reference, &reference_s},
    {"shutdown", do_shutdown, NULL},
    /* gpu/PROTOCOL.md, "Shipping files" (gpu/ship.c checks their fields) */
    {"blob_begin", do_blob_begin, NULL},
    {"blob_chunk", do_blob_chunk, NULL},
    {"blob_end", do_blob_end, NULL},
};

/* Write one response line; stdout is the protocol channel. */
static void respond(cJSON *resp)
{
    dt_json_utf8_fix(resp); /* requests may carry any bytes; replies are valid UTF-8 */
    char *s = dt_json_print(resp, 0);
    fputs(s, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    free(s);
}

/* Handle one request line; returns 1 when the worker must exit afterwards
 * (shutdown, or a poisoned context), with *status its exit status. */
static int handle_line(wk_state *w, const char *line, size_t len, int *status)
{
    dt_err e = {0};
    cJSON *req = dt_json_parse(line, len, "request", &e);
    cJSON *resp = dt_json_obj();
    if (req == NULL || !cJSON_IsObject(req)) {
        dt_json_set_take(resp, "id", cJSON_CreateNull());
        dt_json_set_bool(resp, "ok", 0);
        dt_json_set_str(resp, "error", "bad_request");
        dt_json_set_str(resp, "message", req ? "expected a JSON object" : e.msg);
        respond(resp);
        cJSON_Delete(resp);
        cJSON_Delete(req);
        return 0;
    }
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(req, "id");
    dt_json_set_take(resp, "id", id ? cJSON_Duplicate(id, 1) : cJSON_CreateNull());
    const char *name = dt_json_str(req, "req", NULL);
    handler fn = NULL;
    const dt_schema *schema = NULL;
    for (size_t i = 0; name && i < DT_ARRAY_LEN(handlers); i++) {
        if (strcmp(handlers[i].name, name) == 0) {
            fn = handlers[i].fn;
            schema = handlers[i].schema;
        }
    }
    int rc;
    cJSON *out = dt_json_obj();
    if (fn == NULL) {
        e.code = WK_EBAD;
        if (name != NULL)
            dt_err_set(&e, "unknown request '%s'", name);
        else
            dt_schema_validate(&envelope_s, req, NULL, &e);
        rc = -1;
    } else if (schema != NULL && dt_schema_validate(schema, req, NULL, &e) != 0) {
        e.code = WK_EBAD;
        rc = -1;
    } else {
        double t0 = dt_now();
        /* Compiled kernels from other hosts in, and what this request
         * compiled out (gpu/PROTOCOL.md, "Sharing compiled kernels"). */
        gpu_cubincache_begin();
        gpu_cubincache_take(req, out);
        rc = fn(w, req, out, &e);
        gpu_cubincache_give(req, out);
        dt_json_set_num(resp, "seconds", dt_now() - t0);
    }
    if (rc == 0) {
        dt_json_set_bool(resp, "ok", 1);
        for (cJSON *f = out->child; f; f = f->next)
            dt_json_set_take(resp, f->string, cJSON_Duplicate(f, 1));
    } else {
        int code = wk_from_dev(e.code);
        dt_json_set_bool(resp, "ok", 0);
        dt_json_set_str(resp, "error", wk_error_name(code));
        dt_json_set_str(resp, "message", e.msg);
        /* Partial results (the numbers behind a 'suspect') still help. */
        for (cJSON *f = out->child; f; f = f->next)
            dt_json_set_take(resp, f->string, cJSON_Duplicate(f, 1));
    }
    respond(resp);
    int quit = 0;
    if (dev_poisoned()) {
        dt_log(DT_LOG_ERROR, "the CUDA context is unusable after a fault; exiting");
        *status = 3;
        quit = 1;
    } else if (fn == do_shutdown) {
        *status = 0;
        quit = 1;
    }
    cJSON_Delete(out);
    cJSON_Delete(resp);
    cJSON_Delete(req);
    return quit;
}

/* Read one request line (without its newline) into b, at most
 * GPU_MAX_REQUEST_BYTES of it: the rest of a longer line is read and
 * dropped, and *too_long says so. Returns 0 at end of input. */
static int read_request(FILE *in, dt_buf *b, int *too_long)
{
    dt_buf_reset(b);
    *too_long = 0;
    int c, any = 0;
    while ((c = getc_unlocked(in)) != EOF) {
        any = 1;
        if (c == '\n')
            break;
        if (b->len < GPU_MAX_REQUEST_BYTES)
            dt_buf_putc(b, (char)c);
        else
            *too_long = 1;
    }
    return any;
}

static void refuse_long_line(size_t max)
{
    cJSON *resp = dt_json_obj();
    dt_json_set_take(resp, "id", cJSON_CreateNull());
    dt_json_set_bool(resp, "ok", 0);
    dt_json_set_str(resp, "error", "bad_request");
    char msg[160];
    snprintf(msg, sizeof msg, "request line over %zu bytes: refused unread", max);
    dt_json_set_str(resp, "message", msg);
    respond(resp);
    cJSON_Delete(resp);
}

static const char worker_usage[] =
    "usage: ditto worker [--device N] [--once]\n"
    "\n"
    "Serve the GPU worker protocol (gpu/PROTOCOL.md) on stdin/stdout: one JSON\n"
    "request per line in, one response per line out, logs on stderr. ditto starts\n"
    "workers itself; run one by hand to debug or to place it on another machine\n"
    "(the launcher in config.json, e.g. \"ssh gpuhost ditto worker --device {device}\").\n"
    "\n"
    "  --device N   the CUDA device to use (default 0)\n"
    "  --once       answer one request and exit (used under compute-sanitizer)\n";

int gpu_worker_main(int argc, char **argv)
{
    int device = 0, once = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            fputs(worker_usage, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            char *end;
            long d = strtol(argv[++i], &end, 10);
            if (*end != '\0' || d < 0 || d > 1024) {
                fprintf(stderr, "ditto worker: --device needs a device index, got '%s'\n",
                        argv[i]);
                return 2;
            }
            device = (int)d;
        } else if (strcmp(argv[i], "--once") == 0) {
            once = 1;
        } else {
            fprintf(stderr, "ditto worker: unknown option '%s'\n%s", argv[i], worker_usage);
            return 2;
        }
    }
    dt_log_set_prefix("ditto worker");
    /* Die with the process that started us (ditto, or the launcher's
     * shell): a kernel or compile that hangs must not outlive it. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* A client that goes away closes our stdout: die quietly, not by
     * SIGPIPE's default message-less death mid-response. */
    signal(SIGPIPE, SIG_IGN);
    wk_state w;
    memset(&w, 0, sizeof w);
    dev_open(device, &w.dev);
    if (!w.dev.present)
        dt_info("no GPU: %s (load, profile, compile and reference still work)", w.dev.reason);
    wk_copy_gbps = gpu_copy_gbps_for(&w.dev, &wk_copy_measured);
    dt_buf lb = DT_BUF_INIT;
    int status = 0, too_long = 0;
    while (read_request(stdin, &lb, &too_long)) {
        if (too_long) {
            refuse_long_line(GPU_MAX_REQUEST_BYTES);
            continue;
        }
        size_t n = lb.len;
        char *line = lb.data;
        while (n > 0 && line[n - 1] == '\r')
            line[--n] = '\0';
        if (n == 0)
            continue;
        if (handle_line(&w, line, n, &status) || once)
            break;
    }
    dt_buf_free(&lb);
    ship_worker_free(w.ship);
    while (w.matrices)
        matrix_remove(&w, w.matrices->handle);
    for (int i = 0; i < w.ncubins; i++)
        gpu_cubin_free(w.cubins[i]);
    free(w.cubins);
    gpu_nvrtc_free(w.nvrtc);
    if (status == 3)
        _exit(3); /* the driver's atexit handlers would touch the dead context */
    return status;
}
