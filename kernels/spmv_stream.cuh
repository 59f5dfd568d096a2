/* spmv_stream.cuh -- the body shared by csr-stream (spmv_csr_stream.cu),
 * csr16-stream and csr16-xstage (spmv_csr16_*.cu): a block owns ROWS = BLOCK * RPT
 * consecutive rows, streams their contiguous nonzeros through shared memory
 * CAP = BLOCK * ITEMS at a time (every col and val load issued before the
 * first product), and sums each row from there: its thread for up to LONG
 * products in a tile, its whole warp for more. The including kernel defines
 * BLOCK, RPT and ITEMS and picks the column type: 32-bit columns, or 16-bit
 * offsets with x already moved to the block's base (in global memory, or
 * staged in shared memory by csr16-xstage). */
#pragma once

#define ROWS (BLOCK * RPT)
#define CAP (BLOCK * ITEMS)
#ifndef LONG
#define LONG 32 /* a row with more products than this in a tile is summed by its warp */
#endif
#define FULL 0xffffffffu

static_assert(BLOCK % 32 == 0, "BLOCK: whole warps");
static_assert(CAP <= 4096, "BLOCK * ITEMS: the tile of products is staged in shared memory");
static_assert(ROWS <= 2048, "BLOCK * RPT: the block's row offsets are staged in shared memory");

/* XS: the caller may have staged the block's window of x in shared memory
 * (csr16-xstage); where it did (staged, the same for the whole block) the
 * gathers read sx, elsewhere x through the read-only cache. One
 * instantiation serves both cases, so the shared arrays below exist once. */
template <typename C, bool XS = false>
__device__ __forceinline__ void stream_rows(int rows, const int *__restrict__ rowptr,
                                            const C *__restrict__ col, const T *__restrict__ val,
                                            const T *__restrict__ x, T *__restrict__ y, S alpha,
                                            S beta, const T *__restrict__ bias,
                                            const T *sx = nullptr, bool staged = false)
{
    __shared__ int s_ptr[ROWS + 1]; /* the block's row offsets */
    __shared__ S s_prod[CAP];       /* one tile of products val * x[col] */
    const int tid = threadIdx.x, lane = threadIdx.x % 32;
    const int r0 = blockIdx.x * ROWS;
    const int nr = rows - r0 < ROWS ? rows - r0 : ROWS;

#pragma unroll
    for (int j = 0; j <= RPT; j++) {
        const int i = j * BLOCK + tid;
        if (i <= nr)
            s_ptr[i] = rowptr[r0 + i];
    }
    __syncthreads();
    const int first = s_ptr[0], last = s_ptr[nr];

    /* Thread tid owns rows j * BLOCK + tid: consecutive threads, consecutive
     * rows, so the stores of y coalesce. */
    S acc[RPT];
    int lo[RPT], hi[RPT];
#pragma unroll
    for (int j = 0; j < RPT; j++) {
        const int i = j * BLOCK + tid;
        acc[j] = S(0);
        lo[j] = i < nr ? s_ptr[i] : 0;
        hi[j] = i < nr ? s_ptr[i + 1] : 0;
    }

    for (int t0 = first; t0 < last; t0 += CAP) {
        const int n = last - t0 < CAP ? last - t0 : CAP;
        C c[ITEMS];
        T v[ITEMS];
#pragma unroll
        for (int it = 0; it < ITEMS; it++) {
            const int k = it * BLOCK + tid;
            if (k < n) {
                c[it] = col[t0 + k];
                v[it] = val[t0 + k];
            }
        }
#pragma unroll
        for (int it = 0; it < ITEMS; it++) {
            const int k = it * BLOCK + tid;
            if (k < n)
                s_prod[k] = DT_LOAD(v[it]) *
                            DT_LOAD(XS && staged ? sx[c[it]] : __ldg(&x[c[it]]));
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < RPT; j++) {
            const int a = (lo[j] > t0 ? lo[j] : t0) - t0;
            const int b = (hi[j] < t0 + n ? hi[j] : t0 + n) - t0;
            /* A row of up to LONG products in the tile is its thread's to
             * sum; a longer one is summed by the whole warp, one such row
             * after another, so a row of a thousand entries costs its warp
             * a thousand / 32 steps, not a thousand. */
            const bool is_long = b - a > LONG;
            S s = S(0);
            if (!is_long)
                for (int k = a; k < b; k++)
                    s += s_prod[k];
            for (unsigned m = __ballot_sync(FULL, is_long); m; m &= m - 1) {
                const int src = __ffs(m) - 1;
                const int la = __shfl_sync(FULL, a, src), lb = __shfl_sync(FULL, b, src);
                S p = S(0);
                for (int k = la + lane; k < lb; k += 32)
                    p += s_prod[k];
#pragma unroll
                for (int off = 16; off > 0; off >>= 1)
                    p += __shfl_xor_sync(FULL, p, off);
                if (lane == src)
                    s = p;
            }
            acc[j] += s;
        }
        __syncthreads(); /* the tile is read by all before the next overwrites it */
    }

#pragma unroll
    for (int j = 0; j < RPT; j++) {
        const int i = j * BLOCK + tid;
        if (i < nr) {
            const int r = r0 + i;
            y[r] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc[j], beta, &y[r]), r, bias));
        }
    }
}
