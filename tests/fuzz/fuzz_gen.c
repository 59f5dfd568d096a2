/* fuzz_gen.c -- libFuzzer target: any bytes after "gen:" or "rep:" as a
 * matrix source string (generator kinds and keys, sizes, replication). */
#include "sparse/sparse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* Admission keeps each generated matrix small: the fuzzer looks for
     * crashes in parsing and generation, not for big matrices. */
    setenv("DITTO_MEM_AVAILABLE", "16M", 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    dt_buf src = DT_BUF_INIT;
    dt_buf_puts(&src, (data[0] & 1) ? "rep:" : "gen:");
    dt_buf_append(&src, data + 1, size - 1);
    if (strlen(src.data) != src.len) { /* a NUL inside: not a C string */
        dt_buf_free(&src);
        return 0;
    }
    dt_err e = {0};
    sp_read_opts o = {.quiet = 1, .max_bytes = 16 << 20};
    sp_csr *a = sp_load(src.data, &o, &e);
    if (a == NULL) {
        if (e.msg[0] == '\0')
            abort();
    } else if (sp_csr_validate(a, &e) != 0) {
        abort();
    }
    sp_csr_free(a);
    dt_buf_free(&src);
    return 0;
}
