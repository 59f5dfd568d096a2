/* knowledge.h -- the knowledge base: entries a person reviews before the
 * agents may rely on them. Rules the planner fires, strategies that worked,
 * pitfalls, explanations of compiler errors, hardware facts.
 *
 * Prefix kb_. Depends on core only. Shipped entries live in the repository's
 * knowledge/ folder (one JSON file per entry, or an array per file), the
 * user's in $XDG_DATA_HOME/ditto/knowledge/ (one file per entry,
 * ID.json). A user entry with the id of a shipped one overrides it (that is
 * how a reviewer's decision on a shipped entry is kept).
 *
 * Entry JSON (knowledge/README.md has the full schema and the features):
 *   id           "rule.spmv.merge-path-for-power-law": [a-z0-9._-], starting
 *                with a letter or digit, at most 128 characters, unique
 *   kind         rule | strategy | pitfall | error-explanation | hardware-fact
 *   title        one line, at most KB_TITLE_MAX characters
 *   applies_to   {op: [..], dtype: [..], cc: ["8.0", "9.0+"], features: {NAME:
 *                [min, max], ...}}  every part optional; a missing part
 *                matches everything. cc "M.m" matches that capability only,
 *                "M.m+" it and newer. A range end may be null (open). Feature
 *                names are the fixed list kb_feature_name enumerates (rows,
 *                nnz, row_mean, row_cv, row_max_over_mean, row_gini,
 *                block_fill_4, x_lines_per_nnz, col_span_max, n, ...), all
 *                derived from the PatternReport.
 *   content      text: the rule or advice in words (shown to people and to
 *                the LLM), at most KB_TEXT_MAX characters
 *   parameters   object: for rules (required) {strategy, params: {NAME:
 *                [values]}, score 0..100}; for error explanations (required)
 *                {pattern, hint, unless?}; for pitfalls {rule_id, severity,
 *                message, pattern, detect, explanation, fix} (a rule_id needs
 *                message and severity); free-form otherwise
 *   evidence     [{session, gpu, matrix, fingerprint, features, speedup,
 *                measured, note}] (may be empty for shipped entries; each
 *                item needs speedup or measured)
 *   status       proposed | approved | rejected
 *   review       {reviewer, note, at}: required when approved or rejected
 *                (a rejection needs a note), null when proposed
 *   created, updated   ISO 8601 times ("2026-11-29T09:19:06Z"), required
 *
 * Ownership: kb_open returns a handle freed by kb_close; entries returned by
 * kb_get/kb_list are borrowed from the handle (valid until the next change);
 * JSON from kb_retrieve and kb_export is the caller's. */
#ifndef DITTO_KNOWLEDGE_H
#define DITTO_KNOWLEDGE_H

#include "core/core.h"

typedef struct kb kb;

/* Lengths of free text, in characters, that an entry may have: an entry
 * states one claim a reviewer can check, not a lab notebook. */
#define KB_TITLE_MAX 120  /* title */
#define KB_TEXT_MAX  1500 /* content, and the texts of parameters */
#define KB_NOTE_MAX  500  /* an evidence item's note, a review's note */

/* Open the base: shipped entries from shipped_dir (NULL: dt_share_path
 * ("knowledge")), the user's from user_dir (NULL: $XDG_DATA_HOME/ditto/
 * knowledge). Invalid shipped or user files are reported in problems (one
 * line each, "FILE: PATH: what is wrong") and skipped, as are a duplicate
 * shipped id and a user file not named ID.json; missing folders are empty
 * (the user folder is made on the first save). Returns NULL (e says why)
 * only when no user folder can be named (neither XDG_DATA_HOME nor HOME). */
kb *kb_open(const char *shipped_dir, const char *user_dir, dt_buf *problems, dt_err *e);
void kb_close(kb *k);

/* Validate one entry; every problem appended to problems as
 * "WHERE: $.path: what is wrong" (just "$.path: ..." when where is NULL).
 * Returns the number of problems. This function can't fail. */
int kb_validate(const cJSON *entry, const char *where, dt_buf *problems);

int kb_count(const kb *k);
/* Borrowed; NULL when unknown. */
const cJSON *kb_get(const kb *k, const char *id);
/* Where the entry in effect for id comes from: "shipped", "user" or "user
 * (overrides shipped)", and its file in *file when file is not NULL (both
 * borrowed). NULL when the id is unknown. */
const char *kb_origin(const kb *k, const char *id, const char **file);
/* The user folder entries are saved to. Borrowed. */
const char *kb_user_dir(const kb *k);
/* Entries matching a filter (NULL or "" for any): kind, status, in id
 * order. Returns a new array of borrowed-by-reference copies (caller frees
 * the array). */
cJSON *kb_list(const kb *k, const char *kind, const char *status);

/* Add a proposed entry (the Librarian's). Fills status "proposed", created,
 * updated (now) and review (null); refuses an invalid entry (e quotes the
 * first problem and counts the rest) or an existing id. Saved to the user
 * dir at once; on any error nothing is saved or changed. */
int kb_propose(kb *k, const cJSON *entry, dt_err *e);
/* Review: status "approved" or "rejected", with reviewer (required) and note
 * (required to reject; NULL allowed to approve); sets review.at and updated
 * to now and saves to the user dir (overriding a shipped entry of that id).
 * Any entry may be reviewed again. On error nothing is saved or changed. */
int kb_review(kb *k, const char *id, const char *status, const char *reviewer, const char *note,
              dt_err *e);

/* Import entries from a file (one entry or an array): every entry is
 * validated and every problem reported (problems, "FILE: $[i].path: ...");
 * nothing is imported when any entry is invalid, when an id repeats in the
 * file, or when an id is already a user entry with other content (one that
 * differs at most in created, updated, status or review is skipped, and
 * keeps its local review; a shipped-only id is overridden, as a review
 * would). The knowledge base stays human-reviewed: imported entries always
 * arrive as proposed (review null, updated now, created kept or now),
 * whatever status the file gives them -- a reviewer approves them here. A
 * failed write removes the files this import wrote. Returns the number
 * imported (written), -1 on error (e says why; problems holds the entries'
 * problems). */
int kb_import(kb *k, const char *path, dt_buf *problems, dt_err *e);
/* All entries (or those of a status) as an array of copies in id order, for
 * `kb export`. Caller frees. */
cJSON *kb_export(const kb *k, const char *status);

/* Retrieval for the planner and prompts: APPROVED entries only, of kind
 * (NULL: any), whose applies_to matches op, dtype and cc (a NULL or "" query
 * part matches every entry; an entry without that part matches every
 * query), ranked by feature distance, then by the number of the entry's
 * feature ranges the query falls inside (an entry about this problem
 * before one that merely does not conflict with it), then by id. The distance is the
 * sum over the entry's feature ranges of the query value's distance outside
 * the range divided by max(range width, the feature's unit); counts and
 * wide-ranging ratios (kb_feature_is_log) are compared as log2(1 + x), so
 * their unit is one doubling. 0 means inside every range. features is an
 * object of NAME: number; features the query lacks, and names that are not
 * features, do not count. Returns an array of at most max entries (max <= 0:
 * all) of copies, each with an added "distance" and "matched" (caller
 * frees). */
cJSON *kb_retrieve(const kb *k, const char *kind, const char *op, const char *dtype, const char *cc,
                   const cJSON *features, int max);

/* The feature names, for callers that build or check a features object:
 * kb_feature_name(i) for i = 0, 1, ... until NULL. */
const char *kb_feature_name(int i);
int kb_is_feature(const char *name);
/* Whether the feature is compared in log2(1 + x) space, and its unit (the
 * smallest width a distance is divided by, in that space). -1 / 0 when
 * name is not a feature. */
int kb_feature_is_log(const char *name);
double kb_feature_unit(const char *name);

#endif /* DITTO_KNOWLEDGE_H */
