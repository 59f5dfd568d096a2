/* scripting.h -- Lua 5.4 hooks: the only module that includes lua.h.
 *
 * Prefix lx_. Depends on core only: the pipeline hands data to hooks as JSON
 * (cJSON), converted to Lua tables and back, so nothing outside this module
 * knows Lua exists. The `ditto` module seen by scripts:
 *
 *   ditto.on(step, "before"|"after", fn)   fn(data) for step in profile, plan,
 *       check, generate, compile, verify, measure, tune, learn. A "before"
 *       hook may modify the table it gets (change a plan decision, add a
 *       prompt line, narrow a parameter space): the modified table is handed
 *       back to the pipeline. "after" hooks see the step's artifact.
 *   ditto.review(fn)          fn(step) -> "approve" | "reject", reason | nil
 *   ditto.rule{ id=, message=, check=fn(source) -> {line, ...} }
 *   ditto.param_space(strategy, { NAME = {values...}, ... })
 *   ditto.log(text)           appended to the current step's reasoning
 *
 * Sandbox (default): base library without load, loadfile, dofile, require,
 * collectgarbage; table, string, math, utf8. An instruction budget per call
 * (a count hook raising an error) and a memory cap (the allocator refuses
 * past it). With unsafe = 1 (--lua-unsafe) io and os are opened too. Every
 * error, budget or memory overrun is caught, reported with the Lua
 * traceback and FILE:LINE in the call's errors, and the offending hook is
 * disabled for the rest of the run; the pipeline carries on without it.
 *
 * Ownership: lx_new returns a state freed by lx_free. JSON passed in is
 * borrowed unless a name says _take; JSON returned is owned by the caller. */
#ifndef DITTO_SCRIPTING_H
#define DITTO_SCRIPTING_H

#include "core/core.h"

typedef struct lx_state lx_state;

typedef struct lx_opts {
    int unsafe;              /* open io and os */
    long instruction_budget; /* per hook call; default 10,000,000 */
    size_t memory_cap;       /* bytes for the whole state; default 64 MiB */
} lx_opts;

lx_state *lx_new(const lx_opts *o, dt_err *e);
void lx_free(lx_state *L);

/* Load one hook file (runs its top level, which registers hooks). A load
 * error is returned (-1, e = "FILE:LINE: message") and nothing of that file
 * stays registered. */
int lx_load_file(lx_state *L, const char *path, dt_err *e);
/* Load every *.lua in dir in name order; a missing dir is not an error.
 * Errors of individual files are appended to errors (one per line) and the
 * others still load. Returns the number loaded. */
int lx_load_dir(lx_state *L, const char *dir, dt_buf *errors);
int lx_hook_count(const lx_state *L);

/* Run the hooks for (step, phase) on data: data is replaced by what the
 * hooks left in the table (before hooks may edit it). Text from ditto.log
 * goes to log; each failing hook adds a line (with traceback) to errors and
 * is disabled. Returns the number of hooks that ran. */
int lx_run_hooks(lx_state *L, const char *step, const char *phase, cJSON **data, dt_buf *log,
                 dt_buf *errors);

/* Ask the review functions about a step (its event-log view: kind, status,
 * artifact, measurement, verify result...). Returns LX_ASK when none
 * decides, else the decision, with a reason for reject in reason. */
typedef enum { LX_ASK, LX_APPROVE, LX_REJECT } lx_decision;
lx_decision lx_review(lx_state *L, const cJSON *step, dt_buf *reason, dt_buf *errors);

/* Run the custom rules on a kernel source. Returns an array (caller frees)
 * of {"id", "message", "line", "source": "lua"} findings. */
cJSON *lx_rules(lx_state *L, const char *source, dt_buf *errors);

/* Parameter spaces registered with ditto.param_space: an object
 * {strategy: {NAME: [values...]}} (caller frees), {} when none. */
cJSON *lx_param_spaces(lx_state *L);

/* JSON <-> Lua conversion, exposed for tests: a round trip keeps objects,
 * arrays (1-based sequences), strings, numbers (integers stay integers),
 * booleans; null becomes nil (and is dropped from objects). */
cJSON *lx_roundtrip(lx_state *L, const cJSON *v, dt_err *e);

#endif /* DITTO_SCRIPTING_H */
