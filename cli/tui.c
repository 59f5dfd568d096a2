/* tui.c -- `ditto tui` (the workbench on a problem spec), `ditto replay`
 * (the workbench on a recorded session, offline) and the built-in default
 * problem that `ditto` with no command opens. The wiring is run.c's: the
 * worker pool, the knowledge base, Lua hooks, the session log and the
 * orchestrator, the shared parts from cli/wiring.c; the workbench only
 * renders and decides. */
#include "agents/agents.h"
#include "agents/llm.h"
#include "cli/cli.h"
#include "cli/wiring.h"
#include "gpu/gpu.h"
#include "hardware/hardware.h"
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
    "                 [--gpu NAME]\n"
    "\n"
    "Open the workbench on a problem: the pipeline runs as with `ditto run`, and every\n"
    "step shows as it happens -- the steps, each agent's reasoning as it streams (with\n"
    "the knowledge-base rules behind each decision), the kernel with a diff against the\n"
    "previous version, compiler and rule diagnostics, the roofline and occupancy.\n"
    "With --review ask (the default) each step waits: a approve, e edit the plan or\n"
    "the kernel in $VISUAL/$EDITOR (an edit the run refuses comes back at the next e),\n"
    "r reject with a reason for the agent (an editor of many lines), x reject one hunk\n"
    "of the kernel's diff, u undo a decision within 3 s, A approve the rest, t tune now\n"
    "(with a GPU), : switch the model, endpoint or backend for the next steps, H the\n"
    "GPU the figures assume, k review knowledge-base proposals, ? every key, q quit.\n"
    "`ditto` with no command opens it on a built-in default problem.\n"
    "--gpu NAME (ditto hw list) is the target GPU, over the spec's \"gpu\": without a\n"
    "GPU here the plan, the occupancy and the roofline are for it (H in the workbench\n"
    "picks the GPU the figures assume); without either they assume an H200 and say so.\n"
    "\n"
    "Exit status: 0 after quitting (the run's result is on the screen and in the\n"
    "session), 2 usage or no terminal, 4 quit while the run was still working (the\n"
    "session can be resumed), 5 an error before the workbench opened, 6 the session\n"
    "could not be recorded (the workbench does not open and nothing runs: make the\n"
    "folder writable, give --session-dir DIR, or pass --no-session) or its recording\n"
    "stopped (disk full: the message says which), 66 the spec file does not exist. A\n"
    "spec's \"gpu\" must be \"auto\" or a known GPU (ditto hw list).\n";

const char cli_replay_usage[] =
    "usage: ditto replay SESSION [--session-dir DIR] [--speed X] [--step N]\n"
    "                    [--export FILE.cast [--size COLSxROWS]]\n"
    "\n"
    "Open the workbench on a recorded session, offline (no worker, no LLM, no GPU):\n"
    "step through its events to see how each decision was made -- . next event (a\n"
    "whole agent message at once), , previous, > next step, < previous step, j jump\n"
    "to a step, space play on the recording's clock (pauses over a second shortened\n"
    "to one), + and - play faster or slower, m add a note for later replays, 0 and $\n"
    "the first and last event, Enter on a rule opens its knowledge-base entry, ? every\n"
    "key, q quit. Notes are kept in the session folder's annotations.jsonl (never in\n"
    "events.jsonl) and show at their moment in every later replay.\n"
    "SESSION is an id under the session folder ($XDG_DATA_HOME/ditto/sessions, or\n"
    "--session-dir) or a path.\n"
    "\n"
    "  --speed X          play X times the recording's speed (0.125 to 64; default 1)\n"
    "  --step N           open at the end of step N\n"
    "  --export FILE.cast write the replay as an asciicast v2 recording (asciinema\n"
    "                     play FILE.cast) instead of opening it; no terminal needed\n"
    "  --size COLSxROWS   the recording's terminal size (default 120x40)\n";

/* The built-in default problem: a generated power-law matrix, SpMV in fp32,
 * the expert backend, every step asking for review. */
static const char default_spec[] =
    "{\"op\": \"spmv\", \"matrix\": \"gen:rmat:rows=1M,nnz=16M,seed=1\", \"dtype\": \"fp32\","
    " \"backend\": \"expert\", \"review\": \"ask\"}";

/* ---- ditto tui ------------------------------------------------------------------------------- */

/* Wire everything as `ditto run` does, then hand the run to the workbench. */
static int workbench(const cli_run_args *a, sp_spec *spec)
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
        if (cli_llm_settings("tui", cfg, &a->llm, &lc) != 0) {
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
    gpu_pool_opts po = {.workers = a->workers ? a->workers : dt_json_int(wj, "count", 1),
                        .launcher = a->launcher ? a->launcher : dt_json_str(wj, "launcher", NULL),
                        .ship = cli_ship_mode(wj),
                        .deadline_s =
                            a->deadline > 0 ? a->deadline : dt_json_num(wj, "deadline_s", 600),
                        .max_deadline_s = a->deadline};
    gpu_pool *pool = gpu_pool_new(loop, &po, &e);
    if (pool == NULL) {
        fprintf(stderr, "ditto tui: %s\n", e.msg);
        goto out_loop;
    }
    kb *k = kb_open(NULL, NULL, &probs, &e);
    if (probs.len)
        fprintf(stderr, "ditto: knowledge base: %s", probs.data);
    dt_buf_reset(&probs);
    cli_lua lua = {.L = cli_lua_open(a->lua_unsafe, a->hooks, a->nhooks), .prefix = ""};
    const cJSON *tj = cJSON_GetObjectItem(cfg, "tune");
    ag_opts o = {.spec = spec,
                 .pool = pool,
                 .backend = backend,
                 .out_dir = a->out,
                 .llm_config = have_llm ? &lc : NULL,
                 .kb = k,
                 .goal_speedup = a->goal > 0 ? a->goal : dt_json_num(cfg, "goal_speedup", 1.0),
                 .max_iterations = dt_json_int(cfg, "max_iterations", 8),
                 .max_reviews = a->max_reviews ? a->max_reviews
                                               : dt_json_int(cfg, "max_reviews", 10),
                 .tune_budget_variants =
                     a->tune_variants ? a->tune_variants : dt_json_int(tj, "variants", 24),
                 .tune_budget_s = dt_json_num(tj, "seconds", 120)};
    cli_review_policy(&o, spec, a->review);
    cli_lua_attach(&o, &lua);
    cJSON *flags = cli_run_flags_json(a); /* recorded: `ditto resume` restores them */
    o.flags = flags;
    char problem[600] = ""; /* shown after the workbench closes: it cannot print while open */
    cli_session_sink ss = {.root = root, .problem = problem, .problem_size = sizeof problem};
    ag_run *run = NULL;
    if (!a->no_session) {
        /* Created before the workbench opens, as `ditto run` does: a session
         * that cannot be recorded stops the run before any step. */
        ss.s = cli_session_create("tui", root, spec, pool);
        o.session_dir = ss.s ? sess_dir(ss.s) : NULL;
        o.session_id = ss.s ? sess_id(ss.s) : NULL;
    }
    if (!a->no_session && ss.s == NULL)
        status = AG_EXIT_UNRECORDED; /* said on stderr: the workbench does not open */
    else
        run = ag_run_new(loop, &o, &e);
    if (run == NULL) {
        if (status != AG_EXIT_UNRECORDED)
            fprintf(stderr, "ditto tui: %s\n", e.msg);
    } else {
        if (!a->no_session)
            ag_add_sink(run, cli_session_event, &ss);
        tui_opts to = {.loop = loop, .run = run, .kb = k, .model = have_llm ? lc.model : NULL,
                       .price_out = have_llm ? lc.price_out : 0};
        int rc = tui_run_live(&to, &e);
        if (rc < 0) {
            fprintf(stderr, "ditto tui: %s\n", e.msg);
            status = CLI_USAGE;
        } else {
            status = rc;
            if (ag_run_done(run))
                printf("ditto tui: the run finished with exit status %d\n", ag_run_exit_code(run));
            if (ss.s && (ss.failed || ss.incomplete)) {
                /* never let the person believe the results are recorded */
                printf("recording stopped: session %s (%s) is incomplete\n", sess_id(ss.s),
                       sess_dir(ss.s));
                status = AG_EXIT_UNRECORDED;
            } else if (ss.s) {
                printf("session: %s (%s)\n", sess_id(ss.s), sess_dir(ss.s));
            }
        }
        if (problem[0])
            fprintf(stderr, "ditto tui: %s\n", problem);
    }
    ag_run_free(run);
    cJSON_Delete(flags);
    if (ss.s) {
        sess_sync(ss.s, &e);
        sess_close(ss.s);
    }
    lx_free(lua.L);
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
    /* --gpu NAME is the workbench's own: taken out before the shared parse */
    const char *gpu = NULL;
    char **av = dt_xcalloc((size_t)argc + 1, sizeof *av);
    int ac = 0;
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--gpu") == 0) {
            if (i + 1 >= argc) {
                free(av);
                return cli_usage_error("tui", "--gpu needs a GPU name (ditto hw list)");
            }
            gpu = argv[++i];
        } else {
            av[ac++] = argv[i];
        }
    }
    cli_run_args a;
    int rc = cli_run_args_parse("tui", ac, av, 0, NULL, &a);
    free(av);
    if (rc != CLI_OK)
        return rc;
    if (a.spec == NULL)
        return cli_usage_error("tui", "give a problem spec (JSON); `ditto` alone opens a "
                                      "built-in one");
    if (cli_file_missing("tui", a.spec))
        return CLI_NOT_FOUND;
    if (gpu) {
        dt_err ge = {0};
        hw_spec *g = hw_load(gpu, &ge);
        if (g == NULL)
            return cli_usage_error("tui", "--gpu: %s", ge.msg);
        hw_spec_free(g);
    }
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
    if (gpu) {
        /* the target the person picked: the pipeline plans and checks for
         * it, and the panes draw it */
        free(spec.gpu);
        spec.gpu = dt_xstrdup(gpu);
    }
    if (cli_check_spec_gpu("tui", a.spec, spec.gpu) != 0) {
        sp_spec_clear(&spec);
        return AG_EXIT_USAGE;
    }
    rc = workbench(&a, &spec);
    sp_spec_clear(&spec);
    return rc;
}

int cli_tui_default(void)
{
    cli_run_args a;
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

/* ---- ditto replay ---------------------------------------------------------------------------- */

int cli_replay(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("replay");
    const char *id = NULL, *dir = NULL, *cast = NULL;
    double speed = 1;
    int step = 0, cols = 120, rows = 40;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--session-dir") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("replay", "--session-dir needs a value");
            dir = argv[++i];
        } else if (strcmp(argv[i], "--speed") == 0 || strcmp(argv[i], "--step") == 0 ||
                   strcmp(argv[i], "--export") == 0 || strcmp(argv[i], "--size") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("replay", "%s needs a value", argv[i]);
            const char *opt = argv[i], *v = argv[++i];
            char *end = NULL;
            if (strcmp(opt, "--export") == 0) {
                cast = v;
            } else if (strcmp(opt, "--speed") == 0) {
                speed = strtod(v, &end);
                if (end == v || *end || !(speed >= 0.125 && speed <= 64))
                    return cli_usage_error("replay", "--speed takes 0.125 to 64, not '%s'", v);
            } else if (strcmp(opt, "--step") == 0) {
                long n = strtol(v, &end, 10);
                if (end == v || *end || n < 1 || n > 1000000)
                    return cli_usage_error("replay", "--step takes a step number, not '%s'", v);
                step = (int)n;
            } else if (sscanf(v, "%dx%d", &cols, &rows) != 2 || cols < 40 || rows < 12 ||
                       cols > 500 || rows > 200) {
                return cli_usage_error("replay", "--size takes COLSxROWS from 40x12 to 500x200, "
                                                 "not '%s'",
                                       v);
            }
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
        return cli_session_status(&e);
    }
    char *notes = dt_xasprintf("%s/annotations.jsonl", log->dir);
    if (cast) {
        tui_opts xo = {.events = log->events, .title = log->id, .notes_path = notes,
                       .speed = speed, .start_step = step};
        int rc = tui_export_cast(&xo, cast, cols, rows, &e) == 0 ? CLI_OK : CLI_FAIL;
        if (rc != CLI_OK)
            fprintf(stderr, "ditto replay: %s\n", e.msg);
        else
            printf("ditto replay: wrote %s (asciicast v2, %dx%d; asciinema play %s)\n", cast,
                   cols, rows, cast);
        free(notes);
        sess_log_free(log);
        return rc;
    }
    if (!isatty(0) || !isatty(1)) {
        free(notes);
        fprintf(stderr,
                "ditto replay: the workbench needs a terminal on stdin and stdout "
                "(`ditto sessions show %s` prints a session)\n",
                id);
        sess_log_free(log);
        return CLI_USAGE;
    }
    dt_buf probs = DT_BUF_INIT;
    kb *k = kb_open(NULL, NULL, &probs, &e);
    tui_opts o = {.kb = k, .events = log->events, .title = log->id, .notes_path = notes,
                  .speed = speed, .start_step = step};
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
    free(notes);
    sess_log_free(log);
    return rc;
}
