// The report reader's parser (docs/report-format.md): lines in, a Report out. The parser core
// (report.cpp) reads the header, dispatches each record by its letter and the file's minor to the
// record table's decoder (format/decode.h), and applies the meta records (I, M, S, H, Z, p, P, U, e);
// each family's records are applied in read_<family>.cpp, as the writer's are written in
// track/records_<family>.cpp. Private to report/.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "format/binary_decode.h"
#include "format/decode.h"
#include "format/records.h"
#include "report/addr_map.h"
#include "report/detail_parts.h"
#include "report/fold.h"
#include "report/report.h"
#include "report/user_frame.h"
#include "report/warnings.h"

namespace memguard::report {

namespace rec = format::rec;

class EventObserver;

/// A set of record ids (stack, Python stack): the writer numbers them from 1, so that below kDense a
/// bitmap holds them; larger ones (a hand-made report) go to a hash set.
class DefinedIds {
public:
    void add(uint32_t id) {
        if (id >= kDense) {
            sparse_.insert(id);
            return;
        }
        if (id >= dense_.size()) dense_.resize(std::max<size_t>(id + 1, dense_.size() * 2), 0);
        dense_[id] = 1;
    }
    bool contains(uint32_t id) const {
        if (id < kDense) return id < dense_.size() && dense_[id] != 0;
        return sparse_.count(id) != 0;
    }

private:
    static constexpr uint32_t kDense = 1u << 24;
    std::vector<char> dense_;
    std::unordered_set<uint32_t> sparse_;
};

/// Turns the lines of one report into a Report. Line 1 is the header; records follow. With an
/// observer it streams (report/stream.h): blocks and tensors are kept in slots while live, and each
/// event goes to the observer instead of Report::events.
class Parser {
public:
    explicit Parser(const std::string& name, EventObserver* observer = nullptr) : observer_(observer) {
        report_.path = name;
        report_.streamed = observer != nullptr;
        if (report_.streamed) backward_.emplace();
    }
    /// False once a streaming observer asked to stop: the reader reads no further line.
    bool wants_more() const { return !stopped_; }

    void line(std::string_view text, size_t line_no);
    /// True once the header said the records are binary frames (format/binary.h): they come
    /// through frame(), each with its offset in the file.
    bool binary() const { return binary_; }
    /// A binary report's record (report/read_binary.cpp).
    void frame(char letter, std::string_view payload, uint64_t offset);
    /// The binary input ends inside the frame at `offset`; the frames before it are kept.
    void partial_frame(uint64_t offset, uint64_t file_size);
    /// A frame at `offset` that cannot be read: refuses the file ("corrupt file?").
    [[noreturn]] void bad_frame(uint64_t offset, const std::string& what);
    /// The input ends inside line `line_no` (no '\n'): a cut header refuses the file; a cut record
    /// is left out with a warning.
    void partial_last_line(std::string_view text, size_t line_no, uint64_t file_size);
    Report finish();

    // Each record, decoded, applied to the report. Meta records (report.cpp):
    void apply(const rec::Info& r);
    void apply(const rec::Module& r);
    void apply(const rec::Stack& r);
    void apply(const rec::Heartbeat& r);
    void apply(const rec::End& r);
    void apply(const rec::PyFrame& r);
    void apply(const rec::PyStack& r);
    void apply(const rec::Lost& r);
    void apply(const rec::PythonPath& r);
    // read_blocks.cpp
    void apply(const rec::Alloc& r);
    void apply(const rec::Free& r);
    void apply(const rec::Restore& r);
    void apply(const rec::Failure& r);
    // read_graphs.cpp
    void apply(const rec::CaptureBegin& r);
    void apply(const rec::CaptureEnd& r);
    void apply(const rec::Instantiate& r);
    void apply(const rec::Launch& r);
    void apply(const rec::ExecDestroy& r);
    void apply(const rec::GraphDestroy& r);
    void apply(const rec::UnsafeCall& r);
    void apply(const rec::FreeLiveGraph& r);
    void apply(const rec::WarmupRetention& r);
    // read_events.cpp
    void apply(const rec::Compile& r);
    void apply(const rec::Collection& r);
    void apply(const rec::PhaseBegin& r);
    void apply(const rec::PhaseEnd& r);
    void apply(const rec::Mark& r);
    // read_vmm.cpp
    void apply(const rec::Reserve& r);
    void apply(const rec::AddressFree& r);
    void apply(const rec::Create& r);
    void apply(const rec::Release& r);
    void apply(const rec::Map& r);
    void apply(const rec::Import& r);
    void apply(const rec::Unmap& r);
    // read_tensors.cpp
    void apply(const rec::TensorAlloc& r);
    void apply(const rec::TensorFree& r);
    void apply(const rec::TensorOom& r);
    void apply(const rec::TensorOomSite& r);
    // read_insight.cpp
    void apply(const rec::Step& r);
    void apply(const rec::MomentBegin& r);
    void apply(const rec::TensorTag& r);
    void apply(const rec::AllocatorBlock& r);
    void apply(const rec::OomContext& r);
    void apply(const rec::MomentEnd& r);
    // cycles (minor 9): report/read_cycles.cpp
    void apply(const rec::Explanation& r);
    void apply(const rec::GarbageGroup& r);
    void apply(const rec::GarbageTensor& r);
    void apply(const rec::ChainStep& r);
    // bounded reports (minor 10): report/read_detail.cpp
    void apply(const rec::DetailAt& r);
    void apply(const rec::DetailDropped& r);
    void apply(const rec::FoldAt& r);
    void apply(const rec::Figure& r);

private:
    [[noreturn]] void fail(const std::string& what) const;
    /// The file being read, for messages: the report, or one of its detail parts.
    const std::string& source() const { return detail_ && detail_->reading ? detail_->parts->path() : report_.path; }
    /// "malformed <type> record: <detail>"
    [[noreturn]] void malformed(const std::string& detail) const;
    void warn(const char* cls, const std::string& what);

    void header(std::string_view text);
    void record();
    /// After a record is decoded: its time counts towards the end time of a killed run.
    void note_time() { note_time(text_decoder_->time()); }
    void note_time(std::optional<int64_t> t);
    /// Where the record being read is: ":<line>" in text, ": record at byte <offset>" in binary.
    std::string where() const;
    /// Field `i` of a text record as written, for a message; `value` in a binary report.
    std::string field_text(size_t i, const std::string& value) const;
    /// Decodes binary record R from the frame's payload and applies it.
    template <class R>
    void read_frame();
    template <char Letter>
    void read_frame_keyed();
    /// Decodes record R from the line's fields and applies it.
    template <class R>
    void read();
    /// A line of a keyed letter (W): its fields up to the key say which record it is.
    template <char Letter>
    void read_keyed();

    void check_stack_ref(uint32_t stack_id, const char* record);
    void check_capture_ref(uint32_t capture_id, const char* record);
    void check_python_stack_ref(uint32_t python_stack_id, const char* record);
    /// The most recent G of `exec` when it is still alive; warns and returns nothing otherwise.
    std::optional<size_t> live_exec(uint64_t exec, const char* record);
    void remove_mapping(std::map<uint64_t, size_t>::iterator it, int64_t t);
    void add_event(Event::Type type, size_t block, int64_t t);
    /// Events so far (Report::events.size() when not streaming): the positions of phases, steps, ...
    size_t event_count() const { return events_; }
    /// Streaming: a slot of Report::blocks (tensors) for a new live item, and its release once its
    /// free was told.
    size_t take_block_slot();
    size_t take_tensor_slot();
    void release_block_slot(size_t slot) { free_block_slots_.push_back(slot); }
    void release_tensor_slot(size_t slot) { free_tensor_slots_.push_back(slot); }
    /// Streaming, at the end: the slots compacted to the live items, in order of their records.
    void compact_slots();
    void warn_frames_outside_modules();

    /// A bounded report (docs/bounded-reports.md): its detail parts, read as the spine's `l`
    /// records ask (report/read_detail.cpp), so that the records of both files come in the order
    /// the run made them.
    struct Detail {
        // Not defaulted: clang cannot default-construct a nested class with member initializers
        // until the enclosing class is complete (std::optional::emplace asks before then).
        Detail() {}
        std::optional<DetailParts> parts;  // once the header is read
        bool reading = false;              // a part's record is being applied
        uint64_t dropped = 0;              // `f`: detail records the writer deleted
        int64_t dropped_until = 0;         // the time of the last of them
        unsigned dropped_parts = 0;
        std::vector<unsigned> folded_parts;  // of them, parts deleted folded (`f` folded 1) that no fold read covers
        /// Streaming: the newest fold beside the report (report/fold.h), taken where the part after it
        /// begins; `extra_next`: its next entry of Fold::extra, `extra_now` the one in effect.
        std::optional<Fold> fold;
        bool fold_chosen = false;  // choose_fold() ran
        bool fold_applied = false;
        size_t extra_next = 0;
        int64_t extra_now = 0;
        /// load_report: the newest fold beside the report (its path and time), for the warnings.
        std::optional<std::pair<std::string, int64_t>> fold_seen;
        /// FoldPoint::extra_events so far, for a fold taken here.
        std::vector<std::pair<uint64_t, int64_t>> extra;
        /// The orders of the blocks and tensors the part being opened carries (those the reader has).
        std::vector<size_t> carried_blocks, carried_tensors;
        /// The fold's part is being opened: its carried blocks and tensors take the fold's orders.
        bool fold_carrying = false;
        size_t carried_block_next = 0, carried_tensor_next = 0;
        std::vector<std::pair<uint64_t, const Block*>> freed;  // FoldPoint::freed, where one is taken
        bool restores_taken = false;                           // fold_restores done
        std::vector<const Block*> uncarried;                   // FoldPoint::uncarried, where one is taken
        std::unordered_set<uint64_t> fold_live;                // the addresses of the fold's `reader.live` blocks
    };
    /// A block (tensor) a part carries that the reader has: its order, for a fold taken where the part
    /// begins (FoldPoint::carried_blocks).
    template <class R>
    void known_carried(const R& r) {
        if (observer_ == nullptr || !detail_) return;
        if constexpr (std::is_same_v<R, rec::Alloc>) {
            const AtAddr* at = blocks_at_.find(r.addr);
            detail_->carried_blocks.push_back(at != nullptr && at->live ? report_.blocks[at->block].order : SIZE_MAX);
        } else if constexpr (std::is_same_v<R, rec::TensorAlloc>) {
            const size_t* at = live_tensors_.find(r.addr);
            detail_->carried_tensors.push_back(at != nullptr ? report_.tensors[*at].order : SIZE_MAX);
        }
    }
    /// Block::order (`tensor`: Tensor::order) of the next A (T) record: a carried one after a fold
    /// takes the order the fold gives it, the one it has in the whole report.
    size_t next_order(bool tensor);
    /// A detail part opened (DetailParts::on_open): a fold is taken back where its part begins, and
    /// the observer is told where a fold could stand.
    void part_opened(unsigned part, DetailParts::Role carried, bool done);
    /// The blocks freed before a fold that an R after it may undo (FoldPoint::freed): taken back
    /// where the detail before the fold ends, before the spine's records there (take_restores: once).
    void fold_restores(const Fold& f);
    void take_restores();
    /// Starts reading the detail parts of the report (a spine).
    void start_detail();
    /// The fold to take (report/fold.h), once, when the spine's first `l` or `f` record is read.
    void choose_fold();
    /// Reads the detail parts up to detail record `position` (the end: UINT64_MAX).
    void read_detail(uint64_t position);
    void finish_detail();

    Report report_;
    EventObserver* observer_ = nullptr;
    bool stopped_ = false;
    size_t events_ = 0;
    size_t spine_events_ = 0;  // of those, made by the spine's records (not a detail part's)
    size_t blocks_read_ = 0;  // A records applied
    std::vector<size_t> free_block_slots_, free_tensor_slots_;
    std::optional<BackwardSweep> backward_;  // streaming: backward_sites, as the allocations come
    Warnings warnings_;
    std::vector<std::string_view> f_;
    format::Decoder decoder_;
    // The decoders in use: the report's, or a detail part's while one is read.
    format::Decoder* text_decoder_ = &decoder_;
    format::BinaryDecoder* binary_decoder_ = &own_binary_decoder_;
    size_t line_no_ = 0;
    bool binary_ = false;
    format::BinaryDecoder own_binary_decoder_;
    std::string magic_line_;        // the header's first line, which each detail part repeats
    std::optional<Detail> detail_;  // a bounded report's parts
    uint64_t skip_carried_ = 0;     // a part's carried blocks to decode but not apply
    bool carrying_ = false;         // a part's carried blocks applied after a gap
    std::string_view payload_;  // the binary record being read
    uint64_t offset_ = 0;       // its offset in the file
    char letter_ = 0;
    std::unordered_set<uint32_t> module_ids_;
    /// The ids of the stacks and Python stacks defined so far, as Report::stacks and python_stacks
    /// hold them: the check of every A and T record asks here, without hashing (docs/benchmarks.md,
    /// "reading speed").
    DefinedIds stack_ids_, python_stack_ids_;
    /// What the parser knows of an address: the block live there, or else the block most recently
    /// freed there while an R can still undo that free (`seq`: the free's rank among all frees).
    /// One map for both, so that an allocation and its free cost three lookups, not ten.
    struct AtAddr {
        size_t block = 0;
        uint64_t seq = 0;
        bool live = false;
    };
    /// An R undoes one of the last kRestoreWindow frees (docs/report-format.md): older ones are
    /// forgotten, so that what the reader keeps is bounded by the live blocks, not the addresses
    /// ever freed.
    static constexpr size_t kRestoreWindow = 8192;
    /// The block at `at` (address `addr`) freed: kept for an R, the oldest free forgotten.
    void note_free(uint64_t addr, AtAddr& at);
    /// A freed block that no R can undo any more lets its slot go (streaming).
    void forget_freed(const AtAddr& at);
    AddrMap<AtAddr> blocks_at_;                                // addr -> the block live (or freed) there
    std::vector<std::pair<uint64_t, uint64_t>> recent_frees_;  // ring of (addr, seq) of the last frees
    uint64_t frees_ = 0;
    int64_t max_t_ = 0;
    bool any_t_ = false;
    std::optional<int64_t> heartbeat_t_;
    std::optional<int64_t> end_t_;
    int minor_ = 0;                                               // I format_minor so far
    std::unordered_map<uint32_t, size_t> moments_;                // moment id -> index in Report::moments
    std::unordered_map<uint32_t, size_t> captures_;               // capture id -> index
    std::unordered_map<uint64_t, size_t> execs_;                  // exec handle -> its most recent G
    std::unordered_map<uint64_t, size_t> live_graphs_;            // captured graph handle -> capture, until K
    std::unordered_map<uint32_t, size_t> phases_;                 // phase id -> index
    std::unordered_map<uint64_t, size_t> reserved_;               // va -> reservation, until v
    std::unordered_map<uint64_t, size_t> handles_;                // handle value -> its most recent N
    std::vector<uint64_t> handle_maps_;                           // per handle: mappings now in place
    std::unordered_map<uint64_t, size_t> imported_;               // handle value -> its unreleased m
    std::map<uint64_t, size_t> mapped_;                           // va -> mapping, until q
    AddrMap<size_t> live_tensors_;                                // addr -> tensor, until t
    std::unordered_map<uint64_t, std::vector<size_t>> gc_frees_;  // tid -> tensors freed in a collection, until Y
    std::unordered_map<uint32_t, size_t> explanations_;           // explanation id -> index, until its Y
};

/// The item `id` names through `ids` (id -> index into `items`), or null when no item has that id or
/// `closed(item)`: a group of records (a moment's g and d, an explanation's u, y and r) may only add
/// to a group that is open.
template <class T, class Closed>
T* find_open(const std::unordered_map<uint32_t, size_t>& ids, std::vector<T>& items, uint32_t id, Closed closed) {
    auto it = ids.find(id);
    if (it == ids.end()) return nullptr;
    T& item = items[it->second];
    return closed(item) ? nullptr : &item;
}

/// Splits a text record into its space-separated fields.
void split_fields(std::string_view line, std::vector<std::string_view>& out);

/// An address in a message: lowercase hex.
std::string hex(uint64_t v);

}  // namespace memguard::report
