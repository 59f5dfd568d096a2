/* replay.c -- the workbench on a recorded session, for teaching: playing on
 * the recording's own clock at a chosen speed, moving by whole agent
 * messages and steps, jumping to a step, and a teacher's notes kept in the
 * session folder (annotations.jsonl, never in events.jsonl) that show again
 * at their moment in later replays. */
#include "tui/ui.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A pause longer than this in the recording (a person thinking, a long
 * compile) plays as this long: the class should not wait ten minutes. */
#define GAP_CAP_S      1.0
#define NOTES_MAX      10000     /* notes read from one file */
#define NOTES_FILE_MAX (4 << 20) /* bytes read from annotations.jsonl */
#define NOTE_TEXT_MAX  4000      /* characters of one note */

/* ---- the timeline ------------------------------------------------------------- */

void tui_timeline(const cJSON *const *ev, int nev, double *vt)
{
    double prev = 0;
    for (int i = 0; i < nev; i++) {
        double t = dt_json_num(ev[i], "t", prev);
        double gap = i == 0 ? 0 : t - prev;
        if (gap < 0)
            gap = 0;
        if (gap > GAP_CAP_S)
            gap = GAP_CAP_S;
        vt[i] = i == 0 ? 0 : vt[i - 1] + gap;
        if (i == 0 || t > prev)
            prev = t;
    }
}

static int is_text(const cJSON *ev, int *step)
{
    if (!dt_streq(dt_json_str(ev, "type", ""), "text"))
        return 0;
    *step = (int)dt_json_num(ev, "step", 0);
    return 1;
}

int tui_replay_unit(const cJSON *const *ev, int nev, int pos, int dir)
{
    int s0, s;
    if (dir > 0) {
        if (pos >= nev)
            return nev;
        /* a run of one step's text events moves as one message */
        if (!is_text(ev[pos], &s0))
            return pos + 1;
        int i = pos + 1;
        while (i < nev && is_text(ev[i], &s) && s == s0)
            i++;
        return i;
    }
    if (pos <= 0)
        return 0;
    if (!is_text(ev[pos - 1], &s0))
        return pos - 1;
    int i = pos - 1;
    while (i > 0 && is_text(ev[i - 1], &s) && s == s0)
        i--;
    return i;
}

int tui_replay_step_end(const cJSON *const *ev, int nev, int step)
{
    int started = -1;
    for (int i = 0; i < nev; i++) {
        const char *type = dt_json_str(ev[i], "type", "");
        int id = (int)dt_json_num(ev[i], "step", 0);
        if (id != step)
            continue;
        if (dt_streq(type, "step_started"))
            started = i;
        else if (dt_streq(type, "step_finished") && started >= 0)
            return i + 1;
    }
    /* cut off mid-step: all of it that was recorded */
    if (started >= 0) {
        int last = started;
        for (int i = started; i < nev; i++)
            if ((int)dt_json_num(ev[i], "step", 0) == step)
                last = i;
        return last + 1;
    }
    return -1;
}

/* ---- notes ---------------------------------------------------------------------- */

static void note_add(tui_app *a, int pos, int step, const char *by, const char *text)
{
    if (a->nnotes == a->capnotes) {
        a->capnotes = a->capnotes ? 2 * a->capnotes : 8;
        a->notes = dt_xrealloc(a->notes, (size_t)a->capnotes * sizeof *a->notes);
    }
    tui_note *n = &a->notes[a->nnotes++];
    n->pos = pos;
    n->step = step;
    snprintf(n->by, sizeof n->by, "%s", by);
    n->text = dt_xstrdup(text);
}

int tui_notes_load(tui_app *a, const char *path, dt_buf *warn)
{
    size_t len = 0;
    dt_err e = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    dt_buf b = DT_BUF_INIT;
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0 && b.len < NOTES_FILE_MAX)
        dt_buf_append(&b, chunk, (size_t)n);
    close(fd);
    if (b.len >= NOTES_FILE_MAX)
        dt_buf_printf(warn, "%s: only the first %d bytes are read\n", path, NOTES_FILE_MAX);
    int line = 0;
    char *p = b.data;
    while (p && *p && a->nnotes < NOTES_MAX) {
        char *nl = strchr(p, '\n');
        len = nl ? (size_t)(nl - p) : strlen(p);
        line++;
        if (len > 0) {
            cJSON *j = dt_json_parse(p, len, path, &e);
            const char *text = dt_json_str(j, "text", NULL);
            if (j == NULL || text == NULL || !cJSON_IsNumber(cJSON_GetObjectItem(j, "pos")))
                dt_buf_printf(warn,
                              "%s:%d: not a note (a JSON object with pos and text); "
                              "skipped\n",
                              path, line);
            else
                note_add(a, (int)dt_json_num(j, "pos", 0), (int)dt_json_num(j, "step", 0),
                         dt_json_str(j, "by", "?"), text);
            cJSON_Delete(j);
        }
        p = nl ? nl + 1 : NULL;
    }
    dt_buf_free(&b);
    return 0;
}

/* Who writes a note: --reviewer's name, else $USER, else "teacher". */
static const char *note_by(const tui_app *a)
{
    if (a->o->reviewer && *a->o->reviewer)
        return a->o->reviewer;
    const char *u = getenv("USER");
    return u && *u ? u : "teacher";
}

/* Append one note as a JSON line: the position (events applied), the step
 * shown, the last event's seq and time, who and when. */
static int note_save(tui_app *a, int pos, int step, const char *text, dt_err *e)
{
    cJSON *j = dt_json_obj();
    dt_json_set_int(j, "pos", pos);
    dt_json_set_int(j, "step", step);
    if (pos > 0) {
        dt_json_set_num(j, "seq", dt_json_num(a->ev[pos - 1], "seq", 0));
        dt_json_set_num(j, "t", dt_json_num(a->ev[pos - 1], "t", 0));
    }
    dt_json_set_str(j, "by", note_by(a));
    dt_json_set_num(j, "at", dt_wall_now());
    dt_json_set_str(j, "text", text);
    char *line = dt_json_print(j, 0);
    cJSON_Delete(j);
    size_t len = strlen(line);
    line[len] = '\n'; /* the terminator goes, the newline comes */
    int fd = open(a->o->notes_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    int rc = -1;
    if (fd < 0) {
        dt_err_set(e, "%s: %s", a->o->notes_path, strerror(errno));
    } else if (write(fd, line, len + 1) != (ssize_t)(len + 1) || fsync(fd) != 0) {
        dt_err_set(e, "%s: %s", a->o->notes_path, strerror(errno));
    } else {
        rc = 0;
    }
    if (fd >= 0)
        close(fd);
    free(line);
    return rc;
}

void tui_replay_note(tui_app *a, const char *text)
{
    if (a->o->notes_path == NULL) {
        tui_app_flash(a, 1, "this replay has no session folder to keep notes in");
        return;
    }
    if (*text == '\0') {
        tui_app_flash(a, 0, "no note: it was empty");
        return;
    }
    if ((int)strlen(text) > NOTE_TEXT_MAX) {
        tui_app_flash(a, 1, "the note is %d characters, more than %d: nothing was saved",
                      (int)strlen(text), NOTE_TEXT_MAX);
        return;
    }
    int si = tui_app_sel(a);
    int step = si >= 0 ? a->model.steps[si].id : 0;
    dt_err e = {0};
    if (note_save(a, a->pos, step, text, &e) != 0) {
        tui_app_flash(a, 1, "the note was not saved: %s", e.msg);
        return;
    }
    note_add(a, a->pos, step, note_by(a), text);
    tui_app_mark(a, TUI_D_REASON);
    tui_app_flash(a, 0, "note kept at event %d (in %s)", a->pos, a->o->notes_path);
}

/* The notes a move from `from` to `to` passed (forward) or landed on:
 * the last of them is put up front. */
static void show_notes(tui_app *a, int from, int to)
{
    const tui_note *hit = NULL;
    for (int i = 0; i < a->nnotes; i++) {
        const tui_note *n = &a->notes[i];
        if ((to > from && n->pos > from && n->pos <= to) || n->pos == to)
            hit = n;
    }
    if (hit)
        tui_app_flash(a, 0, "Note (%s, event %d): %s", hit->by, hit->pos, hit->text);
}

/* ---- moving --------------------------------------------------------------------- */

void tui_replay_seek(tui_app *a, int pos)
{
    if (pos < 0)
        pos = 0;
    if (pos > a->nev)
        pos = a->nev;
    int from = a->pos;
    if (pos < a->pos) {
        /* back: rebuild from the start (events are cheap to apply) */
        tui_model_clear(&a->model);
        a->pos = 0;
    }
    while (a->pos < pos)
        tui_app_event(a, a->ev[a->pos++]);
    a->model.dirty = TUI_D_ALL;
    a->status_dirty = 1;
    if (pos != from)
        show_notes(a, from, pos);
}

int tui_replay_jump_step(tui_app *a, int step)
{
    int at = tui_replay_step_end(a->ev, a->nev, step);
    if (at < 0)
        return -1;
    tui_replay_seek(a, at);
    int si = tui_model_step_index(&a->model, step);
    if (si >= 0)
        tui_app_select(a, si, si == a->model.nsteps - 1);
    return 0;
}

/* The position just after the next (dir 1) or previous (dir -1) step_finished. */
static int step_boundary(tui_app *a, int dir)
{
    int i = dir > 0 ? a->pos : a->pos - 2;
    for (; i >= 0 && i < a->nev; i += dir) {
        if (dt_streq(dt_json_str(a->ev[i], "type", ""), "step_finished"))
            return i + 1;
    }
    return dir > 0 ? a->nev : 0;
}

/* Playing: every 30 ms, apply what the recording's clock (gaps capped,
 * times the speed) has reached since play began. */
static long on_play(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    tui_app *a = ud;
    if (!a->playing || a->pos >= a->nev) {
        a->playing = 0;
        a->play_timer = 0;
        a->status_dirty = 1;
        return DT_LOOP_NOMORE;
    }
    double target = a->play_vt0 + (dt_now() - a->play_t0) * a->speed;
    int to = a->pos;
    while (to < a->nev && a->vt[to] <= target)
        to++;
    if (to > a->pos)
        tui_replay_seek(a, to);
    return 30;
}

static void play_rebase(tui_app *a)
{
    a->play_t0 = dt_now();
    a->play_vt0 = a->pos < a->nev ? a->vt[a->pos] : 0;
    /* the next event is due at once */
    if (a->pos > 0 && a->pos < a->nev)
        a->play_vt0 = a->vt[a->pos];
}

void tui_replay_set_speed(tui_app *a, double speed)
{
    if (speed < 0.125)
        speed = 0.125;
    if (speed > 64)
        speed = 64;
    a->speed = speed;
    play_rebase(a);
    a->status_dirty = 1;
}

int tui_replay_key(tui_app *a, int k)
{
    switch (k) {
    case '.':
        tui_replay_seek(a, tui_replay_unit(a->ev, a->nev, a->pos, 1));
        break;
    case ',':
        tui_replay_seek(a, tui_replay_unit(a->ev, a->nev, a->pos, -1));
        break;
    case '>':
        tui_replay_seek(a, step_boundary(a, 1));
        break;
    case '<':
        tui_replay_seek(a, step_boundary(a, -1));
        break;
    case '0':
        tui_replay_seek(a, 0);
        break;
    case '$':
        tui_replay_seek(a, a->nev);
        break;
    case '+':
    case '=':
        tui_replay_set_speed(a, a->speed * 2);
        tui_app_flash(a, 0, "speed x%g", a->speed);
        break;
    case '-':
        tui_replay_set_speed(a, a->speed / 2);
        tui_app_flash(a, 0, "speed x%g", a->speed);
        break;
    case 'j':
        tui_app_prompt(a, TUI_ASK_JUMP, NULL);
        break;
    case 'm':
        tui_app_prompt(a, TUI_ASK_NOTE, NULL);
        break;
    case ' ':
        a->playing = !a->playing;
        play_rebase(a);
        if (a->playing && a->play_timer == 0)
            a->play_timer = dt_loop_add_timer(a->loop, 30, on_play, a);
        a->status_dirty = 1;
        break;
    default:
        return 0;
    }
    return 1;
}

/* ---- the notes in the reasoning pane ------------------------------------------------ */

int tui_replay_notes_for(const tui_app *a, int step)
{
    int n = 0;
    for (int i = 0; i < a->nnotes; i++)
        n += a->notes[i].step == step && a->notes[i].pos <= a->pos;
    return n;
}

typedef struct nwrap {
    tui_lines *out;
    int first;
} nwrap;

static void note_piece(const char *s, int len, void *ud)
{
    nwrap *w = ud;
    dt_buf b = DT_BUF_INIT;
    if (!w->first)
        dt_buf_puts(&b, "  ");
    dt_buf_append(&b, s, (size_t)len);
    tui_lines_add(w->out, b.data, (int)b.len, TUI_R_LINK);
    w->first = 0;
    dt_buf_free(&b);
}

void tui_replay_note_lines(const tui_app *a, int step, int width, tui_lines *out)
{
    for (int i = 0; i < a->nnotes; i++) {
        const tui_note *n = &a->notes[i];
        if (n->step != step || n->pos > a->pos)
            continue;
        char *t = dt_xasprintf("Note (%s, event %d): %s", n->by, n->pos, n->text);
        nwrap w = {out, 1};
        tui_wrap(t, (int)strlen(t), width > 12 ? width - 2 : width, note_piece, &w);
        free(t);
    }
}

void tui_replay_free(tui_app *a)
{
    for (int i = 0; i < a->nnotes; i++)
        free(a->notes[i].text);
    free(a->notes);
    free(a->vt);
    a->notes = NULL;
    a->vt = NULL;
    a->nnotes = a->capnotes = 0;
}
