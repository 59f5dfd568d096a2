/* test_errors.c -- errors carry FILE:LINE and a traceback; failing hooks are disabled, failing
 * files load nothing. */
#include "tests/scripting/lxtest.h"

#include <sys/stat.h>
#include <unistd.h>

#include <stdlib.h>
#include <string.h>

Test(errors, runtime_error_should_say_file_line_and_give_a_traceback)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "boom.lua",
            "local function inner(x)\n"
            "  error('boom: ' .. x)\n"
            "end\n"
            "ditto.on('compile', 'after', function(data)\n"
            "  inner(data.why)\n"
            "end)\n");
    char *out = lxt_run(&t, "compile", "after", "{\"why\": \"spills\"}", NULL);
    const char *err = dt_buf_str(&t.errors);
    char *first = dt_xasprintf("%s/boom.lua:2: boom: spills\n"
                               "  in the after-compile hook defined at %s/boom.lua:4; disabled "
                               "for the rest of the run\n"
                               "  stack traceback:\n",
                               t.dir, t.dir);
    cr_assert(dt_startswith(err, first), "%s", err);
    /* the frames: error itself, inner at line 2, the hook at line 5 */
    cr_assert(strstr(err, "[C]: in function 'error'"), "%s", err);
    char *inner = dt_xasprintf("%s/boom.lua:2: in ", t.dir);
    char *hook = dt_xasprintf("%s/boom.lua:5: in function <%s/boom.lua:4>", t.dir, t.dir);
    cr_assert(strstr(err, inner), "%s", err);
    cr_assert(strstr(err, hook), "%s", err);
    /* ditto's own C caller is not a frame worth showing */
    cr_assert_null(strstr(err, "[C]: in ?"), "%s", err);
    /* every continuation line is indented: one entry, one unindented line */
    int unindented = 0;
    for (const char *p = err; *p; p = strchr(p, '\n') + 1) {
        unindented += *p != ' ';
        if (strchr(p, '\n') == NULL)
            break;
    }
    cr_assert_eq(unindented, 1, "%s", err);
    free(hook);
    free(inner);
    free(first);
    free(out);
    lxt_close(&t);
}

Test(errors, failing_hook_should_be_disabled_and_the_others_still_run)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "a.lua",
            "ditto.on('plan', 'before', function(data) data.a = 1 end)\n"
            "ditto.on('plan', 'before', function(data) data.b = 2; error('nope') end)\n"
            "ditto.on('plan', 'before', function(data) data.c = (data.b or 0) + 3 end)\n");
    cr_assert_eq(lx_hook_count(t.L), 3);
    int ran = 0;
    char *out = lxt_run(&t, "plan", "before", "{}", &ran);
    cr_assert_eq(ran, 2);
    /* the failing hook's half-made edit (b = 2) is not kept */
    cr_assert_str_eq(out, "{\"a\":1,\"c\":3}");
    cr_assert(strstr(dt_buf_str(&t.errors), "a.lua:2: nope"), "%s", dt_buf_str(&t.errors));
    cr_assert_eq(lx_hook_count(t.L), 2);
    free(out);
    lxt_reset(&t);
    out = lxt_run(&t, "plan", "before", "{}", &ran);
    cr_assert_eq(ran, 2);
    cr_assert_str_eq(out, "{\"a\":1,\"c\":3}");
    cr_assert_str_eq(dt_buf_str(&t.errors), "", "a disabled hook stays quiet");
    free(out);
    lxt_close(&t);
}

Test(errors, syntax_error_should_load_nothing_and_say_where)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *msg = lxt_load_fails(&t, "syn.lua",
                              "ditto.on('plan', 'before', function() end)\n"
                              "ditto.param_space('csr-thread', {BLOCK = {64}})\n"
                              "local x = = 3\n");
    char *want = dt_xasprintf("%s/syn.lua:3: unexpected symbol near '='", t.dir);
    cr_assert_str_eq(msg, want);
    cr_assert_eq(lx_hook_count(t.L), 0);
    free(want);
    free(msg);
    lxt_close(&t);
}

Test(errors, runtime_error_at_top_level_should_unregister_the_whole_file)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "good.lua", "ditto.on('plan', 'before', function(d) d.good = true end)\n");
    char *msg = lxt_load_fails(&t, "bad.lua",
                              "ditto.on('plan', 'before', function(d) d.bad = true end)\n"
                              "ditto.review(function() return 'approve' end)\n"
                              "ditto.rule{id = 'r', message = 'm', check = function() end}\n"
                              "ditto.param_space('csr-thread', {BLOCK = {64}})\n"
                              "local cfg = nil\n"
                              "print(cfg.missing)\n");
    char *want = dt_xasprintf("%s/bad.lua:6: attempt to index a nil value (local 'cfg')", t.dir);
    cr_assert_str_eq(msg, want);
    cr_assert_eq(lx_hook_count(t.L), 1);
    char *out = lxt_run(&t, "plan", "before", "{}", NULL);
    cr_assert_str_eq(out, "{\"good\":true}");
    cJSON *step = lxt_json("{\"kind\": \"measure\"}");
    cr_assert_eq(lx_review(t.L, step, NULL, &t.errors), LX_ASK);
    cJSON *f = lx_rules(t.L, "int x;", &t.errors);
    cr_assert_eq(cJSON_GetArraySize(f), 0);
    cJSON *ps = lx_param_spaces(t.L);
    cr_assert_null(ps->child);
    /* the rule id is free again */
    lxt_load(&t, "again.lua", "ditto.rule{id = 'r', message = 'm', check = function() end}\n");
    cJSON_Delete(ps);
    cJSON_Delete(f);
    cJSON_Delete(step);
    free(out);
    free(want);
    free(msg);
    lxt_close(&t);
}

Test(errors, bytecode_should_be_refused)
{
    lt t;
    lxt_open(&t, 0, 0, 1); /* unsafe, to write real bytecode with string.dump */
    char *path = dt_xasprintf("%s/compiled.lua", t.dir);
    char *src = dt_xasprintf("local f = assert(io.open('%s', 'wb'))\n"
                             "f:write(string.dump(function()\n"
                             "  ditto.on('plan', 'before', function(d) d.x = 1 end)\n"
                             "end))\n"
                             "f:close()\n",
                             path);
    lxt_load(&t, "writer.lua", src);
    dt_err e = {0};
    cr_assert_eq(lx_load_file(t.L, path, &e), -1);
    cr_assert(strstr(e.msg, "compiled.lua: is precompiled Lua bytecode"), "%s", e.msg);
    /* anything starting like a binary chunk is refused by the "t" mode */
    char *msg = lxt_load_fails(&t, "fake.lua", "\x1bLub");
    cr_assert(strstr(msg, "attempt to load a binary chunk (mode is 't')"), "%s", msg);
    cr_assert_eq(lx_hook_count(t.L), 0);
    free(msg);
    free(src);
    free(path);
    lxt_close(&t);
}

Test(errors, non_string_error_objects_should_still_say_where)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "obj.lua",
            "ditto.on('verify', 'after', function(d)\n"
            "  error({code = 3})\n"
            "end)\n"
            "ditto.on('measure', 'after', function(d)\n"
            "  error(setmetatable({}, {__tostring = function() return 'custom failure' end}))\n"
            "end)\n");
    char *out = lxt_run(&t, "verify", "after", "{}", NULL);
    char *want = dt_xasprintf("%s/obj.lua:1: (error object is a table value)\n", t.dir);
    cr_assert(dt_startswith(dt_buf_str(&t.errors), want), "%s", dt_buf_str(&t.errors));
    free(want);
    free(out);
    lxt_reset(&t);
    out = lxt_run(&t, "measure", "after", "{}", NULL);
    want = dt_xasprintf("%s/obj.lua:4: custom failure\n", t.dir);
    cr_assert(dt_startswith(dt_buf_str(&t.errors), want), "%s", dt_buf_str(&t.errors));
    free(want);
    free(out);
    lxt_close(&t);
}

Test(errors, bad_registrations_should_fail_the_load_with_the_line)
{
    static const struct {
        const char *src;
        const char *msg;
    } cases[] = {
        {"ditto.on('plann', 'before', print)",
         "h.lua:1: bad argument #1 to 'on' (unknown step 'plann'"},
        {"ditto.on('plan', 'during', print)",
         "h.lua:1: bad argument #2 to 'on' (invalid option 'during')"},
        {"ditto.on('plan', 'before', 42)",
         "h.lua:1: bad argument #3 to 'on' (function expected, got number)"},
        {"ditto.review('approve')",
         "h.lua:1: bad argument #1 to 'review' (function expected, got string)"},
        {"ditto.rule{id = 'x', message = 'm'}",
         "h.lua:1: ditto.rule: check must be a function(source)"},
        {"ditto.rule{id = '', message = 'm', check = print}",
         "h.lua:1: ditto.rule: id must be a non-empty string"},
        {"ditto.rule{id = 'x', message = 'm', chek = print}",
         "h.lua:1: ditto.rule: unknown field chek"},
        {"ditto.rule{id = 'x', message = 'm', severity = 'fatal', check = print}",
         "h.lua:1: ditto.rule: severity must be"},
        {"ditto.rule{id = 'x', message = 'm', check = print}\n"
         "ditto.rule{id = 'x', message = 'n', check = print}",
         "h.lua:2: ditto.rule: a rule with id 'x' is already registered"},
        {"ditto.param_space('csr-thread', {BLOCK = {}})",
         "h.lua:1: ditto.param_space('csr-thread'): BLOCK must be a non-empty list"},
        {"ditto.param_space('csr-thread', {BLOCK = 128})",
         "h.lua:1: ditto.param_space('csr-thread'): BLOCK must be a non-empty list"},
        {"ditto.param_space('csr-thread', {BLOCK = {print}})", "space.BLOCK[1] is a function"},
        {"ditto.param_space('csr-thread', {})", "expected a table { NAME = {values...}, ... }"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        lt t;
        lxt_open(&t, 0, 0, 0);
        char *msg = lxt_load_fails(&t, "h.lua", cases[i].src);
        cr_assert(strstr(msg, cases[i].msg), "case %zu: %s", i, msg);
        cr_assert_eq(lx_hook_count(t.L), 0);
        free(msg);
        lxt_close(&t);
    }
}

Test(errors, missing_file_should_say_so)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *path = dt_xasprintf("%s/nope.lua", t.dir);
    dt_err e = {0};
    cr_assert_eq(lx_load_file(t.L, path, &e), -1);
    cr_assert(strstr(e.msg, "nope.lua") && strstr(e.msg, "No such file"), "%s", e.msg);
    free(path);
    lxt_close(&t);
}

Test(errors, load_dir_should_load_in_name_order_and_skip_broken_files)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *p;
    p = lxt_file(&t, "20-second.lua",
                "ditto.on('plan', 'before', function(d) d.order = (d.order or '') .. '2' end)\n");
    free(p);
    p = lxt_file(&t, "10-first.lua",
                "ditto.on('plan', 'before', function(d) d.order = (d.order or '') .. '1' end)\n");
    free(p);
    p = lxt_file(&t, "15-broken.lua", "ditto.on('plan', 'before' function(d) end)\n");
    free(p);
    p = lxt_file(&t, "notes.txt", "not a hook");
    free(p);
    p = lxt_file(&t, ".hidden.lua", "error('hidden files are skipped')");
    free(p);
    cr_assert_eq(lx_load_dir(t.L, t.dir, &t.errors), 2);
    const char *err = dt_buf_str(&t.errors);
    char *want = dt_xasprintf("%s/15-broken.lua:1: ", t.dir);
    cr_assert(dt_startswith(err, want), "%s", err);
    cr_assert_eq(strchr(err, '\n')[1], '\0', "one error, one line: %s", err);
    char *out = lxt_run(&t, "plan", "before", "{}", NULL);
    cr_assert_str_eq(out, "{\"order\":\"12\"}");
    free(out);
    free(want);
    /* a missing folder is not an error */
    char *missing = dt_xasprintf("%s/no-such-dir", t.dir);
    lxt_reset(&t);
    cr_assert_eq(lx_load_dir(t.L, missing, &t.errors), 0);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    free(missing);
    lxt_close(&t);
}

Test(errors, hook_returning_a_non_table_should_be_an_error)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "ret.lua", "ditto.on('check', 'before', function(d) return true end)\n");
    char *out = lxt_run(&t, "check", "before", "{\"x\": 1}", NULL);
    cr_assert_str_eq(out, "{\"x\":1}");
    char *want = dt_xasprintf("%s/ret.lua:1: returned a boolean; a hook edits its table in place, "
                              "or returns a replacement table, or nothing\n",
                              t.dir);
    cr_assert(dt_startswith(dt_buf_str(&t.errors), want), "%s", dt_buf_str(&t.errors));
    free(want);
    free(out);
    lxt_close(&t);
}

Test(errors, errors_without_a_buffer_should_not_crash)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "e.lua", "ditto.on('learn', 'after', function() error('x') end)\n");
    cJSON *data = lxt_json("{}");
    dt_log_set_level(DT_LOG_ERROR); /* keep the warning out of the test output */
    cr_assert_eq(lx_run_hooks(t.L, "learn", "after", &data, NULL, NULL), 0);
    cr_assert_eq(lx_hook_count(t.L), 0);
    cJSON_Delete(data);
    lxt_close(&t);
}

/* issue 37: --hook /dev/zero was read without bound. */
Test(errors, a_hook_that_is_not_a_small_regular_file_should_be_refused_at_once, .timeout = 10)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    dt_err e = {0};
    double t0 = dt_now();
    cr_assert_eq(lx_load_file(t.L, "/dev/zero", &e), -1);
    cr_assert_lt(dt_now() - t0, 1.0);
    cr_assert(strstr(e.msg, "/dev/zero: not a regular file (a character device)"), "%s", e.msg);
    cr_assert_eq(lx_load_file(t.L, t.dir, &e), -1);
    cr_assert(strstr(e.msg, "not a regular file (a folder)"), "%s", e.msg);
    char *fifo = dt_xasprintf("%s/pipe.lua", t.dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(lx_load_file(t.L, fifo, &e), -1); /* no writer: must not wait for one */
    cr_assert(strstr(e.msg, "not a regular file (a pipe)"), "%s", e.msg);
    char *big = dt_xasprintf("%s/big.lua", t.dir);
    FILE *f = fopen(big, "w");
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), (off_t)5 << 20), 0);
    fclose(f);
    cr_assert_eq(lx_load_file(t.L, big, &e), -1);
    cr_assert(strstr(e.msg, "big.lua: 5.2 MB, over the 4.2 MB this kind of file may have"), "%s",
              e.msg);
    free(big);
    free(fifo);
    lxt_close(&t);
}
