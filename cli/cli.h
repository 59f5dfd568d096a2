/* cli.h -- the command-line front end: one function per `ditto COMMAND`.
 *
 * Each command takes the arguments after its name (argv[0] is the command
 * name) and returns the process exit status: 0 success, 1 failure of the
 * work, 2 misuse (bad flags or arguments), 66 something named does not exist
 * (CLI_NOT_FOUND); some commands add their own. Commands print results on stdout
 * and errors on stderr as one line naming what to fix. */
#ifndef DITTO_CLI_H
#define DITTO_CLI_H

#include "core/core.h"

#define CLI_OK    0
#define CLI_FAIL  1
#define CLI_USAGE 2
/* Something named on the command line does not exist: a file, a matrix, a
 * session, a knowledge-base entry, a GPU. The same status from every command
 * (sysexits.h's EX_NOINPUT), documented in `ditto --help` and the man page. */
#define CLI_NOT_FOUND 66

typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary; /* one line for `ditto --help` */
    const char *usage;   /* full text for `ditto COMMAND --help` */
} cli_command;

/* The table in main.c; NULL-name terminated. */
extern const cli_command cli_commands[];

/* True when argv holds -h or --help (commands print their usage then). */
int cli_wants_help(int argc, char **argv);
/* Print "ditto COMMAND: message" and the hint to run --help; returns
 * CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) DT_PRINTF(2, 3);
/* Print the usage text of a command to stdout; returns CLI_OK. */
int cli_print_usage(const char *cmd);
/* "--flag VALUE" or "--flag=VALUE" at argv[*i] (cli/wiring.c): the value,
 * advancing *i past it; NULL when argv[*i] is not this flag, with *missing
 * set when it is but the value is absent. */
const char *cli_flag_value(int argc, char **argv, int *i, const char *flag, int *missing);
/* A spec's "gpu" (cli/wiring.c): "auto" or a name hw_load knows. Else prints
 * "ditto CMD: SPEC: $.gpu: unknown GPU 'X'; known: ..." and returns -1 (the
 * caller exits CLI_USAGE): a misspelt GPU is never replaced by another. */
int cli_check_spec_gpu(const char *cmd, const char *spec_path, const char *gpu);
/* True (after printing "ditto CMD: PATH: no such file") when the file PATH
 * names does not exist: the caller exits CLI_NOT_FOUND. */
int cli_file_missing(const char *cmd, const char *path);
/* The exit status for a session that could not be read (sess_log_read's
 * error): CLI_NOT_FOUND when there is no such session, else CLI_FAIL. */
int cli_session_status(const dt_err *e);
/* True (after printing "ditto CMD: MATRIX: no such file ...") when a matrix
 * argument names a file that is found neither as given nor in
 * $DITTO_MATRIX_PATH; generator specs, rep: and "-" are not files. Checked
 * before a GPU is looked for, so a typo is told first. */
int cli_matrix_missing(const char *cmd, const char *matrix);
/* Progress of a long read on stderr, only when stderr is a terminal and only
 * once the step has run for a second: "reading NAME: 120 MB of 293 MB (41%)",
 * redrawn at most five times a second and erased by cli_progress_end.
 * Pass cli_progress_bytes and the cli_progress as sp_read_opts' progress
 * and progress_ud. */
/* A matrix argument "-" for a command whose worker reads the matrix (the
 * worker's stdin is its protocol): standard input is copied, as it is (plain
 * or gzip), to a file under $XDG_CACHE_HOME/ditto/ of at most
 * CLI_STDIN_MAX bytes. Returns that path (caller unlinks and frees), or NULL
 * after printing "ditto CMD: ..." (the caller exits CLI_FAIL). */
#define CLI_STDIN_MAX ((int64_t)64 << 30)
char *cli_spool_stdin(const char *cmd);
/* Run fn(argc, argv) with an argument "-" (a matrix on standard input)
 * replaced by the path cli_spool_stdin gives, removed afterwards; without
 * one, fn runs on argv as it is. Two "-" are a usage error. */
int cli_with_stdin_matrix(const char *cmd, int argc, char **argv, int (*fn)(int, char **));
typedef struct cli_progress {
    const char *what; /* borrowed */
    double t0, last;  /* start; last redraw */
    int tty, shown;
} cli_progress;
void cli_progress_start(cli_progress *p, const char *what);
void cli_progress_bytes(void *ud, int64_t done, int64_t total);
/* The same for rows: "profiling NAME: 1.2M of 2.0M rows (60%)". */
void cli_progress_rows(void *ud, int64_t done, int64_t total);
void cli_progress_end(cli_progress *p);
/* The hardware commands (cli/hw.c, cli/occupancy.c, cli/roofline.c) and
 * their usage texts, which live beside them. */
int cli_hw(int argc, char **argv);
int cli_occupancy(int argc, char **argv);
int cli_roofline(int argc, char **argv);
extern const char cli_hw_usage[];
extern const char cli_occupancy_usage[];
extern const char cli_roofline_usage[];

/* Commands, and the usage texts that live beside them. */
int cli_profile(int argc, char **argv);
int cli_worker(int argc, char **argv);
int cli_check(int argc, char **argv);
int cli_baseline(int argc, char **argv);
int cli_calibrate(int argc, char **argv);
extern const char cli_check_usage[];
extern const char cli_baseline_usage[];
extern const char cli_calibrate_usage[];
/* `ditto sessions` (cli/sessions.c): list the session store and show one. */
int cli_sessions(int argc, char **argv);
extern const char cli_sessions_usage[];

/* The pipeline (run.c) and the tuner (tune.c). */
int cli_run(int argc, char **argv);
int cli_resume(int argc, char **argv);
int cli_tune(int argc, char **argv);
int cli_bench(int argc, char **argv);
extern const char cli_bench_usage[];
extern const char cli_run_usage[];
extern const char cli_tune_usage[];

/* config.c: $XDG_CONFIG_HOME/ditto/config.json ($DITTO_CONFIG overrides the
 * path). Missing file: an empty object. Problems are appended one per line
 * ("FILE: $.key: ..."). Caller frees the result. */
char *cli_config_path(void);
cJSON *cli_config_load(dt_buf *problems);
/* config.json's workers.ship as gpu_pool_opts.ship: 1 "always", -1
 * "never", 0 "auto" or absent (cli_config_load checked the value). */
int cli_ship_mode(const cJSON *workers);

/* The workbench (cli/tui.c): `ditto tui SPEC`, `ditto replay ID`, and the
 * built-in default problem `ditto` with no command opens on a terminal. */
int cli_tui(int argc, char **argv);
int cli_replay(int argc, char **argv);
int cli_tui_default(void);
extern const char cli_tui_usage[];
extern const char cli_replay_usage[];

/* `ditto kb` (cli/kb.c): review and query the knowledge base. */
int cli_kb(int argc, char **argv);
/* `ditto kb split` and `ditto kb fit` (cli/fit.c; argv[0] is the subcommand). */
int cli_kb_split(int argc, char **argv);
int cli_kb_fit(int argc, char **argv);
extern const char cli_kb_usage[];

/* `ditto export` (cli/sessions.c): its options; export/export.h does the work. */
int cli_export(int argc, char **argv);
extern const char cli_export_usage[];

#endif /* DITTO_CLI_H */
