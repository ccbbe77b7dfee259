// The recorder: what the interposition hooks call. It owns the live-block table, the stack table
// and the module map, and turns each observed call into report records for its sink. Its
// environment is injected: the sink (the report file in production), the clock and the unwinder,
// so that tests build one in-process (testing/) and the library wires the real ones
// (runtime/process.h).
//
// Thread safety: every method may be called from any thread at any time. The report is started on
// the first recorded allocation, so a process that never allocates CUDA memory leaves no file.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "common/config.h"
#include "format/encode.h"
#include "track/block_table.h"
#include "track/capture.h"
#include "track/clock.h"
#include "track/event_sink.h"
#include "track/events.h"
#include "track/frame_sizes.h"
#include "track/modules.h"
#include "track/packed.h"
#include "track/phases.h"
#include "track/stack_table.h"
#include "track/unwind.h"
#include "track/writer.h"

namespace memguard::track {

class ReportWriter;
class SystemClock;

class Recorder {
public:
    /// A recorder that writes into `sink`, with the times of `clock` and the stacks of
    /// `unwinder`, all of which outlive it. `config` applies as by init().
    Recorder(const Config& config, EventSink& sink, Clock& clock, Unwinder& unwinder);
    Recorder(const Recorder&) = delete;
    Recorder& operator=(const Recorder&) = delete;

    /// Applies the configuration; called once from the library constructor (or the first hook).
    void init(const Config& config);

    /// True while calls should be recorded (enabled, not failed, not finished).
    bool active() const noexcept {
        State s = state_.load(std::memory_order_acquire);
        return s == State::Idle || s == State::Recording;
    }

    /// Captures the caller's native stack into ips (capacity kStackCapacity), with memguard's own
    /// leading frames removed, cut to the configured depth. Returns the number of frames.
    int capture_stack(uintptr_t* ips) const noexcept {
        return config_.stack_depth > 0 ? unwind_stack(ips) : 0;  // MEMGUARD_STACK_DEPTH=0: inline
    }
    static constexpr int kStackCapacity = Config::kMaxStackDepth + 32;
    /// memguard's own frames expected on top of a hook's stack (a deeper hook path unwinds twice).
    static constexpr int kSelfFrameSlack = 8;

    void record_alloc(Api api, Kind kind, uintptr_t addr, uint64_t size, int device, StreamArg stream,
                      const uintptr_t* ips, int n);
    void record_alloc_failed(Api api, Kind kind, uint64_t size, int device, StreamArg stream, const uintptr_t* ips,
                             int n, int error);
    /// Records the free of addr, before the real call (so that a reuse of the address by another
    /// thread is always written after it). Returns the block, or nothing when addr is not live.
    std::optional<LiveBlock> record_free(Api api, uintptr_t addr, StreamArg stream);
    /// The real free of a block returned by record_free failed: the block is live again.
    void record_free_failed(uintptr_t addr, const LiveBlock& block, int error);

    // --- stream capture and CUDA graphs (docs/report-format.md, minor 1) -------------------
    /// A capture began on `stream` (target_graph: cudaStreamBeginCaptureToGraph's graph, or 0).
    void record_capture_begin(StreamArg stream, CaptureMode mode, uintptr_t target_graph);
    /// The runtime ended the capture on `stream`: with success and `graph`, or invalidated (901).
    void record_capture_end(StreamArg stream, int error, uintptr_t graph);
    void record_instantiate(uintptr_t exec, uintptr_t graph);
    void record_launch(uintptr_t exec, uintptr_t stream);
    void record_exec_destroy(uintptr_t exec);
    void record_graph_destroy(uintptr_t graph);
    /// Before a potentially unsafe call (cudaMalloc, cudaFree, ...): reports it when a capture in
    /// progress makes it illegal under CUDA's capture-mode rules. The call itself is unchanged.
    void check_unsafe_call(Api api);

    // --- driver virtual memory (docs/report-format.md, minor 3) -----------------------------
    // Written only after the call succeeded. Reserve and create start the report (with expandable
    // segments they are the process's first CUDA memory calls); the others need a started report.
    /// cuMemAddressReserve: `size` bytes of device address space at `va` (V).
    void record_reserve(uintptr_t va, uint64_t size, const uintptr_t* ips, int n);
    /// cuMemAddressFree of the range reserved at `va` (v).
    void record_address_free(uintptr_t va, uint64_t size);
    /// cuMemCreate: physical memory `handle` of `size` bytes on `device` (-1: not a device) (N).
    void record_create(uintptr_t handle, uint64_t size, int device, const uintptr_t* ips, int n);
    /// record_reserve / record_create with stacks already interned (allocator mode's expandable
    /// segments: the stacks of the tensor allocation that made the pool grow).
    void record_reserve_interned(uintptr_t va, uint64_t size, uint32_t stack_id, uint32_t python_stack_id);
    void record_create_interned(uintptr_t handle, uint64_t size, int device, uint32_t stack_id,
                                uint32_t python_stack_id);
    /// cuMemRelease of `handle` (n): written only for the handle's last reference (the ones
    /// record_retain counted are given back first, unwritten).
    void record_release(uintptr_t handle);
    /// cuMemRetainAllocationHandle returned `handle`: one reference more, given back by a release.
    void record_retain(uintptr_t handle);
    /// cuMemImportFromShareableHandle returned `handle`: another allocation's memory (a peer
    /// process's export, NCCL's buffers of the other ranks), mapped here but not made here (m).
    void record_import(uintptr_t handle, const uintptr_t* ips, int n);
    /// cuMemMap of `size` bytes of `handle` from `offset` at `va` (Q).
    void record_map(uintptr_t va, uint64_t size, uint64_t offset, uintptr_t handle);
    /// cuMemUnmap of `size` bytes at `va` (q).
    void record_unmap(uintptr_t va, uint64_t size);

    // --- Python (docs/report-format.md, minor 2) ---------------------------------------------
    /// Called on the hook path, before any memguard lock is taken, when an allocation is recorded:
    /// returns the interned Python stack id of the calling thread (0 when it does not hold the
    /// GIL). Its p/P records must already be appended when it returns.
    using PythonStackFn = uint32_t (*)();
    void set_python_stack_provider(PythonStackFn fn) noexcept { python_stack_.store(fn, std::memory_order_release); }
    /// From now on a native stack ends at its first frame inside `interpreter` (that frame is
    /// kept: where Python called in); the Python stack stands for what lies below. Set once, by
    /// the Python hook, when Python stacks are on (MEMGUARD_NATIVE_BELOW_PYTHON=0).
    void set_native_cut(TextRange interpreter) noexcept;

    /// A dynamo compile finished on this thread.
    void record_compile(std::string_view compile_id);
    /// e (minor 8): a directory of the interpreter's own code, from the Python hook, once per path.
    void record_python_path(format::PathKind kind, std::string_view path);

    struct Collection {
        format::GcTrigger trigger = format::GcTrigger::Automatic;
        int generation;
        int64_t duration_ns;
        int64_t collected, uncollectable;
        int64_t cuda_bytes_freed;         // < 0: unknown
        std::string compile_ids;          // memguard's collections: comma-separated; else empty
        int64_t mark_age_ns;              // memguard's collections: time since the first mark; else < 0
        std::optional<uint64_t> skipped;  // memguard's collections: chances the budget skipped before it
        uint32_t explain = 0;             // the explanation written before it (record_explanation); 0: none
    };
    /// A garbage collection ended. memguard's own collections create the report file; other
    /// records of a process that has not allocated CUDA memory wait in memory until it does.
    void record_collection(const Collection& c);

    // --- cycles (docs/report-format.md, minor 9) -----------------------------------------------
    // What one of memguard's collections found in its garbage, written inside the collection
    // (GIL held), before its Y. The explanation creates the report, as memguard's collections do.
    /// Begins an explanation (j) and returns its id; 0 (nothing written) when memguard does not record.
    uint32_t record_explanation(uint64_t objects, uint64_t tensors, uint64_t cuda_bytes, int64_t analysis_ns,
                                bool complete);
    /// Its groups (u), storages (y) and chain steps (r): nothing is written for explanation 0.
    void record_garbage_group(const format::rec::GarbageGroup& u);
    void record_garbage_tensor(const format::rec::GarbageTensor& y);
    void record_chain_step(const format::rec::ChainStep& r);

    // --- phases and marks (docs/report-format.md, minor 4) -------------------------------------
    // Like collections, these records wait in memory until the report exists and never create it:
    // a process that never touches CUDA writes no report, phases or not.
    /// Begins a phase; returns its id (from 1), or 0 when memguard does not record.
    uint64_t record_phase_begin(PhaseSource source, std::string_view name);
    /// Ends phase `id`; false (nothing written) when it is not an open phase of this process.
    bool record_phase_end(uint64_t id);
    void record_mark(PhaseSource source, std::string_view name);

    // --- allocator mode (docs/report-format.md, minor 5) ----------------------------------------
    /// memguard allocates PyTorch's tensors (MEMGUARD_ALLOCATOR=memguard): the report says so
    /// (`I allocator memguard`), in its header or, when it already exists, right away.
    void set_allocator_mode();
    /// Starts the report and interns a native stack; 0 when nothing is recorded or n is 0.
    uint32_t intern_stack(const uintptr_t* ips, int n) {
        // The report is started even without a native stack: the Python stack provider, asked
        // next, appends its records to a started report only.
        if (!ensure_started() || n <= 0) return 0;
        return intern(ips, n);
    }
    /// The frames of interned native stacks (id -> return addresses), for in-process views
    /// (allocator mode's snapshots). Not for the hook path.
    void stack_frames(const std::unordered_set<uint32_t>& ids,
                      std::unordered_map<uint32_t, std::vector<uintptr_t>>* out) {
        stacks_.frames_of(ids, out);
    }
    /// capture_stack and intern_stack in one, for allocator mode's hot path: `ret_slot` is the
    /// stack slot holding the hook's own return address (its caller is the first frame kept).
    /// A stack of this thread seen before with every return address still in place is found in
    /// the thread's StackMemo (stack_memo.h) without unwinding; otherwise the stack is unwound
    /// (the fast trace) and remembered with its slots, found from its frames' sizes
    /// (frame_sizes.h; the cursor teaches a frame not seen before). The ids are those
    /// capture_stack + intern_stack give. ret_slot nullptr: no memo.
    uint32_t capture_interned_stack(const uintptr_t* ret_slot) {
        // MEMGUARD_STACK_DEPTH=0: inline, as capture_stack.
        return config_.stack_depth > 0 ? capture_and_intern(ret_slot) : intern_stack(nullptr, 0);
    }
    /// The calling thread's Python stack id from the provider; 0 when none.
    uint32_t python_stack_id() const noexcept { return python_stack(); }
    /// Like record_alloc, with stacks interned by the caller (the allocator's segments carry the
    /// stacks of the tensor allocation that made them).
    void record_alloc_interned(Api api, Kind kind, uintptr_t addr, uint64_t size, int device, StreamArg stream,
                               uint32_t stack_id, uint32_t python_stack_id);
    struct TensorBlock {
        uintptr_t addr = 0;
        uint64_t size = 0, requested = 0;
        int device = 0;
        uintptr_t stream = 0;
        uint32_t stack_id = 0, python_stack_id = 0;
        uint32_t capture_id = 0;
        bool private_pool = false;
        uint64_t pool_first = 0, pool_second = 0;
    };
    /// A block handed to PyTorch (T).
    void record_block_alloc(const TensorBlock& b);
    /// PyTorch returned the block at addr (t); written before the allocator may reuse it.
    void record_block_free(uintptr_t addr, bool during_gc);
    struct OomSite {
        uint32_t stack_id, python_stack_id;
        uint64_t blocks, bytes;
    };
    struct AllocatorOom {
        int device = 0;
        uint64_t requested = 0, rounded = 0, allocated = 0, reserved = 0, limit = 0;
        uint32_t stack_id = 0, python_stack_id = 0;
        format::Rescue rescued = format::Rescue::None;
        const OomSite* sites = nullptr;
        size_t site_count = 0;
    };
    /// An allocation the allocator could not satisfy (O), then its live blocks by site (o).
    void record_allocator_oom(const AllocatorOom& oom);

    // --- steps, moments, out-of-memory context (docs/report-format.md, minor 8) ---------------
    /// A training step ended (s). Like phases, it waits in memory until the report exists.
    void record_step(uint32_t index, format::StepSource source, std::string_view name);
    /// Begins a moment (h) and returns its id; 0 (nothing written) when memguard does not record
    /// or, except for an out-of-memory (which starts the report), no report exists yet.
    uint32_t record_moment_begin(format::MomentReason reason, uint32_t steps_done);
    /// A tensor storage (g) or PyTorch allocator block (d) of an open moment: its id in the record.
    void record_tensor_tag(const format::rec::TensorTag& g);
    void record_allocator_block(const format::rec::AllocatorBlock& d);
    /// Ends a moment (k): how many g and d records it wrote, and whether its lists are whole.
    void record_moment_end(uint32_t moment, uint64_t tensors, uint64_t blocks, bool complete);
    /// An out-of-memory's context (x); starts the report. Its t and tid are set here.
    void record_oom_context(format::rec::OomContext x);

    /// Appends a record of the Python layer (p/P) to a started report, in its encoding.
    template <class R>
    void append_record(const R& r) {
        if (state_.load(std::memory_order_acquire) == State::Recording) append_plain(writer_, r);
    }
    bool recording() const noexcept { return state_.load(std::memory_order_acquire) == State::Recording; }

    /// Changes whenever this process starts over with a new report (in a fork child): ids interned
    /// for the old report must not be reused.
    uint32_t report_epoch() const noexcept { return epoch_.load(std::memory_order_acquire); }

    /// True once any GPU block was allocated in this process (CUDA is initialized).
    bool gpu_seen() const noexcept { return gpu_seen_.load(std::memory_order_relaxed); }

    /// The captures in progress; lock-free reads (for the Python hook and the allocator).
    const CaptureView& captures() const noexcept { return captures_; }

    // --- in-process statistics (memguard_stats, the Python module's stats()) ---------------------
    /// Allocator mode's tensor counters (memguard's allocator: torch.cuda.memory_allocated()),
    /// injected at the switch so that the recorder needs nothing from allocmode. `device` -1: every
    /// device (sums; `reset_peak` resets each). Never called on the hook path.
    struct TensorCounters {
        void (*read)(int device, uint64_t* live, uint64_t* peak) = nullptr;
        void (*reset_peak)(int device) = nullptr;
    };
    /// `counters` must live for the process; set once, before set_allocator_mode().
    void set_tensor_counters(const TensorCounters* counters) noexcept {
        tensor_counters_.store(counters, std::memory_order_release);
    }
    struct Stats {
        uint64_t gpu_live = 0, gpu_peak = 0;  // GPU blocks the hooks saw (allocator mode: its segments)
        bool tensors = false;                 // allocator mode: the tensor counters below are set
        uint64_t tensor_live = 0, tensor_peak = 0;
        uint64_t gc_collections = 0;          // collections recorded
        uint64_t gc_freeing_collections = 0;  // ... of which freed CUDA memory
        uint64_t gc_cuda_bytes_freed = 0;     // CUDA bytes they freed, summed
    };
    /// The counters of `device` (-1: every device; the peaks are then each device's own peak,
    /// summed). Reads relaxed atomics (and, in allocator mode, the allocator's stats under its
    /// device lock); not for the hook path.
    Stats stats(int device) const;
    /// Starts new peaks at the live bytes now (`device` -1: every device). In allocator mode the
    /// tensor peak is PyTorch's own (torch.cuda.reset_peak_memory_stats resets the same counter).
    void reset_peak(int device);
    /// Counts, from now on, the GPU bytes whose free thread `tid` records (0: stops counting): what
    /// a collection on that thread frees, when PyTorch's counter cannot say (python/gc_accounting.cpp;
    /// collections never nest). Not a thread-local: libmemguard.so is also dlopened late (allocator
    /// mode by hand), where static TLS is scarce and every byte of it can fail the dlopen.
    void watch_thread_frees(uint64_t tid) noexcept {
        watched_freed_.store(0, std::memory_order_relaxed);
        watched_tid_.store(tid, std::memory_order_release);
    }
    /// The GPU bytes the watched thread freed since watch_thread_frees.
    uint64_t watched_thread_freed() const noexcept { return watched_freed_.load(std::memory_order_relaxed); }

    /// Writes buffered records now (memguard_flush).
    void flush();
    /// Process exit: end record, final write, no more recording.
    void shutdown();

    /// Path of this process's report, empty while none has been created.
    std::string report_path();

    // fork(2) handlers (pthread_atfork).
    void before_fork();
    void after_fork_parent();
    void after_fork_child();

    /// Nanoseconds since this run's clock origin.
    int64_t now() const noexcept { return clock_.now(); }

private:
    enum class State { Off, Idle, Recording, Failed, Finished };

    bool ensure_started() {
        // On every record: the started case inline, the first start (and a failed one) out of line.
        return state_.load(std::memory_order_acquire) == State::Recording || start_recording();
    }
    bool start_recording();
    /// capture_stack with a depth above 0.
    int unwind_stack(uintptr_t* ips) const noexcept;
    /// unwind_stack with each kept frame's slot (Unwinder::capture_with_slots); -1 when the
    /// unwinder cannot name slots.
    int unwind_stack_with_slots(uintptr_t* ips, uintptr_t* slots) const noexcept;
    /// capture_interned_stack with a stack depth above 0.
    uint32_t capture_and_intern(const uintptr_t* ret_slot);
    /// Kept frames of a raw capture: memguard's own frames on top dropped, cut at the interpreter
    /// (cut, when set), at most `depth`; returns the first kept index in *skip.
    int kept_frames(const uintptr_t* ips, int n, const TextRange* cut, int* skip) const noexcept;
    /// What the report says first (its version and the I records known at creation); the writer
    /// writes it when it creates the file.
    std::string header() const;
    uint32_t intern(const uintptr_t* ips, int n);
    /// Warm-up retention: blocks allocated since the last capture ended that are still live and
    /// not owned by a capture, one W record per allocation site.
    void write_warmup_retention(uint32_t capture_id, format::CapturePhase phase);
    static void on_new_stack(void* self, uint32_t id, const uintptr_t* ips, int n);

    std::atomic<State> state_{State::Off};
    Config config_;
    EventSink& writer_;  // the report's sink
    Clock& clock_;
    Unwinder& unwinder_;
    // The production sink and clock when those are what was injected (else null): allocator mode's
    // T and t records reach them without a virtual call, as before they were injected
    // (records_tensors.cpp).
    ReportWriter* const file_sink_;
    SystemClock* const system_clock_;
    std::mutex start_mu_;
    // Handles' references added by cuMemRetainAllocationHandle, not given back yet (record_retain).
    // Taken only under the virtual-memory order lock (the driver hooks'), so never held at a fork.
    std::mutex retained_mu_;
    std::unordered_map<uintptr_t, uint32_t> retained_;
    StackTable stacks_;
    LazyFrameSizes frame_sizes_;  // StackMemo's misses: slots without the cursor
    BlockTable blocks_;
    ModuleMap modules_;
    TextRange self_range_;        // the unwinder's own code: frames dropped from the top of a stack
    TextRange native_cut_range_;  // set_native_cut's range, published through native_cut_
    std::atomic<const TextRange*> native_cut_{nullptr};
    CaptureView captures_;
    GraphRegistry graphs_;
    PhaseTable phases_;
    std::atomic<int64_t> last_capture_end_t_{0};
    std::atomic<PythonStackFn> python_stack_{nullptr};
    std::atomic<bool> gpu_seen_{false};
    std::atomic<bool> allocator_mode_{false};
    std::atomic<uint64_t> watched_tid_{0};  // watch_thread_frees: one relaxed load a free
    std::atomic<uint64_t> watched_freed_{0};
    std::atomic<const TensorCounters*> tensor_counters_{nullptr};
    std::atomic<uint64_t> gc_collections_{0}, gc_freeing_collections_{0}, gc_cuda_bytes_freed_{0};
    std::atomic<uint32_t> epoch_{0};
    std::atomic<uint32_t> next_moment_{1};
    std::atomic<uint32_t> next_explanation_{1};
    std::atomic<bool> gc_budget_said_{false};  // `I gc_budget` written (before memguard's first collection)
    /// Records made before the report exists (a collection before the first CUDA allocation),
    /// written after the header when it is created. Bounded; guarded by start_mu_.
    std::string deferred_;
    uint64_t deferred_dropped_ = 0;
    static constexpr size_t kDeferredLimit = 1 << 20;
    void append_or_defer(std::string_view record);
    /// Appends record `r` (format/records.h) to the report: every record the recorder writes is
    /// encoded here (the packed T and t records by their formatters, track/records_tensors.cpp).
    /// In a binary report the hook formats nothing for the records of every allocation and free
    /// (A, F): it packs them, and the writer thread encodes them in file order (track/packed.h).
    /// An R (a failed free) goes packed too: a bounded report's writer puts its block back in the
    /// live set the next detail part carries (ReportParts::restore).
    template <class R>
    __attribute__((always_inline)) void emit(const R& r) noexcept {
        if constexpr (format::is_predicted<R>() || std::is_same_v<R, format::rec::Restore>) {
            if (writer_.packs()) {
                if (file_sink_) {
                    file_sink_->ReportWriter::append_packed(&format_packed<R>, &r, sizeof r);
                } else {
                    writer_.append_packed(&format_packed<R>, &r, sizeof r);
                }
                return;
            }
        } else if (writer_.binary()) {
            append_plain(writer_, r);
            return;
        }
        format::Line line;
        format::encode(r, line);
        writer_.append(line.finish());
    }
    /// Like emit, for the records that wait in memory until the report exists (append_or_defer).
    template <class R>
    void emit_or_defer(const R& r) {
        std::string record;
        encode_record(writer_.binary(), r, record);
        append_or_defer(record);
    }
    uint32_t python_stack() const noexcept {
        PythonStackFn fn = python_stack_.load(std::memory_order_acquire);
        return fn ? fn() : 0;
    }
};

/// Marks the calling thread as inside a memguard hook; nested hooks (CUDA calls made while
/// recording) pass straight through.
class HookScope {
public:
    HookScope() noexcept : outermost_(depth_++ == 0) {}
    ~HookScope() { --depth_; }
    HookScope(const HookScope&) = delete;
    HookScope& operator=(const HookScope&) = delete;
    bool outermost() const noexcept { return outermost_; }

private:
    static thread_local int depth_;
    bool outermost_;
};

}  // namespace memguard::track
