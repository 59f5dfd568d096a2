/* source.c -- the Source pane: the kernel with a diff against the previous
 * version (unified, or side by side when wide; changed words marked), and
 * the picker for any two versions. */
#include "tui/ui.h"

#include <stdlib.h>
#include <string.h>

#define GUTTER 7 /* "%5d %c" */

typedef struct src {
    tui_lines *out;
    const dt_diff *d;
    int width;
    int sbs;
    const char *sep;
} src;

/* Word spans are only worth showing when the lines are still alike: a line
 * rewritten from end to end reads better as a plain delete and insert. */
static int words_useful(const dt_diff_span *s, int n, int len)
{
    int marked = 0;
    for (int i = 0; i < n; i++)
        marked += s[i].len;
    return len == 0 || marked * 10 <= len * 7;
}

static void add_spans(tui_line *ln, int base, const dt_diff_span *s, int n, int limit, int role)
{
    for (int i = 0; i < n; i++) {
        int off = s[i].off, len = s[i].len;
        if (off >= limit)
            continue;
        if (off + len > limit)
            len = limit - off;
        tui_line_span(ln, base + off, len, role);
    }
}

/* One unified row. */
static void unified(src *c, dt_diff_op op, int ai, int bi, const dt_diff_span *ws, int nws)
{
    const dt_diff *d = c->d;
    const char *text = op == DT_DIFF_DELETE ? d->a_line[ai] : d->b_line[bi];
    int len = op == DT_DIFF_DELETE ? d->a_len[ai] : d->b_len[bi];
    dt_buf b = DT_BUF_INIT;
    dt_buf_printf(&b, "%5d %c", (op == DT_DIFF_DELETE ? ai : bi) + 1,
                  op == DT_DIFF_INSERT ? '+' : op == DT_DIFF_DELETE ? '-' : ' ');
    dt_buf_append(&b, text, (size_t)len);
    int role = op == DT_DIFF_INSERT ? TUI_R_ADD : op == DT_DIFF_DELETE ? TUI_R_DEL : TUI_R_NORMAL;
    tui_line *ln = tui_lines_add(c->out, b.data, (int)b.len, role);
    tui_line_span(ln, 0, 5, TUI_R_LINENO);
    /* tabs were expanded, so spans are only exact on lines without them */
    if (nws && memchr(text, '\t', (size_t)len) == NULL)
        add_spans(ln, GUTTER, ws, nws, len,
                  op == DT_DIFF_INSERT ? TUI_R_ADD_WORD : TUI_R_DEL_WORD);
    ln->tag = op == DT_DIFF_DELETE ? 0 : bi + 1;
    ln->tag2 = op == DT_DIFF_INSERT ? 0 : ai + 1;
    dt_buf_free(&b);
}

/* Append one half of a side-by-side row: gutter, text fitted to cols,
 * padding; returns the byte offset where the text starts and its length. */
static void half(dt_buf *b, int num, const char *text, int len, int cols, int *toff, int *tlen)
{
    if (num > 0)
        dt_buf_printf(b, "%4d ", num);
    else
        dt_buf_puts(b, "     ");
    int tc = cols - 5;
    if (tc < 1)
        tc = 1;
    /* tabs count four columns here, as tui_lines_add will expand them */
    char *exp = NULL;
    if (text && memchr(text, '\t', (size_t)len)) {
        dt_buf e = DT_BUF_INIT;
        int col = 0;
        for (int i = 0; i < len; i++) {
            if (text[i] == '\t') {
                do {
                    dt_buf_putc(&e, ' ');
                } while (++col % 4);
            } else {
                dt_buf_putc(&e, text[i]);
                col++;
            }
        }
        len = (int)e.len;
        exp = dt_buf_take(&e);
        text = exp;
    }
    int used = 0;
    int fit = text ? tui_fit(text, len, tc, &used) : 0;
    *toff = (int)b->len;
    *tlen = fit;
    if (fit)
        dt_buf_append(b, text, (size_t)fit);
    for (int i = used; i < tc; i++)
        dt_buf_putc(b, ' ');
    free(exp);
}

static void side(src *c, int ai, int bi, int role_a, int role_b, const dt_diff_span *wa, int nwa,
                 const dt_diff_span *wb, int nwb)
{
    const dt_diff *d = c->d;
    int lw = (c->width - 1) / 2, rw = c->width - 1 - lw;
    dt_buf b = DT_BUF_INIT;
    int ao, al, bo, bl;
    half(&b, ai >= 0 ? ai + 1 : 0, ai >= 0 ? d->a_line[ai] : NULL, ai >= 0 ? d->a_len[ai] : 0, lw,
         &ao, &al);
    int sep = (int)b.len;
    dt_buf_puts(&b, c->sep);
    int bstart = (int)b.len;
    half(&b, bi >= 0 ? bi + 1 : 0, bi >= 0 ? d->b_line[bi] : NULL, bi >= 0 ? d->b_len[bi] : 0, rw,
         &bo, &bl);
    tui_line *ln = tui_lines_add(c->out, b.data, (int)b.len, TUI_R_NORMAL);
    tui_line_span(ln, 0, 5, TUI_R_LINENO);
    tui_line_span(ln, sep, (int)strlen(c->sep), TUI_R_BORDER);
    tui_line_span(ln, bstart, 5, TUI_R_LINENO);
    if (ai >= 0 && role_a != TUI_R_NORMAL)
        tui_line_span(ln, ao, al, role_a);
    if (bi >= 0 && role_b != TUI_R_NORMAL)
        tui_line_span(ln, bo, bl, role_b);
    if (nwa && ai >= 0 && memchr(d->a_line[ai], '\t', (size_t)d->a_len[ai]) == NULL)
        add_spans(ln, ao, wa, nwa, al, TUI_R_DEL_WORD);
    if (nwb && bi >= 0 && memchr(d->b_line[bi], '\t', (size_t)d->b_len[bi]) == NULL)
        add_spans(ln, bo, wb, nwb, bl, TUI_R_ADD_WORD);
    ln->tag = bi >= 0 ? bi + 1 : 0;
    ln->tag2 = ai >= 0 ? ai + 1 : 0;
    dt_buf_free(&b);
}

/* A change block: ops[i..j) deletes then inserts; pairs get word marks. */
static void block(src *c, int i, int j)
{
    const dt_diff *d = c->d;
    int k = i;
    while (k < j && d->ops[k].op == DT_DIFF_DELETE)
        k++;
    int ndel = k - i, nins = j - k;
    int rows = ndel > nins ? ndel : nins;
    for (int r = 0; r < rows; r++) {
        int ai = r < ndel ? d->ops[i + r].a : -1;
        int bi = r < nins ? d->ops[k + r].b : -1;
        dt_diff_span *wa = NULL, *wb = NULL;
        int nwa = 0, nwb = 0;
        if (ai >= 0 && bi >= 0) {
            dt_diff_words(d->a_line[ai], d->a_len[ai], d->b_line[bi], d->b_len[bi], &wa, &nwa, &wb,
                          &nwb);
            if (!words_useful(wa, nwa, d->a_len[ai]) || !words_useful(wb, nwb, d->b_len[bi])) {
                nwa = nwb = 0;
            }
        }
        if (c->sbs) {
            side(c, ai, bi, TUI_R_DEL, TUI_R_ADD, wa, nwa, wb, nwb);
        }
        free(wa);
        free(wb);
    }
    if (c->sbs)
        return;
    /* unified: every delete, then every insert, each paired for words */
    for (int r = 0; r < ndel; r++) {
        int ai = d->ops[i + r].a;
        dt_diff_span *wa = NULL, *wb = NULL;
        int nwa = 0, nwb = 0;
        if (r < nins) {
            int bi = d->ops[k + r].b;
            dt_diff_words(d->a_line[ai], d->a_len[ai], d->b_line[bi], d->b_len[bi], &wa, &nwa, &wb,
                          &nwb);
            if (!words_useful(wa, nwa, d->a_len[ai]) || !words_useful(wb, nwb, d->b_len[bi]))
                nwa = 0;
        }
        unified(c, DT_DIFF_DELETE, ai, -1, wa, nwa);
        free(wa);
        free(wb);
    }
    for (int r = 0; r < nins; r++) {
        int bi = d->ops[k + r].b;
        dt_diff_span *wa = NULL, *wb = NULL;
        int nwa = 0, nwb = 0;
        if (r < ndel) {
            int ai = d->ops[i + r].a;
            dt_diff_words(d->a_line[ai], d->a_len[ai], d->b_line[bi], d->b_len[bi], &wa, &nwa, &wb,
                          &nwb);
            if (!words_useful(wa, nwa, d->a_len[ai]) || !words_useful(wb, nwb, d->b_len[bi]))
                nwb = 0;
        }
        unified(c, DT_DIFF_INSERT, -1, bi, wb, nwb);
        free(wa);
        free(wb);
    }
}

static void ops_range(src *c, int start, int end)
{
    const dt_diff *d = c->d;
    int i = start;
    while (i < end) {
        if (d->ops[i].op == DT_DIFF_EQUAL) {
            if (c->sbs)
                side(c, d->ops[i].a, d->ops[i].b, TUI_R_NORMAL, TUI_R_NORMAL, NULL, 0, NULL, 0);
            else
                unified(c, DT_DIFF_EQUAL, d->ops[i].a, d->ops[i].b, NULL, 0);
            i++;
            continue;
        }
        int j = i;
        while (j < end && d->ops[j].op != DT_DIFF_EQUAL)
            j++;
        block(c, i, j);
        i = j;
    }
}

static void plain(const tui_rev *r, tui_lines *out)
{
    const char *p = r->source;
    int no = 1;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        dt_buf b = DT_BUF_INIT;
        dt_buf_printf(&b, "%5d  ", no);
        dt_buf_append(&b, p, (size_t)len);
        tui_line *ln = tui_lines_add(out, b.data, (int)b.len, TUI_R_NORMAL);
        tui_line_span(ln, 0, 5, TUI_R_LINENO);
        ln->tag = no;
        ln->tag2 = no;
        dt_buf_free(&b);
        no++;
        if (nl == NULL)
            break;
        p = nl + 1;
    }
}

void tui_source_build(const tui_model *m, int from, int to, int width, int side_by_side,
                      int whole_file, int utf8, tui_lines *out)
{
    if (to < 0 || to >= m->nrevs) {
        tui_lines_add(out, "no kernel yet: it appears when the Code Generator writes one", -1,
                      TUI_R_DIM);
        return;
    }
    const tui_rev *b = &m->revs[to];
    if (from < 0 || from >= m->nrevs || from == to) {
        tui_lines_addf(out, TUI_R_HEADING, "kernel %s (step %d)", b->label, b->step);
        plain(b, out);
        return;
    }
    const tui_rev *a = &m->revs[from];
    dt_diff d;
    dt_diff_text(a->source, b->source, &d);
    tui_lines_addf(out, TUI_R_HEADING, "kernel %s (step %d) against %s (step %d): %s+%d -%d",
                   b->label, b->step, a->label, a->step,
                   d.ndel + d.nins == 0 ? "identical, " : "", d.nins, d.ndel);
    src c = {.out = out, .d = &d, .width = width, .sbs = side_by_side && width >= 40,
             .sep = utf8 ? "│" : "|"};
    dt_diff_hunk *h = NULL;
    int nh = d.ndel + d.nins == 0 ? 0 : dt_diff_hunks(&d, 3, &h);
    int done = 0; /* ops drawn */
    for (int i = 0; i < nh; i++) {
        if (whole_file)
            ops_range(&c, done, h[i].start);
        int first = out->n;
        if (!whole_file)
            tui_lines_addf(out, TUI_R_HUNK, "@@ -%d,%d +%d,%d @@",
                           h[i].alen ? h[i].a0 + 1 : h[i].a0, h[i].alen,
                           h[i].blen ? h[i].b0 + 1 : h[i].b0, h[i].blen);
        ops_range(&c, h[i].start, h[i].end);
        for (int k = first; k < out->n; k++)
            out->v[k].hunk = i + 1; /* per-hunk review finds its lines by this */
        done = h[i].end;
    }
    if (whole_file || nh == 0)
        ops_range(&c, done, d.nops);
    free(h);
    dt_diff_free(&d);
}

int tui_hunks_count(const char *a, const char *b)
{
    dt_diff d;
    dt_diff_text(a, b, &d);
    dt_diff_hunk *h = NULL;
    int n = d.ndel + d.nins == 0 ? 0 : dt_diff_hunks(&d, 3, &h);
    free(h);
    dt_diff_free(&d);
    return n;
}

char *tui_hunks_apply(const char *a, const char *b, const unsigned char *rejected, int n)
{
    dt_diff d;
    dt_diff_text(a, b, &d);
    dt_diff_hunk *h = NULL;
    int nh = d.ndel + d.nins == 0 ? 0 : dt_diff_hunks(&d, 3, &h);
    dt_buf out = DT_BUF_INIT;
    int k = 0; /* the hunk at or after op i */
    for (int i = 0; i < d.nops; i++) {
        while (k < nh && h[k].end <= i)
            k++;
        int rej = k < nh && i >= h[k].start && k < n && rejected[k];
        const dt_diff_line *op = &d.ops[i];
        if (op->op == DT_DIFF_EQUAL || (op->op == DT_DIFF_INSERT && !rej))
            dt_buf_append(&out, d.b_line[op->b], (size_t)d.b_len[op->b]);
        else if (op->op == DT_DIFF_DELETE && rej)
            dt_buf_append(&out, d.a_line[op->a], (size_t)d.a_len[op->a]);
        else
            continue;
        dt_buf_putc(&out, '\n');
    }
    /* the new text's last line keeps its (missing) newline */
    size_t bl = b ? strlen(b) : 0;
    if (out.len && bl && b[bl - 1] != '\n')
        out.data[--out.len] = '\0';
    free(h);
    dt_diff_free(&d);
    if (out.data == NULL)
        return dt_xstrdup("");
    return dt_buf_take(&out);
}

/* ---- the pane ---------------------------------------------------------------- */

static void build(tui_pane *p, tui_app *a, int width)
{
    tui_lines_clear(&p->lines);
    int from, to;
    tui_app_src_pair(a, &from, &to);
    tui_source_build(&a->model, from, to, width, a->lay.side_by_side, a->src_whole, a->utf8,
                     &p->lines);
    /* another pair of versions starts at the top */
    if (from != a->src_built_from || to != a->src_built_to) {
        p->top = 0;
        p->left = 0;
        a->src_built_from = from;
        a->src_built_to = to;
    }
    /* per-hunk review: a rejected hunk's new lines are struck (dimmed),
     * its old lines stay; its header says so */
    if (tui_app_hunk_review(a)) {
        for (int i = 0; i < p->lines.n; i++) {
            tui_line *ln = &p->lines.v[i];
            if (ln->hunk < 1 || ln->hunk > a->nhunk_rej || !a->hunk_rej[ln->hunk - 1])
                continue;
            if (ln->role == TUI_R_HUNK) {
                char *t = dt_xasprintf("%s  rejected: the old lines stay (x accepts)", ln->text);
                free(ln->text);
                ln->text = t;
                ln->len = (int)strlen(t);
                ln->role = TUI_R_REJECTED;
            } else if (ln->role == TUI_R_ADD) {
                ln->role = TUI_R_DIM;
            }
            for (int k = 0; k < ln->nspans; k++)
                if (ln->spans[k].role == TUI_R_ADD || ln->spans[k].role == TUI_R_ADD_WORD)
                    ln->spans[k].role = TUI_R_DIM;
        }
    }
    if (a->src_mark > 0) {
        for (int i = 0; i < p->lines.n; i++) {
            if (p->lines.v[i].tag == a->src_mark) {
                tui_line *ln = &p->lines.v[i];
                free(ln->spans);
                ln->spans = NULL;
                ln->nspans = 0;
                ln->role = TUI_R_MARK;
                if (a->src_jump == a->src_mark)
                    tui_pane_scroll_to(p, i);
                break;
            }
        }
        a->src_jump = 0;
    }
}

/* The next (dir 1) or previous change below/above the top line. */
static void next_change(tui_pane *p, int dir)
{
    int i = p->top + dir;
    /* skip the rest of the current block first */
    while (i >= 0 && i < p->lines.n &&
           (p->lines.v[i].role == TUI_R_ADD || p->lines.v[i].role == TUI_R_DEL))
        i += dir;
    for (; i >= 0 && i < p->lines.n; i += dir) {
        const tui_line *ln = &p->lines.v[i];
        int changed = ln->role == TUI_R_ADD || ln->role == TUI_R_DEL || ln->role == TUI_R_HUNK;
        for (int s = 0; !changed && s < ln->nspans; s++)
            changed = ln->spans[s].role == TUI_R_ADD || ln->spans[s].role == TUI_R_DEL;
        if (changed) {
            p->top = i > 2 ? i - 2 : 0;
            p->follow = 0;
            p->redraw = 1;
            return;
        }
    }
}

static int key(tui_pane *p, tui_app *a, int k)
{
    switch (k) {
    case 'd':
        a->src_whole = !a->src_whole;
        p->stale = 1;
        tui_app_flash(a, 0, a->src_whole ? "source: the whole file" : "source: changes only");
        return 1;
    case 'x': {
        /* the hunk in view: the first line from the top that has one */
        if (!tui_app_hunk_review(a)) {
            tui_app_flash(a, 1, "x marks hunks of a kernel awaiting review, shown against the "
                                "version before it");
            return 1;
        }
        int h = 0;
        for (int i = p->top; i < p->lines.n && i < p->top + tui_pane_rows(p) && h == 0; i++)
            h = p->lines.v[i].hunk;
        if (h < 1 || h > a->nhunk_rej) {
            tui_app_flash(a, 0, "no hunk in view: ] moves to the next change");
            return 1;
        }
        a->hunk_rej[h - 1] = !a->hunk_rej[h - 1];
        int n = 0;
        for (int i = 0; i < a->nhunk_rej; i++)
            n += a->hunk_rej[i];
        tui_app_flash(a, 0, "hunk %d of %d %s; %d rejected: a approves the rest as an edit", h,
                      a->nhunk_rej, a->hunk_rej[h - 1] ? "rejected" : "accepted again", n);
        p->stale = 1;
        return 1;
    }
    case ']':
        next_change(p, 1);
        return 1;
    case '[':
        next_change(p, -1);
        return 1;
    default:
        return tui_pane_key(p, a, k);
    }
}

static void note(tui_pane *p, tui_app *a, char *buf, size_t n)
{
    (void)p;
    int from, to;
    tui_app_src_pair(a, &from, &to);
    if (to < 0)
        return;
    int rej = 0;
    if (tui_app_hunk_review(a))
        for (int i = 0; i < a->nhunk_rej; i++)
            rej += a->hunk_rej[i];
    if (rej)
        snprintf(buf, n, "%s vs %s, %d of %d hunks rejected", a->model.revs[to].label,
                 a->model.revs[from].label, rej, a->nhunk_rej);
    else if (from >= 0 && from != to)
        snprintf(buf, n, "%s vs %s%s%s", a->model.revs[to].label, a->model.revs[from].label,
                 a->src_to >= 0 ? " (picked)" : "", a->src_whole ? "" : ", changes");
    else
        snprintf(buf, n, "%s", a->model.revs[to].label);
}

const tui_pane_ops tui_source_ops = {"Source", 0, build, key, note};

/* ---- the version picker ----------------------------------------------------------- */

/* Rows: 0 is "follow the selected step", then one per revision. */
void tui_versions_draw(tui_app *a)
{
    WINDOW *w = a->mwin;
    int h, wd;
    getmaxyx(w, h, wd);
    werase(w);
    tui_frame(w, a->vpick_from < 0 ? "Compare versions: pick the older one"
                                   : "Compare versions: pick the newer one",
              "Enter pick  Esc cancel", 1, a->utf8);
    int rows = h - 2;
    int n = a->model.nrevs + 1;
    int top = a->vpick_sel - rows + 1 > 0 ? a->vpick_sel - rows + 1 : 0;
    for (int i = 0; i < rows && top + i < n; i++) {
        int idx = top + i;
        char line[160];
        if (idx == 0) {
            snprintf(line, sizeof line, "  follow the selected step (the default)");
        } else {
            const tui_rev *r = &a->model.revs[idx - 1];
            int lines = 0;
            for (const char *q = r->source; *q; q++)
                lines += *q == '\n';
            snprintf(line, sizeof line, "%s %-12s step %-3d %5d lines%s",
                     a->vpick_from == idx - 1 ? "*" : " ", r->label, r->step, lines,
                     a->vpick_from == idx - 1 ? "  (first pick)" : "");
        }
        int role = idx == a->vpick_sel ? TUI_R_CURSOR : TUI_R_NORMAL;
        wattr_set(w, tui_attr(role), tui_pair(role), NULL);
        mvwhline(w, 1 + i, 1, ' ', wd - 2);
        tui_put(w, 1 + i, 2, line, (int)strlen(line), 0, wd - 4, tui_attr(role), tui_pair(role),
                a->utf8);
    }
}

int tui_versions_key(tui_app *a, int k)
{
    int n = a->model.nrevs + 1;
    switch (k) {
    case KEY_UP:
        if (a->vpick_sel > 0)
            a->vpick_sel--;
        break;
    case KEY_DOWN:
        if (a->vpick_sel < n - 1)
            a->vpick_sel++;
        break;
    case 27:
    case 'q':
    case 'v':
        a->modal = TUI_MODAL_NONE;
        break;
    case '\n':
    case '\r':
    case KEY_ENTER:
        if (a->vpick_sel == 0) {
            a->src_from = a->src_to = -1;
            a->modal = TUI_MODAL_NONE;
            tui_app_flash(a, 0, "source: following the selected step");
        } else if (a->vpick_from < 0) {
            a->vpick_from = a->vpick_sel - 1;
        } else {
            int x = a->vpick_from, y = a->vpick_sel - 1;
            a->src_from = x < y ? x : y;
            a->src_to = x < y ? y : x;
            if (x == y)
                a->src_from = -1;
            a->modal = TUI_MODAL_NONE;
            a->src_mark = 0;
            tui_app_flash(a, 0, "source: %s against %s", a->model.revs[a->src_to].label,
                          a->src_from >= 0 ? a->model.revs[a->src_from].label : "nothing");
        }
        break;
    default:
        return 0;
    }
    tui_app_mark(a, TUI_D_SOURCE);
    a->mdirty = 1;
    return 1;
}
