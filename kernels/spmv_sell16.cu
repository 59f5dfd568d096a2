/* spmv_sell16.cu -- SpMV over SELL-C-sigma with 16-bit column offsets
 * (format "sell16"): the coalesced column-major slices of spmv_sell.cu, but
 * each index is a 2-byte offset from its slice's base column, so an fp32
 * entry costs 6 bytes instead of 8. SpMV is bandwidth-bound: on regular
 * short rows whose slices span fewer than 65535 columns (meshes, stencils,
 * banded and block-diagonal matrices) this is the shortest path. */
/*@manifest
{"strategy": "sell16-thread", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [64, 128, 256, 512]},
            "UNROLL": {"default": 4, "values": [1, 2, 4, 8]}},
 "constraints": ["BLOCK % 32 == 0"],
 "preprocessing": "sell16 (SELL-C-sigma slices, 16-bit column offsets from a per-slice base)",
 "summary": "one thread per row of a column-major SELL slice with 16-bit column offsets"}
@*/
/*@contract
{"entry": "spmv_sell16", "op": "spmv", "format": "sell16", "format_params": {"C": 32, "sigma": 1},
 "params": ["nslices", "sell_ptr", "sell_len", "sell_perm", "col16", "slice_base", "sell_val",
            "x", "y", "alpha", "beta", "bias"],
 "block": ["BLOCK"], "grid": ["cdiv(nslices * C, BLOCK)"],
 "defines": {"SELL_C": "C"}}
@*/
#include "ditto.cuh"

#ifndef SELL_C
#define SELL_C 32
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 4
#endif

static_assert(SELL_C >= 1 && SELL_C <= 1024, "SELL_C: the format's slice height");
static_assert(UNROLL >= 1, "UNROLL: at least 1");

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_sell16(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
            const int *__restrict__ sell_perm, const unsigned short *__restrict__ col16,
            const int *__restrict__ slice_base, const T *__restrict__ sell_val,
            const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
            const T *__restrict__ bias)
{
    const long long g = (long long)blockIdx.x * BLOCK + threadIdx.x;
    const int slice = (int)(g / SELL_C);
    const int j = (int)(g % SELL_C);
    if (slice >= nslices)
        return;
    const int row = sell_perm[(long long)slice * SELL_C + j];
    if (row < 0)
        return; /* padding row of the last slice */
    const int start = sell_ptr[slice];
    const unsigned short *__restrict__ c = col16 + start + j;
    const T *__restrict__ v = sell_val + start + j;
    /* x relative to the slice's base column: offsets index it directly. */
    const T *__restrict__ xb = x + slice_base[slice];
    const int len = sell_len[slice];
    S acc = S(0);
    bool done = false;
    for (int k = 0; k < len && !done; k += UNROLL) {
        unsigned cc[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            cc[u] = k + u < len ? (unsigned)c[(long long)(k + u) * SELL_C] : 0xFFFFu;
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            /* A row's entries come first in its column of the slice, its
             * padding (offset 0xFFFF) after them. */
            if (cc[u] != 0xFFFFu)
                acc += DT_LOAD(v[(long long)(k + u) * SELL_C]) * DT_LOAD(__ldg(&xb[cc[u]]));
            else
                done = true;
        }
    }
    y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}
