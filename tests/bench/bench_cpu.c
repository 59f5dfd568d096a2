/* bench_cpu.c -- CPU benchmarks behind `make bench`: Matrix Market parse
 * speed and PatternReport time and peak memory on a 32M-nonzero matrix.
 *
 *   bench_cpu parse FILE [REPEATS]    MB/s of sp_mm_read (one core), by the
 *                                     clock and by the CPU time it used
 *   bench_cpu parse-ref FILE [REPEATS]
 *                                     the same for the plainest fast reader:
 *                                     the file in one buffer, strtol and
 *                                     strtod, COO then a counting-sort CSR
 *   bench_cpu write SPEC FILE         write a generated matrix as .mtx
 *   bench_cpu profile SPEC            generate, then profile; time and peak
 *                                     memory over the CSR size
 *   bench_cpu format SOURCE FORMAT PARAMS DTYPE
 *                                     build a device layout on the host (no
 *                                     upload), 3 times: the worker's
 *                                     preprocessing less the copy to the GPU
 * Each prints one line of key=value pairs for scripts/bench.sh. */
#include "sparse/sparse.h"

#include <cjson/cJSON.h>

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

static long peak_kb(void)
{
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return u.ru_maxrss;
}

static long current_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * 4;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The reference: what one writes with the C library alone, done well -- one
 * read into memory, strtol/strtod walking it, rows counted and scattered
 * into CSR. General real coordinate files only (what `bench_cpu write`
 * gives); no checks beyond what the library calls make. Returns nnz, or -1. */
static int64_t parse_ref(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return -1;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return -1;
    }
    char *buf = malloc((size_t)st.st_size + 1);
    size_t got = buf ? fread(buf, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (buf == NULL || got != (size_t)st.st_size) {
        free(buf);
        return -1;
    }
    buf[got] = '\0';
    char *p = buf;
    while (*p == '%') /* banner and comments */
        p = strchr(p, '\n') + 1;
    long rows = strtol(p, &p, 10), cols = strtol(p, &p, 10);
    long long nnz = strtoll(p, &p, 10);
    (void)cols;
    int32_t *ri = malloc((size_t)nnz * sizeof *ri), *ci = malloc((size_t)nnz * sizeof *ci);
    double *v = malloc((size_t)nnz * sizeof *v);
    int64_t *rowptr = calloc((size_t)rows + 1, sizeof *rowptr);
    for (long long k = 0; k < nnz; k++) {
        ri[k] = (int32_t)strtol(p, &p, 10) - 1;
        ci[k] = (int32_t)strtol(p, &p, 10) - 1;
        v[k] = strtod(p, &p);
        rowptr[ri[k] + 1]++;
    }
    for (long i = 0; i < rows; i++)
        rowptr[i + 1] += rowptr[i];
    int32_t *col = malloc((size_t)nnz * sizeof *col);
    double *val = malloc((size_t)nnz * sizeof *val);
    int64_t *at = malloc((size_t)rows * sizeof *at);
    memcpy(at, rowptr, (size_t)rows * sizeof *at);
    for (long long k = 0; k < nnz; k++) {
        int64_t d = at[ri[k]]++;
        col[d] = ci[k];
        val[d] = v[k];
    }
    free(at);
    free(col);
    free(val);
    free(rowptr);
    free(ri);
    free(ci);
    free(v);
    free(buf);
    return nnz;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    dt_err e = {0};
    if (argc >= 3 && (strcmp(argv[1], "parse") == 0 || strcmp(argv[1], "parse-ref") == 0)) {
        const int ref = strcmp(argv[1], "parse-ref") == 0;
        int reps = argc > 3 ? atoi(argv[3]) : 5;
        if (reps < 1 || reps > 32)
            reps = 5;
        struct stat st;
        if (stat(argv[2], &st) != 0) {
            fprintf(stderr, "bench_cpu: %s: cannot stat\n", argv[2]);
            return 1;
        }
        double t[32], c[32];
        int64_t nnz = 0;
        for (int i = 0; i < reps; i++) {
            double t0 = dt_now(), c0 = cpu_now();
            if (ref) {
                nnz = parse_ref(argv[2]);
            } else {
                sp_csr *a = sp_mm_read(argv[2], NULL, &e);
                nnz = a ? a->nnz : -1;
                sp_csr_free(a);
            }
            t[i] = dt_now() - t0;
            c[i] = cpu_now() - c0;
            if (nnz < 0) {
                fprintf(stderr, "bench_cpu: %s: %s\n", argv[2], ref ? "unreadable" : e.msg);
                return 1;
            }
        }
        qsort(t, (size_t)reps, sizeof t[0], cmp);
        qsort(c, (size_t)reps, sizeof c[0], cmp);
        double mb = (double)st.st_size / 1e6;
        printf("bytes=%lld nnz=%lld best_s=%.4f median_s=%.4f best_mbs=%.1f median_mbs=%.1f "
               "cpu_best_mbs=%.1f cpu_median_mbs=%.1f\n",
               (long long)st.st_size, (long long)nnz, t[0], t[reps / 2], mb / t[0],
               mb / t[reps / 2], mb / c[0], mb / c[reps / 2]);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "write") == 0) {
        sp_csr *a = sp_generate(argv[2], &e);
        if (a == NULL || sp_mm_write(a, argv[3], &e) != 0) {
            fprintf(stderr, "bench_cpu: %s\n", e.msg);
            return 1;
        }
        printf("nnz=%lld\n", (long long)a->nnz);
        sp_csr_free(a);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "profile") == 0) {
        long base = current_kb();
        double t0 = dt_now();
        sp_csr *a = sp_generate(argv[2], &e);
        double gen_s = dt_now() - t0;
        if (a == NULL) {
            fprintf(stderr, "bench_cpu: %s\n", e.msg);
            return 1;
        }
        sp_report r;
        t0 = dt_now();
        if (sp_report_compute(a, 32, 32, &r, &e) != 0) {
            fprintf(stderr, "bench_cpu: %s\n", e.msg);
            return 1;
        }
        double prof_s = dt_now() - t0;
        double csr_mb = (double)sp_csr_bytes(a) / 1e6;
        double peak_mb = (double)(peak_kb() - base) * 1024.0 / 1e6;
        printf("nnz=%lld rows=%d gen_s=%.3f profile_s=%.3f csr_mb=%.1f peak_mb=%.1f ratio=%.3f "
               "class=%s\n",
               (long long)a->nnz, a->rows, gen_s, prof_s, csr_mb, peak_mb, peak_mb / csr_mb,
               sp_class_name(r.cls));
        sp_csr_free(a);
        return 0;
    }
    if (argc >= 6 && strcmp(argv[1], "format") == 0) {
        sp_dtype t;
        cJSON *p = cJSON_Parse(argv[4]);
        if (sp_dtype_parse(argv[5], &t) != 0 || p == NULL) {
            fprintf(stderr, "bench_cpu: format: bad dtype '%s' or parameters '%s'\n", argv[5],
                    argv[4]);
            return 2;
        }
        sp_csr *a = sp_load(argv[2], NULL, &e);
        if (a == NULL) {
            fprintf(stderr, "bench_cpu: %s\n", e.msg);
            return 1;
        }
        double ts[3];
        for (int i = 0; i < 3; i++) {
            sp_fmt f;
            double t0 = dt_now();
            if (sp_fmt_build(a, argv[3], p, t, &f, &e) != 0) {
                fprintf(stderr, "bench_cpu: %s: %s\n", argv[3], e.msg);
                return 1;
            }
            ts[i] = dt_now() - t0;
            sp_fmt_free(&f);
        }
        qsort(ts, 3, sizeof ts[0], cmp);
        printf("nnz=%lld best_s=%.3f median_s=%.3f ns_per_nnz=%.1f\n", (long long)a->nnz, ts[0],
               ts[1], ts[0] * 1e9 / (double)(a->nnz ? a->nnz : 1));
        cJSON_Delete(p);
        sp_csr_free(a);
        return 0;
    }
    fprintf(stderr, "usage: bench_cpu parse FILE [REPEATS] | write SPEC FILE | profile SPEC | "
                    "format SOURCE FORMAT PARAMS DTYPE\n");
    return 2;
}
