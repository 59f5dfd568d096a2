/* test_cli.c -- `ditto hw`, `ditto occupancy` and `ditto roofline` run as a user would. */
#include "tests/hardware/hwtest.h"

#include <stdlib.h>
#include <string.h>

TestSuite(cli, .init = hwt_setup, .fini = hwt_teardown);

static tu_proc run(const char *args)
{
    return tu_run("'%s' %s", tu_ditto_bin(), args);
}

static cJSON *run_json(const char *args)
{
    tu_proc p = run(args);
    cr_assert_eq(p.status, 0, "ditto %s: exit %d\n%s", args, p.status, p.err);
    cJSON *j = cJSON_Parse(p.out);
    cr_assert_not_null(j, "ditto %s: not JSON:\n%s", args, p.out);
    tu_proc_free(&p);
    return j;
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

Test(cli, occupancy_256_threads_32_regs_should_be_8_blocks_64_warps_100_percent)
{
    cJSON *j = run_json("occupancy --gpu h200 --threads 256 --regs 32 --smem 0 --json");
    cr_assert_eq(dt_json_num(j, "blocks_per_sm", -1), 8);
    cr_assert_eq(dt_json_num(j, "warps_per_sm", -1), 64);
    cr_assert_float_eq(dt_json_num(j, "occupancy_pct", -1), 100, 1e-9);
    cr_assert_str_eq(dt_json_str(j, "compute_capability", ""), "9.0");
    cJSON_Delete(j);
}

Test(cli, occupancy_64_regs_should_be_4_blocks_50_percent_limited_by_registers)
{
    cJSON *j = run_json("occupancy --gpu h200 --threads 256 --regs 64 --smem 0 --json");
    cr_assert_eq(dt_json_num(j, "blocks_per_sm", -1), 4);
    cr_assert_eq(dt_json_num(j, "warps_per_sm", -1), 32);
    cr_assert_float_eq(dt_json_num(j, "occupancy_pct", -1), 50, 1e-9);
    cr_assert_str_eq(dt_json_str(j, "limiter", ""), "registers");
    cJSON_Delete(j);
}

Test(cli, occupancy_100000_bytes_should_be_2_blocks_limited_by_smem_and_need_the_optin)
{
    cJSON *j = run_json("occupancy --gpu h200 --threads 512 --regs 32 --smem 100000 --json");
    cr_assert_eq(dt_json_num(j, "blocks_per_sm", -1), 2);
    cr_assert_float_eq(dt_json_num(j, "occupancy_pct", -1), 50, 1e-9);
    cr_assert_str_eq(dt_json_str(j, "limiter", ""), "shared memory");
    cr_assert_eq(dt_json_bool(j, "needs_optin", 0), 1);
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(j, "notes");
    int said = 0;
    const cJSON *n;
    cJSON_ArrayForEach(n, notes) said |= strstr(n->valuestring, "must opt in") != NULL;
    cr_assert(said);
    cJSON_Delete(j);
    /* and the human output says it too */
    tu_proc p = run("occupancy --gpu h200 --threads 512 --regs 32 --smem 100000");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "active blocks per SM   2") != NULL, "%s", p.out);
    cr_assert(strstr(p.out, "limiter                shared memory") != NULL, "%s", p.out);
    cr_assert(strstr(p.out, "must opt in") != NULL, "%s", p.out);
    tu_proc_free(&p);
}

Test(cli, occupancy_whatif_should_give_the_three_curves)
{
    cJSON *j =
        run_json("occupancy --gpu a100 --threads 128 --regs 40 --dyn-smem 8Ki --whatif --json");
    const cJSON *w = cJSON_GetObjectItemCaseSensitive(j, "whatif");
    cr_assert_not_null(w);
    const cJSON *regs = cJSON_GetObjectItemCaseSensitive(w, "registers");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(regs, "x")), 256);
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(regs, "warps_per_sm")), 256);
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(w, "threads");
    cr_assert_eq(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(th, "x")), 32);
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(w, "shared_memory");
    cr_assert_gt(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sm, "x")), 300);
    /* the marked point is this kernel: 8 KiB of dynamic shared memory */
    int cur = (int)dt_json_num(sm, "current", -1);
    cr_assert_eq(cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sm, "x"), cur)->valueint,
                 8192);
    cJSON_Delete(j);
    tu_proc p = run("occupancy --gpu a100 --threads 128 --regs 40 --whatif");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "registers per thread") != NULL, "%s", p.out);
    cr_assert(strstr(p.out, "<-") != NULL, "%s", p.out);
    tu_proc_free(&p);
}

Test(cli, occupancy_errors_should_name_the_flag)
{
    tu_proc p = run("occupancy --gpu nope --threads 256 --regs 32");
    cr_assert_eq(p.status, 66); /* not found, as from every command */
    cr_assert(strstr(p.err, "--gpu") != NULL && strstr(p.err, "unknown GPU 'nope'") != NULL, "%s",
              p.err);
    cr_assert(strstr(p.err, "h200") != NULL && strstr(p.err, "rtx3090") != NULL, "%s", p.err);
    cr_assert_eq(count_char(p.err, '\n'), 1, "%s", p.err);
    tu_proc_free(&p);
    p = run("occupancy --gpu h200 --regs 32");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--threads") != NULL, "%s", p.err);
    tu_proc_free(&p);
    p = run("occupancy --gpu h200 --threads lots --regs 32");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--threads") != NULL && strstr(p.err, "lots") != NULL, "%s", p.err);
    tu_proc_free(&p);
    p = run("occupancy --gpu h200 --threads 256 --regs 32 --carveout 120");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--carveout") != NULL, "%s", p.err);
    tu_proc_free(&p);
    p = run("occupancy --gpu h200 --threads 256 --regs");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--regs needs a value") != NULL, "%s", p.err);
    tu_proc_free(&p);
}

Test(cli, hw_show_h200_json_should_have_132_sms_cc_9_0_and_228_kb)
{
    cJSON *j = run_json("hw show h200 --json");
    cr_assert_eq(dt_json_num(j, "sm_count", -1), 132);
    cr_assert_str_eq(dt_json_str(j, "compute_capability", ""), "9.0");
    const cJSON *sm = cJSON_GetObjectItemCaseSensitive(j, "shared_memory");
    cr_assert_eq(dt_json_num(sm, "per_sm_bytes", -1), 228 * 1024);
    cr_assert_not_null(cJSON_GetObjectItemCaseSensitive(j, "sources"));
    cJSON_Delete(j);
    tu_proc p = run("hw show h200");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "228 KB (233472 B) per SM") != NULL, "%s", p.out);
    cr_assert(strstr(p.out, "compute capability 9.0") != NULL, "%s", p.out);
    tu_proc_free(&p);
}

Test(cli, hw_list_should_list_every_shipped_gpu)
{
    cJSON *j = run_json("hw list --json");
    cr_assert_geq(cJSON_GetArraySize(j), 10);
    static const char *const names[] = {"h200",          "h100-sxm", "h100-pcie", "a100-40gb-sxm",
                                        "a100-80gb-sxm", "l40s",     "rtx4090",   "rtx3090",
                                        "v100",          "t4"};
    for (size_t k = 0; k < DT_ARRAY_LEN(names); k++) {
        int found = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, j) found |= strcmp(dt_json_str(it, "name", ""), names[k]) == 0;
        cr_expect(found, "%s not listed", names[k]);
    }
    cJSON_Delete(j);
    tu_proc p = run("hw list");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "NVIDIA H200") != NULL);
    tu_proc_free(&p);
}

Test(cli, hw_check_should_print_every_problem_with_file_and_key)
{
    cJSON *doc = hwt_doc("l40s");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "l2_bytes");
    dt_json_set_int(doc, "sm_count", 0);
    char *path = hwt_write_doc(hwt_data_home(), "l40s-broken.json", doc);
    char *args = dt_xasprintf("hw check '%s' '%s/hardware/t4.json'", path, tu_src_dir());
    tu_proc p = run(args);
    cr_assert_eq(p.status, 1, "%s", p.err);
    char *want = dt_xasprintf(
        "%s: $.l2_bytes: expected an integer from 1 to 1099511627776, got nothing", path);
    cr_assert(strstr(p.out, want) != NULL, "%s", p.out);
    free(want);
    want = dt_xasprintf("%s: $.sm_count: expected an integer from 1 to 4096, got 0", path);
    cr_assert(strstr(p.out, want) != NULL, "%s", p.out);
    free(want);
    cr_assert(strstr(p.out, "t4.json: ok") != NULL, "%s", p.out);
    tu_proc_free(&p);
    free(args);
    free(path);
    cJSON_Delete(doc);
}

Test(cli, hw_match_should_warn_when_it_guesses)
{
    cJSON *j = run_json("hw match 'NVIDIA H200' 9.0 --json");
    cr_assert_str_eq(dt_json_str(j, "name", ""), "h200");
    cr_assert_str_eq(dt_json_str(j, "matched_by", ""), "name");
    cJSON_Delete(j);
    tu_proc p = run("hw match 'NVIDIA B200' 10.0 --sms 148 --approximate");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "matched by nearest") != NULL, "%s", p.out);
    cr_assert(strstr(p.err, "warning") != NULL && strstr(p.err, "nearest") != NULL, "%s", p.err);
    tu_proc_free(&p);
}

Test(cli, roofline_json_and_svg_should_place_the_points)
{
    char *svg = dt_xasprintf("%s/r.svg", hwt_data_home());
    char *args = dt_xasprintf("roofline --gpu h200 --point spmv:2G:12G:3ms "
                              "--point gemm:2T:3G:0.05:4G --svg '%s' --json",
                              svg);
    cJSON *j = run_json(args);
    cr_assert_float_eq(dt_json_num(j, "ridge_ai", 0), 67.0 / 4.8, 1e-9);
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(j, "points");
    cr_assert_eq(cJSON_GetArraySize(pts), 2);
    const cJSON *p0 = cJSON_GetArrayItem(pts, 0);
    cr_assert_str_eq(dt_json_str(p0, "bound", ""), "memory");
    cr_assert_float_eq(dt_json_num(p0, "flops_s", 0), 2e9 / 3e-3, 1);
    cr_assert_float_eq(dt_json_num(cJSON_GetArrayItem(pts, 1), "ai_achieved", 0), 500, 1e-9);
    cr_assert_str_eq(dt_json_str(j, "svg", ""), svg);
    cJSON_Delete(j);
    char *text = dt_read_file(svg, NULL, NULL);
    cr_assert_not_null(text);
    cr_assert(dt_startswith(text, "<?xml"));
    cr_assert(strstr(text, "<polyline class=\"ceiling") != NULL);
    cr_assert(dt_endswith(text, "</svg>\n"));
    free(text);
    free(args);
    free(svg);
}

Test(cli, roofline_ascii_should_be_plain_ascii)
{
    tu_proc p = run("roofline --gpu rtx4090 --ascii --width 72 --height 18 --point k:1G:4G:5ms");
    cr_assert_eq(p.status, 0, "%s", p.err);
    for (const unsigned char *c = (const unsigned char *)p.out; *c; c++)
        cr_assert_lt(*c, 0x80, "non-ASCII byte in:\n%s", p.out);
    cr_assert(strstr(p.out, "memory-bound") != NULL, "%s", p.out);
    tu_proc_free(&p);
    p = run("roofline --gpu rtx4090 --width 72 --height 18");
    cr_assert_eq(p.status, 0, "%s", p.err);
    cr_assert(strstr(p.out, "\xe2\x94\x94") != NULL, "%s", p.out); /* └ */
    tu_proc_free(&p);
}

Test(cli, roofline_errors_should_name_the_flag)
{
    tu_proc p = run("roofline --gpu h200 --point spmv:2G:12G");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--point") != NULL && strstr(p.err, "LABEL:FLOPS") != NULL, "%s",
              p.err);
    tu_proc_free(&p);
    p = run("roofline --gpu v100 --dtype tf32");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "no tf32 units") != NULL, "%s", p.err);
    tu_proc_free(&p);
    p = run("roofline --gpu h200 --dtype fp4");
    cr_assert_eq(p.status, 2);
    cr_assert(strstr(p.err, "--dtype") != NULL, "%s", p.err);
    tu_proc_free(&p);
}

Test(cli, help_should_list_the_new_commands)
{
    tu_proc p = run("--help");
    cr_assert_eq(p.status, 0);
    cr_assert(strstr(p.out, "occupancy") != NULL && strstr(p.out, "roofline") != NULL &&
                  strstr(p.out, "  hw ") != NULL,
              "%s", p.out);
    tu_proc_free(&p);
    p = run("occupancy --help");
    cr_assert_eq(p.status, 0);
    cr_assert(strstr(p.out, "--carveout") != NULL);
    tu_proc_free(&p);
}
