// A recorder built in-process for tests: an in-memory sink, a fake clock and a fake unwinder,
// driven the way the hooks drive the real one, and its reports read back through the report reader.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "report/report.h"
#include "track/recorder.h"
#include "track/testing/fake_clock.h"
#include "track/testing/fake_unwinder.h"
#include "track/testing/memory_sink.h"

namespace memguard::track::testing {

/// The native stack every allocation gets unless a test gives another (fake addresses, in no
/// loaded object).
inline const std::vector<uintptr_t> kFrames = {0x10001000, 0x10002000, 0x10003000};

class RecorderTest : public ::testing::Test {
protected:
    static Config test_config() {
        Config c;
        c.output_template = "/in-memory/report.mgr";
        c.stack_depth = 16;
        return c;
    }

    /// Builds the recorder (again) with `config`; set the unwinder's own code before.
    void build(const Config& config) { recorder = std::make_unique<Recorder>(config, sink, clock, unwinder); }
    void SetUp() override {
        unwinder.set_frames(kFrames);
        build(test_config());
    }

    /// What an allocation hook does after the real call succeeded: capture, then record.
    void alloc(uintptr_t addr, uint64_t size, StreamArg stream = {}, Kind kind = Kind::Device,
               Api api = Api::cudaMalloc, int device = 0) {
        uintptr_t ips[Recorder::kStackCapacity];
        const int n = recorder->capture_stack(ips);
        recorder->record_alloc(api, kind, addr, size, device, stream, ips, n);
    }
    /// What a free hook does before the real call; true when the block was live.
    bool free_block(uintptr_t addr, StreamArg stream = {}, Api api = Api::cudaFree) {
        return recorder->record_free(api, addr, stream).has_value();
    }
    /// A failed allocation: its E record carries the device's live bytes.
    void failed_alloc(uint64_t size, int device = 0) {
        uintptr_t ips[Recorder::kStackCapacity];
        const int n = recorder->capture_stack(ips);
        recorder->record_alloc_failed(Api::cudaMalloc, Kind::Device, size, device, {}, ips, n, 2);
    }

    /// Report `i` as the reader sees it, after writing out what was appended (a flush).
    report::Report read(size_t i = 0) {
        sink.flush();
        return report::parse_report(sink.text(i), "in-memory report " + std::to_string(i));
    }
    /// The lines of report `i` written so far that are records of type `type`.
    std::vector<std::string> lines_of(char type, size_t i = 0) {
        sink.flush();
        std::vector<std::string> out;
        const std::string text = sink.text(i);
        size_t at = 0;
        while (at < text.size()) {
            size_t end = text.find('\n', at);
            if (end == std::string::npos) end = text.size();
            if (end > at + 1 && text[at] == type && text[at + 1] == ' ') out.push_back(text.substr(at, end - at));
            at = end + 1;
        }
        return out;
    }
    /// Where the first record of type `type` starts in report `i` (npos: none).
    size_t position_of(char type, size_t i = 0) {
        sink.flush();
        const std::string text = sink.text(i);
        const std::string at_start = std::string(1, type) + ' ';
        if (text.compare(0, 2, at_start) == 0) return 0;
        return text.find("\n" + at_start);
    }

    FakeClock clock;
    MemorySink sink{clock};
    FakeUnwinder unwinder;
    std::unique_ptr<Recorder> recorder;
};

}  // namespace memguard::track::testing
