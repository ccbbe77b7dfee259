// The user's line (docs/user-line.md): the one rule that picks a Python stack's user frame, the
// innermost frame of the user's own code, and the attribution of allocations on autograd's backward
// threads (which have no Python stack) to the backward() call that ran them. Every site view of the
// CLI names a site by it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "report/fold.h"
#include "report/report.h"

namespace memguard::report {

/// Whose code a Python frame runs.
enum class FrameOrigin : uint8_t {
    User,        // the user's own code
    Torch,       // the torch package, wherever installed (a source checkout too)
    ThirdParty,  // site-packages, dist-packages, the interpreter's site directories
    Stdlib,      // the standard library
    Synthetic,   // <frozen ...>, <string> and other names that are not files
    Generated,   // inductor's output code, FX graph code, dynamo's codegen pseudo-filenames
    Memguard,    // memguard's own code (its embedded module, the installed package)
};
const char* origin_name(FrameOrigin o);

/// Tells whose code a file is. With the report's e records (minor 8) the interpreter's own
/// directories are known exactly; without them (older reports) path shapes stand in for them
/// (`.../torch/...`, `.../lib/python3.11/...`).
class FrameRule {
public:
    explicit FrameRule(const std::vector<PythonPath>& paths);
    explicit FrameRule(const Report& r) : FrameRule(r.python_paths) {}

    FrameOrigin classify(std::string_view filename) const;
    /// True when the report named the interpreter's directories (e records).
    bool exact() const { return !paths_.empty(); }

private:
    std::vector<PythonPath> paths_;  // the kinds that decide, longest path first
};

/// A Python stack's user frame.
struct UserFrame {
    bool found = false;  // false: the stack has no frame of the user's code
    size_t index = 0;    // the frame's position in the stack, innermost 0
    uint32_t frame_id = 0;
    std::string function;  // for a dynamo resume function, the function it continues
    std::string file;
    int line = 0;           // for a resume function, the line it resumes at
    bool compiled = false;  // dynamo's transformed bytecode: the line is the def line, or a resume point
};

/// The innermost frame of `s` whose origin is User. Frame ids missing from the report are skipped.
UserFrame user_frame(const Report& r, const PythonStack& s, const FrameRule& rule);
/// user_frame of the Python stack with id `python_stack_id`; not found when it is 0 or unknown.
UserFrame user_frame(const Report& r, uint32_t python_stack_id, const FrameRule& rule);

/// "forward at /app/train.py:41", with " (compiled)" for compiled code.
std::string user_frame_text(const UserFrame& u);

/// Splits dynamo's resume function name `torch_dynamo_resume_in_<fn>_at_<line>` into `fn` and
/// `line`; false for any other name.
bool parse_resume_name(std::string_view name, std::string* function, int* line);

/// True when the stack passes through torch's autograd entry points (`torch.autograd.backward`,
/// `Tensor.backward`, `torch.autograd.grad`): the allocating thread was in a backward() call.
bool in_backward_call(const Report& r, const PythonStack& s, const FrameRule& rule);

/// Fills r.backward_sites: each allocation (A, and T in allocator mode) without a Python stack,
/// made by a thread that never has one (autograd's engine threads run no Python), while another
/// thread is inside a backward() call, is attributed to that call's Python stack (the call opens
/// at that thread's first allocation inside backward() and closes at its next allocation outside
/// it). Per native stack, the call that covers the most bytes wins. An inference from timing, not
/// a recorded stack: the views say so.
void attribute_backward(Report& r);

/// attribute_backward for the streaming reader (report/stream.h), which keeps no allocation: each
/// allocation is told as it is read, and they are replayed in time order through a window of the
/// last kWindow, which puts right what threads wrote out of order. finish() fills
/// r.backward_sites as attribute_backward would, or returns false when it cannot be sure to: an
/// allocation came more than the window out of order, or an e record changed which stacks are in
/// a backward() call after one was looked at, while some allocation was inside a backward() call.
class BackwardSweep {
public:
    static constexpr size_t kWindow = 4096;
    /// An A (`tensor` false) or T record; `order`: its rank among the records of its kind.
    void add(const Report& r, int64_t t, bool tensor, size_t order, uint64_t tid, uint64_t size, uint32_t stack_id,
             uint32_t python_stack_id);
    bool finish(Report& r);
    /// A fold (report/fold.h) holds the sweep where it stands: the window's allocations not replayed
    /// yet, the calls open, the bytes attributed so far and what was found of the stacks and threads.
    void fold_out(FoldWriter& w) const;
    /// Takes back what fold_out wrote, in place of what the sweep holds. Throws BadFold.
    void fold_in(const Report& r, const Fold& f);

private:
    struct Alloc {
        int64_t t;
        bool tensor;
        size_t order;
        uint64_t tid, size;
        uint32_t stack_id, python_stack_id;
        // attribute_backward's order: by time, then its A records before its T records, in file order.
        bool operator>(const Alloc& o) const {
            if (t != o.t) return t > o.t;
            if (tensor != o.tensor) return tensor;
            return order > o.order;
        }
    };
    void replay(const Report& r, const Alloc& a);
    static void put(std::vector<int64_t>& v, const Alloc& a);
    bool in_backward(const Report& r, uint32_t python_stack_id);

    // The window: the allocations that came in order (each after the one before) in `run_`, the
    // others in a min-heap (std::greater); the earliest of both is replayed first. Records come
    // nearly in order: most cost a push_back, not a heap's log2(kWindow) moves.
    std::deque<Alloc> run_;
    std::vector<Alloc> heap_;
    bool buffering_ = false;  // from the first Python stack on: before, no allocation can open a call
    std::optional<Alloc> last_;
    bool out_of_order_ = false;
    bool any_backward_ = false;
    std::optional<FrameRule> rule_;
    size_t rule_paths_ = 0;
    std::unordered_map<uint32_t, bool> backward_stacks_;  // Python stack id -> in a backward() call
    std::unordered_set<uint64_t> python_threads_;
    std::unordered_map<uint64_t, std::pair<uint64_t, uint32_t>> open_;  // thread -> (order opened, call)
    uint64_t opened_ = 0;
    /// (native stack, backward call's Python stack, thread) -> bytes; the threads found later to run
    /// Python are left out at the end.
    std::map<std::tuple<uint32_t, uint32_t, uint64_t>, uint64_t> bytes_;
};

}  // namespace memguard::report
