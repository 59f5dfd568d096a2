/* test_names.c -- names that do not exist: an unknown or misspelt GPU is refused by every
 * command with the list of known ones (never replaced by another), `hw match` approximates
 * another architecture only when asked and then says which limits it assumed, and "not
 * found" is one exit status (66) from every command. */
#include "tests/common/testutil.h"

#include <stdlib.h>
#include <string.h>

#define NOT_FOUND 66
#define KNOWN     "known: a100-40gb-sxm"

static tu_proc ditto_in(const char *dir, const char *args)
{
    return tu_run("cd '%s' && XDG_DATA_HOME='%s' XDG_CACHE_HOME='%s/cache' "
                  "XDG_CONFIG_HOME='%s/config' '%s' %s < /dev/null",
                  dir, dir, dir, dir, tu_ditto_bin(), args);
}

Test(names, a_spec_with_an_unknown_gpu_should_be_refused_by_every_command_with_the_known_ones,
     .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *spec = tu_write(dir, "spec.json",
                          "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=3000,nnz=30000\", "
                          "\"gpu\": \"h100sxm\", \"review\": \"auto\"}");
    static const struct {
        const char *args;
        int status;
    } cmds[] = {
        {"run spec.json --no-session", 2},
        {"run spec.json --json", 2},
        {"tui spec.json", 2},
        {"tune spec.json", 2},
        {"tune spec.json --dry-run", 2},
        {"profile spec.json", 1},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cmds); i++) {
        tu_proc p = ditto_in(dir, cmds[i].args);
        cr_assert_eq(p.status, cmds[i].status, "ditto %s: exit %d\n%s%s", cmds[i].args, p.status,
                     p.out, p.err);
        cr_assert(strstr(p.err, "spec.json: $.gpu: unknown GPU 'h100sxm'") &&
                      strstr(p.err, KNOWN) && strstr(p.err, "h100-sxm"),
                  "ditto %s: %s", cmds[i].args, p.err);
        cr_assert_eq(p.out[0], '\0', "ditto %s ran: %s", cmds[i].args, p.out);
        tu_proc_free(&p);
    }
    /* the right name runs */
    char *ok = tu_write(
        dir, "ok.json",
        "{\"op\": \"spmv\", \"matrix\": \"gen:uniform:rows=300,nnz=3000\", \"gpu\": \"h100-sxm\"}");
    free(ok);
    tu_proc p = ditto_in(dir, "tune ok.json --dry-run --strategies 1 --variants 1");
    cr_assert_eq(p.status, 0, "%s", p.err);
    tu_proc_free(&p);
    free(spec);
    tu_rmtree(dir);
    free(dir);
}

Test(names, an_unknown_gpu_flag_should_exit_66_with_the_known_ones)
{
    char *dir = tu_tmpdir();
    static const char *cmds[] = {
        "occupancy --gpu h100sxm --threads 256 --regs 32",
        "roofline --gpu h100sxm",
        "hw show h100sxm",
        "hw show h100sxm --json",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cmds); i++) {
        tu_proc p = ditto_in(dir, cmds[i]);
        cr_assert_eq(p.status, NOT_FOUND, "ditto %s: exit %d: %s", cmds[i], p.status, p.err);
        cr_assert(strstr(p.err, "unknown GPU 'h100sxm'") && strstr(p.err, KNOWN), "ditto %s: %s",
                  cmds[i], p.err);
        cr_assert_eq(p.out[0], '\0', "ditto %s: %s", cmds[i], p.out);
        tu_proc_free(&p);
    }
    tu_rmtree(dir);
    free(dir);
}

Test(names, hw_match_should_refuse_an_unknown_architecture_unless_asked_to_approximate)
{
    char *dir = tu_tmpdir();
    tu_proc p = ditto_in(dir, "hw match 'NVIDIA B300' 10.3");
    cr_assert_eq(p.status, NOT_FOUND, "exit %d: %s%s", p.status, p.out, p.err);
    cr_assert(strstr(p.err, "no known GPU has that compute capability") &&
                  strstr(p.err, "--approximate") && strstr(p.err, KNOWN),
              "%s", p.err);
    cr_assert_eq(p.out[0], '\0', "%s", p.out);
    tu_proc_free(&p);

    p = ditto_in(dir, "hw match 'NVIDIA B300' 10.3 --approximate");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "matched by nearest"), "%s", p.out);
    cr_assert(strstr(p.out, "assumed limits") && strstr(p.out, "registers per SM") &&
                  strstr(p.out, "shared memory per SM") && strstr(p.out, "threads per block"),
              "%s", p.out);
    tu_proc_free(&p);

    p = ditto_in(dir, "hw match 'NVIDIA B300' 10.3 --approximate --json");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "%s", p.out);
    cr_assert_str_eq(dt_json_str(j, "matched_by", ""), "nearest");
    cr_assert(strstr(dt_json_str(j, "assumed_limits", ""), "cc "), "%s", p.out);
    cJSON_Delete(j);
    tu_proc_free(&p);

    /* a known architecture needs no flag, and assumes nothing */
    p = ditto_in(dir, "hw match 'NVIDIA H200' 9.0");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "h200") && !strstr(p.out, "assumed"), "%s", p.out);
    tu_proc_free(&p);
    tu_rmtree(dir);
    free(dir);
}

Test(names, not_found_should_exit_66_from_every_command, .timeout = 120)
{
    char *dir = tu_tmpdir();
    char *kernel = dt_xasprintf("'%s/kernels/spmv_csr_thread.cu'", tu_src_dir());
    char *cmds[] = {
        dt_xstrdup("profile /nonexistent/m.mtx"),
        dt_xstrdup("profile nope.mtx.gz --json"),
        dt_xstrdup("profile /nonexistent/spec.json"),
        dt_xstrdup("profile rep:/nonexistent/m.mtx:k=2"),
        dt_xstrdup("run /nonexistent/spec.json"),
        dt_xstrdup("tui /nonexistent/spec.json"),
        dt_xstrdup("tune /nonexistent/spec.json --dry-run"),
        dt_xstrdup("resume 20200101-000000-none"),
        dt_xstrdup("replay 20200101-000000-none"),
        dt_xstrdup("sessions show 20200101-000000-none"),
        dt_xstrdup("export 20200101-000000-none --out out"),
        dt_xstrdup("kb show no.such.entry"),
        dt_xstrdup("check /nonexistent/k.cu gen:uniform:rows=100,nnz=1000"),
        dt_xasprintf("check %s /nonexistent/m.mtx", kernel),
        dt_xstrdup("baseline /nonexistent/m.mtx"),
        dt_xstrdup("bench /nonexistent/m.mtx"),
        dt_xstrdup("hw show nope"),
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cmds); i++) {
        tu_proc p = ditto_in(dir, cmds[i]);
        cr_expect_eq(p.status, NOT_FOUND, "ditto %s: exit %d: %s", cmds[i], p.status, p.err);
        cr_expect(strstr(p.err, "no such file") || strstr(p.err, "no session") ||
                      strstr(p.err, "no entry") || strstr(p.err, "unknown GPU"),
                  "ditto %s: %s", cmds[i], p.err);
        tu_proc_free(&p);
        free(cmds[i]);
    }
    free(kernel);
    tu_rmtree(dir);
    free(dir);
}
