/* test_contract.c -- launch contracts, manifests and the expression evaluator. */
#include "tests/common/testutil.h"

#include "gpu/contract.h"

#include <string.h>

static int64_t ev(const char *x, const gpu_vars *v)
{
    int64_t r = -999;
    dt_err e = {0};
    cr_assert_eq(gpu_eval(x, v, &r, &e), 0, "%s: %s", x, e.msg);
    return r;
}

Test(contract, expressions_should_follow_integer_arithmetic_and_precedence)
{
    gpu_vars v = {.n = 0};
    gpu_vars_set(&v, "rows", 1000);
    gpu_vars_set(&v, "sms", 132);
    cr_assert_eq(ev("cdiv(rows, 256)", &v), 4);
    cr_assert_eq(ev("cdiv(rows,250)", &v), 4);
    cr_assert_eq(ev("1 + 2 * 3", &v), 7);
    cr_assert_eq(ev("(1 + 2) * 3", &v), 9);
    cr_assert_eq(ev("rows / 3 % 7", &v), (1000 / 3) % 7);
    cr_assert_eq(ev("min(sms * 4, cdiv(rows, 32))", &v), 32);
    cr_assert_eq(ev("max(1, -5)", &v), 1);
    cr_assert_eq(ev("-rows + 1", &v), -999);
    cr_assert_eq(ev("rows >= 1000 && sms == 132", &v), 1);
    cr_assert_eq(ev("rows < 10 || !(sms != 132)", &v), 1);
    cr_assert_eq(ev("4 * 8 <= 32", &v), 1);
}

Test(contract, bad_expressions_should_say_where)
{
    gpu_vars v = {.n = 0};
    gpu_vars_set(&v, "rows", 10);
    int64_t r;
    dt_err e = {0};
    cr_assert_eq(gpu_eval("rows / 0", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "division by zero"), "%s", e.msg);
    cr_assert_eq(gpu_eval("colz + 1", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "unknown variable 'colz'") && strstr(e.msg, "position 1"), "%s",
              e.msg);
    cr_assert_eq(gpu_eval("cdiv(rows 2)", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "expected ','"), "%s", e.msg);
    cr_assert_eq(gpu_eval("sqrt(4)", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "unknown function"), "%s", e.msg);
    cr_assert_eq(gpu_eval("1 +", &v, &r, &e), -1);
    cr_assert_eq(gpu_eval("1 2", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "after the expression"), "%s", e.msg);
    /* syntax only */
    cr_assert_eq(gpu_expr_check("cdiv(anything, 4)", &e), 0);
}

static const char src[] =
    "// a kernel\n"
    "/*@contract\n"
    "{\"entry\": \"k\", \"op\": \"spmv\", \"params\": [\"rows\", \"rowptr\", \"col\", \"val\","
    " \"x\", \"y\"],\n"
    " \"block\": [\"BLOCK\"], \"grid\": [\"cdiv(rows, BLOCK)\"], \"requires\": {\"max_row\": 32},"
    " \"defines\": {\"ROWS\": \"rows\"}}\n"
    "@*/\n"
    "/*@manifest\n"
    "{\"strategy\": \"csr-thread\", \"op\": \"spmv\", \"dtypes\": [\"fp32\", \"fp64\"],\n"
    " \"params\": {\"BLOCK\": {\"default\": 256, \"values\": [64, 128, 256, 512]},\n"
    "            \"VEC\": {\"default\": 1, \"values\": [1, 2, 4]}},\n"
    " \"constraints\": [\"BLOCK % 32 == 0\", \"VEC * 32 <= BLOCK\"]}\n"
    "@*/\n"
    "extern \"C\" __global__ void k() {}\n";

Test(contract, a_contract_block_in_the_source_should_parse)
{
    gpu_contract c;
    dt_err e = {0};
    cr_assert_eq(gpu_contract_from_source(src, &c, &e), 0, "%s", e.msg);
    cr_assert_str_eq(c.entry, "k");
    cr_assert_eq(c.nparams, 6);
    cr_assert_str_eq(c.grid[0], "cdiv(rows, BLOCK)");
    cr_assert_str_eq(c.grid[1], "1");
    cr_assert_str_eq(c.format, "csr");
    cr_assert_eq(dt_json_num(c.requires, "max_row", 0), 32);
    cJSON *j = gpu_contract_json(&c);
    gpu_contract c2;
    cr_assert_eq(gpu_contract_parse(j, &c2, &e), 0, "%s", e.msg);
    cr_assert_str_eq(c2.block[0], "BLOCK");
    gpu_contract_clear(&c2);
    cJSON_Delete(j);
    gpu_contract_clear(&c);
}

Test(contract, every_contract_problem_should_be_reported)
{
    const char *bad = "{\"op\": \"spgemm\", \"params\": [\"rows\", \"banana\"], \"grid\": "
                      "[\"cdiv(rows\"], \"layout\": \"diagonal\"}";
    cJSON *j = cJSON_Parse(bad);
    gpu_contract c;
    dt_err e = {0};
    cr_assert_eq(gpu_contract_parse(j, &c, &e), -1);
    cr_assert(strstr(e.msg, "launch contract: $.entry: expected the kernel's name (an identifier or "
                            "a name expression such as k<256>), got nothing; "),
              "%s", e.msg);
    cr_assert(strstr(e.msg, "$.op: expected one of spmv, spmm, sddmm, got \"spgemm\"; "), "%s",
              e.msg);
    cr_assert(strstr(e.msg, "$.params[1]: expected a parameter name (gpu/PROTOCOL.md), got "
                            "\"banana\""),
              "%s", e.msg);
    cr_assert(strstr(e.msg, "$.block: expected an array of 1 to 3 expressions, got nothing"), "%s",
              e.msg);
    cr_assert(strstr(e.msg, "$.grid[0]: expected an expression (expression 'cdiv(rows': expected "
                            "',' between the two arguments at position 10), got \"cdiv(rows\""),
              "%s", e.msg);
    cr_assert(strstr(e.msg, "$.layout: expected one of row, col, got \"diagonal\""), "%s", e.msg);
    cJSON_Delete(j);
    cr_assert_eq(gpu_contract_from_source("__global__ void k(){}", &c, &e), -1);
    cr_assert(strstr(e.msg, "no launch contract"), "%s", e.msg);
}

/* `ditto export` writes the entry into the harness as C: a session file
 * whose contract names anything but an identifier could put code there. */
Test(contract, an_entry_that_is_not_a_c_identifier_should_be_refused)
{
    static const char *const bad[] = {"k<<<1, 1>>>(); } int main() { return system(0); }",
                                      "9k", "k;", "k<2>>(", "k<<2>", "\u00e9t\u00e9", "k/*"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        char *text = dt_xasprintf(
            "{\"entry\": \"%s\", \"op\": \"spmv\", \"params\": [\"rows\"], \"block\": [\"256\"], "
            "\"grid\": [\"cdiv(rows, 256)\"]}",
            bad[i]);
        cJSON *j = cJSON_Parse(text);
        cr_assert_not_null(j, "%s", text);
        gpu_contract c;
        dt_err e = {0};
        cr_expect_eq(gpu_contract_parse(j, &c, &e), -1, "accepted entry %s", bad[i]);
        cr_expect(strstr(e.msg, "$.entry: expected the kernel's name (an identifier or a name "
                                "expression such as k<256>)"),
                  "%s", e.msg);
        cJSON_Delete(j);
        free(text);
    }
    static const char *const good[] = {"_spmv_k2", "spmv_t<float, 4>", "ns::k<2>"};
    for (size_t i = 0; i < DT_ARRAY_LEN(good); i++) {
        char *text = dt_xasprintf("{\"entry\": \"%s\", \"op\": \"spmv\", \"params\": [\"rows\"], "
                                  "\"block\": [\"256\"], \"grid\": [\"cdiv(rows, 256)\"]}",
                                  good[i]);
        cJSON *j = cJSON_Parse(text);
        gpu_contract c;
        dt_err e = {0};
        cr_expect_eq(gpu_contract_parse(j, &c, &e), 0, "%s: %s", good[i], e.msg);
        gpu_contract_clear(&c);
        cJSON_Delete(j);
        free(text);
    }
}

Test(contract, manifests_should_give_defaults_and_check_values_and_constraints)
{
    gpu_manifest m;
    dt_err e = {0};
    cr_assert_eq(gpu_manifest_from_source(src, &m, &e), 0, "%s", e.msg);
    cr_assert_str_eq(m.strategy, "csr-thread");
    cr_assert_eq(m.nparams, 2);
    cr_assert(m.dtypes & (1u << SP_FP64));
    cr_assert(!(m.dtypes & (1u << SP_FP16)));
    cJSON *d = gpu_manifest_defaults(&m);
    cr_assert_eq(dt_json_num(d, "BLOCK", 0), 256);
    cr_assert_eq(gpu_manifest_check(&m, d, NULL, &e), 0, "%s", e.msg);
    cJSON_Delete(d);
    cJSON *p = cJSON_Parse("{\"BLOCK\": 96}");
    cr_assert_eq(gpu_manifest_check(&m, p, NULL, &e), -1);
    cr_assert(strstr(e.msg, "BLOCK = 96 is not a legal value"), "%s", e.msg);
    cJSON_Delete(p);
    p = cJSON_Parse("{\"BLOCK\": 64, \"VEC\": 4}");
    cr_assert_eq(gpu_manifest_check(&m, p, NULL, &e), -1);
    cr_assert(strstr(e.msg, "VEC * 32 <= BLOCK"), "%s", e.msg);
    cJSON_Delete(p);
    gpu_manifest_clear(&m);
    cr_assert_eq(gpu_manifest_from_source("no block", &m, &e), -1);
    cr_assert_eq(e.code, GPU_ENOMANIFEST);
}

/* scratch_init: "launch" (the default: a memset before every launch) or
 * "once" (zeroed when allocated; the kernel leaves it zeroed), which the
 * contract's JSON keeps; anything else, or "once" with no scratch, is
 * refused with what to write. */
Test(contract, scratch_init_should_say_when_the_worker_zeroes_scratch)
{
    static const struct {
        const char *extra;
        int ok, once;
        const char *msg;
    } cases[] = {
        {"", 1, 0, NULL},
        {", \"scratch_init\": \"launch\"", 1, 0, NULL},
        {", \"scratch_init\": \"once\"", 1, 1, NULL},
        {", \"scratch_init\": \"never\"", 0, 0, "scratch_init: expected \"launch\""},
        {", \"scratch_init\": 1", 0, 0, "scratch_init: expected \"launch\""},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        char *js = dt_xasprintf("{\"entry\": \"k\", \"op\": \"spmv\", \"params\": [\"rows\", "
                                "\"x\", \"y\", \"scratch\"], \"block\": [\"256\"], \"grid\": "
                                "[\"cdiv(rows, 256)\"], \"scratch_bytes\": \"rows * 4\"%s}",
                                cases[i].extra);
        cJSON *j = cJSON_Parse(js);
        gpu_contract c;
        dt_err e = {0};
        int rc = gpu_contract_parse(j, &c, &e);
        cr_assert_eq(rc, cases[i].ok ? 0 : -1, "%s: %s", js, e.msg);
        if (rc == 0) {
            cr_assert_eq(c.scratch_once, cases[i].once, "%s", js);
            cJSON *back = gpu_contract_json(&c);
            const cJSON *si = cJSON_GetObjectItem(back, "scratch_init");
            cr_assert_eq(si != NULL, cases[i].once, "%s", js);
            cJSON_Delete(back);
            gpu_contract_clear(&c);
        } else {
            cr_assert(strstr(e.msg, cases[i].msg), "%s: %s", js, e.msg);
        }
        cJSON_Delete(j);
        free(js);
    }
    const char *noscratch = "{\"entry\": \"k\", \"op\": \"spmv\", \"params\": [\"rows\", \"x\", "
                            "\"y\"], \"block\": [\"256\"], \"grid\": [\"1\"], "
                            "\"scratch_init\": \"once\"}";
    cJSON *j = cJSON_Parse(noscratch);
    gpu_contract c;
    dt_err e = {0};
    cr_assert_eq(gpu_contract_parse(j, &c, &e), -1);
    cr_assert(strstr(e.msg, "$.scratch_init: expected \"launch\" or nothing: the contract has no "
                            "scratch_bytes, got \"once\""), "%s", e.msg);
    cJSON_Delete(j);
}

/* issue 37: the evaluator is total -- checked arithmetic, no SIGFPE, no
 * stack overflow, every failure a message. */
Test(contract, hostile_arithmetic_should_be_an_error_not_a_crash)
{
    gpu_vars v = {.n = 0};
    gpu_vars_set(&v, "big", INT64_MAX);
    gpu_vars_set(&v, "small", INT64_MIN);
    int64_t r = 0;
    dt_err e = {0};
    /* INT64_MIN / -1 traps with SIGFPE on x86 when evaluated unchecked. */
    cr_assert_eq(gpu_eval("small / -1", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "overflow"), "%s", e.msg);
    cr_assert_eq(gpu_eval("(0 - 9223372036854775807 - 1) / (0 - 1)", &v, &r, &e), -1);
    cr_assert_eq(gpu_eval("small % -1", &v, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r, 0);
    cr_assert_eq(gpu_eval("big + 1", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "overflow in '+'"), "%s", e.msg);
    cr_assert_eq(gpu_eval("small - 1", &v, &r, &e), -1);
    cr_assert_eq(gpu_eval("big * 2", &v, &r, &e), -1);
    cr_assert_eq(gpu_eval("-small", &v, &r, &e), -1);
    cr_assert_eq(gpu_eval("cdiv(big, 2)", &v, &r, &e), 0, "%s", e.msg);
    cr_assert_eq(r, INT64_MAX / 2 + 1);
    cr_assert_eq(gpu_eval("cdiv(small, -1)", &v, &r, &e), -1);
    cr_assert_eq(gpu_eval("cdiv(-7, 2)", &v, &r, &e), 0);
    cr_assert_eq(r, -3);
    cr_assert_eq(gpu_eval("cdiv(7, -2)", &v, &r, &e), 0);
    cr_assert_eq(r, -3);
    cr_assert_eq(gpu_eval("cdiv(-7, -2)", &v, &r, &e), 0);
    cr_assert_eq(r, 4);
    cr_assert_eq(gpu_eval("5 % 0", &v, &r, &e), -1);
    cr_assert(strstr(e.msg, "remainder by zero"), "%s", e.msg);
}

Test(contract, deep_nesting_should_be_refused_not_overflow_the_stack)
{
    /* 200,000 levels: the recursive descent used to recurse once per level. */
    size_t n = 200000;
    char *x = dt_xmalloc(2 * n + 2);
    memset(x, '(', n);
    x[n] = '1';
    memset(x + n + 1, ')', n);
    x[2 * n + 1] = '\0';
    int64_t r = 0;
    dt_err e = {0};
    cr_assert_eq(gpu_expr_check(x, &e), -1);
    memset(x, '-', 2 * n + 1);
    x[2 * n] = '1';
    cr_assert_eq(gpu_eval(x, NULL, &r, &e), -1);
    free(x);
    char deep[256];
    memset(deep, '-', 100);
    strcpy(deep + 100, "1");
    cr_assert_eq(gpu_eval(deep, NULL, &r, &e), -1);
    cr_assert(strstr(e.msg, "nested too deeply"), "%s", e.msg);
    /* Ordinary nesting stays legal. */
    cr_assert_eq(ev("((((((((((1))))))))))+min(max(1,2),cdiv(7,2))", NULL), 3);
}

Test(contract, manifest_numbers_out_of_range_should_be_refused)
{
    dt_err e = {0};
    gpu_manifest m;
    cJSON *j = cJSON_Parse("{\"strategy\": \"s\", \"params\": {\"VEC\": {\"default\": 2.2e21,"
                           " \"values\": [2.2e21]}}}");
    cr_assert_eq(gpu_manifest_parse(j, &m, &e), -1);
    cr_assert(strstr(e.msg, "manifest: $.params.VEC.default: expected an integer from "
                            "-2147483648 to 2147483647, got 2.2e+21; "),
              "%s", e.msg);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"strategy\": \"s\", \"params\": {\"VEC\": {\"default\": 2,"
                    " \"values\": [2, 4.5]}}}");
    cr_assert_eq(gpu_manifest_parse(j, &m, &e), -1);
    cr_assert_str_eq(e.msg, "manifest: $.params.VEC.values[1]: expected an integer from "
                            "-2147483648 to 2147483647, got 4.5");
    cJSON_Delete(j);
    j = cJSON_Parse("{\"strategy\": \"s\", \"params\": {\"VEC\": {\"default\": 8,"
                    " \"values\": [2, 4]}}, \"constraints\": [\"VEC <\"]}");
    cr_assert_eq(gpu_manifest_parse(j, &m, &e), -1);
    cr_assert(strstr(e.msg, "manifest: $.params.VEC.default: expected one of the values, got 8; "
                            "$.constraints[0]: expected an expression"),
              "%s", e.msg);
    cJSON_Delete(j);
    j = cJSON_Parse("{\"strategy\": \"s\", \"params\": {\"VEC\": {\"default\": 2,"
                    " \"values\": [2, 4]}}}");
    cr_assert_eq(gpu_manifest_parse(j, &m, &e), 0, "%s", e.msg);
    cJSON *p = cJSON_Parse("{\"VEC\": -9.9e300}");
    cr_assert_eq(gpu_manifest_check(&m, p, NULL, &e), -1);
    cr_assert(strstr(e.msg, "out of range"), "%s", e.msg);
    cJSON_Delete(p);
    gpu_manifest_clear(&m);
    cJSON_Delete(j);
    /* A contract whose smem is a number too large for 64 bits. */
    gpu_contract c;
    j = cJSON_Parse("{\"entry\": \"k\", \"params\": [\"rows\"], \"block\": [256],"
                    " \"grid\": [1], \"smem\": 2.2e21}");
    cr_assert_eq(gpu_contract_parse(j, &c, &e), -1);
    cr_assert(strstr(e.msg, "smem"), "%s", e.msg);
    cJSON_Delete(j);
}
