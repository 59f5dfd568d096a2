/* baseline.c -- cuSPARSE alone on a matrix: the baseline request, and the
 * timings measure pairs a candidate with. */
#include "gpu/worker/runner.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- baseline ------------------------------------------------------------------ */

/* Median of v[0..n) (reordered). */
static double median_of(double *v, int n)
{
    if (n <= 0)
        return 0;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            double t = v[j];
            v[j] = v[j - 1];
            v[j - 1] = t;
        }
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int wk_baseline_into(wk_matrix *m, const wk_problem *p, sp_layout layout, int min_runs,
                     double min_s, const char *method, int fast, dev_enqueue_fn cand,
                     wk_place_fn place, void *cand_ud, const dev_observer *cand_obs, cJSON *out,
                     dt_err *e)
{
    dt_err le = {0};
    if (gpu_cusparse_load(&le) != 0) {
        e->code = WK_EUNAVAIL;
        return dt_err_set(e, "cuSPARSE not available: %s", le.msg);
    }
    const dev_fmt *csr = run_matrix_fmt(m, "csr", NULL, p->dtype, e);
    const double *av = run_matrix_rounded(m, p->dtype, e);
    if (csr == NULL || av == NULL)
        return -1;
    operands o;
    if (run_make_operands(m->a, av, p, layout, 0, 1, &o, e) != 0)
        return -1;
    size_t es = (size_t)sp_dtype_size(p->dtype);
    dev_buf in1 = {0}, in2 = {0}, ob = {0};
    int rc = -1;
    double *got = run_xalloc_doubles(o.nout, e);
    unsigned char *raw = malloc(o.nout * es + 8);
    if (got == NULL || raw == NULL || dev_alloc(&in1, o.nin1 * es, e) != 0 ||
        (o.nin2 && dev_alloc(&in2, o.nin2 * es, e) != 0) || dev_alloc(&ob, o.nout * es, e) != 0 ||
        run_put(&in1, o.in1, o.nin1, p->dtype, e) != 0 ||
        run_put(&in2, o.in2, o.nin2, p->dtype, e) != 0) {
        e->code = wk_from_dev(e->code);
        goto done;
    }
    gpu_cs_problem cp = {.op = p->op,
                         .dtype = p->dtype,
                         .n = p->n,
                         .layout = layout,
                         .host = m->a,
                         .csr = csr,
                         .alpha = p->alpha,
                         .beta = p->beta};
    if (p->op == SP_SPMV) {
        cp.x = in1.ptr;
        cp.y = ob.ptr;
    } else if (p->op == SP_SPMM) {
        cp.B = in1.ptr;
        cp.C = ob.ptr;
    } else {
        cp.A = in1.ptr;
        cp.Bt = in2.ptr;
        cp.out = ob.ptr;
    }
    const char *algs[16];
    int nalgs = gpu_cusparse_algs(p->op, p->dtype, algs, 16);
    cJSON *arr = dt_json_arr();
    const char *best = NULL;
    double best_us = 0;
    int l2_graph = strcmp(method, "graph") == 0;
    for (int i = 0; i < nalgs; i++) {
        cJSON *aj = dt_json_obj();
        dt_json_set_str(aj, "name", algs[i]);
        cJSON_AddItemToArray(arr, aj);
        if (run_put(&ob, o.out0, o.nout, p->dtype, e) != 0) {
            e->code = wk_from_dev(e->code);
            goto done_arr;
        }
        gpu_cs_result r;
        memset(&r, 0, sizeof r);
        dt_err ce = {0};
        unsigned modes = fast ? (l2_graph ? 1u << DEV_TIME_GRAPH : 1u << DEV_TIME_COLD)
                              : (1u << DEV_TIME_COLD) | (1u << DEV_TIME_WARM) |
                                    (l2_graph ? (1u << DEV_TIME_GRAPH) : 0u);
        if (gpu_cusparse_run(&cp, algs[i], modes, min_runs, min_s, &r, &ce) != 0) {
            if (ce.code == DEV_EFAULT) {
                *e = ce;
                e->code = WK_EFAULT;
                goto done_arr;
            }
            dt_json_set_bool(aj, "ok", 0);
            dt_json_set_str(aj, "error", ce.msg);
            continue;
        }
        dt_json_set_bool(aj, "ok", 1);
        dt_json_set_num(aj, "buffer_bytes", (double)r.buffer_bytes);
        dt_json_set_num(aj, "setup_us", r.setup_us);
        dt_json_set_num(aj, "preprocess_us", r.preprocess_us);
        run_stats_into(aj, "cold", &r.cold);
        run_stats_into(aj, "warm", &r.warm);
        run_stats_into(aj, "graph", &r.graph);
        /* The comparison uses one method for both sides: an algorithm that
         * cannot be timed with it is listed but not eligible as the best. */
        const dev_stats *prim = l2_graph ? &r.graph : &r.cold;
        if (!prim->valid) {
            dt_json_set_str(aj, "note",
                            l2_graph ? "not graph-capturable: not comparable"
                                     : "no cold timing: not comparable");
            continue;
        }
        dt_json_set_num(aj, "us", prim->median_us);
        /* Correctness of the baseline itself, for beta == 0 where repeated
         * runs leave the same output (with beta != 0 the timing runs have
         * accumulated into it). */
        int verified = -1;
        if (p->beta == 0.0) {
            if (dev_download(raw, &ob, o.nout * es, e) != 0) {
                e->code = wk_from_dev(e->code);
                goto done_arr;
            }
            sp_from_dtype(raw, got, o.nout, p->dtype);
            run_epilogue_on_host(p, m->a, layout, o.bias, got, o.nout);
            size_t bad = 0;
            for (size_t k = 0; k < o.nout; k++)
                bad += !(fabs(got[k] - o.ref[k]) <= o.tol[k]);
            verified = bad == 0;
            if (bad)
                dt_json_set_int(aj, "outputs_outside_tolerance", (int64_t)bad);
        }
        if (verified >= 0)
            dt_json_set_bool(aj, "verified", verified);
        if (verified != 0 && prim->valid && (best == NULL || prim->median_us < best_us)) {
            best = algs[i];
            best_us = prim->median_us;
        }
    }
    dt_json_set_str(out, "method", method);
    if (best) {
        dt_json_set_str(out, "best", best);
        dt_json_set_num(out, "us", best_us);
    }
    dt_json_set_take(out, "algs", arr);
    arr = NULL;
    if (best && cand) {
        /* Paired timing over placements: for each, the candidate's and the
         * baseline's dense operands sit at new addresses and cuSPARSE is set
         * up afresh (its own COO indices and workspace move too). Data beyond
         * L2 streams from DRAM, where placement does not matter: one. */
        int nplace = l2_graph ? WK_PLACEMENTS : 1;
        double place_sp[WK_PLACEMENTS], place_a[WK_PLACEMENTS], place_b[WK_PLACEMENTS];
        double place_amin[WK_PLACEMENTS], place_bmin[WK_PLACEMENTS];
        int np = 0, rounds = 0;
        double p10 = 0, p90 = 0;
        dev_buf moved[3 * WK_PLACEMENTS];
        int nmoved = 0;
        dev_fmt *mfmt[WK_PLACEMENTS];
        int nmfmt = 0;
        dev_time_mode mode = l2_graph ? DEV_TIME_GRAPH : DEV_TIME_COLD;
        dt_err pe = {0};
        for (int r = 0; r < nplace; r++) {
            gpu_cs_problem cq = cp;
            if (r > 0) {
                if ((place && place(cand_ud, p->op, &pe) != 0))
                    break;
                dev_fmt *c = dt_xmalloc(sizeof *c);
                if (run_fmt_clone_placed(csr, c, &pe) != 0) {
                    free(c);
                    break;
                }
                mfmt[nmfmt++] = c;
                cq.csr = c;
                dev_buf *bs[3] = {&in1, &in2, &ob};
                CUdeviceptr np3[3] = {0, 0, 0};
                int bad = 0;
                for (int i = 0; i < 3 && !bad; i++) {
                    if (run_copy_placed(bs[i], &moved[nmoved], &pe) != 0) {
                        bad = 1;
                        break;
                    }
                    np3[i] = moved[nmoved++].ptr;
                }
                if (bad)
                    break;
                if (p->op == SP_SPMV) {
                    cq.x = np3[0];
                    cq.y = np3[2];
                } else if (p->op == SP_SPMM) {
                    cq.B = np3[0];
                    cq.C = np3[2];
                } else {
                    cq.A = np3[0];
                    cq.Bt = np3[1];
                    cq.out = np3[2];
                }
            }
            dev_pair_stats ps;
            if (gpu_cusparse_pair(&cq, best, mode, cand, cand_ud, cand_obs, min_runs,
                                  min_s / nplace, &ps, &pe) != 0)
                break;
            if (!ps.valid)
                continue;
            place_sp[np] = ps.ratio.median_us;
            place_a[np] = ps.a.median_us;
            place_b[np] = ps.b.median_us;
            place_amin[np] = ps.a.min_us;
            place_bmin[np] = ps.b.min_us;
            if (np == 0 || ps.ratio.p10_us < p10)
                p10 = ps.ratio.p10_us;
            if (np == 0 || ps.ratio.p90_us > p90)
                p90 = ps.ratio.p90_us;
            rounds += ps.rounds;
            np++;
        }
        for (int i = 0; i < nmoved; i++)
            dev_free(&moved[i]);
        for (int i = 0; i < nmfmt; i++) {
            run_fmt_clone_free(mfmt[i]);
            free(mfmt[i]);
        }
        if (pe.code == DEV_EFAULT || dev_poisoned()) {
            *e = pe;
            e->code = WK_EFAULT;
            goto done;
        }
        if (pe.msg[0])
            dt_json_set_str(out, "paired_error", pe.msg);
        if (np > 0) {
            cJSON *pj = dt_json_obj(), *pl = dt_json_arr();
            for (int i = 0; i < np; i++)
                cJSON_AddItemToArray(pl, cJSON_CreateNumber(place_sp[i]));
            dt_json_set_int(pj, "placements", np);
            dt_json_set_take(pj, "placement_speedups", pl);
            dt_json_set_int(pj, "rounds", rounds);
            dt_json_set_num(pj, "candidate_us", median_of(place_a, np));
            dt_json_set_num(pj, "baseline_us", median_of(place_b, np));
            dt_json_set_num(pj, "candidate_min_us", median_of(place_amin, np));
            dt_json_set_num(pj, "baseline_min_us", median_of(place_bmin, np));
            dt_json_set_num(pj, "speedup", median_of(place_sp, np));
            dt_json_set_num(pj, "speedup_p10", p10);
            dt_json_set_num(pj, "speedup_p90", p90);
            dt_json_set_take(out, "paired", pj);
        }
    }
    rc = 0;
done_arr:
    cJSON_Delete(arr);
done:
    free(got);
    free(raw);
    dev_free(&in1);
    dev_free(&in2);
    dev_free(&ob);
    run_operands_free(&o);
    return rc;
}

int wk_baseline(wk_state *w, const cJSON *req, cJSON *out, dt_err *e)
{
    wk_problem p;
    wk_matrix *m = run_request_begin(w, req, &p, "baseline needs a GPU", e);
    if (m == NULL)
        return -1;
    const char *lay = dt_json_str(req, "layout", "row");
    sp_layout layout = strcmp(lay, "col") == 0 ? SP_COL_MAJOR : SP_ROW_MAJOR;
    double flops = 0, bytes = 0;
    sp_cost(m->a->rows, m->a->cols, m->a->nnz, p.op, p.dtype, p.n, &flops, &bytes);
    const char *method = bytes <= 0.5 * (double)w->dev.l2_bytes ? "graph" : "cold";
    if (wk_baseline_into(m, &p, layout, dt_json_int(req, "min_runs", 20),
                         dt_json_num(req, "min_seconds", 0.05), method,
                         dt_json_bool(req, "fast", 0), NULL, NULL, NULL, NULL, out, e) != 0)
        return -1;
    dt_json_set_num(out, "min_bytes", bytes);
    dt_json_set_num(out, "flops", flops);
    double us = dt_json_num(out, "us", 0);
    if (us > 0) {
        dt_json_set_num(out, "gbps", bytes / (us * 1e-6) / 1e9);
        dt_json_set_num(out, "gflops", flops / (us * 1e-6) / 1e9);
    }
    return 0;
}
