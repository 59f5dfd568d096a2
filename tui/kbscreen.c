/* kbscreen.c -- the knowledge review screen: proposed entries with their
 * evidence, approved or rejected with a note (kb_review); and the entry
 * view the teaching links open. */
#include "tui/ui.h"

#include <stdlib.h>
#include <string.h>

typedef struct kwrap {
    tui_lines *out;
    int role;
    const char *indent;
    int first;
} kwrap;

static void piece(const char *s, int len, void *ud)
{
    kwrap *w = ud;
    dt_buf b = DT_BUF_INIT;
    dt_buf_puts(&b, w->first ? "" : w->indent);
    dt_buf_append(&b, s, (size_t)len);
    tui_lines_add(w->out, b.data, (int)b.len, w->role);
    w->first = 0;
    dt_buf_free(&b);
}

static void para(tui_lines *out, int role, const char *indent, const char *text, int width)
{
    kwrap w = {out, role, indent, 1};
    int iw = (int)strlen(indent);
    tui_wrap(text, (int)strlen(text), width - iw > 10 ? width - iw : width, piece, &w);
}

static void features(dt_buf *b, const cJSON *f)
{
    const cJSON *x;
    cJSON_ArrayForEach(x, f)
    {
        if (cJSON_IsNumber(x))
            dt_buf_printf(b, "%s=%.3g ", x->string, x->valuedouble);
        else if (cJSON_IsArray(x) && cJSON_GetArraySize(x) == 2) {
            const cJSON *lo = cJSON_GetArrayItem(x, 0), *hi = cJSON_GetArrayItem(x, 1);
            dt_buf_printf(b, "%s ", x->string);
            if (cJSON_IsNumber(lo))
                dt_buf_printf(b, "%.3g", lo->valuedouble);
            dt_buf_puts(b, "..");
            if (cJSON_IsNumber(hi))
                dt_buf_printf(b, "%.3g", hi->valuedouble);
            dt_buf_puts(b, " ");
        }
    }
}

void tui_kb_entry_lines(const cJSON *e, const char *origin, int width, tui_lines *out)
{
    tui_lines_addf(out, TUI_R_HEADING, "%s", dt_json_str(e, "id", "?"));
    para(out, TUI_R_BOLD, "  ", dt_json_str(e, "title", ""), width);
    const char *st = dt_json_str(e, "status", "?");
    tui_lines_addf(out, dt_streq(st, "approved")   ? TUI_R_OK
                        : dt_streq(st, "rejected") ? TUI_R_REJECTED
                                                   : TUI_R_AWAITING,
                   "%s, %s%s%s", dt_json_str(e, "kind", "?"), st, origin ? ", " : "",
                   origin ? origin : "");
    const cJSON *rv = cJSON_GetObjectItem(e, "review");
    if (cJSON_IsObject(rv)) {
        char *t = dt_xasprintf("reviewed by %s at %s%s%s", dt_json_str(rv, "reviewer", "?"),
                               dt_json_str(rv, "at", "?"), dt_json_str(rv, "note", NULL) ? ": " : "",
                               dt_json_str(rv, "note", ""));
        para(out, TUI_R_DIM, "  ", t, width);
        free(t);
    }
    const cJSON *ap = cJSON_GetObjectItem(e, "applies_to");
    if (cJSON_IsObject(ap)) {
        dt_buf b = DT_BUF_INIT;
        dt_buf_puts(&b, "applies to:");
        static const char *keys[] = {"op", "dtype", "cc"};
        for (size_t i = 0; i < DT_ARRAY_LEN(keys); i++) {
            const cJSON *arr = cJSON_GetObjectItem(ap, keys[i]), *x;
            if (!cJSON_IsArray(arr))
                continue;
            dt_buf_printf(&b, " %s", keys[i]);
            cJSON_ArrayForEach(x, arr) if (cJSON_IsString(x)) dt_buf_printf(&b, " %s", x->valuestring);
            dt_buf_puts(&b, ";");
        }
        const cJSON *f = cJSON_GetObjectItem(ap, "features");
        if (f) {
            dt_buf_puts(&b, " features ");
            features(&b, f);
        }
        para(out, TUI_R_NORMAL, "  ", b.data, width);
        dt_buf_free(&b);
    }
    tui_lines_add(out, "", 0, TUI_R_NORMAL);
    para(out, TUI_R_NORMAL, "", dt_json_str(e, "content", ""), width);
    const cJSON *pm = cJSON_GetObjectItem(e, "parameters");
    if (pm && cJSON_GetArraySize(pm) > 0) {
        char *t = dt_json_print(pm, 0);
        char *l = dt_xasprintf("parameters: %s", t);
        tui_lines_add(out, "", 0, TUI_R_NORMAL);
        para(out, TUI_R_DIM, "  ", l, width);
        free(l);
        free(t);
    }
    const cJSON *ev = cJSON_GetObjectItem(e, "evidence");
    tui_lines_add(out, "", 0, TUI_R_NORMAL);
    tui_lines_addf(out, TUI_R_HEADING, "Evidence (%d)", cJSON_GetArraySize(ev));
    if (cJSON_GetArraySize(ev) == 0)
        tui_lines_add(out, "  none recorded (shipped knowledge)", -1, TUI_R_DIM);
    const cJSON *x;
    cJSON_ArrayForEach(x, ev)
    {
        dt_buf b = DT_BUF_INIT;
        dt_buf_puts(&b, "- ");
        if (dt_json_num(x, "speedup", 0) > 0)
            dt_buf_printf(&b, "%.2fx the best cuSPARSE", dt_json_num(x, "speedup", 0));
        if (dt_json_str(x, "gpu", NULL))
            dt_buf_printf(&b, " on %s", dt_json_str(x, "gpu", ""));
        if (dt_json_str(x, "matrix", NULL))
            dt_buf_printf(&b, ", matrix %s", dt_json_str(x, "matrix", ""));
        if (dt_json_str(x, "session", NULL))
            dt_buf_printf(&b, ", session %s", dt_json_str(x, "session", ""));
        const cJSON *meas = cJSON_GetObjectItem(x, "measured");
        if (meas) {
            char *t = dt_json_print(meas, 0);
            dt_buf_printf(&b, ", measured %s", t);
            free(t);
        }
        if (dt_json_str(x, "note", NULL))
            dt_buf_printf(&b, "; %s", dt_json_str(x, "note", ""));
        const cJSON *f = cJSON_GetObjectItem(x, "features");
        if (f) {
            dt_buf_puts(&b, "; features ");
            features(&b, f);
        }
        para(out, TUI_R_NORMAL, "    ", b.data, width);
        dt_buf_free(&b);
    }
}

static void reload(tui_app *a)
{
    cJSON_Delete(a->kbs.list);
    a->kbs.list = kb_list(a->k, NULL, a->kbs.filter[0] ? a->kbs.filter : NULL);
    int n = cJSON_GetArraySize(a->kbs.list);
    if (a->kbs.sel >= n)
        a->kbs.sel = n - 1;
    if (a->kbs.sel < 0)
        a->kbs.sel = 0;
    a->kbs.detail_top = 0;
}

void tui_kb_open(tui_app *a)
{
    if (a->k == NULL) {
        tui_app_flash(a, 1, "no knowledge base is open");
        return;
    }
    snprintf(a->kbs.filter, sizeof a->kbs.filter, "proposed");
    a->kbs.sel = 0;
    a->kbs.top = 0;
    reload(a);
    a->modal = TUI_MODAL_KB;
    a->mdirty = 1;
}

void tui_kb_close(tui_app *a)
{
    cJSON_Delete(a->kbs.list);
    a->kbs.list = NULL;
}

void tui_kb_draw(tui_app *a)
{
    WINDOW *w = a->mwin;
    int h, wd;
    getmaxyx(w, h, wd);
    werase(w);
    int n = cJSON_GetArraySize(a->kbs.list);
    char title[128];
    snprintf(title, sizeof title, "Knowledge review: %d %s", n,
             a->kbs.filter[0] ? "proposed" : "entries");
    tui_frame(w, title, "a approve  r reject  f filter  Esc back", 1, a->utf8);
    int rows = h - 2;
    int lw = wd / 3 < 30 ? 30 : wd / 3 > 56 ? 56 : wd / 3;
    if (lw > wd - 20)
        lw = wd - 20;
    if (n == 0) {
        const char *msg = a->kbs.filter[0]
                              ? "Nothing awaits review: the Librarian proposes entries after a "
                                "measured run (f shows every entry)."
                              : "The knowledge base is empty.";
        tui_put(w, 2, 2, msg, (int)strlen(msg), 0, wd - 4, tui_attr(TUI_R_DIM),
                tui_pair(TUI_R_DIM), a->utf8);
        return;
    }
    if (a->kbs.sel < a->kbs.top)
        a->kbs.top = a->kbs.sel;
    if (a->kbs.sel >= a->kbs.top + rows)
        a->kbs.top = a->kbs.sel - rows + 1;
    for (int i = 0; i < rows && a->kbs.top + i < n; i++) {
        const cJSON *e = cJSON_GetArrayItem(a->kbs.list, a->kbs.top + i);
        int cur = a->kbs.top + i == a->kbs.sel;
        int role = cur ? TUI_R_CURSOR : TUI_R_NORMAL;
        char line[200];
        const char *st = dt_json_str(e, "status", "");
        snprintf(line, sizeof line, "%c %s", st[0] ? st[0] : '?', dt_json_str(e, "id", "?"));
        wattr_set(w, tui_attr(role), tui_pair(role), NULL);
        mvwhline(w, 1 + i, 1, ' ', lw - 1);
        tui_put(w, 1 + i, 2, line, (int)strlen(line), 0, lw - 3, tui_attr(role), tui_pair(role),
                a->utf8);
    }
    wattr_set(w, tui_attr(TUI_R_BORDER), tui_pair(TUI_R_BORDER), NULL);
    mvwvline(w, 1, lw, ACS_VLINE, rows);
    const cJSON *e = cJSON_GetArrayItem(a->kbs.list, a->kbs.sel);
    tui_lines det = {0};
    tui_kb_entry_lines(e, kb_origin(a->k, dt_json_str(e, "id", ""), NULL), wd - lw - 3, &det);
    if (a->kbs.detail_top > det.n - rows)
        a->kbs.detail_top = det.n - rows;
    if (a->kbs.detail_top < 0)
        a->kbs.detail_top = 0;
    for (int i = 0; i < rows && a->kbs.detail_top + i < det.n; i++)
        tui_put_line(w, 1 + i, lw + 2, &det.v[a->kbs.detail_top + i], 0, wd - lw - 3, -1, NULL,
                     a->utf8);
    tui_lines_clear(&det);
}

void tui_kb_review(tui_app *a, const char *status, const char *note)
{
    const cJSON *e = cJSON_GetArrayItem(a->kbs.list, a->kbs.sel);
    if (e == NULL)
        return;
    char id[160];
    snprintf(id, sizeof id, "%s", dt_json_str(e, "id", ""));
    const char *who = a->o->reviewer;
    if (who == NULL || *who == '\0')
        who = getenv("USER");
    if (who == NULL || *who == '\0')
        who = "person";
    dt_err err = {0};
    if (kb_review(a->k, id, status, who, note && *note ? note : NULL, &err) != 0) {
        tui_app_flash(a, 1, "%s", err.msg);
    } else {
        tui_app_flash(a, 0, "%s %s%s", status, id,
                      dt_streq(status, "approved") ? ": later plans may use it" : "");
        reload(a);
    }
    a->mdirty = 1;
}

int tui_kb_key(tui_app *a, int k)
{
    int n = cJSON_GetArraySize(a->kbs.list);
    switch (k) {
    case KEY_UP:
        if (a->kbs.sel > 0)
            a->kbs.sel--;
        a->kbs.detail_top = 0;
        break;
    case KEY_DOWN:
        if (a->kbs.sel < n - 1)
            a->kbs.sel++;
        a->kbs.detail_top = 0;
        break;
    case KEY_HOME:
    case 'g':
        a->kbs.sel = 0;
        a->kbs.detail_top = 0;
        break;
    case KEY_END:
    case 'G':
        a->kbs.sel = n > 0 ? n - 1 : 0;
        a->kbs.detail_top = 0;
        break;
    case KEY_NPAGE:
        a->kbs.detail_top += 10;
        break;
    case KEY_PPAGE:
        a->kbs.detail_top -= 10;
        break;
    case 'f':
        snprintf(a->kbs.filter, sizeof a->kbs.filter, "%s", a->kbs.filter[0] ? "" : "proposed");
        a->kbs.sel = 0;
        reload(a);
        break;
    case 'a':
        if (n > 0)
            tui_app_prompt(a, TUI_ASK_KB_APPROVE, NULL);
        break;
    case 'r':
        if (n > 0)
            tui_app_prompt(a, TUI_ASK_KB_REJECT, NULL);
        break;
    case 27:
    case 'q':
    case 'k':
        tui_kb_close(a);
        a->modal = TUI_MODAL_NONE;
        tui_app_mark(a, TUI_D_ALL);
        break;
    default:
        return 0;
    }
    a->mdirty = 1;
    return 1;
}
