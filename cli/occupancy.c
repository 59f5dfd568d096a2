/* occupancy.c -- `ditto occupancy`: theoretical occupancy of a launch, with what-ifs. */
#include "cli/cli.h"
#include "hardware/hardware.h"

#include <stdlib.h>
#include <string.h>

const char cli_occupancy_usage[] =
    "usage: ditto occupancy --gpu NAME --threads T --regs R [--smem BYTES] [--dyn-smem BYTES]\n"
    "                       [--carveout PCT|default] [--no-optin] [--whatif] [--json]\n"
    "\n"
    "Theoretical occupancy of a launch by the rules of cuda_occupancy.h: active blocks and\n"
    "warps per SM, the percentage, the limiter and the blocks each resource allows.\n"
    "\n"
    "  --gpu NAME         a GPU from 'ditto hw list' (or a spec file path)\n"
    "  --threads T        threads per block\n"
    "  --regs R           registers per thread (ptxas -v, cuFuncGetAttribute NUM_REGS)\n"
    "  --smem BYTES       static shared memory per block (default 0; K = 1000, Ki = 1024)\n"
    "  --dyn-smem BYTES   dynamic shared memory per block (default 0)\n"
    "  --carveout PCT     shared-memory carveout preference, percent of the maximum\n"
    "                     (default: none, i.e. maximum shared memory, as the driver does)\n"
    "  --no-optin         the kernel has not raised its dynamic shared-memory limit, so\n"
    "                     more than 48 KB per block cannot launch (default: opted in)\n"
    "  --whatif           occupancy against registers, block size and shared memory\n"
    "  --json             machine-readable output (with --whatif: the three curves)\n";

static const char CMD[] = "occupancy";

static int parse_int(const char *s, long lo, long hi, int *out)
{
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = (int)v;
    return 0;
}

static void fmt_limit(int v, char *out, size_t len)
{
    if (v == HW_UNLIMITED)
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%d", v);
}

/* One line per curve: runs of equal active warps, "x0-x1: warps (pct)". */
static void print_curve(const hw_occ_curve *c, const char *title, const char *unit)
{
    printf("  %s\n   ", title);
    int col = 3;
    for (int i = 0; i < c->n;) {
        int j = i;
        while (j + 1 < c->n && c->pts[j + 1].warps == c->pts[i].warps)
            j++;
        char seg[96];
        int cur = c->current >= i && c->current <= j;
        if (i == j)
            snprintf(seg, sizeof seg, " %d%s: %d (%.0f%%)%s", c->pts[i].x, unit, c->pts[i].warps,
                     c->pts[i].pct, cur ? " <-" : "");
        else
            snprintf(seg, sizeof seg, " %d-%d%s: %d (%.0f%%)%s", c->pts[i].x, c->pts[j].x, unit,
                     c->pts[i].warps, c->pts[i].pct, cur ? " <-" : "");
        int len = (int)strlen(seg);
        if (col + len > 96) {
            printf("\n   ");
            col = 3;
        }
        fputs(seg, stdout);
        col += len;
        i = j + 1;
    }
    printf("\n");
}

static void print_human(const hw_spec *g, const hw_occ *o, const hw_occ_curve *curves, int ncurves)
{
    char carve[32];
    if (o->carveout < 0)
        snprintf(carve, sizeof carve, "default (max shared)");
    else
        snprintf(carve, sizeof carve, "%d%%", o->carveout);
    printf("%s (%s, cc %d.%d): %d threads/block, %d registers/thread, %zu B static + %zu B "
           "dynamic shared memory, carveout %s%s\n\n",
           g->name, g->full_name, g->cc_major, g->cc_minor, o->threads, o->regs, o->static_smem,
           o->dyn_smem, carve, o->optin ? "" : ", no opt-in");
    printf("  active blocks per SM   %d\n", o->blocks);
    printf("  active warps per SM    %d of %d\n", o->warps, o->max_warps);
    printf("  occupancy              %.1f%%\n", o->pct);
    printf("  limiter                %s", hw_limiter_name(o->limiter));
    int others = 0;
    static const hw_limiter order[] = {HW_LIM_WARPS, HW_LIM_BLOCKS, HW_LIM_REGS, HW_LIM_SMEM};
    for (size_t i = 0; i < DT_ARRAY_LEN(order); i++) {
        if ((o->limiters & order[i]) && order[i] != o->limiter)
            printf("%s%s", others++ ? ", " : " (also ", hw_limiter_name(order[i]));
    }
    printf("%s\n\n", others ? ")" : "");
    char w[16], b[16], r[16], s[16];
    fmt_limit(o->lim_warps, w, sizeof w);
    fmt_limit(o->lim_blocks, b, sizeof b);
    fmt_limit(o->lim_regs, r, sizeof r);
    fmt_limit(o->lim_smem, s, sizeof s);
    printf("  blocks per SM each resource allows:\n");
    printf("    warps          %5s   %d warp slots / %d warps per block\n", w, g->max_warps_per_sm,
           o->warps_per_block);
    printf("    blocks         %5s   the SM's block limit\n", b);
    if (o->regs_per_warp > 0)
        printf("    registers      %5s   %d per warp (%d per thread allocated), %d per block; %d "
               "per sub-partition x %d\n",
               r, o->regs_per_warp, o->regs_per_thread_alloc, o->regs_per_block,
               g->regs_per_sm / g->sub_partitions, g->sub_partitions);
    else
        printf("    registers      %5s   no registers\n", r);
    printf("    shared memory  %5s   %d B per block (limit %d) in a %d KB per-SM carveout\n", s,
           o->smem_per_block, o->smem_block_limit, o->smem_config / 1024);
    if (o->nnotes > 0) {
        printf("\n  notes:\n");
        for (int i = 0; i < o->nnotes; i++)
            printf("    - %s\n", o->notes[i]);
    }
    if (ncurves > 0) {
        printf("\n  what if (active warps per SM; '<-' marks this kernel):\n");
        for (int i = 0; i < ncurves; i++) {
            const char *title = curves[i].axis == HW_AXIS_REGS      ? "registers per thread"
                                : curves[i].axis == HW_AXIS_THREADS ? "threads per block"
                                                                    : "shared memory per block";
            print_curve(&curves[i], title, curves[i].axis == HW_AXIS_SMEM ? " B" : "");
        }
    }
}

int cli_occupancy(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage(CMD);
    const char *gpu = NULL;
    int threads = -1, regs = -1, carveout = HW_CARVEOUT_DEFAULT, optin = 1, json = 0, whatif = 0;
    int64_t smem = 0, dyn = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--gpu", &missing)) != NULL) {
            gpu = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--threads", &missing)) != NULL) {
            if (parse_int(v, 1, 65536, &threads) != 0)
                return cli_usage_error(
                    CMD, "--threads takes threads per block (1 or more), not '%s'", v);
        } else if ((v = cli_flag_value(argc, argv, &i, "--regs", &missing)) != NULL) {
            if (parse_int(v, 0, 1024, &regs) != 0)
                return cli_usage_error(CMD,
                                       "--regs takes registers per thread (0 to 255), not '%s'", v);
        } else if ((v = cli_flag_value(argc, argv, &i, "--smem", &missing)) != NULL) {
            if (dt_parse_size(v, &smem) != 0 || smem > ((int64_t)1 << 29))
                return cli_usage_error(CMD,
                                       "--smem takes bytes of static shared memory per block "
                                       "(e.g. 12288 or 12Ki), not '%s'",
                                       v);
        } else if ((v = cli_flag_value(argc, argv, &i, "--dyn-smem", &missing)) != NULL) {
            if (dt_parse_size(v, &dyn) != 0 || dyn > ((int64_t)1 << 29))
                return cli_usage_error(CMD,
                                       "--dyn-smem takes bytes of dynamic shared memory per "
                                       "block (e.g. 65536 or 64Ki), not '%s'",
                                       v);
        } else if ((v = cli_flag_value(argc, argv, &i, "--carveout", &missing)) != NULL) {
            if (strcmp(v, "default") == 0)
                carveout = HW_CARVEOUT_DEFAULT;
            else if (parse_int(v, 0, 100, &carveout) != 0)
                return cli_usage_error(CMD,
                                       "--carveout takes a percentage 0-100 or 'default', "
                                       "not '%s'",
                                       v);
        } else if (missing) {
            return cli_usage_error(CMD, "%s needs a value", argv[i]);
        } else if (strcmp(argv[i], "--no-optin") == 0) {
            optin = 0;
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--whatif") == 0) {
            whatif = 1;
        } else {
            return cli_usage_error(CMD, "unknown argument '%s'", argv[i]);
        }
    }
    if (gpu == NULL)
        return cli_usage_error(CMD, "--gpu is required: give a NAME from 'ditto hw list'");
    if (threads < 0)
        return cli_usage_error(CMD, "--threads is required: threads per block");
    if (regs < 0)
        return cli_usage_error(CMD, "--regs is required: registers per thread (ptxas -v or "
                                    "cuFuncGetAttribute NUM_REGS)");
    dt_err e = {0};
    hw_spec *g = hw_load(gpu, &e);
    if (g == NULL) {
        fprintf(stderr, "ditto %s: --gpu: %s\n", CMD, e.msg);
        return e.code == HW_ENOTFOUND ? CLI_NOT_FOUND : CLI_USAGE;
    }
    hw_occ o;
    if (hw_occupancy(g, threads, regs, (size_t)smem, (size_t)dyn, carveout, optin, &o, &e) != 0) {
        hw_spec_free(g);
        return cli_usage_error(CMD, "%s", e.msg);
    }
    hw_occ_curve curves[3];
    int ncurves = 0;
    if (whatif) {
        static const hw_occ_axis axes[] = {HW_AXIS_REGS, HW_AXIS_THREADS, HW_AXIS_SMEM};
        for (size_t i = 0; i < DT_ARRAY_LEN(axes); i++) {
            if (hw_occ_curve_make(g, &o, axes[i], &curves[ncurves], &e) != 0) {
                fprintf(stderr, "ditto %s: %s\n", CMD, e.msg);
                for (int k = 0; k < ncurves; k++)
                    hw_occ_curve_free(&curves[k]);
                hw_spec_free(g);
                return CLI_FAIL;
            }
            ncurves++;
        }
    }
    if (json) {
        cJSON *j = hw_occ_json(g, &o);
        if (ncurves > 0) {
            cJSON *w = dt_json_obj();
            for (int i = 0; i < ncurves; i++)
                dt_json_set_take(w, hw_occ_axis_name(curves[i].axis),
                                 hw_occ_curve_json(&curves[i]));
            dt_json_set_take(j, "whatif", w);
        }
        char *s = dt_json_print(j, 1);
        puts(s);
        free(s);
        cJSON_Delete(j);
    } else {
        print_human(g, &o, curves, ncurves);
    }
    for (int i = 0; i < ncurves; i++)
        hw_occ_curve_free(&curves[i]);
    hw_spec_free(g);
    return CLI_OK;
}
