/* sesstest.c -- helpers for the session store tests (see sesstest.h). */
#include "tests/sessions/sesstest.h"

#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

static const char *kinds[] = {"profile", "plan",    "check", "generate", "compile",
                              "verify",  "measure", "tune",  "learn"};

cJSON *st_spec(void)
{
    cJSON *s = dt_json_obj();
    dt_json_set_str(s, "op", "spmv");
    dt_json_set_str(s, "matrix", "gen:rmat:rows=1M,nnz=16M,seed=1");
    dt_json_set_str(s, "dtype", "fp32");
    dt_json_set_str(s, "gpu", "h200");
    return s;
}

cJSON *st_fingerprint(void)
{
    cJSON *f = dt_json_obj();
    dt_json_set_str(f, "ditto", DT_VERSION);
    dt_json_set_str(f, "gpu", "NVIDIA H200");
    dt_json_set_str(f, "driver", "560.35");
    dt_json_set_str(f, "cuda", "12.6");
    dt_json_set_int(f, "seeds", 42);
    return f;
}

cJSON *st_event(long seq, double base)
{
    long step = (seq - 1) / ST_STEP_EVENTS + 1;
    int pos = (int)((seq - 1) % ST_STEP_EVENTS);
    const char *kind = kinds[(step - 1) % DT_ARRAY_LEN(kinds)];
    int version = (int)((step - 1) / (long)DT_ARRAY_LEN(kinds)) + 1;
    cJSON *e = dt_json_obj();
    dt_json_set_int(e, "seq", seq);
    dt_json_set_num(e, "t", base + (double)seq + 0.125);
    dt_json_set_int(e, "step", step);
    switch (pos) {
    case 0:
        dt_json_set_str(e, "type", "step_started");
        dt_json_set_str(e, "kind", kind);
        dt_json_set_int(e, "version", version);
        dt_json_set_str(e, "agent", "Kernel Architect");
        dt_json_set_take(e, "inputs", dt_json_obj());
        break;
    case 1: {
        dt_json_set_str(e, "type", "text");
        /* escapes, a newline inside a string and non-ASCII: one line still */
        char *t = dt_xasprintf("step %ld: rows are \"skewed\",\n\tgini=0.%03ld \xc3\xa9", step,
                               seq % 1000);
        dt_json_set_str(e, "text", t);
        free(t);
        break;
    }
    case 2:
        dt_json_set_str(e, "type", "artifact");
        dt_json_set_str(e, "name", kind);
        dt_json_set_int(e, "version", version);
        break;
    case 3:
        dt_json_set_str(e, "type", "awaiting_review");
        dt_json_set_str(e, "policy", "ask");
        break;
    case 4:
        dt_json_set_str(e, "type", "decision");
        dt_json_set_str(e, "decision", "approve");
        dt_json_set_str(e, "by", "auto");
        dt_json_set_take(e, "reason", cJSON_CreateNull());
        break;
    default:
        dt_json_set_str(e, "type", "step_finished");
        dt_json_set_str(e, "status", "approved");
        dt_json_set_num(e, "seconds", 0.25 * (double)step);
        dt_json_set_int(e, "tokens_in", 0);
        break;
    }
    return e;
}

const char *st_artifact_name(long seq, char *buf, size_t cap)
{
    if ((seq - 1) % ST_STEP_EVENTS != 2)
        return NULL;
    long step = (seq - 1) / ST_STEP_EVENTS + 1;
    const char *kind = kinds[(step - 1) % DT_ARRAY_LEN(kinds)];
    int version = (int)((step - 1) / (long)DT_ARRAY_LEN(kinds)) + 1;
    snprintf(buf, cap, "%s_v%d.json", kind, version);
    return buf;
}

char *st_artifact_text(long seq)
{
    return dt_xasprintf("{\"seq\": %ld, \"payload\": \"%0*d\"}\n", seq, (int)(seq % 97) + 1, 7);
}

int st_run(sess *s, long from, long to, double base, dt_err *e)
{
    for (long i = from; i <= to; i++) {
        char name[64];
        if (st_artifact_name(i, name, sizeof name)) {
            char *text = st_artifact_text(i);
            int rc = sess_write_artifact(s, name, text, strlen(text), e);
            free(text);
            if (rc != 0)
                return -1;
        }
        cJSON *ev = st_event(i, base);
        int rc = sess_append(s, ev, e);
        cJSON_Delete(ev);
        if (rc != 0)
            return -1;
    }
    return 0;
}

char *st_line(long seq, double base)
{
    cJSON *ev = st_event(seq, base);
    char *s = dt_json_print(ev, 0);
    char *line = dt_xasprintf("%s\n", s);
    free(s);
    cJSON_Delete(ev);
    return line;
}

char *st_log_text(const char *dir)
{
    char *p = dt_xasprintf("%s/events.jsonl", dir);
    char *t = dt_read_file(p, NULL, NULL);
    free(p);
    return t ? t : dt_xstrdup("");
}

sess *st_create(const char *root)
{
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    dt_err e = {0};
    sess *s = sess_create(root, spec, fp, &e);
    cr_assert_not_null(s, "sess_create: %s", e.msg);
    cJSON_Delete(spec);
    cJSON_Delete(fp);
    return s;
}

int st_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}
