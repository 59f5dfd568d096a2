/* sessions.c -- `ditto sessions`: list the recorded sessions and show one. */
#include "cli/cli.h"
#include "export/export.h"
#include "sessions/sessions.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

const char cli_sessions_usage[] =
    "usage: ditto sessions [--session-dir DIR] [--json]\n"
    "       ditto sessions show ID [--session-dir DIR] [--json] [--events]\n"
    "\n"
    "Every pipeline run is recorded as a session: a folder holding the spec, the\n"
    "hardware and software fingerprint, the event log (events.jsonl) and the\n"
    "artifacts of each step, under $XDG_DATA_HOME/ditto/sessions unless\n"
    "--session-dir says otherwise.\n"
    "\n"
    "  (no subcommand)  a table of the sessions, newest first: id, start time,\n"
    "                   operation, matrix, steps, state (finished, running or\n"
    "                   crashed, empty, corrupted) and the best speedup\n"
    "  show ID          one session: spec, fingerprint, the run's flags (what\n"
    "                   `ditto resume` restores; \"cleared\": what a resume\n"
    "                   --clear dropped), each step with its kind, version,\n"
    "                   status, seconds and artifacts, the result, and the\n"
    "                   artifact files present. ID may also be a folder path\n"
    "\n"
    "  --session-dir DIR  the folder holding the sessions\n"
    "  --json             print JSON instead of text\n"
    "  --events           (show) also print the raw events, one JSON object a line\n"
    "\n"
    "A log cut off by a crash (a partial last line) is shown with a warning; a log\n"
    "with a bad line elsewhere is an error naming events.jsonl and the line.\n";

#define CMD "sessions"

static void print_json(cJSON *j)
{
    char *s = dt_json_print(j, 1);
    dt_buf b = DT_BUF_INIT;
    dt_buf_put_term(&b, s, strlen(s), 1); /* cJSON escapes C0, not DEL or C1 */
    puts(dt_buf_str(&b));
    dt_buf_free(&b);
    free(s);
    cJSON_Delete(j);
}

/* Each line of text on stderr as a warning. */
static void print_warnings(const char *text)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (len > 0)
            {
            char *w = dt_xstrndup(p, (size_t)len);
            fprintf(stderr, "ditto " CMD ": warning: %s\n", dt_tsafe(w));
            free(w);
        }
        p += len + (nl ? 1 : 0);
    }
}

static const char *local_time(double epoch, char *out, size_t cap)
{
    if (epoch <= 0) {
        snprintf(out, cap, "-");
        return out;
    }
    time_t t = (time_t)epoch;
    struct tm tm;
    localtime_r(&t, &tm);
    strftime(out, cap, "%Y-%m-%d %H:%M:%S", &tm);
    return out;
}

/* Long matrix specs keep their tail, where file names are. */
static const char *clip(const char *s, char *out, size_t width)
{
    size_t n = strlen(s);
    if (n <= width)
        snprintf(out, width + 1, "%s", s);
    else
        snprintf(out, width + 1, "...%s", s + n - (width - 3));
    return out;
}

static int list_sessions(const char *root, int json)
{
    sess_info *rows = NULL;
    int n = 0;
    dt_buf warn = DT_BUF_INIT;
    dt_err e = {0};
    if (sess_list(root, &rows, &n, &warn, &e) != 0) {
        fprintf(stderr, "ditto " CMD ": %s\n", dt_tsafe(e.msg));
        dt_buf_free(&warn);
        return CLI_FAIL;
    }
    print_warnings(dt_buf_str(&warn));
    dt_buf_free(&warn);
    if (json) {
        cJSON *arr = dt_json_arr();
        for (int i = 0; i < n; i++) {
            const sess_info *r = &rows[i];
            cJSON *o = dt_json_obj();
            char iso[32];
            dt_json_set_str(o, "id", r->id);
            dt_json_set_str(o, "dir", r->dir);
            if (r->started > 0) {
                dt_json_set_num(o, "started", r->started);
                dt_json_set_str(o, "started_utc", dt_iso_time(r->started, iso, sizeof iso));
            } else {
                dt_json_set_take(o, "started", cJSON_CreateNull());
            }
            dt_json_set_str(o, "op", r->op);
            dt_json_set_str(o, "matrix", r->matrix);
            dt_json_set_int(o, "steps", r->steps);
            dt_json_set_str(o, "state", r->state);
            if (r->best_speedup > 0)
                dt_json_set_num(o, "best_speedup", r->best_speedup);
            else
                dt_json_set_take(o, "best_speedup", cJSON_CreateNull());
            cJSON_AddItemToArray(arr, o);
        }
        print_json(arr);
        free(rows);
        return CLI_OK;
    }
    if (n == 0) {
        char *r = sess_root(root);
        printf("no sessions under %s\n", r ? dt_tsafe(r) : "(unknown)");
        free(r);
        free(rows);
        return CLI_OK;
    }
    printf("%-22s %-19s %-6s %-40s %5s  %-19s %s\n", "ID", "STARTED", "OP", "MATRIX", "STEPS",
           "STATE", "BEST");
    for (int i = 0; i < n; i++) {
        const sess_info *r = &rows[i];
        char when[32], mat[41], best[32];
        if (r->best_speedup > 0)
            snprintf(best, sizeof best, "%.2fx", r->best_speedup);
        else
            snprintf(best, sizeof best, "-");
        printf("%-22s %-19s %-6s %-40s %5d  %-19s %s\n", dt_tsafe(r->id),
               local_time(r->started, when, sizeof when), r->op[0] ? dt_tsafe(r->op) : "-",
               dt_tsafe(clip(r->matrix[0] ? r->matrix : "-", mat, 40)), r->steps,
               dt_tsafe(r->state), best);
    }
    free(rows);
    return CLI_OK;
}

/* ---- show --------------------------------------------------------------- */

/* The artifact files in a session folder: everything but the store's own
 * files, hidden entries and temporary files left by an interrupted write. */
static cJSON *folder_files(const char *dir)
{
    cJSON *files = dt_json_arr();
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    for (int i = 0; i < n; i++) {
        const char *f = names[i]->d_name;
        char *p = dt_xasprintf("%s/%s", dir, f);
        struct stat st;
        if (f[0] != '.' && strcmp(f, "spec.json") != 0 && strcmp(f, "fingerprint.json") != 0 &&
            strcmp(f, "events.jsonl") != 0 && strstr(f, ".tmp.") == NULL && stat(p, &st) == 0 &&
            S_ISREG(st.st_mode)) {
            cJSON *o = dt_json_obj();
            dt_json_set_str(o, "name", f);
            dt_json_set_int(o, "bytes", (int64_t)st.st_size);
            cJSON_AddItemToArray(files, o);
        }
        free(p);
        free(names[i]);
    }
    free(names);
    return files;
}

/* The file holding an artifact event's content: NAME_vVERSION.* or NAME.*. */
static const char *artifact_file(const cJSON *files, const char *name, int version)
{
    char pre[300];
    if (version > 0)
        snprintf(pre, sizeof pre, "%s_v%d.", name, version);
    else
        snprintf(pre, sizeof pre, "%s.", name);
    const cJSON *f;
    cJSON_ArrayForEach(f, files)
    {
        const char *fn = dt_json_str(f, "name", "");
        if (dt_startswith(fn, pre))
            return fn;
    }
    return NULL;
}

static cJSON *find_step(cJSON *steps, double id)
{
    cJSON *s;
    cJSON_ArrayForEach(s, steps)
    {
        if (dt_json_num(s, "step", -1) == id)
            return s;
    }
    return NULL;
}

/* Fold the events into one object per step. */
static cJSON *build_steps(const sess_log *l, const cJSON *files)
{
    cJSON *steps = dt_json_arr();
    const cJSON *ev;
    cJSON_ArrayForEach(ev, l->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        double id = dt_json_num(ev, "step", -1);
        if (id < 0)
            continue;
        cJSON *st = find_step(steps, id);
        if (strcmp(type, "step_started") == 0 && st == NULL) {
            st = dt_json_obj();
            dt_json_set_num(st, "step", id);
            dt_json_set_str(st, "kind", dt_json_str(ev, "kind", "?"));
            dt_json_set_num(st, "version", dt_json_num(ev, "version", 0));
            dt_json_set_str(st, "agent", dt_json_str(ev, "agent", ""));
            dt_json_set_str(st, "status", "running");
            dt_json_set_take(st, "seconds", cJSON_CreateNull());
            dt_json_set_take(st, "artifacts", dt_json_arr());
            cJSON_AddItemToArray(steps, st);
            continue;
        }
        if (st == NULL)
            continue;
        if (strcmp(type, "awaiting_review") == 0) {
            dt_json_set_str(st, "status", "awaiting review");
        } else if (strcmp(type, "step_finished") == 0) {
            dt_json_set_str(st, "status", dt_json_str(ev, "status", "?"));
            dt_json_set_num(st, "seconds", dt_json_num(ev, "seconds", 0));
        } else if (strcmp(type, "artifact") == 0) {
            const char *name = dt_json_str(ev, "name", "?");
            int version = dt_json_int(ev, "version", 0);
            cJSON *arts = cJSON_GetObjectItem(st, "artifacts");
            cJSON *a = NULL;
            cJSON *it;
            cJSON_ArrayForEach(it, arts)
            {
                /* an edit replaces the step's artifact of that name */
                if (dt_streq(dt_json_str(it, "name", ""), name) &&
                    dt_json_num(it, "version", 0) == version)
                    a = it;
            }
            if (a == NULL) {
                a = dt_json_obj();
                dt_json_set_str(a, "name", name);
                dt_json_set_int(a, "version", version);
                cJSON_AddItemToArray(arts, a);
            }
            const char *file = artifact_file(files, name, version);
            if (file)
                dt_json_set_str(a, "file", file);
            else
                dt_json_set_take(a, "file", cJSON_CreateNull());
        }
    }
    if (l->finished) {
        cJSON *st;
        cJSON_ArrayForEach(st, steps)
        {
            if (dt_streq(dt_json_str(st, "status", ""), "running"))
                dt_json_set_str(st, "status", "unfinished");
        }
    }
    return steps;
}

/* The state words of `ditto sessions` (sess_list) for one log. */
static const char *log_state(const sess_log *l)
{
    if (l->finished)
        return "finished";
    if (cJSON_GetArraySize(l->events) == 0)
        return "empty";
    int resumable = 0; /* ended on a failure that was not a person's decision */
    const cJSON *ev;
    cJSON_ArrayForEach(ev, l->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (strcmp(type, "session_finished") == 0)
            resumable = dt_json_bool(cJSON_GetObjectItem(ev, "result"), "resumable", 0);
        else if (strcmp(type, "session_resumed") == 0)
            resumable = 0;
    }
    return resumable ? "stopped, resumable" : "running or crashed";
}

static const cJSON *result_of(const sess_log *l)
{
    const cJSON *ev, *res = NULL;
    cJSON_ArrayForEach(ev, l->events)
    {
        if (dt_streq(dt_json_str(ev, "type", ""), "session_finished"))
            res = cJSON_GetObjectItem(ev, "result");
    }
    return res;
}

static void print_object(const char *title, const cJSON *o)
{
    printf("%s\n", title);
    if (o == NULL) {
        printf("  (missing)\n");
        return;
    }
    const cJSON *it;
    cJSON_ArrayForEach(it, o)
    {
        if (cJSON_IsString(it)) {
            printf("  %-14s %s\n", dt_tsafe(it->string), dt_tsafe(it->valuestring));
        } else {
            char *s = dt_json_print(it, 0);
            printf("  %-14s %s\n", dt_tsafe(it->string), dt_tsafe(s));
            free(s);
        }
    }
}

static void show_text(const sess_log *l, const cJSON *steps, const cJSON *files, int events)
{
    char when[32];
    const cJSON *first = cJSON_GetArrayItem(l->events, 0);
    int nev = cJSON_GetArraySize(l->events);
    const cJSON *last = cJSON_GetArrayItem(l->events, nev - 1);
    printf("session        %s\n", dt_tsafe(l->id));
    printf("folder         %s\n", dt_tsafe(l->dir));
    printf("state          %s%s\n", log_state(l),
           l->truncated ? " (the last line was cut off mid-write)" : "");
    printf("started        %s\n", local_time(dt_json_num(first, "t", 0), when, sizeof when));
    printf("events         %d (last seq %.0f)\n", nev, dt_json_num(last, "seq", 0));
    print_object("spec", l->spec);
    print_object("fingerprint", l->fingerprint);
    cJSON *flags = sess_log_flags(l->events);
    if (flags)
        print_object("flags (what ditto resume restores)", flags);
    cJSON_Delete(flags);
    printf("steps\n");
    if (cJSON_GetArraySize(steps) == 0)
        printf("  (none)\n");
    else
        printf("  %4s  %-10s %4s  %-16s %9s  %s\n", "STEP", "KIND", "VER", "STATUS", "SECONDS",
               "ARTIFACTS");
    const cJSON *st;
    cJSON_ArrayForEach(st, steps)
    {
        dt_buf arts = DT_BUF_INIT;
        const cJSON *a;
        cJSON_ArrayForEach(a, cJSON_GetObjectItem(st, "artifacts"))
        {
            const char *file = dt_json_str(a, "file", NULL);
            dt_buf_printf(&arts, "%s%s", arts.len ? ", " : "", dt_json_str(a, "name", ""));
            if (dt_json_num(a, "version", 0) > 0)
                dt_buf_printf(&arts, " v%.0f", dt_json_num(a, "version", 0));
            dt_buf_printf(&arts, " (%s)", file ? file : "in the log only");
        }
        char secs[32];
        const cJSON *sv = cJSON_GetObjectItem(st, "seconds");
        if (cJSON_IsNumber(sv))
            snprintf(secs, sizeof secs, "%.2f", sv->valuedouble);
        else
            snprintf(secs, sizeof secs, "-");
        printf("  %4.0f  %-10s %4.0f  %-16s %9s  %s\n", dt_json_num(st, "step", 0),
               dt_tsafe(dt_json_str(st, "kind", "?")), dt_json_num(st, "version", 0),
               dt_tsafe(dt_json_str(st, "status", "?")), secs, arts.len ? dt_tsafe(arts.data) : "-");
        dt_buf_free(&arts);
    }
    const cJSON *res = result_of(l);
    if (res) {
        const cJSON *best = cJSON_GetObjectItem(res, "best");
        printf("result         %s", dt_json_bool(res, "verified", 0) ? "verified" : "not verified");
        if (best)
            printf(", best v%.0f: %.2f us, %.2fx vs cuSPARSE, %.1f GB/s",
                   dt_json_num(best, "version", 0), dt_json_num(best, "us", 0),
                   dt_json_num(best, "speedup", 0), dt_json_num(best, "gbps", 0));
        printf(" (exit %.0f%s%s)\n", dt_json_num(res, "exit", 0),
               dt_json_str(res, "reason", NULL) ? ": " : "", dt_tsafe(dt_json_str(res, "reason", "")));
    }
    printf("files\n");
    if (cJSON_GetArraySize(files) == 0)
        printf("  (no artifact files)\n");
    const cJSON *f;
    cJSON_ArrayForEach(f, files)
    {
        char sz[32];
        printf("  %-30s %s\n", dt_tsafe(dt_json_str(f, "name", "")),
               dt_fmt_bytes(dt_json_num(f, "bytes", 0), sz, sizeof sz));
    }
    if (events) {
        printf("events\n");
        const cJSON *ev;
        cJSON_ArrayForEach(ev, l->events)
        {
            char *s = dt_json_print(ev, 0);
            printf("%s\n", dt_tsafe(s));
            free(s);
        }
    }
}

static int show_session(const char *root, const char *id, int json, int events)
{
    dt_err e = {0};
    sess_log *l = sess_log_read(root, id, &e);
    if (l == NULL) {
        /* an unknown id: point at the listing */
        if (e.code == SESS_ENOTFOUND && dt_startswith(e.msg, "no session '"))
            fprintf(stderr, "ditto " CMD ": %s (ditto sessions lists them)\n", dt_tsafe(e.msg));
        else
            fprintf(stderr, "ditto " CMD ": %s\n", dt_tsafe(e.msg));
        return cli_session_status(&e);
    }
    print_warnings(dt_buf_str(&l->warnings));
    cJSON *files = folder_files(l->dir);
    cJSON *steps = build_steps(l, files);
    if (json) {
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "id", l->id);
        dt_json_set_str(o, "dir", l->dir);
        dt_json_set_str(o, "state", log_state(l));
        dt_json_set_bool(o, "truncated", l->truncated);
        dt_json_set_take(o, "spec", l->spec ? cJSON_Duplicate(l->spec, 1) : cJSON_CreateNull());
        dt_json_set_take(o, "fingerprint",
                         l->fingerprint ? cJSON_Duplicate(l->fingerprint, 1) : cJSON_CreateNull());
        cJSON *flags = sess_log_flags(l->events);
        dt_json_set_take(o, "flags", flags ? flags : cJSON_CreateNull());
        dt_json_set_take(o, "steps", steps);
        const cJSON *res = result_of(l);
        dt_json_set_take(o, "result", res ? cJSON_Duplicate(res, 1) : cJSON_CreateNull());
        dt_json_set_take(o, "files", files);
        cJSON *w = dt_json_arr();
        const char *p = dt_buf_str(&l->warnings);
        while (*p) {
            const char *nl = strchr(p, '\n');
            size_t len = nl ? (size_t)(nl - p) : strlen(p);
            char *line = dt_xstrndup(p, len);
            cJSON_AddItemToArray(w, cJSON_CreateString(line));
            free(line);
            p += len + (nl ? 1 : 0);
        }
        dt_json_set_take(o, "warnings", w);
        if (events)
            dt_json_set_take(o, "events", cJSON_Duplicate(l->events, 1));
        print_json(o);
    } else {
        show_text(l, steps, files, events);
        cJSON_Delete(steps);
        cJSON_Delete(files);
    }
    sess_log_free(l);
    return CLI_OK;
}

int cli_sessions(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage(CMD);
    const char *dir = NULL, *id = NULL;
    int json = 0, events = 0, show = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--events") == 0) {
            events = 1;
        } else if (strcmp(a, "--session-dir") == 0) {
            if (i + 1 >= argc || argv[i + 1][0] == '\0')
                return cli_usage_error(CMD, "--session-dir needs a folder");
            dir = argv[++i];
        } else if (dt_startswith(a, "--session-dir=")) {
            dir = a + strlen("--session-dir=");
            if (*dir == '\0')
                return cli_usage_error(CMD, "--session-dir needs a folder");
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        } else if (!show && strcmp(a, "show") == 0) {
            show = 1;
        } else if (show && id == NULL) {
            id = a;
        } else if (show) {
            return cli_usage_error(CMD, "one session at a time (got '%s' and '%s')", id, a);
        } else {
            return cli_usage_error(CMD, "unknown subcommand '%s' (try 'show ID')", a);
        }
    }
    if (show && id == NULL)
        return cli_usage_error(CMD, "show needs a session id (ditto sessions lists them)");
    if (!show && events)
        return cli_usage_error(CMD, "--events goes with 'show ID'");
    if (dir == NULL) {
        char *root = sess_root(NULL);
        if (root == NULL && (!show || strchr(id, '/') == NULL)) {
            fprintf(stderr, "ditto " CMD ": no session folder: neither XDG_DATA_HOME nor HOME "
                            "is set (give --session-dir)\n");
            return CLI_FAIL;
        }
        free(root);
    }
    return show ? show_session(dir, id, json, events) : list_sessions(dir, json);
}

/* ---- ditto export (the export/ module does the work) ---- */

const char cli_export_usage[] =
    "usage: ditto export SESSION --out DIR [--version N] [--session-dir DIR] [--force]\n"
    "                    [--no-matrix]\n"
    "\n"
    "Write a session's best kernel as a standalone project in DIR:\n"
    "  kernel.cu    the kernel with ditto.cuh inlined and, defined at the top, the dtype and\n"
    "               epilogue macros, its parameters and its contract's defines evaluated on\n"
    "               the session's matrix (the kernel is specialised to that matrix)\n"
    "  harness.cu   reads a Matrix Market file, runs the kernel under its launch contract,\n"
    "               checks every output against an fp64 CPU reference (ditto's tolerance)\n"
    "               and times it next to the session's best cuSPARSE algorithm with the\n"
    "               session's method (cold: L2 flushed; graph: CUDA-graph replay)\n"
    "  Makefile     `make` builds ./harness with nvcc (ARCH=sm_90 by default); `make run`\n"
    "  README.md    the session's numbers, how they were measured, how to reproduce them\n"
    "  matrix.mtx   the session's matrix, when it was not a Matrix Market file already\n"
    "               (a generator, rep:, .smtx) or format/ was built from it; --no-matrix\n"
    "               skips writing it\n"
    "  format/      for a kernel over another format than CSR or COO: that format's arrays,\n"
    "               built from the session's matrix, one raw NAME.bin each\n"

    "\n"
    "The best kernel is the one the session finished with (session_finished), else the\n"
    "fastest measured version. A session that never measured a kernel still exports its\n"
    "last verified (else compiled, else generated) version, and the README says it was\n"
    "never measured. --version N exports version N instead (`ditto sessions show ID` lists\n"
    "them). A kernel over another format than CSR (sell16, csr16, ell, bins, ...) gets its\n"
    "format built here from the session's matrix, as ditto's worker builds it, into\n"
    "format/ (one raw NAME.bin per array), and matrix.mtx is written so that the harness\n"
    "checks the kernel on exactly that matrix (it refuses another); when the format cannot\n"
    "be built or lacks what the kernel takes, the error names the CSR versions to pick\n"
    "from. DIR must be empty or new\n"
    "unless --force is given (then the files above are overwritten, nothing else).\n"
    "\n"
    "Exit status: 0 exported, 1 nothing could be exported, 2 usage.\n";

int cli_export(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("export");
    const char *id = NULL;
    export_opts o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((strcmp(a, "--out") == 0 || strcmp(a, "--session-dir") == 0 ||
             strcmp(a, "--version") == 0) &&
            i + 1 >= argc)
            return cli_usage_error("export", "%s needs a value", a);
        if (strcmp(a, "--version") == 0) {
            char *end;
            long v = strtol(argv[++i], &end, 10);
            if (*end != '\0' || v < 1 || v > 100000)
                return cli_usage_error("export",
                                       "--version: expected a version number (1, 2, ...)");
            o.version = (int)v;
        } else if (strcmp(a, "--out") == 0)
            o.out = argv[++i];
        else if (strcmp(a, "--session-dir") == 0)
            o.session_dir = argv[++i];
        else if (strcmp(a, "--force") == 0)
            o.force = 1;
        else if (strcmp(a, "--no-matrix") == 0)
            o.no_matrix = 1;
        else if (a[0] == '-' && a[1])
            return cli_usage_error("export", "unknown option '%s'", a);
        else if (id == NULL)
            id = a;
        else
            return cli_usage_error("export", "unexpected argument '%s'", a);
    }
    if (id == NULL)
        return cli_usage_error("export", "give a session id (ditto sessions lists them)");
    if (o.out == NULL || *o.out == '\0')
        return cli_usage_error("export", "give the output folder with --out DIR");
    dt_err e = {0};
    if (export_session(id, &o, &e) == 0)
        return CLI_OK;
    fprintf(stderr, "ditto export: %s\n", e.msg);
    return cli_session_status(&e);
}
