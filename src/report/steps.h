// Training steps (format minor 8, s records): one row per step with its peak, incremental peak and
// live bytes at its end, and the growth finding of `memguard steps` (docs/steps.md): live bytes at
// step ends that keep growing, with the sites and categories that grew. The rows and the finding are
// computed apart from the categories (breakdown_at), so that each can be tested on its own.
#pragma once

#include <cstddef>
#include <cstdint>
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

}  // namespace memguard::report
