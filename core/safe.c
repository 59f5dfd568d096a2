/* safe.c -- text from data made safe to show or send: control characters
 * out of terminal output, invalid UTF-8 out of JSON. */
#include "core.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes available), or 0 when
 * the bytes there are not one (overlong forms, surrogates and code points
 * past U+10FFFF are invalid too). *cp gets the code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, unsigned *cp)
{
    unsigned c = s[0];
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    size_t len;
    unsigned min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
        min = 0x80;
        c &= 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        min = 0x800;
        c &= 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        min = 0x10000;
        c &= 0x07;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        c = (c << 6) | (s[i] & 0x3f);
    }
    if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
        return 0;
    *cp = c;
    return len;
}

void dt_buf_put_term(dt_buf *b, const char *s, size_t n, int keep_newlines)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned cp = 0;
        size_t len = utf8_seq(p + i, n - i, &cp);
        if (len == 0) {
            dt_buf_putc(b, '?'); /* a byte that is not UTF-8 */
            i++;
            continue;
        }
        int keep = (cp == '\n' && keep_newlines) || cp == '\t' ||
                   (cp >= 0x20 && cp != 0x7f && !(cp >= 0x80 && cp < 0xa0));
        if (keep)
            dt_buf_append(b, p + i, len);
        else if (cp < 0x20)
            dt_buf_printf(b, "^%c", (char)(cp + '@')); /* ESC shows as ^[ */
        else
            dt_buf_putc(b, '?'); /* DEL and the C1 controls (CSI, OSC, ...) */
        i += len;
    }
}

const char *dt_tsafe(const char *s)
{
    static _Thread_local dt_buf ring[8];
    static _Thread_local unsigned next;
    dt_buf *b = &ring[next++ % DT_ARRAY_LEN(ring)];
    dt_buf_reset(b);
    if (s != NULL)
        dt_buf_put_term(b, s, strlen(s), 0);
    return dt_buf_str(b);
}

char *dt_utf8_fix(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    unsigned cp;
    while (i < n) {
        size_t len = utf8_seq(p + i, n - i, &cp);
        if (len == 0)
            break;
        i += len;
    }
    if (i == n)
        return NULL;
    dt_buf b = DT_BUF_INIT;
    dt_buf_append(&b, s, i);
    while (i < n) {
        size_t len = utf8_seq(p + i, n - i, &cp);
        if (len == 0) {
            dt_buf_puts(&b, "\xef\xbf\xbd"); /* U+FFFD */
            i++;
        } else {
            dt_buf_append(&b, p + i, len);
            i += len;
        }
    }
    return dt_buf_take(&b);
}

void dt_json_utf8_fix(cJSON *v)
{
    for (; v != NULL; v = v->next) {
        if (v->string != NULL && !(v->type & cJSON_StringIsConst)) {
            char *f = dt_utf8_fix(v->string, strlen(v->string));
            if (f != NULL) {
                cJSON_free(v->string); /* cJSON's default hooks: malloc and free */
                v->string = f;
            }
        }
        if (cJSON_IsString(v) && v->valuestring != NULL && !(v->type & cJSON_IsReference)) {
            char *f = dt_utf8_fix(v->valuestring, strlen(v->valuestring));
            if (f != NULL) {
                cJSON_free(v->valuestring);
                v->valuestring = f;
            }
        }
        if (v->child != NULL && !(v->type & cJSON_IsReference))
            dt_json_utf8_fix(v->child);
    }
}

char *dt_code_only(const char *src)
{
    size_t n = strlen(src);
    char *c = dt_xmalloc(n + 1);
    memcpy(c, src, n + 1);
    for (size_t i = 0; i < n; i++) {
        if (c[i] == '/' && c[i + 1] == '/') {
            while (i < n && c[i] != '\n')
                c[i++] = ' ';
        } else if (c[i] == '/' && c[i + 1] == '*') {
            c[i] = c[i + 1] = ' ';
            i += 2;
            while (i < n && !(c[i] == '*' && c[i + 1] == '/')) {
                if (c[i] != '\n')
                    c[i] = ' ';
                i++;
            }
            if (i < n)
                c[i] = c[i + 1] = ' ', i++;
        } else if (c[i] == '"' || c[i] == '\'') {
            char q = c[i++];
            while (i < n && c[i] != q && c[i] != '\n') {
                if (c[i] == '\\' && i + 1 < n)
                    c[i++] = ' ';
                c[i++] = ' ';
            }
        }
    }
    return c;
}
