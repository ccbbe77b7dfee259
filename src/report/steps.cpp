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

std::vector<size_t> growth_candidates(const std::vector<uint64_t>& live_at_end, const GrowthRule& rule) {
    const size_t n = live_at_end.size();
    const size_t min_steps = std::max<size_t>(rule.min_steps, 2);
    std::vector<size_t> out;
    if (n < rule.warmup + min_steps + 1) {
        // The warm-up is not settled yet (warmup_steps grows with the ends up to rule.warmup).
        for (size_t i = 0; i < n; ++i) out.push_back(i);
        return out;
    }
    // As find_growth: maximal runs from the warm-up on, trimmed to the ends that rose. A run that a
    // drop closed keeps its ends for good; of those only the best can win (a later run must be
    // longer). The open run (the last) may go on: its first rising end stays, its last may move on.
    std::optional<Growth> best;
    size_t start = warmup_steps(n, rule);
    while (start < n) {
        size_t end = start;
        while (end + 1 < n) {
            const long double prev = static_cast<long double>(live_at_end[end]);
            if (static_cast<long double>(live_at_end[end + 1]) < prev - prev * rule.max_drop) break;
            ++end;
        }
        size_t a = start, b = end;
        while (a < b && live_at_end[a + 1] <= live_at_end[a]) ++a;
        while (b > a && live_at_end[b] <= live_at_end[b - 1]) --b;
        if (end + 1 == n) {
            out.insert(out.end(), {a, b, n - 1});
            break;
        }
        if (b - a + 1 >= min_steps && live_at_end[b] > live_at_end[a] &&
            slope(live_at_end, a, b) >= static_cast<double>(rule.min_per_step) &&
            (!best || b - a > best->last - best->first)) {
            best = Growth{a, b, live_at_end[a], live_at_end[b], 0};
        }
        start = end + 1;
    }
    if (best) out.insert(out.end(), {best->first, best->last});
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
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

namespace {

/// The row whose span holds `t`: (t_begin, t_end], [0, t_end] for the first; rows.size() for none.
/// Step ends are in time order but for one recorded out of order (warned about when read): then the
/// search is a scan.
size_t row_at(const std::vector<StepRow>& rows, bool sorted, int64_t t) {
    size_t i = 0;
    if (sorted) {
        auto it = std::lower_bound(rows.begin(), rows.end(), t,
                                   [](const StepRow& row, int64_t v) { return row.t_end < v; });
        i = static_cast<size_t>(it - rows.begin());
    } else {
        while (i < rows.size() && rows[i].t_end < t) ++i;
    }
    if (i == rows.size() || (i != 0 && t <= rows[i].t_begin)) return rows.size();
    return i;
}

bool sorted_by_end(const std::vector<StepRow>& rows) {
    return std::is_sorted(rows.begin(), rows.end(),
                          [](const StepRow& a, const StepRow& b) { return a.t_end < b.t_end; });
}

}  // namespace

std::vector<StepCollections> step_collections(const Report& r, const std::vector<StepRow>& rows) {
    std::vector<StepCollections> out(rows.size());
    if (rows.empty()) return out;
    const bool sorted = sorted_by_end(rows);
    for (const Collection& c : r.collections) {
        const size_t i = row_at(rows, sorted, c.t);
        if (i == rows.size()) continue;  // after the last step's end
        ++out[i].count;
        if (c.cuda_bytes_freed && *c.cuda_bytes_freed > 0) {
            add_to(out[i].freed_bytes, static_cast<uint64_t>(*c.cuda_bytes_freed));
        }
    }
    return out;
}

namespace {

constexpr size_t kNever = SIZE_MAX;

uint64_t positive(const std::optional<int64_t>& v) { return v && *v > 0 ? static_cast<uint64_t>(*v) : 0; }

void keep_largest(std::vector<GrowthSite>& sites, size_t max) {
    sites.erase(std::remove_if(sites.begin(), sites.end(), [](const GrowthSite& s) { return s.bytes == 0; }),
                sites.end());
    std::stable_sort(sites.begin(), sites.end(),
                     [](const GrowthSite& a, const GrowthSite& b) { return a.bytes > b.bytes; });
    if (sites.size() > max) sites.resize(max);
}

/// The full (generation 2) collections, by the time they ended.
std::vector<std::pair<int64_t, size_t>> full_collections(const Report& r) {
    std::vector<std::pair<int64_t, size_t>> out;
    for (size_t i = 0; i < r.collections.size(); ++i) {
        if (r.collections[i].generation >= 2) out.emplace_back(r.collections[i].t, i);
    }
    std::sort(out.begin(), out.end());
    return out;
}

/// Exact: the tensor blocks' side of growth_items.
void exact_items(const Report& r, const std::vector<StepRow>& rows, const Growth& g, GrowthItems& items) {
    const size_t from = rows[g.first].events_end, to = rows[g.last].events_end;
    // Where each tensor block's T and t records are among the events.
    std::vector<size_t> alloc_at(r.tensors.size(), kNever), free_at(r.tensors.size(), kNever);
    for (size_t e = 0; e < r.events.size(); ++e) {
        const Event& ev = r.events[e];
        if (ev.type == Event::TensorAlloc && ev.block < alloc_at.size()) alloc_at[ev.block] = e;
        if (ev.type == Event::TensorFree && ev.block < free_at.size()) free_at[ev.block] = e;
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        const size_t a = alloc_at[i], f = free_at[i];
        if (a == kNever) continue;
        const bool live_from = a < from && f >= from, live_to = a < to && f >= to;
        if (!live_from && !live_to) continue;
        const Tensor& x = r.tensors[i];
        auto& [at_from, at_to] = items.site_bytes[{x.stack_id, x.python_stack_id}];
        if (live_from) add_to(at_from, x.size);
        if (live_to) add_to(at_to, x.size);
        // Live at the end but allocated after the start: added (live at both ends: not).
        if (live_to && a >= from) items.added.push_back(GrowthItems::Added{x, f});
    }
}

void exact_fate(const Report& r, const std::vector<StepRow>& rows, size_t max_sites, const GrowthItems& items,
                GrowthFate& fate) {
    const std::vector<std::pair<int64_t, size_t>> full = full_collections(r);
    const size_t last_end = rows.back().events_end;
    // Per site: live bytes at both ends of the growth, and the blocks it added (allocated between
    // them, live at the end), split by what became of them.
    struct SiteSums {
        uint64_t at_from = 0, at_to = 0, added = 0;
        std::vector<size_t> blocks;  // into items.added
    };
    std::map<std::pair<uint32_t, uint32_t>, SiteSums> sites;
    for (const auto& [key, bytes] : items.site_bytes) {
        SiteSums& s = sites[key];
        s.at_from = bytes.first;
        s.at_to = bytes.second;
    }
    for (size_t i = 0; i < items.added.size(); ++i) {
        const Tensor& x = items.added[i].tensor;
        SiteSums& s = sites[{x.stack_id, x.python_stack_id}];
        add_to(s.added, x.size);
        s.blocks.push_back(i);
    }
    auto free_at = [&](size_t i) { return items.added[i].free_at; };
    std::map<std::optional<size_t>, uint64_t> by_collection;
    for (const auto& [key, s] : sites) {
        if (s.at_to <= s.at_from || s.added == 0) continue;
        // A site's live bytes at the end are at most those at the start plus the blocks it added.
        const uint64_t grew = std::min(s.at_to - s.at_from, s.added);
        add_to(fate.growth_bytes, grew);
        uint64_t collected = 0, released = 0, tested = 0;
        // The blocks that stayed longest make up the growth: a site that also replaces a block each
        // step added more than it grew, and the replaced block goes soon. The oldest first among equals.
        std::vector<size_t> order = s.blocks;
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return free_at(a) > free_at(b); });
        uint64_t left = grew;
        for (size_t i : order) {
            if (left == 0) break;
            const Tensor& x = items.added[i].tensor;
            const uint64_t part = std::min(x.size, left);
            left -= part;
            if (x.freed_in_gc && free_at(i) != kNever) {
                add_to(collected, part);
                add_to(by_collection[x.collection], part);
            } else if (free_at(i) < last_end) {
                add_to(released, part);
            } else {
                // Held: was it live through a full collection (one that ended after its T, before its t)?
                auto it = std::upper_bound(full.begin(), full.end(), std::make_pair(x.t_alloc, SIZE_MAX));
                int64_t until = x.t_free.value_or(INT64_MAX);
                size_t through = kNever;
                for (; it != full.end() && it->first < until; ++it) through = it->second;
                if (through != kNever) {
                    add_to(tested, part);
                    if (!fate.full_through || r.collections[*fate.full_through].t < r.collections[through].t) {
                        fate.full_through = through;
                    }
                }
            }
        }
        add_to(fate.collected_bytes, collected);
        add_to(fate.released_bytes, released);
        const uint64_t held = grew - std::min(grew, saturating_add(collected, released));
        add_to(fate.held_bytes, held);
        add_to(fate.held_tested_bytes, std::min(tested, held));
        fate.collected_sites.push_back(GrowthSite{key.first, key.second, collected});
        fate.held_sites.push_back(GrowthSite{key.first, key.second, held});
    }
    keep_largest(fate.collected_sites, max_sites);
    keep_largest(fate.held_sites, max_sites);
    // In file order; a collection the report does not end comes last.
    for (const auto& [index, bytes] : by_collection) {
        if (index) fate.collections.push_back(GrowthCollection{index, bytes});
    }
    auto unended = by_collection.find(std::nullopt);
    if (unended != by_collection.end()) fate.collections.push_back(GrowthCollection{std::nullopt, unended->second});
}

/// Segments of the growth (allocated after the first step end, live at the last) that were freed
/// while a collection ran on the freeing thread: within [t - duration, t] of a Y of that thread. By
/// collection index; and their sites.
void known_frees(const Report& r, const std::vector<Block>& blocks, const std::vector<StepRow>& rows, const Growth& g,
                 std::map<size_t, uint64_t>& by_collection, std::vector<GrowthSite>& sites) {
    std::map<uint64_t, std::vector<std::pair<int64_t, size_t>>> by_thread;  // tid -> (end, index), by end
    for (size_t i = 0; i < r.collections.size(); ++i) {
        by_thread[r.collections[i].tid].emplace_back(r.collections[i].t, i);
    }
    for (auto& [tid, ends] : by_thread) std::sort(ends.begin(), ends.end());
    const int64_t begin = rows[g.first].t_end, end = rows[g.last].t_end;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> site_bytes;
    for (const Block& b : blocks) {
        if (!is_gpu(b.kind) || b.t_alloc <= begin || b.t_alloc > end || !b.t_free || *b.t_free <= end) continue;
        auto thread = by_thread.find(b.free_tid);
        if (thread == by_thread.end()) continue;
        // The first collection of the thread that ended at or after the free: did it start before it?
        auto it = std::lower_bound(thread->second.begin(), thread->second.end(), std::make_pair(*b.t_free, size_t{0}));
        if (it == thread->second.end()) continue;
        const Collection& c = r.collections[it->second];
        if (c.t - std::max<int64_t>(c.duration_ns, 0) > *b.t_free) continue;
        add_to(by_collection[it->second], b.size);
        add_to(site_bytes[{b.stack_id, b.python_stack_id}], b.size);
    }
    for (const auto& [key, bytes] : site_bytes) sites.push_back(GrowthSite{key.first, key.second, bytes});
}

/// memguard's explained collections (after the growth began, not already known): the CUDA storages
/// their garbage held (y records) inside segments of the growth, at most each segment's size in all.
/// The segments of the growth were all live at its last step end, so they do not overlap.
void explained_frees(const Report& r, const std::vector<Block>& blocks, const std::vector<StepRow>& rows,
                     const Growth& g, std::map<size_t, uint64_t>& by_collection, std::vector<GrowthSite>& sites) {
    const int64_t begin = rows[g.first].t_end, end = rows[g.last].t_end;
    std::vector<size_t> segments;  // growth blocks, by address
    for (size_t i = 0; i < blocks.size(); ++i) {
        const Block& b = blocks[i];
        if (is_gpu(b.kind) && b.t_alloc > begin && b.t_alloc <= end && b.t_free.value_or(INT64_MAX) > end) {
            segments.push_back(i);
        }
    }
    // Stable: equal addresses keep the order of A records, whichever blocks were gathered.
    std::stable_sort(segments.begin(), segments.end(),
                     [&](size_t a, size_t b) { return blocks[a].addr < blocks[b].addr; });
    std::vector<uint64_t> left(segments.size());
    for (size_t k = 0; k < segments.size(); ++k) left[k] = blocks[segments[k]].size;
    std::map<std::pair<uint32_t, uint32_t>, uint64_t> site_bytes;
    for (const Explanation& e : r.explanations) {
        if (!e.collection || by_collection.count(*e.collection) != 0 || r.collections[*e.collection].t <= begin)
            continue;
        uint64_t credited = 0;
        for (const GarbageTensor& x : e.storages) {
            // The last segment that starts at or below the storage; it must hold it, and exist then.
            auto it = std::upper_bound(segments.begin(), segments.end(), x.addr,
                                       [&](uint64_t a, size_t b) { return a < blocks[b].addr; });
            if (it == segments.begin()) continue;
            const size_t k = static_cast<size_t>(it - segments.begin()) - 1;
            const Block& b = blocks[segments[k]];
            if (x.addr - b.addr >= b.size || b.t_alloc > e.t) continue;
            const uint64_t part = std::min({x.size, b.size - (x.addr - b.addr), left[k]});
            left[k] -= part;
            add_to(credited, part);
            add_to(site_bytes[{b.stack_id, b.python_stack_id}], part);
        }
        if (credited != 0) by_collection[*e.collection] = credited;
    }
    for (const auto& [key, bytes] : site_bytes) sites.push_back(GrowthSite{key.first, key.second, bytes});
}

void estimated_fate(const Report& r, const std::vector<Block>& blocks, const std::vector<StepRow>& rows,
                    const Growth& g, size_t max_sites, GrowthFate& fate) {
    fate.growth_bytes = g.to_bytes - g.from_bytes;
    // First the segments of the growth whose F records came during a collection (memory freed
    // outside PyTorch's cache): known, with their sites. Those collections are not estimated.
    std::map<size_t, uint64_t> known;
    known_frees(r, blocks, rows, g, known, fate.collected_sites);
    uint64_t freed_segments = 0;  // no longer live: not in the held memory below
    for (const auto& [index, bytes] : known) add_to(freed_segments, bytes);
    // And the storages that explained collections found in segments of the growth: tensors of the
    // garbage, whose memory went to PyTorch's cache when the collection freed them.
    std::vector<GrowthSite> explained;
    explained_frees(r, blocks, rows, g, known, explained);
    // One site's known and explained bytes together.
    for (const GrowthSite& e : explained) {
        auto it = std::find_if(fate.collected_sites.begin(), fate.collected_sites.end(), [&](const GrowthSite& s) {
            return s.stack_id == e.stack_id && s.python_stack_id == e.python_stack_id;
        });
        if (it == fate.collected_sites.end()) {
            fate.collected_sites.push_back(e);
        } else {
            add_to(it->bytes, e.bytes);
        }
    }
    keep_largest(fate.collected_sites, max_sites);
    for (const auto& [index, bytes] : known) add_to(fate.known_bytes, bytes);

    // Then PyTorch's counter: what collections freed in an ordinary step is the median over the
    // steps (the lower middle one).
    const std::vector<StepCollections> per_step = step_collections(r, rows);
    const bool sorted = sorted_by_end(rows);
    std::vector<uint64_t> freed;
    for (const StepCollections& c : per_step) freed.push_back(c.freed_bytes);
    std::nth_element(freed.begin(), freed.begin() + (freed.size() - 1) / 2, freed.end());
    fate.baseline_bytes = freed[(freed.size() - 1) / 2];
    // The window: the steps of the growth after its first step end, and the step after it; when the
    // growth ends with the last step, the collections after that step's end too (row rows.size()).
    fate.window_first = g.first + 1;
    fate.window_last = std::min(g.last + 1, rows.size() - 1);
    fate.window_tail = g.last + 1 == rows.size();
    const int64_t last_end = rows.back().t_end;
    std::vector<uint64_t> counted(rows.size() + 1, 0);  // per window step: the collections not known
    std::vector<size_t> step_of(r.collections.size(), kNever);
    for (size_t i = 0; i < r.collections.size(); ++i) {
        const Collection& c = r.collections[i];
        size_t step = rows.size();
        if (c.t <= last_end) {
            step = row_at(rows, sorted, c.t);
            if (step < fate.window_first || step > fate.window_last) continue;
        } else if (!fate.window_tail) {
            continue;
        }
        step_of[i] = step;
        add_to(fate.window_bytes, positive(c.cuda_bytes_freed));
        if (known.count(i) == 0) add_to(counted[step], positive(c.cuda_bytes_freed));
    }
    uint64_t beyond = 0;
    for (uint64_t bytes : counted) add_to(beyond, bytes - std::min(bytes, fate.baseline_bytes));
    fate.collected_bytes = std::min(saturating_add(fate.known_bytes, beyond), fate.growth_bytes);
    fate.held_bytes = fate.growth_bytes - fate.collected_bytes;
    // What collections freed into PyTorch's cache: its segments are still live.
    const uint64_t estimated = fate.collected_bytes - std::min(fate.collected_bytes, fate.known_bytes);
    const uint64_t cached = fate.collected_bytes - std::min(fate.collected_bytes, freed_segments);

    // The last full collection after the growth began, and the memory the growth added before it
    // (segments and physical memory allocated after the first step end, live at the last) less the
    // memory whose tensors a collection freed into PyTorch's cache: that memory was held through it.
    const int64_t begin = rows[g.first].t_end;
    for (const auto& [t, index] : full_collections(r)) {
        if (t > begin) fate.full_through = index;
    }
    if (fate.full_through) {
        const int64_t full_t = r.collections[*fate.full_through].t;
        uint64_t before = 0;
        for (const Block& b : blocks) {
            if (is_gpu(b.kind) && b.t_alloc > begin && b.t_alloc < full_t && b.t_free.value_or(INT64_MAX) > last_end) {
                add_to(before, b.size);
            }
        }
        for (const PhysicalHandle& h : r.handles) {
            if (h.device >= 0 && h.t_create > begin && h.t_create < full_t && h.t_gone.value_or(INT64_MAX) > last_end) {
                add_to(before, h.size);
            }
        }
        fate.held_tested_bytes = std::min(before - std::min(before, cached), fate.held_bytes);
        if (fate.held_tested_bytes == 0) fate.full_through.reset();
    }
    if (fate.collected_bytes == 0) return;
    // The known collections with what they freed of the growth; those of the window steps whose
    // other collections freed more than the median, with all they freed; in file order.
    for (size_t i = 0; i < r.collections.size(); ++i) {
        auto k = known.find(i);
        if (k != known.end()) {
            fate.collections.push_back(GrowthCollection{i, k->second});
        } else if (estimated != 0 && step_of[i] != kNever && counted[step_of[i]] > fate.baseline_bytes &&
                   positive(r.collections[i].cuda_bytes_freed) != 0) {
            fate.collections.push_back(GrowthCollection{i, positive(r.collections[i].cuda_bytes_freed)});
        }
    }
}

}  // namespace

GrowthItems growth_items(const Report& r, const std::vector<StepRow>& rows, const Growth& g, Series series) {
    GrowthItems items;
    if (g.last >= rows.size() || g.first >= g.last) return items;
    if (series == Series::Tensors) {
        exact_items(r, rows, g, items);
    } else {
        items.blocks = r.blocks;
    }
    return items;
}

GrowthFate growth_fate(const Report& r, const std::vector<StepRow>& rows, const Growth& g, Series series,
                       size_t max_sites) {
    if (g.last >= rows.size() || g.first >= g.last) return GrowthFate{};
    if (series != Series::Tensors) {
        // The blocks as they are: no copy.
        GrowthFate fate;
        estimated_fate(r, r.blocks, rows, g, max_sites, fate);
        return fate;
    }
    return growth_fate(r, rows, g, series, max_sites, growth_items(r, rows, g, series));
}

GrowthFate growth_fate(const Report& r, const std::vector<StepRow>& rows, const Growth& g, Series series,
                       size_t max_sites, const GrowthItems& items) {
    GrowthFate fate;
    if (g.last >= rows.size() || g.first >= g.last) return fate;
    fate.exact = series == Series::Tensors;
    if (fate.exact) {
        exact_fate(r, rows, max_sites, items, fate);
    } else {
        estimated_fate(r, items.blocks, rows, g, max_sites, fate);
    }
    return fate;
}

}  // namespace memguard::report
