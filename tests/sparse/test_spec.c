/* test_spec.c -- problem spec validation: every problem with its JSON path. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int parse(const char *text, sp_spec *s, dt_buf *p)
{
    dt_err e = {0};
    cJSON *j = dt_json_parse(text, strlen(text), "t.json", &e);
    cr_assert_not_null(j, "%s", e.msg);
    sp_spec_init(s);
    int rc = sp_spec_from_json(s, j, "t.json", p);
    cJSON_Delete(j);
    return rc;
}

Test(spec, minimal_spec_should_take_the_defaults)
{
    sp_spec s;
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(parse("{\"matrix\": \"gen:uniform:rows=100,nnz=1000\"}", &s, &p), 0, "%s",
                 dt_buf_str(&p));
    cr_assert_eq(s.op, SP_SPMV);
    cr_assert_eq(s.dtype, SP_FP32);
    cr_assert_eq(s.n, 32);
    cr_assert_str_eq(s.gpu, "auto");
    cr_assert_str_eq(s.backend, "expert");
    cr_assert_str_eq(s.review, "ask");
    cJSON *j = sp_spec_json(&s);
    cr_assert_str_eq(dt_json_str(j, "matrix", ""), "gen:uniform:rows=100,nnz=1000");
    cJSON_Delete(j);
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

Test(spec, every_problem_should_be_reported_at_once_with_its_path)
{
    sp_spec s;
    dt_buf p = DT_BUF_INIT;
    const char *text = "{\"op\": \"spgemm\", \"dtype\": \"fp8\", \"n\": 0, \"alpha\": \"x\","
                       " \"review\": {\"plan\": \"ask\", \"cook\": \"auto\"}, \"colour\": 1}";
    cr_assert_eq(parse(text, &s, &p), -1);
    const char *out = dt_buf_str(&p);
    cr_assert(strstr(out, "t.json: $.op: expected one of spmv, spmm, sddmm, got \"spgemm\""),
              "%s", out);
    cr_assert(strstr(out, "$.dtype: expected one of fp32, fp64, fp16, bf16, got \"fp8\""), "%s",
              out);
    cr_assert(strstr(out, "$.n: expected an integer from 1 to 65536, got 0"), "%s", out);
    cr_assert(strstr(out, "$.alpha: expected a finite number, got \"x\""), "%s", out);
    cr_assert(strstr(out, "$.review.cook: expected one of the keys profile, plan, check, "
                          "generate, compile, verify, measure, tune, learn, got an unknown key"),
              "%s", out);
    cr_assert(strstr(out, "$.colour: expected one of the keys op, matrix, dtype"), "%s", out);
    cr_assert(strstr(out, "$.matrix: expected a .mtx/.smtx path or a generator such as "
                          "\"gen:rmat:rows=1M,nnz=16M\", got nothing"),
              "%s", out);
    int lines = 0;
    for (const char *c = out; *c; c++)
        lines += *c == '\n';
    cr_assert_eq(lines, 7, "%s", out);
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

Test(spec, review_map_should_be_kept)
{
    sp_spec s;
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(parse("{\"matrix\": \"a.mtx\", \"op\": \"spmm\", \"n\": 128,"
                       " \"review\": {\"plan\": \"ask\", \"generate\": \"ask\"}}",
                       &s, &p),
                 0, "%s", dt_buf_str(&p));
    cr_assert_eq(s.n, 128);
    cr_assert_str_eq(s.review, "map");
    cr_assert_str_eq(dt_json_str(s.review_map, "plan", ""), "ask");
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

Test(spec, missing_file_and_bad_json_should_say_where)
{
    sp_spec s;
    sp_spec_init(&s);
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(sp_spec_load(&s, "/nonexistent/spec.json", &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "/nonexistent/spec.json") != NULL);
    dt_buf_reset(&p);
    char *dir = tu_tmpdir();
    char *f = tu_write(dir, "bad.json", "{\"op\": \"spmv\",\n \"matrix\": }");
    cr_assert_eq(sp_spec_load(&s, f, &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "bad.json:2:") != NULL, "%s", dt_buf_str(&p));
    free(f);
    tu_rmtree(dir);
    free(dir);
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

/* issue 37: a spec of /dev/zero read without bound; a huge SDDMM K
 * compiled for minutes. */
Test(spec, special_files_and_oversized_specs_should_be_refused_at_once, .timeout = 10)
{
    sp_spec s;
    sp_spec_init(&s);
    dt_buf p = DT_BUF_INIT;
    double t0 = dt_now();
    cr_assert_eq(sp_spec_load(&s, "/dev/zero", &p), -1);
    cr_assert_lt(dt_now() - t0, 1.0);
    cr_assert(strstr(dt_buf_str(&p), "/dev/zero: not a regular file (a character device)"), "%s",
              dt_buf_str(&p));
    dt_buf_reset(&p);
    char *dir = tu_tmpdir();
    cr_assert_eq(sp_spec_load(&s, dir, &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "not a regular file (a folder)"), "%s", dt_buf_str(&p));
    dt_buf_reset(&p);
    char *path = dt_xasprintf("%s/big.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)SP_SPEC_MAX_BYTES + 1), 0);
    fclose(f);
    cr_assert_eq(sp_spec_load(&s, path, &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "over the 1.0 MB"), "%s", dt_buf_str(&p));
    free(path);
    tu_rmtree(dir);
    free(dir);
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

Test(spec, sddmm_k_should_be_bounded_to_what_compiles_quickly)
{
    sp_spec s;
    sp_spec_init(&s);
    dt_buf p = DT_BUF_INIT;
    cJSON *j = cJSON_Parse("{\"op\": \"sddmm\", \"matrix\": \"gen:uniform:rows=10,nnz=20\", \"n\": 65536}");
    cr_assert_eq(sp_spec_from_json(&s, j, "s.json", &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "$.n: expected SDDMM's inner dimension K of at most 1024"), "%s",
              dt_buf_str(&p));
    cJSON_Delete(j);
    dt_buf_reset(&p);
    j = cJSON_Parse("{\"op\": \"sddmm\", \"matrix\": \"gen:uniform:rows=10,nnz=20\", \"n\": 1024}");
    cr_assert_eq(sp_spec_from_json(&s, j, "s.json", &p), 0, "%s", dt_buf_str(&p));
    cJSON_Delete(j);
    /* SpMM's n is not a compile-time constant: its range is unchanged. */
    j = cJSON_Parse("{\"op\": \"spmm\", \"matrix\": \"gen:uniform:rows=10,nnz=20\", \"n\": 65536}");
    cr_assert_eq(sp_spec_from_json(&s, j, "s.json", &p), 0, "%s", dt_buf_str(&p));
    cJSON_Delete(j);
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

/* issue 39: the spec is checked by the schema walker: huge or fractional
 * numbers are refused with what was given (no float-to-int cast of them),
 * and a rule across fields names the field. */
Test(spec, huge_numbers_and_cross_field_rules_should_be_refused_with_their_path)
{
    sp_spec s;
    dt_buf p = DT_BUF_INIT;
    cr_assert_eq(parse("{\"matrix\": \"a.mtx\", \"n\": 1e300, \"alpha\": 1e999}", &s, &p), -1);
    const char *out = dt_buf_str(&p);
    cr_assert(strstr(out, "t.json: $.n: expected an integer from 1 to 65536, got 1e+300\n"), "%s",
              out);
    cr_assert(strstr(out, "t.json: $.alpha: expected a finite number, got a non-finite number\n"),
              "%s", out);
    sp_spec_clear(&s);
    dt_buf_reset(&p);
    cr_assert_eq(parse("{\"matrix\": \"a.mtx\", \"n\": 2.5}", &s, &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "$.n: expected an integer from 1 to 65536, got 2.5"), "%s",
              dt_buf_str(&p));
    sp_spec_clear(&s);
    dt_buf_reset(&p);
    cr_assert_eq(parse("{\"matrix\": \"a.mtx\", \"op\": \"sddmm\", \"epilogue\": \"bias\"}", &s, &p),
                 -1);
    cr_assert_str_eq(dt_buf_str(&p), "t.json: $.epilogue: expected none, relu or gelu for sddmm "
                                     "(bias applies to dense outputs: spmv, spmm), got \"bias\"\n");
    sp_spec_clear(&s);
    dt_buf_reset(&p);
    /* review: a string or a map of steps */
    cr_assert_eq(parse("{\"matrix\": \"a.mtx\", \"review\": 3}", &s, &p), -1);
    cr_assert(strstr(dt_buf_str(&p), "$.review: expected one of ask, auto or an object of step: "
                                     "\"ask\"|\"auto\", got 3"),
              "%s", dt_buf_str(&p));
    sp_spec_clear(&s);
    dt_buf_free(&p);
}

/* A relative matrix path keeps its meaning from the current folder; one that
 * names no file there but does next to the spec file is taken from there,
 * as an absolute path (a session records where it was). */
Test(spec, a_relative_matrix_path_should_also_be_found_next_to_the_spec)
{
    char *dir = tu_tmpdir();
    char real[PATH_MAX];
    cr_assert_not_null(realpath(dir, real));
    char *sub = dt_xasprintf("%s/sub", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    const char *mtx = "%%MatrixMarket matrix coordinate real general\n1 1 1\n1 1 2\n";
    char *a = tu_write(sub, "A.mtx", mtx);
    char *f1 = tu_write(sub, "s.json", "{\"matrix\": \"A.mtx\"}");
    char *f2 = tu_write(sub, "r.json", "{\"matrix\": \"rep:A.mtx:nnz=100\"}");
    char *f3 = tu_write(sub, "g.json", "{\"matrix\": \"gen:uniform:rows=10,nnz=20\"}");
    char *f4 = tu_write(sub, "n.json", "{\"matrix\": \"none.mtx\"}");
    cr_assert_eq(chdir("/"), 0);
    sp_spec s;
    dt_buf p = DT_BUF_INIT;
    char *want = dt_xasprintf("%s/sub/A.mtx", real);
    char *want_rep = dt_xasprintf("rep:%s/sub/A.mtx:nnz=100", real);
    sp_spec_init(&s);
    cr_assert_eq(sp_spec_load(&s, f1, &p), 0, "%s", dt_buf_str(&p));
    cr_assert_str_eq(s.matrix, want);
    sp_spec_clear(&s);
    sp_spec_init(&s);
    cr_assert_eq(sp_spec_load(&s, f2, &p), 0, "%s", dt_buf_str(&p));
    cr_assert_str_eq(s.matrix, want_rep);
    sp_spec_clear(&s);
    sp_spec_init(&s);
    cr_assert_eq(sp_spec_load(&s, f3, &p), 0, "%s", dt_buf_str(&p));
    cr_assert_str_eq(s.matrix, "gen:uniform:rows=10,nnz=20");
    sp_spec_clear(&s);
    sp_spec_init(&s);
    cr_assert_eq(sp_spec_load(&s, f4, &p), 0, "%s", dt_buf_str(&p));
    cr_assert_str_eq(s.matrix, "none.mtx", "a path found nowhere is left for the loader to report");
    sp_spec_clear(&s);
    /* From a folder that has its own A.mtx, the spec's "A.mtx" is that one. */
    char *own = tu_write(dir, "A.mtx", mtx);
    cr_assert_eq(chdir(dir), 0);
    sp_spec_init(&s);
    cr_assert_eq(sp_spec_load(&s, "sub/s.json", &p), 0, "%s", dt_buf_str(&p));
    cr_assert_str_eq(s.matrix, "A.mtx");
    sp_spec_clear(&s);
    cr_assert_eq(chdir("/"), 0);
    tu_rmtree(dir);
    free(own);
    free(want_rep);
    free(want);
    free(f4);
    free(f3);
    free(f2);
    free(f1);
    free(a);
    free(sub);
    free(dir);
    dt_buf_free(&p);
}
