// The allocator's memory history (torch.cuda.memory._record_memory_history): a bounded ring of
// trace entries per device, written under that device's lock by the allocator itself, and the
// snapshot of a device's segments and blocks (torch.cuda.memory._snapshot()). Entries and blocks
// carry the allocator's site ids (the caller's opaque stack ids); whoever reads them turns those
// into frames, outside the lock. Standard library only, like the rest of the core.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "alloc/caching_allocator.h"

namespace memguard::alloc {

/// PyTorch's TraceEntry actions, in the words of its snapshot ("alloc", "free_requested", ...).
enum class TraceAction : uint8_t {
    Alloc,          // a block handed out (size: the request)
    FreeRequested,  // the caller freed a block (size: its request)
    FreeCompleted,  // the block is back in its pool (at once, or once its streams' events completed)
    SegmentAlloc,   // a device allocation joined the cache (size: the segment)
    SegmentFree,    // a cached segment went back to the device
    SegmentMap,     // expandable segments: pages mapped into a segment (addr, size: the range)
    SegmentUnmap,   // expandable segments: pages unmapped
    Snapshot,       // a snapshot was taken (size: the device's active bytes then)
    Oom,            // an allocation failed (addr: the device's free bytes, size: the rounded request)
};
constexpr int kNumTraceActions = 9;
const char* trace_action_name(TraceAction a) noexcept;
/// The action PyTorch names `name`; false when there is none.
bool trace_action_from_name(std::string_view name, TraceAction* out) noexcept;

/// When stacks are kept (PyTorch's RecordContext): State keeps them for live blocks and segments,
/// Alloc also for the trace's allocations, All also for its frees (the free's own stack).
enum class ContextLevel : uint8_t { Never, State, Alloc, All };

struct HistoryConfig {
    bool enabled = false;  // record trace entries (PyTorch's record_history)
    ContextLevel context = ContextLevel::Never;
    size_t max_entries = 1;  // the ring's capacity (at least 1)
    uint32_t skip_mask = 0;  // bit (1 << action): actions not recorded
    bool clear = false;      // drop the entries recorded so far (disabling always does)
};

struct TraceEntry {
    TraceAction action = TraceAction::Alloc;
    bool has_context = false;  // `site` names the stacks (else the entry has no frames)
    Stream stream = 0;
    uint64_t addr = 0;  // Oom: the device's free bytes
    uint64_t size = 0;
    int64_t time_us = 0;  // microseconds since the Unix epoch
    SiteId site = 0;
    MempoolId pool;
    /// torch.cuda.memory._set_memory_metadata's text when the entry was recorded (null: none).
    std::shared_ptr<const std::string> user_metadata;
};

/// The ring of one device. Not thread-safe: its device's lock guards it.
class TraceRing {
public:
    /// Recording costs one branch while history is off.
    bool enabled() const noexcept { return enabled_; }
    ContextLevel context() const noexcept { return context_; }
    void configure(const HistoryConfig& c);
    void record(TraceAction a, uint64_t addr, uint64_t size, Stream stream, SiteId site, bool has_context,
                MempoolId pool = {}) {
        if (__builtin_expect(enabled_, 0)) push(a, addr, size, stream, site, has_context, pool);
    }
    /// The entries, oldest first.
    std::vector<TraceEntry> entries() const;
    size_t size() const noexcept { return ring_.size(); }
    /// The text later entries carry as their user metadata ("" for none), as PyTorch's
    /// setUserMetadata: kept whether or not history records.
    void set_user_metadata(std::string text);
    std::string user_metadata() const { return metadata_ ? *metadata_ : std::string(); }

private:
    void push(TraceAction a, uint64_t addr, uint64_t size, Stream stream, SiteId site, bool has_context,
              MempoolId pool);

    std::vector<TraceEntry> ring_;
    size_t next_ = 0;  // the oldest entry once the ring is full
    size_t max_ = 1;
    uint32_t skip_ = 0;
    bool enabled_ = false;
    ContextLevel context_ = ContextLevel::Never;
    std::shared_ptr<const std::string> metadata_;  // null: none
};

/// A block of a segment, as _snapshot() lists it.
struct SnapshotBlock {
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t requested = 0;
    BlockInfo::State state = BlockInfo::State::Free;
    bool has_context = false;  // allocated (or pending) with stacks kept: `site` names them
    SiteId site = 0;
};

/// A segment (one device allocation) with its blocks, in address order.
struct SnapshotSegment {
    int device = 0;
    uint64_t address = 0;
    uint64_t total_size = 0;
    uint64_t allocated_size = 0;  // allocated blocks
    uint64_t active_size = 0;     // allocated or waiting for their streams' events
    uint64_t requested_size = 0;  // requests of the active blocks
    Stream stream = 0;
    bool large = false;  // from the large pool
    bool expandable = false;
    MempoolId pool;  // {0,0}: the default pools
    bool has_context = false;
    SiteId site = 0;  // the allocation that made the pool grow
    std::vector<SnapshotBlock> blocks;
};

/// One device's state at a moment: its segments by address and, when asked for, its trace.
struct DeviceSnapshot {
    std::vector<SnapshotSegment> segments;
    std::vector<TraceEntry> trace;
};

}  // namespace memguard::alloc
