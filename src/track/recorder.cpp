#include "track/recorder.h"

#include <climits>
#include <unordered_map>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path_template.h"
#include "memguard/memguard.h"
#include "track/line.h"

namespace memguard::track {

thread_local int HookScope::depth_ = 0;

namespace {

std::string read_small_file(const char* path) {
    std::string out;
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return out;
    char buf[4096];
    ssize_t n;
    while ((n = ::read(fd, buf, sizeof(buf))) > 0 && out.size() < (1u << 16)) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    return out;
}

std::string exe_path() {
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

std::string host_name() {
    char buf[256] = {};
    if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
    return buf;
}

std::string command_line() {
    std::string raw = read_small_file("/proc/self/cmdline");
    while (!raw.empty() && raw.back() == '\0') raw.pop_back();
    for (char& c : raw) {
        if (c == '\0') c = ' ';
    }
    return raw;
}

void put_stream(Line& line, StreamArg s) {
    if (s.present) {
        line.hex(s.handle);
    } else {
        line.word("-");
    }
}

}  // namespace

Recorder::Recorder(const Config& config, EventSink& sink, Clock& clock, Unwinder& unwinder)
    : writer_(sink), clock_(clock), unwinder_(unwinder), self_range_(unwinder.own_code()) {
    init(config);
}

void Recorder::init(const Config& config) {
    config_ = config;
    state_.store(config.enabled ? State::Idle : State::Off, std::memory_order_release);
}

void Recorder::set_native_cut(TextRange interpreter) noexcept {
    if (interpreter.hi <= interpreter.lo) return;
    native_cut_range_ = interpreter;
    native_cut_.store(&native_cut_range_, std::memory_order_release);
}

namespace {

/// Frames this thread's last stack needed to reach the interpreter (0: no guess). One int of
/// thread-local storage: large per-thread arrays do not fit the static TLS that dlopen needs.
thread_local int t_unwind_guess = 0;
constexpr int kGuessMargin = 2;  // a call path a frame or two deeper still fits

int first_in(const TextRange& r, const uintptr_t* ips, int from, int n) noexcept {
    for (int i = from; i < n; ++i) {
        if (r.contains(ips[i])) return i;
    }
    return -1;
}

}  // namespace

int Recorder::unwind_stack(uintptr_t* ips) const noexcept {
    const int depth = config_.stack_depth;
    // Each unwound frame costs the same and unwinding is most of a stack's cost: ask for the kept
    // depth and a few of memguard's own frames on top, and unwind in full only when more of
    // those were there. The frames kept are the same either way.
    const int full = depth + kSelfFrameSlack < kStackCapacity ? depth + kSelfFrameSlack : kStackCapacity;
    // Under a native cut (set_native_cut) a stack ends at the interpreter: ask for as many frames
    // as this thread's last stack took to get there, and unwind again in full when that fell short.
    const TextRange* cut = native_cut_.load(std::memory_order_acquire);
    const int guess = cut ? t_unwind_guess : 0;
    const int want = guess > 0 && guess < full ? guess : full;
    int n = 0, skip = 0, boundary = -1;
    // Unwinds up to `asked` frames: memguard's own frames on top (skip), the first interpreter frame.
    auto unwind = [&](int asked) {
        n = unwinder_.capture(ips, asked);
        skip = 0;
        while (skip < n && self_range_.contains(ips[skip])) ++skip;
        boundary = cut ? first_in(*cut, ips, skip, n) : -1;
    };
    unwind(want);
    // Short of the kept depth without reaching the interpreter: the guess fell short (ask for
    // the usual amount), or memguard's own frames took more than the slack (ask for all).
    for (int asked = want; boundary < 0 && n == asked && asked < kStackCapacity && n - skip < depth;) {
        asked = asked < full ? full : kStackCapacity;
        unwind(asked);
    }
    if (cut) t_unwind_guess = boundary >= 0 ? boundary + 1 + kGuessMargin : 0;
    if (boundary >= 0) n = boundary + 1;
    int keep = n - skip;
    if (keep > depth) keep = depth;
    if (skip > 0) {
        for (int i = 0; i < keep; ++i) ips[i] = ips[i + skip];
    }
    return keep;
}

bool Recorder::start_recording() {
    State s = state_.load(std::memory_order_acquire);
    if (s == State::Recording) return true;
    if (s != State::Idle) return false;
    std::lock_guard<std::mutex> lock(start_mu_);
    s = state_.load(std::memory_order_acquire);
    if (s != State::Idle) return s == State::Recording;

    NameContext ctx;
    ctx.pid = static_cast<long>(getpid());
    ctx.host = host_name();
    ctx.rank = rank_from_env(std::getenv("RANK"), std::getenv("LOCAL_RANK"));
    std::string exe = exe_path();
    ctx.exe_name = exe.substr(exe.find_last_of('/') + 1);
    std::string name = default_report_name(ctx);
    std::string path = config_.output_template.empty() ? name : expand_template(config_.output_template, ctx);
    std::string error;
    if (!writer_.start(path, name, header(), &error)) {
        MG_LOG_WARN("MEMGUARD_OUTPUT: {}; the program runs on without a report", error);
        state_.store(State::Failed, std::memory_order_release);
        return false;
    }
    modules_.refresh(writer_);
    if (!deferred_.empty()) {
        writer_.append(deferred_);
        deferred_.clear();
        deferred_.shrink_to_fit();
    }
    if (deferred_dropped_ > 0) {
        MG_LOG_WARN("{} records made before the report was created did not fit in memory and were dropped",
                    deferred_dropped_);
        writer_.add_lost(deferred_dropped_);  // the report says so too (a U record)
    }
    MG_LOG_INFO("writing report '{}'", echo_value(writer_.path()));
    state_.store(State::Recording, std::memory_order_release);
    return true;
}

std::string Recorder::header() const {
    std::string header = "MEMGUARD-REPORT 1\n";
    auto info = [&header](const char* key, std::string_view value) {
        Line line('I');
        line.word(key).str(value);
        header += line.finish();
    };
    // docs/report-format.md: minor 3 driver memory, 4 phases, 5 allocator mode, 6 lost records
    info("format_minor", "6");
    info("pid", std::to_string(getpid()));
    info("ppid", std::to_string(getppid()));
    info("exe", exe_path());
    info("cmdline", command_line());
    info("host", host_name());
    info("rank", rank_from_env(std::getenv("RANK"), std::getenv("LOCAL_RANK")));
    info("t0_unix_ns", std::to_string(clock_.origin_unix_ns()));
    info("memguard_version", MEMGUARD_VERSION_STRING);
    info("stack_depth", std::to_string(config_.stack_depth));
    info("unwinder", unwinder_.name());
    if (allocator_mode_.load(std::memory_order_acquire)) info("allocator", "memguard");
    return header;
}

void Recorder::on_new_stack(void* self, uint32_t id, const uintptr_t* ips, int n) {
    auto* r = static_cast<Recorder*>(self);
    r->modules_.ensure_covered(ips, n, r->writer_);
    Line line('S');
    line.dec(id);
    for (int i = 0; i < n; ++i) line.hex(ips[i]);
    r->writer_.append(line.finish());
}

uint32_t Recorder::intern(const uintptr_t* ips, int n) {
    if (n <= 0) return 0;
    return stacks_.intern(ips, n, &Recorder::on_new_stack, this);
}

void Recorder::record_alloc(Api api, Kind kind, uintptr_t addr, uint64_t size, int device, StreamArg stream,
                            const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    record_alloc_interned(api, kind, addr, size, device, stream, sid, py);
}

void Recorder::record_alloc_interned(Api api, Kind kind, uintptr_t addr, uint64_t size, int device, StreamArg stream,
                                     uint32_t sid, uint32_t py) {
    if (!ensure_started()) return;
    if (is_gpu(kind)) gpu_seen_.store(true, std::memory_order_relaxed);
    int64_t t = now();
    uint64_t tid = current_tid();
    uint32_t owner = captures_.owner_for(stream, tid).id;
    auto replaced = blocks_.insert(addr, LiveBlock{size, sid, kind, device, owner, t});
    if (replaced) {
        // The earlier block at this address was released by a path memguard does not see.
        Line f('F');
        f.sdec(t).dec(tid).hex(addr).dec(replaced->size).word("unseen").word("-");
        writer_.append(f.finish());
    }
    Line line('A');
    line.sdec(t).dec(tid).hex(addr).dec(size).word(kind_name(kind)).word(api_name(api)).sdec(device);
    put_stream(line, stream);
    line.dec(sid).dec(owner).dec(py);
    writer_.append(line.finish());
}

void Recorder::record_alloc_failed(Api api, Kind kind, uint64_t size, int device, StreamArg stream,
                                   const uintptr_t* ips, int n, int error) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    Line line('E');
    line.sdec(now()).dec(current_tid()).dec(size).word(kind_name(kind)).word(api_name(api)).sdec(device);
    put_stream(line, stream);
    line.dec(sid).sdec(error).dec(blocks_.gpu_live_bytes(device)).dec(py);
    writer_.append(line.finish());
}

std::optional<LiveBlock> Recorder::record_free(Api api, uintptr_t addr, StreamArg stream) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return std::nullopt;
    auto b = blocks_.remove(addr);
    if (!b) return std::nullopt;
    int64_t t = now();
    uint64_t tid = current_tid();
    Line line('F');
    line.sdec(t).dec(tid).hex(addr).dec(b->size).word(api_name(api));
    put_stream(line, stream);
    writer_.append(line.finish());
    if (b->capture_id != 0) {
        // Freeing a capture's block while a graph exec from it lives lets a later allocation (or
        // capture) alias memory the graph still reads and writes on replay.
        if (uintptr_t exec = graphs_.live_exec_of(b->capture_id)) {
            Line w('W');
            w.sdec(t).dec(tid).word("free_live_graph").hex(addr).dec(b->size).dec(b->capture_id).hex(exec);
            writer_.append(w.finish());
        }
    }
    return b;
}

void Recorder::record_free_failed(uintptr_t addr, const LiveBlock& block, int error) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    blocks_.insert(addr, block);
    Line line('R');
    line.sdec(now()).dec(current_tid()).hex(addr).sdec(error);
    writer_.append(line.finish());
}

void Recorder::record_capture_begin(StreamArg stream, CaptureMode mode, uintptr_t target_graph) {
    uint64_t tid = current_tid();
    uint32_t id = captures_.begin(stream, mode, tid);
    if (id == 0) {
        MG_LOG_WARN("more than {} stream captures at once; capture on stream {:#x} is not tracked", CaptureView::kSlots,
                    stream.handle);
        return;
    }
    if (!ensure_started()) return;
    Line line('C');
    line.sdec(now()).dec(tid).dec(id).hex(stream.handle).word(capture_mode_name(mode));
    if (target_graph) {
        line.hex(target_graph);
    } else {
        line.word("-");
    }
    writer_.append(line.finish());
    write_warmup_retention(id, "begin");
}

void Recorder::record_capture_end(StreamArg stream, int error, uintptr_t graph) {
    CaptureInfo c = captures_.end(stream, current_tid());
    if (c.id == 0) return;
    if (graph) graphs_.captured(graph, c.id);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    int64_t t = now();
    Line line('c');
    line.sdec(t).dec(current_tid()).dec(c.id).sdec(error);
    if (graph) {
        line.hex(graph);
    } else {
        line.word("-");
    }
    writer_.append(line.finish());
    write_warmup_retention(c.id, "end");
    last_capture_end_t_.store(t, std::memory_order_relaxed);
}

void Recorder::write_warmup_retention(uint32_t capture_id, const char* phase) {
    struct Site {
        uint64_t blocks = 0, bytes = 0;
    };
    std::unordered_map<uint32_t, Site> sites;
    int64_t since = last_capture_end_t_.load(std::memory_order_relaxed);
    blocks_.for_each([&](uintptr_t, const LiveBlock& b) {
        if (b.capture_id == 0 && is_gpu(b.kind) && b.t_alloc >= since) {
            Site& s = sites[b.stack_id];
            s.blocks += 1;
            s.bytes += b.size;
        }
    });
    int64_t t = now();
    uint64_t tid = current_tid();
    for (const auto& [stack_id, site] : sites) {
        Line w('W');
        w.sdec(t).dec(tid).word("warmup_retention").dec(capture_id).word(phase).sdec(since).dec(stack_id);
        w.dec(site.blocks).dec(site.bytes);
        writer_.append(w.finish());
    }
}

void Recorder::record_instantiate(uintptr_t exec, uintptr_t graph) {
    uint32_t capture = graphs_.instantiated(exec, graph);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('G');
    line.sdec(now()).dec(current_tid()).hex(exec).hex(graph).dec(capture);
    writer_.append(line.finish());
}

void Recorder::record_launch(uintptr_t exec, uintptr_t stream) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('L');
    line.sdec(now()).dec(current_tid()).hex(exec).hex(stream);
    writer_.append(line.finish());
}

void Recorder::record_exec_destroy(uintptr_t exec) {
    graphs_.exec_destroyed(exec);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('D');
    line.sdec(now()).dec(current_tid()).hex(exec);
    writer_.append(line.finish());
}

void Recorder::record_graph_destroy(uintptr_t graph) {
    graphs_.graph_destroyed(graph);
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('K');
    line.sdec(now()).dec(current_tid()).hex(graph);
    writer_.append(line.finish());
}

void Recorder::record_reserve(uintptr_t va, uint64_t size, const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    Line line('V');
    line.sdec(now()).dec(current_tid()).hex(va).dec(size).dec(sid).dec(py);
    writer_.append(line.finish());
}

void Recorder::record_address_free(uintptr_t va, uint64_t size) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('v');
    line.sdec(now()).dec(current_tid()).hex(va).dec(size);
    writer_.append(line.finish());
}

void Recorder::record_create(uintptr_t handle, uint64_t size, int device, const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    if (device >= 0) gpu_seen_.store(true, std::memory_order_relaxed);
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    uint64_t tid = current_tid();
    // No stream is named: a capture owns the handle when this thread is capturing.
    uint32_t owner = captures_.owner_for(StreamArg{}, tid).id;
    Line line('N');
    line.sdec(now()).dec(tid).hex(handle).dec(size).sdec(device).dec(sid).dec(py).dec(owner);
    writer_.append(line.finish());
}

void Recorder::record_release(uintptr_t handle) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('n');
    line.sdec(now()).dec(current_tid()).hex(handle);
    writer_.append(line.finish());
}

void Recorder::record_map(uintptr_t va, uint64_t size, uint64_t offset, uintptr_t handle) {
    if (!ensure_started()) return;
    Line line('Q');
    line.sdec(now()).dec(current_tid()).hex(va).dec(size).dec(offset).hex(handle);
    writer_.append(line.finish());
}

void Recorder::record_unmap(uintptr_t va, uint64_t size) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    Line line('q');
    line.sdec(now()).dec(current_tid()).hex(va).dec(size);
    writer_.append(line.finish());
}

void Recorder::check_unsafe_call(Api api) {
    if (captures_.active() == 0) return;
    uint64_t tid = current_tid();
    CaptureMode mode = thread_capture_mode();
    CaptureInfo c = captures_.prohibiting(tid, mode);
    if (c.id == 0 || !ensure_started()) return;
    Line w('W');
    w.sdec(now()).dec(tid).word("unsafe_call").word(api_name(api)).dec(c.id).word(capture_mode_name(c.mode));
    w.word(capture_mode_name(mode));
    writer_.append(w.finish());
}

void Recorder::append_or_defer(std::string_view record) {
    if (state_.load(std::memory_order_acquire) == State::Recording) {
        writer_.append(record);
        return;
    }
    std::lock_guard<std::mutex> lock(start_mu_);
    if (state_.load(std::memory_order_acquire) == State::Recording) {
        writer_.append(record);
    } else if (state_.load(std::memory_order_acquire) == State::Idle) {
        if (deferred_.size() + record.size() <= kDeferredLimit) {
            deferred_.append(record);
        } else {
            ++deferred_dropped_;
        }
    }
}

void Recorder::record_compile(std::string_view compile_id) {
    if (!active()) return;
    Line line('X');
    line.sdec(now()).dec(current_tid()).str(compile_id);
    append_or_defer(line.finish());
}

void Recorder::record_collection(const Collection& c) {
    if (!active()) return;
    bool own = std::string_view(c.trigger) == "memguard";
    if (own && !ensure_started()) return;
    Line line('Y');
    line.sdec(now()).dec(current_tid()).word(c.trigger).sdec(c.generation).sdec(c.duration_ns);
    line.sdec(c.collected).sdec(c.uncollectable);
    if (c.cuda_bytes_freed >= 0) {
        line.sdec(c.cuda_bytes_freed);
    } else {
        line.word("-");
    }
    if (c.compile_ids.empty()) {
        line.word("-");
    } else {
        line.str(c.compile_ids);
    }
    if (c.mark_age_ns >= 0) {
        line.sdec(c.mark_age_ns);
    } else {
        line.word("-");
    }
    append_or_defer(line.finish());
}

uint64_t Recorder::record_phase_begin(PhaseSource source, std::string_view name) {
    if (!active()) return 0;
    uint64_t id = phases_.open();
    Line line('B');
    line.sdec(now()).dec(current_tid()).dec(id).word(phase_source_name(source)).str(cut_phase_name(name));
    append_or_defer(line.finish());
    return id;
}

bool Recorder::record_phase_end(uint64_t id) {
    if (!phases_.close(id)) return false;
    Line line('b');
    line.sdec(now()).dec(current_tid()).dec(id);
    append_or_defer(line.finish());
    return true;
}

void Recorder::record_mark(PhaseSource source, std::string_view name) {
    if (!active()) return;
    Line line('J');
    line.sdec(now()).dec(current_tid()).word(phase_source_name(source)).str(cut_phase_name(name));
    append_or_defer(line.finish());
}

void Recorder::append_records(std::string_view records) {
    if (state_.load(std::memory_order_acquire) == State::Recording) writer_.append(records);
}

void Recorder::flush() {
    if (state_.load(std::memory_order_acquire) == State::Recording) writer_.flush();
}

void Recorder::shutdown() {
    std::lock_guard<std::mutex> lock(start_mu_);
    State s = state_.exchange(State::Finished, std::memory_order_acq_rel);
    if (s == State::Recording) writer_.finish();
}

std::string Recorder::report_path() {
    std::lock_guard<std::mutex> lock(start_mu_);
    return state_.load(std::memory_order_acquire) == State::Recording ? writer_.path() : std::string();
}

// Lock order everywhere: start_mu_ -> stack shards -> module map -> block shards -> graph registry
// -> writer. The phase table's lock is a leaf (nothing is taken while it is held).
void Recorder::before_fork() {
    start_mu_.lock();
    stacks_.lock_all();
    modules_.mutex().lock();
    blocks_.lock_all();
    graphs_.mutex().lock();
    writer_.lock_for_fork();
    phases_.mutex().lock();
    unwinder_.before_fork();  // last: a thread inside the unwinder holds none of the locks above
}

void Recorder::after_fork_parent() {
    unwinder_.after_fork();
    phases_.mutex().unlock();
    writer_.unlock_after_fork();
    graphs_.mutex().unlock();
    blocks_.unlock_all();
    modules_.mutex().unlock();
    stacks_.unlock_all();
    start_mu_.unlock();
}

void Recorder::after_fork_child() {
    after_fork_parent();
    // The child is a new process: its own clock origin, its own (lazily created) report, and none
    // of the parent's blocks, stacks or modules.
    reset_tid_cache();
    clock_.restart();
    writer_.reset_in_child();
    blocks_.clear();
    stacks_.clear();
    modules_.clear();
    captures_.clear();
    graphs_.clear();
    phases_.clear_open();
    last_capture_end_t_.store(0, std::memory_order_relaxed);
    deferred_.clear();
    deferred_dropped_ = 0;
    gpu_seen_.store(false, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    State s = state_.load(std::memory_order_acquire);
    if (s == State::Recording || s == State::Failed) state_.store(State::Idle, std::memory_order_release);
}

}  // namespace memguard::track
