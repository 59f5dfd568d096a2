/* plot.c -- roofline pictures: a braille or ASCII character grid, and an SVG document. */
#include "hardware/hardware.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the character grid ------------------------------------------------------- */

#define MARGIN 7 /* "100T" right-aligned in 5, a space, the axis */

typedef struct grid {
    int w, h;           /* figure, cells */
    int pc, pr, pw, ph; /* plot area, cells */
    int dw, dh;         /* plot area, dots */
    int utf8;
    char (*text)[5];     /* per figure cell: overlay text (one display cell), "" if none */
    unsigned char *bits; /* per plot cell: braille dots (utf8) */
    char *line;          /* per plot cell: ASCII line character (ascii), 0 if none */
} grid;

static void grid_init(grid *g, int w, int h, int utf8)
{
    memset(g, 0, sizeof *g);
    g->w = w;
    g->h = h;
    g->utf8 = utf8;
    g->pc = MARGIN;
    g->pr = 1;
    g->pw = w - MARGIN;
    g->ph = h - 3;
    g->dw = g->pw * (utf8 ? 2 : 1);
    g->dh = g->ph * (utf8 ? 4 : 1);
    g->text = dt_xcalloc((size_t)w * (size_t)h, sizeof *g->text);
    g->bits = dt_xcalloc((size_t)g->pw * (size_t)g->ph, 1);
    g->line = dt_xcalloc((size_t)g->pw * (size_t)g->ph, 1);
}

static void grid_free(grid *g)
{
    free(g->text);
    free(g->bits);
    free(g->line);
}

/* Set one dot of the plot area; ch is the ASCII stand-in for the line. */
static void dot(grid *g, int dx, int dy, char ch)
{
    if (dx < 0 || dy < 0 || dx >= g->dw || dy >= g->dh)
        return;
    if (g->utf8) {
        /* braille: dots 1-3 and 7 down the left column, 4-6 and 8 down the
         * right; bit k of U+2800 + bits is dot k + 1 */
        static const unsigned char bit[2][4] = {{0x01, 0x02, 0x04, 0x40}, {0x08, 0x10, 0x20, 0x80}};
        g->bits[(dy / 4) * g->pw + dx / 2] |= bit[dx % 2][dy % 4];
    } else {
        char *c = &g->line[dy * g->pw + dx];
        if (*c == 0 || ch == '/')
            *c = ch;
    }
}

/* Is a figure cell free of text and lines? */
static int blank(const grid *g, int col, int row)
{
    if (col < 0 || row < 0 || col >= g->w || row >= g->h || g->text[row * g->w + col][0])
        return 0;
    int c = col - g->pc, r = row - g->pr;
    if (c >= 0 && r >= 0 && c < g->pw && r < g->ph)
        return g->bits[r * g->pw + c] == 0 && g->line[r * g->pw + c] == 0;
    return 1;
}

static void put(grid *g, int col, int row, const char *s)
{
    if (col < 0 || row < 0 || col >= g->w || row >= g->h)
        return;
    snprintf(g->text[row * g->w + col], sizeof g->text[0], "%s", s);
}

/* Write ASCII text at (col, row) if every cell is blank and inside the
 * columns [lo, hi); returns 0 when written. */
static int place(grid *g, int col, int row, const char *s, int lo, int hi)
{
    int n = (int)strlen(s);
    if (col < lo || col + n > hi || row < 0 || row >= g->h)
        return -1;
    for (int i = 0; i < n; i++) {
        if (!blank(g, col + i, row))
            return -1;
    }
    for (int i = 0; i < n; i++) {
        char one[2] = {s[i], 0};
        put(g, col + i, row, one);
    }
    return 0;
}

/* Plot-area dot coordinates of (ai, flops); -1 outside the view. */
static int to_dots(const grid *g, const hw_rl_view *v, double ai, double flops, int *dx, int *dy)
{
    double fx, fy;
    int in = hw_rl_map(v, g->dw, g->dh, ai, flops, &fx, &fy);
    *dx = (int)lround(fx);
    *dy = (int)lround(fy);
    return in;
}

/* The AI at the centre of dot column dx. */
static double ai_at(const grid *g, const hw_rl_view *v, int dx)
{
    double span = log10(v->x_hi) - log10(v->x_lo);
    return pow(10.0, log10(v->x_lo) + span * dx / (g->dw - 1));
}

/* A ceiling as dots: y = min(value, ai * bw) sampled per dot column over
 * [ai_from, ai_to], consecutive samples joined vertically so that steep
 * segments stay connected; parts outside the view are clipped. */
static void draw_ceiling(grid *g, const hw_rl_view *v, const hw_roofline *r, const hw_ceiling *c,
                         double ai_to_max)
{
    int prev = -1;
    for (int dx = 0; dx < g->dw; dx++) {
        double ai = ai_at(g, v, dx);
        double y;
        char ch;
        if (c->is_memory) {
            /* the slope runs from the left edge to the highest roof */
            if (ai > ai_to_max * (1 + 1e-9)) {
                /* finish exactly at the knee column */
                break;
            }
            y = ai * r->bw;
            ch = '/';
        } else {
            if (ai < c->ridge * (1 - 1e-9)) {
                prev = -1;
                continue;
            }
            y = c->value;
            ch = '-';
        }
        int tx, ty;
        if (to_dots(g, v, ai, y, &tx, &ty) != 0 || ty < 0 || ty >= g->dh) {
            prev = -1;
            continue;
        }
        dot(g, dx, ty, ch);
        if (prev >= 0) {
            int a = prev < ty ? prev : ty, b = prev < ty ? ty : prev;
            for (int k = a + 1; k < b; k++)
                dot(g, dx, k, ch);
        }
        prev = ty;
    }
    /* the knee itself, so the slope visibly ends on the roof */
    if (c->is_memory) {
        int kx, ky;
        if (to_dots(g, v, ai_to_max, ai_to_max * r->bw, &kx, &ky) == 0)
            dot(g, kx, ky, '/');
    }
}

static void cell_of(const grid *g, int dx, int dy, int *col, int *row)
{
    *col = g->pc + (g->utf8 ? dx / 2 : dx);
    *row = g->pr + (g->utf8 ? dy / 4 : dy);
}

/* Decade labels: "1G", "10G", "100T"; "0.01", "1", "10k". */
static void tick_label(int k, int flops_axis, char *out, size_t len)
{
    if (flops_axis || k >= 3) {
        static const char *const pre[] = {"", "k", "M", "G", "T", "P", "E", "Z"};
        int p = k >= 0 ? k / 3 : -1;
        if (p >= 0 && p < (int)DT_ARRAY_LEN(pre))
            snprintf(out, len, "%d%s", k % 3 == 0 ? 1 : (k % 3 == 1 ? 10 : 100), pre[p]);
        else
            snprintf(out, len, "1e%d", k);
    } else if (k >= 0) {
        snprintf(out, len, "%d", k == 0 ? 1 : (k == 1 ? 10 : 100));
    } else if (k >= -4) {
        snprintf(out, len, "%.*f", -k, pow(10.0, k));
    } else {
        snprintf(out, len, "1e%d", k);
    }
}

static void draw_axes(grid *g, const hw_rl_view *v)
{
    const char *vbar = g->utf8 ? "\xe2\x94\x82" : "|";   /* │ */
    const char *ytick = g->utf8 ? "\xe2\x94\xa4" : "+";  /* ┤ */
    const char *corner = g->utf8 ? "\xe2\x94\x94" : "+"; /* └ */
    const char *hbar = g->utf8 ? "\xe2\x94\x80" : "-";   /* ─ */
    const char *xtick = g->utf8 ? "\xe2\x94\xac" : "+";  /* ┬ */
    int axis_col = g->pc - 1, axis_row = g->pr + g->ph;
    for (int r = g->pr; r < g->pr + g->ph; r++)
        put(g, axis_col, r, vbar);
    put(g, axis_col, axis_row, corner);
    for (int c = g->pc; c < g->w; c++)
        put(g, c, axis_row, hbar);
    /* y decades */
    for (int k = (int)ceil(log10(v->y_lo) - 1e-9); k <= (int)floor(log10(v->y_hi) + 1e-9); k++) {
        int dx, dy, col, row;
        to_dots(g, v, v->x_lo, pow(10.0, k), &dx, &dy);
        cell_of(g, 0, dy, &col, &row);
        if (row < g->pr || row >= g->pr + g->ph)
            continue;
        if (strcmp(g->text[row * g->w + axis_col], ytick) == 0)
            continue; /* two decades on one row: keep the first */
        put(g, axis_col, row, ytick);
        char lab[16];
        tick_label(k, 1, lab, sizeof lab);
        int n = (int)strlen(lab);
        if (n <= axis_col - 1)
            place(g, axis_col - 1 - n, row, lab, 0, axis_col);
    }
    /* x decades */
    int last_end = -1;
    for (int k = (int)ceil(log10(v->x_lo) - 1e-9); k <= (int)floor(log10(v->x_hi) + 1e-9); k++) {
        int dx, dy, col, row;
        to_dots(g, v, pow(10.0, k), v->y_lo, &dx, &dy);
        cell_of(g, dx, 0, &col, &row);
        put(g, col, axis_row, xtick);
        char lab[16];
        tick_label(k, 0, lab, sizeof lab);
        int n = (int)strlen(lab);
        int start = col - n / 2;
        if (start < 0)
            start = 0;
        if (start + n > g->w)
            start = g->w - n;
        if (start > last_end && place(g, start, g->h - 1, lab, 0, g->w) == 0)
            last_end = start + n;
    }
    const char *xunit = "FLOP/B";
    int n = (int)strlen(xunit);
    if (g->w - n > last_end + 1)
        place(g, g->w - n, g->h - 1, xunit, 0, g->w);
    place(g, 0, 0, "FLOP/s", 0, g->w);
}

static char marker_for(int i)
{
    return i < 9 ? (char)('1' + i) : (char)('a' + (i - 9));
}

int hw_roofline_render(const hw_roofline *r, const hw_rl_view *v, const hw_rl_point *pts, int n,
                       int width, int height, int utf8, dt_buf *out, hw_plot_info *info, dt_err *e)
{
    if (width < 30 || height < 8)
        return dt_err_set(e, "a roofline plot needs at least 30 x 8 cells, not %d x %d", width,
                          height);
    if (width > 1000 || height > 500)
        return dt_err_set(e, "a roofline plot of %d x %d cells is too large", width, height);
    if (n < 0 || n > HW_PLOT_MAX_POINTS)
        return dt_err_set(e, "at most %d points can be drawn, not %d", HW_PLOT_MAX_POINTS, n);
    if (!(v->x_lo > 0) || !(v->x_hi > v->x_lo) || !(v->y_lo > 0) || !(v->y_hi > v->y_lo))
        return dt_err_set(e, "the plot range must be positive and non-empty");
    hw_rl_place pl[HW_PLOT_MAX_POINTS];
    for (int i = 0; i < n; i++) {
        if (hw_roofline_place(r, &pts[i], &pl[i], e) != 0)
            return -1;
    }
    grid g;
    grid_init(&g, width, height, utf8);
    hw_plot_info inf;
    memset(&inf, 0, sizeof inf);
    inf.plot_col = g.pc;
    inf.plot_row = g.pr;
    inf.plot_w = g.pw;
    inf.plot_h = g.ph;

    /* ceilings: compute roofs first so that ASCII keeps '/' where they meet */
    double top_ridge = r->ridge;
    for (int i = 1; i < r->nceil; i++)
        top_ridge = fmax(top_ridge, r->ceil[i].ridge);
    for (int i = 1; i < r->nceil; i++)
        draw_ceiling(&g, v, r, &r->ceil[i], top_ridge);
    draw_ceiling(&g, v, r, &r->ceil[0], top_ridge);
    {
        int dx, dy;
        double fx, fy;
        hw_rl_map(v, g.dw, g.dh, r->ridge, r->peak, &fx, &fy);
        dx = (int)lround(fx);
        dy = (int)lround(fy);
        cell_of(&g, dx, dy, &inf.knee_col, &inf.knee_row);
    }
    draw_axes(&g, v);

    /* points: markers first, so that no label covers one */
    inf.npoints = n;
    for (int i = 0; i < n; i++) {
        int dx, dy;
        inf.marker[i] = marker_for(i);
        if (to_dots(&g, v, pl[i].ai, pl[i].flops_s, &dx, &dy) != 0) {
            inf.clipped[i] = 1;
            inf.nclipped++;
            inf.point_col[i] = inf.point_row[i] = -1;
            continue;
        }
        cell_of(&g, dx, dy, &inf.point_col[i], &inf.point_row[i]);
        char m[2] = {inf.marker[i], 0};
        put(&g, inf.point_col[i], inf.point_row[i], m);
    }
    int plo = g.pc, phi = g.w;
    for (int i = 0; i < n; i++) {
        if (inf.clipped[i] || pts[i].label[0] == '\0')
            continue;
        char lab[64];
        int c = inf.point_col[i], row = inf.point_row[i];
        snprintf(lab, sizeof lab, " %s", pts[i].label);
        if (place(&g, c + 1, row, lab, plo, phi) == 0)
            continue;
        snprintf(lab, sizeof lab, "%s ", pts[i].label);
        place(&g, c - (int)strlen(lab), row, lab, plo, phi);
    }
    /* ceiling labels: compute roofs right-aligned just above (or below)
     * their line; the memory roof under its slope, where the plot is empty,
     * from 40% of the way to the knee on */
    for (int i = 1; i < r->nceil; i++) {
        int dx, dy, col, row;
        if (to_dots(&g, v, v->x_hi, r->ceil[i].value, &dx, &dy) != 0)
            continue;
        cell_of(&g, dx, dy, &col, &row);
        int len = (int)strlen(r->ceil[i].label);
        if (place(&g, g.w - len, row - 1, r->ceil[i].label, plo, phi) != 0)
            place(&g, g.w - len, row + 1, r->ceil[i].label, plo, phi);
    }
    const char *ml = r->ceil[0].label;
    int kdx, kdy;
    to_dots(&g, v, r->ridge, r->peak, &kdx, &kdy);
    int start = kdx > 0 ? kdx * 2 / 5 : 0, done = 0;
    for (int pass = 0; pass < 2 && !done; pass++) {
        for (int dx = pass == 0 ? start : 0; dx < (pass == 0 ? g.dw : start) && !done; dx++) {
            double ai = ai_at(&g, v, dx);
            if (ai > r->ridge)
                break;
            int tx, ty, col, row;
            if (to_dots(&g, v, ai, ai * r->bw, &tx, &ty) != 0)
                continue;
            cell_of(&g, tx, ty, &col, &row);
            done = place(&g, col + 2, row + 1, ml, plo, phi) == 0;
        }
    }

    /* compose */
    for (int row = 0; row < g.h; row++) {
        for (int col = 0; col < g.w; col++) {
            const char *t = g.text[row * g.w + col];
            int c = col - g.pc, rr = row - g.pr;
            int in_plot = c >= 0 && rr >= 0 && c < g.pw && rr < g.ph;
            if (t[0]) {
                dt_buf_puts(out, t);
            } else if (in_plot && g.utf8 && g.bits[rr * g.pw + c]) {
                unsigned b = g.bits[rr * g.pw + c];
                char u[4] = {(char)0xe2, (char)(0xa0 | (b >> 6)), (char)(0x80 | (b & 0x3f)), 0};
                dt_buf_puts(out, u);
            } else if (in_plot && !g.utf8 && g.line[rr * g.pw + c]) {
                dt_buf_putc(out, g.line[rr * g.pw + c]);
            } else {
                dt_buf_putc(out, ' ');
            }
        }
        dt_buf_putc(out, '\n');
    }
    grid_free(&g);
    if (info != NULL)
        *info = inf;
    return 0;
}

/* ---- SVG ------------------------------------------------------------------------ */

static void xml_escape(dt_buf *b, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            dt_buf_puts(b, "&amp;");
            break;
        case '<':
            dt_buf_puts(b, "&lt;");
            break;
        case '>':
            dt_buf_puts(b, "&gt;");
            break;
        case '"':
            dt_buf_puts(b, "&quot;");
            break;
        case '\'':
            dt_buf_puts(b, "&apos;");
            break;
        default:
            /* control characters are not allowed in XML 1.0 */
            if ((unsigned char)*s >= 0x20 || *s == '\t' || *s == '\n')
                dt_buf_putc(b, *s);
        }
    }
}

typedef struct frame {
    double l, t, w, h; /* plot area, px */
    const hw_rl_view *v;
} frame;

static void px(const frame *f, double ai, double flops, double *x, double *y)
{
    double fx, fy;
    /* map onto w + 1 by h + 1 "dots" so that fractions are pixels */
    hw_rl_map(f->v, (int)f->w + 1, (int)f->h + 1, ai, flops, &fx, &fy);
    *x = f->l + fx;
    *y = f->t + fy;
}

int hw_roofline_svg(const hw_roofline *r, const hw_rl_view *v, const hw_rl_point *pts, int n,
                    int width, int height, dt_buf *out, dt_err *e)
{
    if (width < 200 || height < 150 || width > 10000 || height > 10000)
        return dt_err_set(e, "an SVG roofline needs 200 x 150 to 10000 x 10000 pixels, not %d x %d",
                          width, height);
    if (!(v->x_lo > 0) || !(v->x_hi > v->x_lo) || !(v->y_lo > 0) || !(v->y_hi > v->y_lo))
        return dt_err_set(e, "the plot range must be positive and non-empty");
    hw_rl_place *pl = dt_xcalloc((size_t)(n > 0 ? n : 1), sizeof *pl);
    for (int i = 0; i < n; i++) {
        if (hw_roofline_place(r, &pts[i], &pl[i], e) != 0) {
            free(pl);
            return -1;
        }
    }
    frame f = {80, 40, width - 80 - 30, height - 40 - 60, v};
    dt_buf_puts(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    dt_buf_printf(out,
                  "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
                  "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n",
                  width, height, width, height);
    dt_buf_puts(out, "<style>.axis{stroke:#000;stroke-width:1}.grid{stroke:#ddd;stroke-width:1}"
                     ".ceiling{fill:none;stroke:#c0392b;stroke-width:2}"
                     ".ceiling.memory{stroke:#2c3e50}.point{fill:#2980b9;stroke:#1a5276}"
                     ".point.predicted{fill:none}</style>\n");
    dt_buf_printf(out, "<rect width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", width, height);
    dt_buf_puts(out, "<text x=\"80\" y=\"24\" font-size=\"14\">Roofline: ");
    xml_escape(out, r->gpu_full);
    dt_buf_printf(out, " (%s)</text>\n", hw_dtype_name(r->dtype));

    /* grid, ticks and labels per decade */
    for (int k = (int)ceil(log10(v->x_lo) - 1e-9); k <= (int)floor(log10(v->x_hi) + 1e-9); k++) {
        double x, y;
        px(&f, pow(10.0, k), v->y_lo, &x, &y);
        char lab[16];
        tick_label(k, 0, lab, sizeof lab);
        dt_buf_printf(out,
                      "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                      x, f.t, x, f.t + f.h, x, f.t + f.h + 16, lab);
    }
    for (int k = (int)ceil(log10(v->y_lo) - 1e-9); k <= (int)floor(log10(v->y_hi) + 1e-9); k++) {
        double x, y;
        px(&f, v->x_lo, pow(10.0, k), &x, &y);
        char lab[16];
        tick_label(k, 1, lab, sizeof lab);
        dt_buf_printf(out,
                      "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
                      f.l, y, f.l + f.w, y, f.l - 6, y + 4, lab);
    }
    dt_buf_printf(out,
                  "<line class=\"axis\" id=\"x-axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                  "y2=\"%.1f\"/>\n"
                  "<line class=\"axis\" id=\"y-axis\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                  "y2=\"%.1f\"/>\n",
                  f.l, f.t + f.h, f.l + f.w, f.t + f.h, f.l, f.t, f.l, f.t + f.h);
    dt_buf_printf(out,
                  "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">Arithmetic intensity "
                  "(FLOP/byte)</text>\n"
                  "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 "
                  "%.1f)\">Performance (FLOP/s)</text>\n",
                  f.l + f.w / 2, f.t + f.h + 40, f.t + f.h / 2, f.t + f.h / 2);

    /* ceilings: each clipped to the view in log space, where both are lines */
    double top_ridge = r->ridge;
    for (int i = 1; i < r->nceil; i++)
        top_ridge = fmax(top_ridge, r->ceil[i].ridge);
    for (int i = 0; i < r->nceil; i++) {
        const hw_ceiling *c = &r->ceil[i];
        double a0, a1;
        if (c->is_memory) {
            a0 = fmax(v->x_lo, v->y_lo / r->bw);
            a1 = fmin(fmin(top_ridge, v->x_hi), v->y_hi / r->bw);
        } else {
            a0 = fmax(c->ridge, v->x_lo);
            a1 = v->x_hi;
            if (c->value < v->y_lo || c->value > v->y_hi)
                a1 = a0 / 2; /* out of view: nothing to draw */
        }
        if (!(a1 > a0))
            continue;
        double x0, y0, x1, y1;
        px(&f, a0, c->is_memory ? a0 * r->bw : c->value, &x0, &y0);
        px(&f, a1, c->is_memory ? a1 * r->bw : c->value, &x1, &y1);
        dt_buf_printf(out,
                      "<polyline class=\"ceiling%s\" points=\"%.1f,%.1f %.1f,%.1f\"/>\n"
                      "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">",
                      c->is_memory ? " memory" : "", x0, y0, x1, y1, c->is_memory ? x0 + 6 : x1 - 4,
                      c->is_memory ? y0 - 8 : y1 - 6, c->is_memory ? "start" : "end");
        xml_escape(out, c->label);
        dt_buf_puts(out, "</text>\n");
    }
    /* points */
    for (int i = 0; i < n; i++) {
        double fx, fy;
        if (hw_rl_map(v, 2, 2, pl[i].ai, pl[i].flops_s, &fx, &fy) != 0)
            continue; /* outside the view */
        double x, y;
        px(&f, pl[i].ai, pl[i].flops_s, &x, &y);
        dt_buf_printf(out,
                      "<circle class=\"point%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"5\"/>\n"
                      "<text x=\"%.1f\" y=\"%.1f\">",
                      pl[i].predicted ? " predicted" : "", x, y, x + 8, y - 6);
        xml_escape(out, pts[i].label);
        dt_buf_puts(out, "</text>\n");
    }
    dt_buf_puts(out, "</svg>\n");
    free(pl);
    return 0;
}
