/* runner.h -- what the runner's files share: runner.c (requests, operands
 * and their tolerances, instances of a kernel on a matrix, poison, one run),
 * verify.c (the battery), measure.c (timing next to cuSPARSE, observers)
 * and baseline.c (cuSPARSE alone). Internal to gpu/worker/; prefix run_
 * (the types are internal and unprefixed). Each function's contract is
 * written above its definition. */
#ifndef DITTO_GPU_WORKER_RUNNER_H
#define DITTO_GPU_WORKER_RUNNER_H

#include "gpu/gpu.h"
#include "gpu/sandbox.h"
#include "gpu/worker/worker.h"

struct observe; /* measure.c's observer */

/* The arrays of an input set, each drawn from its own streams. */
enum { FILL_IN1, FILL_IN2, FILL_BIAS, FILL_OUT0 };

#define GOLDEN 0x9e3779b97f4a7c15ULL /* splitmix64's increment */

/* splitmix64's output function: a bijection that mixes every bit. */
static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct operands {
    size_t nin1, nin2, nout;
    double *in1;  /* x | B | A */
    double *in2;  /* - | - | Bt */
    double *out0; /* y0 | C0 | S values (beta != 0) */
    double *bias; /* rows */
    double *ref, *tol;
} operands;

typedef struct instance {
    const sp_csr *a;
    const double *av;   /* rounded values */
    const dev_fmt *fmt; /* borrowed (cached) or owned */
    dev_fmt own_fmt;
    int owns_fmt;
    struct wk_matrix *m; /* whose cache lent fmt (NULL: owned) */
    int fmt_dirty;       /* the kernel changed fmt: the cache drops it at release */
    gpu_cubin *cubin;
    dev_kernel k;
    int loaded;
    dev_buf in1, in2, out, bias, scratch;
    dev_bind bind;
    size_t esize;
    dev_buf moved[3 * WK_PLACEMENTS]; /* operand copies made by replace_operands */
    int nmoved;
    dev_fmt *moved_fmt[WK_PLACEMENTS]; /* format copies made by replace_operands */
    int nmoved_fmt;
    /* in1, in2, out and bias sit GUARD bytes into these allocations, with
     * GUARD bytes of guard_pat (the dtype's NaN) before and after each. */
    dev_buf gbase[4];
    unsigned char guard_pat[WK_GUARD];
} instance;

/* Poison elements [lo, hi) of an output of es-byte elements, or, given the
 * downloaded output, flag those that still hold it. */
typedef struct poison_job {
    unsigned char *raw;
    size_t es;
    uint64_t bits;        /* the dtype's poison (poison_bits), es bytes of it */
    unsigned char *flags; /* poison_flags_range: 1 where raw still holds it */
} poison_job;

typedef struct launch_ud {
    instance *in;
    const gpu_contract *c;
    struct observe *ob; /* measure's observer (NULL: none), told where operands move */
} launch_ud;

/* Counts over the outputs, for a check's verdict. The loops run in parts
 * over threads; merged in part order, which is index order, a tally is
 * exactly what one serial pass gives: the same first index, counts and
 * maxima (NaN never enters a maximum). */
typedef struct tally {
    size_t bad, first_bad;     /* outputs failing the check, and the lowest */
    size_t other, first_other; /* a second count, per check, and its lowest */
    double max_err, max_ratio;
} tally;

/* The arrays a check compares; each tally function uses some. */
typedef struct cmp_arrays {
    const double *got, *got2; /* downloaded outputs */
    const double *ref, *ref2, *tol, *tol2;
    const unsigned char *untouched;
} cmp_arrays;

/* Tally outputs [lo, hi) into *t, every field of it written. */
typedef void (*tally_fn)(const cmp_arrays *c, size_t lo, size_t hi, tally *t);

/* runner.c */
uint64_t run_fresh_seed(uint64_t salt);
double run_u_of(sp_dtype t);
void run_operands_free(operands *o);
void run_fill_random(double *v, size_t n, uint64_t seed, int set, int which, sp_dtype t);
double *run_xalloc_doubles(size_t n, dt_err *e);
void run_epilogue_on_host(const wk_problem *p, const sp_csr *a, sp_layout layout,
                          const double *bias, double *v, size_t nout);
int run_make_operands_near(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                           int set, const operands *near, operands *o, dt_err *e);
int run_make_operands_any(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                          int set, int with_ref, const operands *near, int wide, operands *o,
                          dt_err *e);
int run_make_operands(const sp_csr *a, const double *av, const wk_problem *p, sp_layout layout,
                      int set, int with_ref, operands *o, dt_err *e);
const double *run_matrix_rounded(wk_matrix *m, sp_dtype t, dt_err *e);
const dev_fmt *run_matrix_fmt(wk_matrix *m, const char *format, const cJSON *params, sp_dtype t,
                              dt_err *e);
int run_guards_intact(const instance *in, const char *const names[4], const char **which,
                      int *before, dt_err *e);
int run_slack_intact(instance *in, const char *const names[4], const char **which, char *buf,
                     size_t len, dt_err *e);
int run_instance_prepare(wk_state *w, wk_matrix *m, const sp_csr *a, const wk_kernel *kn,
                         const wk_problem *p, instance *in, dt_err *e);
void run_instance_release(instance *in, int owns_values);
int run_put(dev_buf *b, const double *v, size_t n, sp_dtype t, dt_err *e);
void run_poison_seed(uint64_t seed);
uint64_t run_poison_bits(sp_dtype t);
void run_poison_range(void *ctx, int64_t lo, int64_t hi, int part);
void run_poison_flags_range(void *ctx, int64_t lo, int64_t hi, int part);
int run_upload_inputs(instance *in, const wk_problem *p, const operands *o, dt_err *e);
int run_init_output(instance *in, const wk_problem *p, const operands *o, dt_err *e);
int run_copy_placed(const dev_buf *b, dev_buf *nb, dt_err *e);
int run_fmt_clone_placed(const dev_fmt *f, dev_fmt *c, dt_err *e);
void run_fmt_clone_free(dev_fmt *c);
int run_replace_operands(void *ud, int op, dt_err *e);
int run_enqueue_kernel(void *ud, CUstream s, dt_err *e);
int run_once(instance *in, const gpu_contract *c, size_t nout, sp_dtype t, double *got,
             unsigned char *untouched, dt_err *e);
wk_matrix *run_request_begin(wk_state *w, const cJSON *req, wk_problem *p, const char *need,
                             dt_err *e);

/* verify.c */
tally run_tally_outputs(size_t n, tally_fn fn, const cmp_arrays *c);
void run_reference_tally(const cmp_arrays *c, size_t lo, size_t hi, tally *t);

/* measure.c */
void run_observe_moved(struct observe *ob, int which, CUdeviceptr to);
void run_stats_into(cJSON *o, const char *key, const dev_stats *s);

#endif /* DITTO_GPU_WORKER_RUNNER_H */
