/* testutil.h -- helpers shared by the test executables. */
#ifndef DITTO_TESTUTIL_H
#define DITTO_TESTUTIL_H

#include <criterion/criterion.h>

#include "core/core.h"

/* The matrices the tests need, in the checkout: tests/data (gzip copies of
 * public matrices, described in tests/data/SOURCES.tsv). Borrowed. */
const char *tu_data_dir(void);
/* Full path of one test matrix by its plain name ("bcsstk13.mtx",
 * "dlmc/x.smtx"): $DITTO_MATRICES/NAME[.gz] when that is set and holds it,
 * else tests/data/NAME[.gz]. Fails the test when neither holds it. Caller
 * frees. */
char *tu_matrix(const char *name);
/* The optional folder of extra real matrices (../shared/matrices beside the
 * checkout, or $DITTO_MATRICES), which tests cover when present on top of
 * tests/data. Borrowed; NULL when it does not exist. */
const char *tu_matrices_dir(void);
/* The source checkout ($DITTO_SRC, else the working directory). Borrowed. */
const char *tu_src_dir(void);
/* The ditto binary under test ($DITTO_BIN, else ./ditto). Borrowed. */
const char *tu_ditto_bin(void);

/* Run a command line through /bin/sh, capture stdout and stderr (separately)
 * and the exit status (the signal number + 128 when killed). */
typedef struct tu_proc {
    int status;
    char *out;
    char *err;
} tu_proc;

tu_proc tu_run(const char *fmt, ...) DT_PRINTF(1, 2);
void tu_proc_free(tu_proc *p);

/* A fresh temporary directory, removed by tu_rmtree. Caller frees. */
char *tu_tmpdir(void);
void tu_rmtree(const char *dir);
/* Write text to DIR/NAME; returns the full path (caller frees). */
char *tu_write(const char *dir, const char *name, const char *text);

/* Zeroes the worker state w (a wk_state, gpu/worker/worker.h) and loads NVRTC into
 * it, or skips the test: NVRTC is missing where the CUDA toolkit is not
 * installed. */
#define TU_NVRTC_OR_SKIP(w)                                                                        \
    do {                                                                                           \
        memset(&(w), 0, sizeof(w));                                                                \
        dt_err tu_nvrtc_e_ = {0};                                                                  \
        if (wk_nvrtc(&(w), &tu_nvrtc_e_) == NULL)                                                  \
            cr_skip_test("NVRTC is not available here: %s", tu_nvrtc_e_.msg);                      \
    } while (0)

#endif
