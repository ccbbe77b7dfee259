// Returning cached segments to the device (empty_cache, the retries of an allocation that ran
// out of memory, the memory fraction) and the private pools of graph captures.
#include "alloc/caching_allocator_internal.h"

#include <algorithm>

namespace memguard::alloc {

namespace {

constexpr int kErrorInvalidValue = 1;  // cudaErrorInvalidValue

}  // namespace

// ---------------------------------------------------------------------------------------------
// Returning segments

bool DeviceCachingAllocator::release_segment(Block* b) {
    if (backend_.segment_free(device_, reinterpret_cast<void*>(b->ptr)) != kSuccess) return false;
    BlockPool* pool = b->pool;
    if (trace_.enabled()) {
        const Segment& seg = segments_.at(b->ptr);
        trace_.record(TraceAction::SegmentFree, b->ptr, b->size, b->stream, seg.site, seg.context,
                      pool->owner ? pool->owner->id : MempoolId{});
    }
    pool->blocks.erase(b);
    if (pool->owner) pool->owner->segments--;
    auto seg = segments_.find(b->ptr);
    if (seg->second.oversize) stats_.oversize_segments.sub(1);
    segments_.erase(seg);
    stat_sub(stats_.segment, pool, 1);
    stat_sub(stats_.reserved_bytes, pool, b->size);
    stats_.num_device_free++;
    recycle(b);
    return true;
}

void DeviceCachingAllocator::release_pool_blocks(BlockPool& pool) {
    // Whole cudaMalloc'ed segments are freed; of expandable segments, the wholly free pages of
    // every free block are unmapped, and a segment left with nothing mapped gives back its range.
    std::vector<Block*> whole, expandable;
    for (Block* b : pool.blocks) {
        if (b->expandable)
            expandable.push_back(b);
        else if (!b->is_split())
            whole.push_back(b);
    }
    for (Block* b : whole) release_segment(b);
    // Unmapping changes the set and merges only with unmapped neighbours: the blocks gathered,
    // all mapped, stay valid.
    for (Block* b : expandable) {
        if (unmap_block(b) && !b->prev && !b->next) release_expandable_segment(b);
    }
    // A range whose first mapping failed (out of memory) has no mapped block: it goes too, so a
    // released private pool leaves nothing behind (PyTorch keeps such a range until it is used).
    std::vector<Block*> empty;
    for (Block* b : pool.unmapped)
        if (!b->prev && !b->next) empty.push_back(b);
    for (Block* b : empty) release_expandable_segment(b);
}

bool DeviceCachingAllocator::release_oversize_blocks(BlockPool& pool, Stream stream, size_t size) {
    if (config_.max_split_size == SIZE_MAX || pool.small) return false;
    // First the smallest single cached oversize block that covers the request, else the largest
    // ones of this stream until enough is returned.
    Block key;
    key.stream = stream;
    key.size = std::max(size, config_.max_split_size);
    auto it = pool.blocks.lower_bound(&key);
    // Expandable segments are never released here (PyTorch's rule): their pages go at the next
    // step, release_cached_blocks.
    if (it != pool.blocks.end() && (*it)->stream == stream && !(*it)->is_split() && !(*it)->expandable)
        return release_segment(*it);
    std::vector<Block*> candidates;
    for (auto r = std::make_reverse_iterator(it); r != pool.blocks.rend(); ++r) {
        Block* b = *r;
        if (b->stream != stream || b->size < config_.max_split_size) break;
        if (!b->is_split() && !b->expandable) candidates.push_back(b);
    }
    size_t released = 0;
    for (Block* b : candidates) {
        if (released >= size) break;
        const size_t n = b->size;
        if (release_segment(b)) released += n;
    }
    return released >= size;
}

bool DeviceCachingAllocator::release_cached_blocks() {
    if (capture_underway()) return false;
    synchronize_and_free_events();
    release_pool_blocks(large_);
    release_pool_blocks(small_);
    for (auto it = freeable_.begin(); it != freeable_.end();) {
        auto pit = pools_.find(*it);
        PrivatePool& p = *pit->second;
        release_pool_blocks(p.large);
        release_pool_blocks(p.small);
        const bool capturing_into = std::any_of(captures_.begin(), captures_.end(),
                                                [&](const Capture& c) { return c.id == p.id; });
        if (p.segments == 0 && p.use_count == 0 && !capturing_into) {
            pools_.erase(pit);
            it = freeable_.erase(it);
        } else {
            ++it;
        }
    }
    return true;
}

void DeviceCachingAllocator::garbage_collect() {
    // PyTorch's rule: over threshold * the fraction's bytes reserved, free cached whole segments
    // of the default large pool (not expandable ones) whose age (searches of the pool since each
    // was last handed out; a segment's first block was never handed out by a search, so it is as
    // old as the pool) is at least the average age, round after round, until the excess is freed
    // or nothing more can be; no synchronization (cached blocks have no events left).
    const auto threshold = static_cast<size_t>(config_.garbage_collection_threshold *
                                               static_cast<double>(fraction_bytes_));
    const auto reserved = static_cast<size_t>(stats_.reserved_bytes[kStatAll].current);
    if (reserved <= threshold) return;
    const size_t target = reserved - threshold;
    auto age = [&](const Block* b) { return large_.free_block_searches - b->gc_base; };
    std::vector<Block*> freeable;
    double total_age = 0.0;
    for (Block* b : large_.blocks) {
        if (!b->is_split() && !b->expandable) {
            freeable.push_back(b);
            total_age += static_cast<double>(age(b));
        }
    }
    size_t reclaimed = 0;
    bool freed = true;
    while (reclaimed < target && freed && !freeable.empty()) {
        const double average = total_age / static_cast<double>(freeable.size());
        freed = false;
        // Not stopping at the target within a round, as PyTorch: fewer collections later.
        std::vector<Block*> kept;
        for (Block* b : freeable) {
            const uint64_t a = age(b);
            const size_t size = b->size;
            if (static_cast<double>(a) >= average && release_segment(b)) {
                freed = true;
                reclaimed += size;
                total_age -= static_cast<double>(a);
            } else {
                kept.push_back(b);
            }
        }
        freeable.swap(kept);
    }
}

bool DeviceCachingAllocator::empty_cache() {
    std::lock_guard<FutexLock> lock(mu_);
    return release_cached_blocks();
}

int DeviceCachingAllocator::set_memory_fraction(double fraction) {
    if (!(fraction >= 0.0 && fraction <= 1.0)) return kErrorInvalidValue;
    size_t free_b = 0, total = 0;
    const int err = backend_.mem_info(device_, &free_b, &total);
    if (err != kSuccess) return err;
    std::lock_guard<FutexLock> lock(mu_);
    total_ = total;
    fraction_bytes_ = static_cast<size_t>(fraction * static_cast<double>(total));
    // As PyTorch's: 1.0 means no limit (its OOM message then names none).
    limit_ = fraction < 1.0 ? static_cast<size_t>(fraction * static_cast<double>(total)) : SIZE_MAX;
    return kSuccess;
}

double DeviceCachingAllocator::memory_fraction() const {
    std::lock_guard<FutexLock> lock(mu_);
    // PyTorch answers allowed / total, not the number it was given.
    if (limit_ == SIZE_MAX || total_ == 0) return 1.0;
    return static_cast<double>(limit_) / static_cast<double>(total_);
}

// ---------------------------------------------------------------------------------------------
// Private pools

bool DeviceCachingAllocator::begin_allocate_to_pool(MempoolId id, StreamFilter filter) {
    if (id == MempoolId{}) return false;
    std::lock_guard<FutexLock> lock(mu_);
    auto it = pools_.find(id);
    if (it == pools_.end()) {
        pools_.emplace(id, std::make_unique<PrivatePool>(id));
    } else {
        // A pool released by every user but not yet freed is taken up again as it is.
        if (it->second->use_count == 0) freeable_.erase(id);
        it->second->use_count++;
    }
    captures_.push_back(Capture{id, std::move(filter), std::this_thread::get_id()});
    return true;
}

bool DeviceCachingAllocator::end_allocate_to_pool(MempoolId id) {
    std::lock_guard<FutexLock> lock(mu_);
    // Two threads may capture into one shared pool at once, each with its own filter; the id
    // alone cannot say whose capture ends. Captures begin and end on the same thread
    // (torch.cuda.graph), so that thread's entry is ended, else the newest with the id.
    const std::thread::id self = std::this_thread::get_id();
    auto match = captures_.rend();
    for (auto it = captures_.rbegin(); it != captures_.rend(); ++it) {
        if (it->id != id) continue;
        if (it->thread == self) {
            match = it;
            break;
        }
        if (match == captures_.rend()) match = it;
    }
    if (match == captures_.rend()) return false;
    captures_.erase(std::next(match).base());
    return true;
}

bool DeviceCachingAllocator::release_pool(MempoolId id) {
    std::lock_guard<FutexLock> lock(mu_);
    auto it = pools_.find(id);
    if (it == pools_.end() || it->second->use_count == 0) return false;
    if (--it->second->use_count == 0) freeable_.insert(id);
    return true;
}

}  // namespace memguard::alloc
