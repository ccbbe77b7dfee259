#include "track/capture.h"

namespace memguard::track {

namespace {
thread_local CaptureMode t_thread_mode = CaptureMode::Global;  // CUDA's default
thread_local int t_untracked = 0;  // captures this thread began that did not fit in the view
}  // namespace

CaptureMode thread_capture_mode() noexcept { return t_thread_mode; }
void set_thread_capture_mode(CaptureMode m) noexcept { t_thread_mode = m; }

bool CaptureView::on_stream(const Slot& s, StreamArg stream, uint64_t tid) noexcept {
    if (s.stream.load(std::memory_order_relaxed) != stream.handle) return false;
    bool per_thread = s.per_thread.load(std::memory_order_relaxed);
    return per_thread == stream.per_thread && (!per_thread || s.tid.load(std::memory_order_relaxed) == tid);
}

uint32_t CaptureView::begin(StreamArg stream, CaptureMode mode, uint64_t tid) noexcept {
    for (Slot& s : slots_) {
        uint32_t expected = 0;
        // Claim the slot with a placeholder id, fill it, then publish the real id.
        if (!s.id.compare_exchange_strong(expected, UINT32_MAX, std::memory_order_acq_rel)) continue;
        s.stream.store(stream.handle, std::memory_order_relaxed);
        s.per_thread.store(stream.per_thread, std::memory_order_relaxed);
        s.mode.store(static_cast<int>(mode), std::memory_order_relaxed);
        s.tid.store(tid, std::memory_order_relaxed);
        s.seq.store(next_seq_.fetch_add(1, std::memory_order_relaxed), std::memory_order_relaxed);
        uint32_t id = next_id_.fetch_add(1, std::memory_order_relaxed);
        s.id.store(id, std::memory_order_release);
        active_.fetch_add(1, std::memory_order_acq_rel);
        return id;
    }
    ++t_untracked;
    return 0;
}

CaptureInfo CaptureView::read(const Slot& s, uint32_t id) const noexcept {
    CaptureInfo info;
    info.id = id;
    info.stream = s.stream.load(std::memory_order_relaxed);
    info.per_thread_stream = s.per_thread.load(std::memory_order_relaxed);
    info.mode = static_cast<CaptureMode>(s.mode.load(std::memory_order_relaxed));
    info.tid = s.tid.load(std::memory_order_relaxed);
    return info;
}

CaptureInfo CaptureView::end(StreamArg stream, uint64_t tid) noexcept {
    for (Slot& s : slots_) {
        uint32_t id = s.id.load(std::memory_order_acquire);
        if (id == 0 || id == UINT32_MAX || !on_stream(s, stream, tid)) continue;
        CaptureInfo info = read(s, id);
        if (s.id.compare_exchange_strong(id, 0, std::memory_order_acq_rel)) {
            active_.fetch_sub(1, std::memory_order_acq_rel);
            return info;
        }
    }
    if (t_untracked > 0) --t_untracked;
    return {};
}

CaptureInfo CaptureView::owner_for(StreamArg stream, uint64_t tid) const noexcept {
    if (active() == 0) return {};
    CaptureInfo best;
    uint64_t best_seq = 0;
    for (const Slot& s : slots_) {
        uint32_t id = s.id.load(std::memory_order_acquire);
        if (id == 0 || id == UINT32_MAX) continue;
        if (stream.present && on_stream(s, stream, tid)) return read(s, id);
        uint64_t seq = s.seq.load(std::memory_order_relaxed);
        if (s.tid.load(std::memory_order_relaxed) == tid && seq > best_seq) {
            best = read(s, id);
            best_seq = seq;
        }
    }
    // With an untracked capture of this thread in progress, the thread's block may be its.
    return t_untracked > 0 ? CaptureInfo{} : best;
}

CaptureInfo CaptureView::prohibiting(uint64_t tid, CaptureMode thread_mode) const noexcept {
    if (active() == 0 || thread_mode == CaptureMode::Relaxed) return {};
    for (const Slot& s : slots_) {
        uint32_t id = s.id.load(std::memory_order_acquire);
        if (id == 0 || id == UINT32_MAX) continue;
        CaptureInfo c = read(s, id);
        if (c.tid == tid && c.mode != CaptureMode::Relaxed) return c;
        if (thread_mode == CaptureMode::Global && c.tid != tid && c.mode == CaptureMode::Global) return c;
    }
    return {};
}

void CaptureView::clear() noexcept {
    for (Slot& s : slots_) s.id.store(0, std::memory_order_relaxed);
    active_.store(0, std::memory_order_relaxed);
    t_untracked = 0;
}

void GraphRegistry::captured(uintptr_t graph, uint32_t capture_id) {
    std::lock_guard<std::mutex> lock(mu_);
    graph_capture_[graph] = capture_id;
}

uint32_t GraphRegistry::instantiated(uintptr_t exec, uintptr_t graph) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = graph_capture_.find(graph);
    uint32_t capture = it == graph_capture_.end() ? 0 : it->second;
    exec_capture_[exec] = capture;
    if (capture != 0) ++live_execs_[capture];
    return capture;
}

uint32_t GraphRegistry::exec_destroyed(uintptr_t exec) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = exec_capture_.find(exec);
    if (it == exec_capture_.end()) return 0;
    uint32_t capture = it->second;
    exec_capture_.erase(it);
    if (capture != 0 && --live_execs_[capture] == 0) live_execs_.erase(capture);
    return capture;
}

void GraphRegistry::graph_destroyed(uintptr_t graph) {
    std::lock_guard<std::mutex> lock(mu_);
    graph_capture_.erase(graph);
}

uintptr_t GraphRegistry::live_exec_of(uint32_t capture_id) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (live_execs_.find(capture_id) == live_execs_.end()) return 0;
    for (const auto& [exec, capture] : exec_capture_) {
        if (capture == capture_id) return exec;
    }
    return 0;
}

void GraphRegistry::clear() {
    graph_capture_.clear();
    exec_capture_.clear();
    live_execs_.clear();
}

}  // namespace memguard::track
