/* test_store.c -- the session store's writing side: create, append, read
 * back, artifacts and their name checks, resume numbering, one writer. */
#include "tests/common/testutil.h"
#include "tests/sessions/sesstest.h"

#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const double base = 1.8e9;

/* Entries of a folder other than . and ..; the hidden ones are also
 * counted into *hidden. */
static int count_entries(const char *dir, int *hidden)
{
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    int n = 0;
    *hidden = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        n++;
        *hidden += de->d_name[0] == '.';
    }
    closedir(d);
    return n;
}

static int id_well_formed(const char *id)
{
    /* YYYYMMDD-HHMMSS-xxxx */
    if (strlen(id) != 20 || id[8] != '-' || id[15] != '-')
        return 0;
    for (int i = 0; i < 20; i++) {
        if (i == 8 || i == 15)
            continue;
        if (i < 15 && !isdigit((unsigned char)id[i]))
            return 0;
        if (i > 15 && !(isdigit((unsigned char)id[i]) || islower((unsigned char)id[i])))
            return 0;
    }
    return 1;
}

Test(store, create_append_read_should_round_trip_every_event)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    cr_assert(id_well_formed(sess_id(s)), "id %s", sess_id(s));
    char *want_dir = dt_xasprintf("%s/%s", root, sess_id(s));
    cr_assert_str_eq(sess_dir(s), want_dir);
    cr_assert_eq(sess_next_seq(s), 1);
    cr_assert_str_eq(sess_warnings(s), "");
    dt_err e = {0};
    cr_assert_eq(st_run(s, 1, 30, base, &e), 0, "%s", e.msg);
    cr_assert_eq(sess_next_seq(s), 31);
    cr_assert_eq(sess_sync(s, &e), 0, "%s", e.msg);
    char *id = dt_xstrdup(sess_id(s));
    sess_close(s);

    sess_log *l = sess_log_read(root, id, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_str_eq(l->id, id);
    cr_assert_str_eq(l->dir, want_dir);
    cr_assert_eq(cJSON_GetArraySize(l->events), 30);
    for (int i = 0; i < 30; i++) {
        cJSON *want = st_event(i + 1, base);
        cr_assert(cJSON_Compare(cJSON_GetArrayItem(l->events, i), want, 1), "event %d", i + 1);
        cJSON_Delete(want);
    }
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    cr_assert(cJSON_Compare(l->spec, spec, 1));
    cr_assert(cJSON_Compare(l->fingerprint, fp, 1));
    cr_assert_eq(l->truncated, 0);
    cr_assert_eq(l->finished, 0);
    cr_assert_str_eq(dt_buf_str(&l->warnings), "");
    sess_log_free(l);
    /* by path too */
    l = sess_log_read(NULL, want_dir, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(cJSON_GetArraySize(l->events), 30);
    sess_log_free(l);
    /* nothing but the session folder is left under root */
    int hidden = 0;
    cr_assert_eq(count_entries(root, &hidden), 1);
    cr_assert_eq(hidden, 0);
    cJSON_Delete(spec);
    cJSON_Delete(fp);
    free(id);
    free(want_dir);
    tu_rmtree(root);
    free(root);
}

Test(store, each_event_should_be_one_compact_line)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    dt_err e = {0};
    cr_assert_eq(st_run(s, 1, 12, base, &e), 0, "%s", e.msg);
    dt_buf want = DT_BUF_INIT;
    for (long i = 1; i <= 12; i++) {
        char *line = st_line(i, base);
        dt_buf_puts(&want, line);
        free(line);
    }
    char *got = st_log_text(sess_dir(s));
    cr_assert_str_eq(got, want.data);
    cr_assert_eq(st_lines(got), 12);
    free(got);
    dt_buf_free(&want);
    sess_close(s);
    tu_rmtree(root);
    free(root);
}

Test(store, appends_that_would_make_a_bad_log_should_be_refused_and_write_nothing)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    dt_err e = {0};
    cr_assert_eq(st_run(s, 1, 5, base, &e), 0, "%s", e.msg);
    char *before = st_log_text(sess_dir(s));
    const char *bad[] = {
        "{\"seq\": 6, \"t\": 1}",                /* no type */
        "{\"seq\": 6, \"type\": 7}",             /* type not a string */
        "{\"type\": \"text\", \"text\": \"x\"}", /* no seq */
        "{\"seq\": \"6\", \"type\": \"text\"}",  /* seq not a number */
        "{\"seq\": 5, \"type\": \"text\"}",      /* repeats the last seq */
        "{\"seq\": 2, \"type\": \"text\"}",      /* goes backwards */
        "{\"seq\": 6.5, \"type\": \"text\"}",    /* not an integer */
        "[{\"seq\": 6, \"type\": \"text\"}]",    /* not an object */
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        cJSON *ev = cJSON_Parse(bad[i]);
        cr_assert_not_null(ev);
        dt_err_clear(&e);
        cr_assert_eq(sess_append(s, ev, &e), -1, "%s accepted", bad[i]);
        cr_assert_eq(e.code, SESS_EINVAL, "%s: code %d", bad[i], e.code);
        cr_assert(strstr(e.msg, "refused"), "%s: %s", bad[i], e.msg);
        cJSON_Delete(ev);
    }
    cr_assert_eq(sess_next_seq(s), 6);
    char *after = st_log_text(sess_dir(s));
    cr_assert_str_eq(after, before);
    /* A gap is fine: a power loss can lose unsynced events of a step. */
    cJSON *ev = cJSON_Parse("{\"seq\": 9, \"type\": \"log\", \"level\": \"info\"}");
    cr_assert_eq(sess_append(s, ev, &e), 0, "%s", e.msg);
    cr_assert_eq(sess_next_seq(s), 10);
    cJSON_Delete(ev);
    sess_close(s);
    free(before);
    free(after);
    tu_rmtree(root);
    free(root);
}

Test(store, artifacts_should_round_trip_byte_for_byte)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    dt_err e = {0};
    const char bin[] = "__global__ void k() {}\n\0binary\xff tail";
    cr_assert_eq(sess_write_artifact(s, "kernel_v3.cu", bin, sizeof bin, &e), 0, "%s", e.msg);
    size_t len = 0;
    char *got = sess_read_artifact(s, "kernel_v3.cu", &len, &e);
    cr_assert_not_null(got, "%s", e.msg);
    cr_assert_eq(len, sizeof bin);
    cr_assert_eq(memcmp(got, bin, len), 0);
    cr_assert_eq(got[len], '\0');
    free(got);
    /* an edit replaces it */
    cr_assert_eq(sess_write_artifact(s, "kernel_v3.cu", "v2", 2, &e), 0, "%s", e.msg);
    got = sess_read_artifact(s, "kernel_v3.cu", &len, &e);
    cr_assert_str_eq(got, "v2");
    free(got);
    /* an empty one is still a file */
    cr_assert_eq(sess_write_artifact(s, "tune.json", "", 0, &e), 0, "%s", e.msg);
    got = sess_read_artifact(s, "tune.json", &len, &e);
    cr_assert_not_null(got, "%s", e.msg);
    cr_assert_eq(len, 0);
    free(got);
    /* no temporary file is left beside them */
    int hidden = 0;
    cr_assert_eq(count_entries(sess_dir(s), &hidden), 5); /* spec, fingerprint, log, 2 */
    /* a missing one says which */
    dt_err_clear(&e);
    cr_assert_null(sess_read_artifact(s, "plan_v9.json", &len, &e));
    cr_assert_eq(e.code, SESS_ENOTFOUND);
    cr_assert(strstr(e.msg, "plan_v9.json"), "%s", e.msg);
    sess_close(s);
    tu_rmtree(root);
    free(root);
}

Test(store, artifact_names_that_leave_the_folder_or_hit_the_store_should_be_refused)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    char *log_before = st_log_text(sess_dir(s));
    const char *bad[] = {"../x",
                         "a/b",
                         "..",
                         ".",
                         "",
                         "/etc/passwd",
                         "x/../../y",
                         "..x",
                         "kernel..cu",
                         ".hidden",
                         "events.jsonl",
                         "spec.json",
                         "fingerprint.json"};
    for (size_t i = 0; i < DT_ARRAY_LEN(bad); i++) {
        dt_err e = {0};
        cr_assert_eq(sess_write_artifact(s, bad[i], "evil", 4, &e), -1, "'%s' accepted", bad[i]);
        cr_assert_eq(e.code, SESS_EINVAL, "'%s'", bad[i]);
        cr_assert(strstr(e.msg, "refused"), "'%s': %s", bad[i], e.msg);
        dt_err_clear(&e);
        cr_assert_null(sess_read_artifact(s, bad[i], NULL, &e), "'%s' read", bad[i]);
        cr_assert_eq(e.code, SESS_EINVAL, "'%s'", bad[i]);
    }
    cr_assert_eq(sess_write_artifact(s, NULL, "x", 1, NULL), -1);
    char *outside = dt_xasprintf("%s/x", root);
    cr_assert(!dt_file_exists(outside), "../x escaped the session folder");
    char *sub = dt_xasprintf("%s/a", sess_dir(s));
    struct stat st;
    cr_assert_neq(stat(sub, &st), 0, "a/b made a folder");
    char *log_after = st_log_text(sess_dir(s));
    cr_assert_str_eq(log_after, log_before);
    free(outside);
    free(sub);
    free(log_before);
    free(log_after);
    sess_close(s);
    tu_rmtree(root);
    free(root);
}

Test(store, sync_should_succeed_on_a_healthy_log)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    dt_err e = {0};
    cr_assert_eq(sess_sync(s, &e), 0, "%s", e.msg);
    cr_assert_eq(st_run(s, 1, 3, base, &e), 0, "%s", e.msg);
    cr_assert_eq(sess_sync(s, &e), 0, "%s", e.msg);
    cr_assert_eq(e.code, 0);
    sess_close(s);
    tu_rmtree(root);
    free(root);
}

Test(store, open_should_continue_the_numbering_where_the_log_ends)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    dt_err e = {0};
    cr_assert_eq(st_run(s, 1, 10, base, &e), 0, "%s", e.msg);
    char *id = dt_xstrdup(sess_id(s));
    sess_close(s);
    s = sess_open(root, id, &e);
    cr_assert_not_null(s, "%s", e.msg);
    cr_assert_str_eq(sess_id(s), id);
    cr_assert_eq(sess_next_seq(s), 11);
    cr_assert_str_eq(sess_warnings(s), "");
    cr_assert_eq(st_run(s, 11, 14, base, &e), 0, "%s", e.msg);
    /* the numbering is enforced against what is in the file */
    cJSON *old = st_event(3, base);
    cr_assert_eq(sess_append(s, old, &e), -1);
    cJSON_Delete(old);
    sess_close(s);
    sess_log *l = sess_log_read(root, id, &e);
    cr_assert_not_null(l, "%s", e.msg);
    cr_assert_eq(cJSON_GetArraySize(l->events), 14);
    cr_assert_eq(dt_json_num(cJSON_GetArrayItem(l->events, 13), "seq", 0), 14);
    sess_log_free(l);
    free(id);
    tu_rmtree(root);
    free(root);
}

Test(store, a_session_should_have_one_writer_at_a_time)
{
    char *root = tu_tmpdir();
    sess *s = st_create(root);
    dt_err e = {0};
    cr_assert_null(sess_open(root, sess_id(s), &e), "a second writer was let in");
    cr_assert_eq(e.code, SESS_EBUSY);
    cr_assert(strstr(e.msg, sess_id(s)) && strstr(e.msg, "another process"), "%s", e.msg);
    /* readers are not writers */
    sess_log *l = sess_log_read(root, sess_id(s), &e);
    cr_assert_not_null(l, "%s", e.msg);
    sess_log_free(l);
    char *id = dt_xstrdup(sess_id(s));
    sess_close(s);
    s = sess_open(root, id, &e);
    cr_assert_not_null(s, "after close: %s", e.msg);
    sess_close(s);
    free(id);
    tu_rmtree(root);
    free(root);
}

Test(store, unknown_sessions_should_be_named_with_their_root)
{
    char *root = tu_tmpdir();
    const char *ids[] = {"20990101-000000-zzzz", ".", "..", ".new-x"};
    for (size_t i = 0; i < DT_ARRAY_LEN(ids); i++) {
        dt_err e = {0};
        cr_assert_null(sess_open(root, ids[i], &e), "%s", ids[i]);
        cr_assert_eq(e.code, SESS_ENOTFOUND, "%s", ids[i]);
        char *want = dt_xasprintf("no session '%s' under %s", ids[i], root);
        cr_assert_str_eq(e.msg, want);
        free(want);
        dt_err_clear(&e);
        cr_assert_null(sess_log_read(root, ids[i], &e));
        cr_assert_eq(e.code, SESS_ENOTFOUND);
    }
    /* a folder that is not a session */
    char *junk = dt_xasprintf("%s/junk", root);
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(junk, &e), 0);
    cr_assert_null(sess_log_read(root, "junk", &e));
    cr_assert_eq(e.code, SESS_ENOTFOUND);
    cr_assert(strstr(e.msg, "not a session folder"), "%s", e.msg);
    free(junk);
    tu_rmtree(root);
    free(root);
}

Test(store, create_should_fail_cleanly_and_leave_nothing)
{
    char *root = tu_tmpdir();
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    cJSON *arr = dt_json_arr();
    dt_err e = {0};
    cr_assert_null(sess_create(root, arr, fp, &e));
    cr_assert_eq(e.code, SESS_EINVAL);
    cr_assert(strstr(e.msg, "spec"), "%s", e.msg);
    cr_assert_null(sess_create(root, spec, NULL, &e));
    cr_assert(strstr(e.msg, "fingerprint"), "%s", e.msg);
    int hidden = 0;
    cr_assert_eq(count_entries(root, &hidden), 0);
    /* a root that cannot be a folder */
    char *file = tu_write(root, "plain", "x");
    char *under = dt_xasprintf("%s/sessions", file);
    dt_err_clear(&e);
    cr_assert_null(sess_create(under, spec, fp, &e));
    cr_assert_neq(e.code, 0);
    cr_assert(strstr(e.msg, "plain"), "%s", e.msg);
    cr_assert_eq(count_entries(root, &hidden), 1);
    /* a missing root is made */
    char *deep = dt_xasprintf("%s/a/b/sessions", root);
    sess *s = sess_create(deep, spec, fp, &e);
    cr_assert_not_null(s, "%s", e.msg);
    sess_close(s);
    free(deep);
    free(file);
    free(under);
    cJSON_Delete(arr);
    cJSON_Delete(spec);
    cJSON_Delete(fp);
    tu_rmtree(root);
    free(root);
}

Test(store, sessions_created_together_should_get_distinct_ids)
{
    char *root = tu_tmpdir();
    enum { N = 20 };
    sess *s[N];
    for (int i = 0; i < N; i++)
        s[i] = st_create(root);
    for (int i = 0; i < N; i++) {
        for (int j = i + 1; j < N; j++)
            cr_assert_str_neq(sess_id(s[i]), sess_id(s[j]));
    }
    for (int i = 0; i < N; i++)
        sess_close(s[i]);
    int hidden = 0;
    cr_assert_eq(count_entries(root, &hidden), N);
    cr_assert_eq(hidden, 0);
    tu_rmtree(root);
    free(root);
}

Test(store, the_root_should_default_to_the_data_dir)
{
    char *r = sess_root("/some/where");
    cr_assert_str_eq(r, "/some/where");
    free(r);
    setenv("XDG_DATA_HOME", "/xdg/data", 1);
    r = sess_root(NULL);
    cr_assert_str_eq(r, "/xdg/data/ditto/sessions");
    free(r);
    unsetenv("XDG_DATA_HOME");
    setenv("HOME", "/home/u", 1);
    r = sess_root(NULL);
    cr_assert_str_eq(r, "/home/u/.local/share/ditto/sessions");
    free(r);
    unsetenv("HOME");
    cr_assert_null(sess_root(NULL));
    /* and a NULL root then fails with a clear message */
    dt_err e = {0};
    cJSON *spec = st_spec(), *fp = st_fingerprint();
    cr_assert_null(sess_create(NULL, spec, fp, &e));
    cr_assert(strstr(e.msg, "--session-dir"), "%s", e.msg);
    cJSON_Delete(spec);
    cJSON_Delete(fp);
}
