/* status.c -- the status bar: the problem, the GPU, the brain, progress and
 * spend on one row; the keys that apply now (or a message) on the other. */
#include "tui/ui.h"

#include <string.h>

void tui_status_text(const tui_model *m, int sel, int replay, int pos, int nev, dt_buf *out)
{
    if (replay)
        dt_buf_printf(out, " replay %s  event %d/%d |", m->session[0] ? m->session : "", pos, nev);
    if (m->op[0])
        dt_buf_printf(out, " %s %s %s", m->op, m->dtype, m->matrix);
    else if (!replay)
        dt_buf_puts(out, " ditto");
    if (m->started)
        dt_buf_printf(out, " | %s", m->have_gpu ? m->gpu : "no GPU: compile-only");
    if (m->backend[0])
        dt_buf_printf(out, " | %s%s%s", m->backend, m->model_name[0] ? " " : "", m->model_name);
    if (m->nsteps)
        dt_buf_printf(out, " | step %d/%d", sel >= 0 && sel < m->nsteps ? sel + 1 : m->nsteps,
                      m->nsteps);
    dt_buf_printf(out, " | %ld tok $%.4f", m->tokens_in + m->tokens_out, m->cost);
    int ai = tui_model_step_index(m, m->awaiting);
    int ri = tui_model_step_index(m, m->running);
    if (m->finished)
        dt_buf_printf(out, " | finished: %s", m->finish_reason);
    else if (ai >= 0)
        dt_buf_printf(out, " | review %s v%d", m->steps[ai].kind, m->steps[ai].version);
    else if (ri >= 0)
        dt_buf_printf(out, " | running %s v%d", m->steps[ri].kind, m->steps[ri].version);
    else if (!m->started && !replay)
        dt_buf_puts(out, " | starting the worker");
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
        k[n++] = (keyitem){"<", "step back"};
        k[n++] = (keyitem){"space", a->playing ? "pause" : "play"};
        k[n++] = (keyitem){"$", "end"};
    } else if (si >= 0 && a->run) {
        k[n++] = (keyitem){"a", "approve"};
        if (dt_streq(a->model.steps[si].kind, "plan") ||
            dt_streq(a->model.steps[si].kind, "generate"))
            k[n++] = (keyitem){"e", "edit"};
        k[n++] = (keyitem){"r", "reject"};
        k[n++] = (keyitem){"A", "approve rest"};
    }
    if (!a->replay && a->run && !a->model.finished)
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
    tui_status_text(&a->model, tui_app_sel(a), a->replay, a->pos, a->nev, &b);
    wattr_set(w, tui_attr(TUI_R_STATUS), tui_pair(TUI_R_STATUS), NULL);
    mvwhline(w, 0, 0, ' ', cols);
    tui_put(w, 0, 0, b.data, (int)b.len, 0, cols, tui_attr(TUI_R_STATUS), tui_pair(TUI_R_STATUS),
            a->utf8);
    dt_buf_free(&b);
    if (a->modal == TUI_MODAL_PROMPT || a->modal == TUI_MODAL_CONFIRM)
        return; /* the prompt owns the second row */
    if (a->flash[0] && dt_now() < a->flash_until) {
        int role = a->flash_alert ? TUI_R_STATUS_ALERT : TUI_R_NORMAL;
        wattr_set(w, tui_attr(role), tui_pair(role), NULL);
        mvwhline(w, 1, 0, ' ', cols);
        tui_put(w, 1, 1, a->flash, (int)strlen(a->flash), 0, cols - 1, tui_attr(role),
                tui_pair(role), a->utf8);
        return;
    }
    keyitem k[24];
    int n = keys_now(a, k);
    int x = 1;
    for (int i = 0; i < n; i++) {
        int need = (int)strlen(k[i].key) + 1 + (int)strlen(k[i].what) + 2;
        if (x + need > cols)
            break;
        x += tui_put(w, 1, x, k[i].key, (int)strlen(k[i].key), 0, cols - x,
                     tui_attr(TUI_R_STATUS_KEY), tui_pair(TUI_R_STATUS_KEY), a->utf8);
        x += 1;
        x += tui_put(w, 1, x, k[i].what, (int)strlen(k[i].what), 0, cols - x,
                     tui_attr(TUI_R_NORMAL), tui_pair(TUI_R_NORMAL), a->utf8);
        x += 2;
    }
}
