/* calib.c -- calibration (copy bandwidth and FMA peaks into the hardware
 * spec's measured block), the hardware spec of the worker's device, and
 * compute-sanitizer runs with their findings. */
#include "gpu/gpu.h"
#include "gpu/worker/worker.h"
#include "hardware/hardware.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the device's spec ----------------------------------------------------------- */

static hw_spec *device_spec(const dev_info *d, char *warning, size_t wlen)
{
    if (!d->present)
        return NULL;
    dt_err e = {0};
    return hw_match(d->name, d->cc_major, d->cc_minor, d->sms, NULL, warning, wlen, &e);
}

double gpu_copy_gbps_for(const dev_info *d, int *measured)
{
    char warn[256] = "";
    *measured = 0;
    hw_spec *g = device_spec(d, warn, sizeof warn);
    if (g == NULL)
        return 0.0;
    if (warn[0])
        dt_info("%s", warn);
    double bw = hw_bandwidth(g, 1, measured) / 1e9;
    hw_spec_free(g);
    return bw;
}

/* ---- calibrate ---------------------------------------------------------------------- */

typedef struct copy_ud {
    dev_buf *src, *dst;
} copy_ud;

static int enqueue_copy(void *ud, CUstream s, dt_err *e)
{
    copy_ud *c = ud;
    return dev_check(CU(cuMemcpyDtoDAsync)(c->dst->ptr, c->src->ptr, c->src->bytes, s),
                     "device-to-device copy", e);
}

/* Eight independent FMA chains per thread keep every pipe busy; the sum at
 * the end keeps the compiler from removing them. */
static const char fma_source[] =
    "extern \"C\" __global__ void fma_f32(float *out, float a, float b, int iters) {\n"
    "  float x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;\n"
    "  float x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    x0 = fmaf(x0, a, b); x1 = fmaf(x1, a, b); x2 = fmaf(x2, a, b); x3 = fmaf(x3, a, b);\n"
    "    x4 = fmaf(x4, a, b); x5 = fmaf(x5, a, b); x6 = fmaf(x6, a, b); x7 = fmaf(x7, a, b);\n"
    "  }\n"
    "  out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;\n"
    "}\n"
    "extern \"C\" __global__ void fma_f64(double *out, double a, double b, int iters) {\n"
    "  double x0 = threadIdx.x, x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3;\n"
    "  double x4 = x0 + 4, x5 = x0 + 5, x6 = x0 + 6, x7 = x0 + 7;\n"
    "  for (int i = 0; i < iters; i++) {\n"
    "    x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);\n"
    "    x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);\n"
    "  }\n"
    "  out[blockIdx.x * blockDim.x + threadIdx.x] = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;\n"
    "}\n";

typedef struct fma_ud {
    CUfunction fn;
    CUdeviceptr out;
    int is64;
    unsigned blocks;
    int iters;
} fma_ud;

static int enqueue_fma(void *ud, CUstream s, dt_err *e)
{
    fma_ud *f = ud;
    float af = 0.999f, bf = 0.001f;
    double ad = 0.999, bd = 0.001;
    void *args[4] = {&f->out, f->is64 ? (void *)&ad : (void *)&af,
                     f->is64 ? (void *)&bd : (void *)&bf, &f->iters};
    return dev_check(CU(cuLaunchKernel)(f->fn, f->blocks, 1, 1, 256, 1, 1, 0, s, args, NULL),
                     "FMA kernel launch", e);
}

int wk_calibrate(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    (void)req;
    if (!w->dev.present) {
        e->code = WK_ENODEV;
        return dt_err_set(e, "calibrate needs a GPU: %s", w->dev.reason);
    }
    gpu_nvrtc *nv = wk_nvrtc(w, e);
    if (nv == NULL)
        return -1;
    /* Copy bandwidth: 1 GiB each way (a quarter of the free memory at most),
     * far beyond L2, counted as bytes read plus bytes written. */
    size_t free_b = 0, total_b = 0;
    CU(cuMemGetInfo)(&free_b, &total_b);
    size_t bytes = (size_t)1 << 30;
    if (bytes > free_b / 4)
        bytes = free_b / 4;
    dev_buf src = {0}, dst = {0};
    dev_stats cs;
    copy_ud cu = {&src, &dst};
    int rc = -1;
    CUmodule mod = NULL;
    dev_buf fout = {0};
    if (dev_alloc(&src, bytes, e) != 0 || dev_alloc(&dst, bytes, e) != 0 ||
        dev_check(CU(cuMemsetD32Async)(src.ptr, 0x3f800000u, bytes / 4, dev_stream()), "memset",
                  e) != 0 ||
        dev_time(enqueue_copy, &cu, DEV_TIME_WARM, 20, 0.2, 10.0, &cs, e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    double copy_gbps = 2.0 * (double)bytes / (cs.median_us * 1e-6) / 1e9;

    char arch[16];
    snprintf(arch, sizeof arch, "sm_%d%d", w->dev.cc_major, w->dev.cc_minor);
    gpu_compile_req creq = {.source = fma_source, .name = "calibrate.cu", .arch = arch};
    gpu_cubin *cubin = NULL;
    if (gpu_compile(nv, &creq, &cubin, e) != 0 || !cubin->compiled) {
        e->code = WK_EINTERNAL;
        if (cubin && !cubin->compiled)
            dt_err_set(e, "the calibration kernel did not compile: %s", cubin->log);
        gpu_cubin_free(cubin);
        goto done;
    }
    CUresult r = CU(cuModuleLoadData)(&mod, cubin->image);
    gpu_cubin_free(cubin);
    if (dev_check(r, "loading the calibration kernel", e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    unsigned blocks = (unsigned)w->dev.sms * 16;
    if (dev_alloc(&fout, (size_t)blocks * 256 * sizeof(double), e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    double gflops[2] = {0, 0};
    for (int is64 = 0; is64 < 2; is64++) {
        fma_ud f = {NULL, fout.ptr, is64, blocks, is64 ? 2048 : 8192};
        if (dev_check(CU(cuModuleGetFunction)(&f.fn, mod, is64 ? "fma_f64" : "fma_f32"),
                      "finding the calibration kernel", e) != 0) {
            e->code = wk_from_dev(e->code);
            goto done;
        }
        dev_stats fs;
        if (dev_time(enqueue_fma, &f, DEV_TIME_WARM, 10, 0.1, 10.0, &fs, e) != 0) {
            e->code = wk_from_dev(e->code);
            goto done;
        }
        double flops = 2.0 * 8.0 * (double)f.iters * (double)blocks * 256.0;
        gflops[is64] = flops / (fs.median_us * 1e-6) / 1e9;
    }
    dt_json_set_num(out, "copy_gbps", copy_gbps);
    dt_json_set_num(out, "copy_bytes", (double)bytes);
    cJSON *fj = dt_json_obj();
    dt_json_set_num(fj, "fp32", gflops[0]);
    dt_json_set_num(fj, "fp64", gflops[1]);
    dt_json_set_take(out, "fma_gflops", fj);
    /* Into the user's copy of the spec: the roofline and the floor check
     * use it from now on. */
    char warn[256] = "";
    hw_spec *g = device_spec(&w->dev, warn, sizeof warn);
    if (g == NULL) {
        dt_json_set_str(out, "written", "");
        dt_json_set_str(out, "note", "no hardware spec matches this device: nothing written");
    } else {
        double tf[HW_NDTYPES] = {0};
        tf[HW_FP32] = gflops[0] / 1000.0;
        tf[HW_FP64] = gflops[1] / 1000.0;
        char *path = NULL;
        dt_err he = {0};
        if (hw_set_measured(g, copy_gbps, tf, "ditto calibrate: 1 GiB cuMemcpyDtoD (read+write), "
                                              "8-chain FMA kernels",
                            &he) != 0 ||
            hw_save_user_copy(g, &path, &he) != 0) {
            dt_json_set_str(out, "note", he.msg);
        } else {
            dt_json_set_str(out, "written", path);
            dt_json_set_str(out, "spec", g->name);
        }
        if (warn[0])
            dt_json_set_str(out, "warning", warn);
        free(path);
        hw_spec_free(g);
        wk_copy_gbps = copy_gbps;
        wk_copy_measured = 1;
    }
    rc = 0;
done:
    if (mod)
        CU(cuModuleUnload)(mod);
    dev_free(&fout);
    dev_free(&src);
    dev_free(&dst);
    return rc;
}

/* ---- compute-sanitizer ------------------------------------------------------------ */

static char *find_sanitizer(void)
{
    const char *env = getenv("DITTO_COMPUTE_SANITIZER");
    if (env && *env)
        return access(env, X_OK) == 0 ? dt_xstrdup(env) : NULL;
    const char *path = getenv("PATH");
    if (path) {
        char *dirs = dt_xstrdup(path), *save = NULL;
        for (char *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            char *c = dt_xasprintf("%s/compute-sanitizer", d);
            if (access(c, X_OK) == 0) {
                free(dirs);
                return c;
            }
            free(c);
        }
        free(dirs);
    }
    const char *ch = getenv("CUDA_HOME");
    char *c = dt_xasprintf("%s/bin/compute-sanitizer", ch && *ch ? ch : "/usr/local/cuda");
    if (access(c, X_OK) == 0)
        return c;
    free(c);
    return NULL;
}

cJSON *wk_parse_sanitizer(const char *text, int *errors)
{
    cJSON *arr = dt_json_arr();
    *errors = -1;
    cJSON *cur = NULL;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char *line = dt_xstrndup(p, len);
        p += len + (nl ? 1 : 0);
        if (!dt_startswith(line, "========= ")) {
            free(line);
            continue;
        }
        const char *body = line + 10;
        if (dt_startswith(body, "ERROR SUMMARY:")) {
            *errors = atoi(body + 14);
        } else if (dt_startswith(body, "COMPUTE-SANITIZER") || *body == '\0') {
            /* banner */
        } else if (*body != ' ') {
            /* A finding starts unindented: "Invalid __global__ write of size
             * 4 bytes", "Error: Race reported between ...",
             * "Uninitialized __global__ memory read ...". */
            cur = dt_json_obj();
            dt_json_set_str(cur, "kind", body);
            dt_json_set_str(cur, "text", body);
            cJSON_AddItemToArray(arr, cur);
        }
        /* "at func+0x70 in FILE:LINE" (indented, or inside a race line). */
        const char *in = cur ? strstr(body, " in ") : NULL;
        if (in != NULL && cJSON_GetObjectItem(cur, "line") == NULL) {
            const char *loc = in + 4;
            const char *colon = strrchr(loc, ':');
            if (colon && colon[1] >= '0' && colon[1] <= '9') {
                char *file = dt_xstrndup(loc, (size_t)(colon - loc));
                /* keep the base name: NVRTC sources have no real path */
                const char *slash = strrchr(file, '/');
                dt_json_set_str(cur, "file", slash ? slash + 1 : file);
                dt_json_set_int(cur, "line", atoi(colon + 1));
                free(file);
            }
        }
        if (cur && *body == ' ') {
            const char *t = dt_json_str(cur, "text", "");
            char *more = dt_xasprintf("%s; %s", t, body + strspn(body, " "));
            dt_json_set_str(cur, "text", more);
            free(more);
        }
        free(line);
    }
    if (*errors < 0)
        *errors = cJSON_GetArraySize(arr);
    return arr;
}

int wk_sanitize(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    const char *tool = dt_json_str(req, "tool", "memcheck"); /* one of four: worker.c */
    if (!w->dev.present) {
        e->code = WK_ENODEV;
        return dt_err_set(e, "sanitize needs a GPU: %s", w->dev.reason);
    }
    wk_matrix *m = wk_matrix_find(w, dt_json_str(req, "matrix", ""));
    if (m == NULL) {
        e->code = WK_ENOTFOUND;
        return dt_err_set(e, "matrix: no loaded matrix '%s'", dt_json_str(req, "matrix", ""));
    }
    char *san = find_sanitizer();
    if (san == NULL) {
        e->code = WK_EUNAVAIL;
        return dt_err_set(e, "compute-sanitizer is not on PATH (nor in $CUDA_HOME/bin)");
    }
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        free(san);
        e->code = WK_EINTERNAL;
        return dt_err_set(e, "cannot find this executable");
    }
    exe[n] = '\0';
    /* The child loads the same matrix source and runs one verification set
     * of the kernel: a load request, then the verify, through --once twice
     * would lose the matrix; so the child gets a tiny script: load, verify. */
    char dir[] = "/tmp/ditto-sanitize-XXXXXX";
    if (mkdtemp(dir) == NULL) {
        free(san);
        e->code = WK_EINTERNAL;
        return dt_err_set(e, "mkdtemp: %s", strerror(errno));
    }
    char *reqpath = dt_xasprintf("%s/requests.jsonl", dir);
    char *logpath = dt_xasprintf("%s/sanitizer.log", dir);
    char *outpath = dt_xasprintf("%s/replies.jsonl", dir);
    cJSON *load = dt_json_obj();
    dt_json_set_int(load, "id", 1);
    dt_json_set_str(load, "req", "load_matrix");
    dt_json_set_str(load, "matrix", m->source);
    dt_json_set_str(load, "handle", m->handle);
    cJSON *ver = cJSON_Duplicate(req, 1);
    dt_json_set_int(ver, "id", 2);
    dt_json_set_str(ver, "req", "verify");
    dt_json_set_int(ver, "sets", 2);
    dt_json_set_bool(ver, "edge", 0);
    char *l1 = dt_json_print(load, 0), *l2 = dt_json_print(ver, 0);
    char *script = dt_xasprintf("%s\n%s\n", l1, l2);
    free(l1);
    free(l2);
    cJSON_Delete(load);
    cJSON_Delete(ver);
    dt_err we = {0};
    int rc = -1;
    if (dt_write_file_atomic(reqpath, script, strlen(script), &we) != 0) {
        e->code = WK_EINTERNAL;
        dt_err_set(e, "%s", we.msg);
        goto done;
    }
    double t0 = dt_now();
    pid_t pid = fork();
    if (pid < 0) {
        e->code = WK_EINTERNAL;
        dt_err_set(e, "fork: %s", strerror(errno));
        goto done;
    }
    if (pid == 0) {
        int in = open(reqpath, O_RDONLY);
        int o = open(outpath, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (in < 0 || o < 0)
            _exit(126);
        dup2(in, 0);
        dup2(o, 1);
        dup2(o, 2);
        char *logarg = dt_xasprintf("--log-file=%s", logpath);
        execl(san, san, "--tool", tool, "--print-limit", "50", logarg, exe, "worker", (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    size_t loglen = 0;
    char *log = dt_read_file(logpath, &loglen, &we);
    if (log == NULL) {
        e->code = WK_EINTERNAL;
        dt_err_set(e, "compute-sanitizer wrote no log (exit %d): %s",
                   WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), we.msg);
        goto done;
    }
    int errors = 0;
    cJSON *findings = wk_parse_sanitizer(log, &errors);
    dt_json_set_str(out, "tool", tool);
    dt_json_set_bool(out, "available", 1);
    dt_json_set_bool(out, "clean", errors == 0);
    dt_json_set_int(out, "errors", errors);
    dt_json_set_take(out, "findings", findings);
    dt_json_set_num(out, "sanitizer_seconds", dt_now() - t0);
    /* Keep the tail of the raw log for the reader. */
    size_t keep = loglen > 4000 ? 4000 : loglen;
    dt_json_set_str(out, "log_tail", log + loglen - keep);
    free(log);
    rc = 0;
done:
    unlink(reqpath);
    unlink(logpath);
    unlink(outpath);
    rmdir(dir);
    free(reqpath);
    free(logpath);
    free(outpath);
    free(script);
    free(san);
    return rc;
}
