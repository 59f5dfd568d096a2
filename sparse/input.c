/* input.c -- opening a matrix input: a plain file, a gzip-compressed one
 * (.mtx.gz, as SuiteSparse users download them), or standard input ("-").
 *
 * Plain regular files are opened with fopen, so the readers keep their size
 * (it bounds preallocation) and stdio's speed. Anything else goes through
 * zlib, which passes uncompressed bytes through unchanged: standard input
 * may then be plain or gzip alike. The first bytes are peeked for format
 * detection and served again by the stream. */
#include "sparse/sparse.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

typedef struct gz_cookie {
    gzFile gz;
    char head[SP_INPUT_HEAD]; /* bytes read ahead for detection, served first */
    size_t head_len, head_pos;
} gz_cookie;

static ssize_t gz_cookie_read(void *c, char *buf, size_t size)
{
    gz_cookie *g = c;
    size_t done = 0;
    if (g->head_pos < g->head_len) {
        done = g->head_len - g->head_pos;
        if (done > size)
            done = size;
        memcpy(buf, g->head + g->head_pos, done);
        g->head_pos += done;
    }
    while (done < size) {
        unsigned want = size - done > (1u << 30) ? (1u << 30) : (unsigned)(size - done);
        int n = gzread(g->gz, buf + done, want);
        if (n < 0) {
            int zerr = 0;
            (void)gzerror(g->gz, &zerr);
            errno = zerr == Z_ERRNO ? errno : EIO;
            return done > 0 ? (ssize_t)done : -1;
        }
        if (n == 0)
            break;
        done += (size_t)n;
    }
    return (ssize_t)done;
}

static int gz_cookie_close(void *c)
{
    gz_cookie *g = c;
    int rc = gzclose(g->gz) == Z_OK ? 0 : EOF;
    free(g);
    return rc;
}

static int is_gzip(const char *b, size_t n)
{
    return n >= 2 && (unsigned char)b[0] == 0x1f && (unsigned char)b[1] == 0x8b;
}

/* A stream over fd through zlib, with the first bytes already read into
 * head. Takes fd (closed with the stream, or here on failure). */
static FILE *open_gz(int fd, const char *name, char *head, size_t *head_len, dt_err *e)
{
    gzFile gz = gzdopen(fd, "rb");
    if (gz == NULL) {
        close(fd);
        dt_err_set(e, "%s: cannot open for reading: out of memory", name);
        return NULL;
    }
    gzbuffer(gz, 1 << 18);
    gz_cookie *g = calloc(1, sizeof *g);
    if (g == NULL) {
        gzclose(gz);
        dt_err_set(e, "%s: out of memory", name);
        return NULL;
    }
    g->gz = gz;
    int n = gzread(gz, g->head, sizeof g->head);
    if (n < 0) {
        int zerr = 0;
        const char *msg = gzerror(gz, &zerr);
        dt_err_set(e, "%s: %s (is it a damaged .gz file?)", name,
                   zerr == Z_ERRNO ? strerror(errno) : msg);
        gzclose(gz);
        free(g);
        return NULL;
    }
    g->head_len = (size_t)n;
    memcpy(head, g->head, g->head_len);
    *head_len = g->head_len;
    cookie_io_functions_t io = {.read = gz_cookie_read, .close = gz_cookie_close};
    FILE *f = fopencookie(g, "rb", io);
    if (f == NULL) {
        gzclose(gz);
        free(g);
        dt_err_set(e, "%s: out of memory", name);
    }
    return f;
}

FILE *sp_input_open(const char *path, char head[SP_INPUT_HEAD], size_t *head_len, dt_err *e)
{
    *head_len = 0;
    if (strcmp(path, "-") == 0) {
        int fd = dup(STDIN_FILENO);
        if (fd < 0) {
            dt_err_set(e, "(stdin): %s", strerror(errno));
            return NULL;
        }
        return open_gz(fd, "(stdin)", head, head_len, e);
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int saved = errno;
        dt_err_set(e, "%s: %s", path, strerror(saved));
        if (e && saved == ENOENT)
            e->code = SP_ENOTFOUND;
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return open_gz(fd, path, head, head_len, e); /* a pipe: read once, through zlib */
    ssize_t n = pread(fd, head, SP_INPUT_HEAD, 0);
    if (n < 0) {
        dt_err_set(e, "%s: read error: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (is_gzip(head, (size_t)n))
        return open_gz(fd, path, head, head_len, e);
    FILE *f = fdopen(fd, "rb");
    if (f == NULL) {
        dt_err_set(e, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    *head_len = (size_t)n;
    return f;
}

const char *sp_input_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "(stdin)" : path;
}

int sp_input_is_smtx(const char *path, const char *head, size_t head_len)
{
    if (head_len >= 14 && strncmp(head, "%%MatrixMarket", 14) == 0)
        return 0;
    if (dt_endswith(path, ".smtx") || dt_endswith(path, ".smtx.gz"))
        return 1;
    /* A stream without a name: a DLMC file starts "rows, cols, nnz". */
    if (strcmp(path, "-") != 0 || head_len == 0)
        return 0;
    const char *p = head, *end = head + head_len;
    while (p < end && *p >= '0' && *p <= '9')
        p++;
    return p > head && p < end && *p == ',';
}
