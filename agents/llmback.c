/* llmback.c -- the LLM backend of the planner and the coder: prompts from
 * prompts/ with named slots, streamed answers into the step's reasoning,
 * strict checks on what comes back (the planner's JSON against its schema,
 * the coder's single fenced CUDA block under the plan's launch contract),
 * one send-back with the precise problem, and a fall back to the expert
 * backend when the endpoint cannot be reached. */
#include "agents/internal.h"
#include "agents/llm.h"
#include "gpu/contract.h"
#include "knowledge/knowledge.h"

#include <stdlib.h>
#include <string.h>

typedef struct llm_job {
    ag_run *r;
    int step_id;
    int attempt;        /* 1, or 2 after a send-back */
    cJSON *messages;    /* the conversation so far */
    dt_buf answer;
} llm_job;

/* A retry is worth showing: the wait, and why (a log the workbench counts
 * down from). */
static void on_retry(int attempt, long wait_ms, const char *error, const char *message, void *ud)
{
    ag_run *r = ud;
    cJSON *ev = dt_json_obj();
    dt_json_set_str(ev, "type", "log");
    if (r->cur)
        dt_json_set_int(ev, "step", r->cur->id);
    dt_json_set_str(ev, "level", "warning");
    char msg[700];
    snprintf(msg, sizeof msg, "LLM attempt %d failed (%s: %s): retrying in %.1f s", attempt, error,
             message, (double)wait_ms / 1000);
    dt_json_set_str(ev, "message", msg);
    dt_json_set_num(ev, "retry_in_s", (double)wait_ms / 1000);
    dt_json_set_int(ev, "attempt", attempt);
    dt_json_set_str(ev, "why", error);
    ag_emit(r, ev);
}

static llm_client *client(ag_run *r, dt_err *e)
{
    if (r->llm == NULL) {
        if (r->o.llm_config == NULL) {
            dt_err_set(e, "no LLM configured (endpoint and model in config.json or flags)");
            return NULL;
        }
        r->llm = llm_new(r->loop, r->o.llm_config, e);
        if (r->llm)
            llm_set_retry_hook(r->llm, on_retry, r);
    }
    return r->llm;
}

void ag_llm_free(ag_run *r)
{
    if (r->llm) {
        if (r->llm_request)
            llm_cancel(r->llm, r->llm_request);
        llm_free(r->llm);
        r->llm = NULL;
    }
}

/* ---- prompts ----------------------------------------------------------------------- */

/* Fill {{slot}} markers from an object of strings; unknown slots become
 * "(none)" so a template never leaks its markers into a prompt. */
static char *fill(const char *tmpl, const cJSON *slots)
{
    dt_buf b = DT_BUF_INIT;
    const char *p = tmpl;
    while (*p) {
        const char *o = strstr(p, "{{");
        if (o == NULL) {
            dt_buf_puts(&b, p);
            break;
        }
        dt_buf_append(&b, p, (size_t)(o - p));
        const char *c = strstr(o, "}}");
        if (c == NULL) {
            dt_buf_puts(&b, o);
            break;
        }
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(c - o - 2), o + 2);
        const char *v = dt_json_str(slots, name, NULL);
        dt_buf_puts(&b, v && *v ? v : "(none)");
        p = c + 2;
    }
    return dt_buf_take(&b);
}

static char *load_prompt(const char *name, dt_err *e)
{
    char *rel = dt_xasprintf("prompts/%s", name);
    char *path = dt_share_path(rel);
    free(rel);
    char *t = path ? dt_read_file(path, NULL, e) : NULL;
    if (t == NULL)
        dt_err_set(e, "prompt template prompts/%s not found", name);
    free(path);
    return t;
}

static void common_slots(ag_run *r, cJSON *slots)
{
    char task[512];
    snprintf(task, sizeof task,
             "%s in %s on %s (n = %d, alpha = %g, beta = %g, epilogue %s); goal: faster than the "
             "best cuSPARSE algorithm, verified",
             sp_op_name(r->spec.op), sp_dtype_name(r->spec.dtype), r->spec.matrix, r->spec.n,
             r->spec.alpha, r->spec.beta, sp_epilogue_name(r->spec.epilogue));
    dt_json_set_str(slots, "task", task);
    char hw[512];
    snprintf(hw, sizeof hw, "%s, compute capability %s; SpMV/SpMM are bandwidth-bound: bytes "
                            "per nonzero and coalescing decide",
             r->gpu_name[0] ? r->gpu_name : "no GPU here (compile only)", r->cc[0] ? r->cc : "9.0");
    dt_json_set_str(slots, "hardware", hw);
    char *rep = dt_json_print(r->report, 0);
    dt_json_set_str(slots, "report", rep);
    free(rep);
    cJSON *kbs = NULL;
    if (r->o.kb) {
        cJSON *f = ag_features(r->report, &r->spec);
        kbs = kb_retrieve(r->o.kb, NULL, sp_op_name(r->spec.op), sp_dtype_name(r->spec.dtype),
                          r->cc[0] ? r->cc : NULL, f, 6);
        cJSON_Delete(f);
    }
    dt_buf k = DT_BUF_INIT;
    const cJSON *en;
    cJSON_ArrayForEach(en, kbs)
        dt_buf_printf(&k, "- [%s] %s: %s\n", dt_json_str(en, "id", ""), dt_json_str(en, "title", ""),
                      dt_json_str(en, "content", ""));
    dt_json_set_str(slots, "knowledge", dt_buf_str(&k));
    dt_buf_free(&k);
    cJSON_Delete(kbs);
}

static cJSON *messages_with(const char *user)
{
    cJSON *m = dt_json_arr();
    cJSON *sys = dt_json_obj();
    dt_json_set_str(sys, "role", "system");
    dt_json_set_str(sys, "content", "You are an expert CUDA performance engineer. Follow the "
                                    "answer format exactly.");
    cJSON_AddItemToArray(m, sys);
    cJSON *u = dt_json_obj();
    dt_json_set_str(u, "role", "user");
    dt_json_set_str(u, "content", user);
    cJSON_AddItemToArray(m, u);
    return m;
}

/* ---- streaming ----------------------------------------------------------------------- */

static ag_step *job_step(llm_job *j)
{
    ag_step *s = j->r->cur;
    return s && s->id == j->step_id ? s : NULL;
}

static void on_delta(const char *text, size_t len, void *ud)
{
    llm_job *j = ud;
    dt_buf_append(&j->answer, text, len);
    ag_step *s = job_step(j);
    if (s) {
        char *t = dt_xstrndup(text, len);
        ag_text(j->r, s, "%s", t);
        free(t);
    }
}

static void job_free(llm_job *j)
{
    cJSON_Delete(j->messages);
    dt_buf_free(&j->answer);
    free(j);
}

typedef void check_fn(llm_job *j, ag_step *s, const char *answer);

static void send(llm_job *j, llm_done_fn *done);

/* The endpoint failed for good: the expert backend does the step. */
static void fall_back(llm_job *j, ag_step *s, const llm_result *res)
{
    ag_run *r = j->r;
    ag_text(r, s, "\nThe LLM endpoint failed (%s: %s) after %d attempt(s): the expert backend "
                  "takes over this step and the rest of the run.\n",
            res->error ? res->error : "error", res->message ? res->message : "", res->attempts);
    /* the log says which backend is in use now, and why, for the status bar */
    char msg[512];
    snprintf(msg, sizeof msg, "LLM unavailable (%s): falling back to the expert backend",
             res->error ? res->error : "error");
    cJSON *ev = dt_json_obj();
    dt_json_set_str(ev, "type", "log");
    if (s)
        dt_json_set_int(ev, "step", s->id);
    dt_json_set_str(ev, "level", "warning");
    dt_json_set_str(ev, "message", msg);
    dt_json_set_str(ev, "backend", "expert");
    dt_json_set_str(ev, "why", res->message && *res->message ? res->message
                               : res->error                 ? res->error
                                                            : "error");
    ag_emit(r, ev);
    r->llm_fallback = 1;
    if (s->kind == AG_PLAN)
        ag_expert_plan(r, s);
    else
        ag_expert_generate(r, s);
}

static void account(ag_step *s, const llm_result *res)
{
    s->tokens_in += res->tokens_in;
    s->tokens_out += res->tokens_out;
    s->cost += res->cost;
}

/* Send the problem back once with what was wrong; a second bad answer
 * fails the step (the feedback edge or the next candidate follows). */
static void send_back(llm_job *j, ag_step *s, const char *problem, llm_done_fn *done)
{
    if (j->attempt >= 2) {
        /* Two unusable answers (a refusal, most often): the expert backend
         * does this step, the LLM stays on for the next ones. */
        ag_text(j->r, s, "\n[ditto] The answer was refused again (%s): the expert backend does "
                         "this step.\n",
                problem);
        ag_log(j->r, "warning", "the LLM gave no usable answer for this step: expert fallback");
        if (s->kind == AG_PLAN)
            ag_expert_plan(j->r, s);
        else
            ag_expert_generate(j->r, s);
        job_free(j);
        return;
    }
    ag_text(j->r, s, "\n[ditto] The answer was refused: %s. Asking once more.\n", problem);
    cJSON *a = dt_json_obj();
    dt_json_set_str(a, "role", "assistant");
    dt_json_set_str(a, "content", dt_buf_str(&j->answer));
    cJSON_AddItemToArray(j->messages, a);
    cJSON *u = dt_json_obj();
    char msg[2048];
    snprintf(msg, sizeof msg, "Your answer could not be used: %s. Answer again in the required "
                              "format.",
             problem);
    dt_json_set_str(u, "role", "user");
    dt_json_set_str(u, "content", msg);
    cJSON_AddItemToArray(j->messages, u);
    j->attempt++;
    dt_buf_reset(&j->answer);
    send(j, done);
}

/* ---- the planner ------------------------------------------------------------------------ */

static void plan_done(const llm_result *res, void *ud);

static void check_plan(llm_job *j, ag_step *s, const char *answer)
{
    ag_run *r = j->r;
    /* The JSON object: the first '{' to the last '}' (models like to wrap
     * it in a code fence). */
    const char *b = strchr(answer, '{'), *e = strrchr(answer, '}');
    if (b == NULL || e == NULL || e < b) {
        send_back(j, s, "no JSON object in the answer", plan_done);
        return;
    }
    dt_err je = {0};
    cJSON *j0 = dt_json_parse(b, (size_t)(e - b + 1), "answer", &je);
    if (j0 == NULL) {
        send_back(j, s, je.msg, plan_done);
        return;
    }
    dt_buf probs = DT_BUF_INIT;
    const cJSON *dec = cJSON_GetObjectItem(j0, "decision");
    const char *strat = dt_json_str(dec, "strategy", NULL);
    if (!cJSON_IsArray(cJSON_GetObjectItem(j0, "factors")))
        dt_buf_puts(&probs, "$.factors: expected an array of strings; ");
    if (!cJSON_IsArray(cJSON_GetObjectItem(j0, "tradeoffs")))
        dt_buf_puts(&probs, "$.tradeoffs: expected an array of strings; ");
    const cJSON *cand = NULL;
    int ci = 0, idx = -1;
    const cJSON *c;
    cJSON_ArrayForEach(c, r->candidates)
    {
        if (strat && dt_streq(dt_json_str(c, "strategy", ""), strat)) {
            cand = c;
            idx = ci;
        }
        ci++;
    }
    if (strat == NULL)
        dt_buf_puts(&probs, "$.decision.strategy: missing; ");
    else if (cand == NULL)
        dt_buf_printf(&probs, "$.decision.strategy: '%s' is not one of the candidates; ", strat);
    cJSON *plan = NULL;
    if (cand) {
        cJSON *cc = cJSON_Duplicate(cand, 1);
        const cJSON *p;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(dec, "params"))
        {
            if (!cJSON_IsNumber(p))
                dt_buf_printf(&probs, "$.decision.params.%s: expected an integer; ", p->string);
            else
                dt_json_set_num(cJSON_GetObjectItem(cc, "params"), p->string, p->valuedouble);
        }
        dt_err pe = {0};
        plan = ag_plan_from_candidate(r, cc, &pe);
        cJSON_Delete(cc);
        if (plan == NULL)
            dt_buf_printf(&probs, "%s; ", pe.msg);
        else if (ag_plan_validate(r, plan, &probs) != 0) {
            cJSON_Delete(plan);
            plan = NULL;
        }
    }
    if (probs.len || plan == NULL) {
        char msg[1500];
        snprintf(msg, sizeof msg, "%s", probs.len ? probs.data : "invalid plan");
        dt_buf_free(&probs);
        cJSON_Delete(j0);
        cJSON_Delete(plan);
        send_back(j, s, msg, plan_done);
        return;
    }
    dt_buf_free(&probs);
    r->cand_index = idx;
    dt_json_set_take(plan, "llm", cJSON_Duplicate(j0, 1));
    const cJSON *rat = cJSON_GetObjectItem(j0, "rationale");
    if (rat)
        dt_json_set_take(plan, "rationale", cJSON_Duplicate(rat, 1));
    cJSON_Delete(j0);
    ag_complete(r, s, plan, 1, NULL);
    job_free(j);
}

static void plan_done(const llm_result *res, void *ud)
{
    llm_job *j = ud;
    ag_run *r = j->r;
    r->llm_request = 0;
    ag_step *s = job_step(j);
    if (s == NULL || r->freeing) {
        job_free(j);
        return;
    }
    account(s, res);
    if (!res->ok) {
        if (dt_streq(res->error, "cancelled")) {
            job_free(j);
            return;
        }
        fall_back(j, s, res);
        job_free(j);
        return;
    }
    check_plan(j, s, dt_buf_str(&j->answer));
}

static void send(llm_job *j, llm_done_fn *done)
{
    dt_err e = {0};
    llm_client *cl = client(j->r, &e);
    if (cl == NULL) {
        ag_step *s = job_step(j);
        llm_result fake = {.ok = 0, .error = "config", .message = e.msg, .attempts = 0};
        if (s)
            fall_back(j, s, &fake);
        job_free(j);
        return;
    }
    j->r->llm_request = llm_submit(cl, j->messages, on_delta, done, j);
}

void ag_llm_plan(ag_run *r, ag_step *s)
{
    dt_err e = {0};
    if (r->candidates == NULL)
        r->candidates = ag_rank_templates(r->report, &r->spec, r->cc, r->o.kb, &e);
    char *tmpl = load_prompt("planner.txt", &e);
    if (r->candidates == NULL || tmpl == NULL) {
        free(tmpl);
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
    cJSON *slots = dt_json_obj();
    common_slots(r, slots);
    dt_buf c = DT_BUF_INIT;
    const cJSON *x;
    cJSON_ArrayForEach(x, r->candidates)
    {
        char *sp = dt_json_print(cJSON_GetObjectItem(x, "space"), 0);
        dt_buf_printf(&c, "- %s (%s), score %.1f, space %s\n", dt_json_str(x, "strategy", ""),
                      dt_json_str(x, "summary", ""), dt_json_num(x, "score", 0), sp);
        free(sp);
        const cJSON *w;
        cJSON_ArrayForEach(w, cJSON_GetObjectItem(x, "rationale"))
            dt_buf_printf(&c, "    %s%s%s\n", dt_json_str(w, "rule", "") ? "[" : "",
                          dt_json_str(w, "rule", ""), dt_json_str(w, "text", ""));
    }
    dt_json_set_str(slots, "candidates", dt_buf_str(&c));
    dt_buf_free(&c);
    dt_json_set_str(slots, "feedback", dt_json_str(s->inputs, "feedback", ""));
    char *prompt = fill(tmpl, slots);
    free(tmpl);
    cJSON_Delete(slots);
    llm_job *j = dt_xcalloc(1, sizeof *j);
    j->r = r;
    j->step_id = s->id;
    j->attempt = 1;
    j->messages = messages_with(prompt);
    free(prompt);
    ag_text(r, s, "Asking the LLM to plan (layered: factors, trade-offs, decision).\n");
    send(j, plan_done);
}

/* ---- the coder ---------------------------------------------------------------------------- */

static void gen_done(const llm_result *res, void *ud);

/* The single fenced block: ```cuda ... ``` (or ``` ... ```), exactly one. */
static char *fenced_block(const char *answer, char *why, size_t wlen)
{
    const char *f1 = strstr(answer, "```");
    if (f1 == NULL) {
        snprintf(why, wlen, "no fenced code block (```cuda ... ```) in the answer");
        return NULL;
    }
    const char *body = strchr(f1, '\n');
    if (body == NULL) {
        snprintf(why, wlen, "the code fence is not followed by a line break");
        return NULL;
    }
    body++;
    const char *f2 = strstr(body, "```");
    if (f2 == NULL) {
        snprintf(why, wlen, "the code block is not closed with ```");
        return NULL;
    }
    if (strstr(f2 + 3, "```") != NULL) {
        snprintf(why, wlen, "more than one fenced code block: answer with exactly one");
        return NULL;
    }
    return dt_xstrndup(body, (size_t)(f2 - body));
}

static void check_code(llm_job *j, ag_step *s, const char *answer)
{
    ag_run *r = j->r;
    char why[512];
    char *src = fenced_block(answer, why, sizeof why);
    if (src == NULL) {
        send_back(j, s, why, gen_done);
        return;
    }
    cJSON *rules = ag_static_rules(src, cJSON_GetObjectItem(r->plan, "contract"));
    const cJSON *f;
    cJSON_ArrayForEach(f, rules)
    {
        if (dt_streq(dt_json_str(f, "id", ""), "contract-changed")) {
            snprintf(why, sizeof why, "line %d: %s (keep the skeleton's /*@contract*/ block "
                                      "exactly)",
                     dt_json_int(f, "line", 0), dt_json_str(f, "message", ""));
            cJSON_Delete(rules);
            free(src);
            send_back(j, s, why, gen_done);
            return;
        }
    }
    cJSON_Delete(rules);
    cJSON *art = dt_json_obj();
    dt_json_set_str(art, "source", src);
    dt_json_set_take(art, "params", cJSON_Duplicate(cJSON_GetObjectItem(r->plan, "params"), 1));
    dt_json_set_str(art, "template", dt_json_str(r->plan, "template", ""));
    dt_json_set_str(art, "by", "llm");
    free(src);
    ag_complete(r, s, art, 1, NULL);
    job_free(j);
}

static void gen_done(const llm_result *res, void *ud)
{
    llm_job *j = ud;
    ag_run *r = j->r;
    r->llm_request = 0;
    ag_step *s = job_step(j);
    if (s == NULL || r->freeing) {
        job_free(j);
        return;
    }
    account(s, res);
    if (!res->ok) {
        if (dt_streq(res->error, "cancelled")) {
            job_free(j);
            return;
        }
        fall_back(j, s, res);
        job_free(j);
        return;
    }
    check_code(j, s, dt_buf_str(&j->answer));
}

void ag_llm_generate(ag_run *r, ag_step *s)
{
    dt_err e = {0};
    char *tmpl = load_prompt("coder.txt", &e);
    char *neg = load_prompt("negative_examples.txt", &e);
    char *skel = tmpl ? ag_instantiate(dt_json_str(r->plan, "template", ""),
                                       cJSON_GetObjectItem(r->plan, "params"), &e)
                      : NULL;
    if (tmpl == NULL || skel == NULL) {
        free(tmpl);
        free(neg);
        free(skel);
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
    cJSON *slots = dt_json_obj();
    common_slots(r, slots);
    cJSON *pl = cJSON_Duplicate(r->plan, 1);
    cJSON_DeleteItemFromObject(pl, "llm");
    char *ps = dt_json_print(pl, 1);
    cJSON_Delete(pl);
    dt_json_set_str(slots, "plan", ps);
    free(ps);
    dt_json_set_str(slots, "skeleton", skel);
    dt_json_set_str(slots, "negative_examples", neg ? neg : "");
    dt_json_set_str(slots, "feedback", dt_json_str(s->inputs, "feedback", ""));
    char *prompt = fill(tmpl, slots);
    free(tmpl);
    free(neg);
    free(skel);
    cJSON_Delete(slots);
    llm_job *j = dt_xcalloc(1, sizeof *j);
    j->r = r;
    j->step_id = s->id;
    j->attempt = 1;
    j->messages = messages_with(prompt);
    free(prompt);
    if (dt_json_str(s->inputs, "feedback", NULL))
        ag_text(r, s, "Asking the LLM for a new version, with the feedback in the prompt.\n");
    else
        ag_text(r, s, "Asking the LLM to write the kernel from the template skeleton.\n");
    send(j, gen_done);
}

int ag_set_brain(ag_run *r, const char *what, const char *value, dt_err *e)
{
    if (r->llm_request)
        return dt_err_set(e, "the LLM is answering: switch when the step is done or awaits review");
    llm_config *c = r->o.llm_config;
    if (dt_streq(what, "backend")) {
        if (!dt_streq(value, "expert") && !dt_streq(value, "llm"))
            return dt_err_set(e, "backend is expert or llm, not '%s'", value);
        if (dt_streq(value, "llm") && c == NULL)
            return dt_err_set(e, "no LLM configured: start with --backend llm (or an \"llm\" "
                                 "object in config.json)");
        r->o.backend = dt_streq(value, "llm") ? "llm" : "expert";
        r->llm_fallback = 0; /* a person's choice over the earlier fallback */
    } else if (dt_streq(what, "model") || dt_streq(what, "endpoint")) {
        if (c == NULL)
            return dt_err_set(e, "no LLM configured: start with --backend llm (or an \"llm\" "
                                 "object in config.json)");
        if (*value == '\0' || strlen(value) > 512)
            return dt_err_set(e, "%s: give 1 to 512 characters", what);
        char **slot = dt_streq(what, "model") ? &c->model : &c->endpoint;
        free(*slot);
        *slot = dt_xstrdup(value);
        ag_llm_free(r); /* the next request makes a client with the new settings */
    } else {
        return dt_err_set(e, "'%s' cannot be switched (backend, model or endpoint)", what);
    }
    cJSON *ev = dt_json_obj();
    dt_json_set_str(ev, "type", "log");
    dt_json_set_str(ev, "level", "info");
    /* The event is recorded: an endpoint keeps no credentials there. */
    char shown[1024];
    if (dt_streq(what, "endpoint"))
        (void)dt_url_redact(value, shown, sizeof shown);
    else
        snprintf(shown, sizeof shown, "%s", value);
    char msg[1200];
    snprintf(msg, sizeof msg, "%s switched to %s for the next steps", what, shown);
    dt_json_set_str(ev, "message", msg);
    dt_json_set_str(ev, "setting", what);
    dt_json_set_str(ev, "value", shown);
    dt_json_set_str(ev, "by", "person");
    ag_emit(r, ev);
    return 0;
}
