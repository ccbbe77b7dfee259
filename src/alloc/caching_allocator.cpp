#include "alloc/caching_allocator.h"

#include "alloc/ptr_map.h"
#include "common/futex_lock.h"

#include <algorithm>
#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <thread>

namespace memguard::alloc {

namespace {

constexpr size_t kMinBlockSize = 512;       // every block size is a multiple of this
constexpr size_t kSmallSize = 1u << 20;     // requests up to this come from the small pool
constexpr size_t kSmallBuffer = 2u << 20;   // small-pool segment size
constexpr size_t kMinLargeAlloc = 10u << 20;
constexpr size_t kLargeBuffer = 20u << 20;  // segment size for requests between 1 and 10 MiB
constexpr size_t kRoundLarge = 2u << 20;    // larger segments are rounded to this
constexpr size_t kMaxRequest = size_t{1} << 56;  // 64 PiB: larger requests fail before rounding

constexpr int kErrorInvalidDevice = 101;  // cudaErrorInvalidDevice
constexpr int kErrorInvalidValue = 1;     // cudaErrorInvalidValue

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

}  // namespace

struct BlockPool;
struct PrivatePool;

struct Block {
    Stream stream = 0;
    size_t size = 0;
    uintptr_t ptr = 0;
    BlockPool* pool = nullptr;
    Block* prev = nullptr;  // neighbours within the same segment
    Block* next = nullptr;
    size_t requested = 0;
    SiteId site = 0;
    bool allocated = false;
    bool deferred = false;  // freed during a capture with uses on other streams; no events yet
    int event_count = 0;    // outstanding events recorded at free
    int device = 0;
    std::vector<Stream> stream_uses;   // record_stream, other than the allocation stream
    std::vector<Stream> capture_uses;  // those made on a capturing stream (no events for them)

    bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
    // Free and in its pool's set (not allocated, not waiting for events).
    bool is_cached() const noexcept { return !allocated && !deferred && event_count == 0 && stream_uses.empty(); }
};

namespace {

// Best fit per stream: ordered by stream, then size, then address.
struct BlockLess {
    bool operator()(const Block* a, const Block* b) const noexcept {
        if (a->stream != b->stream) return a->stream < b->stream;
        if (a->size != b->size) return a->size < b->size;
        return a->ptr < b->ptr;
    }
};

}  // namespace

namespace {

// Keeps the nodes a std::set frees for its next insert: a cached malloc/free pair erases and
// inserts set nodes, and the system allocator would otherwise run each time. Used under the
// device lock only.
struct NodeCache {
    std::vector<void*> spare;
    size_t node_size = 0;
    NodeCache() = default;
    NodeCache(const NodeCache&) = delete;
    ~NodeCache() {
        for (void* p : spare) ::operator delete(p);
    }
};

template <typename T>
struct CachedAllocator {
    using value_type = T;
    NodeCache* cache;
    explicit CachedAllocator(NodeCache* c) noexcept : cache(c) {}
    template <typename U>
    CachedAllocator(const CachedAllocator<U>& o) noexcept : cache(o.cache) {}
    T* allocate(size_t n) {
        if (n == 1 && cache->node_size == sizeof(T) && !cache->spare.empty()) {
            void* p = cache->spare.back();
            cache->spare.pop_back();
            return static_cast<T*>(p);
        }
        return static_cast<T*>(::operator new(n * sizeof(T)));
    }
    void deallocate(T* p, size_t n) noexcept {
        if (n == 1 && (cache->node_size == 0 || cache->node_size == sizeof(T)) && cache->spare.size() < 1024) {
            cache->node_size = sizeof(T);
            try {
                cache->spare.push_back(p);
                return;
            } catch (...) {
            }
        }
        ::operator delete(p);
    }
    template <typename U>
    bool operator==(const CachedAllocator<U>& o) const noexcept { return cache == o.cache; }
    template <typename U>
    bool operator!=(const CachedAllocator<U>& o) const noexcept { return cache != o.cache; }
};

}  // namespace

struct BlockPool {
    BlockPool(bool small_, PrivatePool* owner_)
        : blocks(BlockLess{}, CachedAllocator<Block*>(&nodes)), small(small_), owner(owner_) {}
    NodeCache nodes;  // declared before the set: outlives it
    std::set<Block*, BlockLess, CachedAllocator<Block*>> blocks;
    const bool small;
    PrivatePool* const owner;  // nullptr: a default pool
};

struct PrivatePool {
    explicit PrivatePool(MempoolId id_) : id(id_), small(true, this), large(false, this) {}
    MempoolId id;
    int use_count = 1;  // captures and pool handles that still use it
    int segments = 0;   // device allocations it holds
    BlockPool small;
    BlockPool large;
};

class DeviceCachingAllocator {
public:
    DeviceCachingAllocator(DeviceBackend& backend, int device, const AllocatorConfig& config)
        : backend_(backend), device_(device), config_(config), small_(true, nullptr), large_(false, nullptr) {
        stats_.max_split_size = config_.max_split_size == SIZE_MAX ? -1 : static_cast<int64_t>(config_.max_split_size);
        spare_blocks_.reserve(kMaxSpareBlocks);  // recycle() then never allocates
    }

    ~DeviceCachingAllocator() {
        for (auto& [base, seg] : segments_) {
            Block* b = seg.head;
            while (b) {
                Block* n = b->next;
                delete b;
                b = n;
            }
        }
        for (Block* b : spare_blocks_) delete b;
    }

    /// A block's address, entered in the live-block map; nullptr with *error set.
    void* malloc(size_t requested, Stream stream, SiteId site, const std::shared_ptr<const OomRescue>* rescue_slot,
                 int* error, OomReport* oom, AllocatedBlock* out);
    /// Takes the live block at ptr out of the map, calls before_reuse(ctx) and returns the block
    /// to the cache, all under the lock. False when ptr is not a live block of this device.
    bool free(uintptr_t ptr, void (*before_reuse)(void*), void* ctx);
    bool record_stream(uintptr_t ptr, Stream stream);
    bool block_sizes(uintptr_t ptr, size_t* size, size_t* requested) const;
    bool empty_cache();
    int set_memory_fraction(double fraction);
    bool begin_allocate_to_pool(MempoolId id, StreamFilter filter);
    bool end_allocate_to_pool(MempoolId id);
    bool release_pool(MempoolId id);

    DeviceStats stats() const {
        std::lock_guard<FutexLock> lock(mu_);
        return stats_;
    }
    void reset_peak_stats() {
        std::lock_guard<FutexLock> lock(mu_);
        stats_.reset_peak();
    }
    void reset_accumulated_stats() {
        std::lock_guard<FutexLock> lock(mu_);
        stats_.reset_accumulated();
    }
    std::vector<BlockInfo> snapshot() const;
    std::string check_invariants() const;
    void lock() { mu_.lock(); }
    void unlock() { mu_.unlock(); }

private:
    struct Segment {
        Block* head;  // the block at the segment's base address
        size_t size;
        BlockPool* pool;
    };
    struct Capture {
        MempoolId id;
        StreamFilter filter;
        std::thread::id thread;  // that began it
    };

    size_t round_size(size_t size) const;
    static size_t segment_size(size_t size);
    bool capture_underway() const { return !captures_.empty() || backend_.any_capture_active(device_); }

    Block* try_allocate(size_t size, Stream stream, int* error, size_t* seg_size);
    BlockPool& pool_for(size_t size, Stream stream);
    Block* take_free_block(BlockPool& pool, Stream stream, size_t size);
    Block* alloc_segment(BlockPool& pool, Stream stream, size_t size, int* error);
    void hand_out(Block* b, size_t size, size_t requested, SiteId site);
    void free_locked(Block* b);
    bool should_split(const Block* b, size_t size) const;
    void free_block(Block* b);
    bool try_merge(Block* dst, Block* src);
    void insert_events(Block* b);
    void process_events();
    void synchronize_and_free_events();
    bool release_segment(Block* b);
    void release_pool_blocks(BlockPool& pool);
    bool release_oversize_blocks(BlockPool& pool, Stream stream, size_t size);
    bool release_cached_blocks();
    void fill_oom_report(OomReport* r, size_t requested, size_t size, size_t seg_size, int error, bool rescued);
    Event get_event();
    void put_event(Event e) { free_events_.push_back(e); }
    // Block objects are recycled: splitting and merging make and drop one per malloc/free pair.
    Block* new_block() {
        if (spare_blocks_.empty()) return new Block;
        Block* b = spare_blocks_.back();
        spare_blocks_.pop_back();
        return b;
    }
    void recycle(Block* b) {
        *b = Block{};
        if (spare_blocks_.size() < kMaxSpareBlocks) spare_blocks_.push_back(b);
        else delete b;
    }

    void stat_add(StatArray& a, const BlockPool* pool, uint64_t n) {
        a[kStatAll].add(n);
        a[pool->small ? kStatSmallPool : kStatLargePool].add(n);
    }
    void stat_sub(StatArray& a, const BlockPool* pool, uint64_t n) {
        a[kStatAll].sub(n);
        a[pool->small ? kStatSmallPool : kStatLargePool].sub(n);
    }

    static constexpr size_t kMaxSpareBlocks = 4096;
    DeviceBackend& backend_;
    const int device_;
    const AllocatorConfig config_;
    mutable FutexLock mu_;  // the device lock (common/futex_lock.h)

    BlockPool small_;
    BlockPool large_;
    std::map<MempoolId, std::unique_ptr<PrivatePool>> pools_;
    std::set<MempoolId> freeable_;      // pools with no uses left, freed at the next release
    std::vector<Capture> captures_;     // begun and not ended, oldest first
    std::map<uintptr_t, Segment> segments_;
    // The blocks handed out: address -> block. Under the device lock, so that malloc and free
    // take one lock each (PyTorch's frees name the device the block was allocated on).
    PtrMap live_;

    // Events recorded at free, per stream in recording order (a later event on a stream cannot
    // complete before an earlier one, so the scan of a stream stops at the first pending one).
    std::unordered_map<Stream, std::deque<std::pair<Event, Block*>>> outstanding_;
    std::vector<Block*> deferred_;       // freed during a capture, with uses on other streams
    std::vector<Event> free_events_;
    std::vector<Block*> spare_blocks_;

    size_t limit_ = SIZE_MAX;  // memory-fraction limit on reserved bytes
    DeviceStats stats_;
};

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

bool DeviceCachingAllocator::should_split(const Block* b, size_t size) const {
    const size_t remaining = b->size - size;
    if (b->pool->small) return remaining >= kMinBlockSize;
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

Block* DeviceCachingAllocator::take_free_block(BlockPool& pool, Stream stream, size_t size) {
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    // An unsplittable cached block is not spent on a small request, nor on one much smaller.
    if (size < config_.max_split_size && b->size >= config_.max_split_size) return nullptr;
    if (size >= config_.max_split_size && b->size >= size + config_.max_non_split_rounding_size) return nullptr;
    pool.blocks.erase(it);
    if (b->is_split()) {
        stat_sub(stats_.inactive_split, &pool, 1);
        stat_sub(stats_.inactive_split_bytes, &pool, b->size);
    }
    return b;
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
    segments_[b->ptr] = Segment{b, size, &pool};
    if (pool.owner) pool.owner->segments++;
    stat_add(stats_.segment, &pool, 1);
    stat_add(stats_.reserved_bytes, &pool, size);
    if (size >= config_.max_split_size) stats_.oversize_segments.add(1);
    stats_.num_device_alloc++;
    return b;
}

Block* DeviceCachingAllocator::try_allocate(size_t size, Stream stream, int* error, size_t* seg_size) {
    const bool capturing = capture_underway();
    if (!capturing) process_events();
    BlockPool& pool = pool_for(size, stream);
    if (Block* b = take_free_block(pool, stream, size)) return b;
    const size_t alloc = segment_size(size);
    *seg_size = alloc;
    *error = kSuccess;
    if (Block* b = alloc_segment(pool, stream, alloc, error)) return b;
    if (*error != kErrorMemoryAllocation) return nullptr;
    // Segments are never freed while a capture is in progress (cudaFree is not capture-safe and
    // a capture's pool must keep its memory).
    if (capturing) return nullptr;
    if (release_oversize_blocks(pool, stream, size)) {
        if (Block* b = alloc_segment(pool, stream, alloc, error)) return b;
        if (*error != kErrorMemoryAllocation) return nullptr;
    }
    stats_.num_alloc_retries++;
    release_cached_blocks();
    return alloc_segment(pool, stream, alloc, error);
}

void DeviceCachingAllocator::hand_out(Block* b, size_t size, size_t requested, SiteId site) {
    BlockPool* pool = b->pool;
    if (should_split(b, size)) {
        Block* rest = new_block();
        rest->device = device_;
        rest->stream = b->stream;
        rest->size = b->size - size;
        rest->ptr = b->ptr + size;
        rest->pool = pool;
        rest->prev = b;
        rest->next = b->next;
        if (b->next) b->next->prev = rest;
        b->next = rest;
        b->size = size;
        pool->blocks.insert(rest);
        stat_add(stats_.inactive_split, pool, 1);
        stat_add(stats_.inactive_split_bytes, pool, rest->size);
    }
    b->allocated = true;
    b->requested = requested;
    b->site = site;
    stat_add(stats_.allocation, pool, 1);
    stat_add(stats_.allocated_bytes, pool, b->size);
    stat_add(stats_.requested_bytes, pool, requested);
    stat_add(stats_.active, pool, 1);
    stat_add(stats_.active_bytes, pool, b->size);
    if (b->size >= config_.max_split_size) stats_.oversize_allocations.add(1);
}

void* DeviceCachingAllocator::malloc(size_t requested, Stream stream, SiteId site,
                                     const std::shared_ptr<const OomRescue>* rescue_slot, int* error,
                                     OomReport* oom, AllocatedBlock* out) {
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
    int err = kSuccess;
    size_t seg_size = 0;
    Block* b = try_allocate(size, stream, &err, &seg_size);
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
            b = try_allocate(size, stream, &err, &seg_size);
        }
    }
    if (!b) {
        if (err == kErrorMemoryAllocation) stats_.num_ooms++;
        if (oom) fill_oom_report(oom, requested, size, seg_size, err, rescued);
        *error = err;
        return nullptr;
    }
    hand_out(b, size, requested, site);
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

bool DeviceCachingAllocator::free(uintptr_t ptr, void (*before_reuse)(void*), void* ctx) {
    std::lock_guard<FutexLock> lock(mu_);
    auto* b = static_cast<Block*>(live_.erase(ptr));
    if (!b) return false;
    before_reuse(ctx);
    free_locked(b);
    return true;
}

void DeviceCachingAllocator::free_locked(Block* b) {
    b->allocated = false;
    BlockPool* pool = b->pool;
    stat_sub(stats_.allocation, pool, 1);
    stat_sub(stats_.allocated_bytes, pool, b->size);
    stat_sub(stats_.requested_bytes, pool, b->requested);
    if (b->size >= config_.max_split_size) stats_.oversize_allocations.sub(1);
    b->requested = 0;
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
        if (q.empty()) it = outstanding_.erase(it);
        else ++it;
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
    stat_sub(stats_.active, pool, 1);
    stat_sub(stats_.active_bytes, pool, b->size);
    try_merge(b, b->prev);
    try_merge(b, b->next);
    if (b->is_split()) {
        stat_add(stats_.inactive_split, pool, 1);
        stat_add(stats_.inactive_split_bytes, pool, b->size);
    }
    pool->blocks.insert(b);
}

bool DeviceCachingAllocator::try_merge(Block* dst, Block* src) {
    if (!src || !src->is_cached()) return false;
    BlockPool* pool = dst->pool;
    pool->blocks.erase(src);
    stat_sub(stats_.inactive_split, pool, 1);
    stat_sub(stats_.inactive_split_bytes, pool, src->size);
    if (src == dst->prev) {
        dst->ptr = src->ptr;
        dst->prev = src->prev;
        if (dst->prev) dst->prev->next = dst;
        else segments_.at(dst->ptr).head = dst;
    } else {
        dst->next = src->next;
        if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
    recycle(src);
    return true;
}

// ---------------------------------------------------------------------------------------------
// Returning segments

bool DeviceCachingAllocator::release_segment(Block* b) {
    if (backend_.segment_free(device_, reinterpret_cast<void*>(b->ptr)) != kSuccess) return false;
    BlockPool* pool = b->pool;
    pool->blocks.erase(b);
    if (pool->owner) pool->owner->segments--;
    segments_.erase(b->ptr);
    stat_sub(stats_.segment, pool, 1);
    stat_sub(stats_.reserved_bytes, pool, b->size);
    if (b->size >= config_.max_split_size) stats_.oversize_segments.sub(1);
    stats_.num_device_free++;
    recycle(b);
    return true;
}

void DeviceCachingAllocator::release_pool_blocks(BlockPool& pool) {
    std::vector<Block*> whole;
    for (Block* b : pool.blocks)
        if (!b->is_split()) whole.push_back(b);
    for (Block* b : whole) release_segment(b);
}

bool DeviceCachingAllocator::release_oversize_blocks(BlockPool& pool, Stream stream, size_t size) {
    if (config_.max_split_size == SIZE_MAX || pool.small) return false;
    // First the smallest single cached oversize block that covers the request, else the largest
    // ones of this stream until enough is returned.
    Block key;
    key.stream = stream;
    key.size = std::max(size, config_.max_split_size);
    auto it = pool.blocks.lower_bound(&key);
    if (it != pool.blocks.end() && (*it)->stream == stream && !(*it)->is_split())
        return release_segment(*it);
    std::vector<Block*> candidates;
    for (auto r = std::make_reverse_iterator(it); r != pool.blocks.rend(); ++r) {
        Block* b = *r;
        if (b->stream != stream || b->size < config_.max_split_size) break;
        if (!b->is_split()) candidates.push_back(b);
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
    limit_ = static_cast<size_t>(fraction * static_cast<double>(total));
    return kSuccess;
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
            if (!b->allocated) continue;
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
        for (const Block* b = seg.head; b; b = b->next) {
            BlockInfo i;
            i.segment = base;
            i.ptr = b->ptr;
            i.size = b->size;
            i.requested = b->requested;
            i.stream = b->stream;
            i.site = b->site;
            i.pool = b->pool->owner ? b->pool->owner->id : MempoolId{};
            i.small_pool = b->pool->small;
            i.state = b->allocated ? BlockInfo::State::Allocated
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
    for (const auto& [base, seg] : segments_) {
        if (seg.head == nullptr || seg.head->ptr != base || seg.head->prev != nullptr)
            return "segment head wrong at " + std::to_string(base);
        add(expect.segment, seg.pool, 1);
        add(expect.reserved_bytes, seg.pool, static_cast<int64_t>(seg.size));
        if (seg.pool->owner) pool_segments[seg.pool->owner]++;
        uintptr_t at = base;
        const Block* last = nullptr;
        for (const Block* b = seg.head; b; last = b, b = b->next) {
            if (b->ptr != at) return "blocks do not tile segment " + std::to_string(base);
            if (b->prev != last) return "broken prev link in segment " + std::to_string(base);
            if (b->pool != seg.pool || b->stream != seg.head->stream) return "block pool/stream differs from segment";
            if (b->size == 0 || b->size % kMinBlockSize != 0) return "block size not a multiple of 512";
            at += b->size;
            const bool in_pool = b->pool->blocks.count(const_cast<Block*>(b)) != 0;
            if (b->is_cached() != in_pool) return "cached block and pool membership disagree at " + std::to_string(b->ptr);
            if (b->is_cached()) {
                cached_seen++;
                if (last && last->is_cached()) return "two adjacent free blocks at " + std::to_string(b->ptr);
                if (b->is_split()) {
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
    }
    size_t pooled = small_.blocks.size() + large_.blocks.size();
    for (const auto& [id, p] : pools_) {
        pooled += p->small.blocks.size() + p->large.blocks.size();
        if (p->segments != pool_segments[p.get()]) return "private pool segment count wrong";
    }
    if (pooled != cached_seen) return "pool sets hold blocks that are not in any segment";
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

// ---------------------------------------------------------------------------------------------
// CachingAllocator

CachingAllocator::CachingAllocator(DeviceBackend& backend, int device_count, AllocatorConfig config) {
    for (int d = 0; d < device_count; ++d)
        devices_.push_back(std::make_unique<DeviceCachingAllocator>(backend, d, config));
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

bool CachingAllocator::free_impl(void* ptr, int device_hint, void (*before_reuse)(void*), void* ctx) {
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    if (device_hint >= 0 && device_hint < device_count() && devices_[device_hint]->free(p, before_reuse, ctx))
        return true;
    for (int d = 0; d < device_count(); ++d)
        if (d != device_hint && devices_[d]->free(p, before_reuse, ctx)) return true;
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
