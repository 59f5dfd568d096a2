/* cli.h -- the command-line front end: one function per `ditto COMMAND`.
 *
 * Each command takes the arguments after its name (argv[0] is the command
 * name) and returns the process exit status: 0 success, 1 failure of the
 * work, 2 misuse (bad flags or arguments). Commands print results on stdout
 * and errors on stderr as one line naming what to fix. */
#ifndef DITTO_CLI_H
#define DITTO_CLI_H

#include "core/core.h"

#define CLI_OK    0
#define CLI_FAIL  1
#define CLI_USAGE 2

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
extern const char cli_kb_usage[];

/* `ditto export` (cli/export.c): a session's best kernel as a standalone kernel.cu, a
 * harness.cu that checks and times it, a Makefile and a README. The harness's fixed parts
 * (cli/export_harness.c): the head goes before the generated launch contract, the tail
 * after it. */
int cli_export(int argc, char **argv);
extern const char cli_export_usage[];
extern const char cli_export_harness_head[];
extern const char cli_export_harness_tail[];

#endif /* DITTO_CLI_H */
