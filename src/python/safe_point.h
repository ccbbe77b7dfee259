// The compile-garbage safe-point rule, as a state machine fed events: no interpreter, no torch, no
// clock inside (time comes in as an argument), so that tests drive it without Python.
//
// The rule. A dynamo compile leaves garbage cycles (frames, graphs, tensors) that only a full
// collection frees; collecting inside the compile, inside the compiled call or during a stream
// capture is unsafe or useless. So a compile that ends marks its thread (CompileMark, one per
// thread), noting where the call that made it compile returns: the boundary, a frame depth. From
// then on the thread's frame events are followed, and the first safe point collects:
// - a frame returns at or below the boundary (at any depth when no boundary was found: a lazy
//   backward compile on the autograd thread), so the compiling call has returned;
// - normally: not an exception on its way out (the mark waits for a normal return);
// - with no stream capture in progress anywhere in the process (deferred until it ends);
// - with no dynamo compile in progress on the thread and outside any torch.compile region.
// Several compiles before that return share one collection, which waits for the outermost
// compiling call and reports every compile id and the age of the first mark. Marks are per thread:
// one thread's compile never makes another collect; PendingMarks counts the threads with a mark,
// so that the compile window (gc.freeze) is only opened and closed when no thread has one.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memguard::python {

/// Where the compiling call returns, read from the thread's stack when a compile ends.
struct CallSite {
    int depth = 0;      // the thread's frame depth then (its bottom frame is 1)
    int boundary = -1;  // the depth whose return means the compiling call returned; -1: none on the stack
};

/// How a frame left, as the profile event reports it: with a value, or with NULL (an exception).
enum class Exit { Normal, Exception };

/// The facts of the moment of a return that may be a safe point; read only when asked.
struct Moment {
    bool capture_active = false;      // a stream capture is in progress somewhere in the process
    bool stopped_at_raise = false;    // the frame stopped at an instruction that raised (CPython 3.12, which
                                      // reports an exception's way out as a return with a value)
    bool dynamo_compiling = false;    // a dynamo compile is in progress on this thread
    bool in_compiled_region = false;  // the thread is inside a torch.compile region
};

/// The threads with a pending mark (shared by every thread's CompileMark; GIL-protected).
struct PendingMarks {
    int threads = 0;
};

/// One thread's compile mark.
class CompileMark {
public:
    enum class Step {
        Ignore,        // not a safe point
        StopWatching,  // no mark is pending: frame events are no longer needed
        AskMoment,     // the compiling call returned normally: decide(Moment) says whether to collect
        Collect,       // the safe point: collect, then collected()
    };

    /// A compile ended on this thread at `site` (its id, "?" when unknown). The compile ids are
    /// kept up to about kMaxIdsChars characters.
    void compile_ended(std::string_view compile_id, CallSite site, int64_t now_ns, PendingMarks& pending);
    /// A frame of the thread was called.
    void frame_called() noexcept { ++depth_; }
    /// A frame of the thread returned: Ignore, StopWatching or AskMoment.
    Step frame_returned(Exit exit) noexcept;
    /// After AskMoment: Collect or Ignore.
    static Step decide(const Moment& m) noexcept;
    /// The collection of the safe point ran: the mark clears. Returns true when it was the last
    /// thread's pending mark (the compile window may close).
    bool collected(PendingMarks& pending) noexcept;

    bool pending() const noexcept { return pending_; }
    /// What a collection of this mark reports: the compile ids (comma-separated) and the time since
    /// the first mark.
    const std::string& compile_ids() const noexcept { return compile_ids_; }
    int64_t age_ns(int64_t now_ns) const noexcept { return now_ns - first_ns_; }
    int depth() const noexcept { return depth_; }
    int boundary() const noexcept { return boundary_; }

    static constexpr size_t kMaxIdsChars = 4096;

private:
    bool pending_ = false;
    int64_t first_ns_ = 0;
    std::string compile_ids_;
    int boundary_ = -1;
    int depth_ = 0;  // the thread's frame depth, followed through call and return events
};

}  // namespace memguard::python
