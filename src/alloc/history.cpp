// The memory history's ring and the snapshot of a device (alloc/history.h).
#include "alloc/history.h"

#include <algorithm>
#include <chrono>

#include "alloc/caching_allocator_internal.h"

namespace memguard::alloc {

namespace {

constexpr const char* kActionNames[kNumTraceActions] = {
    "alloc",       "free_requested", "free_completed", "segment_alloc", "segment_free",
    "segment_map", "segment_unmap",  "snapshot",       "oom",
};

int64_t epoch_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

}  // namespace

const char* trace_action_name(TraceAction a) noexcept {
    const auto i = static_cast<size_t>(a);
    return i < kNumTraceActions ? kActionNames[i] : "?";
}

bool trace_action_from_name(std::string_view name, TraceAction* out) noexcept {
    for (int i = 0; i < kNumTraceActions; ++i) {
        if (name == kActionNames[i]) {
            *out = static_cast<TraceAction>(i);
            return true;
        }
    }
    return false;
}

// ---------------------------------------------------------------------------------------------
// The ring

void TraceRing::set_user_metadata(std::string text) {
    if (text.empty()) {
        metadata_.reset();
        return;
    }
    try {
        metadata_ = std::make_shared<const std::string>(std::move(text));
    } catch (...) {
        metadata_.reset();  // out of host memory: entries carry none
    }
}

void TraceRing::configure(const HistoryConfig& c) {
    enabled_ = c.enabled;
    context_ = c.enabled ? c.context : ContextLevel::Never;
    skip_ = c.skip_mask;
    const size_t max = std::max<size_t>(c.max_entries, 1);
    if (!c.enabled || c.clear || max != max_) {
        // Disabling or clearing drops the entries (as PyTorch does); a new capacity keeps the
        // newest ones that fit.
        std::vector<TraceEntry> keep;
        if (c.enabled && !c.clear) {
            keep = entries();
            if (keep.size() > max) keep.erase(keep.begin(), keep.end() - static_cast<ptrdiff_t>(max));
        }
        ring_.swap(keep);
        next_ = ring_.size() == max ? 0 : ring_.size();
        max_ = max;
    }
}

void TraceRing::push(TraceAction a, uint64_t addr, uint64_t size, Stream stream, SiteId site, bool has_context,
                     MempoolId pool) {
    if (skip_ & (1u << static_cast<unsigned>(a))) return;
    TraceEntry e;
    e.action = a;
    e.has_context = has_context;
    e.stream = stream;
    e.addr = addr;
    e.size = size;
    e.time_us = epoch_us();
    e.site = has_context ? site : 0;
    e.pool = pool;
    e.user_metadata = metadata_;
    if (ring_.size() < max_) {
        try {
            ring_.push_back(e);
        } catch (...) {
            // Out of host memory: the entry is lost, never the allocation.
        }
        next_ = ring_.size() == max_ ? 0 : ring_.size();
        return;
    }
    ring_[next_] = e;
    if (++next_ == max_) next_ = 0;
}

std::vector<TraceEntry> TraceRing::entries() const {
    std::vector<TraceEntry> out;
    out.reserve(ring_.size());
    if (ring_.size() < max_) {
        out = ring_;
        return out;
    }
    out.insert(out.end(), ring_.begin() + static_cast<ptrdiff_t>(next_), ring_.end());
    out.insert(out.end(), ring_.begin(), ring_.begin() + static_cast<ptrdiff_t>(next_));
    return out;
}

// ---------------------------------------------------------------------------------------------
// A device

void DeviceCachingAllocator::set_history(const HistoryConfig& config) {
    std::lock_guard<FutexLock> lock(mu_);
    trace_.configure(config);
}

void DeviceCachingAllocator::set_user_metadata(std::string text) {
    std::lock_guard<FutexLock> lock(mu_);
    trace_.set_user_metadata(std::move(text));
}

std::string DeviceCachingAllocator::user_metadata() const {
    std::lock_guard<FutexLock> lock(mu_);
    return trace_.user_metadata();
}

DeviceSnapshot DeviceCachingAllocator::take_snapshot(MempoolId pool, bool include_trace) {
    DeviceSnapshot out;
    std::lock_guard<FutexLock> lock(mu_);
    uint64_t total_active = 0;
    out.segments.reserve(segments_.size());
    for (const auto& [base, seg] : segments_) {  // by address
        const MempoolId owner = seg.pool->owner ? seg.pool->owner->id : MempoolId{};
        if (pool != MempoolId{} && owner != pool) continue;
        // An expandable segment is one segment per contiguous mapped run (as PyTorch reports it);
        // unmapped address space is left out.
        SnapshotSegment s;
        bool open = false;
        auto close = [&] {
            if (!open) return;
            total_active += s.active_size;
            out.segments.push_back(std::move(s));
            s = SnapshotSegment{};
            open = false;
        };
        for (const Block* b = seg.head; b; b = b->next) {
            if (!b->mapped) {
                close();
                continue;
            }
            if (!open) {
                open = true;
                s.device = device_;
                s.address = b->ptr;
                s.stream = seg.head->stream;
                s.large = !seg.pool->small;
                s.expandable = seg.expandable != nullptr;
                s.pool = owner;
                s.has_context = seg.context;
                s.site = seg.context ? seg.site : 0;
            }
            s.total_size += b->size;
            SnapshotBlock k;
            k.address = b->ptr;
            k.size = b->size;
            k.requested = b->requested;
            k.state = b->allocated     ? BlockInfo::State::Allocated
                      : b->is_cached() ? BlockInfo::State::Free
                                       : BlockInfo::State::Pending;
            k.has_context = b->context;
            k.site = b->context ? b->site : 0;
            if (b->allocated) s.allocated_size += b->size;
            if (k.state != BlockInfo::State::Free) {
                s.active_size += b->size;
                s.requested_size += b->requested;
            }
            s.blocks.push_back(k);
        }
        close();
    }
    trace_.record(TraceAction::Snapshot, 0, total_active, 0, 0, false);
    if (include_trace) out.trace = trace_.entries();
    return out;
}

// ---------------------------------------------------------------------------------------------
// All devices

void CachingAllocator::set_history(const HistoryConfig& config) {
    for (auto& d : devices_) d->set_history(config);
}

void CachingAllocator::set_user_metadata(int device, std::string text) {
    if (device >= 0 && device < device_count()) devices_[device]->set_user_metadata(std::move(text));
}

std::string CachingAllocator::user_metadata(int device) const {
    return device >= 0 && device < device_count() ? devices_[device]->user_metadata() : std::string();
}

DeviceSnapshot CachingAllocator::take_snapshot(int device, MempoolId pool, bool include_trace) {
    if (device < 0 || device >= device_count()) return {};
    return devices_[device]->take_snapshot(pool, include_trace);
}

}  // namespace memguard::alloc
