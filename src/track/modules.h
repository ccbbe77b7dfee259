// The module map written into the report (M records): every loaded ELF object with its address
// range, load bias and GNU build-id, so that stacks can be symbolized offline.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace memguard::track {

class EventSink;

class ModuleMap {
public:
    /// Makes sure every ip in ips[0..n) lies in a module already written to `out`; rescans the
    /// loaded objects (dl_iterate_phdr) and writes the new ones when one does not.
    void ensure_covered(const uintptr_t* ips, int n, EventSink& out);
    /// Writes every loaded module not written yet.
    void refresh(EventSink& out);

    void clear();
    std::mutex& mutex() { return mu_; }

private:
    struct Range {
        uintptr_t lo, hi;
    };
    bool covered_locked(uintptr_t ip) const;
    void refresh_locked(EventSink& out);

    std::mutex mu_;
    std::vector<Range> ranges_;  // sorted by lo
    uint32_t next_id_ = 0;
};

/// Address range [lo, hi) of the object containing `addr`, from dl_iterate_phdr; {0,0} if none.
struct TextRange {
    uintptr_t lo = 0, hi = 0;
    bool contains(uintptr_t ip) const noexcept { return ip >= lo && ip < hi; }
};
TextRange object_range_of(const void* addr);

}  // namespace memguard::track
