/* test_faults.c -- fault injection on the built binary, CPU path: a launcher
 * wrapper (fault-worker.sh) that kills, hangs, garbles or mis-ids the real
 * worker's replies at chosen requests, a worker burning CPU when ditto is
 * killed, read-only session folders, a symlinked log, a disk that fills up
 * (a file size limit, and a tiny tmpfs where one can be mounted), and
 * resumes without a terminal. Each case checks that nothing recorded is lost
 * (the log parses line by line, seq only grows, an earlier log is a prefix of
 * the later one) and that the run ends as a person would expect: the message,
 * the exit status, and whether the session can be resumed. */
#include "tests/common/testutil.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- helpers ------------------------------------------------------------------------------ */

typedef struct fx {
    char *dir;      /* the test's folder: XDG homes, spec, fault state */
    char *spec;     /* DIR/spec.json */
    char *fault;    /* DIR/fault: fault-worker.sh's state */
    char *launcher; /* the wrapper around the real worker */
} fx;

static fx fx_new(const char *review)
{
    fx f;
    f.dir = tu_tmpdir();
    char text[512];
    snprintf(text, sizeof text,
             "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,seed=2\", "
             "\"dtype\": \"fp32\", \"review\": \"%s\"}",
             review);
    f.spec = tu_write(f.dir, "spec.json", text);
    f.fault = dt_xasprintf("%s/fault", f.dir);
    cr_assert_eq(mkdir(f.fault, 0700), 0);
    f.launcher = dt_xasprintf("%s/tests/faults/fault-worker.sh {exe} {device}", tu_src_dir());
    return f;
}

static void fx_free(fx *f)
{
    tu_rmtree(f->dir);
    free(f->dir);
    free(f->spec);
    free(f->fault);
    free(f->launcher);
}

/* The environment of every ditto command of a test (FAULT_* come after). */
#define ENV                                                                              \
    "XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' XDG_CONFIG_HOME='%s/config' FAULT_DIR='%s' "
#define ENVARGS(f) (f)->dir, (f)->dir, (f)->dir, (f)->fault

/* `ditto run SPEC` with the fault wrapper; extra: more arguments, faults:
 * FAULT_* assignments ("" for none). stdin is /dev/null. */
static tu_proc run_faulty(const fx *f, const char *faults, const char *extra)
{
    return tu_run(ENV "%s '%s' run '%s' --launcher '%s' %s < /dev/null", ENVARGS(f), faults,
                  tu_ditto_bin(), f->spec, f->launcher, extra);
}

static tu_proc resume(const fx *f, const char *id, const char *extra)
{
    return tu_run(ENV "'%s' resume '%s' %s < /dev/null", ENVARGS(f), tu_ditto_bin(), id, extra);
}

/* The single session folder under DIR/ditto/sessions. Caller frees. */
static char *only_session(const fx *f)
{
    tu_proc p = tu_run("ls -d '%s'/ditto/sessions/*/ 2>/dev/null", f->dir);
    char *s = dt_xstrdup(p.out);
    tu_proc_free(&p);
    cr_assert(strchr(s, '\n') == strrchr(s, '\n'), "more than one session:\n%s", s);
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '/'))
        s[--n] = '\0';
    cr_assert(n > 0, "no session under %s", f->dir);
    return s;
}

static int sessions_count(const fx *f)
{
    tu_proc p = tu_run("ls -d '%s'/ditto/sessions/*/ 2>/dev/null | wc -l", f->dir);
    int n = atoi(p.out);
    tu_proc_free(&p);
    return n;
}

static char *read_text(const char *path)
{
    char *t = dt_read_file(path, NULL, NULL);
    cr_assert_not_null(t, "cannot read %s", path);
    return t;
}

/* The events of a session, checked: every line whole JSON with a type, seq
 * increasing (nothing recorded is garbled or out of order). */
static cJSON *events_of(const char *sdir)
{
    char *p = dt_xasprintf("%s/events.jsonl", sdir);
    char *text = read_text(p);
    size_t len = strlen(text);
    cr_assert(len == 0 || text[len - 1] == '\n', "%s ends inside a line", p);
    cJSON *arr = cJSON_CreateArray();
    char *save = NULL;
    long last = 0;
    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(l);
        cr_assert_not_null(j, "bad line in %s: %.200s", p, l);
        cr_assert(cJSON_IsString(cJSON_GetObjectItem(j, "type")), "no type: %.200s", l);
        long seq = (long)dt_json_num(j, "seq", 0);
        cr_assert_gt(seq, last, "seq %ld after %ld in %s", seq, last, p);
        last = seq;
        cJSON_AddItemToArray(arr, j);
    }
    free(text);
    free(p);
    return arr;
}

static int count_type(const cJSON *ev, const char *type)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
        n += dt_streq(dt_json_str(e, "type", ""), type);
    return n;
}

/* The last event of a type, or NULL. Borrowed. */
static const cJSON *last_of(const cJSON *ev, const char *type)
{
    const cJSON *found = NULL, *e;
    cJSON_ArrayForEach(e, ev)
        if (dt_streq(dt_json_str(e, "type", ""), type))
            found = e;
    return found;
}

/* step_finished events of a kind (through step_started's step ids) that
 * have ok as given. */
static int steps_finished(const cJSON *ev, const char *kind, int ok)
{
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        if (!dt_streq(dt_json_str(e, "type", ""), "step_finished") ||
            dt_json_bool(e, "ok", 0) != ok)
            continue;
        int id = (int)dt_json_num(e, "step", 0);
        const cJSON *s;
        cJSON_ArrayForEach(s, ev)
            if (dt_streq(dt_json_str(s, "type", ""), "step_started") &&
                (int)dt_json_num(s, "step", -1) == id && dt_streq(dt_json_str(s, "kind", ""), kind))
                n++;
    }
    return n;
}

/* Lines of the fault wrapper's log that start with prefix. */
static int fault_log_count(const fx *f, const char *prefix)
{
    char *p = dt_xasprintf("%s/log", f->fault);
    char *t = dt_read_file(p, NULL, NULL);
    free(p);
    int n = 0;
    size_t pl = strlen(prefix);
    for (char *l = t; l && *l;) {
        n += strncmp(l, prefix, pl) == 0;
        char *nl = strchr(l, '\n');
        l = nl ? nl + 1 : NULL;
    }
    free(t);
    return n;
}

static void assert_resumable_end(const cJSON *ev, int exit_code)
{
    const cJSON *fin = last_of(ev, "session_finished");
    cr_assert_not_null(fin, "no session_finished");
    const cJSON *res = cJSON_GetObjectItem(fin, "result");
    cr_assert_eq((int)dt_json_num(res, "exit", -1), exit_code);
    cr_assert(dt_json_bool(res, "resumable", 0), "the session was closed for good");
}

#define SHOW(p) "exit %d\nstdout:\n%s\nstderr:\n%s", (p).status, (p).out, (p).err

/* ---- worker faults ------------------------------------------------------------------------ */

Test(worker_faults, a_worker_killed_during_compile_should_be_retried_with_the_matrix_reloaded,
     .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc p = run_faulty(&f, "FAULT_REQ=compile FAULT=kill", "");
    cr_assert_eq(p.status, 3, SHOW(p));
    cr_assert(strstr(p.err, "retrying it once on a fresh worker"), "%s", p.err);
    cr_assert_eq(fault_log_count(&f, "FAULT kill compile"), 1);
    cr_assert_eq(fault_log_count(&f, "START"), 2);
    /* the fresh worker got the matrix before the compile */
    cr_assert_eq(fault_log_count(&f, "REQ load_matrix"), 2);
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    cr_assert_eq(steps_finished(ev, "compile", 1), 1);
    cr_assert_eq(steps_finished(ev, "compile", 0), 0);
    cr_assert_eq(count_type(ev, "session_finished"), 1);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_worker_that_dies_twice_should_fail_that_step_only_and_the_run_go_on,
     .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc p = run_faulty(&f, "FAULT_REQ=compile FAULT=kill FAULT_TIMES=2", "");
    /* compile v1 failed (worker exited twice); the coder got it as
     * feedback, and v2 compiled on a worker that had the matrix again */
    cr_assert_eq(p.status, 3, SHOW(p));
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    cr_assert_eq(steps_finished(ev, "compile", 0), 1);
    cr_assert_eq(steps_finished(ev, "compile", 1), 1);
    cr_assert_eq(steps_finished(ev, "generate", 1), 2);
    char *cj = dt_xasprintf("%s/compile_v1.json", sd);
    char *c1 = read_text(cj);
    cr_assert(strstr(c1, "worker exited: signal 9"), "%s", c1);
    cr_assert_eq(fault_log_count(&f, "START"), 3);
    free(c1);
    free(cj);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_worker_killed_while_loading_the_matrix_should_be_retried, .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc p = run_faulty(&f, "FAULT_REQ=load_matrix FAULT=kill", "");
    cr_assert_eq(p.status, 3, SHOW(p));
    cr_assert_eq(fault_log_count(&f, "START"), 2);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_run_ended_by_a_crashing_worker_should_be_resumable, .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc p = run_faulty(&f, "FAULT_REQ=load_matrix FAULT=kill FAULT_TIMES=2", "");
    cr_assert_eq(p.status, 5, SHOW(p));
    cr_assert(strstr(p.out, "worker exited"), "%s", p.out);
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    assert_resumable_end(ev, 5);
    cJSON_Delete(ev);
    char *lp = dt_xasprintf("%s/events.jsonl", sd);
    char *before = read_text(lp);
    tu_proc q = tu_run(ENV "'%s' sessions", ENVARGS(&f), tu_ditto_bin());
    cr_assert(strstr(q.out, "resumable"), SHOW(q));
    tu_proc_free(&q);
    /* the worker behaves now: the run goes on from the failed step */
    q = resume(&f, strrchr(sd, '/') + 1, "");
    cr_assert_eq(q.status, 3, SHOW(q));
    char *after = read_text(lp);
    cr_assert(strncmp(before, after, strlen(before)) == 0, "the first run's events changed");
    ev = events_of(sd);
    cr_assert_eq(steps_finished(ev, "profile", 1), 1);
    cr_assert_eq(steps_finished(ev, "compile", 1), 1);
    cr_assert_eq(count_type(ev, "session_started"), 1);
    cr_assert_eq(count_type(ev, "session_resumed"), 1);
    cJSON_Delete(ev);
    free(before);
    free(after);
    free(lp);
    free(sd);
    tu_proc_free(&q);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_hung_compile_should_time_out_at_the_deadline_given_to_run, .timeout = 100)
{
    fx f = fx_new("auto");
    double t0 = dt_now();
    tu_proc p = run_faulty(&f, "FAULT_REQ=compile FAULT=hang", "--deadline 2");
    double took = dt_now() - t0;
    cr_assert_eq(p.status, 3, SHOW(p));
    cr_assert(took < 30, "took %.1f s: the deadline was not honoured", took);
    char *sd = only_session(&f);
    char *cj = dt_xasprintf("%s/compile_v1.json", sd);
    char *c1 = read_text(cj);
    cr_assert(strstr(c1, "timeout after 2 s"), "%s", c1);
    free(c1);
    free(cj);
    free(sd);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_hung_compile_should_time_out_at_the_deadline_given_to_check,
     .timeout = 100)
{
    fx f = fx_new("auto");
    double t0 = dt_now();
    tu_proc p = tu_run(ENV "FAULT_REQ=compile FAULT=hang '%s' check "
                           "'%s/kernels/spmv_csr_vector.cu' gen:uniform:rows=3000,nnz=30000,seed=2 "
                           "--deadline 2 --launcher '%s' < /dev/null",
                       ENVARGS(&f), tu_ditto_bin(), tu_src_dir(), f.launcher);
    double took = dt_now() - t0;
    cr_assert_eq(p.status, 1, SHOW(p));
    cr_assert(strstr(p.err, "timeout after 2 s"), SHOW(p));
    cr_assert(took < 30, "took %.1f s: the deadline was not honoured", took);
    tu_proc_free(&p);
    fx_free(&f);
}

/* A reply the client must refuse: the worker is killed, restarted, and the
 * request retried on the fresh one. */
static void protocol_case(const char *fault, const char *says)
{
    fx f = fx_new("auto");
    char faults[128];
    snprintf(faults, sizeof faults, "FAULT_REQ=compile FAULT=%s", fault);
    tu_proc p = run_faulty(&f, faults, "");
    cr_assert_eq(p.status, 3, SHOW(p));
    cr_assert(strstr(p.err, "protocol error") && strstr(p.err, says), "%s", p.err);
    cr_assert_eq(fault_log_count(&f, "START"), 2);
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    cr_assert_eq(steps_finished(ev, "compile", 1), 1);
    cr_assert_eq(steps_finished(ev, "compile", 0), 0);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_reply_with_another_id_should_be_a_protocol_error, .timeout = 120)
{
    protocol_case("misid", "reply id 9");
}

Test(worker_faults, a_reply_without_an_id_should_be_a_protocol_error, .timeout = 120)
{
    protocol_case("noid", "without an id");
}

Test(worker_faults, a_garbled_reply_should_be_a_protocol_error, .timeout = 120)
{
    protocol_case("garble", "no JSON object");
}

Test(worker_faults, a_protocol_error_twice_should_fail_the_step_as_such, .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc p = run_faulty(&f, "FAULT_REQ=compile FAULT=misid FAULT_TIMES=2", "");
    cr_assert_eq(p.status, 3, SHOW(p));
    char *sd = only_session(&f);
    char *cj = dt_xasprintf("%s/compile_v1.json", sd);
    char *c1 = read_text(cj);
    cr_assert(strstr(c1, "protocol: protocol error"), "%s", c1);
    free(c1);
    free(cj);
    free(sd);
    tu_proc_free(&p);
    fx_free(&f);
}

Test(worker_faults, a_kernel_fault_should_be_feedback_and_the_matrix_reloaded, .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc p = run_faulty(&f, "FAULT_REQ=compile FAULT=kfault", "");
    cr_assert_eq(p.status, 3, SHOW(p));
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    cr_assert_eq(steps_finished(ev, "compile", 0), 1);
    cr_assert_eq(steps_finished(ev, "compile", 1), 1);
    cr_assert_eq(fault_log_count(&f, "REQ load_matrix"), 2);
    cJSON_Delete(ev);
    free(sd);
    tu_proc_free(&p);
    fx_free(&f);
}

/* 1 while pid runs (a zombie is dead: nobody may be left to reap it). */
static int alive(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    char *t = dt_read_file(path, NULL, NULL);
    if (t == NULL)
        return 0;
    const char *paren = strrchr(t, ')');
    int running = paren && paren[1] == ' ' && paren[2] != 'Z' && paren[2] != 'X';
    free(t);
    return running;
}

/* Start ditto run in the background with a worker that burns CPU at its
 * compile; returns ditto's pid and the burner's. */
static pid_t start_burning(const fx *f, pid_t *burner)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *cmd = dt_xasprintf(ENV "FAULT_REQ=compile FAULT=burn exec '%s' run '%s' "
                                     "--launcher '%s' < /dev/null > '%s/run.out' 2>&1",
                                 ENVARGS(f), tu_ditto_bin(), f->spec, f->launcher, f->dir);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    char *bp = dt_xasprintf("%s/burn.pid", f->fault);
    *burner = 0;
    for (int i = 0; i < 600 && *burner <= 0; i++) {
        usleep(100000);
        char *t = dt_read_file(bp, NULL, NULL);
        if (t)
            *burner = (pid_t)atoi(t);
        free(t);
    }
    free(bp);
    cr_assert_gt(*burner, 0, "the worker never reached its compile");
    usleep(200000); /* let it exec the loop */
    cr_assert(alive(*burner));
    return pid;
}

static void expect_gone(pid_t burner)
{
    int gone = 0;
    for (int i = 0; i < 50 && !gone; i++) {
        gone = !alive(burner);
        if (!gone)
            usleep(100000);
    }
    if (!gone)
        kill(burner, SIGKILL); /* do not leave it burning after the test */
    cr_assert(gone, "worker %d still running after ditto ended", (int)burner);
}

Test(worker_faults, sigterm_to_ditto_should_not_leave_a_worker_burning_cpu, .timeout = 120)
{
    fx f = fx_new("auto");
    pid_t burner;
    pid_t pid = start_burning(&f, &burner);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    expect_gone(burner);
    /* and the session it left behind can be resumed */
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    cr_assert_eq(count_type(ev, "session_finished"), 0);
    cJSON_Delete(ev);
    tu_proc q = resume(&f, strrchr(sd, '/') + 1, "");
    cr_assert_eq(q.status, 3, SHOW(q));
    tu_proc_free(&q);
    free(sd);
    fx_free(&f);
}

Test(worker_faults, kill_9_of_ditto_should_not_leave_a_worker_burning_cpu, .timeout = 120)
{
    fx f = fx_new("auto");
    pid_t burner;
    pid_t pid = start_burning(&f, &burner);
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    expect_gone(burner);
    fx_free(&f);
}

/* ---- session faults ----------------------------------------------------------------------- */

/* Run cmd with path read-only: in a private mount namespace with a
 * read-only bind mount when we are root (root writes through modes), by
 * its mode otherwise. Skips when neither can make it read-only. */
static tu_proc run_readonly(const char *path, const char *cmd)
{
    if (geteuid() == 0) {
        tu_proc probe = tu_run("unshare -m true");
        int ok = probe.status == 0;
        tu_proc_free(&probe);
        if (!ok)
            cr_skip_test("running as root without mount namespaces: cannot make a folder "
                         "read-only");
        return tu_run("unshare -m sh -c \"mount --bind '%s' '%s' && mount -o remount,bind,ro "
                      "'%s' '%s' && %s\"",
                      path, path, path, path, cmd);
    }
    cr_assert_eq(chmod(path, 0555), 0);
    tu_proc p = tu_run("%s", cmd);
    chmod(path, 0755);
    return p;
}

Test(session_faults, a_read_only_session_store_should_stop_the_run_before_any_step,
     .timeout = 120)
{
    fx f = fx_new("auto");
    char *root = dt_xasprintf("%s/ditto/sessions", f.dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    char *cmd = dt_xasprintf(ENV "'%s' run '%s' --launcher '%s' < /dev/null", ENVARGS(&f),
                             tu_ditto_bin(), f.spec, f.launcher);
    tu_proc p = run_readonly(root, cmd);
    cr_assert_eq(p.status, 6, SHOW(p));
    cr_assert(strstr(p.err, "cannot record the session") && strstr(p.err, "--no-session"), "%s",
              p.err);
    cr_assert(strstr(p.out, "profile") == NULL, "a step ran:\n%s", p.out);
    cr_assert_eq(fault_log_count(&f, "REQ load_matrix"), 0);
    tu_proc_free(&p);
    /* an explicit --no-session runs, unrecorded */
    char *cmd2 = dt_xasprintf("%s --no-session", cmd);
    p = run_readonly(root, cmd2);
    cr_assert_eq(p.status, 3, SHOW(p));
    cr_assert_eq(sessions_count(&f), 0);
    tu_proc_free(&p);
    free(cmd2);
    free(cmd);
    free(root);
    fx_free(&f);
}

/* A session stopped at a review nobody answered: resumable. Returns its
 * folder (caller frees). */
static char *stopped_session(fx *f)
{
    tu_proc p = run_faulty(f, "", "--review ask");
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    return only_session(f);
}

Test(session_faults, a_read_only_session_should_not_be_resumed_unrecorded, .timeout = 120)
{
    fx f = fx_new("auto");
    char *sd = stopped_session(&f);
    char *lp = dt_xasprintf("%s/events.jsonl", sd);
    char *before = read_text(lp);
    char *cmd = dt_xasprintf(ENV "'%s' resume '%s' --review auto < /dev/null", ENVARGS(&f),
                             tu_ditto_bin(), strrchr(sd, '/') + 1);
    tu_proc p = run_readonly(sd, cmd);
    cr_assert_eq(p.status, 6, SHOW(p));
    cr_assert(strstr(p.err, "cannot record the session"), "%s", p.err);
    cr_assert(strstr(p.out, "are in the session") == NULL, "%s", p.out);
    cr_assert(strstr(p.out, "generate") == NULL, "a step ran:\n%s", p.out);
    char *after = read_text(lp);
    cr_assert_str_eq(before, after);
    tu_proc_free(&p);
    /* writable again: the same session resumes and finishes */
    p = resume(&f, strrchr(sd, '/') + 1, "--review auto");
    cr_assert_eq(p.status, 3, SHOW(p));
    tu_proc_free(&p);
    free(after);
    free(before);
    free(cmd);
    free(lp);
    free(sd);
    fx_free(&f);
}

Test(session_faults, a_symlinked_log_should_be_refused_and_its_target_untouched, .timeout = 120)
{
    fx f = fx_new("auto");
    char *sd = stopped_session(&f);
    char *lp = dt_xasprintf("%s/events.jsonl", sd);
    /* the target: a copy of the log with a torn last line, which resume
     * would cut off (ftruncate) if it followed the link */
    char *target = dt_xasprintf("%s/elsewhere.jsonl", f.dir);
    char *text = read_text(lp);
    dt_buf b = DT_BUF_INIT;
    dt_buf_printf(&b, "%s{\"type\":\"torn", text);
    dt_err e = {0};
    cr_assert_eq(dt_write_file_atomic(target, b.data, b.len, &e), 0);
    cr_assert_eq(unlink(lp), 0);
    cr_assert_eq(symlink(target, lp), 0);
    tu_proc p = resume(&f, strrchr(sd, '/') + 1, "--review auto");
    cr_assert_neq(p.status, 0, SHOW(p));
    cr_assert_neq(p.status, 3, SHOW(p));
    cr_assert(strstr(p.err, "symbolic link"), "%s", p.err);
    char *now = read_text(target);
    cr_assert_str_eq(now, b.data, "the link's target was modified");
    free(now);
    tu_proc_free(&p);
    dt_buf_free(&b);
    free(text);
    free(target);
    free(lp);
    free(sd);
    fx_free(&f);
}

/* Run cmd (through sh) with RLIMIT_FSIZE at bytes; stdout and stderr go
 * to DIR/limited.out and DIR/limited.err. Returns the exit status. */
static int run_fsize_limited(const fx *f, rlim_t bytes, const char *cmd)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct rlimit rl = {bytes, bytes};
        if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
            _exit(126);
        char *full = dt_xasprintf("%s > '%s/limited.out' 2> '%s/limited.err'", cmd, f->dir, f->dir);
        execl("/bin/sh", "sh", "-c", full, (char *)NULL);
        _exit(127);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* What a full disk must leave: a log that parses to its last line, an exit
 * status and a message that say recording stopped, no claim that the
 * results are in the session, and a session that resumes once there is
 * room again. */
static void check_full_disk_outcome(fx *f, int status, const char *out, const char *err,
                                    const char *sroot)
{
    cr_assert_eq(status, 6, "exit %d\nstdout:\n%s\nstderr:\n%s", status, out, err);
    cr_assert(strstr(err, "recording stopped"), "%s", err);
    cr_assert(strstr(out, "are in the session") == NULL, "%s", out);
    tu_proc q = tu_run("ls -d '%s'/*/ | head -n 1", sroot);
    char *sd = dt_xstrdup(q.out);
    tu_proc_free(&q);
    sd[strcspn(sd, "\n")] = '\0';
    if (sd[0] && sd[strlen(sd) - 1] == '/')
        sd[strlen(sd) - 1] = '\0';
    cr_assert(sd[0], "no session was created");
    cJSON *ev = events_of(sd); /* whole lines only, seq growing */
    cr_assert_gt(cJSON_GetArraySize(ev), 0);
    cr_assert_eq(count_type(ev, "session_finished"), 0);
    cJSON_Delete(ev);
    q = tu_run(ENV "'%s' resume '%s' --review auto < /dev/null", ENVARGS(f), tu_ditto_bin(), sd);
    cr_assert_eq(q.status, 3, "resume after the disk had room: " SHOW(q));
    tu_proc_free(&q);
    ev = events_of(sd);
    cr_assert_eq(count_type(ev, "session_finished"), 1);
    cr_assert_eq(steps_finished(ev, "compile", 1), 1);
    cJSON_Delete(ev);
    free(sd);
}

Test(session_faults, a_file_size_limit_mid_run_should_say_recording_stopped, .timeout = 120)
{
    fx f = fx_new("auto");
    char *cmd = dt_xasprintf(ENV "'%s' run '%s' --launcher '%s' < /dev/null", ENVARGS(&f),
                             tu_ditto_bin(), f.spec, f.launcher);
    /* a whole run's log is about 20 KB: this stops it mid-run */
    int st = run_fsize_limited(&f, 6000, cmd);
    char *op = dt_xasprintf("%s/limited.out", f.dir), *ep = dt_xasprintf("%s/limited.err", f.dir);
    char *out = read_text(op), *err = read_text(ep);
    char *root = dt_xasprintf("%s/ditto/sessions", f.dir);
    check_full_disk_outcome(&f, st, out, err, root);
    free(root);
    free(out);
    free(err);
    free(op);
    free(ep);
    free(cmd);
    fx_free(&f);
}

Test(session_faults, a_full_tmpfs_mid_run_should_say_recording_stopped, .timeout = 120)
{
    fx f = fx_new("auto");
    tu_proc probe = tu_run("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /mnt'");
    int can = probe.status == 0;
    tu_proc_free(&probe);
    if (!can) {
        fx_free(&f);
        cr_skip_test("cannot mount a tmpfs here (the file size limit case covers a full disk)");
    }
    /* a 28 KB tmpfs (7 pages: a page per file) holds the new session and
     * its first artifacts, then fills up; the session is copied out after
     * so that it can be checked and resumed */
    char *root = dt_xasprintf("%s/ditto/sessions", f.dir);
    char *copy = dt_xasprintf("%s/copied", f.dir);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(root, &e), 0);
    cr_assert_eq(dt_mkdir_p(copy, &e), 0);
    tu_proc p = tu_run("unshare -m sh -c \"mount -t tmpfs -o size=28k tmpfs '%s' && " ENV
                       "'%s' run '%s' --launcher '%s' < /dev/null; rc=\\$?; cp -a '%s'/. "
                       "'%s'/ && exit \\$rc\"",
                       root, ENVARGS(&f), tu_ditto_bin(), f.spec, f.launcher, root, copy);
    check_full_disk_outcome(&f, p.status, p.out, p.err, copy);
    tu_proc_free(&p);
    free(copy);
    free(root);
    fx_free(&f);
}

/* ---- sessions and flags --------------------------------------------------------------------- */

Test(session_faults, resume_without_a_terminal_should_not_close_the_session, .timeout = 120)
{
    fx f = fx_new("ask");
    tu_proc p = run_faulty(&f, "", "");
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    char *sd = only_session(&f);
    cJSON *ev = events_of(sd);
    assert_resumable_end(ev, 4);
    cr_assert_str_eq(dt_json_str(last_of(ev, "decision"), "by", ""), "unattended");
    cJSON_Delete(ev);
    const char *id = strrchr(sd, '/') + 1;
    /* again without a terminal: still open, nothing lost */
    p = resume(&f, id, "");
    cr_assert_eq(p.status, 4, SHOW(p));
    cr_assert(strstr(p.out, "stopped by person") == NULL, "%s", p.out);
    tu_proc_free(&p);
    ev = events_of(sd);
    assert_resumable_end(ev, 4);
    cJSON_Delete(ev);
    /* and a person who approves the rest finishes it */
    p = resume(&f, id, "--review auto");
    cr_assert_eq(p.status, 3, SHOW(p));
    tu_proc_free(&p);
    ev = events_of(sd);
    const cJSON *fin = last_of(ev, "session_finished");
    cr_assert_eq((int)dt_json_num(cJSON_GetObjectItem(fin, "result"), "exit", -1), 3);
    cr_assert_eq(count_type(ev, "session_started"), 1);
    cJSON_Delete(ev);
    free(sd);
    fx_free(&f);
}

/* Start `ditto run` with extra flags, a worker hanging in compile, and
 * kill -9 it there: a session cut off mid-step. Returns its folder. */
static char *killed_in_compile(fx *f, const char *extra)
{
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        char *cmd = dt_xasprintf(ENV "FAULT_REQ=compile FAULT=hang exec '%s' run '%s' "
                                     "--launcher '%s' %s < /dev/null > '%s/run.out' 2>&1",
                                 ENVARGS(f), tu_ditto_bin(), f->spec, f->launcher, extra, f->dir);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int hung = 0;
    for (int i = 0; i < 600 && !hung; i++) {
        usleep(100000);
        hung = fault_log_count(f, "FAULT hang compile") > 0;
    }
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(hung, "the run never reached its compile");
    return only_session(f);
}

Test(session_faults, the_runs_flags_should_be_restored_on_resume_and_overridable,
     .timeout = 120)
{
    fx f = fx_new("ask"); /* the spec asks; the person said --review auto */
    char *hook = tu_write(f.dir, "hook.lua",
                          "ditto.on('compile', 'before', function(data)\n"
                          "  ditto.log('hook-ran-before-compile')\nend)\n");
    char *extra = dt_xasprintf("--review auto --backend expert --hook '%s'", hook);
    char *sd = killed_in_compile(&f, extra);
    cJSON *ev = events_of(sd);
    const cJSON *fl = cJSON_GetObjectItem(last_of(ev, "session_started"), "flags");
    cr_assert_str_eq(dt_json_str(fl, "review", ""), "auto");
    cr_assert_str_eq(dt_json_str(fl, "backend", ""), "expert");
    cr_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(fl, "hooks"), 0)->valuestring, hook);
    cJSON_Delete(ev);
    /* no flags on resume: --review auto is restored, so no review waits on
     * the closed stdin */
    tu_proc p = resume(&f, strrchr(sd, '/') + 1, "");
    cr_assert_eq(p.status, 3, SHOW(p));
    tu_proc_free(&p);
    ev = events_of(sd);
    fl = cJSON_GetObjectItem(last_of(ev, "session_resumed"), "flags");
    cr_assert_str_eq(dt_json_str(fl, "review", ""), "auto");
    cr_assert_str_eq(cJSON_GetArrayItem(cJSON_GetObjectItem(fl, "hooks"), 0)->valuestring, hook);
    /* the restored hook ran in the resumed run's compile */
    int after_resume = 0, hooked = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, ev)
    {
        after_resume |= dt_streq(dt_json_str(e, "type", ""), "session_resumed");
        hooked += after_resume && dt_streq(dt_json_str(e, "type", ""), "text") &&
                  strstr(dt_json_str(e, "text", ""), "hook-ran-before-compile") != NULL;
    }
    cr_assert_eq(hooked, 1, "the recorded hook did not run after the resume");
    cJSON_Delete(ev);
    free(sd);
    free(extra);
    free(hook);
    fx_free(&f);
}

Test(session_faults, a_flag_given_to_resume_should_override_and_be_recorded, .timeout = 120)
{
    fx f = fx_new("auto");
    char *sd = killed_in_compile(&f, "--review auto");
    const char *id = strrchr(sd, '/') + 1;
    tu_proc p = resume(&f, id, "--review ask");
    cr_assert_eq(p.status, 4, SHOW(p)); /* asked, and nobody could answer */
    tu_proc_free(&p);
    cJSON *ev = events_of(sd);
    const cJSON *fl = cJSON_GetObjectItem(last_of(ev, "session_resumed"), "flags");
    cr_assert_str_eq(dt_json_str(fl, "review", ""), "ask");
    assert_resumable_end(ev, 4);
    cJSON_Delete(ev);
    /* the next plain resume keeps the latest choice */
    p = resume(&f, id, "");
    cr_assert_eq(p.status, 4, SHOW(p));
    tu_proc_free(&p);
    free(sd);
    fx_free(&f);
}
