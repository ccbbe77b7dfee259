// Human-readable and exact renderings of sizes and times, shared by the CLI's text and JSON output.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

/// A non-negative decimal number "DIGITS[.DIGITS]": whole + frac / 10^frac_digits.
struct Decimal {
    uint64_t whole = 0;
    uint64_t frac = 0;
    int frac_digits = 0;
};

/// Parses DIGITS["."DIGITS] (the whole of `s`: no space, sign or exponent) with at most
/// `max_frac_digits` (<= 18) digits after the point; nothing when it is not one, with *error why.
std::optional<Decimal> parse_decimal(std::string_view s, int max_frac_digits, std::string* error = nullptr);

/// Parses a size as the gates take it (`memguard check --max-peak`, `diff --fail-if`, the pytest
/// plugin's markers), into bytes:
///   SIZE   := SPACE* DIGITS ["." DIGITS] SPACE* [UNIT] SPACE*      (SPACE: ' ' or tab)
///   UNIT   := B | KB | MB | GB | TB | KiB | MiB | GiB | TiB         (any case: "gib", "GB", "mb")
/// KB, MB, GB, TB are powers of 1000, KiB, MiB, GiB, TiB powers of 1024; no unit or B is bytes.
/// "2GiB", "2 GiB", "1.5gb", "4096". A fraction (at most 18 digits after the point) is rounded down
/// to a whole byte: "1.5 KiB" is 1536, "0.1 KiB" 102. No sign, exponent or digit separator. More
/// than 2^64 - 1 bytes is refused. Returns nothing when `s` is not a size, with *error saying why
/// (without quoting `s`: the caller names the option or expression it came from).
std::optional<uint64_t> parse_size(std::string_view s, std::string* error = nullptr);

/// The units parse_size takes, for messages: "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB".
extern const char* const kSizeUnits;

/// Parses a time in seconds ("0.5", "12", "1e-3") into nanoseconds; false when not a finite number >= 0.
bool parse_seconds(const std::string& s, int64_t& ns);

}  // namespace memguard::report
