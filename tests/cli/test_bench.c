/* test_bench.c -- `ditto bench`'s arguments, checked before any worker
 * starts (the runs themselves need a GPU and are timed on one, not here). */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

Test(bench, an_hbm_name_that_matches_no_matrix_should_be_a_usage_error)
{
    char *m = tu_matrix("bcsstk13.mtx");
    tu_proc p = tu_run("'%s' bench '%s' --hbm-matrices crack --ops spmv-fp32", tu_ditto_bin(), m);
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "--hbm-matrices: 'crack' names none of the 1 matrices") &&
                  strstr(p.err, "bcsstk13.mtx"),
              "%s", p.err);
    tu_proc_free(&p);
    free(m);
}

Test(bench, hbm_names_should_match_with_or_without_the_extension)
{
    /* Names are checked in order and the first that matches nothing is the
     * error: so a complaint about the last name says the others matched.
     * (Nothing here starts a worker, GPU or not.) */
    char *a = tu_matrix("bcsstk13.mtx"),
         *b = tu_matrix("dlmc/rn50__magnitude_pruning__0.8__final_dense.smtx");
    const char *lists[] = {"bcsstk13,nope", "bcsstk13.mtx,nope",
                           "dlmc/rn50__magnitude_pruning__0.8__final_dense,nope",
                           "rn50__magnitude_pruning__0.8__final_dense.smtx,nope"};
    for (size_t i = 0; i < DT_ARRAY_LEN(lists); i++) {
        tu_proc p = tu_run("'%s' bench '%s' '%s' --hbm-matrices %s --ops spmv-fp32", tu_ditto_bin(),
                           a, b, lists[i]);
        cr_assert_eq(p.status, 2, "%s: exit %d: %s", lists[i], p.status, p.err);
        cr_assert(strstr(p.err, "'nope' names none of the 2 matrices"), "%s: %s", lists[i], p.err);
        tu_proc_free(&p);
    }
    free(a);
    free(b);
}
