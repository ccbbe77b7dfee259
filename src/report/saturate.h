// Totals of report values that cannot overflow. A corrupt or hostile report can hold sizes, counts
// and durations near the 64-bit limits: a total that wrapped would print a small or negative number
// (and signed overflow is undefined behaviour). Unsigned totals stop at UINT64_MAX; signed ones are
// held exactly in 128 bits and read clamped to int64. Internal to the reader.
#pragma once

#include <cstdint>

namespace memguard::report {

/// a + b, or UINT64_MAX when the sum does not fit.
inline uint64_t saturating_add(uint64_t a, uint64_t b) {
    uint64_t sum = 0;
    return __builtin_add_overflow(a, b, &sum) ? UINT64_MAX : sum;
}

/// Adds `v` to `total`, stopping at UINT64_MAX.
inline void add_to(uint64_t& total, uint64_t v) { total = saturating_add(total, v); }

/// A sum of signed values, exact while fewer than 2^63 values are added; value() clamps it to int64.
class SignedTotal {
public:
    void add(int64_t v) { sum_ += v; }
    int64_t value() const {
        if (sum_ > INT64_MAX) return INT64_MAX;
        if (sum_ < INT64_MIN) return INT64_MIN;
        return static_cast<int64_t>(sum_);
    }

private:
    __extension__ __int128 sum_ = 0;
};

}  // namespace memguard::report
