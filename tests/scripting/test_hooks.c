/* test_hooks.c -- before/after hooks, review decisions, custom rules and parameter spaces. */
#include "tests/scripting/lxtest.h"

#include <stdlib.h>
#include <string.h>

Test(hooks, before_hook_edits_should_reach_the_pipeline)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "edit.lua",
            "ditto.on('plan', 'before', function(data)\n"
            "  data.params.BLOCK = {256}\n"
            "  data.prompt[#data.prompt + 1] = 'prefer ELL for uniform rows'\n"
            "  data.format = 'ell'\n"
            "end)\n");
    cr_assert_eq(lx_hook_count(t.L), 1);
    int ran = 0;
    char *out = lxt_run(&t, "plan", "before",
                       "{\"format\": \"csr\", \"params\": {\"BLOCK\": [128, 256, 512],"
                       " \"VEC\": [1, 2]}, \"prompt\": [\"first\"]}",
                       &ran);
    cr_assert_eq(ran, 1, "%s", dt_buf_str(&t.errors));
    cr_assert_str_eq(out, "{\"format\":\"ell\",\"params\":{\"BLOCK\":[256],\"VEC\":[1,2]},"
                          "\"prompt\":[\"first\",\"prefer ELL for uniform rows\"]}");
    free(out);
    lxt_close(&t);
}

Test(hooks, returned_table_should_replace_the_data)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "replace.lua",
            "ditto.on('generate', 'before', function(data)\n"
            "  return {template = data.template, extra = 'added'}\n"
            "end)\n");
    char *out =
        lxt_run(&t, "generate", "before", "{\"template\": \"csr-thread\", \"drop\": 1}", NULL);
    cr_assert_str_eq(out, "{\"template\":\"csr-thread\",\"extra\":\"added\"}");
    free(out);
    lxt_close(&t);
}

Test(hooks, hooks_should_run_in_registration_order_across_files)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "one.lua",
            "ditto.on('verify', 'after', function(d) d.trace = d.trace .. 'a' end)\n"
            "ditto.on('verify', 'after', function(d) d.trace = d.trace .. 'b' end)\n");
    lxt_load(&t, "two.lua",
            "ditto.on('verify', 'after', function(d) return {trace = d.trace .. 'c'} end)\n");
    int ran = 0;
    char *out = lxt_run(&t, "verify", "after", "{\"trace\": \"\"}", &ran);
    cr_assert_eq(ran, 3);
    cr_assert_str_eq(out, "{\"trace\":\"abc\"}");
    free(out);
    lxt_close(&t);
}

Test(hooks, only_the_matching_step_and_phase_should_run)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "filter.lua",
            "ditto.on('plan', 'before', function(d) d.seen = 'plan before' end)\n"
            "ditto.on('plan', 'after', function(d) d.seen = 'plan after' end)\n"
            "ditto.on('check', 'before', function(d) d.seen = 'check before' end)\n");
    char *out = lxt_run(&t, "plan", "after", "{}", NULL);
    cr_assert_str_eq(out, "{\"seen\":\"plan after\"}");
    free(out);
    out = lxt_run(&t, "check", "before", "{}", NULL);
    cr_assert_str_eq(out, "{\"seen\":\"check before\"}");
    free(out);
    /* no hook: the very same data comes back, not even converted */
    cJSON *data = lxt_json("{\"x\": 1}");
    cJSON *same = data;
    cr_assert_eq(lx_run_hooks(t.L, "tune", "before", &data, &t.log, &t.errors), 0);
    cr_assert_eq(lx_run_hooks(t.L, "plan", "during", &data, &t.log, &t.errors), 0);
    cr_assert_eq(lx_run_hooks(t.L, "cook", "before", &data, &t.log, &t.errors), 0);
    cr_assert_eq(data, same);
    cJSON_Delete(data);
    lxt_close(&t);
}

Test(hooks, null_data_should_arrive_as_an_empty_table)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "n.lua", "ditto.on('learn', 'before', function(d) d.n = #d end)\n");
    cJSON *data = NULL;
    cr_assert_eq(lx_run_hooks(t.L, "learn", "before", &data, &t.log, &t.errors), 1);
    char *s = lxt_text(data);
    cr_assert_str_eq(s, "{\"n\":0}");
    free(s);
    cJSON_Delete(data);
    lxt_close(&t);
}

Test(hooks, log_should_collect_text_of_the_current_call_only)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "log.lua",
            "ditto.log('loading')\n" /* at load time: no call's log */
            "ditto.on('measure', 'after', function(d)\n"
            "  ditto.log(string.format('speedup %.2fx', d.speedup))\n"
            "  ditto.log('a', 1, {} ~= nil)\n"
            "end)\n");
    cr_assert_eq(t.log.len, 0);
    char *out = lxt_run(&t, "measure", "after", "{\"speedup\": 1.234}", NULL);
    cr_assert_str_eq(dt_buf_str(&t.log), "speedup 1.23x\na\t1\ttrue\n");
    free(out);
    lxt_close(&t);
}

static lx_decision review(lt *t, const char *step, dt_buf *reason)
{
    cJSON *s = lxt_json(step);
    lx_decision d = lx_review(t->L, s, reason, &t->errors);
    cJSON_Delete(s);
    return d;
}

Test(hooks, review_should_approve_reject_with_a_reason_or_ask)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "gate.lua",
            "ditto.review(function(step)\n"
            "  if step.kind == 'measure' then return 'approve' end\n"
            "  if step.kind == 'generate' then return 'reject', 'uses shared memory badly' end\n"
            "  if step.kind == 'tune' then return 'ask' end\n"
            "  return nil\n"
            "end)\n");
    dt_buf reason = DT_BUF_INIT;
    cr_assert_eq(review(&t, "{\"kind\": \"measure\"}", &reason), LX_APPROVE);
    cr_assert_eq(reason.len, 0);
    cr_assert_eq(review(&t, "{\"kind\": \"generate\"}", &reason), LX_REJECT);
    cr_assert_str_eq(dt_buf_str(&reason), "uses shared memory badly");
    dt_buf_reset(&reason);
    cr_assert_eq(review(&t, "{\"kind\": \"plan\"}", &reason), LX_ASK);
    cr_assert_eq(review(&t, "{\"kind\": \"tune\"}", &reason), LX_ASK);
    cr_assert_eq(reason.len, 0);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    dt_buf_free(&reason);
    lxt_close(&t);
}

Test(hooks, first_deciding_review_should_win_and_later_ones_not_run)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "chain.lua",
            "ditto.review(function(step) return nil end)\n"
            "ditto.review(function(step) return 'reject' end)\n"
            "ditto.review(function(step) error('must not run') end)\n");
    dt_buf reason = DT_BUF_INIT;
    cr_assert_eq(review(&t, "{\"kind\": \"plan\"}", &reason), LX_REJECT);
    char *want = dt_xasprintf("rejected by the Lua review function at %s/chain.lua:2", t.dir);
    cr_assert_str_eq(dt_buf_str(&reason), want);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    cr_assert_eq(lx_hook_count(t.L), 3);
    free(want);
    dt_buf_free(&reason);
    lxt_close(&t);
}

Test(hooks, review_with_a_bad_answer_should_be_disabled_and_the_next_asked)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "bad.lua",
            "ditto.review(function(step) return 'yes' end)\n"
            "ditto.review(function(step) return 'reject', {} end)\n"
            "ditto.review(function(step) return step.kind == 'learn' and 'approve' or nil end)\n");
    dt_buf reason = DT_BUF_INIT;
    cr_assert_eq(review(&t, "{\"kind\": \"learn\"}", &reason), LX_APPROVE);
    const char *err = dt_buf_str(&t.errors);
    cr_assert(strstr(err, "bad.lua:1: returned \"yes\" (a review function returns \"approve\""),
              "%s", err);
    cr_assert(strstr(err, "bad.lua:2: returned \"reject\" with a table as the reason"), "%s", err);
    cr_assert_eq(lx_hook_count(t.L), 1);
    dt_buf_free(&reason);
    lxt_close(&t);
}

Test(hooks, review_should_not_see_edits_made_by_an_earlier_review)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(
        &t, "iso.lua",
        "ditto.review(function(step) step.kind = 'measure'; return nil end)\n"
        "ditto.review(function(step) if step.kind == 'measure' then return 'approve' end end)\n");
    cr_assert_eq(review(&t, "{\"kind\": \"plan\"}", NULL), LX_ASK);
    lxt_close(&t);
}

static cJSON *rules(lt *t, const char *source)
{
    return lx_rules(t->L, source, &t->errors);
}

Test(rules, check_results_should_become_findings_with_lines)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "r.lua",
            "ditto.rule{\n"
            "  id = 'no-goto', message = 'goto in a kernel',\n"
            "  check = function(src)\n"
            "    local lines, n = {}, 0\n"
            "    for l in (src .. '\\n'):gmatch('(.-)\\n') do\n"
            "      n = n + 1\n"
            "      if l:find('goto') then lines[#lines + 1] = n end\n"
            "    end\n"
            "    return lines\n"
            "  end,\n"
            "}\n"
            "ditto.rule{\n"
            "  id = 'long-file', message = 'unused', severity = 'note',\n"
            "  check = function(src)\n"
            "    return {{line = 2, message = 'custom text'}, {message = 'whole file'}, 3.0}\n"
            "  end,\n"
            "}\n");
    cJSON *f = rules(&t, "a\ngoto x;\nb\ngoto y;\n");
    char *s = lxt_text(f);
    cr_assert_str_eq(
        s,
        "[{\"id\":\"no-goto\",\"severity\":\"warning\",\"message\":\"goto in a kernel\",\"line\":2,"
        "\"source\":\"lua\"},"
        "{\"id\":\"no-goto\",\"severity\":\"warning\",\"message\":\"goto in a kernel\",\"line\":4,"
        "\"source\":\"lua\"},"
        "{\"id\":\"long-file\",\"severity\":\"note\",\"message\":\"custom text\",\"line\":2,"
        "\"source\":\"lua\"},"
        "{\"id\":\"long-file\",\"severity\":\"note\",\"message\":\"whole file\",\"line\":null,"
        "\"source\":\"lua\"},"
        "{\"id\":\"long-file\",\"severity\":\"note\",\"message\":\"unused\",\"line\":3,"
        "\"source\":\"lua\"}]");
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    free(s);
    cJSON_Delete(f);
    lxt_close(&t);
}

Test(rules, nothing_found_should_give_an_empty_array)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    cJSON *f = rules(&t, "int x;");
    cr_assert(cJSON_IsArray(f) && f->child == NULL);
    cJSON_Delete(f);
    lxt_load(&t, "quiet.lua",
            "ditto.rule{id = 'a', message = 'm', check = function() return nil end}\n"
            "ditto.rule{id = 'b', message = 'm', check = function() return {} end}\n");
    f = rules(&t, "int x;");
    cr_assert(cJSON_IsArray(f) && f->child == NULL);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    cJSON_Delete(f);
    lxt_close(&t);
}

Test(rules, malformed_results_should_disable_the_rule_and_keep_the_others)
{
    static const struct {
        const char *ret;
        const char *msg;
    } cases[] = {
        {"'line 3'", "returned a string (check returns a list of line numbers"},
        {"{line = 3}", "returned a table that is not a list"},
        {"{0}", "returned 0 as a line number (expected a positive integer)"},
        {"{2.5}", "returned 2.5 as a line number"},
        {"{{line = -1}}", "returned a finding whose line is not a positive integer (item 1)"},
        {"{{message = 7}}", "returned a finding whose message is a number (item 1)"},
        {"{true}", "returned a boolean as item 1"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        lt t;
        lxt_open(&t, 0, 0, 0);
        char *src = dt_xasprintf("ditto.rule{id = 'bad', message = 'm', check = function(s)\n"
                                 "  return %s\n"
                                 "end}\n"
                                 "ditto.rule{id = 'good', message = 'ok', check = function(s)\n"
                                 "  return {1}\n"
                                 "end}\n",
                                 cases[i].ret);
        lxt_load(&t, "r.lua", src);
        cJSON *f = rules(&t, "x");
        cr_assert_eq(cJSON_GetArraySize(f), 1, "case %zu", i);
        cr_assert_str_eq(dt_json_str(f->child, "id", ""), "good");
        const char *err = dt_buf_str(&t.errors);
        cr_assert(strstr(err, cases[i].msg) && strstr(err, "the check of rule 'bad'"),
                  "case %zu: %s", i, err);
        cr_assert_eq(lx_hook_count(t.L), 1);
        cJSON_Delete(f);
        free(src);
        lxt_close(&t);
    }
}

Test(rules, check_should_get_the_source_and_errors_should_name_the_rule)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "r.lua",
            "ditto.rule{id = 'len', message = 'm', check = function(src)\n"
            "  if #src ~= 11 then error('got ' .. #src .. ' bytes') end\n"
            "  return nil\n"
            "end}\n"
            "ditto.rule{id = 'crash', message = 'm', check = function(src)\n"
            "  return src.nope.deeper\n"
            "end}\n");
    cJSON *f = rules(&t, "hello world");
    cr_assert_eq(cJSON_GetArraySize(f), 0);
    const char *err = dt_buf_str(&t.errors);
    char *want = dt_xasprintf("%s/r.lua:6: attempt to index a nil value (field 'nope')\n"
                              "  in the check of rule 'crash' defined at %s/r.lua:5; disabled "
                              "for the rest of the run\n",
                              t.dir, t.dir);
    cr_assert(dt_startswith(err, want), "%s", err);
    free(want);
    cJSON_Delete(f);
    lxt_close(&t);
}

Test(params, spaces_should_merge_by_strategy_and_name)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "p1.lua",
            "ditto.param_space('csr-thread', {BLOCK = {128, 256}})\n"
            "ditto.param_space('csr-vector', {VEC = {2, 4}, UNROLL = {true, false}})\n");
    lxt_load(&t, "p2.lua",
            "ditto.param_space('csr-thread', {BLOCK = {256}, ILP = {1, 2}})\n"
            "ditto.param_space('ell', {LAYOUT = {'row', 'col'}})\n");
    cJSON *ps = lx_param_spaces(t.L);
    char *s = lxt_text(ps);
    cr_assert_str_eq(s, "{\"csr-thread\":{\"BLOCK\":[256],\"ILP\":[1,2]},"
                        "\"csr-vector\":{\"UNROLL\":[true,false],\"VEC\":[2,4]},"
                        "\"ell\":{\"LAYOUT\":[\"row\",\"col\"]}}");
    free(s);
    cJSON_Delete(ps);
    /* the caller owns the copy: asking twice gives the same */
    ps = lx_param_spaces(t.L);
    cr_assert_eq(cJSON_GetArraySize(ps), 3);
    cJSON_Delete(ps);
    lxt_close(&t);
}
