/* kbtest.c -- helpers shared by the knowledge base tests. */
#include "tests/knowledge/kbtest.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static char *data_home;
static char *user_dir;
static char *scratch;
static char *no_shipped;

void kbt_setup(void)
{
    char *src = realpath(tu_src_dir(), NULL);
    cr_assert_not_null(src, "DITTO_SRC does not exist");
    setenv("DITTO_SHARE", src, 1);
    free(src);
    data_home = tu_tmpdir();
    setenv("XDG_DATA_HOME", data_home, 1);
    user_dir = dt_xasprintf("%s/ditto/knowledge", data_home);
    scratch = tu_tmpdir();
    no_shipped = dt_xasprintf("%s/no-shipped", scratch);
}

void kbt_teardown(void)
{
    tu_rmtree(data_home);
    tu_rmtree(scratch);
    free(data_home);
    free(user_dir);
    free(scratch);
    free(no_shipped);
    data_home = user_dir = scratch = no_shipped = NULL;
}

const char *kbt_data_home(void)
{
    return data_home;
}

const char *kbt_user_dir(void)
{
    return user_dir;
}

const char *kbt_scratch(void)
{
    return scratch;
}

const char *kbt_no_shipped(void)
{
    return no_shipped;
}

cJSON *kbt_parse(const char *text)
{
    dt_err e = {0};
    cJSON *j = dt_json_parse(text, strlen(text), "test", &e);
    cr_assert_not_null(j, "%s", e.msg);
    return j;
}

cJSON *kbt_entry(const char *id, const char *kind, const char *status)
{
    cJSON *e = dt_json_obj();
    dt_json_set_str(e, "id", id);
    dt_json_set_str(e, "kind", kind);
    dt_json_set_str(e, "title", "a test entry");
    dt_json_set_str(e, "content", "what the entry says");
    if (strcmp(kind, "rule") == 0)
        dt_json_set_take(e, "parameters",
                         kbt_parse("{\"strategy\": \"csr-vector\", \"params\": {\"LANES\": [4, "
                                   "8]}, \"score\": 50}"));
    else if (strcmp(kind, "error-explanation") == 0)
        dt_json_set_take(e, "parameters",
                         kbt_parse("{\"pattern\": \"is undefined\", \"hint\": \"include it\"}"));
    dt_json_set_str(e, "status", status);
    if (strcmp(status, "proposed") == 0)
        dt_json_set_take(e, "review", cJSON_CreateNull());
    else
        dt_json_set_take(e, "review",
                         kbt_parse("{\"reviewer\": \"tester\", \"note\": \"why\", \"at\": "
                                   "\"2026-01-02T03:04:05Z\"}"));
    dt_json_set_str(e, "created", "2026-01-01T00:00:00Z");
    dt_json_set_str(e, "updated", "2026-01-02T03:04:05Z");
    return e;
}

char *kbt_write_doc(const char *dir, const char *file, const cJSON *doc)
{
    char *text = dt_json_print(doc, 1);
    char *path = tu_write(dir, file, text);
    free(text);
    return path;
}

kb *kbt_open(const char *shipped, dt_buf *problems)
{
    dt_err e = {0};
    kb *k = kb_open(shipped, NULL, problems, &e);
    cr_assert_not_null(k, "kb_open: %s", e.msg);
    return k;
}

int kbt_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}
