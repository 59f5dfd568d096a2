/* status.c -- the status bar: the problem, the GPU, the brain, progress and
 * spend on one row; the keys that apply now (or a message) on the other. */
#include "tui/ui.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The status row's pieces in display order; when the row is too narrow the
 * least telling go first (prio low), so the run's state, the spend and the
 * step stay in view. */
typedef struct piece {
    char text[700];
    int prio;
    int glued; /* follows the previous piece after a blank, not a bar */
} piece;

static int add_piece(piece *p, int n, int prio, const char *fmt, ...) DT_PRINTF(4, 5);
static int add_piece(piece *p, int n, int prio, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p[n].text, sizeof p[n].text, fmt, ap);
    va_end(ap);
    p[n].prio = prio;
    p[n].glued = 0;
    return n + 1;
}

void tui_status_fit(const tui_model *m, int sel, int replay, int pos, int nev, int width,
                    dt_buf *out)
{
    piece p[12];
    int n = 0;
    if (replay)
        n = add_piece(p, n, 9, " replay %s  event %d/%d", m->session[0] ? m->session : "", pos,
                      nev);
    if (m->op[0]) {
        n = add_piece(p, n, 2, "%s %s", m->op, m->dtype);
        n = add_piece(p, n, 1, "%s", m->matrix);
        p[n - 1].glued = 1; /* "spmv fp32 MATRIX" reads as one */
    } else if (!replay) {
        n = add_piece(p, n, 2, "ditto");
    }
    if (m->started)
        n = add_piece(p, n, 3, "%s", m->have_gpu ? m->gpu : "no GPU: compile-only");
    if (m->backend[0] && m->fallback_why[0])
        n = add_piece(p, n, 5, "fell back to %s: %s", m->backend, m->fallback_why);
    else if (m->backend[0])
        n = add_piece(p, n, 5, "%s%s%s", m->backend,
                      m->model_name[0] && !dt_streq(m->backend, "expert") ? " " : "",
                      dt_streq(m->backend, "expert") ? "" : m->model_name);
    if (m->nsteps)
        n = add_piece(p, n, 6, "step %d/%d", sel >= 0 && sel < m->nsteps ? sel + 1 : m->nsteps,
                      m->nsteps);
    int ai = tui_model_step_index(m, m->awaiting);
    int ri = tui_model_step_index(m, m->running);
    /* while a step streams its usage is not known yet: an estimate from
     * what arrived (about 4 characters a token), marked as one */
    const tui_step *rs = ri >= 0 ? &m->steps[ri] : NULL;
    long est = rs && !m->finished && dt_streq(m->backend, "llm") &&
                       dt_streq(rs->status, "running") &&
                       (dt_streq(rs->kind, "plan") || dt_streq(rs->kind, "generate"))
                   ? (long)(rs->text.len + 3) / 4
                   : 0;
    if (est > 0 && m->price_out > 0)
        n = add_piece(p, n, 7, "%ld tok $%.4f, streaming ~%ld tok ~$%.4f",
                      m->tokens_in + m->tokens_out, m->cost, est, est * m->price_out / 1e6);
    else if (est > 0)
        n = add_piece(p, n, 7, "%ld tok $%.4f, streaming ~%ld tok", m->tokens_in + m->tokens_out,
                      m->cost, est);
    else
        n = add_piece(p, n, 7, "%ld tok $%.4f", m->tokens_in + m->tokens_out, m->cost);
    if (m->retry_at > 0 && !m->finished) {
        double left = m->retry_at - m->clock;
        n = add_piece(p, n, 8, "LLM %s, retry %d in %.0f s", m->retry_why,
                      m->retry_attempt + 1, left > 0 ? left + 0.49 : 0);
    }
    if (m->finished)
        n = add_piece(p, n, 8, "finished: %s", m->finish_reason);
    else if (ai >= 0 && m->steps[ai].gate_failed)
        n = add_piece(p, n, 8, "%s v%d FAILED: send back, %sor stop", m->steps[ai].kind,
                      m->steps[ai].version, m->steps[ai].gate_edit ? "edit " : "");
    else if (ai >= 0)
        n = add_piece(p, n, 8, "review %s v%d", m->steps[ai].kind, m->steps[ai].version);
    else if (ri >= 0)
        n = add_piece(p, n, 8, "running %s v%d", m->steps[ri].kind, m->steps[ri].version);
    else if (!m->started && !replay)
        n = add_piece(p, n, 8, "starting the worker");
    int keep[12];
    for (int i = 0; i < n; i++)
        keep[i] = 1;
    for (;;) {
        dt_buf b = DT_BUF_INIT;
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (!keep[i])
                continue;
            /* the replay piece carries its own separator */
            if (i == 0 && replay)
                dt_buf_printf(&b, "%s |", p[i].text);
            else if (k == 0 || (replay && k == 1) || (p[i].glued && keep[i - 1]))
                dt_buf_printf(&b, " %s", p[i].text);
            else
                dt_buf_printf(&b, " | %s", p[i].text);
            k++;
        }
        /* drop the least telling piece left, unless only the state remains */
        int drop = -1;
        int over = tui_str_width(b.data, (int)b.len) - width;
        if (over > 0)
            for (int i = 0; i < n; i++)
                if (keep[i] && p[i].prio < 8 && (drop < 0 || p[i].prio < p[drop].prio))
                    drop = i;
        /* a long matrix path is shortened (with an ellipsis) before it goes */
        int mlen = drop >= 0 ? (int)strlen(p[drop].text) : 0;
        if (drop >= 0 && p[drop].prio == 1 && mlen - over - 3 >= 12) {
            int cut = tui_fit(p[drop].text, mlen, mlen - over - 3, &(int){0});
            memcpy(p[drop].text + cut, "...", 4);
            dt_buf_free(&b);
            continue;
        }
        if (drop < 0) {
            dt_buf_append(out, b.data, b.len);
            dt_buf_free(&b);
            return;
        }
        keep[drop] = 0;
        dt_buf_free(&b);
    }
}

void tui_status_text(const tui_model *m, int sel, int replay, int pos, int nev, dt_buf *out)
{
    tui_status_fit(m, sel, replay, pos, nev, 1 << 20, out);
}

typedef struct keyitem {
    const char *key, *what;
} keyitem;

/* The keys that apply now, most important first: the row keeps what fits. */
static int keys_now(const tui_app *a, keyitem *k)
{
    int n = 0;
    int si = tui_model_step_index(&a->model, a->model.awaiting);
    if (a->modal == TUI_MODAL_KB) {
        k[n++] = (keyitem){"a", "approve"};
        k[n++] = (keyitem){"r", "reject"};
        k[n++] = (keyitem){"f", "all/proposed"};
        k[n++] = (keyitem){"Esc", "back"};
        return n;
    }
    if (a->modal == TUI_MODAL_TEXT || a->modal == TUI_MODAL_VERSIONS) {
        k[n++] = (keyitem){"arrows", "move"};
        k[n++] = (keyitem){"Esc", "close"};
        return n;
    }
    if (a->replay) {
        k[n++] = (keyitem){".", "next"};
        k[n++] = (keyitem){",", "back"};
        k[n++] = (keyitem){">", "next step"};
        k[n++] = (keyitem){"j", "jump"};
        k[n++] = (keyitem){"space", a->playing ? "pause" : "play"};
        k[n++] = (keyitem){"+-", "speed"};
        k[n++] = (keyitem){"m", "note"};
        k[n++] = (keyitem){"<", "step back"};
        k[n++] = (keyitem){"$", "end"};
    } else if (a->pend) {
        k[n++] = (keyitem){"u", "undo"};
    } else if (si >= 0 && a->run && a->model.steps[si].gate_failed) {
        /* a failed step is never approved: what can be done with it */
        k[n++] = (keyitem){"r", "send back"};
        if (a->model.steps[si].gate_edit)
            k[n++] = (keyitem){"e", "edit"};
        k[n++] = (keyitem){"s", "stop"};
    } else if (si >= 0 && a->run) {
        k[n++] = (keyitem){"a", "approve"};
        if (dt_streq(a->model.steps[si].kind, "plan") ||
            dt_streq(a->model.steps[si].kind, "generate"))
            k[n++] = (keyitem){"e", "edit"};
        k[n++] = (keyitem){"r", "reject"};
        if (dt_streq(a->model.steps[si].kind, "generate"))
            k[n++] = (keyitem){"x", "hunk"};
        k[n++] = (keyitem){"A", "approve rest"};
    }
    /* t only where a tune can run: a live run on a machine with a GPU */
    if (!a->replay && a->run && !a->model.finished && a->model.have_gpu)
        k[n++] = (keyitem){"t", "tune"};
    k[n++] = (keyitem){"Tab", "focus"};
    k[n++] = (keyitem){"k", "knowledge"};
    k[n++] = (keyitem){"v", "versions"};
    k[n++] = (keyitem){"/", "search"};
    k[n++] = (keyitem){"?", "help"};
    k[n++] = (keyitem){"q", "quit"};
    return n;
}

void tui_status_draw(tui_app *a)
{
    WINDOW *w = a->status_win;
    int h, cols;
    getmaxyx(w, h, cols);
    (void)h;
    werase(w);
    dt_buf b = DT_BUF_INIT;
    a->model.clock = a->replay ? a->model.last_t : dt_wall_now();
    tui_status_fit(&a->model, tui_app_sel(a), a->replay, a->pos, a->nev, cols, &b);
    if (a->replay) {
        /* how it plays, right after the position */
        char sp[48];
        snprintf(sp, sizeof sp, "  x%g%s", a->speed, a->playing ? " playing" : "");
        const char *bar = strchr(b.data, '|');
        size_t at = bar ? (size_t)(bar - b.data) - 1 : b.len;
        dt_buf c = DT_BUF_INIT;
        dt_buf_append(&c, b.data, at);
        dt_buf_puts(&c, sp);
        dt_buf_puts(&c, b.data + at);
        dt_buf_free(&b);
        b = c;
    }
    wattr_set(w, tui_attr(TUI_R_STATUS), tui_pair(TUI_R_STATUS), NULL);
    mvwhline(w, 0, 0, ' ', cols);
    tui_put_fit(w, 0, 0, b.data, (int)b.len, cols, tui_attr(TUI_R_STATUS),
                tui_pair(TUI_R_STATUS), a->utf8);
    dt_buf_free(&b);
    if (a->modal == TUI_MODAL_PROMPT || a->modal == TUI_MODAL_CONFIRM)
        return; /* the prompt owns the second row */
    if (a->pend) {
        /* the decision on its way, until the undo window closes */
        char t[160];
        tui_app_pending_text(a, t, sizeof t);
        wattr_set(w, tui_attr(TUI_R_AWAITING), tui_pair(TUI_R_AWAITING), NULL);
        mvwhline(w, 1, 0, ' ', cols);
        tui_put_fit(w, 1, 1, t, -1, cols - 1, tui_attr(TUI_R_AWAITING), tui_pair(TUI_R_AWAITING),
                    a->utf8);
        return;
    }
    if (a->flash[0] && dt_now() < a->flash_until) {
        int role = a->flash_alert ? TUI_R_STATUS_ALERT : TUI_R_NORMAL;
        wattr_set(w, tui_attr(role), tui_pair(role), NULL);
        mvwhline(w, 1, 0, ' ', cols);
        tui_put_fit(w, 1, 1, a->flash, -1, cols - 1, tui_attr(role), tui_pair(role), a->utf8);
        return;
    }
    keyitem k[24];
    int n = keys_now(a, k);
    /* what does not fit is said: an ellipsis and where the rest are */
    static const char more[] = " ? all keys";
    int ew = a->utf8 ? 1 : 3;
    int total = 1;
    for (int i = 0; i < n; i++)
        total += (int)strlen(k[i].key) + 1 + (int)strlen(k[i].what) + 2;
    int limit = total - 2 <= cols ? cols : cols - ew - (int)strlen(more);
    int x = 1, cut = 0;
    for (int i = 0; i < n; i++) {
        int need = (int)strlen(k[i].key) + 1 + (int)strlen(k[i].what);
        if (x + need > limit) {
            cut = 1;
            break;
        }
        x += tui_put(w, 1, x, k[i].key, (int)strlen(k[i].key), 0, cols - x,
                     tui_attr(TUI_R_STATUS_KEY), tui_pair(TUI_R_STATUS_KEY), a->utf8);
        x += 1;
        x += tui_put(w, 1, x, k[i].what, (int)strlen(k[i].what), 0, cols - x,
                     tui_attr(TUI_R_NORMAL), tui_pair(TUI_R_NORMAL), a->utf8);
        x += 2;
    }
    if (cut) {
        x -= 1;
        x += tui_put(w, 1, x, a->utf8 ? "\xe2\x80\xa6" : "...", a->utf8 ? 3 : 3, 0, cols - x,
                     tui_attr(TUI_R_NORMAL), tui_pair(TUI_R_NORMAL), a->utf8);
        tui_put_fit(w, 1, x, more, -1, cols - x, tui_attr(TUI_R_STATUS_KEY),
                    tui_pair(TUI_R_STATUS_KEY), a->utf8);
    }
}
