/* test_json.c -- every command's --json output is one JSON document or JSON Lines (one
 * JSON value a line) from its first line to its last, on success and on failure alike,
 * so that `ditto ... --json | jq -c .` never trips. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

/* 1 when out is a single JSON document, 2 when it is JSON Lines (two or
 * more lines, each a JSON value), 0 when it is neither; *why says where. */
static int json_kind(const char *out, char *why, size_t n)
{
    const char *end = NULL;
    cJSON *whole = cJSON_ParseWithOpts(out, &end, 1);
    if (whole != NULL) {
        cJSON_Delete(whole);
        return 1;
    }
    char *copy = dt_xstrdup(out);
    int lines = 0, ok = 1;
    char *save = NULL;
    for (char *l = strtok_r(copy, "\n", &save); l && ok; l = strtok_r(NULL, "\n", &save)) {
        lines++;
        cJSON *j = cJSON_ParseWithOpts(l, &end, 1);
        if (j == NULL) {
            snprintf(why, n, "line %d is not JSON: %.200s", lines, l);
            ok = 0;
        }
        cJSON_Delete(j);
    }
    free(copy);
    if (ok && lines < 2)
        snprintf(why, n, "neither one JSON document nor JSON Lines: %.200s", out);
    return ok && lines >= 2 ? 2 : 0;
}

/* Run `ditto ARGS` (ARGS already quoted) in dir's XDG folders and check its
 * stdout: valid JSON or JSON Lines when it exits 0 (and not empty), and
 * when it fails, either nothing or valid JSON. want_status -1: any. Returns
 * the kind. */
static int check_json(const char *dir, const char *args, int want_status)
{
    tu_proc p = tu_run("cd '%s' && XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' "
                       "XDG_CONFIG_HOME='%s/config' '%s' %s < /dev/null",
                       dir, dir, dir, dir, tu_ditto_bin(), args);
    if (want_status >= 0)
        cr_assert_eq(p.status, want_status, "ditto %s: exit %d\n%s", args, p.status, p.err);
    char why[512] = "";
    int kind = 0;
    if (p.out[0] != '\0' || p.status == 0) {
        kind = json_kind(p.out, why, sizeof why);
        cr_assert_neq(kind, 0, "ditto %s: %s", args, why);
    }
    tu_proc_free(&p);
    return kind;
}

Test(json, the_checker_should_tell_json_and_json_lines_from_mixed_text)
{
    char why[256];
    cr_assert_eq(json_kind("{\"a\": [1,\n 2]}\n", why, sizeof why), 1);
    cr_assert_eq(json_kind("{\"a\": 1}\n{\"b\": 2}\n", why, sizeof why), 2);
    /* what `ditto run --json` used to end with */
    cr_assert_eq(json_kind("{\"a\": 1}\n{\"b\": 2}\nsession: 1 (/tmp/x)\n", why, sizeof why), 0);
    cr_assert(strstr(why, "line 3"), "%s", why);
    cr_assert_eq(json_kind("", why, sizeof why), 0);
}

Test(json, every_command_should_print_only_json_under_json, .timeout = 240)
{
    char *dir = tu_tmpdir();
    char *spec =
        tu_write(dir, "spec.json",
                 "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000,seed=2\", "
                 "\"dtype\": \"fp32\", \"review\": \"auto\"}");
    /* the pipeline: JSON Lines, the session it recorded as the last line */
    tu_proc p = tu_run("cd '%s' && XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' "
                       "XDG_CONFIG_HOME='%s/config' '%s' run spec.json --json < /dev/null",
                       dir, dir, dir, dir, tu_ditto_bin());
    cr_assert_eq(p.status, 3, "exit %d: %s", p.status, p.err);
    char why[512] = "";
    cr_assert_eq(json_kind(p.out, why, sizeof why), 2, "ditto run --json: %s", why);
    const char *last = p.out + strlen(p.out) - 1;
    while (last > p.out && last[-1] != '\n')
        last--;
    cJSON *s = cJSON_Parse(last);
    cr_assert_str_eq(dt_json_str(s, "type", ""), "session", "%s", last);
    char *id = dt_xstrdup(dt_json_str(s, "session", ""));
    cr_assert(strlen(id) > 0);
    char *events = dt_xasprintf("%s/events.jsonl", dt_json_str(s, "path", "/nonexistent"));
    cr_assert(dt_file_exists(events), "%s", events);
    free(events);
    cJSON_Delete(s);
    tu_proc_free(&p);
    /* resume of a session that stopped for want of a GPU carries on (it was
     * no person's decision), stops there again, and prints JSON Lines */
    char *args = dt_xasprintf("resume '%s' --json", id);
    cr_assert_eq(check_json(dir, args, 3), 2, "resume --json: not JSON Lines");
    free(args);

    static const char *ok[] = {
        "profile gen:uniform:rows=100,nnz=1000 --json",
        "profile spec.json --json",
        "hw list --json",
        "hw show h200 --json",
        "hw match 'NVIDIA H200' 9.0 --json",
        "occupancy --gpu h200 --threads 256 --regs 32 --json",
        "occupancy --gpu h200 --threads 256 --regs 32 --json --whatif",
        "roofline --gpu h200 --json --point k1:2G:8G:1ms --point k2:1G:4G:0",
        "kb list --json",
        "kb retrieve --op spmv --json",
        "kb retrieve --op spmm --matrix gen:uniform:rows=1000,nnz=10000 --json",
        "sessions --json",
        "tune spec.json --dry-run --strategies 2 --variants 3 --json",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(ok); i++)
        check_json(dir, ok[i], 0);
    args = dt_xasprintf("sessions show '%s' --json", id);
    check_json(dir, args, 0);
    free(args);
    args = dt_xasprintf("sessions show '%s' --json --events", id);
    check_json(dir, args, 0);
    free(args);
    /* a verdict whatever it is (exit 3 without a GPU) */
    args = dt_xasprintf(
        "check '%s/kernels/spmv_csr_thread.cu' gen:uniform:rows=100,nnz=1000 --json", tu_src_dir());
    check_json(dir, args, -1);
    free(args);
    /* usage errors print nothing on stdout */
    check_json(dir, "profile --json --bogus", 2);
    free(id);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}
