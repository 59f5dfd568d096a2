/* dev.c -- the worker's device layer: context, buffers, formats, launches and
 * the timing harness. */
#include "gpu/dev.h"

#include <math.h>
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

int dev_alloc(dev_buf *b, size_t bytes, dt_err *e)
{
    b->ptr = 0;
    b->bytes = bytes;
    if (!D.ready) {
        if (e)
            e->code = DEV_ENODEV;
        return dt_err_set(e, "no device");
    }
    /* Zero-byte arrays (an empty matrix) still get a valid pointer so that
     * kernels can be launched on them. */
    return dev_check(CU(cuMemAlloc)(&b->ptr, bytes ? bytes : 16), "cuMemAlloc", e);
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

/* ---- dtype conversion ---- */

static uint16_t f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff);
    if (exp == 0xff)
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int he = exp - 127 + 15;
    if (he >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (he <= 0) {
        if (he < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        int shift = 14 - he;
        uint32_t hm = mant >> shift;
        uint32_t rem = mant & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (hm & 1)))
            hm++;
        return (uint16_t)(sign | hm);
    }
    uint32_t h = sign | ((uint32_t)he << 10) | (mant >> 13);
    uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1)))
        h++; /* a carry into the exponent is the correct rounding */
    return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    int exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ffu;
    uint32_t x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else {
            int e = -1;
            do {
                e++;
                mant <<= 1;
            } while ((mant & 0x400u) == 0);
            x = sign | ((uint32_t)(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 0x1f) {
        x = sign | 0x7f800000u | (mant << 13);
    } else {
        x = sign | ((uint32_t)(exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static uint16_t f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7f800000u) == 0x7f800000u && (x & 0x7fffffu))
        return (uint16_t)((x >> 16) | 0x40u); /* quiet NaN */
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

static float bf16_to_f32(uint16_t b)
{
    uint32_t x = (uint32_t)b << 16;
    float f;
    memcpy(&f, &x, 4);
    return f;
}

/* Element i of each direction depends on element i alone, so the arrays
 * split over threads with the same bits as one pass. */
typedef struct conv_job {
    const void *src;
    void *dst;
    sp_dtype t;
} conv_job;

static void to_dtype_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const conv_job *j = ctx;
    const double *src = j->src;
    switch (j->t) {
    case SP_FP64:
        memcpy((double *)j->dst + lo, src + lo, (size_t)(hi - lo) * sizeof(double));
        break;
    case SP_FP32:
        for (int64_t i = lo; i < hi; i++)
            ((float *)j->dst)[i] = (float)src[i];
        break;
    case SP_FP16:
        for (int64_t i = lo; i < hi; i++)
            ((uint16_t *)j->dst)[i] = f32_to_f16((float)src[i]);
        break;
    case SP_BF16:
        for (int64_t i = lo; i < hi; i++)
            ((uint16_t *)j->dst)[i] = f32_to_bf16((float)src[i]);
        break;
    }
}

static void from_dtype_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const conv_job *j = ctx;
    double *dst = j->dst;
    switch (j->t) {
    case SP_FP64:
        memcpy(dst + lo, (const double *)j->src + lo, (size_t)(hi - lo) * sizeof(double));
        break;
    case SP_FP32:
        for (int64_t i = lo; i < hi; i++)
            dst[i] = ((const float *)j->src)[i];
        break;
    case SP_FP16:
        for (int64_t i = lo; i < hi; i++)
            dst[i] = f16_to_f32(((const uint16_t *)j->src)[i]);
        break;
    case SP_BF16:
        for (int64_t i = lo; i < hi; i++)
            dst[i] = bf16_to_f32(((const uint16_t *)j->src)[i]);
        break;
    }
}

/* Below this many elements a conversion runs inline: dev_round converts one. */
#define CONV_INLINE (1 << 16)

void dev_to_dtype(const double *src, void *dst, size_t n, sp_dtype t)
{
    conv_job j = {src, dst, t};
    if (n < CONV_INLINE)
        to_dtype_range(&j, 0, (int64_t)n, 0);
    else
        sp_parallel_for((int64_t)n, (int64_t)n, to_dtype_range, &j);
}

void dev_from_dtype(const void *src, double *dst, size_t n, sp_dtype t)
{
    conv_job j = {src, dst, t};
    if (n < CONV_INLINE)
        from_dtype_range(&j, 0, (int64_t)n, 0);
    else
        sp_parallel_for((int64_t)n, (int64_t)n, from_dtype_range, &j);
}

double dev_round(double v, sp_dtype t)
{
    /* The common cases inline: the battery rounds every input it draws. */
    if (t == SP_FP64)
        return v;
    if (t == SP_FP32)
        return (double)(float)v;
    unsigned char tmp[8];
    double out;
    dev_to_dtype(&v, tmp, 1, t);
    dev_from_dtype(tmp, &out, 1, t);
    return out;
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

static uint64_t hash_bytes(const void *p, size_t n)
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

static int add_arr(dev_fmt *f, const char *name, const void *host, size_t bytes, dt_err *e)
{
    if (f->narr == DEV_MAX_ARRS)
        return dt_err_set(e, "internal: too many arrays in format %s", f->key);
    int i = f->narr;
    f->names[i] = dt_xstrdup(name);
    f->hash[i] = hash_bytes(host, bytes);
    f->arr[i].bytes = bytes;
    f->host[i] = NULL;
    if (f->on_device && dev_upload(&f->arr[i], host, bytes, e) != 0) {
        free(f->names[i]);
        f->names[i] = NULL;
        return -1;
    }
    if (f->keep_host) {
        f->host[i] = malloc(bytes ? bytes : 1);
        if (f->host[i] == NULL) {
            free(f->names[i]);
            f->names[i] = NULL;
            if (e)
                e->code = DEV_ENOMEM;
            return dt_err_set(e, "out of host memory keeping %zu bytes of %s", bytes, name);
        }
        memcpy(f->host[i], host, bytes);
    }
    f->narr++;
    return 0;
}

static int add_vals(dev_fmt *f, const char *name, const double *v, size_t n, sp_dtype t,
                    dt_err *e)
{
    size_t bytes = n * (size_t)sp_dtype_size(t);
    void *tmp = malloc(bytes ? bytes : 1);
    if (tmp == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "out of host memory converting %zu values", n);
    }
    dev_to_dtype(v, tmp, n, t);
    int rc = add_arr(f, name, tmp, bytes, e);
    free(tmp);
    return rc;
}

static int32_t *narrow_offsets(const int64_t *p, size_t n, dt_err *e)
{
    int32_t *o = malloc((n ? n : 1) * sizeof *o);
    if (o == NULL) {
        dt_err_set(e, "out of host memory");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        o[i] = (int32_t)p[i];
    return o;
}

static int64_t fparam(const cJSON *params, const char *key, int64_t dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(params, key);
    return dt_json_as_i64(v, dflt);
}

static int build_csr(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    (void)params;
    int32_t *rp = narrow_offsets(a->rowptr, (size_t)a->rows + 1, e);
    if (rp == NULL)
        return -1;
    int rc = add_arr(f, "rowptr", rp, ((size_t)a->rows + 1) * 4, e);
    free(rp);
    if (rc != 0 || add_arr(f, "col", a->col, (size_t)a->nnz * 4, e) != 0 ||
        add_vals(f, "val", a->val, (size_t)a->nnz, t, e) != 0)
        return -1;
    return 0;
}

/* COO beside CSR: CSR's arrays and coo_row, the row of every nonzero in
 * CSR order, so a kernel that takes nonzeros whatever their rows finds a
 * nonzero's row and column in one pair of independent loads. */
static int build_coo(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    if (build_csr(a, params, t, f, e) != 0)
        return -1;
    int32_t *row = malloc((a->nnz ? (size_t)a->nnz : 1) * sizeof *row);
    if (row == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "out of host memory for coo (%lld nonzeros)", (long long)a->nnz);
    }
    for (int32_t r = 0; r < a->rows; r++)
        for (int64_t k = a->rowptr[r]; k < a->rowptr[r + 1]; k++)
            row[k] = r;
    int rc = add_arr(f, "coo_row", row, (size_t)a->nnz * 4, e);
    free(row);
    return rc;
}

/* ELL: column-major (slot k of row r at k * rows + r) unless the format
 * parameter row_major is 1 (r * width + k). */
static int build_ell(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    int64_t row_major = fparam(params, "row_major", 0);
    if (row_major != 0 && row_major != 1)
        return dt_err_set(e, "ELL: format parameter row_major is %lld; expected 0 or 1",
                          (long long)row_major);
    sp_ell *m = sp_csr_to_ell(a, (int64_t)1 << 31, e);
    if (m == NULL)
        return -1;
    size_t rows = (size_t)m->rows, w = (size_t)m->width, n = rows * w;
    if (row_major && w > 1) {
        int32_t *col = malloc((n ? n : 1) * sizeof *col);
        double *val = malloc((n ? n : 1) * sizeof *val);
        if (col == NULL || val == NULL) {
            free(col);
            free(val);
            sp_ell_free(m);
            if (e)
                e->code = DEV_ENOMEM;
            return dt_err_set(e, "ELL: out of host memory for %zu slots", n);
        }
        for (size_t r = 0; r < rows; r++)
            for (size_t k = 0; k < w; k++) {
                col[r * w + k] = m->col[k * rows + r];
                val[r * w + k] = m->val[k * rows + r];
            }
        free(m->col);
        free(m->val);
        m->col = col;
        m->val = val;
    }
    int rc = add_arr(f, "ell_col", m->col, n * 4, e);
    if (rc == 0)
        rc = add_vals(f, "ell_val", m->val, n, t, e);
    gpu_vars_set(&f->vars, "width", m->width);
    gpu_vars_set(&f->vars, "row_major", row_major);
    sp_ell_free(m);
    return rc;
}

static int build_sell(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    int32_t C = (int32_t)fparam(params, "C", 32);
    int32_t sigma = (int32_t)fparam(params, "sigma", C);
    sp_sell *m = sp_csr_to_sell(a, C, sigma, e);
    if (m == NULL)
        return -1;
    int32_t *ptr = narrow_offsets(m->slice_ptr, (size_t)m->nslices + 1, e);
    int rc = ptr ? 0 : -1;
    if (rc == 0)
        rc = add_arr(f, "sell_ptr", ptr, ((size_t)m->nslices + 1) * 4, e);
    free(ptr);
    if (rc == 0)
        rc = add_arr(f, "sell_len", m->slice_len, (size_t)m->nslices * 4, e);
    if (rc == 0)
        rc = add_arr(f, "sell_perm", m->perm, (size_t)m->nslices * (size_t)C * 4, e);
    if (rc == 0)
        rc = add_arr(f, "sell_col", m->col, (size_t)m->stored * 4, e);
    if (rc == 0)
        rc = add_vals(f, "sell_val", m->val, (size_t)m->stored, t, e);
    gpu_vars_set(&f->vars, "nslices", m->nslices);
    gpu_vars_set(&f->vars, "C", C);
    gpu_vars_set(&f->vars, "sigma", sigma);
    sp_sell_free(m);
    return rc;
}

static int build_bsr(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    int32_t b = (int32_t)fparam(params, "b", 4);
    sp_bsr *m = sp_csr_to_bsr(a, b, e);
    if (m == NULL)
        return -1;
    int32_t *ptr = narrow_offsets(m->browptr, (size_t)m->brows + 1, e);
    int rc = ptr ? 0 : -1;
    if (rc == 0)
        rc = add_arr(f, "bsr_ptr", ptr, ((size_t)m->brows + 1) * 4, e);
    free(ptr);
    if (rc == 0)
        rc = add_arr(f, "bsr_col", m->bcol, (size_t)m->nblocks * 4, e);
    if (rc == 0)
        rc = add_vals(f, "bsr_val", m->val, (size_t)m->nblocks * (size_t)b * (size_t)b, t, e);
    gpu_vars_set(&f->vars, "brows", m->brows);
    gpu_vars_set(&f->vars, "bcols", m->bcols);
    gpu_vars_set(&f->vars, "nblocks", m->nblocks);
    gpu_vars_set(&f->vars, "b", b);
    sp_bsr_free(m);
    return rc;
}

/* Rows grouped into bins by length, for kernels that give each bin its own
 * mapping in one launch (csr-adaptive). The CSR arrays as they are, plus:
 * bin_rows, the row ids bin after bin (ascending within a bin, so a bin's
 * outputs stay close together); bin_ptr, BINS_N + 1 offsets into bin_rows;
 * bin_long_ptr, the running nonzero count over the last bin's rows (its
 * length + 1), which lets blocks split those rows by nonzeros.
 *
 * Bin b < BINS_N - 1 holds the rows a sub-warp of 2^b lanes suits: length
 * at most per_lane * 2^b (bin 0 takes the empty rows; the warp bin, 5, also
 * takes everything up to long_row). The last bin holds rows longer than
 * long_row. Variables: nbins, bin0 ... bin6 (rows per bin), long_nnz
 * (nonzeros in the last bin), per_lane, long_row. */
#define BINS_N 7

static int build_bins(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    static const char *count_names[BINS_N] = {"bin0", "bin1", "bin2", "bin3",
                                              "bin4", "bin5", "bin6"};
    int64_t per_lane = fparam(params, "per_lane", 4);
    int64_t long_row = fparam(params, "long_row", 4096);
    if (per_lane < 1 || per_lane > (1 << 20))
        return dt_err_set(e, "bins: per_lane must be 1..%d (got %lld)", 1 << 20,
                          (long long)per_lane);
    if (long_row < 1 || long_row > INT32_MAX)
        return dt_err_set(e, "bins: long_row must be 1..%d (got %lld)", INT32_MAX,
                          (long long)long_row);
    size_t rows = (size_t)a->rows;
    int32_t *bin_rows = malloc((rows ? rows : 1) * sizeof *bin_rows);
    unsigned char *bin_of = malloc(rows ? rows : 1);
    int32_t bin_ptr[BINS_N + 1] = {0};
    int64_t count[BINS_N] = {0};
    int32_t *long_ptr = NULL;
    int rc = -1;
    if (bin_rows == NULL || bin_of == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        dt_err_set(e, "out of host memory binning %d rows", a->rows);
        goto out;
    }
    for (size_t i = 0; i < rows; i++) {
        int64_t len = a->rowptr[i + 1] - a->rowptr[i];
        int b = BINS_N - 1;
        if (len <= long_row) {
            b = 0;
            while (b < BINS_N - 2 && len > per_lane << b)
                b++;
        }
        bin_of[i] = (unsigned char)b;
        count[b]++;
    }
    for (int b = 0; b < BINS_N; b++)
        bin_ptr[b + 1] = bin_ptr[b] + (int32_t)count[b];
    /* A counting sort keeps rows ascending within each bin. */
    int32_t next[BINS_N];
    memcpy(next, bin_ptr, sizeof next);
    for (size_t i = 0; i < rows; i++)
        bin_rows[next[bin_of[i]]++] = (int32_t)i;
    size_t nlong = (size_t)count[BINS_N - 1];
    long_ptr = malloc((nlong + 1) * sizeof *long_ptr);
    if (long_ptr == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        dt_err_set(e, "out of host memory binning %d rows", a->rows);
        goto out;
    }
    long_ptr[0] = 0;
    for (size_t j = 0; j < nlong; j++) {
        int32_t r = bin_rows[bin_ptr[BINS_N - 1] + (int32_t)j];
        long_ptr[j + 1] = long_ptr[j] + (int32_t)(a->rowptr[r + 1] - a->rowptr[r]);
    }
    if (build_csr(a, params, t, f, e) != 0 || add_arr(f, "bin_rows", bin_rows, rows * 4, e) != 0 ||
        add_arr(f, "bin_ptr", bin_ptr, sizeof bin_ptr, e) != 0 ||
        add_arr(f, "bin_long_ptr", long_ptr, (nlong + 1) * 4, e) != 0)
        goto out;
    gpu_vars_set(&f->vars, "nbins", BINS_N);
    for (int b = 0; b < BINS_N; b++)
        gpu_vars_set(&f->vars, count_names[b], count[b]);
    gpu_vars_set(&f->vars, "long_nnz", long_ptr[nlong]);
    gpu_vars_set(&f->vars, "per_lane", per_lane);
    gpu_vars_set(&f->vars, "long_row", long_row);
    rc = 0;
out:
    free(bin_rows);
    free(bin_of);
    free(long_ptr);
    return rc;
}

/* CSR with 16-bit column offsets: col16[k] = col[k] - slice_base[row >>
 * slice_shift], where a slice is `slice` consecutive rows (a power of two,
 * 1 by default: a base per row) and its base is its smallest column. 6
 * bytes per fp32 nonzero instead of 8. slice_span[s] is the number of
 * columns slice s reaches (last - base + 1, 0 for a slice without
 * entries): the window of x a kernel may stage for it. Refused, naming the
 * first offending rows, when a slice's columns span more than 65536: the
 * kernels' 16-bit offsets could not reach them. Variables: slice,
 * slice_shift, slice_span_max. */
/* Rows [r0, r1)'s smallest and largest column (hi -1 when they have no
 * entries); columns are sorted within a row, so its first and last are
 * its span. */
static void csr16_span(const sp_csr *a, int32_t r0, int32_t r1, int32_t *lo, int32_t *hi)
{
    *lo = INT32_MAX;
    *hi = -1;
    for (int32_t r = r0; r < r1; r++) {
        if (a->rowptr[r + 1] == a->rowptr[r])
            continue;
        const int32_t c0 = a->col[a->rowptr[r]], c1 = a->col[a->rowptr[r + 1] - 1];
        *lo = c0 < *lo ? c0 : *lo;
        *hi = c1 > *hi ? c1 : *hi;
    }
}

/* csr16's slices [lo, hi): base, span (-1 when wider than 16-bit offsets
 * reach, its offsets then left unwritten) and every entry's offset. */
typedef struct csr16_job {
    const sp_csr *a;
    int shift;
    int32_t *base, *span;
    uint16_t *col16;
} csr16_job;

static void csr16_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const csr16_job *j = ctx;
    const sp_csr *a = j->a;
    for (int64_t s = lo; s < hi; s++) {
        const int32_t r0 = (int32_t)(s << j->shift);
        const int32_t r1 = r0 + (1 << j->shift) < a->rows ? r0 + (int32_t)(1 << j->shift) : a->rows;
        int32_t clo, chi;
        csr16_span(a, r0, r1, &clo, &chi);
        if (chi >= 0 && (int64_t)chi - clo > 65535) {
            j->span[s] = -1;
            continue;
        }
        j->base[s] = chi >= 0 ? clo : 0;
        j->span[s] = chi >= 0 ? chi - clo + 1 : 0;
        for (int64_t k = a->rowptr[r0]; k < a->rowptr[r1]; k++)
            j->col16[k] = (uint16_t)(a->col[k] - j->base[s]);
    }
}

static int build_csr16(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    int64_t slice = fparam(params, "slice", 1);
    int shift = 0;
    while (shift < 12 && ((int64_t)1 << shift) < slice)
        shift++;
    if (slice < 1 || ((int64_t)1 << shift) != slice)
        return dt_err_set(e, "csr16: slice must be a power of two from 1 to 4096 (got %lld)",
                          (long long)slice);
    size_t nslices = ((size_t)a->rows + (size_t)slice - 1) >> shift;
    int32_t *base = malloc((nslices ? nslices : 1) * sizeof *base);
    int32_t *span = malloc((nslices ? nslices : 1) * sizeof *span);
    uint16_t *col16 = malloc((a->nnz ? (size_t)a->nnz : 1) * sizeof *col16);
    int32_t span_max = 0;
    int rc = -1;
    if (base == NULL || span == NULL || col16 == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        dt_err_set(e, "out of host memory for csr16 (%lld nonzeros)", (long long)a->nnz);
        goto out;
    }
    /* The slices in parallel (each writes its own base, span and offsets);
     * then, in order, the first one too wide, and the widest. */
    csr16_job cj = {a, shift, base, span, col16};
    sp_parallel_for((int64_t)nslices, a->nnz, csr16_range, &cj);
    for (size_t s = 0; s < nslices; s++) {
        if (span[s] < 0) {
            const int32_t r0 = (int32_t)(s << shift);
            const int32_t r1 = r0 + (int32_t)slice < a->rows ? r0 + (int32_t)slice : a->rows;
            int32_t lo, hi;
            csr16_span(a, r0, r1, &lo, &hi);
            if (slice == 1)
                dt_err_set(e,
                           "csr16: row %d spans columns %d..%d, more than the 65536 a 16-bit "
                           "offset reaches",
                           r0, lo, hi);
            else
                dt_err_set(e,
                           "csr16: rows %d..%d span columns %d..%d, more than the 65536 a "
                           "16-bit offset reaches (a smaller slice may fit)",
                           r0, r1 - 1, lo, hi);
            goto out;
        }
        span_max = span[s] > span_max ? span[s] : span_max;
    }
    int32_t *rp = narrow_offsets(a->rowptr, (size_t)a->rows + 1, e);
    if (rp == NULL)
        goto out;
    rc = add_arr(f, "rowptr", rp, ((size_t)a->rows + 1) * 4, e);
    free(rp);
    if (rc != 0 || add_arr(f, "col16", col16, (size_t)a->nnz * 2, e) != 0 ||
        add_arr(f, "slice_base", base, nslices * 4, e) != 0 ||
        add_arr(f, "slice_span", span, nslices * 4, e) != 0 ||
        add_vals(f, "val", a->val, (size_t)a->nnz, t, e) != 0) {
        rc = -1;
        goto out;
    }
    gpu_vars_set(&f->vars, "slice", slice);
    gpu_vars_set(&f->vars, "slice_shift", shift);
    gpu_vars_set(&f->vars, "slice_span_max", span_max);
out:
    free(base);
    free(span);
    free(col16);
    return rc;
}

/* A dictionary of at most 256 values, entry 0 the value 0 (padding and
 * explicit zeros): idx[i] = the entry holding v[i] as the dtype stores it.
 * Values are compared by their bits after rounding to t, so -0.0 and 0.0,
 * or two doubles that round to one float, are told apart only where the
 * device would tell them apart. Returns the number of entries, or -1 (and
 * sets e) past 256. */
static int value_dict_serial(const double *v, size_t n, sp_dtype t, uint8_t *idx, double tab[256],
                             dt_err *e)
{
    enum { SLOTS = 1024 }; /* open addressing, at most 256 used */
    uint64_t key[SLOTS];
    int16_t at[SLOTS];
    memset(at, -1, sizeof at);
    int ntab = 1;
    tab[0] = 0.0;
    for (size_t i = 0; i < n; i++) {
        double r = dev_round(v[i], t);
        if (r == 0.0 && !signbit(r)) {
            idx[i] = 0;
            continue;
        }
        uint64_t b;
        memcpy(&b, &r, sizeof b);
        size_t h = (size_t)((b * 0x9e3779b97f4a7c15ULL) >> 54) & (SLOTS - 1);
        while (at[h] >= 0 && key[h] != b)
            h = (h + 1) & (SLOTS - 1);
        if (at[h] < 0) {
            if (ntab == 256)
                return dt_err_set(
                    e,
                    "value dictionary: more than 255 distinct nonzero values (the "
                    "256th at nonzero %zu in CSR order); a one-byte index cannot name them",
                    i);
            key[h] = b;
            at[h] = (int16_t)ntab;
            tab[ntab++] = r;
        }
        idx[i] = (uint8_t)at[h];
    }
    return ntab;
}

/* value_dict on several threads: each part lists its distinct values in
 * order of first appearance (at most 255), the lists are merged in part
 * order (so the table is the serial one's, entry for entry), and the
 * indices are filled in parallel from the merged table. Past 255 values
 * it runs value_dict_serial for the same message. */
#define VD_SLOTS 1024 /* open addressing, at most 256 used */

typedef struct vd_table {
    uint64_t key[VD_SLOTS];
    int16_t at[VD_SLOTS];
} vd_table;

/* Where bits b sits in t, or the empty slot it would take. */
static size_t vd_find(const vd_table *t, uint64_t b)
{
    size_t h = (size_t)((b * 0x9e3779b97f4a7c15ULL) >> 54) & (VD_SLOTS - 1);
    while (t->at[h] >= 0 && t->key[h] != b)
        h = (h + 1) & (VD_SLOTS - 1);
    return h;
}

typedef struct vd_job {
    const double *v;
    sp_dtype t;
    double vals[SP_PAR_MAX][256]; /* each part's distinct values, first seen first */
    int cnt[SP_PAR_MAX];
    int over[SP_PAR_MAX]; /* a part saw more than 255 */
    vd_table global;
    uint8_t *idx;
} vd_job;

static void vd_collect(void *ctx, int64_t lo, int64_t hi, int part)
{
    vd_job *j = ctx;
    vd_table *t = malloc(sizeof *t);
    if (t == NULL) {
        j->over[part] = 1; /* the serial path reports it */
        return;
    }
    memset(t->at, -1, sizeof t->at);
    for (int64_t i = lo; i < hi; i++) {
        const double r = dev_round(j->v[i], j->t);
        if (r == 0.0 && !signbit(r))
            continue;
        uint64_t b;
        memcpy(&b, &r, sizeof b);
        const size_t h = vd_find(t, b);
        if (t->at[h] >= 0)
            continue;
        if (j->cnt[part] == 255) {
            j->over[part] = 1;
            break;
        }
        t->key[h] = b;
        t->at[h] = (int16_t)j->cnt[part];
        j->vals[part][j->cnt[part]++] = r;
    }
    free(t);
}

static void vd_index(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    vd_job *j = ctx;
    for (int64_t i = lo; i < hi; i++) {
        const double r = dev_round(j->v[i], j->t);
        if (r == 0.0 && !signbit(r)) {
            j->idx[i] = 0;
            continue;
        }
        uint64_t b;
        memcpy(&b, &r, sizeof b);
        j->idx[i] = (uint8_t)j->global.at[vd_find(&j->global, b)];
    }
}

static int value_dict(const double *v, size_t n, sp_dtype t, uint8_t *idx, double tab[256],
                      dt_err *e)
{
    vd_job *j = sp_ref_threads((int64_t)n) > 1 ? calloc(1, sizeof *j) : NULL;
    if (j == NULL)
        return value_dict_serial(v, n, t, idx, tab, e);
    j->v = v;
    j->t = t;
    j->idx = idx;
    sp_parallel_for((int64_t)n, (int64_t)n, vd_collect, j);
    memset(j->global.at, -1, sizeof j->global.at);
    int ntab = 1;
    tab[0] = 0.0;
    for (int p = 0; p < SP_PAR_MAX; p++) {
        if (j->over[p])
            goto serial;
        for (int q = 0; q < j->cnt[p]; q++) {
            uint64_t b;
            memcpy(&b, &j->vals[p][q], sizeof b);
            const size_t h = vd_find(&j->global, b);
            if (j->global.at[h] >= 0)
                continue;
            if (ntab == 256)
                goto serial;
            j->global.key[h] = b;
            j->global.at[h] = (int16_t)ntab;
            tab[ntab++] = j->vals[p][q];
        }
    }
    sp_parallel_for((int64_t)n, (int64_t)n, vd_index, j);
    free(j);
    return ntab;
serial:
    free(j);
    return value_dict_serial(v, n, t, idx, tab, e);
}

/* SELL-C-sigma with 16-bit column offsets from a per-slice base: 6 bytes per
 * stored fp32 entry instead of 8, for matrices whose slices each span fewer
 * than 65535 columns. Padding entries carry the offset 0xFFFF (and value 0).
 *
 * The format parameter vec (1, 2, 4 or 8) lets a thread load vec entries of
 * its row at once: each slice's length (sell_len, entries per row, padding
 * included) is rounded up to a multiple of vec, and entry k of the slice's
 * row j sits at sell_ptr[s] + (k / vec) * C * vec + j * vec + k % vec, so
 * a row's vec consecutive entries are adjacent and every slice starts at a
 * multiple of C * vec elements (vector loads stay aligned). vec 1 is the
 * plain column-major slice.
 *
 * With vdict 1 the values are not stored per entry: sell_vidx holds a
 * one-byte index per entry into vtab, 256 values of which entry 0 is 0
 * (padding). Exact, and refused when the matrix has more than 255 distinct
 * nonzero values. An fp32 entry then costs 3 bytes, an fp64 one 3 instead
 * of 10. Variables: nslices, C, sigma, vec, vdict, nvals. */
/* One slice range of build_sell16's arrays: padding first, then every
 * entry of the slice's rows scattered to its place. */
typedef struct sell16_job {
    const sp_csr *a;
    const int32_t *perm, *ptr, *len, *base;
    int32_t C;
    int vec, vshift, esize;
    uint16_t *col16;
    const uint8_t *src_vals; /* the CSR's values in the dtype (esize bytes each), or */
    const uint8_t *src_vidx; /* their dictionary indices (vdict) */
    uint8_t *vals;
    uint8_t *vidx;
} sell16_job;

static void sell16_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const sell16_job *j = ctx;
    const int64_t C = j->C, vec = j->vec;
    for (int64_t s = lo; s < hi; s++) {
        const int64_t to0 = j->ptr[s], n = (int64_t)j->len[s] * C;
        memset(j->col16 + to0, 0xFF, (size_t)n * sizeof *j->col16);
        if (j->vidx)
            memset(j->vidx + to0, 0, (size_t)n);
        else
            memset(j->vals + to0 * j->esize, 0, (size_t)(n * j->esize));
        for (int64_t slot = 0; slot < C; slot++) {
            const int32_t r = j->perm[s * C + slot];
            if (r < 0)
                continue;
            const int64_t rb = j->a->rowptr[r], rl = j->a->rowptr[r + 1] - rb;
            for (int64_t k = 0; k < rl; k++) {
                const int64_t to = to0 + ((k >> j->vshift) * C + slot) * vec + (k & (vec - 1));
                j->col16[to] = (uint16_t)(j->a->col[rb + k] - j->base[s]);
                if (j->vidx) {
                    j->vidx[to] = j->src_vidx[rb + k];
                } else {
                    switch (j->esize) {
                    case 2:
                        ((uint16_t *)j->vals)[to] = ((const uint16_t *)j->src_vals)[rb + k];
                        break;
                    case 4:
                        ((uint32_t *)j->vals)[to] = ((const uint32_t *)j->src_vals)[rb + k];
                        break;
                    default:
                        ((uint64_t *)j->vals)[to] = ((const uint64_t *)j->src_vals)[rb + k];
                    }
                }
            }
        }
    }
}

/* sell16's slices [lo, hi): each one's width rounded up to whole vectors
 * in len (-1 when its columns span more than 16-bit offsets reach) and its
 * base column. */
typedef struct slice_job {
    const sp_csr *a;
    const int32_t *perm;
    int32_t C;
    int64_t vec;
    int32_t *base, *len;
} slice_job;

/* Slice sl's longest row (width, when not NULL) and its smallest and
 * largest column (hi -1 when it has no entries). */
static void slice_span(const slice_job *j, int64_t sl, int64_t *width, int32_t *lo, int32_t *hi)
{
    const sp_csr *a = j->a;
    int64_t w = 0;
    *lo = INT32_MAX;
    *hi = -1;
    for (int64_t q = sl * j->C; q < (sl + 1) * j->C; q++) {
        const int32_t r = j->perm[q];
        if (r < 0)
            continue;
        const int64_t rl = a->rowptr[r + 1] - a->rowptr[r];
        w = rl > w ? rl : w;
        if (rl > 0) {
            *lo = a->col[a->rowptr[r]] < *lo ? a->col[a->rowptr[r]] : *lo;
            *hi = a->col[a->rowptr[r + 1] - 1] > *hi ? a->col[a->rowptr[r + 1] - 1] : *hi;
        }
    }
    if (width)
        *width = w;
}

static void slice_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const slice_job *j = ctx;
    for (int64_t sl = lo; sl < hi; sl++) {
        int64_t width;
        int32_t clo, chi;
        slice_span(j, sl, &width, &clo, &chi);
        j->base[sl] = chi >= 0 ? clo : 0;
        const int64_t l = (width + j->vec - 1) / j->vec * j->vec;
        /* A width past INT32_MAX is caught as too many stored entries. */
        j->len[sl] = chi >= 0 && (int64_t)chi - clo >= 0xFFFF ? -1
                     : l > INT32_MAX                          ? INT32_MAX
                                                              : (int32_t)l;
    }
}

static int build_sell16(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    int32_t C = (int32_t)fparam(params, "C", 32);
    int32_t sigma = (int32_t)fparam(params, "sigma", C);
    int64_t vec = fparam(params, "vec", 1), vdict = fparam(params, "vdict", 0);
    int64_t long_row = fparam(params, "long", 0);
    if (vec != 1 && vec != 2 && vec != 4 && vec != 8)
        return dt_err_set(e, "sell16: format parameter vec is %lld; legal values are 1, 2, 4, 8",
                          (long long)vec);
    if (long_row < 0)
        return dt_err_set(e,
                          "sell16: format parameter long is %lld; it must be 0 (none) or a "
                          "row length",
                          (long long)long_row);
    if (vdict != 0 && vdict != 1)
        return dt_err_set(e, "sell16: format parameter vdict is %lld; legal values are 0, 1",
                          (long long)vdict);
    int64_t order = fparam(params, "order", 0);
    if (order != 0 && order != 1)
        return dt_err_set(e,
                          "sell16: format parameter order is %lld; legal values are 0 (the "
                          "matrix's) and 1 (Cuthill-McKee)",
                          (long long)order);
    /* The row order is SELL's (sp_sell_perm); the arrays are built from the
     * CSR directly, without sp_csr_to_sell's 12 bytes an entry in between
     * (crack x32M, fp32, SIGMA 256, vec 2, on the host: 1.41 s with that
     * converter and qsort, 1.0 s with the counting sort, and this). With
     * order 1 the windows cut a Cuthill-McKee order of the rows instead, so
     * a block's rows share more of their columns of x. */
    int32_t *cm = NULL;
    if (order == 1 && (cm = sp_row_order_cm(a, e)) == NULL)
        return -1;
    int32_t *perm = sp_sell_perm_ordered(a, C, sigma, long_row, cm, e);
    free(cm);
    if (perm == NULL)
        return -1;
    int rc = -1;
    const size_t ns = ((size_t)a->rows + (size_t)C - 1) / (size_t)C;
    int32_t *lrows = NULL, *lptr = NULL, *lcol = NULL;
    uint8_t *lval = NULL;
    const int esize = sp_dtype_size(t);
    int32_t *base = malloc((ns + 1) * sizeof *base);
    int32_t *ptr = malloc((ns + 1) * sizeof *ptr);
    int32_t *len = malloc((ns + 1) * sizeof *len);
    uint16_t *col16 = NULL;
    uint8_t *vals = NULL, *vidx = NULL, *csr_vals = NULL, *csr_vidx = NULL;
    if (base == NULL || ptr == NULL || len == NULL)
        goto nomem;
    /* Per slice: its width rounded up to whole vectors, and its base, the
     * smallest column of its rows (the first of each, columns ascending),
     * in parallel; then the offsets in order. */
    slice_job sj = {a, perm, C, vec, base, len};
    sp_parallel_for((int64_t)ns, a->rows, slice_range, &sj);
    int64_t stored = 0; /* with every slice rounded up to whole vectors */
    ptr[0] = 0;
    for (size_t sl = 0; sl < ns; sl++) {
        if (len[sl] < 0) {
            int32_t lo, hi;
            slice_span(&sj, (int64_t)sl, NULL, &lo, &hi);
            dt_err_set(e,
                       "sell16: slice %zu spans columns %d..%d, more than a 16-bit offset reaches "
                       "(65534)",
                       sl, lo, hi);
            goto out;
        }
        stored += (int64_t)len[sl] * C;
        if (stored > INT32_MAX) {
            dt_err_set(e,
                       "sell16: more than %d stored entries (vec %lld) exceed the 32-bit offsets "
                       "of sell_ptr",
                       INT32_MAX, (long long)vec);
            goto out;
        }
        ptr[sl + 1] = (int32_t)stored;
    }
    double tab[256] = {0};
    int ntab = 0;
    col16 = malloc(((size_t)stored + 1) * sizeof *col16);
    if (col16 == NULL)
        goto nomem;
    if (vdict) {
        csr_vidx = malloc((size_t)a->nnz + 1);
        vidx = malloc((size_t)stored + 1);
        if (csr_vidx == NULL || vidx == NULL)
            goto nomem;
        dt_err de = {0};
        ntab = value_dict(a->val, (size_t)a->nnz, t, csr_vidx, tab, &de);
        if (ntab < 0) {
            dt_err_set(e, "sell16 vdict: %s", de.msg);
            goto out;
        }
    } else {
        vals = malloc(((size_t)stored + 1) * (size_t)esize);
        if (vals == NULL)
            goto nomem;
        if (t != SP_FP64) {
            csr_vals = malloc(((size_t)a->nnz + 1) * (size_t)esize);
            if (csr_vals == NULL)
                goto nomem;
            dev_to_dtype(a->val, csr_vals, (size_t)a->nnz, t);
        }
    }
    sell16_job job = {a,
                      perm,
                      ptr,
                      len,
                      base,
                      C,
                      (int)vec,
                      vec == 1   ? 0
                      : vec == 2 ? 1
                      : vec == 4 ? 2
                                 : 3,
                      esize,
                      col16,
                      t == SP_FP64 ? (const uint8_t *)a->val : csr_vals,
                      csr_vidx,
                      vals,
                      vidx};
    sp_parallel_for((int64_t)ns, stored, sell16_range, &job);
    if (add_arr(f, "sell_ptr", ptr, (ns + 1) * 4, e) != 0 ||
        add_arr(f, "sell_len", len, ns * 4, e) != 0 ||
        add_arr(f, "sell_perm", perm, ns * (size_t)C * 4, e) != 0 ||
        add_arr(f, "col16", col16, (size_t)stored * 2, e) != 0 ||
        add_arr(f, "slice_base", base, ns * 4, e) != 0)
        goto out;
    if (vdict) {
        if (add_arr(f, "sell_vidx", vidx, (size_t)stored, e) != 0 ||
            add_vals(f, "vtab", tab, 256, t, e) != 0)
            goto out;
        gpu_vars_set(&f->vars, "nvals", ntab);
    } else if (add_arr(f, "sell_val", vals, (size_t)stored * (size_t)esize, e) != 0) {
        goto out;
    }
    if (long_row > 0) {
        /* The rows left out of the slices, as CSR: long_rows (their
         * numbers), long_ptr, long_col, long_val. */
        int64_t nl = 0, lnnz = 0;
        for (int32_t r = 0; r < a->rows; r++)
            if (a->rowptr[r + 1] - a->rowptr[r] > long_row) {
                nl++;
                lnnz += a->rowptr[r + 1] - a->rowptr[r];
            }
        lrows = malloc(((size_t)nl + 1) * sizeof *lrows);
        lptr = malloc(((size_t)nl + 1) * sizeof *lptr);
        lcol = malloc(((size_t)lnnz + 1) * sizeof *lcol);
        lval = malloc(((size_t)lnnz + 1) * (size_t)esize);
        if (lrows == NULL || lptr == NULL || lcol == NULL || lval == NULL)
            goto nomem;
        int64_t li = 0, lk = 0;
        lptr[0] = 0;
        for (int32_t r = 0; r < a->rows; r++) {
            const int64_t b = a->rowptr[r], n = a->rowptr[r + 1] - b;
            if (n <= long_row)
                continue;
            lrows[li] = r;
            memcpy(lcol + lk, a->col + b, (size_t)n * sizeof *lcol);
            dev_to_dtype(a->val + b, lval + lk * esize, (size_t)n, t);
            lk += n;
            lptr[++li] = (int32_t)lk;
        }
        if (add_arr(f, "long_rows", lrows, (size_t)nl * 4, e) != 0 ||
            add_arr(f, "long_ptr", lptr, ((size_t)nl + 1) * 4, e) != 0 ||
            add_arr(f, "long_col", lcol, (size_t)lnnz * 4, e) != 0 ||
            add_arr(f, "long_val", lval, (size_t)lnnz * (size_t)esize, e) != 0)
            goto out;
        gpu_vars_set(&f->vars, "nlong", nl);
    }
    gpu_vars_set(&f->vars, "long", long_row);
    gpu_vars_set(&f->vars, "nslices", (int64_t)ns);
    gpu_vars_set(&f->vars, "C", C);
    gpu_vars_set(&f->vars, "sigma", sigma);
    gpu_vars_set(&f->vars, "vec", vec);
    gpu_vars_set(&f->vars, "vdict", vdict);
    gpu_vars_set(&f->vars, "order", order);
    rc = 0;
    goto out;
nomem:
    if (e)
        e->code = DEV_ENOMEM;
    dt_err_set(e, "out of host memory for sell16 (%d rows)", a->rows);
out:
    free(lval);
    free(lcol);
    free(lptr);
    free(lrows);
    free(csr_vidx);
    free(csr_vals);
    free(vidx);
    free(vals);
    free(col16);
    free(len);
    free(ptr);
    free(base);
    free(perm);
    return rc;
}

/* seg16: the nonzeros as one flat stream for a segmented-sum SpMV
 * (kernels/spmv_seg16.cu), cut into tiles of whole consecutive rows, each
 * padded to exactly `tile` entries (a multiple of 8; the kernel's BLOCK *
 * U * 8). seg_col[k] is the entry's column offset from tile_base[t] in 15
 * bits, with bit 15 set on the last entry of its row; an empty row holds
 * one entry of value 0 (offset 0, flagged) so that every row ends in its
 * tile; the padding after a tile's last row is offset 0, value 0,
 * unflagged. tile_row[t] is tile t's first row (ntiles + 1 entries, the
 * last being rows). Tiles are filled greedily: a row starts a new tile
 * when it would overflow the current one or widen its columns past 32768.
 * Refused, naming the row, when one row alone does either. Variables:
 * ntiles, tile, seg_entries (stored entries, padding included). */
typedef struct seg16_job {
    const sp_csr *a;
    const int32_t *trow, *tbase;
    int64_t tile;
    uint16_t *col;
    unsigned char *val; /* tile entries of `size` bytes each */
    int size;
    sp_dtype t;
} seg16_job;

static void seg16_range(void *ctx, int64_t lo, int64_t hi, int part)
{
    (void)part;
    const seg16_job *j = ctx;
    const sp_csr *a = j->a;
    for (int64_t t = lo; t < hi; t++) {
        int64_t k = t * j->tile;
        for (int32_t r = j->trow[t]; r < j->trow[t + 1]; r++) {
            const int64_t p0 = a->rowptr[r], p1 = a->rowptr[r + 1];
            if (p0 == p1) {
                j->col[k++] = 0x8000u; /* the value stays the zero it was set to */
                continue;
            }
            for (int64_t p = p0; p < p1; p++)
                j->col[k + p - p0] =
                    (uint16_t)((a->col[p] - j->tbase[t]) | (p == p1 - 1 ? 0x8000 : 0));
            dev_to_dtype(a->val + p0, j->val + (size_t)k * (size_t)j->size, (size_t)(p1 - p0),
                         j->t);
            k += p1 - p0;
        }
    }
}

static int build_seg16(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    const int64_t tile = fparam(params, "tile", 2048);
    if (tile < 8 || tile > (1 << 20) || tile % 8 != 0)
        return dt_err_set(e, "seg16: tile must be a multiple of 8 from 8 to 1048576 (got %lld)",
                          (long long)tile);
    /* The tiles' first rows and column bases, in order. */
    size_t cap = 1024, nt = 0;
    int32_t *trow = malloc(cap * sizeof *trow), *tbase = malloc(cap * sizeof *tbase);
    uint16_t *col = NULL;
    unsigned char *val = NULL;
    int rc = -1;
    if (trow == NULL || tbase == NULL)
        goto oom;
    for (int32_t r = 0; r < a->rows;) {
        const int32_t r0 = r;
        int64_t k = 0;
        int32_t lo = INT32_MAX, hi = -1;
        for (; r < a->rows; r++) {
            const int64_t len = a->rowptr[r + 1] - a->rowptr[r];
            int32_t nlo = lo, nhi = hi;
            if (len > 0) {
                const int32_t c0 = a->col[a->rowptr[r]], c1 = a->col[a->rowptr[r + 1] - 1];
                nlo = c0 < lo ? c0 : lo;
                nhi = c1 > hi ? c1 : hi;
            }
            if (k + (len > 0 ? len : 1) > tile || (nhi >= 0 && (int64_t)nhi - nlo > 32767))
                break;
            lo = nlo;
            hi = nhi;
            k += len > 0 ? len : 1;
        }
        if (r == r0) {
            const int64_t len = a->rowptr[r + 1] - a->rowptr[r];
            if (len > tile)
                dt_err_set(e,
                           "seg16: row %d has %lld entries, more than a tile of %lld holds "
                           "(a larger BLOCK * U fits it)",
                           r, (long long)len, (long long)tile);
            else
                dt_err_set(e,
                           "seg16: row %d spans columns %d..%d, more than the 32768 a 15-bit "
                           "offset reaches",
                           r, a->col[a->rowptr[r]], a->col[a->rowptr[r + 1] - 1]);
            goto out;
        }
        if (nt + 1 == cap) {
            cap *= 2;
            int32_t *nr = realloc(trow, cap * sizeof *trow);
            if (nr == NULL)
                goto oom;
            trow = nr;
            int32_t *nb = realloc(tbase, cap * sizeof *tbase);
            if (nb == NULL)
                goto oom;
            tbase = nb;
        }
        trow[nt] = r0;
        tbase[nt] = hi >= 0 ? lo : 0;
        nt++;
    }
    trow[nt] = a->rows;
    const size_t entries = nt * (size_t)tile;
    const int size = sp_dtype_size(t);
    col = calloc(entries ? entries : 1, sizeof *col);
    val = calloc(entries ? entries : 1, (size_t)size);
    if (col == NULL || val == NULL)
        goto oom;
    seg16_job j = {a, trow, tbase, tile, col, val, size, t};
    sp_parallel_for((int64_t)nt, a->nnz, seg16_range, &j);
    if (add_arr(f, "tile_row", trow, (nt + 1) * 4, e) != 0 ||
        add_arr(f, "tile_base", tbase, (nt ? nt : 1) * 4, e) != 0 ||
        add_arr(f, "seg_col", col, entries * 2, e) != 0 ||
        add_arr(f, "seg_val", val, entries * (size_t)size, e) != 0)
        goto out;
    gpu_vars_set(&f->vars, "ntiles", (int64_t)nt);
    gpu_vars_set(&f->vars, "tile", tile);
    gpu_vars_set(&f->vars, "seg_entries", (int64_t)entries);
    rc = 0;
    goto out;
oom:
    if (e)
        e->code = DEV_ENOMEM;
    dt_err_set(e, "out of host memory for seg16 (%lld nonzeros)", (long long)a->nnz);
out:
    free(trow);
    free(tbase);
    free(col);
    free(val);
    return rc;
}

static int cmp_int32(const void *x, const void *y)
{
    const int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* dtile: the TM x TN tiles of S that hold a nonzero, for SDDMM by dense
 * tiles of the product (kernels/sddmm_dense_tile.cu). tile_rc holds each
 * tile's (tile row, tile column), ordered by tile row, then column; for
 * each of a tile's `tm` rows (rows past the matrix's end included, with
 * nothing set) tile_rmask has bit c set when column c of the tile holds a
 * nonzero, and tile_rbase the CSR position of the row's first nonzero in
 * the tile (0 when it has none). A row's nonzeros in a tile are
 * consecutive in CSR, in column order, so a kernel finds any entry's
 * position from the mask alone. Variables: ntiles, tm, tn. */
static int build_dtile(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    (void)t;
    const int64_t tm = fparam(params, "tm", 64), tn = fparam(params, "tn", 64);
    if (tm < 1 || tm > 4096 || tn < 1 || tn > 64)
        return dt_err_set(e,
                          "dtile: tm must be 1..4096 and tn 1..64 (a row's mask is 64 bits); "
                          "got tm %lld, tn %lld",
                          (long long)tm, (long long)tn);
    const int64_t ntr = (a->rows + tm - 1) / tm, ntc = (a->cols + tn - 1) / tn;
    int32_t *stamp = calloc(ntc ? (size_t)ntc : 1, sizeof *stamp);  /* tile row + 1 */
    int32_t *slot = malloc((ntc ? (size_t)ntc : 1) * sizeof *slot); /* tile column -> tile */
    int32_t *rc = NULL, *rbase = NULL;
    uint64_t *rmask = NULL;
    int out = -1;
    if (stamp == NULL || slot == NULL)
        goto oom;
    /* Count the tiles first: the slots' arrays are sized by them. */
    int64_t nt = 0;
    for (int64_t tr = 0; tr < ntr; tr++) {
        const int32_t r1 = (int32_t)((tr + 1) * tm < a->rows ? (tr + 1) * tm : a->rows);
        for (int32_t r = (int32_t)(tr * tm); r < r1; r++)
            for (int64_t p = a->rowptr[r]; p < a->rowptr[r + 1]; p++) {
                const int32_t tc = (int32_t)(a->col[p] / tn);
                if (stamp[tc] != tr + 1) {
                    stamp[tc] = (int32_t)(tr + 1);
                    nt++;
                }
            }
    }
    if (nt * tm > ((int64_t)1 << 28)) {
        dt_err_set(e,
                   "dtile: %lld tiles of %lld x %lld would take %lld MiB of masks for %lld "
                   "nonzeros (the pattern is too sparse for dense tiles)",
                   (long long)nt, (long long)tm, (long long)tn, (long long)(nt * tm * 12 >> 20),
                   (long long)a->nnz);
        goto done;
    }
    rc = malloc((size_t)(nt ? nt : 1) * 2 * sizeof *rc);
    rbase = calloc((size_t)(nt ? nt * tm : 1), sizeof *rbase);
    rmask = calloc((size_t)(nt ? nt * tm : 1), sizeof *rmask);
    if (rc == NULL || rbase == NULL || rmask == NULL)
        goto oom;
    memset(stamp, 0, (size_t)(ntc ? ntc : 1) * sizeof *stamp);
    int64_t next = 0;
    for (int64_t tr = 0; tr < ntr; tr++) {
        const int32_t r0 = (int32_t)(tr * tm);
        const int32_t r1 = (int32_t)((tr + 1) * tm < a->rows ? (tr + 1) * tm : a->rows);
        /* This tile row's tile columns, in order. */
        const int64_t first = next;
        for (int32_t r = r0; r < r1; r++)
            for (int64_t p = a->rowptr[r]; p < a->rowptr[r + 1]; p++) {
                const int32_t tc = (int32_t)(a->col[p] / tn);
                if (stamp[tc] != tr + 1) {
                    stamp[tc] = (int32_t)(tr + 1);
                    rc[2 * next++] = tc; /* sorted on, then moved */
                }
            }
        qsort(rc + 2 * first, (size_t)(next - first), 2 * sizeof *rc, cmp_int32);
        for (int64_t i = first; i < next; i++) {
            rc[2 * i + 1] = rc[2 * i];
            rc[2 * i] = (int32_t)tr;
            slot[rc[2 * i + 1]] = (int32_t)i;
        }
        for (int32_t r = r0; r < r1; r++)
            for (int64_t p = a->rowptr[r]; p < a->rowptr[r + 1]; p++) {
                const int32_t c = a->col[p];
                const size_t s = (size_t)slot[c / tn] * (size_t)tm + (size_t)(r - r0);
                if (rmask[s] == 0)
                    rbase[s] = (int32_t)p;
                rmask[s] |= 1ull << (c % tn);
            }
    }
    if (add_arr(f, "tile_rc", rc, (size_t)(nt ? nt : 1) * 8, e) != 0 ||
        add_arr(f, "tile_rbase", rbase, (size_t)(nt ? nt * tm : 1) * 4, e) != 0 ||
        add_arr(f, "tile_rmask", rmask, (size_t)(nt ? nt * tm : 1) * 8, e) != 0)
        goto done;
    gpu_vars_set(&f->vars, "ntiles", nt);
    gpu_vars_set(&f->vars, "tm", tm);
    gpu_vars_set(&f->vars, "tn", tn);
    out = 0;
    goto done;
oom:
    if (e)
        e->code = DEV_ENOMEM;
    dt_err_set(e, "out of host memory for dtile (%lld nonzeros)", (long long)a->nnz);
done:
    free(stamp);
    free(slot);
    free(rc);
    free(rbase);
    free(rmask);
    return out;
}

/* runion: SDDMM over the union of the columns of each group of `r` rows
 * (kernels/sddmm_union.cu), so that a row of Bt several of the group's
 * rows use is loaded once. With `sim` 0 the groups are r consecutive rows;
 * with `sim` 1 they are rows that share columns (sp_row_groups_similar),
 * or consecutive rows again where those give fewer entries. un_ent holds
 * one entry per distinct (group, column), in group then column order, `ues`
 * int32 each (whole 16-byte loads): the column, the group, then for each
 * of the group's r slots the CSR position of its row's nonzero in that
 * column, or -1 when it has none (or the slot has no row); with sim 1 the
 * slots' rows follow (-1 for none); the rest is -1. r is 2, 4 or 8.
 * Variables: nent, ur, ues, usim. */
/* A group of runion's merge: the next column any of its r rows holds past
 * cur, each row's position there (or -1) in pos, and cur moved past it;
 * INT32_MAX when the group is done. */
static int32_t runion_next(const sp_csr *a, int64_t r, int64_t *cur, const int64_t *end,
                           int32_t *pos)
{
    int32_t c = INT32_MAX;
    for (int64_t i = 0; i < r; i++)
        if (cur[i] < end[i] && a->col[cur[i]] < c)
            c = a->col[cur[i]];
    for (int64_t i = 0; i < r; i++) {
        pos[i] = -1;
        if (c != INT32_MAX && cur[i] < end[i] && a->col[cur[i]] == c)
            pos[i] = (int32_t)cur[i]++;
    }
    return c;
}

/* Start a group's merge over its r rows (-1: no row). */
static void runion_group(const sp_csr *a, const int32_t *rows, int64_t r, int64_t *cur,
                         int64_t *end)
{
    for (int64_t i = 0; i < r; i++) {
        cur[i] = rows[i] >= 0 ? a->rowptr[rows[i]] : 0;
        end[i] = rows[i] >= 0 ? a->rowptr[rows[i] + 1] : 0;
    }
}

/* The entries of ng groups of r rows each (grows[g * r + i]). */
static int64_t runion_count(const sp_csr *a, const int32_t *grows, int64_t ng, int64_t r)
{
    int64_t cur[8], end[8], nent = 0;
    int32_t pos[8];
    for (int64_t g = 0; g < ng; g++)
        for (runion_group(a, grows + g * r, r, cur, end);
             runion_next(a, r, cur, end, pos) != INT32_MAX;)
            nent++;
    return nent;
}

static int build_runion(const sp_csr *a, const cJSON *params, sp_dtype t, dev_fmt *f, dt_err *e)
{
    (void)t;
    const int64_t r = fparam(params, "r", 2), sim = fparam(params, "sim", 0);
    if (r != 2 && r != 4 && r != 8)
        return dt_err_set(e, "runion: r (rows a group) must be 2, 4 or 8; got %lld", (long long)r);
    if (sim != 0 && sim != 1)
        return dt_err_set(e,
                          "runion: sim must be 0 (consecutive rows) or 1 (similar rows); got %lld",
                          (long long)sim);
    const int64_t es = (2 + r * (1 + sim) + 3) / 4 * 4;
    /* Consecutive groups, and with sim the similar ones where they give
     * fewer entries. */
    int64_t ng = (a->rows + r - 1) / r;
    int32_t *grows = malloc((size_t)(ng ? ng * r : 1) * sizeof *grows);
    if (grows == NULL) {
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "out of host memory for runion (%lld groups)", (long long)ng);
    }
    for (int64_t k = 0; k < ng * r; k++)
        grows[k] = k < a->rows ? (int32_t)k : -1;
    int64_t nent = runion_count(a, grows, ng, r);
    if (sim) {
        int64_t sng = 0;
        int32_t *sg = sp_row_groups_similar(a, (int32_t)r, &sng, e);
        if (sg == NULL) {
            free(grows);
            if (e)
                e->code = DEV_ENOMEM;
            return -1;
        }
        const int64_t snent = runion_count(a, sg, sng, r);
        if (snent < nent) {
            free(grows);
            grows = sg;
            ng = sng;
            nent = snent;
        } else {
            free(sg);
        }
    }
    if (nent * es > ((int64_t)1 << 28)) {
        free(grows);
        return dt_err_set(e, "runion: %lld entries of %lld bytes exceed 1 GiB", (long long)nent,
                          (long long)(es * 4));
    }
    int32_t *ent = malloc((size_t)(nent ? nent * es : es) * sizeof *ent);
    if (ent == NULL) {
        free(grows);
        if (e)
            e->code = DEV_ENOMEM;
        return dt_err_set(e, "out of host memory for runion (%lld entries)", (long long)nent);
    }
    int64_t cur[8], end[8];
    int32_t pos[8];
    int32_t *en = ent;
    for (int64_t g = 0; g < ng; g++) {
        const int32_t *gr = grows + g * r;
        runion_group(a, gr, r, cur, end);
        for (int32_t c; (c = runion_next(a, r, cur, end, pos)) != INT32_MAX; en += es) {
            en[0] = c;
            en[1] = (int32_t)g;
            for (int64_t j = 2; j < es; j++)
                en[j] = j - 2 < r ? pos[j - 2] : sim && j - 2 < 2 * r ? gr[j - 2 - r] : -1;
        }
    }
    free(grows);
    int rc = add_arr(f, "un_ent", ent, (size_t)(nent ? nent * es : es) * 4, e);
    free(ent);
    if (rc != 0)
        return -1;
    gpu_vars_set(&f->vars, "nent", nent);
    gpu_vars_set(&f->vars, "ur", r);
    gpu_vars_set(&f->vars, "ues", es);
    gpu_vars_set(&f->vars, "usim", sim);
    return 0;
}

typedef int (*fmt_builder)(const sp_csr *, const cJSON *, sp_dtype, dev_fmt *, dt_err *);

static const struct {
    const char *name;
    fmt_builder build;
} formats[] = {
    {"csr", build_csr},     {"coo", build_coo},       {"ell", build_ell},
    {"sell", build_sell},   {"bsr", build_bsr},       {"bins", build_bins},
    {"csr16", build_csr16}, {"sell16", build_sell16}, {"seg16", build_seg16},
    {"dtile", build_dtile}, {"runion", build_runion},
};

int dev_fmt_build(const sp_csr *a, const char *format, const cJSON *params, sp_dtype t,
                  int upload, dev_fmt *f, dt_err *e)
{
    memset(f, 0, sizeof *f);
    f->on_device = upload == 1;
    f->keep_host = upload == DEV_FMT_HOST;
    if (a->nnz >= INT32_MAX) {
        if (e)
            e->code = DEV_ECONTRACT;
        return dt_err_set(e, "%lld nonzeros exceed the 32-bit offsets device formats use",
                          (long long)a->nnz);
    }
    char *ps = params ? dt_json_print(params, 0) : dt_xstrdup("{}");
    snprintf(f->key, sizeof f->key, "%s%s/%s", format, ps, sp_dtype_name(t));
    free(ps);
    int32_t max_row = 0;
    for (int32_t i = 0; i < a->rows; i++)
        if (a->rowptr[i + 1] - a->rowptr[i] > max_row)
            max_row = (int32_t)(a->rowptr[i + 1] - a->rowptr[i]);
    gpu_vars_set(&f->vars, "rows", a->rows);
    gpu_vars_set(&f->vars, "cols", a->cols);
    gpu_vars_set(&f->vars, "nnz", a->nnz);
    gpu_vars_set(&f->vars, "max_row", max_row);
    gpu_vars_set(&f->vars, "sms", D.info.sms);
    gpu_vars_set(&f->vars, "value_bytes", sp_dtype_size(t));
    for (size_t i = 0; i < DT_ARRAY_LEN(formats); i++) {
        if (strcmp(formats[i].name, format) != 0)
            continue;
        double t0 = dt_now();
        if (formats[i].build(a, params, t, f, e) != 0) {
            dev_fmt_free(f);
            if (e && e->code == 1)
                e->code = DEV_ECONTRACT; /* a conversion refused the matrix */
            return -1;
        }
        f->prep_us = (dt_now() - t0) * 1e6;
        return 0;
    }
    if (e)
        e->code = DEV_ECONTRACT;
    return dt_err_set(e,
                      "unknown format '%s' (formats: csr, coo, ell, sell, sell16, bsr, bins, "
                      "csr16, seg16, dtile, runion)",
                      format);
}

void dev_fmt_free(dev_fmt *f)
{
    for (int i = 0; i < f->narr; i++) {
        dev_free(&f->arr[i]);
        free(f->names[i]);
        free(f->host[i]);
        f->host[i] = NULL;
    }
    f->narr = 0;
}

const void *dev_fmt_host(const dev_fmt *f, const char *name, size_t *bytes)
{
    for (int i = 0; i < f->narr; i++) {
        if (strcmp(f->names[i], name) == 0) {
            if (bytes)
                *bytes = f->arr[i].bytes;
            return f->host[i];
        }
    }
    return NULL;
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
        uint64_t h = hash_bytes(tmp, f->arr[i].bytes);
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
        return dt_err_set(e, "the CUBIN has no kernel '%s' (declare it extern \"C\" or give a "
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
        return dt_err_set(e, "block of %lld threads, but '%s' allows at most %d (it uses %d "
                             "registers per thread)",
                          (long long)threads, entry, k->max_threads, k->regs);
    }
    if (k->smem + k->static_smem > D.info.smem_per_block_optin) {
        dev_kernel_unload(k);
        if (e)
            e->code = DEV_ELAUNCH;
        return dt_err_set(e, "%d bytes of shared memory (%d static + %d dynamic) exceed the "
                             "device's %d per block",
                          k->smem + k->static_smem, k->static_smem, k->smem,
                          D.info.smem_per_block_optin);
    }
    if (k->smem + k->static_smem > 48 * 1024) {
        r = CU(cuFuncSetAttribute)(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   k->smem);
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

int dev_launch(const dev_kernel *k, const gpu_contract *c, const dev_bind *b, CUstream s,
               dt_err *e)
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
        dev_check(CU(cuMemsetD8Async)(b->scratch.ptr, 0, k->scratch_bytes, s),
                  "clearing scratch", e) != 0)
        return -1;
    if (k->grid[0] == 0 || k->grid[1] == 0 || k->grid[2] == 0)
        return 0; /* nothing to do (an empty matrix) */
    CUresult r = CU(cuLaunchKernel)(k->fn, (unsigned)k->grid[0], (unsigned)k->grid[1],
                                    (unsigned)k->grid[2], (unsigned)k->block[0],
                                    (unsigned)k->block[1], (unsigned)k->block[2],
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
#define MAX_RUNS 20000

/* One timed side: its work, warmed up and (graph mode) captured. */
typedef struct timer {
    dev_enqueue_fn fn;
    void *ud;
    const dev_observer *obs; /* NULL: none */
    dev_time_mode mode;
    CUgraph g;
    CUgraphExec ge;
    CUgraph gf;      /* graph mode with a refill: the refills alone */
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
    return dev_time_pair_obs(fa, ua, NULL, fb, ub, NULL, mode, min_rounds, min_seconds,
                             max_seconds, out, e);
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
