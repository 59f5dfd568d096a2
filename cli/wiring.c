/* wiring.c -- what several commands share: the flags and the wiring around
 * a run that `ditto run`/`resume` and the workbench have alike
 * (cli/wiring.h), and the "--flag VALUE" reader of the hardware commands
 * (cli/cli.h). */
#include "cli/wiring.h"
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

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
    int v = (int)dt_json_num(ev, "version", 0);
    const cJSON *j = cJSON_GetObjectItem(ev, "json");
    char file[128];
    dt_err e = {0};
    if (strcmp(name, "kernel") == 0) {
        snprintf(file, sizeof file, "kernel_v%d.cu", v);
        const char *src = dt_json_str(ev, "content", "");
        sess_write_artifact(ss->s, file, src, strlen(src), &e);
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
    if (e.msg[0])
        sink_problem(ss, 0, "session", e.msg, "", "");
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
