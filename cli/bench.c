/* bench.c -- `ditto bench`: ditto's planned-then-tuned kernels against the
 * best cuSPARSE algorithm over a matrix set, at original size (L2-resident,
 * graph-replay timing) and replicated past the L2 (HBM regime, cold
 * timing), for SpMV, SpMM and SDDMM; a CSV and a markdown table into
 * docs/PERFORMANCE.md with the date, GPU, driver and the exact command. */
#include "agents/agents.h"
#include "cli/cli.h"
#include "gpu/gpu.h"
#include "knowledge/knowledge.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <time.h>

const char cli_bench_usage[] =
    "usage: ditto bench [MATRIX...] [--matrices-dir DIR]... [--part NAME [--split FILE]]\n"
    "                   [--ops LIST] [--regime orig|hbm|both]\n"
    "                   [--hbm-matrices N|NAME,NAME...] [--hbm-nnz N] [--strategies N]\n"
    "                   [--variants N] [--refine N] [--finalists N] [--workers N] [--out FILE]\n"
    "                   [--csv FILE] [--section NAME] [--verbose]\n"
    "\n"
    "For every matrix and op, rank the templates with the expert planner, tune the first\n"
    "--strategies (default 3; plus the first strategy safe for skewed rows when none of\n"
    "those is, see `ditto tune --help`) with --variants per strategy (default 12); when\n"
    "every quick timing loses to cuSPARSE (timed with the first one), the next two\n"
    "strategies of the ranking are added, again while that holds and half of the case's\n"
    "600 s lasts; then up to two\n"
    "rounds of --refine points (at least one per parameter) around each strategy's fastest\n"
    "(default: half of --variants; 0: none; `ditto tune --help` says how), with --finalists\n"
    "(default 2) re-verified with the full battery, and compare the fastest verified\n"
    "kernel with the best cuSPARSE algorithm, timed side by side with the same method:\n"
    "CUDA-graph replay at original size (L2-resident), L2 flushed before every run when the\n"
    "matrix is replicated block-diagonally to --hbm-nnz nonzeros (default 32M). A case\n"
    "whose kernels all fail verification is reported as failed, never as a speed. The %\n"
    "copy column divides by the measured device-to-device copy bandwidth: `ditto\n"
    "calibrate`'s, or, when it has not run on this machine, one measured (and saved as\n"
    "calibrate would) before the first case.\n"
    "\n"
    "Matrices: the arguments (files, .gz or not, - for standard input, or generator specs),\n"
    "else every .mtx and dlmc/*.smtx in --matrices-dir (default $DITTO_MATRICES, else\n"
    "../shared/matrices; give it again for more folders: --matrices-dir ../shared/matrices\n"
    "--matrices-dir ../shared/matrices/train2), with --part only those the split (--split,\n"
    "default knowledge/corpus-split.tsv, `ditto kb split`) puts in that part (fit,\n"
    "validate). The HBM regime runs\n"
    "on --hbm-matrices: a count (the first N of a representative list, default 8) or\n"
    "comma-separated names, each the end of a matrix's path with or without its extension\n"
    "(crack, dlmc/rn50__magnitude_pruning__0.8__final_dense); a name that matches none is an\n"
    "error.\n"
    "Ops (--ops, comma-separated): spmv-fp32, spmv-fp64, spmm-n32, spmm-n128, sddmm-k32,\n"
    "sddmm-k128 (default: all). Results: a table per case, geomean/min/max per op and regime,\n"
    "written between the gpu-bench markers of --out named by --section (default: the\n"
    "regime; docs/PERFORMANCE.md by default), so that a run of one regime, or of a part of\n"
    "the ops under its own --section, leaves the other sections alone; and as CSV (--csv,\n"
    "default docs/bench-SECTION.csv: a row per case, with tune_s, the case's tuning in\n"
    "seconds, cusparse_faster, 1 where the best verified kernel is slower than cuSPARSE --\n"
    "its ratio still counts, and the summary counts such cases -- and strategies, every\n"
    "tuned strategy's speedup as name=ratio;..., which `ditto kb fit` reads).\n"
    "--verbose (-v) prints the tuner's lines too: each\n"
    "variant's cheap timing, verification and measurement, with the seconds since the\n"
    "case's tuning began.\n";

typedef struct bop {
    const char *name;
    sp_op op;
    sp_dtype dtype;
    int n;
} bop;

static const bop all_ops[] = {
    {"spmv-fp32", SP_SPMV, SP_FP32, 1},   {"spmv-fp64", SP_SPMV, SP_FP64, 1},
    {"spmm-n32", SP_SPMM, SP_FP32, 32},   {"spmm-n128", SP_SPMM, SP_FP32, 128},
    {"sddmm-k32", SP_SDDMM, SP_FP32, 32}, {"sddmm-k128", SP_SDDMM, SP_FP32, 128},
};

/* Representative patterns for the HBM regime, in order. */
static const char *hbm_default[] = {
    "bcsstk13.mtx",          "crack.mtx",
    "Franz6_id1959_aug.mtx", "ca-GrQc.mtx",
    "adder_dcop_05.mtx",     "fidapex6.mtx",
    "n1024-l1.mtx",          "dlmc/rn50__magnitude_pruning__0.8__final_dense.smtx",
};

typedef struct row {
    char regime[8];
    char matrix[160];
    char op[16];
    double nnz;
    int ok;
    char strategy[40];
    char params[160];
    double us, base_us, speedup, gbps, pct_copy, pre_us, base_pre_us;
    char base_alg[32];
    char method[8];
    char why[256];
    double tune_s;       /* the case's tuning, seconds of wall time */
    int cusparse_faster; /* verified, but slower than the best cuSPARSE algorithm */
    char strats[512];    /* every tuned strategy's speedup: "seg16=1.23;merge-path=0.98" */
} row;

/* A new, zeroed row at the end of *rows. */
static row *add_row(row **rows, int *nrows, int *caprows)
{
    if (*nrows == *caprows) {
        *caprows = *caprows ? 2 * *caprows : 64;
        *rows = dt_xrealloc(*rows, (size_t)*caprows * sizeof **rows);
    }
    row *r = &(*rows)[(*nrows)++];
    memset(r, 0, sizeof *r);
    return r;
}

typedef struct bench_ctx {
    cJSON *res;
    int done;
    int verbose;
} bench_ctx;

/* The tuner's own lines (each variant's timing, verification and the
 * comparison, with the seconds since the case began) only with
 * --verbose; the per-case line is printed by the bench itself. */
static void b_progress(const char *line, void *ud)
{
    const bench_ctx *c = ud;
    if (c->verbose) {
        printf("    %s\n", line);
        fflush(stdout);
    }
}

static void b_done(cJSON *res, void *ud)
{
    bench_ctx *c = ud;
    c->res = res;
    c->done = 1;
}

static int list_matrices(const char *dir, char ***out)
{
    int n = 0, cap = 0;
    *out = NULL;
    const char *subs[] = {"", "dlmc/"};
    for (int s = 0; s < 2; s++) {
        char *d = dt_xasprintf("%s/%s", dir, subs[s]);
        DIR *dd = opendir(d);
        if (dd == NULL) {
            free(d);
            continue;
        }
        struct dirent *de;
        char **names = NULL;
        int nn = 0, nc = 0;
        while ((de = readdir(dd)) != NULL) {
            if (!dt_endswith(de->d_name, ".mtx") && !dt_endswith(de->d_name, ".smtx"))
                continue;
            if (nn == nc) {
                nc = nc ? 2 * nc : 32;
                names = dt_xrealloc(names, (size_t)nc * sizeof *names);
            }
            names[nn++] = dt_xasprintf("%s%s", subs[s], de->d_name);
        }
        closedir(dd);
        /* name order, so runs are comparable */
        for (int i = 1; i < nn; i++)
            for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                char *t = names[j];
                names[j] = names[j - 1];
                names[j - 1] = t;
            }
        for (int i = 0; i < nn; i++) {
            if (n == cap) {
                cap = cap ? 2 * cap : 64;
                *out = dt_xrealloc(*out, (size_t)cap * sizeof **out);
            }
            (*out)[n++] = dt_xasprintf("%s/%s", dir, names[i]);
            free(names[i]);
        }
        free(names);
        free(d);
    }
    return n;
}

static const char *base_name(const char *p)
{
    const char *dl = strstr(p, "dlmc/");
    if (dl)
        return dl;
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static void stats(const row *rows, int n, const char *regime, const char *op, double *geo,
                  double *mn, double *mx, int *count, int *failed, int *slower, double *tune_s)
{
    double lsum = 0;
    *count = 0;
    *failed = 0;
    *slower = 0;
    *tune_s = 0;
    *mn = 1e300;
    *mx = 0;
    for (int i = 0; i < n; i++) {
        if (strcmp(rows[i].regime, regime) != 0 || strcmp(rows[i].op, op) != 0)
            continue;
        if (*tune_s < rows[i].tune_s)
            *tune_s = rows[i].tune_s;
        if (!rows[i].ok) {
            (*failed)++;
            continue;
        }
        *slower += rows[i].cusparse_faster;
        lsum += log(rows[i].speedup);
        (*count)++;
        if (rows[i].speedup < *mn)
            *mn = rows[i].speedup;
        if (rows[i].speedup > *mx)
            *mx = rows[i].speedup;
    }
    *geo = *count ? exp(lsum / *count) : 0;
    if (*count == 0)
        *mn = 0;
}

/* The markdown goes between markers named by the section (the regime
 * unless --section says otherwise), so that a run of one regime, or of some
 * ops under their own section, leaves the other sections alone. */
static void write_outputs(const row *rows, int n, int planned, const char *out, const char *csv,
                          const cJSON *hello, const char *cmdline, const char *regime,
                          const char *section, const char *copy_note)
{
    char mbegin[96], mend[96], title[96];
    snprintf(mbegin, sizeof mbegin, "<!-- gpu-bench-%s:begin", section);
    snprintf(mend, sizeof mend, "<!-- gpu-bench-%s:end -->", section);
    if (strcmp(section, regime) == 0)
        snprintf(title, sizeof title, "regime: %s", regime);
    else
        snprintf(title, sizeof title, "regime: %s, section %s", regime, section);
    dt_err e = {0};
    /* CSV */
    dt_buf c = DT_BUF_INIT;
    dt_buf_puts(&c, "regime,matrix,op,nnz,status,strategy,params,us,cusparse_alg,cusparse_us,"
                    "speedup,gbps,pct_copy_bw,preprocess_us,cusparse_preprocess_us,method,tune_s,"
                    "cusparse_faster,strategies\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        char params[200];
        snprintf(params, sizeof params, "%s", r->params);
        /* A generator spec's commas: the name quoted, CSV-style. */
        char mq[2 * sizeof r->matrix + 3];
        if (strpbrk(r->matrix, ",\"") != NULL) {
            size_t w = 0;
            mq[w++] = '"';
            for (const char *q = r->matrix; *q; q++) {
                if (*q == '"')
                    mq[w++] = '"';
                mq[w++] = *q;
            }
            mq[w++] = '"';
            mq[w] = '\0';
        } else {
            snprintf(mq, sizeof mq, "%s", r->matrix);
        }
        for (char *p = params; *p; p++)
            if (*p == ',')
                *p = ';';
        if (r->ok)
            dt_buf_printf(&c,
                          "%s,%s,%s,%.0f,verified,%s,%s,%.3f,%s,%.3f,%.4f,%.1f,%.1f,%.1f,%.1f,%s,"
                          "%.1f,%d,%s\n",
                          r->regime, mq, r->op, r->nnz, r->strategy, params, r->us, r->base_alg,
                          r->base_us, r->speedup, r->gbps, r->pct_copy, r->pre_us, r->base_pre_us,
                          r->method, r->tune_s, r->cusparse_faster, r->strats);
        else
            dt_buf_printf(&c, "%s,%s,%s,%.0f,failed,,,,,,,,,,,,%.1f,,%s\n", r->regime, mq, r->op,
                          r->nnz, r->tune_s, r->strats);
    }
    if (dt_write_file_atomic(csv, c.data, c.len, &e) != 0)
        fprintf(stderr, "ditto bench: %s\n", e.msg);
    dt_buf_free(&c);
    /* Markdown section */
    const cJSON *dev = cJSON_GetObjectItem(hello, "device");
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d", gmtime(&now));
    dt_buf m = DT_BUF_INIT;
    dt_buf_printf(&m,
                  "%s (written by `ditto bench`; do not edit by hand) -->\n"
                  "## GPU (%s): ditto's kernels against the best cuSPARSE algorithm\n\n"
                  "Measured %s on %s (cc %s, %d SMs), CUDA driver API %d.%d, CUDA %s, with:\n\n"
                  "    %s\n\n"
                  "Each case: the expert planner ranks the templates, the tuner tries their "
                  "parameter variants (cheap timings, then the finalists re-verified with the "
                  "full battery and measured in full), and the fastest verified kernel is timed "
                  "side by side with every applicable cuSPARSE algorithm with the same method: "
                  "CUDA events around the launch only, the stream held until the whole sample "
                  "is enqueued, warm-up, median of at least 20 runs and "
                  "50 ms; `graph` = CUDA-graph replay of 50 launches (original sizes, "
                  "L2-resident), `cold` = L2 flushed before every run (HBM regime: replicated "
                  "block-diagonally to 32M nonzeros). The two us columns are each side's own "
                  "median; speedup is paired: ditto's kernel and the best cuSPARSE algorithm "
                  "timed again in alternating rounds, the median of the per-round ratios "
                  "(cuSPARSE / ditto), for graph timing the median over 7 placements of both "
                  "sides' operands in memory (gpu/PROTOCOL.md, `measure`). Every timed "
                  "launch is observable: before each sample, outside the events, the inputs "
                  "rotate between two sets and the output is re-seeded; graph replay refills "
                  "the output before every launch and subtracts a replay of the refills alone "
                  "(both sides alike); sampled outputs are checked against their references. "
                  "%% copy = "
                  "effective bandwidth over the minimum bytes (CSR with 4-byte columns) / "
                  "device-to-device copy bandwidth (%s), so a format that stores fewer "
                  "bytes (16-bit column offsets, a value dictionary) can pass 100. Payoff = "
                  "calls after which ditto's format "
                  "conversion is paid back by the per-call saving (\"-\" when there is none to "
                  "pay back or no saving).\n\n",
                  mbegin, title, date, dt_json_str(dev, "name", "?"), dt_json_str(dev, "cc", "?"),
                  dt_json_int(dev, "sms", 0), dt_json_int(hello, "driver_version", 0) / 1000,
                  dt_json_int(hello, "driver_version", 0) % 1000 / 10,
                  dt_json_str(hello, "cuda_version", "?"), cmdline, copy_note);
    if (n < planned)
        dt_buf_printf(&m,
                      "**Partial run:** %d of the %d planned cases ran before the run stopped "
                      "(the section is rewritten after every case); the other %d are in "
                      "neither table.\n\n",
                      n, planned, planned - n);
    dt_buf_puts(&m, "### Summary (speedup over the best cuSPARSE algorithm)\n\n"
                    "`cuSPARSE faster`: verified cases where no generated kernel beat the best "
                    "cuSPARSE algorithm (their ratio, below 1, is in the geomean; ditto's "
                    "result names the cuSPARSE algorithm to call there). `tune s max`: the "
                    "longest tuning of a case.\n\n"
                    "| op | regime | cases | geomean | min | max | failed | cuSPARSE faster | "
                    "tune s max |\n"
                    "|---|---|---|---|---|---|---|---|---|\n");
    const char *regs[] = {"orig", "hbm"};
    for (size_t o = 0; o < DT_ARRAY_LEN(all_ops); o++)
        for (int g = 0; g < 2; g++) {
            double geo, mn, mx, tmax;
            int cnt, failed, slower;
            stats(rows, n, regs[g], all_ops[o].name, &geo, &mn, &mx, &cnt, &failed, &slower, &tmax);
            if (cnt + failed == 0)
                continue;
            dt_buf_printf(&m, "| %s | %s | %d | %.2fx | %.2fx | %.2fx | %d | %d | %.1f |\n",
                          all_ops[o].name, regs[g], cnt, geo, mn, mx, failed, slower, tmax);
        }
    dt_buf_puts(&m, "\n### Every case\n\n"
                    "| regime | matrix | op | nnz | ditto kernel | us | cuSPARSE | us | speedup | "
                    "GB/s | % copy | preprocess us | payoff calls | method | tune s |\n"
                    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; i++) {
        const row *r = &rows[i];
        if (!r->ok) {
            dt_buf_printf(&m, "| %s | %s | %s | %.0f | failed: %s | | | | | | | | | | %.1f |\n",
                          r->regime, r->matrix, r->op, r->nnz, r->why, r->tune_s);
            continue;
        }
        char payoff[32] = "-";
        double saving = r->base_us - r->us;
        if (r->pre_us > 0 && saving > 0)
            snprintf(payoff, sizeof payoff, "%.0f", ceil(r->pre_us / saving));
        dt_buf_printf(&m,
                      "| %s | %s | %s | %.0f | %s %s | %.2f | %s%s | %.2f | %.2fx | %.0f | %.0f | "
                      "%.0f | %s | %s | %.1f |\n",
                      r->regime, r->matrix, r->op, r->nnz, r->strategy, r->params, r->us,
                      r->base_alg, r->cusparse_faster ? " (faster: call it)" : "", r->base_us,
                      r->speedup, r->gbps, r->pct_copy, r->pre_us, payoff, r->method, r->tune_s);
    }
    dt_buf_printf(&m, "%s\n", mend);
    /* splice into the document */
    size_t len = 0;
    char *doc = dt_read_file(out, &len, NULL);
    dt_buf d = DT_BUF_INIT;
    const char *b = doc ? strstr(doc, mbegin) : NULL;
    const char *en = doc ? strstr(doc, mend) : NULL;
    if (doc && b && en) {
        dt_buf_append(&d, doc, (size_t)(b - doc));
        dt_buf_puts(&d, m.data);
        const char *rest = en + strlen(mend);
        if (*rest == '\n')
            rest++;
        dt_buf_puts(&d, rest);
    } else {
        if (doc)
            dt_buf_puts(&d, doc);
        else
            dt_buf_puts(&d, "# Performance\n\nEvery number here was measured by the command "
                            "named beside it.\n");
        dt_buf_puts(&d, "\n");
        dt_buf_puts(&d, m.data);
    }
    if (dt_write_file_atomic(out, d.data, d.len, &e) != 0)
        fprintf(stderr, "ditto bench: %s\n", e.msg);
    free(doc);
    dt_buf_free(&d);
    dt_buf_free(&m);
}

/* Every tuned strategy's speedup as "name=1.23;name=0.98" (0 for one
 * without a verified result; an estimate for one not compared with
 * cuSPARSE): the CSV's strategies column, which `ditto kb fit` reads. */
static void strategy_speedups(const cJSON *res, char *out, size_t len)
{
    size_t at = 0;
    out[0] = '\0';
    const cJSON *so;
    cJSON_ArrayForEach(so, cJSON_GetObjectItem(res, "strategies"))
    {
        const cJSON *b = cJSON_GetObjectItem(so, "best");
        /* one not compared with cuSPARSE (far behind the fastest) gives
         * its estimate: its full time against the compared ones' cuSPARSE */
        double sp = dt_json_num(b, "speedup", 0);
        if (sp <= 0)
            sp = dt_json_num(b, "speedup_estimated", 0);
        int n = snprintf(out + at, len - at, "%s%s=%.4f", at ? ";" : "",
                         dt_json_str(so, "strategy", "?"), sp);
        if (n < 0 || (size_t)n >= len - at) {
            out[at] = '\0'; /* the last one did not fit: leave it out whole */
            return;
        }
        at += (size_t)n;
    }
}

/* Under each case, how every tuned strategy ended: its best verified
 * variant's time, or why it has none (the first error of its variants).
 * What the one-line case summary cannot say when a strategy that usually
 * wins was not the one kept. */
static void print_strategies(const cJSON *res)
{
    const cJSON *so, *v;
    cJSON_ArrayForEach(so, cJSON_GetObjectItem(res, "strategies"))
    {
        const cJSON *b = cJSON_GetObjectItem(so, "best");
        const char *name = dt_json_str(so, "strategy", "?");
        if (b) {
            char *ps = dt_json_print(cJSON_GetObjectItem(b, "params"), 0);
            int est = cJSON_IsFalse(cJSON_GetObjectItem(b, "compared"));
            printf("        %-22s %9.2f us  %s%.2fx  %s%s\n", name, dt_json_num(b, "us", 0),
                   est ? "~" : "", dt_json_num(b, est ? "speedup_estimated" : "speedup", 0), ps,
                   est ? "  (not compared: more than 10% behind the fastest)" : "");
            free(ps);
            continue;
        }
        const char *why = NULL;
        cJSON_ArrayForEach(v, cJSON_GetObjectItem(so, "variants"))
        {
            if (why == NULL)
                why = dt_json_str(v, "error", NULL);
        }
        printf("        %-22s %s%s%s\n", name, dt_json_str(so, "status", "no result"),
               why ? ": " : "", why ? why : "");
    }
}

/* path ends with name, or with name and ".gz" (a compressed copy). */
static int ends_as(const char *path, const char *name)
{
    if (dt_endswith(path, name))
        return 1;
    size_t n = strlen(path);
    return n > 3 && dt_endswith(path, ".gz") && n - 3 >= strlen(name) &&
           strncmp(path + n - 3 - strlen(name), name, strlen(name)) == 0;
}

static int bench_cmd(int argc, char **argv);

int cli_bench(int argc, char **argv)
{
    return cli_with_stdin_matrix("bench", argc, argv, bench_cmd);
}

static int bench_cmd(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("bench");
    const char *dir = getenv("DITTO_MATRICES");
    if (dir == NULL || *dir == '\0')
        dir = "../shared/matrices";
    const char *more_dirs[8], *part = NULL, *split = "knowledge/corpus-split.tsv";
    int nmore = 0, dir_given = 0;
    const char *ops_arg = NULL, *regime = "both", *hbm_arg = "8", *out = "docs/PERFORMANCE.md",
               *csv = NULL, *section = NULL;
    int strategies = 3, variants = 12, finalists = 2, workers = 1, verbose = 0, refine = -1;
    int64_t hbm_nnz = 32000000;
    char **mats = dt_xcalloc((size_t)argc + 1, sizeof *mats);
    int nm = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && strcmp(a, "--matrices-dir") == 0) {
            /* the first replaces the default, the others add to it */
            if (!dir_given) {
                dir = argv[++i];
                dir_given = 1;
            } else if (nmore < 8) {
                more_dirs[nmore++] = argv[++i];
            } else {
                free(mats);
                return cli_usage_error("bench", "--matrices-dir: at most 9 folders");
            }
        } else if (v && strcmp(a, "--part") == 0)
            part = argv[++i];
        else if (v && strcmp(a, "--split") == 0)
            split = argv[++i];
        else if (v && strcmp(a, "--ops") == 0)
            ops_arg = argv[++i];
        else if (v && strcmp(a, "--regime") == 0)
            regime = argv[++i];
        else if (v && strcmp(a, "--hbm-matrices") == 0)
            hbm_arg = argv[++i];
        else if (v && strcmp(a, "--hbm-nnz") == 0) {
            if (dt_parse_size(argv[++i], &hbm_nnz) != 0 || hbm_nnz < 1) {
                free(mats);
                return cli_usage_error("bench", "--hbm-nnz: expected a size such as 32M");
            }
        } else if (v && strcmp(a, "--strategies") == 0)
            strategies = atoi(argv[++i]);
        else if (v && strcmp(a, "--variants") == 0)
            variants = atoi(argv[++i]);
        else if (v && strcmp(a, "--refine") == 0) {
            char *end = NULL;
            long r = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || r < 0 || r > 1000) {
                free(mats);
                return cli_usage_error("bench", "--refine: expected a count from 0 to 1000");
            }
            refine = (int)r;
        } else if (v && strcmp(a, "--finalists") == 0)
            finalists = atoi(argv[++i]);
        else if (v && strcmp(a, "--workers") == 0)
            workers = atoi(argv[++i]);
        else if (v && strcmp(a, "--out") == 0)
            out = argv[++i];
        else if (v && strcmp(a, "--csv") == 0)
            csv = argv[++i];
        else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0)
            verbose = 1;
        else if (v && strcmp(a, "--section") == 0) {
            section = argv[++i];
            int okname = *section != '\0' && strlen(section) <= 40;
            for (const char *q = section; *q && okname; q++)
                okname = isalnum((unsigned char)*q) || *q == '-' || *q == '_';
            if (!okname) {
                free(mats);
                return cli_usage_error("bench", "--section: expected up to 40 letters, digits, "
                                                "'-' or '_' (it names the markers and the CSV)");
            }
        } else if (a[0] == '-' && a[1]) {
            free(mats);
            return cli_usage_error("bench", "unknown option '%s'", a);
        } else
            mats[nm++] = dt_xstrdup(a);
    }
    for (int i = 0; i < nm; i++) {
        if (cli_matrix_missing("bench", mats[i])) {
            for (int j = 0; j < nm; j++)
                free(mats[j]);
            free(mats);
            return CLI_NOT_FOUND;
        }
    }
    if (strcmp(regime, "orig") != 0 && strcmp(regime, "hbm") != 0 && strcmp(regime, "both") != 0) {
        free(mats);
        return cli_usage_error("bench", "--regime: expected orig, hbm or both");
    }
    if (strategies < 1 || variants < 1 || finalists < 1 || workers < 1) {
        free(mats);
        return cli_usage_error("bench", "--strategies, --variants, --finalists and --workers "
                                        "must be at least 1");
    }
    const bop *ops[DT_ARRAY_LEN(all_ops)];
    int nops = 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(all_ops); i++) {
        if (ops_arg == NULL) {
            ops[nops++] = &all_ops[i];
            continue;
        }
        char *copy = dt_xstrdup(ops_arg), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (strcmp(t, all_ops[i].name) == 0)
                ops[nops++] = &all_ops[i];
        free(copy);
    }
    if (nops == 0) {
        free(mats);
        return cli_usage_error("bench",
                               "--ops: none of '%s' is an op (spmv-fp32, spmv-fp64, "
                               "spmm-n32, spmm-n128, sddmm-k32, sddmm-k128)",
                               ops_arg);
    }
    char **listed = NULL;
    if (nm == 0) {
        free(mats);
        nm = list_matrices(dir, &listed);
        for (int d = 0; d < nmore; d++) {
            char **extra = NULL;
            int ne = list_matrices(more_dirs[d], &extra);
            listed = dt_xrealloc(listed, (size_t)(nm + ne + 1) * sizeof *listed);
            for (int i = 0; i < ne; i++)
                listed[nm++] = extra[i];
            free(extra);
        }
        mats = listed;
        if (nm == 0) {
            fprintf(stderr,
                    "ditto bench: no .mtx or dlmc/*.smtx files in %s%s (give matrices or "
                    "--matrices-dir)\n",
                    dir, nmore ? " and the other --matrices-dir folders" : "");
            free(mats);
            return CLI_FAIL;
        }
    }
    if (part != NULL) {
        /* Only the matrices the split puts in that part; one it does not
         * list is named and left out. */
        dt_err se = {0};
        cJSON *sp = ag_split_read(split, &se);
        if (sp == NULL) {
            fprintf(stderr, "ditto bench: --part: %s\n", se.msg);
            for (int i = 0; i < nm; i++)
                free(mats[i]);
            free(mats);
            return CLI_FAIL;
        }
        int kept = 0, unlisted = 0;
        for (int i = 0; i < nm; i++) {
            const char *p = dt_json_str(sp, base_name(mats[i]), NULL);
            if (p != NULL && dt_streq(p, part)) {
                mats[kept++] = mats[i];
                continue;
            }
            if (p == NULL && unlisted++ < 5)
                fprintf(stderr, "ditto bench: %s is not in %s: left out of --part %s\n",
                        base_name(mats[i]), split, part);
            free(mats[i]);
        }
        cJSON_Delete(sp);
        nm = kept;
        if (nm == 0) {
            free(mats);
            return cli_usage_error("bench", "--part %s: no matrix of %s is in that part", part,
                                   split);
        }
        printf("part %s of %s: %d matrices\n", part, split, nm);
    }
    /* The HBM subset. */
    int *hbm = dt_xcalloc((size_t)nm, sizeof *hbm);
    char *endp;
    long hcount = strtol(hbm_arg, &endp, 10);
    if (*endp == '\0') {
        int picked = 0;
        for (size_t d = 0; d < DT_ARRAY_LEN(hbm_default) && picked < hcount; d++)
            for (int i = 0; i < nm; i++)
                if (ends_as(mats[i], hbm_default[d]) && !hbm[i]) {
                    hbm[i] = 1;
                    picked++;
                    break;
                }
        for (int i = 0; i < nm && picked < hcount; i++)
            if (!hbm[i]) {
                hbm[i] = 1;
                picked++;
            }
    } else {
        /* A name is the end of a matrix's path, with or without its
         * extension (bcsstk13, bcsstk13.mtx, dlmc/rn50...); one that names
         * none of the matrices is an error, not a run without those cases. */
        char *copy = dt_xstrdup(hbm_arg), *save = NULL;
        for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int found = 0;
            char *mtx = dt_xasprintf("%s.mtx", t), *smtx = dt_xasprintf("%s.smtx", t);
            for (int i = 0; i < nm; i++)
                if (ends_as(mats[i], t) || ends_as(mats[i], mtx) || ends_as(mats[i], smtx)) {
                    hbm[i] = 1;
                    found = 1;
                }
            free(mtx);
            free(smtx);
            if (!found) {
                cli_usage_error("bench",
                                "--hbm-matrices: '%s' names none of the %d matrices (%s%s)", t, nm,
                                nm > 0 ? mats[0] : "none", nm > 1 ? ", ..." : "");
                free(copy);
                free(hbm);
                for (int i = 0; i < nm; i++)
                    free(mats[i]);
                free(mats);
                return CLI_USAGE;
            }
        }
        free(copy);
    }
    if (section == NULL)
        section = regime;
    char csv_default[96];
    if (csv == NULL) {
        snprintf(csv_default, sizeof csv_default, "docs/bench-%s.csv", section);
        csv = csv_default;
    }
    dt_buf cmdline = DT_BUF_INIT;
    dt_buf_puts(&cmdline, "ditto");
    for (int i = 0; i < argc; i++)
        dt_buf_printf(&cmdline, " %s", argv[i]);

    dt_loop *loop = dt_loop_new();
    gpu_pool_opts po = {.workers = workers, .deadline_s = 900};
    dt_err e = {0};
    gpu_pool *pool = gpu_pool_new(loop, &po, &e);
    int status = CLI_FAIL;
    row *rows = NULL;
    int nrows = 0, caprows = 0;
    kb *k = NULL;
    if (pool == NULL || gpu_pool_wait_ready(pool, 60) < 1) {
        fprintf(stderr, "ditto bench: the GPU worker did not start %s\n", e.msg);
        status = 3;
        goto out;
    }
    const cJSON *hello = gpu_pool_hello(pool, 0);
    const cJSON *dev = cJSON_GetObjectItem(hello, "device");
    if (!dt_json_bool(dev, "present", 0)) {
        fprintf(stderr, "ditto bench: needs a GPU: %s\n", dt_json_str(dev, "reason", "?"));
        status = 3;
        goto out;
    }
    /* % copy divides by a measured copy bandwidth: the hardware spec's
     * measured block when `ditto calibrate` has filled it, else one measured
     * now, before any case (the calibrate request, which also saves it
     * there). Only if that fails, the datasheet's peak, and the section says
     * so. */
    double copy_gbps = dt_json_num(hello, "copy_gbps", 0);
    char copy_note[256];
    if (dt_json_bool(hello, "copy_measured", 0)) {
        snprintf(copy_note, sizeof copy_note,
                 "%.0f GB/s, from the hardware spec's measured block, `ditto calibrate`",
                 copy_gbps);
    } else {
        cJSON *cal = dt_json_obj();
        dt_json_set_str(cal, "req", "calibrate");
        cJSON *crep = gpu_pool_call(pool, cal, 120);
        if (dt_json_bool(crep, "ok", 0) && dt_json_num(crep, "copy_gbps", 0) > 0) {
            copy_gbps = dt_json_num(crep, "copy_gbps", 0);
            snprintf(copy_note, sizeof copy_note,
                     "%.0f GB/s, measured at the start of this run: a %.0f MiB "
                     "cuMemcpyDtoD, bytes read plus bytes written",
                     copy_gbps, dt_json_num(crep, "copy_bytes", 0) / (1 << 20));
        } else {
            char buf[600];
            fprintf(stderr,
                    "ditto bench: could not measure the copy bandwidth (%s); %% copy divides by "
                    "the datasheet's %.0f GB/s\n",
                    gpu_reply_error(crep, buf, sizeof buf), copy_gbps);
            snprintf(copy_note, sizeof copy_note,
                     "%.0f GB/s, the datasheet's peak: measuring it failed", copy_gbps);
        }
        cJSON_Delete(crep);
    }
    printf("copy bandwidth %s\n", copy_note);
    k = kb_open(NULL, NULL, NULL, &e);
    double t_start = dt_now();
    /* Every (regime, matrix, op) is a case; a section written before the
     * last of them says it is partial. */
    int planned = 0;
    for (int g = 0; g < 2; g++)
        if (strcmp(regime, "both") == 0 || strcmp(regime, g == 0 ? "orig" : "hbm") == 0)
            for (int i = 0; i < nm; i++)
                planned += g == 1 && !hbm[i] ? 0 : nops;
    printf("%-5s %-44s %-10s %10s %-30s %9s %-16s %9s %8s %6s\n", "reg", "matrix", "op", "nnz",
           "ditto kernel", "us", "cuSPARSE", "us", "speedup", "wall");
    for (int g = 0; g < 2; g++) {
        const char *reg = g == 0 ? "orig" : "hbm";
        if (strcmp(regime, "both") != 0 && strcmp(regime, reg) != 0)
            continue;
        for (int i = 0; i < nm; i++) {
            if (g == 1 && !hbm[i])
                continue;
            char *src = g == 0 ? dt_xstrdup(mats[i])
                               : dt_xasprintf("rep:%s:nnz=%lld", mats[i], (long long)hbm_nnz);
            cJSON *lr = dt_json_obj();
            dt_json_set_str(lr, "matrix", src);
            cJSON *lrep = gpu_pool_load(pool, "m", lr, 900);
            free(src);
            if (!dt_json_bool(lrep, "ok", 0)) {
                /* Its cases show as failed, with the reason, not as missing. */
                char buf[1200];
                gpu_reply_error(lrep, buf, sizeof buf);
                fprintf(stderr, "ditto bench: %s: %s\n", mats[i], buf);
                for (int o = 0; o < nops; o++) {
                    row *r = add_row(&rows, &nrows, &caprows);
                    snprintf(r->regime, sizeof r->regime, "%s", reg);
                    snprintf(r->matrix, sizeof r->matrix, "%s", base_name(mats[i]));
                    snprintf(r->op, sizeof r->op, "%s", ops[o]->name);
                    snprintf(r->why, sizeof r->why, "the matrix did not load: %s", buf);
                    for (char *p = r->why; *p; p++)
                        if (*p == '|' || *p == '\n')
                            *p = ' ';
                }
                write_outputs(rows, nrows, planned, out, csv, hello, cmdline.data, regime, section,
                              copy_note);
                cJSON_Delete(lrep);
                continue;
            }
            const cJSON *rep = cJSON_GetObjectItem(lrep, "report");
            for (int o = 0; o < nops; o++) {
                sp_spec spec;
                sp_spec_init(&spec);
                spec.op = ops[o]->op;
                spec.dtype = ops[o]->dtype;
                spec.n = ops[o]->n;
                spec.matrix = dt_xstrdup(mats[i]);
                row *r = add_row(&rows, &nrows, &caprows);
                double t_case = dt_now();
                snprintf(r->regime, sizeof r->regime, "%s", reg);
                snprintf(r->matrix, sizeof r->matrix, "%s", base_name(mats[i]));
                snprintf(r->op, sizeof r->op, "%s", ops[o]->name);
                r->nnz = dt_json_num(rep, "nnz", 0);
                cJSON *tuned = NULL; /* the tuner's result, for the per-strategy lines */
                cJSON *cands = ag_rank_templates(rep, &spec, dt_json_str(dev, "cc", ""), k, &e);
                /* The ranking past the cut: where the quick timings lose to
                 * cuSPARSE, the tuner widens to these. */
                cJSON *more = cJSON_Duplicate(cands, 1);
                ag_candidates_cut(cands, strategies);
                if (cands == NULL || cJSON_GetArraySize(cands) == 0) {
                    snprintf(r->why, sizeof r->why, "no template fits");
                } else {
                    bench_ctx c = {.verbose = verbose};
                    ag_tune_opts to = {.pool = pool,
                                       .spec = &spec,
                                       .matrix = "m",
                                       .fingerprint = dt_json_str(lrep, "fingerprint", ""),
                                       .gpu = dt_json_str(dev, "name", ""),
                                       .candidates = cands,
                                       .more = more,
                                       .budget_variants = variants,
                                       .refine = refine < 0    ? 0
                                                 : refine == 0 ? -1
                                                               : refine,
                                       .budget_s = 600,
                                       .use_cache = 0,
                                       .max_finalists = finalists,
                                       .progress = b_progress,
                                       .done = b_done,
                                       .ud = &c};
                    ag_tuner *t = ag_tuner_start(&to, &e);
                    while (t && !c.done)
                        if (dt_loop_run_once(loop, 500) < 0)
                            break;
                    const cJSON *b = cJSON_GetObjectItem(c.res, "best");
                    if (b && dt_json_num(b, "speedup", 0) > 0) {
                        r->ok = 1;
                        snprintf(r->strategy, sizeof r->strategy, "%s",
                                 dt_json_str(b, "strategy", ""));
                        char *ps = dt_json_print(cJSON_GetObjectItem(b, "params"), 0);
                        snprintf(r->params, sizeof r->params, "%s", ps);
                        free(ps);
                        r->us = dt_json_num(b, "us", 0);
                        r->base_us = dt_json_num(b, "baseline_us", 0);
                        r->speedup = dt_json_num(b, "speedup", 0);
                        r->gbps = dt_json_num(b, "gbps", 0);
                        r->pct_copy = copy_gbps > 0 ? 100.0 * r->gbps / copy_gbps : 0;
                        r->pre_us = dt_json_num(b, "preprocess_us", 0);
                        r->base_pre_us = dt_json_num(b, "baseline_preprocess_us", 0);
                        snprintf(r->base_alg, sizeof r->base_alg, "%s",
                                 dt_json_str(b, "baseline", ""));
                        snprintf(r->method, sizeof r->method, "%s", dt_json_str(b, "method", ""));
                    } else {
                        /* the first error of any variant says why */
                        const cJSON *so, *v;
                        snprintf(r->why, sizeof r->why, "no variant passed verification");
                        cJSON_ArrayForEach(so, cJSON_GetObjectItem(c.res, "strategies"))
                            cJSON_ArrayForEach(
                                v, cJSON_GetObjectItem(so, "variants")) if (dt_json_str(v, "error",
                                                                                        NULL) &&
                                                                            r->why[0] == 'n')
                        {
                            snprintf(r->why, sizeof r->why, "%s: %s",
                                     dt_json_str(so, "strategy", ""), dt_json_str(v, "error", ""));
                        }
                        for (char *p = r->why; *p; p++)
                            if (*p == '|' || *p == '\n')
                                *p = ' ';
                    }
                    tuned = c.res;
                    ag_tuner_free(t);
                    strategy_speedups(tuned, r->strats, sizeof r->strats);
                    r->cusparse_faster = r->ok && dt_json_bool(tuned, "cusparse_faster", 0);
                }
                r->tune_s = dt_now() - t_case;
                cJSON_Delete(cands);
                cJSON_Delete(more);
                sp_spec_clear(&spec);
                if (r->ok)
                    printf(
                        "%-5s %-44.44s %-10s %10.0f %-30.30s %9.2f %-16s %9.2f %7.2fx %5.1fs%s\n",
                        r->regime, r->matrix, r->op, r->nnz, r->strategy, r->us, r->base_alg,
                        r->base_us, r->speedup, r->tune_s,
                        r->cusparse_faster ? "  cuSPARSE faster: call it" : "");
                else
                    printf("%-5s %-44.44s %-10s %10.0f FAILED: %s (%.1fs)\n", r->regime, r->matrix,
                           r->op, r->nnz, r->why, r->tune_s);
                if (tuned)
                    print_strategies(tuned);
                cJSON_Delete(tuned);
                fflush(stdout);
                /* Partial results survive a timeout of the caller. */
                write_outputs(rows, nrows, planned, out, csv, hello, cmdline.data, regime, section,
                              copy_note);
            }
            cJSON_Delete(lrep);
            gpu_pool_unload(pool, "m");
        }
    }
    printf("\n%-10s %-5s %6s %8s %8s %8s %7s %8s %10s\n", "op", "reg", "cases", "geomean", "min",
           "max", "failed", "cuSPARSE", "tune s max");
    for (int o = 0; o < nops; o++)
        for (int g = 0; g < 2; g++) {
            double geo, mn, mx, tmax;
            int cnt, failed, slower;
            stats(rows, nrows, g ? "hbm" : "orig", ops[o]->name, &geo, &mn, &mx, &cnt, &failed,
                  &slower, &tmax);
            if (cnt + failed)
                printf("%-10s %-5s %6d %7.2fx %7.2fx %7.2fx %7d %8d %10.1f\n", ops[o]->name,
                       g ? "hbm" : "orig", cnt, geo, mn, mx, failed, slower, tmax);
        }
    printf("bench: %d cases in %.0f s; wrote %s and %s\n", nrows, dt_now() - t_start, out, csv);
    status = CLI_OK;
out:
    kb_close(k);
    free(rows);
    gpu_pool_free(pool);
    dt_loop_free(loop);
    dt_buf_free(&cmdline);
    for (int i = 0; i < nm; i++)
        free(mats[i]);
    free(mats);
    free(hbm);
    return status;
}
