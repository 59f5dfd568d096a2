/* latency.c -- how fast the workbench answers while events pour in, and
 * what a 2,000-line diff costs to draw. Not a test: it prints numbers.
 *
 * A child process runs the workbench (tui/ui.h, in-process, no run behind
 * it) on a pseudo-terminal while a timer floods it with `text` events (and a
 * diagnostic now and then), as a fast LLM stream would. The parent plays
 * the terminal: it drains the output, and sends '/' and Enter in turn
 * (opening the search prompt, then closing it with an empty search),
 * noting when each key left. The
 * child notes when the loop saw the key and when the doupdate that showed
 * its effect returned; the difference is input-to-screen latency (both
 * clocks are CLOCK_MONOTONIC). Built and run by tests/tui/bench/run.sh. */
#include "tui/ui.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define KEYS 200           /* keys sent */
#define KEY_GAP_MS 25      /* between keys */
#define FLOOD_PER_MS 20    /* text events per millisecond of the flood timer */
#define DIFF_LINES 2000
#define DIFF_ROUNDS 20

typedef struct bench {
    tui_app *a;
    dt_loop *loop;
    long events;
    int drawn; /* keys up to here have been drawn */
    int nkeys;
    double t_read[KEYS + 8], t_drawn[KEYS + 8];
    double render_s;
    long renders;
    int step;
} bench;

static cJSON *text_event(int step, const char *t)
{
    cJSON *e = dt_json_obj();
    dt_json_set_str(e, "type", "text");
    dt_json_set_int(e, "step", step);
    dt_json_set_str(e, "text", t);
    return e;
}

static void feed(bench *b, cJSON *e)
{
    dt_json_set_num(e, "t", dt_wall_now());
    tui_app_event(b->a, e);
    cJSON_Delete(e);
    b->events++;
}

static long flood(dt_loop *l, long long id, void *ud)
{
    (void)l;
    (void)id;
    bench *b = ud;
    char line[160];
    for (int i = 0; i < FLOOD_PER_MS; i++) {
        snprintf(line, sizeof line, "token %ld of the reasoning stream, with some words%s",
                 b->events, i % 8 == 7 ? "\n" : " ");
        feed(b, text_event(b->step, line));
    }
    if (b->events % 2000 < FLOOD_PER_MS) {
        cJSON *d = dt_json_obj();
        dt_json_set_str(d, "type", "diagnostic");
        dt_json_set_int(d, "step", b->step);
        dt_json_set_str(d, "severity", "warning");
        dt_json_set_str(d, "source", "rule");
        dt_json_set_int(d, "line", 12);
        dt_json_set_str(d, "message", "a diagnostic in the flood");
        feed(b, d);
    }
    return 1;
}

static void before(dt_loop *l, void *ud)
{
    (void)l;
    bench *b = ud;
    double t0 = dt_now();
    tui_app_render(b->a);
    double t1 = dt_now();
    b->render_s += t1 - t0;
    b->renders++;
    while (b->drawn < b->nkeys)
        b->t_drawn[b->drawn++] = t1;
}

static void on_key(dt_loop *l, int fd, int mask, void *ud)
{
    (void)l;
    (void)fd;
    (void)mask;
    bench *b = ud;
    double t = dt_now();
    /* several keys can arrive in one read: each was seen now */
    int n = tui_app_input(b->a);
    for (int i = 0; i < n && b->nkeys < KEYS + 8; i++)
        b->t_read[b->nkeys++] = t;
}

static char *kernel(int variant)
{
    dt_buf s = DT_BUF_INIT;
    for (int i = 0; i < DIFF_LINES; i++) {
        if (variant && i % 40 == 3)
            dt_buf_printf(&s, "    acc%d = fmaf(__ldg(&val[k + %d]), x[col[k + %d]], acc%d);\n", i,
                          i, i, i);
        else
            dt_buf_printf(&s, "    acc%d += val[k + %d] * x[col[k + %d]];\n", i, i, i);
        if (variant && i % 97 == 50)
            dt_buf_printf(&s, "    __syncwarp(); // %d\n", i);
    }
    return dt_buf_take(&s);
}

static void artifact(bench *b, int step, int version, const char *src)
{
    cJSON *e = dt_json_obj();
    dt_json_set_str(e, "type", "artifact");
    dt_json_set_int(e, "step", step);
    dt_json_set_str(e, "name", "kernel");
    dt_json_set_int(e, "version", version);
    dt_json_set_str(e, "content", src);
    cJSON *j = dt_json_obj();
    dt_json_set_str(j, "source", src);
    dt_json_set_take(e, "json", j);
    feed(b, e);
}

static void step(bench *b, int id, const char *kind, int version)
{
    cJSON *e = dt_json_obj();
    dt_json_set_str(e, "type", "step_started");
    dt_json_set_int(e, "step", id);
    dt_json_set_str(e, "kind", kind);
    dt_json_set_int(e, "version", version);
    dt_json_set_str(e, "agent", "Code Generator");
    dt_json_set_take(e, "inputs", dt_json_obj());
    feed(b, e);
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static void stats(FILE *out, const char *what, double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    fprintf(out, "%-34s median %7.3f ms  p95 %7.3f ms  max %7.3f ms  (n=%d)\n", what,
            1e3 * v[n / 2], 1e3 * v[(int)(n * 0.95)], 1e3 * v[n - 1], n);
}

static int child(int report_fd)
{
    dt_loop *loop = dt_loop_new();
    tui_opts o = {.loop = loop};
    bench b = {.loop = loop};
    b.a = tui_app_new(&o, 0);
    dt_err e = {0};
    if (tui_app_open(b.a, &e) != 0) {
        dprintf(report_fd, "cannot open the terminal: %s\n", e.msg);
        return 1;
    }
    FILE *out = fdopen(report_fd, "w");
    cJSON *s = cJSON_Parse("{\"type\":\"session_started\",\"session\":\"bench\","
                           "\"spec\":{\"op\":\"spmv\",\"dtype\":\"fp32\",\"matrix\":\"gen:bench\"},"
                           "\"fingerprint\":{\"gpu\":\"none\"},\"backend\":\"llm\"}");
    feed(&b, s);
    /* the 2,000-line diff: the diff alone, the pane's lines, a full draw */
    char *v1 = kernel(0), *v2 = kernel(1);
    step(&b, 1, "generate", 1);
    artifact(&b, 1, 1, v1);
    step(&b, 2, "generate", 2);
    artifact(&b, 2, 2, v2);
    tui_app_focus(b.a, TUI_P_SOURCE);
    tui_app_render(b.a);
    double tdiff[DIFF_ROUNDS], tbuild[DIFF_ROUNDS], tdraw[DIFF_ROUNDS];
    int nops = 0;
    for (int r = 0; r < DIFF_ROUNDS; r++) {
        double t0 = dt_now();
        dt_diff d;
        dt_diff_text(v1, v2, &d);
        nops = d.nops;
        dt_diff_free(&d);
        double t1 = dt_now();
        tui_lines l = {0};
        tui_source_build(&b.a->model, 0, 1, 120, r & 1, 1, 1, &l);
        double t2 = dt_now();
        tui_lines_clear(&l);
        /* what the person waits for: rebuild (diff included) and repaint */
        b.a->src_whole = r & 1;
        b.a->panes[TUI_P_SOURCE].stale = 1;
        double t3 = dt_now();
        tui_app_render(b.a);
        double t4 = dt_now();
        tdiff[r] = t1 - t0;
        tbuild[r] = t2 - t1;
        tdraw[r] = t4 - t3;
    }
    b.a->src_whole = 1;
    free(v1);
    free(v2);
    /* the flood, on the step whose reasoning is shown */
    step(&b, 3, "generate", 3);
    b.step = 3;
    tui_app_focus(b.a, TUI_P_REASON);
    dt_loop_set_beforesleep(loop, before, &b);
    dt_loop_del_fd(loop, 0, 0);
    dt_loop_add_fd(loop, 0, DT_READABLE, on_key, &b);
    long long timer = dt_loop_add_timer(loop, 1, flood, &b);
    double start = dt_now();
    while (!b.a->quit)
        if (dt_loop_run_once(loop, -1) < 0)
            break;
    double secs = dt_now() - start;
    dt_loop_del_timer(loop, timer);
    long frames = b.a->frames;
    tui_app_close(b.a);
    tui_app_free(b.a);
    dt_loop_free(loop);
    fprintf(out, "diff %d lines (%d script rows):\n", DIFF_LINES, nops);
    stats(out, "  dt_diff_text", tdiff, DIFF_ROUNDS);
    stats(out, "  tui_source_build (diff + lines)", tbuild, DIFF_ROUNDS);
    stats(out, "  source pane rebuild + doupdate", tdraw, DIFF_ROUNDS);
    fprintf(out, "flood: %ld events in %.2f s = %.0f events/s; %ld frames (%.0f/s); "
                 "%.3f ms per loop turn's render on average\n",
            b.events, secs, b.events / secs, frames, frames / secs,
            1e3 * b.render_s / (b.renders ? b.renders : 1));
    fprintf(out, "KEYS %d\n", b.nkeys < KEYS ? b.nkeys : KEYS);
    for (int i = 0; i < b.nkeys && i < KEYS; i++)
        fprintf(out, "%.9f %.9f\n", b.t_read[i], b.t_drawn[i]);
    fclose(out);
    return 0;
}

int main(void)
{
    int rep[2];
    if (pipe(rep) != 0)
        return 1;
    struct winsize ws = {.ws_row = 48, .ws_col = 160};
    int master;
    setenv("TERM", "xterm-256color", 1);
    setenv("LANG", "C.UTF-8", 1);
    unsetenv("LC_ALL");
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    if (pid < 0) {
        perror("forkpty");
        return 1;
    }
    if (pid == 0) {
        close(rep[0]);
        _exit(child(rep[1]));
    }
    close(rep[1]);
    fcntl(master, F_SETFL, O_NONBLOCK);
    /* play the terminal: drain output; send keys at a steady pace */
    double t_sent[KEYS];
    long out_bytes = 0;
    double next = dt_now() + 1.0; /* let the flood get going */
    int sent = 0;
    double quit_at = 0;
    for (;;) {
        struct pollfd p = {.fd = master, .events = POLLIN};
        double now = dt_now();
        int ms = sent < KEYS ? (int)((next - now) * 1000) : 50;
        if (ms < 0)
            ms = 0;
        poll(&p, 1, ms);
        char buf[65536];
        ssize_t n;
        while ((n = read(master, buf, sizeof buf)) > 0)
            out_bytes += n;
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            break;
        now = dt_now();
        if (sent < KEYS && now >= next) {
            const char *k = sent % 2 == 0 ? "/" : "\r";
            t_sent[sent] = dt_now();
            if (write(master, k, 1) != 1)
                break;
            sent++;
            next = now + KEY_GAP_MS / 1000.0;
        } else if (sent == KEYS && quit_at == 0) {
            quit_at = now + 0.5;
        } else if (quit_at > 0 && now >= quit_at) {
            /* the last key closed the prompt: q quits */
            if (write(master, "q", 1) != 1)
                break;
            quit_at = 1e300;
        }
    }
    int st;
    waitpid(pid, &st, 0);
    FILE *in = fdopen(rep[0], "r");
    char line[512];
    double read_lat[KEYS], screen_lat[KEYS];
    int nk = 0;
    while (fgets(line, sizeof line, in)) {
        if (strncmp(line, "KEYS ", 5) == 0) {
            int cnt = atoi(line + 5);
            for (int i = 0; i < cnt && i < KEYS && fgets(line, sizeof line, in); i++) {
                double tr, td;
                if (sscanf(line, "%lf %lf", &tr, &td) == 2 && td > 0) {
                    read_lat[nk] = tr - t_sent[i];
                    screen_lat[nk] = td - t_sent[i];
                    nk++;
                }
            }
            continue;
        }
        fputs(line, stdout);
    }
    printf("terminal output: %.1f MB\n", out_bytes / 1e6);
    if (nk > 0) {
        printf("input with the flood running (%d keys, '/' and Enter, %d ms apart):\n", nk,
               KEY_GAP_MS);
        stats(stdout, "  key sent -> loop reads it", read_lat, nk);
        stats(stdout, "  key sent -> doupdate returned", screen_lat, nk);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
