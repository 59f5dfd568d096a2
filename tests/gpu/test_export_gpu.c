/* test_export_gpu.c -- `ditto export` of library kernels over formats other than CSR
 * (sell16, csr16, seg16, ell, dtile, runion), built with nvcc and run on the GPU: the harness loads
 * format/, and must find every output within the reference's tolerance. Skips without nvcc or a
 * GPU. */
#include "tests/export/extest.h"

#include <stdlib.h>
#include <string.h>

/* Session of one measured version of kernels/FILE with PARAMS on SPEC's problem (NULL:
 * SpMV fp32 on the fixture's banded matrix), exported, built and run on matrix.mtx. */
static void runs_correct(const char *file, const char *spec, const char *params)
{
    ex_fix f = ex_fixture();
    char *path = dt_xasprintf("%s/kernels/%s", tu_src_dir(), file);
    dt_err e = {0};
    char *src = dt_read_file(path, NULL, &e);
    cr_assert_not_null(src, "%s", e.msg);
    ex_opts o = {.spec = spec,
                 .strategy = file,
                 .v = {{.source = src, .params = params, .us = 5.0}},
                 .nversions = 1,
                 .method = "graph",
                 .baseline = "CSR_ALG1"};
    ex_session(&f, &o);
    char *args = dt_xasprintf("--out '%s'", f.out);
    tu_proc p = ex_export(&f, args);
    free(args);
    cr_assert_eq(p.status, 0, "%s: export exit %d: %s", file, p.status, p.err);
    tu_proc_free(&p);
    p = tu_run("make -C '%s' 2>&1", f.out);
    if (p.status != 0 && strstr(p.out, "nvcc") != NULL &&
        (strstr(p.out, "not found") != NULL || strstr(p.out, "No such file") != NULL)) {
        tu_proc_free(&p);
        cr_skip_test("no nvcc to build the exported harness");
    }
    cr_assert_eq(p.status, 0, "%s: make exit %d:\n%s", file, p.status, p.out);
    tu_proc_free(&p);
    p = tu_run("cd '%s' && ./harness matrix.mtx 2>&1", f.out);
    if (p.status == 3 && strstr(p.out, "cudaGetDevice") != NULL) {
        char reason[300];
        snprintf(reason, sizeof reason, "%s", p.out);
        tu_proc_free(&p);
        cr_skip_test("no GPU: %s", reason);
    }
    cr_assert_eq(p.status, 0, "%s: harness exit %d:\n%s", file, p.status, p.out);
    cr_assert(strstr(p.out, "result    CORRECT") != NULL, "%s:\n%s", file, p.out);
    tu_proc_free(&p);
    free(src);
    free(path);
    ex_fixture_free(&f);
}

Test(export_gpu, a_sell16_thread_kernel_should_run_correct_from_its_exported_format, .timeout = 600)
{
    runs_correct("spmv_sell16.cu", NULL,
                 "{\"BLOCK\": 128, \"UNROLL\": 4, \"SIGMA\": 256, \"VEC\": 2, \"SEQ\": 2}");
}

Test(export_gpu, a_csr16_kernel_should_run_correct_in_fp64_from_its_exported_format, .timeout = 600)
{
    runs_correct("spmv_csr16.cu",
                 "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=60000,seed=5\", "
                 "\"dtype\": \"fp64\", \"alpha\": 1.5, \"beta\": 0.5}",
                 "{\"LANES\": 8, \"VEC\": 4, \"BLOCK\": 256, \"UNROLL\": 2}");
}

/* seg16's tiles, flags and padding travel through format/ as the worker built them, on
 * a matrix with rows of very different lengths. */
Test(export_gpu, a_seg16_kernel_should_run_correct_from_its_exported_format, .timeout = 600)
{
    runs_correct("spmv_seg16.cu",
                 "{\"op\": \"spmv\", \"matrix\": \"gen:rmat:rows=4096,nnz=40000,seed=3\", "
                 "\"dtype\": \"fp32\", \"alpha\": 2, \"beta\": 0.5}",
                 "{\"BLOCK\": 128, \"U\": 2}");
}

/* dtile's tile list, masks and first positions travel through format/, for the FMA and
 * the tensor-core (3xTF32) dense-tile SDDMM kernels, on a block-sparse pattern. */
Test(export_gpu, dense_tile_sddmm_kernels_should_run_correct_from_their_exported_format,
     .timeout = 600)
{
    static const char *spec = "{\"op\": \"sddmm\", \"matrix\": "
                              "\"gen:block:rows=600,cols=500,nnz=40000,b=32,seed=2\", "
                              "\"dtype\": \"fp32\", \"n\": 32, \"alpha\": 1.5, \"beta\": 0.5}";
    runs_correct("sddmm_dense_tile.cu", spec, "{\"TM\": 64, \"TN\": 32, \"RM\": 8, \"RN\": 4}");
    runs_correct("sddmm_dense_tile_tf32.cu", spec,
                 "{\"TM\": 32, \"TN\": 64, \"WM\": 1, \"WN\": 2}");
}

/* runion's entries (a column, a group, each row's position, with SIM the rows) travel
 * through format/, on a band, where rows of a group share most columns, and on a mesh
 * whose groups of similar rows are not consecutive. */
Test(export_gpu, a_row_union_sddmm_kernel_should_run_correct_from_its_exported_format,
     .timeout = 600)
{
    runs_correct("sddmm_union.cu",
                 "{\"op\": \"sddmm\", \"matrix\": \"gen:banded:rows=3001,bw=6,seed=2\", "
                 "\"dtype\": \"fp32\", \"n\": 32, \"alpha\": 1.5, \"beta\": 0.5}",
                 "{\"R\": 4, \"LANES\": 8, \"WARPS\": 4, \"UNROLL\": 2}");
    /* With SIM the entries name their group's rows: dwt_992's groups of
     * similar rows are not consecutive. */
    char *m = tu_matrix("dwt_992.mtx");
    char *spec = dt_xasprintf("{\"op\": \"sddmm\", \"matrix\": \"%s\", \"dtype\": \"fp32\", "
                              "\"n\": 32}",
                              m);
    runs_correct("sddmm_union.cu", spec,
                 "{\"R\": 4, \"LANES\": 8, \"WARPS\": 8, \"UNROLL\": 1, \"SIM\": 1}");
    free(spec);
    free(m);
}

Test(export_gpu, an_ell_spmm_kernel_should_run_correct_from_its_exported_format, .timeout = 600)
{
    runs_correct("spmm_ell.cu",
                 "{\"op\": \"spmm\", \"matrix\": \"gen:banded:rows=2000,bw=4,seed=2\", "
                 "\"dtype\": \"fp32\", \"n\": 32}",
                 "{}");
}
