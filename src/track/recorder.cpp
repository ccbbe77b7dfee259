#include "track/recorder.h"

#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <unistd.h>

#include "common/log.h"
#include "common/path_template.h"
#include "memguard/memguard.h"
#include "track/clock.h"
#include "track/line.h"
#include "track/unwind.h"

namespace memguard::track {

thread_local int HookScope::depth_ = 0;

namespace {

std::atomic<int64_t> g_t0_mono{0};
std::atomic<int64_t> g_t0_unix{0};

void reset_clock_origin() {
    g_t0_mono.store(monotonic_ns(), std::memory_order_relaxed);
    g_t0_unix.store(realtime_ns(), std::memory_order_relaxed);
}

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

Recorder& Recorder::instance() {
    static Recorder* r = new Recorder();
    return *r;
}

Recorder::Recorder() : writer_(&Recorder::now) {
    reset_clock_origin();
    self_range_ = object_range_of(reinterpret_cast<const void*>(&Recorder::instance));
}

int64_t Recorder::now() noexcept { return monotonic_ns() - g_t0_mono.load(std::memory_order_relaxed); }

void Recorder::init(const Config& config) {
    config_ = config;
    state_.store(config.enabled ? State::Idle : State::Off, std::memory_order_release);
}

int Recorder::capture_stack(uintptr_t* ips) const noexcept {
    int depth = config_.stack_depth;
    if (depth <= 0) return 0;
    int n = track::capture_stack(ips, kStackCapacity);
    int skip = 0;
    while (skip < n && self_range_.contains(ips[skip])) ++skip;
    int keep = n - skip;
    if (keep > depth) keep = depth;
    if (skip > 0) {
        for (int i = 0; i < keep; ++i) ips[i] = ips[i + skip];
    }
    return keep;
}

bool Recorder::ensure_started() {
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
    std::string path = config_.output_template.empty() ? default_report_name(ctx)
                                                       : expand_template(config_.output_template, ctx);
    std::string error;
    if (!writer_.start(path, &error)) {
        MG_LOG_WARN("MEMGUARD_OUTPUT: {}; the program runs on without a report", error);
        state_.store(State::Failed, std::memory_order_release);
        return false;
    }
    write_header();
    modules_.refresh(writer_);
    MG_LOG_INFO("writing report {}", writer_.path());
    state_.store(State::Recording, std::memory_order_release);
    return true;
}

void Recorder::write_header() {
    std::string header = "MEMGUARD-REPORT 1\n";
    writer_.append(header);
    auto info = [this](const char* key, std::string_view value) {
        Line line('I');
        line.word(key).str(value);
        writer_.append(line.finish());
    };
    info("format_minor", "0");
    info("pid", std::to_string(getpid()));
    info("ppid", std::to_string(getppid()));
    info("exe", exe_path());
    info("cmdline", command_line());
    info("host", host_name());
    info("rank", rank_from_env(std::getenv("RANK"), std::getenv("LOCAL_RANK")));
    info("t0_unix_ns", std::to_string(g_t0_unix.load(std::memory_order_relaxed)));
    info("memguard_version", MEMGUARD_VERSION_STRING);
    info("stack_depth", std::to_string(config_.stack_depth));
    info("unwinder", unwinder_name());
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
    uint32_t sid = intern(ips, n);
    auto replaced = blocks_.insert(addr, LiveBlock{size, sid, kind, device});
    int64_t t = now();
    uint64_t tid = current_tid();
    if (replaced) {
        // The earlier block at this address was released by a path memguard does not see.
        Line f('F');
        f.sdec(t).dec(tid).hex(addr).dec(replaced->size).word("unseen").word("-");
        writer_.append(f.finish());
    }
    Line line('A');
    line.sdec(t).dec(tid).hex(addr).dec(size).word(kind_name(kind)).word(api_name(api)).sdec(device);
    put_stream(line, stream);
    line.dec(sid);
    writer_.append(line.finish());
}

void Recorder::record_alloc_failed(Api api, Kind kind, uint64_t size, int device, StreamArg stream,
                                   const uintptr_t* ips, int n, int error) {
    if (!ensure_started()) return;
    uint32_t sid = intern(ips, n);
    Line line('E');
    line.sdec(now()).dec(current_tid()).dec(size).word(kind_name(kind)).word(api_name(api)).sdec(device);
    put_stream(line, stream);
    line.dec(sid).sdec(error).dec(blocks_.gpu_live_bytes(device));
    writer_.append(line.finish());
}

std::optional<LiveBlock> Recorder::record_free(Api api, uintptr_t addr, StreamArg stream) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return std::nullopt;
    auto b = blocks_.remove(addr);
    if (!b) return std::nullopt;
    Line line('F');
    line.sdec(now()).dec(current_tid()).hex(addr).dec(b->size).word(api_name(api));
    put_stream(line, stream);
    writer_.append(line.finish());
    return b;
}

void Recorder::record_free_failed(uintptr_t addr, const LiveBlock& block, int error) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    blocks_.insert(addr, block);
    Line line('R');
    line.sdec(now()).dec(current_tid()).hex(addr).sdec(error);
    writer_.append(line.finish());
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

// Lock order everywhere: start_mu_ -> stack shards -> module map -> block shards -> writer.
void Recorder::before_fork() {
    start_mu_.lock();
    stacks_.lock_all();
    modules_.mutex().lock();
    blocks_.lock_all();
    writer_.lock_for_fork();
}

void Recorder::after_fork_parent() {
    writer_.unlock_after_fork();
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
    reset_clock_origin();
    writer_.reset_in_child();
    blocks_.clear();
    stacks_.clear();
    modules_.clear();
    State s = state_.load(std::memory_order_acquire);
    if (s == State::Recording || s == State::Failed) state_.store(State::Idle, std::memory_order_release);
}

}  // namespace memguard::track
