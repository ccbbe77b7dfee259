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
#include "format/encode.h"
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

std::string header(int version = format::binary::kVersion) {
    return std::string(format::kBinaryMagic) + " " + std::to_string(version) + "\n";
}

/// The version-1 twin of a golden report, written by the encoder before version 2 (issue 23).
std::string binary_v1_of(const std::string& name) { return test::read_file(golden_path("binary_v1/" + name)); }

/// A binary report of `records`, each encoded as the writer does (plain or predicted, in order),
/// in binary encoding `version`.
class Builder {
public:
    explicit Builder(int version = format::binary::kVersion) : out_(header(version)), predictions_(version) {
        add(rec::Info{"format_minor", std::to_string(format::kFormatMinor)});
    }
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
    // Version 2 (the writer's) and version 1 (the checked-in twins).
    for (const std::string name : {"basic.mgr", "graphs.mgr", "alloc.mgr", "v1/basic.mgr", "v1/alloc.mgr"}) {
        const std::string base = name.rfind("v1/", 0) == 0 ? binary_v1_of(name.substr(3)) : binary_of(name);
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
    const std::string bases[] = {binary_of("basic.mgr"),    binary_of("graphs.mgr"),         binary_of("gc.mgr"),
                                 binary_of("alloc.mgr"),    binary_of("vmm_expandable.mgr"), binary_v1_of("basic.mgr"),
                                 binary_v1_of("alloc.mgr"), binary_v1_of("graphs.mgr")};
    constexpr size_t kBases = sizeof bases / sizeof bases[0];
    const char interesting[] = {'\0', '\x01', '\x7f', '\x80', '\xff', 'A', 'F', 'T', 't', 'S', 'Z', '\n'};
    size_t parsed = 0, refused = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::string s = bases[iter % kBases];
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

/// The frames of a binary report after its header: (letter, payload).
std::vector<std::pair<char, std::string>> frames_of(const std::string& s) {
    std::vector<std::pair<char, std::string>> out;
    size_t pos = s.find('\n') + 1;
    while (pos < s.size()) {
        uint64_t length = 0;
        const char* p = format::get_varint(s.data() + pos + 1, s.data() + s.size(), &length);
        out.emplace_back(s[pos], std::string(p, static_cast<size_t>(length)));
        pos = static_cast<size_t>(p - s.data()) + length;
    }
    return out;
}

std::string write_temp(const std::string& content) {
    char path[] = "/tmp/memguard_binary_rt_XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, content.data(), content.size()), static_cast<ssize_t>(content.size()));
    close(fd);
    return path;
}

std::string text_of(const std::string& content) {
    const std::string path = write_temp(content);
    std::string text;
    std::vector<std::string> warnings;
    transcode(path, Encoding::Text, text, &warnings);
    unlink(path.c_str());
    EXPECT_TRUE(warnings.empty());
    return text;
}

TEST(Binary, Version1TwinsReadAsTheyDidBeforeVersion2) {
    // Files of the first binary encoding (checked in, written before version 2) decode to the
    // text of their golden reports, and re-encode (as version 2) to the same text.
    for (const char* name : {"basic.mgr", "alloc.mgr", "graphs.mgr", "gc.mgr"}) {
        const std::string v1 = binary_v1_of(name);
        ASSERT_EQ(v1.rfind("MEMGUARD-REPORT-BINARY 1\n", 0), 0u) << name;
        std::string direct;
        std::vector<std::string> warnings;
        transcode(golden_path(name), Encoding::Text, direct, &warnings);
        EXPECT_EQ(text_of(v1), direct) << name;
        const std::string v1_path = write_temp(v1);
        std::string v2;
        transcode(v1_path, Encoding::Binary, v2, &warnings);
        unlink(v1_path.c_str());
        EXPECT_EQ(v2.rfind("MEMGUARD-REPORT-BINARY 2\n", 0), 0u) << name;
        EXPECT_EQ(text_of(v2), direct) << name;
        EXPECT_EQ(summarize(parse_report(v1, name)).peak_bytes, summarize(load_report(golden_path(name))).peak_bytes);
        EXPECT_TRUE(warnings.empty());
    }
    EXPECT_TRUE(test::contains(binary_error(std::string(format::kBinaryMagic) + " 3\n"),
                               "binary report encoding version 3 is not one this memguard reads (1 to 2)"))
        << binary_error(std::string(format::kBinaryMagic) + " 3\n");
}

/// A churn of tensors and blocks, with more live blocks than version 2's window, frees in any
/// order, sizes from a few sites: both encodings give back the records, as text.
void churn(int version, uint32_t seed, std::string* binary, std::string* text) {
    std::mt19937 rng(seed);
    Builder b(version);
    std::string t = "MEMGUARD-REPORT 1\n";
    format::Line line;
    auto add = [&](const auto& r) {
        b.add(r);
        format::encode(r, line);
        t.append(line.finish());
    };
    format::encode(rec::Info{"format_minor", std::to_string(format::kFormatMinor)}, line);  // the Builder's
    t.append(line.finish());
    std::vector<std::pair<uint64_t, bool>> live;  // addr, tensor
    std::vector<uint64_t> free_addrs;
    int64_t now = 100;
    uint64_t next = 0x7f0000000000ull;
    for (int i = 0; i < 6000; ++i) {
        now += static_cast<int64_t>(rng() % 50000);
        const bool tensor = rng() % 4 != 0;
        if (live.empty() || (rng() % 100 < (live.size() < 400 ? 55u : 45u))) {
            const uint32_t site = 1 + rng() % 9;
            const uint64_t size = uint64_t{512} << (site % 5);
            uint64_t addr = next;
            if (!free_addrs.empty() && rng() % 3 != 0) {
                const size_t k = rng() % std::min<size_t>(free_addrs.size(), 40);
                addr = free_addrs[free_addrs.size() - 1 - k];
                free_addrs.erase(free_addrs.end() - 1 - static_cast<long>(k));
            } else {
                next += 0x100000;
            }
            if (tensor) {
                const uint64_t requested = rng() % 4 == 0 ? size - 16 : size;
                add(rec::TensorAlloc{now, 7, addr, size, requested, 0, 0, site, site % 3, 0, "-"});
            } else {
                add(rec::Alloc{now, 7, addr, size, format::Kind::Device, "cudaMalloc", 0, std::nullopt, site, 0,
                               site % 3});
            }
            live.emplace_back(addr, tensor);
        } else {
            // Mostly recent blocks, sometimes one far back (past the window).
            const size_t k = rng() % 8 == 0 ? rng() % live.size() : rng() % std::min<size_t>(live.size(), 6);
            const auto [addr, was_tensor] = live[live.size() - 1 - k];
            live.erase(live.end() - 1 - static_cast<long>(k));
            if (was_tensor) {
                add(rec::TensorFree{now, 7, addr, rng() % 5 == 0});
            } else {
                add(rec::Free{now, 7, addr, uint64_t{512}, "cudaFree", std::nullopt});
            }
            free_addrs.push_back(addr);
        }
    }
    add(rec::End{now + 1});
    *binary = b.bytes();
    *text = t;
}

TEST(Binary, ChurnsRoundTripInBothVersions) {
    for (int version : {format::binary::kVersion1, format::binary::kVersion}) {
        for (uint32_t seed : {1u, 2u, 3u}) {
            std::string binary, text;
            churn(version, seed, &binary, &text);
            EXPECT_TRUE(text_of(binary) == text) << "version " << version << " seed " << seed;
            // Cuts near the end read up to their last whole frame.
            const std::vector<size_t> ends = frame_ends(binary);
            for (size_t cut = binary.size() - 600; cut < binary.size(); cut += 29) {
                const size_t whole = *(std::upper_bound(ends.begin(), ends.end(), cut) - 1);
                EXPECT_EQ(parse_report(binary.substr(0, cut), "b.mgr").tensor_records,
                          parse_report(binary.substr(0, whole), "b.mgr").tensor_records);
            }
        }
    }
    // Version 2 is the smaller.
    std::string v1, v2, text;
    churn(format::binary::kVersion1, 1, &v1, &text);
    churn(format::binary::kVersion, 1, &v2, &text);
    EXPECT_LT(v2.size(), v1.size());
}

TEST(Binary, Version2PredictsRequestedSizeAddressAndTheFreedBlock) {
    // A site allocates 4 KiB three times (requested 4000, then 4 KiB), at three addresses; the
    // first block is freed (rank 2 among the live ones), then the site allocates again at its address.
    Builder b;
    const rec::TensorAlloc first{1000, 7, 0x7f0000000000, 4096, 4000, 0, 0, 5, 0, 0, "-"};
    b.add(first);
    b.add(rec::TensorAlloc{1100, 7, 0x7f0000100000, 4096, 4096, 0, 0, 5, 0, 0, "-"});
    b.add(rec::TensorAlloc{1200, 7, 0x7f0000200000, 4096, 4096, 0, 0, 5, 0, 0, "-"});
    b.add(rec::TensorFree{1300, 7, 0x7f0000000000, false});
    b.add(rec::TensorAlloc{1400, 7, 0x7f0000000000, 4096, 4096, 0, 0, 5, 0, 0, "-"});
    b.add(rec::TensorFree{1500, 7, 0x7f0000000000, false});  // the newest: rank 0
    const auto f = frames_of(b.bytes());
    ASSERT_EQ(f.size(), 7u);
    // The second T: its time (bit 1) and address (bit 3: 0x100000 from the first, zigzag); its
    // requested is its size, its size its site's, its stack the one before.
    EXPECT_EQ(f[2].first, 'T');
    EXPECT_EQ(f[2].second, std::string("\x0a\xc8\x01\x80\x80\x80\x01", 7));
    // The free of the oldest: mask bit 0 (a rank), bit 1 (t), bit 4 (gc: the first t); rank 2;
    // t + 100; gc 0.
    EXPECT_EQ(f[4].first, 't');
    EXPECT_EQ(f[4].second, std::string("\x13\x02\xc8\x01\x00", 5));
    // The allocation at the freed block's address: only its time (bit 1), the address is rank 0
    // of the blocks of its size freed last.
    EXPECT_EQ(f[5].second, std::string("\x02\xc8\x01", 3));
    // Its free: the newest live block, only its time.
    EXPECT_EQ(f[6].second, std::string("\x02\xc8\x01", 3));
    const Report r = parse_report(b.bytes(), "b.mgr");
    ASSERT_EQ(r.tensors.size(), 4u);
    EXPECT_EQ(r.tensors[3].addr, 0x7f0000000000u);
    EXPECT_EQ(r.tensors[3].requested, 4096u);
    EXPECT_EQ(r.tensors[3].size, 4096u);
    EXPECT_EQ(r.tensors[3].stack_id, 5u);
    EXPECT_EQ(r.tensors[0].t_free, 1300);
    EXPECT_EQ(r.tensors[3].t_free, 1500);
    // In version 1 the same records code the requested size (the last T's was 4000).
    Builder b1(format::binary::kVersion1);
    b1.add(first);
    b1.add(rec::TensorAlloc{1100, 7, 0x7f0000100000, 4096, 4096, 0, 0, 5, 0, 0, "-"});
    EXPECT_EQ(frames_of(b1.bytes())[2].second, std::string("\x15\xc8\x01\x80\x80\x80\x01\x80\x20", 9));
}

TEST(Binary, Version2RanksPastWhatTheFileHoldsGetOneClearError) {
    Builder b;
    b.add(rec::TensorAlloc{1000, 7, 0x7f0000000000, 4096, 4096, 0, 0, 5, 0, 0, "-"});
    // A free of the live block of rank 9 (there is one): mask rank, t, gc; rank 9; t; gc.
    const std::string far_free = b.bytes() + std::string("t\x05\x13\x09\xc8\x01\x00", 7);
    const std::string err = binary_error(far_free);
    EXPECT_TRUE(test::contains(err, "malformed t record: no address (field addr): rank 9 is past the live blocks"))
        << err;
    // An allocation at rank 1 of the blocks of its size freed last (none were).
    Builder c;
    c.add(rec::TensorAlloc{1000, 7, 0x7f0000000000, 4096, 4096, 0, 0, 5, 0, 0, "-"});
    const std::string far_alloc = c.bytes() + std::string("T\x04\x03\x01\xc8\x01", 6);
    const std::string err2 = binary_error(far_alloc);
    EXPECT_TRUE(test::contains(err2, "malformed T record: no address (field addr): rank 1 is past the blocks of its "
                                     "size freed last"))
        << err2;
    // A first allocation that leaves its stack to a prediction.
    const std::string lone = Builder().bytes() + std::string("T\x03\x02\xc8\x01", 5);
    const std::string err3 = binary_error(lone);
    EXPECT_TRUE(test::contains(err3, "malformed T record: no tid")) << err3;
}

}  // namespace
}  // namespace memguard::report
