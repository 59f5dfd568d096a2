/* test_spec.c -- spec files: schema check, loading by name, gpu: auto, calibration copies. */
#include "tests/hardware/hwtest.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(spec, .init = hwt_setup, .fini = hwt_teardown);

static const char *const shipped[] = {"h200",          "h100-sxm", "h100-pcie", "a100-40gb-sxm",
                                      "a100-80gb-sxm", "l40s",     "rtx4090",   "rtx3090",
                                      "v100",          "t4"};

Test(spec, every_shipped_file_should_pass_the_check)
{
    char *dir = dt_xasprintf("%s/hardware", tu_src_dir());
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    struct dirent *ent;
    int files = 0;
    while ((ent = readdir(d)) != NULL) {
        if (!dt_endswith(ent->d_name, ".json"))
            continue;
        char *path = dt_xasprintf("%s/%s", dir, ent->d_name);
        dt_buf report = DT_BUF_INIT;
        int n = hw_check_file(path, &report);
        cr_expect_eq(n, 0, "%s", dt_buf_str(&report));
        /* the file's name is its `name` */
        hw_spec *g = hw_load_file(path, NULL);
        cr_assert_not_null(g);
        char *expect = dt_xasprintf("%s.json", g->name);
        cr_expect_str_eq(ent->d_name, expect);
        free(expect);
        hw_spec_free(g);
        dt_buf_free(&report);
        free(path);
        files++;
    }
    closedir(d);
    free(dir);
    cr_assert_geq(files, (int)DT_ARRAY_LEN(shipped));
    for (size_t i = 0; i < DT_ARRAY_LEN(shipped); i++) {
        hw_spec *g = hwt_load(shipped[i]);
        cr_expect_str_eq(g->name, shipped[i]);
        cr_expect_eq(g->user_copy, 0);
        hw_spec_free(g);
    }
}

/* The CUDA C++ Programming Guide's "Technical Specifications per Compute
 * Capability" table and cuda_occupancy.h, written out independently of the
 * JSON files: every shipped file of that capability must agree. */
static const struct {
    int major, minor;
    int warps, blocks;
    int smem_sm, smem_optin, reserved, gran;
    int carve_first, carve_last, ncarve;
} cc_table[] = {
    {7, 0, 64, 32, 96 * 1024, 96 * 1024, 0, 256, 0, 96, 6},
    {7, 5, 32, 16, 64 * 1024, 64 * 1024, 0, 256, 32, 64, 2},
    {8, 0, 64, 32, 164 * 1024, 163 * 1024, 1024, 128, 0, 164, 8},
    {8, 6, 48, 16, 100 * 1024, 99 * 1024, 1024, 128, 0, 100, 6},
    {8, 9, 48, 24, 100 * 1024, 99 * 1024, 1024, 128, 0, 100, 6},
    {9, 0, 64, 32, 228 * 1024, 227 * 1024, 1024, 128, 0, 228, 10},
};

Test(spec, shipped_files_should_agree_with_the_compute_capability_table)
{
    hw_spec **v;
    int n;
    dt_err e = {0};
    cr_assert_eq(hw_list(&v, &n, NULL, &e), 0, "%s", e.msg);
    int seen[DT_ARRAY_LEN(cc_table)] = {0};
    for (int i = 0; i < n; i++) {
        const hw_spec *g = v[i];
        size_t k;
        for (k = 0; k < DT_ARRAY_LEN(cc_table); k++) {
            if (cc_table[k].major == g->cc_major && cc_table[k].minor == g->cc_minor)
                break;
        }
        cr_assert_lt(k, DT_ARRAY_LEN(cc_table), "%s: cc %d.%d not in the table", g->name,
                     g->cc_major, g->cc_minor);
        seen[k]++;
        cr_expect_eq(g->max_warps_per_sm, cc_table[k].warps, "%s", g->name);
        cr_expect_eq(g->max_threads_per_sm, cc_table[k].warps * 32, "%s", g->name);
        cr_expect_eq(g->max_blocks_per_sm, cc_table[k].blocks, "%s", g->name);
        cr_expect_eq(g->smem_per_sm, cc_table[k].smem_sm, "%s", g->name);
        cr_expect_eq(g->smem_per_block, 48 * 1024, "%s", g->name);
        cr_expect_eq(g->smem_per_block_optin, cc_table[k].smem_optin, "%s", g->name);
        cr_expect_eq(g->smem_reserved, cc_table[k].reserved, "%s", g->name);
        cr_expect_eq(g->smem_granularity, cc_table[k].gran, "%s", g->name);
        cr_expect_eq(g->ncarveouts, cc_table[k].ncarve, "%s", g->name);
        cr_expect_eq(g->carveout_kb[0], cc_table[k].carve_first, "%s", g->name);
        cr_expect_eq(g->carveout_kb[g->ncarveouts - 1], cc_table[k].carve_last, "%s", g->name);
        cr_expect_eq(g->regs_per_sm, 65536, "%s", g->name);
        cr_expect_eq(g->regs_per_block, 65536, "%s", g->name);
        cr_expect_eq(g->regs_per_thread, 255, "%s", g->name);
        cr_expect_eq(g->reg_alloc_unit, 256, "%s", g->name);
        cr_expect_eq(g->sub_partitions, 4, "%s", g->name);
        cr_expect_eq(g->warp_size, 32, "%s", g->name);
        cr_expect_eq(g->max_threads_per_block, 1024, "%s", g->name);
        cr_expect(g->peak_tflops[HW_FP32] > 0, "%s", g->name);
    }
    for (size_t k = 0; k < DT_ARRAY_LEN(cc_table); k++)
        cr_expect_gt(seen[k], 0, "no shipped file for cc %d.%d", cc_table[k].major,
                     cc_table[k].minor);
    hw_list_free(v, n);
}

Test(spec, h200_should_have_132_sms_cc_9_0_and_228_kb_per_sm)
{
    hw_spec *g = hwt_load("h200");
    cr_assert_eq(g->sm_count, 132);
    cr_assert_eq(g->cc_major, 9);
    cr_assert_eq(g->cc_minor, 0);
    cr_assert_eq(g->smem_per_sm, 228 * 1024);
    cr_assert_float_eq(g->mem_bandwidth_gbs, 4800, 1e-9);
    cr_assert_str_eq(g->full_name, "NVIDIA H200");
    hw_spec_free(g);
}

/* Write a modified copy of h200.json and check it. */
static int check_modified(cJSON *doc, dt_buf *report, char **path_out)
{
    /* the test's temporary data folder, removed at teardown */
    char *path = hwt_write_doc(hwt_data_home(), "broken.json", doc);
    int n = hw_check_file(path, report);
    *path_out = path;
    return n;
}

Test(spec, missing_key_should_be_reported_with_file_and_key)
{
    cJSON *doc = hwt_doc("h200");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "sm_count");
    cJSON_DeleteItemFromObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(doc, "shared_memory"),
                                            "per_block_optin_bytes");
    dt_buf report = DT_BUF_INIT;
    char *path;
    int n = check_modified(doc, &report, &path);
    cr_assert_eq(n, 2, "%s", dt_buf_str(&report));
    char *want =
        dt_xasprintf("%s: $.sm_count: expected an integer from 1 to 4096, got nothing", path);
    cr_assert(strstr(dt_buf_str(&report), want) != NULL, "%s", dt_buf_str(&report));
    free(want);
    want = dt_xasprintf("%s: $.shared_memory.per_block_optin_bytes: expected an integer from 1 to "
                        "16777216, got nothing",
                        path);
    cr_assert(strstr(dt_buf_str(&report), want) != NULL, "%s", dt_buf_str(&report));
    free(want);
    /* loading refuses the file and says why, naming file and key */
    dt_err e = {0};
    cr_assert_null(hw_load_file(path, &e));
    cr_assert(strstr(e.msg, "$.sm_count: expected an integer from 1 to 4096, got nothing") != NULL,
              "%s", e.msg);
    cr_assert(strstr(e.msg, path) != NULL, "%s", e.msg);
    cr_assert(strstr(e.msg, "(2 problems)") != NULL, "%s", e.msg);
    free(path);
    dt_buf_free(&report);
    cJSON_Delete(doc);
}

Test(spec, impossible_values_should_each_be_reported)
{
    cJSON *doc = hwt_doc("h200");
    cJSON *sm = cJSON_GetObjectItemCaseSensitive(doc, "shared_memory");
    cJSON *regs = cJSON_GetObjectItemCaseSensitive(doc, "registers");
    cJSON *lim = cJSON_GetObjectItemCaseSensitive(doc, "limits");
    dt_json_set_int(sm, "per_block_bytes", 300000);   /* > per SM */
    dt_json_set_int(doc, "sm_count", 0);              /* zero SMs */
    dt_json_set_str(doc, "compute_capability", "9");  /* not x.y */
    dt_json_set_int(regs, "per_block", 131072);       /* > per SM */
    dt_json_set_int(lim, "max_threads_per_sm", 2000); /* not warps x 32 */
    dt_json_set_num(cJSON_GetObjectItemCaseSensitive(doc, "measured"), "bandwidth_gbs", 9000);
    dt_buf report = DT_BUF_INIT;
    char *path;
    int n = check_modified(doc, &report, &path);
    const char *r = dt_buf_str(&report);
    static const char *const keys[] = {
        "$.shared_memory.per_block_bytes: expected at most shared_memory.per_sm_bytes (233472), "
        "got 300000",
        "$.sm_count: expected an integer from 1 to 4096, got 0",
        "$.compute_capability: expected a compute capability x.y of 7.0 or later, such as "
        "\"9.0\" (ditto has no occupancy rules before 7.0), got \"9\"",
        "$.registers.per_block: expected at most registers.per_sm (65536), got 131072",
        "$.limits.max_threads_per_sm: expected limits.max_warps_per_sm x limits.warp_size "
        "(2048), got 2000",
        "$.measured.bandwidth_gbs: expected at most 1.1 x memory.bandwidth_gbs (5280 GB/s), got "
        "9000",
        "$.shared_memory.per_block_optin_bytes: expected at least the default "
        "shared_memory.per_block_bytes (300000), got 232448",
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(keys); i++) {
        char *want = dt_xasprintf("%s: %s", path, keys[i]);
        cr_expect(strstr(r, want) != NULL, "wanted '%s' in:\n%s", want, r);
        free(want);
    }
    /* 7: the large per-block size also puts the opt-in below the default */
    cr_expect_eq(n, 7, "%s", r);
    free(path);
    dt_buf_free(&report);
    cJSON_Delete(doc);
}

Test(spec, fp32_peak_above_what_the_sms_allow_should_be_rejected)
{
    cJSON *doc = hwt_doc("rtx3090");
    dt_json_set_num(cJSON_GetObjectItemCaseSensitive(doc, "peak_tflops"), "fp32", 356);
    dt_buf report = DT_BUF_INIT;
    char *path;
    cr_assert_eq(check_modified(doc, &report, &path), 1, "%s", dt_buf_str(&report));
    cr_assert(strstr(dt_buf_str(&report),
                     "$.peak_tflops.fp32: expected at most 44.5 TFLOP/s (sm_count x 256 "
                     "FLOP/clock x boost_clock_mhz, with 25% to spare), got 356") != NULL,
              "%s", dt_buf_str(&report));
    free(path);
    dt_buf_free(&report);
    cJSON_Delete(doc);
}

Test(spec, wrong_types_unknown_keys_and_bad_carveouts_should_be_reported)
{
    cJSON *doc = hwt_doc("a100-40gb-sxm");
    dt_json_set_str(doc, "sm_count", "108");
    dt_json_set_int(doc, "sm_cout", 108);
    cJSON *sm = cJSON_GetObjectItemCaseSensitive(doc, "shared_memory");
    cJSON *co = cJSON_CreateIntArray((const int[]){0, 16, 8, 164}, 4);
    dt_json_set_take(sm, "carveout_kb", co);
    dt_json_set_str(cJSON_GetObjectItemCaseSensitive(doc, "registers"), "alloc_granularity",
                    "block");
    dt_json_set_int(cJSON_GetObjectItemCaseSensitive(doc, "limits"), "warp_size", 31);
    dt_buf report = DT_BUF_INIT;
    char *path;
    int n = check_modified(doc, &report, &path);
    const char *r = dt_buf_str(&report);
    cr_expect_eq(n, 5, "%s", r);
    cr_expect(strstr(r, "$.sm_count: expected an integer from 1 to 4096, got \"108\"") != NULL,
              "%s", r);
    cr_expect(strstr(r, "$.limits.warp_size: expected 32 (every CUDA GPU has 32), got 31") != NULL,
              "%s", r);
    cr_expect(strstr(r, "$.sm_cout: expected one of the keys name, full_name, ") != NULL, "%s", r);
    cr_expect(strstr(r, "$.shared_memory.carveout_kb[2]: expected more than the entry before "
                        "(16): sizes ascend strictly, got 8") != NULL,
              "%s", r);
    cr_expect(strstr(r, "$.registers.alloc_granularity: expected \"warp\" (cc 7.0 and later "
                        "allocate registers per warp), got \"block\"") != NULL,
              "%s", r);
    free(path);
    dt_buf_free(&report);
    cJSON_Delete(doc);
}

Test(spec, every_number_should_have_a_source)
{
    cJSON *doc = hwt_doc("t4");
    cJSON *srcs = cJSON_GetObjectItemCaseSensitive(doc, "sources");
    /* drop the source of the memory numbers, and name a key that is not there */
    int idx = -1, i = 0;
    cJSON *s;
    cJSON_ArrayForEach(s, srcs)
    {
        cJSON *k = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(s, "keys"), 0);
        if (k != NULL && strcmp(k->valuestring, "memory") == 0)
            idx = i;
        i++;
    }
    cr_assert_geq(idx, 0);
    cJSON_DeleteItemFromArray(srcs, idx);
    cJSON *extra = dt_json_obj();
    cJSON *keys = dt_json_arr();
    cJSON_AddItemToArray(keys, cJSON_CreateString("l2_byte"));
    dt_json_set_take(extra, "keys", keys);
    dt_json_set_str(extra, "source", "a typo");
    cJSON_AddItemToArray(srcs, extra);
    dt_buf report = DT_BUF_INIT;
    char *path;
    int n = check_modified(doc, &report, &path);
    const char *r = dt_buf_str(&report);
    /* type, size_gb, bus_width_bits, bandwidth_gbs unsourced + the typo */
    cr_expect_eq(n, 5, "%s", r);
    cr_expect(strstr(r, "$.sources: expected a source for memory.bandwidth_gbs, got none") != NULL,
              "%s", r);
    cr_expect(strstr(r, "$.sources[5].keys[0]: expected a key of this file, got \"l2_byte\"") !=
                  NULL,
              "%s", r);
    free(path);
    dt_buf_free(&report);
    cJSON_Delete(doc);
}

Test(spec, syntax_error_should_count_as_one_problem_with_line_and_column)
{
    char *dir = tu_tmpdir();
    char *path = tu_write(dir, "x.json", "{\n  \"name\": \"x\",\n  \"sm_count\": ,\n}\n");
    dt_buf report = DT_BUF_INIT;
    cr_assert_eq(hw_check_file(path, &report), 1);
    char *want = dt_xasprintf("%s:3:", path);
    cr_assert(strstr(dt_buf_str(&report), want) != NULL, "%s", dt_buf_str(&report));
    free(want);
    dt_buf_free(&report);
    free(path);
    tu_rmtree(dir);
    free(dir);
}

Test(spec, load_should_accept_aliases_in_any_case)
{
    hw_spec *g = hwt_load("H100");
    cr_assert_str_eq(g->name, "h100-sxm");
    hw_spec_free(g);
    g = hwt_load("A100-80GB");
    cr_assert_str_eq(g->name, "a100-80gb-sxm");
    hw_spec_free(g);
    g = hwt_load("T4");
    cr_assert_str_eq(g->name, "t4");
    hw_spec_free(g);
}

Test(spec, unknown_gpu_should_list_the_known_names)
{
    dt_err e = {0};
    cr_assert_null(hw_load("b300", &e));
    cr_assert(strstr(e.msg, "unknown GPU 'b300'") != NULL, "%s", e.msg);
    for (size_t i = 0; i < DT_ARRAY_LEN(shipped); i++)
        cr_expect(strstr(e.msg, shipped[i]) != NULL, "%s lacks %s", e.msg, shipped[i]);
}

Test(spec, match_should_prefer_the_device_name)
{
    static const struct {
        const char *dev;
        int ma, mi;
        const char *want;
    } cases[] = {
        {"NVIDIA H200", 9, 0, "h200"},
        {"NVIDIA H100 80GB HBM3", 9, 0, "h100-sxm"},
        {"NVIDIA H100 PCIe", 9, 0, "h100-pcie"},
        {"NVIDIA A100-SXM4-80GB", 8, 0, "a100-80gb-sxm"},
        {"NVIDIA GeForce RTX 4090", 8, 9, "rtx4090"},
        {"nvidia geforce rtx 3090", 8, 6, "rtx3090"},
        {"Tesla V100-SXM2-32GB", 7, 0, "v100"},
        {"Tesla T4", 7, 5, "t4"},
        {"NVIDIA L40S", 8, 9, "l40s"},
    };
    for (size_t i = 0; i < DT_ARRAY_LEN(cases); i++) {
        hw_match_kind how = HW_MATCH_NEAREST;
        char warn[512] = "x";
        dt_err e = {0};
        hw_spec *g =
            hw_match(cases[i].dev, cases[i].ma, cases[i].mi, 0, &how, warn, sizeof warn, &e);
        cr_assert_not_null(g, "%s", e.msg);
        cr_expect_str_eq(g->name, cases[i].want, "%s", cases[i].dev);
        cr_expect_eq(how, HW_MATCH_NAME, "%s", cases[i].dev);
        cr_expect_str_eq(warn, "", "%s", cases[i].dev);
        hw_spec_free(g);
    }
}

Test(spec, match_should_fall_back_to_the_same_cc_then_the_nearest_with_a_warning)
{
    hw_match_kind how;
    char warn[512];
    /* same cc: the closest SM count */
    hw_spec *g = hw_match("NVIDIA H100 NVL", 9, 0, 114, &how, warn, sizeof warn, NULL);
    cr_assert_not_null(g);
    cr_expect_str_eq(g->name, "h100-pcie");
    cr_expect_eq(how, HW_MATCH_CC);
    cr_expect(strstr(warn, "same compute capability") != NULL, "%s", warn);
    cr_expect(strstr(warn, "NVIDIA H100 NVL") != NULL, "%s", warn);
    hw_spec_free(g);
    /* a name that matches but reports another cc is not taken on its name */
    g = hw_match("NVIDIA H200", 8, 0, 0, &how, warn, sizeof warn, NULL);
    cr_assert_not_null(g);
    cr_expect_eq(g->cc_major, 8);
    cr_expect_eq(g->cc_minor, 0);
    cr_expect_eq(how, HW_MATCH_CC);
    hw_spec_free(g);
    /* unknown cc: the nearest one, 8.7 -> 8.6 (distance 1) before 8.9 */
    g = hw_match("Orin", 8, 7, 0, &how, warn, sizeof warn, NULL);
    cr_assert_not_null(g);
    cr_expect_str_eq(g->name, "rtx3090");
    cr_expect_eq(how, HW_MATCH_NEAREST);
    cr_expect(strstr(warn, "nearest") != NULL, "%s", warn);
    hw_spec_free(g);
    /* newer than every file: the newest, 9.0 */
    g = hw_match("NVIDIA B200", 10, 0, 148, &how, warn, sizeof warn, NULL);
    cr_assert_not_null(g);
    cr_expect_eq(g->cc_major, 9);
    cr_expect_eq(how, HW_MATCH_NEAREST);
    cr_expect(strstr(warn, "cc 10.0") != NULL, "%s", warn);
    hw_spec_free(g);
}

Test(spec, calibrated_user_copy_should_take_precedence)
{
    hw_spec *g = hwt_load("h200");
    double tf[HW_NDTYPES] = {0};
    tf[HW_FP32] = 55.5;
    dt_err e = {0};
    cr_assert_eq(hw_set_measured(g, 4100, tf, "stream triad + fma loop", &e), 0, "%s", e.msg);
    char *path = NULL;
    cr_assert_eq(hw_save_user_copy(g, &path, &e), 0, "%s", e.msg);
    char *want = dt_xasprintf("%s/ditto/hardware/h200.json", hwt_data_home());
    cr_assert_str_eq(path, want);
    cr_assert_eq(hw_check_file(path, NULL), 0);
    free(want);
    free(path);
    hw_spec_free(g);

    g = hwt_load("h200");
    cr_assert_eq(g->user_copy, 1);
    cr_assert_float_eq(g->measured_bandwidth_gbs, 4100, 1e-9);
    cr_assert_float_eq(g->measured_tflops[HW_FP32], 55.5, 1e-9);
    cr_assert(g->measured_date[0] != '\0');
    int m = 0;
    cr_assert_float_eq(hw_bandwidth(g, 1, &m), 4.1e12, 1);
    cr_assert_eq(m, 1);
    cr_assert_float_eq(hw_bandwidth(g, 0, &m), 4.8e12, 1);
    cr_assert_eq(m, 0);
    /* fp64 was not measured: the datasheet value stays in use */
    cr_assert_float_eq(hw_peak_flops(g, HW_FP64, 1, &m), 34e12, 1);
    cr_assert_eq(m, 0);
    hw_spec_free(g);

    /* listed once, as the user's copy */
    hw_spec **v;
    int n, h200s = 0;
    cr_assert_eq(hw_list(&v, &n, NULL, NULL), 0);
    for (int i = 0; i < n; i++) {
        if (strcmp(v[i]->name, "h200") == 0) {
            h200s++;
            cr_expect_eq(v[i]->user_copy, 1);
        }
    }
    cr_expect_eq(h200s, 1);
    hw_list_free(v, n);
}

Test(spec, impossible_measurement_should_be_refused)
{
    hw_spec *g = hwt_load("h200");
    dt_err e = {0};
    cr_assert_eq(hw_set_measured(g, 9000, NULL, NULL, &e), -1);
    cr_assert(strstr(e.msg, "above the datasheet") != NULL, "%s", e.msg);
    cr_assert_float_eq(g->measured_bandwidth_gbs, 0, 0);
    cr_assert_eq(hw_set_measured(g, NAN, NULL, NULL, &e), -1);
    hw_spec_free(g);
}

Test(spec, broken_user_copy_should_report_its_own_problems)
{
    cJSON *doc = hwt_doc("h200");
    dt_json_set_int(doc, "sm_count", -5);
    char *dir = dt_xasprintf("%s/ditto/hardware", hwt_data_home());
    dt_err e = {0};
    cr_assert_eq(dt_mkdir_p(dir, &e), 0);
    char *path = hwt_write_doc(dir, "h200.json", doc);
    cr_assert_null(hw_load("h200", &e));
    cr_assert(strstr(e.msg, path) != NULL && strstr(e.msg, "sm_count") != NULL, "%s", e.msg);
    /* the list skips it, says why, and keeps the shipped h200 */
    hw_spec **v;
    int n;
    dt_buf problems = DT_BUF_INIT;
    cr_assert_eq(hw_list(&v, &n, &problems, &e), 0);
    cr_assert(strstr(dt_buf_str(&problems),
                     "$.sm_count: expected an integer from 1 to 4096, got -5") != NULL,
              "%s", dt_buf_str(&problems));
    int found = 0;
    for (int i = 0; i < n; i++)
        found |= strcmp(v[i]->name, "h200") == 0 && !v[i]->user_copy;
    cr_assert(found);
    hw_list_free(v, n);
    dt_buf_free(&problems);
    free(path);
    free(dir);
    cJSON_Delete(doc);
}

Test(spec, dtype_names_should_round_trip)
{
    for (int i = 0; i < HW_NDTYPES; i++) {
        hw_dtype t;
        cr_assert_eq(hw_dtype_parse(hw_dtype_name((hw_dtype)i), &t), 0);
        cr_assert_eq(t, (hw_dtype)i);
    }
    hw_dtype t;
    cr_assert_eq(hw_dtype_parse("FP16", &t), 0);
    cr_assert_eq(t, HW_FP16);
    cr_assert_eq(hw_dtype_parse("fp4", &t), -1);
}
