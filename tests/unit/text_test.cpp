#include <gtest/gtest.h>

#include <climits>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "common/text.h"

namespace text = memguard::text;

TEST(Text, HexAndDecimalRoundTrip) {
    std::mt19937_64 rng(1);
    for (int i = 0; i < 10000; ++i) {
        uint64_t v = rng() >> (rng() % 64);
        char buf[32];
        size_t n = text::put_hex(buf, v);
        EXPECT_EQ(text::parse_hex(std::string_view(buf, n)), v);
        n = text::put_dec(buf, v);
        EXPECT_EQ(text::parse_dec(std::string_view(buf, n)), v);
        int64_t s = static_cast<int64_t>(v) * ((i % 2) ? -1 : 1);
        n = text::put_sdec(buf, s);
        EXPECT_EQ(text::parse_sdec(std::string_view(buf, n)), s);
    }
}

TEST(Text, HexIsLowercaseWithoutPrefix) {
    char buf[32];
    EXPECT_EQ(std::string(buf, text::put_hex(buf, 0x7F12A4000000ULL)), "7f12a4000000");
    EXPECT_EQ(std::string(buf, text::put_hex(buf, 0)), "0");
}

TEST(Text, RejectsMalformedNumbers) {
    EXPECT_FALSE(text::parse_hex(""));
    EXPECT_FALSE(text::parse_hex("0x10"));
    EXPECT_FALSE(text::parse_hex("12345678901234567"));  // 17 digits: over 64 bits
    EXPECT_FALSE(text::parse_dec("18446744073709551616"));
    EXPECT_FALSE(text::parse_dec("-1"));
    EXPECT_FALSE(text::parse_sdec("-"));
}

TEST(Text, PercentEncodingRoundTrips) {
    for (std::string s : {std::string("plain"), std::string("with space"), std::string("100%"),
                          std::string("tab\tnew\nline"), std::string(""), std::string("\x7f\x01 \xc3\xa9")}) {
        std::string enc = text::encode(s);
        EXPECT_EQ(enc.find(' '), std::string::npos);
        EXPECT_EQ(enc.find('\n'), std::string::npos);
        EXPECT_FALSE(enc.empty());
        EXPECT_EQ(text::decode(enc), s);
    }
    EXPECT_EQ(text::encode("a b"), "a%20b");
}

TEST(Text, RejectsMalformedPercentEscapes) {
    EXPECT_FALSE(text::decode("abc%2"));
    EXPECT_FALSE(text::decode("abc%zz"));
    EXPECT_FALSE(text::decode("%4"));
}

TEST(Text, NumbersMatchTheStandardLibraryAtEveryDigitCount) {
    // Every digit-count boundary (9/10, 99/100, ... and 2^64 - 1), both sides, against
    // std::to_string and printf's %llx.
    std::vector<uint64_t> values{0, 1, UINT64_MAX, UINT64_MAX - 1};
    uint64_t p = 1;
    for (int d = 1; d < 20; ++d) {
        p *= 10;
        values.insert(values.end(), {p - 1, p, p + 1});
    }
    for (int b = 1; b < 64; ++b) {
        uint64_t q = uint64_t{1} << b;
        values.insert(values.end(), {q - 1, q, q + 1});
    }
    for (uint64_t v : values) {
        char buf[32];
        EXPECT_EQ(std::string(buf, text::put_dec(buf, v)), std::to_string(v)) << v;
        char want[32];
        std::snprintf(want, sizeof(want), "%llx", static_cast<unsigned long long>(v));
        EXPECT_EQ(std::string(buf, text::put_hex(buf, v)), want) << v;
        if (v <= static_cast<uint64_t>(INT64_MAX)) {
            auto s = static_cast<int64_t>(v);
            EXPECT_EQ(std::string(buf, text::put_sdec(buf, -s)), std::to_string(-s)) << v;
        }
    }
    char buf[32];
    EXPECT_EQ(std::string(buf, text::put_sdec(buf, INT64_MIN)), std::to_string(INT64_MIN));
}
