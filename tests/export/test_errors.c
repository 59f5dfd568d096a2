/* test_errors.c -- what `ditto export` refuses, each with one clear line: an unknown
 * session, a folder that is not empty, a kernel in another format than CSR, misuse. */
#include "tests/export/extest.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void one_line(const tu_proc *p, const char *needle)
{
    ex_no_sanitizer(p);
    cr_assert(strstr(p->err, needle), "stderr lacks '%s':\n%s", needle, p->err);
    const char *nl = strchr(p->err, '\n');
    cr_assert(nl != NULL && nl[1] == '\0', "not one line:\n%s", p->err);
}

Test(export_errors, an_unknown_session_should_exit_66_naming_it)
{
    ex_fix f = ex_fixture();
    f.id = dt_xstrdup("20990101-000000-none");
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 66, "exit %d: %s", p.status, p.err);
    one_line(&p, "ditto export: no session '20990101-000000-none'");
    cr_assert(!dt_file_exists(f.out), "an output folder was made for nothing");
    tu_proc_free(&p);
    ex_fixture_free(&f);
}

Test(export_errors, a_non_empty_folder_should_be_refused_unless_forced)
{
    ex_fix f = ex_fixture();
    ex_opts o = {0};
    ex_session(&f, &o);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(f.out, &e), 0, "%s", e.msg);
    char *keep = tu_write(f.out, "notes.txt", "mine\n");
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
    one_line(&p, "is not empty (--force overwrites");
    tu_proc_free(&p);
    char *kernel = dt_xasprintf("%s/kernel.cu", f.out);
    cr_assert(!dt_file_exists(kernel), "kernel.cu written despite the refusal");

    char *forced = dt_xasprintf("%s --force", args);
    p = ex_export(&f, forced);
    ex_no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    tu_proc_free(&p);
    cr_assert(dt_file_exists(kernel));
    char *mine = dt_read_file(keep, NULL, &e);
    cr_assert_str_eq(mine, "mine\n", "--force touched a file that is not the export's");
    /* A second forced export over the first one works too. */
    p = ex_export(&f, forced);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    tu_proc_free(&p);
    free(mine);
    free(kernel);
    free(forced);
    free(args);
    free(keep);
    ex_fixture_free(&f);
}

Test(export_errors, an_output_path_that_is_a_file_should_be_refused)
{
    ex_fix f = ex_fixture();
    ex_opts o = {0};
    ex_session(&f, &o);
    char *args = dt_xasprintf("--out '%s'", f.matrix);
    tu_proc p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
    one_line(&p, "exists and is not a folder");
    tu_proc_free(&p);
    ex_fixture_free(&f);
}

/* The SpMV template with its contract's format replaced by fmt (three letters, as "csr"),
 * exported: the export must fail with one line holding needle and write nothing. */
static void refused_in_format(const char *fmt, const char *needle)
{
    ex_fix f = ex_fixture();
    char *src = ex_spmv_source(256);
    char *at = strstr(src, "\"format\": \"csr\"");
    cr_assert_not_null(at);
    cr_assert_eq(strlen(fmt), 3);
    memcpy(at + strlen("\"format\": \""), fmt, 3);
    ex_opts o = {.v = {{src, "{\"BLOCK\": 256}", 12.5}}, .nversions = 1};
    ex_session(&f, &o);
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
    one_line(&p, needle);
    cr_assert(!dt_file_exists(f.out));
    tu_proc_free(&p);
    free(src);
    ex_fixture_free(&f);
}

/* The same kernel, but its contract asks the worker for ELL, which has no rowptr. */
Test(export_errors, a_kernel_whose_format_lacks_its_arrays_should_be_refused_naming_them)
{
    refused_in_format("ell", "takes 'rowptr', which the 'ell' format does not provide (its "
                             "arrays: ell_col, ell_val)");
}

Test(export_errors, a_format_the_worker_does_not_know_should_be_refused_naming_it)
{
    refused_in_format("zzz", "building its 'zzz' format from the session's matrix: unknown "
                             "format 'zzz'");
}

/* The best needs ELL, an earlier version is CSR: the refusal names it, and
 * --version exports it. */
Test(export_errors, a_non_csr_best_should_name_the_csr_versions_and_version_should_pick_one)
{
    ex_fix f = ex_fixture();
    char *csr = ex_spmv_source(256);
    char *ell = ex_spmv_source(128);
    char *at = strstr(ell, "\"format\": \"csr\"");
    cr_assert_not_null(at);
    memcpy(at, "\"format\": \"ell\"", strlen("\"format\": \"ell\""));
    ex_opts o = {.v = {{csr, "{\"BLOCK\": 256}", 12.5}, {ell, "{\"BLOCK\": 128}", 9.0}},
                 .nversions = 2};
    ex_session(&f, &o);
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
    one_line(&p, "measured CSR versions, for --version N: v1 ");
    cr_assert(strstr(p.err, "12.50 us"), "%s", p.err);
    cr_assert(!dt_file_exists(f.out));
    tu_proc_free(&p);

    args = dt_xasprintf("--out '%s' --version 1", f.out);
    p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    char *kpath = dt_xasprintf("%s/kernel.cu", f.out);
    cr_assert(dt_file_exists(kpath));
    free(kpath);
    tu_proc_free(&p);

    args = dt_xasprintf("--out '%s' --force --version 7", f.out);
    p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 1);
    one_line(&p, "has no kernel version 7 (it has: v1");
    tu_proc_free(&p);
    free(csr);
    free(ell);
    ex_fixture_free(&f);
}

Test(export_errors, a_session_without_any_kernel_should_say_so)
{
    ex_fix f = ex_fixture();
    ex_opts o = {0};
    ex_session(&f, &o);
    /* Keep only the session's start: no step ever ran. */
    char *log = dt_xasprintf("%s/events.jsonl", f.dir);
    dt_err e = {0};
    char *text = dt_read_file(log, NULL, &e);
    cr_assert_not_null(text, "%s", e.msg);
    char *nl = strchr(text, '\n');
    cr_assert_eq(dt_write_file_atomic(log, text, (size_t)(nl - text) + 1, &e), 0, "%s", e.msg);
    char *bk = dt_xasprintf("%s/best_kernel.cu", f.dir);
    unlink(bk);
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    cr_assert_eq(p.status, 1, "exit %d: %s", p.status, p.err);
    one_line(&p, "has no kernel to export");
    tu_proc_free(&p);
    free(args);
    free(bk);
    free(text);
    free(log);
    ex_fixture_free(&f);
}

Test(export_errors, misuse_should_exit_2_and_help_should_exit_0)
{
    ex_fix f = ex_fixture();
    f.id = dt_xstrdup("x");
    tu_proc p = ex_export(&f, "");
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    ex_no_sanitizer(&p);
    cr_assert(strstr(p.err, "give the output folder with --out DIR"), "%s", p.err);
    tu_proc_free(&p);
    p = ex_export(&f, "--out /tmp/x --frobnicate");
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "unknown option '--frobnicate'"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' export --out /tmp/x", tu_ditto_bin());
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "give a session id"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' export --help", tu_ditto_bin());
    cr_assert_eq(p.status, 0);
    cr_assert(strstr(p.out, "usage: ditto export SESSION --out DIR"), "%s", p.out);
    tu_proc_free(&p);
    p = tu_run("'%s' --help", tu_ditto_bin());
    cr_assert(strstr(p.out, "  export "), "%s", p.out);
    tu_proc_free(&p);
    ex_fixture_free(&f);
}
