/* term.c -- the terminal: curses on and off, stderr captured while the
 * screen is ours, and handlers that restore the terminal before a crash or
 * a kill takes the process down. */
#include "tui/ui.h"

#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t curses_on; /* endwin is due before dying */
static SCREEN *screen;
static int saved_stderr = -1; /* the real stderr while fd 2 is the pipe */
static int err_r = -1, err_w = -1;
static int winch_r = -1, winch_w = -1;
static int utf8_locale;

static const int fatal_sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT,
                                 SIGTERM, SIGINT, SIGHUP, SIGQUIT};
static struct sigaction old_fatal[DT_ARRAY_LEN(fatal_sigs)];
static int installed[DT_ARRAY_LEN(fatal_sigs)];
static struct sigaction old_winch;

/* Copy what stderr got and nobody read to the real stderr: a crash report
 * written while the screen was ours must not be lost. Only read(2) and
 * write(2): it runs inside signal handlers too. */
static void drain_captured(void)
{
    if (err_r < 0 || saved_stderr < 0)
        return;
    char buf[4096];
    ssize_t n;
    while ((n = read(err_r, buf, sizeof buf)) > 0) {
        ssize_t w = write(saved_stderr, buf, (size_t)n);
        (void)w;
    }
}

static void on_fatal(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    int saved_errno = errno;
    if (curses_on) {
        curses_on = 0;
        /* endwin is not async-signal-safe; like htop's crash handler we take
         * that risk, because a terminal left in raw mode is certain harm. */
        endwin();
    }
    drain_captured();
    if (saved_stderr >= 0)
        dup2(saved_stderr, 2);
    for (size_t i = 0; i < DT_ARRAY_LEN(fatal_sigs); i++)
        if (fatal_sigs[i] == sig && installed[i])
            sigaction(sig, &old_fatal[i], NULL);
    /* A fault repeats when we return (the instruction runs again), now
     * reaching the previous handler -- ASan's, or the default core dump --
     * with its real context; anything else (a kill, the kernel's SIGHUP
     * when the terminal goes away) has to be raised again. */
    int fault = (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) && info &&
                info->si_code > 0;
    if (!fault)
        raise(sig);
    errno = saved_errno;
}

static void on_winch(int sig)
{
    (void)sig;
    int saved_errno = errno;
    if (winch_w >= 0) {
        ssize_t w = write(winch_w, "w", 1);
        (void)w;
    }
    errno = saved_errno;
}

static int make_pipe(int *r, int *w)
{
    int fd[2];
    if (pipe2(fd, O_CLOEXEC | O_NONBLOCK) != 0)
        return -1;
    *r = fd[0];
    *w = fd[1];
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

int tui_term_utf8(void)
{
    return utf8_locale;
}

int tui_term_open(int *err_fd, int *winch_fd, dt_err *e)
{
    if (!isatty(0) || !isatty(1))
        return dt_err_set(e, "the workbench needs a terminal on stdin and stdout (ditto run works "
                             "without one)");
    /* Characters from the environment; numbers stay in the C locale, so
     * that JSON and the session log keep their decimal points. */
    setlocale(LC_ALL, "");
    setlocale(LC_NUMERIC, "C");
    utf8_locale = strcmp(nl_langinfo(CODESET), "UTF-8") == 0;
    if (make_pipe(&winch_r, &winch_w) != 0 || make_pipe(&err_r, &err_w) != 0) {
        close_fd(&winch_r);
        close_fd(&winch_w);
        return dt_err_set(e, "pipe: %s", strerror(errno));
    }
    /* Our SIGWINCH handler before curses: ncurses then leaves it alone, and
     * a resize wakes the event loop through the pipe instead of waiting for
     * the next key. */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_winch;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGWINCH, &sa, &old_winch);
    /* Ours before curses too: ncurses installs its own SIGINT and SIGTERM
     * handlers (endwin, then exit(1)) only where it finds the default, and
     * a kill must end as a kill, not as a normal exit. */
    for (size_t i = 0; i < DT_ARRAY_LEN(fatal_sigs); i++) {
        struct sigaction cur;
        sigaction(fatal_sigs[i], NULL, &cur);
        /* an ignored signal (nohup's SIGHUP) stays ignored */
        if (cur.sa_handler == SIG_IGN && !(cur.sa_flags & SA_SIGINFO))
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_sigs[i], &sa, &old_fatal[i]);
        installed[i] = 1;
    }
    screen = newterm(NULL, stdout, stdin);
    if (screen == NULL) {
        for (size_t i = 0; i < DT_ARRAY_LEN(fatal_sigs); i++) {
            if (installed[i])
                sigaction(fatal_sigs[i], &old_fatal[i], NULL);
            installed[i] = 0;
        }
        sigaction(SIGWINCH, &old_winch, NULL);
        close_fd(&winch_r);
        close_fd(&winch_w);
        close_fd(&err_r);
        close_fd(&err_w);
        const char *t = getenv("TERM");
        return dt_err_set(e, "cannot drive the terminal (TERM=%s)", t ? t : "unset");
    }
    curses_on = 1;
    cbreak();
    noecho();
    nonl();
    keypad(stdscr, TRUE);
    curs_set(0);
    /* Esc answers at once (see TUI_ESCDELAY_MS); ESCDELAY in the
     * environment still wins. */
    const char *ed = getenv("ESCDELAY");
    if (ed == NULL || *ed == '\0')
        set_escdelay(TUI_ESCDELAY_MS);
    mousemask(BUTTON1_PRESSED | BUTTON4_PRESSED | BUTTON5_PRESSED, NULL);
    mouseinterval(0);
    saved_stderr = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (saved_stderr >= 0)
        dup2(err_w, 2);
    *err_fd = err_r;
    *winch_fd = winch_r;
    return 0;
}

void tui_term_close(void)
{
    if (screen == NULL)
        return;
    if (curses_on) {
        curses_on = 0;
        endwin();
    }
    if (saved_stderr >= 0) {
        dup2(saved_stderr, 2);
        drain_captured();
        close(saved_stderr);
        saved_stderr = -1;
    }
    for (size_t i = 0; i < DT_ARRAY_LEN(fatal_sigs); i++) {
        if (installed[i])
            sigaction(fatal_sigs[i], &old_fatal[i], NULL);
        installed[i] = 0;
    }
    sigaction(SIGWINCH, &old_winch, NULL);
    /* No delscreen: the panel library keeps a root panel for stdscr that no
     * API frees, and delscreen would turn it into a leak; the screen stays
     * reachable until exit, and a later newterm makes a fresh one. */
    screen = NULL;
    close_fd(&err_r);
    close_fd(&err_w);
    close_fd(&winch_r);
    close_fd(&winch_w);
}

void tui_term_suspend(void)
{
    def_prog_mode();
    curses_on = 0;
    endwin();
    if (saved_stderr >= 0)
        dup2(saved_stderr, 2);
}

void tui_term_resume(void)
{
    if (saved_stderr >= 0)
        dup2(err_w, 2);
    reset_prog_mode();
    curses_on = 1;
}
