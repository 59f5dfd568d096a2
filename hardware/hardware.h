/* hardware.h -- GPU specs (one JSON file per part), the occupancy calculator
 * and the roofline model with its character-grid and SVG renderings.
 *
 * Prefix: hw_. Depends on core only.
 *
 * Spec files live in the shipped folder (dt_share_path("hardware")) and, for
 * calibrated copies, in $XDG_DATA_HOME/ditto/hardware/; a user copy with the
 * same name takes precedence over the shipped file. Every file passes a schema
 * check before it is used; problems read "FILE: KEY: what is wrong".
 *
 * Ownership: hw_load* and hw_match return a spec the caller frees with
 * hw_spec_free (NULL is a no-op); hw_list returns an array freed with
 * hw_list_free. Everything else borrows. The occupancy calculator, the
 * roofline model and the renderers are pure functions of their arguments.
 *
 * Errors: functions that can fail return 0 (or a pointer) on success and -1
 * (or NULL) on failure with a one-line message in the caller's dt_err. */
#ifndef DITTO_HARDWARE_H
#define DITTO_HARDWARE_H

#include <limits.h>
#include <stddef.h>

#include "core/core.h"

/* ---- data types with a peak rate ---------------------------------------- */

/* fp64 and fp32 are the CUDA-core (non-tensor) rates; the others are dense
 * tensor-core rates (no 2:4 sparsity). */
typedef enum { HW_FP64, HW_FP32, HW_TF32, HW_FP16, HW_BF16, HW_FP8, HW_INT8, HW_NDTYPES } hw_dtype;

const char *hw_dtype_name(hw_dtype t); /* "fp32" */
/* Accepts the names above; returns -1 on anything else. */
int hw_dtype_parse(const char *s, hw_dtype *out);

/* ---- specs -------------------------------------------------------------- */

#define HW_MAX_NAMES     16
#define HW_ENOTFOUND     2 /* e->code of hw_load when no GPU has that name */
#define HW_MAX_CARVEOUTS 16

/* A loaded, checked spec. Read-only for callers: the numbers mirror the
 * file, sizes in bytes, rates in the file's units. */
typedef struct hw_spec {
    char name[32];      /* short id, e.g. "h200"; also the file's base name */
    char full_name[96]; /* "NVIDIA H200" */
    char arch[32];      /* "Hopper" */
    char *path;         /* file it was loaded from */
    int user_copy;      /* 1 when loaded from the user's data folder */
    int cc_major, cc_minor;
    int sm_count;
    double boost_clock_mhz;
    char mem_type[16];
    double mem_size_gb;
    double mem_bandwidth_gbs; /* datasheet */
    long long l2_bytes;
    /* shared memory */
    int smem_per_sm;                   /* largest carveout, bytes */
    int smem_per_block;                /* default per-block limit (48 KB) */
    int smem_per_block_optin;          /* per-block limit after cudaFuncSetAttribute opt-in */
    int smem_reserved;                 /* reserved by the driver per block */
    int smem_granularity;              /* allocation unit per block */
    int carveout_kb[HW_MAX_CARVEOUTS]; /* supported per-SM shared sizes, ascending */
    int ncarveouts;
    /* registers */
    int regs_per_sm, regs_per_block, regs_per_thread;
    int reg_alloc_unit; /* registers per warp are rounded up to this */
    int sub_partitions; /* registers are split evenly between them */
    /* limits */
    int warp_size, max_warps_per_sm, max_threads_per_sm, max_blocks_per_sm, max_threads_per_block;
    /* peaks, TFLOP/s (TOP/s for int8); 0 when the part has no such unit */
    double peak_tflops[HW_NDTYPES];
    /* calibration; 0 when not measured */
    double measured_bandwidth_gbs;
    double measured_tflops[HW_NDTYPES];
    char measured_date[40];
    char aliases[HW_MAX_NAMES][48];
    int naliases;
    char device_names[HW_MAX_NAMES][64]; /* fnmatch patterns, case-insensitive */
    int ndevice_names;
    cJSON *doc; /* the whole file as loaded (with any measured values set since); owned */
} hw_spec;

/* The shipped folder (dt_share_path("hardware")) and the user's folder
 * ($XDG_DATA_HOME/ditto/hardware, which may not exist yet). Caller frees;
 * NULL when unknown. */
char *hw_shipped_dir(void);
char *hw_user_dir(void);

/* Check a parsed spec file. Appends one line per problem to report (which
 * may be NULL), "FILE: $.KEY: expected ..., got ...", and returns the
 * number of problems: every problem is reported, not only the first. */
int hw_check_json(const cJSON *doc, const char *file, dt_buf *report);
/* Read, parse and check a file; a read or syntax error counts as one
 * problem. Returns the number of problems. */
int hw_check_file(const char *path, dt_buf *report);

/* Load one file. On any problem returns NULL with the problems, joined by
 * "; ", in e. */
hw_spec *hw_load_file(const char *path, dt_err *e);
/* Load by name or alias (case-insensitive), the user's copy first. An unknown
 * name gives a message that lists the known names. */
hw_spec *hw_load(const char *name, dt_err *e);
void hw_spec_free(hw_spec *g);

/* Every known spec, the user's copies replacing shipped files of the same
 * name, sorted by name. Files that fail the check are skipped; their
 * problems are appended to problems (may be NULL). Returns -1 only when the
 * shipped folder cannot be found or read. */
int hw_list(hw_spec ***out, int *n, dt_buf *problems, dt_err *e);
void hw_list_free(hw_spec **specs, int n);
/* "a100-40gb-sxm, a100-80gb-sxm, ..." for messages; caller frees. */
char *hw_known_names(void);

/* `gpu: auto`: map a detected device to a spec. Tried in order: a
 * device_names pattern that matches device_name with the same compute
 * capability; a spec of the same compute capability (the nearest SM count
 * when sm_count > 0); the nearest compute capability. Any result but the
 * first writes a warning sentence into warning (when non-NULL) and sets
 * *how (when non-NULL). Returns NULL only when no spec can be loaded. */
typedef enum { HW_MATCH_NAME, HW_MATCH_CC, HW_MATCH_NEAREST } hw_match_kind;
hw_spec *hw_match(const char *device_name, int cc_major, int cc_minor, int sm_count,
                  hw_match_kind *how, char *warning, size_t warning_len, dt_err *e);

/* Record calibration results in g (fields and doc). bandwidth_gbs <= 0 and
 * tflops[i] <= 0 (or tflops NULL) leave a value unchanged; method may be
 * NULL. The date is set to now. Fails on a non-finite value. */
int hw_set_measured(hw_spec *g, double bandwidth_gbs, const double tflops[HW_NDTYPES],
                    const char *method, dt_err *e);
/* Write g's document to $XDG_DATA_HOME/ditto/hardware/NAME.json atomically;
 * later loads prefer it. *path_out (when non-NULL) receives the path, which
 * the caller frees. */
int hw_save_user_copy(const hw_spec *g, char **path_out, dt_err *e);

/* The rates the roofline uses: measured when calibrated and allowed, else
 * the datasheet. Bytes/s and FLOP/s. *measured (may be NULL) says which. */
double hw_bandwidth(const hw_spec *g, int use_measured, int *measured);
double hw_peak_flops(const hw_spec *g, hw_dtype t, int use_measured, int *measured);

/* ---- occupancy ---------------------------------------------------------- */

/* Theoretical occupancy by the rules of cuda_occupancy.h (CUDA 13.0) for
 * compute capability 7.0 and later; see occupancy.c for each rule. */

#define HW_UNLIMITED        INT_MAX /* a resource that limits nothing */
#define HW_CARVEOUT_DEFAULT (-1)    /* no preference: the driver uses max shared memory */
#define HW_OCC_MAX_NOTES    12

typedef enum {
    HW_LIM_WARPS = 1,  /* warp slots per SM */
    HW_LIM_BLOCKS = 2, /* resident blocks per SM */
    HW_LIM_REGS = 4,   /* register file */
    HW_LIM_SMEM = 8    /* shared memory */
} hw_limiter;

const char *hw_limiter_name(hw_limiter l); /* "warps", "blocks", "registers", "shared memory" */

typedef struct hw_occ {
    /* the inputs, echoed */
    int threads, regs;
    size_t static_smem, dyn_smem;
    int carveout; /* percent, or HW_CARVEOUT_DEFAULT */
    int optin;
    /* the answer */
    int blocks;         /* active blocks per SM */
    int warps;          /* active warps per SM */
    int max_warps;      /* the SM's warp slots */
    double pct;         /* 100 * warps / max_warps */
    unsigned limiters;  /* HW_LIM_* of every resource at the minimum */
    hw_limiter limiter; /* the first of them in the order warps, blocks, registers, smem */
    /* blocks per SM each resource allows on its own (HW_UNLIMITED: none) */
    int lim_warps, lim_blocks, lim_regs, lim_smem;
    /* allocation */
    int warps_per_block;
    int regs_per_thread_alloc; /* regs_per_warp / warp size */
    int regs_per_warp;         /* regs x 32 rounded up to the allocation unit */
    int regs_per_block;        /* regs_per_warp x warps per block */
    int smem_per_block;        /* static + dynamic + reserved, rounded to the granularity */
    int smem_block_limit;      /* per-block limit applied (reserved included on cc 8.0+) */
    int smem_pref;             /* per-SM shared memory the carveout preference asks for */
    int smem_config;           /* per-SM shared memory the driver would configure */
    int needs_optin;           /* static + dynamic is above the default per-block limit */
    /* what it takes to fit one more block (0 when not applicable) */
    int regs_for_next; /* at most this many registers per thread */
    int smem_for_next; /* at most this many bytes of static + dynamic per block */
    int nnotes;
    char notes[HW_OCC_MAX_NOTES][320];
} hw_occ;

/* Occupancy of a kernel with `threads` threads per block, `regs` registers
 * per thread, static and dynamic shared memory per block in bytes, a carveout
 * preference (0..100 percent of the SM's shared memory, or
 * HW_CARVEOUT_DEFAULT) and whether the kernel opted in to more than the
 * default per-block shared memory (cudaFuncAttributeMaxDynamicSharedMemorySize
 * set at least to dyn_smem). Mirrors cudaOccMaxActiveBlocksPerMultiprocessor,
 * so it can be checked against cuOccupancyMaxActiveBlocksPerMultiprocessor.
 * A configuration that cannot launch gives 0 blocks and a note, not an error;
 * errors are for impossible inputs (threads outside 1..65536, regs outside
 * 0..1024, carveout outside -1..100, sizes above 512 MB) and for a spec older
 * than cc 7.0. */
int hw_occupancy(const hw_spec *g, int threads, int regs, size_t static_smem, size_t dyn_smem,
                 int carveout, int optin, hw_occ *out, dt_err *e);

/* What-ifs, as Nsight Compute draws them: occupancy while one input varies
 * and the others stay as in base. */
typedef enum {
    HW_AXIS_REGS,    /* registers per thread, 0 .. per-thread maximum, step 1 */
    HW_AXIS_THREADS, /* threads per block, warp size .. block maximum, step warp size */
    HW_AXIS_SMEM     /* static + dynamic bytes per block, 0 .. per-block maximum, step 512 */
} hw_occ_axis;

typedef struct hw_occ_pt {
    int x;
    int blocks, warps;
    double pct;
    unsigned limiters;
} hw_occ_pt;

typedef struct hw_occ_curve {
    hw_occ_axis axis;
    int n;
    hw_occ_pt *pts; /* owned */
    int current;    /* index of the last point with x <= base's value */
} hw_occ_curve;

const char *hw_occ_axis_name(hw_occ_axis a); /* "registers", "threads", "shared_memory" */
int hw_occ_curve_make(const hw_spec *g, const hw_occ *base, hw_occ_axis axis, hw_occ_curve *out,
                      dt_err *e);
void hw_occ_curve_free(hw_occ_curve *c);

/* JSON views (never fail; caller frees with cJSON_Delete). */
cJSON *hw_occ_json(const hw_spec *g, const hw_occ *o);
cJSON *hw_occ_curve_json(const hw_occ_curve *c);

/* ---- roofline ----------------------------------------------------------- */

#define HW_RL_MAX_CEILINGS (HW_NDTYPES + 1)

typedef struct hw_ceiling {
    char label[64]; /* "HBM3e 4.80 TB/s", "fp32 67.0 TFLOP/s" */
    int is_memory;  /* 1: bytes/s slope; 0: flat FLOP/s roof */
    hw_dtype dtype; /* compute ceilings */
    double value;   /* bytes/s or FLOP/s */
    double ridge;   /* compute ceilings: FLOP/byte where the memory roof meets it */
    int measured;   /* from calibration rather than the datasheet */
} hw_ceiling;

typedef struct hw_roofline {
    char gpu[32];
    char gpu_full[96];
    hw_dtype dtype; /* the primary compute ceiling */
    double bw;      /* bytes/s */
    double peak;    /* FLOP/s of the primary dtype */
    double ridge;   /* peak / bw, FLOP/byte */
    int nceil;      /* ceil[0] is memory, ceil[1] the primary compute roof */
    hw_ceiling ceil[HW_RL_MAX_CEILINGS];
} hw_roofline;

/* Build the model for dtype plus the extra compute ceilings in extra_mask
 * (bits 1 << hw_dtype; unsupported ones are skipped). use_measured picks the
 * calibrated rates when present. Fails when the part has no unit for dtype. */
int hw_roofline_init(hw_roofline *r, const hw_spec *g, hw_dtype dtype, unsigned extra_mask,
                     int use_measured, dt_err *e);
/* Attainable FLOP/s at an arithmetic intensity: min(peak, ai * bw). */
double hw_roofline_attainable(const hw_roofline *r, double ai);

/* A kernel to place. seconds <= 0: not measured (placed at its attainable
 * performance as a prediction); dram_bytes <= 0: unknown. */
typedef struct hw_rl_point {
    char label[48];
    double flops;     /* useful floating-point operations */
    double min_bytes; /* the least DRAM traffic the work needs */
    double seconds;
    double dram_bytes; /* measured DRAM traffic */
} hw_rl_point;

typedef struct hw_rl_place {
    double ai_alg;    /* flops / min_bytes */
    double ai_ach;    /* flops / dram_bytes; 0 when unknown */
    double ai;        /* the one the point is placed at: achieved if known */
    double flops_s;   /* achieved FLOP/s; the attainable rate when predicted */
    double bytes_s;   /* achieved DRAM bytes/s (dram_bytes, else min_bytes); 0 when predicted */
    double roof;      /* attainable at ai */
    double pct_roof;  /* 100 * flops_s / roof */
    double pct_bw;    /* 100 * bytes_s / bw */
    int memory_bound; /* ai below the ridge */
    int predicted;    /* no time given */
    int below_floor;  /* seconds < min_bytes / bw: faster than physics, the measurement is wrong */
} hw_rl_place;

int hw_roofline_place(const hw_roofline *r, const hw_rl_point *p, hw_rl_place *out, dt_err *e);

/* Plot ranges (FLOP/byte across, FLOP/s up), whole decades. */
typedef struct hw_rl_view {
    double x_lo, x_hi, y_lo, y_hi;
} hw_rl_view;

/* Decades around the ceilings: three below the ridge to one above, and from
 * the memory roof at the left edge up to the highest ceiling. */
void hw_rl_view_default(const hw_roofline *r, hw_rl_view *v);
/* Widen v by whole decades so that every placed point is inside. */
void hw_rl_view_fit(hw_rl_view *v, const hw_rl_place *pl, int n);

/* Fractional dot coordinates of (ai, flop/s) on a plot of dots_w x dots_h
 * dots: x grows right from 0 to dots_w - 1, y grows down from 0 (top) to
 * dots_h - 1. Returns 0 inside the view, -1 outside (coordinates are still
 * written). Log scale on both axes. */
int hw_rl_map(const hw_rl_view *v, int dots_w, int dots_h, double ai, double flops, double *dx,
              double *dy);

#define HW_PLOT_MAX_POINTS 35 /* markers 1-9 then a-z */

typedef struct hw_plot_info {
    int plot_col, plot_row, plot_w, plot_h; /* the plot area inside the figure, cells */
    int knee_col, knee_row;                 /* the primary ridge, figure cells */
    int npoints;
    int point_col[HW_PLOT_MAX_POINTS], point_row[HW_PLOT_MAX_POINTS]; /* -1 when clipped */
    int clipped[HW_PLOT_MAX_POINTS];
    int nclipped;
    char marker[HW_PLOT_MAX_POINTS]; /* the character drawn for each point */
} hw_plot_info;

/* Draw the roofline into exactly `height` lines of exactly `width` cells,
 * each ending in '\n', appended to out: y labels and axis on the left, the
 * x axis and its labels in the last two rows, the unit in the first. With
 * utf8 the plot uses Unicode braille (2 x 4 dots per cell) and box-drawing
 * axes; without, ASCII only. Ceilings are lines labelled where room allows;
 * points are markers 1-9, a-z (labels beside them where room allows); points
 * outside v are not drawn and are counted in info. At least 30 x 8 cells and
 * at most HW_PLOT_MAX_POINTS points. */
int hw_roofline_render(const hw_roofline *r, const hw_rl_view *v, const hw_rl_point *pts, int n,
                       int width, int height, int utf8, dt_buf *out, hw_plot_info *info, dt_err *e);

/* The same figure as a standalone SVG document of width x height pixels:
 * axes with decade ticks and labels, one <polyline class="ceiling"> per
 * ceiling, one <circle class="point"> per point inside the view with its
 * label. */
int hw_roofline_svg(const hw_roofline *r, const hw_rl_view *v, const hw_rl_point *pts, int n,
                    int width, int height, dt_buf *out, dt_err *e);

/* JSON view of the model and the placed points (never fails). */
cJSON *hw_roofline_json(const hw_roofline *r, const hw_rl_point *pts, int n);

/* "4.80 T", "912 G", "1.5 P": a rate with an SI prefix, 3 significant
 * digits, into out. */
const char *hw_fmt_si(double v, char *out, size_t outlen);

#endif /* DITTO_HARDWARE_H */
