// Robust statistics across the ranks of a job (`memguard merge`, docs/rank-summary.md "Outlier
// ranks"): for one figure (a peak, a category's bytes at the peak, a site's bytes at the peak) over
// every rank, its median, its median absolute deviation (MAD) and the deviation from the median
// beyond which a rank is an outlier. The threshold has a floor, so that identical ranks (MAD 0) and
// differences small in bytes or against the median never flag.
#pragma once

#include <cstdint>
#include <vector>

namespace memguard::report {

/// The rule: a rank deviates when |value - median| > threshold, where threshold is the largest of
/// `k` robust standard deviations (1.4826 x MAD, the standard deviation of normal data with that
/// MAD), `min_bytes`, and `min_share` of the median.
struct OutlierRule {
    double k = 5.0;
    uint64_t min_bytes = 256ull << 20;  // 256 MiB
    double min_share = 0.2;
};

struct FigureStats {
    uint64_t median = 0;     // the middle value; the mean of the two middle ones (rounded down) for an even count
    uint64_t mad = 0;        // the median of |value - median|
    uint64_t threshold = 0;  // the deviation beyond which a value is an outlier
};

/// The statistics of `values` (one per rank; at least one). Linear time (selection, not sorting).
FigureStats figure_stats(std::vector<uint64_t> values, const OutlierRule& rule = {});

/// |value - median|.
uint64_t deviation(uint64_t value, const FigureStats& s);

/// Whether `value` is an outlier: its deviation exceeds the threshold (with `high_only`, only a value
/// above the median).
bool is_outlier(uint64_t value, const FigureStats& s, bool high_only = false);

/// The median of `values` (reordered; not empty), as FigureStats::median.
uint64_t median_of(std::vector<uint64_t>& values);

}  // namespace memguard::report
