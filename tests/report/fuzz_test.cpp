// Robustness: the reader must answer every input with a Report or a one-line ReportError, never a crash
// or another exception; and random valid reports must give the figures of an independent model.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "report/analysis.h"
#include "report/captures.h"
#include "report/categories.h"
#include "report/collections.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::kHeader;

uint32_t seed() {
    const char* s = std::getenv("MEMGUARD_FUZZ_SEED");
    return s != nullptr ? static_cast<uint32_t>(std::strtoul(s, nullptr, 10)) : 20251130u;
}

std::string golden(const std::string& name) { return test::read_file(std::string(MEMGUARD_GOLDEN_DIR) + "/" + name); }

/// Parses `content`; on success runs every analysis and checks its invariants. Returns false on a
/// ReportError (after checking that its message is one line naming the file).
bool exercise(const std::string& content, std::mt19937& rng) {
    Report r;
    try {
        r = parse_report(content, "fuzz.mgr");
    } catch (const ReportError& e) {
        std::string what = e.what();
        EXPECT_EQ(what.rfind("fuzz.mgr", 0), 0u) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        return false;
    }
    Summary s = summarize(r);
    EXPECT_GE(s.peak_bytes, s.live_bytes_at_exit);
    EXPECT_LE(s.frees, s.allocations);
    for (const Event& e : r.events) {
        switch (e.type) {
        case Event::Alloc:
        case Event::Free:
        case Event::Restore: EXPECT_LT(e.block, r.blocks.size()); break;
        case Event::Reserve:
        case Event::AddressFree: EXPECT_LT(e.block, r.reservations.size()); break;
        case Event::Create:
        case Event::Release: EXPECT_LT(e.block, r.handles.size()); break;
        case Event::Map:
        case Event::Unmap: EXPECT_LT(e.block, r.mappings.size()); break;
        case Event::TensorAlloc:
        case Event::TensorFree: EXPECT_LT(e.block, r.tensors.size()); break;
        }
    }
    // Minor 9: an explanation and the Y that names it point at each other.
    for (size_t i = 0; i < r.explanations.size(); ++i) {
        const auto& c = r.explanations[i].collection;
        EXPECT_TRUE(!c || *c < r.collections.size());
        if (c && *c < r.collections.size()) {
            EXPECT_EQ(r.collections[*c].explanation, std::optional<size_t>(i));
        }
    }
    for (const Collection& c : r.collections) {
        EXPECT_TRUE(!c.explanation || *c.explanation < r.explanations.size());
    }
    EXPECT_LE(s.virt.physical_bytes, s.virt.peak_physical_bytes);
    EXPECT_LE(s.virt.mapped_bytes, s.virt.peak_mapped_bytes);
    LiveSet peak = live_at(r, {TimePoint::Peak, 0});
    SiteTable peak_sites = group_by_site(r, peak, KindFilter::Gpu);
    EXPECT_EQ(peak_sites.total_bytes, s.peak_bytes);
    // Categories: the parts add up to the GPU bytes live, at the peaks and the end.
    BreakdownOptions bo;
    bo.symbolizer.sysroot = "/nonexistent-fuzz-root";
    for (const Breakdown& b : breakdowns_at(r, {s.peak_events, s.tensor_peak_events, r.events.size()}, bo)) {
        uint64_t sum = 0;
        for (const CategoryPart& p : b.parts) sum = sum + p.bytes < sum ? UINT64_MAX : sum + p.bytes;
        EXPECT_EQ(sum, b.total);
        if (b.events_applied == s.peak_events) {
            EXPECT_EQ(b.total, s.peak_bytes);
        }
    }
    int64_t t = static_cast<int64_t>(rng() % 2000000000u);
    SiteTable at_t = group_by_site(r, live_at(r, {TimePoint::Time, t}), KindFilter::All);
    EXPECT_LE(at_t.sites.size(), r.blocks.size() + r.handles.size());
    SiteTable at_exit = group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu);
    EXPECT_EQ(at_exit.total_bytes, s.live_bytes_at_exit);
    uint64_t pooled = 0;
    for (const Pool& p : group_by_pool(r, peak, KindFilter::Gpu)) pooled += p.table.total_bytes;
    EXPECT_EQ(pooled, s.peak_bytes);
    for (const CaptureStats& c : capture_stats(r)) {
        EXPECT_LE(c.live_owned_bytes_at_exit, c.owned_bytes);
        for (size_t e : c.execs) EXPECT_LT(e, r.execs.size());
    }
    for (const FreeWhileGraphAlive& h : r.hazards.frees_while_graph_alive) {
        EXPECT_TRUE(!h.block || *h.block < r.blocks.size());
        EXPECT_TRUE(!h.exec_index || *h.exec_index < r.execs.size());
    }
    uint64_t retained = 0;
    for (const RetentionBoundary& b : retention_boundaries(r)) retained += b.sites.size();
    EXPECT_LE(retained, r.hazards.warmup_retention.size());
    uint64_t collections = 0;
    for (const TriggerTotals& t : collection_totals(r)) collections += t.count;
    EXPECT_EQ(collections, r.collections.size());
    return true;
}

/// Every prefix of `base` (a valid report) is read, up to its last complete line, once the header
/// line is complete; a prefix cut inside a line says so in its first warning.
void check_every_truncation(const std::string& name, std::mt19937& rng) {
    std::string base = golden(name);
    ASSERT_GT(base.size(), 500u) << name;
    const size_t header_end = base.find('\n') + 1;
    for (size_t cut = 0; cut <= base.size(); ++cut) {
        std::string prefix = base.substr(0, cut);
        EXPECT_EQ(exercise(prefix, rng), cut >= header_end) << name << " cut at " << cut;
        if (cut < header_end) continue;
        Report r = parse_report(prefix, "fuzz.mgr");
        const bool at_boundary = base[cut - 1] == '\n';
        const bool says_cut = !r.warnings.empty() &&
                              test::contains(r.warnings[0], "truncated at byte " + std::to_string(cut) + " (");
        EXPECT_EQ(says_cut, !at_boundary) << name << " cut at " << cut;
        // What a cut prefix holds is what its complete lines hold.
        Report whole_lines = parse_report(base.substr(0, base.rfind('\n', cut - 1) + 1), "fuzz.mgr");
        EXPECT_EQ(r.blocks.size(), whole_lines.blocks.size()) << name << " cut at " << cut;
        EXPECT_EQ(r.events.size(), whole_lines.events.size()) << name << " cut at " << cut;
    }
}

TEST(Fuzz, EveryTruncationOfAValidReport) {
    std::mt19937 rng(seed());
    check_every_truncation("basic.mgr", rng);
}

TEST(Fuzz, EveryTruncationOfTheFormat12Reports) {
    std::mt19937 rng(seed());
    for (const char* name : {"graphs.mgr", "gc.mgr", "vmm_expandable.mgr", "vmm_release_mapped.mgr", "vmm_mixed.mgr"}) {
        check_every_truncation(name, rng);
    }
}

TEST(Fuzz, RandomByteMutations) {
    std::mt19937 rng(seed());
    const std::string bases[] = {golden("basic.mgr"), golden("incomplete.mgr"),     golden("graphs.mgr"),
                                 golden("gc.mgr"),    golden("vmm_expandable.mgr"), golden("vmm_release_mapped.mgr")};
    const char interesting[] = {' ', '\n', '%', '-', '0', '9', 'f', 'A', 'F', 'R', 'Z', '\0', '\xff', '\r'};
    size_t parsed = 0, refused = 0;
    for (int iter = 0; iter < 4000; ++iter) {
        std::string s = bases[iter % (sizeof bases / sizeof *bases)];
        int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits && !s.empty(); ++e) {
            size_t pos = rng() % s.size();
            switch (rng() % 4) {
            case 0: s[pos] = static_cast<char>(rng() % 256); break;
            case 1: s[pos] = interesting[rng() % sizeof interesting]; break;
            case 2: s.erase(pos, 1 + rng() % 8); break;
            default: s.insert(pos, 1, interesting[rng() % sizeof interesting]); break;
            }
        }
        (exercise(s, rng) ? parsed : refused)++;
    }
    EXPECT_GT(parsed, 100u);  // both outcomes occur: the mutations are neither all harmless nor all fatal
    EXPECT_GT(refused, 100u);
}

TEST(Fuzz, RandomRecordSoup) {
    std::mt19937 rng(seed());
    const char* types[] = {"I", "M", "S", "A", "F", "R", "E", "H", "Z", "X", "",
                           "C", "c", "G", "L", "D", "K", "W", "p", "P", "Y", "I format_minor",
                           "V", "v", "N", "n", "Q", "q", "j", "u", "y", "r", "I format_minor 9\nY"};
    const char* words[] = {"0",
                           "1",
                           "-1",
                           "-",
                           "7f00",
                           "ffffffffffffffff",
                           "10000000000000000",
                           "device",
                           "async",
                           "pinned",
                           "managed",
                           "cudaMalloc",
                           "%",
                           "%zz",
                           "%41",
                           "2",
                           "a0",
                           "99999999999999999999",
                           "/x",
                           "",
                           "relaxed",
                           "global",
                           "begin",
                           "end",
                           "unsafe_call",
                           "free_live_graph",
                           "warmup_retention",
                           "automatic",
                           "memguard",
                           "0/0,0/1",
                           "3",
                           "7f0000001000",
                           "a001",
                           "recompute",
                           "step",
                           "frame",
                           "saved",
                           "activation"};
    size_t parsed = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        std::string s = kHeader;
        int lines = static_cast<int>(rng() % 30);
        for (int l = 0; l < lines; ++l) {
            s += types[rng() % (sizeof types / sizeof *types)];
            int fields = static_cast<int>(rng() % 12);
            for (int f = 0; f < fields; ++f) s += std::string(" ") + words[rng() % (sizeof words / sizeof *words)];
            s += "\n";
        }
        parsed += exercise(s, rng) ? 1 : 0;
    }
    EXPECT_GT(parsed, 10u);
}

TEST(Fuzz, FilesWithRandomCutsAndGarbage) {
    std::mt19937 rng(seed());
    test::TempDir dir;
    std::string base = golden("basic.mgr");
    for (int iter = 0; iter < 200; ++iter) {
        std::string s = base.substr(0, rng() % (base.size() + 1));
        if (iter % 3 == 0) {
            for (int i = 0; i < 50; ++i) s.push_back(static_cast<char>(rng() % 256));
        }
        std::string path = dir.write("f.mgr", s);
        try {
            Report r = load_report(path);
            Report same = parse_report(s, path);
            EXPECT_EQ(r.blocks.size(), same.blocks.size());
            EXPECT_EQ(r.warnings, same.warnings);
        } catch (const ReportError& e) {
            // The file reader and the memory reader agree on the error too.
            try {
                parse_report(s, path);
                ADD_FAILURE() << "only the file reader failed: " << e.what();
            } catch (const ReportError& e2) {
                EXPECT_STREQ(e.what(), e2.what());
            }
        }
    }
}

// --- random valid reports against a model --------------------------------------------------------

struct Model {
    uint64_t live = 0, peak = 0;
    int64_t peak_t = -1;
    uint64_t allocations = 0, frees = 0, restores = 0;
    std::map<uint64_t, uint64_t> live_blocks;                  // addr -> size (GPU and pinned)
    std::map<uint64_t, std::pair<uint64_t, bool>> last_freed;  // addr -> size, is_gpu
    std::map<uint64_t, bool> gpu;                              // addr -> is_gpu of the live block
};

void model_change(Model& m, uint64_t size, bool gpu, bool up, int64_t t) {
    if (!gpu) return;
    m.live = up ? m.live + size : m.live - size;
    if (m.live > m.peak) {
        m.peak = m.live;
        m.peak_t = t;
    }
}

/// One random record that keeps the report valid; times rise per thread but interleave across threads.
std::string random_event(Model& m, std::mt19937& rng, int64_t (&clock)[3]) {
    int tid = static_cast<int>(rng() % 3);
    int64_t t = clock[tid] += 1 + rng() % 1000;
    std::string ts = std::to_string(t) + " " + std::to_string(100 + tid) + " ";
    unsigned what = rng() % 10;
    if (what < 5 || m.live_blocks.empty()) {
        uint64_t addr = 0x7f0000000000 + (rng() % 64) * 0x1000;
        if (m.live_blocks.count(addr) != 0) return "";
        uint64_t size = 1 + rng() % 100000;
        bool pinned = rng() % 5 == 0;
        const char* kinds[] = {"device", "async", "managed"};
        m.live_blocks[addr] = size;
        m.gpu[addr] = !pinned;
        m.last_freed.erase(addr);
        ++m.allocations;
        model_change(m, size, !pinned, true, t);
        char a[32];
        std::snprintf(a, sizeof a, "%llx", static_cast<unsigned long long>(addr));
        return "A " + ts + a + " " + std::to_string(size) + " " + (pinned ? "pinned" : kinds[rng() % 3]) + " api " +
               (pinned ? "-1" : "0") + " - " + std::to_string(1 + rng() % 5) + "\n";
    }
    if (what < 9) {
        auto it = m.live_blocks.begin();
        std::advance(it, static_cast<long>(rng() % m.live_blocks.size()));
        uint64_t addr = it->first, size = it->second;
        bool gpu = m.gpu[addr];
        m.live_blocks.erase(it);
        ++m.frees;
        model_change(m, size, gpu, false, t);
        char a[32];
        std::snprintf(a, sizeof a, "%llx", static_cast<unsigned long long>(addr));
        std::string rec = "F " + ts + a + " " + std::to_string(size) + " cudaFree -\n";
        if (rng() % 4 == 0) {  // the free failed: restored at once
            m.live_blocks[addr] = size;
            --m.frees;
            ++m.restores;
            model_change(m, size, gpu, true, t);
            rec += "R " + ts + a + " 1\n";
        }
        return rec;
    }
    return "H " + std::to_string(t) + "\n";
}

TEST(Fuzz, RandomValidReportsMatchAModel) {
    std::mt19937 rng(seed());
    for (int iter = 0; iter < 300; ++iter) {
        Model m;
        int64_t clock[3] = {0, 0, 0};
        std::string s = kHeader + "M 0 1000 2000 0 - /x\nS 1 1001\nS 2 1002\nS 3 1003\nS 4 1004\nS 5 1005\n";
        int n = static_cast<int>(rng() % 200);
        for (int i = 0; i < n; ++i) s += random_event(m, rng, clock);
        bool complete = rng() % 2 == 0;
        if (complete) s += "Z " + std::to_string(std::max({clock[0], clock[1], clock[2]}) + 1) + "\n";
        Report r = parse_report(s, "model.mgr");
        ASSERT_EQ(r.warnings.size(), complete ? 0u : 1u) << s;
        Summary sum = summarize(r);
        ASSERT_EQ(sum.allocations, m.allocations);
        ASSERT_EQ(sum.frees, m.frees);
        ASSERT_EQ(sum.failed_frees, m.restores);
        ASSERT_EQ(sum.peak_bytes, m.peak) << s;
        ASSERT_EQ(sum.peak_t.value_or(-1), m.peak_t) << s;
        ASSERT_EQ(sum.live_bytes_at_exit, m.live);
        uint64_t gpu_blocks = 0;
        for (const auto& [addr, size] : m.live_blocks) gpu_blocks += m.gpu[addr] ? 1 : 0;
        ASSERT_EQ(sum.live_blocks_at_exit, gpu_blocks);
        ASSERT_EQ(live_at(r, {TimePoint::Exit, 0}).blocks.size(), m.live_blocks.size());
    }
}

}  // namespace
}  // namespace memguard::report
