/* steps.c -- the Steps pane: the pipeline as a timeline, one line a step. */
#include "tui/ui.h"

#include <string.h>

static int status_role(const char *st)
{
    if (dt_streq(st, "running"))
        return TUI_R_RUNNING;
    if (dt_streq(st, "awaiting review"))
        return TUI_R_AWAITING;
    if (dt_streq(st, "edited"))
        return TUI_R_EDITED;
    if (dt_streq(st, "rejected"))
        return TUI_R_REJECTED;
    if (dt_streq(st, "failed"))
        return TUI_R_FAIL;
    return TUI_R_NORMAL;
}

static void reason_piece(const char *s, int len, void *ud)
{
    tui_lines_add(ud, s, len, TUI_R_DIM)->tag = -1;
}

/* Why the run ended, in its words: "compiled without a GPU: ...". */
static void wrap_reason(const char *reason, int width, tui_lines *out)
{
    if (reason && *reason)
        tui_wrap(reason, (int)strlen(reason), width, reason_piece, out);
}

void tui_steps_build(const tui_model *m, int width, int utf8, double now, int spin,
                     tui_lines *out)
{
    if (m->nsteps == 0) {
        tui_line *ln = tui_lines_add(out, m->finished ? "no steps ran" : "starting...", -1,
                                     TUI_R_DIM);
        ln->tag = -1;
        return;
    }
    for (int i = 0; i < m->nsteps; i++) {
        const tui_step *s = &m->steps[i];
        dt_buf b = DT_BUF_INIT;
        /* a failed step at its gate reads as failed, not as a quiet review */
        const char *g = tui_glyph_status(s->gate_failed ? "failed" : s->status, utf8, spin);
        /* most telling first: the kind, the time, the spend; the agent's
         * name (the kind's, in words) where room is left */
        if (width >= 26)
            dt_buf_printf(&b, "%s %2d %-8s v%-2d", g, s->id, s->kind, s->version);
        else
            dt_buf_printf(&b, "%s %-8s v%-2d", g, s->kind, s->version);
        if (dt_streq(s->status, "running")) {
            double age = now - s->t_start;
            dt_buf_printf(&b, " %6.1fs", age > 0 ? age : 0);
        } else if (dt_streq(s->status, "awaiting review")) {
            dt_buf_puts(&b, s->gate_failed ? "  FAILED" : "  review");
        } else {
            dt_buf_printf(&b, " %6.2fs", s->seconds);
        }
        long tok = s->tokens_in + s->tokens_out;
        int cols = tui_str_width(b.data, (int)b.len);
        if (tok > 0 && width - cols >= 11) {
            if (tok >= 10000)
                dt_buf_printf(&b, " %5.1fk tok", tok / 1000.0);
            else
                dt_buf_printf(&b, " %5ld tok", tok);
        }
        cols = tui_str_width(b.data, (int)b.len);
        if (s->cost > 0 && width - cols >= 8)
            dt_buf_printf(&b, " $%.3f", s->cost);
        cols = tui_str_width(b.data, (int)b.len);
        if (width - cols >= 8 && s->agent[0]) {
            /* a name that does not fit ends in an ellipsis, never mid-word
             * silently */
            int room = width - cols - 2, alen = (int)strlen(s->agent);
            dt_buf_puts(&b, "  ");
            if (tui_str_width(s->agent, alen) <= room) {
                dt_buf_puts(&b, s->agent);
            } else {
                int used;
                int nb = tui_fit(s->agent, alen, room - (utf8 ? 1 : 3), &used);
                dt_buf_append(&b, s->agent, (size_t)nb);
                dt_buf_puts(&b, utf8 ? "\xe2\x80\xa6" : "...");
            }
        }
        int role = s->gate_failed && dt_streq(s->status, "awaiting review")
                       ? TUI_R_FAIL
                       : status_role(s->status);
        tui_line *ln = tui_lines_add(out, b.data, (int)b.len, role);
        int glen = (int)strlen(g);
        if (dt_streq(s->status, "approved"))
            tui_line_span(ln, 0, glen, TUI_R_OK);
        ln->tag = i;
        dt_buf_free(&b);
    }
    if (m->finished) {
        tui_lines_add(out, "", 0, TUI_R_NORMAL)->tag = -1;
        tui_line *ln = tui_lines_addf(out, m->exit_code == 0 ? TUI_R_OK : TUI_R_WARNING,
                                      "finished (exit %d)", m->exit_code);
        ln->tag = -1;
        wrap_reason(m->finish_reason, width, out);
    }
}

static void build(tui_pane *p, tui_app *a, int width)
{
    tui_lines_clear(&p->lines);
    double now = a->replay ? a->model.last_t : dt_wall_now();
    tui_steps_build(&a->model, width, a->utf8, now, a->spin, &p->lines);
    p->cur = tui_app_sel(a);
}

static int key(tui_pane *p, tui_app *a, int k)
{
    if (k == '\n' || k == '\r' || k == KEY_ENTER) {
        tui_app_focus(a, TUI_P_REASON);
        return 1;
    }
    int before = p->cur;
    if (!tui_pane_key(p, a, k))
        return 0;
    /* the trailing "finished" lines are not steps */
    while (p->cur > 0 && p->cur < p->lines.n && p->lines.v[p->cur].tag < 0)
        p->cur--;
    if (p->cur != before && p->cur >= 0 && p->cur < p->lines.n && p->lines.v[p->cur].tag >= 0)
        tui_app_select(a, p->lines.v[p->cur].tag, p->lines.v[p->cur].tag == a->model.nsteps - 1);
    return 1;
}

static void note(tui_pane *p, tui_app *a, char *buf, size_t n)
{
    (void)p;
    if (a->model.nsteps > 0)
        snprintf(buf, n, "%d", a->model.nsteps);
}

const tui_pane_ops tui_steps_ops = {"Steps", 1, build, key, note};
