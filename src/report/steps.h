// Training steps (format minor 8, s records): one row per step with its peak, incremental peak and
// live bytes at its end, and the growth finding of `memguard steps` (docs/steps.md): live bytes at
// step ends that keep growing, with the sites and categories that grew. The rows and the finding are
// computed apart from the categories (breakdown_at), so that each can be tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/categories.h"
#include "report/report.h"
#include "report/timeline.h"

namespace memguard::report {

/// One step: from the previous step's end (the start of the report for the first) to its s record.
struct StepRow {
    size_t index = 0;  // into Report::steps
    int64_t t_begin = 0, t_end = 0;
    size_t events_begin = 0, events_end = 0;  // prefixes of Report::events
    uint64_t entry_bytes = 0;                 // at the previous step's end
    uint64_t peak_bytes = 0;                  // the most from begin to end, both included
    size_t peak_events = 0;                   // the prefix of events at the peak (first reached)
    int64_t peak_t = 0;
    uint64_t exit_bytes = 0;  // live at the step's end
    uint64_t incremental_peak() const { return peak_bytes - entry_bytes; }
};

/// One row per s record, in file order. The peak is found with the timeline's block maxima
/// (Timeline::max_level), as phase_stats finds a phase's.
std::vector<StepRow> step_rows(const Report& r, const Timeline& tl, Series series);

/// The rule of the growth finding (docs/steps.md).
struct GrowthRule {
    size_t warmup = 2;                    // steps left out at the start (fewer when there are few steps)
    size_t min_steps = 3;                 // step ends in a run, at least
    uint64_t min_per_step = 1024 * 1024;  // least-squares growth per step, at least
    double max_drop = 0.01;               // a step end may be below the one before by this share of it
};

/// Live bytes at step ends that grew over consecutive steps.
struct Growth {
    size_t first = 0, last = 0;  // positions in the input (inclusive): the run's first and last step end
    uint64_t from_bytes = 0, to_bytes = 0;
    double per_step = 0;  // the least-squares slope over the run, bytes per step
};

/// The number of steps left out as warm-up for `n` step ends: rule.warmup, but never so many
/// that fewer than rule.min_steps remain.
size_t warmup_steps(size_t n, const GrowthRule& rule);

/// The longest run of consecutive step ends (after the warm-up) in which none is below the one
/// before by more than rule.max_drop of it, with at least rule.min_steps ends, whose least-squares
/// slope is at least rule.min_per_step and whose last end is above its first; the earliest of the
/// longest when several qualify. Empty when there is none.
std::optional<Growth> find_growth(const std::vector<uint64_t>& live_at_end, const GrowthRule& rule = {});

/// The step ends (positions in `live_at_end`) that find_growth over `live_at_end` with any step ends
/// appended may take as a growth's first or last: the ends of the best run among those a later end
/// cannot extend, the first and the last rising end of the run that is still open, and the last end
/// (every end while the warm-up may still change). What a fold keeps the site tables of.
std::vector<size_t> growth_candidates(const std::vector<uint64_t>& live_at_end, const GrowthRule& rule = {});

/// The least-squares slope of `v` against 0, 1, 2, ... over [first, last] (0 for one point).
double slope(const std::vector<uint64_t>& v, size_t first, size_t last);

/// The live set after the first `events_applied` events (every kind; filter as group_by_site does).
LiveSet live_after(const Report& r, size_t events_applied);

/// A site whose live bytes differ between two points of one report.
struct SiteChange {
    uint32_t stack_id = 0, python_stack_id = 0;
    bool physical = false;
    uint64_t from = 0, to = 0;
    int64_t delta() const;  // to - from, clamped to the int64 range
};

/// The sites of `to` that hold more than in `from` (matched by stack ids: the same report), largest
/// growth first, at most `max`.
std::vector<SiteChange> grown_sites(const SiteTable& from, const SiteTable& to, size_t max);

/// A category (and library) whose bytes differ between two breakdowns.
struct CategoryChange {
    Category category = Category::Other;
    std::string detail;
    uint64_t from = 0, to = 0;
};

/// The categories of `to` that hold more than in `from`, largest growth first.
std::vector<CategoryChange> grown_categories(const Breakdown& from, const Breakdown& to);

// --- what became of a growth: collections (garbage cycles) or still held (docs/steps.md) ---------

/// The collections (Y records) that ended within one step, and the CUDA bytes they freed.
struct StepCollections {
    uint64_t count = 0;
    uint64_t freed_bytes = 0;  // the sum of their cuda_bytes_freed above 0
};

/// Per row: the collections whose Y falls in (t_begin, t_end] of the row ([0, t_end] for the first).
/// A collection at a step's end (MEMGUARD_GC_EVERY_STEPS) runs after the step's s record: it counts
/// in the next step.
std::vector<StepCollections> step_collections(const Report& r, const std::vector<StepRow>& rows);

/// The bytes of a growth that one collection freed.
struct GrowthCollection {
    std::optional<size_t> collection;  // index into Report::collections; empty: freed in a collection
                                       // whose Y the report does not have (the process was killed)
    uint64_t bytes = 0;
};

/// A site and its share of a growth.
struct GrowthSite {
    uint32_t stack_id = 0, python_stack_id = 0;
    uint64_t bytes = 0;
};

/// What became of the bytes a growth added: freed by later collections (memory that garbage reference
/// cycles held), released by the program, or still held.
///
/// Exact (the tensor view of allocator mode): the tensor blocks allocated after the end of the
/// growth's first step and live at the end of its last, at the sites that grew between those two
/// points, up to each site's growth, those that stayed longest first (a site that also replaces a
/// block each step added more than it grew; the replaced block is freed soon). Each block's fate:
/// freed in a collection (its t record's gc flag: Tensor::collection names the Y), freed by the
/// program before the last step end, or else still held (live at the last step end).
///
/// Estimated (the segments, interposition mode or --segments). The growth is to - from. Known part
/// (`known_bytes`): the segments of the growth (allocated after the first step end, live at the
/// last) whose F record came on a collection's thread while it ran ([t - duration_ns, t] of its Y):
/// memory freed outside PyTorch's cache, with its sites; and the CUDA storages that an explained
/// collection (memguard's: y records) found inside segments of the growth, with the segments' sites.
/// Those collections are credited with that only. The rest is estimated: PyTorch keeps a freed
/// tensor's memory in its cache, so segments do not shrink when a collection frees their tensors
/// (later steps reuse them), and no record ties them to it. The window: the steps after the
/// growth's first step end, up to the step after its last (and the collections after the last
/// step's end when the growth ends there). Per step of the window, what its other collections freed
/// (cuda_bytes_freed above 0: PyTorch's allocated bytes) beyond `baseline_bytes`, the median over
/// all steps (the garbage an ordinary step makes and frees), is collected too; at most the growth.
struct GrowthFate {
    bool exact = false;
    /// A bounded report whose detail up to the growth's last step end is folded into figures
    /// (report/fold.h): the blocks the growth added are not kept, so what became of them is not
    /// known; every figure below is 0.
    bool folded = false;
    uint64_t growth_bytes = 0;                      // exact: the growth of the sites that grew; estimated: to - from
    uint64_t collected_bytes = 0;                   // freed by collections
    uint64_t released_bytes = 0;                    // exact only: freed outside collections before the last step end
    uint64_t held_bytes = 0;                        // the rest
    uint64_t known_bytes = 0;                       // estimated only: the known part of collected_bytes
    uint64_t window_bytes = 0, baseline_bytes = 0;  // estimated only: freed in the window; the median step
    size_t window_first = 0, window_last = 0;       // estimated only: rows of the window
    bool window_tail = false;                       // estimated only: and after the last step's end
    /// Those that freed some of it, in file order. Estimated: the known ones with their known bytes, and
    /// every other collection that freed CUDA memory in a window step whose other collections freed
    /// more than the median, with all it freed.
    std::vector<GrowthCollection> collections;
    std::vector<GrowthSite> collected_sites;  // largest first, at most max_sites (estimated: the known part's)
    std::vector<GrowthSite> held_sites;       // exact only, largest first, at most max_sites
    /// Of held_bytes, the part that was live through a full (generation 2) collection: referenced, not
    /// garbage. Exact: per block, a full collection ended after its T and before its free (or the
    /// report's end); estimated: the segments (and physical memory) allocated after the growth's first
    /// step end and before the last full collection, live at the last step end, less the part of
    /// collected_bytes that went to PyTorch's cache (all but the segments freed), at most held_bytes.
    uint64_t held_tested_bytes = 0;
    /// The last full collection that such held memory was live through (estimated: the last after the
    /// growth began); empty: none.
    std::optional<size_t> full_through;
};

/// What became of `g` (a growth found over the exit bytes of `rows`), in the view `series`.
GrowthFate growth_fate(const Report& r, const std::vector<StepRow>& rows, const Growth& g, Series series,
                       size_t max_sites);

/// What growth_fate reads of the blocks and tensor blocks, gathered from a whole report or while
/// streaming (report/stream_steps.h), so that both readers give one answer.
struct GrowthItems {
    /// Exact: the tensor blocks live at the end of the growth's last step that were not live at the
    /// end of its first (those it added), in order of T records, each with the position of its free
    /// among the events (SIZE_MAX: never freed); Tensor::collection names the collection of a gc free.
    struct Added {
        Tensor tensor;
        size_t free_at = SIZE_MAX;
    };
    std::vector<Added> added;
    /// Exact: per site (stack ids), the live tensor bytes at the end of the first step and of the last.
    std::map<std::pair<uint32_t, uint32_t>, std::pair<uint64_t, uint64_t>> site_bytes;
    /// Estimated: every GPU block allocated after the end of the growth's first step whose free (if any)
    /// came after the earlier of the ends of its last step and of the last step, in order of A records
    /// (all the segments the estimate looks at; more may be given).
    std::vector<Block> blocks;
};

/// The items of `r` (a report read whole) that growth_fate reads.
GrowthItems growth_items(const Report& r, const std::vector<StepRow>& rows, const Growth& g, Series series);

/// growth_fate from gathered items; `r` gives the collections, explanations and physical handles.
GrowthFate growth_fate(const Report& r, const std::vector<StepRow>& rows, const Growth& g, Series series,
                       size_t max_sites, const GrowthItems& items);

}  // namespace memguard::report
