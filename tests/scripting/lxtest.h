/* lxtest.h -- helpers for the scripting tests: a state with hook files in a temporary folder. */
#ifndef DITTO_LXTEST_H
#define DITTO_LXTEST_H

#include "tests/common/testutil.h"

#include "scripting/scripting.h"

/* One test's Lua state, its folder of hook files, and the buffers a call
 * writes into. */
typedef struct lt {
    char *dir; /* temporary folder, removed by lxt_close */
    lx_state *L;
    dt_buf log;    /* ditto.log output of the calls */
    dt_buf errors; /* errors of the calls and loads */
} lt;

/* A state with the given budget (0: default), memory cap (0: default) and
 * unsafe flag; fails the test if it cannot be made. */
void lxt_open(lt *t, long budget, size_t cap, int unsafe);
void lxt_close(lt *t);
/* Write DIR/NAME; returns the path (caller frees). */
char *lxt_file(lt *t, const char *name, const char *src);
/* Write DIR/NAME and load it; the load must succeed. */
void lxt_load(lt *t, const char *name, const char *src);
/* Write DIR/NAME and load it; the load must fail. Returns the message
 * (caller frees). */
char *lxt_load_fails(lt *t, const char *name, const char *src);
/* Parse JSON text; fails the test on a syntax error. */
cJSON *lxt_json(const char *text);
/* Compact JSON text of v (caller frees). */
char *lxt_text(const cJSON *v);
/* Run the (step, phase) hooks on the JSON text in; returns the compact
 * result (caller frees) and sets *ran. */
char *lxt_run(lt *t, const char *step, const char *phase, const char *in, int *ran);
/* Clears log and errors. */
void lxt_reset(lt *t);

#endif
