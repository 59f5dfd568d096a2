/* wiring.c -- what several commands share: the flags and the wiring around
 * a run that `ditto run`/`resume` and the workbench have alike
 * (cli/wiring.h), and the "--flag VALUE" reader of the hardware commands
 * (cli/cli.h). */
#include "cli/wiring.h"
#include "cli/cli.h"
#include "hardware/hardware.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the session sink ------------------------------------------------------------------------ */

/* A recording problem, "WHAT: MSG" then a tail: printed now with the tail
 * `now`, or kept with the tail `later` -- over a problem already kept only
 * when replace is set. */
static void sink_problem(cli_session_sink *ss, int replace, const char *what, const char *msg,
                         const char *now, const char *later)
{
    if (ss->problem == NULL)
        fprintf(stderr, "ditto: %s: %s%s\n", what, msg, now);
    else if (replace || ss->problem[0] == '\0')
        snprintf(ss->problem, ss->problem_size, "%s: %s%s", what, msg, later);
}

static void artifact_files(cli_session_sink *ss, const cJSON *ev)
{
    const char *name = dt_json_str(ev, "name", "");
    int v = dt_json_int(ev, "version", 0);
    const cJSON *j = cJSON_GetObjectItem(ev, "json");
    char file[128];
    dt_err e = {0};
    if (strcmp(name, "kernel") == 0) {
        snprintf(file, sizeof file, "kernel_v%d.cu", v);
        const char *src = dt_json_str(ev, "content", "");
        if (sess_write_artifact(ss->s, file, src, strlen(src), &e) != 0) {
            sink_problem(ss, 0, "session", e.msg, "", "");
            ss->incomplete = 1;
        }
        return;
    }
    if (strcmp(name, "compile") == 0) {
        snprintf(file, sizeof file, "compile_v%d.log", v);
        const char *log = dt_json_str(cJSON_GetObjectItem(j, "nvrtc"), "log", "");
        sess_write_artifact(ss->s, file, log, strlen(log), &e);
    }
    if (strcmp(name, "report") == 0 || strcmp(name, "tune") == 0 || strcmp(name, "kb_entry") == 0)
        snprintf(file, sizeof file, "%s.json", name);
    else
        snprintf(file, sizeof file, "%s_v%d.json", name, v);
    char *text = dt_json_print(j, 1);
    sess_write_artifact(ss->s, file, text, strlen(text), &e);
    free(text);
    if (e.msg[0]) {
        sink_problem(ss, 0, "session", e.msg, "", "");
        ss->incomplete = 1;
    }
}

void cli_session_event(ag_run *r, const cJSON *ev, void *ud)
{
    (void)r;
    cli_session_sink *ss = ud;
    if (ss->failed)
        return;
    dt_err e = {0};
    if (ss->s == NULL && dt_streq(dt_json_str(ev, "type", ""), "session_started")) {
        ss->s = sess_create(ss->root, cJSON_GetObjectItem(ev, "spec"),
                            cJSON_GetObjectItem(ev, "fingerprint"), &e);
        if (ss->s == NULL) {
            sink_problem(ss, 1, "cannot record the session", e.msg, " (the run goes on)",
                         " (the run went on)");
            ss->failed = 1;
            return;
        }
    }
    if (ss->s == NULL)
        return;
    /* Artifacts first: the event that names them then never points at a
     * file a crash did not write. */
    if (dt_streq(dt_json_str(ev, "type", ""), "artifact"))
        artifact_files(ss, ev);
    cJSON *copy = cJSON_Duplicate(ev, 1);
    if (dt_streq(dt_json_str(ev, "type", ""), "session_started"))
        dt_json_set_str(copy, "session", sess_id(ss->s));
    if (sess_append(ss->s, copy, &e) != 0) {
        sink_problem(ss, 1, "session", e.msg, " (recording stops; the run goes on)",
                     " (recording stopped)");
        ss->failed = 1;
    }
    cJSON_Delete(copy);
}

/* ---- Lua ------------------------------------------------------------------------------------- */

lx_state *cli_lua_open(int unsafe, const char *const *files, int nfiles)
{
    dt_err e = {0};
    lx_opts lo = {.unsafe = unsafe};
    lx_state *L = lx_new(&lo, &e);
    if (L == NULL)
        return NULL;
    dt_buf probs = DT_BUF_INIT;
    char *cdir = dt_config_dir();
    if (cdir) {
        char *hdir = dt_xasprintf("%s/hooks", cdir);
        lx_load_dir(L, hdir, &probs);
        free(hdir);
        free(cdir);
    }
    for (int i = 0; i < nfiles; i++) {
        dt_err he = {0};
        if (lx_load_file(L, files[i], &he) != 0)
            dt_buf_printf(&probs, "%s\n", he.msg);
    }
    if (probs.len)
        fprintf(stderr, "ditto: hooks: %s", probs.data);
    dt_buf_free(&probs);
    return L;
}

static int lua_review(ag_run *r, const ag_step *s, dt_buf *reason, void *ud)
{
    cli_lua *lua = ud;
    cJSON *view = ag_step_view(r, s);
    dt_buf errs = DT_BUF_INIT;
    lx_decision d = lx_review(lua->L, view, reason, &errs);
    if (errs.len)
        fprintf(stderr, "%slua review: %s", lua->prefix, errs.data);
    dt_buf_free(&errs);
    cJSON_Delete(view);
    return d == LX_APPROVE ? AG_APPROVE : d == LX_REJECT ? AG_REJECT : -1;
}

static void lua_hook(ag_run *r, ag_kind kind, const char *phase, cJSON **data, dt_buf *log,
                     dt_buf *errors, void *ud)
{
    (void)r;
    cli_lua *lua = ud;
    lx_run_hooks(lua->L, ag_kind_name(kind), phase, data, log, errors);
}

static cJSON *lua_rules(ag_run *r, const char *source, dt_buf *errors, void *ud)
{
    (void)r;
    cli_lua *lua = ud;
    return lx_rules(lua->L, source, errors);
}

static cJSON *lua_spaces(ag_run *r, void *ud)
{
    (void)r;
    cli_lua *lua = ud;
    return lx_param_spaces(lua->L);
}

void cli_lua_attach(ag_opts *o, cli_lua *lua)
{
    if (lua->L == NULL)
        return;
    /* ditto.param_space alone registers no hook, and is still a wish */
    cJSON *spaces = lx_param_spaces(lua->L);
    int nspaces = cJSON_GetArraySize(spaces);
    cJSON_Delete(spaces);
    if (lx_hook_count(lua->L) == 0 && nspaces == 0)
        return;
    o->reviewer = lua_review;
    o->reviewer_ud = lua;
    o->hook = lua_hook;
    o->hook_ud = lua;
    o->rules = lua_rules;
    o->spaces = lua_spaces;
}

/* ---- flags recorded with a session ----------------------------------------------------------- */

const char *const cli_run_flag_names[] = {"review",        "backend",     "api",      "endpoint",
                                          "model",         "api-key-env", "launcher", "out",
                                          "hooks",         "lua-unsafe",  "workers",  "deadline",
                                          "tune-variants", "goal",        NULL};

/* The JSON key of a --clear name: dashes become underscores. */
static void flag_key(const char *name, char *key, size_t len)
{
    snprintf(key, len, "%s", name);
    for (char *c = key; *c; c++)
        if (*c == '-')
            *c = '_';
}

int cli_run_flag_cleared(const cli_run_args *a, const char *key)
{
    char k[32];
    for (int i = 0; cli_run_flag_names[i]; i++) {
        flag_key(cli_run_flag_names[i], k, sizeof k);
        if (strcmp(k, key) == 0)
            return (a->clear >> i) & 1u;
    }
    return 0;
}

/* --clear LIST: each comma-separated name's bit into a->clear. CLI_OK, or
 * CLI_USAGE with the unknown name and the known ones printed. */
static int parse_clear(const char *cmd, const char *list, cli_run_args *a)
{
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ",");
        int found = -1;
        for (int i = 0; cli_run_flag_names[i] && found < 0; i++)
            if (strlen(cli_run_flag_names[i]) == n && strncmp(cli_run_flag_names[i], p, n) == 0)
                found = i;
        if (found < 0) {
            dt_buf known = DT_BUF_INIT;
            for (int i = 0; cli_run_flag_names[i]; i++)
                dt_buf_printf(&known, "%s%s", i ? ", " : "", cli_run_flag_names[i]);
            int rc = cli_usage_error(cmd, "--clear: '%.*s' is no recorded flag (known: %s)",
                                     (int)(n > 64 ? 64 : n), p, known.data);
            dt_buf_free(&known);
            return rc;
        }
        a->clear |= 1u << found;
        p += n;
        if (*p == ',')
            p++;
    }
    if (a->clear == 0)
        return cli_usage_error(cmd, "--clear needs the flags to drop, e.g. --clear hooks,model");
    return CLI_OK;
}

cJSON *cli_run_flags_json(const cli_run_args *a)
{
    cJSON *f = dt_json_obj();
    const struct {
        const char *key, *v;
    } strs[] = {{"review", a->review},       {"backend", a->backend},
                {"api", a->llm.api},         {"endpoint", a->llm.endpoint},
                {"model", a->llm.model},     {"api_key_env", a->llm.key_env},
                {"launcher", a->launcher},   {"out", a->out}};
    for (size_t i = 0; i < DT_ARRAY_LEN(strs); i++) {
        if (strs[i].v == NULL)
            continue;
        if (strs[i].v == a->llm.endpoint) {
            /* Never a secret in the session: an endpoint carrying
             * credentials (user:password@, a query) is not recorded, and
             * resume says to give it again. */
            char red[1024];
            if (dt_url_redact(strs[i].v, red, sizeof red)) {
                dt_json_set_str(f, "endpoint_not_recorded", red);
                continue;
            }
        }
        dt_json_set_str(f, strs[i].key, strs[i].v);
    }
    if (a->nhooks > 0) {
        cJSON *h = dt_json_arr();
        for (int i = 0; i < a->nhooks; i++)
            cJSON_AddItemToArray(h, cJSON_CreateString(a->hooks[i]));
        dt_json_set_take(f, "hooks", h);
    }
    if (a->lua_unsafe)
        dt_json_set_bool(f, "lua_unsafe", 1);
    if (a->workers)
        dt_json_set_int(f, "workers", a->workers);
    if (a->tune_variants)
        dt_json_set_int(f, "tune_variants", a->tune_variants);
    if (a->deadline > 0)
        dt_json_set_num(f, "deadline", a->deadline);
    if (a->goal > 0)
        dt_json_set_num(f, "goal", a->goal);
    if (a->clear) {
        /* what the person dropped, said: the next resume restores these
         * flags, in which the dropped ones are absent */
        cJSON *c = dt_json_arr();
        char k[32];
        for (int i = 0; cli_run_flag_names[i]; i++) {
            if (!((a->clear >> i) & 1u))
                continue;
            flag_key(cli_run_flag_names[i], k, sizeof k);
            cJSON_AddItemToArray(c, cJSON_CreateString(k));
        }
        dt_json_set_take(f, "cleared", c);
    }
    return f;
}

sess *cli_session_create(const char *cmd, const char *root, const sp_spec *spec, gpu_pool *pool)
{
    dt_err e = {0};
    gpu_pool_wait_ready(pool, 60);
    cJSON *sj = sp_spec_json(spec);
    cJSON *fp = ag_fingerprint(pool);
    sess *s = sess_create(root, sj, fp, &e);
    cJSON_Delete(sj);
    cJSON_Delete(fp);
    if (s == NULL)
        cli_session_refused(cmd, e.msg);
    return s;
}

void cli_session_refused(const char *cmd, const char *why)
{
    /* Results nobody can find again are worse than no run: say so before
     * any step, and let the person choose. */
    fprintf(stderr,
            "ditto %s: cannot record the session: %s\nnothing was run: make the session "
            "folder writable (or give --session-dir DIR), or pass --no-session to run "
            "without recording\n",
            cmd, why);
}

/* ---- settings -------------------------------------------------------------------------------- */

int cli_llm_settings(const char *cmd, const cJSON *cfg, const cli_llm_flags *f, llm_config *lc)
{
    dt_buf probs = DT_BUF_INIT;
    const cJSON *lj = cJSON_GetObjectItem(cfg, "llm");
    if (lj && llm_config_from_json(lc, lj, &probs) != 0) {
        fprintf(stderr, "ditto %s: config llm: %s", cmd, dt_buf_str(&probs));
        dt_buf_free(&probs);
        return -1;
    }
    dt_buf_free(&probs);
    if (f->api)
        lc->api = dt_streq(f->api, "anthropic") ? LLM_ANTHROPIC : LLM_OPENAI;
    if (f->endpoint) {
        free(lc->endpoint);
        lc->endpoint = dt_xstrdup(f->endpoint);
    }
    if (f->model) {
        free(lc->model);
        lc->model = dt_xstrdup(f->model);
    }
    if (f->key_env) {
        free(lc->api_key_env);
        lc->api_key_env = dt_xstrdup(f->key_env);
    }
    if (lc->endpoint == NULL || lc->model == NULL) {
        fprintf(stderr,
                "ditto %s: the llm backend needs an endpoint and a model (--endpoint, "
                "--model or \"llm\" in config.json)\n",
                cmd);
        return -1;
    }
    return 0;
}

void cli_review_policy(ag_opts *o, const sp_spec *spec, const char *override)
{
    const char *rv = override ? override : spec->review;
    for (int k = 0; k < AG_NKINDS; k++) {
        if (dt_streq(rv, "auto"))
            o->policy[k] = AG_POLICY_AUTO;
        else if (dt_streq(rv, "map") && spec->review_map)
            o->policy[k] =
                dt_streq(dt_json_str(spec->review_map, ag_kind_name((ag_kind)k), "auto"), "ask")
                    ? AG_POLICY_ASK
                    : AG_POLICY_AUTO;
        else
            o->policy[k] = AG_POLICY_ASK;
    }
}

/* ---- arguments ------------------------------------------------------------------------------- */

int cli_run_args_parse(const char *cmd, int argc, char **argv, int headless, const char *missing,
                       cli_run_args *a)
{
    memset(a, 0, sizeof *a);
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **field = NULL;
        if (strcmp(s, "--backend") == 0)
            field = &a->backend;
        else if (strcmp(s, "--review") == 0)
            field = &a->review;
        else if (strcmp(s, "--session-dir") == 0)
            field = &a->session_dir;
        else if (strcmp(s, "--out") == 0)
            field = &a->out;
        else if (strcmp(s, "--launcher") == 0)
            field = &a->launcher;
        else if (strcmp(s, "--api") == 0)
            field = &a->llm.api;
        else if (strcmp(s, "--endpoint") == 0)
            field = &a->llm.endpoint;
        else if (strcmp(s, "--model") == 0)
            field = &a->llm.model;
        else if (strcmp(s, "--api-key-env") == 0)
            field = &a->llm.key_env;
        if (field) {
            if (v == NULL)
                return cli_usage_error(cmd, "%s needs a value", s);
            *field = v;
            i++;
        } else if (strcmp(s, "--hook") == 0 && v) {
            if (a->nhooks < 16)
                a->hooks[a->nhooks++] = v;
            i++;
        } else if (strcmp(s, "--workers") == 0 && v) {
            a->workers = atoi(v);
            if (a->workers < 1 || a->workers > 64)
                return cli_usage_error(cmd, "--workers: expected 1 to 64");
            i++;
        } else if (strcmp(s, "--max-reviews") == 0 && v) {
            a->max_reviews = atoi(v);
            if (a->max_reviews < 1 || a->max_reviews > 1000)
                return cli_usage_error(cmd, "--max-reviews: expected 1 to 1000");
            i++;
        } else if (strcmp(s, "--tune-variants") == 0 && v) {
            a->tune_variants = atoi(v);
            i++;
        } else if ((strcmp(s, "--goal") == 0 || strcmp(s, "--deadline") == 0) && v) {
            double x;
            if (dt_parse_double(v, &x) != 0 || x <= 0)
                return cli_usage_error(cmd, "%s: expected a positive number", s);
            if (s[2] == 'g')
                a->goal = x;
            else
                a->deadline = x;
            i++;
        } else if (strcmp(s, "--clear") == 0) {
            if (strcmp(cmd, "resume") != 0)
                return cli_usage_error(cmd, "--clear drops flags a session recorded: it is "
                                            "for `ditto resume` (a new run records only what "
                                            "it is given)");
            if (v == NULL)
                return cli_usage_error(cmd, "--clear needs the flags to drop, e.g. --clear "
                                            "hooks,model");
            int rc = parse_clear(cmd, v, a);
            if (rc != CLI_OK)
                return rc;
            i++;
        } else if (strcmp(s, "--lua-unsafe") == 0) {
            a->lua_unsafe = 1;
        } else if (headless && strcmp(s, "--json") == 0) {
            a->json = 1;
        } else if (headless && (strcmp(s, "-v") == 0 || strcmp(s, "--verbose") == 0)) {
            a->verbose = 1;
        } else if (strcmp(s, "--no-session") == 0) {
            a->no_session = 1;
        } else if (s[0] == '-' && s[1]) {
            return cli_usage_error(cmd, "unknown option '%s'", s);
        } else if (a->spec == NULL) {
            a->spec = s;
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", s);
        }
    }
    if (a->spec == NULL && missing != NULL)
        return cli_usage_error(cmd, "%s", missing);
    if (a->backend && !dt_streq(a->backend, "expert") && !dt_streq(a->backend, "llm"))
        return cli_usage_error(cmd, "--backend: expected expert or llm");
    if (a->review && !dt_streq(a->review, "ask") && !dt_streq(a->review, "auto"))
        return cli_usage_error(cmd, "--review: expected ask or auto");
    return CLI_OK;
}

const char *cli_flag_value(int argc, char **argv, int *i, const char *flag, int *missing)
{
    size_t n = strlen(flag);
    if (strncmp(argv[*i], flag, n) != 0)
        return NULL;
    if (argv[*i][n] == '=')
        return argv[*i] + n + 1;
    if (argv[*i][n] != '\0')
        return NULL;
    if (*i + 1 >= argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

int cli_check_spec_gpu(const char *cmd, const char *spec_path, const char *gpu)
{
    if (gpu == NULL || strcmp(gpu, "auto") == 0)
        return 0;
    dt_err e = {0};
    hw_spec *g = hw_load(gpu, &e);
    if (g != NULL) {
        hw_spec_free(g);
        return 0;
    }
    fprintf(stderr, "ditto %s: %s: $.gpu: %s, or \"auto\" for the GPU the worker finds\n", cmd,
            spec_path, e.msg);
    return -1;
}

int cli_file_missing(const char *cmd, const char *path)
{
    struct stat st;
    if (path == NULL || stat(path, &st) == 0 || errno != ENOENT)
        return 0;
    fprintf(stderr, "ditto %s: %s: no such file\n", cmd, path);
    return 1;
}

int cli_session_status(const dt_err *e)
{
    return e->code == SESS_ENOTFOUND && dt_startswith(e->msg, "no session '") ? CLI_NOT_FOUND
                                                                              : CLI_FAIL;
}

int cli_matrix_missing(const char *cmd, const char *matrix)
{
    if (dt_startswith(matrix, "gen:") || dt_startswith(matrix, "rep:") || strcmp(matrix, "-") == 0)
        return 0;
    dt_err e = {0};
    char *path = sp_resolve_path(matrix, &e);
    free(path);
    if (path != NULL || e.code != SP_ENOTFOUND)
        return 0;
    fprintf(stderr, "ditto %s: %s\n", cmd, e.msg);
    return 1;
}

void cli_progress_start(cli_progress *p, const char *what)
{
    p->what = what;
    p->t0 = p->last = dt_now();
    p->tty = isatty(STDERR_FILENO);
    p->shown = 0;
}

void cli_progress_bytes(void *ud, int64_t done, int64_t total)
{
    cli_progress *p = ud;
    double now = dt_now();
    if (!p->tty || now - p->t0 < 1.0 || now - p->last < 0.2)
        return;
    p->last = now;
    p->shown = 1;
    const double mb = 1024.0 * 1024.0;
    if (total > 0)
        fprintf(stderr, "\r\033[Kreading %s: %.0f MB of %.0f MB (%.0f%%)", p->what, done / mb,
                total / mb, 100.0 * (double)done / (double)total);
    else
        fprintf(stderr, "\r\033[Kreading %s: %.0f MB", p->what, done / mb);
}

void cli_progress_rows(void *ud, int64_t done, int64_t total)
{
    cli_progress *p = ud;
    double now = dt_now();
    if (!p->tty || now - p->t0 < 1.0 || now - p->last < 0.2 || total <= 0)
        return;
    p->last = now;
    p->shown = 1;
    fprintf(stderr, "\r\033[Kprofiling %s: %.1fM of %.1fM rows (%.0f%%)", p->what, done / 1e6,
            total / 1e6, 100.0 * (double)done / (double)total);
}

void cli_progress_end(cli_progress *p)
{
    if (p->shown)
        fprintf(stderr, "\r\033[K");
    p->shown = 0;
}

char *cli_spool_stdin(const char *cmd)
{
    char *cache = dt_cache_dir();
    dt_err e = {0};
    if (cache == NULL || dt_mkdir_p(cache, &e) != 0) {
        fprintf(stderr, "ditto %s: -: no cache folder to hold standard input (%s)\n", cmd,
                cache ? e.msg : "set XDG_CACHE_HOME or HOME");
        free(cache);
        return NULL;
    }
    char *path = dt_xasprintf("%s/stdin-XXXXXX", cache);
    free(cache);
    int fd = mkstemp(path);
    if (fd < 0) {
        fprintf(stderr, "ditto %s: -: %s: %s\n", cmd, path, strerror(errno));
        free(path);
        return NULL;
    }
    char buf[1 << 16];
    int64_t total = 0;
    ssize_t n;
    int ok = 1;
    while ((n = read(STDIN_FILENO, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || (total += n) > CLI_STDIN_MAX) {
            fprintf(stderr, "ditto %s: -: %s\n", cmd,
                    n < 0 ? strerror(errno)
                          : "standard input passed 64 GiB: give the matrix as a file instead");
            ok = 0;
            break;
        }
        for (ssize_t off = 0; off < n && ok;) {
            ssize_t w = write(fd, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                fprintf(stderr, "ditto %s: -: writing %s: %s\n", cmd, path, strerror(errno));
                ok = 0;
            } else {
                off += w;
            }
        }
        if (!ok)
            break;
    }
    if (close(fd) != 0 && ok) {
        fprintf(stderr, "ditto %s: -: writing %s: %s\n", cmd, path, strerror(errno));
        ok = 0;
    }
    if (ok && total == 0) {
        fprintf(stderr, "ditto %s: -: standard input is empty: no matrix\n", cmd);
        ok = 0;
    }
    if (!ok) {
        unlink(path);
        free(path);
        return NULL;
    }
    return path;
}

int cli_with_stdin_matrix(const char *cmd, int argc, char **argv, int (*fn)(int, char **))
{
    int at = -1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-") != 0)
            continue;
        if (at >= 0)
            return cli_usage_error(cmd, "'-' (standard input) can be given once");
        at = i;
    }
    if (at < 0 || cli_wants_help(argc, argv))
        return fn(argc, argv);
    char *path = cli_spool_stdin(cmd);
    if (path == NULL)
        return CLI_FAIL;
    char **args = dt_xcalloc((size_t)argc + 1, sizeof *args);
    memcpy(args, argv, (size_t)argc * sizeof *args);
    args[at] = path;
    int rc = fn(argc, args);
    unlink(path);
    free(path);
    free(args);
    return rc;
}
