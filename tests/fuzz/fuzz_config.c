/* fuzz_config.c -- libFuzzer target: any bytes as config.json's "llm"
 * section and as a hardware spec (a hardware/NAME.json file). */
#include "agents/llm.h"
#include "hardware/hardware.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *j = dt_json_parse((const char *)data, size, "config.json", NULL);
    if (j == NULL)
        return 0;
    llm_config c;
    llm_config_init(&c);
    dt_buf p = DT_BUF_INIT;
    int rc = llm_config_from_json(&c, j, &p);
    if ((rc != 0) != (p.len > 0))
        abort();
    if (rc == 0 && (c.model == NULL || !(c.request_timeout_s > 0) || c.max_answer_bytes == 0))
        abort();
    llm_config_clear(&c);
    dt_buf_reset(&p);
    int n = hw_check_json(j, "fuzz.json", &p);
    if ((n > 0) != (p.len > 0))
        abort();
    dt_buf_free(&p);
    cJSON_Delete(j);
    return 0;
}
