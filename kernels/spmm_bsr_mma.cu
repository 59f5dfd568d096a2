/* spmm_bsr_mma.cu -- SpMM over BSR on tensor cores (mma.sync m16n8k16, fp16/bf16). */
/*@manifest
{"strategy": "bsr-mma-spmm", "op": "spmm", "dtypes": ["fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "WN": {"default": 32, "values": [8, 16, 32, 64]}},
 "constraints": [],
 "preprocessing": "CSR to BSR with b x b blocks (b = 16 in the contract; 8, 4, 2 and 1 also work, larger do not)",
 "summary": "warp per block row and WN columns; each 16-deep k-step is one BSR block (b = 16) or 16 / b blocks side by side, multiplied with mma.sync m16n8k16 into fp32 accumulators"}
@*/
/*@contract
{"entry": "spmm_bsr_mma", "op": "spmm", "format": "bsr", "format_params": {"b": 16},
 "layout": "row",
 "params": ["rows", "cols", "bsr_ptr", "bsr_col", "bsr_val", "brows", "B", "C", "alpha", "beta",
            "bias"],
 "block": ["32 * WARPS"], "grid": ["cdiv(brows, WARPS)", "cdiv(n, WN)"],
 "defines": {"N": "n", "BS": "b"}}
@*/
/* Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k16 with
 * floating point type"), with g = lane >> 2 and t = lane & 3, elements low
 * half first in each 32-bit register:
 *   A (16 x 16, row): a[0] = (g, 2t..2t+1)     a[1] = (g+8, 2t..2t+1)
 *                     a[2] = (g, 2t+8..2t+9)   a[3] = (g+8, 2t+8..2t+9)
 *   B (16 x 8, col):  b[0] = (2t..2t+1, g)     b[1] = (2t+8..2t+9, g)
 *   D (16 x 8, f32):  d[0] = (g, 2t)  d[1] = (g, 2t+1)  d[2] = (g+8, 2t)  d[3] = (g+8, 2t+1)
 *
 * A is the sparse operand: one warp owns block row br (output rows
 * br*BS .. br*BS+BS-1) and WN output columns, and walks the block row in
 * k-steps of 16 columns of A. With BS = 16 a k-step is one block, read
 * straight from bsr_val (row-major, so each A register is one aligned
 * 32-bit load). With BS < 16 it is KB = 16 / BS consecutive blocks of the
 * block row laid side by side; A rows BS..15 are zero and their results are
 * dropped. The dense operand is gathered: k-row kk of the step is row
 * bsr_col[block] * BS + kk % BS of B, and each lane loads its four B
 * values per 8-column tile directly (two 16-bit loads per register); rows
 * past the end of B (the padded last block column) and columns past N are
 * zeros, never loads. Accumulation stays in fp32 through the epilogue. */
#ifndef DITTO_T
/* As written (no dtype macros) the kernel builds for fp16: it has no
 * fp32 or fp64 path. */
#define DITTO_T __half
#define DITTO_S float
#define DITTO_DTYPE_FP16
#endif
#include "ditto.cuh"

#if !defined(DITTO_DTYPE_FP16) && !defined(DITTO_DTYPE_BF16)
#error "spmm_bsr_mma multiplies on tensor cores in fp16 or bf16 only"
#endif

#ifndef N
#define N 32
#endif
#ifndef BS
#define BS 16
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef WN
#define WN 32
#endif

static_assert(BS == 1 || BS == 2 || BS == 4 || BS == 8 || BS == 16,
              "spmm_bsr_mma: the BSR block size must be 1, 2, 4, 8 or 16");
static_assert(WN % 8 == 0, "WN: whole 8-column mma tiles");

static constexpr int KB = 16 / BS; /* blocks per 16-deep k-step */
static constexpr int NT = WN / 8;  /* mma tiles across the warp's columns */

#if defined(DITTO_DTYPE_BF16)
#define MMA_AB "bf16.bf16"
#else
#define MMA_AB "f16.f16"
#endif

/* d += A * B for one 16 x 8 x 16 tile; every lane of the warp must call it. */
__device__ __forceinline__ void mma_16816(float (&d)[4], const unsigned (&a)[4],
                                          const unsigned (&b)[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." MMA_AB ".f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/* Elements (m, k) and (m, k + 1) of the 16 x 16 A tile of the k-step whose
 * first block is s (k even), as raw 16-bit values, low half first. */
__device__ __forceinline__ unsigned a_pair(const unsigned short *__restrict__ av, int s, int end,
                                           int m, int k)
{
    if (m >= BS)
        return 0u;
    if (BS >= 2) {
        /* k and k + 1 fall in one block (BS even, k even), at an even
         * element offset: one aligned 32-bit load. */
        const int blk = s + k / BS;
        if (blk >= end)
            return 0u;
        return __ldg(reinterpret_cast<const unsigned *>(av + (size_t)blk * (BS * BS) + m * BS +
                                                        k % BS));
    }
    /* 1 x 1 blocks: k and k + 1 are two blocks. */
    const unsigned lo = s + k < end ? (unsigned)__ldg(av + s + k) : 0u;
    const unsigned hi = s + k + 1 < end ? (unsigned)__ldg(av + s + k + 1) : 0u;
    return lo | (hi << 16);
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
spmm_bsr_mma(int rows, int cols, const int *__restrict__ bsr_ptr, const int *__restrict__ bsr_col,
             const T *__restrict__ bsr_val, int brows, const T *__restrict__ B, T *__restrict__ C,
             S alpha, S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int g = lane >> 2;
    const int t = lane & 3;
    const long long wbr = (long long)blockIdx.x * WARPS + (threadIdx.x >> 5);
    /* The whole warp leaves together: mma.sync needs all 32 lanes, and this
     * warp will issue none. */
    if (wbr >= brows)
        return;
    const int br = (int)wbr;
    const int n0 = blockIdx.y * WN;
    const int beg = bsr_ptr[br];
    const int end = bsr_ptr[br + 1];
    const unsigned short *__restrict__ av = reinterpret_cast<const unsigned short *>(bsr_val);
    const unsigned short *__restrict__ bv = reinterpret_cast<const unsigned short *>(B);

    float d[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; nt++)
#pragma unroll
        for (int i = 0; i < 4; i++)
            d[nt][i] = 0.0f;

    for (int s = beg; s < end; s += KB) {
        unsigned a[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            a[r] = a_pair(av, s, end, g + 8 * (r & 1), 2 * t + 8 * (r >> 1));
        /* Rows of B for this lane's k = 2t, 2t+1, 2t+8, 2t+9; -1: zeros. */
        int brow[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int k = 2 * t + (i & 1) + 8 * (i >> 1);
            const int blk = s + k / BS;
            brow[i] = -1;
            if (blk < end) {
                const int rr = __ldg(bsr_col + blk) * BS + k % BS;
                if (rr < cols)
                    brow[i] = rr;
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
            /* Same for the whole warp, so the mma below stays warp-wide. */
            if (n0 + nt * 8 >= N)
                break;
            const int n = n0 + nt * 8 + g;
            unsigned b[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                unsigned lo = 0u, hi = 0u;
                if (n < N) {
                    if (brow[2 * h] >= 0)
                        lo = __ldg(bv + (size_t)brow[2 * h] * N + n);
                    if (brow[2 * h + 1] >= 0)
                        hi = __ldg(bv + (size_t)brow[2 * h + 1] * N + n);
                }
                b[h] = lo | (hi << 16);
            }
            mma_16816(d[nt], a, b);
        }
    }

#pragma unroll
    for (int nt = 0; nt < NT; nt++) {
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const int m = g + 8 * (i >> 1);
            const int n = n0 + nt * 8 + 2 * t + (i & 1);
            const long long row = (long long)br * BS + m;
            if (m < BS && row < rows && n < N) {
                T *dst = C + (size_t)row * N + n;
                *dst = DT_STORE(dt_epilogue(dt_axpby(alpha, d[nt][i], beta, dst), (int)row, bias));
            }
        }
    }
}
