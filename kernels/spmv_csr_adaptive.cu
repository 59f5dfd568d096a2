/* spmv_csr_adaptive.cu -- SpMV over CSR with rows binned by length (format
 * "bins"), each bin mapped its own way, all in one launch: bin b < 6 gives
 * each row a sub-warp of 2^b lanes (a thread for the shortest rows, a warp
 * for rows up to long_row), bin 6 splits its very long rows over blocks by
 * nonzeros, CHUNK each, whose partial sums the last block to finish adds
 * up. The blocks come bin after bin; each finds its bin from blockIdx and
 * the bin offsets. For skewed and power-law row lengths, where one mapping
 * wastes lanes on short rows or leaves one thread a whole long row. */
/*@manifest
{"strategy": "csr-adaptive", "op": "spmv", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"BLOCK": {"default": 256, "values": [128, 256, 512, 1024]},
            "CHUNK": {"default": 4096, "values": [1024, 2048, 4096, 8192, 16384]}},
 "constraints": ["BLOCK % 32 == 0", "CHUNK >= BLOCK"],
 "format_params": {"per_lane": {"default": 4, "values": [1, 2, 4, 8]},
                   "long_row": {"default": 4096, "values": [1024, 2048, 4096, 8192, 16384]}},
 "preprocessing": "bins (rows grouped by length, a nonzero count over the longest)",
 "summary": "rows binned by length: 1 to 32 lanes per row, very long rows split over blocks"}
@*/
/*@contract
{"entry": "spmv_csr_adaptive", "op": "spmv", "format": "bins",
 "format_params": {"per_lane": 4, "long_row": 4096},
 "params": ["rowptr", "col", "val", "bin_rows", "bin_ptr", "bin_long_ptr", "x", "y", "alpha",
            "beta", "bias", "scratch"],
 "block": ["BLOCK"],
 "grid": ["cdiv(bin0, BLOCK) + cdiv(bin1 * 2, BLOCK) + cdiv(bin2 * 4, BLOCK) + cdiv(bin3 * 8, BLOCK) + cdiv(bin4 * 16, BLOCK) + cdiv(bin5 * 32, BLOCK) + cdiv(long_nnz, CHUNK)"],
 "scratch_bytes": "bin6 * 4 + 16 + cdiv(long_nnz, CHUNK) * 16", "scratch_init": "once"}
@*/
#include "ditto.cuh"

#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef CHUNK
#define CHUNK 4096
#endif

#define NBINS 7 /* the format's bins: 1, 2, 4, 8, 16, 32 lanes, long */
#define WARPS (BLOCK / 32)
#define FULL 0xffffffffu

static_assert(BLOCK % 32 == 0, "BLOCK: whole warps (the shuffles name all 32 lanes)");

/* Rows of a short bin: L lanes per row, BLOCK / L rows per block. */
template <int L>
__device__ __forceinline__ void short_rows(int blk, const int *__restrict__ rows_of_bin, int count,
                                           const int *__restrict__ rowptr,
                                           const int *__restrict__ col, const T *__restrict__ val,
                                           const T *__restrict__ x, T *__restrict__ y, S alpha,
                                           S beta, const T *__restrict__ bias)
{
    const int lane = threadIdx.x % L;
    const int idx = blk * (BLOCK / L) + threadIdx.x / L;
    int row = -1, start = 0, end = 0;
    if (idx < count) {
        row = rows_of_bin[idx];
        start = rowptr[row];
        end = rowptr[row + 1];
    }
    S acc = S(0);
#pragma unroll 4
    for (int k = start + lane; k < end; k += L)
        acc += DT_LOAD(val[k]) * DT_LOAD(__ldg(&x[col[k]]));
#pragma unroll
    for (int off = L / 2; off > 0; off >>= 1)
        acc += __shfl_down_sync(FULL, acc, off, L);
    if (lane == 0 && row >= 0)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}

/* The block's sum of v, returned to every thread; deterministic (a fixed
 * tree), and s_red is free again when it returns. */
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

#include "warp_search.cuh"

/* Bin 6: the rows longer than long_row, laid end to end (bin_long_ptr is
 * their running nonzero count, total long_nnz), cut into nblk equal pieces,
 * one per block. A row inside one piece is written at once; a row cut
 * across pieces leaves a partial sum per block in scratch (head[j] when it
 * began before block j's piece, tail[j] when it begins inside it and goes
 * on), and the block that raises the row's counter last adds them up in
 * block order, so the result does not depend on which block ends last,
 * and sets the counter back to zero for the next launch (the worker zeroes
 * scratch once, when it allocates it: "scratch_init": "once"). */
__device__ void long_rows(int j, int nblk, const int *__restrict__ rows_long, int nlong,
                          const int *__restrict__ lptr, const int *__restrict__ rowptr,
                          const int *__restrict__ col, const T *__restrict__ val,
                          const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
                          const T *__restrict__ bias, void *scratch)
{
    __shared__ S s_red[WARPS];
    __shared__ int s_last;
    const int total = lptr[nlong];
    const int piece = (int)(((long long)total + nblk - 1) / nblk);
    const int lo = (int)min((long long)j * piece, (long long)total);
    const int hi = (int)min((long long)lo + piece, (long long)total);
    if (lo >= hi)
        return; /* the rounding left this block nothing; no row counts it */
    unsigned *cnt = (unsigned *)scratch;
    S *head = (S *)((char *)scratch + (((size_t)nlong * 4 + 15) & ~(size_t)15));
    S *tail = head + nblk;
    for (int i = warp_upper(lptr, 0, nlong, lo); i < nlong && lptr[i] < hi; i++) {
        const int rlo = lptr[i], rhi = lptr[i + 1];
        const int s0 = max(lo, rlo), s1 = min(hi, rhi);
        const int row = rows_long[i];
        const int k0 = rowptr[row] + (s0 - rlo), k1 = k0 + (s1 - s0);
        S acc = S(0);
#pragma unroll 4
        for (int k = k0 + threadIdx.x; k < k1; k += BLOCK)
            acc += DT_LOAD(val[k]) * DT_LOAD(__ldg(&x[col[k]]));
        acc = block_sum(acc, s_red);
        if (s0 == rlo && s1 == rhi) {
            if (threadIdx.x == 0)
                y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
            continue;
        }
        const int b0 = rlo / piece, b1 = (rhi - 1) / piece; /* the blocks sharing the row */
        if (threadIdx.x == 0) {
            *(rlo < lo ? &head[j] : &tail[j]) = acc;
            __threadfence(); /* the partial is visible before the count says so */
            s_last = atomicAdd(&cnt[i], 1u) == (unsigned)(b1 - b0);
            if (s_last) {
                cnt[i] = 0u; /* every part counted: ready for the next launch */
                __threadfence();
            }
        }
        __syncthreads();
        if (s_last) { /* the same in every thread: a block-wide branch */
            S sum = S(0);
            for (int b = b0 + (int)threadIdx.x; b <= b1; b += BLOCK)
                sum += __ldcg(b == b0 ? &tail[b0] : &head[b]);
            sum = block_sum(sum, s_red);
            if (threadIdx.x == 0)
                y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, sum, beta, &y[row]), row, bias));
        } else {
            __syncthreads(); /* s_last is read by all before thread 0 sets it again */
        }
    }
}

extern "C" __global__ void __launch_bounds__(BLOCK)
spmv_csr_adaptive(const int *__restrict__ rowptr, const int *__restrict__ col,
                  const T *__restrict__ val, const int *__restrict__ bin_rows,
                  const int *__restrict__ bin_ptr, const int *__restrict__ bin_long_ptr,
                  const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
                  const T *__restrict__ bias, void *scratch)
{
    /* Blocks per bin, exactly as the contract's grid counts them; every
     * thread of a block takes the same branch. */
    int blk = blockIdx.x;
#define DT_BIN(b)                                                                                \
    {                                                                                            \
        const int first = bin_ptr[b], count = bin_ptr[b + 1] - first;                            \
        const int nb = (int)(((long long)count * (1 << b) + BLOCK - 1) / BLOCK);                 \
        if (blk < nb) {                                                                          \
            short_rows<1 << b>(blk, bin_rows + first, count, rowptr, col, val, x, y, alpha, beta, \
                               bias);                                                            \
            return;                                                                              \
        }                                                                                        \
        blk -= nb;                                                                               \
    }
    DT_BIN(0)
    DT_BIN(1)
    DT_BIN(2)
    DT_BIN(3)
    DT_BIN(4)
    DT_BIN(5)
#undef DT_BIN
    const int nshort = blockIdx.x - blk;
    const int first = bin_ptr[NBINS - 1];
    long_rows(blk, gridDim.x - nshort, bin_rows + first, bin_ptr[NBINS] - first, bin_long_ptr,
              rowptr, col, val, x, y, alpha, beta, bias, scratch);
}
