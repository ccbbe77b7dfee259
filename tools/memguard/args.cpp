#include <sys/stat.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "cli.h"
#include "common/config.h"
#include "common/text.h"
#include "report/units.h"

namespace memguard::cli {

namespace {

/// Walks the arguments of one command, splitting "--opt=value" into option and value.
class ArgCursor {
public:
    ArgCursor(const std::vector<std::string>& argv, size_t start, std::string command)
        : argv_(argv), pos_(start), command_(std::move(command)) {}

    bool done() const { return pos_ >= argv_.size() && !inline_value_; }
    /// The next argument; sets `is_option` for "-x" / "--xyz" (not "-" alone, nor after "--").
    std::string next(bool& is_option) {
        std::string a = argv_[pos_++];
        is_option = !options_ended_ && a.size() > 1 && a[0] == '-';
        if (is_option && a == "--") options_ended_ = true;
        size_t eq = a.find('=');
        if (is_option && a.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_value_ = a.substr(eq + 1);
            a.erase(eq);
        }
        return a;
    }
    std::string value(const std::string& option) {
        if (inline_value_) {
            std::string v = *inline_value_;
            inline_value_.reset();
            return v;
        }
        if (pos_ >= argv_.size()) throw UsageError("option '" + option + "' needs a value", command_);
        return argv_[pos_++];
    }
    void no_value(const std::string& option) {
        if (inline_value_) throw UsageError("option '" + option + "' takes no value", command_);
    }

private:
    const std::vector<std::string>& argv_;
    size_t pos_;
    std::string command_;
    bool options_ended_ = false;
    std::optional<std::string> inline_value_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

size_t count_value(const std::string& option, const std::string& v, size_t min, const std::string& command) {
    auto n = text::parse_dec(v);
    if (!n || *n < min || *n > 1000000000) {
        throw UsageError("bad value '" + v + "' for " + option + ": expected a whole number >= " + std::to_string(min),
                         command);
    }
    return static_cast<size_t>(*n);
}

void parse_at(const std::string& v, Args& args) {
    int64_t ns = 0;
    if (v == "peak") {
        args.at = {report::TimePoint::Peak, 0};
    } else if (v == "exit") {
        args.at = {report::TimePoint::Exit, 0};
    } else if (report::parse_seconds(v, ns)) {
        args.at = {report::TimePoint::Time, ns};
    } else {
        throw UsageError("bad value '" + v + "' for --at: expected peak, exit or a time in seconds", "top");
    }
    args.at_name = args.at.type == report::TimePoint::Time ? "time" : v;
}

report::KindFilter parse_kind(const std::string& v) {
    if (v == "gpu") return report::KindFilter::Gpu;
    if (v == "pinned") return report::KindFilter::Pinned;
    if (v == "all") return report::KindFilter::All;
    if (v == "physical") return report::KindFilter::Physical;
    throw UsageError("bad value '" + v + "' for --kind: expected gpu, pinned, physical or all", "top");
}

/// Handles one option of `top`; returns false when it is not one of them.
bool top_option(const std::string& opt, ArgCursor& cur, Args& args) {
    if (opt == "--at") {
        parse_at(cur.value(opt), args);
    } else if (opt == "-n" || opt == "--top") {
        args.top_n = count_value(opt, cur.value(opt), 1, "top");
        args.top_n_given = true;
    } else if (opt == "--frames") {
        args.frames = count_value(opt, cur.value(opt), 0, "top");
        args.frames_given = true;
    } else if (opt == "--by") {
        const std::string v = cur.value(opt);
        if (v != "site" && v != "category") {
            throw UsageError("bad value '" + v + "' for --by: expected site or category", "top");
        }
        args.by_category = v == "category";
    } else if (opt == "--kind") {
        args.kind = parse_kind(cur.value(opt));
    } else if (opt == "--pool") {
        cur.no_value(opt);
        args.pool = true;
    } else if (opt == "--segments") {
        cur.no_value(opt);
        args.segments = true;
    } else if (opt == "--since") {
        const std::string v = cur.value(opt);
        int64_t ns = 0;
        if (!report::parse_seconds(v, ns)) {
            throw UsageError("bad value '" + v + "' for --since: expected a time in seconds", "top");
        }
        args.since = ns;
    } else {
        return false;
    }
    return true;
}

uint64_t size_value(const std::string& option, const std::string& v, const std::string& command) {
    std::string why;
    auto bytes = report::parse_size(v, &why);
    if (!bytes) throw UsageError("bad value '" + v + "' for " + option + ": " + why, command);
    return *bytes;
}

/// Handles one option of `check`; returns false when it is not one of them. A limit given twice
/// keeps the last, as every option of the CLI does.
bool check_option(const std::string& opt, ArgCursor& cur, Args& args) {
    const std::string command = "check";
    if (opt == "--max-peak") {
        args.max_peak = size_value(opt, cur.value(opt), command);
    } else if (opt == "--max-tensor-peak") {
        args.max_tensor_peak = size_value(opt, cur.value(opt), command);
    } else if (opt == "--max-live-at-exit") {
        args.max_live_at_exit = size_value(opt, cur.value(opt), command);
    } else if (opt == "--max-tensor-live-at-exit") {
        args.max_tensor_live_at_exit = size_value(opt, cur.value(opt), command);
    } else if (opt == "--max-gc-freed") {
        args.max_gc_freed = size_value(opt, cur.value(opt), command);
    } else if (opt == "--no-hazards") {
        cur.no_value(opt);
        args.no_hazards = true;
    } else if (opt == "--no-oom") {
        cur.no_value(opt);
        args.no_oom = true;
    } else {
        return false;
    }
    return true;
}

/// Handles one option of a command other than `top`; returns false when it is not one of them.
bool other_option(const std::string& command, const std::string& opt, ArgCursor& cur, Args& args) {
    if (command == "check") return check_option(opt, cur, args);
    if (command == "diff" && opt == "--fail-if") {
        try {
            args.fail_if.push_back(report::parse_gate(cur.value(opt)));
        } catch (const report::GateError& e) {
            throw UsageError(e.what(), command);
        }
    } else if ((command == "hazards" || command == "steps" || command == "oom" || command == "cycles") &&
               opt == "--frames") {
        args.frames = count_value(opt, cur.value(opt), 0, command);
    } else if (command == "compact" && opt == "--through") {
        const size_t n = count_value(opt, cur.value(opt), 1, command);
        if (n > 0xffffffffu) throw UsageError("--through: no detail part " + std::to_string(n), command);
        args.through = static_cast<unsigned>(n);
    } else if (command == "compact" && (opt == "--follow" || opt == "--detach")) {
        cur.no_value(opt);
        (opt == "--follow" ? args.follow : args.detach) = true;
    } else if (command == "cycles" && (opt == "--all" || opt == "--explain")) {
        cur.no_value(opt);
        (opt == "--all" ? args.all : args.explain) = true;
        if (args.all && args.explain) {
            throw UsageError("give one of --all and --explain, not both (--explain lists the explained collections)",
                             command);
        }
    } else if ((command == "diff" || command == "merge" || command == "export" || command == "plot") &&
               opt == "--frames") {
        args.frames = count_value(opt, cur.value(opt), 0, command);
        args.frames_given = true;
    } else if ((command == "diff" || command == "phases" || command == "steps") && opt == "--segments") {
        cur.no_value(opt);
        args.segments = true;
    } else if ((command == "diff" || command == "merge") && (opt == "-n" || opt == "--top")) {
        args.top_n = count_value(opt, cur.value(opt), 1, command);
    } else if (command == "phases" && opt == "--marks") {
        cur.no_value(opt);
        args.marks = true;
    } else if (command == "merge" && opt == "--run") {
        args.run_id = cur.value(opt);
        if (!valid_run_id(args.run_id)) {
            throw UsageError("bad value '" + args.run_id + "' for --run: expected a run id (" +
                                 std::to_string(Config::kMaxRunId) + " printable characters at most, no spaces)",
                             command);
        }
    } else if (command == "merge" && opt == "--template") {
        args.rank_template = cur.value(opt);
        if (args.rank_template.empty()) throw UsageError("option '--template' needs a non-empty value", command);
    } else if ((command == "plot" || command == "export") && (opt == "-o" || opt == "--output")) {
        args.output = cur.value(opt);
        if (args.output.empty()) throw UsageError("option '" + opt + "' needs a non-empty value", command);
    } else if (command == "plot" && opt == "--format") {
        std::string v = cur.value(opt);
        if (v != "svg" && v != "html")
            throw UsageError("bad value '" + v + "' for --format: expected svg or html", command);
        args.format = v == "svg" ? Args::Svg : Args::Html;
    } else if (command == "export" && (opt == "--memory-viz" || opt == "--perfetto" || opt == "--jsonl" ||
                                       opt == "--text" || opt == "--binary")) {
        cur.no_value(opt);
        Args::Format f = opt == "--perfetto" ? Args::Perfetto
                         : opt == "--jsonl"  ? Args::Jsonl
                         : opt == "--text"   ? Args::Text
                         : opt == "--binary" ? Args::Binary
                                             : Args::MemoryViz;
        if (args.format != Args::NoFormat && args.format != f) {
            throw UsageError("give one of --memory-viz, --perfetto, --jsonl, --text and --binary, not several",
                             command);
        }
        args.format = f;
    } else {
        return false;
    }
    return true;
}

/// Whether `path` names a file that is not stored (a character device such as /dev/null, a FIFO,
/// or the file standard output or error is open on, as /dev/stdout names it): plot writes SVG
/// there, as to "-", since such a name says nothing of the format. write_output_file decides
/// whether it may be written.
bool names_a_stream(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) return false;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)) return true;
    for (int fd : {1, 2}) {
        struct stat out {};
        if (fstat(fd, &out) == 0 && out.st_dev == st.st_dev && out.st_ino == st.st_ino) return true;
    }
    return false;
}

/// plot's format: the name's (.svg or .html); else --format's; else SVG for "-" and for a device,
/// FIFO or standard stream.
Args::Format plot_format(const std::string& output, Args::Format given) {
    const std::string command = "plot";
    Args::Format named = ends_with(output, ".svg")    ? Args::Svg
                         : ends_with(output, ".html") ? Args::Html
                                                      : Args::NoFormat;
    if (named != Args::NoFormat && given != Args::NoFormat && named != given) {
        throw UsageError("--format " + std::string(given == Args::Svg ? "svg" : "html") + " but the output name '" +
                             output + "' ends in " + (named == Args::Svg ? ".svg" : ".html"),
                         command);
    }
    if (named != Args::NoFormat) return named;
    if (given != Args::NoFormat) return given;
    if (output == "-" || names_a_stream(output)) return Args::Svg;  // "-": SVG on standard output
    throw UsageError("bad output name '" + output +
                         "' for plot: give a name ending in .svg or .html, '-', a device or a FIFO, or --format "
                         "svg|html",
                     command);
}

/// The value of --sysroot or --debug-dir: an existing directory (a mistyped one would silently
/// leave every frame unsymbolized).
std::string directory_value(const std::string& option, const std::string& v, const std::string& command) {
    if (v.empty()) throw UsageError("option '" + option + "' needs a non-empty value", command);
    struct stat st {};
    if (stat(v.c_str(), &st) != 0) {
        throw UsageError("bad value '" + v + "' for " + option + ": " + std::strerror(errno), command);
    }
    if (!S_ISDIR(st.st_mode)) throw UsageError("bad value '" + v + "' for " + option + ": not a directory", command);
    return v;
}

/// The command named `name`, or Help when there is none.
Args::Command command_named(const std::string& name) {
    if (name == "summary") return Args::Summary;
    if (name == "top") return Args::Top;
    if (name == "graphs") return Args::Graphs;
    if (name == "hazards") return Args::Hazards;
    if (name == "cycles") return Args::Cycles;
    if (name == "phases") return Args::Phases;
    if (name == "steps") return Args::Steps;
    if (name == "oom") return Args::Oom;
    if (name == "diff") return Args::Diff;
    if (name == "merge") return Args::Merge;
    if (name == "plot") return Args::Plot;
    if (name == "export") return Args::Export;
    if (name == "check") return Args::Check;
    if (name == "run") return Args::Run;
    if (name == "env") return Args::Env;
    if (name == "summarize") return Args::Summarize;
    if (name == "compact") return Args::Compact;
    return Args::Help;
}

/// Checks the positional arguments (report files) and the options a command cannot go without.
void check_positional(const std::string& command, const std::vector<std::string>& positional, Args& args) {
    if (command == "diff") {
        if (positional.size() < 2) throw UsageError("'diff' needs two report files, A and B", command);
        if (positional.size() > 2) throw UsageError("unexpected argument '" + positional[2] + "'", command);
        args.files = positional;
        return;
    }
    if (command == "summarize") {
        if (positional.empty()) throw UsageError("'summarize' needs one or more report FILEs", command);
        args.files = positional;
        return;
    }
    if (command == "merge") {
        if (!positional.empty() && !args.rank_template.empty()) {
            throw UsageError("give report files or --template, not both", command);
        }
        // No file, or one directory: the reports of one run found there by their run id.
        struct stat st {};
        if (positional.empty() && args.rank_template.empty()) {
            args.directory = ".";
        } else if (positional.size() == 1 && stat(positional[0].c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            args.directory = positional[0];
        } else {
            args.files = positional;
        }
        if (!args.run_id.empty() && args.directory.empty()) {
            throw UsageError("--run finds a run's reports in a directory: give a directory or no file", command);
        }
        return;
    }
    if (positional.empty()) throw UsageError("'" + command + "' needs a report FILE", command);
    if (positional.size() > 1) throw UsageError("unexpected argument '" + positional[1] + "'", command);
    args.file = positional[0];
    if (command == "check" && !args.max_peak && !args.max_tensor_peak && !args.max_live_at_exit &&
        !args.max_tensor_live_at_exit && !args.max_gc_freed && !args.no_hazards && !args.no_oom) {
        throw UsageError("'check' needs at least one limit: --max-peak, --max-tensor-peak, --max-live-at-exit, "
                         "--max-tensor-live-at-exit or --max-gc-freed (each with a SIZE such as 2GiB), --no-hazards "
                         "or --no-oom",
                         command);
    }
    if ((command == "plot" || command == "export") && args.output.empty()) {
        throw UsageError("'" + command + "' needs an output file: -o FILE", command);
    }
    if (command == "export" && args.format == Args::NoFormat) {
        throw UsageError("'export' needs a format: --memory-viz, --perfetto, --jsonl, --text or --binary", command);
    }
    if (command == "plot") args.format = plot_format(args.output, args.format);
}

void parse_command(const std::vector<std::string>& argv, Args& args, const std::string& command) {
    ArgCursor cur(argv, 1, command);
    std::vector<std::string> positional;
    while (!cur.done()) {
        bool is_option = false;
        std::string a = cur.next(is_option);
        if (!is_option) {
            positional.push_back(a);
        } else if (a == "--") {
            continue;
        } else if (a == "-h" || a == "--help") {
            args.command = Args::Help;
            args.help_topic = command;
            return;
        } else if (a == "--json" && command != "plot" && command != "export" && command != "summarize" &&
                   command != "compact") {
            cur.no_value(a);
            args.json = true;
        } else if ((a == "--sysroot" || a == "--debug-dir") && symbolizes(command)) {
            (a == "--sysroot" ? args.sysroot : args.debug_dir) = directory_value(a, cur.value(a), command);
        } else if (command == "top" ? !top_option(a, cur, args) : !other_option(command, a, cur, args)) {
            throw UsageError("unknown option '" + a + "' for '" + command + "'", command);
        }
    }
    check_positional(command, positional, args);
    if (command == "compact" && args.follow && args.through) {
        throw UsageError("give one of --follow and --through, not both (--follow folds each part as it closes)",
                         command);
    }
    if (command == "compact" && args.detach && !args.follow) {
        throw UsageError("--detach goes with --follow (a follower that goes on in the background)", command);
    }
    if (command == "top" && args.by_category &&
        (args.pool || args.since || args.segments || args.kind != report::KindFilter::Gpu)) {
        throw UsageError("--by category splits all GPU memory: it takes none of --pool, --since, --segments, --kind",
                         command);
    }
}

/// An option of run and env that sets a MEMGUARD_* variable: to `value`, or (nullptr) to its argument.
struct LaunchOption {
    const char* option;
    const char* variable;
    const char* value;
};

constexpr LaunchOption kLaunchOptions[] = {
    {"--output", "MEMGUARD_OUTPUT", nullptr},
    {"--allocator", "MEMGUARD_ALLOCATOR", nullptr},
    {"--report-encoding", "MEMGUARD_REPORT_ENCODING", nullptr},
    {"--max-report-size", "MEMGUARD_MAX_REPORT_SIZE", nullptr},
    {"--fold", "MEMGUARD_FOLD", "1"},
    {"--no-fold", "MEMGUARD_FOLD", "0"},
    {"--stack-depth", "MEMGUARD_STACK_DEPTH", nullptr},
    {"--log-level", "MEMGUARD_LOG_LEVEL", nullptr},
    {"--run-id", "MEMGUARD_RUN_ID", nullptr},
    {"--compile-gc", "MEMGUARD_COLLECT_COMPILE_GARBAGE", "1"},
    {"--no-compile-gc", "MEMGUARD_COLLECT_COMPILE_GARBAGE", "0"},
    {"--compile-window", "MEMGUARD_COMPILE_WINDOW", "1"},
    {"--no-compile-window", "MEMGUARD_COMPILE_WINDOW", "0"},
    {"--python-stacks", "MEMGUARD_PYTHON_STACKS", "1"},
    {"--no-python-stacks", "MEMGUARD_PYTHON_STACKS", "0"},
    {"--native-below-python", "MEMGUARD_NATIVE_BELOW_PYTHON", "1"},
    {"--steps", "MEMGUARD_STEPS", "1"},
    {"--no-steps", "MEMGUARD_STEPS", "0"},
    {"--explain-oom", "MEMGUARD_EXPLAIN_OOM", "1"},
    {"--no-explain-oom", "MEMGUARD_EXPLAIN_OOM", "0"},
    {"--recompute-gc", "MEMGUARD_COLLECT_RECOMPUTE_GARBAGE", "1"},
    {"--no-recompute-gc", "MEMGUARD_COLLECT_RECOMPUTE_GARBAGE", "0"},
    {"--recompute-functions", "MEMGUARD_RECOMPUTE_FUNCTIONS", nullptr},
    {"--gc-every-steps", "MEMGUARD_GC_EVERY_STEPS", nullptr},
    {"--gc-generation", "MEMGUARD_GC_GENERATION", nullptr},
    {"--gc-budget", "MEMGUARD_GC_BUDGET", nullptr},
    {"--explain-cycles", "MEMGUARD_EXPLAIN_CYCLES", nullptr},
    {"--nvtx", "MEMGUARD_NVTX", "1"},
    {"--no-nvtx", "MEMGUARD_NVTX", "0"},
};

/// memguard run [OPTIONS] [--] CMD ARGS... and memguard env [OPTIONS]: the options come first; the
/// first argument that is not one (or the one after "--") starts the command. Each value is checked
/// by the library's own configuration parser, so that a bad one is refused before anything runs,
/// in the words the library would log.
void parse_launch(const std::vector<std::string>& argv, Args& args, const std::string& command) {
    size_t i = 1;
    while (i < argv.size()) {
        std::string a = argv[i];
        if (a == "--") {
            ++i;
            break;
        }
        if (a.size() < 2 || a[0] != '-') break;
        ++i;
        std::optional<std::string> inline_value;
        if (size_t eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_value = a.substr(eq + 1);
            a.erase(eq);
        }
        auto value = [&]() -> std::string {
            if (inline_value) return *inline_value;
            if (i >= argv.size()) throw UsageError("option '" + a + "' needs a value", command);
            return argv[i++];
        };
        auto no_value = [&]() {
            if (inline_value) throw UsageError("option '" + a + "' takes no value", command);
        };
        if (a == "-h" || a == "--help") {
            args.command = Args::Help;
            args.help_topic = command;
            return;
        }
        if (command == "env" && a == "--json") {
            no_value();
            args.json = true;
            continue;
        }
        if (command == "run" && a == "--no-summary") {
            no_value();
            args.no_summary = true;
            continue;
        }
        if (a == "--library") {
            args.library = value();
            if (args.library.empty()) throw UsageError("option '--library' needs a non-empty value", command);
            continue;
        }
        const LaunchOption* o = nullptr;
        for (const LaunchOption& l : kLaunchOptions) {
            if (a == l.option) o = &l;
        }
        if (!o) throw UsageError("unknown option '" + a + "' for '" + command + "'", command);
        std::string v;
        if (o->value) {
            no_value();
            v = o->value;
        } else {
            v = value();
        }
        if (std::string problem = config_value_problem(o->variable, v.c_str()); !problem.empty()) {
            throw UsageError(a + ": " + problem, command);
        }
        args.settings.emplace_back(o->variable, v);
    }
    args.command_line.assign(argv.begin() + static_cast<long>(i), argv.end());
    if (command == "run" && args.command_line.empty()) throw UsageError("'run' needs a command to run", command);
    if (command == "env" && !args.command_line.empty()) {
        throw UsageError("unexpected argument '" + args.command_line[0] + "'", command);
    }
}

report::SymbolizerOptions& options() {
    static report::SymbolizerOptions o;
    return o;
}

}  // namespace

bool symbolizes(const std::string& command) {
    return command == "summary" || command == "top" || command == "hazards" || command == "cycles" ||
           command == "diff" || command == "merge" || command == "plot" || command == "export" || command == "check" ||
           command == "steps" || command == "oom" || command == "summarize";
}

void set_symbolizer_options(const Args& args) {
    report::SymbolizerOptions& o = options();
    o = report::SymbolizerOptions{};
    if (const char* a2l = std::getenv("MEMGUARD_ADDR2LINE")) o.addr2line = a2l;
    o.sysroot = args.sysroot;
    o.debug_dir = args.debug_dir;
}

const report::SymbolizerOptions& symbolizer_options() { return options(); }

Args parse_args(const std::vector<std::string>& argv) {
    Args args;
    if (argv.empty()) throw UsageError("no command given", "");
    const std::string& cmd = argv[0];
    if (cmd == "-h" || cmd == "--help") return args;
    if (cmd == "help") {
        if (argv.size() > 2) throw UsageError("unexpected argument '" + argv[2] + "'", "");
        args.help_topic = argv.size() == 2 ? argv[1] : "";
        if (!args.help_topic.empty() && command_named(args.help_topic) == Args::Help) {
            throw UsageError("no help for unknown command '" + args.help_topic + "'", "");
        }
        return args;
    }
    if (cmd == "-V" || cmd == "--version") {
        if (argv.size() > 1) throw UsageError("unexpected argument '" + argv[1] + "'", "");
        args.command = Args::Version;
        return args;
    }
    if (cmd == "run" || cmd == "env") {
        args.command = command_named(cmd);
        parse_launch(argv, args, cmd);
        return args;
    }
    if (command_named(cmd) != Args::Help) {
        args.command = command_named(cmd);
        parse_command(argv, args, cmd);
        return args;
    }
    if (cmd.size() > 1 && cmd[0] == '-') throw UsageError("unknown option '" + cmd + "'", "");
    throw UsageError("unknown command '" + cmd + "'", "");
}

}  // namespace memguard::cli
