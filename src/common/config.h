// Configuration from the environment. Parsing is pure (the environment is passed in) so that it
// can be tested without touching the process environment.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace memguard {

enum class LogLevel { Trace, Debug, Info, Warn, Error, Critical, Off };

/// Which collections memguard explains (MEMGUARD_EXPLAIN_CYCLES): none, its own (after a
/// compile, after recompute, at steps), or its own and the program's gc.collect() calls.
/// Automatic collections are never explained: saving their garbage would free it later.
enum class ExplainCycles { Off, Memguard, All };

/// memguard's garbage collections: its triggers, their budget and their explanations. Trivially
/// copyable (no std::string): the Python hook keeps a copy in a static that the library's
/// constructor may fill before C++ static initialization reached it.
struct CyclesConfig {
    static constexpr size_t kMaxRecomputeFunctions = 1024;  // characters

    bool collect_recompute_garbage = true;                      // MEMGUARD_COLLECT_RECOMPUTE_GARBAGE
    char recompute_functions[kMaxRecomputeFunctions + 1] = {};  // MEMGUARD_RECOMPUTE_FUNCTIONS: "Name,pkg.mod.Qual"
    int gc_every_steps = 0;                                     // MEMGUARD_GC_EVERY_STEPS: 0 off, N: every N-th step
    int gc_generation = 2;                                      // MEMGUARD_GC_GENERATION: 0, 1 or 2
    double gc_budget = 0.01;                                    // MEMGUARD_GC_BUDGET: fraction of wall time, (0, 1]
    ExplainCycles explain = ExplainCycles::Memguard;            // MEMGUARD_EXPLAIN_CYCLES
    uint64_t explain_min_bytes = 1 << 20;  // MEMGUARD_EXPLAIN_MIN_BYTES: records below it are not written

    static constexpr int kMaxEverySteps = 1000000;
};

/// Who allocates PyTorch's CUDA memory (MEMGUARD_ALLOCATOR).
enum class AllocatorMode { Native, Memguard };

/// How the report file is written (MEMGUARD_REPORT_ENCODING): binary frames or text lines
/// (docs/report-format.md); the CLI reads both.
enum class ReportEncoding { Binary, Text };

struct Config {
    bool enabled = true;                  // MEMGUARD_ENABLE
    std::string output_template;          // MEMGUARD_OUTPUT; empty means the default name
    int stack_depth = 64;                 // MEMGUARD_STACK_DEPTH, 0..kMaxStackDepth (0: no stacks)
    LogLevel log_level = LogLevel::Warn;  // MEMGUARD_LOG_LEVEL
    bool collect_compile_garbage = true;  // MEMGUARD_COLLECT_COMPILE_GARBAGE
    bool python_stacks = true;            // MEMGUARD_PYTHON_STACKS
    bool native_below_python = false;     // MEMGUARD_NATIVE_BELOW_PYTHON: keep the interpreter's frames
    bool stack_memo = true;               // MEMGUARD_STACK_MEMO: allocator mode finds repeated stacks without unwinding
    bool compile_window = true;           // MEMGUARD_COMPILE_WINDOW
    bool steps = true;                    // MEMGUARD_STEPS: steps from optimizer hooks, step moments
    bool explain_oom = true;              // MEMGUARD_EXPLAIN_OOM: PyTorch's OOM observer, OOM moments
    bool nvtx = true;                     // MEMGUARD_NVTX: register as the NVTX injection library
    AllocatorMode allocator = AllocatorMode::Native;          // MEMGUARD_ALLOCATOR: native or memguard
    ReportEncoding report_encoding = ReportEncoding::Binary;  // MEMGUARD_REPORT_ENCODING: binary or text
    uint64_t max_report_size = 0;  // MEMGUARD_MAX_REPORT_SIZE: bytes the report's files keep under (0: no limit)
    bool fold = true;              // MEMGUARD_FOLD: a bounded report starts `memguard compact --follow`
    std::string cli;               // MEMGUARD_CLI: the memguard program it runs ("": the one beside the library)
    std::string run_id;        // MEMGUARD_RUN_ID, else TORCHELASTIC_RUN_ID: the header's I run_id ("": none)
    std::string run_manifest;  // MEMGUARD_RUN_MANIFEST: a file each report's path is appended to ("": none)
    CyclesConfig cycles;

    static constexpr int kMaxStackDepth = 256;
    static constexpr size_t kMaxRunId = 128;
    static constexpr uint64_t kMinReportLimit = uint64_t{1} << 20;
};

struct ConfigResult {
    Config config;
    /// One line per bad value: names the variable, what it accepts and the default kept.
    std::vector<std::string> problems;
};

using EnvLookup = std::function<const char*(const char*)>;

ConfigResult parse_config(const EnvLookup& getenv_fn);

/// The configuration the library starts with: parse_config's, except in a secure-execution process
/// (`at_secure`: the auxiliary vector's AT_SECURE, set for setuid, setgid and file-capability
/// programs). There the environment belongs to a less privileged user, who must not choose where
/// the privileged process creates a file, so nothing is read from it (getenv_fn is never called)
/// and memguard is off as with MEMGUARD_ENABLE=0, NVTX injection included.
ConfigResult startup_config(unsigned long at_secure, const EnvLookup& getenv_fn);

/// What is wrong with `value` for the variable `name` as parse_config says it, without what the
/// library keeps instead ("MEMGUARD_STACK_DEPTH='x' is not valid: expected an integer from 0 to
/// 256"); empty when the value is valid. The CLI checks its options' values with it (memguard run).
std::string config_value_problem(const char* name, const char* value);

/// Whether `id` is a valid run id: 1 to Config::kMaxRunId printable ASCII characters, no space.
bool valid_run_id(std::string_view id);

/// At most this many bytes of a value that memguard did not write go into one log line.
constexpr size_t kEchoLimit = 200;

/// `value` (an environment value, a path made from one) as a log line may show it: control
/// characters, backslashes and bytes that are not UTF-8 become escapes (`\n`, `\x1b`, `\\`),
/// so that the line stays one line and cannot move the terminal's cursor, and past kEchoLimit
/// bytes it is cut, saying how long it was.
std::string echo_value(std::string_view value);

const char* log_level_name(LogLevel level);

}  // namespace memguard
