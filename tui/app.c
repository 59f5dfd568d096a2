/* app.c -- the workbench: layout, the one run loop (terminal, stderr and
 * resize pipes next to the workers and LLM streams), keys, overlays, the
 * editor round trip, replay, and drawing what is dirty once per loop turn.
 * Over 1,000 lines: the one run loop and the keys it dispatches share the
 * workbench's state; the panes themselves live in their own files. */
#include "tui/ui.h"

#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* The run's sink outlives the app (the run is freed after we return), so
 * the sink points here, not at the app; one workbench per process. */
static struct {
    tui_app *a;
} relay;

static const tui_pane_ops *const pane_ops[TUI_NPANES] = {
    [TUI_P_STEPS] = &tui_steps_ops, [TUI_P_REASON] = &tui_reason_ops,
    [TUI_P_SOURCE] = &tui_source_ops, [TUI_P_DIAG] = &tui_diag_ops, [TUI_P_PERF] = &tui_perf_ops};

static void relayout(tui_app *a);
static void sync_failed_gate(tui_app *a);
static void draw_editor(tui_app *a);
static void pend_stage(tui_app *a, ag_decision d, cJSON *art, const char *reason, int rest);

/* ---- small state helpers ------------------------------------------------------------- */

/* Whether a step failed (its artifact says not ok): it is never approved. */
static int step_failed(const ag_step *s)
{
    return !dt_json_bool(ag_step_artifact(s), "ok", 1);
}

void tui_app_mark(tui_app *a, unsigned dirty)
{
    if (dirty & TUI_D_STEPS)
        a->panes[TUI_P_STEPS].stale = 1;
    if (dirty & TUI_D_REASON)
        a->panes[TUI_P_REASON].stale = 1;
    if (dirty & TUI_D_SOURCE)
        a->panes[TUI_P_SOURCE].stale = 1;
    if (dirty & TUI_D_DIAG)
        a->panes[TUI_P_DIAG].stale = 1;
    if (dirty & TUI_D_PERF)
        a->panes[TUI_P_PERF].stale = 1;
    a->status_dirty = 1;
    if (a->modal != TUI_MODAL_NONE)
        a->mdirty = 1;
}

static long flash_expired(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    tui_app *a = ud;
    a->status_dirty = 1;
    a->flash_timer = 0;
    return DT_LOOP_NOMORE;
}

void tui_app_flash(tui_app *a, int alert, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(a->flash, sizeof a->flash, fmt, ap);
    va_end(ap);
    a->flash_alert = alert;
    a->flash_until = dt_now() + (alert ? 6.0 : 3.0);
    a->status_dirty = 1;
    /* one timer for the latest message; none once the app is closing (the
     * loop may outlive it) */
    if (a->flash_timer)
        dt_loop_del_timer(a->loop, a->flash_timer);
    a->flash_timer = a->closing ? 0 : dt_loop_add_timer(a->loop, alert ? 6010 : 3010,
                                                         flash_expired, a);
}

int tui_app_sel(const tui_app *a)
{
    if (a->model.nsteps == 0)
        return -1;
    if (a->sel_follow || a->sel < 0 || a->sel >= a->model.nsteps)
        return a->model.nsteps - 1;
    return a->sel;
}

void tui_app_select(tui_app *a, int si, int follow)
{
    a->sel = si;
    a->sel_follow = follow;
    a->src_mark = 0;
    a->panes[TUI_P_REASON].top = 0;
    a->panes[TUI_P_REASON].cur = 0;
    a->panes[TUI_P_REASON].follow = follow;
    tui_app_mark(a, TUI_D_REASON | TUI_D_SOURCE | TUI_D_STEPS);
    sync_failed_gate(a);
}

/* Whether the selected step is a failed step at its gate. */
static int failed_gate_shown(const tui_app *a)
{
    int si = tui_app_sel(a);
    return si >= 0 && a->model.steps[si].gate_failed &&
           dt_streq(a->model.steps[si].status, "awaiting review");
}

/* A failed gate shown, or no longer: the layout gives the reasoning pane
 * its room (tui_layout_give_reason) or takes it back. */
static void sync_failed_gate(tui_app *a)
{
    if (a->status_win != NULL && failed_gate_shown(a) != a->lay_failed)
        relayout(a);
}

/* A new failed gate: the source shows the line of its first error, marked
 * (the performance pane, if it held the shared slot, gives way to it). */
static void show_failed_gate(tui_app *a, int step_id)
{
    int si = tui_model_step_index(&a->model, step_id);
    if (si < 0 || !a->model.steps[si].gate_failed)
        return;
    for (int i = 0; i < a->model.ndiags; i++) {
        const tui_diag *d = &a->model.diags[i];
        if (d->is_log || d->step != step_id || !dt_streq(d->severity, "error") || d->line < 1)
            continue;
        a->src_mark = d->line;
        a->src_jump = d->line;
        break;
    }
    int slot = a->lay.slot[TUI_P_SOURCE];
    if (a->status_win != NULL && a->slot_pane[slot] == TUI_P_PERF) {
        a->slot_pane[slot] = TUI_P_SOURCE;
        relayout(a);
    }
    tui_app_mark(a, TUI_D_SOURCE | TUI_D_REASON);
}

void tui_app_src_pair(const tui_app *a, int *from, int *to)
{
    if (a->src_to >= 0 && a->src_to < a->model.nrevs) {
        *from = a->src_from;
        *to = a->src_to;
        return;
    }
    *to = tui_model_rev_for_step(&a->model, tui_app_sel(a));
    *from = *to > 0 ? *to - 1 : -1;
}

void tui_app_focus(tui_app *a, int pane)
{
    if (pane < 0 || pane >= TUI_NPANES)
        return;
    int old = a->focus;
    a->focus = pane;
    a->focus_stamp[pane] = ++a->focus_clock;
    int slot = a->lay.slot[pane];
    if (a->slot_pane[slot] != pane) {
        a->slot_pane[slot] = pane;
        relayout(a);
    }
    a->panes[old].redraw = 1;
    a->panes[pane].redraw = 1;
    a->status_dirty = 1;
}

const hw_spec *tui_app_gpu(tui_app *a)
{
    /* The spec the figures use: the one the measurements were placed on,
     * else the one the occupancy was computed for. */
    const char *name = NULL;
    if (a->gpu_pick[0])
        name = a->gpu_pick;
    else if (a->model.nmeas && a->model.meas[a->model.nmeas - 1].gpu[0])
        name = a->model.meas[a->model.nmeas - 1].gpu;
    else if (a->model.occupancy)
        name = dt_json_str(a->model.occupancy, "gpu", NULL);
    else if (a->model.spec_gpu[0])
        name = a->model.spec_gpu;
    if (name == NULL || *name == '\0')
        return NULL;
    if (a->gpu_spec && dt_streq(a->gpu_spec_name, name))
        return a->gpu_spec;
    hw_spec_free(a->gpu_spec);
    snprintf(a->gpu_spec_name, sizeof a->gpu_spec_name, "%s", name);
    a->gpu_spec = hw_load(name, NULL);
    return a->gpu_spec;
}

const char *tui_app_gpu_why(tui_app *a)
{
    if (a->gpu_pick[0])
        return "picked with H";
    if (a->model.have_gpu)
        return "this machine's";
    if (a->model.spec_gpu[0])
        return "no GPU here: the spec's target";
    return "no GPU here: the default, H picks another";
}

/* H: the GPU the figures assume, checked against the known specs. */
static void pick_gpu(tui_app *a, const char *name)
{
    if (*name == '\0') {
        a->gpu_pick[0] = '\0';
        tui_app_flash(a, 0, "the figures assume the run's GPU again");
    } else {
        dt_err e = {0};
        hw_spec *g = hw_load(name, &e);
        if (g == NULL) {
            tui_app_flash(a, 1, "%s", e.msg);
            return;
        }
        snprintf(a->gpu_pick, sizeof a->gpu_pick, "%s", g->name);
        tui_app_flash(a, 0, "the figures assume %s now (the run itself is unchanged)",
                      g->full_name);
        hw_spec_free(g);
    }
    tui_app_mark(a, TUI_D_PERF);
}

/* The : palette: "model NAME", "endpoint URL" or "backend expert|llm",
 * for the steps after this one; the run records the switch. */
static void command(tui_app *a, const char *text)
{
    while (*text == ' ')
        text++;
    if (*text == '\0')
        return;
    if (a->replay || a->run == NULL) {
        tui_app_flash(a, 1, "a replay cannot switch anything: it shows what was recorded");
        return;
    }
    char what[16];
    int n = 0;
    while (text[n] && text[n] != ' ' && n < (int)sizeof what - 1) {
        what[n] = text[n];
        n++;
    }
    what[n] = '\0';
    while (text[n] && text[n] != ' ')
        n++; /* a longer word is named by its start, and refused */
    const char *value = text + n;
    while (*value == ' ')
        value++;
    if (*value == '\0') {
        tui_app_flash(a, 1, "%s needs a value: model NAME, endpoint URL, backend expert|llm", what);
        return;
    }
    dt_err e = {0};
    if (ag_set_brain(a->run, what, value, &e) != 0)
        tui_app_flash(a, 1, "%s", e.msg);
    else
        tui_app_flash(a, 0, "%s is %s from the next step on (recorded in the session)", what,
                      value);
}

/* ---- events ------------------------------------------------------------------------------ */

void tui_app_event(tui_app *a, const cJSON *ev)
{
    int awaiting_before = a->model.awaiting;
    tui_model_apply(&a->model, ev);
    /* A new gate: show that step, so the person reviews what is asked. */
    if (a->model.awaiting && a->model.awaiting != awaiting_before && !a->replay) {
        int si = tui_model_step_index(&a->model, a->model.awaiting);
        if (si == a->model.nsteps - 1)
            tui_app_select(a, si, 1);
        if (si == tui_app_sel(a))
            show_failed_gate(a, a->model.awaiting);
    }
    if (dt_streq(dt_json_str(ev, "type", ""), "step_started") && a->sel_follow)
        tui_app_select(a, a->model.nsteps - 1, 1);
    sync_failed_gate(a);
}

static void sink(ag_run *r, const cJSON *ev, void *ud)
{
    (void)r;
    (void)ud;
    if (relay.a)
        tui_app_event(relay.a, ev);
}

/* ---- layout --------------------------------------------------------------------------------- */

/* Overlays take four fifths of the width, all of a narrow one, at most
 * 110 columns. */
static int modal_width(void)
{
    int w = COLS * 4 / 5;
    if (w < 60)
        w = COLS;
    if (w > 110)
        w = 110;
    return w;
}

static void place_modal(tui_app *a)
{
    /* top_panel would show a hidden overlay again */
    if (a->mwin == NULL || panel_hidden(a->mpanel))
        return;
    int h, w, y, x;
    if (a->modal == TUI_MODAL_KB) {
        h = LINES - 2;
        w = COLS;
        y = 0;
        x = 0;
    } else {
        h = LINES * 4 / 5;
        w = modal_width();
        if (a->modal == TUI_MODAL_PROMPT && h > 14)
            h = 14;
        if (a->modal == TUI_MODAL_VERSIONS) {
            int want = a->model.nrevs + 3;
            if (h > want)
                h = want;
            if (w > 70)
                w = 70;
        }
        y = (LINES - 2 - h) / 2;
        x = (COLS - w) / 2;
    }
    if (h < 3)
        h = 3;
    if (w < 10)
        w = 10;
    if (y < 0)
        y = 0;
    wresize(a->mwin, h, w);
    move_panel(a->mpanel, y, x);
    top_panel(a->mpanel);
    a->mdirty = 1;
}

static void relayout(tui_app *a)
{
    tui_layout_compute(COLS, LINES, &a->lay);
    a->lay_failed = failed_gate_shown(a);
    if (a->lay_failed)
        tui_layout_give_reason(&a->lay);
    for (int i = 0; i < TUI_NPANES; i++) {
        int slot = a->lay.slot[i];
        int shown = !a->lay.too_small && a->slot_pane[slot] == i;
        tui_pane_place(&a->panes[i], a->lay.pane[i], shown);
    }
    /* the focus never rests on a hidden pane */
    if (!a->panes[a->focus].shown && !a->lay.too_small) {
        a->slot_pane[a->lay.slot[a->focus]] = a->focus;
        relayout(a);
        return;
    }
    tui_rect s = a->lay.status;
    if (a->lay.too_small)
        s = (tui_rect){0, 0, LINES > 0 ? LINES : 1, COLS > 0 ? COLS : 1};
    if (s.h < 1)
        s.h = 1;
    wresize(a->status_win, s.h, s.w > 0 ? s.w : 1);
    move_panel(a->status_panel, s.y, s.x);
    place_modal(a);
    a->status_dirty = 1;
    a->full_redraw = 1;
}

/* A slot's pane when several share it, for a new layout tier: the one the
 * person focused last, else the first (the source before diagnostics and
 * performance). */
static void fix_slots(tui_app *a)
{
    tui_layout_compute(COLS, LINES, &a->lay);
    for (int s = 0; s < TUI_NPANES; s++)
        a->slot_pane[s] = -1;
    for (int i = 0; i < TUI_NPANES; i++) {
        int s = a->lay.slot[i];
        if (a->slot_pane[s] < 0 || a->focus_stamp[i] > a->focus_stamp[a->slot_pane[s]])
            a->slot_pane[s] = i;
    }
}

static void resized(tui_app *a)
{
    struct winsize ws;
    if (ioctl(1, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 &&
        (ws.ws_row != LINES || ws.ws_col != COLS))
        resizeterm(ws.ws_row, ws.ws_col);
    fix_slots(a);
    relayout(a);
}

/* ---- drawing ------------------------------------------------------------------------------- */

static void draw_text_modal(tui_app *a)
{
    WINDOW *w = a->mwin;
    int h, wd;
    getmaxyx(w, h, wd);
    werase(w);
    tui_frame(w, a->text_title, "Esc close", 1, a->utf8);
    int rows = h - 2;
    if (a->text_top > a->text.n - rows)
        a->text_top = a->text.n - rows;
    if (a->text_top < 0)
        a->text_top = 0;
    for (int i = 0; i < rows && a->text_top + i < a->text.n; i++) {
        const tui_line *ln = &a->text.v[a->text_top + i];
        if (tui_str_width(ln->text, ln->len) <= wd - 4)
            tui_put_line(w, 1 + i, 2, ln, 0, wd - 4, -1, NULL, a->utf8);
        else
            tui_put_fit(w, 1 + i, 2, ln->text, ln->len, wd - 4, tui_attr(ln->role),
                        tui_pair(ln->role), a->utf8);
    }
    /* more above or below: say where we are */
    if (a->text.n > rows && wd > 30) {
        char pos[48];
        int last = a->text_top + rows < a->text.n ? a->text_top + rows : a->text.n;
        snprintf(pos, sizeof pos, " %d-%d/%d, arrows scroll ", a->text_top + 1, last, a->text.n);
        tui_put_fit(w, h - 1, 2, pos, -1, wd - 4, tui_attr(TUI_R_TITLE_FOCUS),
                    tui_pair(TUI_R_TITLE_FOCUS), a->utf8);
    }
}

typedef struct help_wrap {
    tui_lines *out;
    int first;
    int indent;
} help_wrap;

static void help_piece(const char *s, int len, void *ud)
{
    help_wrap *h = ud;
    dt_buf b = DT_BUF_INIT;
    for (int i = 0; i < h->indent && !h->first; i++)
        dt_buf_putc(&b, ' ');
    dt_buf_append(&b, s, (size_t)len);
    tui_lines_add(h->out, b.data, (int)b.len, TUI_R_NORMAL);
    h->first = 0;
    dt_buf_free(&b);
}

/* A help line ("  key      what it does") wrapped to width, later lines
 * under the description, so a narrow overlay cuts nothing. */
static void help_line(tui_lines *out, const char *text, int role, int width)
{
    int len = (int)strlen(text);
    if (role != TUI_R_NORMAL || tui_str_width(text, len) <= width || width < 24) {
        tui_lines_add(out, text, len, role);
        return;
    }
    /* the description's column: after the key and its run of blanks */
    int col = 2;
    while (col < len && text[col] != ' ')
        col++;
    while (col < len && text[col] == ' ')
        col++;
    if (col >= len || col > width / 2)
        col = 4;
    help_wrap h = {out, 1, col};
    tui_wrap(text, len, width, help_piece, &h);
}

static void draw_prompt(tui_app *a)
{
    WINDOW *w = a->status_win;
    int h, cols;
    getmaxyx(w, h, cols);
    if (h < 2)
        return;
    static const char *labels[] = {
        [TUI_ASK_REJECT] = "Reject -- reason for the agent: ",
        [TUI_ASK_SEARCH] = "Search: ",
        [TUI_ASK_KB_APPROVE] = "Approve -- note (optional): ",
        [TUI_ASK_KB_REJECT] = "Reject -- note (required): ",
        [TUI_ASK_JUMP] = "Jump to step: ",
        [TUI_ASK_NOTE] = "Note for later replays: ",
        [TUI_ASK_CMD] = ": model NAME | endpoint URL | backend expert|llm (for the next steps) ",
        [TUI_ASK_GPU] = "GPU for the figures (ditto hw list: h200, h100-sxm, a100-80gb-sxm, l40s, "
                        "rtx4090, ...; empty: the run's): ",
    };
    const char *label = a->modal == TUI_MODAL_CONFIRM ? a->confirm_q : labels[a->ask];
    const ag_step *g = a->run && a->ask == TUI_ASK_REJECT ? ag_awaiting(a->run) : NULL;
    if (a->modal != TUI_MODAL_CONFIRM && g && step_failed(g))
        label = "Send back -- reason for the agent: ";
    wattr_set(w, tui_attr(TUI_R_PROMPT), tui_pair(TUI_R_PROMPT), NULL);
    mvwhline(w, 1, 0, ' ', cols);
    int x = tui_put(w, 1, 0, label, (int)strlen(label), 0, cols, tui_attr(TUI_R_PROMPT),
                    tui_pair(TUI_R_PROMPT), a->utf8);
    if (a->modal == TUI_MODAL_CONFIRM)
        return;
    if (a->prompt_multi) {
        tui_put_fit(w, 1, x, "(in the editor above)", -1, cols - x, tui_attr(TUI_R_PROMPT),
                    tui_pair(TUI_R_PROMPT), a->utf8);
        return;
    }
    /* the tail of the text when it is longer than the row */
    int room = cols - x - 1;
    int start = 0, width = 0;
    for (int i = a->input_len - 1; i >= 0; i--) {
        int cw = wcwidth(a->input_buf[i]);
        if (width + (cw < 0 ? 1 : cw) > room)
            break;
        width += cw < 0 ? 1 : cw;
        start = i;
    }
    wattr_set(w, tui_attr(TUI_R_NORMAL), tui_pair(TUI_R_NORMAL), NULL);
    mvwhline(w, 1, x, ' ', cols - x);
    if (a->input_len > start)
        mvwaddnwstr(w, 1, x, a->input_buf + start, a->input_len - start);
    wattr_set(w, tui_attr(TUI_R_CURSOR), tui_pair(TUI_R_CURSOR), NULL);
    waddch(w, ' ');
}

void tui_app_render(tui_app *a)
{
    if (a->model.dirty) {
        tui_app_mark(a, a->model.dirty);
        a->model.dirty = 0;
    }
    if (a->full_redraw) {
        for (int i = 0; i < TUI_NPANES; i++)
            a->panes[i].redraw = 1;
        a->status_dirty = 1;
        a->mdirty = 1;
        clearok(curscr, TRUE);
    }
    int drew = a->full_redraw;
    a->full_redraw = 0;
    if (a->lay.too_small) {
        WINDOW *w = a->status_win;
        werase(w);
        char msg[160];
        snprintf(msg, sizeof msg,
                 "ditto: the terminal is too small (%dx%d; the workbench needs %dx%d). Make it "
                 "larger, or q to quit.",
                 COLS, LINES, TUI_MIN_COLS, TUI_MIN_ROWS);
        /* wrapped over the rows there are; the last one shown ends in an
         * ellipsis when even that is not enough */
        tui_lines l = {0};
        tui_wrap_lines(msg, COLS, &l);
        for (int i = 0; i < l.n && i < LINES; i++) {
            const char *t = l.v[i].text;
            int len = l.v[i].len;
            if (i == LINES - 1 && i < l.n - 1) {
                dt_buf b = DT_BUF_INIT;
                dt_buf_append(&b, t, (size_t)len);
                dt_buf_puts(&b, " ...");
                tui_put_fit(w, i, 0, b.data, (int)b.len, COLS, tui_attr(TUI_R_WARNING),
                            tui_pair(TUI_R_WARNING), a->utf8);
                dt_buf_free(&b);
            } else {
                tui_put_fit(w, i, 0, t, len, COLS, tui_attr(TUI_R_WARNING),
                            tui_pair(TUI_R_WARNING), a->utf8);
            }
        }
        tui_lines_clear(&l);
        update_panels();
        doupdate();
        return;
    }
    for (int i = 0; i < TUI_NPANES; i++) {
        tui_pane *p = &a->panes[i];
        if (p->shown && (p->stale || p->redraw)) {
            tui_pane_draw(p, a);
            drew = 1;
        }
    }
    if (a->modal != TUI_MODAL_NONE && a->mdirty && a->mwin) {
        if (a->modal == TUI_MODAL_TEXT)
            draw_text_modal(a);
        else if (a->modal == TUI_MODAL_KB)
            tui_kb_draw(a);
        else if (a->modal == TUI_MODAL_VERSIONS)
            tui_versions_draw(a);
        else if (a->modal == TUI_MODAL_PROMPT && a->prompt_multi)
            draw_editor(a);
        a->mdirty = 0;
        drew = 1;
    }
    if (a->status_dirty) {
        tui_status_draw(a);
        if (a->modal == TUI_MODAL_PROMPT || a->modal == TUI_MODAL_CONFIRM)
            draw_prompt(a);
        a->status_dirty = 0;
        drew = 1;
    }
    if (!drew)
        return;
    update_panels();
    doupdate();
    a->frames++;
}

static void before_sleep(dt_loop *l, void *ud)
{
    (void)l;
    tui_app_render(ud);
}

/* ---- overlays -------------------------------------------------------------------------------- */

static void open_modal(tui_app *a, tui_modal m)
{
    a->modal = m;
    if (a->mwin == NULL) {
        a->mwin = newwin(3, 10, 0, 0);
        a->mpanel = new_panel(a->mwin);
    }
    show_panel(a->mpanel);
    place_modal(a);
    a->status_dirty = 1;
}

static void close_modal(tui_app *a)
{
    if (a->modal == TUI_MODAL_KB)
        tui_kb_close(a);
    a->modal = TUI_MODAL_NONE;
    if (a->mpanel)
        hide_panel(a->mpanel);
    a->full_redraw = 1;
}

void tui_app_show_text(tui_app *a, const char *title)
{
    snprintf(a->text_title, sizeof a->text_title, "%s", title);
    a->text_top = 0;
    open_modal(a, TUI_MODAL_TEXT);
}

void tui_app_open_entry(tui_app *a, const char *id)
{
    const cJSON *e = a->k ? kb_get(a->k, id) : NULL;
    if (e == NULL) {
        tui_app_flash(a, 1, "no knowledge-base entry %s", id);
        return;
    }
    tui_lines_clear(&a->text);
    int w = COLS * 4 / 5;
    if (w > 110)
        w = 110;
    tui_kb_entry_lines(e, kb_origin(a->k, id, NULL), w - 4, &a->text);
    char title[200];
    snprintf(title, sizeof title, "Knowledge: %s", id);
    tui_app_show_text(a, title);
}

void tui_app_jump_source(tui_app *a, int rev, int line)
{
    int from, to;
    tui_app_src_pair(a, &from, &to);
    if (rev != to) {
        a->src_to = rev;
        a->src_from = rev > 0 ? rev - 1 : -1;
    }
    a->src_mark = line;
    a->src_jump = line;
    tui_app_focus(a, TUI_P_SOURCE);
    tui_app_mark(a, TUI_D_SOURCE);
}

static void help(tui_app *a)
{
    static const char *live[] = {
        "Review",
        "  a        approve the step awaiting review",
        "  e        edit it: the plan (JSON) or the kernel source in $VISUAL/$EDITOR;",
        "           the edit is re-validated and the steps after it run again; an edit",
        "           the run refuses is kept, and the next e opens it again",
        "  r        reject it with a reason: the reason goes back to the agent (an editor of",
        "           many lines: Enter sends, Ctrl-J a new line, Ctrl-E $EDITOR for long ones)",
        "  x        on a hunk of the kernel's diff: reject it (x again accepts it); a then",
        "           approves the kernel with the rejected hunks' old lines, as an edit",
        "  u        undo: a decision waits 3 s before the next step starts; u takes it back",
        "  A        approve this and every later step (a failed step is sent back, as",
        "           nobody's decision, and the steps after it are approved)",
        "  s        stop the run at this review (the session records it)",
        "  A failed step (a compile error, a failed verification) is never approved: its",
        "  error shows at the end of its reasoning, with the source line; r sends it back",
        "  to the coder with your reason, e edits it (the kernel, at a compile or verify),",
        "  s stops",
        "  :        switch the model, the endpoint or the backend for the next steps",
        "           (model NAME, endpoint URL, backend expert|llm); the session records it",
        "  t        tune now (after the current measurement; only with a GPU)",
        "  k        knowledge review: approve or reject proposed entries",
        "",
    };
    static const char *replay_keys[] = {
        "Replay (offline: no worker, no LLM)",
        "  .  ,     next / previous event (a whole agent message at once)",
        "  >  <     next / previous step",
        "  j        jump to step N",
        "  space    play or pause, on the recording's clock (pauses shortened to 1 s)",
        "  +  -     play faster / slower (x2, x0.5)",
        "  m        add a note here for later replays (kept in annotations.jsonl)",
        "  0  $     the first / the last event",
        "  k        the knowledge base",
        "",
    };
    static const char *common[] = {
        "Looking around",
        "  Tab, Shift-Tab   move the focus between panes (a hidden pane comes forward)",
        "  arrows, PgUp, PgDn, g, G   move and scroll; the mouse wheel scrolls too",
        "  Enter    on a step: its reasoning; on a rule: the knowledge-base entry;",
        "           on a diagnostic: its line in the source",
        "  Left, Right   scroll sideways",
        "  v        pick two versions of the kernel to compare",
        "  H        the GPU the occupancy and roofline assume (without a GPU here)",
        "  d        source: the whole file or the changes only;  ] [  next / previous change",
        "  /        search in the focused pane;  n N  next / previous match",
        "  Ctrl-L   redraw",
        "  ?        this help",
        "  q        quit (asks first while the run is working)",
    };
    tui_lines_clear(&a->text);
    int width = modal_width() - 4;
    if (a->replay)
        for (size_t i = 0; i < DT_ARRAY_LEN(replay_keys); i++)
            help_line(&a->text, replay_keys[i], i == 0 ? TUI_R_HEADING : TUI_R_NORMAL, width);
    else
        for (size_t i = 0; i < DT_ARRAY_LEN(live); i++)
            help_line(&a->text, live[i], i == 0 ? TUI_R_HEADING : TUI_R_NORMAL, width);
    for (size_t i = 0; i < DT_ARRAY_LEN(common); i++)
        help_line(&a->text, common[i], i == 0 ? TUI_R_HEADING : TUI_R_NORMAL, width);
    tui_app_show_text(a, "Keys");
}

static int text_key(tui_app *a, int k)
{
    int h = a->mwin ? getmaxy(a->mwin) - 2 : 10;
    switch (k) {
    case KEY_UP:
        a->text_top--;
        break;
    case KEY_DOWN:
        a->text_top++;
        break;
    case KEY_PPAGE:
        a->text_top -= h - 1;
        break;
    case KEY_NPAGE:
    case ' ':
        a->text_top += h - 1;
        break;
    case 'g':
    case KEY_HOME:
        a->text_top = 0;
        break;
    case 'G':
    case KEY_END:
        a->text_top = a->text.n;
        break;
    case 27:
    case 'q':
    case '?':
    case '\n':
    case '\r':
    case KEY_ENTER:
        close_modal(a);
        return 1;
    default:
        return 0;
    }
    a->mdirty = 1;
    return 1;
}

/* ---- the prompt ------------------------------------------------------------------------------- */

static tui_modal prompt_return; /* the modal a prompt came from (the KB screen) */

/* Add a character to the typed text; -1 (nothing added) at the limit. */
static int input_put(tui_app *a, wchar_t c)
{
    if (a->input_len >= TUI_INPUT_MAX)
        return -1;
    if (a->input_len == a->input_cap) {
        a->input_cap = a->input_cap ? 2 * a->input_cap : 256;
        a->input_buf = dt_xrealloc(a->input_buf, (size_t)a->input_cap * sizeof *a->input_buf);
    }
    a->input_buf[a->input_len++] = c;
    return 0;
}

/* Replace the typed text with UTF-8 text; -1 (text unchanged) when it
 * holds more than TUI_INPUT_MAX characters. */
static int input_set(tui_app *a, const char *text)
{
    int n = 0, len = (int)strlen(text);
    for (int i = 0; i < len; n++)
        i += tui_utf8_next(text + i, len - i, &(unsigned){0});
    if (n > TUI_INPUT_MAX)
        return -1;
    a->input_len = 0;
    for (int i = 0; i < len;) {
        unsigned cp;
        i += tui_utf8_next(text + i, len - i, &cp);
        input_put(a, (wchar_t)cp);
    }
    return 0;
}

/* Asks whose text may run to paragraphs: an overlay editor of many lines. */
static int ask_multiline(tui_ask ask)
{
    return ask == TUI_ASK_REJECT || ask == TUI_ASK_NOTE;
}

static void open_modal(tui_app *a, tui_modal m);

void tui_app_prompt(tui_app *a, tui_ask ask, const char *initial)
{
    prompt_return = a->modal;
    a->ask = ask;
    a->input_len = 0;
    if (initial)
        input_set(a, initial);
    a->prompt_multi = ask_multiline(ask) && prompt_return == TUI_MODAL_NONE;
    if (a->prompt_multi)
        open_modal(a, TUI_MODAL_PROMPT);
    a->modal = TUI_MODAL_PROMPT;
    curs_set(0);
    a->status_dirty = 1;
    a->mdirty = 1;
}

/* The prompt is done (sent or cancelled): back to where it came from. */
static void prompt_end(tui_app *a)
{
    a->modal = prompt_return;
    if (a->prompt_multi && a->mpanel) {
        hide_panel(a->mpanel);
        a->full_redraw = 1;
    }
    a->prompt_multi = 0;
    a->status_dirty = 1;
    a->mdirty = 1;
}

/* The typed text as UTF-8 (the session log and the agents speak UTF-8,
 * whatever the terminal's encoding). Caller frees. */
static char *input_utf8(const tui_app *a)
{
    dt_buf b = DT_BUF_INIT;
    for (int i = 0; i < a->input_len; i++) {
        unsigned c = (unsigned)a->input_buf[i];
        if (c < 0x80) {
            dt_buf_putc(&b, (char)c);
        } else if (c < 0x800) {
            dt_buf_putc(&b, (char)(0xC0 | (c >> 6)));
            dt_buf_putc(&b, (char)(0x80 | (c & 0x3F)));
        } else if (c < 0x10000) {
            dt_buf_putc(&b, (char)(0xE0 | (c >> 12)));
            dt_buf_putc(&b, (char)(0x80 | ((c >> 6) & 0x3F)));
            dt_buf_putc(&b, (char)(0x80 | (c & 0x3F)));
        } else {
            dt_buf_putc(&b, (char)(0xF0 | (c >> 18)));
            dt_buf_putc(&b, (char)(0x80 | ((c >> 12) & 0x3F)));
            dt_buf_putc(&b, (char)(0x80 | ((c >> 6) & 0x3F)));
            dt_buf_putc(&b, (char)(0x80 | (c & 0x3F)));
        }
    }
    return dt_buf_take(&b);
}

static void search(tui_app *a, int dir, int from_next)
{
    tui_pane *p = &a->panes[a->focus];
    if (p->search[0] == '\0') {
        tui_app_flash(a, 0, "no search: / starts one");
        return;
    }
    int at = p->ops->cursor ? p->cur : p->top;
    int i = tui_lines_find(&p->lines, p->search, at + (from_next ? dir : 0), dir);
    if (i < 0) {
        tui_app_flash(a, 1, "not found in %s: %s", p->ops->title, p->search);
        p->redraw = 1;
        return;
    }
    tui_pane_scroll_to(p, i);
    if (!p->ops->cursor)
        p->top = i;
    p->redraw = 1;
}

static void submit_prompt(tui_app *a)
{
    char *text = input_utf8(a);
    prompt_end(a);
    switch (a->ask) {
    case TUI_ASK_REJECT:
        if (a->run == NULL || ag_awaiting(a->run) == NULL) {
            tui_app_flash(a, 1, "nothing awaits review");
        } else if (*text == '\0') {
            tui_app_flash(a, 1, "a rejection needs a reason (it goes back to the agent)");
        } else {
            pend_stage(a, AG_REJECT, NULL, text, 0);
        }
        break;
    case TUI_ASK_SEARCH: {
        tui_pane *p = &a->panes[a->focus];
        snprintf(p->search, sizeof p->search, "%s", text);
        p->redraw = 1;
        if (*text)
            search(a, 1, 0);
        break;
    }
    case TUI_ASK_KB_APPROVE:
        tui_kb_review(a, "approved", text);
        break;
    case TUI_ASK_KB_REJECT:
        if (*text == '\0')
            tui_app_flash(a, 1, "a rejection needs a note: other reviewers learn from it");
        else
            tui_kb_review(a, "rejected", text);
        break;
    case TUI_ASK_JUMP: {
        char *end = NULL;
        long n = strtol(text, &end, 10);
        if (*text == '\0' || end == NULL || *end != '\0' || n < 1 || n > 1000000)
            tui_app_flash(a, 1, "a step number, 1 or more (not \"%s\")", text);
        else if (tui_replay_jump_step(a, (int)n) != 0)
            tui_app_flash(a, 1, "this session has no step %ld", n);
        break;
    }
    case TUI_ASK_NOTE:
        tui_replay_note(a, text);
        break;
    case TUI_ASK_GPU:
        pick_gpu(a, text);
        break;
    case TUI_ASK_CMD:
        command(a, text);
        break;
    }
    free(text);
}

static char *edit_text(const char *text, const char *suffix);

/* Ctrl-E: the typed text in $VISUAL/$EDITOR, for a long reason. */
static void prompt_in_editor(tui_app *a)
{
    char *cur = input_utf8(a);
    tui_term_suspend();
    char *t = edit_text(cur, ".txt");
    tui_term_resume();
    a->full_redraw = 1;
    if (t == NULL) {
        tui_app_flash(a, 1, "the editor failed or its file could not be read back; the text "
                            "is as it was");
    } else {
        size_t n = strlen(t);
        if (n > 0 && t[n - 1] == '\n')
            t[n - 1] = '\0'; /* the newline editors add at the end */
        if (input_set(a, t) != 0)
            tui_app_flash(a, 1, "the text from the editor is longer than %d characters: it was "
                                "not taken (shorten it, Ctrl-E again)",
                          TUI_INPUT_MAX);
    }
    free(t);
    free(cur);
}

static void prompt_key(tui_app *a, int k, int is_char)
{
    a->status_dirty = 1;
    a->mdirty = 1;
    if (!is_char) {
        if (k == KEY_BACKSPACE && a->input_len > 0)
            a->input_len--;
        else if (k == KEY_ENTER)
            submit_prompt(a);
        return;
    }
    if (k == '\r' || (k == '\n' && !a->prompt_multi)) {
        submit_prompt(a);
    } else if (k == 27) {
        prompt_end(a);
    } else if (k == 127 || k == 8) {
        if (a->input_len > 0)
            a->input_len--;
    } else if (k == 21) { /* Ctrl-U */
        a->input_len = 0;
    } else if (k == 5 && a->prompt_multi) { /* Ctrl-E */
        prompt_in_editor(a);
    } else if ((k >= 0x20 || (k == '\n' && a->prompt_multi)) && input_put(a, (wchar_t)k) != 0) {
        /* never cut silently: say where the limit is and what to do */
        tui_app_flash(a, 1, "the text is at its limit of %d characters%s", TUI_INPUT_MAX,
                      a->prompt_multi ? "; Ctrl-E edits it in $EDITOR" : "");
    }
}

/* The multi-line editor: the text wrapped, its end (where typing goes) in
 * view, and the keys in the border. */
static void draw_editor(tui_app *a)
{
    WINDOW *w = a->mwin;
    int h, wd;
    getmaxyx(w, h, wd);
    werase(w);
    char note[48];
    snprintf(note, sizeof note, "%d/%d characters", a->input_len, TUI_INPUT_MAX);
    const ag_step *g = a->run && a->ask == TUI_ASK_REJECT ? ag_awaiting(a->run) : NULL;
    tui_frame(w,
              g && step_failed(g)        ? "Send back: your reason goes to the agent with the error"
              : a->ask == TUI_ASK_REJECT ? "Reject: your reason goes back to the agent"
                                         : "A note for later replays",
              note, 1, a->utf8);
    char *t = input_utf8(a);
    tui_lines l = {0};
    tui_wrap_lines(t, wd - 4, &l);
    /* a text that ends in a newline goes on on a new, empty line */
    if (l.n == 0 || (a->input_len > 0 && a->input_buf[a->input_len - 1] == L'\n'))
        tui_lines_add(&l, "", 0, TUI_R_NORMAL);
    int rows = h - 2;
    int first = l.n > rows ? l.n - rows : 0;
    for (int i = first; i < l.n; i++)
        tui_put(w, 1 + i - first, 2, l.v[i].text, l.v[i].len, 0, wd - 4, tui_attr(TUI_R_NORMAL),
                tui_pair(TUI_R_NORMAL), a->utf8);
    /* the cursor after the last character */
    const tui_line *last = &l.v[l.n - 1];
    int cx = 2 + tui_str_width(last->text, last->len);
    if (cx < wd - 1)
        tui_put(w, 1 + l.n - 1 - first, cx, " ", 1, 0, 1, tui_attr(TUI_R_CURSOR),
                tui_pair(TUI_R_CURSOR), a->utf8);
    tui_put_fit(w, h - 1, 2, " Enter sends  Ctrl-J new line  Ctrl-E $EDITOR  Esc cancels ", -1,
                wd - 4, tui_attr(TUI_R_TITLE_FOCUS), tui_pair(TUI_R_TITLE_FOCUS), a->utf8);
    tui_lines_clear(&l);
    free(t);
}

/* ---- decisions ---------------------------------------------------------------------------------- */

/* Open $VISUAL/$EDITOR on text; the edited text (caller frees) or NULL. */
static char *edit_text(const char *text, const char *suffix)
{
    const char *tmp = getenv("TMPDIR");
    char *path = dt_xasprintf("%s/ditto-edit-XXXXXX%s", tmp && *tmp ? tmp : "/tmp", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd < 0) {
        free(path);
        return NULL;
    }
    size_t len = strlen(text);
    ssize_t w = write(fd, text, len);
    close(fd);
    char *out = NULL;
    if (w == (ssize_t)len) {
        const char *ed = getenv("VISUAL");
        if (ed == NULL || *ed == '\0')
            ed = getenv("EDITOR");
        if (ed == NULL || *ed == '\0')
            ed = "vi";
        char *cmd = dt_xasprintf("%s '%s'", ed, path);
        int rc = system(cmd);
        free(cmd);
        if (rc == 0)
            out = dt_read_file(path, NULL, NULL);
    }
    unlink(path);
    free(path);
    return out;
}

static void edit(tui_app *a)
{
    const ag_step *s = ag_awaiting(a->run);
    if (s == NULL) {
        tui_app_flash(a, 1, "nothing awaits review");
        return;
    }
    ag_kind kind = ag_step_kind(s);
    /* a failed compile or verify: its kernel is edited (a new version) */
    int failed_kernel = (kind == AG_COMPILE || kind == AG_VERIFY) && step_failed(s);
    if (kind != AG_GENERATE && kind != AG_PLAN && !failed_kernel) {
        tui_app_flash(a, 1, "only the plan and the kernel source can be edited (this is %s%s)",
                      ag_kind_name(kind),
                      kind == AG_COMPILE || kind == AG_VERIFY
                          ? "; its kernel can be edited when it failed"
                          : "");
        return;
    }
    int is_kernel = kind != AG_PLAN;
    char *orig;
    if (is_kernel) {
        cJSON *view = ag_step_view(a->run, s);
        orig = dt_xstrdup(dt_json_str(view, "source", ""));
        cJSON_Delete(view);
    } else {
        orig = dt_json_print(ag_step_artifact(s), 1);
    }
    /* an edit refused before comes back, not the agent's text */
    int kept = a->kept_edit && a->kept_step == ag_step_id(s);
    tui_term_suspend();
    char *after = edit_text(kept ? a->kept_edit : orig, is_kernel ? ".cu" : ".json");
    tui_term_resume();
    resized(a);
    a->full_redraw = 1;
    dt_err e = {0};
    int refused = 0;
    if (after == NULL) {
        tui_app_flash(a, 1, "the editor failed or the file could not be read back; the step "
                            "still awaits review%s",
                      kept ? " (your refused edit is still kept for the next e)" : "");
    } else if (strcmp(after, orig) == 0) {
        tui_app_flash(a, 0, "no change: the step still awaits review");
        free(a->kept_edit);
        a->kept_edit = NULL;
    } else if (is_kernel) {
        cJSON *v = cJSON_CreateString(after);
        refused = ag_decide(a->run, AG_EDIT, v, NULL, &e) != 0;
        cJSON_Delete(v);
    } else {
        cJSON *v = dt_json_parse(after, strlen(after), "edited plan", &e);
        refused = v == NULL || ag_decide(a->run, AG_EDIT, v, NULL, &e) != 0;
        cJSON_Delete(v);
    }
    if (refused) {
        /* kept: the next e opens it again to fix what was refused */
        free(a->kept_edit);
        a->kept_edit = after;
        a->kept_step = ag_step_id(s);
        after = NULL;
        tui_app_flash(a, 1, "the edit was refused: %s (e reopens your edit)", e.msg);
    } else if (after && strcmp(after, orig) != 0) {
        free(a->kept_edit);
        a->kept_edit = NULL;
        tui_app_flash(a, 0,
                      kind == AG_GENERATE ? "edited: the new source is checked and compiled again"
                      : is_kernel         ? "edited: your kernel is a new version, compiled again"
                                          : "edited: the plan is checked again");
    }
    free(orig);
    free(after);
}

/* ---- decisions with an undo window ---------------------------------------------------- */

static void pend_clear(tui_app *a)
{
    if (a->pend_timer)
        dt_loop_del_timer(a->loop, a->pend_timer);
    a->pend_timer = 0;
    cJSON_Delete(a->pend_art);
    free(a->pend_reason);
    a->pend_art = NULL;
    a->pend_reason = NULL;
    a->pend = 0;
    a->status_dirty = 1;
}

/* Send the waiting decision to the run: the next step starts. */
static void pend_commit(tui_app *a)
{
    if (!a->pend)
        return;
    dt_err e = {0};
    const ag_step *s = a->run ? ag_awaiting(a->run) : NULL;
    if (s == NULL || ag_step_id(s) != a->pend_step) {
        tui_app_flash(a, 1, "the decision on step %d was not sent: the step no longer awaits "
                            "review",
                      a->pend_step);
    } else if (a->pend_rest) {
        ag_approve_rest(a->run);
    } else if (ag_decide(a->run, a->pend_d, a->pend_art, a->pend_reason, &e) != 0) {
        if (a->pend_d == AG_EDIT && cJSON_IsString(a->pend_art)) {
            free(a->kept_edit);
            a->kept_edit = dt_xstrdup(a->pend_art->valuestring);
            a->kept_step = a->pend_step;
            tui_app_flash(a, 1, "the kept hunks were refused: %s (e opens them in the editor)",
                          e.msg);
        } else {
            tui_app_flash(a, 1, "%s", e.msg);
        }
    }
    pend_clear(a);
}

static long pend_tick(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    tui_app *a = ud;
    a->status_dirty = 1;
    if (dt_now() < a->pend_until)
        return 250;
    a->pend_timer = 0; /* this timer ends here */
    pend_commit(a);
    return DT_LOOP_NOMORE;
}

/* Hold a decision for TUI_UNDO_S seconds before the run gets it: u takes
 * it back. A second decision replaces the first. art is taken. */
static void pend_stage(tui_app *a, ag_decision d, cJSON *art, const char *reason, int rest)
{
    pend_clear(a);
    const ag_step *s = ag_awaiting(a->run);
    a->pend = 1;
    a->pend_d = d;
    a->pend_art = art;
    a->pend_reason = reason ? dt_xstrdup(reason) : NULL;
    a->pend_rest = rest;
    a->pend_step = s ? ag_step_id(s) : 0;
    a->pend_failed = s && step_failed(s);
    a->pend_until = dt_now() + TUI_UNDO_S;
    a->pend_timer = dt_loop_add_timer(a->loop, 250, pend_tick, a);
    a->status_dirty = 1;
}

int tui_app_hunk_review(tui_app *a)
{
    const ag_step *s = a->run && !a->replay ? ag_awaiting(a->run) : NULL;
    if (s == NULL || ag_step_kind(s) != AG_GENERATE) {
        a->nhunk_rej = 0;
        return 0;
    }
    int si = tui_model_step_index(&a->model, ag_step_id(s));
    int to = si >= 0 ? a->model.steps[si].rev : -1;
    int from, shown_to;
    tui_app_src_pair(a, &from, &shown_to);
    if (to < 1 || shown_to != to || from != to - 1)
        return 0;
    if (a->hunk_step != ag_step_id(s)) {
        int n = tui_hunks_count(a->model.revs[from].source, a->model.revs[to].source);
        free(a->hunk_rej);
        a->hunk_rej = dt_xcalloc((size_t)n + 1, 1);
        a->nhunk_rej = n;
        a->hunk_step = ag_step_id(s);
    }
    return 1;
}

/* a: approve; with hunks rejected, the kernel as the accepted hunks make
 * it, as an edit. */
static void approve(tui_app *a)
{
    const ag_step *g = ag_awaiting(a->run);
    if (g && step_failed(g)) {
        /* the run would refuse it too (ag_decide): say so now, stage nothing */
        ag_kind k = ag_step_kind(g);
        tui_app_flash(a, 1,
                      "%s v%d failed: a failed step cannot be approved; r sends it back "
                      "with your reason, %ss stops",
                      ag_kind_name(k), ag_step_version(g),
                      k == AG_PLAN || k == AG_GENERATE || k == AG_COMPILE || k == AG_VERIFY
                          ? "e edits it, "
                          : "");
        return;
    }
    int nrej = 0;
    if (tui_app_hunk_review(a))
        for (int i = 0; i < a->nhunk_rej; i++)
            nrej += a->hunk_rej[i];
    if (nrej == 0) {
        pend_stage(a, AG_APPROVE, NULL, NULL, 0);
        return;
    }
    if (nrej == a->nhunk_rej) {
        tui_app_flash(a, 1, "every hunk is rejected: r rejects the step with a reason for the "
                            "agent (x on a hunk accepts it again)");
        return;
    }
    const ag_step *s = ag_awaiting(a->run);
    int si = tui_model_step_index(&a->model, ag_step_id(s));
    int to = a->model.steps[si].rev;
    char *src = tui_hunks_apply(a->model.revs[to - 1].source, a->model.revs[to].source,
                                a->hunk_rej, a->nhunk_rej);
    pend_stage(a, AG_EDIT, cJSON_CreateString(src), NULL, 0);
    free(src);
}

static void undo(tui_app *a)
{
    if (!a->pend) {
        tui_app_flash(a, 1, "nothing to undo: a decision can be taken back for %d s, until the "
                            "next step starts",
                      TUI_UNDO_S);
        return;
    }
    int step = a->pend_step;
    pend_clear(a);
    tui_app_flash(a, 0, "undone: step %d awaits your review again", step);
}

/* The waiting decision in words, for the status row. */
void tui_app_pending_text(const tui_app *a, char *buf, size_t n)
{
    double left = a->pend_until - dt_now();
    const char *what = a->pend_rest && a->pend_failed
                           ? "sending the failed step back and approving every later step"
                       : a->pend_rest ? "approving this and every later step"
                       : a->pend_d == AG_REJECT && a->pend_failed ? "sending back"
                       : a->pend_d == AG_REJECT                   ? "rejecting"
                       : a->pend_d == AG_STOP                     ? "stopping the run"
                       : a->pend_d == AG_EDIT                     ? "keeping the accepted hunks"
                                                                  : "approving";
    snprintf(buf, n, "%s (step %d) in %.0f s: u undoes", what, a->pend_step,
             left > 0 ? left + 0.49 : 0);
}

static int review_possible(tui_app *a)
{
    if (a->replay) {
        tui_app_flash(a, 1, "a replay is read-only");
        return 0;
    }
    if (a->run == NULL || ag_awaiting(a->run) == NULL) {
        tui_app_flash(a, 1, "nothing awaits review");
        return 0;
    }
    return 1;
}

static void quit(tui_app *a)
{
    /* a decision in its undo window is a decision made: it is sent */
    pend_commit(a);
    if (!a->replay && a->run && !ag_run_done(a->run) && a->model.started) {
        snprintf(a->confirm_q, sizeof a->confirm_q,
                 "The run is still working: stop it and quit? (y/n) ");
        prompt_return = a->modal;
        a->modal = TUI_MODAL_CONFIRM;
        a->status_dirty = 1;
        return;
    }
    a->quit = 1;
}

static void confirm_key(tui_app *a, int k)
{
    a->modal = prompt_return;
    a->status_dirty = 1;
    if (k == 'y' || k == 'Y') {
        /* A gate that waits can be closed properly (the session records the
         * stop); a step in flight is abandoned and `ditto resume` re-runs it. */
        if (a->run && ag_awaiting(a->run))
            ag_stop(a->run);
        a->exit_code = AG_EXIT_STOPPED;
        a->quit = 1;
    }
}

/* ---- keys ----------------------------------------------------------------------------------------- */

static int pane_at(tui_app *a, int y, int x)
{
    for (int i = 0; i < TUI_NPANES; i++) {
        tui_pane *p = &a->panes[i];
        if (p->shown && y >= p->r.y && y < p->r.y + p->r.h && x >= p->r.x && x < p->r.x + p->r.w)
            return i;
    }
    return -1;
}

static void mouse(tui_app *a)
{
    MEVENT ev;
    if (getmouse(&ev) != OK || a->modal != TUI_MODAL_NONE)
        return;
    int pi = pane_at(a, ev.y, ev.x);
    if (pi < 0)
        return;
    tui_pane *p = &a->panes[pi];
    if (ev.bstate & (BUTTON4_PRESSED | BUTTON5_PRESSED)) {
        /* the wheel scrolls the pane under it, not the focused one */
        int k = (ev.bstate & BUTTON4_PRESSED) ? KEY_UP : KEY_DOWN;
        for (int i = 0; i < 3; i++) {
            if (p->ops->cursor) {
                p->top += k == KEY_UP ? -1 : 1;
                if (p->top < 0)
                    p->top = 0;
                if (p->top > p->lines.n - tui_pane_rows(p))
                    p->top = p->lines.n - tui_pane_rows(p) > 0 ? p->lines.n - tui_pane_rows(p) : 0;
                p->follow = 0;
                p->redraw = 1;
            } else {
                tui_pane_key(p, a, k);
            }
        }
    } else if (ev.bstate & BUTTON1_PRESSED) {
        tui_app_focus(a, pi);
        int line = p->top + ev.y - p->r.y - 1;
        if (p->ops->cursor && line >= 0 && line < p->lines.n) {
            p->cur = line;
            p->redraw = 1;
            if (pi == TUI_P_STEPS && p->lines.v[line].tag >= 0)
                tui_app_select(a, p->lines.v[line].tag,
                               p->lines.v[line].tag == a->model.nsteps - 1);
        }
    }
}

static void global_key(tui_app *a, int k)
{
    switch (k) {
    case '\t':
        tui_app_focus(a, (a->focus + 1) % TUI_NPANES);
        break;
    case KEY_BTAB:
        tui_app_focus(a, (a->focus + TUI_NPANES - 1) % TUI_NPANES);
        break;
    case 'q':
        quit(a);
        break;
    case '?':
        help(a);
        break;
    case 'k':
        tui_kb_open(a);
        if (a->modal == TUI_MODAL_KB)
            open_modal(a, TUI_MODAL_KB);
        break;
    case 'v':
        if (a->model.nrevs == 0) {
            tui_app_flash(a, 0, "no kernel version yet");
            break;
        }
        a->vpick_sel = 0;
        a->vpick_from = -1;
        open_modal(a, TUI_MODAL_VERSIONS);
        break;
    case '/':
        tui_app_prompt(a, TUI_ASK_SEARCH, NULL);
        break;
    case 'n':
        search(a, 1, 1);
        break;
    case 'N':
        search(a, -1, 1);
        break;
    case 12: /* Ctrl-L */
        a->full_redraw = 1;
        break;
    case 'a':
        if (review_possible(a))
            approve(a);
        break;
    case 'A':
        if (review_possible(a))
            pend_stage(a, AG_APPROVE, NULL, NULL, 1);
        break;
    case 'u':
        undo(a);
        break;
    case 'r':
        if (review_possible(a))
            tui_app_prompt(a, TUI_ASK_REJECT, NULL);
        break;
    case 'e':
        if (review_possible(a))
            edit(a);
        break;
    case 's':
        if (review_possible(a))
            pend_stage(a, AG_STOP, NULL, NULL, 0);
        break;
    case 'H':
        tui_app_prompt(a, TUI_ASK_GPU, a->gpu_pick);
        break;
    case ':':
        tui_app_prompt(a, TUI_ASK_CMD, NULL);
        break;
    case 't':
        if (a->model.started && !a->model.have_gpu) {
            tui_app_flash(a, 1, "tuning times kernels on a GPU, and this machine has none: run "
                                "ditto tune on one");
        } else if (a->replay || a->run == NULL || a->model.finished) {
            tui_app_flash(a, 1, "nothing to tune: the run is not live");
        } else {
            ag_request_tune(a->run);
            tui_app_flash(a, 0, "tune requested: it runs after the current measurement");
        }
        break;
    default:
        if (a->replay)
            tui_replay_key(a, k);
        break;
    }
}

static void key(tui_app *a, int k, int is_char)
{
    if (!is_char && k == KEY_RESIZE) {
        resized(a);
        return;
    }
    if (!is_char && k == KEY_MOUSE) {
        mouse(a);
        return;
    }
    switch (a->modal) {
    case TUI_MODAL_PROMPT:
        prompt_key(a, k, is_char);
        return;
    case TUI_MODAL_CONFIRM:
        confirm_key(a, k);
        return;
    case TUI_MODAL_TEXT:
        text_key(a, k);
        return;
    case TUI_MODAL_KB:
        if (!tui_kb_key(a, k) && k == '?')
            help(a);
        if (a->modal == TUI_MODAL_NONE)
            close_modal(a);
        return;
    case TUI_MODAL_VERSIONS:
        tui_versions_key(a, k);
        if (a->modal == TUI_MODAL_NONE)
            close_modal(a);
        return;
    case TUI_MODAL_NONE:
        break;
    }
    if (a->model.dirty) {
        tui_app_mark(a, a->model.dirty);
        a->model.dirty = 0;
    }
    tui_pane *p = &a->panes[a->focus];
    tui_pane_refresh(p, a);
    if (p->ops->key(p, a, k))
        return;
    global_key(a, k);
}

/* Esc acts at once (curses waits no escape delay, TUI_ESCDELAY_MS). A
 * key's sequence always arrives whole from the terminal, and curses reads
 * it as one key; should one be split in transit, its tail would follow a
 * lone Esc within moments and read as keys ('[' then 'A' would approve
 * every step): that tail is swallowed here. 1 when k was such a tail. */
static int esc_tail(tui_app *a, int k, int is_char)
{
    if (a->esc_state == 0)
        return 0;
    if (!is_char || dt_now() - a->esc_t > 0.1) {
        a->esc_state = 0;
        return 0;
    }
    if (a->esc_state == 1) {
        /* right after the Esc: CSI ("[") or SS3 ("O") start a tail */
        a->esc_state = k == '[' ? 2 : k == 'O' ? 3 : 0;
        return a->esc_state != 0;
    }
    /* CSI: parameters until a final byte; SS3: one character */
    if (a->esc_state == 3 || (k >= 0x40 && k <= 0x7e))
        a->esc_state = 0;
    return 1;
}

int tui_app_input(tui_app *a)
{
    int n = 0;
    for (;;) {
        wint_t wch;
        int rc = wget_wch(a->input, &wch);
        if (rc == ERR)
            break;
        n++;
        if (esc_tail(a, (int)wch, rc != KEY_CODE_YES))
            continue;
        if (rc != KEY_CODE_YES && wch == 27) {
            a->esc_state = 1;
            a->esc_t = dt_now();
        }
        key(a, (int)wch, rc != KEY_CODE_YES);
        if (a->quit)
            break;
    }
    return n;
}

static void on_tty(dt_loop *l, int fd, int mask, void *ud)
{
    (void)mask;
    tui_app *a = ud;
    if (tui_app_input(a) > 0)
        return;
    /* Readable and no key: the terminal may be gone (its SIGHUP ignored by
     * whoever started us); polling a hung-up tty would spin forever. */
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL))) {
        dt_loop_del_fd(l, fd, 0);
        if (!a->replay && a->run && !ag_run_done(a->run))
            a->exit_code = AG_EXIT_STOPPED;
        a->quit = 1;
    }
}

/* stderr, captured: each line goes to the diagnostics pane. */
static void on_err(dt_loop *l, int fd, int mask, void *ud)
{
    (void)l;
    (void)mask;
    tui_app *a = ud;
    char buf[4096];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0)
        return;
    dt_buf_append(&a->errline, buf, (size_t)n);
    char *nl;
    while ((nl = memchr(a->errline.data, '\n', a->errline.len)) != NULL) {
        *nl = '\0';
        const char *line = a->errline.data;
        int worker = dt_startswith(line, "worker ");
        tui_model_log(&a->model, "warning", worker ? "worker" : "stderr", line);
        size_t used = (size_t)(nl - a->errline.data) + 1;
        memmove(a->errline.data, a->errline.data + used, a->errline.len - used);
        a->errline.len -= used;
        a->errline.data[a->errline.len] = '\0';
    }
}

static void on_winch(dt_loop *l, int fd, int mask, void *ud)
{
    (void)l;
    (void)mask;
    char buf[64];
    while (read(fd, buf, sizeof buf) > 0) {
    }
    resized(ud);
}

static long on_tick(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    tui_app *a = ud;
    if (a->model.running) {
        a->spin++;
        a->panes[TUI_P_STEPS].stale = 1;
    }
    if (a->model.retry_at > 0)
        a->status_dirty = 1; /* the retry's countdown */
    return 200;
}

/* ---- lifecycle -------------------------------------------------------------------------------------------- */

tui_app *tui_app_new(const tui_opts *o, int replay)
{
    tui_app *a = dt_xcalloc(1, sizeof *a);
    a->o = o;
    a->replay = replay;
    a->loop = o->loop ? o->loop : dt_loop_new();
    a->run = replay ? NULL : o->run;
    a->k = o->kb;
    tui_model_init(&a->model);
    for (int i = 0; i < TUI_NPANES; i++) {
        a->panes[i].id = (tui_pane_id)i;
        a->panes[i].ops = pane_ops[i];
        a->panes[i].stale = 1;
    }
    a->panes[TUI_P_REASON].follow = 1;
    a->panes[TUI_P_DIAG].follow = 1;
    a->focus = TUI_P_STEPS;
    a->sel = -1;
    a->sel_follow = 1;
    a->src_from = a->src_to = -1;
    a->src_whole = 1;
    a->src_built_from = a->src_built_to = -2;
    a->err_fd = a->winch_fd = -1;
    a->events = o->events;
    a->nev = cJSON_GetArraySize(o->events);
    a->ev = dt_xcalloc((size_t)a->nev + 1, sizeof *a->ev);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, o->events) a->ev[i++] = it;
    a->vt = dt_xcalloc((size_t)a->nev + 1, sizeof *a->vt);
    tui_timeline(a->ev, a->nev, a->vt);
    a->speed = o->speed > 0 ? o->speed : 1;
    return a;
}

void tui_app_windows(tui_app *a, int utf8)
{
    a->utf8 = utf8;
    tui_theme_init();
    /* Keys are read from a pad: wgetch never refreshes a pad, so reading
     * never paints over the panels. */
    a->input = newpad(1, 1);
    keypad(a->input, TRUE);
    nodelay(a->input, TRUE);
    a->status_win = newwin(2, COLS > 0 ? COLS : 1, LINES > 2 ? LINES - 2 : 0, 0);
    a->status_panel = new_panel(a->status_win);
    fix_slots(a);
    relayout(a);
}

int tui_app_open(tui_app *a, dt_err *e)
{
    if (tui_term_open(&a->err_fd, &a->winch_fd, e) != 0)
        return -1;
    tui_app_windows(a, tui_term_utf8());
    dt_loop_add_fd(a->loop, 0, DT_READABLE, on_tty, a);
    dt_loop_add_fd(a->loop, a->err_fd, DT_READABLE, on_err, a);
    dt_loop_add_fd(a->loop, a->winch_fd, DT_READABLE, on_winch, a);
    dt_loop_set_beforesleep(a->loop, before_sleep, a);
    if (!a->replay)
        a->tick_timer = dt_loop_add_timer(a->loop, 200, on_tick, a);
    relay.a = a;
    return 0;
}

void tui_app_close(tui_app *a)
{
    relay.a = NULL;
    dt_loop_set_beforesleep(a->loop, NULL, NULL);
    dt_loop_del_fd(a->loop, 0, 0);
    if (a->err_fd >= 0) {
        /* what is still in the pipe goes to the real stderr on close */
        dt_loop_del_fd(a->loop, a->err_fd, 0);
        dt_loop_del_fd(a->loop, a->winch_fd, 0);
    }
    if (a->tick_timer)
        dt_loop_del_timer(a->loop, a->tick_timer);
    if (a->play_timer)
        dt_loop_del_timer(a->loop, a->play_timer);
    /* a decision still in its undo window was made: the run gets it */
    a->closing = 1;
    pend_commit(a);
    if (a->flash_timer)
        dt_loop_del_timer(a->loop, a->flash_timer);
    a->flash_timer = 0;
    a->tick_timer = a->play_timer = 0;
    for (int i = 0; i < TUI_NPANES; i++)
        tui_pane_free(&a->panes[i]);
    if (a->mpanel)
        del_panel(a->mpanel);
    if (a->mwin)
        delwin(a->mwin);
    if (a->status_panel)
        del_panel(a->status_panel);
    if (a->status_win)
        delwin(a->status_win);
    if (a->input)
        delwin(a->input);
    a->mpanel = a->status_panel = NULL;
    a->mwin = a->status_win = a->input = NULL;
    tui_term_close();
    a->err_fd = a->winch_fd = -1;
}

void tui_app_free(tui_app *a)
{
    if (a == NULL)
        return;
    tui_model_clear(&a->model);
    tui_lines_clear(&a->text);
    tui_kb_close(a);
    hw_spec_free(a->gpu_spec);
    dt_buf_free(&a->errline);
    tui_replay_free(a);
    cJSON_Delete(a->pend_art);
    free(a->pend_reason);
    free(a->kept_edit);
    free(a->hunk_rej);
    free(a->input_buf);
    free(a->ev);
    if (a->o->loop == NULL)
        dt_loop_free(a->loop);
    free(a);
}

int tui_run_live(const tui_opts *o, dt_err *e)
{
    if (o->loop == NULL || o->run == NULL)
        return dt_err_set(e, "the workbench needs a loop and a run");
    tui_app *a = tui_app_new(o, 0);
    if (o->model)
        snprintf(a->model.model_name, sizeof a->model.model_name, "%s", o->model);
    a->model.price_out = o->price_out;
    if (tui_app_open(a, e) != 0) {
        tui_app_free(a);
        return -1;
    }
    ag_add_sink(o->run, sink, NULL);
    tui_app_render(a);
    dt_err se = {0};
    if (ag_run_start(o->run, o->resume_events, &se) != 0) {
        tui_model_log(&a->model, "error", "ditto", se.msg);
        tui_app_flash(a, 1, "the run could not start: %s (q quits)", se.msg);
        a->exit_code = AG_EXIT_ERROR;
    }
    if (o->model)
        snprintf(a->model.model_name, sizeof a->model.model_name, "%s", o->model);
    while (!a->quit)
        if (dt_loop_run_once(a->loop, -1) < 0 && errno != EINTR)
            break;
    int code = a->exit_code;
    tui_app_close(a);
    tui_app_free(a);
    return code;
}

int tui_run_replay(const tui_opts *o, dt_err *e)
{
    tui_app *a = tui_app_new(o, 1);
    if (tui_app_open(a, e) != 0) {
        tui_app_free(a);
        return -1;
    }
    if (o->title)
        snprintf(a->model.session, sizeof a->model.session, "%s", o->title);
    dt_buf warn = DT_BUF_INIT;
    if (o->notes_path && tui_notes_load(a, o->notes_path, &warn) != 0)
        dt_buf_printf(&warn, "%s: cannot be read; the notes in it are not shown\n", o->notes_path);
    if (o->start_step > 0 && tui_replay_jump_step(a, o->start_step) != 0)
        tui_app_flash(a, 1, "this session has no step %d: opened at its start", o->start_step);
    else if (warn.len)
        tui_app_flash(a, 1, "%s", warn.data); /* the file and line, and what was skipped */
    else
        tui_app_flash(a, 0, "replay: . next, > next step, j jump, space play (x%g), + - speed, m "
                            "note, ? help",
                      a->speed);
    dt_buf_free(&warn);
    while (!a->quit)
        if (dt_loop_run_once(a->loop, -1) < 0 && errno != EINTR)
            break;
    tui_app_close(a);
    tui_app_free(a);
    return 0;
}
