#include "python/safe_point.h"

#include <algorithm>

namespace memguard::python {

void CompileMark::compile_ended(std::string_view compile_id, CallSite site, int64_t now_ns, PendingMarks& pending) {
    depth_ = site.depth;
    // Compiles that share one collection wait for the outermost compiling call; a compile with no
    // boundary (any return will do) does not relax an earlier one's.
    int old = pending_ ? boundary_ : -1;
    boundary_ = old < 0 ? site.boundary : (site.boundary < 0 ? old : std::min(old, site.boundary));
    if (!pending_) {
        first_ns_ = now_ns;
        ++pending.threads;
    }
    pending_ = true;
    if (compile_ids_.size() < kMaxIdsChars) {
        if (!compile_ids_.empty()) compile_ids_.push_back(',');
        compile_ids_ += compile_id;
    }
}

CompileMark::Step CompileMark::frame_returned(Exit exit) noexcept {
    // The returning frame is at depth_. Everything deeper than the boundary is the compiled call
    // itself or dynamo's machinery around it, whose helper frames return with no torch.compile
    // region set; the compiled call has surely returned once the boundary frame or a shallower one
    // returns.
    bool returned_to_caller = boundary_ < 0 || depth_ <= boundary_;
    --depth_;
    if (!pending_) return Step::StopWatching;
    if (!returned_to_caller) return Step::Ignore;
    if (exit == Exit::Exception) return Step::Ignore;  // the mark waits for a normal return
    return Step::AskMoment;
}

CompileMark::Step CompileMark::decide(const Moment& m) noexcept {
    if (m.capture_active) return Step::Ignore;      // collect once no stream captures
    if (m.stopped_at_raise) return Step::Ignore;    // an exception's way out after all
    if (m.dynamo_compiling) return Step::Ignore;    // dynamo is compiling on this thread
    if (m.in_compiled_region) return Step::Ignore;  // still inside a torch.compile region
    return Step::Collect;
}

bool CompileMark::collected(PendingMarks& pending) noexcept {
    if (pending_ && pending.threads > 0) --pending.threads;
    *this = CompileMark();
    return pending.threads == 0;
}

}  // namespace memguard::python
