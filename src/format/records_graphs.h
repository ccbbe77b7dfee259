// The record table's graphs records (format/records.h says how a record is described).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

#include "format/field.h"

namespace memguard::format::rec {

// --- graphs: stream capture, CUDA graphs, hazards (minor 1) ---------------------------------------

/// C: a stream capture began.
struct CaptureBegin {
    static constexpr char kLetter = 'C';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t capture_id = 0;
    uint64_t stream = 0;
    CaptureMode mode = CaptureMode::Global;
    std::optional<uint64_t> graph;  // cudaStreamBeginCaptureToGraph's graph
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::capture, r.capture_id);
        v(field::stream, r.stream);
        v(Field{"mode", "capture mode", Enc::Name}, r.mode);
        v(field::graph, r.graph);
    }
};

/// c: the capture ended.
struct CaptureEnd {
    static constexpr char kLetter = 'c';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t capture_id = 0;
    int error = 0;
    std::optional<uint64_t> graph;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::capture, r.capture_id);
        v(field::error, r.error);
        v(field::graph, r.graph);
    }
};

/// G: a graph exec was instantiated.
struct Instantiate {
    static constexpr char kLetter = 'G';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    int64_t t = 0;
    uint64_t tid = 0, exec = 0, graph = 0;
    uint32_t capture_id = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::exec, r.exec);
        v(field::graph, r.graph);
        v(field::capture_id, r.capture_id);
    }
};

/// L: a graph exec was launched.
struct Launch {
    static constexpr char kLetter = 'L';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    int64_t t = 0;
    uint64_t tid = 0, exec = 0, stream = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::exec, r.exec);
        v(field::stream, r.stream);
    }
};

/// D: a graph exec was destroyed.
struct ExecDestroy {
    static constexpr char kLetter = 'D';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    int64_t t = 0;
    uint64_t tid = 0, exec = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::exec, r.exec);
    }
};

/// K: a graph was destroyed.
struct GraphDestroy {
    static constexpr char kLetter = 'K';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    int64_t t = 0;
    uint64_t tid = 0, graph = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v(field::graph, r.graph);
    }
};

// W records: a hazard. Their fields after `kind` depend on the kind (kKey); the reader reads the
// fields up to the key, then the record of that key. Unknown kinds are ignored, like unknown letters.

/// W unsafe_call: a potentially unsafe call while capture-mode rules forbid it.
struct UnsafeCall {
    static constexpr char kLetter = 'W';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    static constexpr std::string_view kKey = "unsafe_call";
    int64_t t = 0;
    uint64_t tid = 0;
    std::string_view api;
    uint32_t capture_id = 0;
    CaptureMode capture_mode = CaptureMode::Global, thread_mode = CaptureMode::Global;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v.key(field::kind, kKey);
        v(field::api, r.api);
        v(field::capture, r.capture_id);
        v(Field{"capture_mode", "capture mode", Enc::Name}, r.capture_mode);
        v(Field{"thread_mode", "thread mode", Enc::Name}, r.thread_mode);
    }
};

/// W free_live_graph: a capture's block freed while an exec of its graph lives.
struct FreeLiveGraph {
    static constexpr char kLetter = 'W';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    static constexpr std::string_view kKey = "free_live_graph";
    int64_t t = 0;
    uint64_t tid = 0, addr = 0, size = 0;
    uint32_t capture_id = 0;
    uint64_t exec = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v.key(field::kind, kKey);
        v(field::addr, r.addr);
        v(field::size, r.size);
        v(field::capture, r.capture_id);
        v(field::exec, r.exec);
    }
};

/// W warmup_retention: one site's blocks still live at a capture boundary.
struct WarmupRetention {
    static constexpr char kLetter = 'W';
    static constexpr int kMinor = 1;
    static constexpr Family kFamily = Family::Graphs;
    static constexpr std::string_view kKey = "warmup_retention";
    int64_t t = 0;
    uint64_t tid = 0;
    uint32_t capture_id = 0;
    CapturePhase phase = CapturePhase::Begin;
    int64_t since = 0;
    uint32_t stack_id = 0;
    uint64_t blocks = 0, bytes = 0;
    template <class V, class R>
    [[gnu::always_inline]] static constexpr void fields(V& v, R& r) {
        v(field::t, r.t);
        v(field::tid, r.tid);
        v.key(field::kind, kKey);
        v(field::capture, r.capture_id);
        v(Field{"phase", "phase", Enc::Name}, r.phase);
        v(Field{"since", "since", Enc::Span}, r.since);
        v(field::stack_id, r.stack_id);
        v(field::blocks, r.blocks);
        v(field::bytes, r.bytes);
    }
};

}  // namespace memguard::format::rec
