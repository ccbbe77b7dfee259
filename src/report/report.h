// Reading a memguard report (docs/report-format.md) into memory, and the figures derived from it.
// Used by the memguard CLI and by the tests; never linked into libmemguard.so.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "format/vocabulary.h"

namespace memguard::report {

/// Thrown for a file that cannot be read: missing, wrong magic or version, corrupt, truncated.
/// what() is one line meant for the user, naming the file and, where known, the line.
class ReportError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The vocabulary is the report format's (format/vocabulary.h), shared with the writer.
using format::BlockState;
using format::capture_mode_name;
using format::capture_phase_name;
using format::CaptureMode;
using format::CapturePhase;
using format::Category;
using format::GarbageKind;
using format::GcTrigger;
using format::HeldHow;
using format::is_gpu;
using format::Kind;
using format::kind_name;
using format::kTriggerCount;
using format::MomentReason;
using format::OomSource;
using format::phase_source_name;
using format::PhaseSource;
using format::StepSource;
using format::trigger_name;

struct Module {
    uint32_t id = 0;
    uint64_t lo = 0, hi = 0, bias = 0;
    std::string build_id;  // hex, empty when absent
    std::string path;
};

struct Stack {
    uint32_t id = 0;
    std::vector<uint64_t> ips;  // innermost first
    size_t modules_known = 0;   // how many modules (M records) preceded this stack's S record
};

struct Block {
    uint64_t addr = 0, size = 0;
    Kind kind = Kind::Device;
    std::string api;
    int device = 0;
    std::optional<uint64_t> stream;
    uint32_t stack_id = 0;
    uint64_t tid = 0;
    int64_t t_alloc = 0;
    std::optional<int64_t> t_free;  // empty while live
    std::string free_api;
    uint64_t free_tid = 0;         // the thread of its F record; 0 while live or when freed implicitly
    uint32_t capture_id = 0;       // the capture owning the block (minor 1); 0: none (ordinary memory)
    uint32_t python_stack_id = 0;  // the allocating thread's Python stack (minor 2); 0: none
    size_t order = 0;              // its A record's rank among all A records (its index in Report::blocks,
                                   // except in a streamed report, report/stream.h)
};

struct FailedAlloc {
    int64_t t = 0;
    uint64_t tid = 0, size = 0;
    Kind kind = Kind::Device;
    std::string api;
    int device = 0;
    std::optional<uint64_t> stream;
    uint32_t stack_id = 0;
    int error = 0;
    uint64_t live_bytes = 0;
    uint32_t python_stack_id = 0;  // minor 2; 0: none
    bool is_oom() const { return error == 2; }
};

// --- minor 1: stream capture, CUDA graphs, hazards ---------------------------------------------

/// One stream capture: its C record and, once it ended, its c record.
struct Capture {
    uint32_t id = 0;
    uint64_t stream = 0;
    CaptureMode mode = CaptureMode::Global;
    uint64_t tid = 0;  // the thread that began it
    int64_t t_begin = 0;
    std::optional<uint64_t> target_graph;  // the graph of cudaStreamBeginCaptureToGraph
    std::optional<int64_t> t_end;          // empty: still capturing when the report ends
    uint64_t end_tid = 0;
    int end_error = 0;                       // what cudaStreamEndCapture returned (0 success)
    std::optional<uint64_t> graph;           // the captured graph; empty when none (failed or not ended)
    std::optional<int64_t> t_graph_destroy;  // the K record of that graph; empty while it lives
};

/// One graph exec: its G record, its launches (L) and its destruction (D). Exec handles can be
/// reused after a D: L and D records refer to the most recent G with their handle.
struct GraphExec {
    uint64_t exec = 0;
    uint64_t graph = 0;
    uint32_t capture_id = 0;  // the capture its graph came from; 0 when memguard saw none
    uint64_t tid = 0;
    int64_t t_instantiate = 0;
    std::optional<int64_t> t_destroy;  // empty while alive
    uint64_t launches = 0;
};

/// A K record. Graph handles can be reused too: a K refers to the most recent captured graph
/// with its handle that is still alive.
struct GraphDestroy {
    int64_t t = 0;
    uint64_t tid = 0;
    uint64_t graph = 0;
    uint32_t capture_id = 0;  // 0: not a graph memguard saw a capture end in
};

/// W unsafe_call: a potentially unsafe call made while capture-mode rules forbid it.
struct UnsafeCall {
    int64_t t = 0;
    uint64_t tid = 0;
    std::string api;
    uint32_t capture_id = 0;
    CaptureMode capture_mode = CaptureMode::Global;
    CaptureMode thread_mode = CaptureMode::Global;
};

/// W free_live_graph: a capture's block freed while an exec from that capture's graph lives.
struct FreeWhileGraphAlive {
    int64_t t = 0;
    uint64_t tid = 0;
    uint64_t addr = 0, size = 0;
    uint32_t capture_id = 0;
    uint64_t exec = 0;
    std::optional<size_t> block;       // index into Report::blocks of the block that F just freed
    std::optional<size_t> exec_index;  // index into Report::execs (the most recent G of `exec`)
};

/// W warmup_retention: one site's blocks, allocated since `since` and owned by no capture,
/// still live at a capture boundary.
struct WarmupRetention {
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t capture_id = 0;
    CapturePhase phase = CapturePhase::Begin;
    int64_t since = 0;
    uint32_t stack_id = 0;
    uint64_t blocks = 0, bytes = 0;
};

struct Hazards {
    std::vector<UnsafeCall> unsafe_calls;
    std::vector<FreeWhileGraphAlive> frees_while_graph_alive;
    std::vector<WarmupRetention> warmup_retention;  // one per W record (per site), in file order
};

// --- minor 2: Python ----------------------------------------------------------------------------

struct PythonFrame {
    uint32_t id = 0;
    int line = 0;  // as recorded; <= 0 when Python did not know it
    std::string function;
    std::string filename;
};

struct PythonStack {
    uint32_t id = 0;
    std::vector<uint32_t> frames;  // frame ids, innermost first
};

/// e (minor 8): a directory of the interpreter's own code.
struct PythonPath {
    format::PathKind kind = format::PathKind::Stdlib;
    std::string path;
};

/// X: a torch.compile (dynamo) compile finished.
struct Compile {
    int64_t t = 0;
    uint64_t tid = 0;
    std::string id;  // dynamo's compile id ("0/1"), or "?"
};

/// Y: a garbage collection ended at `t`.
struct Collection {
    int64_t t = 0;
    uint64_t tid = 0;
    GcTrigger trigger = GcTrigger::Automatic;
    int generation = 0;
    int64_t duration_ns = 0;
    int64_t collected = 0;
    int64_t uncollectable = 0;
    std::optional<int64_t> cuda_bytes_freed;  // empty when CUDA was not in use; may be negative
    std::vector<std::string> compile_ids;     // memguard collections: the compiles that marked the thread
    std::optional<int64_t> mark_age_ns;       // memguard collections: first mark to the collection's start
    // minor 9: memguard's collections (format::is_memguards(trigger))
    std::optional<uint64_t> skipped;    // chances of its trigger the budget skipped since the previous one
    std::optional<size_t> explanation;  // index into Report::explanations
};

// --- minor 3: driver virtual memory management -------------------------------------------------

/// V (cuMemAddressReserve) and, once released, its v (cuMemAddressFree).
struct Reservation {
    uint64_t va = 0, size = 0;
    uint64_t tid = 0;
    int64_t t_reserve = 0;
    std::optional<int64_t> t_free;  // empty while reserved
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
};

/// N (cuMemCreate) and its n (cuMemRelease). Handle values may be reused after the memory is gone:
/// n and Q records refer to the most recent N of their handle.
struct PhysicalHandle {
    uint64_t handle = 0, size = 0;
    int device = -1;  // -1: not located on a device
    uint64_t tid = 0;
    int64_t t_create = 0;
    std::optional<int64_t> t_release;  // the n record; empty while not released
    /// When the memory was returned: at the n when nothing mapped it then, else at the q that
    /// removed its last mapping. Empty while the memory exists (at the end: not released, or mapped).
    std::optional<int64_t> t_gone;
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    uint32_t capture_id = 0;
    uint64_t maps = 0;  // Q records that mapped it
};

/// m (cuMemImportFromShareableHandle, minor 11) and the n that released it: a handle to memory
/// another allocation owns (another process's export). Its mappings are this process's, its
/// memory is not: it counts in no physical or GPU figure.
struct ImportedHandle {
    uint64_t handle = 0;
    uint64_t tid = 0;
    int64_t t_import = 0;
    std::optional<int64_t> t_release;  // the n record; empty while not released
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    uint64_t maps = 0;  // Q records that mapped it
};

/// Q (cuMemMap) and the q (cuMemUnmap) that removed it.
struct Mapping {
    uint64_t va = 0, size = 0, offset = 0;
    uint64_t handle_value = 0;
    std::optional<size_t> handle;  // index into Report::handles; empty when no N created the handle
    std::optional<size_t> import;  // index into Report::imports when an m made the handle
    uint64_t tid = 0;
    int64_t t_map = 0;
    std::optional<int64_t> t_unmap;  // empty while mapped
};

// --- minor 4: phases and marks -------------------------------------------------------------------

/// B ... b: a named span. Positions are prefixes of Report::events, so the memory at its begin and
/// end is the state after that many events, whatever kinds of events there are.
struct Phase {
    uint32_t id = 0;
    PhaseSource source = PhaseSource::Api;
    std::string name;
    uint64_t tid = 0;
    int64_t t_begin = 0;
    size_t events_at_begin = 0;    // events before the B record
    std::optional<int64_t> t_end;  // empty: never ended (no b record)
    uint64_t end_tid = 0;
    size_t events_at_end = 0;             // events before the b record; Report::events.size() when not ended
    size_t begin_line = 0, end_line = 0;  // line numbers of B and b (0: no b), to order them exactly
};

/// J: an instant event.
struct Mark {
    int64_t t = 0;
    uint64_t tid = 0;
    PhaseSource source = PhaseSource::Api;
    std::string name;
    size_t events_before = 0;  // events before the J record
};

// --- minor 5: allocator mode --------------------------------------------------------------------

/// T: a block memguard's allocator handed to PyTorch, and its t once PyTorch returned it. Addresses
/// are reused: a t refers to the most recent live T at its address.
struct Tensor {
    uint64_t addr = 0, size = 0, requested = 0;
    int device = 0;
    uint64_t stream = 0;
    uint64_t tid = 0;
    int64_t t_alloc = 0;
    std::optional<int64_t> t_free;  // empty while live
    uint64_t free_tid = 0;
    bool freed_in_gc = false;  // the t record's gc flag
    /// The Y that ended the collection during which it was freed (index into Report::collections):
    /// the first Y after its t on the freeing thread. Empty when not freed in a collection or no Y came.
    std::optional<size_t> collection;
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    uint32_t capture_id = 0;
    std::string pool;  // "first.second", or "-" for the default pools
    size_t order = 0;  // its T record's rank among all T records (as Block::order)
};

/// o: one site's live blocks at an O.
struct OomSite {
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    uint64_t blocks = 0, bytes = 0;
};

/// O: an allocation memguard's allocator could not satisfy, and its o records.
struct TensorOom {
    int64_t t = 0;
    uint64_t tid = 0;
    int device = 0;
    uint64_t requested = 0, rounded = 0, allocated = 0, reserved = 0, limit = 0;
    uint32_t stack_id = 0;
    uint32_t python_stack_id = 0;
    std::string rescued;         // none, cache or gc
    std::vector<OomSite> sites;  // in file order (largest first)
};

// --- minor 8: steps, moments (categories), out-of-memory context ---------------------------------

/// s: a training step ended. Step `index` spans from the previous step's end (the start of the
/// run for the first) to `t`.
struct Step {
    uint32_t index = 0;  // 1, 2, ... as the process counted them
    StepSource source = StepSource::Optimizer;
    std::string name;  // the optimizer's class, or memguard.step()'s argument
    int64_t t = 0;
    uint64_t tid = 0;
    size_t events_before = 0;  // events before the s record: the step ends after them
};

/// g: a tensor storage live at a moment.
struct TensorTag {
    int device = 0;
    uint64_t addr = 0, size = 0;
    Category category = Category::OtherTensor;
    std::string label;  // empty: none
};

/// d: a block of PyTorch's caching allocator at a moment.
struct AllocatorBlock {
    int device = 0;
    uint64_t addr = 0, size = 0, requested = 0;
    BlockState state = BlockState::Allocated;
    uint64_t segment = 0;
    std::string pool;  // "first.second", or "-"
};

/// h ... k: what the Python hook saw at one instant (the live state after `events_before` events).
struct Moment {
    uint32_t id = 0;
    int64_t t = 0;
    uint64_t tid = 0;
    MomentReason reason = MomentReason::Step;
    uint32_t step = 0;  // steps completed before it
    size_t events_before = 0;
    std::vector<TensorTag> tags;         // its g records, in file order
    std::vector<AllocatorBlock> blocks;  // its d records, in file order
    bool ended = false;                  // a k record came
    int64_t t_end = 0;                   // the k record's time
    bool complete = false;               // the k record's flag: false when the lists are partial
};

/// x: an out-of-memory and its context.
struct OomContext {
    int64_t t = 0;
    uint64_t tid = 0;
    int device = 0;
    OomSource source = OomSource::Torch;
    std::optional<uint64_t> requested;
    uint64_t rounded = 0;
    std::optional<uint64_t> limit, device_free, device_total, allocated, reserved;
    uint32_t stack_id = 0, python_stack_id = 0;
    std::optional<size_t> moment;  // index into Report::moments; empty: none or unknown
    bool compile_pending = false;
    bool capturing = false;
    size_t events_before = 0;
};

// --- minor 9: what a collection's garbage held --------------------------------------------------

/// u: a group of the garbage's objects.
struct GarbageGroup {
    GarbageKind kind = GarbageKind::Type;
    uint64_t count = 0;
    uint64_t cuda_bytes = 0;  // of the listed storages, those an object of the group held (their holder)
    std::string name;
};

/// y: a CUDA tensor storage of the garbage, and where it was allocated: the live block or tensor
/// that held `addr` when the j record was read (the tensor's own allocation in allocator mode; the
/// segment's in interposition mode, where PyTorch's cache hides the tensor's). 0: not found.
struct GarbageTensor {
    int device = 0;
    uint64_t addr = 0, size = 0;
    HeldHow how = HeldHow::Tensor;
    Category category = Category::OtherTensor;
    std::string holder;  // saved: the context's class; empty: none
    uint32_t stack_id = 0, python_stack_id = 0;
    bool site_is_segment = false;  // the site is the segment's (interposition mode), not the tensor's
};

/// r: one step of a referrer chain.
struct ChainLink {
    std::string object;
    std::string edge;  // empty on the last step
};

/// j ... Y: what one of memguard's collections found in its garbage.
struct Explanation {
    uint32_t id = 0;
    int64_t t = 0;
    uint64_t tid = 0;
    uint64_t objects = 0, tensors = 0, cuda_bytes = 0;
    int64_t analysis_ns = 0;
    bool complete = false;
    std::vector<GarbageGroup> groups;     // u records, in file order
    std::vector<GarbageTensor> storages;  // y records, in file order (largest first)
    /// r records by the storage address they lead to, steps in order (holder first).
    std::map<uint64_t, std::vector<ChainLink>> chains;
    std::optional<size_t> collection;  // index into Report::collections of the Y that named it
};

/// One change of the memory state, in file order. `block` indexes the vector of its record type:
/// Report::blocks (Alloc, Free, Restore), Report::reservations (Reserve, AddressFree),
/// Report::handles (Create, Release), Report::mappings (Map, Unmap), Report::tensors (TensorAlloc,
/// TensorFree). Walk them with LevelWalk
/// (report/levels.h), the one definition of live bytes.
struct Event {
    enum Type { Alloc, Free, Restore, Reserve, AddressFree, Create, Release, Map, Unmap, TensorAlloc, TensorFree } type;
    size_t block;
    int64_t t;
    bool is_block() const { return type == Alloc || type == Free || type == Restore; }
};

struct Report {
    std::string path;
    /// Read by the streaming reader (report/stream.h): no events; blocks and tensors are the live ones.
    bool streamed = false;
    /// Streamed: backward_sites could not be computed exactly (allocations inside backward() calls
    /// came too far out of time order: report/user_frame.h, BackwardSweep); load_report can.
    bool backward_pending = false;
    int version = 0;
    std::map<std::string, std::string> info;
    std::vector<Module> modules;
    std::unordered_map<uint32_t, Stack> stacks;
    std::vector<Block> blocks;  // in order of allocation
    std::vector<FailedAlloc> failures;
    std::vector<Event> events;          // every kind of Event, in file order
    bool complete = false;              // an end record (Z) was read
    int64_t end_t = 0;                  // time of Z, else of the last record or heartbeat
    std::vector<std::string> warnings;  // non-fatal remarks (e.g. "no end record: process killed?")

    /// `I format_minor` (0 when absent). It decides which records and trailing fields the reader
    /// knows: the additions of a later minor are read only from a file that declares it, so a
    /// file of minor 0 reads A's capture and Python stack ids as 0 and ignores C, ..., Y records.
    int format_minor = 0;
    // minor 1
    std::vector<Capture> captures;  // in order of C records
    std::vector<GraphExec> execs;   // in order of G records
    std::vector<GraphDestroy> graph_destroys;
    Hazards hazards;
    // minor 2
    std::unordered_map<uint32_t, PythonFrame> python_frames;
    std::unordered_map<uint32_t, PythonStack> python_stacks;
    std::vector<Compile> compiles;
    std::vector<Collection> collections;
    // minor 3
    std::vector<Reservation> reservations;  // in order of V records
    std::vector<PhysicalHandle> handles;    // in order of N records
    std::vector<Mapping> mappings;          // in order of Q records
    uint64_t unmaps = 0;                    // q records that removed at least one mapping
    // minor 11
    std::vector<ImportedHandle> imports;  // in order of m records
    // minor 4
    std::vector<Phase> phases;  // in order of B records
    std::vector<Mark> marks;    // in order of J records
    // minor 5
    std::vector<Tensor> tensors;  // in order of T records
    uint64_t tensor_records = 0;  // T records read (a streamed report keeps only the live tensors)
    /// The run used memguard's allocator: it has T records (allocator mode).
    bool has_tensors() const { return tensor_records != 0 || !tensors.empty(); }
    std::vector<TensorOom> tensor_ooms;  // in order of O records
    // minor 6
    /// Records the recorded process made but could not keep (host memory ran out), from its U
    /// records: how many, and between which times. 0: none were lost.
    uint64_t lost_records = 0;
    int64_t lost_first_t = 0;
    int64_t lost_last_t = 0;
    // minor 8
    std::vector<Step> steps;               // in order of s records
    std::vector<Moment> moments;           // in order of h records
    std::vector<OomContext> oom_contexts;  // in order of x records
    /// The interpreter's directories from the e records, in file order (duplicates dropped): what
    /// the user-frame rule (report/user_frame.h) tells the user's code from the rest by.
    std::vector<PythonPath> python_paths;
    /// Allocations with no Python stack made on autograd's backward threads, attributed to the
    /// backward() call that ran them (report/user_frame.h: attribute_backward), filled by the
    /// parser: native stack id -> the Python stack of that call (the one that covers the most bytes).
    std::unordered_map<uint32_t, uint32_t> backward_sites;
    // minor 9
    std::vector<Explanation> explanations;  // in order of j records
    /// `I gc_budget`: the fraction of wall time memguard's collections were allowed; empty: not said.
    std::optional<double> gc_budget;
    // minor 10
    /// A bounded report (MEMGUARD_MAX_REPORT_SIZE): a spine whose allocations and frees were read
    /// from its detail parts (docs/bounded-reports.md).
    bool bounded = false;
    /// Its allocations and frees the writer deleted to keep the limit (`f` records), and the time of
    /// the last of them: the detail read starts after it. 0: none.
    uint64_t detail_dropped = 0;
    int64_t detail_dropped_until = 0;
    /// Of the parts deleted, those the writer deleted folded (a fold covered them then: `f`'s
    /// `folded`) that no fold read here covers: counted as dropped (their fold is not beside the
    /// report, or load_report, which reads no fold, read it).
    unsigned detail_fold_missing = 0;
    /// Streamed with a fold (report/fold.h): the allocations and frees before it, which its figures
    /// stand for, and the latest time among them. 0: none.
    uint64_t detail_folded = 0;
    int64_t detail_folded_until = 0;
    /// Streamed, while a fold is to be taken (report/fold.h): the events told so far are the spine's
    /// and the live set the part after the fold carries, not the run's; an observer that counts
    /// positions waits for its fold_in.
    bool fold_pending = false;

    /// The capture with id `id`, or null.
    const Capture* find_capture(uint32_t id) const;
};

/// Bounds on what a report may say (docs/report-format.md, "Bounds"; format/vocabulary.h). A record
/// outside them is refused (ReportError), so that nothing the reader or a command computes from a
/// report needs memory or time in proportion to a field's value, or overflows.
using format::kMaxDevice;
using format::kMaxTimeNs;

/// Reads a whole report. Throws ReportError. A last record cut short (no '\n': a full disk) is left
/// out with a warning, as a killed run's missing end record is; a cut header line is an error.
Report load_report(const std::string& path);
/// Opens the report at `path` for reading as load_report does: not blocking in open(2) (a FIFO that
/// no one writes reads as empty). Null with errno set when it cannot.
std::FILE* open_report(const std::string& path);
/// True for the name of a bounded report's detail part (`<report>.part-<digits>`: docs/report-format.md,
/// minor 10): read with its report, never as a report of its own.
bool is_detail_part(std::string_view path);
/// As load_report, from `file` (open for reading; not closed), which `name` names in messages and
/// Report::path: a pipe's spool, read by the CLI under the pipe's name (tools/memguard/report_input.h).
Report load_report(std::FILE* file, const std::string& name);

/// The major format version this reader understands.
using format::kFormatVersion;

/// Parses a report held in memory; `name` stands for the file in messages. Throws ReportError.
Report parse_report(std::string_view content, const std::string& name);

}  // namespace memguard::report
