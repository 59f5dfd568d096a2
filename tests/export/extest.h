/* extest.h -- synthetic sessions for the `ditto export` tests, recorded with the session
 * store the way cli/run.c's sink records a real run of agents/orch.c: the events, and the
 * artifact files (report.json, plan_v0.json, kernel_v1.cu, compile_v1.log, verify_v1.json,
 * measure_v1.json, tune.json, kb_entry.json, best_kernel.cu) beside them. */
#ifndef DITTO_EXTEST_H
#define DITTO_EXTEST_H

#include "sessions/sessions.h"
#include "tests/common/testutil.h"

typedef struct ex_version_opts {
    const char *source; /* the generated kernel (NULL: the SpMV template with BLOCK 256) */
    const char *params; /* JSON object text ({"BLOCK": 256}) */
    double us;          /* measured time; 0: the pipeline stops after compiling (no GPU) */
} ex_version_opts;

typedef struct ex_opts {
    const char *spec;         /* spec.json text (NULL: SpMV fp32 on the fixture's matrix) */
    const char *strategy;     /* the plan's strategy ("csr-thread") */
    ex_version_opts v[4];     /* generated versions, in order; v[0].source NULL and no other
                                 set means one default version measured at 12.5 us */
    int nversions;            /* 0 means 1 */
    const char *method;       /* "cold" (default) or "graph" */
    const char *baseline;     /* best cuSPARSE algorithm ("CSR_ALG1") */
    const char *tuned_source; /* tune.json's best variant, faster than every version */
    const char *tuned_params;
    int unfinished; /* no session_finished (a crash after the last step) */
} ex_opts;

typedef struct ex_fix {
    char *tmp; /* the test's temporary folder: the session root is TMP/sessions */
    char *root;
    char *id;
    char *dir;    /* the session folder */
    char *matrix; /* TMP/m.mtx, a small banded matrix */
    char *out;    /* TMP/out, where the tests export to */
} ex_fix;

/* The fixture's folders and its Matrix Market file; no session yet. */
ex_fix ex_fixture(void);
/* Record a session under fix->root (fix->id, fix->dir set). */
void ex_session(ex_fix *f, const ex_opts *o);
void ex_fixture_free(ex_fix *f);

/* The SpMV template instantiated with BLOCK = block, as agents/expert.c ag_instantiate
 * does. Caller frees. */
char *ex_spmv_source(int block);
/* An SpMM kernel over CSR that bakes ROWS and NCOLS in through its contract's defines. */
extern const char ex_spmm_source[];

/* Run `ditto export ID ARGS` (ARGS appended verbatim) over the fixture's root. */
tu_proc ex_export(const ex_fix *f, const char *args);
/* OUT/NAME's text, asserting it exists. Caller frees. */
char *ex_read(const ex_fix *f, const char *name);
/* Assert that p ran without a sanitizer report. */
void ex_no_sanitizer(const tu_proc *p);
/* 1 when nvcc is on PATH (else the test should skip). */
int ex_have_nvcc(void);

#endif
