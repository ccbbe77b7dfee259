// Configuration from the environment. Parsing is pure (the environment is passed in) so that it
// can be tested without touching the process environment.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace memguard {

enum class LogLevel { Trace, Debug, Info, Warn, Error, Critical, Off };

/// Who allocates PyTorch's CUDA memory (MEMGUARD_ALLOCATOR).
enum class AllocatorMode { Native, Memguard };

struct Config {
    bool enabled = true;            // MEMGUARD_ENABLE
    std::string output_template;    // MEMGUARD_OUTPUT; empty means the default name
    int stack_depth = 64;           // MEMGUARD_STACK_DEPTH, 0..kMaxStackDepth (0: no stacks)
    LogLevel log_level = LogLevel::Warn;  // MEMGUARD_LOG_LEVEL
    bool collect_compile_garbage = true;  // MEMGUARD_COLLECT_COMPILE_GARBAGE
    bool python_stacks = true;            // MEMGUARD_PYTHON_STACKS
    bool native_below_python = false;     // MEMGUARD_NATIVE_BELOW_PYTHON: keep the interpreter's frames
    bool compile_window = true;           // MEMGUARD_COMPILE_WINDOW
    bool nvtx = true;                     // MEMGUARD_NVTX: register as the NVTX injection library
    AllocatorMode allocator = AllocatorMode::Native;  // MEMGUARD_ALLOCATOR: native or memguard

    static constexpr int kMaxStackDepth = 256;
};

struct ConfigResult {
    Config config;
    /// One line per bad value: names the variable, what it accepts and the default kept.
    std::vector<std::string> problems;
};

using EnvLookup = std::function<const char*(const char*)>;

ConfigResult parse_config(const EnvLookup& getenv_fn);

const char* log_level_name(LogLevel level);

}  // namespace memguard
