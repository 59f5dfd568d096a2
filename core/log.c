/* log.c -- leveled logging to stderr and clocks. */
#include "core.h"

#include <string.h>
#include <time.h>

static dt_log_level log_level = DT_LOG_WARN;
static char log_prefix[64] = "ditto";

void dt_log_set_level(dt_log_level level)
{
    log_level = level;
}

dt_log_level dt_log_get_level(void)
{
    return log_level;
}

void dt_log_set_prefix(const char *prefix)
{
    snprintf(log_prefix, sizeof log_prefix, "%s", prefix);
}

void dt_log(dt_log_level level, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > log_level)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so that lines from two processes sharing stderr do
     * not interleave mid-line. */
    dt_buf safe = DT_BUF_INIT;
    dt_buf_put_term(&safe, line, strlen(line), 1); /* messages quote data */
    fprintf(stderr, "%s: %s: %s\n", log_prefix, names[level], dt_buf_str(&safe));
    dt_buf_free(&safe);
}

double dt_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double dt_wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

const char *dt_iso_time(double epoch, char *out, size_t outlen)
{
    time_t t = (time_t)epoch;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, outlen, "%Y-%m-%dT%H:%M:%SZ", &tm);
    return out;
}
