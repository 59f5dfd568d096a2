/* lanes.cuh -- how the SpMM and SDDMM templates lay a dense row over lanes:
 * the vector width (elements per 16-byte-or-narrower load) and the lanes of
 * a group. Compile-time only; shared by spmm_csr_warp, spmm_csr_smem,
 * spmm_csr_tiled, spmm_csr_split, sddmm_warp and (through sddmm_deal.cuh)
 * sddmm_rowgroup and sddmm_nnz. */
#pragma once

/* Largest width <= vec (elements) that fits 16 bytes and divides n. */
__host__ __device__ static constexpr int vec_width(int vec, int n, int tsize)
{
    int v = vec * tsize > 16 ? 16 / tsize : vec;
    while (v > 1 && n % v != 0)
        v /= 2;
    return v < 1 ? 1 : v;
}

/* Smallest power of two >= want, capped at cap (a power of two <= 32). */
__host__ __device__ static constexpr int group_lanes(int want, int cap)
{
    int l = 1;
    while (l < want && l < cap)
        l *= 2;
    return l;
}
