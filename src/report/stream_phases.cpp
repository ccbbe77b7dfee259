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
    const Levels& l = walk_->levels();
    return s == index(Series::Tensors) ? l.tensor_bytes : l.gpu_bytes;
}

PhaseObserver::Best PhaseObserver::point(size_t s) const { return Best{level(s), walk_->applied(), last_t_}; }

void PhaseObserver::catch_up_marks(const Report& r) {
    // The marks read since the last event: all at this point.
    for (; marks_seen_ < r.marks.size(); ++marks_seen_) {
        for (size_t s = 0; s < series_.size(); ++s) series_[s].marks.push_back(level(s));
    }
}

bool PhaseObserver::on_event(const Report& r, const Event& e) {
    if (!walk_) walk_.emplace(r);
    catch_up_marks(r);
    walk_->apply(e);
    last_t_ = e.t;
    if (open_.empty()) return true;
    for (size_t s = 0; s < series_.size(); ++s) {
        Best& c = series_[s].current;
        const uint64_t now = level(s);
        if (now > c.bytes) c = Best{now, walk_->applied(), last_t_};
    }
    return true;
}

void PhaseObserver::on_phase(const Report& r, size_t phase) {
    if (!walk_) walk_.emplace(r);
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

void PhaseObserver::on_end(const Report& r) {
    if (!walk_) walk_.emplace(r);
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
