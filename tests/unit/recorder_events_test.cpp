// The recorder in-process: phases and marks, the records made before the report exists, the
// header's keys and the run's manifest.
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "format/records_meta.h"
#include "track/clock.h"

#include "recorder_fixture.h"

namespace memguard::track::testing {
namespace {

using report::Report;

Recorder::Collection automatic_collection(int generation) {
    Recorder::Collection c;
    c.trigger = format::GcTrigger::Automatic;
    c.generation = generation;
    c.duration_ns = 1500;
    c.collected = 7;
    c.uncollectable = 0;
    c.cuda_bytes_freed = -1;
    c.mark_age_ns = -1;
    return c;
}

// Every key the header has is in the record table's list (whose minors make I format_minor), and
// the run id is there when the configuration has one.
TEST_F(RecorderTest, TheHeaderHasTheRunIdAndOnlyTheTablesKeys) {
    std::set<std::string> known;
    for (const format::rec::InfoKey& k : format::rec::kInfoKeys) known.insert(std::string(k.key));
    Config c = test_config();
    c.run_id = "20250101-120000-1a2b3c4d";
    build(c);
    alloc(0x1000, 64);
    Report r = read();
    for (const auto& [key, value] : r.info) EXPECT_EQ(known.count(key), 1u) << "I " << key << " is not in kInfoKeys";
    EXPECT_EQ(r.info["run_id"], "20250101-120000-1a2b3c4d");
    EXPECT_EQ(r.info["format_minor"], std::to_string(format::kFormatMinor));

    build(test_config());  // no run id: no key
    alloc(0x2000, 64);
    EXPECT_EQ(read(1).info.count("run_id"), 0u);
}

// memguard run's list: the report's path, one line, appended when the report is created.
TEST_F(RecorderTest, TheReportIsAddedToTheRunsManifestWhenCreated) {
    char dir[] = "/tmp/mgtest-manifest.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    const std::string manifest = std::string(dir) + "/reports";
    auto contents = [&] {
        std::ifstream in(manifest);
        std::stringstream s;
        s << in.rdbuf();
        return s.str();
    };
    Config c = test_config();
    c.run_manifest = manifest;
    build(c);
    recorder->record_mark(PhaseSource::Api, "before");  // deferred: no report, no line yet
    EXPECT_EQ(contents(), "");
    alloc(0x1000, 64);
    alloc(0x2000, 64);
    EXPECT_EQ(contents(), "/in-memory/report.mgr\n");
    build(c);  // another process of the run
    alloc(0x3000, 64);
    EXPECT_EQ(contents(), "/in-memory/report.mgr\n/in-memory/report.mgr\n");
    unlink(manifest.c_str());
    rmdir(dir);
}

TEST_F(RecorderTest, PhasesGetIdsNestAndEndOnce) {
    alloc(0x1000, 1);
    clock.set(100);
    const uint64_t outer = recorder->record_phase_begin(PhaseSource::Api, "epoch");
    clock.set(110);
    const uint64_t inner = recorder->record_phase_begin(PhaseSource::Nvtx, "forward");
    EXPECT_EQ(outer, 1u);
    EXPECT_EQ(inner, 2u);
    clock.set(120);
    alloc(0x2000, 2);
    clock.set(130);
    EXPECT_TRUE(recorder->record_phase_end(inner));
    clock.set(140);
    EXPECT_TRUE(recorder->record_phase_end(outer));
    EXPECT_FALSE(recorder->record_phase_end(outer)) << "ended twice";
    EXPECT_FALSE(recorder->record_phase_end(77)) << "never handed out";
    EXPECT_FALSE(recorder->record_phase_end(0));
    EXPECT_EQ(lines_of('b').size(), 2u) << "an end of an unknown id writes nothing";
    const Report r = read();
    ASSERT_EQ(r.phases.size(), 2u);
    EXPECT_EQ(r.phases[0].id, outer);
    EXPECT_EQ(r.phases[0].name, "epoch");
    EXPECT_EQ(r.phases[0].source, report::PhaseSource::Api);
    EXPECT_EQ(r.phases[0].t_begin, 100);
    EXPECT_EQ(r.phases[0].t_end, std::optional<int64_t>(140));
    EXPECT_EQ(r.phases[1].name, "forward");
    EXPECT_EQ(r.phases[1].source, report::PhaseSource::Nvtx);
    EXPECT_EQ(r.phases[1].t_begin, 110);
    EXPECT_EQ(r.phases[1].t_end, std::optional<int64_t>(130));
    // Nested: the inner phase lies within the outer, and the second allocation within both.
    EXPECT_LT(r.phases[0].events_at_begin, r.phases[1].events_at_begin + 1);
    EXPECT_EQ(r.phases[1].events_at_end - r.phases[1].events_at_begin, 1u);
    EXPECT_GE(r.phases[0].events_at_end, r.phases[1].events_at_end);
}

TEST_F(RecorderTest, AnOpenPhaseStaysOpenInTheReport) {
    alloc(0x1000, 1);
    const uint64_t id = recorder->record_phase_begin(PhaseSource::NvtxRange, "warmup");
    EXPECT_NE(id, 0u);
    const Report r = read();
    ASSERT_EQ(r.phases.size(), 1u);
    EXPECT_FALSE(r.phases[0].t_end.has_value());
    EXPECT_EQ(r.phases[0].source, report::PhaseSource::NvtxRange);
}

TEST_F(RecorderTest, MarksAreJRecordsWithTheirSourceAndName) {
    alloc(0x1000, 1);
    clock.set(55);
    recorder->record_mark(PhaseSource::Api, "checkpoint saved");
    recorder->record_mark(PhaseSource::Nvtx, std::string(kMaxPhaseName + 50, 'n'));
    const Report r = read();
    ASSERT_EQ(r.marks.size(), 2u);
    EXPECT_EQ(r.marks[0].t, 55);
    EXPECT_EQ(r.marks[0].name, "checkpoint saved");
    EXPECT_EQ(r.marks[0].source, report::PhaseSource::Api);
    EXPECT_EQ(r.marks[0].events_before, 1u);
    EXPECT_EQ(r.marks[1].name, std::string(kMaxPhaseName, 'n')) << "a long name is cut";
    EXPECT_EQ(r.marks[1].source, report::PhaseSource::Nvtx);
}

// --- before the report exists ----------------------------------------------------------------------

TEST_F(RecorderTest, RecordsBeforeTheReportWaitAndFollowTheHeader) {
    clock.set(5);
    recorder->record_collection(automatic_collection(2));
    clock.set(6);
    const uint64_t phase = recorder->record_phase_begin(PhaseSource::Api, "setup");
    EXPECT_EQ(phase, 1u);
    clock.set(7);
    recorder->record_mark(PhaseSource::Api, "ready");
    recorder->record_compile("0/1");
    clock.set(8);
    EXPECT_TRUE(recorder->record_phase_end(phase));
    EXPECT_EQ(sink.report_count(), 0u) << "none of these starts the report";
    EXPECT_EQ(recorder->report_path(), "");
    clock.set(20);
    alloc(0x1000, 1);
    ASSERT_EQ(sink.report_count(), 1u);
    const Report r = read();
    ASSERT_EQ(r.collections.size(), 1u);
    EXPECT_EQ(r.collections[0].t, 5);
    EXPECT_EQ(r.collections[0].generation, 2);
    EXPECT_EQ(r.collections[0].trigger, report::GcTrigger::Automatic);
    ASSERT_EQ(r.phases.size(), 1u);
    EXPECT_EQ(r.phases[0].t_begin, 6);
    EXPECT_EQ(r.phases[0].t_end, std::optional<int64_t>(8));
    ASSERT_EQ(r.marks.size(), 1u);
    EXPECT_EQ(r.marks[0].t, 7);
    ASSERT_EQ(r.compiles.size(), 1u);
    EXPECT_EQ(r.compiles[0].id, "0/1");
    // In the order they were made, after the header and before the allocation that started it.
    const size_t y = position_of('Y'), b = position_of('B'), j = position_of('J'), x = position_of('X'),
                 e = position_of('b'), a = position_of('A');
    EXPECT_GT(y, sink.text().find("\nI unwinder "));
    EXPECT_LT(y, b);
    EXPECT_LT(b, j);
    EXPECT_LT(j, x);
    EXPECT_LT(x, e);
    EXPECT_LT(e, a);
    EXPECT_EQ(r.lost_records, 0u);
}

TEST_F(RecorderTest, MemguardsOwnCollectionStartsTheReport) {
    Recorder::Collection c = automatic_collection(0);
    c.trigger = format::GcTrigger::Memguard;
    c.compile_ids = "0/0,1/0";
    c.mark_age_ns = 300;
    recorder->record_collection(c);
    ASSERT_EQ(sink.report_count(), 1u);
    const Report r = read();
    ASSERT_EQ(r.collections.size(), 1u);
    EXPECT_EQ(r.collections[0].trigger, report::GcTrigger::Memguard);
    EXPECT_EQ(r.collections[0].compile_ids, (std::vector<std::string>{"0/0", "1/0"}));
    EXPECT_EQ(r.collections[0].mark_age_ns, std::optional<int64_t>(300));
}

TEST_F(RecorderTest, RecordsBeyondTheBoundBeforeTheReportAreCountedAsLost) {
    // Marks with the longest name: about 1 KiB each, over a MiB in all.
    const std::string name(kMaxPhaseName, 'm');
    const size_t made = 1100;
    clock.set(3);
    for (size_t i = 0; i < made; ++i) recorder->record_mark(PhaseSource::Api, name);
    clock.set(9);
    alloc(0x1000, 1);
    recorder->flush();
    const Report r = read();
    ASSERT_GT(r.marks.size(), 0u);
    EXPECT_GT(r.lost_records, 0u);
    EXPECT_EQ(r.marks.size() + r.lost_records, made);
    const std::vector<std::string> marks = lines_of('J');
    ASSERT_EQ(marks.size(), r.marks.size());
    // What was kept is the first of them, as much as fits in the bound (a MiB) and no more.
    const size_t bytes = marks[0].size() + 1;
    EXPECT_LE(marks.size() * bytes, size_t{1} << 20);
    EXPECT_GT((marks.size() + 1) * bytes, size_t{1} << 20);
    EXPECT_EQ(r.lost_first_t, 9) << "counted when the report started";
    EXPECT_EQ(lines_of('U').size(), 1u);
}

TEST_F(RecorderTest, StatsCountLivePeakAndCollectionsThatFreedCudaMemory) {
    Recorder::Stats s = recorder->stats(-1);
    EXPECT_EQ(s.gpu_live, 0u);
    EXPECT_FALSE(s.tensors) << "no allocator mode, no tensor counters";
    alloc(0x1000, 1000);
    alloc(0x2000, 3000, {}, Kind::Device, Api::cudaMalloc, 1);
    alloc(0x3000, 50, {}, Kind::Pinned, Api::cudaHostAlloc);
    recorder->watch_thread_frees(current_tid());
    ASSERT_TRUE(free_block(0x2000));
    ASSERT_TRUE(free_block(0x3000));
    EXPECT_EQ(recorder->watched_thread_freed(), 3000u) << "GPU bytes only";
    std::thread([&] { EXPECT_TRUE(free_block(0x1000)); }).join();
    EXPECT_EQ(recorder->watched_thread_freed(), 3000u) << "another thread's free is not the watched thread's";
    alloc(0x1000, 1000);
    recorder->watch_thread_frees(0);
    s = recorder->stats(-1);
    EXPECT_EQ(s.gpu_live, 1000u);
    EXPECT_EQ(s.gpu_peak, 4000u) << "each device's peak, summed";
    EXPECT_EQ(recorder->stats(1).gpu_peak, 3000u);
    EXPECT_EQ(recorder->stats(1).gpu_live, 0u);
    recorder->reset_peak(1);
    EXPECT_EQ(recorder->stats(1).gpu_peak, 0u);
    EXPECT_EQ(recorder->stats(0).gpu_peak, 1000u);
    recorder->reset_peak(-1);
    alloc(0x4000, 10);
    EXPECT_EQ(recorder->stats(-1).gpu_peak, 1010u);

    Recorder::Collection c = automatic_collection(2);
    recorder->record_collection(c);  // unknown (-1)
    c.cuda_bytes_freed = 0;
    recorder->record_collection(c);
    c.cuda_bytes_freed = 4096;
    recorder->record_collection(c);
    c.cuda_bytes_freed = -10;  // another thread allocated meanwhile
    recorder->record_collection(c);
    s = recorder->stats(-1);
    EXPECT_EQ(s.gc_collections, 4u);
    EXPECT_EQ(s.gc_freeing_collections, 1u);
    EXPECT_EQ(s.gc_cuda_bytes_freed, 4096u);
}

TEST_F(RecorderTest, StatsInAllocatorModeAreTheTensorCounters) {
    static uint64_t live = 0, peak = 0;
    static int reset_device = -2;
    static const Recorder::TensorCounters counters{[](int device, uint64_t* l, uint64_t* p) {
                                                       *l = device < 0 ? live : live + 1;
                                                       *p = peak;
                                                   },
                                                   [](int device) { reset_device = device; }};
    live = 700;
    peak = 900;
    recorder->set_tensor_counters(&counters);
    EXPECT_FALSE(recorder->stats(-1).tensors) << "only once the switch happened";
    recorder->set_allocator_mode();
    alloc(0x1000, 2048);  // a segment
    Recorder::Stats s = recorder->stats(-1);
    EXPECT_TRUE(s.tensors);
    EXPECT_EQ(s.tensor_live, 700u);
    EXPECT_EQ(s.tensor_peak, 900u);
    EXPECT_EQ(s.gpu_live, 2048u);
    EXPECT_EQ(recorder->stats(0).tensor_live, 701u) << "the device is passed on";
    recorder->reset_peak(3);
    EXPECT_EQ(reset_device, 3);
}

}  // namespace
}  // namespace memguard::track::testing
