#include "cli.h"

namespace memguard::cli {

std::string synopsis(const std::string& command) {
    if (command == "summary") return "memguard summary FILE [--json]";
    if (command == "top") {
        return "memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N] [--frames K] [--json]";
    }
    return "memguard summary|top FILE [OPTIONS]   (memguard help for more)";
}

namespace {

const char* const kGeneral = R"(memguard: reads the CUDA memory reports (*.mgr) that libmemguard.so writes.

usage:
  memguard summary FILE [--json]
  memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N] [--frames K] [--json]
  memguard help [COMMAND]
  memguard --version

commands:
  summary   the run at a glance: allocations, failures, OOM events, peak and live GPU memory
  top       live memory at one moment grouped by allocation site (native stack), largest first

Run 'memguard help COMMAND' for the options of a command.
Exit status: 0 success (also for a report with warnings), 2 bad arguments or an unreadable report.
)";

const char* const kSummary = R"(usage: memguard summary FILE [--json]

Summarizes a report: the process, the duration, whether the run ended cleanly, the number of
allocations, frees, failed allocations and out-of-memory events, the peak of live GPU memory (kinds
device, async and managed) and when it was first reached, the GPU memory still live at exit, and a
breakdown per kind (pinned host memory included) and per device.

options:
  --json      print one JSON object instead of text
  -h, --help  show this help
)";

const char* const kTop = R"(usage: memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N]
                    [--frames K] [--json]

Shows the memory live at one moment grouped by allocation site (the native stack of the allocation),
largest first, with each site's bytes, blocks, share of the total and its innermost frames.

options:
  --at WHEN      peak (default): when live GPU memory first reached its maximum;
                 exit: after the last record; SECONDS: a time since the run's clock origin
                 (the state after the records up to the first one later than that time)
  --kind KIND    gpu (default: device, async and managed memory), pinned (page-locked host
                 memory) or all
  -n N           show the N largest sites (default 10)
  --frames K     show K frames per site (default 6)
  --json         print one JSON object instead of text
  -h, --help     show this help

Frames are symbolized from the module files named in the report when they exist on this machine
with the same GNU build-id; file:line comes from addr2line when the module has DWARF line
information (set MEMGUARD_ADDR2LINE to another program, or to an empty value to skip it).
Other frames print as module+offset.
)";

}  // namespace

std::string help_text(const std::string& topic) {
    if (topic == "summary") return kSummary;
    if (topic == "top") return kTop;
    return kGeneral;
}

}  // namespace memguard::cli
