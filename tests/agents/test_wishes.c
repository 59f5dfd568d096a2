/* test_wishes.c -- a person's wishes (issue 38) reach everything they are
 * about and outlive the run they were said in, on the built binary without
 * a GPU: a register cap said at the plan review is recorded in the session,
 * restored by `ditto resume` and still applied after it (the same strategy,
 * the wish shown to the code generator, the kernel compiled with the cap);
 * a review nobody answered is asked again on resume, never replacing an
 * edited kernel or plan; and with a GPU the launcher fakes, the cap reaches
 * every variant the tuner times, and the tuner says so. */
#include "tests/common/testutil.h"

#include "agents/internal.h"

#include <stdlib.h>
#include <string.h>

#define ENV(dir) "XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' XDG_CONFIG_HOME='%s/config' "

static char *only_session(const char *dir)
{
    tu_proc p = tu_run("ls -d '%s'/ditto/sessions/*/ | head -n 1", dir);
    char *s = dt_xstrdup(p.out);
    tu_proc_free(&p);
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '/'))
        s[--n] = '\0';
    cr_assert(n > 0, "no session under %s", dir);
    return s;
}

static cJSON *events_of(const char *sdir)
{
    char *p = dt_xasprintf("%s/events.jsonl", sdir);
    char *text = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(text, "no %s", p);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "bad line in %s: %s", p, l);
        cJSON_AddItemToArray(arr, j);
    }
    free(text);
    free(p);
    return arr;
}

/* The plan artifact's strategy of plan version v, or "". */
static const char *plan_strategy(const cJSON *ev, int v)
{
    const cJSON *e;
    const char *found = "";
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "artifact") &&
            dt_streq(dt_json_str(e, "name", ""), "plan") && dt_json_int(e, "version", 0) == v)
            found = dt_json_str(cJSON_GetObjectItem(e, "json"), "strategy", "");
    }
    return found;
}

/* The text of every step of kind `kind` that started after event seq `after`,
 * concatenated (caller frees). */
static char *texts_after(const cJSON *ev, const char *kind, long after)
{
    int ids[64], n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "step_started") &&
            dt_streq(dt_json_str(e, "kind", ""), kind) && dt_json_i64(e, "seq", 0) > after &&
            n < 64)
            ids[n++] = dt_json_int(e, "step", 0);
    }
    dt_buf b = DT_BUF_INIT;
    cJSON_ArrayForEach(e, ev)
    {
        if (!dt_streq(dt_json_str(e, "type", ""), "text"))
            continue;
        for (int i = 0; i < n; i++)
            if (dt_json_int(e, "step", 0) == ids[i])
                dt_buf_puts(&b, dt_json_str(e, "text", ""));
    }
    return dt_buf_take(&b);
}

/* Say `reason` at the plan review, let the run stop unattended, resume it:
 * the cap `cap` (and the strategy) must hold after the resume. `named`:
 * the reason names the cap itself. */
static void wish_survives_resume(const char *reason, int cap, int named)
{
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json",
                          "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,"
                          "seed=2\", \"dtype\": \"fp32\", \"review\": \"ask\"}");
    /* the reason at the plan review; then stdin closes at plan v2's review:
     * the run stops unattended and stays resumable */
    tu_proc p = tu_run("printf 'a\\nr %s\\n' | " ENV(dir) "'%s' run '%s'", reason, dir, dir, dir,
                       tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 4, "exit %d\n%s\n%s", p.status, p.out, p.err);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    /* recorded: the reason, and the cap it became */
    int recorded = 0;
    long last_seq = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        recorded |= dt_streq(dt_json_str(e, "type", ""), "decision") &&
                    dt_streq(dt_json_str(e, "reason", ""), reason);
        last_seq = dt_json_i64(e, "seq", last_seq);
    }
    cr_assert(recorded, "the reason is not in the session\n%s", p.out);
    const char *s1 = plan_strategy(ev, 1);
    cr_assert(*s1, "no plan v1");
    char *strategy = dt_xstrdup(s1);
    cr_assert_str_eq(plan_strategy(ev, 2), strategy, "only registers were asked for");
    char *pt = texts_after(ev, "plan", 0);
    char *said =
        dt_xasprintf("NVRTC caps registers at %d per thread%s", cap, named ? ", as you named" : "");
    cr_assert(strstr(pt, said), "no [%s] in\n%s", said, pt);
    free(said);
    free(pt);
    cJSON_Delete(ev);
    tu_proc_free(&p);
    /* resume, with nobody at the gates */
    const char *id = strrchr(sd, '/') + 1;
    p = tu_run(ENV(dir) "'%s' resume '%s' --review auto < /dev/null", dir, dir, dir, tu_ditto_bin(),
               id);
    cr_assert_eq(p.status, 3, "resume exit %d\n%s\n%s", p.status, p.out, p.err);
    ev = events_of(sd);
    /* the plan made after the resume keeps the strategy: the wish asked for
     * registers, not for another strategy */
    int v = 0;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "step_started") &&
            dt_streq(dt_json_str(e, "kind", ""), "plan") && dt_json_i64(e, "seq", 0) > last_seq)
            v = dt_json_int(e, "version", 0);
    }
    cr_assert_gt(v, 2, "no plan after the resume\n%s", p.out);
    cr_assert_str_eq(plan_strategy(ev, v), strategy, "after the resume the strategy changed");
    /* the wish is shown to the code generator, and the kernel is compiled
     * with the cap */
    char *gt = texts_after(ev, "generate", last_seq);
    char *want =
        dt_xasprintf("because you said \"%s\": at most %d registers per thread", reason, cap);
    cr_assert(strstr(gt, want), "the code generator after the resume does not show [%s]:\n%s", want,
              gt);
    free(want);
    free(gt);
    char *ct = texts_after(ev, "compile", last_seq);
    want = dt_xasprintf("Compiled with --maxrregcount=%d", cap);
    cr_assert(strstr(ct, want), "no [%s] in\n%s", want, ct);
    free(want);
    free(ct);
    /* (the register count itself needs a GPU to be read back: without one
     * the worker reports no real count) */
    int compiled = 0;
    cJSON_ArrayForEach(e, ev)
    {
        compiled |= dt_streq(dt_json_str(e, "type", ""), "artifact") &&
                    dt_streq(dt_json_str(e, "name", ""), "compile") &&
                    dt_json_i64(e, "seq", 0) > last_seq;
    }
    cr_assert(compiled, "nothing compiled after the resume\n%s", p.out);
    cJSON_Delete(ev);
    free(strategy);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(wishes, a_register_cap_should_survive_resume_and_still_apply, .timeout = 300)
{
    /* nothing compiled before it: the expert's own cap */
    wish_survives_resume("fewer registers", 32, 0);
}

Test(wishes, a_named_register_cap_should_be_the_persons_number_after_resume_too, .timeout = 300)
{
    wish_survives_resume("fewer registers: at most 40 registers", 40, 1);
}

/* Run `ditto run` with the review answers `answers` (printf text) and
 * VISUAL=`editor` (a script body), then resume the session with nobody at
 * the gates. Returns the session folder (caller frees); *cut gets the last
 * event's seq before the resume. */
static char *run_then_resume(const char *dir, const char *answers, const char *editor, long *cut)
{
    char *spec = tu_write(dir, "spec.json",
                          "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,"
                          "seed=2\", \"dtype\": \"fp32\", \"review\": \"ask\"}");
    char *ed = tu_write(dir, "ed.sh", editor);
    tu_proc p = tu_run("chmod +x '%s'; printf '%s' | VISUAL='%s' " ENV(dir) "'%s' run '%s'", ed,
                       answers, ed, dir, dir, dir, tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 4, "stdin closed at a review: exit %d\n%s\n%s", p.status, p.out, p.err);
    cr_assert(strstr(p.out, "stdin is closed"), "%s", p.out);
    tu_proc_free(&p);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    *cut = dt_json_i64(cJSON_GetArrayItem(ev, cJSON_GetArraySize(ev) - 1), "seq", 0);
    cJSON_Delete(ev);
    p = tu_run(ENV(dir) "'%s' resume '%s' --review auto < /dev/null", dir, dir, dir, tu_ditto_bin(),
               strrchr(sd, '/') + 1);
    cr_assert_eq(p.status, 3, "resume exit %d\n%s\n%s", p.status, p.out, p.err);
    tu_proc_free(&p);
    free(ed);
    free(spec);
    return sd;
}

static int started_after(const cJSON *ev, const char *kind, long after)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        n += dt_streq(dt_json_str(e, "type", ""), "step_started") &&
             dt_streq(dt_json_str(e, "kind", ""), kind) && dt_json_i64(e, "seq", 0) > after;
    }
    return n;
}

Test(wishes, a_hand_edited_kernel_whose_review_was_pending_should_survive_resume, .timeout = 300)
{
    char *dir = tu_tmpdir();
    long cut = 0;
    /* profile, plan, check approved; the kernel edited; its compile's
     * review is left pending when stdin closes */
    char *sd = run_then_resume(dir, "a\\na\\na\\ne\\n",
                               "#!/bin/sh\necho '/* my hand edit */' >> \"$1\"\n", &cut);
    cJSON *ev = events_of(sd);
    cr_assert_eq(started_after(ev, "generate", cut), 0,
                 "the resume wrote a new kernel over the person's edit");
    cr_assert_eq(started_after(ev, "compile", cut), 1, "the pending compile was not asked again");
    /* every kernel of the session is the edited one */
    tu_proc p =
        tu_run("ls '%s'/kernel_v*.cu | wc -l; grep -L 'my hand edit' '%s'/kernel_v*.cu", sd, sd);
    cr_assert(dt_startswith(p.out, "1\n") && strchr(p.out, '/') == NULL,
              "kernels without the edit:\n%s", p.out);
    tu_proc_free(&p);
    cJSON_Delete(ev);
    free(sd);
    tu_rmtree(dir);
    free(dir);
}

Test(wishes, an_edited_plan_should_stay_the_persons_after_resume, .timeout = 300)
{
    char *dir = tu_tmpdir();
    long cut = 0;
    /* the plan edited to merge-path; the check's review left pending */
    char *sd = run_then_resume(
        dir, "a\\ne\\n",
        "#!/bin/sh\nsed -E -i 's/\"strategy\":[[:space:]]*\"[a-z0-9-]+\"/\"strategy\": "
        "\"merge-path\"/' \"$1\"\n",
        &cut);
    cJSON *ev = events_of(sd);
    cr_assert_eq(started_after(ev, "plan", cut), 0, "the resume planned again");
    int v = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "artifact") &&
            dt_streq(dt_json_str(e, "name", ""), "plan"))
            v = dt_json_int(e, "version", 0);
    }
    cr_assert_str_eq(plan_strategy(ev, v), "merge-path");
    /* the code generator after the resume still knows the person chose it */
    char *gt = texts_after(ev, "generate", cut);
    cr_assert(strstr(gt, "because you said \"(your edit of the plan)\": use merge-path"),
              "the edit's wish was lost in the resume:\n%s", gt);
    cr_assert(strstr(gt, "spmv_merge_path") || strstr(gt, "merge_path"), "%s", gt);
    free(gt);
    cJSON_Delete(ev);
    free(sd);
    tu_rmtree(dir);
    free(dir);
}

/* The whole pipeline with a GPU that the launcher fakes
 * (tests/agents/fake-gpu-worker.sh: NVRTC is real, timings are made up):
 * "fewer registers" said at the plan review caps the kernel and every
 * variant the tuner verifies and times, and the tuner says so. */
Test(wishes, fewer_registers_should_cap_every_tuner_variant_and_be_said, .timeout = 300)
{
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json",
                          "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,"
                          "seed=2\", \"dtype\": \"fp32\", \"review\": \"ask\"}");
    char *log = dt_xasprintf("%s/requests.log", dir);
    tu_proc p = tu_run("printf 'a\\nr fewer registers\\nA\\n' | FAKE_GPU_LOG='%s' " ENV(
                           dir) "'%s' run '%s' --goal 1 --launcher "
                                "'%s/tests/agents/fake-gpu-worker.sh {exe} {device}'",
                       log, dir, dir, dir, tu_ditto_bin(), spec, tu_src_dir());
    cr_assert_eq(p.status, 0, "exit %d\n%s\n%s", p.status, p.out, p.err);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    cr_assert_eq(started_after(ev, "tune", 0), 1, "no tune step\n%s", p.out);
    char *tt = texts_after(ev, "tune", 0);
    cr_assert(strstr(tt, "every variant is compiled with --maxrregcount=32: because you said "
                         "\"fewer registers\""),
              "the tuner does not say it applies the cap:\n%s", tt);
    free(tt);
    /* every kernel the worker got after the wish carries the cap: the
     * first kernel's compile, verify and measure, and the tuner's */
    char *text = dt_read_file(log, NULL, NULL);
    cr_assert_not_null(text);
    int kernels = 0, capped = 0, measures = 0;
    char *save = NULL;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        int k = dt_startswith(l, "compile ") || dt_startswith(l, "verify ") ||
                dt_startswith(l, "measure ");
        kernels += k;
        measures += dt_startswith(l, "measure ");
        capped += k && strstr(l, "\"--maxrregcount=32\"") != NULL;
    }
    free(text);
    cr_assert_gt(measures, 10, "the tuner timed its variants (%d measures)", measures);
    cr_assert_eq(capped, kernels, "%d of %d kernels went to the worker without the cap",
                 kernels - capped, kernels);
    cJSON_Delete(ev);
    free(sd);
    free(log);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* What a reason's words about registers become: the cap NVRTC gets. */
static char *cap_of(const char *reason, int *level, char **news)
{
    ag_run r;
    memset(&r, 0, sizeof r);
    r.wishes = dt_json_arr();
    *level = ag_wishes_from_reason(&r, AG_COMPILE, reason);
    char *opt = r.kernel_option ? dt_xstrdup(r.kernel_option) : dt_xstrdup("");
    *news = dt_xstrdup(dt_buf_str(&r.news));
    free(r.kernel_option);
    dt_buf_free(&r.news);
    cJSON_Delete(r.wishes);
    return opt;
}

Test(wishes, a_register_cap_should_be_read_as_the_person_wrote_it)
{
    static const struct {
        const char *said, *option;
    } cases[] = {
        {"fewer registers", "--maxrregcount=32"}, /* nothing compiled yet: the expert's */
        {"at most 64 registers", "--maxrregcount=64"},
        {"registers <= 48 please", "--maxrregcount=48"},
        {"keep it under 64 registers", "--maxrregcount=63"},
        {"compile with --maxrregcount=40", "--maxrregcount=40"},
        {"cap registers to 24", "--maxrregcount=24"},
        {"max 56 registers per thread", "--maxrregcount=56"},
        /* a count that names no cap is a complaint, not a number to keep */
        {"it uses 128 registers, too many", "--maxrregcount=32"},
        {"use merge-path", ""},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        int level;
        char *news;
        char *opt = cap_of(cases[i].said, &level, &news);
        cr_expect_str_eq(opt, cases[i].option, "\"%s\" gave [%s]\n%s", cases[i].said, opt, news);
        if (*cases[i].option)
            cr_expect_eq(level, 1, "\"%s\": registers only, the strategy may stay", cases[i].said);
        free(opt);
        free(news);
    }
    /* outside NVRTC's range: the nearest cap, and said plainly */
    int level;
    char *news;
    char *opt = cap_of("at most 8 registers", &level, &news);
    cr_assert_str_eq(opt, "--maxrregcount=16");
    cr_assert(strstr(news, "you named 8; a cap must lie in [16, 255]"), "%s", news);
    free(opt);
    free(news);
}
