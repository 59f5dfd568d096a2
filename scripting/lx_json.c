/* lx_json.c -- cJSON <-> Lua value conversion for hooks: objects and arrays to tables and back. */
#include "scripting/lx_int.h"

#include <lauxlib.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The address of this byte is the registry key of the metatable marking
 * tables that came from JSON arrays: the mark is how an empty one is
 * written back as [] rather than {}. */
static const char array_mt_key = 'a';

/* 2^53: beyond it a double skips integers, so a larger Lua integer cannot
 * survive the trip through cJSON (which keeps every number as a double). */
#define EXACT_INT_LIMIT ((lua_Integer)1 << 53)

/* A Lua integer-keyed table whose largest index passes both bounds is
 * refused rather than padded with nulls (after lua-cjson's
 * encode_sparse_array): t[1e9] = 1 must not become a billion nulls. */
#define SPARSE_SAFE  1024
#define SPARSE_RATIO 2

/* cJSON's constructors return NULL only when malloc fails; like the dt_x*
 * wrappers, treat that as fatal rather than threading it through. */
static cJSON *jcheck(cJSON *v)
{
    if (v == NULL) {
        fprintf(stderr, "ditto: out of memory building JSON\n");
        abort();
    }
    return v;
}

/* ---- JSON to Lua ------------------------------------------------------- */

static void push_marker(lua_State *L)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &array_mt_key); /* push the array marker */
}

void lx_json_open(lua_State *L)
{
    lua_createtable(L, 0, 1);                         /* the array marker metatable */
    lua_pushliteral(L, "array");                      /* push its __name */
    lua_setfield(L, -2, "__name");                    /* mt.__name = "array" (for tostring) */
    lua_rawsetp(L, LUA_REGISTRYINDEX, &array_mt_key); /* registry[&key] = mt; pops it */
}

int lx_json_array(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0); /* drop a nil argument */
        lua_newtable(L);  /* the new array at 1 */
    } else {
        luaL_checktype(L, 1, LUA_TTABLE);
        lua_settop(L, 1); /* only the table */
    }
    push_marker(L);         /* push the marker */
    lua_setmetatable(L, 1); /* setmetatable(t, marker); pops it */
    return 1;               /* t */
}

static void push_number(lua_State *L, double d)
{
    /* JSON has one number type: integral values within 2^53 become Lua
     * integers, so 3 stays 3 (math.type "integer") and indexes tables. */
    if (isfinite(d) && floor(d) == d && fabs(d) <= (double)EXACT_INT_LIMIT)
        lua_pushinteger(L, (lua_Integer)d); /* push it as an integer */
    else
        lua_pushnumber(L, d); /* push it as a float */
}

static void push_value(lua_State *L, const cJSON *v, int depth)
{
    if (depth > LX_JSON_MAX_DEPTH)
        luaL_error(L, "JSON nested deeper than %d levels", LX_JSON_MAX_DEPTH);
    luaL_checkstack(L, 3, "JSON nesting"); /* the table, a value and the marker */
    switch (v->type & 0xFF) {
    case cJSON_False:
        lua_pushboolean(L, 0); /* push false */
        break;
    case cJSON_True:
        lua_pushboolean(L, 1); /* push true */
        break;
    case cJSON_NULL:
        lua_pushnil(L); /* push nil (a hole or a dropped member) */
        break;
    case cJSON_Number:
        push_number(L, v->valuedouble);
        break;
    case cJSON_String:
        lua_pushstring(L, v->valuestring != NULL ? v->valuestring : ""); /* push a copy */
        break;
    case cJSON_Array: {
        lua_createtable(L, cJSON_GetArraySize(v), 0); /* the sequence */
        lua_Integer i = 0;
        for (const cJSON *c = v->child; c != NULL; c = c->next) {
            i++;
            if (cJSON_IsNull(c))
                continue;                /* a hole keeps the later elements at their index */
            push_value(L, c, depth + 1); /* push the element */
            lua_rawseti(L, -2, i);       /* t[i] = element; pops it */
        }
        push_marker(L);          /* push the array marker */
        lua_setmetatable(L, -2); /* mark the table; pops the marker */
        break;
    }
    case cJSON_Object: {
        lua_createtable(L, 0, cJSON_GetArraySize(v)); /* the object */
        for (const cJSON *c = v->child; c != NULL; c = c->next) {
            if (cJSON_IsNull(c) || c->string == NULL)
                continue;                   /* nil cannot be stored: the key is dropped */
            push_value(L, c, depth + 1);    /* push the member */
            lua_setfield(L, -2, c->string); /* t[key] = member; pops it */
        }
        break;
    }
    default:
        luaL_error(L, "cannot convert a raw or invalid cJSON item to Lua");
    }
}

void lx_json_push(lua_State *L, const cJSON *v)
{
    if (v == NULL)
        lua_pushnil(L); /* nothing converts to nil */
    else
        push_value(L, v, 0);
}

/* ---- Lua to JSON ------------------------------------------------------- */

/* One member of the table being converted, kept until the table's keys are
 * all known (JSON object or array?) and put in order. key points into the
 * Lua key string, alive while the table is on the stack. */
typedef struct entry {
    const char *key; /* string key, or NULL */
    size_t klen;     /* its length */
    lua_Integer idx; /* integer key (>= 1) when key is NULL */
    cJSON *item;     /* the converted value, owned until attached */
    int used;        /* already attached (while following like's order) */
} entry;

typedef struct conv {
    lua_State *L;
    dt_err *e;
    dt_buf path;                             /* where we are: data.params.BLOCK[2] */
    const void *open[LX_JSON_MAX_DEPTH + 1]; /* tables being converted, outermost first */
    char wbuf[160];                          /* a shortened path, for one message */
} conv;

static cJSON *conv_value(conv *c, int idx, const cJSON *like, int depth);

/* The path for a message: a long one (deep nesting) keeps its two ends so
 * the rest of the message still fits a dt_err. */
static const char *where(conv *c, char *buf, size_t buflen)
{
    const char *p = dt_buf_str(&c->path);
    if (c->path.len < 160)
        return p;
    snprintf(buf, buflen, "%.60s...%s", p, p + c->path.len - 80);
    return buf;
}

#define WHERE(c) where((c), (c)->wbuf, sizeof(c)->wbuf)

static int is_ident(const char *s, size_t n)
{
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z')))
        return 0;
    for (size_t i = 1; i < n; i++) {
        char ch = s[i];
        if (!(ch == '_' || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
              (ch >= '0' && ch <= '9')))
            return 0;
    }
    return 1;
}

static void path_cut(conv *c, size_t len)
{
    c->path.len = len;
    if (c->path.data != NULL)
        c->path.data[len] = '\0';
}

static void path_key(conv *c, const char *k, size_t n)
{
    if (is_ident(k, n))
        dt_buf_printf(&c->path, ".%s", k);
    else
        dt_buf_printf(&c->path, "[\"%.*s\"]", (int)n, k);
}

static int cmp_key(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    size_t n = x->klen < y->klen ? x->klen : y->klen;
    int r = memcmp(x->key, y->key, n);
    if (r != 0)
        return r;
    return (x->klen > y->klen) - (x->klen < y->klen);
}

static int cmp_idx(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

/* The element of like (a JSON array) at Lua index i. lua_next walks the
 * array part in order, so a forward cursor makes this O(1) per step. */
static const cJSON *like_at(const cJSON *like, lua_Integer i, const cJSON **cur, lua_Integer *cur_i)
{
    if (!cJSON_IsArray(like))
        return NULL;
    if (*cur_i > i || (*cur == NULL && *cur_i == 0)) {
        *cur = like->child;
        *cur_i = 1;
    }
    while (*cur != NULL && *cur_i < i) {
        *cur = (*cur)->next;
        (*cur_i)++;
    }
    return *cur;
}

static int is_marked_array(lua_State *L, int t)
{
    int marked = 0;
    if (lua_getmetatable(L, t)) { /* push t's metatable, if any */
        push_marker(L);           /* push the array marker */
        marked = lua_rawequal(L, -1, -2);
        lua_pop(L, 2); /* remove marker and metatable */
    }
    return marked;
}

static void describe_key(lua_State *L, int k, char *out, size_t outlen)
{
    if (lua_type(L, k) == LUA_TNUMBER) {
        if (lua_isinteger(L, k))
            snprintf(out, outlen, "the integer key %lld", (long long)lua_tointeger(L, k));
        else
            snprintf(out, outlen, "the float key %.17g", lua_tonumber(L, k));
    } else {
        snprintf(out, outlen, "a %s key", lua_typename(L, lua_type(L, k)));
    }
}

static void free_entries(entry *ents, size_t n)
{
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(ents[i].item);
    free(ents);
}

static cJSON *assemble_object(entry *ents, size_t n, const cJSON *like)
{
    cJSON *obj = jcheck(cJSON_CreateObject());
    if (n == 0) {
        free(ents);
        return obj;
    }
    qsort(ents, n, sizeof *ents, cmp_key);
    /* Keys the value already had keep their place, so a hook that edits one
     * field does not reshuffle the artifact a person reads. */
    if (cJSON_IsObject(like)) {
        for (const cJSON *lc = like->child; lc != NULL; lc = lc->next) {
            if (lc->string == NULL)
                continue;
            entry probe = {lc->string, strlen(lc->string), 0, NULL, 0};
            entry *hit = bsearch(&probe, ents, n, sizeof *ents, cmp_key);
            if (hit == NULL || hit->used)
                continue;
            if (!cJSON_AddItemToObject(obj, hit->key, hit->item))
                jcheck(NULL);
            hit->used = 1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (ents[i].used)
            continue;
        if (!cJSON_AddItemToObject(obj, ents[i].key, ents[i].item))
            jcheck(NULL);
        ents[i].used = 1;
    }
    free(ents);
    return obj;
}

static cJSON *assemble_array(entry *ents, size_t n, lua_Integer maxi)
{
    cJSON *arr = jcheck(cJSON_CreateArray());
    qsort(ents, n, sizeof *ents, cmp_idx);
    size_t next = 0;
    for (lua_Integer i = 1; i <= maxi; i++) {
        if (next < n && ents[next].idx == i) {
            if (!cJSON_AddItemToArray(arr, ents[next].item))
                jcheck(NULL);
            next++;
        } else {
            /* a hole: what a JSON null became on the way in */
            if (!cJSON_AddItemToArray(arr, jcheck(cJSON_CreateNull())))
                jcheck(NULL);
        }
    }
    free(ents);
    return arr;
}

static cJSON *conv_table(conv *c, int t, const cJSON *like, int depth)
{
    lua_State *L = c->L;
    if (depth >= LX_JSON_MAX_DEPTH) {
        dt_err_set(c->e, "%s is nested deeper than %d levels", WHERE(c), LX_JSON_MAX_DEPTH);
        return NULL;
    }
    const void *self = lua_topointer(L, t);
    for (int i = 0; i < depth; i++) {
        if (c->open[i] == self) {
            dt_err_set(c->e, "%s contains itself (a cycle), which JSON cannot hold", WHERE(c));
            return NULL;
        }
    }
    c->open[depth] = self;
    if (!lua_checkstack(L, 4)) { /* key, value, and the marker check's two */
        dt_err_set(c->e, "%s: no room on the Lua stack", WHERE(c));
        return NULL;
    }

    int top = lua_gettop(L);
    size_t plen = c->path.len;
    entry *ents = NULL;
    size_t n = 0, cap = 0, nstr = 0, nint = 0;
    lua_Integer maxi = 0;
    const cJSON *cur = NULL;
    lua_Integer cur_i = 0;

    lua_pushnil(L);               /* first key */
    while (lua_next(L, t) != 0) { /* for each pair: pops the key, pushes key and value */
        /* key at -2, value at -1 */
        entry en = {NULL, 0, 0, NULL, 0};
        const cJSON *child_like = NULL;
        if (lua_type(L, -2) == LUA_TSTRING) {
            en.key = lua_tolstring(L, -2, &en.klen); /* a string already: no conversion */
            if (strlen(en.key) != en.klen) {
                dt_err_set(c->e, "%s has a key with a NUL byte, which JSON keys cannot hold",
                           WHERE(c));
                goto fail;
            }
            nstr++;
            if (cJSON_IsObject(like))
                child_like = cJSON_GetObjectItemCaseSensitive(like, en.key);
            path_key(c, en.key, en.klen);
        } else if (lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1) {
            en.idx = lua_tointeger(L, -2);
            nint++;
            if (en.idx > maxi)
                maxi = en.idx;
            child_like = like_at(like, en.idx, &cur, &cur_i);
            dt_buf_printf(&c->path, "[%lld]", (long long)en.idx);
        } else {
            char what[96];
            describe_key(L, -2, what, sizeof what);
            dt_err_set(c->e,
                       "%s has %s (JSON object keys are strings and array indices run from 1)",
                       WHERE(c), what);
            goto fail;
        }
        if (nstr > 0 && nint > 0) {
            path_cut(c, plen);
            dt_err_set(c->e,
                       "%s mixes string keys and integer keys (JSON has objects or arrays, not "
                       "both at once)",
                       WHERE(c));
            goto fail;
        }
        en.item = conv_value(c, lua_gettop(L), child_like, depth + 1);
        if (en.item == NULL)
            goto fail;
        path_cut(c, plen);
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            ents = dt_xrealloc(ents, cap * sizeof *ents);
        }
        ents[n++] = en;
        lua_pop(L, 1); /* remove value; keep key for next iteration */
    }

    if (nint > 0) {
        if (maxi > SPARSE_SAFE && (lua_Unsigned)maxi > SPARSE_RATIO * (lua_Unsigned)n) {
            dt_err_set(c->e,
                       "%s is a sparse array (largest index %lld, %zu elements); JSON arrays "
                       "have no holes and it would be padded with nulls",
                       WHERE(c), (long long)maxi, n);
            goto fail;
        }
        return assemble_array(ents, n, maxi);
    }
    if (nstr == 0 && is_marked_array(L, t)) {
        free(ents);
        return jcheck(cJSON_CreateArray());
    }
    return assemble_object(ents, n, like);

fail:
    path_cut(c, plen);
    lua_settop(L, top); /* remove the key and value lua_next left */
    free_entries(ents, n);
    return NULL;
}

static cJSON *conv_value(conv *c, int idx, const cJSON *like, int depth)
{
    lua_State *L = c->L;
    switch (lua_type(L, idx)) {
    case LUA_TNIL:
        return jcheck(cJSON_CreateNull());
    case LUA_TBOOLEAN:
        return jcheck(cJSON_CreateBool(lua_toboolean(L, idx)));
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            lua_Integer i = lua_tointeger(L, idx);
            if (i > EXACT_INT_LIMIT || i < -EXACT_INT_LIMIT) {
                dt_err_set(c->e,
                           "%s is %lld, past 2^53: JSON numbers are doubles and would not keep "
                           "it exactly",
                           WHERE(c), (long long)i);
                return NULL;
            }
            return jcheck(cJSON_CreateNumber((double)i));
        } else {
            double d = lua_tonumber(L, idx);
            if (!isfinite(d)) {
                dt_err_set(c->e, "%s is %s, which JSON cannot hold", WHERE(c),
                           isnan(d) ? "NaN" : (d > 0 ? "infinity" : "-infinity"));
                return NULL;
            }
            return jcheck(cJSON_CreateNumber(d));
        }
    case LUA_TSTRING: {
        size_t len = 0;
        const char *s = lua_tolstring(L, idx, &len);
        if (strlen(s) != len) {
            dt_err_set(c->e, "%s is a string with a NUL byte, which ditto's JSON cannot hold",
                       WHERE(c));
            return NULL;
        }
        return jcheck(cJSON_CreateString(s));
    }
    case LUA_TTABLE:
        return conv_table(c, idx, like, depth);
    default:
        dt_err_set(c->e, "%s is a %s, which JSON cannot hold", WHERE(c),
                   lua_typename(L, lua_type(L, idx)));
        return NULL;
    }
}

cJSON *lx_json_from_lua(lua_State *L, int idx, const cJSON *like, const char *root, dt_err *e)
{
    /* The ancestor list is 8 KB: on the heap, so that callers deep in a Lua
     * call chain do not need the C stack for it. */
    conv *c = dt_xcalloc(1, sizeof *c);
    c->L = L;
    c->e = e;
    dt_buf_puts(&c->path, root != NULL ? root : "value");
    cJSON *v = conv_value(c, lua_absindex(L, idx), like, 0);
    dt_buf_free(&c->path);
    free(c);
    return v;
}
