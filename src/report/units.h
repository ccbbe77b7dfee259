// Human-readable and exact renderings of sizes and times, shared by the CLI's text and JSON output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/size.h"

namespace memguard::report {

/// "512 B", "1.50 KiB", "3.00 MiB", "2.25 GiB" (binary units, two decimals; GiB is the largest unit).
std::string human_bytes(uint64_t bytes);

/// A signed size: human_bytes with a leading '-' for negative values.
std::string human_bytes_signed(int64_t bytes);

/// Nanoseconds as milliseconds with three decimals, rounded to nearest: 12345678 -> "12.346".
std::string milliseconds_fixed3(int64_t ns);

/// Nanoseconds as seconds with three decimals, rounded to nearest: 1234567890 -> "1.235".
std::string seconds_fixed3(int64_t ns);

/// Nanoseconds as an exact decimal number of seconds without trailing zeros: 1500000000 -> "1.5",
/// 3000 -> "0.000003", 0 -> "0". Suitable as a JSON number.
std::string seconds_exact(int64_t ns);

/// A share as a percentage with one decimal: (1, 3) -> "33.3%". A zero total gives "0.0%".
std::string percent(uint64_t part, uint64_t total);

// The size grammar is shared with the library (MEMGUARD_MAX_REPORT_SIZE): common/size.h.
using memguard::Decimal;
using memguard::kSizeUnits;
using memguard::parse_decimal;
using memguard::parse_size;

/// Parses a time in seconds ("0.5", "12", "1e-3") into nanoseconds; false when not a finite number >= 0.
bool parse_seconds(const std::string& s, int64_t& ns);

}  // namespace memguard::report
