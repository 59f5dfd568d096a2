/* spmm_csr_warp_col.cu -- SpMM, column-major B and C, over CSR: lanes over rows and N. */
/*@manifest
{"strategy": "csr-warp-spmm-col", "op": "spmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "RW": {"default": 8, "values": [1, 2, 4, 8, 16, 32]},
            "JMAX": {"default": 8, "values": [2, 4, 8, 16]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "column-major B and C: RW consecutive rows per warp across lanes (coalesced C), the rest of the lanes over N, column/value loads reused across N"}
@*/
/*@contract
{"entry": "spmm_csr_warp_col", "op": "spmm", "format": "csr", "layout": "col",
 "params": ["rows", "cols", "rowptr", "col", "val", "B", "C", "alpha", "beta", "bias"],
 "block": ["32 * WARPS"], "grid": ["cdiv(rows, WARPS * RW)"],
 "defines": {"N": "n"}}
@*/
/* Column-major B keeps the N values of one B row N * cols apart, so there
 * is no vector along N to load; what can be made contiguous is the output:
 * C(row, j) sits at j * rows + row. A warp takes RW consecutive rows, lane
 * = jsub * RW + rsub, so that for each j the RW lanes of consecutive rows
 * write consecutive addresses, and the 32 / RW lane sets split the N
 * columns (j = jsub, jsub + 32/RW, ...). Each lane keeps up to JMAX
 * accumulators per pass and reuses one (col, val) load across them; B
 * loads for the same j in neighbouring rows coalesce when the matrix has
 * column locality (banded, stencil). No warp collectives: lanes of short
 * rows simply finish early. */
#include "ditto.cuh"

#ifndef N
#define N 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef RW
#define RW 8
#endif
#ifndef JMAX
#define JMAX 8
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

static constexpr int JL = 32 / RW;                 /* lane sets over N */
static constexpr int JPL = (N + JL - 1) / JL;      /* columns per lane */
static constexpr int JP = JPL < JMAX ? JPL : JMAX; /* columns per lane per pass */
static constexpr int PASSES = (JPL + JP - 1) / JP;
/* j < N holds for every lane and pass: the check folds away. */
static constexpr bool EXACT = N % JL == 0 && JPL % JP == 0;

static_assert(32 % RW == 0, "RW must divide the warp");

extern "C" __global__ void __launch_bounds__(32 * WARPS)
spmm_csr_warp_col(int rows, int cols, const int *__restrict__ rowptr, const int *__restrict__ col,
                  const T *__restrict__ val, const T *__restrict__ B, T *__restrict__ C, S alpha,
                  S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int rsub = lane % RW;
    const int jsub = lane / RW;
    const long long r = ((long long)blockIdx.x * WARPS + (threadIdx.x >> 5)) * RW + rsub;
    if (r >= rows)
        return;
    const int row = (int)r;
    const int beg = rowptr[row];
    const int end = rowptr[row + 1];
    for (int p = 0; p < PASSES; p++) {
        S acc[JP];
#pragma unroll
        for (int t = 0; t < JP; t++)
            acc[t] = S(0);
        int k = beg;
        for (; k < end - (UNROLL - 1); k += UNROLL) {
            int c[UNROLL];
            S a[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                c[u] = __ldg(col + k + u);
                a[u] = DT_LOAD(val[k + u]);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++)
#pragma unroll
                for (int t = 0; t < JP; t++) {
                    const int j = jsub + JL * (p * JP + t);
                    if (EXACT || j < N)
                        acc[t] += a[u] * DT_LOAD(__ldg(B + (size_t)j * cols + c[u]));
                }
        }
        for (; k < end; k++) {
            const int c = __ldg(col + k);
            const S a = DT_LOAD(val[k]);
#pragma unroll
            for (int t = 0; t < JP; t++) {
                const int j = jsub + JL * (p * JP + t);
                if (EXACT || j < N)
                    acc[t] += a * DT_LOAD(__ldg(B + (size_t)j * cols + c));
            }
        }
#pragma unroll
        for (int t = 0; t < JP; t++) {
            const int j = jsub + JL * (p * JP + t);
            if (EXACT || j < N) {
                T *dst = C + (size_t)j * rows + row;
                *dst = DT_STORE(dt_epilogue(dt_axpby(alpha, acc[t], beta, dst), row, bias));
            }
        }
    }
}
