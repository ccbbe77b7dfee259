// The category engine (docs/categories.md). One replay of the events (LevelWalk) serves every point
// asked for: the blocks, handles and tensor blocks live are kept as lists while it walks, so that a
// point costs what is live then, not the whole report.
#include "report/categories.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <tuple>
#include <unordered_map>

#include "report/category_rules.h"
#include "report/levels.h"
#include "report/saturate.h"

namespace memguard::report {

namespace {

constexpr size_t kAbsent = SIZE_MAX;

/// The indices live now, with removal in constant time.
class LiveList {
public:
    explicit LiveList(size_t n) : pos_(n, kAbsent) {}
    void set(size_t i, bool live) {
        if (live == (pos_[i] != kAbsent)) return;
        if (live) {
            pos_[i] = items_.size();
            items_.push_back(i);
            return;
        }
        size_t p = pos_[i];
        items_[p] = items_.back();
        pos_[items_[p]] = p;
        items_.pop_back();
        pos_[i] = kAbsent;
    }
    const std::vector<size_t>& items() const { return items_; }

private:
    std::vector<size_t> items_;
    std::vector<size_t> pos_;
};

/// A tensor-sized piece of a segment: a T block, a d block or a tag, with what it is.
struct Piece {
    uint64_t addr = 0, size = 0;
    Category category = Category::OtherTensor;
    bool estimate = false;
    uint32_t stack_id = 0, python_stack_id = 0;  // allocator mode: the T block's own site
    bool own_site = false;                       // else the segment's site is used
    const char* detail = "";                     // kUnnamed for a tensor block no tag names
};

/// The bytes of a tensor block that its tensor holds: the request rounded as PyTorch rounds it (a
/// block the allocator did not split holds up to 1 MiB more). No request known: the whole block.
uint64_t tensor_bytes(uint64_t size, uint64_t requested) {
    if (requested == 0) return size;
    const uint64_t rounded = saturating_add(requested, kTensorRounding - 1) / kTensorRounding * kTensorRounding;
    return std::min(size, rounded);
}

/// Adds a tensor block's piece, cut to its tensor's bytes, and the rest of the block as what the
/// allocator holds there without a tensor: its cache (a private pool's: the graph's pool).
/// `estimate`: whether the block itself may no longer be there (a d block away from its moment).
void add_block(std::vector<Piece>& out, const Piece& piece, uint64_t requested, bool pooled, bool estimate) {
    const uint64_t used = tensor_bytes(piece.size, requested);
    Piece tensor = piece;
    tensor.size = used;
    out.push_back(tensor);
    if (used == piece.size) return;
    Piece rest = piece;
    rest.addr = piece.addr + used;
    rest.size = piece.size - used;
    rest.category = pooled ? Category::GraphPool : Category::AllocatorCache;
    rest.detail = "";
    rest.estimate = estimate;
    out.push_back(rest);
}

/// A segment of PyTorch's (or memguard's) allocator live at the point: a block, or a physical
/// handle (no address: nothing can be placed in it).
struct Segment {
    uint64_t addr = 0, size = 0;
    bool has_range = true;
    bool physical = false;
    uint32_t stack_id = 0, python_stack_id = 0;
    uint32_t capture_id = 0;
};

uint64_t end_of(uint64_t addr, uint64_t size) { return saturating_add(addr, size); }

/// Sums bytes by (category, detail) and, within each, by site.
class Parts {
public:
    void add(Category c, const std::string& detail, bool estimate, uint64_t bytes, uint64_t blocks, bool physical,
             uint32_t stack_id, uint32_t python_stack_id) {
        if (bytes == 0) return;
        Acc& a = parts_[{c, detail}];
        add_to(a.part.bytes, bytes);
        a.part.blocks += blocks;
        if (estimate) add_to(a.part.estimated_bytes, bytes);
        auto [it, inserted] = a.index.emplace(std::make_tuple(physical, stack_id, python_stack_id), a.sites.size());
        if (inserted) a.sites.push_back(Site{stack_id, python_stack_id, physical});
        Site& s = a.sites[it->second];
        add_to(s.bytes, bytes);
        s.blocks += blocks;
    }

    std::vector<CategoryPart> take(size_t max_sites) {
        std::vector<CategoryPart> out;
        for (auto& [key, a] : parts_) {
            CategoryPart p = std::move(a.part);
            p.category = key.first;
            p.detail = key.second;
            p.estimate = p.estimated_bytes != 0;
            std::sort(a.sites.begin(), a.sites.end(), [](const Site& x, const Site& y) {
                return std::make_tuple(y.bytes, y.blocks, x.physical, x.stack_id, x.python_stack_id) <
                       std::make_tuple(x.bytes, x.blocks, y.physical, y.stack_id, y.python_stack_id);
            });
            if (a.sites.size() > max_sites) a.sites.resize(max_sites);
            p.sites = std::move(a.sites);
            out.push_back(std::move(p));
        }
        std::stable_sort(out.begin(), out.end(),
                         [](const CategoryPart& x, const CategoryPart& y) { return x.bytes > y.bytes; });
        return out;
    }

private:
    struct Acc {
        CategoryPart part;
        std::vector<Site> sites;
        std::map<std::tuple<bool, uint32_t, uint32_t>, size_t> index;
    };
    std::map<std::pair<Category, std::string>, Acc> parts_;  // ordered: ties keep category order
};

/// The step a moment belongs to: a step moment ends its step; any other lies inside the next one.
uint32_t moment_step(const Moment& m) { return m.reason == MomentReason::Step ? m.step : m.step + 1; }

class Engine {
public:
    /// `tags`: the tensor tags of a streamed report, by Tensor::order (TensorTagObserver); null: resolved
    /// here from the events of `r`.
    Engine(const Report& r, const BreakdownOptions& o, const std::unordered_map<size_t, Category>* tags = nullptr)
        : r_(r),
          o_(o),
          rules_(r, o.symbolizer),
          streamed_tags_(tags),
          blocks_(r.blocks.size()),
          handles_(r.handles.size()),
          tensors_(r.tensors.size()) {
        auto it = r.info.find("allocator");
        allocator_mode_ = r.has_tensors() || (it != r.info.end() && it->second == "memguard");
        if (allocator_mode_ && tags == nullptr) resolve_tensor_tags();
    }

    /// The breakdown of a point given by its live items: `live` names items of `items` (the slots of
    /// a streamed report, or the report of a point), `p` is the point's position among the events of
    /// the whole report (as load_report counts them) and `t` the time of its last event.
    Breakdown at_items(const Report& items, const LiveSet& live, size_t p, int64_t t) {
        return at(items, live.blocks, live.handles, live.tensors, p, t);
    }

    /// Streamed: puts `tags` in place of the tags in use, which it returns.
    const std::unordered_map<size_t, Category>* swap_tags(const std::unordered_map<size_t, Category>* tags) {
        std::swap(tags, streamed_tags_);
        return tags;
    }
    const std::unordered_map<size_t, Category>* tags() const { return streamed_tags_; }
    const Report& report() const { return r_; }

    std::vector<Breakdown> run(const std::vector<size_t>& points) {
        std::vector<size_t> order(points.size());
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return points[a] < points[b]; });
        std::vector<Breakdown> out(points.size());
        LevelWalk walk(r_);
        for (size_t i : order) {
            size_t target = std::min(points[i], r_.events.size());
            while (walk.applied() < target) {
                walk.step();
                track(walk, r_.events[walk.applied() - 1]);
            }
            out[i] = at(r_, blocks_.items(), handles_.items(), tensors_.items(), target,
                        target == 0 ? 0 : r_.events[target - 1].t);
        }
        return out;
    }

private:
    void track(const LevelWalk& walk, const Event& e) {
        switch (e.type) {
        case Event::Alloc:
        case Event::Free:
        case Event::Restore: blocks_.set(e.block, walk.block_live(e.block)); break;
        case Event::TensorAlloc:
        case Event::TensorFree: tensors_.set(e.block, walk.tensor_live(e.block)); break;
        case Event::Create:
        case Event::Release: handles_.set(e.block, walk.handle_live(e.block)); break;
        case Event::Unmap:
            if (auto h = r_.mappings[e.block].handle) handles_.set(*h, walk.handle_live(*h));
            break;
        default: break;
        }
    }

    /// Allocator mode: a tag names the T block live at its moment at that address, for the block's
    /// whole life. One pass over the tensor events, resolving each moment's tags where it stands.
    void resolve_tensor_tags() {
        tensor_tag_.assign(r_.tensors.size(), kUntagged);
        std::map<std::pair<int, uint64_t>, size_t> live;  // (device, addr) -> T index
        size_t next = 0;
        auto resolve = [&](const Moment& m) {
            for (const TensorTag& g : m.tags) {
                auto it = live.upper_bound({g.device, g.addr});
                if (it == live.begin()) continue;
                --it;
                const Tensor& x = r_.tensors[it->second];
                if (it->first.first != g.device || g.addr >= end_of(x.addr, x.size)) continue;
                uint8_t c = static_cast<uint8_t>(g.category);
                if (c < tensor_tag_[it->second]) tensor_tag_[it->second] = c;  // first in enum order wins
            }
        };
        for (size_t e = 0; e <= r_.events.size(); ++e) {
            while (next < r_.moments.size() && r_.moments[next].events_before <= e) resolve(r_.moments[next++]);
            if (e == r_.events.size()) break;
            const Event& ev = r_.events[e];
            if (ev.type == Event::TensorAlloc) {
                const Tensor& x = r_.tensors[ev.block];
                live[{x.device, x.addr}] = ev.block;
            } else if (ev.type == Event::TensorFree) {
                const Tensor& x = r_.tensors[ev.block];
                auto it = live.find({x.device, x.addr});
                if (it != live.end() && it->second == ev.block) live.erase(it);
            }
        }
    }

    /// Steps completed before the point (an s record at the point ends the step the point is in).
    /// Steps and moments are in file order, so their positions never go down: binary searches.
    size_t steps_before(size_t p) const {
        return std::lower_bound(r_.steps.begin(), r_.steps.end(), p,
                                [](const Step& s, size_t n) { return s.events_before < n; }) -
               r_.steps.begin();
    }

    /// The moment whose tags stand for the point: the nearest at or after it within its step, else
    /// the nearest before it within its step, else the nearest after, else the nearest before.
    const Moment* choose_moment(size_t p) const {
        const std::vector<Moment>& ms = r_.moments;
        const uint32_t step = static_cast<uint32_t>(std::min<size_t>(steps_before(p), UINT32_MAX - 1)) + 1;
        const size_t k = std::lower_bound(ms.begin(), ms.end(), p,
                                          [](const Moment& m, size_t n) { return m.events_before < n; }) -
                         ms.begin();
        for (size_t i = k; i < ms.size() && moment_step(ms[i]) <= step; ++i) {
            if (moment_step(ms[i]) == step) return &ms[i];
        }
        for (size_t i = k; i-- > 0 && moment_step(ms[i]) >= step;) {
            if (moment_step(ms[i]) == step) return &ms[i];
        }
        if (k < ms.size()) return &ms[k];
        return k > 0 ? &ms[k - 1] : nullptr;
    }

    /// When the step the point is in began (the previous s record; the first step began with the
    /// run), or nothing without s records.
    std::optional<int64_t> step_began(size_t p) const {
        if (r_.steps.empty()) return std::nullopt;
        size_t n = steps_before(p);
        return n == 0 ? INT64_MIN : r_.steps[n - 1].t;
    }

    bool device_ok(int device) const { return o_.device < 0 || device == o_.device; }

    /// A live block or handle that is not a segment of tensors: its category from its stack.
    void add_other(Parts& parts, uint64_t size, bool physical, uint32_t stack_id, uint32_t python_stack_id,
                   uint32_t capture_id, const NativeClass& c) {
        Category cat = Category::Other;
        std::string detail;
        bool estimate = false;
        if (capture_id != 0) {
            cat = Category::GraphPool;
        } else if (c.allocator == Allocator::Nccl) {
            cat = Category::Nccl;
        } else if (c.allocator == Allocator::Blas) {
            cat = Category::BlasWorkspace;
        } else if (c.allocator == Allocator::Library) {
            cat = Category::Library;
            detail = c.library;
        } else if (rules_.autotune(python_stack_id)) {
            cat = Category::CompileWorkspace;
            estimate = true;
        }
        parts.add(cat, detail, estimate, size, 1, physical, stack_id, python_stack_id);
    }

    /// A tensor block's tag (its Category), or kUntagged; `i`: its index in the report read whole.
    uint8_t tag_of(const Tensor& x, size_t i) const {
        if (streamed_tags_ == nullptr) return tensor_tag_[i];
        auto it = streamed_tags_->find(x.order);
        return it == streamed_tags_->end() ? kUntagged : static_cast<uint8_t>(it->second);
    }

    Category tensor_category(const Tensor& x, size_t i, const std::optional<int64_t>& began, bool& estimate) {
        estimate = false;
        const uint8_t tag = tag_of(x, i);
        if (tag != kUntagged) return static_cast<Category>(tag);
        if (x.pool != "-" || x.capture_id != 0) return Category::GraphPool;
        if (rules_.blas_workspace(x.stack_id)) return Category::BlasWorkspace;
        estimate = true;
        if (rules_.autotune(x.python_stack_id)) return Category::CompileWorkspace;
        if (began && x.t_alloc >= *began) return Category::Activation;
        return Category::OtherTensor;
    }

    /// The tensor pieces of the point, sorted by address, per device: allocator mode's live T blocks;
    /// interposition mode's d blocks of the moment, else its tags.
    std::map<int, std::vector<Piece>> pieces_at(const Report& items, const std::vector<size_t>& tensors, size_t p,
                                                const Moment* m) {
        std::map<int, std::vector<Piece>> out;
        if (allocator_mode_) {
            const std::optional<int64_t> began = step_began(p);
            for (size_t i : tensors) {
                const Tensor& x = items.tensors[i];
                if (!device_ok(x.device) || x.size == 0) continue;
                Piece piece{x.addr, x.size, Category::OtherTensor, false, x.stack_id, x.python_stack_id, true};
                piece.category = tensor_category(x, i, began, piece.estimate);
                if (piece.category == Category::OtherTensor && tag_of(x, i) == kUntagged) piece.detail = kUnnamed;
                add_block(out[x.device], piece, x.requested, x.pool != "-" || x.capture_id != 0, false);
            }
        } else if (m != nullptr) {
            // Interposition mode: what the moment saw, exact only when nothing happened in between.
            const bool estimate = m->events_before != p;
            std::map<int, std::vector<const TensorTag*>> tags;  // by device, by address
            for (const TensorTag& g : m->tags) {
                if (device_ok(g.device) && g.size != 0) tags[g.device].push_back(&g);
            }
            for (auto& [dev, list] : tags) {
                std::sort(list.begin(), list.end(),
                          [](const TensorTag* a, const TensorTag* b) { return a->addr < b->addr; });
            }
            if (!m->blocks.empty()) {
                for (const AllocatorBlock& d : m->blocks) {
                    if (!device_ok(d.device) || d.size == 0) continue;
                    const Piece piece = d_piece(d, tags[d.device], estimate);
                    if (d.state == BlockState::Inactive) {
                        out[d.device].push_back(piece);
                    } else {
                        add_block(out[d.device], piece, d.requested, d.pool != "-", estimate);
                    }
                }
            } else {
                for (auto& [dev, list] : tags) {
                    for (const TensorTag* g : list) out[dev].push_back(Piece{g->addr, g->size, g->category, estimate});
                }
            }
        }
        for (auto& [dev, list] : out) {
            std::sort(list.begin(), list.end(), [](const Piece& a, const Piece& b) { return a.addr < b.addr; });
        }
        return out;
    }

    /// A d block: its tag's category (the first in enum order of the tags inside it), else the
    /// private pool, the cache (inactive) or an untagged tensor.
    static Piece d_piece(const AllocatorBlock& d, const std::vector<const TensorTag*>& tags, bool estimate) {
        Piece piece{d.addr, d.size, Category::OtherTensor, estimate};
        const bool pooled = d.pool != "-";
        if (d.state == BlockState::Inactive) {
            piece.category = pooled ? Category::GraphPool : Category::AllocatorCache;
            return piece;
        }
        auto it = std::lower_bound(tags.begin(), tags.end(), d.addr,
                                   [](const TensorTag* g, uint64_t a) { return g->addr < a; });
        bool tagged = false;
        for (; it != tags.end() && (*it)->addr < end_of(d.addr, d.size); ++it) {
            if (!tagged || (*it)->category < piece.category) piece.category = (*it)->category;
            tagged = true;
        }
        if (!tagged && pooled) piece.category = Category::GraphPool;
        if (!tagged && !pooled) {  // a tensor the hook did not name
            piece.estimate = true;
            piece.detail = kUnnamed;
        }
        return piece;
    }

    /// Splits a segment among the pieces inside it (each byte to the first piece, by address, that
    /// covers it); the rest goes to the segment's default.
    void split_segment(Parts& parts, const Segment& s, const std::vector<Piece>* pieces) {
        uint64_t covered = 0;
        const uint64_t hi = end_of(s.addr, s.size);
        if (pieces != nullptr && s.has_range) {
            auto it = std::lower_bound(pieces->begin(), pieces->end(), s.addr,
                                       [](const Piece& x, uint64_t a) { return x.addr < a; });
            if (it != pieces->begin() && end_of(std::prev(it)->addr, std::prev(it)->size) > s.addr) --it;
            uint64_t cursor = s.addr;
            for (; it != pieces->end() && it->addr < hi; ++it) {
                uint64_t start = std::max(it->addr, cursor);
                uint64_t end = std::min(end_of(it->addr, it->size), hi);
                if (end <= start) continue;
                Category cat = it->category;
                if (s.capture_id != 0 && !it->own_site && cat == Category::AllocatorCache) cat = Category::GraphPool;
                uint32_t stack = it->own_site ? it->stack_id : s.stack_id;
                uint32_t py = it->own_site ? it->python_stack_id : s.python_stack_id;
                parts.add(cat, it->detail, it->estimate, end - start, 1, s.physical && !it->own_site, stack, py);
                covered += end - start;
                cursor = end;
            }
        }
        const uint64_t rest = s.size - std::min(covered, s.size);
        if (rest == 0) return;
        Category cat = Category::OtherTensor;
        std::string detail;
        bool estimate = true;
        if (s.capture_id != 0) {
            cat = Category::GraphPool;
            estimate = false;
        } else if (allocator_mode_) {
            cat = Category::AllocatorCache;  // memguard's segments less its live tensor blocks
            estimate = false;
        } else if (rules_.autotune(s.python_stack_id)) {
            cat = Category::CompileWorkspace;
        } else {
            detail = kNotToldApart;
        }
        parts.add(cat, detail, estimate, rest, 1, s.physical, s.stack_id, s.python_stack_id);
    }

    Breakdown at(const Report& items, const std::vector<size_t>& blocks, const std::vector<size_t>& handles,
                 const std::vector<size_t>& tensors, size_t p, int64_t t) {
        Breakdown b;
        b.device = o_.device;
        b.events_applied = p;
        b.t = t;
        b.moment = choose_moment(p);
        Parts parts;
        std::map<int, std::vector<Segment>> segments;
        auto consider = [&](int device, uint64_t addr, uint64_t size, bool physical, uint32_t stack_id,
                            uint32_t python_stack_id, uint32_t capture_id) {
            add_to(b.total, size);
            const NativeClass& c = rules_.native(stack_id);
            if (c.allocator != Allocator::Torch) {
                add_other(parts, size, physical, stack_id, python_stack_id, capture_id, c);
                return;
            }
            segments[device].push_back(Segment{addr, size, !physical, physical, stack_id, python_stack_id, capture_id});
        };
        for (size_t i : blocks) {
            const Block& x = items.blocks[i];
            if (!is_gpu(x.kind) || !device_ok(x.device)) continue;
            consider(x.device, x.addr, x.size, false, x.stack_id, x.python_stack_id, x.capture_id);
        }
        for (size_t i : handles) {
            const PhysicalHandle& h = items.handles[i];
            if (h.device < 0 || !device_ok(h.device)) continue;
            consider(h.device, 0, h.size, true, h.stack_id, h.python_stack_id, h.capture_id);
        }
        auto pieces = pieces_at(items, tensors, p, b.moment);
        for (auto& [dev, list] : segments) {
            auto found = pieces.find(dev);
            const std::vector<Piece>* on_device = found == pieces.end() ? nullptr : &found->second;
            for (const Segment& s : list) split_segment(parts, s, on_device);
        }
        b.parts = parts.take(o_.max_sites);
        return b;
    }

    static constexpr uint8_t kUntagged = 0xff;

    const Report& r_;
    const BreakdownOptions& o_;
    StackRules rules_;
    bool allocator_mode_ = false;
    std::vector<uint8_t> tensor_tag_;  // allocator mode: per T block, its tag's Category, or kUntagged
    const std::unordered_map<size_t, Category>* streamed_tags_ = nullptr;
    LiveList blocks_, handles_, tensors_;
};

}  // namespace

struct PointBreakdowns::Impl {
    Impl(const Report& whole, const BreakdownOptions& o, const std::unordered_map<size_t, Category>* tags)
        : options(o), engine(whole, options, tags) {}
    BreakdownOptions options;
    Engine engine;
};

PointBreakdowns::PointBreakdowns(const Report& whole, const BreakdownOptions& options,
                                 const std::unordered_map<size_t, Category>* tags)
    : impl_(std::make_unique<Impl>(whole, options, tags)) {}

PointBreakdowns::~PointBreakdowns() = default;

Breakdown PointBreakdowns::at(const Report& items, const LiveSet& live, size_t events_applied, int64_t t) {
    return impl_->engine.at_items(items, live, events_applied, t);
}

Breakdown PointBreakdowns::at(const Report& items, const LiveSet& live, size_t events_applied, int64_t t,
                              const std::unordered_map<size_t, Category>& tags) {
    const auto* own = impl_->engine.swap_tags(&tags);
    Breakdown b = impl_->engine.at_items(items, live, events_applied, t);
    impl_->engine.swap_tags(own);
    return b;
}

const std::unordered_map<size_t, Category>* PointBreakdowns::tags() const { return impl_->engine.tags(); }

const Report& PointBreakdowns::report() const { return impl_->engine.report(); }

void TensorTagObserver::resolve(const Report& r, size_t events) {
    for (; next_ < r.moments.size() && r.moments[next_].events_before <= events; ++next_) {
        for (const TensorTag& g : r.moments[next_].tags) {
            auto it = live_.upper_bound({g.device, g.addr});
            if (it == live_.begin()) continue;
            --it;
            const auto [slot, order] = it->second;
            if (slot >= r.tensors.size() || r.tensors[slot].order != order) continue;
            const Tensor& x = r.tensors[slot];
            if (it->first.first != g.device || g.addr >= end_of(x.addr, x.size)) continue;
            auto [tag, inserted] = tags_.emplace(order, g.category);
            if (!inserted && g.category < tag->second) tag->second = g.category;  // first in enum order wins
        }
    }
}

bool TensorTagObserver::on_event(const Report& r, const Event& e) {
    resolve(r, applied_);
    ++applied_;
    if (e.type == Event::TensorAlloc) {
        const Tensor& x = r.tensors[e.block];
        live_[{x.device, x.addr}] = {e.block, x.order};
    } else if (e.type == Event::TensorFree) {
        const Tensor& x = r.tensors[e.block];
        auto it = live_.find({x.device, x.addr});
        if (it != live_.end() && it->second.second == x.order) live_.erase(it);
    }
    return true;
}

void TensorTagObserver::on_end(const Report& r) {
    resolve(r, SIZE_MAX);
    live_.clear();
}

void TensorTagObserver::fold_out(const Report& r, FoldWriter& w) {
    (void)r;
    w.figure("tags", {fold_of(next_)});
    // In order of the tensors, so that a fold of the same read is the same file.
    std::vector<std::pair<size_t, Category>> tags(tags_.begin(), tags_.end());
    std::sort(tags.begin(), tags.end());
    constexpr size_t kPerRecord = 200;
    std::vector<int64_t> v;
    for (size_t i = 0; i < tags.size(); i += kPerRecord) {
        v.clear();
        for (size_t j = i; j < std::min(tags.size(), i + kPerRecord); ++j) {
            v.push_back(fold_of(tags[j].first));
            v.push_back(static_cast<int64_t>(tags[j].second));
        }
        w.figure("tags.tag", v);
    }
}

std::unordered_map<size_t, Category> TensorTagObserver::folded(const Fold& f) {
    std::unordered_map<size_t, Category> tags;
    f.each("tags.tag", [&](const Fold::Figure& x) {
        if (x.values.size() % 2 != 0) throw BadFold("tags.tag needs pairs");
        for (size_t i = 0; i < x.values.size(); i += 2) {
            const int64_t c = fold_value(x, i + 1);
            if (c > static_cast<int64_t>(Category::Other)) throw BadFold("tags.tag: no category " + std::to_string(c));
            tags[static_cast<size_t>(fold_value(x, i))] = static_cast<Category>(c);
        }
    });
    return tags;
}

void TensorTagObserver::fold_in(const Report& r, const Fold& f) {
    bool found = false;
    f.each("tags", [&](const Fold::Figure& x) {
        found = true;
        next_ = static_cast<size_t>(fold_value(x, 0));
    });
    if (!found) throw BadFold("no figure 'tags'");
    if (next_ > r.moments.size())
        throw BadFold("tags: " + std::to_string(next_) + " moments resolved, the report has fewer");
    tags_ = folded(f);
    // The events before the fold's point, as load_report counts them; the live tensor blocks stay
    // (the carried ones, with their orders in the whole report).
    applied_ = f.at.events;
}

const CategoryPart* Breakdown::find(Category category, const std::string& detail) const {
    for (const CategoryPart& p : parts) {
        if (p.category == category && p.detail == detail) return &p;
    }
    return nullptr;
}

std::string part_name(const CategoryPart& p) {
    std::string name(format::name_of(p.category));
    return p.detail.empty() ? name : name + " (" + p.detail + ")";
}

std::string part_label(const CategoryPart& p) {
    std::string name(format::name_of(p.category));
    if (p.detail.empty()) return p.estimate ? name + " (estimate)" : name;
    return name + " (" + p.detail + (p.estimate ? ", estimate)" : ")");
}

bool moment_settled(const Report& r, size_t p) {
    // As Engine::choose_moment: a moment at or after the point whose step is the point's or later
    // ends the search among the moments known; without one, a later moment could be the nearest.
    const size_t before = static_cast<size_t>(
        std::lower_bound(r.steps.begin(), r.steps.end(), p,
                         [](const Step& s, size_t n) { return s.events_before < n; }) -
        r.steps.begin());
    const uint32_t step = static_cast<uint32_t>(std::min<size_t>(before, UINT32_MAX - 1)) + 1;
    for (auto it = std::lower_bound(r.moments.begin(), r.moments.end(), p,
                                    [](const Moment&m, size_t n) { return m.events_before < n; });
         it != r.moments.end(); ++it) {
        if (moment_step(*it) >= step) return true;
    }
    return false;
}

Breakdown breakdown_at(const Report& r, size_t events_applied, const BreakdownOptions& options) {
    return breakdowns_at(r, {events_applied}, options).front();
}

std::vector<Breakdown> breakdowns_at(const Report& r, const std::vector<size_t>& points,
                                     const BreakdownOptions& options) {
    Engine engine(r, options);
    return engine.run(points);
}

}  // namespace memguard::report
