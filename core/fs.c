/* fs.c -- whole-file reads, atomic writes, directories and XDG locations. */
#include "core.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *dt_read_file_max(const char *path, size_t max, size_t *len, dt_err *e)
{
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        dt_err_set(e, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        dt_err_set(e, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        dt_err_set(e, "%s: not a regular file (%s); give the path of a file", path,
                   S_ISDIR(st.st_mode)    ? "a folder"
                   : S_ISCHR(st.st_mode)  ? "a character device"
                   : S_ISBLK(st.st_mode)  ? "a block device"
                   : S_ISFIFO(st.st_mode) ? "a pipe"
                                          : "a socket or other special file");
        close(fd);
        return NULL;
    }
    char have[32], lim[32];
    if ((uint64_t)st.st_size > max) {
        dt_err_set(e, "%s: %s, over the %s this kind of file may have", path,
                   dt_fmt_bytes((double)st.st_size, have, sizeof have),
                   dt_fmt_bytes((double)max, lim, sizeof lim));
        close(fd);
        return NULL;
    }
    dt_buf b = DT_BUF_INIT;
    dt_buf_reserve(&b, (size_t)st.st_size + 1);
    b.data[0] = '\0'; /* reserve leaves the memory as it was */
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            dt_err_set(e, "%s: read error: %s", path, strerror(errno));
            close(fd);
            dt_buf_free(&b);
            return NULL;
        }
        if (n == 0)
            break;
        if (b.len + (size_t)n > max) { /* it grew while we read */
            dt_err_set(e, "%s: grew past the %s this kind of file may have while being read", path,
                       dt_fmt_bytes((double)max, lim, sizeof lim));
            close(fd);
            dt_buf_free(&b);
            return NULL;
        }
        dt_buf_append(&b, chunk, (size_t)n);
    }
    close(fd);
    if (len)
        *len = b.len;
    return dt_buf_take(&b);
}

char *dt_read_file(const char *path, size_t *len, dt_err *e)
{
    return dt_read_file_max(path, DT_READ_MAX, len, e);
}

int dt_write_file_atomic(const char *path, const void *data, size_t len, dt_err *e)
{
    char *tmp = dt_xasprintf("%s.tmp.%ld", path, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0) {
        dt_err_set(e, "%s: %s", tmp, strerror(errno));
        free(tmp);
        return -1;
    }
    const char *p = data;
    size_t left = len;
    while (left > 0) {
        ssize_t w = write(fd, p, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            dt_err_set(e, "%s: write: %s", tmp, strerror(errno));
            goto err;
        }
        p += w;
        left -= (size_t)w;
    }
    if (fsync(fd) != 0) {
        dt_err_set(e, "%s: fsync: %s", tmp, strerror(errno));
        goto err;
    }
    if (close(fd) != 0) {
        fd = -1;
        dt_err_set(e, "%s: close: %s", tmp, strerror(errno));
        goto err;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        dt_err_set(e, "%s: rename to %s: %s", tmp, path, strerror(errno));
        goto err;
    }
    free(tmp);
    return 0;
err:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    free(tmp);
    return -1;
}

int dt_mkdir_p(const char *path, dt_err *e)
{
    char *p = dt_xstrdup(path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/')
        p[--n] = '\0';
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            dt_err_set(e, "%s: %s", p, strerror(errno));
            free(p);
            return -1;
        }
        *s = '/';
    }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) {
        dt_err_set(e, "%s: %s", p, strerror(errno));
        free(p);
        return -1;
    }
    struct stat st;
    if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
        dt_err_set(e, "%s: exists and is not a directory", p);
        free(p);
        return -1;
    }
    free(p);
    return 0;
}

int dt_file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static char *xdg_dir(const char *var, const char *fallback)
{
    const char *v = getenv(var);
    if (v != NULL && v[0] == '/')
        return dt_xasprintf("%s/ditto", v);
    const char *home = getenv("HOME");
    if (home == NULL || home[0] == '\0')
        return NULL;
    return dt_xasprintf("%s/%s/ditto", home, fallback);
}

char *dt_config_dir(void)
{
    return xdg_dir("XDG_CONFIG_HOME", ".config");
}

char *dt_data_dir(void)
{
    return xdg_dir("XDG_DATA_HOME", ".local/share");
}

char *dt_cache_dir(void)
{
    return xdg_dir("XDG_CACHE_HOME", ".cache");
}

char *dt_exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    return dt_xstrdup(dirname(buf));
}

static int path_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

char *dt_share_path(const char *rel)
{
    const char *env = getenv("DITTO_SHARE");
    if (env != NULL && *env) {
        char *p = dt_xasprintf("%s/%s", env, rel);
        if (path_exists(p))
            return p;
        free(p);
    }
    char *exe = dt_exe_dir();
    if (exe == NULL)
        return NULL;
    /* bundle, install, source checkout, and build/dbg/ for the test binary */
    static const char *layouts[] = {"share/ditto/", "../share/ditto/", "", "../../"};
    for (size_t i = 0; i < DT_ARRAY_LEN(layouts); i++) {
        char *p = dt_xasprintf("%s/%s%s", exe, layouts[i], rel);
        if (path_exists(p)) {
            free(exe);
            return p;
        }
        free(p);
    }
    free(exe);
    return NULL;
}

int64_t dt_mem_available(void)
{
    const char *env = getenv("DITTO_MEM_AVAILABLE");
    int64_t v = 0;
    if (env != NULL && *env && dt_parse_size(env, &v) == 0)
        return v;
    FILE *f = fopen("/proc/meminfo", "r");
    if (f == NULL)
        return -1;
    char line[256];
    int64_t kb = -1;
    while (fgets(line, sizeof line, f) != NULL) {
        long long x = 0;
        if (sscanf(line, "MemAvailable: %lld kB", &x) == 1) {
            kb = x;
            break;
        }
    }
    fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}
