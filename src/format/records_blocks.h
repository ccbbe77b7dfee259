// The record table's blocks records (format/records.h says how a record is described).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- blocks (minor 0) ----------------------------------------------------------------------------

/// A: a successful allocation.
struct Alloc {
    static constexpr char kLetter = 'A';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Blocks;
    static constexpr bool kPredicted = true;  // binary: coded against the previous records
    int64_t t = 0;
    uint64_t tid = 0, addr = 0, size = 0;
    Kind kind = Kind::Device;
    std::string_view api;
    int device = 0;
    std::optional<uint64_t> stream;  // absent: the call names none
    uint32_t stack_id = 0, capture_id = 0, python_stack_id = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(field::kind, r.kind);
        v(field::api, r.api);
        v(field::device, r.device);
        v(field::stream, r.stream);
        v(field::stack_id, r.stack_id);
        v(field::capture_id.since(1), r.capture_id);
        v(field::python_stack_id.since(2), r.python_stack_id);
    }
};

/// F: the free of a live block.
struct Free {
    static constexpr char kLetter = 'F';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Blocks;
    static constexpr bool kPredicted = true;  // binary: coded against the previous records
    int64_t t = 0;
    uint64_t tid = 0, addr = 0, size = 0;
    std::string_view api;
    std::optional<uint64_t> stream;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(field::api, r.api);
        v(field::stream, r.stream);
    }
};

/// R: the free recorded just before failed; the block is live again.
struct Restore {
    static constexpr char kLetter = 'R';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Blocks;
    int64_t t = 0;
    uint64_t tid = 0, addr = 0;
    int error = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::addr, r.addr);
        v(field::error, r.error);
    }
};

/// E: a failed allocation.
struct Failure {
    static constexpr char kLetter = 'E';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Blocks;
    int64_t t = 0;
    uint64_t tid = 0, size = 0;
    Kind kind = Kind::Device;
    std::string_view api;
    int device = 0;
    std::optional<uint64_t> stream;
    uint32_t stack_id = 0;
    int error = 0;
    uint64_t live_bytes = 0;
    uint32_t python_stack_id = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::size, r.size);
        v(field::kind, r.kind);
        v(field::api, r.api);
        v(field::device, r.device);
        v(field::stream, r.stream);
        v(field::stack_id, r.stack_id);
        v(field::error, r.error);
        v(Field{"live_bytes", "live bytes", Enc::Dec}, r.live_bytes);
        v(field::python_stack_id.since(2), r.python_stack_id);
    }
};

}  // namespace memguard::format::rec
