/* ui.h -- the workbench's curses side: theme, terminal, panes, overlays and
 * the app that ties them to the event loop. Only tui/ includes this. */
#ifndef DITTO_TUI_UI_H
#define DITTO_TUI_UI_H

#define _XOPEN_SOURCE_EXTENDED 1

#include <ncursesw/curses.h>
#include <panel.h>

#include "agents/agents.h"
#include "knowledge/knowledge.h"
#include "tui/internal.h"
#include "tui/tui.h"

/* ---- theme (theme.c) -------------------------------------------------------- */

/* Colours when the terminal has them and NO_COLOR is unset, else the
 * monochrome attributes of the same roles. Call after initscr. */
void tui_theme_init(void);
attr_t tui_attr(int role);
short tui_pair(int role);
int tui_theme_color(void); /* 1 when colours are in use */

/* Status glyphs: UTF-8 symbols, or ASCII when the locale is not UTF-8. */
const char *tui_glyph_status(const char *status, int utf8, int spin);

/* ---- drawing helpers (draw.c) ---------------------------------------------------- */

/* Draw UTF-8 text at (y, x) of w clipped to cols columns, starting `skip`
 * columns in (horizontal scroll); characters outside the locale (or any
 * non-ASCII one without utf8) are drawn as '?'. Returns columns drawn. */
int tui_put(WINDOW *w, int y, int x, const char *s, int len, int skip, int cols, attr_t a,
            short pair, int utf8);
/* Draw UTF-8 text in at most cols columns; text that does not fit ends in
 * an ellipsis ("..." without utf8) instead of being cut silently.
 * len < 0: strlen. Returns columns drawn. */
int tui_put_fit(WINDOW *w, int y, int x, const char *s, int len, int cols, attr_t a, short pair,
                int utf8);
/* Draw a styled line: its role, spans, and search matches highlighted. */
void tui_put_line(WINDOW *w, int y, int x, const tui_line *ln, int skip, int cols, int base_role,
                  const char *search, int utf8);
/* A box with a title (and an optional right-aligned note) in the border. */
void tui_frame(WINDOW *w, const char *title, const char *note, int focused, int utf8);

/* ---- terminal (term.c) ------------------------------------------------------------ */

/* How long curses waits after an Esc for the rest of a key's sequence,
 * unless ESCDELAY is set: none. A terminal writes a sequence whole, so its
 * bytes are there when the Esc is read; a tail split off in transit is
 * swallowed by the app (app.c, esc_tail) instead of waited for. */
#define TUI_ESCDELAY_MS 0

/* Curses on, signal handlers that restore the terminal before a crash or a
 * kill, stderr captured into a pipe (read end in *err_fd) so stray writes
 * never scribble on the screen. -1 with e when there is no terminal. */
int tui_term_open(int *err_fd, int *winch_fd, dt_err *e);
/* Curses off, stderr back, handlers removed; what stderr got and nobody
 * read is written to the real stderr. Safe to call twice. */
void tui_term_close(void);
/* Around an external program: the real terminal and stderr, then back. */
void tui_term_suspend(void);
void tui_term_resume(void);
int tui_term_utf8(void);

/* ---- panes (pane.c and one file per pane) ----------------------------------------- */

typedef struct tui_app tui_app;
typedef struct tui_pane tui_pane;

typedef struct tui_pane_ops {
    const char *title;
    int cursor; /* a cursor line (a selection) rather than plain scrolling */
    /* Rebuild p->lines from the model for width columns. */
    void (*build)(tui_pane *p, tui_app *a, int width);
    /* Pane-specific keys; 1 when handled. */
    int (*key)(tui_pane *p, tui_app *a, int key);
    /* The right-hand note in the border ("v2 vs v1"), into buf. */
    void (*note)(tui_pane *p, tui_app *a, char *buf, size_t n);
} tui_pane_ops;

struct tui_pane {
    tui_pane_id id;
    const tui_pane_ops *ops;
    WINDOW *win;
    PANEL *panel;
    tui_rect r;
    int shown;      /* visible in its slot */
    tui_lines lines;
    int top;        /* first line shown */
    int left;       /* columns scrolled horizontally */
    int cur;        /* cursor line for cursor panes */
    int stale;      /* lines must be rebuilt */
    int redraw;     /* the window must be repainted */
    int built_w;    /* width the lines were built for */
    int follow;     /* keep the end in view as lines arrive */
    char search[128];
};

extern const tui_pane_ops tui_steps_ops, tui_reason_ops, tui_source_ops, tui_diag_ops,
    tui_perf_ops;

int tui_pane_rows(const tui_pane *p); /* lines inside the border */
int tui_pane_cols(const tui_pane *p);
void tui_pane_place(tui_pane *p, tui_rect r, int shown);
void tui_pane_draw(tui_pane *p, tui_app *a);
/* Rebuild the lines when the model changed, without drawing: keys act on
 * what the pane holds, which must be what the person is about to see. */
void tui_pane_refresh(tui_pane *p, tui_app *a);
/* Scrolling and cursor keys shared by every pane; 1 when handled. */
int tui_pane_key(tui_pane *p, tui_app *a, int key);
void tui_pane_scroll_to(tui_pane *p, int line);
/* The panes hidden behind this one in its slot, in words ("Tab:
 * Diagnostics (2 errors), Roofline & occupancy") into buf; returns how
 * many (0: the pane has its place to itself, buf empty). */
int tui_pane_hidden_note(tui_app *a, int pane, char *buf, size_t n);
void tui_pane_free(tui_pane *p);

/* ---- the app (app.c) ---------------------------------------------------------------- */

typedef enum {
    TUI_MODAL_NONE,
    TUI_MODAL_PROMPT,
    TUI_MODAL_CONFIRM,
    TUI_MODAL_TEXT, /* help, a knowledge-base entry */
    TUI_MODAL_KB,
    TUI_MODAL_VERSIONS
} tui_modal;

typedef enum {
    TUI_ASK_REJECT,
    TUI_ASK_SEARCH,
    TUI_ASK_KB_APPROVE,
    TUI_ASK_KB_REJECT,
    TUI_ASK_JUMP, /* replay: a step number */
    TUI_ASK_NOTE, /* replay: a teacher's note at this moment */
    TUI_ASK_GPU,  /* the GPU the figures assume */
    TUI_ASK_CMD   /* the : palette: switch model, endpoint or backend */
} tui_ask;

/* A teacher's note in a replay (annotations.jsonl): shown once the replay
 * reaches pos (events applied), in the step's reasoning. */
typedef struct tui_note {
    int pos;
    int step;
    char by[32];
    char *text;
} tui_note;

/* The most a prompt holds (a rejection's reason, a note): past it typing
 * says so, and Ctrl-E's $EDITOR text is refused whole, never cut. */
#define TUI_INPUT_MAX 16384

/* Seconds a decision waits before the run gets it (and the next step
 * starts): u takes it back until then. */
#define TUI_UNDO_S 3

/* The knowledge review screen (kbscreen.c). */
typedef struct tui_kbscreen {
    cJSON *list; /* proposed entries, copies */
    int sel, top;
    int detail_top;
    char filter[16]; /* "proposed" or "" for all */
} tui_kbscreen;

struct tui_app {
    const tui_opts *o;
    int replay;
    dt_loop *loop;
    ag_run *run;
    kb *k;
    tui_model model;
    int utf8;
    tui_layout lay;
    tui_pane panes[TUI_NPANES];
    int focus;
    int slot_pane[TUI_NPANES]; /* per slot: the pane shown there */
    long focus_stamp[TUI_NPANES]; /* when each pane last had the focus */
    long focus_clock;
    WINDOW *status_win;
    PANEL *status_panel;
    WINDOW *input; /* never drawn: reads keys without refreshing anything */
    int status_dirty;
    int full_redraw;
    /* selection: the step the reasoning and source panes show */
    int sel;       /* step index */
    int sel_follow; /* track the newest step */
    int src_from, src_to; /* a pinned pair of revisions (-1: follow the selection) */
    int src_whole;        /* whole file (1) or hunks (0) */
    int src_mark;         /* new-file line a diagnostic jumped to, 0 none */
    int src_jump;         /* scroll to this new-file line at the next build, 0 none */
    int src_built_from, src_built_to; /* the pair the source pane shows */
    int lay_failed;                   /* the layout gives the reasoning room for a failed gate */
    /* performance pane: the GPU spec the figures use, loaded on demand */
    hw_spec *gpu_spec;
    char gpu_spec_name[32];
    char gpu_pick[32]; /* the GPU the person picked for the figures (H), "" none */
    /* modal state */
    tui_modal modal;
    WINDOW *mwin;
    PANEL *mpanel;
    int mdirty;
    tui_ask ask;
    wchar_t *input_buf; /* the prompt's text, up to TUI_INPUT_MAX characters */
    int input_len, input_cap;
    int prompt_multi; /* the prompt is the multi-line editor overlay */
    char confirm_q[256];
    int confirm_what;
    tui_lines text; /* TUI_MODAL_TEXT content */
    char text_title[128];
    int text_top;
    tui_kbscreen kbs;
    int vpick_sel, vpick_from; /* version picker */
    char flash[400];
    int flash_alert;
    double flash_until;
    long long flash_timer; /* its expiry, 0 none */
    int closing;           /* tui_app_close has begun: no new timers */
    /* running state */
    int quit;
    int exit_code;
    int spin;
    long long tick_timer;
    int err_fd, winch_fd;
    dt_buf errline;
    /* replay */
    const cJSON *events;
    const cJSON **ev;  /* the events as an array: cJSON's are lists */
    int nev, pos;      /* events applied: [0, pos) */
    int playing;
    long long play_timer;
    double speed;     /* the recording's seconds per real second */
    double *vt;       /* per event: its time on the replay's clock (gaps capped) */
    double play_t0, play_vt0; /* when play (re)started, and the clock then */
    tui_note *notes;
    int nnotes, capnotes;
    /* review: a decision held for its undo window (TUI_UNDO_S) */
    int pend;
    ag_decision pend_d;
    cJSON *pend_art;   /* owned */
    char *pend_reason; /* owned */
    int pend_rest;     /* A: this and every later step */
    int pend_failed;   /* the step decided on failed: it is sent back, never approved */
    int pend_step;
    double pend_until;
    long long pend_timer;
    char *kept_edit; /* an edit the run refused, for the next e (owned) */
    int kept_step;
    unsigned char *hunk_rej; /* per hunk of the kernel under review: 1 rejected */
    int nhunk_rej;
    int hunk_step; /* the step the marks are for */
    /* Esc: 1 just after a lone Esc, 2 inside a CSI tail, 3 an SS3 tail */
    int esc_state;
    double esc_t;
    /* measurement hooks for the latency benchmark */
    long frames;
};

void tui_app_mark(tui_app *a, unsigned dirty);
void tui_app_flash(tui_app *a, int alert, const char *fmt, ...) DT_PRINTF(3, 4);
void tui_app_focus(tui_app *a, int pane);
/* The step the reasoning pane shows (index), -1 when there are none. */
int tui_app_sel(const tui_app *a);
void tui_app_select(tui_app *a, int step_index, int follow);
/* The revisions the source pane compares. */
void tui_app_src_pair(const tui_app *a, int *from, int *to);
/* The decision waiting in its undo window, in words. */
void tui_app_pending_text(const tui_app *a, char *buf, size_t n);
/* Per-hunk review of the kernel awaiting review: the hunks' marks, reset
 * when another step awaits; 1 when the source pane shows that kernel's
 * diff (so x and the marks apply). */
int tui_app_hunk_review(tui_app *a);
/* Open the one-line prompt; what Enter does depends on ask. */
void tui_app_prompt(tui_app *a, tui_ask ask, const char *initial);
/* A text overlay (help, a knowledge-base entry) from lines the caller built
 * into a->text. */
void tui_app_show_text(tui_app *a, const char *title);
/* Open a knowledge-base entry by id in the text overlay. */
void tui_app_open_entry(tui_app *a, const char *id);
/* Show a revision line in the source pane (from a diagnostic). */
void tui_app_jump_source(tui_app *a, int rev, int line);
/* The GPU spec for figures (cached), or NULL: the one the person picked,
 * else the one measured on, else the occupancy's, else the spec's. *why
 * (may be NULL) gets where it came from, in words. */
const hw_spec *tui_app_gpu(tui_app *a);
const char *tui_app_gpu_why(tui_app *a);

/* kbscreen.c */
void tui_kb_open(tui_app *a);
void tui_kb_draw(tui_app *a);
int tui_kb_key(tui_app *a, int key);
void tui_kb_review(tui_app *a, const char *status, const char *note);
void tui_kb_close(tui_app *a);
/* Lines describing an entry (title, state, content, evidence). */
void tui_kb_entry_lines(const cJSON *entry, const char *origin, int width, tui_lines *out);

/* source.c: the version picker */
void tui_versions_draw(tui_app *a);
int tui_versions_key(tui_app *a, int key);

/* replay.c: see there; the pure parts are in internal.h. */
void tui_replay_seek(tui_app *a, int pos);
int tui_replay_jump_step(tui_app *a, int step); /* -1: no such step */
void tui_replay_set_speed(tui_app *a, double speed);
int tui_replay_key(tui_app *a, int k); /* 1 when handled */
/* Read notes (a missing file is none); bad lines are skipped with a line in
 * warn. -1 when the file exists but cannot be read. */
int tui_notes_load(tui_app *a, const char *path, dt_buf *warn);
/* Keep a note at the current position: appended to o->notes_path. */
void tui_replay_note(tui_app *a, const char *text);
int tui_replay_notes_for(const tui_app *a, int step);
void tui_replay_note_lines(const tui_app *a, int step, int width, tui_lines *out);
void tui_replay_free(tui_app *a);

/* status.c */
void tui_status_draw(tui_app *a);

/* The app's lifecycle (app.c), used by tui_run_live/replay and the latency
 * benchmark. */
tui_app *tui_app_new(const tui_opts *o, int replay);
int tui_app_open(tui_app *a, dt_err *e);   /* the terminal and the windows */
/* The windows and panels on the current curses screen (tui_app_open's
 * second half; the export draws on a screen of its own). */
void tui_app_windows(tui_app *a, int utf8);
void tui_app_event(tui_app *a, const cJSON *ev);
void tui_app_render(tui_app *a);           /* draw what is dirty, one doupdate */
int tui_app_input(tui_app *a);             /* read every pending key; how many */
void tui_app_close(tui_app *a);            /* the terminal back */
void tui_app_free(tui_app *a);

#endif /* DITTO_TUI_UI_H */
