/* test_real.c -- every real matrix reads with the sizes SOURCES.tsv records for it: those in
 * tests/data (gzip copies, always there), and those in ../shared/matrices when present. */
#include "tests/common/testutil.h"

#include "sparse/sparse.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

/* One line of SOURCES.tsv. Matrix Market lines carry every column; DLMC
 * lines stop after "rows, cols, nnz", written as one field. */
typedef struct source {
    char file[256];          /* relative to the matrices folder: "bcsstk13.mtx", "dlmc/x.smtx" */
    int64_t rows, cols, nnz; /* nnz after symmetric expansion */
    int64_t max_row;         /* -1 when the line does not say */
    int64_t empty_rows;      /* -1 when the line does not say */
} source;

typedef struct sources {
    source *v;
    int n;
} sources;

/* Split line at tabs into at most max fields (in place). */
static int split_tabs(char *line, char **field, int max)
{
    int n = 0;
    while (n < max) {
        field[n++] = line;
        char *tab = strchr(line, '\t');
        if (tab == NULL)
            break;
        *tab = '\0';
        line = tab + 1;
    }
    return n;
}

static int64_t num(const char *s, const char *what, const char *file)
{
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    cr_assert(end != s && *end == '\0', "SOURCES.tsv: %s of %s is '%s', not a number", what, file,
              s);
    return v;
}

/* The column of name in the header fields, or -1. */
static int column(char **hdr, int nh, const char *name)
{
    for (int i = 0; i < nh; i++)
        if (strcmp(hdr[i], name) == 0)
            return i;
    return -1;
}

/* SOURCES.tsv of dir, its columns found by the header line ("file\t..."):
 * tests/data's names rows, cols, nnz_full, max_row, empty_rows for every
 * file; ../shared's DLMC lines carry "rows, cols, nnz" in the rows column. */
static sources read_sources(const char *dir)
{
    char *path = dt_xasprintf("%s/SOURCES.tsv", dir);
    dt_err e = {0};
    char *text = dt_read_file(path, NULL, &e);
    cr_assert_not_null(text, "%s", e.msg);
    sources s = {dt_xcalloc(256, sizeof(source)), 0};
    char *hdr[32];
    int nh = 0, c_rows = -1, c_cols = -1, c_nnz = -1, c_max = -1, c_empty = -1;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        if (dt_startswith(line, "file\t")) {
            nh = split_tabs(line, hdr, 32);
            c_rows = column(hdr, nh, "rows");
            c_cols = column(hdr, nh, "cols");
            c_nnz = column(hdr, nh, "nnz_full");
            c_max = column(hdr, nh, "max_row");
            c_empty = column(hdr, nh, "empty_rows");
            cr_assert(c_rows > 0 && c_cols > 0 && c_nnz > 0, "%s: no rows, cols or nnz_full column",
                      path);
            continue;
        }
        cr_assert_gt(nh, 0, "%s: a line before the header 'file\t...'", path);
        char *f[32];
        int nf = split_tabs(line, f, 32);
        cr_assert(nf > c_rows, "%s: too few fields in '%s'", path, line);
        cr_assert_lt(s.n, 256);
        source *src = &s.v[s.n++];
        snprintf(src->file, sizeof src->file, "%s", f[0]);
        long long r, c, z;
        if (sscanf(f[c_rows], "%lld, %lld, %lld", &r, &c, &z) == 3) {
            src->rows = r; /* a DLMC line of ../shared: "rows, cols, nnz" */
            src->cols = c;
            src->nnz = z;
            src->max_row = src->empty_rows = -1;
            continue;
        }
        cr_assert(nf > c_nnz && nf > c_cols, "%s: too few fields for %s", path, f[0]);
        src->rows = num(f[c_rows], "rows", f[0]);
        src->cols = num(f[c_cols], "cols", f[0]);
        src->nnz = num(f[c_nnz], "nnz_full", f[0]);
        src->max_row = c_max >= 0 && c_max < nf ? num(f[c_max], "max_row", f[0]) : -1;
        src->empty_rows = c_empty >= 0 && c_empty < nf ? num(f[c_empty], "empty_rows", f[0]) : -1;
    }
    cr_assert_gt(nh, 0, "%s: no header line 'file\t...'", path);
    free(text);
    free(path);
    return s;
}

static const source *find_source(const sources *s, const char *file)
{
    for (int i = 0; i < s->n; i++) {
        if (strcmp(s->v[i].file, file) == 0)
            return &s->v[i];
    }
    return NULL;
}

static void row_stats(const sp_csr *a, int64_t *max_row, int64_t *empty)
{
    *max_row = 0;
    *empty = 0;
    for (int32_t i = 0; i < a->rows; i++) {
        int64_t len = a->rowptr[i + 1] - a->rowptr[i];
        if (len > *max_row)
            *max_row = len;
        *empty += len == 0;
    }
}

/* Read one file and compare it with its SOURCES.tsv line. */
static void check_file(const char *dir, const sources *s, const char *rel)
{
    const source *src = find_source(s, rel);
    cr_assert_not_null(src, "%s is not described in SOURCES.tsv", rel);
    char *path = dt_xasprintf("%s/%s", dir, rel);
    dt_err e = {0};
    sp_read_opts o = {.quiet = 1};
    sp_csr *a = dt_endswith(rel, ".smtx") || dt_endswith(rel, ".smtx.gz")
                    ? sp_smtx_read(path, &o, &e)
                    : sp_mm_read(path, &o, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s: %s", rel, e.msg);
    cr_assert_eq(a->rows, src->rows, "%s: rows %d, SOURCES.tsv says %lld", rel, a->rows,
                 (long long)src->rows);
    cr_assert_eq(a->cols, src->cols, "%s: cols %d, SOURCES.tsv says %lld", rel, a->cols,
                 (long long)src->cols);
    cr_assert_eq(a->nnz, src->nnz, "%s: nnz %lld, SOURCES.tsv says %lld", rel, (long long)a->nnz,
                 (long long)src->nnz);
    int64_t max_row, empty;
    row_stats(a, &max_row, &empty);
    if (src->max_row >= 0)
        cr_assert_eq(max_row, src->max_row, "%s: max row %lld, SOURCES.tsv says %lld", rel,
                     (long long)max_row, (long long)src->max_row);
    if (src->empty_rows >= 0)
        cr_assert_eq(empty, src->empty_rows, "%s: %lld empty rows, SOURCES.tsv says %lld", rel,
                     (long long)empty, (long long)src->empty_rows);
    if (dt_endswith(rel, ".smtx") || dt_endswith(rel, ".smtx.gz"))
        cr_assert_eq(a->pattern, 1, "%s: a .smtx matrix is a pattern", rel);
    sp_csr_free(a);
    free(path);
}

/* Check every file with the suffix in dir/sub; returns how many. */
static int check_folder(const char *dir, const sources *s, const char *sub, const char *suffix)
{
    char *folder = sub ? dt_xasprintf("%s/%s", dir, sub) : dt_xstrdup(dir);
    DIR *d = opendir(folder);
    cr_assert_not_null(d, "cannot open %s", folder);
    int n = 0;
    struct dirent *ent;
    while ((ent = readdir(d)) != NULL) {
        if (!dt_endswith(ent->d_name, suffix))
            continue;
        char *rel = sub ? dt_xasprintf("%s/%s", sub, ent->d_name) : dt_xstrdup(ent->d_name);
        check_file(dir, s, rel);
        free(rel);
        n++;
    }
    closedir(d);
    free(folder);
    return n;
}

/* The folders checked: tests/data always, ../shared/matrices too when it is
 * there (logged, so a run says what it covered). */
static int folders(const char *dirs[2])
{
    dirs[0] = tu_data_dir();
    dirs[1] = tu_matrices_dir();
    if (dirs[1] != NULL)
        cr_log_info("also checking the shared matrices in %s", dirs[1]);
    return dirs[1] != NULL ? 2 : 1;
}

Test(real, every_mtx_should_read_with_the_sizes_and_rows_in_sources)
{
    const char *dirs[2];
    for (int d = 0, nd = folders(dirs); d < nd; d++) {
        sources s = read_sources(dirs[d]);
        int n = check_folder(dirs[d], &s, NULL, d == 0 ? ".mtx.gz" : ".mtx");
        cr_assert_gt(n, 0, "no matrix file in %s", dirs[d]);
        free(s.v);
    }
}

Test(real, every_dlmc_smtx_should_read_with_the_sizes_in_sources)
{
    const char *dirs[2];
    for (int d = 0, nd = folders(dirs); d < nd; d++) {
        sources s = read_sources(dirs[d]);
        int n = check_folder(dirs[d], &s, "dlmc", d == 0 ? ".smtx.gz" : ".smtx");
        cr_assert_gt(n, 0, "no .smtx file in %s/dlmc", dirs[d]);
        free(s.v);
    }
}

Test(real, every_file_in_sources_should_exist)
{
    const char *dirs[2];
    for (int d = 0, nd = folders(dirs); d < nd; d++) {
        sources s = read_sources(dirs[d]);
        cr_assert_gt(s.n, 0);
        for (int i = 0; i < s.n; i++) {
            char *path = dt_xasprintf("%s/%s", dirs[d], s.v[i].file);
            cr_assert(dt_file_exists(path), "%s/SOURCES.tsv lists %s, which is missing", dirs[d],
                      s.v[i].file);
            free(path);
        }
        free(s.v);
    }
}

/* tests/data's provenance holds: each .gz decompresses to the bytes whose
 * sha256 SOURCES.tsv records for the original, and names a license. */
Test(real, every_test_matrix_should_match_the_checksum_and_name_a_license_in_sources)
{
    char *path = dt_xasprintf("%s/SOURCES.tsv", tu_data_dir());
    dt_err e = {0};
    char *text = dt_read_file(path, NULL, &e);
    cr_assert_not_null(text, "%s", e.msg);
    int n = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#' || dt_startswith(line, "file\t"))
            continue;
        char *f[32];
        int nf = split_tabs(line, f, 32);
        cr_assert_geq(nf, 8, "SOURCES.tsv: too few fields in '%s'", line);
        cr_assert(strlen(f[5]) > 0 && strcmp(f[5], "-") != 0, "%s: no license", f[0]);
        cr_assert(strlen(f[2]) > 0 && strlen(f[4]) > 0, "%s: no repository or commit", f[0]);
        tu_proc p = tu_run("gzip -dc '%s/%s' | sha256sum", tu_data_dir(), f[0]);
        cr_assert_eq(p.status, 0, "%s: %s", f[0], p.err);
        cr_assert(strncmp(p.out, f[7], 64) == 0, "%s: sha256 %.64s, SOURCES.tsv says %s", f[0],
                  p.out, f[7]);
        tu_proc_free(&p);
        n++;
    }
    cr_assert_gt(n, 0);
    free(text);
    free(path);
}

/* The whole of tests/data stays small: a fresh clone carries it. */
Test(real, test_data_should_stay_under_five_megabytes)
{
    tu_proc p = tu_run("du -sk '%s'", tu_data_dir());
    cr_assert_eq(p.status, 0, "%s", p.err);
    long kb = atol(p.out);
    cr_assert(kb > 0 && kb < 5 * 1024, "tests/data holds %ld KB", kb);
    tu_proc_free(&p);
}

Test(real, bcsstk13_should_expand_to_83883_entries_with_rows_up_to_95)
{
    char *path = tu_matrix("bcsstk13.mtx");
    dt_err e = {0};
    sp_csr *a = sp_mm_read(path, NULL, &e);
    cr_assert_not_null(a, "%s", e.msg);
    cr_assert_eq(a->rows, 2003);
    cr_assert_eq(a->cols, 2003);
    cr_assert_eq(a->nnz, 83883);
    int64_t max_row, empty;
    row_stats(a, &max_row, &empty);
    cr_assert_eq(max_row, 95);
    cr_assert_eq(empty, 0);
    cr_assert_eq(a->pattern, 0);
    cr_assert_eq(sp_csr_validate(a, &e), 0, "%s", e.msg);
    /* Symmetric: the mirrored halves hold the same values. */
    sp_csr *t = sp_csr_transpose(a, &e);
    cr_assert_not_null(t, "%s", e.msg);
    cr_assert(memcmp(t->rowptr, a->rowptr, (2003 + 1) * sizeof *a->rowptr) == 0);
    cr_assert(memcmp(t->col, a->col, (size_t)a->nnz * sizeof *a->col) == 0);
    cr_assert(memcmp(t->val, a->val, (size_t)a->nnz * sizeof *a->val) == 0);
    sp_csr_free(t);
    sp_csr_free(a);
    free(path);
}

Test(real, every_mtx_should_survive_a_write_and_read_back_unchanged)
{
    char *tmp = tu_tmpdir();
    char *out = dt_xasprintf("%s/copy.mtx", tmp);
    const char *dirs[2];
    for (int dd = 0, nd = folders(dirs); dd < nd; dd++) {
        DIR *d = opendir(dirs[dd]);
        cr_assert_not_null(d);
        struct dirent *ent;
        while ((ent = readdir(d)) != NULL) {
            if (!dt_endswith(ent->d_name, ".mtx") && !dt_endswith(ent->d_name, ".mtx.gz"))
                continue;
            char *path = dt_xasprintf("%s/%s", dirs[dd], ent->d_name);
            dt_err e = {0};
            sp_read_opts o = {.quiet = 1};
            sp_csr *a = sp_mm_read(path, &o, &e);
            cr_assert_not_null(a, "%s", e.msg);
            cr_assert_eq(sp_mm_write(a, out, &e), 0, "%s", e.msg);
            sp_csr *b = sp_mm_read(out, &o, &e);
            cr_assert_not_null(b, "%s", e.msg);
            char fa[17], fb[17];
            sp_csr_fingerprint(a, fa);
            sp_csr_fingerprint(b, fb);
            cr_assert_str_eq(fa, fb, "%s changed in a write and read back", ent->d_name);
            cr_assert_eq(a->pattern, b->pattern);
            sp_csr_free(a);
            sp_csr_free(b);
            free(path);
        }
        closedir(d);
    }
    free(out);
    tu_rmtree(tmp);
    free(tmp);
}
