/* client.c -- the worker pool: start workers from a launcher template, queue
 * requests, enforce deadlines, turn deaths into precise errors, restart and
 * reload. Runs inside ditto's event loop; loads no CUDA library.
 * Over 1,000 lines: a pool's queue, deadlines, restarts and replays share
 * one state that every reply passes through. */
#include "gpu/gpu.h"
#include "gpu/ship.h"
#include "gpu/cubinstore.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_START_FAILURES 3
/* A worker that dies within this many seconds of its start is restarted
 * after a delay doubling from 0.25 s up to 30 s: a launcher that keeps
 * failing (a node going down, a queue refusing jobs) is not hammered. */
#define QUICK_DEATH_S 10.0
#define BACKOFF_MAX_S 30.0

typedef struct request {
    long id;
    cJSON *req;         /* owned */
    int worker;         /* target, -1 any */
    double deadline_s;
    gpu_reply_fn *fn;
    void *ud;
    int internal;       /* hello / reload sent by the pool itself */
    int retried;        /* already re-sent once after a worker died under it */
    int targeted;       /* the caller named the worker */
    int avoid;          /* a retry: not on this worker while another is up (-1: none) */
    int shipreq;        /* a blob_* request of a shipment */
    int ship_now;       /* a load whose worker said it cannot see the path */
    struct request *next;
} request;

/* W_DYING: it answered kernel_fault and is exiting; it takes no more work. */
typedef enum { W_DOWN, W_STARTING, W_IDLE, W_BUSY, W_DYING } wstate;

typedef struct wproc {
    struct gpu_pool *pool;
    int index;
    pid_t pid;
    int in_fd, out_fd, err_fd;
    wstate state;
    dt_buf out, err;    /* partial lines */
    request *cur;       /* in flight */
    long long timer;    /* deadline timer id, 0 when none */
    double started;
    cJSON *hello;
    int failures;       /* consecutive failed starts */
    int reloads_left;   /* pool loads still to replay after a start */
    char last_error[512];
    int pending_exit;   /* EOF seen, waiting to reap */
    cJSON *fault;       /* a kernel_fault reply already delivered */
    unsigned gen;       /* bumped at each death: a reader of the old pipes stops */
    struct shipment *ship; /* a file being sent to it, NULL */
    char **held;           /* "HASH/NAME" of files it is known to hold */
    int nheld;
    int quick_deaths; /* consecutive deaths soon after a start: the backoff */
    long long restart_timer;
} wproc;

/* A matrix file sent to one worker in chunks (gpu/PROTOCOL.md, "Shipping
 * files"); the load_matrix that needs it waits here until it is stored. */
typedef struct shipment {
    request *load; /* parked, owned */
    char *path;
    char hash[17];
    char name[129];
    int64_t size, sent;
    int fd;
    int stage; /* 0 begin, 1 chunks, 2 end */
    double t0;
    int last_quarter;
} shipment;

/* Content hashes of files already read, by path, size and mtime. */
typedef struct hashed {
    char *path;
    int64_t size;
    long long mtime_ns;
    char hash[17];
    struct hashed *next;
} hashed;

typedef struct loaded {
    char *handle;
    cJSON *req;
    struct loaded *next;
} loaded;

struct gpu_pool {
    dt_loop *loop;
    gpu_pool_opts o;
    char *launcher;
    char exe[4096];
    wproc *w;
    int nw;
    request *queue, *queue_tail;
    long next_id;
    int restarts;
    loaded *loads;
    int closing;
    int remote;    /* the launcher starts workers elsewhere (ssh, srun) */
    char **unseen; /* paths a worker said it cannot see */
    int nunseen;
    hashed *hashes;
    int64_t shipped_bytes;
    int shipments;
    gpu_cubinstore *cubins; /* compiled kernels kept for workers that lack them */
};

static void worker_start(gpu_pool *p, wproc *w);
static void dispatch(gpu_pool *p);
static void queue_front(gpu_pool *p, request *r);
static int path_unseen(const gpu_pool *p, const char *path);
static void ship_over(gpu_pool *p, struct wproc *w, const char *code, const char *msg, int died);
static void forget_held(struct wproc *w);
static void cubins_learn(gpu_pool *p, struct wproc *w, const struct request *r, cJSON *rep);

static void default_log(int worker, const char *line, void *ud)
{
    (void)ud;
    fprintf(stderr, "worker %d: %s\n", worker, line);
}

const char *gpu_reply_error(const cJSON *reply, char *buf, size_t len)
{
    if (reply == NULL)
        return "no reply";
    if (dt_json_bool(reply, "ok", 0))
        return "";
    snprintf(buf, len, "%s: %s", dt_json_str(reply, "error", "error"),
             dt_json_str(reply, "message", ""));
    return buf;
}

static cJSON *make_error(long id, const char *code, const char *msg)
{
    cJSON *r = dt_json_obj();
    dt_json_set_int(r, "id", id);
    dt_json_set_bool(r, "ok", 0);
    dt_json_set_str(r, "error", code);
    dt_json_set_str(r, "message", msg);
    return r;
}

static void finish(gpu_pool *p, request *r, const cJSON *reply)
{
    if (r->fn)
        r->fn(p, reply, r->ud);
    cJSON_Delete(r->req);
    free(r);
}

static void close_fd(gpu_pool *p, int *fd)
{
    if (*fd >= 0) {
        dt_loop_del_fd(p->loop, *fd, 0);
        close(*fd);
        *fd = -1;
    }
}

static void expand(dt_buf *b, const char *tmpl, const char *exe, int device)
{
    for (const char *s = tmpl; *s; s++) {
        if (strncmp(s, "{exe}", 5) == 0) {
            /* Quote the path for the shell. */
            dt_buf_putc(b, '\'');
            for (const char *c = exe; *c; c++) {
                if (*c == '\'')
                    dt_buf_puts(b, "'\\''");
                else
                    dt_buf_putc(b, *c);
            }
            dt_buf_putc(b, '\'');
            s += 4;
        } else if (strncmp(s, "{device}", 8) == 0) {
            dt_buf_printf(b, "%d", device);
            s += 7;
        } else {
            dt_buf_putc(b, *s);
        }
    }
}

static int worker_gone(const wproc *w)
{
    return w->state == W_DOWN && w->failures >= MAX_START_FAILURES;
}

/* Answer the queued requests no worker can ever take: those for a worker
 * that gave up starting, and all of them when every worker did. */
static void fail_unservable(gpu_pool *p)
{
    int alive = 0;
    for (int i = 0; i < p->nw; i++)
        alive += !worker_gone(&p->w[i]);
    request **pp = &p->queue;
    while (*pp) {
        request *q = *pp;
        int target = q->worker >= 0 ? q->worker : -1;
        if ((target >= 0 && worker_gone(&p->w[target])) || alive == 0) {
            *pp = q->next;
            const wproc *w = &p->w[target >= 0 ? target : 0];
            char m[700];
            snprintf(m, sizeof m, "worker %d cannot start: %s", w->index, w->last_error);
            cJSON *rep = make_error(q->id, "worker_start", m);
            finish(p, q, rep);
            cJSON_Delete(rep);
        } else {
            pp = &q->next;
        }
    }
    p->queue_tail = NULL;
    for (request *q = p->queue; q; q = q->next)
        p->queue_tail = q;
}

/* Remove the queued requests the pool made for worker `index` (the hello
 * and matrix replays of a start that did not finish). */
static void drop_internal(gpu_pool *p, int index)
{
    request **pp = &p->queue;
    while (*pp) {
        request *q = *pp;
        if (q->internal && q->worker == index) {
            *pp = q->next;
            cJSON_Delete(q->req);
            free(q);
        } else {
            pp = &q->next;
        }
    }
    p->queue_tail = NULL;
    for (request *q = p->queue; q; q = q->next)
        p->queue_tail = q;
}

/* ---- deaths --------------------------------------------------------------------- */

static void describe_status(int st, char *buf, size_t len)
{
    if (WIFSIGNALED(st))
        snprintf(buf, len, "signal %d", WTERMSIG(st));
    else if (WIFEXITED(st))
        snprintf(buf, len, "status %d", WEXITSTATUS(st));
    else
        snprintf(buf, len, "unknown status");
}

static int other_worker_up(const gpu_pool *p, const wproc *w);

static long restart_later(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    wproc *w = ud;
    w->restart_timer = 0;
    if (!w->pool->closing && w->state == W_DOWN) {
        worker_start(w->pool, w);
        dispatch(w->pool);
    }
    return DT_LOOP_NOMORE;
}

/* The worker is gone (EOF, deadline or cancel): reap it, answer its request
 * if nobody has, and start a new one. why is the message for the request
 * (NULL: derive "worker exited: ..." from the wait status). */
static void worker_died(gpu_pool *p, wproc *w, const char *code, const char *why)
{
    close_fd(p, &w->in_fd);
    close_fd(p, &w->out_fd);
    close_fd(p, &w->err_fd);
    if (w->timer) {
        dt_loop_del_timer(p->loop, w->timer);
        w->timer = 0;
    }
    char status[64] = "unknown status";
    if (w->pid > 0) {
        int st = 0;
        /* Killed process groups die at once; a worker that closed stdout
         * on its own is exiting. Give it a moment, then insist. */
        pid_t r = 0;
        for (int i = 0; i < 200 && (r = waitpid(w->pid, &st, WNOHANG)) == 0; i++)
            usleep(10000);
        if (r == 0) {
            kill(-w->pid, SIGKILL);
            r = waitpid(w->pid, &st, 0);
        }
        if (r == w->pid)
            describe_status(st, status, sizeof status);
        w->pid = -1;
    }
    int was_starting = w->state == W_STARTING;
    int quick = dt_now() - w->started < QUICK_DEATH_S;
    w->state = W_DOWN;
    w->gen++;
    dt_buf_reset(&w->out);
    dt_buf_reset(&w->err);
    request *r = w->cur;
    w->cur = NULL;
    char msg[600];
    if (why == NULL) {
        snprintf(msg, sizeof msg, "worker exited: %s", status);
        why = msg;
        code = "worker_exited";
    }
    /* A restart may land elsewhere (srun): what it held is not assumed. */
    forget_held(w);
    if (w->ship != NULL)
        ship_over(p, w, code, why, dt_streq(code, "worker_exited") || dt_streq(code, "protocol"));
    if (was_starting) {
        w->failures++;
        snprintf(w->last_error, sizeof w->last_error, "%s", why);
    } else {
        w->failures = 0;
    }
    /* Replays queued for this worker and not sent yet: its next start
     * queues them afresh. */
    drop_internal(p, w->index);
    if (r != NULL) {
        if (w->fault != NULL) {
            /* The worker answered kernel_fault and exited as it must: that
             * answer was delivered already. */
            cJSON_Delete(r->req);
            free(r);
        } else if (!r->internal && !r->retried && !p->closing &&
                   w->failures < MAX_START_FAILURES &&
                   (dt_streq(code, "worker_exited") || dt_streq(code, "protocol"))) {
            /* The worker died under the request (a crash, not a deadline or
             * a cancel): once more, on another worker when one is up (a
             * lost node), else on the fresh one after its replays. */
            int elsewhere = !r->targeted && other_worker_up(p, w);
            char m[800];
            snprintf(m, sizeof m, "%s during request %ld ('%s'): retrying it once on %s", why,
                     r->id, dt_json_str(r->req, "req", "?"),
                     elsewhere ? "another worker" : "a fresh worker");
            p->o.log(w->index, m, p->o.log_ud);
            r->retried = 1;
            r->worker = r->targeted ? w->index : -1;
            r->avoid = w->index;
            r->next = p->queue;
            p->queue = r;
            if (p->queue_tail == NULL)
                p->queue_tail = r;
        } else {
            cJSON *rep = make_error(r->id, code, why);
            if (r->retried)
                dt_json_set_bool(rep, "retried", 1);
            finish(p, r, rep);
            cJSON_Delete(rep);
        }
    }
    cJSON_Delete(w->fault);
    w->fault = NULL;
    if (p->closing)
        return;
    if (w->failures >= MAX_START_FAILURES) {
        char m[700];
        snprintf(m, sizeof m, "failed to start %d times, giving up: %s", w->failures,
                 w->last_error);
        p->o.log(w->index, m, p->o.log_ud);
        fail_unservable(p);
        return;
    }
    p->restarts++;
    /* Backoff: a worker that keeps dying soon after its start (or whose
     * launcher keeps failing) waits longer before each new start. */
    w->quick_deaths = quick || was_starting ? w->quick_deaths + 1 : 0;
    if (w->quick_deaths <= 1) {
        worker_start(p, w);
        return;
    }
    double delay = 0.25;
    for (int k = 2; k < w->quick_deaths && delay < BACKOFF_MAX_S; k++)
        delay *= 2;
    if (delay > BACKOFF_MAX_S)
        delay = BACKOFF_MAX_S;
    char m[200];
    snprintf(m, sizeof m,
             "died %d times in a row within %.0f s of starting: restarting it in "
             "%.2f s",
             w->quick_deaths, QUICK_DEATH_S, delay);
    p->o.log(w->index, m, p->o.log_ud);
    w->restart_timer = dt_loop_add_timer(p->loop, (long)(delay * 1000), restart_later, w);
}

/* ---- I/O ------------------------------------------------------------------------- */

/* The worker broke the protocol (a line that is no JSON object, a reply
 * with the wrong id or none, a reply nobody asked for): it cannot be
 * trusted with the request any more. Kill it; its request is retried once
 * on a fresh worker, and fails with error "protocol" after that. */
static void protocol_error(gpu_pool *p, wproc *w, const char *what)
{
    char m[600];
    snprintf(m, sizeof m, "protocol error: %s (the worker was killed and restarted)", what);
    if (w->cur == NULL || w->cur->internal || w->cur->retried)
        p->o.log(w->index, m, p->o.log_ud); /* else the retry's own line says it */
    if (w->pid > 0)
        kill(-w->pid, SIGKILL);
    worker_died(p, w, "protocol", m);
}

static void start_done(gpu_pool *p, const cJSON *reply, void *ud);
static request *new_request(gpu_pool *p, cJSON *req, int worker, double deadline_s,
                            gpu_reply_fn *fn, void *ud, int internal);

/* Remember what a successful request left on the worker (a loaded matrix),
 * so that a restarted worker gets it again before any other request; an
 * unload forgets it. This function can't fail. */
static void remember(gpu_pool *p, const wproc *w, const request *r, const cJSON *rep)
{
    const char *name = dt_json_str(r->req, "req", "");
    const char *handle = dt_json_str(r->req, "handle", NULL);
    if (handle == NULL || !dt_json_bool(rep, "ok", 0))
        return;
    if (dt_streq(name, "unload")) {
        for (loaded **pp = &p->loads; *pp; pp = &(*pp)->next) {
            if (strcmp((*pp)->handle, handle) == 0) {
                loaded *l = *pp;
                *pp = l->next;
                free(l->handle);
                cJSON_Delete(l->req);
                free(l);
                return;
            }
        }
        return;
    }
    if (!dt_streq(name, "load_matrix"))
        return;
    loaded **pp = &p->loads;
    while (*pp && strcmp((*pp)->handle, handle) != 0)
        pp = &(*pp)->next;
    if (*pp == NULL) {
        *pp = dt_xcalloc(1, sizeof **pp);
        (*pp)->handle = dt_xstrdup(handle);
    } else {
        cJSON_Delete((*pp)->req);
    }
    (*pp)->req = cJSON_Duplicate(r->req, 1);
    cJSON_DeleteItemFromObject((*pp)->req, "id");
    if (r->targeted)
        return; /* the caller loads it on each worker itself (gpu_pool_load) */
    /* Any worker may take the next request: every live one gets the
     * matrix, ahead of other work. */
    for (int i = 0; i < p->nw; i++) {
        wproc *o = &p->w[i];
        if (o == w || o->state == W_DOWN)
            continue;
        request *lr = new_request(p, cJSON_Duplicate((*pp)->req, 1), i, p->o.deadline_s,
                                  start_done, o, 1);
        o->reloads_left++;
        lr->next = p->queue;
        p->queue = lr;
        if (p->queue_tail == NULL)
            p->queue_tail = lr;
    }
}

static void handle_reply(gpu_pool *p, wproc *w, const char *line, size_t len)
{
    dt_err e = {0};
    cJSON *rep = dt_json_parse(line, len, "worker reply", &e);
    request *r = w->cur;
    char what[400];
    if (rep == NULL || !cJSON_IsObject(rep)) {
        /* stdout is the protocol channel: anything else on it is a broken
         * worker, not a log line (those go to stderr). */
        snprintf(what, sizeof what, "a line that is no JSON object: %.80s%s", line,
                 len > 80 ? "..." : "");
        cJSON_Delete(rep);
        protocol_error(p, w, what);
        return;
    }
    const cJSON *idv = cJSON_GetObjectItemCaseSensitive(rep, "id");
    if (r == NULL || !cJSON_IsNumber(idv) || idv->valuedouble != (double)r->id) {
        char *ids = idv ? dt_json_print(idv, 0) : NULL;
        if (r == NULL)
            snprintf(what, sizeof what, "a reply (id %s) when no request was in flight",
                     ids ? ids : "missing");
        else if (idv == NULL)
            snprintf(what, sizeof what, "a reply without an id to request %ld ('%s')", r->id,
                     dt_json_str(r->req, "req", "?"));
        else
            snprintf(what, sizeof what, "reply id %.40s to request %ld ('%s')", ids, r->id,
                     dt_json_str(r->req, "req", "?"));
        free(ids);
        cJSON_Delete(rep);
        protocol_error(p, w, what);
        return;
    }
    if (w->timer) {
        dt_loop_del_timer(p->loop, w->timer);
        w->timer = 0;
    }
    if (dt_streq(dt_json_str(rep, "error", NULL), "kernel_fault"))
        w->fault = cJSON_Duplicate(rep, 1);
    w->cur = NULL;
    if (!r->shipreq && !r->ship_now && p->o.ship >= 0 && dt_json_bool(rep, "path_missing", 0) &&
        dt_streq(dt_json_str(r->req, "req", ""), "load_matrix") &&
        cJSON_GetObjectItem(r->req, "blob") == NULL) {
        /* The worker cannot see the file: ship it the bytes, then load
         * again; every later load of the path ships (to a worker that
         * does not hold it yet). */
        const char *path = dt_json_str(r->req, "matrix", "");
        if (!path_unseen(p, path)) {
            p->unseen = dt_xrealloc(p->unseen, (size_t)(p->nunseen + 1) * sizeof *p->unseen);
            p->unseen[p->nunseen++] = dt_xstrdup(path);
        }
        w->state = W_IDLE;
        r->ship_now = 1;
        r->worker = w->index;
        queue_front(p, r);
        cJSON_Delete(rep);
        return;
    }
    if (!r->internal) {
        dt_json_set_int(rep, "worker", w->index);
        cubins_learn(p, w, r, rep);
    }
    if (r->internal && dt_streq(dt_json_str(r->req, "req", ""), "hello")) {
        cJSON_Delete(w->hello);
        w->hello = cJSON_Duplicate(rep, 1);
        w->failures = 0;
    }
    if (!r->internal)
        remember(p, w, r, rep);
    if (r->retried)
        dt_json_set_bool(rep, "retried", 1);
    w->state = w->fault ? W_DYING : W_IDLE;
    if (w->fault == NULL || !r->internal)
        finish(p, r, rep);
    else {
        cJSON_Delete(r->req);
        free(r);
    }
    cJSON_Delete(rep);
}

static void drain_lines(gpu_pool *p, wproc *w, dt_buf *b, int is_err)
{
    char *start = b->data;
    char *nl;
    while (b->len > 0 && (nl = memchr(start, '\n', b->len - (size_t)(start - b->data))) != NULL) {
        *nl = '\0';
        size_t len = (size_t)(nl - start);
        if (len > 0 && start[len - 1] == '\r')
            start[--len] = '\0';
        if (is_err) {
            p->o.log(w->index, start, p->o.log_ud);
        } else if (len > 0) {
            unsigned gen = w->gen;
            handle_reply(p, w, start, len);
            if (w->gen != gen)
                return; /* it died (protocol error): its buffers are reset */
        }
        start = nl + 1;
    }
    size_t rest = b->len - (size_t)(start - b->data);
    memmove(b->data, start, rest);
    b->len = rest;
    if (b->data)
        b->data[rest] = '\0';
}

static wproc *find_worker(gpu_pool *p, int fd)
{
    for (int i = 0; i < p->nw; i++)
        if (p->w[i].out_fd == fd || p->w[i].err_fd == fd)
            return &p->w[i];
    return NULL;
}

static void on_readable(dt_loop *l, int fd, int mask, void *ud)
{
    (void)l;
    (void)mask;
    gpu_pool *p = ud;
    wproc *w = find_worker(p, fd);
    if (w == NULL)
        return;
    int is_err = fd == w->err_fd;
    char chunk[65536];
    ssize_t n = read(fd, chunk, sizeof chunk);
    if (n > 0) {
        dt_buf *b = is_err ? &w->err : &w->out;
        dt_buf_append(b, chunk, (size_t)n);
        drain_lines(p, w, b, is_err);
        if (!is_err)
            dispatch(p);
        return;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (is_err) {
        if (w->err.len)
            p->o.log(w->index, dt_buf_str(&w->err), p->o.log_ud);
        dt_buf_reset(&w->err);
        close_fd(p, &w->err_fd);
        return;
    }
    /* EOF on stdout: the worker is gone. Flush what it said on stderr
     * first: it usually explains. */
    if (w->err_fd >= 0) {
        while ((n = read(w->err_fd, chunk, sizeof chunk)) > 0)
            dt_buf_append(&w->err, chunk, (size_t)n);
        if (w->err.len) {
            dt_buf_putc(&w->err, '\n');
            drain_lines(p, w, &w->err, 1);
        }
    }
    worker_died(p, w, NULL, NULL);
    dispatch(p);
}

static long on_deadline(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    wproc *w = ud;
    gpu_pool *p = w->pool;
    w->timer = 0;
    if (w->pid > 0)
        kill(-w->pid, SIGKILL);
    char msg[128];
    double secs = w->cur ? w->cur->deadline_s : 0;
    if (w->state == W_STARTING && (w->cur == NULL || w->cur->internal))
        snprintf(msg, sizeof msg, "no hello within %.0f s of starting", secs);
    else
        snprintf(msg, sizeof msg, "timeout after %g s", secs);
    worker_died(p, w, w->state == W_STARTING ? "worker_start" : "timeout", msg);
    dispatch(p);
    return DT_LOOP_NOMORE;
}

static int send_request(gpu_pool *p, wproc *w, request *r)
{
    dt_json_set_int(r->req, "id", r->id);
    char *s = dt_json_print(r->req, 0);
    size_t len = strlen(s);
    /* Requests are small but matrix sources or kernels can reach a few
     * hundred KB: a blocking write is simplest and the worker reads
     * eagerly. */
    dt_buf line = DT_BUF_INIT;
    dt_buf_append(&line, s, len);
    dt_buf_putc(&line, '\n');
    free(s);
    size_t off = 0;
    int ok = 1;
    while (off < line.len) {
        ssize_t n = write(w->in_fd, line.data + off, line.len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            ok = 0;
            break;
        }
        off += (size_t)n;
    }
    dt_buf_free(&line);
    w->cur = r;
    if (w->state != W_STARTING)
        w->state = W_BUSY;
    w->timer = dt_loop_add_timer(p->loop, (long)(r->deadline_s * 1000.0), on_deadline, w);
    if (!ok) {
        dt_loop_del_timer(p->loop, w->timer);
        w->timer = 0;
        worker_died(p, w, NULL, NULL);
        return -1;
    }
    return 0;
}

static request *new_request(gpu_pool *p, cJSON *req, int worker, double deadline_s,
                            gpu_reply_fn *fn, void *ud, int internal)
{
    request *r = dt_xcalloc(1, sizeof *r);
    r->id = ++p->next_id;
    r->req = req;
    r->worker = worker;
    r->deadline_s = deadline_s > 0 ? deadline_s : p->o.deadline_s;
    if (p->o.max_deadline_s > 0 && r->deadline_s > p->o.max_deadline_s)
        r->deadline_s = p->o.max_deadline_s;
    r->fn = fn;
    r->ud = ud;
    r->internal = internal;
    r->avoid = -1;
    return r;
}

static void start_done(gpu_pool *p, const cJSON *reply, void *ud)
{
    wproc *w = ud;
    (void)p;
    if (w->reloads_left > 0)
        w->reloads_left--;
    (void)reply;
}

static void worker_start(gpu_pool *p, wproc *w)
{
    int in[2], out[2], err[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        snprintf(w->last_error, sizeof w->last_error, "pipe: %s", strerror(errno));
        w->failures = MAX_START_FAILURES;
        return;
    }
    /* exec: the shell becomes the worker, so its wait status is the
     * worker's own (signal 9, not the shell's "status 137"). */
    dt_buf cmd = DT_BUF_INIT;
    dt_buf_puts(&cmd, "exec ");
    expand(&cmd, p->launcher, p->exe, w->index);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(w->last_error, sizeof w->last_error, "fork: %s", strerror(errno));
        w->failures++;
        dt_buf_free(&cmd);
        close(in[0]); close(in[1]); close(out[0]); close(out[1]); close(err[0]); close(err[1]);
        return;
    }
    if (pid == 0) {
        /* Own process group: a deadline kills the worker and anything the
         * launcher started (ssh, srun) together. */
        setpgid(0, 0);
        /* The worker dies with ditto, however ditto ends (SIGTERM, a
         * crash, kill -9): a hung kernel or compile must not outlive it.
         * Kept across the exec of the shell and of the worker. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* ditto died before the line above */
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", cmd.data, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    dt_buf_free(&cmd);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    w->pid = pid;
    w->in_fd = in[1];
    w->out_fd = out[0];
    w->err_fd = err[0];
    fcntl(w->out_fd, F_SETFL, O_NONBLOCK);
    fcntl(w->err_fd, F_SETFL, O_NONBLOCK);
    dt_loop_add_fd(p->loop, w->out_fd, DT_READABLE, on_readable, p);
    dt_loop_add_fd(p->loop, w->err_fd, DT_READABLE, on_readable, p);
    w->state = W_STARTING;
    w->started = dt_now();
    /* hello first, then the pool's matrices, all ahead of user requests. */
    cJSON *hello = dt_json_obj();
    dt_json_set_str(hello, "req", "hello");
    request *r = new_request(p, hello, w->index, p->o.start_deadline_s, NULL, NULL, 1);
    w->reloads_left = 0;
    request *chain = NULL, *tail = NULL;
    for (loaded *l = p->loads; l; l = l->next) {
        request *lr = new_request(p, cJSON_Duplicate(l->req, 1), w->index, p->o.deadline_s,
                                  start_done, w, 1);
        w->reloads_left++;
        if (tail)
            tail->next = lr;
        else
            chain = lr;
        tail = lr;
    }
    /* The reloads go to the front of the queue, in order. */
    if (tail) {
        tail->next = p->queue;
        p->queue = chain;
        if (p->queue_tail == NULL)
            p->queue_tail = tail;
    }
    send_request(p, w, r);
}

/* ---- shipping files -------------------------------------------------------------- */

static void queue_front(gpu_pool *p, request *r)
{
    r->next = p->queue;
    p->queue = r;
    if (p->queue_tail == NULL)
        p->queue_tail = r;
}

static int worker_holds(const wproc *w, const char *blob)
{
    for (int i = 0; i < w->nheld; i++)
        if (strcmp(w->held[i], blob) == 0)
            return 1;
    return 0;
}

static void forget_held(wproc *w)
{
    for (int i = 0; i < w->nheld; i++)
        free(w->held[i]);
    free(w->held);
    w->held = NULL;
    w->nheld = 0;
}

static int path_unseen(const gpu_pool *p, const char *path)
{
    for (int i = 0; i < p->nunseen; i++)
        if (strcmp(p->unseen[i], path) == 0)
            return 1;
    return 0;
}

/* The content hash of path, read once per size and mtime. 0, or -1 with e. */
static int file_hash(gpu_pool *p, const char *path, char hex[17], int64_t *size, dt_err *e)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return dt_err_set(e, "%s: cannot read it to ship it to a worker: %s", path,
                          strerror(errno));
    long long mt = (long long)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
    for (hashed *h = p->hashes; h; h = h->next) {
        if (strcmp(h->path, path) == 0 && h->size == (int64_t)sb.st_size && h->mtime_ns == mt) {
            memcpy(hex, h->hash, 17);
            *size = h->size;
            return 0;
        }
    }
    if (ship_hash_file(path, hex, size, e) != 0)
        return -1;
    hashed *h = dt_xcalloc(1, sizeof *h);
    h->path = dt_xstrdup(path);
    h->size = *size;
    h->mtime_ns = mt;
    memcpy(h->hash, hex, 17);
    h->next = p->hashes;
    p->hashes = h;
    return 0;
}

static void ship_step(gpu_pool *p, const cJSON *reply, void *ud);

/* Queue the shipment's next blob_* request for its worker, ahead of all. */
static void ship_send(gpu_pool *p, wproc *w)
{
    shipment *s = w->ship;
    cJSON *q = dt_json_obj();
    dt_json_set_str(q, "hash", s->hash);
    if (s->stage == 0) {
        dt_json_set_str(q, "req", "blob_begin");
        dt_json_set_str(q, "name", s->name);
        dt_json_set_num(q, "bytes", (double)s->size);
    } else if (s->stage == 1) {
        unsigned char *buf = dt_xmalloc(SHIP_CHUNK_MAX);
        int64_t want = s->size - s->sent < SHIP_CHUNK_MAX ? s->size - s->sent : SHIP_CHUNK_MAX;
        ssize_t n;
        do
            n = pread(s->fd, buf, (size_t)want, (off_t)s->sent);
        while (n < 0 && errno == EINTR);
        if (n != want) {
            /* The file shrank or went away since it was hashed: blob_end
             * would refuse it anyway; say so now. */
            char m[600];
            snprintf(m, sizeof m,
                     "%s: read %lld of %lld bytes at offset %lld while shipping it: "
                     "%s",
                     s->path, (long long)(n < 0 ? 0 : n), (long long)want, (long long)s->sent,
                     n < 0 ? strerror(errno) : "the file changed");
            free(buf);
            cJSON_Delete(q);
            cJSON *r = make_error(s->load->id, "load_failed", m);
            ship_step(p, r, w);
            cJSON_Delete(r);
            return;
        }
        char *b = ship_b64_encode(buf, (size_t)n);
        free(buf);
        dt_json_set_str(q, "req", "blob_chunk");
        dt_json_set_num(q, "offset", (double)s->sent);
        dt_json_set_str(q, "data", b);
        free(b);
    } else {
        dt_json_set_str(q, "req", "blob_end");
    }
    request *r = new_request(p, q, w->index, p->o.deadline_s, ship_step, w, 1);
    r->shipreq = 1;
    queue_front(p, r);
}

/* The shipment is over: its load goes on (stored: with "blob"), or fails
 * with err (code, message), or, when the worker died under it, is queued
 * again like any request whose worker died. */
static void ship_over(gpu_pool *p, wproc *w, const char *code, const char *msg, int died)
{
    shipment *s = w->ship;
    request *r = s->load;
    w->ship = NULL;
    if (s->fd >= 0)
        close(s->fd);
    /* A queued blob_* request of this shipment is moot now. */
    for (request **pp = &p->queue; *pp;) {
        request *q = *pp;
        if (q->shipreq && q->worker == w->index) {
            *pp = q->next;
            cJSON_Delete(q->req);
            free(q);
        } else {
            pp = &q->next;
        }
    }
    p->queue_tail = NULL;
    for (request *q = p->queue; q; q = q->next)
        p->queue_tail = q;
    if (code == NULL) {
        char blob[160];
        snprintf(blob, sizeof blob, "%s/%s", s->hash, s->name);
        dt_json_set_str(r->req, "blob", blob);
        r->worker = w->index;
        queue_front(p, r);
    } else if (died && r->internal) {
        /* A replay: the worker's next start replays it afresh. */
        cJSON_Delete(r->req);
        free(r);
    } else if (died && !r->retried && !p->closing) {
        r->retried = 1;
        r->ship_now = 0;
        if (!r->targeted) {
            r->worker = -1;
            r->avoid = w->index;
        }
        queue_front(p, r);
    } else {
        char m[1200];
        snprintf(m, sizeof m, "shipping %s (%s) to worker %d: %s", s->path, s->hash, w->index, msg);
        cJSON *rep = make_error(r->id, code, m);
        if (r->retried)
            dt_json_set_bool(rep, "retried", 1);
        finish(p, r, rep);
        cJSON_Delete(rep);
    }
    free(s->path);
    free(s);
}

static void ship_progress(gpu_pool *p, wproc *w, const char *what)
{
    shipment *s = w->ship;
    char sz[32], done[32], m[700];
    dt_fmt_bytes((double)s->size, sz, sizeof sz);
    dt_fmt_bytes((double)s->sent, done, sizeof done);
    double secs = dt_now() - s->t0;
    snprintf(m, sizeof m, "shipping %s (%s, %s): %s, %s in %.1f s (%.1f MB/s)", s->path, s->hash,
             sz, what, done, secs, secs > 0 ? (double)s->sent / 1e6 / secs : 0.0);
    p->o.log(w->index, m, p->o.log_ud);
}

static void ship_step(gpu_pool *p, const cJSON *reply, void *ud)
{
    wproc *w = ud;
    shipment *s = w->ship;
    if (s == NULL)
        return; /* the shipment was abandoned (its worker died) */
    if (!dt_json_bool(reply, "ok", 0)) {
        const char *code = dt_json_str(reply, "error", "internal");
        int died = dt_streq(code, "worker_exited") || dt_streq(code, "protocol");
        ship_over(p, w, dt_streq(code, "not_found") ? "load_failed" : code,
                  dt_json_str(reply, "message", ""), died);
        return;
    }
    char blob[160];
    snprintf(blob, sizeof blob, "%s/%s", s->hash, s->name);
    if (s->stage == 0 && dt_json_bool(reply, "have", 0)) {
        p->o.log(w->index, "already holds it (stored on its host by an earlier transfer)",
                 p->o.log_ud);
    } else if (s->stage == 0 || s->stage == 1) {
        if (s->stage == 1) {
            int64_t got = (int64_t)dt_json_num(reply, "received", -1);
            int64_t want =
                s->sent + (s->size - s->sent < SHIP_CHUNK_MAX ? s->size - s->sent : SHIP_CHUNK_MAX);
            if (got != want) {
                char m[200];
                snprintf(m, sizeof m, "the worker says it received %lld bytes, %lld were sent",
                         (long long)got, (long long)want);
                ship_over(p, w, "protocol", m, 0);
                return;
            }
            p->shipped_bytes += got - s->sent;
            s->sent = got;
            int quarter = s->size > 0 ? (int)(4 * s->sent / s->size) : 4;
            if (quarter > s->last_quarter && quarter < 4 && s->size > 4LL * SHIP_CHUNK_MAX) {
                char pct[16];
                snprintf(pct, sizeof pct, "%d%%", 25 * quarter);
                ship_progress(p, w, pct);
            }
            s->last_quarter = quarter;
        }
        s->stage = s->sent < s->size ? 1 : 2;
        ship_send(p, w);
        return;
    } else {
        p->shipments++;
        ship_progress(p, w, "stored, hash checked");
    }
    w->held = dt_xrealloc(w->held, (size_t)(w->nheld + 1) * sizeof *w->held);
    w->held[w->nheld++] = dt_xstrdup(blob);
    ship_over(p, w, NULL, NULL, 0);
}

/* Before r goes to w: a load_matrix of a file this worker may not see is
 * sent as the stored copy of the file's bytes, shipped first when the
 * worker does not hold them yet. Returns 1 when r was taken (parked behind
 * a shipment, or failed), 0 to send it now. */
static int maybe_ship(gpu_pool *p, wproc *w, request *r)
{
    if (r->shipreq || !dt_streq(dt_json_str(r->req, "req", ""), "load_matrix"))
        return 0;
    cJSON_DeleteItemFromObject(r->req, "blob");
    const char *src = dt_json_str(r->req, "matrix", NULL);
    if (src == NULL || p->o.ship < 0 || dt_startswith(src, "gen:") || dt_startswith(src, "rep:"))
        return 0;
    if (!(p->o.ship > 0 || p->remote || r->ship_now || path_unseen(p, src)))
        return 0;
    dt_err e = {0};
    char hash[17];
    int64_t size = 0;
    const char *base = strrchr(src, '/') ? strrchr(src, '/') + 1 : src;
    char name[129];
    /* The stored name keeps the extension (the reader goes by it); other
     * characters become '_'. */
    snprintf(name, sizeof name, "%s", base[0] && base[0] != '.' ? base : "matrix");
    for (char *c = name; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              strchr("._+-", *c)))
            *c = '_';
    if (!ship_name_ok(name))
        snprintf(name, sizeof name, "matrix");
    if (file_hash(p, src, hash, &size, &e) != 0) {
        cJSON *rep = make_error(r->id, "not_found", e.msg);
        finish(p, r, rep);
        cJSON_Delete(rep);
        return 1;
    }
    char blob[160];
    snprintf(blob, sizeof blob, "%s/%s", hash, name);
    if (worker_holds(w, blob)) {
        dt_json_set_str(r->req, "blob", blob);
        return 0;
    }
    shipment *s = dt_xcalloc(1, sizeof *s);
    s->load = r;
    s->path = dt_xstrdup(src);
    memcpy(s->hash, hash, 17);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->size = size;
    s->fd = open(src, O_RDONLY | O_CLOEXEC);
    s->t0 = dt_now();
    w->ship = s;
    if (s->fd < 0) {
        snprintf(e.msg, sizeof e.msg, "%s: %s", src, strerror(errno));
        ship_over(p, w, "not_found", e.msg, 0);
        return 1;
    }
    char sz[32], m[700];
    dt_fmt_bytes((double)size, sz, sizeof sz);
    snprintf(m, sizeof m, "shipping %s (%s, %s) to this worker: %s", src, hash, sz,
             r->ship_now     ? "it cannot see the path"
             : p->remote     ? "the launcher starts workers on other hosts"
             : p->o.ship > 0 ? "shipping is always on"
                             : "another worker could not see the path");
    p->o.log(w->index, m, p->o.log_ud);
    ship_send(p, w);
    return 1;
}

/* ---- compiled kernels (PROTOCOL.md, "Sharing compiled kernels") --------------------- */

/* Shared when workers.ship is "always", or "auto" and the workers run
 * elsewhere (ssh, srun) or their hellos name more than one host. */
static int cubins_shared(const gpu_pool *p)
{
    if (p->o.ship != 0 || p->remote)
        return p->o.ship >= 0;
    const char *first = NULL;
    for (int i = 0; i < p->nw; i++) {
        const char *h = dt_json_str(p->w[i].hello, "host", NULL);
        if (first == NULL)
            first = h;
        else if (h != NULL && strcmp(first, h) != 0)
            return 1;
    }
    return 0;
}

/* The pool's load request of the matrix handle req names, or NULL. */
static const cJSON *load_of(const gpu_pool *p, const cJSON *req)
{
    const char *h = dt_json_str(req, "matrix", NULL);
    for (const loaded *l = p->loads; h != NULL && l != NULL; l = l->next)
        if (strcmp(l->handle, h) == 0)
            return l->req;
    return NULL;
}

/* Which cubins a worker holds: in its held list as "cubin:KEY" (forgotten
 * when it dies, like the files shipped to it). */
static int cubin_held(const char *key, void *ud)
{
    char b[40];
    snprintf(b, sizeof b, "cubin:%s", key);
    return worker_holds(ud, b);
}

static void cubin_mark(const char *key, void *ud)
{
    wproc *w = ud;
    if (cubin_held(key, w))
        return;
    w->held = dt_xrealloc(w->held, (size_t)(w->nheld + 1) * sizeof *w->held);
    w->held[w->nheld++] = dt_xasprintf("cubin:%s", key);
}

/* Before r goes to w: ask for the cubins it compiles, and send along those
 * the store holds for it that w lacks. */
static void cubins_attach(gpu_pool *p, wproc *w, request *r)
{
    char id[17];
    if (r->internal || r->shipreq)
        return;
    cJSON_DeleteItemFromObjectCaseSensitive(r->req, "want_cubins");
    cJSON_DeleteItemFromObjectCaseSensitive(r->req, "cubins");
    if (!cubins_shared(p) || !gpu_cubinstore_ident(r->req, w->hello, load_of(p, r->req), id))
        return;
    dt_json_set_bool(r->req, "want_cubins", 1);
    gpu_cubinstore_attach(p->cubins, id, r->req, cubin_held, w);
}

static void cubins_learn(gpu_pool *p, wproc *w, const request *r, cJSON *rep)
{
    char id[17];
    int any = gpu_cubinstore_ident(r->req, w->hello, load_of(p, r->req), id);
    gpu_cubinstore_learn(p->cubins, any ? id : NULL, r->req, rep, cubin_mark, w, p->o.log,
                         p->o.log_ud, w->index);
}

void gpu_pool_cubin_stats(const gpu_pool *p, gpu_cubin_stats *out)
{
    gpu_cubinstore_stats(p->cubins, out);
}

/* ---- dispatch ---------------------------------------------------------------------- */

/* Another worker than w is up or coming up: a retry avoiding w waits for it. */
static int other_worker_up(const gpu_pool *p, const wproc *w)
{
    for (int i = 0; i < p->nw; i++)
        if (&p->w[i] != w &&
            (p->w[i].state == W_IDLE || p->w[i].state == W_BUSY || p->w[i].state == W_STARTING))
            return 1;
    return 0;
}

static void dispatch(gpu_pool *p)
{
    for (int i = 0; i < p->nw; i++) {
        wproc *w = &p->w[i];
        if (w->state != W_IDLE)
            continue;
        /* A worker replaying its matrices or receiving a file takes only
         * its own requests. */
        request **pp = &p->queue, *prev = NULL;
        while (*pp) {
            request *r = *pp;
            int mine = r->worker == w->index;
            int any = r->worker < 0 && w->reloads_left == 0 && w->ship == NULL &&
                      (r->avoid != w->index || !other_worker_up(p, w));
            if (mine || any) {
                *pp = r->next;
                if (p->queue_tail == r)
                    p->queue_tail = prev;
                r->next = NULL;
                if (maybe_ship(p, w, r)) {
                    /* parked behind a shipment (its blob_begin is queued
                     * first) or failed: look again from the start */
                    i--;
                    break;
                }
                cubins_attach(p, w, r);
                send_request(p, w, r);
                break;
            }
            prev = r;
            pp = &r->next;
        }
    }
}

/* ---- public --------------------------------------------------------------------- */

/* Does the launcher start workers on other hosts? A word of the template
 * that is, or ends in /, ssh or srun. */
static int launcher_remote(const char *t)
{
    while (*t) {
        while (*t == ' ' || *t == '\t')
            t++;
        size_t n = strcspn(t, " \t");
        const char *base = t;
        for (size_t i = 0; i < n; i++)
            if (t[i] == '/')
                base = t + i + 1;
        size_t bn = n - (size_t)(base - t);
        if ((bn == 3 && strncmp(base, "ssh", 3) == 0) || (bn == 4 && strncmp(base, "srun", 4) == 0))
            return 1;
        t += n;
    }
    return 0;
}

gpu_pool *gpu_pool_new(dt_loop *loop, const gpu_pool_opts *o, dt_err *e)
{
    gpu_pool *p = dt_xcalloc(1, sizeof *p);
    p->loop = loop;
    if (o)
        p->o = *o;
    if (p->o.workers < 1)
        p->o.workers = 1;
    if (p->o.deadline_s <= 0)
        p->o.deadline_s = 300;
    if (p->o.start_deadline_s <= 0)
        p->o.start_deadline_s = 30;
    if (p->o.log == NULL)
        p->o.log = default_log;
    p->launcher = dt_xstrdup(p->o.launcher && *p->o.launcher ? p->o.launcher
                                                             : "{exe} worker --device {device}");
    ssize_t n = readlink("/proc/self/exe", p->exe, sizeof p->exe - 1);
    if (n <= 0) {
        dt_err_set(e, "cannot find this executable (/proc/self/exe): %s", strerror(errno));
        free(p->launcher);
        free(p);
        return NULL;
    }
    p->exe[n] = '\0';
    p->remote = launcher_remote(p->launcher);
    p->cubins = gpu_cubinstore_new(p->o.cubin_store_bytes);
    /* A write to a dead worker must be an error, not our death. */
    signal(SIGPIPE, SIG_IGN);
    p->nw = p->o.workers;
    p->w = dt_xcalloc((size_t)p->nw, sizeof *p->w);
    for (int i = 0; i < p->nw; i++) {
        wproc *w = &p->w[i];
        w->pool = p;
        w->index = i;
        w->in_fd = w->out_fd = w->err_fd = -1;
        w->pid = -1;
        worker_start(p, w);
    }
    return p;
}

void gpu_pool_free(gpu_pool *p)
{
    if (p == NULL)
        return;
    p->closing = 1;
    for (int i = 0; i < p->nw; i++) {
        wproc *w = &p->w[i];
        if (w->in_fd >= 0 && w->state != W_DOWN)
            (void)!write(w->in_fd, "{\"id\":0,\"req\":\"shutdown\"}\n", 26);
        close_fd(p, &w->in_fd);
    }
    double until = dt_now() + 2.0;
    for (int i = 0; i < p->nw; i++) {
        wproc *w = &p->w[i];
        if (w->pid <= 0)
            continue;
        int st;
        while (waitpid(w->pid, &st, WNOHANG) == 0) {
            if (dt_now() > until) {
                kill(-w->pid, SIGKILL);
                waitpid(w->pid, &st, 0);
                break;
            }
            usleep(5000);
        }
        w->pid = -1;
    }
    for (int i = 0; i < p->nw; i++) {
        wproc *w = &p->w[i];
        close_fd(p, &w->out_fd);
        close_fd(p, &w->err_fd);
        if (w->timer)
            dt_loop_del_timer(p->loop, w->timer);
        if (w->restart_timer)
            dt_loop_del_timer(p->loop, w->restart_timer);
        if (w->ship)
            ship_over(p, w, "cancelled", "the worker pool was shut down", 0);
        forget_held(w);
        if (w->cur) {
            cJSON *rep = make_error(w->cur->id, "cancelled", "the worker pool was shut down");
            finish(p, w->cur, rep);
            cJSON_Delete(rep);
        }
        dt_buf_free(&w->out);
        dt_buf_free(&w->err);
        cJSON_Delete(w->hello);
        cJSON_Delete(w->fault);
    }
    while (p->queue) {
        request *r = p->queue;
        p->queue = r->next;
        cJSON *rep = make_error(r->id, "cancelled", "the worker pool was shut down");
        finish(p, r, rep);
        cJSON_Delete(rep);
    }
    while (p->loads) {
        loaded *l = p->loads;
        p->loads = l->next;
        free(l->handle);
        cJSON_Delete(l->req);
        free(l);
    }
    for (int i = 0; i < p->nunseen; i++)
        free(p->unseen[i]);
    free(p->unseen);
    while (p->hashes) {
        hashed *h = p->hashes;
        p->hashes = h->next;
        free(h->path);
        free(h);
    }
    free(p->w);
    free(p->launcher);
    gpu_cubinstore_free(p->cubins);
    free(p);
}

long gpu_pool_submit(gpu_pool *p, cJSON *req, int worker, double deadline_s, gpu_reply_fn *fn,
                     void *ud)
{
    request *r = new_request(p, req, worker < p->nw ? worker : -1, deadline_s, fn, ud, 0);
    r->targeted = r->worker >= 0;
    if (p->queue_tail)
        p->queue_tail->next = r;
    else
        p->queue = r;
    p->queue_tail = r;
    long id = r->id;
    dispatch(p);
    fail_unservable(p);
    return id;
}

typedef struct call_slot {
    cJSON *reply;
    int done;
} call_slot;

static void call_done(gpu_pool *p, const cJSON *reply, void *ud)
{
    (void)p;
    call_slot *s = ud;
    s->reply = cJSON_Duplicate(reply, 1);
    s->done = 1;
}

cJSON *gpu_pool_call(gpu_pool *p, cJSON *req, double deadline_s)
{
    call_slot s = {NULL, 0};
    gpu_pool_submit(p, req, -1, deadline_s, call_done, &s);
    while (!s.done)
        if (dt_loop_run_once(p->loop, 1000) < 0)
            break;
    return s.reply ? s.reply : make_error(0, "cancelled", "the event loop failed");
}

cJSON *gpu_pool_load(gpu_pool *p, const char *handle, cJSON *req, double deadline_s)
{
    dt_json_set_str(req, "handle", handle);
    dt_json_set_str(req, "req", "load_matrix");
    /* Remember it first, so a worker restarting meanwhile loads it too. */
    loaded **pp = &p->loads;
    while (*pp && strcmp((*pp)->handle, handle) != 0)
        pp = &(*pp)->next;
    if (*pp == NULL) {
        *pp = dt_xcalloc(1, sizeof **pp);
        (*pp)->handle = dt_xstrdup(handle);
    } else {
        cJSON_Delete((*pp)->req);
    }
    (*pp)->req = cJSON_Duplicate(req, 1);
    call_slot *slots = dt_xcalloc((size_t)p->nw, sizeof *slots);
    for (int i = 0; i < p->nw; i++)
        gpu_pool_submit(p, cJSON_Duplicate(req, 1), i, deadline_s, call_done, &slots[i]);
    cJSON_Delete(req);
    for (;;) {
        int done = 1;
        for (int i = 0; i < p->nw; i++)
            done &= slots[i].done;
        if (done)
            break;
        if (dt_loop_run_once(p->loop, 1000) < 0)
            break;
    }
    cJSON *first = slots[0].reply;
    for (int i = 1; i < p->nw; i++)
        cJSON_Delete(slots[i].reply);
    free(slots);
    if (first && !dt_json_bool(first, "ok", 0)) {
        /* A matrix that does not load is not replayed on restarts. */
        gpu_pool_unload(p, handle);
    }
    return first ? first : make_error(0, "cancelled", "the event loop failed");
}

void gpu_pool_unload(gpu_pool *p, const char *handle)
{
    for (loaded **pp = &p->loads; *pp; pp = &(*pp)->next) {
        if (strcmp((*pp)->handle, handle) == 0) {
            loaded *l = *pp;
            *pp = l->next;
            free(l->handle);
            cJSON_Delete(l->req);
            free(l);
            break;
        }
    }
    for (int i = 0; i < p->nw; i++) {
        if (p->w[i].state == W_DOWN)
            continue;
        cJSON *r = dt_json_obj();
        dt_json_set_str(r, "req", "unload");
        dt_json_set_str(r, "handle", handle);
        gpu_pool_submit(p, r, i, 0, NULL, NULL);
    }
}

int gpu_pool_size(const gpu_pool *p)
{
    return p->nw;
}

const cJSON *gpu_pool_hello(const gpu_pool *p, int worker)
{
    if (worker < 0 || worker >= p->nw)
        return NULL;
    return p->w[worker].hello;
}

int gpu_pool_wait_ready(gpu_pool *p, double timeout_s)
{
    double until = dt_now() + timeout_s;
    for (;;) {
        int up = 0, settled = 1;
        for (int i = 0; i < p->nw; i++) {
            wproc *w = &p->w[i];
            if (w->state == W_IDLE || w->state == W_BUSY)
                up++;
            else if (w->state == W_STARTING || (w->state == W_DOWN && w->failures < MAX_START_FAILURES))
                settled = 0;
        }
        if (settled || dt_now() > until)
            return up;
        if (dt_loop_run_once(p->loop, 100) < 0)
            return up;
    }
}

int gpu_pool_restarts(const gpu_pool *p)
{
    return p->restarts;
}

int gpu_pool_shipments(const gpu_pool *p, int64_t *bytes)
{
    if (bytes)
        *bytes = p->shipped_bytes;
    return p->shipments;
}

int gpu_pool_pending(const gpu_pool *p)
{
    int n = 0;
    for (request *r = p->queue; r; r = r->next)
        n += !r->internal;
    for (int i = 0; i < p->nw; i++) {
        n += p->w[i].cur != NULL && !p->w[i].cur->internal;
        n += p->w[i].ship != NULL && !p->w[i].ship->load->internal; /* parked behind its file */
    }
    return n;
}

void gpu_pool_cancel(gpu_pool *p, long id)
{
    for (request **pp = &p->queue, *prev = NULL; *pp; prev = *pp, pp = &(*pp)->next) {
        if ((*pp)->id == id) {
            request *r = *pp;
            *pp = r->next;
            if (p->queue_tail == r)
                p->queue_tail = prev;
            cJSON *rep = make_error(id, "cancelled", "cancelled before it started");
            finish(p, r, rep);
            cJSON_Delete(rep);
            return;
        }
    }
    for (int i = 0; i < p->nw; i++) {
        wproc *w = &p->w[i];
        if (w->ship && w->ship->load->id == id) {
            /* Parked behind its file: the transfer stops (a blob_* request
             * in flight is answered and ignored). */
            ship_over(p, w, "cancelled", "cancelled while its matrix was being shipped", 0);
            dispatch(p);
            return;
        }
        if (w->cur && w->cur->id == id) {
            if (w->pid > 0)
                kill(-w->pid, SIGKILL);
            worker_died(p, w, "cancelled", "cancelled while running (the worker was restarted)");
            dispatch(p);
            return;
        }
    }
}
