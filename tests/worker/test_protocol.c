/* test_protocol.c -- the worker protocol on real `ditto worker` processes,
 * no GPU needed: hello, load, compile, reference, and every error answer. */
#include "tests/common/testutil.h"

#include "gpu/ship.h"

#include <stdlib.h>
#include <string.h>

/* Feed request lines to a fresh worker; return its reply lines parsed. */
static cJSON *talk(const char *lines, int *nreplies)
{
    char *dir = tu_tmpdir();
    char *f = tu_write(dir, "in.jsonl", lines);
    tu_proc p = tu_run("'%s' worker < '%s'", tu_ditto_bin(), f);
    cr_assert_eq(p.status, 0, "worker exit %d; stderr: %s", p.status, p.err);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *l = strtok_r(p.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "not JSON: %s", l);
        cJSON_AddItemToArray(arr, j);
    }
    *nreplies = cJSON_GetArraySize(arr);
    tu_proc_free(&p);
    free(f);
    tu_rmtree(dir);
    free(dir);
    return arr;
}

Test(protocol, hello_should_describe_the_device_or_say_why_there_is_none)
{
    int n;
    cJSON *r = talk("{\"id\":1,\"req\":\"hello\"}\n", &n);
    cr_assert_eq(n, 1);
    cJSON *h = cJSON_GetArrayItem(r, 0);
    cr_assert(dt_json_bool(h, "ok", 0));
    cr_assert_eq(dt_json_num(h, "id", 0), 1);
    cr_assert_eq(dt_json_num(h, "protocol", 0), 1);
    const cJSON *d = cJSON_GetObjectItem(h, "device");
    const cJSON *libs = cJSON_GetObjectItem(h, "libs");
    cr_assert_not_null(cJSON_GetObjectItem(libs, "cuda"));
    cr_assert_not_null(cJSON_GetObjectItem(libs, "nvrtc"));
    cr_assert_not_null(cJSON_GetObjectItem(libs, "cusparse"));
    cr_assert_not_null(cJSON_GetObjectItem(libs, "cupti"));
    if (!dt_json_bool(d, "present", 0)) {
        cr_assert(strlen(dt_json_str(d, "reason", "")) > 0, "no reason given");
        /* Without a device only the CPU capabilities are offered. */
        char *caps = cJSON_PrintUnformatted(cJSON_GetObjectItem(h, "capabilities"));
        cr_assert(strstr(caps, "load_matrix") && !strstr(caps, "verify"), "%s", caps);
        free(caps);
    }
    cJSON_Delete(r);
}

Test(protocol, load_matrix_should_answer_the_pattern_report)
{
    int n;
    cJSON *r = talk("{\"id\":\"a\",\"req\":\"load_matrix\",\"matrix\":\"gen:stencil5:rows=10000\","
                    "\"handle\":\"m1\"}\n",
                    &n);
    cJSON *h = cJSON_GetArrayItem(r, 0);
    cr_assert(dt_json_bool(h, "ok", 0), "%s", dt_json_str(h, "message", ""));
    cr_assert_str_eq(dt_json_str(h, "id", ""), "a");
    cr_assert_str_eq(dt_json_str(h, "handle", ""), "m1");
    const cJSON *rep = cJSON_GetObjectItem(h, "report");
    cr_assert_eq(dt_json_num(rep, "rows", 0), 10000);
    cr_assert_eq(dt_json_num(rep, "nnz", 0), 5 * 10000 - 4 * 100);
    cr_assert_eq(strlen(dt_json_str(h, "fingerprint", "")), 16);
    cJSON_Delete(r);
}

Test(protocol, bad_lines_should_get_errors_and_the_worker_should_carry_on)
{
    int n;
    cJSON *r = talk("this is not json\n"
                    "{\"id\":2,\"req\":\"frobnicate\"}\n"
                    "{\"id\":3}\n"
                    "{\"id\":4,\"req\":\"load_matrix\"}\n"
                    "{\"id\":5,\"req\":\"load_matrix\",\"matrix\":\"/nonexistent.mtx\"}\n"
                    "{\"id\":6,\"req\":\"verify\",\"matrix\":\"nope\"}\n"
                    "{\"id\":7,\"req\":\"hello\"}\n",
                    &n);
    cr_assert_eq(n, 7);
    const char *codes[] = {"bad_request", "bad_request", "bad_request", "bad_request",
                           "load_failed", "not_found"};
    for (int i = 0; i < 6; i++) {
        cJSON *h = cJSON_GetArrayItem(r, i);
        cr_assert(!dt_json_bool(h, "ok", 1));
        cr_assert_str_eq(dt_json_str(h, "error", ""), codes[i], "reply %d: %s", i,
                         dt_json_str(h, "message", ""));
        cr_assert(strlen(dt_json_str(h, "message", "")) > 0);
    }
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(cJSON_GetArrayItem(r, 0), "id")));
    cr_assert(strstr(dt_json_str(cJSON_GetArrayItem(r, 1), "message", ""), "frobnicate"));
    cr_assert(strstr(dt_json_str(cJSON_GetArrayItem(r, 4), "message", ""), "/nonexistent.mtx"));
    cr_assert(dt_json_bool(cJSON_GetArrayItem(r, 6), "ok", 0));
    cJSON_Delete(r);
}

Test(protocol, gpu_requests_without_a_device_should_answer_no_device)
{
    int n;
    cJSON *r = talk("{\"id\":1,\"req\":\"hello\"}\n"
                    "{\"id\":2,\"req\":\"load_matrix\",\"matrix\":\"gen:uniform:rows=100,nnz=500\","
                    "\"handle\":\"m\"}\n"
                    "{\"id\":3,\"req\":\"verify\",\"matrix\":\"m\",\"kernel\":{\"source\":\"x\"}}\n"
                    "{\"id\":4,\"req\":\"baseline\",\"matrix\":\"m\"}\n"
                    "{\"id\":5,\"req\":\"calibrate\"}\n",
                    &n);
    cr_assert_eq(n, 5);
    if (dt_json_bool(cJSON_GetObjectItem(cJSON_GetArrayItem(r, 0), "device"), "present", 0)) {
        cJSON_Delete(r);
        cr_skip_test("a GPU is present: the no-device answers do not apply");
    }
    for (int i = 2; i < 5; i++) {
        cJSON *h = cJSON_GetArrayItem(r, i);
        cr_assert_str_eq(dt_json_str(h, "error", ""), "no_device", "reply %d: %s %s", i,
                         dt_json_str(h, "error", ""), dt_json_str(h, "message", ""));
    }
    cJSON_Delete(r);
}

Test(protocol, reference_should_work_without_a_gpu_and_depend_on_the_seed)
{
    int n;
    cJSON *r = talk("{\"id\":1,\"req\":\"load_matrix\",\"matrix\":\"gen:uniform:rows=500,nnz=5000\","
                    "\"handle\":\"m\"}\n"
                    "{\"id\":2,\"req\":\"reference\",\"matrix\":\"m\",\"op\":\"spmv\",\"seed\":1}\n"
                    "{\"id\":3,\"req\":\"reference\",\"matrix\":\"m\",\"op\":\"spmv\",\"seed\":1}\n"
                    "{\"id\":4,\"req\":\"reference\",\"matrix\":\"m\",\"op\":\"spmv\",\"seed\":2}\n"
                    "{\"id\":5,\"req\":\"reference\",\"matrix\":\"m\",\"op\":\"spmm\",\"n\":8}\n",
                    &n);
    cr_assert_eq(n, 5);
    double a = dt_json_num(cJSON_GetArrayItem(r, 1), "norm2", 0);
    double b = dt_json_num(cJSON_GetArrayItem(r, 2), "norm2", 0);
    double c = dt_json_num(cJSON_GetArrayItem(r, 3), "norm2", 0);
    cr_assert(a > 0);
    cr_assert_eq(a, b);
    cr_assert_neq(a, c);
    cr_assert_eq(dt_json_num(cJSON_GetArrayItem(r, 4), "outputs", 0), 500 * 8);
    cJSON_Delete(r);
}

Test(protocol, compile_should_answer_diagnostics_and_resources)
{
    int n;
    cJSON *r = talk("{\"id\":1,\"req\":\"compile\",\"name\":\"k.cu\",\"source\":\"extern \\\"C\\\" "
                    "__global__ void k(float *y) { y[threadIdx.x] = 1.0f; }\\n\"}\n"
                    "{\"id\":2,\"req\":\"compile\",\"name\":\"bad.cu\",\"source\":\"extern \\\"C\\\" "
                    "__global__ void k(float *y) {\\n  y[0] = undefined_thing;\\n}\\n\"}\n",
                    &n);
    cr_assert_eq(n, 2);
    cJSON *good = cJSON_GetArrayItem(r, 0), *bad = cJSON_GetArrayItem(r, 1);
    if (!dt_json_bool(good, "ok", 0) &&
        dt_streq(dt_json_str(good, "error", ""), "compile_failed")) {
        cJSON_Delete(r);
        cr_skip_test("NVRTC not available here");
    }
    cr_assert(dt_json_bool(good, "compiled", 0), "%s", dt_json_str(good, "log", ""));
    cr_assert_str_eq(dt_json_str(good, "arch", ""), "sm_90");
    cr_assert_not_null(dt_json_str(good, "cubin", NULL));
    const cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(good, "kernels"), 0);
    cr_assert_gt(dt_json_num(k, "registers", 0), 0);
    cr_assert(dt_json_bool(bad, "ok", 0));
    cr_assert(!dt_json_bool(bad, "compiled", 1));
    const cJSON *d = cJSON_GetArrayItem(cJSON_GetObjectItem(bad, "diagnostics"), 0);
    cr_assert_eq(dt_json_num(d, "line", 0), 2);
    cr_assert_str_eq(dt_json_str(d, "file", ""), "bad.cu");
    cr_assert(strstr(dt_json_str(d, "message", ""), "undefined_thing"));
    cr_assert(strstr(dt_json_str(d, "source_line", ""), "undefined_thing"));
    cJSON_Delete(r);
}

Test(protocol, compile_for_a_matrix_should_bake_in_the_contract_defines)
{
    /* The define ROWS comes from the matrix: a static_assert proves it. */
    int n;
    cJSON *r = talk(
        "{\"id\":1,\"req\":\"load_matrix\",\"matrix\":\"gen:banded:rows=777,bw=2\",\"handle\":\"m\"}\n"
        "{\"id\":2,\"req\":\"compile\",\"matrix\":\"m\",\"op\":\"spmv\",\"kernel\":{\"name\":\"k.cu\","
        "\"source\":\"/*@contract {\\\"entry\\\": \\\"k\\\", \\\"params\\\": [\\\"y\\\"], "
        "\\\"block\\\": [32], \\\"grid\\\": [1], \\\"defines\\\": {\\\"ROWS\\\": \\\"rows\\\"}} @*/\\n"
        "static_assert(ROWS == 777, \\\"rows\\\");\\n"
        "extern \\\"C\\\" __global__ void k(DITTO_T *y) { y[0] = (DITTO_T)ROWS; }\\n\"}}\n",
        &n);
    cr_assert_eq(n, 2);
    cJSON *c = cJSON_GetArrayItem(r, 1);
    if (dt_streq(dt_json_str(c, "error", ""), "compile_failed")) {
        cJSON_Delete(r);
        cr_skip_test("NVRTC not available here");
    }
    cr_assert(dt_json_bool(c, "ok", 0), "%s", dt_json_str(c, "message", ""));
    cr_assert(dt_json_bool(c, "compiled", 0), "%s", dt_json_str(c, "log", ""));
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(c, "contract"), "entry", ""), "k");
    cJSON_Delete(r);
}

/* ---- shipping files: blob_begin, blob_chunk, blob_end ----------------------------------- */

/* talk() with the worker's store in a folder of its own; *store gets it. */
static cJSON *talk_store(const char *lines, int *nreplies, char **store)
{
    char *dir = tu_tmpdir();
    char *f = tu_write(dir, "in.jsonl", lines);
    tu_proc p = tu_run("XDG_CACHE_HOME='%s/cache' '%s' worker < '%s'", dir, tu_ditto_bin(), f);
    cr_assert_eq(p.status, 0, "worker exit %d; stderr: %s", p.status, p.err);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *l = strtok_r(p.out, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "not JSON: %s", l);
        cJSON_AddItemToArray(arr, j);
    }
    *nreplies = cJSON_GetArraySize(arr);
    tu_proc_free(&p);
    free(f);
    *store = dir;
    return arr;
}

/* "%%MatrixMarket ..." of a 2 x 2 diagonal: its bytes, base64 and hash. */
static const char tiny_mtx[] =
    "%%MatrixMarket matrix coordinate real general\n2 2 2\n1 1 1.5\n2 2 2.5\n";

static char *tiny_hash(void)
{
    char hex[17];
    dt_hash_hex(dt_hash64(tiny_mtx, strlen(tiny_mtx), DT_HASH_SEED), hex);
    return dt_xstrdup(hex);
}

Test(protocol, a_shipped_file_should_be_stored_under_its_hash_and_load_from_there)
{
    char *h = tiny_hash();
    /* Two chunks, the first of 30 bytes (whole base64 groups, no padding). */
    char *b1 = ship_b64_encode(tiny_mtx, 30);
    char *b2 = ship_b64_encode(tiny_mtx + 30, strlen(tiny_mtx) - 30);
    char *lines = dt_xasprintf(
        "{\"id\":1,\"req\":\"blob_begin\",\"hash\":\"%s\",\"name\":\"t.mtx\",\"bytes\":%zu}\n"
        "{\"id\":2,\"req\":\"blob_chunk\",\"hash\":\"%s\",\"offset\":0,\"data\":\"%s\"}\n"
        "{\"id\":3,\"req\":\"blob_chunk\",\"hash\":\"%s\",\"offset\":30,\"data\":\"%s\"}\n"
        "{\"id\":4,\"req\":\"blob_end\",\"hash\":\"%s\"}\n"
        "{\"id\":5,\"req\":\"load_matrix\",\"matrix\":\"/not/here/t.mtx\",\"blob\":\"%s/t.mtx\"}\n"
        "{\"id\":6,\"req\":\"blob_begin\",\"hash\":\"%s\",\"name\":\"t.mtx\",\"bytes\":%zu}\n"
        "{\"id\":7,\"req\":\"load_matrix\",\"matrix\":\"/not/here/t.mtx\"}\n",
        h, strlen(tiny_mtx), h, b1, h, b2, h, h, h, strlen(tiny_mtx));
    int n;
    char *store;
    cJSON *r = talk_store(lines, &n, &store);
    cr_assert_eq(n, 7);
    for (int i = 0; i < 6; i++)
        cr_assert(dt_json_bool(cJSON_GetArrayItem(r, i), "ok", 0), "reply %d: %s", i + 1,
                  dt_json_str(cJSON_GetArrayItem(r, i), "message", ""));
    cr_assert_not(dt_json_bool(cJSON_GetArrayItem(r, 0), "have", 1));
    cr_assert_eq(dt_json_num(cJSON_GetArrayItem(r, 2), "received", 0), (double)strlen(tiny_mtx));
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(cJSON_GetArrayItem(r, 4), "report"), "nnz", 0), 2);
    /* The second transfer of the same bytes is not needed. */
    cr_assert(dt_json_bool(cJSON_GetArrayItem(r, 5), "have", 0));
    /* A path the worker cannot see is said apart from a bad file. */
    const cJSON *miss = cJSON_GetArrayItem(r, 6);
    cr_assert_str_eq(dt_json_str(miss, "error", ""), "load_failed");
    cr_assert(dt_json_bool(miss, "path_missing", 0));
    char *stored = dt_xasprintf("%s/cache/ditto/blob/%s/t.mtx", store, h);
    size_t len = 0;
    char *copy = dt_read_file(stored, &len, NULL);
    cr_assert(copy && len == strlen(tiny_mtx) && memcmp(copy, tiny_mtx, len) == 0);
    free(copy);
    free(stored);
    cJSON_Delete(r);
    tu_rmtree(store);
    free(store);
    free(lines);
    free(b1);
    free(b2);
    free(h);
}

Test(protocol, a_corrupted_or_malformed_transfer_should_be_refused_and_leave_nothing_stored)
{
    char *h = tiny_hash();
    /* The right length, one byte changed. */
    char *bad = dt_xstrdup(tiny_mtx);
    bad[50] = bad[50] == '1' ? '7' : '1';
    char *bb = ship_b64_encode(bad, strlen(bad));
    char *good = ship_b64_encode(tiny_mtx, strlen(tiny_mtx));
    char *lines = dt_xasprintf(
        "{\"id\":1,\"req\":\"blob_begin\",\"hash\":\"%s\",\"name\":\"t.mtx\",\"bytes\":%zu}\n"
        "{\"id\":2,\"req\":\"blob_chunk\",\"hash\":\"%s\",\"offset\":5,\"data\":\"%s\"}\n"
        "{\"id\":3,\"req\":\"blob_chunk\",\"hash\":\"%s\",\"offset\":0,\"data\":\"not*base64\"}\n"
        "{\"id\":4,\"req\":\"blob_chunk\",\"hash\":\"%s\",\"offset\":0,\"data\":\"%s\"}\n"
        "{\"id\":5,\"req\":\"blob_end\",\"hash\":\"%s\"}\n"
        "{\"id\":6,\"req\":\"blob_begin\",\"hash\":\"%s\",\"name\":\"../evil\",\"bytes\":3}\n"
        "{\"id\":7,\"req\":\"blob_begin\",\"hash\":\"XYZ\",\"name\":\"t.mtx\",\"bytes\":3}\n"
        "{\"id\":8,\"req\":\"blob_begin\",\"hash\":\"%s\",\"name\":\"t.mtx\",\"bytes\":3}\n"
        "{\"id\":9,\"req\":\"blob_chunk\",\"hash\":\"%s\",\"offset\":0,\"data\":\"%s\"}\n"
        "{\"id\":10,\"req\":\"load_matrix\",\"matrix\":\"x\",\"blob\":\"%s/t.mtx\"}\n",
        h, strlen(tiny_mtx), h, good, h, h, bb, h, h, h, h, good, h);
    int n;
    char *store;
    cJSON *r = talk_store(lines, &n, &store);
    cr_assert_eq(n, 10);
    const char *want[] = {NULL,
                          "offset: expected 0",
                          "data: not base64",
                          NULL,
                          "hash to",
                          "name: expected a plain file name",
                          "hash: expected 16",
                          NULL,
                          "bytes past the 3 announced",
                          "holds no such file"};
    for (int i = 0; i < 10; i++) {
        const cJSON *x = cJSON_GetArrayItem(r, i);
        if (want[i] == NULL) {
            cr_assert(dt_json_bool(x, "ok", 0), "reply %d: %s", i + 1,
                      dt_json_str(x, "message", ""));
        } else {
            cr_assert_not(dt_json_bool(x, "ok", 1), "reply %d passed", i + 1);
            cr_assert(strstr(dt_json_str(x, "message", ""), want[i]), "reply %d: %s", i + 1,
                      dt_json_str(x, "message", ""));
        }
    }
    /* Nothing stored, no part file left behind. */
    char *d = dt_xasprintf("%s/cache/ditto/blob/%s", store, h);
    tu_proc ls = tu_run("ls -A '%s'", d);
    cr_assert_str_eq(ls.out, "", "%s", ls.out);
    tu_proc_free(&ls);
    free(d);
    cJSON_Delete(r);
    tu_rmtree(store);
    free(store);
    free(lines);
    free(bb);
    free(good);
    free(bad);
    free(h);
}

Test(protocol, base64_should_round_trip_every_length_and_refuse_bad_input)
{
    unsigned char in[64], out[64];
    for (int i = 0; i < 64; i++)
        in[i] = (unsigned char)(i * 37 + 11);
    for (size_t n = 0; n <= 64; n++) {
        char *s = ship_b64_encode(in, n);
        cr_assert_eq(strlen(s), 4 * ((n + 2) / 3));
        long got = ship_b64_decode(s, strlen(s), out, sizeof out);
        cr_assert_eq(got, (long)n);
        cr_assert(memcmp(in, out, n) == 0);
        if (n > 0)
            cr_assert_eq(ship_b64_decode(s, strlen(s), out, n - 1), -1, "no room must be refused");
        free(s);
    }
    cr_assert_eq(ship_b64_decode("QUJD=", 5, out, sizeof out), -1);
    cr_assert_eq(ship_b64_decode("Q=JD", 4, out, sizeof out), -1);
    cr_assert_eq(ship_b64_decode("QU=D", 4, out, sizeof out), -1);
    cr_assert_eq(ship_b64_decode("QUJDQQ==QUJD", 12, out, sizeof out), -1);
}

/* issue 39: every request field is checked by one schema walker, with its
 * path and what was expected: no lenient default for a wrong value. */
Test(protocol, malformed_request_fields_should_be_refused_with_their_path)
{
    int n;
    cJSON *r = talk("{\"id\":1,\"req\":3}\n"
                    "{\"id\":2,\"req\":\"load_matrix\",\"matrix\":\"gen:uniform:rows=10,nnz=20\","
                    "\"n\":1e30}\n"
                    "{\"id\":3,\"req\":\"load_matrix\",\"matrix\":\"gen:uniform:rows=10,nnz=20\","
                    "\"handle\":\"m\",\"allow_nonfinite\":\"yes\"}\n"
                    "{\"id\":4,\"req\":\"compile\",\"name\":\"k.cu\"}\n"
                    "{\"id\":5,\"req\":\"compile\",\"source\":\"x\",\"options\":[\"-DA=1\",7]}\n"
                    "{\"id\":6,\"req\":\"verify\",\"matrix\":\"m\",\"sets\":0}\n"
                    "{\"id\":7,\"req\":\"reference\",\"matrix\":\"m\",\"op\":\"spgemm\"}\n"
                    "{\"id\":8,\"req\":\"reference\",\"matrix\":\"m\",\"op\":\"sddmm\","
                    "\"epilogue\":\"bias\"}\n"
                    "{\"id\":9,\"req\":\"reference\",\"matrix\":\"m\",\"seed\":-1}\n"
                    "{\"id\":10,\"req\":\"compile\",\"kernel\":{\"source\":\"x\","
                    "\"params\":{\"B\":2.5}}}\n"
                    "{\"id\":11,\"req\":\"unload\"}\n",
                    &n);
    cr_assert_eq(n, 11);
    static const char *const want[] = {
        "$.req: expected a request name, got 3",
        "$.n: expected an integer from 1 to 65536, got 1e+30",
        "$.allow_nonfinite: expected true or false, got \"yes\"",
        "$.source: expected a CUDA source (or a kernel object in $.kernel), got nothing",
        "$.options[1]: expected a non-empty string of at most 4096 characters, got 7",
        "$.sets: expected an integer from 1 to 128, got 0",
        "$.op: expected one of spmv, spmm, sddmm, got \"spgemm\"",
        "$.epilogue: expected none, relu or gelu for sddmm, got \"bias\"",
        "$.seed: expected an integer from 0 to 9007199254740992, got -1",
        "$.kernel.params.B: expected an integer, got 2.5",
        "$.handle: expected a non-empty string of at most 255 characters, got nothing",
    };
    for (int i = 0; i < n; i++) {
        const cJSON *h = cJSON_GetArrayItem(r, i);
        cr_assert_str_eq(dt_json_str(h, "error", ""), "bad_request", "reply %d: %s", i + 1,
                         dt_json_str(h, "message", ""));
        cr_assert_str_eq(dt_json_str(h, "message", ""), want[i], "reply %d", i + 1);
    }
    cJSON_Delete(r);
}
