// What the caching allocator says about itself: the report of a failed allocation, the block
// snapshot and the invariant checks of the tests.
#include "alloc/caching_allocator_internal.h"

#include <algorithm>
#include <string>

namespace memguard::alloc {

// ---------------------------------------------------------------------------------------------
// Reports

void DeviceCachingAllocator::fill_oom_report(OomReport* r, size_t requested, size_t size, size_t seg_size, int error,
                                             bool rescued) {
    *r = OomReport{};
    r->device = device_;
    r->error = error;
    r->requested = requested;
    r->rounded = size;
    r->segment_size = seg_size;
    r->allocated_bytes = static_cast<size_t>(stats_.allocated_bytes[kStatAll].current);
    r->reserved_bytes = static_cast<size_t>(stats_.reserved_bytes[kStatAll].current);
    r->limit_bytes = limit_ == SIZE_MAX ? 0 : limit_;
    r->over_limit = limit_ != SIZE_MAX && seg_size > 0 && r->reserved_bytes + seg_size > limit_;
    r->capture_underway = capture_underway();
    r->rescue_called = rescued;
    // cudaMemGetInfo is not on CUDA's list of capture-safe calls: not asked during a capture.
    if (!r->capture_underway) backend_.mem_info(device_, &r->device_free, &r->device_total);
    std::unordered_map<SiteId, SiteUsage> by_site;
    for (const auto& [base, seg] : segments_) {
        for (const Block* b = seg.head; b; b = b->next) {
            if (!b->allocated) continue;  // unmapped blocks never are
            SiteUsage& u = by_site[b->site];
            u.site = b->site;
            u.bytes += b->size;
            u.blocks++;
        }
    }
    for (const auto& [site, u] : by_site) r->live_by_site.push_back(u);
    std::sort(r->live_by_site.begin(), r->live_by_site.end(), [](const SiteUsage& a, const SiteUsage& b) {
        return a.bytes != b.bytes ? a.bytes > b.bytes : a.site < b.site;
    });
}

std::vector<BlockInfo> DeviceCachingAllocator::snapshot() const {
    std::lock_guard<FutexLock> lock(mu_);
    std::vector<BlockInfo> out;
    for (const auto& [base, seg] : segments_) {
        uintptr_t run = base;  // where the block's mapped run starts (an expandable segment has several)
        for (const Block* b = seg.head; b; b = b->next) {
            if (!b->mapped) continue;
            if (!b->prev || !b->prev->mapped) run = b->ptr;
            BlockInfo i;
            i.segment = run;
            i.expandable = b->expandable != nullptr;
            i.ptr = b->ptr;
            i.size = b->size;
            i.requested = b->requested;
            i.stream = b->stream;
            i.site = b->site;
            i.pool = b->pool->owner ? b->pool->owner->id : MempoolId{};
            i.small_pool = b->pool->small;
            i.state = b->allocated     ? BlockInfo::State::Allocated
                      : b->is_cached() ? BlockInfo::State::Free
                                       : BlockInfo::State::Pending;
            out.push_back(i);
        }
    }
    return out;
}

std::string DeviceCachingAllocator::check_invariants() const {
    std::lock_guard<FutexLock> lock(mu_);
    DeviceStats expect;
    size_t cached_seen = 0;
    size_t allocated_seen = 0;
    std::map<const PrivatePool*, int> pool_segments;
    auto add = [](StatArray& a, const BlockPool* p, int64_t d) {
        a[kStatAll].update(d);
        a[p->small ? kStatSmallPool : kStatLargePool].update(d);
    };
    size_t unmapped_seen = 0;
    for (const auto& [base, seg] : segments_) {
        if (seg.head == nullptr || seg.head->ptr != base || seg.head->prev != nullptr)
            return "segment head wrong at " + std::to_string(base);
        const ExpandableSegment* es = seg.expandable;
        if (!es) {
            add(expect.segment, seg.pool, 1);
            add(expect.reserved_bytes, seg.pool, static_cast<int64_t>(seg.size));
        } else if (es->base != base || es->size() != seg.size || es->handles.size() != es->pages) {
            return "expandable segment disagrees with its range at " + std::to_string(base);
        }
        if (seg.pool->owner) pool_segments[seg.pool->owner]++;
        uintptr_t at = base;
        size_t mapped_bytes = 0;
        const Block* last = nullptr;
        for (const Block* b = seg.head; b; last = b, b = b->next) {
            if (b->ptr != at) return "blocks do not tile segment " + std::to_string(base);
            if (b->prev != last) return "broken prev link in segment " + std::to_string(base);
            if (b->pool != seg.pool || b->stream != seg.head->stream) return "block pool/stream differs from segment";
            if (b->size == 0 || b->size % kMinBlockSize != 0) return "block size not a multiple of 512";
            if (b->expandable != es)
                return "block and segment disagree on being expandable at " + std::to_string(b->ptr);
            at += b->size;
            if (es) {
                // Mapped blocks lie on pages with physical memory, unmapped ones are whole pages without.
                const size_t first = (b->ptr - base) / es->page;
                const size_t past = (b->ptr + b->size - base + es->page - 1) / es->page;
                if (!b->mapped && ((b->ptr - base) % es->page != 0 || b->size % es->page != 0))
                    return "unmapped block not made of whole pages at " + std::to_string(b->ptr);
                for (size_t i = first; i < past && i < es->pages; ++i)
                    if ((es->handles[i] != 0) != b->mapped)
                        return "page " + std::to_string(i) + " of segment " + std::to_string(base) +
                               (b->mapped ? " has no physical memory under a mapped block"
                                          : " is mapped under an unmapped block");
                if (b->mapped) mapped_bytes += b->size;
            } else if (!b->mapped) {
                return "unmapped block in a cudaMalloc'ed segment at " + std::to_string(b->ptr);
            }
            if (!b->mapped) {
                unmapped_seen++;
                if (b->allocated || !b->is_cached()) return "unmapped block in use at " + std::to_string(b->ptr);
                if (!b->pool->unmapped.count(const_cast<Block*>(b)) || b->pool->blocks.count(const_cast<Block*>(b)))
                    return "unmapped block not in its pool's unmapped set at " + std::to_string(b->ptr);
                if (last && !last->mapped) return "two adjacent unmapped blocks at " + std::to_string(b->ptr);
                continue;
            }
            const bool in_pool = b->pool->blocks.count(const_cast<Block*>(b)) != 0;
            if (b->is_cached() != in_pool)
                return "cached block and pool membership disagree at " + std::to_string(b->ptr);
            if (b->is_cached()) {
                cached_seen++;
                if (last && last->mapped && last->is_cached())
                    return "two adjacent free blocks at " + std::to_string(b->ptr);
                if (b->is_split() && !es) {
                    add(expect.inactive_split, b->pool, 1);
                    add(expect.inactive_split_bytes, b->pool, static_cast<int64_t>(b->size));
                }
            } else {
                add(expect.active, b->pool, 1);
                add(expect.active_bytes, b->pool, static_cast<int64_t>(b->size));
            }
            if (b->allocated != (live_.find(b->ptr) == b)) {
                return "live-block map disagrees at " + std::to_string(b->ptr);
            }
            if (b->allocated) {
                allocated_seen++;
                add(expect.allocation, b->pool, 1);
                add(expect.allocated_bytes, b->pool, static_cast<int64_t>(b->size));
                add(expect.requested_bytes, b->pool, static_cast<int64_t>(b->requested));
            }
        }
        if (at != base + seg.size) return "blocks do not cover segment " + std::to_string(base);
        if (es) {
            if (mapped_bytes != es->mapped_bytes)
                return "expandable segment's mapped bytes wrong at " + std::to_string(base);
            add(expect.reserved_bytes, seg.pool, static_cast<int64_t>(mapped_bytes));
        }
    }
    if (expandable_.size() != static_cast<size_t>(std::count_if(segments_.begin(), segments_.end(), [](const auto& s) {
            return s.second.expandable != nullptr;
        })))
        return "expandable segments and the segment map disagree";
    size_t pooled = small_.blocks.size() + large_.blocks.size();
    size_t pooled_unmapped = small_.unmapped.size() + large_.unmapped.size();
    for (const auto& [id, p] : pools_) {
        pooled += p->small.blocks.size() + p->large.blocks.size();
        pooled_unmapped += p->small.unmapped.size() + p->large.unmapped.size();
        if (p->segments != pool_segments[p.get()]) return "private pool segment count wrong";
    }
    if (pooled != cached_seen) return "pool sets hold blocks that are not in any segment";
    if (pooled_unmapped != unmapped_seen) return "unmapped sets hold blocks that are not in any segment";
    if (live_.size() != allocated_seen) return "live-block map holds blocks that are not allocated";
    const std::pair<const char*, std::pair<const StatArray*, const StatArray*>> arrays[] = {
        {"segment", {&expect.segment, &stats_.segment}},
        {"reserved_bytes", {&expect.reserved_bytes, &stats_.reserved_bytes}},
        {"allocation", {&expect.allocation, &stats_.allocation}},
        {"allocated_bytes", {&expect.allocated_bytes, &stats_.allocated_bytes}},
        {"requested_bytes", {&expect.requested_bytes, &stats_.requested_bytes}},
        {"active", {&expect.active, &stats_.active}},
        {"active_bytes", {&expect.active_bytes, &stats_.active_bytes}},
        {"inactive_split", {&expect.inactive_split, &stats_.inactive_split}},
        {"inactive_split_bytes", {&expect.inactive_split_bytes, &stats_.inactive_split_bytes}},
    };
    for (const auto& [name, pair] : arrays)
        for (int t = 0; t < kNumStatTypes; ++t)
            if ((*pair.first)[t].current != (*pair.second)[t].current)
                return std::string("stat ") + name + "[" + std::to_string(t) + "] is " +
                       std::to_string((*pair.second)[t].current) + ", blocks say " +
                       std::to_string((*pair.first)[t].current);
    return "";
}

}  // namespace memguard::alloc
