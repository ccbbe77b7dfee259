// The Recorder's event records: compiles (X) and collections (Y) from the Python hook (minor 2),
// phases (B, b) and marks (J) (minor 4), the interpreter's paths (e, minor 8: a meta record, written
// here with the hook's other deferred records). They wait in memory until the report exists
// (append_or_defer); the reader's side is report/read_events.cpp.
#include <cstdio>
#include <optional>

#include "format/encode.h"
#include "track/clock.h"
#include "track/recorder.h"

namespace memguard::track {

void Recorder::record_compile(std::string_view compile_id) {
    if (!active()) return;
    emit_or_defer(format::rec::Compile{now(), current_tid(), compile_id});
}

void Recorder::record_python_path(format::PathKind kind, std::string_view path) {
    if (!active() || path.empty()) return;
    emit_or_defer(format::rec::PythonPath{kind, path});
}

void Recorder::record_collection(const Collection& c) {
    if (!active()) return;
    gc_collections_.fetch_add(1, std::memory_order_relaxed);
    if (c.cuda_bytes_freed > 0) {
        gc_freeing_collections_.fetch_add(1, std::memory_order_relaxed);
        gc_cuda_bytes_freed_.fetch_add(static_cast<uint64_t>(c.cuda_bytes_freed), std::memory_order_relaxed);
    }
    bool own = format::is_memguards(c.trigger);
    if (own && !ensure_started()) return;
    if (own && !gc_budget_said_.exchange(true, std::memory_order_relaxed)) {
        char budget[32];
        std::snprintf(budget, sizeof budget, "%g", config_.cycles.gc_budget);
        emit(format::rec::Info{"gc_budget", budget});  // minor 9: what `memguard cycles` measures against
    }
    format::rec::Collection y;
    y.t = now();
    y.tid = current_tid();
    y.trigger = c.trigger;
    y.generation = c.generation;
    y.duration_ns = c.duration_ns;
    y.collected = c.collected;
    y.uncollectable = c.uncollectable;
    if (c.cuda_bytes_freed >= 0) y.cuda_bytes_freed = c.cuda_bytes_freed;
    if (!c.compile_ids.empty()) y.compile_ids = c.compile_ids;
    if (c.mark_age_ns >= 0) y.mark_age_ns = c.mark_age_ns;
    if (own) y.skipped = c.skipped;
    if (c.explain != 0) y.explain = c.explain;
    emit_or_defer(y);
}

uint64_t Recorder::record_phase_begin(PhaseSource source, std::string_view name) {
    if (!active()) return 0;
    uint64_t id = phases_.open();
    emit_or_defer(format::rec::PhaseBegin{now(), current_tid(), id, source, cut_phase_name(name)});
    return id;
}

bool Recorder::record_phase_end(uint64_t id) {
    if (!phases_.close(id)) return false;
    emit_or_defer(format::rec::PhaseEnd{now(), current_tid(), id});
    return true;
}

void Recorder::record_mark(PhaseSource source, std::string_view name) {
    if (!active()) return;
    emit_or_defer(format::rec::Mark{now(), current_tid(), source, cut_phase_name(name)});
}

}  // namespace memguard::track
