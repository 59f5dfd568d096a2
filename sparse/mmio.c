/* mmio.c -- Matrix Market (coordinate and array) and DLMC .smtx readers and writers, streamed.
 * Over 1,000 lines: three formats, each read streamed with bounded lines and
 * every malformed input named by file and line. */
#include "sparse/sparse.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Bytes asked of fread at a time. The fuzz build shrinks both sizes so that
 * inputs of a few hundred bytes already cross chunk boundaries and hit the
 * line limit. */
#ifndef SP_IO_CHUNK
#define SP_IO_CHUNK (1 << 20)
#endif
/* Longest Matrix Market line accepted, '\n' excluded. Entry lines are under
 * 100 bytes; the slack is for long comments. .smtx lines have no limit: their
 * offsets and columns are read as a stream of numbers. */
#ifndef SP_IO_MAX_LINE
#define SP_IO_MAX_LINE (64 * 1024)
#endif

#define IDX_MAX INT32_MAX /* rows, cols and 1-based indices fit an int32 */
/* Bytes after the data that a parser may load (eight digits at a time) but
 * never uses: they keep those loads inside the buffer and initialised. */
#define RD_PAD 8

/* ---- the chunked input stream ---------------------------------------------- */

typedef struct rd {
    FILE *f;
    const char *name;  /* for messages */
    char *buf;         /* SP_IO_MAX_LINE + SP_IO_CHUNK + 1 + RD_PAD bytes */
    size_t pos, len;   /* the unread bytes are buf[pos, len) */
    int eof;           /* f has nothing more to give */
    int64_t line;      /* lines consumed so far: the number of the last one */
    int64_t remaining; /* bytes left in f when it is a regular file, else -1 */
    dt_err *e;
    const sp_read_opts *o; /* its progress callback, if any */
    int64_t done, total;   /* bytes read so far; remaining at the start */
} rd;

static int rd_fail(rd *r, int64_t line, const char *fmt, ...) DT_PRINTF(3, 4);

static int rd_fail(rd *r, int64_t line, const char *fmt, ...)
{
    char msg[sizeof((dt_err *)NULL)->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return dt_err_set(r->e, "%s:%lld: %s", r->name, (long long)line, msg);
}

/* On error returns -1 with the message in e; nothing is left to free. */
static int rd_open(rd *r, FILE *f, const char *name, dt_err *e)
{
    memset(r, 0, sizeof *r);
    r->f = f;
    r->name = name ? name : "(stream)";
    r->e = e;
    r->remaining = -1;
    r->buf = calloc((size_t)SP_IO_MAX_LINE + SP_IO_CHUNK + 1 + RD_PAD, 1);
    if (r->buf == NULL)
        return dt_err_set(e, "%s: out of memory for the read buffer", r->name);
    /* The size only bounds preallocation (a header may declare any count), so
     * a stream whose size is unknown is read all the same. */
    struct stat st;
    int fd = fileno(f);
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        off_t at = ftello(f);
        if (at >= 0 && st.st_size >= at)
            r->remaining = (int64_t)(st.st_size - at);
    }
    return 0;
}

static void rd_close(rd *r)
{
    free(r->buf);
    r->buf = NULL;
}

/* Move the unread bytes to the front and append up to one chunk. The caller
 * guarantees at most SP_IO_MAX_LINE unread bytes, so the chunk always fits. */
static int rd_fill(rd *r)
{
    size_t keep = r->len - r->pos;
    memmove(r->buf, r->buf + r->pos, keep);
    r->pos = 0;
    r->len = keep;
    size_t n = fread(r->buf + keep, 1, SP_IO_CHUNK, r->f);
    r->len += n;
    r->done += (int64_t)n;
    if (r->o && r->o->progress)
        r->o->progress(r->o->progress_ud, r->done, r->total);
    if (n < SP_IO_CHUNK) {
        /* fread only comes back short at the end or on an error. */
        if (ferror(r->f))
            return rd_fail(r, r->line + 1, "read error: %s", strerror(errno));
        r->eof = 1;
    }
    return 0;
}

/* Next line as a NUL-terminated string in the buffer (valid until the next
 * call), without its "\n" or "\r\n". Returns 1, 0 at the end of the input,
 * -1 on error (line too long, read error). A NUL byte inside the line is left
 * for the parsers to find: they stop at it before the line's end. */
static int rd_line(rd *r, char **out, size_t *outlen)
{
    size_t scanned = 0; /* unread bytes already known to hold no '\n' */
    for (;;) {
        char *start = r->buf + r->pos;
        size_t avail = r->len - r->pos;
        char *nl = memchr(start + scanned, '\n', avail - scanned);
        if (nl != NULL || (r->eof && avail > 0)) {
            size_t n = nl ? (size_t)(nl - start) : avail;
            if (n > SP_IO_MAX_LINE)
                return rd_fail(r, r->line + 1, "line is longer than %d bytes", SP_IO_MAX_LINE);
            r->pos += n + (nl != NULL);
            r->line++;
            if (n > 0 && start[n - 1] == '\r')
                n--;
            start[n] = '\0'; /* the '\n' or '\r', or the spare byte after len */
            *out = start;
            *outlen = n;
            return 1;
        }
        if (r->eof)
            return 0;
        if (avail > SP_IO_MAX_LINE)
            return rd_fail(r, r->line + 1, "line is longer than %d bytes", SP_IO_MAX_LINE);
        scanned = avail;
        if (rd_fill(r) < 0)
            return -1;
    }
}

/* Next byte without consuming it: 0..255, -1 at the end of the input, -2 on a
 * read error (message set). */
static int rd_peek(rd *r)
{
    if (r->pos == r->len) {
        if (r->eof)
            return -1;
        if (rd_fill(r) < 0)
            return -2;
        if (r->pos == r->len)
            return -1;
    }
    return (unsigned char)r->buf[r->pos];
}

/* ---- number parsing ------------------------------------------------------------ */

static int is_blank(int c)
{
    return c == ' ' || c == '\t';
}

/* A token ends at a blank or at the NUL that ends the line (or a stray NUL,
 * which the caller reports), or at the '\n' the entry fast path stops at (a
 * line rd_line hands out holds none). */
static int is_delim(int c)
{
    return c == ' ' || c == '\t' || c == '\0' || c == '\n';
}

static const char *skip_blanks(const char *p)
{
    while (is_blank(*p))
        p++;
    return p;
}

/* A length to quote in a message: enough to recognise, never a whole line. */
static int clip(size_t n)
{
    return n > 40 ? 40 : (int)n;
}

/* Length of the token at p, for quoting it in a message. */
static int tok_len(const char *p)
{
    int n = 0;
    while (!is_delim(p[n]) && n < 40)
        n++;
    return n;
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c;
}

/* Case-insensitive: does the token [p, p + n) equal word? */
static int word_eq(const char *p, size_t n, const char *word)
{
    if (strlen(word) != n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        if (lower((unsigned char)p[i]) != word[i])
            return 0;
    }
    return 1;
}

/* Unsigned decimal at p. Saturates far above any accepted index so that a
 * long run of digits is "out of range", never a wrapped value. Returns the end
 * of the digits, or NULL when p does not start with a digit. */
static const char *parse_uint(const char *p, uint64_t *out)
{
    const char *s = p;
    uint64_t v = 0;
    while ((unsigned)(*p - '0') < 10u) {
        if (v < ((uint64_t)1 << 59))
            v = v * 10 + (uint64_t)(*p - '0');
        else
            v = (uint64_t)1 << 62;
        p++;
    }
    if (p == s)
        return NULL;
    *out = v;
    return p;
}

/* 10^k = 5^k * 2^k and 5^22 < 2^53: each of these is an exact double. */
static const double pow10_exact[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                       1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                       1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#define MANT_EXACT ((uint64_t)1 << 53)

/* The Eisel-Lemire step (D. Lemire, "Number parsing at a gigabyte per
 * second", 2021): w * 10^q from a 128-bit approximation of 5^q, giving up
 * (so that strtod decides) whenever the approximation could round either
 * way. Written files carry 17 significant digits, past Clinger's 2^53, and
 * strtod on each of those would halve the parse speed. */
#if defined(__SIZEOF_INT128__) && defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
#define HAVE_EISEL_LEMIRE 1
__extension__ typedef unsigned __int128 u128;

#define P5_MIN   (-342) /* w * 10^-343 is below half the smallest subnormal */
#define P5_MAX   308    /* w * 10^309 is above the largest double */
#define P5_LIMBS 60     /* 32-bit limbs: 2^1718, the largest numerator below */

/* 5^q normalised to [2^127, 2^128): truncated for q >= 0; for q < 0 the
 * reciprocal rounded up as in the paper's table (so the analysis holds). */
static uint64_t p5_hi[P5_MAX - P5_MIN + 1], p5_lo[P5_MAX - P5_MIN + 1];
static pthread_once_t p5_once = PTHREAD_ONCE_INIT;

static int big_bits(const uint32_t *x, int n)
{
    while (n > 0 && x[n - 1] == 0)
        n--;
    if (n == 0)
        return 0;
    return 32 * (n - 1) + (32 - __builtin_clz(x[n - 1]));
}

/* The 128 bits of x starting at bit `from` (x < 2^(from + 128)). */
static void big_take128(const uint32_t *x, int n, int from, uint64_t *hi, uint64_t *lo)
{
    u128 v = 0;
    for (int bit = 127; bit >= 0; bit--) {
        int at = from + bit;
        int b = at >= 0 && at / 32 < n ? (int)((x[at / 32] >> (at % 32)) & 1) : 0;
        v = (v << 1) | (u128)b;
    }
    *hi = (uint64_t)(v >> 64);
    *lo = (uint64_t)v;
}

static void p5_init(void)
{
    uint32_t pow[P5_LIMBS] = {1}; /* 5^k, exact */
    for (int k = 0; k <= -P5_MIN; k++) {
        if (k > 0) {
            uint64_t carry = 0;
            for (int i = 0; i < P5_LIMBS; i++) {
                uint64_t t = (uint64_t)pow[i] * 5 + carry;
                pow[i] = (uint32_t)t;
                carry = t >> 32;
            }
        }
        int z = big_bits(pow, P5_LIMBS);
        if (k <= P5_MAX) {
            big_take128(pow, P5_LIMBS, z - 128, &p5_hi[k - P5_MIN], &p5_lo[k - P5_MIN]);
        }
        if (k == 0)
            continue;
        /* floor(2^b / 5^k) + 1, kept to its top 128 bits; b as in the paper. */
        int b = k <= 27 ? z + 127 : 2 * z + 128;
        uint32_t num[P5_LIMBS] = {0};
        num[b / 32] = (uint32_t)1 << (b % 32);
        /* Dividing by 5 k times floors once: floor(floor(x / a) / b) = floor(x / ab). */
        for (int left = k; left > 0;) {
            int step = left < 13 ? left : 13; /* 5^13 < 2^32 */
            uint64_t d = 1;
            for (int i = 0; i < step; i++)
                d *= 5;
            uint64_t rem = 0;
            for (int i = P5_LIMBS - 1; i >= 0; i--) {
                uint64_t cur = (rem << 32) | num[i];
                num[i] = (uint32_t)(cur / d);
                rem = cur % d;
            }
            left -= step;
        }
        for (int i = 0; i < P5_LIMBS && ++num[i] == 0; i++)
            ;
        int nb = big_bits(num, P5_LIMBS);
        big_take128(num, P5_LIMBS, nb - 128, &p5_hi[-k - P5_MIN], &p5_lo[-k - P5_MIN]);
    }
}

/* floor(q * log2(10)) for |q| < 1000, without shifting a negative number. */
static int64_t floor_log2_pow10(int64_t q)
{
    int64_t t = 217706 * q;
    return t >= 0 ? t >> 16 : -((-t + 65535) >> 16);
}

/* w * 10^q as a double in *out: 1, or 0 when this step cannot be sure. */
static int eisel_lemire(uint64_t w, int64_t q, int neg, double *out)
{
    if (w == 0 || q < P5_MIN || q > P5_MAX)
        return 0;
    pthread_once(&p5_once, p5_init);
    int lz = __builtin_clzll(w);
    w <<= lz;
    size_t at = (size_t)(q - P5_MIN);
    u128 z = (u128)w * p5_hi[at];
    uint64_t hi = (uint64_t)(z >> 64), lo = (uint64_t)z;
    uint64_t mid = (uint64_t)(((u128)w * p5_lo[at]) >> 64);
    lo += mid;
    hi += lo < mid;
    /* The product is now within (-1, +2) units of lo of w * 5^q: refuse when
     * that could carry into, or borrow from, the bits that decide. */
    if ((lo >= UINT64_MAX - 1 && (hi & 0x1ff) == 0x1ff) || (lo == 0 && (hi & 0x1ff) == 0))
        return 0;
    int upper = (int)(hi >> 63);
    int shift = upper + 9;
    uint64_t mant = hi >> shift; /* 53 bits and the rounding bit */
    /* Possibly halfway between two doubles: round-to-even needs the exact
     * value, which only strtod has. */
    if ((mant & 1) && (hi & (((uint64_t)1 << shift) - 1)) == 0 && lo <= 1)
        return 0;
    int64_t e2 = floor_log2_pow10(q) + upper - lz + 1086; /* biased exponent */
    mant += mant & 1;
    mant >>= 1;
    if (mant >> 53) {
        mant >>= 1;
        e2++;
    }
    if (e2 <= 0 || e2 >= 0x7ff)
        return 0; /* subnormal or overflow: strtod */
    uint64_t bits = (mant & ~((uint64_t)1 << 52)) | ((uint64_t)e2 << 52) | ((uint64_t)neg << 63);
    memcpy(out, &bits, sizeof bits);
    return 1;
}
#endif

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HAVE_SWAR_DIGITS 1
/* The eight bytes at p as an 8-digit decimal number, or -1 when they are not
 * all digits. Fractions of 17 digits dominate written files; two of these
 * replace sixteen trips through the digit loop. */
static int64_t eight_digits(const char *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v); /* p[0], the leading digit, in the low byte */
    /* A digit is 0x30..0x39: high nibble 3, and adding 6 leaves it at 3. */
    if (((v & 0xF0F0F0F0F0F0F0F0u) | (((v + 0x0606060606060606u) & 0xF0F0F0F0F0F0F0F0u) >> 4)) !=
        0x3333333333333333u)
        return -1;
    v -= 0x3030303030303030u;
    v = v * 10 + (v >> 8); /* even bytes now hold the pairs 10 d[i] + d[i + 1] */
    /* Pairs at bytes 0, 2, 4, 6 weigh 10^6, 10^4, 10^2, 1: two multiplies
     * add them up in the high halves. */
    uint64_t a = (v & 0x000000FF000000FFu) * (100 + (1000000ull << 32));
    uint64_t b = ((v >> 16) & 0x000000FF000000FFu) * (1 + (10000ull << 32));
    return (int64_t)((a + b) >> 32);
}
#endif

/* Words strtod accepts for non-finite values (case-insensitive). */
static const char *parse_nonfinite(const char *p, int neg, double *out)
{
    static const char *words[] = {"infinity", "inf", "nan"};
    for (size_t w = 0; w < DT_ARRAY_LEN(words); w++) {
        size_t n = strlen(words[w]);
        size_t i = 0;
        while (i < n && lower((unsigned char)p[i]) == words[w][i])
            i++;
        if (i == n && is_delim(p[n])) {
            double v = words[w][0] == 'n' ? NAN : INFINITY;
            *out = neg ? -v : v;
            return p + n;
        }
    }
    return NULL;
}

/* Decimal number at p, a token ended by a blank or NUL. Returns its end, or
 * NULL when the token is not a number. The result is the double strtod
 * gives: mantissas of at most 2^53 scaled by an exact power of ten take one
 * correctly rounded multiply or divide (Clinger's fast path), which is what
 * strtod rounds to; everything else goes to strtod itself. Hexadecimal
 * floats, which strtod would take, are not Matrix Market and are refused. */
static const char *parse_double(const char *p, double *out)
{
    const char *s = p;
    int neg = 0;
    if (*p == '+' || *p == '-') {
        neg = *p == '-';
        p++;
    }
    uint64_t m = 0;  /* the first 19 significant digits */
    int nd = 0;      /* how many of them */
    int64_t e10 = 0; /* value = m * 10^e10 when !dropped */
    int dropped = 0; /* a nonzero digit did not fit in m */
    const char *d0 = p;
    while ((unsigned)(*p - '0') < 10u) {
        unsigned d = (unsigned)(*p - '0');
        if (nd < 19) {
            m = m * 10 + d;
            nd += m != 0; /* leading zeros are not significant */
        } else {
            e10++;
            dropped |= d != 0;
        }
        p++;
    }
    int any = p != d0;
    if (*p == '.') {
        p++;
        const char *f0 = p;
#ifdef HAVE_SWAR_DIGITS
        /* After the first significant digit, eight at a time while they
         * fit in the 19 kept. The line's NUL stops it before the padding. */
        for (;;) {
            int64_t x;
            if (m == 0 || nd > 19 - 8 || (x = eight_digits(p)) < 0)
                break;
            m = m * 100000000u + (uint64_t)x;
            nd += 8;
            e10 -= 8;
            p += 8;
        }
#endif
        while ((unsigned)(*p - '0') < 10u) {
            unsigned d = (unsigned)(*p - '0');
            if (nd < 19) {
                m = m * 10 + d;
                nd += m != 0;
                e10--;
            } else {
                dropped |= d != 0;
            }
            p++;
        }
        any |= p != f0;
    }
    if (!any)
        return p == d0 ? parse_nonfinite(p, neg, out) : NULL;
    if (*p == 'e' || *p == 'E') {
        p++;
        int eneg = 0;
        if (*p == '+' || *p == '-') {
            eneg = *p == '-';
            p++;
        }
        if ((unsigned)(*p - '0') >= 10u)
            return NULL;
        int64_t x = 0;
        while ((unsigned)(*p - '0') < 10u) {
            if (x < 1000000) /* far past any double; keeps e10 from overflowing */
                x = x * 10 + (*p - '0');
            p++;
        }
        e10 += eneg ? -x : x;
    }
    if (!is_delim(*p))
        return NULL;
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    /* Only when double arithmetic rounds once, to double (not x87). */
    if (m == 0) {
        *out = neg ? -0.0 : 0.0;
        return p;
    }
    if (!dropped && m <= MANT_EXACT) {
        double v = (double)m;
        if (e10 >= 0 && e10 <= 22) {
            *out = neg ? -(v * pow10_exact[e10]) : v * pow10_exact[e10];
            return p;
        }
        if (e10 < 0 && e10 >= -22) {
            *out = neg ? -(v / pow10_exact[-e10]) : v / pow10_exact[-e10];
            return p;
        }
        /* 123e25: move the surplus of ten into the mantissa while it stays
         * exact, then one multiply by 1e22. */
        if (e10 > 22 && e10 <= 22 + 15) {
            uint64_t mm = m;
            int64_t k = e10 - 22;
            while (k > 0 && mm <= MANT_EXACT / 10) {
                mm *= 10;
                k--;
            }
            if (k == 0) {
                v = (double)mm * 1e22;
                *out = neg ? -v : v;
                return p;
            }
        }
    }
#endif
#ifdef HAVE_EISEL_LEMIRE
    if (!dropped && eisel_lemire(m, e10, neg, out))
        return p;
    /* Digits past the 19th only matter when m and m + 1 round apart. */
    double lo, hi;
    if (dropped && eisel_lemire(m, e10, neg, &lo) && eisel_lemire(m + 1, e10, neg, &hi) &&
        memcmp(&lo, &hi, sizeof lo) == 0) {
        *out = lo;
        return p;
    }
#endif
    char *end = NULL;
    double v = dt_strtod(s, &end);
    if (end != p)
        return NULL; /* never expected: the grammar above is a subset of strtod's */
    *out = v;
    return p;
}

/* ---- Matrix Market header ---------------------------------------------------- */

typedef enum { MM_REAL, MM_INTEGER, MM_PATTERN, MM_COMPLEX } mm_field;
typedef enum { MM_GENERAL, MM_SYMMETRIC, MM_SKEW, MM_HERMITIAN } mm_sym;

typedef struct mm_header {
    int array; /* 1: dense array format, 0: coordinate */
    mm_field field;
    mm_sym sym;
    int64_t rows, cols;
    int64_t nnz;       /* declared entries (coordinate only) */
    int64_t size_line; /* for messages about the sizes */
} mm_header;

static const char *field_names[] = {"real", "integer", "pattern", "complex"};
static const char *sym_names[] = {"general", "symmetric", "skew-symmetric", "hermitian"};

/* Next blank-separated word of the line: [*w, *w + *n). 0 when none is left. */
static int next_word(const char **p, const char **w, size_t *n)
{
    const char *s = skip_blanks(*p);
    const char *t = s;
    while (!is_delim(*t))
        t++;
    *w = s;
    *n = (size_t)(t - s);
    *p = t;
    return *n > 0;
}

static int has_nul(const char *s, size_t n)
{
    return memchr(s, '\0', n) != NULL;
}

/* A size on the size line: digits only, at most limit. */
static int size_value(rd *r, const char **p, const char *what, int64_t limit, int64_t *out,
                      const char *expected)
{
    const char *s = skip_blanks(*p);
    uint64_t v = 0;
    const char *t = parse_uint(s, &v);
    if (t == NULL || !is_delim(*t))
        return rd_fail(r, r->line, "size line: expected '%s'", expected);
    if (v > (uint64_t)limit) {
        if (limit == IDX_MAX)
            return rd_fail(r, r->line, "%s %.*s exceed the 32-bit limit (%d)", what, (int)(t - s),
                           s, IDX_MAX);
        return rd_fail(r, r->line, "%s %.*s is too large", what, (int)(t - s), s);
    }
    *out = (int64_t)v;
    *p = t;
    return 0;
}

/* Banner, comments and size line. want_array selects which of the two formats
 * the caller reads; the other is an error naming the right function. */
static int mm_read_header(rd *r, int want_array, const sp_read_opts *o, mm_header *h)
{
    memset(h, 0, sizeof *h);
    char *line = NULL;
    size_t n = 0;
    int rc = rd_line(r, &line, &n);
    if (rc < 0)
        return -1;
    if (rc == 0 || n < 14 || !word_eq(line, 14, "%%matrixmarket") || !is_delim(line[14]) ||
        has_nul(line, n))
        return rd_fail(r, 1, "not a Matrix Market file: expected '%%%%MatrixMarket' banner");
    const char *p = line + 14, *w[4];
    size_t wn[4];
    for (int i = 0; i < 4; i++) {
        if (!next_word(&p, &w[i], &wn[i]))
            return rd_fail(r, 1,
                           "banner: expected '%%%%MatrixMarket matrix FORMAT FIELD SYMMETRY'");
    }
    const char *extra;
    size_t extran;
    if (next_word(&p, &extra, &extran))
        return rd_fail(r, 1, "banner: unexpected '%.*s' after the symmetry", clip(extran), extra);
    if (!word_eq(w[0], wn[0], "matrix"))
        return rd_fail(r, 1, "unsupported object '%.*s' (expected 'matrix')", clip(wn[0]), w[0]);
    if (word_eq(w[1], wn[1], "coordinate"))
        h->array = 0;
    else if (word_eq(w[1], wn[1], "array"))
        h->array = 1;
    else
        return rd_fail(r, 1, "unsupported format '%.*s' (expected 'coordinate' or 'array')",
                       clip(wn[1]), w[1]);
    int field = -1, sym = -1;
    for (int i = 0; i < (int)DT_ARRAY_LEN(field_names); i++) {
        if (word_eq(w[2], wn[2], field_names[i]))
            field = i;
    }
    if (word_eq(w[2], wn[2], "double")) /* written by some tools for "real" */
        field = MM_REAL;
    if (field < 0)
        return rd_fail(r, 1,
                       "unsupported field '%.*s' (expected real, integer, pattern or complex)",
                       clip(wn[2]), w[2]);
    for (int i = 0; i < (int)DT_ARRAY_LEN(sym_names); i++) {
        if (word_eq(w[3], wn[3], sym_names[i]))
            sym = i;
    }
    if (sym < 0)
        return rd_fail(r, 1,
                       "unsupported symmetry '%.*s' (expected general, symmetric, "
                       "skew-symmetric or hermitian)",
                       clip(wn[3]), w[3]);
    h->field = (mm_field)field;
    h->sym = (mm_sym)sym;
    if (h->field == MM_PATTERN && (h->sym == MM_SKEW || h->sym == MM_HERMITIAN))
        return rd_fail(r, 1, "field 'pattern' cannot be %s", sym_names[sym]);
    if (h->sym == MM_HERMITIAN && h->field != MM_COMPLEX)
        return rd_fail(r, 1, "symmetry 'hermitian' needs field 'complex', not '%s'",
                       field_names[field]);
    if (h->array && h->field == MM_PATTERN)
        return rd_fail(r, 1, "field 'pattern' is not allowed with format 'array'");
    if (h->array != want_array)
        return rd_fail(r, 1, "format '%s' is %s; this reader takes '%s'",
                       h->array ? "array" : "coordinate", h->array ? "dense" : "sparse",
                       want_array ? "array" : "coordinate");
    if (h->field == MM_COMPLEX && !(o && o->quiet))
        dt_warn("%s: complex values: keeping the real parts", r->name);

    /* Comments and blank lines, then the size line. */
    for (;;) {
        rc = rd_line(r, &line, &n);
        if (rc < 0)
            return -1;
        if (rc == 0)
            return rd_fail(r, r->line + 1, "file ends before the size line");
        if (has_nul(line, n))
            return rd_fail(r, r->line, "NUL byte in the line");
        p = skip_blanks(line);
        if (*p != '%' && *p != '\0')
            break;
    }
    h->size_line = r->line;
    const char *expected = h->array ? "rows cols" : "rows cols nnz";
    if (size_value(r, &p, "rows", IDX_MAX, &h->rows, expected) < 0 ||
        size_value(r, &p, "cols", IDX_MAX, &h->cols, expected) < 0)
        return -1;
    if (!h->array && size_value(r, &p, "nnz", INT64_MAX / 4, &h->nnz, expected) < 0)
        return -1;
    p = skip_blanks(p);
    if (*p != '\0')
        return rd_fail(r, r->line, "size line: expected '%s'", expected);
    if (h->sym != MM_GENERAL && h->rows != h->cols)
        return rd_fail(r, r->line, "a %s matrix must be square, this one is %lld x %lld",
                       sym_names[h->sym], (long long)h->rows, (long long)h->cols);
    return 0;
}

/* The limit on the matrix's host memory, judged from the declared sizes. */
static int check_bytes(rd *r, int64_t line, const sp_read_opts *o, double need)
{
    if (o == NULL || o->max_bytes <= 0 || need <= (double)o->max_bytes)
        return 0;
    char a[32], b[32];
    return rd_fail(r, line, "the matrix needs %s, over the limit of %s",
                   dt_fmt_bytes(need, a, sizeof a),
                   dt_fmt_bytes((double)o->max_bytes, b, sizeof b));
}

/* What is wrong at p, where a token was expected and none is. */
static int missing(rd *r, const char *p, const char *end, const char *expected)
{
    if (p < end && *p == '\0')
        return rd_fail(r, r->line, "NUL byte in the line");
    return rd_fail(r, r->line, "expected '%s'", expected);
}

/* After the last token of an entry line. */
static int trailing(rd *r, const char *p, const char *end)
{
    p = skip_blanks(p);
    if (p == end)
        return 0;
    if (*p == '\0')
        return rd_fail(r, r->line, "NUL byte in the line");
    return rd_fail(r, r->line, "unexpected '%.*s' after the entry", tok_len(p), p);
}

/* One value token; 0 or -1 with the message set. */
static int entry_value(rd *r, const char **pp, const char *end, const sp_read_opts *o,
                       const char *expected, double *v)
{
    const char *p = skip_blanks(*pp);
    if (p == end || *p == '\0')
        return missing(r, p, end, expected);
    const char *t = parse_double(p, v);
    if (t == NULL)
        return rd_fail(r, r->line, "value '%.*s' is not a number", tok_len(p), p);
    if (!isfinite(*v) && !(o && o->allow_nonfinite)) {
        const char *q = p + (*p == '-' || *p == '+');
        if (*q == '.' || (*q >= '0' && *q <= '9')) /* strtod overflowed: say so */
            return rd_fail(r, r->line, "value '%.*s' is out of the double range", tok_len(p), p);
        return rd_fail(r, r->line, "value is NaN or Inf (use --allow-nonfinite to accept)");
    }
    *pp = t;
    return 0;
}

/* ---- Matrix Market coordinate ------------------------------------------------ */

static int coo_reserve(sp_coo *c, int64_t need, int64_t most, rd *r)
{
    if (need <= c->cap)
        return 0;
    int64_t cap = c->cap * 2;
    if (cap < need)
        cap = need;
    if (cap > most)
        cap = most;
    int32_t *nr = realloc(c->row, (size_t)cap * sizeof *nr);
    if (nr != NULL)
        c->row = nr;
    int32_t *nc = realloc(c->col, (size_t)cap * sizeof *nc);
    if (nc != NULL)
        c->col = nc;
    double *nv = realloc(c->val, (size_t)cap * sizeof *nv);
    if (nv != NULL)
        c->val = nv;
    if (nr == NULL || nc == NULL || nv == NULL)
        return rd_fail(r, r->line, "out of memory for %lld entries", (long long)cap);
    c->cap = cap;
    return 0;
}

/* The fast path for the usual entry line, "ROW COL[ VALUE]\n" with single
 * spaces, read in place in the buffer at p without finding the line's end
 * first. Returns the start of the next line, or NULL for anything else --
 * another layout, a bad number, an index out of range, a non-finite value --
 * which the line-by-line path then reads, and reports, as it always has. The
 * caller leaves at least FAST_MARGIN bytes after p in the buffer, and checks
 * that the result is inside the data read (a digit run past it stops at the
 * buffer's zeroed tail). */
#define FAST_MARGIN 256
static const char *fast_entry(const char *p, int64_t rows, int64_t cols, int value, int32_t *i,
                              int32_t *j, double *v)
{
    uint64_t a = 0, b = 0;
    const char *s = p;
    while ((unsigned)(*p - '0') < 10u && p - s < 10)
        a = a * 10 + (uint64_t)(*p++ - '0');
    if (p == s || *p != ' ' || a < 1 || a > (uint64_t)rows)
        return NULL;
    s = ++p;
    while ((unsigned)(*p - '0') < 10u && p - s < 10)
        b = b * 10 + (uint64_t)(*p++ - '0');
    if (p == s || b < 1 || b > (uint64_t)cols)
        return NULL;
    if (value) {
        if (*p != ' ')
            return NULL;
        p = parse_double(p + 1, v);
        if (p == NULL || !isfinite(*v))
            return NULL;
    }
    if (*p != '\n')
        return NULL;
    *i = (int32_t)(a - 1);
    *j = (int32_t)(b - 1);
    return p + 1;
}

/* One 1-based index token checked against [1, limit]; stored 0-based. */
static int entry_index(rd *r, const char **pp, const char *end, const char *what, int64_t limit,
                       const char *expected, int32_t *out)
{
    const char *p = skip_blanks(*pp);
    if (p == end || *p == '\0')
        return missing(r, p, end, expected);
    uint64_t v = 0;
    const char *t = parse_uint(p, &v);
    if (t == NULL || !is_delim(*t))
        return rd_fail(r, r->line, "%s index '%.*s' is not a positive integer", what, tok_len(p),
                       p);
    if (v < 1 || v > (uint64_t)limit)
        return rd_fail(r, r->line, "%s index %.*s out of range [1, %lld]", what, (int)(t - p), p,
                       (long long)limit);
    *out = (int32_t)(v - 1);
    *pp = t;
    return 0;
}

/* A COO whose entries came in CSR order (rows ascending, columns strictly
 * ascending within a row: no duplicates) as a CSR that takes its column and
 * value arrays instead of copying them: the file's own order saves the
 * scatter and the second set of arrays. NULL when memory is short (c is
 * then unchanged). */
static sp_csr *coo_take_sorted(sp_coo *c, dt_err *e)
{
    if (sp_csr_admit(c->rows, c->cols, c->nnz, e) != 0)
        return NULL;
    sp_csr *a = calloc(1, sizeof *a);
    int64_t *rowptr = calloc((size_t)c->rows + 1, sizeof *rowptr);
    if (a == NULL || rowptr == NULL) {
        free(a);
        free(rowptr);
        dt_err_set(e, "out of memory converting to CSR");
        return NULL;
    }
    for (int64_t k = 0; k < c->nnz; k++)
        rowptr[c->row[k] + 1]++;
    for (int32_t i = 0; i < c->rows; i++)
        rowptr[i + 1] += rowptr[i];
    a->rows = c->rows;
    a->cols = c->cols;
    a->nnz = c->nnz;
    a->rowptr = rowptr;
    a->col = c->col;
    a->val = c->val;
    c->col = NULL;
    c->val = NULL;
    c->nnz = c->cap = 0;
    return a;
}

sp_csr *sp_mm_read_stream(FILE *f, const char *name, const sp_read_opts *o, dt_err *e)
{
    rd r;
    if (rd_open(&r, f, name, e) < 0)
        return NULL;
    r.o = o;
    r.total = r.remaining;
    sp_coo *c = NULL;
    sp_csr *a = NULL;
    mm_header h;
    if (mm_read_header(&r, 0, o, &h) < 0)
        goto fail;
    const int mirror = h.sym != MM_GENERAL;
    const int64_t most = h.nnz * (mirror ? 2 : 1); /* entries after expansion, at most */
    if (check_bytes(&r, h.size_line, o, ((double)h.rows + 1) * 8 + (double)most * 12) < 0)
        goto fail;
    /* Preallocate what the header declares, but no more than the bytes left
     * could hold (an entry line takes at least 4: "1 1\n"), so that a lying
     * header costs nothing; a stream of unknown size starts smaller and grows. */
    int64_t cap = most;
    int64_t bound = r.remaining >= 0 ? (r.remaining / 4 + 1) * (mirror ? 2 : 1) : (1 << 16);
    if (cap > bound)
        cap = bound;
    /* The rows alone can be past the memory (a three-line file declaring
     * 2^31 rows grew to 23 GB before the system killed it): admit the
     * matrix as sp_csr_new would, before reading its entries. */
    if (sp_csr_admit((int32_t)h.rows, (int32_t)h.cols, cap, e) != 0) {
        dt_err_prefix(e, "%s:%lld", r.name, (long long)h.size_line);
        goto fail;
    }
    c = sp_coo_new((int32_t)h.rows, (int32_t)h.cols, cap, e);
    if (c == NULL) {
        dt_err_prefix(e, "%s", r.name);
        goto fail;
    }
    const char *expected = h.field == MM_PATTERN   ? "row col"
                           : h.field == MM_COMPLEX ? "row col real imaginary"
                                                   : "row col value";
    int64_t count = 0;
    const int fast = h.field != MM_COMPLEX;
    int sorted = !mirror; /* every entry so far after the previous in CSR order */
    int32_t last_i = -1, last_j = -1;
    for (;;) {
        int32_t i, j;
        double v = 1.0, im;
        const char *q = NULL;
        if (fast && count < h.nnz && r.len - r.pos >= FAST_MARGIN)
            q = fast_entry(r.buf + r.pos, h.rows, h.cols, h.field != MM_PATTERN, &i, &j, &v);
        if (q != NULL && q <= r.buf + r.len) {
            r.pos = (size_t)(q - r.buf);
            r.line++;
        } else {
            char *line;
            size_t n;
            int rc = rd_line(&r, &line, &n);
            if (rc < 0)
                goto fail;
            if (rc == 0)
                break;
            const char *end = line + n;
            const char *p = skip_blanks(line);
            if (p == end)
                continue; /* blank lines are harmless */
            if (count == h.nnz) {
                rd_fail(&r, r.line, "more entries than the %lld declared", (long long)h.nnz);
                goto fail;
            }
            v = 1.0;
            if (entry_index(&r, &p, end, "row", h.rows, expected, &i) < 0 ||
                entry_index(&r, &p, end, "column", h.cols, expected, &j) < 0)
                goto fail;
            if (h.field != MM_PATTERN && entry_value(&r, &p, end, o, expected, &v) < 0)
                goto fail;
            if (h.field == MM_COMPLEX && entry_value(&r, &p, end, o, expected, &im) < 0)
                goto fail;
            if (trailing(&r, p, end) < 0)
                goto fail;
        }
        if (h.sym == MM_SKEW && i == j) {
            rd_fail(&r, r.line, "diagonal entry (%d, %d) in a skew-symmetric matrix", i + 1, j + 1);
            goto fail;
        }
        if (coo_reserve(c, c->nnz + 1 + mirror, most, &r) < 0)
            goto fail;
        int64_t k = c->nnz;
        sorted &= i > last_i || (i == last_i && j > last_j);
        last_i = i;
        last_j = j;
        c->row[k] = i;
        c->col[k] = j;
        c->val[k] = v;
        k++;
        if (mirror && i != j) {
            /* Hermitian mirrors the conjugate, whose real part is the same. */
            c->row[k] = j;
            c->col[k] = i;
            c->val[k] = h.sym == MM_SKEW ? -v : v;
            k++;
        }
        c->nnz = k;
        count++;
    }
    if (count < h.nnz) {
        rd_fail(&r, r.line + 1, "file ends after %lld of %lld declared entries", (long long)count,
                (long long)h.nnz);
        goto fail;
    }
    a = sorted && c->nnz > 0 ? coo_take_sorted(c, e) : sp_coo_to_csr(c, e);
    if (a == NULL) {
        dt_err_prefix(e, "%s", r.name);
        goto fail;
    }
    if (h.field == MM_PATTERN) {
        /* Duplicates were summed; a pattern has ones whatever repeats. */
        a->pattern = 1;
        for (int64_t k = 0; k < a->nnz; k++)
            a->val[k] = 1.0;
    } else if (!(o && o->allow_nonfinite)) {
        /* Finite duplicates can sum past the double range; which line that
         * was is no longer known, so the message names the entry. */
        for (int32_t i = 0; i < a->rows; i++) {
            for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
                if (!isfinite(a->val[k])) {
                    rd_fail(&r, r.line,
                            "the duplicates of entry (%d, %d) sum past the double range", i + 1,
                            a->col[k] + 1);
                    sp_csr_free(a);
                    a = NULL;
                    goto fail;
                }
            }
        }
    }
    sp_coo_free(c);
    rd_close(&r);
    return a;
fail:
    sp_coo_free(c);
    rd_close(&r);
    return NULL;
}

sp_csr *sp_mm_read(const char *path, const sp_read_opts *o, dt_err *e)
{
    char head[SP_INPUT_HEAD];
    size_t head_len;
    FILE *f = sp_input_open(path, head, &head_len, e);
    if (f == NULL)
        return NULL;
    sp_csr *a = sp_mm_read_stream(f, sp_input_name(path), o, e);
    fclose(f);
    return a;
}

/* ---- Matrix Market array (dense) --------------------------------------------- */

double *sp_mm_read_dense(FILE *f, const char *name, int32_t *rows, int32_t *cols,
                         const sp_read_opts *o, dt_err *e)
{
    rd r;
    if (rd_open(&r, f, name, e) < 0)
        return NULL;
    r.o = o;
    r.total = r.remaining;
    double *a = NULL;
    mm_header h;
    if (mm_read_header(&r, 1, o, &h) < 0)
        goto fail;
    const double cells = (double)h.rows * (double)h.cols;
    if (cells * 8 > (double)SIZE_MAX / 2) {
        rd_fail(&r, r.line, "a %lld x %lld dense matrix is too large", (long long)h.rows,
                (long long)h.cols);
        goto fail;
    }
    if (check_bytes(&r, h.size_line, o, cells * 8) < 0)
        goto fail;
    size_t ncell = (size_t)h.rows * (size_t)h.cols;
    a = calloc(ncell ? ncell : 1, sizeof *a); /* zeros: the skew-symmetric diagonal */
    if (a == NULL) {
        rd_fail(&r, r.line, "out of memory for a %lld x %lld dense matrix", (long long)h.rows,
                (long long)h.cols);
        goto fail;
    }
    /* Symmetric kinds store the lower triangle column by column, skew without
     * its (zero) diagonal. */
    const int64_t n = h.rows;
    int64_t total = (int64_t)ncell;
    if (h.sym == MM_SYMMETRIC || h.sym == MM_HERMITIAN)
        total = n * (n + 1) / 2;
    else if (h.sym == MM_SKEW)
        total = n * (n - 1) / 2;
    const char *expected = h.field == MM_COMPLEX ? "real imaginary" : "value";
    int64_t count = 0;
    int64_t i = h.sym == MM_SKEW ? 1 : 0, j = 0; /* position of the next entry */
    for (;;) {
        char *line;
        size_t len;
        int rc = rd_line(&r, &line, &len);
        if (rc < 0)
            goto fail;
        if (rc == 0)
            break;
        const char *end = line + len;
        const char *p = skip_blanks(line);
        if (p == end)
            continue;
        if (count == total) {
            rd_fail(&r, r.line, "more entries than the %lld declared", (long long)total);
            goto fail;
        }
        double v, im;
        if (entry_value(&r, &p, end, o, expected, &v) < 0)
            goto fail;
        if (h.field == MM_COMPLEX && entry_value(&r, &p, end, o, expected, &im) < 0)
            goto fail;
        if (trailing(&r, p, end) < 0)
            goto fail;
        a[j * h.rows + i] = v;
        if (h.sym != MM_GENERAL)
            a[i * h.rows + j] = h.sym == MM_SKEW ? -v : v;
        count++;
        if (++i == h.rows) {
            j++;
            i = h.sym == MM_GENERAL ? 0 : h.sym == MM_SKEW ? j + 1 : j;
        }
    }
    if (count < total) {
        rd_fail(&r, r.line + 1, "file ends after %lld of %lld declared entries", (long long)count,
                (long long)total);
        goto fail;
    }
    rd_close(&r);
    *rows = (int32_t)h.rows;
    *cols = (int32_t)h.cols;
    return a;
fail:
    free(a);
    rd_close(&r);
    return NULL;
}

/* ---- DLMC .smtx ---------------------------------------------------------------- */

/* Skip spaces and tabs; returns the next byte as rd_peek does. */
static int smtx_skip_blanks(rd *r)
{
    int c;
    while ((c = rd_peek(r)) == ' ' || c == '\t')
        r->pos++;
    return c;
}

/* Unsigned decimal from the stream, saturating like parse_uint. The caller
 * has seen a digit. Returns 0, or -1 on a read error. */
static int smtx_uint(rd *r, uint64_t *out)
{
    uint64_t v = 0;
    for (;;) {
        while (r->pos < r->len) {
            unsigned d = (unsigned)((unsigned char)r->buf[r->pos] - '0');
            if (d > 9) {
                *out = v;
                return 0;
            }
            if (v < ((uint64_t)1 << 59))
                v = v * 10 + d;
            else
                v = (uint64_t)1 << 62;
            r->pos++;
        }
        if (r->eof)
            break;
        if (rd_fill(r) < 0)
            return -1;
    }
    *out = v;
    return 0;
}

/* Describe byte c (from rd_peek) for a message. */
static const char *byte_desc(int c, char out[16])
{
    if (c == -1)
        return "the end of the file";
    if (c == '\n' || c == '\r')
        return "the end of the line";
    if (c > ' ' && c < 127)
        snprintf(out, 16, "'%c'", c);
    else
        snprintf(out, 16, "byte 0x%02x", (unsigned)c & 0xff);
    return out;
}

/* The end of a line: blanks, an optional '\r', then '\n' or the end of the
 * file. Returns 0, or -1 with a message built from what (the thing that should
 * have ended). */
static int smtx_eol(rd *r, const char *what)
{
    int c = smtx_skip_blanks(r);
    if (c == -2)
        return -1;
    if (c == '\r') {
        r->pos++;
        c = rd_peek(r);
        if (c == -2)
            return -1;
    }
    if (c == '\n') {
        r->pos++;
        r->line++;
        return 0;
    }
    if (c == -1)
        return 0;
    char d[16];
    return rd_fail(r, r->line + 1, "unexpected %s after %s", byte_desc(c, d), what);
}

/* A number of line 1, after an optional comma. */
static int smtx_size(rd *r, int comma, const char *what, uint64_t limit, int64_t *out)
{
    int c = smtx_skip_blanks(r);
    if (comma && c == ',') {
        r->pos++;
        c = smtx_skip_blanks(r);
    }
    if (c == -2)
        return -1;
    if (c < '0' || c > '9')
        return rd_fail(r, 1, "expected 'rows, cols, nnz'");
    uint64_t v = 0;
    if (smtx_uint(r, &v) < 0)
        return -1;
    if (v > limit) {
        if (limit == IDX_MAX)
            return rd_fail(r, 1, "%s %llu exceed the 32-bit limit (%d)", what,
                           (unsigned long long)v, IDX_MAX);
        return rd_fail(r, 1, "%s %llu is too large", what, (unsigned long long)v);
    }
    *out = (int64_t)v;
    return 0;
}

/* Sort one row's columns (pattern only, so no values travel along). */
static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

sp_csr *sp_smtx_read_stream(FILE *f, const char *name, const sp_read_opts *o, dt_err *e)
{
    rd r;
    if (rd_open(&r, f, name, e) < 0)
        return NULL;
    r.o = o;
    r.total = r.remaining;
    sp_csr *a = NULL;
    int64_t rows, cols, nnz;
    char d[16];
    if (smtx_size(&r, 0, "rows", IDX_MAX, &rows) < 0 ||
        smtx_size(&r, 1, "cols", IDX_MAX, &cols) < 0 ||
        smtx_size(&r, 1, "nnz", INT64_MAX / 16, &nnz) < 0)
        goto fail;
    if (smtx_eol(&r, "'rows, cols, nnz'") < 0)
        goto fail;
    if (nnz > rows * cols) {
        /* Duplicates are errors, so no more than every cell. */
        rd_fail(&r, 1, "nnz %lld exceeds rows x cols = %lld", (long long)nnz,
                (long long)(rows * cols));
        goto fail;
    }
    if (check_bytes(&r, 1, o, ((double)rows + 1) * 8 + (double)nnz * 12) < 0)
        goto fail;
    a = sp_csr_new((int32_t)rows, (int32_t)cols, 0, e);
    if (a == NULL) {
        dt_err_prefix(e, "%s", r.name);
        goto fail;
    }
    a->pattern = 1;

    /* Line 2: rows + 1 offsets. */
    for (int64_t k = 0; k <= rows; k++) {
        int c = smtx_skip_blanks(&r);
        uint64_t v = 0;
        if (c == -2 || (c >= '0' && c <= '9' && smtx_uint(&r, &v) < 0))
            goto fail;
        if (c < '0' || c > '9') {
            if (c == -1 || c == '\n' || c == '\r')
                rd_fail(&r, 2, "expected %lld row offsets (rows + 1), found %lld",
                        (long long)rows + 1, (long long)k);
            else
                rd_fail(&r, 2, "row offset %lld: expected a number, found %s", (long long)k,
                        byte_desc(c, d));
            goto fail;
        }
        if (k == 0 && v != 0) {
            rd_fail(&r, 2, "first row offset is %llu, expected 0", (unsigned long long)v);
            goto fail;
        }
        if (v > (uint64_t)nnz) {
            rd_fail(&r, 2, "row offset %llu (row %lld) exceeds nnz %lld", (unsigned long long)v,
                    (long long)k - 1, (long long)nnz);
            goto fail;
        }
        if (k > 0 && (int64_t)v < a->rowptr[k - 1]) {
            rd_fail(&r, 2, "row offsets decrease at row %lld (%llu after %lld)", (long long)k - 1,
                    (unsigned long long)v, (long long)a->rowptr[k - 1]);
            goto fail;
        }
        a->rowptr[k] = (int64_t)v;
    }
    {
        int c = smtx_skip_blanks(&r);
        if (c >= '0' && c <= '9') {
            rd_fail(&r, 2, "more than the %lld row offsets expected (rows + 1)",
                    (long long)rows + 1);
            goto fail;
        }
    }
    if (smtx_eol(&r, "the row offsets") < 0)
        goto fail;
    if (a->rowptr[rows] != nnz) {
        rd_fail(&r, 2, "last row offset is %lld, expected nnz %lld", (long long)a->rowptr[rows],
                (long long)nnz);
        goto fail;
    }

    /* Line 3: nnz column indices. Preallocated only as far as the bytes left
     * can hold ("0 " per index), so a lying header costs nothing. */
    int64_t cap = nnz;
    int64_t bound = r.remaining >= 0 ? r.remaining / 2 + 1 : (1 << 16);
    if (cap > bound)
        cap = bound;
    int64_t have = cap ? cap : 1; /* room in a->col */
    {
        int32_t *col = malloc((size_t)have * sizeof *col);
        if (col == NULL) {
            rd_fail(&r, 3, "out of memory for %lld column indices", (long long)cap);
            goto fail;
        }
        free(a->col);
        a->col = col;
    }
    int32_t row = 0;
    for (int64_t k = 0; k < nnz; k++) {
        int c = smtx_skip_blanks(&r);
        uint64_t v = 0;
        if (c == -2 || (c >= '0' && c <= '9' && smtx_uint(&r, &v) < 0))
            goto fail;
        if (c < '0' || c > '9') {
            if (c == -1 || c == '\n' || c == '\r')
                rd_fail(&r, 3, "expected %lld column indices, found %lld", (long long)nnz,
                        (long long)k);
            else
                rd_fail(&r, 3, "column index %lld: expected a number, found %s", (long long)k,
                        byte_desc(c, d));
            goto fail;
        }
        while (a->rowptr[row + 1] <= k)
            row++;
        if (v >= (uint64_t)cols) {
            rd_fail(&r, 3, "column index %llu (row %d) out of range [0, %lld]",
                    (unsigned long long)v, row, (long long)cols - 1);
            goto fail;
        }
        if (k == have) {
            int64_t ncap = have < 8 ? 16 : have * 2;
            if (ncap > nnz)
                ncap = nnz;
            int32_t *col = realloc(a->col, (size_t)ncap * sizeof *col);
            if (col == NULL) {
                rd_fail(&r, 3, "out of memory for %lld column indices", (long long)ncap);
                goto fail;
            }
            a->col = col;
            have = ncap;
        }
        a->col[k] = (int32_t)v;
    }
    {
        int c = smtx_skip_blanks(&r);
        if (c >= '0' && c <= '9') {
            rd_fail(&r, 3, "more than the %lld column indices declared", (long long)nnz);
            goto fail;
        }
    }
    /* An empty matrix may stop after its offsets: then this sees the end. */
    if (smtx_eol(&r, "the column indices") < 0)
        goto fail;
    /* Only blank lines may follow. */
    for (;;) {
        int c = rd_peek(&r);
        if (c == -2)
            goto fail;
        if (c == -1)
            break;
        if (c == '\n')
            r.line++;
        else if (!is_blank(c) && c != '\r') {
            rd_fail(&r, r.line + 1, "unexpected %s after the column indices", byte_desc(c, d));
            goto fail;
        }
        r.pos++;
    }

    /* DLMC rows are sorted; sort any that are not, then duplicates are
     * errors since a pattern cannot hold a cell twice. */
    for (int64_t i = 0; i < rows; i++) {
        int32_t *cs = a->col + a->rowptr[i];
        int64_t len = a->rowptr[i + 1] - a->rowptr[i];
        int sorted = 1;
        for (int64_t k = 1; k < len && sorted; k++)
            sorted = cs[k] > cs[k - 1];
        if (sorted)
            continue;
        qsort(cs, (size_t)len, sizeof *cs, cmp_i32);
        for (int64_t k = 1; k < len; k++) {
            if (cs[k] == cs[k - 1]) {
                rd_fail(&r, 3, "duplicate column %d in row %lld", cs[k], (long long)i);
                goto fail;
            }
        }
    }
    {
        double *val = malloc((size_t)(nnz ? nnz : 1) * sizeof *val);
        if (val == NULL) {
            rd_fail(&r, 3, "out of memory for %lld values", (long long)nnz);
            goto fail;
        }
        for (int64_t k = 0; k < nnz; k++)
            val[k] = 1.0;
        free(a->val);
        a->val = val;
    }
    a->nnz = nnz;
    rd_close(&r);
    return a;
fail:
    sp_csr_free(a);
    rd_close(&r);
    return NULL;
}

sp_csr *sp_smtx_read(const char *path, const sp_read_opts *o, dt_err *e)
{
    char head[SP_INPUT_HEAD];
    size_t head_len;
    FILE *f = sp_input_open(path, head, &head_len, e);
    if (f == NULL)
        return NULL;
    sp_csr *a = sp_smtx_read_stream(f, sp_input_name(path), o, e);
    fclose(f);
    return a;
}

/* ---- writers -------------------------------------------------------------------- */

/* Output is assembled in a buffer and handed to fwrite in large pieces:
 * fprintf per entry costs more than formatting does. */
typedef struct wr {
    FILE *f;
    char *buf;
    size_t len;
    int failed;
} wr;

#define WR_BUF (1 << 16)

static void wr_flush(wr *w)
{
    if (w->len > 0 && !w->failed && fwrite(w->buf, 1, w->len, w->f) != w->len)
        w->failed = 1;
    w->len = 0;
}

/* Room for one more item of at most 128 bytes. */
static char *wr_room(wr *w)
{
    if (w->len + 128 > WR_BUF)
        wr_flush(w);
    return w->buf + w->len;
}

static void wr_uint(wr *w, uint64_t v, char sep)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    char *p = wr_room(w);
    for (int i = 0; i < n; i++)
        p[i] = tmp[n - 1 - i];
    p[n] = sep;
    w->len += (size_t)n + 1;
}

static void wr_double(wr *w, double v, char sep)
{
    char *p = wr_room(w);
    /* 17 significant digits always read back to the same double. */
    int n = snprintf(p, 100, "%.17g", v);
    p[n] = sep;
    w->len += (size_t)n + 1;
}

static void wr_text(wr *w, const char *s)
{
    size_t n = strlen(s);
    memcpy(wr_room(w), s, n); /* only short header lines come here */
    w->len += n;
}

static int wr_end(wr *w, dt_err *e)
{
    wr_flush(w);
    free(w->buf);
    if (!w->failed && fflush(w->f) != 0)
        w->failed = 1;
    if (w->failed)
        return dt_err_set(e, "write failed: %s", strerror(errno));
    return 0;
}

static int wr_begin(wr *w, FILE *f, dt_err *e)
{
    w->f = f;
    w->len = 0;
    w->failed = 0;
    w->buf = malloc(WR_BUF);
    if (w->buf == NULL)
        return dt_err_set(e, "out of memory for the write buffer");
    return 0;
}

int sp_mm_write_stream(const sp_csr *a, FILE *f, dt_err *e)
{
    wr w;
    if (wr_begin(&w, f, e) < 0)
        return -1;
    wr_text(&w, a->pattern ? "%%MatrixMarket matrix coordinate pattern general\n"
                           : "%%MatrixMarket matrix coordinate real general\n");
    wr_uint(&w, (uint64_t)a->rows, ' ');
    wr_uint(&w, (uint64_t)a->cols, ' ');
    wr_uint(&w, (uint64_t)a->nnz, '\n');
    for (int32_t i = 0; i < a->rows && !w.failed; i++) {
        for (int64_t k = a->rowptr[i]; k < a->rowptr[i + 1]; k++) {
            wr_uint(&w, (uint64_t)i + 1, ' ');
            if (a->pattern) {
                wr_uint(&w, (uint64_t)a->col[k] + 1, '\n');
            } else {
                wr_uint(&w, (uint64_t)a->col[k] + 1, ' ');
                wr_double(&w, a->val[k], '\n');
            }
        }
    }
    return wr_end(&w, e);
}

int sp_mm_write(const sp_csr *a, const char *path, dt_err *e)
{
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return dt_err_set(e, "%s: %s", path, strerror(errno));
    int rc = sp_mm_write_stream(a, f, e);
    if (fclose(f) != 0 && rc == 0)
        rc = dt_err_set(e, "write failed: %s", strerror(errno));
    if (rc < 0) {
        /* A truncated matrix would read as "file ends after ..." later, far
         * from the cause; leave nothing instead. */
        remove(path);
        return dt_err_prefix(e, "%s", path);
    }
    return 0;
}

int sp_mm_write_dense(FILE *f, const double *a, int32_t rows, int32_t cols, dt_err *e)
{
    wr w;
    if (wr_begin(&w, f, e) < 0)
        return -1;
    wr_text(&w, "%%MatrixMarket matrix array real general\n");
    wr_uint(&w, (uint64_t)rows, ' ');
    wr_uint(&w, (uint64_t)cols, '\n');
    size_t n = (size_t)rows * (size_t)cols;
    for (size_t k = 0; k < n && !w.failed; k++)
        wr_double(&w, a[k], '\n');
    return wr_end(&w, e);
}
