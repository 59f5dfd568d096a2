/* test_rules.c -- each static rule fires on the mistake it names, at the
 * right line, and stays quiet on the correct version. */
#include "tests/common/testutil.h"

#include "agents/agents.h"
#include "gpu/contract.h"

#include <string.h>

static int count(const cJSON *f, const char *id, int line)
{
    int n = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, f)
    {
        if (strcmp(dt_json_str(x, "id", ""), id) == 0 &&
            (line == 0 || (int)dt_json_num(x, "line", 0) == line))
            n++;
    }
    return n;
}

static cJSON *run(const char *src)
{
    return ag_static_rules(src, NULL);
}

Test(rules, barrier_inside_a_thread_branch_should_be_flagged)
{
    cJSON *f = run("__global__ void k(float *y) {\n"
                   "  if (threadIdx.x < 16) {\n"
                   "    __syncthreads();\n"
                   "  }\n"
                   "}\n");
    cr_assert_eq(count(f, "barrier-divergent", 3), 1);
    cJSON_Delete(f);
    f = run("__global__ void k(float *y) {\n"
            "  int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (row >= 100) return;\n"
            "  __syncthreads();\n"
            "}\n");
    cr_assert_eq(count(f, "barrier-divergent", 4), 1);
    cJSON_Delete(f);
    f = run("__global__ void k(float *y) {\n"
            "  __shared__ float s[32];\n"
            "  s[threadIdx.x] = 1;\n"
            "  __syncthreads();\n"
            "  if (threadIdx.x < 16) y[threadIdx.x] = s[threadIdx.x + 1];\n"
            "}\n");
    cr_assert_eq(count(f, "barrier-divergent", 0), 0);
    cr_assert_eq(count(f, "smem-raw-no-barrier", 0), 0);
    cJSON_Delete(f);
}

Test(rules, shared_read_before_a_barrier_should_be_flagged)
{
    cJSON *f = run("__global__ void k(float *y) {\n"
                   "  __shared__ float s[32];\n"
                   "  s[threadIdx.x] = 1;\n"
                   "  y[threadIdx.x] = s[31 - threadIdx.x];\n"
                   "}\n");
    cr_assert_eq(count(f, "smem-raw-no-barrier", 4), 1);
    cJSON_Delete(f);
}

Test(rules, deprecated_shuffles_and_full_masks_under_divergence_should_be_flagged)
{
    cJSON *f = run("__global__ void k(float *y) {\n"
                   "  float v = y[threadIdx.x];\n"
                   "  v += __shfl_down(v, 1);\n"
                   "  if (threadIdx.x % 32 < 8) {\n"
                   "    v += __shfl_down_sync(0xffffffff, v, 1);\n"
                   "  }\n"
                   "  v += __shfl_down_sync(0xffffffff, v, 2);\n"
                   "}\n");
    cr_assert_eq(count(f, "shfl-no-sync", 3), 1);
    cr_assert_eq(count(f, "full-mask-divergent", 5), 1);
    cr_assert_eq(count(f, "full-mask-divergent", 7), 0);
    cJSON_Delete(f);
}

Test(rules, a_row_index_without_a_bound_should_be_flagged)
{
    cJSON *f = run("__global__ void k(const int *rowptr, float *y) {\n"
                   "  int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
                   "  y[row] = rowptr[row + 1] - rowptr[row];\n"
                   "}\n");
    cr_assert_eq(count(f, "missing-row-bound", 3), 1);
    cJSON_Delete(f);
    f = run("__global__ void k(int rows, const int *rowptr, float *y) {\n"
            "  int row = blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  if (row < rows) y[row] = rowptr[row + 1] - rowptr[row];\n"
            "}\n");
    cr_assert_eq(count(f, "missing-row-bound", 0), 0);
    cJSON_Delete(f);
}

Test(rules, products_of_dimensions_and_host_calls_should_be_flagged)
{
    cJSON *f = run("__global__ void k(float *C, int n, int row, int j) {\n"
                   "  C[row * n + j] = 0;\n"
                   "  cudaMalloc(0, 4);\n"
                   "  // cudaMemcpy in a comment is fine\n"
                   "  C[(size_t)row * n + j] = 1;\n"
                   "}\n");
    cr_assert_eq(count(f, "index-overflow", 2), 1);
    cr_assert_eq(count(f, "index-overflow", 5), 0);
    cr_assert_eq(count(f, "host-api-in-device", 3), 1);
    cr_assert_eq(count(f, "host-api-in-device", 4), 0);
    cJSON_Delete(f);
}

Test(rules, a_changed_contract_should_be_flagged)
{
    const char *src = "/*@contract {\"entry\": \"k\", \"params\": [\"rows\", \"y\"], \"block\": [32],"
                      " \"grid\": [1]} @*/\n"
                      "extern \"C\" __global__ void k(int rows, float *y) {}\n";
    cJSON *same = cJSON_Parse("{\"entry\": \"k\", \"params\": [\"rows\", \"y\"], \"block\": [32],"
                              " \"grid\": [1]}");
    cJSON *other = cJSON_Parse("{\"entry\": \"k\", \"params\": [\"rows\", \"x\", \"y\"], "
                               "\"block\": [32], \"grid\": [1]}");
    cJSON *f = ag_static_rules(src, same);
    cr_assert_eq(count(f, "contract-changed", 0), 0);
    cJSON_Delete(f);
    f = ag_static_rules(src, other);
    cr_assert_eq(count(f, "contract-changed", 1), 1);
    const cJSON *x = cJSON_GetArrayItem(f, 0);
    cr_assert(strstr(dt_json_str(x, "message", ""), "2 parameters"), "%s",
              dt_json_str(x, "message", ""));
    cr_assert(strlen(dt_json_str(x, "explanation", "")) > 20);
    cJSON_Delete(f);
    cJSON_Delete(same);
    cJSON_Delete(other);
}

Test(rules, the_shipped_templates_should_have_no_rule_error)
{
    tu_proc ls = tu_run("ls '%s/kernels' | grep '\\.cu$'", tu_src_dir());
    char *save = NULL;
    int n = 0;
    for (char *name = strtok_r(ls.out, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
        n++;
        const char *names[] = {name};
        size_t i = 0;
        char *p = dt_xasprintf("%s/kernels/%s", tu_src_dir(), names[i]);
        dt_err e = {0};
        char *src = dt_read_file(p, NULL, &e);
        cr_assert_not_null(src, "%s", e.msg);
        cJSON *f = ag_static_rules(src, NULL);
        char *s = cJSON_Print(f);
        int errors = 0;
        const cJSON *x;
        cJSON_ArrayForEach(x, f)
            errors += dt_streq(dt_json_str(x, "severity", ""), "error");
        cr_assert_eq(errors, 0, "%s: %s", names[i], s);
        free(s);
        cJSON_Delete(f);
        free(src);
        free(p);
    }
    tu_proc_free(&ls);
    cr_assert_gt(n, 1, "no templates found");
}

/* State kept across launches: a writable __device__ or __managed__ variable
 * is flagged at its line with its name; functions, const tables, __constant__
 * data and the words inside comments and strings are not. */
Test(rules, writable_device_variables_should_be_flagged_as_state_across_launches)
{
    cJSON *f = run("#include \"ditto.cuh\"\n"
                   "__device__ __forceinline__ float twice(float v) { return 2 * v; }\n"
                   "__device__ const int table[4] = {1, 2, 3, 4};\n"
                   "__constant__ float coef[8];\n"
                   "/* __device__ int in_a_comment; */\n"
                   "__device__ int launches;\n"
                   "__global__ void k(float *y) { y[0] = twice(1) + launches++; }\n");
    cr_assert_eq(count(f, "device-state", 6), 1);
    cr_assert_eq(count(f, "device-state", 0), 1);
    cJSON_Delete(f);
    char name[64];
    int line = 0;
    cr_assert(gpu_device_state("__device__ float cache_y[1 << 22];\n", name, sizeof name, &line));
    cr_assert_str_eq(name, "cache_y");
    cr_assert_eq(line, 1);
    cr_assert(gpu_device_state("int a;\n__managed__ int flag = 0;\n", name, sizeof name, &line));
    cr_assert_str_eq(name, "flag");
    cr_assert_eq(line, 2);
    cr_assert(gpu_device_state("__device__ const float *volatile last;\n", name, sizeof name,
                               &line),
              "a pointer to const is itself writable");
    cr_assert_not(gpu_device_state("__device__ constexpr int K = 4;\n"
                                   "const char *s = \"__device__ int x;\";\n"
                                   "template <typename T> __device__ T f(T v) { return v; }\n",
                                   name, sizeof name, &line));
    f = run("__device__ const int table[2] = {1, 2};\n"
            "__global__ void k(float *y) { y[0] = table[1]; }\n");
    cr_assert_eq(count(f, "device-state", 0), 0);
    cJSON_Delete(f);
}

/* issue 37: an include outside ditto's kernel headers is an error the coder
 * hears about, with its line, before the worker refuses it. */
Test(rules, an_include_outside_the_sandbox_should_be_flagged)
{
    cJSON *f = run("#include \"ditto.cuh\"\n"
                   "#include \"/home/me/.ssh/id_rsa\"\n"
                   "#include \"../../secrets.h\"\n"
                   "__global__ void k(float *y) { y[0] = 1; }\n");
    cr_assert_eq(count(f, "include-outside-sandbox", 2), 1);
    cr_assert_eq(count(f, "include-outside-sandbox", 3), 1);
    cr_assert_eq(count(f, "include-outside-sandbox", 0), 2);
    const cJSON *x;
    cJSON_ArrayForEach(x, f)
    {
        if (strcmp(dt_json_str(x, "id", ""), "include-outside-sandbox") == 0)
            cr_assert_str_eq(dt_json_str(x, "severity", ""), "error");
    }
    cJSON_Delete(f);
}
