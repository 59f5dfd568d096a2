/* test_sse.c -- the SSE parser: chunk boundaries anywhere, \r\n, comments,
 * multi-line data, event names, truncation and the size limit. */
#include "tests/common/llmtest.h"

#include <stdlib.h>
#include <string.h>

/* Each dispatched event as "name|data\n", so whole runs compare as text. */
static void collect(const char *event, const char *data, void *ud)
{
    dt_buf *b = ud;
    dt_buf_printf(b, "%s|%s\n", event, data);
}

static char *parse_in_pieces(const char *stream, const size_t *cuts, int ncuts, int *pending)
{
    dt_buf out = DT_BUF_INIT;
    llm_sse *s = llm_sse_new(collect, &out);
    size_t len = strlen(stream), at = 0;
    for (int i = 0; i <= ncuts; i++) {
        size_t end = i < ncuts ? cuts[i] : len;
        cr_assert_eq(llm_sse_feed(s, stream + at, end - at), 0);
        at = end;
    }
    if (pending)
        *pending = llm_sse_pending(s);
    llm_sse_free(s);
    return dt_buf_take(&out);
}

static char *parse(const char *stream)
{
    return parse_in_pieces(stream, NULL, 0, NULL);
}

static const char *const stream_text = ": hello, a keep-alive comment\n"
                                       "event: message_start\n"
                                       "data: {\"a\":1}\n"
                                       "\n"
                                       "data: first line\n"
                                       "data: second line\n"
                                       "id: 7\n"
                                       "retry: 1000\n"
                                       "\n"
                                       "event: ping\r\n"
                                       "data: {\"type\": \"ping\"}\r\n"
                                       "\r\n"
                                       ":\n"
                                       "data: [DONE]\n"
                                       "\n";

static const char *const stream_events = "message_start|{\"a\":1}\n"
                                         "message|first line\nsecond line\n"
                                         "ping|{\"type\": \"ping\"}\n"
                                         "message|[DONE]\n";

Test(sse, a_stream_should_give_each_event_with_its_name_and_joined_data)
{
    char *got = parse(stream_text);
    cr_assert_str_eq(got, stream_events);
    free(got);
}

Test(sse, every_single_cut_should_give_the_same_events)
{
    size_t len = strlen(stream_text);
    for (size_t cut = 0; cut <= len; cut++) {
        char *got = parse_in_pieces(stream_text, &cut, 1, NULL);
        cr_assert_str_eq(got, stream_events, "cut at %zu", cut);
        free(got);
    }
}

Test(sse, every_pair_of_cuts_should_give_the_same_events)
{
    size_t len = strlen(stream_text);
    for (size_t a = 0; a <= len; a += 3) {
        for (size_t b = a; b <= len; b++) {
            size_t cuts[2] = {a, b};
            char *got = parse_in_pieces(stream_text, cuts, 2, NULL);
            cr_assert_str_eq(got, stream_events, "cuts at %zu, %zu", a, b);
            free(got);
        }
    }
}

Test(sse, byte_by_byte_should_give_the_same_events)
{
    size_t len = strlen(stream_text);
    size_t *cuts = dt_xcalloc(len, sizeof *cuts);
    for (size_t i = 0; i < len; i++)
        cuts[i] = i + 1;
    char *got = parse_in_pieces(stream_text, cuts, (int)len, NULL);
    cr_assert_str_eq(got, stream_events);
    free(got);
    free(cuts);
}

Test(sse, crlf_should_be_stripped_but_a_lone_cr_inside_data_kept)
{
    char *got = parse("data: a\rb\r\n\r\n");
    cr_assert_str_eq(got, "message|a\rb\n");
    free(got);
}

Test(sse, only_one_space_after_the_colon_should_be_stripped)
{
    char *got = parse("data:x\n\ndata:  two\n\ndata\n\ndata:\n\n");
    cr_assert_str_eq(got, "message|x\nmessage| two\nmessage|\nmessage|\n");
    free(got);
}

Test(sse, an_empty_data_line_should_add_an_empty_line)
{
    char *got = parse("data: a\ndata:\ndata: b\n\n");
    cr_assert_str_eq(got, "message|a\n\nb\n");
    free(got);
}

Test(sse, comments_and_unknown_fields_alone_should_dispatch_nothing)
{
    char *got = parse(": ping\n\n: another\nfoo: bar\nid: 3\n\n\n\n");
    cr_assert_str_eq(got, "");
    free(got);
}

Test(sse, an_event_name_without_data_should_not_leak_into_the_next_event)
{
    char *got = parse("event: lonely\n\ndata: x\n\n");
    cr_assert_str_eq(got, "message|x\n");
    free(got);
}

Test(sse, a_stream_cut_mid_event_should_be_pending_and_not_dispatched)
{
    int pending = 0;
    size_t cut = 0;
    char *got = parse_in_pieces("data: {\"a\":1}\n\ndata: {\"trunc", &cut, 0, &pending);
    cr_assert_str_eq(got, "message|{\"a\":1}\n");
    cr_assert(pending);
    free(got);
    /* A complete line without its blank line is still an open event. */
    got = parse_in_pieces("data: x\n", &cut, 0, &pending);
    cr_assert_str_eq(got, "");
    cr_assert(pending);
    free(got);
    got = parse_in_pieces("data: x\n\n", &cut, 0, &pending);
    cr_assert_str_eq(got, "message|x\n");
    cr_assert_not(pending);
    free(got);
}

Test(sse, a_line_past_the_limit_should_break_the_parser)
{
    dt_buf out = DT_BUF_INIT;
    llm_sse *s = llm_sse_new(collect, &out);
    cr_assert_eq(llm_sse_feed(s, "data: ok\n\ndata: ", 16), 0);
    size_t big = 1 << 20;
    char *chunk = dt_xmalloc(big);
    memset(chunk, 'x', big);
    int rc = 0;
    for (int i = 0; i < 9 && rc == 0; i++)
        rc = llm_sse_feed(s, chunk, big);
    cr_assert_eq(rc, -1);
    /* Broken for good: later events are not trusted. */
    cr_assert_eq(llm_sse_feed(s, "\n\ndata: later\n\n", 15), -1);
    cr_assert_str_eq(dt_buf_str(&out), "message|ok\n");
    free(chunk);
    llm_sse_free(s);
    dt_buf_free(&out);
}
