#include "report/stream_phases.h"

#include <algorithm>
#include <climits>

namespace memguard::report {

namespace {

/// phase_stats' families: NVTX push/pop and API phases nest per thread, NVTX start/end ranges
/// among themselves.
std::pair<bool, uint64_t> family_of(const Phase& p) {
    const bool range = p.source == PhaseSource::NvtxRange;
    return {range, range ? 0 : p.tid};
}

}  // namespace

uint64_t PhaseObserver::level(size_t s) const {
    const Levels& l = walk_.get().levels();
    return s == index(Series::Tensors) ? l.tensor_bytes : l.gpu_bytes;
}

PhaseObserver::Best PhaseObserver::point(size_t s) const { return Best{level(s), walk_.get().applied(), last_t_}; }

void PhaseObserver::catch_up_marks(const Report& r) {
    // The marks read since the last event: all at this point.
    for (; marks_seen_ < r.marks.size(); ++marks_seen_) {
        for (size_t s = 0; s < series_.size(); ++s) series_[s].marks.push_back(level(s));
    }
}

void PhaseObserver::before(const Report& r, const Event& e) {
    (void)e;
    walk_.get(r);
    catch_up_marks(r);
}

bool PhaseObserver::on_event(const Report& r, const Event& e) {
    if (!walk_.shared()) {
        before(r, e);
        walk_.apply(r, e);
    }
    last_t_ = e.t;
    if (open_.empty()) return true;
    for (size_t s = 0; s < series_.size(); ++s) {
        Best& c = series_[s].current;
        const uint64_t now = level(s);
        if (now > c.bytes) c = Best{now, walk_.get().applied(), last_t_};
    }
    return true;
}

void PhaseObserver::on_phase(const Report& r, size_t phase) {
    walk_.get(r);
    if (!r.phases[phase].t_end) {
        begin(r, phase);
    } else {
        end(r, phase);
    }
}

void PhaseObserver::set_leaf(PerSeries& s, size_t slot, const Best& b) {
    size_t i = capacity_ + slot;
    s.tree[i] = b;
    for (i /= 2; i >= 1; i /= 2) s.tree[i] = Best::join(s.tree[2 * i], s.tree[2 * i + 1]);
}

PhaseObserver::Best PhaseObserver::suffix(const PerSeries& s, size_t slot) const {
    Best left, right;
    for (size_t lo = capacity_ + slot, hi = 2 * capacity_; lo < hi; lo /= 2, hi /= 2) {
        if (lo & 1) left = Best::join(left, s.tree[lo++]);
        if (hi & 1) right = Best::join(s.tree[--hi], right);
    }
    return Best::join(left, right);
}

size_t PhaseObserver::take_slot() {
    if (next_slot_ < capacity_) return next_slot_++;
    // Full: the open phases' stretches moved to the first slots, in order, in a tree with room for
    // half as many again, so that its size follows the open phases and a rebuild (O(its size))
    // comes after as many begins as a third of it.
    const size_t capacity = open_.size() + std::max<size_t>(16, open_.size() / 2);
    for (PerSeries& s : series_) {
        std::vector<Best> tree(2 * capacity);
        size_t slot = 0;
        for (const auto& [phase, old] : open_) tree[capacity + slot++] = s.tree[capacity_ + old];
        for (size_t i = capacity - 1; i >= 1; --i) tree[i] = Best::join(tree[2 * i], tree[2 * i + 1]);
        s.tree = std::move(tree);
    }
    size_t slot = 0;
    for (auto& [phase, old] : open_) old = slot++;
    capacity_ = capacity;
    next_slot_ = slot;
    return next_slot_++;
}

void PhaseObserver::begin(const Report& r, size_t phase) {
    if (phase != series_[0].stats.size()) return;  // not told in order: cannot happen
    const Phase& p = r.phases[phase];
    std::set<size_t>& family = families_[family_of(p)];
    PhaseStats st;
    st.index = phase;
    st.occurrence = seen_[p.name]++;
    st.depth = static_cast<int>(std::min<size_t>(family.size(), INT32_MAX));
    if (!family.empty()) st.parent = r.phases[*family.rbegin()].id;
    family.insert(phase);
    // The last open phase's stretch ends here: into its slot; this one's begins.
    const size_t slot = take_slot();
    for (size_t s = 0; s < series_.size(); ++s) {
        PerSeries& x = series_[s];
        if (!open_.empty()) set_leaf(x, open_.rbegin()->second, x.current);
        x.current = point(s);
        st.entry_bytes = level(s);
        x.stats.push_back(st);
    }
    open_.emplace(phase, slot);
}

void PhaseObserver::end(const Report& r, size_t phase) {
    auto it = open_.find(phase);
    if (it == open_.end()) return;  // its B was not told: cannot happen
    const Phase& p = r.phases[phase];
    const bool last = std::next(it) == open_.end();
    const std::optional<size_t> previous = it == open_.begin() ? std::nullopt
                                                               : std::optional<size_t>(std::prev(it)->second);
    for (size_t s = 0; s < series_.size(); ++s) {
        PerSeries& x = series_[s];
        // Its peak: the highest from its begin to here, over its stretch and the later ones.
        const Best peak = last ? x.current : Best::join(suffix(x, it->second), x.current);
        PhaseStats& st = x.stats[phase];
        st.peak_bytes = peak.bytes;
        st.peak_events = peak.events;
        st.peak_t = std::max(p.t_begin, peak.t);
        st.exit_bytes = level(s);
        st.t_end = *p.t_end;
        // Its stretch joins the previous open phase's (which now reaches to the next one's begin).
        if (last) {
            if (previous) {
                x.current = Best::join(x.tree[capacity_ + *previous], x.current);
                set_leaf(x, *previous, Best{});
            } else {
                x.current = Best{};
            }
        } else {
            const Best mine = x.tree[capacity_ + it->second];
            if (previous) set_leaf(x, *previous, Best::join(x.tree[capacity_ + *previous], mine));
            set_leaf(x, it->second, Best{});
        }
    }
    auto family = families_.find(family_of(p));
    family->second.erase(phase);
    if (family->second.empty()) families_.erase(family);
    open_.erase(it);
}

namespace {

std::vector<int64_t> best_values(int64_t series, int64_t slot, uint64_t bytes, size_t events, int64_t t) {
    return {series, slot, fold_of(bytes), fold_of(events), t};
}

}  // namespace

void PhaseObserver::fold_out(const Report& r, FoldWriter& w) {
    (void)r;
    w.figure("phases", {last_t_, fold_of(marks_seen_), fold_of(capacity_), fold_of(next_slot_)});
    for (const auto& [phase, slot] : open_) w.figure("phases.open", {fold_of(phase), fold_of(slot)});
    for (size_t s = 0; s < series_.size(); ++s) {
        const PerSeries& x = series_[s];
        const auto series = static_cast<int64_t>(s);
        for (const PhaseStats& st : x.stats) {
            w.figure("phases.stat", {series, fold_of(st.index), st.depth, st.parent ? 1 : 0, st.parent.value_or(0),
                                     st.occurrence, fold_of(st.entry_bytes), fold_of(st.peak_bytes), st.peak_t,
                                     fold_of(st.peak_events), fold_of(st.exit_bytes), st.t_end});
        }
        for (size_t i = 0; i < x.marks.size(); i += 200) {
            std::vector<int64_t> v{series};
            for (size_t j = i; j < std::min(x.marks.size(), i + 200); ++j) v.push_back(fold_of(x.marks[j]));
            w.figure("phases.marks", v);
        }
        // The current stretch as slot -1; the tree's leaves that hold a stretch.
        w.figure("phases.best", best_values(series, -1, x.current.bytes, x.current.events, x.current.t));
        for (size_t slot = 0; slot < capacity_; ++slot) {
            const Best& b = x.tree[capacity_ + slot];
            if (b.events == Best::kEmpty) continue;
            w.figure("phases.best", best_values(series, fold_of(slot), b.bytes, b.events, b.t));
        }
    }
}

void PhaseObserver::fold_in(const Report& r, const Fold& f) {
    walk_.get(r);
    walk_.fold_in(r, f.at.events);
    bool found = false;
    f.each("phases", [&](const Fold::Figure& x) {
        found = true;
        last_t_ = fold_value(x, 0, INT64_MIN);
        marks_seen_ = static_cast<size_t>(fold_value(x, 1));
        capacity_ = static_cast<size_t>(fold_value(x, 2));
        next_slot_ = static_cast<size_t>(fold_value(x, 3));
    });
    if (!found) throw BadFold("no figure 'phases'");
    if (marks_seen_ > r.marks.size() || next_slot_ > capacity_ || capacity_ > (size_t{1} << 32)) {
        throw BadFold("phases: marks or slots out of range");
    }
    for (PerSeries& x : series_) {
        x = PerSeries{};
        x.tree.assign(capacity_ == 0 ? 0 : 2 * capacity_, Best{});
    }
    auto series_of = [&](const Fold::Figure& x) {
        const int64_t s = fold_value(x, 0);
        if (s >= static_cast<int64_t>(series_.size())) throw BadFold(x.name + ": no series " + std::to_string(s));
        return static_cast<size_t>(s);
    };
    f.each("phases.stat", [&](const Fold::Figure& x) {
        PerSeries& to = series_[series_of(x)];
        PhaseStats st;
        st.index = static_cast<size_t>(fold_value(x, 1));
        if (st.index != to.stats.size() || st.index >= r.phases.size()) throw BadFold("phases.stat out of order");
        st.depth = static_cast<int>(fold_value(x, 2));
        if (fold_value(x, 3) != 0) st.parent = static_cast<uint32_t>(fold_value(x, 4));
        st.occurrence = static_cast<uint32_t>(fold_value(x, 5));
        st.entry_bytes = fold_u64(x, 6);
        st.peak_bytes = fold_u64(x, 7);
        st.peak_t = fold_value(x, 8, INT64_MIN);
        st.peak_events = static_cast<size_t>(fold_u64(x, 9));
        st.exit_bytes = fold_u64(x, 10);
        st.t_end = fold_value(x, 11, INT64_MIN);
        to.stats.push_back(st);
    });
    f.each("phases.marks", [&](const Fold::Figure& x) {
        PerSeries& to = series_[series_of(x)];
        for (size_t i = 1; i < x.values.size(); ++i) to.marks.push_back(fold_u64(x, i));
    });
    f.each("phases.best", [&](const Fold::Figure& x) {
        PerSeries& to = series_[series_of(x)];
        const int64_t slot = fold_value(x, 1, -1);
        const Best b{fold_u64(x, 2), static_cast<size_t>(fold_u64(x, 3)), fold_value(x, 4, INT64_MIN)};
        if (slot < 0) {
            to.current = b;
        } else if (static_cast<size_t>(slot) < capacity_) {
            to.tree[capacity_ + static_cast<size_t>(slot)] = b;
        } else {
            throw BadFold("phases.best: no slot " + std::to_string(slot));
        }
    });
    for (PerSeries& x : series_) {
        if (x.stats.size() != series_[0].stats.size() || x.marks.size() != marks_seen_) {
            throw BadFold("phases: the series do not hold the same phases and marks");
        }
        for (size_t i = capacity_; i-- > 1;) x.tree[i] = Best::join(x.tree[2 * i], x.tree[2 * i + 1]);
    }
    // The open phases, their families (open phases by thread and source) and the names seen so far
    // follow from the report's phases.
    open_.clear();
    families_.clear();
    seen_.clear();
    f.each("phases.open", [&](const Fold::Figure& x) {
        const auto phase = static_cast<size_t>(fold_value(x, 0));
        const auto slot = static_cast<size_t>(fold_value(x, 1));
        if (phase >= series_[0].stats.size() || slot >= next_slot_) throw BadFold("phases.open out of range");
        open_.emplace(phase, slot);
        families_[family_of(r.phases[phase])].insert(phase);
    });
    for (const PhaseStats& st : series_[0].stats) ++seen_[r.phases[st.index].name];
}

void PhaseObserver::on_end(const Report& r) {
    walk_.get(r);
    catch_up_marks(r);
    // The phases never ended are measured to the end: each one's peak is the highest over its
    // stretch and the later ones.
    for (size_t s = 0; s < series_.size(); ++s) {
        PerSeries& x = series_[s];
        Best later = x.current;
        for (auto it = open_.rbegin(); it != open_.rend(); ++it) {
            if (it != open_.rbegin()) later = Best::join(x.tree[capacity_ + it->second], later);
            const Phase& p = r.phases[it->first];
            PhaseStats& st = x.stats[it->first];
            st.peak_bytes = later.bytes;
            st.peak_events = later.events;
            st.peak_t = std::max(p.t_begin, later.t);
            st.exit_bytes = level(s);
            st.t_end = r.end_t;
        }
    }
}

}  // namespace memguard::report
