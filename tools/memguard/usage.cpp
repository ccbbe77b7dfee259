#include "cli.h"

namespace memguard::cli {

std::string synopsis(const std::string& command) {
    if (command == "summary") return "memguard summary FILE [--json]";
    if (command == "top") {
        return "memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N] [--frames K] [--pool] "
               "[--json]";
    }
    if (command == "graphs") return "memguard graphs FILE [--json]";
    if (command == "hazards") return "memguard hazards FILE [--frames K] [--json]";
    if (command == "cycles") return "memguard cycles FILE [--all] [--json]";
    return "memguard summary|top|graphs|hazards|cycles FILE [OPTIONS]   (memguard help for more)";
}

namespace {

const char* const kGeneral = R"(memguard: reads the CUDA memory reports (*.mgr) that libmemguard.so writes.

usage:
  memguard summary FILE [--json]
  memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N] [--frames K] [--pool] [--json]
  memguard graphs FILE [--json]
  memguard hazards FILE [--frames K] [--json]
  memguard cycles FILE [--all] [--json]
  memguard help [COMMAND]
  memguard --version

commands:
  summary   the run at a glance: allocations, failures, OOM events, peak and live GPU memory,
            captures, hazards, garbage collections
  top       live memory at one moment grouped by allocation site (Python and native stack),
            largest first; --pool splits it by capture pool
  graphs    one row per stream capture: its graph, execs, launches and the memory it owns
  hazards   unsafe calls during capture, frees while a graph is alive, warm-up retention
  cycles    Python garbage collections (memguard's, explicit, automatic) and compiles

Run 'memguard help COMMAND' for the options of a command.
Exit status: 0 success (also for a report with warnings), 2 bad arguments or an unreadable report.
)";

const char* const kSummary = R"(usage: memguard summary FILE [--json]

Summarizes a report: the process, the duration, whether the run ended cleanly, the number of
allocations, frees, failed allocations and out-of-memory events, the peak of live GPU memory (kinds
device, async and managed) and when it was first reached, the GPU memory still live at exit, and a
breakdown per kind (pinned host memory included) and per device. Reports of format 1.1 and later
add the stream captures, graphs and execs alive at exit and the hazards; 1.2 and later the Python
garbage collections per trigger with the CUDA memory they freed, and the torch.compile compiles.

options:
  --json      print one JSON object instead of text
  -h, --help  show this help
)";

const char* const kTop = R"(usage: memguard top FILE [--at peak|exit|SECONDS] [--kind gpu|pinned|all] [-n N]
                    [--frames K] [--pool] [--json]

Shows the memory live at one moment grouped by allocation site, largest first, with each site's
bytes, blocks, share of the total and its innermost frames. A site is the native stack of the
allocation and, when the allocating thread held the GIL (format 1.2), its Python stack: the Python
frames come first (marked py#, innermost first, "function at file:line"), then the native ones.

options:
  --at WHEN      peak (default): when live GPU memory first reached its maximum;
                 exit: after the last record; SECONDS: a time since the run's clock origin
                 (the state after the records up to the first one later than that time)
  --kind KIND    gpu (default: device, async and managed memory), pinned (page-locked host
                 memory) or all
  -n N           show the N largest sites (default 10; with --pool, per pool)
  --frames K     show up to K Python frames and up to K native frames per site (default 6)
  --pool         split the live memory by owner: ordinary memory (owned by no capture) and the
                 private pool of each stream capture, each with its total and its largest sites
                 (shares are of the pool's total)
  --json         print one JSON object instead of text
  -h, --help     show this help

Frames are symbolized from the module files named in the report when they exist on this machine
with the same GNU build-id; file:line comes from addr2line when the module has DWARF line
information (set MEMGUARD_ADDR2LINE to another program, or to an empty value to skip it).
Other frames print as module+offset.
)";

const char* const kGraphs = R"(usage: memguard graphs FILE [--json]

One row per stream capture (format 1.1): its id, stream, capture mode, the thread that began it,
its window (begin and end time in seconds since the clock origin, and what cudaStreamEndCapture
returned), the graph it ended in, the graph execs instantiated from that graph, their launches,
the memory the capture owns (every block allocated into it, and the part still live at exit) and
whether it was destroyed: ended, its graph destroyed (if it produced one) and every exec from it
destroyed. Under each row: the execs, and which graph and execs were still alive at exit.

options:
  --json      print a JSON list with one object per capture instead of text
  -h, --help  show this help
)";

const char* const kHazards = R"(usage: memguard hazards FILE [--frames K] [--json]

Lists the hazards memguard detected (format 1.1), in three sections:
  unsafe calls          potentially unsafe CUDA calls (cudaMalloc, cudaFree, ...) made while the
                        capture-mode rules forbid them: time, thread, API, the capture and its mode,
                        and the thread's capture interaction mode
  frees while a graph   blocks owned by a capture freed while an exec of that capture's graph was
  is alive              alive: time, address, size, capture, exec and the block's allocation site
  warm-up retention     at a capture's begin or end, memory allocated since the previous capture
                        and owned by no capture that is still live (the warm-up outputs kept alive
                        across the capture): per capture boundary, biggest first, with its sites
Prints "no hazards" when there are none.

options:
  --frames K  show up to K Python frames and up to K native frames per site (default 6)
  --json      print one JSON object instead of text
  -h, --help  show this help
)";

const char* const kCycles = R"(usage: memguard cycles FILE [--all] [--json]

Lists the Python garbage collections (format 1.2): memguard's compile-garbage collections (with the
compiles that marked the thread and the time from the first mark to the collection) and explicit
gc.collect() calls, plus the automatic collections that freed CUDA memory; then totals per trigger
(count, duration, objects collected, CUDA bytes freed) and the number of torch.compile compiles.
Times are seconds since the clock origin at the end of each collection.

options:
  --all       list every automatic collection too
  --json      print one JSON object instead of text (it always lists every collection)
  -h, --help  show this help
)";

}  // namespace

std::string help_text(const std::string& topic) {
    if (topic == "summary") return kSummary;
    if (topic == "top") return kTop;
    if (topic == "graphs") return kGraphs;
    if (topic == "hazards") return kHazards;
    if (topic == "cycles") return kCycles;
    return kGeneral;
}

}  // namespace memguard::cli
