/* sparse.h -- sparse matrices: formats, the device layouts kernels read and
 * the dtype conversions, Matrix Market / .smtx I/O, generators, CPU fp64
 * references, pattern features (the PatternReport) and the problem spec
 * (the verification tolerance is sparse/tolerance.h, self-contained).
 *
 * Prefix: sp_. Depends on core only.
 *
 * Host matrices keep values in fp64 and row offsets in 64 bits whatever the
 * size: they are the source of truth from which device copies of any dtype
 * and index width are made. Column indices are 32-bit, so rows and cols are
 * limited to 2^31 - 1.
 *
 * Ownership: every sp_*_new / reader / generator / conversion returns a
 * matrix the caller frees with the matching sp_*_free (NULL is a no-op).
 * Functions that take a const matrix only borrow it. */
#ifndef DITTO_SPARSE_H
#define DITTO_SPARSE_H

#include <stdint.h>
#include <stdio.h>

#include "core/core.h"

/* ---- element types and operations ------------------------------------- */

typedef enum { SP_FP32, SP_FP64, SP_FP16, SP_BF16 } sp_dtype;
typedef enum { SP_SPMV, SP_SPMM, SP_SDDMM } sp_op;
typedef enum { SP_EPI_NONE, SP_EPI_RELU, SP_EPI_GELU, SP_EPI_BIAS } sp_epilogue;
typedef enum { SP_ROW_MAJOR, SP_COL_MAJOR } sp_layout;

const char *sp_dtype_name(sp_dtype t); /* "fp32" */
int sp_dtype_parse(const char *s, sp_dtype *out);
int sp_dtype_size(sp_dtype t);    /* bytes per element: 4, 8, 2, 2 */
const char *sp_op_name(sp_op op); /* "spmv" */
int sp_op_parse(const char *s, sp_op *out);
const char *sp_epilogue_name(sp_epilogue e);
int sp_epilogue_parse(const char *s, sp_epilogue *out);

/* ---- formats ------------------------------------------------------------ */

/* Compressed sparse row. Column indices within a row are sorted ascending and
 * unique (every constructor guarantees it; sp_csr_validate checks it). */
typedef struct sp_csr {
    int32_t rows, cols;
    int64_t nnz;
    int64_t *rowptr; /* rows + 1 offsets into col/val */
    int32_t *col;    /* nnz column indices */
    double *val;     /* nnz values (1.0 for pattern-only inputs) */
    int pattern;     /* 1 when the source carried no values */
} sp_csr;

/* Allocate an uninitialised CSR with room for nnz entries (rowptr zeroed).
 * Returns NULL and sets e when memory is short. */
sp_csr *sp_csr_new(int32_t rows, int32_t cols, int64_t nnz, dt_err *e);
/* The admission sp_csr_new applies, alone: 0 when a rows x cols matrix of
 * nnz entries (its arrays and as much again) fits in the memory available
 * now, else -1 with e saying so. For generators that would otherwise loop
 * over rows before they know their nnz. */
int sp_csr_admit(int32_t rows, int32_t cols, int64_t nnz, dt_err *e);
void sp_csr_free(sp_csr *a);
sp_csr *sp_csr_dup(const sp_csr *a, dt_err *e);
/* Check structural invariants: monotone rowptr, rowptr[rows] == nnz, columns
 * in range, sorted and unique within each row, finite values. */
int sp_csr_validate(const sp_csr *a, dt_err *e);
/* Bytes held by the CSR arrays as stored on the host. */
size_t sp_csr_bytes(const sp_csr *a);
/* Bytes of the same matrix on a device in dtype t with 32-bit (or, when nnz
 * needs it, 64-bit) row offsets. */
size_t sp_csr_device_bytes(const sp_csr *a, sp_dtype t);
/* A fingerprint of structure and values (for caches), as 16 hex digits. */
void sp_csr_fingerprint(const sp_csr *a, char out[17]);
/* Give a pattern-only matrix (loaded with a->pattern set) seeded random
 * values in +-[0.5, 1.5), the seed from its fingerprint, so every load of
 * the pattern gets the same: a kernel that ignored val would pass on the
 * all-ones values. */
void sp_csr_randomize_pattern_values(sp_csr *a);
/* The number of distinct nonzero values (told apart by their bits, so -0.0
 * counts), or cap + 1 as soon as there are more than cap (1..4096). */
int sp_csr_distinct_values(const sp_csr *a, int cap);
/* Transpose (CSR of A^T). */
sp_csr *sp_csr_transpose(const sp_csr *a, dt_err *e);

/* Coordinate list, the readers' intermediate form. */
typedef struct sp_coo {
    int32_t rows, cols;
    int64_t nnz, cap;
    int32_t *row, *col;
    double *val;
} sp_coo;

sp_coo *sp_coo_new(int32_t rows, int32_t cols, int64_t cap, dt_err *e);
void sp_coo_free(sp_coo *c);
/* Append one entry; grows the arrays. Returns -1 when memory is short. */
int sp_coo_push(sp_coo *c, int32_t r, int32_t col, double v, dt_err *e);
/* COO -> CSR: entries are sorted by (row, column); duplicates are SUMMED
 * (the Matrix Market convention for assembled matrices). Explicit zeros are
 * kept: they are part of the pattern. */
sp_csr *sp_coo_to_csr(const sp_coo *c, dt_err *e);

/* ELLPACK: every row padded to the longest row. Column-major storage
 * (entry k of row r at [k * rows + r]); padding has col = -1, val = 0. */
typedef struct sp_ell {
    int32_t rows, cols, width;
    int64_t nnz; /* real entries, excluding padding */
    int32_t *col;
    double *val;
} sp_ell;

/* Fails with a clear message when rows * width would exceed max_entries
 * (pass 0 for no limit). */
sp_ell *sp_csr_to_ell(const sp_csr *a, int64_t max_entries, dt_err *e);
void sp_ell_free(sp_ell *m);

/* SELL-C-sigma: rows sorted by length within windows of sigma rows, then cut
 * into slices of C rows, each padded to its longest row and stored
 * column-major within the slice. perm[i] is the original row held at sorted
 * position i (rows past `rows` in the last slice are padding). */
typedef struct sp_sell {
    int32_t rows, cols, C, sigma;
    int32_t nslices;
    int64_t nnz;        /* real entries */
    int64_t stored;     /* entries including padding */
    int64_t *slice_ptr; /* nslices + 1 offsets into col/val */
    int32_t *slice_len; /* width of each slice */
    int32_t *perm;      /* nslices * C entries; -1 for padding rows */
    int32_t *col;       /* padding: -1 */
    double *val;        /* padding: 0 */
} sp_sell;

sp_sell *sp_csr_to_sell(const sp_csr *a, int32_t C, int32_t sigma, dt_err *e);
void sp_sell_free(sp_sell *m);
/* SELL's row order alone: perm as sp_csr_to_sell gives it (ceil(rows / C) * C
 * entries, -1 past the last row; free it), or NULL with e set for a C or
 * sigma sp_csr_to_sell refuses, or out of memory. */
int32_t *sp_sell_perm(const sp_csr *a, int32_t C, int32_t sigma, dt_err *e);
/* The same with rows longer than long_row (when long_row > 0) left out:
 * ordered as empty rows, and -1 in perm where they would sit. */
int32_t *sp_sell_perm_cap(const sp_csr *a, int32_t C, int32_t sigma, int64_t long_row, dt_err *e);
/* The same over the rows taken in `order` (a permutation of the rows, the
 * order sigma's windows cut and sort; NULL: 0, 1, 2, ...): window w holds
 * order[w * sigma] .. order[w * sigma + sigma - 1], longest first, ties in
 * the order's order. */
int32_t *sp_sell_perm_ordered(const sp_csr *a, int32_t C, int32_t sigma, int64_t long_row,
                              const int32_t *order, dt_err *e);
/* A Cuthill-McKee order of the rows over the pattern of A + A^T: the
 * connected components in the order of their first rows (so the copies of a
 * block-diagonal matrix stay in order and apart), each breadth first from
 * its least connected row, a row's unvisited neighbours least connected
 * first (ties by row), so rows that share columns sit close together and a
 * block of consecutive rows gathers x from a narrower window. The identity
 * for a matrix that is not square.
 * rows entries (free it), or NULL with e set when out of memory. */
int32_t *sp_row_order_cm(const sp_csr *a, dt_err *e);

/* Groups of r rows that share columns, for kernels that load a column's
 * operand once for every row of a group that has it (row-union-sddmm): the
 * empty rows are left out, and each group grows from the first row not yet
 * taken by adding, r - 1 times, the row that brings the fewest columns the
 * group does not have yet (ties to the row sharing more, then to the
 * nearest; a row sharing none only when no row shares any). The counts
 * behind that choice read at most 128 column entries for each nonzero of
 * the group's first row, plus 1024 (enough for every count on the meshes
 * and FEM matrices it is for), so the work is O(r * nnz + rows). *ngroups groups of r entries each,
 * the group's rows ascending then -1 (only the last group can be short);
 * free it. NULL with e set for r outside 1..64 or out of memory. */
int32_t *sp_row_groups_similar(const sp_csr *a, int32_t r, int64_t *ngroups, dt_err *e);

/* Block sparse row with square b x b blocks, each stored row-major, zeros
 * filled in. rows and cols are padded up to multiples of b. */
typedef struct sp_bsr {
    int32_t rows, cols; /* of the original matrix */
    int32_t b;
    int32_t brows, bcols; /* block rows / columns: ceil(rows / b) ... */
    int64_t nblocks;
    int64_t nnz;      /* nonzeros of the original matrix */
    int64_t *browptr; /* brows + 1 */
    int32_t *bcol;    /* nblocks */
    double *val;      /* nblocks * b * b */
} sp_bsr;

sp_bsr *sp_csr_to_bsr(const sp_csr *a, int32_t b, dt_err *e);
void sp_bsr_free(sp_bsr *m);
/* Back to CSR, dropping the filled-in zeros (for tests). */
sp_csr *sp_bsr_to_csr(const sp_bsr *m, dt_err *e);

/* ---- device layouts (sparse/layout.c, sparse/dtype.c) -------------------
 *
 * A layout is a matrix converted on the host into the arrays one device
 * format reads, each named as the launch contracts name it (rowptr, col16,
 * sell_ptr, ...), plus the variables the contracts' formulas see (rows,
 * cols, nnz, max_row, value_bytes and the format's own: nslices, C, ...).
 * The worker uploads a built layout array by array; export writes it to
 * disk. Values are stored in the requested dtype, indices as 32-bit (16-bit
 * for the *16 formats). */

/* Host conversion of fp64 values to a dtype's storage (4, 8 or 2 bytes per
 * element, round to nearest even), and back. Large arrays are converted on
 * several threads with the same bits as one pass. */
void sp_to_dtype(const double *src, void *dst, size_t n, sp_dtype t);
void sp_from_dtype(const void *src, double *dst, size_t n, sp_dtype t);
/* Round an fp64 value through a dtype (what the device will see). */
double sp_round(double v, sp_dtype t);

/* e->code of sp_fmt_build when host memory ran out (any other failure: the
 * matrix or the parameters do not fit the format, code 1). */
#define SP_ENOMEM 3
#define SP_FMT_MAX_ARRS 12
#define SP_FMT_MAX_VARS 32
typedef struct sp_fmt {
    char key[128]; /* format + params + dtype: the cache key */
    int narr;
    char *name[SP_FMT_MAX_ARRS];  /* owned */
    void *data[SP_FMT_MAX_ARRS];  /* owned host array of bytes[i] bytes */
    size_t bytes[SP_FMT_MAX_ARRS];
    int nvars;
    const char *var_name[SP_FMT_MAX_VARS]; /* static strings */
    int64_t var_val[SP_FMT_MAX_VARS];
    double prep_us; /* host conversion time */
} sp_fmt;

/* Build format (csr, coo, ell, sell, sell16, bsr, bins, csr16, seg16,
 * dtile, runion) of a with the format parameters params (may be NULL; the
 * defaults and legal values are documented at each builder in layout.c)
 * and values in dtype t. On error -1 with e set (code SP_ENOMEM or 1) and
 * f left empty; sp_fmt_free(f) is then a no-op. */
int sp_fmt_build(const sp_csr *a, const char *format, const cJSON *params, sp_dtype t,
                 sp_fmt *f, dt_err *e);
/* Free f's arrays (f itself is the caller's; NULL is a no-op). */
void sp_fmt_free(sp_fmt *f);
/* Array name and its size in bytes; NULL when f has none. Borrowed. */
const void *sp_fmt_get(const sp_fmt *f, const char *name, size_t *bytes);
/* Variable name into *out: 0, or -1 when f has none. */
int sp_fmt_var(const sp_fmt *f, const char *name, int64_t *out);

/* ---- reading and writing ------------------------------------------------ */

typedef struct sp_read_opts {
    int allow_nonfinite; /* accept NaN/Inf values (rejected by default) */
    int quiet;           /* do not log warnings (complex -> real part) */
    int64_t max_bytes;   /* refuse a matrix whose host arrays would need more, judged
                            from the declared sizes before reading (0: no limit) */
    /* Called after each chunk read (about 1 MB) with the bytes read so far
     * (decompressed) and the file's size (-1 when unknown: a pipe, a .gz);
     * NULL: none. */
    void (*progress)(void *ud, int64_t done, int64_t total);
    void *progress_ud;
} sp_read_opts;

/* Matrix Market coordinate (real / integer / pattern / complex, the last
 * keeping the real part with a warning; general / symmetric / skew-symmetric
 * / hermitian, expanded to both triangles). The file is streamed in chunks.
 * On error returns NULL with e->msg "NAME:LINE: what is wrong". name is used
 * in messages (the path, normally). */
sp_csr *sp_mm_read(const char *path, const sp_read_opts *o, dt_err *e);
sp_csr *sp_mm_read_stream(FILE *f, const char *name, const sp_read_opts *o, dt_err *e);

/* Matrix Market array format (dense, column-major) into a rows x cols
 * column-major array of doubles the caller frees. */
double *sp_mm_read_dense(FILE *f, const char *name, int32_t *rows, int32_t *cols,
                         const sp_read_opts *o, dt_err *e);

/* DLMC .smtx: line 1 "rows, cols, nnz", line 2 the rows + 1 offsets, line 3
 * the column indices. Pattern only: values are 1.0. Rows are sorted on
 * reading if the file has them unsorted; duplicates are an error. */
sp_csr *sp_smtx_read(const char *path, const sp_read_opts *o, dt_err *e);
sp_csr *sp_smtx_read_stream(FILE *f, const char *name, const sp_read_opts *o, dt_err *e);

/* Write coordinate real general (or pattern when a->pattern), values with
 * 17 significant digits so they read back exactly. */
int sp_mm_write(const sp_csr *a, const char *path, dt_err *e);
int sp_mm_write_stream(const sp_csr *a, FILE *f, dt_err *e);
/* Dense array format, column-major input. */
int sp_mm_write_dense(FILE *f, const double *a, int32_t rows, int32_t cols, dt_err *e);

/* ---- matrix sources ----------------------------------------------------- */

/* Load a matrix from a source string:
 *   PATH.mtx | PATH.smtx            a file (relative paths are tried against
 *                                   the working directory, then each folder
 *                                   of $DITTO_MATRIX_PATH, colon-separated)
 *   gen:KIND:key=value,...          a generator (below)
 *   rep:SOURCE:nnz=N[,k=K]          SOURCE (a path or gen:… in parentheses not
 *                                   needed: everything up to the last ':')
 *                                   tiled block-diagonally until nnz >= N
 * Generator kinds and keys (sizes take K/M/G suffixes; seed defaults to 1,
 * cols to rows):
 *   stencil5  rows            2D 5-point Laplacian on a sqrt(rows)^2 grid
 *   stencil7  rows            3D 7-point on a cbrt(rows)^3 grid
 *   stencil27 rows            3D 27-point on a cbrt(rows)^3 grid
 *   banded    rows, nnz | bw  band of half-width bw around the diagonal
 *   uniform   rows, nnz       Erdos-Renyi: columns uniform, row lengths binomial
 *   rmat      rows, nnz, a, b, c (defaults 0.57, 0.19, 0.19): power-law rows
 *   block     rows, nnz, b    dense b x b blocks at random block positions
 *   dl        rows, cols, nnz near-equal row lengths, uniform random columns
 *                             (like magnitude-pruned DL weights)
 *   arrow     rows, cols, nnz, hubs (1), hublen (cols): rows and columns
 *             0..hubs-1 are hubs: hub rows hold hublen columns, hub
 *             columns are in every row; the rest spread evenly (nnz exact)
 *   powerlaw  rows, cols, nnz, exp (1): the row of rank k gets about
 *             c (k + 1)^-exp entries (at least 1), ranks shuffled over the
 *             rows (nnz exact)
 *   blockdiag rows, b (16): dense diagonal blocks of sizes drawn from
 *             [ceil(b/2), b] (nnz about 0.6 b rows, square)
 *   bandout   rows, cols, bw, outliers: a full band plus that many distinct
 *             entries outside it (nnz exact)
 * Every kind also takes empty=F: round(F rows) rows chosen by the seed are
 * emptied after the kind has built the matrix, so nnz is about (1 - F) of
 * the kind's. Wide and tall shapes come from cols != rows (every kind but
 * the stencils and blockdiag).
 * Generated values are uniform in [-1, 1) excluding |v| < 1/64, seeded. */
sp_csr *sp_load(const char *source, const sp_read_opts *o, dt_err *e);
/* Resolve a relative matrix path as sp_load would; caller frees. NULL when
 * no candidate exists (e says which were tried). */
char *sp_resolve_path(const char *path, dt_err *e);

/* Matrix inputs (sparse/input.c). PATH "-" is standard input; a file or
 * stream that starts with the gzip magic is decompressed as it is read
 * (zlib), so NAME.mtx.gz and NAME.smtx.gz read like NAME.mtx and NAME.smtx.
 * sp_input_open returns a stream positioned at the start of the (plain)
 * data, with its first bytes (up to SP_INPUT_HEAD) copied into head for
 * format detection; close it with fclose. On error NULL with e->msg
 * "PATH: what is wrong". */
#define SP_INPUT_HEAD 16
/* e->code of sp_load, sp_resolve_path and sp_input_open when the file does
 * not exist (anything else: another nonzero code). */
#define SP_ENOTFOUND 2
FILE *sp_input_open(const char *path, char head[SP_INPUT_HEAD], size_t *head_len, dt_err *e);
/* The name messages use for PATH: "(stdin)" for "-". Borrowed. */
const char *sp_input_name(const char *path);
/* True when the input is a DLMC .smtx file: not a Matrix Market header, and
 * named .smtx or .smtx.gz (or, on standard input, starting "ROWS,"). */
int sp_input_is_smtx(const char *path, const char *head, size_t head_len);

/* Generator spec parsed from "gen:KIND:..." (exposed for tests and --help). */
sp_csr *sp_generate(const char *spec, dt_err *e);
/* Tile a block-diagonally k times. */
sp_csr *sp_replicate(const sp_csr *a, int32_t k, dt_err *e);

/* ---- CPU fp64 references (threaded) ------------------------------------- */

/* Every output is computed by one thread, in the same order of operations
 * whatever the thread count, so results are bit-identical across counts.
 * The default count is $DITTO_REF_THREADS when that is a positive integer
 * (at most 64), else the online CPUs up to 32, and never more than one
 * thread per 2^20 multiply-adds of the problem.
 * sp_ref_set_threads(n > 0) forces n threads (at most 64) whatever the size
 * of the problem -- for tests; 0 restores the default. These can't fail. */
void sp_ref_set_threads(int n);
/* The threads a reference of `work` multiply-adds would start now (nonzeros
 * plus rows, times n for SpMM; nonzeros times K for SDDMM). */
int sp_ref_threads(int64_t work);

/* ---- parallel for (the references' threads, for any host loop) ---------- */

#define SP_PAR_MAX 64 /* parts at most: size per-part partials with it */

/* Called with the index range [lo, hi) of part `part`. */
typedef void (*sp_range_fn)(void *ctx, int64_t lo, int64_t hi, int part);

/* Run fn over [0, n) split into sp_ref_threads(work) parts (never more than
 * n), work being the loop's cost in the references' unit, about one
 * multiply-add per unit. Part p gets [n p / parts, n (p + 1) / parts): the
 * ranges are contiguous and ascend with p, so per-part partials merged in
 * part order give exactly what one serial pass gives (the first bad index,
 * counts, maxima). The calling thread runs the last part; a thread that
 * cannot start runs its part inline. Returns the parts used (0 when n <= 0),
 * after every part has finished. fn must write only its own range's data
 * and its part's partials. This can't fail. */
int sp_parallel_for(int64_t n, int64_t work, sp_range_fn fn, void *ctx);

/* y = alpha * A x + beta * y. */
void sp_ref_spmv(const sp_csr *a, const double *x, double alpha, double beta, double *y);
/* C = alpha * A B + beta * C. B is cols x n, C is rows x n, both in the given
 * layout (row-major: element (i, j) at [i * n + j]; column-major: at
 * [j * ld + i] with ld = number of rows of that matrix). */
void sp_ref_spmm(const sp_csr *a, const double *b, int32_t n, sp_layout layout, double alpha,
                 double beta, double *c);
/* SDDMM over the pattern of S: for each stored entry k = (i, j),
 *   out[k] = alpha * dot(A[i, :], B[j, :]) + beta * S.val[k]
 * with A rows x K and B cols x K, both row-major. This matches cuSPARSE's
 * C = alpha (A B^T) o spy(C) + beta C with B given transposed. */
void sp_ref_sddmm(const sp_csr *s, const double *a, const double *b, int32_t k, double alpha,
                  double beta, double *out);
/* The same, also writing into mag (one per output) the product with every
 * term made positive -- sum |a_k x_k| for SpMV, likewise for SpMM and
 * SDDMM, alpha and beta left out -- from the same pass: the scale of each
 * output's rounding error, which the verifier's tolerance needs. */
void sp_ref_spmv_mag(const sp_csr *a, const double *x, double alpha, double beta, double *y,
                     double *mag);
void sp_ref_spmm_mag(const sp_csr *a, const double *b, int32_t n, sp_layout layout, double alpha,
                     double beta, double *c, double *mag);
void sp_ref_sddmm_mag(const sp_csr *s, const double *a, const double *b, int32_t k, double alpha,
                      double beta, double *out, double *mag);

/* ---- pattern features: the PatternReport -------------------------------- */

#define SP_HIST_BUCKETS 33 /* log2 buckets of row length: 0, 1, 2-3, 4-7, ... */
#define SP_NBLOCK       4  /* block sizes 2, 4, 8, 16 */

typedef enum {
    SP_CLASS_DIAGONAL,     /* every nonzero on the main diagonal */
    SP_CLASS_BANDED,       /* bandwidth small relative to rows, few diagonals */
    SP_CLASS_BLOCK,        /* block fill at some b >= 0.6 */
    SP_CLASS_POWER_LAW,    /* heavy tail: max row >> mean and gini high */
    SP_CLASS_SKEWED,       /* cv of row length > 1 without a power-law tail */
    SP_CLASS_UNIFORM_LONG, /* regular rows, mean >= 32 */
    SP_CLASS_UNIFORM_SHORT /* regular rows, mean < 32 */
} sp_class;

const char *sp_class_name(sp_class c); /* "power-law" */

#define SP_DISTINCT_CAP 4096 /* the report counts distinct values up to this many */

typedef struct sp_report {
    /* sizes */
    int32_t rows, cols;
    int64_t nnz;
    double density;     /* nnz / (rows * cols) */
    int32_t empty_rows; /* rows with no entry */
    /* row-length distribution */
    double row_mean; /* nnz / rows */
    double row_std;  /* population standard deviation */
    double row_cv;   /* std / mean (0 when mean is 0) */
    int32_t row_min, row_max;
    double row_gini;                   /* Gini coefficient of row lengths, 0 = all equal */
    int64_t row_hist[SP_HIST_BUCKETS]; /* bucket 0: empty; b >= 1: [2^(b-1), 2^b) */
    /* shape */
    int32_t bandwidth;    /* max |i - j| over nonzeros */
    int32_t col_span_max; /* max over rows of last column - first column */
    int64_t diagonals;    /* distinct (j - i) values */
    double diag_fraction; /* fraction of nonzeros on the main diagonal */
    /* block structure, b = 2, 4, 8, 16 */
    int64_t blocks[SP_NBLOCK];    /* non-empty aligned b x b blocks */
    double block_fill[SP_NBLOCK]; /* nnz / (blocks * b * b) */
    /* locality of x gathers in SpMV */
    double x_lines_per_row; /* distinct 128-byte lines of x (fp32) per row, mean */
    double x_lines_per_nnz; /* the same divided by row length: 1/32 is ideal */
    /* values: distinct nonzero ones, SP_DISTINCT_CAP + 1 meaning more (and
     * for a pattern-only matrix, whose values the worker makes random) */
    int32_t distinct_values;
    int pattern; /* no values stored */
    /* cost model: minimum bytes moved and flops (each input read once, each
     * output written once), per dtype index [SP_FP32 .. SP_BF16] */
    int32_t n_spmm;  /* N used for SpMM numbers */
    int32_t k_sddmm; /* K used for SDDMM numbers */
    double spmv_flops, spmm_flops, sddmm_flops;
    double spmv_bytes[4], spmm_bytes[4], sddmm_bytes[4];
    double spmv_ai[4], spmm_ai[4], sddmm_ai[4]; /* flops / bytes */
    /* classification */
    sp_class cls;
    char cls_reason[256]; /* the numbers that decided the class */
    double seconds;       /* time spent computing this report */
} sp_report;

/* Minimum flops and bytes of one op on a rows x cols matrix with nnz
 * entries in dtype t (n: SpMM columns or SDDMM K): every input read once,
 * every output written once, beta = 0, 32-bit column indices, 32-bit row
 * offsets unless nnz needs 64. */
void sp_cost(int32_t rows, int32_t cols, int64_t nnz, sp_op op, sp_dtype t, int32_t n,
             double *flops, double *bytes);

/* Compute every feature. n and k set the SpMM / SDDMM cost columns (0 -> 32).
 * Threads as for the references. Extra memory is O(rows + cols). */
int sp_report_compute(const sp_csr *a, int32_t n, int32_t k, sp_report *r, dt_err *e);
/* The same, calling progress(ud, rows done, rows) every 65536 rows of its
 * main pass (progress may be NULL). */
int sp_report_compute_progress(const sp_csr *a, int32_t n, int32_t k, sp_report *r, dt_err *e,
                               void (*progress)(void *ud, int64_t done, int64_t total), void *ud);
/* JSON (every field) and a human-readable multi-line text. */
cJSON *sp_report_json(const sp_report *r);
void sp_report_text(const sp_report *r, dt_buf *out);

/* ---- the problem spec ---------------------------------------------------- */

/* SDDMM's K is a compile-time constant of the kernels (unrolled loops):
 * bounded to what compiles in seconds. */
#define SP_SDDMM_MAX_K 1024
/* A spec file is a few hundred bytes of JSON; larger is refused unread. */
#define SP_SPEC_MAX_BYTES ((size_t)1 << 20)

typedef struct sp_spec {
    sp_op op;
    char *matrix; /* path or generator spec, as written */
    sp_dtype dtype;
    int32_t n; /* SpMM columns of B / SDDMM inner dimension K */
    double alpha, beta;
    sp_epilogue epilogue;
    char *gpu;         /* hardware name or "auto" */
    char *backend;     /* "expert" | "llm" */
    char *review;      /* "ask" | "auto" (or a per-step map, kept as JSON) */
    cJSON *review_map; /* per-step policy when review is an object, else NULL */
} sp_spec;

/* Defaults: spmv, fp32, n 32, alpha 1, beta 0, none, auto, expert, ask. */
void sp_spec_init(sp_spec *s);
void sp_spec_clear(sp_spec *s);
/* Validate and fill from JSON. Every problem is reported, one per line, each
 * starting with its JSON path ("$.dtype: expected one of fp32, fp64, fp16,
 * bf16, got \"fp8\""). name prefixes the lines (a file name). Returns -1 if
 * any problem was found; s then holds defaults for the bad fields. */
int sp_spec_from_json(sp_spec *s, const cJSON *j, const char *name, dt_buf *problems);
int sp_spec_load(sp_spec *s, const char *path, dt_buf *problems);
cJSON *sp_spec_json(const sp_spec *s);

#endif /* DITTO_SPARSE_H */
