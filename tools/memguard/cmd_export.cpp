// memguard export --memory-viz|--perfetto|--jsonl|--text|--binary FILE -o OUT [--frames K]
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "export.h"
#include "output.h"
#include "rank_summary.h"
#include "report/transcode.h"
#include "report/units.h"

namespace memguard::cli {

int run_export(const Args& args) {
    if (args.format == Args::Text || args.format == Args::Binary) {
        // The report's records in the other encoding (or the same), without reading what they
        // mean, written out as they are made: memory stays bounded whatever the report's size.
        std::vector<std::string> warnings;
        const bool text = args.format == Args::Text;
        std::cout.flush();
        uint64_t bytes = 0;
        const bool to_stdout = write_output_stream(
            args.output,
            [&](const ChunkWriter& write) {
                report::transcode(args.file, text ? report::Encoding::Text : report::Encoding::Binary, write,
                                  &warnings);
            },
            &bytes);
        print_warnings(warnings);
        print_to(to_stdout ? stderr : stdout, "wrote %s: %s, %s\n", output_name(args.output).c_str(),
                 text ? "the report in text (a line per record)" : "the report in binary (compact records)",
                 report::human_bytes(bytes).c_str());
        return kExitOk;
    }
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
