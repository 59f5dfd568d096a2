/* reasoning.c -- the Reasoning pane: the selected step's agent text as it
 * streams, why the step ran, the rules behind a plan (links into the
 * knowledge base: the teaching path) and the review's outcome. */
#include "tui/ui.h"

#include <stdlib.h>
#include <string.h>

typedef struct wrapper {
    tui_lines *out;
    int role;
    const char *indent; /* before every piece but the first */
    int first;
    const char *link;   /* set on every piece (a rationale item) */
    tui_is_link_fn *is_link;
    void *ud;
} wrapper;

static int id_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '.' || c == '_' || c == '-';
}

/* The first token of a line that names a knowledge-base entry becomes the
 * line's link, underlined. */
static void find_link(tui_line *ln, tui_is_link_fn *is_link, void *ud)
{
    if (is_link == NULL)
        return;
    const char *t = ln->text;
    for (int i = 0; i < ln->len;) {
        if (!id_char(t[i])) {
            i++;
            continue;
        }
        int j = i;
        while (j < ln->len && id_char(t[j]))
            j++;
        /* ids have a dot inside; a sentence's final period is not part */
        int end = j;
        while (end > i && t[end - 1] == '.')
            end--;
        if (end - i > 3 && memchr(t + i, '.', (size_t)(end - i)) && end - i < 128) {
            char id[128];
            memcpy(id, t + i, (size_t)(end - i));
            id[end - i] = '\0';
            if (is_link(id, ud)) {
                tui_line_set_link(ln, id);
                tui_line_span(ln, i, end - i, TUI_R_LINK);
                return;
            }
        }
        i = j;
    }
}

static void piece(const char *s, int len, void *ud)
{
    wrapper *w = ud;
    dt_buf b = DT_BUF_INIT;
    if (!w->first && w->indent)
        dt_buf_puts(&b, w->indent);
    dt_buf_append(&b, s, (size_t)len);
    tui_line *ln = tui_lines_add(w->out, dt_buf_str(&b), (int)b.len, w->role);
    if (w->link) {
        tui_line_set_link(ln, w->link);
    } else {
        find_link(ln, w->is_link, w->ud);
    }
    w->first = 0;
    dt_buf_free(&b);
}

static void wrap(wrapper *w, const char *text, int width)
{
    int iw = w->indent ? (int)strlen(w->indent) : 0;
    w->first = 1;
    /* later pieces are indented, so wrap them narrower */
    tui_wrap(text, (int)strlen(text), width - iw > 10 ? width - iw : width, piece, w);
}

static void rationale(const tui_step *s, int width, tui_lines *out)
{
    const cJSON *r = cJSON_GetObjectItem(s->artifact, "rationale");
    if (!cJSON_IsArray(r) || cJSON_GetArraySize(r) == 0)
        return;
    tui_lines_add(out, "", 0, TUI_R_NORMAL);
    tui_lines_add(out, "Why: the rules behind this plan (Enter opens one)", -1, TUI_R_HEADING);
    const cJSON *it;
    cJSON_ArrayForEach(it, r)
    {
        const char *rule = dt_json_str(it, "rule", NULL);
        dt_buf b = DT_BUF_INIT;
        dt_buf_puts(&b, "- ");
        if (rule)
            dt_buf_printf(&b, "[%s] ", rule);
        dt_buf_puts(&b, dt_json_str(it, "text", ""));
        double sc = dt_json_num(it, "score", 0);
        if (sc != 0)
            dt_buf_printf(&b, " (score %+.0f)", sc);
        wrapper w = {.out = out, .role = rule ? TUI_R_NORMAL : TUI_R_DIM, .indent = "  ",
                     .link = rule};
        int first = out->n;
        wrap(&w, b.data, width);
        if (rule && first < out->n) {
            const char *t = out->v[first].text;
            const char *at = strstr(t, rule);
            if (at)
                tui_line_span(&out->v[first], (int)(at - t), (int)strlen(rule), TUI_R_LINK);
        }
        dt_buf_free(&b);
    }
}

/* A plan after an earlier one (a rejection, an edit, a new iteration):
 * what changed, as the lines of the two plans' JSON that differ. */
static void plan_diff(const tui_model *m, int si, tui_lines *out)
{
    const tui_step *s = &m->steps[si];
    const tui_step *prev = NULL;
    for (int i = si - 1; i >= 0 && prev == NULL; i--)
        if (dt_streq(m->steps[i].kind, "plan") && m->steps[i].artifact)
            prev = &m->steps[i];
    if (prev == NULL || s->artifact == NULL)
        return;
    char *a = dt_json_print(prev->artifact, 1);
    char *b = dt_json_print(s->artifact, 1);
    dt_diff d;
    dt_diff_text(a, b, &d);
    tui_lines_add(out, "", 0, TUI_R_NORMAL);
    if (d.ndel + d.nins == 0) {
        tui_lines_addf(out, TUI_R_DIM, "The plan is the same as plan v%d's (step %d)",
                       prev->version, prev->id);
    } else {
        tui_lines_addf(out, TUI_R_HEADING, "Changes from plan v%d (step %d): +%d -%d",
                       prev->version, prev->id, d.nins, d.ndel);
        int shown = 0;
        for (int i = 0; i < d.nops; i++) {
            const dt_diff_line *op = &d.ops[i];
            if (op->op == DT_DIFF_EQUAL)
                continue;
            if (shown++ == 40) {
                tui_lines_addf(out, TUI_R_DIM, "  ... %d more changed lines",
                               d.ndel + d.nins - 40);
                break;
            }
            int del = op->op == DT_DIFF_DELETE;
            const char *t = del ? d.a_line[op->a] : d.b_line[op->b];
            int len = del ? d.a_len[op->a] : d.b_len[op->b];
            dt_buf l = DT_BUF_INIT;
            dt_buf_puts(&l, del ? "- " : "+ ");
            dt_buf_append(&l, t, (size_t)len);
            tui_lines_add(out, l.data, (int)l.len, del ? TUI_R_DEL : TUI_R_ADD);
            dt_buf_free(&l);
        }
    }
    dt_diff_free(&d);
    free(a);
    free(b);
}

/* The streamed text from byte `from` (a paragraph's start) on, wrapped,
 * paragraph by paragraph; *last_off and *last_line (when not NULL) get
 * where the last paragraph -- the one new tokens extend -- starts, in the
 * text and in out. A text that ends in a newline has an empty last
 * paragraph at its end. */
static void reason_text(const tui_step *s, size_t from, int width, tui_is_link_fn *is_link,
                        void *ud, tui_lines *out, size_t *last_off, int *last_line)
{
    wrapper w = {.out = out, .role = TUI_R_NORMAL, .is_link = is_link, .ud = ud};
    const char *t = s->text.data;
    size_t len = s->text.len, p = from;
    size_t lo = from;
    int ll = out->n;
    while (p < len) {
        const char *nl = memchr(t + p, '\n', len - p);
        size_t end = nl ? (size_t)(nl - t) : len;
        lo = p;
        ll = out->n;
        if (end == p) {
            tui_lines_add(out, "", 0, TUI_R_NORMAL);
        } else {
            w.first = 1;
            tui_wrap(t + p, (int)(end - p), width, piece, &w);
        }
        p = nl ? end + 1 : len;
        if (nl && p == len) {
            lo = len;
            ll = out->n;
        }
    }
    if (last_off)
        *last_off = lo;
    if (last_line)
        *last_line = ll;
}

/* The step's outcome includes its errors: on a small terminal the
 * diagnostics pane may be hidden, and a failed compile must not look like
 * a quiet step. At most four, then how many more. */
static void step_errors(const tui_model *m, const tui_step *s, int width, wrapper *w)
{
    int n = 0;
    for (int i = 0; i < m->ndiags; i++) {
        const tui_diag *d = &m->diags[i];
        if (d->is_log || d->step != s->id || !dt_streq(d->severity, "error"))
            continue;
        if (n++ >= 4)
            continue;
        char *t = d->line > 0 ? dt_xasprintf("Error (%s, line %d): %s", d->source, d->line,
                                             d->message)
                              : dt_xasprintf("Error (%s): %s", d->source, d->message);
        /* a compiler's caret excerpt stays in Diagnostics: its first line */
        char *nl = strchr(t, '\n');
        if (nl)
            *nl = '\0';
        w->role = TUI_R_ERROR;
        wrap(w, t, width);
        free(t);
    }
    if (n > 4)
        tui_lines_addf(w->out, TUI_R_ERROR, "  and %d more errors: see Diagnostics", n - 4);
}

/* wrap, at most max lines; a text cut short ends in "..." (all of it is in
 * Diagnostics and in the step's text above). */
static void wrap_max(wrapper *w, const char *text, int width, int max)
{
    int before = w->out->n;
    wrap(w, text, width);
    if (w->out->n - before <= max)
        return;
    while (w->out->n > before + max) {
        tui_line *ln = &w->out->v[--w->out->n];
        free(ln->text);
        free(ln->spans);
        free(ln->link);
    }
    tui_line *last = &w->out->v[w->out->n - 1];
    int keep = tui_fit(last->text, last->len, width - 3 > 0 ? width - 3 : 0, &(int){0});
    char *t = dt_xasprintf("%.*s...", keep, last->text);
    free(last->text);
    last->text = t;
    last->len = (int)strlen(t);
    last->nspans = 0;
}

/* Line n (1-based) of a revision's source, without its newline, into out
 * ("" when there is none). */
static void rev_line(const tui_model *m, int rev, int n, char *out, size_t len)
{
    out[0] = '\0';
    if (rev < 0 || rev >= m->nrevs || n < 1 || m->revs[rev].source == NULL)
        return;
    const char *t = m->revs[rev].source;
    for (int i = 1; t && i < n; i++) {
        t = strchr(t, '\n');
        if (t)
            t++;
    }
    if (t == NULL)
        return;
    size_t l = strcspn(t, "\n");
    snprintf(out, len, "%.*s", (int)(l < len - 1 ? l : len - 1), t);
}

/* A step that failed at its gate: in place of "a approve ...", what failed
 * (each error's first lines and the source line it names) and what can be
 * done with it. It is the pane's last block, which the pane follows, so it
 * shows at every terminal size. */
static void failed_gate(const tui_model *m, const tui_step *s, int width, int live, wrapper *w)
{
    tui_lines_add(w->out, "", 0, TUI_R_NORMAL);
    int nerr = 0;
    for (int i = 0; i < m->ndiags; i++)
        nerr += !m->diags[i].is_log && m->diags[i].step == s->id &&
                dt_streq(m->diags[i].severity, "error");
    w->role = TUI_R_FAIL;
    if (nerr > 0) {
        char *t = dt_xasprintf("FAILED: %s v%d, %d error%s; it cannot be approved", s->kind,
                               s->version, nerr, nerr == 1 ? "" : "s");
        wrap(w, t, width);
        free(t);
    } else {
        char *t = dt_xasprintf("FAILED: %s v%d: %s; it cannot be approved", s->kind, s->version,
                               s->reason ? s->reason : "no reason given");
        wrap_max(w, t, width, 4);
        free(t);
    }
    int shown = 0, last_line = 0, last_rev = -2;
    for (int i = 0; i < m->ndiags && shown < 3; i++) {
        const tui_diag *d = &m->diags[i];
        if (d->is_log || d->step != s->id || !dt_streq(d->severity, "error"))
            continue;
        shown++;
        char *t = d->line > 0 ? dt_xasprintf("line %d: %s", d->line, d->message)
                              : dt_xasprintf("%s: %s", d->source, d->message);
        char *nl = strchr(t, '\n'); /* a compiler's caret excerpt stays in Diagnostics */
        if (nl)
            *nl = '\0';
        w->role = TUI_R_ERROR;
        wrap_max(w, t, width, 2);
        free(t);
        if (d->line > 0 && (d->line != last_line || d->rev != last_rev)) {
            char src[512];
            rev_line(m, d->rev, d->line, src, sizeof src);
            if (src[0]) {
                char *l = dt_xasprintf("  %5d | %s", d->line, src);
                tui_line *ln = tui_lines_add(w->out, l, -1, TUI_R_NORMAL);
                tui_line_span(ln, 0, 9, TUI_R_LINENO);
                free(l);
            }
        }
        last_line = d->line;
        last_rev = d->rev;
    }
    if (nerr > shown)
        tui_lines_addf(w->out, TUI_R_ERROR, "  and %d more: see Diagnostics", nerr - shown);
    w->role = TUI_R_AWAITING;
    if (!live) {
        wrap(w, "It failed at its gate: it could be sent back, edited or stopped, never approved",
             width);
        return;
    }
    int kernel = dt_streq(s->kind, "generate") || dt_streq(s->kind, "compile") ||
                 dt_streq(s->kind, "verify") || dt_streq(s->kind, "measure");
    wrap(w,
         kernel ? "r  send it back to the coder with your reason (the error goes with it)"
                : "r  send it back to the agent with your reason (the error goes with it)",
         width);
    if (s->gate_edit)
        wrap(w, dt_streq(s->kind, "plan") ? "e  edit the plan" : "e  edit the kernel yourself",
             width);
    wrap(w, "s  stop the run", width);
}

void tui_reason_build(const tui_model *m, int si, int width, int live, tui_is_link_fn *is_link,
                      void *ud, tui_lines *out)
{
    if (si < 0 || si >= m->nsteps) {
        tui_lines_add(out, m->started ? "no step yet" : "waiting for the session to start", -1,
                      TUI_R_DIM);
        return;
    }
    const tui_step *s = &m->steps[si];
    tui_lines_addf(out, TUI_R_HEADING, "%s v%d  %s  (step %d, %s)", s->kind, s->version,
                   s->agent, s->id, s->status);
    wrapper w = {.out = out, .indent = "  ", .is_link = is_link, .ud = ud};
    if (s->came_from) {
        /* The transition's reason is often the feedback itself (a
         * rejection's reason): say it once, as the feedback. */
        int keep = (int)strlen(s->came_from);
        const char *dup = s->feedback && *s->feedback ? strstr(s->came_from, s->feedback) : NULL;
        if (dup) {
            keep = (int)(dup - s->came_from);
            while (keep > 0 && strchr(" :\"'", s->came_from[keep - 1]))
                keep--;
        }
        if (keep > 0) {
            char *t = dt_xasprintf("after %.*s", keep, s->came_from);
            w.role = TUI_R_DIM;
            wrap(&w, t, width);
            free(t);
        }
    }
    if (s->feedback) {
        char *t = dt_xasprintf("Feedback: %s", s->feedback);
        w.role = TUI_R_WARNING;
        wrap(&w, t, width);
        free(t);
    }
    if (s->text.len)
        reason_text(s, 0, width, is_link, ud, out, NULL, NULL);
    else if (dt_streq(s->status, "running"))
        tui_lines_add(out, "...", -1, TUI_R_DIM);
    if (dt_streq(s->kind, "plan")) {
        rationale(s, width, out);
        plan_diff(m, si, out);
    }
    w.indent = "  ";
    int failed_gate_shown = dt_streq(s->status, "awaiting review") && s->gate_failed;
    if (failed_gate_shown) {
        failed_gate(m, s, width, live, &w);
    } else if (dt_streq(s->status, "awaiting review")) {
        tui_lines_add(out, "", 0, TUI_R_NORMAL);
        w.role = TUI_R_AWAITING;
        if (live) {
            int editable = dt_streq(s->kind, "plan") || dt_streq(s->kind, "generate");
            wrap(&w,
                 editable ? "Awaiting your review: a approve, e edit, r reject (with a reason "
                            "for the agent), A approve the rest"
                          : "Awaiting your review: a approve, r reject (with a reason for the "
                            "agent), A approve the rest",
                 width);
        } else {
            wrap(&w, "Awaiting review", width);
        }
    }
    if (s->decision[0]) {
        char *t = dt_xasprintf("Decision: %s by %s%s%s", s->decision, s->decided_by,
                               s->reason && !dt_streq(s->decision, "approve") ? ": " : "",
                               s->reason && !dt_streq(s->decision, "approve") ? s->reason : "");
        w.role = dt_streq(s->decision, "reject") ? TUI_R_REJECTED
                 : dt_streq(s->decision, "edit") ? TUI_R_EDITED
                                                  : TUI_R_OK;
        wrap(&w, t, width);
        free(t);
    }
    if (dt_streq(s->status, "failed") && s->reason) {
        char *t = dt_xasprintf("Failed: %s", s->reason);
        w.role = TUI_R_FAIL;
        wrap(&w, t, width);
        free(t);
    }
    if (!failed_gate_shown)
        step_errors(m, s, width, &w);
    if (s->t_end > 0) {
        dt_buf b = DT_BUF_INIT;
        dt_buf_printf(&b, "took %.2f s", s->seconds);
        if (s->tokens_in + s->tokens_out > 0)
            dt_buf_printf(&b, ", %ld tokens in, %ld out", s->tokens_in, s->tokens_out);
        if (s->cost > 0)
            dt_buf_printf(&b, ", $%.4f", s->cost);
        tui_lines_add(out, b.data, (int)b.len, TUI_R_DIM);
        dt_buf_free(&b);
    }
}

static int kb_has(const char *id, void *ud)
{
    return ud != NULL && kb_get(ud, id) != NULL;
}

/* While a step streams, only its text grows: re-wrap the last paragraph
 * and what came after it instead of everything, so a long LLM answer costs
 * each frame what it added, not what it holds. One reasoning pane. */
static struct {
    int valid;
    int step_id, width, nlines;
    size_t len, para_off;
    int para_line;
} inc;

static void build(tui_pane *p, tui_app *a, int width)
{
    int si = tui_app_sel(a);
    const tui_step *s = si >= 0 && si < a->model.nsteps ? &a->model.steps[si] : NULL;
    /* streaming: the text is the last thing the step shows (no artifact,
     * so no rationale; no decision; no time yet) */
    int notes = s && a->replay ? tui_replay_notes_for(a, s->id) : 0;
    int streaming = s && dt_streq(s->status, "running") && s->text.len > 0 && !s->decision[0] &&
                    s->artifact == NULL && s->t_end == 0 && notes == 0;
    if (streaming && inc.valid && inc.step_id == s->id && inc.width == width &&
        inc.nlines == p->lines.n && s->text.len > inc.len && inc.len > 0) {
        while (p->lines.n > inc.para_line) {
            tui_line *ln = &p->lines.v[--p->lines.n];
            free(ln->text);
            free(ln->spans);
            free(ln->link);
        }
        reason_text(s, inc.para_off, width, kb_has, a->k, &p->lines, &inc.para_off,
                    &inc.para_line);
    } else {
        tui_lines_clear(&p->lines);
        tui_reason_build(&a->model, si, width, !a->replay && a->run != NULL, kb_has, a->k,
                         &p->lines);
        /* a teacher's notes on this step, once the replay reached them */
        if (notes)
            tui_replay_note_lines(a, s->id, width, &p->lines);
        inc.valid = 0;
        if (streaming) {
            /* the text is last while streaming: find where it starts */
            tui_lines probe = {0};
            reason_text(s, 0, width, kb_has, a->k, &probe, &inc.para_off, &inc.para_line);
            inc.para_line += p->lines.n - probe.n;
            tui_lines_clear(&probe);
            inc.valid = 1;
        }
    }
    if (s) {
        inc.step_id = s->id;
        inc.len = s->text.len;
    }
    inc.width = width;
    inc.nlines = p->lines.n;
}

static int key(tui_pane *p, tui_app *a, int k)
{
    if (k == '\n' || k == '\r' || k == KEY_ENTER) {
        const char *link = NULL;
        if (p->cur >= 0 && p->cur < p->lines.n)
            link = p->lines.v[p->cur].link;
        /* no link under the cursor: the nearest one in view */
        for (int i = p->top; link == NULL && i < p->lines.n && i < p->top + tui_pane_rows(p); i++)
            if (p->lines.v[i].link) {
                link = p->lines.v[i].link;
                p->cur = i;
            }
        if (link)
            tui_app_open_entry(a, link);
        else
            tui_app_flash(a, 0, "no knowledge-base entry on this line");
        return 1;
    }
    return tui_pane_key(p, a, k);
}

static void note(tui_pane *p, tui_app *a, char *buf, size_t n)
{
    (void)p;
    int si = tui_app_sel(a);
    if (si >= 0 && si < a->model.nsteps)
        snprintf(buf, n, "step %d: %s v%d", a->model.steps[si].id, a->model.steps[si].kind,
                 a->model.steps[si].version);
}

const tui_pane_ops tui_reason_ops = {"Reasoning", 1, build, key, note};
