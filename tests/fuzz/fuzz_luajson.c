/* fuzz_luajson.c -- libFuzzer target: any bytes as JSON handed to a Lua
 * hook and back (the conversion both ways, depth and size limits). */
#include "scripting/scripting.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lx_state *L;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (L == NULL) {
        lx_opts o = {.memory_cap = (size_t)16 << 20};
        L = lx_new(&o, NULL);
        if (L == NULL)
            abort();
    }
    cJSON *j = dt_json_parse((const char *)data, size, "data", NULL);
    if (j == NULL)
        return 0;
    dt_err e = {0};
    cJSON *once = lx_roundtrip(L, j, &e);
    if (once == NULL) {
        if (e.msg[0] == '\0')
            abort();
    } else {
        /* A second trip changes nothing more. */
        cJSON *twice = lx_roundtrip(L, once, &e);
        if (twice == NULL || !cJSON_Compare(once, twice, 1))
            abort();
        cJSON_Delete(twice);
        cJSON_Delete(once);
    }
    cJSON_Delete(j);
    return 0;
}
