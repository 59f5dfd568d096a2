/* test_reference.c -- the reference request in process: its random inputs,
 * reference and tolerances do not depend on the thread count. */
#include "tests/common/testutil.h"

#include "gpu/worker/worker.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A worker state holding one matrix under the handle "m"; free with
 * state_free. */
static void state_with(wk_state *w, sp_csr *a)
{
    memset(w, 0, sizeof *w);
    wk_matrix *m = dt_xcalloc(1, sizeof *m);
    m->handle = dt_xstrdup("m");
    m->a = a;
    w->matrices = m;
}

static void state_free(wk_state *w)
{
    wk_matrix *m = w->matrices;
    for (int t = 0; t < 4; t++)
        free(m->rounded[t]);
    sp_csr_free(m->a);
    free(m->handle);
    free(m);
}

static cJSON *reference(wk_state *w, const char *req_json)
{
    cJSON *req = cJSON_Parse(req_json);
    cr_assert_not_null(req, "%s", req_json);
    cJSON *out = cJSON_CreateObject();
    dt_err e = {0};
    cr_assert_eq(wk_reference(w, req, out, &e), 0, "%s: %s", req_json, e.msg);
    cJSON_Delete(req);
    return out;
}

Test(reference, inputs_and_results_should_not_depend_on_the_thread_count)
{
    dt_err e = {0};
    /* Uneven rows; SpMM with n = 40 fills several generator chunks. */
    sp_csr *a = sp_generate("gen:rmat:rows=4096,nnz=40000", &e);
    cr_assert_not_null(a, "%s", e.msg);
    wk_state w;
    state_with(&w, a);
    /* beta != 0 and the bias epilogue, so that every input array reaches
     * the result; each dtype's rounding; both layouts. */
    static const char *reqs[] = {
        "{\"matrix\":\"m\",\"op\":\"spmm\",\"n\":40,\"beta\":0.5,\"epilogue\":\"bias\",\"seed\":7}",
        "{\"matrix\":\"m\",\"op\":\"spmm\",\"n\":33,\"layout\":\"col\",\"dtype\":\"fp16\","
        "\"beta\":-1,\"epilogue\":\"gelu\"}",
        "{\"matrix\":\"m\",\"op\":\"spmv\",\"dtype\":\"bf16\",\"beta\":2,\"epilogue\":\"relu\"}",
        "{\"matrix\":\"m\",\"op\":\"sddmm\",\"n\":24,\"dtype\":\"fp64\",\"beta\":1.5}",
        "{\"matrix\":\"m\",\"op\":\"spmm\",\"n\":8,\"seed\":3}",
    };
    static const char *keys[] = {"outputs", "norm2", "checksum", "max_tolerance", "first"};
    const int counts[] = {2, 3, 8, 64};
    for (size_t r = 0; r < DT_ARRAY_LEN(reqs); r++) {
        sp_ref_set_threads(1);
        cJSON *one = reference(&w, reqs[r]);
        for (size_t c = 0; c < DT_ARRAY_LEN(counts); c++) {
            sp_ref_set_threads(counts[c]);
            cJSON *many = reference(&w, reqs[r]);
            for (size_t k = 0; k < DT_ARRAY_LEN(keys); k++) {
                double x = dt_json_num(one, keys[k], NAN), y = dt_json_num(many, keys[k], NAN);
                cr_assert(memcmp(&x, &y, sizeof x) == 0,
                          "%s at %d threads: %s is %.17g, one thread gave %.17g", reqs[r],
                          counts[c], keys[k], y, x);
            }
            cJSON_Delete(many);
        }
        cJSON_Delete(one);
    }
    sp_ref_set_threads(0);
    state_free(&w);
}

/* y = I x with beta 0 is x itself: the inputs' distribution shows through
 * the summaries. */
Test(reference, inputs_should_be_uniform_magnitudes_in_half_to_three_halves_with_random_signs)
{
    enum { N = 200000 };
    dt_err e = {0};
    sp_coo *c = sp_coo_new(N, N, N, &e);
    for (int32_t i = 0; i < N; i++)
        cr_assert_eq(sp_coo_push(c, i, i, 1.0, &e), 0);
    sp_csr *a = sp_coo_to_csr(c, &e);
    sp_coo_free(c);
    cr_assert_not_null(a, "%s", e.msg);
    wk_state w;
    state_with(&w, a);
    for (int seed = 1; seed <= 3; seed++) {
        char req[128];
        snprintf(req, sizeof req,
                 "{\"matrix\":\"m\",\"op\":\"spmv\",\"dtype\":\"fp16\",\"seed\":%d}", seed);
        cJSON *o = reference(&w, req);
        /* E[x^2] = (1.5^3 - 0.5^3) / 3 = 13/12; sd of the mean square ~0.0007 */
        double ms = pow(dt_json_num(o, "norm2", 0), 2) / N;
        cr_assert(fabs(ms - 13.0 / 12.0) < 0.01, "seed %d: mean square %g", seed, ms);
        /* signs: the sum of N values of mean 0 and sd ~1.04 stays within 5 sd */
        cr_assert_lt(fabs(dt_json_num(o, "checksum", 0)), 5 * 1.05 * sqrt(N), "seed %d", seed);
        double f = dt_json_num(o, "first", 0);
        cr_assert(fabs(f) >= 0.5 && fabs(f) <= 1.5, "seed %d: first %g", seed, f);
        cr_assert_eq(f * 2048, floor(f * 2048), "seed %d: %.17g is not an fp16 value", seed, f);
        cJSON_Delete(o);
    }
    state_free(&w);
}

/* fp16 rounds 70000 to an infinity: the reference would be NaN wherever it
 * reaches, so the request is refused, naming the value and its place. */
Test(reference, a_value_beyond_the_half_types_range_should_be_refused_naming_it)
{
    dt_err e = {0};
    sp_csr *a = sp_generate("gen:banded:rows=50,bw=2,seed=1", &e);
    cr_assert_not_null(a, "%s", e.msg);
    a->val[a->rowptr[7] + 1] = -70000.0;
    wk_state w;
    state_with(&w, a);
    cJSON *req = cJSON_Parse("{\"matrix\":\"m\",\"op\":\"spmv\",\"dtype\":\"fp16\"}");
    cJSON *out = cJSON_CreateObject();
    cr_assert_neq(wk_reference(&w, req, out, &e), 0);
    cr_assert_eq(e.code, WK_EBAD);
    char want[160];
    snprintf(want, sizeof want,
             "dtype fp16: the matrix's value -70000 at row 7, column %d is beyond fp16's range "
             "(largest finite 65504; the matrix reaches 70000)",
             a->col[a->rowptr[7] + 1]);
    cr_assert(strstr(e.msg, want), "%s", e.msg);
    /* bf16 reaches 3.4e38, and fp32 and fp64 take it as it is. */
    static const char *ok[] = {"{\"matrix\":\"m\",\"op\":\"spmv\",\"dtype\":\"bf16\"}",
                               "{\"matrix\":\"m\",\"op\":\"spmv\",\"dtype\":\"fp32\"}"};
    for (size_t i = 0; i < DT_ARRAY_LEN(ok); i++)
        cJSON_Delete(reference(&w, ok[i]));
    cJSON_Delete(req);
    cJSON_Delete(out);
    state_free(&w);
}
