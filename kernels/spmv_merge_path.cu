/* spmv_merge_path.cu -- SpMV over CSR by merge path (Merrill & Garland):
 * the row ends and the nonzeros, merged, form a path of rows + nnz steps
 * cut into equal tiles of BLOCK * ITEMS steps, one per block, and each
 * thread walks ITEMS of them. Every thread does the same work whatever the
 * row lengths: empty rows, power-law rows and one row of millions all cost
 * their length and nothing more. A block stages its tile's products
 * (coalesced loads) and row ends in shared memory, sums rows within the
 * tile, and a row cut across tiles leaves each block's partial sum in
 * scratch; the block that counts the row last adds them up in tile order
 * and writes it, so beta and the epilogue apply once. It also sets the
 * count back to zero: the worker zeroes scratch once, when it allocates it
 * ("scratch_init": "once"), not with a memset before every launch. */
/*@manifest
{"strategy": "merge-path", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512]},
            "ITEMS": {"default": 7, "values": [2, 3, 4, 5, 6, 7, 8, 12, 16]}},
 "constraints": ["BLOCK % 32 == 0", "BLOCK >= 64", "BLOCK * ITEMS <= 2048"],
 "preprocessing": "none",
 "summary": "merge path over row ends and nonzeros: equal work per thread for any row lengths"}
@*/
/*@contract
{"entry": "spmv_merge_path", "op": "spmv", "format": "csr",
 "params": ["rows", "nnz", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias", "scratch"],
 "block": ["BLOCK"], "grid": ["cdiv(rows + nnz, BLOCK * ITEMS)"],
 "scratch_bytes": "cdiv(rows + nnz, BLOCK * ITEMS) * 20 + 16", "scratch_init": "once"}
@*/
#include "ditto.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef ITEMS
#define ITEMS 7
#endif

#define TILE (BLOCK * ITEMS)
#define WARPS (BLOCK / 32)
#define FULL 0xffffffffu

static_assert(BLOCK % 32 == 0 && BLOCK >= 64, "BLOCK: whole warps, at least two");
static_assert(TILE <= 2048, "BLOCK * ITEMS: the tile is staged in 48 KB of shared memory");

/* Where diagonal d of the merge path crosses the row ends: the number of
 * rows whose end comes before step d, i.e. the smallest x in [0, rows] with
 * x == rows or rowptr[x + 1] + x >= d (row x ends at step rowptr[x + 1] +
 * x). A 32-way search by the whole warp: about log32(rows) loads in a
 * row instead of log2(rows). */
__device__ __forceinline__ int path_search(const int *__restrict__ rowptr, int rows, long long d)
{
    const int lane = threadIdx.x % 32;
    int lo = 0, hi = rows;
    while (lo < hi) {
        const int p = lo + (int)(((long long)(hi - lo) * lane) >> 5);
        const unsigned m = __ballot_sync(FULL, rowptr[p + 1] + (long long)p >= d);
        const int j = m ? __ffs(m) - 1 : 32;
        const int below = __shfl_sync(FULL, p, (j + 31) & 31); /* lane j - 1's probe */
        const int at = __shfl_sync(FULL, p, j & 31);
        const int nlo = j == 0 ? lo : below + 1;
        hi = j == 32 ? hi : at;
        lo = nlo;
    }
    return lo;
}

/* The block's sum of v, returned to every thread; a fixed tree. */
__device__ __forceinline__ S block_sum(S v, S *s_red)
{
#pragma unroll
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_down_sync(FULL, v, off);
    if (threadIdx.x % 32 == 0)
        s_red[threadIdx.x / 32] = v;
    __syncthreads();
    S t = S(0);
#pragma unroll
    for (int w = 0; w < WARPS; w++)
        t += s_red[w];
    __syncthreads();
    return t;
}

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_merge_path(int rows, int nnz, const int *__restrict__ rowptr, const int *__restrict__ col,
                const T *__restrict__ val, const T *__restrict__ x, T *__restrict__ y, S alpha,
                S beta, const T *__restrict__ bias, void *scratch)
{
    __shared__ int s_end[TILE + 1]; /* tile rows' ends, as nonzero offsets into the tile */
    __shared__ S s_prod[TILE];      /* the tile's products val * x[col] */
    __shared__ S s_sum[TILE + 1];   /* per tile row: its sum within the tile */
    __shared__ int s_coord[4];      /* tile start (row, nonzero), tile end (row, nonzero) */
    __shared__ int s_fin[2][3];     /* rows this block finishes for others: row, b0, b1 */
    __shared__ S s_red[WARPS];
    const int tid = threadIdx.x;
    const long long total = (long long)rows + nnz;
    const long long d0 = (long long)blockIdx.x * TILE;
    const long long d1 = d0 + TILE < total ? d0 + TILE : total;

    /* Warp 0 finds the tile's start, warp 1 its end. */
    if (tid < 64) {
        const int w = tid / 32;
        const long long d = w == 0 ? d0 : d1;
        const int r = path_search(rowptr, rows, d);
        if (tid % 32 == 0) {
            s_coord[2 * w] = r;
            s_coord[2 * w + 1] = (int)(d - r);
        }
    }
    __syncthreads();
    const int row0 = s_coord[0], nz0 = s_coord[1], row1 = s_coord[2], nz1 = s_coord[3];
    const int nrow = row1 - row0; /* rows that end in this tile */
    const int nval = nz1 - nz0;   /* nonzeros in this tile; nrow + nval = d1 - d0 */

    /* Stage the tile, coalesced. Row nrow (row1) does not end here: its
     * end is a sentinel the walk never reaches. A thread stages at most
     * ITEMS row ends and ITEMS products (nrow + nval <= TILE), so the loops
     * are unrolled with every load of a kind issued before the first is
     * used: two round trips to memory (col and val, then x) instead of two
     * per item, which is what keeps enough bytes in flight at HBM sizes. */
    int c[ITEMS];
    T v[ITEMS];
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int i = tid + it * BLOCK;
        if (i < nrow) {
            s_end[i] = rowptr[row0 + i + 1] - nz0;
            s_sum[i] = S(0);
        }
        if (i < nval) {
            c[it] = col[nz0 + i];
            v[it] = val[nz0 + i];
        }
    }
    if (tid == 0) {
        s_end[nrow] = 0x7fffffff;
        s_sum[nrow] = S(0);
    }
#pragma unroll
    for (int it = 0; it < ITEMS; it++) {
        const int k = tid + it * BLOCK;
        if (k < nval)
            s_prod[k] = DT_LOAD(v[it]) * DT_LOAD(__ldg(&x[c[it]]));
    }
    __syncthreads();

    /* This thread's ITEMS steps of the tile. A row it both starts and ends
     * is its alone (a plain store); the first row it touches and the row it
     * leaves unfinished may be shared with its neighbours (atomics). */
    const int td = tid * ITEMS;
    if (td < nrow + nval) {
        int lo = td - nval > 0 ? td - nval : 0, hi = td < nrow ? td : nrow;
        while (lo < hi) { /* the thread's start, as path_search within the tile */
            const int mid = (lo + hi) >> 1;
            if (s_end[mid] + mid >= td)
                hi = mid;
            else
                lo = mid + 1;
        }
        int ti = lo, tk = td - lo;
        const int steps = nrow + nval - td;
        S acc = S(0);
        bool first = true;
#pragma unroll
        for (int it = 0; it < ITEMS; it++) {
            if (it < steps) {
                if (tk < s_end[ti]) {
                    acc += s_prod[tk++];
                } else {
                    if (first)
                        atomicAdd(&s_sum[ti], acc);
                    else
                        s_sum[ti] = acc;
                    first = false;
                    acc = S(0);
                    ti++;
                }
            }
        }
        atomicAdd(&s_sum[ti], acc); /* carry into the row left unfinished (ti <= nrow) */
    }
    __syncthreads();

    /* Rows that begin and end in this tile: written here, coalesced. Row 0
     * of the tile, when it began in an earlier tile, is finished below. */
    const bool incoming = nrow > 0 && nz0 > rowptr[row0];
    for (int i = tid; i < nrow; i += BLOCK) {
        if (i == 0 && incoming)
            continue;
        const int r = row0 + i;
        y[r] = DT_STORE(dt_epilogue(dt_axpby(alpha, s_sum[i], beta, &y[r]), r, bias));
    }

    /* Rows cut across tiles. Row r spans tiles b0 (its first nonzero) to b1
     * (its end); tile b < b1 leaves its part in out[b] (a tile leaves at most
     * one row unfinished), tile b1 its part in head[b1] (a tile finishes at
     * most one row begun before it), and the count cnt[b1] says when all
     * b1 - b0 + 1 parts are there. */
    const int ntiles = gridDim.x;
    unsigned *cnt = (unsigned *)scratch;
    S *out = (S *)((char *)scratch + (((size_t)ntiles * 4 + 15) & ~(size_t)15));
    S *head = out + ntiles;
    if (tid == 0) {
        s_fin[0][0] = s_fin[1][0] = -1;
        if (incoming) {
            const int b0 = (int)((rowptr[row0] + (long long)row0) / TILE), b1 = blockIdx.x;
            head[b1] = s_sum[0];
            __threadfence(); /* the part is visible before the count says so */
            if (atomicAdd(&cnt[b1], 1u) == (unsigned)(b1 - b0)) {
                cnt[b1] = 0u; /* every part counted: ready for the next launch */
                __threadfence();
                s_fin[0][0] = row0;
                s_fin[0][1] = b0;
                s_fin[0][2] = b1;
            }
        }
        if (row1 < rows && nz1 > rowptr[row1]) {
            const int b0 = (int)((rowptr[row1] + (long long)row1) / TILE);
            const int b1 = (int)((rowptr[row1 + 1] + (long long)row1) / TILE);
            out[blockIdx.x] = s_sum[nrow];
            __threadfence();
            if (atomicAdd(&cnt[b1], 1u) == (unsigned)(b1 - b0)) {
                cnt[b1] = 0u;
                __threadfence();
                s_fin[1][0] = row1;
                s_fin[1][1] = b0;
                s_fin[1][2] = b1;
            }
        }
    }
    __syncthreads();
#pragma unroll
    for (int f = 0; f < 2; f++) {
        const int r = s_fin[f][0];
        if (r < 0)
            continue; /* the same in every thread */
        const int b0 = s_fin[f][1], b1 = s_fin[f][2];
        S sum = S(0);
        for (int b = b0 + tid; b <= b1; b += BLOCK)
            sum += __ldcg(b < b1 ? &out[b] : &head[b1]);
        sum = block_sum(sum, s_red);
        if (tid == 0)
            y[r] = DT_STORE(dt_epilogue(dt_axpby(alpha, sum, beta, &y[r]), r, bias));
    }
}
