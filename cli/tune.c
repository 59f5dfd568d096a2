/* tune.c -- `ditto tune SPEC`: tune every fitting template on a problem
 * through the worker pool and print each strategy's best verified variant
 * next to the best cuSPARSE algorithm. */
#include "agents/agents.h"
#include "cli/cli.h"
#include "gpu/gpu.h"
#include "hardware/hardware.h"
#include "knowledge/knowledge.h"

#include <stdlib.h>
#include <string.h>

const char cli_tune_usage[] =
    "usage: ditto tune SPEC.json [--strategies N] [--variants N] [--refine N] [--seconds S]\n"
    "                  [--out DIR] [--workers N] [--launcher CMD] [--json] [--dry-run]\n"
    "                  [--compile-only]\n"
    "\n"
    "Rank the kernel templates for the problem by the approved rules, then tune the first N\n"
    "(default: all that fit; when none of the first N is safe for skewed rows -- merge-path,\n"
    "seg16, csr-adaptive, csr-split-spmm, csr-nnz-sddmm, coo-sddmm -- the first safe one\n"
    "is tuned too, and the ranking itself always has one in its first three) by\n"
    "successive halving: a cheap timing of every legal variant\n"
    "(--variants per strategy, default 24), then the full verification battery and a full\n"
    "measurement for the best third (past the two fastest, only those within 3% of the\n"
    "fastest quick timing), then each strategy's fastest timed next to every cuSPARSE\n"
    "algorithm -- unless more than 10% behind the fastest strategy (the fastest of each SpMM\n"
    "layout always is): its speedup is then an estimate, printed with ~. Prints each\n"
    "strategy's best variant\n"
    "(time, GB/s, GFLOP/s, speedup, verification) and writes the best kernel and its\n"
    "launch contract to DIR (default: the current folder). Needs a GPU. With --strategies,\n"
    "when every quick timing loses to cuSPARSE's (timed with the first), the next two\n"
    "strategies of the ranking are added, again while that holds and half of --seconds\n"
    "lasts. Where no kernel beats cuSPARSE in the end, the result says so and names the\n"
    "cuSPARSE algorithm to call.\n"
    "\n"
    "The variants of a strategy, in the order they are measured: the planner's point, the\n"
    "values the rules name, the space's first and middle points, the template's defaults,\n"
    "then one parameter moved one step at a time, then an even spread. A variant the worker\n"
    "finds to be the same kernel and launch as an earlier one (the same CUBIN, grid, block\n"
    "and format: at N=32 an SpMM tile of 64 or 128 columns is the one 32-column tile) is\n"
    "set aside after its quick timing and the next point of the list, up to three times\n"
    "--variants, is measured in its place. Then refinement, a local search: the points one\n"
    "step from the strategy's fastest quick timing along each parameter of its space (the\n"
    "values in ascending order), a step of every parameter before a second step of any,\n"
    "--refine of them or one per parameter, whichever is more (default: half of\n"
    "--variants; 0: none), timed the same way; a second round from the new fastest point\n"
    "where the first found one. --dry-run prints the ranking and the variants chosen\n"
    "before any timing, without a GPU (the matrix is profiled here; rules for one compute\n"
    "capability when the spec names a GPU, for every one when it says auto).\n"
    "\n"
    "--workers and --launcher default to config.json's \"workers\": {\"count\", \"launcher\"}\n"
    "(README: workers on a Slurm cluster or over ssh). Compiles go to any worker, for the\n"
    "timing GPU's architecture; timings to workers whose GPU is the target's model (with\n"
    "none named, the first timing worker's), one at a time per GPU. A cubin compiled on\n"
    "one host is sent, checked by hash, to workers on others instead of compiled again\n"
    "(\"ship\" in \"workers\"); the last lines count cache hits, compiles and cubins sent.\n"
    "A worker that dies is restarted (with a growing delay when it keeps dying) and its\n"
    "job retried once on another worker; a compile that hangs past its deadline is tried\n"
    "once more.\n"
    "--compile-only, for workers without a GPU: every variant is compiled and checked by\n"
    "the static rules, nothing is timed; each variant's line says compiled or why not,\n"
    "and the exit status is 0 only when every variant was compiled or refused by the\n"
    "compiler with its diagnostic (none lost).\n";

typedef struct tune_ctx {
    cJSON *result;
    int done;
    int json;
} tune_ctx;

static void on_progress(const char *line, void *ud)
{
    tune_ctx *c = ud;
    if (!c->json) {
        puts(line);
        fflush(stdout);
    }
}

static void on_done(cJSON *res, void *ud)
{
    tune_ctx *c = ud;
    c->result = res;
    c->done = 1;
}

/* --dry-run: the ranking and each strategy's variants, from a profile
 * computed here; no worker, no GPU. */
static int dry_run(const sp_spec *spec, int nstrat, int variants, int json)
{
    int status = CLI_FAIL;
    dt_err e = {0};
    char cc[16] = "";
    if (spec->gpu && *spec->gpu && strcmp(spec->gpu, "auto") != 0) {
        hw_spec *g = hw_load(spec->gpu, &e);
        if (g == NULL) {
            fprintf(stderr, "ditto tune: %s\n", e.msg);
            return CLI_FAIL;
        }
        snprintf(cc, sizeof cc, "%d.%d", g->cc_major, g->cc_minor);
        hw_spec_free(g);
    }
    sp_read_opts ro = {0};
    sp_csr *a = sp_load(spec->matrix, &ro, &e);
    if (a == NULL) {
        fprintf(stderr, "ditto tune: %s\n", e.msg);
        return CLI_FAIL;
    }
    sp_report r;
    cJSON *rep = NULL, *cands = NULL, *out = NULL;
    kb *k = NULL;
    if (sp_report_compute(a, spec->n, spec->n, &r, &e) != 0) {
        fprintf(stderr, "ditto tune: %s\n", e.msg);
        goto done;
    }
    rep = sp_report_json(&r);
    dt_buf probs = DT_BUF_INIT;
    k = kb_open(NULL, NULL, &probs, &e);
    dt_buf_free(&probs);
    cands = ag_rank_templates(rep, spec, cc, k, &e);
    if (cands == NULL || cJSON_GetArraySize(cands) == 0) {
        fprintf(stderr, "ditto tune: no template fits %s %s%s%s\n", sp_op_name(spec->op),
                sp_dtype_name(spec->dtype), e.msg[0] ? ": " : "", e.msg);
        goto done;
    }
    if (nstrat > 0)
        ag_candidates_cut(cands, nstrat);
    out = dt_json_arr();
    if (!json) {
        printf("%s %s on %s, rules for %s%s: %d strateg%s, up to %d variants each "
               "(dry run: nothing compiled or timed)\n",
               sp_op_name(spec->op), sp_dtype_name(spec->dtype), spec->matrix,
               cc[0] ? "compute capability " : "every compute capability", cc,
               cJSON_GetArraySize(cands), cJSON_GetArraySize(cands) == 1 ? "y" : "ies", variants);
        int place = 0;
        const cJSON *sc = NULL;
        cJSON_ArrayForEach(sc, cands)
        {
            place++;
            if (dt_json_bool(sc, "skew_safe", 0))
                break;
        }
        if (sc != NULL)
            printf("safe for skewed rows: %s (place %d)\n", dt_json_str(sc, "strategy", ""), place);
        else
            printf("safe for skewed rows: none of the templates that fit\n");
    }
    const cJSON *c;
    cJSON_ArrayForEach(c, cands)
    {
        cJSON *why = dt_json_arr();
        cJSON *pts = ag_tune_variants(c, variants, why);
        if (json) {
            cJSON *o = cJSON_Duplicate(c, 1);
            dt_json_set_take(o, "variants", pts);
            dt_json_set_take(o, "why", why);
            cJSON_AddItemToArray(out, o);
            continue;
        }
        printf("\n%s (score %.1f%s)\n", dt_json_str(c, "strategy", ""), dt_json_num(c, "score", 0),
               dt_json_bool(c, "skew_safe", 0) ? ", safe for skewed rows" : "");
        const cJSON *w;
        cJSON_ArrayForEach(w, cJSON_GetObjectItem(c, "rationale"))
            printf("  %s%s%s\n", dt_json_str(w, "rule", "") ? dt_json_str(w, "rule", "") : "",
                   dt_json_str(w, "rule", NULL) ? ": " : "", dt_json_str(w, "text", ""));
        int i = 0;
        const cJSON *pt;
        cJSON_ArrayForEach(pt, pts)
        {
            char *ps = dt_json_print(pt, 0);
            const cJSON *wy = cJSON_GetArrayItem(why, i++);
            printf("  %3d %-60s %s\n", i, ps, cJSON_IsString(wy) ? wy->valuestring : "");
            free(ps);
        }
        cJSON_Delete(pts);
        cJSON_Delete(why);
    }
    if (json) {
        char *text = dt_json_print(out, 1);
        puts(text);
        free(text);
    }
    status = CLI_OK;
done:
    cJSON_Delete(out);
    cJSON_Delete(cands);
    cJSON_Delete(rep);
    kb_close(k);
    sp_csr_free(a);
    return status;
}

int cli_tune(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("tune");
    const char *specf = NULL, *out = ".", *launcher = NULL;
    int nstrat = 0, variants = 24, json = 0, workers = 0, dry = 0, refine = -1, conly = 0;
    double seconds = 300;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--strategies") == 0 && v) {
            nstrat = atoi(v);
            i++;
        } else if (strcmp(a, "--variants") == 0 && v) {
            variants = atoi(v);
            i++;
        } else if (strcmp(a, "--refine") == 0 && v) {
            char *end = NULL;
            long r = strtol(v, &end, 10);
            if (end == v || *end != '\0' || r < 0 || r > 1000)
                return cli_usage_error("tune", "--refine: expected a count from 0 to 1000");
            refine = (int)r;
            i++;
        } else if (strcmp(a, "--seconds") == 0 && v) {
            if (dt_parse_double(v, &seconds) != 0 || seconds <= 0)
                return cli_usage_error("tune", "--seconds: expected a positive number");
            i++;
        } else if (strcmp(a, "--workers") == 0 && v) {
            workers = atoi(v);
            i++;
        } else if (strcmp(a, "--out") == 0 && v) {
            out = v;
            i++;
        } else if (strcmp(a, "--launcher") == 0 && v) {
            launcher = v;
            i++;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--dry-run") == 0) {
            dry = 1;
        } else if (strcmp(a, "--compile-only") == 0) {
            conly = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error("tune", "unknown option '%s'", a);
        } else if (specf == NULL) {
            specf = a;
        } else {
            return cli_usage_error("tune", "unexpected argument '%s'", a);
        }
    }
    if (specf == NULL)
        return cli_usage_error("tune", "give a problem spec (JSON)");
    if (variants < 1 || workers < 0 || workers > 64)
        return cli_usage_error("tune", "--variants must be at least 1, --workers 1 to 64");
    sp_spec spec;
    sp_spec_init(&spec);
    dt_buf probs = DT_BUF_INIT;
    if (cli_file_missing("tune", specf)) {
        sp_spec_clear(&spec);
        return CLI_NOT_FOUND;
    }
    if (sp_spec_load(&spec, specf, &probs) != 0) {
        fputs(dt_buf_str(&probs), stderr);
        dt_buf_free(&probs);
        sp_spec_clear(&spec);
        return CLI_USAGE;
    }
    if (cli_check_spec_gpu("tune", specf, spec.gpu) != 0) {
        dt_buf_free(&probs);
        sp_spec_clear(&spec);
        return CLI_USAGE;
    }
    if (dry) {
        int rc = dry_run(&spec, nstrat, variants, json);
        dt_buf_free(&probs);
        sp_spec_clear(&spec);
        return rc;
    }
    int status = CLI_FAIL;
    cJSON *cfg = cli_config_load(&probs);
    if (probs.len) {
        fputs(probs.data, stderr);
        dt_buf_free(&probs);
        cJSON_Delete(cfg);
        sp_spec_clear(&spec);
        return CLI_USAGE;
    }
    const cJSON *wj = cJSON_GetObjectItem(cfg, "workers");
    dt_loop *loop = dt_loop_new();
    gpu_pool_opts po = {.workers = workers ? workers : (int)dt_json_num(wj, "count", 1),
                        .launcher = launcher ? launcher : dt_json_str(wj, "launcher", NULL),
                        .ship = cli_ship_mode(wj),
                        .deadline_s = 600};
    dt_err e = {0};
    gpu_pool *pool = gpu_pool_new(loop, &po, &e);
    cJSON *lrep = NULL, *cands = NULL, *more = NULL;
    kb *k = NULL;
    tune_ctx c = {.json = json};
    ag_tuner *t = NULL;
    if (pool == NULL || gpu_pool_wait_ready(pool, 60) < 1) {
        fprintf(stderr, "ditto tune: the GPU worker did not start%s%s\n", e.msg[0] ? ": " : "",
                e.msg);
        status = 3;
        goto out;
    }
    const cJSON *dev = cJSON_GetObjectItem(gpu_pool_hello(pool, 0), "device");
    if (!dt_json_bool(dev, "present", 0) && !conly) {
        fprintf(stderr,
                "ditto tune: tuning needs a GPU: %s (--compile-only compiles and checks "
                "every variant without one)\n",
                dt_json_str(dev, "reason", "?"));
        status = 3;
        goto out;
    }
    cJSON *lr = dt_json_obj();
    dt_json_set_str(lr, "matrix", spec.matrix);
    dt_json_set_int(lr, "n", spec.n);
    dt_json_set_int(lr, "k", spec.n);
    lrep = gpu_pool_load(pool, "m", lr, 900);
    if (!dt_json_bool(lrep, "ok", 0)) {
        char buf[1200];
        fprintf(stderr, "ditto tune: %s\n", gpu_reply_error(lrep, buf, sizeof buf));
        goto out;
    }
    k = kb_open(NULL, NULL, &probs, &e);
    cands = ag_rank_templates(cJSON_GetObjectItem(lrep, "report"), &spec,
                              dt_json_str(dev, "cc", ""), k, &e);
    if (cands == NULL || cJSON_GetArraySize(cands) == 0) {
        fprintf(stderr, "ditto tune: no template fits %s %s%s%s\n", sp_op_name(spec.op),
                sp_dtype_name(spec.dtype), e.msg[0] ? ": " : "", e.msg);
        goto out;
    }
    more = cJSON_Duplicate(cands, 1); /* to widen to past the cut */
    if (nstrat > 0)
        ag_candidates_cut(cands, nstrat);
    if (!json) {
        printf("%s on %s %s (%s): %d strategies%s\n", sp_op_name(spec.op),
               dt_json_str(dev, "name", "no GPU"), spec.matrix, sp_dtype_name(spec.dtype),
               cJSON_GetArraySize(cands), conly ? ", compile and static checks only" : "");
        const cJSON *cd;
        cJSON_ArrayForEach(cd, cands) printf(
            "  %-16s score %.1f%s\n", dt_json_str(cd, "strategy", ""), dt_json_num(cd, "score", 0),
            dt_json_bool(cd, "skew_safe", 0) ? " (safe for skewed rows)" : "");
    }
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
                       .budget_s = seconds,
                       .use_cache = 1,
                       .compile_only = conly,
                       .progress = on_progress,
                       .done = on_done,
                       .ud = &c};
    t = ag_tuner_start(&to, &e);
    if (t == NULL) {
        fprintf(stderr, "ditto tune: %s\n", e.msg);
        goto out;
    }
    while (!c.done)
        if (dt_loop_run_once(loop, 500) < 0)
            break;
    if (c.result == NULL)
        goto out;
    if (conly) {
        if (json) {
            char *s = dt_json_print(c.result, 1);
            puts(s);
            free(s);
        }
        int64_t shipped = 0;
        int ships = gpu_pool_shipments(pool, &shipped);
        if (!json && ships > 0)
            printf("matrix shipped to workers %d time%s (%lld bytes)\n", ships,
                   ships == 1 ? "" : "s", (long long)shipped);
        int lost = (int)dt_json_num(c.result, "lost", 0);
        if (lost > 0)
            fprintf(stderr, "ditto tune: %d variant%s lost (see the lines above)\n", lost,
                    lost == 1 ? "" : "s");
        status = lost == 0 ? CLI_OK : CLI_FAIL;
        goto out;
    }
    if (json) {
        char *s = dt_json_print(c.result, 1);
        puts(s);
        free(s);
    } else {
        printf("\n%-16s %-34s %10s %9s %9s %8s  %s\n", "strategy", "best variant", "us", "GB/s",
               "GFLOP/s", "speedup", "verification");
        const cJSON *so;
        cJSON_ArrayForEach(so, cJSON_GetObjectItem(c.result, "strategies"))
        {
            const cJSON *b = cJSON_GetObjectItem(so, "best");
            if (b == NULL) {
                printf("%-16s %-34s %10s %9s %9s %8s  %s\n", dt_json_str(so, "strategy", ""), "-",
                       "-", "-", "-", "-", dt_json_str(so, "status", "failed"));
                continue;
            }
            char *ps = dt_json_print(cJSON_GetObjectItem(b, "params"), 0);
            /* a winner far behind the fastest was not compared: its
             * speedup is an estimate (~), against the cuSPARSE time the
             * compared ones met */
            int est = cJSON_IsFalse(cJSON_GetObjectItem(b, "compared"));
            printf("%-16s %-34.34s %10.2f %9.1f %9.1f %c%6.2fx  passed%s\n",
                   dt_json_str(so, "strategy", ""), ps, dt_json_num(b, "us", 0),
                   dt_json_num(b, "gbps", 0), dt_json_num(b, "gflops", 0), est ? '~' : ' ',
                   dt_json_num(b, est ? "speedup_estimated" : "speedup", 0),
                   est ? " (not compared with cuSPARSE: more than 10% behind the fastest)" : "");
            free(ps);
        }
        const cJSON *b = cJSON_GetObjectItem(c.result, "best");
        if (b)
            printf("\nbest cuSPARSE: %s, %.2f us (%s timing)\n", dt_json_str(b, "baseline", ""),
                   dt_json_num(b, "baseline_us", 0), dt_json_str(b, "method", ""));
        const cJSON *u = cJSON_GetObjectItem(c.result, "use");
        if (u)
            printf("no generated kernel beats cuSPARSE here (the best is %.2fx): call cuSPARSE "
                   "%s\n",
                   dt_json_num(u, "speedup", 0), dt_json_str(u, "alg", ""));
    }
    const cJSON *b = cJSON_GetObjectItem(c.result, "best");
    if (b) {
        if (dt_mkdir_p(out, &e) != 0) {
            fprintf(stderr, "ditto tune: %s\n", e.msg);
            goto out;
        }
        char *kp = dt_xasprintf("%s/best_kernel.cu", out);
        char *cp = dt_xasprintf("%s/best_kernel.contract.json", out);
        const char *src = dt_json_str(b, "source", "");
        gpu_contract ct;
        cJSON *cj = NULL;
        if (gpu_contract_from_source(src, &ct, &e) == 0) {
            cj = gpu_contract_json(&ct);
            dt_json_set_take(cj, "params", cJSON_Duplicate(cJSON_GetObjectItem(b, "params"), 1));
            gpu_contract_clear(&ct);
        }
        char *ctext = cj ? dt_json_print(cj, 1) : dt_xstrdup("{}");
        if (dt_write_file_atomic(kp, src, strlen(src), &e) != 0 ||
            dt_write_file_atomic(cp, ctext, strlen(ctext), &e) != 0)
            fprintf(stderr, "ditto tune: %s\n", e.msg);
        else if (!json)
            printf("wrote %s and %s\n", kp, cp);
        cJSON_Delete(cj);
        free(ctext);
        free(kp);
        free(cp);
        status = CLI_OK;
    } else {
        fprintf(stderr, "ditto tune: no variant passed verification\n");
    }
out:
    ag_tuner_free(t);
    cJSON_Delete(c.result);
    cJSON_Delete(cands);
    cJSON_Delete(more);
    cJSON_Delete(lrep);
    kb_close(k);
    gpu_pool_free(pool);
    dt_loop_free(loop);
    cJSON_Delete(cfg);
    dt_buf_free(&probs);
    sp_spec_clear(&spec);
    return status;
}
