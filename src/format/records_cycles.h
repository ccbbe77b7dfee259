// The record table's cycles records: what one of memguard's collections found in the garbage it
// freed (format/records.h says how a record is described; docs/report-format.md, minor 9).
//
// An explanation is made inside the collection, before the garbage is freed: memguard saves that
// one collection's garbage, looks at it, then frees it. It begins with j, lists groups of the
// garbage's objects (u), the CUDA tensor storages the garbage held (y) and, for the largest, one
// chain of references from an object of the garbage to the storage (r). Its u, y and r records
// name it by its id and carry no time of their own. The collection's Y record comes after them
// and names the explanation (its `explain` field).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- cycles (minor 9) -----------------------------------------------------------------------------

namespace field9 {
constexpr Field explain{"explain", "explanation id", Enc::Id};
}  // namespace field9

/// j: an explanation of one collection's garbage begins.
struct Explanation {
    static constexpr char kLetter = 'j';
    static constexpr int kMinor = 9;
    static constexpr Family kFamily = Family::Cycles;
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t explain = 0;
    uint64_t objects = 0;     // the garbage's objects (what the collection would have freed)
    uint64_t tensors = 0;     // the distinct CUDA storages it held (y records may list fewer)
    uint64_t cuda_bytes = 0;  // their bytes
    int64_t analysis_ns = 0;  // how long the look took (the collection's duration includes it)
    bool complete = false;    // 0: a limit (time, size) stopped the look: the lists are partial
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field9::explain.nonzero("explanation id 0 is reserved for \"none\""), r.explain);
        v(Field{"objects", "object count", Enc::Dec}, r.objects);
        v(Field{"tensors", "tensor count", Enc::Dec}, r.tensors);
        v(Field{"cuda_bytes", "CUDA bytes", Enc::Dec}, r.cuda_bytes);
        v(Field{"analysis_ns", "analysis time", Enc::Span}, r.analysis_ns);
        v(Field{"complete", "complete flag", Enc::Flag}, r.complete);
    }
};

/// u: a group of the garbage's objects: how many of one kind, what they are, and the CUDA bytes they
/// held: of the listed storages (y), those whose holder (the first step of the storage's chain: the
/// nearest frame, context, closure, exception or dynamo object that reaches it) is one of them.
struct GarbageGroup {
    static constexpr char kLetter = 'u';
    static constexpr int kMinor = 9;
    static constexpr Family kFamily = Family::Cycles;
    uint32_t explain = 0;
    GarbageKind kind = GarbageKind::Type;
    uint64_t count = 0;
    uint64_t cuda_bytes = 0;  // held by the group's objects as holders; 0: none (plain types: always 0)
    std::string_view name;    // frames and closures: "function file:line"; the others: the qualified type
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field9::explain, r.explain);
        v(Field{"kind", "garbage kind", Enc::Name}, r.kind);
        v(Field{"count", "count", Enc::Dec}, r.count);
        v(Field{"cuda_bytes", "CUDA bytes", Enc::Dec}, r.cuda_bytes);
        v(field::name, r.name);
    }
};

/// y: a CUDA tensor storage the garbage held, largest first.
struct GarbageTensor {
    static constexpr char kLetter = 'y';
    static constexpr int kMinor = 9;
    static constexpr Family kFamily = Family::Cycles;
    uint32_t explain = 0;
    int device = 0;
    uint64_t addr = 0, size = 0;  // the storage's data pointer and its bytes
    HeldHow how = HeldHow::Tensor;
    Category category = Category::OtherTensor;
    std::optional<std::string_view> holder;  // saved: the context's class ("CheckpointFunctionBackward")
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field9::explain, r.explain);
        v(field::device, r.device);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(Field{"how", "how held", Enc::Name}, r.how);
        v(Field{"category", "category", Enc::Name}, r.category);
        v(Field{"holder", "holder", Enc::Str}, r.holder);
    }
};

/// r: one step of the chain of references that kept the storage at `addr` (a y of the same
/// explanation), from an object of the garbage (step 0, the holder) to the tensor.
struct ChainStep {
    static constexpr char kLetter = 'r';
    static constexpr int kMinor = 9;
    static constexpr Family kFamily = Family::Cycles;
    uint32_t explain = 0;
    uint64_t addr = 0;
    uint32_t step = 0;
    std::string_view object;               // "frame step train.py:41", "dict", "Tensor 512.0 MiB"
    std::optional<std::string_view> edge;  // how the next step is reached: a local's name, a key,
                                           // "[3]", ".grad_fn", "cell_contents"; absent on the last
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field9::explain, r.explain);
        v(field::addr, r.addr);
        v(Field{"step", "chain step", Enc::Id}, r.step);
        v(Field{"object", "object", Enc::Str}, r.object);
        v(Field{"edge", "edge", Enc::Str}, r.edge);
    }
};

}  // namespace memguard::format::rec
