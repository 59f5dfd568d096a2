/* main.c -- ditto's entry point: global flags and the command table. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char profile_usage[] =
    "usage: ditto profile MATRIX|SPEC.json [--json] [--n N] [--k K] [--allow-nonfinite]\n"
    "\n"
    "Print the PatternReport of a matrix: sizes, row-length distribution, bandwidth\n"
    "and diagonals, block fill, locality of x gathers, minimum bytes and flops per\n"
    "operation and dtype, and the pattern class with the numbers that decided it.\n"
    "\n"
    "MATRIX is a Matrix Market (.mtx) or DLMC (.smtx) file, gzip-compressed or not\n"
    "(.mtx.gz), - for standard input, a generator spec such as\n"
    "gen:rmat:rows=1M,nnz=16M,seed=1, or rep:FILE:nnz=32M (FILE tiled\n"
    "block-diagonally to reach that many nonzeros). Relative paths are also\n"
    "looked up in each folder of $DITTO_MATRIX_PATH. A .json argument is read\n"
    "as a problem spec and its matrix is profiled (SDDMM's K is the spec's n); a\n"
    "spec's relative matrix path that names no file from the current folder is\n"
    "taken from the spec file's folder when it names one there.\n"
    "\n"
    "  --json              print the report as JSON\n"
    "  --n N               columns of B for the SpMM cost figures (default 32)\n"
    "  --k K               inner dimension for the SDDMM cost figures (default 32)\n"
    "  --allow-nonfinite   accept NaN and Inf values in the file\n"
    "\n"
    "Generators (sizes take K/M/G suffixes; seed defaults to 1, cols to rows; sizes\n"
    "are targets: stencils round rows to a whole grid, banded nnz to whole diagonals):\n"
    "  gen:stencil5:rows=N   gen:stencil7:rows=N   gen:stencil27:rows=N\n"
    "  gen:banded:rows=N,nnz=M (or bw=W)           gen:uniform:rows=N,nnz=M\n"
    "  gen:rmat:rows=N,nnz=M[,a=,b=,c=]            gen:block:rows=N,nnz=M,b=B\n"
    "  gen:dl:rows=N,cols=C,nnz=M\n"
    "  gen:arrow:rows=N,nnz=M[,hubs=H,hublen=L]  H dense rows and columns (hub rows of L)\n"
    "  gen:powerlaw:rows=N,nnz=M[,exp=E]         row of rank k ~ (k+1)^-E entries, shuffled\n"
    "  gen:blockdiag:rows=N[,b=B]                dense diagonal blocks of B/2..B rows\n"
    "  gen:bandout:rows=N,bw=W,outliers=K        a full band plus K entries outside it\n"
    "Every kind takes cols=C (not the stencils and blockdiag: square) for wide or tall\n"
    "shapes, seed=S and empty=F (that fraction of rows emptied after generation, so nnz\n"
    "is then about (1 - F) of the request). Sizes are exact except: stencils round rows\n"
    "to a grid, banded with nnz picks the nearest band, rmat may fall short on nearly\n"
    "full rows, block cuts at the border, blockdiag's nnz follows its block sizes.\n";

const cli_command cli_commands[] = {
    {"tui", cli_tui, "open the workbench on a problem spec (what `ditto` alone does)",
     cli_tui_usage},
    {"replay", cli_replay, "step through a recorded session in the workbench, offline",
     cli_replay_usage},
    {"hw", cli_hw, "list and show GPU spec files", cli_hw_usage},
    {"occupancy", cli_occupancy, "theoretical occupancy of a launch", cli_occupancy_usage},
    {"roofline", cli_roofline, "a GPU's roofline with kernels placed on it", cli_roofline_usage},
    {"run", cli_run, "run the pipeline on a problem spec, headless", cli_run_usage},
    {"resume", cli_resume, "continue a session after a crash from its last finished step",
     cli_run_usage},
    {"tune", cli_tune, "tune every fitting template on a problem and print the table",
     cli_tune_usage},
    {"bench", cli_bench, "ditto's kernels against the best cuSPARSE algorithm over a matrix set",
     cli_bench_usage},
    {"profile", cli_profile, "print the PatternReport of a matrix", profile_usage},
    {"check", cli_check, "compile, verify and measure a hand-written kernel", cli_check_usage},
    {"baseline", cli_baseline, "time every cuSPARSE algorithm on matrices", cli_baseline_usage},
    {"calibrate", cli_calibrate, "measure copy bandwidth and FMA peaks into the GPU's spec",
     cli_calibrate_usage},
    {"sessions", cli_sessions, "list recorded sessions and show one", cli_sessions_usage},
    {"export", cli_export, "a session's best kernel as a standalone .cu with a checking harness",
     cli_export_usage},
    {"kb", cli_kb, "list, review, import, export and query the knowledge base", cli_kb_usage},
    {"worker", cli_worker, "serve the GPU worker protocol on stdin/stdout (started by ditto)",
     "usage: ditto worker [--device N] [--once]\n"},
    {NULL, NULL, NULL, NULL},
};

/* The text --help and the man page (--help-man) share, so they cannot drift. */
static const char help_about[] = "a workbench that turns a sparse-kernel problem into a verified,\n"
                                 "measured and explained CUDA kernel.";
static const char help_env[] =
    "DITTO_MATRIX_PATH (folders searched for relative matrix paths),\n"
    "XDG_CONFIG_HOME / XDG_DATA_HOME / XDG_CACHE_HOME (config, sessions, caches).";
static const char help_exit[] =
    "0 success, 1 the work failed, 2 usage (bad flags, arguments or\n"
    "spec), 66 something named does not exist (a file, matrix, spec, session,\n"
    "knowledge-base entry or GPU), from every command; some add their own (see\n"
    "their --help).";

static void print_help(void)
{
    printf("ditto %s -- %s\n\n"
           "usage: ditto [--version] [--help] COMMAND [ARGS]\n\n"
           "commands:\n",
           DT_VERSION, help_about);
    for (const cli_command *c = cli_commands; c->name; c++)
        printf("  %-12s %s\n", c->name, c->summary);
    printf("\nRun 'ditto COMMAND --help' for a command's options.\n"
           "Exit status: %s\nEnvironment: %s\n",
           help_exit, help_env);
}

/* Text as roff: a backslash is \e, a line starting with '.' or '\'' is
 * protected, and '-' is \- so that options copy and search as typed. */
static void roff_text(const char *s)
{
    int bol = 1;
    for (; *s; s++) {
        if (bol && (*s == '.' || *s == '\''))
            fputs("\\&", stdout);
        bol = *s == '\n';
        if (*s == '\\')
            fputs("\\e", stdout);
        else if (*s == '-')
            fputs("\\-", stdout);
        else
            putchar(*s);
    }
}

/* `ditto --help-man`: docs/ditto.1, from the command table's summaries and
 * usage texts (make man writes it; a test checks the committed copy). */
static void print_man(void)
{
    printf(".TH DITTO 1 \"\" \"ditto %s\" \"User Commands\"\n"
           ".\\\" Generated by 'ditto --help-man' (make man): edit the --help texts instead.\n"
           ".SH NAME\nditto \\- ",
           DT_VERSION);
    roff_text(help_about);
    printf("\n.SH SYNOPSIS\n.B ditto\n[\\-\\-version] [\\-\\-help] \\fICOMMAND\\fR [\\fIARGS\\fR]\n"
           ".SH DESCRIPTION\n"
           "With no command, on a terminal, ditto opens the workbench on a built-in default\n"
           "problem; without one it profiles that problem's matrix.\n"
           ".SH COMMANDS\n");
    for (const cli_command *c = cli_commands; c->name; c++) {
        printf(".SS %s\n", c->name);
        roff_text(c->summary);
        printf(".\n.PP\n.nf\n");
        roff_text(c->usage);
        printf("%s.fi\n", c->usage[0] && c->usage[strlen(c->usage) - 1] == '\n' ? "" : "\n");
    }
    printf(".SH EXIT STATUS\n");
    roff_text(help_exit);
    printf("\n.SH ENVIRONMENT\n");
    roff_text(help_env);
    printf("\n.SH SEE ALSO\n"
           "README.md in the source, agents/EVENTS.md (the --json event stream),\n"
           "gpu/PROTOCOL.md (the worker protocol).\n");
}

int cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            break;
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
            return 1;
    }
    return 0;
}

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "ditto %s: %s\n", cmd, msg);
    fprintf(stderr, "Run 'ditto %s --help' for usage.\n", cmd);
    return CLI_USAGE;
}

int cli_print_usage(const char *cmd)
{
    for (const cli_command *c = cli_commands; c->name; c++) {
        if (strcmp(c->name, cmd) == 0) {
            fputs(c->usage, stdout);
            return CLI_OK;
        }
    }
    return CLI_USAGE;
}

/* `ditto` with no command (what `make run` runs) opens the workbench on the
 * built-in default problem. Without a terminal (a pipe, a CI log) there is
 * nothing to open it on: it profiles the default problem's matrix instead,
 * and says so. */
static int run_default(void)
{
    if (isatty(STDIN_FILENO) && isatty(STDOUT_FILENO))
        return cli_tui_default();
    char *argv[] = {"profile", "gen:rmat:rows=1M,nnz=16M,seed=1", NULL};
    printf("ditto: no command and no terminal: profiling the built-in default problem's\n"
           "       matrix, %s, instead of opening the workbench\n"
           "       (run 'ditto --help' for the commands)\n\n",
           argv[1]);
    return cli_profile(2, argv);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return run_default();
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        if (argc > 2 && strcmp(cmd, "help") == 0)
            return cli_print_usage(argv[2]) == CLI_OK ? CLI_OK : (print_help(), CLI_USAGE);
        print_help();
        return CLI_OK;
    }
    if (strcmp(cmd, "--help-man") == 0) {
        print_man();
        return CLI_OK;
    }
    if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
        printf("ditto %s\n", DT_VERSION);
        return CLI_OK;
    }
    for (const cli_command *c = cli_commands; c->name; c++) {
        if (strcmp(c->name, cmd) == 0)
            return c->run(argc - 1, argv + 1);
    }
    fprintf(stderr, "ditto: unknown command '%s'. Run 'ditto --help' for the list.\n", cmd);
    return CLI_USAGE;
}
