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
 * Entry JSON:
 *   id           "rule.spmv.merge-path-for-power-law"  [a-z0-9._-]+, unique
 *   kind         rule | strategy | pitfall | error-explanation | hardware-fact
 *   title        one line
 *   applies_to   {op: [..], dtype: [..], cc: ["8.0", "9.0"], features: {NAME:
 *                [min, max], ...}}  every part optional; a missing part
 *                matches everything. Feature names are PatternReport fields
 *                (row_cv, row_max_over_mean, row_mean, gini, block_fill_4,
 *                x_lines_per_nnz, density, rows, nnz, ...).
 *   content      text: the rule or advice in words (shown to people and to
 *                the LLM)
 *   parameters   object: for rules, the strategy it chooses and its parameter
 *                space {strategy, params: {NAME: [values]}, score}; for error
 *                explanations {pattern, hint}; free-form otherwise
 *   evidence     [{session, gpu, matrix, fingerprint, features, speedup,
 *                measured}] (may be empty for shipped entries)
 *   status       proposed | approved | rejected
 *   review       {reviewer, note, at} or null
 *   created, updated   ISO 8601 times
 *
 * Ownership: kb_open returns a handle freed by kb_close; entries returned by
 * kb_get/kb_list are borrowed from the handle (valid until the next change);
 * JSON from kb_retrieve and kb_export is the caller's. */
#ifndef DITTO_KNOWLEDGE_H
#define DITTO_KNOWLEDGE_H

#include "core/core.h"

typedef struct kb kb;

/* Open the base: shipped entries from shipped_dir (NULL: dt_share_path
 * ("knowledge")), the user's from user_dir (NULL: $XDG_DATA_HOME/ditto/
 * knowledge). Invalid shipped or user files are reported in problems (one
 * line each, "FILE: PATH: what is wrong") and skipped. */
kb *kb_open(const char *shipped_dir, const char *user_dir, dt_buf *problems, dt_err *e);
void kb_close(kb *k);

/* Validate one entry; every problem appended to problems as
 * "WHERE: $.path: what is wrong". Returns the number of problems. */
int kb_validate(const cJSON *entry, const char *where, dt_buf *problems);

int kb_count(const kb *k);
/* Borrowed; NULL when unknown. */
const cJSON *kb_get(const kb *k, const char *id);
/* Entries matching a filter (NULL or "" for any): kind, status. Returns a
 * new array of borrowed-by-reference copies (caller frees the array). */
cJSON *kb_list(const kb *k, const char *kind, const char *status);

/* Add a proposed entry (the Librarian's). Fills status "proposed", created,
 * updated; refuses an invalid entry or an existing id (e names why). Saved
 * to the user dir at once. */
int kb_propose(kb *k, const cJSON *entry, dt_err *e);
/* Review: status approved or rejected, with reviewer and note; saved to the
 * user dir (overriding a shipped entry of that id). */
int kb_review(kb *k, const char *id, const char *status, const char *reviewer, const char *note,
              dt_err *e);

/* Import entries from a file (one entry or an array): every entry is
 * validated and every problem reported (problems); nothing is imported when
 * any entry is invalid. Imported entries keep their status unless
 * as_proposed is set (then they arrive as proposed). Returns the number
 * imported, -1 on error. */
int kb_import(kb *k, const char *path, int as_proposed, dt_buf *problems, dt_err *e);
/* All entries (or those of a status) as an array, for `kb export`. */
cJSON *kb_export(const kb *k, const char *status);

/* Retrieval for the planner and prompts: APPROVED entries only, whose
 * applies_to matches op, dtype and cc, ranked by feature distance (0 inside
 * every range; else the sum over features of the distance outside each
 * range, normalised by the range's width, log-scaled for counts) and then by
 * id. features is an object of NAME: number (missing features do not
 * count). kind may be NULL for any. Returns an array of at most max entries
 * (copies, caller frees), each with an added "distance". */
cJSON *kb_retrieve(const kb *k, const char *kind, const char *op, const char *dtype,
                   const char *cc, const cJSON *features, int max);

#endif /* DITTO_KNOWLEDGE_H */
