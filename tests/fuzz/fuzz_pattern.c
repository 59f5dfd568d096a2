/* fuzz_pattern.c -- libFuzzer target: any subject and Lua pattern through a
 * hook's string.find, match, gmatch and gsub: each call must end within
 * the hook's budget (the fuzzer's -timeout catches one that does not). */
#include "scripting/scripting.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char hook_path[64];

static const char hook[] = "ditto.on('plan', 'before', function(d)\n"
                           "  local s, p = d.s, d.p\n"
                           "  pcall(string.find, s, p)\n"
                           "  pcall(string.match, s, p)\n"
                           "  pcall(string.gsub, s, p, '%0%0')\n"
                           "  pcall(function() local n = 0; for w in s:gmatch(p) do n = n + 1; if "
                           "n > 1000 then break end end end)\n"
                           "  pcall(string.rep, s, #p, p)\n"
                           "end)\n";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (hook_path[0] == '\0') {
        snprintf(hook_path, sizeof hook_path, "/tmp/ditto-fuzz-pattern-%ld.lua", (long)getpid());
        FILE *f = fopen(hook_path, "w");
        if (f == NULL || fputs(hook, f) < 0)
            abort();
        fclose(f);
    }
    if (size == 0)
        return 0;
    size_t cut = data[0];
    data++;
    size--;
    if (cut > size)
        cut = size;
    char *s = dt_xstrndup((const char *)data, cut);
    char *p = dt_xstrndup((const char *)data + cut, size - cut);
    /* a small budget: what is checked is that every call stops at it, and
     * inputs that run to it (most of a long run's corpus) stay cheap */
    lx_opts o = {.instruction_budget = 100000, .time_budget = 0.05};
    lx_state *L = lx_new(&o, NULL);
    if (L == NULL || lx_load_file(L, hook_path, NULL) != 0)
        abort();
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "s", s);
    cJSON_AddStringToObject(d, "p", p);
    dt_buf log = DT_BUF_INIT, errs = DT_BUF_INIT;
    lx_run_hooks(L, "plan", "before", &d, &log, &errs);
    dt_buf_free(&log);
    dt_buf_free(&errs);
    cJSON_Delete(d);
    lx_free(L);
    free(s);
    free(p);
    return 0;
}
