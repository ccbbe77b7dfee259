// The reader's stream capture and CUDA graph records (docs/report-format.md, minor 1): C, c, G, L,
// D, K and the hazards (W). The writer's side is track/records_graphs.cpp.
#include <string>

#include "report/parser.h"

namespace memguard::report {

void Parser::apply(const rec::CaptureBegin& r) {
    Capture c;
    c.t_begin = r.t;
    c.tid = r.tid;
    c.id = r.capture_id;
    c.stream = r.stream;
    c.mode = r.mode;
    c.target_graph = r.graph;
    if (captures_.count(c.id) != 0) {
        warn("dup-capture", "capture " + std::to_string(c.id) + " begun twice; the second C record is ignored");
        return;
    }
    captures_[c.id] = report_.captures.size();
    report_.captures.push_back(c);
}

void Parser::apply(const rec::CaptureEnd& r) {
    auto it = captures_.find(r.capture_id);
    if (it == captures_.end()) {
        check_capture_ref(r.capture_id, "c");
        return;
    }
    Capture& c = report_.captures[it->second];
    if (c.t_end) {
        warn("capture-ended-twice",
             "capture " + std::to_string(r.capture_id) + " ended twice; the second c record is ignored");
        return;
    }
    c.t_end = r.t;
    c.end_tid = r.tid;
    c.end_error = r.error;
    c.graph = r.graph;
    if (r.graph) live_graphs_[*r.graph] = it->second;
}

void Parser::apply(const rec::Instantiate& r) {
    GraphExec g;
    g.t_instantiate = r.t;
    g.tid = r.tid;
    g.exec = r.exec;
    g.graph = r.graph;
    g.capture_id = r.capture_id;
    check_capture_ref(g.capture_id, "G");
    auto old = execs_.find(g.exec);
    if (old != execs_.end() && !report_.execs[old->second].t_destroy) {
        warn("double-instantiate", "graph exec " + hex(g.exec) +
                                       " instantiated while already alive; the earlier "
                                       "exec is taken as destroyed (a destroy was not recorded)");
        report_.execs[old->second].t_destroy = g.t_instantiate;
    }
    execs_[g.exec] = report_.execs.size();
    report_.execs.push_back(g);
}

std::optional<size_t> Parser::live_exec(uint64_t exec, const char* record) {
    auto it = execs_.find(exec);
    if (it == execs_.end()) {
        warn("unknown-exec", std::string(record) + " record names graph exec " + hex(exec) +
                                 ", which no earlier G record instantiated; ignored");
        return std::nullopt;
    }
    if (report_.execs[it->second].t_destroy) {
        warn("destroyed-exec", std::string(record) + " record names graph exec " + hex(exec) +
                                   ", which was destroyed (D) and not instantiated again; ignored");
        return std::nullopt;
    }
    return it->second;
}

void Parser::apply(const rec::Launch& r) {
    if (auto i = live_exec(r.exec, "L")) ++report_.execs[*i].launches;
}

void Parser::apply(const rec::ExecDestroy& r) {
    if (auto i = live_exec(r.exec, "D")) report_.execs[*i].t_destroy = r.t;
}

void Parser::apply(const rec::GraphDestroy& r) {
    GraphDestroy k;
    k.t = r.t;
    k.tid = r.tid;
    k.graph = r.graph;
    // Graphs memguard did not see a capture end in (built node by node) are destroyed too: no warning.
    auto it = live_graphs_.find(k.graph);
    if (it != live_graphs_.end()) {
        Capture& c = report_.captures[it->second];
        c.t_graph_destroy = k.t;
        k.capture_id = c.id;
        live_graphs_.erase(it);
    }
    report_.graph_destroys.push_back(k);
}

void Parser::apply(const rec::UnsafeCall& r) {
    UnsafeCall u;
    u.t = r.t;
    u.tid = r.tid;
    u.api = std::string(r.api);
    u.capture_id = r.capture_id;
    u.capture_mode = r.capture_mode;
    u.thread_mode = r.thread_mode;
    check_capture_ref(u.capture_id, "W unsafe_call");
    report_.hazards.unsafe_calls.push_back(std::move(u));
}

void Parser::apply(const rec::FreeLiveGraph& r) {
    FreeWhileGraphAlive h;
    h.t = r.t;
    h.tid = r.tid;
    h.addr = r.addr;
    h.size = r.size;
    h.capture_id = r.capture_id;
    h.exec = r.exec;
    check_capture_ref(h.capture_id, "W free_live_graph");
    // The library writes the hazard right after the F of the block; a hazard before the F (the
    // block still live) is understood too. A candidate of the named capture wins.
    std::optional<size_t> candidates[2];
    if (const AtAddr* at = blocks_at_.find(h.addr)) candidates[at->live ? 1 : 0] = at->block;
    for (const auto& c : candidates) {
        if (c && !h.block && report_.blocks[*c].capture_id == h.capture_id) h.block = c;
    }
    for (const auto& c : candidates) {
        if (c && !h.block) h.block = c;
    }
    const bool found = h.block.has_value();
    if (report_.streamed) h.block.reset();  // a slot: a streamed report keeps no freed block to name
    if (!found) {
        warn("hazard-free-unknown", "free_live_graph hazard at " + hex(h.addr) +
                                        ", which is neither live nor freed; its allocation site is unknown");
    }
    auto exec = execs_.find(h.exec);
    if (exec != execs_.end()) {
        h.exec_index = exec->second;
    } else {
        warn("unknown-exec",
             "W free_live_graph record names graph exec " + hex(h.exec) + ", which no earlier G record instantiated");
    }
    report_.hazards.frees_while_graph_alive.push_back(h);
}

void Parser::apply(const rec::WarmupRetention& r) {
    WarmupRetention w;
    w.t = r.t;
    w.tid = r.tid;
    w.capture_id = r.capture_id;
    w.phase = r.phase;
    w.since = r.since;
    w.stack_id = r.stack_id;
    w.blocks = r.blocks;
    w.bytes = r.bytes;
    check_capture_ref(w.capture_id, "W warmup_retention");
    check_stack_ref(w.stack_id, "W warmup_retention");
    report_.hazards.warmup_retention.push_back(w);
}

}  // namespace memguard::report
