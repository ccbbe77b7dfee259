// Offline symbolization of the instruction pointers of a report: the module (M record) holding an ip,
// the function name from the module file's ELF symbol tables, and file:line through addr2line when the
// file carries DWARF line information. A module whose file is missing, or whose GNU build-id differs
// from the recorded one, is not symbolized: its frames show as module+offset.
//
// The paths come from the report, which anyone may have written: only regular files are opened (no
// FIFO, device or directory), through ElfFile, and addr2line is given the very file that was checked
// (/proc/self/fd/N of the descriptor kept open), never the path again. Modules may be looked up under
// a directory instead of "/" (--sysroot), and separate debug files by build-id (--debug-dir).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "report/report.h"

namespace memguard::report {

struct SourceLocation {
    std::string function;  // demangled; empty when unknown
    std::string file;      // empty when unknown
    int line = 0;          // 0 when unknown
};

struct Frame {
    uint64_t ip = 0;
    const Module* module = nullptr;  // null when the ip lies outside every module
    uint64_t offset = 0;             // ip - module->bias
    std::string function;            // demangled; empty when unknown
    std::string file;
    int line = 0;
    /// Callers that `function` was inlined into, innermost first (from addr2line -i); the last one is
    /// the function the code belongs to.
    std::vector<SourceLocation> inlined_by;
};

struct SymbolizerOptions {
    /// The addr2line program, found on $PATH unless it contains a '/'; empty disables file:line lookups.
    std::string addr2line = "addr2line";
    /// When not empty: module paths are looked up under this directory as if it were "/".
    std::string sysroot;
    /// When not empty: a module's separate debug file is looked up by its recorded GNU build-id, as
    /// GDB does, at DIR/.build-id/<first two hex digits>/<the rest>.debug; used (for function names
    /// and file:line) when its build-id is the recorded one.
    std::string debug_dir;
};

class ElfFile;

class Symbolizer {
public:
    explicit Symbolizer(const Report& report, SymbolizerOptions options = {});
    ~Symbolizer();
    Symbolizer(const Symbolizer&) = delete;
    Symbolizer& operator=(const Symbolizer&) = delete;

    /// Announces the frames that will be asked for (the first `max_frames` of each stack), so that
    /// addr2line runs once per module for all of them. Without it, frame() runs addr2line per address.
    void prepare(const std::vector<const Stack*>& stacks, size_t max_frames);

    /// The first `max_frames` frames of `stack`, innermost first.
    std::vector<Frame> frames(const Stack& stack, size_t max_frames);

    /// One frame. `modules_known` as in Stack: the modules that preceded the stack's S record.
    Frame frame(uint64_t ip, size_t modules_known);

    /// The module holding `ip`, preferring the latest of the first `modules_known` modules.
    const Module* find_module(uint64_t ip, size_t modules_known) const;

    /// Remarks (build-id mismatches, unreadable files, addr2line failures), each once; cleared by the call.
    std::vector<std::string> take_warnings();

    /// At most this many distinct files (modules and debug files) are open at once; the modules of
    /// any more are not symbolized (one warning). Each holds a descriptor and a read-only mapping.
    static constexpr size_t kMaxFiles = 512;

private:
    struct ModuleState;
    ModuleState& state(const Module& m);
    /// The file `path` names (under `root` when not empty), shared by every module naming it; null
    /// when missing (`missing` set) or unusable (a warning says why).
    std::shared_ptr<const ElfFile> open_file(const std::string& root, const std::string& path, const std::string& shown,
                                             bool& missing);
    void run_addr2line(const Module& m, ModuleState& st, const std::vector<uint64_t>& addrs);
    void warn(std::string message);

    const Report& report_;
    SymbolizerOptions options_;
    std::string addr2line_path_;
    std::map<uint32_t, std::unique_ptr<ModuleState>> states_;                        // by module id
    std::map<std::pair<uint64_t, uint64_t>, std::shared_ptr<const ElfFile>> files_;  // by (device, inode)
    bool too_many_files_ = false;
    std::vector<std::string> warnings_;
    std::set<std::string> warned_;  // each remark once, however many modules name the same file
};

/// Parses the output of `addr2line -a -f -C -i` into locations per address (innermost first).
std::map<uint64_t, std::vector<SourceLocation>> parse_addr2line_output(const std::string& output);

/// Demangles a C++ symbol name; returns it unchanged when it is not a mangled name.
std::string demangle(const std::string& name);

}  // namespace memguard::report
