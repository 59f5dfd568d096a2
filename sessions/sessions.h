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
 * Durability: events are written through (one write(2) per event, no stdio
 * buffering) and fsync'd at step boundaries (events of type step_finished,
 * decision and session_finished) and on sess_sync; artifacts are written
 * atomically (temporary file, fsync, rename, fsync of the folder) before the
 * event that names them. A kill -9 of the writer loses nothing that write(2)
 * returned for (the page cache survives the process); a power loss loses at
 * most the events after the last step boundary, and never a finished or
 * approved step. A new session appears under root only when complete: it is
 * built in a hidden ".new-ID" folder, renamed into place, and root fsync'd.
 *
 * One writer at a time: sess_create and sess_open hold an exclusive flock(2)
 * on events.jsonl until sess_close (released by the kernel if the process
 * dies), so resuming a session that a live process still writes is refused.
 *
 * No symbolic link inside a session folder is followed: events.jsonl,
 * spec.json, fingerprint.json and artifacts are opened with O_NOFOLLOW and
 * must be regular files (a link is refused with a message naming it).
 *
 * Errors: dt_err.code is one of the SESS_E* codes below.
 *
 * Ownership: sess_create/sess_open return a handle freed by sess_close.
 * Loaded logs (sess_log) are owned by the caller (sess_log_free). */
#ifndef DITTO_SESSIONS_H
#define DITTO_SESSIONS_H

#include "core/core.h"

typedef struct sess sess;

#define SESS_ENOTFOUND 1 /* no such session folder, or no events.jsonl in it */
#define SESS_ECORRUPT  2 /* events.jsonl has a bad line (the message names FILE:LINE) */
#define SESS_EBUSY     3 /* another process holds the session open */
#define SESS_EINVAL    4 /* a bad argument: artifact name, event without type or seq */
#define SESS_EIO       5 /* a system call failed (the message names the file) */

/* The folder holding sessions: dir when non-NULL, else
 * $XDG_DATA_HOME/ditto/sessions (~/.local/share/ditto/sessions without it).
 * Caller frees; NULL when neither is known. */
char *sess_root(const char *dir);

/* Create a new session folder under root (NULL: sess_root(NULL); created if
 * missing) named by local time and a short random suffix
 * ("20261129-101530-k3f9"), write spec.json and fingerprint.json (both must
 * be JSON objects) and an empty events.jsonl. Returns NULL with e set on
 * failure (nothing half-created is left; a process killed inside this call
 * can leave a hidden ".new-ID" folder, which sess_list ignores). */
sess *sess_create(const char *root, const cJSON *spec, const cJSON *fingerprint, dt_err *e);
/* Open an existing session (by id under root, or by path: anything with a
 * '/') for appending, as resume does. root NULL means sess_root(NULL). The
 * log is read first (sess_log_read rules: a bad line fails the open with
 * SESS_ECORRUPT and changes nothing); a partial last line is cut off the
 * file with ftruncate and fsync'd, and reported in sess_warnings, so that
 * appends start on a fresh line. The folder must be writable (probed by
 * creating and removing a file), so that a read-only session is refused
 * here, before anything runs. NULL with e set on failure. */
sess *sess_open(const char *root, const char *id_or_path, dt_err *e);
/* Release the lock and the descriptor (no fsync: call sess_sync first when
 * the last events matter). NULL is a no-op. */
void sess_close(sess *s);
const char *sess_id(const sess *s);
const char *sess_dir(const sess *s);
/* What sess_open tolerated, one "FILE:LINE: ..." line each; "" when
 * nothing (always "" after sess_create). Borrowed. */
const char *sess_warnings(const sess *s);
/* The next seq to use (1 + the last one written). */
long sess_next_seq(const sess *s);

/* Append one event (its seq and t are kept as given) as one line of compact
 * JSON. The event must be an object with a string "type" and an integer
 * "seq" above the last one written; otherwise -1 with SESS_EINVAL and
 * nothing is written (so the store never writes a log it would refuse to
 * read). Fsyncs at step boundaries (see above).
 * On a failed write -1 (SESS_EIO) and whatever part of the line reached the
 * file is cut off again; if even that fails every later append is refused.
 * On a failed fsync -1 (SESS_EIO) but the event is in the file and
 * sess_next_seq has moved past it: only its durability is unknown. */
int sess_append(sess *s, const cJSON *event, dt_err *e);
/* fsync events.jsonl. 0, or -1 with SESS_EIO. */
int sess_sync(sess *s, dt_err *e);
/* Write an artifact file atomically into the session folder and fsync the
 * folder. name is a plain file name ("kernel_v3.cu"): one with a '/', "..",
 * a leading '.', or one of spec.json, fingerprint.json, events.jsonl is
 * refused (SESS_EINVAL) and nothing is written. On an I/O error nothing at
 * name is modified. */
int sess_write_artifact(sess *s, const char *name, const void *data, size_t len, dt_err *e);
/* Read an artifact (NUL-terminated, caller frees; same name rules); NULL
 * with e if refused or missing. */
char *sess_read_artifact(const sess *s, const char *name, size_t *len, dt_err *e);

/* A session's log as read back. */
typedef struct sess_log {
    char *id;
    char *dir;
    cJSON *spec;        /* spec.json, or NULL when missing (a warning says so) */
    cJSON *fingerprint; /* fingerprint.json or NULL */
    cJSON *events;      /* array of the events, in order */
    int truncated;      /* 1 when the last line was partial (a crash mid-write) */
    int finished;       /* 1 when the last session_finished closed it (not "resumable") */
    dt_buf warnings;    /* one line per tolerated problem, "FILE:LINE: ..." */
} sess_log;

/* Read a session's log (by id under root, or by path; nothing is modified).
 * A partial last line (no newline, or not valid JSON at the very end) is
 * tolerated: dropped, truncated = 1, a warning naming the file and line.
 * Any other bad line is an error "DIR/events.jsonl:LINE: what is wrong"
 * (SESS_ECORRUPT, NULL returned): "not JSON: ...", "not a JSON object",
 * "missing \"type\"", "missing \"seq\"" (or not a positive integer), or
 * "seq 7 after 9" (seq must increase; gaps are allowed). SESS_ENOTFOUND
 * for a missing folder ("no session 'ID' under ROOT", by path "no session
 * at PATH") or one without events.jsonl ("DIR: not a session folder ..."). */
sess_log *sess_log_read(const char *root, const char *id_or_path, dt_err *e);
void sess_log_free(sess_log *l);
/* The run's flags in force at the end of a log (what `ditto resume`
 * restores): the "flags" object of its last session_resumed that has one,
 * else of session_started, with a person's later switches of the brain
 * (log events with "setting" backend, model or endpoint and "by" person)
 * over it -- an endpoint recorded "redacted" becomes "endpoint_not_recorded".
 * NULL when the log has no flags. Caller frees. This function can't fail. */
cJSON *sess_log_flags(const cJSON *events);

/* One line per session for `ditto sessions`. */
typedef struct sess_info {
    char id[64];
    char dir[4096];
    double started;   /* epoch seconds from the first event, 0 if unknown */
    char matrix[256]; /* spec.matrix */
    char op[16];
    char state[32];      /* "finished", "stopped, resumable" (ended on a failure that was
                          * not a person's decision), "running or crashed", "empty",
                          * "corrupted" */
    int steps;           /* step_started events */
    double best_speedup; /* from session_finished, 0 when none */
} sess_info;

/* List the sessions under root (NULL: sess_root(NULL)), newest first: by
 * started, else by the time spec.json was written, then by id. *out is
 * malloc'd (caller frees; NULL when *n is 0), *n its length. A root that
 * does not exist holds no sessions (0 returned). Hidden entries (".new-*"
 * folders of sessions being created) are ignored; folders without
 * events.jsonl and unreadable entries are skipped with a line in warnings
 * (may be NULL); a session whose log has a bad line is listed with state
 * "corrupted" and its error as a line in warnings. -1 with e when root
 * cannot be read. */
int sess_list(const char *root, sess_info **out, int *n, dt_buf *warnings, dt_err *e);

#endif /* DITTO_SESSIONS_H */
