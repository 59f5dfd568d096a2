/* test_replay.c -- replay for teaching: whole agent messages, the replay's
 * clock, jumping to a step, plan diffs; in tmux, --speed and --step, a
 * teacher's notes kept across replays, and the asciicast export. */
#include "tests/tui/tuitest.h"

#include "sessions/sessions.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

#define SLOW  90.0
#define QUICK 30.0

/* ---- the pure parts ------------------------------------------------------------ */

static cJSON *events(const char *json, const cJSON **ev, int *n)
{
    cJSON *e = cJSON_Parse(json);
    cr_assert_not_null(e);
    *n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, e) ev[(*n)++] = it;
    return e;
}

Test(replay_units, a_run_of_text_events_should_move_as_one_message)
{
    const cJSON *ev[16];
    int n;
    cJSON *e = events("[{\"type\":\"step_started\",\"step\":1,\"t\":0},"
                      "{\"type\":\"text\",\"step\":1,\"text\":\"a \",\"t\":1},"
                      "{\"type\":\"text\",\"step\":1,\"text\":\"b \",\"t\":1.1},"
                      "{\"type\":\"text\",\"step\":1,\"text\":\"c\",\"t\":1.2},"
                      "{\"type\":\"artifact\",\"step\":1,\"t\":1.3},"
                      "{\"type\":\"text\",\"step\":1,\"text\":\"d\",\"t\":1.4},"
                      "{\"type\":\"step_finished\",\"step\":1,\"t\":600},"
                      "{\"type\":\"step_started\",\"step\":2,\"t\":601}]",
                      ev, &n);
    cr_assert_eq(tui_replay_unit(ev, n, 0, 1), 1);
    cr_assert_eq(tui_replay_unit(ev, n, 1, 1), 4, "three tokens, one message");
    cr_assert_eq(tui_replay_unit(ev, n, 4, 1), 5);
    cr_assert_eq(tui_replay_unit(ev, n, 5, 1), 6);
    cr_assert_eq(tui_replay_unit(ev, n, 4, -1), 1, "back over the whole message");
    cr_assert_eq(tui_replay_unit(ev, n, 1, -1), 0);
    cr_assert_eq(tui_replay_unit(ev, n, n, 1), n);
    cr_assert_eq(tui_replay_step_end(ev, n, 1), 7);
    cr_assert_eq(tui_replay_step_end(ev, n, 2), 8, "cut off mid-step: all of it");
    cr_assert_eq(tui_replay_step_end(ev, n, 3), -1);
    double vt[16];
    tui_timeline(ev, n, vt);
    cr_assert_float_eq(vt[1], 1.0, 1e-9, "a second plays as a second");
    cr_assert_float_eq(vt[3], 1.2, 1e-9, "tokens keep their pace");
    cr_assert_float_eq(vt[6] - vt[5], 1.0, 1e-9, "ten minutes of waiting play as one second");
    cr_assert_float_eq(vt[7] - vt[6], 1.0, 1e-9);
    cJSON_Delete(e);
}

Test(replay_units, a_second_plan_should_show_what_changed_from_the_first)
{
    setlocale(LC_CTYPE, "C.UTF-8");
    tui_model m;
    tui_model_init(&m);
    cJSON *e = cJSON_Parse(
        "[{\"type\":\"step_started\",\"step\":1,\"kind\":\"plan\",\"version\":1},"
        "{\"type\":\"artifact\",\"step\":1,\"name\":\"plan\",\"json\":{\"strategy\":\"csr-thread\","
        "\"block\":256}},"
        "{\"type\":\"step_finished\",\"step\":1,\"status\":\"rejected\",\"ok\":true},"
        "{\"type\":\"step_started\",\"step\":2,\"kind\":\"plan\",\"version\":2},"
        "{\"type\":\"artifact\",\"step\":2,\"name\":\"plan\",\"json\":{\"strategy\":\"sell16-"
        "thread\","
        "\"block\":256}},"
        "{\"type\":\"step_finished\",\"step\":2,\"status\":\"approved\",\"ok\":true}]");
    const cJSON *it;
    cJSON_ArrayForEach(it, e) tui_model_apply(&m, it);
    tui_lines l = {0};
    tui_reason_build(&m, 1, 70, 0, NULL, NULL, &l);
    cr_assert_geq(tt_lines_find(&l, "Changes from plan v1 (step 1): +1 -1"), 0);
    int del = tt_lines_find(&l, "- \t\"strategy\"");
    if (del < 0)
        del = tt_lines_find(&l, "\"csr-thread\"");
    cr_assert_geq(del, 0);
    cr_assert_eq(l.v[del].role, TUI_R_DEL);
    int add = tt_lines_find(&l, "\"sell16-thread\"");
    cr_assert_geq(add, 0);
    cr_assert_eq(l.v[add].role, TUI_R_ADD);
    cr_assert_lt(tt_lines_find(&l, "\"block\""), 0, "unchanged lines stay out");
    tui_lines_clear(&l);
    tui_reason_build(&m, 0, 70, 0, NULL, NULL, &l);
    cr_assert_lt(tt_lines_find(&l, "Changes from plan"), 0, "the first plan has nothing before");
    tui_lines_clear(&l);
    tui_model_clear(&m);
    cJSON_Delete(e);
}

/* ---- in a terminal ------------------------------------------------------------------ */

static void setup(void)
{
    if (system("tmux -V >/dev/null 2>&1") != 0)
        cr_skip_test("tmux is not installed");
}

TestSuite(replay, .init = setup, .fini = tt_fini);

/* The recorded session under DIR/sessions; its id (caller frees). */
static char *recorded(tt_term *t, int *nev)
{
    tt_init(t);
    char *root = dt_xasprintf("%s/sessions", t->dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    char *id = tt_write_session(root, nev);
    free(root);
    return id;
}

/* Nothing of the note on the screen yet. */
static void s_no_note(tt_term *t)
{
    char *s = tt_screen(t);
    cr_assert_null(strstr(s, "ask the class"), "%s", s);
    free(s);
}

static void replay(tt_term *t, const char *id, const char *opts)
{
    char *args = dt_xasprintf("replay %s --session-dir '%s/sessions' %s", id, t->dir, opts);
    tt_start(t, 120, 40, "C.UTF-8", NULL, args);
    free(args);
}

Test(replay, speed_4_and_step_5_should_land_on_step_5_and_play_from_there)
{
    tt_term t;
    int nev;
    char *id = recorded(&t, &nev);
    replay(&t, id, "--speed 4 --step 5");
    TT_EXPECT(&t, "| step 5/5 |", SLOW);
    TT_EXPECT(&t, "x4 ", QUICK);
    TT_EXPECT(&t, "compile v1  Verifier (static)  (step 5, approved)", QUICK);
    /* not a step further: the next is verify */
    char *s = tt_screen(&t);
    cr_assert_null(strstr(s, "6 verify"), "%s", s);
    free(s);
    /* space plays on at x4: the rest (about 10 s recorded) in seconds */
    tt_keys(&t, "Space");
    TT_EXPECT(&t, "x4 playing", QUICK);
    char end[64];
    snprintf(end, sizeof end, "event %d/%d", nev, nev);
    TT_EXPECT(&t, end, QUICK);
    /* j jumps to a step, by number */
    tt_keys(&t, "j");
    TT_EXPECT(&t, "Jump to step:", QUICK);
    tt_type(&t, "2");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "| step 2/2 |", QUICK);
    tt_keys(&t, "j");
    tt_type(&t, "99");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "this session has no step 99", QUICK);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    tt_assert_no_sanitizer_reports(&t);
    tt_stop(&t);
    free(id);
}

Test(replay, a_note_added_in_one_replay_should_show_in_the_next)
{
    tt_term t;
    int nev;
    char *id = recorded(&t, &nev);
    char *evpath = dt_xasprintf("%s/sessions/%s/events.jsonl", t.dir, id);
    char *notes = dt_xasprintf("%s/sessions/%s/annotations.jsonl", t.dir, id);
    char *before = dt_read_file(evpath, NULL, NULL);
    cr_assert_not_null(before);
    replay(&t, id, "--step 2");
    TT_EXPECT(&t, "| step 2/2 |", SLOW);
    tt_keys(&t, "m");
    TT_EXPECT(&t, "Note for later replays:", QUICK);
    tt_type(&t, "ask the class why SELL wins here");
    tt_keys(&t, "Enter");
    TT_EXPECT(&t, "note kept at event", QUICK);
    TT_EXPECT(&t, "Note (", QUICK);
    TT_EXPECT(&t, "ask the class why SELL wins here", QUICK);
    tt_keys(&t, "q");
    TT_EXPECT(&t, "DITTO-EXIT 0", QUICK);
    /* its own file; the recorded events untouched */
    char *after = dt_read_file(evpath, NULL, NULL);
    cr_assert_str_eq(after, before, "events.jsonl must not change");
    char *n = dt_read_file(notes, NULL, NULL);
    cr_assert_not_null(n, "no %s", notes);
    cr_assert_not_null(strstr(n, "\"text\":\"ask the class why SELL wins here\""), "%s", n);
    cr_assert_not_null(strstr(n, "\"step\":2"), "%s", n);
    free(n);
    free(after);

    /* the next replay (the same session folder): from the start, the note
     * shows when play passes its moment, and stays in the step's reasoning */
    tt_term t2;
    tt_init(&t2);
    char *args = dt_xasprintf("replay %s --session-dir '%s/sessions' --speed 8", id, t.dir);
    tt_start(&t2, 120, 40, "C.UTF-8", NULL, args);
    free(args);
    TT_EXPECT(&t2, "event 0/", SLOW);
    s_no_note(&t2);
    tt_keys(&t2, "Space");
    TT_EXPECT(&t2, "ask the class why SELL wins here", QUICK);
    char end[64];
    snprintf(end, sizeof end, "event %d/%d", nev, nev);
    TT_EXPECT(&t2, end, QUICK);
    /* back on step 2: the note is in its reasoning */
    tt_keys(&t2, "j");
    tt_type(&t2, "2");
    tt_keys(&t2, "Enter");
    TT_EXPECT(&t2, "| step 2/2 |", QUICK);
    TT_EXPECT(&t2, "ask the class why SELL wins here", QUICK);
    tt_keys(&t2, "q");
    TT_EXPECT(&t2, "DITTO-EXIT 0", QUICK);
    tt_assert_no_sanitizer_reports(&t2);
    tt_stop(&t2);
    tt_stop(&t);
    free(before);
    free(evpath);
    free(notes);
    free(id);
}

Test(replay, export_should_write_a_valid_asciicast_v2_recording)
{
    tt_term t;
    int nev;
    char *id = recorded(&t, &nev);
    char *cast = dt_xasprintf("%s/class.cast", t.dir);
    tu_proc p = tu_run("cd '%s' && XDG_DATA_HOME='%s/data' '%s' replay %s --session-dir "
                       "'%s/sessions' --speed 2 --export '%s' --size 100x30 </dev/null",
                       t.dir, t.dir, tu_ditto_bin(), id, t.dir, cast);
    cr_assert_eq(p.status, 0, "%s%s", p.out, p.err);
    cr_assert_not_null(strstr(p.out, "asciicast v2, 100x30"), "%s", p.out);
    tu_proc_free(&p);
    char *text = dt_read_file(cast, NULL, NULL);
    cr_assert_not_null(text);
    /* line 1: the header; then [seconds, "o", text], seconds never going back */
    int line = 0, frames = 0;
    double last = 0;
    dt_buf all = DT_BUF_INIT;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        dt_err e = {0};
        cJSON *j = dt_json_parse(l, strlen(l), "cast line", &e);
        cr_assert_not_null(j, "line %d: %s", line + 1, e.msg);
        if (line++ == 0) {
            cr_assert_eq(dt_json_num(j, "version", 0), 2);
            cr_assert_eq(dt_json_num(j, "width", 0), 100);
            cr_assert_eq(dt_json_num(j, "height", 0), 30);
            cr_assert_gt(dt_json_num(j, "timestamp", 0), 1.6e9);
        } else {
            cr_assert(cJSON_IsArray(j) && cJSON_GetArraySize(j) == 3, "line %d: %s", line, l);
            const cJSON *tm = cJSON_GetArrayItem(j, 0), *k = cJSON_GetArrayItem(j, 1),
                        *d = cJSON_GetArrayItem(j, 2);
            cr_assert(cJSON_IsNumber(tm) && tm->valuedouble >= last, "line %d: time", line);
            cr_assert(cJSON_IsString(k) && strcmp(k->valuestring, "o") == 0);
            cr_assert(cJSON_IsString(d));
            last = tm->valuedouble;
            dt_buf_puts(&all, d->valuestring);
            frames++;
        }
        cJSON_Delete(j);
    }
    cr_assert_gt(frames, 10, "a frame per event or message");
    /* the events recorded about 10 s (gaps of 0.25 s), at x2: about 5 s */
    cr_assert(last > 2 && last < 20, "the recording lasts %g s", last);
    cr_assert_not_null(strstr(all.data, "Steps"), "the workbench is drawn");
    cr_assert_not_null(strstr(all.data, "a verified kernel"), "it plays to the end");
    dt_buf_free(&all);
    free(text);
    /* a bad size is refused with the option named */
    p = tu_run("'%s' replay %s --session-dir '%s/sessions' --export x.cast --size 10x5",
               tu_ditto_bin(), id, t.dir);
    cr_assert_eq(p.status, 2);
    cr_assert_not_null(strstr(p.err, "--size takes COLSxROWS"), "%s", p.err);
    tu_proc_free(&p);
    free(cast);
    free(id);
    tt_stop(&t);
}
