/* nvrtc.c -- NVRTC loaded with dlopen: compiles to CUBIN, log parsing, the compile cache.
 * Over 1,000 lines: the loader, the log parser and the cache share one compile path. */
#include "gpu/worker/nvrtc.h"
#include "gpu/cubincache.h"

#include <ctype.h>
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Types only: NVRTC is never linked, every call goes through the table. */
#include <nvrtc.h>

/* ---- loading ----------------------------------------------------------- */

/* Every entry point used, by its name without the nvrtc prefix. */
#define GPU_NVRTC_FUNCS(X)                                                                   \
    X(GetErrorString)                                                                        \
    X(Version)                                                                               \
    X(CreateProgram)                                                                         \
    X(DestroyProgram)                                                                        \
    X(CompileProgram)                                                                        \
    X(GetProgramLogSize)                                                                     \
    X(GetProgramLog)                                                                         \
    X(GetCUBINSize)                                                                          \
    X(GetCUBIN)                                                                              \
    X(AddNameExpression)                                                                     \
    X(GetLoweredName)

struct gpu_nvrtc {
    void *lib;           /* dlopen handle of libnvrtc */
    void *builtins;      /* handle pinning libnvrtc-builtins (see load_builtins) */
    char *path;          /* the file loaded */
    char *builtins_path; /* the builtins file pinned */
    char version[16];    /* "13.0" */
    struct {
#define GPU_NVRTC_FIELD(n) __typeof__(nvrtc##n) *n;
        GPU_NVRTC_FUNCS(GPU_NVRTC_FIELD)
#undef GPU_NVRTC_FIELD
    } fn;
};

/* The file a dlopen handle maps (the loader's resolved path for a bare
 * name). Caller frees; NULL if the loader does not say. */
static char *handle_path(void *h)
{
    struct link_map *lm = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || lm == NULL || lm->l_name == NULL ||
        lm->l_name[0] == '\0')
        return NULL;
    return dt_xstrdup(lm->l_name);
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (slash == NULL)
        return dt_xstrdup(".");
    if (slash == path)
        return dt_xstrdup("/");
    return dt_xstrndup(path, (size_t)(slash - path));
}

/* dlerror's text without a leading "PATH: " (it often repeats the path the
 * message already names). */
static const char *dl_reason(const char *path)
{
    const char *msg = dlerror();
    if (msg == NULL)
        return "unknown dlopen error";
    size_t n = strlen(path);
    if (strncmp(msg, path, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ')
        return msg + n + 2;
    return msg;
}

/* libnvrtc dlopens libnvrtc-builtins.so.MAJOR.MINOR by bare name, which the
 * loader looks up on LD_LIBRARY_PATH and ld.so.cache only, never beside
 * libnvrtc. Checked on CUDA 13.0: a copy of both libraries in a folder of
 * their own, run under `ld.so --inhibit-cache`, fails every compile with
 * NVRTC_ERROR_BUILTIN_OPERATION_FAILURE ("failed to open
 * libnvrtc-builtins.so.13.0"). Loading the builtins first by path fixes
 * that: the loader matches the later bare-name dlopen against the
 * already-loaded soname. Returns 0 with nv->builtins set, or -1 with why. */
static int load_builtins(gpu_nvrtc *nv, dt_buf *why)
{
    int major = 0;
    int minor = 0;
    nv->fn.Version(&major, &minor);
    char *name = dt_xasprintf("libnvrtc-builtins.so.%d.%d", major, minor);
    char *dirs[2] = {dir_of(nv->path), NULL};
    char real[PATH_MAX];
    if (realpath(nv->path, real) != NULL)
        dirs[1] = dir_of(real);
    int rc = -1;
    dt_buf tried = DT_BUF_INIT;
    for (int i = 0; i < 2 && nv->builtins == NULL; i++) {
        if (dirs[i] == NULL || (i == 1 && dt_streq(dirs[0], dirs[1])))
            continue;
        char *full = dt_xasprintf("%s/%s", dirs[i], name);
        if (dt_file_exists(full)) {
            nv->builtins = dlopen(full, RTLD_NOW | RTLD_LOCAL);
            if (nv->builtins != NULL)
                nv->builtins_path = dt_xstrdup(full);
            else
                dt_buf_printf(&tried, "%s%s: %s", tried.len ? "; " : "", full, dl_reason(full));
        }
        free(full);
    }
    if (nv->builtins == NULL) {
        /* Not beside it: fine when the loader finds it (a toolkit on the
         * loader's path, or a distribution package). */
        nv->builtins = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (nv->builtins != NULL) {
            nv->builtins_path = handle_path(nv->builtins);
            if (nv->builtins_path == NULL)
                nv->builtins_path = dt_xstrdup(name);
            dt_debug("nvrtc: %s is not beside %s; using %s from the loader's path", name,
                     nv->path, nv->builtins_path);
        } else {
            dt_buf_printf(&tried, "%s%s: %s", tried.len ? "; " : "", name, dl_reason(name));
        }
    }
    if (nv->builtins != NULL)
        rc = 0;
    else
        dt_buf_printf(why, "loaded, but %s is neither beside it (%s) nor on the loader's path, so "
                      "every compile would fail (%s)",
                      name, dirs[0], dt_buf_str(&tried));
    dt_buf_free(&tried);
    free(dirs[0]);
    free(dirs[1]);
    free(name);
    return rc;
}

/* One candidate. Returns the handle, or NULL with the reason in why. */
static gpu_nvrtc *load_one(const char *cand, dt_buf *why)
{
    void *lib = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        dt_buf_puts(why, dl_reason(cand));
        return NULL;
    }
    gpu_nvrtc *nv = dt_xcalloc(1, sizeof *nv);
    nv->lib = lib;
#define GPU_NVRTC_SYM(n)                                                                     \
    nv->fn.n = (__typeof__(nvrtc##n) *)dlsym(lib, "nvrtc" #n);                               \
    if (nv->fn.n == NULL) {                                                                  \
        dt_buf_printf(why, "no symbol nvrtc" #n);                                            \
        goto err;                                                                            \
    }
    GPU_NVRTC_FUNCS(GPU_NVRTC_SYM)
#undef GPU_NVRTC_SYM
    int major = 0;
    int minor = 0;
    if (nv->fn.Version(&major, &minor) != NVRTC_SUCCESS) {
        dt_buf_puts(why, "nvrtcVersion failed");
        goto err;
    }
    snprintf(nv->version, sizeof nv->version, "%d.%d", major, minor);
    nv->path = handle_path(lib);
    if (nv->path == NULL)
        nv->path = dt_xstrdup(cand);
    if (load_builtins(nv, why) != 0)
        goto fail; /* it is NVRTC: stays mapped, see gpu_nvrtc_free */
    return nv;
err:
    dlclose(lib); /* not NVRTC (or not a usable one) */
fail:
    gpu_nvrtc_free(nv);
    return NULL;
}

gpu_nvrtc *gpu_nvrtc_load_paths(const char *const *paths, int npaths, dt_err *e)
{
    dt_buf msg = DT_BUF_INIT;
    dt_buf_puts(&msg, "cannot load NVRTC; tried");
    for (int i = 0; i < npaths; i++) {
        dt_buf why = DT_BUF_INIT;
        gpu_nvrtc *nv = load_one(paths[i], &why);
        if (nv != NULL) {
            dt_buf_free(&why);
            dt_buf_free(&msg);
            return nv;
        }
        dt_buf_printf(&msg, "%s %s (%s)", i ? ";" : "", paths[i], dt_buf_str(&why));
        dt_buf_free(&why);
    }
    if (npaths <= 0)
        dt_buf_puts(&msg, " nothing");
    dt_err_set(e, "%s", dt_buf_str(&msg));
    dt_buf_free(&msg);
    return NULL;
}

gpu_nvrtc *gpu_nvrtc_load(dt_err *e)
{
    char *owned = NULL;
    const char *paths[8];
    int n = 0;
    const char *env = getenv("DITTO_NVRTC");
    if (env != NULL && *env)
        paths[n++] = env;
    const char *home = getenv("CUDA_HOME");
    if (home != NULL && *home) {
        owned = dt_xasprintf("%s/lib64/libnvrtc.so", home);
        paths[n++] = owned;
    }
    paths[n++] = "/usr/local/cuda/lib64/libnvrtc.so";
    paths[n++] = "libnvrtc.so.13";
    paths[n++] = "libnvrtc.so.12";
    paths[n++] = "libnvrtc.so";
    gpu_nvrtc *nv = gpu_nvrtc_load_paths(paths, n, e);
    free(owned);
    return nv;
}

/* The libraries stay mapped: libnvrtc carries its own C++ runtime, whose
 * start-up allocations (the exception emergency pool, ...) would turn into
 * leaks that LeakSanitizer can no longer attribute to any module, and a
 * later load would pay the start-up of a 100 MB library again. So only our
 * bookkeeping is freed; a later load's dlopen finds the library mapped. */
void gpu_nvrtc_free(gpu_nvrtc *nv)
{
    if (nv == NULL)
        return;
    free(nv->path);
    free(nv->builtins_path);
    free(nv);
}

const char *gpu_nvrtc_path(const gpu_nvrtc *nv)
{
    return nv->path;
}

const char *gpu_nvrtc_builtins_path(const gpu_nvrtc *nv)
{
    return nv->builtins_path;
}

const char *gpu_nvrtc_version(const gpu_nvrtc *nv)
{
    return nv->version;
}

/* ---- small helpers ----------------------------------------------------- */

static void diag_push(gpu_diag **d, int *n, const char *file, int line, const char *severity,
                      const char *code, const char *msg)
{
    *d = dt_xrealloc(*d, (size_t)(*n + 1) * sizeof **d);
    gpu_diag *g = &(*d)[*n];
    memset(g, 0, sizeof *g);
    g->file = file ? dt_xstrdup(file) : NULL;
    g->line = line;
    snprintf(g->severity, sizeof g->severity, "%s", severity);
    snprintf(g->code, sizeof g->code, "%s", code ? code : "");
    g->message = dt_xstrdup(msg);
    (*n)++;
}

void gpu_diags_free(gpu_diag *d, int n)
{
    for (int i = 0; i < n; i++) {
        free(d[i].file);
        free(d[i].message);
        free(d[i].source_line);
    }
    free(d);
}

void gpu_kinfo_free(gpu_kinfo *k, int n)
{
    for (int i = 0; i < n; i++)
        free(k[i].name);
    free(k);
}

/* Line `line` (1-based) of text without its newline or '\r', or NULL. */
static char *nth_line(const char *text, int line)
{
    if (text == NULL || line < 1)
        return NULL;
    const char *p = text;
    for (int i = 1; i < line; i++) {
        p = strchr(p, '\n');
        if (p == NULL)
            return NULL;
        p++;
    }
    if (*p == '\0')
        return NULL; /* past the last line */
    size_t n = strcspn(p, "\n");
    if (n > 0 && p[n - 1] == '\r')
        n--;
    return dt_xstrndup(p, n);
}

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t')
        p++;
    return p;
}

/* Parse a non-negative int at *p (advancing it). Returns -1 if none. */
static int take_int(const char **p)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s))
        return -1;
    long v = 0;
    while (isdigit((unsigned char)*s)) {
        if (v < INT_MAX / 10)
            v = v * 10 + (*s - '0');
        s++;
    }
    *p = s;
    return v > INT_MAX ? INT_MAX : (int)v;
}

/* ---- the front end's diagnostics --------------------------------------- */

/* EDG's severity words as NVRTC prints them, longest first so that
 * "catastrophic error" is not read as a file name ending in "catastrophic". */
static const struct {
    const char *word;
    const char *severity;
} fe_severities[] = {
    {"catastrophic error", "fatal"},
    {"internal error", "fatal"},
    {"fatal error", "fatal"},
    {"error", "error"},
    {"warning", "warning"},
    {"remark", "remark"},
    {"note", "note"},
};

/* At p: "SEVERITY[ #CODE]: MESSAGE". Fills severity and code and returns the
 * message, or NULL when p is not that. */
static const char *fe_severity(const char *p, const char **severity, char *code, size_t codelen)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(fe_severities); i++) {
        size_t n = strlen(fe_severities[i].word);
        if (strncmp(p, fe_severities[i].word, n) != 0)
            continue;
        const char *q = p + n;
        code[0] = '\0';
        if (*q != ' ' && *q != ':')
            continue; /* "errors", "warnings": another word */
        if (q[0] == ' ' && q[1] == '#') {
            /* "#20" or "#177-D" */
            const char *c = q + 2;
            size_t len = 0;
            while (isalnum((unsigned char)c[len]) || c[len] == '-' || c[len] == '_')
                len++;
            if (len == 0 || c[len] != ':')
                return NULL;
            snprintf(code, codelen, "%.*s", (int)len, c);
            q = c + len;
        }
        q = skip_ws(q); /* "nvrtc: warning : ..." */
        if (q[0] != ':')
            return NULL;
        *severity = fe_severities[i].severity;
        return q[1] == ' ' ? q + 2 : q + 1;
    }
    return NULL;
}

typedef struct fe_header {
    char *file;    /* NULL when none */
    int line;      /* 0 when none */
    int at_end;    /* "At end of source: ..." */
    const char *severity;
    char code[32];
    const char *message; /* points into the log line */
} fe_header;

/* A diagnostic's first line: "FILE(LINE): SEV...", "At end of source: SEV..."
 * or "nvrtc: SEV..." (option errors). Returns 1 and fills h, else 0. */
static int fe_parse_header(const char *s, fe_header *h)
{
    memset(h, 0, sizeof *h);
    if (*s == ' ' || *s == '\t' || *s == '\0')
        return 0;
    if (dt_startswith(s, "At end of source: ")) {
        h->message = fe_severity(s + 18, &h->severity, h->code, sizeof h->code);
        h->at_end = 1;
        return h->message != NULL;
    }
    if (dt_startswith(s, "nvrtc: ")) {
        h->message = fe_severity(skip_ws(s + 7), &h->severity, h->code, sizeof h->code);
        return h->message != NULL;
    }
    /* The file name may itself hold parentheses: try each "(DIGITS): ". */
    for (const char *p = strchr(s, '('); p != NULL; p = strchr(p + 1, '(')) {
        const char *q = p + 1;
        int line = take_int(&q);
        if (line < 0 || q[0] != ')' || q[1] != ':' || q[2] != ' ' || p == s)
            continue;
        const char *msg = fe_severity(q + 3, &h->severity, h->code, sizeof h->code);
        if (msg == NULL)
            continue;
        h->file = dt_xstrndup(s, (size_t)(p - s));
        h->line = line;
        h->message = msg;
        return 1;
    }
    return 0;
}

/* Is s a caret line ("      ^", tabs copied from the source)? Returns the
 * caret's byte index or -1. */
static int caret_index(const char *s)
{
    const char *p = skip_ws(s);
    if (*p != '^' || *skip_ws(p + 1) != '\0')
        return -1;
    return (int)(p - s);
}

/* NVRTC echoes the offending line behind two spaces. */
#define GPU_ECHO_INDENT 2

/* Lines after a front-end header, up to a blank line or the next header:
 * continuation lines of the message, the source echo, the caret line, and
 * context such as "detected during instantiation of ...". */
typedef struct fe_block {
    int open;      /* a diagnostic is being collected */
    int index;     /* its index in the diags array */
    char **lines;  /* the indented lines seen so far */
    int nlines;
} fe_block;

static void fe_block_add(fe_block *b, const char *line)
{
    b->lines = dt_xrealloc(b->lines, (size_t)(b->nlines + 1) * sizeof *b->lines);
    b->lines[b->nlines++] = dt_xstrdup(line);
}

/* Turn the collected lines into column, source_line and the rest of the
 * message, then forget them. */
static void fe_block_close(fe_block *b, gpu_diag *diags, const char *source)
{
    if (!b->open)
        return;
    gpu_diag *d = &diags[b->index];
    char *src = nth_line(source, d->line);
    int echo = -1;
    int caret = -1;
    for (int i = 1; i < b->nlines && caret < 0; i++) {
        if (caret_index(b->lines[i]) >= 0) {
            caret = i;
            echo = i - 1;
        }
    }
    if (echo < 0 && src != NULL) {
        /* No caret: the echo is still recognisable when we hold the source. */
        for (int i = 0; i < b->nlines && echo < 0; i++) {
            const char *l = b->lines[i];
            if (strncmp(l, "  ", GPU_ECHO_INDENT) == 0 && strcmp(l + GPU_ECHO_INDENT, src) == 0)
                echo = i;
        }
    }
    if (caret >= 0) {
        int at = caret_index(b->lines[caret]);
        if (at >= GPU_ECHO_INDENT)
            d->column = at - GPU_ECHO_INDENT + 1;
    }
    if (d->line > 0) {
        const char *echoed = NULL;
        if (echo >= 0 && strncmp(b->lines[echo], "  ", GPU_ECHO_INDENT) == 0)
            echoed = b->lines[echo] + GPU_ECHO_INDENT;
        /* Prefer the source; but a diagnostic in another file (an included
         * header) echoes a line that is not the source's. */
        if (src != NULL && (echoed == NULL || strcmp(echoed, src) == 0)) {
            d->source_line = src;
            src = NULL;
        } else if (echoed != NULL) {
            d->source_line = dt_xstrdup(echoed);
        }
    }
    dt_buf msg = DT_BUF_INIT;
    dt_buf_puts(&msg, d->message);
    for (int i = 0; i < b->nlines; i++) {
        if (i == echo || i == caret)
            continue;
        dt_buf_putc(&msg, '\n');
        dt_buf_puts(&msg, skip_ws(b->lines[i]));
    }
    free(d->message);
    d->message = dt_buf_take(&msg);
    free(src);
    for (int i = 0; i < b->nlines; i++)
        free(b->lines[i]);
    free(b->lines);
    memset(b, 0, sizeof *b);
}

/* ---- the ptxas report -------------------------------------------------- */

/* Resource lines may come before the entry they describe is announced (the
 * order is not documented), so stack/spill figures wait here by name. */
typedef struct px_props {
    char *name;
    int stack, spill_stores, spill_loads;
} px_props;

typedef struct px_state {
    int cur;             /* kinfo index of the entry being compiled, or -1 */
    char *props_for;     /* the function the next stack line describes */
    px_props *pending;   /* figures for functions not (yet) known as entries */
    int npending;
} px_state;

static int kinfo_find(const gpu_kinfo *k, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(k[i].name, name) == 0)
            return i;
    return -1;
}

/* "N unit, N unit, ..." items; calls fn for each number and its unit text
 * (trimmed, with a leading "used"/"Used" dropped). */
static void px_items(const char *s, void (*fn)(void *ud, int v, const char *unit, size_t ulen),
                     void *ud)
{
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, ",");
        const char *item = skip_ws(p);
        const char *end = p + len;
        if (strncmp(item, "Used ", 5) == 0 || strncmp(item, "used ", 5) == 0)
            item = skip_ws(item + 5);
        int v = take_int(&item);
        if (v >= 0) {
            item = skip_ws(item);
            size_t ulen = (size_t)(end - item);
            while (ulen > 0 && isspace((unsigned char)item[ulen - 1]))
                ulen--;
            fn(ud, v, item, ulen);
        }
        p = *end ? end + 1 : end;
    }
}

static int unit_is(const char *unit, size_t ulen, const char *want)
{
    return ulen == strlen(want) && strncmp(unit, want, ulen) == 0;
}

static void px_used_item(void *ud, int v, const char *unit, size_t ulen)
{
    gpu_kinfo *k = ud;
    if (unit_is(unit, ulen, "registers"))
        k->registers = v;
    else if (unit_is(unit, ulen, "barriers"))
        k->barriers = v;
    else if (unit_is(unit, ulen, "bytes smem"))
        k->smem = v;
    else if (unit_is(unit, ulen, "bytes cmem[0]"))
        k->cmem = v;
    /* Others (other cmem banks, "cumulative stack size", textures, ...)
     * have no field. */
}

static void px_props_item(void *ud, int v, const char *unit, size_t ulen)
{
    px_props *p = ud;
    if (unit_is(unit, ulen, "bytes stack frame"))
        p->stack = v;
    else if (unit_is(unit, ulen, "bytes spill stores"))
        p->spill_stores = v;
    else if (unit_is(unit, ulen, "bytes spill loads"))
        p->spill_loads = v;
}

static void px_apply(gpu_kinfo *k, const px_props *p)
{
    k->stack = p->stack;
    k->spill_stores = p->spill_stores;
    k->spill_loads = p->spill_loads;
}

/* "    0 bytes stack frame, ..." (nvcc) or "ptxas         .     0 bytes
 * stack frame, ..." (NVRTC 13): returns the text from the first digit. */
static const char *px_stack_line(const char *s)
{
    const char *p = s;
    if (dt_startswith(p, "ptxas"))
        p = skip_ws(p + 5);
    if (*p == '.')
        p = skip_ws(p + 1);
    else
        p = skip_ws(p);
    if (!isdigit((unsigned char)*p) || strstr(p, "bytes stack frame") == NULL)
        return NULL;
    return p;
}

static void px_stack(px_state *st, const char *items, gpu_kinfo *kinfo, int nkinfo)
{
    if (st->props_for == NULL)
        return;
    px_props p = {0};
    px_items(items, px_props_item, &p);
    int i = kinfo_find(kinfo, nkinfo, st->props_for);
    if (i >= 0) {
        px_apply(&kinfo[i], &p);
    } else {
        p.name = st->props_for;
        st->props_for = NULL;
        st->pending = dt_xrealloc(st->pending, (size_t)(st->npending + 1) * sizeof *st->pending);
        st->pending[st->npending++] = p;
    }
    free(st->props_for);
    st->props_for = NULL;
}

/* A "ptxas ..." line other than a stack line: an entry, its resources, or
 * a ptxas diagnostic. Anything else (gmem totals, compile times) is skipped. */
static void px_line(px_state *st, const char *s, gpu_diag **diags, int *ndiags, gpu_kinfo **kinfo,
                    int *nkinfo)
{
    /* "ptxas[ LOCATION] WORD   : MESSAGE", where LOCATION is e.g.
     * "application ptx input, line 27;" */
    const char *colon = strchr(s, ':');
    if (colon == NULL)
        return;
    const char *w = colon;
    while (w > s && (w[-1] == ' ' || w[-1] == '\t'))
        w--;
    const char *wend = w;
    while (w > s && isalpha((unsigned char)w[-1]))
        w--;
    size_t wlen = (size_t)(wend - w);
    const char *msg = colon[1] == ' ' ? colon + 2 : colon + 1;
    int ptx_line = 0;
    const char *loc = strstr(s, ", line ");
    if (loc != NULL && loc < w) {
        const char *q = loc + 7;
        int v = take_int(&q);
        ptx_line = v > 0 ? v : 0;
    }
    if (wlen == 4 && strncmp(w, "info", 4) == 0) {
        if (dt_startswith(msg, "Compiling entry function '")) {
            const char *n = msg + 26;
            size_t len = strcspn(n, "'");
            char *name = dt_xstrndup(n, len);
            st->cur = kinfo_find(*kinfo, *nkinfo, name);
            if (st->cur < 0) {
                *kinfo = dt_xrealloc(*kinfo, (size_t)(*nkinfo + 1) * sizeof **kinfo);
                gpu_kinfo *k = &(*kinfo)[*nkinfo];
                memset(k, 0, sizeof *k);
                k->name = name;
                name = NULL;
                st->cur = (*nkinfo)++;
                for (int i = 0; i < st->npending; i++)
                    if (strcmp(st->pending[i].name, k->name) == 0)
                        px_apply(k, &st->pending[i]);
            }
            free(name);
        } else if (dt_startswith(msg, "Compiling ")) {
            st->cur = -1; /* a non-entry function (separate compilation) */
        } else if (dt_startswith(msg, "Function properties for ")) {
            free(st->props_for);
            const char *n = skip_ws(msg + 24);
            size_t len = strlen(n);
            while (len > 0 && isspace((unsigned char)n[len - 1]))
                len--;
            st->props_for = dt_xstrndup(n, len);
        } else if (dt_startswith(msg, "Used ") && st->cur >= 0) {
            px_items(msg, px_used_item, &(*kinfo)[st->cur]);
        }
        return;
    }
    const char *severity = NULL;
    if (wlen == 5 && strncmp(w, "error", 5) == 0)
        severity = "error";
    else if (wlen == 7 && strncmp(w, "warning", 7) == 0)
        severity = "warning";
    else if (wlen == 5 && strncmp(w, "fatal", 5) == 0)
        severity = "fatal";
    if (severity == NULL)
        return;
    /* A PTX line number means nothing in the source: keep it in the text. */
    char *text = ptx_line > 0 ? dt_xasprintf("%s (PTX line %d)", msg, ptx_line) : dt_xstrdup(msg);
    diag_push(diags, ndiags, NULL, 0, severity, "", text);
    free(text);
}

/* ---- the log ------------------------------------------------------------ */

void gpu_parse_log(const char *log, const char *source, gpu_diag **diags, int *ndiags,
                   gpu_kinfo **kinfo, int *nkinfo)
{
    if (log == NULL)
        return;
    fe_block blk = {0};
    px_state px = {.cur = -1};
    const char *p = log;
    while (*p) {
        size_t n = strcspn(p, "\n");
        char *line = dt_xstrndup(p, n > 0 && p[n - 1] == '\r' ? n - 1 : n);
        p += n;
        if (*p == '\n')
            p++;
        fe_header h;
        int is_ptxas = dt_startswith(line, "ptxas");
        /* nvcc prints the stack line without a "ptxas" prefix; only read it
         * so right after a "Function properties" line. */
        const char *items = (is_ptxas || px.props_for != NULL) ? px_stack_line(line) : NULL;
        if (items != NULL) {
            fe_block_close(&blk, *diags, source);
            px_stack(&px, items, *kinfo, *nkinfo);
        } else if (is_ptxas) {
            fe_block_close(&blk, *diags, source);
            px_line(&px, line, diags, ndiags, kinfo, nkinfo);
        } else if (fe_parse_header(line, &h)) {
            fe_block_close(&blk, *diags, source);
            char *msg = h.at_end ? dt_xasprintf("at end of source: %s", h.message)
                                 : dt_xstrdup(h.message);
            diag_push(diags, ndiags, h.file, h.line, h.severity, h.code, msg);
            free(msg);
            free(h.file);
            blk.open = 1;
            blk.index = *ndiags - 1;
        } else if (blk.open && (line[0] == ' ' || line[0] == '\t')) {
            fe_block_add(&blk, line);
        } else {
            /* A blank line, "Remark: The warnings can be suppressed ...",
             * "2 errors detected in the compilation of ...", "Compilation
             * terminated.": none of them is a diagnostic. */
            fe_block_close(&blk, *diags, source);
        }
        free(line);
    }
    fe_block_close(&blk, *diags, source);
    free(px.props_for);
    for (int i = 0; i < px.npending; i++)
        free(px.pending[i].name);
    free(px.pending);
}

/* ---- results ------------------------------------------------------------ */

static char **strv_dup(const char *const *v, int n)
{
    if (n <= 0)
        return NULL;
    char **out = dt_xcalloc((size_t)n, sizeof *out);
    for (int i = 0; i < n; i++)
        out[i] = v[i] ? dt_xstrdup(v[i]) : NULL;
    return out;
}

static void strv_free(char **v, int n)
{
    if (v == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

void gpu_cubin_free(gpu_cubin *c)
{
    if (c == NULL)
        return;
    free(c->image);
    gpu_diags_free(c->diags, c->ndiags);
    gpu_kinfo_free(c->kinfo, c->nkinfo);
    strv_free(c->lowered, c->nlowered);
    strv_free(c->names, c->nlowered);
    free(c->log);
    free(c->arch);
    free(c);
}

static gpu_cubin *cubin_dup(const gpu_cubin *c)
{
    gpu_cubin *d = dt_xmalloc(sizeof *d);
    *d = *c;
    if (c->image != NULL) {
        d->image = dt_xmalloc(c->size);
        memcpy(d->image, c->image, c->size);
    }
    d->diags = c->ndiags > 0 ? dt_xcalloc((size_t)c->ndiags, sizeof *d->diags) : NULL;
    for (int i = 0; i < c->ndiags; i++) {
        d->diags[i] = c->diags[i];
        d->diags[i].file = c->diags[i].file ? dt_xstrdup(c->diags[i].file) : NULL;
        d->diags[i].message = dt_xstrdup(c->diags[i].message);
        d->diags[i].source_line =
            c->diags[i].source_line ? dt_xstrdup(c->diags[i].source_line) : NULL;
    }
    d->kinfo = c->nkinfo > 0 ? dt_xcalloc((size_t)c->nkinfo, sizeof *d->kinfo) : NULL;
    for (int i = 0; i < c->nkinfo; i++) {
        d->kinfo[i] = c->kinfo[i];
        d->kinfo[i].name = dt_xstrdup(c->kinfo[i].name);
    }
    d->lowered = strv_dup((const char *const *)c->lowered, c->nlowered);
    d->names = strv_dup((const char *const *)c->names, c->nlowered);
    d->log = c->log ? dt_xstrdup(c->log) : NULL;
    d->arch = c->arch ? dt_xstrdup(c->arch) : NULL;
    return d;
}

static int has_error(const gpu_cubin *c)
{
    for (int i = 0; i < c->ndiags; i++)
        if (dt_streq(c->diags[i].severity, "error") || dt_streq(c->diags[i].severity, "fatal"))
            return 1;
    return 0;
}

/* Bounds on a compile answer (issue 37): a 6 MB one-line source once gave
 * a 1.2 GB reply, each diagnostic quoting the whole line. */
#define GPU_REPLY_MAX_DIAGS 100
#define GPU_REPLY_MAX_MESSAGE 2000
#define GPU_REPLY_MAX_SOURCE_LINE 400
#define GPU_REPLY_MAX_LOG (64 * 1024)

/* s cut to at most max bytes (at a UTF-8 boundary), with what was left out
 * said at the end; the string itself when it fits. Caller frees *owned. */
static const char *clipped(const char *s, size_t max, char **owned)
{
    *owned = NULL;
    if (s == NULL || strlen(s) <= max)
        return s;
    size_t n = strlen(s), keep = max;
    while (keep > 0 && ((unsigned char)s[keep] & 0xc0) == 0x80)
        keep--; /* not inside a multi-byte character */
    *owned = dt_xasprintf("%.*s ... [%zu more bytes left out]", (int)keep, s, n - keep);
    return *owned;
}

static cJSON *diag_json(const gpu_diag *d)
{
    cJSON *o = dt_json_obj();
    dt_json_set_str(o, "file", d->file);
    if (d->line > 0)
        dt_json_set_int(o, "line", d->line);
    else
        dt_json_set_take(o, "line", cJSON_CreateNull());
    if (d->column > 0)
        dt_json_set_int(o, "column", d->column);
    else
        dt_json_set_take(o, "column", cJSON_CreateNull());
    dt_json_set_str(o, "severity", d->severity);
    dt_json_set_str(o, "code", d->code[0] ? d->code : NULL);
    char *own = NULL;
    dt_json_set_str(o, "message", clipped(d->message, GPU_REPLY_MAX_MESSAGE, &own));
    free(own);
    dt_json_set_str(o, "source_line", clipped(d->source_line, GPU_REPLY_MAX_SOURCE_LINE, &own));
    free(own);
    return o;
}

/* The fields shared by the protocol's kernels and the disk cache's copy. */
static void kinfo_fields(cJSON *o, const gpu_kinfo *k)
{
    dt_json_set_int(o, "registers", k->registers);
    dt_json_set_int(o, "smem", k->smem);
    dt_json_set_int(o, "cmem", k->cmem);
    dt_json_set_int(o, "stack", k->stack);
    dt_json_set_int(o, "spill_stores", k->spill_stores);
    dt_json_set_int(o, "spill_loads", k->spill_loads);
    dt_json_set_int(o, "barriers", k->barriers);
}

cJSON *gpu_cubin_json(const gpu_cubin *c)
{
    cJSON *o = dt_json_obj();
    dt_json_set_bool(o, "compiled", c->compiled);
    dt_json_set_bool(o, "cached", c->cached);
    dt_json_set_num(o, "seconds", c->seconds);
    dt_json_set_str(o, "nvrtc_version", c->nvrtc_version);
    dt_json_set_str(o, "arch", c->arch);
    cJSON *diags = dt_json_arr();
    for (int i = 0; i < c->ndiags && i < GPU_REPLY_MAX_DIAGS; i++)
        cJSON_AddItemToArray(diags, diag_json(&c->diags[i]));
    if (c->ndiags > GPU_REPLY_MAX_DIAGS) {
        gpu_diag more = {.severity = "note"};
        char msg[120];
        snprintf(msg, sizeof msg, "%d more diagnostics left out of this answer (the first %d are "
                                  "above)",
                 c->ndiags - GPU_REPLY_MAX_DIAGS, GPU_REPLY_MAX_DIAGS);
        more.message = msg;
        cJSON_AddItemToArray(diags, diag_json(&more));
    }
    dt_json_set_take(o, "diagnostics", diags);
    cJSON *kernels = dt_json_arr();
    for (int i = 0; i < c->nkinfo; i++) {
        const gpu_kinfo *k = &c->kinfo[i];
        cJSON *ko = dt_json_obj();
        const char *expr = NULL;
        for (int j = 0; j < c->nlowered && expr == NULL; j++)
            if (c->lowered[j] != NULL && strcmp(c->lowered[j], k->name) == 0)
                expr = c->names ? c->names[j] : NULL;
        dt_json_set_str(ko, "name", expr ? expr : k->name);
        if (expr != NULL)
            dt_json_set_str(ko, "lowered", k->name);
        kinfo_fields(ko, k);
        cJSON_AddItemToArray(kernels, ko);
    }
    dt_json_set_take(o, "kernels", kernels);
    char *own = NULL;
    dt_json_set_str(o, "log", c->log ? clipped(c->log, GPU_REPLY_MAX_LOG, &own) : "");
    free(own);
    return o;
}

/* ---- the cache ---------------------------------------------------------- */

/* Bumped when the result format or the implicit options change, so that old
 * disk entries stop matching. */
#define GPU_CACHE_FORMAT 1
#define GPU_CACHE_SLOTS 64

typedef struct mem_slot {
    char key[17];
    gpu_cubin *c;   /* owned; NULL when the slot is free */
    uint64_t used;  /* tick of the last use, for LRU */
} mem_slot;

static mem_slot mem_slots[GPU_CACHE_SLOTS];
static uint64_t mem_tick;
static char *cache_dir_override;

void gpu_cache_set_dir(const char *dir)
{
    free(cache_dir_override);
    cache_dir_override = dir ? dt_xstrdup(dir) : NULL;
}

void gpu_cache_clear_memory(void)
{
    for (int i = 0; i < GPU_CACHE_SLOTS; i++) {
        gpu_cubin_free(mem_slots[i].c);
        memset(&mem_slots[i], 0, sizeof mem_slots[i]);
    }
}

static const gpu_cubin *mem_get(const char *key)
{
    for (int i = 0; i < GPU_CACHE_SLOTS; i++) {
        if (mem_slots[i].c != NULL && strcmp(mem_slots[i].key, key) == 0) {
            mem_slots[i].used = ++mem_tick;
            return mem_slots[i].c;
        }
    }
    return NULL;
}

/* Takes c. */
static void mem_put(const char *key, gpu_cubin *c)
{
    int slot = -1;
    for (int i = 0; i < GPU_CACHE_SLOTS && slot < 0; i++)
        if (mem_slots[i].c != NULL && strcmp(mem_slots[i].key, key) == 0)
            slot = i; /* replace */
    for (int i = 0; i < GPU_CACHE_SLOTS && slot < 0; i++)
        if (mem_slots[i].c == NULL)
            slot = i; /* a free slot */
    if (slot < 0) {
        slot = 0; /* evict the least recently used */
        for (int i = 1; i < GPU_CACHE_SLOTS; i++)
            if (mem_slots[i].used < mem_slots[slot].used)
                slot = i;
    }
    gpu_cubin_free(mem_slots[slot].c);
    snprintf(mem_slots[slot].key, sizeof mem_slots[slot].key, "%s", key);
    mem_slots[slot].c = c;
    mem_slots[slot].used = ++mem_tick;
}

/* The disk folder (caller frees), or NULL when there is no home to put it. */
static char *disk_dir(void)
{
    if (cache_dir_override != NULL)
        return dt_xstrdup(cache_dir_override);
    char *base = dt_cache_dir();
    if (base == NULL)
        return NULL;
    char *d = dt_xasprintf("%s/cubin", base);
    free(base);
    return d;
}

char *gpu_cache_disk_dir(void)
{
    return disk_dir();
}

static int elf_magic(const void *p, size_t n)
{
    return n >= 4 && memcmp(p, "\177ELF", 4) == 0;
}

static void disk_put(const gpu_cubin *c)
{
    char *dir = disk_dir();
    if (dir == NULL)
        return;
    dt_err e = {0};
    char *bin = dt_xasprintf("%s/%s.cubin", dir, c->hash);
    char *meta = dt_xasprintf("%s/%s.json", dir, c->hash);
    cJSON *o = dt_json_obj();
    dt_json_set_int(o, "format", GPU_CACHE_FORMAT);
    dt_json_set_str(o, "key", c->hash);
    dt_json_set_str(o, "nvrtc_version", c->nvrtc_version);
    dt_json_set_str(o, "arch", c->arch);
    dt_json_set_int(o, "size", (int64_t)c->size);
    char fnv[17];
    dt_hash_hex(dt_hash64(c->image, c->size, DT_HASH_SEED), fnv);
    dt_json_set_str(o, "image_hash", fnv);
    dt_json_set_num(o, "seconds", c->seconds);
    cJSON *diags = dt_json_arr();
    for (int i = 0; i < c->ndiags; i++)
        cJSON_AddItemToArray(diags, diag_json(&c->diags[i]));
    dt_json_set_take(o, "diagnostics", diags);
    cJSON *kinfo = dt_json_arr();
    for (int i = 0; i < c->nkinfo; i++) {
        cJSON *k = dt_json_obj();
        dt_json_set_str(k, "name", c->kinfo[i].name);
        kinfo_fields(k, &c->kinfo[i]);
        cJSON_AddItemToArray(kinfo, k);
    }
    dt_json_set_take(o, "kinfo", kinfo);
    cJSON *lowered = dt_json_arr();
    for (int i = 0; i < c->nlowered; i++)
        cJSON_AddItemToArray(lowered, c->lowered[i] ? cJSON_CreateString(c->lowered[i])
                                                    : cJSON_CreateNull());
    dt_json_set_take(o, "lowered", lowered);
    dt_json_set_str(o, "log", c->log ? c->log : "");
    char *text = dt_json_print(o, 0);
    cJSON_Delete(o);
    /* The .json goes last: a reader trusts the pair only when the .json's
     * size and hash match the .cubin. */
    if (dt_mkdir_p(dir, &e) != 0 || dt_write_file_atomic(bin, c->image, c->size, &e) != 0 ||
        dt_write_file_atomic(meta, text, strlen(text), &e) != 0)
        dt_debug("nvrtc cache: not saved: %s", e.msg);
    else
        gpu_cubincache_prune_sometimes(dir); /* the cap (cubincache.h) */
    free(text);
    free(bin);
    free(meta);
    free(dir);
}

static int json_int(const cJSON *o, const char *key, int *out)
{
    int64_t x = 0;
    if (dt_json_to_int(cJSON_GetObjectItemCaseSensitive(o, key), 0, INT_MAX, &x, NULL) != 0)
        return -1;
    *out = (int)x;
    return 0;
}

/* Either a string (copied into *out) or null (when allowed). */
static int json_opt_str(const cJSON *o, const char *key, char **out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNull(v) || v == NULL) {
        *out = NULL;
        return 0;
    }
    if (!cJSON_IsString(v))
        return -1;
    *out = dt_xstrdup(v->valuestring);
    return 0;
}

static int json_line(const cJSON *o, const char *key, int *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsNull(v)) {
        *out = 0;
        return 0;
    }
    return json_int(o, key, out);
}

/* Fill c from a disk entry's JSON. Returns -1 (with why) on anything amiss;
 * c is then partly filled and the caller frees it. */
static int disk_parse(const cJSON *o, gpu_cubin *c, const char *key, const char **why)
{
    int format = 0;
    int size = 0;
    *why = "wrong format or key";
    if (json_int(o, "format", &format) != 0 || format != GPU_CACHE_FORMAT ||
        !dt_streq(dt_json_str(o, "key", NULL), key) || json_int(o, "size", &size) != 0)
        return -1;
    *why = "image size or hash differs";
    char fnv[17];
    dt_hash_hex(dt_hash64(c->image, c->size, DT_HASH_SEED), fnv);
    if ((size_t)size != c->size || !elf_magic(c->image, c->size) ||
        !dt_streq(dt_json_str(o, "image_hash", NULL), fnv))
        return -1;
    *why = "malformed fields";
    const cJSON *diags = cJSON_GetObjectItemCaseSensitive(o, "diagnostics");
    const cJSON *kinfo = cJSON_GetObjectItemCaseSensitive(o, "kinfo");
    const cJSON *lowered = cJSON_GetObjectItemCaseSensitive(o, "lowered");
    const cJSON *log = cJSON_GetObjectItemCaseSensitive(o, "log");
    if (!cJSON_IsArray(diags) || !cJSON_IsArray(kinfo) || !cJSON_IsArray(lowered) ||
        !cJSON_IsString(log) || cJSON_GetArraySize(lowered) != c->nlowered)
        return -1;
    const cJSON *it;
    cJSON_ArrayForEach(it, diags)
    {
        const char *sev = dt_json_str(it, "severity", NULL);
        const char *msg = dt_json_str(it, "message", NULL);
        int line = 0;
        int column = 0;
        if (sev == NULL || msg == NULL || strlen(sev) >= sizeof c->diags->severity ||
            json_line(it, "line", &line) != 0 || json_line(it, "column", &column) != 0)
            return -1;
        const char *code = dt_json_str(it, "code", "");
        if (strlen(code) >= sizeof c->diags->code)
            return -1;
        diag_push(&c->diags, &c->ndiags, NULL, line, sev, code, msg);
        gpu_diag *d = &c->diags[c->ndiags - 1];
        d->column = column;
        if (json_opt_str(it, "file", &d->file) != 0 ||
            json_opt_str(it, "source_line", &d->source_line) != 0)
            return -1;
    }
    cJSON_ArrayForEach(it, kinfo)
    {
        const char *name = dt_json_str(it, "name", NULL);
        if (name == NULL)
            return -1;
        gpu_kinfo k = {0};
        if (json_int(it, "registers", &k.registers) != 0 || json_int(it, "smem", &k.smem) != 0 ||
            json_int(it, "cmem", &k.cmem) != 0 || json_int(it, "stack", &k.stack) != 0 ||
            json_int(it, "spill_stores", &k.spill_stores) != 0 ||
            json_int(it, "spill_loads", &k.spill_loads) != 0 ||
            json_int(it, "barriers", &k.barriers) != 0)
            return -1;
        k.name = dt_xstrdup(name);
        c->kinfo = dt_xrealloc(c->kinfo, (size_t)(c->nkinfo + 1) * sizeof *c->kinfo);
        c->kinfo[c->nkinfo++] = k;
    }
    int i = 0;
    cJSON_ArrayForEach(it, lowered)
    {
        if (cJSON_IsString(it))
            c->lowered[i] = dt_xstrdup(it->valuestring);
        else if (!cJSON_IsNull(it))
            return -1;
        i++;
    }
    c->log = dt_xstrdup(log->valuestring);
    return 0;
}

/* A disk hit (compiled, cached = 1) or NULL. names/arch/version come from
 * the request: they are part of the key. */
static gpu_cubin *disk_get(const char *key, const gpu_compile_req *req, const char *arch,
                           const char *version)
{
    char *dir = disk_dir();
    if (dir == NULL)
        return NULL;
    char *bin = dt_xasprintf("%s/%s.cubin", dir, key);
    char *meta = dt_xasprintf("%s/%s.json", dir, key);
    free(dir);
    gpu_cubin *c = NULL;
    cJSON *o = NULL;
    dt_err e = {0};
    if (!dt_file_exists(meta) || !dt_file_exists(bin))
        goto out; /* the usual miss: not worth a log line */
    c = dt_xcalloc(1, sizeof *c);
    c->image = dt_read_file(bin, &c->size, &e);
    if (c->image == NULL) {
        dt_debug("nvrtc cache: ignoring %s: %s", bin, e.msg);
        goto miss;
    }
    o = dt_json_read_file(meta, &e);
    if (o == NULL) {
        dt_debug("nvrtc cache: ignoring %s: %s", meta, e.msg);
        goto miss;
    }
    c->nlowered = req->nnames;
    if (req->nnames > 0) {
        c->lowered = dt_xcalloc((size_t)req->nnames, sizeof *c->lowered);
        c->names = strv_dup(req->names, req->nnames);
    }
    const char *why = NULL;
    if (disk_parse(o, c, key, &why) != 0) {
        dt_debug("nvrtc cache: ignoring %s: %s", meta, why);
        goto miss;
    }
    c->compiled = 1;
    c->cached = 1;
    c->seconds = 0;
    gpu_cubincache_touch(meta); /* recently used: pruned last */
    c->arch = dt_xstrdup(arch);
    snprintf(c->nvrtc_version, sizeof c->nvrtc_version, "%s", version);
    snprintf(c->hash, sizeof c->hash, "%s", key);
    goto out;
miss:
    gpu_cubin_free(c);
    c = NULL;
out:
    cJSON_Delete(o);
    free(bin);
    free(meta);
    return c;
}

/* ---- compiling ---------------------------------------------------------- */

/* Hash a string with its NUL, so that ("ab", "c") and ("a", "bc") differ. */
static uint64_t hash_field(uint64_t h, const char *s)
{
    return dt_hash64(s, strlen(s) + 1, h);
}

static uint64_t hash_count(uint64_t h, int n)
{
    return dt_hash64(&n, sizeof n, h);
}

/* Fold into h the contents of every quoted #include of text that resolves
 * on one of the --include-path= options (and, to a small depth, of theirs):
 * a cubin depends on ditto.cuh and a template's shared body as much as on
 * the source, and a changed header must not be served an old cubin. A name
 * that resolves nowhere adds only its name (NVRTC will say it is missing). */
static uint64_t hash_includes(uint64_t h, const char *text, const char *const *opts, int nopts,
                              int depth)
{
    static const char pfx[] = "--include-path=";
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '#')
            continue;
        q++;
        while (*q == ' ' || *q == '\t')
            q++;
        if (strncmp(q, "include", 7) != 0)
            continue;
        q += 7;
        while (*q == ' ' || *q == '\t')
            q++;
        if (*q != '"')
            continue;
        const char *b = q + 1, *en = strchr(b, '"');
        const char *nl = strchr(b, '\n');
        if (en == NULL || (nl && nl < en) || en - b >= 256 || en == b)
            continue;
        char hname[256];
        memcpy(hname, b, (size_t)(en - b));
        hname[en - b] = '\0';
        h = hash_field(h, hname);
        for (int i = 0; i < nopts; i++) {
            if (strncmp(opts[i], pfx, sizeof pfx - 1) != 0)
                continue;
            char *path = dt_xasprintf("%s/%s", opts[i] + sizeof pfx - 1, hname);
            size_t len = 0;
            char *body = dt_read_file(path, &len, NULL);
            free(path);
            if (body == NULL)
                continue;
            h = dt_hash64(body, len, h);
            if (depth < 4)
                h = hash_includes(h, body, opts, nopts, depth + 1);
            free(body);
            break; /* the first folder that has it is the one NVRTC uses */
        }
    }
    return h;
}

static void cache_key(const gpu_compile_req *req, const char *name, const char *const *opts,
                      int nopts, const char *version, char out[17])
{
    uint64_t h = hash_count(DT_HASH_SEED, GPU_CACHE_FORMAT);
    h = hash_field(h, version);
    h = hash_field(h, req->source);
    h = hash_field(h, name);
    h = hash_count(h, nopts);
    for (int i = 0; i < nopts; i++)
        h = hash_field(h, opts[i]); /* the arch is among them */
    h = hash_count(h, req->nnames);
    for (int i = 0; i < req->nnames; i++)
        h = hash_field(h, req->names[i]);
    h = hash_includes(h, req->source, opts, nopts, 0);
    dt_hash_hex(h, out);
}

/* Sets e from an NVRTC status. Returns -1. */
static int nv_err(gpu_nvrtc *nv, dt_err *e, const char *what, nvrtcResult r)
{
    return dt_err_set(e, "%s: %s", what, nv->fn.GetErrorString(r));
}

/* The message for a failure that NVRTC reported without one in its log. */
static char *silent_failure(const gpu_cubin *c, const char *errstr)
{
    dt_buf b = DT_BUF_INIT;
    dt_buf_printf(&b, "compilation failed (%s) but NVRTC's log names no error", errstr);
    /* NVRTC 13.0 drops ptxas' "uses too much shared data" error, which nvcc
     * prints; the resource report that survives still shows the cause. */
    for (int i = 0; i < c->nkinfo; i++)
        if (c->kinfo[i].smem > 48 * 1024)
            dt_buf_printf(&b, "; kernel '%s' uses %d bytes of static shared memory, over the "
                          "49152-byte limit",
                          c->kinfo[i].name, c->kinfo[i].smem);
    return dt_buf_take(&b);
}

static int compile_now(gpu_nvrtc *nv, const gpu_compile_req *req, const char *name,
                       const char *arch, const char *const *opts, int nopts, const char *key,
                       gpu_cubin **out, dt_err *e)
{
    double t0 = dt_now();
    nvrtcProgram prog = NULL;
    gpu_cubin *c = NULL;
    nvrtcResult r = nv->fn.CreateProgram(&prog, req->source, name, 0, NULL, NULL);
    if (r != NVRTC_SUCCESS) {
        nv_err(nv, e, "nvrtcCreateProgram", r);
        goto err;
    }
    for (int i = 0; i < req->nnames; i++) {
        r = nv->fn.AddNameExpression(prog, req->names[i]);
        if (r != NVRTC_SUCCESS) {
            nv_err(nv, e, "nvrtcAddNameExpression", r);
            dt_err_prefix(e, "name expression \"%s\"", req->names[i]);
            goto err;
        }
    }
    nvrtcResult cr = nv->fn.CompileProgram(prog, nopts, opts);
    size_t logsize = 0;
    r = nv->fn.GetProgramLogSize(prog, &logsize);
    if (r != NVRTC_SUCCESS) {
        nv_err(nv, e, "nvrtcGetProgramLogSize", r);
        goto err;
    }
    char *log = dt_xcalloc(1, logsize + 1);
    r = logsize > 0 ? nv->fn.GetProgramLog(prog, log) : NVRTC_SUCCESS;
    if (r != NVRTC_SUCCESS) {
        free(log);
        nv_err(nv, e, "nvrtcGetProgramLog", r);
        goto err;
    }
    if (cr != NVRTC_SUCCESS && cr != NVRTC_ERROR_COMPILATION && cr != NVRTC_ERROR_INVALID_OPTION) {
        /* The library itself failed (builtins missing, out of memory, ...). */
        size_t first = strcspn(log, "\n");
        dt_err_set(e, "nvrtcCompileProgram: %s%s%.*s", nv->fn.GetErrorString(cr),
                   first ? ": " : "", (int)(first > 400 ? 400 : first), log);
        free(log);
        goto err;
    }
    c = dt_xcalloc(1, sizeof *c);
    c->log = log;
    c->arch = dt_xstrdup(arch);
    snprintf(c->nvrtc_version, sizeof c->nvrtc_version, "%s", nv->version);
    snprintf(c->hash, sizeof c->hash, "%s", key);
    c->nlowered = req->nnames;
    if (req->nnames > 0) {
        c->lowered = dt_xcalloc((size_t)req->nnames, sizeof *c->lowered);
        c->names = strv_dup(req->names, req->nnames);
    }
    gpu_parse_log(log, req->source, &c->diags, &c->ndiags, &c->kinfo, &c->nkinfo);
    if (cr == NVRTC_SUCCESS) {
        size_t size = 0;
        r = nv->fn.GetCUBINSize(prog, &size);
        if (r != NVRTC_SUCCESS) {
            nv_err(nv, e, "nvrtcGetCUBINSize", r);
            goto err;
        }
        if (size == 0) {
            char *msg = dt_xasprintf("arch must be a real sm_XX: %s is virtual and gives PTX only",
                                     arch);
            diag_push(&c->diags, &c->ndiags, NULL, 0, "error", "", msg);
            free(msg);
        } else {
            c->image = dt_xmalloc(size);
            r = nv->fn.GetCUBIN(prog, c->image);
            if (r != NVRTC_SUCCESS) {
                nv_err(nv, e, "nvrtcGetCUBIN", r);
                goto err;
            }
            c->size = size;
            c->compiled = 1;
        }
        for (int i = 0; i < req->nnames && c->compiled; i++) {
            const char *lowered = NULL;
            /* A name expression that names nothing gets no lowered name;
             * the front end has already said why in the log. */
            if (nv->fn.GetLoweredName(prog, req->names[i], &lowered) == NVRTC_SUCCESS &&
                lowered != NULL)
                c->lowered[i] = dt_xstrdup(lowered); /* owned by prog */
        }
    }
    if (!c->compiled && !has_error(c)) {
        char *msg = silent_failure(c, nv->fn.GetErrorString(cr));
        diag_push(&c->diags, &c->ndiags, NULL, 0, "error", "", msg);
        free(msg);
    }
    nv->fn.DestroyProgram(&prog);
    c->seconds = dt_now() - t0;
    *out = c;
    return 0;
err:
    if (prog != NULL)
        nv->fn.DestroyProgram(&prog);
    gpu_cubin_free(c);
    return -1;
}

int gpu_compile(gpu_nvrtc *nv, const gpu_compile_req *req, gpu_cubin **out, dt_err *e)
{
    *out = NULL;
    if (nv == NULL || req == NULL || req->source == NULL)
        return dt_err_set(e, "compile: no NVRTC or no source");
    if (req->noptions < 0 || req->nnames < 0 || (req->noptions > 0 && req->options == NULL) ||
        (req->nnames > 0 && req->names == NULL))
        return dt_err_set(e, "compile: bad option or name list");
    for (int i = 0; i < req->noptions; i++)
        if (req->options[i] == NULL)
            return dt_err_set(e, "compile: option %d is NULL", i);
    for (int i = 0; i < req->nnames; i++)
        if (req->names[i] == NULL)
            return dt_err_set(e, "compile: name expression %d is NULL", i);
    const char *name = req->name ? req->name : "kernel.cu";
    const char *arch = req->arch ? req->arch : "sm_90";
    int nopts = 4 + req->noptions;
    const char **opts = dt_xcalloc((size_t)nopts, sizeof *opts);
    char *archopt = dt_xasprintf("--gpu-architecture=%s", arch);
    opts[0] = archopt;
    opts[1] = "-lineinfo";
    opts[2] = "-Xptxas"; /* NVRTC takes each ptxas flag as its own pair */
    opts[3] = "-v";      /* the resource report, into the log even on success */
    for (int i = 0; i < req->noptions; i++)
        opts[4 + i] = req->options[i];
    char key[17];
    cache_key(req, name, opts, nopts, nv->version, key);
    int rc = 0;
    const gpu_cubin *hit = mem_get(key);
    if (hit != NULL) {
        *out = cubin_dup(hit);
    } else {
        *out = disk_get(key, req, arch, nv->version);
        if (*out == NULL) {
            rc = compile_now(nv, req, name, arch, opts, nopts, key, out, e);
            if (rc == 0 && (*out)->compiled)
                disk_put(*out);
        }
        if (rc == 0)
            mem_put(key, cubin_dup(*out));
    }
    if (*out != NULL && (hit != NULL || (*out)->cached)) {
        (*out)->cached = 1;
        (*out)->seconds = 0;
    }
    if (*out != NULL) /* what this request compiled, for the client (cubincache.h) */
        gpu_cubincache_note(key, (*out)->cached, (*out)->compiled);
    free(archopt);
    free(opts);
    return rc;
}
