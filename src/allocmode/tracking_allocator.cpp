#include "allocmode/tracking_allocator.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <new>
#include <unistd.h>

#include "allocmode/cuda_backend.h"
#include "allocmode/device_processes.h"
#include "allocmode/torch_alloc_conf.h"
#include "allocmode/torch_bridge.h"
#include "allocmode/torch_error.h"
#include "allocmode/torch_oom_message.h"
#include "allocmode/torch_snapshot.h"
#include "common/errno_keeper.h"
#include "common/log.h"
#include "cuda/real.h"
#include "python/allocator_mode.h"
#include "track/clock.h"

namespace memguard::allocmode {

namespace {

using track::Recorder;

std::atomic<alloc::CachingAllocator*> g_allocator{nullptr};
std::mutex g_create_mu;
std::vector<std::string> g_pending_settings;  // _set_allocator_settings before the allocator (g_create_mu)
thread_local bool t_rescue_ran = false;

alloc::CachingAllocator* create_allocator(Recorder& rec, int device_count) {
    std::lock_guard<std::mutex> lock(g_create_mu);
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (a) return a;
    int n = device_count > 0 ? device_count : real_device_count();
    if (n <= 0) return nullptr;
    // The settings of PyTorch's allocator that memguard's has (max_split_size_mb, ...); the others
    // are named once.
    TorchAllocConf conf = parse_torch_alloc_conf(secure_getenv("PYTORCH_CUDA_ALLOC_CONF"));
    for (const std::string& note : conf.notes) MG_LOG_WARN("{}", note);
    alloc::AllocatorConfig config = core_settings(conf, alloc::AllocatorConfig{});
    // Settings the program changed before CUDA started, read as PyTorch reads them: over the
    // environment's, one call after the other.
    for (const std::string& text : g_pending_settings)
        config = core_settings(parse_torch_alloc_conf(text.c_str()), config);
    g_pending_settings.clear();
    static CudaBackend* backend = new CudaBackend(rec);  // never destroyed, like the allocator
    a = new alloc::CachingAllocator(*backend, n, config);
    a->set_oom_rescue([&rec](const alloc::OomRescueInfo& info) {
        t_rescue_ran = oom_rescue_collect(info.capture_underway || rec.captures().active() > 0);
        return t_rescue_ran;
    });
    g_allocator.store(a, std::memory_order_release);
    MG_LOG_DEBUG("memguard's caching allocator created for {} device(s)", n);
    return a;
}

uint64_t site_of(uint32_t stack_id, uint32_t python_stack_id) { return (uint64_t{python_stack_id} << 32) | stack_id; }

/// PyTorch's message with memguard's figures (torch_oom_message.h), then memguard's own detail.
std::string oom_message(const alloc::OomReport& r, const std::string& report_path) {
    TorchOomFigures f;
    f.device = r.device;
    f.alloc_size = r.segment_size ? r.segment_size : r.rounded ? r.rounded : r.requested;
    f.device_total = r.device_total;
    f.device_free = r.device_free;
    f.free_known = !r.capture_underway;
    std::vector<DeviceProcess> procs;
    if (device_processes(r.device, &procs)) f.processes = process_memory_text(procs, static_cast<unsigned>(getpid()));
    f.allowed = r.limit_bytes;
    f.allocated = r.allocated_bytes;
    f.reserved = r.reserved_bytes;
    f.private_pool_cached = r.private_pool_cached;
    std::string m = torch_oom_message(f);
    m += "\nmemguard (MEMGUARD_ALLOCATOR=memguard): requested " + std::to_string(r.requested) + " bytes (a block of " +
         std::to_string(r.rounded) + ")";
    if (r.over_limit) m += ", refused by the memory fraction's limit of " + std::to_string(r.limit_bytes) + " bytes";
    if (r.capture_underway) m += ", during a CUDA graph capture (no cached memory can be returned then)";
    m += report_path.empty() ? std::string("") : "; the live blocks by allocation site: memguard oom " + report_path;
    return m;
}

/// Throws the OOM as c10::OutOfMemoryError when the process's libc10 allows it. The lookup runs
/// at the first failure, not before (torch loads libc10 RTLD_LOCAL, so find_real searches the
/// loaded objects one by one), and a complete result is kept: the symbols never change.
[[noreturn]] void throw_oom(const alloc::OomReport& r, const std::string& report_path) {
    static std::atomic<bool> resolved{false};
    static TorchOomSymbols syms;
    static std::mutex mu;
    std::string message = oom_message(r, report_path);
    if (!resolved.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(mu);
        if (!resolved.load(std::memory_order_relaxed)) {
            TorchOomSymbols found = resolve_torch_oom(&cuda::find_real);
            if (found.usable()) {
                syms = found;
                resolved.store(true, std::memory_order_release);
            } else {
                static std::atomic<bool> said{false};
                if (!said.exchange(true)) {
                    MG_LOG_DEBUG("c10::OutOfMemoryError cannot be built here (no libc10 with the cxx11 ABI); "
                                 "out-of-memory failures throw std::bad_alloc");
                }
                throw OutOfMemory(std::move(message));
            }
        }
    }
    throw_torch_oom(syms, message);
}

void record_oom(Recorder& rec, const alloc::OomReport& r, uint32_t sid, uint32_t py) {
    std::vector<Recorder::OomSite> sites;
    sites.reserve(r.live_by_site.size());
    for (const alloc::SiteUsage& u : r.live_by_site) {
        sites.push_back({static_cast<uint32_t>(u.site), static_cast<uint32_t>(u.site >> 32), u.blocks, u.bytes});
    }
    Recorder::AllocatorOom o;
    o.device = r.device;
    o.requested = r.requested;
    o.rounded = r.rounded;
    o.allocated = r.allocated_bytes;
    o.reserved = r.reserved_bytes;
    o.limit = r.limit_bytes;
    o.stack_id = sid;
    o.python_stack_id = py;
    o.rescued = r.capture_underway ? format::Rescue::None
                                   : (r.rescue_called && t_rescue_ran ? format::Rescue::Gc : format::Rescue::Cache);
    o.sites = sites.data();
    o.site_count = sites.size();
    rec.record_allocator_oom(o);
}

/// Applies a stats reset of the allocator to `device`; true when the device is valid (before the
/// allocator exists there is nothing to reset).
bool reset_stats_of(int device, void (alloc::CachingAllocator::*reset)(int)) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (!a) return device >= 0;
    if (device < 0 || device >= a->device_count()) return false;
    (a->*reset)(device);
    return true;
}

void warn_unknown_pointer(void* ptr) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
        MG_LOG_WARN("memguard_free: {} was not allocated by memguard's allocator; ignored (reported once)", ptr);
    }
}

}  // namespace

alloc::CachingAllocator* existing_allocator() noexcept { return g_allocator.load(std::memory_order_acquire); }

alloc::CachingAllocator* allocator(Recorder& rec, int device_count) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    return a ? a : create_allocator(rec, device_count);  // on every allocation: the created case inline
}

void* allocate(Recorder& rec, size_t size, int device, uintptr_t stream, const uintptr_t* ret_slot) {
    alloc::CachingAllocator* a = allocator(rec);
    if (!a) {
        alloc::OomReport none;
        none.requested = size;
        none.device = device;
        throw_oom(none, "");
    }
    SegmentContext ctx;
    ctx.stream = stream;
    if (rec.active()) {
        ErrnoKeeper keep_errno;
        ctx.stack_id = rec.capture_interned_stack(ret_slot);  // starts the report
        ctx.python_stack_id = rec.python_stack_id();
        ctx.record = rec.recording();
    }
    SegmentContextScope scope(ctx);
    int err = 0;
    alloc::OomReport oom;
    alloc::AllocatedBlock block;
    t_rescue_ran = false;
    void* p = a->malloc(device, size, stream, site_of(ctx.stack_id, ctx.python_stack_id), &err, &oom, &block);
    if (!p) {
        if (ctx.record) {
            record_oom(rec, oom, ctx.stack_id, ctx.python_stack_id);
            explain_allocator_oom(rec, oom, ctx.stack_id, ctx.python_stack_id);
        }
        if (err != alloc::kErrorMemoryAllocation) {
            MG_LOG_WARN("memguard_alloc: allocating {} bytes on device {} failed with CUDA error {}", size, device,
                        err);
        }
        // PyTorch's OOM observers (torch._C._cuda_attach_out_of_memory_observer), for an
        // out-of-memory failure as PyTorch's (another CUDA error is no OOM there): no allocator
        // lock is held here.
        if (err == alloc::kErrorMemoryAllocation) notify_oom_observers(oom);
        throw_oom(oom, ctx.record ? rec.report_path() : std::string());
    }
    if (ctx.record) {
        ErrnoKeeper keep_errno;
        Recorder::TensorBlock b;
        b.addr = reinterpret_cast<uintptr_t>(p);
        b.size = block.size;
        b.requested = block.requested;
        b.device = device;
        b.stream = ctx.stream;
        b.stack_id = ctx.stack_id;
        b.python_stack_id = ctx.python_stack_id;
        b.private_pool = block.pool != alloc::MempoolId{};
        if (b.private_pool) {
            b.pool_first = block.pool.first;
            b.pool_second = block.pool.second;
            b.capture_id = rec.captures().owner_for(track::make_stream_arg(ctx.stream, false), track::current_tid()).id;
        }
        rec.record_block_alloc(b);
    }
    return p;
}

void deallocate(Recorder& rec, void* ptr, int device) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    // The t record is written once the block is taken out of the pointer map and before it can
    // be handed out again (under the device's lock), so the next T of this address always follows
    // it in the report. PyTorch frees from a noexcept deleter: nothing may escape (the record
    // itself cannot throw: the report buffer drops records when host memory runs out). `device`
    // is the one PyTorch recorded at allocation: the block is looked for there first.
    bool freed = false;
    try {
        const alloc::SiteId free_site = history_free_site(rec);  // 0 unless the memory history wants it
        freed = a &&
                a->free(
                    ptr,
                    [&] {  // record_block_free writes only while recording
                        ErrnoKeeper keep_errno;
                        rec.record_block_free(reinterpret_cast<uintptr_t>(ptr), python::collecting_on_this_thread());
                    },
                    device, free_site);
    } catch (...) {
        // Out of host memory inside the core (its free lists): the block stays out of the
        // cache, which loses its memory but not the program.
        return;
    }
    if (!freed) warn_unknown_pointer(ptr);
}

std::vector<std::pair<std::string, int64_t>> stats_of(int device) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (!a) return device >= 0 ? alloc::memory_stats_items(alloc::DeviceStats{}) : decltype(stats_of(0)){};
    if (device < 0 || device >= a->device_count()) return {};
    return alloc::memory_stats_items(a->stats(device));
}

std::vector<std::string> apply_torch_settings(const char* text) {
    TorchAllocConf conf = parse_torch_alloc_conf(text);
    std::lock_guard<std::mutex> lock(g_create_mu);  // orders it with the allocator's creation
    if (alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire)) {
        const alloc::AllocatorConfig config = core_settings(conf, a->config());
        a->set_config(config);
        // From the next allocation on; blocks already in expandable segments stay where they are.
        a->set_expandable_segments(config.expandable_segments);
    } else {
        g_pending_settings.emplace_back(text ? text : "");
    }
    return conf.notes;
}

bool reset_peak_of(int device) { return reset_stats_of(device, &alloc::CachingAllocator::reset_peak_stats); }

bool reset_accumulated_of(int device) {
    return reset_stats_of(device, &alloc::CachingAllocator::reset_accumulated_stats);
}

void tensor_counters(int device, uint64_t* live, uint64_t* peak) {
    *live = *peak = 0;
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (!a) return;
    for (int d = 0; d < a->device_count(); ++d) {
        if (device >= 0 && d != device) continue;
        const alloc::DeviceStats stats = a->stats(d);  // a copy, taken under the device's lock
        const alloc::Stat& s = stats.allocated_bytes[alloc::kStatAll];
        *live += static_cast<uint64_t>(s.current);
        *peak += static_cast<uint64_t>(s.peak);
    }
}

void reset_tensor_peak(int device) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (!a) return;
    for (int d = 0; d < a->device_count(); ++d) {
        if (device < 0 || d == device) a->reset_peak_stats(d);
    }
}

void lock_for_fork() {
    if (alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire)) a->lock_for_fork();
}

void unlock_after_fork() {
    if (alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire)) a->unlock_after_fork();
}

}  // namespace memguard::allocmode
