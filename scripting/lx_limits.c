/* lx_limits.c -- bounds on the libraries' C functions, which run outside
 * the instruction count: pattern matching refused when its worst case is
 * too costly for the subject, string.rep capped in size, and every call
 * into string, table and utf8 preceded by a look at the clock. */
#include "scripting/lx_int.h"

#include <lauxlib.h>

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Lua's matcher backtracks: each quantified item (*, +, -) may try every
 * length of the run of subject characters its class matches, for each way
 * the items before it matched, from each start position. The product of
 * (run + 1) over the items, times the start positions, bounds the steps;
 * past this many the call is refused before it starts. About a second of
 * matching on a current CPU. */
#define LX_MATCH_MAX_STEPS 5e7
/* Scanning the subject once per quantified item to find its runs must stay
 * cheap too. */
#define LX_MATCH_MAX_SCAN 2e8

static int class_has(int c, int cl)
{
    int r;
    switch (tolower(cl)) {
    case 'a':
        r = isalpha(c);
        break;
    case 'c':
        r = iscntrl(c);
        break;
    case 'd':
        r = isdigit(c);
        break;
    case 'g':
        r = isgraph(c);
        break;
    case 'l':
        r = islower(c);
        break;
    case 'p':
        r = ispunct(c);
        break;
    case 's':
        r = isspace(c);
        break;
    case 'u':
        r = isupper(c);
        break;
    case 'w':
        r = isalnum(c);
        break;
    case 'x':
        r = isxdigit(c);
        break;
    default:
        return cl == c; /* an escaped character stands for itself */
    }
    if (isupper(cl))
        r = !r;
    return r != 0;
}

/* The end of the single-character class at p ("x", "%x", ".", "[...]"),
 * or NULL when it runs past end (Lua reports the malformed pattern). */
static const char *class_end(const char *p, const char *end)
{
    if (p >= end)
        return NULL;
    if (*p == '%')
        return p + 1 < end ? p + 2 : NULL;
    if (*p != '[')
        return p + 1;
    p++;
    if (p < end && *p == '^')
        p++;
    do { /* the first character of a set is literal, even ']' */
        if (p >= end)
            return NULL;
        if (*p++ == '%') {
            if (p >= end)
                return NULL;
            p++;
        }
    } while (p >= end || *p != ']');
    return p + 1;
}

/* Does character c belong to the class [p, ep)? */
static int class_match(int c, const char *p, const char *ep)
{
    if (*p == '.')
        return 1;
    if (*p == '%')
        return class_has(c, (unsigned char)p[1]);
    if (*p != '[')
        return (unsigned char)*p == c;
    const char *q = p + 1, *close = ep - 1; /* close: the ']' */
    int yes = 1;
    if (*q == '^') {
        yes = 0;
        q++;
    }
    while (q < close) {
        if (*q == '%' && q + 1 < close) {
            if (class_has(c, (unsigned char)q[1]))
                return yes;
            q += 2;
        } else if (q + 2 < close && q[1] == '-') {
            if ((unsigned char)q[0] <= c && c <= (unsigned char)q[2])
                return yes;
            q += 3;
        } else {
            if ((unsigned char)*q == c)
                return yes;
            q++;
        }
    }
    return !yes;
}

/* The longest run of subject characters in the class. */
static size_t longest_run(const char *s, size_t n, const char *p, const char *ep)
{
    size_t best = 0, cur = 0;
    for (size_t i = 0; i < n; i++) {
        cur = class_match((unsigned char)s[i], p, ep) ? cur + 1 : 0;
        if (cur > best)
            best = cur;
    }
    return best;
}

/* The start positions where the pattern's fixed prefix -- its
 * single-character items before the first quantified or special one --
 * matches: only from those can the items after it run. The pattern of a C
 * comment (a slash, an escaped star, a lazy dot, an escaped star, a slash)
 * on a kernel source starts at each slash-star, not at every byte. n when
 * the pattern has no such prefix. */
static size_t prefix_starts(const char *s, size_t n, const char *p, const char *end)
{
    const char *item[32], *item_end[32];
    int k = 0;
    while (p < end && k < 32) {
        if (*p == '(' || *p == ')') {
            p++;
            continue;
        }
        if (*p == '$' && p + 1 == end)
            break;
        if (*p == '%' && p + 1 < end && (p[1] == 'b' || p[1] == 'f' || isdigit((unsigned char)p[1])))
            break;
        const char *ep = class_end(p, end);
        if (ep == NULL || (ep < end && strchr("*+-?", *ep) != NULL))
            break;
        item[k] = p;
        item_end[k] = ep;
        k++;
        p = ep;
    }
    if (k == 0)
        return n;
    size_t starts = 0;
    for (size_t i = 0; i + (size_t)k <= n; i++) {
        int ok = 1;
        for (int j = 0; j < k && ok; j++)
            ok = class_match((unsigned char)s[i + (size_t)j], item[j], item_end[j]);
        starts += (size_t)ok;
    }
    return starts;
}

/* Raise unless matching pattern p against subject s can be done in a
 * bounded number of steps. */
static void check_pattern(lua_State *L, const char *fname, const char *s, size_t n, const char *p,
                          size_t pl)
{
    const char *end = p + pl;
    double steps = 0, scanned = 0; /* log of the step bound; bytes scanned */
    int quantified = 0;
    /* A leading '^' anchors find, match and gsub; gmatch takes it as a
     * character and tries every start. */
    if (p < end && *p == '^' && strcmp(fname, "gmatch") != 0)
        p++;
    else
        steps = log((double)prefix_starts(s, n, p, end) + 1);
    while (p < end) {
        if (*p == '(' || *p == ')' || (*p == '$' && p + 1 == end)) {
            p++;
            continue;
        }
        if (*p == '%' && p + 1 < end && p[1] == 'b') {
            p += 4; /* %bxy scans up to the whole subject */
            steps += log((double)n + 1);
            continue;
        }
        if (*p == '%' && p + 1 < end && p[1] == 'f') {
            p += 2;
            const char *ep = class_end(p, end);
            if (ep == NULL)
                return; /* malformed: Lua says so */
            p = ep;
            continue;
        }
        if (*p == '%' && p + 1 < end && isdigit((unsigned char)p[1])) {
            p += 2; /* a back-reference compares up to a capture's length */
            steps += log((double)n + 1);
            continue;
        }
        const char *ep = class_end(p, end);
        if (ep == NULL)
            return;
        if (ep < end && (*ep == '*' || *ep == '+' || *ep == '-')) {
            scanned += (double)n;
            if (scanned > LX_MATCH_MAX_SCAN)
                luaL_error(L,
                           "string.%s: pattern too complex for a subject of %I bytes (%d or more "
                           "repeated items)",
                           fname, (LUA_INTEGER)n, quantified + 1);
            steps += log((double)longest_run(s, n, p, ep) + 1);
            quantified++;
            p = ep + 1;
        } else if (ep < end && *ep == '?') {
            steps += log(2.0);
            p = ep + 1;
        } else {
            p = ep;
        }
        if (steps > log(LX_MATCH_MAX_STEPS)) {
            char msg[400]; /* lua_pushfstring has no %g */
            snprintf(msg, sizeof msg,
                     "string.%s: this pattern could take up to %.3g steps on a subject of %zu "
                     "bytes (the limit is %.0e): its repeated items (*, +, -) can each match long "
                     "runs of the subject; anchor it, use narrower classes or fewer repeats",
                     fname, exp(steps), n, LX_MATCH_MAX_STEPS);
            luaL_error(L, "%s", msg);
        }
    }
}

/* find, match, gmatch, gsub: check, then call the library's function (the
 * closure's upvalue 1) with the same arguments. Upvalue 2 is the name. */
static int guarded_match(lua_State *L)
{
    size_t n = 0, pl = 0;
    const char *s = luaL_checklstring(L, 1, &n);
    const char *p = luaL_checklstring(L, 2, &pl);
    const char *fname = lua_tostring(L, lua_upvalueindex(2));
    lx_check_clock(L);
    int plain = strcmp(fname, "find") == 0 && lua_toboolean(L, 4);
    if (!plain)
        check_pattern(L, fname, s, n, p, pl);
    int nargs = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* push the library function */
    lua_insert(L, 1);                      /* put it under the arguments */
    lua_call(L, nargs, LUA_MULTRET);
    return lua_gettop(L);
}

/* string.rep with the result's size checked before it is built. */
static int guarded_rep(lua_State *L)
{
    size_t l = 0, lsep = 0;
    luaL_checklstring(L, 1, &l);
    lua_Integer n = luaL_checkinteger(L, 2);
    luaL_optlstring(L, 3, "", &lsep);
    size_t cap = (size_t)lua_tointeger(L, lua_upvalueindex(2));
    lx_check_clock(L);
    if (n > 0) {
        double total = (double)l * (double)n + (double)lsep * (double)(n - 1);
        if (total > (double)cap) {
            char msg[200]; /* lua_pushfstring has no %.0f */
            snprintf(msg, sizeof msg,
                     "string.rep: a result of %.0f bytes is over the %zu-byte limit (a quarter of "
                     "the hooks' memory cap)",
                     total, cap);
            return luaL_error(L, "%s", msg);
        }
    }
    int nargs = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* push the library's rep */
    lua_insert(L, 1);                      /* put it under the arguments */
    lua_call(L, nargs, 1);
    return 1;
}

/* Any other library function: the clock first, then the function (the
 * closure's upvalue 1). table.sort of a large table or utf8.len of a long
 * string costs milliseconds in C; a loop of them fits thousands of calls
 * between two looks of the count hook. */
static int clocked(lua_State *L)
{
    lx_check_clock(L);
    lua_pushvalue(L, lua_upvalueindex(1)); /* push the library function */
    lua_insert(L, 1);                      /* put it under the arguments */
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* Wraps every C function of the library table on top of the stack in
 * clocked; the string library's matchers and rep are replaced after this
 * by their guarded versions, which look at the clock themselves. */
static void clock_library(lua_State *L)
{
    lua_pushnil(L); /* push the first key */
    while (lua_next(L, -2) != 0) {
        /* the stack: library, key, value */
        if (lua_type(L, -2) == LUA_TSTRING && lua_iscfunction(L, -1)) {
            lua_pushcclosure(L, clocked, 1); /* wrap the value; pops it */
            lua_pushvalue(L, -2);            /* push the key */
            lua_insert(L, -2);               /* key, wrapper */
            lua_rawset(L, -4);               /* library[key] = wrapper; pops both */
        } else {
            lua_pop(L, 1); /* pop the value, keep the key */
        }
    }
}

void lx_limits_open(lua_State *L, size_t rep_cap)
{
    static const char *const libs[] = {"string", "table", "utf8"};
    for (size_t i = 0; i < DT_ARRAY_LEN(libs); i++) {
        if (lua_getglobal(L, libs[i]) == LUA_TTABLE) /* push the library */
            clock_library(L);
        lua_pop(L, 1); /* remove it */
    }
    static const char *const matchers[] = {"find", "match", "gmatch", "gsub"};
    lua_getglobal(L, "string"); /* push the string library */
    for (size_t i = 0; i < DT_ARRAY_LEN(matchers); i++) {
        lua_getfield(L, -1, matchers[i]);      /* push string[name] */
        lua_pushstring(L, matchers[i]);        /* push its name */
        lua_pushcclosure(L, guarded_match, 2); /* wrap both; pops them */
        lua_setfield(L, -2, matchers[i]);      /* string[name] = wrapper; pops it */
    }
    lua_getfield(L, -1, "rep");               /* push string.rep */
    lua_pushinteger(L, (lua_Integer)rep_cap); /* push the cap */
    lua_pushcclosure(L, guarded_rep, 2);      /* wrap both; pops them */
    lua_setfield(L, -2, "rep");               /* string.rep = wrapper; pops it */
    lua_pop(L, 1);                            /* remove the string library */
}
