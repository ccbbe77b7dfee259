#include "report/analysis.h"

#include <algorithm>
#include <unordered_map>

#include "report/captures.h"
#include "report/collections.h"

namespace memguard::report {

namespace {

/// Live bytes and blocks of one category, and its peak.
struct Level {
    uint64_t bytes = 0;
    uint64_t blocks = 0;
    uint64_t peak = 0;
    std::optional<int64_t> peak_t;

    /// Returns true when this change set a new peak.
    bool change(const Block& b, bool live, int64_t t) {
        if (live) {
            bytes += b.size;
            ++blocks;
        } else {
            bytes -= std::min(bytes, b.size);
            blocks -= blocks > 0 ? 1 : 0;
        }
        if (bytes <= peak) return false;
        peak = bytes;
        peak_t = t;
        return true;
    }
};

void count_blocks(const Report& r, Summary& s) {
    s.allocations = r.blocks.size();
    for (const Block& b : r.blocks) {
        KindStats& k = s.by_kind[kind_index(b.kind)];
        ++k.allocations;
        k.bytes_allocated += b.size;
        if (b.t_free) ++k.frees;
        if (b.t_free) ++s.frees;
        if (!is_gpu(b.kind)) continue;
        DeviceStats& d = s.by_device[b.device];
        ++d.allocations;
        d.bytes_allocated += b.size;
    }
    for (const Event& e : r.events) s.failed_frees += e.type == Event::Restore ? 1 : 0;
}

void count_failures(const Report& r, Summary& s) {
    for (const FailedAlloc& f : r.failures) {
        ++s.failed_allocations;
        s.oom_events += f.is_oom() ? 1 : 0;
        if (!is_gpu(f.kind)) continue;
        DeviceStats& d = s.by_device[f.device];
        ++d.failed_allocations;
        d.oom_events += f.is_oom() ? 1 : 0;
    }
}

void replay_levels(const Report& r, Summary& s) {
    Level gpu;
    std::array<Level, kKindCount> kinds;
    std::map<int, Level> devices;
    for (size_t i = 0; i < r.events.size(); ++i) {
        const Event& e = r.events[i];
        const Block& b = r.blocks[e.block];
        bool live = e.type != Event::Free;
        kinds[kind_index(b.kind)].change(b, live, e.t);
        if (!is_gpu(b.kind)) continue;
        devices[b.device].change(b, live, e.t);
        if (gpu.change(b, live, e.t)) s.peak_events = i + 1;
    }
    s.peak_bytes = gpu.peak;
    s.peak_t = gpu.peak_t;
    s.live_bytes_at_exit = gpu.bytes;
    s.live_blocks_at_exit = gpu.blocks;
    for (size_t k = 0; k < kKindCount; ++k) {
        s.by_kind[k].peak_bytes = kinds[k].peak;
        s.by_kind[k].peak_t = kinds[k].peak_t;
        s.by_kind[k].live_bytes_at_exit = kinds[k].bytes;
        s.by_kind[k].live_blocks_at_exit = kinds[k].blocks;
    }
    for (const auto& [dev, level] : devices) {
        DeviceStats& d = s.by_device[dev];
        d.peak_bytes = level.peak;
        d.peak_t = level.peak_t;
        d.live_bytes_at_exit = level.bytes;
        d.live_blocks_at_exit = level.blocks;
    }
}

size_t events_until(const Report& r, int64_t t) {
    size_t n = 0;
    while (n < r.events.size() && r.events[n].t <= t) ++n;
    return n;
}

void count_captures(const Report& r, Summary& s) {
    s.captures = r.captures.size();
    for (const Capture& c : r.captures) s.graphs_alive_at_exit += c.graph && !c.t_graph_destroy ? 1 : 0;
    s.execs = r.execs.size();
    for (const GraphExec& e : r.execs) {
        s.execs_alive_at_exit += e.t_destroy ? 0 : 1;
        s.launches += e.launches;
    }
    s.unsafe_calls = r.hazards.unsafe_calls.size();
    s.frees_while_graph_alive = r.hazards.frees_while_graph_alive.size();
    s.warmup_retention = retention_boundaries(r).size();
}

void count_collections(const Report& r, Summary& s) {
    auto totals = collection_totals(r);
    for (size_t i = 0; i < kTriggerCount; ++i) {
        s.collections[i] = totals[i].count;
        s.cuda_bytes_freed[i] = totals[i].cuda_bytes_freed;
    }
    s.compiles = r.compiles.size();
}

}  // namespace

Summary summarize(const Report& r) {
    Summary s;
    s.duration_ns = r.end_t;
    s.complete = r.complete;
    count_blocks(r, s);
    count_failures(r, s);
    replay_levels(r, s);
    count_captures(r, s);
    count_collections(r, s);
    return s;
}

LiveSet live_at(const Report& r, const TimePoint& at) {
    LiveSet out;
    if (at.type == TimePoint::Exit) {
        out.events_applied = r.events.size();
        out.t = r.end_t;
    } else if (at.type == TimePoint::Peak) {
        Summary s = summarize(r);
        out.events_applied = s.peak_events;
        out.t = s.peak_t.value_or(0);
    } else {
        out.events_applied = events_until(r, at.t);
        out.t = at.t;
    }
    std::vector<char> live(r.blocks.size(), 0);
    for (size_t i = 0; i < out.events_applied; ++i) {
        live[r.events[i].block] = r.events[i].type != Event::Free;
    }
    for (size_t b = 0; b < live.size(); ++b) {
        if (live[b]) out.blocks.push_back(b);
    }
    return out;
}

bool kind_matches(Kind k, KindFilter filter) {
    switch (filter) {
    case KindFilter::Gpu: return is_gpu(k);
    case KindFilter::Pinned: return k == Kind::Pinned;
    case KindFilter::All: return true;
    }
    return false;
}

SiteTable group_by_site(const Report& r, const LiveSet& live, KindFilter filter) {
    SiteTable table;
    std::unordered_map<uint64_t, size_t> index;  // (stack id, Python stack id) -> site
    for (size_t b : live.blocks) {
        const Block& block = r.blocks[b];
        if (!kind_matches(block.kind, filter)) continue;
        uint64_t key = (uint64_t{block.stack_id} << 32) | block.python_stack_id;
        auto [it, inserted] = index.emplace(key, table.sites.size());
        if (inserted) table.sites.push_back(Site{block.stack_id, block.python_stack_id});
        Site& site = table.sites[it->second];
        site.bytes += block.size;
        ++site.blocks;
        table.total_bytes += block.size;
        ++table.total_blocks;
    }
    std::sort(table.sites.begin(), table.sites.end(), [](const Site& a, const Site& b) {
        if (a.bytes != b.bytes) return a.bytes > b.bytes;
        if (a.blocks != b.blocks) return a.blocks > b.blocks;
        if (a.stack_id != b.stack_id) return a.stack_id < b.stack_id;
        return a.python_stack_id < b.python_stack_id;
    });
    return table;
}

std::vector<Pool> group_by_pool(const Report& r, const LiveSet& live, KindFilter filter) {
    std::map<uint32_t, LiveSet> by_owner;  // ordered: 0 (ordinary) first, then capture ids
    for (size_t b : live.blocks) {
        const Block& block = r.blocks[b];
        if (!kind_matches(block.kind, filter)) continue;
        LiveSet& set = by_owner[block.capture_id];
        set.t = live.t;
        set.events_applied = live.events_applied;
        set.blocks.push_back(b);
    }
    std::vector<Pool> pools;
    for (const auto& [capture_id, set] : by_owner) pools.push_back(Pool{capture_id, group_by_site(r, set, filter)});
    return pools;
}

}  // namespace memguard::report
