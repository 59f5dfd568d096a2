/* test_roofline.c -- the roofline model, its character-grid geometry and the SVG writer. */
#include "tests/hardware/hwtest.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

TestSuite(roofline, .init = hwt_setup, .fini = hwt_teardown);

static void model(hw_roofline *r, const char *gpu, hw_dtype t, unsigned extra)
{
    hw_spec *g = hwt_load(gpu);
    dt_err e = {0};
    cr_assert_eq(hw_roofline_init(r, g, t, extra, 1, &e), 0, "%s", e.msg);
    hw_spec_free(g);
}

static hw_rl_point point(const char *label, double flops, double bytes, double seconds, double dram)
{
    hw_rl_point p;
    memset(&p, 0, sizeof p);
    snprintf(p.label, sizeof p.label, "%s", label);
    p.flops = flops;
    p.min_bytes = bytes;
    p.seconds = seconds;
    p.dram_bytes = dram;
    return p;
}

Test(roofline, ceilings_and_ridge_should_come_from_the_spec)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 1u << HW_FP64);
    cr_assert_float_eq(r.bw, 4.8e12, 1);
    cr_assert_float_eq(r.peak, 67e12, 1);
    cr_assert_float_eq(r.ridge, 67.0 / 4.8, 1e-12);
    cr_assert_eq(r.nceil, 3);
    cr_assert_eq(r.ceil[0].is_memory, 1);
    cr_assert_eq(r.ceil[1].dtype, HW_FP32);
    cr_assert_eq(r.ceil[2].dtype, HW_FP64);
    cr_assert_float_eq(r.ceil[2].ridge, 34.0 / 4.8, 1e-12);
    cr_assert_str_eq(r.ceil[0].label, "HBM3e 4.80 TB/s");
    cr_assert_str_eq(r.ceil[1].label, "fp32 67.0 TFLOP/s");
    cr_assert_float_eq(hw_roofline_attainable(&r, 1.0), 4.8e12, 1);
    cr_assert_float_eq(hw_roofline_attainable(&r, 1000.0), 67e12, 1);
}

Test(roofline, a_part_without_the_unit_should_say_what_it_has)
{
    hw_spec *g = hwt_load("v100");
    hw_roofline r;
    dt_err e = {0};
    cr_assert_eq(hw_roofline_init(&r, g, HW_TF32, 0, 1, &e), -1);
    cr_assert(strstr(e.msg, "v100 has no tf32 units") != NULL, "%s", e.msg);
    cr_assert(strstr(e.msg, "fp16") != NULL, "%s", e.msg);
    /* an unsupported extra is skipped, not an error */
    cr_assert_eq(hw_roofline_init(&r, g, HW_FP32, 1u << HW_FP8 | 1u << HW_FP16, 1, &e), 0);
    cr_assert_eq(r.nceil, 3);
    hw_spec_free(g);
}

Test(roofline, calibrated_rates_should_replace_the_datasheet)
{
    hw_spec *g = hwt_load("a100-80gb-sxm");
    double tf[HW_NDTYPES] = {0};
    tf[HW_FP64] = 9.0;
    cr_assert_eq(hw_set_measured(g, 1800, tf, "test", NULL), 0);
    hw_roofline r;
    cr_assert_eq(hw_roofline_init(&r, g, HW_FP64, 0, 1, NULL), 0);
    cr_assert_float_eq(r.bw, 1.8e12, 1);
    cr_assert_float_eq(r.peak, 9e12, 1);
    cr_assert_eq(r.ceil[0].measured, 1);
    cr_assert(strstr(r.ceil[0].label, "(measured)") != NULL);
    cr_assert_eq(hw_roofline_init(&r, g, HW_FP64, 0, 0, NULL), 0);
    cr_assert_float_eq(r.bw, 2.039e12, 1);
    cr_assert_float_eq(r.peak, 9.7e12, 1);
    hw_spec_free(g);
}

Test(roofline, placement_should_give_intensity_percent_and_bound)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 0);
    hw_rl_place pl;
    /* SpMV-like: 2 GFLOP over 12 GB in 3 ms: AI 1/6, 667 GFLOP/s of an 800 GFLOP/s
     * roof (AI x 4.8 TB/s) = 83.3%, 4 TB/s = 83.3% of bandwidth, memory-bound */
    hw_rl_point p = point("spmv", 2e9, 12e9, 3e-3, 0);
    cr_assert_eq(hw_roofline_place(&r, &p, &pl, NULL), 0);
    cr_assert_float_eq(pl.ai_alg, 1.0 / 6, 1e-12);
    cr_assert_float_eq(pl.ai_ach, 0, 0);
    cr_assert_float_eq(pl.flops_s, 2e9 / 3e-3, 1);
    cr_assert_float_eq(pl.roof, 0.8e12, 1);
    cr_assert_float_eq(pl.pct_roof, 100.0 * (2e9 / 3e-3) / 0.8e12, 1e-9);
    cr_assert_float_eq(pl.pct_bw, 100.0 * 4e12 / 4.8e12, 1e-9);
    cr_assert_eq(pl.memory_bound, 1);
    cr_assert_eq(pl.below_floor, 0);
    /* measured DRAM bytes give the achieved intensity, used for placing */
    p = point("gemm", 2e12, 3e9, 0.05, 4e9);
    cr_assert_eq(hw_roofline_place(&r, &p, &pl, NULL), 0);
    cr_assert_float_eq(pl.ai_alg, 2e12 / 3e9, 1e-9);
    cr_assert_float_eq(pl.ai_ach, 500, 1e-9);
    cr_assert_float_eq(pl.ai, 500, 1e-9);
    cr_assert_eq(pl.memory_bound, 0);
    cr_assert_float_eq(pl.pct_roof, 100.0 * 40e12 / 67e12, 1e-9);
    /* faster than moving the minimum bytes at peak bandwidth: flagged */
    p = point("cheat", 2e9, 12e9, 1e-3, 0);
    cr_assert_eq(hw_roofline_place(&r, &p, &pl, NULL), 0);
    cr_assert_eq(pl.below_floor, 1);
    /* no time: a prediction on the roof */
    p = point("plan", 1e9, 1e8, 0, 0);
    cr_assert_eq(hw_roofline_place(&r, &p, &pl, NULL), 0);
    cr_assert_eq(pl.predicted, 1);
    cr_assert_float_eq(pl.flops_s, 48e12, 1);
    /* nonsense inputs */
    dt_err e = {0};
    p = point("bad", 0, 1, 1, 0);
    cr_assert_eq(hw_roofline_place(&r, &p, &pl, &e), -1);
    cr_assert(strstr(e.msg, "bad: flops") != NULL, "%s", e.msg);
    p = point("bad", 1, 1, -1, 0);
    cr_assert_eq(hw_roofline_place(&r, &p, &pl, &e), -1);
}

Test(roofline, decades_should_span_equal_distances)
{
    hw_rl_view v = {0.01, 100, 1e10, 1e14};
    double x[5], y[5];
    for (int k = 0; k < 5; k++) {
        double dy;
        cr_assert_eq(hw_rl_map(&v, 161, 81, pow(10, k - 2), 1e12, &x[k], &dy), 0);
        double dx;
        cr_assert_eq(hw_rl_map(&v, 161, 81, 1, pow(10, 10 + k), &dx, &y[k]), 0);
    }
    cr_assert_float_eq(x[0], 0, 1e-9);
    cr_assert_float_eq(x[4], 160, 1e-9);
    cr_assert_float_eq(y[0], 80, 1e-9); /* the bottom */
    cr_assert_float_eq(y[4], 0, 1e-9);  /* the top */
    for (int k = 1; k < 5; k++) {
        cr_assert_float_eq(x[k] - x[k - 1], 40, 1e-9);
        cr_assert_float_eq(y[k - 1] - y[k], 20, 1e-9);
    }
    /* 2x is log10(2) of a decade, not half of it */
    double dx2, dy2;
    hw_rl_map(&v, 161, 81, 0.02, 1e12, &dx2, &dy2);
    cr_assert_float_eq(dx2, 40 * log10(2.0), 1e-9);
    cr_assert_eq(hw_rl_map(&v, 161, 81, 1000, 1e12, &dx2, &dy2), -1);
    cr_assert_eq(hw_rl_map(&v, 161, 81, 1, 1e9, &dx2, &dy2), -1);
}

/* The display cells of one line: UTF-8 code points (every character the
 * renderer draws is one cell wide). */
static int cells(const char *s, size_t n)
{
    int c = 0;
    for (size_t i = 0; i < n; i++)
        c += ((unsigned char)s[i] & 0xc0) != 0x80;
    return c;
}

/* The UTF-8 character at (col, row) of a rendered figure, into out. */
static void char_at(const char *text, int col, int row, char out[8])
{
    const char *p = text;
    for (int r = 0; r < row; r++)
        p = strchr(p, '\n') + 1;
    for (int c = 0; c < col; c++) {
        p++;
        while (((unsigned char)*p & 0xc0) == 0x80)
            p++;
    }
    int n = 1;
    while (((unsigned char)p[n] & 0xc0) == 0x80)
        n++;
    memcpy(out, p, (size_t)n);
    out[n] = '\0';
}

static void check_shape(const char *text, int width, int height)
{
    int lines = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        cr_assert_not_null(nl, "the last line lacks its newline");
        cr_assert_eq(cells(p, (size_t)(nl - p)), width, "line %d: %.*s", lines, (int)(nl - p), p);
        lines++;
        p = nl + 1;
    }
    cr_assert_eq(lines, height);
}

Test(roofline, a_point_on_the_ridge_should_land_on_the_knee)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 0);
    hw_rl_view v;
    hw_rl_view_default(&r, &v);
    cr_assert_float_eq(v.x_lo, 0.01, 1e-12);
    cr_assert_float_eq(v.x_hi, 100, 1e-9);
    cr_assert_float_eq(v.y_lo, 1e10, 1);
    cr_assert_float_eq(v.y_hi, 1e14, 1);
    /* at the ridge intensity and exactly at peak: time = flops / peak */
    double flops = 1e12;
    hw_rl_point p = point("knee", flops, flops / r.ridge, flops / r.peak, 0);
    for (int utf8 = 0; utf8 <= 1; utf8++) {
        dt_buf out = DT_BUF_INIT;
        hw_plot_info info;
        dt_err e = {0};
        cr_assert_eq(hw_roofline_render(&r, &v, &p, 1, 80, 24, utf8, &out, &info, &e), 0, "%s",
                     e.msg);
        check_shape(dt_buf_str(&out), 80, 24);
        cr_assert_eq(info.clipped[0], 0);
        cr_assert_eq(info.point_col[0], info.knee_col);
        cr_assert_eq(info.point_row[0], info.knee_row);
        char ch[8];
        char_at(dt_buf_str(&out), info.knee_col, info.knee_row, ch);
        cr_assert_str_eq(ch, "1");
        /* the knee is where the plot says: ridge 13.96 is log10(13.96) + 2 = 3.145
         * of 4 decades across, peak 6.7e13 is 3.826 of 4 decades up */
        int dots_w = info.plot_w * (utf8 ? 2 : 1), dots_h = info.plot_h * (utf8 ? 4 : 1);
        int kx = (int)lround((log10(r.ridge) + 2) / 4 * (dots_w - 1));
        int ky = (int)lround((1 - (log10(r.peak) - 10) / 4) * (dots_h - 1));
        cr_assert_eq(info.knee_col, info.plot_col + (utf8 ? kx / 2 : kx));
        cr_assert_eq(info.knee_row, info.plot_row + (utf8 ? ky / 4 : ky));
        dt_buf_free(&out);
    }
}

Test(roofline, ceilings_should_be_drawn_where_the_model_puts_them)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 0);
    hw_rl_view v;
    hw_rl_view_default(&r, &v);
    dt_buf out = DT_BUF_INIT;
    hw_plot_info info;
    cr_assert_eq(hw_roofline_render(&r, &v, NULL, 0, 80, 24, 0, &out, &info, NULL), 0);
    const char *t = dt_buf_str(&out);
    /* flat roof: every cell from past the knee to the right edge on the knee's row
     * (the ceiling label sits on the row above) */
    char ch[8];
    for (int c = info.knee_col + 1; c < info.plot_col + info.plot_w; c++) {
        char_at(t, c, info.knee_row, ch);
        cr_assert_str_eq(ch, "-", "column %d", c);
    }
    /* memory slope: at AI = ridge / 100 it is two decades below the roof */
    double fx, fy;
    hw_rl_map(&v, info.plot_w, info.plot_h, r.ridge / 100, 1, &fx, &fy);
    int col = (int)lround(fx); /* the column, and the AI at its centre */
    double ai = pow(10, log10(v.x_lo) + col * (log10(v.x_hi) - log10(v.x_lo)) / (info.plot_w - 1));
    hw_rl_map(&v, info.plot_w, info.plot_h, ai, ai * r.bw, &fx, &fy);
    cr_assert_eq((int)lround(fx), col);
    char_at(t, info.plot_col + col, info.plot_row + (int)lround(fy), ch);
    cr_assert_str_eq(ch, "/");
    /* and nothing above the roof at the right edge */
    char_at(t, info.plot_col + info.plot_w - 1, info.knee_row - 2, ch);
    cr_assert_str_eq(ch, " ");
    /* ASCII mode is ASCII */
    for (const unsigned char *p = (const unsigned char *)t; *p; p++)
        cr_assert_lt(*p, 0x80);
    /* UTF-8 mode draws braille (U+2800..U+28FF = E2 A0..A3 xx) and box axes */
    dt_buf_reset(&out);
    cr_assert_eq(hw_roofline_render(&r, &v, NULL, 0, 80, 24, 1, &out, &info, NULL), 0);
    cr_assert(strstr(dt_buf_str(&out), "\xe2\xa0") != NULL ||
              strstr(dt_buf_str(&out), "\xe2\xa1") != NULL ||
              strstr(dt_buf_str(&out), "\xe2\xa2") != NULL ||
              strstr(dt_buf_str(&out), "\xe2\xa3") != NULL);
    cr_assert(strstr(dt_buf_str(&out), "\xe2\x94\x94") != NULL); /* └ */
    cr_assert(strstr(dt_buf_str(&out), "fp32 67.0 TFLOP/s") != NULL);
    dt_buf_free(&out);
}

Test(roofline, a_decade_should_be_the_same_number_of_cells)
{
    hw_roofline r;
    model(&r, "t4", HW_FP32, 0);
    /* 4 decades across 81 dots (ASCII, 81 columns of plot: width 88) and 4 decades
     * down 21 rows (height 24): 20 columns and 5 rows per decade */
    hw_rl_view v = {0.01, 100, 1e9, 1e13};
    dt_buf out = DT_BUF_INIT;
    hw_plot_info info;
    cr_assert_eq(hw_roofline_render(&r, &v, NULL, 0, 88, 24, 0, &out, &info, NULL), 0);
    cr_assert_eq(info.plot_w, 81);
    cr_assert_eq(info.plot_h, 21);
    /* x ticks on the axis row and y ticks on the axis column */
    int axis_row = info.plot_row + info.plot_h, axis_col = info.plot_col - 1;
    int xt[8], nx = 0, yt[8], ny = 0;
    char ch[8];
    for (int c = info.plot_col; c < 88; c++) {
        char_at(dt_buf_str(&out), c, axis_row, ch);
        if (strcmp(ch, "+") == 0 && nx < 8)
            xt[nx++] = c;
    }
    for (int row = info.plot_row; row < axis_row; row++) {
        char_at(dt_buf_str(&out), axis_col, row, ch);
        if (strcmp(ch, "+") == 0 && ny < 8)
            yt[ny++] = row;
    }
    cr_assert_eq(nx, 5);
    cr_assert_eq(ny, 5);
    for (int k = 1; k < 5; k++) {
        cr_assert_eq(xt[k] - xt[k - 1], 20);
        cr_assert_eq(yt[k] - yt[k - 1], 5);
    }
    cr_assert(strstr(dt_buf_str(&out), "0.01") != NULL);
    cr_assert(strstr(dt_buf_str(&out), "10T") != NULL);
    dt_buf_free(&out);
}

Test(roofline, points_outside_the_view_should_be_clipped_and_counted)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 0);
    hw_rl_view v;
    hw_rl_view_default(&r, &v);
    hw_rl_point p[3] = {
        point("in", 2e9, 12e9, 3e-3, 0),
        point("slow", 1e6, 1e6, 1.0, 0),  /* 1 MFLOP/s: below the floor of the view */
        point("dense", 1e15, 1e9, 50, 0), /* AI 1e6: right of the view */
    };
    dt_buf out = DT_BUF_INIT;
    hw_plot_info info;
    cr_assert_eq(hw_roofline_render(&r, &v, p, 3, 80, 24, 1, &out, &info, NULL), 0);
    cr_assert_eq(info.nclipped, 2);
    cr_assert_eq(info.clipped[0], 0);
    cr_assert_eq(info.clipped[1], 1);
    cr_assert_eq(info.clipped[2], 1);
    cr_assert_eq(info.point_col[1], -1);
    char ch[8];
    char_at(dt_buf_str(&out), info.point_col[0], info.point_row[0], ch);
    cr_assert_str_eq(ch, "1");
    /* clipped points leave no trace: the figure equals the one without them */
    dt_buf alone = DT_BUF_INIT;
    cr_assert_eq(hw_roofline_render(&r, &v, p, 1, 80, 24, 1, &alone, NULL, NULL), 0);
    cr_assert_str_eq(dt_buf_str(&out), dt_buf_str(&alone));
    dt_buf_free(&alone);
    /* fitting the view to the points brings them in */
    hw_rl_place pl[3];
    for (int i = 0; i < 3; i++)
        cr_assert_eq(hw_roofline_place(&r, &p[i], &pl[i], NULL), 0);
    hw_rl_view_fit(&v, pl, 3);
    cr_assert_leq(v.y_lo, 1e6);
    cr_assert_geq(v.x_hi, 1e6);
    dt_buf_reset(&out);
    cr_assert_eq(hw_roofline_render(&r, &v, p, 3, 80, 24, 1, &out, &info, NULL), 0);
    cr_assert_eq(info.nclipped, 0);
    dt_buf_free(&out);
}

Test(roofline, render_should_refuse_a_grid_too_small)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 0);
    hw_rl_view v;
    hw_rl_view_default(&r, &v);
    dt_buf out = DT_BUF_INIT;
    dt_err e = {0};
    cr_assert_eq(hw_roofline_render(&r, &v, NULL, 0, 20, 5, 1, &out, NULL, &e), -1);
    cr_assert(strstr(e.msg, "30 x 8") != NULL, "%s", e.msg);
    cr_assert_eq(out.len, 0);
    /* the smallest allowed still has the exact shape */
    cr_assert_eq(hw_roofline_render(&r, &v, NULL, 0, 30, 8, 1, &out, NULL, &e), 0, "%s", e.msg);
    check_shape(dt_buf_str(&out), 30, 8);
    dt_buf_free(&out);
}

/* ---- a minimal XML check: tags balance, and counts by element and class ---- */

typedef struct svg_stats {
    int ok;
    char err[128];
    int svg_root, polyline_ceiling, circle_point, axis_lines, texts;
} svg_stats;

static int has_class(const char *tag, size_t len, const char *cls)
{
    char want[64];
    snprintf(want, sizeof want, "class=\"%s", cls);
    const char *p = tag;
    while ((p = strstr(p, want)) != NULL && p < tag + len) {
        char next = p[strlen(want)];
        if (next == '"' || next == ' ')
            return 1;
        p++;
    }
    return 0;
}

static svg_stats parse_svg(const char *s)
{
    svg_stats st;
    memset(&st, 0, sizeof st);
    char stack[64][32];
    int depth = 0, seen_root = 0;
    const char *p = s;
    while ((p = strchr(p, '<')) != NULL) {
        const char *end = strchr(p, '>');
        if (end == NULL) {
            snprintf(st.err, sizeof st.err, "unterminated tag");
            return st;
        }
        size_t len = (size_t)(end - p);
        if (p[1] == '?' || p[1] == '!') {
            p = end + 1;
            continue;
        }
        /* attribute values must not hold raw '<' */
        if (memchr(p + 1, '<', len - 1) != NULL) {
            snprintf(st.err, sizeof st.err, "'<' inside a tag");
            return st;
        }
        int closing = p[1] == '/', selfclose = end[-1] == '/';
        const char *n0 = p + 1 + closing;
        size_t nl = strcspn(n0, " \t\n/>");
        char name[32];
        snprintf(name, sizeof name, "%.*s", (int)(nl < 31 ? nl : 31), n0);
        if (closing) {
            if (depth == 0 || strcmp(stack[depth - 1], name) != 0) {
                snprintf(st.err, sizeof st.err, "</%s> closes %s", name,
                         depth ? stack[depth - 1] : "nothing");
                return st;
            }
            depth--;
        } else {
            if (depth == 0 && seen_root) {
                snprintf(st.err, sizeof st.err, "second root <%s>", name);
                return st;
            }
            if (depth == 0)
                seen_root = 1;
            st.svg_root += depth == 0 && strcmp(name, "svg") == 0;
            st.polyline_ceiling += strcmp(name, "polyline") == 0 && has_class(p, len, "ceiling");
            st.circle_point += strcmp(name, "circle") == 0 && has_class(p, len, "point");
            st.axis_lines += strcmp(name, "line") == 0 && has_class(p, len, "axis");
            st.texts += strcmp(name, "text") == 0;
            if (!selfclose) {
                if (depth == 64) {
                    snprintf(st.err, sizeof st.err, "too deep");
                    return st;
                }
                snprintf(stack[depth++], sizeof stack[0], "%s", name);
            }
        }
        p = end + 1;
    }
    if (depth != 0) {
        snprintf(st.err, sizeof st.err, "<%s> never closed", stack[depth - 1]);
        return st;
    }
    /* text outside tags must not hold a bare '&' that is not an entity */
    for (const char *q = s; (q = strchr(q, '&')) != NULL; q++) {
        if (strncmp(q, "&amp;", 5) && strncmp(q, "&lt;", 4) && strncmp(q, "&gt;", 4) &&
            strncmp(q, "&quot;", 6) && strncmp(q, "&apos;", 6)) {
            snprintf(st.err, sizeof st.err, "bare '&'");
            return st;
        }
    }
    st.ok = seen_root;
    return st;
}

Test(roofline, the_svg_checker_should_catch_broken_documents)
{
    cr_assert_eq(parse_svg("<svg><g></svg>").ok, 0);
    cr_assert_eq(parse_svg("<svg><text>a & b</text></svg>").ok, 0);
    cr_assert_eq(parse_svg("<svg></svg><svg></svg>").ok, 0);
    cr_assert_eq(parse_svg("<svg><line class=\"axis\"/></svg>").ok, 1);
}

Test(roofline, svg_should_be_well_formed_with_axes_ceilings_and_points)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 1u << HW_FP64 | 1u << HW_FP16);
    hw_rl_view v;
    hw_rl_view_default(&r, &v);
    hw_rl_point p[3] = {
        point("spmv <csr> & co", 2e9, 12e9, 3e-3, 0), point("gemm", 2e12, 3e9, 0.05, 4e9),
        point("far", 1e6, 1e6, 1.0, 0), /* outside the view: no marker */
    };
    dt_buf out = DT_BUF_INIT;
    dt_err e = {0};
    cr_assert_eq(hw_roofline_svg(&r, &v, p, 3, 800, 560, &out, &e), 0, "%s", e.msg);
    svg_stats st = parse_svg(dt_buf_str(&out));
    cr_assert(st.ok, "%s", st.err);
    cr_assert_eq(st.svg_root, 1);
    cr_assert(strstr(dt_buf_str(&out), "<svg xmlns=\"http://www.w3.org/2000/svg\"") != NULL);
    cr_assert_eq(st.axis_lines, 2);
    cr_assert_eq(st.polyline_ceiling, r.nceil);
    cr_assert_eq(st.circle_point, 2);
    cr_assert(strstr(dt_buf_str(&out), "spmv &lt;csr&gt; &amp; co") != NULL);
    cr_assert(strstr(dt_buf_str(&out), "Arithmetic intensity") != NULL);
    dt_buf_free(&out);
    /* too small a picture is refused */
    cr_assert_eq(hw_roofline_svg(&r, &v, p, 1, 10, 10, &out, &e), -1);
    dt_buf_free(&out);
}

Test(roofline, json_should_place_every_point)
{
    hw_roofline r;
    model(&r, "h200", HW_FP32, 0);
    hw_rl_point p[2] = {point("spmv", 2e9, 12e9, 3e-3, 0), point("gemm", 2e12, 3e9, 0.05, 4e9)};
    cJSON *j = hw_roofline_json(&r, p, 2);
    cr_assert_float_eq(dt_json_num(j, "ridge_ai", 0), 67.0 / 4.8, 1e-9);
    const cJSON *pts = cJSON_GetObjectItemCaseSensitive(j, "points");
    cr_assert_eq(cJSON_GetArraySize(pts), 2);
    cr_assert_str_eq(dt_json_str(cJSON_GetArrayItem(pts, 0), "bound", ""), "memory");
    cr_assert_str_eq(dt_json_str(cJSON_GetArrayItem(pts, 1), "bound", ""), "compute");
    cr_assert_float_eq(dt_json_num(cJSON_GetArrayItem(pts, 1), "ai_achieved", 0), 500, 1e-9);
    cr_assert(
        cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(pts, 0), "ai_achieved")));
    cJSON_Delete(j);
}

Test(roofline, si_format_should_keep_three_digits)
{
    char b[32];
    cr_assert_str_eq(hw_fmt_si(4.8e12, b, sizeof b), "4.80 T");
    cr_assert_str_eq(hw_fmt_si(67e12, b, sizeof b), "67.0 T");
    cr_assert_str_eq(hw_fmt_si(989.5e12, b, sizeof b), "990 T");
    cr_assert_str_eq(hw_fmt_si(999.6e12, b, sizeof b), "1.00 P");
    cr_assert_str_eq(hw_fmt_si(12, b, sizeof b), "12.0 ");
}
