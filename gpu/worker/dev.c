/* dev.c -- the worker's device layer: context, buffers, uploads of sparse/ layouts,
 * launches and the timing harness. */
#include "gpu/worker/dev.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static struct {
    int ready;
    int poisoned;
    CUdevice dev;
    CUcontext ctx;
    CUstream stream;
    dev_info info;
    dev_buf flush; /* 2 x L2, written before every cold run */
    /* The stream hold (timer_sample): a host-mapped word the stream waits
     * on; hold_state 0 not tried, 1 usable, -1 unavailable. */
    volatile uint32_t *hold_host;
    CUdeviceptr hold_dev;
    uint32_t hold_seq;
    int hold_state;
} D;

int dev_ready(void)
{
    return D.ready;
}

int dev_poisoned(void)
{
    return D.poisoned;
}

CUstream dev_stream(void)
{
    return D.stream;
}

int dev_check(CUresult r, const char *what, dt_err *e)
{
    if (r == CUDA_SUCCESS)
        return 0;
    char buf[256];
    gpu_cu_errstr(r, buf, sizeof buf);
    if (gpu_cu_fatal(r)) {
        D.poisoned = 1;
        if (e)
            e->code = DEV_EFAULT;
        return dt_err_set(e, "%s (%s, during %s)", gpu_cu_fault_text(r), buf, what);
    }
    if (e)
        e->code = r == CUDA_ERROR_OUT_OF_MEMORY ? DEV_ENOMEM
                  : (r == CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES || r == CUDA_ERROR_INVALID_VALUE)
                      ? DEV_ELAUNCH
                      : DEV_ECUDA;
    return dt_err_set(e, "%s: %s", what, buf);
}

static int attr(CUdevice_attribute a)
{
    int v = 0;
    CU(cuDeviceGetAttribute)(&v, a, D.dev);
    return v;
}

void dev_open(int index, dev_info *info)
{
    memset(info, 0, sizeof *info);
    info->index = index;
    dt_err e = {0};
    if (gpu_cuda_load(&e) != 0) {
        snprintf(info->reason, sizeof info->reason, "libcuda not loaded: %s", e.msg);
        return;
    }
    CU(cuDriverGetVersion)(&info->driver_version);
    CUresult r = CU(cuInit)(0);
    if (r != CUDA_SUCCESS) {
        char buf[256];
        snprintf(info->reason, sizeof info->reason, "cuInit failed: %s",
                 gpu_cu_errstr(r, buf, sizeof buf));
        return;
    }
    int count = 0;
    CU(cuDeviceGetCount)(&count);
    if (index < 0 || index >= count) {
        snprintf(info->reason, sizeof info->reason, "device %d requested, %d present", index,
                 count);
        return;
    }
    char buf[256];
    if ((r = CU(cuDeviceGet)(&D.dev, index)) != CUDA_SUCCESS ||
        (r = CU(cuDevicePrimaryCtxRetain)(&D.ctx, D.dev)) != CUDA_SUCCESS ||
        (r = CU(cuCtxSetCurrent)(D.ctx)) != CUDA_SUCCESS ||
        (r = CU(cuStreamCreate)(&D.stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) {
        snprintf(info->reason, sizeof info->reason, "cannot open device %d: %s", index,
                 gpu_cu_errstr(r, buf, sizeof buf));
        return;
    }
    CU(cuDeviceGetName)(info->name, sizeof info->name, D.dev);
    info->cc_major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    info->cc_minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    info->sms = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    info->l2_bytes = attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
    info->smem_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    info->smem_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
    info->smem_per_block_optin = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    info->regs_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR);
    info->max_threads_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    info->max_blocks_per_sm = attr(CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR);
    info->clock_mhz = attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) / 1000;
    info->mem_clock_mhz = attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE) / 1000;
    info->bus_width = attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH);
    CU(cuDeviceTotalMem)(&info->mem_bytes, D.dev);
    info->present = 1;
    D.info = *info;
    D.ready = 1;
}

/* ---- buffers ---- */

/* The slack of an allocation of `bytes`: from the end of the bytes asked
 * for (16 for none) to the end of its pages, at least DEV_SLACK_MIN. */
static size_t slack_end(size_t bytes)
{
    size_t want = bytes ? bytes : 16;
    return (want + DEV_SLACK_MIN + DEV_SLACK_PAGE - 1) / DEV_SLACK_PAGE * DEV_SLACK_PAGE;
}

/* Every allocation takes whole DEV_SLACK_PAGE pages and its slack (the rest
 * of them) holds DEV_SLACK_BYTE up to the first 4-byte boundary, then
 * DEV_SLACK_WORD: a kernel that keeps state past the end of a buffer --
 * beyond the guards, where the driver's rounding would leave memory nobody
 * looks at -- changes it, and dev_slack_changed sees that. The word is a
 * NaN as fp32, as both fp16 halves and as fp64, so a read there poisons a
 * result too. The fill is on the worker's stream, ahead of any use. */
int dev_alloc(dev_buf *b, size_t bytes, dt_err *e)
{
    b->ptr = 0;
    b->bytes = bytes;
    if (!D.ready) {
        if (e)
            e->code = DEV_ENODEV;
        return dt_err_set(e, "no device");
    }
    if (bytes > SIZE_MAX / 2) {
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "cuMemAlloc: %zu bytes is more than any device holds", bytes);
    }
    /* Zero-byte arrays (an empty matrix) still get a valid pointer so that
     * kernels can be launched on them. */
    size_t want = bytes ? bytes : 16, used = (want + 3) & ~(size_t)3, end = slack_end(bytes);
    if (dev_check(CU(cuMemAlloc)(&b->ptr, end), "cuMemAlloc", e) != 0) {
        b->ptr = 0;
        return -1;
    }
    if ((used > want &&
         dev_check(CU(cuMemsetD8Async)(b->ptr + want, DEV_SLACK_BYTE, used - want, D.stream),
                   "filling an allocation's slack", e) != 0) ||
        dev_check(CU(cuMemsetD32Async)(b->ptr + used, DEV_SLACK_WORD, (end - used) / 4, D.stream),
                  "filling an allocation's slack", e) != 0) {
        dev_free(b);
        return -1;
    }
    return 0;
}

int dev_slack_changed(const dev_buf *b, size_t *off, dt_err *e)
{
    *off = 0;
    if (b->ptr == 0)
        return 0;
    size_t want = b->bytes ? b->bytes : 16, used = (want + 3) & ~(size_t)3,
           end = slack_end(b->bytes);
    size_t n = end - want;
    unsigned char *h = malloc(n);
    if (h == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "out of host memory reading an allocation's slack back");
    }
    dev_buf s = {b->ptr + want, n};
    if (dev_download(h, &s, n, e) != 0) {
        free(h);
        return -1;
    }
    int changed = 0;
    for (size_t i = 0; i < used - want && !changed; i++)
        if (h[i] != DEV_SLACK_BYTE) {
            *off = i;
            changed = 1;
        }
    for (size_t i = used - want; i + 4 <= n && !changed; i += 4) {
        uint32_t w;
        memcpy(&w, h + i, 4);
        if (w != DEV_SLACK_WORD) {
            *off = i;
            changed = 1;
        }
    }
    free(h);
    return changed;
}

void dev_free(dev_buf *b)
{
    if (b->ptr && D.ready && !D.poisoned)
        CU(cuMemFree)(b->ptr);
    b->ptr = 0;
    b->bytes = 0;
}

/* The copy goes on the worker's stream and is finished when this returns.
 * That stream is non-blocking: a plain cuMemcpyHtoD runs on the legacy
 * stream, which does not order it before the kernels launched on ours,
 * and from pageable memory it may return with its last bytes still in
 * flight. A kernel could then run before its inputs arrived, or its
 * outputs be overwritten afterwards by the poison the verification
 * battery uploads (seen on the H200: an edge matrix's 32896 SpMM outputs
 * all reported unwritten). */
int dev_copy_in(CUdeviceptr dst, const void *host, size_t bytes, dt_err *e)
{
    if (bytes == 0)
        return 0;
    if (dev_check(CU(cuMemcpyHtoDAsync)(dst, host, bytes, D.stream), "copy to device", e) != 0)
        return -1;
    return dev_check(CU(cuStreamSynchronize)(D.stream), "copy to device", e);
}

int dev_upload(dev_buf *b, const void *host, size_t bytes, dt_err *e)
{
    if (dev_alloc(b, bytes, e) != 0)
        return -1;
    if (bytes == 0)
        return 0;
    if (dev_copy_in(b->ptr, host, bytes, e) != 0) {
        dev_free(b);
        return -1;
    }
    return 0;
}

int dev_download(void *host, const dev_buf *b, size_t bytes, dt_err *e)
{
    if (bytes == 0)
        return 0;
    /* The synchronous copy waits for the stream's work: faults of a kernel
     * surface here. */
    if (dev_sync(e) != 0)
        return -1;
    return dev_check(CU(cuMemcpyDtoH)(host, b->ptr, bytes), "copy from device", e);
}

int dev_zero(const dev_buf *b, dt_err *e)
{
    if (b->bytes == 0)
        return 0;
    if (dev_check(CU(cuMemsetD8Async)(b->ptr, 0, b->bytes, D.stream), "clearing memory", e) != 0)
        return -1;
    return dev_sync(e);
}

int dev_sync(dt_err *e)
{
    return dev_check(CU(cuStreamSynchronize)(D.stream), "kernel execution", e);
}

/* ---- formats ---- */

/* Word-at-a-time hash of a byte range: the unchanged-inputs check hashes
 * every input array after each run, so byte-wise FNV would be the slow
 * part of verifying a large matrix. */
static uint64_t hash_chunk(const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = (h ^ w) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* hash_chunk over 1 MiB chunks in parallel, the chunks' hashes folded in
 * order: the same value whatever the thread count. At 32M nonzeros the
 * format's arrays are some 250 MB, and hashing them on one thread took a
 * tenth of building sell16. */
#define HASH_CHUNK ((size_t)1 << 20)

typedef struct hash_job {
    const unsigned char *p;
    size_t n;
    uint64_t *out;
} hash_job;

/* Chunk c of the n bytes at p. */
static uint64_t hash_chunk_at(const unsigned char *p, size_t n, size_t c)
{
    const size_t at = c * HASH_CHUNK;
    return hash_chunk(p + at, n - at < HASH_CHUNK ? n - at : HASH_CHUNK);
}

static void hash_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const hash_job *j = ctx;
    for (int64_t c = lo; c < hi; c++)
        j->out[c] = hash_chunk_at(j->p, j->n, (size_t)c);
}

uint64_t dev_hash(const void *p, size_t n)
{
    const size_t nch = (n + HASH_CHUNK - 1) / HASH_CHUNK;
    if (nch <= 1)
        return hash_chunk(p, n);
    uint64_t *out = malloc(nch * sizeof *out);
    hash_job j = {p, n, out};
    if (out != NULL)
        sp_parallel_for((int64_t)nch, (int64_t)(n / 8), hash_range, &j);
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ n;
    for (size_t c = 0; c < nch; c++) {
        /* Out of memory for the chunks' hashes: the same fold, serially. */
        const uint64_t hc = out != NULL ? out[c] : hash_chunk_at(p, n, c);
        h = (h ^ hc) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    free(out);
    return h;
}

/* Upload array i of l into f (f->narr is its index) with its hash. */
static int upload_arr(dev_fmt *f, const sp_fmt *l, int i, dt_err *e)
{
    f->names[f->narr] = dt_xstrdup(l->name[i]);
    f->hash[f->narr] = dev_hash(l->data[i], l->bytes[i]);
    f->arr[f->narr].bytes = l->bytes[i];
    if (dev_upload(&f->arr[f->narr], l->data[i], l->bytes[i], e) != 0) {
        free(f->names[f->narr]);
        f->names[f->narr] = NULL;
        return -1;
    }
    f->narr++;
    return 0;
}

int dev_fmt_build(const sp_csr *a, const char *format, const cJSON *params, sp_dtype t, int upload,
                  dev_fmt *f, dt_err *e)
{
    memset(f, 0, sizeof *f);
    f->on_device = upload;
    sp_fmt l;
    if (sp_fmt_build(a, format, params, t, &l, e) != 0) {
        if (e)
            e->code = e->code == SP_ENOMEM ? DEV_ENOMEM : DEV_ECONTRACT;
        return -1;
    }
    snprintf(f->key, sizeof f->key, "%s", l.key);
    f->prep_us = l.prep_us;
    for (int i = 0; i < l.nvars; i++)
        gpu_vars_set(&f->vars, l.var_name[i], l.var_val[i]); /* static names */
    gpu_vars_set(&f->vars, "sms", D.info.sms);
    for (int i = 0; upload && i < l.narr; i++) {
        if (upload_arr(f, &l, i, e) != 0) {
            sp_fmt_free(&l);
            dev_fmt_free(f);
            return -1;
        }
    }
    sp_fmt_free(&l);
    return 0;
}

void dev_fmt_free(dev_fmt *f)
{
    for (int i = 0; i < f->narr; i++) {
        dev_free(&f->arr[i]);
        free(f->names[i]);
    }
    f->narr = 0;
}

int dev_fmt_find(const dev_fmt *f, const char *name, dev_buf *out)
{
    for (int i = 0; i < f->narr; i++) {
        if (strcmp(f->names[i], name) == 0) {
            *out = f->arr[i];
            return 0;
        }
    }
    return -1;
}

int dev_fmt_changed(const dev_fmt *f, const char **which, dt_err *e)
{
    *which = NULL;
    for (int i = 0; i < f->narr; i++) {
        void *tmp = malloc(f->arr[i].bytes ? f->arr[i].bytes : 1);
        if (tmp == NULL) {
            if (e)
                e->code = DEV_ENOMEM;
            return dt_err_set(e, "out of host memory");
        }
        if (dev_download(tmp, &f->arr[i], f->arr[i].bytes, e) != 0) {
            free(tmp);
            return -1;
        }
        uint64_t h = dev_hash(tmp, f->arr[i].bytes);
        free(tmp);
        if (h != f->hash[i]) {
            *which = f->names[i];
            return 0;
        }
    }
    return 0;
}

/* ---- kernels ---- */

int dev_kernel_load(const void *cubin, const char *entry, const gpu_contract *c,
                    const gpu_vars *vars, dev_kernel *k, dt_err *e)
{
    memset(k, 0, sizeof *k);
    if (!D.ready) {
        if (e)
            e->code = DEV_ENODEV;
        return dt_err_set(e, "no device");
    }
    if (dev_check(CU(cuModuleLoadData)(&k->mod, cubin), "loading the CUBIN", e) != 0)
        return -1;
    CUresult r = CU(cuModuleGetFunction)(&k->fn, k->mod, entry);
    if (r != CUDA_SUCCESS) {
        CU(cuModuleUnload)(k->mod);
        k->mod = NULL;
        if (e)
            e->code = DEV_ECONTRACT;
        return dt_err_set(e,
                          "the CUBIN has no kernel '%s' (declare it extern \"C\" or give a "
                          "name expression)",
                          entry);
    }
    CU(cuFuncGetAttribute)(&k->regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->fn);
    CU(cuFuncGetAttribute)(&k->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn);
    CU(cuFuncGetAttribute)(&k->local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, k->fn);
    CU(cuFuncGetAttribute)(&k->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn);
    dt_err ee = {0};
    int64_t v;
    for (int i = 0; i < 3; i++) {
        if (gpu_eval(c->block[i], vars, &v, &ee) != 0)
            goto bad_expr;
        k->block[i] = (int)v;
        if (gpu_eval(c->grid[i], vars, &v, &ee) != 0)
            goto bad_expr;
        if (v < 0 || v > (i == 0 ? INT32_MAX : 65535)) {
            dt_err_set(&ee, "grid[%d] = %lld is outside [0, %d]", i, (long long)v,
                       i == 0 ? INT32_MAX : 65535);
            goto bad_expr;
        }
        k->grid[i] = (int)v;
    }
    if (gpu_eval(c->smem, vars, &v, &ee) != 0)
        goto bad_expr;
    k->smem = (int)v;
    if (c->scratch_bytes) {
        if (gpu_eval(c->scratch_bytes, vars, &v, &ee) != 0)
            goto bad_expr;
        k->scratch_bytes = (size_t)v;
    }
    int64_t threads = (int64_t)k->block[0] * k->block[1] * k->block[2];
    if (threads < 1 || threads > k->max_threads) {
        dev_kernel_unload(k);
        if (e)
            e->code = DEV_ELAUNCH;
        return dt_err_set(e,
                          "block of %lld threads, but '%s' allows at most %d (it uses %d "
                          "registers per thread)",
                          (long long)threads, entry, k->max_threads, k->regs);
    }
    if (k->smem + k->static_smem > D.info.smem_per_block_optin) {
        dev_kernel_unload(k);
        if (e)
            e->code = DEV_ELAUNCH;
        return dt_err_set(e,
                          "%d bytes of shared memory (%d static + %d dynamic) exceed the "
                          "device's %d per block",
                          k->smem + k->static_smem, k->static_smem, k->smem,
                          D.info.smem_per_block_optin);
    }
    if (k->smem + k->static_smem > 48 * 1024) {
        r = CU(cuFuncSetAttribute)(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k->smem);
        if (dev_check(r, "opting in to more than 48 KB of shared memory", e) != 0) {
            dev_kernel_unload(k);
            return -1;
        }
    }
    return 0;
bad_expr:
    dev_kernel_unload(k);
    if (e)
        e->code = DEV_ECONTRACT;
    return dt_err_set(e, "launch contract: %s", ee.msg);
}

void dev_kernel_unload(dev_kernel *k)
{
    if (k->mod && D.ready && !D.poisoned)
        CU(cuModuleUnload)(k->mod);
    k->mod = NULL;
    k->fn = NULL;
}

void dev_bind_ptr(dev_bind *b, const char *name, CUdeviceptr p)
{
    for (int i = 0; i < b->n; i++) {
        if (strcmp(b->names[i], name) == 0) {
            b->ptrs[i] = p;
            return;
        }
    }
    if (b->n < (int)DT_ARRAY_LEN(b->names)) {
        b->names[b->n] = name;
        b->ptrs[b->n] = p;
        b->n++;
    }
}

typedef union {
    int32_t i;
    float f;
    double d;
    CUdeviceptr p;
} arg_slot;

int dev_launch(const dev_kernel *k, const gpu_contract *c, const dev_bind *b, CUstream s, dt_err *e)
{
    arg_slot slot[GPU_MAX_PARAMS];
    void *args[GPU_MAX_PARAMS];
    for (int i = 0; i < c->nparams; i++) {
        const char *p = c->params[i];
        args[i] = &slot[i];
        int64_t v;
        dev_buf buf;
        if (strcmp(p, "alpha") == 0 || strcmp(p, "beta") == 0) {
            double x = p[0] == 'a' ? b->alpha : b->beta;
            if (b->dtype == SP_FP64)
                slot[i].d = x;
            else
                slot[i].f = (float)x;
            continue;
        }
        if (strcmp(p, "scratch") == 0) {
            slot[i].p = b->scratch.ptr;
            continue;
        }
        if (b->fmt && dev_fmt_find(b->fmt, p, &buf) == 0) {
            slot[i].p = buf.ptr;
            continue;
        }
        int found = 0;
        for (int j = 0; j < b->n; j++) {
            if (strcmp(b->names[j], p) == 0) {
                slot[i].p = b->ptrs[j];
                found = 1;
                break;
            }
        }
        if (found)
            continue;
        if (b->fmt && gpu_vars_get(&b->fmt->vars, p, &v) == 0) {
            slot[i].i = (int32_t)v;
            continue;
        }
        if (e)
            e->code = DEV_ECONTRACT;
        return dt_err_set(e, "parameter '%s' has nothing to bind to for this op and format", p);
    }
    if (k->scratch_bytes > 0 && !c->scratch_once &&
        dev_check(CU(cuMemsetD8Async)(b->scratch.ptr, 0, k->scratch_bytes, s), "clearing scratch",
                  e) != 0)
        return -1;
    if (k->grid[0] == 0 || k->grid[1] == 0 || k->grid[2] == 0)
        return 0; /* nothing to do (an empty matrix) */
    CUresult r =
        CU(cuLaunchKernel)(k->fn, (unsigned)k->grid[0], (unsigned)k->grid[1], (unsigned)k->grid[2],
                           (unsigned)k->block[0], (unsigned)k->block[1], (unsigned)k->block[2],
                           (unsigned)k->smem, s, args, NULL);
    return dev_check(r, "cuLaunchKernel", e);
}

/* ---- timing ---- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summarize(double *t, int n, dev_stats *out)
{
    memset(out, 0, sizeof *out);
    if (n == 0)
        return;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    out->valid = 1;
    out->runs = n;
    out->min_us = t[0];
    out->max_us = t[n - 1];
    out->median_us = n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    out->p10_us = t[(int)floor(0.1 * (n - 1) + 0.5)];
    out->p90_us = t[(int)floor(0.9 * (n - 1) + 0.5)];
}

#define GRAPH_LAUNCHES 50
#define MAX_RUNS       20000

/* One timed side: its work, warmed up and (graph mode) captured. */
typedef struct timer {
    dev_enqueue_fn fn;
    void *ud;
    const dev_observer *obs; /* NULL: none */
    dev_time_mode mode;
    CUgraph g;
    CUgraphExec ge;
    CUgraph gf; /* graph mode with a refill: the refills alone */
    CUgraphExec gfe;
    unsigned samples; /* taken so far, for prep's and after's sample number */
} timer;

static void timer_close(timer *t)
{
    if (!D.poisoned) {
        if (t->ge)
            CU(cuGraphExecDestroy)(t->ge);
        if (t->g)
            CU(cuGraphDestroy)(t->g);
        if (t->gfe)
            CU(cuGraphExecDestroy)(t->gfe);
        if (t->gf)
            CU(cuGraphDestroy)(t->gf);
    }
    t->ge = NULL;
    t->g = NULL;
    t->gfe = NULL;
    t->gf = NULL;
}

/* Capture GRAPH_LAUNCHES launches of fn (each after a refill when with_fn
 * and the observer has one; the refills alone when !with_fn) into *g,
 * instantiated into *ge. */
static int capture(timer *t, int with_fn, CUgraph *g, CUgraphExec *ge, dt_err *e)
{
    CUstream s = D.stream;
    if (dev_check(CU(cuStreamBeginCapture)(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                  "beginning graph capture", e) != 0)
        return -1;
    int ok = 1;
    for (int i = 0; i < GRAPH_LAUNCHES && ok; i++) {
        if (t->obs && t->obs->refill)
            ok = t->obs->refill(t->obs->ud, s, e) == 0;
        if (ok && with_fn)
            ok = t->fn(t->ud, s, e) == 0;
    }
    CUresult r = CU(cuStreamEndCapture)(s, g);
    if (!ok)
        return -1;
    if (dev_check(r, "ending graph capture", e) != 0 ||
        dev_check(CU(cuGraphInstantiate)(ge, *g, 0), "instantiating the graph", e) != 0)
        return -1;
    return 0;
}

/* Warm-up (module load, first touch and clock ramp stay out of the numbers)
 * and, for graph mode, GRAPH_LAUNCHES launches captured into one graph. */
static int timer_open(timer *t, dev_enqueue_fn fn, void *ud, const dev_observer *obs,
                      dev_time_mode mode, dt_err *e)
{
    memset(t, 0, sizeof *t);
    t->fn = fn;
    t->ud = ud;
    t->obs = obs;
    t->mode = mode;
    CUstream s = D.stream;
    if (mode == DEV_TIME_COLD && D.flush.ptr == 0 &&
        dev_alloc(&D.flush, 2 * (size_t)(D.info.l2_bytes > 0 ? D.info.l2_bytes : 64 << 20), e) != 0)
        return -1;
    if (obs && obs->prep && obs->prep(obs->ud, s, DEV_SAMPLE_WARMUP, e) != 0)
        return -1;
    for (int w = 0; w < 3; w++)
        if (fn(ud, s, e) != 0)
            return -1;
    if (dev_sync(e) != 0)
        return -1;
    if (mode != DEV_TIME_GRAPH)
        return 0;
    if (capture(t, 1, &t->g, &t->ge, e) != 0)
        return -1;
    if (obs && obs->refill && capture(t, 0, &t->gf, &t->gfe, e) != 0)
        return -1;
    for (int w = 0; w < 2; w++)
        if (dev_check(CU(cuGraphLaunch)(t->ge, s), "graph launch", e) != 0 ||
            (t->gfe && dev_check(CU(cuGraphLaunch)(t->gfe, s), "graph launch", e) != 0))
            return -1;
    return dev_sync(e);
}

/* The stream hold: before a sample's first event the stream waits on a
 * host-mapped word, and the host releases it only once the whole sample
 * (flush, events, work) is enqueued. Without it the GPU starts on the
 * first launch while the host is still submitting the rest, and for
 * launches shorter than their submission (a graph of 50 tiny kernels, a
 * multi-kernel cuSPARSE call) the events time the host: on the H200 a
 * 4 us cuSPARSE algorithm moved by up to 20 % between calls seconds apart
 * while staying within 2 % inside each call. */
static int timer_enqueue(timer *t, CUevent ev0, CUevent ev1, unsigned salt, dt_err *e);

static int hold_ready(void)
{
    if (D.hold_state != 0)
        return D.hold_state > 0;
    D.hold_state = -1;
    void *h = NULL;
    if (CU(cuMemHostAlloc)(&h, 64, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) !=
        CUDA_SUCCESS)
        return 0;
    if (CU(cuMemHostGetDevicePointer)(&D.hold_dev, h, 0) != CUDA_SUCCESS) {
        CU(cuMemFreeHost)(h);
        return 0;
    }
    D.hold_host = h;
    *D.hold_host = 0;
    D.hold_seq = 0;
    D.hold_state = 1;
    return 1;
}

/* Enqueue the wait; returns the value that releases it (0: no hold). */
static uint32_t hold_enqueue(CUstream s)
{
    if (!hold_ready())
        return 0;
    uint32_t v = ++D.hold_seq;
    if (v == 0) { /* wrapped: restart the sequence */
        *D.hold_host = 0;
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
        v = D.hold_seq = 1;
    }
    if (CU(cuStreamWaitValue32)(s, D.hold_dev, v, CU_STREAM_WAIT_VALUE_GEQ) != CUDA_SUCCESS) {
        D.hold_state = -1; /* not supported here: time without it */
        return 0;
    }
    return v;
}

static void hold_release(uint32_t v)
{
    if (v == 0)
        return;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    *D.hold_host = v;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
}

/* One sample: the L2 flush (cold) outside the events, the work inside, all
 * of it held until enqueued. *us is per launch; *span_s the measured
 * device time. */
static int timer_sample(timer *t, CUevent ev0, CUevent ev1, unsigned salt, double *us,
                        double *span_s, dt_err *e)
{
    CUstream s = D.stream;
    unsigned sample = t->samples++;
    /* The refills alone first (graph mode with a refill), then the sample;
     * so that the output the after hook reads is the sample's. */
    float fill_ms = 0;
    if (t->gfe) {
        uint32_t hold = hold_enqueue(s);
        int rc = dev_check(CU(cuEventRecord)(ev0, s), "cuEventRecord", e) != 0 ||
                         dev_check(CU(cuGraphLaunch)(t->gfe, s), "graph launch", e) != 0 ||
                         dev_check(CU(cuEventRecord)(ev1, s), "cuEventRecord", e) != 0
                     ? -1
                     : 0;
        hold_release(hold);
        if (rc != 0 || dev_check(CU(cuEventSynchronize)(ev1), "refill graph", e) != 0 ||
            dev_check(CU(cuEventElapsedTime)(&fill_ms, ev0, ev1), "cuEventElapsedTime", e) != 0)
            return -1;
    }
    if (t->obs && t->obs->prep && t->obs->prep(t->obs->ud, s, sample, e) != 0)
        return -1;
    uint32_t hold = hold_enqueue(s);
    int rc = timer_enqueue(t, ev0, ev1, salt, e);
    hold_release(hold);
    if (rc != 0)
        return -1;
    if (dev_check(CU(cuEventSynchronize)(ev1), "kernel execution", e) != 0)
        return -1;
    float ms = 0;
    if (dev_check(CU(cuEventElapsedTime)(&ms, ev0, ev1), "cuEventElapsedTime", e) != 0)
        return -1;
    *span_s = ms * 1e-3;
    /* With refills the launches' own time is the difference; never below
     * 1 % of the sample, so that noise cannot make it vanish. */
    double k_ms = t->gfe ? (double)ms - (double)fill_ms : (double)ms;
    if (t->gfe && k_ms < 0.01 * (double)ms)
        k_ms = 0.01 * (double)ms;
    *us = k_ms * 1000.0 / (t->mode == DEV_TIME_GRAPH ? GRAPH_LAUNCHES : 1);
    if (t->obs && t->obs->after && t->obs->after(t->obs->ud, sample, e) != 0)
        return -1;
    return 0;
}

static int timer_enqueue(timer *t, CUevent ev0, CUevent ev1, unsigned salt, dt_err *e)
{
    CUstream s = D.stream;
    if (t->mode == DEV_TIME_COLD &&
        dev_check(CU(cuMemsetD32Async)(D.flush.ptr, salt, D.flush.bytes / 4, s), "flushing L2",
                  e) != 0)
        return -1;
    if (dev_check(CU(cuEventRecord)(ev0, s), "cuEventRecord", e) != 0)
        return -1;
    if (t->mode == DEV_TIME_GRAPH) {
        if (dev_check(CU(cuGraphLaunch)(t->ge, s), "graph launch", e) != 0)
            return -1;
    } else if (t->fn(t->ud, s, e) != 0) {
        return -1;
    }
    return dev_check(CU(cuEventRecord)(ev1, s), "cuEventRecord", e);
}

static int events_new(CUevent *ev0, CUevent *ev1, dt_err *e)
{
    *ev0 = *ev1 = NULL;
    return dev_check(CU(cuEventCreate)(ev0, CU_EVENT_DEFAULT), "cuEventCreate", e) != 0 ||
                   dev_check(CU(cuEventCreate)(ev1, CU_EVENT_DEFAULT), "cuEventCreate", e) != 0
               ? -1
               : 0;
}

static void events_free(CUevent ev0, CUevent ev1)
{
    if (D.poisoned)
        return;
    if (ev0)
        CU(cuEventDestroy)(ev0);
    if (ev1)
        CU(cuEventDestroy)(ev1);
}

static int not_ready(dt_err *e)
{
    if (e)
        e->code = DEV_ENODEV;
    return dt_err_set(e, "no device");
}

int dev_time(dev_enqueue_fn fn, void *ud, dev_time_mode mode, int min_runs, double min_seconds,
             double max_seconds, dev_stats *out, dt_err *e)
{
    return dev_time_obs(fn, ud, NULL, mode, min_runs, min_seconds, max_seconds, out, e);
}

int dev_time_obs(dev_enqueue_fn fn, void *ud, const dev_observer *obs, dev_time_mode mode,
                 int min_runs, double min_seconds, double max_seconds, dev_stats *out, dt_err *e)
{
    memset(out, 0, sizeof *out);
    if (!D.ready)
        return not_ready(e);
    CUevent ev0 = NULL, ev1 = NULL;
    timer t;
    memset(&t, 0, sizeof t);
    double *samples = NULL;
    int rc = -1;
    if (events_new(&ev0, &ev1, e) != 0 || timer_open(&t, fn, ud, obs, mode, e) != 0)
        goto out;
    samples = malloc(MAX_RUNS * sizeof *samples);
    if (samples == NULL) {
        dt_err_set(e, "out of host memory");
        goto out;
    }
    int n = 0;
    double total = 0.0, start = dt_now();
    while (n < MAX_RUNS) {
        if (n >= min_runs && total >= min_seconds)
            break;
        if (n >= 3 && dt_now() - start > max_seconds)
            break;
        double us = 0, span = 0;
        if (timer_sample(&t, ev0, ev1, (unsigned)n, &us, &span, e) != 0)
            goto out;
        total += span;
        samples[n++] = us;
    }
    summarize(samples, n, out);
    rc = 0;
out:
    free(samples);
    timer_close(&t);
    events_free(ev0, ev1);
    return rc;
}

int dev_time_pair(dev_enqueue_fn fa, void *ua, dev_enqueue_fn fb, void *ub, dev_time_mode mode,
                  int min_rounds, double min_seconds, double max_seconds, dev_pair_stats *out,
                  dt_err *e)
{
    return dev_time_pair_obs(fa, ua, NULL, fb, ub, NULL, mode, min_rounds, min_seconds, max_seconds,
                             out, e);
}

int dev_time_pair_obs(dev_enqueue_fn fa, void *ua, const dev_observer *oa, dev_enqueue_fn fb,
                      void *ub, const dev_observer *ob, dev_time_mode mode, int min_rounds,
                      double min_seconds, double max_seconds, dev_pair_stats *out, dt_err *e)
{
    memset(out, 0, sizeof *out);
    if (!D.ready)
        return not_ready(e);
    CUevent ev0 = NULL, ev1 = NULL;
    timer ta, tb;
    memset(&ta, 0, sizeof ta);
    memset(&tb, 0, sizeof tb);
    double *sa = NULL, *sb = NULL, *ratio = NULL;
    int rc = -1;
    if (events_new(&ev0, &ev1, e) != 0 || timer_open(&ta, fa, ua, oa, mode, e) != 0 ||
        timer_open(&tb, fb, ub, ob, mode, e) != 0)
        goto out;
    sa = malloc(MAX_RUNS * sizeof *sa);
    sb = malloc(MAX_RUNS * sizeof *sb);
    ratio = malloc(MAX_RUNS * sizeof *ratio);
    if (sa == NULL || sb == NULL || ratio == NULL) {
        dt_err_set(e, "out of host memory");
        goto out;
    }
    int n = 0;
    double total = 0.0, start = dt_now();
    while (n < MAX_RUNS) {
        if (n >= min_rounds && total >= min_seconds)
            break;
        if (n >= 3 && dt_now() - start > max_seconds)
            break;
        /* a then b in even rounds, b then a in odd ones: neither side always
         * runs right after the other's L2 flush or clock step. */
        timer *first = n % 2 ? &tb : &ta, *second = n % 2 ? &ta : &tb;
        double u1 = 0, u2 = 0, s1 = 0, s2 = 0;
        if (timer_sample(first, ev0, ev1, (unsigned)(2 * n), &u1, &s1, e) != 0 ||
            timer_sample(second, ev0, ev1, (unsigned)(2 * n + 1), &u2, &s2, e) != 0)
            goto out;
        sa[n] = n % 2 ? u2 : u1;
        sb[n] = n % 2 ? u1 : u2;
        ratio[n] = sa[n] > 0 ? sb[n] / sa[n] : 0;
        total += s1 + s2;
        n++;
    }
    summarize(sa, n, &out->a);
    summarize(sb, n, &out->b);
    summarize(ratio, n, &out->ratio);
    out->rounds = n;
    out->valid = n > 0;
    rc = 0;
out:
    free(sa);
    free(sb);
    free(ratio);
    timer_close(&ta);
    timer_close(&tb);
    events_free(ev0, ev1);
    return rc;
}

cJSON *dev_stats_json(const dev_stats *s)
{
    if (!s->valid)
        return cJSON_CreateNull();
    cJSON *o = dt_json_obj();
    dt_json_set_num(o, "median_us", s->median_us);
    dt_json_set_num(o, "min_us", s->min_us);
    dt_json_set_num(o, "max_us", s->max_us);
    dt_json_set_num(o, "p10_us", s->p10_us);
    dt_json_set_num(o, "p90_us", s->p90_us);
    dt_json_set_int(o, "runs", s->runs);
    return o;
}
