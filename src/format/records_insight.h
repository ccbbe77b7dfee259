// The record table's insight records: training steps, what the live tensors are at a moment (the
// categories), PyTorch's allocator blocks at that moment, and the context of an out-of-memory
// (format/records.h says how a record is described; docs/report-format.md, minor 8).
//
// A moment is what the Python hook saw at one instant, with the GIL held: it begins with h, lists
// tensor storages by category (g) and, in interposition mode, PyTorch's allocator blocks (d), may
// carry an out-of-memory's context (x), and ends with k. Its g and d records name it by its id and
// carry no time of their own: they describe the live state at the h record's time.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- insight (minor 8) ----------------------------------------------------------------------------

namespace field8 {
constexpr Field moment{"moment", "moment id", Enc::Id};
}  // namespace field8

/// s: a training step ended. Step n spans from the end of step n-1 (the start of the run for the
/// first) to this record.
struct Step {
    static constexpr char kLetter = 's';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Insight;
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t step = 0;  // 1, 2, ...: the steps this process completed
    StepSource source = StepSource::Optimizer;
    std::string_view name;  // the optimizer's class (AdamW), or what memguard.step() was given
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(Field{"step", "step", Enc::Id}.nonzero("step 0 is not allowed (steps count from 1)"), r.step);
        v(Field{"source", "step source", Enc::Name}, r.source);
        v(field::name, r.name);
    }
};

/// h: a moment begins: the Python hook looks at the live tensors.
struct MomentBegin {
    static constexpr char kLetter = 'h';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Insight;
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t moment = 0;
    MomentReason reason = MomentReason::Step;
    uint32_t step = 0;  // the steps completed before this moment
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field8::moment.nonzero("moment id 0 is reserved for \"no moment\""), r.moment);
        v(Field{"reason", "moment reason", Enc::Name}, r.reason);
        v(Field{"step", "step", Enc::Id}, r.step);
    }
};

/// g: a tensor storage live at a moment, and what it is.
struct TensorTag {
    static constexpr char kLetter = 'g';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Insight;
    uint32_t moment = 0;
    int device = 0;
    uint64_t addr = 0, size = 0;  // the storage's data pointer and its bytes
    Category category = Category::OtherTensor;
    std::optional<std::string_view> label;  // e.g. a parameter's name, "AdamW.exp_avg"; absent: none
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field8::moment, r.moment);
        v(field::device, r.device);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(Field{"category", "category", Enc::Name}, r.category);
        v(Field{"label", "label", Enc::Str}, r.label);
    }
};

/// d: one block of PyTorch's caching allocator at a moment (torch.cuda.memory._snapshot()).
struct AllocatorBlock {
    static constexpr char kLetter = 'd';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Insight;
    uint32_t moment = 0;
    int device = 0;
    uint64_t addr = 0, size = 0, requested = 0;
    BlockState state = BlockState::Allocated;
    uint64_t segment = 0;   // the address of the segment that holds it
    std::string_view pool;  // the segment's pool id "first.second"; "-" for the default pools
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field8::moment, r.moment);
        v(field::device, r.device);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(Field{"requested", "requested size", Enc::Dec}, r.requested);
        v(Field{"state", "block state", Enc::Name}, r.state);
        v(Field{"segment", "segment address", Enc::Hex}, r.segment);
        v(Field{"pool", "pool", Enc::Str}, r.pool);
    }
};

/// x: an out-of-memory and its context, written before PyTorch raises (or right after a failed
/// CUDA allocation call).
struct OomContext {
    static constexpr char kLetter = 'x';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Insight;
    int64_t t = 0;
    uint64_t tid = 0;
    int device = 0;
    OomSource source = OomSource::Torch;
    std::optional<uint64_t> requested;                  // the caller's bytes, when known
    uint64_t rounded = 0;                               // what the allocator asked the device for (or the call's size)
    std::optional<uint64_t> limit;                      // the memory-fraction limit, or the device's total
    std::optional<uint64_t> device_free, device_total;  // absent: not asked (a capture was in progress)
    std::optional<uint64_t> allocated, reserved;        // the caching allocator's bytes on the device
    uint32_t stack_id = 0, python_stack_id = 0;
    uint32_t moment = 0;           // the moment that describes the live tensors then; 0: none
    bool compile_pending = false;  // a compile-garbage collection was pending on some thread
    bool capturing = false;        // a stream capture was in progress
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::device, r.device);
        v(Field{"source", "OOM source", Enc::Name}, r.source);
        v(Field{"requested", "requested size", Enc::Dec}, r.requested);
        v(Field{"rounded", "rounded size", Enc::Dec}, r.rounded);
        v(Field{"limit", "limit", Enc::Dec}, r.limit);
        v(Field{"device_free", "device free bytes", Enc::Dec}, r.device_free);
        v(Field{"device_total", "device total bytes", Enc::Dec}, r.device_total);
        v(Field{"allocated", "allocated bytes", Enc::Dec}, r.allocated);
        v(Field{"reserved", "reserved bytes", Enc::Dec}, r.reserved);
        v(field::stack_id, r.stack_id);
        v(field::python_stack_id, r.python_stack_id);
        v(field8::moment, r.moment);
        v(Field{"compile_pending", "compile-pending flag", Enc::Flag}, r.compile_pending);
        v(Field{"capturing", "capturing flag", Enc::Flag}, r.capturing);
    }
};

/// k: a moment ended.
struct MomentEnd {
    static constexpr char kLetter = 'k';
    static constexpr int kMinor = 8;
    static constexpr Family kFamily = Family::Insight;
    int64_t t = 0;
    uint32_t moment = 0;
    uint64_t tensors = 0;   // the g records it wrote
    uint64_t blocks = 0;    // the d records it wrote
    bool complete = false;  // 0: the hook stopped early (its time budget, an error): the lists are partial
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field8::moment.nonzero("moment id 0 is reserved for \"no moment\""), r.moment);
        v(Field{"tensors", "tensor count", Enc::Dec}, r.tensors);
        v(field::blocks, r.blocks);
        v(Field{"complete", "complete flag", Enc::Flag}, r.complete);
    }
};

}  // namespace memguard::format::rec
