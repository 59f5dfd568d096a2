/* test_check.c -- `ditto check --param`: a template compiled at parameters
 * given on the command line, checked against its manifest first. Without a
 * GPU check stops after compiling (exit 3); with one it verifies too. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

/* check on a generated matrix, short where a GPU runs it. */
static tu_proc check(const char *kernel, const char *params)
{
    return tu_run("'%s' check '%s/kernels/%s' gen:stencil5:rows=4096 --sets 2 --no-edge "
                  "--no-measure %s",
                  tu_ditto_bin(), tu_src_dir(), kernel, params);
}

Test(check, params_should_compile_the_template_at_the_values_given)
{
    tu_proc p = check("spmv_sell16.cu", "--param VEC=2 --param BLOCK=128 --param SIGMA=256");
    cr_assert(p.status == 0 || p.status == 3, "exit %d: %s%s", p.status, p.out, p.err);
    /* The given values, the manifest's default for those not given. */
    cr_assert(
        strstr(p.out, "params {\"BLOCK\":128,\"UNROLL\":8,\"SIGMA\":256,\"VEC\":2,\"SEQ\":1}"),
        "%s", p.out);
    cr_assert(strstr(p.out, "compile spmv_sell16.cu") && strstr(p.out, ": ok"), "%s", p.out);
    tu_proc_free(&p);
    /* Without --param nothing is printed for them: the defaults run. */
    p = check("spmv_sell16.cu", "");
    cr_assert(p.status == 0 || p.status == 3, "exit %d: %s%s", p.status, p.out, p.err);
    cr_assert_null(strstr(p.out, "params "), "%s", p.out);
    tu_proc_free(&p);
}

Test(check, params_the_manifest_refuses_should_be_usage_errors_that_say_why)
{
    static const struct {
        const char *args, *want;
    } cases[] = {
        {"--param VEC=3", "spmv_sell16.cu: VEC = 3 is not a legal value for sell16-thread"},
        {"--param VEC=3", "(legal: 1, 2, 4, 8)"},
        {"--param NOPE=1", "has no parameter NOPE (it has: BLOCK, UNROLL, SIGMA, VEC, SEQ)"},
        {"--param VEC", "expected NAME=VALUE"},
        {"--param =4", "expected NAME=VALUE"},
        {"--param VEC=two", "expected NAME=VALUE"},
        {"--param VEC=8 --param UNROLL=8", "constraint 'VEC * UNROLL <= 32' does not hold"},
        {"--param", "--param needs NAME=VALUE"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        tu_proc p = check("spmv_sell16.cu", cases[i].args);
        cr_assert_eq(p.status, 2, "%s: exit %d: %s", cases[i].args, p.status, p.err);
        cr_assert(strstr(p.err, cases[i].want), "%s: %s", cases[i].args, p.err);
        /* Refused before any worker starts or anything compiles. */
        cr_assert_null(strstr(p.out, "compile "), "%s: %s", cases[i].args, p.out);
        tu_proc_free(&p);
    }
}

Test(check, params_need_a_manifest_to_name_them)
{
    char *dir = tu_tmpdir();
    char *k = tu_write(dir, "bare.cu",
                       "/*@contract {\"entry\": \"k\", \"op\": \"spmv\", \"params\": [\"y\"], "
                       "\"block\": [\"32\"], \"grid\": [\"1\"]} @*/\n"
                       "extern \"C\" __global__ void k(float *y) { (void)y; }\n");
    tu_proc p = tu_run("'%s' check '%s' gen:stencil5:rows=64 --param BLOCK=32", tu_ditto_bin(), k);
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "bare.cu: no manifest block") &&
                  strstr(p.err, "--param sets a parameter its manifest names"),
              "%s", p.err);
    tu_proc_free(&p);
    free(k);
    tu_rmtree(dir);
    free(dir);
}
