/* util.c -- errors, checked allocation, growable buffers and string helpers. */
#include "core.h"

#include <errno.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------ */

int dt_err_set(dt_err *e, const char *fmt, ...)
{
    if (e == NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (e->code == 0)
        e->code = 1;
    return -1;
}

int dt_err_prefix(dt_err *e, const char *fmt, ...)
{
    if (e == NULL)
        return -1;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof e->msg];
    memcpy(old, e->msg, sizeof old);
    if (snprintf(e->msg, sizeof e->msg, "%s: %s", prefix, old) >= (int)sizeof e->msg)
        memcpy(e->msg + sizeof e->msg - 4, "...", 4); /* mark the cut */
    if (e->code == 0)
        e->code = 1;
    return -1;
}

void dt_err_clear(dt_err *e)
{
    if (e == NULL)
        return;
    e->code = 0;
    e->msg[0] = '\0';
}

/* ---- memory ------------------------------------------------------------ */

static void oom(size_t n)
{
    fprintf(stderr, "ditto: out of memory (asked for %zu bytes)\n", n);
    abort();
}

void *dt_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        oom(n);
    return p;
}

void *dt_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (p == NULL)
        oom(count * size);
    return p;
}

void *dt_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        oom(n);
    return q;
}

char *dt_xstrdup(const char *s)
{
    return dt_xstrndup(s, strlen(s));
}

char *dt_xstrndup(const char *s, size_t n)
{
    size_t len = strnlen(s, n);
    char *p = dt_xmalloc(len + 1);
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

char *dt_xasprintf(const char *fmt, ...)
{
    dt_buf b = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    return dt_buf_take(&b);
}

/* ---- buffers ----------------------------------------------------------- */

void dt_buf_reserve(dt_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    b->data = dt_xrealloc(b->data, cap);
    b->cap = cap;
}

void dt_buf_append(dt_buf *b, const void *data, size_t n)
{
    dt_buf_reserve(b, n);
    if (n > 0)
        memcpy(b->data + b->len, data, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void dt_buf_puts(dt_buf *b, const char *s)
{
    dt_buf_append(b, s, strlen(s));
}

void dt_buf_putc(dt_buf *b, char c)
{
    dt_buf_append(b, &c, 1);
}

void dt_buf_vprintf(dt_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    dt_buf_reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void dt_buf_printf(dt_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void dt_buf_reset(dt_buf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

void dt_buf_free(dt_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

char *dt_buf_take(dt_buf *b)
{
    char *s = b->data ? b->data : dt_xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return s;
}

const char *dt_buf_str(const dt_buf *b)
{
    return b->data ? b->data : "";
}

/* ---- strings ----------------------------------------------------------- */

int dt_streq(const char *a, const char *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    return strcmp(a, b) == 0;
}

int dt_startswith(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int dt_endswith(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && memcmp(s + ls - lx, suffix, lx) == 0;
}

int dt_parse_size(const char *s, int64_t *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    const char *p = s;
    int64_t v = 0;
    int digits = 0;
    while (*p >= '0' && *p <= '9') {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
        p++;
        digits++;
    }
    double frac = 0.0, scale = 1.0;
    if (*p == '.') { /* "1.5M" */
        p++;
        while (*p >= '0' && *p <= '9') {
            scale /= 10.0;
            frac += (*p - '0') * scale;
            p++;
            digits++;
        }
    }
    if (digits == 0)
        return -1;
    int64_t mul = 1;
    if (*p == 'K' || *p == 'k')
        mul = (p[1] == 'i') ? 1024LL : 1000LL;
    else if (*p == 'M')
        mul = (p[1] == 'i') ? 1048576LL : 1000000LL;
    else if (*p == 'G')
        mul = (p[1] == 'i') ? 1073741824LL : 1000000000LL;
    if (mul != 1) {
        p += (p[1] == 'i') ? 2 : 1;
    } else if (frac != 0.0) {
        return -1; /* fractions only make sense with a suffix */
    }
    if (*p != '\0')
        return -1;
    if (v > INT64_MAX / mul)
        return -1;
    *out = v * mul + (int64_t)(frac * (double)mul + 0.5);
    return 0;
}

static locale_t c_locale(void)
{
    static locale_t loc = (locale_t)0;
    if (loc == (locale_t)0)
        loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    return loc;
}

double dt_strtod(const char *s, char **end)
{
    return strtod_l(s, end, c_locale());
}

int dt_parse_double(const char *s, double *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    char *end = NULL;
    errno = 0;
    double v = dt_strtod(s, &end);
    if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

const char *dt_fmt_bytes(double bytes, char *out, size_t outlen)
{
    static const char *units[] = {"B", "KB", "MB", "GB", "TB"};
    size_t u = 0;
    while (bytes >= 1000.0 && u + 1 < DT_ARRAY_LEN(units)) {
        bytes /= 1000.0;
        u++;
    }
    if (u == 0)
        snprintf(out, outlen, "%.0f %s", bytes, units[u]);
    else
        snprintf(out, outlen, "%.1f %s", bytes, units[u]);
    return out;
}
