/* test_cli.c -- `ditto kb` run as a user would, on the sanitized binary, with
 * the shipped knowledge base and a temporary XDG_DATA_HOME. */
#include "tests/knowledge/kbtest.h"

#include <stdlib.h>
#include <string.h>

TestSuite(kbcli, .init = kbt_setup, .fini = kbt_teardown);

#define HAS(out, s) cr_assert(strstr((out), (s)) != NULL, "missing [%s] in:\n%s", (s), (out))

static tu_proc run(const char *args)
{
    return tu_run("'%s' kb %s", tu_ditto_bin(), args);
}

static cJSON *run_json(const char *args)
{
    tu_proc p = run(args);
    cr_assert_eq(p.status, 0, "ditto kb %s: exit %d\n%s", args, p.status, p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "ditto kb %s: not JSON:\n%s", args, p.out);
    tu_proc_free(&p);
    return j;
}

/* Exit status and a one-line error naming what to fix. */
static void expect_error(const char *args, int status, const char *msg)
{
    tu_proc p = run(args);
    cr_assert_eq(p.status, status, "ditto kb %s: exit %d, want %d\n%s", args, p.status, status,
                 p.err);
    HAS(p.err, msg);
    cr_assert(dt_startswith(p.err, "ditto kb"), "%s", p.err);
    tu_proc_free(&p);
}

static const cJSON *find_id(const cJSON *arr, const char *id)
{
    for (const cJSON *e = arr->child; e != NULL; e = e->next) {
        if (dt_streq(dt_json_str(e, "id", ""), id))
            return e;
    }
    return NULL;
}

Test(kbcli, help_should_print_the_usage)
{
    tu_proc p = run("--help");
    cr_assert_eq(p.status, 0);
    HAS(p.out, "usage: ditto kb list [--kind K] [--status S] [--json]");
    HAS(p.out, "ditto kb retrieve --op OP");
    tu_proc_free(&p);
    p = run("approve --help");
    cr_assert_eq(p.status, 0);
    HAS(p.out, "usage: ditto kb");
    tu_proc_free(&p);
    p = tu_run("'%s' --help", tu_ditto_bin());
    HAS(p.out, "  kb ");
    tu_proc_free(&p);
}

Test(kbcli, list_should_show_the_shipped_entries_and_filter)
{
    tu_proc p = run("list");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert_eq(p.err[0], '\0', "warnings: %s", p.err);
    HAS(p.out, "ID");
    HAS(p.out, "rule.spmv.merge-path-for-power-law");
    HAS(p.out, "shipped");
    HAS(p.out, " entries\n");
    tu_proc_free(&p);

    cJSON *all = run_json("list --json");
    cJSON *errs = run_json("list --kind error-explanation --json");
    cr_assert_geq(cJSON_GetArraySize(errs), 12);
    cr_assert_lt(cJSON_GetArraySize(errs), cJSON_GetArraySize(all));
    for (const cJSON *e = errs->child; e != NULL; e = e->next)
        cr_assert_str_eq(dt_json_str(e, "kind", ""), "error-explanation");
    cJSON *prop = run_json("list --status proposed --json");
    cr_assert_gt(cJSON_GetArraySize(prop), 0);
    for (const cJSON *e = prop->child; e != NULL; e = e->next)
        cr_assert_str_eq(dt_json_str(e, "status", ""), "proposed");
    cJSON_Delete(all);
    cJSON_Delete(errs);
    cJSON_Delete(prop);

    expect_error("list --kind recipe", 2, "--kind takes one of rule, strategy, pitfall");
    expect_error("list --status maybe", 2, "--status takes one of proposed, approved, rejected");
    expect_error("list --kind", 2, "--kind needs a value");
    expect_error("list extra", 2, "unknown argument 'extra'");
    expect_error("", 2, "give a subcommand");
    expect_error("frobnicate", 2, "unknown subcommand 'frobnicate'");
}

Test(kbcli, show_should_print_one_entry)
{
    tu_proc p = run("show rule.spmv.merge-path-for-power-law");
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.out, "Power-law rows");
    HAS(p.out, "strategy    merge-path");
    HAS(p.out, "status      approved by ditto maintainers");
    HAS(p.out, "source      shipped (");
    tu_proc_free(&p);
    cJSON *j = run_json("show error.ptxas.too-much-shared --json");
    cr_assert_str_eq(dt_json_str(j, "id", ""), "error.ptxas.too-much-shared");
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(j, "parameters"), "pattern", ""),
                     "uses too much shared data");
    cJSON_Delete(j);
    expect_error("show rule.none", 66, "ditto kb show: no entry 'rule.none'");
    expect_error("show", 2, "give an entry id");
    expect_error("show a b", 2, "one id at a time");
}

Test(kbcli, approve_and_reject_should_persist_in_the_user_folder)
{
    const char *id = "rule.spmv.merge-path-for-many-empty-rows"; /* shipped as proposed */
    char args[256];
    snprintf(args, sizeof args, "approve %s --reviewer alice --note 'seen on rmat'", id);
    tu_proc p = run(args);
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.out, "approved rule.spmv.merge-path-for-many-empty-rows (reviewer alice): saved to ");
    HAS(p.out, kbt_user_dir());
    tu_proc_free(&p);
    char *file = dt_xasprintf("%s/%s.json", kbt_user_dir(), id);
    cr_assert(dt_file_exists(file));
    snprintf(args, sizeof args, "show %s --json", id);
    cJSON *j = run_json(args);
    cr_assert_str_eq(dt_json_str(j, "status", ""), "approved");
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(j, "review"), "reviewer", ""), "alice");
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(j, "review"), "note", ""), "seen on rmat");
    cJSON_Delete(j);
    p = run("list --status approved");
    HAS(p.out, "override");
    tu_proc_free(&p);

    /* The reviewer defaults to $USER; without it the command says what to do. */
    p = tu_run("USER=bob '%s' kb reject %s --note 'slower on A100'", tu_ditto_bin(), id);
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.out, "rejected rule.spmv.merge-path-for-many-empty-rows (reviewer bob)");
    tu_proc_free(&p);
    snprintf(args, sizeof args, "show %s --json", id);
    j = run_json(args);
    cr_assert_str_eq(dt_json_str(j, "status", ""), "rejected");
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(j, "review"), "reviewer", ""), "bob");
    cJSON_Delete(j);
    p = tu_run("env -u USER '%s' kb approve %s", tu_ditto_bin(), id);
    cr_assert_eq(p.status, 2);
    HAS(p.err, "ditto kb approve: no reviewer: pass --reviewer NAME");
    tu_proc_free(&p);

    snprintf(args, sizeof args, "reject %s --reviewer bob", id);
    expect_error(args, 2, "ditto kb reject: --note TEXT is required");
    expect_error("approve rule.none --reviewer a", 1, "no entry \"rule.none\"");
    expect_error("approve", 2, "give an entry id");
    expect_error("approve x --bogus", 2, "unknown option '--bogus'");
    free(file);
}

static char *write_entries(const char *name, const char *text)
{
    return tu_write(kbt_scratch(), name, text);
}

static const char *entry_text(const char *id, const char *status)
{
    static char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"id\": \"%s\", \"kind\": \"strategy\", \"title\": \"t\", \"content\": \"c\","
             " \"status\": \"%s\", \"review\": %s, \"created\": \"2026-01-01T00:00:00Z\","
             " \"updated\": \"2026-01-01T00:00:00Z\"}",
             id, status,
             dt_streq(status, "proposed")
                 ? "null"
                 : "{\"reviewer\": \"x\", \"note\": \"n\", \"at\": \"2026-01-01T00:00:00Z\"}");
    return buf;
}

Test(kbcli, import_should_be_all_or_nothing_and_export_should_round_trip)
{
    cJSON *before = run_json("list --json");
    int n0 = cJSON_GetArraySize(before);
    cJSON_Delete(before);

    dt_buf text = DT_BUF_INIT;
    dt_buf_printf(&text, "[%s,\n", entry_text("team.one", "approved"));
    dt_buf_printf(&text, " {\"id\": \"team.two\", \"kind\": \"strategy\", \"status\": \"ok\"}]");
    char *bad = write_entries("bad.json", dt_buf_str(&text));
    dt_buf_free(&text);
    char args[512];
    snprintf(args, sizeof args, "import '%s'", bad);
    tu_proc p = run(args);
    cr_assert_eq(p.status, 1, "%s", p.err);
    /* (no status problem: every imported entry arrives proposed) */
    HAS(p.err, "bad.json: $[1].title: expected a non-empty one-line string of at most 120 "
               "characters, got nothing");
    HAS(p.err, "ditto kb import: ");
    HAS(p.err, "nothing imported");
    tu_proc_free(&p);
    cJSON *after = run_json("list --json");
    cr_assert_eq(cJSON_GetArraySize(after), n0);
    cJSON_Delete(after);

    dt_buf_printf(&text, "[%s,\n", entry_text("team.one", "approved"));
    dt_buf_printf(&text, " %s]", entry_text("team.two", "approved"));
    char *good = write_entries("good.json", dt_buf_str(&text));
    dt_buf_free(&text);
    /* "approved" by someone else: they arrive proposed all the same */
    snprintf(args, sizeof args, "import '%s'", good);
    p = run(args);
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.out, "imported 2 entries from");
    HAS(p.out, "as proposed");
    tu_proc_free(&p);
    cJSON *prop = run_json("list --status proposed --json");
    cr_assert_not_null(find_id(prop, "team.one"));
    cr_assert_not_null(find_id(prop, "team.two"));
    cJSON_Delete(prop);
    p = run(args);
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.out, "nothing to import");
    tu_proc_free(&p);
    expect_error("import /nonexistent.json", 1, "/nonexistent.json");
    expect_error("import", 2, "give a JSON file");

    /* export: everything to stdout, a status to a file. */
    cJSON *all = run_json("export");
    cr_assert_eq(cJSON_GetArraySize(all), n0 + 2);
    cJSON_Delete(all);
    char *out = dt_xasprintf("%s/approved.json", kbt_scratch());
    snprintf(args, sizeof args, "export --status approved --out '%s'", out);
    p = run(args);
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.err, "exported ");
    tu_proc_free(&p);
    dt_err e = {0};
    cJSON *ex = dt_json_read_file(out, &e);
    cr_assert_not_null(ex, "%s", e.msg);
    cr_assert_gt(cJSON_GetArraySize(ex), 0);
    for (const cJSON *it = ex->child; it != NULL; it = it->next)
        cr_assert_str_eq(dt_json_str(it, "status", ""), "approved");
    cr_assert_null(find_id(ex, "team.one"));
    cJSON_Delete(ex);
    expect_error("export --out /nonexistent/dir/x.json", 1, "/nonexistent/dir/x.json");
    free(out);
    free(bad);
    free(good);
}

Test(kbcli, retrieve_should_rank_rules_from_features)
{
    /* The features of gen:rmat:rows=100000,nnz=1600000 (ranges on features a
     * query lacks are not checked, so a planner passes them all). */
    cJSON *j =
        run_json("retrieve --op spmv --kind rule --json --features '{\"rows\": 100000, \"nnz\": "
                 "16000000, \"row_mean\": 16, \"row_cv\": 6.9, \"row_max\": 15611, "
                 "\"row_max_over_mean\": 976, \"row_gini\": 0.89, \"empty_rows_frac\": 0.38, "
                 "\"block_fill_2\": 0.27, \"block_fill_4\": 0.08, \"block_fill_8\": 0.02, "
                 "\"block_fill_16\": 0.01, \"col_span_max\": 99990}'");
    const cJSON *entries = cJSON_GetObjectItem(j, "entries");
    const cJSON *first = cJSON_GetArrayItem(entries, 0);
    cr_assert_eq(dt_json_num(first, "distance", -1), 0);
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(first, "parameters"), "strategy", ""),
                     "merge-path");
    cr_assert_leq(cJSON_GetArraySize(entries), 10);
    const cJSON *q = cJSON_GetObjectItem(j, "query");
    cr_assert_str_eq(dt_json_str(q, "op", ""), "spmv");
    cr_assert_eq(dt_json_num(cJSON_GetObjectItem(q, "features"), "row_cv", 0), 6.9);
    for (const cJSON *e = entries->child; e != NULL; e = e->next) {
        cr_assert_str_eq(dt_json_str(e, "kind", ""), "rule");
        cr_assert_str_eq(dt_json_str(e, "status", ""), "approved");
    }
    cJSON_Delete(j);

    j = run_json("retrieve --op spmm --dtype fp16 --cc 9.0 --n 64 --max 3 --json --features "
                 "'{\"block_fill_16\": 0.9}'");
    entries = cJSON_GetObjectItem(j, "entries");
    cr_assert_eq(cJSON_GetArraySize(entries), 3);
    cr_assert_eq(
        dt_json_num(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "query"), "features"), "n", 0), 64);
    cJSON_Delete(j);

    tu_proc p = run("retrieve --op sddmm --kind rule --n 64");
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.out, "features: n 64");
    HAS(p.out, "-sddmm");
    tu_proc_free(&p);
}

Test(kbcli, retrieve_from_a_matrix_should_compute_the_features)
{
    /* A 300 x 300 grid: rows of 3 to 5 entries, interior rows spanning
     * columns i - 300 .. i + 300; 448800 nonzeros, past the 200K where
     * SELL's rules start and ELL's end. */
    cJSON *j = run_json("retrieve --op spmv --kind rule --max 0 --json --matrix "
                        "gen:stencil5:rows=90000");
    const cJSON *f = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "query"), "features");
    cr_assert_eq(dt_json_num(f, "rows", 0), 90000);
    cr_assert_eq(dt_json_num(f, "nnz", 0), 5 * 90000 - 4 * 300);
    cr_assert_eq(dt_json_num(f, "row_max", 0), 5);
    cr_assert_eq(dt_json_num(f, "col_span_max", 0), 600);
    cr_assert_eq(dt_json_num(f, "diagonals", 0), 5);
    cr_assert_eq(dt_json_num(f, "empty_rows_frac", -1), 0);
    cr_assert_float_eq(dt_json_num(f, "bandwidth_frac", 0), 300.0 / 90000, 1e-12);
    cr_assert_float_eq(dt_json_num(f, "row_max_over_mean", 0), 5.0 / (448800.0 / 90000), 1e-12);
    cr_assert_null(cJSON_GetObjectItem(f, "n")); /* SpMV has no N */
    int n = 0;
    for (int i = 0; kb_feature_name(i) != NULL; i++)
        n += cJSON_GetObjectItem(f, kb_feature_name(i)) != NULL;
    cr_assert_eq(n, 19); /* every feature but n */
    const cJSON *entries = cJSON_GetObjectItem(j, "entries");
    int sell = 0, merge = 0, ell = 0;
    for (const cJSON *e = entries->child; e != NULL; e = e->next) {
        const char *s = dt_json_str(cJSON_GetObjectItem(e, "parameters"), "strategy", "");
        if (dt_json_num(e, "distance", -1) == 0) {
            sell |= dt_streq(s, "sell16-thread");
            merge |= dt_streq(s, "merge-path");
            ell |= dt_streq(s, "ell-baked");
        }
    }
    cr_assert(!ell, "ell-baked should not apply past 200K nonzeros");
    cr_assert(sell, "sell should apply to a 5-point stencil");
    cr_assert(!merge, "merge-path should not apply to a 5-point stencil");
    cJSON_Delete(j);

    /* Power-law rows in a small (L2-resident) matrix: a sub-warp per row first;
     * merge-path only pays past 2M nonzeros (measured on an H200). */
    j = run_json("retrieve --op spmv --kind rule --json --matrix gen:rmat:rows=20000,nnz=320000");
    const cJSON *first = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "entries"), 0);
    cr_assert_eq(dt_json_num(first, "distance", -1), 0);
    const cJSON *top = NULL;
    for (const cJSON *e = cJSON_GetObjectItem(j, "entries")->child; e != NULL; e = e->next)
        if (dt_json_num(e, "distance", -1) == 0 &&
            (top == NULL || dt_json_num(cJSON_GetObjectItem(e, "parameters"), "score", 0) >
                                dt_json_num(cJSON_GetObjectItem(top, "parameters"), "score", 0)))
            top = e;
    cr_assert_str_eq(dt_json_str(cJSON_GetObjectItem(top, "parameters"), "strategy", ""),
                     "csr-vector");
    cJSON_Delete(j);

    /* SpMM takes N = 32 unless told. */
    j = run_json("retrieve --op spmm --json --matrix gen:block:rows=20000,nnz=320000,b=4");
    f = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "query"), "features");
    cr_assert_eq(dt_json_num(f, "n", 0), 32);
    cr_assert_eq(dt_json_num(f, "block_fill_4", 0), 1);
    cJSON_Delete(j);
}

Test(kbcli, retrieve_errors_should_name_what_to_fix)
{
    expect_error("retrieve", 2, "--op is required");
    expect_error("retrieve --op spgemm", 2, "--op takes one of spmv, spmm, sddmm, got 'spgemm'");
    expect_error("retrieve --op spmv --dtype fp8", 2, "--dtype takes one of");
    expect_error("retrieve --op spmv --cc 9", 2, "--cc takes a compute capability such as 9.0");
    expect_error("retrieve --op spmv --features '{\"gini\": 1}'", 2,
                 "--features: unknown feature 'gini' (features: rows, cols");
    expect_error("retrieve --op spmv --features '{\"row_cv\": \"x\"}'", 2,
                 "'row_cv' needs a finite number");
    expect_error("retrieve --op spmv --features '[1]'", 2, "--features takes an object");
    expect_error("retrieve --op spmv --features '{'", 2, "--features:1:");
    expect_error("retrieve --op spmv --features '{}' --matrix gen:stencil5:rows=100", 2,
                 "give --features or --matrix, not both");
    expect_error("retrieve --op spmv --max -1", 2, "--max needs an integer from 0 to 100000");
    expect_error("retrieve --op spmv --matrix /nonexistent.mtx", 1, "/nonexistent.mtx");
}

Test(kbcli, broken_user_file_should_warn_and_not_stop_the_command)
{
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(kbt_user_dir(), &e), 0);
    free(tu_write(kbt_user_dir(), "mine.json", "{\"id\": \"mine\"}"));
    tu_proc p = run("list --kind hardware-fact");
    cr_assert_eq(p.status, 0, "%s", p.err);
    HAS(p.err, "ditto kb: warning: ");
    HAS(p.err, "mine.json: $.kind: expected one of rule, strategy, pitfall, error-explanation, "
               "hardware-fact, got nothing");
    HAS(p.out, "hw.hopper.shared-memory-carveout");
    tu_proc_free(&p);
}
