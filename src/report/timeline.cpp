#include "report/timeline.h"

#include <algorithm>
#include <map>

#include "report/levels.h"

namespace memguard::report {

namespace {

void fill_block_max(Timeline& tl) {
    size_t n = tl.points.size();
    tl.block_max.assign((n + Timeline::kBlock - 1) / Timeline::kBlock, 0);
    for (size_t i = 0; i < n; ++i) {
        uint64_t& m = tl.block_max[i / Timeline::kBlock];
        m = std::max(m, tl.points[i].live);
    }
}

}  // namespace

std::pair<uint64_t, size_t> Timeline::max_live(size_t from, size_t to) const {
    to = std::min(to, points.size() - 1);
    from = std::min(from, to);
    uint64_t best = points[from].live;
    size_t at = from;
    size_t i = from;
    while (i <= to) {
        // Skip whole blocks that cannot beat the best so far.
        if (i % kBlock == 0 && i + kBlock - 1 <= to && block_max[i / kBlock] <= best) {
            i += kBlock;
            continue;
        }
        if (points[i].live > best) {
            best = points[i].live;
            at = i;
        }
        ++i;
    }
    return {best, at};
}

Timeline build_timeline(const Report& r, Series series) {
    Timeline tl;
    tl.series = series;
    tl.has_vmm = !r.reservations.empty() || !r.handles.empty() || !r.mappings.empty();
    tl.has_tensors = !r.tensors.empty();
    tl.points.reserve(r.events.size() + 1);
    LevelWalk walk(r);
    tl.points.push_back(LevelPoint{});
    while (walk.step()) {
        const Levels& l = walk.levels();
        const uint64_t live = series == Series::Tensors ? l.tensor_bytes : l.gpu_bytes;
        tl.points.push_back(
            LevelPoint{r.events[walk.applied() - 1].t, live, l.mapped_bytes, l.reserved_bytes, l.tensor_bytes});
    }
    fill_block_max(tl);
    return tl;
}

std::vector<PhaseStats> phase_stats(const Report& r, const Timeline& tl) {
    std::vector<PhaseStats> out;
    out.reserve(r.phases.size());
    std::map<std::string, uint32_t> seen;  // name -> phases so far
    // Phases still open, in order of begin: NVTX push/pop and API phases nest per thread; NVTX
    // start/end ranges are process-wide and nest among themselves.
    std::vector<size_t> open;
    for (size_t i = 0; i < r.phases.size(); ++i) {
        const Phase& p = r.phases[i];
        PhaseStats s;
        s.index = i;
        s.occurrence = seen[p.name]++;
        size_t begin = p.events_at_begin;
        size_t end = p.t_end ? p.events_at_end : r.events.size();
        open.erase(std::remove_if(open.begin(), open.end(),
                                  [&](size_t j) {
                                      const Phase& q = r.phases[j];
                                      return q.end_line != 0 && q.end_line < p.begin_line;
                                  }),
                   open.end());
        bool range = p.source == PhaseSource::NvtxRange;
        for (size_t j : open) {
            const Phase& q = r.phases[j];
            bool same_family = range ? q.source == PhaseSource::NvtxRange
                                     : q.source != PhaseSource::NvtxRange && q.tid == p.tid;
            if (!same_family) continue;
            ++s.depth;
            s.parent = q.id;
        }
        open.push_back(i);
        s.entry_bytes = tl.points[std::min(begin, tl.points.size() - 1)].live;
        auto [peak, at] = tl.max_live(begin, end);
        s.peak_bytes = peak;
        s.peak_events = at;
        s.peak_t = std::max(p.t_begin, tl.points[at].t);
        s.exit_bytes = tl.points[std::min(end, tl.points.size() - 1)].live;
        s.t_end = p.t_end ? *p.t_end : r.end_t;
        out.push_back(s);
    }
    return out;
}

uint64_t live_at_mark(const Mark& m, const Timeline& tl) {
    return tl.points[std::min(m.events_before, tl.points.size() - 1)].live;
}

}  // namespace memguard::report
