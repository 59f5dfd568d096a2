/* test_examples.c -- the shipped example hooks in scripting/examples/ do what their comments say.
 */
#include "tests/scripting/lxtest.h"

#include <stdlib.h>
#include <string.h>

static void load_example(lt *t, const char *name)
{
    char *path = dt_xasprintf("%s/scripting/examples/%s", tu_src_dir(), name);
    dt_err e = {0};
    cr_assert_eq(lx_load_file(t->L, path, &e), 0, "%s", e.msg);
    free(path);
}

static lx_decision review(lt *t, const char *step, dt_buf *reason)
{
    cJSON *s = lxt_json(step);
    lx_decision d = lx_review(t->L, s, reason, &t->errors);
    cJSON_Delete(s);
    cr_assert_str_eq(dt_buf_str(&t->errors), "");
    return d;
}

/* A generate step whose artifact is the given kernel source. */
static char *generate_step(const char *source)
{
    cJSON *s = dt_json_obj();
    dt_json_set_int(s, "id", 7);
    dt_json_set_str(s, "kind", "generate");
    dt_json_set_int(s, "version", 3);
    dt_json_set_str(s, "status", "awaiting review");
    cJSON *a = dt_json_obj();
    dt_json_set_str(a, "name", "kernel");
    dt_json_set_int(a, "version", 3);
    dt_json_set_str(a, "content", source);
    dt_json_set_take(s, "artifact", a);
    char *text = dt_json_print(s, 0);
    cJSON_Delete(s);
    return text;
}

static char *shipped_kernel(void)
{
    char *path = dt_xasprintf("%s/kernels/spmv_csr_thread.cu", tu_src_dir());
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    free(path);
    return src;
}

Test(examples, auto_approve_should_approve_only_verified_kernels_at_1_1x)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    load_example(&t, "auto_approve.lua");
    dt_buf reason = DT_BUF_INIT;
    cr_assert_eq(review(&t,
                        "{\"id\": 9, \"kind\": \"measure\", \"status\": \"awaiting review\","
                        " \"artifact\": {\"name\": \"measure\", \"version\": 2, \"json\": {}},"
                        " \"measurement\": {\"speedup\": 1.25, \"us\": 41.5, \"gbps\": 3100},"
                        " \"verify\": {\"passed\": true}}",
                        &reason),
                 LX_APPROVE);
    cr_assert_eq(review(&t,
                        "{\"kind\": \"tune\", \"measurement\": {\"speedup\": 1.1},"
                        " \"verify\": {\"passed\": true}}",
                        &reason),
                 LX_APPROVE, "exactly 1.1x is enough");
    /* each of these goes to the person */
    static const char *const ask[] = {
        "{\"kind\": \"measure\", \"measurement\": {\"speedup\": 1.09}, \"verify\": {\"passed\": "
        "true}}",
        "{\"kind\": \"measure\", \"measurement\": {\"speedup\": 3.0}, \"verify\": {\"passed\": "
        "false}}",
        "{\"kind\": \"measure\", \"measurement\": {\"speedup\": 3.0}, \"verify\": {}}",
        "{\"kind\": \"measure\", \"measurement\": {\"speedup\": 3.0}, \"verify\": {\"passed\": 1}}",
        "{\"kind\": \"measure\", \"verify\": {\"passed\": true}}",
        "{\"kind\": \"measure\", \"measurement\": {\"speedup\": \"fast\"}, \"verify\": "
        "{\"passed\": true}}",
        "{\"kind\": \"generate\", \"measurement\": {\"speedup\": 3.0}, \"verify\": {\"passed\": "
        "true}}",
        "{\"kind\": \"measure\"}",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(ask); i++)
        cr_assert_eq(review(&t, ask[i], &reason), LX_ASK, "%s", ask[i]);
    cr_assert_eq(reason.len, 0);
    dt_buf_free(&reason);
    lxt_close(&t);
}

Test(examples, no_atomics_should_reject_kernels_with_atomics_and_say_where)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    load_example(&t, "no_atomics.lua");
    const char *racy = "__global__ void k(float *y, const float *v, const int *row, int n)\n"
                       "{\n"
                       "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                       "    // atomicCAS(in a comment) does not count\n"
                       "    if (i < n) atomicAdd(&y[row[i]], v[i]);\n"
                       "    /* neither does\n"
                       "       atomicMax(x) in a block comment */\n"
                       "    atomicAdd_block (&y[0], 1.0f);\n"
                       "}\n";
    char *step = generate_step(racy);
    dt_buf reason = DT_BUF_INIT;
    cr_assert_eq(review(&t, step, &reason), LX_REJECT);
    cr_assert_str_eq(dt_buf_str(&reason),
                     "kernel v3 uses atomics (atomicAdd on line 5, atomicAdd_block on line 8); "
                     "give each output element a single owner and reduce partial sums with warp "
                     "shuffles instead");
    free(step);
    /* the shipped kernel has one owner per row: no opinion */
    char *src = shipped_kernel();
    step = generate_step(src);
    dt_buf_reset(&reason);
    cr_assert_eq(review(&t, step, &reason), LX_ASK);
    free(step);
    free(src);
    /* other steps are not its business */
    cr_assert_eq(review(&t,
                        "{\"kind\": \"measure\", \"artifact\": {\"content\": \"atomicAdd(x)\"}}",
                        &reason),
                 LX_ASK);
    dt_buf_free(&reason);
    lxt_close(&t);
}

Test(examples, custom_rule_should_flag_printf_and_pointers_without_restrict)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    load_example(&t, "custom_rule.lua");
    const char *src = "// printf(\"commented out\") is fine\n"
                      "extern \"C\" __global__ void __launch_bounds__(256)\n"
                      "k(int n, const float *__restrict__ x,\n"
                      "  float *y, const int* col)\n"
                      "{\n"
                      "    int i = threadIdx.x;\n"
                      "    if (i == 0) printf(\"n=%d\\n\", n);\n"
                      "    snprintf_like(i);\n"
                      "    y[i] = x[col[i]];\n"
                      "}\n";
    cJSON *f = lx_rules(t.L, src, &t.errors);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    char *s = lxt_text(f);
    cr_assert_str_eq(
        s, "[{\"id\":\"no-printf\",\"severity\":\"warning\",\"message\":\"printf in a kernel "
           "serialises output and distorts timings; remove it before measuring\",\"line\":7,"
           "\"source\":\"lua\"},"
           "{\"id\":\"restrict-pointers\",\"severity\":\"note\",\"message\":\"pointer parameter "
           "'y' has no __restrict__: the compiler must assume it aliases the others\",\"line\":4,"
           "\"source\":\"lua\"},"
           "{\"id\":\"restrict-pointers\",\"severity\":\"note\",\"message\":\"pointer parameter "
           "'col' has no __restrict__: the compiler must assume it aliases the others\",\"line\":4,"
           "\"source\":\"lua\"}]");
    free(s);
    cJSON_Delete(f);
    /* the shipped kernel follows both rules */
    char *kernel = shipped_kernel();
    f = lx_rules(t.L, kernel, &t.errors);
    cr_assert_eq(cJSON_GetArraySize(f), 0, "%s", dt_json_print(f, 0));
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    cJSON_Delete(f);
    free(kernel);
    lxt_close(&t);
}

Test(examples, pin_block_size_should_pin_the_plan_and_narrow_the_space)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    load_example(&t, "pin_block_size.lua");
    int ran = 0;
    char *out = lxt_run(&t, "plan", "before",
                       "{\"strategy\": \"csr-thread\","
                       " \"params\": {\"BLOCK\": [64, 128, 256, 512, 1024], \"VEC\": [1]}}",
                       &ran);
    cr_assert_eq(ran, 1, "%s", dt_buf_str(&t.errors));
    cr_assert_str_eq(out, "{\"strategy\":\"csr-thread\",\"params\":{\"BLOCK\":[256],\"VEC\":[1]}}");
    cr_assert_str_eq(dt_buf_str(&t.log),
                     "pin_block_size: BLOCK pinned to 256 (was {64, 128, 256, 512, 1024})\n");
    free(out);
    /* a plan without params gets them */
    lxt_reset(&t);
    out = lxt_run(&t, "plan", "before", "{}", &ran);
    cr_assert_str_eq(out, "{\"params\":{\"BLOCK\":[256]}}");
    cr_assert_str_eq(dt_buf_str(&t.log), "pin_block_size: BLOCK pinned to 256 (was unset)\n");
    free(out);
    cJSON *ps = lx_param_spaces(t.L);
    char *s = lxt_text(ps);
    cr_assert_str_eq(s, "{\"csr-thread\":{\"BLOCK\":[256]}}");
    free(s);
    cJSON_Delete(ps);
    lxt_close(&t);
}

Test(examples, all_four_should_load_together_from_a_hooks_folder)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *dir = dt_xasprintf("%s/scripting/examples", tu_src_dir());
    cr_assert_eq(lx_load_dir(t.L, dir, &t.errors), 4, "%s", dt_buf_str(&t.errors));
    /* reviews: auto_approve and no_atomics; hooks: pin_block_size; rules: two */
    cr_assert_eq(lx_hook_count(t.L), 5);
    free(dir);
    lxt_close(&t);
}
