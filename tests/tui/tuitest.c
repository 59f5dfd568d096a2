/* tuitest.c -- helpers for the workbench's tests: tmux terminals, a
 * recorded session with measurements, and models fed from events. */
#include "tests/tui/tuitest.h"

#include "hardware/hardware.h"
#include "sessions/sessions.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- tmux ------------------------------------------------------------------ */

/* What the suite's fini stops after a failed test: copies, because a
 * failing assertion unwinds the test's frame, and with it the tt_term. */
static char reg_sock[64];
static char reg_dir[4096];

void tt_init(tt_term *t)
{
    static int counter;
    memset(t, 0, sizeof *t);
    snprintf(t->sock, sizeof t->sock, "ditto-tui-%d-%d", (int)getpid(), ++counter);
    /* a copy in the struct: a failed assertion must not leak it */
    char *d = tu_tmpdir();
    snprintf(t->dir, sizeof t->dir, "%s", d);
    free(d);
}

void tt_start(tt_term *t, int cols, int rows, const char *lang, const char *extra,
              const char *args)
{
    if (t->dir[0] == '\0')
        tt_init(t);
    const char *share = getenv("DITTO_SHARE");
    dt_buf s = DT_BUF_INIT;
    dt_buf_printf(&s,
                  "#!/bin/sh\n"
                  "cd '%s'\n"
                  "unset LC_ALL LC_CTYPE TMUX\n"
                  "export LANG='%s'\n"
                  "export XDG_DATA_HOME='%s/data' XDG_CONFIG_HOME='%s/config' "
                  "XDG_CACHE_HOME='%s/cache'\n"
                  "export DITTO_SHARE='%s'\n"
                  "export ASAN_OPTIONS='detect_leaks=1:abort_on_error=0:log_path=%s/asan'\n"
                  "export UBSAN_OPTIONS='print_stacktrace=1:halt_on_error=1:log_path=%s/ubsan'\n"
                  "%s\n"
                  /* the script outlives a Ctrl-C to report it (a trap, not
                   * an ignore: ditto must not inherit SIG_IGN) */
                  "trap : INT\n"
                  "ulimit -c 0\n"
                  "before=$(stty -g)\n"
                  "'%s' %s\n"
                  "rc=$?\n"
                  "after=$(stty -g)\n"
                  "[ \"$before\" = \"$after\" ] && echo TTY-RESTORED\n"
                  "echo \"DITTO-EXIT $rc\"\n"
                  "exec sleep 300\n",
                  t->dir, lang, t->dir, t->dir, t->dir, share ? share : tu_src_dir(), t->dir,
                  t->dir, extra ? extra : "", tu_ditto_bin(), args);
    char *script = tu_write(t->dir, "run.sh", s.data);
    dt_buf_free(&s);
    tu_proc p = tu_run("env -u TMUX tmux -L %s -f /dev/null new-session -d -s T -x %d -y %d "
                       "'sh %s'",
                       t->sock, cols, rows, script);
    cr_assert_eq(p.status, 0, "tmux new-session: %s", p.err);
    tu_proc_free(&p);
    free(script);
    t->running = 1;
    snprintf(reg_sock, sizeof reg_sock, "%s", t->sock);
    snprintf(reg_dir, sizeof reg_dir, "%s", t->dir);
}

char *tt_screen(tt_term *t)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s capture-pane -p -t T", t->sock);
    free(p.err);
    return p.out;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int tt_wait(tt_term *t, const char *text, double timeout_s)
{
    double until = dt_now() + timeout_s;
    for (;;) {
        char *s = tt_screen(t);
        int found = strstr(s, text) != NULL;
        free(s);
        if (found)
            return 1;
        if (dt_now() > until)
            return 0;
        nap_ms(100);
    }
}

int tt_wait_gone(tt_term *t, const char *text, double timeout_s)
{
    double until = dt_now() + timeout_s;
    for (;;) {
        char *s = tt_screen(t);
        int found = strstr(s, text) != NULL;
        free(s);
        if (!found)
            return 1;
        if (dt_now() > until)
            return 0;
        nap_ms(100);
    }
}

void tt_keys(tt_term *t, const char *keys)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s send-keys -t T %s", t->sock, keys);
    tu_proc_free(&p);
}

void tt_type(tt_term *t, const char *text)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s send-keys -t T -l '%s'", t->sock, text);
    tu_proc_free(&p);
}

void tt_resize(tt_term *t, int cols, int rows)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s resize-window -t T -x %d -y %d", t->sock, cols,
                       rows);
    cr_assert_eq(p.status, 0, "resize-window: %s", p.err);
    tu_proc_free(&p);
}

/* The parent pid and the name from /proc/PID/stat; -1 when gone. */
static int proc_parent(int pid, char *comm, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    char *s = dt_read_file(path, NULL, NULL);
    if (s == NULL)
        return -1;
    char *lp = strchr(s, '('), *rp = strrchr(s, ')');
    int ppid = -1;
    if (lp && rp && rp > lp) {
        snprintf(comm, n, "%.*s", (int)(rp - lp - 1), lp + 1);
        char state;
        if (sscanf(rp + 2, "%c %d", &state, &ppid) != 2)
            ppid = -1;
    }
    free(s);
    return ppid;
}

int tt_ditto_pid(tt_term *t)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s display -p -t T '#{pane_pid}'", t->sock);
    int sh = atoi(p.out);
    tu_proc_free(&p);
    if (sh <= 0)
        return 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    struct dirent *de;
    int found = 0;
    while ((de = readdir(d)) != NULL && !found) {
        int pid = atoi(de->d_name);
        char comm[64] = "";
        if (pid > 0 && proc_parent(pid, comm, sizeof comm) == sh && strcmp(comm, "ditto") == 0)
            found = pid;
    }
    closedir(d);
    return found;
}

void tt_assert_no_sanitizer_reports(tt_term *t)
{
    DIR *d = opendir(t->dir);
    cr_assert_not_null(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (dt_startswith(de->d_name, "asan.") || dt_startswith(de->d_name, "ubsan.")) {
            char *path = dt_xasprintf("%s/%s", t->dir, de->d_name);
            char *text = dt_read_file(path, NULL, NULL);
            closedir(d);
            cr_assert_fail("a sanitizer reported (%s):\n%s", path, text ? text : "?");
            free(text);
            free(path);
            return;
        }
    }
    closedir(d);
}

/* Kill the server on socket name and remove the socket file, which a
 * killed server leaves behind in tmux's folder. */
static void kill_server(const char *sock)
{
    tu_proc p = tu_run("env -u TMUX tmux -L %s kill-server", sock);
    tu_proc_free(&p);
    const char *dir = getenv("TMUX_TMPDIR");
    char *path = dt_xasprintf("%s/tmux-%d/%s", dir && *dir ? dir : "/tmp", (int)getuid(), sock);
    unlink(path);
    free(path);
}

void tt_stop(tt_term *t)
{
    if (t->running) {
        kill_server(t->sock);
        t->running = 0;
    }
    if (t->dir[0]) {
        tu_rmtree(t->dir);
        t->dir[0] = '\0';
    }
    if (strcmp(reg_sock, t->sock) == 0)
        reg_sock[0] = reg_dir[0] = '\0';
}

void tt_fini(void)
{
    if (reg_sock[0])
        kill_server(reg_sock);
    if (reg_dir[0])
        tu_rmtree(reg_dir);
    reg_sock[0] = reg_dir[0] = '\0';
}

/* ---- a recorded session ------------------------------------------------------- */

static const char kernel_v1[] =
    "/* spmv: one thread per row */\n"
    "#define BLOCK 256\n"
    "__global__ void spmv(int rows, const int *rowptr, const int *col,\n"
    "                     const float *val, const float *x, float *y)\n"
    "{\n"
    "    int r = blockIdx.x * BLOCK + threadIdx.x;\n"
    "    if (r >= rows)\n"
    "        return;\n"
    "    float sum = 0;\n"
    "    for (int k = rowptr[r]; k < rowptr[r + 1]; k++)\n"
    "        sum += val[k] * x[col[k]];\n"
    "    y[r] = sum;\n"
    "}\n";

static const char kernel_v2[] =
    "/* spmv: one thread per row */\n"
    "#define BLOCK 128\n"
    "__global__ void spmv(int rows, const int *rowptr, const int *col,\n"
    "                     const float *val, const float *x, float *y)\n"
    "{\n"
    "    int r = blockIdx.x * BLOCK + threadIdx.x;\n"
    "    if (r >= rows)\n"
    "        return;\n"
    "    float sum = 0.0f;\n"
    "    for (int k = rowptr[r]; k < rowptr[r + 1]; k++)\n"
    "        sum += __ldg(&val[k]) * __ldg(&x[col[k]]);\n"
    "    y[r] = sum;\n"
    "}\n";

typedef struct evs {
    cJSON *arr;
    double t;
} evs;

static cJSON *ev(evs *e, const char *type, int step)
{
    cJSON *o = dt_json_obj();
    dt_json_set_int(o, "seq", cJSON_GetArraySize(e->arr) + 1);
    e->t += 0.25;
    dt_json_set_num(o, "t", e->t);
    dt_json_set_str(o, "type", type);
    if (step > 0)
        dt_json_set_int(o, "step", step);
    cJSON_AddItemToArray(e->arr, o);
    return o;
}

static void text(evs *e, int step, const char *s)
{
    dt_json_set_str(ev(e, "text", step), "text", s);
}

static void start(evs *e, int step, const char *kind, int version, const char *agent)
{
    cJSON *o = ev(e, "step_started", step);
    dt_json_set_str(o, "kind", kind);
    dt_json_set_int(o, "version", version);
    dt_json_set_str(o, "agent", agent);
    dt_json_set_take(o, "inputs", dt_json_obj());
}

static void finish(evs *e, int step, double secs)
{
    cJSON *d = ev(e, "decision", step);
    dt_json_set_str(d, "decision", "approve");
    dt_json_set_str(d, "by", "auto");
    dt_json_set_take(d, "reason", cJSON_CreateNull());
    cJSON *f = ev(e, "step_finished", step);
    dt_json_set_str(f, "status", "approved");
    dt_json_set_bool(f, "ok", 1);
    dt_json_set_num(f, "seconds", secs);
    dt_json_set_int(f, "tokens_in", 0);
    dt_json_set_int(f, "tokens_out", 0);
    dt_json_set_num(f, "cost", 0);
}

static void artifact(evs *e, int step, const char *name, int version, cJSON *json,
                     const char *content)
{
    cJSON *o = ev(e, "artifact", step);
    dt_json_set_str(o, "name", name);
    dt_json_set_int(o, "version", version);
    if (content)
        dt_json_set_str(o, "content", content);
    dt_json_set_bool(json, "ok", 1);
    dt_json_set_take(o, "json", json);
}

static cJSON *occupancy(int threads, int regs)
{
    dt_err err = {0};
    hw_spec *g = hw_load("h200", &err);
    cr_assert_not_null(g, "%s", err.msg);
    hw_occ o;
    cr_assert_eq(hw_occupancy(g, threads, regs, 0, 0, HW_CARVEOUT_DEFAULT, 1, &o, &err), 0, "%s",
                 err.msg);
    cJSON *j = hw_occ_json(g, &o);
    hw_spec_free(g);
    return j;
}

static void measurement(evs *e, int step, double us, double speedup, double occ)
{
    cJSON *j = dt_json_obj();
    double min_bytes = 1.2e6, flops = 1.2e5;
    dt_json_set_num(j, "us", us);
    dt_json_set_str(j, "method", "graph");
    dt_json_set_num(j, "min_bytes", min_bytes);
    dt_json_set_num(j, "flops", flops);
    dt_json_set_num(j, "gbps", min_bytes / (us * 1e-6) / 1e9);
    dt_json_set_num(j, "gflops", flops / (us * 1e-6) / 1e9);
    dt_json_set_num(j, "speedup", speedup);
    cJSON *b = dt_json_obj();
    dt_json_set_str(b, "best", "CSR_ALG1");
    dt_json_set_num(b, "us", us * speedup);
    dt_json_set_take(j, "baseline", b);
    cJSON *mt = dt_json_obj();
    dt_json_set_bool(mt, "ok", 1);
    dt_json_set_bool(mt, "available", 1);
    cJSON *m = dt_json_obj();
    dt_json_set_num(m, "sm__warps_active.avg.pct_of_peak_sustained_active", occ);
    dt_json_set_num(m, "dram__bytes_read.sum", 1.3e6);
    dt_json_set_num(m, "dram__bytes_write.sum", 0.1e6);
    dt_json_set_num(m, "lts__t_sector_hit_rate.pct", 61);
    dt_json_set_take(mt, "metrics", m);
    dt_json_set_take(j, "metrics", mt);
    cJSON *rl = dt_json_obj();
    dt_json_set_str(rl, "gpu", "h200");
    dt_json_set_take(j, "roofline", rl);
    dt_json_set_take(ev(e, "measurement", step), "json", cJSON_Duplicate(j, 1));
    artifact(e, step, "measure", 0, j, NULL);
}

cJSON *tt_session_events(void)
{
    evs e = {dt_json_arr(), 1.8e9};
    cJSON *s = ev(&e, "session_started", 0);
    dt_json_set_str(s, "session", "");
    cJSON *spec = dt_json_obj();
    dt_json_set_str(spec, "op", "spmv");
    dt_json_set_str(spec, "matrix", "gen:banded:rows=20000,bw=1");
    dt_json_set_str(spec, "dtype", "fp32");
    dt_json_set_str(spec, "backend", "expert");
    dt_json_set_str(spec, "review", "auto");
    dt_json_set_take(s, "spec", spec);
    cJSON *fp = dt_json_obj();
    dt_json_set_str(fp, "gpu", "NVIDIA H200");
    dt_json_set_str(fp, "cc", "9.0");
    dt_json_set_take(s, "fingerprint", fp);
    dt_json_set_str(s, "backend", "expert");

    start(&e, 1, "profile", 1, "Pattern Profiler");
    text(&e, 1, "gen:banded:rows=20000,bw=1: 20000 x 20000, 59998 nonzeros.\n");
    cJSON *rep = dt_json_obj();
    dt_json_set_take(rep, "report", dt_json_obj());
    artifact(&e, 1, "report", 0, rep, NULL);
    finish(&e, 1, 0.05);

    start(&e, 2, "plan", 1, "Kernel Architect");
    text(&e, 2, "Decision: csr-thread (one thread per row), candidate 1 of 1.\n");
    text(&e, 2, "  because [rule.spmv.sell16-for-regular-rows] Short, regular rows\n");
    cJSON *plan = dt_json_obj();
    dt_json_set_str(plan, "strategy", "csr-thread");
    cJSON *rat = dt_json_arr();
    cJSON *r1 = dt_json_obj();
    dt_json_set_str(r1, "rule", "rule.spmv.sell16-for-regular-rows");
    dt_json_set_str(r1, "text", "Regular short rows: SELL with 16-bit column offsets (sell16-thread)");
    dt_json_set_num(r1, "score", 55);
    cJSON_AddItemToArray(rat, r1);
    dt_json_set_take(plan, "rationale", rat);
    artifact(&e, 2, "plan", 0, plan, NULL);
    finish(&e, 2, 0.01);

    start(&e, 3, "check", 1, "Constraint Checker");
    cJSON *cons = dt_json_obj();
    dt_json_set_take(cons, "occupancy", occupancy(256, 32));
    artifact(&e, 3, "constraints", 0, cons, NULL);
    finish(&e, 3, 0.01);

    start(&e, 4, "generate", 1, "Code Generator");
    cJSON *g1 = dt_json_obj();
    dt_json_set_str(g1, "source", kernel_v1);
    artifact(&e, 4, "kernel", 1, g1, kernel_v1);
    finish(&e, 4, 0.01);

    start(&e, 5, "compile", 1, "Verifier (static)");
    cJSON *d = ev(&e, "diagnostic", 5);
    dt_json_set_str(d, "severity", "warning");
    dt_json_set_str(d, "source", "nvrtc");
    dt_json_set_str(d, "id", "177-D");
    dt_json_set_int(d, "line", 3);
    dt_json_set_str(d, "message", "variable \"unused\" was declared but never referenced");
    dt_json_set_take(d, "hint", cJSON_CreateNull());
    cJSON *c1 = dt_json_obj();
    dt_json_set_take(c1, "occupancy", occupancy(256, 40));
    artifact(&e, 5, "compile", 1, c1, NULL);
    finish(&e, 5, 0.3);

    start(&e, 6, "verify", 1, "Verifier (dynamic)");
    cJSON *v1 = dt_json_obj();
    dt_json_set_bool(v1, "passed", 1);
    artifact(&e, 6, "verify", 1, v1, NULL);
    finish(&e, 6, 1.2);

    start(&e, 7, "measure", 1, "Performance Evaluator");
    measurement(&e, 7, 12.34, 1.37, 96.4);
    finish(&e, 7, 2.0);

    start(&e, 8, "generate", 2, "Code Generator");
    cJSON *g2 = dt_json_obj();
    dt_json_set_str(g2, "source", kernel_v2);
    artifact(&e, 8, "kernel", 2, g2, kernel_v2);
    finish(&e, 8, 0.01);

    start(&e, 9, "measure", 2, "Performance Evaluator");
    measurement(&e, 9, 8.76, 1.93, 88.1);
    finish(&e, 9, 2.0);

    cJSON *fin = ev(&e, "session_finished", 0);
    cJSON *res = dt_json_obj();
    dt_json_set_bool(res, "verified", 1);
    dt_json_set_int(res, "exit", 0);
    dt_json_set_str(res, "reason", "a verified kernel: v2, 8.76 us, 1.93x the best cuSPARSE");
    dt_json_set_take(fin, "result", res);
    return e.arr;
}

char *tt_write_session(const char *root, int *nev)
{
    cJSON *events = tt_session_events();
    const cJSON *first = cJSON_GetArrayItem(events, 0);
    dt_err err = {0};
    sess *s = sess_create(root, cJSON_GetObjectItem(first, "spec"),
                          cJSON_GetObjectItem(first, "fingerprint"), &err);
    cr_assert_not_null(s, "%s", err.msg);
    char *id = dt_xstrdup(sess_id(s));
    cJSON *it;
    cJSON_ArrayForEach(it, events)
    {
        if (dt_streq(dt_json_str(it, "type", ""), "session_started"))
            dt_json_set_str(it, "session", id);
        cr_assert_eq(sess_append(s, it, &err), 0, "%s", err.msg);
    }
    cr_assert_eq(sess_sync(s, &err), 0, "%s", err.msg);
    sess_close(s);
    *nev = cJSON_GetArraySize(events);
    cJSON_Delete(events);
    return id;
}

/* ---- the model ---------------------------------------------------------------- */

void tt_model_from(tui_model *m, const cJSON *events)
{
    tui_model_init(m);
    const cJSON *it;
    cJSON_ArrayForEach(it, events) tui_model_apply(m, it);
}

int tt_lines_find(const tui_lines *l, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (strstr(l->v[i].text, s))
            return i;
    return -1;
}
