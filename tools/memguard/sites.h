// Allocation sites as the CLI shows them: a native stack (symbolized offline) and, when the block
// was allocated with the GIL held, a Python stack. Shared by `top` and `hazards`.
//
// Frames: the Python frames come first (innermost first, "function at file:line"), then the native
// frames (innermost first). `--frames K` limits each kind separately: up to K Python frames and up
// to K native frames per site.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/json.h"
#include "report/report.h"
#include "report/symbolizer.h"

namespace memguard::cli {

struct SiteFrames {
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    const report::Stack* stack = nullptr;               // null: id 0 or not in the report
    const report::PythonStack* python_stack = nullptr;  // null: id 0 or not in the report
    std::vector<report::Frame> native;                  // the first K native frames
    std::vector<uint32_t> python;                       // the first K Python frame ids
};

/// Symbolizes many sites at once (one addr2line run per module). Symbolizer remarks go to stderr.
class SiteSymbolizer {
public:
    SiteSymbolizer(const report::Report& r, size_t max_frames) : report_(r), max_frames_(max_frames) {}

    /// Registers a site; returns its handle for get().
    size_t add(uint32_t stack_id, uint32_t python_stack_id);
    /// Symbolizes every registered site. Call once, after the last add().
    void resolve();
    const SiteFrames& get(size_t handle) const { return sites_[handle]; }

private:
    const report::Report& report_;
    size_t max_frames_;
    std::vector<SiteFrames> sites_;
};

std::string hex(uint64_t v);  // "0x7f00"
std::string plural(uint64_t n, const char* one, const char* many);

/// "" when the report's format minor has the records of `minor`, else a note for an empty answer:
/// " (format 1.0 does not record them)".
std::string format_note(const report::Report& r, int minor);

/// "(stack 3)" or "(stack 3, Python stack 2)".
std::string site_ids_text(uint32_t stack_id, uint32_t python_stack_id);

/// Prints the frame lines of a site (6 spaces of indentation): its user frame (report/user_frame.h)
/// when it has a Python stack or a backward attribution, then the Python frames, then the native ones.
void print_site_frames(const SiteFrames& s, const report::Report& r);

/// A text that names the site by its symbolized frames, the same for the same code in another run:
/// Python frames (function, file, line), then native ones (module file name and function, or
/// module+offset). Sites of two reports are matched by it (`memguard diff`).
std::string site_key(const SiteFrames& s, const report::Report& r);

/// A one-line description of a site: its user frame (report/user_frame.h: the innermost frame of the
/// user's own code, "(compiled)" for dynamo's code, "via F" naming the innermost Python function
/// when that is not the user's), else "backward of <user frame> (attributed)"
/// for allocations of autograd's thread, else its innermost Python frame with "(no user frame)",
/// else its innermost native frame that is not in libmemguard, libcudart or libc10_cuda (the
/// allocator itself); "(no stack)". Every site view names sites by it.
std::string site_label(const SiteFrames& s, const report::Report& r);

/// The user's own line of a site as print_site_frames shows it ("forward at model.py:41", "backward
/// of ..." when attributed), or "" when no frame of the user's code is known.
std::string site_user_line(const SiteFrames& s, const report::Report& r);

/// The largest site at the run's peak: its label (site_label), bytes, and the total live then;
/// in allocator mode (T records) of the tensor blocks at the tensor peak
/// (torch.cuda.max_memory_allocated()'s moment, as `top` shows it), else of the GPU blocks at the
/// GPU peak. Empty label when nothing was live. Shared by `merge` and `plot`.
struct PeakSite {
    std::string label;
    uint64_t bytes = 0;
    uint64_t total_bytes = 0;
};
PeakSite top_site_at_peak(const report::Report& r, size_t max_frames, const report::Summary* known = nullptr);
/// The sites at the peak: of the tensor blocks at the tensor peak (allocator mode's view), or of
/// the GPU blocks at the GPU peak.
report::SiteTable site_table_at_peak(const report::Report& r, bool tensors, const report::Summary* known = nullptr);

/// Writes the members "user_frame" (null, or function, file, line, compiled, attribution: null or
/// "backward"), "stack_known", "frames_total", "python_frames_total" and "frames" of a site
/// object; each frame has "kind": "python" or "native".
void json_site_frames(report::JsonWriter& j, const SiteFrames& s, const report::Report& r);

}  // namespace memguard::cli
