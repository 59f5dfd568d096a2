/* spmm_csr_split.cu -- SpMM, row-major B and C, over CSR with row bins: short rows a lane
 * group each, rows longer than long_row split over blocks by nonzeros, summed in piece order. */
/*@manifest
{"strategy": "csr-split-spmm", "op": "spmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 8, "values": [1, 2, 4, 8, 16]},
            "VEC": {"default": 8, "values": [1, 2, 4, 8]},
            "LANES": {"default": 32, "values": [4, 8, 16, 32]},
            "ROWS_PER_WARP": {"default": 1, "values": [1, 2, 4, 8]},
            "SORTED": {"default": 0, "values": [0, 1]},
            "UNROLL": {"default": 4, "values": [1, 2, 4, 8]},
            "CHUNK": {"default": 128, "values": [32, 64, 128, 256, 512, 1024, 2048]},
            "TN": {"default": 128, "values": [32, 64, 128, 256]}},
 "constraints": [],
 "format_params": {"long_row": {"default": 128,
                                "values": [32, 64, 128, 256, 512, 1024, 2048, 4096]}},
 "preprocessing": "bins (rows by length; a running nonzero count over rows past long_row)",
 "summary": "lane group per short row; rows past long_row split over blocks, CHUNK each"}
@*/
/*@contract
{"entry": "spmm_csr_split", "op": "spmm", "format": "bins", "layout": "row",
 "format_params": {"per_lane": 4, "long_row": 128},
 "params": ["rows", "rowptr", "col", "val", "bin_rows", "bin_long_ptr", "bin6", "long_nnz",
            "long_row", "B", "C", "alpha", "beta", "bias", "scratch"],
 "block": ["32 * WARPS"],
 "grid": ["cdiv(rows - SORTED * bin6, WARPS * ROWS_PER_WARP) + cdiv(long_nnz, CHUNK)",
          "cdiv(n, TN)"],
 "defines": {"N": "n"},
 "scratch_bytes": "cdiv(bin6 * cdiv(n, TN), 4) * 16 + cdiv(long_nnz, CHUNK) * n * 16",
 "scratch_init": "once"}
@*/
/* Why: a block that walks a row of thousands of nonzeros alone (csr-tiled-spmm splits such a
 * row only over the warps of its own block) waits on tens of dependent B-row loads per lane
 * group, on one SM, while the rest of the GPU has finished. Here the rows longer than long_row
 * (bin 6 of the bins format, laid end to end by bin_long_ptr) are cut into pieces of CHUNK
 * nonzeros, a block each, so one long row spreads over as many SMs as it has pieces.
 *
 * Grid x: first the short-row blocks, then one block per piece; grid y: tiles of TN columns.
 *
 * Short rows (length <= long_row): the mapping of spmm_csr_warp. A lane owns VW consecutive
 * columns (VEC clamped to 16 bytes and to a divisor of N), L lanes (a group) span a tile row,
 * G = 32 / L groups per warp; a warp owns ROWS_PER_WARP rows, up to G in flight, the groups of
 * one row splitting its nonzeros and folding them with shuffles. Rows come in matrix order
 * (SORTED = 0: no extra load; a group that meets a long row leaves it to the pieces) or in
 * bin order (SORTED = 1: rows of like length share a warp, at the cost of one dependent load
 * of bin_rows).
 *
 * Pieces: the GB = WARPS * G groups of the block deal the piece's nonzeros round robin (group
 * q takes q, q + GB, ...), fold within the warp by shuffles and across warps in shared memory
 * in warp order. A row that lies wholly inside the piece is written at once. A row cut across
 * pieces leaves, per piece, its partial tile row in scratch (head[j] when the row began before
 * piece j, tail[j] when it begins in piece j and runs past it) and raises the row's counter for
 * that column tile; the block that raises it last adds tail[b0], head[b0 + 1], ..., head[b1]
 * in that order and writes C once, with beta and the epilogue. Every sum has a fixed order, so
 * the result does not depend on which block finishes first; C gets no atomics.
 *
 * Scratch: one counter per (long row, column tile), rounded up to 16 bytes, then head and
 * tail, each N values of S per piece (8 bytes per value in the contract: the formula cannot
 * see the dtype). The worker zeroes it once, when it allocates it ("scratch_init": "once"):
 * the block that reads a counter last leaves it at zero, and head and tail are written before
 * they are read, so no launch needs a memset. Under graph replay the memset node that used to
 * precede every launch cost about 0.8 us (adder_dcop_05 at N=32: 4.99 -> 4.16 us). */
#include "ditto.cuh"

#ifndef N
#define N 32
#endif
#ifndef WARPS
#define WARPS 8
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef LANES
#define LANES 32
#endif
#ifndef ROWS_PER_WARP
#define ROWS_PER_WARP 1
#endif
#ifndef SORTED
#define SORTED 0
#endif
#ifndef UNROLL
#define UNROLL 4
#endif
#ifndef CHUNK
#define CHUNK 128
#endif
#ifndef TN
#define TN 128
#endif

#define FULL 0xffffffffu
#define BLOCK (32 * WARPS)

#include "lanes.cuh"

static constexpr int VW = vec_width(VEC, N, (int)sizeof(T));
static constexpr int TE = N < TN ? N : TN;                      /* columns of one tile */
static constexpr int NVT = TE / VW;                             /* vectors per tile row */
/* A lane holds at most ACC accumulators (TE / L; 64 bytes, 16 registers): narrower groups
 * would spill on wide tiles, so LANES is raised as far as the tile needs. */
static constexpr int ACC = 64 / (int)sizeof(S);
static constexpr int LMIN = group_lanes((TE + ACC - 1) / ACC, 32);
static constexpr int L = group_lanes(NVT, LANES > LMIN ? LANES : LMIN); /* lanes per group */
static constexpr int G = 32 / L;                                /* groups per warp */
static constexpr int GB = WARPS * G;                            /* groups per block */
static constexpr int NCH = (NVT + L - 1) / L;                   /* vectors per lane */
static constexpr int P = ROWS_PER_WARP < G ? ROWS_PER_WARP : G; /* short rows in flight */
static constexpr int GPR = G / P;                               /* groups per short row */
static constexpr int ROUNDS = ROWS_PER_WARP / P;
static constexpr int RPB = WARPS * ROWS_PER_WARP; /* short rows per block */
/* Every tile but possibly the last is full: the column check folds away. */
static constexpr bool FULL_TILES = N % TN == 0 || N <= TN;

static_assert(TN % 8 == 0 && TE % VW == 0, "column tile must hold whole vectors");
static_assert((ROWS_PER_WARP & (ROWS_PER_WARP - 1)) == 0, "ROWS_PER_WARP: a power of two");
static_assert(CHUNK >= 1, "CHUNK: nonzeros per piece");

#include "spmm_tile.cuh"

/* Add the partial sums of the groups in [first, first + span) of a warp (span a power of
 * two): lanes of a group are contiguous, so xor by L .. span * L / 2 stays inside. Every
 * lane takes part. */
template <int SPAN>
__device__ __forceinline__ void fold_groups(S (&acc)[NCH][VW])
{
#pragma unroll
    for (int off = L; off < L * SPAN; off *= 2)
#pragma unroll
        for (int ch = 0; ch < NCH; ch++)
#pragma unroll
            for (int e = 0; e < VW; e++)
                acc[ch][e] += __shfl_xor_sync(FULL, acc[ch][e], off);
}

/* C[row, tile] = epilogue(alpha * acc + beta * C) for this lane's vectors. C is read (as one
 * vector) only when beta needs it: with beta == 0 it may hold NaN. */
__device__ __forceinline__ void store_row(const S (&acc)[NCH][VW], T *__restrict__ C, int row,
                                          int col0, int gl, S alpha, S beta,
                                          const T *__restrict__ bias)
{
    T *crow = C + (size_t)row * N + col0;
#pragma unroll
    for (int ch = 0; ch < NCH; ch++) {
        const int v = ch * L + gl;
        if (vec_in(v, col0)) {
            vec_t *dst = reinterpret_cast<vec_t *>(crow + v * VW);
            vec_t old = {}, o;
            if (beta != S(0))
                old = *dst;
#pragma unroll
            for (int e = 0; e < VW; e++)
                o.e[e] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc[ch][e], beta, &old.e[e]), row,
                                              bias));
            *dst = o;
        }
    }
}

/* Short-row block sb: rows [sb * RPB, +RPB) of the matrix (SORTED = 0, rows longer than
 * long_row skipped) or of the short bins' list (SORTED = 1). No barriers. */
__device__ __forceinline__ void short_rows(int sb, int count, const int *__restrict__ rowptr,
                                           const int *__restrict__ col, const T *__restrict__ val,
                                           const int *__restrict__ bin_rows, int long_row,
                                           const T *__restrict__ B, T *__restrict__ C, S alpha,
                                           S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int rsub = grp / GPR; /* which of the P rows in flight */
    const int gsub = grp % GPR; /* which share of that row's nonzeros */
    const int col0 = blockIdx.y * TE; /* TE = TN, or N in the one tile when TN >= N */
    const long long wrow = ((long long)sb * WARPS + (threadIdx.x >> 5)) * ROWS_PER_WARP;

    for (int round = 0; round < ROUNDS; round++) {
        const long long r = wrow + round * P + rsub;
        int row = -1, beg = 0, end = 0;
        if (r < count) {
            row = SORTED ? bin_rows[r] : (int)r;
            beg = rowptr[row];
            end = rowptr[row + 1];
            if (!SORTED && end - beg > long_row)
                row = -1; /* a piece block owns it */
        }
        S acc[NCH][VW];
        if (row < 0)
            beg = end = 0;
        row_segment(acc, beg + gsub, end, GPR, col, val, B, col0, gl);
        fold_groups<GPR>(acc);
        if (row >= 0 && gsub == 0)
            store_row(acc, C, row, col0, gl, alpha, beta, bias);
    }
}

#include "warp_search.cuh"

/* Piece j: nonzeros [j * CHUNK, +CHUNK) of the long rows laid end to end (lptr, total
 * long_nnz), for column tile blockIdx.y. Every branch and loop test that a barrier depends on
 * reads values that are the same in every thread of the block. */
__device__ void long_rows(int j, int nlong, int long_nnz, const int *__restrict__ rows_long,
                          const int *__restrict__ lptr, const int *__restrict__ rowptr,
                          const int *__restrict__ col, const T *__restrict__ val,
                          const T *__restrict__ B, T *__restrict__ C, S alpha, S beta,
                          const T *__restrict__ bias, void *scratch)
{
    __shared__ S red[WARPS][TE];
    __shared__ int s_last;
    const int w = threadIdx.x >> 5;
    const int lane = threadIdx.x & 31;
    const int grp = lane / L;
    const int gl = lane % L;
    const int q = w * G + grp; /* group index in the block */
    const int col0 = blockIdx.y * TE; /* TE = TN, or N in the one tile when TN >= N */
    const int lo = j * CHUNK; /* < long_nnz: the grid has cdiv(long_nnz, CHUNK) pieces */
    const int hi = (int)min((long long)lo + CHUNK, (long long)long_nnz);
    S acc[NCH][VW];

    for (int i = warp_upper(lptr, 0, nlong, lo); i < nlong && lptr[i] < hi; i++) {
        const int rlo = lptr[i], rhi = lptr[i + 1];
        const int s0 = max(lo, rlo), s1 = min(hi, rhi);
        const int row = rows_long[i];
        const int k0 = rowptr[row] + (s0 - rlo);
        row_segment(acc, k0 + q, k0 + (s1 - s0), GB, col, val, B, col0, gl);
        fold_groups<G>(acc);
        if (grp == 0) {
#pragma unroll
            for (int ch = 0; ch < NCH; ch++) {
                const int v = ch * L + gl;
                if (vec_in(v, col0))
#pragma unroll
                    for (int e = 0; e < VW; e++)
                        red[w][v * VW + e] = acc[ch][e];
            }
        }
        __syncthreads();
        T *crow = C + (size_t)row * N + col0;
        if (s0 == rlo && s1 == rhi) {
            /* The whole row is in this piece: write it, warps added in order. */
            for (int c = threadIdx.x; c < TE; c += BLOCK) {
                if (FULL_TILES || col0 + c < N) {
                    S s = S(0);
#pragma unroll
                    for (int ww = 0; ww < WARPS; ww++)
                        s += red[ww][c];
                    crow[c] = DT_STORE(dt_epilogue(dt_axpby(alpha, s, beta, crow + c), row, bias));
                }
            }
        } else {
            const int b0 = rlo / CHUNK, b1 = (rhi - 1) / CHUNK; /* the pieces sharing the row */
            const int npieces = (int)(((long long)long_nnz + CHUNK - 1) / CHUNK);
            unsigned *cnt = (unsigned *)scratch;
            S *head = (S *)((char *)scratch + (((size_t)nlong * gridDim.y + 3) / 4) * 16);
            S *tail = head + (size_t)npieces * N;
            S *mine = (rlo < lo ? head : tail) + (size_t)j * N + col0;
            for (int c = threadIdx.x; c < TE; c += BLOCK) {
                if (FULL_TILES || col0 + c < N) {
                    S s = S(0);
#pragma unroll
                    for (int ww = 0; ww < WARPS; ww++)
                        s += red[ww][c];
                    mine[c] = s;
                }
            }
            __threadfence(); /* each thread's partial is visible before the count says so */
            __syncthreads();
            if (threadIdx.x == 0) {
                unsigned *ct = cnt + (size_t)i * gridDim.y + blockIdx.y;
                const int last = atomicAdd(ct, 1u) == (unsigned)(b1 - b0);
                if (last) {
                    /* No other piece touches the counter again in this launch: leave it at
                     * zero for the next one (the contract's scratch_init "once"). */
                    *ct = 0u;
                    __threadfence(); /* the other pieces' partials are read after the count */
                }
                s_last = last;
            }
            __syncthreads();
            if (s_last) { /* the same in every thread: a block-wide branch, no barrier inside */
                for (int c = threadIdx.x; c < TE; c += BLOCK) {
                    if (FULL_TILES || col0 + c < N) {
                        const size_t at = (size_t)col0 + c;
                        S s = __ldcg(&tail[(size_t)b0 * N + at]);
#pragma unroll 4
                        for (int b = b0 + 1; b <= b1; b++)
                            s += __ldcg(&head[(size_t)b * N + at]);
                        crow[c] =
                            DT_STORE(dt_epilogue(dt_axpby(alpha, s, beta, crow + c), row, bias));
                    }
                }
            }
        }
        __syncthreads(); /* red and s_last are reused by the next row */
    }
}

/* At most 64 registers a thread (1024 threads an SM resident): without a minimum, ptxas aims
 * at full occupancy, 32 registers, and spills UNROLL's loads in flight on some shapes; the
 * small, latency-bound matrices this kernel is for fill few blocks per SM anyway. */
extern "C" __global__ void __launch_bounds__(BLOCK, 1024 / BLOCK)
spmm_csr_split(int rows, const int *__restrict__ rowptr, const int *__restrict__ col,
               const T *__restrict__ val, const int *__restrict__ bin_rows,
               const int *__restrict__ bin_long_ptr, int bin6, int long_nnz, int long_row,
               const T *__restrict__ B, T *__restrict__ C, S alpha, S beta,
               const T *__restrict__ bias, void *scratch)
{
    /* Short-row blocks exactly as the contract's grid counts them; the short bins come first
     * in bin_rows, the long bin's bin6 rows after them. */
    const int count = rows - (SORTED ? bin6 : 0);
    const int sblocks = (int)(((long long)count + RPB - 1) / RPB);
    if ((int)blockIdx.x < sblocks)
        short_rows((int)blockIdx.x, count, rowptr, col, val, bin_rows, long_row, B, C, alpha,
                   beta, bias);
    else
        long_rows((int)blockIdx.x - sblocks, bin6, long_nnz, bin_rows + (rows - bin6),
                  bin_long_ptr, rowptr, col, val, B, C, alpha, beta, bias, scratch);
}
