// The memguard command line: argument parsing and the commands. Exit codes: 0 success, 2 bad arguments
// or an unreadable report, 1 an internal error; the gates (check, diff --fail-if) exit 1 when a limit is
// exceeded.
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/gates.h"
#include "report/symbolizer.h"

namespace memguard::cli {

constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;
constexpr int kExitGateFailed = 1;  // check, diff --fail-if: a limit exceeded
constexpr int kExitUsage = 2;

/// A bad command line; what() names the problem, `command` selects the usage hint.
class UsageError : public std::runtime_error {
public:
    UsageError(const std::string& what, std::string command) : std::runtime_error(what), command(std::move(command)) {}
    std::string command;
};

/// A command that cannot go on (run: no library, no temporary directory); what() says why. Exit 2.
class CommandError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct Args {
    enum Command {
        Help,
        Version,
        Summary,
        Top,
        Graphs,
        Hazards,
        Cycles,
        Phases,
        Steps,
        Oom,
        Diff,
        Merge,
        Plot,
        Export,
        Check,
        Run,
        Env,
        Summarize,
        Compact
    } command = Help;
    std::string help_topic;  // for Help: "" or a command name
    std::string file;
    std::optional<unsigned> through;  // compact --through N
    bool follow = false;              // compact --follow: fold each part as it closes, until the run ends
    bool detach = false;              // compact --follow --detach: go on in the background (the library's)
    bool json = false;
    // top
    report::TimePoint at;
    std::string at_name = "peak";  // "peak", "exit" or "time"
    size_t top_n = 10;
    bool top_n_given = false;   // top --by category: its default is 3 sites a category
    size_t frames = 6;          // top, hazards, steps and oom
    bool frames_given = false;  // export: its default is every frame (up to 256)
    report::KindFilter kind = report::KindFilter::Gpu;
    bool pool = false;         // top: split by owner (ordinary memory, capture pools)
    bool segments = false;     // top: allocator mode: the segments (A blocks), not the tensor blocks (T)
    bool by_category = false;  // top --by category: the category breakdown (docs/categories.md)
    // top --since: only what was allocated at or after this time (ns since the clock origin)
    std::optional<int64_t> since;
    // cycles
    bool all = false;      // list every automatic collection
    bool explain = false;  // cycles --explain: what the explained collections' garbage held
    // diff, merge: every report named (diff: A then B; merge: the ranks' reports in order)
    std::vector<std::string> files;
    bool marks = false;         // phases --marks: list the marks instead
    std::string rank_template;  // merge --template
    bool no_summary = false;    // run --no-summary: no rank summaries after the run
    std::string run_id;         // merge --run: the reports of this run id (else the most recent run's)
    std::string directory;      // merge: the directory to find a run's reports in ("" with files or --template)
    // run, env
    std::string library;  // --library: libmemguard.so (else next to this program, ../lib)
    /// The MEMGUARD_* variables that options set, in order (a later option overrides an earlier).
    std::vector<std::pair<std::string, std::string>> settings;
    std::vector<std::string> command_line;  // run: CMD ARGS...
    // plot, export
    std::string output;  // -o
    // export: --memory-viz, --perfetto or --jsonl; plot: SVG or HTML, from the name, --format or the default
    enum Format { NoFormat, MemoryViz, Perfetto, Svg, Html, Jsonl, Text, Binary } format = NoFormat;
    // the commands that show frames: where the module files and their debug files are
    std::string sysroot;    // --sysroot: module paths are looked up under it instead of /
    std::string debug_dir;  // --debug-dir: separate debug files by build-id, DIR/.build-id/xx/rest.debug
    // check: the limits given (absent: not checked), in bytes
    std::optional<uint64_t> max_peak, max_tensor_peak, max_live_at_exit, max_tensor_live_at_exit, max_gc_freed;
    bool no_hazards = false;
    bool no_oom = false;
    // diff --fail-if, in the order given
    std::vector<report::GateExpr> fail_if;
};

/// Parses argv[1..]. Throws UsageError.
Args parse_args(const std::vector<std::string>& argv);

/// Whether `command` shows stack frames (and so takes --sysroot and --debug-dir).
bool symbolizes(const std::string& command);

/// The symbolizer settings of this run: the addr2line program ($MEMGUARD_ADDR2LINE, "" for none),
/// --sysroot and --debug-dir. main sets them from the parsed arguments before the command runs.
void set_symbolizer_options(const Args& args);
const report::SymbolizerOptions& symbolizer_options();

/// The one-line synopsis of a command ("" for the general one), and the full help texts.
std::string synopsis(const std::string& command);
std::string help_text(const std::string& topic);

int run_summary(const Args& args);
int run_top(const Args& args);
int run_graphs(const Args& args);
int run_hazards(const Args& args);
int run_cycles(const Args& args);
int run_cycles_explain(const Args& args);  // cycles --explain (cmd_explain.cpp)
int run_phases(const Args& args);
int run_steps(const Args& args);
int run_oom(const Args& args);
int run_diff(const Args& args);
int run_merge(const Args& args);
int run_plot(const Args& args);
int run_export(const Args& args);
int run_check(const Args& args);
int run_run(const Args& args);
int run_env(const Args& args);
int run_summarize(const Args& args);  // summarize FILE...: the rank summaries (rank_summary.h)
/// compact FILE [--through N | --follow [--detach]]: a bounded report's folds (report/fold.h, report/follow.h)
int run_compact(const Args& args);

/// Whether a command shows the tensor blocks (allocator mode's T records: the sites PyTorch's
/// tensors were allocated at, their bytes) rather than the GPU blocks (there, the segments the
/// allocator took): a report with tensor blocks, without --segments or another --kind.
inline bool tensor_view(const report::Report& r, const Args& args) {
    return r.has_tensors() && !args.segments && args.kind == report::KindFilter::Gpu;
}

/// Whether the run had memguard as PyTorch's allocator: the header says so (I allocator memguard),
/// or, where that record is missing (an allocator installed by hand), tensor blocks or OOMs show it.
bool allocator_mode(const report::Report& r);

/// Prints "memguard: warning: <w>" on stderr for each remark.
void print_warnings(const std::vector<std::string>& warnings);

}  // namespace memguard::cli
