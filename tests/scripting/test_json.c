/* test_json.c -- JSON <-> Lua conversion: round trips, number types, empty tables, what JSON cannot
 * hold. */
#include "tests/scripting/lxtest.h"

#include <stdlib.h>
#include <string.h>

/* Round trip text through a Lua table; returns the compact result. */
static char *trip(lt *t, const char *text)
{
    cJSON *in = lxt_json(text);
    dt_err e = {0};
    cJSON *out = lx_roundtrip(t->L, in, &e);
    cr_assert_not_null(out, "%s: %s", text, e.msg);
    char *s = lxt_text(out);
    cJSON_Delete(out);
    cJSON_Delete(in);
    return s;
}

Test(json, round_trip_should_keep_nested_values_and_key_order)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    static const char *const same[] = {
        "{\"z\":1,\"a\":{\"y\":[1,2,[3,[]]],\"b\":{}},\"m\":\"text\"}",
        "[1,-2,3.5,true,false,\"s\",{\"k\":[{}]}]",
        "{\"int\":9007199254740992,\"neg\":-9007199254740992,\"float\":0.1,\"exp\":1e+300}",
        "{\"empty_object\":{},\"empty_array\":[],\"nested\":[[],[{}]]}",
        "[1,null,3]",
        "[null,null,{\"a\":1}]",
        "\"just a string\"",
        "42",
        "true",
        "{\"unicode\":\"h\\u00e9 \\u2713\",\"quote\":\"a\\\"b\"}",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(same); i++) {
        cJSON *want = lxt_json(same[i]);
        char *w = lxt_text(want);
        char *s = trip(&t, same[i]);
        cr_assert_str_eq(s, w);
        free(s);
        free(w);
        cJSON_Delete(want);
    }
    lxt_close(&t);
}

Test(json, null_members_should_be_dropped_and_integral_floats_become_integers)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    char *s = trip(&t, "{\"a\":null,\"b\":1,\"c\":2.0,\"d\":[null]}");
    /* [null]: a hole at 1 and nothing after it is an empty marked array */
    cr_assert_str_eq(s, "{\"b\":1,\"c\":2,\"d\":[]}");
    free(s);
    s = trip(&t, "null");
    cr_assert_str_eq(s, "null");
    free(s);
    lxt_close(&t);
}

Test(json, hooks_should_see_integers_floats_and_booleans_as_lua_types)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "types.lua",
            "ditto.on('profile', 'after', function(d)\n"
            "  assert(math.type(d.rows) == 'integer', 'rows: ' .. tostring(math.type(d.rows)))\n"
            "  assert(math.type(d.cv) == 'float')\n"
            "  assert(d.ok == true and d.bad == false)\n"
            "  assert(d.none == nil)\n"
            "  assert(#d.lens == 3 and d.lens[2] == 20)\n"
            "  assert(d.lens[1] // 1 == d.lens[1])\n"
            "  d.rows = d.rows + 1\n"
            "  d.half = d.rows / 2\n"
            "  d.quarter = 1 / 4\n"
            "end)\n");
    char *out = lxt_run(&t, "profile", "after",
                       "{\"rows\": 9, \"cv\": 0.5, \"ok\": true, \"bad\": false, \"none\": null,"
                       " \"lens\": [10, 20, 30]}",
                       NULL);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    cr_assert_str_eq(out, "{\"rows\":10,\"cv\":0.5,\"ok\":true,\"bad\":false,"
                          "\"lens\":[10,20,30],\"half\":5,\"quarter\":0.25}");
    free(out);
    lxt_close(&t);
}

Test(json, empty_tables_should_be_objects_unless_they_came_from_an_array)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "empty.lua",
            "ditto.on('plan', 'before', function(d)\n"
            "  d.fresh = {}\n"           /* a new empty table: an object */
            "  d.made = ditto.array()\n" /* marked by hand: an array */
            "  d.marked = ditto.array({})\n"
            "  for i = #d.list, 1, -1 do d.list[i] = nil end\n" /* emptied, still an array */
            "  d.obj.k = nil\n"                                 /* emptied object stays an object */
            "end)\n");
    char *out = lxt_run(&t, "plan", "before", "{\"list\": [1, 2], \"obj\": {\"k\": 1}}", NULL);
    cr_assert_str_eq(dt_buf_str(&t.errors), "");
    cr_assert_str_eq(out, "{\"list\":[],\"obj\":{},\"fresh\":{},\"made\":[],\"marked\":[]}");
    free(out);
    lxt_close(&t);
}

Test(json, new_keys_should_come_after_old_ones_in_sorted_order)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "keys.lua",
            "ditto.on('plan', 'before', function(d)\n"
            "  d.zeta, d.alpha, d.mid = 1, 2, 3\n"
            "  d.b = nil\n"
            "  d.nested.new = true\n"
            "  d.rows[2].added = 'x'\n"
            "end)\n");
    char *out = lxt_run(&t, "plan", "before",
                       "{\"c\": 1, \"b\": 2, \"a\": 3, \"nested\": {\"y\": 1, \"x\": 2},"
                       " \"rows\": [{\"q\": 1, \"p\": 2}, {\"s\": 1, \"r\": 2}]}",
                       NULL);
    cr_assert_str_eq(out, "{\"c\":1,\"a\":3,\"nested\":{\"y\":1,\"x\":2,\"new\":true},"
                          "\"rows\":[{\"q\":1,\"p\":2},{\"s\":1,\"r\":2,\"added\":\"x\"}],"
                          "\"alpha\":2,\"mid\":3,\"zeta\":1}");
    free(out);
    lxt_close(&t);
}

Test(json, lua_holes_should_become_nulls_but_sparse_arrays_are_refused)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "holes.lua",
            "ditto.on('tune', 'before', function(d) d.v = {1, nil, 3} end)\n"
            "ditto.on('tune', 'after', function(d) d.v = {}; d.v[100000] = 1 end)\n");
    char *out = lxt_run(&t, "tune", "before", "{}", NULL);
    cr_assert_str_eq(out, "{\"v\":[1,null,3]}");
    free(out);
    out = lxt_run(&t, "tune", "after", "{}", NULL);
    cr_assert_str_eq(out, "{}");
    cr_assert(strstr(dt_buf_str(&t.errors), "left data that is not JSON: data.v is a sparse "
                                            "array (largest index 100000, 1 elements)"),
              "%s", dt_buf_str(&t.errors));
    free(out);
    lxt_close(&t);
}

Test(json, values_json_cannot_hold_should_be_refused_with_their_path)
{
    static const struct {
        const char *edit;
        const char *msg;
    } cases[] = {
        {"d.self = d", "data.self contains itself (a cycle)"},
        {"d.a = {b = {}}; d.a.b.c = d.a", "data.a.b.c contains itself (a cycle)"},
        {"d.f = print", "data.f is a function, which JSON cannot hold"},
        {"d[true] = 1", "data has a boolean key (JSON object keys are strings"},
        {"d[0] = 1", "data has the integer key 0"},
        {"d[1.5] = 1", "data has the float key 1.5"},
        {"d.t = {1, 2, x = 3}", "data.t mixes string keys and integer keys"},
        {"d.n = 0/0", "data.n is NaN, which JSON cannot hold"},
        {"d.n = math.huge", "data.n is infinity"},
        {"d.n = math.maxinteger", "data.n is 9223372036854775807, past 2^53"},
        {"d.s = 'a\\0b'", "data.s is a string with a NUL byte"},
        {"d['odd key'] = {print}", "data[\"odd key\"][1] is a function"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        lt t;
        lxt_open(&t, 0, 0, 0);
        char *src = dt_xasprintf("ditto.on('check', 'after', function(d) %s end)\n", cases[i].edit);
        lxt_load(&t, "bad.lua", src);
        char *out = lxt_run(&t, "check", "after", "{\"keep\": 1}", NULL);
        cr_assert_str_eq(out, "{\"keep\":1}", "case %zu", i);
        const char *err = dt_buf_str(&t.errors);
        cr_assert(strstr(err, "left data that is not JSON: ") && strstr(err, cases[i].msg),
                  "case %zu: %s", i, err);
        free(out);
        free(src);
        lxt_close(&t);
    }
}

Test(json, shared_subtables_should_be_copied_not_taken_for_cycles)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    lxt_load(&t, "dag.lua",
            "ditto.on('check', 'after', function(d)\n"
            "  local shared = {1, 2}\n"
            "  d.a, d.b = shared, {inner = shared}\n"
            "end)\n");
    char *out = lxt_run(&t, "check", "after", "{}", NULL);
    cr_assert_str_eq(out, "{\"a\":[1,2],\"b\":{\"inner\":[1,2]}}", "%s", dt_buf_str(&t.errors));
    free(out);
    lxt_close(&t);
}

Test(json, nesting_past_the_limit_should_be_an_error_not_a_crash)
{
    lt t;
    lxt_open(&t, 0, 0, 0);
    cJSON *root = dt_json_arr();
    cJSON *cur = root;
    for (int i = 0; i < 1100; i++) {
        cJSON *next = dt_json_arr();
        cJSON_AddItemToArray(cur, next);
        cur = next;
    }
    dt_err e = {0};
    cJSON *out = lx_roundtrip(t.L, root, &e);
    cr_assert_null(out);
    cr_assert(strstr(e.msg, "nested deeper than 1000 levels"), "%s", e.msg);
    cJSON_Delete(root);
    /* and from the Lua side */
    lxt_load(&t, "deep.lua",
            "ditto.on('check', 'after', function(d)\n"
            "  local t = d\n"
            "  for i = 1, 1100 do t.x = {}; t = t.x end\n"
            "end)\n");
    char *s = lxt_run(&t, "check", "after", "{}", NULL);
    cr_assert_str_eq(s, "{}");
    cr_assert(strstr(dt_buf_str(&t.errors), "is nested deeper than 1000 levels"), "%s",
              dt_buf_str(&t.errors));
    free(s);
    lxt_close(&t);
}
