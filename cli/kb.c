/* kb.c -- `ditto kb`: list, show, review, import, export and query the
 * knowledge base. */
#include "cli/cli.h"
#include "knowledge/knowledge.h"
#include "sparse/sparse.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char cli_kb_usage[] =
    "usage: ditto kb list [--kind K] [--status S] [--json]\n"
    "       ditto kb show ID [--json]\n"
    "       ditto kb approve ID [--note TEXT] [--reviewer NAME]\n"
    "       ditto kb reject ID --note TEXT [--reviewer NAME]\n"
    "       ditto kb import FILE\n"
    "       ditto kb export [--status S] [--out FILE]\n"
    "       ditto kb retrieve --op OP [--dtype T] [--cc M.m] [--features JSON | --matrix MATRIX]\n"
    "                         [--n N] [--kind K] [--max N] [--json]\n"
    "       ditto kb split [--dev DIR]... DIR... > knowledge/corpus-split.tsv\n"
    "       ditto kb fit BENCH.csv... [--split FILE] [--matrices-dir DIR]... [--out FILE]\n"
    "                    [--report FILE] [--fit-part NAME] [--validate-part NAME] [--k K]\n"
    "\n"
    "The knowledge base holds rules the planner fires, strategies, pitfalls (the static\n"
    "rules for generated CUDA), explanations of compiler errors and hardware facts. Only\n"
    "approved entries feed planning and prompts; a person approves or rejects proposed\n"
    "ones. Shipped entries come from the knowledge/ folder; yours (proposals, reviews,\n"
    "imports) live in $XDG_DATA_HOME/ditto/knowledge/ID.json and override a shipped entry\n"
    "of the same id.\n"
    "\n"
    "  list       entries in id order, with kind, status, source and title\n"
    "  show       one entry in full\n"
    "  approve    mark an entry approved (reviewer: --reviewer, else $USER)\n"
    "  reject     mark an entry rejected; the note saying why is required\n"
    "  import     add the entries of a JSON file (one entry or an array); nothing is\n"
    "             imported unless every entry is valid. They always arrive as proposed\n"
    "             (someone else's approval is no review here): approve them with 'kb\n"
    "             approve'. (--as-proposed is still accepted; it is what import does.)\n"
    "  export     entries as a JSON array (stdout, or FILE with --out)\n"
    "  retrieve   approved entries that apply to an op (and dtype, compute capability),\n"
    "             ranked by distance from the features (0 means inside every range of\n"
    "             the entry), then by how many of its ranges hold (an entry about this\n"
    "             problem before one that merely does not conflict). --features takes an object such as '{\"row_cv\": 3.1}';\n"
    "             --matrix computes the features from a matrix (file or generator); --n\n"
    "             sets the feature n (SpMM N / SDDMM K; 32 with --matrix). --max: at most\n"
    "             N entries (default 10, 0 for all)\n"
    "  split      the corpus split, as a TSV of name, part, folder: every matrix (*.mtx,\n"
    "             dlmc/*.smtx) of a --dev folder is fit, any other is validate when FNV-1a\n"
    "             64 of its name without the extension is even. knowledge/corpus-split.tsv\n"
    "             is `ditto kb split --dev ../shared/matrices ../shared/matrices/train2`\n"
    "  fit        fit the planner's selector from `ditto bench` CSVs (docs/bench-*.csv):\n"
    "             the verified cases whose matrix the split (--split, default\n"
    "             knowledge/corpus-split.tsv) puts in the fit part (--fit-part, default fit)\n"
    "             become the k (--k, default 3) nearest-neighbour selector's cases (a case\n"
    "             measured twice counts once, as the last CSV given has it), over the\n"
    "             PatternReport features of each matrix (found in the --matrices-dir folders,\n"
    "             default $DITTO_MATRICES or ../shared/matrices, and ../shared/matrices/\n"
    "             train2; the hbm cases replicated to the CSV's nnz, as the bench did). The\n"
    "             selector, with its provenance (command, CSV hashes, split, date), goes to\n"
    "             --out (default knowledge/selector/model.json, where the planner reads it:\n"
    "             $DITTO_SELECTOR overrides, \"none\" turns it off); the report on the\n"
    "             validate part (--validate-part, default validate) to --report (default\n"
    "             docs/selector-validation.md) and stdout, with each fit matrix predicted\n"
    "             from the others' cases. The planner adds 100 x each\n"
    "             strategy's vote share to its score, with the neighbours in the rationale\n"
    "\n"
    "  K: rule, strategy, pitfall, error-explanation, hardware-fact\n"
    "  S: proposed, approved, rejected\n"
    "  OP: spmv, spmm, sddmm       T: fp32, fp64, fp16, bf16\n"
    "\n"
    "Features (knowledge/README.md defines them): rows, cols, nnz, density, row_mean,\n"
    "row_cv, row_max, row_max_over_mean, row_gini, empty_rows_frac, bandwidth_frac,\n"
    "diagonals, block_fill_2, block_fill_4, block_fill_8, block_fill_16,\n"
    "x_lines_per_nnz, col_span_max, n.\n";

static const char *kinds[] = {"rule", "strategy", "pitfall", "error-explanation", "hardware-fact"};
static const char *statuses[] = {"proposed", "approved", "rejected"};

/* "kb SUB" once the subcommand is known, for error lines and the --help
 * hint. */
static const char *cmd_name = "kb";

static int one_of(const char *s, const char **list, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (dt_streq(s, list[i]))
            return 1;
    }
    return 0;
}

/* Open the base; its load problems are warnings (the rest still works). */
static kb *open_kb(const char *sub)
{
    dt_buf problems = DT_BUF_INIT;
    dt_err e = {0};
    kb *k = kb_open(NULL, NULL, &problems, &e);
    const char *s = dt_buf_str(&problems);
    while (*s) {
        const char *nl = strchr(s, '\n');
        int len = nl ? (int)(nl - s) : (int)strlen(s);
        fprintf(stderr, "ditto kb: warning: %.*s\n", len, s);
        s += len + (nl != NULL);
    }
    dt_buf_free(&problems);
    if (k == NULL)
        fprintf(stderr, "ditto kb %s: %s\n", sub, e.msg);
    return k;
}

/* The value after a flag; NULL (with the usage error printed) when none. */
static const char *flag_value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc || argv[*i + 1][0] == '\0') {
        cli_usage_error(cmd_name, "%s needs a value", argv[*i]);
        return NULL;
    }
    (*i)++;
    return argv[*i];
}

static int check_choice(const char *flag, const char *v, const char **list, size_t n)
{
    if (one_of(v, list, n))
        return CLI_OK;
    dt_buf b = DT_BUF_INIT;
    for (size_t i = 0; i < n; i++)
        dt_buf_printf(&b, "%s%s", i ? ", " : "", list[i]);
    cli_usage_error(cmd_name, "%s takes one of %s, got '%s'", flag, dt_buf_str(&b), v);
    dt_buf_free(&b);
    return CLI_USAGE;
}

static void print_json(const cJSON *j)
{
    char *s = dt_json_print(j, 1);
    puts(s);
    free(s);
}

static const char *short_origin(const kb *k, const char *id)
{
    const char *o = kb_origin(k, id, NULL);
    if (o == NULL)
        return "?";
    if (dt_streq(o, "shipped"))
        return "shipped";
    return dt_startswith(o, "user (") ? "override" : "user";
}

/* ---- list, show ---------------------------------------------------------------------- */

static int kb_cmd_list(int argc, char **argv)
{
    const char *kind = NULL, *status = NULL;
    int json = 0;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--kind") == 0) {
            kind = flag_value(argc, argv, &i);
            if (kind == NULL)
                return CLI_USAGE;
            if (check_choice("--kind", kind, kinds, DT_ARRAY_LEN(kinds)) != CLI_OK)
                return CLI_USAGE;
        } else if (strcmp(a, "--status") == 0) {
            status = flag_value(argc, argv, &i);
            if (status == NULL)
                return CLI_USAGE;
            if (check_choice("--status", status, statuses, DT_ARRAY_LEN(statuses)) != CLI_OK)
                return CLI_USAGE;
        } else {
            return cli_usage_error("kb list", "unknown argument '%s'", a);
        }
    }
    kb *k = open_kb("list");
    if (k == NULL)
        return CLI_FAIL;
    cJSON *l = kb_list(k, kind, status);
    if (json) {
        print_json(l);
    } else if (cJSON_GetArraySize(l) == 0) {
        printf("no entries%s%s%s%s\n", kind ? " of kind " : "", kind ? kind : "",
               status ? " with status " : "", status ? status : "");
    } else {
        printf("%-50s %-17s %-9s %-8s %s\n", "ID", "KIND", "STATUS", "SOURCE", "TITLE");
        for (const cJSON *e = l->child; e != NULL; e = e->next) {
            const char *id = dt_json_str(e, "id", "");
            printf("%-50s %-17s %-9s %-8s %s\n", dt_tsafe(id), dt_tsafe(dt_json_str(e, "kind", "")),
                   dt_tsafe(dt_json_str(e, "status", "")), short_origin(k, id),
                   dt_tsafe(dt_json_str(e, "title", "")));
        }
        printf("%d entr%s\n", cJSON_GetArraySize(l), cJSON_GetArraySize(l) == 1 ? "y" : "ies");
    }
    cJSON_Delete(l);
    kb_close(k);
    return CLI_OK;
}

/* Text wrapped at 76 columns with an indent, for `kb show`. */
static void print_wrapped(const char *text, int indent)
{
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        const char *end = nl ? nl : p + strlen(p);
        while (p < end) {
            const char *cut = end;
            if (end - p > 76 - indent) {
                cut = p + (76 - indent);
                while (cut > p && *cut != ' ')
                    cut--;
                if (cut == p)
                    cut = p + (76 - indent);
            }
            dt_buf line = DT_BUF_INIT; /* entries are imported data */
            dt_buf_put_term(&line, p, (size_t)(cut - p), 0);
            printf("%*s%s\n", indent, "", dt_buf_str(&line));
            dt_buf_free(&line);
            p = cut;
            while (p < end && *p == ' ')
                p++;
        }
        if (nl == NULL)
            break;
        p = nl + 1;
    }
}

static void print_value_line(const char *key, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        printf("  %-12s", key);
        if (strlen(v->valuestring) <= 62 && strchr(v->valuestring, '\n') == NULL) {
            printf("%s\n", dt_tsafe(v->valuestring));
        } else {
            printf("\n");
            print_wrapped(v->valuestring, 4);
        }
        return;
    }
    char *s = dt_json_print(v, 0);
    printf("  %-12s%s\n", dt_tsafe(key), dt_tsafe(s));
    free(s);
}

static int kb_cmd_show(int argc, char **argv)
{
    const char *id = NULL;
    int json = 0;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--json") == 0)
            json = 1;
        else if (argv[i][0] == '-')
            return cli_usage_error("kb show", "unknown option '%s'", argv[i]);
        else if (id == NULL)
            id = argv[i];
        else
            return cli_usage_error("kb show", "one id at a time (got '%s' and '%s')", id, argv[i]);
    }
    if (id == NULL)
        return cli_usage_error("kb show", "give an entry id (see 'ditto kb list')");
    kb *k = open_kb("show");
    if (k == NULL)
        return CLI_FAIL;
    const cJSON *e = kb_get(k, id);
    if (e == NULL) {
        fprintf(stderr, "ditto kb show: no entry '%s' (see 'ditto kb list')\n", id);
        kb_close(k);
        return CLI_NOT_FOUND;
    }
    if (json) {
        print_json(e);
        kb_close(k);
        return CLI_OK;
    }
    const char *file = NULL;
    const char *origin = kb_origin(k, id, &file);
    printf("%s\n", dt_tsafe(dt_json_str(e, "title", "")));
    printf("  id          %s\n", dt_tsafe(id));
    printf("  kind        %s\n", dt_tsafe(dt_json_str(e, "kind", "")));
    const cJSON *rv = cJSON_GetObjectItemCaseSensitive(e, "review");
    printf("  status      %s", dt_tsafe(dt_json_str(e, "status", "")));
    if (cJSON_IsObject(rv)) {
        printf(" by %s at %s", dt_tsafe(dt_json_str(rv, "reviewer", "?")),
               dt_tsafe(dt_json_str(rv, "at", "?")));
        const char *note = dt_json_str(rv, "note", NULL);
        if (note != NULL)
            printf(": %s", dt_tsafe(note));
    }
    printf("\n");
    printf("  source      %s (%s)\n", origin, file ? file : "?");
    printf("  created     %s, updated %s\n", dt_tsafe(dt_json_str(e, "created", "?")),
           dt_tsafe(dt_json_str(e, "updated", "?")));
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(e, "applies_to");
    if (a != NULL) {
        printf("applies to\n");
        for (const cJSON *it = a->child; it != NULL; it = it->next)
            print_value_line(it->string, it);
    }
    printf("content\n");
    print_wrapped(dt_json_str(e, "content", ""), 2);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "parameters");
    if (cJSON_IsObject(p) && p->child != NULL) {
        printf("parameters\n");
        for (const cJSON *it = p->child; it != NULL; it = it->next) {
            /* Error explanations often say the same in content and hint. */
            if (cJSON_IsString(it) && dt_streq(it->valuestring, dt_json_str(e, "content", "")))
                printf("  %-12s(the content above)\n", it->string);
            else
                print_value_line(it->string, it);
        }
    }
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(e, "evidence");
    int nev = cJSON_GetArraySize(ev);
    printf("evidence    %s\n", nev == 0 ? "none" : "");
    for (const cJSON *it = ev ? ev->child : NULL; it != NULL; it = it->next) {
        char *s = dt_json_print(it, 0);
        printf("  %s\n", dt_tsafe(s));
        free(s);
    }
    kb_close(k);
    return CLI_OK;
}

/* ---- approve, reject ------------------------------------------------------------------ */

static int kb_cmd_review(int argc, char **argv, const char *status)
{
    const char *sub = argv[1];
    const char *cmd = cmd_name;
    const char *id = NULL, *note = NULL, *reviewer = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--note") == 0) {
            note = flag_value(argc, argv, &i);
            if (note == NULL)
                return CLI_USAGE;
        } else if (strcmp(a, "--reviewer") == 0) {
            reviewer = flag_value(argc, argv, &i);
            if (reviewer == NULL)
                return CLI_USAGE;
        } else if (a[0] == '-') {
            return cli_usage_error(cmd, "unknown option '%s'", a);
        } else if (id == NULL) {
            id = a;
        } else {
            return cli_usage_error(cmd, "one id at a time (got '%s' and '%s')", id, a);
        }
    }
    if (id == NULL)
        return cli_usage_error(cmd, "give an entry id (see 'ditto kb list --status proposed')");
    if (dt_streq(status, "rejected") && note == NULL)
        return cli_usage_error("kb reject", "--note TEXT is required: say why, so the agent "
                                            "and other reviewers learn from it");
    if (reviewer == NULL) {
        reviewer = getenv("USER");
        if (reviewer == NULL || reviewer[0] == '\0')
            return cli_usage_error(cmd, "no reviewer: pass --reviewer NAME ($USER is not set)");
    }
    kb *k = open_kb(sub);
    if (k == NULL)
        return CLI_FAIL;
    dt_err e = {0};
    if (kb_review(k, id, status, reviewer, note, &e) != 0) {
        fprintf(stderr, "ditto kb %s: %s\n", sub, e.msg);
        kb_close(k);
        return CLI_FAIL;
    }
    const char *file = NULL;
    kb_origin(k, id, &file);
    printf("%s %s (reviewer %s): saved to %s\n", status, id, reviewer, file ? file : "?");
    kb_close(k);
    return CLI_OK;
}

/* ---- import, export ------------------------------------------------------------------- */

static int kb_cmd_import(int argc, char **argv)
{
    const char *file = NULL;
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--as-proposed") == 0)
            continue; /* the only way to import now */
        else if (argv[i][0] == '-')
            return cli_usage_error("kb import", "unknown option '%s'", argv[i]);
        else if (file == NULL)
            file = argv[i];
        else
            return cli_usage_error("kb import", "one file at a time (got '%s' and '%s')", file,
                                   argv[i]);
    }
    if (file == NULL)
        return cli_usage_error("kb import", "give a JSON file of one entry or an array");
    kb *k = open_kb("import");
    if (k == NULL)
        return CLI_FAIL;
    dt_buf problems = DT_BUF_INIT;
    dt_err e = {0};
    int n = kb_import(k, file, &problems, &e);
    fputs(dt_buf_str(&problems), stderr);
    dt_buf_free(&problems);
    if (n < 0) {
        fprintf(stderr, "ditto kb import: %s\n", e.msg);
        kb_close(k);
        return CLI_FAIL;
    }
    if (n == 0)
        printf("nothing to import: every entry of %s is already in the knowledge base, "
               "unchanged\n",
               file);
    else
        printf("imported %d entr%s from %s into %s, as proposed: review them with 'ditto kb "
               "list --status proposed' and 'ditto kb approve ID'\n",
               n, n == 1 ? "y" : "ies", file, kb_user_dir(k));
    kb_close(k);
    return CLI_OK;
}

static int kb_cmd_export(int argc, char **argv)
{
    const char *status = NULL, *out = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--status") == 0) {
            status = flag_value(argc, argv, &i);
            if (status == NULL)
                return CLI_USAGE;
            if (check_choice("--status", status, statuses, DT_ARRAY_LEN(statuses)) != CLI_OK)
                return CLI_USAGE;
        } else if (strcmp(a, "--out") == 0) {
            out = flag_value(argc, argv, &i);
            if (out == NULL)
                return CLI_USAGE;
        } else {
            return cli_usage_error("kb export", "unknown argument '%s'", a);
        }
    }
    kb *k = open_kb("export");
    if (k == NULL)
        return CLI_FAIL;
    cJSON *all = kb_export(k, status);
    int n = cJSON_GetArraySize(all);
    int rc = CLI_OK;
    if (out == NULL) {
        print_json(all);
    } else {
        char *s = dt_json_print(all, 1);
        dt_buf b = DT_BUF_INIT;
        dt_buf_puts(&b, s);
        dt_buf_putc(&b, '\n');
        free(s);
        dt_err e = {0};
        if (dt_write_file_atomic(out, b.data, b.len, &e) != 0) {
            fprintf(stderr, "ditto kb export: %s\n", e.msg);
            rc = CLI_FAIL;
        } else {
            fprintf(stderr, "exported %d entr%s to %s\n", n, n == 1 ? "y" : "ies", out);
        }
        dt_buf_free(&b);
    }
    cJSON_Delete(all);
    kb_close(k);
    return rc;
}

/* ---- retrieve ------------------------------------------------------------------------- */

/* The knowledge base's features of a matrix. knowledge/ depends on core
 * only, so the mapping from the PatternReport lives here, beside the one
 * command that needs it today; knowledge/README.md defines each name.
 * col_span_max is not part of the report and is computed from the CSR. */
static cJSON *kb_features_from_report(const sp_report *r, const sp_csr *a)
{
    cJSON *f = dt_json_obj();
    dt_json_set_num(f, "rows", r->rows);
    dt_json_set_num(f, "cols", r->cols);
    dt_json_set_num(f, "nnz", (double)r->nnz);
    dt_json_set_num(f, "density", r->density);
    dt_json_set_num(f, "row_mean", r->row_mean);
    dt_json_set_num(f, "row_cv", r->row_cv);
    dt_json_set_num(f, "row_max", r->row_max);
    dt_json_set_num(f, "row_max_over_mean", r->row_mean > 0 ? r->row_max / r->row_mean : 0.0);
    dt_json_set_num(f, "row_gini", r->row_gini);
    dt_json_set_num(f, "empty_rows_frac", r->rows > 0 ? (double)r->empty_rows / r->rows : 0.0);
    int32_t side = r->rows > r->cols ? r->rows : r->cols;
    dt_json_set_num(f, "bandwidth_frac", side > 0 ? (double)r->bandwidth / side : 0.0);
    dt_json_set_num(f, "diagonals", (double)r->diagonals);
    static const char *fills[SP_NBLOCK] = {"block_fill_2", "block_fill_4", "block_fill_8",
                                           "block_fill_16"};
    for (int b = 0; b < SP_NBLOCK; b++)
        dt_json_set_num(f, fills[b], r->block_fill[b]);
    dt_json_set_num(f, "x_lines_per_nnz", r->x_lines_per_nnz);
    int64_t span = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t beg = a->rowptr[i], end = a->rowptr[i + 1];
        if (end > beg && (int64_t)a->col[end - 1] - a->col[beg] > span)
            span = (int64_t)a->col[end - 1] - a->col[beg];
    }
    dt_json_set_num(f, "col_span_max", (double)span);
    dt_json_set_num(f, "distinct_values", r->distinct_values);
    return f;
}

static cJSON *features_from_matrix(const char *matrix, int32_t n)
{
    sp_read_opts ro = {0};
    dt_err e = {0};
    cli_progress prog;
    cli_progress_start(&prog, matrix);
    ro.progress = cli_progress_bytes;
    ro.progress_ud = &prog;
    sp_csr *a = sp_load(matrix, &ro, &e);
    cli_progress_end(&prog);
    if (a == NULL) {
        fprintf(stderr, "ditto kb retrieve: %s\n", e.msg);
        return NULL;
    }
    sp_report r;
    if (sp_report_compute(a, n, n, &r, &e) != 0) {
        fprintf(stderr, "ditto kb retrieve: %s\n", e.msg);
        sp_csr_free(a);
        return NULL;
    }
    cJSON *f = kb_features_from_report(&r, a);
    sp_csr_free(a);
    return f;
}

/* --features JSON: an object of known feature names and finite numbers. */
static cJSON *features_from_text(const char *text)
{
    dt_err e = {0};
    cJSON *f = dt_json_parse(text, strlen(text), "--features", &e);
    if (f == NULL) {
        cli_usage_error(cmd_name, "%s", e.msg);
        return NULL;
    }
    if (!cJSON_IsObject(f)) {
        cli_usage_error(cmd_name, "--features takes an object such as '{\"row_cv\": 3.1}'");
        cJSON_Delete(f);
        return NULL;
    }
    for (const cJSON *it = f->child; it != NULL; it = it->next) {
        if (!kb_is_feature(it->string)) {
            dt_buf names = DT_BUF_INIT;
            for (int i = 0; kb_feature_name(i) != NULL; i++)
                dt_buf_printf(&names, "%s%s", i ? ", " : "", kb_feature_name(i));
            cli_usage_error(cmd_name, "--features: unknown feature '%s' (features: %s)", it->string,
                            dt_buf_str(&names));
            dt_buf_free(&names);
            cJSON_Delete(f);
            return NULL;
        }
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble)) {
            cli_usage_error(cmd_name, "--features: '%s' needs a finite number", it->string);
            cJSON_Delete(f);
            return NULL;
        }
    }
    return f;
}

static int parse_int(const char *flag, const char *v, int lo, int hi, int *out)
{
    int64_t x = 0;
    if (dt_parse_size(v, &x) != 0 || x < lo || x > hi)
        return cli_usage_error(cmd_name, "%s needs an integer from %d to %d, got '%s'", flag, lo,
                               hi, v);
    *out = (int)x;
    return CLI_OK;
}

/* "M.m": digits, a dot, digits. */
static int cc_ok(const char *s)
{
    const char *p = s;
    if (*p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p++ != '.' || *p < '0' || *p > '9')
        return 0;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '\0';
}

static void print_features_line(const cJSON *f)
{
    printf("features:");
    int col = 9;
    for (const cJSON *it = f->child; it != NULL; it = it->next) {
        char v[64];
        snprintf(v, sizeof v, " %s %.6g%s", it->string, it->valuedouble, it->next ? "," : "");
        if (col + (int)strlen(v) > 78) {
            printf("\n         ");
            col = 9;
        }
        fputs(v, stdout);
        col += (int)strlen(v);
    }
    printf("\n\n");
}

static int kb_cmd_retrieve(int argc, char **argv)
{
    const char *op = NULL, *dtype = NULL, *cc = NULL, *ftext = NULL, *matrix = NULL;
    const char *kind = NULL;
    int max = 10, n = 0, json = 0;
    static const char *ops[] = {"spmv", "spmm", "sddmm"};
    static const char *dtypes[] = {"fp32", "fp64", "fp16", "bf16"};
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        const char **slot = NULL;
        if (strcmp(a, "--json") == 0) {
            json = 1;
            continue;
        }
        if (strcmp(a, "--op") == 0)
            slot = &op;
        else if (strcmp(a, "--dtype") == 0)
            slot = &dtype;
        else if (strcmp(a, "--cc") == 0)
            slot = &cc;
        else if (strcmp(a, "--features") == 0)
            slot = &ftext;
        else if (strcmp(a, "--matrix") == 0)
            slot = &matrix;
        else if (strcmp(a, "--kind") == 0)
            slot = &kind;
        if (slot != NULL) {
            *slot = flag_value(argc, argv, &i);
            if (*slot == NULL)
                return CLI_USAGE;
            continue;
        }
        if (strcmp(a, "--max") == 0 || strcmp(a, "--n") == 0) {
            const char *v = flag_value(argc, argv, &i);
            if (v == NULL)
                return CLI_USAGE;
            int rc = a[2] == 'm' ? parse_int("--max", v, 0, 100000, &max)
                                 : parse_int("--n", v, 1, 65536, &n);
            if (rc != CLI_OK)
                return rc;
            continue;
        }
        return cli_usage_error("kb retrieve", "unknown argument '%s'", a);
    }
    if (op == NULL)
        return cli_usage_error("kb retrieve", "--op is required (spmv, spmm or sddmm)");
    if (check_choice("--op", op, ops, DT_ARRAY_LEN(ops)) != CLI_OK)
        return CLI_USAGE;
    if (dtype != NULL && check_choice("--dtype", dtype, dtypes, DT_ARRAY_LEN(dtypes)) != CLI_OK)
        return CLI_USAGE;
    if (kind != NULL && check_choice("--kind", kind, kinds, DT_ARRAY_LEN(kinds)) != CLI_OK)
        return CLI_USAGE;
    if (cc != NULL && !cc_ok(cc))
        return cli_usage_error(cmd_name, "--cc takes a compute capability such as 9.0, got '%s'",
                               cc);
    if (ftext != NULL && matrix != NULL)
        return cli_usage_error("kb retrieve", "give --features or --matrix, not both");

    cJSON *features = NULL;
    if (ftext != NULL) {
        features = features_from_text(ftext);
        if (features == NULL)
            return CLI_USAGE;
    } else if (matrix != NULL) {
        /* The problem spec's default N / K is 32; SpMV has no such dimension. */
        if (n == 0 && !dt_streq(op, "spmv"))
            n = 32;
        features = features_from_matrix(matrix, n);
        if (features == NULL)
            return CLI_FAIL;
    } else {
        features = dt_json_obj();
    }
    if (n > 0)
        dt_json_set_num(features, "n", n);

    kb *k = open_kb("retrieve");
    if (k == NULL) {
        cJSON_Delete(features);
        return CLI_FAIL;
    }
    cJSON *hits = kb_retrieve(k, kind, op, dtype, cc, features, max);
    if (json) {
        cJSON *o = dt_json_obj();
        cJSON *q = dt_json_obj();
        dt_json_set_str(q, "op", op);
        if (dtype)
            dt_json_set_str(q, "dtype", dtype);
        if (cc)
            dt_json_set_str(q, "cc", cc);
        if (kind)
            dt_json_set_str(q, "kind", kind);
        if (matrix)
            dt_json_set_str(q, "matrix", matrix);
        dt_json_set_take(q, "features", features);
        features = NULL;
        dt_json_set_take(o, "query", q);
        dt_json_set_take(o, "entries", hits);
        hits = NULL;
        print_json(o);
        cJSON_Delete(o);
    } else {
        if (features->child != NULL)
            print_features_line(features);
        if (cJSON_GetArraySize(hits) == 0)
            printf("no approved entries apply to %s%s%s%s%s\n", op, dtype ? " " : "",
                   dtype ? dtype : "", cc ? " cc " : "", cc ? cc : "");
        for (const cJSON *e = hits ? hits->child : NULL; e != NULL; e = e->next) {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "parameters");
            printf("%7.3f %2d  %-17s %-50s", dt_json_num(e, "distance", 0),
                   (int)dt_json_num(e, "matched", 0), dt_json_str(e, "kind", ""),
                   dt_json_str(e, "id", ""));
            if (dt_streq(dt_json_str(e, "kind", ""), "rule"))
                printf(" -> %s (score %g)", dt_json_str(p, "strategy", "?"),
                       dt_json_num(p, "score", 0));
            printf("\n         %s\n", dt_json_str(e, "title", ""));
        }
    }
    cJSON_Delete(hits);
    cJSON_Delete(features);
    kb_close(k);
    return CLI_OK;
}

/* ---- dispatch ------------------------------------------------------------------------- */

int cli_kb(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("kb");
    if (argc < 2)
        return cli_usage_error("kb", "give a subcommand: list, show, approve, reject, import, "
                                     "export, retrieve, split or fit");
    const char *sub = argv[1];
    static char name[32];
    snprintf(name, sizeof name, "kb %.20s", sub);
    cmd_name = name;
    if (strcmp(sub, "list") == 0)
        return kb_cmd_list(argc, argv);
    if (strcmp(sub, "show") == 0)
        return kb_cmd_show(argc, argv);
    if (strcmp(sub, "approve") == 0)
        return kb_cmd_review(argc, argv, "approved");
    if (strcmp(sub, "reject") == 0)
        return kb_cmd_review(argc, argv, "rejected");
    if (strcmp(sub, "import") == 0)
        return kb_cmd_import(argc, argv);
    if (strcmp(sub, "export") == 0)
        return kb_cmd_export(argc, argv);
    if (strcmp(sub, "retrieve") == 0)
        return kb_cmd_retrieve(argc, argv);
    if (strcmp(sub, "split") == 0)
        return cli_kb_split(argc - 1, argv + 1);
    if (strcmp(sub, "fit") == 0)
        return cli_kb_fit(argc - 1, argv + 1);
    cmd_name = "kb";
    return cli_usage_error("kb",
                           "unknown subcommand '%s' (list, show, approve, reject, import, "
                           "export, retrieve, split, fit)",
                           sub);
}
