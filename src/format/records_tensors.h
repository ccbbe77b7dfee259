// The record table's tensors records (format/records.h says how a record is described).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- tensors: allocator mode (minor 5) ------------------------------------------------------------

/// T: a block handed to PyTorch.
struct TensorAlloc {
    static constexpr char kLetter = 'T';
    static constexpr int kMinor = 5;
    static constexpr Family kFamily = Family::Tensors;
    static constexpr bool kPredicted = true;  // binary: coded against the previous records
    int64_t t = 0;
    uint64_t tid = 0, addr = 0, size = 0, requested = 0;
    int device = 0;
    uint64_t stream = 0;
    uint32_t stack_id = 0, python_stack_id = 0, capture_id = 0;
    std::string_view pool;  // "first.second", or "-" for the default pools
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(Field{"requested", "requested size", Enc::Dec}, r.requested);
        v(field::device, r.device);
        v(field::stream, r.stream);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
        v(field::capture_id, r.capture_id);
        v(Field{"pool", "pool", Enc::Str}, r.pool);
    }
};

/// t: PyTorch returned a block.
struct TensorFree {
    static constexpr char kLetter = 't';
    static constexpr int kMinor = 5;
    static constexpr Family kFamily = Family::Tensors;
    static constexpr bool kPredicted = true;  // binary: coded against the previous records
    int64_t t = 0;
    uint64_t tid = 0, addr = 0;
    bool gc = false;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::addr, r.addr);
        v(Field{"gc", "gc flag", Enc::Flag}, r.gc);
    }
};

/// O: an allocation allocator mode could not satisfy.
struct TensorOom {
    static constexpr char kLetter = 'O';
    static constexpr int kMinor = 5;
    static constexpr Family kFamily = Family::Tensors;
    int64_t t = 0;
    uint64_t tid = 0;
    int device = 0;
    uint64_t requested = 0, rounded = 0, allocated = 0, reserved = 0, limit = 0;
    uint32_t stack_id = 0, python_stack_id = 0;
    Rescue rescued = Rescue::None;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::device, r.device);
        v(Field{"requested", "requested size", Enc::Dec}, r.requested);
        v(Field{"rounded", "rounded size", Enc::Dec}, r.rounded);
        v(Field{"allocated", "allocated bytes", Enc::Dec}, r.allocated);
        v(Field{"reserved", "reserved bytes", Enc::Dec}, r.reserved);
        v(Field{"limit", "limit", Enc::Dec}, r.limit);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
        v(Field{"rescued", "rescue", Enc::Name}, r.rescued);
    }
};

/// o: one site's live blocks at the preceding O.
struct TensorOomSite {
    static constexpr char kLetter = 'o';
    static constexpr int kMinor = 5;
    static constexpr Family kFamily = Family::Tensors;
    int64_t t = 0;
    uint32_t stack_id = 0, python_stack_id = 0;
    uint64_t blocks = 0, bytes = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
        v(field::blocks, r.blocks);
        v(field::bytes, r.bytes);
    }
};

}  // namespace memguard::format::rec
