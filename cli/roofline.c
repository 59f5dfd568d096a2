/* roofline.c -- `ditto roofline`: a GPU's roofline with kernels on it: text, JSON or SVG. */
#include "cli/cli.h"
#include "hardware/hardware.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

const char cli_roofline_usage[] =
    "usage: ditto roofline --gpu NAME [--dtype fp32[,EXTRA...]] [--point SPEC]...\n"
    "                      [--svg FILE] [--json] [--ascii] [--width W] [--height H] [--datasheet]\n"
    "\n"
    "The roofline of a GPU (memory bandwidth and compute ceilings, measured when the\n"
    "spec is calibrated) with kernels placed on it.\n"
    "\n"
    "  --dtype LIST       the compute roof (fp64 fp32 tf32 fp16 bf16 fp8 int8); more\n"
    "                     comma-separated types add ceilings\n"
    "  --point SPEC       LABEL:FLOPS:BYTES:SECONDS[:DRAMBYTES] -- a kernel's flops, its\n"
    "                     minimum bytes, its time (0: not measured, placed on the roof;\n"
    "                     units s, ms, us, ns) and measured DRAM bytes; numbers take\n"
    "                     k M G T P; repeatable\n"
    "  --svg FILE         also write the plot as SVG\n"
    "  --json             ceilings, ridge and each point's placement as JSON\n"
    "  --ascii            plain ASCII instead of Unicode braille\n"
    "  --width, --height  plot size in terminal cells (default: the terminal's)\n"
    "  --datasheet        ignore calibrated (measured) rates\n";

static const char CMD[] = "roofline";

/* A non-negative number with an optional decimal prefix (k, M, G, T, P) or,
 * for times, a unit (s, ms, us, ns). */
static int parse_qty(const char *s, int time, double *out)
{
    char *end = NULL;
    double v = dt_strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0)
        return -1;
    double mul = 1;
    if (*end == '\0') {
        mul = 1;
    } else if (time) {
        if (strcmp(end, "s") == 0)
            mul = 1;
        else if (strcmp(end, "ms") == 0)
            mul = 1e-3;
        else if (strcmp(end, "us") == 0)
            mul = 1e-6;
        else if (strcmp(end, "ns") == 0)
            mul = 1e-9;
        else
            return -1;
    } else {
        static const char pre[] = "kMGTP";
        const char *p = end[1] == '\0' ? strchr(pre, end[0]) : NULL;
        if (p == NULL || end[0] == '\0')
            return -1;
        mul = pow(1000.0, (double)(p - pre + 1));
    }
    *out = v * mul;
    return 0;
}

/* LABEL:FLOPS:BYTES:SECONDS[:DRAMBYTES] */
static int parse_point(const char *s, hw_rl_point *p, char *why, size_t whylen)
{
    memset(p, 0, sizeof *p);
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    char *field[6];
    int nf = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ":", &save); t != NULL && nf < 6; t = strtok_r(NULL, ":", &save))
        field[nf++] = t;
    if (nf < 4 || nf > 5) {
        snprintf(why, whylen, "expected LABEL:FLOPS:BYTES:SECONDS[:DRAMBYTES], got %d fields", nf);
        return -1;
    }
    snprintf(p->label, sizeof p->label, "%s", field[0]);
    if (parse_qty(field[1], 0, &p->flops) != 0 || p->flops <= 0) {
        snprintf(why, whylen, "FLOPS '%s' must be a positive number (e.g. 2e9 or 2G)", field[1]);
        return -1;
    }
    if (parse_qty(field[2], 0, &p->min_bytes) != 0 || p->min_bytes <= 0) {
        snprintf(why, whylen, "BYTES '%s' must be a positive number (e.g. 8e9 or 8G)", field[2]);
        return -1;
    }
    if (parse_qty(field[3], 1, &p->seconds) != 0) {
        snprintf(why, whylen,
                 "SECONDS '%s' must be 0 (not measured) or a time such as 1.5e-3 "
                 "or 1.5ms",
                 field[3]);
        return -1;
    }
    if (nf == 5 && (parse_qty(field[4], 0, &p->dram_bytes) != 0 || p->dram_bytes <= 0)) {
        snprintf(why, whylen, "DRAMBYTES '%s' must be a positive number", field[4]);
        return -1;
    }
    return 0;
}

static void term_size(int *w, int *h)
{
    struct winsize ws;
    *w = 80;
    *h = 24;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) {
        *w = ws.ws_col;
        *h = ws.ws_row;
    } else if (getenv("COLUMNS") != NULL) {
        int c = atoi(getenv("COLUMNS"));
        if (c >= 30)
            *w = c;
    }
    if (*w > 160)
        *w = 160;
    /* leave room for the header and the legend */
    *h = *h - 10 < 12 ? 12 : (*h - 10 > 40 ? 40 : *h - 10);
}

static void print_place(const hw_roofline *r, const hw_rl_point *p, const hw_rl_place *pl,
                        char marker)
{
    char a[32], b[32], c[32];
    printf("  %c %s: AI %.3g FLOP/B algorithmic", marker, p->label, pl->ai_alg);
    if (pl->ai_ach > 0)
        printf(", %.3g achieved", pl->ai_ach);
    if (pl->predicted) {
        printf("; not measured: at best %sFLOP/s (the roof)", hw_fmt_si(pl->roof, a, sizeof a));
    } else {
        printf("; %sFLOP/s = %.1f%% of the roof (%sFLOP/s); %sB/s = %.1f%% of bandwidth",
               hw_fmt_si(pl->flops_s, a, sizeof a), pl->pct_roof, hw_fmt_si(pl->roof, b, sizeof b),
               hw_fmt_si(pl->bytes_s, c, sizeof c), pl->pct_bw);
    }
    printf("; %s-bound\n", pl->memory_bound ? "memory" : "compute");
    if (pl->below_floor)
        printf("    warning: %s ran faster than moving its %.3g minimum bytes at %sB/s allows: "
               "the time or the byte count is wrong\n",
               p->label, p->min_bytes, hw_fmt_si(r->bw, a, sizeof a));
}

int cli_roofline(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage(CMD);
    const char *gpu = NULL, *dtypes = "fp32", *svg = NULL;
    int json = 0, ascii = 0, datasheet = 0, width = 0, height = 0;
    hw_rl_point pts[HW_PLOT_MAX_POINTS];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v;
        if ((v = cli_flag_value(argc, argv, &i, "--gpu", &missing)) != NULL) {
            gpu = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--dtype", &missing)) != NULL) {
            dtypes = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--svg", &missing)) != NULL) {
            svg = v;
        } else if ((v = cli_flag_value(argc, argv, &i, "--point", &missing)) != NULL) {
            if (n >= HW_PLOT_MAX_POINTS)
                return cli_usage_error(CMD, "--point: at most %d points", HW_PLOT_MAX_POINTS);
            char why[200];
            if (parse_point(v, &pts[n], why, sizeof why) != 0)
                return cli_usage_error(CMD, "--point '%s': %s", v, why);
            n++;
        } else if ((v = cli_flag_value(argc, argv, &i, "--width", &missing)) != NULL) {
            width = atoi(v);
            if (width < 30 || width > 1000)
                return cli_usage_error(CMD, "--width takes 30 to 1000 columns, not '%s'", v);
        } else if ((v = cli_flag_value(argc, argv, &i, "--height", &missing)) != NULL) {
            height = atoi(v);
            if (height < 8 || height > 500)
                return cli_usage_error(CMD, "--height takes 8 to 500 rows, not '%s'", v);
        } else if (missing) {
            return cli_usage_error(CMD, "%s needs a value", argv[i]);
        } else if (strcmp(argv[i], "--json") == 0) {
            json = 1;
        } else if (strcmp(argv[i], "--ascii") == 0) {
            ascii = 1;
        } else if (strcmp(argv[i], "--datasheet") == 0) {
            datasheet = 1;
        } else {
            return cli_usage_error(CMD, "unknown argument '%s'", argv[i]);
        }
    }
    if (gpu == NULL)
        return cli_usage_error(CMD, "--gpu is required: give a NAME from 'ditto hw list'");
    /* --dtype fp32 or fp32,fp64,fp16: the first is the roof, the rest extra ceilings */
    hw_dtype primary = HW_FP32;
    unsigned extra = 0;
    {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", dtypes);
        char *save = NULL;
        int k = 0;
        for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save), k++) {
            hw_dtype d;
            if (hw_dtype_parse(t, &d) != 0)
                return cli_usage_error(CMD,
                                       "--dtype '%s': use fp64, fp32, tf32, fp16, bf16, fp8 "
                                       "or int8 (a comma list adds ceilings)",
                                       t);
            if (k == 0)
                primary = d;
            else
                extra |= 1u << d;
        }
        if (k == 0)
            return cli_usage_error(CMD, "--dtype needs a data type such as fp32");
    }
    dt_err e = {0};
    hw_spec *g = hw_load(gpu, &e);
    if (g == NULL) {
        fprintf(stderr, "ditto %s: --gpu: %s\n", CMD, e.msg);
        return e.code == HW_ENOTFOUND ? CLI_NOT_FOUND : CLI_USAGE;
    }
    hw_roofline r;
    if (hw_roofline_init(&r, g, primary, extra, !datasheet, &e) != 0) {
        hw_spec_free(g);
        return cli_usage_error(CMD, "--dtype: %s", e.msg);
    }
    hw_rl_place pl[HW_PLOT_MAX_POINTS];
    for (int i = 0; i < n; i++) {
        if (hw_roofline_place(&r, &pts[i], &pl[i], &e) != 0) {
            hw_spec_free(g);
            return cli_usage_error(CMD, "--point: %s", e.msg);
        }
    }
    hw_rl_view v;
    hw_rl_view_default(&r, &v);
    hw_rl_view_fit(&v, pl, n);
    int rc = CLI_OK;
    if (svg != NULL) {
        dt_buf b = DT_BUF_INIT;
        if (hw_roofline_svg(&r, &v, pts, n, 800, 560, &b, &e) != 0 ||
            dt_write_file_atomic(svg, b.data, b.len, &e) != 0) {
            fprintf(stderr, "ditto %s: --svg: %s\n", CMD, e.msg);
            rc = CLI_FAIL;
        }
        dt_buf_free(&b);
    }
    if (json) {
        cJSON *j = hw_roofline_json(&r, pts, n);
        if (svg != NULL && rc == CLI_OK)
            dt_json_set_str(j, "svg", svg);
        char *s = dt_json_print(j, 1);
        puts(s);
        free(s);
        cJSON_Delete(j);
    } else {
        int tw, th;
        term_size(&tw, &th);
        if (width == 0)
            width = tw;
        if (height == 0)
            height = th;
        printf("roofline of %s (%s), %s\n", g->full_name, g->name, hw_dtype_name(primary));
        for (int i = 0; i < r.nceil; i++)
            printf("  %-8s %s%s\n", r.ceil[i].is_memory ? "memory" : "compute", r.ceil[i].label,
                   r.ceil[i].measured ? "" : " (datasheet)");
        printf("  ridge    %.3g FLOP/B: kernels below it are memory-bound, above it "
               "compute-bound\n\n",
               r.ridge);
        dt_buf b = DT_BUF_INIT;
        hw_plot_info info;
        if (hw_roofline_render(&r, &v, pts, n, width, height, !ascii, &b, &info, &e) != 0) {
            fprintf(stderr, "ditto %s: %s\n", CMD, e.msg);
            rc = CLI_FAIL;
        } else {
            fputs(dt_buf_str(&b), stdout);
            if (n > 0)
                printf("\n");
            for (int i = 0; i < n; i++) {
                print_place(&r, &pts[i], &pl[i], info.marker[i]);
                if (info.clipped[i])
                    printf("    note: %s is outside the plotted range and is not drawn\n",
                           pts[i].label);
            }
        }
        dt_buf_free(&b);
        if (svg != NULL && rc == CLI_OK)
            printf("\nwrote %s\n", svg);
    }
    if (json) {
        for (int i = 0; i < n; i++) {
            if (pl[i].below_floor)
                fprintf(stderr,
                        "ditto %s: warning: %s ran faster than its minimum bytes allow at "
                        "peak bandwidth: the time or the byte count is wrong\n",
                        CMD, pts[i].label);
        }
    }
    hw_spec_free(g);
    return rc;
}
