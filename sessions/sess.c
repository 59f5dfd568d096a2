/* sess.c -- the session store: folders, the append-only event log, artifacts, reading back. */
#include "sessions/sessions.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define LOG_NAME "events.jsonl"

struct sess {
    char *id;
    char *dir;
    char *log_path;
    int fd;          /* events.jsonl, O_APPEND, flock'd exclusively */
    long next_seq;   /* 1 + the last seq written */
    off_t size;      /* bytes of whole lines in the log: where a failed write is cut back to */
    int broken;      /* a failed write could not be undone: the log's tail is unknown */
    dt_buf warnings; /* what sess_open tolerated */
};

/* ---- small helpers ------------------------------------------------------ */

static int err_code(dt_err *e, int code)
{
    if (e)
        e->code = code;
    return -1;
}

/* The whole buffer, looping on short writes and EINTR. Returns the bytes
 * written before a failure through *done. */
static int write_all(int fd, const char *p, size_t n, size_t *done)
{
    *done = 0;
    while (*done < n) {
        ssize_t w = write(fd, p + *done, n - *done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (w == 0) {
            errno = EIO; /* a regular file never accepts 0 bytes for n > 0 */
            return -1;
        }
        *done += (size_t)w;
    }
    return 0;
}

/* Read a whole file of the session folder without following a symbolic
 * link (a link planted in a session must not make resume read, or later
 * truncate, a file elsewhere). NULL with e and errno set on failure. */
static char *read_nofollow(const char *path, size_t *len, dt_err *e)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int saved = errno;
        if (saved == ELOOP)
            dt_err_set(e, "%s is a symbolic link: refused (a session's files are never "
                          "followed; put the file itself there)", path);
        else
            dt_err_set(e, "%s: %s", path, strerror(saved));
        errno = saved;
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        dt_err_set(e, "%s: not a regular file: refused", path);
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    dt_buf b = DT_BUF_INIT;
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            int saved = errno;
            dt_err_set(e, "%s: read error: %s", path, strerror(saved));
            close(fd);
            dt_buf_free(&b);
            errno = saved;
            return NULL;
        }
        if (n == 0)
            break;
        dt_buf_append(&b, chunk, (size_t)n);
    }
    close(fd);
    if (len)
        *len = b.len;
    return dt_buf_take(&b);
}

/* A rename or a new file is durable only once its folder is fsync'd. */
static int fsync_dir(const char *dir, dt_err *e)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        dt_err_set(e, "%s: %s", dir, strerror(errno));
        return err_code(e, SESS_EIO);
    }
    int rc = fsync(fd);
    int saved = errno;
    close(fd);
    if (rc != 0) {
        dt_err_set(e, "%s: fsync: %s", dir, strerror(saved));
        return err_code(e, SESS_EIO);
    }
    return 0;
}

/* Artifact and session names are plain file names: nothing that could
 * leave the folder, hide, or replace the store's own files. */
static int check_artifact_name(const char *name, dt_err *e)
{
    static const char *reserved[] = {"spec.json", "fingerprint.json", LOG_NAME};
    const char *why = NULL;
    if (name == NULL || name[0] == '\0')
        why = "empty";
    else if (strchr(name, '/'))
        why = "has a '/'";
    else if (strstr(name, ".."))
        why = "has '..'";
    else if (name[0] == '.')
        why = "starts with '.'";
    else if (strlen(name) > 200)
        why = "longer than 200 bytes";
    for (size_t i = 0; why == NULL && i < DT_ARRAY_LEN(reserved); i++) {
        if (strcmp(name, reserved[i]) == 0)
            why = "is one of the store's own files";
    }
    if (why == NULL)
        return 0;
    dt_err_set(e, "artifact name '%s' refused: %s (a plain file name such as kernel_v3.cu)",
               name ? name : "(null)", why);
    return err_code(e, SESS_EINVAL);
}

/* 4 characters of [0-9a-z]: /dev/urandom, else a generator seeded by time
 * and pid so that two processes started in the same second still differ. */
static void random_suffix(char out[5])
{
    static const char alphabet[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    unsigned char raw[4] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, raw, sizeof raw) : -1;
    if (fd >= 0)
        close(fd);
    if (got != (ssize_t)sizeof raw) {
        static uint64_t counter;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        dt_rng r;
        dt_rng_seed(&r, ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
                            ((uint64_t)getpid() << 32) ^ ++counter);
        for (int i = 0; i < 4; i++)
            raw[i] = (unsigned char)dt_rng_below(&r, 256);
    }
    for (int i = 0; i < 4; i++)
        out[i] = alphabet[raw[i] % 36];
    out[4] = '\0';
}

char *sess_root(const char *dir)
{
    if (dir != NULL)
        return dt_xstrdup(dir);
    char *data = dt_data_dir();
    if (data == NULL)
        return NULL;
    char *root = dt_xasprintf("%s/sessions", data);
    free(data);
    return root;
}

/* The folder of a session: a path (anything with a '/') as given, else
 * ROOT/ID. The folder must exist and hold events.jsonl. Caller frees. */
static char *resolve_dir(const char *root, const char *id_or_path, dt_err *e)
{
    if (id_or_path == NULL || id_or_path[0] == '\0') {
        dt_err_set(e, "no session id given");
        err_code(e, SESS_EINVAL);
        return NULL;
    }
    char *dir = NULL;
    char *rootdir = NULL;
    if (strchr(id_or_path, '/')) {
        dir = dt_xstrdup(id_or_path);
        size_t n = strlen(dir);
        while (n > 1 && dir[n - 1] == '/')
            dir[--n] = '\0';
    } else {
        rootdir = sess_root(root);
        if (rootdir == NULL) {
            dt_err_set(e, "no session folder: neither XDG_DATA_HOME nor HOME is set "
                          "(give --session-dir)");
            err_code(e, SESS_ENOTFOUND);
            return NULL;
        }
        if (id_or_path[0] == '.') {
            /* ".", ".." and the hidden folders of sessions being created */
            dt_err_set(e, "no session '%s' under %s", id_or_path, rootdir);
            err_code(e, SESS_ENOTFOUND);
            free(rootdir);
            return NULL;
        }
        dir = dt_xasprintf("%s/%s", rootdir, id_or_path);
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        if (rootdir)
            dt_err_set(e, "no session '%s' under %s", id_or_path, rootdir);
        else
            dt_err_set(e, "no session at %s", dir);
        err_code(e, SESS_ENOTFOUND);
        free(rootdir);
        free(dir);
        return NULL;
    }
    char *log = dt_xasprintf("%s/" LOG_NAME, dir);
    int ok = dt_file_exists(log);
    free(log);
    if (!ok) {
        dt_err_set(e, "%s: not a session folder (no " LOG_NAME ")", dir);
        err_code(e, SESS_ENOTFOUND);
        free(rootdir);
        free(dir);
        return NULL;
    }
    free(rootdir);
    return dir;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- parsing the log ---------------------------------------------------- */

/* What parse_log found, beyond the events themselves. */
typedef struct parsed {
    long last_seq;   /* 0 when no event */
    size_t good_len; /* bytes of the accepted lines: where a partial tail starts */
    int truncated;
    int finished;
} parsed;

static int is_blank(const char *p, const char *end)
{
    for (; p < end; p++) {
        if (*p != ' ' && *p != '\t' && *p != '\r')
            return 0;
    }
    return 1;
}

/* Parse one line as a JSON value with nothing but blanks after it. On
 * failure returns NULL and writes why into why. */
static cJSON *parse_line(const char *p, size_t n, char *why, size_t whylen)
{
    if (memchr(p, '\0', n)) {
        snprintf(why, whylen, "a NUL byte at column %d",
                 (int)((const char *)memchr(p, '\0', n) - p) + 1);
        return NULL;
    }
    if (is_blank(p, p + n)) {
        snprintf(why, whylen, "empty line");
        return NULL;
    }
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithLengthOpts(p, n, &end, 0);
    if (v != NULL && end != NULL && is_blank(end, p + n))
        return v;
    size_t off = (end != NULL && end >= p && end <= p + n) ? (size_t)(end - p) : 0;
    if (v != NULL)
        snprintf(why, whylen, "text after the value at column %zu: '%.20s'", off + 1, end);
    else if (off >= n)
        snprintf(why, whylen, "the line ends inside a value (column %zu)", off + 1);
    else
        snprintf(why, whylen, "column %zu near '%.20s'", off + 1, p + off);
    cJSON_Delete(v);
    return NULL;
}

/* Check one parsed event against the log's rules; 0 or -1 with e set. */
static int check_event(const cJSON *ev, const char *path, int line, long prev, long *seq, dt_err *e)
{
    if (!cJSON_IsObject(ev)) {
        dt_err_set(e, "%s:%d: not a JSON object", path, line);
        return err_code(e, SESS_ECORRUPT);
    }
    if (!cJSON_IsString(cJSON_GetObjectItemCaseSensitive(ev, "type"))) {
        dt_err_set(e, "%s:%d: missing \"type\"", path, line);
        return err_code(e, SESS_ECORRUPT);
    }
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(ev, "seq");
    if (!cJSON_IsNumber(s)) {
        dt_err_set(e, "%s:%d: missing \"seq\"", path, line);
        return err_code(e, SESS_ECORRUPT);
    }
    double d = s->valuedouble;
    if (!(d >= 1 && d <= 9e15 && d == (double)(long)d)) {
        dt_err_set(e, "%s:%d: seq %g is not a positive integer", path, line, d);
        return err_code(e, SESS_ECORRUPT);
    }
    if ((long)d <= prev) {
        dt_err_set(e, "%s:%d: seq %ld after %ld", path, line, (long)d, prev);
        return err_code(e, SESS_ECORRUPT);
    }
    *seq = (long)d;
    return 0;
}

/* Parse events.jsonl's text into events (an array). A partial last line is
 * dropped with a warning; any other bad line fails. */
static int parse_log(const char *path, const char *text, size_t len, cJSON *events, parsed *out,
                     dt_buf *warnings, dt_err *e)
{
    memset(out, 0, sizeof *out);
    size_t pos = 0;
    int line = 0;
    while (pos < len) {
        line++;
        const char *start = text + pos;
        const char *nl = memchr(start, '\n', len - pos);
        size_t n = nl ? (size_t)(nl - start) : len - pos;
        size_t next = pos + n + (nl ? 1 : 0);
        int last = next >= len;
        char why[128];
        cJSON *ev = parse_line(start, n, why, sizeof why);
        if (nl == NULL) {
            /* No newline: the writer died inside its write(2) (each event
             * is written with its newline), whatever the bytes say. */
            cJSON_Delete(ev);
            dt_buf_printf(warnings,
                          "%s:%d: partial last line dropped (%zu bytes without a newline: "
                          "the writer stopped mid-event)\n",
                          path, line, n);
            out->truncated = 1;
            break;
        }
        if (ev == NULL && last) {
            dt_buf_printf(warnings, "%s:%d: partial last line dropped (not JSON: %s)\n", path, line,
                          why);
            out->truncated = 1;
            break;
        }
        if (ev == NULL) {
            dt_err_set(e, "%s:%d: not JSON: %s", path, line, why);
            return err_code(e, SESS_ECORRUPT);
        }
        long seq = 0;
        if (check_event(ev, path, line, out->last_seq, &seq, e) != 0) {
            cJSON_Delete(ev);
            return -1;
        }
        out->last_seq = seq;
        /* A run that ended on a failure can be resumed: not finished. */
        if (dt_streq(dt_json_str(ev, "type", ""), "session_finished"))
            out->finished =
                !dt_json_bool(cJSON_GetObjectItem(ev, "result"), "resumable", 0);
        cJSON_AddItemToArray(events, ev);
        pos = next;
        out->good_len = pos;
    }
    return 0;
}

/* Read DIR's log into a new sess_log, also reporting what parse_log found. */
static sess_log *read_log_dir(char *dir, parsed *info, dt_err *e)
{
    sess_log *l = dt_xcalloc(1, sizeof *l);
    l->dir = dir;
    l->id = dt_xstrdup(base_name(dir));
    l->events = dt_json_arr();
    char *path = dt_xasprintf("%s/" LOG_NAME, dir);
    size_t len = 0;
    dt_err re = {0};
    char *text = read_nofollow(path, &len, &re);
    if (text == NULL) {
        int saved = errno;
        dt_err_set(e, "%s", re.msg);
        err_code(e, saved == ENOENT ? SESS_ENOTFOUND : SESS_EIO);
        goto fail;
    }
    int rc = parse_log(path, text, len, l->events, info, &l->warnings, e);
    free(text);
    if (rc != 0)
        goto fail;
    l->truncated = info->truncated;
    l->finished = info->finished;
    static const char *names[] = {"spec.json", "fingerprint.json"};
    for (int i = 0; i < 2; i++) {
        char *p = dt_xasprintf("%s/%s", dir, names[i]);
        dt_err je = {0};
        cJSON *v = NULL;
        size_t jl = 0;
        char *jt = NULL;
        if (!dt_file_exists(p))
            dt_buf_printf(&l->warnings, "%s: missing\n", p);
        else if ((jt = read_nofollow(p, &jl, &je)) == NULL)
            dt_buf_printf(&l->warnings, "%s\n", je.msg);
        else if ((v = dt_json_parse(jt, jl, p, &je)) == NULL)
            dt_buf_printf(&l->warnings, "%s\n", je.msg);
        free(jt);
        if (i == 0)
            l->spec = v;
        else
            l->fingerprint = v;
        free(p);
    }
    free(path);
    return l;
fail:
    free(path);
    sess_log_free(l);
    return NULL;
}

sess_log *sess_log_read(const char *root, const char *id_or_path, dt_err *e)
{
    char *dir = resolve_dir(root, id_or_path, e);
    if (dir == NULL)
        return NULL;
    parsed info;
    return read_log_dir(dir, &info, e);
}

void sess_log_free(sess_log *l)
{
    if (l == NULL)
        return;
    free(l->id);
    free(l->dir);
    cJSON_Delete(l->spec);
    cJSON_Delete(l->fingerprint);
    cJSON_Delete(l->events);
    dt_buf_free(&l->warnings);
    free(l);
}

cJSON *sess_log_flags(const cJSON *events)
{
    cJSON *flags = NULL;
    const cJSON *ev;
    cJSON_ArrayForEach(ev, events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (dt_streq(type, "session_started") || dt_streq(type, "session_resumed")) {
            const cJSON *f = cJSON_GetObjectItem(ev, "flags");
            if (cJSON_IsObject(f)) {
                cJSON_Delete(flags);
                flags = cJSON_Duplicate(f, 1);
            }
            continue;
        }
        /* a person's switch in the workbench: what they chose last */
        const char *set = dt_json_str(ev, "setting", NULL);
        const char *val = dt_json_str(ev, "value", NULL);
        if (flags == NULL || !dt_streq(type, "log") || set == NULL || val == NULL ||
            !dt_streq(dt_json_str(ev, "by", ""), "person"))
            continue;
        if (!dt_streq(set, "backend") && !dt_streq(set, "model") && !dt_streq(set, "endpoint"))
            continue;
        cJSON_DeleteItemFromObject(flags, set);
        if (dt_streq(set, "endpoint")) {
            cJSON_DeleteItemFromObject(flags, "endpoint_not_recorded");
            if (dt_json_bool(ev, "redacted", 0)) {
                dt_json_set_str(flags, "endpoint_not_recorded", val);
                continue;
            }
        }
        dt_json_set_str(flags, set, val);
    }
    return flags;
}

/* ---- writing ------------------------------------------------------------ */

static sess *sess_new(char *dir)
{
    sess *s = dt_xcalloc(1, sizeof *s);
    s->fd = -1;
    s->dir = dir;
    s->id = dt_xstrdup(base_name(dir));
    s->log_path = dt_xasprintf("%s/" LOG_NAME, dir);
    s->next_seq = 1;
    return s;
}

/* Open the log for appending and take the writer's lock. */
static int open_log(sess *s, dt_err *e)
{
    s->fd = open(s->log_path, O_WRONLY | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (s->fd < 0) {
        if (errno == ELOOP)
            dt_err_set(e, "%s is a symbolic link: refused (a session's files are never "
                          "followed; put the file itself there)", s->log_path);
        else
            dt_err_set(e, "%s: %s", s->log_path, strerror(errno));
        return err_code(e, SESS_EIO);
    }
    struct stat st;
    if (fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        dt_err_set(e, "%s: not a regular file: refused", s->log_path);
        return err_code(e, SESS_EIO);
    }
    /* O_NONBLOCK only kept a planted FIFO from blocking the open. */
    fcntl(s->fd, F_SETFL, O_APPEND);
    if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK) {
            dt_err_set(e, "session %s is open in another process (one writer at a time)", s->id);
            return err_code(e, SESS_EBUSY);
        }
        dt_err_set(e, "%s: flock: %s", s->log_path, strerror(errno));
        return err_code(e, SESS_EIO);
    }
    return 0;
}

/* Write one JSON object as a pretty file inside dir (atomic, fsync'd). */
static int write_json(const char *dir, const char *name, const cJSON *v, dt_err *e)
{
    char *path = dt_xasprintf("%s/%s", dir, name);
    char *text = dt_json_print(v, 1);
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, text);
    dt_buf_putc(&b, '\n');
    int rc = dt_write_file_atomic(path, b.data, b.len, e);
    free(text);
    dt_buf_free(&b);
    free(path);
    return rc != 0 ? err_code(e, SESS_EIO) : 0;
}

/* Remove a half-built ".new-" folder and what create put into it. */
static void remove_new_dir(const char *tmp)
{
    static const char *names[] = {"spec.json", "fingerprint.json", LOG_NAME};
    for (size_t i = 0; i < DT_ARRAY_LEN(names); i++) {
        char *p = dt_xasprintf("%s/%s", tmp, names[i]);
        unlink(p);
        free(p);
    }
    rmdir(tmp);
}

/* Move the finished folder into place under a fresh name, never over an
 * existing session. Returns the final path, or NULL with e set. */
static char *publish(const char *root, const char *tmp, char *id, dt_err *e)
{
    for (int attempt = 0; attempt < 16; attempt++) {
        char *dir = dt_xasprintf("%s/%s", root, id);
        int rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, dir, RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) {
            /* A file system without RENAME_NOREPLACE: check, then rename
             * (the check is racy only against a same-second, same-suffix
             * session). */
            struct stat st;
            if (lstat(dir, &st) == 0) {
                errno = EEXIST;
            } else {
                rc = rename(tmp, dir);
            }
        }
        if (rc == 0)
            return dir;
        int saved = errno;
        free(dir);
        if (saved != EEXIST && saved != ENOTEMPTY) {
            dt_err_set(e, "%s: rename into %s: %s", tmp, root, strerror(saved));
            err_code(e, SESS_EIO);
            return NULL;
        }
        random_suffix(id + strlen(id) - 4);
    }
    dt_err_set(e, "%s: no free session name after 16 tries", root);
    err_code(e, SESS_EIO);
    return NULL;
}

sess *sess_create(const char *root, const cJSON *spec, const cJSON *fingerprint, dt_err *e)
{
    if (!cJSON_IsObject(spec) || !cJSON_IsObject(fingerprint)) {
        dt_err_set(e, "sess_create: the %s is not a JSON object",
                   cJSON_IsObject(spec) ? "fingerprint" : "spec");
        err_code(e, SESS_EINVAL);
        return NULL;
    }
    char *rootdir = sess_root(root);
    if (rootdir == NULL) {
        dt_err_set(e, "no session folder: neither XDG_DATA_HOME nor HOME is set "
                      "(give --session-dir)");
        err_code(e, SESS_EINVAL);
        return NULL;
    }
    if (dt_mkdir_p(rootdir, e) != 0) {
        err_code(e, SESS_EIO);
        free(rootdir);
        return NULL;
    }
    char id[64];
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    size_t k = strftime(id, sizeof id, "%Y%m%d-%H%M%S-", &tm);
    random_suffix(id + k);

    /* Build under a hidden name so that a crash here leaves nothing that
     * sess_list would show, then rename into place. */
    char *tmp = NULL;
    for (int attempt = 0; attempt < 16 && tmp == NULL; attempt++) {
        char *t = dt_xasprintf("%s/.new-%s", rootdir, id);
        if (mkdir(t, 0755) == 0) {
            tmp = t;
            break;
        }
        int saved = errno;
        free(t);
        if (saved != EEXIST) {
            dt_err_set(e, "%s: %s", rootdir, strerror(saved));
            err_code(e, SESS_EIO);
            free(rootdir);
            return NULL;
        }
        random_suffix(id + k);
    }
    if (tmp == NULL) {
        dt_err_set(e, "%s: no free session name after 16 tries", rootdir);
        err_code(e, SESS_EIO);
        free(rootdir);
        return NULL;
    }
    sess *s = sess_new(dt_xstrdup(tmp));
    if (write_json(tmp, "spec.json", spec, e) != 0 ||
        write_json(tmp, "fingerprint.json", fingerprint, e) != 0)
        goto fail;
    int fd = open(s->log_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        dt_err_set(e, "%s: %s", s->log_path, strerror(errno));
        err_code(e, SESS_EIO);
        goto fail;
    }
    close(fd);
    if (open_log(s, e) != 0 || fsync_dir(tmp, e) != 0)
        goto fail;
    char *dir = publish(rootdir, tmp, id, e);
    if (dir == NULL)
        goto fail;
    free(s->dir);
    free(s->id);
    free(s->log_path);
    s->dir = dir;
    s->id = dt_xstrdup(id);
    s->log_path = dt_xasprintf("%s/" LOG_NAME, dir);
    if (fsync_dir(rootdir, e) != 0) {
        /* The session exists but its name may not survive a power loss:
         * take it back rather than hand out a handle to it. */
        remove_new_dir(s->dir);
        sess_close(s);
        free(tmp);
        free(rootdir);
        return NULL;
    }
    free(tmp);
    free(rootdir);
    return s;
fail:
    sess_close(s);
    remove_new_dir(tmp);
    free(tmp);
    free(rootdir);
    return NULL;
}

/* Artifacts are new files in the folder: find out now, not after a step
 * ran, whether one can be made there (a read-only folder or file system). */
static int probe_writable(const char *dir, dt_err *e)
{
    char *p = dt_xasprintf("%s/.write-probe.%ld", dir, (long)getpid());
    int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    int saved = errno;
    if (fd >= 0) {
        close(fd);
        unlink(p);
    }
    free(p);
    if (fd < 0) {
        dt_err_set(e, "%s: cannot write in the session folder: %s", dir, strerror(saved));
        return err_code(e, SESS_EIO);
    }
    return 0;
}

sess *sess_open(const char *root, const char *id_or_path, dt_err *e)
{
    char *dir = resolve_dir(root, id_or_path, e);
    if (dir == NULL)
        return NULL;
    sess *s = sess_new(dir);
    /* Lock before reading so that the tail cannot move under us. */
    if (open_log(s, e) != 0 || probe_writable(s->dir, e) != 0) {
        sess_close(s);
        return NULL;
    }
    parsed info;
    sess_log *l = read_log_dir(dt_xstrdup(dir), &info, e);
    if (l == NULL) {
        sess_close(s);
        return NULL;
    }
    dt_buf_puts(&s->warnings, dt_buf_str(&l->warnings));
    sess_log_free(l);
    if (info.truncated) {
        if (ftruncate(s->fd, (off_t)info.good_len) != 0 || fsync(s->fd) != 0) {
            dt_err_set(e, "%s: cutting off the partial last line: %s", s->log_path,
                       strerror(errno));
            err_code(e, SESS_EIO);
            sess_close(s);
            return NULL;
        }
    }
    s->size = (off_t)info.good_len;
    s->next_seq = info.last_seq + 1;
    return s;
}

void sess_close(sess *s)
{
    if (s == NULL)
        return;
    if (s->fd >= 0)
        close(s->fd); /* releases the flock */
    free(s->id);
    free(s->dir);
    free(s->log_path);
    dt_buf_free(&s->warnings);
    free(s);
}

const char *sess_id(const sess *s)
{
    return s->id;
}

const char *sess_dir(const sess *s)
{
    return s->dir;
}

const char *sess_warnings(const sess *s)
{
    return dt_buf_str(&s->warnings);
}

long sess_next_seq(const sess *s)
{
    return s->next_seq;
}

/* Events after which a power loss must not lose what came before. */
static int is_boundary(const char *type)
{
    return strcmp(type, "step_finished") == 0 || strcmp(type, "decision") == 0 ||
           strcmp(type, "session_finished") == 0;
}

int sess_append(sess *s, const cJSON *event, dt_err *e)
{
    if (s->broken) {
        dt_err_set(e, "%s: an earlier write failed and could not be undone; reopen the session",
                   s->log_path);
        return err_code(e, SESS_EIO);
    }
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(event, "type");
    const cJSON *seqv = cJSON_GetObjectItemCaseSensitive(event, "seq");
    if (!cJSON_IsObject(event) || !cJSON_IsString(type)) {
        dt_err_set(e, "event refused: %s",
                   cJSON_IsObject(event) ? "no string \"type\"" : "not a JSON object");
        return err_code(e, SESS_EINVAL);
    }
    double d = cJSON_IsNumber(seqv) ? seqv->valuedouble : 0;
    /* written so that NaN fails before the conversion to long */
    if (!(d >= (double)s->next_seq && d <= 9e15) || d != (double)(long)d) {
        if (cJSON_IsNumber(seqv))
            dt_err_set(e, "%s event refused: seq %g, expected an integer from %ld",
                       type->valuestring, d, s->next_seq);
        else
            dt_err_set(e, "%s event refused: no number \"seq\"", type->valuestring);
        return err_code(e, SESS_EINVAL);
    }
    long seq = (long)d;
    char *text = dt_json_print(event, 0);
    size_t n = strlen(text);
    text[n] = '\n'; /* replaces the NUL: the line goes out in one write(2) */
    size_t done = 0;
    int rc = write_all(s->fd, text, n + 1, &done);
    int saved = errno;
    free(text);
    if (rc != 0) {
        dt_err_set(e, "%s: write: %s", s->log_path, strerror(saved));
        /* A torn line would glue onto the next event: cut it off. */
        if (done > 0 && ftruncate(s->fd, s->size) != 0)
            s->broken = 1;
        return err_code(e, SESS_EIO);
    }
    s->size += (off_t)(n + 1);
    s->next_seq = seq + 1;
    if (is_boundary(type->valuestring) && fsync(s->fd) != 0) {
        dt_err_set(e, "%s: fsync after %s: %s", s->log_path, type->valuestring, strerror(errno));
        return err_code(e, SESS_EIO);
    }
    return 0;
}

int sess_sync(sess *s, dt_err *e)
{
    if (fsync(s->fd) != 0) {
        dt_err_set(e, "%s: fsync: %s", s->log_path, strerror(errno));
        return err_code(e, SESS_EIO);
    }
    return 0;
}

int sess_write_artifact(sess *s, const char *name, const void *data, size_t len, dt_err *e)
{
    if (check_artifact_name(name, e) != 0)
        return -1;
    char *path = dt_xasprintf("%s/%s", s->dir, name);
    int rc = dt_write_file_atomic(path, data, len, e);
    free(path);
    if (rc != 0)
        return err_code(e, SESS_EIO);
    return fsync_dir(s->dir, e);
}

char *sess_read_artifact(const sess *s, const char *name, size_t *len, dt_err *e)
{
    if (check_artifact_name(name, e) != 0)
        return NULL;
    char *path = dt_xasprintf("%s/%s", s->dir, name);
    char *data = read_nofollow(path, len, e);
    int saved = errno;
    if (data == NULL)
        err_code(e, saved == ENOENT ? SESS_ENOTFOUND : SESS_EIO);
    free(path);
    return data;
}

/* ---- listing ------------------------------------------------------------ */

static void copy_str(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* Fill one row from a log that was read successfully. */
static void info_from_log(sess_info *in, const sess_log *l)
{
    const cJSON *ev;
    const cJSON *first = cJSON_GetArrayItem(l->events, 0);
    in->started = dt_json_num(first, "t", 0);
    const cJSON *spec = l->spec;
    int resumable = 0;
    cJSON_ArrayForEach(ev, l->events)
    {
        const char *type = dt_json_str(ev, "type", "");
        if (strcmp(type, "step_started") == 0) {
            in->steps++;
        } else if (strcmp(type, "session_finished") == 0) {
            const cJSON *best = cJSON_GetObjectItem(cJSON_GetObjectItem(ev, "result"), "best");
            in->best_speedup = dt_json_num(best, "speedup", 0);
            resumable = dt_json_bool(cJSON_GetObjectItem(ev, "result"), "resumable", 0);
        } else if (strcmp(type, "session_resumed") == 0) {
            resumable = 0;
        } else if (spec == NULL && strcmp(type, "session_started") == 0) {
            spec = cJSON_GetObjectItem(ev, "spec"); /* spec.json lost: the log has it too */
        }
    }
    copy_str(in->matrix, sizeof in->matrix, dt_json_str(spec, "matrix", ""));
    copy_str(in->op, sizeof in->op, dt_json_str(spec, "op", ""));
    const char *state = "running or crashed";
    if (l->finished)
        state = "finished";
    else if (resumable)
        state = "stopped, resumable";
    else if (cJSON_GetArraySize(l->events) == 0)
        state = "empty";
    copy_str(in->state, sizeof in->state, state);
}

/* Sort key for rows whose log gives no start time: when spec.json was
 * written, which sess_create does once. */
static double created_time(const char *dir)
{
    char *p = dt_xasprintf("%s/spec.json", dir);
    struct stat st;
    double t = 0;
    if (stat(p, &st) == 0)
        t = (double)st.st_mtim.tv_sec + st.st_mtim.tv_nsec * 1e-9;
    free(p);
    return t;
}

typedef struct row {
    sess_info info;
    double key;
} row;

static int newest_first(const void *a, const void *b)
{
    const row *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? 1 : -1;
    return -strcmp(x->info.id, y->info.id);
}

int sess_list(const char *root, sess_info **out, int *n, dt_buf *warnings, dt_err *e)
{
    *out = NULL;
    *n = 0;
    char *rootdir = sess_root(root);
    if (rootdir == NULL) {
        dt_err_set(e, "no session folder: neither XDG_DATA_HOME nor HOME is set "
                      "(give --session-dir)");
        return err_code(e, SESS_ENOTFOUND);
    }
    DIR *d = opendir(rootdir);
    if (d == NULL) {
        int saved = errno;
        if (saved == ENOENT) {
            free(rootdir);
            return 0;
        }
        dt_err_set(e, "%s: %s", rootdir, strerror(saved));
        free(rootdir);
        return err_code(e, SESS_EIO);
    }
    dt_buf ignored = DT_BUF_INIT;
    if (warnings == NULL)
        warnings = &ignored;
    row *rows = NULL;
    int count = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *dir = dt_xasprintf("%s/%s", rootdir, de->d_name);
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) ||
            strlen(de->d_name) >= sizeof rows[0].info.id) {
            dt_buf_printf(warnings, "%s: skipped: not a session folder\n", dir);
            free(dir);
            continue;
        }
        dt_err le = {0};
        parsed info;
        sess_log *l = NULL;
        char *log = dt_xasprintf("%s/" LOG_NAME, dir);
        if (!dt_file_exists(log)) {
            dt_buf_printf(warnings, "%s: skipped: not a session folder (no " LOG_NAME ")\n", dir);
            free(log);
            free(dir);
            continue;
        }
        free(log);
        l = read_log_dir(dt_xstrdup(dir), &info, &le);
        if (l == NULL && le.code != SESS_ECORRUPT) {
            dt_buf_printf(warnings, "%s: skipped: %s\n", dir, le.msg);
            free(dir);
            continue;
        }
        if (count == cap) {
            cap = cap ? 2 * cap : 16;
            rows = dt_xrealloc(rows, (size_t)cap * sizeof *rows);
        }
        row *r = &rows[count++];
        memset(r, 0, sizeof *r);
        copy_str(r->info.id, sizeof r->info.id, de->d_name);
        copy_str(r->info.dir, sizeof r->info.dir, dir);
        if (l == NULL) {
            /* Listed rather than hidden: the user should learn it is there
             * and what is wrong with it. */
            dt_buf_printf(warnings, "%s\n", le.msg);
            copy_str(r->info.state, sizeof r->info.state, "corrupted");
            char *sp = dt_xasprintf("%s/spec.json", dir);
            cJSON *spec = dt_json_read_file(sp, NULL);
            copy_str(r->info.matrix, sizeof r->info.matrix, dt_json_str(spec, "matrix", ""));
            copy_str(r->info.op, sizeof r->info.op, dt_json_str(spec, "op", ""));
            cJSON_Delete(spec);
            free(sp);
        } else {
            info_from_log(&r->info, l);
            sess_log_free(l);
        }
        r->key = r->info.started > 0 ? r->info.started : created_time(dir);
        free(dir);
    }
    closedir(d);
    free(rootdir);
    dt_buf_free(&ignored);
    if (count > 1)
        qsort(rows, (size_t)count, sizeof *rows, newest_first);
    if (count > 0) {
        *out = dt_xmalloc((size_t)count * sizeof **out);
        for (int i = 0; i < count; i++)
            (*out)[i] = rows[i].info;
    }
    free(rows);
    *n = count;
    return 0;
}
