// Allocator mode (MEMGUARD_ALLOCATOR=memguard): the functions PyTorch's pluggable-allocator
// interface calls, exported from libmemguard.so, over the allocator core (src/alloc) and the real
// CUDA runtime (cuda_backend.h).
//
//   memguard_alloc / memguard_free      torch.cuda.memory.CUDAPluggableAllocator(path, "memguard_alloc",
//                                       "memguard_free") takes them by name
//   memguard_allocator_init             set_init_fn              (CUDA lazy initialization)
//   memguard_allocator_empty_cache      set_reset_fn             (torch.cuda.empty_cache)
//   memguard_allocator_memory_fraction  set_memory_fraction_fn   (set_per_process_memory_fraction)
//   memguard_allocator_record_stream    set_record_stream_fn     (Tensor.record_stream)
//   memguard_allocator_begin_pool       set_begin_allocate_to_pool   (CUDAGraph::capture_begin, MemPool)
//   memguard_allocator_end_pool         set_end_allocate_to_pool_fn  (capture_end)
//   memguard_allocator_release_pool     set_release_pool             (graph reset, MemPool destruction)
//
// The three pool hooks take C++ types (PyTorch's MempoolId_t is std::pair<unsigned long long,
// unsigned long long>, the filter a std::function by value): they rely on libstdc++'s ABI, which
// PyTorch's wheels share (cxx11 ABI).
//
// Each allocation records a T record (and its segment's A record when the pool grows) with the
// native and Python stacks; each free a t record, written before the block can be reused. An
// allocation that fails after the cache was freed and the rescue ran writes O/o records and
// throws PyTorch's c10::OutOfMemoryError, built by libc10's own constructor (torch_error.h), so
// Python code gets torch.cuda.OutOfMemoryError as with PyTorch's allocator; when libc10 lacks the
// symbols (old-ABI build, no torch) it throws memguard's OutOfMemory, a std::bad_alloc that PyTorch
// turns into a RuntimeError. Returning nullptr is no option: CUDAPluggableAllocator::malloc does
// not check it and would hand out a tensor without memory.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <new>
#include <pthread.h>
#include <utility>

#include "alloc/caching_allocator.h"
#include "common/log.h"
#include "common/torch_alloc_conf.h"
#include "interpose/allocator_api.h"
#include "interpose/cuda_backend.h"
#include "interpose/hook_support.h"
#include "interpose/real.h"
#include "interpose/torch_error.h"
#include "python/allocator_mode.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::interpose {

namespace {

using track::Recorder;
using PoolId = std::pair<unsigned long long, unsigned long long>;  // c10::cuda::MempoolId_t

CudaBackend g_backend;
std::atomic<alloc::CachingAllocator*> g_allocator{nullptr};
std::mutex g_create_mu;
thread_local bool t_rescue_ran = false;

// fork(2): the device locks are taken before the recorder's (a free holds its device lock while
// it appends its t record), so these handlers are registered after the recorder's: prepare
// handlers run in the reverse order of registration.
void allocator_before_fork() {
    if (alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire)) a->lock_for_fork();
}
void allocator_after_fork() {
    if (alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire)) a->unlock_after_fork();
}

/// The allocator, created on first use: at PyTorch's CUDA initialization (init hook, with the
/// device count) or, when used by hand without the hooks, at the first call. Never destroyed:
/// frees may arrive during process teardown.
alloc::CachingAllocator* create_allocator(int device_count);

alloc::CachingAllocator* get_allocator(int device_count = -1) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    return a ? a : create_allocator(device_count);  // on every allocation: the created case inline
}

alloc::CachingAllocator* create_allocator(int device_count) {
    std::lock_guard<std::mutex> lock(g_create_mu);
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (a) return a;
    int n = device_count > 0 ? device_count : real_device_count();
    if (n <= 0) return nullptr;
    // The settings of PyTorch's allocator that memguard's has (max_split_size_mb, ...); the others
    // are named once.
    TorchAllocConf conf = parse_torch_alloc_conf(secure_getenv("PYTORCH_CUDA_ALLOC_CONF"));
    for (const std::string& note : conf.notes) MG_LOG_WARN("{}", note);
    alloc::AllocatorConfig config;
    config.max_split_size = conf.max_split_size;
    config.max_non_split_rounding_size = conf.max_non_split_rounding;
    config.roundup_power2_divisions = conf.roundup_power2_divisions;
    a = new alloc::CachingAllocator(g_backend, n, config);
    a->set_oom_rescue([](const alloc::OomRescueInfo& info) {
        t_rescue_ran = python::oom_rescue_collect(info.capture_underway);
        return t_rescue_ran;
    });
    {
        ErrnoKeeper keep_errno;
        if (pthread_atfork(allocator_before_fork, allocator_after_fork, allocator_after_fork) != 0)
            MG_LOG_WARN("cannot register fork handlers for the allocator; a fork while another thread "
                        "allocates may hang the child");
    }
    g_allocator.store(a, std::memory_order_release);
    MG_LOG_DEBUG("memguard's caching allocator created for {} device(s)", n);
    return a;
}

uint64_t site_of(uint32_t stack_id, uint32_t python_stack_id) {
    return (uint64_t{python_stack_id} << 32) | stack_id;
}

std::string oom_message(const alloc::OomReport& r) {
    char text[512];
    std::snprintf(text, sizeof(text),
                  "CUDA out of memory (memguard allocator, MEMGUARD_ALLOCATOR=memguard): tried to allocate %zu "
                  "bytes on device %d; %zu bytes allocated, %zu reserved%s%s; the report lists the live "
                  "blocks by site (O/o records)",
                  r.requested, r.device, r.allocated_bytes, r.reserved_bytes,
                  r.over_limit ? ", over the memory fraction limit of " : "",
                  r.over_limit ? std::to_string(r.limit_bytes).c_str() : "");
    return text;
}

/// Throws the OOM as c10::OutOfMemoryError when the process's libc10 allows it. The lookup runs
/// at the first failure, not before (torch loads libc10 RTLD_LOCAL, so find_real searches the
/// loaded objects one by one), and a complete result is kept: the symbols never change.
[[noreturn]] void throw_oom(const alloc::OomReport& r) {
    static std::atomic<bool> resolved{false};
    static TorchOomSymbols syms;
    static std::mutex mu;
    std::string message = oom_message(r);
    if (!resolved.load(std::memory_order_acquire)) {
        std::lock_guard<std::mutex> lock(mu);
        if (!resolved.load(std::memory_order_relaxed)) {
            TorchOomSymbols found = resolve_torch_oom(&find_real);
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

std::vector<std::pair<std::string, int64_t>> stats_of(int device) {
    alloc::CachingAllocator* a = g_allocator.load(std::memory_order_acquire);
    if (!a) return device >= 0 ? alloc::memory_stats_items(alloc::DeviceStats{}) : decltype(stats_of(0)){};
    if (device < 0 || device >= a->device_count()) return {};
    return alloc::memory_stats_items(a->stats(device));
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

bool reset_peak_of(int device) { return reset_stats_of(device, &alloc::CachingAllocator::reset_peak_stats); }

bool reset_accumulated_of(int device) {
    return reset_stats_of(device, &alloc::CachingAllocator::reset_accumulated_stats);
}

void warn_unknown_pointer(void* ptr) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true)) {
        MG_LOG_WARN("memguard_free: {} was not allocated by memguard's allocator; ignored (reported once)", ptr);
    }
}

}  // namespace

python::AllocatorBridge allocator_bridge() {
    python::AllocatorBridge b;
    b.alloc = reinterpret_cast<uintptr_t>(&memguard_alloc);
    b.free = reinterpret_cast<uintptr_t>(&memguard_free);
    b.init = reinterpret_cast<uintptr_t>(&memguard_allocator_init);
    b.reset = reinterpret_cast<uintptr_t>(&memguard_allocator_empty_cache);
    b.memory_fraction = reinterpret_cast<uintptr_t>(&memguard_allocator_memory_fraction);
    b.record_stream = reinterpret_cast<uintptr_t>(&memguard_allocator_record_stream);
    b.begin_pool = reinterpret_cast<uintptr_t>(&memguard_allocator_begin_pool);
    b.end_pool = reinterpret_cast<uintptr_t>(&memguard_allocator_end_pool);
    b.release_pool = reinterpret_cast<uintptr_t>(&memguard_allocator_release_pool);
    b.stats = &stats_of;
    b.reset_peak = &reset_peak_of;
    b.reset_accumulated = &reset_accumulated_of;
    return b;
}

}  // namespace memguard::interpose

using memguard::interpose::get_allocator;
using memguard::track::Recorder;

MG_EXPORT void* memguard_alloc(size_t size, int device, cudaStream_t stream) {
    memguard::interpose::ensure_initialized();
    if (size == 0) return nullptr;
    memguard::alloc::CachingAllocator* a = get_allocator();
    if (!a) {
        memguard::alloc::OomReport none;
        none.requested = size;
        none.device = device;
        memguard::interpose::throw_oom(none);
    }
    Recorder& rec = Recorder::instance();
    memguard::interpose::SegmentContext ctx;
    ctx.stream = reinterpret_cast<uintptr_t>(stream);
    if (rec.active()) {
        memguard::interpose::ErrnoKeeper keep_errno;
        uintptr_t ips[Recorder::kStackCapacity];
        int n = rec.capture_stack(ips);
        ctx.stack_id = rec.intern_stack(ips, n);  // starts the report
        ctx.python_stack_id = rec.python_stack_id();
        ctx.record = rec.recording();
    }
    memguard::interpose::SegmentContextScope scope(ctx);
    int err = 0;
    memguard::alloc::OomReport oom;
    memguard::alloc::AllocatedBlock block;
    memguard::interpose::t_rescue_ran = false;
    void* p = a->malloc(device, size, reinterpret_cast<uintptr_t>(stream),
                        memguard::interpose::site_of(ctx.stack_id, ctx.python_stack_id), &err, &oom, &block);
    if (!p) {
        if (ctx.record) memguard::interpose::record_oom(rec, oom, ctx.stack_id, ctx.python_stack_id);
        if (err != memguard::alloc::kErrorMemoryAllocation) {
            MG_LOG_WARN("memguard_alloc: allocating {} bytes on device {} failed with CUDA error {}", size, device, err);
        }
        memguard::interpose::throw_oom(oom);
    }
    if (ctx.record) {
        memguard::interpose::ErrnoKeeper keep_errno;
        Recorder::TensorBlock b;
        b.addr = reinterpret_cast<uintptr_t>(p);
        b.size = block.size;
        b.requested = block.requested;
        b.device = device;
        b.stream = ctx.stream;
        b.stack_id = ctx.stack_id;
        b.python_stack_id = ctx.python_stack_id;
        b.private_pool = block.pool != memguard::alloc::MempoolId{};
        if (b.private_pool) {
            b.pool_first = block.pool.first;
            b.pool_second = block.pool.second;
            b.capture_id = rec.captures()
                               .owner_for(memguard::track::make_stream_arg(ctx.stream, false),
                                          memguard::track::current_tid())
                               .id;
        }
        rec.record_block_alloc(b);
    }
    return p;
}

MG_EXPORT void memguard_free(void* ptr, size_t size, int device, cudaStream_t stream) {
    (void)size;  // the allocator knows the block; PyTorch passes what it recorded at allocation
    (void)stream;
    if (ptr == nullptr) return;
    memguard::alloc::CachingAllocator* a = memguard::interpose::g_allocator.load(std::memory_order_acquire);
    Recorder& rec = Recorder::instance();
    // The t record is written once the block is taken out of the pointer map and before it can
    // be handed out again (under the device's lock), so the next T of this address always follows
    // it in the report. PyTorch frees from a noexcept deleter: nothing may escape (the record
    // itself cannot throw: the report buffer drops records when host memory runs out). `device`
    // is the one PyTorch recorded at allocation: the block is looked for there first.
    bool freed = false;
    try {
        freed = a && a->free(
                         ptr,
                         [&] {  // record_block_free writes only while recording
                             memguard::interpose::ErrnoKeeper keep_errno;
                             rec.record_block_free(reinterpret_cast<uintptr_t>(ptr),
                                                   memguard::python::collecting_on_this_thread());
                         },
                         device);
    } catch (...) {
        // Out of host memory inside the core (its free lists): the block stays out of the
        // cache, which loses its memory but not the program.
        return;
    }
    if (!freed) memguard::interpose::warn_unknown_pointer(ptr);
}

MG_EXPORT void memguard_allocator_init(int device_count) {
    memguard::interpose::ensure_initialized();
    get_allocator(device_count);
}

MG_EXPORT void memguard_allocator_empty_cache(void) {
    if (memguard::alloc::CachingAllocator* a = memguard::interpose::g_allocator.load(std::memory_order_acquire)) {
        a->empty_cache();
    }
}

MG_EXPORT void memguard_allocator_memory_fraction(double fraction, int device) {
    memguard::alloc::CachingAllocator* a = get_allocator();
    if (!a) return;
    int err = a->set_memory_fraction(device, fraction);
    if (err != 0) MG_LOG_WARN("memory fraction {} for device {} not set (error {})", fraction, device, err);
}

MG_EXPORT void memguard_allocator_record_stream(void* ptr, cudaStream_t stream) {
    if (memguard::alloc::CachingAllocator* a = memguard::interpose::g_allocator.load(std::memory_order_acquire)) {
        a->record_stream(ptr, reinterpret_cast<uintptr_t>(stream));
    }
}

MG_EXPORT void memguard_allocator_begin_pool(int device, std::pair<unsigned long long, unsigned long long> id,
                                             std::function<bool(cudaStream_t)> filter) {
    memguard::alloc::CachingAllocator* a = get_allocator();
    if (!a) return;
    // PyTorch's filter asks the runtime about the stream (AT_CUDA_CHECK, which throws): an
    // exception must not cross the allocator's lock, so it counts as "not this pool".
    memguard::alloc::StreamFilter f = [fn = std::move(filter)](memguard::alloc::Stream s) {
        try {
            return fn && fn(reinterpret_cast<cudaStream_t>(s));
        } catch (...) {
            return false;
        }
    };
    a->begin_allocate_to_pool(device, {id.first, id.second}, std::move(f));
}

MG_EXPORT void memguard_allocator_end_pool(int device, std::pair<unsigned long long, unsigned long long> id) {
    if (memguard::alloc::CachingAllocator* a = memguard::interpose::g_allocator.load(std::memory_order_acquire)) {
        a->end_allocate_to_pool(device, {id.first, id.second});
    }
}

MG_EXPORT void memguard_allocator_release_pool(int device, std::pair<unsigned long long, unsigned long long> id) {
    if (memguard::alloc::CachingAllocator* a = memguard::interpose::g_allocator.load(std::memory_order_acquire)) {
        a->release_pool(device, {id.first, id.second});
    }
}

// PyTorch's wheels use libstdc++'s cxx11 ABI (torch._C._GLIBCXX_USE_CXX11_ABI); the pool hooks
// above pass std::pair and std::function across that boundary.
static_assert(_GLIBCXX_USE_CXX11_ABI == 1, "libmemguard.so must be built with the cxx11 libstdc++ ABI");
