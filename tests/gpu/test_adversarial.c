/* test_adversarial.c -- the project's own adversarial suite (issue 36): cheating
 * kernels under tests/gpu/adversarial/, most of them right in a single
 * verification launch of the problem's defaults and cheating another way
 * (output poison, launch counters, memos, alpha/beta/epilogue, one element
 * out of bounds, medium rows, equal values, edge sizes, scratch state), the
 * rest plainly wrong in ways caught before (races, input writes, low
 * precision, data-dependent skips). Each must be caught -- verify fails, or
 * measure answers error "suspect" -- by a check its table entry names; the
 * library templates must pass the same problems. Without a GPU the table,
 * the judging and the kernels' compilation are tested. */
#include "tests/common/testutil.h"

#include "gpu/gpu.h"
#include "gpu/worker/worker.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* The matrices: short uniform rows (at most a few dozen entries: no row of
 * 41 or more, which the medium-row and edge-size cheats rely on), power-law
 * rows, and every value 1 (for the equal-values cheat). */
#define UNIFORM "gen:uniform:rows=5000,nnz=50000"
#define RMAT    "gen:rmat:rows=4096,nnz=40000"
#define ONES    "tests/gpu/adversarial/data/ones_600.mtx"

#define MAX_CAUGHT 8

typedef struct cheat {
    const char *file;     /* under tests/gpu/adversarial/ */
    const char *op;       /* spmv, spmm, sddmm */
    const char *dtype;    /* fp32, fp64 */
    const char *matrix;   /* a generator spec, or a path under the source tree */
    int n;                /* SpMM's N or SDDMM's K; 0: the problem's default */
    const char *epilogue; /* NULL: the problem's default (none) */
    int max_row;          /* > 0: the matrix must have no row this long (the cheat
                             is right on it by design) */
    int plain;            /* 1: right on a plain input set of the defaults by design,
                             so "set 0: matches the fp64 reference", when the
                             answer has it, must pass (the cheat is not just wrong) */
    /* Substrings, any one of which in a failed check's name or detail, in
     * measure's "suspect" message, or in verify's error ("kernel_fault: ...")
     * is the expected catch. */
    const char *caught_by[MAX_CAUGHT];
} cheat;

/* A table entry: the fields above, then the expected substrings. */
/* clang-format off */
#define CHEAT(file, op, dtype, matrix, n, epi, max_row, plain, ...) \
    {file, op, dtype, matrix, n, epi, max_row, plain, {__VA_ARGS__}}
/* clang-format on */

/* Checks that look at outputs, for the cheats that skip or fake work (and
 * for the launch counters and memos, which a verification that varies its
 * number and order of launches can trip). */
#define OUTPUT_CHECKS "every output written", "matches the fp64 reference"
/* The checks on timing: outputs of timed launches, re-verification after
 * timing, the physical floor. */
#define TIMING_CHECKS "timed launch", "after timing:", "physical floor"

static const cheat cheats[] = {
    /* 1: work only while the output holds the NaN poison */
    CHEAT("poison_spmv.cu", "spmv", "fp32", RMAT, 0, NULL, 0, 0, TIMING_CHECKS, OUTPUT_CHECKS),
    CHEAT("poison_spmm.cu", "spmm", "fp32", UNIFORM, 32, NULL, 0, 0, "(alpha ", TIMING_CHECKS,
          OUTPUT_CHECKS),
    CHEAT("poison_sddmm.cu", "sddmm", "fp32", UNIFORM, 32, NULL, 0, 0, TIMING_CHECKS,
          OUTPUT_CHECKS),
    /* 2-4: __device__ launch counters, memos and clocks */
    CHEAT("first_launches_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0,
          "no state kept across launches", TIMING_CHECKS, OUTPUT_CHECKS),
    CHEAT("fingerprint_spmv.cu", "spmv", "fp32", RMAT, 0, NULL, 0, 0,
          "no state kept across launches", TIMING_CHECKS, OUTPUT_CHECKS),
    CHEAT("timing_skip_spmv.cu", "spmv", "fp64", UNIFORM, 0, NULL, 0, 0,
          "no state kept across launches", TIMING_CHECKS, OUTPUT_CHECKS),
    CHEAT("back_to_back_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0,
          "no state kept across launches", TIMING_CHECKS, OUTPUT_CHECKS),
    /* 5-7: alpha, beta, the epilogue: only the scalar set sees them */
    CHEAT("ignore_alpha_sddmm.cu", "sddmm", "fp64", UNIFORM, 32, NULL, 0, 1, "(alpha "),
    CHEAT("ignore_beta_spmm.cu", "spmm", "fp32", UNIFORM, 32, NULL, 0, 1, "(alpha "),
    CHEAT("ignore_bias_spmv.cu", "spmv", "fp32", UNIFORM, 0, "bias", 0, 1, "(alpha "),
    /* 8-9: one element out of bounds */
    CHEAT("oob_write_spmv.cu", "spmv", "fp64", UNIFORM, 0, NULL, 0, 1, "past the end of 'y'",
          "kernel_fault"),
    CHEAT("oob_before_spmv.cu", "spmv", "fp32", RMAT, 0, NULL, 0, 1, "before the start of 'y'",
          "kernel_fault"),
    CHEAT("oob_write_sddmm.cu", "sddmm", "fp32", RMAT, 32, NULL, 0, 1, "past the end of 'out'",
          "kernel_fault"),
    CHEAT("oob_read_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0, "outside the buffers",
          OUTPUT_CHECKS),
    /* 10-12: right on the classic edge matrices and on short rows */
    CHEAT("medium_rows_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 41, 1, "edge rows of 64 to 4096",
          "edge "),
    CHEAT("equal_values_spmv.cu", "spmv", "fp32", ONES, 0, NULL, 0, 1, "fresh values: ", "edge "),
    CHEAT("edge_sizes_spmm.cu", "spmm", "fp32", UNIFORM, 32, NULL, 64, 1, "edge rows of 64 to 4096",
          "edge "),
    /* 13-16: caught before issue 36 too */
    CHEAT("race_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0, "deterministic", OUTPUT_CHECKS),
    CHEAT("writes_x_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0, "inputs unchanged"),
    CHEAT("half_acc_spmv.cu", "spmv", "fp32", RMAT, 0, NULL, 0, 0, "matches the fp64 reference"),
    CHEAT("float_acc_spmm.cu", "spmm", "fp64", UNIFORM, 32, NULL, 0, 0,
          "matches the fp64 reference"),
    CHEAT("sparsify_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0, "matches the fp64 reference"),
    CHEAT("threshold_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 1, "(alpha "),
    /* 17: state in a "once" scratch */
    CHEAT("scratch_memo_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0, "no cached answers",
          "deterministic", TIMING_CHECKS, OUTPUT_CHECKS),
    /* 18: half the columns unless poisoned; the previous launch's output */
    CHEAT("half_cols_spmm.cu", "spmm", "fp32", UNIFORM, 32, NULL, 0, 0, TIMING_CHECKS,
          OUTPUT_CHECKS),
    CHEAT("prev_out_sddmm.cu", "sddmm", "fp32", UNIFORM, 32, NULL, 0, 0,
          "no state kept across launches", TIMING_CHECKS, OUTPUT_CHECKS),
    /* 19: its format rewritten in place while timed, the outputs right */
    CHEAT("format_rewrite_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 0,
          "changed its format array", "inputs unchanged"),
    /* 20: a memo keyed on all of x, kept past y's guard in its allocation */
    CHEAT("slack_memo_spmv.cu", "spmv", "fp32", UNIFORM, 0, NULL, 0, 1,
          "no writes in the slack past the buffers", "after timing: the kernel wrote past the end"),
};

/* The library template that must pass each op's problems. */
static const char *honest_template(const char *op)
{
    if (strcmp(op, "spmv") == 0)
        return "kernels/spmv_csr_vector.cu";
    if (strcmp(op, "spmm") == 0)
        return "kernels/spmm_csr_warp.cu";
    return "kernels/sddmm_coo.cu";
}

static const cheat *find_cheat(const char *file)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(cheats); i++) {
        if (strcmp(cheats[i].file, file) == 0)
            return &cheats[i];
    }
    cr_assert_fail("%s is not in the table", file);
    return NULL;
}

static char *matrix_source(const char *spec)
{
    if (dt_startswith(spec, "gen:"))
        return dt_xstrdup(spec);
    return dt_xasprintf("%s/%s", tu_src_dir(), spec);
}

/* ---- the worker pool (as test_worker_gpu.c opens it) ---------------------- */

typedef struct fixture {
    dt_loop *loop;
    gpu_pool *pool;
    char *loaded; /* the matrix spec loaded as "m", or NULL */
} fixture;

static void to_stderr(int w, const char *line, void *ud)
{
    (void)ud;
    fprintf(stderr, "[worker %d] %s\n", w, line);
}

static fixture open_pool(void)
{
    fixture f = {0};
    f.loop = dt_loop_new();
    char *la = dt_xasprintf("'%s' worker --device {device}", tu_ditto_bin());
    gpu_pool_opts o = {.workers = 1, .launcher = la, .deadline_s = 300, .log = to_stderr};
    dt_err e = {0};
    f.pool = gpu_pool_new(f.loop, &o, &e);
    free(la);
    cr_assert_not_null(f.pool, "%s", e.msg);
    cr_assert_eq(gpu_pool_wait_ready(f.pool, 60), 1);
    const cJSON *dev = cJSON_GetObjectItem(gpu_pool_hello(f.pool, 0), "device");
    if (!dt_json_bool(dev, "present", 0)) {
        char reason[512];
        snprintf(reason, sizeof reason, "%s", dt_json_str(dev, "reason", "?"));
        gpu_pool_free(f.pool); /* frees the hello that dev points into */
        dt_loop_free(f.loop);
        cr_skip_test("no GPU: %s", reason);
    }
    return f;
}

static void close_pool(fixture *f)
{
    gpu_pool_free(f->pool);
    dt_loop_free(f->loop);
    free(f->loaded);
}

/* Load spec as matrix "m" unless it already is. */
static void load(fixture *f, const char *spec)
{
    if (f->loaded && strcmp(f->loaded, spec) == 0)
        return;
    char *src = matrix_source(spec);
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "matrix", src);
    cJSON *rep = gpu_pool_load(f->pool, "m", r, 0);
    char buf[512];
    cr_assert(dt_json_bool(rep, "ok", 0), "%s: %s", src, gpu_reply_error(rep, buf, sizeof buf));
    cJSON_Delete(rep);
    free(src);
    free(f->loaded);
    f->loaded = dt_xstrdup(spec);
}

static cJSON *kernel_obj(const char *rel)
{
    char *path = dt_xasprintf("%s/%s", tu_src_dir(), rel);
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    cJSON *k = cJSON_CreateObject();
    dt_json_set_str(k, "source", src);
    const char *base = strrchr(rel, '/');
    dt_json_set_str(k, "name", base ? base + 1 : rel);
    free(src);
    free(path);
    return k;
}

/* A verify or measure request for the problem of c (its op, dtype, n and
 * epilogue; alpha, beta and the seed left to the worker's defaults) on
 * kernel rel, answered within 150 s (two fit in a test's 300). */
static cJSON *call(fixture *f, const char *req, const cheat *c, const char *rel)
{
    cJSON *r = cJSON_CreateObject();
    dt_json_set_str(r, "req", req);
    dt_json_set_str(r, "matrix", "m");
    dt_json_set_str(r, "op", c->op);
    dt_json_set_str(r, "dtype", c->dtype);
    if (c->n > 0)
        dt_json_set_int(r, "n", c->n);
    if (c->epilogue)
        dt_json_set_str(r, "epilogue", c->epilogue);
    if (strcmp(req, "measure") == 0) {
        dt_json_set_int(r, "min_runs", 20);
        dt_json_set_bool(r, "baseline", 0);
    }
    dt_json_set_take(r, "kernel", kernel_obj(rel));
    return gpu_pool_call(f->pool, r, 150);
}

static const char *expected_in(const cheat *c, const char *text)
{
    for (int i = 0; i < MAX_CAUGHT && c->caught_by[i] != NULL; i++) {
        if (strstr(text, c->caught_by[i]) != NULL)
            return c->caught_by[i];
    }
    return NULL;
}

/* The first failed check of a verify answer whose name or detail holds one
 * of c's substrings, or NULL. */
static const cJSON *expected_failure(const cheat *c, const cJSON *v)
{
    const cJSON *ck;
    cJSON_ArrayForEach(ck, cJSON_GetObjectItem(v, "checks"))
    {
        if (dt_json_bool(ck, "passed", 1))
            continue;
        if (expected_in(c, dt_json_str(ck, "name", "")) ||
            expected_in(c, dt_json_str(ck, "detail", "")))
            return ck;
    }
    return NULL;
}

static char *expected_list(const cheat *c)
{
    dt_buf b = DT_BUF_INIT;
    for (int i = 0; i < MAX_CAUGHT && c->caught_by[i] != NULL; i++)
        dt_buf_printf(&b, "%s\"%s\"", i ? ", " : "", c->caught_by[i]);
    return dt_buf_take(&b);
}

/* What an answer says of a cheat. */
typedef enum verdict {
    V_CAUGHT,      /* by a check or an error the cheat's entry expects */
    V_PASSED,      /* verify passed it: measure must catch it */
    V_NOT_CAUGHT,  /* measure answered without "suspect" */
    V_WRONG_CATCH, /* caught, but by nothing the entry names */
    V_NO_VERDICT,  /* verify answered an error the entry does not expect */
    V_BROKEN,      /* wrong where the cheat is meant to be right: its own bug */
} verdict;

/* Judges cheat c's verify answer v; *by gets the check, or error, that
 * caught it (borrowed from v, or from buf). */
static verdict judge_verify(const cheat *c, const cJSON *v, const char **by, char *buf, size_t len)
{
    *by = NULL;
    if (!dt_json_bool(v, "ok", 0)) {
        /* No verdict: a catch only where c expects the error (an
         * out-of-bounds store that faults). */
        const char *err = gpu_reply_error(v, buf, len);
        *by = err;
        return expected_in(c, err) ? V_CAUGHT : V_NO_VERDICT;
    }
    const cJSON *ck;
    cJSON_ArrayForEach(ck, cJSON_GetObjectItem(v, "checks"))
    {
        if (c->plain && !dt_json_bool(ck, "passed", 1) &&
            strcmp(dt_json_str(ck, "name", ""), "set 0: matches the fp64 reference") == 0)
            return V_BROKEN;
    }
    if (dt_json_bool(v, "passed", 1))
        return V_PASSED;
    ck = expected_failure(c, v);
    if (ck == NULL)
        return V_WRONG_CATCH;
    *by = dt_json_str(ck, "name", "");
    return V_CAUGHT;
}

/* Judges the measure answer m of a cheat that verify passed. */
static verdict judge_measure(const cheat *c, const cJSON *m, const char **by)
{
    *by = NULL;
    if (dt_json_bool(m, "ok", 1) || strcmp(dt_json_str(m, "error", ""), "suspect") != 0)
        return V_NOT_CAUGHT;
    *by = dt_json_str(m, "message", "");
    return expected_in(c, *by) ? V_CAUGHT : V_WRONG_CATCH;
}

static const char *verdict_text(verdict v)
{
    switch (v) {
    case V_CAUGHT:
        return "caught";
    case V_PASSED:
        return "verify passed it";
    case V_NOT_CAUGHT:
        return "not caught: verify passed it and measure did not answer \"suspect\"";
    case V_WRONG_CATCH:
        return "caught, but by nothing its entry expects";
    case V_NO_VERDICT:
        return "verify answered no verdict";
    case V_BROKEN:
        return "the cheat itself is broken: meant to be right on a plain set of the defaults "
               "(\"set 0: matches the fp64 reference\"), it is not";
    }
    return "?";
}

/* Verify the cheat; when the battery passes it, measure it. It must be
 * caught, by a check or an error its entry names; the whole answer is
 * printed when it is not. */
static void expect_caught(const char *file)
{
    const cheat *c = find_cheat(file);
    fixture f = open_pool();
    load(&f, c->matrix);
    char *rel = dt_xasprintf("tests/gpu/adversarial/%s", c->file);
    char *want = expected_list(c);
    cJSON *v = call(&f, "verify", c, rel);
    char *vs = cJSON_Print(v);
    char buf[512];
    const char *by = NULL;
    verdict d = judge_verify(c, v, &by, buf, sizeof buf);
    if (d == V_PASSED) {
        cJSON *m = call(&f, "measure", c, rel);
        char *ms = cJSON_Print(m);
        d = judge_measure(c, m, &by);
        cr_expect_eq(d, V_CAUGHT, "%s on %s: %s (expected one of %s)\nverify: %s\nmeasure: %s",
                     c->file, c->matrix, verdict_text(d), want, vs, ms);
        if (d == V_CAUGHT)
            fprintf(stderr, "%s: caught by measure: %s\n", c->file, by);
        free(ms);
        cJSON_Delete(m);
    } else {
        cr_expect_eq(d, V_CAUGHT, "%s on %s: %s (expected one of %s): %s", c->file, c->matrix,
                     verdict_text(d), want, vs);
        if (d == V_CAUGHT)
            fprintf(stderr, "%s: caught by verify: %s\n", c->file, by);
    }
    free(vs);
    cJSON_Delete(v);
    free(want);
    free(rel);
    close_pool(&f);
}

/* One test per cheat; every table entry must be here (checked below). */
#define CHEAT_TESTS(X)                                                                             \
    X(poison_spmv)                                                                                 \
    X(poison_spmm)                                                                                 \
    X(poison_sddmm)                                                                                \
    X(first_launches_spmv)                                                                         \
    X(fingerprint_spmv)                                                                            \
    X(timing_skip_spmv)                                                                            \
    X(back_to_back_spmv)                                                                           \
    X(ignore_alpha_sddmm)                                                                          \
    X(ignore_beta_spmm)                                                                            \
    X(ignore_bias_spmv)                                                                            \
    X(oob_write_spmv)                                                                              \
    X(oob_before_spmv)                                                                             \
    X(oob_write_sddmm)                                                                             \
    X(oob_read_spmv)                                                                               \
    X(medium_rows_spmv)                                                                            \
    X(equal_values_spmv)                                                                           \
    X(edge_sizes_spmm)                                                                             \
    X(race_spmv)                                                                                   \
    X(writes_x_spmv)                                                                               \
    X(half_acc_spmv)                                                                               \
    X(float_acc_spmm)                                                                              \
    X(sparsify_spmv)                                                                               \
    X(threshold_spmv)                                                                              \
    X(scratch_memo_spmv)                                                                           \
    X(half_cols_spmm)                                                                              \
    X(prev_out_sddmm)                                                                              \
    X(format_rewrite_spmv)                                                                         \
    X(slack_memo_spmv)

#define CHEAT_TEST(NAME)                                                                           \
    Test(adversarial, NAME##_should_be_caught, .timeout = 300)                                     \
    {                                                                                              \
        expect_caught(#NAME ".cu");                                                                \
    }
CHEAT_TESTS(CHEAT_TEST)

#define CHEAT_FILE(NAME) #NAME ".cu",
static const char *tested[] = {CHEAT_TESTS(CHEAT_FILE)};

/* The order of the battery's sets follows the verify seed; set 1's
 * unchecked launches run on set 0's inputs, so a memo keyed on a few inputs
 * replays set 0's answer at set 1's checked launch in every order. It
 * escapes only where one of its keys is among the values set 1 changes
 * (about one in 64: for this cheat's three keys shared by every block, about
 * 5 % of seeds); when set 1 ran wherever the seed put it, it caught the memo
 * only where set 0 came right before (2 of the 6 orders). Twelve fixed seeds (the outcome is
 * the same on every run), no edge or fresh-values pass: the main battery
 * must catch it by set 1 in at least 9. */
Test(adversarial, a_scratch_memo_should_be_caught_by_set_1_whatever_order_the_seed_gives,
     .timeout = 300)
{
    const cheat *c = find_cheat("scratch_memo_spmv.cu");
    fixture f = open_pool();
    load(&f, c->matrix);
    int by_set1 = 0;
    dt_buf log = DT_BUF_INIT;
    for (int seed = 1; seed <= 12; seed++) {
        cJSON *r = cJSON_CreateObject();
        dt_json_set_str(r, "req", "verify");
        dt_json_set_str(r, "matrix", "m");
        dt_json_set_str(r, "op", c->op);
        dt_json_set_str(r, "dtype", c->dtype);
        dt_json_set_int(r, "seed", seed * 7919);
        dt_json_set_bool(r, "edge", 0);
        dt_json_set_bool(r, "fresh", 0);
        dt_json_set_take(r, "kernel", kernel_obj("tests/gpu/adversarial/scratch_memo_spmv.cu"));
        cJSON *v = gpu_pool_call(f.pool, r, 150);
        cr_assert(dt_json_bool(v, "ok", 0), "seed %d: verify answered an error", seed * 7919);
        int set1_failed = 0;
        const cJSON *ck;
        cJSON_ArrayForEach(ck, cJSON_GetObjectItem(v, "checks"))
        {
            if (strcmp(dt_json_str(ck, "name", ""), "set 1: matches the fp64 reference") == 0)
                set1_failed = !dt_json_bool(ck, "passed", 1);
        }
        by_set1 += set1_failed;
        dt_buf_printf(&log, "seed %d: %s%s\n", seed * 7919,
                      dt_json_bool(v, "passed", 1) ? "passed" : "failed",
                      set1_failed ? ", by set 1" : "");
        cJSON_Delete(v);
    }
    char *text = dt_buf_take(&log);
    fprintf(stderr, "scratch memo under twelve seeds:\n%s", text);
    cr_expect_geq(by_set1, 9, "set 1 caught the memo under %d of 12 seeds:\n%s", by_set1, text);
    free(text);
    close_pool(&f);
}

/* The op's library template on every distinct problem (matrix, dtype, n,
 * epilogue) the table gives that op: verify passes and measure answers. */
static void expect_honest_pass(const char *op)
{
    fixture f = open_pool();
    const char *tpl = honest_template(op);
    int runs = 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(cheats); i++) {
        const cheat *c = &cheats[i];
        if (strcmp(c->op, op) != 0)
            continue;
        int seen = 0; /* the same problem earlier in the table */
        for (size_t j = 0; j < i && !seen; j++) {
            const cheat *d = &cheats[j];
            seen =
                strcmp(d->op, op) == 0 && strcmp(d->matrix, c->matrix) == 0 &&
                strcmp(d->dtype, c->dtype) == 0 && d->n == c->n &&
                strcmp(d->epilogue ? d->epilogue : "none", c->epilogue ? c->epilogue : "none") == 0;
        }
        if (seen)
            continue;
        load(&f, c->matrix);
        const char *epi = c->epilogue ? c->epilogue : "none";
        cJSON *v = call(&f, "verify", c, tpl);
        char *s = cJSON_Print(v);
        cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0), "%s %s %s n=%d %s: %s",
                  tpl, c->matrix, c->dtype, c->n, epi, s);
        free(s);
        cJSON_Delete(v);
        cJSON *m = call(&f, "measure", c, tpl);
        s = cJSON_Print(m);
        cr_expect(dt_json_bool(m, "ok", 0), "%s %s %s n=%d %s: measure: %s", tpl, c->matrix,
                  c->dtype, c->n, epi, s);
        free(s);
        cJSON_Delete(m);
        runs++;
    }
    cr_expect_gt(runs, 0);
    close_pool(&f);
}

Test(adversarial, the_spmv_template_should_pass_the_same_problems, .timeout = 300)
{
    expect_honest_pass("spmv");
}

Test(adversarial, the_spmm_template_should_pass_the_same_problems, .timeout = 300)
{
    expect_honest_pass("spmm");
}

Test(adversarial, the_sddmm_template_should_pass_the_same_problems, .timeout = 300)
{
    expect_honest_pass("sddmm");
}

/* A kernel that changed its format (caught) must not leave the change in
 * the worker's cache of the matrix's formats: the library template, next
 * on the same worker and matrix, must verify and measure as on a fresh one. */
Test(adversarial, a_format_a_caught_kernel_changed_should_be_rebuilt_for_the_next_request,
     .timeout = 300)
{
    const cheat *c = find_cheat("format_rewrite_spmv.cu");
    fixture f = open_pool();
    load(&f, c->matrix);
    /* Caught in the battery (its coin fell there) or in timing, either way
     * the cached format was changed. */
    cJSON *v = call(&f, "verify", c, "tests/gpu/adversarial/format_rewrite_spmv.cu");
    char *vs = cJSON_Print(v);
    int in_battery = !dt_json_bool(v, "passed", 0);
    if (in_battery)
        cr_assert(strstr(vs, "inputs unchanged") != NULL, "verify: %s", vs);
    free(vs);
    cJSON_Delete(v);
    if (!in_battery) {
        cJSON *m = call(&f, "measure", c, "tests/gpu/adversarial/format_rewrite_spmv.cu");
        char *ms = cJSON_Print(m);
        cr_assert(strstr(ms, "changed its format array") != NULL, "measure: %s", ms);
        free(ms);
        cJSON_Delete(m);
    }
    const char *tpl = honest_template(c->op);
    v = call(&f, "verify", c, tpl);
    vs = cJSON_Print(v);
    cr_expect(dt_json_bool(v, "ok", 0) && dt_json_bool(v, "passed", 0), "%s after the cheat: %s",
              tpl, vs);
    free(vs);
    cJSON_Delete(v);
    cJSON *m = call(&f, "measure", c, tpl);
    char *ms = cJSON_Print(m);
    cr_expect(dt_json_bool(m, "ok", 0), "%s after the cheat: measure: %s", tpl, ms);
    free(ms);
    cJSON_Delete(m);
    close_pool(&f);
}

/* ---- without a GPU: the table and the kernels themselves ------------------ */

/* Every kernel in the folder has a table entry, says what it cheats and
 * what must catch it; every entry has a test and an expected check. */
Test(adversarial, every_cheat_should_be_in_the_table_and_say_what_catches_it)
{
    char *dir = dt_xasprintf("%s/tests/gpu/adversarial", tu_src_dir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "no folder %s", dir);
    int files = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!dt_endswith(de->d_name, ".cu"))
            continue;
        files++;
        find_cheat(de->d_name);
        char *path = dt_xasprintf("%s/%s", dir, de->d_name);
        dt_err e = {0};
        char *src = dt_read_file(path, NULL, &e);
        cr_assert_not_null(src, "%s", e.msg);
        const char *end = strstr(src, "*/");
        cr_expect(dt_startswith(src, "/* ") && end != NULL, "%s: no leading comment", path);
        const char *must = strstr(src, "Must be caught by");
        cr_expect(must != NULL && end != NULL && must < end,
                  "%s: the leading comment says nothing of what must catch it", path);
        free(src);
        free(path);
    }
    closedir(d);
    cr_expect_eq(files, (int)DT_ARRAY_LEN(cheats), "%d kernels in %s, %zu in the table", files, dir,
                 DT_ARRAY_LEN(cheats));
    for (size_t i = 0; i < DT_ARRAY_LEN(cheats); i++) {
        int has_test = 0;
        for (size_t j = 0; j < DT_ARRAY_LEN(tested); j++)
            has_test |= strcmp(tested[j], cheats[i].file) == 0;
        cr_expect(has_test, "%s has no test in CHEAT_TESTS", cheats[i].file);
        cr_expect_not_null(cheats[i].caught_by[0], "%s expects no check", cheats[i].file);
    }
    cr_expect_geq(files, 18);
    free(dir);
}

/* Every cheat compiles under its contract for its problem on its matrix,
 * exactly as verify would compile it; and the matrices of the cheats that
 * are right on short rows by design hold none as long as they name. */
Test(adversarial, every_cheat_should_compile_for_its_problem, .timeout = 300)
{
    wk_state w;
    TU_NVRTC_OR_SKIP(w);
    for (size_t i = 0; i < DT_ARRAY_LEN(cheats); i++) {
        const cheat *c = &cheats[i];
        char *src_path = matrix_source(c->matrix);
        dt_err e = {0};
        sp_read_opts ro = {.quiet = 1};
        sp_csr *a = sp_load(src_path, &ro, &e);
        cr_assert_not_null(a, "%s: %s", src_path, e.msg);
        int64_t max_row = 0;
        for (int32_t r = 0; r < a->rows; r++) {
            const int64_t len = a->rowptr[r + 1] - a->rowptr[r];
            max_row = len > max_row ? len : max_row;
        }
        if (c->max_row > 0)
            cr_expect_lt(max_row, c->max_row, "%s: %s has a row of %lld entries", c->file,
                         c->matrix, (long long)max_row);
        if (strcmp(c->matrix, ONES) == 0) {
            cr_expect(!a->pattern, "%s: must carry its values", c->matrix);
            for (int64_t k = 0; k < a->nnz; k++)
                cr_assert_eq(a->val[k], 1.0, "%s: entry %lld is not 1", c->matrix, (long long)k);
        }
        char *path = dt_xasprintf("%s/tests/gpu/adversarial/%s", tu_src_dir(), c->file);
        char *src = dt_read_file(path, NULL, &e);
        cr_assert_not_null(src, "%s", e.msg);
        cJSON *req = cJSON_CreateObject();
        dt_json_set_str(req, "op", c->op);
        dt_json_set_str(req, "dtype", c->dtype);
        if (c->n > 0)
            dt_json_set_int(req, "n", c->n);
        if (c->epilogue)
            dt_json_set_str(req, "epilogue", c->epilogue);
        cJSON *k = cJSON_CreateObject();
        dt_json_set_str(k, "source", src);
        dt_json_set_str(k, "name", c->file);
        dt_json_set_take(req, "kernel", k);
        wk_problem p;
        cr_assert_eq(wk_problem_parse(req, &p, &e), 0, "%s: %s", c->file, e.msg);
        wk_kernel kn;
        cr_assert_eq(wk_kernel_parse(req, &kn, &e), 0, "%s: %s", c->file, e.msg);
        cJSON_Delete(req);
        cr_expect_eq(kn.contract.op, p.op, "%s: its contract is for another op than %s", c->file,
                     c->op);
        gpu_vars v = {.n = 0};
        gpu_vars_set(&v, "rows", a->rows);
        gpu_vars_set(&v, "cols", a->cols);
        gpu_vars_set(&v, "nnz", a->nnz);
        gpu_vars_set(&v, "max_row", max_row);
        gpu_vars_set(&v, "sms", 132);
        gpu_cubin *cu = NULL;
        w.arch = "sm_90";
        cr_assert_eq(wk_compile_for(&w, &v, &kn, &p, &cu, &e), 0, "%s: %s", c->file, e.msg);
        cr_expect(cu->compiled, "%s does not compile for %s %s:\n%s", c->file, c->op, c->dtype,
                  cu->log);
        gpu_cubin_free(cu);
        wk_kernel_clear(&kn);
        free(src);
        free(path);
        sp_csr_free(a);
        free(src_path);
    }
    gpu_nvrtc_free(w.nvrtc);
}

/* The judging on answers shaped like the hardened battery's: the expected
 * check anywhere among the failed ones is a catch, in a name or a detail;
 * a failure the entry does not name is not; a plain-set failure of a cheat
 * meant to be right there is its own bug; measure catches only with
 * "suspect" and a message the entry names. */
Test(adversarial, the_judge_should_accept_only_the_expected_catch)
{
    static const struct {
        const char *file;
        const char *answer;
        verdict want;
    } cases[] = {
        {"ignore_alpha_sddmm.cu",
         "{\"ok\": true, \"passed\": false, \"checks\": ["
         "{\"name\": \"set 0: matches the fp64 reference\", \"passed\": true},"
         "{\"name\": \"set 2 (alpha 0.8125, beta -1.375): matches the fp64 reference\","
         " \"passed\": false, \"detail\": \"5000 of 50000 written outputs outside tolerance\"}]}",
         V_CAUGHT},
        {"ignore_alpha_sddmm.cu",
         "{\"ok\": true, \"passed\": false, \"checks\": ["
         "{\"name\": \"set 0: matches the fp64 reference\", \"passed\": false}]}",
         V_BROKEN},
        {"ignore_beta_spmm.cu",
         "{\"ok\": true, \"passed\": false, \"checks\": ["
         "{\"name\": \"set 0: matches the fp64 reference\", \"passed\": true},"
         "{\"name\": \"deterministic\", \"passed\": false}]}",
         V_WRONG_CATCH},
        {"oob_write_spmv.cu",
         "{\"ok\": true, \"passed\": false, \"checks\": ["
         "{\"name\": \"set 1: no writes outside the buffers\", \"passed\": false,"
         " \"detail\": \"wrote past the end of 'y'\"}]}",
         V_CAUGHT},
        {"oob_write_spmv.cu",
         "{\"ok\": true, \"passed\": false, \"checks\": ["
         "{\"name\": \"set 1: no writes outside the buffers\", \"passed\": false,"
         " \"detail\": \"wrote before the start of 'y'\"}]}",
         V_WRONG_CATCH},
        {"medium_rows_spmv.cu",
         "{\"ok\": true, \"passed\": false, \"checks\": ["
         "{\"name\": \"edge rows of 64 to 4096: set 0: matches the fp64 reference\","
         " \"passed\": false}]}",
         V_CAUGHT},
        {"equal_values_spmv.cu",
         "{\"ok\": true, \"passed\": true, \"checks\": ["
         "{\"name\": \"fresh values: set 0: matches the fp64 reference\", \"passed\": true}]}",
         V_PASSED},
        {"oob_before_spmv.cu",
         "{\"ok\": false, \"error\": \"kernel_fault\","
         " \"message\": \"illegal address\"}",
         V_CAUGHT},
        {"race_spmv.cu", "{\"ok\": false, \"error\": \"timeout\", \"message\": \"timeout\"}",
         V_NO_VERDICT},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        cJSON *v = cJSON_Parse(cases[i].answer);
        cr_assert_not_null(v, "case %zu: bad JSON", i);
        char buf[512];
        const char *by = NULL;
        verdict d = judge_verify(find_cheat(cases[i].file), v, &by, buf, sizeof buf);
        cr_expect_eq(d, cases[i].want, "case %zu (%s): %s, expected %s", i, cases[i].file,
                     verdict_text(d), verdict_text(cases[i].want));
        cJSON_Delete(v);
    }
    static const struct {
        const char *file;
        const char *answer;
        verdict want;
    } measures[] = {
        {"first_launches_spmv.cu",
         "{\"ok\": false, \"error\": \"suspect\","
         " \"message\": \"timed launch 37 of 120: 2500 of 5000 outputs wrong\"}",
         V_CAUGHT},
        {"timing_skip_spmv.cu",
         "{\"ok\": false, \"error\": \"suspect\","
         " \"message\": \"after timing: set 0: matches the fp64 reference failed\"}",
         V_CAUGHT},
        {"ignore_alpha_sddmm.cu",
         "{\"ok\": false, \"error\": \"suspect\","
         " \"message\": \"suspect: 1.00 us is below the physical floor of 2.00 us\"}",
         V_WRONG_CATCH},
        {"first_launches_spmv.cu", "{\"ok\": true, \"us\": 3.2}", V_NOT_CAUGHT},
        {"first_launches_spmv.cu",
         "{\"ok\": false, \"error\": \"contract\", \"message\": \"timed launch\"}", V_NOT_CAUGHT},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(measures); i++) {
        cJSON *m = cJSON_Parse(measures[i].answer);
        cr_assert_not_null(m, "measure case %zu: bad JSON", i);
        const char *by = NULL;
        verdict d = judge_measure(find_cheat(measures[i].file), m, &by);
        cr_expect_eq(d, measures[i].want, "measure case %zu (%s): %s, expected %s", i,
                     measures[i].file, verdict_text(d), verdict_text(measures[i].want));
        cJSON_Delete(m);
    }
}
