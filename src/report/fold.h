// Folds of a bounded report (docs/bounded-reports.md, "Who deletes and who folds"): the streaming
// reader's state once it has read the report up to a detail part, written as records (`a`, `z`,
// and copies as `A`/`T`: docs/report-format.md, "Added in minor 10") to `<report>.fold-NNNNNN`,
// so that the parts it covers can go and a later read still gives the figures of the whole run.
//
// `memguard compact` reads the report through the observers that fold (compact_report), stops
// where part `n` + 1 begins, and writes each observer's state (EventObserver::fold_out). A reader
// that finds a fold skips the parts it covers and, where part `n` + 1 begins (its carried live
// set applied), hands each observer the state back (EventObserver::fold_in) and sets its own
// counters (events, A and T records, positions of the spine's records) to the fold's: reading the
// fold and then the detail after it is reading everything, by construction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "report/report.h"

namespace memguard::report {

class BackwardSweep;
class Warnings;

/// Where a fold stands: the reader's counters where detail part `part` + 1 begins.
struct FoldPoint {
    std::string magic;      // the report's first line, which the fold repeats
    unsigned part = 0;      // the fold covers detail parts 1 .. part
    uint64_t position = 0;  // detail records before part + 1
    size_t events = 0;      // events counted there (as load_report counts them)
    size_t blocks = 0;      // A records read (Block::order of the next one)
    size_t tensors = 0;     // T records read
    int64_t t = 0;          // the latest time read
    uint64_t dropped = 0;   // detail records before it deleted unfolded (`f`), in `dropped_parts` parts
    int64_t dropped_until = 0;
    unsigned dropped_parts = 0;
    /// The events a reader counts at a spine `l` record of position p are the spine's own events so
    /// far, one per detail record before p, and an extra (implicit frees of blocks allocated twice,
    /// frees of unknown blocks that make none), which changes rarely: here (p, extra) at each `l`
    /// where it changed, so that a reader of the fold gives the spine's records in the folded
    /// stretch the positions they have in the whole report. Read back into Fold::extra.
    const std::vector<std::pair<uint64_t, int64_t>>* extra_events = nullptr;
    /// The run the report is of (run_of): a fold beside a report of another run at the same path
    /// is not taken.
    std::pair<int64_t, int64_t> run{-1, -1};
    /// The orders (Block::order, Tensor::order) of the blocks and tensors part `part` + 1 carries, in
    /// its order: a reader that takes them as new gives them these (SIZE_MAX: not known).
    const std::vector<size_t>* carried_blocks = nullptr;
    const std::vector<size_t>* carried_tensors = nullptr;
    /// The streaming reader's attribution of allocations to backward() calls (report/user_frame.h),
    /// which the fold holds as figures `backward*`; null: none (load_report).
    const BackwardSweep* backward = nullptr;
    /// The blocks freed among the last frees that an R may still undo, each with its rank among all
    /// frees (the reader's restore window: kFoldedFrees of them at most), and the frees so far:
    /// figures `reader.frees` and `reader.freed` (with a copy of the block).
    const std::vector<std::pair<uint64_t, const Block*>>* freed = nullptr;
    uint64_t frees = 0;
    /// The blocks live where the fold stands that the part after it does not carry (an R brought
    /// them back after its writer wrote the live set): figures `reader.live` (order, and a copy).
    const std::vector<const Block*>* uncarried = nullptr;
    /// The reader's remarks so far (figures `reader.warning`): a reader of the fold takes them in
    /// place of its own, made of the spine without the detail the fold covers.
    const Warnings* warnings = nullptr;
    /// The explanations read so far, whose storages' sites the reader found in the detail (figures
    /// `reader.garbage`: per explanation, each storage's stack ids).
    const std::vector<Explanation>* explanations = nullptr;
};

/// The frees before a fold whose blocks an R after it may bring back (docs/bounded-reports.md: the
/// writer writes an R right after its F; a report read whole keeps the last 8192).
inline constexpr size_t kFoldedFrees = 256;

/// A fold file being written: the observers' figures as records.
class FoldWriter {
public:
    explicit FoldWriter(const FoldPoint& at);
    /// `z name 0 values...`
    void figure(std::string_view name, const std::vector<int64_t>& values);
    void figure(std::string_view name, std::initializer_list<int64_t> values);
    /// `z name 1 values...` and a copy of `b` (an A record): a block of a live set the observer keeps
    /// (a copy the fold holds already: `z name 2 values... k`, with_copy).
    void block(std::string_view name, const Block& b, std::initializer_list<int64_t> values);
    void block(std::string_view name, const Block& b, const std::vector<int64_t>& values);
    /// `z name 1 values...` and a copy of `x` (a T record).
    void tensor(std::string_view name, const Tensor& x, std::initializer_list<int64_t> values);
    /// The file's text.
    const std::string& text() const { return text_; }

private:
    /// A copy written once: `z name 1 values...` and the copy, or, for a copy the fold holds
    /// already, `z name 2 values... k` (k: its number among the fold's copies, from 0).
    void with_copy(std::string_view name, std::vector<int64_t> values, std::string_view copy);

    std::string text_;
    std::unordered_map<std::string, size_t> copies_;  // each copy's record: its number
};

/// A fold file, read back.
struct Fold {
    FoldPoint at;
    std::vector<std::pair<uint64_t, int64_t>> extra;      // FoldPoint::extra_events
    std::vector<size_t> carried_blocks, carried_tensors;  // FoldPoint::carried_blocks, carried_tensors
    struct Figure {
        std::string name;
        std::vector<int64_t> values;
        std::optional<Block> block;    // a copy (an A record after it)
        std::optional<Tensor> tensor;  // a copy (a T record after it)
    };
    std::vector<Figure> figures;  // in file order

    /// Calls f(figure) for each figure named `name`, in file order.
    template <class F>
    void each(std::string_view name, F&& f) const {
        for (const Figure& x : figures) {
            if (x.name == name) f(x);
        }
    }
};

/// Thrown by EventObserver::fold_in for a figure it cannot take (a value missing or out of range):
/// the reader then leaves the fold out, with a warning.
struct BadFold : std::runtime_error {
    using std::runtime_error::runtime_error;
};

/// Value `i` of `f`, at least `min`; BadFold when it is missing or below.
int64_t fold_value(const Fold::Figure& f, size_t i, int64_t min = 0);
/// Value `i` of `f` as FoldWriter wrote an unsigned value (its bits as a signed one); BadFold when missing.
inline uint64_t fold_u64(const Fold::Figure& f, size_t i) { return static_cast<uint64_t>(fold_value(f, i, INT64_MIN)); }
/// An unsigned value as a figure holds it.
inline int64_t fold_of(uint64_t v) { return static_cast<int64_t>(v); }

/// The run a report is of, as a fold tells it: its `I pid` and `I t0_unix_ns` (-1 for one not said).
std::pair<int64_t, int64_t> run_of(const Report& r);

/// "<spine>.fold-000003"
std::string fold_path(const std::string& spine, unsigned part);
/// The numbers of the fold files beside `spine`, newest (highest) first.
std::vector<unsigned> find_folds(const std::string& spine);
/// Reads the fold file at `path`. Nothing, and `error` set, when it cannot be read or is not one of
/// the report whose first line is `magic`.
std::optional<Fold> read_fold(const std::string& path, const std::string& magic, std::string& error);
/// Writes `text` as the fold of part `part` (a temporary file renamed into place: a reader finds a
/// whole fold or none), then removes the older folds. Throws ReportError.
void write_fold(const std::string& spine, unsigned part, const std::string& text);
/// A fold's text as its file holds it: gzip (read_fold reads that and plain text alike).
std::string pack_fold(const std::string& text);
/// The text of the fold file `path`: a gzip one unpacked (up to 1 GiB), a plain one as it is;
/// nothing, with `error` said, when it cannot be read or unpacked.
std::optional<std::string> fold_text(const std::string& path, std::string& error);

/// What compact_report did.
struct CompactResult {
    unsigned part = 0;  // the fold now covers parts 1 .. part (0: there is no fold)
    bool wrote = false;
    std::string message;  // one line for the user
    /// A fold made but not written (`may_write` said no): the fold through part `through`, for
    /// write_fold once there is room.
    std::string unwritten;
    unsigned through = 0;
};
/// Whether a fold of `bytes` through part `part` may be written now (the follower's room).
using MayWrite = std::function<bool(uint64_t bytes, unsigned part)>;
/// Folds the bounded report at `spine` through detail part `through` (default: the newest part but
/// one, the last one the writer may still be writing): reads it through the observers that fold,
/// from the newest fold already there, and writes the new fold, when `may_write` (if given) says it
/// may. Throws ReportError when the report cannot be read or has no such part.
CompactResult compact_report(const std::string& spine, std::optional<unsigned> through, const MayWrite& may_write = {});

}  // namespace memguard::report
