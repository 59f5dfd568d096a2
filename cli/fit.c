/* fit.c -- `ditto kb split` (the corpus into a fit part and a validate part)
 * and `ditto kb fit` (the planner's selector fitted from bench CSVs on one
 * part, reported on the other). */
#include "agents/agents.h"
#include "cli/cli.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* The matrices of a folder as the bench names them: *.mtx, then
 * the .smtx files of dlmc/, each in name order. */
static int folder_matrices(const char *dir, char ***out, int *n)
{
    const char *subs[] = {"", "dlmc/"};
    int found = 0;
    for (int s = 0; s < 2; s++) {
        char *d = dt_xasprintf("%s/%s", dir, subs[s]);
        DIR *dd = opendir(d);
        free(d);
        if (dd == NULL) {
            if (s == 0)
                return -1;
            continue;
        }
        int from = *n;
        struct dirent *de;
        while ((de = readdir(dd)) != NULL) {
            if (!dt_endswith(de->d_name, ".mtx") && !dt_endswith(de->d_name, ".smtx"))
                continue;
            *out = dt_xrealloc(*out, (size_t)(*n + 1) * sizeof **out);
            (*out)[(*n)++] = dt_xasprintf("%s%s", subs[s], de->d_name);
            found++;
        }
        closedir(dd);
        for (int i = from + 1; i < *n; i++)
            for (int j = i; j > from && strcmp((*out)[j - 1], (*out)[j]) > 0; j--) {
                char *t = (*out)[j];
                (*out)[j] = (*out)[j - 1];
                (*out)[j - 1] = t;
            }
    }
    return found;
}

static const char *leaf(const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    const char *s = dir + n;
    while (s > dir && s[-1] != '/')
        s--;
    return s;
}

int cli_kb_split(int argc, char **argv)
{
    const char *dev[16], *other[16];
    int ndev = 0, nother = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--dev") == 0 && i + 1 < argc) {
            if (ndev == 16)
                return cli_usage_error("kb split", "at most 16 --dev folders");
            dev[ndev++] = argv[++i];
        } else if (argv[i][0] == '-') {
            return cli_usage_error("kb split", "unknown option '%s'", argv[i]);
        } else {
            if (nother == 16)
                return cli_usage_error("kb split", "at most 16 folders");
            other[nother++] = argv[i];
        }
    }
    if (ndev + nother == 0)
        return cli_usage_error("kb split", "give matrix folders (--dev DIR for development ones)");
    dt_buf o = DT_BUF_INIT;
    dt_buf_puts(&o, "# The corpus split for fitting the planner's selector and validating it "
                    "(`ditto kb fit`).\n# Written by: ditto kb split");
    for (int i = 0; i < ndev; i++)
        dt_buf_printf(&o, " --dev %s", dev[i]);
    for (int i = 0; i < nother; i++)
        dt_buf_printf(&o, " %s", other[i]);
    dt_buf_puts(&o, "\n# Rule: a matrix of a --dev folder (the hand-written rules were tuned on "
                    "them) is fit; any other\n# is validate when FNV-1a 64 of its name (as the "
                    "bench CSV writes it, without the extension) is\n# even, else fit.\n"
                    "name\tpart\tfolder\n");
    int counts[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        int nd = pass == 0 ? ndev : nother;
        for (int d = 0; d < nd; d++) {
            const char *dir = pass == 0 ? dev[d] : other[d];
            char **names = NULL;
            int n = 0;
            if (folder_matrices(dir, &names, &n) < 0) {
                fprintf(stderr, "ditto kb split: cannot read the folder %s\n", dir);
                dt_buf_free(&o);
                return CLI_FAIL;
            }
            for (int i = 0; i < n; i++) {
                int v = pass == 1 && ag_split_validates(names[i]);
                counts[v]++;
                dt_buf_printf(&o, "%s\t%s\t%s\n", names[i], v ? "validate" : "fit", leaf(dir));
                free(names[i]);
            }
            free(names);
        }
    }
    fputs(dt_buf_str(&o), stdout);
    fprintf(stderr, "ditto kb split: %d fit, %d validate\n", counts[0], counts[1]);
    dt_buf_free(&o);
    return CLI_OK;
}

int cli_kb_fit(int argc, char **argv)
{
    const char *split = "knowledge/corpus-split.tsv", *out = "knowledge/selector/model.json",
               *report = "docs/selector-validation.md", *fit = "fit", *validate = "validate";
    const char *csv[32], *dirs[16];
    int ncsv = 0, ndirs = 0, k = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--split") == 0 && v) {
            split = v;
            i++;
        } else if (strcmp(a, "--out") == 0 && v) {
            out = v;
            i++;
        } else if (strcmp(a, "--report") == 0 && v) {
            report = v;
            i++;
        } else if (strcmp(a, "--fit-part") == 0 && v) {
            fit = v;
            i++;
        } else if (strcmp(a, "--validate-part") == 0 && v) {
            validate = v;
            i++;
        } else if (strcmp(a, "--matrices-dir") == 0 && v) {
            if (ndirs == 16)
                return cli_usage_error("kb fit", "at most 16 --matrices-dir folders");
            dirs[ndirs++] = v;
            i++;
        } else if (strcmp(a, "--k") == 0 && v) {
            k = atoi(v);
            if (k < 1 || k > 50)
                return cli_usage_error("kb fit", "--k: expected 1 to 50 neighbours");
            i++;
        } else if (a[0] == '-') {
            return cli_usage_error("kb fit", "unknown option '%s'", a);
        } else {
            if (ncsv == 32)
                return cli_usage_error("kb fit", "at most 32 CSV files");
            csv[ncsv++] = a;
        }
    }
    if (ncsv == 0)
        return cli_usage_error("kb fit", "give the bench CSV files to fit from "
                                         "(docs/bench-orig.csv docs/bench-hbm.csv)");
    if (ndirs == 0) {
        const char *env = getenv("DITTO_MATRICES");
        dirs[ndirs++] = env && *env ? env : "../shared/matrices";
        dirs[ndirs++] = "../shared/matrices/train2";
    }
    dt_buf cmd = DT_BUF_INIT;
    dt_buf_puts(&cmd, "ditto kb");
    for (int i = 0; i < argc; i++)
        dt_buf_printf(&cmd, " %s", argv[i]);
    ag_fit_opts o = {.csv = csv,
                     .ncsv = ncsv,
                     .split = split,
                     .fit_part = fit,
                     .validate_part = validate,
                     .dirs = dirs,
                     .ndirs = ndirs,
                     .command = dt_buf_str(&cmd),
                     .k = k};
    dt_buf md = DT_BUF_INIT, log = DT_BUF_INIT;
    dt_err e = {0};
    cJSON *model = ag_selector_fit(&o, &md, &log, &e);
    fputs(dt_buf_str(&log), stderr);
    int rc = CLI_FAIL;
    if (model == NULL) {
        fprintf(stderr, "ditto kb fit: %s\n", e.msg);
        goto done;
    }
    char *text = dt_json_print(model, 1);
    char *parent = dt_xstrdup(out);
    char *slash = strrchr(parent, '/');
    if (slash != NULL && slash != parent) {
        *slash = '\0';
        if (dt_mkdir_p(parent, &e) != 0) {
            fprintf(stderr, "ditto kb fit: %s\n", e.msg);
            free(parent);
            free(text);
            goto done;
        }
    }
    free(parent);
    if (dt_write_file_atomic(out, text, strlen(text), &e) != 0 ||
        dt_write_file_atomic(report, md.data ? md.data : "", md.len, &e) != 0) {
        fprintf(stderr, "ditto kb fit: %s\n", e.msg);
        free(text);
        goto done;
    }
    free(text);
    printf("%s\nwrote %s (%s) and %s\n", dt_buf_str(&md), out,
           dt_json_str(cJSON_GetObjectItem(model, "provenance"), "summary", ""), report);
    rc = CLI_OK;
done:
    cJSON_Delete(model);
    dt_buf_free(&md);
    dt_buf_free(&log);
    dt_buf_free(&cmd);
    return rc;
}
