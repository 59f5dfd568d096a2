/* test_spec.c -- problem spec validation: every problem with its JSON path. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <string.h>
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
