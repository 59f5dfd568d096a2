/* fuzz_session.c -- libFuzzer target: any bytes as a session's
 * events.jsonl, read back as `ditto sessions` and resume read it. */
#include "sessions/sessions.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[256], log_path[320];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (dir[0] == '\0') {
        /* TMPDIR=/dev/shm keeps a long run off the disk: a file per input */
        const char *tmp = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/ditto-fuzz-session-%ld", tmp && *tmp ? tmp : "/tmp",
                 (long)getpid());
        mkdir(dir, 0700);
        snprintf(log_path, sizeof log_path, "%s/events.jsonl", dir);
    }
    FILE *f = fopen(log_path, "wb");
    if (f == NULL)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);
    dt_err e = {0};
    sess_log *l = sess_log_read(NULL, dir, &e);
    if (l == NULL) {
        if (e.msg[0] == '\0')
            abort();
        return 0;
    }
    /* What was accepted is an array of objects with increasing seq. */
    double last = 0;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, l->events)
    {
        double seq = dt_json_num(ev, "seq", -1);
        if (!cJSON_IsObject(ev) || seq <= last)
            abort();
        last = seq;
    }
    sess_log_free(l);
    return 0;
}
