/* export.c -- a replay rendered without a terminal into an asciicast v2
 * recording: curses draws into a temporary file, and each frame's bytes
 * become one [seconds, "o", text] line after the header. */
#include "tui/ui.h"

#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* How long a note stays on the key row of the recording. */
#define NOTE_SHOWN_S 4.0

/* The curses screen of the last export: kept, like term.c's, because the
 * panel library's root panel would leak with delscreen. */
static SCREEN *cast_screen;

/* Append the bytes curses wrote since *off as one event line at t. */
static int frame(FILE *term, long *off, FILE *out, double t)
{
    fflush(term);
    long end = ftell(term);
    if (end < 0)
        return -1;
    if (end == *off)
        return 0;
    size_t n = (size_t)(end - *off);
    char *buf = dt_xmalloc(n + 1);
    ssize_t got = pread(fileno(term), buf, n, *off);
    if (got != (ssize_t)n) {
        free(buf);
        return -1;
    }
    buf[n] = '\0';
    *off = end;
    cJSON *ev = cJSON_CreateArray();
    cJSON_AddItemToArray(ev, cJSON_CreateNumber(t));
    cJSON_AddItemToArray(ev, cJSON_CreateString("o"));
    cJSON_AddItemToArray(ev, cJSON_CreateString(buf));
    char *line = dt_json_print(ev, 0);
    int rc = fprintf(out, "%s\n", line) < 0 ? -1 : 0;
    free(line);
    cJSON_Delete(ev);
    free(buf);
    return rc;
}

int tui_export_cast(const tui_opts *o, const char *path, int cols, int rows, dt_err *e)
{
    if (cast_screen != NULL)
        return dt_err_set(e, "one export per process");
    FILE *out = fopen(path, "w");
    if (out == NULL)
        return dt_err_set(e, "%s: %s", path, strerror(errno));
    FILE *term = tmpfile();
    FILE *in = fopen("/dev/null", "r");
    if (term == NULL || in == NULL) {
        dt_err_set(e, "a temporary file for the frames: %s", strerror(errno));
        goto fail_files;
    }
    /* a recording is UTF-8 (asciinema's players expect it) */
    setlocale(LC_ALL, "");
    if (strcmp(nl_langinfo(CODESET), "UTF-8") != 0)
        setlocale(LC_CTYPE, "C.UTF-8");
    setlocale(LC_NUMERIC, "C");
    int utf8 = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    /* the size comes from the environment: the output is no terminal */
    char c[16], r[16];
    snprintf(c, sizeof c, "%d", cols);
    snprintf(r, sizeof r, "%d", rows);
    setenv("COLUMNS", c, 1);
    setenv("LINES", r, 1);
    use_env(TRUE);
    const char *tname = "xterm-256color";
    cast_screen = newterm(tname, term, in);
    if (cast_screen == NULL) {
        tname = "xterm";
        cast_screen = newterm(tname, term, in);
    }
    if (cast_screen == NULL) {
        dt_err_set(e, "no terminal description for xterm-256color or xterm (install ncurses-term "
                      "or set TERMINFO)");
        goto fail_files;
    }
    set_term(cast_screen);
    noecho();
    curs_set(0);
    if (LINES != rows || COLS != cols)
        resizeterm(rows, cols);

    cJSON *h = dt_json_obj();
    dt_json_set_int(h, "version", 2);
    dt_json_set_int(h, "width", cols);
    dt_json_set_int(h, "height", rows);
    dt_json_set_int(h, "timestamp", (int64_t)dt_wall_now());
    char *title = dt_xasprintf("ditto replay %s", o->title ? o->title : "");
    dt_json_set_str(h, "title", title);
    free(title);
    cJSON *env = dt_json_obj();
    dt_json_set_str(env, "TERM", tname);
    dt_json_set_take(h, "env", env);
    char *hl = dt_json_print(h, 0);
    cJSON_Delete(h);
    fprintf(out, "%s\n", hl);
    free(hl);

    tui_app *a = tui_app_new(o, 1);
    if (o->title)
        snprintf(a->model.session, sizeof a->model.session, "%s", o->title);
    tui_app_windows(a, utf8);
    dt_buf warn = DT_BUF_INIT;
    if (o->notes_path)
        tui_notes_load(a, o->notes_path, &warn);
    dt_buf_free(&warn);
    if (o->start_step > 0 && tui_replay_jump_step(a, o->start_step) != 0)
        dt_err_set(e, "this session has no step %d", o->start_step);
    int rc = e->msg[0] ? -1 : 0;
    long off = 0;
    double t = 0, note_t = -1;
    double vt0 = a->pos < a->nev ? a->vt[a->pos] : 0;
    a->flash[0] = '\0';
    while (rc == 0) {
        if (a->flash[0] && note_t < 0)
            note_t = t;
        if (a->flash[0] && t - note_t > NOTE_SHOWN_S) {
            a->flash[0] = '\0';
            note_t = -1;
            a->status_dirty = 1;
        }
        a->flash_until = dt_now() + 3600; /* the recording's clock decides */
        tui_app_render(a);
        if (frame(term, &off, out, t) != 0) {
            rc = dt_err_set(e, "%s: %s", path, strerror(errno));
            break;
        }
        if (a->pos >= a->nev)
            break;
        int next = tui_replay_unit(a->ev, a->nev, a->pos, 1);
        double nt = (a->vt[next - 1] - vt0) / (a->speed > 0 ? a->speed : 1);
        /* one frame per unit, never two at the same moment */
        t = nt > t ? nt : t + 0.001;
        int had_flash = a->flash[0] != '\0';
        tui_replay_seek(a, next);
        if (a->flash[0] && !had_flash)
            note_t = t;
    }
    tui_app_close(a); /* the windows (the terminal it restores is not this one) */
    endwin();
    tui_app_free(a);
    if (fclose(out) != 0 && rc == 0)
        rc = dt_err_set(e, "%s: %s", path, strerror(errno));
    fclose(term);
    fclose(in);
    return rc;

fail_files:
    fclose(out);
    if (term)
        fclose(term);
    if (in)
        fclose(in);
    return -1;
}
