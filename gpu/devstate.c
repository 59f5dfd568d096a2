/* devstate.c -- finds state a kernel source keeps across launches: a
 * writable __device__ (or __managed__) variable at file scope. Such a
 * variable lives as long as the module, so a kernel can count its launches,
 * remember an answer or a flag, and behave differently once it is being
 * timed. The contract's scratch is the one place for data that outlives a
 * launch: the worker owns it and clears it.
 *
 * A text scan with comments and literals blanked out; used by the static
 * rules (agents/rules.c, "device-state") and by the worker's battery. */
#include "gpu/contract.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static int ident_char(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* The word w at p (bounded by non-identifier characters)? */
static int word_at(const char *base, const char *p, const char *w)
{
    size_t n = strlen(w);
    return strncmp(p, w, n) == 0 && (p == base || !ident_char(p[-1])) && !ident_char(p[n]);
}

int gpu_device_state(const char *src, char *name, size_t nlen, int *line)
{
    if (nlen)
        name[0] = '\0';
    *line = 0;
    if (src == NULL)
        return 0;
    char *code = dt_code_only(src);
    int found = 0;
    for (const char *p = code; *p && !found; p++) {
        int managed = word_at(code, p, "__managed__");
        if (!word_at(code, p, "__device__") && !managed)
            continue;
        /* The declaration runs to the first ';', '=', '{' or '(' : a '('
         * first makes it a function (or a lambda), not a variable. */
        const char *q = p;
        while (*q && !strchr(";={(", *q))
            q++;
        if (*q == '(' || *q == '{' || *q == '\0')
            continue;
        /* Read-only: const or constexpr with no pointer after it. */
        int ro = 0, star = 0;
        for (const char *r = p; r < q; r++) {
            if (word_at(code, r, "const") || word_at(code, r, "constexpr") ||
                word_at(code, r, "__constant__"))
                ro = 1;
            if (*r == '*')
                star = 1;
        }
        if (ro && !star && !managed)
            continue;
        /* The name: the last identifier before the first '[' (or the end). */
        const char *end = p;
        while (end < q && *end != '[')
            end++;
        while (end > p && !ident_char(end[-1]))
            end--;
        const char *start = end;
        while (start > p && ident_char(start[-1]))
            start--;
        if (nlen)
            snprintf(name, nlen, "%.*s", (int)(end - start), start);
        int ln = 1;
        for (const char *r = code; r < p; r++)
            ln += *r == '\n';
        *line = ln;
        found = 1;
    }
    free(code);
    return found;
}
