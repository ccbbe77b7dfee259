// Sizes as people write them ("2GiB", "512 MiB", "1.5GB", "4096"): one grammar for the CLI's
// options and gates and the library's environment (MEMGUARD_MAX_REPORT_SIZE).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memguard {

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
/// plugin's markers) and the library its limits (MEMGUARD_MAX_REPORT_SIZE), into bytes:
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

}  // namespace memguard
