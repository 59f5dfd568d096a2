/* core.h -- small shared pieces: errors, buffers, JSON helpers, hashing, files, logging.
 *
 * Prefix: dt_ (ditto). Every module may include this header; it includes
 * nothing of the project's.
 *
 * Ownership: a function named _new or _dup returns memory the caller frees
 * with the matching _free (free of NULL is a no-op); _get borrows; _take
 * transfers ownership to the callee. JSON values are cJSON trees: the
 * dt_json_* helpers never take ownership unless their name says _take.
 *
 * Errors: functions that can fail return 0 on success and -1 on failure and
 * write a one-line message into a caller-provided dt_err. A NULL dt_err is
 * allowed and discards the message. */
#ifndef DITTO_CORE_H
#define DITTO_CORE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>

#define DT_VERSION "0.1.0"

#if defined(__GNUC__)
#define DT_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#define DT_UNUSED __attribute__((unused))
#else
#define DT_PRINTF(fmt, args)
#define DT_UNUSED
#endif

#define DT_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors ------------------------------------------------------------ */

typedef struct dt_err {
    int code;       /* module-defined; 0 when no error was set */
    char msg[1024]; /* one line, no trailing newline */
} dt_err;

/* Set e->msg from a format (no-op when e is NULL). Always returns -1 so that
 * error paths can `return dt_err_set(e, ...)`. */
int dt_err_set(dt_err *e, const char *fmt, ...) DT_PRINTF(2, 3);
/* Prepend "prefix: " to an existing message. Returns -1. */
int dt_err_prefix(dt_err *e, const char *fmt, ...) DT_PRINTF(2, 3);
void dt_err_clear(dt_err *e);

/* ---- memory ------------------------------------------------------------ */

/* Allocation wrappers that abort with a message on out-of-memory. Use them for
 * small bookkeeping; large data allocations (matrix arrays) use plain malloc
 * and report failure through dt_err. */
void *dt_xmalloc(size_t n);
void *dt_xcalloc(size_t count, size_t size);
void *dt_xrealloc(void *p, size_t n);
char *dt_xstrdup(const char *s);
char *dt_xstrndup(const char *s, size_t n);
/* asprintf that aborts on out-of-memory. */
char *dt_xasprintf(const char *fmt, ...) DT_PRINTF(1, 2);

/* ---- growable byte buffer ---------------------------------------------- */

/* A buffer that always keeps a NUL after its contents, so data can be used
 * as a C string. Zero-initialised (DT_BUF_INIT) is an empty, valid buffer. */
typedef struct dt_buf {
    char *data; /* NULL until the first append */
    size_t len; /* bytes in use, excluding the NUL */
    size_t cap; /* bytes allocated */
} dt_buf;

#define DT_BUF_INIT {NULL, 0, 0}

void dt_buf_reserve(dt_buf *b, size_t extra);
void dt_buf_append(dt_buf *b, const void *data, size_t n);
void dt_buf_puts(dt_buf *b, const char *s);
void dt_buf_putc(dt_buf *b, char c);
void dt_buf_printf(dt_buf *b, const char *fmt, ...) DT_PRINTF(2, 3);
void dt_buf_vprintf(dt_buf *b, const char *fmt, va_list ap);
void dt_buf_reset(dt_buf *b); /* len = 0, keeps memory */
void dt_buf_free(dt_buf *b);  /* releases memory; b is empty afterwards */
/* Returns the contents as a NUL-terminated string the caller frees; b is
 * left empty. Never returns NULL. */
char *dt_buf_take(dt_buf *b);
/* "" when empty, never NULL. Borrowed. */
const char *dt_buf_str(const dt_buf *b);

/* ---- strings ----------------------------------------------------------- */

int dt_streq(const char *a, const char *b); /* NULL-safe */
int dt_startswith(const char *s, const char *prefix);
int dt_endswith(const char *s, const char *suffix);
/* Parse a size with an optional decimal suffix K, M, G (10^3, 10^6, 10^9) or
 * binary Ki, Mi, Gi. "16M" -> 16000000. Returns -1 on a malformed or
 * negative value, or on overflow of int64. */
int dt_parse_size(const char *s, int64_t *out);
/* Parse a finite double in the C locale; whole string must be consumed. */
int dt_parse_double(const char *s, double *out);
/* Locale-independent strtod (the TUI sets LC_ALL from the environment, which
 * can make the decimal point a comma). */
double dt_strtod(const char *s, char **end);
/* Human-readable byte count: "1.5 MB" (decimal units). Writes into out. */
const char *dt_fmt_bytes(double bytes, char *out, size_t outlen);

/* ---- text from data, made safe ------------------------------------------
 *
 * Names, spec fields, folder names and model text reach the terminal; only
 * what ditto itself draws may carry control characters. */

/* Append s (n bytes) for a terminal: C0 controls shown as ^X (ESC as ^[),
 * DEL and the C1 controls (CSI, OSC as U+009B, U+009D) and bytes that are
 * not UTF-8 as '?'; tabs kept, newlines kept when keep_newlines. */
void dt_buf_put_term(dt_buf *b, const char *s, size_t n, int keep_newlines);
/* The same for a C string, into one of eight per-thread buffers reused in
 * turn: for printf arguments ("%s", dt_tsafe(name)); valid until eight more
 * calls. NULL gives "". Newlines show as ^J: one field, one line. */
const char *dt_tsafe(const char *s);
/* A copy of C or CUDA source with comments, string and character literals
 * blanked to spaces, newlines kept (line numbers stay right): what static
 * scans of code look at. Caller frees. */
char *dt_code_only(const char *src);
/* NULL when s (n bytes) is valid UTF-8, else a copy (caller frees) with
 * each invalid byte replaced by U+FFFD. */
char *dt_utf8_fix(const char *s, size_t n);
/* Replace invalid UTF-8 in every string and key of a JSON tree, so that
 * what is printed is valid UTF-8 JSON whatever the input. */
void dt_json_utf8_fix(cJSON *v);

/* ---- hashing ----------------------------------------------------------- */

/* 64-bit FNV-1a, chainable: pass the previous hash as seed (DT_HASH_SEED to
 * start). Used for cache keys and fingerprints, not for security. */
#define DT_HASH_SEED 0xcbf29ce484222325ULL
uint64_t dt_hash64(const void *data, size_t n, uint64_t seed);
uint64_t dt_hash_str(const char *s, uint64_t seed);
/* 16 lowercase hex digits + NUL into out (17 bytes). */
void dt_hash_hex(uint64_t h, char out[17]);

/* Deterministic pseudo-random numbers (xoshiro256**), seeded by splitmix64.
 * The same seed gives the same stream on every platform. */
typedef struct dt_rng {
    uint64_t s[4];
} dt_rng;

void dt_rng_seed(dt_rng *r, uint64_t seed);
uint64_t dt_rng_next(dt_rng *r);
/* Uniform in [0, 1). */
double dt_rng_uniform(dt_rng *r);
/* Uniform integer in [0, n); n > 0. Unbiased (rejection). */
uint64_t dt_rng_below(dt_rng *r, uint64_t n);

/* ---- files ------------------------------------------------------------- */

/* Read a whole file into memory (NUL-terminated). Only regular files are
 * read (a folder, device such as /dev/zero, pipe or socket is refused at
 * once, without blocking), and only up to max bytes (larger is an error
 * that gives both sizes). On error returns NULL and sets e with the path
 * and what went wrong. dt_read_file's limit is DT_READ_MAX; readers of
 * small user-named files (hooks, specs, config) pass their own. */
#define DT_READ_MAX ((size_t)1 << 30)
char *dt_read_file_max(const char *path, size_t max, size_t *len, dt_err *e);
char *dt_read_file(const char *path, size_t *len, dt_err *e);
/* Write data to path atomically: a temporary file in the same directory,
 * fsync, rename. On error nothing at path is modified. */
int dt_write_file_atomic(const char *path, const void *data, size_t len, dt_err *e);
/* mkdir -p. Returns 0 if the directory exists afterwards. */
int dt_mkdir_p(const char *path, dt_err *e);
int dt_file_exists(const char *path);
/* $XDG_CONFIG_HOME/ditto, $XDG_DATA_HOME/ditto, $XDG_CACHE_HOME/ditto with the
 * standard fallbacks under $HOME. Caller frees. NULL if neither the XDG
 * variable nor HOME is set. */
char *dt_config_dir(void);
char *dt_data_dir(void);
char *dt_cache_dir(void);
/* Directory holding the running executable (from /proc/self/exe), caller
 * frees; NULL if unknown. */
char *dt_exe_dir(void);
/* Locate a shipped data file or folder (hardware/h200.json, kernels/, ...):
 * tried in order $DITTO_SHARE/REL, EXEDIR/share/ditto/REL (bundle),
 * EXEDIR/../share/ditto/REL (install), EXEDIR/REL (source checkout).
 * Returns the first that exists (caller frees) or NULL. */
char *dt_share_path(const char *rel);

/* Bytes of host memory available to a new allocation without swapping
 * (MemAvailable of /proc/meminfo), or -1 when unknown. $DITTO_MEM_AVAILABLE
 * (a size such as 4G) overrides it, for tests and for a share of a
 * machine. */
int64_t dt_mem_available(void);

/* ---- logging ----------------------------------------------------------- */

typedef enum { DT_LOG_ERROR, DT_LOG_WARN, DT_LOG_INFO, DT_LOG_DEBUG } dt_log_level;

/* Logs go to stderr (or the sink set below) as "ditto: level: message". */
void dt_log_set_level(dt_log_level level);
dt_log_level dt_log_get_level(void);
/* Prefix printed before each line, e.g. "ditto" or "ditto worker". */
void dt_log_set_prefix(const char *prefix);
void dt_log(dt_log_level level, const char *fmt, ...) DT_PRINTF(2, 3);
#define dt_warn(...) dt_log(DT_LOG_WARN, __VA_ARGS__)
#define dt_info(...) dt_log(DT_LOG_INFO, __VA_ARGS__)
#define dt_debug(...) dt_log(DT_LOG_DEBUG, __VA_ARGS__)

/* ---- time -------------------------------------------------------------- */

double dt_now(void);      /* monotonic seconds */
double dt_wall_now(void); /* seconds since the epoch */
/* ISO 8601 UTC "2026-11-29T09:19:06Z" into out (at least 21 bytes). */
const char *dt_iso_time(double epoch, char *out, size_t outlen);

/* ---- JSON helpers over cJSON ------------------------------------------- */

/* Parse text; on a syntax error the message names "name:line:column". */
cJSON *dt_json_parse(const char *text, size_t len, const char *name, dt_err *e);
/* Read and parse a file (dt_read_file's limits; _max: at most max bytes). */
cJSON *dt_json_read_file(const char *path, dt_err *e);
cJSON *dt_json_read_file_max(const char *path, size_t max, dt_err *e);
/* Print compactly (pretty when pretty != 0); caller frees. */
char *dt_json_print(const cJSON *v, int pretty);
/* Borrowed lookups that return a default when the key is absent or of
 * another type. */
double dt_json_num(const cJSON *obj, const char *key, double dflt);
const char *dt_json_str(const cJSON *obj, const char *key, const char *dflt);
int dt_json_bool(const cJSON *obj, const char *key, int dflt);
/* Integers from JSON numbers. Every float-to-integer conversion of outside
 * JSON goes through these: a cast of a value out of the target's range
 * (2.2e21 into int64_t, NaN) is undefined behaviour in C.
 * dt_json_to_int checks v strictly: a number, finite, integral and within
 * [lo, hi]; on success *out is set and 0 returned, else -1 with a message
 * in e that says which of these failed (e may be NULL). */
int dt_json_to_int(const cJSON *v, int64_t lo, int64_t hi, int64_t *out, dt_err *e);
/* The lenient lookups: the value truncated toward zero when v (or obj[key])
 * is a finite number within the target type's range, dflt otherwise
 * (absent, another type, NaN, infinite or out of range). Never undefined. */
int64_t dt_json_as_i64(const cJSON *v, int64_t dflt);
int64_t dt_json_i64(const cJSON *obj, const char *key, int64_t dflt);
int dt_json_int(const cJSON *obj, const char *key, int dflt);
/* As dt_json_i64, but negative values give dflt too. */
size_t dt_json_size(const cJSON *obj, const char *key, size_t dflt);
/* Builders that never fail (they abort on out-of-memory). */
cJSON *dt_json_obj(void);
cJSON *dt_json_arr(void);
void dt_json_set_num(cJSON *obj, const char *key, double v);
void dt_json_set_int(cJSON *obj, const char *key, int64_t v);
void dt_json_set_str(cJSON *obj, const char *key, const char *v);
void dt_json_set_bool(cJSON *obj, const char *key, int v);
/* Moves v into obj under key (replacing an existing key). */
void dt_json_set_take(cJSON *obj, const char *key, cJSON *v);

/* ---- event loop ---------------------------------------------------------
 *
 * One poll(2) loop for terminal input, worker pipes, curl sockets and timers
 * (modelled on Redis' ae). Callbacks get the clientData pointer they were
 * registered with, untouched. Nothing here blocks except dt_loop_run_once's
 * poll. */

typedef struct dt_loop dt_loop;

#define DT_READABLE 1
#define DT_WRITABLE 2
#define DT_LOOP_NOMORE (-1)

typedef void dt_file_fn(dt_loop *l, int fd, int mask, void *ud);
/* Return the milliseconds until the next call, or DT_LOOP_NOMORE to delete. */
typedef long dt_timer_fn(dt_loop *l, long long id, void *ud);
typedef void dt_sleep_fn(dt_loop *l, void *ud);

dt_loop *dt_loop_new(void);
void dt_loop_free(dt_loop *l);
/* Watch fd for mask (adds to an existing watch). Returns -1 on a bad fd. */
int dt_loop_add_fd(dt_loop *l, int fd, int mask, dt_file_fn *fn, void *ud);
/* Stop watching mask on fd; with mask 0 -- or once nothing is left -- the
 * fd is forgotten. Safe inside callbacks. */
void dt_loop_del_fd(dt_loop *l, int fd, int mask);
long long dt_loop_add_timer(dt_loop *l, long ms, dt_timer_fn *fn, void *ud);
void dt_loop_del_timer(dt_loop *l, long long id);
/* Called before each poll: where rendering belongs. */
void dt_loop_set_beforesleep(dt_loop *l, dt_sleep_fn *fn, void *ud);
/* One iteration: wait up to timeout_ms (-1: until an event or the next
 * timer) and run what is ready. Returns the number of callbacks run. */
int dt_loop_run_once(dt_loop *l, long timeout_ms);
/* Iterate until dt_loop_stop. */
void dt_loop_run(dt_loop *l);
void dt_loop_stop(dt_loop *l);
int dt_loop_stopped(const dt_loop *l);

/* ---- diff ----------------------------------------------------------------
 *
 * Line diff by Myers' O(ND) algorithm in linear space (the middle-snake
 * bisection), so a 2,000-line kernel against a rewrite costs kilobytes, not
 * an N x D table; plus word-level marking of what changed inside a pair of
 * lines. Lines are split on '\n' (a final newline does not make an empty
 * last line; a '\r' before it is kept as part of the line). The results are
 * minimal: no shorter edit script exists. Nothing here fails except by
 * aborting on out-of-memory. */

typedef enum { DT_DIFF_EQUAL, DT_DIFF_DELETE, DT_DIFF_INSERT } dt_diff_op;

typedef struct dt_diff_line {
    dt_diff_op op;
    int a; /* 0-based line of the old text; -1 for an insert */
    int b; /* 0-based line of the new text; -1 for a delete */
} dt_diff_line;

/* The edit script: every line of both texts exactly once, in order, deletes
 * of a change block before its inserts. The line arrays point into copies
 * the diff owns. */
typedef struct dt_diff {
    dt_diff_line *ops;
    int nops;
    int ndel, nins;
    int na, nb;
    const char **a_line, **b_line; /* line starts (not NUL-terminated) */
    int *a_len, *b_len;            /* line lengths in bytes, without the '\n' */
    char *a_text, *b_text;         /* the copies */
} dt_diff;

/* Diff old text a against new text b (either may be NULL: empty). */
void dt_diff_text(const char *a, const char *b, dt_diff *out);
void dt_diff_free(dt_diff *d); /* a zeroed or freed diff is a no-op */

/* Hunks: each run of changes with up to `context` equal lines around it;
 * runs whose context would touch are merged. start/end index ops (end
 * exclusive); a0/alen and b0/blen are the 0-based line ranges as a unified
 * header shows them (1-based there). Returns the count; *out (caller frees)
 * is NULL when there is no change. */
typedef struct dt_diff_hunk {
    int start, end;
    int a0, alen, b0, blen;
} dt_diff_hunk;
int dt_diff_hunks(const dt_diff *d, int context, dt_diff_hunk **out);

/* Word-level marking of an old line against its replacement: the byte ranges
 * of a that were removed and of b that were inserted, as minimal over tokens
 * (runs of [A-Za-z0-9_], runs of blanks, single other bytes; a UTF-8
 * sequence stays whole). Adjacent ranges are merged. *adel and *bins are
 * caller-freed (NULL when the count is 0). */
typedef struct dt_diff_span {
    int off, len;
} dt_diff_span;
void dt_diff_words(const char *a, int alen, const char *b, int blen, dt_diff_span **adel,
                   int *nadel, dt_diff_span **bins, int *nbins);

/* Append a unified diff ("--- a_name", "+++ b_name", "@@ -1,3 +1,4 @@"
 * hunks, numbered as GNU diff -u numbers them) to out; nothing when the
 * texts are equal. */
void dt_diff_unified(const dt_diff *d, const char *a_name, const char *b_name, int context,
                     dt_buf *out);

/* url with its user information (user:password@), query and fragment
 * dropped, into out (n bytes): what may be recorded of an endpoint.
 * Returns 1 when something was dropped. */
int dt_url_redact(const char *url, char *out, size_t n);

#endif /* DITTO_CORE_H */
