/* gpucmds.c -- the commands that drive GPU workers: `ditto worker`,
 * `ditto check`, `ditto baseline`, `ditto calibrate`. */
#include "cli/cli.h"
#include "gpu/gpu.h"
#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_worker(int argc, char **argv)
{
    return gpu_worker_main(argc, argv);
}

/* ---- shared helpers ----------------------------------------------------------------- */

typedef struct gpu_session {
    dt_loop *loop;
    gpu_pool *pool;
    const cJSON *hello;
    int has_gpu;
} gpu_session;

/* deadline > 0: a person's --deadline, a cap on every request (0: none). */
static int session_open(gpu_session *s, const char *cmd, const char *launcher, int quiet,
                        double deadline)
{
    memset(s, 0, sizeof *s);
    s->loop = dt_loop_new();
    gpu_pool_opts o = {.workers = 1, .launcher = launcher, .max_deadline_s = deadline};
    dt_err e = {0};
    s->pool = gpu_pool_new(s->loop, &o, &e);
    if (s->pool == NULL) {
        fprintf(stderr, "ditto %s: %s\n", cmd, e.msg);
        dt_loop_free(s->loop);
        return -1;
    }
    if (gpu_pool_wait_ready(s->pool, 60) < 1) {
        fprintf(stderr, "ditto %s: the GPU worker did not start (launcher: %s)\n", cmd,
                launcher ? launcher : "{exe} worker --device {device}");
        gpu_pool_free(s->pool);
        dt_loop_free(s->loop);
        return -1;
    }
    s->hello = gpu_pool_hello(s->pool, 0);
    const cJSON *dev = cJSON_GetObjectItem(s->hello, "device");
    s->has_gpu = dt_json_bool(dev, "present", 0);
    if (!quiet) {
        if (s->has_gpu)
            fprintf(stderr, "device: %s (cc %s, %d SMs)\n", dt_json_str(dev, "name", "?"),
                    dt_json_str(dev, "cc", "?"), dt_json_int(dev, "sms", 0));
        else
            fprintf(stderr, "no GPU: %s\n", dt_json_str(dev, "reason", "unknown reason"));
    }
    return 0;
}

static void session_close(gpu_session *s)
{
    gpu_pool_free(s->pool);
    dt_loop_free(s->loop);
}

static cJSON *request(const char *name)
{
    cJSON *r = dt_json_obj();
    dt_json_set_str(r, "req", name);
    return r;
}

static cJSON *load(gpu_session *s, const char *cmd, const char *matrix, const char *handle)
{
    cJSON *r = request("load_matrix");
    dt_json_set_str(r, "matrix", matrix);
    if (isatty(2))
        fprintf(stderr, "loading %s ...\r", matrix);
    cJSON *rep = gpu_pool_load(s->pool, handle, r, 0);
    if (isatty(2))
        fprintf(stderr, "\033[K");
    if (!dt_json_bool(rep, "ok", 0)) {
        char buf[1200];
        fprintf(stderr, "ditto %s: %s\n", cmd, gpu_reply_error(rep, buf, sizeof buf));
        cJSON_Delete(rep);
        return NULL;
    }
    return rep;
}

static void print_json(const cJSON *j)
{
    char *s = dt_json_print(j, 1);
    puts(s);
    free(s);
}

typedef struct prob_args {
    const char *op, *dtype, *epilogue, *layout;
    int n;
    double alpha, beta;
} prob_args;

/* Parse the problem flags shared by check and baseline; returns 1 when argv[*i]
 * was one of them (advancing *i), 0 when not, -1 on a bad value. */
static int prob_flag(const char *cmd, int argc, char **argv, int *i, prob_args *p)
{
    const char *a = argv[*i];
    const char *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    if (strcmp(a, "--op") == 0 || strcmp(a, "--dtype") == 0 || strcmp(a, "--epilogue") == 0 ||
        strcmp(a, "--layout") == 0 || strcmp(a, "--n") == 0 || strcmp(a, "--k") == 0 ||
        strcmp(a, "--alpha") == 0 || strcmp(a, "--beta") == 0) {
        if (v == NULL) {
            cli_usage_error(cmd, "%s needs a value", a);
            return -1;
        }
        (*i)++;
        if (strcmp(a, "--op") == 0) {
            sp_op op;
            if (sp_op_parse(v, &op) != 0) {
                cli_usage_error(cmd, "--op: expected spmv, spmm or sddmm, got '%s'", v);
                return -1;
            }
            p->op = v;
        } else if (strcmp(a, "--dtype") == 0) {
            sp_dtype t;
            if (sp_dtype_parse(v, &t) != 0) {
                cli_usage_error(cmd, "--dtype: expected fp32, fp64, fp16 or bf16, got '%s'", v);
                return -1;
            }
            p->dtype = v;
        } else if (strcmp(a, "--epilogue") == 0) {
            sp_epilogue ep;
            if (sp_epilogue_parse(v, &ep) != 0) {
                cli_usage_error(cmd, "--epilogue: expected none, relu, gelu or bias, got '%s'", v);
                return -1;
            }
            p->epilogue = v;
        } else if (strcmp(a, "--layout") == 0) {
            if (strcmp(v, "row") != 0 && strcmp(v, "col") != 0) {
                cli_usage_error(cmd, "--layout: expected row or col, got '%s'", v);
                return -1;
            }
            p->layout = v;
        } else if (strcmp(a, "--n") == 0 || strcmp(a, "--k") == 0) {
            int64_t x;
            if (dt_parse_size(v, &x) != 0 || x < 1 || x > 65536) {
                cli_usage_error(cmd, "%s: expected an integer from 1 to 65536, got '%s'", a, v);
                return -1;
            }
            p->n = (int)x;
        } else {
            double x;
            if (dt_parse_double(v, &x) != 0) {
                cli_usage_error(cmd, "%s: expected a number, got '%s'", a, v);
                return -1;
            }
            if (a[2] == 'a')
                p->alpha = x;
            else
                p->beta = x;
        }
        return 1;
    }
    return 0;
}

static void prob_into(const prob_args *p, cJSON *r)
{
    dt_json_set_str(r, "op", p->op);
    dt_json_set_str(r, "dtype", p->dtype);
    dt_json_set_int(r, "n", p->n);
    dt_json_set_num(r, "alpha", p->alpha);
    dt_json_set_num(r, "beta", p->beta);
    dt_json_set_str(r, "epilogue", p->epilogue);
    dt_json_set_str(r, "layout", p->layout);
}

static double stat_us(const cJSON *o, const char *mode)
{
    return dt_json_num(cJSON_GetObjectItem(o, mode), "median_us", NAN);
}

/* A mode's median as "%9.2f us", or "-" where that mode was not timed
 * (graph replay is skipped above 20 us warm and for data beyond L2). */
static const char *us_cell(const cJSON *o, const char *mode, char buf[16])
{
    double v = stat_us(o, mode);
    if (isnan(v))
        snprintf(buf, 16, "%9s   ", "-");
    else
        snprintf(buf, 16, "%9.2f us", v);
    return buf;
}

/* ---- check ------------------------------------------------------------------------- */

static void print_diags(const cJSON *diags)
{
    const cJSON *d;
    cJSON_ArrayForEach(d, diags)
    {
        int line = dt_json_int(d, "line", 0);
        const char *code = dt_json_str(d, "code", "");
        if (line > 0)
            printf("  %s:%d: %s%s%s%s: %s\n", dt_tsafe(dt_json_str(d, "file", "kernel.cu")), line,
                   dt_json_str(d, "severity", ""), *code ? " [" : "", dt_tsafe(code),
                   *code ? "]" : "", dt_tsafe(dt_json_str(d, "message", "")));
        else
            printf("  %s: %s\n", dt_json_str(d, "severity", ""),
                   dt_tsafe(dt_json_str(d, "message", "")));
        const char *src = dt_json_str(d, "source_line", NULL);
        if (src && line > 0)
            printf("      | %s\n", dt_tsafe(src));
    }
}

static void print_checks(const cJSON *ver)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(ver, "checks"))
    {
        int skipped = dt_json_bool(c, "skipped", 0);
        int ok = dt_json_bool(c, "passed", 0);
        printf("  %-5s %s", skipped ? "skip" : ok ? "pass" : "FAIL", dt_json_str(c, "name", ""));
        double ratio = dt_json_num(c, "max_ratio", -1);
        if (ratio >= 0)
            printf(" (max error %.2g = %.2g of the tolerance)", dt_json_num(c, "max_err", 0),
                   ratio);
        const char *detail = dt_json_str(c, "detail", NULL);
        if (detail)
            printf(": %s", detail);
        putchar('\n');
        const cJSON *fb = cJSON_GetObjectItem(c, "first_bad");
        if (fb) {
            const cJSON *got = cJSON_GetObjectItem(fb, "got");
            char gs[64];
            if (cJSON_IsString(got))
                snprintf(gs, sizeof gs, "%s", got->valuestring);
            else
                snprintf(gs, sizeof gs, "%.9g", got ? got->valuedouble : NAN);
            printf("        first bad: index %.0f (row %.0f), expected %.9g, got %s\n",
                   dt_json_num(fb, "index", 0), dt_json_num(fb, "row", 0),
                   dt_json_num(fb, "expected", 0), gs);
        }
        if (cJSON_GetObjectItem(c, "diagnostics"))
            print_diags(cJSON_GetObjectItem(c, "diagnostics"));
    }
}

static void print_measure(const cJSON *m)
{
    const cJSON *cand = cJSON_GetObjectItem(m, "candidate");
    const char *method = dt_json_str(m, "method", "cold");
    printf("measure (%s timing: %s)\n", method,
           strcmp(method, "graph") == 0 ? "L2-resident, CUDA-graph replay of 50 launches"
                                        : "L2 flushed before every run");
    char c0[16], c1[16], c2[16];
    printf("  kernel     cold %s   warm %s   graph %s\n", us_cell(cand, "cold", c0),
           us_cell(cand, "warm", c1), us_cell(cand, "graph", c2));
    printf("  effective  %.1f GB/s over %.3g minimum bytes, %.1f GFLOP/s; floor %.2f us\n",
           dt_json_num(m, "gbps", 0), dt_json_num(m, "min_bytes", 0), dt_json_num(m, "gflops", 0),
           dt_json_num(m, "floor_us", 0));
    const cJSON *base = cJSON_GetObjectItem(m, "baseline");
    if (base == NULL)
        return;
    const cJSON *a;
    cJSON_ArrayForEach(a, cJSON_GetObjectItem(base, "algs"))
    {
        if (!dt_json_bool(a, "ok", 0)) {
            printf("  cuSPARSE %-16s n/a: %s\n", dt_json_str(a, "name", ""),
                   dt_json_str(a, "error", ""));
            continue;
        }
        const cJSON *ver = cJSON_GetObjectItem(a, "verified");
        printf("  cuSPARSE %-16s cold %s   warm %s   graph %s   preprocess %.1f us%s\n",
               dt_json_str(a, "name", ""), us_cell(a, "cold", c0), us_cell(a, "warm", c1),
               us_cell(a, "graph", c2), dt_json_num(a, "preprocess_us", 0),
               ver && !cJSON_IsTrue(ver) ? "  (WRONG RESULT: excluded)" : "");
    }
    if (dt_json_str(base, "error", NULL))
        printf("  cuSPARSE: %s\n", dt_json_str(base, "error", ""));
    const cJSON *pr = cJSON_GetObjectItem(base, "paired");
    if (pr && dt_json_num(m, "speedup", 0) > 0)
    {
        dt_buf pl = {0};
        const cJSON *x;
        cJSON_ArrayForEach(x, cJSON_GetObjectItem(pr, "placement_speedups"))
        {
            dt_buf_printf(&pl, "%s%.3f", pl.len ? " " : "", x->valuedouble);
        }
        printf("  speedup    %.3fx vs the best cuSPARSE algorithm (%s): %d alternating rounds "
               "over %d placement%s\n"
               "             (per placement %s; per round p10-p90 %.3f-%.3fx; %.2f us against "
               "%.2f us; timed apart %.3fx)\n",
               dt_json_num(m, "speedup", 0), dt_json_str(base, "best", "?"),
               dt_json_int(pr, "rounds", 0), dt_json_int(pr, "placements", 0),
               dt_json_num(pr, "placements", 0) == 1 ? "" : "s", pl.len ? pl.data : "-",
               dt_json_num(pr, "speedup_p10", 0), dt_json_num(pr, "speedup_p90", 0),
               dt_json_num(pr, "candidate_us", 0), dt_json_num(pr, "baseline_us", 0),
               dt_json_num(m, "speedup_separate", 0));
        dt_buf_free(&pl);
    }
    else if (dt_json_num(m, "speedup", 0) > 0)
        printf("  speedup    %.3fx vs the best cuSPARSE algorithm (%s, %.2f us), same method\n",
               dt_json_num(m, "speedup", 0), dt_json_str(base, "best", "?"),
               dt_json_num(base, "us", 0));
    if (dt_json_str(base, "paired_error", NULL))
        printf("  paired timing failed: %s\n", dt_json_str(base, "paired_error", ""));
    const cJSON *tc = cJSON_GetObjectItem(m, "timed_checks");
    const cJSON *cs = cJSON_GetObjectItem(m, "cost_s");
    if (tc && cs)
        printf("  checks     %ld samples timed, %ld checked in full, %ld spot-checked; the call "
               "took %.2f s: prepare %.2f, timing %.2f (checks %.2f), cuSPARSE and paired rounds "
               "%.2f (checks %.2f), final checks %.2f; downloads %.2f of the checks (%s)\n",
               (long)dt_json_num(tc, "samples", 0), (long)dt_json_num(tc, "checked", 0),
               (long)dt_json_num(tc, "spot_checked", 0), dt_json_num(cs, "total", 0),
               dt_json_num(cs, "prepare", 0), dt_json_num(cs, "timing", 0),
               dt_json_num(cs, "timing_checks", 0), dt_json_num(cs, "baseline", 0),
               dt_json_num(cs, "baseline_checks", 0), dt_json_num(cs, "final", 0),
               dt_json_num(cs, "checks_download", 0),
               dt_json_bool(cs, "checks_pinned", 0) ? "page-locked" : "pageable");
}

/* The kernel's parameters for `check --param NAME=VALUE ...`: the manifest's
 * defaults with each given one replaced, every value one the manifest lists
 * and every constraint holding (gpu_manifest_check). NULL after printing what
 * is wrong. */
/* The first line "#define NAME INTEGER" of source, at the start of a line
 * (an exported kernel.cu defines its parameters so) and not a default under
 * "#ifndef NAME" on the line before (a template's): 1 with the value and the
 * line number, else 0. */
static int source_define(const char *source, const char *name, int64_t *value, int *line)
{
    size_t n = strlen(name);
    int ln = 1;
    const char *prev = NULL;
    for (const char *p = source; *p; ln++) {
        const char *eol = strchr(p, '\n');
        int guarded = prev && strncmp(prev, "#ifndef ", 8) == 0 &&
                      strncmp(prev + 8, name, n) == 0 &&
                      (prev[8 + n] == '\n' || prev[8 + n] == ' ');
        if (!guarded && strncmp(p, "#define ", 8) == 0 && strncmp(p + 8, name, n) == 0 &&
            p[8 + n] == ' ') {
            char *end = NULL;
            long long v = strtoll(p + 9 + n, &end, 10);
            if (end != p + 9 + n && (*end == '\n' || *end == '\0' || *end == ' ')) {
                *value = v;
                *line = ln;
                return 1;
            }
        }
        if (eol == NULL)
            break;
        prev = p;
        p = eol + 1;
    }
    return 0;
}

/* Whether source #defines a parameter its manifest names (an exported
 * kernel does): its parameters then come from the file, not the defaults. */
static int defines_params(const char *source)
{
    gpu_manifest m;
    if (gpu_manifest_from_source(source, &m, NULL) != 0)
        return 0;
    int found = 0;
    for (int k = 0; k < m.nparams && !found; k++) {
        int64_t v;
        int ln;
        found = source_define(source, m.params[k].name, &v, &ln);
    }
    gpu_manifest_clear(&m);
    return found;
}

static cJSON *check_params(const char *kfile, const char *source, char **args, int n)
{
    gpu_manifest m;
    dt_err e = {0};
    if (gpu_manifest_from_source(source, &m, &e) != 0) {
        cli_usage_error("check", "--param: %s: %s; --param sets a parameter its manifest names",
                        kfile, e.msg);
        return NULL;
    }
    cJSON *params = gpu_manifest_defaults(&m);
    /* A parameter the file #defines itself is that value: the worker's -D
     * then agrees with it (no redefinition, and the launch contract sees the
     * value the kernel was built with). */
    for (int k = 0; k < m.nparams; k++) {
        int64_t v;
        int ln;
        if (source_define(source, m.params[k].name, &v, &ln))
            dt_json_set_int(params, m.params[k].name, v);
    }
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        const char *eq = strchr(args[i], '=');
        int64_t v = 0;
        if (eq == NULL || eq == args[i] || dt_parse_size(eq + 1, &v) != 0) {
            cli_usage_error("check", "--param: expected NAME=VALUE (a whole number), got '%s'",
                            args[i]);
            ok = 0;
            break;
        }
        const gpu_mparam *mp = NULL;
        dt_buf names = {0};
        for (int k = 0; k < m.nparams; k++) {
            dt_buf_printf(&names, "%s%s", k ? ", " : "", m.params[k].name);
            if (strlen(m.params[k].name) == (size_t)(eq - args[i]) &&
                strncmp(m.params[k].name, args[i], (size_t)(eq - args[i])) == 0)
                mp = &m.params[k];
        }
        if (mp == NULL) {
            cli_usage_error("check", "--param %s: %s's manifest has no parameter %.*s (it has: %s)",
                            args[i], kfile, (int)(eq - args[i]), args[i],
                            names.data ? names.data : "none");
            ok = 0;
        } else {
            int64_t fv;
            int ln;
            if (source_define(source, mp->name, &fv, &ln) && fv != v) {
                cli_usage_error("check",
                                "--param %s: %s:%d defines %s %lld itself; change the "
                                "file or drop --param",
                                args[i], kfile, ln, mp->name, (long long)fv);
                ok = 0;
            }
            dt_json_set_int(params, mp->name, v);
        }
        dt_buf_free(&names);
    }
    /* Values outside the manifest's lists and broken constraints. */
    if (ok && gpu_manifest_check(&m, params, NULL, &e) != 0) {
        cli_usage_error("check", "--param: %s: %s", kfile, e.msg);
        ok = 0;
    }
    gpu_manifest_clear(&m);
    if (!ok) {
        cJSON_Delete(params);
        return NULL;
    }
    return params;
}

const char cli_check_usage[] =
    "usage: ditto check KERNEL.cu MATRIX [--op spmv|spmm|sddmm] [--dtype fp32|fp64|fp16|bf16]\n"
    "                   [--n N] [--alpha A] [--beta B] [--epilogue none|relu|gelu|bias]\n"
    "                   [--param NAME=VALUE]... [--sets N] [--seed N] [--no-edge] [--no-measure]\n"
    "                   [--metrics] [--sanitize memcheck|racecheck|initcheck]\n"
    "                   [--deadline SECONDS] [--launcher CMD] [--json]\n"
    "\n"
    "Compile a hand-written kernel under its launch contract (a /*@contract {...} @*/\n"
    "block in the source; see gpu/PROTOCOL.md), run the verification battery on MATRIX\n"
    "(read as `ditto profile --help` says, - for standard input included; --sets input\n"
    "sets, default 3; from 3 on, the last has alpha and beta away from 1 and 0), on\n"
    "MATRIX's pattern with fresh values and on edge matrices, then time it next to every\n"
    "cuSPARSE algorithm with the same method: CUDA-graph replay when the data fits half of\n"
    "L2 and the kernel takes under 20 us warm, else cold (L2 flushed before each run); a\n"
    "mode not timed prints \"-\". Timed launches are checked too: inputs rotate between\n"
    "sets, the output is re-seeded before each one and checked after, so a kernel that\n"
    "behaves differently when timed fails. The battery's launch order, poison, scalars\n"
    "and edge-matrix sizes follow a seed drawn per run and printed; --seed N repeats one.\n"
    "The speedup comes from timing the kernel and the best algorithm in alternating\n"
    "rounds (over 7 placements of the operands when they fit in L2). Without a GPU it\n"
    "stops after compiling. --deadline bounds each request (default 300 s): a kernel\n"
    "still running then is killed with its worker.\n"
    "\n"
    "--param NAME=VALUE (repeatable) sets one of the parameters the kernel's manifest\n"
    "(/*@manifest {...} @*/) names, to one of the values it lists; the others keep\n"
    "their defaults, and the manifest's constraints must hold. Without --param the\n"
    "kernel runs at its manifest's defaults.\n"
    "\n"
    "Exit status: 0 verified (and measured), 1 the kernel failed (compile error, a check,\n"
    "a wrong output while timed, a time below the physical floor, a fault or a hang),\n"
    "2 usage, 3 no GPU or worker, 66 the kernel file or the matrix does not exist.\n";

static int check_cmd(int argc, char **argv);

int cli_check(int argc, char **argv)
{
    return cli_with_stdin_matrix("check", argc, argv, check_cmd);
}

static int check_cmd(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("check");
    prob_args pa = {"spmv", "fp32", "none", "row", 32, 1.0, 0.0};
    const char *kfile = NULL, *matrix = NULL, *launcher = NULL, *sanitize = NULL;
    int sets = 3, edge = 1, measure = 1, metrics = 0, json = 0;
    double seed = -1; /* -1: the worker draws a fresh one */
    char *pargs[GPU_MAX_MPARAMS];
    int npargs = 0;
    double deadline = 0;
    for (int i = 1; i < argc; i++) {
        int r = prob_flag("check", argc, argv, &i, &pa);
        if (r < 0)
            return CLI_USAGE;
        if (r > 0)
            continue;
        const char *a = argv[i];
        if (strcmp(a, "--sets") == 0 && i + 1 < argc) {
            sets = atoi(argv[++i]);
            if (sets < 2 || sets > 100)
                return cli_usage_error("check", "--sets: expected 2 to 100");
        } else if (strcmp(a, "--seed") == 0 && i + 1 < argc) {
            char *end = NULL;
            const char *v = argv[++i];
            unsigned long long sv = strtoull(v, &end, 10);
            if (*v == '\0' || *v == '-' || *end != '\0' || sv > (1ULL << 53))
                return cli_usage_error("check", "--seed: expected an integer from 0 to 2^53");
            seed = (double)sv;
        } else if (strcmp(a, "--no-edge") == 0) {
            edge = 0;
        } else if (strcmp(a, "--no-measure") == 0) {
            measure = 0;
        } else if (strcmp(a, "--metrics") == 0) {
            metrics = 1;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--param") == 0) {
            if (i + 1 >= argc)
                return cli_usage_error("check", "--param needs NAME=VALUE");
            if (npargs == GPU_MAX_MPARAMS)
                return cli_usage_error("check", "--param: at most %d", GPU_MAX_MPARAMS);
            pargs[npargs++] = argv[++i];
        } else if (strcmp(a, "--deadline") == 0 && i + 1 < argc) {
            if (dt_parse_double(argv[++i], &deadline) != 0 || deadline <= 0)
                return cli_usage_error("check", "--deadline: expected seconds > 0, got '%s'",
                                       argv[i]);
        } else if (strcmp(a, "--sanitize") == 0 && i + 1 < argc) {
            sanitize = argv[++i];
        } else if (strcmp(a, "--launcher") == 0 && i + 1 < argc) {
            launcher = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("check", "unknown option '%s'", a);
        } else if (kfile == NULL) {
            kfile = a;
        } else if (matrix == NULL) {
            matrix = a;
        } else {
            return cli_usage_error("check", "unexpected argument '%s'", a);
        }
    }
    if (kfile == NULL || matrix == NULL)
        return cli_usage_error("check", "give a kernel file and a matrix");
    if (cli_file_missing("check", kfile) || cli_matrix_missing("check", matrix))
        return CLI_NOT_FOUND;
    dt_err e = {0};
    char *source = dt_read_file_max(kfile, GPU_MAX_SOURCE_BYTES, NULL, &e);
    if (source == NULL) {
        fprintf(stderr, "ditto check: %s\n", e.msg);
        return CLI_FAIL;
    }
    cJSON *params = NULL;
    if ((npargs > 0 || defines_params(source)) &&
        (params = check_params(kfile, source, pargs, npargs)) == NULL) {
        free(source);
        return CLI_USAGE;
    }
    gpu_session s;
    if (session_open(&s, "check", launcher, json, deadline) != 0) {
        cJSON_Delete(params);
        free(source);
        return 3;
    }
    int status = CLI_OK;
    cJSON *all = dt_json_obj();
    cJSON *lrep = load(&s, "check", matrix, "m");
    if (lrep == NULL) {
        status = CLI_FAIL;
        goto out;
    }
    const cJSON *rep = cJSON_GetObjectItem(lrep, "report");
    if (!json)
        printf("matrix %s: %.0f x %.0f, %.0f nonzeros, %s\n", matrix, dt_json_num(rep, "rows", 0),
               dt_json_num(rep, "cols", 0), dt_json_num(rep, "nnz", 0),
               dt_json_str(rep, "class", ""));
    cJSON_Delete(lrep);

    cJSON *kernel = dt_json_obj();
    dt_json_set_str(kernel, "source", source);
    const char *base = strrchr(kfile, '/');
    dt_json_set_str(kernel, "name", base ? base + 1 : kfile);
    if (params != NULL) {
        if (!json) {
            char *ps = cJSON_PrintUnformatted(params);
            printf("params %s\n", ps ? ps : "?");
            free(ps);
        }
        dt_json_set_take(kernel, "params", params);
        params = NULL;
    }

    /* compile (works without a GPU) */
    cJSON *cr = request("compile");
    dt_json_set_take(cr, "kernel", cJSON_Duplicate(kernel, 1));
    dt_json_set_str(cr, "matrix", "m");
    prob_into(&pa, cr);
    cJSON *crep = gpu_pool_call(s.pool, cr, 0);
    dt_json_set_take(all, "compile", crep);
    char buf[1200];
    if (!dt_json_bool(crep, "ok", 0)) {
        fprintf(stderr, "ditto check: %s\n", gpu_reply_error(crep, buf, sizeof buf));
        status = CLI_FAIL;
        cJSON_Delete(kernel);
        goto out;
    }
    if (!json) {
        printf("compile %s for %s with NVRTC %s: %s%s\n", dt_json_str(kernel, "name", ""),
               dt_json_str(crep, "arch", "?"), dt_json_str(crep, "nvrtc_version", "?"),
               dt_json_bool(crep, "compiled", 0) ? "ok" : "FAILED",
               dt_json_bool(crep, "cached", 0) ? " (cached)" : "");
        print_diags(cJSON_GetObjectItem(crep, "diagnostics"));
        const cJSON *k;
        cJSON_ArrayForEach(k, cJSON_GetObjectItem(crep, "kernels"))
        {
            printf("  %s: %.0f registers, %.0f B smem, %.0f B stack, spills %.0f/%.0f B, %.0f "
                   "barriers\n",
                   dt_json_str(k, "name", ""), dt_json_num(k, "registers", 0),
                   dt_json_num(k, "smem", 0), dt_json_num(k, "stack", 0),
                   dt_json_num(k, "spill_stores", 0), dt_json_num(k, "spill_loads", 0),
                   dt_json_num(k, "barriers", 0));
        }
    }
    if (!dt_json_bool(crep, "compiled", 0)) {
        status = CLI_FAIL;
        cJSON_Delete(kernel);
        goto out;
    }
    if (!s.has_gpu) {
        if (!json)
            printf("no GPU here: verification and measurement need one (the kernel compiled; "
                   "run this on a machine with a GPU)\n");
        status = 3;
        cJSON_Delete(kernel);
        goto out;
    }

    cJSON *vr = request("verify");
    dt_json_set_str(vr, "matrix", "m");
    dt_json_set_take(vr, "kernel", cJSON_Duplicate(kernel, 1));
    prob_into(&pa, vr);
    dt_json_set_int(vr, "sets", sets);
    dt_json_set_bool(vr, "edge", edge);
    if (seed >= 0)
        dt_json_set_num(vr, "seed", seed);
    cJSON *vrep = gpu_pool_call(s.pool, vr, deadline);
    dt_json_set_take(all, "verify", vrep);
    if (!dt_json_bool(vrep, "ok", 0)) {
        fprintf(stderr, "ditto check: verify: %s\n", gpu_reply_error(vrep, buf, sizeof buf));
        status = CLI_FAIL;
        cJSON_Delete(kernel);
        goto out;
    }
    int passed = dt_json_bool(vrep, "passed", 0);
    if (!json) {
        printf("verify (%.0f checks, seed %.0f): %s\n", dt_json_num(vrep, "checks_run", 0),
               dt_json_num(vrep, "seed", 0), passed ? "PASSED" : "FAILED");
        print_checks(vrep);
    }
    if (!passed) {
        status = CLI_FAIL;
        measure = 0;
        metrics = 0;
    }
    if (measure) {
        cJSON *mr = request("measure");
        dt_json_set_str(mr, "matrix", "m");
        dt_json_set_take(mr, "kernel", cJSON_Duplicate(kernel, 1));
        prob_into(&pa, mr);
        cJSON *mrep = gpu_pool_call(s.pool, mr, deadline);
        dt_json_set_take(all, "measure", mrep);
        if (!json && cJSON_GetObjectItem(mrep, "candidate"))
            print_measure(mrep);
        if (!dt_json_bool(mrep, "ok", 0)) {
            fprintf(stderr, "ditto check: measure: %s\n", gpu_reply_error(mrep, buf, sizeof buf));
            status = CLI_FAIL;
        }
    }
    if (metrics) {
        cJSON *mr = request("metrics");
        dt_json_set_str(mr, "matrix", "m");
        dt_json_set_take(mr, "kernel", cJSON_Duplicate(kernel, 1));
        prob_into(&pa, mr);
        cJSON *mrep = gpu_pool_call(s.pool, mr, 0);
        dt_json_set_take(all, "metrics", mrep);
        if (!json) {
            if (!dt_json_bool(mrep, "ok", 0)) {
                printf("metrics: %s\n", gpu_reply_error(mrep, buf, sizeof buf));
            } else if (!dt_json_bool(mrep, "available", 0)) {
                printf("metrics unavailable: %s\n", dt_json_str(mrep, "reason", ""));
            } else {
                printf("metrics (CUPTI range profiler)\n");
                const cJSON *v;
                cJSON_ArrayForEach(v, cJSON_GetObjectItem(mrep, "metrics"))
                    printf("  %-55s %.6g\n", v->string, v->valuedouble);
            }
        }
    }
    if (sanitize) {
        cJSON *sr = request("sanitize");
        dt_json_set_str(sr, "matrix", "m");
        dt_json_set_str(sr, "tool", sanitize);
        dt_json_set_take(sr, "kernel", cJSON_Duplicate(kernel, 1));
        prob_into(&pa, sr);
        cJSON *srep = gpu_pool_call(s.pool, sr, 1800);
        dt_json_set_take(all, "sanitize", srep);
        if (!dt_json_bool(srep, "ok", 0)) {
            fprintf(stderr, "ditto check: sanitize: %s\n", gpu_reply_error(srep, buf, sizeof buf));
        } else if (!json) {
            printf("compute-sanitizer %s: %s (%.0f errors)\n", sanitize,
                   dt_json_bool(srep, "clean", 0) ? "clean" : "FINDINGS",
                   dt_json_num(srep, "errors", 0));
            const cJSON *f;
            cJSON_ArrayForEach(f, cJSON_GetObjectItem(srep, "findings"))
                printf("  %s:%.0f: %s\n", dt_json_str(f, "file", "?"), dt_json_num(f, "line", 0),
                       dt_json_str(f, "kind", ""));
        }
        if (!dt_json_bool(srep, "clean", 1))
            status = CLI_FAIL;
    }
    cJSON_Delete(kernel);
out:
    if (json)
        print_json(all);
    cJSON_Delete(all);
    cJSON_Delete(params); /* still ours when the matrix did not load */
    session_close(&s);
    free(source);
    return status;
}

/* ---- baseline ------------------------------------------------------------------------ */

const char cli_baseline_usage[] =
    "usage: ditto baseline MATRIX... [--op spmv|spmm|sddmm] [--dtype fp32|fp64|fp16|bf16]\n"
    "                      [--n N] [--layout row|col] [--launcher CMD] [--json]\n"
    "\n"
    "Time every applicable cuSPARSE generic-API algorithm on each matrix (SpMV CSR ALG1/2,\n"
    "COO ALG1/2, SELL; SpMM CSR ALG1/2/3; SDDMM), each result checked against the fp64\n"
    "reference, and name the best. Timing: CUDA events around the call only, L2 flushed\n"
    "(cold) and warm, CUDA-graph replay for short calls; preprocessing reported apart.\n"
    "A MATRIX is read as `ditto profile --help` says, - (standard input) included.\n";

static int baseline_cmd(int argc, char **argv);

int cli_baseline(int argc, char **argv)
{
    return cli_with_stdin_matrix("baseline", argc, argv, baseline_cmd);
}

static int baseline_cmd(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("baseline");
    prob_args pa = {"spmv", "fp32", "none", "row", 32, 1.0, 0.0};
    const char *launcher = NULL;
    int json = 0;
    const char **mats = dt_xcalloc((size_t)argc, sizeof *mats);
    int nm = 0;
    for (int i = 1; i < argc; i++) {
        int r = prob_flag("baseline", argc, argv, &i, &pa);
        if (r < 0) {
            free(mats);
            return CLI_USAGE;
        }
        if (r > 0)
            continue;
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--launcher") == 0 && i + 1 < argc)
            launcher = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1]) {
            free(mats);
            return cli_usage_error("baseline", "unknown option '%s'", argv[i]);
        } else
            mats[nm++] = argv[i];
    }
    if (nm == 0) {
        free(mats);
        return cli_usage_error("baseline", "give at least one matrix");
    }
    for (int i = 0; i < nm; i++) {
        if (cli_matrix_missing("baseline", mats[i])) {
            free(mats);
            return CLI_NOT_FOUND;
        }
    }
    gpu_session s;
    if (session_open(&s, "baseline", launcher, json, 0) != 0) {
        free(mats);
        return 3;
    }
    if (!s.has_gpu) {
        fprintf(stderr, "ditto baseline: cuSPARSE baselines need a GPU\n");
        session_close(&s);
        free(mats);
        return 3;
    }
    int status = CLI_OK;
    cJSON *all = dt_json_arr();
    if (!json)
        printf("%-44s %10s %-16s %10s %9s %9s\n", "matrix", "nnz", "best", "us", "GB/s",
               "method");
    for (int i = 0; i < nm; i++) {
        cJSON *lrep = load(&s, "baseline", mats[i], "m");
        if (lrep == NULL) {
            status = CLI_FAIL;
            continue;
        }
        double nnz = dt_json_num(cJSON_GetObjectItem(lrep, "report"), "nnz", 0);
        cJSON_Delete(lrep);
        cJSON *br = request("baseline");
        dt_json_set_str(br, "matrix", "m");
        prob_into(&pa, br);
        cJSON *brep = gpu_pool_call(s.pool, br, 0);
        char buf[1200];
        const char *name = strrchr(mats[i], '/') ? strrchr(mats[i], '/') + 1 : mats[i];
        if (!dt_json_bool(brep, "ok", 0)) {
            fprintf(stderr, "ditto baseline: %s: %s\n", mats[i],
                    gpu_reply_error(brep, buf, sizeof buf));
            status = CLI_FAIL;
        } else if (!json) {
            printf("%-44.44s %10.0f %-16s %10.2f %9.1f %9s\n", name, nnz,
                   dt_json_str(brep, "best", "none"), dt_json_num(brep, "us", 0),
                   dt_json_num(brep, "gbps", 0), dt_json_str(brep, "method", ""));
            fflush(stdout);
        }
        dt_json_set_str(brep, "matrix", mats[i]);
        cJSON_AddItemToArray(all, brep);
        gpu_pool_unload(s.pool, "m");
    }
    if (json)
        print_json(all);
    cJSON_Delete(all);
    session_close(&s);
    free(mats);
    return status;
}

/* ---- calibrate ---------------------------------------------------------------------- */

const char cli_calibrate_usage[] =
    "usage: ditto calibrate [--launcher CMD] [--json]\n"
    "\n"
    "Measure the device-to-device copy bandwidth (1 GiB, bytes read + written) and the\n"
    "fp32/fp64 FMA peaks, and store them in the user's copy of the GPU's hardware spec\n"
    "($XDG_DATA_HOME/ditto/hardware/NAME.json, 'measured' block). The roofline and the\n"
    "physical-floor check use them from then on.\n";

int cli_calibrate(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("calibrate");
    const char *launcher = NULL;
    int json = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (strcmp(argv[i], "--launcher") == 0 && i + 1 < argc)
            launcher = argv[++i];
        else
            return cli_usage_error("calibrate", "unknown option '%s'", argv[i]);
    }
    gpu_session s;
    if (session_open(&s, "calibrate", launcher, json, 0) != 0)
        return 3;
    cJSON *rep = gpu_pool_call(s.pool, request("calibrate"), 120);
    int status = CLI_OK;
    char buf[1200];
    if (!dt_json_bool(rep, "ok", 0)) {
        fprintf(stderr, "ditto calibrate: %s\n", gpu_reply_error(rep, buf, sizeof buf));
        status = s.has_gpu ? CLI_FAIL : 3;
    } else if (json) {
        print_json(rep);
    } else {
        const cJSON *f = cJSON_GetObjectItem(rep, "fma_gflops");
        printf("copy bandwidth  %.1f GB/s (read + write, %.0f MB)\n", dt_json_num(rep, "copy_gbps", 0),
               dt_json_num(rep, "copy_bytes", 0) / 1e6);
        printf("fp32 FMA peak   %.1f GFLOP/s\n", dt_json_num(f, "fp32", 0));
        printf("fp64 FMA peak   %.1f GFLOP/s\n", dt_json_num(f, "fp64", 0));
        const char *w = dt_json_str(rep, "written", "");
        if (*w)
            printf("written to      %s\n", w);
        else
            printf("not written: %s\n", dt_json_str(rep, "note", ""));
    }
    cJSON_Delete(rep);
    session_close(&s);
    return status;
}

