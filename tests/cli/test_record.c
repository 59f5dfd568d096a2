/* test_record.c -- what `ditto run`, `ditto resume` and the workbench record
 * of a run before and around its steps: the workbench, like the headless
 * run, refuses to start a run it cannot record (unless --no-session), and
 * `resume --clear` drops flags the session recorded and records that. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHOW(p) "exit %d\nstdout:\n%s\nstderr:\n%s", (p).status, (p).out, (p).err

/* The environment of every ditto command of a test. */
#define ENV "XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' XDG_CONFIG_HOME='%s/config' "

static char *write_spec(const char *dir, const char *review)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,seed=2\", "
             "\"dtype\": \"fp32\", \"review\": \"%s\"}",
             review);
    return tu_write(dir, "spec.json", text);
}

/* ---- the workbench records before any step ------------------------------------------------ */

Test(record, the_workbench_should_not_open_on_a_session_it_cannot_record, .timeout = 120)
{
    if (system("script --version >/dev/null 2>&1") != 0)
        cr_skip_test("script (util-linux) is not installed: no terminal to open the workbench in");
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    /* a session folder under a plain file: creating it fails, even as root */
    char *file = tu_write(dir, "notadir", "");
    char *log = dt_xasprintf("%s/requests.log", dir);
    char *report = tu_write(dir, "report.json", "{}");
    char *launcher = dt_xasprintf("env FAKE_ORCH_LOG=%s FAKE_ORCH_REPORT=%s "
                                  "%s/tests/agents/fake-orch-worker.sh",
                                  log, report, tu_src_dir());
    /* the workbench needs a terminal: script gives it one; a workbench
     * that opens anyway runs until the timeout (status 124), in DIR (where
     * an unrecorded run writes its best kernel) */
    tu_proc p = tu_run("cd '%s' && " ENV "timeout -k 5 60 script -qec \"'%s' tui '%s' "
                       "--session-dir '%s/sessions' --launcher '%s'\" /dev/null < /dev/null",
                       dir, dir, dir, dir, tu_ditto_bin(), spec, file, launcher);
    cr_assert_eq(p.status, 6, SHOW(p));
    cr_assert(strstr(p.out, "cannot record the session") && strstr(p.out, "Not a directory") &&
                  strstr(p.out, "--no-session"),
              SHOW(p));
    /* no step ran: the worker never loaded the matrix */
    char *reqs = dt_read_file(log, NULL, NULL);
    cr_assert(reqs == NULL || strstr(reqs, "load_matrix") == NULL, "requests:\n%s", reqs);
    free(reqs);
    tu_proc_free(&p);
    free(launcher);
    free(report);
    free(log);
    free(file);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(record, the_headless_run_should_not_start_on_a_session_it_cannot_record, .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    char *file = tu_write(dir, "notadir", "");
    tu_proc p = tu_run(ENV "'%s' run '%s' --session-dir '%s/sessions' < /dev/null", dir, dir, dir,
                       tu_ditto_bin(), spec, file);
    cr_assert_eq(p.status, 6, SHOW(p));
    cr_assert(strstr(p.err, "cannot record the session") && strstr(p.err, "nothing was run"),
              SHOW(p));
    cr_assert(strstr(p.out, "profile") == NULL, "a step ran:\n%s", p.out);
    tu_proc_free(&p);
    free(file);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* ---- resume --clear ------------------------------------------------------------------------ */

static cJSON *events_of(const char *sdir)
{
    char *p = dt_xasprintf("%s/events.jsonl", sdir);
    char *text = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(text, "no %s", p);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "bad line in %s: %.200s", p, l);
        cJSON_AddItemToArray(arr, j);
    }
    free(text);
    free(p);
    return arr;
}

static const cJSON *last_of(const cJSON *ev, const char *type)
{
    const cJSON *found = NULL, *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), type))
            found = e;
    }
    return found;
}

/* How often the hook's line is in the reasoning after the last
 * session_resumed (or in the whole log when there is none). */
static int hook_lines_since_resume(const cJSON *ev)
{
    const cJSON *from = last_of(ev, "session_resumed"), *e;
    int after = from == NULL, n = 0;
    cJSON_ArrayForEach(e, ev)
    {
        after |= e == from;
        n += after && dt_streq(dt_json_str(e, "type", ""), "text") &&
             strstr(dt_json_str(e, "text", ""), "hook-ran-before-profile") != NULL;
    }
    return n;
}

static int has_string(const cJSON *arr, const char *s)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, arr)
    {
        if (cJSON_IsString(x) && dt_streq(x->valuestring, s))
            return 1;
    }
    return 0;
}

Test(record, resume_clear_should_drop_recorded_flags_and_record_that, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    char *hook = tu_write(dir, "hook.lua",
                          "ditto.on('profile', 'before', function(data)\n"
                          "  ditto.log('hook-ran-before-profile')\nend)\n");
    char *sroot = dt_xasprintf("%s/sessions", dir);
    /* the run asks at the profile review; stdin is closed: it stops there,
     * resumable, with its flags recorded */
    tu_proc p = tu_run(ENV "'%s' run '%s' --session-dir '%s' --hook '%s' --model my-model "
                           "--goal 1.5 < /dev/null",
                       dir, dir, dir, tu_ditto_bin(), spec, sroot, hook);
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    p = tu_run("ls -d '%s'/*/ | head -n 1", sroot);
    char *sd = dt_xstrdup(p.out);
    tu_proc_free(&p);
    sd[strcspn(sd, "\n")] = '\0';
    if (sd[0] && sd[strlen(sd) - 1] == '/')
        sd[strlen(sd) - 1] = '\0';
    cr_assert(sd[0], "no session");
    const char *id = strrchr(sd, '/') + 1;
    cJSON *ev = events_of(sd);
    const cJSON *fl = cJSON_GetObjectItem(last_of(ev, "session_started"), "flags");
    cr_assert(has_string(cJSON_GetObjectItem(fl, "hooks"), hook), "hooks not recorded");
    cr_assert_str_eq(dt_json_str(fl, "model", ""), "my-model");
    cr_assert_eq(hook_lines_since_resume(ev), 1, "the hook did not run in the first run");
    cJSON_Delete(ev);

    /* resume dropping the hook and the model; the goal stays recorded */
    p = tu_run(ENV "'%s' resume '%s' --session-dir '%s' --clear hooks,model < /dev/null", dir, dir,
               dir, tu_ditto_bin(), id, sroot);
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    ev = events_of(sd);
    fl = cJSON_GetObjectItem(last_of(ev, "session_resumed"), "flags");
    cr_assert_null(cJSON_GetObjectItem(fl, "hooks"), "the cleared hooks are still recorded");
    cr_assert_null(cJSON_GetObjectItem(fl, "model"), "the cleared model is still recorded");
    const cJSON *cleared = cJSON_GetObjectItem(fl, "cleared");
    cr_assert(has_string(cleared, "hooks") && has_string(cleared, "model") &&
                  cJSON_GetArraySize(cleared) == 2,
              "the clearing is not recorded");
    cr_assert_eq(dt_json_num(fl, "goal", 0), 1.5, "a flag not cleared was lost");
    cr_assert_eq(hook_lines_since_resume(ev), 0, "the cleared hook ran");
    cJSON_Delete(ev);
    /* `sessions show` says what the next resume restores */
    p = tu_run(ENV "'%s' sessions show '%s' --session-dir '%s'", dir, dir, dir, tu_ditto_bin(), id,
               sroot);
    cr_assert_eq(p.status, 0, SHOW(p));
    cr_assert(strstr(p.out, "state          stopped, resumable\n"), SHOW(p));
    const char *sec = strstr(p.out, "flags (what ditto resume restores)");
    cr_assert(sec && strstr(sec, "cleared") && strstr(sec, "[\"model\",\"hooks\"]") &&
                  strstr(sec, "goal"),
              SHOW(p));
    cr_assert(strstr(sec, "my-model") == NULL, SHOW(p));
    tu_proc_free(&p);
    p = tu_run(ENV "'%s' sessions show '%s' --session-dir '%s' --json", dir, dir, dir,
               tu_ditto_bin(), id, sroot);
    cJSON *sj = cJSON_Parse(p.out);
    cr_assert_not_null(sj, SHOW(p));
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(sj, "flags"), "goal", 0), 1.5, SHOW(p));
    cr_assert(has_string(cJSON_GetObjectItem(cJSON_GetObjectItem(sj, "flags"), "cleared"), "hooks"),
              SHOW(p));
    cJSON_Delete(sj);
    tu_proc_free(&p);

    /* the next plain resume keeps them cleared */
    p = tu_run(ENV "'%s' resume '%s' --session-dir '%s' < /dev/null", dir, dir, dir, tu_ditto_bin(),
               id, sroot);
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    ev = events_of(sd);
    fl = cJSON_GetObjectItem(last_of(ev, "session_resumed"), "flags");
    cr_assert_null(cJSON_GetObjectItem(fl, "hooks"));
    cr_assert_null(cJSON_GetObjectItem(fl, "model"));
    cr_assert_eq(dt_json_num(fl, "goal", 0), 1.5);
    cr_assert_eq(hook_lines_since_resume(ev), 0, "the hook came back");
    cJSON_Delete(ev);

    /* a flag given with --clear is the one used (clearing drops only the
     * recorded value) */
    p = tu_run(ENV "'%s' resume '%s' --session-dir '%s' --clear goal --goal 2 < /dev/null", dir,
               dir, dir, tu_ditto_bin(), id, sroot);
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    ev = events_of(sd);
    fl = cJSON_GetObjectItem(last_of(ev, "session_resumed"), "flags");
    cr_assert_eq(dt_json_num(fl, "goal", 0), 2.0);
    cJSON_Delete(ev);
    free(sd);
    free(sroot);
    free(hook);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(record, a_switch_made_in_the_workbench_should_be_restored_on_resume, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    char *sroot = dt_xasprintf("%s/sessions", dir);
    tu_proc p = tu_run(ENV "'%s' run '%s' --session-dir '%s' --model flag-model < /dev/null", dir,
                       dir, dir, tu_ditto_bin(), spec, sroot);
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    p = tu_run("ls -d '%s'/*/ | head -n 1", sroot);
    char *sd = dt_xstrdup(p.out);
    tu_proc_free(&p);
    sd[strcspn(sd, "\n")] = '\0';
    if (sd[0] && sd[strlen(sd) - 1] == '/')
        sd[strlen(sd) - 1] = '\0';
    cr_assert(sd[0], "no session");
    /* the person switched the model with ':' after the run started: the
     * event the workbench records (ag_set_brain) */
    cJSON *ev = events_of(sd);
    cJSON *last = cJSON_GetArrayItem(ev, cJSON_GetArraySize(ev) - 1);
    char *line = dt_xasprintf("{\"seq\":%.0f,\"t\":%.3f,\"type\":\"log\",\"level\":\"info\","
                              "\"message\":\"model switched to switched-model for the next "
                              "steps\",\"setting\":\"model\",\"value\":\"switched-model\","
                              "\"by\":\"person\"}\n",
                              dt_json_num(last, "seq", 0) + 1, dt_json_num(last, "t", 0) + 1);
    cJSON_Delete(ev);
    char *lp = dt_xasprintf("%s/events.jsonl", sd);
    FILE *f = fopen(lp, "a");
    cr_assert_not_null(f);
    fputs(line, f);
    fclose(f);
    p = tu_run(ENV "'%s' resume '%s' --session-dir '%s' < /dev/null", dir, dir, dir, tu_ditto_bin(),
               strrchr(sd, '/') + 1, sroot);
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    ev = events_of(sd);
    const cJSON *fl = cJSON_GetObjectItem(last_of(ev, "session_resumed"), "flags");
    cr_assert_str_eq(dt_json_str(fl, "model", ""), "switched-model",
                     "the person's switch was replaced by the flag given at the start");
    cJSON_Delete(ev);
    free(lp);
    free(line);
    free(sd);
    free(sroot);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(record, clear_should_be_refused_outside_resume_and_for_unknown_flags)
{
    tu_proc p = tu_run("'%s' run spec.json --clear hooks", tu_ditto_bin());
    cr_assert_eq(p.status, 2, SHOW(p));
    cr_assert(strstr(p.err, "--clear") && strstr(p.err, "ditto resume"), SHOW(p));
    tu_proc_free(&p);
    p = tu_run("'%s' resume some-id --clear hooks,colour", tu_ditto_bin());
    cr_assert_eq(p.status, 2, SHOW(p));
    cr_assert(strstr(p.err, "'colour' is no recorded flag") && strstr(p.err, "api-key-env"),
              SHOW(p));
    tu_proc_free(&p);
    p = tu_run("'%s' resume some-id --clear ,", tu_ditto_bin());
    cr_assert_eq(p.status, 2, SHOW(p));
    tu_proc_free(&p);
    p = tu_run("'%s' resume --help", tu_ditto_bin());
    cr_assert(strstr(p.out, "--clear"), "%s", p.out);
    tu_proc_free(&p);
}
