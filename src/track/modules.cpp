#include "track/modules.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include "format/encode.h"
#include "track/event_sink.h"
#include "track/packed.h"

namespace memguard::track {
namespace {

struct Object {
    std::string path;
    uintptr_t bias = 0, lo = UINTPTR_MAX, hi = 0;
    std::string build_id;
};

std::string build_id_of(const dl_phdr_info* info) {
    static constexpr char hex[] = "0123456789abcdef";
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_NOTE) continue;
        auto* p = reinterpret_cast<const unsigned char*>(info->dlpi_addr + ph.p_vaddr);
        const unsigned char* end = p + ph.p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
            const unsigned char* name = p + sizeof(ElfW(Nhdr));
            const unsigned char* desc = name + ((nh->n_namesz + 3) & ~3u);
            const unsigned char* next = desc + ((nh->n_descsz + 3) & ~3u);
            if (next > end) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
                std::string id;
                for (unsigned j = 0; j < nh->n_descsz; ++j) {
                    id.push_back(hex[desc[j] >> 4]);
                    id.push_back(hex[desc[j] & 0xf]);
                }
                return id;
            }
            p = next;
        }
    }
    return {};
}

std::string self_exe_path() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

int collect(dl_phdr_info* info, size_t, void* arg) {
    auto* out = static_cast<std::vector<Object>*>(arg);
    Object o;
    o.bias = info->dlpi_addr;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        o.lo = std::min<uintptr_t>(o.lo, info->dlpi_addr + ph.p_vaddr);
        o.hi = std::max<uintptr_t>(o.hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    }
    if (o.lo >= o.hi) return 0;
    o.path = info->dlpi_name ? info->dlpi_name : "";
    o.build_id = build_id_of(info);
    out->push_back(std::move(o));
    return 0;
}

struct Find {
    uintptr_t addr;
    TextRange range;
};

int find_object(dl_phdr_info* info, size_t, void* arg) {
    auto* f = static_cast<Find*>(arg);
    TextRange r{UINTPTR_MAX, 0};
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        r.lo = std::min<uintptr_t>(r.lo, info->dlpi_addr + ph.p_vaddr);
        r.hi = std::max<uintptr_t>(r.hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
    }
    if (r.contains(f->addr)) {
        f->range = r;
        return 1;
    }
    return 0;
}

}  // namespace

TextRange object_range_of(const void* addr) {
    Find f{reinterpret_cast<uintptr_t>(addr), {}};
    dl_iterate_phdr(find_object, &f);
    return f.range;
}

bool ModuleMap::covered_locked(uintptr_t ip) const {
    auto it = std::upper_bound(ranges_.begin(), ranges_.end(), ip,
                               [](uintptr_t v, const Range& r) { return v < r.lo; });
    if (it == ranges_.begin()) return false;
    --it;
    return ip < it->hi;
}

void ModuleMap::refresh_locked(EventSink& out) {
    std::vector<Object> objects;
    dl_iterate_phdr(collect, &objects);
    for (Object& o : objects) {
        if (covered_locked(o.lo)) continue;
        if (o.path.empty()) o.path = self_exe_path();
        append_plain(out, format::rec::Module{next_id_++, o.lo, o.hi, o.bias, o.build_id, o.path});
        Range r{o.lo, o.hi};
        ranges_.insert(std::upper_bound(ranges_.begin(), ranges_.end(), r,
                                        [](const Range& a, const Range& b) { return a.lo < b.lo; }),
                       r);
    }
}

void ModuleMap::ensure_covered(const uintptr_t* ips, int n, EventSink& out) {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < n; ++i) {
        if (!covered_locked(ips[i])) {
            refresh_locked(out);
            return;
        }
    }
}

void ModuleMap::refresh(EventSink& out) {
    std::lock_guard<std::mutex> lock(mu_);
    refresh_locked(out);
}

void ModuleMap::clear() {
    ranges_.clear();
    next_id_ = 0;
}

}  // namespace memguard::track
