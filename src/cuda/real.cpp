#include "cuda/real.h"

#include <dlfcn.h>
#include <link.h>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "track/modules.h"

#if defined(__clang__)
#define MG_NO_INSTRUMENT __attribute__((disable_sanitizer_instrumentation))
#else
#define MG_NO_INSTRUMENT __attribute__((no_sanitize("address", "thread", "undefined")))
#endif

namespace memguard::cuda {
namespace {

MG_NO_INSTRUMENT void* resolve_real_dlsym() noexcept;

}  // namespace
}  // namespace memguard::cuda

extern "C" {
// The real dlsym once resolved, else null. Read by memguard's own dlsym (interpose/lookup_hooks.cpp,
// a few instructions of assembly), which calls mg_resolve_real_dlsym when it is still null.
__attribute__((visibility("hidden"))) void* mg_real_dlsym_ptr = nullptr;

// A sanitizer's runtime finds the functions it intercepts with dlsym(RTLD_NEXT) while it
// initializes, before any constructor runs, and with libmemguard.so preloaded that dlsym is ours: the
// first call reaches mg_resolve_real_dlsym. So that path is built without sanitizer instrumentation
// (MG_NO_INSTRUMENT): in a libmemguard.so built with -fsanitize=thread its function-entry hook ran
// on ThreadSanitizer's thread state before that existed, and a TSan program crashed before main
// (tests/preload/sanitized_hosts_test.cpp, in the TSan job of .ci/run). It touches nothing but its
// own pointer and dlvsym.
__attribute__((visibility("hidden"))) MG_NO_INSTRUMENT void* mg_resolve_real_dlsym() {
    return memguard::cuda::resolve_real_dlsym();
}
}

namespace memguard::cuda {
namespace {

MG_NO_INSTRUMENT void* resolve_real_dlsym() noexcept {
    void* p = __atomic_load_n(&mg_real_dlsym_ptr, __ATOMIC_ACQUIRE);
    if (p) return p;
    // dlvsym is not interposed, and RTLD_NEXT from here is the object after libmemguard.so.
    p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!p) p = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    if (p) __atomic_store_n(&mg_real_dlsym_ptr, p, __ATOMIC_RELEASE);
    return p;
}

using DlsymFn = void* (*)(void*, const char*);

int collect_names(dl_phdr_info* info, size_t, void* arg) {
    // The main program (empty name) and the vDSO are skipped: the program's exported symbols are
    // already in RTLD_NEXT's scope, and the vDSO defines no CUDA functions.
    std::string name = info->dlpi_name ? info->dlpi_name : "";
    if (!name.empty() && name.find("linux-vdso") == std::string::npos) {
        static_cast<std::vector<std::string>*>(arg)->push_back(std::move(name));
    }
    return 0;
}

void* search_loaded_objects(const char* name) {
    std::vector<std::string> objects;
    dl_iterate_phdr(collect_names, &objects);  // no dlopen inside the callback: the loader lock is held
    for (const std::string& path : objects) {
        void* handle = dlopen(path.c_str(), RTLD_LAZY | RTLD_NOLOAD);
        if (!handle) continue;
        void* sym = real_dlsym(handle, name);
        dlclose(handle);
        if (sym && !is_ours(sym)) return sym;
    }
    return nullptr;
}

}  // namespace

void* real_dlsym(void* handle, const char* name) noexcept {
    auto fn = reinterpret_cast<DlsymFn>(resolve_real_dlsym());
    return fn ? fn(handle, name) : nullptr;
}

bool is_ours(const void* p) noexcept {
    static const track::TextRange self = track::object_range_of(reinterpret_cast<const void*>(&find_real));
    return self.contains(reinterpret_cast<uintptr_t>(p));
}

void* find_real(const char* name) noexcept {
    // The real dlsym, called from here: RTLD_NEXT is the object after libmemguard.so, and no
    // lookup of ours ever swaps the result for one of our wrappers (lookup_hooks.cpp).
    void* sym = real_dlsym(RTLD_NEXT, name);
    if (sym && !is_ours(sym)) return sym;
    return search_loaded_objects(name);
}

void report_missing(const char* name) noexcept {
    static std::mutex mu;
    static std::set<std::string>* seen = new std::set<std::string>();
    std::lock_guard<std::mutex> lock(mu);
    if (seen->insert(name).second) {
        MG_LOG_ERROR("no loaded library defines {}; returning an error to the caller", name);
    }
}

}  // namespace memguard::cuda
