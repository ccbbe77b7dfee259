#include "diff_gates.h"

#include <algorithm>
#include <cstdio>

#include "cli.h"
#include "output.h"

namespace memguard::cli {

namespace {

using report::GateExpr;
using report::GateInt;

/// The figure of one run, or nothing with *why saying why the run cannot give it.
std::optional<GateInt> figure(const GateExpr& e, const GateSide& side, std::string* why) {
    const report::Summary& s = side.s;
    const std::string& m = e.metric;
    if (m == "peak") return s.peak_bytes;
    if (m == "live_at_exit") return s.live_bytes_at_exit;
    if (m == "tensor_peak" || m == "tensor_live_at_exit") {
        if (!allocator_mode(side.r)) {
            *why = "it was not recorded in allocator mode (MEMGUARD_ALLOCATOR=memguard): no tensor figures";
            return std::nullopt;
        }
        return m == "tensor_peak" ? s.tensor_peak_bytes : s.tensor_live_bytes_at_exit;
    }
    if (m == "gc_freed") {
        GateInt total = 0;
        for (int64_t v : s.cuda_bytes_freed) total += v;
        return total;
    }
    if (m == "oom") return static_cast<GateInt>(s.oom_events) + s.tensor_oom_events;
    if (m == "failed_allocations") return s.failed_allocations;
    if (m == "collections") return static_cast<GateInt>(side.r.collections.size());
    if (m == "compiles") return s.compiles;
    // phase.peak, phase.incremental_peak: the largest over the phases of that name.
    std::optional<GateInt> best;
    for (const report::PhaseStats& p : side.phases) {
        if (side.r.phases[p.index].name != e.phase) continue;
        GateInt v = m == "phase.peak" ? p.peak_bytes : p.incremental_peak();
        best = best ? std::max(*best, v) : v;
    }
    if (!best) *why = "it has no phase named '" + e.phase + "'";
    return best;
}

std::string figure_text(const GateExpr& e, GateInt v) {
    return e.bytes ? report::gate_bytes_text(v) : report::gate_int_text(v);
}

/// "peak 2.75 GiB -> 2.31 GiB, -448.00 MiB (-16.3%)"
std::string figures_text(const GateResult& g) {
    const GateExpr& e = *g.expr;
    std::string d = figure_text(e, g.b - g.a);
    if (g.b > g.a) d = "+" + d;
    return figure_text(e, g.a) + " -> " + figure_text(e, g.b) + ", " + d + " (" +
           report::relative_change_text(g.a, g.b) + ")";
}

/// The threshold as the JSON gives it: an exact decimal of the percentage, or the amount.
std::string percent_text(int64_t micro) {
    const uint64_t mag = micro < 0 ? uint64_t{0} - static_cast<uint64_t>(micro) : static_cast<uint64_t>(micro);
    std::string out = (micro < 0 ? "-" : "") + std::to_string(mag / 1000000);
    uint64_t frac = mag % 1000000;
    if (frac == 0) return out;
    char digits[16];
    std::snprintf(digits, sizeof digits, "%06llu", static_cast<unsigned long long>(frac));
    std::string f = digits;
    while (f.back() == '0') f.pop_back();
    return out + "." + f;
}

}  // namespace

std::vector<GateResult> evaluate_gates(const std::vector<GateExpr>& exprs, const GateSide& a, const GateSide& b) {
    std::vector<GateResult> out;
    for (const GateExpr& e : exprs) {
        GateResult g;
        g.expr = &e;
        for (const GateSide* side : {&a, &b}) {
            std::string why;
            std::optional<GateInt> v = figure(e, *side, &why);
            if (!v) {
                throw report::ReportError("--fail-if '" + e.text + "': cannot measure it on " +
                                          (side == &a ? "A (" : "B (") + side->r.path + "): " + why);
            }
            (side == &a ? g.a : g.b) = *v;
        }
        g.failed = report::gate_fails(e, g.a, g.b);
        out.push_back(g);
    }
    return out;
}

void print_gates(const std::vector<GateResult>& results) {
    print("\nGates (--fail-if):\n");
    for (const GateResult& g : results) {
        const GateExpr& e = *g.expr;
        std::string name = e.phase.empty() ? e.metric : "phase[" + e.phase + "]." + e.metric.substr(6);
        print("  %-4s  %s: %s %s\n", g.failed ? "FAIL" : "ok", e.text.c_str(), name.c_str(), figures_text(g).c_str());
    }
}

void json_gates(report::JsonWriter& j, const std::vector<GateResult>& results) {
    bool failed = false;
    j.key("fail_if").begin_array();
    for (const GateResult& g : results) {
        const GateExpr& e = *g.expr;
        failed = failed || g.failed;
        j.begin_object();
        j.key("expression").value(e.text);
        j.key("metric").value(e.phase.empty() ? e.metric : "phase." + e.metric.substr(6));
        j.key("phase");
        e.phase.empty() ? j.null() : j.value(e.phase);
        j.key("op").value(report::gate_op_text(e.op));
        j.key("kind").value(e.kind == GateExpr::Value ? "value" : e.kind == GateExpr::Delta ? "delta" : "relative");
        j.key("threshold")
            .number(e.kind == GateExpr::Relative ? percent_text(e.micro_percent) : report::gate_int_text(e.amount));
        j.key("a").number(report::gate_int_text(g.a));
        j.key("b").number(report::gate_int_text(g.b));
        j.key("delta").number(report::gate_int_text(g.b - g.a));
        j.key("relative_percent");
        if (g.a == 0) {
            g.b == 0 ? j.number("0") : j.null();
        } else {
            char buf[64];
            const double mag = static_cast<double>(g.a < 0 ? -g.a : g.a);
            std::snprintf(buf, sizeof buf, "%.6f", 100.0 * static_cast<double>(g.b - g.a) / mag);
            j.number(buf);
        }
        j.key("failed").value(g.failed);
        j.end_object();
    }
    j.end_array();
    j.key("failed").value(failed);
}

}  // namespace memguard::cli
