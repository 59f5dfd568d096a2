/* test_crash.c -- kill -9 of a real writer process at chosen and at random
 * moments (between events, mid-line, during create), then reading the log
 * back and resuming it. */
#include "tests/common/testutil.h"
#include "tests/sessions/sesstest.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const double base = 1.8e9;

static int is_boundary(long seq)
{
    int pos = (int)((seq - 1) % ST_STEP_EVENTS);
    return pos == 4 || pos == 5; /* decision, step_finished */
}

/* The writer: create a session, append events 1..k like the orchestrator,
 * optionally start event k+1 with half its line (what a process killed
 * inside write(2) leaves), then SIGKILL itself. No Criterion asserts here:
 * a failure exits with a code that the parent reports. */
static void writer_child(const char *root, long k, int half)
{
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    dt_err e = {0};
    sess *s = sess_create(root, spec, fp, &e);
    if (s == NULL)
        _exit(10);
    if (st_run(s, 1, k, base, &e) != 0)
        _exit(11);
    if (half) {
        char *line = st_line(k + 1, base);
        char *path = dt_xasprintf("%s/events.jsonl", sess_dir(s));
        int fd = open(path, O_WRONLY | O_APPEND);
        size_t n = strlen(line) / 2;
        if (fd < 0 || write(fd, line, n) != (ssize_t)n)
            _exit(12);
    }
    raise(SIGKILL);
    _exit(13);
}

static void expect_killed(pid_t pid)
{
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "writer %s %d",
              WIFEXITED(st) ? "exited with" : "died of signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* The one session under root, or NULL when the writer died before it was
 * published. No listing warnings either way. */
static char *only_session(const char *root)
{
    sess_info *rows = NULL;
    int n = 0;
    dt_buf warn = DT_BUF_INIT;
    dt_err e = {0};
    cr_assert_eq(sess_list(root, &rows, &n, &warn, &e), 0, "%s", e.msg);
    cr_assert_str_eq(dt_buf_str(&warn), "", "listing after a crash");
    cr_assert(n <= 1);
    char *dir = n ? dt_xstrdup(rows[0].dir) : NULL;
    if (n)
        cr_assert_str_eq(rows[0].state,
                         rows[0].steps || rows[0].started ? "running or crashed" : "empty");
    free(rows);
    dt_buf_free(&warn);
    return dir;
}

/* Every event read back is the one written, in order, and every artifact
 * an event names is on disk with its content. Returns the event count. */
static long check_prefix(const sess_log *l)
{
    long n = cJSON_GetArraySize(l->events);
    for (long i = 1; i <= n; i++) {
        cJSON *want = st_event(i, base);
        cr_assert(cJSON_Compare(cJSON_GetArrayItem(l->events, (int)i - 1), want, 1),
                  "event %ld differs", i);
        cJSON_Delete(want);
        char name[64];
        if (st_artifact_name(i, name, sizeof name)) {
            char *p = dt_xasprintf("%s/%s", l->dir, name);
            char *got = dt_read_file(p, NULL, NULL);
            char *text = st_artifact_text(i);
            cr_assert_not_null(got, "event %ld names %s, which is missing", i, name);
            cr_assert_str_eq(got, text, "%s", name);
            free(text);
            free(got);
            free(p);
        }
    }
    return n;
}

/* Resume after the crash: the numbering goes on from n, the file ends up
 * exactly the lines of events 1..n+more and reads back without warnings. */
static void resume_and_check(const char *dir, long n, int truncated)
{
    dt_err e = {0};
    sess *s = sess_open(NULL, dir, &e);
    cr_assert_not_null(s, "sess_open after the crash: %s", e.msg);
    cr_assert_eq(sess_next_seq(s), n + 1);
    if (truncated)
        cr_assert(strstr(sess_warnings(s), "partial last line"), "%s", sess_warnings(s));
    else
        cr_assert_str_eq(sess_warnings(s), "");
    cr_assert_eq(st_run(s, n + 1, n + 8, base, &e), 0, "%s", e.msg);
    sess_close(s);
    dt_buf want = DT_BUF_INIT;
    for (long i = 1; i <= n + 8; i++) {
        char *line = st_line(i, base);
        dt_buf_puts(&want, line);
        free(line);
    }
    char *got = st_log_text(dir);
    cr_assert_str_eq(got, want.data, "the resumed log is not well-formed");
    free(got);
    dt_buf_free(&want);
    sess_log *l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(l->truncated, 0);
    cr_assert_str_eq(dt_buf_str(&l->warnings), "");
    cr_assert_eq(check_prefix(l), n + 8);
    sess_log_free(l);
}

static void kill_at(long k, int half)
{
    char *root = tu_tmpdir();
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0)
        writer_child(root, k, half);
    expect_killed(pid);
    char *dir = only_session(root);
    cr_assert_not_null(dir, "k=%ld: no session", k);
    dt_err e = {0};
    sess_log *l = sess_log_read(NULL, dir, &e);
    cr_assert_not_null(l, "k=%ld half=%d: %s", k, half, e.msg);
    /* everything up to the last step boundary, and (write-through) every
     * event whose write returned */
    long last_boundary = 0;
    for (long i = 1; i <= k; i++) {
        if (is_boundary(i))
            last_boundary = i;
    }
    long n = check_prefix(l);
    cr_assert_geq(n, last_boundary, "k=%ld: lost a finished step", k);
    cr_assert_eq(n, k, "k=%ld half=%d: %ld events read back", k, half, n);
    cr_assert_eq(l->truncated, half);
    if (half) {
        char *want = dt_xasprintf("%s/events.jsonl:%ld: partial last line dropped", dir, k + 1);
        cr_assert(dt_startswith(dt_buf_str(&l->warnings), want), "%s", dt_buf_str(&l->warnings));
        free(want);
    } else {
        cr_assert_str_eq(dt_buf_str(&l->warnings), "");
    }
    sess_log_free(l);
    resume_and_check(dir, k, half);
    free(dir);
    tu_rmtree(root);
    free(root);
}

/* Kill points: the edges of a step (after its first event, after the
 * decision, right after step_finished) and random ones. */
static void kill_points(int half)
{
    long fixed[] = {1, 2, 5, 6, 7, 12};
    for (size_t i = 0; i < DT_ARRAY_LEN(fixed); i++)
        kill_at(fixed[i], half);
    dt_rng r;
    dt_rng_seed(&r, 20261129u + (uint64_t)half);
    for (int i = 0; i < 6; i++)
        kill_at(1 + (long)dt_rng_below(&r, 48), half);
}

Test(crash, kill_between_events_should_lose_nothing_written)
{
    kill_points(0);
}

Test(crash, kill_mid_line_should_leave_a_tolerated_partial_line)
{
    kill_points(1);
}

/* The writer for random kills: events for ever, reporting on the pipe the
 * seq of each step boundary once sess_append (and its fsync) returned. */
static void endless_child(const char *root, int report)
{
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    dt_err e = {0};
    sess *s = sess_create(root, spec, fp, &e);
    if (s == NULL)
        _exit(10);
    for (long i = 1; i < 10000000; i++) {
        if (st_run(s, i, i, base, &e) != 0)
            _exit(11);
        if (is_boundary(i) && write(report, &i, sizeof i) != (ssize_t)sizeof i)
            _exit(12);
    }
    _exit(13);
}

/* Fork the endless writer, let it get through `steps` boundaries (0: none
 * awaited, so the kill can land inside sess_create), wait a random few
 * hundred microseconds more and kill it. Returns the last boundary that it
 * reported. */
static long kill_at_random(const char *root, int steps, dt_rng *r)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        endless_child(root, p[1]);
    }
    close(p[1]);
    long last = 0, seen = 0;
    while (seen < steps) {
        ssize_t got = read(p[0], &last, sizeof last);
        cr_assert_eq(got, (ssize_t)sizeof last, "the writer stopped early");
        seen++;
    }
    struct timespec ts = {0, (long)dt_rng_below(r, 800) * 1000};
    nanosleep(&ts, NULL);
    kill(pid, SIGKILL);
    expect_killed(pid);
    long v;
    while (read(p[0], &v, sizeof v) == (ssize_t)sizeof v)
        last = v;
    close(p[0]);
    return last;
}

Test(crash, kill_at_random_moments_should_keep_a_readable_resumable_log)
{
    /* a new seed each run, named in every failure; DITTO_TEST_SEED replays one
     * (the kill timing still varies) */
    const char *env = getenv("DITTO_TEST_SEED");
    uint64_t seed = env ? strtoull(env, NULL, 10) : (uint64_t)time(NULL);
    dt_rng r;
    dt_rng_seed(&r, seed);
    for (int round = 0; round < 12; round++) {
        char *root = tu_tmpdir();
        /* a third of the rounds may die before or inside sess_create */
        int steps = round % 3 == 0 ? 0 : 1 + (int)dt_rng_below(&r, 10);
        long boundary = kill_at_random(root, steps, &r);
        char *dir = only_session(root);
        if (dir == NULL) {
            cr_assert_eq(steps, 0, "seed %llu round %d: the session vanished",
                         (unsigned long long)seed, round);
            tu_rmtree(root);
            free(root);
            continue;
        }
        dt_err e = {0};
        sess_log *l = sess_log_read(NULL, dir, &e);
        cr_assert_not_null(l, "seed %llu round %d: %s", (unsigned long long)seed, round, e.msg);
        long n = check_prefix(l);
        cr_assert_geq(n, boundary, "seed %llu round %d: step boundary %ld reported, %ld read",
                      (unsigned long long)seed, round, boundary, n);
        int truncated = l->truncated;
        if (truncated)
            cr_assert(strstr(dt_buf_str(&l->warnings), "partial last line"));
        sess_log_free(l);
        resume_and_check(dir, n, truncated);
        free(dir);
        tu_rmtree(root);
        free(root);
    }
}
