// The JSON writer and the size/time renderings.
#include <gtest/gtest.h>

#include <stdexcept>

#include "report/json.h"
#include "report/units.h"

namespace memguard::report {
namespace {

std::string escaped(std::string_view s) {
    std::string out;
    JsonWriter::escape(s, out);
    return out;
}

TEST(Json, EscapesQuotesBackslashesAndControls) {
    EXPECT_EQ(escaped("plain"), "\"plain\"");
    EXPECT_EQ(escaped("a\"b\\c"), "\"a\\\"b\\\\c\"");
    EXPECT_EQ(escaped("l1\nl2\tx\r"), "\"l1\\nl2\\tx\\r\"");
    EXPECT_EQ(escaped(std::string("\x01\x1f\x7f", 3)), "\"\\u0001\\u001f\\u007f\"");
    EXPECT_EQ(escaped(std::string("a\0b", 3)), "\"a\\u0000b\"");
    EXPECT_EQ(escaped(""), "\"\"");
    EXPECT_EQ(escaped("/path/ok"), "\"/path/ok\"");
}

TEST(Json, KeepsValidUtf8AndReplacesInvalidBytes) {
    EXPECT_EQ(escaped("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"), "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"");
    const std::string fffd = "\xef\xbf\xbd";
    EXPECT_EQ(escaped("a\xff"
                      "b"),
              "\"a" + fffd + "b\"");
    EXPECT_EQ(escaped("\xc3"), "\"" + fffd + "\"");                                   // cut sequence
    EXPECT_EQ(escaped("\xc0\xaf"), "\"" + fffd + fffd + "\"");                        // overlong '/'
    EXPECT_EQ(escaped("\xed\xa0\x80"), "\"" + fffd + fffd + fffd + "\"");             // UTF-16 surrogate
    EXPECT_EQ(escaped("\xf4\x90\x80\x80"), "\"" + fffd + fffd + fffd + fffd + "\"");  // above U+10FFFF
}

TEST(Json, PrettyPrintsNestedValues) {
    JsonWriter j;
    j.begin_object();
    j.key("n").value(uint64_t{18446744073709551615u});
    j.key("neg").value(int64_t{-5});
    j.key("s").value("x\"y");
    j.key("t").value(true);
    j.key("f").value(false);
    j.key("z").null();
    j.key("d").number("0.25");
    j.key("empty_o").begin_object().end_object();
    j.key("empty_a").begin_array().end_array();
    j.key("a").begin_array().value(1).begin_object().key("k").value("v").end_object().end_array();
    j.end_object();
    EXPECT_EQ(j.str(), "{\n"
                       "  \"n\": 18446744073709551615,\n"
                       "  \"neg\": -5,\n"
                       "  \"s\": \"x\\\"y\",\n"
                       "  \"t\": true,\n"
                       "  \"f\": false,\n"
                       "  \"z\": null,\n"
                       "  \"d\": 0.25,\n"
                       "  \"empty_o\": {},\n"
                       "  \"empty_a\": [],\n"
                       "  \"a\": [\n"
                       "    1,\n"
                       "    {\n"
                       "      \"k\": \"v\"\n"
                       "    }\n"
                       "  ]\n"
                       "}\n");
}

TEST(Json, OptionalValues) {
    JsonWriter j;
    j.begin_array().value_or_null(std::optional<int64_t>()).value_or_null(std::optional<int64_t>(3)).end_array();
    EXPECT_EQ(j.str(), "[\n  null,\n  3\n]\n");
}

TEST(Json, MisuseIsALogicError) {
    EXPECT_THROW(JsonWriter().begin_object().value(1), std::logic_error);  // value without a key
    EXPECT_THROW(JsonWriter().begin_array().key("k"), std::logic_error);
    EXPECT_THROW(JsonWriter().begin_object().end_array(), std::logic_error);
    EXPECT_THROW(JsonWriter().begin_object().key("a").end_object(), std::logic_error);
    EXPECT_THROW(JsonWriter().value(1).value(2), std::logic_error);
    EXPECT_THROW(JsonWriter().end_object(), std::logic_error);
}

TEST(Units, HumanBytes) {
    EXPECT_EQ(human_bytes(0), "0 B");
    EXPECT_EQ(human_bytes(1023), "1023 B");
    EXPECT_EQ(human_bytes(1024), "1.00 KiB");
    EXPECT_EQ(human_bytes(1536), "1.50 KiB");
    EXPECT_EQ(human_bytes(65536), "64.00 KiB");
    EXPECT_EQ(human_bytes(1048576), "1.00 MiB");
    EXPECT_EQ(human_bytes(3 * 1048576 + 1048576 / 4), "3.25 MiB");
    EXPECT_EQ(human_bytes(uint64_t{3} << 29), "1.50 GiB");
    EXPECT_EQ(human_bytes(uint64_t{5} << 40), "5120.00 GiB");  // GiB is the largest unit
}

TEST(Units, SecondsFixed3RoundsToMilliseconds) {
    EXPECT_EQ(seconds_fixed3(0), "0.000");
    EXPECT_EQ(seconds_fixed3(1234567890), "1.235");
    EXPECT_EQ(seconds_fixed3(1234499999), "1.234");
    EXPECT_EQ(seconds_fixed3(999999), "0.001");
    EXPECT_EQ(seconds_fixed3(499999), "0.000");
    EXPECT_EQ(seconds_fixed3(12345000000), "12.345");
    EXPECT_EQ(seconds_fixed3(-1500000), "-0.002");
}

TEST(Units, HumanBytesSigned) {
    EXPECT_EQ(human_bytes_signed(0), "0 B");
    EXPECT_EQ(human_bytes_signed(1048576), "1.00 MiB");
    EXPECT_EQ(human_bytes_signed(-2048), "-2.00 KiB");
    EXPECT_EQ(human_bytes_signed(-5), "-5 B");
    EXPECT_EQ(human_bytes_signed(INT64_MIN), "-8589934592.00 GiB");
}

TEST(Units, MillisecondsFixed3RoundsToMicroseconds) {
    EXPECT_EQ(milliseconds_fixed3(0), "0.000");
    EXPECT_EQ(milliseconds_fixed3(12345678), "12.346");
    EXPECT_EQ(milliseconds_fixed3(12345499), "12.345");
    EXPECT_EQ(milliseconds_fixed3(500), "0.001");
    EXPECT_EQ(milliseconds_fixed3(499), "0.000");
    EXPECT_EQ(milliseconds_fixed3(3000000000), "3000.000");
    EXPECT_EQ(milliseconds_fixed3(-1500000), "-1.500");
    EXPECT_EQ(milliseconds_fixed3(-400), "0.000");
}

TEST(Units, SecondsExactHasNoTrailingZeros) {
    EXPECT_EQ(seconds_exact(0), "0");
    EXPECT_EQ(seconds_exact(1500000000), "1.5");
    EXPECT_EQ(seconds_exact(2000000000), "2");
    EXPECT_EQ(seconds_exact(3000), "0.000003");
    EXPECT_EQ(seconds_exact(1), "0.000000001");
    EXPECT_EQ(seconds_exact(-250000000), "-0.25");
    EXPECT_EQ(seconds_exact(INT64_MAX), "9223372036.854775807");
}

TEST(Units, Percent) {
    EXPECT_EQ(percent(1, 3), "33.3%");
    EXPECT_EQ(percent(2, 3), "66.7%");
    EXPECT_EQ(percent(5, 5), "100.0%");
    EXPECT_EQ(percent(0, 0), "0.0%");
}

TEST(Units, ParseSeconds) {
    int64_t ns = -1;
    EXPECT_TRUE(parse_seconds("0.5", ns));
    EXPECT_EQ(ns, 500000000);
    EXPECT_TRUE(parse_seconds("12", ns));
    EXPECT_EQ(ns, 12000000000);
    EXPECT_TRUE(parse_seconds("1e-3", ns));
    EXPECT_EQ(ns, 1000000);
    EXPECT_TRUE(parse_seconds("0", ns));
    EXPECT_EQ(ns, 0);
    for (const char* bad : {"", "-1", "+1", " 1", "1s", "abc", "nan", "inf", "1e300", "0x10"}) {
        EXPECT_FALSE(parse_seconds(bad, ns)) << bad;
    }
}

}  // namespace
}  // namespace memguard::report
