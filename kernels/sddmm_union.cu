/* sddmm_union.cu -- SDDMM over the union of the columns of each group of R
 * rows (format "runion": R consecutive rows, or with SIM R rows that share
 * columns): a lane group takes one (group, column) entry, loads that row of
 * Bt once and dots it with the rows of A that have a nonzero there. */
/*@manifest
{"strategy": "row-union-sddmm", "op": "sddmm", "dtypes": ["fp32", "fp64", "fp16", "bf16"],
 "params": {"R": {"default": 4, "values": [2, 4, 8]},
            "SIM": {"default": 0, "values": [0, 1]},
            "WARPS": {"default": 4, "values": [1, 2, 4, 8]},
            "VEC": {"default": 8, "values": [2, 4, 8]},
            "LANES": {"default": 8, "values": [2, 4, 8, 16, 32]},
            "UNROLL": {"default": 2, "values": [1, 2, 4]}},
 "constraints": ["R <= LANES"],
 "preprocessing": "runion (one entry per distinct column of each group of R rows: the column, the
group and each row's CSR position there, 16 to 48 bytes; with SIM the groups are rows that share
columns and the entry also names them, 32 to 80 bytes)",
 "summary": "lane group per (group of R rows, column): Bt's row loaded once for every row of the
group that has the column, R dot products reduced together in log2(LANES) shuffles -- for FEM and
mesh matrices at original size, where neighbouring rows share most columns; SIM 1 groups the rows
that share the most columns wherever they are"}
@*/
/*@contract
{"entry": "sddmm_union", "op": "sddmm", "format": "runion",
 "format_params": {"r": "R", "sim": "SIM"},
 "params": ["nent", "un_ent", "A", "Bt", "out", "alpha", "beta"],
 "block": ["32 * WARPS"], "grid": ["max(cdiv(nent, WARPS * (32 / LANES) * UNROLL), 1)"],
 "defines": {"K": "k"}}
@*/
/* out[k] = alpha * dot(A[i, :], Bt[j, :]) + beta * out[k] for each nonzero
 * k = (i, j); out holds S's values on entry (read only when beta != 0).
 *
 * coo-sddmm reads a row of Bt for every nonzero. On FEM matrices at
 * original size that kernel is latency-bound in one partial wave, and a
 * nonzero costs it about 8 warp instructions and two L1 wavefronts
 * (bcsstk13, Nsight Compute). Neighbouring rows of a mesh
 * share most of their columns: groups of 4 rows of bcsstk13 have 2.3
 * nonzeros per distinct column, fidapex6's 2.9. Here the format lists,
 * for each group of R consecutive rows, its distinct columns, each with
 * the CSR position of every row's nonzero there (-1 for none). A group of
 * LANES lanes takes an entry as coo-sddmm takes a nonzero: the entry in
 * whole 16-byte loads, then Bt's row and the A rows that have the column
 * (the A rows of a warp's entries are mostly the same, so their loads
 * merge), R partial dot products, and one butterfly that reduces all R
 * together: at each of the first log2(R) steps a lane keeps half of its
 * sums and sends the other half (R - 1 shuffles), the remaining
 * log2(LANES / R) steps plain (4 shuffles at R = 4, LANES = 8, against 12
 * one sum at a time). The LANES / R lanes left holding a row's total
 * store it, the R rows in one store instruction. UNROLL entries a group,
 * a block-width apart, every load issued before the first product.
 *
 * Consecutive rows are not always the ones that share columns: the rows
 * of n1024-l1 (a Graph Challenge layer) repeat every 64, and a mesh's
 * node can straddle a group's edge. With SIM 1 the worker groups rows by
 * the columns they share (sp_row_groups_similar) and each entry names its
 * group's rows, so A's rows come from the entry rather than the group's
 * number: 1 to 3 more 16-byte loads an entry, no further dependent load. */
#include "ditto.cuh"

#if defined(DITTO_EPILOGUE_BIAS)
#error "sddmm has no bias epilogue (bias is per output row of SpMM/SpMV)"
#endif

#ifndef K
#define K 32
#endif
#ifndef R
#define R 4
#endif
#ifndef SIM
#define SIM 0
#endif
#ifndef WARPS
#define WARPS 4
#endif
#ifndef VEC
#define VEC 8
#endif
#ifndef LANES
#define LANES 8
#endif
#ifndef UNROLL
#define UNROLL 2
#endif

#include "lanes.cuh"

static_assert(LANES >= 2 && LANES <= 32 && (LANES & (LANES - 1)) == 0,
              "LANES: a power of two, 2 to 32");
static_assert(R == 2 || R == 4 || R == 8, "R: 2, 4 or 8 rows a group");
static_assert(R <= LANES, "R: at most LANES (a lane ends holding one row's sum)");
static_assert(UNROLL >= 1, "UNROLL: at least 1");
static_assert(SIM == 0 || SIM == 1, "SIM: 0 (consecutive rows) or 1 (rows that share columns)");

static constexpr int VW = vec_width(VEC, K, (int)sizeof(T));
static constexpr int NVK = K / VW;                   /* vectors a row of A / Bt */
static constexpr int CH = (NVK + LANES - 1) / LANES; /* vectors a lane */
static constexpr int G = 32 / LANES;                 /* groups a warp */
static constexpr int GB = WARPS * G;                 /* groups a block */
static constexpr int NQ = (2 + R * (1 + SIM) + 3) / 4; /* 16-byte loads an entry */
static constexpr int SPREAD = LANES / R;             /* lanes left holding a row's sum */
static constexpr int LOGL = LANES == 2 ? 1 : LANES == 4 ? 2 : LANES == 8 ? 3 : LANES == 16 ? 4 : 5;

struct __align__(VW * sizeof(T)) vec_t {
    T e[VW];
};

/* The row of slot i of an entry's group: named in the entry with SIM,
 * otherwise the group's i-th consecutive row. */
__device__ __forceinline__ int row_of(const int *en, int i)
{
    return SIM ? en[2 + R + i] : en[1] * R + i;
}

extern "C" __global__ void __launch_bounds__(32 * WARPS)
sddmm_union(int nent, const int4 *__restrict__ un_ent, const T *__restrict__ A,
            const T *__restrict__ Bt, T *__restrict__ out, S alpha, S beta)
{
    const int lane = threadIdx.x & 31;
    const int gl = lane % LANES;
    const int gi = (threadIdx.x >> 5) * G + lane / LANES; /* group in the block */
    const unsigned gmask = (0xffffffffu >> (32 - LANES)) << (lane / LANES * LANES);
    const long long e0 = (long long)blockIdx.x * GB * UNROLL + gi;

    int en[UNROLL][4 * NQ]; /* column, group, R positions, with SIM R rows, padding */
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        const long long e = e0 + (long long)u * GB;
        en[u][0] = -1;
        if (e < nent)
#pragma unroll
            for (int q = 0; q < NQ; q++) {
                const int4 x = __ldg(un_ent + e * NQ + q);
                en[u][4 * q] = x.x;
                en[u][4 * q + 1] = x.y;
                en[u][4 * q + 2] = x.z;
                en[u][4 * q + 3] = x.w;
            }
    }
    vec_t b[UNROLL][CH], a[UNROLL][R][CH];
#pragma unroll
    for (int u = 0; u < UNROLL; u++)
#pragma unroll
        for (int ch = 0; ch < CH; ch++) {
            const int v = ch * LANES + gl;
            if (en[u][0] >= 0 && v < NVK) {
                b[u][ch] = *reinterpret_cast<const vec_t *>(Bt + (size_t)en[u][0] * K + v * VW);
#pragma unroll
                for (int i = 0; i < R; i++)
                    if (en[u][2 + i] >= 0)
                        a[u][i][ch] = *reinterpret_cast<const vec_t *>(
                            A + (size_t)row_of(en[u], i) * K + v * VW);
            }
        }
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
        S d[R];
#pragma unroll
        for (int i = 0; i < R; i++) {
            d[i] = S(0);
#pragma unroll
            for (int ch = 0; ch < CH; ch++)
                if (en[u][0] >= 0 && en[u][2 + i] >= 0 && ch * LANES + gl < NVK)
#pragma unroll
                    for (int e = 0; e < VW; e++)
                        d[i] += DT_LOAD(a[u][i][ch].e[e]) * DT_LOAD(b[u][ch].e[e]);
        }
        /* The butterfly: at step s the lanes whose bit LANES >> (s + 1) is
         * set keep the upper half of their nv sums, the others the lower,
         * each adding the half its partner sent; once one sum is left,
         * plain xor steps. Lane gl ends with the total of row gl / SPREAD. */
#pragma unroll
        for (int s = 0; s < LOGL; s++) {
            const int off = LANES >> (s + 1);
            const int nv = R >> s;
            if (nv > 1) {
                const bool up = (gl & off) != 0;
#pragma unroll
                for (int j = 0; j < nv / 2; j++) {
                    const S send = up ? d[j] : d[j + nv / 2];
                    const S keep = up ? d[j + nv / 2] : d[j];
                    d[j] = keep + __shfl_xor_sync(gmask, send, off);
                }
            } else {
                d[0] += __shfl_xor_sync(gmask, d[0], off);
            }
        }
        /* Slot gl / SPREAD's position and row, selected without indexing
         * the registers by a lane's value. */
        const int i = gl / SPREAD;
        int pos = -1, row = 0;
#pragma unroll
        for (int j = 0; j < R; j++)
            if (j == i) {
                pos = en[u][2 + j];
                row = row_of(en[u], j);
            }
        if (en[u][0] >= 0 && gl % SPREAD == 0 && pos >= 0) {
            T *o = out + pos;
            *o = DT_STORE(dt_epilogue(dt_axpby(alpha, d[0], beta, o), row, nullptr));
        }
    }
}
