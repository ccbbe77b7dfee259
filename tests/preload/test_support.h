// What the preload tests share: paths of the programs under test, temporary directories, the
// parsed log of a test application, report helpers and an independent symbolizer.
#pragma once

#include "child_process.h"
#include "elf_reader.h"
#include "report/report.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace preload_test {

// ---- paths (compile definitions set by CMake from the targets) ----------------------------------

struct Paths {
    static std::string memguard_lib() { return MEMGUARD_LIB; }
    static std::string memguard_cli() { return MEMGUARD_CLI; }
    static std::string fake_cudart() { return FAKE_CUDART; }
    static std::string app(const std::string& name);  // "alloc_kinds" -> path of app_alloc_kinds
    static std::string dl_worker() { return APP_DL_WORKER; }
};

// ---- files --------------------------------------------------------------------------------------

/// A fresh directory under $TMPDIR (or /tmp), removed at destruction unless keep() was called.
class TempDir {
public:
    explicit TempDir(const std::string& label);
    ~TempDir();
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::string& path() const { return path_; }
    std::string operator/(const std::string& name) const { return path_ + "/" + name; }
    void keep() { keep_ = true; }

private:
    std::string path_;
    bool keep_ = false;
};

void make_dir(const std::string& path, unsigned mode = 0755);
void write_file(const std::string& path, const std::string& content);
std::string read_file(const std::string& path);
bool exists(const std::string& path);  // lstat: a dangling symlink exists
/// Names in `dir` (not recursive), sorted; empty when `dir` does not exist.
std::vector<std::string> list_dir(const std::string& dir);
/// Paths of regular files named *.mgr (or *.mgr.N) under `dir`, recursively.
std::vector<std::string> find_reports(const std::string& dir);
std::string base_name(const std::string& path);
std::string real_path(const std::string& path);

// ---- the application log (tests/apps/app_common.h) ----------------------------------------------

struct LoggedAlloc {
    std::string api;
    uint64_t addr = 0, size = 0;
    std::optional<uint64_t> stream;
    int device = 0;
    std::string function;
};

struct LoggedFree {
    std::string api;
    uint64_t addr = 0;
    std::optional<uint64_t> stream;
};

struct LoggedFailure {
    std::string api;
    uint64_t size = 0;
    int error = 0;
    uint64_t live_bytes = 0;
    int device = 0;
    std::string function;
};

struct LogEvent {
    enum Type { Alloc, Free } type;
    size_t index;  // into AppLog::allocs or AppLog::frees
};

struct AppLog {
    std::vector<LoggedAlloc> allocs;
    std::vector<LoggedFree> frees;
    std::vector<LogEvent> events;  // allocs and frees in the order logged
    std::vector<LoggedFailure> failures;
    std::multimap<std::string, uint64_t> info;
    /// The value of `info <key>`; throws when absent.
    uint64_t value(const std::string& key) const;
};

/// Parses the lines the applications log; throws std::runtime_error on a malformed line of a
/// known type. Lines of other forms are ignored.
AppLog parse_app_log(const std::string& out);

/// Replaces 0x-prefixed hex numbers (addresses, stream handles) with 0xADDR, so that the output
/// of two runs can be compared.
std::string normalize_addresses(const std::string& text);

/// Lines of `text` that start with `prefix`.
std::vector<std::string> lines_starting_with(const std::string& text, const std::string& prefix);
/// Lines of `text` that contain `needle`.
std::vector<std::string> lines_containing(const std::string& text, const std::string& needle);

// ---- reports ------------------------------------------------------------------------------------

/// The kind the report must show for an allocating API.
memguard::report::Kind kind_of_api(const std::string& api);

/// Records whose type letter is one of `types`, in file order, split into fields (type first).
std::vector<std::vector<std::string>> raw_records(const std::string& path, const std::string& types);
/// A report's text: the file as it is when it is text, its records turned into text lines
/// (report/transcode.h) when it is binary, the library's default.
std::string report_text(const std::string& path);

/// Sum of the sizes of GPU-kind blocks (device, async, managed) that are live at the end.
uint64_t live_gpu_bytes_at_exit(const memguard::report::Report& report);
uint64_t live_pinned_bytes_at_exit(const memguard::report::Report& report);

/// Indices of the blocks with this size.
std::vector<size_t> blocks_of_size(const memguard::report::Report& report, uint64_t size);

/// Resolves a report's stacks to function names by reading the ELF files its module records name.
class Symbolizer {
public:
    explicit Symbolizer(const memguard::report::Report& report) : report_(report) {}

    struct Frame {
        uint64_t ip = 0;
        std::string module;    // path from the M record, empty when no module holds the ip
        std::string function;  // empty when unknown
    };
    std::vector<Frame> frames(uint32_t stack_id);
    /// True when some frame of the stack is in function `function`.
    bool has_function(uint32_t stack_id, const std::string& function);
    /// True when some frame is in `function` inside a module whose path ends with `module_suffix`.
    bool has_function_in(uint32_t stack_id, const std::string& function, const std::string& module_suffix);
    /// One line per frame, for failure messages.
    std::string describe(uint32_t stack_id);

private:
    const ElfFile* elf(const std::string& path);

    const memguard::report::Report& report_;
    std::map<std::string, std::unique_ptr<ElfFile>> elves_;
    std::map<uint32_t, std::vector<Frame>> cache_;
};

/// Hex of a value, for messages.
std::string hex(uint64_t value);

}  // namespace preload_test
