/* fuzz_mm.c -- libFuzzer target: any bytes through the Matrix Market readers and checks. */
#include "sparse/sparse.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Large declared sizes are legal; the limit keeps them from reaching the
 * fuzzer's own malloc limit while still exercising every size check. */
#define FUZZ_MAX_BYTES (8 << 20)

static FILE *open_bytes(const uint8_t *data, size_t size)
{
    return fmemopen((void *)(uintptr_t)data, size, "r");
}

/* A failure is one line that names the input and a line number. */
static void check_message(const dt_err *e, const char *name)
{
    size_t n = strlen(name);
    if (strncmp(e->msg, name, n) != 0 || e->msg[n] != ':' || e->msg[n + 1] < '1' ||
        e->msg[n + 1] > '9' || strchr(e->msg, '\n') != NULL)
        abort();
}

/* What was read must be a valid CSR, and writing it must read back the same
 * matrix bit for bit. */
static void check_round_trip(const sp_csr *a)
{
    dt_err e = {0};
    if (sp_csr_validate(a, &e) != 0)
        abort();
    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    if (w == NULL)
        return;
    if (sp_mm_write_stream(a, w, &e) != 0)
        abort();
    fclose(w);
    FILE *f = fmemopen(text, len, "r");
    sp_read_opts o = {.quiet = 1};
    sp_csr *b = sp_mm_read_stream(f, "copy.mtx", &o, &e);
    fclose(f);
    if (b == NULL)
        abort();
    char fa[17], fb[17];
    sp_csr_fingerprint(a, fa);
    sp_csr_fingerprint(b, fb);
    if (strcmp(fa, fb) != 0 || a->pattern != b->pattern)
        abort();
    sp_csr_free(b);
    free(text);
}

static void check_dense_round_trip(const double *d, int32_t rows, int32_t cols)
{
    size_t n = (size_t)rows * (size_t)cols;
    for (size_t k = 0; k < n; k++) {
        if (!isfinite(d[k]))
            abort(); /* read without allow_nonfinite */
    }
    char *text = NULL;
    size_t len = 0;
    FILE *w = open_memstream(&text, &len);
    if (w == NULL)
        return;
    dt_err e = {0};
    if (sp_mm_write_dense(w, d, rows, cols, &e) != 0)
        abort();
    fclose(w);
    FILE *f = fmemopen(text, len, "r");
    int32_t r2 = -1, c2 = -1;
    double *b = sp_mm_read_dense(f, "copy.mtx", &r2, &c2, NULL, &e);
    fclose(f);
    if (b == NULL || r2 != rows || c2 != cols || memcmp(b, d, n * sizeof *d) != 0)
        abort();
    free(b);
    free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_log_set_level(DT_LOG_ERROR); /* the complex-values warning is expected */
    dt_err e = {0};
    for (int nonfinite = 0; nonfinite <= 1; nonfinite++) {
        sp_read_opts o = {.allow_nonfinite = nonfinite, .max_bytes = FUZZ_MAX_BYTES};
        FILE *f = open_bytes(data, size);
        if (f == NULL)
            return 0;
        sp_csr *a = sp_mm_read_stream(f, "fuzz.mtx", &o, &e);
        fclose(f);
        if (a == NULL)
            check_message(&e, "fuzz.mtx");
        else if (!nonfinite)
            check_round_trip(a);
        sp_csr_free(a);
    }
    sp_read_opts o = {.max_bytes = FUZZ_MAX_BYTES};
    FILE *f = open_bytes(data, size);
    if (f == NULL)
        return 0;
    int32_t rows = -1, cols = -1;
    double *d = sp_mm_read_dense(f, "fuzz.mtx", &rows, &cols, &o, &e);
    fclose(f);
    if (d == NULL)
        check_message(&e, "fuzz.mtx");
    else
        check_dense_round_trip(d, rows, cols);
    free(d);
    return 0;
}
