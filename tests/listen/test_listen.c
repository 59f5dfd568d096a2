/* test_listen.c -- the agents listen (issue 38), on the built binary without
 * a GPU: a reject reason steers the expert ("use merge-path"), parameters
 * and resource wishes are kept for the session, an edited plan is
 * re-derived or refused with its draft kept, a failed compile cannot be
 * approved and is never recompiled unchanged, Lua review hooks run under
 * --review auto and a hook that rejects every plan ends the run within the
 * cap, custom rules show in the check step and parameter spaces narrow
 * the plan; with a scripted LLM: the shipped no_atomics.lua stops an
 * atomicAdd kernel under --review auto and its reason reaches every later
 * prompt, the plan is asked as structured output, broken JSON is repaired
 * or re-asked with the parse error quoted, and the expert does a step the
 * model cannot answer. */
#include "tests/common/testutil.h"
#include "tests/common/llmtest.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define ENV(dir) "XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' XDG_CONFIG_HOME='%s/config' "

static char *write_spec(const char *dir, const char *review)
{
    char text[512];
    snprintf(text, sizeof text,
             "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,seed=2\", "
             "\"dtype\": \"fp32\", \"review\": \"%s\"}",
             review);
    return tu_write(dir, "spec.json", text);
}

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

/* The artifact event of step kind `name` ("plan", "kernel", ...) and version. */
static const cJSON *artifact(const cJSON *ev, const char *name, int version)
{
    const cJSON *e, *found = NULL;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "artifact") &&
            dt_streq(dt_json_str(e, "name", ""), name) &&
            (int)dt_json_num(e, "version", 0) == version)
            found = e;
    }
    return found;
}

/* All the reasoning of the steps of one kind, concatenated (caller frees). */
static char *texts_of_kind(const cJSON *ev, const char *kind)
{
    int ids[256], n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (dt_streq(dt_json_str(e, "type", ""), "step_started") &&
            dt_streq(dt_json_str(e, "kind", ""), kind) && n < 256)
            ids[n++] = (int)dt_json_num(e, "step", 0);
    }
    dt_buf b = DT_BUF_INIT;
    cJSON_ArrayForEach(e, ev)
    {
        if (!dt_streq(dt_json_str(e, "type", ""), "text"))
            continue;
        int sid = (int)dt_json_num(e, "step", 0);
        for (int i = 0; i < n; i++)
            if (ids[i] == sid)
                dt_buf_puts(&b, dt_json_str(e, "text", ""));
    }
    return dt_buf_take(&b);
}

static int count_started(const cJSON *ev, const char *kind)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        n += dt_streq(dt_json_str(e, "type", ""), "step_started") &&
             dt_streq(dt_json_str(e, "kind", ""), kind);
    return n;
}

/* A file with the text; its path (caller frees). */
static char *script(const char *dir, const char *name, const char *text)
{
    char *p = tu_write(dir, name, text);
    chmod(p, 0755);
    return p;
}

Test(listen, a_reason_naming_a_strategy_should_give_that_plan_and_be_kept, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    tu_proc p = tu_run("printf 'a\\nr use merge-path please, with BLOCK 128\\na\\na\\na\\na\\n' | " ENV(
                           dir) "'%s' run '%s'",
                       dir, dir, dir, tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    const cJSON *v1 = artifact(ev, "plan", 1), *v2 = artifact(ev, "plan", 2);
    cr_assert_not_null(v2, "no plan v2\n%s", p.out);
    const cJSON *j1 = cJSON_GetObjectItem(v1, "json"), *j2 = cJSON_GetObjectItem(v2, "json");
    cr_assert_str_neq(dt_json_str(j1, "strategy", ""), "merge-path");
    cr_assert_str_eq(dt_json_str(j2, "strategy", ""), "merge-path", "%s", p.out);
    cr_assert_eq((int)dt_json_num(cJSON_GetObjectItem(j2, "params"), "BLOCK", 0), 128);
    /* the tuner's space keeps to the wish */
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j2, "space"), "BLOCK")),
                 1);
    char *plan_text = texts_of_kind(ev, "plan");
    cr_assert(strstr(plan_text, "because you said \"use merge-path please, with BLOCK 128\""),
              "the reasoning does not say why:\n%s", plan_text);
    /* kept for the session: the generate step shows it too, and the kernel
     * is merge-path's */
    char *gen_text = texts_of_kind(ev, "generate");
    cr_assert(strstr(gen_text, "because you said"), "%s", gen_text);
    char *k = dt_xasprintf("%s/kernel_v1.cu", sd);
    char *src = dt_read_file(k, NULL, NULL);
    cr_assert(src && strstr(src, "spmv_merge_path"), "kernel_v1.cu is not merge-path's");
    free(src);
    free(k);
    free(gen_text);
    free(plan_text);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, a_reason_it_cannot_act_on_should_be_said_plainly, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    tu_proc p = tu_run("printf 'a\\nr I do not like the look of it\\ns\\n' | " ENV(
                           dir) "'%s' run '%s'",
                       dir, dir, dir, tu_ditto_bin(), spec);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    char *plan_text = texts_of_kind(ev, "plan");
    cr_assert(strstr(plan_text, "I cannot act on \"I do not like the look of it\""), "%s",
              plan_text);
    free(plan_text);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, an_edit_to_another_strategy_should_be_used_and_a_bad_one_refused_with_its_draft,
     .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    char *log = dt_xasprintf("%s/editor.log", dir);
    /* first edit: a strategy that does not exist (refused); the second
     * call must reopen that text, and turns it into merge-path */
    char *body = dt_xasprintf(
        "#!/bin/sh\n"
        "if grep -q '\"no-such-thing\"' \"$1\"; then\n"
        "  sed -i 's/\"no-such-thing\"/\"merge-path\"/' \"$1\"; echo reopened >> '%s'\n"
        "else\n"
        "  sed -E -i 's/\"strategy\":[[:space:]]*\"[a-z0-9-]+\"/\"strategy\": \"no-such-thing\"/' "
        "\"$1\"; echo first >> '%s'\n"
        "fi\n",
        log, log);
    char *ed = script(dir, "ed.sh", body);
    tu_proc p = tu_run("printf 'a\\ne\\ne\\na\\na\\na\\n' | VISUAL='%s' " ENV(dir) "'%s' run '%s'",
                       ed, dir, dir, dir, tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cr_assert(strstr(p.out, "'no-such-thing' is not a template"), "no refusal:\n%s", p.out);
    char *l = dt_read_file(log, NULL, NULL);
    cr_assert(l && strstr(l, "first\nreopened"), "the draft was not reopened: %s", l ? l : "");
    free(l);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    /* the plan is merge-path's, with merge-path's contract, and its kernel
     * compiled (no "launch contract changed") */
    const cJSON *pl = NULL, *e;
    cJSON_ArrayForEach(e, ev)
        if (dt_streq(dt_json_str(e, "type", ""), "artifact") &&
            dt_streq(dt_json_str(e, "name", ""), "plan"))
            pl = cJSON_GetObjectItem(e, "json");
    cr_assert_str_eq(dt_json_str(pl, "strategy", ""), "merge-path");
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(pl, "contract"), "entry", ""),
                     "spmv_merge_path");
    cr_assert_eq(count_started(ev, "generate"), 1, "%s", p.out);
    cr_assert(!strstr(p.out, "contract changed") && !strstr(p.out, "contract differs"), "%s",
              p.out);
    const cJSON *c = artifact(ev, "compile", 1);
    cr_assert(dt_json_bool(cJSON_GetObjectItem(c, "json"), "ok", 0), "merge-path did not compile");
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(ed);
    free(body);
    free(log);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, a_failed_compile_should_not_be_approved_nor_recompiled_unchanged, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    char *ed = script(dir, "ed.sh", "#!/bin/sh\necho 'int broken = not_a_symbol;' >> \"$1\"\n");
    tu_proc p = tu_run("printf 'a\\na\\na\\ne\\na\\nr try again\\na\\na\\n' | VISUAL='%s' " ENV(
                           dir) "'%s' run '%s' -v",
                       ed, dir, dir, dir, tu_ditto_bin(), spec);
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cr_assert(strstr(p.out, "a failed step cannot be approved"), "%s", p.out);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    /* the error and its source line are in the compile step's reasoning */
    char *ct = texts_of_kind(ev, "compile");
    cr_assert(strstr(ct, "This step FAILED") && strstr(ct, "| int broken = not_a_symbol;"), "%s",
              ct);
    /* never recorded as approved while failed */
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        if (dt_streq(dt_json_str(e, "type", ""), "step_finished") &&
            dt_streq(dt_json_str(e, "status", ""), "approved"))
            cr_assert(dt_json_bool(e, "ok", 1), "step %d approved while failed",
                      (int)dt_json_num(e, "step", 0));
    /* the second kernel is not the first one again */
    char *k1 = dt_xasprintf("%s/kernel_v1.cu", sd), *k2 = dt_xasprintf("%s/kernel_v2.cu", sd);
    char *s1 = dt_read_file(k1, NULL, NULL), *s2 = dt_read_file(k2, NULL, NULL);
    cr_assert(s1 && s2, "kernel_v1 or v2 missing");
    cr_assert_str_neq(s1, s2);
    cr_assert(strstr(s1, "not_a_symbol") && !strstr(s2, "not_a_symbol"));
    free(s1);
    free(s2);
    free(k1);
    free(k2);
    free(ct);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(ed);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, a_hook_that_rejects_every_plan_under_review_auto_should_end_within_the_cap,
     .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    char *hook = tu_write(dir, "reject.lua",
                          "ditto.review(function(step)\n"
                          "  if step.kind == 'plan' then return 'reject', 'not this one' end\n"
                          "end)\n");
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --hook '%s' --max-reviews 4 < /dev/null", dir, dir,
                       dir, tu_ditto_bin(), spec, hook);
    cr_assert_lt(p.status, 128, "killed by signal %d\n%s", p.status - 128, p.err);
    cr_assert_eq(p.status, 1, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cr_assert(strstr(p.out, "rejected 5 times, more than the cap of 4"), "%s", p.out);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    cr_assert_eq(count_started(ev, "plan"), 5);
    cr_assert_eq(count_started(ev, "generate"), 0);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(hook);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, the_custom_rule_example_should_report_in_the_check_step, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "ask");
    tu_proc p = tu_run("printf 'a\\nr use merge-path\\na\\ns\\n' | " ENV(
                           dir) "'%s' run '%s' --hook '%s/scripting/examples/custom_rule.lua'",
                       dir, dir, dir, tu_ditto_bin(), spec, tu_src_dir());
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    char *ct = texts_of_kind(ev, "check");
    cr_assert(strstr(ct, "[restrict-pointers]") && strstr(ct, "'scratch'"),
              "no custom rule finding in the check step:\n%s\n%s", ct, p.err);
    int diag = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        diag |= dt_streq(dt_json_str(e, "type", ""), "diagnostic") &&
                dt_streq(dt_json_str(e, "source", ""), "lua") &&
                dt_streq(dt_json_str(e, "id", ""), "restrict-pointers");
    cr_assert(diag, "no lua diagnostic");
    free(ct);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, param_space_should_narrow_the_plan_and_say_so, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    char *hook = tu_write(dir, "space.lua", "ditto.param_space('csr-vector', {BLOCK = {256}})\n");
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --hook '%s' < /dev/null", dir, dir, dir,
                       tu_ditto_bin(), spec, hook);
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    const cJSON *j = cJSON_GetObjectItem(artifact(ev, "plan", 1), "json");
    cr_assert_str_eq(dt_json_str(j, "strategy", ""), "csr-vector");
    cr_assert_eq((int)dt_json_num(cJSON_GetObjectItem(j, "params"), "BLOCK", 0), 256);
    const cJSON *sp = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "space"), "BLOCK");
    cr_assert_eq(cJSON_GetArraySize(sp), 1);
    char *pt = texts_of_kind(ev, "plan");
    cr_assert(strstr(pt, "ditto.param_space"), "%s", pt);
    free(pt);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(hook);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(listen, a_failed_step_under_review_auto_should_be_recorded_failed, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    /* a hook breaks every kernel before it is compiled: each compile fails,
     * the run ends within its caps, no failed compile reads "approved" */
    char *hook = tu_write(dir, "break.lua",
                          "ditto.review(function(step) return nil end)\n"
                          "ditto.rule { id = 'always', message = 'house rule', severity = 'error',\n"
                          "  check = function(src) return {1} end }\n");
    tu_proc p = tu_run(ENV(dir) "'%s' run '%s' --hook '%s' < /dev/null", dir, dir, dir,
                       tu_ditto_bin(), spec, hook);
    cr_assert_lt(p.status, 128, "killed:\n%s", p.err);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    int failed = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (!dt_streq(dt_json_str(e, "type", ""), "step_finished"))
            continue;
        if (dt_streq(dt_json_str(e, "status", ""), "approved"))
            cr_assert(dt_json_bool(e, "ok", 1), "step %d approved while failed\n%s",
                      (int)dt_json_num(e, "step", 0), p.out);
        failed += dt_streq(dt_json_str(e, "status", ""), "failed");
    }
    cr_assert_gt(failed, 0, "%s", p.out);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(hook);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

/* ---- the LLM backend, scripted ---------------------------------------------------------- */

static char *template_src(const char *name)
{
    char *p = dt_xasprintf("%s/kernels/%s", tu_src_dir(), name);
    char *s = dt_read_file(p, NULL, NULL);
    cr_assert_not_null(s);
    free(p);
    return s;
}

static void add_answer(cJSON *t, const char *text)
{
    cJSON *a = cJSON_CreateObject();
    dt_json_set_str(a, "text", text);
    cJSON *u = cJSON_CreateObject();
    dt_json_set_int(u, "input", 1000);
    dt_json_set_int(u, "output", 200);
    dt_json_set_take(a, "usage", u);
    cJSON_AddItemToArray(t, a);
}

#define PLAN_OK                                                                                    \
    "{\"factors\": [\"short regular rows\"], \"tradeoffs\": [\"one candidate\"], "                 \
    "\"decision\": {\"strategy\": \"csr-thread\", \"params\": {\"BLOCK\": 128}}, "                 \
    "\"rationale\": [{\"decision\": \"csr-thread\", \"rule\": null, \"text\": \"short rows\"}]}"

/* The user prompt of request i of the fake server (borrowed from reqs). */
static const char *prompt_of(const cJSON *reqs, int i)
{
    const cJSON *msgs = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, i), "body"),
                                            "messages");
    const cJSON *m, *last = NULL;
    cJSON_ArrayForEach(m, msgs)
        if (dt_streq(dt_json_str(m, "role", ""), "user"))
            last = m;
    return dt_json_str(last, "content", "");
}

static tu_proc run_llm(const char *dir, const char *spec, const lt_server *srv, const char *extra)
{
    return tu_run(ENV(dir) "'%s' run '%s' --backend llm --endpoint '%s' --model fake-model %s "
                           "< /dev/null",
                  dir, dir, dir, tu_ditto_bin(), spec, srv->endpoint, extra);
}

Test(listen, no_atomics_should_stop_an_atomic_kernel_under_review_auto, .timeout = 300)
{
    char *tpl = template_src("spmv_csr_thread.cu");
    /* v1 reaches for atomicAdd; v2 is the template as it is */
    const char *at = strstr(tpl, "    y[row] = DT_STORE");
    cr_assert_not_null(at);
    dt_buf b = DT_BUF_INIT;
    dt_buf_append(&b, tpl, (size_t)(at - tpl));
    dt_buf_puts(&b, "    atomicAdd(&scratch_sum, 1.0f);\n");
    dt_buf_puts(&b, at);
    char *atomic = dt_buf_take(&b);
    cJSON *t = cJSON_CreateArray();
    add_answer(t, PLAN_OK);
    char *a1 = dt_xasprintf("```cuda\n%s```\n", atomic);
    char *a2 = dt_xasprintf("```cuda\n%s```\n", tpl);
    add_answer(t, a1);
    add_answer(t, a2);
    char *ts = cJSON_PrintUnformatted(t);
    lt_server *srv = lt_server_start(ts);
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    char *extra = dt_xasprintf("--hook '%s/scripting/examples/no_atomics.lua'", tu_src_dir());
    tu_proc p = run_llm(dir, spec, srv, extra);
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    /* the hook rejected generate v1 (step 4), by "lua", and it was never compiled */
    int rejected = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        rejected |= dt_streq(dt_json_str(e, "type", ""), "decision") &&
                    dt_streq(dt_json_str(e, "decision", ""), "reject") &&
                    dt_streq(dt_json_str(e, "by", ""), "lua") &&
                    strstr(dt_json_str(e, "reason", ""), "atomicAdd on line") != NULL;
    cr_assert(rejected, "no_atomics.lua did not reject the kernel:\n%s", p.out);
    cr_assert_eq(count_started(ev, "generate"), 2);
    cr_assert_eq(count_started(ev, "compile"), 1);
    char *k1 = dt_xasprintf("%s/kernel_v1.cu", sd), *k2 = dt_xasprintf("%s/kernel_v2.cu", sd);
    char *s2 = dt_read_file(k2, NULL, NULL);
    cr_assert(s2 && !strstr(s2, "atomicAdd"), "the compiled kernel is the atomic one");
    /* the reason reached the next prompt, verbatim, with the GPU's limits,
     * the PatternReport and the plan asked as structured output */
    cJSON *reqs = lt_server_requests(srv);
    cr_assert_eq(cJSON_GetArraySize(reqs), 3);
    const char *p3 = prompt_of(reqs, 2);
    cr_assert(strstr(p3, "by a review hook): kernel v1 uses atomics (atomicAdd on line"), "%s", p3);
    cr_assert(strstr(p3, "SMs at") && strstr(p3, "registers") && strstr(p3, "L2 "), "%s", p3);
    cr_assert(strstr(p3, "\"row_length\""), "no PatternReport in the coder prompt");
    /* the planner's knowledge: the rule about this matrix, no error
     * explanations while there is no error */
    const char *p1 = prompt_of(reqs, 0);
    cr_assert(strstr(p1, "[rule.spmv.csr-vector-lanes-8]"), "%s", p1);
    cr_assert(!strstr(p1, "[error."), "error explanations without an error:\n%s", p1);
    const cJSON *rf = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 0), "body"),
                                          "response_format");
    cr_assert_str_eq(dt_json_str(rf, "type", ""), "json_schema");
    char *rfs = cJSON_PrintUnformatted(rf);
    cr_assert(strstr(rfs, "\"enum\":[") && strstr(rfs, "\"csr-thread\""), "%s", rfs);
    /* and the session holds the prompts */
    int recorded = 0;
    cJSON_ArrayForEach(e, ev)
        recorded += dt_streq(dt_json_str(e, "type", ""), "llm_request");
    cr_assert_eq(recorded, 3);
    free(rfs);
    cJSON_Delete(reqs);
    free(s2);
    free(k1);
    free(k2);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(extra);
    free(spec);
    tu_rmtree(dir);
    free(dir);
    lt_server_stop(srv);
    free(ts);
    cJSON_Delete(t);
    free(a1);
    free(a2);
    free(atomic);
    free(tpl);
}

Test(listen, messy_json_should_be_repaired_or_reasked_then_left_to_the_expert, .timeout = 300)
{
    /* the expert plans csr-vector: the coder answers with that template */
    char *tpl = template_src("spmv_csr_vector.cu");
    cJSON *t = cJSON_CreateArray();
    /* plan step 1: never usable -- cut off, then unparseable twice */
    add_answer(t, "Sure! {\"factors\": [\"rows\"], \"tradeoffs\": [");
    add_answer(t, "{\"factors\": [\"a\"], \"decision\": {\"strategy\": csr-thread, \"params\": "
                  "{\"BLOCK\": value}},}");
    add_answer(t, "{\"factors\": [\"a\"] \"tradeoffs\": []}");
    /* generate: the template */
    char *a = dt_xasprintf("```cuda\n%s```\n", tpl);
    add_answer(t, a);
    char *ts = cJSON_PrintUnformatted(t);
    lt_server *srv = lt_server_start(ts);
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    tu_proc p = run_llm(dir, spec, srv, "");
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cJSON *reqs = lt_server_requests(srv);
    cr_assert_eq(cJSON_GetArraySize(reqs), 4, "%d requests\n%s", cJSON_GetArraySize(reqs), p.out);
    /* the send-backs quote what was wrong */
    cr_assert(strstr(prompt_of(reqs, 1), "never closed"), "%s", prompt_of(reqs, 1));
    cr_assert(strstr(prompt_of(reqs, 2), "the JSON does not parse: answer:"), "%s",
              prompt_of(reqs, 2));
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    char *pt = texts_of_kind(ev, "plan");
    cr_assert(strstr(pt, "no usable answer in 3 attempts") &&
                  strstr(pt, "the expert backend does this step"),
              "%s", pt);
    cr_assert(strstr(pt, "Decision: csr-vector"), "the expert did not plan:\n%s", pt);
    /* the model was asked again at the next step, and its kernel used */
    char *gt = texts_of_kind(ev, "generate");
    cr_assert(strstr(gt, "Asking the LLM"), "%s", gt);
    free(gt);
    free(pt);
    cJSON_Delete(ev);
    free(sd);
    cJSON_Delete(reqs);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
    lt_server_stop(srv);
    free(ts);
    cJSON_Delete(t);
    free(a);
    free(tpl);
}

Test(listen, trailing_commas_in_the_plan_should_be_repaired_without_asking_again, .timeout = 300)
{
    char *tpl = template_src("spmv_csr_thread.cu");
    cJSON *t = cJSON_CreateArray();
    add_answer(t, "```json\n{\"factors\": [\"short rows\",], \"tradeoffs\": [\"one\"], "
                  "\"decision\": {\"strategy\": \"csr-thread\", \"params\": {\"BLOCK\": 128,},}, "
                  "\"rationale\": [],}\n```");
    char *a = dt_xasprintf("```cuda\n%s```\n", tpl);
    add_answer(t, a);
    char *ts = cJSON_PrintUnformatted(t);
    lt_server *srv = lt_server_start(ts);
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    tu_proc p = run_llm(dir, spec, srv, "");
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cr_assert_eq(lt_server_count(srv), 2);
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    const cJSON *j = cJSON_GetObjectItem(artifact(ev, "plan", 1), "json");
    cr_assert_str_eq(dt_json_str(j, "strategy", ""), "csr-thread");
    char *pt = texts_of_kind(ev, "plan");
    cr_assert(strstr(pt, "trailing comma(s) removed"), "%s", pt);
    free(pt);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
    lt_server_stop(srv);
    free(ts);
    cJSON_Delete(t);
    free(a);
    free(tpl);
}

Test(listen, an_endpoint_that_refuses_json_schema_should_get_json_object_with_the_schema,
     .timeout = 300)
{
    char *tpl = template_src("spmv_csr_thread.cu");
    cJSON *t = cJSON_CreateArray();
    cJSON *refuse = cJSON_CreateObject();
    dt_json_set_str(refuse, "fault", "bad_request");
    cJSON_AddItemToArray(t, refuse);
    add_answer(t, PLAN_OK);
    char *a = dt_xasprintf("```cuda\n%s```\n", tpl);
    add_answer(t, a);
    char *ts = cJSON_PrintUnformatted(t);
    lt_server *srv = lt_server_start(ts);
    char *dir = tu_tmpdir();
    char *spec = write_spec(dir, "auto");
    tu_proc p = run_llm(dir, spec, srv, "");
    cr_assert_eq(p.status, 3, "exit %d\n%s\n%s", p.status, p.out, p.err);
    cJSON *reqs = lt_server_requests(srv);
    cr_assert_eq(cJSON_GetArraySize(reqs), 3);
    const cJSON *f1 = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 0), "body"),
                                          "response_format");
    const cJSON *f2 = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 1), "body"),
                                          "response_format");
    cr_assert_str_eq(dt_json_str(f1, "type", ""), "json_schema");
    cr_assert_str_eq(dt_json_str(f2, "type", ""), "json_object");
    /* the schema holds the candidates' parameters, and no others */
    const cJSON *params = cJSON_GetObjectItem(
        cJSON_GetObjectItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(f2, "schema"), "properties"),
                                "decision"),
            "properties"),
        "params");
    cr_assert_not_null(cJSON_GetObjectItem(cJSON_GetObjectItem(params, "properties"), "BLOCK"));
    cr_assert(cJSON_IsFalse(cJSON_GetObjectItem(params, "additionalProperties")));
    char *sd = only_session(dir);
    cJSON *ev = events_of(sd);
    const cJSON *j = cJSON_GetObjectItem(artifact(ev, "plan", 1), "json");
    cr_assert_str_eq(dt_json_str(j, "strategy", ""), "csr-thread");
    cJSON_Delete(ev);
    free(sd);
    cJSON_Delete(reqs);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
    lt_server_stop(srv);
    free(ts);
    cJSON_Delete(t);
    free(a);
    free(tpl);
}
