/* fuzz_spec.c -- libFuzzer target: any bytes as a problem spec (spec.json). */
#include "sparse/sparse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_err e = {0};
    cJSON *j = dt_json_parse((const char *)data, size, "spec.json", &e);
    if (j == NULL) {
        if (strncmp(e.msg, "spec.json:", 10) != 0)
            abort(); /* a syntax error names the file, line and column */
        return 0;
    }
    sp_spec s;
    sp_spec_init(&s);
    dt_buf p = DT_BUF_INIT;
    int rc = sp_spec_from_json(&s, j, "spec.json", &p);
    if ((rc != 0) != (p.len > 0))
        abort(); /* a refusal always says why, and only a refusal does */
    if (rc == 0) {
        if (s.n < 1 || s.n > 65536 || (s.op == SP_SDDMM && s.n > SP_SDDMM_MAX_K))
            abort();
        cJSON *back = sp_spec_json(&s);
        cJSON_Delete(back);
    }
    dt_buf_free(&p);
    sp_spec_clear(&s);
    cJSON_Delete(j);
    return 0;
}
