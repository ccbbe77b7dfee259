// THE definition of memguard's byte counts over time. Every view that shows live, mapped, reserved
// or physical bytes (summary, top, graphs, phases, diff, merge, plot, exports) walks
// Report::events with LevelWalk and reads its Levels: do not count bytes from the records again.
//
//   GPU live bytes   = live blocks of kind device, async or managed (A ... F)
//                    + physical bytes on devices (N records with device >= 0).
//   physical bytes   = the sizes of handles created (N) whose memory exists: a handle counts until
//                      it is released (n) AND no mapping of it remains (CUDA frees a released,
//                      mapped handle at its last cuMemUnmap).
//   mapped bytes     = the sizes of the mappings in place (Q until its q). With PyTorch's
//                      expandable segments this is torch.cuda.memory_reserved().
//   reserved bytes   = the sizes of reserved address ranges (V until its v).
//   tensor bytes     = allocator mode (minor 5): the block sizes of the tensor blocks handed to
//                      PyTorch (T until its t): torch.cuda.memory_allocated(). They live inside the
//                      segments (A blocks, torch.cuda.memory_reserved()), so they are never part of
//                      GPU live bytes.
//
// Events are applied in file order; the state "at time T" is the state after every event that
// precedes, in file order, the first event with t > T (docs/report-format.md, "Derived figures").
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "report/report.h"

namespace memguard::report {

constexpr size_t kKindCount = 4;
inline size_t kind_index(Kind k) { return static_cast<size_t>(k); }

/// The entry of key `device` in a std::map<int, V>, remembered for the next lookup of the same key:
/// a report names one device for long runs of events, and a map's nodes never move. A copy
/// remembers nothing (it would name the other map's node).
template <class V>
class DeviceEntry {
public:
    DeviceEntry() = default;
    DeviceEntry(const DeviceEntry&) {}
    DeviceEntry& operator=(const DeviceEntry&) {
        value_ = nullptr;
        return *this;
    }
    V& get(std::map<int, V>& m, int device) {
        if (value_ == nullptr || device_ != device) {
            value_ = &m[device];
            device_ = device;
        }
        return *value_;
    }
    /// The entry of `device` when it is the one remembered; else null.
    const V* peek(int device) const { return value_ != nullptr && device_ == device ? value_ : nullptr; }

private:
    int device_ = 0;
    V* value_ = nullptr;
};

struct Levels {
    uint64_t gpu_bytes = 0;                         // GPU live bytes (see above)
    uint64_t gpu_blocks = 0;                        // live blocks of the GPU kinds (handles not counted)
    std::array<uint64_t, kKindCount> kind_bytes{};  // live blocks, by Kind
    std::array<uint64_t, kKindCount> kind_blocks{};
    std::map<int, uint64_t> device_bytes;  // GPU live bytes by device (blocks and physical memory)
    uint64_t reserved_bytes = 0;
    uint64_t reservations = 0;  // live V ranges
    uint64_t mapped_bytes = 0;
    uint64_t mappings = 0;                 // mappings in place
    uint64_t physical_bytes = 0;           // every location (device or not)
    uint64_t physical_device_bytes = 0;    // on devices: the part of gpu_bytes that is physical memory
    uint64_t physical_handles = 0;         // handles whose memory exists
    uint64_t physical_device_handles = 0;  // of those, the ones on devices
    uint64_t tensor_bytes = 0;             // live T blocks (block sizes)
    uint64_t tensor_requested = 0;         // their requested sizes
    uint64_t tensor_blocks = 0;
};

/// Replays Report::events one at a time. Cheap to copy state out of; the report must outlive it.
/// The streaming reader (report/stream.h) drives it with apply() instead: each event as it is read,
/// its index naming a slot of Report::blocks or Report::tensors that is valid during the call.
class LevelWalk {
public:
    explicit LevelWalk(const Report& r);

    /// Applies the next event; returns false (and does nothing) when all are applied.
    bool step();
    /// Applies `e`, an event not from Report::events (the streaming reader's); the items it names
    /// must be in the report now. Counts towards applied().
    void apply(const Event& e);
    /// Applies events up to (not including) index `n`.
    void advance_to(size_t n);
    size_t applied() const { return applied_; }
    /// A fold (report/fold.h): the events counted before the fold's point, which the walk did not apply.
    void set_applied(size_t n) { applied_ = n; }
    bool done() const { return applied_ == r_.events.size(); }
    const Levels& levels() const { return levels_; }

    /// What the last step() changed in GPU live bytes: the device, when it changed them.
    std::optional<int> last_gpu_device() const { return last_gpu_device_; }
    /// True when the last step() changed gpu_bytes (up or down).
    bool last_changed_gpu() const { return last_gpu_device_.has_value(); }
    /// levels().device_bytes.at(*last_gpu_device()), mostly without a lookup; only when
    /// last_changed_gpu().
    uint64_t last_gpu_device_bytes() const {
        const uint64_t* v = device_level_.peek(*last_gpu_device_);
        return v != nullptr ? *v : levels_.device_bytes.at(*last_gpu_device_);
    }
    /// True when the last step() changed tensor_bytes.
    bool last_changed_tensor() const { return last_changed_tensor_; }

    bool block_live(size_t b) const { return b < block_live_.size() && block_live_[b] != 0; }
    /// The handle's physical memory exists (created, and not released-and-unmapped).
    bool handle_live(size_t h) const { return h < handle_live_.size() && handle_live_[h] != 0; }
    bool tensor_live(size_t i) const { return i < tensor_live_.size() && tensor_live_[i] != 0; }

private:
    // The byte levels held exactly: a report can hold sizes whose sum passes 2^64. Levels shows
    // each clamped at UINT64_MAX, so that it agrees with every view that sums the same blocks
    // saturating (add_to): a level that saturated and then went down would not.
    __extension__ typedef unsigned __int128 Exact;
    struct ExactLevels {
        Exact gpu_bytes = 0;
        std::array<Exact, kKindCount> kind_bytes{};
        std::map<int, Exact> device_bytes;
        Exact reserved_bytes = 0, mapped_bytes = 0, physical_bytes = 0, physical_device_bytes = 0;
        Exact tensor_bytes = 0, tensor_requested = 0;
    };
    static void add(uint64_t& shown, Exact& exact, uint64_t n);
    static void sub(uint64_t& shown, Exact& exact, uint64_t n);
    void add_device(int device, uint64_t n);
    void sub_device(int device, uint64_t n);
    DeviceEntry<uint64_t> device_level_;
    DeviceEntry<Exact> device_exact_;

    void set_block(size_t b, bool live);
    void set_handle_gone(size_t h);
    void set_tensor(size_t i, bool live);

    const Report& r_;
    size_t applied_ = 0;
    Levels levels_;
    ExactLevels exact_;
    std::optional<int> last_gpu_device_;
    bool last_changed_tensor_ = false;
    std::vector<char> block_live_;
    std::vector<char> handle_live_;
    std::vector<char> handle_released_;
    std::vector<uint64_t> handle_maps_;
    std::vector<char> mapping_live_;
    std::vector<char> reservation_live_;
    std::vector<char> tensor_live_;
};

}  // namespace memguard::report
