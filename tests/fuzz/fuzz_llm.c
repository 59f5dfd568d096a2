/* fuzz_llm.c -- libFuzzer target: any bytes as an LLM server's answer, an
 * event stream (SSE, cut into chunks at arbitrary places) or a plain JSON
 * body, in the OpenAI or the Anthropic dialect. The client's file is
 * included to reach its static answer readers. */
#include "agents/llm.c"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void done_cb(const llm_result *r, void *ud)
{
    int *called = ud;
    (*called)++;
    if (r->ok && r->error != NULL)
        abort();
    if (!r->ok && (r->error == NULL || r->message == NULL))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    uint8_t mode = data[0], step = data[1];
    data += 2;
    size -= 2;
    llm_client cl;
    memset(&cl, 0, sizeof cl);
    llm_config_init(&cl.c);
    cl.c.api = (mode & 1) ? LLM_ANTHROPIC : LLM_OPENAI;
    cl.c.max_retries = 0;
    cl.c.max_answer_bytes = 4096; /* small, so the cap is reached often */
    llm_req *req = dt_xcalloc(1, sizeof *req);
    req->cl = &cl;
    req->attempts = 1;
    req->retry_after_ms = -1;
    int called = 0;
    req->done = done_cb;
    req->ud = &called;
    if (mode & 2) {
        /* A plain JSON answer: parsed, delivered, finished (frees req). */
        dt_buf_append(&req->body, data, size);
        plain_answer(req);
        if (called != 1)
            abort();
    } else {
        req->is_stream = 1;
        req->sse = llm_sse_new(on_sse, req);
        size_t chunk = (size_t)(step % 64) + 1;
        for (size_t off = 0; off < size && !req->fail; off += chunk) {
            size_t n = size - off < chunk ? size - off : chunk;
            if (llm_sse_feed(req->sse, (const char *)data + off, n) != 0)
                break;
        }
        if (req->text.len > cl.c.max_answer_bytes)
            abort(); /* the cap holds */
        llm_sse_free(req->sse);
        dt_buf_free(&req->body);
        dt_buf_free(&req->text);
        free(req->fail_msg);
        free(req->finish_reason);
        free(req);
    }
    llm_config_clear(&cl.c);
    return 0;
}
