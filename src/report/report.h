// Reading a memguard report (docs/report-format.md) into memory, and the figures derived from it.
// Used by the memguard CLI and by the tests; never linked into libmemguard.so.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace memguard::report {

/// Thrown for a file that cannot be read: missing, wrong magic or version, corrupt, truncated.
/// what() is one line meant for the user, naming the file and, where known, the line.
class ReportError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

enum class Kind { Device, Async, Managed, Pinned };
const char* kind_name(Kind k);
/// True for kinds that occupy GPU memory (device, async, managed).
bool is_gpu(Kind k);

struct Module {
    uint32_t id = 0;
    uint64_t lo = 0, hi = 0, bias = 0;
    std::string build_id;  // hex, empty when absent
    std::string path;
};

struct Stack {
    uint32_t id = 0;
    std::vector<uint64_t> ips;  // innermost first
    size_t modules_known = 0;   // how many modules (M records) preceded this stack's S record
};

struct Block {
    uint64_t addr = 0, size = 0;
    Kind kind = Kind::Device;
    std::string api;
    int device = 0;
    std::optional<uint64_t> stream;
    uint32_t stack_id = 0;
    uint64_t tid = 0;
    int64_t t_alloc = 0;
    std::optional<int64_t> t_free;  // empty while live
    std::string free_api;
};

struct FailedAlloc {
    int64_t t = 0;
    uint64_t tid = 0, size = 0;
    Kind kind = Kind::Device;
    std::string api;
    int device = 0;
    std::optional<uint64_t> stream;
    uint32_t stack_id = 0;
    int error = 0;
    uint64_t live_bytes = 0;
    bool is_oom() const { return error == 2; }
};

/// One change of the live set, in file order.
struct Event {
    enum Type { Alloc, Free, Restore } type;
    size_t block;  // index into Report::blocks
    int64_t t;
};

struct Report {
    std::string path;
    int version = 0;
    std::map<std::string, std::string> info;
    std::vector<Module> modules;
    std::unordered_map<uint32_t, Stack> stacks;
    std::vector<Block> blocks;  // in order of allocation
    std::vector<FailedAlloc> failures;
    std::vector<Event> events;
    bool complete = false;     // an end record (Z) was read
    int64_t end_t = 0;         // time of Z, else of the last record or heartbeat
    std::vector<std::string> warnings;  // non-fatal remarks (e.g. "no end record: process killed?")
};

/// Reads a whole report. Throws ReportError.
Report load_report(const std::string& path);

/// The major format version this reader understands.
constexpr int kFormatVersion = 1;

/// Parses a report held in memory; `name` stands for the file in messages. Throws ReportError.
Report parse_report(std::string_view content, const std::string& name);

}  // namespace memguard::report
