/* warp_search.cuh -- a search by a whole warp over an ascending int array,
 * shared by csr-adaptive (spmv_csr_adaptive.cu), csr-split-spmm
 * (spmm_csr_split.cu) and csr-nnz-sddmm (sddmm_nnz.cu): each step probes
 * 32 places at once. Every lane of the warp must call it. */
#pragma once

/* Smallest i in [lo, hi) with key < a[i + 1], for a ascending and key < a[hi]: a 32-way
 * search by the whole warp, about log32(hi - lo) steps of one load each. */
__device__ __forceinline__ int warp_upper(const int *__restrict__ a, int lo, int hi, int key)
{
    const int lane = threadIdx.x & 31;
    while (lo < hi) {
        const int p = lo + (int)(((long long)(hi - lo) * lane) >> 5);
        const unsigned m = __ballot_sync(0xffffffffu, a[p + 1] > key);
        const int j = m ? __ffs(m) - 1 : 32;
        const int below = __shfl_sync(0xffffffffu, p, (j + 31) & 31); /* lane j - 1's probe */
        const int at = __shfl_sync(0xffffffffu, p, j & 31);
        const int nlo = j == 0 ? lo : below + 1;
        hi = j == 32 ? hi : at;
        lo = nlo;
    }
    return lo;
}
