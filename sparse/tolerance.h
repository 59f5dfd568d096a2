/* tolerance.h -- ditto's verification tolerance, its one definition: how far
 * a kernel's output may sit from the fp64 reference. The worker's battery
 * (gpu/worker/runner.c) includes it, and `ditto export` inlines it into the
 * harness it writes (export/harness.cu's #include "sparse/tolerance.h"), so
 * an exported kernel is judged exactly as ditto judged it.
 *
 * Prefix: sp_tol. Self-contained on purpose (C and CUDA C++, <math.h> only,
 * no ditto type): it is compiled by nvcc in the exported harness.
 *
 * One output's bound: c(len) = 4 sqrt(len + 2) + 8, a statistical bound on
 * the error of a sum of len terms rather than the worst case len: the worst
 * case is loose enough on long rows to let a missing term through, and
 * random-sign inputs keep real accumulation error far below this. Then
 *   tol = c(len) u_acc m + 2 u_out |ref| + tiny
 * where m = |alpha| sum |a_ik x_k| + |beta y0| + |bias| (the magnitudes the
 * sum went through), u_acc the unit roundoff of the accumulation (fp32 for
 * every type but fp64: a kernel that sums in half precision fails,
 * deliberately) and u_out that of the stored output. GELU widens it to
 * 1.2 tol + 8 u_acc |ref|. */
#ifndef DITTO_SPARSE_TOLERANCE_H
#define DITTO_SPARSE_TOLERANCE_H

#include <math.h>

/* Unit roundoffs: 2^-53, 2^-24, 2^-11, 2^-8. */
#define SP_TOL_U_FP64 1.1102230246251565e-16
#define SP_TOL_U_FP32 5.9604644775390625e-08
#define SP_TOL_U_FP16 4.8828125e-04
#define SP_TOL_U_BF16 3.90625e-03
/* The absolute floor: half types' outputs near 0 round coarsely. */
#define SP_TOL_TINY      1e-30
#define SP_TOL_TINY_HALF 1e-4

/* c for a sum of len terms. */
static inline double sp_tol_c(double len)
{
    return 4.0 * sqrt(len + 2.0) + 8.0;
}

/* The tolerance of one output: c from sp_tol_c, u_acc and u_out the unit
 * roundoffs above, tiny the floor, mag the magnitudes m, ref the reference
 * (the epilogue applied), gelu non-zero for the GELU epilogue. */
static inline double sp_tol_bound(double c, double u_acc, double u_out, double tiny, double mag,
                                  double ref, int gelu)
{
    double t = c * u_acc * mag + 2.0 * u_out * fabs(ref) + tiny;
    if (gelu)
        t = 1.2 * t + 8.0 * u_acc * fabs(ref);
    return t;
}

#endif /* DITTO_SPARSE_TOLERANCE_H */
