/* sse.c -- a server-sent events parser fed arbitrary chunks of a stream. */
#include "agents/llm.h"

#include <stdlib.h>
#include <string.h>

/* Past this a line or an event's data is not a model's answer but a broken
 * or hostile stream; keeping it would only grow memory. */
#define SSE_MAX (8u << 20)

struct llm_sse {
    llm_sse_fn *fn;
    void *ud;
    dt_buf line;  /* the line being received, without its \n */
    dt_buf data;  /* data lines of the current event, joined with \n */
    dt_buf event; /* the current event's name, empty when none */
    int has_data; /* a data line was seen (data may still be empty) */
    int broken;   /* past SSE_MAX: everything is dropped */
};

llm_sse *llm_sse_new(llm_sse_fn *fn, void *ud)
{
    llm_sse *s = dt_xcalloc(1, sizeof *s);
    s->fn = fn;
    s->ud = ud;
    return s;
}

void llm_sse_free(llm_sse *s)
{
    if (s == NULL)
        return;
    dt_buf_free(&s->line);
    dt_buf_free(&s->data);
    dt_buf_free(&s->event);
    free(s);
}

int llm_sse_pending(const llm_sse *s)
{
    return s->line.len > 0 || s->has_data || s->event.len > 0;
}

static void dispatch(llm_sse *s)
{
    /* The spec drops an event that carried no data line (a lone "event:"). */
    if (s->has_data)
        s->fn(s->event.len ? s->event.data : "message", dt_buf_str(&s->data), s->ud);
    dt_buf_reset(&s->data);
    dt_buf_reset(&s->event);
    s->has_data = 0;
}

static void process_line(llm_sse *s, const char *p, size_t n)
{
    if (n > 0 && p[n - 1] == '\r')
        n--;
    if (n == 0) {
        dispatch(s);
        return;
    }
    if (p[0] == ':')
        return; /* a comment: servers send them as keep-alives */
    const char *colon = memchr(p, ':', n);
    size_t flen = colon ? (size_t)(colon - p) : n;
    const char *v = colon ? colon + 1 : p + n;
    size_t vlen = (size_t)(p + n - v);
    if (vlen > 0 && v[0] == ' ') {
        v++;
        vlen--;
    }
    if (flen == 4 && memcmp(p, "data", 4) == 0) {
        if (s->has_data)
            dt_buf_putc(&s->data, '\n');
        dt_buf_append(&s->data, v, vlen);
        s->has_data = 1;
    } else if (flen == 5 && memcmp(p, "event", 5) == 0) {
        dt_buf_reset(&s->event);
        dt_buf_append(&s->event, v, vlen);
    }
    /* id and retry only matter to a browser reconnecting; other fields are
     * ignored, as the spec says. */
}

int llm_sse_feed(llm_sse *s, const char *bytes, size_t len)
{
    if (s->broken)
        return -1;
    while (len > 0) {
        const char *nl = memchr(bytes, '\n', len);
        size_t take = nl ? (size_t)(nl - bytes) : len;
        if (s->line.len + take > SSE_MAX || s->data.len > SSE_MAX) {
            s->broken = 1;
            dt_buf_free(&s->line);
            dt_buf_free(&s->data);
            dt_buf_free(&s->event);
            s->has_data = 0;
            return -1;
        }
        if (nl == NULL) {
            dt_buf_append(&s->line, bytes, take);
            return 0;
        }
        if (s->line.len == 0) {
            process_line(s, bytes, take); /* the common case: no copy */
        } else {
            dt_buf_append(&s->line, bytes, take);
            process_line(s, s->line.data, s->line.len);
            dt_buf_reset(&s->line);
        }
        bytes += take + 1;
        len -= take + 1;
    }
    return 0;
}
