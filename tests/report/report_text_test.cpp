// Text from a report on its way to the reader (issue 17 item 8): text::printable, which the CLI's
// text output and its warnings and errors go through, and the JSON writer's C1 escapes.
// check_report_text.py runs every command on reports holding such text.
#include <gtest/gtest.h>

#include <string>

#include "common/text.h"
#include "report/json.h"

namespace memguard::report {
namespace {

using text::printable;

TEST(ReportText, PrintableEscapesEveryControlCharacter) {
    EXPECT_EQ(printable("plain name: step 3 (x/y)"), "plain name: step 3 (x/y)");
    EXPECT_EQ(printable(""), "");
    // An OSC that retitles the terminal, then "clear screen", a carriage return and a forged line.
    EXPECT_EQ(printable("\x1b]0;pwned\x07\x1b[2J\rmemguard: error: x\n"),
              "\\x1b]0;pwned\\x07\\x1b[2J\\x0dmemguard: error: x\\x0a");
    EXPECT_EQ(printable(std::string("a\0b\tc\x7f"
                                    "d",
                                    7)),
              "a\\x00b\\x09c\\x7fd");
    // C1 (CSI is U+009B), which terminals in UTF-8 mode may obey.
    EXPECT_EQ(printable("a\xc2\x9b"
                        "31mb\xc2\x80\xc2\x9f"),
              "a\\u009b31mb\\u0080\\u009f");
    // Backslashes stay: the escapes are for the eye.
    EXPECT_EQ(printable("C:\\dir\\x1b"), "C:\\dir\\x1b");
}

TEST(ReportText, PrintableKeepsUtf8AndEscapesBytesThatAreNot) {
    EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0\xe2\x80\xa6"),
              "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0\xe2\x80\xa6");
    EXPECT_EQ(printable("a\xff\xfe"
                        "b"),
              "a\\xff\\xfeb");
    EXPECT_EQ(printable("\xc3"), "\\xc3");                             // cut sequence
    EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                    // overlong '/'
    EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");           // UTF-16 surrogate
    EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
    EXPECT_EQ(printable("\xe2\x82"
                        "x"),
              "\\xe2\\x82x");  // a sequence cut by an ASCII byte
}

TEST(ReportText, PrintableIsIdempotent) {
    // Errors may pass through it twice (a message quoting an already printable name).
    const std::string hostile = "\x1b]0;t\x07\xc2\x9b\xff\n";
    EXPECT_EQ(printable(printable(hostile)), printable(hostile));
}

TEST(ReportText, Utf8Sequence) {
    uint32_t cp = 0;
    EXPECT_EQ(text::utf8_sequence("A", 0, &cp), 1u);
    EXPECT_EQ(cp, 0x41u);
    EXPECT_EQ(text::utf8_sequence("\xf0\x9f\x98\x80", 0, &cp), 4u);
    EXPECT_EQ(cp, 0x1f600u);
    EXPECT_EQ(text::utf8_sequence("x\xe2\x80\xa6", 1, &cp), 3u);
    EXPECT_EQ(cp, 0x2026u);
    EXPECT_EQ(text::utf8_sequence("\x80", 0), 0u);
    EXPECT_EQ(text::utf8_sequence("\xe2\x80", 0), 0u);
}

TEST(ReportText, JsonEscapesC1) {
    std::string out;
    JsonWriter::escape("a\xc2\x9b"
                       "b\xc2\x85\xc2\xa0",
                       out);
    EXPECT_EQ(out, "\"a\\u009bb\\u0085\xc2\xa0\"");  // U+00A0 is no control: kept
}

}  // namespace
}  // namespace memguard::report
