/* spmv_rowdot.cuh -- the sub-warp row walk shared by csr-vector
 * (spmv_csr_vector.cu, 32-bit columns) and csr16-vector (spmv_csr16.cu,
 * 16-bit offsets with x moved to the row's base): LANES threads walk one
 * row, each lane VEC consecutive entries per step, from the row start
 * rounded down to a multiple of VEC so every vector load is aligned; the
 * entries outside [start, end) belong to the neighbouring rows and are
 * masked.
 *
 * A lane loads UNROLL steps of indices and values before its first gather
 * of x, and issues those gathers together: at HBM sizes the walk is
 * latency-bound (a load of col and val, then the gathers that depend on it,
 * per step), and batching cuts the dependent round trips of a row of
 * L entries from 2 * L / (LANES * VEC) to 2 * L / (LANES * VEC * UNROLL).
 * The including kernel defines LANES, VEC and UNROLL. */
#pragma once

static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
              "LANES: a power of two up to 32");
static_assert(VEC >= 1 && VEC <= 8 && (VEC & (VEC - 1)) == 0, "VEC: 1, 2, 4 or 8");
static_assert(UNROLL >= 1 && UNROLL <= 8, "UNROLL: 1 to 8 steps in flight per lane");

/* N consecutive elements loaded as one aligned access (split by the
 * compiler into 16-byte loads when wider). */
template <typename E, int N> struct __align__(sizeof(E) * N) vec_t {
    E v[N];
};

/* The partial dot product of one lane over the row [start, end) of an
 * array of nnz entries; the caller sums the LANES partials. */
template <typename C>
__device__ __forceinline__ S row_dot(int start, int end, int nnz, int lane,
                                     const C *__restrict__ col, const T *__restrict__ val,
                                     const T *__restrict__ xb)
{
    S acc = S(0);
    for (int k0 = (start & ~(VEC - 1)) + lane * VEC; k0 < end; k0 += LANES * VEC * UNROLL) {
        vec_t<C, VEC> c[UNROLL];
        vec_t<T, VEC> v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int k = k0 + u * LANES * VEC;
            if (k < end) {
                if (k + VEC <= nnz) {
                    c[u] = *reinterpret_cast<const vec_t<C, VEC> *>(col + k);
                    v[u] = *reinterpret_cast<const vec_t<T, VEC> *>(val + k);
                } else {
                    /* The arrays' last, partial vector: no load past nnz
                     * (end <= nnz, so the entries below end exist). */
#pragma unroll
                    for (int j = 0; j < VEC; j++)
                        if (k + j < end) {
                            c[u].v[j] = col[k + j];
                            v[u].v[j] = val[k + j];
                        }
                }
            }
        }
        /* Only entries loaded above pass this mask. */
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            const int k = k0 + u * LANES * VEC;
#pragma unroll
            for (int j = 0; j < VEC; j++)
                if (k + j >= start && k + j < end)
                    acc += DT_LOAD(v[u].v[j]) * DT_LOAD(__ldg(&xb[c[u].v[j]]));
        }
    }
    return acc;
}
