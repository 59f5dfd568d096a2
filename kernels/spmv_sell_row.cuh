/* spmv_sell_row.cuh -- one thread's walk down its row of a column-major
 * SELL slice, shared by sell-thread (spmv_sell.cu, 32-bit columns, padding
 * -1) and sell16-thread (spmv_sell16.cu, 16-bit offsets from the slice's
 * base, padding 0xFFFF). C is the stored column type, R the type it is
 * widened to in registers, PAD the padding's column. c and v point at the
 * row's first entry; its k-th entry is SELL_C elements further on.
 *
 * UNROLL steps at a time: every index and value load of the batch is issued
 * before the first gather of x, and the gathers together, so a batch costs
 * one round trip to memory and one to x, not one per step. A row's entries
 * come first in its column of the slice, padding (value 0) after them: a
 * batch that ends in padding ends the row. The including kernel defines
 * SELL_C and UNROLL. */
#pragma once

template <typename C, typename R, R PAD>
__device__ __forceinline__ S sell_row(const C *__restrict__ c, const T *__restrict__ v,
                                      const T *__restrict__ xb, int len)
{
    S acc = S(0);
    bool done = false;
    for (int k = 0; k < len && !done; k += UNROLL) {
        R cc[UNROLL];
        T vv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            cc[u] = PAD;
            vv[u] = DT_STORE(S(0));
            if (k + u < len) {
                cc[u] = (R)c[(long long)(k + u) * SELL_C];
                vv[u] = v[(long long)(k + u) * SELL_C];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (cc[u] != PAD)
                acc += DT_LOAD(vv[u]) * DT_LOAD(__ldg(&xb[cc[u]]));
        done = cc[UNROLL - 1] == PAD;
    }
    return acc;
}
