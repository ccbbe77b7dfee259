#include "report/outliers.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace memguard::report {

uint64_t median_of(std::vector<uint64_t>& values) {
    if (values.empty()) throw std::invalid_argument("median_of: no values");
    const size_t mid = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
    const uint64_t upper = values[mid];
    if (values.size() % 2 == 1) return upper;
    // The largest of the lower half is the other middle value.
    const uint64_t lower = *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
    return lower + (upper - lower) / 2;  // no overflow, whatever the values
}

uint64_t deviation(uint64_t value, const FigureStats& s) {
    return value >= s.median ? value - s.median : s.median - value;
}

FigureStats figure_stats(std::vector<uint64_t> values, const OutlierRule& rule) {
    FigureStats s;
    s.median = median_of(values);
    for (uint64_t& v : values) v = deviation(v, s);
    s.mad = median_of(values);
    // In long double: k x 1.4826 x MAD can exceed 2^64 for absurd values; clamp it there.
    const long double spread = static_cast<long double>(rule.k) * 1.4826L * static_cast<long double>(s.mad);
    const long double share = static_cast<long double>(rule.min_share) * static_cast<long double>(s.median);
    const long double limit = std::max({spread, share, static_cast<long double>(rule.min_bytes)});
    constexpr long double kMax = 18446744073709551615.0L;
    s.threshold = limit >= kMax ? UINT64_MAX : static_cast<uint64_t>(std::round(limit));
    return s;
}

bool is_outlier(uint64_t value, const FigureStats& s, bool high_only) {
    if (high_only && value <= s.median) return false;
    return deviation(value, s) > s.threshold;
}

}  // namespace memguard::report
