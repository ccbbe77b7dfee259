// The report's field encodings (docs/report-format.md, "Field encodings"): hex, decimal and
// percent-encoded strings, written by the library's encoders and read by the CLI's decoders.
// Header-only and standard-library-only; the encode side never allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace memguard::format {

/// Appends `v` as lowercase hex without prefix. `out` must have room for 16 chars.
/// Returns the number of chars written.
inline size_t put_hex(char* out, uint64_t v) noexcept {
    // Written on every record (addresses, streams): the digit count first, then the digits
    // straight into place, with no reversing copy.
    static constexpr char digits[] = "0123456789abcdef";
    const size_t n = v == 0 ? 1 : static_cast<size_t>((64 - __builtin_clzll(v) + 3) / 4);
    for (size_t i = n; i-- > 0; v >>= 4) out[i] = digits[v & 0xf];
    return n;
}

/// The number of decimal digits of `v` (1 for 0).
inline size_t dec_digits(uint64_t v) noexcept {
    size_t n = 1;
    for (;;) {  // four digits a step: a timestamp in nanoseconds has 10 to 19
        if (v < 10) return n;
        if (v < 100) return n + 1;
        if (v < 1000) return n + 2;
        if (v < 10000) return n + 3;
        v /= 10000;
        n += 4;
    }
}

/// Appends `v` in decimal. `out` must have room for 20 chars.
inline size_t put_dec(char* out, uint64_t v) noexcept {
    // Two digits per division, from a table: about half the work of one digit at a time.
    static constexpr char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                    "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                    "8081828384858687888990919293949596979899";
    const size_t n = dec_digits(v);
    size_t i = n;
    while (v >= 100) {
        const size_t two = static_cast<size_t>(v % 100) * 2;
        v /= 100;
        out[--i] = pairs[two + 1];
        out[--i] = pairs[two];
    }
    if (v >= 10) {
        const size_t two = static_cast<size_t>(v) * 2;
        out[--i] = pairs[two + 1];
        out[--i] = pairs[two];
    } else {
        out[--i] = static_cast<char>('0' + v);
    }
    return n;
}

/// Appends a signed decimal. `out` must have room for 21 chars.
inline size_t put_sdec(char* out, int64_t v) noexcept {
    if (v < 0) {
        out[0] = '-';
        return 1 + put_dec(out + 1, static_cast<uint64_t>(0) - static_cast<uint64_t>(v));
    }
    return put_dec(out, static_cast<uint64_t>(v));
}

inline bool needs_escape(unsigned char c) noexcept { return c < 0x21 || c == 0x7f || c == '%'; }

/// Percent-encodes a string field. The empty string becomes "%".
inline std::string encode(std::string_view s) {
    if (s.empty()) return "%";
    static constexpr char digits[] = "0123456789ABCDEF";
    std::string out;
    out.reserve(s.size());
    for (unsigned char c : s) {
        if (needs_escape(c)) {
            out.push_back('%');
            out.push_back(digits[c >> 4]);
            out.push_back(digits[c & 0xf]);
        } else {
            out.push_back(static_cast<char>(c));
        }
    }
    return out;
}

inline int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Decodes a percent-encoded field; nullopt when malformed.
inline std::optional<std::string> decode(std::string_view s) {
    if (s == "%") return std::string();
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '%') {
            out.push_back(s[i]);
            continue;
        }
        if (i + 2 >= s.size()) return std::nullopt;
        int hi = hex_value(s[i + 1]), lo = hex_value(s[i + 2]);
        if (hi < 0 || lo < 0) return std::nullopt;
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 2;
    }
    return out;
}

/// Parses lowercase or uppercase hex (no prefix); nullopt when empty, malformed or > 64 bits.
inline std::optional<uint64_t> parse_hex(std::string_view s) noexcept {
    if (s.empty() || s.size() > 16) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        int d = hex_value(c);
        if (d < 0) return std::nullopt;
        v = (v << 4) | static_cast<uint64_t>(d);
    }
    return v;
}

/// Parses an unsigned decimal; nullopt when empty, malformed or overflowing.
inline std::optional<uint64_t> parse_dec(std::string_view s) noexcept {
    if (s.empty() || s.size() > 20) return std::nullopt;
    uint64_t v = 0;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
        uint64_t d = static_cast<uint64_t>(c - '0');
        if (v > (UINT64_MAX - d) / 10) return std::nullopt;
        v = v * 10 + d;
    }
    return v;
}

/// Parses a signed decimal (leading '-' allowed).
inline std::optional<int64_t> parse_sdec(std::string_view s) noexcept {
    bool neg = !s.empty() && s[0] == '-';
    auto u = parse_dec(neg ? s.substr(1) : s);
    if (!u || *u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return neg ? -static_cast<int64_t>(*u) : static_cast<int64_t>(*u);
}

}  // namespace memguard::format
