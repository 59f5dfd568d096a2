/* test_nvrtc.c -- NVRTC loading, compiles to CUBIN, log parsing and the compile cache (no GPU). */
#include "tests/common/testutil.h"

#include "gpu/worker/nvrtc.h"

#include <glob.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- fixture ------------------------------------------------------------ */

static gpu_nvrtc *nv;
static char *cache_dir;

/* Every test gets its own cache folder, so that a first compile is never a
 * disk hit left by an earlier run and the user's cache is never touched. */
static void setup(void)
{
    cache_dir = tu_tmpdir();
    gpu_cache_set_dir(cache_dir);
}

static void teardown(void)
{
    gpu_cache_clear_memory();
    gpu_cache_set_dir(NULL);
    gpu_nvrtc_free(nv);
    nv = NULL;
    tu_rmtree(cache_dir);
    free(cache_dir);
    cache_dir = NULL;
}

static void need_nvrtc(void)
{
    dt_err e = {0};
    nv = gpu_nvrtc_load(&e);
    if (nv == NULL)
        cr_skip_test("NVRTC not loadable here: %s", e.msg);
}

TestSuite(nvrtc, .init = setup, .fini = teardown);

/* ---- helpers ------------------------------------------------------------ */

typedef struct opts {
    const char *arch;
    const char *const *options;
    int noptions;
    const char *const *names;
    int nnames;
} opts;

static gpu_cubin *compile_with(const char *src, opts o)
{
    gpu_compile_req req = {.source = src,
                           .arch = o.arch,
                           .options = o.options,
                           .noptions = o.noptions,
                           .names = o.names,
                           .nnames = o.nnames};
    gpu_cubin *c = NULL;
    dt_err e = {0};
    cr_assert_eq(gpu_compile(nv, &req, &c, &e), 0, "gpu_compile: %s", e.msg);
    cr_assert_not_null(c);
    return c;
}

static gpu_cubin *compile(const char *src)
{
    return compile_with(src, (opts){0});
}

/* All diagnostics, one per line, for assertion messages. */
static const char *dump(const gpu_cubin *c)
{
    static char buf[8192];
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < c->ndiags && n < sizeof buf; i++)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "[%s:%d:%d %s #%s] %s\n",
                              c->diags[i].file ? c->diags[i].file : "-", c->diags[i].line,
                              c->diags[i].column, c->diags[i].severity, c->diags[i].code,
                              c->diags[i].message);
    if (n < sizeof buf)
        snprintf(buf + n, sizeof buf - n, "log:\n%s", c->log ? c->log : "");
    return buf;
}

static int count_severity(const gpu_diag *d, int n, const char *severity)
{
    int k = 0;
    for (int i = 0; i < n; i++)
        k += strcmp(d[i].severity, severity) == 0;
    return k;
}

/* The first diagnostic of that severity whose message holds text. */
static const gpu_diag *find_diag(const gpu_diag *d, int n, const char *severity, const char *text)
{
    for (int i = 0; i < n; i++)
        if (strcmp(d[i].severity, severity) == 0 && strstr(d[i].message, text) != NULL)
            return &d[i];
    return NULL;
}

static const gpu_kinfo *find_kernel(const gpu_kinfo *k, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(k[i].name, name) == 0)
            return &k[i];
    return NULL;
}

static void assert_elf(const gpu_cubin *c)
{
    cr_assert(c->compiled, "%s", dump(c));
    cr_assert_not_null(c->image);
    cr_assert_gt(c->size, 64);
    cr_assert(memcmp(c->image, "\177ELF", 4) == 0, "CUBIN is not an ELF image");
}

static const char *good_src =
    "extern \"C\" __global__ void axpy(float a, const float *x, float *y, int n)\n"
    "{\n"
    "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        y[i] = a * x[i] + y[i];\n"
    "}\n";

/* ---- loading ------------------------------------------------------------ */

Test(nvrtc, load_should_report_version_path_and_builtins)
{
    need_nvrtc();
    int major = 0;
    int minor = 0;
    char tail = 0;
    cr_assert_eq(sscanf(gpu_nvrtc_version(nv), "%d.%d%c", &major, &minor, &tail), 2,
                 "version \"%s\"", gpu_nvrtc_version(nv));
    cr_assert_geq(major, 11);
    cr_assert(strstr(gpu_nvrtc_path(nv), "libnvrtc") != NULL, "%s", gpu_nvrtc_path(nv));
    const char *b = gpu_nvrtc_builtins_path(nv);
    cr_assert(strstr(b, "libnvrtc-builtins") != NULL, "%s", b);
    cr_assert(dt_file_exists(b), "%s", b);
}

Test(nvrtc, load_paths_should_list_every_candidate_with_its_reason)
{
    char *junk = tu_write(cache_dir, "libjunk.so", "not an ELF file at all, just text\n");
    const char *paths[] = {"/nonexistent-ditto/libnvrtc.so", junk, "libditto-no-such-lib.so.7",
                           "libm.so.6"};
    dt_err e = {0};
    gpu_nvrtc *got = gpu_nvrtc_load_paths(paths, 4, &e);
    cr_assert_null(got);
    for (int i = 0; i < 4; i++)
        cr_assert(strstr(e.msg, paths[i]) != NULL, "no %s in: %s", paths[i], e.msg);
    cr_assert(strstr(e.msg, "No such file") != NULL, "%s", e.msg);
    cr_assert(strstr(e.msg, "no symbol nvrtc") != NULL, "libm has no NVRTC: %s", e.msg);
    free(junk);
}

/* NVRTC looks for its builtins library only on the loader's path; loading
 * NVRTC by absolute path must pin the builtins file beside it. Symlinks in a
 * folder of their own stand in for a toolkit that is not on that path. */
Test(nvrtc, load_by_path_should_pin_builtins_from_the_same_folder)
{
    const char *home = getenv("CUDA_HOME");
    char *lib = dt_xasprintf("%s/lib64", home && *home ? home : "/usr/local/cuda");
    char *pat = dt_xasprintf("%s/libnvrtc-builtins.so.[0-9]*.[0-9]*", lib);
    glob_t g;
    if (glob(pat, 0, NULL, &g) != 0 || g.gl_pathc == 0)
        cr_skip_test("no libnvrtc-builtins.so.X.Y in %s", lib);
    char *real_nvrtc = dt_xasprintf("%s/libnvrtc.so", lib);
    if (!dt_file_exists(real_nvrtc))
        cr_skip_test("no %s", real_nvrtc);
    const char *real_builtins = g.gl_pathv[0];
    const char *base = strrchr(real_builtins, '/') + 1;
    char *link_nvrtc = dt_xasprintf("%s/libnvrtc.so", cache_dir);
    char *link_builtins = dt_xasprintf("%s/%s", cache_dir, base);
    cr_assert_eq(symlink(real_nvrtc, link_nvrtc), 0);
    cr_assert_eq(symlink(real_builtins, link_builtins), 0);

    /* Through $DITTO_NVRTC, the first place gpu_nvrtc_load looks. */
    cr_assert_eq(setenv("DITTO_NVRTC", link_nvrtc, 1), 0);
    dt_err e = {0};
    nv = gpu_nvrtc_load(&e);
    cr_assert_not_null(nv, "%s", e.msg);
    cr_assert_str_eq(gpu_nvrtc_path(nv), link_nvrtc);
    cr_assert_str_eq(gpu_nvrtc_builtins_path(nv), link_builtins);
    gpu_cubin *c = compile(good_src); /* builtins are needed by every compile */
    assert_elf(c);
    gpu_cubin_free(c);
    globfree(&g);
    free(lib);
    free(pat);
    free(real_nvrtc);
    free(link_nvrtc);
    free(link_builtins);
}

/* ---- compiling ---------------------------------------------------------- */

Test(nvrtc, correct_kernel_should_compile_for_sm80_and_sm90)
{
    need_nvrtc();
    const char *archs[] = {"sm_80", "sm_90"};
    for (int a = 0; a < 2; a++) {
        gpu_cubin *c = compile_with(good_src, (opts){.arch = archs[a]});
        assert_elf(c);
        cr_assert_eq(c->ndiags, 0, "%s", dump(c));
        cr_assert_eq(c->cached, 0);
        cr_assert_gt(c->seconds, 0.0);
        cr_assert_str_eq(c->arch, archs[a]);
        cr_assert_str_eq(c->nvrtc_version, gpu_nvrtc_version(nv));
        cr_assert_eq(strlen(c->hash), 16);
        cr_assert_eq(c->nkinfo, 1, "%s", dump(c));
        cr_assert_str_eq(c->kinfo[0].name, "axpy");
        cr_assert_gt(c->kinfo[0].registers, 0);
        cr_assert_eq(c->kinfo[0].barriers, 0);
        cr_assert_eq(c->kinfo[0].smem, 0);
        cr_assert(strstr(c->log, "Compiling entry function 'axpy'") != NULL, "%s", c->log);
        gpu_cubin_free(c);
    }
}

Test(nvrtc, default_arch_should_be_sm90_and_json_should_carry_the_answer)
{
    need_nvrtc();
    const char *names[] = {"axpy"};
    gpu_cubin *c = compile_with(good_src, (opts){.names = names, .nnames = 1});
    assert_elf(c);
    cr_assert_str_eq(c->arch, "sm_90");
    cr_assert(strstr(c->log, "for 'sm_90'") != NULL, "%s", c->log);
    cJSON *j = gpu_cubin_json(c);
    cr_assert(dt_json_bool(j, "compiled", 0));
    cr_assert_not(dt_json_bool(j, "cached", 1));
    cr_assert_str_eq(dt_json_str(j, "arch", ""), "sm_90");
    cr_assert_str_eq(dt_json_str(j, "nvrtc_version", ""), gpu_nvrtc_version(nv));
    cr_assert_str_eq(dt_json_str(j, "log", ""), c->log);
    cr_assert_gt(dt_json_num(j, "seconds", 0), 0.0);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "diagnostics")), 0);
    const cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "kernels"), 0);
    cr_assert_not_null(k);
    cr_assert_str_eq(dt_json_str(k, "name", ""), "axpy");
    cr_assert_str_eq(dt_json_str(k, "lowered", ""), "axpy");
    cr_assert_eq(dt_json_num(k, "registers", -1), c->kinfo[0].registers);
    const char *fields[] = {"smem", "cmem", "stack", "spill_stores", "spill_loads", "barriers"};
    for (size_t i = 0; i < DT_ARRAY_LEN(fields); i++)
        cr_assert(cJSON_IsNumber(cJSON_GetObjectItem(k, fields[i])), "no %s", fields[i]);
    cJSON_Delete(j);
    gpu_cubin_free(c);
}

Test(nvrtc, name_expressions_should_lower_to_mangled_names)
{
    need_nvrtc();
    const char *src = "template <int N> __global__ void scale(float *y) { y[threadIdx.x] *= N; }\n"
                      "__global__ void plain(float *y) { y[0] = 1.0f; }\n";
    const char *names[] = {"scale<4>", "scale<8>", "plain"};
    gpu_cubin *c = compile_with(src, (opts){.names = names, .nnames = 3});
    assert_elf(c);
    cr_assert_eq(c->nlowered, 3);
    cr_assert_str_eq(c->lowered[0], "_Z5scaleILi4EEvPf");
    cr_assert_str_eq(c->lowered[1], "_Z5scaleILi8EEvPf");
    cr_assert_str_eq(c->lowered[2], "_Z5plainPf");
    cr_assert_str_eq(c->names[0], "scale<4>");
    /* Instantiated only through the name expressions, yet compiled. */
    cr_assert_not_null(find_kernel(c->kinfo, c->nkinfo, "_Z5scaleILi8EEvPf"), "%s", c->log);
    cJSON *j = gpu_cubin_json(c);
    int seen = 0;
    const cJSON *k;
    cJSON_ArrayForEach(k, cJSON_GetObjectItem(j, "kernels"))
    {
        if (dt_streq(dt_json_str(k, "name", ""), "scale<4>")) {
            cr_assert_str_eq(dt_json_str(k, "lowered", ""), "_Z5scaleILi4EEvPf");
            seen++;
        }
    }
    cr_assert_eq(seen, 1, "no kernel named by its expression");
    cJSON_Delete(j);
    gpu_cubin_free(c);
}

Test(nvrtc, unknown_name_expression_should_be_diagnosed_and_lower_to_null)
{
    need_nvrtc();
    const char *src = "template <int N> __global__ void scale(float *y) { y[threadIdx.x] *= N; }\n";
    const char *names[] = {"scale<4>", "nothere"};
    gpu_cubin *c = compile_with(src, (opts){.names = names, .nnames = 2});
    cr_assert_not(c->compiled);
    cr_assert_eq(c->nlowered, 2);
    cr_assert_null(c->lowered[0]);
    cr_assert_null(c->lowered[1]);
    const gpu_diag *d = find_diag(c->diags, c->ndiags, "error", "\"nothere\"");
    cr_assert_not_null(d, "%s", dump(c));
    /* NVRTC compiles the expressions as a file of its own. */
    cr_assert_str_eq(d->file, "__nv_name_map");
    cr_assert(strstr(d->source_line, "nothere") != NULL, "echo, not the source: %s",
              d->source_line);
    gpu_cubin_free(c);
}

/* ---- broken sources ------------------------------------------------------ */

Test(nvrtc, undefined_identifier_should_give_line_column_and_source_line)
{
    need_nvrtc();
    const char *src = "__global__ void k(float *y)\n"
                      "{\n"
                      "  y[threadIdx.x] = foo;\n"
                      "}\n";
    gpu_cubin *c = compile(src);
    cr_assert_not(c->compiled);
    cr_assert_null(c->image);
    cr_assert_eq(c->ndiags, 1, "%s", dump(c));
    const gpu_diag *d = &c->diags[0];
    cr_assert_str_eq(d->file, "kernel.cu");
    cr_assert_eq(d->line, 3);
    cr_assert_eq(d->column, 20, "%s", dump(c));
    cr_assert_str_eq(d->severity, "error");
    cr_assert_str_eq(d->message, "identifier \"foo\" is undefined");
    cr_assert_str_eq(d->source_line, "  y[threadIdx.x] = foo;");
    /* NVRTC 13 prints no number for errors (only for -D diagnostics). */
    cr_assert_str_eq(d->code, "");
    cJSON *j = gpu_cubin_json(c);
    cr_assert_not(dt_json_bool(j, "compiled", 1));
    const cJSON *dj = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "diagnostics"), 0);
    cr_assert_eq(dt_json_num(dj, "line", 0), 3);
    cr_assert_eq(dt_json_num(dj, "column", 0), 20);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(dj, "code")));
    cr_assert_str_eq(dt_json_str(dj, "source_line", ""), "  y[threadIdx.x] = foo;");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(j, "kernels")), 0);
    cJSON_Delete(j);
    gpu_cubin_free(c);
}

Test(nvrtc, missing_semicolon_should_point_at_the_next_token)
{
    need_nvrtc();
    const char *src = "__global__ void k(float *y)\n"
                      "{\n"
                      "  y[0] = 1.0f\n"
                      "  y[1] = 2.0f;\n"
                      "}\n";
    gpu_cubin *c = compile_with(src, (opts){.arch = "sm_80"});
    cr_assert_not(c->compiled);
    const gpu_diag *d = find_diag(c->diags, c->ndiags, "error", "expected a \";\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 4, "%s", dump(c));
    cr_assert_eq(d->column, 3);
    cr_assert_str_eq(d->source_line, "  y[1] = 2.0f;");
    cr_assert_eq(count_severity(c->diags, c->ndiags, "error"), 1, "%s", dump(c));
    gpu_cubin_free(c);
}

Test(nvrtc, wrong_argument_type_and_overloads_should_keep_continuation_lines)
{
    need_nvrtc();
    const char *src = "__device__ float f(float *p) { return *p; }\n"
                      "__device__ float g(float a) { return a; }\n"
                      "__device__ float g(double a) { return a; }\n"
                      "__global__ void k(float *y, int *xi)\n"
                      "{\n"
                      "\ty[0] = f(xi);\n"
                      "\ty[1] = g(xi);\n"
                      "}\n";
    gpu_cubin *c = compile(src);
    cr_assert_not(c->compiled);
    cr_assert_eq(count_severity(c->diags, c->ndiags, "error"), 2, "%s", dump(c));
    const gpu_diag *d = find_diag(c->diags, c->ndiags, "error", "argument of type \"int *\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 6);
    cr_assert_eq(d->column, 11, "tab counts as one column: %s", dump(c));
    cr_assert_str_eq(d->source_line, "\ty[0] = f(xi);");
    d = find_diag(c->diags, c->ndiags, "error", "no instance of overloaded function \"g\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 7);
    cr_assert(strstr(d->message, "\nargument types are: (int *)") != NULL, "%s", d->message);
    /* The candidates come as notes on their own lines. */
    cr_assert_eq(count_severity(c->diags, c->ndiags, "note"), 2, "%s", dump(c));
    d = find_diag(c->diags, c->ndiags, "note", "g(double)");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 3);
    cr_assert_str_eq(d->code, "3326-D");
    gpu_cubin_free(c);
}

Test(nvrtc, warning_should_carry_its_code_and_not_stop_the_compile)
{
    need_nvrtc();
    const char *src = "__global__ void k(float *y)\n"
                      "{\n"
                      "    int unused;\n"
                      "    y[0] = 1.0f;\n"
                      "}\n";
    gpu_cubin *c = compile(src);
    assert_elf(c);
    cr_assert_eq(c->ndiags, 1, "%s", dump(c));
    const gpu_diag *d = &c->diags[0];
    cr_assert_str_eq(d->severity, "warning");
    cr_assert_str_eq(d->code, "177-D");
    cr_assert_eq(d->line, 3);
    cr_assert_eq(d->column, 9);
    cr_assert(strstr(d->message, "\"unused\" was declared but never referenced") != NULL);
    cr_assert_eq(c->nkinfo, 1, "ptxas report after a warning: %s", c->log);
    gpu_cubin_free(c);
}

Test(nvrtc, errors_on_first_and_last_line_should_both_be_found)
{
    need_nvrtc();
    /* No newline after the last line. */
    const char *src = "__device__ int a = undefined1;\n"
                      "__global__ void k(float *y) { y[0] = a; }\n"
                      "__global__ void k2(float *y) { y[0] = undefined2; }";
    gpu_cubin *c = compile(src);
    cr_assert_not(c->compiled);
    cr_assert_eq(count_severity(c->diags, c->ndiags, "error"), 2, "%s", dump(c));
    const gpu_diag *d = find_diag(c->diags, c->ndiags, "error", "\"undefined1\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 1);
    cr_assert_eq(d->column, 20);
    cr_assert_str_eq(d->source_line, "__device__ int a = undefined1;");
    d = find_diag(c->diags, c->ndiags, "error", "\"undefined2\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 3);
    cr_assert_str_eq(d->source_line, "__global__ void k2(float *y) { y[0] = undefined2; }");
    gpu_cubin_free(c);
}

Test(nvrtc, error_directive_should_be_fatal)
{
    need_nvrtc();
    const char *src = "// a comment\n"
                      "#error stop here\n"
                      "__global__ void k(float *y) { y[0] = nothing; }\n";
    gpu_cubin *c = compile(src);
    cr_assert_not(c->compiled);
    cr_assert_eq(c->ndiags, 1, "compilation stops at #error: %s", dump(c));
    cr_assert_str_eq(c->diags[0].severity, "fatal");
    cr_assert_eq(c->diags[0].line, 2);
    cr_assert(strstr(c->diags[0].message, "stop here") != NULL, "%s", dump(c));
    cr_assert_str_eq(c->diags[0].source_line, "#error stop here");
    gpu_cubin_free(c);
}

Test(nvrtc, unterminated_source_should_report_at_end_of_source)
{
    need_nvrtc();
    const char *src = "__global__ void k(float *y)\n"
                      "{\n"
                      "  y[0] = 1.0f;\n";
    gpu_cubin *c = compile(src);
    cr_assert_not(c->compiled);
    const gpu_diag *d =
        find_diag(c->diags, c->ndiags, "error", "at end of source: expected a \"}\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 0);
    cr_assert_null(d->file);
    d = find_diag(c->diags, c->ndiags, "note", "to match this \"{\"");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 2);
    gpu_cubin_free(c);
}

Test(nvrtc, unknown_option_should_give_a_diagnostic_without_a_line)
{
    need_nvrtc();
    const char *options[] = {"--no-such-option-ditto"};
    gpu_cubin *c = compile_with(good_src, (opts){.options = options, .noptions = 1});
    cr_assert_not(c->compiled);
    cr_assert_eq(c->ndiags, 1, "%s", dump(c));
    cr_assert_str_eq(c->diags[0].severity, "error");
    cr_assert_eq(c->diags[0].line, 0);
    cr_assert_null(c->diags[0].file);
    cr_assert_null(c->diags[0].source_line);
    cr_assert(strstr(c->diags[0].message, "--no-such-option-ditto") != NULL, "%s", dump(c));
    cJSON *j = gpu_cubin_json(c);
    const cJSON *dj = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "diagnostics"), 0);
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(dj, "line")));
    cr_assert(cJSON_IsNull(cJSON_GetObjectItem(dj, "file")));
    cJSON_Delete(j);
    gpu_cubin_free(c);
}

Test(nvrtc, bad_arch_should_be_diagnosed_not_fail_the_call)
{
    need_nvrtc();
    gpu_cubin *c = compile_with(good_src, (opts){.arch = "compute_90"});
    cr_assert_not(c->compiled);
    const gpu_diag *d = find_diag(c->diags, c->ndiags, "error", "arch must be a real sm_XX");
    cr_assert_not_null(d, "%s", dump(c));
    cr_assert_eq(d->line, 0);
    gpu_cubin_free(c);
    c = compile_with(good_src, (opts){.arch = "sm_1"});
    cr_assert_not(c->compiled);
    cr_assert_not_null(find_diag(c->diags, c->ndiags, "error", "--gpu-architecture"), "%s",
                       dump(c));
    gpu_cubin_free(c);
}

/* NVRTC 13.0 fails this compile with an empty error log (nvcc would print
 * ptxas' "uses too much shared data"): the result must still say why. */
Test(nvrtc, silent_failure_should_still_carry_an_error)
{
    need_nvrtc();
    const char *src = "extern \"C\" __global__ void big(float *y)\n"
                      "{\n"
                      "    __shared__ float t[20000];\n"
                      "    t[threadIdx.x] = y[threadIdx.x];\n"
                      "    __syncthreads();\n"
                      "    y[threadIdx.x] = t[threadIdx.x + 1];\n"
                      "}\n";
    gpu_cubin *c = compile(src);
    cr_assert_not(c->compiled);
    cr_assert_geq(count_severity(c->diags, c->ndiags, "error") +
                      count_severity(c->diags, c->ndiags, "fatal"),
                  1, "%s", dump(c));
    if (find_diag(c->diags, c->ndiags, "error", "NVRTC's log names no error") != NULL)
        cr_assert_not_null(find_diag(c->diags, c->ndiags, "error", "80000 bytes of static shared"),
                           "%s", dump(c));
    gpu_cubin_free(c);
}

Test(nvrtc, misuse_should_fail_the_call)
{
    need_nvrtc();
    gpu_cubin dummy;
    gpu_cubin *c = &dummy; /* must be reset to NULL */
    dt_err e = {0};
    gpu_compile_req req = {.source = NULL};
    cr_assert_eq(gpu_compile(nv, &req, &c, &e), -1);
    cr_assert_null(c);
    cr_assert(e.msg[0] != '\0');
    const char *options[] = {"-DX=1", NULL};
    req = (gpu_compile_req){.source = good_src, .options = options, .noptions = 2};
    cr_assert_eq(gpu_compile(nv, &req, &c, &e), -1);
    cr_assert(strstr(e.msg, "option 1") != NULL, "%s", e.msg);
}

/* ---- the ptxas report from real compiles --------------------------------- */

Test(nvrtc, ptxas_report_should_give_per_kernel_resources)
{
    need_nvrtc();
    const char *src =
        "extern \"C\" __global__ void plain(float *y, const float *x, int n)\n"
        "{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) y[i] = 2.0f * x[i];\n"
        "}\n"
        "extern \"C\" __global__ void tiled(float *y, const float *x)\n"
        "{\n"
        "    __shared__ float tile[128];\n"
        "    tile[threadIdx.x] = x[threadIdx.x];\n"
        "    __syncthreads();\n"
        "    y[threadIdx.x] = tile[127 - threadIdx.x];\n"
        "}\n"
        "extern \"C\" __global__ void local(float *y, const int *idx)\n"
        "{\n"
        "    float a[64];\n"
        "    a[idx[0]] = y[1];\n"
        "    a[idx[1]] = y[2];\n"
        "    y[threadIdx.x] = a[idx[threadIdx.x]];\n"
        "}\n"
        "extern \"C\" __global__ void heavy(float *y, const float *x, int n)\n"
        "{\n"
        "    float acc[32];\n"
        "#pragma unroll\n"
        "    for (int j = 0; j < 32; j++) acc[j] = x[threadIdx.x + j * n];\n"
        "    float s = 0;\n"
        "#pragma unroll\n"
        "    for (int r = 0; r < 8; r++)\n"
        "#pragma unroll\n"
        "        for (int j = 0; j < 32; j++) s += acc[j] * acc[(j + r) & 31];\n"
        "#pragma unroll\n"
        "    for (int j = 0; j < 32; j++) y[threadIdx.x + j * n] = acc[j] * s;\n"
        "}\n";
    gpu_cubin *c = compile_with(src, (opts){.arch = "sm_80"});
    assert_elf(c);
    cr_assert_eq(c->nkinfo, 4, "%s", c->log);
    for (int i = 0; i < c->nkinfo; i++) {
        cr_assert_gt(c->kinfo[i].registers, 0, "%s", c->kinfo[i].name);
        cr_assert_gt(c->kinfo[i].cmem, 0, "sm_80 reports cmem[0]: %s", c->log);
    }
    const gpu_kinfo *k = find_kernel(c->kinfo, c->nkinfo, "tiled");
    cr_assert_not_null(k);
    cr_assert_eq(k->barriers, 1, "%s", c->log);
    cr_assert_eq(k->smem, 128 * 4, "%s", c->log);
    k = find_kernel(c->kinfo, c->nkinfo, "plain");
    cr_assert_eq(k->barriers, 0);
    cr_assert_eq(k->smem, 0);
    cr_assert_eq(k->stack, 0);
    k = find_kernel(c->kinfo, c->nkinfo, "local");
    cr_assert_geq(k->stack, 64 * 4, "dynamically indexed local array: %s", c->log);
    k = find_kernel(c->kinfo, c->nkinfo, "heavy");
    cr_assert_eq(k->spill_stores, 0, "%s", c->log);
    int regs = k->registers;
    gpu_cubin_free(c);

    /* The same source capped at 16 registers (ptxas raises the cap to its
     * lower bound, 24 on sm_90) must spill in heavy. */
    const char *options[] = {"--maxrregcount=16"};
    c = compile_with(src, (opts){.arch = "sm_90", .options = options, .noptions = 1});
    assert_elf(c);
    k = find_kernel(c->kinfo, c->nkinfo, "heavy");
    cr_assert_not_null(k, "%s", c->log);
    cr_assert_lt(k->registers, regs);
    cr_assert_gt(k->spill_stores, 0, "%s", c->log);
    cr_assert_gt(k->spill_loads, 0, "%s", c->log);
    cr_assert_gt(k->stack, 0, "spills live in the stack frame");
    /* ptxas warnings have no source line. */
    for (int i = 0; i < c->ndiags; i++) {
        cr_assert_str_eq(c->diags[i].severity, "warning", "%s", dump(c));
        cr_assert_eq(c->diags[i].line, 0);
    }
    gpu_cubin_free(c);
}

/* ---- gpu_parse_log on fixed text: the formats, pinned -------------------- */

static void parse(const char *log, const char *src, gpu_diag **d, int *nd, gpu_kinfo **k, int *nk)
{
    *d = NULL;
    *k = NULL;
    *nd = 0;
    *nk = 0;
    gpu_parse_log(log, src, d, nd, k, nk);
}

Test(parse, front_end_diagnostics_should_give_line_column_code_and_text)
{
    const char *src = "__global__ void k(float *y)\n"
                      "{\n"
                      "  int x;\n"
                      "  y[threadIdx.x] = foo\n"
                      "}\n";
    /* As NVRTC 13.0 prints it, plus an "error #20" as older front ends do. */
    const char *log = "kernel.cu(4): error #20: identifier \"foo\" is undefined\n"
                      "    y[threadIdx.x] = foo\n"
                      "                     ^\n"
                      "\n"
                      "kernel.cu(5): error: expected a \";\"\n"
                      "  }\n"
                      "  ^\n"
                      "\n"
                      "kernel.cu(3): warning #177-D: variable \"x\" was declared but never "
                      "referenced\n"
                      "    int x;\n"
                      "        ^\n"
                      "\n"
                      "Remark: The warnings can be suppressed with \"-diag-suppress "
                      "<warning-number>\"\n"
                      "\n"
                      "2 errors detected in the compilation of \"kernel.cu\".\n";
    gpu_diag *d;
    gpu_kinfo *k;
    int nd, nk;
    parse(log, src, &d, &nd, &k, &nk);
    cr_assert_eq(nd, 3);
    cr_assert_eq(nk, 0);
    cr_assert_str_eq(d[0].file, "kernel.cu");
    cr_assert_eq(d[0].line, 4);
    cr_assert_eq(d[0].column, 20);
    cr_assert_str_eq(d[0].severity, "error");
    cr_assert_str_eq(d[0].code, "20");
    cr_assert_str_eq(d[0].message, "identifier \"foo\" is undefined");
    cr_assert_str_eq(d[0].source_line, "  y[threadIdx.x] = foo");
    cr_assert_eq(d[1].line, 5);
    cr_assert_eq(d[1].column, 1);
    cr_assert_str_eq(d[1].code, "");
    cr_assert_str_eq(d[1].message, "expected a \";\"");
    cr_assert_str_eq(d[1].source_line, "}");
    cr_assert_str_eq(d[2].severity, "warning");
    cr_assert_str_eq(d[2].code, "177-D");
    cr_assert_eq(d[2].column, 7);
    gpu_diags_free(d, nd);
    gpu_kinfo_free(k, nk);
}

Test(parse, continuation_and_context_lines_should_join_the_message)
{
    const char *log =
        "kernel.cu(7): error: no instance of overloaded function \"g\" matches the argument list\n"
        "            argument types are: (int *)\n"
        "    y[1] = g(xi);\n"
        "           ^\n"
        "kernel.cu(3): note #3326-D: function \"g(double)\" does not match because argument #1 "
        "does not match parameter\n"
        "  __device__ float g(double a) { return a; }\n"
        "                   ^\n"
        "\n"
        "kernel.cu(1): error: expression must have pointer-to-class type but it has type "
        "\"float *\"\n"
        "  template <typename T> __device__ void t(T *y) { y[0] = y->member; }\n"
        "                                                         ^\n"
        "          detected during instantiation of \"void t(T *) [with T=float]\" at line 3\n"
        "\n"
        "At end of source: error: expected a \"}\"\n"
        "kernel.cu(5): note #3196-D: to match this \"{\"\n"
        "  __global__ void k(float *y, int *xi) {\n"
        "                                       ^\n"
        "\n"
        "kernel.cu(1): catastrophic error: #error directive: stop here\n"
        "  #error stop here\n"
        "   ^\n"
        "\n"
        "1 catastrophic error detected in the compilation of \"kernel.cu\".\n"
        "Compilation terminated.\n";
    gpu_diag *d;
    gpu_kinfo *k;
    int nd, nk;
    parse(log, NULL, &d, &nd, &k, &nk);
    cr_assert_eq(nd, 6);
    cr_assert_str_eq(d[0].message, "no instance of overloaded function \"g\" matches the argument "
                                   "list\nargument types are: (int *)");
    cr_assert_str_eq(d[0].source_line, "  y[1] = g(xi);", "without source: the echo");
    cr_assert_eq(d[0].column, 10);
    cr_assert_str_eq(d[1].severity, "note");
    cr_assert_str_eq(d[1].code, "3326-D");
    cr_assert_eq(d[1].line, 3);
    cr_assert_eq(d[1].column, 18);
    cr_assert(dt_endswith(d[2].message, "\"float *\"\ndetected during instantiation of \"void "
                                        "t(T *) [with T=float]\" at line 3"),
              "%s", d[2].message);
    cr_assert_eq(d[2].column, 56);
    cr_assert_str_eq(d[3].message, "at end of source: expected a \"}\"");
    cr_assert_eq(d[3].line, 0);
    cr_assert_null(d[3].file);
    cr_assert_null(d[3].source_line);
    cr_assert_eq(d[3].column, 0);
    cr_assert_str_eq(d[4].severity, "note");
    cr_assert_eq(d[4].line, 5);
    cr_assert_str_eq(d[5].severity, "fatal");
    cr_assert_str_eq(d[5].message, "#error directive: stop here");
    cr_assert_eq(d[5].column, 2);
    gpu_diags_free(d, nd);
    gpu_kinfo_free(k, nk);
}

Test(parse, odd_file_names_tabs_and_foreign_files_should_parse)
{
    const char *src = "#include \"inc.h\"\n"
                      "__global__ void k(float *y)\n"
                      "{\n"
                      "\ty[0] = 1.0f\t+ bar;\n"
                      "}\n";
    const char *log = "kernel.cu(4): error: identifier \"bar\" is undefined\n"
                      "  \ty[0] = 1.0f\t+ bar;\n"
                      "  \t           \t  ^\n"
                      "\n"
                      "dir (v2)/inc.h(2): warning: something in a header\n"
                      "  int header_line_two;\n"
                      "      ^\n"
                      "\n"
                      "nvrtc: error: invalid value for --gpu-architecture (-arch)\n"
                      "nvrtc: warning : a spaced warning\n";
    gpu_diag *d;
    gpu_kinfo *k;
    int nd, nk;
    parse(log, src, &d, &nd, &k, &nk);
    cr_assert_eq(nd, 4);
    cr_assert_eq(d[0].line, 4);
    cr_assert_eq(d[0].column, 16, "tabs are one byte each");
    cr_assert_str_eq(d[0].source_line, "\ty[0] = 1.0f\t+ bar;");
    cr_assert_str_eq(d[1].file, "dir (v2)/inc.h");
    cr_assert_eq(d[1].line, 2);
    /* Line 2 of the source is not the header's line 2: keep the echo. */
    cr_assert_str_eq(d[1].source_line, "int header_line_two;");
    cr_assert_null(d[2].file);
    cr_assert_eq(d[2].line, 0);
    cr_assert_str_eq(d[2].severity, "error");
    cr_assert_str_eq(d[2].message, "invalid value for --gpu-architecture (-arch)");
    cr_assert_str_eq(d[3].severity, "warning");
    cr_assert_str_eq(d[3].message, "a spaced warning");
    gpu_diags_free(d, nd);
    gpu_kinfo_free(k, nk);
}

Test(parse, ptxas_blocks_should_give_kinfo_in_any_field_order)
{
    /* NVRTC 13.0 (sm_80): stack line behind "ptxas   .", cmem last. */
    const char *nvrtc13 =
        "ptxas info    : 0 bytes gmem, 1024 bytes cmem[3]\n"
        "ptxas info    : Compiling entry function 'tiled' for 'sm_80'\n"
        "ptxas info    : Function properties for tiled\n"
        "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 12 registers, used 1 barriers, 512 bytes smem, 368 bytes cmem[0]\n"
        "ptxas info    : Compile time = 7.490 ms\n"
        "ptxas info    : Compiling entry function 'heavy' for 'sm_80'\n"
        "ptxas info    : Function properties for heavy\n"
        "ptxas         .     904 bytes stack frame, 952 bytes spill stores, 1336 bytes spill "
        "loads\n"
        "ptxas info    : Used 24 registers, used 0 barriers, 904 bytes cumulative stack size\n"
        "ptxas info    : Compile time = 54.805 ms\n"
        "ptxas info    : Function properties for _Z6helperPfi\n"
        "ptxas         .     48 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n";
    /* nvcc / older ptxas: unprefixed stack line, cmem before smem, no
     * barriers, properties announced before the entry. */
    const char *older =
        "ptxas info    : Function properties for _Z3fooPf\n"
        "    16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n"
        "ptxas info    : Compiling entry function '_Z3fooPf' for 'sm_70'\n"
        "ptxas info    : Used 28 registers, 400 bytes cmem[0], 8 bytes cmem[2], 4 bytes smem\n";
    gpu_diag *d;
    gpu_kinfo *k;
    int nd, nk;
    parse(nvrtc13, NULL, &d, &nd, &k, &nk);
    cr_assert_eq(nd, 0);
    cr_assert_eq(nk, 2, "a non-entry function is not a kernel");
    cr_assert_str_eq(k[0].name, "tiled");
    cr_assert_eq(k[0].registers, 12);
    cr_assert_eq(k[0].barriers, 1);
    cr_assert_eq(k[0].smem, 512);
    cr_assert_eq(k[0].cmem, 368);
    cr_assert_eq(k[0].stack, 0);
    cr_assert_str_eq(k[1].name, "heavy");
    cr_assert_eq(k[1].registers, 24);
    cr_assert_eq(k[1].stack, 904);
    cr_assert_eq(k[1].spill_stores, 952);
    cr_assert_eq(k[1].spill_loads, 1336);
    cr_assert_eq(k[1].cmem, 0);
    /* Appends to what is there. */
    gpu_parse_log(older, NULL, &d, &nd, &k, &nk);
    cr_assert_eq(nk, 3);
    cr_assert_str_eq(k[2].name, "_Z3fooPf");
    cr_assert_eq(k[2].registers, 28);
    cr_assert_eq(k[2].cmem, 400, "cmem[2] is another bank");
    cr_assert_eq(k[2].smem, 4);
    cr_assert_eq(k[2].barriers, 0);
    cr_assert_eq(k[2].stack, 16);
    cr_assert_eq(k[2].spill_stores, 4);
    cr_assert_eq(k[2].spill_loads, 8);
    gpu_diags_free(d, nd);
    gpu_kinfo_free(k, nk);
}

Test(parse, ptxas_messages_should_be_diagnostics_without_a_line)
{
    const char *log =
        "ptxas warning : For profile sm_90 adjusting per thread register count of 16 to lower "
        "bound of 24\n"
        "ptxas info    : Overriding maximum register limit 256 for 'heavy' with  24 of "
        "maxrregcount option\n"
        "ptxas application ptx input, line 27; error   : Unknown modifier '.instr'\n"
        "ptxas error   : Entry function 'big' uses too much shared data (0x13880 bytes, 0xc000 "
        "max)\n"
        "ptxas fatal   : Ptx assembly aborted due to errors\n";
    gpu_diag *d;
    gpu_kinfo *k;
    int nd, nk;
    parse(log, "int x;\n", &d, &nd, &k, &nk);
    cr_assert_eq(nd, 4);
    cr_assert_eq(nk, 0);
    cr_assert_str_eq(d[0].severity, "warning");
    cr_assert(dt_startswith(d[0].message, "For profile sm_90 adjusting"));
    cr_assert_str_eq(d[1].severity, "error");
    cr_assert_str_eq(d[1].message, "Unknown modifier '.instr' (PTX line 27)");
    cr_assert_str_eq(d[2].severity, "error");
    cr_assert(dt_startswith(d[2].message, "Entry function 'big' uses too much shared data"));
    cr_assert_str_eq(d[3].severity, "fatal");
    for (int i = 0; i < nd; i++) {
        cr_assert_eq(d[i].line, 0);
        cr_assert_null(d[i].file);
        cr_assert_null(d[i].source_line);
    }
    gpu_diags_free(d, nd);
    gpu_kinfo_free(k, nk);
}

Test(parse, empty_and_unrelated_text_should_give_nothing)
{
    const char *log = "\n\n   \nsome text(12) that is not: a diagnostic\n"
                      "kernel.cu(3): errors: not a severity\n"
                      "kernel.cu(x): error: no line number\n"
                      "(4): error: no file name\n";
    gpu_diag *d;
    gpu_kinfo *k;
    int nd, nk;
    parse(log, NULL, &d, &nd, &k, &nk);
    cr_assert_eq(nd, 0, "%s", nd ? d[0].message : "");
    cr_assert_eq(nk, 0);
    parse("", NULL, &d, &nd, &k, &nk);
    cr_assert_eq(nd, 0);
    gpu_diags_free(d, nd);
    gpu_kinfo_free(k, nk);
}

/* ---- the cache ------------------------------------------------------------ */

static char *cache_file(const gpu_cubin *c, const char *ext)
{
    return dt_xasprintf("%s/%s.%s", cache_dir, c->hash, ext);
}

/* A recompile differs from the first compile only in its log (ptxas prints
 * its compile time); a cache hit matches it byte for byte. */
static void assert_same_result(const gpu_cubin *a, const gpu_cubin *b, int hit)
{
    cr_assert_str_eq(a->hash, b->hash);
    cr_assert_eq(a->size, b->size);
    cr_assert(memcmp(a->image, b->image, a->size) == 0);
    if (hit)
        cr_assert_str_eq(a->log, b->log);
    cr_assert_eq(a->nkinfo, b->nkinfo);
    for (int i = 0; i < a->nkinfo; i++) {
        cr_assert_str_eq(a->kinfo[i].name, b->kinfo[i].name);
        cr_assert_eq(a->kinfo[i].registers, b->kinfo[i].registers);
        cr_assert_eq(a->kinfo[i].smem, b->kinfo[i].smem);
        cr_assert_eq(a->kinfo[i].cmem, b->kinfo[i].cmem);
        cr_assert_eq(a->kinfo[i].barriers, b->kinfo[i].barriers);
        cr_assert_eq(a->kinfo[i].stack, b->kinfo[i].stack);
    }
    cr_assert_eq(a->ndiags, b->ndiags);
    for (int i = 0; i < a->ndiags; i++) {
        cr_assert_str_eq(a->diags[i].message, b->diags[i].message);
        cr_assert_str_eq(a->diags[i].severity, b->diags[i].severity);
        cr_assert_str_eq(a->diags[i].code, b->diags[i].code);
        cr_assert_eq(a->diags[i].line, b->diags[i].line);
        cr_assert_eq(a->diags[i].column, b->diags[i].column);
        cr_assert_str_eq(a->diags[i].file, b->diags[i].file);
        cr_assert_str_eq(a->diags[i].source_line, b->diags[i].source_line);
    }
    cr_assert_eq(a->nlowered, b->nlowered);
    for (int i = 0; i < a->nlowered; i++) {
        cr_assert_str_eq(a->lowered[i], b->lowered[i]);
        cr_assert_str_eq(a->names[i], b->names[i]);
    }
    cr_assert_str_eq(a->arch, b->arch);
}

/* A source with a warning, so that diagnostics make the round trip too. */
static const char *warn_src = "template <int N> __global__ void scale(float *y)\n"
                              "{\n"
                              "    int unused;\n"
                              "    y[threadIdx.x] *= N;\n"
                              "}\n";
static const char *warn_names[] = {"scale<2>"};

Test(nvrtc, cache_should_hit_memory_then_disk)
{
    need_nvrtc();
    opts o = {.names = warn_names, .nnames = 1};
    gpu_cubin *a = compile_with(warn_src, o);
    assert_elf(a);
    cr_assert_eq(a->ndiags, 1, "%s", dump(a));
    cr_assert_eq(a->cached, 0);
    char *bin = cache_file(a, "cubin");
    char *meta = cache_file(a, "json");
    cr_assert(dt_file_exists(bin) && dt_file_exists(meta), "%s", bin);

    gpu_cubin *b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 1);
    cr_assert_eq(b->seconds, 0.0);
    cr_assert_neq(b->image, a->image, "a deep copy");
    assert_same_result(a, b, 1);
    cJSON *j = gpu_cubin_json(b);
    cr_assert(dt_json_bool(j, "cached", 0));
    cr_assert_eq(dt_json_num(j, "seconds", -1), 0.0);
    cJSON_Delete(j);
    gpu_cubin_free(b);

    /* The memory copy must be independent of what was handed out. */
    memset(a->image, 0, a->size);
    gpu_cubin_free(a);
    a = compile_with(warn_src, o);
    cr_assert(memcmp(a->image, "\177ELF", 4) == 0);

    gpu_cache_clear_memory();
    b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 1, "from disk");
    cr_assert_eq(b->seconds, 0.0);
    assert_same_result(a, b, 1);
    gpu_cubin_free(b);
    /* And that disk hit now sits in memory. */
    remove(bin);
    remove(meta);
    b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 1);
    gpu_cubin_free(b);
    gpu_cubin_free(a);
    free(bin);
    free(meta);
}

Test(nvrtc, cache_should_ignore_corrupt_files_and_recompile)
{
    need_nvrtc();
    opts o = {.names = warn_names, .nnames = 1};
    gpu_cubin *a = compile_with(warn_src, o);
    assert_elf(a);
    char *bin = cache_file(a, "cubin");
    char *meta = cache_file(a, "json");
    size_t metalen = 0;
    char *good_meta = dt_read_file(meta, &metalen, NULL);
    cr_assert_not_null(good_meta);
    dt_err e = {0};

    /* A truncated .cubin. */
    cr_assert_eq(dt_write_file_atomic(bin, a->image, a->size / 2, &e), 0, "%s", e.msg);
    gpu_cache_clear_memory();
    gpu_cubin *b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 0, "truncated cubin must not be served");
    assert_same_result(a, b, 0);
    gpu_cubin_free(b);
    size_t len = 0;
    char *img = dt_read_file(bin, &len, NULL);
    cr_assert_eq(len, a->size, "the recompile rewrote the entry");
    free(img);

    /* A .cubin of the right size with one byte changed. */
    char *flipped = dt_xmalloc(a->size);
    memcpy(flipped, a->image, a->size);
    flipped[a->size / 2] ^= 0x5a;
    cr_assert_eq(dt_write_file_atomic(bin, flipped, a->size, &e), 0, "%s", e.msg);
    free(flipped);
    gpu_cache_clear_memory();
    b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 0, "altered cubin must not be served");
    gpu_cubin_free(b);

    /* A .json that is not JSON, then JSON of the wrong shape. */
    const char *bad[] = {"{\"format\": 1, \"key\": tru", "[1, 2, 3]",
                         "{\"format\": 1, \"key\": \"0000000000000000\"}"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cr_assert_eq(dt_write_file_atomic(meta, bad[i], strlen(bad[i]), &e), 0, "%s", e.msg);
        gpu_cache_clear_memory();
        b = compile_with(warn_src, o);
        cr_assert_eq(b->cached, 0, "bad json %zu must not be served", i);
        assert_same_result(a, b, 0);
        gpu_cubin_free(b);
    }
    /* A diagnostic with a wrongly typed field. */
    cJSON *m = dt_json_parse(good_meta, metalen, "meta", &e);
    cr_assert_not_null(m, "%s", e.msg);
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "diagnostics"), 0);
    cr_assert_not_null(d0);
    dt_json_set_str(d0, "line", "three");
    char *text = dt_json_print(m, 0);
    cr_assert_eq(dt_write_file_atomic(meta, text, strlen(text), &e), 0, "%s", e.msg);
    gpu_cache_clear_memory();
    b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 0, "mistyped field must not be served");
    gpu_cubin_free(b);
    /* After all that, the entry on disk is whole again. */
    gpu_cache_clear_memory();
    b = compile_with(warn_src, o);
    cr_assert_eq(b->cached, 1);
    assert_same_result(a, b, 0); /* written by the last recompile */
    gpu_cubin_free(b);
    cJSON_Delete(m);
    free(text);
    free(good_meta);
    free(bin);
    free(meta);
    gpu_cubin_free(a);
}

Test(nvrtc, cache_key_should_cover_options_arch_name_and_names)
{
    need_nvrtc();
    const char *d1[] = {"-DSCALE=1"};
    const char *d2[] = {"-DSCALE=2"};
    const char *names2[] = {"scale<3>"};
    opts variants[] = {
        {.names = warn_names, .nnames = 1},
        {.names = warn_names, .nnames = 1, .options = d1, .noptions = 1},
        {.names = warn_names, .nnames = 1, .options = d2, .noptions = 1},
        {.names = warn_names, .nnames = 1, .arch = "sm_80"},
        {.names = names2, .nnames = 1},
    };
    char hashes[DT_ARRAY_LEN(variants)][17];
    for (size_t i = 0; i < DT_ARRAY_LEN(variants); i++) {
        gpu_cubin *c = compile_with(warn_src, variants[i]);
        assert_elf(c);
        cr_assert_eq(c->cached, 0, "variant %zu was served from the cache", i);
        snprintf(hashes[i], sizeof hashes[i], "%s", c->hash);
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(hashes[i], hashes[j]);
        gpu_cubin_free(c);
    }
    /* The file name given to NVRTC is part of the key too. */
    gpu_compile_req req = {.source = warn_src, .name = "other.cu", .names = warn_names,
                           .nnames = 1};
    gpu_cubin *c = NULL;
    dt_err e = {0};
    cr_assert_eq(gpu_compile(nv, &req, &c, &e), 0, "%s", e.msg);
    cr_assert_eq(c->cached, 0);
    cr_assert_str_eq(c->diags[0].file, "other.cu");
    gpu_cubin_free(c);
}

/* A header the source includes from an --include-path folder is part of
 * the key: after it changes, the old cubin must not be served. */
Test(nvrtc, cache_key_should_cover_included_headers)
{
    need_nvrtc();
    char *dir = tu_tmpdir();
    char *hdr = dt_xasprintf("%s/scale.cuh", dir);
    char *inc = dt_xasprintf("--include-path=%s", dir);
    const char *src = "#include \"scale.cuh\"\n"
                      "__global__ void scale(float *y) { y[threadIdx.x] *= SCALE; }\n";
    const char *o1[] = {inc};
    opts o = {.options = o1, .noptions = 1};
    dt_err e = {0};
    cr_assert_eq(dt_write_file_atomic(hdr, "#define SCALE 2\n", 16, &e), 0, "%s", e.msg);
    gpu_cubin *a = compile_with(src, o);
    assert_elf(a);
    cr_assert_eq(a->cached, 0);
    gpu_cubin *b = compile_with(src, o);
    cr_assert_eq(b->cached, 1, "same header: a cache hit");
    gpu_cubin_free(b);
    cr_assert_eq(dt_write_file_atomic(hdr, "#define SCALE 3\n", 16, &e), 0, "%s", e.msg);
    b = compile_with(src, o);
    assert_elf(b);
    cr_assert_eq(b->cached, 0, "the header changed: the old cubin was served");
    cr_assert_str_neq(a->hash, b->hash);
    gpu_cubin_free(b);
    gpu_cubin_free(a);
    free(inc);
    free(hdr);
    tu_rmtree(dir);
    free(dir);
}

Test(nvrtc, failed_compiles_should_be_cached_in_memory_only)
{
    need_nvrtc();
    const char *src = "__global__ void k(float *y) { y[0] = nope; }\n";
    gpu_cubin *a = compile(src);
    cr_assert_not(a->compiled);
    char *meta = cache_file(a, "json");
    char *bin = cache_file(a, "cubin");
    cr_assert_not(dt_file_exists(meta));
    cr_assert_not(dt_file_exists(bin));
    gpu_cubin *b = compile(src);
    cr_assert_eq(b->cached, 1);
    cr_assert_eq(b->ndiags, a->ndiags);
    cr_assert_str_eq(b->diags[0].message, a->diags[0].message);
    gpu_cubin_free(b);
    gpu_cache_clear_memory();
    b = compile(src);
    cr_assert_eq(b->cached, 0);
    gpu_cubin_free(b);
    gpu_cubin_free(a);
    free(meta);
    free(bin);
}

/* The memory cache is bounded: the least recently used entry goes first.
 * #error sources stop in the preprocessor, so 66 compiles stay cheap. */
Test(nvrtc, memory_cache_should_evict_the_least_recently_used)
{
    need_nvrtc();
    char src[64];
    gpu_cubin *c;
    for (int i = 0; i < 65; i++) {
        if (i == 64) {
            snprintf(src, sizeof src, "#error e%d\n", 0);
            c = compile(src); /* touch 0 again: now 1 is the oldest */
            cr_assert_eq(c->cached, 1);
            gpu_cubin_free(c);
        }
        snprintf(src, sizeof src, "#error e%d\n", i);
        c = compile(src);
        cr_assert_eq(c->cached, 0);
        gpu_cubin_free(c);
    }
    snprintf(src, sizeof src, "#error e%d\n", 0);
    c = compile(src);
    cr_assert_eq(c->cached, 1, "recently used entry was evicted");
    gpu_cubin_free(c);
    snprintf(src, sizeof src, "#error e%d\n", 1);
    c = compile(src);
    cr_assert_eq(c->cached, 0, "the cache is not bounded at 64");
    gpu_cubin_free(c);
}
