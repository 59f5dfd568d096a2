// cupti_shim.cpp -- CUPTI range-profiler metrics; the project's one C++ file.
//
// C++ only because cupti_profiler_host.h includes <string>. libcupti is loaded with
// dlopen and every CUPTI call goes through a pointer, so the worker runs (and says why
// there are no metrics) where CUPTI is absent. The sequence is the one that worked on an
// H200 (shared/reference/API-NOTES.md section 1): profiler initialise, chip name, counter
// availability, host object with the metrics, config image, range profiler on the
// current context, counter data image, SetConfig with AutoRange + KernelReplay, Start /
// work / Stop until every pass is submitted, decode, evaluate each range, then disable
// and deinitialise on every path. No exceptions are thrown and nothing aborts: every
// failure becomes a readable reason.

// The C library and CUDA headers first, outside the extern "C" block below: in C++ they
// pull in C++ declarations (templates, overloads) that must not get C linkage. The
// project's headers then find their include guards set.
#include <dlfcn.h>
#include <link.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>
#include <cuda.h>

#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>

#include <exception>
#include <vector>

// The project's headers are C without extern "C" guards of their own.
extern "C" {
#pragma GCC diagnostic push
// gpu/contract.h names a field `requires`, a C++20 keyword; this file is C++17.
#pragma GCC diagnostic ignored "-Wc++20-compat"
#include "gpu/worker/baseline.h"
#pragma GCC diagnostic pop
}

// Every CUPTI params struct is written {X_Params_STRUCT_SIZE}: the size field first, every
// other field zero (aggregate initialisation), as CUPTI requires. That is deliberate, so
// the warning about the fields left to zero is off here (the C build turns it off too).
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace {

// Every CUPTI function the shim calls. Optional ones may be missing from older or
// newer libraries; the shim then does without them.
#define GPU_CUPTI_FUNCS(X)                                                                       \
    X(cuptiGetResultString)                                                                      \
    X(cuptiProfilerInitialize)                                                                   \
    X(cuptiProfilerDeInitialize)                                                                 \
    X(cuptiDeviceGetChipName)                                                                    \
    X(cuptiProfilerGetCounterAvailability)                                                       \
    X(cuptiProfilerHostInitialize)                                                               \
    X(cuptiProfilerHostDeinitialize)                                                             \
    X(cuptiProfilerHostConfigAddMetrics)                                                         \
    X(cuptiProfilerHostGetConfigImageSize)                                                       \
    X(cuptiProfilerHostGetConfigImage)                                                           \
    X(cuptiProfilerHostGetNumOfPasses)                                                           \
    X(cuptiProfilerHostEvaluateToGpuValues)                                                      \
    X(cuptiRangeProfilerEnable)                                                                  \
    X(cuptiRangeProfilerDisable)                                                                 \
    X(cuptiRangeProfilerGetCounterDataSize)                                                      \
    X(cuptiRangeProfilerCounterDataImageInitialize)                                              \
    X(cuptiRangeProfilerSetConfig)                                                               \
    X(cuptiRangeProfilerStart)                                                                   \
    X(cuptiRangeProfilerStop)                                                                    \
    X(cuptiRangeProfilerDecodeData)                                                              \
    X(cuptiRangeProfilerGetCounterDataInfo)                                                      \
    X(cuptiRangeProfilerCounterDataGetRangeInfo)

#define GPU_CUPTI_OPTIONAL(X)                                                                    \
    X(cuptiGetErrorMessage)                                                                      \
    X(cuptiProfilerDeviceSupported)

struct Cupti {
    void *lib;
    char path[1024];
#define GPU_CUPTI_FIELD(name) decltype(&::name) name;
    GPU_CUPTI_FUNCS(GPU_CUPTI_FIELD)
    GPU_CUPTI_OPTIONAL(GPU_CUPTI_FIELD)
#undef GPU_CUPTI_FIELD
};

Cupti C;              // zero-initialised (static storage)
void *nvperf_host;    // libnvperf_host.so, preloaded (see preload_nvperf), never closed

// Up to this many kernels of one piece of work are profiled (AutoRange: one range per
// kernel); more are reported as dropped.
const size_t MAX_RANGES = 64;
// KernelReplay replays inside each launch, so one Start/Stop is expected; the bound only
// keeps a misbehaving library from looping forever.
const int MAX_PASSES = 64;

void say(char *why, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

void say(char *why, size_t len, const char *fmt, ...)
{
    if (why == nullptr || len == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, len, fmt, ap);
    va_end(ap);
}

// What a CUPTI status means for a user of the workbench, for the statuses that say the
// machine (not ditto) is the problem.
const char *hint(CUptiResult r)
{
    switch (r) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
        return "performance counters are restricted to admin users (RmProfilingAdminOnly=1)";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED:
        return "this virtualized device (vGPU or passthrough) does not support profiling";
    case CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES:
        return "the hypervisor does not allow performance counters on this virtual GPU";
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
        return "another profiler (ncu, nsys, cuda-gdb) is attached";
    case CUPTI_ERROR_HARDWARE_BUSY:
        return "the performance counters are in use by another process";
    case CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED:
        return "the GPU is in confidential-computing mode, which forbids profiling";
    case CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED:
        return "crypto-mining processors cannot be profiled";
    case CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED:
        return "this MIG instance cannot be profiled";
    case CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED:
        return "SLI configurations cannot be profiled";
    case CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED:
        return "profiling is not supported under WSL on this driver";
    case CUPTI_ERROR_INVALID_CHIP_NAME:
        return "this CUPTI does not know the GPU's chip (the GPU is newer than the CUPTI)";
    case CUPTI_ERROR_INVALID_METRIC_NAME:
        return "unknown metric (names need their rollup suffix, e.g. gpu__time_duration.sum)";
    case CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED:
    case CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED:
        return "the legacy event/metric profiler is in use in this process";
    default:
        return nullptr;
    }
}

// "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: performance counters are ... (in cuptiRangeProfilerEnable)"
void say_cupti(char *why, size_t len, const char *call, CUptiResult r)
{
    const char *name = nullptr, *text = hint(r);
    if (C.cuptiGetResultString != nullptr)
        C.cuptiGetResultString(r, &name);
    if (text == nullptr && C.cuptiGetErrorMessage != nullptr)
        C.cuptiGetErrorMessage(r, &text);
    char num[32];
    if (name == nullptr) {
        snprintf(num, sizeof num, "CUPTI error %d", (int)r);
        name = num;
    }
    // CUPTI 13's "error message" for many statuses is just the name again.
    if (text != nullptr && strcmp(text, name) == 0)
        text = nullptr;
    // Without libnvperf_host.so CUPTI fails in ways that do not name it.
    const char *nvperf = nvperf_host == nullptr ? "; libnvperf_host.so was not found beside "
                                                  "libcupti and must be on the loader path"
                                                : "";
    say(why, len, "%s%s%s (in %s)%s", name, text ? ": " : "", text ? text : "", call, nvperf);
}

bool is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

// CUPTI dlopens libnvperf_host.so by bare name when the profiler is first used. Loading
// it beforehand by full path from libcupti's own folder, RTLD_GLOBAL, means that later
// by-name load finds it already in the process even when that folder is not on the
// loader path.
void preload_nvperf(const char *cupti_path)
{
    if (nvperf_host != nullptr)
        return;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", cupti_path);
    char *slash = strrchr(dir, '/');
    if (slash == nullptr)
        return;
    *slash = '\0';
    char lib[1200];
    snprintf(lib, sizeof lib, "%s/libnvperf_host.so", dir);
    if (is_file(lib))
        nvperf_host = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
}

// One candidate: a path (or bare name for the loader's search). Appends why it failed.
bool try_load(const char *cand, std::vector<char> &tried)
{
    auto note = [&tried](const char *a, const char *b) {
        if (!tried.empty())
            tried.insert(tried.end(), {';', ' '});
        tried.insert(tried.end(), a, a + strlen(a));
        tried.insert(tried.end(), b, b + strlen(b));
    };
    if (strchr(cand, '/') != nullptr) {
        if (!is_file(cand)) {
            note(cand, ": no such file");
            return false;
        }
        preload_nvperf(cand);
    }
    void *lib = dlopen(cand, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        const char *w = dlerror();
        note(w ? w : cand, "");
        return false;
    }
    Cupti t = C;
#define GPU_CUPTI_RESOLVE(name)                                                                  \
    t.name = reinterpret_cast<decltype(t.name)>(dlsym(lib, #name));                              \
    if (t.name == nullptr) {                                                                     \
        note(cand, ": missing symbol " #name);                                                  \
        dlclose(lib);                                                                            \
        return false;                                                                            \
    }
    GPU_CUPTI_FUNCS(GPU_CUPTI_RESOLVE)
#undef GPU_CUPTI_RESOLVE
#define GPU_CUPTI_RESOLVE_OPT(name) t.name = reinterpret_cast<decltype(t.name)>(dlsym(lib, #name));
    GPU_CUPTI_OPTIONAL(GPU_CUPTI_RESOLVE_OPT)
#undef GPU_CUPTI_RESOLVE_OPT
    // The folder the loader really took it from (a bare name was searched for).
    struct link_map *lm = nullptr;
    const char *real = cand;
    if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) == 0 && lm != nullptr && lm->l_name && lm->l_name[0])
        real = lm->l_name;
    preload_nvperf(real);
    snprintf(t.path, sizeof t.path, "%s", real);
    t.lib = lib;
    C = t;
    return true;
}

// dlopen libcupti.so.13 (idempotent). Tried: $DITTO_LIBCUPTI, $CUDA_HOME/extras/CUPTI/
// lib64, $CUDA_HOME/lib64, the same two under /usr/local/cuda, then the loader's search.
bool load(char *why, size_t len)
{
    if (C.lib != nullptr)
        return true;
    std::vector<std::vector<char>> cands;
    auto add = [&cands](const char *a, const char *b) {
        char buf[1024];
        snprintf(buf, sizeof buf, "%s%s", a, b);
        cands.emplace_back(buf, buf + strlen(buf) + 1);
    };
    const char *env = getenv("DITTO_LIBCUPTI");
    if (env && *env)
        add(env, "");
    const char *home = getenv("CUDA_HOME");
    if (home && *home) {
        add(home, "/extras/CUPTI/lib64/libcupti.so.13");
        add(home, "/lib64/libcupti.so.13");
    }
    add("/usr/local/cuda", "/extras/CUPTI/lib64/libcupti.so.13");
    add("/usr/local/cuda", "/lib64/libcupti.so.13");
    add("libcupti.so.13", "");
    std::vector<char> tried;
    for (auto &c : cands)
        if (try_load(c.data(), tried))
            return true;
    tried.push_back('\0');
    say(why, len, "CUPTI not loaded: %s", tried.data());
    return false;
}

// The device ordinal of the current context (what cuptiDeviceGetChipName wants), found
// by comparing device handles rather than assuming a handle is its ordinal.
bool current(CUcontext *ctx, CUdevice *dev, size_t *ordinal, char *why, size_t len)
{
    char buf[256];
    CUresult r = CU(cuCtxGetCurrent)(ctx);
    if (r != CUDA_SUCCESS || *ctx == nullptr) {
        say(why, len, "no current CUDA context%s%s", r != CUDA_SUCCESS ? ": " : "",
            r != CUDA_SUCCESS ? gpu_cu_errstr(r, buf, sizeof buf) : "");
        return false;
    }
    int count = 0;
    if ((r = CU(cuCtxGetDevice)(dev)) != CUDA_SUCCESS ||
        (r = CU(cuDeviceGetCount)(&count)) != CUDA_SUCCESS) {
        say(why, len, "cannot query the context's device: %s",
            gpu_cu_errstr(r, buf, sizeof buf));
        return false;
    }
    for (int i = 0; i < count; i++) {
        CUdevice d = 0;
        if (CU(cuDeviceGet)(&d, i) == CUDA_SUCCESS && d == *dev) {
            *ordinal = (size_t)i;
            return true;
        }
    }
    say(why, len, "the current context's device is not among the %d devices", count);
    return false;
}

// Everything one probe or collection sets up, torn down in the reverse order by the
// destructor on every path out.
struct Session {
    bool initialized = false;
    CUdevice device = 0;
    CUpti_Profiler_Host_Object *host = nullptr;
    CUpti_RangeProfiler_Object *range = nullptr;
    char chip[64] = "";
    std::vector<uint8_t> availability;
    // The range profiler may use these until it is disabled: members, so that they are
    // destroyed only after the destructor body has disabled it.
    std::vector<uint8_t> config, counters;

    ~Session()
    {
        if (range != nullptr) {
            CUpti_RangeProfiler_Disable_Params p = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
            p.pRangeProfilerObject = range;
            C.cuptiRangeProfilerDisable(&p);
        }
        if (host != nullptr)
            host_free(host);
        if (initialized) {
            // Leaves no CUPTI hooks in the driver behind the timing harness.
            CUpti_Profiler_DeInitialize_Params p = {CUpti_Profiler_DeInitialize_Params_STRUCT_SIZE};
            C.cuptiProfilerDeInitialize(&p);
        }
    }

    static void host_free(CUpti_Profiler_Host_Object *h)
    {
        CUpti_Profiler_Host_Deinitialize_Params p = {
            CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
        p.pHostObject = h;
        C.cuptiProfilerHostDeinitialize(&p);
    }

    // A host object for this chip (and its counter availability).
    CUptiResult host_new(CUpti_Profiler_Host_Object **out) const
    {
        CUpti_Profiler_Host_Initialize_Params p = {
            CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
        p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
        p.pChipName = chip;
        p.pCounterAvailabilityImage = availability.empty() ? nullptr : availability.data();
        CUptiResult r = C.cuptiProfilerHostInitialize(&p);
        *out = r == CUPTI_SUCCESS ? p.pHostObject : nullptr;
        return r;
    }

    // Steps 2-4 of the sequence: initialise, chip name, counter availability.
    bool begin(CUcontext ctx, CUdevice dev, size_t ordinal, char *why, size_t len)
    {
        device = dev;
        CUpti_Profiler_Initialize_Params ip = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
        CUptiResult r = C.cuptiProfilerInitialize(&ip);
        if (r != CUPTI_SUCCESS) {
            say_cupti(why, len, "cuptiProfilerInitialize", r);
            return false;
        }
        initialized = true;
        CUpti_Device_GetChipName_Params cp = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
        cp.deviceIndex = ordinal;
        if ((r = C.cuptiDeviceGetChipName(&cp)) != CUPTI_SUCCESS) {
            say_cupti(why, len, "cuptiDeviceGetChipName", r);
            explain(why, len);
            return false;
        }
        snprintf(chip, sizeof chip, "%s", cp.pChipName ? cp.pChipName : "");
        // Twice: the size, then the image.
        CUpti_Profiler_GetCounterAvailability_Params ap = {
            CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
        ap.ctx = ctx;
        if ((r = C.cuptiProfilerGetCounterAvailability(&ap)) != CUPTI_SUCCESS) {
            say_cupti(why, len, "cuptiProfilerGetCounterAvailability", r);
            explain(why, len);
            return false;
        }
        availability.assign(ap.counterAvailabilityImageSize, 0);
        ap.pCounterAvailabilityImage = availability.data();
        if ((r = C.cuptiProfilerGetCounterAvailability(&ap)) != CUPTI_SUCCESS) {
            say_cupti(why, len, "cuptiProfilerGetCounterAvailability", r);
            explain(why, len);
            return false;
        }
        return true;
    }

    // After a failure: what cuptiProfilerDeviceSupported says about the device, appended
    // to why. Only then, because the sequence that worked did not gate on it, and a
    // "not supported" flag must not turn metrics off where they in fact work.
    void explain(char *why, size_t len) const
    {
        if (C.cuptiProfilerDeviceSupported == nullptr || why == nullptr || len == 0)
            return;
        CUpti_Profiler_DeviceSupported_Params p = {
            CUpti_Profiler_DeviceSupported_Params_STRUCT_SIZE};
        p.cuDevice = device;
        p.api = CUPTI_PROFILER_RANGE_PROFILING;
        if (C.cuptiProfilerDeviceSupported(&p) != CUPTI_SUCCESS ||
            p.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            return;
        const char *what = "the device cannot be profiled";
        if (p.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            what = "the GPU architecture does not support the range profiler";
        else if (p.vGpu == CUPTI_PROFILER_CONFIGURATION_DISABLED)
            what = "profiling is disabled on this vGPU";
        else if (p.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            what = "this virtualized device (vGPU) does not support profiling";
        else if (p.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            what = "the GPU is in confidential-computing mode, which forbids profiling";
        else if (p.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            what = "crypto-mining processors cannot be profiled";
        else if (p.sli != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            what = "SLI configurations cannot be profiled";
        else if (p.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED)
            what = "profiling is not supported under WSL on this driver";
        size_t used = strlen(why);
        snprintf(why + used, len - used, "; cuptiProfilerDeviceSupported: %s", what);
    }

    // Step 7: the range profiler on ctx.
    bool enable(CUcontext ctx, char *why, size_t len)
    {
        CUpti_RangeProfiler_Enable_Params p = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
        p.ctx = ctx;
        CUptiResult r = C.cuptiRangeProfilerEnable(&p);
        if (r != CUPTI_SUCCESS) {
            say_cupti(why, len, "cuptiRangeProfilerEnable", r);
            explain(why, len);
            return false;
        }
        range = p.pRangeProfilerObject;
        return true;
    }
};

// A metric name is checked on a host object of its own: an invalid name poisons later
// ConfigAddMetrics calls on the object it was added to (API-NOTES). Returns CUPTI_SUCCESS
// or the status that rejected it.
CUptiResult check_metric(const Session &s, const char *name)
{
    CUpti_Profiler_Host_Object *h = nullptr;
    CUptiResult r = s.host_new(&h);
    if (r != CUPTI_SUCCESS)
        return r;
    const char *names[1] = {name};
    CUpti_Profiler_Host_ConfigAddMetrics_Params p = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    p.pHostObject = h;
    p.ppMetricNames = names;
    p.numMetrics = 1;
    r = C.cuptiProfilerHostConfigAddMetrics(&p);
    Session::host_free(h);
    return r;
}

// Step 6: the config image for names on the session's host object.
bool config_image(Session &s, std::vector<const char *> &names, std::vector<uint8_t> &image,
                  char *why, size_t len)
{
    CUptiResult r = s.host_new(&s.host);
    if (r != CUPTI_SUCCESS) {
        say_cupti(why, len, "cuptiProfilerHostInitialize", r);
        return false;
    }
    CUpti_Profiler_Host_ConfigAddMetrics_Params ap = {
        CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
    ap.pHostObject = s.host;
    ap.ppMetricNames = names.data();
    ap.numMetrics = names.size();
    if ((r = C.cuptiProfilerHostConfigAddMetrics(&ap)) != CUPTI_SUCCESS) {
        say_cupti(why, len, "cuptiProfilerHostConfigAddMetrics", r);
        return false;
    }
    CUpti_Profiler_Host_GetConfigImageSize_Params sp = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    sp.pHostObject = s.host;
    if ((r = C.cuptiProfilerHostGetConfigImageSize(&sp)) != CUPTI_SUCCESS) {
        say_cupti(why, len, "cuptiProfilerHostGetConfigImageSize", r);
        return false;
    }
    image.assign(sp.configImageSize, 0);
    CUpti_Profiler_Host_GetConfigImage_Params gp = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    gp.pHostObject = s.host;
    gp.configImageSize = image.size();
    gp.pConfigImage = image.data();
    if ((r = C.cuptiProfilerHostGetConfigImage(&gp)) != CUPTI_SUCCESS) {
        say_cupti(why, len, "cuptiProfilerHostGetConfigImage", r);
        return false;
    }
    // Only informative: KernelReplay replays each kernel this many times.
    CUpti_Profiler_Host_GetNumOfPasses_Params np = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    np.configImageSize = image.size();
    np.pConfigImage = image.data();
    if (C.cuptiProfilerHostGetNumOfPasses(&np) == CUPTI_SUCCESS)
        dt_debug("cupti: %zu metrics on %s need %zu passes", names.size(), s.chip,
                 np.numOfPasses);
    return true;
}

// Step 8: a counter data image with room for MAX_RANGES ranges.
bool counter_image(Session &s, std::vector<const char *> &names, std::vector<uint8_t> &image,
                   char *why, size_t len)
{
    CUpti_RangeProfiler_GetCounterDataSize_Params sp = {
        CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
    sp.pRangeProfilerObject = s.range;
    sp.pMetricNames = names.data();
    sp.numMetrics = names.size();
    sp.maxNumOfRanges = MAX_RANGES;
    sp.maxNumRangeTreeNodes = (uint32_t)MAX_RANGES;
    CUptiResult r = C.cuptiRangeProfilerGetCounterDataSize(&sp);
    if (r != CUPTI_SUCCESS) {
        say_cupti(why, len, "cuptiRangeProfilerGetCounterDataSize", r);
        return false;
    }
    image.assign(sp.counterDataSize, 0);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params ip = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    ip.pRangeProfilerObject = s.range;
    ip.counterDataSize = image.size();
    ip.pCounterData = image.data();
    if ((r = C.cuptiRangeProfilerCounterDataImageInitialize(&ip)) != CUPTI_SUCCESS) {
        say_cupti(why, len, "cuptiRangeProfilerCounterDataImageInitialize", r);
        return false;
    }
    return true;
}

// Step 12 for one range: the values of names, added into sums. When the range cannot be
// evaluated as a whole, each metric is tried alone so one bad metric costs only itself.
void evaluate(Session &s, std::vector<uint8_t> &counters, size_t range,
              std::vector<const char *> &names, std::vector<double> &sums,
              std::vector<bool> &failed)
{
    CUpti_RangeProfiler_CounterData_GetRangeInfo_Params ip = {
        CUpti_RangeProfiler_CounterData_GetRangeInfo_Params_STRUCT_SIZE};
    ip.counterDataImageSize = counters.size();
    ip.pCounterDataImage = counters.data();
    ip.rangeIndex = range;
    ip.rangeDelimiter = "/";
    if (C.cuptiRangeProfilerCounterDataGetRangeInfo(&ip) == CUPTI_SUCCESS && ip.rangeName)
        dt_debug("cupti: range %zu is %s", range, ip.rangeName);

    std::vector<double> vals(names.size(), NAN);
    CUpti_Profiler_Host_EvaluateToGpuValues_Params ep = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    ep.pHostObject = s.host;
    ep.pCounterDataImage = counters.data();
    ep.counterDataImageSize = counters.size();
    ep.rangeIndex = range;
    ep.ppMetricNames = names.data();
    ep.numMetrics = names.size();
    ep.pMetricValues = vals.data();
    if (C.cuptiProfilerHostEvaluateToGpuValues(&ep) != CUPTI_SUCCESS) {
        for (size_t i = 0; i < names.size(); i++) {
            ep.ppMetricNames = &names[i];
            ep.numMetrics = 1;
            ep.pMetricValues = &vals[i];
            if (C.cuptiProfilerHostEvaluateToGpuValues(&ep) != CUPTI_SUCCESS)
                vals[i] = NAN;
        }
    }
    for (size_t i = 0; i < names.size(); i++) {
        if (isnan(vals[i]))
            failed[i] = true;
        else
            sums[i] += vals[i];
    }
}

int probe(char *why, size_t whylen)
{
    if (why != nullptr && whylen > 0)
        why[0] = '\0';
    if (!dev_ready()) {
        say(why, whylen, "no device is open");
        return -1;
    }
    if (!load(why, whylen))
        return -1;
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    size_t ordinal = 0;
    if (!current(&ctx, &dev, &ordinal, why, whylen))
        return -1;
    Session s;
    if (!s.begin(ctx, dev, ordinal, why, whylen))
        return -1;
    CUpti_Profiler_Host_Object *h = nullptr;
    CUptiResult r = s.host_new(&h);
    if (r != CUPTI_SUCCESS) {
        say_cupti(why, whylen, "cuptiProfilerHostInitialize", r);
        return -1;
    }
    Session::host_free(h);
    // Permission problems show up when the profiler attaches to the context.
    if (!s.enable(ctx, why, whylen))
        return -1;
    return 0;
}

int collect(const char *const *metrics, int nmetrics, dev_enqueue_fn fn, void *ud, double *values,
            char *why, size_t whylen)
{
    if (why != nullptr && whylen > 0)
        why[0] = '\0';
    if (nmetrics <= 0 || metrics == nullptr || values == nullptr || fn == nullptr) {
        say(why, whylen, "no metrics or no work to profile");
        return -1;
    }
    for (int i = 0; i < nmetrics; i++)
        values[i] = NAN;
    if (!dev_ready()) {
        say(why, whylen, "no device is open");
        return -1;
    }
    if (dev_poisoned()) {
        say(why, whylen, "the CUDA context is unusable after an earlier fault");
        return -1;
    }
    if (!load(why, whylen))
        return -1;
    CUcontext ctx = nullptr;
    CUdevice dev = 0;
    size_t ordinal = 0;
    if (!current(&ctx, &dev, &ordinal, why, whylen))
        return -1;
    Session s;
    if (!s.begin(ctx, dev, ordinal, why, whylen))
        return -1;

    // Keep the metrics CUPTI knows for this chip; the others stay NaN.
    std::vector<const char *> names;
    std::vector<int> index; // names[j] is metrics[index[j]]
    char first_bad[512] = "";
    for (int i = 0; i < nmetrics; i++) {
        const char *m = metrics[i] ? metrics[i] : "";
        CUptiResult r = check_metric(s, m);
        if (r == CUPTI_SUCCESS) {
            names.push_back(m);
            index.push_back(i);
        } else if (first_bad[0] == '\0') {
            // CUPTI 13 answers an unknown name with CUPTI_ERROR_INVALID_PARAMETER.
            char w[400];
            say_cupti(w, sizeof w, "cuptiProfilerHostConfigAddMetrics", r);
            snprintf(first_bad, sizeof first_bad, "'%s' is not a metric CUPTI knows for %s: %s", m,
                     s.chip, w);
        }
    }
    if (names.empty()) {
        say(why, whylen, "none of the %d metrics is available (%s)", nmetrics, first_bad);
        return -1;
    }
    if (first_bad[0] != '\0')
        dt_debug("cupti: skipping %s", first_bad);

    std::vector<uint8_t> &config = s.config, &counters = s.counters;
    if (!config_image(s, names, config, why, whylen) || !s.enable(ctx, why, whylen) ||
        !counter_image(s, names, counters, why, whylen))
        return -1;

    // Step 9: AutoRange (a range per kernel) with KernelReplay (CUPTI replays each kernel
    // for every pass the metrics need, saving and restoring the memory it writes).
    CUpti_RangeProfiler_SetConfig_Params cp = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    cp.pRangeProfilerObject = s.range;
    cp.configSize = config.size();
    cp.pConfig = config.data();
    cp.counterDataImageSize = counters.size();
    cp.pCounterDataImage = counters.data();
    cp.range = CUPTI_AutoRange;
    cp.replayMode = CUPTI_KernelReplay;
    cp.maxRangesPerPass = MAX_RANGES;
    cp.numNestingLevels = 1;
    cp.minNestingLevel = 1;
    cp.passIndex = 0;
    cp.targetNestingLevel = 1;
    CUptiResult r = C.cuptiRangeProfilerSetConfig(&cp);
    if (r != CUPTI_SUCCESS) {
        say_cupti(why, whylen, "cuptiRangeProfilerSetConfig", r);
        return -1;
    }

    // Work queued before Start must not land in a range.
    dt_err e = {};
    if (dev_sync(&e) != 0) {
        say(why, whylen, "%s", e.msg);
        return -1;
    }
    // Step 10.
    bool all = false;
    for (int pass = 0; pass < MAX_PASSES && !all; pass++) {
        CUpti_RangeProfiler_Start_Params st = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
        st.pRangeProfilerObject = s.range;
        if ((r = C.cuptiRangeProfilerStart(&st)) != CUPTI_SUCCESS) {
            say_cupti(why, whylen, "cuptiRangeProfilerStart", r);
            return -1;
        }
        int rc = fn(ud, dev_stream(), &e);
        if (rc == 0)
            rc = dev_check(CU(cuCtxSynchronize)(), "profiled work", &e);
        CUpti_RangeProfiler_Stop_Params sp = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
        sp.pRangeProfilerObject = s.range;
        CUptiResult sr = C.cuptiRangeProfilerStop(&sp);
        if (rc != 0) {
            say(why, whylen, "the profiled work failed: %s", e.msg);
            return -1;
        }
        if (sr != CUPTI_SUCCESS) {
            say_cupti(why, whylen, "cuptiRangeProfilerStop", sr);
            return -1;
        }
        all = sp.isAllPassSubmitted != 0;
    }
    if (!all) {
        say(why, whylen, "CUPTI still wanted passes after %d (cuptiRangeProfilerStop)", MAX_PASSES);
        return -1;
    }

    // Step 11.
    CUpti_RangeProfiler_DecodeData_Params dp = {CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    dp.pRangeProfilerObject = s.range;
    if ((r = C.cuptiRangeProfilerDecodeData(&dp)) != CUPTI_SUCCESS) {
        say_cupti(why, whylen, "cuptiRangeProfilerDecodeData", r);
        return -1;
    }
    if (dp.numOfRangeDropped > 0)
        dt_warn("cupti: %zu kernels beyond the first %zu were not profiled", dp.numOfRangeDropped,
                MAX_RANGES);
    CUpti_RangeProfiler_GetCounterDataInfo_Params ip = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    ip.pCounterDataImage = counters.data();
    ip.counterDataImageSize = counters.size();
    if ((r = C.cuptiRangeProfilerGetCounterDataInfo(&ip)) != CUPTI_SUCCESS) {
        say_cupti(why, whylen, "cuptiRangeProfilerGetCounterDataInfo", r);
        return -1;
    }
    if (ip.numTotalRanges == 0) {
        say(why, whylen, "the work launched no kernel (CUPTI profiles kernels, not copies or "
                         "memsets)");
        return -1;
    }

    // Step 12, summed over the ranges (one per kernel).
    std::vector<double> sums(names.size(), 0.0);
    std::vector<bool> failed(names.size(), false);
    for (size_t k = 0; k < ip.numTotalRanges; k++)
        evaluate(s, counters, k, names, sums, failed);
    // Counts (".sum") add up over kernels; rates and percentages (".avg",
    // ".pct", ".ratio", ...) do not: those are averaged over the ranges.
    for (size_t j = 0; j < names.size(); j++) {
        size_t len = strlen(names[j]);
        bool is_sum = len >= 4 && strcmp(names[j] + len - 4, ".sum") == 0;
        double v = is_sum ? sums[j] : sums[j] / (double)ip.numTotalRanges;
        values[index[j]] = failed[j] ? NAN : v;
    }
    return 0; // step 13 is the Session destructor
}

} // namespace

// The entry points: std::vector can throw (out of memory); nothing may escape into C.
extern "C" int gpu_cupti_probe(char *why, size_t whylen)
{
    try {
        return probe(why, whylen);
    } catch (const std::exception &x) {
        say(why, whylen, "CUPTI probe failed: %s", x.what());
    } catch (...) {
        say(why, whylen, "CUPTI probe failed: unknown C++ exception");
    }
    return -1;
}

extern "C" int gpu_cupti_collect(const char *const *metrics, int nmetrics, dev_enqueue_fn fn,
                                 void *ud, double *values, char *why, size_t whylen)
{
    try {
        return collect(metrics, nmetrics, fn, ud, values, why, whylen);
    } catch (const std::exception &x) {
        say(why, whylen, "CUPTI collection failed: %s", x.what());
    } catch (...) {
        say(why, whylen, "CUPTI collection failed: unknown C++ exception");
    }
    return -1;
}
