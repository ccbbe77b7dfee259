// memguard export --memory-viz|--perfetto FILE -o OUT [--frames K]
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>

#include "cli.h"
#include "export.h"
#include "output.h"
#include "report/units.h"

namespace memguard::cli {

void write_output_file(const std::string& path, const std::string& content) {
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (f == nullptr) throw report::ReportError(path + ": cannot write: " + std::strerror(errno));
    bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
    int err = ok ? 0 : errno;
    if (std::fclose(f) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
        ok = false;
        err = errno;
    }
    if (!ok) {
        std::remove(tmp.c_str());
        throw report::ReportError(path + ": cannot write: " + std::strerror(err));
    }
}

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
    } else {
        content = perfetto_json(r);
        what = "Chrome trace (open it at https://ui.perfetto.dev)";
    }
    write_output_file(args.output, content);
    std::cout.flush();
    std::printf("wrote %s: %s, %s\n", args.output.c_str(), what, report::human_bytes(content.size()).c_str());
    return kExitOk;
}

}  // namespace memguard::cli
