/* fuzz_expr.c -- libFuzzer target: any bytes as a launch-contract
 * expression, evaluated with hostile variable values. Must always end in a
 * value or an error: no SIGFPE, no overflow, no deep recursion. */
#include "gpu/contract.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *x = dt_xstrndup((const char *)data, size);
    gpu_vars v = {.n = 0};
    gpu_vars_set(&v, "rows", 1000);
    gpu_vars_set(&v, "nnz", 7);
    gpu_vars_set(&v, "big", INT64_MAX);
    gpu_vars_set(&v, "small", INT64_MIN);
    gpu_vars_set(&v, "m1", -1);
    gpu_vars_set(&v, "zero", 0);
    int64_t r = 0;
    dt_err e = {0};
    int rc = gpu_eval(x, &v, &r, &e);
    if (rc != 0 && e.msg[0] == '\0')
        abort(); /* an error always says what */
    dt_err e2 = {0};
    int syn = gpu_expr_check(x, &e2);
    if (rc == 0 && syn != 0)
        abort(); /* what evaluates also parses */
    free(x);
    return 0;
}
