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
    cr_assert_eq(
        refused("#include \"ditto.cuh\"\n#include <cuda_fp16.h>\n#include \"lanes.cuh\"\n"), 0);
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
    const char *bad[] = {"--include-path=/etc",       "-I/etc",        "-include",
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
        "{\"id\":0,\"req\":\"load_matrix\",\"matrix\":\"gen:banded:rows=77,bw=2\",\"handle\":\"m\"}"
        "\n"
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

/* Run one worker on the request lines in text; returns its stdout (caller
 * frees) and checks it exited 0. */
static char *worker_out(const char *text)
{
    char *dir = tu_tmpdir();
    char *in = tu_write(dir, "in.jsonl", text);
    tu_proc p = tu_run("'%s' worker < '%s'", tu_ditto_bin(), in);
    cr_assert_eq(p.status, 0, "worker exit %d; stderr: %.2000s", p.status, p.err);
    char *out = p.out;
    p.out = NULL;
    tu_proc_free(&p);
    free(in);
    tu_rmtree(dir);
    free(dir);
    return out;
}

/* issue 37: a 6 MB one-line source gave a 1.2 GB reply (every diagnostic
 * quoted the whole line) and 12 MB aborted the worker. */
Test(sandbox, compile_answers_should_stay_small_whatever_the_source, .timeout = 120)
{
    dt_buf src = DT_BUF_INIT, req = DT_BUF_INIT;
    dt_buf_puts(&src, "extern \\\"C\\\" __global__ void k(float *y) {\\n");
    for (int i = 0; i < 70000; i++)
        dt_buf_puts(&src, "x = = ;");
    dt_buf_puts(&src, "\\n}\\n");
    dt_buf_printf(&req, "{\"id\":1,\"req\":\"compile\",\"name\":\"k.cu\",\"source\":\"%s\"}\n",
                  src.data);
    /* Over the 1 MiB a source may have: refused with a message. */
    dt_buf_printf(&req, "{\"id\":2,\"req\":\"compile\",\"source\":\"");
    for (int i = 0; i < (1 << 20) / 8 + 1; i++)
        dt_buf_puts(&req, "int a;  ");
    dt_buf_puts(&req, "\"}\n");
    char *out = worker_out(req.data);
    char *nl = strchr(out, '\n');
    cr_assert_not_null(nl);
    *nl = '\0';
    cJSON *a = cJSON_Parse(out), *b = cJSON_Parse(nl + 1);
    cr_assert_not_null(a);
    cr_assert_not_null(b);
    cr_assert_str_eq(dt_json_str(b, "error", ""), "bad_request");
    cr_assert(strstr(dt_json_str(b, "message", ""),
                     "$.source: expected at most 1048576 bytes, got 1048584"),
              "%s", dt_json_str(b, "message", ""));
    if (dt_streq(dt_json_str(a, "error", ""), "compile_failed")) {
        cJSON_Delete(a);
        cJSON_Delete(b);
        free(out);
        dt_buf_free(&src);
        dt_buf_free(&req);
        cr_skip_test("NVRTC not available here");
    }
    cr_assert(!dt_json_bool(a, "compiled", 1));
    cr_assert_lt(strlen(out), 256 * 1024, "a compile answer of %zu bytes", strlen(out));
    const cJSON *diags = cJSON_GetObjectItem(a, "diagnostics");
    cr_assert_leq(cJSON_GetArraySize(diags), 101);
    const cJSON *d;
    cJSON_ArrayForEach(d, diags) cr_assert_leq(strlen(dt_json_str(d, "source_line", "")), 450);
    cJSON_Delete(a);
    cJSON_Delete(b);
    free(out);
    dt_buf_free(&src);
    dt_buf_free(&req);
}

Test(sandbox, replies_should_be_valid_utf8_and_long_lines_refused)
{
    /* An unknown request name and an id, both with bytes that are not
     * UTF-8: the reply echoes them. */
    dt_buf req = DT_BUF_INIT;
    dt_buf_puts(&req, "{\"id\":\"a\xff\xfe\",\"req\":\"he\xc0\xafllo\"}\n");
    dt_buf_puts(&req, "{\"id\":2,\"req\":\"hello\",\"pad\":\"");
    for (size_t i = 0; i < ((size_t)16 << 20) / 16 + 16; i++)
        dt_buf_puts(&req, "0123456789abcdef");
    dt_buf_puts(&req, "\"}\n{\"id\":3,\"req\":\"hello\"}\n");
    char *out = worker_out(req.data);
    char *bad = dt_utf8_fix(out, strlen(out));
    cr_assert_null(bad, "a reply that is not UTF-8: %.300s", out);
    char *save = NULL;
    int n = 0;
    for (char *l = strtok_r(out, "\n", &save); l; l = strtok_r(NULL, "\n", &save), n++) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "%.300s", l);
        if (n == 0)
            cr_assert(strstr(dt_json_str(j, "message", ""), "unknown request"), "%s", l);
        if (n == 1) {
            cr_assert_str_eq(dt_json_str(j, "error", ""), "bad_request");
            cr_assert(strstr(dt_json_str(j, "message", ""), "request line over 16777216 bytes"),
                      "%.300s", l);
        }
        if (n == 2)
            cr_assert(dt_json_bool(j, "ok", 0), "the worker did not carry on: %s", l);
        cJSON_Delete(j);
    }
    cr_assert_eq(n, 3);
    free(out);
    dt_buf_free(&req);
}
