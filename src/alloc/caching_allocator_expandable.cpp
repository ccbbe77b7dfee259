// Expandable segments (PYTORCH_CUDA_ALLOC_CONF expandable_segments:True), as PyTorch's
// ExpandableSegment has them: a pool grows into one reserved range of address space per stream,
// sized 1 1/8 of the device's memory, by mapping physical pages (2 MiB in the small pool, 20 MiB in
// the large one) at the lowest address where the request fits, a free block just before the
// unmapped space included; empty_cache and the retry after an out-of-memory unmap the wholly free
// pages of free blocks, and a range with nothing mapped left is given back.
//
// A block of an expandable segment is mapped (in its pool's `blocks` when free) or unmapped
// (whole pages of address space, in its pool's `unmapped`); blocks merge only with blocks of the
// same kind. reserved_bytes counts mapped bytes; num_device_alloc / num_device_free count
// map_block / unmap_block calls; the segment count leaves expandable segments out (PyTorch's
// statistics).
#include "alloc/caching_allocator_internal.h"

#include <algorithm>

namespace memguard::alloc {

namespace {

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

/// Sets the thread's capture mode to relaxed for its scope: mapping new pages while a capture is
/// in progress is legal then whatever the capture's mode (as for segment_malloc).
class RelaxedMode {
public:
    explicit RelaxedMode(DeviceBackend& backend) : backend_(backend) {
        exchanged_ = backend_.exchange_capture_mode(&mode_) == kSuccess;
    }
    ~RelaxedMode() {
        if (exchanged_) backend_.exchange_capture_mode(&mode_);
    }
    RelaxedMode(const RelaxedMode&) = delete;
    RelaxedMode& operator=(const RelaxedMode&) = delete;

private:
    DeviceBackend& backend_;
    int mode_ = kCaptureModeRelaxed;
    bool exchanged_ = false;
};

}  // namespace

Block* DeviceCachingAllocator::new_piece(ExpandableSegment& es, BlockPool& pool, uintptr_t ptr, size_t size,
                                         bool mapped, Block* prev, Block* next) {
    Block* p = new_block();
    p->device = device_;
    p->stream = es.stream;
    p->size = size;
    p->ptr = ptr;
    p->pool = &pool;
    p->mapped = mapped;
    p->expandable = &es;
    p->prev = prev;
    p->next = next;
    if (prev) prev->next = p;
    if (next) next->prev = p;
    if (mapped)
        pool.blocks.insert(p);
    else
        pool.unmapped.insert(p);
    return p;
}

bool DeviceCachingAllocator::vmm_usable() {
    if (vmm_ == Vmm::Unknown) {
        // Asked once per device, at the first allocation that wants an expandable segment. A
        // device or backend without the virtual memory calls keeps cudaMalloc'ed segments.
        size_t g = 0, total = 0;
        const bool ok = backend_.vmm_granularity(device_, &g) == kSuccess && g > 0 &&
                        backend_.total_memory(device_, &total) == kSuccess && total > 0;
        vmm_ = ok ? Vmm::Usable : Vmm::Unusable;
        granularity_ = g;
        total_memory_ = total;
    }
    return vmm_ == Vmm::Usable;
}

Block* DeviceCachingAllocator::alloc_expandable(BlockPool& pool, Stream stream, size_t size, int* error) {
    Block* c = find_expandable_block(pool, stream, size, error);
    if (!c) return nullptr;
    // c starts a run of free address space of at least `size` bytes: unmapped, or a free block
    // followed by unmapped space. Pages are mapped until the run's first block holds the request
    // (each map_block merges the new pages with the free block before them).
    if (!c->mapped && !map_block(c, std::min(c->size, size), error)) return nullptr;
    while (c->size < size) {
        Block* next = c->next;  // unmapped: a free block's neighbours are never free and mapped
        if (!map_block(next, std::min(size - c->size, next->size), error)) return nullptr;
        c = next;  // has absorbed c
    }
    c->pool->blocks.erase(c);
    return c;
}

Block* DeviceCachingAllocator::find_expandable_block(BlockPool& pool, Stream stream, size_t size, int* error) {
    auto has_room = [size](const Block* b) {
        size_t bytes = 0;
        for (; b && bytes < size && b->is_cached(); b = b->next) bytes += b->size;
        return bytes >= size;
    };
    Block key;
    key.stream = stream;
    for (auto it = pool.unmapped.lower_bound(&key); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
        Block* c = *it;
        if (c->prev && c->prev->is_cached()) c = c->prev;  // the free block right before the gap
        if (has_room(c)) return c;
    }
    // A new range for this pool and stream, 1 1/8 of the device's memory: room to unmap pages
    // in the middle and map new ones at the end.
    const size_t page = round_up(pool.small ? kSmallBuffer : kLargeBuffer, granularity_);
    const size_t pages = (total_memory_ + total_memory_ / 8 + page - 1) / page;
    uintptr_t va = 0;
    int err;
    {
        RelaxedMode relaxed(backend_);
        err = backend_.vmm_reserve(device_, page * pages, &va);
    }
    if (err != kSuccess || va == 0) {
        *error = err != kSuccess ? err : kErrorMemoryAllocation;
        return nullptr;
    }
    auto es = std::make_unique<ExpandableSegment>();
    es->base = va;
    es->page = page;
    es->pages = pages;
    es->stream = stream;
    es->handles.assign(pages, 0);
    Block* b = new_piece(*es, pool, va, es->size(), false, nullptr, nullptr);
    segments_[va] =
        Segment{b, es->size(), &pool, es.get(), false, serving_site_, trace_.context() >= ContextLevel::State};
    if (pool.owner) pool.owner->segments++;
    expandable_.push_back(std::move(es));
    return b;
}

int DeviceCachingAllocator::map_pages(ExpandableSegment& es, size_t begin, size_t end) {
    RelaxedMode relaxed(backend_);
    size_t created = begin, mapped = begin;
    int err = kSuccess;
    for (; created < end; ++created) {
        PhysHandle h = 0;
        err = backend_.vmm_create(device_, es.page, &h);
        if (err != kSuccess) break;
        es.handles[created] = h;
    }
    if (err == kSuccess) {
        for (; mapped < end; ++mapped) {
            err = backend_.vmm_map(device_, es.base + mapped * es.page, es.page, es.handles[mapped]);
            if (err != kSuccess) break;
        }
    }
    if (err == kSuccess) err = backend_.vmm_set_access(device_, es.base + begin * es.page, (end - begin) * es.page);
    if (err == kSuccess) return kSuccess;
    // Nothing of a failed call stays: what was mapped is unmapped and the handles are released.
    // An unmap needs no synchronization here: nothing ever used these pages.
    for (size_t i = begin; i < mapped; ++i) backend_.vmm_unmap(device_, es.base + i * es.page, es.page);
    for (size_t i = begin; i < created; ++i) {
        backend_.vmm_release(device_, es.handles[i]);
        es.handles[i] = 0;
    }
    return err;
}

bool DeviceCachingAllocator::map_block(Block* to_map, size_t size, int* error) {
    ExpandableSegment& es = *to_map->expandable;
    const size_t begin = (to_map->ptr - es.base) / es.page;
    const size_t end = (to_map->ptr + size - es.base + es.page - 1) / es.page;
    const int err = map_pages(es, begin, end);
    if (err != kSuccess) {
        *error = err;
        return false;
    }
    const size_t bytes = (end - begin) * es.page;
    es.mapped_bytes += bytes;
    BlockPool& pool = *to_map->pool;
    trace_.record(TraceAction::SegmentMap, to_map->ptr, bytes, es.stream, serving_site_,
                  trace_.context() >= ContextLevel::Alloc, pool.owner ? pool.owner->id : MempoolId{});
    pool.unmapped.erase(to_map);
    to_map->mapped = true;
    if (bytes < to_map->size) {
        new_piece(es, pool, to_map->ptr + bytes, to_map->size - bytes, false, to_map, to_map->next);
        to_map->size = bytes;
    }
    try_merge(to_map, to_map->prev);
    try_merge(to_map, to_map->next);
    pool.blocks.insert(to_map);
    stat_add(stats_.reserved_bytes, &pool, bytes);
    stats_.num_device_alloc++;
    return true;
}

bool DeviceCachingAllocator::unmap_block(Block* b) {
    ExpandableSegment& es = *b->expandable;
    // The wholly free pages inside the block.
    const size_t begin = (b->ptr - es.base + es.page - 1) / es.page;
    size_t end = (b->ptr + b->size - es.base) / es.page;
    if (begin >= end) return false;
    // cuMemUnmap does not wait for the work queued on the memory, as cudaFree does.
    if (backend_.stream_synchronize(device_, es.stream) != kSuccess) return false;
    for (size_t i = begin; i < end; ++i) {
        if (backend_.vmm_unmap(device_, es.base + i * es.page, es.page) != kSuccess) {
            end = i;  // the pages before stay unmapped; this one and the rest stay mapped
            break;
        }
        backend_.vmm_release(device_, es.handles[i]);  // a failure leaks the handle, never the range
        es.handles[i] = 0;
    }
    if (begin >= end) return false;
    const uintptr_t start = es.base + begin * es.page;
    const size_t bytes = (end - begin) * es.page;
    es.mapped_bytes -= bytes;
    BlockPool& pool = *b->pool;
    if (trace_.enabled()) {
        const Segment& seg = segments_.at(es.base);
        trace_.record(TraceAction::SegmentUnmap, start, bytes, es.stream, seg.site, seg.context,
                      pool.owner ? pool.owner->id : MempoolId{});
    }
    pool.blocks.erase(b);
    // A block's head never moves here: a block starting at the segment's base starts on a page.
    if (start > b->ptr) new_piece(es, pool, b->ptr, start - b->ptr, true, b->prev, b);
    if (b->ptr + b->size > start + bytes)
        new_piece(es, pool, start + bytes, b->ptr + b->size - start - bytes, true, b, b->next);
    b->ptr = start;
    b->size = bytes;
    b->mapped = false;
    try_merge(b, b->prev);
    try_merge(b, b->next);
    pool.unmapped.insert(b);
    stat_sub(stats_.reserved_bytes, &pool, bytes);
    stats_.num_device_free++;
    return true;
}

void DeviceCachingAllocator::release_expandable_segment(Block* b) {
    ExpandableSegment* es = b->expandable;
    if (backend_.vmm_address_free(device_, es->base, es->size()) != kSuccess) return;  // kept for reuse
    BlockPool* pool = b->pool;
    pool->unmapped.erase(b);
    if (pool->owner) pool->owner->segments--;
    segments_.erase(es->base);
    expandable_.erase(std::find_if(expandable_.begin(), expandable_.end(),
                                   [es](const std::unique_ptr<ExpandableSegment>& p) { return p.get() == es; }));
    recycle(b);
}

}  // namespace memguard::alloc
