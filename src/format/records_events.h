// The record table's events records (format/records.h says how a record is described).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- events: Python (minor 2), phases and marks (minor 4) ----------------------------------------

/// X: a dynamo compile finished.
struct Compile {
    static constexpr char kLetter = 'X';
    static constexpr int kMinor = 2;
    static constexpr Family kFamily = Family::Events;
    int64_t t = 0;
    uint64_t tid = 0;
    std::string_view compile_id;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(Field{"compile_id", "compile id", Enc::Str}, r.compile_id);
    }
};

/// Y: a garbage collection ended.
struct Collection {
    static constexpr char kLetter = 'Y';
    static constexpr int kMinor = 2;
    static constexpr Family kFamily = Family::Events;
    int64_t t = 0;
    uint64_t tid = 0;
    GcTrigger trigger = GcTrigger::Automatic;
    int generation = 0;
    int64_t duration_ns = 0, collected = 0, uncollectable = 0;
    std::optional<int64_t> cuda_bytes_freed;      // absent: CUDA not in use
    std::optional<std::string_view> compile_ids;  // comma-separated; absent: not memguard's collection
    std::optional<int64_t> mark_age_ns;
    // minor 9: memguard's collections (is_memguards(trigger)); absent for the others
    std::optional<uint64_t> skipped;  // chances of this trigger the budget skipped since its previous collection
    std::optional<uint32_t> explain;  // the explanation (j) of this collection's garbage, written before it
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(Field{"trigger", "trigger", Enc::Name}, r.trigger);
        v(Field{"generation", "generation", Enc::Int}, r.generation);
        v(Field{"duration_ns", "duration", Enc::Span}, r.duration_ns);
        v(Field{"collected", "collected", Enc::SDec}, r.collected);
        v(Field{"uncollectable", "uncollectable", Enc::SDec}, r.uncollectable);
        v(Field{"cuda_bytes_freed", "CUDA bytes freed", Enc::SDec}, r.cuda_bytes_freed);
        v(Field{"compile_ids", "compile ids", Enc::Str}, r.compile_ids);
        v(Field{"mark_age_ns", "mark age", Enc::Span}, r.mark_age_ns);
        v(Field{"skipped", "skipped chances", Enc::Dec}.since(9), r.skipped);
        v(Field{"explain", "explanation id", Enc::Id}.since(9), r.explain);
    }
};

/// B: a phase began.
struct PhaseBegin {
    static constexpr char kLetter = 'B';
    static constexpr int kMinor = 4;
    static constexpr Family kFamily = Family::Events;
    int64_t t = 0;
    uint64_t tid = 0;
    uint64_t phase_id = 0;  // the writer counts in 64 bits; the reader refuses ids of 2^32 and more
    PhaseSource source = PhaseSource::Api;
    std::string_view name;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(Field{"phase_id", "phase id", Enc::Id}.nonzero("phase id 0 is not allowed (ids start at 1)"), r.phase_id);
        v(field::source, r.source);
        v(field::name, r.name);
    }
};

/// b: a phase ended.
struct PhaseEnd {
    static constexpr char kLetter = 'b';
    static constexpr int kMinor = 4;
    static constexpr Family kFamily = Family::Events;
    int64_t t = 0;
    uint64_t tid = 0;
    uint64_t phase_id = 0;  // the writer counts in 64 bits; the reader refuses ids of 2^32 and more
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(Field{"phase_id", "phase id", Enc::Id}, r.phase_id);
    }
};

/// J: a mark.
struct Mark {
    static constexpr char kLetter = 'J';
    static constexpr int kMinor = 4;
    static constexpr Family kFamily = Family::Events;
    int64_t t = 0;
    uint64_t tid = 0;
    PhaseSource source = PhaseSource::Api;
    std::string_view name;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::source, r.source);
        v(field::name, r.name);
    }
};

}  // namespace memguard::format::rec
