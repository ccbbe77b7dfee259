// The ranks that diverge from the others (`memguard merge`, docs/rank-summary.md "Outlier ranks"):
// over the rank summaries of one job, each figure (the peak, each category's bytes at the peak, each
// site's bytes at the peak) gets its median and median absolute deviation across the ranks
// (report/outliers.h), and a rank whose figure lies beyond the threshold is named with every figure
// that diverged.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "rank_summary.h"
#include "report/outliers.h"

namespace memguard::cli {

/// From this many ranks, a rank is compared with the median of all. Two ranks have no majority to
/// differ from: where they differ by more than the rule's floor (its bytes and its share of the
/// smaller), the heavier one is named against the other. One rank: nothing is compared.
constexpr size_t kMinRanksForOutliers = 3;

struct Divergence {
    enum What { Peak, Category, Site } what = Peak;
    std::string name;  // peak: its series ("gpu" or "tensors"); category: its name; site: its label in this rank
    uint64_t bytes = 0;
    /// Over all ranks; of two ranks: median is the other rank's value, mad 0.
    report::FigureStats stats;
    bool pair = false;  // two ranks: against the other rank, not a median
};

struct OutlierRank {
    size_t index = 0;                     // into the summaries
    std::vector<Divergence> divergences;  // the largest deviation first
};

struct OutlierFinding {
    bool compared = false;           // at least two ranks
    bool pair = false;               // exactly two: the heavier rank against the other
    size_t figures = 0;              // figures compared
    std::vector<OutlierRank> ranks;  // in the order of the summaries
};

/// The outlier ranks. A site's bytes count only above the median (a rank lists its largest sites:
/// where it does not list one, the site counts as 0, or as the smallest site it lists when its
/// list was cut); the peak and the categories count both ways.
OutlierFinding find_outlier_ranks(const std::vector<RankSummary>& ranks, const report::OutlierRule& rule = {});

/// "nccl 8.8 GiB against a median of 1.2 GiB", "site train.py:41 ... against ...", "peak ...".
std::string divergence_text(const Divergence& d);
const char* divergence_kind(Divergence::What w);  // "peak", "category", "site"

}  // namespace memguard::cli
