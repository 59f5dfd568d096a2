/* spmv_bsr.cu -- SpMV over BSR (format "bsr", b x b blocks stored row-major)
 * with register blocking: a group of GROUP lanes per block row, lane l
 * computing row l % b of the blocks l / b, l / b + GROUP / b, ... as a dot
 * product of one block row (b contiguous values, one vector load) with the
 * block's x segment (b contiguous values, shared by the b lanes of a
 * block). One column index per b*b values instead of one per value, and
 * every load aligned and contiguous across the group. Good for matrices
 * made of dense blocks (FEM with several unknowns per node, block-sparse
 * pruned weights); the filled-in zeros cost bytes when blocks are sparse. */
/*@manifest
{"strategy": "bsr-group", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"LANES": {"default": 8, "values": [2, 4, 8, 16, 32]},
            "BLOCK": {"default": 256, "values": [64, 128, 256, 512, 1024]}},
 "constraints": ["BLOCK % 32 == 0"],
 "format_params": {"b": {"default": 4, "values": [2, 4, 8]}},
 "preprocessing": "bsr (b x b blocks, zeros filled in)",
 "summary": "max(LANES, b) lanes per block row, a block row's dot product per lane"}
@*/
/*@contract
{"entry": "spmv_bsr", "op": "spmv", "format": "bsr", "format_params": {"b": 4},
 "params": ["rows", "cols", "brows", "bsr_ptr", "bsr_col", "bsr_val", "x", "y", "alpha", "beta",
            "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(brows, BLOCK / max(LANES, b))"],
 "defines": {"BSR_B": "b"}}
@*/
#include "ditto.cuh"

#ifndef BSR_B
#define BSR_B 4
#endif
#ifndef LANES
#define LANES 8
#endif
#ifndef BLOCK
#define BLOCK 256
#endif

/* A group needs at least one lane per row of a block. */
#define GROUP (LANES < BSR_B ? BSR_B : LANES)
#define PER (GROUP / BSR_B) /* blocks a group works on at once */

static_assert(BSR_B >= 1 && BSR_B <= 32 && (BSR_B & (BSR_B - 1)) == 0,
              "BSR_B: the format's block size, a power of two up to 32");
static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
              "LANES: a power of two up to 32");
static_assert(BLOCK % 32 == 0, "BLOCK: whole warps (the shuffles name all 32 lanes)");

/* b consecutive elements in the widest aligned pieces (at most 16 bytes):
 * a block row starts at a multiple of b elements, so it is aligned to
 * b * sizeof(T) or to 16 bytes, whichever is smaller; so is an x segment. */
#define PIECE (BSR_B * sizeof(T) < 16 ? BSR_B : (int)(16 / sizeof(T)))
template <typename E, int N> struct __align__(sizeof(E) * N) vec_t {
    E v[N];
};

__device__ __forceinline__ void load_row(const T *__restrict__ p, S out[BSR_B])
{
#pragma unroll
    for (int q = 0; q < BSR_B; q += PIECE) {
        const vec_t<T, PIECE> w = *reinterpret_cast<const vec_t<T, PIECE> *>(p + q);
#pragma unroll
        for (int i = 0; i < PIECE; i++)
            out[q + i] = DT_LOAD(w.v[i]);
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_bsr(int rows, int cols, int brows, const int *__restrict__ bsr_ptr,
         const int *__restrict__ bsr_col, const T *__restrict__ bsr_val, const T *__restrict__ x,
         T *__restrict__ y, S alpha, S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x % GROUP;
    const int brow = blockIdx.x * (BLOCK / GROUP) + threadIdx.x / GROUP;
    const int r = lane % BSR_B; /* row within the block */
    S acc = S(0);
    /* No early exit: the shuffles below name the whole warp. */
    if (brow < brows) {
        const int end = bsr_ptr[brow + 1];
        for (int blk = bsr_ptr[brow] + lane / BSR_B; blk < end; blk += PER) {
            const int c0 = bsr_col[blk] * BSR_B;
            S a[BSR_B];
            load_row(bsr_val + ((long long)blk * BSR_B + r) * BSR_B, a);
            if (c0 + BSR_B <= cols) {
                S xs[BSR_B];
                const T *__restrict__ xp = x + c0;
#pragma unroll
                for (int q = 0; q < BSR_B; q += PIECE) {
                    const vec_t<T, PIECE> w = *reinterpret_cast<const vec_t<T, PIECE> *>(xp + q);
#pragma unroll
                    for (int i = 0; i < PIECE; i++)
                        xs[q + i] = DT_LOAD(w.v[i]);
                }
#pragma unroll
                for (int q = 0; q < BSR_B; q++)
                    acc += a[q] * xs[q];
            } else {
                /* The last block column reaches past cols (the format pads
                 * the matrix to whole blocks, x is not padded). */
#pragma unroll
                for (int q = 0; q < BSR_B; q++)
                    if (c0 + q < cols)
                        acc += a[q] * DT_LOAD(__ldg(&x[c0 + q]));
            }
        }
    }
    /* Lanes l and l + b, l + 2b, ... hold the same block row's row r. */
#pragma unroll
    for (int off = GROUP / 2; off >= BSR_B; off >>= 1)
        acc += __shfl_down_sync(0xffffffffu, acc, off, GROUP);
    const int row = brow * BSR_B + r;
    if (brow < brows && lane < BSR_B && row < rows)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
