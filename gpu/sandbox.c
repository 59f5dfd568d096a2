/* sandbox.c -- the #include names and NVRTC options generated code may use:
 * a scanner that sees directives as the C++ preprocessor does. */
#include "gpu/sandbox.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The toolkit headers ditto's half-precision kernels include. */
static const char *toolkit_headers[] = {"cuda_fp16.h", "cuda_bf16.h"};

int gpu_sandbox_header_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > 128 || strchr(name, '/') || strchr(name, '\\') || strstr(name, ".."))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)name[i]) && name[i] != '_' && name[i] != '-' && name[i] != '.')
            return 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(toolkit_headers); i++)
        if (strcmp(name, toolkit_headers[i]) == 0)
            return 1;
    if (!dt_endswith(name, ".cuh"))
        return 0;
    char *dir = dt_share_path("kernels");
    if (dir == NULL)
        return 0;
    char *path = dt_xasprintf("%s/%s", dir, name);
    struct stat st;
    int ok = stat(path, &st) == 0 && S_ISREG(st.st_mode);
    free(path);
    free(dir);
    return ok;
}

/* ---- the scanner ---------------------------------------------------------- */

/* The text after translation phase 2 (line splices removed), with where
 * each splice was, so that positions map back to source lines. */
typedef struct scan {
    char *t; /* spliced text, NUL-terminated */
    size_t n;
    size_t *splice; /* spliced offsets at which a "\\\n" was removed */
    size_t nsplice;
    gpu_include_fn *fn;
    void *ud;
    int refused;
} scan;

static int line_at(const scan *s, size_t at)
{
    int line = 1;
    for (size_t i = 0; i < at && i < s->n; i++)
        line += s->t[i] == '\n';
    for (size_t k = 0; k < s->nsplice && s->splice[k] <= at; k++)
        line++;
    return line;
}

/* Past this many refusals the scan stops: the answer is already no, and
 * each refusal costs a pass to find its line. */
#define MAX_REFUSALS 20

static void refuse(scan *s, size_t at, const char *why)
{
    s->refused++;
    if (s->fn && s->refused <= MAX_REFUSALS)
        s->fn(line_at(s, at), why, s->ud);
}

static int ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || (unsigned char)c >= 0x80;
}

/* Skip blanks and comments inside a directive (a block comment counts as
 * one space even across lines, as in phase 3); stops at a newline. */
static size_t skip_dir_space(const scan *s, size_t i)
{
    for (;;) {
        while (i < s->n && (s->t[i] == ' ' || s->t[i] == '\t' || s->t[i] == '\f' ||
                            s->t[i] == '\v' || s->t[i] == '\r'))
            i++;
        if (i + 1 < s->n && s->t[i] == '/' && s->t[i + 1] == '*') {
            const char *end = strstr(s->t + i + 2, "*/");
            i = end ? (size_t)(end - s->t) + 2 : s->n;
            continue;
        }
        return i;
    }
}

/* At i: a '#' (or "%:") outside comments and literals. Checks an include
 * that follows and returns where scanning resumes. */
static size_t directive(scan *s, size_t i)
{
    size_t at = i;
    i = skip_dir_space(s, i);
    size_t w = i;
    while (i < s->n && ident_char(s->t[i]))
        i++;
    size_t wl = i - w;
    int inc = (wl == 7 && memcmp(s->t + w, "include", 7) == 0) ||
              (wl == 12 && memcmp(s->t + w, "include_next", 12) == 0) ||
              (wl == 6 && memcmp(s->t + w, "import", 6) == 0) ||
              (wl == 5 && memcmp(s->t + w, "embed", 5) == 0);
    if (!inc)
        return w; /* rescan what follows as ordinary text */
    i = skip_dir_space(s, i);
    char open = i < s->n ? s->t[i] : '\0';
    char close = open == '"' ? '"' : open == '<' ? '>' : '\0';
    if (close == '\0') {
        refuse(s, at,
               "a computed #include (the header named by a macro) is not allowed: name "
               "one of ditto's kernel headers in quotes");
        return i;
    }
    size_t b = ++i;
    while (i < s->n && s->t[i] != close && s->t[i] != '\n')
        i++;
    if (i >= s->n || s->t[i] != close) {
        refuse(s, at, "an #include whose name is not closed on its line");
        return i;
    }
    char name[200];
    size_t len = i - b;
    if (len >= sizeof name)
        len = sizeof name - 1;
    memcpy(name, s->t + b, len);
    name[len] = '\0';
    for (size_t k = 0; k < len; k++)
        if ((unsigned char)name[k] < 0x20 || (unsigned char)name[k] >= 0x7f)
            name[k] = '?';
    if (!gpu_sandbox_header_ok(name)) {
        char why[400];
        snprintf(why, sizeof why,
                 "#include %c%s%c is outside the sandbox: only ditto's kernel headers "
                 "(kernels/*.cuh, by bare name) and cuda_fp16.h / cuda_bf16.h may be included",
                 open, name, close);
        refuse(s, at, why);
    }
    return i + 1;
}

/* A raw string R"delim( ... )delim" starting at the quote q; returns the
 * offset after it, or 0 when the text there is not a well-formed opening
 * (then it is scanned as an ordinary string). */
static size_t raw_string(const scan *s, size_t q)
{
    size_t i = q + 1;
    char delim[20];
    size_t dl = 0;
    while (i < s->n && s->t[i] != '(') {
        char c = s->t[i];
        if (dl == 16 || c == ' ' || c == ')' || c == '\\' || c == '\t' || c == '\v' || c == '\f' ||
            c == '\n')
            return 0;
        delim[dl++] = c;
        i++;
    }
    if (i >= s->n)
        return 0;
    i++;
    for (; i < s->n; i++) {
        if (s->t[i] == ')' && i + 1 + dl < s->n && memcmp(s->t + i + 1, delim, dl) == 0 &&
            s->t[i + 1 + dl] == '"')
            return i + dl + 2;
    }
    return s->n; /* unterminated: the compiler refuses it anyway */
}

static void scan_text(scan *s)
{
    size_t i = 0;
    while (i < s->n && s->refused < MAX_REFUSALS) {
        char c = s->t[i];
        char d = s->t[i + 1]; /* t is NUL-terminated */
        if (c == '/' && d == '/') {
            while (i < s->n && s->t[i] != '\n')
                i++;
        } else if (c == '/' && d == '*') {
            const char *end = strstr(s->t + i + 2, "*/");
            i = end ? (size_t)(end - s->t) + 2 : s->n;
        } else if (c == '"' || c == '\'') {
            i++;
            while (i < s->n && s->t[i] != c && s->t[i] != '\n')
                i += s->t[i] == '\\' && s->t[i + 1] != '\n' && i + 1 < s->n ? 2 : 1;
            if (i < s->n && s->t[i] == c)
                i++;
        } else if (isdigit((unsigned char)c) || (c == '.' && isdigit((unsigned char)d))) {
            /* A pp-number, with C++14 digit separators (1'000) and
             * exponent signs. */
            i++;
            while (i < s->n) {
                char x = s->t[i];
                if ((x == 'e' || x == 'E' || x == 'p' || x == 'P') &&
                    (s->t[i + 1] == '+' || s->t[i + 1] == '-'))
                    i += 2;
                else if (x == '\'' && ident_char(s->t[i + 1]))
                    i += 2;
                else if (ident_char(x) || x == '.')
                    i++;
                else
                    break;
            }
        } else if (ident_char(c)) {
            size_t b = i;
            while (i < s->n && ident_char(s->t[i]))
                i++;
            size_t l = i - b;
            const char *w = s->t + b;
            int raw_prefix = s->t[i] == '"' && ((l == 1 && w[0] == 'R') ||
                                                (l == 2 && w[1] == 'R' && strchr("uUL", w[0])) ||
                                                (l == 3 && memcmp(w, "u8R", 3) == 0));
            if (raw_prefix) {
                size_t e = raw_string(s, i);
                if (e)
                    i = e;
            }
        } else if (c == '#' || (c == '%' && d == ':')) {
            i = directive(s, i + (c == '#' ? 1 : 2));
        } else {
            i++;
        }
    }
}

int gpu_sandbox_scan(const char *src, size_t len, gpu_include_fn *fn, void *ud)
{
    scan s = {0};
    s.fn = fn;
    s.ud = ud;
    s.t = dt_xmalloc(len + 2);
    size_t cap = 0;
    int line = 1;
    for (size_t i = 0; i < len; i++) {
        /* The trigraphs ?\?= (#) and ?\?/ (a backslash, so a line splice)
         * act where trigraphs are on; refuse both rather than guess which
         * standard the options select. */
        if (src[i] == '?' && i + 2 < len && src[i + 1] == '?' &&
            (src[i + 2] == '=' || src[i + 2] == '/')) {
            if (++s.refused <= MAX_REFUSALS && fn)
                fn(line, "the trigraphs ?\?= and ?\?/ are not allowed", ud);
        }
        if (src[i] == '\\') {
            size_t j = i + 1;
            if (j < len && src[j] == '\r')
                j++;
            if (j < len && src[j] == '\n') {
                if (s.nsplice == cap) {
                    cap = cap ? 2 * cap : 16;
                    s.splice = dt_xrealloc(s.splice, cap * sizeof *s.splice);
                }
                s.splice[s.nsplice++] = s.n;
                line++;
                i = j;
                continue;
            }
        }
        line += src[i] == '\n';
        s.t[s.n++] = src[i] == '\0' ? ' ' : src[i];
    }
    s.t[s.n] = '\0';
    s.t[s.n + 1] = '\0';
    scan_text(&s);
    free(s.t);
    free(s.splice);
    return s.refused;
}

typedef struct first_refusal {
    int line;
    char why[512];
} first_refusal;

static void keep_first(int line, const char *why, void *ud)
{
    first_refusal *f = ud;
    if (f->line == 0) {
        f->line = line;
        snprintf(f->why, sizeof f->why, "%s", why);
    }
}

int gpu_sandbox_check(const char *src, size_t len, const char *name, dt_err *e)
{
    first_refusal f = {0};
    if (gpu_sandbox_scan(src, len, keep_first, &f) == 0)
        return 0;
    return dt_err_set(e, "%s:%d: %s", name ? name : "kernel.cu", f.line, f.why);
}

/* ---- options -------------------------------------------------------------- */

/* Prefixes of the options a request may pass (all others are refused:
 * several NVRTC options read or write files). */
/* clang-format off */
static const char *option_prefixes[] = {
    "-D", "-U", "--define-macro=", "--undefine-macro=", "-std=", "--std=",
    "--use_fast_math", "-use_fast_math", "--ftz=", "-ftz=", "--prec-div=", "-prec-div=",
    "--prec-sqrt=", "-prec-sqrt=", "--fmad=", "-fmad=", "--maxrregcount=", "-maxrregcount=",
    "-lineinfo", "--generate-line-info", "--extra-device-vectorization",
    "-extra-device-vectorization", "--restrict", "-restrict", "--dopt=", "-dopt=", "-Xptxas",
    "--ptxas-options=", "--device-int128", "-device-int128", "-w", "--disable-warnings",
    "--Wreorder", "-Wreorder", "--diag-suppress=", "-diag-suppress=", "--diag-error=",
    "-diag-error=", "--diag-warn=", "-diag-warn=", "--display-error-number", "-err-no",
};
/* clang-format on */

/* ptxas options allowed after -Xptxas (or in --ptxas-options=). */
static int ptxas_ok(const char *o)
{
    static const char *ok[] = {"-O0",
                               "-O1",
                               "-O2",
                               "-O3",
                               "-v",
                               "--verbose",
                               "--warn-on-spills",
                               "-warn-spills",
                               "--warn-on-local-memory-usage",
                               "-warn-lmem-usage",
                               "--allow-expensive-optimizations=true",
                               "--allow-expensive-optimizations=false"};
    for (size_t i = 0; i < DT_ARRAY_LEN(ok); i++)
        if (strcmp(o, ok[i]) == 0)
            return 1;
    return dt_startswith(o, "--maxrregcount=") || dt_startswith(o, "-maxrregcount=");
}

int gpu_sandbox_option(const char *opt, const char *prev, dt_err *e)
{
    if (prev != NULL && strcmp(prev, "-Xptxas") == 0) {
        if (ptxas_ok(opt))
            return 0;
        return dt_err_set(e,
                          "option '-Xptxas %.100s' is not allowed (ptxas options allowed: "
                          "-O0..-O3, -v, --warn-on-spills, --warn-on-local-memory-usage, "
                          "--maxrregcount=N)",
                          opt);
    }
    if (dt_startswith(opt, "--ptxas-options=")) {
        if (ptxas_ok(opt + strlen("--ptxas-options=")))
            return 0;
    } else {
        for (size_t i = 0; i < DT_ARRAY_LEN(option_prefixes); i++) {
            const char *p = option_prefixes[i];
            size_t pl = strlen(p);
            if (strncmp(opt, p, pl) != 0)
                continue;
            /* Exact switches must match whole; "-D"/"-U" and "...=" take a value. */
            if (p[pl - 1] == '=' || strcmp(p, "-D") == 0 || strcmp(p, "-U") == 0 || opt[pl] == '\0')
                return 0;
        }
    }
    return dt_err_set(e,
                      "option '%.100s' is not allowed: a request may pass macros (-D, -U), "
                      "-std=, math and optimisation switches, --maxrregcount=N, -lineinfo, "
                      "diagnostic switches and ptxas -O/-v/warnings; options that read or write "
                      "files (--include-path, -I, --pre-include, --time, ...) are refused",
                      opt);
}
