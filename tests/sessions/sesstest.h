/* sesstest.h -- helpers for the session store tests: a synthetic pipeline's
 * events, sessions made from them, and file reads. */
#ifndef DITTO_SESSTEST_H
#define DITTO_SESSTEST_H

#include "sessions/sessions.h"

/* Events per synthetic step: step_started, text, artifact, awaiting_review,
 * decision, step_finished. */
#define ST_STEP_EVENTS 6

/* The problem spec and fingerprint the tests record. Caller frees. */
cJSON *st_spec(void);
cJSON *st_fingerprint(void);
/* Event number seq (1, 2, ...) of a deterministic synthetic run: the same
 * seq always gives the same event, so a reader can check a log that a
 * killed process wrote. t is base + seq. Caller frees. */
cJSON *st_event(long seq, double base);
/* The artifact file that event seq names ("kernel_v2.cu"), or NULL when it
 * is not an artifact event; its content in st_artifact_text. Borrowed. */
const char *st_artifact_name(long seq, char *buf, size_t cap);
char *st_artifact_text(long seq);
/* Append events from..to (inclusive) the way the orchestrator would: an
 * artifact file before the event that names it. 0, or -1 with e. */
int st_run(sess *s, long from, long to, double base, dt_err *e);
/* The compact JSON line of event seq plus '\n'. Caller frees. */
char *st_line(long seq, double base);
/* DIR/events.jsonl's bytes (caller frees); "" when missing. */
char *st_log_text(const char *dir);
/* A new session under root, asserting success. */
sess *st_create(const char *root);
/* Count of '\n' in s. */
int st_lines(const char *s);

#endif
