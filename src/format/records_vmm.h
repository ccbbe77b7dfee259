// The record table's vmm records (format/records.h says how a record is described).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- vmm: driver virtual memory management (minor 3) ----------------------------------------------

/// V: cuMemAddressReserve.
struct Reserve {
    static constexpr char kLetter = 'V';
    static constexpr int kMinor = 3;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, va = 0, size = 0;
    uint32_t stack_id = 0, python_stack_id = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::va, r.va);
        v(field::size, r.size);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
    }
};

/// v: cuMemAddressFree.
struct AddressFree {
    static constexpr char kLetter = 'v';
    static constexpr int kMinor = 3;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, va = 0, size = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::va, r.va);
        v(field::size, r.size);
    }
};

/// N: cuMemCreate.
struct Create {
    static constexpr char kLetter = 'N';
    static constexpr int kMinor = 3;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, handle = 0, size = 0;
    int device = 0;
    uint32_t stack_id = 0, python_stack_id = 0, capture_id = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::handle, r.handle);
        v(field::size, r.size);
        v(field::device, r.device);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
        v(field::capture_id, r.capture_id);
    }
};

/// n: cuMemRelease.
struct Release {
    static constexpr char kLetter = 'n';
    static constexpr int kMinor = 3;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, handle = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::handle, r.handle);
    }
};

/// m: cuMemImportFromShareableHandle (minor 11).
struct Import {
    static constexpr char kLetter = 'm';
    static constexpr int kMinor = 11;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, handle = 0;
    uint32_t stack_id = 0, python_stack_id = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::handle, r.handle);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
    }
};

/// Q: cuMemMap.
struct Map {
    static constexpr char kLetter = 'Q';
    static constexpr int kMinor = 3;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, va = 0, size = 0, offset = 0, handle = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::va, r.va);
        v(field::size, r.size);
        v(Field{"offset", "offset", Enc::Dec}, r.offset);
        v(field::handle, r.handle);
    }
};

/// q: cuMemUnmap.
struct Unmap {
    static constexpr char kLetter = 'q';
    static constexpr int kMinor = 3;
    static constexpr Family kFamily = Family::Vmm;
    int64_t t = 0;
    uint64_t tid = 0, va = 0, size = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::va, r.va);
        v(field::size, r.size);
    }
};

}  // namespace memguard::format::rec
