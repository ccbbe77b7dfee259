// Stream captures and CUDA graphs as memguard sees them.
//
// CaptureView: the captures in progress, process-wide, readable without locks (a fixed array of
// slots with atomic fields; an atomic count makes "nothing is capturing" one load). The Python
// hook and the allocator read it; the capture hooks write it.
//
// GraphRegistry: which capture each graph and graph exec came from, and which execs are alive.
// Updated only by graph lifecycle calls (rare), so a mutex is fine.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "format/vocabulary.h"
#include "track/events.h"

namespace memguard::track {

/// CUDA's cudaStreamCaptureMode values (format/vocabulary.h).
using format::capture_mode_name;
using format::CaptureMode;

struct CaptureInfo {
    uint32_t id = 0;  // memguard's capture id, from 1; 0: none
    uintptr_t stream = 0;
    bool per_thread_stream = false;
    CaptureMode mode = CaptureMode::Global;
    uint64_t tid = 0;  // thread that began the capture
};

class CaptureView {
public:
    static constexpr int kSlots = 64;

    /// Registers a capture that began on `stream` in thread `tid`; returns its new id, or 0 when
    /// every slot is taken (the capture is then untracked, and until it ends the thread's blocks
    /// are owned only through the stream their call names).
    uint32_t begin(StreamArg stream, CaptureMode mode, uint64_t tid) noexcept;
    /// The capture on `stream` (as seen from thread `tid`) ended; returns what it was (id 0 when
    /// it was not tracked).
    CaptureInfo end(StreamArg stream, uint64_t tid) noexcept;

    /// Number of captures in progress (one relaxed load).
    int active() const noexcept { return active_.load(std::memory_order_acquire); }

    /// The capture in progress on `stream`, or the most recent one begun by thread `tid`.
    CaptureInfo owner_for(StreamArg stream, uint64_t tid) const noexcept;

    /// CUDA's rule for "potentially unsafe" calls (cudaMalloc, cudaFree, ...) from thread `tid`
    /// whose capture interaction mode is `thread_mode`: prohibited if the thread has a capture in
    /// progress not begun in relaxed mode (unless the thread is relaxed), or, in global mode, if
    /// any other thread has a global-mode capture in progress. Returns the capture that makes the
    /// call unsafe (id 0 when the call is allowed).
    CaptureInfo prohibiting(uint64_t tid, CaptureMode thread_mode) const noexcept;

    void clear() noexcept;

private:
    struct Slot {
        std::atomic<uint32_t> id{0};
        std::atomic<uint64_t> seq{0};  // begin order, to find the most recent
        std::atomic<uintptr_t> stream{0};
        std::atomic<bool> per_thread{false};
        std::atomic<int> mode{0};
        std::atomic<uint64_t> tid{0};
    };
    CaptureInfo read(const Slot& s, uint32_t id) const noexcept;
    static bool on_stream(const Slot& s, StreamArg stream, uint64_t tid) noexcept;

    Slot slots_[kSlots];
    std::atomic<int> active_{0};
    std::atomic<uint32_t> next_id_{1};
    std::atomic<uint64_t> next_seq_{1};
};

/// The calling thread's capture interaction mode (cudaThreadExchangeStreamCaptureMode).
CaptureMode thread_capture_mode() noexcept;
void set_thread_capture_mode(CaptureMode m) noexcept;

class GraphRegistry {
public:
    void captured(uintptr_t graph, uint32_t capture_id);
    /// Returns the capture the graph came from (0 if none memguard saw).
    uint32_t instantiated(uintptr_t exec, uintptr_t graph);
    /// Returns the capture of the destroyed exec (0 if none).
    uint32_t exec_destroyed(uintptr_t exec);
    void graph_destroyed(uintptr_t graph);
    /// A live exec instantiated from a graph of capture `capture_id`, or 0 when there is none.
    uintptr_t live_exec_of(uint32_t capture_id) const;

    void clear();
    std::mutex& mutex() { return mu_; }

private:
    mutable std::mutex mu_;
    std::unordered_map<uintptr_t, uint32_t> graph_capture_;
    std::unordered_map<uintptr_t, uint32_t> exec_capture_;
    std::unordered_map<uint32_t, uint32_t> live_execs_;  // capture id -> number of live execs
};

}  // namespace memguard::track
