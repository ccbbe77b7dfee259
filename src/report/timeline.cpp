#include "report/timeline.h"

#include <algorithm>
#include <map>

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
