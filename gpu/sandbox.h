/* sandbox.h -- what generated code may reach outside itself: the headers an
 * #include may name and the NVRTC options a request may carry.
 *
 * Pure C (no CUDA): the static rules (agents/rules.c) flag the same includes
 * the worker refuses, so the coder hears about them with a line number
 * before the worker says no. Prefix gpu_.
 *
 * A kernel source may include only ditto's own kernel headers (the *.cuh
 * files of the shipped kernels/ folder) and the toolkit's half-precision
 * headers (cuda_fp16.h, cuda_bf16.h), by a bare file name: an absolute path,
 * a '/' or "..", an unknown header and a computed #include (a macro) are
 * refused. Otherwise NVRTC would read any file the worker can, and its
 * messages -- which go to the LLM in the next prompt -- would quote it. */
#ifndef DITTO_GPU_SANDBOX_H
#define DITTO_GPU_SANDBOX_H

#include "core/core.h"

/* Called once per refused #include: the 1-based line in src and why. */
typedef void gpu_include_fn(int line, const char *why, void *ud);

/* Scan src (len bytes) for #include directives as the C++ preprocessor sees
 * them (line splices, comments, string, character and raw string literals,
 * digit separators, the %: digraph), calling fn for each one that is not
 * allowed; trigraphs that could hide a directive (?\?= and ?\?/) are refused
 * too. Returns the number of refusals (0: the source is inside the sandbox).
 * Never fails; fn may be NULL. */
int gpu_sandbox_scan(const char *src, size_t len, gpu_include_fn *fn, void *ud);
/* The same, stopping at the first refusal: 0, or -1 with e holding
 * "NAME:LINE: why". */
int gpu_sandbox_check(const char *src, size_t len, const char *name, dt_err *e);
/* 1 when name (as written between the quotes or brackets) is an allowed
 * header: no '/', no "..", and either a toolkit half-precision header or a
 * *.cuh regular file of the shipped kernels/ folder (dt_share_path). */
int gpu_sandbox_header_ok(const char *name);

/* Check one NVRTC option of a request. Options that read or write files
 * (--include-path, -I, --pre-include, -include, --time, ...) are refused;
 * the accepted ones are macros (-D, -U), the language standard, math and
 * optimisation switches, register limits, line info and ptxas -O, -v and
 * warnings after -Xptxas. prev is the option before (NULL for the first):
 * after "-Xptxas" the ptxas option is checked. 0 when allowed, else -1 with
 * e naming the option and what is accepted. */
int gpu_sandbox_option(const char *opt, const char *prev, dt_err *e);

#endif /* DITTO_GPU_SANDBOX_H */
