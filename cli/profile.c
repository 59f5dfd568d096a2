/* profile.c -- `ditto profile`: load a matrix and print its PatternReport. */
#include "cli/cli.h"
#include "sparse/sparse.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int parse_dim(const char *cmd, const char *flag, const char *v, int32_t *out)
{
    int64_t x = 0;
    if (v == NULL || dt_parse_size(v, &x) != 0 || x < 1 || x > 65536)
        return cli_usage_error(cmd, "%s needs an integer from 1 to 65536, got '%s'", flag,
                               v ? v : "(nothing)");
    *out = (int32_t)x;
    return CLI_OK;
}

int cli_profile(int argc, char **argv)
{
    if (cli_wants_help(argc, argv))
        return cli_print_usage("profile");
    const char *source = NULL;
    int json = 0;
    int32_t n = 0, k = 0;
    sp_read_opts ro = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--allow-nonfinite") == 0) {
            ro.allow_nonfinite = 1;
        } else if (strcmp(a, "--n") == 0 || strcmp(a, "--k") == 0) {
            int rc = parse_dim("profile", a, i + 1 < argc ? argv[i + 1] : NULL,
                               a[2] == 'n' ? &n : &k);
            if (rc != CLI_OK)
                return rc;
            i++;
        } else if (a[0] == '-' && a[1] != '\0') {
            return cli_usage_error("profile", "unknown option '%s'", a);
        } else if (source == NULL) {
            source = a;
        } else {
            return cli_usage_error("profile", "one matrix at a time (got '%s' and '%s')", source,
                                   a);
        }
    }
    if (source == NULL)
        return cli_usage_error("profile", "give a matrix file, generator spec or spec.json");

    sp_spec spec;
    sp_spec_init(&spec);
    const char *matrix = source;
    if (dt_endswith(source, ".json")) {
        dt_buf problems = DT_BUF_INIT;
        if (cli_file_missing("profile", source)) {
            sp_spec_clear(&spec);
            return CLI_NOT_FOUND;
        }
        if (sp_spec_load(&spec, source, &problems) != 0) {
            fputs(dt_buf_str(&problems), stderr);
            dt_buf_free(&problems);
            sp_spec_clear(&spec);
            return CLI_FAIL;
        }
        dt_buf_free(&problems);
        if (cli_check_spec_gpu("profile", source, spec.gpu) != 0) {
            sp_spec_clear(&spec);
            return CLI_FAIL;
        }
        matrix = spec.matrix;
        if (n == 0 && spec.op == SP_SPMM)
            n = spec.n;
        if (k == 0 && spec.op == SP_SDDMM)
            k = spec.n;
    }

    double t0 = dt_now();
    cli_progress prog;
    cli_progress_start(&prog, matrix);
    ro.progress = cli_progress_bytes;
    ro.progress_ud = &prog;
    dt_err e = {0};
    sp_csr *a = sp_load(matrix, &ro, &e);
    cli_progress_end(&prog);
    if (a == NULL) {
        fprintf(stderr, "ditto profile: %s\n", e.msg);
        sp_spec_clear(&spec);
        return e.code == SP_ENOTFOUND ? CLI_NOT_FOUND : CLI_FAIL;
    }
    double load_s = dt_now() - t0;
    cli_progress_start(&prog, matrix);
    sp_report r;
    int rc = sp_report_compute_progress(a, n, k, &r, &e, cli_progress_rows, &prog);
    cli_progress_end(&prog);
    if (rc != 0) {
        fprintf(stderr, "ditto profile: %s\n", e.msg);
        sp_csr_free(a);
        sp_spec_clear(&spec);
        return CLI_FAIL;
    }
    char fp[17];
    sp_csr_fingerprint(a, fp);
    if (json) {
        cJSON *o = sp_report_json(&r);
        dt_json_set_str(o, "matrix", matrix);
        dt_json_set_str(o, "fingerprint", fp);
        dt_json_set_bool(o, "pattern_only", a->pattern);
        dt_json_set_num(o, "load_seconds", load_s);
        char *s = dt_json_print(o, 1);
        puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        dt_buf out = DT_BUF_INIT;
        dt_buf_printf(&out, "matrix      %s%s (fingerprint %s, read in %.3f s)\n", matrix,
                      a->pattern ? " [pattern only: values 1.0]" : "", fp, load_s);
        sp_report_text(&r, &out);
        fputs(out.data, stdout);
        dt_buf_free(&out);
    }
    sp_csr_free(a);
    sp_spec_clear(&spec);
    return CLI_OK;
}
