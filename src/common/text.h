// Text for people: strings from a report or a traced program made safe to print. The report's
// field encodings live in format/fields.h; their names stay reachable here for the CLI's callers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "format/fields.h"

namespace memguard::text {

using format::dec_digits;
using format::decode;
using format::encode;
using format::hex_value;
using format::needs_escape;
using format::parse_dec;
using format::parse_hex;
using format::parse_sdec;
using format::put_dec;
using format::put_hex;
using format::put_sdec;

/// The length (1 to 4) of the valid UTF-8 sequence at s[i], with its code point in *cp; 0 when the
/// bytes there are not one (a stray continuation byte, a cut-off or overlong sequence, a surrogate,
/// above U+10FFFF). `i` must be < s.size().
inline size_t utf8_sequence(std::string_view s, size_t i, uint32_t* cp = nullptr) noexcept {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    const unsigned char c = byte(i);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || len > s.size() - i) return 0;
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1fu) : len == 3 ? (c & 0x0fu) : (c & 0x07u);
    for (size_t k = 1; k < len; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) return 0;
        v = (v << 6) | (byte(i + k) & 0x3fu);
    }
    static constexpr uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (v < min_cp[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    if (cp != nullptr) *cp = v;
    return len;
}

/// Whether the code point is a control character: C0 (TAB, LF, CR and ESC among them), DEL or C1.
inline bool is_control(uint32_t cp) noexcept { return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f); }

/// `s` as text for a terminal or a text file: control characters and bytes that are not valid
/// UTF-8 become visible escapes ("\x1b" for a byte, "\u009b" for a C1 character), so that a string
/// a traced program or a report chose cannot move the cursor, retitle or clear the terminal, or
/// start a line of its own. Everything else, backslashes too, is kept as it is: the escapes are for
/// the reader's eyes, not to be decoded.
inline std::string printable(std::string_view s) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        uint32_t cp = 0;
        const size_t len = utf8_sequence(s, i, &cp);
        if (len != 0 && !is_control(cp)) {
            out.append(s.substr(i, len));
            i += len;
        } else if (len == 2) {  // C1, which UTF-8 terminals may still obey
            out += "\\u00";
            out.push_back(digits[cp >> 4]);
            out.push_back(digits[cp & 0xf]);
            i += len;
        } else {  // C0 or DEL, or a byte that is not UTF-8
            const unsigned char c = static_cast<unsigned char>(s[i]);
            out += "\\x";
            out.push_back(digits[c >> 4]);
            out.push_back(digits[c & 0xf]);
            ++i;
        }
    }
    return out;
}

}  // namespace memguard::text
