#include "report/timeline.h"

#include <algorithm>
#include <climits>
#include <functional>
#include <map>
#include <queue>
#include <set>

#include "report/levels.h"

namespace memguard::report {

namespace {

void fill_block_max(Timeline& tl, Series series, std::vector<uint64_t>& out) {
    size_t n = tl.points.size();
    out.assign((n + Timeline::kBlock - 1) / Timeline::kBlock, 0);
    for (size_t i = 0; i < n; ++i) {
        uint64_t& m = out[i / Timeline::kBlock];
        m = std::max(m, tl.level(i, series));
    }
}

}  // namespace

std::pair<uint64_t, size_t> Timeline::max_level(size_t from, size_t to, Series series) const {
    const std::vector<uint64_t>& blocks = series == Series::Tensors ? tensor_block_max : block_max;
    to = std::min(to, points.size() - 1);
    from = std::min(from, to);
    uint64_t best = level(from, series);
    size_t at = from;
    size_t i = from;
    while (i <= to) {
        // Skip whole blocks that cannot beat the best so far.
        if (i % kBlock == 0 && i + kBlock - 1 <= to && i / kBlock < blocks.size() && blocks[i / kBlock] <= best) {
            i += kBlock;
            continue;
        }
        if (level(i, series) > best) {
            best = level(i, series);
            at = i;
        }
        ++i;
    }
    return {best, at};
}

Timeline build_timeline(const Report& r) {
    Timeline tl;
    tl.has_vmm = !r.reservations.empty() || !r.handles.empty() || !r.mappings.empty();
    tl.has_tensors = !r.tensors.empty();
    tl.points.reserve(r.events.size() + 1);
    LevelWalk walk(r);
    tl.points.push_back(LevelPoint{});
    while (walk.step()) {
        const Levels& l = walk.levels();
        tl.points.push_back(
            LevelPoint{r.events[walk.applied() - 1].t, l.gpu_bytes, l.mapped_bytes, l.reserved_bytes, l.tensor_bytes});
    }
    fill_block_max(tl, Series::Gpu, tl.block_max);
    if (tl.has_tensors) fill_block_max(tl, Series::Tensors, tl.tensor_block_max);
    return tl;
}

std::vector<PhaseStats> phase_stats(const Report& r, const Timeline& tl, Series series) {
    std::vector<PhaseStats> out;
    out.reserve(r.phases.size());
    std::map<std::string, uint32_t> seen;  // name -> phases so far
    // Phases still open, by family, in order of begin: NVTX push/pop and API phases nest per thread
    // (family (false, tid)); NVTX start/end ranges are process-wide and nest among themselves
    // (family (true, 0)). The ones that ended wait in a heap by the line of their b, so that a run of
    // many phases (never ended, or deeply nested) costs O(n log n), not O(n^2).
    using Family = std::pair<bool, uint64_t>;
    std::map<Family, std::set<size_t>> open;
    using Ending = std::pair<size_t, size_t>;  // (line of b, phase index)
    std::priority_queue<Ending, std::vector<Ending>, std::greater<Ending>> endings;
    auto family_of = [&r](size_t i) {
        const Phase& p = r.phases[i];
        return p.source == PhaseSource::NvtxRange ? Family{true, 0} : Family{false, p.tid};
    };
    for (size_t i = 0; i < r.phases.size(); ++i) {
        const Phase& p = r.phases[i];
        PhaseStats s;
        s.index = i;
        s.occurrence = seen[p.name]++;
        size_t begin = p.events_at_begin;
        size_t end = p.t_end ? p.events_at_end : r.events.size();
        while (!endings.empty() && endings.top().first < p.begin_line) {
            open[family_of(endings.top().second)].erase(endings.top().second);
            endings.pop();
        }
        std::set<size_t>& family = open[family_of(i)];
        s.depth = static_cast<int>(std::min<size_t>(family.size(), INT32_MAX));
        if (!family.empty()) s.parent = r.phases[*family.rbegin()].id;
        family.insert(i);
        if (p.end_line != 0) endings.emplace(p.end_line, i);
        s.entry_bytes = tl.level(std::min(begin, tl.points.size() - 1), series);
        auto [peak, at] = tl.max_level(begin, end, series);
        s.peak_bytes = peak;
        s.peak_events = at;
        s.peak_t = std::max(p.t_begin, tl.points[at].t);
        s.exit_bytes = tl.level(std::min(end, tl.points.size() - 1), series);
        s.t_end = p.t_end ? *p.t_end : r.end_t;
        out.push_back(s);
    }
    return out;
}

uint64_t live_at_mark(const Mark& m, const Timeline& tl, Series series) {
    return tl.level(std::min(m.events_before, tl.points.size() - 1), series);
}

}  // namespace memguard::report
