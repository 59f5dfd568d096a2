/* lxtest.c -- helpers for the scripting tests: a state with hook files in a temporary folder. */
#include "tests/scripting/lxtest.h"

#include <stdlib.h>
#include <string.h>

void lxt_open(lt *t, long budget, size_t cap, int unsafe)
{
    memset(t, 0, sizeof *t);
    t->dir = tu_tmpdir();
    lx_opts o = {unsafe, budget, cap};
    dt_err e = {0};
    t->L = lx_new(&o, &e);
    cr_assert_not_null(t->L, "lx_new: %s", e.msg);
}

void lxt_close(lt *t)
{
    lx_free(t->L);
    tu_rmtree(t->dir);
    free(t->dir);
    dt_buf_free(&t->log);
    dt_buf_free(&t->errors);
    memset(t, 0, sizeof *t);
}

char *lxt_file(lt *t, const char *name, const char *src)
{
    return tu_write(t->dir, name, src);
}

void lxt_load(lt *t, const char *name, const char *src)
{
    char *path = lxt_file(t, name, src);
    dt_err e = {0};
    int rc = lx_load_file(t->L, path, &e);
    cr_assert_eq(rc, 0, "loading %s: %s", name, e.msg);
    free(path);
}

char *lxt_load_fails(lt *t, const char *name, const char *src)
{
    char *path = lxt_file(t, name, src);
    dt_err e = {0};
    int rc = lx_load_file(t->L, path, &e);
    cr_assert_eq(rc, -1, "loading %s should fail", name);
    cr_assert_neq(e.msg[0], '\0', "a failed load must say why");
    free(path);
    return dt_xstrdup(e.msg);
}

cJSON *lxt_json(const char *text)
{
    dt_err e = {0};
    cJSON *v = dt_json_parse(text, strlen(text), "test", &e);
    cr_assert_not_null(v, "%s", e.msg);
    return v;
}

char *lxt_text(const cJSON *v)
{
    return dt_json_print(v, 0);
}

char *lxt_run(lt *t, const char *step, const char *phase, const char *in, int *ran)
{
    cJSON *data = lxt_json(in);
    int n = lx_run_hooks(t->L, step, phase, &data, &t->log, &t->errors);
    if (ran != NULL)
        *ran = n;
    char *out = lxt_text(data);
    cJSON_Delete(data);
    return out;
}

void lxt_reset(lt *t)
{
    dt_buf_reset(&t->log);
    dt_buf_reset(&t->errors);
}
