#include "cuda/real.h"

#include <dlfcn.h>
#include <link.h>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/log.h"
#include "interpose/driver_table.h"
#include "track/modules.h"

namespace memguard::interpose {
namespace {

const track::TextRange& self_range() {
    static const track::TextRange r = track::object_range_of(reinterpret_cast<const void*>(&find_real));
    return r;
}

bool is_ours(void* p) { return self_range().contains(reinterpret_cast<uintptr_t>(p)); }

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

}  // namespace memguard::interpose
