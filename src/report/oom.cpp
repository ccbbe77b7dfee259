#include "report/oom.h"

#include <algorithm>
#include <map>

#include "report/levels.h"
#include "report/saturate.h"
#include "report/units.h"

namespace memguard::report {

namespace {

constexpr size_t kScanLimit = kOomScanLimit;

/// Indices of one kind of record by thread, sorted by time.
class ByThread {
public:
    void add(uint64_t tid, int64_t t, size_t index) { by_tid_[tid].push_back({t, index}); }
    void sort() {
        for (auto& [tid, v] : by_tid_) std::stable_sort(v.begin(), v.end());
    }
    /// The entries of `tid` with time in [from, to], earliest first, at most kScanLimit.
    std::vector<size_t> between(uint64_t tid, int64_t from, int64_t to) const {
        std::vector<size_t> out;
        auto it = by_tid_.find(tid);
        if (it == by_tid_.end()) return out;
        auto first = std::lower_bound(it->second.begin(), it->second.end(), std::pair<int64_t, size_t>{from, 0});
        for (auto i = first; i != it->second.end() && i->first <= to && out.size() < kScanLimit; ++i) {
            out.push_back(i->second);
        }
        return out;
    }

private:
    std::map<uint64_t, std::vector<std::pair<int64_t, size_t>>> by_tid_;
};

int64_t minus_window(int64_t t, int64_t w) { return t < INT64_MIN + w ? INT64_MIN : t - w; }
int64_t plus_window(int64_t t, int64_t w) { return t > INT64_MAX - w ? INT64_MAX : t + w; }

/// The first-event-later-than-t rule of docs/report-format.md, by binary search over the running
/// maximum of the events' times (the same index as a scan for the first later event).
class EventClock {
public:
    explicit EventClock(const Report& r) {
        running_max_.reserve(r.events.size());
        int64_t m = INT64_MIN;
        for (const Event& e : r.events) {
            m = std::max(m, e.t);
            running_max_.push_back(m);
        }
    }
    size_t at(int64_t t) const {
        return static_cast<size_t>(std::upper_bound(running_max_.begin(), running_max_.end(), t) -
                                   running_max_.begin());
    }

private:
    std::vector<int64_t> running_max_;
};

}  // namespace

size_t events_at_time(const Report& r, int64_t t) { return EventClock(r).at(t); }

namespace {

/// The lookups of a whole report (load_report's): its events and blocks.
class WholeReport : public OomLookups {
public:
    explicit WholeReport(const Report& r) : r_(r), clock_(r) {
        for (size_t i = 0; i < r.blocks.size(); ++i) {
            if (is_gpu(r.blocks[i].kind)) blocks_.add(r.blocks[i].tid, r.blocks[i].t_alloc, i);
        }
        blocks_.sort();
    }
    size_t events_at(int64_t t) const override { return clock_.at(t); }
    std::vector<std::pair<int, uint64_t>> gpu_blocks(uint64_t tid, int64_t from, int64_t to) const override {
        std::vector<std::pair<int, uint64_t>> out;
        for (size_t b : blocks_.between(tid, from, to)) out.push_back({r_.blocks[b].device, r_.blocks[b].size});
        return out;
    }

private:
    const Report& r_;
    EventClock clock_;
    ByThread blocks_;
};

}  // namespace

std::vector<OomEvent> find_ooms(const Report& r) { return find_ooms(r, WholeReport(r)); }

std::vector<OomEvent> find_ooms(const Report& r, const OomLookups& clock) {
    ByThread failures, tensor_ooms, stops;
    for (size_t i = 0; i < r.failures.size(); ++i) {
        if (r.failures[i].is_oom()) failures.add(r.failures[i].tid, r.failures[i].t, i);
    }
    for (size_t i = 0; i < r.tensor_ooms.size(); ++i) tensor_ooms.add(r.tensor_ooms[i].tid, r.tensor_ooms[i].t, i);
    failures.sort();
    tensor_ooms.sort();

    std::vector<char> failure_used(r.failures.size(), 0), tensor_oom_used(r.tensor_ooms.size(), 0);
    std::vector<OomEvent> ooms;  // torch and allocator OOMs
    std::vector<OomEvent> cuda;  // failed CUDA allocations: OOMs, recovered, or part of another
    for (size_t i = 0; i < r.oom_contexts.size(); ++i) {
        const OomContext& x = r.oom_contexts[i];
        OomEvent e;
        e.source = x.source;
        e.context = i;
        e.t = x.t;
        e.tid = x.tid;
        e.device = x.device;
        e.requested = x.requested;
        e.rounded = x.rounded;
        e.stack_id = x.stack_id;
        e.python_stack_id = x.python_stack_id;
        e.events_before = x.events_before;
        // The record the x follows: a cuda x's E (same size), an allocator x's O (same request),
        // the latest one not taken on its thread within the window before it.
        const int64_t since = minus_window(x.t, kRetryWindowNs);
        if (x.source == OomSource::Cuda) {
            std::vector<size_t> c = failures.between(x.tid, since, x.t);
            for (auto it = c.rbegin(); it != c.rend(); ++it) {
                const FailedAlloc& f = r.failures[*it];
                if (!failure_used[*it] && f.size == x.rounded && f.device == x.device) {
                    failure_used[*it] = 1;
                    e.failure = *it;
                    e.stream = f.stream;
                    break;
                }
            }
            cuda.push_back(e);
            continue;
        }
        if (x.source == OomSource::Allocator) {
            std::vector<size_t> c = tensor_ooms.between(x.tid, since, x.t);
            for (auto it = c.rbegin(); it != c.rend(); ++it) {
                if (!tensor_oom_used[*it] && r.tensor_ooms[*it].device == x.device) {
                    tensor_oom_used[*it] = 1;
                    e.tensor_oom = *it;
                    break;
                }
            }
        }
        ooms.push_back(e);
    }
    // Older reports: an O without an x, an E with error 2 without an x.
    for (size_t i = 0; i < r.tensor_ooms.size(); ++i) {
        if (tensor_oom_used[i]) continue;
        const TensorOom& o = r.tensor_ooms[i];
        OomEvent e;
        e.source = OomSource::Allocator;
        e.tensor_oom = i;
        e.t = o.t;
        e.tid = o.tid;
        e.device = o.device;
        e.requested = o.requested;
        e.rounded = o.rounded;
        e.stack_id = o.stack_id;
        e.python_stack_id = o.python_stack_id;
        e.events_before = clock.events_at(o.t);
        ooms.push_back(e);
    }
    for (size_t i = 0; i < r.failures.size(); ++i) {
        if (failure_used[i] || !r.failures[i].is_oom()) continue;
        const FailedAlloc& f = r.failures[i];
        OomEvent e;
        e.source = OomSource::Cuda;
        e.failure = i;
        e.t = f.t;
        e.tid = f.tid;
        e.device = f.device;
        e.requested = f.size;
        e.rounded = f.size;
        e.stream = f.stream;
        e.stack_id = f.stack_id;
        e.python_stack_id = f.python_stack_id;
        e.events_before = clock.events_at(f.t);
        cuda.push_back(e);
    }
    for (size_t i = 0; i < ooms.size(); ++i) stops.add(ooms[i].tid, ooms[i].t, i);
    stops.sort();

    // A failed CUDA allocation followed on its thread, within the window, by PyTorch's (or memguard's
    // allocator's) OOM is part of that OOM; else, followed by an allocation of at least its size on
    // its device, it was recovered (PyTorch freed its cache and retried); else it is an OOM itself.
    for (OomEvent& c : cuda) {
        const int64_t until = plus_window(c.t, kRetryWindowNs);
        std::vector<size_t> later = stops.between(c.tid, c.t, until);
        if (!later.empty()) {
            if (c.failure) ooms[later.front()].cuda_failures.push_back(*c.failure);
            continue;
        }
        for (const auto& [device, size] : clock.gpu_blocks(c.tid, c.t, until)) {
            if (device == c.device && size >= c.rounded) {
                c.recovered = true;
                break;
            }
        }
        ooms.push_back(c);
    }
    std::stable_sort(ooms.begin(), ooms.end(), [](const OomEvent& a, const OomEvent& b) { return a.t < b.t; });
    return ooms;
}

uint64_t fragmentation_of(uint64_t request, uint64_t cached_free, std::optional<uint64_t> largest_free,
                          const std::vector<uint64_t>* free_blocks) {
    if (free_blocks != nullptr) {
        uint64_t small = 0;
        for (uint64_t b : *free_blocks) {
            if (b < request) add_to(small, b);
        }
        return std::min(small, cached_free);
    }
    if (largest_free && *largest_free < request) return cached_free;
    return 0;
}

namespace {

/// The free gaps of allocator mode's segments on `device` after `events` events: each live
/// segment (A block) less the live tensor blocks (T) inside it. Only blocks that hold a live tensor
/// count as the allocator's segments: at an out-of-memory the allocator has already freed its
/// wholly free segments, so a block without tensors is another library's (cuBLAS's own workspace).
std::vector<uint64_t> segment_gaps(const Report& r, const LevelWalk& walk, int device) {
    std::vector<std::pair<uint64_t, uint64_t>> segments, tensors;  // [addr, end)
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        const Block& b = r.blocks[i];
        if (walk.block_live(i) && is_gpu(b.kind) && b.device == device) {
            segments.push_back({b.addr, b.addr + std::min(b.size, UINT64_MAX - b.addr)});
        }
    }
    for (size_t i = 0; i < r.tensors.size(); ++i) {
        const Tensor& t = r.tensors[i];
        if (walk.tensor_live(i) && t.device == device) {
            tensors.push_back({t.addr, t.addr + std::min(t.size, UINT64_MAX - t.addr)});
        }
    }
    std::sort(segments.begin(), segments.end());
    std::sort(tensors.begin(), tensors.end());
    std::vector<uint64_t> gaps;
    size_t k = 0;
    for (const auto& [lo, hi] : segments) {
        while (k < tensors.size() && tensors[k].second <= lo) ++k;
        if (k == tensors.size() || tensors[k].first >= hi) continue;  // no tensor inside
        uint64_t at = lo;
        for (size_t j = k; j < tensors.size() && tensors[j].first < hi; ++j) {
            if (tensors[j].first > at) gaps.push_back(tensors[j].first - at);
            at = std::max(at, std::min(tensors[j].second, hi));
        }
        if (hi > at) gaps.push_back(hi - at);
    }
    return gaps;
}

}  // namespace

OomPoint oom_point(const Report& r, const LevelWalk& walk, int device) {
    OomPoint p;
    auto dev = walk.levels().device_bytes.find(device);
    p.this_process = dev == walk.levels().device_bytes.end() ? 0 : dev->second;
    if (r.has_tensors()) p.segment_gaps = segment_gaps(r, walk, device);
    return p;
}

OomFigures oom_figures(const Report& r, const OomEvent& e) {
    LevelWalk walk(r);
    walk.advance_to(std::min(e.events_before, r.events.size()));
    return oom_figures(r, e, oom_point(r, walk, e.device));
}

OomFigures oom_figures(const Report& r, const OomEvent& e, const OomPoint& at) {
    OomFigures f;
    f.request = e.request();
    const OomContext* x = e.context ? &r.oom_contexts[*e.context] : nullptr;
    const TensorOom* o = e.tensor_oom ? &r.tensor_ooms[*e.tensor_oom] : nullptr;
    const Moment* m = x && x->moment ? &r.moments[*x->moment] : nullptr;

    f.this_process = at.this_process;
    if (x) {
        f.device_total = x->device_total;
        f.device_free = x->device_free;
        f.limit = x->limit;
        f.allocated = x->allocated;
        f.reserved = x->reserved;
        f.compile_pending = x->compile_pending;
        f.capturing = x->capturing;
    }
    if (o) {
        if (!f.allocated) f.allocated = o->allocated;
        if (!f.reserved) f.reserved = o->reserved;
        if (!f.limit && o->limit != 0) f.limit = o->limit;
    }
    if (f.device_total && f.device_free) {
        const uint64_t used = *f.device_total > *f.device_free ? *f.device_total - *f.device_free : 0;
        f.others = used > f.this_process ? used - f.this_process : 0;
    }
    if (f.allocated && f.reserved) f.cached_free = *f.reserved > *f.allocated ? *f.reserved - *f.allocated : 0;

    std::vector<uint64_t> free_blocks;
    bool have_blocks = false;
    if (m) {
        for (const AllocatorBlock& d : m->blocks) {
            if (d.device != e.device) continue;
            have_blocks = true;
            if (d.state == BlockState::Inactive) free_blocks.push_back(d.size);
        }
        if (have_blocks) f.largest_free_from = "snapshot";
    }
    if (!have_blocks && r.has_tensors()) {
        free_blocks = at.segment_gaps;
        have_blocks = true;
        f.largest_free_from = "segments";
    }
    if (have_blocks) {
        f.largest_free = free_blocks.empty() ? 0 : *std::max_element(free_blocks.begin(), free_blocks.end());
        if (!f.cached_free) {
            uint64_t sum = 0;
            for (uint64_t b : free_blocks) add_to(sum, b);
            f.cached_free = sum;
        }
    }
    if (f.cached_free) {
        f.fragmentation = fragmentation_of(f.request, *f.cached_free, f.largest_free,
                                           have_blocks ? &free_blocks : nullptr);
    }

    for (size_t i = 0; i < r.phases.size(); ++i) {
        const Phase& p = r.phases[i];
        if (p.t_begin <= e.t && (!p.t_end || *p.t_end > e.t)) f.open_phases.push_back(i);
    }
    if (r.steps.empty()) {
        // No s records: the run has no steps to be in (no optimizer, no memguard.step()).
    } else if (m) {
        f.step = m->step + 1;
    } else {
        uint32_t done = 0;
        for (const Step& s : r.steps) done += s.t <= e.t ? 1 : 0;
        f.step = done + 1;
    }
    const int64_t since = minus_window(e.t, kRecentCollectionsNs);
    for (size_t i = 0; i < r.collections.size(); ++i) {
        if (r.collections[i].t >= since && r.collections[i].t <= e.t) f.collections.push_back(i);
    }
    if (!x) {
        for (const Capture& c : r.captures) {
            if (c.t_begin <= e.t && (!c.t_end || *c.t_end > e.t)) f.capturing = true;
        }
    }
    if (m) {
        std::map<std::string, uint64_t> by_label;
        for (const TensorTag& g : m->tags) {
            if (g.device == e.device && g.category == Category::Activation) add_to(by_label[g.label], g.size);
        }
        f.saved.assign(by_label.begin(), by_label.end());
        std::stable_sort(f.saved.begin(), f.saved.end(),
                         [](const auto& a, const auto& b) { return a.second > b.second; });
    }
    return f;
}

std::string category_phrase(Category c, const std::string& detail) {
    switch (c) {
    case Category::Parameter: return "parameters";
    case Category::Gradient: return "gradients of parameters";
    case Category::NonParamGradient: return "gradients of tensors that are not parameters";
    case Category::OptimizerState: return "optimizer state";
    case Category::Buffer: return "module buffers";
    case Category::Activation: return "activations and tensors saved for backward";
    case Category::OtherTensor:
        if (detail == kUnnamed) return "tensors the program did not name";
        return detail.empty() ? "other tensors" : "PyTorch's tensors and cache, not told apart (no allocator snapshot)";
    case Category::GraphPool: return "CUDA graphs' private pools";
    case Category::CompileWorkspace: return "compile and autotune workspaces";
    case Category::Nccl: return "NCCL's buffers";
    case Category::BlasWorkspace: return "cuBLAS/cuDNN workspaces";
    case Category::Library: return detail.empty() ? "other libraries' memory" : detail + "'s memory";
    case Category::AllocatorCache: return "the allocator's cache (reserved, not allocated)";
    case Category::Other: return "memory no category explains";
    }
    return "memory";
}

namespace {

/// A whole percentage, rounded down, of a nonzero total.
std::string whole_percent(uint64_t part, uint64_t total) {
    const long double p = total == 0 ? 0 : 100.0L * static_cast<long double>(part) / static_cast<long double>(total);
    return std::to_string(static_cast<int>(std::min<long double>(p, 100))) + "%";
}

/// What keeps a saved tensor's graph alive, from the label the library gave it ("saved by
/// MmBackward0 (kept by total_loss at train.py:57)" -> "total_loss at train.py:57"), or "".
std::string kept_by(const std::string& label) {
    static const std::string kKept = "(kept by ";
    const size_t at = label.rfind(kKept);
    if (at == std::string::npos || label.empty() || label.back() != ')') return "";
    return label.substr(at + kKept.size(), label.size() - 1 - at - kKept.size());
}

std::string capitalized(std::string s) {
    if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
    return s;
}

}  // namespace

std::vector<std::string> oom_verdict(const OomFigures& f, const Breakdown& b, const std::string& top_site) {
    std::vector<std::string> out;
    // 1. Fragmentation, when it alone explains the OOM: the cache had room for the request in total,
    //    but in blocks too small.
    const bool fragmented = f.fragmentation && *f.fragmentation > 0 && f.cached_free && *f.cached_free >= f.request &&
                            f.largest_free && *f.largest_free < f.request;
    if (fragmented) {
        out.push_back(human_bytes(*f.fragmentation) + " is fragmentation: PyTorch's cache held " +
                      human_bytes(*f.cached_free) + " free, more than the " + human_bytes(f.request) +
                      " requested, but its largest free block was " + human_bytes(*f.largest_free) +
                      " (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True lets segments grow instead).");
    }
    // 2. Another process: more than the request and at least 5% of the device (the CUDA context of
    //    this process counts here too, so a few hundred MiB are not blamed on anyone).
    if (f.others && f.device_total && *f.others >= f.request && *f.others * 20 >= *f.device_total &&
        *f.others >= (uint64_t{1} << 30)) {
        std::string s = human_bytes(*f.others) + " of the device's " + human_bytes(*f.device_total) +
                        " is held by other processes (or outside memguard's view)";
        if (f.device_free && *f.device_free < f.request) {
            s += ": " + human_bytes(*f.device_free) + " was free for the " + human_bytes(f.request) + " requested";
        }
        out.push_back(s + ".");
    } else if (f.device_free && *f.device_free < f.request &&
               (!f.limit || !f.device_total || *f.limit >= *f.device_total)) {
        out.push_back("The device had " + human_bytes(*f.device_free) + " free, less than the " +
                      human_bytes(f.request) + " requested.");
    }
    // 3. What holds this process's memory: the largest category, and the second when the largest is
    //    under half (unless it is the cache that fragmentation already explains).
    if (b.total > 0 && !b.parts.empty()) {
        const CategoryPart& first = b.parts[0];
        std::string s = whole_percent(first.bytes, b.total) + " of this process's GPU memory (" +
                        human_bytes(first.bytes) + " of " + human_bytes(b.total) + ") is " +
                        category_phrase(first.category, first.detail);
        if (first.estimate && first.detail != kNotToldApart) s += " (estimated)";  // that one says so
        if (!top_site.empty()) s += ", allocated at " + top_site;
        if (first.category == Category::Activation && !f.saved.empty()) {
            // The library names what keeps a graph alive ("saved by MmBackward0 (kept by total_loss
            // at train.py:57)"): the holder is what the user has to change.
            std::map<std::string, uint64_t> by_holder;
            for (const auto& [label, bytes] : f.saved) {
                const std::string holder = kept_by(label);
                if (!holder.empty()) add_to(by_holder[holder], bytes);
            }
            auto top = std::max_element(by_holder.begin(), by_holder.end(),
                                        [](const auto& a, const auto& c) { return a.second < c.second; });
            if (top != by_holder.end()) {
                s += "; autograd graphs kept alive by " + top->first + " hold " + human_bytes(top->second) + " of them";
            } else if (!f.saved[0].first.empty()) {
                s += "; the largest are " + f.saved[0].first + " (" + human_bytes(f.saved[0].second) + ")";
            }
        }
        if (first.bytes * 2 < b.total && b.parts.size() > 1 &&
            !(fragmented && b.parts[1].category == Category::AllocatorCache)) {
            const CategoryPart& second = b.parts[1];
            s += "; " + whole_percent(second.bytes, b.total) + " is " + category_phrase(second.category, second.detail);
        }
        out.push_back(s + ".");
    } else if (f.this_process > 0) {
        out.push_back("This process held " + human_bytes(f.this_process) +
                      " on the device; the report does not say what it was (no moment): see memguard top --at the "
                      "OOM's time.");
    }
    // 4. A memory-fraction limit below the device, when there is still room.
    if (out.size() < 3 && f.limit && f.device_total && *f.limit < *f.device_total) {
        out.push_back("A memory-fraction limit of " + human_bytes(*f.limit) + " (of " + human_bytes(*f.device_total) +
                      ") applies: this process may not reserve more.");
    }
    if (out.size() < 3 && f.capturing) out.push_back("A stream capture was in progress.");
    if (out.size() > 3) out.resize(3);
    for (std::string& s : out) s = capitalized(s);
    return out;
}

}  // namespace memguard::report
