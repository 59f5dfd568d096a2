/* fuzz_kb.c -- libFuzzer target: any bytes as a knowledge-base import file
 * (one entry or an array of them), through the entry validator that
 * `ditto kb import` applies to each. */
#include "knowledge/knowledge.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *j = dt_json_parse((const char *)data, size, "import.json", NULL);
    if (j == NULL)
        return 0;
    dt_buf p = DT_BUF_INIT;
    if (cJSON_IsArray(j)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, j)
        {
            size_t before = p.len;
            int n = kb_validate(it, "import.json", &p);
            if ((n > 0) != (p.len > before))
                abort(); /* a count of problems matches the lines given */
        }
    } else {
        int n = kb_validate(j, NULL, &p);
        if ((n > 0) != (p.len > 0))
            abort();
    }
    dt_buf_free(&p);
    cJSON_Delete(j);
    return 0;
}
