/* dtype.c -- host conversion of fp64 values to a dtype's storage (fp32, fp16,
 * bf16: round to nearest even) and back, the bits the device will see. */
#include "sparse/sparse.h"

#include <string.h>

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

/* Below this many elements a conversion runs inline: sp_round converts one. */
#define CONV_INLINE (1 << 16)

void sp_to_dtype(const double *src, void *dst, size_t n, sp_dtype t)
{
    conv_job j = {src, dst, t};
    if (n < CONV_INLINE)
        to_dtype_range(&j, 0, (int64_t)n, 0);
    else
        sp_parallel_for((int64_t)n, (int64_t)n, to_dtype_range, &j);
}

void sp_from_dtype(const void *src, double *dst, size_t n, sp_dtype t)
{
    conv_job j = {src, dst, t};
    if (n < CONV_INLINE)
        from_dtype_range(&j, 0, (int64_t)n, 0);
    else
        sp_parallel_for((int64_t)n, (int64_t)n, from_dtype_range, &j);
}

double sp_round(double v, sp_dtype t)
{
    /* The common cases inline: the battery rounds every input it draws. */
    if (t == SP_FP64)
        return v;
    if (t == SP_FP32)
        return (double)(float)v;
    unsigned char tmp[8];
    double out;
    sp_to_dtype(&v, tmp, 1, t);
    sp_from_dtype(tmp, &out, 1, t);
    return out;
}
