/* fuzz_smtx.c -- libFuzzer target: any bytes through the DLMC .smtx reader and checks. */
#include "sparse/sparse.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_err e = {0};
    /* The limit keeps large declared sizes under the fuzzer's malloc limit. */
    sp_read_opts o = {.max_bytes = 8 << 20};
    FILE *f = fmemopen((void *)(uintptr_t)data, size, "r");
    if (f == NULL)
        return 0;
    sp_csr *a = sp_smtx_read_stream(f, "fuzz.smtx", &o, &e);
    fclose(f);
    if (a == NULL) {
        /* One line naming the input and a line number. */
        if (strncmp(e.msg, "fuzz.smtx:", 10) != 0 || e.msg[10] < '1' || e.msg[10] > '9' ||
            strchr(e.msg, '\n') != NULL)
            abort();
        return 0;
    }
    if (sp_csr_validate(a, &e) != 0 || a->pattern != 1)
        abort();
    for (int64_t k = 0; k < a->nnz; k++) {
        if (a->val[k] != 1.0)
            abort();
    }
    /* The same pattern must come back through the Matrix Market writer. */
    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    if (w != NULL) {
        if (sp_mm_write_stream(a, w, &e) != 0)
            abort();
        fclose(w);
        f = fmemopen(text, len, "r");
        sp_csr *b = sp_mm_read_stream(f, "copy.mtx", NULL, &e);
        fclose(f);
        char fa[17], fb[17];
        if (b == NULL)
            abort();
        sp_csr_fingerprint(a, fa);
        sp_csr_fingerprint(b, fb);
        if (strcmp(fa, fb) != 0 || b->pattern != 1)
            abort();
        sp_csr_free(b);
        free(text);
    }
    sp_csr_free(a);
    return 0;
}
