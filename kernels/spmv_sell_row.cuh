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
 * batch that ends in padding ends the row. The including kernel may
 * define SELL_C and UNROLL.
 *
 * sell_row_vec is the same walk over sell16's vec layout (spmv_sell16.cu
 * at VEC > 1): a row's entries come in chunks of V adjacent ones, chunk q
 * of the slice's row j at q * SELL_C * V + j * V, so a chunk is one aligned
 * vector load of V offsets and one of V values (the compiler splits a
 * value chunk wider than 16 bytes into 16-byte loads), and a warp's load
 * covers 32 * V contiguous elements. UNROLL counts chunks there: a batch
 * issues UNROLL offset and UNROLL value loads, then its UNROLL * V
 * gathers of x. */
#pragma once

/* The SELL kernels' defaults (each may define its own first). */
#ifndef SELL_C
#define SELL_C 32
#endif
#ifndef BLOCK
#define BLOCK 256
#endif
#ifndef UNROLL
#define UNROLL 8
#endif

static_assert(SELL_C >= 1 && SELL_C <= 1024, "SELL_C: the format's slice height");
static_assert(UNROLL >= 1, "UNROLL: at least 1 step (a chunk of VEC entries at VEC > 1) per batch");

/* A stored value as S. The including kernel may store values another way
 * (spmv_sell16_dict.cu: a one-byte index into a table) and overload these
 * two for its storage type; the walks below are templates over it. */
__device__ __forceinline__ S sell_value(T v)
{
    return DT_LOAD(v);
}
/* The value of a padding entry (never added at VEC 1; 0 * 0 at VEC > 1). */
__device__ __forceinline__ void sell_pad(T &v)
{
    v = DT_STORE(S(0));
}

template <typename C, typename R, R PAD, typename VS = T>
__device__ __forceinline__ S sell_row(const C *__restrict__ c, const VS *__restrict__ v,
                                      const T *__restrict__ xb, int len)
{
    S acc = S(0);
    bool done = false;
    for (int k = 0; k < len && !done; k += UNROLL) {
        R cc[UNROLL];
        VS vv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            cc[u] = PAD;
            sell_pad(vv[u]);
            if (k + u < len) {
                cc[u] = (R)c[(long long)(k + u) * SELL_C];
                vv[u] = v[(long long)(k + u) * SELL_C];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
            if (cc[u] != PAD)
                acc += sell_value(vv[u]) * DT_LOAD(__ldg(&xb[cc[u]]));
        done = cc[UNROLL - 1] == PAD;
    }
    return acc;
}

/* V elements of type E as one aligned access. */
template <typename E, int V> struct __align__(sizeof(E) * V) sell_vec {
    E v[V];
};

/* c and v point at the row's first chunk (the slice's start + j * V); len,
 * the slice's entries per row, is a multiple of V.
 *
 * No add is predicated: a chunk past len loads as padding, a padding
 * offset gathers 0 instead of x, and every product is added (0 * 0 for
 * padding). With sell_row's predicated gather-and-add per entry, ptxas
 * (CUDA 13.0, sm_90) put each chunk's value load behind the adds of the
 * chunk before: fp32 VEC 4 UNROLL 4 issued its four value loads in four
 * rounds, this form in two. On the H200 (32M-nonzero replicas, SIGMA 256)
 * the two forms timed within a few percent of each other, this one ahead
 * at VEC 2 UNROLL 4 and VEC 8 UNROLL 1, the fastest VEC > 1 variants. */
template <typename C, typename R, R PAD, int V, typename VS = T>
__device__ __forceinline__ S sell_row_vec(const C *__restrict__ c, const VS *__restrict__ v,
                                          const T *__restrict__ xb, int len)
{
    S acc = S(0);
    bool done = false;
    for (int k = 0; k < len && !done; k += UNROLL * V) {
        sell_vec<C, V> cc[UNROLL];
        sell_vec<VS, V> vv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            /* Chunk k / V + u starts (k + u * V) * SELL_C elements in. */
            const long long at = (long long)(k + u * V) * SELL_C;
            if (k + u * V < len) {
                cc[u] = *reinterpret_cast<const sell_vec<C, V> *>(c + at);
                vv[u] = *reinterpret_cast<const sell_vec<VS, V> *>(v + at);
            } else {
#pragma unroll
                for (int i = 0; i < V; i++) {
                    cc[u].v[i] = (C)PAD;
                    sell_pad(vv[u].v[i]);
                }
            }
        }
        T xv[UNROLL][V];
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int i = 0; i < V; i++) {
                const R o = (R)cc[u].v[i];
                xv[u][i] = o != PAD ? __ldg(&xb[o]) : DT_STORE(S(0));
            }
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int i = 0; i < V; i++)
                acc += sell_value(vv[u].v[i]) * DT_LOAD(xv[u][i]);
        done = (R)cc[UNROLL - 1].v[V - 1] == PAD;
    }
    return acc;
}

/* Slot g of the slices: the slot's place j in its slice, its row (-1 for
 * a padding slot at IDROWS >= 0), the slice's first entry, width and base
 * column (independent loads, in flight together). False, with row, start,
 * len and base left as they were, when the slot lies past the last slice. */
template <bool BASE, long long IDROWS>
__device__ __forceinline__ bool sell_slot(long long g, int nslices, const int *__restrict__ sell_ptr,
                                          const int *__restrict__ sell_len,
                                          const int *__restrict__ sell_perm,
                                          const int *__restrict__ slice_base, int &row, int &start,
                                          int &len, int &base, int &j)
{
    const int slice = (int)(g / SELL_C);
    j = (int)(g % SELL_C);
    if (slice >= nslices)
        return false;
    const long long slot = (long long)slice * SELL_C + j;
    if constexpr (IDROWS >= 0)
        row = slot < IDROWS ? (int)slot : -1;
    else
        row = sell_perm[slot];
    start = sell_ptr[slice];
    len = sell_len[slice];
    if constexpr (BASE)
        base = slice_base[slice];
    return true;
}

/* One thread per row of a column-major slice, the whole kernel body of
 * sell-thread (spmv_sell.cu: 32-bit columns, padding -1, no base) and of
 * sell16-thread and sell16-dict (16-bit offsets from slice_base[slice],
 * padding 0xFFFF, BASE; the including kernel defines VEC). A padding row of the
 * last slice (-1 in sell_perm) has only padding entries and stores nothing.
 * blk is the block's index among the slices' blocks (blockIdx.x, unless the
 * kernel gives its first blocks other work, as sell16-long does).
 *
 * IDROWS >= 0: the rows were not sorted (SIGMA 1), so sell_perm is the
 * identity over IDROWS rows and is not read: slot s of the slices holds
 * row s, and slots past IDROWS are padding. That saves a 4-byte load a
 * row, which on rows of a few entries is a tenth of the bytes or more.
 * Measured on the H200 (32M-nonzero replicas, L2 flushed before each run,
 * the same points with and without it, two rounds, `ditto check`):
 * sell16-dict on Franz6_id1959_aug fp32 77.1 -> 72.3 us, fp64 83.4 ->
 * 80.8 us; sell16-thread on Franz6 fp32 84.7 -> 81.2 us and on crack
 * 96.8 -> 94.0 us; n1024-l1 (rows of 32) about 1 %. */
template <typename C, typename R, R PAD, int V, typename VS, bool BASE, long long IDROWS = -1>
__device__ __forceinline__ void
sell_thread(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
            const int *__restrict__ sell_perm, const C *__restrict__ cols,
            const int *__restrict__ slice_base, const VS *__restrict__ vals,
            const T *__restrict__ x, T *__restrict__ y, S alpha, S beta, const T *__restrict__ bias,
            unsigned blk)
{
    const long long g = (long long)blk * BLOCK + threadIdx.x;
    const int slice = (int)(g / SELL_C);
    const int j = (int)(g % SELL_C);
    if (slice >= nslices)
        return;
    /* The thread's row, the slice's offset, width and base column:
     * independent loads, in flight together (the row is only needed for the
     * store). */
    const long long slot = (long long)slice * SELL_C + j;
    int row;
    if constexpr (IDROWS >= 0)
        row = slot < IDROWS ? (int)slot : -1;
    else
        row = sell_perm[slot];
    const int start = sell_ptr[slice];
    const int len = sell_len[slice];
    /* The row's first entry (its first chunk at V > 1). */
    const C *__restrict__ c = cols + start + j * V;
    const VS *__restrict__ v = vals + start + j * V;
    /* x relative to the slice's base column: offsets index it directly. */
    const T *__restrict__ xb = x;
    if constexpr (BASE)
        xb += slice_base[slice];
    S acc;
    if constexpr (V == 1)
        acc = sell_row<C, R, PAD, VS>(c, v, xb, len);
    else
        acc = sell_row_vec<C, R, PAD, V, VS>(c, v, xb, len);
    if (row >= 0)
        y[row] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[row]), row, bias));
}

/* sell_thread with NR slots a thread (sell16-dict's RPT), a block-width
 * apart (slot q of block blk is (blk * NR + q) * BLOCK + threadIdx.x),
 * whose slice loads, first batch of UNROLL chunks and gathers of x are
 * issued together, so a thread has NR rows' chains of dependent loads in
 * flight instead of one. Rows longer than the first batch finish one after
 * another (sell_row_vec).
 * The vec layout at every V (V 1 is chunks of one).
 *
 * Where rows are a few entries long the walk is a chain (slice, entries,
 * x, store) with a handful of bytes behind it, and a thread's one chain in
 * flight leaves DRAM idle. Measured on the H200 (`ditto check`,
 * 32M-nonzero replicas, fp32, L2 flushed, paired with cuSPARSE): sell16-dict
 * on Franz6_id1959_aug (rows of 4.6) 72.2 us at RPT 1 (1.34x SELL_ALG1),
 * 69.5 us at RPT 2, BLOCK 256 (1.39x); RPT 4 took 96 registers and 97.4 us.
 * On sell16-thread it lost everywhere it was tried (crack 90.6 against
 * 84.8 us, bcsstk13 77.4 against 67.3, ca-GrQc 128.4 against sell16-long's
 * 118.5): 55 registers against 32 cost more threads than the second
 * chain gives back when each entry is 6 bytes, so only sell16-dict takes
 * RPT. */
template <typename C, typename R, R PAD, int V, typename VS, bool BASE, long long IDROWS, int NR>
__device__ __forceinline__ void
sell_thread_rpt(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
                const int *__restrict__ sell_perm, const C *__restrict__ cols,
                const int *__restrict__ slice_base, const VS *__restrict__ vals,
                const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
                const T *__restrict__ bias, unsigned blk)
{
    int row[NR], start[NR], len[NR], base[NR], j[NR];
#pragma unroll
    for (int q = 0; q < NR; q++) {
        row[q] = -1;
        start[q] = len[q] = base[q] = 0;
        sell_slot<BASE, IDROWS>(((long long)blk * NR + q) * BLOCK + threadIdx.x, nslices, sell_ptr,
                                sell_len, sell_perm, slice_base, row[q], start[q], len[q], base[q],
                                j[q]);
    }
    constexpr int B = UNROLL * V; /* entries in the first batch */
    sell_vec<C, V> cc[NR][UNROLL];
    sell_vec<VS, V> vv[NR][UNROLL];
#pragma unroll
    for (int q = 0; q < NR; q++)
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
            /* Chunk u of the row: u * SELL_C * V elements past its first. */
            const long long at = (long long)start[q] + j[q] * V + (long long)u * V * SELL_C;
            if (u * V < len[q]) {
                cc[q][u] = *reinterpret_cast<const sell_vec<C, V> *>(cols + at);
                vv[q][u] = *reinterpret_cast<const sell_vec<VS, V> *>(vals + at);
            } else {
#pragma unroll
                for (int i = 0; i < V; i++) {
                    cc[q][u].v[i] = (C)PAD;
                    sell_pad(vv[q][u].v[i]);
                }
            }
        }
    T xv[NR][UNROLL][V];
#pragma unroll
    for (int q = 0; q < NR; q++)
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int i = 0; i < V; i++) {
                const R o = (R)cc[q][u].v[i];
                xv[q][u][i] = o != PAD ? __ldg(&x[base[q] + o]) : DT_STORE(S(0));
            }
    /* Every row's first batch is summed before any row's tail walk or
     * store: finishing row 0 (its tail, its store) before summing row 1
     * kept row 1's loaded batch live across row 0's tail loop and took
     * ptxas (CUDA 13.0, sm_90) from 32 to 40 registers at VEC 1 UNROLL 4
     * and from 48 to 56 at VEC 2 UNROLL 4 . */
    S acc[NR];
#pragma unroll
    for (int q = 0; q < NR; q++) {
        acc[q] = S(0);
#pragma unroll
        for (int u = 0; u < UNROLL; u++)
#pragma unroll
            for (int i = 0; i < V; i++)
                acc[q] += sell_value(vv[q][u].v[i]) * DT_LOAD(xv[q][u][i]);
    }
#pragma unroll
    for (int q = 0; q < NR; q++) {
        if (len[q] > B && (R)cc[q][UNROLL - 1].v[V - 1] != PAD) {
            const long long at = (long long)start[q] + j[q] * V + (long long)B * SELL_C;
            acc[q] +=
                sell_row_vec<C, R, PAD, V, VS>(cols + at, vals + at, x + base[q], len[q] - B);
        }
        if (row[q] >= 0)
            y[row[q]] =
                DT_STORE(dt_epilogue(dt_axpby(alpha, acc[q], beta, &y[row[q]]), row[q], bias));
    }
}

/* sell_thread with NS slots a thread (sell16-thread's SEQ) walked one after
 * another, a block-width apart (slot q of block blk is (blk * NS + q) *
 * BLOCK + threadIdx.x), with the next slot's loads (its row, the slice's
 * offset, width and base) issued before the current row's walk, so every
 * row after a thread's first finds them in registers: its chain is the
 * entries, x and the store, not the slice's loads first.
 *
 * Measured on the H200 (`ditto check`, 32M-nonzero replicas, L2 flushed, paired with cuSPARSE): crack
 * (rows of 5.9) fp32 at BLOCK 256, UNROLL 4, SIGMA 256, VEC 2, SEQ 4
 * 81.9 us (1.42x SELL_ALG1) against 84.8 us (1.37x) at SEQ 1, BLOCK 512,
 * in 40 registers against 32; SEQ 2 and 8 85.4-85.7 us; crack fp64 SEQ 4
 * 135.3 against 128.9 us; bcsstk13 (UNROLL 8, 48 registers) 79.2 against
 * 67.8 us; sell16-long on ca-GrQc 150.7 against 117.5 us. The block's
 * slice loads staged once in shared memory instead (same registers) were
 * slower on every case tried. */
template <typename C, typename R, R PAD, int V, typename VS, bool BASE, long long IDROWS, int NS>
__device__ __forceinline__ void
sell_thread_seq(int nslices, const int *__restrict__ sell_ptr, const int *__restrict__ sell_len,
                const int *__restrict__ sell_perm, const C *__restrict__ cols,
                const int *__restrict__ slice_base, const VS *__restrict__ vals,
                const T *__restrict__ x, T *__restrict__ y, S alpha, S beta,
                const T *__restrict__ bias, unsigned blk)
{
    const long long g0 = (long long)blk * NS * BLOCK + threadIdx.x;
    int row = -1, start = 0, len = 0, base = 0, j = 0;
    bool ok = false;
    /* ok once the slot's slice exists (later slots of the thread lie
     * further on). */
    auto fetch = [&](long long g) {
        ok = sell_slot<BASE, IDROWS>(g, nslices, sell_ptr, sell_len, sell_perm, slice_base, row,
                                     start, len, base, j);
    };
    fetch(g0);
#pragma unroll 1
    for (int q = 0; q < NS && ok; q++) {
        const int crow = row, cstart = start, clen = len, cbase = base, cj = j;
        if (q + 1 < NS)
            fetch(g0 + (long long)(q + 1) * BLOCK);
        const C *__restrict__ c = cols + cstart + cj * V;
        const VS *__restrict__ v = vals + cstart + cj * V;
        const T *__restrict__ xb = x;
        if constexpr (BASE)
            xb += cbase;
        S acc;
        if constexpr (V == 1)
            acc = sell_row<C, R, PAD, VS>(c, v, xb, clen);
        else
            acc = sell_row_vec<C, R, PAD, V, VS>(c, v, xb, clen);
        if (crow >= 0)
            y[crow] = DT_STORE(dt_epilogue(dt_axpby(alpha, acc, beta, &y[crow]), crow, bias));
    }
}
