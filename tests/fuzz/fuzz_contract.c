/* fuzz_contract.c -- libFuzzer target: any bytes as a kernel source with
 * its launch contract and manifest blocks (what a generated kernel or an
 * edited plan carries). */
#include "gpu/contract.h"
#include "gpu/sandbox.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = dt_xstrndup((const char *)data, size);
    gpu_contract c;
    dt_err e = {0};
    if (gpu_contract_from_source(src, &c, &e) == 0) {
        gpu_vars v = {.n = 0};
        gpu_vars_set(&v, "rows", 100);
        gpu_vars_set(&v, "nnz", 1000);
        int64_t x = 0;
        for (int i = 0; i < 3; i++) {
            gpu_eval(c.grid[i], &v, &x, NULL);
            gpu_eval(c.block[i], &v, &x, NULL);
        }
        gpu_eval(c.smem, &v, &x, NULL);
        cJSON *j = gpu_contract_json(&c);
        gpu_contract c2;
        if (gpu_contract_parse(j, &c2, &e) != 0)
            abort(); /* what parsed once parses again from its own JSON */
        gpu_contract_clear(&c2);
        cJSON_Delete(j);
        gpu_contract_clear(&c);
    } else if (e.msg[0] == '\0') {
        abort();
    }
    gpu_manifest m;
    if (gpu_manifest_from_source(src, &m, &e) == 0) {
        cJSON *d = gpu_manifest_defaults(&m);
        if (gpu_manifest_check(&m, d, NULL, &e) != 0 && e.msg[0] == '\0')
            abort();
        cJSON_Delete(d);
        gpu_manifest_clear(&m);
    }
    gpu_sandbox_scan(src, strlen(src), NULL, NULL); /* src ends at a NUL in the input */
    free(src);
    return 0;
}
