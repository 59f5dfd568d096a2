/* fuzz_worker.c -- libFuzzer target: any bytes as one worker request line:
 * the JSON, the problem fields, the kernel object (source sandbox, options,
 * contract, parameters), and a reply that must be valid UTF-8 JSON. */
#include "gpu/sandbox.h"
#include "gpu/worker/worker.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *req = dt_json_parse((const char *)data, size, "request", NULL);
    if (req == NULL)
        return 0;
    dt_err e = {0};
    wk_problem p;
    if (wk_problem_parse(req, &p, &e) != 0 && e.msg[0] == '\0')
        abort();
    wk_kernel k;
    if (wk_kernel_parse(req, &k, &e) == 0)
        wk_kernel_clear(&k);
    else if (e.msg[0] == '\0')
        abort();
    /* The reply echoes what the request held: it must come out valid. */
    cJSON *resp = cJSON_Duplicate(req, 1);
    if (resp != NULL) {
        dt_json_utf8_fix(resp);
        char *s = dt_json_print(resp, 0);
        if (dt_utf8_fix(s, strlen(s)) != NULL)
            abort();
        cJSON *back = cJSON_Parse(s);
        if (back == NULL)
            abort();
        cJSON_Delete(back);
        free(s);
        cJSON_Delete(resp);
    }
    cJSON_Delete(req);
    return 0;
}
