/* wiring.h -- what `ditto run`/`ditto resume` (cli/run.c) and the workbench
 * (cli/tui.c) wire alike around a run: the session sink, the Lua reviewer and
 * hooks, the flags, the LLM settings and the review policy.
 *
 * Ownership: everything here borrows; the caller keeps what it passes in
 * alive for as long as the run that uses it. */
#ifndef DITTO_CLI_WIRING_H
#define DITTO_CLI_WIRING_H

#include "agents/agents.h"
#include "agents/llm.h"
#include "scripting/scripting.h"
#include "sessions/sessions.h"

/* ---- the session sink ------------------------------------------------------------------------ */

/* Records a run's events in a session: each event appended to its log, each
 * artifact also written as a file. Added with ag_add_sink(run,
 * cli_session_event, &sink). */
typedef struct cli_session_sink {
    sess *s;             /* the session; NULL: created on the run's session_started event */
    const char *root;    /* the session store the session is created in (borrowed) */
    int failed;          /* recording stopped, or never began: events are dropped */
    int incomplete;      /* an artifact file could not be written (its event still was) */
    char *problem;       /* NULL: problems print on stderr as they happen ("ditto: ...");
                          * else they are kept here to show later (the workbench owns stderr
                          * while it is open): the first, or the one that stopped recording */
    size_t problem_size; /* bytes at problem */
} cli_session_sink;

/* The sink (ud is the cli_session_sink). A problem writing an artifact is
 * reported, sets incomplete, and recording goes on; one creating the session
 * or appending to its log is reported and stops recording (failed); the run
 * goes on either way, and the front end says at the end that the session is
 * incomplete. This function can't fail. */
void cli_session_event(ag_run *r, const cJSON *ev, void *ud);

/* ---- Lua ------------------------------------------------------------------------------------- */

/* The Lua state a run's reviewer and hooks call into. */
typedef struct cli_lua {
    lx_state *L;        /* NULL when Lua could not start: no hooks then */
    const char *prefix; /* before "lua review: ..." on stderr: "ditto: " headless, "" in the
                         * workbench (stderr is its diagnostics pane while it is open) */
} cli_lua;

/* A Lua state with the hooks of $XDG_CONFIG_HOME/ditto/hooks and the given
 * files loaded (unsafe: lx_opts.unsafe). Files that fail to load are named
 * on stderr ("ditto: hooks: ...") and skipped. NULL when Lua cannot start;
 * free with lx_free. */
lx_state *cli_lua_open(int unsafe, const char *const *files, int nfiles);

/* When lua->L has hooks, make it the run's reviewer, hook runner, custom
 * rules and parameter spaces (o->reviewer, o->hook, o->rules, o->spaces,
 * all with ud lua). This function can't fail. */
void cli_lua_attach(ag_opts *o, cli_lua *lua);

/* ---- arguments ------------------------------------------------------------------------------- */

/* The LLM flags (--api, --endpoint, --model, --api-key-env); NULL: not given. */
typedef struct cli_llm_flags {
    const char *api, *endpoint, *model, *key_env;
} cli_llm_flags;

/* The flags `ditto run`, `ditto resume` and `ditto tui` take alike. */
typedef struct cli_run_args {
    const char *spec; /* the problem spec (run, tui) or the session (resume); NULL: not given */
    const char *backend, *review, *session_dir, *out, *launcher;
    cli_llm_flags llm;
    const char *hooks[16]; /* --hook FILE, in order; more than 16 are ignored */
    int nhooks;
    int lua_unsafe, json, verbose, workers, no_session, tune_variants;
    int max_reviews; /* --max-reviews N: rejections of one step kind; 0: not given */
    double goal, deadline; /* 0: not given */
    unsigned clear;        /* resume --clear FLAG,...: recorded flags not restored (bit i:
                            * cli_run_flag_names[i]) */
} cli_run_args;

/* The recorded flags `ditto resume --clear` can drop, by the name --clear
 * takes (the flag without its dashes: "model", "hooks", "api-key-env"),
 * NULL-terminated. */
extern const char *const cli_run_flag_names[];

/* Parse argv (argv[0] is the command, cmd names it in errors) into a.
 * headless: --json and -v/--verbose are accepted (run, resume). missing: the
 * usage error when no spec is given; NULL: the caller checks. CLI_OK, or
 * CLI_USAGE with the problem printed (cli_usage_error). */
int cli_run_args_parse(const char *cmd, int argc, char **argv, int headless, const char *missing,
                       cli_run_args *a);

/* The flags of a that were given, as JSON for the session (ag_opts.flags):
 * review, backend, api, endpoint, model, api_key_env, launcher, out, hooks,
 * lua_unsafe, workers, tune_variants, deadline, goal, and "cleared": the
 * recorded keys resume --clear dropped. Caller frees. This function can't
 * fail. */
cJSON *cli_run_flags_json(const cli_run_args *a);
/* Whether resume --clear dropped the recorded flag of this JSON key
 * ("api_key_env"). */
int cli_run_flag_cleared(const cli_run_args *a, const char *key);

/* Create the session of a new run before any step, as the fingerprint of
 * the pool's first worker (waited for) and the spec say. On failure says
 * on stderr ("ditto CMD: cannot record the session: ...") that nothing ran
 * and what the person can do, and returns NULL. */
sess *cli_session_create(const char *cmd, const char *root, const sp_spec *spec, gpu_pool *pool);
/* Say on stderr that the session cannot be recorded (why), so nothing ran,
 * and what the person can do. This function can't fail. */
void cli_session_refused(const char *cmd, const char *why);

/* ---- settings -------------------------------------------------------------------------------- */

/* The LLM settings into lc (initialised by the caller): config.json's "llm"
 * object in cfg, then the flags over it. 0, or -1 with the problem printed
 * on stderr as "ditto CMD: ..." (lc is then to be cleared, not used). */
int cli_llm_settings(const char *cmd, const cJSON *cfg, const cli_llm_flags *f, llm_config *lc);

/* Each step's review policy from --review (override; NULL: not given) or
 * the spec's "review": auto, ask, or map (spec->review_map names the steps
 * that ask; the rest are automatic). This function can't fail. */
void cli_review_policy(ag_opts *o, const sp_spec *spec, const char *override);

#endif /* DITTO_CLI_WIRING_H */
