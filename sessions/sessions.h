/* sessions.h -- the session store: one directory per session with an
 * append-only event log (agents/EVENTS.md), the artifacts of every step and
 * version, the spec and the hardware/software fingerprint; listing, loading
 * for resume and replay, and tolerant reading of logs cut off by a crash.
 *
 * Prefix sess_. Depends on core only. Layout of a session directory:
 *   spec.json          the problem spec as run
 *   fingerprint.json   GPU, driver, CUDA, NVRTC, ditto version, seeds, timing
 *   events.jsonl       one event per line, append-only
 *   plan_v1.json, kernel_v3.cu, compile_v3.log, verify_v3.json,
 *   measure_v3.json, tune.json, kb_entry.json ...   artifacts
 *
 * Durability: events are written through (write(2) per event, no stdio
 * buffering) and fsync'd at step boundaries (events of type step_finished,
 * decision and session_finished) and on sess_sync; artifacts are written
 * atomically (temporary file, fsync, rename) before the event that names
 * them. A kill -9 therefore loses at most the events of the step that was
 * running, and never a finished or approved step.
 *
 * Ownership: sess_create/sess_open return a handle freed by sess_close.
 * Loaded logs (sess_log) are owned by the caller (sess_log_free). */
#ifndef DITTO_SESSIONS_H
#define DITTO_SESSIONS_H

#include "core/core.h"

typedef struct sess sess;

/* The folder holding sessions: dir when non-NULL, else
 * $XDG_DATA_HOME/ditto/sessions. Caller frees; NULL when neither is known. */
char *sess_root(const char *dir);

/* Create a new session folder under root named by time and a short random
 * suffix ("20261129-101530-k3f9"), write spec.json and fingerprint.json.
 * Returns NULL with e set on failure (nothing half-created is left). */
sess *sess_create(const char *root, const cJSON *spec, const cJSON *fingerprint, dt_err *e);
/* Open an existing session (by id under root, or by path) for appending,
 * as resume does. The log is read first (sess_log_read rules); a partial
 * last line is cut off the file (and reported in the log's warnings) so
 * that appends start on a fresh line. */
sess *sess_open(const char *root, const char *id_or_path, dt_err *e);
void sess_close(sess *s);
const char *sess_id(const sess *s);
const char *sess_dir(const sess *s);
/* The next seq to use (1 + the last one written). */
long sess_next_seq(const sess *s);

/* Append one event (its seq and t are kept as given). Fsyncs at step
 * boundaries (see above). -1 with e set on an I/O error. */
int sess_append(sess *s, const cJSON *event, dt_err *e);
int sess_sync(sess *s, dt_err *e);
/* Write an artifact file atomically into the session folder. name is a
 * plain file name ("kernel_v3.cu"); anything with a '/' or ".." is refused. */
int sess_write_artifact(sess *s, const char *name, const void *data, size_t len, dt_err *e);
/* Read an artifact (NUL-terminated, caller frees); NULL with e if missing. */
char *sess_read_artifact(const sess *s, const char *name, size_t *len, dt_err *e);

/* A session's log as read back. */
typedef struct sess_log {
    char *id;
    char *dir;
    cJSON *spec;        /* spec.json, or NULL when missing (a warning says so) */
    cJSON *fingerprint; /* fingerprint.json or NULL */
    cJSON *events;      /* array of the events, in order */
    int truncated;      /* 1 when the last line was partial (a crash mid-write) */
    int finished;       /* 1 when a session_finished event is present */
    dt_buf warnings;    /* one line per tolerated problem, "FILE:LINE: ..." */
} sess_log;

/* Read a session's log. A partial last line (no newline, or not valid JSON
 * at the very end) is tolerated: dropped, truncated = 1, a warning naming the
 * file and line. Any other bad line is an error "events.jsonl:LINE: what is
 * wrong" (NULL returned). */
sess_log *sess_log_read(const char *root, const char *id_or_path, dt_err *e);
void sess_log_free(sess_log *l);

/* One line per session for `ditto sessions`. */
typedef struct sess_info {
    char id[64];
    char dir[4096];
    double started;     /* epoch seconds from the first event, 0 if unknown */
    char matrix[256];   /* spec.matrix */
    char op[16];
    char state[32];     /* "finished", "running or crashed", "empty" */
    int steps;          /* step_started events */
    double best_speedup; /* from session_finished, 0 when none */
} sess_info;

/* List the sessions under root, newest first. *out is malloc'd (caller
 * frees), *n its length. Unreadable entries are skipped with a line in
 * warnings (may be NULL). */
int sess_list(const char *root, sess_info **out, int *n, dt_buf *warnings, dt_err *e);

#endif /* DITTO_SESSIONS_H */
