// The report parser: every record type, forward compatibility, every error class, warnings.
#include <gtest/gtest.h>

#include "report/report.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::contains;
using test::error_of;
using test::kHeader;
using test::parse;

// --- header and file-level errors ---------------------------------------------------------------

TEST(ReportHeader, MinimalReportParses) {
    Report r = parse("Z 5\n");
    EXPECT_EQ(r.version, 1);
    EXPECT_EQ(r.path, "t.mgr");
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.end_t, 5);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportHeader, ExtraHeaderFieldsAreIgnored) {
    EXPECT_EQ(parse_report("MEMGUARD-REPORT 1 x y\nZ 1\n", "t").version, 1);
}

TEST(ReportHeader, EmptyFileIsAnError) { EXPECT_EQ(error_of(""), "t.mgr: empty file (not a memguard report)"); }

TEST(ReportHeader, BadMagicNamesFileLineAndExpectation) {
    std::string e = error_of("HELLO 1\nZ 1\n");
    EXPECT_TRUE(contains(e, "t.mgr:1: not a memguard report")) << e;
    EXPECT_TRUE(contains(e, "'HELLO 1'")) << e;
    EXPECT_TRUE(contains(e, "expected 'MEMGUARD-REPORT 1'")) << e;
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT\n"), "not a memguard report"));
    EXPECT_TRUE(contains(error_of("memguard-report 1\n"), "not a memguard report"));
}

TEST(ReportHeader, BinaryGarbageIsQuotedPrintably) {
    std::string e = error_of(std::string("\x7f" "ELF\x02\x01\x01\0\0\0\n", 11));
    EXPECT_TRUE(contains(e, "'?ELF\?\?\?\?\?\?'")) << e;  // each unprintable byte shows as '?'
    EXPECT_EQ(e.find('\n'), std::string::npos);
}

TEST(ReportHeader, NewerMajorVersionIsRefusedNamingBothVersions) {
    EXPECT_EQ(error_of("MEMGUARD-REPORT 2\nI pid 1\n"),
              "t.mgr:1: report format version 2 is newer than this memguard reads (1)");
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT 17\n"), "version 17 is newer"));
}

TEST(ReportHeader, OtherBadVersions) {
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT 0\n"), "t.mgr:1: report format version 0 is not the one"));
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT one\n"), "t.mgr:1: bad format version 'one'"));
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT 1.0\n"), "bad format version '1.0'"));
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT 1\r\n"), "bad format version"));  // CRLF is not the format
}

TEST(ReportHeader, MissingFinalNewlineMeansTruncated) {
    std::string content = kHeader + "I pid 1\nA 1 2 7f00 16 device cudaMal";
    EXPECT_EQ(error_of(content), "t.mgr:3: truncated at byte " + std::to_string(content.size()) +
                                     " (last record incomplete)");
    // Even a last line that happens to be a whole record is truncated without its '\n'.
    EXPECT_TRUE(contains(error_of(kHeader + "Z 5"), "t.mgr:2: truncated at byte 21"));
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT 1"), "t.mgr:1: truncated at byte 17"));
}

TEST(ReportHeader, WrongVersionWinsOverTruncation) {
    EXPECT_TRUE(contains(error_of("MEMGUARD-REPORT 2"), "version 2 is newer"));
    EXPECT_TRUE(contains(error_of("MEMGUARD-REP"), "not a memguard report"));
}

// --- records ------------------------------------------------------------------------------------

TEST(ReportRecords, InfoValuesArePercentDecoded) {
    Report r = parse("I pid 4242\nI cmdline python%20train.py%20--lr%3D0.1\nI host %\nI exe /a/b\nI exe /c/d\nZ 1\n");
    EXPECT_EQ(r.info.at("pid"), "4242");
    EXPECT_EQ(r.info.at("cmdline"), "python train.py --lr=0.1");
    EXPECT_EQ(r.info.at("host"), "");
    EXPECT_EQ(r.info.at("exe"), "/c/d");  // the last one wins
}

TEST(ReportRecords, UnknownInfoKeysAreKept) {
    Report r = parse("I some_future_key some%20value\nZ 1\n");
    EXPECT_EQ(r.info.at("some_future_key"), "some value");
}

TEST(ReportRecords, BadPercentEncodingIsMalformed) {
    EXPECT_TRUE(contains(error_of(kHeader + "I pid 1\nI exe /a%2\n"), "t.mgr:3: malformed I record: bad value '/a%2'"));
    EXPECT_TRUE(contains(error_of(kHeader + "I exe /a%zz\n"), "malformed I record"));
    EXPECT_TRUE(contains(error_of(kHeader + "I exe\n"), "t.mgr:2: malformed I record: 2 fields expected, 1 found"));
}

TEST(ReportRecords, ModuleFields) {
    Report r = parse("M 3 7f0000001000 7f0000009000 7f0000000000 ABCDEF0123456789abcdef0123456789abcdef01 "
                     "/usr/lib/lib%20x.so\n"
                     "M 4 400000 500000 0 - /bin/app\nZ 1\n");
    ASSERT_EQ(r.modules.size(), 2u);
    const Module& m = r.modules[0];
    EXPECT_EQ(m.id, 3u);
    EXPECT_EQ(m.lo, 0x7f0000001000u);
    EXPECT_EQ(m.hi, 0x7f0000009000u);
    EXPECT_EQ(m.bias, 0x7f0000000000u);
    EXPECT_EQ(m.build_id, "abcdef0123456789abcdef0123456789abcdef01");  // 160-bit SHA-1 ids are common
    EXPECT_EQ(m.path, "/usr/lib/lib x.so");
    EXPECT_EQ(r.modules[1].build_id, "");
    EXPECT_EQ(r.modules[1].bias, 0u);
}

TEST(ReportRecords, MalformedModules) {
    EXPECT_TRUE(contains(error_of(kHeader + "M 1 10 20 0 - \n"), "malformed M record: bad path ''"));
    EXPECT_TRUE(contains(error_of(kHeader + "M 1 20 10 0 - /x\n"), "hi '10' is below lo '20'"));
    EXPECT_TRUE(contains(error_of(kHeader + "M 1 0x10 20 0 - /x\n"), "bad lo '0x10' (hex expected)"));
    EXPECT_TRUE(contains(error_of(kHeader + "M 1 10 20 0 abc /x\n"), "bad build-id 'abc' (odd length)"));
    EXPECT_TRUE(contains(error_of(kHeader + "M 1 10 20 0 xyz1 /x\n"), "bad build-id 'xyz1'"));
    EXPECT_TRUE(contains(error_of(kHeader + "M -1 10 20 0 - /x\n"), "bad module id '-1'"));
    EXPECT_TRUE(contains(error_of(kHeader + "M 99999999999 10 20 0 - /x\n"), "module id '99999999999' too large"));
    EXPECT_TRUE(contains(error_of(kHeader + "M 1 10000000000000000 20 0 - /x\n"), "bad lo"));  // > 64 bits
}

TEST(ReportRecords, DuplicateModuleIdWarnsAndKeepsTheFirst) {
    Report r = parse("M 1 10 20 0 - /a\nM 1 30 40 0 - /b\nZ 1\n");
    ASSERT_EQ(r.modules.size(), 1u);
    EXPECT_EQ(r.modules[0].path, "/a");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr:3: module id 1 defined twice")) << r.warnings[0];
}

TEST(ReportRecords, StacksRecordIpsAndTheModulesBeforeThem) {
    Report r = parse("M 0 1000 2000 0 - /a\nS 1 1234 1100 1f00\nM 1 3000 4000 0 - /b\nS 2 3004\nS 3\nZ 1\n");
    ASSERT_EQ(r.stacks.size(), 3u);
    EXPECT_EQ(r.stacks.at(1).ips, (std::vector<uint64_t>{0x1234, 0x1100, 0x1f00}));
    EXPECT_EQ(r.stacks.at(1).modules_known, 1u);
    EXPECT_EQ(r.stacks.at(2).modules_known, 2u);
    EXPECT_TRUE(r.stacks.at(3).ips.empty());
    EXPECT_EQ(r.stacks.at(3).id, 3u);
}

TEST(ReportRecords, MalformedStacks) {
    EXPECT_TRUE(contains(error_of(kHeader + "S 0 1234\n"), "stack id 0 is reserved"));
    EXPECT_TRUE(contains(error_of(kHeader + "S 1 1234 zz\n"), "t.mgr:2: malformed S record: bad ip 'zz'"));
    EXPECT_TRUE(contains(error_of(kHeader + "S\n"), "malformed S record: 1 fields expected, 0 found"));
    EXPECT_TRUE(contains(error_of(kHeader + "S 1 12  34\n"), "bad ip ''"));  // fields are split by one space
}

TEST(ReportRecords, DuplicateStackWarnsAndKeepsTheFirst) {
    Report r = parse("M 0 0 ffff 0 - /a\nS 1 10\nS 1 20\nZ 1\n");
    EXPECT_EQ(r.stacks.at(1).ips, std::vector<uint64_t>{0x10});
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "stack id 1 defined twice"));
}

TEST(ReportRecords, AllocationFields) {
    Report r = parse("M 0 0 ffff 0 - /a\nS 7 10\n"
                     "A 1200 4242 7f1200000000 2097152 device cudaMalloc 0 - 7\n"
                     "A 1300 4243 7f1300000000 4096 async cudaMallocAsync 1 7fab12 0\n"
                     "A 1400 4243 7f1400000000 8192 managed cudaMallocManaged 2 - 7\n"
                     "A 1500 4244 7f1500000000 64 pinned cudaHostAlloc -1 - 7\nZ 2000\n");
    ASSERT_EQ(r.blocks.size(), 4u);
    const Block& b = r.blocks[0];
    EXPECT_EQ(b.t_alloc, 1200);
    EXPECT_EQ(b.tid, 4242u);
    EXPECT_EQ(b.addr, 0x7f1200000000u);
    EXPECT_EQ(b.size, 2097152u);
    EXPECT_EQ(b.kind, Kind::Device);
    EXPECT_EQ(b.api, "cudaMalloc");
    EXPECT_EQ(b.device, 0);
    EXPECT_FALSE(b.stream.has_value());
    EXPECT_EQ(b.stack_id, 7u);
    EXPECT_FALSE(b.t_free.has_value());
    EXPECT_EQ(r.blocks[1].kind, Kind::Async);
    EXPECT_EQ(r.blocks[1].stream, std::optional<uint64_t>(0x7fab12));
    EXPECT_EQ(r.blocks[1].stack_id, 0u);
    EXPECT_EQ(r.blocks[2].kind, Kind::Managed);
    EXPECT_EQ(r.blocks[2].device, 2);
    EXPECT_EQ(r.blocks[3].kind, Kind::Pinned);
    EXPECT_EQ(r.blocks[3].device, -1);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportRecords, MalformedAllocations) {
    const std::string ok = "A 1 2 7f00 16 device cudaMalloc 0 - 0\n";
    EXPECT_EQ(error_of(kHeader + ok + "A 1 2 7f10 16 device cudaMalloc 0 -\n"),
              "t.mgr:3: malformed A record: 9 fields expected, 8 found");
    EXPECT_TRUE(contains(error_of(kHeader + "A 1x 2 7f00 16 device cudaMalloc 0 - 0\n"), "bad time '1x'"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 -16 device cudaMalloc 0 - 0\n"), "bad size '-16'"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 16 host cudaMalloc 0 - 0\n"), "unknown kind 'host'"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 16 device cudaMalloc zero - 0\n"), "bad device 'zero'"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 16 device cudaMalloc 0 s1 0\n"), "bad stream 's1'"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 16 device cudaMalloc 0 - 5000000000\n"), "too large"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 16 device cudaMalloc 9999999999 - 0\n"), "bad device"));
    EXPECT_TRUE(contains(error_of(kHeader + "A 1 2 7f00 99999999999999999999 device x 0 - 0\n"), "bad size"));
}

TEST(ReportRecords, FreeMarksTheBlockAndRecordsAnEvent) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 0\nF 20 1 7f00 16 cudaFree -\nZ 30\n");
    ASSERT_EQ(r.blocks.size(), 1u);
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(20));
    EXPECT_EQ(r.blocks[0].free_api, "cudaFree");
    ASSERT_EQ(r.events.size(), 2u);
    EXPECT_EQ(r.events[1].type, Event::Free);
    EXPECT_EQ(r.events[1].block, 0u);
    EXPECT_EQ(r.events[1].t, 20);
}

TEST(ReportRecords, FreeOfAnAddressNotLiveWarnsAndIsIgnored) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 0\nF 20 1 7f80 16 cudaFree -\n"
                     "F 21 1 7f90 16 cudaFree -\nF 22 1 7f00 16 cudaFree -\nF 23 1 7f00 16 cudaFree -\nZ 30\n");
    EXPECT_EQ(r.events.size(), 2u);  // the alloc and the one valid free
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(22));
    ASSERT_EQ(r.warnings.size(), 1u);  // one line for all three, naming the first
    EXPECT_EQ(r.warnings[0], "t.mgr:3: free of 7f80, which is not live; ignored (and 2 more like it)");
}

TEST(ReportRecords, MalformedFreeAndRestore) {
    EXPECT_TRUE(
        contains(error_of(kHeader + "F 1 2 7f00 16 cudaFree\n"), "malformed F record: 6 fields expected, 5 found"));
    EXPECT_TRUE(contains(error_of(kHeader + "F 1 2 7f00 16 cudaFree x\n"), "bad stream 'x'"));
    EXPECT_TRUE(contains(error_of(kHeader + "R 1 2 7f00\n"), "malformed R record: 4 fields expected, 3 found"));
    EXPECT_TRUE(contains(error_of(kHeader + "R 1 2 7f00 e\n"), "bad error 'e'"));
}

TEST(ReportRecords, RestoreRevivesTheBlockMostRecentlyFreedAtTheAddress) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 1\n"
                     "F 20 1 7f00 16 cudaFree -\n"
                     "A 30 2 7f00 32 device cudaMalloc 0 - 2\n"
                     "F 40 2 7f00 32 cudaFree -\n"
                     "R 41 2 7f00 700\nZ 50\n");
    ASSERT_EQ(r.blocks.size(), 2u);
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(20));  // stays freed
    EXPECT_FALSE(r.blocks[1].t_free.has_value());               // live again
    EXPECT_EQ(r.blocks[1].free_api, "");
    ASSERT_EQ(r.events.size(), 5u);
    EXPECT_EQ(r.events[4].type, Event::Restore);
    EXPECT_EQ(r.events[4].block, 1u);
    EXPECT_EQ(r.events[4].t, 41);
    // The revived block can be freed again.
    Report r2 = parse("A 10 1 7f00 16 device cudaMalloc 0 - 0\nF 20 1 7f00 16 cudaFree -\nR 21 1 7f00 1\n"
                      "F 30 1 7f00 16 cudaFree -\nZ 50\n");
    EXPECT_EQ(r2.blocks[0].t_free, std::optional<int64_t>(30));
    EXPECT_TRUE(r2.warnings.empty());
}

TEST(ReportRecords, RestoreWithoutAFreeWarnsAndIsIgnored) {
    Report r = parse("R 5 1 7f00 1\nA 10 1 7f00 16 device cudaMalloc 0 - 0\nR 11 1 7f00 1\nZ 50\n");
    EXPECT_EQ(r.events.size(), 1u);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr:2: failed free of 7f00, which no earlier free released; ignored"));
    EXPECT_TRUE(contains(r.warnings[0], "(and 1 more like it)"));
}

TEST(ReportRecords, RestoreAfterTheAddressWasReallocatedIsIgnored) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 0\nF 20 1 7f00 16 cudaFree -\n"
                     "A 21 2 7f00 64 device cudaMalloc 0 - 0\nR 22 1 7f00 1\nZ 50\n");
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(20));
    EXPECT_FALSE(r.blocks[1].t_free.has_value());
    EXPECT_EQ(r.events.size(), 3u);
    EXPECT_EQ(r.warnings.size(), 1u);
}

TEST(ReportRecords, AllocationAtALiveAddressEndsTheEarlierBlock) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 0\nA 20 1 7f00 32 device cudaMalloc 0 - 0\nZ 50\n");
    ASSERT_EQ(r.blocks.size(), 2u);
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(20));
    EXPECT_EQ(r.blocks[0].free_api, "(implicit)");
    ASSERT_EQ(r.events.size(), 3u);
    EXPECT_EQ(r.events[1].type, Event::Free);
    EXPECT_EQ(r.events[2].type, Event::Alloc);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr:3: allocation at 7f00, which is already live"));
}

TEST(ReportRecords, FailedAllocationFields) {
    Report r = parse("E 900 4243 16777216 async cudaMallocAsync 1 7fabc 0 2 4194304\n"
                     "E 901 4243 16 device cudaMalloc 0 - 0 1 0\nZ 1000\n");
    ASSERT_EQ(r.failures.size(), 2u);
    const FailedAlloc& f = r.failures[0];
    EXPECT_EQ(f.t, 900);
    EXPECT_EQ(f.tid, 4243u);
    EXPECT_EQ(f.size, 16777216u);
    EXPECT_EQ(f.kind, Kind::Async);
    EXPECT_EQ(f.api, "cudaMallocAsync");
    EXPECT_EQ(f.device, 1);
    EXPECT_EQ(f.stream, std::optional<uint64_t>(0x7fabc));
    EXPECT_EQ(f.error, 2);
    EXPECT_EQ(f.live_bytes, 4194304u);
    EXPECT_TRUE(f.is_oom());
    EXPECT_FALSE(r.failures[1].is_oom());
    EXPECT_TRUE(contains(error_of(kHeader + "E 1 2 16 device cudaMalloc 0 - 0 2\n"), "10 fields expected, 9 found"));
}

TEST(ReportRecords, ReferencesToUnknownStacksAreWarnings) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 9\nA 11 1 7f10 16 device cudaMalloc 0 - 8\n"
                     "E 12 1 16 device cudaMalloc 0 - 7 2 0\nZ 50\n");
    EXPECT_EQ(r.blocks.size(), 2u);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_EQ(r.warnings[0],
              "t.mgr:2: A record uses stack 9, which no earlier S record defines (and 2 more like it)");
}

TEST(ReportRecords, StackDefinedAfterItsUseStillWarns) {
    Report r = parse("A 10 1 7f00 16 device cudaMalloc 0 - 1\nS 1 10\nZ 50\n");
    EXPECT_EQ(r.stacks.count(1), 1u);
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_TRUE(contains(r.warnings[0], "stack 1"));
}

TEST(ReportRecords, FramesOutsideEveryModuleAreReportedOnce) {
    Report r = parse("M 0 1000 2000 0 - /a\nS 1 1000 1fff 2000\nS 2 5\nZ 1\n");
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_EQ(r.warnings[0],
              "t.mgr: 2 of 4 stack frames lie outside every module (M record); they show as raw addresses");
}

TEST(ReportRecords, HeartbeatAndEnd) {
    Report r = parse("H 1000\nA 1500 1 7f00 16 device cudaMalloc 0 - 0\nH 2000\nZ 2500\n");
    EXPECT_TRUE(r.complete);
    EXPECT_EQ(r.end_t, 2500);
    EXPECT_TRUE(r.warnings.empty());
    EXPECT_TRUE(contains(error_of(kHeader + "H\n"), "malformed H record"));
    EXPECT_TRUE(contains(error_of(kHeader + "Z soon\n"), "malformed Z record: bad time 'soon'"));
}

TEST(ReportRecords, EventsFollowFileOrder) {
    Report r = parse("A 30 1 a0 1 device m 0 - 0\nA 10 2 b0 2 device m 0 - 0\nF 20 2 b0 2 f -\n"
                     "F 40 1 a0 1 f -\nZ 50\n");
    ASSERT_EQ(r.events.size(), 4u);
    EXPECT_EQ(r.events[0].block, 0u);
    EXPECT_EQ(r.events[0].t, 30);
    EXPECT_EQ(r.events[1].block, 1u);
    EXPECT_EQ(r.events[1].t, 10);
    EXPECT_EQ(r.events[2].type, Event::Free);
    EXPECT_EQ(r.events[2].block, 1u);
    EXPECT_EQ(r.events[3].block, 0u);
}

// --- forward compatibility ------------------------------------------------------------------------

TEST(ReportForwardCompat, UnknownRecordTypesAreIgnored) {
    Report r = parse("X 1 2 3\nQQ anything at all\nlowercase a record\n\nT 5 %%%% not-even-encoded\n"
                     "A 10 1 7f00 16 device cudaMalloc 0 - 0\nZ 50\n");
    EXPECT_EQ(r.blocks.size(), 1u);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportForwardCompat, ExtraTrailingFieldsAreIgnored) {
    Report r = parse("I pid 7 extra\nM 0 0 ffff 0 - /a newfield\nS 1 10\n"
                     "A 10 1 7f00 16 device cudaMalloc 0 - 1 new 7 fields\nF 20 1 7f00 16 cudaFree - later\n"
                     "A 30 1 7f00 16 device cudaMalloc 0 - 1\nF 31 1 7f00 16 cudaFree -\nR 32 1 7f00 1 more\n"
                     "E 40 1 16 device cudaMalloc 0 - 1 2 0 x y\nH 45 x\nZ 50 y\n");
    EXPECT_EQ(r.info.at("pid"), "7");
    EXPECT_EQ(r.modules.at(0).path, "/a");
    EXPECT_EQ(r.blocks.size(), 2u);
    EXPECT_EQ(r.blocks[0].stack_id, 1u);
    EXPECT_EQ(r.blocks[0].t_free, std::optional<int64_t>(20));
    EXPECT_FALSE(r.blocks[1].t_free.has_value());
    EXPECT_EQ(r.failures.size(), 1u);
    EXPECT_EQ(r.end_t, 50);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportForwardCompat, HigherFormatMinorIsAccepted) {
    Report r = parse("I format_minor 9\nZ 1\n");
    EXPECT_EQ(r.info.at("format_minor"), "9");
    EXPECT_TRUE(r.warnings.empty());
}

// --- incomplete files -------------------------------------------------------------------------------

TEST(ReportIncomplete, NoEndRecordIsAWarningNamingTheLastFlush) {
    Report r = parse("A 1000000 1 7f00 16 device cudaMalloc 0 - 0\nH 1000000000\n"
                     "F 12000000000 1 7f00 16 cudaFree -\nH 12345000000\n");
    EXPECT_FALSE(r.complete);
    EXPECT_EQ(r.end_t, 12345000000);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_EQ(r.warnings[0], "t.mgr: no end record: the process did not exit normally (killed?); "
                             "data up to t=12.345 s (last flush)");
}

TEST(ReportIncomplete, DataAfterTheLastHeartbeatExtendsTheEnd) {
    Report r = parse("H 1000000000\nA 1500000000 1 7f00 16 device cudaMalloc 0 - 0\n");
    EXPECT_EQ(r.end_t, 1500000000);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "data up to t=1.500 s"));
    EXPECT_FALSE(contains(r.warnings[0], "last flush"));
}

TEST(ReportIncomplete, EndTimeIsTheLatestTimeAcrossThreads) {
    Report r = parse("A 900 1 a0 1 device m 0 - 0\nA 700 2 b0 1 device m 0 - 0\n");
    EXPECT_EQ(r.end_t, 900);
}

TEST(ReportIncomplete, TheIncompleteWarningComesFirst) {
    Report r = parse("F 1 1 7f00 16 cudaFree -\n");
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_TRUE(contains(r.warnings[0], "no end record"));
    EXPECT_TRUE(contains(r.warnings[1], "not live"));
}

// --- errors carry one line and the right line number -------------------------------------------

TEST(ReportErrors, LineNumbersCountFromTheHeader) {
    std::string body = "I pid 1\nI exe /x\n\nX future\nA 1 2 zz 16 device cudaMalloc 0 - 0\n";
    EXPECT_TRUE(contains(error_of(kHeader + body), "t.mgr:6: malformed A record: bad address 'zz' (hex expected)"));
}

TEST(ReportErrors, LongBadFieldsAreShortenedInMessages) {
    std::string e = error_of(kHeader + "A " + std::string(500, '9') + " 1 7f 1 device m 0 - 0\n");
    EXPECT_LT(e.size(), 200u);
    EXPECT_TRUE(contains(e, "...'"));
}

TEST(ReportErrors, KindNames) {
    EXPECT_STREQ(kind_name(Kind::Device), "device");
    EXPECT_STREQ(kind_name(Kind::Async), "async");
    EXPECT_STREQ(kind_name(Kind::Managed), "managed");
    EXPECT_STREQ(kind_name(Kind::Pinned), "pinned");
    EXPECT_TRUE(is_gpu(Kind::Device));
    EXPECT_TRUE(is_gpu(Kind::Async));
    EXPECT_TRUE(is_gpu(Kind::Managed));
    EXPECT_FALSE(is_gpu(Kind::Pinned));
}

// --- load_report: files -----------------------------------------------------------------------

TEST(ReportFile, MissingFile) {
    try {
        load_report("/nonexistent-dir/x.mgr");
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_EQ(std::string(e.what()), "/nonexistent-dir/x.mgr: cannot open: No such file or directory");
    }
}

TEST(ReportFile, DirectoryIsUnreadable) {
    test::TempDir dir;
    try {
        load_report(dir.path());
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_TRUE(contains(e.what(), dir.path() + ": cannot read")) << e.what();
    }
}

TEST(ReportFile, EmptyAndTruncatedFiles) {
    test::TempDir dir;
    std::string empty = dir.write("empty.mgr", "");
    EXPECT_THROW(load_report(empty), ReportError);
    std::string content = kHeader + "A 1 2 7f00 16 device cudaMalloc 0 - 0\nF 3 2 7f";
    std::string cut = dir.write("cut.mgr", content);
    try {
        load_report(cut);
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_EQ(std::string(e.what()),
                  cut + ":3: truncated at byte " + std::to_string(content.size()) + " (last record incomplete)");
    }
}

/// A report of `n` allocations and frees whose lines have varying lengths.
std::string big_report(size_t n) {
    std::string s = kHeader + "M 0 0 ffffffff 0 - /opt/lib%20with%20space.so\n";
    for (size_t i = 1; i <= n; ++i) {
        std::string addr = std::to_string(7000000 + i);
        s += "S " + std::to_string(i);
        for (size_t k = 0; k < i % 7; ++k) s += " " + std::to_string(1000 + k);
        s += "\n";
        s += "A " + std::to_string(i * 10) + " 1 " + addr + " " + std::to_string(i) + " device cudaMalloc 0 - " +
             std::to_string(i) + "\n";
        if (i % 3 == 0) {
            s += "F " + std::to_string(i * 10 + 5) + " 1 " + addr + " " + std::to_string(i) + " cudaFree -\n";
        }
    }
    return s + "Z " + std::to_string(n * 10 + 100) + "\n";
}

TEST(ReportFile, FileAndMemoryGiveTheSameReportAcrossReadChunks) {
    std::string content = big_report(40000);
    ASSERT_GT(content.size(), 2u << 20);  // spans several 1 MiB read chunks
    test::TempDir dir;
    std::string path = dir.write("big.mgr", content);
    Report from_file = load_report(path);
    Report from_memory = parse_report(content, path);
    ASSERT_EQ(from_file.blocks.size(), 40000u);
    ASSERT_EQ(from_file.blocks.size(), from_memory.blocks.size());
    ASSERT_EQ(from_file.events.size(), from_memory.events.size());
    for (size_t i = 0; i < from_file.blocks.size(); ++i) {
        ASSERT_EQ(from_file.blocks[i].addr, from_memory.blocks[i].addr) << i;
        ASSERT_EQ(from_file.blocks[i].size, i + 1);
        ASSERT_EQ(from_file.blocks[i].t_free.has_value(), (i + 1) % 3 == 0) << i;
    }
    EXPECT_EQ(from_file.stacks.size(), 40000u);
    EXPECT_EQ(from_file.modules.at(0).path, "/opt/lib with space.so");
    EXPECT_EQ(from_file.warnings, from_memory.warnings);
    EXPECT_TRUE(from_file.complete);
}

TEST(ReportFile, OverlongLineIsAnError) {
    test::TempDir dir;
    std::string content = kHeader + "I pid 1\nX " + std::string((16u << 20) + 10, 'a') + "\nZ 1\n";
    std::string path = dir.write("long.mgr", content);
    try {
        load_report(path);
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_EQ(std::string(e.what()), path + ":3: line longer than 16 MiB (corrupt file?)");
    }
}

TEST(ReportFile, OverlongFirstLineIsABadMagic) {
    test::TempDir dir;
    std::string path = dir.write("blob.bin", std::string((17u << 20), '\x01'));
    try {
        load_report(path);
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_TRUE(contains(e.what(), path + ":1: not a memguard report")) << e.what();
    }
}

}  // namespace
}  // namespace memguard::report
