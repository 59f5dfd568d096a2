/* test_profile.c -- `ditto profile` end to end on the sanitized binary: the
 * real matrices' numbers, generators, specs, and one clear line for every
 * kind of bad input. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

static cJSON *profile_json(const char *arg)
{
    tu_proc p = tu_run("'%s' profile '%s' --json", tu_ditto_bin(), arg);
    cr_assert_eq(p.status, 0, "exit %d: %s", p.status, p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "not JSON: %s", p.out);
    tu_proc_free(&p);
    return j;
}

Test(profile, bcsstk13_should_report_the_symmetric_expansion)
{
    char *m = tu_matrix("bcsstk13.mtx");
    cJSON *j = profile_json(m);
    cr_assert_eq(dt_json_num(j, "rows", 0), 2003);
    cr_assert_eq(dt_json_num(j, "nnz", 0), 83883);
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(j, "row_length"), "max", 0), 95);
    cr_assert_eq(strlen(dt_json_str(j, "fingerprint", "")), 16);
    cJSON_Delete(j);
    free(m);
}

Test(profile, real_matrices_should_match_sources_through_the_cli)
{
    /* file, rows, nnz after expansion, max row, empty rows (SOURCES.tsv) */
    static const struct {
        const char *f;
        int rows;
        int nnz, max, empty;
    } cases[] = {
        {"Erdos971.mtx", 472, 2628, 41, 39},
        {"hangGlider_2.mtx", 1647, 14754, 1463, 0},
        {"Franz6_id1959_aug.mtx", 10592, 48472, 6, 0},
        {"bcsstm25.mtx", 15439, 15439, 1, 0},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        char *m = tu_matrix(cases[i].f);
        cJSON *j = profile_json(m);
        const cJSON *rl = cJSON_GetObjectItem(j, "row_length");
        cr_assert_eq(dt_json_num(j, "rows", 0), cases[i].rows, "%s", cases[i].f);
        cr_assert_eq(dt_json_num(j, "nnz", 0), cases[i].nnz, "%s", cases[i].f);
        cr_assert_eq(dt_json_num(rl, "max", 0), cases[i].max, "%s", cases[i].f);
        cr_assert_eq(dt_json_num(j, "empty_rows", -1), cases[i].empty, "%s", cases[i].f);
        cJSON_Delete(j);
        free(m);
    }
    /* The pure diagonal matrix is classed as such. */
    char *m = tu_matrix("bcsstm25.mtx");
    cJSON *j = profile_json(m);
    cr_assert_str_eq(dt_json_str(j, "class", ""), "diagonal");
    cJSON_Delete(j);
    free(m);
}

Test(profile, dlmc_smtx_should_profile_as_pattern_only)
{
    char *m = tu_matrix("dlmc/rn50__magnitude_pruning__0.8__final_dense.smtx");
    cJSON *j = profile_json(m);
    cr_assert_eq(dt_json_num(j, "rows", 0), 1000);
    cr_assert_eq(dt_json_num(j, "cols", 0), 2048);
    cr_assert_eq(dt_json_num(j, "nnz", 0), 409599);
    cr_assert(dt_json_bool(j, "pattern_only", 0));
    cJSON_Delete(j);
    free(m);
}

Test(profile, generators_and_replication_should_work_from_the_cli)
{
    cJSON *j = profile_json("gen:stencil5:rows=10000");
    cr_assert_eq(dt_json_num(j, "nnz", 0), 5 * 10000 - 4 * 100);
    cr_assert_str_eq(dt_json_str(j, "class", ""), "banded");
    cJSON_Delete(j);
    char *m = tu_matrix("west0479.mtx");
    char *rep = dt_xasprintf("rep:%s:nnz=10000", m);
    j = profile_json(rep);
    /* 1910 entries per copy, 6 copies to pass 10000 */
    cr_assert_eq(dt_json_num(j, "nnz", 0), 6 * 1910);
    cr_assert_eq(dt_json_num(j, "rows", 0), 6 * 479);
    cJSON_Delete(j);
    free(rep);
    free(m);
}

Test(profile, a_spec_file_should_be_validated_and_its_matrix_profiled)
{
    char *dir = tu_tmpdir();
    char *good = tu_write(dir, "good.json",
                          "{\"op\": \"spmm\", \"n\": 64, \"matrix\": \"gen:uniform:rows=1000,nnz=8000\"}");
    cJSON *j = profile_json(good);
    cr_assert_eq(dt_json_num(j, "nnz", 0), 8000);
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "cost"), "spmm"), "n", 0),
                 64);
    cJSON_Delete(j);
    char *bad = tu_write(dir, "bad.json", "{\"op\": \"spmx\", \"dtype\": \"fp8\"}");
    tu_proc p = tu_run("'%s' profile '%s'", tu_ditto_bin(), bad);
    cr_assert_eq(p.status, 1);
    cr_assert(strstr(p.err, "bad.json: $.op:") && strstr(p.err, "bad.json: $.dtype:") &&
                  strstr(p.err, "$.matrix: expected a .mtx/.smtx path or a generator such as "
                         "\"gen:rmat:rows=1M,nnz=16M\", got nothing"),
              "%s", p.err);
    tu_proc_free(&p);
    free(good);
    free(bad);
    tu_rmtree(dir);
    free(dir);
}

/* Each bad input: exit 1, exactly one line on stderr naming file:line, no
 * sanitizer report (the binary under test is the ASan build). */
static void expect_one_line(const char *dir, const char *name, const char *text,
                            const char *want)
{
    char *f = tu_write(dir, name, text);
    tu_proc p = tu_run("'%s' profile '%s'", tu_ditto_bin(), f);
    cr_assert_eq(p.status, 1, "%s: exit %d, stderr %s", name, p.status, p.err);
    cr_assert_str_eq(p.out, "", "%s", name);
    int lines = 0;
    for (const char *c = p.err; *c; c++)
        lines += *c == '\n';
    cr_assert_eq(lines, 1, "%s: stderr was: %s", name, p.err);
    cr_assert(strstr(p.err, want), "%s: wanted '%s' in: %s", name, want, p.err);
    cr_assert(!strstr(p.err, "Sanitizer"), "%s", p.err);
    tu_proc_free(&p);
    free(f);
}

Test(profile, bad_inputs_should_give_one_clear_line_each)
{
    char *dir = tu_tmpdir();
    const char *hdr = "%%MatrixMarket matrix coordinate real general\n";
    char buf[512];
    snprintf(buf, sizeof buf, "%s3 3 4\n1 1 1.0\n2 2 2.0\n", hdr);
    expect_one_line(dir, "truncated.mtx", buf, "truncated.mtx:5: file ends after 2 of 4");
    expect_one_line(dir, "header.mtx", "%%MatrixMarkt matrix coordinate real general\n1 1 1\n1 1 1\n",
                    "header.mtx:1:");
    snprintf(buf, sizeof buf, "%s3 3 2\n1 1 1.0\n4 2 2.0\n", hdr);
    expect_one_line(dir, "range.mtx", buf, "range.mtx:4:");
    snprintf(buf, sizeof buf, "%s3 3 1\n1 1 1.0\n2 2 2.0\n", hdr);
    expect_one_line(dir, "count.mtx", buf, "count.mtx:4:");
    expect_one_line(dir, "garbage.mtx", "\x7f" "ELF\x01\x02 garbage \xff\xfe\n", "garbage.mtx:1:");
    snprintf(buf, sizeof buf, "%s3 3 1\n1 1 abc\n", hdr);
    expect_one_line(dir, "value.mtx", buf, "value.mtx:3:");
    snprintf(buf, sizeof buf, "%s3 3 1\n1 1 nan\n", hdr);
    expect_one_line(dir, "nan.mtx", buf, "nan.mtx:3:");
    expect_one_line(dir, "empty.mtx", "", "empty.mtx:");
    expect_one_line(dir, "bad.smtx", "3, 3, 2\n0 1 5 2\n0 1\n", "bad.smtx:2:");
    tu_rmtree(dir);
    free(dir);
}

Test(profile, missing_files_and_bad_generators_should_say_what_to_do)
{
    tu_proc p = tu_run("'%s' profile /nonexistent/m.mtx", tu_ditto_bin());
    cr_assert_eq(p.status, 66);
    cr_assert(strstr(p.err, "/nonexistent/m.mtx: no such file"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' profile gen:foo:rows=10", tu_ditto_bin());
    cr_assert_eq(p.status, 1);
    cr_assert(strstr(p.err, "unknown kind 'foo'") && strstr(p.err, "rmat"), "%s", p.err);
    tu_proc_free(&p);
    p = tu_run("'%s' profile", tu_ditto_bin());
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--help"), "%s", p.err);
    tu_proc_free(&p);
}

Test(cli, help_and_version_should_be_true)
{
    tu_proc p = tu_run("'%s' --help", tu_ditto_bin());
    cr_assert_eq(p.status, 0);
    const char *cmds[] = {"profile", "check", "baseline", "calibrate", "hw", "occupancy",
                          "roofline", "worker"};
    for (size_t i = 0; i < DT_ARRAY_LEN(cmds); i++) {
        cr_assert(strstr(p.out, cmds[i]), "--help lacks %s", cmds[i]);
        tu_proc q = tu_run("'%s' %s --help", tu_ditto_bin(), cmds[i]);
        cr_assert_eq(q.status, 0, "%s --help: exit %d", cmds[i], q.status);
        cr_assert(strstr(q.out, "usage: ditto"), "%s --help: %s", cmds[i], q.out);
        tu_proc_free(&q);
    }
    tu_proc_free(&p);
    p = tu_run("'%s' --version", tu_ditto_bin());
    cr_assert(dt_startswith(p.out, "ditto "));
    tu_proc_free(&p);
    p = tu_run("'%s' frobnicate", tu_ditto_bin());
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "unknown command 'frobnicate'"));
    tu_proc_free(&p);
}
