/* roofline.c -- the roofline model: ceilings, the ridge, placing a kernel, plot ranges. */
#include "hardware/hardware.h"

#include <math.h>
#include <string.h>

const char *hw_fmt_si(double v, char *out, size_t outlen)
{
    static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E"};
    int k = 0;
    double a = fabs(v);
    while (a >= 999.5 && k < (int)DT_ARRAY_LEN(prefix) - 1) {
        a /= 1000;
        v /= 1000;
        k++;
    }
    if (a >= 99.95)
        snprintf(out, outlen, "%.0f %s", v, prefix[k]);
    else if (a >= 9.995)
        snprintf(out, outlen, "%.1f %s", v, prefix[k]);
    else
        snprintf(out, outlen, "%.2f %s", v, prefix[k]);
    return out;
}

static void compute_label(char *out, size_t len, hw_dtype t, double flops, int measured)
{
    char num[32];
    hw_fmt_si(flops, num, sizeof num);
    snprintf(out, len, "%s %s%s%s", hw_dtype_name(t), num, t == HW_INT8 ? "OP/s" : "FLOP/s",
             measured ? " (measured)" : "");
}

int hw_roofline_init(hw_roofline *r, const hw_spec *g, hw_dtype dtype, unsigned extra_mask,
                     int use_measured, dt_err *e)
{
    memset(r, 0, sizeof *r);
    if (dtype < 0 || dtype >= HW_NDTYPES)
        return dt_err_set(e, "unknown data type %d", (int)dtype);
    snprintf(r->gpu, sizeof r->gpu, "%s", g->name);
    snprintf(r->gpu_full, sizeof r->gpu_full, "%s", g->full_name);
    int bw_m = 0, pk_m = 0;
    r->dtype = dtype;
    r->bw = hw_bandwidth(g, use_measured, &bw_m);
    r->peak = hw_peak_flops(g, dtype, use_measured, &pk_m);
    if (r->peak <= 0) {
        dt_buf b = DT_BUF_INIT;
        for (int i = 0; i < HW_NDTYPES; i++) {
            if (g->peak_tflops[i] > 0)
                dt_buf_printf(&b, "%s%s", b.len ? ", " : "", hw_dtype_name((hw_dtype)i));
        }
        dt_err_set(e, "%s has no %s units; it has: %s", g->name, hw_dtype_name(dtype),
                   dt_buf_str(&b));
        dt_buf_free(&b);
        return -1;
    }
    r->ridge = r->peak / r->bw;
    hw_ceiling *m = &r->ceil[r->nceil++];
    m->is_memory = 1;
    m->value = r->bw;
    m->measured = bw_m;
    char num[32];
    hw_fmt_si(r->bw, num, sizeof num);
    snprintf(m->label, sizeof m->label, "%s %sB/s%s", g->mem_type, num, bw_m ? " (measured)" : "");
    /* the primary first, then the extras in dtype order */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < HW_NDTYPES; i++) {
            int want = pass == 0 ? i == (int)dtype : (i != (int)dtype && (extra_mask & (1u << i)));
            if (!want)
                continue;
            int meas = 0;
            double f = hw_peak_flops(g, (hw_dtype)i, use_measured, &meas);
            if (f <= 0)
                continue;
            hw_ceiling *c = &r->ceil[r->nceil++];
            c->dtype = (hw_dtype)i;
            c->value = f;
            c->ridge = f / r->bw;
            c->measured = meas;
            compute_label(c->label, sizeof c->label, c->dtype, f, meas);
        }
    }
    return 0;
}

double hw_roofline_attainable(const hw_roofline *r, double ai)
{
    double m = ai * r->bw;
    return m < r->peak ? m : r->peak;
}

int hw_roofline_place(const hw_roofline *r, const hw_rl_point *p, hw_rl_place *out, dt_err *e)
{
    memset(out, 0, sizeof *out);
    if (!isfinite(p->flops) || p->flops <= 0)
        return dt_err_set(e, "%s: flops must be a positive number", p->label);
    if (!isfinite(p->min_bytes) || p->min_bytes <= 0)
        return dt_err_set(e, "%s: minimum bytes must be a positive number", p->label);
    if (!isfinite(p->seconds) || !isfinite(p->dram_bytes) || p->seconds < 0 || p->dram_bytes < 0)
        return dt_err_set(e, "%s: time and DRAM bytes must be 0 (unknown) or positive", p->label);
    out->ai_alg = p->flops / p->min_bytes;
    out->ai_ach = p->dram_bytes > 0 ? p->flops / p->dram_bytes : 0;
    out->ai = out->ai_ach > 0 ? out->ai_ach : out->ai_alg;
    out->roof = hw_roofline_attainable(r, out->ai);
    out->memory_bound = out->ai < r->ridge;
    if (p->seconds > 0) {
        out->flops_s = p->flops / p->seconds;
        out->bytes_s = (p->dram_bytes > 0 ? p->dram_bytes : p->min_bytes) / p->seconds;
        out->pct_roof = 100.0 * out->flops_s / out->roof;
        out->pct_bw = 100.0 * out->bytes_s / r->bw;
        /* Moving min_bytes takes at least min_bytes / bw; quicker means the
         * kernel skipped work or the timing is broken (DESIGN: flag it). */
        out->below_floor = p->seconds * r->bw < p->min_bytes * (1 - 1e-9);
    } else {
        out->predicted = 1;
        out->flops_s = out->roof;
        out->pct_roof = 100.0;
    }
    return 0;
}

/* ---- plot ranges -------------------------------------------------------------- */

static double dec(double k)
{
    return pow(10.0, k);
}

void hw_rl_view_default(const hw_roofline *r, hw_rl_view *v)
{
    double rmin = r->ridge, rmax = r->ridge, pmax = r->peak;
    for (int i = 1; i < r->nceil; i++) {
        rmin = fmin(rmin, r->ceil[i].ridge);
        rmax = fmax(rmax, r->ceil[i].ridge);
        pmax = fmax(pmax, r->ceil[i].value);
    }
    v->x_lo = dec(floor(log10(rmin)) - 3);
    v->x_hi = dec(floor(log10(rmax)) + 1);
    /* a decade above the highest roof leaves a row for its label */
    v->y_hi = dec(floor(log10(pmax)) + 1);
    v->y_lo = dec(floor(log10(r->bw * v->x_lo)));
    if (v->y_lo >= v->y_hi)
        v->y_lo = v->y_hi / 1000;
}

void hw_rl_view_fit(hw_rl_view *v, const hw_rl_place *pl, int n)
{
    for (int i = 0; i < n; i++) {
        double x = pl[i].ai, y = pl[i].flops_s;
        if (!(x > 0) || !(y > 0) || !isfinite(x) || !isfinite(y))
            continue;
        /* at most 30 decades either way: a bound, not a range anyone plots */
        for (int k = 0; k < 30 && x < v->x_lo; k++)
            v->x_lo /= 10;
        for (int k = 0; k < 30 && x > v->x_hi; k++)
            v->x_hi *= 10;
        for (int k = 0; k < 30 && y < v->y_lo; k++)
            v->y_lo /= 10;
        for (int k = 0; k < 30 && y > v->y_hi; k++)
            v->y_hi *= 10;
    }
}

int hw_rl_map(const hw_rl_view *v, int dots_w, int dots_h, double ai, double flops, double *dx,
              double *dy)
{
    if (!(ai > 0) || !(flops > 0)) {
        *dx = *dy = -1;
        return -1;
    }
    double lx = (log10(ai) - log10(v->x_lo)) / (log10(v->x_hi) - log10(v->x_lo));
    double ly = (log10(flops) - log10(v->y_lo)) / (log10(v->y_hi) - log10(v->y_lo));
    *dx = lx * (dots_w - 1);
    *dy = (1.0 - ly) * (dots_h - 1);
    const double eps = 1e-9; /* a point exactly on an edge is inside */
    return (lx >= -eps && lx <= 1 + eps && ly >= -eps && ly <= 1 + eps) ? 0 : -1;
}

/* ---- JSON ---------------------------------------------------------------------- */

cJSON *hw_roofline_json(const hw_roofline *r, const hw_rl_point *pts, int n)
{
    cJSON *j = dt_json_obj();
    dt_json_set_str(j, "gpu", r->gpu);
    dt_json_set_str(j, "dtype", hw_dtype_name(r->dtype));
    dt_json_set_num(j, "bandwidth_bytes_s", r->bw);
    dt_json_set_bool(j, "bandwidth_measured", r->ceil[0].measured);
    dt_json_set_num(j, "peak_flops_s", r->peak);
    dt_json_set_bool(j, "peak_measured", r->nceil > 1 && r->ceil[1].measured);
    dt_json_set_num(j, "ridge_ai", r->ridge);
    cJSON *cs = dt_json_arr();
    for (int i = 0; i < r->nceil; i++) {
        const hw_ceiling *c = &r->ceil[i];
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "label", c->label);
        dt_json_set_str(o, "kind", c->is_memory ? "memory" : "compute");
        if (!c->is_memory) {
            dt_json_set_str(o, "dtype", hw_dtype_name(c->dtype));
            dt_json_set_num(o, "ridge_ai", c->ridge);
        }
        dt_json_set_num(o, "value", c->value);
        dt_json_set_str(o, "unit", c->is_memory ? "B/s" : "FLOP/s");
        dt_json_set_bool(o, "measured", c->measured);
        cJSON_AddItemToArray(cs, o);
    }
    dt_json_set_take(j, "ceilings", cs);
    cJSON *ps = dt_json_arr();
    for (int i = 0; i < n; i++) {
        const hw_rl_point *p = &pts[i];
        cJSON *o = dt_json_obj();
        dt_json_set_str(o, "label", p->label);
        dt_json_set_num(o, "flops", p->flops);
        dt_json_set_num(o, "min_bytes", p->min_bytes);
        dt_json_set_num(o, "seconds", p->seconds);
        if (p->dram_bytes > 0)
            dt_json_set_num(o, "dram_bytes", p->dram_bytes);
        hw_rl_place pl;
        dt_err e = {0};
        if (hw_roofline_place(r, p, &pl, &e) != 0) {
            dt_json_set_str(o, "error", e.msg);
            cJSON_AddItemToArray(ps, o);
            continue;
        }
        dt_json_set_num(o, "ai_algorithmic", pl.ai_alg);
        if (pl.ai_ach > 0)
            dt_json_set_num(o, "ai_achieved", pl.ai_ach);
        else
            dt_json_set_take(o, "ai_achieved", cJSON_CreateNull());
        dt_json_set_num(o, "ai", pl.ai);
        dt_json_set_bool(o, "predicted", pl.predicted);
        dt_json_set_num(o, "flops_s", pl.flops_s);
        if (!pl.predicted) {
            dt_json_set_num(o, "bytes_s", pl.bytes_s);
            dt_json_set_num(o, "pct_of_bandwidth", pl.pct_bw);
        }
        dt_json_set_num(o, "roof_flops_s", pl.roof);
        dt_json_set_num(o, "pct_of_roof", pl.pct_roof);
        dt_json_set_str(o, "bound", pl.memory_bound ? "memory" : "compute");
        dt_json_set_bool(o, "below_floor", pl.below_floor);
        cJSON_AddItemToArray(ps, o);
    }
    dt_json_set_take(j, "points", ps);
    return j;
}
