// memguard export --memory-viz|--perfetto|--jsonl FILE -o OUT [--frames K]
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "export.h"
#include "output.h"
#include "rank_summary.h"
#include "report/units.h"

namespace memguard::cli {

int run_export(const Args& args) {
    report::Report r = report::load_report(args.file);
    print_warnings(r.warnings);
    std::string content;
    const char* what = "";
    if (args.format == Args::MemoryViz) {
        std::vector<std::string> notes;
        content = memory_viz_pickle(r, args.frames_given ? args.frames : 256, &notes);
        print_warnings(notes);
        what = "memory snapshot (open it at https://pytorch.org/memory_viz)";
    } else if (args.format == Args::Jsonl) {
        content = jsonl_export(r, args.frames_given ? args.frames : kSummaryFrames);
        what = "JSON lines (summary, sites, phases, steps; docs/fleet-export.md)";
    } else {
        content = perfetto_json(r);
        what = "Chrome trace (open it at https://ui.perfetto.dev)";
    }
    std::cout.flush();
    bool to_stdout = write_output_file(args.output, content);
    print_to(to_stdout ? stderr : stdout, "wrote %s: %s, %s\n", output_name(args.output).c_str(), what,
             report::human_bytes(content.size()).c_str());
    return kExitOk;
}

}  // namespace memguard::cli
