/* loop.c -- the poll(2) event loop: file descriptors, timers, beforesleep. */
#include "core.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

typedef struct watch {
    int fd;
    int mask;
    dt_file_fn *rfn, *wfn;
    void *rud, *wud;
} watch;

typedef struct timer {
    long long id;
    double when; /* dt_now() seconds */
    dt_timer_fn *fn;
    void *ud;
    int dead;
} timer;

struct dt_loop {
    watch *w;
    int nw, capw;
    timer *t;
    int nt, capt;
    long long next_id;
    dt_sleep_fn *before;
    void *before_ud;
    int stop;
    struct pollfd *pfd;
    int cappfd;
};

dt_loop *dt_loop_new(void)
{
    dt_loop *l = dt_xcalloc(1, sizeof *l);
    l->next_id = 1;
    return l;
}

void dt_loop_free(dt_loop *l)
{
    if (l == NULL)
        return;
    free(l->w);
    free(l->t);
    free(l->pfd);
    free(l);
}

static watch *find_watch(dt_loop *l, int fd)
{
    for (int i = 0; i < l->nw; i++)
        if (l->w[i].fd == fd)
            return &l->w[i];
    return NULL;
}

int dt_loop_add_fd(dt_loop *l, int fd, int mask, dt_file_fn *fn, void *ud)
{
    if (fd < 0)
        return -1;
    watch *w = find_watch(l, fd);
    if (w == NULL) {
        if (l->nw == l->capw) {
            l->capw = l->capw ? l->capw * 2 : 8;
            l->w = dt_xrealloc(l->w, (size_t)l->capw * sizeof *l->w);
        }
        w = &l->w[l->nw++];
        memset(w, 0, sizeof *w);
        w->fd = fd;
    }
    w->mask |= mask;
    if (mask & DT_READABLE) {
        w->rfn = fn;
        w->rud = ud;
    }
    if (mask & DT_WRITABLE) {
        w->wfn = fn;
        w->wud = ud;
    }
    return 0;
}

void dt_loop_del_fd(dt_loop *l, int fd, int mask)
{
    watch *w = find_watch(l, fd);
    if (w == NULL)
        return;
    w->mask = mask == 0 ? 0 : (w->mask & ~mask);
    /* Removal is deferred to the next poll set-up (mask 0 is skipped), so
     * that deleting inside a callback never shifts the array under the
     * dispatcher. */
}

long long dt_loop_add_timer(dt_loop *l, long ms, dt_timer_fn *fn, void *ud)
{
    if (l->nt == l->capt) {
        l->capt = l->capt ? l->capt * 2 : 8;
        l->t = dt_xrealloc(l->t, (size_t)l->capt * sizeof *l->t);
    }
    timer *t = &l->t[l->nt++];
    t->id = l->next_id++;
    t->when = dt_now() + (double)ms / 1000.0;
    t->fn = fn;
    t->ud = ud;
    t->dead = 0;
    return t->id;
}

void dt_loop_del_timer(dt_loop *l, long long id)
{
    for (int i = 0; i < l->nt; i++)
        if (l->t[i].id == id)
            l->t[i].dead = 1;
}

void dt_loop_set_beforesleep(dt_loop *l, dt_sleep_fn *fn, void *ud)
{
    l->before = fn;
    l->before_ud = ud;
}

static void compact(dt_loop *l)
{
    int j = 0;
    for (int i = 0; i < l->nw; i++)
        if (l->w[i].mask != 0)
            l->w[j++] = l->w[i];
    l->nw = j;
    j = 0;
    for (int i = 0; i < l->nt; i++)
        if (!l->t[i].dead)
            l->t[j++] = l->t[i];
    l->nt = j;
}

static int run_timers(dt_loop *l)
{
    int ran = 0;
    double now = dt_now();
    /* Timers added by callbacks land past the current count and wait for the
     * next iteration. */
    int n = l->nt;
    for (int i = 0; i < n; i++) {
        if (l->t[i].dead || l->t[i].when > now)
            continue;
        timer t = l->t[i];
        long again = t.fn(l, t.id, t.ud);
        ran++;
        /* The array may have moved: look the timer up again by id. */
        for (int k = 0; k < l->nt; k++) {
            if (l->t[k].id != t.id)
                continue;
            if (again == DT_LOOP_NOMORE || l->t[k].dead)
                l->t[k].dead = 1;
            else
                l->t[k].when = dt_now() + (double)again / 1000.0;
            break;
        }
    }
    return ran;
}

int dt_loop_run_once(dt_loop *l, long timeout_ms)
{
    compact(l);
    if (l->before)
        l->before(l, l->before_ud);
    compact(l);
    double now = dt_now();
    long wait = timeout_ms;
    for (int i = 0; i < l->nt; i++) {
        if (l->t[i].dead)
            continue;
        double d = (l->t[i].when - now) * 1000.0;
        long ms = d <= 0 ? 0 : (long)(d + 0.999);
        if (wait < 0 || ms < wait)
            wait = ms;
    }
    if (l->nw == 0 && wait < 0)
        return 0; /* nothing could ever wake us */
    if (l->nw > l->cappfd) {
        l->cappfd = l->nw;
        l->pfd = dt_xrealloc(l->pfd, (size_t)l->cappfd * sizeof *l->pfd);
    }
    int n = l->nw;
    for (int i = 0; i < n; i++) {
        l->pfd[i].fd = l->w[i].fd;
        l->pfd[i].events = (short)(((l->w[i].mask & DT_READABLE) ? POLLIN : 0) |
                                   ((l->w[i].mask & DT_WRITABLE) ? POLLOUT : 0));
        l->pfd[i].revents = 0;
    }
    int ran = 0;
    int rc = poll(l->pfd, (nfds_t)n, (int)(wait > 2000000000L ? 2000000000L : wait));
    if (rc < 0 && errno != EINTR)
        return -1;
    for (int i = 0; rc > 0 && i < n; i++) {
        short re = l->pfd[i].revents;
        if (re == 0)
            continue;
        int fd = l->pfd[i].fd;
        /* Look the watch up by fd each time: callbacks may add watches
         * (which can move the array) or remove this one. */
        watch *w = find_watch(l, fd);
        if (w && (w->mask & DT_READABLE) && (re & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) {
            dt_file_fn *fn = w->rfn;
            void *ud = w->rud;
            fn(l, fd, DT_READABLE, ud);
            ran++;
        }
        w = find_watch(l, fd);
        if (w && (w->mask & DT_WRITABLE) && (re & (POLLOUT | POLLERR | POLLHUP))) {
            dt_file_fn *fn = w->wfn;
            void *ud = w->wud;
            fn(l, fd, DT_WRITABLE, ud);
            ran++;
        }
    }
    ran += run_timers(l);
    return ran;
}

void dt_loop_run(dt_loop *l)
{
    l->stop = 0;
    while (!l->stop)
        if (dt_loop_run_once(l, -1) < 0)
            break;
}

void dt_loop_stop(dt_loop *l)
{
    l->stop = 1;
}

int dt_loop_stopped(const dt_loop *l)
{
    return l->stop;
}
