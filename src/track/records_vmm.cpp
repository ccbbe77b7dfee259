// The Recorder's driver virtual memory records (docs/report-format.md, minors 3 and 11): V, v, N, n, Q, q, m;
// the reader's side is report/read_vmm.cpp.
#include "format/encode.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::track {

void Recorder::record_reserve(uintptr_t va, uint64_t size, const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    record_reserve_interned(va, size, sid, py);
}

void Recorder::record_reserve_interned(uintptr_t va, uint64_t size, uint32_t stack_id, uint32_t python_stack_id) {
    if (!ensure_started()) return;
    emit(format::rec::Reserve{now(), current_tid(), va, size, stack_id, python_stack_id});
}

void Recorder::record_address_free(uintptr_t va, uint64_t size) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    emit(format::rec::AddressFree{now(), current_tid(), va, size});
}

void Recorder::record_create(uintptr_t handle, uint64_t size, int device, const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    record_create_interned(handle, size, device, sid, py);
}

void Recorder::record_create_interned(uintptr_t handle, uint64_t size, int device, uint32_t stack_id,
                                      uint32_t python_stack_id) {
    if (!ensure_started()) return;
    if (device >= 0) gpu_seen_.store(true, std::memory_order_relaxed);
    uint64_t tid = current_tid();
    // No stream is named: a capture owns the handle when this thread is capturing.
    uint32_t owner = captures_.owner_for(StreamArg{}, tid).id;
    emit(format::rec::Create{now(), tid, handle, size, device, stack_id, python_stack_id, owner});
}

void Recorder::record_release(uintptr_t handle) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    {
        std::lock_guard<std::mutex> lock(retained_mu_);
        if (auto it = retained_.find(handle); it != retained_.end()) {
            if (--it->second == 0) retained_.erase(it);
            return;  // a retained reference given back: the handle lives on
        }
    }
    emit(format::rec::Release{now(), current_tid(), handle});
}

void Recorder::record_retain(uintptr_t handle) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    std::lock_guard<std::mutex> lock(retained_mu_);
    try {
        ++retained_[handle];
    } catch (...) {
        // Out of host memory: the reference goes uncounted, and its release is written (the
        // reader warns of the second one). The host's call is not harmed.
    }
}

void Recorder::record_import(uintptr_t handle, const uintptr_t* ips, int n) {
    if (!ensure_started()) return;
    uint32_t py = python_stack();
    uint32_t sid = intern(ips, n);
    emit(format::rec::Import{now(), current_tid(), handle, sid, py});
}

void Recorder::record_map(uintptr_t va, uint64_t size, uint64_t offset, uintptr_t handle) {
    if (!ensure_started()) return;
    emit(format::rec::Map{now(), current_tid(), va, size, offset, handle});
}

void Recorder::record_unmap(uintptr_t va, uint64_t size) {
    if (state_.load(std::memory_order_acquire) != State::Recording) return;
    emit(format::rec::Unmap{now(), current_tid(), va, size});
}

}  // namespace memguard::track
