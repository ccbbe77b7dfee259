// The recorder writing its report file in each encoding (MEMGUARD_REPORT_ENCODING): binary by
// default, text when asked; the reader gets the same records from both. The records of every
// allocation and free are packed on the hook's thread and encoded by the writer thread in file
// order (track/packed.h); the others are encoded where they are made.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "format/binary.h"
#include "report/report.h"
#include "report/transcode.h"
#include "track/recorder.h"
#include "track/testing/fake_clock.h"
#include "track/testing/fake_unwinder.h"
#include "track/writer.h"

namespace memguard::track {
namespace {

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

/// One recorder writing a real report file, driven like the hooks drive it.
struct RecordedRun {
    explicit RecordedRun(ReportEncoding encoding, bool allocator_mode) {
        char dir[] = "/tmp/mg-encoding-XXXXXX";
        EXPECT_NE(mkdtemp(dir), nullptr);
        dir_ = dir;
        Config c;
        c.output_template = dir_ + "/r.mgr";
        c.stack_depth = 16;
        c.report_encoding = encoding;
        unwinder.set_frames({0x10001000, 0x10002000, 0x10003000});
        writer = std::make_unique<ReportWriter>(clock);
        recorder = std::make_unique<Recorder>(c, *writer, clock, unwinder);
        if (allocator_mode) recorder->set_allocator_mode();
        uintptr_t ips[Recorder::kStackCapacity];
        for (int i = 0; i < 500; ++i) {
            clock.set(1000 + i * 100);
            const int n = recorder->capture_stack(ips);
            const uintptr_t addr = 0x7f0000000000 + static_cast<uintptr_t>(i % 3) * 0x200000;
            if (allocator_mode) {
                Recorder::TensorBlock b;
                b.addr = addr;
                b.size = b.requested = 512u * (1 + i % 5);
                b.stack_id = recorder->intern_stack(ips, n);
                b.private_pool = i % 7 == 0;
                b.pool_first = 1;
                b.pool_second = static_cast<uint64_t>(i);
                recorder->record_block_alloc(b);
                clock.set(1050 + i * 100);
                recorder->record_block_free(addr, i % 11 == 0);
            } else {
                recorder->record_alloc(Api::cudaMalloc, Kind::Device, addr, 1u << (10 + i % 4), 0, {}, ips, n);
                clock.set(1050 + i * 100);
                recorder->record_free(Api::cudaFree, addr, {});
            }
            if (i == 250) recorder->flush();  // predictions carry across flushes
        }
        recorder->record_phase_begin(format::PhaseSource::Api, "a phase");
        recorder->shutdown();
        path = dir_ + "/r.mgr";
    }
    ~RecordedRun() {
        std::remove(path.c_str());
        rmdir(dir_.c_str());
    }
    testing::FakeClock clock;
    testing::FakeUnwinder unwinder;
    std::unique_ptr<ReportWriter> writer;
    std::unique_ptr<Recorder> recorder;
    std::string dir_, path;
};

std::string text_of(const std::string& path) {
    std::string out;
    std::vector<std::string> warnings;
    report::transcode(path, report::Encoding::Text, out, &warnings);
    EXPECT_TRUE(warnings.empty());
    return out;
}

/// The records but those whose values differ between runs (the header's pid, exe, host...).
std::string records_of(const std::string& text) {
    std::istringstream in(text);
    std::string line, out;
    while (std::getline(in, line)) {
        if (line.rfind("I ", 0) != 0) out += line + "\n";
    }
    return out;
}

class Encodings : public ::testing::TestWithParam<bool> {};
INSTANTIATE_TEST_SUITE_P(Modes, Encodings, ::testing::Values(false, true), [](const ::testing::TestParamInfo<bool>& i) {
    return i.param ? "Allocator" : "Interposition";
});

TEST_P(Encodings, BinaryByDefaultTextWhenAskedAndTheSameRecords) {
    EXPECT_EQ(Config().report_encoding, ReportEncoding::Binary);
    RecordedRun binary(ReportEncoding::Binary, GetParam());
    RecordedRun text(ReportEncoding::Text, GetParam());
    const std::string b = read_all(binary.path), t = read_all(text.path);
    EXPECT_EQ(b.rfind("MEMGUARD-REPORT-BINARY 2\n", 0), 0u);
    EXPECT_EQ(t.rfind("MEMGUARD-REPORT 1\n", 0), 0u);
    // The same records, through the table's text.
    EXPECT_EQ(records_of(text_of(binary.path)), records_of(t));
    const report::Report rb = report::load_report(binary.path), rt = report::load_report(text.path);
    EXPECT_TRUE(rb.complete);
    // The same warnings (the fake frames lie in no module), but for the file's name.
    EXPECT_EQ(rb.warnings.size(), rt.warnings.size());
    if (GetParam()) {
        ASSERT_EQ(rb.tensors.size(), 500u);
        EXPECT_EQ(rt.tensors.size(), 500u);
    } else {
        ASSERT_EQ(rb.blocks.size(), 500u);
        EXPECT_EQ(rb.blocks[499].t_alloc, rt.blocks[499].t_alloc);
        EXPECT_EQ(rb.blocks[499].size, rt.blocks[499].size);
    }
    // A few bytes an allocation and free, against some fifty in text.
    EXPECT_LT(b.size() * 3, t.size()) << b.size() << " binary bytes, " << t.size() << " text bytes";
}

}  // namespace
}  // namespace memguard::track
