/* model.c -- what the pipeline's events said, kept for drawing. */
#include "tui/internal.h"

#include <stdlib.h>
#include <string.h>

void tui_model_init(tui_model *m)
{
    memset(m, 0, sizeof *m);
    m->dirty = TUI_D_ALL;
}

static void step_clear(tui_step *s)
{
    dt_buf_free(&s->text);
    free(s->feedback);
    free(s->came_from);
    cJSON_Delete(s->artifact);
    free(s->reason);
}

void tui_model_clear(tui_model *m)
{
    for (int i = 0; i < m->nsteps; i++)
        step_clear(&m->steps[i]);
    free(m->steps);
    for (int i = 0; i < m->nrevs; i++)
        free(m->revs[i].source);
    free(m->revs);
    for (int i = 0; i < m->ndiags; i++) {
        free(m->diags[i].message);
        free(m->diags[i].hint);
    }
    free(m->diags);
    free(m->meas);
    cJSON_Delete(m->occupancy);
    cJSON_Delete(m->tune_best);
    cJSON_Delete(m->best);
    free(m->next_from);
    tui_model_init(m);
}

int tui_model_step_index(const tui_model *m, int id)
{
    for (int i = m->nsteps - 1; i >= 0; i--)
        if (m->steps[i].id == id)
            return i;
    return -1;
}

int tui_model_rev_for_step(const tui_model *m, int si)
{
    if (si >= 0 && si < m->nsteps && m->steps[si].rev >= 0)
        return m->steps[si].rev;
    return m->nrevs - 1;
}

static tui_step *step_of(tui_model *m, const cJSON *ev)
{
    int i = tui_model_step_index(m, dt_json_int(ev, "step", 0));
    return i < 0 ? NULL : &m->steps[i];
}

static void copy_str(char *dst, size_t n, const char *src)
{
    snprintf(dst, n, "%s", src ? src : "");
}

static void set_str(char **dst, const char *src)
{
    free(*dst);
    *dst = src ? dt_xstrdup(src) : NULL;
}

static tui_diag *new_diag(tui_model *m)
{
    if (m->ndiags == m->capdiags) {
        m->capdiags = m->capdiags ? 2 * m->capdiags : 32;
        m->diags = dt_xrealloc(m->diags, (size_t)m->capdiags * sizeof *m->diags);
    }
    tui_diag *d = &m->diags[m->ndiags++];
    memset(d, 0, sizeof *d);
    d->rev = m->nrevs - 1;
    m->dirty |= TUI_D_DIAG;
    return d;
}

void tui_model_log(tui_model *m, const char *level, const char *source, const char *msg)
{
    tui_diag *d = new_diag(m);
    d->is_log = 1;
    copy_str(d->severity, sizeof d->severity, level);
    copy_str(d->source, sizeof d->source, source);
    d->message = dt_xstrdup(msg ? msg : "");
}

static void on_session_started(tui_model *m, const cJSON *ev)
{
    const cJSON *spec = cJSON_GetObjectItem(ev, "spec");
    const cJSON *fp = cJSON_GetObjectItem(ev, "fingerprint");
    copy_str(m->session, sizeof m->session, dt_json_str(ev, "session", ""));
    copy_str(m->backend, sizeof m->backend,
             dt_json_str(ev, "backend", dt_json_str(spec, "backend", "")));
    if (dt_json_str(ev, "model", NULL))
        copy_str(m->model_name, sizeof m->model_name, dt_json_str(ev, "model", ""));
    copy_str(m->op, sizeof m->op, dt_json_str(spec, "op", ""));
    copy_str(m->dtype, sizeof m->dtype, dt_json_str(spec, "dtype", ""));
    copy_str(m->matrix, sizeof m->matrix, dt_json_str(spec, "matrix", ""));
    const cJSON *rv = cJSON_GetObjectItem(spec, "review");
    copy_str(m->review, sizeof m->review, cJSON_IsString(rv) ? rv->valuestring : "map");
    const char *sg = dt_json_str(spec, "gpu", "");
    copy_str(m->spec_gpu, sizeof m->spec_gpu, dt_streq(sg, "auto") ? "" : sg);
    const char *gpu = dt_json_str(fp, "gpu", "");
    copy_str(m->gpu, sizeof m->gpu, gpu);
    m->have_gpu = *gpu && !dt_streq(gpu, "none");
    m->started = 1;
    m->dirty |= TUI_D_STATUS | TUI_D_PERF;
}

static void on_step_started(tui_model *m, const cJSON *ev, char **came_from)
{
    if (m->nsteps == m->capsteps) {
        m->capsteps = m->capsteps ? 2 * m->capsteps : 16;
        m->steps = dt_xrealloc(m->steps, (size_t)m->capsteps * sizeof *m->steps);
    }
    tui_step *s = &m->steps[m->nsteps++];
    memset(s, 0, sizeof *s);
    s->id = dt_json_int(ev, "step", 0);
    copy_str(s->kind, sizeof s->kind, dt_json_str(ev, "kind", "?"));
    s->version = dt_json_int(ev, "version", 1);
    copy_str(s->agent, sizeof s->agent, dt_json_str(ev, "agent", ""));
    copy_str(s->status, sizeof s->status, "running");
    s->ok = 1;
    s->t_start = dt_json_num(ev, "t", 0);
    s->feedback = NULL;
    set_str(&s->feedback, dt_json_str(cJSON_GetObjectItem(ev, "inputs"), "feedback", NULL));
    s->came_from = *came_from;
    *came_from = NULL;
    s->rev = dt_streq(s->kind, "generate") ? -1 : m->nrevs - 1;
    m->running = s->id;
    m->dirty_step = s->id;
    m->dirty |= TUI_D_STEPS | TUI_D_REASON | TUI_D_STATUS;
}

static void on_artifact(tui_model *m, const cJSON *ev)
{
    tui_step *s = step_of(m, ev);
    const char *name = dt_json_str(ev, "name", "");
    const cJSON *j = cJSON_GetObjectItem(ev, "json");
    if (s) {
        cJSON_Delete(s->artifact);
        s->artifact = j ? cJSON_Duplicate(j, 1) : NULL;
        if (j && !dt_json_bool(j, "ok", 1)) {
            s->ok = 0;
            set_str(&s->reason, dt_json_str(j, "why", NULL));
        }
        m->dirty_step = s->id;
        m->dirty |= TUI_D_REASON | TUI_D_STEPS;
    }
    const char *content = dt_json_str(ev, "content", NULL);
    if (dt_streq(name, "kernel") && content) {
        if (m->nrevs == m->caprevs) {
            m->caprevs = m->caprevs ? 2 * m->caprevs : 8;
            m->revs = dt_xrealloc(m->revs, (size_t)m->caprevs * sizeof *m->revs);
        }
        tui_rev *r = &m->revs[m->nrevs++];
        memset(r, 0, sizeof *r);
        r->version = dt_json_int(ev, "version", 0);
        r->edited = dt_json_bool(j, "edited", 0);
        r->step = s ? s->id : 0;
        r->source = dt_xstrdup(content);
        snprintf(r->label, sizeof r->label, "v%d%s", r->version, r->edited ? " edited" : "");
        if (s)
            s->rev = m->nrevs - 1;
        m->dirty |= TUI_D_SOURCE;
    }
    const cJSON *occ = cJSON_GetObjectItem(j, "occupancy");
    if (cJSON_IsObject(occ)) {
        cJSON_Delete(m->occupancy);
        m->occupancy = cJSON_Duplicate(occ, 1);
        m->occ_compiled = dt_streq(name, "compile");
        m->occ_version = dt_json_int(ev, "version", 0);
        m->dirty |= TUI_D_PERF;
    }
    if (dt_streq(name, "tune") && cJSON_IsObject(cJSON_GetObjectItem(j, "best"))) {
        cJSON_Delete(m->tune_best);
        m->tune_best = cJSON_Duplicate(cJSON_GetObjectItem(j, "best"), 1);
        m->dirty |= TUI_D_PERF;
    }
}

static void on_diagnostic(tui_model *m, const cJSON *ev)
{
    tui_diag *d = new_diag(m);
    d->step = dt_json_int(ev, "step", 0);
    copy_str(d->severity, sizeof d->severity, dt_json_str(ev, "severity", "note"));
    copy_str(d->source, sizeof d->source, dt_json_str(ev, "source", ""));
    copy_str(d->id, sizeof d->id, dt_json_str(ev, "id", ""));
    d->line = dt_json_int(ev, "line", 0);
    d->message = dt_xstrdup(dt_json_str(ev, "message", ""));
    const char *hint = dt_json_str(ev, "hint", NULL);
    d->hint = hint ? dt_xstrdup(hint) : NULL;
}

static void on_measurement(tui_model *m, const cJSON *ev)
{
    const cJSON *j = cJSON_GetObjectItem(ev, "json");
    if (m->nmeas == m->capmeas) {
        m->capmeas = m->capmeas ? 2 * m->capmeas : 8;
        m->meas = dt_xrealloc(m->meas, (size_t)m->capmeas * sizeof *m->meas);
    }
    tui_meas *x = &m->meas[m->nmeas++];
    memset(x, 0, sizeof *x);
    x->step = dt_json_int(ev, "step", 0);
    x->version = m->nrevs > 0 ? m->revs[m->nrevs - 1].version : 0;
    x->us = dt_json_num(j, "us", 0);
    x->gbps = dt_json_num(j, "gbps", 0);
    x->gflops = dt_json_num(j, "gflops", 0);
    x->speedup = dt_json_num(j, "speedup", 0);
    x->flops = dt_json_num(j, "flops", 0);
    x->min_bytes = dt_json_num(j, "min_bytes", 0);
    copy_str(x->method, sizeof x->method, dt_json_str(j, "method", ""));
    const cJSON *b = cJSON_GetObjectItem(j, "baseline");
    copy_str(x->base_alg, sizeof x->base_alg, dt_json_str(b, "best", ""));
    x->base_us = dt_json_num(b, "us", 0);
    const cJSON *mt = cJSON_GetObjectItem(j, "metrics");
    const cJSON *mm = cJSON_GetObjectItem(mt, "metrics");
    x->metrics_available = cJSON_IsObject(mm);
    copy_str(x->metrics_reason, sizeof x->metrics_reason,
             dt_json_str(mt, "reason", mt ? "" : "not collected"));
    double rd = dt_json_num(mm, "dram__bytes_read.sum", 0);
    double wr = dt_json_num(mm, "dram__bytes_write.sum", 0);
    x->dram_bytes = rd + wr;
    x->achieved_occ = dt_json_num(mm, "sm__warps_active.avg.pct_of_peak_sustained_active", -1);
    x->l2_hit = dt_json_num(mm, "lts__t_sector_hit_rate.pct", -1);
    x->sm_pct = dt_json_num(mm, "sm__throughput.avg.pct_of_peak_sustained_elapsed", -1);
    copy_str(x->gpu, sizeof x->gpu, dt_json_str(cJSON_GetObjectItem(j, "roofline"), "gpu", ""));
    m->dirty |= TUI_D_PERF;
}

static void on_step_finished(tui_model *m, const cJSON *ev)
{
    tui_step *s = step_of(m, ev);
    if (s == NULL)
        return;
    const char *st = dt_json_str(ev, "status", "approved");
    s->ok = dt_json_bool(ev, "ok", s->ok);
    if (!s->ok && (dt_streq(st, "approved") || dt_streq(st, "edited")))
        st = "failed";
    copy_str(s->status, sizeof s->status, st);
    s->seconds = dt_json_num(ev, "seconds", 0);
    s->tokens_in = dt_json_i64(ev, "tokens_in", 0);
    s->tokens_out = dt_json_i64(ev, "tokens_out", 0);
    s->cost = dt_json_num(ev, "cost", 0);
    s->t_end = dt_json_num(ev, "t", 0);
    if (!dt_streq(s->kind, "generate") || s->rev < 0)
        s->rev = m->nrevs - 1;
    m->tokens_in += s->tokens_in;
    m->tokens_out += s->tokens_out;
    m->cost += s->cost;
    if (m->running == s->id)
        m->running = 0;
    if (m->awaiting == s->id)
        m->awaiting = 0;
    m->dirty_step = s->id;
    m->dirty |= TUI_D_STEPS | TUI_D_REASON | TUI_D_STATUS;
}

void tui_model_apply(tui_model *m, const cJSON *ev)
{
    const char *type = dt_json_str(ev, "type", "");
    m->nevents++;
    if (dt_json_num(ev, "t", 0) > m->last_t)
        m->last_t = dt_json_num(ev, "t", 0);
    if (dt_streq(type, "session_started")) {
        on_session_started(m, ev);
    } else if (dt_streq(type, "step_started")) {
        on_step_started(m, ev, &m->next_from);
    } else if (dt_streq(type, "text")) {
        m->retry_at = 0; /* the retry answered */
        tui_step *s = step_of(m, ev);
        if (s) {
            dt_buf_puts(&s->text, dt_json_str(ev, "text", ""));
            m->dirty_step = s->id;
            m->dirty |= TUI_D_REASON;
        }
    } else if (dt_streq(type, "artifact")) {
        on_artifact(m, ev);
    } else if (dt_streq(type, "diagnostic")) {
        on_diagnostic(m, ev);
    } else if (dt_streq(type, "measurement")) {
        on_measurement(m, ev);
    } else if (dt_streq(type, "awaiting_review")) {
        tui_step *s = step_of(m, ev);
        if (s) {
            copy_str(s->status, sizeof s->status, "awaiting review");
            m->awaiting = s->id;
            /* A failed step at its gate (EVENTS.md: "failed", "options"); a
             * session from before the field: its artifact said not ok. */
            s->gate_failed = dt_json_bool(ev, "failed", 0) ||
                             (!cJSON_GetObjectItem(ev, "failed") && s->artifact &&
                              !dt_json_bool(s->artifact, "ok", 1));
            s->gate_edit = 0;
            const cJSON *o;
            cJSON_ArrayForEach(o, cJSON_GetObjectItem(ev, "options"))
            {
                s->gate_edit |= cJSON_IsString(o) && dt_streq(o->valuestring, "edit");
            }
            if (s->gate_failed && !cJSON_GetObjectItem(ev, "options"))
                s->gate_edit = dt_streq(s->kind, "plan") || dt_streq(s->kind, "generate") ||
                               dt_streq(s->kind, "compile") || dt_streq(s->kind, "verify");
            const char *why = dt_json_str(ev, "why", NULL);
            if (s->gate_failed && why)
                set_str(&s->reason, why);
            m->dirty_step = s->id;
            m->dirty |= TUI_D_STEPS | TUI_D_REASON | TUI_D_STATUS;
        }
    } else if (dt_streq(type, "decision")) {
        tui_step *s = step_of(m, ev);
        if (s) {
            copy_str(s->decision, sizeof s->decision, dt_json_str(ev, "decision", ""));
            copy_str(s->decided_by, sizeof s->decided_by, dt_json_str(ev, "by", ""));
            const char *reason = dt_json_str(ev, "reason", NULL);
            if (reason)
                set_str(&s->reason, reason);
            if (m->awaiting == s->id)
                m->awaiting = 0;
            s->gate_failed = 0;
            m->dirty_step = s->id;
            m->dirty |= TUI_D_STEPS | TUI_D_REASON | TUI_D_STATUS;
        }
    } else if (dt_streq(type, "step_finished")) {
        m->retry_at = 0;
        on_step_finished(m, ev);
    } else if (dt_streq(type, "transition")) {
        const char *edge = dt_json_str(ev, "edge", NULL);
        char *t;
        if (edge)
            t = dt_xasprintf("%s (%s, iteration %d): %s", dt_json_str(ev, "from", "?"), edge,
                             dt_json_int(ev, "iteration", 0), dt_json_str(ev, "reason", ""));
        else
            t = dt_xasprintf("%s: %s", dt_json_str(ev, "from", "?"),
                             dt_json_str(ev, "reason", ""));
        free(m->next_from);
        m->next_from = t;
    } else if (dt_streq(type, "log")) {
        /* the brain in use: a fallback, or a person's switch */
        const char *be = dt_json_str(ev, "backend", NULL);
        const char *set = dt_json_str(ev, "setting", NULL);
        const char *val = dt_json_str(ev, "value", "");
        if (be) {
            copy_str(m->backend, sizeof m->backend, be);
            copy_str(m->fallback_why, sizeof m->fallback_why, dt_json_str(ev, "why", "?"));
        } else if (dt_streq(set, "backend")) {
            copy_str(m->backend, sizeof m->backend, val);
            m->fallback_why[0] = '\0';
        } else if (dt_streq(set, "model")) {
            copy_str(m->model_name, sizeof m->model_name, val);
        }
        if (cJSON_IsNumber(cJSON_GetObjectItem(ev, "retry_in_s"))) {
            m->retry_at = dt_json_num(ev, "t", 0) + dt_json_num(ev, "retry_in_s", 0);
            m->retry_attempt = (int)dt_json_num(ev, "attempt", 0);
            copy_str(m->retry_why, sizeof m->retry_why, dt_json_str(ev, "why", "error"));
        }
        if (be || set || m->retry_at > 0)
            m->dirty |= TUI_D_STATUS;
        tui_diag *d = new_diag(m);
        d->is_log = 1;
        d->step = dt_json_int(ev, "step", 0);
        copy_str(d->severity, sizeof d->severity, dt_json_str(ev, "level", "info"));
        copy_str(d->source, sizeof d->source, "log");
        d->message = dt_xstrdup(dt_json_str(ev, "message", ""));
    } else if (dt_streq(type, "session_finished")) {
        const cJSON *res = cJSON_GetObjectItem(ev, "result");
        m->finished = 1;
        m->exit_code = dt_json_int(res, "exit", 0);
        copy_str(m->finish_reason, sizeof m->finish_reason, dt_json_str(res, "reason", ""));
        cJSON_Delete(m->best);
        const cJSON *b = cJSON_GetObjectItem(res, "best");
        m->best = b ? cJSON_Duplicate(b, 1) : NULL;
        m->running = 0;
        m->awaiting = 0;
        m->dirty |= TUI_D_ALL;
    }
}
