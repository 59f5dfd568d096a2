/* spmv_seg16.cu -- SpMV as a segmented sum over a flat stream of entries
 * (format "seg16"). The matrix is cut into tiles of whole consecutive rows,
 * each padded to exactly TILE = BLOCK * U * 8 entries; an entry is a 15-bit
 * column offset from its tile's base with the top bit set on the last entry
 * of its row, and its value. A thread reads 8 consecutive entries with
 * 16-byte loads (no row pointers, no per-row slot), gathers x, and the
 * block finds each row's sum by a segmented scan of the threads' partial
 * sums: the thread holding a row's last entry stores it.
 *
 * Made for short, skewed rows at HBM size (power-law graphs, circuits):
 * sell16 pads and parks a warp on their longest rows, a row-per-lane kernel
 * waits on its longest lane, while here every thread does the same 8
 * entries whatever the rows' lengths, so the kernel runs at the rate of
 * the stream and its gathers. The builder refuses a row longer than a tile
 * and a tile whose columns span more than 32768. */
/*@manifest
{"strategy": "seg16", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [128, 256, 512]},
            "U": {"default": 1, "values": [1, 2, 4]}},
 "constraints": ["BLOCK % 32 == 0", "BLOCK * U <= 1024"],
 "preprocessing": "seg16 (tiles of whole rows padded to BLOCK * U * 8 entries; 15-bit column
offsets from a base per tile, the top bit marking each row's last entry)",
 "summary": "a flat stream of 8 entries a thread; rows summed by a block-wide segmented scan"}
@*/
/*@contract
{"entry": "spmv_seg16", "op": "spmv", "format": "seg16", "format_params": {"tile": "BLOCK * U * 8"},
 "params": ["ntiles", "tile_row", "tile_base", "seg_col", "seg_val", "x", "y",
            "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["ntiles"], "requires": {"max_row": "BLOCK * U * 8"}}
@*/
#include "ditto.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef U
#define U 1
#endif

#define SEG_E  8 /* entries a thread reads per round: 16 bytes of offsets */
#define SEG_NW (BLOCK / 32)
#define SEG_VQ (SEG_E * (int)sizeof(T) / 16) /* 16-byte loads of a round's values */

static_assert(BLOCK % 32 == 0, "BLOCK: whole warps");
static_assert(BLOCK * U <= 1024,
              "BLOCK * U: the tile's warp aggregates are staged in shared memory");

extern "C" __global__ void __launch_bounds__(BLOCK)
    spmv_seg16(int ntiles, const int *__restrict__ tile_row, const int *__restrict__ tile_base,
               const unsigned short *__restrict__ seg_col, const T *__restrict__ seg_val,
               const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
               const T *__restrict__ bias)
{
    /* Each warp's aggregate of each round: the sum since its last row end
     * and the number of row ends. */
    __shared__ S s_v[U][SEG_NW];
    __shared__ int s_n[U][SEG_NW];
    (void)ntiles;
    const int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5;
    const size_t k0 = (size_t)blockIdx.x * (BLOCK * U * SEG_E);
    const T *__restrict__ xb = x + tile_base[blockIdx.x];
    const int row0 = tile_row[blockIdx.x];

    /* Every load of the tile first: U rounds of 16 bytes of offsets and
     * 8 values a thread, consecutive threads on consecutive entries. */
    uint4 c[U];
    uint4 q[U][SEG_VQ];
#pragma unroll
    for (int u = 0; u < U; u++) {
        const size_t k = k0 + (size_t)(u * BLOCK + tid) * SEG_E;
        c[u] = __ldg(reinterpret_cast<const uint4 *>(seg_col + k));
#pragma unroll
        for (int i = 0; i < SEG_VQ; i++)
            q[u][i] = __ldg(reinterpret_cast<const uint4 *>(seg_val + k) + i);
    }

    S p[U][SEG_E];    /* products */
    unsigned ends[U]; /* bit j: entry j ends its row */
    S ev[U];          /* the sum carried into the thread's first entry */
    int en[U];        /* the row ends before it */
#pragma unroll
    for (int u = 0; u < U; u++) {
        T v[SEG_E];
        memcpy(v, q[u], sizeof v);
        const unsigned cw[4] = {c[u].x, c[u].y, c[u].z, c[u].w};
        ends[u] = 0;
        S tail = S(0);
#pragma unroll
        for (int j = 0; j < SEG_E; j++) {
            const unsigned o = (j & 1) ? cw[j >> 1] >> 16 : cw[j >> 1] & 0xffffu;
            p[u][j] = DT_LOAD(v[j]) * DT_LOAD(__ldg(xb + (o & 0x7fffu)));
            const bool end = (o & 0x8000u) != 0;
            ends[u] |= (unsigned)end << j;
            tail = end ? S(0) : tail + p[u][j];
        }
        /* The warp's inclusive segmented scan of (sum since the last row
         * end, row ends): a later range with a row end resets the sum. */
        S sv = tail;
        int sn = __popc(ends[u]);
#pragma unroll
        for (int off = 1; off < 32; off <<= 1) {
            const S ov = __shfl_up_sync(0xffffffffu, sv, off);
            const int on = __shfl_up_sync(0xffffffffu, sn, off);
            if (lane >= off) {
                if (sn == 0)
                    sv += ov;
                sn += on;
            }
        }
        if (lane == 31) {
            s_v[u][wid] = sv;
            s_n[u][wid] = sn;
        }
        ev[u] = __shfl_up_sync(0xffffffffu, sv, 1);
        en[u] = __shfl_up_sync(0xffffffffu, sn, 1);
        if (lane == 0) {
            ev[u] = S(0);
            en[u] = 0;
        }
    }
    __syncthreads();

    /* What the rounds and warps before this one carry in, in tile order
     * (round by round, warp by warp). */
    S pv = S(0);
    int pn = 0;
#pragma unroll
    for (int u = 0; u < U; u++) {
#pragma unroll
        for (int w = 0; w < SEG_NW; w++) {
            if (w == wid) {
                ev[u] = en[u] > 0 ? ev[u] : pv + ev[u];
                en[u] += pn;
            }
            const S wv = s_v[u][w];
            const int wn = s_n[u][w];
            pv = wn > 0 ? wv : pv + wv;
            pn += wn;
        }
    }

    /* The thread holding a row's last entry stores the row. */
#pragma unroll
    for (int u = 0; u < U; u++) {
        S s = ev[u];
        int r = row0 + en[u];
#pragma unroll
        for (int j = 0; j < SEG_E; j++) {
            s += p[u][j];
            if (ends[u] >> j & 1u) {
                y[r] = DT_STORE(dt_epilogue(dt_axpby(alpha, s, beta, &y[r]), r, bias));
                r++;
                s = S(0);
            }
        }
    }
}
