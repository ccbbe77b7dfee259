#include "track/recorder.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "common/errno_keeper.h"
#include "common/log.h"
#include "common/path_template.h"
#include "format/encode.h"
#include "memguard/memguard.h"
#include "track/clock.h"
#include "track/stack_memo.h"
#include "track/system_clock.h"
#include "track/unwind.h"
#include "track/writer.h"

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

/// Adds the report's absolute path to the run's manifest (MEMGUARD_RUN_MANIFEST, set by `memguard
/// run`), so that the launcher can list every report its command's processes wrote. One write of
/// less than PIPE_BUF bytes to a file opened O_APPEND: the lines of processes that start their
/// reports at once never interleave. Never through a symbolic link; a failure costs only the line.
void add_to_manifest(const std::string& manifest, const std::string& report_path) {
    if (manifest.empty()) return;
    ErrnoKeeper keep_errno;
    std::string line = report_path;
    if (line.empty() || line[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd)) {
            MG_LOG_WARN("MEMGUARD_RUN_MANIFEST: cannot tell the working directory ({}); the report is not listed",
                        std::strerror(errno));
            return;
        }
        line = std::string(cwd) + "/" + line;
    }
    if (line.find('\n') != std::string::npos || line.size() + 1 >= PIPE_BUF) {
        MG_LOG_WARN("MEMGUARD_RUN_MANIFEST: the report's path '{}' does not fit on one line; it is not listed",
                    echo_value(line));
        return;
    }
    line.push_back('\n');
    int fd = ::open(manifest.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        MG_LOG_WARN("MEMGUARD_RUN_MANIFEST: cannot open '{}' ({}); the report is not listed", echo_value(manifest),
                    std::strerror(errno));
        return;
    }
    ssize_t n;
    do {
        n = ::write(fd, line.data(), line.size());
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(line.size())) {
        MG_LOG_WARN("MEMGUARD_RUN_MANIFEST: cannot write to '{}' ({}); the report is not listed", echo_value(manifest),
                    n < 0 ? std::strerror(errno) : "short write");
    }
    ::close(fd);
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

}  // namespace

Recorder::Recorder(const Config& config, EventSink& sink, Clock& clock, Unwinder& unwinder)
    : writer_(sink),
      clock_(clock),
      unwinder_(unwinder),
      file_sink_(dynamic_cast<ReportWriter*>(&sink)),
      system_clock_(dynamic_cast<SystemClock*>(&clock)),
      self_range_(unwinder.own_code()) {
    init(config);
}

void Recorder::init(const Config& config) {
    config_ = config;
    // The encoding is chosen for the report file (MEMGUARD_REPORT_ENCODING), before any record is
    // made (records made before the report exists wait in its encoding); another sink (a test's)
    // keeps its own.
    if (file_sink_) file_sink_->set_binary(config.report_encoding == ReportEncoding::Binary);
    if (file_sink_ && config.max_report_size > 0) {
        file_sink_->set_limit(config.max_report_size);
        file_sink_->set_follower(config.fold, config.cli);
    }
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

int Recorder::kept_frames(const uintptr_t* ips, int n, const TextRange* cut, int* skip) const noexcept {
    int s = 0;
    while (s < n && self_range_.contains(ips[s])) ++s;
    int boundary = cut ? first_in(*cut, ips, s, n) : -1;
    if (boundary >= 0) n = boundary + 1;
    int keep = n - s;
    if (keep > config_.stack_depth) keep = config_.stack_depth;
    *skip = s;
    return keep;
}

int Recorder::unwind_stack_with_slots(uintptr_t* ips, uintptr_t* slots) const noexcept {
    // The cursor steps frame by frame, so it can stop where the kept stack ends: at the
    // interpreter or the kept depth, memguard's own frames on top not counted.
    const TextRange* cut = native_cut_.load(std::memory_order_acquire);
    int n = unwinder_.capture_with_slots(ips, slots, kStackCapacity, config_.stack_depth, cut);
    if (n < 0) return -1;
    int skip = 0;
    int keep = kept_frames(ips, n, cut, &skip);
    if (skip > 0) {
        for (int i = 0; i < keep; ++i) {
            ips[i] = ips[i + skip];
            slots[i] = slots[i + skip];
        }
    }
    return keep;
}

uint32_t Recorder::capture_and_intern(const uintptr_t* ret_slot) {
    if (ret_slot == nullptr || !config_.stack_memo) {
        uintptr_t ips[kStackCapacity];
        return intern_stack(ips, capture_stack(ips));
    }
    // The memo's ids are this report's (a fork child starts another) under this cut.
    const uint32_t epoch = epoch_.load(std::memory_order_acquire) * 2 +
                           (native_cut_.load(std::memory_order_acquire) != nullptr ? 1 : 0);
    StackMemo* memo = StackMemo::for_this_thread();
    if (memo) {
        if (uint32_t id = memo->find(ret_slot, epoch)) return id;
    }
    uintptr_t ips[kStackCapacity];
    const int n = capture_stack(ips);
    const uint32_t id = intern_stack(ips, n);
    FrameSizes* sizes = memo && memo->remembering() && id != 0 ? frame_sizes_.get() : nullptr;
    if (sizes == nullptr) return id;
    // The stack's slots from its frames' sizes; a frame not seen before is learned from the
    // cursor (frame_sizes.h), once per return address and alignment.
    uintptr_t slots[kStackCapacity];
    const auto slot0 = reinterpret_cast<uintptr_t>(ret_slot);
    FrameSizes::Walk walk = sizes->walk(ips, n, slot0, memo->stack_lo(), memo->stack_hi(), slots);
    if (walk == FrameSizes::Walk::Unknown) {
        uintptr_t cursor_ips[kStackCapacity];
        const int m = unwind_stack_with_slots(cursor_ips, slots);
        if (m > 0) sizes->learn(cursor_ips, slots, m);
        walk = sizes->walk(ips, n, slot0, memo->stack_lo(), memo->stack_hi(), slots);
        if (walk == FrameSizes::Walk::Unknown) {
            // The cursor did not teach the size this stack lacks (its frames differ from the fast
            // trace's, or it names no slots): never asked for that frame again.
            int i = 0;
            while (i + 1 < n && sizes->size_of(ips[i], slots[i]) > 0) ++i;
            sizes->give_up(ips[i], slots[i]);
        }
    }
    if (walk == FrameSizes::Walk::Found) memo->remember(slots, ips, n, id, epoch);
    return id;
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
    ctx.ranked = rank_in_env(std::getenv("RANK"), std::getenv("LOCAL_RANK"));
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
    add_to_manifest(config_.run_manifest, writer_.path());
    state_.store(State::Recording, std::memory_order_release);
    return true;
}

std::string Recorder::header() const {
    // The binary encoding's first line names it; the records after it are frames (format/binary.h).
    const bool binary = writer_.binary();
    // Binary: the encoding's version (format major 1 either way), the one the writer's Predictions code.
    std::string header = std::string(binary ? format::kBinaryMagic : std::string_view("MEMGUARD-REPORT")) + " " +
                         std::to_string(binary ? format::binary::kVersion : format::kFormatVersion) + "\n";
    auto info = [&header, binary](const char* key, std::string_view value) {
        encode_record(binary, format::rec::Info{key, value}, header);
    };
    info("format_minor", std::to_string(format::kFormatMinor));  // the record table's highest minor
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
    if (!config_.run_id.empty()) info("run_id", config_.run_id);  // minor 7: the reports of one run share it
    if (file_sink_ && config_.max_report_size > 0) {  // minor 10: a bounded report (docs/bounded-reports.md)
        info("report_limit", std::to_string(config_.max_report_size));
    }
    return header;
}

void Recorder::on_new_stack(void* self, uint32_t id, const uintptr_t* ips, int n) {
    auto* r = static_cast<Recorder*>(self);
    r->modules_.ensure_covered(ips, n, r->writer_);
    r->emit(format::rec::Stack{id, format::Tail<uint64_t>{ips, static_cast<size_t>(n)}});
}

uint32_t Recorder::intern(const uintptr_t* ips, int n) {
    if (n <= 0) return 0;
    return stacks_.intern(ips, n, &Recorder::on_new_stack, this);
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

void Recorder::flush() {
    if (state_.load(std::memory_order_acquire) == State::Recording) writer_.flush();
}

void Recorder::shutdown() {
    uint64_t hits = 0, misses = 0;
    StackMemo::totals(&hits, &misses);
    if (hits + misses > 0) {
        MG_LOG_INFO("stack memo: {} of {} tensor stacks found without unwinding (counted every 1024 per thread)", hits,
                    hits + misses);
    }
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
