/* orch.c -- the orchestrator: an explicit state machine over pipeline steps
 * with review gates, feedback edges, iteration caps, events, resume, and the
 * agents that need no backend (profiler, constraint checker, verifier,
 * evaluator, librarian).
 * Over 1,000 lines: the state machine's transitions, caps and resume points are
 * one table of cases that reads best in one file (tests/agents/test_orch.c). */
#include "agents/internal.h"
#include "hardware/hardware.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *kind_names[] = {"profile", "plan",    "check", "generate", "compile",
                                   "verify",  "measure", "tune",  "learn"};
static const char *agent_names[] = {"Pattern Profiler", "Kernel Architect", "Constraint Checker",
                                    "Code Generator",   "Verifier (static)", "Verifier (dynamic)",
                                    "Performance Evaluator", "Optimizer", "Librarian"};
static const char *status_names[] = {"running", "awaiting review", "approved", "edited",
                                     "rejected", "failed", "skipped"};
static const char *decision_names[] = {"approve", "edit", "reject", "retry", "stop"};
static const char *edge_names[] = {"check->plan", "compile->generate", "verify->generate",
                                   "measure->plan", "generate->plan"};

const char *ag_kind_name(ag_kind k)
{
    return (unsigned)k < AG_NKINDS ? kind_names[k] : "?";
}

int ag_kind_parse(const char *s, ag_kind *out)
{
    for (int i = 0; i < AG_NKINDS; i++) {
        if (dt_streq(s, kind_names[i])) {
            *out = (ag_kind)i;
            return 0;
        }
    }
    return -1;
}

const char *ag_agent_name(ag_kind k)
{
    return (unsigned)k < AG_NKINDS ? agent_names[k] : "?";
}

const char *ag_status_name(ag_status s)
{
    return (unsigned)s < DT_ARRAY_LEN(status_names) ? status_names[s] : "?";
}

const char *ag_decision_name(ag_decision d)
{
    return (unsigned)d < DT_ARRAY_LEN(decision_names) ? decision_names[d] : "?";
}

/* ---- events ------------------------------------------------------------------- */

void ag_emit(ag_run *r, cJSON *ev)
{
    /* event() put seq and t first, so that they lead each line of the log. */
    dt_json_set_int(ev, "seq", ++r->seq);
    dt_json_set_num(ev, "t", dt_wall_now());
    /* A sink may act on an event (a review answered at once) and so cause
     * more events while this one is still being delivered: queue them, so
     * that every sink sees every event in seq order. */
    if (r->outbox == NULL)
        r->outbox = dt_json_arr();
    cJSON_AddItemToArray(r->outbox, ev);
    if (r->emitting)
        return;
    r->emitting = 1;
    cJSON *next;
    while ((next = cJSON_DetachItemFromArray(r->outbox, 0)) != NULL) {
        for (int i = 0; i < r->nsinks; i++)
            r->sinks[i].fn(r, next, r->sinks[i].ud);
        cJSON_Delete(next);
    }
    r->emitting = 0;
}

static cJSON *event(const char *type, const ag_step *s)
{
    cJSON *e = dt_json_obj();
    dt_json_set_int(e, "seq", 0);
    dt_json_set_num(e, "t", 0);
    dt_json_set_str(e, "type", type);
    if (s)
        dt_json_set_int(e, "step", s->id);
    return e;
}

void ag_text(ag_run *r, ag_step *s, const char *fmt, ...)
{
    dt_buf b = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    dt_buf_puts(&s->reasoning, dt_buf_str(&b));
    cJSON *e = event("text", s);
    dt_json_set_str(e, "text", dt_buf_str(&b));
    dt_buf_free(&b);
    ag_emit(r, e);
}

void ag_log(ag_run *r, const char *level, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cJSON *e = event("log", r->cur);
    dt_json_set_str(e, "level", level);
    dt_json_set_str(e, "message", msg);
    ag_emit(r, e);
}

void ag_diagnostic(ag_run *r, ag_step *s, const char *severity, const char *source,
                   const char *id, int line, const char *message, const char *hint)
{
    cJSON *e = event("diagnostic", s);
    dt_json_set_str(e, "severity", severity);
    dt_json_set_str(e, "source", source);
    dt_json_set_str(e, "id", id && *id ? id : NULL);
    if (line > 0)
        dt_json_set_int(e, "line", line);
    else
        dt_json_set_take(e, "line", cJSON_CreateNull());
    dt_json_set_str(e, "message", message);
    dt_json_set_str(e, "hint", hint);
    ag_emit(r, e);
}

typedef struct call_ctx {
    ag_run *r;
    int step_id;
    ag_reply_fn *cb;
    long id;
} call_ctx;

static void forget_call(ag_run *r, void *c)
{
    for (int i = 0; i < r->npending; i++) {
        if (r->pending[i] == c) {
            r->pending[i] = r->pending[--r->npending];
            return;
        }
    }
}

/* ---- run lifecycle ---------------------------------------------------------------- */

ag_run *ag_run_new(dt_loop *loop, const ag_opts *o, dt_err *e)
{
    if (o->spec == NULL || o->spec->matrix == NULL) {
        dt_err_set(e, "no problem spec (a matrix and an op)");
        return NULL;
    }
    ag_run *r = dt_xcalloc(1, sizeof *r);
    r->loop = loop;
    r->o = *o;
    sp_spec_init(&r->spec);
    cJSON *sj = sp_spec_json(o->spec);
    dt_buf probs = DT_BUF_INIT;
    sp_spec_from_json(&r->spec, sj, NULL, &probs);
    cJSON_Delete(sj);
    dt_buf_free(&probs);
    r->o.spec = &r->spec;
    if (r->o.backend == NULL)
        r->o.backend = r->spec.backend;
    if (r->o.max_iterations <= 0)
        r->o.max_iterations = 8;
    if (r->o.max_edge <= 0)
        r->o.max_edge = 3;
    if (r->o.goal_speedup <= 0)
        r->o.goal_speedup = 1.0;
    if (r->o.tune_budget_variants <= 0)
        r->o.tune_budget_variants = 24;
    if (r->o.tune_budget_s <= 0)
        r->o.tune_budget_s = 120;
    if (r->o.max_reviews <= 0)
        r->o.max_reviews = 10;
    r->wishes = dt_json_arr();
    r->dropped = dt_json_arr();
    r->exit_code = AG_EXIT_ERROR;
    snprintf(r->session, sizeof r->session, "%s",
             o->session_id && *o->session_id ? o->session_id : "unrecorded");
    return r;
}

void ag_add_sink(ag_run *r, ag_sink_fn *fn, void *ud)
{
    if (r->nsinks < (int)DT_ARRAY_LEN(r->sinks)) {
        r->sinks[r->nsinks].fn = fn;
        r->sinks[r->nsinks].ud = ud;
        r->nsinks++;
    }
}

static void step_free(ag_step *s)
{
    cJSON_Delete(s->inputs);
    cJSON_Delete(s->artifact);
    dt_buf_free(&s->reasoning);
    free(s->reason);
    free(s->draft);
    free(s);
}

void ag_run_free(ag_run *r)
{
    if (r == NULL)
        return;
    r->freeing = 1;
    while (r->npending > 0 && r->o.pool) {
        call_ctx *c = r->pending[r->npending - 1];
        long id = c->id;
        gpu_pool_cancel(r->o.pool, id); /* runs on_reply, which forgets c */
        if (r->npending > 0 && r->pending[r->npending - 1] == c)
            forget_call(r, c); /* not found in the pool any more */
    }
    ag_tune_free(r);
    ag_llm_free(r);
    for (int i = 0; i < r->nsteps; i++)
        step_free(r->steps[i]);
    free(r->steps);
    cJSON_Delete(r->report);
    cJSON_Delete(r->candidates);
    cJSON_Delete(r->plan);
    cJSON_Delete(r->best);
    free(r->source);
    for (int i = 0; i < AG_NKINDS; i++)
        dt_buf_free(&r->feedback[i]);
    cJSON_Delete(r->wishes);
    cJSON_Delete(r->dropped);
    dt_buf_free(&r->news);
    dt_buf_free(&r->reasons);
    free(r->review_note);
    free(r->kernel_option);
    sp_spec_clear(&r->spec);
    cJSON_Delete(r->outbox);
    free(r);
}

int ag_run_done(const ag_run *r)
{
    return r->done;
}

int ag_run_exit_code(const ag_run *r)
{
    return r->exit_code;
}

/* ---- worker calls ------------------------------------------------------------------- */



static ag_step *step_by_id(ag_run *r, int id)
{
    for (int i = r->nsteps - 1; i >= 0; i--)
        if (r->steps[i]->id == id)
            return r->steps[i];
    return NULL;
}

static void on_reply(gpu_pool *p, const cJSON *reply, void *ud)
{
    (void)p;
    call_ctx *c = ud;
    ag_run *r = c->r;
    forget_call(r, c);
    ag_step *s = step_by_id(r, c->step_id);
    ag_reply_fn *cb = c->cb;
    free(c);
    if (r->freeing || s == NULL)
        return;
    if (dt_json_bool(reply, "retried", 0)) {
        ag_text(r, s, "The worker died during this step; the step was sent once more to a "
                      "fresh worker (its matrix reloaded first).\n");
        ag_diagnostic(r, s, "warning", "worker", "retried", 0,
                      "the worker died during this step and it was retried once", NULL);
    }
    cb(r, s, reply);
}

void ag_worker_call(ag_run *r, ag_step *s, cJSON *req, double deadline_s, ag_reply_fn *cb)
{
    call_ctx *c = dt_xcalloc(1, sizeof *c);
    c->r = r;
    c->step_id = s->id;
    c->cb = cb;
    /* Registered before submitting: the pool may answer at once (no worker
     * left), and on_reply then forgets and frees it before we return. */
    if (r->npending < AG_MAX_PENDING)
        r->pending[r->npending++] = c;
    long id = gpu_pool_submit(r->o.pool, req, -1, deadline_s, on_reply, c);
    for (int i = 0; i < r->npending; i++)
        if (r->pending[i] == c)
            c->id = id;
}

cJSON *ag_kernel_obj(ag_run *r, const char *source, const cJSON *params)
{
    cJSON *k = dt_json_obj();
    dt_json_set_str(k, "source", source);
    char name[64];
    snprintf(name, sizeof name, "kernel_v%d.cu", r->kernel_version > 0 ? r->kernel_version : 1);
    dt_json_set_str(k, "name", name);
    if (params)
        dt_json_set_take(k, "params", cJSON_Duplicate(params, 1));
    if (r->kernel_option) {
        /* a reviewer asked for fewer registers (ag_wishes_from_reason) */
        cJSON *opts = dt_json_arr();
        cJSON_AddItemToArray(opts, cJSON_CreateString(r->kernel_option));
        dt_json_set_take(k, "options", opts);
    }
    return k;
}

void ag_problem_into(ag_run *r, cJSON *req)
{
    dt_json_set_str(req, "matrix", "m");
    dt_json_set_str(req, "op", sp_op_name(r->spec.op));
    dt_json_set_str(req, "dtype", sp_dtype_name(r->spec.dtype));
    dt_json_set_int(req, "n", r->spec.n);
    dt_json_set_num(req, "alpha", r->spec.alpha);
    dt_json_set_num(req, "beta", r->spec.beta);
    dt_json_set_str(req, "epilogue", sp_epilogue_name(r->spec.epilogue));
}

static const char *reply_error(const cJSON *reply, char *buf, size_t len)
{
    return gpu_reply_error(reply, buf, len);
}

/* ---- steps ---------------------------------------------------------------------------- */

static void start_step(ag_run *r, ag_kind kind);
static void finish(ag_run *r, int code, const char *fmt, ...) DT_PRINTF(3, 4);
static void apply_decision(ag_run *r, ag_decision d, const char *by, const cJSON *artifact,
                           const char *reason);

static ag_step *new_step(ag_run *r, ag_kind kind)
{
    ag_step *s = dt_xcalloc(1, sizeof *s);
    s->id = r->nsteps + 1;
    s->kind = kind;
    int v = 1;
    for (int i = 0; i < r->nsteps; i++)
        v += r->steps[i]->kind == kind;
    s->version = v;
    s->status = AG_RUNNING;
    s->t0 = dt_now();
    if (r->nsteps == r->capsteps) {
        r->capsteps = r->capsteps ? 2 * r->capsteps : 16;
        r->steps = dt_xrealloc(r->steps, (size_t)r->capsteps * sizeof *r->steps);
    }
    r->steps[r->nsteps++] = s;
    return s;
}

static int any_gate_asks(const ag_run *r, ag_kind k)
{
    return r->o.policy[k] == AG_POLICY_ASK && !r->approve_rest;
}

static void emit_artifact(ag_run *r, ag_step *s)
{
    cJSON *e = event("artifact", s);
    static const char *names[] = {"report", "plan", "constraints", "kernel", "compile",
                                  "verify", "measure", "tune", "kb_entry"};
    dt_json_set_str(e, "name", names[s->kind]);
    /* compile, verify and measure artifacts are versioned by the kernel
     * they concern (compile_v3 is kernel_v3's); the others by their step. */
    int kernel_scoped = s->kind == AG_COMPILE || s->kind == AG_VERIFY || s->kind == AG_MEASURE;
    dt_json_set_int(e, "version", kernel_scoped ? r->kernel_version : s->version);
    if (s->kind == AG_GENERATE)
        dt_json_set_str(e, "content", dt_json_str(s->artifact, "source", ""));
    dt_json_set_take(e, "json", cJSON_Duplicate(s->artifact, 1));
    ag_emit(r, e);
}

/* Line n (1-based) of text, without its newline, into out. */
static void source_line(const char *text, int n, char *out, size_t len)
{
    out[0] = '\0';
    for (int i = 1; text && i < n; i++) {
        text = strchr(text, '\n');
        if (text)
            text++;
    }
    if (text == NULL || n < 1)
        return;
    size_t l = strcspn(text, "\n");
    snprintf(out, len, "%.*s", (int)(l < len - 1 ? l : len - 1), text);
}

/* A failed step says so at its gate: the error, and for a kernel the
 * source line it names, then what can be done. */
static void show_failure(ag_run *r, ag_step *s)
{
    ag_text(r, s, "\nThis step FAILED: %s.\n", s->reason ? s->reason : "no reason given");
    const char *src = r->source;
    if (s->kind == AG_GENERATE)
        src = dt_json_str(s->artifact, "source", NULL);
    int shown = 0;
    const cJSON *d;
    const cJSON *lists[2] = {cJSON_GetObjectItem(cJSON_GetObjectItem(s->artifact, "nvrtc"),
                                                 "diagnostics"),
                             cJSON_GetObjectItem(s->artifact, "rules")};
    for (int l = 0; l < 2; l++) {
        cJSON_ArrayForEach(d, lists[l])
        {
            if (!dt_streq(dt_json_str(d, "severity", "error"), "error") || shown >= 5)
                continue;
            int line = (int)dt_json_num(d, "line", 0);
            char text[240];
            source_line(src, line, text, sizeof text);
            ag_text(r, s, "  line %d: %s\n", line, dt_json_str(d, "message", ""));
            if (text[0])
                ag_text(r, s, "  %5d | %s\n", line, text);
            shown++;
        }
    }
    if (any_gate_asks(r, s->kind))
        ag_text(r, s, "A failed step cannot be approved: send it back with feedback (r REASON), "
                      "%sor stop (s).\n",
                s->kind == AG_PLAN || s->kind == AG_GENERATE || s->kind == AG_COMPILE ||
                        s->kind == AG_VERIFY
                    ? "edit it (e), "
                    : "");
}

void ag_complete(ag_run *r, ag_step *s, cJSON *artifact, int ok, const char *why)
{
    if (r->done || s != r->cur)
        return;
    cJSON_Delete(s->artifact);
    s->artifact = artifact ? artifact : dt_json_obj();
    s->ok = ok;
    dt_json_set_bool(s->artifact, "ok", ok);
    if (!ok && why) {
        free(s->reason);
        s->reason = dt_xstrdup(why);
        dt_json_set_str(s->artifact, "why", why);
    }
    if (r->o.hook) {
        cJSON *copy = cJSON_Duplicate(s->artifact, 1);
        dt_buf log = DT_BUF_INIT, errs = DT_BUF_INIT;
        r->o.hook(r, s->kind, "after", &copy, &log, &errs, r->o.hook_ud);
        if (log.len)
            ag_text(r, s, "%s", log.data);
        if (errs.len)
            ag_diagnostic(r, s, "warning", "lua", "hook", 0, errs.data, NULL);
        cJSON_Delete(copy);
        dt_buf_free(&log);
        dt_buf_free(&errs);
    }
    s->t1 = dt_now();
    emit_artifact(r, s);
    if (r->stop_requested) {
        apply_decision(r, AG_STOP, "person", NULL, NULL);
        return;
    }
    /* The gate: the review functions (Lua) always run -- "auto" means no
     * person, never no hooks -- then the person, else auto. */
    if (r->o.reviewer) {
        dt_buf reason = DT_BUF_INIT;
        int d = r->o.reviewer(r, s, &reason, r->o.reviewer_ud);
        if (d == AG_REJECT || (d == AG_APPROVE && s->ok)) {
            apply_decision(r, (ag_decision)d, "lua", NULL,
                           reason.len ? reason.data : "rejected by a review hook");
            dt_buf_free(&reason);
            return;
        }
        if (d == AG_APPROVE)
            ag_text(r, s, "A review hook approved this step, but it failed: a failed step is "
                          "never approved.\n");
        dt_buf_free(&reason);
    }
    if (!s->ok)
        show_failure(r, s);
    if (any_gate_asks(r, s->kind)) {
        s->status = AG_AWAITING;
        r->awaiting = 1;
        cJSON *e = event("awaiting_review", s);
        dt_json_set_str(e, "policy", "ask");
        if (!s->ok) {
            dt_json_set_bool(e, "failed", 1);
            dt_json_set_str(e, "why", s->reason);
            cJSON *opts = dt_json_arr();
            cJSON_AddItemToArray(opts, cJSON_CreateString("reject"));
            if (s->kind == AG_PLAN || s->kind == AG_GENERATE || s->kind == AG_COMPILE ||
                s->kind == AG_VERIFY)
                cJSON_AddItemToArray(opts, cJSON_CreateString("edit"));
            cJSON_AddItemToArray(opts, cJSON_CreateString("stop"));
            dt_json_set_take(e, "options", opts);
        }
        ag_emit(r, e);
        return;
    }
    if (!s->ok) {
        apply_decision(r, AG_REJECT, "auto", NULL, s->reason ? s->reason : "failed");
        return;
    }
    apply_decision(r, AG_APPROVE, "auto", NULL, NULL);
}

/* ---- the profiler ------------------------------------------------------------------------ */

static void profile_done(ag_run *r, ag_step *s, const cJSON *reply)
{
    char buf[1200];
    if (!dt_json_bool(reply, "ok", 0)) {
        ag_complete(r, s, NULL, 0, reply_error(reply, buf, sizeof buf));
        return;
    }
    const cJSON *rep = cJSON_GetObjectItem(reply, "report");
    cJSON *art = dt_json_obj();
    dt_json_set_take(art, "report", cJSON_Duplicate(rep, 1));
    dt_json_set_str(art, "fingerprint", dt_json_str(reply, "fingerprint", ""));
    dt_json_set_num(art, "load_seconds", dt_json_num(reply, "load_seconds", 0));
    ag_text(r, s, "%s: %.0f x %.0f, %.0f nonzeros (%.2f per row, cv %.2f, max %.0f).\n",
            r->spec.matrix, dt_json_num(rep, "rows", 0), dt_json_num(rep, "cols", 0),
            dt_json_num(rep, "nnz", 0),
            dt_json_num(cJSON_GetObjectItem(rep, "row_length"), "mean", 0),
            dt_json_num(cJSON_GetObjectItem(rep, "row_length"), "cv", 0),
            dt_json_num(cJSON_GetObjectItem(rep, "row_length"), "max", 0));
    ag_text(r, s, "Class %s: %s.\n", dt_json_str(rep, "class", "?"),
            dt_json_str(rep, "class_reason", ""));
    ag_complete(r, s, art, 1, NULL);
}

static void run_profile(ag_run *r, ag_step *s)
{
    cJSON *req = dt_json_obj();
    dt_json_set_str(req, "req", "load_matrix");
    dt_json_set_str(req, "matrix", r->spec.matrix);
    dt_json_set_int(req, "n", r->spec.n);
    dt_json_set_int(req, "k", r->spec.n);
    /* The pool remembers a load_matrix that succeeded and replays it on a
     * restarted worker before the next request. */
    dt_json_set_str(req, "handle", "m");
    ag_text(r, s, "Loading %s in the worker and computing its PatternReport.\n", r->spec.matrix);
    ag_worker_call(r, s, req, 900, profile_done);
}

/* ---- the constraint checker ------------------------------------------------------------- */

/* Run the hooks' custom rules on source, each finding a diagnostic (source
 * "lua") and a line of the step's reasoning. Returns the findings (caller
 * frees), an empty array when there are no rules. */
static cJSON *custom_rules(ag_run *r, ag_step *s, const char *source, const char *what)
{
    if (r->o.rules == NULL)
        return dt_json_arr();
    dt_buf errs = DT_BUF_INIT;
    cJSON *found = r->o.rules(r, source, &errs, r->o.hook_ud);
    if (found == NULL)
        found = dt_json_arr();
    if (errs.len)
        ag_diagnostic(r, s, "warning", "lua", "rule", 0, errs.data, NULL);
    dt_buf_free(&errs);
    ag_text(r, s, "Custom rules (ditto.rule) on %s: %d finding(s).\n", what,
            cJSON_GetArraySize(found));
    const cJSON *f;
    cJSON_ArrayForEach(f, found)
    {
        int line = (int)dt_json_num(f, "line", 0);
        ag_text(r, s, "  [%s] %s line %d: %s\n", dt_json_str(f, "id", ""),
                dt_json_str(f, "severity", "warning"), line, dt_json_str(f, "message", ""));
        ag_diagnostic(r, s, dt_json_str(f, "severity", "warning"), "lua", dt_json_str(f, "id", ""),
                      line, dt_json_str(f, "message", ""), NULL);
    }
    return found;
}

/* The spec of the run's GPU. With say, a "gpu": "auto" that had to take
 * another part's limits (no file for the device) says so in the log. */
static hw_spec *run_hw(ag_run *r, int say)
{
    dt_err e = {0};
    if (r->spec.gpu && strcmp(r->spec.gpu, "auto") != 0)
        return hw_load(r->spec.gpu, &e);
    int maj = 9, min = 0;
    if (r->cc[0])
        sscanf(r->cc, "%d.%d", &maj, &min);
    char warn[512] = "";
    hw_spec *g = hw_match(r->gpu_name[0] ? r->gpu_name : "NVIDIA H200", maj, min, 0, NULL, warn,
                          sizeof warn, &e);
    if (say && warn[0] && r->gpu_name[0])
        ag_log(r, "warning", "gpu auto: %s", warn);
    return g;
}

hw_spec *ag_run_hw(ag_run *r)
{
    return run_hw(r, 0);
}

static void report_vars(ag_run *r, gpu_vars *v)
{
    v->n = 0;
    gpu_vars_set(v, "rows", dt_json_i64(r->report, "rows", 0));
    gpu_vars_set(v, "cols", dt_json_i64(r->report, "cols", 0));
    gpu_vars_set(v, "nnz", dt_json_i64(r->report, "nnz", 0));
    gpu_vars_set(v, "max_row",
                 dt_json_i64(cJSON_GetObjectItem(r->report, "row_length"), "max", 0));
    gpu_vars_set(v, "n", r->spec.op == SP_SPMM ? r->spec.n : 0);
    gpu_vars_set(v, "k", r->spec.op == SP_SDDMM ? r->spec.n : 0);
    gpu_vars_set(v, "sms", 132);
}

static void run_check(ag_run *r, ag_step *s)
{
    cJSON *art = dt_json_obj();
    cJSON *viol = dt_json_arr();
    const cJSON *plan = r->plan;
    gpu_contract c;
    dt_err e = {0};
    int have_c = gpu_contract_parse(cJSON_GetObjectItem(plan, "contract"), &c, &e) == 0;
    if (!have_c) {
        cJSON_AddItemToArray(viol, cJSON_CreateString(e.msg));
    }
    gpu_vars v;
    report_vars(r, &v);
    const cJSON *params = cJSON_GetObjectItem(plan, "params");
    const cJSON *p;
    cJSON_ArrayForEach(p, params)
        gpu_vars_set(&v, p->string, dt_json_as_i64(p, 0));
    /* The manifest: legal values and constraints. */
    const char *tpl = dt_json_str(plan, "template", NULL);
    char *path = tpl ? dt_share_path(tpl) : NULL;
    char *src = path ? dt_read_file(path, NULL, NULL) : NULL;
    gpu_manifest m;
    if (src && gpu_manifest_from_source(src, &m, &e) == 0) {
        dt_err me = {0};
        if (gpu_manifest_check(&m, params, &v, &me) != 0)
            cJSON_AddItemToArray(viol, cJSON_CreateString(me.msg));
        if (!(m.dtypes & (1u << r->spec.dtype))) {
            char msg[160];
            snprintf(msg, sizeof msg, "template %s has no %s variant", m.strategy,
                     sp_dtype_name(r->spec.dtype));
            cJSON_AddItemToArray(viol, cJSON_CreateString(msg));
        }
        gpu_manifest_clear(&m);
    } else if (tpl) {
        char msg[300];
        snprintf(msg, sizeof msg, "template %s cannot be read", tpl);
        cJSON_AddItemToArray(viol, cJSON_CreateString(msg));
    }
    free(src);
    free(path);
    hw_spec *g = run_hw(r, 1);
    if (have_c && g) {
        int64_t bx = 1, by = 1, bz = 1, smem = 0;
        dt_err ee = {0};
        int ok = gpu_eval(c.block[0], &v, &bx, &ee) == 0 && gpu_eval(c.block[1], &v, &by, &ee) == 0 &&
                 gpu_eval(c.block[2], &v, &bz, &ee) == 0 && gpu_eval(c.smem, &v, &smem, &ee) == 0;
        if (!ok) {
            cJSON_AddItemToArray(viol, cJSON_CreateString(ee.msg));
        } else {
            int64_t threads = bx * by * bz;
            if (threads > g->max_threads_per_block) {
                char msg[160];
                snprintf(msg, sizeof msg, "block of %lld threads exceeds the %d per block of %s",
                         (long long)threads, g->max_threads_per_block, g->name);
                cJSON_AddItemToArray(viol, cJSON_CreateString(msg));
            }
            if (smem > g->smem_per_block_optin) {
                char msg[160];
                snprintf(msg, sizeof msg, "%lld bytes of dynamic shared memory exceed %d per block",
                         (long long)smem, g->smem_per_block_optin);
                cJSON_AddItemToArray(viol, cJSON_CreateString(msg));
            }
            /* Registers are unknown before compiling: predict with 32 (the
             * templates' usual count) and say so; the compile step reports
             * the real occupancy. */
            hw_occ occ;
            if (threads <= g->max_threads_per_block &&
                hw_occupancy(g, (int)threads, 32, 0, (size_t)smem, HW_CARVEOUT_DEFAULT, 1, &occ,
                             &ee) == 0) {
                cJSON *oj = hw_occ_json(g, &occ);
                dt_json_set_str(oj, "assumption", "32 registers per thread (not compiled yet)");
                dt_json_set_take(art, "occupancy", oj);
                ag_text(r, s,
                        "Predicted occupancy at %lld threads per block, 32 registers: %d blocks, "
                        "%.0f%% (limiter: %s).\n",
                        (long long)threads, occ.blocks, occ.pct, hw_limiter_name(occ.limiter));
            }
        }
    }
    if (g)
        dt_json_set_str(art, "gpu", g->name);
    hw_spec_free(g);
    if (have_c)
        gpu_contract_clear(&c);
    /* The hooks' custom rules (ditto.rule) on the kernel this plan will
     * instantiate. An error is a violation when the expert writes the code
     * (it cannot change a template); an LLM coder writes its own, and the
     * compile step checks that. */
    if (r->o.rules && tpl) {
        dt_err ie = {0};
        char *inst = ag_instantiate(tpl, params, &ie);
        if (inst) {
            int expert = !dt_streq(r->o.backend, "llm") || r->llm_fallback;
            cJSON *found = custom_rules(r, s, inst, "the planned kernel (the template as it is)");
            const cJSON *f;
            cJSON_ArrayForEach(f, found)
            {
                int err = dt_streq(dt_json_str(f, "severity", ""), "error");
                if (err && !expert)
                    ag_text(r, s, "  the code generator must not copy line %d as it is: the "
                                  "compile step checks [%s] on its kernel.\n",
                            (int)dt_json_num(f, "line", 0), dt_json_str(f, "id", ""));
                if (err && expert) {
                    char msg[400];
                    snprintf(msg, sizeof msg, "custom rule %s: line %d: %s",
                             dt_json_str(f, "id", ""), (int)dt_json_num(f, "line", 0),
                             dt_json_str(f, "message", ""));
                    cJSON_AddItemToArray(viol, cJSON_CreateString(msg));
                }
            }
            dt_json_set_take(art, "custom_rules", found);
            free(inst);
        }
    }
    int nv = cJSON_GetArraySize(viol);
    dt_json_set_take(art, "violations", viol);
    if (nv == 0)
        ag_text(r, s, "No hard limit is violated.\n");
    const cJSON *x;
    cJSON_ArrayForEach(x, cJSON_GetObjectItem(art, "violations"))
    {
        ag_text(r, s, "Violation: %s\n", x->valuestring);
        ag_diagnostic(r, s, "error", "check", "constraint", 0, x->valuestring, NULL);
    }
    ag_complete(r, s, art, nv == 0, nv ? "the plan violates a hard limit" : NULL);
}

/* ---- compile: static rules + NVRTC --------------------------------------------------------- */

static void compile_done(ag_run *r, ag_step *s, const cJSON *reply)
{
    char buf[1200];
    if (!dt_json_bool(reply, "ok", 0)) {
        ag_complete(r, s, NULL, 0, reply_error(reply, buf, sizeof buf));
        return;
    }
    cJSON *art = s->artifact ? s->artifact : dt_json_obj();
    s->artifact = NULL;
    int errors = dt_json_int(art, "rule_errors", 0);
    dt_json_set_take(art, "nvrtc", cJSON_Duplicate(reply, 1));
    const cJSON *d;
    cJSON_ArrayForEach(d, cJSON_GetObjectItem(reply, "diagnostics"))
    {
        const char *msg = dt_json_str(d, "message", "");
        ag_diagnostic(r, s, dt_json_str(d, "severity", "error"), "nvrtc", dt_json_str(d, "code", ""),
                      dt_json_int(d, "line", 0), msg, ag_explain_diagnostic(r->o.kb, msg));
    }
    int compiled = dt_json_bool(reply, "compiled", 0);
    const cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItem(reply, "kernels"), 0);
    if (compiled && k) {
        ag_text(r, s, "NVRTC %s for %s: %.0f registers, %.0f B shared, %.0f B stack, spills "
                      "%.0f/%.0f B.\n",
                dt_json_str(reply, "nvrtc_version", "?"), dt_json_str(reply, "arch", "?"),
                dt_json_num(k, "registers", 0), dt_json_num(k, "smem", 0), dt_json_num(k, "stack", 0),
                dt_json_num(k, "spill_stores", 0), dt_json_num(k, "spill_loads", 0));
        /* The real occupancy now that registers are known. */
        hw_spec *g = run_hw(r, 0);
        gpu_contract c;
        dt_err e = {0};
        if (g && gpu_contract_parse(cJSON_GetObjectItem(r->plan, "contract"), &c, &e) == 0) {
            gpu_vars v;
            report_vars(r, &v);
            const cJSON *p;
            cJSON_ArrayForEach(p, cJSON_GetObjectItem(r->plan, "params"))
                gpu_vars_set(&v, p->string, dt_json_as_i64(p, 0));
            int64_t bx = 1, by = 1, bz = 1, smem = 0;
            if (gpu_eval(c.block[0], &v, &bx, &e) == 0 && gpu_eval(c.block[1], &v, &by, &e) == 0 &&
                gpu_eval(c.block[2], &v, &bz, &e) == 0 && gpu_eval(c.smem, &v, &smem, &e) == 0) {
                hw_occ occ;
                if (hw_occupancy(g, (int)(bx * by * bz), dt_json_int(k, "registers", 32),
                                 dt_json_size(k, "smem", 0), (size_t)smem,
                                 HW_CARVEOUT_DEFAULT, 1, &occ, &e) == 0) {
                    dt_json_set_take(art, "occupancy", hw_occ_json(g, &occ));
                    ag_text(r, s, "Theoretical occupancy: %d blocks per SM, %.0f%% (limiter: %s).\n",
                            occ.blocks, occ.pct, hw_limiter_name(occ.limiter));
                }
            }
            gpu_contract_clear(&c);
        }
        hw_spec_free(g);
    }
    if (r->kernel_option)
        ag_text(r, s, "Compiled with %s: a reviewer asked for fewer registers.\n",
                r->kernel_option);
    int ok = compiled && errors == 0;
    if (!compiled) {
        const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(reply, "diagnostics"), 0);
        snprintf(buf, sizeof buf, "does not compile: line %d: %s",
                 dt_json_int(first, "line", 0), dt_json_str(first, "message", "?"));
    } else if (errors) {
        snprintf(buf, sizeof buf, "%d static rule error(s)", errors);
    }
    ag_complete(r, s, art, ok, ok ? NULL : buf);
}

static void run_compile(ag_run *r, ag_step *s)
{
    cJSON *art = dt_json_obj();
    cJSON *rules = ag_static_rules(r->source, cJSON_GetObjectItem(r->plan, "contract"));
    int errors = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, rules)
    {
        int is_err = dt_streq(dt_json_str(f, "severity", ""), "error");
        errors += is_err;
        ag_diagnostic(r, s, dt_json_str(f, "severity", "warning"), "rule", dt_json_str(f, "id", ""),
                      dt_json_int(f, "line", 0), dt_json_str(f, "message", ""),
                      dt_json_str(f, "explanation", NULL));
    }
    ag_text(r, s, "Static rules: %d finding(s), %d error(s).\n", cJSON_GetArraySize(rules), errors);
    cJSON *found = custom_rules(r, s, r->source, "the kernel");
    cJSON *f2;
    while ((f2 = cJSON_DetachItemFromArray(found, 0)) != NULL) {
        errors += dt_streq(dt_json_str(f2, "severity", ""), "error");
        cJSON_AddItemToArray(rules, f2);
    }
    cJSON_Delete(found);
    dt_json_set_take(art, "rules", rules);
    dt_json_set_int(art, "rule_errors", errors);
    s->artifact = art; /* completed in compile_done */
    cJSON *req = dt_json_obj();
    dt_json_set_str(req, "req", "compile");
    ag_problem_into(r, req);
    dt_json_set_take(req, "kernel", ag_kernel_obj(r, r->source, cJSON_GetObjectItem(r->plan, "params")));
    ag_worker_call(r, s, req, 300, compile_done);
}

/* ---- verify ---------------------------------------------------------------------------------- */

static void verify_done(ag_run *r, ag_step *s, const cJSON *reply)
{
    char buf[1200];
    if (!dt_json_bool(reply, "ok", 0)) {
        const char *err = reply_error(reply, buf, sizeof buf);
        const char *code = dt_json_str(reply, "error", "");
        if (dt_streq(code, "no_device")) {
            ag_complete(r, s, NULL, 0, err);
            return;
        }
        /* A fault, a hang or a refused launch is the kernel's failure. */
        ag_diagnostic(r, s, "error", "verify", code, 0, err, NULL);
        cJSON *art = dt_json_obj();
        dt_json_set_bool(art, "passed", 0);
        dt_json_set_str(art, "error", err);
        ag_complete(r, s, art, 0, err);
        return;
    }
    cJSON *art = cJSON_Duplicate(reply, 1);
    int passed = dt_json_bool(reply, "passed", 0);
    int failed = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(reply, "checks"))
    {
        if (dt_json_bool(c, "passed", 0))
            continue;
        failed++;
        char msg[600];
        snprintf(msg, sizeof msg, "%s: %s", dt_json_str(c, "name", ""),
                 dt_json_str(c, "detail", "failed"));
        const cJSON *fb = cJSON_GetObjectItem(c, "first_bad");
        if (fb) {
            size_t n = strlen(msg);
            snprintf(msg + n, sizeof msg - n, " (first bad: row %.0f, expected %.9g, got %s)",
                     dt_json_num(fb, "row", 0), dt_json_num(fb, "expected", 0),
                     cJSON_IsString(cJSON_GetObjectItem(fb, "got"))
                         ? dt_json_str(fb, "got", "")
                         : "a different value");
        }
        ag_diagnostic(r, s, "error", "verify", dt_json_str(c, "name", ""), 0, msg, NULL);
    }
    ag_text(r, s, "Verification battery: %.0f checks, %d failed: %s.\n",
            dt_json_num(reply, "checks_run", 0), failed, passed ? "PASSED" : "FAILED");
    snprintf(buf, sizeof buf, "%d verification check(s) failed", failed);
    ag_complete(r, s, art, passed, passed ? NULL : buf);
}

static void run_verify(ag_run *r, ag_step *s)
{
    if (!r->have_gpu) {
        ag_text(r, s, "No GPU: the worker compiled the kernel but cannot run it.\n");
        ag_complete(r, s, NULL, 0, "no GPU: verification and measurement need one");
        return;
    }
    cJSON *req = dt_json_obj();
    dt_json_set_str(req, "req", "verify");
    ag_problem_into(r, req);
    dt_json_set_take(req, "kernel", ag_kernel_obj(r, r->source, cJSON_GetObjectItem(r->plan, "params")));
    ag_text(r, s, "Running the battery: fresh random inputs, NaN-poisoned outputs, fp64 reference "
                  "and cuSPARSE, unchanged inputs, no cached answers, determinism, edge "
                  "matrices.\n");
    ag_worker_call(r, s, req, 600, verify_done);
}

/* ---- measure ------------------------------------------------------------------------------------ */

/* A bottleneck diagnosis in words from the measurement (and CUPTI metrics
 * when they came back). */
static void diagnose(ag_run *r, ag_step *s, cJSON *art)
{
    double gbps = dt_json_num(art, "gbps", 0), copy = dt_json_num(art, "copy_gbps", 0);
    double us = dt_json_num(art, "us", 0), floor_us = dt_json_num(art, "floor_us", 0);
    double speedup = dt_json_num(art, "speedup", 0);
    dt_buf d = DT_BUF_INIT;
    if (copy > 0)
        dt_buf_printf(&d,
                      "achieved %.0f%% of copy bandwidth (%.0f of %.0f GB/s over the minimum "
                      "bytes%s)",
                      100.0 * gbps / copy, gbps, copy,
                      dt_json_bool(art, "copy_measured", 1)
                          ? ""
                          : "; that is the datasheet's peak: `ditto calibrate` measures it");
    const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(art, "metrics"), "metrics");
    if (m) {
        double rd = dt_json_num(m, "dram__bytes_read.sum", 0);
        double wr = dt_json_num(m, "dram__bytes_write.sum", 0);
        double minb = dt_json_num(art, "min_bytes", 0);
        double occ = dt_json_num(m, "sm__warps_active.avg.pct_of_peak_sustained_active", -1);
        double hit = dt_json_num(m, "lts__t_sector_hit_rate.pct", -1);
        if (minb > 0 && rd + wr > 0)
            dt_buf_printf(&d, "; DRAM traffic %.2fx the minimum%s", (rd + wr) / minb,
                          (rd + wr) / minb > 1.3 ? " -> extra traffic: uncoalesced gathers of x/B or re-reads" : "");
        if (occ >= 0)
            dt_buf_printf(&d, "; achieved occupancy %.0f%%", occ);
        if (hit >= 0)
            dt_buf_printf(&d, "; L2 hit rate %.0f%%", hit);
    }
    if (floor_us > 0)
        dt_buf_printf(&d, "; %.2f us against a floor of %.2f us", us, floor_us);
    if (speedup > 0)
        dt_buf_printf(&d, "; %.2fx the best cuSPARSE algorithm", speedup);
    dt_json_set_str(art, "diagnosis", dt_buf_str(&d));
    ag_text(r, s, "Diagnosis: %s.\n", dt_buf_str(&d));
    dt_buf_free(&d);
}

static void place_roofline(ag_run *r, cJSON *art)
{
    hw_spec *g = run_hw(r, 0);
    if (g == NULL)
        return;
    hw_roofline rl;
    dt_err e = {0};
    hw_dtype hd = r->spec.dtype == SP_FP64 ? HW_FP64 : HW_FP32;
    if (hw_roofline_init(&rl, g, hd, 0, 1, &e) == 0) {
        hw_rl_point pt = {.flops = dt_json_num(art, "flops", 0),
                          .min_bytes = dt_json_num(art, "min_bytes", 0),
                          .seconds = dt_json_num(art, "us", 0) * 1e-6};
        snprintf(pt.label, sizeof pt.label, "v%d", r->kernel_version);
        const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(art, "metrics"), "metrics");
        if (m)
            pt.dram_bytes = dt_json_num(m, "dram__bytes_read.sum", 0) +
                            dt_json_num(m, "dram__bytes_write.sum", 0);
        hw_rl_place pl;
        if (hw_roofline_place(&rl, &pt, &pl, &e) == 0) {
            cJSON *o = dt_json_obj();
            dt_json_set_num(o, "ai", pl.ai);
            dt_json_set_num(o, "ai_alg", pl.ai_alg);
            dt_json_set_num(o, "flops_s", pl.flops_s);
            dt_json_set_num(o, "roof", pl.roof);
            dt_json_set_num(o, "pct_roof", pl.pct_roof);
            dt_json_set_num(o, "pct_bw", pl.pct_bw);
            dt_json_set_bool(o, "memory_bound", pl.memory_bound);
            dt_json_set_str(o, "gpu", g->name);
            dt_json_set_take(art, "roofline", o);
        }
    }
    hw_spec_free(g);
}

static void metrics_done(ag_run *r, ag_step *s, const cJSON *reply)
{
    cJSON *art = s->artifact;
    s->artifact = NULL;
    if (dt_json_bool(reply, "ok", 0))
        dt_json_set_take(art, "metrics", cJSON_Duplicate(reply, 1));
    if (dt_json_bool(reply, "ok", 0) && !dt_json_bool(reply, "available", 0))
        ag_text(r, s, "CUPTI metrics unavailable: %s.\n", dt_json_str(reply, "reason", ""));
    place_roofline(r, art);
    diagnose(r, s, art);
    cJSON *ev = event("measurement", s);
    dt_json_set_take(ev, "json", cJSON_Duplicate(art, 1));
    ag_emit(r, ev);
    /* The best verified version so far. */
    double us = dt_json_num(art, "us", 0);
    if (us > 0 && (r->best == NULL || us < dt_json_num(r->best, "us", 1e300))) {
        cJSON_Delete(r->best);
        r->best = dt_json_obj();
        dt_json_set_int(r->best, "version", r->kernel_version);
        dt_json_set_str(r->best, "source", r->source);
        dt_json_set_take(r->best, "params", cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "params"), 1));
        dt_json_set_str(r->best, "strategy", dt_json_str(r->plan, "strategy", ""));
        dt_json_set_num(r->best, "us", us);
        dt_json_set_num(r->best, "speedup", dt_json_num(art, "speedup", 0));
        dt_json_set_num(r->best, "gbps", dt_json_num(art, "gbps", 0));
        dt_json_set_str(r->best, "method", dt_json_str(art, "method", ""));
        dt_json_set_str(r->best, "baseline", dt_json_str(cJSON_GetObjectItem(art, "baseline"), "best", ""));
    }
    ag_complete(r, s, art, 1, NULL);
}

static void measure_done(ag_run *r, ag_step *s, const cJSON *reply)
{
    char buf[1200];
    if (!dt_json_bool(reply, "ok", 0)) {
        const char *err = reply_error(reply, buf, sizeof buf);
        ag_diagnostic(r, s, "error", "measure", dt_json_str(reply, "error", ""), 0, err, NULL);
        cJSON *art = cJSON_Duplicate(reply, 1);
        ag_complete(r, s, art, 0, err);
        return;
    }
    cJSON *art = cJSON_Duplicate(reply, 1);
    ag_text(r, s, "%s timing: %.2f us, %.0f GB/s, %.1f GFLOP/s; best cuSPARSE (%s) %.2f us: "
                  "speedup %.2fx.\n",
            dt_json_str(reply, "method", ""), dt_json_num(reply, "us", 0),
            dt_json_num(reply, "gbps", 0), dt_json_num(reply, "gflops", 0),
            dt_json_str(cJSON_GetObjectItem(reply, "baseline"), "best", "?"),
            dt_json_num(cJSON_GetObjectItem(reply, "baseline"), "us", 0),
            dt_json_num(reply, "speedup", 0));
    double sp = dt_json_num(reply, "speedup", 0);
    dt_json_set_bool(art, "cusparse_faster", sp > 0 && sp < 1.0);
    if (sp > 0 && sp < 1.0)
        ag_text(r, s, "This kernel does not beat cuSPARSE: %s is faster (%.2fx); unless tuning "
                      "finds one that does, call cuSPARSE %s.\n",
                dt_json_str(cJSON_GetObjectItem(reply, "baseline"), "best", "?"), sp,
                dt_json_str(cJSON_GetObjectItem(reply, "baseline"), "best", "?"));
    s->artifact = art;
    cJSON *req = dt_json_obj();
    dt_json_set_str(req, "req", "metrics");
    ag_problem_into(r, req);
    dt_json_set_take(req, "kernel", ag_kernel_obj(r, r->source, cJSON_GetObjectItem(r->plan, "params")));
    ag_worker_call(r, s, req, 300, metrics_done);
}

static void run_measure(ag_run *r, ag_step *s)
{
    cJSON *req = dt_json_obj();
    dt_json_set_str(req, "req", "measure");
    ag_problem_into(r, req);
    dt_json_set_take(req, "kernel", ag_kernel_obj(r, r->source, cJSON_GetObjectItem(r->plan, "params")));
    dt_json_set_bool(req, "baseline", 1);
    ag_text(r, s, "Timing with CUDA events around the launch only, warm-up first, median of at "
                  "least 20 runs, L2 flushed (or CUDA-graph replay when L2-resident), the same "
                  "method for every cuSPARSE algorithm.\n");
    ag_worker_call(r, s, req, 600, measure_done);
}

/* ---- learn ---------------------------------------------------------------------------------------- */

static void run_learn(ag_run *r, ag_step *s)
{
    if (r->best == NULL) {
        ag_text(r, s, "Nothing measured: no knowledge to propose.\n");
        ag_complete(r, s, dt_json_obj(), 1, NULL);
        return;
    }
    cJSON *entry = ag_kb_proposal(r);
    ag_text(r, s, "Proposing %s for review: %s.\n", dt_json_str(entry, "id", ""),
            dt_json_str(entry, "title", ""));
    cJSON *art = dt_json_obj();
    dt_json_set_take(art, "entry", entry);
    ag_complete(r, s, art, 1, NULL);
}

/* ---- the state machine ------------------------------------------------------------------------------- */

static void run_step(ag_run *r, ag_step *s)
{
    int llm = dt_streq(r->o.backend, "llm") && !r->llm_fallback;
    switch (s->kind) {
    case AG_PROFILE:
        run_profile(r, s);
        break;
    case AG_PLAN:
        if (llm)
            ag_llm_plan(r, s);
        else
            ag_expert_plan(r, s);
        break;
    case AG_CHECK:
        run_check(r, s);
        break;
    case AG_GENERATE:
        if (llm)
            ag_llm_generate(r, s);
        else
            ag_expert_generate(r, s);
        break;
    case AG_COMPILE:
        run_compile(r, s);
        break;
    case AG_VERIFY:
        run_verify(r, s);
        break;
    case AG_MEASURE:
        run_measure(r, s);
        break;
    case AG_TUNE:
        ag_tune(r, s);
        break;
    case AG_LEARN:
        run_learn(r, s);
        break;
    default:
        break;
    }
}

static void start_one(ag_run *r, ag_kind kind)
{
    ag_step *s = new_step(r, kind);
    r->cur = s;
    if (kind == AG_GENERATE) {
        r->generate_count++;
        r->plan_generates++;
        r->kernel_version = s->version;
    }
    s->inputs = dt_json_obj();
    if (r->feedback[kind].len)
        dt_json_set_str(s->inputs, "feedback", r->feedback[kind].data);
    if (kind > AG_PLAN && r->plan)
        dt_json_set_str(s->inputs, "strategy", dt_json_str(r->plan, "strategy", ""));
    dt_buf log = DT_BUF_INIT, errs = DT_BUF_INIT;
    if (r->o.hook)
        r->o.hook(r, kind, "before", &s->inputs, &log, &errs, r->o.hook_ud);
    cJSON *e = event("step_started", s);
    dt_json_set_str(e, "kind", ag_kind_name(kind));
    dt_json_set_int(e, "version", s->version);
    dt_json_set_str(e, "agent", ag_agent_name(kind));
    dt_json_set_take(e, "inputs", cJSON_Duplicate(s->inputs, 1));
    ag_emit(r, e);
    if (log.len)
        ag_text(r, s, "%s", log.data);
    if (errs.len)
        ag_diagnostic(r, s, "warning", "lua", "hook", 0, errs.data, NULL);
    dt_buf_free(&log);
    dt_buf_free(&errs);
    if (r->news.len) {
        ag_text(r, s, "%s", r->news.data);
        dt_buf_reset(&r->news);
    }
    run_step(r, s);
}

/* Steps that finish at once (a plan, a hook's rejection) start the next one
 * from inside this one: that start is queued and run here, in a loop, so
 * that any number of review rounds never deepens the stack. */
static void start_step(ag_run *r, ag_kind kind)
{
    if (r->done)
        return;
    if (r->running) {
        r->queued = (int)kind + 1;
        return;
    }
    r->running = 1;
    for (;;) {
        start_one(r, kind);
        if (r->queued == 0 || r->done)
            break;
        kind = (ag_kind)(r->queued - 1);
        r->queued = 0;
    }
    r->queued = 0;
    r->running = 0;
}

static void transition(ag_run *r, ag_kind from, ag_kind to, int edge, const char *reason)
{
    cJSON *e = event("transition", NULL);
    dt_json_set_str(e, "from", ag_kind_name(from));
    dt_json_set_str(e, "to", ag_kind_name(to));
    dt_json_set_str(e, "reason", reason);
    if (edge >= 0) {
        dt_json_set_str(e, "edge", edge_names[edge]);
        dt_json_set_int(e, "iteration", r->edge_count[edge]);
    }
    ag_emit(r, e);
    start_step(r, to);
}

/* Take a feedback edge if its cap allows; returns 0 when it was taken. */
static int take_edge(ag_run *r, ag_edge edge, ag_kind from, ag_kind to, const char *why)
{
    if (r->edge_count[edge] >= r->o.max_edge)
        return -1;
    if (to == AG_GENERATE && r->generate_count >= r->o.max_iterations)
        return -1;
    r->edge_count[edge]++;
    transition(r, from, to, edge, why);
    return 0;
}

/* Move on to the next candidate template, or finish when none is left. */
static void next_candidate(ag_run *r, ag_kind from, const char *why)
{
    ag_drop_strategy(r, dt_json_str(r->plan, "strategy", ""), why);
    if (ag_candidates_left(r) > 0 && r->generate_count < r->o.max_iterations &&
        r->edge_count[EDGE_GENERATE_PLAN] < r->o.max_edge + 2) {
        r->cand_index++;
        r->plan_generates = 0;
        dt_buf_reset(&r->feedback[AG_GENERATE]);
        dt_buf_printf(&r->feedback[AG_PLAN], "%s\n", why);
        r->edge_count[EDGE_GENERATE_PLAN]++;
        transition(r, from, AG_PLAN, EDGE_GENERATE_PLAN, why);
        return;
    }
    if (r->best)
        transition(r, from, AG_TUNE, -1, "no candidate left to try: tune the best verified one");
    else
        finish(r, AG_EXIT_NOT_VERIFIED, "no kernel passed verification (%s)", why);
}

static void advance(ag_run *r, ag_step *s)
{
    char why[1200];
    snprintf(why, sizeof why, "%s", s->reason ? s->reason : "");
    switch (s->kind) {
    case AG_PROFILE:
        if (!s->ok) {
            finish(r, AG_EXIT_ERROR, "the matrix could not be profiled: %s", why);
            return;
        }
        transition(r, AG_PROFILE, AG_PLAN, -1, "PatternReport ready");
        return;
    case AG_PLAN:
        if (!s->ok) {
            if (r->candidates && ag_candidates_left(r) == 0)
                finish(r, r->best ? AG_EXIT_OK : AG_EXIT_NOT_VERIFIED,
                       "no plan: every candidate was rejected or failed (%s)", why);
            else
                finish(r, AG_EXIT_ERROR, "no plan: %s", why);
            return;
        }
        transition(r, AG_PLAN, AG_CHECK, -1, "plan approved");
        return;
    case AG_CHECK:
        if (!s->ok) {
            dt_buf_reset(&r->feedback[AG_PLAN]);
            const cJSON *v;
            cJSON_ArrayForEach(v, cJSON_GetObjectItem(s->artifact, "violations"))
                dt_buf_printf(&r->feedback[AG_PLAN], "constraint violation: %s\n", v->valuestring);
            if (take_edge(r, EDGE_CHECK_PLAN, AG_CHECK, AG_PLAN, "constraint violation") != 0)
                next_candidate(r, AG_CHECK, "the plan violates a hard limit");
            return;
        }
        transition(r, AG_CHECK, AG_GENERATE, -1, "no hard limit violated");
        return;
    case AG_GENERATE:
        if (!s->ok) {
            next_candidate(r, AG_GENERATE, why);
            return;
        }
        transition(r, AG_GENERATE, AG_COMPILE, -1, "source ready");
        return;
    case AG_COMPILE:
        if (!s->ok) {
            dt_buf_reset(&r->feedback[AG_GENERATE]);
            dt_buf_printf(&r->feedback[AG_GENERATE], "The previous version (v%d) %s.\n",
                          r->kernel_version, why);
            const cJSON *d;
            cJSON_ArrayForEach(d, cJSON_GetObjectItem(cJSON_GetObjectItem(s->artifact, "nvrtc"), "diagnostics"))
                dt_buf_printf(&r->feedback[AG_GENERATE], "line %d: %s: %s\n",
                              dt_json_int(d, "line", 0), dt_json_str(d, "severity", ""),
                              dt_json_str(d, "message", ""));
            cJSON_ArrayForEach(d, cJSON_GetObjectItem(s->artifact, "rules"))
                if (dt_streq(dt_json_str(d, "severity", ""), "error"))
                    dt_buf_printf(&r->feedback[AG_GENERATE], "line %d: rule %s: %s\n",
                                  dt_json_int(d, "line", 0), dt_json_str(d, "id", ""),
                                  dt_json_str(d, "message", ""));
            if (r->review_note)
                dt_buf_printf(&r->feedback[AG_GENERATE], "A reviewer sent it back: %s\n",
                              r->review_note);
            if (take_edge(r, EDGE_COMPILE_GENERATE, AG_COMPILE, AG_GENERATE, why) != 0)
                next_candidate(r, AG_COMPILE, why);
            return;
        }
        if (!r->have_gpu) {
            /* Where the kernel is recorded is the front end's to say: it
             * knows whether recording held. */
            finish(r, AG_EXIT_NO_GPU, "compiled without a GPU: verification and measurement "
                                      "need one");
            return;
        }
        transition(r, AG_COMPILE, AG_VERIFY, -1, "compiled cleanly");
        return;
    case AG_VERIFY:
        if (!s->ok) {
            if (strstr(why, "no_device") || strstr(why, "no GPU")) {
                finish(r, AG_EXIT_NO_GPU, "%s", why);
                return;
            }
            dt_buf_reset(&r->feedback[AG_GENERATE]);
            dt_buf_printf(&r->feedback[AG_GENERATE], "The previous version (v%d) failed "
                                                     "verification: %s.\n",
                          r->kernel_version, why);
            const cJSON *c;
            cJSON_ArrayForEach(c, cJSON_GetObjectItem(s->artifact, "checks"))
                if (!dt_json_bool(c, "passed", 0))
                    dt_buf_printf(&r->feedback[AG_GENERATE], "- %s: %s\n",
                                  dt_json_str(c, "name", ""), dt_json_str(c, "detail", "failed"));
            if (r->review_note)
                dt_buf_printf(&r->feedback[AG_GENERATE], "A reviewer sent it back: %s\n",
                              r->review_note);
            if (take_edge(r, EDGE_VERIFY_GENERATE, AG_VERIFY, AG_GENERATE, why) != 0)
                next_candidate(r, AG_VERIFY, why);
            return;
        }
        r->verified_any = 1;
        transition(r, AG_VERIFY, AG_MEASURE, -1, "verified");
        return;
    case AG_MEASURE: {
        if (!s->ok) {
            next_candidate(r, AG_MEASURE, why);
            return;
        }
        double sp = dt_json_num(s->artifact, "speedup", 0);
        if (sp > 0 && sp < r->o.goal_speedup && !r->tune_requested) {
            char msg[1400];
            snprintf(msg, sizeof msg, "%.2fx is below the goal of %.2fx: %s", sp,
                     r->o.goal_speedup, dt_json_str(s->artifact, "diagnosis", ""));
            if (r->edge_count[EDGE_MEASURE_PLAN] < r->o.max_edge) {
                ag_drop_strategy(r, dt_json_str(r->plan, "strategy", ""), msg);
            }
            if (ag_candidates_left(r) > 0 && r->edge_count[EDGE_MEASURE_PLAN] < r->o.max_edge) {
                r->edge_count[EDGE_MEASURE_PLAN]++;
                r->cand_index++;
                r->plan_generates = 0;
                dt_buf_reset(&r->feedback[AG_PLAN]);
                dt_buf_printf(&r->feedback[AG_PLAN], "%s\n", msg);
                transition(r, AG_MEASURE, AG_PLAN, EDGE_MEASURE_PLAN, msg);
                return;
            }
        }
        transition(r, AG_MEASURE, AG_TUNE, -1, "measured: tune the best verified version");
        return;
    }
    case AG_TUNE:
        transition(r, AG_TUNE, AG_LEARN, -1, "tuned");
        return;
    case AG_LEARN: {
        double bsp = dt_json_num(r->best, "speedup", 0);
        int slower = bsp > 0 && bsp < 1.0;
        if (r->best == NULL)
            finish(r, r->verified_any ? AG_EXIT_OK : AG_EXIT_NOT_VERIFIED, "finished");
        else
            finish(r, AG_EXIT_OK, "a verified kernel: v%d, %.2f us, %.2fx the best cuSPARSE%s%s",
                   dt_json_int(r->best, "version", 0), dt_json_num(r->best, "us", 0),
                   dt_json_num(r->best, "speedup", 0), slower ? "; cuSPARSE is faster: call " : "",
                   slower ? dt_json_str(r->best, "baseline", "?") : "");
        return;
    }
    default:
        return;
    }
}

/* Apply the approved artifact to the run's state. */
static void adopt(ag_run *r, ag_step *s)
{
    switch (s->kind) {
    case AG_PROFILE: {
        cJSON_Delete(r->report);
        r->report = cJSON_Duplicate(cJSON_GetObjectItem(s->artifact, "report"), 1);
        break;
    }
    case AG_PLAN:
        if (s->ok) {
            cJSON_Delete(r->plan);
            r->plan = cJSON_Duplicate(s->artifact, 1);
            r->plan_generates = 0;
            dt_buf_reset(&r->feedback[AG_PLAN]);
        }
        break;
    case AG_GENERATE:
        if (s->ok) {
            free(r->source);
            r->source = dt_xstrdup(dt_json_str(s->artifact, "source", ""));
            r->kernel_version = s->version;
        }
        break;
    case AG_TUNE: {
        const cJSON *b = cJSON_GetObjectItem(s->artifact, "best");
        if (b && dt_json_num(b, "us", 0) > 0 &&
            (r->best == NULL || dt_json_num(b, "us", 0) < dt_json_num(r->best, "us", 1e300))) {
            cJSON_Delete(r->best);
            r->best = cJSON_Duplicate(b, 1);
        }
        break;
    }
    default:
        break;
    }
}

static void apply_decision(ag_run *r, ag_decision d, const char *by, const cJSON *artifact,
                           const char *reason)
{
    ag_step *s = r->cur;
    if (s == NULL)
        return;
    r->awaiting = 0;
    cJSON *e = event("decision", s);
    dt_json_set_str(e, "decision", ag_decision_name(d));
    dt_json_set_str(e, "by", by);
    dt_json_set_str(e, "reason", reason);
    ag_emit(r, e);
    switch (d) {
    case AG_APPROVE:
        s->status = AG_APPROVED;
        break;
    case AG_EDIT:
        s->status = AG_EDITED;
        if (s->kind == AG_GENERATE) {
            dt_json_set_str(s->artifact, "source", artifact->valuestring);
            dt_json_set_bool(s->artifact, "edited", 1);
        } else {
            cJSON_Delete(s->artifact);
            s->artifact = cJSON_Duplicate(artifact, 1);
            dt_json_set_bool(s->artifact, "ok", 1);
            dt_json_set_bool(s->artifact, "edited", 1);
        }
        s->ok = 1;
        emit_artifact(r, s);
        break;
    case AG_REJECT:
        /* a failed step sent on by nobody keeps its own name */
        s->status = !s->ok && dt_streq(by, "auto") ? AG_FAILED : AG_REJECTED;
        break;
    case AG_RETRY:
        s->status = AG_REJECTED;
        break;
    case AG_STOP:
        s->status = AG_REJECTED;
        break;
    }
    int sent_back = d == AG_REJECT && !s->ok; /* a failed step: its feedback edge */
    if (reason && d == AG_REJECT && !sent_back) {
        free(s->reason);
        s->reason = dt_xstrdup(reason);
    }
    cJSON *f = event("step_finished", s);
    dt_json_set_str(f, "status", s->status == AG_APPROVED ? "approved"
                                 : s->status == AG_EDITED ? "edited"
                                 : s->status == AG_FAILED ? "failed"
                                                          : "rejected");
    dt_json_set_bool(f, "ok", s->ok);
    dt_json_set_num(f, "seconds", (s->t1 > 0 ? s->t1 : dt_now()) - s->t0);
    dt_json_set_int(f, "tokens_in", s->tokens_in);
    dt_json_set_int(f, "tokens_out", s->tokens_out);
    dt_json_set_num(f, "cost", s->cost);
    ag_emit(r, f);
    r->cur = NULL;
    if (d == AG_STOP) {
        if (r->stop_why) {
            finish(r, AG_EXIT_STOPPED, "stopped at %s: a review is pending and %s (the session "
                   "stays open: resume it to answer)", ag_kind_name(s->kind), r->stop_why);
            return;
        }
        r->person_stopped = 1;
        finish(r, AG_EXIT_STOPPED, "stopped by %s at %s", by, ag_kind_name(s->kind));
        return;
    }
    int by_reviewer = d == AG_REJECT && !dt_streq(by, "auto") && reason && *reason;
    int wish_level = 0;
    if (by_reviewer) {
        /* Every reason is kept for the session: verbatim for the LLM, read
         * for what it asks by the expert. */
        dt_buf_printf(&r->reasons, "- at the %s review (v%d, by %s): %s\n", ag_kind_name(s->kind),
                      s->version, dt_streq(by, "lua") ? "a review hook" : "a person", reason);
        wish_level = ag_wishes_from_reason(r, s->kind, reason);
        if (++r->reviews[s->kind] > r->o.max_reviews) {
            finish(r, r->best ? AG_EXIT_OK : AG_EXIT_NOT_VERIFIED,
                   "the %s step was rejected %d times, more than the cap of %d (max_reviews): "
                   "stopping; the last reason: %s",
                   ag_kind_name(s->kind), r->reviews[s->kind], r->o.max_reviews, reason);
            return;
        }
    }
    if (sent_back) {
        free(r->review_note);
        r->review_note = by_reviewer ? dt_xstrdup(reason) : NULL;
        advance(r, s);
        free(r->review_note);
        r->review_note = NULL;
        return;
    }
    if (d == AG_REJECT || d == AG_RETRY) {
        ag_kind to = s->kind;
        char msg[600];
        snprintf(msg, sizeof msg, "%s: %s", d == AG_REJECT ? "rejected" : "retry",
                 reason ? reason : "");
        if (d == AG_REJECT && (s->kind == AG_PLAN || s->kind == AG_CHECK)) {
            /* the plan goes back to the architect, without the rejected
             * strategy -- unless only its parameters were asked about */
            if (wish_level != 1)
                ag_drop_strategy(r, dt_json_str(s->kind == AG_PLAN ? s->artifact : r->plan,
                                                "strategy", ""),
                                 msg);
            to = AG_PLAN;
        } else if (d == AG_REJECT &&
                   (s->kind == AG_COMPILE || s->kind == AG_VERIFY || s->kind == AG_MEASURE)) {
            /* compiling, verifying or timing the same source again gives the
             * same answer: the code generator gets the reason instead */
            to = AG_GENERATE;
            if (r->generate_count >= r->o.max_iterations) {
                dt_buf_printf(&r->feedback[AG_PLAN], "A reviewer rejected the %s step: %s\n",
                              ag_kind_name(s->kind), reason ? reason : "");
                next_candidate(r, s->kind, msg);
                return;
            }
        }
        if (d == AG_REJECT && reason) {
            dt_buf_reset(&r->feedback[to]);
            dt_buf_printf(&r->feedback[to], "A reviewer rejected the previous attempt: %s\n",
                          reason);
        }
        transition(r, s->kind, to, -1, msg);
        return;
    }
    adopt(r, s);
    if (r->tune_requested && s->kind == AG_MEASURE && r->best) {
        r->tune_requested = 0;
        transition(r, AG_MEASURE, AG_TUNE, -1, "tune requested");
        return;
    }
    advance(r, s);
}

/* Keep a refused edit as the step's draft and say in its reasoning why it
 * was refused. Returns -1. */
static int refuse_edit(ag_run *r, ag_step *s, const cJSON *artifact, dt_err *e)
{
    free(s->draft);
    s->draft = cJSON_IsString(artifact) ? dt_xstrdup(artifact->valuestring)
                                        : dt_json_print(artifact, 1);
    ag_text(r, s, "\nYour edit was refused: %s. Your text is kept: the next edit reopens it.\n",
            e->msg);
    return -1;
}

/* An edited kernel must keep the plan's launch contract: the worker binds
 * buffers by it. 0, or -1 with e set. */
static int kernel_edit_check(ag_run *r, const char *src, dt_err *e)
{
    gpu_contract c;
    if (gpu_contract_from_source(src, &c, e) != 0)
        return -1;
    gpu_contract_clear(&c);
    cJSON *rules = ag_static_rules(src, cJSON_GetObjectItem(r->plan, "contract"));
    const cJSON *f;
    int bad = 0;
    cJSON_ArrayForEach(f, rules)
    {
        if (!bad && dt_streq(dt_json_str(f, "id", ""), "contract-changed")) {
            dt_err_set(e, "line %d: %s: the kernel must keep the plan's contract (template %s); "
                          "to change it, edit the plan's strategy instead",
                       (int)dt_json_num(f, "line", 0), dt_json_str(f, "message", ""),
                       dt_json_str(r->plan, "template", "?"));
            bad = 1;
        }
    }
    cJSON_Delete(rules);
    return bad ? -1 : 0;
}

/* A person edited the kernel at a compile or verify gate: that step ends,
 * the text becomes a new kernel version (a generate step, edited), and it
 * is compiled. */
static void edit_kernel(ag_run *r, ag_step *s, const char *src)
{
    r->awaiting = 0;
    cJSON *e = event("decision", s);
    dt_json_set_str(e, "decision", "edit");
    dt_json_set_str(e, "by", "person");
    dt_json_set_str(e, "reason", "the kernel source was edited: it becomes a new version");
    ag_emit(r, e);
    s->status = AG_REJECTED;
    cJSON *f = event("step_finished", s);
    dt_json_set_str(f, "status", "rejected");
    dt_json_set_bool(f, "ok", s->ok);
    dt_json_set_num(f, "seconds", (s->t1 > 0 ? s->t1 : dt_now()) - s->t0);
    ag_emit(r, f);
    r->cur = NULL;
    dt_buf_printf(&r->reasons, "- at the %s review (v%d, by a person): edited the kernel source\n",
                  ag_kind_name(s->kind), s->version);
    ag_step *g = new_step(r, AG_GENERATE);
    r->cur = g;
    r->generate_count++;
    r->plan_generates++;
    r->kernel_version = g->version;
    g->inputs = dt_json_obj();
    dt_json_set_int(g->inputs, "edited_from_step", s->id);
    cJSON *st = event("step_started", g);
    dt_json_set_str(st, "kind", ag_kind_name(AG_GENERATE));
    dt_json_set_int(st, "version", g->version);
    dt_json_set_str(st, "agent", "a person");
    dt_json_set_take(st, "inputs", cJSON_Duplicate(g->inputs, 1));
    ag_emit(r, st);
    ag_text(r, g, "The kernel was edited by a person at the %s review of v%d.\n",
            ag_kind_name(s->kind), s->version);
    g->artifact = dt_json_obj();
    dt_json_set_str(g->artifact, "source", src);
    dt_json_set_take(g->artifact, "params",
                     cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "params"), 1));
    dt_json_set_str(g->artifact, "template", dt_json_str(r->plan, "template", ""));
    dt_json_set_bool(g->artifact, "ok", 1);
    dt_json_set_bool(g->artifact, "edited", 1);
    g->ok = 1;
    g->t1 = dt_now();
    emit_artifact(r, g);
    cJSON *text = cJSON_CreateString(src);
    apply_decision(r, AG_EDIT, "person", text, NULL);
    cJSON_Delete(text);
}

int ag_decide(ag_run *r, ag_decision d, const cJSON *artifact, const char *reason, dt_err *e)
{
    ag_step *s = r->cur;
    if (s == NULL || !r->awaiting)
        return dt_err_set(e, "no step is awaiting review");
    if (d == AG_APPROVE && !s->ok)
        return dt_err_set(e, "%s v%d failed (%s): a failed step cannot be approved; send it back "
                             "with feedback (r REASON), %sor stop (s)",
                          ag_kind_name(s->kind), s->version, s->reason ? s->reason : "?",
                          s->kind == AG_PLAN || s->kind == AG_GENERATE || s->kind == AG_COMPILE ||
                                  s->kind == AG_VERIFY
                              ? "edit it (e), "
                              : "");
    if (d == AG_EDIT) {
        if (s->kind == AG_GENERATE || ((s->kind == AG_COMPILE || s->kind == AG_VERIFY) && !s->ok)) {
            if (!cJSON_IsString(artifact))
                return dt_err_set(e, "an edit of the kernel needs the new source text");
            if (kernel_edit_check(r, artifact->valuestring, e) != 0)
                return refuse_edit(r, s, artifact, e);
            free(s->draft);
            s->draft = NULL;
            if (s->kind != AG_GENERATE) {
                edit_kernel(r, s, artifact->valuestring);
                return 0;
            }
        } else if (s->kind == AG_PLAN) {
            cJSON *plan = ag_plan_rederive(r, artifact, e);
            if (plan == NULL)
                return refuse_edit(r, s, artifact, e);
            free(s->draft);
            s->draft = NULL;
            apply_decision(r, d, "person", plan, reason);
            cJSON_Delete(plan);
            return 0;
        } else {
            return dt_err_set(e, "only the plan and the kernel source can be edited (this is the "
                                 "%s step%s)",
                              ag_kind_name(s->kind),
                              s->kind == AG_COMPILE || s->kind == AG_VERIFY
                                  ? "; its kernel can be edited when it failed"
                                  : "");
        }
    }
    if (d == AG_REJECT && (reason == NULL || *reason == '\0'))
        return dt_err_set(e, "a rejection needs a reason (it goes back to the agent)");
    apply_decision(r, d, "person", artifact, reason);
    return 0;
}

const ag_step *ag_awaiting(const ag_run *r)
{
    return r->awaiting ? r->cur : NULL;
}

void ag_approve_rest(ag_run *r)
{
    r->approve_rest = 1;
    /* a failed step is sent on along its feedback edge, never approved */
    if (r->awaiting && r->cur && !r->cur->ok)
        apply_decision(r, AG_REJECT, "auto", NULL, r->cur->reason ? r->cur->reason : "failed");
    else if (r->awaiting)
        apply_decision(r, AG_APPROVE, "person", NULL, NULL);
}

void ag_request_tune(ag_run *r)
{
    r->tune_requested = 1;
}

void ag_stop(ag_run *r)
{
    if (r->done)
        return;
    r->stop_requested = 1;
    if (r->awaiting)
        apply_decision(r, AG_STOP, "person", NULL, NULL);
}

void ag_stop_unattended(ag_run *r, const char *why)
{
    if (r->done || !r->awaiting)
        return;
    r->stop_why = why;
    apply_decision(r, AG_STOP, "unattended", NULL, why);
}

/* ---- finishing ------------------------------------------------------------------------------------- */

static char *write_best(ag_run *r)
{
    if (r->best == NULL)
        return NULL;
    const char *dir = r->o.out_dir ? r->o.out_dir : r->o.session_dir ? r->o.session_dir : ".";
    dt_err e = {0};
    if (dt_mkdir_p(dir, &e) != 0) {
        ag_log(r, "error", "cannot write the best kernel: %s", e.msg);
        return NULL;
    }
    char *path = dt_xasprintf("%s/best_kernel.cu", dir);
    const char *src = dt_json_str(r->best, "source", "");
    if (dt_write_file_atomic(path, src, strlen(src), &e) != 0) {
        ag_log(r, "error", "cannot write the best kernel: %s", e.msg);
        free(path);
        return NULL;
    }
    return path;
}

static void finish(ag_run *r, int code, const char *fmt, ...)
{
    if (r->done)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->finish_reason, sizeof r->finish_reason, fmt, ap);
    va_end(ap);
    r->done = 1;
    r->exit_code = code;
    char *path = write_best(r);
    cJSON *e = event("session_finished", NULL);
    cJSON *res = dt_json_obj();
    dt_json_set_bool(res, "verified", r->verified_any);
    if (r->best) {
        cJSON *b = cJSON_Duplicate(r->best, 1);
        cJSON_DeleteItemFromObject(b, "source");
        dt_json_set_str(b, "path", path);
        dt_json_set_take(res, "best", b);
    }
    dt_json_set_int(res, "exit", code);
    dt_json_set_str(res, "reason", r->finish_reason);
    /* Only a success or a person's decision closes a session for good. */
    dt_json_set_bool(res, "resumable", code != AG_EXIT_OK && !r->person_stopped);
    dt_json_set_take(e, "result", res);
    ag_emit(r, e);
    free(path);
}

/* ---- start and resume --------------------------------------------------------------------------------- */

static void on_hello_ready(ag_run *r)
{
    const cJSON *h = gpu_pool_hello(r->o.pool, 0);
    const cJSON *d = cJSON_GetObjectItem(h, "device");
    r->have_gpu = dt_json_bool(d, "present", 0);
    snprintf(r->cc, sizeof r->cc, "%s", dt_json_str(d, "cc", ""));
    snprintf(r->gpu_name, sizeof r->gpu_name, "%s", dt_json_str(d, "name", ""));
}

cJSON *ag_fingerprint(gpu_pool *pool)
{
    const cJSON *h = gpu_pool_hello(pool, 0);
    cJSON *f = dt_json_obj();
    dt_json_set_str(f, "ditto", DT_VERSION);
    const cJSON *d = cJSON_GetObjectItem(h, "device");
    dt_json_set_str(f, "gpu", dt_json_bool(d, "present", 0) ? dt_json_str(d, "name", "") : "none");
    dt_json_set_str(f, "cc", dt_json_str(d, "cc", ""));
    dt_json_set_num(f, "driver", dt_json_num(h, "driver_version", 0));
    dt_json_set_str(f, "cuda", dt_json_str(h, "cuda_version", ""));
    const cJSON *libs = cJSON_GetObjectItem(h, "libs");
    dt_json_set_str(f, "nvrtc", dt_json_str(cJSON_GetObjectItem(libs, "nvrtc"), "version", ""));
    dt_json_set_str(f, "cusparse", dt_json_str(cJSON_GetObjectItem(libs, "cusparse"), "version", ""));
    dt_json_set_str(f, "seeds", "verify seed 12345, sets seeded seed*1000003+set");
    dt_json_set_str(f, "timing", "CUDA events around the launch; median of >= 20 runs and >= 50 "
                                 "ms; cold: L2 flushed; graph replay of 50 launches when "
                                 "L2-resident; same method for cuSPARSE");
    return f;
}

/* Restore the state a previous run reached from its events: steps whose
 * step_finished says approved or edited are adopted in order; the run then
 * continues after the last of them (a step that was running re-runs). */
static int restore(ag_run *r, const cJSON *events, ag_step **last_out)
{
    ag_step *last = NULL;
    int edit_step = 0;       /* a plan a person edited: its step, */
    char edit_from[64] = ""; /* and its strategy before the edit */
    const cJSON *ev;
    cJSON_ArrayForEach(ev, events)
    {
        const char *type = dt_json_str(ev, "type", "");
        long seq = dt_json_i64(ev, "seq", 0);
        if (seq > r->seq)
            r->seq = seq;
        int sid = dt_json_int(ev, "step", 0);
        if (strcmp(type, "step_started") == 0) {
            ag_kind k;
            if (ag_kind_parse(dt_json_str(ev, "kind", ""), &k) != 0)
                continue;
            ag_step *s = new_step(r, k);
            r->resume_failed = 0; /* a later resume went on past the failure */
            r->resume_ask = 0;
            s->id = sid;
            s->version = dt_json_int(ev, "version", s->version);
            s->inputs = cJSON_Duplicate(cJSON_GetObjectItem(ev, "inputs"), 1);
            if (k == AG_GENERATE) {
                r->generate_count++;
                r->plan_generates++;
            }
        } else if (strcmp(type, "text") == 0) {
            ag_step *s = step_by_id(r, sid);
            if (s)
                dt_buf_puts(&s->reasoning, dt_json_str(ev, "text", ""));
        } else if (strcmp(type, "artifact") == 0) {
            ag_step *s = step_by_id(r, sid);
            if (s) {
                cJSON_Delete(s->artifact);
                s->artifact = cJSON_Duplicate(cJSON_GetObjectItem(ev, "json"), 1);
                s->ok = dt_json_bool(s->artifact, "ok", 0);
            }
        } else if (strcmp(type, "step_finished") == 0) {
            ag_step *s = step_by_id(r, sid);
            if (s == NULL)
                continue;
            const char *st = dt_json_str(ev, "status", "");
            if (s->id == r->resume_ask) {
                /* nobody answered its review: the step is asked again (a
                 * person's edit before it stays; nothing is redone past it) */
                s->status = AG_REJECTED;
                last = s;
            } else if (strcmp(st, "approved") == 0 || strcmp(st, "edited") == 0) {
                s->status = strcmp(st, "approved") == 0 ? AG_APPROVED : AG_EDITED;
                if (s->status == AG_EDITED && s->kind == AG_PLAN && s->id == edit_step)
                    ag_wish_from_plan_edit(
                        r, s->artifact,
                        !dt_streq(edit_from, dt_json_str(s->artifact, "strategy", "")));
                s->ok = dt_json_bool(ev, "ok", s->ok);
                adopt(r, s);
                if (s->kind == AG_MEASURE && s->ok) {
                    /* best so far, as measure_done recorded it */
                    double us = dt_json_num(s->artifact, "us", 0);
                    if (us > 0 && (r->best == NULL || us < dt_json_num(r->best, "us", 1e300))) {
                        cJSON_Delete(r->best);
                        r->best = dt_json_obj();
                        dt_json_set_int(r->best, "version", r->kernel_version);
                        dt_json_set_str(r->best, "source", r->source ? r->source : "");
                        dt_json_set_num(r->best, "us", us);
                        dt_json_set_num(r->best, "speedup", dt_json_num(s->artifact, "speedup", 0));
                        dt_json_set_str(r->best, "strategy", dt_json_str(r->plan, "strategy", ""));
                        dt_json_set_take(r->best, "params",
                                         cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "params"), 1));
                    }
                }
                if (s->kind == AG_VERIFY && s->ok)
                    r->verified_any = 1;
                last = s;
            } else if (strcmp(st, "failed") == 0 ||
                       (!dt_json_bool(ev, "ok", 1) && s->artifact && !s->ok &&
                        s->kind != AG_PLAN)) {
                /* failed, or failed and sent back by a reviewer: resume
                 * takes its feedback edge, never redoes it unchanged */
                s->status = AG_FAILED;
                s->ok = 0;
                free(s->reason);
                s->reason = dt_xstrdup(dt_json_str(s->artifact, "why", "failed"));
                last = s;
            } else {
                s->status = AG_REJECTED;
                last = s;
            }
        } else if (strcmp(type, "decision") == 0) {
            /* what reviewers said is kept across a resume too */
            ag_step *s = step_by_id(r, sid);
            const char *by = dt_json_str(ev, "by", "auto");
            const char *why = dt_json_str(ev, "reason", NULL);
            if (s && dt_streq(dt_json_str(ev, "decision", ""), "stop") &&
                dt_streq(by, "unattended"))
                r->resume_ask = s->id;
            if (s && s->kind == AG_PLAN && dt_streq(dt_json_str(ev, "decision", ""), "edit")) {
                edit_step = s->id; /* the edited plan's artifact follows */
                snprintf(edit_from, sizeof edit_from, "%s",
                         dt_json_str(s->artifact, "strategy", ""));
            }
            if (s && dt_streq(dt_json_str(ev, "decision", ""), "reject") && !dt_streq(by, "auto") &&
                why && *why) {
                dt_buf_printf(&r->reasons, "- at the %s review (v%d, by %s): %s\n",
                              ag_kind_name(s->kind), s->version,
                              dt_streq(by, "lua") ? "a review hook" : "a person", why);
                if (r->candidates == NULL && r->report)
                    r->candidates = ag_rank_templates(r->report, &r->spec, r->cc, r->o.kb, NULL);
                int level = ag_wishes_from_reason(r, s->kind, why);
                r->reviews[s->kind]++;
                /* as apply_decision did: a reason that asked only for
                 * parameters or registers kept the strategy */
                if ((s->kind == AG_PLAN || s->kind == AG_CHECK) && level != 1)
                    ag_drop_strategy(
                        r, dt_json_str(s->kind == AG_PLAN ? s->artifact : r->plan, "strategy", ""),
                        why);
            }
        } else if (strcmp(type, "transition") == 0) {
            const char *edge = dt_json_str(ev, "edge", NULL);
            for (int i = 0; edge && i < EDGE_NEDGES; i++)
                if (strcmp(edge, edge_names[i]) == 0)
                    r->edge_count[i] = dt_json_int(ev, "iteration", r->edge_count[i]);
        } else if (strcmp(type, "session_finished") == 0) {
            /* A run that ended on a failure (a crashed worker, no GPU, an
             * unanswerable review) goes on; one without the field is from
             * before it existed and stays closed. */
            const cJSON *res = cJSON_GetObjectItem(ev, "result");
            r->done = !dt_json_bool(res, "resumable", 0);
            r->resume_failed = !r->done && (int)dt_json_num(res, "exit", 0) != AG_EXIT_NO_GPU;
        }
    }
    /* A step that started but never finished is dropped: it re-runs. */
    while (r->nsteps > 0 && r->steps[r->nsteps - 1]->status == AG_RUNNING) {
        step_free(r->steps[r->nsteps - 1]);
        r->nsteps--;
    }
    *last_out = last;
    return 0;
}

typedef struct resume_ctx {
    ag_run *r;
    ag_step *last;
} resume_ctx;

static void resume_loaded(ag_run *r, ag_step *s, const cJSON *reply)
{
    (void)s;
    char buf[1200];
    if (!dt_json_bool(reply, "ok", 0)) {
        finish(r, AG_EXIT_ERROR, "resume: the matrix could not be reloaded: %s",
               reply_error(reply, buf, sizeof buf));
        return;
    }
    /* Continue after the last finished step. */
    ag_step *last = NULL;
    for (int i = r->nsteps - 1; i >= 0 && last == NULL; i--)
        if (r->steps[i]->status != AG_RUNNING && r->steps[i] != s)
            last = r->steps[i];
    /* The reload step itself is not part of the pipeline. */
    for (int i = 0; i < r->nsteps; i++) {
        if (r->steps[i] == s) {
            step_free(s);
            memmove(&r->steps[i], &r->steps[i + 1], (size_t)(r->nsteps - i - 1) * sizeof *r->steps);
            r->nsteps--;
            break;
        }
    }
    r->cur = NULL;
    if (last == NULL) {
        start_step(r, AG_PROFILE);
    } else if (r->resume_ask && last->id == r->resume_ask) {
        /* never a new plan or kernel in place of the one whose review was
         * pending: that step again, on the same inputs, and its review */
        r->resume_ask = 0;
        transition(r, last->kind, last->kind, -1,
                   "resumed: the review nobody could answer is asked again");
    } else if (last->status == AG_FAILED && !(r->resume_failed && !last->ok)) {
        ag_log(r, "info", "resumed after step %d (%s v%d failed)", last->id,
               ag_kind_name(last->kind), last->version);
        advance(r, last);
    } else if (last->status == AG_REJECTED) {
        ag_kind to = last->kind;
        if (to == AG_CHECK)
            to = AG_PLAN;
        else if (to == AG_COMPILE || to == AG_VERIFY || to == AG_MEASURE)
            to = AG_GENERATE; /* never the same source again */
        transition(r, last->kind, to, -1, "resumed: after the rejected step");
    } else if (r->resume_failed && !last->ok) {
        /* The run ended on this step's failure (a worker that died twice,
         * an LLM that did not answer): try it again rather than take the
         * same way out. */
        transition(r, last->kind, last->kind, -1, "resumed: re-running the step that failed");
    } else {
        ag_log(r, "info", "resumed after step %d (%s v%d)", last->id, ag_kind_name(last->kind),
               last->version);
        advance(r, last);
    }
}

int ag_run_start(ag_run *r, const cJSON *resume_events, dt_err *e)
{
    if (r->o.pool == NULL)
        return dt_err_set(e, "no worker pool");
    if (gpu_pool_wait_ready(r->o.pool, 60) < 1)
        return dt_err_set(e, "the GPU worker did not start");
    on_hello_ready(r);
    if (resume_events != NULL) {
        ag_step *last = NULL;
        restore(r, resume_events, &last);
        if (r->done)
            return dt_err_set(e, "that session already finished (ditto replay shows it)");
        /* rank again (deterministic) so that next candidates exist */
        if (r->report) {
            cJSON_Delete(r->candidates);
            r->candidates = ag_rank_templates(r->report, &r->spec, r->cc, r->o.kb, e);
            ag_narrow_spaces(r, NULL);
            /* cand_index: the candidate of the current plan */
            const char *strat = dt_json_str(r->plan, "strategy", "");
            int i = 0;
            const cJSON *c;
            cJSON_ArrayForEach(c, r->candidates)
            {
                if (dt_streq(dt_json_str(c, "strategy", ""), strat))
                    r->cand_index = i;
                i++;
            }
        }
        ag_log(r, "info", "resuming: %d steps restored from the session log", r->nsteps);
        cJSON *rv = event("session_resumed", NULL);
        dt_json_set_str(rv, "backend", r->o.backend);
        if (r->o.flags)
            dt_json_set_take(rv, "flags", cJSON_Duplicate(r->o.flags, 1));
        ag_emit(r, rv);
        /* Reload the matrix in the worker before anything else. */
        ag_step *s = new_step(r, AG_PROFILE);
        s->id = 1000000 + r->nsteps;
        r->cur = s;
        cJSON *req = dt_json_obj();
        dt_json_set_str(req, "req", "load_matrix");
        dt_json_set_str(req, "matrix", r->spec.matrix);
        dt_json_set_str(req, "handle", "m");
        dt_json_set_int(req, "n", r->spec.n);
        dt_json_set_int(req, "k", r->spec.n);
        ag_worker_call(r, s, req, 900, resume_loaded);
        return 0;
    }
    cJSON *ev = event("session_started", NULL);
    dt_json_set_str(ev, "session", r->session);
    dt_json_set_take(ev, "spec", sp_spec_json(&r->spec));
    dt_json_set_take(ev, "fingerprint", ag_fingerprint(r->o.pool));
    dt_json_set_str(ev, "backend", r->o.backend);
    if (r->o.flags)
        dt_json_set_take(ev, "flags", cJSON_Duplicate(r->o.flags, 1));
    ag_emit(r, ev);
    if (!r->have_gpu)
        ag_log(r, "warning", "no GPU (%s): compile-only; verification and measurement need one",
               dt_json_str(cJSON_GetObjectItem(gpu_pool_hello(r->o.pool, 0), "device"), "reason", "?"));
    start_step(r, AG_PROFILE);
    return 0;
}

/* ---- read access ------------------------------------------------------------------------------------ */

int ag_step_count(const ag_run *r)
{
    return r->nsteps;
}

const ag_step *ag_step_at(const ag_run *r, int i)
{
    return i >= 0 && i < r->nsteps ? r->steps[i] : NULL;
}

int ag_step_id(const ag_step *s)
{
    return s->id;
}

ag_kind ag_step_kind(const ag_step *s)
{
    return s->kind;
}

int ag_step_version(const ag_step *s)
{
    return s->version;
}

ag_status ag_step_status(const ag_step *s)
{
    return s->status;
}

const char *ag_step_reasoning(const ag_step *s)
{
    return dt_buf_str(&s->reasoning);
}

const cJSON *ag_step_artifact(const ag_step *s)
{
    return s->artifact;
}

const char *ag_step_draft(const ag_step *s)
{
    return s->draft;
}

cJSON *ag_step_view(const ag_run *r, const ag_step *s)
{
    static const char *names[] = {"report", "plan", "constraints", "kernel", "compile",
                                  "verify", "measure", "tune", "kb_entry"};
    cJSON *v = dt_json_obj();
    dt_json_set_int(v, "id", s->id);
    dt_json_set_str(v, "kind", ag_kind_name(s->kind));
    dt_json_set_int(v, "version", s->version);
    dt_json_set_str(v, "status", ag_status_name(s->status));
    dt_json_set_bool(v, "ok", s->ok);
    cJSON *art = dt_json_obj();
    dt_json_set_str(art, "name", names[s->kind]);
    dt_json_set_int(art, "version", s->version);
    if (s->kind == AG_GENERATE)
        dt_json_set_str(art, "content", dt_json_str(s->artifact, "source", ""));
    if (s->artifact)
        dt_json_set_take(art, "json", cJSON_Duplicate(s->artifact, 1));
    dt_json_set_take(v, "artifact", art);
    /* The latest verification and measurement up to this step: what a
     * reviewer of a measure or tune step judges. */
    const ag_step *ver = NULL, *mea = NULL;
    for (int i = 0; i < r->nsteps && r->steps[i] != s; i++) {
        if (r->steps[i]->kind == AG_VERIFY)
            ver = r->steps[i];
        if (r->steps[i]->kind == AG_MEASURE)
            mea = r->steps[i];
    }
    if (s->kind == AG_VERIFY)
        ver = s;
    if (s->kind == AG_MEASURE)
        mea = s;
    if (ver && ver->artifact) {
        cJSON *vj = cJSON_Duplicate(ver->artifact, 1);
        dt_json_set_bool(vj, "passed", dt_json_bool(ver->artifact, "passed", 0) && ver->ok);
        dt_json_set_take(v, "verify", vj);
    }
    if (s->kind == AG_TUNE && s->artifact && cJSON_GetObjectItem(s->artifact, "best"))
        dt_json_set_take(v, "measurement",
                         cJSON_Duplicate(cJSON_GetObjectItem(s->artifact, "best"), 1));
    else if (mea && mea->artifact)
        dt_json_set_take(v, "measurement", cJSON_Duplicate(mea->artifact, 1));
    const char *src = r->source;
    if (s->kind == AG_GENERATE && s->artifact)
        src = dt_json_str(s->artifact, "source", "");
    if (src)
        dt_json_set_str(v, "source", src);
    return v;
}
