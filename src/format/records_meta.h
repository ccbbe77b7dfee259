// The record table's meta records (format/records.h says how a record is described).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- header keys ----------------------------------------------------------------------------------

/// A key of the header's I records and the minor that introduced it. Readers ignore keys they do
/// not know; the minor says which keys a file may have (format/records.h derives I format_minor
/// from these too).
struct InfoKey {
    std::string_view key;
    int minor = 0;
};

inline constexpr InfoKey kInfoKeys[] = {
    {"format_minor", 0},     {"pid", 0},         {"ppid", 0},     {"exe", 0},
    {"cmdline", 0},          {"host", 0},        {"rank", 0},     {"t0_unix_ns", 0},
    {"memguard_version", 0}, {"stack_depth", 0}, {"unwinder", 0}, {"allocator", 5},  // allocator mode
    {"run_id", 7},         // the run's id, shared by its processes' reports
    {"gc_budget", 9},      // MEMGUARD_GC_BUDGET: the fraction of wall time memguard's collections may take
    {"report_limit", 10},  // MEMGUARD_MAX_REPORT_SIZE: the bound on the report's files, bytes
};

// --- header and interned definitions (minor 0, 2, 6) ---------------------------------------------

/// I key value: information about the run.
struct Info {
    static constexpr char kLetter = 'I';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Meta;
    std::string_view key, value;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"key", "key", Enc::Str}, r.key);
        v(Field{"value", "value", Enc::Str}, r.value);
    }
};

/// M: a loaded module.
struct Module {
    static constexpr char kLetter = 'M';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Meta;
    uint32_t module_id = 0;
    uint64_t lo = 0, hi = 0, bias = 0;
    std::string_view build_id;  // empty: none (`-`)
    std::string_view path;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"module_id", "module id", Enc::Id}, r.module_id);
        v(Field{"lo", "lo", Enc::Hex}, r.lo);
        v(Field{"hi", "hi", Enc::Hex}, r.hi);
        v(Field{"bias", "bias", Enc::Hex}, r.bias);
        v(Field{"build_id", "build-id", Enc::BuildId}, r.build_id);
        v(Field{"path", "path", Enc::Str}, r.path);
    }
};

/// S: an interned native stack, innermost frame first.
struct Stack {
    static constexpr char kLetter = 'S';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Meta;
    uint32_t stack_id = 0;
    Tail<uint64_t> ips;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::stack_id.nonzero("stack id 0 is reserved for \"no stack\""), r.stack_id);
        v(Field{"ip", "ip", Enc::Hex}, r.ips);
    }
};

/// H: heartbeat, written with each flush.
struct Heartbeat {
    static constexpr char kLetter = 'H';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Meta;
    int64_t t = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
    }
};

/// Z: the run ended cleanly.
struct End {
    static constexpr char kLetter = 'Z';
    static constexpr int kMinor = 0;
    static constexpr Family kFamily = Family::Meta;
    int64_t t = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
    }
};

/// p: an interned Python frame.
struct PyFrame {
    static constexpr char kLetter = 'p';
    static constexpr int kMinor = 2;
    static constexpr Family kFamily = Family::Meta;
    uint32_t frame_id = 0;
    int line = 0;
    std::string_view function, filename;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"frame_id", "frame id", Enc::Id}.nonzero("Python frame id 0 is not allowed (ids start at 1)"),
          r.frame_id);
        v(Field{"line", "line", Enc::Int}, r.line);
        v(Field{"function", "function", Enc::Str}, r.function);
        v(Field{"filename", "filename", Enc::Str}, r.filename);
    }
};

/// P: an interned Python stack of p ids, innermost first.
struct PyStack {
    static constexpr char kLetter = 'P';
    static constexpr int kMinor = 2;
    static constexpr Family kFamily = Family::Meta;
    uint32_t python_stack_id = 0;
    Tail<uint32_t> frames;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::python_stack_id.nonzero("Python stack id 0 is reserved for \"no stack\""), r.python_stack_id);
        v(Field{"frame_id", "frame id", Enc::Id}, r.frames);
    }
};

/// U: records lost for want of host memory.
struct Lost {
    static constexpr char kLetter = 'U';
    static constexpr int kMinor = 6;
    static constexpr Family kFamily = Family::Meta;
    int64_t t = 0, first_t = 0;
    uint64_t count = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(Field{"first_t", "time of the first lost record", Enc::Span}, r.first_t);
        v(Field{"count", "record count", Enc::Dec}, r.count);
    }
};

/// e: a directory of the Python interpreter's own code (minor 8), written once per path by the
/// Python hook, for the report's user-frame rule.
struct PythonPath {
    static constexpr char kLetter = 'e';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Meta;
    PathKind kind = PathKind::Stdlib;
    std::string_view path;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"kind", "path kind", Enc::Name}, r.kind);
        v(Field{"path", "path", Enc::Str}, r.path);
    }
};

// --- bounded reports (minor 10): the spine and its detail parts -----------------------------------

/// l position carried: where a bounded report's spine meets its detail (docs/report-format.md,
/// "Added in minor 10"). In the spine: the records after it come after the first `position` detail
/// records (A F T t) of the run. First in a detail part: `position` detail records came before the
/// part, and the part's next `carried` A and T records are the blocks live at its start, allocated
/// earlier (not new allocations).
struct DetailAt {
    static constexpr char kLetter = 'l';
    static constexpr int kMinor = 10;
    static constexpr Family kFamily = Family::Meta;
    uint64_t position = 0, carried = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"position", "position", Enc::Dec}, r.position);
        v(Field{"carried", "carried", Enc::Dec}, r.carried);
    }
};

/// f t part first end until folded: a bounded report's detail part `part`, the detail records from
/// `first` up to (not including) `end`, the last of them made at `until`, was deleted at `t` to
/// keep the report under its limit; `folded` 1: a fold file covering it (`<report>.fold-N`, N at
/// least `part`) was beside the report then, 0: it was deleted unfolded (its detail is lost).
struct DetailDropped {
    static constexpr char kLetter = 'f';
    static constexpr int kMinor = 10;
    static constexpr Family kFamily = Family::Meta;
    int64_t t = 0;
    uint64_t part = 0, first = 0, end = 0;
    int64_t until = 0;
    bool folded = false;  // a fold file covering the part was beside the report when it was deleted
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(Field{"part", "part", Enc::Dec}, r.part);
        v(Field{"first", "first", Enc::Dec}, r.first);
        v(Field{"end", "end", Enc::Dec}, r.end);
        v(Field{"until", "time", Enc::Span}, r.until);
        v(Field{"folded", "folded flag", Enc::Flag}, r.folded);
    }
};

// --- fold files (minor 10): a bounded report's deleted detail, as the reader's figures ------------

/// a part position events blocks tensors t dropped dropped_until dropped_parts: first in a fold
/// file `<report>.fold-NNNNNN` (docs/bounded-reports.md): the figures after it are the streaming
/// reader's state once it has read the report up to the start of detail part `part` + 1, which is
/// after the first `position` detail records; there the reader had counted `events` events,
/// `blocks` A records and `tensors` T records, the latest time it had read was `t`, and of the
/// detail before it `dropped` records in `dropped_parts` parts (the last made at `dropped_until`)
/// had been deleted unfolded (`f`).
struct FoldAt {
    static constexpr char kLetter = 'a';
    static constexpr int kMinor = 10;
    static constexpr Family kFamily = Family::Meta;
    uint64_t part = 0, position = 0, events = 0, blocks = 0, tensors = 0;
    int64_t t = 0;
    uint64_t dropped = 0;
    int64_t dropped_until = 0;
    uint64_t dropped_parts = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"part", "part", Enc::Dec}, r.part);
        v(Field{"position", "position", Enc::Dec}, r.position);
        v(Field{"events", "events", Enc::Dec}, r.events);
        v(Field{"blocks", "blocks", Enc::Dec}, r.blocks);
        v(Field{"tensors", "tensors", Enc::Dec}, r.tensors);
        v(Field{"t", "time", Enc::Span}, r.t);
        v(Field{"dropped", "dropped", Enc::Dec}, r.dropped);
        v(Field{"dropped_until", "time", Enc::Span}, r.dropped_until);
        v(Field{"dropped_parts", "dropped parts", Enc::Dec}, r.dropped_parts);
    }
};

/// z name copies value...: one figure of a fold file, named by the observer that wrote it and the
/// figure ("summary.kind"); its values are signed decimals; the next `copies` records of the file
/// are A or T records that belong to it (a live set copied at a peak).
struct Figure {
    static constexpr char kLetter = 'z';
    static constexpr int kMinor = 10;
    static constexpr Family kFamily = Family::Meta;
    std::string_view name;
    uint64_t copies = 0;
    Tail<int64_t> values;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(Field{"name", "figure name", Enc::Str}, r.name);
        v(Field{"copies", "copies", Enc::Dec}, r.copies);
        v(Field{"value", "value", Enc::SDec}, r.values);
    }
};

}  // namespace memguard::format::rec
