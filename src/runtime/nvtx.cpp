// NVTX v3 injection: NVTX ranges and marks become phases and marks in the report.
//
// NVTX v3 is header-only: every library that uses it (libtorch, NCCL, cuDNN, the program itself)
// has its own copy of the NVTX globals and, on its first NVTX call, looks for a tool in
// NVTX_INJECTION64_PATH, dlopen()s it and calls its InitializeInjectionNvtx2 with that copy's
// export table. The tool writes its own functions into the copy's callback slots; slots it leaves
// alone become no-ops. So memguard names itself in NVTX_INJECTION64_PATH from the library
// constructor (the dlopen of an already loaded library returns it), and fills the slots of every
// copy that initializes. A process that never calls NVTX never calls into this file.
//
// Push/pop ranges are per thread (and, as NVTX scopes them, per domain): source `nvtx`.
// Start/end ranges are process-wide and may end on another thread: source `nvtx_range`, the NVTX
// range id being memguard's phase id. Ranges of a named domain are called `domain::message`.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <dlfcn.h>
#include <limits.h>
#include <sys/stat.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/log.h"
#include "memguard/memguard.h"
#include "runtime/nvtx.h"
#include "runtime/process.h"
#include "track/recorder.h"

extern "C" int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get);

namespace memguard::runtime {
namespace {

using track::PhaseSource;

std::atomic<bool> g_nvtx_on{false};  // MEMGUARD_ENABLE and MEMGUARD_NVTX
std::atomic<int> g_instances{0};     // NVTX copies that attached to memguard

// Domains and registered strings: NVTX hands memguard's handles back on every call, so they must
// stay valid for the life of the process. Interned by name (repeated creation returns the same
// handle) and never freed, so their number is bounded by the distinct names a program uses.
struct Named {
    std::string name;
};
std::mutex g_names_mu;

Named* intern(std::unordered_map<std::string, Named*>& table, std::string name) {
    std::lock_guard<std::mutex> lock(g_names_mu);
    auto it = table.find(name);
    if (it != table.end()) return it->second;
    auto* n = new Named{name};
    table.emplace(std::move(name), n);
    return n;
}
std::unordered_map<std::string, Named*>& domains() {
    static auto* t = new std::unordered_map<std::string, Named*>();
    return *t;
}
std::unordered_map<std::string, Named*>& strings() {
    static auto* t = new std::unordered_map<std::string, Named*>();
    return *t;
}

/// wchar_t is UTF-32 on Linux. Invalid code points become U+FFFD; the result is cut at a bound
/// well above the longest name memguard writes.
std::string utf8(const wchar_t* w) {
    std::string out;
    if (!w) return out;
    for (size_t i = 0; w[i] != 0 && out.size() < 4 * track::kMaxPhaseName; ++i) {
        auto c = static_cast<uint32_t>(w[i]);
        if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) c = 0xFFFD;
        if (c < 0x80) {
            out.push_back(static_cast<char>(c));
        } else if (c < 0x800) {
            out.push_back(static_cast<char>(0xC0 | (c >> 6)));
            out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
        } else if (c < 0x10000) {
            out.push_back(static_cast<char>(0xE0 | (c >> 12)));
            out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
        } else {
            out.push_back(static_cast<char>(0xF0 | (c >> 18)));
            out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
            out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
        }
    }
    return out;
}

/// The message of an event's attributes (empty when it has none or the structure is too small
/// to hold one: the size field says how much of it the caller filled in).
std::string message_of(const nvtxEventAttributes_t* a) {
    constexpr size_t kNeeded = offsetof(nvtxEventAttributes_t, message) + sizeof(nvtxMessageValue_t);
    if (!a || a->size < kNeeded) return {};
    switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII: return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE: return utf8(a->message.unicode);
    case NVTX_MESSAGE_TYPE_REGISTERED:
        // Registered string handles are only ever made by memguard (nvtxDomainRegisterString*).
        return a->message.registered ? reinterpret_cast<const Named*>(a->message.registered)->name : "";
    default: return {};
    }
}

std::string full_name(nvtxDomainHandle_t domain, std::string message) {
    if (!domain) return message;
    return reinterpret_cast<const Named*>(domain)->name + "::" + message;
}

// --- push/pop: per thread, scoped to the domain ---------------------------------------------------
struct Pushed {
    nvtxDomainHandle_t domain;
    uint64_t phase;  // 0 when memguard was not recording at the push
};
thread_local std::vector<Pushed> t_pushed;

int level_of(nvtxDomainHandle_t domain) {
    int n = 0;
    for (const Pushed& p : t_pushed) n += p.domain == domain;
    return n;
}

int push(nvtxDomainHandle_t domain, std::string message) {
    int level = level_of(domain);
    uint64_t id = recorder().record_phase_begin(PhaseSource::Nvtx, full_name(domain, std::move(message)));
    t_pushed.push_back({domain, id});
    return level;
}

int pop(nvtxDomainHandle_t domain) {
    for (size_t i = t_pushed.size(); i-- > 0;) {
        if (t_pushed[i].domain != domain) continue;
        uint64_t id = t_pushed[i].phase;
        t_pushed.erase(t_pushed.begin() + static_cast<ptrdiff_t>(i));
        recorder().record_phase_end(id);
        return level_of(domain);
    }
    return -1;  // NVTX: a pop without a push is an error
}

nvtxRangeId_t start(nvtxDomainHandle_t domain, std::string message) {
    return recorder().record_phase_begin(PhaseSource::NvtxRange, full_name(domain, std::move(message)));
}

void mark(nvtxDomainHandle_t domain, std::string message) {
    recorder().record_mark(PhaseSource::Nvtx, full_name(domain, std::move(message)));
}

// --- the callbacks (NVTX_API is empty on Linux) -------------------------------------------------------
void MarkEx(const nvtxEventAttributes_t* a) { mark(nullptr, message_of(a)); }
void MarkA(const char* m) { mark(nullptr, m ? m : ""); }
void MarkW(const wchar_t* m) { mark(nullptr, utf8(m)); }
nvtxRangeId_t RangeStartEx(const nvtxEventAttributes_t* a) { return start(nullptr, message_of(a)); }
nvtxRangeId_t RangeStartA(const char* m) { return start(nullptr, m ? m : ""); }
nvtxRangeId_t RangeStartW(const wchar_t* m) { return start(nullptr, utf8(m)); }
void RangeEnd(nvtxRangeId_t id) { recorder().record_phase_end(id); }
int RangePushEx(const nvtxEventAttributes_t* a) { return push(nullptr, message_of(a)); }
int RangePushA(const char* m) { return push(nullptr, m ? m : ""); }
int RangePushW(const wchar_t* m) { return push(nullptr, utf8(m)); }
int RangePop() { return pop(nullptr); }

void DomainMarkEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { mark(d, message_of(a)); }
nvtxRangeId_t DomainRangeStartEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
    return start(d, message_of(a));
}
void DomainRangeEnd(nvtxDomainHandle_t, nvtxRangeId_t id) { recorder().record_phase_end(id); }
int DomainRangePushEx(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) { return push(d, message_of(a)); }
int DomainRangePop(nvtxDomainHandle_t d) { return pop(d); }
nvtxStringHandle_t DomainRegisterStringA(nvtxDomainHandle_t, const char* s) {
    return reinterpret_cast<nvtxStringHandle_t>(intern(strings(), s ? s : ""));
}
nvtxStringHandle_t DomainRegisterStringW(nvtxDomainHandle_t, const wchar_t* s) {
    return reinterpret_cast<nvtxStringHandle_t>(intern(strings(), utf8(s)));
}
nvtxDomainHandle_t DomainCreateA(const char* name) {
    return reinterpret_cast<nvtxDomainHandle_t>(intern(domains(), name ? name : ""));
}
nvtxDomainHandle_t DomainCreateW(const wchar_t* name) {
    return reinterpret_cast<nvtxDomainHandle_t>(intern(domains(), utf8(name)));
}
void DomainDestroy(nvtxDomainHandle_t) {}  // handles stay valid: see intern()

struct Slot {
    unsigned id;
    NvtxFunctionPointer fn;
};
template <typename F>
NvtxFunctionPointer fp(F f) {
    return reinterpret_cast<NvtxFunctionPointer>(f);
}

/// Writes memguard's functions into one module's slots of one NVTX copy. A copy built from older
/// headers has fewer slots (its table is shorter) and a slot may be absent (null): those are left.
bool fill(const NvtxExportTableCallbacks* etbl, NvtxCallbackModule module, const Slot* slots, size_t n) {
    NvtxFunctionTable table = nullptr;
    unsigned int size = 0;
    if (!etbl->GetModuleFunctionTable(module, &table, &size) || !table) return false;
    bool any = false;
    for (size_t i = 0; i < n; ++i) {
        if (slots[i].id >= size || !table[slots[i].id]) continue;
        *table[slots[i].id] = slots[i].fn;
        any = true;
    }
    return any;
}

bool same_file(const char* a, const char* b) {
    struct stat sa, sb;
    return ::stat(a, &sa) == 0 && ::stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/// Whether LD_PRELOAD (as the process started with it) names this file: a path entry that is the
/// same file, or a bare name equal to this file's base name (the loader searched for it).
bool named_in_ld_preload(const char* self) {
    const char* env = std::getenv("LD_PRELOAD");
    if (!env || !self) return false;
    const char* slash = std::strrchr(self, '/');
    std::string_view base = slash ? slash + 1 : self;
    std::string_view rest(env);
    while (!rest.empty()) {
        size_t end = rest.find_first_of(" :");
        std::string entry(rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        if (entry.empty()) continue;
        if (entry.find('/') != std::string::npos ? same_file(entry.c_str(), self) : entry == base) return true;
    }
    return false;
}

/// Set once by register_nvtx_injection (the library constructor): this copy of libmemguard.so
/// was preloaded, not dlopen()ed into a running program (allocator mode by hand) or by NVTX into
/// a process without LD_PRELOAD (a child that dropped it but inherited NVTX_INJECTION64_PATH),
/// where no CUDA call is interposed. A dlsym(RTLD_DEFAULT) self-check cannot tell: called from
/// inside a library loaded RTLD_LOCAL, it searches that library too.
std::atomic<bool> g_preloaded{false};

bool preloaded() { return g_preloaded.load(std::memory_order_acquire); }

}  // namespace

void register_nvtx_injection(bool enabled) {
    if (!enabled) return;
    Dl_info info{};
    if (!dladdr(reinterpret_cast<void*>(&InitializeInjectionNvtx2), &info) || !info.dli_fname) return;
    char resolved[PATH_MAX];
    const char* self = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
    g_preloaded.store(named_in_ld_preload(self), std::memory_order_release);
    const char* current = std::getenv("NVTX_INJECTION64_PATH");
    if (current && *current && !same_file(current, self)) {
        MG_LOG_INFO("NVTX_INJECTION64_PATH names another tool ({}); NVTX ranges are not recorded as phases",
                    echo_value(current));
        return;
    }
    g_nvtx_on.store(true, std::memory_order_release);
    // Only unset (or empty), and only when preloaded: the constructor of a preloaded library runs
    // before the program's threads exist, so setenv races with nothing. A library dlopen()ed into
    // a running program (allocator mode by hand) must not touch the environment: another thread
    // may be reading it.
    if ((!current || !*current) && preloaded()) setenv("NVTX_INJECTION64_PATH", self, 1);
}

int nvtx_instances() { return g_instances.load(std::memory_order_relaxed); }

}  // namespace memguard::runtime

/// NVTX's entry point, called once per NVTX copy (concurrently from different threads for
/// different copies). Returning 0 turns that copy's NVTX calls into no-ops.
extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get) {
    using namespace memguard::runtime;
    ensure_initialized();
    if (!g_nvtx_on.load(std::memory_order_acquire) || !get) return 0;
    if (!preloaded()) {
        MG_LOG_INFO("NVTX loaded libmemguard.so into a process that does not preload it; NVTX is not recorded");
        return 0;
    }
    auto* etbl = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
    constexpr size_t kNeeded = offsetof(NvtxExportTableCallbacks, GetModuleFunctionTable) + sizeof(void*);
    if (!etbl || etbl->struct_size < kNeeded || !etbl->GetModuleFunctionTable) return 0;

    static const Slot core[] = {
        {NVTX_CBID_CORE_MarkEx, fp(&MarkEx)},
        {NVTX_CBID_CORE_MarkA, fp(&MarkA)},
        {NVTX_CBID_CORE_MarkW, fp(&MarkW)},
        {NVTX_CBID_CORE_RangeStartEx, fp(&RangeStartEx)},
        {NVTX_CBID_CORE_RangeStartA, fp(&RangeStartA)},
        {NVTX_CBID_CORE_RangeStartW, fp(&RangeStartW)},
        {NVTX_CBID_CORE_RangeEnd, fp(&RangeEnd)},
        {NVTX_CBID_CORE_RangePushEx, fp(&RangePushEx)},
        {NVTX_CBID_CORE_RangePushA, fp(&RangePushA)},
        {NVTX_CBID_CORE_RangePushW, fp(&RangePushW)},
        {NVTX_CBID_CORE_RangePop, fp(&RangePop)},
    };
    static const Slot core2[] = {
        {NVTX_CBID_CORE2_DomainMarkEx, fp(&DomainMarkEx)},
        {NVTX_CBID_CORE2_DomainRangeStartEx, fp(&DomainRangeStartEx)},
        {NVTX_CBID_CORE2_DomainRangeEnd, fp(&DomainRangeEnd)},
        {NVTX_CBID_CORE2_DomainRangePushEx, fp(&DomainRangePushEx)},
        {NVTX_CBID_CORE2_DomainRangePop, fp(&DomainRangePop)},
        {NVTX_CBID_CORE2_DomainRegisterStringA, fp(&DomainRegisterStringA)},
        {NVTX_CBID_CORE2_DomainRegisterStringW, fp(&DomainRegisterStringW)},
        {NVTX_CBID_CORE2_DomainCreateA, fp(&DomainCreateA)},
        {NVTX_CBID_CORE2_DomainCreateW, fp(&DomainCreateW)},
        {NVTX_CBID_CORE2_DomainDestroy, fp(&DomainDestroy)},
    };
    bool core_ok = fill(etbl, NVTX_CB_MODULE_CORE, core, sizeof(core) / sizeof(core[0]));
    bool core2_ok = fill(etbl, NVTX_CB_MODULE_CORE2, core2, sizeof(core2) / sizeof(core2[0]));
    if (!core_ok && !core2_ok) return 0;

    if (auto* version = static_cast<const NvtxExportTableVersionInfo*>(get(NVTX_ETID_VERSIONINFO))) {
        constexpr size_t kVersionNeeded = offsetof(NvtxExportTableVersionInfo, SetInjectionNvtxVersion) + sizeof(void*);
        if (version->struct_size >= kVersionNeeded && version->SetInjectionNvtxVersion) {
            version->SetInjectionNvtxVersion(NVTX_VERSION);
        }
    }
    int n = g_instances.fetch_add(1, std::memory_order_relaxed) + 1;
    MG_LOG_DEBUG("NVTX instance {} attached: ranges and marks are recorded as phases", n);
    return 1;
}
