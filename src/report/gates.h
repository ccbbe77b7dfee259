// The expressions of `memguard diff A B --fail-if EXPR` (docs/gates.md): a condition on one figure
// of two runs that makes the diff fail. Parsed when the command line is read, evaluated by diff on
// the figures it compares. Pure: no report needed, so the grammar is unit-tested on its own.
//
//   EXPR   := METRIC OP VALUE                   (spaces around OP and inside VALUE allowed)
//   OP     := > | >= | < | <=
//   VALUE  := +SIZE | -SIZE                     the change B - A        (peak>+1GiB)
//           | SIZE                              B's own value           (peak>40GiB)
//           | [+|-]NUMBER%                      the change relative to A, (B - A) / |A| * 100
//                                               (peak>+5%; 5% is +5%; at most 6 decimals)
// SIZE is report::parse_size's grammar for the byte metrics and a whole number for the counts.
// The expression holds when the figure satisfies OP VALUE: then the gate fails.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace memguard::report {

__extension__ typedef __int128 GateInt;

/// A bad --fail-if expression; what() names the part that is wrong.
class GateError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// What a metric measures, for the grammar (sizes or counts) and the messages.
struct GateMetricInfo {
    const char* name;
    bool bytes;         // a size (units allowed), else a count
    const char* about;  // for the help and the error listing the metrics
};

/// The metrics of --fail-if, in the order the help lists them; a phase's are written
/// phase[NAME].peak and phase[NAME].incremental_peak.
const std::vector<GateMetricInfo>& gate_metrics();

/// "peak, live_at_exit, ..., phase[NAME].peak, phase[NAME].incremental_peak".
std::string gate_metric_names();

struct GateExpr {
    enum Op { Gt, Ge, Lt, Le };
    enum Kind {
        Value,     // B's value against `amount`
        Delta,     // B - A against `amount` (signed)
        Relative,  // (B - A) / |A| * 100 against micro_percent / 10^6
    };
    std::string text;    // as given
    std::string metric;  // a name of gate_metrics(), or "phase.peak" / "phase.incremental_peak"
    std::string phase;   // for the phase metrics: the phase's name
    bool bytes = true;   // the metric is a size
    Op op = Gt;
    Kind kind = Value;
    GateInt amount = 0;         // Value, Delta: bytes or a count
    int64_t micro_percent = 0;  // Relative: the percentage times 10^6
};

/// Parses one expression. Throws GateError naming the wrong part (and, for an unknown metric,
/// listing the valid ones).
GateExpr parse_gate(const std::string& text);

/// Whether the expression holds (the gate fails) for the figures a (run A) and b (run B). Exact:
/// no floating point.
bool gate_fails(const GateExpr& e, GateInt a, GateInt b);

/// `v` in decimal (a JSON integer, exact beyond 64 bits).
std::string gate_int_text(GateInt v);

/// human_bytes_signed of `v`; beyond 64 bits in GiB, human_bytes' largest unit.
std::string gate_bytes_text(GateInt v);

/// ">", ">=", "<", "<=".
const char* gate_op_text(GateExpr::Op op);

/// The relative change (B - A) / |A| in percent with one decimal and a sign ("+19.4%", "-3.0%",
/// "+0.0%"); "+inf%" / "-inf%" when A is 0 and B is not.
std::string relative_change_text(GateInt a, GateInt b);

}  // namespace memguard::report
