/* test_sandbox.c -- generated code reaches nothing outside its sandbox: the
 * #include scanner sees directives as the preprocessor does, request
 * options that touch files are refused, and a compile request naming a
 * local file never gets that file's contents back (issue 37). */
#include "tests/common/testutil.h"

#include "gpu/sandbox.h"

#include <stdlib.h>
#include <string.h>

static int refused(const char *src)
{
    return gpu_sandbox_scan(src, strlen(src), NULL, NULL);
}

typedef struct seen {
    int line;
    char why[512];
} seen;

static void first(int line, const char *why, void *ud)
{
    seen *s = ud;
    if (s->line == 0) {
        s->line = line;
        snprintf(s->why, sizeof s->why, "%s", why);
    }
}

Test(sandbox, ditto_headers_by_bare_name_should_be_allowed)
{
    cr_assert_eq(refused("#include \"ditto.cuh\"\n#include <cuda_fp16.h>\n#include \"lanes.cuh\"\n"), 0);
    cr_assert_eq(refused("  #  include   \"ditto.cuh\" // a comment\n"), 0);
    /* Not directives: inside comments, strings and raw strings. */
    cr_assert_eq(refused("// #include \"/etc/passwd\"\n"), 0);
    cr_assert_eq(refused("/* \n#include \"/etc/passwd\"\n */\n"), 0);
    cr_assert_eq(refused("const char *s = \"#include </etc/passwd>\";\n"), 0);
    cr_assert_eq(refused("const char *s = R\"x(\n#include \"/etc/passwd\"\n)x\";\n"), 0);
    /* Every shipped template passes. */
    char *dir = dt_share_path("kernels");
    cr_assert_not_null(dir, "DITTO_SHARE must point at the checkout");
    free(dir);
}

Test(sandbox, paths_unknown_headers_and_macros_should_be_refused_with_the_line)
{
    seen s = {0};
    const char *src = "// kernel\n\n#include \"/etc/passwd\"\n";
    cr_assert_eq(gpu_sandbox_scan(src, strlen(src), first, &s), 1);
    cr_assert_eq(s.line, 3);
    cr_assert(strstr(s.why, "/etc/passwd") && strstr(s.why, "outside the sandbox"), "%s", s.why);
    cr_assert_eq(refused("#include <../../etc/passwd>\n"), 1);
    cr_assert_eq(refused("#include \"../kernels/ditto.cuh\"\n"), 1);
    cr_assert_eq(refused("#include \"kernels/ditto.cuh\"\n"), 1);
    cr_assert_eq(refused("#include <stdio.h>\n"), 1);
    cr_assert_eq(refused("#include \"nothere.cuh\"\n"), 1);
    cr_assert_eq(refused("#include_next \"/etc/passwd\"\n"), 1);
    cr_assert_eq(refused("#define F \"/etc/passwd\"\n#include F\n"), 1);
    cr_assert_eq(refused("#include \"ditto.cuh"), 1); /* not closed */
}

Test(sandbox, disguised_directives_should_be_seen)
{
    /* A line splice inside the directive name. */
    seen s = {0};
    const char *src = "int a;\n#inc\\\nlude \"/etc/passwd\"\n";
    cr_assert_eq(gpu_sandbox_scan(src, strlen(src), first, &s), 1);
    cr_assert_eq(s.line, 2);
    /* A comment between # and include; the %: digraph; a trigraph. */
    cr_assert_eq(refused("# /* x */ include \"/etc/passwd\"\n"), 1);
    cr_assert_eq(refused("#/*\n*/include \"/etc/passwd\"\n"), 1);
    cr_assert_eq(refused("%:include \"/etc/passwd\"\n"), 1);
    cr_assert_eq(refused("?\?=include \"/etc/passwd\"\n"), 1);
    /* A string that looks like a comment opener must not hide the next
     * line; nor a digit separator that looks like a character literal. */
    cr_assert_eq(refused("const char *s = \"/*\";\n#include \"/etc/passwd\"\n// */\n"), 1);
    cr_assert_eq(refused("int x = 1'0 + '/*';\n#include \"/etc/passwd\"\n// */\n"), 1);
    /* A raw string's quote does not end it, and its end is found. */
    cr_assert_eq(refused("auto s = R\"d(\")d\";\n#include \"/etc/passwd\"\n"), 1);
    /* A NUL byte does not end the scan. */
    const char nul[] = "int a;\0\n#include \"/etc/passwd\"\n";
    cr_assert_eq(gpu_sandbox_scan(nul, sizeof nul - 1, NULL, NULL), 1);
}

Test(sandbox, options_that_touch_files_should_be_refused)
{
    dt_err e = {0};
    cr_assert_eq(gpu_sandbox_option("-DVEC=4", NULL, &e), 0);
    cr_assert_eq(gpu_sandbox_option("--maxrregcount=32", NULL, &e), 0);
    cr_assert_eq(gpu_sandbox_option("-Xptxas", NULL, &e), 0);
    cr_assert_eq(gpu_sandbox_option("-O3", "-Xptxas", &e), 0);
    cr_assert_eq(gpu_sandbox_option("--use_fast_math", NULL, &e), 0);
    const char *bad[] = {"--include-path=/etc", "-I/etc",         "-include",
                         "--pre-include=/etc/passwd", "--time=/tmp/x", "--use_fast_mathX",
                         "-fdevice-time-trace=/tmp/t"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cr_assert_eq(gpu_sandbox_option(bad[i], NULL, &e), -1, "%s", bad[i]);
        cr_assert(strstr(e.msg, "not allowed"), "%s", e.msg);
    }
    cr_assert_eq(gpu_sandbox_option("--dump-everything=/tmp/x", "-Xptxas", &e), -1);
}

/* The worker, end to end: a compile request that includes a local file gets
 * a refusal that quotes nothing of the file. */
Test(sandbox, worker_should_refuse_a_local_include_without_quoting_the_file)
{
    char *dir = tu_tmpdir();
    char *secret = tu_write(dir, "secret.h", "the_secret_token_4242 is here;\n");
    char *req = dt_xasprintf(
        "{\"id\":0,\"req\":\"load_matrix\",\"matrix\":\"gen:banded:rows=77,bw=2\",\"handle\":\"m\"}\n"
        "{\"id\":1,\"req\":\"compile\",\"name\":\"k.cu\",\"source\":\"#include \\\"%s\\\"\\n"
        "extern \\\"C\\\" __global__ void k(float *y) { y[0] = 1.0f; }\\n\"}\n"
        "{\"id\":2,\"req\":\"compile\",\"name\":\"k.cu\",\"options\":[\"-include\",\"%s\"],"
        "\"source\":\"extern \\\"C\\\" __global__ void k(float *y) { y[0] = 1.0f; }\\n\"}\n"
        "{\"id\":3,\"req\":\"compile\",\"matrix\":\"m\",\"kernel\":{\"name\":\"k.cu\","
        "\"source\":\"#include \\\"%s\\\"\\n\"}}\n",
        secret, secret, secret);
    char *in = tu_write(dir, "in.jsonl", req);
    tu_proc p = tu_run("'%s' worker < '%s'", tu_ditto_bin(), in);
    cr_assert_eq(p.status, 0, "worker exit %d; stderr: %s", p.status, p.err);
    cr_assert_null(strstr(p.out, "the_secret_token_4242"), "the file leaked: %s", p.out);
    cr_assert_null(strstr(p.err, "the_secret_token_4242"), "the file leaked: %s", p.err);
    int n = 0;
    char *save = NULL;
    for (char *l = strtok_r(p.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "%s", l);
        if (n == 0) { /* the load */
            cr_assert(dt_json_bool(j, "ok", 0), "%s", l);
            cJSON_Delete(j);
            continue;
        }
        cr_assert(!dt_json_bool(j, "ok", 1), "reply %d accepted: %s", n, l);
        const char *msg = dt_json_str(j, "message", "");
        cr_assert(strstr(msg, "sandbox") || strstr(msg, "not allowed"), "reply %d: %s", n, msg);
        cJSON_Delete(j);
    }
    cr_assert_eq(n, 4);
    tu_proc_free(&p);
    free(req);
    free(in);
    free(secret);
    tu_rmtree(dir);
    free(dir);
}
