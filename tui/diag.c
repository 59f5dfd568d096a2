/* diag.c -- the Diagnostics pane: compiler, rule and verification messages
 * and the run's log; Enter shows a message's source line. */
#include "tui/ui.h"

#include <stdlib.h>
#include <string.h>

typedef struct dwrap {
    tui_lines *out;
    int role;
    int tag;
    int first;
    int head_len; /* the severity word's bytes, coloured on the first piece */
    int head_role;
} dwrap;

static void piece(const char *s, int len, void *ud)
{
    dwrap *w = ud;
    dt_buf b = DT_BUF_INIT;
    if (!w->first)
        dt_buf_puts(&b, "    ");
    dt_buf_append(&b, s, (size_t)len);
    tui_line *ln = tui_lines_add(w->out, b.data, (int)b.len, w->role);
    if (w->first && w->head_len > 0)
        tui_line_span(ln, 0, w->head_len, w->head_role);
    ln->tag = w->tag;
    w->first = 0;
    dt_buf_free(&b);
}

static int sev_role(const tui_diag *d)
{
    if (dt_streq(d->severity, "error"))
        return TUI_R_ERROR;
    if (dt_streq(d->severity, "warning"))
        return TUI_R_WARNING;
    return TUI_R_NOTE;
}

void tui_diag_build(const tui_model *m, int width, tui_lines *out)
{
    if (m->ndiags == 0) {
        tui_lines_add(out, "no diagnostics", -1, TUI_R_DIM)->tag = -1;
        return;
    }
    for (int i = 0; i < m->ndiags; i++) {
        const tui_diag *d = &m->diags[i];
        dt_buf b = DT_BUF_INIT;
        const char *sev = dt_streq(d->severity, "error") ? "error" : d->severity;
        dt_buf_printf(&b, "%s", sev);
        int head = (int)b.len;
        if (d->is_log) {
            dt_buf_printf(&b, " %s", d->source);
        } else {
            dt_buf_printf(&b, " %s", d->source);
            if (d->step)
                dt_buf_printf(&b, " step %d", d->step);
            if (d->rev >= 0 && d->rev < m->nrevs)
                dt_buf_printf(&b, " %s", m->revs[d->rev].label);
            if (d->line > 0)
                dt_buf_printf(&b, " line %d", d->line);
            if (d->id[0])
                dt_buf_printf(&b, " [%s]", d->id);
        }
        dt_buf_printf(&b, ": %s", d->message);
        /* a message may span lines (a compiler's caret excerpt) */
        /* about an older version than the latest: kept, but dimmed */
        int old = d->rev >= 0 && d->rev < m->nrevs - 1;
        dwrap w = {out, d->is_log || old ? TUI_R_DIM : TUI_R_NORMAL, i, 1, head, sev_role(d)};
        tui_wrap(b.data, (int)b.len, width - 4 > 10 ? width - 4 : width, piece, &w);
        if (d->hint && *d->hint) {
            char *t = dt_xasprintf("hint: %s", d->hint);
            dwrap hw = {out, TUI_R_DIM, i, 0, 0, 0};
            tui_wrap(t, (int)strlen(t), width - 4 > 10 ? width - 4 : width, piece, &hw);
            free(t);
        }
        dt_buf_free(&b);
    }
}

static void build(tui_pane *p, tui_app *a, int width)
{
    tui_lines_clear(&p->lines);
    tui_diag_build(&a->model, width, &p->lines);
}

static int key(tui_pane *p, tui_app *a, int k)
{
    if (k == '\n' || k == '\r' || k == KEY_ENTER) {
        if (p->cur < 0 || p->cur >= p->lines.n || p->lines.v[p->cur].tag < 0)
            return 1;
        const tui_diag *d = &a->model.diags[p->lines.v[p->cur].tag];
        if (d->line > 0 && d->rev >= 0)
            tui_app_jump_source(a, d->rev, d->line);
        else if (d->id[0] && a->k && kb_get(a->k, d->id))
            tui_app_open_entry(a, d->id);
        else
            tui_app_flash(a, 0, "this message names no source line");
        return 1;
    }
    return tui_pane_key(p, a, k);
}

void tui_diag_counts(const tui_model *m, int *err, int *warn, int *older_err)
{
    *err = *warn = *older_err = 0;
    int cur = m->nrevs - 1;
    for (int i = 0; i < m->ndiags; i++) {
        const tui_diag *d = &m->diags[i];
        if (d->is_log)
            continue;
        int is_err = dt_streq(d->severity, "error");
        /* a message about an earlier kernel version says nothing about
         * the current one (the plan's findings, rev -1, count while no
         * kernel exists) */
        if (d->rev >= 0 && d->rev < cur) {
            *older_err += is_err;
            continue;
        }
        *err += is_err;
        *warn += dt_streq(d->severity, "warning");
    }
}

static void note(tui_pane *p, tui_app *a, char *buf, size_t n)
{
    (void)p;
    int err, warn, older;
    tui_diag_counts(&a->model, &err, &warn, &older);
    const char *v = a->model.nrevs ? a->model.revs[a->model.nrevs - 1].label : NULL;
    if (err + warn)
        snprintf(buf, n, "%s%s%d error%s, %d warning%s", v ? v : "", v ? ": " : "", err,
                 err == 1 ? "" : "s", warn, warn == 1 ? "" : "s");
    else if (older && v)
        snprintf(buf, n, "%s: no errors (earlier: %d)", v, older);
}

const tui_pane_ops tui_diag_ops = {"Diagnostics", 1, build, key, note};
