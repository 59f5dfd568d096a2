/* test_sandbox.c -- what hooks can and cannot reach: removed loaders, io and os, unsafe mode. */
#include "tests/scripting/lxtest.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

Test(sandbox, os_execute_should_fail_with_a_message_that_names_the_way_out)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *marker = dt_xasprintf("%s/ran", t.dir);
    char *src = dt_xasprintf("-- tries to run a command\n"
                             "ditto.on('plan', 'before', function(data)\n"
                             "  os.execute('touch %s')\n"
                             "end)\n",
                             marker);
    lxt_load(&t, "hook.lua", src);
    char *out = lxt_run(&t, "plan", "before", "{\"a\": 1}", NULL);
    cr_assert_str_eq(out, "{\"a\":1}");
    const char *err = dt_buf_str(&t.errors);
    char *want = dt_xasprintf("%s/hook.lua:3: os is not available in the sandbox (run with "
                              "--lua-unsafe to allow io and os)\n",
                              t.dir);
    cr_assert(dt_startswith(err, want), "%s", err);
    cr_assert_eq(access(marker, F_OK), -1, "the command must not have run");
    free(want);
    free(out);
    free(src);
    free(marker);
    lxt_close(&t);
}

Test(sandbox, io_open_should_fail_the_same_way)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *msg = lxt_load_fails(&t, "io.lua", "local f = io.open('/etc/passwd')\n");
    cr_assert(strstr(msg, "io.lua:1: io is not available in the sandbox (run with --lua-unsafe"),
              "%s", msg);
    free(msg);
    lxt_close(&t);
}

Test(sandbox, loaders_and_collectgarbage_should_be_gone_with_a_reason)
{
    static const struct {
        const char *src;
        const char *msg;
    } cases[] = {
        {"load('return 1')", "load is not available in the sandbox (hooks cannot load code"},
        {"loadfile('x.lua')", "loadfile is not available in the sandbox"},
        {"dofile('x.lua')", "dofile is not available in the sandbox"},
        {"require('socket')", "require is not available in the sandbox (hooks cannot load modules"},
        {"collectgarbage()", "collectgarbage is not available in the sandbox"},
        {"debug.getinfo(1)", "debug is not available in the sandbox"},
        {"package.path = ''", "package is not available in the sandbox"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        lt t;
        lxt_open(&t, 0, 0, 0);
        char *msg = lxt_load_fails(&t, "h.lua", cases[i].src);
        cr_assert(strstr(msg, "h.lua:1: ") && strstr(msg, cases[i].msg), "%s: %s", cases[i].src,
                  msg);
        free(msg);
        lxt_close(&t);
    }
}

Test(sandbox, removed_names_should_really_be_absent_from_the_global_table)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    /* rawget sees through the helpful __index: the values are not there. */
    lxt_load(&t, "h.lua",
            "for _, name in ipairs{'load', 'loadfile', 'dofile', 'require', 'collectgarbage',\n"
            "                      'io', 'os', 'debug', 'package'} do\n"
            "  assert(rawget(_G, name) == nil, name .. ' is reachable')\n"
            "end\n"
            "assert(_G.undefined_name == nil, 'other absent globals stay nil')\n");
    lxt_close(&t);
}

Test(sandbox, the_safe_libraries_should_work)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "h.lua",
            "assert(string.format('%05.1f', 3.14159) == '003.1')\n"
            "assert(table.concat({1, 2, 3}, ',') == '1,2,3')\n"
            "assert(math.max(3, 7) == 7 and math.type(1) == 'integer')\n"
            "assert(utf8.len('h\\u{e9}') == 2)\n"
            "assert(select('#', pcall(error, 'x')) == 2)\n"
            "assert(tostring(nil) == 'nil' and tonumber('0x10') == 16)\n"
            "local t = setmetatable({}, {__index = function() return 5 end})\n"
            "assert(t.anything == 5)\n"
            "assert(('abc'):upper() == 'ABC')\n");
    lxt_close(&t);
}

Test(sandbox, unsafe_mode_should_open_io_and_os)
{
    lt t;
    lxt_open(&t, 0, 0, 1);
    char *path = dt_xasprintf("%s/written", t.dir);
    char *src = dt_xasprintf("ditto.on('learn', 'after', function(data)\n"
                             "  local f = assert(io.open('%s', 'w'))\n"
                             "  f:write(os.getenv('HOME') and 'home' or 'nohome')\n"
                             "  f:close()\n"
                             "  data.clock = type(os.clock())\n"
                             "end)\n",
                             path);
    lxt_load(&t, "h.lua", src);
    char *out = lxt_run(&t, "learn", "after", "{}", NULL);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    cr_assert_str_eq(out, "{\"clock\":\"number\"}");
    cr_assert_eq(access(path, F_OK), 0, "io.open must have written %s", path);
    /* unsafe opens io and os only: loaders stay out */
    char *msg = lxt_load_fails(&t, "l.lua", "load('return 1')");
    cr_assert(strstr(msg, "load is not available"), "%s", msg);
    free(msg);
    free(out);
    free(src);
    free(path);
    lxt_close(&t);
}

Test(sandbox, gc_metamethods_should_be_refused)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *msg = lxt_load_fails(&t, "gc.lua",
                              "local x = setmetatable({}, {__gc = function() while true do end "
                              "end})\n");
    cr_assert(strstr(msg, "gc.lua:1: __gc metamethods are not available"), "%s", msg);
    free(msg);
    lxt_close(&t);
}

Test(sandbox, print_should_go_to_the_log_not_stdout)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "p.lua",
            "ditto.on('check', 'after', function(data)\n"
            "  print('blocks', 4, true, nil)\n"
            "  ditto.log('second line')\n"
            "end)\n");
    char *out = lxt_run(&t, "check", "after", "{}", NULL);
    cr_assert_str_eq(dt_buf_str(&t.log), "blocks\t4\ttrue\tnil\nsecond line\n");
    free(out);
    lxt_close(&t);
}

Test(sandbox, registering_should_only_happen_while_a_file_loads)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "late.lua",
            "ditto.on('plan', 'before', function(data)\n"
            "  ditto.on('plan', 'after', function() end)\n"
            "end)\n");
    char *out = lxt_run(&t, "plan", "before", "{}", NULL);
    cr_assert(strstr(dt_buf_str(&t.errors),
                     "late.lua:2: ditto.on can only be called while a hook file loads"),
              "%s", dt_buf_str(&t.errors));
    cr_assert_eq(lx_hook_count(t.L), 0);
    free(out);
    lxt_close(&t);
}
