/* url.c -- a URL fit to record: what a session or a log may keep of an
 * endpoint. Credentials ride in URLs more often than they should
 * (https://user:token@host/v1, ...?api_key=...), and nothing secret may be
 * written to a file, so the user-information part and the query and
 * fragment are dropped before an endpoint is recorded. */
#include "core/core.h"

#include <string.h>

int dt_url_redact(const char *url, char *out, size_t n)
{
    if (n == 0)
        return 0;
    out[0] = '\0';
    if (url == NULL)
        return 0;
    int cut = 0;
    const char *scheme = strstr(url, "://");
    const char *host = scheme ? scheme + 3 : url;
    /* the authority ends at the first '/', '?' or '#' */
    size_t alen = strcspn(host, "/?#");
    const char *at = NULL;
    for (size_t i = 0; i < alen; i++)
        if (host[i] == '@')
            at = host + i; /* the last '@' of the authority ends the user information */
    dt_buf b = DT_BUF_INIT;
    dt_buf_append(&b, url, (size_t)(host - url));
    if (at != NULL) {
        cut = 1;
        dt_buf_append(&b, at + 1, (size_t)(host + alen - (at + 1)));
    } else {
        dt_buf_append(&b, host, alen);
    }
    const char *rest = host + alen;
    size_t plen = strcspn(rest, "?#");
    dt_buf_append(&b, rest, plen);
    if (rest[plen] != '\0')
        cut = 1;
    snprintf(out, n, "%s", dt_buf_str(&b));
    dt_buf_free(&b);
    return cut;
}
