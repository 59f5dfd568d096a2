/* test_faults.c -- the durability policy seen from the system calls, and I/O
 * faults injected into them: this executable defines fsync, write and
 * ftruncate, which the store (linked statically) calls instead of libc's;
 * they pass through to libc until a test arms them for one file. */
#include "tests/common/testutil.h"
#include "tests/sessions/sesstest.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const double base = 1.8e9;

/* The file under watch, by identity (the store's descriptors are its own). */
static struct {
    int armed;
    dev_t dev;
    ino_t ino;
    int fsyncs;          /* fsync calls on the watched file */
    int fail_fsync;      /* make them fail with EIO */
    int short_writes;    /* writes to it: accept half, then fail the rest with ENOSPC */
    int fail_write_next; /* state of the above */
    int fail_ftruncate;
} w;

static int watched(int fd)
{
    struct stat st;
    return w.armed && fstat(fd, &st) == 0 && st.st_dev == w.dev && st.st_ino == w.ino;
}

static void watch(const char *path)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0, "%s", path);
    memset(&w, 0, sizeof w);
    w.dev = st.st_dev;
    w.ino = st.st_ino;
    w.armed = 1;
}

int fsync(int fd)
{
    static int (*real)(int);
    if (real == NULL)
        real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    if (watched(fd)) {
        w.fsyncs++;
        if (w.fail_fsync) {
            errno = EIO;
            return -1;
        }
    }
    return real(fd);
}

ssize_t write(int fd, const void *buf, size_t n)
{
    static ssize_t (*real)(int, const void *, size_t);
    if (real == NULL)
        real = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (w.armed && w.short_writes && watched(fd)) {
        if (w.fail_write_next) {
            w.fail_write_next = 0;
            errno = ENOSPC;
            return -1;
        }
        w.fail_write_next = 1;
        return real(fd, buf, n / 2 ? n / 2 : 1);
    }
    return real(fd, buf, n);
}

int ftruncate(int fd, off_t len)
{
    static int (*real)(int, off_t);
    if (real == NULL)
        real = (int (*)(int, off_t))dlsym(RTLD_NEXT, "ftruncate");
    if (w.fail_ftruncate && watched(fd)) {
        errno = EIO;
        return -1;
    }
    return real(fd, len);
}

static char *log_path(const sess *s)
{
    return dt_xasprintf("%s/events.jsonl", sess_dir(s));
}

static void append(sess *s, long seq)
{
    dt_err e = {0};
    cr_assert_eq(st_run(s, seq, seq, base, &e), 0, "event %ld: %s", seq, e.msg);
}

Test(durability, the_log_should_be_fsynced_exactly_at_step_boundaries)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    char *p = log_path(s);
    watch(p);
    /* step 1: started, text, artifact, awaiting_review, decision, finished */
    const int after[] = {0, 0, 0, 0, 1, 2};
    for (long i = 1; i <= 6; i++) {
        append(s, i);
        cr_assert_eq(w.fsyncs, after[i - 1], "after event %ld (%s)", i,
                     i == 5   ? "decision"
                     : i == 6 ? "step_finished"
                              : "within the step");
    }
    /* events outside steps only when they end the session */
    cJSON *ev = cJSON_Parse("{\"seq\":7,\"type\":\"log\",\"level\":\"info\",\"message\":\"x\"}");
    dt_err e = {0};
    cr_assert_eq(sess_append(s, ev, &e), 0, "%s", e.msg);
    cJSON_Delete(ev);
    cr_assert_eq(w.fsyncs, 2);
    ev = cJSON_Parse("{\"seq\":8,\"type\":\"session_finished\",\"result\":{\"exit\":0}}");
    cr_assert_eq(sess_append(s, ev, &e), 0, "%s", e.msg);
    cJSON_Delete(ev);
    cr_assert_eq(w.fsyncs, 3);
    cr_assert_eq(sess_sync(s, &e), 0, "%s", e.msg);
    cr_assert_eq(w.fsyncs, 4);
    w.armed = 0;
    sess_close(s);
    free(p);
    tu_rmtree(root);
    free(root);
}

Test(durability, an_artifact_should_be_durable_before_the_event_naming_it)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    /* the folder's fsync is what makes the rename into it durable */
    watch(sess_dir(s));
    dt_err e = {0};
    cr_assert_eq(sess_write_artifact(s, "plan_v1.json", "{}", 2, &e), 0, "%s", e.msg);
    cr_assert_eq(w.fsyncs, 1);
    /* and a failing folder fsync is reported, not swallowed */
    w.fail_fsync = 1;
    cr_assert_eq(sess_write_artifact(s, "plan_v2.json", "{}", 2, &e), -1);
    cr_assert_eq(e.code, SESS_EIO);
    cr_assert(strstr(e.msg, "fsync"), "%s", e.msg);
    w.armed = 0;
    sess_close(s);
    tu_rmtree(root);
    free(root);
}

Test(durability, a_new_session_should_be_durable_in_its_root)
{
    char *root = tu_tmpdir();
    watch(root);
    sess *s = st_create(root);
    cr_assert_geq(w.fsyncs, 1, "the root was not fsync'd after the rename");
    w.armed = 0;
    sess_close(s);
    /* a failing fsync of the root fails the create and leaves nothing */
    watch(root);
    w.fail_fsync = 1;
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    dt_err e = {0};
    cr_assert_null(sess_create(root, spec, fp, &e));
    cr_assert(strstr(e.msg, "fsync"), "%s", e.msg);
    w.armed = 0;
    sess_info *rows = NULL;
    int n = 0;
    cr_assert_eq(sess_list(root, &rows, &n, NULL, NULL), 0);
    cr_assert_eq(n, 1);
    free(rows);
    cJSON_Delete(spec);
    cJSON_Delete(fp);
    tu_rmtree(root);
    free(root);
}

/* Strict read of dir's log: n events, no warnings. */
static void expect_clean(const char *dir, int n)
{
    dt_err e = {0};
    sess_log *l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(cJSON_GetArraySize(l->events), n);
    cr_assert_eq(l->truncated, 0);
    cr_assert_str_eq(dt_buf_str(&l->warnings), "");
    sess_log_free(l);
}

Test(faults, a_failed_fsync_should_report_but_keep_the_event)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    char *dir = dt_xstrdup(sess_dir(s));
    char *p = log_path(s);
    for (long i = 1; i <= 4; i++)
        append(s, i);
    watch(p);
    w.fail_fsync = 1;
    dt_err e = {0};
    cJSON *ev = st_event(5, base); /* a decision: a boundary */
    cr_assert_eq(sess_append(s, ev, &e), -1);
    cJSON_Delete(ev);
    cr_assert_eq(e.code, SESS_EIO);
    cr_assert(strstr(e.msg, "fsync after decision") && strstr(e.msg, "events.jsonl"), "%s", e.msg);
    cr_assert_eq(sess_next_seq(s), 6, "the event is in the file: its seq is used");
    cr_assert_eq(sess_sync(s, &e), -1);
    cr_assert(strstr(e.msg, "fsync"), "%s", e.msg);
    w.fail_fsync = 0;
    append(s, 6);
    w.armed = 0;
    sess_close(s);
    expect_clean(dir, 6);
    free(dir);
    free(p);
    tu_rmtree(root);
    free(root);
}

Test(faults, a_torn_write_should_be_cut_off_so_the_log_stays_well_formed)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    char *dir = dt_xstrdup(sess_dir(s));
    char *p = log_path(s);
    for (long i = 1; i <= 3; i++)
        append(s, i);
    char *before = st_log_text(dir);
    watch(p);
    w.short_writes = 1;
    dt_err e = {0};
    cJSON *ev = st_event(4, base);
    cr_assert_eq(sess_append(s, ev, &e), -1);
    cr_assert_eq(e.code, SESS_EIO);
    cr_assert(strstr(e.msg, "write") && strstr(e.msg, strerror(ENOSPC)), "%s", e.msg);
    cr_assert_eq(sess_next_seq(s), 4, "a failed event must be retried with its seq");
    char *after = st_log_text(dir);
    cr_assert_str_eq(after, before, "half a line was left in the log");
    /* the disk has room again: the same event goes in whole */
    w.armed = 0;
    cr_assert_eq(sess_append(s, ev, &e), 0, "%s", e.msg);
    cJSON_Delete(ev);
    append(s, 5);
    sess_close(s);
    expect_clean(dir, 5);
    free(before);
    free(after);
    free(dir);
    free(p);
    tu_rmtree(root);
    free(root);
}

Test(faults, a_torn_write_that_cannot_be_undone_should_stop_appends_until_reopened)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    char *dir = dt_xstrdup(sess_dir(s));
    char *p = log_path(s);
    for (long i = 1; i <= 3; i++)
        append(s, i);
    watch(p);
    w.short_writes = 1;
    w.fail_ftruncate = 1;
    dt_err e = {0};
    cJSON *ev = st_event(4, base);
    cr_assert_eq(sess_append(s, ev, &e), -1);
    w.armed = 0;
    /* half a line is now in the file: appending after it would glue the
     * next event onto it */
    dt_err_clear(&e);
    cr_assert_eq(sess_append(s, ev, &e), -1, "appended after a torn line");
    cr_assert(strstr(e.msg, "reopen the session"), "%s", e.msg);
    cJSON_Delete(ev);
    sess_close(s);
    /* reopening is the way out: the torn line is a partial last line */
    s = sess_open(NULL, dir, &e);
    cr_assert_not_null(s, "%s", e.msg);
    cr_assert(strstr(sess_warnings(s), "events.jsonl:4: partial last line"), "%s",
              sess_warnings(s));
    cr_assert_eq(sess_next_seq(s), 4);
    append(s, 4);
    sess_close(s);
    expect_clean(dir, 4);
    free(dir);
    free(p);
    tu_rmtree(root);
    free(root);
}
