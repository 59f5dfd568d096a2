/* test_loop.c -- core/loop.c: timers (delay, repeat, delete, added from a
 * callback), fd readiness (per direction, hang-up, deleted inside a
 * callback), run_once's timeouts, beforesleep and dt_loop_run/stop.
 * Timing is checked by lower bounds, with upper bounds loose enough for a
 * loaded machine. */
#include "tests/common/testutil.h"

#include <sys/socket.h>
#include <unistd.h>

typedef struct rec {
    int calls;
    int fd;
    int mask;
    void *ud;
    long again;         /* what a timer callback returns */
    int stop_after;     /* dt_loop_stop on this call (0: never) */
    long long del_id;   /* a timer to delete from the callback (0: none) */
    int del_fd;         /* an fd to stop watching for reading (-1: none) */
    double at;          /* dt_now() of the last call */
} rec;

static rec rec_init(void)
{
    rec r = {0};
    r.fd = -1;
    r.again = DT_LOOP_NOMORE;
    r.del_fd = -1;
    return r;
}

static long on_timer(dt_loop *l, long long id, void *ud)
{
    (void)id;
    rec *r = ud;
    r->calls++;
    r->at = dt_now();
    if (r->del_id)
        dt_loop_del_timer(l, r->del_id);
    if (r->stop_after && r->calls == r->stop_after)
        dt_loop_stop(l);
    return r->again;
}

static void on_fd(dt_loop *l, int fd, int mask, void *ud)
{
    rec *r = ud;
    r->calls++;
    r->fd = fd;
    r->mask = mask;
    r->ud = ud;
    r->at = dt_now();
    if (r->del_fd >= 0)
        dt_loop_del_fd(l, r->del_fd, DT_READABLE);
}

static void pipe_or_die(int p[2])
{
    cr_assert_eq(pipe(p), 0);
}

Test(loop, run_once_with_nothing_to_wait_for_returns_at_once)
{
    dt_loop *l = dt_loop_new();
    double t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    cr_assert_lt(dt_now() - t0, 1.0);
    dt_loop_free(l);
}

Test(loop, run_once_waits_its_timeout_on_an_idle_fd)
{
    dt_loop *l = dt_loop_new();
    int p[2];
    pipe_or_die(p);
    rec r = rec_init();
    cr_assert_eq(dt_loop_add_fd(l, p[0], DT_READABLE, on_fd, &r), 0);
    double t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(l, 50), 0);
    double dt = dt_now() - t0;
    cr_assert_geq(dt, 0.045, "returned after %.3f s, before its 50 ms timeout", dt);
    cr_assert_lt(dt, 5.0);
    cr_assert_eq(r.calls, 0);
    /* timeout 0 polls without waiting */
    t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(l, 0), 0);
    cr_assert_lt(dt_now() - t0, 1.0);
    close(p[0]);
    close(p[1]);
    dt_loop_free(l);
}

Test(loop, a_timer_fires_after_its_delay_and_not_before)
{
    dt_loop *l = dt_loop_new();
    rec r = rec_init();
    double t0 = dt_now();
    dt_loop_add_timer(l, 60, on_timer, &r);
    cr_assert_eq(dt_loop_run_once(l, 0), 0);
    cr_assert_eq(r.calls, 0, "a 60 ms timer ran on a poll that did not wait");
    /* -1 waits until the next timer, not longer */
    cr_assert_eq(dt_loop_run_once(l, -1), 1);
    cr_assert_eq(r.calls, 1);
    cr_assert_geq(r.at - t0, 0.059, "fired after %.3f s", r.at - t0);
    cr_assert_lt(r.at - t0, 5.0);
    /* DT_LOOP_NOMORE removed it: nothing is left to wait for */
    t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    cr_assert_lt(dt_now() - t0, 1.0);
    cr_assert_eq(r.calls, 1);
    dt_loop_free(l);
}

Test(loop, a_timer_shortens_a_longer_timeout)
{
    dt_loop *l = dt_loop_new();
    rec r = rec_init();
    double t0 = dt_now();
    dt_loop_add_timer(l, 20, on_timer, &r);
    cr_assert_eq(dt_loop_run_once(l, 4000), 1);
    cr_assert_eq(r.calls, 1);
    cr_assert_lt(dt_now() - t0, 3.0, "waited the 4 s timeout instead of the 20 ms timer");
    dt_loop_free(l);
}

Test(loop, a_timer_repeats_with_the_delay_it_returns)
{
    dt_loop *l = dt_loop_new();
    rec r = rec_init();
    r.again = 15;
    double t0 = dt_now();
    dt_loop_add_timer(l, 0, on_timer, &r);
    for (int i = 0; i < 3; i++)
        cr_assert_eq(dt_loop_run_once(l, -1), 1);
    cr_assert_eq(r.calls, 3);
    /* the first at once, then two waits of 15 ms */
    cr_assert_geq(r.at - t0, 0.029, "three calls within %.3f s", r.at - t0);
    r.again = DT_LOOP_NOMORE;
    cr_assert_eq(dt_loop_run_once(l, -1), 1);
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    cr_assert_eq(r.calls, 4);
    dt_loop_free(l);
}

Test(loop, a_deleted_timer_never_runs)
{
    dt_loop *l = dt_loop_new();
    rec a = rec_init(), b = rec_init();
    long long ida = dt_loop_add_timer(l, 0, on_timer, &a);
    dt_loop_add_timer(l, 10, on_timer, &b);
    dt_loop_del_timer(l, ida);
    cr_assert_eq(dt_loop_run_once(l, -1), 1);
    cr_assert_eq(a.calls, 0);
    cr_assert_eq(b.calls, 1);
    dt_loop_free(l);
}

Test(loop, a_timer_deleted_by_another_in_the_same_iteration_does_not_run)
{
    dt_loop *l = dt_loop_new();
    rec a = rec_init(), b = rec_init();
    dt_loop_add_timer(l, 0, on_timer, &a);
    long long idb = dt_loop_add_timer(l, 0, on_timer, &b);
    a.del_id = idb;
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    cr_assert_eq(a.calls, 1);
    cr_assert_eq(b.calls, 0);
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    dt_loop_free(l);
}

Test(loop, a_timer_that_deletes_itself_stops_even_if_it_asks_to_repeat)
{
    dt_loop *l = dt_loop_new();
    rec a = rec_init();
    a.again = 5;
    long long id = dt_loop_add_timer(l, 0, on_timer, &a);
    a.del_id = id;
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    cr_assert_eq(a.calls, 1);
    dt_loop_free(l);
}

typedef struct adder {
    rec inner;
    int calls;
} adder;

static long add_another(dt_loop *l, long long id, void *ud)
{
    (void)id;
    adder *a = ud;
    a->calls++;
    dt_loop_add_timer(l, 0, on_timer, &a->inner);
    return DT_LOOP_NOMORE;
}

Test(loop, a_timer_added_from_a_callback_waits_for_the_next_iteration)
{
    dt_loop *l = dt_loop_new();
    adder a = {.inner = rec_init()};
    /* enough added timers to make the array grow under the running callback */
    for (int i = 0; i < 20; i++)
        dt_loop_add_timer(l, 0, add_another, &a);
    cr_assert_eq(dt_loop_run_once(l, 0), 20);
    cr_assert_eq(a.calls, 20);
    cr_assert_eq(a.inner.calls, 0);
    cr_assert_eq(dt_loop_run_once(l, 0), 20);
    cr_assert_eq(a.inner.calls, 20);
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    dt_loop_free(l);
}

Test(loop, add_fd_refuses_a_negative_fd)
{
    dt_loop *l = dt_loop_new();
    rec r = rec_init();
    cr_assert_eq(dt_loop_add_fd(l, -1, DT_READABLE, on_fd, &r), -1);
    cr_assert_eq(dt_loop_run_once(l, -1), 0, "the refused fd was watched");
    dt_loop_free(l);
}

Test(loop, a_readable_fd_calls_its_callback_with_fd_mask_and_data)
{
    dt_loop *l = dt_loop_new();
    int p[2];
    pipe_or_die(p);
    rec r = rec_init();
    dt_loop_add_fd(l, p[0], DT_READABLE, on_fd, &r);
    cr_assert_eq(dt_loop_run_once(l, 0), 0);
    cr_assert_eq(write(p[1], "x", 1), 1);
    double t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(l, -1), 1);
    cr_assert_lt(dt_now() - t0, 1.0);
    cr_assert_eq(r.calls, 1);
    cr_assert_eq(r.fd, p[0]);
    cr_assert_eq(r.mask, DT_READABLE);
    cr_assert_eq(r.ud, &r);
    /* still readable (not drained): called again */
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    char c;
    cr_assert_eq(read(p[0], &c, 1), 1);
    cr_assert_eq(dt_loop_run_once(l, 0), 0);
    cr_assert_eq(r.calls, 2);
    close(p[0]);
    close(p[1]);
    dt_loop_free(l);
}

Test(loop, each_direction_has_its_own_callback_and_can_be_removed_alone)
{
    dt_loop *l = dt_loop_new();
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    rec rd = rec_init(), wr = rec_init();
    dt_loop_add_fd(l, sv[0], DT_READABLE, on_fd, &rd);
    dt_loop_add_fd(l, sv[0], DT_WRITABLE, on_fd, &wr);
    cr_assert_eq(write(sv[1], "y", 1), 1);
    cr_assert_eq(dt_loop_run_once(l, 0), 2);
    cr_assert_eq(rd.calls, 1);
    cr_assert_eq(rd.mask, DT_READABLE);
    cr_assert_eq(wr.calls, 1);
    cr_assert_eq(wr.mask, DT_WRITABLE);
    cr_assert_eq(wr.ud, &wr);
    dt_loop_del_fd(l, sv[0], DT_WRITABLE);
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    cr_assert_eq(rd.calls, 2);
    cr_assert_eq(wr.calls, 1);
    /* mask 0 forgets the fd: nothing is left to wait for */
    dt_loop_del_fd(l, sv[0], 0);
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    cr_assert_eq(rd.calls, 2);
    close(sv[0]);
    close(sv[1]);
    dt_loop_free(l);
}

Test(loop, a_hang_up_reports_the_fd_readable)
{
    dt_loop *l = dt_loop_new();
    int p[2];
    pipe_or_die(p);
    rec r = rec_init();
    dt_loop_add_fd(l, p[0], DT_READABLE, on_fd, &r);
    close(p[1]);
    cr_assert_eq(dt_loop_run_once(l, 1000), 1);
    cr_assert_eq(r.calls, 1);
    char c;
    cr_assert_eq(read(p[0], &c, 1), 0, "the reader should see end of file");
    close(p[0]);
    dt_loop_free(l);
}

Test(loop, an_fd_removed_by_another_callback_in_the_same_iteration_is_not_called)
{
    dt_loop *l = dt_loop_new();
    int p[2], q[2];
    pipe_or_die(p);
    pipe_or_die(q);
    rec a = rec_init(), b = rec_init();
    a.del_fd = q[0];
    b.del_fd = p[0];
    dt_loop_add_fd(l, p[0], DT_READABLE, on_fd, &a);
    dt_loop_add_fd(l, q[0], DT_READABLE, on_fd, &b);
    cr_assert_eq(write(p[1], "1", 1), 1);
    cr_assert_eq(write(q[1], "2", 1), 1);
    /* whichever runs first removes the other */
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    cr_assert_eq(a.calls + b.calls, 1);
    int survivor = a.calls ? p[0] : q[0];
    /* the survivor is still watched, the removed one is not */
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    cr_assert_eq(a.calls + b.calls, 2);
    cr_assert_eq(a.calls ? a.fd : b.fd, survivor);
    cr_assert(a.calls == 2 || b.calls == 2, "the removed fd's callback ran");
    close(p[0]);
    close(p[1]);
    close(q[0]);
    close(q[1]);
    dt_loop_free(l);
}

Test(loop, an_fd_can_remove_itself_from_its_callback)
{
    dt_loop *l = dt_loop_new();
    int p[2];
    pipe_or_die(p);
    rec r = rec_init();
    r.del_fd = p[0];
    dt_loop_add_fd(l, p[0], DT_READABLE, on_fd, &r);
    cr_assert_eq(write(p[1], "z", 1), 1);
    cr_assert_eq(dt_loop_run_once(l, 0), 1);
    /* still readable, but no longer watched */
    cr_assert_eq(dt_loop_run_once(l, -1), 0);
    cr_assert_eq(r.calls, 1);
    close(p[0]);
    close(p[1]);
    dt_loop_free(l);
}

typedef struct sleeper {
    int calls;
    rec timer;
} sleeper;

static void before(dt_loop *l, void *ud)
{
    sleeper *s = ud;
    if (s->calls++ == 0)
        dt_loop_add_timer(l, 0, on_timer, &s->timer);
}

Test(loop, beforesleep_runs_once_per_iteration_before_the_wait)
{
    dt_loop *l = dt_loop_new();
    sleeper s = {.timer = rec_init()};
    dt_loop_set_beforesleep(l, before, &s);
    /* the timer it adds is due at once: this iteration waits for nothing */
    double t0 = dt_now();
    cr_assert_eq(dt_loop_run_once(l, 2000), 1);
    cr_assert_lt(dt_now() - t0, 1.5, "the wait ignored the timer beforesleep added");
    cr_assert_eq(s.calls, 1);
    cr_assert_eq(s.timer.calls, 1);
    cr_assert_eq(dt_loop_run_once(l, 0), 0);
    cr_assert_eq(s.calls, 2);
    dt_loop_free(l);
}

Test(loop, run_iterates_until_stop)
{
    dt_loop *l = dt_loop_new();
    rec r = rec_init();
    r.again = 1;
    r.stop_after = 5;
    dt_loop_add_timer(l, 0, on_timer, &r);
    cr_assert_not(dt_loop_stopped(l));
    dt_loop_run(l);
    cr_assert_eq(r.calls, 5);
    cr_assert(dt_loop_stopped(l));
    /* run clears the stop and goes on */
    r.stop_after = 7;
    dt_loop_run(l);
    cr_assert_eq(r.calls, 7);
    dt_loop_free(l);
}
