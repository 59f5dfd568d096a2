/* llmback.c -- the LLM backend of the planner and the coder: prompts from
 * prompts/ with named slots (the task, the PatternReport, the target GPU's
 * limits and peaks, the approved knowledge ranked by the matrix's features,
 * the current code with numbered lines and its diagnostics, every
 * reviewer's reason, what the last version measured), the planner's answer
 * asked as structured output (prompts/plan.schema.json), streamed answers
 * into the step's reasoning, strict checks on what comes back (the
 * planner's JSON, repaired where that is safe; the coder's single fenced
 * CUDA block under the plan's launch contract and the reviewers' resource
 * wishes), send-backs that quote the precise problem, and the expert
 * backend doing the step -- saying so -- when the model gives nothing
 * usable within the step's attempts, or for the rest of the run when the
 * endpoint cannot be reached. */
#include "agents/internal.h"
#include "agents/llm.h"
#include "gpu/contract.h"
#include "hardware/hardware.h"
#include "knowledge/knowledge.h"

#include <stdlib.h>
#include <string.h>

/* Answers a step may get from the model (the first and its send-backs)
 * before the expert backend does the step. */
#define AG_LLM_ATTEMPTS 3

typedef struct llm_job {
    ag_run *r;
    int step_id;
    int attempt;        /* 1, 2, ... AG_LLM_ATTEMPTS */
    cJSON *messages;    /* the conversation so far */
    cJSON *format;      /* response_format asked, or NULL */
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

/* The target GPU from its hardware spec: what a kernel must fit in and
 * the peaks it is measured against. */
static void hardware_slot(ag_run *r, dt_buf *b)
{
    hw_spec *g = ag_run_hw(r);
    if (g == NULL) {
        dt_buf_printf(b, "%s, compute capability %s (no hardware spec loaded)",
                      r->gpu_name[0] ? r->gpu_name : "no GPU here (compile only)",
                      r->cc[0] ? r->cc : "9.0");
        return;
    }
    dt_buf_printf(b, "%s (%s, compute capability %d.%d)%s\n", g->full_name, g->arch, g->cc_major,
                  g->cc_minor, r->have_gpu ? "" : "; not present here: compile only");
    dt_buf_printf(b, "- %d SMs at %.0f MHz; %s %.0f GB, %.0f GB/s (datasheet)%s; L2 %.0f MB\n",
                  g->sm_count, g->boost_clock_mhz, g->mem_type, g->mem_size_gb,
                  g->mem_bandwidth_gbs, g->measured_bandwidth_gbs > 0 ? ", measured" : "",
                  (double)g->l2_bytes / (1024.0 * 1024.0));
    if (g->measured_bandwidth_gbs > 0)
        dt_buf_printf(b, "- measured bandwidth %.0f GB/s\n", g->measured_bandwidth_gbs);
    dt_buf_printf(b, "- per block: at most %d threads, %d B shared memory (%d B with the "
                     "opt-in), %d registers; per thread at most %d registers\n",
                  g->max_threads_per_block, g->smem_per_block, g->smem_per_block_optin,
                  g->regs_per_block, g->regs_per_thread);
    dt_buf_printf(b, "- per SM: %d registers, %d B shared memory, %d threads, %d warps, %d "
                     "blocks; warp size %d\n",
                  g->regs_per_sm, g->smem_per_sm, g->max_threads_per_sm, g->max_warps_per_sm,
                  g->max_blocks_per_sm, g->warp_size);
    dt_buf_puts(b, "- peaks (TFLOP/s):");
    for (int t = 0; t < HW_NDTYPES; t++)
        if (g->peak_tflops[t] > 0)
            dt_buf_printf(b, " %s %.1f", hw_dtype_name((hw_dtype)t), g->peak_tflops[t]);
    dt_buf_puts(b, "\n- SpMV and SpMM are bandwidth-bound: bytes per nonzero and coalesced "
                   "gathers of x or B decide; L2 reuse matters when x or B fits in it\n");
    hw_spec_free(g);
}

/* Approved knowledge for this problem, best match first: the entries whose
 * feature ranges hold on this matrix rank first (kb_retrieve). Error
 * explanations only when there is an error: those whose pattern occurs in
 * errors (NULL: none). */
static void knowledge_slot(ag_run *r, const char *errors, dt_buf *k)
{
    if (r->o.kb == NULL)
        return;
    cJSON *f = ag_features(r->report, &r->spec);
    cJSON *kbs = kb_retrieve(r->o.kb, NULL, sp_op_name(r->spec.op), sp_dtype_name(r->spec.dtype),
                             r->cc[0] ? r->cc : NULL, f, 0);
    cJSON_Delete(f);
    int n = 0;
    const cJSON *en;
    cJSON_ArrayForEach(en, kbs)
    {
        const char *kind = dt_json_str(en, "kind", "");
        if (dt_streq(kind, "error-explanation")) {
            const char *pat = dt_json_str(cJSON_GetObjectItem(en, "parameters"), "pattern", NULL);
            if (errors == NULL || pat == NULL || *pat == '\0' || strstr(errors, pat) == NULL)
                continue;
        } else if (n >= 8 || dt_json_num(en, "distance", 1) > 0) {
            continue; /* the best eight that apply, no near misses */
        } else {
            n++;
        }
        dt_buf_printf(k, "- [%s] %s: %s\n", dt_json_str(en, "id", ""), dt_json_str(en, "title", ""),
                      dt_json_str(en, "content", ""));
    }
    cJSON_Delete(kbs);
}

/* What the last measured version did. */
static void measured_slot(ag_run *r, dt_buf *b)
{
    for (int i = r->nsteps - 1; i >= 0; i--) {
        const ag_step *s = r->steps[i];
        if (s->kind != AG_MEASURE || s->artifact == NULL || !s->ok)
            continue;
        dt_buf_printf(b, "v%d (%s): %.2f us, %.0f GB/s, %.2fx the best cuSPARSE algorithm; %s",
                      r->kernel_version, dt_json_str(r->plan, "strategy", "?"),
                      dt_json_num(s->artifact, "us", 0), dt_json_num(s->artifact, "gbps", 0),
                      dt_json_num(s->artifact, "speedup", 0),
                      dt_json_str(s->artifact, "diagnosis", ""));
        return;
    }
    if (r->best)
        dt_buf_printf(b, "best so far v%d: %.2f us, %.2fx", (int)dt_json_num(r->best, "version", 0),
                      dt_json_num(r->best, "us", 0), dt_json_num(r->best, "speedup", 0));
}

static void common_slots(ag_run *r, cJSON *slots, const char *errors)
{
    char task[512];
    snprintf(task, sizeof task,
             "%s in %s on %s (n = %d, alpha = %g, beta = %g, epilogue %s); goal: faster than the "
             "best cuSPARSE algorithm, verified",
             sp_op_name(r->spec.op), sp_dtype_name(r->spec.dtype), r->spec.matrix, r->spec.n,
             r->spec.alpha, r->spec.beta, sp_epilogue_name(r->spec.epilogue));
    dt_json_set_str(slots, "task", task);
    dt_buf b = DT_BUF_INIT;
    hardware_slot(r, &b);
    dt_json_set_str(slots, "hardware", b.data);
    dt_buf_reset(&b);
    char *rep = dt_json_print(r->report, 0);
    dt_json_set_str(slots, "report", rep);
    free(rep);
    knowledge_slot(r, errors, &b);
    dt_json_set_str(slots, "knowledge", dt_buf_str(&b));
    dt_buf_reset(&b);
    dt_json_set_str(slots, "reasons", dt_buf_str(&r->reasons));
    measured_slot(r, &b);
    dt_json_set_str(slots, "measured", dt_buf_str(&b));
    dt_buf_free(&b);
}

/* text with numbered lines ("  12 | ..."), the way compiler messages count. */
static char *numbered(const char *text)
{
    dt_buf b = DT_BUF_INIT;
    int n = 1;
    const char *p = text;
    while (*p) {
        size_t l = strcspn(p, "\n");
        dt_buf_printf(&b, "%4d | %.*s\n", n++, (int)l, p);
        p += l;
        if (*p == '\n')
            p++;
    }
    return dt_buf_take(&b);
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

/* The request as the session records it: the messages (the prompt) and
 * whether structured output was asked. */
static void record_request(llm_job *j, ag_step *s)
{
    cJSON *e = dt_json_obj();
    dt_json_set_int(e, "seq", 0);
    dt_json_set_num(e, "t", 0);
    dt_json_set_str(e, "type", "llm_request");
    dt_json_set_int(e, "step", s->id);
    dt_json_set_int(e, "attempt", j->attempt);
    dt_json_set_bool(e, "structured", j->format != NULL);
    dt_json_set_take(e, "messages", cJSON_Duplicate(j->messages, 1));
    ag_emit(j->r, e);
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
    cJSON_Delete(j->format);
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

/* Token counts are what the server reports; say so when it reports none
 * (llama-cpp-python's server streams without usage), rather than guess. */
static void say_usage(llm_job *j, ag_step *s, const llm_result *res)
{
    if (res->ok && !res->cached && res->tokens_in == 0 && res->tokens_out == 0)
        ag_text(j->r, s, "\n[ditto] The endpoint reported no token usage for this answer: the "
                         "step's token counts leave it out.\n");
}

/* The model gave nothing usable within the step's attempts: the expert
 * backend does this step (only this one), and says so. */
static void step_fallback(llm_job *j, ag_step *s, const char *problem)
{
    ag_run *r = j->r;
    ag_text(r, s, "\n[ditto] The model gave no usable answer in %d attempts (the last: %s): the "
                  "expert backend does this step; the model is asked again at the next one.\n",
            j->attempt, problem);
    ag_log(r, "warning", "LLM %s: no usable answer in %d attempts: the expert backend did it",
           ag_kind_name(s->kind), j->attempt);
    if (s->kind == AG_PLAN)
        ag_expert_plan(r, s);
    else
        ag_expert_generate(r, s);
}

/* Send the problem back with what was wrong, quoted; after the step's
 * attempts the expert backend does the step. */
static void send_back(llm_job *j, ag_step *s, const char *problem, llm_done_fn *done)
{
    if (j->attempt >= AG_LLM_ATTEMPTS) {
        step_fallback(j, s, problem);
        job_free(j);
        return;
    }
    ag_text(j->r, s, "\n[ditto] The answer was refused: %s. Asking again (attempt %d of %d).\n",
            problem, j->attempt + 1, AG_LLM_ATTEMPTS);
    cJSON *a = dt_json_obj();
    dt_json_set_str(a, "role", "assistant");
    dt_json_set_str(a, "content", dt_buf_str(&j->answer));
    cJSON_AddItemToArray(j->messages, a);
    cJSON *u = dt_json_obj();
    char msg[2048];
    snprintf(msg, sizeof msg, "Your answer could not be used: %s. Answer again, in the required "
                              "format and nothing else.",
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

/* The first JSON object of an answer (models like to wrap it in prose or
 * a code fence): from its '{' to the brace that closes it, strings
 * respected. NULL when there is no '{' or it is never closed (*open set). */
static char *json_object(const char *answer, int *open)
{
    *open = 0;
    const char *b = strchr(answer, '{');
    if (b == NULL)
        return NULL;
    int depth = 0, in_str = 0;
    for (const char *p = b; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1])
                p++;
            else if (*p == '"')
                in_str = 0;
        } else if (*p == '"') {
            in_str = 1;
        } else if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (--depth == 0)
                return dt_xstrndup(b, (size_t)(p - b + 1));
        }
    }
    *open = 1;
    return NULL;
}

/* Repairs that cannot change what the model meant: commas before a closing
 * bracket, // comments, Python's True/False/None. Outside strings only.
 * Caller frees; what was repaired into did. */
static char *json_repair(const char *text, dt_buf *did)
{
    dt_buf o = DT_BUF_INIT;
    int in_str = 0, commas = 0, comments = 0, words = 0;
    for (const char *p = text; *p; p++) {
        if (in_str) {
            if (*p == '\\' && p[1]) {
                dt_buf_append(&o, p, 2);
                p++;
                continue;
            }
            if (*p == '"')
                in_str = 0;
            dt_buf_append(&o, p, 1);
            continue;
        }
        if (*p == '"') {
            in_str = 1;
        } else if (*p == ',') {
            const char *q = p + 1;
            while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
                q++;
            if (*q == '}' || *q == ']') {
                commas++;
                continue;
            }
        } else if (p[0] == '/' && p[1] == '/') {
            while (*p && *p != '\n')
                p++;
            comments++;
            if (*p == '\0')
                break;
        } else if (!((p > text) && (p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') ||
                                    (p[-1] >= 'A' && p[-1] <= 'Z')))) {
            static const char *py[][2] = {{"True", "true"}, {"False", "false"}, {"None", "null"}};
            int hit = 0;
            for (int i = 0; i < 3 && !hit; i++) {
                size_t l = strlen(py[i][0]);
                if (strncmp(p, py[i][0], l) == 0) {
                    dt_buf_puts(&o, py[i][1]);
                    p += l - 1;
                    words++;
                    hit = 1;
                }
            }
            if (hit)
                continue;
        }
        dt_buf_append(&o, p, 1);
    }
    if (commas)
        dt_buf_printf(did, "%d trailing comma(s) removed", commas);
    if (comments)
        dt_buf_printf(did, "%s%d comment(s) removed", did->len ? ", " : "", comments);
    if (words)
        dt_buf_printf(did, "%sTrue/False/None written as JSON", did->len ? ", " : "");
    return dt_buf_take(&o);
}

static void check_plan(llm_job *j, ag_step *s, const char *answer)
{
    ag_run *r = j->r;
    int open = 0;
    char *obj = json_object(answer, &open);
    if (obj == NULL) {
        send_back(j, s,
                  open ? "the JSON object is never closed (the answer stops inside it)"
                       : "no JSON object in the answer",
                  plan_done);
        return;
    }
    dt_err je = {0};
    cJSON *j0 = dt_json_parse(obj, strlen(obj), "answer", &je);
    if (j0 == NULL) {
        dt_buf did = DT_BUF_INIT;
        char *fixed = json_repair(obj, &did);
        dt_err re = {0};
        j0 = did.len ? dt_json_parse(fixed, strlen(fixed), "answer", &re) : NULL;
        if (j0)
            ag_text(r, s, "\n[ditto] The JSON did not parse (%s); repaired: %s.\n", je.msg,
                    did.data);
        free(fixed);
        dt_buf_free(&did);
    }
    free(obj);
    if (j0 == NULL) {
        char msg[700];
        snprintf(msg, sizeof msg, "the JSON does not parse: %s", je.msg);
        send_back(j, s, msg, plan_done);
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
        dt_buf dropped = DT_BUF_INIT;
        cJSON_ArrayForEach(p, cJSON_GetObjectItem(dec, "params"))
        {
            double v;
            if (cJSON_GetObjectItem(cJSON_GetObjectItem(cc, "space"), p->string) == NULL) {
                /* a name the strategy does not have: its default stays */
                dt_buf_printf(&dropped, "%s%s", dropped.len ? ", " : "", p->string);
                continue;
            }
            if (cJSON_IsNumber(p))
                dt_json_set_num(cJSON_GetObjectItem(cc, "params"), p->string, p->valuedouble);
            else if (cJSON_IsString(p) && dt_parse_double(p->valuestring, &v) == 0)
                dt_json_set_num(cJSON_GetObjectItem(cc, "params"), p->string, v);
            else
                dt_buf_printf(&probs, "$.decision.params.%s: expected an integer; ", p->string);
        }
        if (dropped.len)
            ag_text(r, s, "\n[ditto] %s has no parameter %s: left out (the template's defaults "
                          "stay).\n",
                    strat, dropped.data);
        dt_buf_free(&dropped);
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
        size_t ml = strlen(msg);
        while (ml > 0 && (msg[ml - 1] == ' ' || msg[ml - 1] == ';'))
            msg[--ml] = '\0'; /* the list's last separator */
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
    say_usage(j, s, res);
    if (!res->ok) {
        if (dt_streq(res->error, "cancelled")) {
            job_free(j);
            return;
        }
        if (j->format && j->answer.len == 0 &&
            (dt_streq(res->error, "bad_request") ||
             (res->message && strstr(res->message, "response_format")))) {
            /* Endpoints differ: OpenAI, vLLM and llama.cpp's own server take
             * {"type": "json_schema", ...}; llama-cpp-python's takes
             * {"type": "json_object", "schema": ...}; some take neither. */
            const char *was = dt_json_str(j->format, "type", "");
            cJSON *next = NULL;
            if (dt_streq(was, "json_schema")) {
                next = dt_json_obj();
                dt_json_set_str(next, "type", "json_object");
                dt_json_set_take(next, "schema",
                                 cJSON_Duplicate(cJSON_GetObjectItem(
                                                     cJSON_GetObjectItem(j->format, "json_schema"),
                                                     "schema"),
                                                 1));
            }
            ag_text(r, s, "\n[ditto] The endpoint refused response_format \"%s\" (%s): asking "
                          "again %s.\n",
                    was, res->message ? res->message : "bad request",
                    next ? "with \"json_object\" and the schema" : "without structured output");
            r->llm_format = next ? 1 : 2;
            cJSON_Delete(j->format);
            j->format = next;
            send(j, plan_done);
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
    ag_step *s = job_step(j);
    if (s)
        record_request(j, s);
    j->r->llm_request = llm_submit_format(cl, j->messages, j->format, on_delta, done, j);
}

/* The planner's answer as structured output: prompts/plan.schema.json with
 * the candidates' strategies as the only choices. NULL when the file is
 * missing or bad (the prompt still says the format). */
static cJSON *plan_format(ag_run *r, ag_step *s)
{
    if (r->llm_format == 2 || r->o.llm_config == NULL ||
        ((llm_config *)r->o.llm_config)->api != LLM_OPENAI)
        return NULL;
    dt_err e = {0};
    char *text = load_prompt("plan.schema.json", &e);
    cJSON *schema = text ? dt_json_parse(text, strlen(text), "prompts/plan.schema.json", &e) : NULL;
    free(text);
    if (schema == NULL) {
        ag_text(r, s, "[ditto] No structured output: %s.\n", e.msg);
        return NULL;
    }
    cJSON *strat = cJSON_GetObjectItem(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(schema, "properties"), "decision"),
            "properties"),
        "strategy");
    if (strat) {
        cJSON *names = dt_json_arr();
        const cJSON *c;
        cJSON_ArrayForEach(c, r->candidates)
            cJSON_AddItemToArray(names, cJSON_CreateString(dt_json_str(c, "strategy", "")));
        dt_json_set_take(strat, "enum", names);
    }
    /* the parameters any candidate has, as integers, and no others */
    cJSON *params = cJSON_GetObjectItem(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(schema, "properties"), "decision"),
            "properties"),
        "params");
    if (params) {
        cJSON *props = dt_json_obj();
        const cJSON *c, *p;
        cJSON_ArrayForEach(c, r->candidates)
            cJSON_ArrayForEach(p, cJSON_GetObjectItem(c, "space"))
                if (cJSON_GetObjectItem(props, p->string) == NULL) {
                    cJSON *t = dt_json_obj();
                    dt_json_set_str(t, "type", "integer");
                    dt_json_set_take(props, p->string, t);
                }
        dt_json_set_take(params, "properties", props);
        cJSON_DeleteItemFromObject(params, "additionalProperties");
        dt_json_set_bool(params, "additionalProperties", 0);
    }
    cJSON *f = dt_json_obj();
    if (r->llm_format == 1) {
        dt_json_set_str(f, "type", "json_object");
        dt_json_set_take(f, "schema", schema);
        return f;
    }
    dt_json_set_str(f, "type", "json_schema");
    cJSON *js = dt_json_obj();
    dt_json_set_str(js, "name", "plan");
    dt_json_set_take(js, "schema", schema);
    dt_json_set_take(f, "json_schema", js);
    return f;
}

void ag_llm_plan(ag_run *r, ag_step *s)
{
    dt_err e = {0};
    if (r->candidates == NULL) {
        r->candidates = ag_rank_templates(r->report, &r->spec, r->cc, r->o.kb, &e);
        if (r->candidates)
            ag_narrow_spaces(r, s);
    }
    char *tmpl = load_prompt("planner.txt", &e);
    if (r->candidates == NULL || tmpl == NULL) {
        free(tmpl);
        ag_complete(r, s, NULL, 0, e.msg);
        return;
    }
    cJSON *slots = dt_json_obj();
    common_slots(r, slots, NULL);
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
    j->format = plan_format(r, s);
    free(prompt);
    ag_text(r, s, "Asking the LLM to plan (layered: factors, trade-offs, decision)%s.\n",
            j->format ? ", as structured output (prompts/plan.schema.json)" : "");
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
    if (ag_wishes_refuse(r, src, why, sizeof why)) {
        free(src);
        send_back(j, s, why, gen_done);
        return;
    }
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
    say_usage(j, s, res);
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
    const char *fb = dt_json_str(s->inputs, "feedback", NULL);
    common_slots(r, slots, fb);
    /* The code the feedback is about, numbered as the compiler numbers it. */
    if (fb && r->source) {
        int v = 0;
        for (int i = r->nsteps - 1; i >= 0 && v == 0; i--)
            if (r->steps[i] != s && r->steps[i]->kind == AG_GENERATE &&
                (r->steps[i]->status == AG_APPROVED || r->steps[i]->status == AG_EDITED))
                v = r->steps[i]->version;
        char *num = numbered(r->source);
        char *head = dt_xasprintf("kernel_v%d.cu, the version the feedback is about:\n%s", v, num);
        dt_json_set_str(slots, "code", head);
        free(head);
        free(num);
    }
    cJSON *pl = cJSON_Duplicate(r->plan, 1);
    cJSON_DeleteItemFromObject(pl, "llm");
    cJSON_DeleteItemFromObject(pl, "alternatives");
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
    int redacted = 0;
    if (dt_streq(what, "endpoint"))
        redacted = dt_url_redact(value, shown, sizeof shown);
    else
        snprintf(shown, sizeof shown, "%s", value);
    char msg[1200];
    snprintf(msg, sizeof msg, "%s switched to %s for the next steps", what, shown);
    dt_json_set_str(ev, "message", msg);
    dt_json_set_str(ev, "setting", what);
    dt_json_set_str(ev, "value", shown);
    dt_json_set_str(ev, "by", "person");
    if (redacted) /* resume cannot use the value: it says to give --endpoint again */
        dt_json_set_bool(ev, "redacted", 1);
    ag_emit(r, ev);
    return 0;
}
