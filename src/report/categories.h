// What GPU memory holds at a point of a run, by category (docs/categories.md): parameters,
// gradients, optimizer state, activations, ..., NCCL, workspaces, the allocator's cache. The one
// definition that `top --by category`, `summary`, `steps` and `oom` print.
//
// Tensor categories come from the moments' g records (the Python hook looked at the live tensors:
// exact where it saw them); the others from what the report says about each block: its native
// stack's modules and symbols, its Python stack, its private pool or capture, and PyTorch's
// allocator blocks of a moment (d) or allocator mode's tensor blocks (T). A part decided by a rule
// that can be wrong is marked `estimate`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/analysis.h"
#include "report/report.h"
#include "report/stream.h"
#include "report/symbolizer.h"

namespace memguard::report {

/// The detail of the part that holds, in interposition mode, the bytes of PyTorch's segments that
/// no tag and no allocator block (d) explains: tensors and the allocator's cache, not told apart.
/// Its category is OtherTensor, and it is always an estimate.
inline constexpr const char* kNotToldApart = "tensors and cache, not told apart";

/// The detail of the part that holds tensor blocks no tag names and no other rule places (allocator
/// mode's T blocks from before the step, interposition mode's allocated d blocks): tensors, but which
/// ones the program did not say. Its category is OtherTensor, and it is always an estimate; kept apart
/// from the tagged other tensors, which are exact at their moment.
inline constexpr const char* kUnnamed = "unnamed";

/// PyTorch rounds every request up to this (kMinBlockSize): the bytes of a tensor's block that belong
/// to it. A block holds more when the allocator did not split it (what was left was too small to
/// keep: up to 1 MiB in the large pool); those bytes hold no tensor and count as the allocator's cache.
inline constexpr uint64_t kTensorRounding = 512;

/// One category's bytes at a point, with the sites that hold most of them.
struct CategoryPart {
    Category category = Category::Other;
    /// Library: the library's file name (libtransformer_engine.so); OtherTensor: kNotToldApart for
    /// the segment bytes nothing explains (interposition mode), kUnnamed for tensor blocks no tag
    /// names; else empty.
    std::string detail;
    uint64_t bytes = 0;
    uint64_t blocks = 0;           // tensor storages or blocks counted
    bool estimate = false;         // decided by a rule that can be wrong (docs/categories.md says which)
    uint64_t estimated_bytes = 0;  // of `bytes`, those an estimating rule decided (estimate == (this != 0))
    std::vector<Site> sites;       // the largest sites of these bytes, largest first (at most `max_sites`)
};

/// GPU memory on one device at one point, split by category. The parts add up to `total`.
struct Breakdown {
    int device = -1;            // -1: every device
    size_t events_applied = 0;  // the point: after this prefix of Report::events
    int64_t t = 0;
    uint64_t total = 0;               // the GPU bytes live then (allocator mode: its segments' bytes)
    const Moment* moment = nullptr;   // the moment whose tags were used at this point (nullptr: none)
    std::vector<CategoryPart> parts;  // by bytes, descending (then category order); empty ones left out
    /// The part of `category` (and `detail`), or null.
    const CategoryPart* find(Category category, const std::string& detail = "") const;
};

struct BreakdownOptions {
    int device = -1;
    size_t max_sites = 3;
    /// Where module files are looked up to read function names (the cuBLAS workspace rule of
    /// allocator mode). Only ELF symbol tables are read: addr2line is never run.
    SymbolizerOptions symbolizer;
};

/// The breakdown after `events_applied` events (more than Report::events.size(): all of them).
/// Tags come from the moments whose tensors were the same blocks (allocator mode: the T block at a
/// tagged address, for its whole life; interposition mode: the bytes a tag covers inside a live
/// segment, from one moment: the nearest at or after the point within the same step first).
Breakdown breakdown_at(const Report& r, size_t events_applied, const BreakdownOptions& options);

/// breakdown_at for many points in one replay of the events (what `steps` needs: one per step);
/// `points` in any order, the answers in the same order. Costs one pass over the events plus the
/// blocks live at each point.
std::vector<Breakdown> breakdowns_at(const Report& r, const std::vector<size_t>& points,
                                     const BreakdownOptions& options);

/// Whether the moment whose tags breakdown_at takes for point `p` (interposition mode) is among
/// r.moments for good: no moment read after them could be taken instead. (A fold works out the
/// breakdown of a point once it is: report/stream_steps.h.)
bool moment_settled(const Report& r, size_t p);

/// breakdown_at for a streamed report (report/stream.h), whose events are not kept: the live items
/// of each point are given. `whole` is the streamed report of a first pass (its stacks, modules,
/// steps and moments, with their positions among the events as load_report counts them) and must
/// outlive this; `tags` (TensorTagObserver's, or null without tensor blocks) too. One instance
/// serves many points, so that the rules of each stack are worked out once.
class PointBreakdowns {
public:
    PointBreakdowns(const Report& whole, const BreakdownOptions& options,
                    const std::unordered_map<size_t, Category>* tags);
    ~PointBreakdowns();
    PointBreakdowns(const PointBreakdowns&) = delete;
    PointBreakdowns& operator=(const PointBreakdowns&) = delete;
    /// The breakdown after `events_applied` events of the whole report, whose last event was at `t`
    /// (0 for none): its live items are `live`'s, indices into `items` (the slots of a streamed report
    /// during its read, or the report of a point, PointSnapshot::into). Equal to
    /// breakdown_at(whole report, events_applied) when `live` is what is live there.
    Breakdown at(const Report& items, const LiveSet& live, size_t events_applied, int64_t t);
    /// As at(), with the tensor tags `tags` (by Tensor::order) in place of those it was made with.
    Breakdown at(const Report& items, const LiveSet& live, size_t events_applied, int64_t t,
                 const std::unordered_map<size_t, Category>& tags);
    /// The tensor tags it was made with (null: resolved over the whole report's events).
    const std::unordered_map<size_t, Category>* tags() const;
    /// The report it was made over (`whole`).
    const Report& report() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

/// The tensor tags of allocator mode, resolved while streaming (as breakdown_at resolves them over
/// the events): a tag names the T block live at its moment at that address, for the block's whole
/// life, so a point needs the tags of later moments too, known after a first pass. Keeps the tensor
/// blocks live (by address) and the tags found, by Tensor::order: bounded by the moments' tags.
class TensorTagObserver : public EventObserver {
public:
    bool on_event(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    /// A fold holds the tags found and the moments resolved (`tags`, `tags.tag`); the live tensor
    /// blocks are those the part after it carries, which the reader has told as allocations.
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;
    /// The tags a fold holds (fold_out's figures `tags.tag`), by Tensor::order. Throws BadFold.
    static std::unordered_map<size_t, Category> folded(const Fold& f);
    /// The tags found so far, by Tensor::order.
    const std::unordered_map<size_t, Category>& tags() const { return tags_; }
    /// The tags, by Tensor::order; call once, after the read.
    std::unordered_map<size_t, Category> take() { return std::move(tags_); }

private:
    void resolve(const Report& r, size_t events);
    std::map<std::pair<int, uint64_t>, std::pair<size_t, size_t>> live_;  // (device, addr) -> (slot, order)
    size_t next_ = 0, applied_ = 0;
    std::unordered_map<size_t, Category> tags_;
};

/// The name a part is shown by: the category's name, with its detail in parentheses when it has one
/// ("library (libfoo.so)", "other_tensor (tensors and cache, not told apart)").
std::string part_name(const CategoryPart& p);
/// part_name with the estimate mark inside its parentheses: "activation (estimate)",
/// "other_tensor (unnamed, estimate)".
std::string part_label(const CategoryPart& p);

}  // namespace memguard::report
