#include "report/captures.h"

#include <algorithm>
#include <map>
#include <unordered_map>

#include "report/saturate.h"

namespace memguard::report {

std::vector<CaptureStats> capture_stats(const Report& r) {
    std::vector<CaptureStats> out;
    std::unordered_map<uint32_t, size_t> index;
    for (const Capture& c : r.captures) {
        CaptureStats s;
        s.capture = &c;
        s.graph_alive_at_exit = c.graph && !c.t_graph_destroy;
        index.emplace(c.id, out.size());
        out.push_back(s);
    }
    for (size_t i = 0; i < r.execs.size(); ++i) {
        auto it = index.find(r.execs[i].capture_id);
        if (it == index.end()) continue;
        CaptureStats& s = out[it->second];
        s.execs.push_back(i);
        s.launches += r.execs[i].launches;
        s.execs_alive_at_exit += r.execs[i].t_destroy ? 0 : 1;
    }
    // What a capture owns: its blocks, its tensor blocks (allocator mode) and its physical handles,
    // each counted into its own fields.
    using Field = uint64_t CaptureStats::*;
    auto own = [&](uint32_t capture_id, uint64_t size, bool live, Field bytes, Field count, Field live_bytes,
                   Field live_count) {
        auto it = index.find(capture_id);
        if (capture_id == 0 || it == index.end()) return;
        CaptureStats& s = out[it->second];
        add_to(s.*bytes, size);
        ++(s.*count);
        if (live) {
            add_to(s.*live_bytes, size);
            ++(s.*live_count);
        }
    };
    for (const Block& b : r.blocks) {
        own(b.capture_id, b.size, !b.t_free, &CaptureStats::owned_bytes, &CaptureStats::owned_blocks,
            &CaptureStats::live_owned_bytes_at_exit, &CaptureStats::live_owned_blocks_at_exit);
    }
    for (const Tensor& t : r.tensors) {
        own(t.capture_id, t.size, !t.t_free, &CaptureStats::owned_tensor_bytes, &CaptureStats::owned_tensor_blocks,
            &CaptureStats::live_owned_tensor_bytes_at_exit, &CaptureStats::live_owned_tensor_blocks_at_exit);
    }
    for (const PhysicalHandle& h : r.handles) {
        own(h.capture_id, h.size, !h.t_gone, &CaptureStats::owned_bytes, &CaptureStats::owned_handles,
            &CaptureStats::live_owned_bytes_at_exit, &CaptureStats::live_owned_handles_at_exit);
    }
    for (CaptureStats& s : out) {
        s.destroyed = s.capture->t_end && !s.graph_alive_at_exit && s.execs_alive_at_exit == 0;
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const CaptureStats& a, const CaptureStats& b) { return a.capture->id < b.capture->id; });
    return out;
}

std::vector<RetentionBoundary> retention_boundaries(const Report& r) {
    std::vector<RetentionBoundary> out;
    std::map<std::pair<uint32_t, CapturePhase>, size_t> index;
    for (const WarmupRetention& w : r.hazards.warmup_retention) {
        auto [it, inserted] = index.emplace(std::make_pair(w.capture_id, w.phase), out.size());
        if (inserted) {
            RetentionBoundary b;
            b.capture_id = w.capture_id;
            b.phase = w.phase;
            b.t = w.t;
            b.since = w.since;
            out.push_back(b);
        }
        RetentionBoundary& b = out[it->second];
        add_to(b.bytes, w.bytes);
        add_to(b.blocks, w.blocks);
        auto site = std::find_if(b.sites.begin(), b.sites.end(),
                                 [&](const RetentionSite& s) { return s.stack_id == w.stack_id; });
        if (site == b.sites.end()) site = b.sites.insert(b.sites.end(), RetentionSite{w.stack_id});
        add_to(site->blocks, w.blocks);
        add_to(site->bytes, w.bytes);
    }
    for (RetentionBoundary& b : out) {
        std::sort(b.sites.begin(), b.sites.end(), [](const RetentionSite& x, const RetentionSite& y) {
            if (x.bytes != y.bytes) return x.bytes > y.bytes;
            if (x.blocks != y.blocks) return x.blocks > y.blocks;
            return x.stack_id < y.stack_id;
        });
    }
    std::sort(out.begin(), out.end(), [](const RetentionBoundary& x, const RetentionBoundary& y) {
        if (x.bytes != y.bytes) return x.bytes > y.bytes;
        if (x.blocks != y.blocks) return x.blocks > y.blocks;
        if (x.t != y.t) return x.t < y.t;
        if (x.capture_id != y.capture_id) return x.capture_id < y.capture_id;
        return x.phase < y.phase;
    });
    return out;
}

}  // namespace memguard::report
