// memguard: the command line reader of memguard reports.
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "cli.h"
#include "common/text.h"
#include "report/report.h"

#ifndef MEMGUARD_VERSION
#define MEMGUARD_VERSION "unknown"
#endif

namespace memguard::cli {

// Warnings and errors quote what a report holds (a record, a module path, a name): one line each,
// whatever it holds.
void print_warnings(const std::vector<std::string>& warnings) {
    for (const std::string& w : warnings) std::cerr << "memguard: warning: " << text::printable(w) << "\n";
}

namespace {

int dispatch(const Args& args) {
    switch (args.command) {
    case Args::Help: std::cout << help_text(args.help_topic); return kExitOk;
    case Args::Version:
        std::cout << "memguard " << MEMGUARD_VERSION << " (reads report format " << report::kFormatVersion << ")\n";
        return kExitOk;
    case Args::Summary: return run_summary(args);
    case Args::Top: return run_top(args);
    case Args::Graphs: return run_graphs(args);
    case Args::Hazards: return run_hazards(args);
    case Args::Cycles: return run_cycles(args);
    case Args::Phases: return run_phases(args);
    case Args::Steps: return run_steps(args);
    case Args::Oom: return run_oom(args);
    case Args::Diff: return run_diff(args);
    case Args::Merge: return run_merge(args);
    case Args::Plot: return run_plot(args);
    case Args::Export: return run_export(args);
    case Args::Check: return run_check(args);
    case Args::Run: return run_run(args);
    case Args::Env: return run_env(args);
    case Args::Summarize: return run_summarize(args);
    case Args::Compact: return run_compact(args);
    }
    return kExitInternal;
}

int finish_output(int rc) {
    std::cout.flush();
    if (!std::cout.good() || std::fflush(stdout) != 0) {
        std::cerr << "memguard: error: cannot write the output\n";
        return rc == kExitOk ? kExitInternal : rc;
    }
    return rc;
}

}  // namespace

int main_impl(int argc, char** argv) {
    std::vector<std::string> args(argv + (argc > 0 ? 1 : 0), argv + argc);
    try {
        const Args parsed = parse_args(args);
        set_symbolizer_options(parsed);
        return finish_output(dispatch(parsed));
    } catch (const UsageError& e) {
        std::cerr << "memguard: error: " << text::printable(e.what()) << "\nusage: " << synopsis(e.command) << "\n";
        return kExitUsage;
    } catch (const CommandError& e) {
        std::cerr << "memguard: error: " << text::printable(e.what()) << "\n";
        return kExitUsage;
    } catch (const report::ReportError& e) {
        std::cerr << "memguard: error: " << text::printable(e.what()) << "\n";
        return kExitUsage;
    } catch (const std::bad_alloc&) {
        // Memory is a small multiple of what the report's records need: a report too big for the
        // memory this process may use, not a bug.
        std::cerr << "memguard: error: out of memory (the report needs more memory than this process may use)\n";
        return kExitInternal;
    } catch (const std::exception& e) {
        std::cerr << "memguard: internal error: " << text::printable(e.what()) << "\n";
        return kExitInternal;
    }
}

}  // namespace memguard::cli

int main(int argc, char** argv) { return memguard::cli::main_impl(argc, argv); }
