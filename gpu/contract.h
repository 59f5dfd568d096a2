/* contract.h -- a kernel's launch contract: entry point, parameters from a
 * fixed vocabulary, grid/block/shared-memory formulas, baked-in matrix
 * constants and preconditions. See gpu/PROTOCOL.md for the fields.
 *
 * Pure C (no CUDA): the orchestrator reads contracts too (static rules, the
 * coder's prompt), and the worker binds them to device buffers. Prefix gpu_.
 *
 * Ownership: gpu_contract_parse fills a caller-owned struct that
 * gpu_contract_clear releases; clearing a zeroed struct is a no-op. */
#ifndef DITTO_GPU_CONTRACT_H
#define DITTO_GPU_CONTRACT_H

#include "core/core.h"
#include "sparse/sparse.h"

#define GPU_MAX_PARAMS 32
#define GPU_MAX_VARS 64

typedef struct gpu_contract {
    char *entry;          /* kernel name (or name expression) */
    sp_op op;
    char *format;         /* "csr" by default */
    cJSON *format_params; /* object, may be NULL */
    char *params[GPU_MAX_PARAMS];
    int nparams;
    char *block[3];       /* expressions; "1" when absent */
    char *grid[3];
    char *smem;           /* dynamic shared memory expression, "0" default */
    char *scratch_bytes;  /* expression; NULL when the kernel takes no scratch */
    int scratch_once;     /* scratch_init "once": zeroed when allocated, left zeroed by the
                           * kernel (else "launch": zeroed before every launch, timed) */
    cJSON *defines;       /* object NAME -> expression (string) or number */
    cJSON *requires;      /* object, may be NULL */
    sp_layout layout;     /* SpMM B and C layout */
} gpu_contract;

/* Parse and check a contract object: required fields (entry, params, block,
 * grid), known parameter names, expressions that parse. On error every
 * problem is in e->msg (semicolon-separated) and c is cleared. */
int gpu_contract_parse(const cJSON *j, gpu_contract *c, dt_err *e);
/* Find the first comment block "/\*@contract ... @*\/" in a source and parse
 * the JSON inside. Error "no launch contract: ..." when absent. */
int gpu_contract_from_source(const char *src, gpu_contract *c, dt_err *e);
/* The JSON text between the markers, or NULL (caller frees). */
char *gpu_contract_extract(const char *src);
cJSON *gpu_contract_json(const gpu_contract *c);
void gpu_contract_clear(gpu_contract *c);
/* 1 when name is in the parameter vocabulary of PROTOCOL.md. */
int gpu_param_known(const char *name);

/* Variables for expressions. Names are borrowed and must outlive the set. */
typedef struct gpu_vars {
    const char *name[GPU_MAX_VARS];
    int64_t val[GPU_MAX_VARS];
    int n;
} gpu_vars;

/* Set (or replace) a variable; silently ignores overflow of the table
 * (GPU_MAX_VARS is far above what the vocabulary uses). */
void gpu_vars_set(gpu_vars *v, const char *name, int64_t val);
int gpu_vars_get(const gpu_vars *v, const char *name, int64_t *out);

/* Evaluate an integer expression: + - * / % (truncating, division by zero
 * is an error), unary minus and !, comparisons == != < <= > >= (0 or 1),
 * && and ||, parentheses, decimal literals, variables, and the functions
 * cdiv(a, b) (ceiling division), min(a, b), max(a, b).
 * Errors name the expression and the position. */
int gpu_eval(const char *expr, const gpu_vars *v, int64_t *out, dt_err *e);
/* Check syntax only (unknown variables allowed). */
int gpu_expr_check(const char *expr, dt_err *e);

/* ---- manifests -----------------------------------------------------------------
 *
 * A template's manifest, a "/\*@manifest {...} @*\/" block: its strategy
 * name, op, dtypes, parameters (each a -D macro and a contract variable) with
 * a default and the legal values, constraints between them (expressions that
 * must be non-zero, e.g. "VEC * LANES <= 32"), the preprocessing it needs
 * and a one-line summary. Ownership as for contracts. */

#define GPU_MAX_MPARAMS 16
#define GPU_ENOMANIFEST 2 /* dt_err code: the source has no manifest block */

typedef struct gpu_mparam {
    char *name;
    int64_t dflt;
    int64_t *values;
    int nvalues;
} gpu_mparam;

typedef struct gpu_manifest {
    char *strategy;
    sp_op op;
    unsigned dtypes; /* bit (1 << sp_dtype) per supported dtype */
    gpu_mparam params[GPU_MAX_MPARAMS];
    int nparams;
    char *constraints[GPU_MAX_MPARAMS];
    int nconstraints;
    char *preprocessing;
    char *summary;
    cJSON *raw;      /* the block as parsed */
} gpu_manifest;

int gpu_manifest_parse(const cJSON *j, gpu_manifest *m, dt_err *e);
int gpu_manifest_from_source(const char *src, gpu_manifest *m, dt_err *e);
void gpu_manifest_clear(gpu_manifest *m);
/* {NAME: default, ...}; caller frees. */
cJSON *gpu_manifest_defaults(const gpu_manifest *m);
/* Check that params (NAME -> integer; missing names take the default) are
 * legal values and that every constraint holds with vars (may be NULL) and
 * the params as variables. */
int gpu_manifest_check(const gpu_manifest *m, const cJSON *params, const gpu_vars *vars,
                       dt_err *e);

/* A contract's format_params with every string value evaluated as an
 * expression over the kernel's parameters params ("sigma": "SIGMA" lets the
 * tuner pick the format's sorting window as it picks BLOCK). A new object;
 * NULL when the contract has none, or with e set when an expression fails. */
cJSON *gpu_format_params(const gpu_contract *c, const cJSON *params, dt_err *e);
/* One of the contract's `requires` numbers, its expression evaluated over
 * params (may be NULL); dflt when absent or not evaluable. */
double gpu_requires_num(const gpu_contract *c, const cJSON *params, const char *key, double dflt);

/* A writable __device__ or __managed__ variable in src (state kept across
 * launches; gpu/devstate.c): 1 with its name and line, else 0. */
int gpu_device_state(const char *src, char *name, size_t nlen, int *line);

#endif /* DITTO_GPU_CONTRACT_H */
