/* perf.c -- the Roofline and occupancy pane: theoretical and achieved
 * occupancy with the limiter and three what-if curves, the measurements
 * table, and the braille roofline with every measured version and the best
 * cuSPARSE algorithm as points. */
#include "tui/ui.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

void tui_sparkline(const hw_occ_curve *c, int width, int utf8, dt_buf *out, int *marker)
{
    static const char *blocks[] = {" ", "▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
    static const char ascii[] = " _.-=+*#@";
    *marker = 0;
    if (width < 1 || c->n < 1)
        return;
    for (int i = 0; i < width; i++) {
        /* the cell covers points [lo, hi): show the best of them */
        int lo = (int)((long long)i * c->n / width);
        int hi = (int)((long long)(i + 1) * c->n / width);
        if (hi <= lo)
            hi = lo + 1;
        double best = 0;
        for (int k = lo; k < hi && k < c->n; k++)
            if (c->pts[k].pct > best)
                best = c->pts[k].pct;
        int lvl = (int)(best / 100.0 * 8 + 0.5);
        if (lvl < 0)
            lvl = 0;
        if (lvl > 8)
            lvl = 8;
        if (best > 0 && lvl == 0)
            lvl = 1;
        if (utf8)
            dt_buf_puts(out, blocks[lvl]);
        else
            dt_buf_putc(out, ascii[lvl]);
        if (c->current >= lo && c->current < hi)
            *marker = i;
    }
}

typedef struct pwrap {
    tui_lines *out;
    int role;
    int first;
} pwrap;

static void piece(const char *s, int len, void *ud)
{
    pwrap *w = ud;
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, w->first ? "  " : "    ");
    dt_buf_append(&b, s, (size_t)len);
    tui_lines_add(w->out, b.data, (int)b.len, w->role);
    w->first = 0;
    dt_buf_free(&b);
}

/* A sentence indented under a heading, wrapped to the pane. */
static void say(tui_lines *out, int role, int width, const char *fmt, ...) DT_PRINTF(4, 5);
static void say(tui_lines *out, int role, int width, const char *fmt, ...)
{
    dt_buf b = DT_BUF_INIT;
    va_list ap;
    va_start(ap, fmt);
    dt_buf_vprintf(&b, fmt, ap);
    va_end(ap);
    pwrap w = {out, role, 1};
    tui_wrap(b.data, (int)b.len, width > 14 ? width - 4 : 10, piece, &w);
    dt_buf_free(&b);
}

/* Rebuild the occupancy calculator's input from hw_occ_json's "input". */
static int occ_from_json(const hw_spec *g, const cJSON *occ, hw_occ *o)
{
    const cJSON *in = cJSON_GetObjectItem(occ, "input");
    if (in == NULL || g == NULL)
        return -1;
    int carve = dt_json_int(in, "carveout", HW_CARVEOUT_DEFAULT);
    return hw_occupancy(
        g, dt_json_int(in, "threads", 256), dt_json_int(in, "registers_per_thread", 32),
        dt_json_size(in, "static_smem", 0), dt_json_size(in, "dynamic_smem", 0),
        carve, dt_json_bool(in, "optin", 0), o, NULL);
}

static void occupancy(const tui_model *m, const hw_spec *g, int width, int utf8, tui_lines *out)
{
    tui_lines_add(out, "Occupancy", -1, TUI_R_HEADING);
    const cJSON *occ = m->occupancy;
    if (occ == NULL) {
        say(out, TUI_R_DIM, width, "predicted once the plan is checked");
        return;
    }
    /* figures for another GPU than the run's (the person picked one):
     * the same launch, computed for it */
    cJSON *re = NULL;
    hw_occ ro;
    if (g && !dt_streq(dt_json_str(occ, "gpu", ""), g->name) && occ_from_json(g, occ, &ro) == 0) {
        re = hw_occ_json(g, &ro);
        occ = re;
    }
    const cJSON *in = cJSON_GetObjectItem(occ, "input");
    say(out, TUI_R_DIM, width, "%s%s, %s: %.0f threads, %.0f registers, %.0f B smem",
        dt_json_str(occ, "gpu", "?"), m->started && !m->have_gpu ? " (assumed)" : "",
        m->occ_compiled ? "as compiled" : "predicted before compiling",
        dt_json_num(in, "threads", 0), dt_json_num(in, "registers_per_thread", 0),
        dt_json_num(in, "static_smem", 0) + dt_json_num(in, "dynamic_smem", 0));
    dt_buf lim = DT_BUF_INIT;
    const cJSON *l;
    cJSON_ArrayForEach(l, cJSON_GetObjectItem(occ, "limiters"))
    {
        if (cJSON_IsString(l) && !dt_streq(l->valuestring, dt_json_str(occ, "limiter", "")))
            dt_buf_printf(&lim, "%s%s", lim.len ? ", " : " (also ", l->valuestring);
    }
    if (lim.len)
        dt_buf_putc(&lim, ')');
    tui_line *ln = tui_lines_addf(
        out, TUI_R_NORMAL, "  theoretical %3.0f%%  %.0f blocks/SM, %.0f/%.0f warps",
        dt_json_num(occ, "occupancy_pct", 0), dt_json_num(occ, "blocks_per_sm", 0),
        dt_json_num(occ, "warps_per_sm", 0), dt_json_num(occ, "max_warps_per_sm", 0));
    tui_line_span(ln, 2, 11, TUI_R_BOLD);
    ln = tui_lines_addf(out, TUI_R_NORMAL, "  limiter     %s%s", dt_json_str(occ, "limiter", "?"),
                        dt_buf_str(&lim));
    tui_line_span(ln, 2, 7, TUI_R_BOLD);
    dt_buf_free(&lim);
    /* achieved: the latest measurement's CUPTI metric */
    const tui_meas *last = m->nmeas ? &m->meas[m->nmeas - 1] : NULL;
    if (last && last->achieved_occ >= 0)
        ln = tui_lines_addf(out, TUI_R_NORMAL, "  achieved    %3.0f%%  (CUPTI, v%d)",
                            last->achieved_occ, last->version);
    else if (last && !last->metrics_available)
        ln = tui_lines_addf(out, TUI_R_DIM, "  achieved    unavailable: %s",
                            last->metrics_reason[0] ? last->metrics_reason : "no CUPTI metrics");
    else if (m->started && !m->have_gpu)
        ln = tui_lines_add(out, "  achieved    needs a GPU", -1, TUI_R_DIM);
    else
        ln = tui_lines_add(out, "  achieved    measured with the kernel", -1, TUI_R_DIM);
    tui_line_span(ln, 2, 8, TUI_R_BOLD);
    hw_occ o;
    if (occ_from_json(g, occ, &o) != 0) {
        cJSON_Delete(re);
        return;
    }
    static const hw_occ_axis axes[] = {HW_AXIS_REGS, HW_AXIS_THREADS, HW_AXIS_SMEM};
    static const char *names[] = {"registers", "threads", "smem"};
    int value[] = {o.regs, o.threads, (int)(o.static_smem + o.dyn_smem)};
    say(out, TUI_R_DIM, width, "what if one input changes (height: occupancy):");
    for (int i = 0; i < 3; i++) {
        hw_occ_curve c;
        if (hw_occ_curve_make(g, &o, axes[i], &c, NULL) != 0)
            continue;
        char tail[64];
        snprintf(tail, sizeof tail, " %d (%d..%d)", value[i], c.pts[0].x, c.pts[c.n - 1].x);
        int sw = width - 12 - (int)strlen(tail);
        if (sw < 8) {
            hw_occ_curve_free(&c);
            break;
        }
        dt_buf b = DT_BUF_INIT;
        dt_buf_printf(&b, "  %-9s ", names[i]);
        int start = (int)b.len;
        int mark;
        tui_sparkline(&c, sw, utf8, &b, &mark);
        int end = (int)b.len;
        dt_buf_puts(&b, tail);
        ln = tui_lines_add(out, b.data, (int)b.len, TUI_R_NORMAL);
        tui_line_span(ln, start, end - start, TUI_R_BAR);
        int mo = start + tui_col_to_byte(b.data + start, end - start, mark);
        int ml = tui_utf8_next(b.data + mo, end - mo, &(unsigned){0});
        tui_line_span(ln, mo, ml, TUI_R_POINT);
        dt_buf_free(&b);
        hw_occ_curve_free(&c);
    }
    if (o.regs_for_next > 0 && o.smem_for_next > 0)
        say(out, TUI_R_DIM, width, "one more block per SM needs <= %d registers and <= %d B smem",
            o.regs_for_next, o.smem_for_next);
    else if (o.regs_for_next > 0)
        say(out, TUI_R_DIM, width, "one more block per SM needs <= %d registers", o.regs_for_next);
    else if (o.smem_for_next > 0)
        say(out, TUI_R_DIM, width, "one more block per SM needs <= %d B smem", o.smem_for_next);
    cJSON_Delete(re);
}

/* Every point of the pane is placed at its algorithmic intensity (minimum
 * bytes): cuSPARSE has no counters, and an L2-resident kernel's DRAM bytes
 * say where its data came from, not how much work it did, so placing some
 * points by DRAM bytes would rank two equally fast kernels differently.
 * The DRAM/min column and the legend give the measured traffic apart. */
static double pct_of_roof(const hw_roofline *rl, double flops, double min_bytes, double us)
{
    hw_rl_point p = {.flops = flops, .min_bytes = min_bytes, .seconds = us * 1e-6};
    hw_rl_place pl;
    if (rl == NULL || flops <= 0 || min_bytes <= 0 || us <= 0 ||
        hw_roofline_place(rl, &p, &pl, NULL) != 0)
        return -1;
    return pl.pct_roof;
}

static void measurements(const tui_model *m, const hw_roofline *rl, int width, tui_lines *out)
{
    tui_lines_add(out, "Measurements", -1, TUI_R_HEADING);
    if (m->nmeas == 0) {
        if (m->started && !m->have_gpu)
            say(out, TUI_R_WARNING, width,
                "no GPU: verification and measurement need one (this machine compiles only)");
        else
            say(out, TUI_R_DIM, width,
                "none yet: each verified version is timed against "
                "cuSPARSE");
        return;
    }
    int roofc = width >= 45, occc = width >= 51, dramc = width >= 60, l2c = width >= 67;
    dt_buf h = DT_BUF_INIT;
    dt_buf_printf(&h, "  %-9s %9s %7s %8s", "version", "time us", "GB/s", "speedup");
    if (roofc)
        dt_buf_printf(&h, " %6s", "%roof");
    if (occc)
        dt_buf_printf(&h, " %5s", "occ");
    if (dramc)
        dt_buf_printf(&h, " %8s", "DRAM/min");
    if (l2c)
        dt_buf_printf(&h, " %6s", "L2hit");
    tui_lines_add(out, h.data, (int)h.len, TUI_R_BOLD);
    dt_buf_free(&h);
    for (int i = 0; i < m->nmeas; i++) {
        const tui_meas *x = &m->meas[i];
        dt_buf b = DT_BUF_INIT;
        char ver[24];
        snprintf(ver, sizeof ver, "v%d", x->version);
        dt_buf_printf(&b, "  %-9s %9.2f %7.0f %7.2fx", ver, x->us, x->gbps, x->speedup);
        double pr = pct_of_roof(rl, x->flops, x->min_bytes, x->us);
        if (roofc) {
            if (pr >= 0)
                dt_buf_printf(&b, " %5.1f%%", pr);
            else
                dt_buf_printf(&b, " %6s", "-");
        }
        if (occc) {
            if (x->achieved_occ >= 0)
                dt_buf_printf(&b, " %4.0f%%", x->achieved_occ);
            else
                dt_buf_printf(&b, " %5s", "-");
        }
        if (dramc) {
            if (x->dram_bytes > 0 && x->min_bytes > 0)
                dt_buf_printf(&b, " %7.2fx", x->dram_bytes / x->min_bytes);
            else
                dt_buf_printf(&b, " %8s", "-");
        }
        if (l2c) {
            if (x->l2_hit >= 0)
                dt_buf_printf(&b, " %5.0f%%", x->l2_hit);
            else
                dt_buf_printf(&b, " %6s", "-");
        }
        tui_line *ln =
            tui_lines_add(out, b.data, (int)b.len, x->speedup >= 1 ? TUI_R_OK : TUI_R_NORMAL);
        (void)ln;
        dt_buf_free(&b);
    }
    const tui_meas *last = &m->meas[m->nmeas - 1];
    if (last->base_us > 0) {
        double gbps = last->min_bytes / (last->base_us * 1e-6) / 1e9;
        dt_buf b = DT_BUF_INIT;
        dt_buf_printf(&b, "  %-9s %9.2f %7.0f %7.2fx", "cuSPARSE", last->base_us, gbps, 1.0);
        double pr = pct_of_roof(rl, last->flops, last->min_bytes, last->base_us);
        if (roofc && pr >= 0)
            dt_buf_printf(&b, " %5.1f%%", pr);
        tui_lines_add(out, b.data, (int)b.len, TUI_R_DIM);
        dt_buf_free(&b);
    }
    if (m->tune_best && dt_json_num(m->tune_best, "us", 0) > 0) {
        double us = dt_json_num(m->tune_best, "us", 0);
        tui_lines_addf(out, TUI_R_OK, "  %-9s %9.2f %7.0f %7.2fx  %s", "tuned", us,
                       dt_json_num(m->tune_best, "gbps", 0),
                       dt_json_num(m->tune_best, "speedup", 0),
                       dt_json_str(m->tune_best, "strategy", ""));
    }
    say(out, TUI_R_DIM, width, "timing: %s, median; speedup over the best cuSPARSE algorithm, %s",
        last->method[0] ? last->method : "?", last->base_alg[0] ? last->base_alg : "?");
}

/* The problem's flops and least bytes for its op and dtype, from the
 * profile step's PatternReport; -1 when there is none yet. */
static int predicted_cost(const tui_model *m, double *flops, double *bytes)
{
    for (int i = m->nsteps - 1; i >= 0; i--) {
        const tui_step *s = &m->steps[i];
        if (!dt_streq(s->kind, "profile") || s->artifact == NULL)
            continue;
        /* the profile artifact is {"report": PatternReport, ...} */
        const cJSON *rep = cJSON_GetObjectItem(s->artifact, "report");
        if (rep == NULL)
            rep = s->artifact;
        const cJSON *c = cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "cost"), m->op);
        *flops = dt_json_num(c, "flops", 0);
        *bytes = dt_json_num(cJSON_GetObjectItem(c, "min_bytes"), m->dtype, 0);
        return *flops > 0 && *bytes > 0 ? 0 : -1;
    }
    return -1;
}

static void roofline(const tui_model *m, const hw_spec *g, const hw_roofline *rl, int width,
                     int plot_h, int utf8, tui_lines *out)
{
    if (g == NULL || rl == NULL) {
        tui_lines_add(out, "Roofline", -1, TUI_R_HEADING);
        say(out, TUI_R_DIM, width, "no GPU spec known yet (it comes with the check step)");
        return;
    }
    tui_lines_addf(out, TUI_R_HEADING, "Roofline: %s%s, %s", g->full_name,
                   m->started && !m->have_gpu ? " (assumed)" : "", hw_dtype_name(rl->dtype));
    hw_rl_point pts[HW_PLOT_MAX_POINTS];
    double dram[HW_PLOT_MAX_POINTS] = {0}; /* measured DRAM bytes, for the legend */
    int np = 0, nbase = -1;
    for (int i = 0; i < m->nmeas && np < HW_PLOT_MAX_POINTS - 2; i++) {
        const tui_meas *x = &m->meas[i];
        if (x->us <= 0 || x->flops <= 0 || x->min_bytes <= 0)
            continue;
        hw_rl_point *p = &pts[np++];
        memset(p, 0, sizeof *p);
        snprintf(p->label, sizeof p->label, "v%d", x->version);
        p->flops = x->flops;
        p->min_bytes = x->min_bytes;
        p->seconds = x->us * 1e-6;
        dram[np - 1] = x->dram_bytes;
    }
    const tui_meas *last = m->nmeas ? &m->meas[m->nmeas - 1] : NULL;
    if (last && last->base_us > 0 && last->flops > 0 && last->min_bytes > 0) {
        nbase = np;
        hw_rl_point *p = &pts[np++];
        memset(p, 0, sizeof *p);
        snprintf(p->label, sizeof p->label, "cuSPARSE");
        p->flops = last->flops;
        p->min_bytes = last->min_bytes;
        p->seconds = last->base_us * 1e-6;
    }
    if (last && m->tune_best && dt_json_num(m->tune_best, "us", 0) > 0 && last->flops > 0) {
        hw_rl_point *p = &pts[np++];
        memset(p, 0, sizeof *p);
        snprintf(p->label, sizeof p->label, "tuned");
        p->flops = last->flops;
        p->min_bytes = last->min_bytes;
        p->seconds = dt_json_num(m->tune_best, "us", 0) * 1e-6;
    }
    /* before (or without) a measurement: where the problem sits, from the
     * PatternReport's flops and least bytes, at the roof it could reach */
    int npred = -1;
    double pflops, pbytes;
    if (np < HW_PLOT_MAX_POINTS && predicted_cost(m, &pflops, &pbytes) == 0) {
        npred = np;
        hw_rl_point *p = &pts[np++];
        memset(p, 0, sizeof *p);
        snprintf(p->label, sizeof p->label, "predicted");
        p->flops = pflops;
        p->min_bytes = pbytes;
        p->seconds = 0;
    }
    hw_rl_place pl[HW_PLOT_MAX_POINTS];
    int nplaced = 0;
    for (int i = 0; i < np; i++)
        if (hw_roofline_place(rl, &pts[i], &pl[nplaced], NULL) == 0)
            nplaced++;
    hw_rl_view v;
    hw_rl_view_default(rl, &v);
    hw_rl_view_fit(&v, pl, nplaced);
    dt_buf fig = DT_BUF_INIT;
    hw_plot_info info;
    dt_err e = {0};
    if (width < 30 || plot_h < 8 ||
        hw_roofline_render(rl, &v, pts, np, width, plot_h, utf8, &fig, &info, &e) != 0) {
        tui_lines_addf(out, TUI_R_DIM, "  %s", e.msg[0] ? e.msg : "too narrow for the figure");
        dt_buf_free(&fig);
        return;
    }
    int first = out->n;
    const char *p = fig.data;
    while (p && *p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        tui_line *ln = tui_lines_add(out, p, len, TUI_R_NORMAL);
        /* braille dots are the plot, the rest axes and labels */
        for (int i = 0; i < ln->len;) {
            unsigned cp;
            int n = tui_utf8_next(ln->text + i, ln->len - i, &cp);
            if (cp >= 0x2800 && cp <= 0x28FF)
                tui_line_span(ln, i, n, TUI_R_PLOT);
            i += n;
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
    for (int i = 0; i < info.npoints && i < np; i++) {
        int row = info.point_row[i], col = info.point_col[i];
        if (row < 0 || col < 0 || first + row >= out->n)
            continue;
        tui_line *ln = &out->v[first + row];
        int off = tui_col_to_byte(ln->text, ln->len, col);
        tui_line_span(ln, off, 1, i == nbase ? TUI_R_BASE_POINT : TUI_R_POINT);
    }
    /* the axes' units always: the figure drops its FLOP/B label when the
     * tick labels leave no room for it */
    if (strstr(fig.data, "FLOP/B") == NULL)
        say(out, TUI_R_DIM, width, "x: arithmetic intensity, FLOP/B; y: FLOP/s");
    dt_buf_free(&fig);
    /* the legend: marker, label, where it sits against the roof */
    for (int i = 0; i < np && i < info.npoints; i++) {
        hw_rl_place q;
        if (hw_roofline_place(rl, &pts[i], &q, NULL) != 0)
            continue;
        if (i == npred) {
            tui_line *ln = tui_lines_addf(
                out, TUI_R_NORMAL, "  %c %-9s AI %.3g FLOP/B from the PatternReport: at most %.3g "
                                   "GFLOP/s, %s",
                info.marker[i], pts[i].label, q.ai, q.flops_s / 1e9,
                q.memory_bound ? "memory-bound" : "compute-bound");
            tui_line_span(ln, 2, 1, TUI_R_POINT);
            continue;
        }
        char dr[40] = "";
        if (dram[i] > 0)
            snprintf(dr, sizeof dr, " (DRAM %.3g)", pts[i].flops / dram[i]);
        tui_line *ln = tui_lines_addf(
            out, TUI_R_NORMAL, "  %c %-9s %5.1f%% of roof, AI %.3g%s, %s%s", info.marker[i],
            pts[i].label, q.pct_roof, q.ai, dr, q.memory_bound ? "memory-bound" : "compute-bound",
            info.clipped[i] ? " (outside the view)" : "");
        tui_line_span(ln, 2, 1, i == nbase ? TUI_R_BASE_POINT : TUI_R_POINT);
    }
    if (np == (npred >= 0 ? 1 : 0))
        say(out, TUI_R_DIM, width, "no measured version yet: points appear as versions are timed");
}

void tui_perf_build(const tui_model *m, const hw_spec *g, int width, int plot_h, int utf8,
                    tui_lines *out)
{
    hw_roofline rl;
    int have_rl =
        g != NULL &&
        hw_roofline_init(&rl, g, dt_streq(m->dtype, "fp64") ? HW_FP64 : HW_FP32, 0, 1, NULL) == 0;
    occupancy(m, g, width, utf8, out);
    tui_lines_add(out, "", 0, TUI_R_NORMAL);
    measurements(m, have_rl ? &rl : NULL, width, out);
    tui_lines_add(out, "", 0, TUI_R_NORMAL);
    roofline(m, have_rl ? g : NULL, have_rl ? &rl : NULL, width, plot_h < 8 ? 8 : plot_h, utf8,
             out);
}

/* ---- the pane ------------------------------------------------------------------ */

static void build(tui_pane *p, tui_app *a, int width)
{
    tui_lines_clear(&p->lines);
    int rows = tui_pane_rows(p);
    /* the figure takes what the tables leave, within reason */
    int plot_h = rows - 14 - a->model.nmeas;
    if (plot_h < 10)
        plot_h = 10;
    if (plot_h > 24)
        plot_h = 24;
    const hw_spec *g = tui_app_gpu(a);
    if (g && (!a->model.have_gpu || a->gpu_pick[0])) {
        /* the figures are for a GPU this machine does not have: say which */
        char *t = dt_xasprintf("GPU assumed: %s (%s)", g->full_name, tui_app_gpu_why(a));
        pwrap w = {&p->lines, TUI_R_WARNING, 1};
        tui_wrap(t, (int)strlen(t), width > 14 ? width - 4 : 10, piece, &w);
        free(t);
    }
    tui_perf_build(&a->model, g, width, plot_h, a->utf8, &p->lines);
}

static void note(tui_pane *p, tui_app *a, char *buf, size_t n)
{
    (void)p;
    const hw_spec *g = tui_app_gpu(a);
    if (a->model.nmeas)
        snprintf(buf, n, "%d measured", a->model.nmeas);
    else if (a->model.started && !a->model.have_gpu)
        snprintf(buf, n, "no GPU: %s assumed", g ? g->name : "none");
}

static int key(tui_pane *p, tui_app *a, int k)
{
    return tui_pane_key(p, a, k);
}

const tui_pane_ops tui_perf_ops = {"Roofline & occupancy", 0, build, key, note};
