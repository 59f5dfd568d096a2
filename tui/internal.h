/* internal.h -- the workbench's curses-free pieces: the model the events
 * build, styled lines, layout math, wide-character widths and wrapping, and
 * the builders that turn the model into each pane's lines. Tests include
 * this header; nothing here needs a terminal.
 *
 * Ownership: the model owns everything it holds (copies of what events
 * carried); builders append to a caller's tui_lines, which owns its text. */
#ifndef DITTO_TUI_INTERNAL_H
#define DITTO_TUI_INTERNAL_H

#include "core/core.h"
#include "hardware/hardware.h"

/* ---- colour roles --------------------------------------------------------
 * Semantic roles, never colours: theme.c maps each to a colour pair and to a
 * monochrome attribute. */
enum {
    TUI_R_NORMAL,
    TUI_R_DIM,
    TUI_R_BOLD,
    TUI_R_HEADING,
    TUI_R_BORDER,
    TUI_R_BORDER_FOCUS,
    TUI_R_TITLE,
    TUI_R_TITLE_FOCUS,
    TUI_R_CURSOR,
    TUI_R_CURSOR_DIM, /* the cursor line of a pane without focus */
    TUI_R_AWAITING,
    TUI_R_RUNNING,
    TUI_R_OK,
    TUI_R_EDITED,
    TUI_R_REJECTED,
    TUI_R_FAIL,
    TUI_R_ADD,
    TUI_R_DEL,
    TUI_R_ADD_WORD,
    TUI_R_DEL_WORD,
    TUI_R_HUNK,
    TUI_R_LINENO,
    TUI_R_MARK, /* the line a diagnostic jumped to */
    TUI_R_ERROR,
    TUI_R_WARNING,
    TUI_R_NOTE,
    TUI_R_LINK,
    TUI_R_PLOT,
    TUI_R_POINT,
    TUI_R_BASE_POINT,
    TUI_R_BAR,
    TUI_R_STATUS,
    TUI_R_STATUS_KEY,
    TUI_R_STATUS_ALERT,
    TUI_R_SEARCH,
    TUI_R_PROMPT,
    TUI_NROLES
};

/* ---- styled lines --------------------------------------------------------- */

typedef struct tui_span {
    int off, len; /* bytes of the line's text */
    int role;
} tui_span;

typedef struct tui_line {
    char *text; /* UTF-8, no newline, tabs expanded */
    int len;
    int role; /* of the whole line; spans override it */
    tui_span *spans;
    int nspans;
    char *link; /* a knowledge-base id Enter opens, or NULL */
    int tag;    /* pane-defined: a step index, a new-file line number, a diagnostic */
    int tag2;   /* pane-defined: an old-file line number */
    int hunk;   /* source: the diff hunk (1, 2, ...) the line belongs to, 0 none */
} tui_line;

typedef struct tui_lines {
    tui_line *v;
    int n, cap;
} tui_lines;

/* Add a line (text copied, tabs expanded to 4 columns, control bytes shown
 * as '?'); returns it for spans and tags. len < 0: strlen. */
tui_line *tui_lines_add(tui_lines *l, const char *text, int len, int role);
tui_line *tui_lines_addf(tui_lines *l, int role, const char *fmt, ...) DT_PRINTF(3, 4);
void tui_line_span(tui_line *ln, int off, int len, int role);
void tui_line_set_link(tui_line *ln, const char *id);
/* Forget every line (memory kept for reuse is released too). */
void tui_lines_clear(tui_lines *l);
/* The first line at or after `from` (wrapping around) whose text contains
 * needle, ignoring ASCII case; -1 when none. dir -1 searches backwards. */
int tui_lines_find(const tui_lines *l, const char *needle, int from, int dir);

/* ---- widths and wrapping ---------------------------------------------------
 * UTF-8 decoded here; widths by wcwidth(3) in the current locale. A byte
 * that is not valid UTF-8, and a character wcwidth rejects, count one column
 * (it is drawn as '?'), so a non-UTF-8 locale degrades to one column per
 * character rather than to garbage. */

/* Decode one character at s (n bytes available); returns its length (>= 1)
 * and the code point in *cp (0xFFFD for an invalid byte). */
int tui_utf8_next(const char *s, int n, unsigned *cp);
/* Columns a character takes: 0 for combining marks, 2 for wide ones. */
int tui_cp_width(unsigned cp);
int tui_str_width(const char *s, int len);
/* How many bytes of s fit in cols columns (a wide character that would
 * straddle the edge is left out); *used gets the columns they take. */
int tui_fit(const char *s, int len, int cols, int *used);
/* The byte offset of column col (the character covering it), or len. */
int tui_col_to_byte(const char *s, int len, int col);
/* Break text into lines of at most width columns: at '\n', else after the
 * last blank that fits, else (one long word) at the edge; a wide character
 * is never split. fn gets each piece (without the newline or the blank it
 * broke at). Returns the number of pieces (an empty text gives 0). */
typedef void tui_wrap_fn(const char *s, int len, void *ud);
int tui_wrap(const char *text, int len, int width, tui_wrap_fn *fn, void *ud);
/* tui_wrap into plain lines appended to out; returns how many. */
int tui_wrap_lines(const char *text, int width, tui_lines *out);

/* ---- layout ------------------------------------------------------------------ */

typedef enum {
    TUI_P_STEPS,
    TUI_P_REASON,
    TUI_P_SOURCE,
    TUI_P_DIAG,
    TUI_P_PERF,
    TUI_NPANES
} tui_pane_id;

typedef struct tui_rect {
    int y, x, h, w;
} tui_rect;

typedef enum { TUI_TIER_SMALL, TUI_TIER_MEDIUM, TUI_TIER_WIDE } tui_tier;

typedef struct tui_layout {
    int cols, rows;
    tui_tier tier;
    int too_small;            /* below TUI_MIN_COLS x TUI_MIN_ROWS: only a message fits */
    tui_rect pane[TUI_NPANES]; /* panes in the same slot share a rectangle */
    int slot[TUI_NPANES];     /* equal numbers: one of them is shown at a time */
    int nslots;
    tui_rect status; /* the two bottom rows: status and keys */
    int side_by_side; /* the source pane is wide enough for two columns */
} tui_layout;

#define TUI_MIN_COLS 40
#define TUI_MIN_ROWS 12

/* Pane rectangles for a terminal of cols x rows. Small (under 110 x 30):
 * steps on the left; the current step's reasoning over one slot shared by
 * source, diagnostics and performance. Medium (110 x 30 and up, 120 x 40
 * the design point): every pane in its own place, steps over performance
 * on the left, reasoning, source and diagnostics stacked on the right.
 * Wide (180 x 45 and up): performance in a right-hand column of its own.
 * This function can't fail. */
void tui_layout_compute(int cols, int rows, tui_layout *out);
/* A failed step at its gate on a small terminal: the reasoning pane, whose
 * last block shows the errors, their source lines and what can be done,
 * takes the shared slot's rows but six (the source around the error stays
 * in view). Other tiers show every pane at once and are left as they are.
 * This function can't fail. */
void tui_layout_give_reason(tui_layout *l);

/* ---- the model ------------------------------------------------------------------
 * What the events said, kept for drawing: steps, source revisions,
 * diagnostics and logs, measurements, the latest occupancy. */

typedef struct tui_step {
    int id;
    char kind[16];
    int version;
    char agent[48];
    char status[20]; /* running, awaiting review, approved, edited, rejected, failed, skipped */
    int ok;
    double t_start, t_end; /* event times; t_end 0 while running */
    double seconds;
    long tokens_in, tokens_out;
    double cost;
    dt_buf text;       /* reasoning, as streamed */
    char *feedback;    /* inputs.feedback: why the step runs again */
    char *came_from;   /* the transition that started it, in words */
    cJSON *artifact;   /* the latest artifact's json (owned) */
    char decision[12]; /* the gate's decision, "" before */
    char decided_by[12];
    char *reason; /* the decision's reason, or why it failed */
    int rev;      /* the source revision current when the step ended (or now), -1 none */
    int gate_failed; /* it awaits review having failed: it cannot be approved, only sent
                        back, edited (gate_edit) or stopped */
    int gate_edit;   /* that failed gate offers an edit (the plan, or the kernel) */
} tui_step;

typedef struct tui_rev {
    char label[32]; /* "v2", "v2 edited" */
    int version;
    int edited;
    int step; /* id of the step whose artifact it is */
    char *source;
} tui_rev;

typedef struct tui_diag {
    int step; /* 0 for logs without a step */
    int is_log;
    char severity[12]; /* error, warning, note; logs: their level */
    char source[16];   /* nvrtc, ptxas, rule, verify, lua, log, worker */
    char id[96];
    int line; /* 0 when none */
    int rev;  /* the source revision the line refers to, -1 none */
    char *message;
    char *hint;
} tui_diag;

typedef struct tui_meas {
    int step;
    int version; /* kernel version measured */
    double us, gbps, gflops, speedup, flops, min_bytes;
    char method[12];
    char base_alg[32];
    double base_us;
    double dram_bytes;   /* CUPTI read + write, 0 when unknown */
    double achieved_occ; /* CUPTI, -1 when unknown */
    double l2_hit;       /* -1 when unknown */
    double sm_pct;       /* -1 when unknown */
    int metrics_available;
    char metrics_reason[160];
    char gpu[32]; /* roofline.gpu */
} tui_meas;

/* Dirty bits: what a change touched. */
enum {
    TUI_D_STEPS = 1,
    TUI_D_REASON = 2,
    TUI_D_SOURCE = 4,
    TUI_D_DIAG = 8,
    TUI_D_PERF = 16,
    TUI_D_STATUS = 32,
    TUI_D_ALL = 63
};

typedef struct tui_model {
    char session[64];
    char backend[16];
    char model_name[64];
    char gpu[96]; /* fingerprint's device name, "none" without one */
    char spec_gpu[32]; /* the spec's target GPU, "" for auto */
    char fallback_why[200]; /* the backend in use fell back to expert: why ("" none) */
    double price_out;       /* USD per million output tokens, for the streaming estimate */
    double retry_at;        /* an LLM retry is due at this event time (0 none) */
    char retry_why[32];
    int retry_attempt;
    double clock;           /* the time the status row is drawn for (live: now; replay: the
                               latest event's) */
    int have_gpu;
    char op[16], dtype[8], matrix[256], review[16];
    tui_step *steps;
    int nsteps, capsteps;
    tui_rev *revs;
    int nrevs, caprevs;
    tui_diag *diags;
    int ndiags, capdiags;
    tui_meas *meas;
    int nmeas, capmeas;
    cJSON *occupancy;  /* the latest hw_occ_json (compile's, else check's); owned */
    int occ_version;   /* kernel version it was computed for (0: before compiling) */
    int occ_compiled;  /* from a compile (registers known) rather than a prediction */
    cJSON *tune_best;  /* tune artifact's best, owned */
    int awaiting;      /* step id awaiting review, 0 none */
    int running;       /* step id running, 0 none */
    int started, finished;
    int exit_code;
    char finish_reason[600];
    cJSON *best; /* session_finished's best, owned */
    long tokens_in, tokens_out;
    double cost;
    long nevents;
    double last_t; /* the latest event's time */
    char *next_from; /* the last transition, in words, until the step it starts */
    unsigned dirty;
    int dirty_step; /* step id whose reasoning changed (with TUI_D_REASON) */
} tui_model;

void tui_model_init(tui_model *m);
void tui_model_clear(tui_model *m); /* frees what it holds; m is empty afterwards */
/* Apply one event (agents/EVENTS.md); unknown types are ignored. */
void tui_model_apply(tui_model *m, const cJSON *ev);
/* A line the workbench itself logs (worker stderr, errors of a key). */
void tui_model_log(tui_model *m, const char *level, const char *source, const char *msg);
/* Index of the step with that id, or -1. */
int tui_model_step_index(const tui_model *m, int id);
/* The revision a step's source view shows: the step's own, else the one
 * before it, else the latest. -1 when there is none. */
int tui_model_rev_for_step(const tui_model *m, int step_index);

/* ---- builders: model -> lines ----------------------------------------------------
 * Each appends a pane's whole content to out for a pane of `width` columns
 * (inside the border). They never touch the terminal. */

/* Steps: one line per step (tag: step index); `now` (monotonic-free wall
 * seconds) ages the running step; spin picks the spinner frame. */
void tui_steps_build(const tui_model *m, int width, int utf8, double now, int spin,
                     tui_lines *out);

/* A predicate for knowledge-base ids (links), e.g. kb_get != NULL. */
typedef int tui_is_link_fn(const char *id, void *ud);
/* Reasoning of the step at index si: header, feedback, the streamed text
 * wrapped, the plan's rationale (each rule a link), the decision; lines
 * that name a knowledge-base id carry it as their link. */
void tui_reason_build(const tui_model *m, int si, int width, int live, tui_is_link_fn *is_link,
                      void *ud, tui_lines *out);

/* Source: revision `to` with a diff against `from` (-1: plain source), whole
 * file or hunks of 3 lines context, unified or side by side. Lines' tag is
 * the new file's line number (0 on deleted lines), tag2 the old one's. */
void tui_source_build(const tui_model *m, int from, int to, int width, int side_by_side,
                      int whole_file, int utf8, tui_lines *out);

/* Hunks for review: how many hunks (3 lines of context, as the source pane
 * shows them) the diff of a against b has, and b with the hunks whose
 * rejected[i] is set undone (their old lines back). Caller frees. */
int tui_hunks_count(const char *a, const char *b);
char *tui_hunks_apply(const char *a, const char *b, const unsigned char *rejected, int n);

/* Diagnostics and logs, newest last (tag: diagnostic index); those about an
 * older kernel version than the latest are dimmed and name their version. */
void tui_diag_build(const tui_model *m, int width, tui_lines *out);
/* Errors and warnings about the current kernel version (or, before one
 * exists, the plan), and errors about older versions. */
void tui_diag_counts(const tui_model *m, int *err, int *warn, int *older_err);

/* Occupancy (theoretical, achieved, limiter, three what-if curves), the
 * measurements table and the roofline with every measured version and the
 * best cuSPARSE algorithm as points. g may be NULL (no spec known: the
 * roofline is left out with a line saying so); plot_h is the roofline's
 * height in rows (at least 8). */
void tui_perf_build(const tui_model *m, const hw_spec *g, int width, int plot_h, int utf8,
                    tui_lines *out);
/* One row of block characters (ASCII digits-and-dots without utf8) drawing
 * occupancy across a what-if curve's axis in `width` cells; *marker gets the
 * cell of the current value. */
void tui_sparkline(const hw_occ_curve *c, int width, int utf8, dt_buf *out, int *marker);

/* The status bar's first row: spec, GPU, backend and model, step n/m (the
 * step shown, sel an index or -1), tokens and cost, the run's state; in a
 * replay, the event position pos of nev first. */
void tui_status_text(const tui_model *m, int sel, int replay, int pos, int nev, dt_buf *out);
/* The same row for width columns: the least telling pieces (the matrix,
 * the problem, the GPU, the backend, the step) are left out, in that
 * order, until it fits; the run's state always stays (the caller draws
 * it with an ellipsis if even that is too wide). */
void tui_status_fit(const tui_model *m, int sel, int replay, int pos, int nev, int width,
                    dt_buf *out);

/* ---- replay (replay.c) ------------------------------------------------------------ */

/* vt gets, per event, its time on the replay's clock: the recording's,
 * with pauses over a second shortened to one (nev entries). */
void tui_timeline(const cJSON *const *ev, int nev, double *vt);
/* The position after the next (dir 1) or before the previous (dir -1) unit
 * from pos: one event, or a whole agent message (a run of one step's text
 * events). */
int tui_replay_unit(const cJSON *const *ev, int nev, int pos, int dir);
/* The position just after step's step_finished (all of it recorded when it
 * was cut off), -1 when no such step started. */
int tui_replay_step_end(const cJSON *const *ev, int nev, int step);

#endif /* DITTO_TUI_INTERNAL_H */
