/* hwtest.c -- helpers shared by the hardware tests. */
#include "tests/hardware/hwtest.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static char *data_home;

void hwt_setup(void)
{
    char *src = realpath(tu_src_dir(), NULL);
    cr_assert_not_null(src, "DITTO_SRC does not exist");
    setenv("DITTO_SHARE", src, 1);
    free(src);
    data_home = tu_tmpdir();
    setenv("XDG_DATA_HOME", data_home, 1);
}

void hwt_teardown(void)
{
    tu_rmtree(data_home);
    free(data_home);
    data_home = NULL;
}

const char *hwt_data_home(void)
{
    return data_home;
}

hw_spec *hwt_load(const char *name)
{
    dt_err e = {0};
    hw_spec *g = hw_load(name, &e);
    cr_assert_not_null(g, "loading %s: %s", name, e.msg);
    return g;
}

cJSON *hwt_doc(const char *name)
{
    char *path = dt_xasprintf("%s/hardware/%s.json", tu_src_dir(), name);
    dt_err e = {0};
    cJSON *doc = dt_json_read_file(path, &e);
    cr_assert_not_null(doc, "%s", e.msg);
    free(path);
    return doc;
}

char *hwt_write_doc(const char *dir, const char *file, const cJSON *doc)
{
    char *text = dt_json_print(doc, 1);
    char *path = tu_write(dir, file, text);
    free(text);
    return path;
}
