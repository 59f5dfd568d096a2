/* test_export.c -- `ditto export` on synthetic sessions: what it writes, which kernel it
 * picks, and that the harness it writes builds with nvcc (no GPU needed to build; running
 * it needs one and is not done here). */
#include "tests/export/extest.h"

#include "export/export.h"
#include "gpu/contract.h"
#include "sparse/sparse.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void has(const char *text, const char *what, const char *needle)
{
    cr_assert(strstr(text, needle), "%s lacks '%s':\n%s", what, needle, text);
}

static void lacks(const char *text, const char *what, const char *needle)
{
    cr_assert(!strstr(text, needle), "%s has '%s':\n%s", what, needle, text);
}

/* Export the fixture's session into f->out, asserting success. */
static void export_ok(const ex_fix *f, const char *extra)
{
    char *args = dt_xasprintf("--out '%s' %s", f->out, extra ? extra : "");
    tu_proc p = ex_export(f, args);
    free(args);
    ex_no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "exit %d\nstdout: %s\nstderr: %s", p.status, p.out, p.err);
    has(p.out, "stdout", "exported session");
    tu_proc_free(&p);
}

/* `make` in the output folder, then ./harness must exist and be executable. */
static void builds_with_nvcc(const ex_fix *f)
{
    if (!ex_have_nvcc())
        cr_skip_test("nvcc is not on PATH: the exported harness's build is not tested");
    tu_proc p = tu_run("make -C '%s' 2>&1", f->out);
    cr_assert_eq(p.status, 0, "make failed (exit %d):\n%s", p.status, p.out);
    cr_assert_null(strstr(p.out, "warning"), "nvcc warns:\n%s", p.out);
    tu_proc_free(&p);
    char *exe = dt_xasprintf("%s/harness", f->out);
    struct stat st;
    cr_assert_eq(stat(exe, &st), 0, "no %s after make", exe);
    cr_assert(st.st_mode & S_IXUSR, "%s is not executable", exe);
    free(exe);
}

static const ex_opts spmm_opts = {
    .spec = "{\"op\": \"spmm\", \"matrix\": \"gen:uniform:rows=300,nnz=2400,seed=3\", "
            "\"dtype\": \"fp32\", \"n\": 40, \"alpha\": 1.5, \"beta\": 0.5, \"epilogue\": "
            "\"relu\"}",
    .strategy = "spmm-row",
    .v = {{.source = ex_spmm_source, .params = "{\"WARPS\": 8}", .us = 20.0}},
    .nversions = 1,
    .method = "graph",
    .baseline = "CSR_ALG2",
};

Test(export, an_spmv_kernel_should_come_out_standalone_with_its_contract_and_numbers)
{
    ex_fix f = ex_fixture();
    ex_opts o = {0};
    ex_session(&f, &o);
    export_ok(&f, NULL);

    char *k = ex_read(&f, "kernel.cu");
    lacks(k, "kernel.cu", "#include \"ditto.cuh\"");
    has(k, "kernel.cu", "/*@contract");
    has(k, "kernel.cu", "\"entry\": \"spmv_csr_thread\"");
    has(k, "kernel.cu",
        "#define DITTO_T float\n#define DITTO_S float\n#define DITTO_DTYPE_FP32 1\n"
        "#define DITTO_EPILOGUE_NONE 1\n");
    has(k, "kernel.cu", "#define BLOCK 256\n");
    has(k, "kernel.cu", "__device__ __forceinline__ S dt_epilogue("); /* ditto.cuh, inlined */
    has(k, "kernel.cu", "spmv_csr_thread(int rows");
    /* The defines come before the source that uses them. */
    cr_assert(strstr(k, "#define DITTO_T") < strstr(k, "typedef DITTO_T T;"));

    char *h = ex_read(&f, "harness.cu");
    has(h, "harness.cu", "#include \"kernel.cu\"");
    char *sess_line = dt_xasprintf("#define DX_SESSION \"%s\"", f.id);
    has(h, "harness.cu", sess_line);
    free(sess_line);
    has(h, "harness.cu", "#define DX_METHOD \"cold\"");
    has(h, "harness.cu", "#define DX_BASELINE \"CSR_ALG1\"");
    has(h, "harness.cu", "#define DX_S_US 12.5");
    has(h, "harness.cu", "#define DX_BAKED 0");
    has(h, "harness.cu", "#define DX_ROWS 200LL");
    has(h, "harness.cu", "d->grid[0] = (dx_cdiv(rows, BLOCK));");
    has(h, "harness.cu", "d->block[0] = (BLOCK);");
    has(h, "harness.cu",
        "spmv_csr_thread<<<grid, block, (size_t)d->smem, s>>>(a->rows, "
        "dx_p(a->rowptr), dx_p(a->col), dx_p(a->val), dx_p(a->x), dx_p(a->y), "
        "(S)a->alpha, (S)a->beta, dx_p(a->bias));");
    has(h, "harness.cu", "cudaMemsetAsync(tm->flush"); /* cold: the L2 flush */
    has(h, "harness.cu", "cusparseSpMV_preprocess");

    char *mk = ex_read(&f, "Makefile");
    has(mk, "Makefile", "ARCH ?= sm_90\n");
    has(mk, "Makefile", "$(NVCC) $(NVCCFLAGS) -arch=$(ARCH) -o harness harness.cu -lcusparse");
    has(mk, "Makefile", "NVCCFLAGS ?= -O3\n");
    char *real = realpath(f.matrix, NULL);
    char *mline = dt_xasprintf("MATRIX ?= %s\n", real);
    has(mk, "Makefile", mline);
    free(mline);
    free(real);

    char *r = ex_read(&f, "README.md");
    has(r, "README.md", f.id);
    has(r, "README.md", "NVIDIA H200 (cc 9.0)");
    has(r, "README.md", "12.8 / 12.8 / 12.8 / 12.5.8");
    has(r, "README.md", "| kernel | 12.500 us (cold timing) |");
    has(r, "README.md", "| best cuSPARSE algorithm | CSR_ALG1, 15.000 us |");
    has(r, "README.md", "| speedup | 1.20x |");
    has(r, "README.md", "L2 is flushed before every run");
    has(r, "README.md", "| kernel, cold | 12.500 |");
    has(r, "README.md", "passed (14 checks");
    has(r, "README.md", "bakes no matrix constant in");
    has(r, "README.md", "(4 sqrt(len_i + 2) + 8) u_acc m_i");
    has(r, "README.md", "launch on that matrix: grid [1, 1, 1], block [256, 1, 1]");
    free(k);
    free(h);
    free(mk);
    free(r);
    ex_fixture_free(&f);
}

Test(export, the_spmv_harness_should_build_with_nvcc, .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_opts o = {0};
    ex_session(&f, &o);
    export_ok(&f, NULL);
    builds_with_nvcc(&f);
    ex_fixture_free(&f);
}

Test(export, an_spmm_kernel_should_bake_the_sessions_matrix_constants_and_write_the_matrix)
{
    ex_fix f = ex_fixture();
    ex_session(&f, &spmm_opts);
    export_ok(&f, NULL);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define ROWS 300 /* rows */\n#define NCOLS 40 /* n */\n");
    has(k, "kernel.cu", "#define WARPS 8\n");
    has(k, "kernel.cu", "#define DITTO_EPILOGUE_RELU 1\n");
    lacks(k, "kernel.cu", "#include \"ditto.cuh\"");
    char *h = ex_read(&f, "harness.cu");
    has(h, "harness.cu", "#define DX_OP 1");
    has(h, "harness.cu", "#define DX_N 40");
    has(h, "harness.cu", "#define DX_ALPHA 1.5");
    has(h, "harness.cu", "#define DX_BETA 0.5");
    has(h, "harness.cu", "#define DX_EPI 1");
    /* cuSPARSE has no ReLU: its output is not held against the reference's. */
    has(h, "harness.cu", "not compared (cuSPARSE has no %s epilogue; timed without it)");
    has(h, "harness.cu", "#define DX_BAKED 1");
    has(h, "harness.cu", "#define DX_METHOD \"graph\"");
    has(h, "harness.cu", "#define DX_BASELINE \"CSR_ALG2\"");
    has(h, "harness.cu", "#define DX_REQ_MIN_ROWS 1LL");
    has(h, "harness.cu", "d->grid[1] = (dx_max(1, dx_cdiv(rows, WARPS)));");
    has(h, "harness.cu", "spmm_row<<<grid, block, (size_t)d->smem, s>>>(dx_p(a->rowptr)");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "`matrix.mtx` is the session's matrix, `gen:uniform:rows=300");
    has(r, "README.md", "50 launches are captured in a CUDA graph");
    has(r, "README.md", "so it is correct only for that matrix");
    has(r, "README.md", "launch on that matrix: grid [2, 38, 1], block [32, 8, 1]");
    char *mk = ex_read(&f, "Makefile");
    has(mk, "Makefile", "MATRIX ?= matrix.mtx\n");
    /* The matrix reads back as the one the session profiled. */
    char *mpath = dt_xasprintf("%s/matrix.mtx", f.out);
    dt_err e = {0};
    sp_csr *a = sp_load(mpath, NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    sp_csr *g = sp_load("gen:uniform:rows=300,nnz=2400,seed=3", NULL, &e);
    cr_assert_not_null(g, "%s", e.msg);
    cr_assert_eq(a->rows, g->rows);
    cr_assert_eq(a->nnz, g->nnz);
    cr_assert_eq(memcmp(a->col, g->col, (size_t)a->nnz * sizeof *a->col), 0);
    cr_assert_eq(memcmp(a->val, g->val, (size_t)a->nnz * sizeof *a->val), 0);
    sp_csr_free(a);
    sp_csr_free(g);
    free(mpath);
    free(k);
    free(h);
    free(r);
    free(mk);
    ex_fixture_free(&f);
}

Test(export, the_spmm_harness_should_build_with_nvcc, .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_session(&f, &spmm_opts);
    export_ok(&f, "--no-matrix");
    char *mpath = dt_xasprintf("%s/matrix.mtx", f.out);
    cr_assert(!dt_file_exists(mpath), "--no-matrix wrote %s", mpath);
    free(mpath);
    builds_with_nvcc(&f);
    ex_fixture_free(&f);
}

Test(export, a_tuned_variant_should_be_exported_from_the_sessions_best_kernel)
{
    ex_fix f = ex_fixture();
    char *tuned = ex_spmv_source(128);
    ex_opts o = {.tuned_source = tuned, .tuned_params = "{\"BLOCK\": 128}"};
    ex_session(&f, &o);
    export_ok(&f, NULL);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "params {\"BLOCK\":128}.");
    has(k, "kernel.cu", "/* the kernel's parameters */\n#define BLOCK 128\n");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "kernel tuned csr-thread");
    has(r, "README.md", "the session's `best_kernel.cu`");
    has(r, "README.md", "| kernel | 10.000 us (cold timing) |");
    has(r, "README.md", "| best cuSPARSE algorithm | CSR_ALG1, 15.000 us |");
    free(k);
    free(r);
    free(tuned);
    ex_fixture_free(&f);
}

Test(export, without_best_kernel_cu_a_tuned_variant_should_come_from_tune_json)
{
    ex_fix f = ex_fixture();
    char *tuned = ex_spmv_source(1024);
    ex_opts o = {.tuned_source = tuned, .tuned_params = "{\"BLOCK\": 1024}"};
    ex_session(&f, &o);
    char *bk = dt_xasprintf("%s/best_kernel.cu", f.dir);
    cr_assert_eq(unlink(bk), 0);
    free(bk);
    export_ok(&f, NULL);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define BLOCK 1024\n");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "the session's `tune.json`");
    free(k);
    free(r);
    free(tuned);
    ex_fixture_free(&f);
}

Test(export, a_session_cut_off_should_export_its_fastest_measured_version)
{
    ex_fix f = ex_fixture();
    char *v1 = ex_spmv_source(256), *v2 = ex_spmv_source(64), *v3 = ex_spmv_source(512);
    ex_opts o = {.v = {{v1, "{\"BLOCK\": 256}", 14.0},
                       {v2, "{\"BLOCK\": 64}", 9.5},
                       {v3, "{\"BLOCK\": 512}", 11.0}},
                 .nversions = 3,
                 .unfinished = 1};
    ex_session(&f, &o);
    export_ok(&f, NULL);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define BLOCK 64\n");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "kernel v2 csr-thread");
    has(r, "README.md", "`kernel_v2.cu`");
    has(r, "README.md", "| kernel | 9.500 us (cold timing) |");
    has(r, "README.md", "`measure_v2.json`");
    free(k);
    free(r);
    free(v1);
    free(v2);
    free(v3);
    ex_fixture_free(&f);
}

Test(export, a_session_that_never_measured_should_export_its_last_kernel_and_say_so)
{
    ex_fix f = ex_fixture();
    char *src = ex_spmv_source(128);
    ex_opts o = {.v = {{src, "{\"BLOCK\": 128}", 0}}, .nversions = 1};
    ex_session(&f, &o);
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    free(args);
    ex_no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    has(p.err, "stderr", "never measured a kernel");
    tu_proc_free(&p);
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "**Never measured.**");
    has(r, "README.md", "last compiled version");
    char *h = ex_read(&f, "harness.cu");
    has(h, "harness.cu", "#define DX_METHOD \"auto\"");
    has(h, "harness.cu", "#define DX_S_US 0.0");
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define BLOCK 128\n");
    free(r);
    free(h);
    free(k);
    free(src);
    /* DX_S_SPEEDUP is 0 here: the harness must still build without a
     * division-by-zero warning */
    builds_with_nvcc(&f);
    ex_fixture_free(&f);
}

/* `ditto check` on an exported kernel.cu compiles it with the parameters the
 * file defines: no macro is redefined (the worker's -D agree with the file),
 * and a --param that contradicts the file is refused naming its line. */
Test(export, re_checking_an_exported_kernel_should_compile_without_redefinitions, .timeout = 300)
{
    ex_fix f = ex_fixture();
    char *src = ex_spmv_source(128);
    ex_opts o = {.v = {{src, "{\"BLOCK\": 128}", 0}}, .nversions = 1};
    ex_session(&f, &o);
    export_ok(&f, NULL);
    tu_proc p = tu_run("'%s' check '%s/kernel.cu' gen:uniform:rows=300,nnz=3000 2>&1",
                       tu_ditto_bin(), f.out);
    ex_no_sanitizer(&p);
    if (strstr(p.out, "NVRTC") == NULL || strstr(p.out, "compile") == NULL)
        cr_skip_test("NVRTC is not available here: %s", p.out);
    cr_assert(strstr(p.out, ": ok"), "the exported kernel did not compile:\n%s", p.out);
    cr_assert_null(strstr(p.out, "redefinition"), "%s", p.out);
    cr_assert_null(strstr(p.out, "warning"), "%s", p.out);
    cr_assert(strstr(p.out, "\"BLOCK\":128"), "not checked with the file's BLOCK:\n%s", p.out);
    tu_proc_free(&p);
    p = tu_run("'%s' check '%s/kernel.cu' gen:uniform:rows=300,nnz=3000 --param BLOCK=256",
               tu_ditto_bin(), f.out);
    ex_no_sanitizer(&p);
    cr_assert_eq(p.status, 2, "exit %d: %s", p.status, p.err);
    cr_assert(strstr(p.err, "kernel.cu:") && strstr(p.err, "defines BLOCK 128 itself"), "%s",
              p.err);
    tu_proc_free(&p);
    free(src);
    ex_fixture_free(&f);
}

/* Exports a session whose one version is template kernels/<file> at o's other fields,
 * with --no-matrix, and returns the harness and the README (the caller frees both). */
static void export_template(ex_fix *f, const char *file, ex_opts o, char **harness, char **readme)
{
    char *path = dt_xasprintf("%s/kernels/%s", tu_src_dir(), file);
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    o.v[0].source = src;
    o.nversions = 1;
    ex_session(f, &o);
    export_ok(f, "--no-matrix");
    *harness = ex_read(f, "harness.cu");
    *readme = ex_read(f, "README.md");
    free(src);
    free(path);
}

/* coo-sddmm, the fastest SDDMM template at original size, takes coo_row (each
 * nonzero's row): the harness derives it from CSR, passes it where the contract lists
 * it, and builds. It has no scratch to keep zeroed. */
Test(export, a_coo_sddmm_kernel_should_get_each_nonzeros_row_and_build, .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_opts o = {
        .spec = "{\"op\": \"sddmm\", \"matrix\": \"gen:uniform:rows=300,nnz=2400,seed=3\", "
                "\"dtype\": \"fp32\", \"n\": 32}",
        .strategy = "coo-sddmm",
        .v = {{.params = "{\"WARPS\": 4, \"VEC\": 8, \"LANES\": 8, \"UNROLL\": 2}", .us = 1.5}},
        .method = "graph",
        .baseline = "CSR_ALG_DEFAULT",
    };
    char *h, *r;
    export_template(&f, "sddmm_coo.cu", o, &h, &r);
    has(h, "harness.cu", "#define DX_COO 1");
    has(h, "harness.cu", "#define DX_SCRATCH_ONCE 0");
    has(h, "harness.cu", "sddmm_coo<<<grid, block, (size_t)d->smem, s>>>(a->nnz, dx_p(a->coo_row), "
                         "dx_p(a->col)");
    has(h, "harness.cu", "ri[t] = i;");
    has(r, "README.md", "nonzero's row for a coo kernel");
    builds_with_nvcc(&f);
    free(h);
    free(r);
    ex_fixture_free(&f);
}

/* The dense-tile SDDMM templates read format dtile (a 64-bit mask a tile row among
 * its arrays): the harness passes the format's arrays where the contract lists them
 * and builds, the tensor-core one (mma.sync TF32) for sm_90 as well. */
Test(export, dense_tile_sddmm_kernels_should_pass_the_dtile_arrays_and_build, .timeout = 300)
{
    static const struct {
        const char *file, *strategy, *params, *call;
    } cases[] = {
        {"sddmm_dense_tile.cu", "dense-tile-sddmm",
         "{\"TM\": 32, \"TN\": 64, \"RM\": 4, \"RN\": 4}",
         "sddmm_dense_tile<<<grid, block, (size_t)d->smem, s>>>(a->rows, a->cols, "},
        {"sddmm_dense_tile_tf32.cu", "dense-tile-tf32-sddmm",
         "{\"TM\": 64, \"TN\": 32, \"WM\": 2, \"WN\": 2}",
         "sddmm_dense_tile_tf32<<<grid, block, (size_t)d->smem, s>>>(a->rows, a->cols, "},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        ex_fix f = ex_fixture();
        ex_opts o = {
            .spec = "{\"op\": \"sddmm\", \"matrix\": \"gen:uniform:rows=300,nnz=9000,seed=3\", "
                    "\"dtype\": \"fp32\", \"n\": 32}",
            .strategy = cases[i].strategy,
            .v = {{.params = cases[i].params, .us = 2.0}},
            .method = "graph",
            .baseline = "CSR_ALG_DEFAULT",
        };
        char *h, *r;
        export_template(&f, cases[i].file, o, &h, &r);
        has(h, "harness.cu", cases[i].call);
        has(h, "harness.cu", "\"tile_rmask\"");
        builds_with_nvcc(&f);
        free(h);
        free(r);
        ex_fixture_free(&f);
    }
}

/* row-union-sddmm reads format runion (an entry per group of rows and column, loaded as
 * 16-byte vectors): the harness passes the entry array and its count and builds. */
Test(export, row_union_sddmm_kernel_should_pass_the_runion_entries_and_build, .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_opts o = {
        .spec = "{\"op\": \"sddmm\", \"matrix\": \"gen:banded:rows=500,bw=5,seed=3\", "
                "\"dtype\": \"fp32\", \"n\": 32}",
        .strategy = "row-union-sddmm",
        .v = {{.params = "{\"R\": 4, \"LANES\": 8, \"WARPS\": 4, \"UNROLL\": 2}", .us = 2.0}},
        .method = "graph",
        .baseline = "CSR_ALG_DEFAULT",
    };
    char *h, *r;
    export_template(&f, "sddmm_union.cu", o, &h, &r);
    has(h, "harness.cu", "sddmm_union<<<grid, block, (size_t)d->smem, s>>>(");
    has(h, "harness.cu", "\"un_ent\"");
    builds_with_nvcc(&f);
    free(h);
    free(r);
    ex_fixture_free(&f);
}

/* merge-path keeps its scratch zeroed itself (contract scratch_init "once"): the
 * harness zeroes it when it allocates it and launches without a memset, as the worker
 * does, and the README says so. */
Test(export, a_kernel_that_leaves_its_scratch_zeroed_should_be_timed_without_a_memset,
     .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_opts o = {
        .spec = "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=300,nnz=2400,seed=3\", "
                "\"dtype\": \"fp32\"}",
        .strategy = "merge-path",
        .v = {{.params = "{\"BLOCK\": 128, \"ITEMS\": 4}", .us = 2.0}},
        .method = "graph",
        .baseline = "CSR_ALG1",
    };
    char *h, *r;
    export_template(&f, "spmv_merge_path.cu", o, &h, &r);
    has(h, "harness.cu", "#define DX_SCRATCH_ONCE 1");
    has(h, "harness.cu", "if (k->dims.scratch > 0 && !DX_SCRATCH_ONCE) {");
    has(h, "harness.cu", "DX_CUDA(cudaMemset(k->scratch, 0, (size_t)d->scratch));");
    has(r, "README.md", "scratch zeroed once (the kernel leaves it zeroed)");
    builds_with_nvcc(&f);
    free(h);
    free(r);
    ex_fixture_free(&f);
}

/* sell16-thread, a library kernel over another format than CSR: export builds its format
 * from the session's matrix into format/, bakes the format's variables into the launch,
 * writes matrix.mtx, and the harness builds, accepts that matrix and refuses another. */
Test(export, a_sell16_kernel_should_get_its_format_built_into_format_and_build, .timeout = 300)
{
    ex_fix f = ex_fixture();
    char *path = dt_xasprintf("%s/kernels/spmv_sell16.cu", tu_src_dir());
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    ex_opts o = {
        .strategy = "sell16-thread",
        .v = {{.source = src,
               .params = "{\"BLOCK\": 128, \"UNROLL\": 4, \"SIGMA\": 256, \"VEC\": 2, \"SEQ\": 1}",
               .us = 3.0}},
        .nversions = 1,
        .method = "graph",
        .baseline = "CSR_ALG1",
    };
    ex_session(&f, &o);
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    free(args);
    ex_no_sanitizer(&p);
    cr_assert_eq(p.status, 0, "exit %d\nstdout: %s\nstderr: %s", p.status, p.out, p.err);
    has(p.out, "stdout", "README.md matrix.mtx format/\n");
    tu_proc_free(&p);

    /* The worker's sell16 arrays, each the size the harness expects. */
    char *h = ex_read(&f, "harness.cu");
    has(h, "harness.cu", "#define DX_FMT_NAME \"sell16\"");
    static const char *arrays[] = {"sell_ptr", "sell_len",   "sell_perm",
                                   "col16",    "slice_base", "sell_val"};
    for (size_t i = 0; i < DT_ARRAY_LEN(arrays); i++) {
        char *bin = dt_xasprintf("%s/format/%s.bin", f.out, arrays[i]);
        struct stat st;
        cr_assert_eq(stat(bin, &st), 0, "no %s", bin);
        char *q = dt_xasprintf("\"%s\"", arrays[i]);
        has(h, "harness.cu", q);
        free(q);
        free(bin);
    }
    /* 200 rows: 7 slices of 32, so 8 offsets and 7 widths. */
    has(h, "harness.cu", "const long long dx_fv_nslices = 7LL; /* the format's nslices */");
    has(h, "harness.cu", "d->grid[0] = (dx_cdiv(dx_fv_nslices * dx_fv_C, BLOCK * SEQ));");
    has(h, "harness.cu",
        "spmv_sell16<<<grid, block, (size_t)d->smem, s>>>((int)7LL /* nslices */, "
        "dx_p(a->fmt[");
    char *ptr_bin = dt_xasprintf("%s/format/sell_ptr.bin", f.out);
    struct stat st;
    cr_assert_eq(stat(ptr_bin, &st), 0);
    cr_assert_eq(st.st_size, 8 * 4, "sell_ptr.bin: %lld bytes", (long long)st.st_size);
    free(ptr_bin);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define SELL_C 32");
    has(k, "kernel.cu", "#define ROWS 200");
    char *mk = ex_read(&f, "Makefile");
    has(mk, "Makefile", "MATRIX ?= matrix.mtx\n");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "| `format/` | the kernel's `sell16` format");
    has(r, "README.md", "`sell_ptr` 32 B");

    builds_with_nvcc(&f);
    /* The exported matrix passes the harness's check of its sum (then, without a GPU,
     * the device is missing: exit 3); another is refused before any device work. */
    p = tu_run("cd '%s' && ./harness matrix.mtx 2>&1", f.out);
    cr_assert(p.status == 0 || p.status == 3, "exit %d:\n%s", p.status, p.out);
    lacks(p.out, "harness output", "is not that one");
    if (p.status == 0) /* a GPU ran it */
        has(p.out, "harness output", "result    CORRECT");
    tu_proc_free(&p);
    sp_csr *other = sp_load("gen:banded:rows=200,bw=3,seed=9", NULL, &e);
    cr_assert_not_null(other, "%s", e.msg);
    char *opath = dt_xasprintf("%s/other.mtx", f.tmp);
    cr_assert_eq(sp_mm_write(other, opath, &e), 0, "%s", e.msg);
    sp_csr_free(other);
    p = tu_run("cd '%s' && ./harness '%s' 2>&1", f.out, opath);
    cr_assert_eq(p.status, 2, "exit %d:\n%s", p.status, p.out);
    has(p.out, "harness output", "this matrix is not that one");
    tu_proc_free(&p);
    free(opath);
    free(h);
    free(k);
    free(mk);
    free(r);
    free(src);
    free(path);
    ex_fixture_free(&f);
}

/* A pattern-only matrix: the worker ran the session on seeded random values, so export
 * builds the format from those and writes them into matrix.mtx (real, not pattern),
 * which the harness then accepts as the matrix the format was built from. */
Test(export, a_pattern_matrix_should_be_exported_with_the_workers_values, .timeout = 300)
{
    ex_fix f = ex_fixture();
    char *mpath = dt_xasprintf("%s/p.mtx", f.tmp);
    FILE *fp = fopen(mpath, "w");
    cr_assert_not_null(fp);
    fprintf(fp, "%%%%MatrixMarket matrix coordinate pattern general\n40 40 120\n");
    for (int i = 0; i < 40; i++)
        for (int d = 0; d < 3; d++)
            fprintf(fp, "%d %d\n", i + 1, (i * 7 + d * 11) % 40 + 1);
    fclose(fp);
    char *spec = dt_xasprintf("{\"op\": \"spmv\", \"matrix\": \"%s\", \"dtype\": \"fp32\"}", mpath);
    char *path = dt_xasprintf("%s/kernels/spmv_csr16.cu", tu_src_dir());
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    ex_opts o = {.spec = spec,
                 .strategy = "csr16-vector",
                 .v = {{.source = src,
                        .params = "{\"LANES\": 4, \"VEC\": 2, \"BLOCK\": 128, \"UNROLL\": 1}",
                        .us = 2.0}},
                 .nversions = 1,
                 .method = "graph",
                 .baseline = "CSR_ALG1"};
    ex_session(&f, &o);
    export_ok(&f, NULL);
    char *mtx = ex_read(&f, "matrix.mtx");
    has(mtx, "matrix.mtx", "%%MatrixMarket matrix coordinate real general\n");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "the seeded random ones ditto's worker gave it");
    builds_with_nvcc(&f);
    tu_proc p = tu_run("cd '%s' && ./harness matrix.mtx 2>&1", f.out);
    cr_assert(p.status == 0 || p.status == 3, "exit %d:\n%s", p.status, p.out);
    lacks(p.out, "harness output", "is not that one");
    if (p.status == 0) /* a GPU ran it */
        has(p.out, "harness output", "result    CORRECT");
    tu_proc_free(&p);
    /* The original pattern file gets the harness's own random values: another matrix. */
    p = tu_run("cd '%s' && ./harness '%s' 2>&1", f.out, mpath);
    cr_assert_eq(p.status, 2, "exit %d:\n%s", p.status, p.out);
    has(p.out, "harness output", "this matrix is not that one");
    tu_proc_free(&p);
    free(mtx);
    free(r);
    free(src);
    free(path);
    free(spec);
    free(mpath);
    ex_fixture_free(&f);
}

/* The SpMM templates bake the columns of B in as N (contract defines), a name the
 * harness's cuSPARSE calls must not use for themselves. */
Test(export, a_library_spmm_kernel_that_defines_n_should_build, .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_opts o = {
        .spec = "{\"op\": \"spmm\", \"matrix\": \"gen:uniform:rows=300,nnz=2400,seed=3\", "
                "\"dtype\": \"fp32\", \"n\": 32}",
        .strategy = "csr-warp-spmm",
        .v = {{.params = "{}", .us = 2.0}},
        .method = "graph",
        .baseline = "CSR_ALG2",
    };
    char *h, *r;
    export_template(&f, "spmm_csr_warp.cu", o, &h, &r);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define N 32 /* n */");
    lacks(h, "harness.cu", "cusparseOperation_t N ");
    builds_with_nvcc(&f);
    free(k);
    free(h);
    free(r);
    ex_fixture_free(&f);
}

/* harness.cu with its comments blanked out, so that only code is searched. */
static char *code_only(const char *src)
{
    char *o = dt_xstrdup(src);
    for (char *p = o; *p; p++) {
        if (p[0] == '/' && p[1] == '*') {
            char *end = strstr(p + 2, "*/");
            char *stop = end ? end + 2 : p + strlen(p);
            memset(p, ' ', (size_t)(stop - p));
            p = stop - 1;
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                *p++ = ' ';
            if (!*p)
                break;
        } else if (*p == '"') { /* string literals may say anything */
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            if (!*p)
                break;
        }
    }
    return o;
}

/* kernel.cu #defines every template parameter (BLOCK, U, N, ...) before harness.cu's
 * code: none of them may name anything in the harness's fixed head and tail, or it
 * stops building (seg16's U once replaced the head's template parameter). Every
 * parameter name of every manifest in kernels/, searched as a whole word in the code of
 * the head and the tail (the generated launch between them uses the names on purpose),
 * and the seg16 harness built with nvcc. */
Test(export, no_template_parameter_name_should_appear_in_the_harness_code, .timeout = 300)
{
    ex_fix f = ex_fixture();
    ex_opts o = {
        .spec = "{\"op\": \"spmv\", \"matrix\": \"gen:rmat:rows=4096,nnz=40000,seed=3\", "
                "\"dtype\": \"fp32\", \"alpha\": 2, \"beta\": 0.5}",
        .strategy = "seg16",
        .v = {{.params = "{\"BLOCK\": 128, \"U\": 2}", .us = 2.0}},
        .method = "graph",
        .baseline = "CSR_ALG1",
    };
    char *h, *r;
    export_template(&f, "spmv_seg16.cu", o, &h, &r);
    char *k = ex_read(&f, "kernel.cu");
    has(k, "kernel.cu", "#define U 2");
    char *head, *tail;
    dt_err he = {0};
    cr_assert_eq(export_harness_parts(&head, &tail, &he), 0, "%s", he.msg);
    char *fixed = dt_xasprintf("%s\n%s", head, tail);
    free(head);
    free(tail);
    char *code = code_only(fixed);
    free(fixed);
    char *dir = dt_xasprintf("%s/kernels", tu_src_dir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *de;
    int nnames = 0;
    while ((de = readdir(d)) != NULL) {
        if (!dt_endswith(de->d_name, ".cu"))
            continue;
        char *p = dt_xasprintf("%s/%s", dir, de->d_name);
        char *src = dt_read_file(p, NULL, NULL);
        cr_assert_not_null(src, "%s", p);
        gpu_manifest m;
        dt_err e = {0};
        cr_assert_eq(gpu_manifest_from_source(src, &m, &e), 0, "%s: %s", de->d_name, e.msg);
        for (int i = 0; i < m.nparams; i++, nnames++) {
            const char *name = m.params[i].name;
            size_t len = strlen(name);
            for (const char *s = strstr(code, name); s; s = strstr(s + 1, name)) {
                int before = s > code && (isalnum((unsigned char)s[-1]) || s[-1] == '_');
                int after = isalnum((unsigned char)s[len]) || s[len] == '_';
                cr_assert(before || after,
                          "%s's parameter %s names something in the harness: ...%.60s", de->d_name,
                          name, s > code + 30 ? s - 30 : code);
            }
        }
        gpu_manifest_clear(&m);
        free(src);
        free(p);
    }
    closedir(d);
    cr_assert_gt(nnames, 50, "only %d parameter names", nnames);
    builds_with_nvcc(&f);
    free(dir);
    free(code);
    free(k);
    free(h);
    free(r);
    ex_fixture_free(&f);
}

/* A session whose kernel lost to cuSPARSE (20 us against CSR_ALG1's 15):
 * the harness says to call cuSPARSE and the README gives the call. */
Test(export, a_kernel_slower_than_cusparse_should_name_the_cusparse_call_to_make)
{
    ex_fix f = ex_fixture();
    ex_opts o = {.v = {{.us = 20.0}}, .nversions = 1};
    ex_session(&f, &o);
    export_ok(&f, NULL);
    char *h = ex_read(&f, "harness.cu");
    has(h, "harness.cu", "#define DX_USE_CUSPARSE 1");
    has(h, "harness.cu", "if (DX_USE_CUSPARSE)");
    char *r = ex_read(&f, "README.md");
    has(r, "README.md", "| speedup | 0.75x |");
    has(r, "README.md", "no generated kernel beat cuSPARSE CSR_ALG1 here (0.75x): call it, "
                        "`cusparseSpMV(handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, A, x, "
                        "&beta, y, CUDA_R_32F, CUSPARSE_SPMV_CSR_ALG1, buffer);`");
    free(h);
    free(r);
    ex_fixture_free(&f);

    /* The default session's kernel is 1.20x: no such advice. */
    f = ex_fixture();
    ex_opts d = {0};
    ex_session(&f, &d);
    export_ok(&f, NULL);
    h = ex_read(&f, "harness.cu");
    has(h, "harness.cu", "#define DX_USE_CUSPARSE 0");
    r = ex_read(&f, "README.md");
    lacks(r, "README.md", "use cuSPARSE");
    free(h);
    free(r);
    ex_fixture_free(&f);
}
