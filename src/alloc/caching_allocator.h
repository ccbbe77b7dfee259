// memguard's caching allocator core: per-device pools of device segments, split into blocks,
// reused in stream order, with private pools for CUDA graph captures. It only talks to the device
// through a DeviceBackend, so the tests run it against a fake one. The design and how it relates
// to PyTorch's CUDACachingAllocator are in docs/architecture.md ("Allocator").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "alloc/backend.h"
#include "alloc/stats.h"

namespace memguard::alloc {

/// PyTorch's MempoolId_t: {capture id, 0} for a graph's own pool, {0, uid} for a pool made by
/// graph_pool_handle() or a MemPool. {0, 0} means "no private pool".
struct MempoolId {
    uint64_t first = 0;
    uint64_t second = 0;
    bool operator==(const MempoolId& o) const noexcept { return first == o.first && second == o.second; }
    bool operator!=(const MempoolId& o) const noexcept { return !(*this == o); }
    bool operator<(const MempoolId& o) const noexcept { return first != o.first ? first < o.first : second < o.second; }
};

/// Decides which allocations go to a private pool (PyTorch passes one that matches the capturing
/// stream, or the capturing thread). Called with the allocator lock held: it must not allocate
/// through this allocator or take other locks.
using StreamFilter = std::function<bool(Stream)>;

/// An opaque id of the allocation site, chosen by the caller (the bridge passes a stack id).
using SiteId = uint64_t;

struct AllocatorConfig {
    /// Blocks of this size or more are never split, and cached blocks this large are not used
    /// for smaller requests (PYTORCH_CUDA_ALLOC_CONF max_split_size_mb). SIZE_MAX: no limit.
    size_t max_split_size = SIZE_MAX;
    /// A request of max_split_size or more may use a cached unsplittable block at most this much
    /// larger (max_non_split_rounding_mb).
    size_t max_non_split_rounding_size = 20u << 20;
    /// Round requests above 1 MiB up to one of this many steps per power-of-two interval
    /// (roundup_power2_divisions); 0 or 1: plain 512-byte rounding.
    unsigned roundup_power2_divisions = 0;
    /// Grow the pools with the driver's virtual memory calls (PYTORCH_CUDA_ALLOC_CONF
    /// expandable_segments:True): one reserved range per pool and stream, mapped page by page.
    /// CachingAllocator::set_expandable_segments changes it at run time.
    bool expandable_segments = false;
    /// Above this share of the memory-fraction limit, cached whole segments of the large pool
    /// unused the longest are returned to the device before a new one is allocated
    /// (garbage_collection_threshold; as PyTorch's, only while a memory fraction is set). 0: off.
    double garbage_collection_threshold = 0.0;
};

/// What the allocator hands the OOM rescue callback.
struct OomRescueInfo {
    int device = 0;
    size_t size = 0;  // the request
    Stream stream = 0;
    bool capture_underway = false;  // a capture is in progress (the callback must not collect)
};
/// Called once per failing allocation, with no allocator lock held, after the cache was freed.
/// Returns true when it may have freed memory (the allocation is then tried once more). It may
/// free blocks through this allocator.
using OomRescue = std::function<bool(const OomRescueInfo&)>;

struct SiteUsage {
    SiteId site = 0;
    uint64_t bytes = 0;  // block sizes (rounded)
    uint64_t blocks = 0;
};

/// Why an allocation failed, and what held the memory.
struct OomReport {
    int device = 0;
    int error = kSuccess;  // the backend's error, or kErrorMemoryAllocation
    size_t requested = 0;
    size_t rounded = 0;       // the block size the request needed
    size_t segment_size = 0;  // the device allocation it tried
    size_t allocated_bytes = 0;
    size_t reserved_bytes = 0;
    size_t limit_bytes = 0;   // memory-fraction limit, 0 when none
    bool over_limit = false;  // refused by the memory fraction, not by the device
    size_t device_free = 0;   // cudaMemGetInfo (0 when a capture prevented asking)
    /// cudaMemGetInfo's total; during a capture the total learned by an earlier call (0 if none).
    size_t device_total = 0;
    /// Free cached bytes held by private pools (graphs, MemPools): PyTorch's message counts them
    /// as allocated ("allocated in private pools").
    size_t private_pool_cached = 0;
    bool capture_underway = false;
    bool rescue_called = false;
    std::vector<SiteUsage> live_by_site;  // allocated blocks by site, largest first
};

/// What malloc() handed out.
struct AllocatedBlock {
    size_t size = 0;       // the block's size (rounded)
    size_t requested = 0;  // what the caller asked for
    MempoolId pool;        // {0,0}: the default pools
};

/// One block, as snapshot() reports it.
struct BlockInfo {
    uintptr_t segment = 0;  // base address of its device allocation
    uintptr_t ptr = 0;
    size_t size = 0;
    size_t requested = 0;  // 0 when free (a block waiting for events keeps it, as in PyTorch's stats)
    Stream stream = 0;
    SiteId site = 0;
    MempoolId pool;  // {0,0}: the default pools
    bool small_pool = false;
    /// In an expandable segment. `segment` is then the start of the block's mapped run: PyTorch
    /// reports each contiguous mapped range of an expandable segment as one segment. Unmapped
    /// address space is not reported.
    bool expandable = false;
    enum class State { Allocated, Pending, Free } state = State::Free;  // Pending: waits for events
};

class DeviceCachingAllocator;
struct HistoryConfig;   // alloc/history.h
struct DeviceSnapshot;  // alloc/history.h

/// All devices' allocators, each with its map of live blocks. Thread-safe.
class CachingAllocator {
public:
    CachingAllocator(DeviceBackend& backend, int device_count, AllocatorConfig config = {});
    /// Forgets everything without device calls (at exit the device may already be gone).
    ~CachingAllocator();
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    int device_count() const noexcept { return static_cast<int>(devices_.size()); }

    /// A block of at least `size` bytes for use on `stream`. Returns nullptr with *error set
    /// (kErrorMemoryAllocation when out of memory, with *oom filled when given) or for size 0
    /// with *error = kSuccess. *block, when given, is set to the block's sizes and the private
    /// pool it came from ({0,0}: the default pools), read before another thread can free it.
    void* malloc(int device, size_t size, Stream stream, SiteId site = 0, int* error = nullptr,
                 OomReport* oom = nullptr, AllocatedBlock* block = nullptr);
    /// Returns a block. False when ptr is not a live block of this allocator.
    bool free(void* ptr) {
        return free(ptr, [] {});
    }
    /// free() that calls `before_reuse()` once ptr is known to be a live block, after no other
    /// free of it can succeed and before the block can be handed out again: a caller records the
    /// free there, so a record of the address's next allocation always comes after it. False,
    /// without calling it, when ptr is not a live block. `before_reuse` runs with the device's
    /// lock held: it must not call into this allocator. `device_hint`: the device ptr is on, when
    /// the caller knows it (looked at first; -1: unknown). `free_site`: the free's own site, for
    /// the memory history when it keeps free stacks (0: none).
    template <typename F>
    bool free(void* ptr, F&& before_reuse, int device_hint = -1, SiteId free_site = 0) {
        using Fn = std::remove_reference_t<F>;
        return free_impl(
            ptr, device_hint, [](void* f) { (*static_cast<Fn*>(f))(); },
            const_cast<void*>(static_cast<const void*>(&before_reuse)), free_site);
    }
    /// The block is also used on `stream`: it is reused only after that stream's work queued
    /// before free() completed (Tensor.record_stream).
    bool record_stream(void* ptr, Stream stream);
    /// The block size and requested size of a live block; false when unknown.
    bool block_sizes(void* ptr, size_t* size, size_t* requested) const;

    /// Returns the cached segments of every device that are wholly free (torch.cuda.empty_cache).
    /// Returns false, changing nothing, on a device where a capture is in progress.
    bool empty_cache();
    bool empty_cache(int device);
    /// Allocations on `device` fail once reserved memory would exceed fraction * total memory
    /// (1.0: no limit, as PyTorch's).
    int set_memory_fraction(int device, double fraction);
    /// The limit as a fraction of the device's total memory, as PyTorch's
    /// getMemoryFraction answers it: 1.0 when none is set.
    double memory_fraction(int device) const;

    /// The settings in effect (the same on every device).
    AllocatorConfig config() const;
    /// Applies new settings to every device (torch.cuda.memory._set_allocator_settings): later
    /// allocations and frees follow them; blocks and segments keep what they were counted as
    /// (oversize or not) when they were made. The max_split_size statistic follows.
    void set_config(const AllocatorConfig& config);

    /// Allocations on `device` whose stream `filter` accepts come from private pool `id` (created,
    /// or its use count raised) until end_allocate_to_pool(id). The newest matching pool wins.
    bool begin_allocate_to_pool(int device, MempoolId id, StreamFilter filter);
    /// Ends the routing the calling thread began into `id` (else the newest one into `id`: two
    /// threads may capture into one shared pool at once). False when none is in progress.
    bool end_allocate_to_pool(int device, MempoolId id);
    /// Drops one use of the pool; at zero its segments are returned once its blocks are free (at
    /// empty_cache or when an allocation needs the memory).
    bool release_pool(int device, MempoolId id);

    void set_oom_rescue(OomRescue rescue);

    /// expandable_segments at run time (torch.cuda.memory._set_allocator_settings): from the next
    /// allocation on, new memory comes from expandable segments (true) or cudaMalloc'ed ones
    /// (false). Expandable blocks already cached are not handed out while it is off; they go on
    /// being freed, unmapped and reused once it is on again, as in PyTorch.
    void set_expandable_segments(bool enabled) noexcept { expandable_.store(enabled, std::memory_order_relaxed); }
    bool expandable_segments() const noexcept { return expandable_.load(std::memory_order_relaxed); }

    DeviceStats stats(int device) const;
    void reset_peak_stats(int device);
    void reset_accumulated_stats(int device);

    /// fork(2) support: takes every device's lock (in device order) / releases them. A fork while
    /// another thread holds a device lock would leave the child's allocator locked for good.
    void lock_for_fork();
    void unlock_after_fork();

    std::vector<BlockInfo> snapshot(int device) const;
    /// Memory history on every device (alloc/history.h, history.cpp); takes each device's lock.
    void set_history(const HistoryConfig& config);
    /// The user metadata `device`'s later trace entries carry (torch.cuda.memory's
    /// _set_memory_metadata / _get_memory_metadata); "" for none or an unknown device.
    void set_user_metadata(int device, std::string text);
    std::string user_metadata(int device) const;
    /// `device`'s segments (only private pool `pool`'s unless it is {0,0}) and, with
    /// `include_trace`, its trace, copied under its lock; records a Snapshot entry first. Empty
    /// for an unknown device.
    DeviceSnapshot take_snapshot(int device, MempoolId pool = {}, bool include_trace = true);
    /// Checks the internal invariants of `device` (blocks tile their segments, no two free
    /// neighbours, pools hold exactly the free blocks, stats equal the sums over blocks).
    /// Returns "" or what is wrong. For tests; takes the device lock.
    std::string check_invariants(int device) const;

private:
    bool free_impl(void* ptr, int device_hint, void (*before_reuse)(void*), void* ctx, SiteId free_site);

    std::atomic<bool> expandable_{false};
    std::vector<std::unique_ptr<DeviceCachingAllocator>> devices_;
    std::shared_ptr<const OomRescue> rescue_;  // read and replaced with std::atomic_load/store
};

}  // namespace memguard::alloc
