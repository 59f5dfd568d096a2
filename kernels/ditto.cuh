/* ditto.cuh -- what every kernel template shares: the value type T and scalar
 * type S chosen by the worker (-DDITTO_T, -DDITTO_S, -DDITTO_DTYPE_*),
 * loads and stores through S (fp32 accumulation for half types), and the
 * fused epilogue (-DDITTO_EPILOGUE_NONE|RELU|GELU|BIAS).
 *
 * The worker puts this folder on NVRTC's include path; `ditto export`
 * inlines it into the standalone source. */
#ifndef DITTO_CUH
#define DITTO_CUH

#ifndef DITTO_T
#define DITTO_T float
#define DITTO_S float
#define DITTO_DTYPE_FP32
#endif

#if defined(DITTO_DTYPE_FP16)
#include <cuda_fp16.h>
#define DT_LOAD(v) __half2float(v)
#define DT_STORE(f) __float2half_rn(f)
#elif defined(DITTO_DTYPE_BF16)
#include <cuda_bf16.h>
#define DT_LOAD(v) __bfloat162float(v)
#define DT_STORE(f) __float2bfloat16_rn(f)
#else
#define DT_LOAD(v) (v)
#define DT_STORE(f) (f)
#endif

typedef DITTO_T T; /* stored values */
typedef DITTO_S S; /* arithmetic and scalars */

/* The epilogue on one output of row `row`: y = act(alpha * acc + beta * y0)
 * (+ bias[row] for the bias epilogue). */
__device__ __forceinline__ S dt_epilogue(S v, int row, const T *__restrict__ bias)
{
#if defined(DITTO_EPILOGUE_RELU)
    (void)row;
    (void)bias;
    return v > S(0) ? v : S(0);
#elif defined(DITTO_EPILOGUE_GELU)
    (void)row;
    (void)bias;
    return S(0.5) * v * (S(1) + tanh(S(0.7978845608028654) * (v + S(0.044715) * v * v * v)));
#elif defined(DITTO_EPILOGUE_BIAS)
    return v + DT_LOAD(bias[row]);
#else
    (void)row;
    (void)bias;
    return v;
#endif
}

/* alpha * acc + beta * old, without reading old when beta is 0 (the output
 * may hold anything then, NaN included). */
__device__ __forceinline__ S dt_axpby(S alpha, S acc, S beta, const T *old)
{
    return beta == S(0) ? alpha * acc : alpha * acc + beta * DT_LOAD(*old);
}

#endif /* DITTO_CUH */
