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
        // Reserved ranges come from the upper half of the device's 1 TiB of fake addresses.
        dev.next_reserve = dev.base + (uintptr_t{1} << 39);
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

// --- the driver's virtual memory calls -----------------------------------------------------------

bool FakeBackend::vmm_capture_misuse(const char* call, bool allowed_relaxed) {
    if (captures_.empty() || (allowed_relaxed && t_capture_mode == kCaptureModeRelaxed)) return false;
    misuse(std::string(call) +
           (allowed_relaxed ? " during a capture outside relaxed capture mode" : " during a capture"));
    return true;
}

void FakeBackend::drop_handle_if_gone(Device& dev, PhysHandle h) {
    auto it = handles_.find(h);
    if (it == handles_.end() || !it->second.second.released || it->second.second.maps > 0) return;
    // As in CUDA: the memory of a released handle goes with its last mapping.
    dev.used -= it->second.second.size;
    dev.counts.physical_bytes -= it->second.second.size;
    dev.counts.live_handles--;
    handles_.erase(it);
}

int FakeBackend::total_memory(int d, size_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    *bytes = dev->capacity;
    return kSuccess;
}

int FakeBackend::vmm_granularity(int d, size_t* bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!device(d)) return kErrorInvalidDevice;
    if (granularity_ == 0) return kErrorNotSupported;
    *bytes = granularity_;
    return kSuccess;
}

int FakeBackend::vmm_reserve(int d, size_t size, uintptr_t* va) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (granularity_ == 0) return kErrorNotSupported;
    if (vmm_capture_misuse("vmm_reserve", true)) return kErrorStreamCaptureUnsupported;
    if (size == 0 || size % granularity_ != 0) {
        misuse("vmm_reserve of a size that is not a multiple of the granularity");
        return kErrorInvalidValue;
    }
    *va = dev->next_reserve;
    dev->next_reserve += size + granularity_;  // a gap: ranges never touch
    dev->reserved[*va] = size;
    dev->counts.reserves++;
    dev->counts.live_reservations++;
    return kSuccess;
}

int FakeBackend::vmm_address_free(int d, uintptr_t va, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (vmm_capture_misuse("vmm_address_free", false)) return kErrorStreamCaptureUnsupported;
    auto it = dev->reserved.find(va);
    if (it == dev->reserved.end() || it->second != size) {
        misuse("vmm_address_free of a range that was not reserved as a whole");
        return kErrorInvalidValue;
    }
    auto m = dev->mappings.lower_bound(va);
    if (m != dev->mappings.end() && m->first < va + size) {
        misuse("vmm_address_free of a range that still has mappings");
        return kErrorInvalidValue;
    }
    dev->reserved.erase(it);
    dev->counts.address_frees++;
    dev->counts.live_reservations--;
    return kSuccess;
}

int FakeBackend::vmm_create(int d, size_t size, PhysHandle* handle) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (granularity_ == 0) return kErrorNotSupported;
    if (vmm_capture_misuse("vmm_create", true)) return kErrorStreamCaptureUnsupported;
    if (size == 0 || size % granularity_ != 0) {
        misuse("vmm_create of a size that is not a multiple of the granularity");
        return kErrorInvalidValue;
    }
    if (vmm_create_fail_count_ > 0) {
        --vmm_create_fail_count_;
        return vmm_create_fail_error_;
    }
    if (dev->used + size > dev->capacity) return kErrorMemoryAllocation;  // CUDA_ERROR_OUT_OF_MEMORY
    const PhysHandle h = next_handle_++;
    handles_[h] = {d, Handle{size, 0, false}};
    dev->used += size;
    dev->counts.creates++;
    dev->counts.live_handles++;
    dev->counts.physical_bytes += size;
    *handle = h;
    return kSuccess;
}

int FakeBackend::vmm_release(int d, PhysHandle handle) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (vmm_capture_misuse("vmm_release", true)) return kErrorStreamCaptureUnsupported;
    auto it = handles_.find(handle);
    if (it == handles_.end() || it->second.second.released || it->second.first != d) {
        misuse("vmm_release of an unknown or released handle");
        return kErrorInvalidValue;
    }
    it->second.second.released = true;
    dev->counts.releases++;
    drop_handle_if_gone(*dev, handle);
    return kSuccess;
}

int FakeBackend::vmm_map(int d, uintptr_t va, size_t size, PhysHandle handle) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (vmm_capture_misuse("vmm_map", true)) return kErrorStreamCaptureUnsupported;
    if (vmm_map_fail_count_ > 0) {
        --vmm_map_fail_count_;
        return vmm_map_fail_error_;
    }
    auto h = handles_.find(handle);
    if (h == handles_.end() || h->second.second.released || h->second.first != d || size != h->second.second.size) {
        misuse("vmm_map of an unknown or released handle, or not of its whole size");
        return kErrorInvalidValue;
    }
    if (size == 0 || size % granularity_ != 0 || va % granularity_ != 0) {
        misuse("vmm_map of a range not aligned to the granularity");
        return kErrorInvalidValue;
    }
    auto r = dev->reserved.upper_bound(va);
    if (r == dev->reserved.begin() || va + size > std::prev(r)->first + std::prev(r)->second) {
        misuse("vmm_map outside a reserved range");
        return kErrorInvalidValue;
    }
    auto m = dev->mappings.lower_bound(va);
    const bool overlaps_next = m != dev->mappings.end() && m->first < va + size;
    const bool overlaps_prev = m != dev->mappings.begin() && std::prev(m)->first + std::prev(m)->second.size > va;
    if (overlaps_next || overlaps_prev) {
        misuse("vmm_map over a range that is already mapped");
        return kErrorInvalidValue;
    }
    dev->mappings[va] = Mapping{size, handle, false};
    h->second.second.maps++;
    dev->counts.maps++;
    dev->counts.mapped_bytes += size;
    return kSuccess;
}

int FakeBackend::vmm_set_access(int d, uintptr_t va, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (vmm_capture_misuse("vmm_set_access", true)) return kErrorStreamCaptureUnsupported;
    // The range must be covered by mappings, end to end.
    uintptr_t at = va;
    auto m = dev->mappings.find(va);
    std::vector<Mapping*> covered;
    while (at < va + size && m != dev->mappings.end() && m->first == at) {
        covered.push_back(&m->second);
        at += m->second.size;
        ++m;
    }
    if (size == 0 || at != va + size) {
        misuse("vmm_set_access on a range that is not wholly mapped");
        return kErrorInvalidValue;
    }
    for (Mapping* x : covered) x->access = true;
    dev->counts.set_access++;
    return kSuccess;
}

int FakeBackend::vmm_unmap(int d, uintptr_t va, size_t size) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (vmm_capture_misuse("vmm_unmap", true)) return kErrorStreamCaptureUnsupported;
    uintptr_t at = va;
    auto m = dev->mappings.find(va);
    std::vector<std::map<uintptr_t, Mapping>::iterator> whole;
    while (at < va + size && m != dev->mappings.end() && m->first == at) {
        whole.push_back(m);
        at += m->second.size;
        ++m;
    }
    if (size == 0 || at != va + size) {
        misuse("vmm_unmap of a range that is not whole mappings");
        return kErrorInvalidValue;
    }
    for (auto it : whole) {
        const PhysHandle h = it->second.handle;
        dev->counts.mapped_bytes -= it->second.size;
        dev->mappings.erase(it);
        handles_.at(h).second.maps--;
        drop_handle_if_gone(*dev, h);
    }
    dev->counts.unmaps++;
    return kSuccess;
}

int FakeBackend::stream_synchronize(int d, Stream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    Device* dev = device(d);
    if (!dev) return kErrorInvalidDevice;
    if (vmm_capture_misuse("stream_synchronize", false)) return kErrorStreamCaptureUnsupported;
    completed_[stream] = std::max(completed_[stream], submitted_[stream]);
    dev->counts.stream_syncs++;
    return kSuccess;
}

void FakeBackend::set_vmm_granularity(size_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    granularity_ = bytes;
}

void FakeBackend::fail_next_vmm_creates(int n, int error) {
    std::lock_guard<std::mutex> lock(mu_);
    vmm_create_fail_count_ = n;
    vmm_create_fail_error_ = error;
}

void FakeBackend::fail_next_vmm_maps(int n, int error) {
    std::lock_guard<std::mutex> lock(mu_);
    vmm_map_fail_count_ = n;
    vmm_map_fail_error_ = error;
}

FakeBackend::VmmCounts FakeBackend::vmm(int d) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (d < 0 || d >= static_cast<int>(devices_.size())) return {};
    VmmCounts c = devices_[d].counts;
    c.inaccessible_mappings = 0;
    for (const auto& [va, m] : devices_[d].mappings)
        if (!m.access) c.inaccessible_mappings++;
    return c;
}

uintptr_t FakeBackend::reservation_of(int d, uintptr_t va, size_t* size) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (d < 0 || d >= static_cast<int>(devices_.size())) return 0;
    const auto& r = devices_[d].reserved;
    auto it = r.upper_bound(va);
    if (it == r.begin()) return 0;
    --it;
    if (va >= it->first + it->second) return 0;
    if (size) *size = it->second;
    return it->first;
}

bool FakeBackend::accessible(int d, uintptr_t va, size_t size) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (d < 0 || d >= static_cast<int>(devices_.size())) return false;
    const auto& maps = devices_[d].mappings;
    auto it = maps.upper_bound(va);
    if (it == maps.begin()) return false;
    --it;
    uintptr_t at = va;
    while (at < va + size) {
        if (it == maps.end() || it->first > at || it->first + it->second.size <= at || !it->second.access) return false;
        at = it->first + it->second.size;
        ++it;
    }
    return true;
}

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
