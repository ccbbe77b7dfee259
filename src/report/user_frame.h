// The user's line (docs/user-line.md): the one rule that picks a Python stack's user frame, the
// innermost frame of the user's own code, and the attribution of allocations on autograd's backward
// threads (which have no Python stack) to the backward() call that ran them. Every site view of the
// CLI names a site by it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

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

}  // namespace memguard::report
