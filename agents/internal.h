/* internal.h -- what the orchestrator (orch.c), the agents' backends
 * (expert.c, llmback.c), the tuner (tuner.c) and the librarian share. Not a
 * public header: front ends use agents/agents.h. */
#ifndef DITTO_AGENTS_INTERNAL_H
#define DITTO_AGENTS_INTERNAL_H

#include "agents/agents.h"

struct ag_step {
    int id;
    ag_kind kind;
    int version;
    ag_status status;
    cJSON *inputs;
    cJSON *artifact;    /* JSON artifact; for generate {"source": "...", ...} */
    dt_buf reasoning;
    double t0, t1;
    long tokens_in, tokens_out;
    double cost;
    char *reason;       /* rejection reason, or why it failed */
    int ok;             /* the step's work succeeded (compiled, verified, ...) */
    char *draft;        /* a person's edit that was refused, kept for the next edit */
};

/* Feedback edges, counted against opts.max_edge. */
typedef enum {
    EDGE_CHECK_PLAN,
    EDGE_COMPILE_GENERATE,
    EDGE_VERIFY_GENERATE,
    EDGE_MEASURE_PLAN,
    EDGE_GENERATE_PLAN, /* generate attempts exhausted on a plan: next candidate */
    EDGE_NEDGES
} ag_edge;

typedef struct ag_sink {
    ag_sink_fn *fn;
    void *ud;
} ag_sink;

#define AG_MAX_PENDING 64

struct ag_run {
    dt_loop *loop;
    ag_opts o;
    sp_spec spec; /* copy */
    ag_step **steps;
    int nsteps, capsteps;
    ag_sink sinks[8];
    int nsinks;
    long seq;
    cJSON *outbox;  /* events emitted while others are being delivered */
    int emitting;
    char session[64];

    /* pipeline state, derived from approved artifacts */
    int have_gpu;
    char cc[16];
    char gpu_name[128];
    cJSON *report;       /* PatternReport (profile artifact) */
    cJSON *candidates;   /* ranked templates */
    int cand_index;      /* the candidate the current plan uses */
    cJSON *plan;         /* the approved plan */
    char *source;        /* the approved kernel source */
    int kernel_version;  /* generate version that produced source */
    cJSON *best;         /* best verified & measured {version, source, params, us, speedup, ...} */
    int verified_any;
    dt_buf feedback[AG_NKINDS]; /* what the next attempt of an agent must read */
    int edge_count[EDGE_NEDGES];
    int generate_count;  /* generate attempts overall */
    int plan_generates;  /* generate attempts on the current plan */

    ag_step *cur;        /* the step running or awaiting review */
    int awaiting;
    int approve_rest;
    int stop_requested;
    const char *stop_why;  /* ag_stop_unattended's reason (static or the caller's) */
    int person_stopped;    /* the run ended by a person's decision: not resumable */
    int resume_failed;     /* resuming a run that ended on a failure: re-run its last step */
    int resume_ask;        /* resuming: the id of the step whose review nobody could answer
                              (stopped unattended): it runs again and asks again, 0 none */
    int tune_requested;
    int done;
    int exit_code;
    char finish_reason[512];
    int freeing;

    void *pending[AG_MAX_PENDING]; /* worker requests in flight (call contexts) */
    int npending;
    long llm_request;             /* LLM request in flight, 0 when none */
    void *llm;                    /* llm_client* when backend is llm */
    int llm_fallback;             /* the endpoint failed: expert from now on */
    int llm_format;               /* response_format the endpoint takes: 0 json_schema,
                                   * 1 json_object with a schema, 2 none */

    /* what reviewers said, kept for the session (expert.c: reasons are
     * instructions) */
    cJSON *wishes;                /* [{kind, ..., said}]: constraints the expert honours */
    cJSON *dropped;               /* strategies rejected or exhausted: [name] */
    dt_buf news;                  /* what the next step's reasoning must say first */
    dt_buf reasons;               /* every reviewer reason and edit, verbatim (LLM prompts) */
    int reviews[AG_NKINDS];       /* rejections per step kind (opts.max_reviews) */
    char *review_note;            /* a person's reason for sending a failed step back */
    int running;                  /* inside start_step: a nested start is queued */
    int queued;                   /* kind + 1 of the queued start, 0 when none */
    char *kernel_option;          /* "--maxrregcount=N" after "fewer registers", or NULL */

    ag_tuner *tuner;              /* while tuning */
    char fingerprint[17];         /* of the matrix (profile) */
};

/* ---- orch.c: events, steps, completion -------------------------------- */

void ag_emit(ag_run *r, cJSON *event);            /* takes event, fills seq/t */
void ag_text(ag_run *r, ag_step *s, const char *fmt, ...) DT_PRINTF(3, 4);
void ag_log(ag_run *r, const char *level, const char *fmt, ...) DT_PRINTF(3, 4);
void ag_diagnostic(ag_run *r, ag_step *s, const char *severity, const char *source,
                   const char *id, int line, const char *message, const char *hint);
/* The step's work is done: artifact (taken) and whether it succeeded; the
 * review gate follows. why: a one-line reason when !ok. */
void ag_complete(ag_run *r, ag_step *s, cJSON *artifact, int ok, const char *why);
/* Submit a worker request for the running step; cb gets the reply. */
typedef void ag_reply_fn(ag_run *r, ag_step *s, const cJSON *reply);
void ag_worker_call(ag_run *r, ag_step *s, cJSON *req, double deadline_s, ag_reply_fn *cb);
/* The kernel object for worker requests from a source and the plan. */
cJSON *ag_kernel_obj(ag_run *r, const char *source, const cJSON *params);
/* The target GPU's hardware spec (the spec's gpu, else the worker's device,
 * else an H200); NULL when none loads. Free with hw_spec_free. */
struct hw_spec *ag_run_hw(ag_run *r);
/* Problem fields (op, dtype, n, alpha, beta, epilogue) into a request. */
void ag_problem_into(ag_run *r, cJSON *req);

/* ---- expert.c: the expert backend ------------------------------------- */

/* Read a reviewer's reason (rejecting a step of kind k) for what the expert
 * can act on -- a strategy or template name, a parameter value or range, "no
 * atomics", "no shared memory", "fewer registers", "faster", "simpler" --
 * and keep each as a wish for the rest of the session; r->news says what
 * was understood and what was not. Returns 0 when nothing was understood,
 * 1 when only parameters or registers were asked for (the strategy may
 * stay), 2 when the strategy or its resources were. This function can't
 * fail. */
int ag_wishes_from_reason(ag_run *r, ag_kind k, const char *reason);
/* The wishes in force, one "because you said ..." line each, into the
 * step's reasoning (nothing when there are none). */
void ag_wishes_show(ag_run *r, ag_step *s);
/* Whether a template source breaks a resource wish: the wish's text
 * ("no atomics: the template calls atomicAdd") into why. */
int ag_wishes_refuse(ag_run *r, const char *template_src, char *why, size_t len);
/* A person edited the plan at the review: re-derive it from the edited
 * strategy or template (the template's contract and space, the edited
 * parameters checked against its manifest). Returns the new plan, or NULL
 * with e saying why the edit cannot be used. */
cJSON *ag_plan_rederive(ag_run *r, const cJSON *edited, dt_err *e);
/* What a person's plan edit leaves for the rest of the session: the reason
 * line, and a wish to use the edited plan's strategy when the edit changed
 * the strategy or template. ag_plan_rederive calls it; resume too. */
void ag_wish_from_plan_edit(ag_run *r, const cJSON *plan, int changed);
/* Narrow the candidates' spaces by the hooks' ditto.param_space, saying so
 * in the step's reasoning. */
void ag_narrow_spaces(ag_run *r, ag_step *s);
/* Candidates not dropped yet. */
int ag_candidates_left(const ag_run *r);
/* Drop the current plan's strategy (rejected, exhausted or too slow). */
void ag_drop_strategy(ag_run *r, const char *strategy, const char *why);

void ag_expert_plan(ag_run *r, ag_step *s);
void ag_expert_generate(ag_run *r, ag_step *s);
/* A plan object for candidate c (template, params, space, contract). */
cJSON *ag_plan_from_candidate(ag_run *r, const cJSON *c, dt_err *e);
/* Validate a plan edited by a person or written by an LLM. */
int ag_plan_validate(ag_run *r, const cJSON *plan, dt_buf *problems);
/* Source for a template with params baked in. Caller frees. */
char *ag_instantiate(const char *template_path, const cJSON *params, dt_err *e);

/* ---- llmback.c: the LLM backend (falls back to expert) ----------------- */

void ag_llm_plan(ag_run *r, ag_step *s);
void ag_llm_generate(ag_run *r, ag_step *s);
void ag_llm_free(ag_run *r);

/* ---- tuner.c ------------------------------------------------------------ */

void ag_tune(ag_run *r, ag_step *s);
/* The parameter points the tuner measures for a candidate {params, space},
 * at most budget, in this order: the candidate's params; the values a rule
 * named (a space narrower than the manifest's list), one parameter
 * changed at a time; the space's first legal point (every parameter at
 * the first value of its list) and its middle one, in mixed-radix order;
 * the manifest's defaults; every parameter
 * moved one step along its list from the candidate's value, then two
 * steps, ... (manifest order, down before up); then an even spread over
 * the rest of the space. Points that break m's constraints are left out
 * (m may be NULL), except the first. why, when not NULL, receives one
 * string per point saying which of these chose it. Caller frees. */
struct gpu_manifest;
cJSON *ag_tune_points(const cJSON *cand, const struct gpu_manifest *m, int budget, cJSON *why);
/* Why a verify reply (ok, not passed) failed: "failed the verification
 * battery: NAME: DETAIL" of its first failed check. Caller frees. */
char *ag_battery_failure(const cJSON *reply);
void ag_tune_free(ag_run *r);

/* ---- librarian (learn step, orch.c) ---------------------------------------- */

cJSON *ag_kb_proposal(ag_run *r);

#endif /* DITTO_AGENTS_INTERNAL_H */
