/* tui.h -- the workbench: a terminal front end that renders the pipeline's
 * events (agents/EVENTS.md) in panes -- steps, reasoning, source with diffs,
 * diagnostics, roofline and occupancy -- and sends review decisions back.
 * It owns no pipeline logic: everything it shows comes from events, and
 * everything it does goes through the orchestrator's API (ag_decide,
 * ag_approve_rest, ag_request_tune, ag_stop) or the knowledge base's
 * (kb_review).
 *
 * Prefix tui_. tui/ is the only code that includes curses. It never
 * blocks: the terminal is one more file descriptor of the caller's dt_loop,
 * next to the workers and the LLM streams, and drawing happens in the
 * loop's beforesleep. The terminal is restored on every exit path: a
 * return, a crash (SIGSEGV, SIGBUS, SIGFPE, SIGABRT) or a signal (SIGTERM,
 * SIGINT, SIGHUP, SIGQUIT), whose handlers restore it and re-raise.
 *
 * Ownership: everything in tui_opts is borrowed for the call. */
#ifndef DITTO_TUI_H
#define DITTO_TUI_H

#include "agents/agents.h"

typedef struct tui_opts {
    dt_loop *loop;              /* live: the loop the run uses; replay: NULL (one is made) */
    ag_run *run;                /* live: made, not started; the workbench adds its sink and starts it */
    const cJSON *resume_events; /* live: a session's events to resume from (ag_run_start), or NULL */
    void *kb;                   /* kb* for the review screen and rule links, or NULL */
    const char *model;          /* the LLM's model name for the status bar, or NULL */
    const cJSON *events;        /* replay: the session's events, in order */
    const char *title;          /* replay: the session id, for the status bar */
    const char *reviewer;       /* name on knowledge reviews (default: $USER, else "person") */
    double price_out;           /* live: USD per million output tokens (0: unknown), for the
                                   estimate while a step streams */
    const char *notes_path;     /* replay: the session's annotations.jsonl, or NULL */
    double speed;               /* replay: playing speed (0: 1) */
    int start_step;             /* replay: open at the end of this step (0: at the start) */
} tui_opts;

/* Open the workbench on a run and drive it until the person quits. Returns
 * the exit status: 0 after quitting (the run's own result is on the screen
 * and in the session), AG_EXIT_STOPPED when the person quit while the run
 * was still working; -1 with e when it cannot start (no terminal). */
int tui_run_live(const tui_opts *o, dt_err *e);

/* Open the workbench on a finished (or cut-off) session's events, offline:
 * no worker, no LLM. The person steps through the events forward and back
 * or plays them. Returns 0, or -1 with e when it cannot start. */
int tui_run_replay(const tui_opts *o, dt_err *e);

/* Render a replay without a terminal into an asciicast v2 recording at
 * path (a header line, then [seconds, "o", output] lines): the workbench
 * drawn in cols x rows as the events play at o->speed, each agent message
 * as one frame, from o->start_step's end when given. Returns 0, or -1 with
 * e (the file named). */
int tui_export_cast(const tui_opts *o, const char *path, int cols, int rows, dt_err *e);

#endif /* DITTO_TUI_H */
