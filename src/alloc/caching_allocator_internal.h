// Internals of the caching allocator shared by its translation units: the block and pool
// types and DeviceCachingAllocator, one device's allocator. caching_allocator.cpp has the
// malloc/free path and stream-ordered reuse, caching_allocator_release.cpp returns memory to the
// device and keeps the private pools, caching_allocator_report.cpp the OOM report, snapshot and
// invariant checks. Not part of the module's interface.
#pragma once

#include "alloc/caching_allocator.h"
#include "alloc/history.h"

#include "alloc/ptr_map.h"
#include "common/futex_lock.h"

#include <deque>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

namespace memguard::alloc {

constexpr size_t kMinBlockSize = 512;      // every block size is a multiple of this
constexpr size_t kSmallSize = 1u << 20;    // requests up to this come from the small pool
constexpr size_t kSmallBuffer = 2u << 20;  // small-pool segment size
constexpr size_t kMinLargeAlloc = 10u << 20;
constexpr size_t kLargeBuffer = 20u << 20;       // segment size for requests between 1 and 10 MiB
constexpr size_t kRoundLarge = 2u << 20;         // larger segments are rounded to this
constexpr size_t kMaxRequest = size_t{1} << 56;  // 64 PiB: larger requests fail before rounding

struct BlockPool;
struct PrivatePool;
struct ExpandableSegment;

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
    bool context = false;   // allocated while the history kept stacks (its snapshot has frames)
    // Backed by physical memory. Only blocks of expandable segments are ever unmapped: address
    // space of the segment's reserved range, whole pages, in their pool's `unmapped` set.
    bool mapped = true;
    ExpandableSegment* expandable = nullptr;  // the segment of a block of an expandable segment
    int event_count = 0;                      // outstanding events recorded at free
    uint64_t gc_base = 0;  // its pool's free-block searches when it was last handed out (its age: since)
    int device = 0;
    bool oversize = false;             // counted in oversize_allocations (max_split_size or more when handed out)
    std::vector<Stream> stream_uses;   // record_stream, other than the allocation stream
    std::vector<Stream> capture_uses;  // those made on a capturing stream (no events for them)

    bool is_split() const noexcept { return prev != nullptr || next != nullptr; }
    // Free and in its pool's set (not allocated, not waiting for events).
    bool is_cached() const noexcept { return !allocated && !deferred && event_count == 0 && stream_uses.empty(); }
};

// Best fit per stream: ordered by stream, then size, then address.
struct BlockLess {
    bool operator()(const Block* a, const Block* b) const noexcept {
        if (a->stream != b->stream) return a->stream < b->stream;
        if (a->size != b->size) return a->size < b->size;
        return a->ptr < b->ptr;
    }
};

// Unmapped address space of expandable segments, per stream by address (the lowest address that
// fits is mapped first, so that a segment stays in one piece).
struct BlockAddrLess {
    bool operator()(const Block* a, const Block* b) const noexcept {
        if (a->stream != b->stream) return a->stream < b->stream;
        return a->ptr < b->ptr;
    }
};

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
    bool operator==(const CachedAllocator<U>& o) const noexcept {
        return cache == o.cache;
    }
    template <typename U>
    bool operator!=(const CachedAllocator<U>& o) const noexcept {
        return cache != o.cache;
    }
};

struct BlockPool {
    BlockPool(bool small_, PrivatePool* owner_)
        : blocks(BlockLess{}, CachedAllocator<Block*>(&nodes)), small(small_), owner(owner_) {}
    NodeCache nodes;  // declared before the set: outlives it
    std::set<Block*, BlockLess, CachedAllocator<Block*>> blocks;
    std::set<Block*, BlockAddrLess> unmapped;  // unmapped blocks of its expandable segments
    const bool small;
    PrivatePool* const owner;  // nullptr: a default pool
    /// Searches for a free block while garbage collection is on: the clock of the blocks' ages.
    uint64_t free_block_searches = 0;
};

struct PrivatePool {
    explicit PrivatePool(MempoolId id_) : id(id_), small(true, this), large(false, this) {}
    MempoolId id;
    int use_count = 1;  // captures and pool handles that still use it
    int segments = 0;   // device allocations (cudaMalloc'ed or expandable segments) it holds
    BlockPool small;
    BlockPool large;
};

// One reserved range of address space that a pool of one stream grows into, page by page (PyTorch's
// ExpandableSegment). handles[i] is the physical memory mapped at page i (0: none).
struct ExpandableSegment {
    uintptr_t base = 0;
    size_t page = 0;   // bytes per page: 2 MiB (small pool) or 20 MiB (large pool), granularity-rounded
    size_t pages = 0;  // the range holds this many pages
    Stream stream = 0;
    std::vector<PhysHandle> handles;
    size_t mapped_bytes = 0;
    size_t size() const noexcept { return page * pages; }
};

class DeviceCachingAllocator {
public:
    DeviceCachingAllocator(DeviceBackend& backend, int device, const AllocatorConfig& config,
                           const std::atomic<bool>& expandable)
        : backend_(backend),
          device_(device),
          config_(config),
          expandable_on_(expandable),
          small_(true, nullptr),
          large_(false, nullptr) {
        stats_.max_split_size = max_split_size_stat(config_);
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
        // Expandable segments are forgotten, like cudaMalloc'ed ones: no device calls at exit.
    }

    /// A block's address, entered in the live-block map; nullptr with *error set.
    void* malloc(size_t requested, Stream stream, SiteId site, const std::shared_ptr<const OomRescue>* rescue_slot,
                 int* error, OomReport* oom, AllocatedBlock* out);
    /// Takes the live block at ptr out of the map, calls before_reuse(ctx) and returns the block
    /// to the cache, all under the lock. False when ptr is not a live block of this device.
    bool free(uintptr_t ptr, void (*before_reuse)(void*), void* ctx, SiteId free_site);
    bool record_stream(uintptr_t ptr, Stream stream);
    bool block_sizes(uintptr_t ptr, size_t* size, size_t* requested) const;
    bool empty_cache();
    int set_memory_fraction(double fraction);
    double memory_fraction() const;
    AllocatorConfig config() const {
        std::lock_guard<FutexLock> lock(mu_);
        return config_;
    }
    void set_config(const AllocatorConfig& config) {
        std::lock_guard<FutexLock> lock(mu_);
        config_ = config;
        stats_.max_split_size = max_split_size_stat(config_);
    }
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
    // The memory history (history.cpp).
    void set_history(const HistoryConfig& config);
    void set_user_metadata(std::string text);
    std::string user_metadata() const;
    DeviceSnapshot take_snapshot(MempoolId pool, bool include_trace);
    std::string check_invariants() const;
    void lock() { mu_.lock(); }
    void unlock() { mu_.unlock(); }

private:
    struct Segment {
        Block* head;  // the block at the segment's base address
        size_t size;  // of an expandable segment: its whole reserved range
        BlockPool* pool;
        ExpandableSegment* expandable;  // nullptr: a cudaMalloc'ed segment
        bool oversize;                  // counted in oversize_segments
        SiteId site = 0;                // the allocation that made the pool grow
        bool context = false;           // made while the history kept stacks
    };
    struct Capture {
        MempoolId id;
        StreamFilter filter;
        std::thread::id thread;  // that began it
    };

    /// PyTorch's max_split_size statistic: the limit in bytes, -1 (SIZE_MAX as int64) when none.
    static int64_t max_split_size_stat(const AllocatorConfig& c) {
        return c.max_split_size == SIZE_MAX ? -1 : static_cast<int64_t>(c.max_split_size);
    }
    size_t round_size(size_t size) const;
    static size_t segment_size(size_t size);
    bool capture_underway() const { return !captures_.empty() || backend_.any_capture_active(device_); }

    Block* try_allocate(size_t size, Stream stream, bool expandable, int* error, size_t* seg_size);
    BlockPool& pool_for(size_t size, Stream stream);
    Block* take_free_block(BlockPool& pool, Stream stream, size_t size, bool expandable);
    Block* alloc_segment(BlockPool& pool, Stream stream, size_t size, int* error);
    Block* grow(BlockPool& pool, Stream stream, size_t size, size_t seg_size, bool expandable, int* error);
    void hand_out(Block* b, size_t size, size_t requested, SiteId site, bool expandable);
    void free_locked(Block* b);
    bool should_split(const Block* b, size_t size, bool expandable) const;
    void free_block(Block* b);
    /// Merges the cached neighbour `src` into `dst`; the bytes it added (0: not merged).
    size_t try_merge(Block* dst, Block* src);
    void insert_events(Block* b);
    void process_events();
    void synchronize_and_free_events();
    bool release_segment(Block* b);
    void release_pool_blocks(BlockPool& pool);
    bool release_oversize_blocks(BlockPool& pool, Stream stream, size_t size);
    bool release_cached_blocks();
    /// garbage_collection_threshold is in effect: set, and a memory fraction set.
    bool gc_on() const noexcept { return config_.garbage_collection_threshold > 0.0 && fraction_bytes_ > 0; }
    /// Over the threshold: whole cached segments of the large pool, oldest first, back to the device.
    void garbage_collect();

    // Expandable segments (caching_allocator_expandable.cpp).
    bool vmm_usable();
    Block* alloc_expandable(BlockPool& pool, Stream stream, size_t size, int* error);
    Block* find_expandable_block(BlockPool& pool, Stream stream, size_t size, int* error);
    bool map_block(Block* to_map, size_t size, int* error);
    bool unmap_block(Block* b);
    void release_expandable_segment(Block* b);
    int map_pages(ExpandableSegment& es, size_t begin, size_t end);
    // A new free block of `es` linked between prev and next (either may be null), in its set.
    Block* new_piece(ExpandableSegment& es, BlockPool& pool, uintptr_t ptr, size_t size, bool mapped, Block* prev,
                     Block* next);
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
        if (spare_blocks_.size() < kMaxSpareBlocks)
            spare_blocks_.push_back(b);
        else
            delete b;
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
    AllocatorConfig config_;                  // replaced under the lock (set_config)
    const std::atomic<bool>& expandable_on_;  // the allocator's expandable_segments setting
    mutable FutexLock mu_;                    // the device lock (common/futex_lock.h)

    BlockPool small_;
    BlockPool large_;
    std::map<MempoolId, std::unique_ptr<PrivatePool>> pools_;
    std::set<MempoolId> freeable_;   // pools with no uses left, freed at the next release
    std::vector<Capture> captures_;  // begun and not ended, oldest first
    std::map<uintptr_t, Segment> segments_;
    // The blocks handed out: address -> block. Under the device lock, so that malloc and free
    // take one lock each (PyTorch's frees name the device the block was allocated on).
    PtrMap live_;

    // Events recorded at free, per stream in recording order (a later event on a stream cannot
    // complete before an earlier one, so the scan of a stream stops at the first pending one).
    std::unordered_map<Stream, std::deque<std::pair<Event, Block*>>> outstanding_;
    std::vector<Block*> deferred_;  // freed during a capture, with uses on other streams
    std::vector<Event> free_events_;
    std::vector<Block*> spare_blocks_;
    std::vector<std::unique_ptr<ExpandableSegment>> expandable_;
    enum class Vmm { Unknown, Usable, Unusable } vmm_ = Vmm::Unknown;
    size_t granularity_ = 0;   // of physical memory on this device (vmm_usable)
    size_t total_memory_ = 0;  // the device's memory: each reserved range is 1 1/8 of it

    // The memory history (history.h): written under the lock; one branch per event while off.
    TraceRing trace_;
    SiteId serving_site_ = 0;  // the allocation being served (its segment's site)
    SiteId freeing_site_ = 0;  // the free being served (history with free stacks), else 0

    size_t limit_ = SIZE_MAX;    // memory-fraction limit on reserved bytes
    size_t fraction_bytes_ = 0;  // the memory fraction's bytes (also at 1.0); 0: no fraction set
    size_t total_ = 0;           // the device's total memory, once a cudaMemGetInfo told it
    DeviceStats stats_;
};

}  // namespace memguard::alloc
