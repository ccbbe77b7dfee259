#include "report/levels.h"

namespace memguard::report {

namespace {

// Counts (blocks, mappings) grow by one a record: they stop at 0 rather than wrap.
void count_down(uint64_t& v) { v -= v != 0 ? 1 : 0; }

/// The streaming reader's items come after the walk was made: its vectors grow to them.
template <class T>
void reach(std::vector<T>& v, size_t i) {
    if (i >= v.size()) v.resize(i + 1 > 2 * v.size() ? i + 1 : 2 * v.size(), T{});
}

}  // namespace

void LevelWalk::add(uint64_t& shown, Exact& exact, uint64_t n) {
    exact += n;  // cannot wrap: fewer than 2^64 records, each under 2^64
    shown = exact > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(exact);
}

void LevelWalk::sub(uint64_t& shown, Exact& exact, uint64_t n) {
    exact -= exact < n ? exact : n;
    shown = exact > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(exact);
}

void LevelWalk::add_device(int device, uint64_t n) {
    add(device_level_.get(levels_.device_bytes, device), device_exact_.get(exact_.device_bytes, device), n);
}

void LevelWalk::sub_device(int device, uint64_t n) {
    sub(device_level_.get(levels_.device_bytes, device), device_exact_.get(exact_.device_bytes, device), n);
}

LevelWalk::LevelWalk(const Report& r)
    : r_(r),
      block_live_(r.blocks.size(), 0),
      handle_live_(r.handles.size(), 0),
      handle_released_(r.handles.size(), 0),
      handle_maps_(r.handles.size(), 0),
      mapping_live_(r.mappings.size(), 0),
      reservation_live_(r.reservations.size(), 0),
      tensor_live_(r.tensors.size(), 0) {}

void LevelWalk::set_tensor(size_t i, bool live) {
    if ((tensor_live_[i] != 0) == live) return;
    tensor_live_[i] = live ? 1 : 0;
    const Tensor& x = r_.tensors[i];
    if (live) {
        add(levels_.tensor_bytes, exact_.tensor_bytes, x.size);
        add(levels_.tensor_requested, exact_.tensor_requested, x.requested);
        ++levels_.tensor_blocks;
    } else {
        sub(levels_.tensor_bytes, exact_.tensor_bytes, x.size);
        sub(levels_.tensor_requested, exact_.tensor_requested, x.requested);
        count_down(levels_.tensor_blocks);
    }
    last_changed_tensor_ = true;
}

void LevelWalk::set_block(size_t b, bool live) {
    if ((block_live_[b] != 0) == live) return;
    block_live_[b] = live ? 1 : 0;
    const Block& block = r_.blocks[b];
    size_t k = kind_index(block.kind);
    if (live) {
        add(levels_.kind_bytes[k], exact_.kind_bytes[k], block.size);
        ++levels_.kind_blocks[k];
    } else {
        sub(levels_.kind_bytes[k], exact_.kind_bytes[k], block.size);
        count_down(levels_.kind_blocks[k]);
    }
    if (!is_gpu(block.kind)) return;
    if (live) {
        add(levels_.gpu_bytes, exact_.gpu_bytes, block.size);
        ++levels_.gpu_blocks;
        add_device(block.device, block.size);
    } else {
        sub(levels_.gpu_bytes, exact_.gpu_bytes, block.size);
        count_down(levels_.gpu_blocks);
        sub_device(block.device, block.size);
    }
    last_gpu_device_ = block.device;
}

void LevelWalk::set_handle_gone(size_t h) {
    if (handle_live_[h] == 0) return;
    handle_live_[h] = 0;
    const PhysicalHandle& p = r_.handles[h];
    sub(levels_.physical_bytes, exact_.physical_bytes, p.size);
    count_down(levels_.physical_handles);
    if (p.device < 0) return;
    count_down(levels_.physical_device_handles);
    sub(levels_.physical_device_bytes, exact_.physical_device_bytes, p.size);
    sub(levels_.gpu_bytes, exact_.gpu_bytes, p.size);
    sub_device(p.device, p.size);
    last_gpu_device_ = p.device;
}

bool LevelWalk::step() {
    if (done()) return false;
    const Event& e = r_.events[applied_];
    apply(e);
    return true;
}

void LevelWalk::apply(const Event& e) {
    ++applied_;
    switch (e.type) {
    case Event::TensorAlloc:
    case Event::TensorFree: reach(tensor_live_, e.block); break;
    case Event::Alloc:
    case Event::Restore:
    case Event::Free: reach(block_live_, e.block); break;
    case Event::Reserve:
    case Event::AddressFree: reach(reservation_live_, e.block); break;
    case Event::Create:
    case Event::Release:
        reach(handle_live_, e.block);
        reach(handle_released_, e.block);
        reach(handle_maps_, e.block);
        break;
    case Event::Map:
    case Event::Unmap:
        reach(mapping_live_, e.block);
        if (auto h = r_.mappings[e.block].handle) {
            reach(handle_live_, *h);
            reach(handle_released_, *h);
            reach(handle_maps_, *h);
        }
        break;
    }
    last_gpu_device_.reset();
    last_changed_tensor_ = false;
    switch (e.type) {
    case Event::TensorAlloc: set_tensor(e.block, true); break;
    case Event::TensorFree: set_tensor(e.block, false); break;
    case Event::Alloc:
    case Event::Restore: set_block(e.block, true); break;
    case Event::Free: set_block(e.block, false); break;
    case Event::Reserve:
        if (reservation_live_[e.block] == 0) {
            reservation_live_[e.block] = 1;
            add(levels_.reserved_bytes, exact_.reserved_bytes, r_.reservations[e.block].size);
            ++levels_.reservations;
        }
        break;
    case Event::AddressFree:
        if (reservation_live_[e.block] != 0) {
            reservation_live_[e.block] = 0;
            sub(levels_.reserved_bytes, exact_.reserved_bytes, r_.reservations[e.block].size);
            count_down(levels_.reservations);
        }
        break;
    case Event::Create: {
        const PhysicalHandle& p = r_.handles[e.block];
        handle_live_[e.block] = 1;
        add(levels_.physical_bytes, exact_.physical_bytes, p.size);
        ++levels_.physical_handles;
        if (p.device >= 0) {
            ++levels_.physical_device_handles;
            add(levels_.physical_device_bytes, exact_.physical_device_bytes, p.size);
            add(levels_.gpu_bytes, exact_.gpu_bytes, p.size);
            add_device(p.device, p.size);
            last_gpu_device_ = p.device;
        }
        break;
    }
    case Event::Release:
        handle_released_[e.block] = 1;
        // A released handle that is still mapped keeps its memory until its last unmap.
        if (handle_maps_[e.block] == 0) set_handle_gone(e.block);
        break;
    case Event::Map: {
        const Mapping& m = r_.mappings[e.block];
        mapping_live_[e.block] = 1;
        add(levels_.mapped_bytes, exact_.mapped_bytes, m.size);
        ++levels_.mappings;
        if (m.handle) ++handle_maps_[*m.handle];
        break;
    }
    case Event::Unmap: {
        if (mapping_live_[e.block] == 0) break;
        mapping_live_[e.block] = 0;
        const Mapping& m = r_.mappings[e.block];
        sub(levels_.mapped_bytes, exact_.mapped_bytes, m.size);
        count_down(levels_.mappings);
        if (m.handle) {
            count_down(handle_maps_[*m.handle]);
            if (handle_maps_[*m.handle] == 0 && handle_released_[*m.handle] != 0) set_handle_gone(*m.handle);
        }
        break;
    }
    }
}

void LevelWalk::advance_to(size_t n) {
    while (applied_ < n && step()) {
    }
}

}  // namespace memguard::report
