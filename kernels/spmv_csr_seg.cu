/* spmv_csr_seg.cu -- SpMV over CSR, a warp per chunk of CHUNK nonzeros
 * (format "csrpart"): the warp takes the rows that start in its chunk and
 * streams their nonzeros 32 at a time, one to a lane, with a segmented
 * warp reduction by row. No shared memory and no barrier. */
/*@manifest
{"strategy": "csr-seg", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"WARPS": {"default": 8, "values": [2, 4, 8, 16]},
            "CHUNK": {"default": 256, "values": [64, 128, 256, 512, 1024]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]}},
 "constraints": [],
 "preprocessing": "csrpart: CSR plus part, the first row starting in each CHUNK-nonzero chunk
(cdiv(nnz, CHUNK) + 1 offsets)", "summary": "warp per CHUNK nonzeros (the rows starting there): one
nonzero a lane, coalesced, rows found by a 5-step shuffle search over the window's row ends and
summed by a segmented warp scan; no shared memory, few registers, many warps in flight"}
@*/
/*@contract
{"entry": "spmv_csr_seg", "op": "spmv", "format": "csrpart",
 "format_params": {"chunk": "CHUNK"},
 "params": ["nparts", "part", "rowptr", "col", "val", "x", "y", "alpha", "beta", "bias"],
 "block": ["32 * WARPS"], "grid": ["cdiv(nparts, WARPS)"]}
@*/
/* y = alpha * A x + beta * y, then the epilogue.
 *
 * Why: at HBM size on short scattered rows (ca-GrQc replicated) Nsight
 * Compute put cuSPARSE's CSR_ALG1 kernel at 96 % occupancy with 32
 * registers and 2.0 eligible warps a scheduler, against csr-stream's 61 %,
 * 48 registers and 0.57: csr-stream's shared-memory tile of ITEMS loads a
 * thread holds fewer warps in flight, and a register cap only spills
 * (hw.hopper.hbm-spmv-short-rows). This kernel keeps every lane streaming
 * with a few loads and nothing staged.
 *
 * Mapping: part[w] is the first row starting at or after nonzero w *
 * CHUNK (the worker's partition, built once), so warp w owns rows
 * [part[w], part[w + 1]) and every row has exactly one owner, which sums
 * all of it (a row that runs past the chunk's end is finished by its
 * owner: no partial sums cross warps, so beta and the epilogue apply once).
 * The warp takes its rows 32 at a time (a window: lane j loads row j's
 * start and end, one coalesced load each) and their nonzeros 32 at a time
 * (a step: lane l loads nonzero k0 + l's column and value, then gathers
 * x), UNROLL steps' loads issued before the first product is summed.
 * Lane l finds its nonzero's row within the window by a binary search
 * over the 32 row ends held across the lanes (five shuffles); rows are
 * non-decreasing across lanes, so a segmented inclusive scan (five more)
 * leaves each row's sum in the last lane of its segment. A row that
 * continues into the next step hands its partial sum on in a warp-uniform
 * carry. Empty rows are written by their window lane. */
#include "ditto.cuh"

#ifndef WARPS
#define WARPS 8
#endif
#ifndef CHUNK
#define CHUNK 256
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#define FULL 0xffffffffu

static_assert(UNROLL >= 1, "UNROLL: at least 1");

extern "C" __global__ void __launch_bounds__(32 * WARPS)
    spmv_csr_seg(int nparts, const int *__restrict__ part, const int *__restrict__ rowptr,
                 const int *__restrict__ col, const T *__restrict__ val, const T *__restrict__ x,
                 T *__restrict__ y, S alpha, S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x & 31;
    const int w = (int)blockIdx.x * WARPS + (int)(threadIdx.x >> 5);
    if (w >= nparts)
        return; /* the whole warp */
    const int rs = __ldg(part + w), re = __ldg(part + w + 1);

    for (int wb = rs; wb < re; wb += 32) {
        const int row = wb + lane;
        const bool has = row < re;
        const int s = has ? __ldg(rowptr + row) : 0;
        const int e = has ? __ldg(rowptr + row + 1) : 0x7fffffff; /* ends sort ascending */
        const int nrows = re - wb < 32 ? re - wb : 32;
        const int kbeg = __shfl_sync(FULL, s, 0);
        const int kend = __shfl_sync(FULL, e, nrows - 1); /* the window's last row ends here */
        if (has && s == e)
            y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, S(0), beta, &y[row]), row, bias));

        S carry = S(0);
        int carry_o = -1; /* the window row whose sum continues into the next step */
        for (int k0 = kbeg; k0 < kend; k0 += 32 * UNROLL) {
            int c[UNROLL];
            T v[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int k = k0 + u * 32 + lane;
                if (k < kend) {
                    c[u] = __ldg(col + k);
                    v[u] = val[k];
                }
            }
            S p[UNROLL];
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int k = k0 + u * 32 + lane;
                p[u] = k < kend ? DT_LOAD(v[u]) * DT_LOAD(x[c[u]]) : S(0);
            }
#pragma unroll
            for (int u = 0; u < UNROLL; u++) {
                const int kb = k0 + u * 32;
                if (kb >= kend)
                    break; /* the whole warp */
                const int k = kb + lane;
                const bool valid = k < kend;
                /* o: how many of the window's rows end at or before k,
                 * i.e. k's row within the window; lanes past kend get 32,
                 * which keeps o non-decreasing across the warp. */
                int o = 0;
#pragma unroll
                for (int b = 16; b >= 1; b >>= 1) {
                    const int ej = __shfl_sync(FULL, e, o + b - 1);
                    if (ej <= k)
                        o += b;
                }
                if (!valid)
                    o = 32;
                const int oprev = __shfl_up_sync(FULL, o, 1);
                const unsigned heads = __ballot_sync(FULL, lane == 0 || oprev != o);
                /* my segment's first lane: the highest head at or below me */
                const int head = 31 - __clz((int)(heads & (FULL >> (31 - lane))));
                S q = p[u];
#pragma unroll
                for (int d = 1; d < 32; d <<= 1) {
                    const S t = __shfl_up_sync(FULL, q, d);
                    if (lane - d >= head)
                        q += t;
                }
                if (o == carry_o)
                    q += carry; /* the first segment continues the last step's row */
                const int eo = __shfl_sync(FULL, e, o & 31);
                const bool tail = lane == 31 || ((heads >> (lane + 1)) & 1u);
                if (valid && tail && k + 1 == eo) {
                    const int r = wb + o;
                    y[r] = DT_STORE(dt_epilogue(dt_axpby(alpha, q, beta, &y[r]), r, bias));
                }
                /* Lane 31's row goes on when the step is full and the row
                 * has not ended: its sum is the next step's carry. */
                const S q31 = __shfl_sync(FULL, q, 31);
                const int o31 = __shfl_sync(FULL, o, 31);
                const int e31 = __shfl_sync(FULL, eo, 31);
                const bool goes_on = kb + 32 < e31 && o31 < 32;
                carry = goes_on ? q31 : S(0);
                carry_o = goes_on ? o31 : -1;
            }
        }
    }
}
