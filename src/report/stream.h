// The streaming reader: a report read in one pass, in memory bounded by what is live (blocks,
// tensors, sites, stacks), not by the number of events (docs/architecture.md, "The streaming reader").
//
// load_report keeps every block, tensor and Event, so that any view can replay any prefix. A streamed
// report keeps a block (tensor) only while it is live: the parser holds the live ones in slots of
// Report::blocks (Report::tensors), recycles a slot once its free was told, stores no Event, and tells
// each event, as it is read, to an EventObserver, which folds it into what its command needs (a
// Summary, the live set at one point). Everything else (stacks, modules, phases, steps, captures,
// collections, failures, virtual memory, ...) is kept as load_report keeps it; positions
// (Phase::events_at_begin, Step::events_before, ...) count the events as load_report would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "report/analysis.h"
#include "report/fold.h"
#include "report/levels.h"
#include "report/report.h"

namespace memguard::report {

/// Told of every event of a streamed report, in file order.
class EventObserver {
public:
    virtual ~EventObserver() = default;
    /// `e.block` names a slot of r.blocks or r.tensors (Alloc ... TensorFree), or an index into
    /// r.reservations, r.handles or r.mappings, as in Report::events; the item is in place during the
    /// call (a freed block still in its slot, its t_free set). Returns false to stop reading: the
    /// rest of the file is not read.
    virtual bool on_event(const Report& r, const Event& e) = 0;
    /// After a B or b record was applied to r.phases[phase], between the events around it: begun,
    /// or (its t_end now set) ended. Not told of the B and b records the parser ignores.
    virtual void on_phase(const Report& r, size_t phase) { (void)r, (void)phase; }
    /// After the last record, before the slots are compacted: r.blocks and r.tensors are still the
    /// slots the events named.
    virtual void on_end(const Report& r) { (void)r; }
    /// One walk for several observers (Observers): an observer that reads levels may take the
    /// LevelWalk that the Observers it is part of applies once per event for all of them, instead
    /// of applying each event to a walk of its own. Asked once, before the first event; returns
    /// whether it took the walk. If it did, before() comes before the walk applies each event, and
    /// on_event() after. (A walk costs about a third of reading an allocation churn: issue 23.)
    virtual bool share_walk(const LevelWalk& walk) {
        (void)walk;
        return false;
    }
    virtual void before(const Report& r, const Event& e) {
        (void)r;
        (void)e;
    }

    // A bounded report's folds (report/fold.h, docs/bounded-reports.md).
    /// Writes what the observer has folded so far as figures: called where a fold stands.
    virtual void fold_out(const Report& r, FoldWriter& w) {
        (void)r;
        (void)w;
    }
    /// Takes back what fold_out wrote, in place of what it folded from the report so far (the
    /// spine's records before the fold's point, and the live set the part after it carries): what
    /// it holds is then what it held at the fold's point of the whole report. Throws BadFold. An
    /// observer that does not fold keeps what it read, and counts from the fold's point on.
    virtual void fold_in(const Report& r, const Fold& f) {
        (void)r;
        (void)f;
    }
    /// A bounded report: detail part `at.part` + 1 begins (its carried blocks are applied). Returns
    /// false to stop reading (a fold is taken there).
    virtual bool at_part(const Report& r, const FoldPoint& at) {
        (void)r;
        (void)at;
        return true;
    }
};

/// Reads a whole report, telling `observer` of each event. Throws ReportError as load_report does,
/// with the same warnings. The report returned is `streamed`: no events, and its blocks and tensors
/// are those live at the end, in order of their A and T records (Block::order, Tensor::order).
Report stream_report(const std::string& path, EventObserver& observer);
/// As stream_report, from `file` (open for reading; not closed), which `name` names in messages and
/// Report::path.
Report stream_report(std::FILE* file, const std::string& name, EventObserver& observer);
/// As stream_report, for a report held in memory (tests).
Report stream_report_text(std::string_view content, const std::string& name, EventObserver& observer);

/// Whether `path` can be read twice (a regular file): a second pass (the live set at the peak)
/// needs it; the CLI reads a pipe (`memguard summary <(zcat r.mgr.gz)`) once, copying it to a spool
/// that later passes read (tools/memguard/report_input.h).
bool rereadable(const std::string& path);

/// The LevelWalk an observer reads: the one its Observers shares (share_walk), else its own, to
/// which the observer applies each event itself. The pattern of such an observer:
///     bool share_walk(const LevelWalk& w) override { return walk_.share(w); }
///     void before(r, e) override { ...what reads the levels before e... }
///     bool on_event(r, e) override {
///         if (!walk_.shared()) { before(r, e); walk_.apply(r, e); }
///         ...what reads them after...
///     }
class WalkRef {
public:
    bool share(const LevelWalk& walk) {
        shared_ = &walk;
        return true;
    }
    bool shared() const { return shared_ != nullptr; }
    /// Applies `e` to the observer's own walk (only when not shared).
    void apply(const Report& r, const Event& e) { own(r).apply(e); }
    /// At a fold: the observer's own walk counts `events` applied (a shared one is set by its Observers).
    void fold_in(const Report& r, size_t events) {
        if (shared_ == nullptr) own(r).set_applied(events);
    }
    const LevelWalk& get(const Report& r) { return shared_ != nullptr ? *shared_ : own(r); }
    /// Once get(r) or apply() was called.
    const LevelWalk& get() const { return shared_ != nullptr ? *shared_ : *walk_; }

private:
    LevelWalk& own(const Report& r) {
        if (!walk_) walk_.emplace(r);
        return *walk_;
    }
    const LevelWalk* shared_ = nullptr;
    std::optional<LevelWalk> walk_;
};

/// The figures of summarize(), folded event by event: summarize(r) is a SummaryBuilder over
/// r.events, so that both readers give one answer.
class SummaryBuilder : public EventObserver {
public:
    bool on_event(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    bool share_walk(const LevelWalk& walk) override { return walk_.share(walk); }
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;
    /// The summary of the report read; call once, after the read.
    Summary take(const Report& r);

private:
    struct Peak {
        uint64_t bytes = 0;
        std::optional<int64_t> t;
        bool update(uint64_t now, int64_t at) {
            if (now <= bytes) return false;
            bytes = now;
            t = at;
            return true;
        }
    };
    WalkRef walk_;
    Summary s_;
    Peak gpu_, mapped_, physical_, reserved_, tensor_;
    std::array<Peak, kKindCount> kinds_;
    std::map<int, Peak> devices_;
    DeviceEntry<Peak> device_peak_;
    DeviceEntry<DeviceStats> by_device_;
};

/// The blocks, tensors and physical handles live at one point of a streamed report, copied out of
/// the parser's slots.
class PointSnapshot {
public:
    /// What `walk` (over `r`'s slots) says is live now; `last_t`: the time of its last event.
    void take(const Report& r, const LevelWalk& walk, int64_t last_t);
    /// The snapshot of the given items, copied as take() copies them (their frees cleared) and put in
    /// order (Block::order, Tensor::order); `handles`: indices into the report's handles.
    void assign(int64_t last_t, std::vector<Block> blocks, std::vector<Tensor> tensors, std::vector<size_t> handles);
    void clear();
    /// The time of the last event before the point (0 for none).
    int64_t last_t() const { return last_t_; }
    /// The blocks, tensors and handles it holds.
    size_t size() const { return blocks_.size() + tensors_.size() + handles_.size(); }
    /// Slots looked at by take(), for callers that bound their work.
    size_t cost(const Report& r) const { return r.blocks.size() + r.tensors.size() + r.handles.size(); }

    /// `base` (the streamed report) made into the report of the point: its blocks and tensors those
    /// live there, in order, with one event each (at the time of the point's last event) after which
    /// every view of a point (group_by_site, breakdown_at) reads as it would on the whole report.
    /// `live` gets them all, and `t` as its time. Positions (phases, steps, moments) are not
    /// translated: views that read them need load_report. (An empty point has no event, so its
    /// Breakdown::t is 0.)
    Report into(Report base, int64_t t, LiveSet& live);

    /// The snapshot as figures `<name>` (its time, then its handles), `<name>.block` and
    /// `<name>.tensor` (each with its copy and its order), and back.
    void fold_out(std::string_view name, FoldWriter& w) const;
    void fold_in(const Report& r, std::string_view name, const Fold& f);

private:
    int64_t last_t_ = 0;
    std::vector<Block> blocks_;
    std::vector<Tensor> tensors_;
    std::vector<size_t> handles_;
};

/// The live set at one point, taken while streaming: the point is after `events` events, or before
/// the first event later than `after_t` (LiveSet's rule), or else the end.
class PointObserver : public EventObserver {
public:
    /// `stop`: read no further once the point is taken (a second pass, whose report is not used).
    PointObserver(std::optional<size_t> events, std::optional<int64_t> after_t, bool stop)
        : events_(events), after_t_(after_t), stop_(stop) {}
    bool on_event(const Report& r, const Event& e) override;
    /// Counts events from the fold's on. A point before it is not in the fold (only figures are):
    /// before_fold() says so, and what take() gives is the live set where the fold stands.
    void fold_in(const Report& r, const Fold& f) override;
    bool before_fold() const { return before_fold_; }
    void on_end(const Report& r) override;

    /// The report of the point (PointSnapshot::into).
    Report take(Report base, int64_t t, LiveSet& live) { return point_.into(std::move(base), t, live); }
    /// Where the point is, once taken: the events applied there (as load_report counts them), and
    /// the time of the last of them (0 for none), as PointBreakdowns::at takes a point.
    size_t position() const { return position_; }
    int64_t last_t() const { return point_.last_t(); }

private:
    std::optional<size_t> events_;
    std::optional<int64_t> after_t_;
    bool stop_ = false;
    std::optional<LevelWalk> walk_;
    bool taken_ = false;
    bool before_fold_ = false;
    int64_t last_t_ = 0;
    size_t position_ = 0;
    PointSnapshot point_;
};

/// The live sets at the GPU peak and at the tensor peak (as summarize() finds them: the first time
/// the most bytes were live), in the same pass as the summary: a copy of the live set is taken when
/// the next event after a new peak does not raise it again, so that a run of allocations up to a
/// peak costs one copy. A run whose peaks keep coming back costs a copy each: past a budget of
/// copying (kBudget slots per event read) it gives up, and the caller reads the peak in a second
/// pass (PointObserver).
class PeakObserver : public EventObserver {
public:
    static constexpr size_t kBudget = 8;
    /// None: never gives up (a fold must hold the live set at its peaks).
    enum class Budget { Slots, None };
    explicit PeakObserver(Budget budget = Budget::Slots) : budget_(budget) {}
    bool on_event(const Report& r, const Event& e) override;
    void on_end(const Report& r) override;
    bool share_walk(const LevelWalk& walk) override { return walk_.share(walk); }
    void before(const Report& r, const Event& e) override;
    void fold_out(const Report& r, FoldWriter& w) override;
    void fold_in(const Report& r, const Fold& f) override;

    /// Whether the peak of `tensors` (tensor bytes) or of GPU bytes was taken; `events`: summarize()'s
    /// peak_events or tensor_peak_events, which it checks.
    bool has(bool tensors, size_t events) const;
    /// The report of that peak (PointSnapshot::into).
    Report take(bool tensors, Report base, int64_t t, LiveSet& live);

private:
    struct Series {
        uint64_t best = 0;
        bool pending = false;  // a new peak whose live set is not copied yet
        size_t events = 0;     // events applied at the peak
        bool folded = false;   // `point` came from a fold: kept when giving up
        PointSnapshot point;
    };
    void copy(const Report& r, Series& s);

    Budget budget_;
    WalkRef walk_;
    int64_t last_t_ = 0;
    size_t work_ = 0;
    bool gave_up_ = false;
    Series gpu_, tensor_;
};

/// Tells every event to several observers, in order; stops reading when all of them asked to.
/// Applies each event once to a LevelWalk that the observers which take it share (share_walk).
class Observers : public EventObserver {
public:
    explicit Observers(std::vector<EventObserver*> all) : all_(std::move(all)) {}
    bool on_event(const Report& r, const Event& e) override;
    void on_phase(const Report& r, size_t phase) override;
    void on_end(const Report& r) override;
    void fold_out(const Report& r, FoldWriter& w) override;
    /// Sets the shared walk's count of events to the fold's, then each observer's state.
    void fold_in(const Report& r, const Fold& f) override;
    bool at_part(const Report& r, const FoldPoint& at) override;

private:
    /// At the first call of any kind: the walk, offered to every observer.
    void start(const Report& r);
    std::vector<EventObserver*> all_;
    bool started_ = false;
    std::optional<LevelWalk> walk_;  // when an observer took it
};

}  // namespace memguard::report
