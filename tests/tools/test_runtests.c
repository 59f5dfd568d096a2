/* test_runtests.c -- scripts/run-tests.sh, the summary `make test` and `make gpu-test` end
 * with: skips counted and named, sanitizer reports failing the run, a GPU run without a
 * GPU not green. The executables it runs here are stand-ins printing what Criterion 2.4
 * prints with --verbose. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

/* A stand-in test executable in dir printing body (Criterion's verbose
 * output) and exiting with rc; returns its path (caller frees). */
static char *fake_exe(const char *dir, const char *name, const char *body, int rc)
{
    char *text = dt_xasprintf("#!/bin/sh\ncat <<'EOF'\n%sEOF\nexit %d\n", body, rc);
    char *path = tu_write(dir, name, text);
    free(text);
    tu_proc p = tu_run("chmod +x '%s'", path);
    tu_proc_free(&p);
    return path;
}

static tu_proc run_tests(const char *env, const char *exes)
{
    return tu_run("%s '%s/scripts/run-tests.sh' %s 2>&1", env, tu_src_dir(), exes);
}

#define PASS2                                                                                      \
    "[====] Running 2 tests from a:\n"                                                             \
    "[RUN ] a::one\n[PASS] a::one: (0.00s)\n[RUN ] a::two\n[PASS] a::two: (0.00s)\n"

Test(runtests, skips_should_be_counted_and_named_with_their_reason)
{
    char *dir = tu_tmpdir();
    char *a =
        fake_exe(dir, "test_a",
                 PASS2 "[====] Synthesis: Tested: 2 | Passing: 2 | Failing: 0 | Crashing: 0 \n", 0);
    char *b = fake_exe(dir, "test_b",
                       "[RUN ] b::one\n[PASS] b::one: (0.00s)\n"
                       "[RUN ] b::gpu\n[SKIP] b::gpu: no GPU: no CUDA driver\n"
                       "[RUN ] b::nvcc\n[SKIP] b::nvcc: nvcc is not on PATH\n"
                       "[====] Synthesis: Tested: 1 | Passing: 1 | Failing: 0 | Crashing: 0 \n",
                       0);
    char *exes = dt_xasprintf("'%s' '%s'", a, b);
    tu_proc p = run_tests("", exes);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cr_assert(strstr(p.out, "SKIPPED b::gpu: no GPU: no CUDA driver"), "%s", p.out);
    cr_assert(strstr(p.out, "SKIPPED b::nvcc: nvcc is not on PATH"), "%s", p.out);
    cr_assert(strstr(p.out, "[====] Synthesis: Tested: 3 | Passing: 3 | Failing: 0 | Crashing: 0 "
                            "| Skipped: 2\n"),
              "%s", p.out);
    cr_assert_null(strstr(p.out, "[PASS]"), "passing lines are dropped: %s", p.out);
    tu_proc_free(&p);

    /* As `make gpu-test` runs it: a skip for want of a GPU is exit 3 and
     * says the GPU was not tested. */
    p = run_tests("REQUIRE_GPU=1", exes);
    cr_assert_eq(p.status, 3, "%s", p.out);
    cr_assert(strstr(p.out, "the GPU is NOT tested"), "%s", p.out);
    tu_proc_free(&p);
    /* ... and with every test run, how many ran. */
    free(exes);
    exes = dt_xasprintf("'%s'", a);
    p = run_tests("REQUIRE_GPU=1", exes);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cr_assert(strstr(p.out, "2 GPU tests ran (2 passed), 0 skipped"), "%s", p.out);
    tu_proc_free(&p);
    free(exes);
    free(a);
    free(b);
    tu_rmtree(dir);
    free(dir);
}

Test(runtests, every_test_skipped_should_not_be_green)
{
    char *dir = tu_tmpdir();
    char *a = fake_exe(dir, "test_a",
                       "[RUN ] a::one\n[SKIP] a::one: no data\n"
                       "[====] Synthesis: Tested: 0 | Passing: 0 | Failing: 0 | Crashing: 0 \n",
                       0);
    char *exes = dt_xasprintf("'%s'", a);
    tu_proc p = run_tests("", exes);
    cr_assert_eq(p.status, 1, "%s", p.out);
    cr_assert(strstr(p.out, "none of the 1 tests ran"), "%s", p.out);
    tu_proc_free(&p);
    free(exes);
    free(a);
    tu_rmtree(dir);
    free(dir);
}

/* A worker's leak report comes after its test counted as passing (and the
 * executable exits 0): the report alone must fail the run. So must ASan and
 * UBSan reports. */
Test(runtests, a_sanitizer_report_should_fail_the_run_though_every_test_passed)
{
    static const char *reports[] = {
        "=================================================================\n"
        "==8429==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 77 byte(s) in 1 object(s) allocated from:\n"
        "SUMMARY: AddressSanitizer: 77 byte(s) leaked in 1 allocation(s).\n",
        "==1==ERROR: AddressSanitizer: heap-buffer-overflow on address 0x602\n",
        "core/util.c:12:5: runtime error: signed integer overflow\n",
    };
    char *dir = tu_tmpdir();
    for (size_t i = 0; i < DT_ARRAY_LEN(reports); i++) {
        char *body = dt_xasprintf(PASS2 "%s[====] Synthesis: Tested: 2 | Passing: 2 | Failing: 0 | "
                                        "Crashing: 0 \n",
                                  reports[i]);
        char *a = fake_exe(dir, "test_a", body, 0);
        char *exes = dt_xasprintf("'%s'", a);
        tu_proc p = run_tests("", exes);
        cr_assert_eq(p.status, 1, "report %zu: %s", i, p.out);
        cr_assert(strstr(p.out, "Sanitizer reports: 1"), "report %zu: %s", i, p.out);
        tu_proc_free(&p);
        free(exes);
        free(a);
        free(body);
    }
    tu_rmtree(dir);
    free(dir);
}

/* Criterion 2.4's runner process itself leaks 48 bytes now and then (every
 * frame inside libcriterion): named, not counted, and its exit status 23
 * then fails nothing. A leak with a frame of ours still fails. */
Test(runtests, a_leak_inside_criterions_runner_alone_should_not_fail_the_run)
{
    static const char runner[] =
        "==4105==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 48 byte(s) in 1 object(s) allocated from:\n"
        "    #0 0x7f179c6b83b7 in __interceptor_calloc ../../../../src/libsanitizer/asan/"
        "asan_malloc_linux.cpp:77\n"
        "    #1 0x7f179cda6332  (/lib/x86_64-linux-gnu/libcriterion.so.3+0x1a332)\n\n"
        "SUMMARY: AddressSanitizer: 48 byte(s) leaked in 1 allocation(s).\n";
    static const char ours[] =
        "==4115==ERROR: LeakSanitizer: detected memory leaks\n\n"
        "Direct leak of 7 byte(s) in 1 object(s) allocated from:\n"
        "    #0 0x7f179c6b83b7 in __interceptor_malloc asan_malloc_linux.cpp:69\n"
        "    #1 0x55d1afbc5454 in dt_xmalloc core/util.c:62\n"
        "    #2 0x7f179cda6332  (/lib/x86_64-linux-gnu/libcriterion.so.3+0x1a332)\n\n"
        "SUMMARY: AddressSanitizer: 7 byte(s) leaked in 1 allocation(s).\n";
    char *dir = tu_tmpdir();
    char *body = dt_xasprintf(PASS2 "%s[====] Synthesis: Tested: 2 | Passing: 2 | Failing: 0 | "
                                    "Crashing: 0 \n",
                              runner);
    char *a = fake_exe(dir, "test_a", body, 23);
    char *exes = dt_xasprintf("'%s'", a);
    tu_proc p = run_tests("", exes);
    cr_assert_eq(p.status, 0, "%s", p.out);
    cr_assert(strstr(p.out, "entirely inside libcriterion"), "%s", p.out);
    tu_proc_free(&p);
    free(body);
    free(a);
    body = dt_xasprintf(PASS2 "%s%s[====] Synthesis: Tested: 2 | Passing: 2 | Failing: 0 | "
                              "Crashing: 0 \n",
                        runner, ours);
    a = fake_exe(dir, "test_a", body, 23);
    p = run_tests("", exes);
    cr_assert_eq(p.status, 1, "%s", p.out);
    cr_assert(strstr(p.out, "Sanitizer reports: 1"), "%s", p.out);
    tu_proc_free(&p);
    free(exes);
    free(body);
    free(a);
    tu_rmtree(dir);
    free(dir);
}

/* An executable that dies before its synthesis is a crash, not a pass. */
Test(runtests, an_executable_without_a_synthesis_should_fail_the_run)
{
    char *dir = tu_tmpdir();
    char *a = fake_exe(dir, "test_a", "[RUN ] a::one\n", 134);
    char *exes = dt_xasprintf("'%s'", a);
    tu_proc p = run_tests("", exes);
    cr_assert_eq(p.status, 1, "%s", p.out);
    cr_assert(strstr(p.out, "test_a printed no synthesis (exit 134)"), "%s", p.out);
    cr_assert(strstr(p.out, "Crashing: 1"), "%s", p.out);
    tu_proc_free(&p);
    free(exes);
    free(a);
    tu_rmtree(dir);
    free(dir);
}
