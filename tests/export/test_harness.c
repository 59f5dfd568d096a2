/* test_harness.c -- the harness template is shipped data (export/harness.cu), found like
 * kernels/, and its tolerance is the worker's (sparse/tolerance.h, inlined): the parts export
 * writes, and the errors when a shipped file or a marker line is missing. */
#include "tests/common/testutil.h"

#include "export/export.h"
#include "sparse/tolerance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* DITTO_SHARE set to dir for one call of export_harness_parts; the old value restored. */
static int parts_in(const char *dir, char **head, char **tail, dt_err *e)
{
    const char *old = getenv("DITTO_SHARE");
    char *keep = old ? dt_xstrdup(old) : NULL;
    setenv("DITTO_SHARE", dir, 1);
    int rc = export_harness_parts(head, tail, e);
    if (keep) {
        setenv("DITTO_SHARE", keep, 1);
        free(keep);
    } else {
        unsetenv("DITTO_SHARE");
    }
    return rc;
}

Test(harness, parts_should_inline_the_workers_tolerance_and_drop_the_template_comment)
{
    char *head, *tail;
    dt_err e = {0};
    cr_assert_eq(parts_in(tu_src_dir(), &head, &tail, &e), 0, "%s", e.msg);
    cr_assert(strstr(head, "/* ---- sparse/tolerance.h, inlined by ditto export ---- */"), "%.300s",
              head);
    cr_assert(strstr(head, "static inline double sp_tol_bound("));
    cr_assert_null(strstr(head, "\n#include \"sparse/tolerance.h\""), "the include is replaced");
    cr_assert_null(strstr(head, "//@ditto-export"), "no marker line is written");
    cr_assert_null(strstr(tail, "//@ditto-export"));
    cr_assert_null(strstr(head, "harness.cu -- the fixed parts"), "the template's comment stays");
    cr_assert(dt_startswith(head, "/* ---- the harness: types and helpers"), "%.80s", head);
    /* One definition: the template computes no tolerance of its own. */
    cr_assert(strstr(tail, "sp_tol_bound(sp_tol_c(len), DX_U_ACC, DX_U_OUT, DX_TINY"));
    char *path = dt_xasprintf("%s/export/harness.cu", tu_src_dir());
    char *tmpl = dt_read_file(path, NULL, &e);
    cr_assert_not_null(tmpl, "%s", e.msg);
    cr_assert_null(strstr(tmpl, "sqrt(len"), "a second tolerance formula in the harness");
    cr_assert_null(strstr(tmpl, "e-08"), "a unit roundoff written out again in the harness");
    free(tmpl);
    free(path);
    free(head);
    free(tail);
}

Test(harness, parts_should_name_the_missing_shipped_file_or_marker)
{
    char *dir = tu_tmpdir();
    char *head = (char *)1, *tail = (char *)1;
    dt_err e = {0};
    cr_assert_eq(parts_in(dir, &head, &tail, &e), -1);
    cr_assert(head == NULL && tail == NULL);
    cr_assert(strstr(e.msg, "export/harness.cu") && strstr(e.msg, "DITTO_SHARE"), "%s", e.msg);

    char *sub = dt_xasprintf("%s/export", dir);
    cr_assert_eq(dt_mkdir_p(sub, NULL), 0);
    free(tu_write(sub, "harness.cu", "//@ditto-export:head\n#include \"sparse/tolerance.h\"\n"));
    dt_err_clear(&e);
    cr_assert_eq(parts_in(dir, &head, &tail, &e), -1);
    cr_assert(strstr(e.msg, "//@ditto-export:contract is missing"), "%s", e.msg);

    free(tu_write(sub, "harness.cu", "//@ditto-export:head\nA\n//@ditto-export:contract\nB\n"));
    dt_err_clear(&e);
    cr_assert_eq(parts_in(dir, &head, &tail, &e), -1);
    cr_assert(strstr(e.msg, "#include \"sparse/tolerance.h\" is missing"), "%s", e.msg);

    free(tu_write(sub, "harness.cu",
                  "/* t */\n//@ditto-export:head\nA\n#include \"sparse/tolerance.h\"\nB\n"
                  "//@ditto-export:contract\nC\n"));
    dt_err_clear(&e);
    cr_assert_eq(parts_in(dir, &head, &tail, &e), -1);
    cr_assert(strstr(e.msg, "sparse/tolerance.h") && strstr(e.msg, "was not found"), "%s", e.msg);

    char *sp = dt_xasprintf("%s/sparse", dir);
    cr_assert_eq(dt_mkdir_p(sp, NULL), 0);
    free(tu_write(sp, "tolerance.h", "TOL"));
    dt_err_clear(&e);
    cr_assert_eq(parts_in(dir, &head, &tail, &e), 0, "%s", e.msg);
    cr_assert_str_eq(head, "A\n/* ---- sparse/tolerance.h, inlined by ditto export ---- */\nTOL\n"
                           "/* ---- end of sparse/tolerance.h ---- */\nB\n");
    cr_assert_str_eq(tail, "C\n");
    free(head);
    free(tail);
    free(sp);
    free(sub);
    tu_rmtree(dir);
    free(dir);
}

/* The constants are the unit roundoffs they name, and the bound is the formula the worker's
 * battery and every exported harness apply. */
Test(harness, tolerance_should_be_the_documented_bound)
{
    cr_expect_eq(SP_TOL_U_FP64, ldexp(1.0, -53));
    cr_expect_eq(SP_TOL_U_FP32, ldexp(1.0, -24));
    cr_expect_eq(SP_TOL_U_FP16, ldexp(1.0, -11));
    cr_expect_eq(SP_TOL_U_BF16, ldexp(1.0, -8));
    cr_expect_eq(sp_tol_c(2.0), 16.0);
    cr_expect_eq(sp_tol_c(14.0), 24.0);
    /* c 16, u_acc 2^-24, u_out 2^-11, m 3, ref -2, tiny 1e-4. */
    const double ua = SP_TOL_U_FP32, uo = SP_TOL_U_FP16;
    const double t = sp_tol_bound(16.0, ua, uo, 1e-4, 3.0, -2.0, 0);
    cr_expect_eq(t, 16.0 * ua * 3.0 + 2.0 * uo * 2.0 + 1e-4);
    cr_expect_eq(sp_tol_bound(16.0, ua, uo, 1e-4, 3.0, -2.0, 1), 1.2 * t + 8.0 * ua * 2.0,
                 "GELU widens it");
}
