#include "report/analysis.h"

#include <algorithm>
#include <tuple>

#include "report/captures.h"
#include "report/collections.h"
#include "report/saturate.h"
#include "report/stream.h"

namespace memguard::report {

namespace {

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

void count_virtual(const Report& r, Summary& s) {
    VirtualStats& v = s.virt;
    v.unmaps = r.unmaps;
    v.imports = r.imports.size();
    for (const Mapping& m : r.mappings) v.imported_mapped_bytes += m.import && !m.t_unmap ? m.size : 0;
    v.any = !r.reservations.empty() || !r.handles.empty() || !r.mappings.empty() || !r.imports.empty();
    // Handles on a device count on that device even when nothing else was allocated there.
    for (const PhysicalHandle& h : r.handles) {
        if (h.device >= 0) s.by_device[h.device];
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

bool SummaryBuilder::on_event(const Report& r, const Event& e) {
    if (!walk_.shared()) walk_.apply(r, e);
    const LevelWalk& walk = walk_.get(r);
    Summary& s = s_;
    switch (e.type) {
    case Event::Alloc: {
        const Block& b = r.blocks[e.block];
        ++s.allocations;
        KindStats& k = s.by_kind[kind_index(b.kind)];
        ++k.allocations;
        add_to(k.bytes_allocated, b.size);
        if (is_gpu(b.kind)) {
            DeviceStats& d = by_device_.get(s.by_device, b.device);
            ++d.allocations;
            add_to(d.bytes_allocated, b.size);
        }
        break;
    }
    // A block counts as freed when its F is not undone by an R.
    case Event::Free:
        ++s.frees;
        ++s.by_kind[kind_index(r.blocks[e.block].kind)].frees;
        break;
    case Event::Restore: {
        ++s.failed_frees;
        s.frees -= s.frees != 0 ? 1 : 0;
        uint64_t& k = s.by_kind[kind_index(r.blocks[e.block].kind)].frees;
        k -= k != 0 ? 1 : 0;
        break;
    }
    case Event::Reserve: ++s.virt.reserves; break;
    case Event::AddressFree: ++s.virt.address_frees; break;
    case Event::Create: ++s.virt.creates; break;
    case Event::Release: ++s.virt.releases; break;
    case Event::Map: ++s.virt.maps; break;
    case Event::Unmap: break;
    case Event::TensorAlloc: ++s.tensor_allocations; break;
    case Event::TensorFree:
        ++s.tensor_frees;
        s.tensor_gc_frees += r.tensors[e.block].freed_in_gc ? 1 : 0;
        break;
    }
    const Levels& l = walk.levels();
    if (e.is_block()) {
        size_t k = kind_index(r.blocks[e.block].kind);
        kinds_[k].update(l.kind_bytes[k], e.t);
    }
    if (auto dev = walk.last_gpu_device()) {
        device_peak_.get(devices_, *dev).update(walk.last_gpu_device_bytes(), e.t);
    }
    if (walk.last_changed_gpu() && gpu_.update(l.gpu_bytes, e.t)) s.peak_events = walk.applied();
    if (walk.last_changed_tensor() && tensor_.update(l.tensor_bytes, e.t)) {
        s.tensor_peak_events = walk.applied();
        s.tensor_peak_requested = l.tensor_requested;
    }
    mapped_.update(l.mapped_bytes, e.t);
    physical_.update(l.physical_bytes, e.t);
    reserved_.update(l.reserved_bytes, e.t);
    return true;
}

void SummaryBuilder::on_end(const Report& r) {
    const LevelWalk& walk = walk_.get(r);
    Summary& s = s_;
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        if (walk.block_live(b) && is_gpu(r.blocks[b].kind)) ++s.by_device[r.blocks[b].device].live_blocks_at_exit;
    }
    for (size_t h = 0; h < r.handles.size(); ++h) {
        if (walk.handle_live(h) && r.handles[h].device >= 0) ++s.by_device[r.handles[h].device].live_handles_at_exit;
    }
}

void SummaryBuilder::fold_out(const Report& r, FoldWriter& w) {
    (void)r;
    const Summary& s = s_;
    w.figure("summary",
             {fold_of(s.allocations), fold_of(s.frees), fold_of(s.failed_frees), fold_of(s.tensor_allocations),
              fold_of(s.tensor_frees), fold_of(s.tensor_gc_frees), fold_of(s.virt.reserves),
              fold_of(s.virt.address_frees), fold_of(s.virt.creates), fold_of(s.virt.releases), fold_of(s.virt.maps),
              fold_of(s.peak_events), fold_of(s.tensor_peak_events), fold_of(s.tensor_peak_requested)});
    for (size_t k = 0; k < kKindCount; ++k) {
        const KindStats& x = s.by_kind[k];
        w.figure("summary.kind", {fold_of(k), fold_of(x.allocations), fold_of(x.frees), fold_of(x.bytes_allocated)});
    }
    for (const auto& [dev, d] : s.by_device) {
        w.figure("summary.device", {dev, fold_of(d.allocations), fold_of(d.bytes_allocated)});
    }
    // The peaks: 0 GPU, 1 mapped, 2 physical, 3 reserved, 4 tensor, 10 + k kind k.
    auto peak = [&w](int64_t series, const Peak& p) {
        w.figure("summary.peak", {series, fold_of(p.bytes), p.t ? 1 : 0, p.t.value_or(0)});
    };
    peak(0, gpu_), peak(1, mapped_), peak(2, physical_), peak(3, reserved_), peak(4, tensor_);
    for (size_t k = 0; k < kKindCount; ++k) peak(10 + static_cast<int64_t>(k), kinds_[k]);
    for (const auto& [dev, p] : devices_) {
        w.figure("summary.device_peak", {dev, fold_of(p.bytes), p.t ? 1 : 0, p.t.value_or(0)});
    }
}

void SummaryBuilder::fold_in(const Report& r, const Fold& f) {
    walk_.fold_in(r, f.at.events);
    s_ = Summary{};
    by_device_ = DeviceEntry<DeviceStats>{};
    device_peak_ = DeviceEntry<Peak>{};
    gpu_ = mapped_ = physical_ = reserved_ = tensor_ = Peak{};
    kinds_ = {};
    devices_.clear();
    Summary& s = s_;
    bool found = false;
    f.each("summary", [&](const Fold::Figure& x) {
        found = true;
        uint64_t* to[] = {&s.allocations,  &s.frees,           &s.failed_frees,  &s.tensor_allocations,
                          &s.tensor_frees, &s.tensor_gc_frees, &s.virt.reserves, &s.virt.address_frees,
                          &s.virt.creates, &s.virt.releases,   &s.virt.maps,     &s.tensor_peak_requested};
        for (size_t i = 0; i < 11; ++i) *to[i] = fold_u64(x, i);
        s.peak_events = static_cast<size_t>(fold_value(x, 11));
        s.tensor_peak_events = static_cast<size_t>(fold_value(x, 12));
        *to[11] = fold_u64(x, 13);
    });
    if (!found) throw BadFold("no figure 'summary'");
    f.each("summary.kind", [&](const Fold::Figure& x) {
        const int64_t k = fold_value(x, 0);
        if (k >= static_cast<int64_t>(kKindCount)) throw BadFold("summary.kind: no kind " + std::to_string(k));
        KindStats& to = s.by_kind[static_cast<size_t>(k)];
        to.allocations = fold_u64(x, 1);
        to.frees = fold_u64(x, 2);
        to.bytes_allocated = fold_u64(x, 3);
    });
    auto device = [](const Fold::Figure& x) {
        const int64_t d = fold_value(x, 0, -1);
        if (d > kMaxDevice) throw BadFold(x.name + ": no device " + std::to_string(d));
        return static_cast<int>(d);
    };
    f.each("summary.device", [&](const Fold::Figure& x) {
        DeviceStats& d = s.by_device[device(x)];
        d.allocations = fold_u64(x, 1);
        d.bytes_allocated = fold_u64(x, 2);
    });
    auto peak_of = [](const Fold::Figure& x) {
        Peak p;
        p.bytes = fold_u64(x, 1);
        if (fold_value(x, 2) != 0) p.t = fold_value(x, 3, INT64_MIN);
        return p;
    };
    f.each("summary.peak", [&](const Fold::Figure& x) {
        const int64_t series = fold_value(x, 0);
        Peak* to = nullptr;
        switch (series) {
        case 0: to = &gpu_; break;
        case 1: to = &mapped_; break;
        case 2: to = &physical_; break;
        case 3: to = &reserved_; break;
        case 4: to = &tensor_; break;
        default:
            if (series >= 10 && series < 10 + static_cast<int64_t>(kKindCount)) to = &kinds_[series - 10];
        }
        if (to == nullptr) throw BadFold("summary.peak: no series " + std::to_string(series));
        *to = peak_of(x);
    });
    f.each("summary.device_peak", [&](const Fold::Figure& x) { devices_[device(x)] = peak_of(x); });
}

Summary SummaryBuilder::take(const Report& r) {
    const Levels& end = walk_.get(r).levels();
    Summary& s = s_;
    s.duration_ns = r.end_t;
    s.complete = r.complete;
    count_failures(r, s);
    count_virtual(r, s);
    s.peak_bytes = gpu_.bytes;
    s.peak_t = gpu_.t;
    s.live_bytes_at_exit = end.gpu_bytes;
    s.live_blocks_at_exit = end.gpu_blocks;
    s.tensor_peak_bytes = tensor_.bytes;
    s.tensor_peak_t = tensor_.t;
    s.tensor_live_bytes_at_exit = end.tensor_bytes;
    s.tensor_live_blocks_at_exit = end.tensor_blocks;
    for (size_t k = 0; k < kKindCount; ++k) {
        s.by_kind[k].peak_bytes = kinds_[k].bytes;
        s.by_kind[k].peak_t = kinds_[k].t;
        s.by_kind[k].live_bytes_at_exit = end.kind_bytes[k];
        s.by_kind[k].live_blocks_at_exit = end.kind_blocks[k];
    }
    for (const auto& [dev, peak] : devices_) {
        DeviceStats& d = s.by_device[dev];
        d.peak_bytes = peak.bytes;
        d.peak_t = peak.t;
        auto it = end.device_bytes.find(dev);
        d.live_bytes_at_exit = it == end.device_bytes.end() ? 0 : it->second;
    }
    VirtualStats& v = s.virt;
    v.reserved_bytes = end.reserved_bytes;
    v.mapped_bytes = end.mapped_bytes;
    v.physical_bytes = end.physical_bytes;
    v.physical_device_bytes = end.physical_device_bytes;
    v.physical_handles = end.physical_handles;
    v.physical_device_handles = end.physical_device_handles;
    v.peak_reserved_bytes = reserved_.bytes;
    v.peak_mapped_bytes = mapped_.bytes;
    v.peak_mapped_t = mapped_.t;
    v.peak_physical_bytes = physical_.bytes;
    v.peak_physical_t = physical_.t;
    count_captures(r, s);
    count_collections(r, s);
    s.tensor_oom_events = r.tensor_ooms.size();
    return std::move(s_);
}

Summary summarize(const Report& r) {
    SummaryBuilder b;
    for (const Event& e : r.events) b.on_event(r, e);
    b.on_end(r);
    return b.take(r);
}

namespace {
/// The blocks, handles and tensor blocks live at the walk's position.
void fill_live(const Report& r, const LevelWalk& walk, LiveSet& out) {
    for (size_t b = 0; b < r.blocks.size(); ++b) {
        if (walk.block_live(b)) out.blocks.push_back(b);
    }
    for (size_t h = 0; h < r.handles.size(); ++h) {
        if (walk.handle_live(h)) out.handles.push_back(h);
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        if (walk.tensor_live(i)) out.tensors.push_back(i);
    }
}
}  // namespace

LiveSet live_at(const Report& r, const TimePoint& at, const Summary* known) {
    LiveSet out;
    if (at.type == TimePoint::Exit) {
        out.events_applied = r.events.size();
        out.t = r.end_t;
    } else if (at.type == TimePoint::Peak) {
        const Summary s = known ? *known : summarize(r);
        out.events_applied = s.peak_events;
        out.t = s.peak_t.value_or(0);
    } else {
        out.events_applied = events_until(r, at.t);
        out.t = at.t;
    }
    LevelWalk walk(r);
    walk.advance_to(out.events_applied);
    fill_live(r, walk, out);
    return out;
}

LiveSet tensors_live_at(const Report& r, const TimePoint& at, bool* has_peak, const Summary* known) {
    if (has_peak != nullptr) *has_peak = true;
    if (at.type != TimePoint::Peak) return live_at(r, at, known);
    const Summary s = known ? *known : summarize(r);
    if (has_peak != nullptr) *has_peak = s.tensor_peak_t.has_value();
    LiveSet out;
    LevelWalk walk(r);
    walk.advance_to(s.tensor_peak_events);
    out.events_applied = s.tensor_peak_events;
    out.t = s.tensor_peak_t.value_or(0);
    fill_live(r, walk, out);
    return out;
}

bool kind_matches(Kind k, KindFilter filter) {
    switch (filter) {
    case KindFilter::Gpu: return is_gpu(k);
    case KindFilter::Pinned: return k == Kind::Pinned;
    case KindFilter::All: return true;
    case KindFilter::Physical: return false;
    }
    return false;
}

bool handle_matches(const PhysicalHandle& h, KindFilter filter) {
    switch (filter) {
    case KindFilter::Gpu: return h.device >= 0;
    case KindFilter::Pinned: return false;
    case KindFilter::All:
    case KindFilter::Physical: return true;
    }
    return false;
}

SiteTable group_by_site(const Report& r, const LiveSet& live, KindFilter filter) {
    SiteTable table;
    std::map<std::tuple<bool, uint32_t, uint32_t>, size_t> index;  // (physical, stack, Python stack) -> site
    auto add = [&](bool physical, uint32_t stack_id, uint32_t python_stack_id, uint64_t size) {
        auto [it, inserted] = index.emplace(std::make_tuple(physical, stack_id, python_stack_id), table.sites.size());
        if (inserted) table.sites.push_back(Site{stack_id, python_stack_id, physical});
        Site& site = table.sites[it->second];
        add_to(site.bytes, size);
        ++site.blocks;
        add_to(table.total_bytes, size);
    };
    for (size_t b : live.blocks) {
        const Block& block = r.blocks[b];
        if (!kind_matches(block.kind, filter)) continue;
        add(false, block.stack_id, block.python_stack_id, block.size);
        ++table.total_blocks;
    }
    for (size_t h : live.handles) {
        const PhysicalHandle& handle = r.handles[h];
        if (!handle_matches(handle, filter)) continue;
        add(true, handle.stack_id, handle.python_stack_id, handle.size);
        ++table.total_handles;
    }
    std::sort(table.sites.begin(), table.sites.end(), [](const Site& a, const Site& b) {
        if (a.bytes != b.bytes) return a.bytes > b.bytes;
        if (a.blocks != b.blocks) return a.blocks > b.blocks;
        if (a.physical != b.physical) return !a.physical;
        if (a.stack_id != b.stack_id) return a.stack_id < b.stack_id;
        return a.python_stack_id < b.python_stack_id;
    });
    return table;
}

std::vector<Pool> group_by_pool(const Report& r, const LiveSet& live, KindFilter filter) {
    std::map<uint32_t, LiveSet> by_owner;  // ordered: 0 (ordinary) first, then capture ids
    auto owner = [&](uint32_t capture_id) -> LiveSet& {
        LiveSet& set = by_owner[capture_id];
        set.t = live.t;
        set.events_applied = live.events_applied;
        return set;
    };
    for (size_t b : live.blocks) {
        const Block& block = r.blocks[b];
        if (kind_matches(block.kind, filter)) owner(block.capture_id).blocks.push_back(b);
    }
    for (size_t h : live.handles) {
        const PhysicalHandle& handle = r.handles[h];
        if (handle_matches(handle, filter)) owner(handle.capture_id).handles.push_back(h);
    }
    std::vector<Pool> pools;
    for (const auto& [capture_id, set] : by_owner) pools.push_back(Pool{capture_id, group_by_site(r, set, filter)});
    return pools;
}

SiteTable group_tensors_by_site(const Report& r, const LiveSet& live) {
    SiteTable table;
    std::map<std::pair<uint32_t, uint32_t>, size_t> index;  // (stack, Python stack) -> site
    for (size_t i : live.tensors) {
        const Tensor& x = r.tensors[i];
        auto [it, inserted] = index.emplace(std::make_pair(x.stack_id, x.python_stack_id), table.sites.size());
        if (inserted) table.sites.push_back(Site{x.stack_id, x.python_stack_id, false});
        Site& site = table.sites[it->second];
        add_to(site.bytes, x.size);
        add_to(site.requested, x.requested);
        ++site.blocks;
        add_to(table.total_bytes, x.size);
        add_to(table.total_requested, x.requested);
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

std::vector<Pool> group_tensors_by_pool(const Report& r, const LiveSet& live) {
    std::map<uint32_t, LiveSet> by_owner;
    for (size_t i : live.tensors) by_owner[r.tensors[i].capture_id].tensors.push_back(i);
    std::vector<Pool> pools;
    for (const auto& [capture_id, set] : by_owner) pools.push_back(Pool{capture_id, group_tensors_by_site(r, set)});
    return pools;
}

}  // namespace memguard::report
