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

/* --part: the matrices of every --matrices-dir that the split puts in that
 * part; one the split does not list is named and left out. Checked before
 * any worker starts, through the --hbm-matrices error, which counts and
 * names the matrices kept. */
Test(bench, part_should_keep_the_matrices_of_that_part_from_every_folder)
{
    char *dir = tu_tmpdir();
    char *da = dt_xasprintf("%s/a", dir), *db = dt_xasprintf("%s/b", dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(da, &e), 0, "%s", e.msg);
    cr_assert_eq(dt_mkdir_p(db, &e), 0, "%s", e.msg);
    const char *mm = "%%MatrixMarket matrix coordinate real general\n2 2 1\n1 1 1.0\n";
    free(tu_write(da, "one.mtx", mm));
    free(tu_write(da, "two.mtx", mm));
    free(tu_write(db, "three.mtx", mm));
    free(tu_write(db, "four.mtx", mm));
    char *split = tu_write(dir, "split.tsv",
                           "name\tpart\tfolder\none.mtx\tfit\ta\ntwo.mtx\tvalidate\ta\n"
                           "three.mtx\tvalidate\tb\n");
    tu_proc p = tu_run("'%s' bench --matrices-dir '%s' --matrices-dir '%s' --part validate "
                       "--split '%s' --hbm-matrices nope --ops spmv-fp32",
                       tu_ditto_bin(), da, db, split);
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_expect(strstr(p.err, "four.mtx is not in"), "%s", p.err);
    cr_expect(strstr(p.err, "'nope' names none of the 2 matrices (") &&
                  strstr(p.err, "two.mtx, ..."),
              "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' bench --matrices-dir '%s' --part holdout --split '%s' --ops spmv-fp32",
               tu_ditto_bin(), da, split);
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_expect(strstr(p.err, "--part holdout: no matrix of"), "%s", p.err);
    tu_proc_free(&p);
    free(split);
    free(da);
    free(db);
    tu_rmtree(dir);
    free(dir);
}
