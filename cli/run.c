/* run.c -- `ditto run` and `ditto resume`: the pipeline headless, with a
 * printer of one line per step, reviews answered on stdin, the session log,
 * Lua hooks and the knowledge base wired in (the parts the workbench shares
 * are in cli/wiring.c); and `ditto tune`. */
#include "agents/agents.h"
#include "agents/llm.h"
#include "cli/cli.h"
#include "cli/wiring.h"
#include "gpu/gpu.h"
#include "knowledge/knowledge.h"
#include "scripting/scripting.h"
#include "sessions/sessions.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- the printer -------------------------------------------------------------------------- */

typedef struct printer {
    int verbose;
    int json;
    int tty_in;
    ag_run *run;
    dt_loop *loop;
    dt_buf queue; /* whole lines typed ahead of a review prompt */
    int waiting;  /* a review prompt is shown */
    int eof;
    int policy_auto_if_eof;
    const char *session_id;
    int steps;
} printer;

static const char *glyph(const char *status)
{
    if (dt_streq(status, "approved"))
        return "ok  ";
    if (dt_streq(status, "edited"))
        return "edit";
    if (dt_streq(status, "rejected"))
        return "rej ";
    return "fail";
}

static void summary_line(const cJSON *art, const char *kind, char *out, size_t len)
{
    out[0] = '\0';
    if (art == NULL)
        return;
    if (!dt_json_bool(art, "ok", 1)) {
        snprintf(out, len, "%s", dt_json_str(art, "why", "failed"));
        return;
    }
    if (strcmp(kind, "profile") == 0) {
        const cJSON *rep = cJSON_GetObjectItem(art, "report");
        snprintf(out, len, "%.0f x %.0f, %.0f nnz, %s", dt_json_num(rep, "rows", 0),
                 dt_json_num(rep, "cols", 0), dt_json_num(rep, "nnz", 0),
                 dt_json_str(rep, "class", ""));
    } else if (strcmp(kind, "plan") == 0) {
        char *ps = dt_json_print(cJSON_GetObjectItem(art, "params"), 0);
        snprintf(out, len, "%s %s (score %.1f)", dt_json_str(art, "strategy", ""), ps,
                 dt_json_num(art, "score", 0));
        free(ps);
    } else if (strcmp(kind, "check") == 0) {
        const cJSON *o = cJSON_GetObjectItem(art, "occupancy");
        snprintf(out, len, "no violation; predicted occupancy %.0f%% (%s)",
                 dt_json_num(o, "occupancy_pct", 0), dt_json_str(o, "limiter", "?"));
    } else if (strcmp(kind, "generate") == 0) {
        snprintf(out, len, "%zu bytes of CUDA from %s", strlen(dt_json_str(art, "source", "")),
                 dt_json_str(art, "template", "?"));
    } else if (strcmp(kind, "compile") == 0) {
        const cJSON *k = cJSON_GetArrayItem(
            cJSON_GetObjectItem(cJSON_GetObjectItem(art, "nvrtc"), "kernels"), 0);
        snprintf(out, len, "%.0f registers, %.0f B smem, %.0f rule finding(s)",
                 dt_json_num(k, "registers", 0), dt_json_num(k, "smem", 0),
                 (double)cJSON_GetArraySize(cJSON_GetObjectItem(art, "rules")));
    } else if (strcmp(kind, "verify") == 0) {
        snprintf(out, len, "%.0f checks passed", dt_json_num(art, "checks_run", 0));
    } else if (strcmp(kind, "measure") == 0) {
        snprintf(out, len, "%.2f us (%s), %.0f GB/s, %.2fx cuSPARSE %s", dt_json_num(art, "us", 0),
                 dt_json_str(art, "method", ""), dt_json_num(art, "gbps", 0),
                 dt_json_num(art, "speedup", 0),
                 dt_json_str(cJSON_GetObjectItem(art, "baseline"), "best", ""));
    } else if (strcmp(kind, "tune") == 0) {
        const cJSON *b = cJSON_GetObjectItem(art, "best");
        char *ps = dt_json_print(cJSON_GetObjectItem(b, "params"), 0);
        snprintf(out, len, "best %s %s: %.2f us, %.2fx cuSPARSE", dt_json_str(b, "strategy", ""),
                 ps, dt_json_num(b, "us", 0), dt_json_num(b, "speedup", 0));
        free(ps);
    } else if (strcmp(kind, "learn") == 0) {
        snprintf(out, len, "proposed %s",
                 dt_json_str(cJSON_GetObjectItem(art, "entry"), "id", "nothing"));
    }
}

static void decide_line(printer *p, const char *line);

/* Where text for the person goes: stdout, or stderr under --json, whose
 * stdout is JSON Lines from the first line to the last. */
static FILE *human(const printer *p)
{
    return p->json ? stderr : stdout;
}

static void print_session_json(const char *id, const char *dir)
{
    cJSON *j = cJSON_CreateObject();
    dt_json_set_str(j, "type", "session");
    dt_json_set_str(j, "session", id);
    dt_json_set_str(j, "path", dir);
    char *s = dt_json_print(j, 0);
    puts(s);
    free(s);
    cJSON_Delete(j);
}

/* The next typed-ahead line, or NULL (caller frees). */
static char *pop_line(printer *p)
{
    char *nl = p->queue.len ? memchr(p->queue.data, '\n', p->queue.len) : NULL;
    if (nl == NULL)
        return NULL;
    char *line = dt_xstrndup(p->queue.data, (size_t)(nl - p->queue.data));
    size_t used = (size_t)(nl - p->queue.data) + 1;
    memmove(p->queue.data, p->queue.data + used, p->queue.len - used);
    p->queue.len -= used;
    p->queue.data[p->queue.len] = '\0';
    return line;
}

/* Answer the pending review from lines typed (or piped) ahead, in order.
 * Returns 1 when the review was answered. */
static int drain(printer *p)
{
    char *line;
    while (ag_awaiting(p->run) && (line = pop_line(p)) != NULL) {
        const ag_step *s = ag_awaiting(p->run);
        if (!p->tty_in)
            fprintf(human(p), "review %s v%d: %s\n", ag_kind_name(ag_step_kind(s)),
                    ag_step_version(s), dt_tsafe(line));
        if (p->waiting == 2) {
            dt_err e = {0};
            p->waiting = 0;
            if (ag_decide(p->run, AG_REJECT, NULL, line, &e) != 0)
                fprintf(human(p), "%s\n", e.msg);
        } else {
            decide_line(p, line);
        }
        free(line);
        if (!ag_awaiting(p->run))
            return 1;
    }
    return 0;
}

static void prompt_review(printer *p)
{
    const ag_step *s = ag_awaiting(p->run);
    if (s == NULL)
        return;
    p->waiting = 1;
    if (drain(p))
        return;
    if (p->eof) {
        /* Nobody can answer: not a person's stop, the session stays open. */
        fprintf(human(p), "stdin is closed and a review is pending: stopping (resume the "
                          "session to answer it)\n");
        ag_stop_unattended(p->run, "stdin is closed");
        return;
    }
    if (p->tty_in) {
        fprintf(human(p),
                "review %s v%d: [a]pprove  [e]dit  [r]eject REASON  [A]pprove the rest  [s]top > ",
                ag_kind_name(ag_step_kind(s)), ag_step_version(s));
        fflush(human(p));
    }
}

static long prompt_later(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    prompt_review(ud);
    return DT_LOOP_NOMORE;
}

static void print_event(ag_run *r, const cJSON *ev, void *ud)
{
    printer *p = ud;
    if (p->json) {
        char *s = dt_json_print(ev, 0);
        puts(s);
        free(s);
        fflush(stdout);
        if (dt_streq(dt_json_str(ev, "type", ""), "awaiting_review"))
            dt_loop_add_timer(p->loop, 0, prompt_later, p);
        return;
    }
    const char *type = dt_json_str(ev, "type", "");
    int sid = dt_json_int(ev, "step", 0);
    if (strcmp(type, "text") == 0) {
        if (p->verbose) {
            const char *t = dt_json_str(ev, "text", "");
            dt_buf safe = DT_BUF_INIT; /* model text: no escapes from data */
            dt_buf_put_term(&safe, t, strlen(t), 1);
            fputs(dt_buf_str(&safe), stdout);
            dt_buf_free(&safe);
            fflush(stdout);
        }
    } else if (strcmp(type, "diagnostic") == 0) {
        if (p->verbose || dt_streq(dt_json_str(ev, "severity", ""), "error")) {
            const cJSON *ln = cJSON_GetObjectItem(ev, "line");
            if (cJSON_IsNumber(ln))
                printf("      %s %s line %d: %s\n", dt_json_str(ev, "source", ""),
                       dt_json_str(ev, "severity", ""), dt_json_int(ev, "line", 0),
                       dt_tsafe(dt_json_str(ev, "message", "")));
            else
                printf("      %s %s: %s\n", dt_json_str(ev, "source", ""),
                       dt_json_str(ev, "severity", ""), dt_tsafe(dt_json_str(ev, "message", "")));
        }
    } else if (strcmp(type, "step_finished") == 0) {
        const ag_step *s = NULL;
        for (int i = 0; i < ag_step_count(r); i++)
            if (ag_step_id(ag_step_at(r, i)) == sid)
                s = ag_step_at(r, i);
        if (s == NULL)
            return;
        char sum[600];
        const char *kind = ag_kind_name(ag_step_kind(s));
        summary_line(ag_step_artifact(s), kind, sum, sizeof sum);
        const char *st = dt_json_str(ev, "status", "");
        if (!dt_json_bool(ev, "ok", 1) && dt_streq(st, "approved"))
            st = "failed";
        printf("[%2d] %-4s %-8s v%-2d %-22s %6.2fs  %s\n", sid, glyph(st), kind, ag_step_version(s),
               ag_agent_name(ag_step_kind(s)), dt_json_num(ev, "seconds", 0), dt_tsafe(sum));
        fflush(stdout);
        p->steps++;
    } else if (strcmp(type, "transition") == 0) {
        if (dt_json_str(ev, "edge", NULL))
            printf("     -> %s again (%s, %s): %s\n", dt_json_str(ev, "to", ""),
                   dt_json_str(ev, "edge", ""),
                   dt_json_num(ev, "iteration", 0) > 0 ? "feedback" : "",
                   dt_tsafe(dt_json_str(ev, "reason", "")));
    } else if (strcmp(type, "log") == 0) {
        printf("     %s: %s\n", dt_json_str(ev, "level", ""), dt_tsafe(dt_json_str(ev, "message", "")));
    } else if (strcmp(type, "awaiting_review") == 0) {
        /* Answer from the loop, not from inside the event's delivery. */
        dt_loop_add_timer(p->loop, 0, prompt_later, p);
    } else if (strcmp(type, "session_finished") == 0) {
        const cJSON *res = cJSON_GetObjectItem(ev, "result");
        const cJSON *b = cJSON_GetObjectItem(res, "best");
        printf("\n%s\n", dt_tsafe(dt_json_str(res, "reason", "")));
        if (b)
            printf("best kernel: v%.0f %s, %.2f us (%s timing), %.2fx the best cuSPARSE algorithm "
                   "(%s)\nwritten to: %s\n",
                   dt_json_num(b, "version", 0), dt_json_str(b, "strategy", ""),
                   dt_json_num(b, "us", 0), dt_json_str(b, "method", ""),
                   dt_json_num(b, "speedup", 0), dt_json_str(b, "baseline", "?"),
                   dt_json_str(b, "path", "(not written)"));
        fflush(stdout);
    }
}

/* Open $VISUAL/$EDITOR on text; returns the edited text or NULL. */
static char *edit_text(const char *text, const char *suffix)
{
    char path[] = "/tmp/ditto-edit-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return NULL;
    size_t len = strlen(text);
    if (write(fd, text, len) != (ssize_t)len) {
        close(fd);
        unlink(path);
        return NULL;
    }
    close(fd);
    char *named = dt_xasprintf("%s%s", path, suffix);
    rename(path, named);
    const char *ed = getenv("VISUAL");
    if (ed == NULL || *ed == '\0')
        ed = getenv("EDITOR");
    if (ed == NULL || *ed == '\0')
        ed = "vi";
    char *cmd = dt_xasprintf("%s '%s'", ed, named);
    int rc = system(cmd);
    free(cmd);
    char *out = NULL;
    if (rc == 0)
        out = dt_read_file(named, NULL, NULL);
    unlink(named);
    free(named);
    return out;
}

static void decide_line(printer *p, const char *line)
{
    const ag_step *s = ag_awaiting(p->run);
    if (s == NULL)
        return;
    while (*line == ' ')
        line++;
    dt_err e = {0};
    int rc = 0;
    switch (line[0]) {
    case 'a':
    case '\0':
        rc = ag_decide(p->run, AG_APPROVE, NULL, NULL, &e);
        break;
    case 'A':
        ag_approve_rest(p->run);
        break;
    case 's':
    case 'q':
        ag_stop(p->run);
        break;
    case 'r': {
        const char *reason = line + 1;
        while (*reason == ' ')
            reason++;
        if (*reason == '\0') {
            if (p->tty_in)
                fprintf(human(p), "reason (it goes back to the agent): ");
            fflush(human(p));
            p->waiting = 2; /* the next line is the reason */
            return;
        }
        rc = ag_decide(p->run, AG_REJECT, NULL, reason, &e);
        break;
    }
    case 'e': {
        const cJSON *art = ag_step_artifact(s);
        const char *draft = ag_step_draft(s); /* a refused edit reopens */
        ag_kind k = ag_step_kind(s);
        char *edited = NULL;
        if (k == AG_GENERATE || k == AG_COMPILE || k == AG_VERIFY) {
            cJSON *view = ag_step_view(p->run, s);
            edited = edit_text(draft ? draft : dt_json_str(view, "source", ""), ".cu");
            cJSON_Delete(view);
            if (edited) {
                cJSON *v = cJSON_CreateString(edited);
                rc = ag_decide(p->run, AG_EDIT, v, NULL, &e);
                cJSON_Delete(v);
            }
        } else {
            char *text = draft ? dt_xstrdup(draft) : dt_json_print(art, 1);
            edited = edit_text(text, ".json");
            free(text);
            if (edited) {
                dt_err je = {0};
                cJSON *v = dt_json_parse(edited, strlen(edited), "edited plan", &je);
                if (v == NULL) {
                    e = je;
                    rc = -1;
                } else {
                    rc = ag_decide(p->run, AG_EDIT, v, NULL, &e);
                    cJSON_Delete(v);
                }
            }
        }
        if (edited == NULL) {
            rc = -1;
            dt_err_set(&e, "the editor failed or the file could not be read back");
        }
        free(edited);
        break;
    }
    default:
        rc = -1;
        dt_err_set(&e, "answer a, e, r REASON, A or s");
    }
    if (rc != 0) {
        fprintf(human(p), "%s\n", e.msg);
        prompt_review(p);
        return;
    }
    p->waiting = 0;
}

static void on_stdin(dt_loop *l, int fd, int mask, void *ud)
{
    (void)l;
    (void)mask;
    printer *p = ud;
    char chunk[4096];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) {
        dt_loop_del_fd(p->loop, fd, 0);
        p->eof = 1;
        /* stdin closed with a gate open and nothing typed ahead: nobody can
         * answer it. */
        if (ag_awaiting(p->run) && p->queue.len == 0) {
            fprintf(human(p), "\nstdin closed while a review was pending: stopping (resume "
                              "the session to answer it)\n");
            ag_stop_unattended(p->run, "stdin is closed");
        }
        return;
    }
    dt_buf_append(&p->queue, chunk, (size_t)n);
    drain(p);
}

/* ---- run / resume ---------------------------------------------------------------------------- */

const char cli_run_usage[] =
    "usage: ditto run SPEC.json [--backend expert|llm] [--review ask|auto] [--json] [-v]\n"
    "                 [--session-dir DIR] [--no-session] [--out DIR] [--hook FILE]\n"
    "                 [--lua-unsafe] [--workers N] [--launcher CMD] [--deadline S]\n"
    "                 [--api openai|anthropic] [--endpoint URL] [--model M]\n"
    "                 [--api-key-env VAR] [--goal SPEEDUP] [--tune-variants N]\n"
    "                 [--max-reviews N]\n"
    "       ditto resume SESSION [same options] [--clear FLAG[,FLAG...]]\n"
    "\n"
    "Run the pipeline headless: profile, plan, check, generate, compile, verify, measure,\n"
    "tune, learn -- one line per step (-v streams each agent's reasoning). With --review ask\n"
    "every step waits for a decision typed on stdin: a (approve), e (edit the plan or the\n"
    "kernel in $VISUAL/$EDITOR), r REASON (reject: the reason goes back to the agent),\n"
    "A (approve the rest), s (stop). --json prints the events as JSON Lines\n"
    "(agents/EVENTS.md), the last one {\"type\": \"session\", \"session\": ID, \"path\": DIR}\n"
    "when the session was recorded; prompts and messages then go to stderr.\n"
    "The expert reads a reason for what it can act on and keeps it for the session: a\n"
    "strategy or template name (\"r use merge-path\"), a parameter value or range\n"
    "(\"BLOCK <= 128\", \"smaller BLOCK\"), \"no atomics\", \"no shared memory\", \"fewer\n"
    "registers\", \"faster\", \"simpler\"; it says when it cannot. A rejected compile, verify\n"
    "or measure goes back to the code generator. A failed step cannot be approved: send it\n"
    "back (r REASON), edit it (e: at a failed compile or verify, the kernel) or stop. An\n"
    "edit that cannot be used is refused with the reason; the next e reopens your text.\n"
    "Lua review hooks run under --review auto too; --max-reviews N (default 10) ends the\n"
    "run when one step kind is rejected more often.\n"
    "The session is recorded under $XDG_DATA_HOME/ditto/sessions (or --session-dir);\n"
    "`ditto resume ID` continues one after a crash from its last finished step.\n"
    "\n"
    "The flags given (--review, --backend, --api, --endpoint, --model, --api-key-env,\n"
    "--hook, --lua-unsafe, --launcher, --workers, --deadline, --goal, --tune-variants,\n"
    "--out) are recorded with the session; resume restores them (with a backend, model\n"
    "or endpoint switched in the workbench since), and flags given to resume replace\n"
    "the recorded ones (and are recorded in turn). resume --clear drops\n"
    "recorded flags, back to config.json's or the spec's setting, and records that:\n"
    "--clear hooks (no recorded --hook file; the hooks folder still loads), --clear\n"
    "model, and so for review, backend, api, endpoint, api-key-env, launcher, out,\n"
    "lua-unsafe, workers, deadline, tune-variants, goal. A session that cannot\n"
    "be recorded stops the run before any step (exit 6) unless --no-session is given.\n"
    "--deadline S bounds every worker request (a hung compile is killed after S s).\n"
    "A run that ends on a failure that was not a person's decision (a crashed worker,\n"
    "no GPU, a review pending with stdin closed) can be resumed.\n"
    "\n"
    "Exit status: 0 a verified kernel was produced, 1 none passed verification, 2 usage,\n"
    "3 no GPU (stopped after compiling), 4 stopped (by a person, or a review pending\n"
    "with stdin closed), 5 an error (matrix, worker, LLM), 6 the session could not be\n"
    "recorded (nothing ran) or recording stopped mid-run (the message says where), 66\n"
    "the spec file or the session does not exist. A spec's \"gpu\" must be \"auto\" or a\n"
    "known GPU (ditto hw list): a misspelt one is refused (exit 2).\n";

static void quiet_worker_log(int w, const char *line, void *ud)
{
    (void)ud;
    /* Workers log to stderr; keep it visible but marked. */
    fprintf(stderr, "worker %d: %s\n", w, dt_tsafe(line));
}

/* ---- flags recorded with the session ---------------------------------------------------- */

/* Fill the flags not given on resume's command line from the recorded
 * ones (rec, borrowed: it must outlive a), except those --clear dropped. A
 * recorded value of the wrong type is skipped and named in probs. */
static void restore_flags(cli_run_args *a, const cJSON *rec, dt_buf *probs)
{
    if (rec == NULL)
        return;
    const struct {
        const char *key;
        const char **field;
    } strs[] = {{"review", &a->review},       {"backend", &a->backend},
                {"api", &a->llm.api},         {"endpoint", &a->llm.endpoint},
                {"model", &a->llm.model},     {"api_key_env", &a->llm.key_env},
                {"launcher", &a->launcher},   {"out", &a->out}};
    for (size_t i = 0; i < DT_ARRAY_LEN(strs); i++) {
        const cJSON *v = cJSON_GetObjectItem(rec, strs[i].key);
        if (v == NULL || *strs[i].field != NULL || cli_run_flag_cleared(a, strs[i].key))
            continue;
        if (cJSON_IsString(v))
            *strs[i].field = v->valuestring;
        else
            dt_buf_printf(probs, "recorded flag %s is not a string: ignored\n", strs[i].key);
    }
    const cJSON *nr = cJSON_GetObjectItem(rec, "endpoint_not_recorded");
    if (a->llm.endpoint == NULL && cJSON_IsString(nr) && !cli_run_flag_cleared(a, "endpoint"))
        dt_buf_printf(probs,
                      "the run's endpoint (%s) carried credentials in its URL and was not "
                      "recorded: give --endpoint again (config.json's endpoint is used "
                      "meanwhile)\n",
                      nr->valuestring);
    if (a->review && !dt_streq(a->review, "ask") && !dt_streq(a->review, "auto")) {
        dt_buf_printf(probs, "recorded flag review '%s' is not ask or auto: ignored\n", a->review);
        a->review = NULL;
    }
    if (a->backend && !dt_streq(a->backend, "expert") && !dt_streq(a->backend, "llm")) {
        dt_buf_printf(probs, "recorded flag backend '%s' is not expert or llm: ignored\n",
                      a->backend);
        a->backend = NULL;
    }
    const cJSON *h = cJSON_GetObjectItem(rec, "hooks");
    if (a->nhooks == 0 && cJSON_IsArray(h) && !cli_run_flag_cleared(a, "hooks")) {
        const cJSON *x;
        cJSON_ArrayForEach(x, h)
            if (cJSON_IsString(x) && a->nhooks < (int)DT_ARRAY_LEN(a->hooks))
                a->hooks[a->nhooks++] = x->valuestring;
    }
    if (!a->lua_unsafe && dt_json_bool(rec, "lua_unsafe", 0) &&
        !cli_run_flag_cleared(a, "lua_unsafe"))
        a->lua_unsafe = 1;
    double x = cli_run_flag_cleared(a, "workers") ? 0 : dt_json_num(rec, "workers", 0);
    if (!a->workers && x >= 1 && x <= 64)
        a->workers = (int)x;
    x = cli_run_flag_cleared(a, "tune_variants") ? 0 : dt_json_num(rec, "tune_variants", 0);
    if (!a->tune_variants && x >= 1 && x <= 1e6)
        a->tune_variants = (int)x;
    x = cli_run_flag_cleared(a, "deadline") ? 0 : dt_json_num(rec, "deadline", 0);
    if (a->deadline <= 0 && x > 0)
        a->deadline = x;
    x = cli_run_flag_cleared(a, "goal") ? 0 : dt_json_num(rec, "goal", 0);
    if (a->goal <= 0 && x > 0)
        a->goal = x;
}

static int run_common(const char *cmd, int argc, char **argv, int resume)
{
    /* A file size limit (ulimit -f) must fail a write with EFBIG, which the
     * session reports, not kill ditto (or its workers) mid-event. */
    signal(SIGXFSZ, SIG_IGN);
    cli_run_args a;
    int rc = cli_run_args_parse(
        cmd, argc, argv, 1,
        strcmp(cmd, "run") == 0 ? "give a problem spec (JSON)" : "give a session id", &a);
    if (rc != CLI_OK)
        return rc;
    dt_buf probs = DT_BUF_INIT;
    cJSON *cfg = cli_config_load(&probs);
    if (probs.len) {
        fputs(probs.data, stderr);
        dt_buf_free(&probs);
        cJSON_Delete(cfg);
        return CLI_USAGE;
    }
    sp_spec spec;
    sp_spec_init(&spec);
    sess_log *log = NULL;
    cJSON *rec_flags = NULL; /* resume: the recorded flags; a's strings point into it */
    char *root = sess_root(a.session_dir);
    dt_err e = {0};
    int status = AG_EXIT_ERROR;
    if (resume) {
        log = sess_log_read(root, a.spec, &e);
        if (log == NULL) {
            fprintf(stderr, "ditto resume: %s\n", e.msg);
            if (cli_session_status(&e) == CLI_NOT_FOUND)
                status = CLI_NOT_FOUND;
            goto out;
        }
        if (log->warnings.len)
            fprintf(stderr, "ditto resume: %s", log->warnings.data);
        if (log->spec == NULL || sp_spec_from_json(&spec, log->spec, "spec.json", &probs) != 0) {
            fprintf(stderr, "ditto resume: the session's spec.json is missing or invalid: %s\n",
                    dt_buf_str(&probs));
            goto out;
        }
        /* The run's own flags, under those given now. */
        rec_flags = sess_log_flags(log->events);
        restore_flags(&a, rec_flags, &probs);
        if (probs.len)
            fprintf(stderr, "ditto resume: %s", probs.data);
        dt_buf_reset(&probs);
    } else if (cli_file_missing(cmd, a.spec)) {
        status = CLI_NOT_FOUND;
        goto out;
    } else if (sp_spec_load(&spec, a.spec, &probs) != 0) {
        fputs(dt_buf_str(&probs), stderr);
        status = AG_EXIT_USAGE;
        goto out;
    }
    if (cli_check_spec_gpu(cmd, resume ? "the session's spec.json" : a.spec, spec.gpu) != 0) {
        status = AG_EXIT_USAGE;
        goto out;
    }
    const char *backend = a.backend ? a.backend : dt_json_str(cfg, "backend", spec.backend);
    llm_config lc;
    llm_config_init(&lc);
    int have_llm = 0;
    if (dt_streq(backend, "llm")) {
        if (cli_llm_settings(cmd, cfg, &a.llm, &lc) != 0) {
            llm_config_clear(&lc);
            status = AG_EXIT_USAGE;
            goto out;
        }
        have_llm = 1;
    }
    dt_loop *loop = dt_loop_new();
    const cJSON *wj = cJSON_GetObjectItem(cfg, "workers");
    gpu_pool_opts po = {.workers = a.workers ? a.workers : dt_json_int(wj, "count", 1),
                        .launcher = a.launcher ? a.launcher : dt_json_str(wj, "launcher", NULL),
                        .ship = cli_ship_mode(wj),
                        .deadline_s =
                            a.deadline > 0 ? a.deadline : dt_json_num(wj, "deadline_s", 600),
                        .max_deadline_s = a.deadline,
                        .log = quiet_worker_log};
    gpu_pool *pool = gpu_pool_new(loop, &po, &e);
    if (pool == NULL) {
        fprintf(stderr, "ditto %s: %s\n", cmd, e.msg);
        dt_loop_free(loop);
        llm_config_clear(&lc);
        goto out;
    }
    kb *k = kb_open(NULL, NULL, &probs, &e);
    if (probs.len)
        fprintf(stderr, "ditto: knowledge base: %s", probs.data);
    dt_buf_reset(&probs);
    cli_lua lua = {.L = cli_lua_open(a.lua_unsafe, a.hooks, a.nhooks), .prefix = "ditto: "};
    ag_opts o = {.spec = &spec,
                 .pool = pool,
                 .backend = backend,
                 .out_dir = a.out,
                 .llm_config = have_llm ? &lc : NULL,
                 .kb = k,
                 .verbose = a.verbose,
                 .goal_speedup = a.goal > 0 ? a.goal : dt_json_num(cfg, "goal_speedup", 1.0),
                 .max_iterations = dt_json_int(cfg, "max_iterations", 8),
                 .tune_budget_variants =
                     a.tune_variants
                         ? a.tune_variants
                         : dt_json_int(cJSON_GetObjectItem(cfg, "tune"), "variants", 24),
                 .tune_budget_s = dt_json_num(cJSON_GetObjectItem(cfg, "tune"), "seconds", 120),
                 .max_reviews = a.max_reviews ? a.max_reviews : dt_json_int(cfg, "max_reviews", 10)};
    cli_review_policy(&o, &spec, a.review);
    cli_lua_attach(&o, &lua);
    cli_session_sink ss = {.root = root};
    cJSON *flags = cli_run_flags_json(&a);
    o.flags = flags;
    ag_run *run = NULL;
    int have_run = 0;
    printer pr = {.verbose = a.verbose, .json = a.json, .tty_in = isatty(0), .loop = loop};
    if (resume && !a.no_session) {
        ss.s = sess_open(root, a.spec, &e);
        if (ss.s == NULL)
            cli_session_refused(cmd, e.msg);
    } else if (!a.no_session) {
        /* Created before the run, so that its id is known to the run (the
         * knowledge base's evidence names it); the message is printed there. */
        ss.s = cli_session_create(cmd, root, &spec, pool);
    }
    if (!a.no_session && ss.s == NULL) {
        status = AG_EXIT_UNRECORDED;
        goto done;
    }
    o.session_dir = ss.s ? sess_dir(ss.s) : NULL;
    o.session_id = ss.s ? sess_id(ss.s) : NULL;
    run = ag_run_new(loop, &o, &e);
    if (run == NULL) {
        fprintf(stderr, "ditto %s: %s\n", cmd, e.msg);
    } else {
        have_run = 1;
        pr.run = run;
        ag_add_sink(run, print_event, &pr);
        if (!a.no_session)
            ag_add_sink(run, cli_session_event, &ss);
        dt_loop_add_fd(loop, 0, DT_READABLE, on_stdin, &pr);
        if (ag_run_start(run, log ? log->events : NULL, &e) != 0) {
            fprintf(stderr, "ditto %s: %s\n", cmd, e.msg);
        } else {
            while (!ag_run_done(run))
                if (dt_loop_run_once(loop, 500) < 0)
                    break;
            status = ag_run_exit_code(run);
        }
    }
    dt_loop_del_fd(loop, 0, 0);
    ag_run_free(run);
done:
    if (ss.s && !ss.failed && sess_sync(ss.s, &e) != 0) {
        fprintf(stderr, "ditto: session: %s\n", e.msg);
        ss.failed = 1;
    }
    if (ss.s && (ss.failed || ss.incomplete)) {
        /* Never let the person believe the results are in the session. */
        fprintf(stderr,
                "ditto %s: recording stopped: session %s (%s) is incomplete; the run itself "
                "ended with status %d. Free space or make the folder writable, then `ditto "
                "resume %s` re-runs what is missing.\n",
                cmd, sess_id(ss.s), sess_dir(ss.s), status, sess_id(ss.s));
        if (!a.json) /* --json keeps stdout JSON Lines: the message is on stderr */
            printf("recording stopped: session %s is incomplete (see stderr)\n", sess_id(ss.s));
        status = AG_EXIT_UNRECORDED;
    } else if (ss.s && have_run && a.json) { /* the last line of the JSON Lines stream */
        print_session_json(sess_id(ss.s), sess_dir(ss.s));
    } else if (ss.s && have_run) {
        if (status == AG_EXIT_NO_GPU)
            printf("the kernel and its predicted occupancy are in the session\n");
        printf("session: %s (%s)\n", sess_id(ss.s), sess_dir(ss.s));
    }
    if (ss.s)
        sess_close(ss.s);
    cJSON_Delete(flags);
    dt_buf_free(&pr.queue);
    lx_free(lua.L);
    kb_close(k);
    gpu_pool_free(pool);
    dt_loop_free(loop);
    llm_config_clear(&lc);
out:
    cJSON_Delete(rec_flags);
    sess_log_free(log);
    free(root);
    dt_buf_free(&probs);
    sp_spec_clear(&spec);
    cJSON_Delete(cfg);
    return status;
}

int cli_run(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("run");
    return run_common("run", argc, argv, 0);
}

int cli_resume(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("resume");
    return run_common("resume", argc, argv, 1);
}
