// `memguard steps` and the per-rank summary through the streaming reader (report/stream_steps.h)
// against load_report: the same step rows in both series, the same growth, the same categories at
// every step's peak and at the growth's ends, the same site tables there and the same fate of the
// growth, on every report of golden/ and on made-up ones; and the CLI's rank summary (streamed by
// `summarize`) equal to the one of the report read whole (`export --jsonl`).
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "report/categories.h"
#include "report/steps.h"
#include "report/stream.h"
#include "report/stream_steps.h"
#include "report/timeline.h"
#include "test_util.h"

namespace memguard::report {
namespace {

std::string text_of(const std::vector<StepRow>& rows) {
    std::ostringstream o;
    for (const StepRow& r : rows) {
        o << r.index << " " << r.t_begin << ".." << r.t_end << " " << r.events_begin << ".." << r.events_end << " "
          << r.entry_bytes << " " << r.peak_bytes << "@" << r.peak_events << "," << r.peak_t << " " << r.exit_bytes
          << "\n";
    }
    return o.str();
}

std::string text_of(const Breakdown& b) {
    std::ostringstream o;
    o << b.total << " n=" << b.events_applied << " t=" << b.t << " m=" << (b.moment ? b.moment->id : -1) << ":";
    for (const CategoryPart& p : b.parts) {
        o << " " << part_label(p) << "=" << p.bytes << "," << p.blocks << "," << p.estimated_bytes;
        for (const Site& s : p.sites) o << "[" << s.stack_id << "/" << s.python_stack_id << "=" << s.bytes << "]";
    }
    return o.str();
}

std::string text_of(const SiteTable& t) {
    std::ostringstream o;
    o << t.total_bytes << " " << t.total_blocks << " " << t.total_handles << " " << t.total_requested << ":";
    for (const Site& s : t.sites) {
        o << " " << s.stack_id << "/" << s.python_stack_id << "/" << s.physical << "=" << s.bytes << "," << s.blocks;
    }
    return o.str();
}

std::string text_of(const std::vector<GrowthSite>& sites) {
    std::string out;
    for (const GrowthSite& s : sites) {
        out += " " + std::to_string(s.stack_id) + "/" + std::to_string(s.python_stack_id) + "=" +
               std::to_string(s.bytes);
    }
    return out;
}

std::string text_of(const GrowthFate& f) {
    std::ostringstream o;
    o << f.exact << " growth " << f.growth_bytes << " collected " << f.collected_bytes << " released "
      << f.released_bytes << " held " << f.held_bytes << " known " << f.known_bytes << " window " << f.window_bytes
      << " baseline " << f.baseline_bytes << " " << f.window_first << ".." << f.window_last << " " << f.window_tail
      << " tested " << f.held_tested_bytes << " through " << (f.full_through ? std::to_string(*f.full_through) : "-")
      << "\ncollections";
    for (const GrowthCollection& c : f.collections) {
        o << " " << (c.collection ? std::to_string(*c.collection) : "-") << "=" << c.bytes;
    }
    o << "\ncollected" << text_of(f.collected_sites) << "\nheld" << text_of(f.held_sites);
    return o.str();
}

/// Both readers over `path`, in both series, with `rule`: rows, growth, breakdowns at every step's
/// peak and at the growth's ends, site tables there and the growth's fate. Returns the growths found.
size_t expect_same_steps(const std::string& path, const GrowthRule& rule) {
    SCOPED_TRACE(path);
    const Report full = load_report(path);
    StepRowsObserver rows;
    TensorTagObserver tags;
    Observers first({&rows, &tags});
    const Report r = stream_report(path, first);
    const std::unordered_map<size_t, Category> tag_map = tags.take();
    const Timeline tl = build_timeline(full);
    BreakdownOptions options;
    options.max_sites = 2;
    size_t growths = 0;
    for (Series series : {Series::Gpu, Series::Tensors}) {
        SCOPED_TRACE(series_name(series));
        const std::vector<StepRow> whole = step_rows(full, tl, series);
        EXPECT_EQ(text_of(whole), text_of(rows.rows(series)));
        std::vector<uint64_t> ends;
        for (const StepRow& row : whole) ends.push_back(row.exit_bytes);
        const std::optional<Growth> g = find_growth(ends, rule);
        std::vector<size_t> points;
        for (const StepRow& row : whole) points.push_back(row.peak_events);
        points.push_back(0);
        points.push_back(full.events.size());
        if (g) {
            ++growths;
            points.push_back(whole[g->first].events_end);
            points.push_back(whole[g->last].events_end);
        }
        const std::vector<Breakdown> expected = breakdowns_at(full, points, options);
        PointBreakdowns breakdowns(r, options, &tag_map);
        StepPointsObserver second(plan_points(r, whole, g, series, points), breakdowns);
        stream_report(path, second);
        for (size_t i = 0; i < points.size(); ++i) {
            SCOPED_TRACE("point " + std::to_string(points[i]));
            Breakdown a = expected[i];
            // A point before any event: the whole report's breakdown says t 0 as well.
            EXPECT_EQ(text_of(a), text_of(second.at(points[i])));
        }
        if (!g) continue;
        const bool tensors = series == Series::Tensors;
        auto table = [&](size_t at) {
            LiveSet live = live_after(full, at);
            return tensors ? group_tensors_by_site(full, live) : group_by_site(full, live, KindFilter::Gpu);
        };
        EXPECT_EQ(text_of(table(whole[g->first].events_end)), text_of(second.from_table()));
        EXPECT_EQ(text_of(table(whole[g->last].events_end)), text_of(second.to_table()));
        EXPECT_EQ(text_of(growth_fate(full, whole, *g, series, 5)),
                  text_of(growth_fate(r, whole, *g, series, 5, second.take_items())));
    }
    return growths;
}

using test::golden_reports;

bool loads(const std::string& path) {
    try {
        load_report(path);
        return true;
    } catch (const ReportError&) {
        return false;
    }
}

/// A rule that finds growth in most reports with steps: every run of two rising step ends.
GrowthRule eager_rule() {
    GrowthRule rule;
    rule.warmup = 0;
    rule.min_steps = 2;
    rule.min_per_step = 1;
    return rule;
}

TEST(StreamSteps, EveryGoldenReportGivesTheSameStepsBothWays) {
    size_t with_steps = 0, growths = 0;
    for (const std::string& path : golden_reports()) {
        if (!loads(path)) continue;
        with_steps += load_report(path).steps.empty() ? 0 : 1;
        growths += expect_same_steps(path, GrowthRule{});
        growths += expect_same_steps(path, eager_rule());
    }
    EXPECT_GE(with_steps, 8u);
    EXPECT_GE(growths, 10u);  // the fates were compared, not only the rows
}

/// A made-up report of allocator mode with steps, moments that tag tensor blocks, collections that
/// free tensor blocks (gc 1) and segments, from `seed`.
std::string made_up_report(unsigned seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
    std::ostringstream o;
    o << "I format_minor 9\nI allocator memguard\n";
    o << "M 0 3000 4000 0 - /opt/x/torch/lib/libc10_cuda.so\nM 1 7000 8000 0 - /opt/x/lib/libnccl.so.2\n";
    o << "S 1 3100\nS 2 7100\nS 3 3200\n";
    o << "p 1 14 <module> /opt/app/train.py\np 2 41 forward /opt/app/model.py\n";
    o << "P 1 1\nP 2 2 1\n";
    const uint64_t kSeg = 0x7f0000000000ULL;
    std::vector<uint64_t> tensor_size(48, 0), segment_size(6, 0);
    int64_t t = 1000;
    // The segment of PyTorch's allocator (stack 1: libc10_cuda) that holds every tensor block.
    o << "A " << t << " 1 " << std::hex << kSeg << std::dec << " " << 0x4000000 << " device cudaMalloc 0 - 1 0 0\n";
    int step = 0, moment = 0;
    const int records = 300 + pick(300);
    const bool leaky = pick(2) == 0;
    for (int i = 0; i < records; ++i) {
        t += 1 + pick(1000);
        const int what = pick(100);
        if (what < 40) {
            const int k = pick(48);
            const uint64_t addr = kSeg + 0x100000ULL * static_cast<uint64_t>(k);
            if (tensor_size[k] == 0) {
                tensor_size[k] = 512ULL * static_cast<uint64_t>(1 + pick(2048));
                o << "T " << t << " " << 1 + pick(2) << " " << std::hex << addr << std::dec << " " << tensor_size[k]
                  << " " << tensor_size[k] - pick(500) << " 0 0 " << pick(4) << " " << pick(3) << " 0 -\n";
            } else if (!leaky || k % 3 != 0) {
                o << "t " << t << " " << 1 + pick(2) << " " << std::hex << addr << std::dec << " " << (pick(4) == 0)
                  << "\n";
                tensor_size[k] = 0;
            }
        } else if (what < 50) {
            const int k = pick(6);
            const uint64_t addr = 0x7e0000000000ULL + 0x10000000ULL * static_cast<uint64_t>(k);
            if (segment_size[k] == 0) {
                segment_size[k] = 0x100000ULL * static_cast<uint64_t>(1 + pick(64));
                o << "A " << t << " " << 1 + pick(2) << " " << std::hex << addr << std::dec << " " << segment_size[k]
                  << " device cudaMalloc 0 - " << pick(4) << " 0 " << pick(3) << "\n";
            } else {
                o << "F " << t << " " << 1 + pick(2) << " " << std::hex << addr << std::dec << " 0 cudaFree -\n";
                segment_size[k] = 0;
            }
        } else if (what < 58) {
            o << "s " << t << " 1 " << ++step << " optimizer AdamW\n";
        } else if (what < 64) {
            const int gen = pick(3);
            o << "Y " << t << " " << 1 + pick(2) << " automatic " << gen << " " << pick(5000) << " 10 0 "
              << static_cast<int64_t>(pick(1 << 22)) - (1 << 20) << " - - - -\n";
        } else if (what < 68) {
            ++moment;
            o << "h " << t << " 1 " << moment << " step " << step << "\n";
            int tags = 0;
            static const char* kCategories[] = {"parameter", "gradient", "optimizer_state", "activation",
                                                "other_tensor"};
            for (int k = 0; k < 48; ++k) {
                if (tensor_size[k] == 0 || pick(3) != 0) continue;
                o << "g " << moment << " 0 " << std::hex
                  << kSeg + 0x100000ULL * static_cast<uint64_t>(k) + static_cast<uint64_t>(pick(64)) << std::dec << " "
                  << 256 << " " << kCategories[pick(5)] << " -\n";
                ++tags;
            }
            o << "k " << t + 5 << " " << moment << " " << tags << " 0 1\n";
            t += 10;
        }
    }
    o << "Z " << t + 1 << "\n";
    return o.str();
}

std::string write_report(const std::string& body, unsigned seed) {
    // One file per test and process: ctest runs the tests of this binary in parallel processes.
    std::string path = ::testing::TempDir() + "stream_steps_test." + std::to_string(getpid()) + "." +
                       std::to_string(seed) + ".mgr";
    std::ofstream(path) << test::kHeader << body;
    return path;
}

TEST(StreamSteps, MadeUpReportsGiveTheSameStepsBothWays) {
    size_t growths = 0, read = 0;
    for (unsigned seed = 1; seed <= 40; ++seed) {
        SCOPED_TRACE("seed " + std::to_string(seed));
        const std::string path = write_report(made_up_report(seed), seed);
        Report full;
        ASSERT_NO_THROW(full = load_report(path));
        EXPECT_FALSE(full.steps.empty());
        EXPECT_FALSE(full.moments.empty());
        ++read;
        growths += expect_same_steps(path, GrowthRule{});
        growths += expect_same_steps(path, eager_rule());
        std::remove(path.c_str());
    }
    EXPECT_EQ(read, 40u);
    EXPECT_GE(growths, 20u);
}

/// The rank summary object: `summarize` (the streaming reader) writes it beside the report,
/// `export --jsonl` (the report read whole) carries it in its first line.
TEST(StreamSteps, RankSummaryIsTheSameBothWays) {
    const std::string dir = ::testing::TempDir() + "stream_steps_test." + std::to_string(getpid());
    ASSERT_EQ(test::run_cli("--version").rc, 0);
    std::vector<std::string> paths = golden_reports();
    for (unsigned seed = 1; seed <= 6; ++seed) paths.push_back(write_report(made_up_report(seed), seed));
    size_t compared = 0;
    for (const std::string& source : paths) {
        if (!loads(source)) continue;
        SCOPED_TRACE(source);
        ASSERT_EQ(std::system(
                      ("rm -rf '" + dir + "' && mkdir -p '" + dir + "' && cp '" + source + "' '" + dir + "/r.mgr'")
                          .c_str()),
                  0);
        const test::CliResult summarize = test::run_cli("summarize r.mgr", "cd '" + dir + "' &&");
        ASSERT_EQ(summarize.rc, 0) << summarize.out;
        const test::CliResult exported = test::run_cli("export --jsonl -o r.jsonl r.mgr", "cd '" + dir + "' &&");
        ASSERT_EQ(exported.rc, 0) << exported.out;
        std::ifstream jsonl(dir + "/r.jsonl");
        std::string line;
        ASSERT_TRUE(std::getline(jsonl, line));
        const nlohmann::json whole = nlohmann::json::parse(line).at("summary");
        std::ifstream beside(dir + "/r.mgr.summary.json");
        const nlohmann::json streamed = nlohmann::json::parse(beside);
        EXPECT_EQ(whole.dump(1), streamed.dump(1));
        ++compared;
    }
    EXPECT_GE(compared, 40u);
    std::system(("rm -rf '" + dir + "'").c_str());
}

/// A fold keeps the site tables of growth_candidates' step ends only: whatever ends come after, the
/// growth found over them all begins and ends at a candidate (or after the fold's ends).
TEST(StreamSteps, AGrowthFoundLaterBeginsAndEndsAtACandidateOfAnyEarlierPrefix) {
    std::mt19937_64 rng(7);
    const uint64_t MiB = 1 << 20;
    size_t growths = 0, dropped = 0;
    for (int trial = 0; trial < 3000; ++trial) {
        // Live bytes at step ends: plateaus, rises, small dips and drops, as training loops make.
        std::vector<uint64_t> ends;
        uint64_t level = 100 * MiB;
        const size_t n = 1 + rng() % 40;
        for (size_t i = 0; i < n; ++i) {
            switch (rng() % 6) {
            case 0: level += (1 + rng() % 4) * MiB; break;
            case 1: level -= std::min(level, (rng() % 3) * MiB / 4); break;    // within max_drop, or not
            case 2: level -= std::min(level / 2, (5 + rng() % 20) * MiB); break;  // a drop
            default: break;                                                     // a plateau
            }
            ends.push_back(level);
        }
        const std::optional<Growth> g = find_growth(ends);
        if (g) ++growths;
        for (size_t k = 1; k <= n; ++k) {
            const std::vector<uint64_t> prefix(ends.begin(), ends.begin() + static_cast<long>(k));
            const std::vector<size_t> c = growth_candidates(prefix);
            dropped += k - c.size();
            if (!g) continue;
            for (size_t i : {g->first, g->last}) {
                if (i < k) {
                    EXPECT_TRUE(std::binary_search(c.begin(), c.end(), i))
                        << "trial " << trial << " end " << i << " of prefix " << k;
                }
            }
        }
    }
    EXPECT_GT(growths, 300u);
    EXPECT_GT(dropped, 10000u) << "the candidates leave most ends out";
}

}  // namespace
}  // namespace memguard::report
