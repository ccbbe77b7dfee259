// Finds, at run time, the loaded module holding an address: its file, address range, load bias and
// GNU build-id (read from the mapped PT_NOTE segment, independently of the ELF file reader under test).
#pragma once

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>

#include "common/text.h"

namespace memguard::report::test {

struct LoadedModule {
    std::string path;
    uint64_t lo = 0, hi = 0, bias = 0;
    std::string build_id;

    /// The M record for this module with the given id, build-id (default: the real one) and path.
    std::string m_record(int id, const std::string* build_id_override = nullptr,
                         const std::string* path_override = nullptr) const {
        char buf[128];
        std::snprintf(buf, sizeof buf, "M %d %llx %llx %llx ", id, static_cast<unsigned long long>(lo),
                      static_cast<unsigned long long>(hi), static_cast<unsigned long long>(bias));
        const std::string& b = build_id_override ? *build_id_override : build_id;
        return buf + (b.empty() ? std::string("-") : b) + " " + text::encode(path_override ? *path_override : path) +
               "\n";
    }
};

namespace detail {

inline std::string note_build_id(const uint8_t* p, size_t size) {
    size_t pos = 0;
    while (pos + 12 <= size) {
        uint32_t namesz, descsz, type;
        std::memcpy(&namesz, p + pos, 4);
        std::memcpy(&descsz, p + pos + 4, 4);
        std::memcpy(&type, p + pos + 8, 4);
        size_t name = pos + 12, desc = name + ((namesz + 3) & ~3u);
        if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(p + name, "GNU", 4) == 0) {
            std::string hex;
            for (size_t i = 0; i < descsz; ++i) {
                char b[3];
                std::snprintf(b, sizeof b, "%02x", p[desc + i]);
                hex += b;
            }
            return hex;
        }
        pos = desc + ((descsz + 3) & ~3u);
    }
    return "";
}

struct Search {
    uint64_t addr;
    std::optional<LoadedModule> found;
};

inline int visit(dl_phdr_info* info, size_t, void* data) {
    auto* search = static_cast<Search*>(data);
    LoadedModule m;
    m.bias = info->dlpi_addr;
    bool first = true, inside = false;
    for (int i = 0; i < info->dlpi_phnum; ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type != PT_LOAD) continue;
        uint64_t start = m.bias + ph.p_vaddr, end = start + ph.p_memsz;
        m.lo = first ? start : std::min<uint64_t>(m.lo, start);
        m.hi = first ? end : std::max<uint64_t>(m.hi, end);
        first = false;
        inside = inside || (search->addr >= start && search->addr < end);
    }
    if (!inside) return 0;
    for (int i = 0; i < info->dlpi_phnum && m.build_id.empty(); ++i) {
        const ElfW(Phdr)& ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_NOTE) {
            m.build_id = note_build_id(reinterpret_cast<const uint8_t*>(m.bias + ph.p_vaddr), ph.p_filesz);
        }
    }
    m.path = info->dlpi_name != nullptr ? info->dlpi_name : "";
    if (m.path.empty()) {
        char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        m.path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : "";
    }
    search->found = m;
    return 1;
}

}  // namespace detail

inline std::optional<LoadedModule> module_of(const void* addr) {
    detail::Search search{reinterpret_cast<uint64_t>(addr), std::nullopt};
    dl_iterate_phdr(detail::visit, &search);
    return search.found;
}

}  // namespace memguard::report::test
