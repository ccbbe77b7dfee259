// A fake device for the allocator core's tests and benchmark: fake non-overlapping addresses
// within a capacity, failure injection, streams whose queued work completes when the test says
// (or after an event was queried N times), captures, and the thread capture mode. It records
// every call the real device would refuse or that would break a capture (a "misuse") so that a
// test can assert there was none.
//
// The driver's virtual memory calls keep the driver's rules that the allocator relies on:
// reservations, handle sizes and mappings in multiples of the granularity; a mapping only inside
// a reserved range, never over another mapping, of a live handle; access set only on mapped
// ranges; unmaps of whole mappings; an address free only of a whole, empty reservation; physical
// memory counted against the capacity (out of memory at cuMemCreate) until the handle is released
// and no longer mapped. Reserves, creates, maps, access changes, unmaps and releases during a
// capture outside relaxed mode, and address frees and stream synchronizations during any capture,
// are misuses.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "alloc/backend.h"

namespace memguard::alloc::testing {

class FakeBackend final : public DeviceBackend {
public:
    explicit FakeBackend(int devices = 1, size_t capacity = size_t{16} << 30);

    // --- DeviceBackend ---
    int segment_malloc(int device, size_t size, void** ptr) override;
    int segment_free(int device, void* ptr) override;
    int mem_info(int device, size_t* free_bytes, size_t* total_bytes) override;
    int event_create(int device, Event* event) override;
    int event_destroy(int device, Event event) override;
    int event_record(int device, Event event, Stream stream) override;
    int event_query(int device, Event event) override;
    int event_synchronize(int device, Event event) override;
    bool stream_capturing(int device, Stream stream) override;
    bool any_capture_active(int device) override;
    int exchange_capture_mode(int* mode) override;
    int total_memory(int device, size_t* bytes) override;
    int vmm_granularity(int device, size_t* bytes) override;
    int vmm_reserve(int device, size_t size, uintptr_t* va) override;
    int vmm_address_free(int device, uintptr_t va, size_t size) override;
    int vmm_create(int device, size_t size, PhysHandle* handle) override;
    int vmm_release(int device, PhysHandle handle) override;
    int vmm_map(int device, uintptr_t va, size_t size, PhysHandle handle) override;
    int vmm_set_access(int device, uintptr_t va, size_t size) override;
    int vmm_unmap(int device, uintptr_t va, size_t size) override;
    int stream_synchronize(int device, Stream stream) override;

    // --- what the test controls ---
    /// The next n segment_malloc calls fail with `error` (before looking at the capacity).
    void fail_next_mallocs(int n, int error = kErrorMemoryAllocation);
    /// The next n event_query / event_synchronize calls fail with `error` (a sticky error, say).
    void fail_next_event_waits(int n, int error);
    void set_capacity(int device, size_t bytes);
    /// Queues work on a stream (a kernel using a block, say).
    void submit(Stream s);
    /// All work queued on `s` so far completes.
    void complete(Stream s);
    void complete_all();
    uint64_t submitted(Stream s) const;
    uint64_t completed(Stream s) const;
    /// An event completes by itself once queried n times (0: only when the test completes it).
    void set_auto_complete_after(int n);
    /// Called (without the fake's lock) on every segment_malloc, before anything else.
    void set_malloc_hook(std::function<void()> hook);
    /// Called (without the fake's lock) after every successful segment_free, with its range.
    void set_free_hook(std::function<void(int device, uintptr_t base, size_t len)> hook);
    void begin_capture(Stream s);
    void end_capture(Stream s);
    /// The granularity of physical memory (2 MiB by default); 0: the device has no virtual
    /// memory calls (vmm_granularity fails with kErrorNotSupported).
    void set_vmm_granularity(size_t bytes);
    /// The next n vmm_create calls fail with `error` (before looking at the capacity).
    void fail_next_vmm_creates(int n, int error = kErrorMemoryAllocation);
    /// The next n vmm_map calls fail with `error`.
    void fail_next_vmm_maps(int n, int error);

    // --- what the test observes ---
    size_t live_segments(int device) const;
    size_t live_bytes(int device) const;
    bool segment_live(int device, uintptr_t ptr) const;
    /// The live segment holding ptr: its base (0 when none) and length.
    uintptr_t segment_of(int device, uintptr_t ptr, size_t* len = nullptr) const;
    uint64_t malloc_calls() const;  // successful segment_malloc calls
    uint64_t free_calls() const;
    uint64_t event_queries() const;
    uint64_t event_records() const;
    uint64_t events_created() const;
    struct VmmCounts {
        uint64_t reserves = 0, address_frees = 0, creates = 0, releases = 0, maps = 0, unmaps = 0, set_access = 0,
                 stream_syncs = 0;
        size_t live_reservations = 0, live_handles = 0, mapped_bytes = 0, physical_bytes = 0;
        size_t inaccessible_mappings = 0;  // mapped without access set yet
    };
    VmmCounts vmm(int device) const;
    /// The reserved range holding va: its base (0 when none) and size.
    uintptr_t reservation_of(int device, uintptr_t va, size_t* size = nullptr) const;
    /// Whether [va, va + size) is wholly mapped with access set.
    bool accessible(int device, uintptr_t va, size_t size) const;
    std::vector<std::string> misuses() const;
    static int thread_capture_mode();

private:
    struct Handle {
        size_t size = 0;
        int maps = 0;
        bool released = false;
    };
    struct Mapping {
        size_t size = 0;
        PhysHandle handle = 0;
        bool access = false;
    };
    struct Device {
        size_t capacity;
        size_t used = 0;  // segment bytes and physical memory
        uintptr_t base;
        std::map<uintptr_t, size_t> free_ranges;  // address -> length, coalesced
        std::map<uintptr_t, size_t> live;
        uintptr_t next_reserve = 0;            // reservations are handed out upwards from here
        std::map<uintptr_t, size_t> reserved;  // base -> size
        std::map<uintptr_t, Mapping> mappings;
        VmmCounts counts;
    };
    bool vmm_capture_misuse(const char* call, bool allowed_relaxed);  // mu_ held
    void drop_handle_if_gone(Device& dev, PhysHandle h);              // mu_ held
    struct FakeEvent {
        int device = 0;
        bool recorded = false;
        Stream stream = 0;
        uint64_t target = 0;
        int queries = 0;
    };
    void misuse(std::string what);  // mu_ held
    int segment_free_locked(int d, void* ptr, std::function<void(int, uintptr_t, size_t)>* hook, size_t* freed);
    bool done(const FakeEvent& e) const { return completed_of(e.stream) >= e.target; }
    uint64_t completed_of(Stream s) const {
        auto it = completed_.find(s);
        return it == completed_.end() ? 0 : it->second;
    }
    Device* device(int d) { return d >= 0 && d < static_cast<int>(devices_.size()) ? &devices_[d] : nullptr; }

    mutable std::mutex mu_;
    std::vector<Device> devices_;
    std::unordered_map<Stream, uint64_t> submitted_;
    std::unordered_map<Stream, uint64_t> completed_;
    std::unordered_map<Event, FakeEvent> events_;
    Event next_event_ = 0x1000;
    std::multiset<Stream> captures_;
    int fail_count_ = 0;
    int fail_error_ = kErrorMemoryAllocation;
    int event_fail_count_ = 0;
    int event_fail_error_ = 0;
    int auto_complete_after_ = 0;
    size_t granularity_ = 2u << 20;
    std::map<PhysHandle, std::pair<int, Handle>> handles_;  // handle -> (device, state)
    PhysHandle next_handle_ = 0x7000;
    int vmm_create_fail_count_ = 0, vmm_create_fail_error_ = kErrorMemoryAllocation;
    int vmm_map_fail_count_ = 0, vmm_map_fail_error_ = 0;
    std::function<void()> malloc_hook_;
    std::function<void(int, uintptr_t, size_t)> free_hook_;
    uint64_t malloc_calls_ = 0, free_calls_ = 0, event_queries_ = 0, event_records_ = 0, events_created_ = 0;
    std::vector<std::string> misuses_;
};

}  // namespace memguard::alloc::testing
