#include "report/steps.h"

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>

#include "report/levels.h"
#include "report/saturate.h"

namespace memguard::report {

std::vector<StepRow> step_rows(const Report& r, const Timeline& tl, Series series) {
    std::vector<StepRow> out;
    out.reserve(r.steps.size());
    const size_t last_point = tl.points.size() - 1;
    size_t begin = 0;
    int64_t t_begin = 0;
    for (size_t i = 0; i < r.steps.size(); ++i) {
        const Step& s = r.steps[i];
        StepRow row;
        row.index = i;
        // A step recorded out of order (a warning when read) is measured from where it ends.
        row.events_begin = std::min({begin, s.events_before, last_point});
        row.events_end = std::min(s.events_before, last_point);
        row.t_begin = std::min(t_begin, s.t);
        row.t_end = s.t;
        row.entry_bytes = tl.level(row.events_begin, series);
        auto [peak, at] = tl.max_level(row.events_begin, row.events_end, series);
        row.peak_bytes = peak;
        row.peak_events = at;
        row.peak_t = std::max(row.t_begin, tl.points[at].t);
        row.exit_bytes = tl.level(row.events_end, series);
        out.push_back(row);
        begin = s.events_before;
        t_begin = s.t;
    }
    return out;
}

size_t warmup_steps(size_t n, const GrowthRule& rule) {
    if (n <= rule.min_steps) return 0;
    return std::min(rule.warmup, n - rule.min_steps);
}

double slope(const std::vector<uint64_t>& v, size_t first, size_t last) {
    if (last <= first) return 0;
    // Centred sums, in long double: byte counts up to 2^64 squared would overflow integers.
    const long double n = static_cast<long double>(last - first + 1);
    const long double mean_x = (n - 1) / 2;
    long double mean_y = 0;
    for (size_t i = first; i <= last; ++i) mean_y += static_cast<long double>(v[i]) / n;
    long double sxy = 0, sxx = 0;
    for (size_t i = first; i <= last; ++i) {
        const long double dx = static_cast<long double>(i - first) - mean_x;
        sxy += dx * (static_cast<long double>(v[i]) - mean_y);
        sxx += dx * dx;
    }
    return static_cast<double>(sxy / sxx);
}

std::optional<Growth> find_growth(const std::vector<uint64_t>& live_at_end, const GrowthRule& rule) {
    const size_t n = live_at_end.size();
    const size_t min_steps = std::max<size_t>(rule.min_steps, 2);
    if (n < min_steps) return std::nullopt;
    std::optional<Growth> best;
    // Runs: maximal stretches where no step end drops by more than max_drop below the one before.
    size_t start = warmup_steps(n, rule);
    while (start < n) {
        size_t end = start;
        while (end + 1 < n) {
            const long double prev = static_cast<long double>(live_at_end[end]);
            if (static_cast<long double>(live_at_end[end + 1]) < prev - prev * rule.max_drop) break;
            ++end;
        }
        // Within a run, trim the ends that do not rise: a run that starts on a plateau or ends after
        // the growth stopped is reported over the steps that grew.
        size_t a = start, b = end;
        while (a < b && live_at_end[a + 1] <= live_at_end[a]) ++a;
        while (b > a && live_at_end[b] <= live_at_end[b - 1]) --b;
        if (b - a + 1 >= min_steps && live_at_end[b] > live_at_end[a]) {
            const double per_step = slope(live_at_end, a, b);
            if (per_step >= static_cast<double>(rule.min_per_step) && (!best || b - a > best->last - best->first)) {
                best = Growth{a, b, live_at_end[a], live_at_end[b], per_step};
            }
        }
        start = end + 1;
    }
    return best;
}

LiveSet live_after(const Report& r, size_t events_applied) {
    LiveSet out;
    LevelWalk walk(r);
    walk.advance_to(std::min(events_applied, r.events.size()));
    out.events_applied = walk.applied();
    out.t = out.events_applied == 0 ? 0 : r.events[out.events_applied - 1].t;
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (walk.block_live(i)) out.blocks.push_back(i);
    }
    for (size_t i = 0; i < r.handles.size(); ++i) {
        if (walk.handle_live(i)) out.handles.push_back(i);
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (walk.tensor_live(i)) out.tensors.push_back(i);
    }
    return out;
}

int64_t SiteChange::delta() const {
    if (to >= from) return to - from > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(to - from);
    return from - to > static_cast<uint64_t>(INT64_MAX) ? -INT64_MAX : -static_cast<int64_t>(from - to);
}

std::vector<SiteChange> grown_sites(const SiteTable& from, const SiteTable& to, size_t max) {
    using Key = std::tuple<uint32_t, uint32_t, bool>;
    std::map<Key, SiteChange> all;
    for (const Site& s : from.sites) {
        SiteChange& c = all[{s.stack_id, s.python_stack_id, s.physical}];
        c = SiteChange{s.stack_id, s.python_stack_id, s.physical, s.bytes, 0};
    }
    for (const Site& s : to.sites) {
        SiteChange& c = all[{s.stack_id, s.python_stack_id, s.physical}];
        c.stack_id = s.stack_id;
        c.python_stack_id = s.python_stack_id;
        c.physical = s.physical;
        c.to = s.bytes;
    }
    std::vector<SiteChange> out;
    for (const auto& [key, c] : all) {
        if (c.to > c.from) out.push_back(c);
    }
    // Largest growth first; the map's order (stack ids) breaks ties, so the order is stable.
    std::stable_sort(out.begin(), out.end(),
                     [](const SiteChange& a, const SiteChange& b) { return a.to - a.from > b.to - b.from; });
    if (out.size() > max) out.resize(max);
    return out;
}

std::vector<CategoryChange> grown_categories(const Breakdown& from, const Breakdown& to) {
    std::map<std::pair<Category, std::string>, CategoryChange> all;
    for (const CategoryPart& p : from.parts) {
        CategoryChange& c = all[{p.category, p.detail}];
        c.category = p.category;
        c.detail = p.detail;
        add_to(c.from, p.bytes);
    }
    for (const CategoryPart& p : to.parts) {
        CategoryChange& c = all[{p.category, p.detail}];
        c.category = p.category;
        c.detail = p.detail;
        add_to(c.to, p.bytes);
    }
    std::vector<CategoryChange> out;
    for (const auto& [key, c] : all) {
        if (c.to > c.from) out.push_back(c);
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const CategoryChange& a, const CategoryChange& b) { return a.to - a.from > b.to - b.from; });
    return out;
}

}  // namespace memguard::report
