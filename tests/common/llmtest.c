/* llmtest.c -- helpers for the LLM client tests: the fake server process,
 * configs with short timeouts, and running one request to its end. */
#include "tests/common/llmtest.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static lt_server *running; /* the one a failed test may leave behind */

lt_server *lt_server_start(const char *transcript)
{
    /* The fake server is on 127.0.0.1: no proxy from the environment. */
    setenv("no_proxy", "127.0.0.1,localhost", 1);
    setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    lt_server *s = dt_xcalloc(1, sizeof *s);
    s->dir = tu_tmpdir();
    char *tpath = tu_write(s->dir, "transcript.json", transcript);
    s->log = dt_xasprintf("%s/requests.jsonl", s->dir);
    char *script = dt_xasprintf("%s/tests/llm/fake_llm_server.py", tu_src_dir());
    char *errpath = dt_xasprintf("%s/server.err", s->dir);
    int fds[2];
    cr_assert(pipe(fds) == 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        FILE *err = freopen(errpath, "w", stderr);
        (void)err;
        execlp("python3", "python3", script, tpath, s->log, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    s->pid = pid;
    running = s;
    char line[64] = {0};
    size_t n = 0;
    double until = dt_now() + 15;
    while (n < sizeof line - 1 && strchr(line, '\n') == NULL && dt_now() < until) {
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        if (poll(&p, 1, 200) <= 0)
            continue;
        ssize_t r = read(fds[0], line + n, sizeof line - 1 - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fds[0]);
    s->port = atoi(line);
    free(tpath);
    free(script);
    free(errpath);
    cr_assert(s->port > 0, "the fake server did not print its port (see %s/server.err)", s->dir);
    s->endpoint = dt_xasprintf("http://127.0.0.1:%d/v1", s->port);
    return s;
}

void lt_server_stop(lt_server *s)
{
    if (s == NULL)
        return;
    if (running == s)
        running = NULL;
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
    tu_rmtree(s->dir);
    free(s->dir);
    free(s->log);
    free(s->endpoint);
    free(s);
}

void lt_teardown(void)
{
    lt_server_stop(running);
}

cJSON *lt_server_requests(const lt_server *s)
{
    cJSON *arr = cJSON_CreateArray();
    char *text = dt_read_file(s->log, NULL, NULL);
    if (text == NULL)
        return arr;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *j = cJSON_Parse(line);
        cr_assert_not_null(j, "bad log line: %s", line);
        cJSON_AddItemToArray(arr, j);
    }
    free(text);
    return arr;
}

int lt_server_count(const lt_server *s)
{
    cJSON *a = lt_server_requests(s);
    int n = cJSON_GetArraySize(a);
    cJSON_Delete(a);
    return n;
}

void lt_config(llm_config *c, llm_api api, const char *endpoint)
{
    llm_config_init(c);
    c->api = api;
    c->endpoint = dt_xstrdup(endpoint);
    c->model = dt_xstrdup("fake-model");
    c->api_key_env = dt_xstrdup(LT_KEY_ENV);
    c->connect_timeout_s = 2;
    c->stall_timeout_s = 5;
    c->max_retries = 3;
    c->backoff_base_s = 0.05;
    c->backoff_max_s = 1.5;
    c->price_in = 2;
    c->price_out = 10;
    c->max_tokens = 256;
    c->temperature = 0;
    c->cache_dir = dt_xstrdup("");
    setenv(LT_KEY_ENV, LT_KEY, 1);
}

static char *dup_or_null(const char *s)
{
    return s ? dt_xstrdup(s) : NULL;
}

void lt_delta(const char *text, size_t len, void *ud)
{
    lt_call *c = ud;
    cr_assert_eq(c->done, 0, "a delta after done");
    if (c->ndeltas < (int)DT_ARRAY_LEN(c->delta_at))
        c->delta_at[c->ndeltas] = dt_now();
    c->ndeltas++;
    dt_buf_append(&c->deltas, text, len);
    if (c->ndeltas == 1 && c->cancel_in_delta)
        llm_cancel(c->cl, c->id);
    if (c->ndeltas == 1 && c->free_in_delta)
        llm_free(c->cl);
}

void lt_done(const llm_result *r, void *ud)
{
    lt_call *c = ud;
    c->done++;
    c->ended = dt_now();
    c->ok = r->ok;
    free(c->text);
    free(c->error);
    free(c->message);
    free(c->finish);
    c->text = dup_or_null(r->text);
    c->error = dup_or_null(r->error);
    c->message = dup_or_null(r->message);
    c->finish = dup_or_null(r->finish_reason);
    c->http_status = r->http_status;
    c->attempts = r->attempts;
    c->cached = r->cached;
    c->tokens_in = r->tokens_in;
    c->tokens_out = r->tokens_out;
    c->cost = r->cost;
    cr_assert_not_null(r->message, "every result has a message");
    cr_assert_eq(r->ok, r->error == NULL);
}

void lt_call_free(lt_call *c)
{
    free(c->text);
    free(c->error);
    free(c->message);
    free(c->finish);
    dt_buf_free(&c->deltas);
}

int lt_wait(dt_loop *l, lt_call *c, double timeout_s)
{
    double until = dt_now() + timeout_s;
    while (!c->done && dt_now() < until)
        dt_loop_run_once(l, 50);
    return c->done;
}

void lt_run(dt_loop *l, llm_client *cl, const cJSON *messages, lt_call *c, double timeout_s)
{
    c->cl = cl;
    c->started = dt_now();
    c->id = llm_submit(cl, messages, lt_delta, lt_done, c);
    cr_assert_gt(c->id, 0);
    cr_assert(lt_wait(l, c, timeout_s), "no answer within %.0f s", timeout_s);
    cr_assert_eq(c->done, 1);
}

cJSON *lt_messages(const char *system, const char *user)
{
    cJSON *a = cJSON_CreateArray();
    if (system) {
        cJSON *m = dt_json_obj();
        dt_json_set_str(m, "role", "system");
        dt_json_set_str(m, "content", system);
        cJSON_AddItemToArray(a, m);
    }
    cJSON *m = dt_json_obj();
    dt_json_set_str(m, "role", "user");
    dt_json_set_str(m, "content", user);
    cJSON_AddItemToArray(a, m);
    return a;
}

int lt_closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert(fd >= 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
    socklen_t len = sizeof a;
    cr_assert(getsockname(fd, (struct sockaddr *)&a, &len) == 0);
    close(fd);
    return ntohs(a.sin_port);
}
