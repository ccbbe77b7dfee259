#include "alloc/caching_allocator.h"

#include "alloc/caching_allocator_internal.h"

#include <algorithm>
#include <atomic>

namespace memguard::alloc {

namespace {

constexpr int kErrorInvalidDevice = 101;  // cudaErrorInvalidDevice

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Sizes

size_t DeviceCachingAllocator::round_size(size_t size) const {
    if (size < kMinBlockSize) return kMinBlockSize;
    const unsigned div = config_.roundup_power2_divisions;
    if (div > 1 && size > kSmallSize) {
        // Round to one of `div` steps of the power-of-two interval holding the size, so that
        // requests of slowly varying size reuse the same cached blocks.
        size_t floor_pow2 = size_t{1} << (63 - __builtin_clzll(size));
        if (floor_pow2 == size) return size;
        size_t step = floor_pow2 / div;
        if (step < kMinBlockSize) step = kMinBlockSize;
        return round_up(size, step);
    }
    return round_up(size, kMinBlockSize);
}

size_t DeviceCachingAllocator::segment_size(size_t size) {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return kLargeBuffer;
    return round_up(size, kRoundLarge);
}

bool DeviceCachingAllocator::should_split(const Block* b, size_t size, bool expandable) const {
    const size_t remaining = b->size - size;
    // With expandable segments on, PyTorch splits every block, cudaMalloc'ed ones too.
    if (b->pool->small || expandable) return remaining >= kMinBlockSize;
    return size < config_.max_split_size && remaining > kSmallSize;
}

// ---------------------------------------------------------------------------------------------
// Allocation

BlockPool& DeviceCachingAllocator::pool_for(size_t size, Stream stream) {
    for (auto it = captures_.rbegin(); it != captures_.rend(); ++it) {
        if (it->filter && it->filter(stream)) {
            PrivatePool& p = *pools_.at(it->id);
            return size <= kSmallSize ? p.small : p.large;
        }
    }
    return size <= kSmallSize ? small_ : large_;
}

Block* DeviceCachingAllocator::take_free_block(BlockPool& pool, Stream stream, size_t size, bool expandable) {
    // Ages for garbage collection count searches of the pool, as PyTorch's.
    if (__builtin_expect(gc_on(), 0)) ++pool.free_block_searches;
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    if ((*it)->expandable) {
        if (expandable) {
            // A free block at the end of a segment's mapped part can grow into the unmapped rest:
            // for best fit it counts as that large, so a later, tighter block is preferred and
            // the segment's end stays free for requests that need it.
            auto grown = [](const Block* b) { return b->size + (b->next && !b->next->mapped ? b->next->size : 0); };
            for (auto next = std::next(it); (*it)->expandable && next != pool.blocks.end() &&
                                            (*next)->stream == stream && grown(*next) < grown(*it);
                 ++next)
                it = next;
        } else {
            // Turned off at run time: the expandable blocks right above are skipped.
            do {
                ++it;
            } while (it != pool.blocks.end() && (*it)->expandable && (*it)->stream == stream);
            if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
        }
    }
    Block* b = *it;
    // An unsplittable cached block is not spent on a small request, nor on one much smaller.
    if (size < config_.max_split_size && b->size >= config_.max_split_size) return nullptr;
    if (size >= config_.max_split_size && b->size >= size + config_.max_non_split_rounding_size) return nullptr;
    pool.blocks.erase(it);
    b->gc_base = pool.free_block_searches;  // used now: age 0
    return b;                               // still counted as inactive split: hand_out settles it
}

Block* DeviceCachingAllocator::alloc_segment(BlockPool& pool, Stream stream, size_t size, int* error) {
    const size_t reserved = static_cast<size_t>(stats_.reserved_bytes[kStatAll].current);
    if (size > limit_ || reserved > limit_ - size) {
        *error = kErrorMemoryAllocation;
        return nullptr;
    }
    // Relaxed mode makes cudaMalloc legal while this or another thread captures (CUDA's global
    // mode would fail it and invalidate the capture); the mode is only exchanged, never left set.
    int mode = kCaptureModeRelaxed;
    const bool exchanged = backend_.exchange_capture_mode(&mode) == kSuccess;
    void* p = nullptr;
    const int err = backend_.segment_malloc(device_, size, &p);
    if (exchanged) backend_.exchange_capture_mode(&mode);
    if (err != kSuccess || p == nullptr) {
        *error = err != kSuccess ? err : kErrorMemoryAllocation;
        return nullptr;
    }
    Block* b = new_block();
    b->device = device_;
    b->stream = stream;
    b->size = size;
    b->ptr = reinterpret_cast<uintptr_t>(p);
    b->pool = &pool;
    const bool oversize = size >= config_.max_split_size;
    const bool context = trace_.context() >= ContextLevel::State;
    segments_[b->ptr] = Segment{b, size, &pool, nullptr, oversize, serving_site_, context};
    trace_.record(TraceAction::SegmentAlloc, b->ptr, size, stream, serving_site_,
                  trace_.context() >= ContextLevel::Alloc, pool.owner ? pool.owner->id : MempoolId{});
    if (pool.owner) pool.owner->segments++;
    stat_add(stats_.segment, &pool, 1);
    stat_add(stats_.reserved_bytes, &pool, size);
    if (oversize) stats_.oversize_segments.add(1);
    stats_.num_device_alloc++;
    return b;
}

Block* DeviceCachingAllocator::grow(BlockPool& pool, Stream stream, size_t size, size_t seg_size, bool expandable,
                                    int* error) {
    if (!expandable) return alloc_segment(pool, stream, seg_size, error);
    // The memory fraction is checked against the segment cudaMalloc would have taken, as PyTorch
    // does; only the pages the request needs are then mapped.
    const size_t reserved = static_cast<size_t>(stats_.reserved_bytes[kStatAll].current);
    if (seg_size > limit_ || reserved > limit_ - seg_size) {
        *error = kErrorMemoryAllocation;
        return nullptr;
    }
    return alloc_expandable(pool, stream, size, error);
}

Block* DeviceCachingAllocator::try_allocate(size_t size, Stream stream, bool expandable, int* error, size_t* seg_size) {
    const bool capturing = capture_underway();
    if (!capturing) process_events();
    BlockPool& pool = pool_for(size, stream);
    if (Block* b = take_free_block(pool, stream, size, expandable)) return b;
    if (__builtin_expect(gc_on(), 0) && !capturing) garbage_collect();
    const size_t alloc = segment_size(size);
    *seg_size = alloc;
    *error = kSuccess;
    if (Block* b = grow(pool, stream, size, alloc, expandable, error)) return b;
    if (*error != kErrorMemoryAllocation) return nullptr;
    // Segments are never freed (nor pages unmapped) while a capture is in progress (cudaFree and
    // the stream synchronization before an unmap are not capture-safe, and a capture's pool must
    // keep its memory).
    if (capturing) return nullptr;
    if (release_oversize_blocks(pool, stream, size)) {
        if (Block* b = grow(pool, stream, size, alloc, expandable, error)) return b;
        if (*error != kErrorMemoryAllocation) return nullptr;
    }
    stats_.num_alloc_retries++;
    release_cached_blocks();
    return grow(pool, stream, size, alloc, expandable, error);
}

void DeviceCachingAllocator::hand_out(Block* b, size_t size, size_t requested, SiteId site, bool expandable) {
    BlockPool* pool = b->pool;
    // The inactive-split stats change by what changes, as PyTorch's do (their allocated/freed
    // totals count that, not a block taken out and put back): a cached split block shrinks or
    // leaves; splitting a whole block makes its rest one. PyTorch leaves out the blocks of
    // expandable segments, whose free pages can always be unmapped.
    const bool counted = !b->expandable;
    const bool already_split = b->is_split();
    if (should_split(b, size, expandable)) {
        Block* rest = new_block();
        rest->device = device_;
        rest->stream = b->stream;
        rest->size = b->size - size;
        rest->ptr = b->ptr + size;
        rest->pool = pool;
        rest->expandable = b->expandable;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        pool->blocks.insert(rest);
        if (counted && already_split) {
            stat_sub(stats_.inactive_split_bytes, pool, size);
        } else if (counted) {
            stat_add(stats_.inactive_split, pool, 1);
            stat_add(stats_.inactive_split_bytes, pool, rest->size);
        }
    } else if (already_split && counted) {
        stat_sub(stats_.inactive_split, pool, 1);
        stat_sub(stats_.inactive_split_bytes, pool, b->size);
    }
    b->allocated = true;
    b->requested = requested;
    b->site = site;
    b->context = trace_.context() >= ContextLevel::State;
    trace_.record(TraceAction::Alloc, b->ptr, requested, b->stream, site, trace_.context() >= ContextLevel::Alloc,
                  pool->owner ? pool->owner->id : MempoolId{});
    stat_add(stats_.allocation, pool, 1);
    stat_add(stats_.allocated_bytes, pool, b->size);
    stat_add(stats_.requested_bytes, pool, requested);
    stat_add(stats_.active, pool, 1);
    stat_add(stats_.active_bytes, pool, b->size);
    if (b->size >= config_.max_split_size) {
        b->oversize = true;
        stats_.oversize_allocations.add(1);
    }
}

void* DeviceCachingAllocator::malloc(size_t requested, Stream stream, SiteId site,
                                     const std::shared_ptr<const OomRescue>* rescue_slot, int* error, OomReport* oom,
                                     AllocatedBlock* out) {
    std::unique_lock<FutexLock> lock(mu_);
    live_.reserve_one();  // the insert below cannot fail once a block is taken
    if (requested > kMaxRequest) {
        // Rounding would wrap around; no device has this much memory anyway.
        stats_.num_ooms++;
        if (oom) fill_oom_report(oom, requested, requested, 0, kErrorMemoryAllocation, false);
        *error = kErrorMemoryAllocation;
        return nullptr;
    }
    const size_t size = round_size(requested);
    serving_site_ = site;
    // Read once: a change at run time applies from the next allocation on.
    const bool expandable = expandable_on_.load(std::memory_order_relaxed) && vmm_usable();
    int err = kSuccess;
    size_t seg_size = 0;
    Block* b = try_allocate(size, stream, expandable, &err, &seg_size);
    bool rescued = false;
    // Loaded only here: std::atomic_load of a shared_ptr takes a lock, too dear for every malloc.
    std::shared_ptr<const OomRescue> rescue;
    if (!b && err == kErrorMemoryAllocation) rescue = std::atomic_load(rescue_slot);
    if (!b && err == kErrorMemoryAllocation && rescue && *rescue) {
        // The rescue (a garbage collection in the bridge) frees blocks through this allocator
        // and may need the GIL: it runs with no allocator lock held.
        OomRescueInfo info{device_, requested, stream, capture_underway()};
        lock.unlock();
        bool may_have_freed = false;
        try {
            may_have_freed = (*rescue)(info);
        } catch (...) {
            // Nothing may unwind through the host's allocation call: a failed rescue freed nothing.
        }
        lock.lock();
        rescued = true;
        if (may_have_freed) {
            live_.reserve_one();  // other threads may have filled the map while the lock was released
            b = try_allocate(size, stream, expandable, &err, &seg_size);
        }
    }
    if (!b) {
        if (err == kErrorMemoryAllocation) stats_.num_ooms++;
        if (oom) fill_oom_report(oom, requested, size, seg_size, err, rescued);
        if (err == kErrorMemoryAllocation) {
            trace_.record(TraceAction::Oom, oom ? oom->device_free : 0, size, stream, site,
                          trace_.context() >= ContextLevel::Alloc);
        }
        *error = err;
        return nullptr;
    }
    hand_out(b, size, requested, site, expandable);
    live_.insert(b->ptr, b);
    if (out) {
        out->size = b->size;
        out->requested = b->requested;
        out->pool = b->pool->owner ? b->pool->owner->id : MempoolId{};
    }
    *error = kSuccess;
    return reinterpret_cast<void*>(b->ptr);
}

// ---------------------------------------------------------------------------------------------
// Free and stream-ordered reuse

bool DeviceCachingAllocator::free(uintptr_t ptr, void (*before_reuse)(void*), void* ctx, SiteId free_site) {
    std::lock_guard<FutexLock> lock(mu_);
    auto* b = static_cast<Block*>(live_.erase(ptr));
    if (!b) return false;
    before_reuse(ctx);
    if (trace_.enabled()) {
        // The free's own stacks when they are kept, else the allocation's (as PyTorch does).
        const bool own = free_site != 0 && trace_.context() >= ContextLevel::All;
        freeing_site_ = own ? free_site : 0;
        trace_.record(TraceAction::FreeRequested, b->ptr, b->requested, b->stream, own ? free_site : b->site,
                      own || b->context, b->pool->owner ? b->pool->owner->id : MempoolId{});
    }
    free_locked(b);
    freeing_site_ = 0;
    return true;
}

void DeviceCachingAllocator::free_locked(Block* b) {
    b->allocated = false;
    BlockPool* pool = b->pool;
    stat_sub(stats_.allocation, pool, 1);
    stat_sub(stats_.allocated_bytes, pool, b->size);
    if (b->oversize) {
        b->oversize = false;
        stats_.oversize_allocations.sub(1);
    }
    // The requested bytes stay counted until the block is back in its pool (free_block), as
    // PyTorch's allocator counts them: with the active bytes, not the allocated ones (b->requested stays
    // for the history's free_completed entry too; free_block clears it).
    if (b->stream_uses.empty()) {
        free_block(b);
        return;
    }
    if (capture_underway()) {
        // Recording an event on a capturing stream would add it to the graph, and querying one
        // is illegal until the capture ends: the events are recorded after the last capture.
        b->deferred = true;
        deferred_.push_back(b);
        return;
    }
    insert_events(b);
    if (b->is_cached()) free_block(b);
}

bool DeviceCachingAllocator::block_sizes(uintptr_t ptr, size_t* size, size_t* requested) const {
    std::lock_guard<FutexLock> lock(mu_);
    const auto* b = static_cast<const Block*>(live_.find(ptr));
    if (!b) return false;
    if (size) *size = b->size;
    if (requested) *requested = b->requested;
    return true;
}

bool DeviceCachingAllocator::record_stream(uintptr_t ptr, Stream stream) {
    std::lock_guard<FutexLock> lock(mu_);
    auto* b = static_cast<Block*>(live_.find(ptr));
    if (!b) return false;
    if (stream == b->stream) return true;
    if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
        b->stream_uses.push_back(stream);
    // Work captured on a stream runs at replay, not now: no event on that stream can protect it,
    // and the graph's pool keeps the memory for the graph anyway.
    if (backend_.stream_capturing(device_, stream) &&
        std::find(b->capture_uses.begin(), b->capture_uses.end(), stream) == b->capture_uses.end())
        b->capture_uses.push_back(stream);
    return true;
}

Event DeviceCachingAllocator::get_event() {
    if (!free_events_.empty()) {
        Event e = free_events_.back();
        free_events_.pop_back();
        return e;
    }
    Event e = 0;
    if (backend_.event_create(device_, &e) != kSuccess) return 0;
    return e;
}

void DeviceCachingAllocator::insert_events(Block* b) {
    std::vector<Stream> uses;
    uses.swap(b->stream_uses);
    for (Stream s : uses) {
        if (std::find(b->capture_uses.begin(), b->capture_uses.end(), s) != b->capture_uses.end()) continue;
        Event e = get_event();
        if (e == 0 || backend_.event_record(device_, e, s) != kSuccess) {
            // Without an event there is no way to know when the stream is done with the block:
            // keep it out of the cache for good rather than risk reuse.
            if (e) put_event(e);
            b->stream_uses.push_back(s);
            continue;
        }
        b->event_count++;
        outstanding_[s].emplace_back(e, b);
    }
    b->capture_uses.clear();
}

void DeviceCachingAllocator::process_events() {
    if (!deferred_.empty()) {
        std::vector<Block*> deferred;
        deferred.swap(deferred_);
        for (Block* b : deferred) {
            b->deferred = false;
            insert_events(b);
            if (b->is_cached()) free_block(b);
        }
    }
    for (auto it = outstanding_.begin(); it != outstanding_.end();) {
        auto& q = it->second;
        while (!q.empty()) {
            auto [e, b] = q.front();
            // Anything but "done" keeps the block: an error says nothing about the stream.
            if (backend_.event_query(device_, e) != kSuccess) break;
            q.pop_front();
            put_event(e);
            if (--b->event_count == 0 && b->is_cached()) free_block(b);
        }
        if (q.empty())
            it = outstanding_.erase(it);
        else
            ++it;
    }
}

void DeviceCachingAllocator::synchronize_and_free_events() {
    process_events();
    for (auto it = outstanding_.begin(); it != outstanding_.end();) {
        std::deque<std::pair<Event, Block*>> failed;
        for (auto [e, b] : it->second) {
            // As in process_events: a failed wait says nothing about the stream.
            if (backend_.event_synchronize(device_, e) != kSuccess) {
                failed.emplace_back(e, b);
                continue;
            }
            put_event(e);
            if (--b->event_count == 0 && b->is_cached()) free_block(b);
        }
        if (failed.empty()) {
            it = outstanding_.erase(it);
        } else {
            it->second.swap(failed);
            ++it;
        }
    }
    stats_.num_sync_all_streams++;
}

void DeviceCachingAllocator::free_block(Block* b) {
    BlockPool* pool = b->pool;
    if (trace_.enabled()) {
        const bool own = freeing_site_ != 0;  // completed inside the free that kept its stacks
        trace_.record(TraceAction::FreeCompleted, b->ptr, b->requested, b->stream, own ? freeing_site_ : b->site,
                      own || b->context, pool->owner ? pool->owner->id : MempoolId{});
    }
    b->context = false;
    stat_sub(stats_.active, pool, 1);
    stat_sub(stats_.active_bytes, pool, b->size);
    stat_sub(stats_.requested_bytes, pool, b->requested);
    b->requested = 0;
    // The net change of the inactive split blocks (PyTorch's accounting): merged neighbours leave
    // them, the block joins them when it is still part of a split segment. Blocks of expandable
    // segments are never counted.
    int64_t blocks = 0, bytes = 0;
    for (Block* n : {b->prev, b->next}) {
        if (const size_t merged = try_merge(b, n)) {
            blocks -= 1;
            bytes -= static_cast<int64_t>(merged);
        }
    }
    if (b->is_split()) {
        blocks += 1;
        bytes += static_cast<int64_t>(b->size);
    }
    if (!b->expandable) {
        if (blocks > 0) stat_add(stats_.inactive_split, pool, static_cast<uint64_t>(blocks));
        if (blocks < 0) stat_sub(stats_.inactive_split, pool, static_cast<uint64_t>(-blocks));
        if (bytes > 0) stat_add(stats_.inactive_split_bytes, pool, static_cast<uint64_t>(bytes));
        if (bytes < 0) stat_sub(stats_.inactive_split_bytes, pool, static_cast<uint64_t>(-bytes));
    }
    pool->blocks.insert(b);
}

// Merges the free neighbour src into dst (which is in no set); returns the bytes it added (0: not
// merged). Blocks merge only with blocks of the same kind: mapped with mapped, unmapped with
// unmapped. The caller keeps the inactive-split stats.
size_t DeviceCachingAllocator::try_merge(Block* dst, Block* src) {
    if (!src || !src->is_cached() || src->mapped != dst->mapped) return 0;
    BlockPool* pool = dst->pool;
    if (src->mapped)
        pool->blocks.erase(src);
    else
        pool->unmapped.erase(src);
    const size_t merged = src->size;
    if (src == dst->prev) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev)
            dst->prev->next = dst;
        else
            segments_.at(dst->ptr).head = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    recycle(src);
    return merged;
}

// ---------------------------------------------------------------------------------------------
// CachingAllocator

CachingAllocator::CachingAllocator(DeviceBackend& backend, int device_count, AllocatorConfig config) {
    expandable_.store(config.expandable_segments, std::memory_order_relaxed);
    for (int d = 0; d < device_count; ++d)
        devices_.push_back(std::make_unique<DeviceCachingAllocator>(backend, d, config, expandable_));
}

CachingAllocator::~CachingAllocator() = default;

void* CachingAllocator::malloc(int device, size_t size, Stream stream, SiteId site, int* error, OomReport* oom,
                               AllocatedBlock* block) {
    int local = kSuccess;
    int& err = error ? *error : local;
    if (device < 0 || device >= device_count()) {
        err = kErrorInvalidDevice;
        return nullptr;
    }
    if (size == 0) {
        err = kSuccess;
        return nullptr;
    }
    return devices_[device]->malloc(size, stream, site, &rescue_, &err, oom, block);
}

bool CachingAllocator::free_impl(void* ptr, int device_hint, void (*before_reuse)(void*), void* ctx, SiteId free_site) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    if (device_hint >= 0 && device_hint < device_count() &&
        devices_[device_hint]->free(p, before_reuse, ctx, free_site))
        return true;
    for (int d = 0; d < device_count(); ++d)
        if (d != device_hint && devices_[d]->free(p, before_reuse, ctx, free_site)) return true;
    return false;
}

bool CachingAllocator::record_stream(void* ptr, Stream stream) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    for (auto& d : devices_)
        if (d->record_stream(p, stream)) return true;
    return false;
}

bool CachingAllocator::block_sizes(void* ptr, size_t* size, size_t* requested) const {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    for (const auto& d : devices_)
        if (d->block_sizes(p, size, requested)) return true;
    return false;
}

bool CachingAllocator::empty_cache() {
    bool all = true;
    for (auto& d : devices_) all = d->empty_cache() && all;
    return all;
}

bool CachingAllocator::empty_cache(int device) {
    if (device < 0 || device >= device_count()) return false;
    return devices_[device]->empty_cache();
}

int CachingAllocator::set_memory_fraction(int device, double fraction) {
    if (device < 0 || device >= device_count()) return kErrorInvalidDevice;
    return devices_[device]->set_memory_fraction(fraction);
}

double CachingAllocator::memory_fraction(int device) const {
    if (device < 0 || device >= device_count()) return 1.0;
    return devices_[device]->memory_fraction();
}

AllocatorConfig CachingAllocator::config() const {
    return devices_.empty() ? AllocatorConfig{} : devices_.front()->config();
}

void CachingAllocator::set_config(const AllocatorConfig& config) {
    for (auto& d : devices_) d->set_config(config);
}

bool CachingAllocator::begin_allocate_to_pool(int device, MempoolId id, StreamFilter filter) {
    if (device < 0 || device >= device_count()) return false;
    return devices_[device]->begin_allocate_to_pool(id, std::move(filter));
}

bool CachingAllocator::end_allocate_to_pool(int device, MempoolId id) {
    if (device < 0 || device >= device_count()) return false;
    return devices_[device]->end_allocate_to_pool(id);
}

bool CachingAllocator::release_pool(int device, MempoolId id) {
    if (device < 0 || device >= device_count()) return false;
    return devices_[device]->release_pool(id);
}

void CachingAllocator::set_oom_rescue(OomRescue rescue) {
    std::atomic_store(&rescue_, std::shared_ptr<const OomRescue>(
                                    rescue ? std::make_shared<const OomRescue>(std::move(rescue)) : nullptr));
}

DeviceStats CachingAllocator::stats(int device) const {
    if (device < 0 || device >= device_count()) return {};
    return devices_[device]->stats();
}

void CachingAllocator::reset_peak_stats(int device) {
    if (device >= 0 && device < device_count()) devices_[device]->reset_peak_stats();
}

void CachingAllocator::reset_accumulated_stats(int device) {
    if (device >= 0 && device < device_count()) devices_[device]->reset_accumulated_stats();
}

void CachingAllocator::lock_for_fork() {
    for (auto& d : devices_) d->lock();
}

void CachingAllocator::unlock_after_fork() {
    for (auto it = devices_.rbegin(); it != devices_.rend(); ++it) (*it)->unlock();
}

std::vector<BlockInfo> CachingAllocator::snapshot(int device) const {
    if (device < 0 || device >= device_count()) return {};
    return devices_[device]->snapshot();
}

std::string CachingAllocator::check_invariants(int device) const {
    if (device < 0 || device >= device_count()) return "no such device";
    return devices_[device]->check_invariants();
}

}  // namespace memguard::alloc
