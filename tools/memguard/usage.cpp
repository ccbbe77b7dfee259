#include "cli.h"

namespace memguard::cli {

std::string synopsis(const std::string& command) {
    if (command == "summary") return "memguard summary FILE [--json]";
    if (command == "top") {
        return "memguard top FILE [--at peak|exit|SECONDS] [--since SECONDS] [--kind gpu|pinned|physical|all] [-n N] "
               "[--frames K] [--pool] [--segments] [--by site|category] [--json]";
    }
    if (command == "graphs") return "memguard graphs FILE [--json]";
    if (command == "hazards") return "memguard hazards FILE [--frames K] [--json]";
    if (command == "cycles") return "memguard cycles FILE [--all | --explain] [--frames K] [--json]";
    if (command == "phases") return "memguard phases FILE [--marks] [--segments] [--json]";
    if (command == "steps") return "memguard steps FILE [--segments] [--frames K] [--json]";
    if (command == "oom") return "memguard oom FILE [--frames K] [--json]";
    if (command == "diff") {
        return "memguard diff A B [-n N] [--frames K] [--segments] [--fail-if EXPR]... [--json]";
    }
    if (command == "check") {
        return "memguard check FILE [--max-peak SIZE] [--max-tensor-peak SIZE] [--max-live-at-exit SIZE] "
               "[--max-tensor-live-at-exit SIZE] [--max-gc-freed SIZE] [--no-hazards] [--no-oom] [--json]";
    }
    if (command == "merge") {
        return "memguard merge [DIR] [--run ID] | FILE... | --template TEMPLATE [-n N] [--frames K] [--json]";
    }
    if (command == "run") return "memguard run [OPTIONS] [--] CMD [ARGS...]   (memguard help run for the options)";
    if (command == "env") return "memguard env [OPTIONS] [--json]   (memguard help env for the options)";
    if (command == "plot") return "memguard plot FILE -o OUT.svg|OUT.html|- [--format svg|html] [--frames K]";
    if (command == "export")
        return "memguard export --memory-viz|--perfetto|--jsonl|--text|--binary FILE -o OUT [--frames K]";
    if (command == "summarize") return "memguard summarize FILE...";
    if (command == "compact") return "memguard compact FILE [--through N | --follow]";
    return "memguard "
           "run|env|summary|summarize|compact|top|graphs|hazards|cycles|phases|steps|oom|diff|merge|plot|export|"
           "check ... "
           "[OPTIONS]   "
           "(memguard help for more)";
}

namespace {

const char* const kGeneral =
    R"(memguard: runs a program under libmemguard.so and reads the CUDA memory reports (*.mgr) it writes.

usage:
  memguard run [OPTIONS] [--] CMD [ARGS...]
  memguard env [OPTIONS] [--json]
  memguard summary FILE [--json]
  memguard summarize FILE...
  memguard compact FILE [--through N | --follow]
  memguard top FILE [--at peak|exit|SECONDS] [--since SECONDS] [--kind gpu|pinned|physical|all] [-n N]
               [--frames K] [--pool] [--segments] [--by site|category] [--json]
  memguard graphs FILE [--json]
  memguard hazards FILE [--frames K] [--json]
  memguard cycles FILE [--all | --explain] [--frames K] [--json]
  memguard phases FILE [--marks] [--segments] [--json]
  memguard steps FILE [--segments] [--frames K] [--json]
  memguard oom FILE [--frames K] [--json]
  memguard diff A B [-n N] [--frames K] [--segments] [--fail-if EXPR]... [--json]
  memguard merge [DIR] [--run ID] | FILE... | --template TEMPLATE [--frames K] [--json]
  memguard plot FILE -o OUT.svg|OUT.html|- [--format svg|html] [--frames K]
  memguard export --memory-viz|--perfetto|--jsonl|--text|--binary FILE -o OUT [--frames K]
  memguard check FILE [--max-peak SIZE] [--max-tensor-peak SIZE] [--max-live-at-exit SIZE]
                 [--max-tensor-live-at-exit SIZE] [--max-gc-freed SIZE] [--no-hazards] [--no-oom] [--json]
  memguard help [COMMAND]
  memguard --version

commands:
  run       run a command with libmemguard.so preloaded, then list the reports its processes
            wrote (torchrun ranks, workers, subprocesses) and the command that reads them
  env       the environment `run` gives a command, as shell export lines or JSON, for
            launchers that start their workers with an environment of their own
  summary   the run at a glance: allocations, failures, OOM events, peak and live GPU memory,
            captures, hazards, garbage collections
  summarize write each report's rank summary beside it, FILE.summary.json (small JSON: peak,
            categories and sites at the peak, OOMs, collections, hazards, steps); `run` does it
  compact   fold a bounded report's older detail parts (MEMGUARD_MAX_REPORT_SIZE) into figures,
            FILE.fold-N, so that the writer can delete them and the run's figures stay whole
  top       live memory at one moment grouped by allocation site (Python and native stack),
            largest first; --pool splits it by capture pool
  graphs    one row per stream capture: its graph, execs, launches and the memory it owns
  hazards   unsafe calls during capture, frees while a graph is alive, warm-up retention
  cycles    Python garbage collections (memguard's, explicit, automatic) and compiles; --explain:
            what the garbage of memguard's collections held (CUDA storages, chains, frames)
  phases    per phase (memguard_phase_begin/end, memguard.phase, NVTX ranges): live bytes at
            entry, peak, incremental peak (peak - entry) and at exit; --marks: the marks
  steps     per training step (optimizer steps, memguard.step()): duration, peak, incremental
            peak, live bytes at its end, categories at its peak; growth over consecutive steps,
            and which part of it later collections freed (cycles) and which is still held
  oom       each out-of-memory explained: the request, the device, PyTorch's allocator and its
            fragmentation, the categories and their sites, and a verdict
  diff      two runs side by side: peak, live at exit, collections, each phase (matched by
            name and occurrence), and the sites at the peak that grew or shrank
  merge     the reports of a distributed job, one row per rank, with the maximum and the sum,
            and the outlier ranks; without files, the most recent run's reports in the current
            directory (by run id); rank summaries stand for their reports
  plot      GPU memory over time as an SVG or HTML picture, with phases, captures, compiles,
            collections, OOM events and the peak marked
  export    the report as a memory snapshot for pytorch.org/memory_viz (--memory-viz), as
            a Chrome trace for ui.perfetto.dev (--perfetto), as JSON lines for DuckDB,
            Spark or a warehouse (--jsonl), or as itself in text or binary (--text, --binary)
  check     a gate for CI: fails (exit 1) when the run exceeded a limit (peak, live at exit,
            bytes freed by garbage collections) or had hazards or OOM events; diff --fail-if
            gates a run against a baseline

Run 'memguard help COMMAND' for the options of a command. The commands that show stack frames
(summary, summarize, top, hazards, cycles, diff, merge, plot, export, check) also take --sysroot DIR (look up
the module files the report names under DIR instead of /) and --debug-dir DIR (separate debug files
by build-id, DIR/.build-id/xx/rest.debug, as GDB finds them).
Exit status: 0 success (also for a report with warnings), 2 bad arguments or an unreadable report;
check and diff --fail-if: 1 when a limit was exceeded; run: the command's own (128+N when signal N
ended it).
)";

const char* const kSummary = R"(usage: memguard summary FILE [--json]

Summarizes a report: the process, the duration, whether the run ended cleanly, the number of
allocations, frees, failed allocations and out-of-memory events, the peak of live GPU memory (kinds
device, async and managed) and when it was first reached, the GPU memory still live at exit, and a
breakdown per kind (pinned host memory included) and per device. Reports of format 1.1 and later
add the stream captures, graphs and execs alive at exit and the hazards; 1.2 and later the Python
garbage collections per trigger with the CUDA memory they freed, and the torch.compile compiles;
1.3 and later count physical memory made by cuMemCreate on a device as GPU memory and, when the
run used driver virtual memory management (as PyTorch's expandable segments do), add a "virtual
memory" section: address space reserved, bytes mapped and physical bytes, at the end and at peak.

options:
  --json           print one JSON object instead of text
  --sysroot DIR    look up the module files the report names under DIR instead of / (for the
                   sites of allocator OOM events)
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help
)";

const char* const kTop = R"(usage: memguard top FILE [--at peak|exit|SECONDS] [--since SECONDS]
                    [--kind gpu|pinned|physical|all] [-n N] [--frames K] [--pool] [--segments]
                    [--by site|category] [--json]

Shows the memory live at one moment grouped by allocation site, largest first, with each site's
bytes, blocks, share of the total and its innermost frames. A site is the native stack of the
allocation and, when the allocating thread held the GIL (format 1.2), its Python stack: the Python
frames come first (marked py#, innermost first, "function at file:line"), then the native ones.
Physical memory made by cuMemCreate (format 1.3, e.g. PyTorch's expandable segments) is live from
its creation until it is released and no longer mapped; its sites are the stacks of the
cuMemCreate calls, marked "physical" (kind "physical" in the JSON).

In allocator mode (MEMGUARD_ALLOCATOR=memguard, format 1.5) the GPU view shows the tensor blocks
that memguard's allocator handed to PyTorch (what torch.cuda.memory_allocated() counts), by the
sites of the tensor allocations, each with the bytes PyTorch requested next to the block sizes;
--at peak is then the peak of that tensor memory. --segments (or another --kind) shows the
segments the allocator took with cudaMalloc instead (torch.cuda.memory_reserved()). The JSON
says which: "view" ("tensors" or "segments", allocator mode only) and, for --kind gpu,
"bytes_of" ("tensors" or "gpu", as diff, phases and merge say it).

options:
  --at WHEN      peak (default): when live GPU memory first reached its maximum;
                 exit: after the last record; SECONDS: a time since the run's clock origin
                 (the state after the records up to the first one later than that time)
  --since SECONDS
                 only what was allocated at or after SECONDS (a time since the run's clock
                 origin, as `phases --json` gives a phase's begin_t): what a phase added
  --kind KIND    gpu (default: device, async and managed memory, and physical memory made
                 by cuMemCreate on a device), pinned (page-locked host memory), physical
                 (cuMemCreate handles only, shown at their cuMemCreate stack) or all
  -n N           show the N largest sites (default 10; with --pool, per pool)
  --frames K     show up to K Python frames and up to K native frames per site (default 6)
  --pool         split the live memory by owner: ordinary memory (owned by no capture) and the
                 private pool of each stream capture, each with its total and its largest sites
                 (shares are of the pool's total)
  --segments     allocator mode: show the allocator's segments instead of the tensor blocks
  --by category  split all live GPU memory (--at peak: in allocator mode the tensor peak)
                 into categories: parameter, gradient, nonparam_gradient, optimizer_state,
                 buffer, activation, other_tensor, graph_pool, compile_workspace, nccl,
                 blas_workspace, library (by library), allocator_cache, other; each with its
                 bytes, share, whether a rule that can be wrong decided it ("estimate"), and its
                 largest sites (-n, default 3; their frames with --frames). How each category is
                 decided: docs/categories.md. Takes none of --pool, --since, --segments, --kind.
  --json         print one JSON object instead of text
  --sysroot DIR  look up the module files the report names under DIR instead of / (a copy of
                 the machine the run was on; its absolute links and ".." stay inside DIR)
  --debug-dir DIR
                 look up each module's separate debug file by its GNU build-id, as GDB does:
                 DIR/.build-id/<first two hex digits>/<the rest>.debug
  -h, --help     show this help

Frames are symbolized from the module files named in the report when they exist on this machine
with the same GNU build-id; file:line comes from addr2line when the module has DWARF line
information (set MEMGUARD_ADDR2LINE to another program, or to an empty value to skip it).
Other frames print as module+offset. Only regular files are read (a report's author chooses the
paths), and a debug file only with the module's recorded build-id.
)";

const char* const kGraphs = R"(usage: memguard graphs FILE [--json]

One row per stream capture (format 1.1): its id, stream, capture mode, the thread that began it,
its window (begin and end time in seconds since the clock origin, and what cudaStreamEndCapture
returned), the graph it ended in, the graph execs instantiated from that graph, their launches,
the memory the capture owns (every block allocated into it, and the part still live at exit) and
whether it was destroyed: ended, its graph destroyed (if it produced one) and every exec from it
destroyed. Under each row: the execs, and which graph and execs were still alive at exit; in
allocator mode also the tensor blocks the capture got from its private pool (and those live at
exit), inside the segments it owns.

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
  --frames K       show up to K Python frames and up to K native frames per site (default 6)
  --json           print one JSON object instead of text
  --sysroot DIR    look up the module files the report names under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help
)";

const char* const kCycles = R"(usage: memguard cycles FILE [--all | --explain] [--frames K] [--json]

Lists the Python garbage collections (format 1.2): memguard's own (after a compile, labelled
"compile", with the compiles that marked the thread and the time from the first mark; after a
checkpointed region's recomputed backward, "recompute"; at step ends, "step") and explicit
gc.collect() calls, plus the automatic collections that freed CUDA memory. From format 1.9 each of
memguard's collections also says how many chances of its trigger the time budget skipped before it
and names its explanation (#N). Then totals per trigger: count, duration, objects collected, CUDA
bytes freed, bytes freed per millisecond, the share of the time budget used (the trigger's time /
(MEMGUARD_GC_BUDGET x the run's wall time); "-" when the report names no budget) and the chances
skipped; then the number of torch.compile compiles. Times are seconds since the clock origin at the
end of each collection. In allocator mode (format 1.5) it then lists, per collection, the tensor
blocks freed while it ran (t records with gc 1 on its thread before its Y), by allocation site,
largest first.

--explain shows what the garbage of each explained collection held (format 1.9,
MEMGUARD_EXPLAIN_CYCLES): the CUDA storages, largest first, with how the garbage held them (a
tensor object, or saved for backward by an autograd context), their category and allocation site
(the user's line; marked segment when it is the site of the segment that holds the storage, in
interposition mode); one chain of references from the holder (a frame, closure, autograd context,
exception or dynamo object of the garbage) to each of the largest, one step a line; and the
garbage's objects by group (frames by function and line, autograd contexts and nodes, dynamo
objects, closures, exceptions, tracebacks, tensors, the most frequent types). docs/cycles.md says
how to read it.

options:
  --all            list every automatic collection too
  --explain        show what the explained collections' garbage held
  --frames K       show up to K Python and K native frames per site: allocator mode's sites and
                   the JSON sites of --explain (default 6)
  --json           print one JSON object instead of text (it always lists every collection)
  --sysroot DIR    look up the module files the report names under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help
)";

const char* const kSteps = R"(usage: memguard steps FILE [--segments] [--frames K] [--json]

Lists the training steps of a report (format 1.8): a step ends when an optimizer's step() returns
(torch.optim's global step hooks: no code change) or at memguard.step(). Step n spans from the end
of step n - 1 (the start of the run for step 1) to its end. For each: its number, end time and
duration (seconds), the most GPU live bytes during it (peak), the incremental peak (peak - the live
bytes at its start), the live bytes at its end, and the largest categories at its peak
(docs/categories.md; looked up for the 256 steps with the highest peaks at most). In allocator mode
(MEMGUARD_ALLOCATOR=memguard) the bytes are the tensor blocks' (torch.cuda.memory_allocated()).
When a garbage collection freed CUDA memory, a "gc freed" column: what the collections that ended
in the step freed.

Then the growth finding (docs/steps.md): when the live bytes at step ends grew over 3 or more
consecutive steps (after 2 warm-up steps), by 1 MiB a step or more (least-squares slope), never
falling by more than 1% from one step end to the next: how much a step, over which steps, and the
sites and categories that grew from the first to the last of those step ends. Then what became of
that growth: freed by later collections (garbage reference cycles: which collections, the sites),
released by the program, or still held at the last step's end (referenced when a full collection
did not free it: a leak), and what to do about each. Exact in allocator mode (the blocks' t
records), estimated from the collections' CUDA bytes freed otherwise.

options:
  --segments  allocator mode: the bytes of the allocator's segments (memory_reserved())
  --frames K  frames used to name a site (default 6)
  --json      print one JSON object instead of text: bytes_of, steps (step, source, name,
              thread, begin_t, end_t, duration_s, entry_bytes, peak_bytes,
              incremental_peak_bytes, peak_t, live_at_end_bytes, collections,
              collections_freed_bytes, categories_at_peak), warmup_steps, growth (null, or
              first_step, last_step, steps, from_bytes, to_bytes, per_step_bytes, sites,
              categories, fate)
  --sysroot DIR    look up the module files the report names under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help  show this help
)";

const char* const kOom = R"(usage: memguard oom FILE [--frames K] [--json]

Explains each out-of-memory of a report (docs/oom.md): PyTorch's allocator raising
OutOfMemoryError (x records, source torch), a CUDA allocation call failing with out of memory
(source cuda; E records with error 2 in older reports), memguard's allocator (source allocator;
O records in older reports). For each: the request (bytes, stream, the user's line), the phases
open and the step in progress; the device (total, free, held by this process: memguard's live
GPU bytes there, held by others: total - free - this process); the allocator (allocated,
reserved, cached free = reserved - allocated, the largest free block from PyTorch's snapshot or
memguard's segments, fragmentation = cached free bytes in blocks smaller than the request); the
categories with their top sites; the tensors saved by autograd graphs; garbage collections in the
10 s before; whether a compile-garbage collection was pending or a capture in progress; and a
verdict of one to three sentences. A failed CUDA allocation followed on its thread within 1 s by
an allocation of at least its size (PyTorch freed its cache and retried) is listed as recovered,
not as an out-of-memory. Without any: "no out-of-memory recorded" (exit 0).

options:
  --frames K  frames used to name a site (default 6)
  --json      print one JSON object instead of text: ooms and recovered, lists of objects
  --sysroot DIR    look up the module files the report names under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help  show this help
)";

const char* const kPhases = R"(usage: memguard phases FILE [--marks] [--segments] [--json]

Lists the phases of a report (format 1.4): named spans from memguard_phase_begin/end (C API),
memguard.phase (Python) and NVTX ranges (source nvtx: push/pop, per thread; nvtx_range:
start/end, process-wide). For each phase, in order of begin: its id, begin time and duration
(seconds since the clock origin; "+" when it never ended and is measured to the end of the
report), the GPU live bytes right before it began (entry), the most during it (peak, from begin to
end inclusive), the incremental peak (peak - entry: what memory planners predict), the GPU live
bytes at its end (exit), its source and thread. Names are indented by nesting depth (phases of
the same thread open at its begin; NVTX start/end ranges nest among themselves), two spaces a
level up to depth 16; deeper names show their depth instead, as "[depth 17] name". In allocator
mode (MEMGUARD_ALLOCATOR=memguard) the bytes are the tensor blocks' (what
torch.cuda.memory_allocated() reports), as `top` shows them.

options:
  --marks     list the marks (memguard_mark, memguard.mark, NVTX marks) instead: time, GPU
              live bytes, source, thread, name
  --segments  allocator mode: the bytes of the allocator's segments (memory_reserved())
  --json      print a JSON list instead of text: one object per phase (id, name, source,
              thread, depth, parent, occurrence, begin_t, end_t, ended, duration_s,
              entry_bytes, peak_bytes, incremental_peak_bytes, peak_t, exit_bytes, bytes_of:
              "tensors" or "gpu"), or with --marks one per mark (t, thread, source, name,
              live_bytes, bytes_of)
  -h, --help  show this help
)";

const char* const kDiff = R"(usage: memguard diff A B [-n N] [--frames K] [--segments] [--fail-if EXPR]... [--json]

Shows two reports side by side (A, B, the delta B - A and the ratio B/A): the peak of GPU live
bytes, live bytes at exit, OOM events, failed allocations, CUDA bytes freed by garbage
collections per trigger, collections, compiles and phases; then each phase's peak, incremental
peak, entry and exit bytes, with phases matched by name and occurrence (the second "step" of A
with the second "step" of B; "#2" marks the occurrence); then the allocation sites live at each
run's peak that grew and that shrank, biggest change first. Sites are matched by their
symbolized frames (Python function, file and line; native module and function), so the same
code matches across runs. When both runs used memguard's allocator (MEMGUARD_ALLOCATOR=memguard)
the tensor peak and the tensors live at exit are compared too, and the sites are those of the
tensor blocks at each run's tensor peak, as `top` shows them.

options:
  -n N             show the N biggest changes of each direction (default 10)
  --frames K       match sites by up to K Python and K native frames (default 6)
  --segments       allocator mode: compare the sites of the allocator's segments at the GPU peak
  --fail-if EXPR   a gate: exit 1 when EXPR holds (see below); give it once per expression
  --json           print one JSON object instead of text (with --fail-if: "fail_if", "failed")
  --sysroot DIR    look up the module files the reports name under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help

--fail-if EXPR: METRIC OP VALUE, OP one of > >= < <=; the diff fails (exit 1, a FAIL line per
expression that holds, after the diff) when B's figure satisfies it:
  +SIZE, -SIZE   the change B - A            peak>+1GiB     live_at_exit>+100MiB
  SIZE           B's own value               peak>40GiB     oom>0
  [+|-]N%        the change relative to A    peak>+5%       gc_freed>10%   (A = 0: any rise is +inf%)
SIZE: a number (fractions allowed) with an optional unit, any case: B, KB, MB, GB, TB (powers of
1000), KiB, MiB, GiB, TiB (powers of 1024); counts take whole numbers. Metrics:
  peak, live_at_exit         GPU live bytes at the peak and at exit (allocator mode: segments)
  tensor_peak, tensor_live_at_exit
                             allocator mode (both runs): the tensor blocks
  gc_freed                   CUDA bytes freed by all garbage collections
  oom                        OOM events (failed allocations out of memory, allocator OOM events)
  failed_allocations, collections, compiles
                             counts
  phase[NAME].peak, phase[NAME].incremental_peak
                             the largest of the phases named NAME (bytes as the phases above)
A metric one run cannot give (a tensor figure without allocator mode, a phase it lacks) is an error
(exit 2). Quote the expression in a shell: --fail-if 'peak>+5%'.
)";

const char* const kCheck =
    R"(usage: memguard check FILE [--max-peak SIZE] [--max-tensor-peak SIZE] [--max-live-at-exit SIZE]
                      [--max-tensor-live-at-exit SIZE] [--max-gc-freed SIZE] [--no-hazards] [--no-oom]
                      [--json]

A gate for CI: checks a report against limits. Exit status 1 with one FAIL line per limit the run
exceeded (a peak or the memory at exit with its largest sites), 0 with one line saying what was
checked and passed. A limit is the most allowed: a peak of exactly --max-peak passes. The figures
are those of `memguard summary` and `memguard cycles`:
  --max-peak SIZE      the peak of GPU live bytes (summary's "Peak GPU"; in allocator mode the
                       allocator's segments: torch.cuda.max_memory_reserved())
  --max-tensor-peak SIZE
                       allocator mode (MEMGUARD_ALLOCATOR=memguard): the peak of the tensor blocks
                       (torch.cuda.max_memory_allocated()); an error for a run without it
  --max-live-at-exit SIZE
                       GPU live bytes at exit (in allocator mode the segments still held)
  --max-tensor-live-at-exit SIZE
                       allocator mode: the tensor blocks live at exit
  --max-gc-freed SIZE  CUDA bytes freed by all garbage collections (cycles' totals summed; memory
                       held by reference cycles until a collection freed it)
  --no-hazards         fail on any capture hazard (as `memguard hazards` lists them)
  --no-oom             fail on any out-of-memory event: a failed allocation out of memory, or in
                       allocator mode an allocator OOM event
  --json               print one JSON object (file, passed, limits, measured, violations)
  --sysroot DIR        look up the module files the report names under DIR instead of /
  --debug-dir DIR      look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help           show this help
SIZE: a number (fractions allowed, rounded down to a byte) with an optional unit, any case, with
or without a space: B, KB, MB, GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024);
e.g. 2GiB, "1.5 GB", 4096. A limit given twice keeps the last. At least one limit is needed.
)";

const char* const kMerge = R"(usage: memguard merge [DIR] [--run ID] [-n N] [--frames K] [--json]
       memguard merge FILE... | --template TEMPLATE [-n N] [--frames K] [--json]

One row per report of a distributed job (one process per rank): its rank (the report's
I rank, else its position), peak GPU live bytes and when, in allocator mode the tensor peak
(torch.cuda.max_memory_allocated()), live bytes at exit, OOM events (in
allocator mode memguard's allocator's included; --json gives oom_events and allocator_oom_events
apart), CUDA bytes freed by garbage collections, the file, and the largest allocation site at its
peak (in allocator mode of the tensor blocks at the tensor peak, as `memguard top` gives it;
--json: top_site.bytes_of "tensors", else "gpu"); then the maximum and the sum over the ranks
(a sum stops at 2^64 - 1 rather than wrap).

Then, with 3 ranks or more, the outlier ranks: for the peak (tensor bytes in allocator mode, else
GPU bytes), each category at the peak and each site at the peak, the median over the ranks and
the median absolute deviation (MAD); a rank is an outlier where a figure is further from the
median than 5 x 1.4826 x MAD, 20% of the median and 256 MiB (sites: above the median only). Each
outlier rank is named with what diverged, e.g.
  rank 7: nccl 8.8 GiB against a median of 1.2 GiB; site ncclCuMemAlloc ... against ...
(docs/rank-summary.md, "Outlier ranks").

A FILE.summary.json (the rank summary that `memguard run` and `memguard summarize` write) stands
for its report: it is read instead of the report when it is current (made of a report of the
report's present size) and --frames is the default; a FILE ending in .summary.json is a summary
itself. --json: from_summary says which ranks were read from summaries.

Without FILE, or with a directory: the reports of one run in the current directory (or DIR),
found by the run id in their headers (format 1.7: `memguard run` gives every process of a run
one, and torchrun's workers have TORCHELASTIC_RUN_ID): the most recent run's (the run whose
latest report started last), or the run --run names; the first line says which run and how many
reports. Reports without a run id are not guessed at: name their files, or give --template.

options:
  --run ID      the reports of the run ID (as `memguard run` prints it), not the most recent run
  --template T  find the reports with the MEMGUARD_OUTPUT template of the run: %r is the rank
                (0, 1, ... while a file matches), %p and %h (pid, host) match anything, %% is a
                percent sign; e.g. --template 'run.%r.%p.mgr'
  --frames K    describe the top site by up to K frames (default 6)
  --json        print one JSON object instead of text (ranks, max, sum, outliers)
  --sysroot DIR look up the module files the reports name under DIR instead of /
  --debug-dir DIR
                look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help    show this help
)";

// What write_output_file (output.cpp) does with -o, for plot and export.
const char* const kWhereOutputGoes = R"(
Where -o writes: -o - writes to standard output (the "wrote" line then goes to stderr), and so
does a path naming the file standard output is open on (/dev/stdout). An existing character
device or FIFO of yours or of root (/dev/null, a named pipe) is written in place, never
replaced. Anything else is a regular file: written under a random temporary name next to it
(created exclusively, never through a symbolic link, mode 0640 less the umask) and renamed over
it, so a failed write leaves it as it was; a symbolic link at the name is replaced, not
followed. Refused: a directory, socket or block device, another user's device or FIFO, and a
symbolic link to anything but a regular file or a standard stream.
)";

const char* const kPlot = R"(usage: memguard plot FILE -o OUT.svg|OUT.html|- [--format svg|html] [--frames K]

Draws GPU memory over time: GPU live bytes (filled), and, when the driver's virtual memory calls
were used (expandable segments), the mapped bytes and the reserved address space; in allocator
mode the tensor bytes (a line: torch.cuda.memory_allocated()) over the allocator's segments, and
its out-of-memory events among the OOM marks; the phases as
labelled spans by nesting depth above the chart (the outermost ones shaded behind it), stream
capture windows, memguard's compile-garbage collections (red lines, with the CUDA bytes they
freed) and other collections (dashed), compiles (triangles on the time axis), OOM events (red
crosses), and the peak with its time, its largest allocation site and the phase it fell in (in
allocator mode the tensor peak and the largest site of the tensor blocks then, as `memguard top`
gives them; the segments' peak is in the subtitle).
An .html file embeds the SVG; in a browser every mark shows its figures on hover.

options:
  -o FILE          the picture to write: a name ending in .svg or .html, which says the format,
                   or '-' (standard output), a character device or a FIFO, written as SVG
                   unless --format says html (see below)
  --format svg|html
                   the format, for a name that does not end in .svg or .html
  --frames K       describe the peak's site by up to K frames (default 6)
  --sysroot DIR    look up the module files the report names under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help
)";

const char* const kExport =
    R"(usage: memguard export --memory-viz|--perfetto|--jsonl|--text|--binary FILE -o OUT [--frames K]

--memory-viz writes a memory snapshot in the format of torch.cuda.memory._snapshot() (a pickle,
protocol 4, plain types only) that https://pytorch.org/memory_viz and torch.cuda._memory_viz
open. Each GPU block memguard recorded is a segment holding one block; the device traces have a
segment_alloc and an alloc for each allocation and a free_requested, free_completed and
segment_free for each free, with the allocation's native and Python frames; the segments are
the blocks live at the end. Memory mapped through the driver (cuMemMap of a handle on a device,
as with PyTorch's expandable segments) is exported the same way, one expandable segment per
mapping, with the stack of the handle's cuMemCreate. Pinned host memory, failed allocations and
reserved address space are not exported. In allocator mode (MEMGUARD_ALLOCATOR=memguard) the
segments are the allocator's and the allocations in them are the tensor blocks, each with its
size, requested size and frames, as in PyTorch's own snapshot.

--perfetto writes a Chrome trace (JSON) for https://ui.perfetto.dev: counters of GPU live bytes
(and mapped and reserved bytes; in allocator mode the tensor bytes), the phases as slices on
their threads (NVTX start/end ranges and stream captures as async slices), garbage collections
as slices on a track of their own, and compiles and marks as instants.

--jsonl writes JSON lines for a query engine (DuckDB, Spark, a warehouse): one object per line,
its "record" saying what it is: "summary" (the rank summary), "site" (each site at the peak),
"phase" (each phase) and "step" (each step); every line has run_id, rank, host, pid and report,
so that the exports of many ranks read as one table (docs/fleet-export.md: the schema and
example queries).

--text writes the report itself as text, a line per record (docs/report-format.md), whichever
encoding it was recorded in: for people, grep and scripts. --binary writes it in the compact
binary encoding (the library's default, MEMGUARD_REPORT_ENCODING). Both keep every record this
memguard knows, with the same values: every command reads either and answers the same.

options:
  -o FILE          the file to write, '-' for standard output, or a character device or a FIFO
                   (see below)
  --frames K       export up to K native and K Python frames per stack (default: all, up to 256;
                   --jsonl: 6)
  --sysroot DIR    look up the module files the report names under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help
)";

const char* const kRun = R"(usage: memguard run [OPTIONS] [--] CMD [ARGS...]

Runs CMD (looked up in PATH) with libmemguard.so preloaded: LD_PRELOAD gets the library first,
any value it had kept after it. Every process of the run inherits it (torchrun ranks,
multiprocessing workers started by spawn or fork, DataLoader workers, subprocesses) and writes
its own report when it allocates CUDA memory. When CMD ends, memguard lists the reports the run
wrote (to stderr) with the command that reads them (memguard top FILE for one, memguard merge for
several), or says that none was written, and exits with CMD's exit status (128+N when signal N
ended it; 127 when CMD is not found, 126 when it cannot be run).

A signal sent to memguard (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2) is passed on to
CMD; one from the terminal (Ctrl-C, Ctrl-\, hang-up) already reaches CMD, which runs in the same
process group, and is not sent twice. memguard waits for CMD either way.

The reports of one run share a run id (MEMGUARD_RUN_ID: a fresh one unless it is set), and in a
process with RANK or LOCAL_RANK set (torchrun's workers) the default report name carries the
rank: memguard.<exe>.rank<R>.<pid>.mgr. After CMD ends, memguard writes each report's rank
summary beside it, REPORT.summary.json (memguard help summarize), which `memguard merge` reads
instead of the report.

options (each sets the library's variable, which it overrides; the variables work too):
  --library PATH          the library to preload (default: ../lib/libmemguard.so next to the
                          directory of the memguard program)
  --output TEMPLATE       MEMGUARD_OUTPUT: the report's path, %p pid, %h host, %r rank, %% a
                          percent sign (a directory, or a template ending in /: the default name
                          in it)
  --allocator MODE        MEMGUARD_ALLOCATOR: native (PyTorch's allocator, the default) or
                          memguard (memguard allocates PyTorch's CUDA tensors)
  --report-encoding ENC   MEMGUARD_REPORT_ENCODING: binary (compact records, the default) or
                          text (a line per record)
  --max-report-size SIZE  MEMGUARD_MAX_REPORT_SIZE: keep the report's files under SIZE (2GiB,
                          500MB; at least 1MiB; 0: no limit, the default): the allocations and
                          frees go to parts beside the report, the oldest deleted at the limit,
                          folded first into figures by `memguard compact --follow`, which the
                          library starts (this program: MEMGUARD_CLI)
  --no-fold               MEMGUARD_FOLD=0: no follower; the parts the limit has no room for are
                          deleted unfolded (--fold: 1, the default)
  --stack-depth N         MEMGUARD_STACK_DEPTH: native frames kept per stack, 0 to 256 (0: none)
  --no-python-stacks      MEMGUARD_PYTHON_STACKS=0 (--python-stacks: 1, the default)
  --native-below-python   MEMGUARD_NATIVE_BELOW_PYTHON=1: keep the interpreter's native frames
  --no-compile-gc         MEMGUARD_COLLECT_COMPILE_GARBAGE=0: no collection after torch.compile
                          (--compile-gc: 1, the default)
  --no-compile-window     MEMGUARD_COMPILE_WINDOW=0 (--compile-window: 1, the default)
  --no-steps              MEMGUARD_STEPS=0: no steps from optimizer hooks, no step moments
                          (--steps: 1, the default)
  --no-explain-oom        MEMGUARD_EXPLAIN_OOM=0: no OOM observer, no OOM moments
                          (--explain-oom: 1, the default)
  --no-recompute-gc       MEMGUARD_COLLECT_RECOMPUTE_GARBAGE=0: no collection after a recomputed
                          backward (--recompute-gc: 1, the default)
  --recompute-functions NAMES
                          MEMGUARD_RECOMPUTE_FUNCTIONS: more autograd.Function classes whose
                          backward recomputes (Name or pkg.mod.Qual, comma-separated)
  --gc-every-steps N      MEMGUARD_GC_EVERY_STEPS: a collection after every N-th step (0: off)
  --gc-generation G       MEMGUARD_GC_GENERATION: its generation, 0, 1 or 2 (default 2)
  --gc-budget F           MEMGUARD_GC_BUDGET: the fraction of wall time memguard's collections
                          may take (default 0.01)
  --explain-cycles WHICH  MEMGUARD_EXPLAIN_CYCLES: 1 (memguard's collections, the default), all
                          (and the program's gc.collect()) or 0
  --nvtx, --no-nvtx       MEMGUARD_NVTX=1 or 0: NVTX ranges as phases (default on)
  --log-level LEVEL       MEMGUARD_LOG_LEVEL: trace, debug, info, warn (default), error,
                          critical or off
  --run-id ID             MEMGUARD_RUN_ID: the run's id (default: a fresh one, unless set)
  --no-summary            write no rank summaries after the run (reading a long run's reports
                          takes time)
  -h, --help              show this help

A bad value is refused before anything runs, in the words the library would log. Options come
before CMD; "--" ends them, for a CMD that starts with "-".
)";

const char* const kSummarize = R"(usage: memguard summarize FILE...

Writes the rank summary of each report beside it: FILE.summary.json, replacing one that is
there (through a temporary file renamed into place). `memguard run` writes them by itself when
its command ends; summarize is for reports made without it (a job preloaded by hand or through
`memguard env`, reports copied from elsewhere). A summary is a JSON object of at most 64 KiB
whatever the run's length: the process (rank, host, pid, devices, run id), the peak and when
(tensor bytes in allocator mode, else GPU bytes), the categories and the largest sites at the
peak (frames, the user's own line), OOMs, collections and the CUDA bytes they freed, hazards,
and the steps (count, durations, peaks, growth), as summary, top, oom, cycles and steps compute
them. `memguard merge` reads a current summary instead of its report. The schema, versioned, is
in docs/rank-summary.md. A report that cannot be read is an error; the others are still
summarized (exit 2 when any failed).

options:
  --sysroot DIR    look up the module files the reports name under DIR instead of /
  --debug-dir DIR  look up separate debug files by build-id: DIR/.build-id/xx/rest.debug
  -h, --help       show this help
)";

const char* const kCompact = R"(usage: memguard compact FILE [--through N | --follow]

Folds the detail parts of a bounded report (MEMGUARD_MAX_REPORT_SIZE: FILE.part-000001, ...)
into figures: reads the report up to where part N + 1 begins and writes what the readers hold
there (the run's counts, its peaks and the live set at them, each phase's and step's figures, the
categories at the step peaks, OOMs and collections) to FILE.fold-N (through a temporary file
renamed into place), removing older folds. A reader that finds the fold reads it instead of parts
1 to N, so the writer may delete them and `summary`, `top --at peak`, `top --by category`,
`phases`, `steps`, `oom`, `cycles`, `diff` and `merge` still answer for the whole run; `top --at
T` and `plot` before the fold's point, `export` and `graphs` answer from the detail there is
(docs/bounded-reports.md, "What a fold does not keep"). Folds go on from the newest fold there.

With --follow it goes on while the run writes the report: every few hundred milliseconds it folds
through part N once part N + 2 is there (part N + 1 is then whole, and the report's spine holds
every record up to its start), and it stops after a last fold once the report is complete (its end
record: through the newest part but one) or its writer, the header's I pid, is gone. A bounded run
starts this by itself at its first new part (libmemguard.so runs `memguard compact --follow
--detach FILE`; MEMGUARD_FOLD=0 turns it off): the writer deletes the oldest part when the limit
needs room, counting the fold file in the limit, and its `f` record says whether the part was
folded then. A fold that fails leaves the one before in place; the follower tries again at the next
look and gives up, with one line on stderr and exit status 2, when it fails three times running or
at the end.

options:
  --through N  fold parts 1 to N (default: every part but the newest, which the writer may still
               be writing); part N + 1 must be there
  --follow     fold as the run writes the report, until it is complete or its writer is gone
  --detach     with --follow: go on in the background (a session of its own), this process exiting
               at once
  -h, --help   show this help
)";

const char* const kEnv = R"help(usage: memguard env [OPTIONS] [--json]

Prints the environment that `memguard run` would give a command: LD_PRELOAD (libmemguard.so
first), MEMGUARD_RUN_ID (kept when set, else a fresh one), and the MEMGUARD_* variables of the
options and of this environment. For a launcher that starts its workers with an environment of
its own, dropping LD_PRELOAD: pass these variables on to them. Their reports are not listed at
the end as with `run`, but they share the run id, so `memguard merge` finds them.

Output: one line per variable, `export NAME=VALUE`, the value quoted for a POSIX shell when it
needs it (eval "$(memguard env)"); with --json one JSON object of strings, {"LD_PRELOAD": ...}.

options: those of `memguard run` (memguard help run), and
  --json      print one JSON object instead of export lines
  -h, --help  show this help
)help";

}  // namespace

std::string help_text(const std::string& topic) {
    if (topic == "run") return kRun;
    if (topic == "env") return kEnv;
    if (topic == "phases") return kPhases;
    if (topic == "steps") return kSteps;
    if (topic == "oom") return kOom;
    if (topic == "diff") return kDiff;
    if (topic == "merge") return kMerge;
    if (topic == "plot") return std::string(kPlot) + kWhereOutputGoes;
    if (topic == "export") return std::string(kExport) + kWhereOutputGoes;
    if (topic == "summary") return kSummary;
    if (topic == "summarize") return kSummarize;
    if (topic == "compact") return kCompact;
    if (topic == "top") return kTop;
    if (topic == "graphs") return kGraphs;
    if (topic == "hazards") return kHazards;
    if (topic == "cycles") return kCycles;
    if (topic == "check") return kCheck;
    return kGeneral;
}

}  // namespace memguard::cli
