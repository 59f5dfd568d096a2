/* sddmm_nnz.cu -- SDDMM over CSR split by nonzeros: equal work per warp for any row lengths. */
/*@manifest
{"strategy": "csr-nnz-sddmm", "op": "sddmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 8, "values": [4, 8, 16, 32]},
            "CHUNK": {"default": 32, "values": [8, 16, 32, 64, 128, 256]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]}},
 "constraints": [],
 "preprocessing": "none",
 "summary": "warp per CHUNK consecutive nonzeros whatever rows they fall in (row of the first found by a 32-way warp search, the rest by ballots over 32 row ends); sub-warps of LANES lanes dot A[i, :] with Bt[j, :] in 16-byte vectors"}
@*/
/*@contract
{"entry": "sddmm_nnz", "op": "sddmm", "format": "csr",
 "params": ["rows", "nnz", "rowptr", "col", "A", "Bt", "out", "alpha", "beta"],
 "block": ["32 * WARPS"], "grid": ["cdiv(max(nnz, 1), WARPS * CHUNK)"],
 "defines": {"K": "k"}}
@*/
/* Every output of SDDMM is its own dot product, so the work splits by
 * nonzeros as evenly as it likes: warp w takes nonzeros [w * CHUNK,
 * (w + 1) * CHUNK). A row of thousands of entries (hangGlider_2's 1463,
 * adder_dcop_05's) is spread over as many warps as it has chunks, and rows
 * of one entry do not leave lanes idle: the per-row templates
 * (sddmm_warp, sddmm_rowgroup) serialise the first case or pay a block per
 * segment of every row for it.
 *
 * The row of the chunk's first nonzero comes from warp_upper, a 32-way
 * search of rowptr (log32(rows) loads). After that the warp keeps the ends
 * of 32 consecutive rows, one per lane; the row of nonzero k is the base
 * plus the number of those ends at or before k (one ballot), and the window
 * moves 32 rows on when k lies past all of them, so empty rows cost a
 * reload per 32. A step takes G * UNROLL nonzeros, one per group of L
 * lanes per unroll slot, whose column indices were loaded during the step
 * before, so a step waits on one load (Bt's row) and not on two; A's row
 * is re-read per nonzero from L1 (a chunk touches few rows), Bt's once.
 *
 * Measured on the H200 (bcsstk21, K = 32, graph replay, before the
 * columns were loaded a step ahead): each step cost about 1 us with a few
 * warps per SM (CHUNK 32 / 64 / 128 at WARPS 4: 5.7 / 9.6 / 17.0 us), so
 * small problems want CHUNK near one step; and blocks are not free (an
 * empty kernel of 4096 blocks replays at 3.0 us against 0.66 us for 132),
 * so small CHUNK goes with more WARPS. */
#include "ditto.cuh"

#if defined(DITTO_EPILOGUE_BIAS)
#error "sddmm has no bias epilogue (bias is per output row of SpMM/SpMV)"
#endif

#ifndef K
#define K 32
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef LANES
#define LANES 8
#endif
#ifndef CHUNK
#define CHUNK 32
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#include "lanes.cuh"
#include "sddmm_deal.cuh"
#include "warp_search.cuh"

static constexpr int STEP = G * UNROLL; /* nonzeros per step */

/* The end of row r + lane, or "never ended" past the last row. */
__device__ __forceinline__ int row_end(const int *__restrict__ rowptr, int rows, int r, int lane)
{
    return r + lane < rows ? __ldg(rowptr + r + lane + 1) : 0x7fffffff;
}

/* The columns of the nonzeros this group takes in the step from k0. */
__device__ __forceinline__ void load_cols(int (&j)[UNROLL], const int *__restrict__ col, int k0,
                                          int kend, int grp)
{
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const int kk = k0 + u * G + grp;
        j[u] = kk < kend ? __ldg(col + kk) : 0;
    }
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
sddmm_nnz(int rows, int nnz, const int *__restrict__ rowptr, const int *__restrict__ col,
          const T *__restrict__ A, const T *__restrict__ Bt, T *__restrict__ out, S alpha, S beta)
{
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const long long w0 = ((long long)blockIdx.x * WARPS + (threadIdx.x >> 5)) * CHUNK;
    if (w0 >= nnz)
        return; /* the whole warp */
    const int kbeg = (int)w0;
    const int kend = nnz - kbeg < CHUNK ? nnz : kbeg + CHUNK;

    int jn[UNROLL]; /* the next step's columns, loaded a step ahead */
    load_cols(jn, col, kbeg, kend, grp);
    int base = warp_upper(rowptr, 0, rows, kbeg); /* the row holding nonzero kbeg */
    int rend = row_end(rowptr, rows, base, lane);

    for (int k0 = kbeg; k0 < kend; k0 += STEP) {
        int j[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            j[u] = jn[u];
        if (k0 + STEP < kend)
            load_cols(jn, col, k0 + STEP, kend, grp);
        int row[UNROLL];
#pragma unroll
        for (int q = 0; q < STEP; q++) {
            /* q = u * G + group: the q-th nonzero of this step; k ascends
             * with q, so the window only moves forward. */
            const int k = k0 + q < kend ? k0 + q : kend - 1;
            unsigned ended = __ballot_sync(0xffffffffu, rend <= k);
            while (ended == 0xffffffffu) { /* past all 32 rows: slide on */
                base += 32;
                rend = row_end(rowptr, rows, base, lane);
                ended = __ballot_sync(0xffffffffu, rend <= k);
            }
            if (q % G == grp)
                row[q / G] = base + __popc(ended);
        }
        deal_step(row, j, k0, kend, grp, gl, A, Bt, out, alpha, beta);
    }
}
