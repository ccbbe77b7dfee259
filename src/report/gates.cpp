#include "report/gates.h"

#include <cstdio>

#include "report/units.h"

namespace memguard::report {

namespace {

constexpr int64_t kMaxPercent = 1000000000000;  // 10^12 %: beyond any change two runs can show
constexpr int kPercentDecimals = 6;

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string trim(const std::string& s) {
    size_t b = 0, e = s.size();
    while (b < e && is_space(s[b])) ++b;
    while (e > b && is_space(s[e - 1])) --e;
    return s.substr(b, e - b);
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

[[noreturn]] void bad(const std::string& text, const std::string& why) {
    throw GateError("bad --fail-if expression '" + text + "': " + why);
}

/// Sets e.metric, e.phase and e.bytes from the text before the operator.
void parse_metric(GateExpr& e, const std::string& metric) {
    if (starts_with(metric, "phase[")) {
        for (const char* field : {"peak", "incremental_peak"}) {
            const std::string suffix = std::string("].") + field;
            if (ends_with(metric, suffix) && metric.size() > 6 + suffix.size()) {
                e.phase = metric.substr(6, metric.size() - 6 - suffix.size());
                e.metric = std::string("phase.") + field;
                e.bytes = true;
                return;
            }
        }
        bad(e.text, "bad phase metric '" + metric + "': expected phase[NAME].peak or phase[NAME].incremental_peak");
    }
    for (const GateMetricInfo& m : gate_metrics()) {
        if (metric == m.name) {
            e.metric = m.name;
            e.bytes = m.bytes;
            return;
        }
    }
    if (metric.find(',') != std::string::npos) {
        bad(e.text, "one expression per --fail-if: give --fail-if again for each (a ',' does not separate them)");
    }
    bad(e.text, (metric.empty() ? std::string("no metric before the comparison") : "unknown metric '" + metric + "'") +
                    " (metrics: " + gate_metric_names() + ")");
}

/// An amount without sign: a size for the byte metrics, a whole number for the counts.
GateInt parse_amount(const GateExpr& e, const std::string& s) {
    std::string why;
    if (e.bytes) {
        auto v = parse_size(s, &why);
        if (!v) bad(e.text, "bad size '" + s + "': " + why);
        return static_cast<GateInt>(*v);
    }
    auto d = parse_decimal(s, 0, &why);
    if (!d) bad(e.text, e.metric + " is a count: expected a whole number, not '" + s + "'");
    return static_cast<GateInt>(d->whole);
}

void parse_value(GateExpr& e, const std::string& value) {
    if (value.empty()) bad(e.text, "no value after the comparison (e.g. +5%, +1GiB or 40GiB)");
    std::string rest = value;
    int sign = 0;
    if (rest[0] == '+' || rest[0] == '-') {
        sign = rest[0] == '+' ? 1 : -1;
        rest = trim(rest.substr(1));
    }
    if (!rest.empty() && rest.back() == '%') {
        std::string number = trim(rest.substr(0, rest.size() - 1));
        std::string why;
        auto d = parse_decimal(number, kPercentDecimals, &why);
        if (!d) bad(e.text, "bad percentage '" + value + "': " + why);
        if (d->whole > static_cast<uint64_t>(kMaxPercent)) {
            bad(e.text, "bad percentage '" + value + "': at most " + std::to_string(kMaxPercent) + "%");
        }
        int64_t micro = static_cast<int64_t>(d->whole) * 1000000;
        int64_t scale = 1;
        for (int k = d->frac_digits; k < kPercentDecimals; ++k) scale *= 10;
        micro += static_cast<int64_t>(d->frac) * scale;
        e.kind = GateExpr::Relative;
        e.micro_percent = sign < 0 ? -micro : micro;
        return;
    }
    if (rest.find('%') != std::string::npos) bad(e.text, "bad value '" + value + "': '%' ends a percentage");
    if (rest.empty()) bad(e.text, "bad value '" + value + "': expected a number after the sign");
    GateInt amount = parse_amount(e, rest);
    e.kind = sign == 0 ? GateExpr::Value : GateExpr::Delta;
    e.amount = sign < 0 ? -amount : amount;
}

bool compare(GateExpr::Op op, GateInt x, GateInt y) {
    switch (op) {
    case GateExpr::Gt: return x > y;
    case GateExpr::Ge: return x >= y;
    case GateExpr::Lt: return x < y;
    case GateExpr::Le: return x <= y;
    }
    return false;
}

}  // namespace

const std::vector<GateMetricInfo>& gate_metrics() {
    static const std::vector<GateMetricInfo> metrics = {
        {"peak", true, "the peak of GPU live bytes (summary's \"Peak GPU\"; in allocator mode the segments')"},
        {"live_at_exit", true, "GPU live bytes at exit"},
        {"tensor_peak", true, "allocator mode: the peak of the tensor blocks (max_memory_allocated())"},
        {"tensor_live_at_exit", true, "allocator mode: the tensor blocks live at exit"},
        {"gc_freed", true, "CUDA bytes freed by all garbage collections (cycles' totals summed)"},
        {"oom", false, "out-of-memory events: failed allocations with out of memory and allocator OOM events"},
        {"failed_allocations", false, "failed allocations (any error)"},
        {"collections", false, "garbage collections"},
        {"compiles", false, "torch.compile compiles"},
    };
    return metrics;
}

std::string gate_metric_names() {
    std::string out;
    for (const GateMetricInfo& m : gate_metrics()) out += std::string(m.name) + ", ";
    return out + "phase[NAME].peak, phase[NAME].incremental_peak";
}

GateExpr parse_gate(const std::string& text) {
    GateExpr e;
    e.text = text;
    // The value never holds '<' or '>', a phase name may: the operator is the last one.
    const size_t op = text.find_last_of("<>");
    if (op == std::string::npos) {
        bad(text, "no comparison: expected METRIC OP VALUE with OP one of >, >=, <, <= (e.g. peak>+5%)");
    }
    const bool eq = op + 1 < text.size() && text[op + 1] == '=';
    e.op = text[op] == '>' ? (eq ? GateExpr::Ge : GateExpr::Gt) : (eq ? GateExpr::Le : GateExpr::Lt);
    parse_metric(e, trim(text.substr(0, op)));
    parse_value(e, trim(text.substr(op + (eq ? 2 : 1))));
    return e;
}

bool gate_fails(const GateExpr& e, GateInt a, GateInt b) {
    const GateInt delta = b - a;
    switch (e.kind) {
    case GateExpr::Value: return compare(e.op, b, e.amount);
    case GateExpr::Delta: return compare(e.op, delta, e.amount);
    case GateExpr::Relative: break;
    }
    if (a == 0) {
        // From nothing: an infinite change, up or down, or none at all.
        if (delta == 0) return compare(e.op, 0, e.micro_percent);
        const bool up = delta > 0;
        return (e.op == GateExpr::Gt || e.op == GateExpr::Ge) ? up : !up;
    }
    // delta / |a| * 100 OP micro / 10^6, both sides times |a| * 10^6: |delta| <= 2^65 and
    // |micro| <= 10^18, |a| < 2^65, so both products stay below 2^127.
    const GateInt magnitude = a < 0 ? -a : a;
    return compare(e.op, delta * 100 * 1000000, static_cast<GateInt>(e.micro_percent) * magnitude);
}

std::string gate_int_text(GateInt v) {
    __extension__ unsigned __int128 mag = v < 0 ? -static_cast<unsigned __int128>(v) : v;
    std::string digits;
    do {
        digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(mag % 10)));
        mag /= 10;
    } while (mag != 0);
    return v < 0 ? "-" + digits : digits;
}

std::string gate_bytes_text(GateInt v) {
    __extension__ unsigned __int128 mag = v < 0 ? -static_cast<unsigned __int128>(v) : v;
    std::string s;
    if (mag <= UINT64_MAX) {
        s = human_bytes(static_cast<uint64_t>(mag));
    } else {
        char buf[64];
        std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(mag) / (1024.0 * 1024.0 * 1024.0));
        s = buf;
    }
    return v < 0 ? "-" + s : s;
}

const char* gate_op_text(GateExpr::Op op) {
    switch (op) {
    case GateExpr::Gt: return ">";
    case GateExpr::Ge: return ">=";
    case GateExpr::Lt: return "<";
    case GateExpr::Le: return "<=";
    }
    return "?";
}

std::string relative_change_text(GateInt a, GateInt b) {
    const GateInt delta = b - a;
    if (a == 0) return delta == 0 ? "+0.0%" : delta > 0 ? "+inf%" : "-inf%";
    const double magnitude = static_cast<double>(a < 0 ? -a : a);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%+.1f%%", 100.0 * static_cast<double>(delta) / magnitude);
    return buf;
}

}  // namespace memguard::report
