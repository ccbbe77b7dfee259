// The binary encoding read back (docs/report-format.md, "Binary encoding"): the golden reports
// converted to binary (report/transcode.h) read as their text does, cut anywhere, mutated at
// random and made hostile; every input gets a Report or one clear ReportError, never a crash or
// an allocation the file's size does not justify.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "format/binary.h"
#include "format/binary_decode.h"
#include "report/analysis.h"
#include "report/transcode.h"
#include "test_util.h"

namespace memguard::report {
namespace {

namespace rec = format::rec;

std::string golden_path(const std::string& name) { return std::string(MEMGUARD_GOLDEN_DIR) + "/" + name; }

std::string binary_of(const std::string& name) {
    std::string out;
    std::vector<std::string> warnings;
    transcode(golden_path(name), Encoding::Binary, out, &warnings);
    EXPECT_TRUE(warnings.empty()) << name;
    return out;
}

std::string header() { return std::string(format::kBinaryMagic) + " 1\n"; }

/// A binary report of `records`, each encoded as the writer does (plain or predicted, in order).
class Builder {
public:
    Builder() : out_(header()) { add(rec::Info{"format_minor", std::to_string(format::kFormatMinor)}); }
    template <class R>
    Builder& add(const R& r) {
        if constexpr (format::is_predicted<R>()) {
            out_.append(format::encode_predicted(r, predictions_, values_, frame_));
        } else {
            out_.append(format::encode_plain(r, frame_));
        }
        return *this;
    }
    Builder& raw(std::string_view bytes) {
        out_.append(bytes);
        return *this;
    }
    const std::string& bytes() const { return out_; }

private:
    std::string out_;
    format::binary::Predictions predictions_;
    format::Frame values_, frame_;
};

std::string binary_error(const std::string& content) {
    try {
        parse_report(content, "b.mgr");
    } catch (const ReportError& e) {
        return e.what();
    }
    return "";
}

/// The offsets where frames end (a reader stops cleanly there), after the header line.
std::vector<size_t> frame_ends(const std::string& s) {
    std::vector<size_t> ends;
    size_t pos = s.find('\n') + 1;
    ends.push_back(pos);
    while (pos < s.size()) {
        uint64_t length = 0;
        const char* p = format::get_varint(s.data() + pos + 1, s.data() + s.size(), &length);
        pos = static_cast<size_t>(p - s.data()) + length;
        ends.push_back(pos);
    }
    return ends;
}

TEST(Binary, GoldenReportsReadTheSameInBothEncodings) {
    for (const char* name : {"basic.mgr", "graphs.mgr", "gc.mgr", "alloc.mgr", "vmm_expandable.mgr"}) {
        const Report text = load_report(golden_path(name));
        const Report binary = parse_report(binary_of(name), golden_path(name));
        const Summary a = summarize(text), b = summarize(binary);
        EXPECT_EQ(a.peak_bytes, b.peak_bytes) << name;
        EXPECT_EQ(a.allocations, b.allocations) << name;
        EXPECT_EQ(a.frees, b.frees) << name;
        EXPECT_EQ(text.events.size(), binary.events.size()) << name;
        EXPECT_EQ(text.end_t, binary.end_t) << name;
        EXPECT_EQ(text.warnings, binary.warnings) << name;
        // And back: the text of the binary is the text the table writes (the original's, whatever
        // spelling it had, rewritten).
        char path[] = "/tmp/memguard_binary_XXXXXX";
        int fd = mkstemp(path);
        ASSERT_GE(fd, 0);
        const std::string bin = binary_of(name);
        ASSERT_EQ(write(fd, bin.data(), bin.size()), static_cast<ssize_t>(bin.size()));
        close(fd);
        std::string text_again, text_direct;
        std::vector<std::string> warnings;
        transcode(path, Encoding::Text, text_again, &warnings);
        transcode(golden_path(name), Encoding::Text, text_direct, &warnings);
        unlink(path);
        EXPECT_EQ(text_again, text_direct) << name;
        EXPECT_TRUE(warnings.empty());
    }
}

TEST(Binary, EveryTruncation) {
    for (const char* name : {"basic.mgr", "graphs.mgr", "alloc.mgr"}) {
        const std::string base = binary_of(name);
        const std::vector<size_t> ends = frame_ends(base);
        ASSERT_EQ(ends.back(), base.size());
        size_t next_end = 0;
        for (size_t cut = 0; cut <= base.size(); ++cut) {
            const std::string prefix = base.substr(0, cut);
            if (cut < ends[0]) {
                // A cut header refuses the file.
                EXPECT_NE(binary_error(prefix), "") << name << " cut at " << cut;
                continue;
            }
            while (ends[next_end] < cut) ++next_end;
            const bool at_boundary = ends[next_end] == cut;
            Report r = parse_report(prefix, "b.mgr");
            const bool says_cut = !r.warnings.empty() &&
                                  test::contains(r.warnings[0], "truncated at byte " + std::to_string(cut) + " (");
            EXPECT_EQ(says_cut, !at_boundary) << name << " cut at " << cut;
            const size_t whole = at_boundary ? cut : ends[next_end - 1];
            if (!at_boundary) {
                EXPECT_TRUE(test::contains(r.warnings[0], "read up to byte " + std::to_string(whole))) << r.warnings[0];
            }
            Report whole_frames = parse_report(base.substr(0, whole), "b.mgr");
            EXPECT_EQ(r.blocks.size(), whole_frames.blocks.size()) << name << " cut at " << cut;
            EXPECT_EQ(r.events.size(), whole_frames.events.size()) << name << " cut at " << cut;
            EXPECT_EQ(r.tensors.size(), whole_frames.tensors.size()) << name << " cut at " << cut;
        }
    }
}

TEST(Binary, RandomByteMutationsGetAReportOrOneClearError) {
    const char* seed_env = std::getenv("MEMGUARD_FUZZ_SEED");
    std::mt19937 rng(seed_env != nullptr ? static_cast<uint32_t>(std::strtoul(seed_env, nullptr, 10)) : 20261205u);
    const std::string bases[] = {binary_of("basic.mgr"), binary_of("graphs.mgr"), binary_of("gc.mgr"),
                                 binary_of("alloc.mgr"), binary_of("vmm_expandable.mgr")};
    const char interesting[] = {'\0', '\x01', '\x7f', '\x80', '\xff', 'A', 'F', 'T', 't', 'S', 'Z', '\n'};
    size_t parsed = 0, refused = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::string s = bases[iter % 5];
        const size_t body = s.find('\n') + 1;
        const int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits && s.size() > body; ++e) {
            const size_t pos = body + rng() % (s.size() - body);
            switch (rng() % 4) {
            case 0: s[pos] = static_cast<char>(rng() % 256); break;
            case 1: s[pos] = interesting[rng() % sizeof interesting]; break;
            case 2: s.erase(pos, 1 + rng() % 8); break;
            default: s.insert(pos, 1, interesting[rng() % sizeof interesting]); break;
            }
        }
        try {
            Report r = parse_report(s, "b.mgr");
            const Summary sum = summarize(r);
            EXPECT_GE(sum.peak_bytes, sum.live_bytes_at_exit);
            ++parsed;
        } catch (const ReportError& e) {
            const std::string what = e.what();
            EXPECT_EQ(what.rfind("b.mgr", 0), 0u) << what;
            EXPECT_EQ(what.find('\n'), std::string::npos) << what;
            ++refused;
        }
    }
    EXPECT_GT(parsed, 100u);
    EXPECT_GT(refused, 100u);
}

TEST(Binary, HostileFramesGetOneClearError) {
    // A length far past any record: refused before anything is allocated for it.
    Builder b;
    std::string huge = "A";
    char v[10];
    huge.append(v, format::put_varint(v, uint64_t{1} << 60));
    huge.append(64, '\0');
    EXPECT_TRUE(test::contains(binary_error(Builder().raw(huge).bytes()), "record longer than 16 MiB (corrupt file?)"))
        << binary_error(Builder().raw(huge).bytes());
    // A length that is no varint (eleven continuation bytes).
    const std::string bad_length = "A" + std::string(11, '\x80') + std::string(8, '\0');
    EXPECT_TRUE(test::contains(binary_error(Builder().raw(bad_length).bytes()), "bad record length (corrupt file?)"));
    // A stack that claims more frames than its record has bytes.
    std::string stack = "S";
    std::string payload;
    payload.append(v, format::put_varint(v, 7));                  // stack id
    payload.append(v, format::put_varint(v, uint64_t{1} << 40));  // frame count
    payload.append(4, '\x01');
    stack.append(v, format::put_varint(v, payload.size()));
    stack += payload;
    const std::string err = binary_error(Builder().raw(stack).bytes());
    EXPECT_TRUE(test::contains(err, "malformed S record: 1099511627776 ips do not fit")) << err;
    EXPECT_TRUE(test::contains(err, "b.mgr: record at byte ")) << err;
    // A free that repeats a field no record gave yet (its mask is 0).
    const std::string lone_free = std::string("F\x01\x00", 3);
    const std::string err2 = binary_error(Builder().raw(lone_free).bytes());
    EXPECT_TRUE(test::contains(err2, "malformed F record: no time (field t) and no earlier record")) << err2;
    // A field of a plain record cut short.
    const std::string cut_h = std::string("H\x01\x80", 3);
    const std::string err3 = binary_error(Builder().raw(cut_h).bytes());
    EXPECT_TRUE(test::contains(err3, "malformed H record: record ends before its time")) << err3;
    // An enum value past its names.
    std::string alloc;
    {
        Builder ok;
        ok.add(rec::Alloc{1, 2, 0x1000, 64, format::Kind::Device, "cudaMalloc", 0, std::nullopt, 0, 0, 0});
        alloc = ok.bytes();
        // The A frame is the last; its kind is the fifth field: mask, t, tid, addr, size, kind.
        const size_t at = alloc.rfind('A');
        std::string payload2 = alloc.substr(at + 2);
        ASSERT_EQ(static_cast<uint8_t>(alloc[at + 1]), payload2.size());
        // mask (2 bytes: 11 fields), t 1 byte, tid 1, addr 2, size 1, then kind.
        payload2[2 + 1 + 1 + 2 + 1] = '\x09';
        alloc = alloc.substr(0, at + 2) + payload2;
    }
    const std::string err4 = binary_error(alloc);
    EXPECT_TRUE(test::contains(err4, "malformed A record: bad kind 9 (unknown)")) << err4;
}

TEST(Binary, PredictedRecordsRepeatWhatTheyShare) {
    // An allocation and its free in a loop: after the first pair, a pair is a few bytes.
    Builder b;
    const size_t start = b.bytes().size();
    int64_t t = 1000;
    for (int i = 0; i < 1000; ++i) {
        b.add(rec::Alloc{t, 7, 0x7f0000000000ull + static_cast<uint64_t>(i % 4) * 0x100000, 1 << 20,
                         format::Kind::Device, "cudaMalloc", 0, std::nullopt, 3, 0, 0});
        b.add(rec::Free{t + 900, 7, 0x7f0000000000ull + static_cast<uint64_t>(i % 4) * 0x100000, 1 << 20, "cudaFree",
                        std::nullopt});
        t += 2000;
    }
    b.add(rec::End{t});
    const double per_pair = static_cast<double>(b.bytes().size() - start) / 1000;
    EXPECT_LT(per_pair, 16.0);
    const Report r = parse_report(b.bytes(), "b.mgr");
    ASSERT_EQ(r.blocks.size(), 1000u);
    EXPECT_EQ(r.blocks[999].addr, 0x7f0000000000u + 3 * 0x100000);
    EXPECT_EQ(r.blocks[999].t_alloc, 1000 + 999 * 2000);
    EXPECT_EQ(r.blocks[999].stack_id, 3u);
    EXPECT_TRUE(r.complete);
}

TEST(Binary, PredictedRecordsHoldWhatTheirMaskSaysWhateverTheMinor) {
    // A file of an older minor (a converted old report) still codes A's later fields (capture_id,
    // minor 1; python_stack_id, minor 2): its mask says they are there, and they are read.
    format::binary::Predictions p;
    format::Frame values, frame;
    format::BinaryDecoder d;
    for (uint32_t i = 1; i <= 3; ++i) {
        const rec::Alloc a{int64_t{i},  1, 0x1000 * i, 64,   format::Kind::Device, "cudaMalloc", 0,
                           uint64_t{7}, i, 5 * i,      7 * i};
        const std::string_view f = format::encode_predicted(a, p, values, frame);
        uint64_t length = 0;
        const char* payload = format::get_varint(f.data() + 1, f.data() + f.size(), &length);
        rec::Alloc back{};
        d.read(std::string_view(payload, length), 0, back);
        EXPECT_EQ(back.capture_id, 5 * i);
        EXPECT_EQ(back.python_stack_id, 7 * i);
        EXPECT_EQ(back.addr, 0x1000u * i);
        EXPECT_EQ(back.stream, std::optional<uint64_t>(7));
    }
}

TEST(Binary, LargeFilesReadAcrossTheReadersChunks) {
    // Over a few MiB, frames straddle the reader's 1 MiB chunks: load_report (chunks) and
    // parse_report (one string) agree.
    Builder b;
    const std::string big_path(3000, 'x');
    for (uint32_t i = 1; i <= 3000; ++i) {
        b.add(rec::Module{i, uint64_t{i} << 20, (uint64_t{i} << 20) + 4096, 0, "", big_path});
        b.add(rec::Alloc{int64_t{i}, 1, uint64_t{i} << 12, i, format::Kind::Device, "cudaMalloc", 0, std::nullopt, 0, 0,
                         0});
    }
    b.add(rec::End{5000});
    char path[] = "/tmp/memguard_binary_big_XXXXXX";
    int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, b.bytes().data(), b.bytes().size()), static_cast<ssize_t>(b.bytes().size()));
    close(fd);
    const Report from_file = load_report(path);
    unlink(path);
    const Report from_string = parse_report(b.bytes(), path);
    EXPECT_EQ(from_file.modules.size(), 3000u);
    EXPECT_EQ(from_file.blocks.size(), 3000u);
    EXPECT_EQ(from_string.blocks.size(), 3000u);
    EXPECT_TRUE(from_file.complete);
    EXPECT_EQ(from_file.warnings, from_string.warnings);
}

}  // namespace
}  // namespace memguard::report
