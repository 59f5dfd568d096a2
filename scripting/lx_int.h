/* lx_int.h -- what the scripting module's files share: JSON <-> Lua value conversion.
 *
 * Internal to scripting/: it includes lua.h, which nothing outside this
 * folder may see. */
#ifndef DITTO_LX_INT_H
#define DITTO_LX_INT_H

#include "core/core.h"

#include <lua.h>

/* Deepest nesting converted either way; the same as cJSON's parse limit, so
 * anything cJSON parsed can be converted, and C recursion stays bounded. */
#define LX_JSON_MAX_DEPTH 1000

/* Replaces string.find, match, gmatch and gsub with versions that refuse,
 * before matching, a pattern whose backtracking could run far longer than
 * a hook call should (Lua's matcher runs in C, outside the instruction
 * count), and string.rep with one that refuses a result over rep_cap bytes;
 * every other C function of string, table and utf8 looks at the clock
 * (lx_check_clock) before it runs.
 * Call once per state, after the string library is open, in protected
 * mode. */
void lx_limits_open(lua_State *L, size_t rep_cap);

/* Raises the time-budget error (and keeps raising it, as the count hook
 * does) when the current call is past its deadline. The guarded string
 * functions call it first: they run in C, where the count hook does not
 * look at the clock, so a loop of costly matches would otherwise run for
 * as many calls as fit between two hook checks (10,000 instructions). */
void lx_check_clock(lua_State *L);

/* Creates the metatable that marks tables made from JSON arrays (kept in the
 * registry). Call once per state, in protected mode: raises on memory
 * errors. */
void lx_json_open(lua_State *L);

/* Pushes v as a Lua value: objects become tables with string keys (null
 * members left out), arrays become sequences marked as arrays (null members
 * left as holes), integral numbers within 2^53 become integers, other
 * numbers floats. NULL pushes nil. Raises on memory errors and on nesting
 * deeper than LX_JSON_MAX_DEPTH. */
void lx_json_push(lua_State *L, const cJSON *v);

/* Converts the Lua value at idx to JSON. Object keys come out in the order
 * they have in like (an earlier JSON version of the same value, may be
 * NULL), then any new keys sorted bytewise, so output does not depend on
 * Lua's hash order. root names the value in messages ("data" gives
 * "data.params.BLOCK[2] is a function ..."). Never raises and leaves the
 * stack as it found it; on error returns NULL and sets e. */
cJSON *lx_json_from_lua(lua_State *L, int idx, const cJSON *like, const char *root, dt_err *e);

/* ditto.array([t]): marks t (or a new table) as a JSON array, so that it is
 * written as [] while empty; returns it. */
int lx_json_array(lua_State *L);

#endif /* DITTO_LX_INT_H */
