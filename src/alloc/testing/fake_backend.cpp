#include "alloc/testing/fake_backend.h"

#include <algorithm>
#include <utility>

namespace memguard::alloc::testing {

namespace {

constexpr int kErrorInvalidValue = 1;     // cudaErrorInvalidValue
constexpr int kErrorInvalidDevice = 101;  // cudaErrorInvalidDevice
constexpr int kErrorInvalidResourceHandle = 400;
constexpr size_t kAlign = 512;

thread_local int t_capture_mode = kCaptureModeGlobal;

}  // namespace

FakeBackend::FakeBackend(int devices, size_t capacity) {
    for (int d = 0; d < devices; ++d) {
        Device dev;
        dev.capacity = capacity;
        // Each device has its own address range, four times its capacity so that fragmentation
        // of the fake address space never fails an allocation the capacity allows.
        dev.base = (uintptr_t{0x100} + static_cast<uintptr_t>(d) * 0x100) << 32;
        dev.free_ranges[dev.base] = std::max<size_t>(capacity, size_t{1} << 20) * 4;
        devices_.push_back(std::move(dev));
    }
}

void FakeBackend::misuse(std::string what) { misuses_.push_back(std::move(what)); }

int FakeBackend::segment_malloc(int d, size_t size, void** ptr) {
    std::function<void()> hook;
    {
        std::lock_guard<std::mutex> lock(mu_);
        hook = malloc_hook_;
    }
    if (hook) hook();
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (!captures_.empty() && t_capture_mode != kCaptureModeRelaxed) {
        misuse("segment_malloc during a capture outside relaxed capture mode");
        return kErrorStreamCaptureUnsupported;
    }
    if (fail_count_ > 0) {
        --fail_count_;
        return fail_error_;
    }
    if (size == 0) return kErrorInvalidValue;
    const size_t len = (size + kAlign - 1) / kAlign * kAlign;
    if (dev->used + len > dev->capacity) return kErrorMemoryAllocation;
    for (auto it = dev->free_ranges.begin(); it != dev->free_ranges.end(); ++it) {
        if (it->second < len) continue;
        const uintptr_t p = it->first;
        const size_t rest = it->second - len;
        dev->free_ranges.erase(it);
        if (rest) dev->free_ranges[p + len] = rest;
        dev->live[p] = len;
        dev->used += len;
        ++malloc_calls_;
        *ptr = reinterpret_cast<void*>(p);
        return kSuccess;
    }
    return kErrorMemoryAllocation;
}

int FakeBackend::segment_free(int d, void* ptr) {
    std::function<void(int, uintptr_t, size_t)> hook;
    size_t freed = 0;
    const int err = segment_free_locked(d, ptr, &hook, &freed);
    if (err == kSuccess && hook) hook(d, reinterpret_cast<uintptr_t>(ptr), freed);
    return err;
}

int FakeBackend::segment_free_locked(int d, void* ptr, std::function<void(int, uintptr_t, size_t)>* hook,
                                     size_t* freed) {
    std::lock_guard<std::mutex> lock(mu_);
    *hook = free_hook_;
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (!captures_.empty()) {
        misuse("segment_free during a capture");
        return kErrorStreamCaptureUnsupported;
    }
    const auto p = reinterpret_cast<uintptr_t>(ptr);
    auto it = dev->live.find(p);
    if (it == dev->live.end()) {
        misuse("segment_free of an unknown address");
        return kErrorInvalidValue;
    }
    size_t len = it->second;
    *freed = len;
    dev->live.erase(it);
    dev->used -= len;
    ++free_calls_;
    // cudaFree synchronizes the device: all queued work completes.
    for (auto& [s, n] : submitted_) completed_[s] = std::max(completed_[s], n);
    uintptr_t start = p;
    auto next = dev->free_ranges.lower_bound(p);
    if (next != dev->free_ranges.end() && next->first == p + len) {
        len += next->second;
        next = dev->free_ranges.erase(next);
    }
    if (next != dev->free_ranges.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == start) {
            start = prev->first;
            len += prev->second;
            dev->free_ranges.erase(prev);
        }
    }
    dev->free_ranges[start] = len;
    return kSuccess;
}

int FakeBackend::mem_info(int d, size_t* free_bytes, size_t* total_bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    *free_bytes = dev->capacity - std::min(dev->used, dev->capacity);
    *total_bytes = dev->capacity;
    return kSuccess;
}

int FakeBackend::event_create(int d, Event* event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!device(d)) return kErrorInvalidDevice;
    const Event e = next_event_++;
    events_[e].device = d;
    ++events_created_;
    *event = e;
    return kSuccess;
}

int FakeBackend::event_destroy(int, Event event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (events_.erase(event) == 0) {
        misuse("event_destroy of an unknown event");
        return kErrorInvalidResourceHandle;
    }
    return kSuccess;
}

int FakeBackend::event_record(int, Event event, Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = events_.find(event);
    if (it == events_.end()) {
        misuse("event_record of an unknown event");
        return kErrorInvalidResourceHandle;
    }
    if (captures_.count(stream)) {
        misuse("event_record on a capturing stream");
        return kErrorStreamCaptureUnsupported;
    }
    FakeEvent& e = it->second;
    e.recorded = true;
    e.stream = stream;
    auto s = submitted_.find(stream);
    e.target = s == submitted_.end() ? 0 : s->second;
    e.queries = 0;
    ++event_records_;
    return kSuccess;
}

int FakeBackend::event_query(int, Event event) {
    std::lock_guard<std::mutex> lock(mu_);
    ++event_queries_;
    if (!captures_.empty()) {
        misuse("event_query during a capture");
        return kErrorStreamCaptureUnsupported;
    }
    auto it = events_.find(event);
    if (it == events_.end()) {
        misuse("event_query of an unknown event");
        return kErrorInvalidResourceHandle;
    }
    if (event_fail_count_ > 0) {
        --event_fail_count_;
        return event_fail_error_;
    }
    FakeEvent& e = it->second;
    if (!e.recorded || done(e)) return kSuccess;
    if (auto_complete_after_ > 0 && ++e.queries >= auto_complete_after_) {
        uint64_t& c = completed_[e.stream];
        c = std::max(c, e.target);
        return kSuccess;
    }
    return kErrorNotReady;
}

int FakeBackend::event_synchronize(int, Event event) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!captures_.empty()) {
        misuse("event_synchronize during a capture");
        return kErrorStreamCaptureUnsupported;
    }
    auto it = events_.find(event);
    if (it == events_.end()) {
        misuse("event_synchronize of an unknown event");
        return kErrorInvalidResourceHandle;
    }
    if (event_fail_count_ > 0) {
        --event_fail_count_;
        return event_fail_error_;
    }
    FakeEvent& e = it->second;
    if (e.recorded) {
        uint64_t& c = completed_[e.stream];
        c = std::max(c, e.target);
    }
    return kSuccess;
}

bool FakeBackend::stream_capturing(int, Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    return captures_.count(stream) != 0;
}

bool FakeBackend::any_capture_active(int) {
    std::lock_guard<std::mutex> lock(mu_);
    return !captures_.empty();
}

int FakeBackend::exchange_capture_mode(int* mode) {
    std::swap(*mode, t_capture_mode);
    return kSuccess;
}

int FakeBackend::thread_capture_mode() { return t_capture_mode; }

void FakeBackend::fail_next_mallocs(int n, int error) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_count_ = n;
    fail_error_ = error;
}

void FakeBackend::fail_next_event_waits(int n, int error) {
    std::lock_guard<std::mutex> lock(mu_);
    event_fail_count_ = n;
    event_fail_error_ = error;
}

void FakeBackend::set_capacity(int d, size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (Device* dev = device(d)) dev->capacity = bytes;
}

void FakeBackend::submit(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    ++submitted_[s];
}

void FakeBackend::complete(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    completed_[s] = std::max(completed_[s], submitted_[s]);
}

void FakeBackend::complete_all() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [s, n] : submitted_) completed_[s] = std::max(completed_[s], n);
}

uint64_t FakeBackend::submitted(Stream s) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = submitted_.find(s);
    return it == submitted_.end() ? 0 : it->second;
}

uint64_t FakeBackend::completed(Stream s) const {
    std::lock_guard<std::mutex> lock(mu_);
    return completed_of(s);
}

void FakeBackend::set_auto_complete_after(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    auto_complete_after_ = n;
}

void FakeBackend::set_malloc_hook(std::function<void()> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    malloc_hook_ = std::move(hook);
}

void FakeBackend::set_free_hook(std::function<void(int, uintptr_t, size_t)> hook) {
    std::lock_guard<std::mutex> lock(mu_);
    free_hook_ = std::move(hook);
}

uintptr_t FakeBackend::segment_of(int d, uintptr_t ptr, size_t* len) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (d < 0 || d >= static_cast<int>(devices_.size())) return 0;
    const auto& live = devices_[d].live;
    auto it = live.upper_bound(ptr);
    if (it == live.begin()) return 0;
    --it;
    if (ptr >= it->first + it->second) return 0;
    if (len) *len = it->second;
    return it->first;
}

void FakeBackend::begin_capture(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (captures_.count(s)) misuse("begin_capture on a stream already capturing");
    captures_.insert(s);
}

void FakeBackend::end_capture(Stream s) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = captures_.find(s);
    if (it == captures_.end()) {
        misuse("end_capture on a stream not capturing");
        return;
    }
    captures_.erase(it);
}

size_t FakeBackend::live_segments(int d) const {
    std::lock_guard<std::mutex> lock(mu_);
    return d >= 0 && d < static_cast<int>(devices_.size()) ? devices_[d].live.size() : 0;
}

size_t FakeBackend::live_bytes(int d) const {
    std::lock_guard<std::mutex> lock(mu_);
    return d >= 0 && d < static_cast<int>(devices_.size()) ? devices_[d].used : 0;
}

bool FakeBackend::segment_live(int d, uintptr_t ptr) const {
    std::lock_guard<std::mutex> lock(mu_);
    return d >= 0 && d < static_cast<int>(devices_.size()) && devices_[d].live.count(ptr) != 0;
}

uint64_t FakeBackend::malloc_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return malloc_calls_;
}

uint64_t FakeBackend::free_calls() const {
    std::lock_guard<std::mutex> lock(mu_);
    return free_calls_;
}

uint64_t FakeBackend::event_queries() const {
    std::lock_guard<std::mutex> lock(mu_);
    return event_queries_;
}

uint64_t FakeBackend::event_records() const {
    std::lock_guard<std::mutex> lock(mu_);
    return event_records_;
}

uint64_t FakeBackend::events_created() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_created_;
}

std::vector<std::string> FakeBackend::misuses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return misuses_;
}

}  // namespace memguard::alloc::testing
