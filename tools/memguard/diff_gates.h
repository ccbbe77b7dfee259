// diff --fail-if: the expressions (report/gates.h) evaluated on the figures diff compares.
#pragma once

#include <string>
#include <vector>

#include "report/analysis.h"
#include "report/gates.h"
#include "report/json.h"
#include "report/timeline.h"

namespace memguard::cli {

/// What one run of a diff gives the gates.
struct GateSide {
    const report::Report& r;
    const report::Summary& s;
    const std::vector<report::PhaseStats>& phases;  // of the series diff compares
};

struct GateResult {
    const report::GateExpr* expr = nullptr;
    report::GateInt a = 0, b = 0;
    bool failed = false;
};

/// Every expression on the two runs. Throws report::ReportError when a run cannot give a metric
/// (a tensor figure without allocator mode, a phase it does not have).
std::vector<GateResult> evaluate_gates(const std::vector<report::GateExpr>& exprs, const GateSide& a,
                                       const GateSide& b);

/// One line per expression after the diff's text: "FAIL" for those that hold, "ok" for the others.
void print_gates(const std::vector<GateResult>& results);

/// The members "fail_if" (one object per expression) and "failed" of diff's JSON object.
void json_gates(report::JsonWriter& j, const std::vector<GateResult>& results);

}  // namespace memguard::cli
