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
    std::string e = error_of(std::string("\x7f"
                                         "ELF\x02\x01\x01\0\0\0\n",
                                         11));
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

// A full disk cuts the file inside a record: the records before it are the run, as a killed run's
// are without their end record.
TEST(ReportHeader, ACutLastRecordIsLeftOutWithAWarning) {
    std::string content = kHeader + "I pid 1\nA 1 2 7f00 16 device cudaMalloc 0 - 0\nA 2 2 8f00 32 device cudaMal";
    Report r = parse_report(content, "t.mgr");
    ASSERT_EQ(r.blocks.size(), 1u);
    EXPECT_EQ(r.blocks[0].size, 16u);
    EXPECT_FALSE(r.complete);
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_EQ(r.warnings[0], "t.mgr:4: truncated at byte " + std::to_string(content.size()) +
                                 " (last record incomplete: disk full?); read up to line 3, the last complete record");
    EXPECT_TRUE(contains(r.warnings[1], "t.mgr: no end record")) << r.warnings[1];
    // Even a last line that happens to be a whole record is not read without its '\n': its last
    // field may be cut ("Z 5" of "Z 5000").
    Report z = parse(std::string("A 1 2 7f00 16 device cudaMalloc 0 - 0\nZ 5"));
    EXPECT_FALSE(z.complete);
    EXPECT_EQ(z.end_t, 1);
    EXPECT_TRUE(contains(z.warnings.at(0), "t.mgr:3: truncated at byte 59")) << z.warnings.at(0);
    // The first record cut: a report with nothing in it but the header, still a report.
    Report first = parse("A 1 2 7f");
    EXPECT_TRUE(first.blocks.empty());
    EXPECT_TRUE(contains(first.warnings.at(0), "t.mgr:2: truncated at byte 26")) << first.warnings.at(0);
}

TEST(ReportHeader, ACutHeaderIsRefused) {
    EXPECT_EQ(error_of("MEMGUARD-REPORT 1"), "t.mgr:1: truncated at byte 17 (the header line is incomplete)");
    EXPECT_EQ(error_of("MEMGUARD-REP"), "t.mgr:1: not a memguard report: first line is 'MEMGUARD-REP', expected "
                                        "'MEMGUARD-REPORT 1'");
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
    EXPECT_EQ(r.warnings[0], "t.mgr:2: A record uses stack 9, which no earlier S record defines (and 2 more like it)");
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

// --- format minor 1: captures, graphs, hazards ----------------------------------------------------

const std::string kMinor1 = "I format_minor 1\n";
const std::string kMinor2 = "I format_minor 2\n";

TEST(ReportMinor, FormatMinorIsReadAndBadValuesAreMalformed) {
    EXPECT_EQ(parse("Z 1\n").format_minor, 0);
    EXPECT_EQ(parse(kMinor2 + "Z 1\n").format_minor, 2);
    EXPECT_EQ(parse("I format_minor 9\nZ 1\n").format_minor, 9);
    EXPECT_TRUE(contains(error_of(kHeader + "I format_minor two\n"), "t.mgr:2: malformed I record: bad format_minor"));
    EXPECT_TRUE(contains(error_of(kHeader + "I format_minor -1\n"), "bad format_minor '-1'"));
}

TEST(ReportMinor, OlderMinorsReadCaptureAndPythonIdsAsZero) {
    // Minor 0: A has 9 fields and E 10; what follows is ignored, and minor 1/2 records are unknown.
    Report r0 = parse("A 10 1 7f00 16 device cudaMalloc 0 - 0 3 4\nE 11 1 16 device cudaMalloc 0 - 0 2 0 5\n"
                      "C 12 1 1 7fab relaxed -\nX 13 1 0/0\nY oops\nZ 20\n");
    EXPECT_EQ(r0.blocks.at(0).capture_id, 0u);
    EXPECT_EQ(r0.blocks.at(0).python_stack_id, 0u);
    EXPECT_EQ(r0.failures.at(0).python_stack_id, 0u);
    EXPECT_TRUE(r0.captures.empty());
    EXPECT_TRUE(r0.compiles.empty());
    EXPECT_TRUE(r0.warnings.empty());
    // Minor 1: A's capture id is read, its Python stack id is not; p, P, X, Y are unknown.
    Report r1 = parse(kMinor1 + "C 5 1 1 7fab relaxed -\nA 10 1 7f00 16 device cudaMalloc 0 - 0 1 4\n"
                                "E 11 1 16 device cudaMalloc 0 - 0 2 0 5\np 0 bad\nY oops\nZ 20\n");
    EXPECT_EQ(r1.blocks.at(0).capture_id, 1u);
    EXPECT_EQ(r1.blocks.at(0).python_stack_id, 0u);
    EXPECT_EQ(r1.failures.at(0).python_stack_id, 0u);
    EXPECT_TRUE(r1.python_frames.empty());
    EXPECT_TRUE(r1.collections.empty());
    EXPECT_TRUE(r1.warnings.empty());
    // Minor 2: both; fields past them are still ignored.
    Report r2 = parse(kMinor2 + "C 5 1 1 7fab relaxed -\np 1 3 f /a.py\nP 4 1\n"
                                "A 10 1 7f00 16 device cudaMalloc 0 - 0 1 4 future\n"
                                "E 11 1 16 device cudaMalloc 0 - 0 2 0 4 future\nZ 20\n");
    EXPECT_EQ(r2.blocks.at(0).capture_id, 1u);
    EXPECT_EQ(r2.blocks.at(0).python_stack_id, 4u);
    EXPECT_EQ(r2.failures.at(0).python_stack_id, 4u);
    EXPECT_TRUE(r2.warnings.empty());
}

TEST(ReportMinor, TheMinorAppliesFromItsRecordOn) {
    Report r = parse("A 10 1 a0 16 device m 0 - 0\n" + kMinor1 +
                     "C 11 1 1 7fab relaxed -\n"
                     "A 12 1 b0 16 device m 0 - 0 1\nZ 20\n");
    EXPECT_EQ(r.blocks.at(0).capture_id, 0u);
    EXPECT_EQ(r.blocks.at(1).capture_id, 1u);
}

TEST(ReportMinor, MissingNewFieldsAreMalformed) {
    EXPECT_EQ(error_of(kHeader + kMinor1 + "A 1 2 7f00 16 device cudaMalloc 0 - 0\n"),
              "t.mgr:3: malformed A record: 10 fields expected, 9 found");
    EXPECT_EQ(error_of(kHeader + kMinor2 + "A 1 2 7f00 16 device cudaMalloc 0 - 0 0\n"),
              "t.mgr:3: malformed A record: 11 fields expected, 10 found");
    EXPECT_EQ(error_of(kHeader + kMinor2 + "E 1 2 16 device cudaMalloc 0 - 0 2 0\n"),
              "t.mgr:3: malformed E record: 11 fields expected, 10 found");
    EXPECT_TRUE(contains(error_of(kHeader + kMinor1 + "A 1 2 7f00 16 device m 0 - 0 x\n"), "bad capture id 'x'"));
    EXPECT_TRUE(
        contains(error_of(kHeader + kMinor2 + "A 1 2 7f00 16 device m 0 - 0 0 -1\n"), "bad Python stack id '-1'"));
    EXPECT_TRUE(contains(error_of(kHeader + kMinor2 + "E 1 2 16 device m 0 - 0 2 0 py\n"), "bad Python stack id"));
}

TEST(ReportCaptures, BeginAndEndFields) {
    Report r = parse(kMinor1 + "C 100 7 1 7fab0000 relaxed -\nC 200 8 2 7fac0000 thread_local 5600ff\n"
                               "C 300 7 3 7fad0000 global -\n"
                               "c 400 9 1 0 5600aa\nc 500 8 2 901 -\nZ 600\n");
    ASSERT_EQ(r.captures.size(), 3u);
    const Capture& c = r.captures[0];
    EXPECT_EQ(c.id, 1u);
    EXPECT_EQ(c.t_begin, 100);
    EXPECT_EQ(c.tid, 7u);
    EXPECT_EQ(c.stream, 0x7fab0000u);
    EXPECT_EQ(c.mode, CaptureMode::Relaxed);
    EXPECT_FALSE(c.target_graph.has_value());
    EXPECT_EQ(c.t_end, std::optional<int64_t>(400));
    EXPECT_EQ(c.end_tid, 9u);
    EXPECT_EQ(c.end_error, 0);
    EXPECT_EQ(c.graph, std::optional<uint64_t>(0x5600aa));
    EXPECT_FALSE(c.t_graph_destroy.has_value());
    EXPECT_EQ(r.captures[1].mode, CaptureMode::ThreadLocal);
    EXPECT_EQ(r.captures[1].target_graph, std::optional<uint64_t>(0x5600ff));
    EXPECT_EQ(r.captures[1].end_error, 901);
    EXPECT_FALSE(r.captures[1].graph.has_value());
    EXPECT_EQ(r.captures[2].mode, CaptureMode::Global);
    EXPECT_FALSE(r.captures[2].t_end.has_value());  // still capturing when the report ends
    EXPECT_EQ(r.find_capture(2), &r.captures[1]);
    EXPECT_EQ(r.find_capture(4), nullptr);
    EXPECT_EQ(r.find_capture(0), nullptr);
    EXPECT_STREQ(capture_mode_name(CaptureMode::ThreadLocal), "thread_local");
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportCaptures, FindCaptureWithIdsOutOfOrder) {
    Report r = parse(kMinor1 + "C 1 1 5 7fab global -\nC 2 1 1 7fac global -\nZ 3\n");
    EXPECT_EQ(r.find_capture(1), &r.captures[1]);
    EXPECT_EQ(r.find_capture(5), &r.captures[0]);
}

TEST(ReportCaptures, MalformedCaptureRecords) {
    const std::string h = kHeader + kMinor1;
    EXPECT_EQ(error_of(h + "C 1 2 1 7fab relaxed\n"), "t.mgr:3: malformed C record: 6 fields expected, 5 found");
    EXPECT_TRUE(contains(error_of(h + "C 1 2 0 7fab relaxed -\n"), "malformed C record: capture id 0 is reserved"));
    EXPECT_TRUE(contains(error_of(h + "C 1 2 1 - relaxed -\n"), "bad stream '-' (hex expected)"));
    EXPECT_TRUE(contains(error_of(h + "C 1 2 1 7fab Relaxed -\n"), "unknown capture mode 'Relaxed'"));
    EXPECT_TRUE(contains(error_of(h + "C 1 2 1 7fab relaxed g\n"), "bad graph 'g'"));
    EXPECT_TRUE(contains(error_of(h + "c 1 2 1 0\n"), "malformed c record: 5 fields expected, 4 found"));
    EXPECT_TRUE(contains(error_of(h + "c 1 2 1 e -\n"), "malformed c record: bad error 'e'"));
    EXPECT_TRUE(contains(error_of(h + "c t 2 1 0 -\n"), "malformed c record: bad time 't'"));
    EXPECT_TRUE(contains(error_of(h + "G 1 2 aa bb\n"), "malformed G record: 5 fields expected, 4 found"));
    EXPECT_TRUE(contains(error_of(h + "G 1 2 aa - 0\n"), "malformed G record: bad graph '-'"));
    EXPECT_TRUE(contains(error_of(h + "G 1 2 aa bb -\n"), "malformed G record: bad capture id '-'"));
    EXPECT_TRUE(contains(error_of(h + "L 1 2 aa\n"), "malformed L record: 4 fields expected, 3 found"));
    EXPECT_TRUE(contains(error_of(h + "L 1 2 zz 7fab\n"), "malformed L record: bad exec 'zz'"));
    EXPECT_TRUE(contains(error_of(h + "D 1 2\n"), "malformed D record: 3 fields expected, 2 found"));
    EXPECT_TRUE(contains(error_of(h + "K 1 2 -\n"), "malformed K record: bad graph '-'"));
}

TEST(ReportCaptures, DuplicatesAndUnknownCapturesAreWarnings) {
    Report r = parse(kMinor1 + "C 1 1 1 7fab global -\nC 2 1 1 7fac relaxed -\nc 3 1 2 0 -\nc 4 1 1 0 aa\n"
                               "c 5 1 1 0 bb\nA 6 1 7f00 16 device m 0 - 0 9\nG 7 1 e0 aa 8\nZ 9\n");
    ASSERT_EQ(r.captures.size(), 1u);
    EXPECT_EQ(r.captures[0].stream, 0x7fabu);                       // the first C record wins
    EXPECT_EQ(r.captures[0].graph, std::optional<uint64_t>(0xaa));  // and the first c record
    EXPECT_EQ(r.blocks[0].capture_id, 9u);                          // kept as recorded
    ASSERT_EQ(r.warnings.size(), 3u);
    EXPECT_EQ(r.warnings[0], "t.mgr:4: capture 1 begun twice; the second C record is ignored");
    EXPECT_EQ(r.warnings[1], "t.mgr:5: c record names capture 2, which no earlier C record began (and 2 more like it)");
    EXPECT_EQ(r.warnings[2], "t.mgr:7: capture 1 ended twice; the second c record is ignored");
}

TEST(ReportGraphs, ExecsLaunchesAndDestroys) {
    Report r = parse(kMinor1 + "C 1 1 1 7fab relaxed -\nc 2 1 1 0 aa\nG 3 1 e0 aa 1\n"
                               "L 4 1 e0 7fab\nL 5 2 e0 7fac\nL 6 1 e0 7fab\nD 7 1 e0\nK 8 1 aa\nZ 9\n");
    ASSERT_EQ(r.execs.size(), 1u);
    const GraphExec& e = r.execs[0];
    EXPECT_EQ(e.exec, 0xe0u);
    EXPECT_EQ(e.graph, 0xaau);
    EXPECT_EQ(e.capture_id, 1u);
    EXPECT_EQ(e.tid, 1u);
    EXPECT_EQ(e.t_instantiate, 3);
    EXPECT_EQ(e.launches, 3u);
    EXPECT_EQ(e.t_destroy, std::optional<int64_t>(7));
    EXPECT_EQ(r.captures[0].t_graph_destroy, std::optional<int64_t>(8));
    ASSERT_EQ(r.graph_destroys.size(), 1u);
    EXPECT_EQ(r.graph_destroys[0].capture_id, 1u);
    EXPECT_EQ(r.graph_destroys[0].t, 8);
    EXPECT_TRUE(r.warnings.empty());
}

// An exec handle destroyed and handed out again: L and D refer to the most recent G of the handle.
TEST(ReportGraphs, ExecHandleReuse) {
    Report r = parse(kMinor1 + "C 1 1 1 7fab relaxed -\nc 2 1 1 0 aa\nC 3 1 2 7fab relaxed -\nc 4 1 2 0 bb\n"
                               "G 5 1 e0 aa 1\nL 6 1 e0 7fab\nL 7 1 e0 7fab\nD 8 1 e0\n"
                               "G 9 1 e0 bb 2\nL 10 1 e0 7fab\nZ 11\n");
    ASSERT_EQ(r.execs.size(), 2u);
    EXPECT_EQ(r.execs[0].launches, 2u);
    EXPECT_EQ(r.execs[0].t_destroy, std::optional<int64_t>(8));
    EXPECT_EQ(r.execs[0].capture_id, 1u);
    EXPECT_EQ(r.execs[1].launches, 1u);
    EXPECT_FALSE(r.execs[1].t_destroy.has_value());
    EXPECT_EQ(r.execs[1].capture_id, 2u);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportGraphs, GraphHandleReuseAndGraphsFromNoCapture) {
    // Graph aa ends capture 1, is destroyed, then ends capture 2; the second K belongs to capture 2.
    // K of a graph memguard never saw captured (built by hand) is normal: no warning.
    Report r = parse(kMinor1 + "C 1 1 1 7fab relaxed -\nc 2 1 1 0 aa\nK 3 1 aa\nC 4 1 2 7fab relaxed -\n"
                               "c 5 1 2 0 aa\nK 6 1 ff\nK 7 1 aa\nZ 8\n");
    EXPECT_EQ(r.captures[0].t_graph_destroy, std::optional<int64_t>(3));
    EXPECT_EQ(r.captures[1].t_graph_destroy, std::optional<int64_t>(7));
    ASSERT_EQ(r.graph_destroys.size(), 3u);
    EXPECT_EQ(r.graph_destroys[1].capture_id, 0u);
    EXPECT_EQ(r.graph_destroys[2].capture_id, 2u);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportGraphs, UnknownAndDestroyedExecsAreWarnings) {
    Report r = parse(kMinor1 + "L 1 1 e0 7fab\nG 2 1 e1 aa 0\nD 3 1 e1\nL 4 1 e1 7fab\nD 5 1 e1\nD 6 1 e2\nZ 9\n");
    ASSERT_EQ(r.execs.size(), 1u);
    EXPECT_EQ(r.execs[0].launches, 0u);
    EXPECT_EQ(r.execs[0].t_destroy, std::optional<int64_t>(3));
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_EQ(r.warnings[0], "t.mgr:3: L record names graph exec e0, which no earlier G record instantiated; "
                             "ignored (and 1 more like it)");
    EXPECT_EQ(r.warnings[1], "t.mgr:6: L record names graph exec e1, which was destroyed (D) and not instantiated "
                             "again; ignored (and 1 more like it)");
}

TEST(ReportGraphs, InstantiatingALiveExecHandleEndsTheEarlierExec) {
    Report r = parse(kMinor1 + "G 1 1 e0 aa 0\nG 2 1 e0 bb 0\nL 3 1 e0 7fab\nZ 9\n");
    ASSERT_EQ(r.execs.size(), 2u);
    EXPECT_EQ(r.execs[0].t_destroy, std::optional<int64_t>(2));
    EXPECT_EQ(r.execs[1].launches, 1u);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr:4: graph exec e0 instantiated while already alive"));
}

TEST(ReportHazards, AllThreeKinds) {
    Report r = parse(kMinor1 +
                     "M 0 0 ffff 0 - /a\nS 4 10\nC 1 7 1 7fab global -\n"
                     "W 2 8 unsafe_call cudaMalloc 1 global thread_local\n"
                     "A 3 7 b0 64 device cudaMalloc 0 - 4 1\nc 4 7 1 0 aa\nG 5 7 e0 aa 1\n"
                     "F 6 7 b0 64 cudaFree -\nW 6 7 free_live_graph b0 64 1 e0\n"
                     "W 7 7 warmup_retention 1 end 5 4 2 4096\nW 8 7 warmup_retention 1 begin 0 0 1 1\nZ 9\n");
    ASSERT_EQ(r.hazards.unsafe_calls.size(), 1u);
    const UnsafeCall& u = r.hazards.unsafe_calls[0];
    EXPECT_EQ(u.t, 2);
    EXPECT_EQ(u.tid, 8u);
    EXPECT_EQ(u.api, "cudaMalloc");
    EXPECT_EQ(u.capture_id, 1u);
    EXPECT_EQ(u.capture_mode, CaptureMode::Global);
    EXPECT_EQ(u.thread_mode, CaptureMode::ThreadLocal);
    ASSERT_EQ(r.hazards.frees_while_graph_alive.size(), 1u);
    const FreeWhileGraphAlive& h = r.hazards.frees_while_graph_alive[0];
    EXPECT_EQ(h.t, 6);
    EXPECT_EQ(h.addr, 0xb0u);
    EXPECT_EQ(h.size, 64u);
    EXPECT_EQ(h.capture_id, 1u);
    EXPECT_EQ(h.exec, 0xe0u);
    EXPECT_EQ(h.block, std::optional<size_t>(0));
    EXPECT_EQ(h.exec_index, std::optional<size_t>(0));
    ASSERT_EQ(r.hazards.warmup_retention.size(), 2u);
    const WarmupRetention& w = r.hazards.warmup_retention[0];
    EXPECT_EQ(w.t, 7);
    EXPECT_EQ(w.capture_id, 1u);
    EXPECT_EQ(w.phase, CapturePhase::End);
    EXPECT_EQ(w.since, 5);
    EXPECT_EQ(w.stack_id, 4u);
    EXPECT_EQ(w.blocks, 2u);
    EXPECT_EQ(w.bytes, 4096u);
    EXPECT_EQ(r.hazards.warmup_retention[1].phase, CapturePhase::Begin);
    EXPECT_STREQ(capture_phase_name(CapturePhase::End), "end");
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportHazards, FreeHazardFindsTheBlockOfItsCapture) {
    // Written before the F (the block still live), or after another thread reallocated the address.
    Report before = parse(kMinor1 + "C 1 1 1 7fab relaxed -\nA 2 1 b0 64 device m 0 - 0 1\n"
                                    "W 3 1 free_live_graph b0 64 1 e0\nF 3 1 b0 64 cudaFree -\nZ 9\n");
    EXPECT_EQ(before.hazards.frees_while_graph_alive.at(0).block, std::optional<size_t>(0));
    Report realloc = parse(kMinor1 + "C 1 1 1 7fab relaxed -\nA 2 1 b0 64 device m 0 - 0 1\n"
                                     "F 3 1 b0 64 cudaFree -\nA 3 2 b0 32 device m 0 - 0 0\n"
                                     "W 3 1 free_live_graph b0 64 1 e0\nZ 9\n");
    EXPECT_EQ(realloc.hazards.frees_while_graph_alive.at(0).block, std::optional<size_t>(1));  // the only candidate
    Report unknown = parse(kMinor1 + "C 1 1 1 7fab relaxed -\nW 3 1 free_live_graph b0 64 1 e0\nZ 9\n");
    EXPECT_FALSE(unknown.hazards.frees_while_graph_alive.at(0).block.has_value());
    ASSERT_EQ(unknown.warnings.size(), 2u);
    EXPECT_TRUE(contains(unknown.warnings[0], "free_live_graph hazard at b0, which is neither live nor freed"));
    EXPECT_TRUE(contains(unknown.warnings[1], "W free_live_graph record names graph exec e0"));
}

TEST(ReportHazards, MalformedAndUnknownKinds) {
    const std::string h = kHeader + kMinor1;
    EXPECT_TRUE(contains(error_of(h + "W 1 2\n"), "malformed W record: 3 fields expected, 2 found"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 unsafe_call cudaMalloc 1 global\n"),
                         "malformed W record: 7 fields expected, 6 found"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 unsafe_call cudaMalloc 1 global local\n"), "unknown thread mode 'local'"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 unsafe_call cudaMalloc 0 global global\n"), "capture id 0 is reserved"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 free_live_graph b0 64 1\n"), "7 fields expected, 6 found"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 free_live_graph b0 sixty 1 e0\n"), "bad size 'sixty'"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 warmup_retention 1 middle 0 1 1 1\n"), "unknown phase 'middle'"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 warmup_retention 1 begin 0 1 1\n"), "9 fields expected, 8 found"));
    EXPECT_TRUE(contains(error_of(h + "W 1 2 warmup_retention 1 begin x 1 1 1\n"), "bad since 'x'"));
    // A hazard kind of a later minor is ignored, whatever its fields.
    Report r = parse(kMinor1 + "W 1 2 some_new_kind\nW 1 2 other a b c d e f g\nZ 3\n");
    EXPECT_TRUE(r.hazards.unsafe_calls.empty());
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportHazards, UnknownCapturesAndStacksInHazardsAreWarnings) {
    Report r = parse(kMinor1 + "W 1 2 unsafe_call cudaFree 3 global global\n"
                               "W 1 2 warmup_retention 4 begin 0 9 1 1\nZ 3\n");
    EXPECT_EQ(r.hazards.unsafe_calls.size(), 1u);
    EXPECT_EQ(r.hazards.warmup_retention.size(), 1u);
    ASSERT_EQ(r.warnings.size(), 2u);
    EXPECT_EQ(r.warnings[0], "t.mgr:3: W unsafe_call record names capture 3, which no earlier C record began "
                             "(and 1 more like it)");
    EXPECT_EQ(r.warnings[1], "t.mgr:4: W warmup_retention record uses stack 9, which no earlier S record defines");
}

// --- format minor 2: Python ------------------------------------------------------------------------

TEST(ReportPython, FramesAndStacks) {
    Report r = parse(kMinor2 + "p 1 42 forward /opt/app/model%20v2.py\np 2 -1 %3Clambda%3E ?\np 3 0 % %\n"
                               "P 1 1 2\nP 2 2\nP 3\n"
                               "A 10 1 7f00 16 device cudaMalloc 0 - 0 0 1\nZ 20\n");
    ASSERT_EQ(r.python_frames.size(), 3u);
    const PythonFrame& f = r.python_frames.at(1);
    EXPECT_EQ(f.id, 1u);
    EXPECT_EQ(f.line, 42);
    EXPECT_EQ(f.function, "forward");
    EXPECT_EQ(f.filename, "/opt/app/model v2.py");
    EXPECT_EQ(r.python_frames.at(2).line, -1);
    EXPECT_EQ(r.python_frames.at(2).function, "<lambda>");
    EXPECT_EQ(r.python_frames.at(3).function, "");
    EXPECT_EQ(r.python_stacks.at(1).frames, (std::vector<uint32_t>{1, 2}));
    EXPECT_EQ(r.python_stacks.at(2).id, 2u);
    EXPECT_TRUE(r.python_stacks.at(3).frames.empty());
    EXPECT_EQ(r.blocks[0].python_stack_id, 1u);
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportPython, MalformedAndUnknownFramesAndStacks) {
    const std::string h = kHeader + kMinor2;
    EXPECT_TRUE(contains(error_of(h + "p 1 2 f\n"), "malformed p record: 4 fields expected, 3 found"));
    EXPECT_TRUE(contains(error_of(h + "p 0 2 f /a\n"), "malformed p record: Python frame id 0 is not allowed"));
    EXPECT_TRUE(contains(error_of(h + "p 1 x f /a\n"), "bad line 'x'"));
    EXPECT_TRUE(contains(error_of(h + "p 1 2 f%2 /a\n"), "bad function 'f%2'"));
    EXPECT_TRUE(contains(error_of(h + "P\n"), "malformed P record: 1 fields expected, 0 found"));
    EXPECT_TRUE(contains(error_of(h + "P 0 1\n"), "Python stack id 0 is reserved"));
    EXPECT_TRUE(contains(error_of(h + "P 1 a\n"), "malformed P record: bad frame id 'a'"));
    Report r = parse(kMinor2 + "p 1 2 f /a\np 1 3 g /b\nP 1 1 5\nP 1 1\n"
                               "A 10 1 7f00 16 device cudaMalloc 0 - 0 0 7\nE 11 1 16 device m 0 - 0 2 0 8\nZ 20\n");
    EXPECT_EQ(r.python_frames.at(1).function, "f");
    EXPECT_EQ(r.python_stacks.at(1).frames, (std::vector<uint32_t>{1, 5}));
    ASSERT_EQ(r.warnings.size(), 4u);
    EXPECT_EQ(r.warnings[0], "t.mgr:4: Python frame 1 defined twice; the second p record is ignored");
    EXPECT_EQ(r.warnings[1], "t.mgr:5: P record uses Python frame 5, which no earlier p record defines");
    EXPECT_EQ(r.warnings[2], "t.mgr:6: Python stack 1 defined twice; the second P record is ignored");
    EXPECT_EQ(r.warnings[3], "t.mgr:7: A record uses Python stack 7, which no earlier P record defines "
                             "(and 1 more like it)");
}

TEST(ReportPython, CompilesAndCollections) {
    Report r = parse(kMinor2 + "X 100 7 0/0\nX 110 8 ?\nX 120 7 %5B0/1%5D\n"
                               "Y 200 7 automatic 0 1500 12 0 - - -\n"
                               "Y 300 7 explicit 2 2500 40 1 -4096 - -\n"
                               "Y 400 7 memguard 2 9000 100 3 1048576 0/0,0/1 250\n"
                               "Y 500 8 memguard 1 10 0 0 0 ? 0\nZ 600\n");
    ASSERT_EQ(r.compiles.size(), 3u);
    EXPECT_EQ(r.compiles[0].t, 100);
    EXPECT_EQ(r.compiles[0].tid, 7u);
    EXPECT_EQ(r.compiles[0].id, "0/0");
    EXPECT_EQ(r.compiles[1].id, "?");
    EXPECT_EQ(r.compiles[2].id, "[0/1]");
    ASSERT_EQ(r.collections.size(), 4u);
    const Collection& a = r.collections[0];
    EXPECT_EQ(a.t, 200);
    EXPECT_EQ(a.tid, 7u);
    EXPECT_EQ(a.trigger, GcTrigger::Automatic);
    EXPECT_EQ(a.generation, 0);
    EXPECT_EQ(a.duration_ns, 1500);
    EXPECT_EQ(a.collected, 12);
    EXPECT_EQ(a.uncollectable, 0);
    EXPECT_FALSE(a.cuda_bytes_freed.has_value());
    EXPECT_TRUE(a.compile_ids.empty());
    EXPECT_FALSE(a.mark_age_ns.has_value());
    EXPECT_EQ(r.collections[1].trigger, GcTrigger::Explicit);
    EXPECT_EQ(r.collections[1].cuda_bytes_freed, std::optional<int64_t>(-4096));  // the counter may grow
    const Collection& m = r.collections[2];
    EXPECT_EQ(m.trigger, GcTrigger::Memguard);
    EXPECT_EQ(m.cuda_bytes_freed, std::optional<int64_t>(1048576));
    EXPECT_EQ(m.compile_ids, (std::vector<std::string>{"0/0", "0/1"}));
    EXPECT_EQ(m.mark_age_ns, std::optional<int64_t>(250));
    EXPECT_EQ(r.collections[3].compile_ids, std::vector<std::string>{"?"});
    EXPECT_EQ(r.collections[3].mark_age_ns, std::optional<int64_t>(0));
    EXPECT_STREQ(trigger_name(GcTrigger::Memguard), "memguard");
    EXPECT_TRUE(r.warnings.empty());
}

TEST(ReportPython, MalformedCompilesAndCollections) {
    const std::string h = kHeader + kMinor2;
    EXPECT_TRUE(contains(error_of(h + "X 1 2\n"), "malformed X record: 3 fields expected, 2 found"));
    EXPECT_TRUE(contains(error_of(h + "X 1 2 \n"), "bad compile id ''"));
    EXPECT_TRUE(
        contains(error_of(h + "Y 1 2 automatic 0 1 1 0 - -\n"), "malformed Y record: 10 fields expected, 9 found"));
    EXPECT_TRUE(contains(error_of(h + "Y 1 2 manual 0 1 1 0 - - -\n"), "malformed Y record: unknown trigger 'manual'"));
    EXPECT_TRUE(contains(error_of(h + "Y 1 2 automatic g 1 1 0 - - -\n"), "bad generation 'g'"));
    EXPECT_TRUE(contains(error_of(h + "Y 1 2 automatic 0 - 1 0 - - -\n"), "bad duration '-'"));
    EXPECT_TRUE(contains(error_of(h + "Y 1 2 automatic 0 1 1 0 x - -\n"), "bad CUDA bytes freed 'x'"));
    EXPECT_TRUE(contains(error_of(h + "Y 1 2 memguard 0 1 1 0 0 0/0%zz 1\n"), "bad compile ids"));
    EXPECT_TRUE(contains(error_of(h + "Y 1 2 memguard 0 1 1 0 0 0/0 soon\n"), "bad mark age 'soon'"));
}

TEST(ReportPython, TimesOfNewRecordsExtendAnIncompleteReport) {
    Report r = parse(kMinor2 + "A 10 1 a0 1 device m 0 - 0 0 0\nY 900 1 automatic 0 1 1 0 - - -\n");
    EXPECT_EQ(r.end_t, 900);
    Report g = parse(kMinor1 + "G 700 1 e0 aa 0\n");
    EXPECT_EQ(g.end_t, 700);
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

// --- bounds (docs/report-format.md, "Bounds") -------------------------------------------------

// A device ordinal sizes the memory_viz snapshot (one trace per device) and names a device in every
// view: one far beyond any machine is a corrupt or hostile file, refused naming the line and field.
TEST(ReportBounds, DeviceOrdinalsOutsideMinusOneToTheBoundAreRefused) {
    const std::string max = std::to_string(kMaxDevice), over = std::to_string(kMaxDevice + 1);
    Report ok = parse("I format_minor 5\nA 1 1 7f00 16 pinned cudaMallocHost -1 - 0 0 0\n"
                      "A 2 1 8f00 16 device cudaMalloc " +
                      max + " - 0 0 0\nZ 3\n");
    EXPECT_EQ(ok.blocks.at(0).device, -1);
    EXPECT_EQ(ok.blocks.at(1).device, kMaxDevice);
    for (const std::string& device :
         {over, std::string("268435456"), std::string("2147483647"), std::string("-2"), std::string("-2147483648")}) {
        EXPECT_EQ(error_of(kHeader + "A 1 1 7f00 16 device cudaMalloc " + device + " - 0\n"),
                  "t.mgr:2: malformed A record: device '" + device + "' out of range (-1 to 1023)");
    }
    const std::string m5 = kHeader + "I format_minor 5\n";
    EXPECT_EQ(error_of(kHeader + "E 1 1 16 device cudaMalloc " + over + " - 0 2 0\n"),
              "t.mgr:2: malformed E record: device '1024' out of range (-1 to 1023)");
    EXPECT_EQ(error_of(m5 + "N 1 1 a 4096 " + over + " 0 0 0\n"),
              "t.mgr:3: malformed N record: device '1024' out of range (-1 to 1023)");
    EXPECT_EQ(error_of(m5 + "T 1 1 7f00 512 512 " + over + " 0 0 0 0 -\n"),
              "t.mgr:3: malformed T record: device '1024' out of range (-1 to 1023)");
    EXPECT_EQ(error_of(m5 + "O 1 1 -5 512 512 0 0 0 0 0 none\n"),
              "t.mgr:3: malformed O record: device '-5' out of range (-1 to 1023)");
}

// Times and durations are differenced (phase durations, slices of the Perfetto trace) and added to
// the wall-clock origin: within +-(2^62 - 1) ns none of those can overflow.
TEST(ReportBounds, TimesAndDurationsBeyond2To62NanosecondsAreRefused) {
    const std::string max = std::to_string(kMaxTimeNs), over = std::to_string(kMaxTimeNs + 1);
    EXPECT_EQ(max, "4611686018427387903");
    Report ok = parse("A -" + max + " 1 7f00 16 device cudaMalloc 0 - 0\nZ " + max + "\n");
    EXPECT_EQ(ok.blocks.at(0).t_alloc, -kMaxTimeNs);
    EXPECT_EQ(ok.end_t, kMaxTimeNs);
    const std::string range = "' out of range (2^62 ns or more either way)";
    EXPECT_EQ(error_of(kHeader + "Z " + over + "\n"), "t.mgr:2: malformed Z record: time '" + over + range);
    EXPECT_EQ(error_of(kHeader + "A -" + over + " 1 7f00 16 device cudaMalloc 0 - 0\n"),
              "t.mgr:2: malformed A record: time '-" + over + range);
    EXPECT_EQ(error_of(kHeader + "H 9223372036854775807\n"),
              "t.mgr:2: malformed H record: time '9223372036854775807" + range);
    const std::string m2 = kHeader + "I format_minor 2\n";
    EXPECT_EQ(error_of(m2 + "Y 5 1 automatic 0 " + over + " 0 0 - - -\n"),
              "t.mgr:3: malformed Y record: duration '" + over + range);
    EXPECT_EQ(error_of(m2 + "Y 5 1 memguard 0 1 0 0 - 0/0 -" + over + "\n"),
              "t.mgr:3: malformed Y record: mark age '-" + over + range);
    EXPECT_EQ(error_of(kHeader + "I format_minor 1\nW 5 1 warmup_retention 1 begin " + over + " 0 1 16\n"),
              "t.mgr:3: malformed W record: since '" + over + range);
    EXPECT_EQ(error_of(kHeader + "I format_minor 6\nU 5 -" + over + " 3\n"),
              "t.mgr:3: malformed U record: time of the first lost record '-" + over + range);
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

// Opening does not block: a FIFO nobody writes to (planted where a glob looks) reads as an empty
// file at once. Run in a child, so that a regression fails on the alarm instead of hanging.
TEST(ReportFile, AFifoWithoutAWriterIsAnEmptyFileNotAHang) {
    test::TempDir dir;
    std::string fifo = dir.path() + "/fifo.mgr";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        alarm(10);
        try {
            load_report(fifo);
        } catch (const ReportError& e) {
            _exit(std::string(e.what()) == fifo + ": empty file (not a memguard report)" ? 0 : 3);
        }
        _exit(4);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << (WIFSIGNALED(status) ? "killed by signal " + std::to_string(WTERMSIG(status)) + " (hung?)"
                                : "exit status " + std::to_string(WEXITSTATUS(status)));
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
    Report r = load_report(cut);
    ASSERT_EQ(r.blocks.size(), 1u);
    EXPECT_FALSE(r.blocks[0].t_free);  // the cut F is not read
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_EQ(r.warnings[0], cut + ":3: truncated at byte " + std::to_string(content.size()) +
                                 " (last record incomplete: disk full?); read up to line 2, the last complete record");
    EXPECT_EQ(r.warnings, parse_report(content, cut).warnings);
    std::string header = dir.write("header.mgr", "MEMGUARD-REPORT");
    try {
        load_report(header);
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_TRUE(contains(e.what(), header + ":1: not a memguard report")) << e.what();
    }
    std::string header_only = dir.write("header1.mgr", "MEMGUARD-REPORT 1");
    try {
        load_report(header_only);
        FAIL() << "no error";
    } catch (const ReportError& e) {
        EXPECT_EQ(std::string(e.what()), header_only + ":1: truncated at byte 17 (the header line is incomplete)");
    }
}

// A cut spanning the reader's 1 MiB chunks: the records before the cut are all there.
TEST(ReportFile, ABigFileCutMidRecordReadsToItsLastCompleteRecord) {
    test::TempDir dir;
    std::string content = kHeader;
    for (int i = 0; i < 60000; ++i) {
        content += "A " + std::to_string(i) + " 1 " + std::to_string(100000 + i) + " 4096 device cudaMalloc 0 - 0\n";
    }
    content += "A 60000 1 ff";
    ASSERT_GT(content.size(), 2u << 20);
    Report r = load_report(dir.write("big.mgr", content));
    EXPECT_EQ(r.blocks.size(), 60000u);
    EXPECT_TRUE(contains(r.warnings.at(0), ":60002: truncated at byte " + std::to_string(content.size())))
        << r.warnings.at(0);
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

// --- minor 5: allocator mode ------------------------------------------------------------------

TEST(AllocatorRecords, ReadOnlyFromMinor5) {
    std::string body = "T 1 7 a000 512 500 0 0 0 0 0 -\nt 2 7 a000 0\nO 3 7 0 10 512 0 0 0 0 0 none\nZ 4\n";
    Report old = parse("I format_minor 4\n" + body);
    EXPECT_TRUE(old.tensors.empty());
    EXPECT_TRUE(old.tensor_ooms.empty());
    EXPECT_TRUE(old.events.empty());
    Report r = parse("I format_minor 5\n" + body);
    ASSERT_EQ(r.tensors.size(), 1u);
    EXPECT_EQ(r.tensors[0].size, 512u);
    EXPECT_EQ(r.tensors[0].requested, 500u);
    EXPECT_EQ(r.tensors[0].t_free, 2);
    EXPECT_EQ(r.tensors[0].pool, "-");
    ASSERT_EQ(r.events.size(), 2u);
    EXPECT_EQ(r.events[0].type, Event::TensorAlloc);
    EXPECT_EQ(r.events[1].type, Event::TensorFree);
    ASSERT_EQ(r.tensor_ooms.size(), 1u);
    EXPECT_EQ(r.tensor_ooms[0].rescued, "none");
}

TEST(AllocatorRecords, GcFreesBelongToTheNextCollectionOfTheirThread) {
    Report r = parse(
        "I format_minor 5\n"
        "T 1 7 a000 512 512 0 0 0 0 0 -\nT 1 7 b000 512 512 0 0 0 0 0 -\nT 1 7 c000 512 512 0 0 0 0 0 -\n"
        "t 2 7 a000 1\nt 2 8 b000 1\nt 2 7 c000 0\n"
        "Y 3 9 automatic 0 1 0 0 - - -\nY 4 7 explicit 2 1 0 0 - - -\nY 5 7 explicit 2 1 0 0 - - -\nZ 6\n");
    ASSERT_EQ(r.tensors.size(), 3u);
    EXPECT_EQ(r.tensors[0].collection, std::optional<size_t>(1));  // thread 7's first Y, not thread 9's
    EXPECT_FALSE(r.tensors[1].collection.has_value());             // thread 8: no Y follows
    EXPECT_TRUE(r.tensors[1].freed_in_gc);
    EXPECT_FALSE(r.tensors[2].collection.has_value());  // gc 0
}

TEST(AllocatorRecords, RequestedOverBlockSizeIsAWarning) {
    Report r = parse("I format_minor 5\nT 1 7 a000 512 600 0 0 0 0 0 -\nZ 3\n");
    ASSERT_EQ(r.tensors.size(), 1u);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr:3: tensor block at a000: requested size 600 exceeds block size 512"))
        << r.warnings[0];
}

TEST(AllocatorRecords, TensorFreeOfNothingLiveIsAWarning) {
    Report r = parse("I format_minor 5\nt 2 7 a000 0\nZ 3\n");
    EXPECT_TRUE(r.tensors.empty());
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr:3: tensor free of a000, which is not live; ignored")) << r.warnings[0];
}

TEST(AllocatorRecords, MalformedLinesNameFileAndLine) {
    const std::string h = kHeader + "I format_minor 5\n";
    EXPECT_EQ(error_of(h + "T 1 7 a000 512 500 0 0 0 0 0\n"),
              "t.mgr:3: malformed T record: 11 fields expected, 10 found");
    EXPECT_EQ(error_of(h + "T 1 7 a000 512 500 0 zz 0 0 0 -\n"),
              "t.mgr:3: malformed T record: bad stream 'zz' (hex expected)");
    EXPECT_EQ(error_of(h + "t 1 7 a000 2\n"), "t.mgr:3: malformed t record: bad gc flag '2' (0 or 1 expected)");
    EXPECT_EQ(error_of(h + "O 3 7 0 10 512 0 0 0 0 0 maybe\n"), "t.mgr:3: malformed O record: unknown rescue 'maybe'");
    EXPECT_EQ(error_of(h + "o 3 0 0 1 512\n"), "t.mgr:3: malformed o record: no O record at t=3 precedes it");
}

// --- minor 6: lost records ----------------------------------------------------------------------

TEST(LostRecords, ReadOnlyFromMinor6AndSummedIntoOneWarning) {
    const std::string body = "U 2000000000 1000000000 5\nU 4000000000 3500000000 2\nZ 5000000000\n";
    Report old = parse("I format_minor 5\n" + body);
    EXPECT_EQ(old.lost_records, 0u);
    EXPECT_TRUE(old.warnings.empty());
    Report r = parse("I format_minor 6\n" + body);
    EXPECT_EQ(r.lost_records, 7u);
    EXPECT_EQ(r.lost_first_t, 1000000000);
    EXPECT_EQ(r.lost_last_t, 4000000000);
    EXPECT_TRUE(r.complete);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_TRUE(contains(r.warnings[0], "t.mgr: incomplete: the recorded process lost 7 record(s) between t=1.000 s "
                                        "and t=4.000 s"))
        << r.warnings[0];
}

TEST(LostRecords, MalformedLinesNameFileAndLine) {
    const std::string h = kHeader + "I format_minor 6\n";
    EXPECT_EQ(error_of(h + "U 5 1\n"), "t.mgr:3: malformed U record: 3 fields expected, 2 found");
    EXPECT_EQ(error_of(h + "U 5 1 x\n"), "t.mgr:3: malformed U record: bad record count 'x'");
    EXPECT_EQ(error_of(h + "U 5 9 1\n"),
              "t.mgr:3: malformed U record: the first lost record's time 9 is after the record's");
}

}  // namespace
}  // namespace memguard::report
