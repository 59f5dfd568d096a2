/* test_tune.c -- `ditto tune --dry-run`: the planner's ranking and the
 * variants the tuner would measure, with no worker and no GPU. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

/* Rows of 5 nonzeros on average (uniform): the short-row rule for N=32
 * fires, so csr-warp-spmm leads and starts at 4 rows per warp. */
static const char spec_text[] = "{\"op\": \"spmm\", \"n\": 32, \"gpu\": \"h200\","
                                " \"matrix\": \"gen:uniform:rows=20000,nnz=100000,seed=3\"}";

Test(tune, dry_run_should_rank_and_list_the_variants_without_a_gpu)
{
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json", spec_text);
    tu_proc p = tu_run("'%s' tune '%s' --dry-run --strategies 2 --variants 8", tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    /* Neither of the first two is safe for skewed rows: the first safe
     * one comes along as a third. */
    cr_assert(strstr(p.out, "rules for compute capability 9.0: 3 strategies, up to 8 variants"),
              "%s", p.out);
    cr_assert(strstr(p.out, "\nsafe for skewed rows: csr-split-spmm (place 3)\n"), "%s", p.out);
    cr_assert(strstr(p.out, "\ncsr-split-spmm (score "), "%s", p.out);
    cr_assert(strstr(p.out, ", safe for skewed rows)\n"), "%s", p.out);
    const char *warp = strstr(p.out, "\ncsr-warp-spmm (score 75.0)\n");
    cr_assert_not_null(warp, "%s", p.out);
    cr_assert(strstr(warp, "rule.spmm.csr-warp-rows-per-warp-for-short-rows: "), "%s", p.out);
    cr_assert(strstr(warp, "    1 {\"WARPS\":4,\"VEC\":8,\"LANES\":32,\"ROWS_PER_WARP\":4,"), "%s",
              p.out);
    /* Each variant says why it was chosen: the rule's other values next. */
    const char *second = strstr(warp, "    2 {\"WARPS\":4,\"VEC\":8,\"LANES\":32,\"ROWS_PER_WARP\":2,");
    cr_assert_not_null(second, "%s", p.out);
    cr_assert(strstr(warp, "the planner's point\n") && strstr(second, "a rule's value: ROWS_PER_WARP 2\n"),
              "%s", p.out);
    cr_assert(strstr(warp, "    8 {"), "%s", p.out);
    cr_assert(!strstr(warp, "    9 {"), "%s", p.out);
    tu_proc_free(&p);

    /* --json: the candidates with their variants, the first one the
     * candidate's own params. */
    p = tu_run("'%s' tune '%s' --dry-run --strategies 2 --variants 5 --json", tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 3, "%s", p.out);
    cr_assert(!dt_json_bool(cJSON_GetArrayItem(j, 0), "skew_safe", 1), "%s", p.out);
    cr_assert(dt_json_bool(cJSON_GetArrayItem(j, 2), "skew_safe", 0), "%s", p.out);
    const cJSON *c;
    cJSON_ArrayForEach(c, j)
    {
        const cJSON *v = cJSON_GetObjectItem(c, "variants");
        cr_assert_eq(cJSON_GetArraySize(v), 5, "%s", p.out);
        cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(c, "why")), 5, "%s", p.out);
        char *own = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "params"));
        char *first = cJSON_PrintUnformatted(cJSON_GetArrayItem(v, 0));
        cr_assert_str_eq(first, own);
        free(own);
        free(first);
    }
    cJSON_Delete(j);
    tu_proc_free(&p);
    free(spec);

    /* A GPU the spec names but no spec file describes: one line that says so. */
    spec = tu_write(dir, "bad.json",
                    "{\"op\": \"spmv\", \"gpu\": \"no-such-gpu\", \"matrix\": \"gen:stencil5:rows=100\"}");
    p = tu_run("'%s' tune '%s' --dry-run", tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err); /* a spec error, as for run */
    cr_assert(strstr(p.err, "no-such-gpu") && strchr(p.err, '\n') == p.err + strlen(p.err) - 1,
              "%s", p.err);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* --refine takes a count (0: no refinement), in tune and in bench alike;
 * anything else is a usage error that names the option. */
Test(tune, refine_should_take_a_count_and_refuse_anything_else)
{
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json", spec_text);
    static const char *bad[] = {"x", "-1", "3x", "", "1001"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        tu_proc p = tu_run("'%s' tune '%s' --dry-run --refine '%s'", tu_ditto_bin(), spec, bad[i]);
        cr_assert_eq(p.status, 2, "tune --refine '%s': exit %d: %s", bad[i], p.status, p.err);
        cr_assert(strstr(p.err, "--refine: expected a count from 0 to 1000"), "%s", p.err);
        tu_proc_free(&p);
        p = tu_run("'%s' bench --refine '%s'", tu_ditto_bin(), bad[i]);
        cr_assert_eq(p.status, 2, "bench --refine '%s': exit %d: %s", bad[i], p.status, p.err);
        cr_assert(strstr(p.err, "--refine: expected a count from 0 to 1000"), "%s", p.err);
        tu_proc_free(&p);
    }
    tu_proc p = tu_run("'%s' tune '%s' --dry-run --refine 0 --strategies 1 --variants 3",
                       tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* Workers with no GPU to see (CUDA_VISIBLE_DEVICES empty), two of them from
 * config.json's "workers", the matrix a file they load by a path only the
 * client sees (they run in /): --compile-only compiles and checks every
 * variant, each line names its worker; without it the tune says how to. */
Test(tune, compile_only_should_compile_every_variant_on_the_configured_workers, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *m = tu_write(
        dir, "diag.mtx",
        "%%MatrixMarket matrix coordinate real general\n4 4 4\n1 1 1\n2 2 2\n3 3 3\n4 4 4\n");
    free(m);
    char *spec = tu_write(dir, "spec.json", "{\"op\": \"spmv\", \"matrix\": \"diag.mtx\"}");
    char *cfg = dt_xasprintf("{\"workers\": {\"count\": 2, \"launcher\": \"env -C / "
                             "CUDA_VISIBLE_DEVICES= XDG_CACHE_HOME=%s/w{device} {exe} worker "
                             "--device {device}\"}}",
                             dir);
    char *cf = tu_write(dir, "config.json", cfg);
    tu_proc p = tu_run("cd '%s' && DITTO_CONFIG='%s' XDG_CACHE_HOME='%s/c' '%s' tune spec.json "
                       "--strategies 1 --variants 3",
                       dir, cf, dir, tu_ditto_bin());
    cr_assert_eq(p.status, 3, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "--compile-only compiles and checks every variant"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("cd '%s' && DITTO_CONFIG='%s' XDG_CACHE_HOME='%s/c' '%s' tune spec.json "
               "--strategies 1 --variants 3 --compile-only",
               dir, cf, dir, tu_ditto_bin());
    cr_assert_eq(p.status, 0, "exit %d: %s\n%s", p.status, p.out, p.err);
    cr_assert(
        /* --strategies 1 keeps a skew-safe strategy beside the first (issue 40):
         * two strategies of 3 variants */
        strstr(p.out, "6 variants: 6 compiled and checked, 0 refused by the compiler, 0 lost"),
        "%s", p.out);
    cr_assert(strstr(p.out, "answers per worker: worker 0: "), "%s", p.out);
    cr_assert(strstr(p.out, " compiled: ") && strstr(p.out, " static findings [worker "), "%s",
              p.out);
    cr_assert(strstr(p.out, "matrix shipped to workers 2 times"), "%s\n%s", p.out, p.err);
    cr_assert(strstr(p.err, "it cannot see the path"), "%s", p.err);
    tu_proc_free(&p);
    free(cfg);
    free(cf);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* workers.ship in config.json: "never" leaves a worker that cannot see the
 * file to say so (nothing is sent); a value outside the three is refused. */
Test(tune, workers_ship_in_the_config_should_be_obeyed_and_checked, .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *m = tu_write(dir, "diag.mtx",
                       "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1\n2 2 2\n");
    free(m);
    char *spec = tu_write(dir, "spec.json", "{\"op\": \"spmv\", \"matrix\": \"diag.mtx\"}");
    const char *modes[] = {"never", "sometimes"};
    for (int i = 0; i < 2; i++) {
        char *cfg = dt_xasprintf("{\"workers\": {\"count\": 1, \"ship\": \"%s\", \"launcher\": "
                                 "\"env -C / XDG_CACHE_HOME=%s/w {exe} worker\"}}",
                                 modes[i], dir);
        char *cf = tu_write(dir, "config.json", cfg);
        tu_proc p = tu_run("cd '%s' && DITTO_CONFIG='%s' '%s' tune spec.json --compile-only "
                           "--strategies 1 --variants 1",
                           dir, cf, tu_ditto_bin());
        if (i == 0) {
            cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
            cr_assert(strstr(p.err, "diag.mtx: cannot be read on this worker's host"), "%s", p.err);
            cr_assert_null(strstr(p.err, "shipping"), "%s", p.err);
        } else {
            cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
            cr_assert(strstr(p.err, "$.workers.ship: expected \"auto\", \"always\" or \"never\""),
                      "%s", p.err);
        }
        tu_proc_free(&p);
        free(cf);
        free(cfg);
    }
    free(spec);
    tu_rmtree(dir);
    free(dir);
}
