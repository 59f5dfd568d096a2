/* fuzz_answer.c -- libFuzzer target: any bytes as the text of an LLM
 * answer, through the readers that take the code block and the plan
 * object out of it. The backend's file is included to reach them. */
#include "agents/llmback.c"
#include "gpu/sandbox.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *answer = dt_xstrndup((const char *)data, size);
    char why[256] = "";
    char *code = fenced_block(answer, why, sizeof why);
    if (code == NULL && why[0] == '\0')
        abort(); /* a refusal says why */
    if (code != NULL) {
        gpu_sandbox_scan(code, strlen(code), NULL, NULL);
        gpu_contract c;
        if (gpu_contract_from_source(code, &c, NULL) == 0)
            gpu_contract_clear(&c);
    }
    free(code);
    /* The plan: the first '{' to the last '}', as check_plan takes it. */
    const char *b = strchr(answer, '{'), *e = strrchr(answer, '}');
    if (b != NULL && e != NULL && e >= b) {
        cJSON *j = dt_json_parse(b, (size_t)(e - b + 1), "answer", NULL);
        cJSON_Delete(j);
    }
    free(answer);
    return 0;
}
