/* hw.c -- `ditto hw`: list, show, check and match the GPU spec files. */
#include "cli/cli.h"
#include "hardware/hardware.h"

#include <stdlib.h>
#include <string.h>

const char cli_hw_usage[] =
    "usage: ditto hw list [--json]\n"
    "       ditto hw show NAME [--json]\n"
    "       ditto hw check FILE...\n"
    "       ditto hw match DEVICE-NAME CC [--sms N] [--approximate] [--json]\n"
    "\n"
    "The GPU spec files: one JSON file per part in the shipped hardware/ folder, and\n"
    "calibrated copies in $XDG_DATA_HOME/ditto/hardware/, which take precedence.\n"
    "\n"
    "  list    every known GPU: compute capability, SMs, bandwidth, shared memory\n"
    "  show    one GPU's limits, peaks, measured values and sources (--json: the file)\n"
    "  check   run the schema check on files; prints every problem as\n"
    "          FILE: $.KEY: expected ..., got ...\n"
    "  match   which file `gpu: auto` picks for a device name and compute capability;\n"
    "          a compute capability no file has is refused (exit 66) unless\n"
    "          --approximate, which takes the nearest part and prints the limits assumed\n"
    "\n"
    "An unknown NAME exits 66 with the list of known ones.\n";

static void print_json(cJSON *j)
{
    char *s = dt_json_print(j, 1);
    puts(s);
    free(s);
    cJSON_Delete(j);
}

static void print_problems(const char *text)
{
    /* each problem on its own line, prefixed so that it reads as a warning */
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        fprintf(stderr, "ditto hw: skipped: %.*s\n", len, p);
        p += len + (nl ? 1 : 0);
    }
}

static int hw_list_cmd(int argc, char **argv)
{
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else
            return cli_usage_error("hw", "list: unexpected argument '%s'", argv[i]);
    }
    hw_spec **v;
    int n;
    dt_buf problems = DT_BUF_INIT;
    dt_err e = {0};
    if (hw_list(&v, &n, &problems, &e) != 0) {
        fprintf(stderr, "ditto hw: %s\n", e.msg);
        dt_buf_free(&problems);
        return CLI_FAIL;
    }
    if (json) {
        cJSON *a = dt_json_arr();
        for (int i = 0; i < n; i++) {
            const hw_spec *g = v[i];
            cJSON *o = dt_json_obj();
            char cc[16];
            snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
            dt_json_set_str(o, "name", g->name);
            dt_json_set_str(o, "full_name", g->full_name);
            dt_json_set_str(o, "compute_capability", cc);
            dt_json_set_int(o, "sm_count", g->sm_count);
            dt_json_set_num(o, "bandwidth_gbs", g->mem_bandwidth_gbs);
            dt_json_set_int(o, "smem_per_sm_bytes", g->smem_per_sm);
            dt_json_set_num(o, "fp32_tflops", g->peak_tflops[HW_FP32]);
            dt_json_set_bool(o, "calibrated", g->measured_bandwidth_gbs > 0);
            dt_json_set_bool(o, "user_copy", g->user_copy);
            dt_json_set_str(o, "path", g->path);
            cJSON_AddItemToArray(a, o);
        }
        print_json(a);
    } else {
        printf("%-14s %-24s %-4s %5s %11s %8s %11s  %s\n", "name", "full name", "cc", "SMs",
               "bandwidth", "smem/SM", "fp32", "file");
        for (int i = 0; i < n; i++) {
            const hw_spec *g = v[i];
            char cc[16], bw[32], fp[32];
            snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
            snprintf(bw, sizeof bw, "%.0f GB/s", g->mem_bandwidth_gbs);
            snprintf(fp, sizeof fp, "%.1f TF", g->peak_tflops[HW_FP32]);
            printf("%-14s %-24s %-4s %5d %11s %5d KB %11s  %s%s\n", g->name, g->full_name, cc,
                   g->sm_count, bw, g->smem_per_sm / 1024, fp,
                   g->user_copy ? "user copy" : "shipped",
                   g->measured_bandwidth_gbs > 0 ? ", calibrated" : "");
        }
    }
    int rc = CLI_OK;
    if (problems.len > 0) {
        print_problems(dt_buf_str(&problems));
        rc = CLI_FAIL;
    }
    dt_buf_free(&problems);
    hw_list_free(v, n);
    return rc;
}

static void print_peaks(const double *t)
{
    for (int i = 0; i < HW_NDTYPES; i++) {
        if (t[i] > 0)
            printf("  %s %g", hw_dtype_name((hw_dtype)i), t[i]);
        else
            printf("  %s -", hw_dtype_name((hw_dtype)i));
    }
    printf("\n");
}

static void show_human(const hw_spec *g)
{
    printf("%s (%s) -- %s, compute capability %d.%d\n", g->full_name, g->name, g->arch, g->cc_major,
           g->cc_minor);
    printf("  file           %s (%s)\n", g->path, g->user_copy ? "user copy" : "shipped");
    printf("  SMs            %d at %.0f MHz boost\n", g->sm_count, g->boost_clock_mhz);
    printf("  memory         %g GB %s, %.0f GB/s (datasheet)", g->mem_size_gb, g->mem_type,
           g->mem_bandwidth_gbs);
    if (g->measured_bandwidth_gbs > 0)
        printf(", %.0f GB/s measured", g->measured_bandwidth_gbs);
    printf("\n  L2 cache       %.1f MB\n", (double)g->l2_bytes / (1024.0 * 1024.0));
    printf("  shared memory  %d KB (%d B) per SM; per block %d KB, %d KB (%d B) with the opt-in;\n"
           "                 %d B reserved per block; allocated in %d B units; carveouts (KB):",
           g->smem_per_sm / 1024, g->smem_per_sm, g->smem_per_block / 1024,
           g->smem_per_block_optin / 1024, g->smem_per_block_optin, g->smem_reserved,
           g->smem_granularity);
    for (int i = 0; i < g->ncarveouts; i++)
        printf("%s%d", i ? ", " : " ", g->carveout_kb[i]);
    printf("\n  registers      %d per SM, %d per block, %d per thread; allocated per warp in units "
           "of %d;\n                 %d sub-partitions of %d\n",
           g->regs_per_sm, g->regs_per_block, g->regs_per_thread, g->reg_alloc_unit,
           g->sub_partitions, g->regs_per_sm / g->sub_partitions);
    printf("  limits         %d warps (%d threads) per SM, %d blocks per SM, %d threads per block, "
           "warp size %d\n",
           g->max_warps_per_sm, g->max_threads_per_sm, g->max_blocks_per_sm,
           g->max_threads_per_block, g->warp_size);
    printf("  peak TFLOP/s  ");
    print_peaks(g->peak_tflops);
    printf("                 (fp64, fp32: CUDA cores; the rest: tensor cores, dense; int8 in "
           "TOP/s; '-': no such unit)\n");
    if (g->measured_date[0]) {
        printf("  measured       on %s:", g->measured_date);
        print_peaks(g->measured_tflops);
    } else {
        printf("  measured       not calibrated yet\n");
    }
    printf("  aliases        ");
    for (int i = 0; i < g->naliases; i++)
        printf("%s%s", i ? ", " : "", g->aliases[i]);
    printf("\n  device names   ");
    for (int i = 0; i < g->ndevice_names; i++)
        printf("%s'%s'", i ? ", " : "", g->device_names[i]);
    printf("\n  sources\n");
    const cJSON *src;
    cJSON_ArrayForEach(src, cJSON_GetObjectItemCaseSensitive(g->doc, "sources"))
    {
        printf("    - ");
        const cJSON *k;
        int first = 1;
        cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(src, "keys"))
        {
            printf("%s%s", first ? "" : ", ", k->valuestring);
            first = 0;
        }
        printf(": %s\n", dt_json_str(src, "source", ""));
    }
}

static int hw_show_cmd(int argc, char **argv)
{
    const char *name = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("hw", "show: unknown option '%s'", argv[i]);
        else if (name == NULL)
            name = argv[i];
        else
            return cli_usage_error("hw", "show: one GPU name only ('%s' is extra)", argv[i]);
    }
    if (name == NULL)
        return cli_usage_error("hw", "show: which GPU? give a NAME from 'ditto hw list'");
    dt_err e = {0};
    hw_spec *g = hw_load(name, &e);
    if (g == NULL) {
        fprintf(stderr, "ditto hw: %s\n", e.msg);
        return e.code == HW_ENOTFOUND ? CLI_NOT_FOUND : CLI_FAIL;
    }
    if (json)
        print_json(cJSON_Duplicate(g->doc, 1));
    else
        show_human(g);
    hw_spec_free(g);
    return CLI_OK;
}

static int hw_check_cmd(int argc, char **argv)
{
    if (argc < 2)
        return cli_usage_error("hw", "check: give one or more spec FILEs");
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        dt_buf report = DT_BUF_INIT;
        int n = hw_check_file(argv[i], &report);
        if (n == 0)
            printf("%s: ok\n", argv[i]);
        else
            fputs(dt_buf_str(&report), stdout);
        bad += n > 0;
        dt_buf_free(&report);
    }
    return bad ? CLI_FAIL : CLI_OK;
}

static int hw_match_cmd(int argc, char **argv)
{
    const char *dev = NULL, *cc = NULL;
    int sms = 0, json = 0, approximate = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--approximate") == 0) {
            approximate = 1;
        } else if (strcmp(argv[i], "--sms") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("hw", "match: --sms needs the SM count");
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > 100000)
                return cli_usage_error("hw", "match: --sms takes a positive integer, not '%s'",
                                       argv[i]);
            sms = (int)v;
        } else if (dev == NULL) {
            dev = argv[i];
        } else if (cc == NULL) {
            cc = argv[i];
        } else {
            return cli_usage_error("hw", "match: unexpected argument '%s'", argv[i]);
        }
    }
    if (dev == NULL || cc == NULL)
        return cli_usage_error("hw", "match: give the device name and its compute capability, "
                                     "e.g. 'NVIDIA H200' 9.0");
    int ma = 0, mi = 0;
    char tail = 0;
    if (sscanf(cc, "%d.%d%c", &ma, &mi, &tail) != 2 || ma < 1 || mi < 0 || mi > 9)
        return cli_usage_error("hw", "match: compute capability '%s' is not of the form x.y", cc);
    hw_match_kind how = HW_MATCH_NAME;
    char warn[512];
    dt_err e = {0};
    hw_spec *g = hw_match(dev, ma, mi, sms, &how, warn, sizeof warn, &e);
    if (g == NULL) {
        fprintf(stderr, "ditto hw: %s\n", e.msg);
        return CLI_FAIL;
    }
    /* Another architecture's limits (registers, shared memory, warps) decide
     * occupancy and what compiles: only on request, and then said. */
    if (how == HW_MATCH_NEAREST && !approximate) {
        char *known = hw_known_names();
        fprintf(stderr,
                "ditto hw: match: no hardware file for '%s' (cc %d.%d), and no known GPU has "
                "that compute capability (known: %s); add hardware/NAME.json for it (ditto hw "
                "check FILE checks one), or give --approximate to use the nearest part, %s "
                "(cc %d.%d), and its limits\n",
                dev, ma, mi, known ? known : "?", g->name, g->cc_major, g->cc_minor);
        free(known);
        hw_spec_free(g);
        return CLI_NOT_FOUND;
    }
    char assumed[512] = "";
    if (how == HW_MATCH_NEAREST)
        snprintf(assumed, sizeof assumed,
                 "cc %d.%d, %d SMs, %d threads and %d warps and %d blocks per SM, %d threads per "
                 "block, %d registers per SM (%d per thread), %d KB shared memory per SM (%d KB "
                 "per block after opt-in), %.0f GB/s",
                 g->cc_major, g->cc_minor, g->sm_count, g->max_threads_per_sm, g->max_warps_per_sm,
                 g->max_blocks_per_sm, g->max_threads_per_block, g->regs_per_sm, g->regs_per_thread,
                 g->smem_per_sm / 1024, g->smem_per_block_optin / 1024, g->mem_bandwidth_gbs);
    static const char *const kinds[] = {"name", "compute_capability", "nearest"};
    if (json) {
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "name", g->name);
        dt_json_set_str(o, "full_name", g->full_name);
        dt_json_set_str(o, "matched_by", kinds[how]);
        if (warn[0])
            dt_json_set_str(o, "warning", warn);
        if (assumed[0])
            dt_json_set_str(o, "assumed_limits", assumed);
        print_json(o);
    } else {
        printf("%s (%s), matched by %s\n", g->name, g->full_name, kinds[how]);
        if (assumed[0])
            printf("assumed limits (%s's): %s\n", g->name, assumed);
    }
    if (warn[0])
        fprintf(stderr, "ditto hw: warning: %s\n", warn);
    hw_spec_free(g);
    return CLI_OK;
}

int cli_hw(int argc, char **argv)
{
    if (argc < 2 || cli_wants_help(argc, argv))
        return argc < 2 ? (cli_print_usage("hw"), CLI_USAGE) : cli_print_usage("hw");
    const char *sub = argv[1];
    if (strcmp(sub, "list") == 0)
        return hw_list_cmd(argc - 1, argv + 1);
    if (strcmp(sub, "show") == 0)
        return hw_show_cmd(argc - 1, argv + 1);
    if (strcmp(sub, "check") == 0)
        return hw_check_cmd(argc - 1, argv + 1);
    if (strcmp(sub, "match") == 0)
        return hw_match_cmd(argc - 1, argv + 1);
    return cli_usage_error("hw", "unknown subcommand '%s' (list, show, check, match)", sub);
}
