#include "common/size.h"

#include <cstring>

namespace memguard {

const char* const kSizeUnits = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB";

std::optional<Decimal> parse_decimal(std::string_view s, int max_frac_digits, std::string* error) {
    auto fail = [error](const std::string& why) -> std::optional<Decimal> {
        if (error != nullptr) *error = why;
        return std::nullopt;
    };
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    Decimal d;
    size_t i = 0;
    if (s.empty() || !digit(s[0])) return fail("expected a number");
    for (; i < s.size() && digit(s[i]); ++i) {
        const uint64_t v = static_cast<uint64_t>(s[i] - '0');
        if (d.whole > (UINT64_MAX - v) / 10) return fail("the number is too large");
        d.whole = d.whole * 10 + v;
    }
    if (i < s.size() && s[i] == '.') {
        ++i;
        if (i == s.size() || !digit(s[i])) return fail("expected digits after the decimal point");
        for (; i < s.size() && digit(s[i]); ++i) {
            if (d.frac_digits == max_frac_digits) {
                return fail("more than " + std::to_string(max_frac_digits) + " digits after the decimal point");
            }
            d.frac = d.frac * 10 + static_cast<uint64_t>(s[i] - '0');
            ++d.frac_digits;
        }
    }
    if (i != s.size()) return fail("unexpected '" + std::string(s.substr(i)) + "' after the number");
    return d;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t'; }

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

bool same_ignoring_case(std::string_view a, const char* b) {
    if (a.size() != std::strlen(b)) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        char x = a[i] >= 'A' && a[i] <= 'Z' ? static_cast<char>(a[i] - 'A' + 'a') : a[i];
        char y = b[i] >= 'A' && b[i] <= 'Z' ? static_cast<char>(b[i] - 'A' + 'a') : b[i];
        if (x != y) return false;
    }
    return true;
}

}  // namespace

std::optional<uint64_t> parse_size(std::string_view s, std::string* error) {
    auto fail = [error](const std::string& why) -> std::optional<uint64_t> {
        if (error != nullptr) *error = why;
        return std::nullopt;
    };
    s = trim(s);
    if (s.empty()) return fail("expected a size, such as 2GiB, 512 MiB, 1.5GB or 4096 (bytes)");
    size_t end = 0;
    while (end < s.size() && ((s[end] >= '0' && s[end] <= '9') || s[end] == '.')) ++end;
    if (end == 0) {
        return fail(s[0] == '-' || s[0] == '+' ? "a size has no sign"
                                               : "expected a number before the unit, such as 2GiB or 512 MiB");
    }
    std::string why;
    std::optional<Decimal> number = parse_decimal(s.substr(0, end), 18, &why);
    if (!number) return fail(why);
    const std::string_view unit_text = trim(s.substr(end));
    struct Unit {
        const char* name;
        uint64_t bytes;
    };
    static constexpr Unit kUnits[] = {{"", 1},
                                      {"B", 1},
                                      {"KB", 1000},
                                      {"MB", 1000 * 1000},
                                      {"GB", 1000 * 1000 * 1000},
                                      {"TB", uint64_t{1000} * 1000 * 1000 * 1000},
                                      {"KiB", uint64_t{1} << 10},
                                      {"MiB", uint64_t{1} << 20},
                                      {"GiB", uint64_t{1} << 30},
                                      {"TiB", uint64_t{1} << 40}};
    const Unit* unit = nullptr;
    for (const Unit& u : kUnits) {
        if (same_ignoring_case(unit_text, u.name)) unit = &u;
    }
    if (unit == nullptr) {
        return fail("unknown unit '" + std::string(unit_text) + "' (expected " + kSizeUnits +
                    " in any case, or none for bytes)");
    }
    // Exact: the whole part times the unit, plus the fraction times the unit rounded down (frac <
    // 10^18 and a unit <= 2^40 keep the product within 128 bits).
    __extension__ typedef unsigned __int128 U128;
    U128 pow10 = 1;
    for (int k = 0; k < number->frac_digits; ++k) pow10 *= 10;
    const U128 bytes = static_cast<U128>(number->whole) * unit->bytes +
                       static_cast<U128>(number->frac) * unit->bytes / pow10;
    if (bytes > UINT64_MAX) return fail("more than 2^64 - 1 bytes (16 EiB)");
    return static_cast<uint64_t>(bytes);
}

}  // namespace memguard
