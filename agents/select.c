/* select.c -- what the planner guarantees about its candidate lists whatever
 * rules fire: a strategy safe for skewed rows is always among the ones
 * tuned, and a cut of the list to N strategies keeps one. */
#include "agents/agents.h"

#include <stdlib.h>
#include <string.h>

/* Strategies whose work per thread does not grow with the longest row: a
 * row of a million entries (an arrowhead row, a circuit's hub) is split
 * over threads or blocks rather than left to one warp. Order: the one to
 * prefer when rules score them alike. */
typedef struct safe_entry {
    sp_op op;
    const char *strategy;
    const char *why;
} safe_entry;

static const safe_entry safe_table[] = {
    {SP_SPMV, "merge-path", "equal work per thread whatever the row lengths (merge path)"},
    {SP_SPMV, "seg16", "a flat stream of entries summed by a segmented scan"},
    {SP_SPMV, "csr-adaptive", "rows binned by length, very long rows split over blocks"},
    {SP_SPMM, "csr-split-spmm", "rows past long_row split over blocks, CHUNK nonzeros each"},
    {SP_SDDMM, "csr-nnz-sddmm", "a warp per CHUNK nonzeros whatever rows they fall in"},
    {SP_SDDMM, "coo-sddmm", "a lane group per nonzero"},
};

/* seg16 keeps whole rows in a tile of BLOCK * U * 8 entries (2048 at its
 * defaults) with 15-bit column offsets from the tile's base: a longer row
 * or a wider one is refused by the format, so it is safe only without
 * them. */
#define SEG16_DEFAULT_TILE 2048
#define SEG16_MAX_SPAN     32767

/* Move the item at index `from` to index `to` (to < from). Done by taking
 * every item out and adding them back in the new order: cJSON 1.7.15's
 * cJSON_InsertItemInArray refuses items of a parsed array (their prev
 * links are not kept), which would lose the item. */
static void move_item(cJSON *arr, int from, int to)
{
    int n = cJSON_GetArraySize(arr);
    cJSON **items = dt_xcalloc((size_t)n, sizeof *items);
    for (int i = n - 1; i >= 0; i--)
        items[i] = cJSON_DetachItemFromArray(arr, i);
    cJSON *moved = items[from];
    for (int i = from; i > to; i--)
        items[i] = items[i - 1];
    items[to] = moved;
    for (int i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, items[i]);
    free(items);
}

static const safe_entry *safe_lookup(sp_op op, const char *strategy)
{
    for (size_t i = 0; i < DT_ARRAY_LEN(safe_table); i++)
        if (safe_table[i].op == op && dt_streq(safe_table[i].strategy, strategy))
            return &safe_table[i];
    return NULL;
}

int ag_skew_safe(sp_op op, const char *strategy, const cJSON *report, const char **why)
{
    const safe_entry *s = safe_lookup(op, strategy);
    if (s == NULL)
        return 0;
    if (dt_streq(strategy, "seg16")) {
        double mx = dt_json_num(cJSON_GetObjectItem(report, "row_length"), "max", 0);
        double span = dt_json_num(report, "col_span_max", 0);
        if (mx > SEG16_DEFAULT_TILE || span > SEG16_MAX_SPAN)
            return 0;
    }
    if (why)
        *why = s->why;
    return 1;
}

/* Table order of a safe strategy (lower first), for ties in score. */
static int safe_rank(sp_op op, const char *strategy)
{
    int k = 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(safe_table); i++) {
        if (safe_table[i].op != op)
            continue;
        if (dt_streq(safe_table[i].strategy, strategy))
            return k;
        k++;
    }
    return k;
}

void ag_ensure_skew_safe(cJSON *cands, const cJSON *report, sp_op op, int within)
{
    if (!cJSON_IsArray(cands) || within < 1)
        return;
    cJSON *best = NULL;
    int best_at = -1, at = 0, first_safe = -1;
    cJSON *c;
    cJSON_ArrayForEach(c, cands)
    {
        const char *why = NULL;
        int safe = ag_skew_safe(op, dt_json_str(c, "strategy", ""), report, &why);
        dt_json_set_bool(c, "skew_safe", safe);
        if (safe && first_safe < 0)
            first_safe = at;
        /* the highest score, ties to the table's order */
        if (safe && (best == NULL || dt_json_num(c, "score", 0) > dt_json_num(best, "score", 0) ||
                     (dt_json_num(c, "score", 0) == dt_json_num(best, "score", 0) &&
                      safe_rank(op, dt_json_str(c, "strategy", "")) <
                          safe_rank(op, dt_json_str(best, "strategy", ""))))) {
            best = c;
            best_at = at;
        }
        at++;
    }
    if (best == NULL || first_safe < within)
        return;          /* none to offer, or one is already in place */
    int to = within - 1; /* best_at >= within: the list is longer than that */
    move_item(cands, best_at, to);
    cJSON *moved = cJSON_GetArrayItem(cands, to);
    const char *why = NULL;
    ag_skew_safe(op, dt_json_str(moved, "strategy", ""), report, &why);
    cJSON *w = dt_json_obj();
    dt_json_set_str(w, "rule", "planner.skew-safe");
    char text[320];
    snprintf(text, sizeof text,
             "placed %d of the ranking so that a strategy safe for skewed rows is always tuned "
             "(%s); no rule put one higher",
             to + 1, why ? why : "");
    dt_json_set_str(w, "text", text);
    dt_json_set_num(w, "score", 0);
    cJSON *rat = cJSON_GetObjectItem(moved, "rationale");
    if (!cJSON_IsArray(rat)) {
        rat = dt_json_arr();
        dt_json_set_take(moved, "rationale", rat);
    }
    cJSON_AddItemToArray(rat, w);
}

void ag_candidates_cut(cJSON *cands, int n)
{
    if (!cJSON_IsArray(cands) || n < 1)
        return;
    int have_safe = 0, at = 0, extra = -1;
    cJSON *c;
    cJSON_ArrayForEach(c, cands)
    {
        int safe = dt_json_bool(c, "skew_safe", 0);
        if (at < n)
            have_safe |= safe;
        else if (safe && extra < 0 && !have_safe)
            extra = at;
        at++;
    }
    if (extra >= 0) {
        /* Keep it as an (n + 1)th rather than drop a ranked one. */
        if (extra > n)
            move_item(cands, extra, n);
        n++;
    }
    while (cJSON_GetArraySize(cands) > n)
        cJSON_DeleteItemFromArray(cands, cJSON_GetArraySize(cands) - 1);
}
