/* agents.h -- the pipeline: profile -> plan -> check -> generate -> compile ->
 * verify -> measure -> tune -> learn as an explicit state machine with
 * review gates, feedback edges and iteration caps, run by agents whose
 * brain is the built-in expert backend or an LLM.
 *
 * Prefix ag_. Everything happens inside ditto's event loop: a run advances
 * as worker replies, LLM tokens and review decisions arrive; nothing here
 * blocks. Everything that happens becomes an event (agents/EVENTS.md)
 * delivered to the sinks, in order: the headless printer, the TUI, the
 * session log, Lua. Nothing here knows how events are shown.
 *
 * Ownership: ag_run_new returns a run freed by ag_run_free. Events handed
 * to sinks are borrowed for the call. Step data returned by accessors is
 * borrowed from the run. */
#ifndef DITTO_AGENTS_H
#define DITTO_AGENTS_H

#include "core/core.h"
#include "gpu/gpu.h"
#include "sparse/sparse.h"

typedef enum {
    AG_PROFILE,
    AG_PLAN,
    AG_CHECK,
    AG_GENERATE,
    AG_COMPILE,
    AG_VERIFY,
    AG_MEASURE,
    AG_TUNE,
    AG_LEARN,
    AG_NKINDS
} ag_kind;

const char *ag_kind_name(ag_kind k);      /* "plan" */
int ag_kind_parse(const char *s, ag_kind *out);
const char *ag_agent_name(ag_kind k);     /* "Kernel Architect" */

typedef enum {
    AG_RUNNING,
    AG_AWAITING,
    AG_APPROVED,
    AG_EDITED,
    AG_REJECTED,
    AG_FAILED,
    AG_SKIPPED
} ag_status;

const char *ag_status_name(ag_status s);

typedef enum { AG_APPROVE, AG_EDIT, AG_REJECT, AG_RETRY, AG_STOP } ag_decision;

const char *ag_decision_name(ag_decision d);

/* Exit codes of a finished run (ditto run's exit status). */
enum {
    AG_EXIT_OK = 0,          /* a verified kernel was produced */
    AG_EXIT_NOT_VERIFIED = 1, /* the pipeline ran but no kernel passed verification */
    AG_EXIT_USAGE = 2,
    AG_EXIT_NO_GPU = 3,      /* stopped where a GPU was needed (compile-only machine) */
    AG_EXIT_STOPPED = 4,     /* a person stopped the run, or a review nobody can answer */
    AG_EXIT_ERROR = 5,       /* matrix, worker, LLM or internal error */
    AG_EXIT_UNRECORDED = 6,  /* the session could not be recorded (cli: before any step
                              * runs, or recording stopped mid-run) */
};

typedef struct ag_step ag_step;
typedef struct ag_run ag_run;

/* A sink receives every event, in order. */
typedef void ag_sink_fn(ag_run *r, const cJSON *event, void *ud);

/* Review policy per step kind: ask (a gate waits), auto (no wait). */
typedef enum { AG_POLICY_AUTO, AG_POLICY_ASK } ag_policy;

/* A review function (e.g. Lua's) asked before a person: return AG_APPROVE
 * or AG_REJECT (with reason filled) to decide, or -1 to ask the person. */
typedef int ag_reviewer_fn(ag_run *r, const ag_step *s, dt_buf *reason, void *ud);

/* Hooks around steps (Lua's ditto.on): may modify data (the step's inputs
 * before, a copy of its artifact after); text appended to log goes to the
 * step's reasoning; errors are reported as diagnostics. */
typedef void ag_hook_fn(ag_run *r, ag_kind kind, const char *phase, cJSON **data, dt_buf *log,
                        dt_buf *errors, void *ud);
/* Custom rules (Lua's ditto.rule) on a kernel source: an array of findings
 * {id, severity, message, line|null} (caller frees); problems running them
 * go to errors. Run in the check step (on the plan's template instantiated)
 * and in the compile step (on the kernel). */
typedef cJSON *ag_rules_fn(ag_run *r, const char *source, dt_buf *errors, void *ud);
/* Parameter spaces (Lua's ditto.param_space): {strategy: {NAME: [values]}}
 * (caller frees), narrowing the planner's candidates and so the tuner. */
typedef cJSON *ag_spaces_fn(ag_run *r, void *ud);

typedef struct ag_opts {
    const sp_spec *spec;      /* borrowed for the run's life */
    gpu_pool *pool;           /* borrowed; NULL: compile-only is impossible too */
    const char *backend;      /* "expert" | "llm" (default: spec's) */
    ag_policy policy[AG_NKINDS];
    int max_iterations;       /* generate attempts overall (default 8) */
    int max_edge;             /* per feedback edge (default 3) */
    double goal_speedup;      /* below it, measure -> plan once more (default 1.0) */
    int tune_budget_variants; /* default 24 */
    double tune_budget_s;     /* default 120 */
    const char *out_dir;      /* where the best kernel is written (default: session dir or .) */
    const char *session_dir;  /* NULL: no session */
    const char *session_id;   /* for the knowledge base's evidence; NULL: "unrecorded" */
    void *llm_config;         /* llm_config* for backend llm, borrowed */
    void *kb;                 /* kb* knowledge base, borrowed, may be NULL */
    ag_reviewer_fn *reviewer;
    void *reviewer_ud;
    ag_hook_fn *hook;
    void *hook_ud;
    ag_rules_fn *rules;       /* with hook_ud; NULL: none */
    ag_spaces_fn *spaces;     /* with hook_ud; NULL: none */
    int max_reviews;          /* rejections of one step kind before the run ends (default 10) */
    int verbose;
    const cJSON *flags;       /* the front end's settings as given (review, backend, model,
                               * endpoint, hooks, ...), borrowed: recorded in session_started,
                               * and in session_resumed on a resume, for the next resume */
} ag_opts;

/* The hardware/software fingerprint of a run on this pool (for the session's
 * fingerprint.json and the session_started event). Caller frees. */
cJSON *ag_fingerprint(gpu_pool *pool);

ag_run *ag_run_new(dt_loop *loop, const ag_opts *o, dt_err *e);
void ag_run_free(ag_run *r);
void ag_add_sink(ag_run *r, ag_sink_fn *fn, void *ud);
/* Start (or, with events from a session log, resume: steps finished in the
 * log are restored, and the run continues after the last finished one). */
int ag_run_start(ag_run *r, const cJSON *resume_events, dt_err *e);
int ag_run_done(const ag_run *r);
int ag_run_exit_code(const ag_run *r);

/* Decide the step awaiting review. edit: artifact replaces the step's
 * artifact (kernel source text as a JSON string, or plan JSON), is
 * re-validated and the dependent steps re-run; a plan edited to another
 * strategy or template is re-derived from that template (contract, space,
 * parameters checked against its manifest); at a failed compile or verify
 * the kernel source may be edited (a new kernel version). An edit that
 * cannot be used is refused (-1, e says why) and its text kept as the
 * step's draft. reject: reason goes back into the agent that made the
 * artifact (a rejected compile, verify or measure goes back to the code
 * generator; nothing is recompiled unchanged), and the expert reads it
 * for what it can act on. A failed step cannot be approved (-1): it is
 * sent back with feedback (reject), edited or stopped. Returns -1 (e set)
 * when no step awaits, the edit is invalid or the approval refused (the
 * gate keeps waiting). */
int ag_decide(ag_run *r, ag_decision d, const cJSON *artifact, const char *reason, dt_err *e);
/* The step awaiting review, or NULL. */
const ag_step *ag_awaiting(const ag_run *r);
/* Approve this and every later gate. */
void ag_approve_rest(ag_run *r);
/* Ask for a tune now (after the current step). */
void ag_request_tune(ag_run *r);
/* Switch the brain for the next steps: what is "backend" (value "expert"
 * or "llm"), "model" or "endpoint" (of the LLM configuration the run
 * borrows, changed in place). The switch is logged as an event (recorded
 * in the session): a log with "setting", "value" and "by": "person".
 * -1 with e (nothing changed) while an LLM request is in flight, for an
 * unknown setting or backend, or for llm without an LLM configured. */
int ag_set_brain(ag_run *r, const char *what, const char *value, dt_err *e);
/* Stop: the current step ends, the run finishes with AG_EXIT_STOPPED. */
void ag_stop(ag_run *r);
/* Stop because nobody can answer the pending review (why: "stdin is
 * closed"): finishes with AG_EXIT_STOPPED like ag_stop, but the decision is
 * recorded as by "unattended", not by a person, and the session stays
 * resumable (the step is asked again on resume). */
void ag_stop_unattended(ag_run *r, const char *why);

/* Read access for front ends. */
int ag_step_count(const ag_run *r);
const ag_step *ag_step_at(const ag_run *r, int i);
int ag_step_id(const ag_step *s);
ag_kind ag_step_kind(const ag_step *s);
int ag_step_version(const ag_step *s);
ag_status ag_step_status(const ag_step *s);
const char *ag_step_reasoning(const ag_step *s);
const cJSON *ag_step_artifact(const ag_step *s);
/* A person's refused edit of this step (plan JSON or kernel text), to reopen
 * in the editor; NULL when none. Borrowed. */
const char *ag_step_draft(const ag_step *s);
/* A summary object for review functions and Lua: {id, kind, version,
 * status, ok, artifact {name, version, content | json}, verify (the latest
 * verification of the kernel under review, {passed, ...}), measurement (the
 * latest measurement, {us, speedup, gbps, ...}), source}. Caller frees. */
cJSON *ag_step_view(const ag_run *r, const ag_step *s);

/* ---- expert backend pieces (exposed for tests and `ditto plan`) ---------- */

/* Feature names -> values for KB retrieval from a PatternReport (its JSON,
 * as sp_report_json writes it) and the problem (row_cv, row_max_over_mean,
 * block_fill_4, n, ...). Caller frees. */
cJSON *ag_features(const cJSON *report, const sp_spec *spec);

/* Rank the kernel templates for a problem: every manifest in the template
 * folder whose op and dtype fit, scored by the approved rules that fire.
 * Returns an array of candidates (caller frees):
 * {strategy, template, score, params (defaults), space {NAME: [values]},
 *  rationale [{rule, text, score}]}, best first. */
cJSON *ag_rank_templates(const cJSON *report, const sp_spec *spec, const char *cc, void *kb,
                         dt_err *e);
/* (agents/select.c) Whether a strategy is safe for skewed rows on the
 * matrix of `report` (its PatternReport JSON): its work per thread does not
 * grow with the longest row (merge-path, seg16 where its tile holds the
 * longest row, csr-adaptive, csr-split-spmm, csr-nnz-sddmm, coo-sddmm);
 * why, when not NULL, gets a static line saying how. */
int ag_skew_safe(sp_op op, const char *strategy, const cJSON *report, const char **why);
/* Mark every candidate of a ranking {skew_safe: bool} and, when none of the
 * first `within` is safe, move the best-scored safe one (ties to merge-path,
 * seg16, csr-adaptive order) to place `within` with a rationale line
 * (rule "planner.skew-safe"). ag_rank_templates does this with within =
 * AG_SKEW_SAFE_WITHIN. This can't fail. */
#define AG_SKEW_SAFE_WITHIN 3
void ag_ensure_skew_safe(cJSON *cands, const cJSON *report, sp_op op, int within);
/* Cut a marked ranking to its first n, except that when none of those is
 * skew-safe the first safe one after them is kept as an (n + 1)th. */
void ag_candidates_cut(cJSON *cands, int n);

/* ---- the fitted selector (agents/selector.c) ---------------------------------
 *
 * A strategy selector fitted from `ditto bench` CSVs on one part of a
 * corpus and reported on another: k nearest neighbours over PatternReport
 * features (ag_features' rows, nnz, row_mean, row_cv, row_max_over_mean,
 * row_gini, empty_rows_frac, bandwidth_frac, block_fill_4, block_fill_16,
 * x_lines_per_nnz and cols / rows), each fitted case voting for the
 * strategy that won it. */

/* The corpus split's rule for a matrix outside the development folders:
 * 1 (validate) when FNV-1a 64 of its name without the extension is even. */
int ag_split_validates(const char *name);
/* A split file (NAME<tab>PART<tab>FOLDER lines, # comments) as {NAME:
 * PART}; NULL with e set ("FILE:LINE: ...") when unreadable or malformed. */
cJSON *ag_split_read(const char *path, dt_err *e);
/* The bench's op name ("spmm-n32") into spec's op, dtype and n; -1 when
 * it names none. */
int ag_selector_op_parse(const char *key, sp_spec *spec);

typedef struct ag_fit_opts {
    const char *const *csv;  /* bench CSVs */
    int ncsv;
    const char *split;       /* the split file */
    const char *fit_part;    /* "fit" */
    const char *validate_part; /* "validate" */
    const char *const *dirs; /* folders to find the CSVs' matrices in */
    int ndirs;
    const char *command;     /* for the provenance */
    int k;                   /* neighbours (default 3) */
} ag_fit_opts;

/* Fit on the verified cases of the fit part; report (markdown, may be
 * NULL) gets the validation on the validate part, log one line per case
 * left out and why. Returns the model (caller frees): {kind "selector",
 * method, k, features [{name, transform, mean, scale}], cases [{op,
 * matrix, regime, winner, speedup, x, strategies}], provenance {summary,
 * command, inputs [{file, fnv1a64, verified_cases}], split, fit_part,
 * validate_part, fitted_at}}; NULL with e set when a CSV or the split
 * cannot be read or the fit part has no case. */
cJSON *ag_selector_fit(const ag_fit_opts *o, dt_buf *report, dt_buf *log, dt_err *e);
/* The votes of the nearest fitted cases of op `opkey` for a problem of
 * ag_features' `features`: {votes [{strategy, share}] largest first,
 * neighbours [{matrix, regime, winner, speedup, distance}]}, or NULL when
 * the model has no case of that op. Caller frees. */
cJSON *ag_selector_predict(const cJSON *model, const char *opkey, const cJSON *features);
/* Where the planner reads the selector: $DITTO_SELECTOR ("none": no
 * selector), else knowledge/selector/model.json in the share folder. Caller
 * frees; NULL for none. */
char *ag_selector_path(void);
/* When a selector is there: add 100 x its vote share to the score of each
 * strategy the nearest fitted cases won with (rationale rule
 * "selector.knn", naming them) and re-rank. ag_rank_templates calls it
 * before ag_ensure_skew_safe. A missing or unreadable selector changes
 * nothing. */
void ag_selector_apply(cJSON *cands, const cJSON *report, const sp_spec *spec);

/* Static rule checks on a kernel source; an array of findings
 * {id, severity, line, message, explanation} (caller frees). contract: the
 * plan's contract JSON the source must keep (NULL: skip that rule). */
cJSON *ag_static_rules(const char *source, const cJSON *contract);

/* ---- the tuner --------------------------------------------------------------
 *
 * Successive halving over each candidate's parameter space, through the
 * worker pool: up to budget_variants legal variants, chosen by
 * ag_tune_points (agents/internal.h: the plan's own params first, then the
 * rules' values, the space's first and middle points, the template's
 * defaults and one-step moves), get a cheap measurement (5 runs); a variant
 * whose reply names the same kernel_key (CUBIN, launch, format) as an
 * earlier one of its strategy is set aside and the next point of a list
 * three budgets long measured in its place, so the budget buys distinct
 * kernels; then up to two refinement rounds (a local search) time the
 * points one step from the strategy's fastest quick point along each
 * parameter of its space (refine of them a round), a second round only
 * where the first found a faster point; the best third (at least 2, at
 * most max_finalists) of each
 * strategy is re-verified with the full battery (a finalist that fails it hands its place to the
 * next-fastest variant, up to three times) and measured in full; each
 * strategy's fastest verified variant is then measured once more next to
 * every cuSPARSE algorithm, with the same method. Timings and verifications
 * run on worker 0 only (one GPU, one kernel at a time); with several
 * workers, every variant is first compiled in parallel into the shared
 * cache.
 * Results are cached by (matrix fingerprint, op, dtype, n, GPU, template
 * hash, space) in $XDG_CACHE_HOME/ditto/tune: a cached best is re-verified
 * and re-measured, not trusted blindly. */

typedef struct ag_tuner ag_tuner;
typedef void ag_tune_progress_fn(const char *line, void *ud);
/* result (taken): {strategies: [{strategy, template, variants: [...],
 * best: {params, us, gbps, gflops, speedup, verified, source}} ...],
 * best: {strategy, template, params, us, speedup, gbps, method, baseline,
 * source}, seconds, cached, quick_baseline {alg, us} (when widening was
 * possible), widened [{fastest_us, cusparse, cusparse_us, added: [names]}],
 * cusparse_faster (when best has a speedup), use {library "cusparse", alg,
 * us, kernel_us, speedup} (only when cuSPARSE is faster: what to call)} */
typedef void ag_tune_done_fn(cJSON *result, void *ud);

typedef struct ag_tune_opts {
    gpu_pool *pool;
    const sp_spec *spec;
    const char *matrix;        /* the pool's matrix handle ("m") */
    const char *fingerprint;   /* of the matrix, for the cache */
    const char *gpu;           /* device name, for the cache */
    const cJSON *candidates;   /* [{strategy, template, params, space}] */
    int budget_variants;       /* per strategy (default 24) */
    double budget_s;           /* overall (default 120) */
    int use_cache;             /* default on */
    int max_finalists;         /* per strategy (0: a third of the variants, at least 2) */
    int refine;                /* points per strategy and refinement round (0: half the
                                * budget, at least 2; < 0: no refinement) */
    const cJSON *more;         /* the ranking's next candidates, in order (copied; NULL:
                                * none): when every quick timing is slower than cuSPARSE's
                                * (timed with the first quick timing), `widen` of them at a
                                * time are added and timed, while half of budget_s lasts */
    int widen;                 /* strategies added per widening (default 2) */
    const cJSON *options;      /* compile options every variant gets, e.g.
                                * ["--maxrregcount=48"] for a reviewer's register cap
                                * (copied; NULL: none); part of the cache key, said in the
                                * first progress line and in the result's "options" */
    const char *options_why;   /* why, for that line (copied; NULL: not said) */
    int compile_only;          /* no GPU: compile every variant (any worker) and run the
                                * static rules on it; nothing is timed or verified, the
                                * result says per variant compiled or why not */
    ag_tune_progress_fn *progress;
    ag_tune_done_fn *done;
    void *ud;
} ag_tune_opts;

ag_tuner *ag_tuner_start(const ag_tune_opts *o, dt_err *e);
/* The parameter points the tuner measures for one candidate of
 * ag_rank_templates (its template's manifest read from the share folder),
 * at most budget, in the order they are measured; why, when not NULL,
 * receives one string per point saying why it was chosen. Caller frees. */
cJSON *ag_tune_variants(const cJSON *candidate, int budget, cJSON *why);
int ag_tuner_done(const ag_tuner *t);
/* Cancels what is running (done is not called after free). */
void ag_tuner_free(ag_tuner *t);

/* Hints for compiler messages (from error-explanation KB entries, and the
 * built-in table when there is no KB). NULL when none applies. */
const char *ag_explain_diagnostic(void *kb, const char *message);

#endif /* DITTO_AGENTS_H */
