/* load.c -- matrix sources: files found through $DITTO_MATRIX_PATH,
 * generator specs and block-diagonal replication. */
#include "sparse/sparse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

char *sp_resolve_path(const char *path, dt_err *e)
{
    if (is_file(path))
        return dt_xstrdup(path);
    struct stat st;
    if (stat(path, &st) == 0) {
        dt_err_set(e, "%s: not a regular file", path);
        return NULL;
    }
    if (path[0] == '/') {
        dt_err_set(e, "%s: no such file", path);
        if (e)
            e->code = SP_ENOTFOUND;
        return NULL;
    }
    const char *mp = getenv("DITTO_MATRIX_PATH");
    dt_buf tried = DT_BUF_INIT;
    if (mp != NULL && *mp) {
        char *dirs = dt_xstrdup(mp);
        char *save = NULL;
        for (char *d = strtok_r(dirs, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
            char *cand = dt_xasprintf("%s/%s", d, path);
            if (is_file(cand)) {
                free(dirs);
                dt_buf_free(&tried);
                return cand;
            }
            free(cand);
            dt_buf_printf(&tried, "%s%s", tried.len ? ", " : "", d);
        }
        free(dirs);
    }
    if (tried.len)
        dt_err_set(e, "%s: no such file (also looked in $DITTO_MATRIX_PATH: %s)", path, tried.data);
    else
        dt_err_set(e, "%s: no such file (set DITTO_MATRIX_PATH to search other folders)", path);
    if (e)
        e->code = SP_ENOTFOUND;
    dt_buf_free(&tried);
    return NULL;
}

/* rep:SOURCE:nnz=N[,k=K] -- SOURCE runs up to the last ':' so that it can be
 * a generator spec itself. */
static sp_csr *load_replicated(const char *spec, const sp_read_opts *o, dt_err *e)
{
    const char *body = spec + 4;
    const char *colon = strrchr(body, ':');
    if (colon == NULL || colon == body) {
        dt_err_set(e, "%s: expected rep:SOURCE:nnz=N or rep:SOURCE:k=K", spec);
        return NULL;
    }
    int64_t target = 0, k = 0;
    char *opts = dt_xstrdup(colon + 1);
    char *save = NULL;
    int bad = 0;
    for (char *kv = strtok_r(opts, ",", &save); kv != NULL; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        if (eq == NULL) {
            dt_err_set(e, "%s: '%s' is not key=value (keys: nnz, k)", spec, kv);
            bad = 1;
            break;
        }
        *eq = '\0';
        int64_t v = 0;
        if (dt_parse_size(eq + 1, &v) != 0 || v <= 0) {
            dt_err_set(e, "%s: %s=%s is not a positive size", spec, kv, eq + 1);
            bad = 1;
            break;
        }
        if (strcmp(kv, "nnz") == 0) {
            target = v;
        } else if (strcmp(kv, "k") == 0) {
            k = v;
        } else {
            dt_err_set(e, "%s: unknown key '%s' (keys: nnz, k)", spec, kv);
            bad = 1;
            break;
        }
    }
    free(opts);
    if (bad)
        return NULL;
    if (target == 0 && k == 0) {
        dt_err_set(e, "%s: give nnz=N (target nonzeros) or k=K (copies)", spec);
        return NULL;
    }
    char *source = dt_xstrndup(body, (size_t)(colon - body));
    sp_csr *a = sp_load(source, o, e);
    if (a == NULL) {
        dt_err_prefix(e, "%s", spec);
        free(source);
        return NULL;
    }
    free(source);
    if (k == 0) {
        if (a->nnz == 0) {
            sp_csr_free(a);
            dt_err_set(e, "%s: the source has no nonzeros to replicate", spec);
            return NULL;
        }
        k = (target + a->nnz - 1) / a->nnz;
    }
    if (k > INT32_MAX || (int64_t)a->rows * k > INT32_MAX || (int64_t)a->cols * k > INT32_MAX) {
        dt_err_set(e, "%s: %lld copies of a %d x %d matrix exceed the 32-bit index limit", spec,
                   (long long)k, a->rows, a->cols);
        sp_csr_free(a);
        return NULL;
    }
    sp_csr *r = sp_replicate(a, (int32_t)k, e);
    sp_csr_free(a);
    return r;
}

sp_csr *sp_load(const char *source, const sp_read_opts *o, dt_err *e)
{
    static const sp_read_opts defaults = {0};
    if (o == NULL)
        o = &defaults;
    if (dt_startswith(source, "gen:"))
        return sp_generate(source, e);
    if (dt_startswith(source, "rep:"))
        return load_replicated(source, o, e);
    char *path = strcmp(source, "-") == 0 ? dt_xstrdup(source) : sp_resolve_path(source, e);
    if (path == NULL)
        return NULL;
    char head[SP_INPUT_HEAD];
    size_t head_len;
    FILE *f = sp_input_open(path, head, &head_len, e);
    sp_csr *a = NULL;
    if (f != NULL) {
        if (sp_input_is_smtx(path, head, head_len))
            a = sp_smtx_read_stream(f, sp_input_name(path), o, e);
        else
            a = sp_mm_read_stream(f, sp_input_name(path), o, e);
        fclose(f);
    }
    free(path);
    return a;
}
