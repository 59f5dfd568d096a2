/* tui.c -- `ditto tui` (the workbench on a problem spec), `ditto replay`
 * (the workbench on a recorded session, offline) and the built-in default
 * problem that `ditto` with no command opens. The wiring is run.c's: the
 * worker pool, the knowledge base, Lua hooks, the session log and the
 * orchestrator; the workbench only renders and decides. */
#include "agents/agents.h"
#include "agents/llm.h"
#include "cli/cli.h"
#include "gpu/gpu.h"
#include "knowledge/knowledge.h"
#include "scripting/scripting.h"
#include "sessions/sessions.h"
#include "tui/tui.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cli_tui_usage[] =
    "usage: ditto tui SPEC.json [--backend expert|llm] [--review ask|auto]\n"
    "                 [--session-dir DIR] [--no-session] [--out DIR] [--hook FILE]\n"
    "                 [--lua-unsafe] [--workers N] [--launcher CMD] [--deadline S]\n"
    "                 [--api openai|anthropic] [--endpoint URL] [--model M]\n"
    "                 [--api-key-env VAR] [--goal SPEEDUP] [--tune-variants N]\n"
    "\n"
    "Open the workbench on a problem: the pipeline runs as with `ditto run`, and every\n"
    "step shows as it happens -- the steps, each agent's reasoning as it streams (with\n"
    "the knowledge-base rules behind each decision), the kernel with a diff against the\n"
    "previous version, compiler and rule diagnostics, the roofline and occupancy.\n"
    "With --review ask (the default) each step waits: a approve, e edit the plan or\n"
    "the kernel in $VISUAL/$EDITOR, r reject with a reason for the agent, A approve\n"
    "the rest, t tune now, k review knowledge-base proposals, ? every key, q quit.\n"
    "`ditto` with no command opens it on a built-in default problem.\n"
    "\n"
    "Exit status: 0 after quitting (the run's result is on the screen and in the\n"
    "session), 2 usage or no terminal, 4 quit while the run was still working (the\n"
    "session can be resumed), 5 an error before the workbench opened.\n";

const char cli_replay_usage[] =
    "usage: ditto replay SESSION [--session-dir DIR]\n"
    "\n"
    "Open the workbench on a recorded session, offline (no worker, no LLM, no GPU):\n"
    "step through its events to see how each decision was made -- . next event,\n"
    ", previous, > next step, < previous step, space play, 0 and $ the first and last\n"
    "event, Enter on a rule opens its knowledge-base entry, ? every key, q quit.\n"
    "SESSION is an id under the session folder ($XDG_DATA_HOME/ditto/sessions, or\n"
    "--session-dir) or a path.\n";

/* The built-in default problem: a generated power-law matrix, SpMV in fp32,
 * the expert backend, every step asking for review. */
static const char default_spec[] =
    "{\"op\": \"spmv\", \"matrix\": \"gen:rmat:rows=1M,nnz=16M,seed=1\", \"dtype\": \"fp32\","
    " \"backend\": \"expert\", \"review\": \"ask\"}";

/* ---- the session sink (as run.c records it) ------------------------------------------- */

typedef struct session_sink {
    sess *s;
    char *root;
    int failed;
    char problem[600]; /* shown after the workbench closes: it cannot print while open */
} session_sink;

static void artifact_files(session_sink *ss, const cJSON *ev)
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
    if (e.msg[0] && !ss->problem[0])
        snprintf(ss->problem, sizeof ss->problem, "session: %s", e.msg);
}

static void session_event(ag_run *r, const cJSON *ev, void *ud)
{
    (void)r;
    session_sink *ss = ud;
    if (ss->failed)
        return;
    dt_err e = {0};
    if (ss->s == NULL && dt_streq(dt_json_str(ev, "type", ""), "session_started")) {
        ss->s = sess_create(ss->root, cJSON_GetObjectItem(ev, "spec"),
                            cJSON_GetObjectItem(ev, "fingerprint"), &e);
        if (ss->s == NULL) {
            snprintf(ss->problem, sizeof ss->problem,
                     "cannot record the session: %s (the run went on)", e.msg);
            ss->failed = 1;
            return;
        }
    }
    if (ss->s == NULL)
        return;
    /* Artifacts first: the event that names them never points at a file a
     * crash did not write. */
    if (dt_streq(dt_json_str(ev, "type", ""), "artifact"))
        artifact_files(ss, ev);
    cJSON *copy = cJSON_Duplicate(ev, 1);
    if (dt_streq(dt_json_str(ev, "type", ""), "session_started"))
        dt_json_set_str(copy, "session", sess_id(ss->s));
    if (sess_append(ss->s, copy, &e) != 0) {
        snprintf(ss->problem, sizeof ss->problem, "session: %s (recording stopped)", e.msg);
        ss->failed = 1;
    }
    cJSON_Delete(copy);
}

/* ---- Lua adapters ------------------------------------------------------------------------ */

static int lua_review(ag_run *r, const ag_step *s, dt_buf *reason, void *ud)
{
    lx_state *L = ud;
    cJSON *view = ag_step_view(r, s);
    dt_buf errs = DT_BUF_INIT;
    lx_decision d = lx_review(L, view, reason, &errs);
    /* stderr is the workbench's diagnostics pane while it is open */
    if (errs.len)
        fprintf(stderr, "lua review: %s", errs.data);
    dt_buf_free(&errs);
    cJSON_Delete(view);
    return d == LX_APPROVE ? AG_APPROVE : d == LX_REJECT ? AG_REJECT : -1;
}

static void lua_hook(ag_run *r, ag_kind kind, const char *phase, cJSON **data, dt_buf *log,
                     dt_buf *errors, void *ud)
{
    (void)r;
    lx_run_hooks(ud, ag_kind_name(kind), phase, data, log, errors);
}

/* ---- ditto tui -------------------------------------------------------------------------------- */

typedef struct tui_args {
    const char *spec;
    const char *backend, *review, *session_dir, *out, *launcher;
    const char *api, *endpoint, *model, *key_env;
    const char *hooks[16];
    int nhooks;
    int lua_unsafe, workers, no_session, tune_variants;
    double goal, deadline;
} tui_args;

static int parse_args(int argc, char **argv, tui_args *a)
{
    const char *cmd = "tui";
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
            field = &a->api;
        else if (strcmp(s, "--endpoint") == 0)
            field = &a->endpoint;
        else if (strcmp(s, "--model") == 0)
            field = &a->model;
        else if (strcmp(s, "--api-key-env") == 0)
            field = &a->key_env;
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
    if (a->backend && !dt_streq(a->backend, "expert") && !dt_streq(a->backend, "llm"))
        return cli_usage_error(cmd, "--backend: expected expert or llm");
    if (a->review && !dt_streq(a->review, "ask") && !dt_streq(a->review, "auto"))
        return cli_usage_error(cmd, "--review: expected ask or auto");
    return CLI_OK;
}

static void apply_policy(ag_opts *o, const sp_spec *spec, const char *override)
{
    const char *rv = override ? override : spec->review;
    for (int k = 0; k < AG_NKINDS; k++) {
        if (dt_streq(rv, "auto"))
            o->policy[k] = AG_POLICY_AUTO;
        else if (dt_streq(rv, "map") && spec->review_map)
            o->policy[k] = dt_streq(dt_json_str(spec->review_map, ag_kind_name((ag_kind)k), "auto"),
                                    "ask")
                               ? AG_POLICY_ASK
                               : AG_POLICY_AUTO;
        else
            o->policy[k] = AG_POLICY_ASK;
    }
}

/* The LLM settings: config.json's "llm", then the flags. 0, or -1 with the
 * problem printed. */
static int llm_settings(const tui_args *a, const cJSON *cfg, llm_config *lc)
{
    dt_buf probs = DT_BUF_INIT;
    const cJSON *lj = cJSON_GetObjectItem(cfg, "llm");
    if (lj && llm_config_from_json(lc, lj, &probs) != 0) {
        fprintf(stderr, "ditto tui: config llm: %s", dt_buf_str(&probs));
        dt_buf_free(&probs);
        return -1;
    }
    dt_buf_free(&probs);
    if (a->api)
        lc->api = dt_streq(a->api, "anthropic") ? LLM_ANTHROPIC : LLM_OPENAI;
    if (a->endpoint) {
        free(lc->endpoint);
        lc->endpoint = dt_xstrdup(a->endpoint);
    }
    if (a->model) {
        free(lc->model);
        lc->model = dt_xstrdup(a->model);
    }
    if (a->key_env) {
        free(lc->api_key_env);
        lc->api_key_env = dt_xstrdup(a->key_env);
    }
    if (lc->endpoint == NULL || lc->model == NULL) {
        fprintf(stderr, "ditto tui: the llm backend needs an endpoint and a model (--endpoint, "
                        "--model or \"llm\" in config.json)\n");
        return -1;
    }
    return 0;
}

/* Wire everything as `ditto run` does, then hand the run to the workbench. */
static int workbench(const tui_args *a, sp_spec *spec)
{
    dt_buf probs = DT_BUF_INIT;
    cJSON *cfg = cli_config_load(&probs);
    if (probs.len) {
        fputs(probs.data, stderr);
        dt_buf_free(&probs);
        cJSON_Delete(cfg);
        return CLI_USAGE;
    }
    if (!isatty(0) || !isatty(1)) {
        fprintf(stderr, "ditto tui: the workbench needs a terminal on stdin and stdout; "
                        "`ditto run` works without one\n");
        cJSON_Delete(cfg);
        return CLI_USAGE;
    }
    const char *backend = a->backend ? a->backend : dt_json_str(cfg, "backend", spec->backend);
    llm_config lc;
    llm_config_init(&lc);
    int have_llm = 0;
    if (dt_streq(backend, "llm")) {
        if (llm_settings(a, cfg, &lc) != 0) {
            llm_config_clear(&lc);
            cJSON_Delete(cfg);
            return CLI_USAGE;
        }
        have_llm = 1;
    }
    int status = AG_EXIT_ERROR;
    dt_err e = {0};
    char *root = sess_root(a->session_dir);
    dt_loop *loop = dt_loop_new();
    const cJSON *wj = cJSON_GetObjectItem(cfg, "workers");
    gpu_pool_opts po = {.workers = a->workers ? a->workers : (int)dt_json_num(wj, "count", 1),
                        .launcher = a->launcher ? a->launcher : dt_json_str(wj, "launcher", NULL),
                        .deadline_s =
                            a->deadline > 0 ? a->deadline : dt_json_num(wj, "deadline_s", 600)};
    gpu_pool *pool = gpu_pool_new(loop, &po, &e);
    if (pool == NULL) {
        fprintf(stderr, "ditto tui: %s\n", e.msg);
        goto out_loop;
    }
    kb *k = kb_open(NULL, NULL, &probs, &e);
    if (probs.len)
        fprintf(stderr, "ditto: knowledge base: %s", probs.data);
    dt_buf_reset(&probs);
    lx_opts lo = {.unsafe = a->lua_unsafe};
    lx_state *L = lx_new(&lo, &e);
    if (L) {
        char *cdir = dt_config_dir();
        if (cdir) {
            char *hdir = dt_xasprintf("%s/hooks", cdir);
            lx_load_dir(L, hdir, &probs);
            free(hdir);
            free(cdir);
        }
        for (int i = 0; i < a->nhooks; i++) {
            dt_err he = {0};
            if (lx_load_file(L, a->hooks[i], &he) != 0)
                dt_buf_printf(&probs, "%s\n", he.msg);
        }
        if (probs.len)
            fprintf(stderr, "ditto: hooks: %s", probs.data);
    }
    const cJSON *tj = cJSON_GetObjectItem(cfg, "tune");
    ag_opts o = {.spec = spec,
                 .pool = pool,
                 .backend = backend,
                 .out_dir = a->out,
                 .llm_config = have_llm ? &lc : NULL,
                 .kb = k,
                 .goal_speedup = a->goal > 0 ? a->goal : dt_json_num(cfg, "goal_speedup", 1.0),
                 .max_iterations = (int)dt_json_num(cfg, "max_iterations", 8),
                 .tune_budget_variants = a->tune_variants ? a->tune_variants
                                                          : (int)dt_json_num(tj, "variants", 24),
                 .tune_budget_s = dt_json_num(tj, "seconds", 120)};
    apply_policy(&o, spec, a->review);
    if (L && lx_hook_count(L) > 0) {
        o.reviewer = lua_review;
        o.reviewer_ud = L;
        o.hook = lua_hook;
        o.hook_ud = L;
    }
    session_sink ss = {.root = root};
    ag_run *run = ag_run_new(loop, &o, &e);
    if (run == NULL) {
        fprintf(stderr, "ditto tui: %s\n", e.msg);
    } else {
        if (!a->no_session)
            ag_add_sink(run, session_event, &ss);
        tui_opts to = {.loop = loop, .run = run, .kb = k, .model = have_llm ? lc.model : NULL};
        int rc = tui_run_live(&to, &e);
        if (rc < 0) {
            fprintf(stderr, "ditto tui: %s\n", e.msg);
            status = CLI_USAGE;
        } else {
            status = rc;
            if (ag_run_done(run))
                printf("ditto tui: the run finished with exit status %d\n",
                       ag_run_exit_code(run));
            if (ss.s)
                printf("session: %s (%s)\n", sess_id(ss.s), sess_dir(ss.s));
        }
        if (ss.problem[0])
            fprintf(stderr, "ditto tui: %s\n", ss.problem);
    }
    ag_run_free(run);
    if (ss.s) {
        sess_sync(ss.s, &e);
        sess_close(ss.s);
    }
    lx_free(L);
    kb_close(k);
    gpu_pool_free(pool);
out_loop:
    dt_loop_free(loop);
    llm_config_clear(&lc);
    free(root);
    dt_buf_free(&probs);
    cJSON_Delete(cfg);
    return status;
}

int cli_tui(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("tui");
    tui_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc != CLI_OK)
        return rc;
    if (a.spec == NULL)
        return cli_usage_error("tui", "give a problem spec (JSON); `ditto` alone opens a "
                                      "built-in one");
    sp_spec spec;
    sp_spec_init(&spec);
    dt_buf probs = DT_BUF_INIT;
    if (sp_spec_load(&spec, a.spec, &probs) != 0) {
        fputs(dt_buf_str(&probs), stderr);
        dt_buf_free(&probs);
        sp_spec_clear(&spec);
        return AG_EXIT_USAGE;
    }
    dt_buf_free(&probs);
    rc = workbench(&a, &spec);
    sp_spec_clear(&spec);
    return rc;
}

int cli_tui_default(void)
{
    tui_args a;
    memset(&a, 0, sizeof a);
    sp_spec spec;
    sp_spec_init(&spec);
    dt_buf probs = DT_BUF_INIT;
    cJSON *j = cJSON_Parse(default_spec);
    int bad = sp_spec_from_json(&spec, j, "the built-in default problem", &probs);
    cJSON_Delete(j);
    if (bad != 0) {
        fputs(dt_buf_str(&probs), stderr);
        dt_buf_free(&probs);
        sp_spec_clear(&spec);
        return AG_EXIT_ERROR;
    }
    dt_buf_free(&probs);
    int rc = workbench(&a, &spec);
    sp_spec_clear(&spec);
    return rc;
}

/* ---- ditto replay ------------------------------------------------------------------------------ */

int cli_replay(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("replay");
    const char *id = NULL, *dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--session-dir") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("replay", "--session-dir needs a value");
            dir = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            return cli_usage_error("replay", "unknown option '%s'", argv[i]);
        } else if (id == NULL) {
            id = argv[i];
        } else {
            return cli_usage_error("replay", "unexpected argument '%s'", argv[i]);
        }
    }
    if (id == NULL)
        return cli_usage_error("replay", "give a session id (ditto sessions lists them)");
    char *root = sess_root(dir);
    dt_err e = {0};
    sess_log *log = sess_log_read(root, id, &e);
    free(root);
    if (log == NULL) {
        fprintf(stderr, "ditto replay: %s\n", e.msg);
        return CLI_FAIL;
    }
    if (!isatty(0) || !isatty(1)) {
        fprintf(stderr, "ditto replay: the workbench needs a terminal on stdin and stdout "
                        "(`ditto sessions show %s` prints a session)\n",
                id);
        sess_log_free(log);
        return CLI_USAGE;
    }
    dt_buf probs = DT_BUF_INIT;
    kb *k = kb_open(NULL, NULL, &probs, &e);
    tui_opts o = {.kb = k, .events = log->events, .title = log->id};
    int rc = tui_run_replay(&o, &e);
    if (rc < 0) {
        fprintf(stderr, "ditto replay: %s\n", e.msg);
        rc = CLI_USAGE;
    }
    if (log->warnings.len)
        fprintf(stderr, "ditto replay: %s", log->warnings.data);
    if (probs.len)
        fprintf(stderr, "ditto: knowledge base: %s", probs.data);
    kb_close(k);
    dt_buf_free(&probs);
    sess_log_free(log);
    return rc;
}
