// The grammar of the gates (docs/gates.md): sizes (report::parse_size, also what the pytest plugin's
// markers take) and the expressions of `memguard diff --fail-if` (report/gates.h), bad inputs
// included, and their exact evaluation.
#include <gtest/gtest.h>

#include "report/gates.h"
#include "report/units.h"

namespace memguard::report {
namespace {

constexpr uint64_t kKiB = uint64_t{1} << 10, kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30,
                   kTiB = uint64_t{1} << 40;

std::optional<uint64_t> size(const std::string& s) { return parse_size(s); }

std::string size_error(const std::string& s) {
    std::string why;
    EXPECT_FALSE(parse_size(s, &why)) << s;
    return why;
}

TEST(Sizes, UnitsArePowersOf1024Or1000InAnyCase) {
    EXPECT_EQ(size("4096"), 4096u);
    EXPECT_EQ(size("0"), 0u);
    EXPECT_EQ(size("17B"), 17u);
    EXPECT_EQ(size("2KiB"), 2 * kKiB);
    EXPECT_EQ(size("2MiB"), 2 * kMiB);
    EXPECT_EQ(size("2GiB"), 2 * kGiB);
    EXPECT_EQ(size("2TiB"), 2 * kTiB);
    EXPECT_EQ(size("2KB"), 2000u);
    EXPECT_EQ(size("2MB"), 2000000u);
    EXPECT_EQ(size("2GB"), 2000000000u);
    EXPECT_EQ(size("2TB"), 2000000000000u);
    EXPECT_EQ(size("2gib"), 2 * kGiB);
    EXPECT_EQ(size("2GIB"), 2 * kGiB);
    EXPECT_EQ(size("2gb"), 2000000000u);
    EXPECT_EQ(size("2Mb"), 2000000u);  // bytes, not bits: the case never matters
    EXPECT_EQ(size("3b"), 3u);
}

TEST(Sizes, SpacesAroundTheUnitAndFractionsRoundedDown) {
    EXPECT_EQ(size("2 GiB"), 2 * kGiB);
    EXPECT_EQ(size("2\tGiB"), 2 * kGiB);
    EXPECT_EQ(size("  64 MiB  "), 64 * kMiB);
    EXPECT_EQ(size("1.5GiB"), 3 * kGiB / 2);
    EXPECT_EQ(size("1.5 KiB"), 1536u);
    EXPECT_EQ(size("0.1 KiB"), 102u);  // 102.4
    EXPECT_EQ(size("0.999 KB"), 999u);
    EXPECT_EQ(size("1.9"), 1u);  // bytes
    EXPECT_EQ(size("0.000000000000000001 TiB"), 0u);
    EXPECT_EQ(size("1.000000000000000001 TiB"), kTiB);
    EXPECT_EQ(size("007MiB"), 7 * kMiB);
}

TEST(Sizes, TheLargestIs2To64Minus1) {
    EXPECT_EQ(size("18446744073709551615"), UINT64_MAX);
    EXPECT_EQ(size("16777215 TiB"), (uint64_t{16777215}) << 40);
    EXPECT_EQ(size("16777215.99999999999 TiB"), (uint64_t{16777215} << 40) + 1099511627765u);  // rounded down
    EXPECT_EQ(size_error("18446744073709551616"), "the number is too large");
    EXPECT_EQ(size_error("16777216 TiB"), "more than 2^64 - 1 bytes (16 EiB)");
    EXPECT_EQ(size_error("18446744073709551615 KB"), "more than 2^64 - 1 bytes (16 EiB)");
    EXPECT_EQ(size_error("99999999999999999999999 GiB"), "the number is too large");
}

TEST(Sizes, BadSizesSayWhatIsWrong) {
    EXPECT_EQ(size_error(""), "expected a size, such as 2GiB, 512 MiB, 1.5GB or 4096 (bytes)");
    EXPECT_EQ(size_error("   "), "expected a size, such as 2GiB, 512 MiB, 1.5GB or 4096 (bytes)");
    EXPECT_EQ(size_error("GiB"), "expected a number before the unit, such as 2GiB or 512 MiB");
    EXPECT_EQ(size_error("-1GiB"), "a size has no sign");
    EXPECT_EQ(size_error("+1GiB"), "a size has no sign");
    const std::string units = " (expected B, KB, MB, GB, TB, KiB, MiB, GiB, TiB in any case, or none for bytes)";
    EXPECT_EQ(size_error("2 G"), "unknown unit 'G'" + units);  // 1000 or 1024? Say which.
    EXPECT_EQ(size_error("2k"), "unknown unit 'k'" + units);
    EXPECT_EQ(size_error("2 PiB"), "unknown unit 'PiB'" + units);
    EXPECT_EQ(size_error("1e9"), "unknown unit 'e9'" + units);
    EXPECT_EQ(size_error("0x10"), "unknown unit 'x10'" + units);
    EXPECT_EQ(size_error("2 GiBs"), "unknown unit 'GiBs'" + units);
    EXPECT_EQ(size_error("2 Gi B"), "unknown unit 'Gi B'" + units);
    EXPECT_EQ(size_error("1,000"), "unknown unit ',000'" + units);
    EXPECT_EQ(size_error("1."), "expected digits after the decimal point");
    EXPECT_EQ(size_error(".5GiB"), "expected a number");
    EXPECT_EQ(size_error("1.2.3"), "unexpected '.3' after the number");
    EXPECT_EQ(size_error("1.0000000000000000001 GiB"), "more than 18 digits after the decimal point");
}

TEST(Decimals, WholeAndFraction) {
    auto d = parse_decimal("12.034", 6);
    ASSERT_TRUE(d);
    EXPECT_EQ(d->whole, 12u);
    EXPECT_EQ(d->frac, 34u);
    EXPECT_EQ(d->frac_digits, 3);
    std::string why;
    EXPECT_FALSE(parse_decimal("1.5", 0, &why));
    EXPECT_EQ(why, "more than 0 digits after the decimal point");
    EXPECT_FALSE(parse_decimal("1 ", 3, &why));
    EXPECT_EQ(why, "unexpected ' ' after the number");
}

std::string gate_error(const std::string& text) {
    try {
        parse_gate(text);
    } catch (const GateError& e) {
        return e.what();
    }
    ADD_FAILURE() << "no error for '" << text << "'";
    return "";
}

TEST(Gates, ParsesTheThreeKindsOfValue) {
    GateExpr e = parse_gate("peak>+5%");
    EXPECT_EQ(e.metric, "peak");
    EXPECT_EQ(e.op, GateExpr::Gt);
    EXPECT_EQ(e.kind, GateExpr::Relative);
    EXPECT_EQ(e.micro_percent, 5000000);
    EXPECT_TRUE(e.bytes);
    EXPECT_EQ(e.text, "peak>+5%");

    e = parse_gate("live_at_exit>+100MiB");
    EXPECT_EQ(e.kind, GateExpr::Delta);
    EXPECT_TRUE(e.amount == static_cast<GateInt>(100 * kMiB));

    e = parse_gate("peak > 40 GiB");
    EXPECT_EQ(e.kind, GateExpr::Value);
    EXPECT_TRUE(e.amount == static_cast<GateInt>(40 * kGiB));

    e = parse_gate("peak<=-1.5GiB");
    EXPECT_EQ(e.op, GateExpr::Le);
    EXPECT_EQ(e.kind, GateExpr::Delta);
    EXPECT_TRUE(e.amount == -static_cast<GateInt>(3 * kGiB / 2));

    e = parse_gate("gc_freed>=10%");  // a percentage is always relative: 10% is +10%
    EXPECT_EQ(e.op, GateExpr::Ge);
    EXPECT_EQ(e.micro_percent, 10000000);

    e = parse_gate("tensor_peak < -2.5 %");
    EXPECT_EQ(e.op, GateExpr::Lt);
    EXPECT_EQ(e.micro_percent, -2500000);

    e = parse_gate("peak>+0.000001%");
    EXPECT_EQ(e.micro_percent, 1);

    e = parse_gate("oom>0");
    EXPECT_EQ(e.metric, "oom");
    EXPECT_FALSE(e.bytes);
    EXPECT_EQ(e.kind, GateExpr::Value);
    EXPECT_TRUE(e.amount == 0);

    e = parse_gate("compiles>+2");
    EXPECT_EQ(e.kind, GateExpr::Delta);
    EXPECT_TRUE(e.amount == 2);
}

TEST(Gates, EveryMetricParses) {
    for (const GateMetricInfo& m : gate_metrics()) {
        GateExpr e = parse_gate(std::string(m.name) + ">+1");
        EXPECT_EQ(e.metric, m.name);
        EXPECT_EQ(e.bytes, m.bytes) << m.name;
    }
    EXPECT_EQ(gate_metric_names(),
              "peak, live_at_exit, tensor_peak, tensor_live_at_exit, gc_freed, oom, failed_allocations, "
              "collections, compiles, phase[NAME].peak, phase[NAME].incremental_peak");
}

TEST(Gates, PhaseNamesMayHoldAnything) {
    GateExpr e = parse_gate("phase[data loading].peak>+10%");
    EXPECT_EQ(e.metric, "phase.peak");
    EXPECT_EQ(e.phase, "data loading");
    e = parse_gate("phase[a>b, c].incremental_peak >= +1 MiB");
    EXPECT_EQ(e.metric, "phase.incremental_peak");
    EXPECT_EQ(e.phase, "a>b, c");
    EXPECT_EQ(e.op, GateExpr::Ge);
    EXPECT_TRUE(e.amount == static_cast<GateInt>(kMiB));
    e = parse_gate("phase[x].peak].peak>1");  // the name ends at the last "].peak"
    EXPECT_EQ(e.phase, "x].peak");
}

TEST(Gates, BadExpressionsNameTheWrongPart) {
    const std::string metrics =
        " (metrics: peak, live_at_exit, tensor_peak, tensor_live_at_exit, gc_freed, oom, failed_allocations, "
        "collections, compiles, phase[NAME].peak, phase[NAME].incremental_peak)";
    EXPECT_EQ(gate_error("peak"), "bad --fail-if expression 'peak': no comparison: expected METRIC OP VALUE with OP "
                                  "one of >, >=, <, <= (e.g. peak>+5%)");
    EXPECT_EQ(gate_error("peak=+5%"), "bad --fail-if expression 'peak=+5%': no comparison: expected METRIC OP VALUE "
                                      "with OP one of >, >=, <, <= (e.g. peak>+5%)");
    EXPECT_EQ(gate_error("pk>+5%"), "bad --fail-if expression 'pk>+5%': unknown metric 'pk'" + metrics);
    EXPECT_EQ(gate_error("Peak>+5%"), "bad --fail-if expression 'Peak>+5%': unknown metric 'Peak'" + metrics);
    EXPECT_EQ(gate_error(">5"), "bad --fail-if expression '>5': no metric before the comparison" + metrics);
    EXPECT_EQ(gate_error("peak>>5"), "bad --fail-if expression 'peak>>5': unknown metric 'peak>'" + metrics);
    EXPECT_EQ(gate_error("peak>"),
              "bad --fail-if expression 'peak>': no value after the comparison (e.g. +5%, +1GiB or 40GiB)");
    EXPECT_EQ(gate_error("peak>+"),
              "bad --fail-if expression 'peak>+': bad value '+': expected a number after the sign");
    EXPECT_EQ(gate_error("peak>+5%,live_at_exit>+1MiB"),
              "bad --fail-if expression 'peak>+5%,live_at_exit>+1MiB': one expression per --fail-if: give --fail-if "
              "again for each (a ',' does not separate them)");
    EXPECT_EQ(gate_error("peak>+5XB"), "bad --fail-if expression 'peak>+5XB': bad size '5XB': unknown unit 'XB' "
                                       "(expected B, KB, MB, GB, TB, KiB, MiB, GiB, TiB in any case, or none for "
                                       "bytes)");
    EXPECT_EQ(gate_error("peak>99999999 TiB"),
              "bad --fail-if expression 'peak>99999999 TiB': bad size '99999999 TiB': more than 2^64 - 1 bytes (16 "
              "EiB)");
    EXPECT_EQ(gate_error("peak>5%%"), "bad --fail-if expression 'peak>5%%': bad percentage '5%%': unexpected '%' "
                                      "after the number");
    EXPECT_EQ(gate_error("peak>+-5%"),
              "bad --fail-if expression 'peak>+-5%': bad percentage '+-5%': expected a number");
    EXPECT_EQ(gate_error("peak>5%5"), "bad --fail-if expression 'peak>5%5': bad value '5%5': '%' ends a percentage");
    EXPECT_EQ(gate_error("peak>+1.0000001%"), "bad --fail-if expression 'peak>+1.0000001%': bad percentage "
                                              "'+1.0000001%': more than 6 digits after the decimal point");
    EXPECT_EQ(gate_error("peak>+1000000000001%"), "bad --fail-if expression 'peak>+1000000000001%': bad "
                                                  "percentage '+1000000000001%': at most 1000000000000%");
    EXPECT_EQ(gate_error("oom>1KiB"), "bad --fail-if expression 'oom>1KiB': oom is a count: expected a whole number, "
                                      "not '1KiB'");
    EXPECT_EQ(gate_error("compiles>+1.5"),
              "bad --fail-if expression 'compiles>+1.5': compiles is a count: expected a whole number, not '1.5'");
    EXPECT_EQ(gate_error("phase[].peak>1"), "bad --fail-if expression 'phase[].peak>1': bad phase metric "
                                            "'phase[].peak': expected phase[NAME].peak or "
                                            "phase[NAME].incremental_peak");
    EXPECT_EQ(gate_error("phase[x].exit>1"), "bad --fail-if expression 'phase[x].exit>1': bad phase metric "
                                             "'phase[x].exit': expected phase[NAME].peak or "
                                             "phase[NAME].incremental_peak");
}

bool fails(const std::string& text, GateInt a, GateInt b) { return gate_fails(parse_gate(text), a, b); }

TEST(Gates, RelativeChangesAreExact) {
    // +5% of 100 is 105: more than that fails, exactly that does not (>=: it does).
    EXPECT_FALSE(fails("peak>+5%", 100, 105));
    EXPECT_TRUE(fails("peak>+5%", 100, 106));
    EXPECT_TRUE(fails("peak>=+5%", 100, 105));
    EXPECT_FALSE(fails("peak>+5%", 100, 90));
    EXPECT_TRUE(fails("peak<-5%", 100, 94));
    EXPECT_FALSE(fails("peak<-5%", 100, 95));
    EXPECT_TRUE(fails("peak<=-5%", 100, 95));
    // Near 2^64 floating point would lose the byte that decides.
    const GateInt a = UINT64_MAX - 1000;
    EXPECT_FALSE(fails("peak>+0%", a, a));
    EXPECT_TRUE(fails("peak>+0%", a, a + 1));
    EXPECT_FALSE(fails("peak>+0.000001%", a, a + a / 100000000));
    EXPECT_TRUE(fails("peak>+0.000001%", a, a + a / 100000000 + 1));
    // From nothing: any rise is an infinite rise, no change is 0%.
    EXPECT_TRUE(fails("peak>+1000000%", 0, 1));
    EXPECT_FALSE(fails("peak<-5%", 0, 1));
    EXPECT_FALSE(fails("peak>+0%", 0, 0));
    EXPECT_TRUE(fails("peak>=+0%", 0, 0));
    EXPECT_TRUE(fails("gc_freed<-50%", 0, -1));
    // A negative A (gc_freed may be): the change is relative to |A|.
    EXPECT_TRUE(fails("gc_freed>+50%", -100, -49));
    EXPECT_FALSE(fails("gc_freed>+50%", -100, -50));
    // The largest figures: three int64 totals of collections.
    const GateInt most = static_cast<GateInt>(INT64_MAX) * 3;
    EXPECT_TRUE(fails("gc_freed<-100%", most, -most));
    EXPECT_FALSE(fails("gc_freed>+1000000000000%", -most, most));
}

TEST(Gates, DeltasAndValues) {
    EXPECT_FALSE(fails("live_at_exit>+100MiB", 0, 100 * kMiB));
    EXPECT_TRUE(fails("live_at_exit>+100MiB", 0, 100 * kMiB + 1));
    EXPECT_TRUE(fails("live_at_exit>+100MiB", kGiB, kGiB + 101 * kMiB));
    EXPECT_FALSE(fails("live_at_exit>+100MiB", 2 * kGiB, kGiB + 101 * kMiB));  // B is big, the change is not
    EXPECT_TRUE(fails("peak>1GiB", 5 * kGiB, kGiB + 1));                       // B's own value, whatever A was
    EXPECT_FALSE(fails("peak>1GiB", 0, kGiB));
    EXPECT_TRUE(fails("oom>0", 0, 1));
    EXPECT_TRUE(fails("oom>0", 3, 1));
    EXPECT_FALSE(fails("oom>+0", 3, 1));
    EXPECT_TRUE(fails("peak<-1GiB", 3 * kGiB, kGiB));
    EXPECT_FALSE(fails("peak<-1GiB", 2 * kGiB, kGiB));
    EXPECT_TRUE(fails("peak<=-1GiB", 2 * kGiB, kGiB));
    EXPECT_FALSE(fails("peak>-1GiB", UINT64_MAX, 0));
    EXPECT_TRUE(fails("peak<-16777215TiB", UINT64_MAX, 0));
}

TEST(Gates, ChangeTexts) {
    EXPECT_EQ(relative_change_text(100, 105), "+5.0%");
    EXPECT_EQ(relative_change_text(3, 2), "-33.3%");
    EXPECT_EQ(relative_change_text(7, 7), "+0.0%");
    EXPECT_EQ(relative_change_text(0, 0), "+0.0%");
    EXPECT_EQ(relative_change_text(0, 1), "+inf%");
    EXPECT_EQ(relative_change_text(0, -1), "-inf%");
    EXPECT_EQ(gate_int_text(static_cast<GateInt>(UINT64_MAX) * 2), "36893488147419103230");
    EXPECT_EQ(gate_int_text(-5), "-5");
    EXPECT_EQ(gate_bytes_text(-1536), "-1.50 KiB");
    EXPECT_EQ(gate_op_text(GateExpr::Le), std::string("<="));
}

}  // namespace
}  // namespace memguard::report
