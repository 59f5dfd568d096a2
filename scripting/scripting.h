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
 *       back to the pipeline. "after" hooks see the step's artifact. A hook
 *       edits its table in place or returns a replacement table.
 *   ditto.review(fn)          fn(step) -> "approve" | "reject", reason | nil
 *       ("ask" is the same as nil)
 *   ditto.rule{ id=, message=, severity=, check=fn(source) -> {line, ...} }
 *       check returns line numbers or {line=, message=} tables (line may be
 *       left out: a finding about the whole source); severity is "error",
 *       "warning" (default) or "note"; ids are unique.
 *   ditto.param_space(strategy, { NAME = {values...}, ... })
 *   ditto.log(...)            appended to the current step's reasoning, one
 *       line per call, arguments tab-separated; print() does the same (stdout
 *       belongs to the TUI). Outside a hook call (a file's top level, a
 *       review, a rule) the text goes to dt_info.
 *   ditto.array([t])          marks t (or a new table) as a JSON array, so
 *       that it is written [] while empty
 * ditto.on, review, rule and param_space register only while a file loads.
 *
 * Data: JSON objects become tables with string keys, arrays become
 * sequences, integral numbers within 2^53 become Lua integers (others
 * floats), null becomes nil (dropped from objects, a hole in arrays). Back:
 * a table with string keys is an object, one with positive integer keys an
 * array (holes written as null). An empty table is an object unless it came
 * from a JSON array or ditto.array: those tables carry a marker metatable.
 * Objects keep the key order they came with; new keys follow, sorted.
 * Refused, with the path of the value: cycles, functions and other
 * non-JSON values, keys that are neither strings nor positive integers,
 * mixed string and integer keys, NaN and infinities, integers past 2^53,
 * strings with NUL bytes, sparse arrays (largest index above 1024 and above
 * twice the element count), nesting deeper than 1000.
 *
 * Sandbox (default): base library without load, loadfile, dofile, require,
 * collectgarbage; table, string, math, utf8. Reading one of the removed
 * names (or io, os, package, debug, coroutine) raises "NAME is not
 * available in the sandbox (why)" at the reader's FILE:LINE. setmetatable
 * refuses __gc (finalizers would run outside the budget). An instruction
 * budget per call (a count hook raising an error; once spent, every further
 * instruction raises, so a script's own pcall cannot swallow it), a time
 * budget per call by the clock (the same hook, and the allocator, so C
 * functions that build strings are caught too; pattern matching is
 * checked for its worst case before it starts and string.rep for its size,
 * see lx_limits.c), and a
 * memory cap for the whole state (the allocator refuses past it; Lua raises
 * "not enough memory"). With unsafe = 1 (--lua-unsafe) io and os are opened
 * too. Every error, budget or memory overrun is caught, reported with the
 * Lua traceback and FILE:LINE in the call's errors, and the offending
 * function is disabled for the rest of the run; the pipeline carries on
 * without it.
 *
 * Errors: each failure appends one entry to the errors buffer: a first line
 * "FILE:LINE: message" (the definition's FILE:LINE when the message has
 * none, as for memory errors), then lines indented by two spaces: which
 * function it was and that it is now disabled, and the traceback. Every
 * unindented line starts a new entry. A NULL errors buffer sends entries to
 * dt_warn.
 *
 * Ownership: lx_new returns a state freed by lx_free. JSON passed in is
 * borrowed unless a name says _take; JSON returned is owned by the caller. */
#ifndef DITTO_SCRIPTING_H
#define DITTO_SCRIPTING_H

#include "core/core.h"

typedef struct lx_state lx_state;

typedef struct lx_opts {
    int unsafe;              /* open io and os */
    long instruction_budget; /* per hook call (and per file's top level);
                                <= 0: the default, 10,000,000 */
    size_t memory_cap;       /* bytes for the whole state; 0: the default, 64 MiB */
    double time_budget;      /* seconds of wall clock per hook call (and per file's top
                                level), checked every few thousand instructions and at
                                every allocation; <= 0: the default, 2 s */
} lx_opts;

/* o may be NULL (defaults). On error (a cap too small for the libraries)
 * returns NULL and sets e. */
lx_state *lx_new(const lx_opts *o, dt_err *e);
void lx_free(lx_state *L);

/* Load one hook file (runs its top level, which registers hooks) as text:
 * bytecode is refused. A load error is returned (-1, e = "FILE:LINE:
 * message", the first line of the report) and nothing that file registered
 * stays registered (globals it set do stay). */
int lx_load_file(lx_state *L, const char *path, dt_err *e);
/* Load every *.lua in dir in name order (names starting with '.' are
 * skipped); a missing dir is not an error. Errors of individual files are
 * appended to errors (one entry each, see Errors above) and the others
 * still load. Returns the number loaded. */
int lx_load_dir(lx_state *L, const char *dir, dt_buf *errors);
/* Functions registered with ditto.on, ditto.review and ditto.rule that are
 * still enabled. */
int lx_hook_count(const lx_state *L);

/* Run the hooks for (step, phase) in registration order on data: *data is
 * replaced (the old tree freed) by what the hooks left in the table (before
 * hooks may edit it); *data may be NULL (hooks get an empty table). Each
 * hook gets a fresh table made from the version the previous successful
 * hook left, so a failing hook's half-made edits are dropped. When no hook
 * matches, *data is not touched. Text from ditto.log goes to log (at most
 * 1 MiB per call; log may be NULL); each failing hook adds an entry (with
 * traceback) to errors and is disabled. Returns the number of hooks that
 * ran to completion. */
int lx_run_hooks(lx_state *L, const char *step, const char *phase, cJSON **data, dt_buf *log,
                 dt_buf *errors);

/* Ask the review functions about a step (its event-log view: kind, status,
 * artifact, measurement, verify result...), in registration order; the
 * first that decides wins and the later ones are not called. Returns LX_ASK
 * when none decides, else the decision; for reject the reason is appended
 * to reason (may be NULL), a default naming the function when it gave
 * none. */
typedef enum { LX_ASK, LX_APPROVE, LX_REJECT } lx_decision;
lx_decision lx_review(lx_state *L, const cJSON *step, dt_buf *reason, dt_buf *errors);

/* Run the custom rules on a kernel source. Returns an array (caller frees,
 * never NULL) of {"id", "severity", "message", "line" (null when the check
 * gave none), "source": "lua"} findings, in rule then check order. A rule
 * whose check fails or returns something else than a list of findings adds
 * an entry to errors, contributes nothing and is disabled. */
cJSON *lx_rules(lx_state *L, const char *source, dt_buf *errors);

/* Parameter spaces registered with ditto.param_space: an object
 * {strategy: {NAME: [values...]}} (caller frees), {} when none. Calls for
 * the same strategy merge; a later NAME replaces an earlier one. Values
 * are non-empty lists of numbers, strings or booleans. */
cJSON *lx_param_spaces(lx_state *L);

/* JSON <-> Lua conversion, exposed for tests: a round trip keeps objects
 * (and their key order), arrays (1-based sequences, empty ones too),
 * strings, numbers (integers stay integers; integral floats such as 2.0
 * come back as 2), booleans; null becomes nil (dropped from objects, kept
 * as null between the elements of an array, lost at its end: Lua cannot
 * tell [1, null] from [1]). On error returns NULL and sets e. */
cJSON *lx_roundtrip(lx_state *L, const cJSON *v, dt_err *e);

#endif /* DITTO_SCRIPTING_H */
