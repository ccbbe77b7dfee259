#include "common/config.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

#include "common/size.h"
#include "common/text.h"

namespace memguard {
namespace {

struct LevelName {
    const char* name;
    LogLevel level;
};
constexpr LevelName kLevels[] = {
    {"trace", LogLevel::Trace},  {"debug", LogLevel::Debug}, {"info", LogLevel::Info},         {"warn", LogLevel::Warn},
    {"warning", LogLevel::Warn}, {"error", LogLevel::Error}, {"critical", LogLevel::Critical}, {"off", LogLevel::Off},
};

std::string quoted(const char* v) { return "'" + echo_value(v) + "'"; }

void parse_switch(const char* name, const char* v, bool& value, std::vector<std::string>& problems) {
    if (!strcasecmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on")) {
        value = true;
    } else if (!strcasecmp(v, "0") || !strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off")) {
        value = false;
    } else {
        problems.push_back(std::string(name) + "=" + quoted(v) +
                           " is not valid: expected 1 or 0 (also true/false, yes/no, on/off); keeping " +
                           (value ? "1" : "0"));
    }
}

void parse_depth(const char* v, Config& c, std::vector<std::string>& problems) {
    errno = 0;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < 0 || n > Config::kMaxStackDepth) {
        problems.push_back("MEMGUARD_STACK_DEPTH=" + quoted(v) + " is not valid: expected an integer from 0 to " +
                           std::to_string(Config::kMaxStackDepth) + "; keeping " + std::to_string(c.stack_depth));
        return;
    }
    c.stack_depth = static_cast<int>(n);
}

/// An integer from lo to hi, or a problem that keeps `value`.
void parse_int(const char* name, const char* v, long lo, long hi, int& value, std::vector<std::string>& problems) {
    errno = 0;
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (errno != 0 || end == v || *end != '\0' || n < lo || n > hi) {
        problems.push_back(std::string(name) + "=" + quoted(v) + " is not valid: expected an integer from " +
                           std::to_string(lo) + " to " + std::to_string(hi) + "; keeping " + std::to_string(value));
        return;
    }
    value = static_cast<int>(n);
}

void parse_budget(const char* v, CyclesConfig& c, std::vector<std::string>& problems) {
    errno = 0;
    char* end = nullptr;
    double f = std::strtod(v, &end);
    if (errno != 0 || end == v || *end != '\0' || !(f > 0 && f <= 1)) {
        char kept[32];
        std::snprintf(kept, sizeof kept, "%g", c.gc_budget);
        problems.push_back(
            "MEMGUARD_GC_BUDGET=" + quoted(v) +
            " is not valid: expected a fraction of wall time above 0 and at most 1 (0.01 is 1%); keeping " + kept);
        return;
    }
    c.gc_budget = f;
}

void parse_explain(const char* v, CyclesConfig& c, std::vector<std::string>& problems) {
    bool on = true;
    if (!strcasecmp(v, "all")) {
        c.explain = ExplainCycles::All;
    } else if (!strcasecmp(v, "memguard")) {
        c.explain = ExplainCycles::Memguard;
    } else {
        std::vector<std::string> ignored;
        parse_switch("MEMGUARD_EXPLAIN_CYCLES", v, on, ignored);
        if (!ignored.empty()) {
            problems.push_back("MEMGUARD_EXPLAIN_CYCLES=" + quoted(v) +
                               " is not valid: expected 1 (memguard's collections), all (and the program's "
                               "gc.collect() calls) or 0; keeping " +
                               (c.explain == ExplainCycles::Off   ? "0"
                                : c.explain == ExplainCycles::All ? "all"
                                                                  : "1"));
            return;
        }
        c.explain = on ? ExplainCycles::Memguard : ExplainCycles::Off;
    }
}

/// Bytes: an integer with an optional unit (K, M, G with or without iB; powers of 1024).
void parse_min_bytes(const char* v, CyclesConfig& c, std::vector<std::string>& problems) {
    errno = 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v, &end, 10);
    uint64_t scale = 1;
    std::string unit = end ? end : "";
    if (unit == "K" || unit == "KiB" || unit == "k")
        scale = 1ull << 10;
    else if (unit == "M" || unit == "MiB")
        scale = 1ull << 20;
    else if (unit == "G" || unit == "GiB")
        scale = 1ull << 30;
    else if (!unit.empty() && unit != "B")
        scale = 0;
    if (errno != 0 || end == v || *v == '-' || scale == 0 || n > (1ull << 50) / scale) {
        problems.push_back("MEMGUARD_EXPLAIN_MIN_BYTES=" + quoted(v) +
                           " is not valid: expected bytes, optionally with K, M or G (1M = 1 MiB); keeping " +
                           std::to_string(c.explain_min_bytes));
        return;
    }
    c.explain_min_bytes = n * scale;
}

/// A comma-separated list of class names or dotted qualified names.
void parse_recompute_functions(const char* v, CyclesConfig& c, std::vector<std::string>& problems) {
    std::string_view s(v);
    bool ok = s.size() <= CyclesConfig::kMaxRecomputeFunctions;
    bool start = true;  // at the start of a name part: a letter or '_' must come
    for (char ch : s) {
        if (!ok) break;
        const bool letter = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_';
        const bool digit = ch >= '0' && ch <= '9';
        if (ch == ',' || ch == '.') {
            ok = !start;
            start = true;
        } else if (letter || (digit && !start)) {
            start = false;
        } else {
            ok = false;
        }
    }
    if (!ok || (start && !s.empty())) {
        problems.push_back(
            "MEMGUARD_RECOMPUTE_FUNCTIONS=" + quoted(v) +
            " is not valid: expected class names or dotted qualified names, comma-separated "
            "(CheckpointFunction,megatron.core.tensor_parallel.random.CheckpointFunction); keeping " +
            (c.recompute_functions[0] == '\0' ? std::string("none") : std::string(c.recompute_functions)));
        return;
    }
    std::memcpy(c.recompute_functions, s.data(), s.size());  // s.size() <= kMaxRecomputeFunctions: checked
    c.recompute_functions[s.size()] = '\0';
}

void parse_cycles(const EnvLookup& getenv_fn, CyclesConfig& c, std::vector<std::string>& problems) {
    if (const char* v = getenv_fn("MEMGUARD_COLLECT_RECOMPUTE_GARBAGE")) {
        parse_switch("MEMGUARD_COLLECT_RECOMPUTE_GARBAGE", v, c.collect_recompute_garbage, problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_RECOMPUTE_FUNCTIONS")) parse_recompute_functions(v, c, problems);
    if (const char* v = getenv_fn("MEMGUARD_GC_EVERY_STEPS")) {
        parse_int("MEMGUARD_GC_EVERY_STEPS", v, 0, CyclesConfig::kMaxEverySteps, c.gc_every_steps, problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_GC_GENERATION")) {
        parse_int("MEMGUARD_GC_GENERATION", v, 0, 2, c.gc_generation, problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_GC_BUDGET")) parse_budget(v, c, problems);
    if (const char* v = getenv_fn("MEMGUARD_EXPLAIN_CYCLES")) parse_explain(v, c, problems);
    if (const char* v = getenv_fn("MEMGUARD_EXPLAIN_MIN_BYTES")) parse_min_bytes(v, c, problems);
}

void parse_level(const char* v, Config& c, std::vector<std::string>& problems) {
    for (const auto& l : kLevels) {
        if (!strcasecmp(v, l.name)) {
            c.log_level = l.level;
            return;
        }
    }
    problems.push_back("MEMGUARD_LOG_LEVEL=" + quoted(v) +
                       " is not valid: expected trace, debug, info, warn, error, critical or off; keeping warn");
}

void parse_output(const char* v, Config& c, std::vector<std::string>& problems) {
    if (*v == '\0') {
        problems.push_back(
            "MEMGUARD_OUTPUT is empty: expected a path template (%p pid, %h host, %r rank); keeping the default name");
        return;
    }
    // Validate the template's escapes now, so that a typo is reported once at start-up.
    for (const char* p = v; *p; ++p) {
        if (*p != '%') continue;
        char n = p[1];
        if (n == 'p' || n == 'h' || n == 'r' || n == '%') {
            ++p;
            continue;
        }
        problems.push_back(
            "MEMGUARD_OUTPUT=" + quoted(v) +
            " is not valid: '%' must be followed by p (pid), h (host), r (rank) or %; keeping the default name");
        return;
    }
    c.output_template = v;
}

void parse_allocator(const char* v, Config& c, std::vector<std::string>& problems) {
    if (!strcasecmp(v, "native")) {
        c.allocator = AllocatorMode::Native;
    } else if (!strcasecmp(v, "memguard")) {
        c.allocator = AllocatorMode::Memguard;
    } else {
        problems.push_back("MEMGUARD_ALLOCATOR=" + quoted(v) +
                           " is not valid: expected native (PyTorch's allocator) or memguard; keeping native");
    }
}

void parse_encoding(const char* v, Config& c, std::vector<std::string>& problems) {
    if (!strcasecmp(v, "binary")) {
        c.report_encoding = ReportEncoding::Binary;
    } else if (!strcasecmp(v, "text")) {
        c.report_encoding = ReportEncoding::Text;
    } else {
        problems.push_back("MEMGUARD_REPORT_ENCODING=" + quoted(v) +
                           " is not valid: expected binary (compact records) or text (a line per record); "
                           "keeping binary");
    }
}

void parse_max_report_size(const char* v, Config& c, std::vector<std::string>& problems) {
    std::string why;
    const std::optional<uint64_t> bytes = parse_size(v, &why);
    if (!bytes || (*bytes != 0 && *bytes < Config::kMinReportLimit)) {
        problems.push_back("MEMGUARD_MAX_REPORT_SIZE=" + quoted(v) +
                           " is not valid: " + (bytes ? std::string("below the smallest limit, 1MiB") : why) +
                           " (expected a size such as 2GiB, or 0 for none); keeping no limit");
        return;
    }
    c.max_report_size = *bytes;
}

void parse_cli(const char* v, Config& c, std::vector<std::string>& problems) {
    if (*v != '/') {
        problems.push_back("MEMGUARD_CLI=" + quoted(v) +
                           " is not valid: expected the absolute path of the memguard program; keeping the one "
                           "beside the library");
        return;
    }
    c.cli = v;
}

void parse_run_id(const EnvLookup& getenv_fn, Config& c, std::vector<std::string>& problems) {
    if (const char* v = getenv_fn("MEMGUARD_RUN_ID")) {
        if (valid_run_id(v)) {
            c.run_id = v;
            return;
        }
        problems.push_back("MEMGUARD_RUN_ID=" + quoted(v) + " is not valid: expected 1 to " +
                           std::to_string(Config::kMaxRunId) +
                           " printable ASCII characters without spaces; keeping no run id");
    }
    // torchrun gives its workers the rendezvous id: a fresh uuid for a one-node job, else the
    // --rdzv-id the user chose, "none" by default (not an id: every such job would share it).
    // An id that memguard could not write is simply not used: the variable is torchrun's.
    const char* elastic = getenv_fn("TORCHELASTIC_RUN_ID");
    if (elastic && valid_run_id(elastic) && std::strcmp(elastic, "none") != 0) c.run_id = elastic;
}

void parse_manifest(const char* v, Config& c, std::vector<std::string>& problems) {
    if (*v != '/') {
        problems.push_back("MEMGUARD_RUN_MANIFEST=" + quoted(v) +
                           " is not valid: expected an absolute path; keeping no list of reports");
        return;
    }
    c.run_manifest = v;
}

}  // namespace

bool valid_run_id(std::string_view id) {
    if (id.empty() || id.size() > Config::kMaxRunId) return false;
    for (char ch : id) {
        if (ch < 0x21 || ch > 0x7e) return false;
    }
    return true;
}

std::string config_value_problem(const char* name, const char* value) {
    const std::string wanted = name;
    ConfigResult r = parse_config([&](const char* n) -> const char* { return wanted == n ? value : nullptr; });
    if (r.problems.empty()) return "";
    std::string p = r.problems.front();
    size_t keeping = p.rfind("; keeping");
    return keeping == std::string::npos ? p : p.substr(0, keeping);
}

std::string echo_value(std::string_view value) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    size_t i = 0;
    while (i < value.size() && out.size() < kEchoLimit) {
        const auto c = static_cast<unsigned char>(value[i]);
        if (c >= 0x20 && c < 0x7f) {
            if (c == '\\') out.push_back('\\');
            out.push_back(static_cast<char>(c));
            ++i;
            continue;
        }
        // Valid UTF-8 is kept, except C1 controls (U+0080..U+009F), which some terminals obey
        // like ESC: their bytes are escaped below with the rest.
        uint32_t cp = 0;
        if (size_t n = c >= 0x80 ? text::utf8_sequence(value, i, &cp) : 0; n != 0 && !text::is_control(cp)) {
            out.append(value.substr(i, n));
            i += n;
            continue;
        }
        switch (c) {
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
            out += "\\x";
            out.push_back(kHex[c >> 4]);
            out.push_back(kHex[c & 0xf]);
        }
        ++i;
    }
    if (i < value.size()) out += "... (" + std::to_string(value.size()) + " bytes)";
    return out;
}

ConfigResult startup_config(unsigned long at_secure, const EnvLookup& getenv_fn) {
    if (at_secure == 0) return parse_config(getenv_fn);
    ConfigResult r;
    r.config.enabled = false;
    r.config.nvtx = false;
    return r;
}

ConfigResult parse_config(const EnvLookup& getenv_fn) {
    ConfigResult r;
    if (const char* v = getenv_fn("MEMGUARD_LOG_LEVEL")) parse_level(v, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_ENABLE")) parse_switch("MEMGUARD_ENABLE", v, r.config.enabled, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_COLLECT_COMPILE_GARBAGE")) {
        parse_switch("MEMGUARD_COLLECT_COMPILE_GARBAGE", v, r.config.collect_compile_garbage, r.problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_PYTHON_STACKS")) {
        parse_switch("MEMGUARD_PYTHON_STACKS", v, r.config.python_stacks, r.problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_STACK_MEMO")) {
        parse_switch("MEMGUARD_STACK_MEMO", v, r.config.stack_memo, r.problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_NATIVE_BELOW_PYTHON")) {
        parse_switch("MEMGUARD_NATIVE_BELOW_PYTHON", v, r.config.native_below_python, r.problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_COMPILE_WINDOW")) {
        parse_switch("MEMGUARD_COMPILE_WINDOW", v, r.config.compile_window, r.problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_STEPS")) parse_switch("MEMGUARD_STEPS", v, r.config.steps, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_EXPLAIN_OOM")) {
        parse_switch("MEMGUARD_EXPLAIN_OOM", v, r.config.explain_oom, r.problems);
    }
    if (const char* v = getenv_fn("MEMGUARD_NVTX")) parse_switch("MEMGUARD_NVTX", v, r.config.nvtx, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_ALLOCATOR")) parse_allocator(v, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_STACK_DEPTH")) parse_depth(v, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_OUTPUT")) parse_output(v, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_REPORT_ENCODING")) parse_encoding(v, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_MAX_REPORT_SIZE")) parse_max_report_size(v, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_FOLD")) parse_switch("MEMGUARD_FOLD", v, r.config.fold, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_CLI")) parse_cli(v, r.config, r.problems);
    parse_run_id(getenv_fn, r.config, r.problems);
    if (const char* v = getenv_fn("MEMGUARD_RUN_MANIFEST")) parse_manifest(v, r.config, r.problems);
    parse_cycles(getenv_fn, r.config.cycles, r.problems);
    return r;
}

const char* log_level_name(LogLevel level) {
    switch (level) {
    case LogLevel::Trace: return "trace";
    case LogLevel::Debug: return "debug";
    case LogLevel::Info: return "info";
    case LogLevel::Warn: return "warn";
    case LogLevel::Error: return "error";
    case LogLevel::Critical: return "critical";
    case LogLevel::Off: return "off";
    }
    return "warn";
}

}  // namespace memguard
