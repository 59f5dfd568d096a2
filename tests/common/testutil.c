/* testutil.c -- helpers shared by the test executables. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

const char *tu_src_dir(void)
{
    const char *s = getenv("DITTO_SRC");
    return (s && *s) ? s : ".";
}

static int is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

const char *tu_data_dir(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/tests/data", tu_src_dir());
    return path;
}

const char *tu_matrices_dir(void)
{
    static char path[4096];
    const char *env = getenv("DITTO_MATRICES");
    if (env && *env)
        snprintf(path, sizeof path, "%s", env);
    else
        snprintf(path, sizeof path, "%s/../shared/matrices", tu_src_dir());
    return is_dir(path) ? path : NULL;
}

char *tu_matrix(const char *name)
{
    const char *dirs[] = {getenv("DITTO_MATRICES"), tu_data_dir()};
    for (size_t d = 0; d < DT_ARRAY_LEN(dirs); d++) {
        if (dirs[d] == NULL || dirs[d][0] == '\0')
            continue;
        char *path = dt_xasprintf("%s/%s", dirs[d], name);
        if (is_file(path))
            return path;
        free(path);
        path = dt_xasprintf("%s/%s.gz", dirs[d], name);
        if (is_file(path))
            return path;
        free(path);
    }
    cr_assert_fail("test matrix %s is in neither %s nor $DITTO_MATRICES: add it there (gzip -9n) "
                   "with its line in tests/data/SOURCES.tsv",
                   name, tu_data_dir());
    return NULL;
}

const char *tu_ditto_bin(void)
{
    const char *s = getenv("DITTO_BIN");
    return (s && *s) ? s : "./ditto";
}

static char *slurp_fd(int fd)
{
    dt_buf b = DT_BUF_INIT;
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0)
        dt_buf_append(&b, chunk, (size_t)n);
    return dt_buf_take(&b);
}

tu_proc tu_run(const char *fmt, ...)
{
    tu_proc p = {0};
    dt_buf cmd = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&cmd, fmt, ap);
    va_end(ap);
    char errpath[] = "/tmp/ditto-test-err-XXXXXX";
    int errfd = mkstemp(errpath);
    cr_assert(errfd >= 0);
    int pipefd[2];
    cr_assert(pipe(pipefd) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(pipefd[1], 1);
        dup2(errfd, 2);
        close(pipefd[0]);
        close(pipefd[1]);
        execl("/bin/sh", "sh", "-c", cmd.data, (char *)NULL);
        _exit(127);
    }
    close(pipefd[1]);
    p.out = slurp_fd(pipefd[0]);
    close(pipefd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    p.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    lseek(errfd, 0, SEEK_SET);
    p.err = slurp_fd(errfd);
    close(errfd);
    unlink(errpath);
    dt_buf_free(&cmd);
    return p;
}

void tu_proc_free(tu_proc *p)
{
    free(p->out);
    free(p->err);
    p->out = p->err = NULL;
}

char *tu_tmpdir(void)
{
    char tmpl[] = "/tmp/ditto-test-XXXXXX";
    char *d = mkdtemp(tmpl);
    cr_assert(d != NULL);
    return dt_xstrdup(d);
}

void tu_rmtree(const char *dir)
{
    if (dir == NULL || strncmp(dir, "/tmp/ditto-test-", 16) != 0)
        return; /* refuse to remove anything else */
    tu_proc p = tu_run("rm -rf '%s'", dir);
    tu_proc_free(&p);
}

char *tu_write(const char *dir, const char *name, const char *text)
{
    char *path = dt_xasprintf("%s/%s", dir, name);
    dt_err e = {0};
    cr_assert(dt_write_file_atomic(path, text, strlen(text), &e) == 0, "%s", e.msg);
    return path;
}
