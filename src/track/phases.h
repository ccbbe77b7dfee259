// Phases and marks (docs/report-format.md, minor 4): ids and the set of phases still open.
//
// A phase id is handed to whoever began the phase (the C API, the Python module, an NVTX range) and
// comes back when it ends. Only ids that are open end: an id never handed out, ended twice, or
// begun before a fork (the child has its own report) writes nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_set>

#include "format/vocabulary.h"

namespace memguard::track {

using format::phase_source_name;
using format::PhaseSource;  // format/vocabulary.h

/// Longest phase or mark name written (bytes); longer names are cut at a UTF-8 character boundary.
constexpr size_t kMaxPhaseName = 1024;
std::string_view cut_phase_name(std::string_view name) noexcept;

class PhaseTable {
public:
    /// A new id (from 1), open until close().
    uint64_t open();
    /// True (and the id is no longer open) when `id` was open.
    bool close(uint64_t id);
    size_t open_count();

    /// fork(2): the child forgets the parent's open phases (their B records are in the parent's
    /// report). Ids keep counting, so an id the parent handed out never names a child's phase.
    std::mutex& mutex() { return mu_; }
    void clear_open();

private:
    std::atomic<uint64_t> last_{0};
    std::mutex mu_;
    std::unordered_set<uint64_t> open_;
};

}  // namespace memguard::track
