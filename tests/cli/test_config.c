/* test_config.c -- config.json is checked by its schema: every problem with
 * the file, its path and what was expected, and the command stops. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

#define HAS(out, s) cr_assert(strstr((out), (s)) != NULL, "missing [%s] in:\n%s", (s), (out))

static tu_proc tune_with(const char *dir, const char *config)
{
    char *cf = tu_write(dir, "config.json", config);
    free(tu_write(dir, "spec.json",
                  "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=10,nnz=20\"}"));
    tu_proc p = tu_run("cd '%s' && DITTO_CONFIG='%s' XDG_CACHE_HOME='%s/c' '%s' tune spec.json "
                       "--variants 1",
                       dir, cf, dir, tu_ditto_bin());
    free(cf);
    return p;
}

Test(config, every_problem_should_be_named_with_its_path_and_stop_the_command, .timeout = 60)
{
    char *dir = tu_tmpdir();
    tu_proc p = tune_with(dir, "{\"workers\": {\"count\": 65, \"launcher\": 3, \"ship\": \"often\","
                               " \"cont\": 1}, \"backend\": \"gpt\", \"max_reviews\": 1e300,"
                               " \"tune\": {\"variants\": 0, \"seconds\": -1},"
                               " \"goal_speedup\": \"2x\", \"colour\": 1}");
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    HAS(p.err, "config.json: $.colour: expected one of the keys backend, review, llm, workers, "
               "tune, goal_speedup, max_iterations, max_reviews, hooks, got an unknown key\n");
    HAS(p.err, "config.json: $.workers.cont: expected one of the keys count, launcher, ship, got "
               "an unknown key\n");
    HAS(p.err, "config.json: $.workers.count: expected an integer from 1 to 64, got 65\n");
    HAS(p.err, "config.json: $.workers.launcher: expected a command line with {exe} and "
               "{device}, got 3\n");
    HAS(p.err, "config.json: $.workers.ship: expected \"auto\", \"always\" or \"never\" (sending "
               "matrix files to workers, README), got \"often\"\n");
    HAS(p.err, "config.json: $.backend: expected one of expert, llm, got \"gpt\"\n");
    HAS(p.err, "config.json: $.max_reviews: expected an integer from 1 to 1000, got 1e+300\n");
    HAS(p.err, "config.json: $.tune.variants: expected an integer from 1 to 100000, got 0\n");
    HAS(p.err, "config.json: $.tune.seconds: expected a number above 0 and at most 604800, got "
               "-1\n");
    HAS(p.err, "config.json: $.goal_speedup: expected a number above 0 and at most 1000000, got "
               "\"2x\"\n");
    tu_proc_free(&p);

    /* Not an object: one problem, and the command still stops. */
    p = tune_with(dir, "[1]");
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    HAS(p.err, "config.json: $: expected an object, got an array of 1 item\n");
    tu_proc_free(&p);
    tu_rmtree(dir);
    free(dir);
}
