/* fuzz_text.c -- libFuzzer target: any bytes through the terminal and
 * UTF-8 sanitisers: what comes out carries no control character but tab
 * and newline, and is valid UTF-8. */
#include "core/core.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    dt_buf b = DT_BUF_INIT;
    dt_buf_put_term(&b, (const char *)data, size, size & 1);
    const unsigned char *s = (const unsigned char *)dt_buf_str(&b);
    for (size_t i = 0; i < b.len; i++) {
        unsigned c = s[i];
        if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
            abort();
        if (c == 0xc2 && i + 1 < b.len && s[i + 1] >= 0x80 && s[i + 1] < 0xa0)
            abort(); /* a C1 control as UTF-8 */
        if (c == '\n' && !(size & 1))
            abort();
    }
    char *fixed = dt_utf8_fix((const char *)s, b.len);
    if (fixed != NULL)
        abort(); /* already valid */
    dt_buf_free(&b);
    fixed = dt_utf8_fix((const char *)data, size);
    if (fixed != NULL) {
        if (dt_utf8_fix(fixed, strlen(fixed)) != NULL)
            abort();
        free(fixed);
    }
    return 0;
}
