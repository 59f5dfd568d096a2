/* lx.c -- the Lua 5.4 hook runtime: sandboxed state, the ditto module, budgets and guarded calls.
 * Over 1,000 lines: the sandbox, the budgets and the whole ditto module the
 * hooks see are one Lua state's setup. */
#include "scripting/scripting.h"

#include "scripting/lx_int.h"

#include <lauxlib.h>
#include <lualib.h>

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define LX_DEFAULT_BUDGET 10000000L
#define LX_DEFAULT_MEMORY ((size_t)64 << 20)
#define LX_DEFAULT_SECONDS 2.0
/* A hook file is source text written by a person: larger is a mistake
 * (--hook /dev/zero, a matrix named by accident). */
#define LX_MAX_FILE ((size_t)4 << 20)
/* The hook fires every this many instructions, to count the budget down
 * and to look at the clock. */
#define LX_BUDGET_CHUNK 10000L
/* ditto.log text kept per call; a hook printing in a loop must not grow
 * ditto's own (uncapped) memory without bound. */
#define LX_LOG_MAX ((size_t)1 << 20)

static const char *const step_names[] = {"profile", "plan",    "check", "generate", "compile",
                                         "verify",  "measure", "tune",  "learn",    NULL};
static const char *const phase_names[] = {"before", "after", NULL};

typedef enum { REG_ON, REG_REVIEW, REG_RULE } reg_kind;

/* One function a hook file registered. */
typedef struct lx_reg {
    reg_kind kind;
    int ref;        /* LUA_REGISTRYINDEX reference to the function */
    int enabled;    /* cleared by the function's first error */
    int step;       /* REG_ON: index into step_names */
    int after;      /* REG_ON: 0 before, 1 after */
    char *id;       /* REG_RULE: the rule's id */
    char *message;  /* REG_RULE: a finding's text unless check gives one */
    char *severity; /* REG_RULE: error, warning or note */
    char *where;    /* "FILE:LINE" where the function was defined */
} lx_reg;

/* One ditto.param_space call. */
typedef struct lx_space {
    char *strategy; /* template strategy, e.g. "csr-thread" */
    cJSON *space;   /* {NAME: [values...]}, owned */
} lx_space;

struct lx_state {
    lua_State *L;
    lx_opts opts;     /* with the defaults filled in */
    size_t mem_used;  /* bytes the allocator has handed out */
    int mem_refused;  /* the cap refused an allocation since the last call began */
    long budget_left; /* instructions left to the current call */
    int budget_armed; /* the count the hook is armed with */
    int budget_blown; /* the current call ran out of instructions */
    double deadline;  /* dt_now() past which the current call fails; 0: none */
    int time_blown;   /* the current call ran out of time */
    int loading;      /* a hook file's top level runs: ditto.on & co. may register */
    lx_reg *regs;     /* in registration order */
    size_t nregs, capregs;
    lx_space *spaces; /* in registration order */
    size_t nspaces, capspaces;
    dt_buf *log;        /* where ditto.log writes during a call; NULL: dt_info */
    size_t log_written; /* bytes written to log during the current call */
};

/* The state lives in the lua_State's extra space, so C functions, the
 * count hook and the allocator-free paths can all find it. */
static lx_state *getstate(lua_State *L)
{
    return *(lx_state **)lua_getextraspace(L);
}

/* ---- memory ------------------------------------------------------------ */

/* lua_Alloc with a cap on the whole state. Refusing (NULL) makes Lua run an
 * emergency collection, then raise "not enough memory" in the code that
 * asked: the offending hook fails, the state survives. Shrinks and frees
 * are never refused. */
static void *lx_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    lx_state *S = ud;
    size_t old = ptr != NULL ? osize : 0; /* with ptr NULL, osize is a type tag */
    if (nsize == 0) {
        free(ptr);
        S->mem_used -= old;
        return NULL;
    }
    if (nsize > old && nsize - old > S->opts.memory_cap - S->mem_used) {
        S->mem_refused = 1;
        return NULL;
    }
    /* C functions (string building, table.concat) run outside the count
     * hook; they allocate, so the clock is checked here too. */
    if (nsize > old && S->deadline > 0 && (S->time_blown || dt_now() > S->deadline)) {
        S->time_blown = 1;
        return NULL;
    }
    void *p = realloc(ptr, nsize);
    if (p == NULL)
        return NULL;
    S->mem_used = S->mem_used - old + nsize;
    return p;
}

/* Every Lua call is protected, so reaching this is a bug in this file. */
static int lx_panic(lua_State *L)
{
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";
    fprintf(stderr, "ditto: unprotected Lua error: %s\n", msg);
    abort();
    return 0;
}

/* ---- instruction budget ------------------------------------------------ */

static int chunk_of(long left)
{
    return (int)(left < LX_BUDGET_CHUNK ? left : LX_BUDGET_CHUNK);
}

static void budget_hook(lua_State *L, lua_Debug *ar)
{
    lx_state *S = getstate(L);
    if (!S->budget_blown && !S->time_blown && S->deadline > 0 && dt_now() > S->deadline) {
        S->time_blown = 1;
        lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1); /* as below: no pcall swallows it */
    }
    if (S->time_blown) {
        if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
            lua_pushfstring(L, "%s:%d: ", ar->short_src, ar->currentline); /* push position */
        else
            lua_pushliteral(L, ""); /* no position */
        lua_pushfstring(L, "time budget of %f s exceeded (an endless loop or a costly string "
                           "operation?)",
                        (LUA_NUMBER)S->opts.time_budget); /* push the message */
        lua_concat(L, 2);                                 /* position .. message */
        lua_error(L);                                     /* raise it */
    }
    if (!S->budget_blown) {
        S->budget_left -= S->budget_armed;
        if (S->budget_left > 0) {
            S->budget_armed = chunk_of(S->budget_left);
            lua_sethook(L, budget_hook, LUA_MASKCOUNT, S->budget_armed);
            return;
        }
        S->budget_blown = 1;
        /* From now on every instruction raises, so a script's own pcall
         * cannot swallow the error and carry on looping. */
        lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1);
    }
    /* ar is the running Lua function: name its line rather than
     * luaL_where's caller level. */
    if (lua_getinfo(L, "Sl", ar) && ar->currentline > 0)
        lua_pushfstring(L, "%s:%d: ", ar->short_src, ar->currentline); /* push position */
    else
        lua_pushliteral(L, ""); /* no position */
    lua_pushfstring(L, "instruction budget of %I exceeded (an endless loop?)",
                    (LUA_INTEGER)S->opts.instruction_budget); /* push the message */
    lua_concat(L, 2);                                         /* position .. message */
    lua_error(L);                                             /* raise it */
}

void lx_check_clock(lua_State *L)
{
    lx_state *S = getstate(L);
    if (S->deadline <= 0 || !(S->time_blown || dt_now() > S->deadline))
        return;
    S->time_blown = 1;
    lua_sethook(L, budget_hook, LUA_MASKCOUNT, 1); /* as in the hook: no pcall swallows it */
    luaL_error(L, "time budget of %f s exceeded (an endless loop or a costly string operation?)",
               (LUA_NUMBER)S->opts.time_budget);
}

static void budget_arm(lx_state *S)
{
    S->budget_blown = 0;
    S->time_blown = 0;
    S->deadline = dt_now() + S->opts.time_budget;
    S->budget_left = S->opts.instruction_budget;
    S->budget_armed = chunk_of(S->budget_left);
    lua_sethook(S->L, budget_hook, LUA_MASKCOUNT, S->budget_armed);
}

/* Returns whether the budget ran out during the call. */
static int budget_disarm(lx_state *S)
{
    lua_sethook(S->L, NULL, 0, 0);
    S->deadline = 0;
    return S->budget_blown || S->time_blown;
}

/* ---- guarded calls ----------------------------------------------------- */

/* After a memory error: say whether it was the cap (set by the allocator,
 * during the call) or the machine that refused. */
static void mem_note(const lx_state *S, dt_buf *msg)
{
    if (S->mem_refused)
        dt_buf_printf(msg, " (the Lua memory cap of %zu bytes was reached)", S->opts.memory_cap);
}

/* Message handler: the error with a traceback, as lua.c does it. */
static int msghandler(lua_State *L)
{
    const char *msg = lua_tostring(L, 1);
    if (msg == NULL) { /* is error object not a string? */
        if (luaL_callmeta(L, 1, "__tostring") && lua_type(L, -1) == LUA_TSTRING)
            msg = lua_tostring(L, -1); /* its __tostring gave a string */
        else
            msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
    }
    luaL_traceback(L, L, msg, 1); /* append a standard traceback */
    return 1;                     /* return the traceback */
}

/* Calls the function under its nargs arguments with a fresh instruction
 * budget and the traceback handler. On success leaves nres results and
 * returns 0. On error leaves nothing of the call on the stack, puts the
 * raw message (first line, then the traceback) into err and returns -1. */
static int call_lua(lx_state *S, int nargs, int nres, dt_buf *err)
{
    lua_State *L = S->L;
    int fn = lua_gettop(L) - nargs;   /* function index */
    lua_pushcfunction(L, msghandler); /* push message handler */
    lua_insert(L, fn);                /* put it under function and args */
    S->mem_refused = 0;
    budget_arm(S);
    int rc = lua_pcall(L, nargs, nres, fn); /* call; replaces function and args by results */
    int blown = budget_disarm(S);
    lua_remove(L, fn); /* remove message handler from the stack */
    if (rc == LUA_OK && !blown)
        return 0;
    dt_buf_reset(err);
    if (rc == LUA_OK) {
        /* Defensive, should never fire: the hook raises on every
         * instruction once the budget is gone, so no call returns. */
        lua_pop(L, nres); /* remove the results */
        if (S->time_blown)
            dt_buf_printf(err, "time budget of %g s exceeded", S->opts.time_budget);
        else
            dt_buf_printf(err, "instruction budget of %ld exceeded", S->opts.instruction_budget);
        return -1;
    }
    if (rc == LUA_ERRMEM && S->time_blown) {
        /* The allocator refused because the clock ran out. */
        dt_buf_printf(err, "time budget of %g s exceeded (an endless loop or a costly string "
                           "operation?)",
                      S->opts.time_budget);
    } else if (rc == LUA_ERRMEM) {
        /* No handler runs for memory errors: the message is Lua's
         * preallocated one and there is no traceback. */
        dt_buf_puts(err, "not enough memory");
        mem_note(S, err);
    } else if (lua_type(L, -1) == LUA_TSTRING) {
        dt_buf_puts(err, lua_tostring(L, -1));
    } else {
        dt_buf_puts(err, "(error object is not a string)");
    }
    lua_pop(L, 1); /* remove the error */
    if (rc == LUA_ERRMEM)
        lua_gc(L, LUA_GCCOLLECT); /* give back what the failed call left behind */
    return -1;
}

/* Does line start with "SOMETHING:DIGITS:", Lua's position prefix? */
static int has_position(const char *line)
{
    const char *colon = strchr(line, ':');
    if (colon == NULL || colon == line)
        return 0;
    const char *p = colon + 1;
    if (*p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == ':';
}

/* Appends one error entry to out: the message's first line (prefixed with
 * where when it has no FILE:LINE of its own), the context line, then the
 * traceback, every continuation line indented by two spaces. The last
 * "[C]: in ?" frames are ditto's own C caller and are left out. */
static void format_error(dt_buf *out, const char *raw, const char *where, const char *context)
{
    const char *nl = strchr(raw, '\n');
    size_t first = nl != NULL ? (size_t)(nl - raw) : strlen(raw);
    char *line = dt_xstrndup(raw, first);
    if (where != NULL && !has_position(line))
        dt_buf_printf(out, "%s: ", where);
    dt_buf_printf(out, "%s\n", line);
    free(line);
    if (context != NULL)
        dt_buf_printf(out, "  %s\n", context);
    if (nl == NULL)
        return;
    const char *rest = nl + 1;
    size_t len = strlen(rest);
    static const char tail[] = "\t[C]: in ?";
    for (;;) {
        while (len > 0 && rest[len - 1] == '\n')
            len--;
        size_t tl = sizeof tail - 1;
        if (len >= tl && memcmp(rest + len - tl, tail, tl) == 0 &&
            (len == tl || rest[len - tl - 1] == '\n'))
            len -= tl;
        else
            break;
    }
    while (len > 0) {
        const char *e = memchr(rest, '\n', len);
        size_t n = e != NULL ? (size_t)(e - rest) : len;
        dt_buf_printf(out, "  %.*s\n", (int)n, rest);
        if (e == NULL)
            break;
        len -= n + 1;
        rest = e + 1;
    }
}

static void emit_error(dt_buf *errors, const char *text)
{
    if (errors != NULL) {
        dt_buf_puts(errors, text);
        return;
    }
    /* No buffer to hand it to: still never lose an error. */
    dt_warn("lua: %.*s", (int)(strlen(text) > 0 ? strlen(text) - 1 : 0), text);
}

static void describe_reg(const lx_reg *r, char *out, size_t outlen)
{
    switch (r->kind) {
    case REG_ON:
        snprintf(out, outlen, "the %s-%s hook", phase_names[r->after], step_names[r->step]);
        break;
    case REG_REVIEW:
        snprintf(out, outlen, "the review function");
        break;
    case REG_RULE:
        snprintf(out, outlen, "the check of rule '%s'", r->id);
        break;
    }
}

/* Reports a registered function's error and disables it for the run. */
static void reg_fail(lx_reg *r, const char *raw, dt_buf *errors)
{
    char what[128], context[512];
    describe_reg(r, what, sizeof what);
    snprintf(context, sizeof context, "in %s defined at %s; disabled for the rest of the run", what,
             r->where);
    dt_buf out = DT_BUF_INIT;
    format_error(&out, raw, r->where, context);
    emit_error(errors, dt_buf_str(&out));
    dt_buf_free(&out);
    r->enabled = 0;
}

/* Runs body(ctx) in protected mode: the C side of a call (pushing data,
 * reading results) raises on memory errors like any Lua code. Returns 0,
 * or -1 after reporting "lua: what: message" to errors. */
static int protect(lx_state *S, lua_CFunction body, void *ctx, const char *what, dt_buf *errors)
{
    lua_State *L = S->L;
    int top = lua_gettop(L);
    if (!lua_checkstack(L, LUA_MINSTACK)) {
        dt_buf msg = DT_BUF_INIT;
        dt_buf_printf(&msg, "lua: %s: no room on the Lua stack\n", what);
        emit_error(errors, dt_buf_str(&msg));
        dt_buf_free(&msg);
        return -1;
    }
    S->mem_refused = 0;
    lua_pushcfunction(L, body);     /* the protected body */
    lua_pushlightuserdata(L, ctx);  /* its only argument */
    int rc = lua_pcall(L, 1, 0, 0); /* run it; pops both, leaves the error if any */
    if (rc != LUA_OK) {
        dt_buf msg = DT_BUF_INIT;
        if (rc == LUA_ERRMEM) {
            dt_buf_printf(&msg, "lua: %s: not enough memory", what);
            mem_note(S, &msg);
            dt_buf_putc(&msg, '\n');
        } else {
            dt_buf_printf(&msg, "lua: %s: %s\n", what,
                          lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error");
        }
        emit_error(errors, dt_buf_str(&msg));
        dt_buf_free(&msg);
    }
    lua_settop(L, top); /* drop the error, if any */
    budget_disarm(S);
    S->log = NULL;
    S->loading = 0;
    return rc == LUA_OK ? 0 : -1;
}

/* ---- the ditto module -------------------------------------------------- */

static void must_be_loading(lua_State *L, const char *fname)
{
    if (!getstate(L)->loading)
        luaL_error(L, "ditto.%s can only be called while a hook file loads (at its top level)",
                   fname);
}

/* Records the function at index fn; returns the new entry, zeroed apart
 * from kind, ref, enabled and where. Raises (before touching the list) only
 * on memory errors. */
static lx_reg *reg_push(lua_State *L, reg_kind kind, int fn)
{
    lx_state *S = getstate(L);
    lua_Debug ar;
    lua_pushvalue(L, fn);      /* the function, for lua_getinfo */
    lua_getinfo(L, ">S", &ar); /* pops it */
    char where[LUA_IDSIZE + 32];
    if (ar.linedefined > 0)
        snprintf(where, sizeof where, "%s:%d", ar.short_src, ar.linedefined);
    else
        snprintf(where, sizeof where, "%s", ar.short_src);
    lua_pushvalue(L, fn);                     /* the function again */
    int ref = luaL_ref(L, LUA_REGISTRYINDEX); /* registry[ref] = function; pops it */
    if (S->nregs == S->capregs) {
        S->capregs = S->capregs ? 2 * S->capregs : 8;
        S->regs = dt_xrealloc(S->regs, S->capregs * sizeof *S->regs);
    }
    lx_reg *r = &S->regs[S->nregs++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->ref = ref;
    r->enabled = 1;
    r->where = dt_xstrdup(where);
    return r;
}

static int check_step(lua_State *L, int arg)
{
    const char *s = luaL_checkstring(L, arg);
    for (int i = 0; step_names[i] != NULL; i++)
        if (strcmp(s, step_names[i]) == 0)
            return i;
    return luaL_argerror(L, arg,
                         lua_pushfstring(L,
                                         "unknown step '%s' (steps: profile, plan, check, "
                                         "generate, compile, verify, measure, tune, learn)",
                                         s));
}

/* ditto.on(step, "before"|"after", fn) */
static int ditto_on(lua_State *L)
{
    int step = check_step(L, 1);
    int after = luaL_checkoption(L, 2, NULL, phase_names);
    luaL_checktype(L, 3, LUA_TFUNCTION);
    must_be_loading(L, "on");
    lx_reg *r = reg_push(L, REG_ON, 3);
    r->step = step;
    r->after = after;
    return 0;
}

/* ditto.review(fn) */
static int ditto_review(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    must_be_loading(L, "review");
    reg_push(L, REG_REVIEW, 1);
    return 0;
}

/* Pushes spec[name] without metamethods; returns its type. */
static int rawfield(lua_State *L, int t, const char *name)
{
    t = lua_absindex(L, t);  /* the key push below shifts relative indices */
    lua_pushstring(L, name); /* push the key */
    return lua_rawget(L, t); /* replace it with spec[key] */
}

/* ditto.rule{ id=, message=, severity=, check= } */
static int ditto_rule(lua_State *L)
{
    static const char *const fields[] = {"id", "message", "severity", "check", NULL};
    static const char *const severities[] = {"error", "warning", "note", NULL};
    luaL_checktype(L, 1, LUA_TTABLE);
    must_be_loading(L, "rule");
    lua_settop(L, 1); /* only the spec */
    /* A misspelt field (chek=) would otherwise be a rule that never runs. */
    lua_pushnil(L);               /* first key */
    while (lua_next(L, 1) != 0) { /* for each pair: key at -2, value at -1 */
        int known = 0;
        if (lua_type(L, -2) == LUA_TSTRING)
            for (int i = 0; fields[i] != NULL; i++)
                known |= strcmp(lua_tostring(L, -2), fields[i]) == 0;
        if (!known)
            return luaL_error(L,
                              "ditto.rule: unknown field %s (fields: id, message, severity, check)",
                              luaL_tolstring(L, -2, NULL));
        lua_pop(L, 1); /* remove value; keep key for next iteration */
    }
    if (rawfield(L, 1, "id") != LUA_TSTRING || lua_rawlen(L, -1) == 0) /* push spec.id (2) */
        return luaL_error(L, "ditto.rule: id must be a non-empty string");
    if (rawfield(L, 1, "message") != LUA_TSTRING) /* push spec.message (3) */
        return luaL_error(L, "ditto.rule: message must be a string");
    int sev = 1;                         /* warning */
    int st = rawfield(L, 1, "severity"); /* push spec.severity (4) */
    if (st != LUA_TNIL) {
        sev = -1;
        for (int i = 0; st == LUA_TSTRING && severities[i] != NULL; i++)
            if (strcmp(lua_tostring(L, 4), severities[i]) == 0)
                sev = i;
        if (sev < 0)
            return luaL_error(L, "ditto.rule: severity must be \"error\", \"warning\" or \"note\"");
    }
    if (rawfield(L, 1, "check") != LUA_TFUNCTION) /* push spec.check (5) */
        return luaL_error(L, "ditto.rule: check must be a function(source)");
    const char *id = lua_tostring(L, 2);
    lx_state *S = getstate(L);
    for (size_t i = 0; i < S->nregs; i++)
        if (S->regs[i].kind == REG_RULE && strcmp(S->regs[i].id, id) == 0)
            return luaL_error(L, "ditto.rule: a rule with id '%s' is already registered (%s)", id,
                              S->regs[i].where);
    lx_reg *r = reg_push(L, REG_RULE, 5);
    r->id = dt_xstrdup(id);
    r->message = dt_xstrdup(lua_tostring(L, 3));
    r->severity = dt_xstrdup(severities[sev]);
    return 0;
}

/* Is every value of space a non-empty list of scalars? On the first that
 * is not, writes which into e and returns -1. */
static int check_space(const cJSON *space, dt_err *e)
{
    if (!cJSON_IsObject(space) || space->child == NULL)
        return dt_err_set(e, "expected a table { NAME = {values...}, ... }");
    for (const cJSON *p = space->child; p != NULL; p = p->next) {
        if (!cJSON_IsArray(p) || p->child == NULL)
            return dt_err_set(e, "%s must be a non-empty list of values", p->string);
        for (const cJSON *v = p->child; v != NULL; v = v->next)
            if (!cJSON_IsNumber(v) && !cJSON_IsString(v) && !cJSON_IsBool(v))
                return dt_err_set(e, "%s may hold numbers, strings and booleans only", p->string);
    }
    return 0;
}

/* ditto.param_space(strategy, { NAME = {values...}, ... }) */
static int ditto_param_space(lua_State *L)
{
    const char *strategy = luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TTABLE);
    must_be_loading(L, "param_space");
    dt_err e = {0};
    cJSON *space = lx_json_from_lua(L, 2, NULL, "space", &e);
    if (space != NULL && check_space(space, &e) != 0) {
        cJSON_Delete(space);
        space = NULL;
    }
    if (space == NULL)
        return luaL_error(L, "ditto.param_space('%s'): %s", strategy, e.msg);
    lx_state *S = getstate(L);
    if (S->nspaces == S->capspaces) {
        S->capspaces = S->capspaces ? 2 * S->capspaces : 4;
        S->spaces = dt_xrealloc(S->spaces, S->capspaces * sizeof *S->spaces);
    }
    S->spaces[S->nspaces].strategy = dt_xstrdup(strategy);
    S->spaces[S->nspaces].space = space;
    S->nspaces++;
    return 0;
}

/* ditto.log(...) and print(...): tab-separated, one line per call, into
 * the current call's log (stdout belongs to the TUI). */
static int ditto_log(lua_State *L)
{
    lx_state *S = getstate(L);
    int n = lua_gettop(L);
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (int i = 1; i <= n; i++) {
        if (i > 1)
            luaL_addchar(&b, '\t');
        luaL_tolstring(L, i, NULL); /* push tostring(arg i) */
        luaL_addvalue(&b);          /* add it to the buffer; pops it */
    }
    luaL_pushresult(&b); /* push the line */
    size_t len = 0;
    const char *s = lua_tolstring(L, -1, &len);
    if (S->log == NULL) {
        dt_info("lua: %s", s);
        return 0;
    }
    if (S->log_written >= LX_LOG_MAX)
        return 0; /* already truncated */
    if (S->log_written + len + 1 > LX_LOG_MAX) {
        dt_buf_puts(S->log, "[ditto.log: output past 1 MiB for this call left out]\n");
        S->log_written = LX_LOG_MAX;
        return 0;
    }
    dt_buf_append(S->log, s, len);
    if (len == 0 || s[len - 1] != '\n')
        dt_buf_putc(S->log, '\n');
    S->log_written += len + 1;
    return 0;
}

static const luaL_Reg ditto_funcs[] = {
    {"on", ditto_on},     {"review", ditto_review},
    {"rule", ditto_rule}, {"param_space", ditto_param_space},
    {"log", ditto_log},   {"array", lx_json_array},
    {NULL, NULL},
};

/* ---- sandbox ----------------------------------------------------------- */

/* Globals a sandboxed script may reach for and not find, with why. */
static const struct {
    const char *name;
    const char *why;
} absent_globals[] = {
    {"io", "(run with --lua-unsafe to allow io and os)"},
    {"os", "(run with --lua-unsafe to allow io and os)"},
    {"load", "(hooks cannot load code at run time)"},
    {"loadfile", "(hooks cannot load code at run time)"},
    {"dofile", "(hooks cannot load code at run time)"},
    {"require", "(hooks cannot load modules; put shared code in the same file)"},
    {"package", "(hooks cannot load modules; put shared code in the same file)"},
    {"collectgarbage", "(ditto manages the hooks' memory)"},
    {"debug", "(the debug library could escape the sandbox)"},
    {"coroutine", "(not opened for hooks)"},
};

/* _G's __index: reading an absent global gives nil as usual, except for
 * the standard names the sandbox removed, which raise a message saying so
 * (at the reader's FILE:LINE, from luaL_error's level 1). */
static int absent_global(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0; /* nil */
    const char *name = lua_tostring(L, 2);
    for (size_t i = 0; i < DT_ARRAY_LEN(absent_globals); i++) {
        if (strcmp(name, absent_globals[i].name) != 0)
            continue;
        if (getstate(L)->opts.unsafe && (strcmp(name, "io") == 0 || strcmp(name, "os") == 0))
            return luaL_error(L, "%s was removed from the global table", name);
        return luaL_error(L, "%s is not available in the sandbox %s", name, absent_globals[i].why);
    }
    return 0; /* nil */
}

/* setmetatable without __gc: finalizers run with hooks off, so a __gc that
 * loops would escape the instruction budget. The field must be present
 * when the metatable is set for Lua to finalize, so checking here is
 * enough. */
static int sandbox_setmetatable(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_pushliteral(L, "__gc");       /* push the key */
        if (lua_rawget(L, 2) != LUA_TNIL) /* replace it with mt.__gc */
            return luaL_error(L, "__gc metamethods are not available to hooks (a finalizer runs "
                                 "outside the instruction budget)");
        lua_pop(L, 1); /* remove mt.__gc */
    }
    lua_pushvalue(L, lua_upvalueindex(1)); /* the real setmetatable */
    lua_insert(L, 1);                      /* put it under the arguments */
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1; /* the table */
}

static int open_body(lua_State *L)
{
    lx_state *S = lua_touserdata(L, 1);
    static const luaL_Reg libs[] = {
        {LUA_GNAME, luaopen_base},        {LUA_TABLIBNAME, luaopen_table},
        {LUA_STRLIBNAME, luaopen_string}, {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(libs); i++) {
        luaL_requiref(L, libs[i].name, libs[i].func, 1); /* push the library, set the global */
        lua_pop(L, 1);                                   /* remove the library */
    }
    lx_limits_open(L, S->opts.memory_cap / 4);
    if (S->opts.unsafe) {
        luaL_requiref(L, LUA_IOLIBNAME, luaopen_io, 1); /* push io, set the global */
        lua_pop(L, 1);                                  /* remove io */
        luaL_requiref(L, LUA_OSLIBNAME, luaopen_os, 1); /* push os, set the global */
        lua_pop(L, 1);                                  /* remove os */
    }
    static const char *const removed[] = {"load", "loadfile", "dofile", "require",
                                          "collectgarbage"};
    for (size_t i = 0; i < DT_ARRAY_LEN(removed); i++) {
        lua_pushnil(L);               /* push nil */
        lua_setglobal(L, removed[i]); /* _G[name] = nil; pops it */
    }
    lua_getglobal(L, "setmetatable");             /* push the real setmetatable */
    lua_pushcclosure(L, sandbox_setmetatable, 1); /* wrap it (upvalue 1); pops it */
    lua_setglobal(L, "setmetatable");             /* _G.setmetatable = wrapper; pops it */
    lua_pushcfunction(L, ditto_log);              /* push print's replacement */
    lua_setglobal(L, "print");                    /* _G.print = ditto_log; pops it */

    lua_pushglobaltable(L);              /* push _G */
    lua_createtable(L, 0, 1);            /* push its metatable */
    lua_pushcfunction(L, absent_global); /* push the __index function */
    lua_setfield(L, -2, "__index");      /* mt.__index = absent_global; pops it */
    lua_setmetatable(L, -2);             /* setmetatable(_G, mt); pops mt */
    lua_pop(L, 1);                       /* remove _G */

    lx_json_open(L);
    luaL_newlib(L, ditto_funcs); /* push the ditto module */
    lua_setglobal(L, "ditto");   /* _G.ditto = module; pops it */
    return 0;
}

/* ---- state ------------------------------------------------------------- */

lx_state *lx_new(const lx_opts *o, dt_err *e)
{
    lx_state *S = dt_xcalloc(1, sizeof *S);
    if (o != NULL)
        S->opts = *o;
    if (S->opts.instruction_budget <= 0)
        S->opts.instruction_budget = LX_DEFAULT_BUDGET;
    if (S->opts.memory_cap == 0)
        S->opts.memory_cap = LX_DEFAULT_MEMORY;
    if (!(S->opts.time_budget > 0))
        S->opts.time_budget = LX_DEFAULT_SECONDS;
    S->L = lua_newstate(lx_alloc, S);
    if (S->L == NULL) {
        dt_err_set(e, "cannot create a Lua state within a memory cap of %zu bytes",
                   S->opts.memory_cap);
        free(S);
        return NULL;
    }
    *(lx_state **)lua_getextraspace(S->L) = S;
    lua_atpanic(S->L, lx_panic);
    dt_buf err = DT_BUF_INIT;
    if (protect(S, open_body, S, "opening the libraries", &err) != 0) {
        dt_err_set(e, "%.*s", (int)(err.len > 0 ? err.len - 1 : 0), dt_buf_str(&err));
        dt_buf_free(&err);
        lx_free(S);
        return NULL;
    }
    dt_buf_free(&err);
    return S;
}

static void reg_clear(lx_reg *r)
{
    free(r->id);
    free(r->message);
    free(r->severity);
    free(r->where);
}

void lx_free(lx_state *S)
{
    if (S == NULL)
        return;
    lua_close(S->L);
    for (size_t i = 0; i < S->nregs; i++)
        reg_clear(&S->regs[i]);
    free(S->regs);
    for (size_t i = 0; i < S->nspaces; i++) {
        free(S->spaces[i].strategy);
        cJSON_Delete(S->spaces[i].space);
    }
    free(S->spaces);
    free(S);
}

int lx_hook_count(const lx_state *S)
{
    int n = 0;
    for (size_t i = 0; i < S->nregs; i++)
        n += S->regs[i].enabled;
    return n;
}

/* ---- loading ----------------------------------------------------------- */

typedef struct load_ctx {
    lx_state *S;
    const char *text;
    size_t len;
    const char *chunkname; /* "@PATH": messages say PATH:LINE: */
    dt_buf err;            /* the failure, raw (message, then traceback) */
    int failed;
} load_ctx;

/* Forgets what a failed file registered: registrations past the marks. */
static void rollback(lx_state *S, size_t nregs, size_t nspaces)
{
    while (S->nregs > nregs) {
        lx_reg *r = &S->regs[--S->nregs];
        luaL_unref(S->L, LUA_REGISTRYINDEX, r->ref); /* reuses an existing slot: no allocation */
        reg_clear(r);
    }
    while (S->nspaces > nspaces) {
        lx_space *sp = &S->spaces[--S->nspaces];
        free(sp->strategy);
        cJSON_Delete(sp->space);
    }
}

static int load_body(lua_State *L)
{
    load_ctx *c = lua_touserdata(L, 1);
    lx_state *S = c->S;
    /* "t": text only. Precompiled chunks can crash the VM, so bytecode is
     * never loaded, whatever the file says. */
    int st = luaL_loadbufferx(L, c->text, c->len, c->chunkname, "t"); /* push chunk or error */
    if (st != LUA_OK) {
        if (st == LUA_ERRMEM)
            dt_buf_puts(&c->err, "not enough memory");
        else
            dt_buf_puts(&c->err, lua_tostring(L, -1));
        lua_pop(L, 1); /* remove the error */
        c->failed = 1;
        return 0;
    }
    S->loading = 1;
    if (call_lua(S, 0, 0, &c->err) != 0)
        c->failed = 1;
    S->loading = 0;
    return 0;
}

/* Loads path; on failure fills err with the whole report (first line
 * PATH:LINE: message, then indented traceback) and returns -1. */
static int load_file(lx_state *S, const char *path, dt_buf *err)
{
    dt_err re = {0};
    size_t len = 0;
    char *text = dt_read_file_max(path, LX_MAX_FILE, &len, &re);
    if (text == NULL) {
        dt_buf_printf(err, "%s\n", re.msg);
        return -1;
    }
    load_ctx c = {S, text, len, NULL, DT_BUF_INIT, 0};
    if (len >= 4 && memcmp(text, LUA_SIGNATURE, 4) == 0) {
        dt_buf_printf(
            err, "%s: is precompiled Lua bytecode; hooks are loaded as source text only\n", path);
        free(text);
        return -1;
    }
    /* Like luaL_loadfilex: skip a UTF-8 BOM, and blank a first line
     * starting with '#' (a shebang) so line numbers stay right. */
    if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) {
        c.text += 3;
        c.len -= 3;
    }
    if (c.len > 0 && c.text[0] == '#') {
        for (char *p = (char *)c.text; p < c.text + c.len && *p != '\n'; p++)
            *p = ' ';
    }
    char *chunkname = dt_xasprintf("@%s", path);
    c.chunkname = chunkname;
    size_t mark = S->nregs, smark = S->nspaces;
    dt_buf outer = DT_BUF_INIT;
    if (protect(S, load_body, &c, path, &outer) != 0) {
        /* the C side ran out of memory: outer is already a report */
        rollback(S, mark, smark);
        dt_buf_puts(err, dt_buf_str(&outer));
        c.failed = 1;
    } else if (c.failed) {
        rollback(S, mark, smark);
        format_error(err, dt_buf_str(&c.err), path, NULL);
    }
    dt_buf_free(&outer);
    dt_buf_free(&c.err);
    free(chunkname);
    free(text);
    return c.failed ? -1 : 0;
}

int lx_load_file(lx_state *S, const char *path, dt_err *e)
{
    dt_buf err = DT_BUF_INIT;
    int rc = load_file(S, path, &err);
    if (rc != 0) {
        const char *s = dt_buf_str(&err);
        const char *nl = strchr(s, '\n');
        dt_err_set(e, "%.*s", (int)(nl != NULL ? nl - s : (ptrdiff_t)strlen(s)), s);
    }
    dt_buf_free(&err);
    return rc;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int lx_load_dir(lx_state *S, const char *dir, dt_buf *errors)
{
    DIR *d = opendir(dir);
    if (d == NULL) {
        if (errno != ENOENT) {
            dt_buf msg = DT_BUF_INIT;
            dt_buf_printf(&msg, "%s: %s\n", dir, strerror(errno));
            emit_error(errors, dt_buf_str(&msg));
            dt_buf_free(&msg);
        }
        return 0;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.' || !dt_endswith(de->d_name, ".lua"))
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            names = dt_xrealloc(names, cap * sizeof *names);
        }
        names[n++] = dt_xstrdup(de->d_name);
    }
    closedir(d);
    if (n > 0)
        qsort(names, n, sizeof *names, cmp_str);
    int loaded = 0;
    for (size_t i = 0; i < n; i++) {
        char *path = dt_xasprintf("%s/%s", dir, names[i]);
        dt_buf err = DT_BUF_INIT;
        if (load_file(S, path, &err) == 0)
            loaded++;
        else
            emit_error(errors, dt_buf_str(&err));
        dt_buf_free(&err);
        free(path);
        free(names[i]);
    }
    free(names);
    return loaded;
}

/* ---- hooks ------------------------------------------------------------- */

typedef struct run_ctx {
    lx_state *S;
    int step, after;
    const cJSON *in; /* the data as given (borrowed) */
    cJSON *snap;     /* the last version a hook left, owned; NULL while none */
    dt_buf *errors;
    int ran;
} run_ctx;

static int run_body(lua_State *L)
{
    run_ctx *c = lua_touserdata(L, 1);
    lx_state *S = c->S;
    dt_buf err = DT_BUF_INIT;
    for (size_t i = 0; i < S->nregs; i++) {
        lx_reg *r = &S->regs[i];
        if (r->kind != REG_ON || !r->enabled || r->step != c->step || r->after != c->after)
            continue;
        /* Each hook gets a fresh table made from the last accepted version:
         * a hook that fails halfway leaves no half-made edits behind. */
        const cJSON *cur = c->snap != NULL ? c->snap : c->in;
        if (cur != NULL)
            lx_json_push(L, cur); /* push the data table */
        else
            lua_newtable(L);                       /* no data: an empty table */
        lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref); /* push the hook */
        lua_pushvalue(L, -2);                      /* the data again, as its argument */
        if (call_lua(S, 1, 1, &err) != 0) {
            reg_fail(r, dt_buf_str(&err), c->errors);
            lua_pop(L, 1); /* remove the data */
            continue;
        }
        /* data at -2, result at -1: a table replaces the data, nil keeps
         * the (possibly edited) table the hook was given. */
        int rt = lua_type(L, -1);
        if (rt != LUA_TNIL && rt != LUA_TTABLE) {
            dt_buf_reset(&err);
            dt_buf_printf(&err,
                          "returned a %s; a hook edits its table in place, or returns a "
                          "replacement table, or nothing",
                          lua_typename(L, rt));
            reg_fail(r, dt_buf_str(&err), c->errors);
            lua_pop(L, 2); /* remove data and result */
            continue;
        }
        dt_err e = {0};
        cJSON *next = lx_json_from_lua(L, rt == LUA_TTABLE ? -1 : -2, cur, "data", &e);
        lua_pop(L, 2); /* remove data and result */
        if (next == NULL) {
            dt_buf_reset(&err);
            dt_buf_printf(&err, "left data that is not JSON: %s", e.msg);
            reg_fail(r, dt_buf_str(&err), c->errors);
            continue;
        }
        cJSON_Delete(c->snap);
        c->snap = next;
        c->ran++;
    }
    dt_buf_free(&err);
    return 0;
}

int lx_run_hooks(lx_state *S, const char *step, const char *phase, cJSON **data, dt_buf *log,
                 dt_buf *errors)
{
    assert(data != NULL);
    run_ctx c = {S, -1, -1, *data, NULL, errors, 0};
    for (int i = 0; step_names[i] != NULL; i++)
        if (dt_streq(step, step_names[i]))
            c.step = i;
    for (int i = 0; phase_names[i] != NULL; i++)
        if (dt_streq(phase, phase_names[i]))
            c.after = i;
    int any = 0;
    for (size_t i = 0; i < S->nregs; i++) {
        const lx_reg *r = &S->regs[i];
        any |= r->kind == REG_ON && r->enabled && r->step == c.step && r->after == c.after;
    }
    if (!any)
        return 0; /* nothing to run: the data is not even converted */
    char what[64];
    snprintf(what, sizeof what, "%s %s hooks", dt_streq(phase, "after") ? "after" : "before", step);
    S->log = log;
    S->log_written = 0;
    protect(S, run_body, &c, what, errors);
    /* Even after a failure of the C side, snap is a version some hook left
     * and JSON accepted: keep it. */
    if (c.snap != NULL) {
        cJSON_Delete(*data);
        *data = c.snap;
    }
    return c.ran;
}

/* ---- review ------------------------------------------------------------ */

typedef struct review_ctx {
    lx_state *S;
    const cJSON *step;
    dt_buf *reason;
    dt_buf *errors;
    lx_decision decision;
} review_ctx;

static int review_body(lua_State *L)
{
    review_ctx *c = lua_touserdata(L, 1);
    lx_state *S = c->S;
    dt_buf err = DT_BUF_INIT;
    for (size_t i = 0; i < S->nregs && c->decision == LX_ASK; i++) {
        lx_reg *r = &S->regs[i];
        if (r->kind != REG_REVIEW || !r->enabled)
            continue;
        lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref); /* push the review function */
        if (c->step != NULL)
            lx_json_push(L, c->step); /* push a fresh step table */
        else
            lua_newtable(L); /* no step: an empty table */
        if (call_lua(S, 1, 2, &err) != 0) {
            reg_fail(r, dt_buf_str(&err), c->errors);
            continue;
        }
        /* decision at -2, reason at -1 */
        const char *d = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (lua_isnil(L, -2) || (d != NULL && strcmp(d, "ask") == 0)) {
            /* undecided: ask the next function, then the person */
        } else if (d != NULL && strcmp(d, "approve") == 0) {
            c->decision = LX_APPROVE;
        } else if (d != NULL && strcmp(d, "reject") == 0) {
            int rt = lua_type(L, -1);
            if (rt == LUA_TSTRING || rt == LUA_TNUMBER) {
                c->decision = LX_REJECT;
                if (c->reason != NULL)
                    dt_buf_puts(c->reason, lua_tostring(L, -1));
            } else if (rt == LUA_TNIL) {
                c->decision = LX_REJECT;
                if (c->reason != NULL)
                    dt_buf_printf(c->reason, "rejected by the Lua review function at %s", r->where);
            } else {
                dt_buf_reset(&err);
                dt_buf_printf(&err,
                              "returned \"reject\" with a %s as the reason (expected a string)",
                              lua_typename(L, rt));
                reg_fail(r, dt_buf_str(&err), c->errors);
            }
        } else {
            dt_buf_reset(&err);
            if (d != NULL)
                dt_buf_printf(&err, "returned \"%s\"", d);
            else
                dt_buf_printf(&err, "returned a %s", luaL_typename(L, -2));
            dt_buf_puts(&err, " (a review function returns \"approve\", \"reject\", reason, or nil "
                              "to ask)");
            reg_fail(r, dt_buf_str(&err), c->errors);
        }
        lua_pop(L, 2); /* remove decision and reason */
    }
    dt_buf_free(&err);
    return 0;
}

lx_decision lx_review(lx_state *S, const cJSON *step, dt_buf *reason, dt_buf *errors)
{
    review_ctx c = {S, step, reason, errors, LX_ASK};
    if (protect(S, review_body, &c, "review", errors) != 0)
        return LX_ASK; /* never decide on a half-run review */
    return c.decision;
}

/* ---- rules ------------------------------------------------------------- */

typedef struct rules_ctx {
    lx_state *S;
    const char *source;
    cJSON *out; /* all findings, owned by the caller of protect */
    cJSON *tmp; /* the current rule's findings until they all check out */
    dt_buf *errors;
} rules_ctx;

static cJSON *finding(const lx_reg *r, const char *message, lua_Integer line)
{
    cJSON *f = dt_json_obj();
    dt_json_set_str(f, "id", r->id);
    dt_json_set_str(f, "severity", r->severity);
    dt_json_set_str(f, "message", message);
    if (line > 0)
        dt_json_set_int(f, "line", (int64_t)line);
    else
        dt_json_set_take(f, "line", cJSON_CreateNull());
    dt_json_set_str(f, "source", "lua");
    return f;
}

/* A line number from the value at idx: a positive integer (or an integral
 * float). Returns 0 when it is not one. */
static lua_Integer line_of(lua_State *L, int idx)
{
    lua_Integer n = 0;
    if (lua_type(L, idx) != LUA_TNUMBER)
        return 0;
    if (lua_isinteger(L, idx))
        n = lua_tointeger(L, idx);
    else if (!lua_numbertointeger(lua_tonumber(L, idx), &n) || lua_tonumber(L, idx) != (double)n)
        return 0;
    return n > 0 ? n : 0;
}

/* Turns check's result (at the top) into findings in c->tmp. On a result
 * of the wrong shape writes why into err and returns -1. Raises only on
 * memory errors. */
static int take_findings(lua_State *L, const lx_reg *r, cJSON *tmp, dt_buf *err)
{
    int t = lua_gettop(L);
    if (lua_isnil(L, t))
        return 0; /* nothing found */
    if (!lua_istable(L, t)) {
        dt_buf_printf(err,
                      "returned a %s (check returns a list of line numbers or {line=, "
                      "message=} tables, or nil)",
                      luaL_typename(L, t));
        return -1;
    }
    lua_Integer n = (lua_Integer)lua_rawlen(L, t);
    if (n == 0) {
        lua_pushnil(L);            /* first key */
        if (lua_next(L, t) != 0) { /* push any first pair */
            lua_pop(L, 2);         /* remove key and value */
            dt_buf_puts(err, "returned a table that is not a list (return {finding, ...}, even "
                             "for one finding)");
            return -1;
        }
    }
    for (lua_Integer i = 1; i <= n; i++) {
        int it = lua_rawgeti(L, t, i); /* push result[i] */
        lua_Integer line = 0;
        const char *msg = r->message;
        if (it == LUA_TNUMBER) {
            line = line_of(L, -1);
            if (line == 0) {
                dt_buf_printf(err, "returned %s as a line number (expected a positive integer)",
                              lua_tostring(L, -1));
                lua_pop(L, 1); /* remove result[i] */
                return -1;
            }
        } else if (it == LUA_TTABLE) {
            int lt = rawfield(L, -1, "line"); /* push item.line */
            if (lt != LUA_TNIL) {
                line = line_of(L, -1);
                if (line == 0) {
                    dt_buf_printf(err,
                                  "returned a finding whose line is not a positive integer "
                                  "(item %lld)",
                                  (long long)i);
                    lua_pop(L, 2); /* remove item.line and result[i] */
                    return -1;
                }
            }
            lua_pop(L, 1);                       /* remove item.line */
            int mt = rawfield(L, -1, "message"); /* push item.message */
            if (mt == LUA_TSTRING)
                msg = lua_tostring(L, -1);
            else if (mt != LUA_TNIL) {
                dt_buf_printf(err, "returned a finding whose message is a %s (item %lld)",
                              lua_typename(L, mt), (long long)i);
                lua_pop(L, 2); /* remove item.message and result[i] */
                return -1;
            }
            cJSON_AddItemToArray(tmp, finding(r, msg, line));
            lua_pop(L, 2); /* remove item.message and result[i] */
            continue;
        } else {
            dt_buf_printf(err,
                          "returned a %s as item %lld (expected a line number or a {line=, "
                          "message=} table)",
                          lua_typename(L, it), (long long)i);
            lua_pop(L, 1); /* remove result[i] */
            return -1;
        }
        cJSON_AddItemToArray(tmp, finding(r, msg, line));
        lua_pop(L, 1); /* remove result[i] */
    }
    return 0;
}

static int rules_body(lua_State *L)
{
    rules_ctx *c = lua_touserdata(L, 1);
    lx_state *S = c->S;
    dt_buf err = DT_BUF_INIT;
    for (size_t i = 0; i < S->nregs; i++) {
        lx_reg *r = &S->regs[i];
        if (r->kind != REG_RULE || !r->enabled)
            continue;
        lua_rawgeti(L, LUA_REGISTRYINDEX, r->ref); /* push check */
        lua_pushstring(L, c->source);              /* push the kernel source */
        if (call_lua(S, 1, 1, &err) != 0) {
            reg_fail(r, dt_buf_str(&err), c->errors);
            continue;
        }
        c->tmp = dt_json_arr();
        dt_buf_reset(&err);
        int rc = take_findings(L, r, c->tmp, &err);
        lua_pop(L, 1); /* remove check's result */
        if (rc != 0) {
            reg_fail(r, dt_buf_str(&err), c->errors);
        } else {
            cJSON *f;
            while ((f = cJSON_DetachItemFromArray(c->tmp, 0)) != NULL)
                cJSON_AddItemToArray(c->out, f);
        }
        cJSON_Delete(c->tmp);
        c->tmp = NULL;
    }
    dt_buf_free(&err);
    return 0;
}

cJSON *lx_rules(lx_state *S, const char *source, dt_buf *errors)
{
    rules_ctx c = {S, source != NULL ? source : "", dt_json_arr(), NULL, errors};
    protect(S, rules_body, &c, "rules", errors);
    cJSON_Delete(c.tmp); /* left over when the C side failed midway */
    return c.out;
}

/* ---- parameter spaces -------------------------------------------------- */

cJSON *lx_param_spaces(lx_state *S)
{
    cJSON *all = dt_json_obj();
    for (size_t i = 0; i < S->nspaces; i++) {
        cJSON *st = cJSON_GetObjectItemCaseSensitive(all, S->spaces[i].strategy);
        if (st == NULL) {
            st = dt_json_obj();
            dt_json_set_take(all, S->spaces[i].strategy, st);
        }
        /* Later calls override the same parameter, keep the others. */
        for (const cJSON *p = S->spaces[i].space->child; p != NULL; p = p->next)
            dt_json_set_take(st, p->string, cJSON_Duplicate(p, 1));
    }
    return all;
}

/* ---- conversion, for tests --------------------------------------------- */

typedef struct trip_ctx {
    const cJSON *in;
    cJSON *out;
    dt_err *e;
} trip_ctx;

static int trip_body(lua_State *L)
{
    trip_ctx *c = lua_touserdata(L, 1);
    lx_json_push(L, c->in); /* push the Lua value */
    c->out = lx_json_from_lua(L, -1, c->in, "value", c->e);
    lua_pop(L, 1); /* remove it */
    return 0;
}

cJSON *lx_roundtrip(lx_state *S, const cJSON *v, dt_err *e)
{
    trip_ctx c = {v, NULL, e};
    dt_buf err = DT_BUF_INIT;
    if (protect(S, trip_body, &c, "converting JSON", &err) != 0) {
        dt_err_set(e, "%.*s", (int)(err.len > 0 ? err.len - 1 : 0), dt_buf_str(&err));
        cJSON_Delete(c.out);
        c.out = NULL;
    }
    dt_buf_free(&err);
    return c.out;
}
