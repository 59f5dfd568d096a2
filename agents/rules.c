/* rules.c -- static checks on generated CUDA before it is compiled: cheap,
 * line-precise warnings about the mistakes kernels most often make
 * (barriers under divergence, shared memory read before a barrier, missing
 * row bounds, deprecated shuffles, full masks under divergence, 32-bit
 * index overflow, host APIs in device code, a changed launch contract).
 *
 * The checks are heuristics over the source text with comments and string
 * literals blanked out (line numbers kept); they aim to be right about what
 * they flag and say why, not to prove absence. Their ids match the pitfall
 * entries of the knowledge base, which carry the longer explanations. */
#include "agents/agents.h"
#include "gpu/contract.h"
#include "gpu/sandbox.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef struct rule_info {
    const char *id;
    const char *severity;
    const char *message;
    const char *explanation;
} rule_info;

static const rule_info rule_table[] = {
    {"barrier-divergent", "error", "__syncthreads() under thread-dependent control flow",
     "Every thread of the block must reach the same __syncthreads(); inside a branch (or after a "
     "return) that depends on threadIdx, some threads never arrive and the block hangs or the "
     "result is undefined. Move the barrier out of the branch and guard only the work."},
    {"smem-raw-no-barrier", "warning", "shared memory read after a write with no barrier between",
     "A thread reading a __shared__ element another thread wrote must wait for a __syncthreads() "
     "(or __syncwarp() within a warp) between the write and the read."},
    {"missing-row-bound", "error", "row index from blockIdx/threadIdx used without a bound check",
     "The grid is rounded up to whole blocks, so the last block has threads past the last row; "
     "compare the index with rows before touching rowptr, y or C."},
    {"shfl-no-sync", "error", "__shfl without _sync",
     "The unsynchronised __shfl* intrinsics were removed (CUDA 9+ / sm_70+ independent thread "
     "scheduling). Use __shfl_sync, __shfl_down_sync, ... with the mask of participating lanes."},
    {"full-mask-divergent", "warning", "full-warp mask 0xffffffff inside a thread-dependent branch",
     "A shuffle with mask 0xffffffff requires all 32 lanes to execute it; inside a branch on the "
     "lane or row index some lanes may not, which is undefined. Use __activemask() or restructure."},
    {"index-overflow", "warning", "32-bit product used as an index",
     "rows * n or i * k computed in int overflows past 2^31 elements (8 GB of fp32); cast one "
     "factor to size_t or long long before multiplying."},
    {"host-api-in-device", "error", "host API call in device code",
     "cudaMalloc, cudaMemcpy, cudaFree, file and C++ library calls cannot run in a kernel; the "
     "worker allocates and copies every buffer the launch contract names."},
    {"include-outside-sandbox", "error", "#include of a file outside ditto's kernel headers",
     "Generated code may include only ditto's own kernel headers (kernels/*.cuh, by bare name) "
     "and cuda_fp16.h / cuda_bf16.h. Absolute paths, '..', other headers and macros as header "
     "names are refused before the compiler sees them: the worker would otherwise read any file "
     "and quote it in compiler messages. Use the helpers of ditto.cuh or write the code inline."},
    {"contract-changed", "error", "the launch contract differs from the plan's",
     "The kernel's /*@contract*/ block (entry, parameters, format) is how the worker binds buffers; "
     "the generated source must keep the contract of the template the plan chose."},
    {"device-state", "error", "writable __device__ variable: state kept across launches",
     "A __device__ (or __managed__) variable that is not const lives as long as the module, so "
     "the kernel can count its launches, remember a flag or replay an earlier answer: it may "
     "behave differently when timed than when verified. The worker's battery fails such a "
     "kernel. Data that must outlive a launch belongs in the contract's scratch, which the "
     "worker owns and clears."},
};

static int line_of(const char *base, const char *p)
{
    int line = 1;
    for (const char *q = base; q < p; q++)
        line += *q == '\n';
    return line;
}

static int is_ident(char ch)
{
    return isalnum((unsigned char)ch) || ch == '_';
}

/* Find word w (whole identifier) at or after p. */
static const char *find_word(const char *p, const char *w)
{
    size_t len = strlen(w);
    for (const char *q = strstr(p, w); q; q = strstr(q + 1, w)) {
        int before = q == p ? 0 : 1;
        if ((before && is_ident(q[-1])) || is_ident(q[len]))
            continue;
        return q;
    }
    return NULL;
}

static void add(cJSON *out, const char *id, int line, const char *detail)
{
    const rule_info *ri = NULL;
    for (size_t i = 0; i < DT_ARRAY_LEN(rule_table); i++)
        if (strcmp(rule_table[i].id, id) == 0)
            ri = &rule_table[i];
    cJSON *f = dt_json_obj();
    dt_json_set_str(f, "id", id);
    dt_json_set_str(f, "severity", ri->severity);
    dt_json_set_int(f, "line", line);
    if (detail)
        dt_json_set_take(f, "message", cJSON_CreateString(detail));
    else
        dt_json_set_str(f, "message", ri->message);
    dt_json_set_str(f, "explanation", ri->explanation);
    dt_json_set_str(f, "source", "rule");
    cJSON_AddItemToArray(out, f);
}

/* Does the parenthesised condition starting at p ("(...)") mention thread
 * or lane identity, or a variable derived from it? */
static int thread_dependent(const char *cond, size_t len, char derived[][64], int nderived)
{
    static const char *ids[] = {"threadIdx", "laneid", "lane", "tid", "warp_id", "warpid"};
    char *c = dt_xstrndup(cond, len);
    int dep = 0;
    for (size_t i = 0; i < DT_ARRAY_LEN(ids) && !dep; i++)
        dep = find_word(c, ids[i]) != NULL;
    for (int i = 0; i < nderived && !dep; i++)
        dep = find_word(c, derived[i]) != NULL;
    free(c);
    return dep;
}

/* Variables assigned from expressions using threadIdx or blockIdx:
 * "int row = blockIdx.x * blockDim.x + threadIdx.x;" */
static int derived_vars(const char *code, char out[][64], int max)
{
    int n = 0;
    for (const char *p = code; (p = strstr(p, "threadIdx")) != NULL; p++) {
        const char *stmt = p;
        while (stmt > code && stmt[-1] != ';' && stmt[-1] != '{' && stmt[-1] != '}')
            stmt--;
        const char *eq = memchr(stmt, '=', (size_t)(p - stmt));
        if (eq == NULL || eq[1] == '=' || (eq > stmt && strchr("<>!=", eq[-1])))
            continue;
        const char *e = eq;
        while (e > stmt && isspace((unsigned char)e[-1]))
            e--;
        const char *b = e;
        while (b > stmt && is_ident(b[-1]))
            b--;
        if (e > b && (size_t)(e - b) < 64 && n < max) {
            memcpy(out[n], b, (size_t)(e - b));
            out[n][e - b] = '\0';
            int dup = 0;
            for (int i = 0; i < n; i++)
                dup |= strcmp(out[i], out[n]) == 0;
            if (!dup)
                n++;
        }
    }
    return n;
}

/* Matching close of the bracket at open (same kind), or NULL. */
static const char *match_close(const char *open)
{
    char o = *open, c = o == '(' ? ')' : o == '{' ? '}' : ']';
    int depth = 0;
    for (const char *p = open; *p; p++) {
        if (*p == o)
            depth++;
        else if (*p == c && --depth == 0)
            return p;
    }
    return NULL;
}

typedef struct region {
    const char *b, *e; /* the body of a thread-dependent branch */
} region;

/* Bodies of if/else/while/for whose condition is thread dependent, plus
 * everything after an early "return" guarded by such a condition. */
static int divergent_regions(const char *code, char derived[][64], int nd, region *out, int max,
                             const char **after_return)
{
    int n = 0;
    *after_return = NULL;
    static const char *kw[] = {"if", "while", "for"};
    for (size_t k = 0; k < DT_ARRAY_LEN(kw); k++) {
        for (const char *p = code; (p = find_word(p, kw[k])) != NULL; p++) {
            const char *open = p + strlen(kw[k]);
            while (isspace((unsigned char)*open))
                open++;
            if (*open != '(')
                continue;
            const char *close = match_close(open);
            if (close == NULL)
                continue;
            if (!thread_dependent(open, (size_t)(close - open), derived, nd))
                continue;
            const char *body = close + 1;
            while (isspace((unsigned char)*body))
                body++;
            const char *end;
            if (*body == '{') {
                end = match_close(body);
            } else {
                end = strchr(body, ';');
                /* "if (row >= rows) return;" -- the rest of the function
                 * runs without the threads that returned. */
                if (k == 0 && end && find_word(body, "return") == body && *after_return == NULL)
                    *after_return = end;
            }
            if (end && n < max) {
                out[n].b = body;
                out[n].e = end;
                n++;
            }
        }
    }
    return n;
}

static int inside(const region *r, int n, const char *p)
{
    for (int i = 0; i < n; i++)
        if (p >= r[i].b && p <= r[i].e)
            return 1;
    return 0;
}

static void check_barriers(const char *code, cJSON *out, region *reg, int nreg,
                           const char *after_return)
{
    for (const char *p = code; (p = strstr(p, "__syncthreads")) != NULL; p++) {
        if (inside(reg, nreg, p))
            add(out, "barrier-divergent", line_of(code, p), NULL);
        else if (after_return && p > after_return)
            add(out, "barrier-divergent", line_of(code, p),
                "__syncthreads() after a thread-dependent early return: the returned threads "
                "never reach it");
    }
}

static void check_shuffles(const char *code, cJSON *out, region *reg, int nreg)
{
    static const char *old[] = {"__shfl", "__shfl_up", "__shfl_down", "__shfl_xor"};
    for (size_t i = 0; i < DT_ARRAY_LEN(old); i++)
        for (const char *p = code; (p = find_word(p, old[i])) != NULL; p++)
            add(out, "shfl-no-sync", line_of(code, p), NULL);
    for (const char *p = code; (p = strstr(p, "_sync")) != NULL; p++) {
        const char *a = p + 5;
        while (isspace((unsigned char)*a))
            a++;
        if (*a != '(')
            continue;
        a++;
        while (isspace((unsigned char)*a))
            a++;
        if ((strncmp(a, "0xffffffff", 10) == 0 || strncmp(a, "0xFFFFFFFF", 10) == 0 ||
             strncmp(a, "FULL_MASK", 9) == 0) &&
            inside(reg, nreg, p))
            add(out, "full-mask-divergent", line_of(code, p), NULL);
    }
}

/* Is v compared with anything (v < x, x >= v, v == x, ...)? Shifts do not
 * count. */
static int compared(const char *code, const char *v)
{
    size_t len = strlen(v);
    for (const char *p = find_word(code, v); p; p = find_word(p + 1, v)) {
        const char *q = p + len;
        while (isspace((unsigned char)*q))
            q++;
        if (((*q == '<' || *q == '>') && q[1] != q[0]) || (q[0] == '=' && q[1] == '=') ||
            (q[0] == '!' && q[1] == '='))
            return 1;
        const char *b = p;
        while (b > code && isspace((unsigned char)b[-1]))
            b--;
        if (b > code && (b[-1] == '<' || b[-1] == '>') && !(b - 1 > code && b[-2] == b[-1]))
            return 1;
        if (b > code + 1 && b[-1] == '=' && strchr("<>=!", b[-2]))
            return 1;
    }
    return 0;
}

static void check_row_bound(const char *code, cJSON *out, char derived[][64], int nd)
{
    /* A thread-derived variable named like a row index must be compared
     * with something before it indexes an array. */
    for (int i = 0; i < nd; i++) {
        const char *v = derived[i];
        if (strstr(v, "row") == NULL && strcmp(v, "i") != 0 && strcmp(v, "r") != 0)
            continue;
        if (compared(code, v))
            continue;
        char pat[80];
        snprintf(pat, sizeof pat, "[%s", v);
        const char *use = strstr(code, pat);
        if (use != NULL)
            add(out, "missing-row-bound", line_of(code, use), NULL);
    }
}

static void check_index_overflow(const char *code, cJSON *out)
{
    /* "[a * b" or "[a * b + c" with plain identifiers and no cast. */
    for (const char *p = code; (p = strchr(p, '[')) != NULL; p++) {
        const char *q = p + 1;
        while (isspace((unsigned char)*q))
            q++;
        const char *a = q;
        while (is_ident(*q))
            q++;
        if (q == a || isdigit((unsigned char)*a))
            continue;
        while (isspace((unsigned char)*q))
            q++;
        if (*q != '*')
            continue;
        q++;
        while (isspace((unsigned char)*q))
            q++;
        const char *b = q;
        while (is_ident(*q))
            q++;
        if (q == b || isdigit((unsigned char)*b))
            continue;
        /* Sizes that are products of two problem dimensions are the ones that
         * overflow: rows, cols, n, k, nnz and their derived indices. */
        char an[64] = "", bn[64] = "";
        snprintf(an, sizeof an, "%.*s", (int)(b - a), a);
        snprintf(bn, sizeof bn, "%.*s", (int)(q - b), b);
        int big = strstr(an, "row") || strstr(bn, "row") || strcmp(bn, "n") == 0 ||
                  strcmp(bn, "k") == 0 || strcmp(bn, "N") == 0 || strcmp(bn, "K") == 0 ||
                  strstr(bn, "cols") || strstr(an, "cols");
        if (big)
            add(out, "index-overflow", line_of(code, p), NULL);
    }
}

static void check_host_api(const char *code, cJSON *out)
{
    static const char *apis[] = {"cudaMalloc", "cudaMemcpy", "cudaFree", "cudaMallocManaged",
                                 "cudaDeviceSynchronize", "fopen", "fprintf", "std::cout",
                                 "cudaStreamCreate", "cudaLaunchKernel"};
    for (size_t i = 0; i < DT_ARRAY_LEN(apis); i++)
        for (const char *p = code; (p = find_word(p, apis[i])) != NULL; p++) {
            char msg[160];
            snprintf(msg, sizeof msg, "%s in device code", apis[i]);
            add(out, "host-api-in-device", line_of(code, p), msg);
        }
}

static void check_shared_raw(const char *code, cJSON *out)
{
    /* Names of __shared__ arrays. */
    char names[16][64];
    int n = 0;
    for (const char *p = code; (p = strstr(p, "__shared__")) != NULL && n < 16; p++) {
        const char *s = p + 10;
        const char *br = strchr(s, '[');
        const char *semi = strchr(s, ';');
        if (br == NULL || (semi && semi < br))
            continue;
        const char *e = br;
        while (e > s && isspace((unsigned char)e[-1]))
            e--;
        const char *b = e;
        while (b > s && is_ident(b[-1]))
            b--;
        if (e > b && e - b < 64) {
            memcpy(names[n], b, (size_t)(e - b));
            names[n][e - b] = '\0';
            n++;
        }
    }
    for (int i = 0; i < n; i++) {
        /* Walk the statements: a write "name[...] =" arms, a barrier
         * disarms, a read "name[...]" not followed by '=' while armed is
         * flagged once. */
        int armed = 0;
        for (const char *p = code; *p; p++) {
            if (strncmp(p, "__syncthreads", 13) == 0 || strncmp(p, "__syncwarp", 10) == 0) {
                armed = 0;
                continue;
            }
            if (strncmp(p, names[i], strlen(names[i])) != 0 || (p > code && is_ident(p[-1])) ||
                p[strlen(names[i])] != '[')
                continue;
            const char *close = match_close(p + strlen(names[i]));
            if (close == NULL)
                break;
            /* &s[i] hands the address to an atomic: a read-modify-write the
             * hardware orders, not a plain read. */
            const char *prev = p;
            while (prev > code && isspace((unsigned char)prev[-1]))
                prev--;
            if (prev > code && prev[-1] == '&') {
                p = close;
                continue;
            }
            const char *after = close + 1;
            while (isspace((unsigned char)*after))
                after++;
            int write = (*after == '=' && after[1] != '=') ||
                        ((*after == '+' || *after == '-' || *after == '*') && after[1] == '=');
            if (write) {
                armed = 1;
            } else if (armed) {
                add(out, "smem-raw-no-barrier", line_of(code, p), NULL);
                armed = 0;
            }
            p = close;
        }
    }
}

static void include_refused(int line, const char *why, void *ud)
{
    add(ud, "include-outside-sandbox", line, why);
}

static void check_contract(const char *src, const cJSON *contract, cJSON *out)
{
    if (contract == NULL)
        return;
    gpu_contract have, want;
    dt_err e = {0};
    int line = 1;
    const char *b = strstr(src, "/*@contract");
    if (b)
        line = line_of(src, b);
    if (gpu_contract_from_source(src, &have, &e) != 0) {
        char msg[1100];
        snprintf(msg, sizeof msg, "the launch contract is missing or invalid: %s", e.msg);
        add(out, "contract-changed", line, msg);
        return;
    }
    if (gpu_contract_parse(contract, &want, &e) != 0) {
        gpu_contract_clear(&have);
        return; /* the plan's own contract is checked elsewhere */
    }
    char msg[512] = "";
    if (strcmp(have.entry, want.entry) != 0)
        snprintf(msg, sizeof msg, "entry '%s', the plan's is '%s'", have.entry, want.entry);
    else if (strcmp(have.format, want.format) != 0)
        snprintf(msg, sizeof msg, "format '%s', the plan's is '%s'", have.format, want.format);
    else if (have.nparams != want.nparams)
        snprintf(msg, sizeof msg, "%d parameters, the plan's contract has %d", have.nparams,
                 want.nparams);
    else
        for (int i = 0; i < have.nparams && !msg[0]; i++)
            if (strcmp(have.params[i], want.params[i]) != 0)
                snprintf(msg, sizeof msg, "parameter %d is '%s', the plan's is '%s'", i + 1,
                         have.params[i], want.params[i]);
    if (msg[0]) {
        char full[600];
        snprintf(full, sizeof full, "launch contract changed: %s", msg);
        add(out, "contract-changed", line, full);
    }
    gpu_contract_clear(&have);
    gpu_contract_clear(&want);
}

cJSON *ag_static_rules(const char *source, const cJSON *contract)
{
    cJSON *out = dt_json_arr();
    char *code = dt_code_only(source);
    char derived[32][64];
    int nd = derived_vars(code, derived, 32);
    region reg[128];
    const char *after_return = NULL;
    int nreg = divergent_regions(code, derived, nd, reg, 128, &after_return);
    check_barriers(code, out, reg, nreg, after_return);
    check_shuffles(code, out, reg, nreg);
    check_row_bound(code, out, derived, nd);
    check_index_overflow(code, out);
    check_host_api(code, out);
    check_shared_raw(code, out);
    check_contract(source, contract, out);
    {
        char name[64];
        int line = 0;
        if (gpu_device_state(source, name, sizeof name, &line)) {
            char d[160];
            snprintf(d, sizeof d, "writable __device__ variable '%s': state kept across launches",
                     name);
            add(out, "device-state", line, d);
        }
    }
    gpu_sandbox_scan(source, strlen(source), include_refused, out);
    free(code);
    return out;
}
