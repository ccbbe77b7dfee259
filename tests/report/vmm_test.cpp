// Format minor 3: driver virtual memory management records (V v N n Q q) and the figures derived
// from them by LevelWalk, the one definition of GPU live, mapped, reserved and physical bytes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>

#include "report/analysis.h"
#include "report/captures.h"
#include "report/levels.h"
#include "test_util.h"

namespace memguard::report {
namespace {

using test::contains;
using test::error_of;
using test::kHeader;
using test::parse;

constexpr uint64_t MiB = 1 << 20;
const std::string kMinor3 = "I format_minor 3\n";

/// The levels after the events up to (not including) index n.
Levels after(const Report& r, size_t n) {
    LevelWalk w(r);
    w.advance_to(n);
    return w.levels();
}

TEST(VmmRecords, FieldsOfEachRecord) {
    Report r = parse(kMinor3 + "M 0 0 ffff 0 - /a\nS 1 10\nV 100 7 7f4000000000 1073741824 1 0\n"
                               "N 110 7 a001 2097152 0 1 0 0\n"
                               "Q 120 7 7f4000000000 2097152 0 a001\nq 130 7 7f4000000000 2097152\nn 140 7 a001\n"
                               "v 150 7 7f4000000000 1073741824\nZ 200\n");
    ASSERT_EQ(r.reservations.size(), 1u);
    EXPECT_EQ(r.reservations[0].va, 0x7f4000000000u);
    EXPECT_EQ(r.reservations[0].size, 1073741824u);
    EXPECT_EQ(r.reservations[0].stack_id, 1u);
    EXPECT_EQ(r.reservations[0].t_free, std::optional<int64_t>(150));
    ASSERT_EQ(r.handles.size(), 1u);
    EXPECT_EQ(r.handles[0].handle, 0xa001u);
    EXPECT_EQ(r.handles[0].size, 2 * MiB);
    EXPECT_EQ(r.handles[0].device, 0);
    EXPECT_EQ(r.handles[0].t_release, std::optional<int64_t>(140));
    EXPECT_EQ(r.handles[0].t_gone, std::optional<int64_t>(140));
    EXPECT_EQ(r.handles[0].maps, 1u);
    ASSERT_EQ(r.mappings.size(), 1u);
    EXPECT_EQ(r.mappings[0].handle, std::optional<size_t>(0));
    EXPECT_EQ(r.mappings[0].t_unmap, std::optional<int64_t>(130));
    ASSERT_EQ(r.events.size(), 6u);
    const Event::Type types[] = {Event::Reserve, Event::Create,  Event::Map,
                                 Event::Unmap,   Event::Release, Event::AddressFree};
    for (size_t i = 0; i < 6; ++i) {
        EXPECT_EQ(r.events[i].type, types[i]) << i;
        EXPECT_FALSE(r.events[i].is_block());
    }
    EXPECT_TRUE(r.warnings.empty());
}

TEST(VmmRecords, OlderMinorsIgnoreTheRecords) {
    Report r = parse("I format_minor 2\nV 100 7 7f40 64 0 0\nN 110 7 a001 64 0 0 0 0\nQ 120 7 7f40 64 0 a001\nZ 200\n");
    EXPECT_TRUE(r.reservations.empty());
    EXPECT_TRUE(r.handles.empty());
    EXPECT_TRUE(r.mappings.empty());
    EXPECT_TRUE(r.events.empty());
}

TEST(VmmRecords, MalformedRecordsNameFileLineAndField) {
    const std::string head = kHeader + kMinor3;
    EXPECT_EQ(error_of(head + "V 1 2 7f40 64 0\n"), "t.mgr:3: malformed V record: 6 fields expected, 5 found");
    EXPECT_EQ(error_of(head + "v 1 2 zz 64\n"), "t.mgr:3: malformed v record: bad address 'zz' (hex expected)");
    EXPECT_EQ(error_of(head + "N 1 2 a001 64 gpu 0 0 0\n"), "t.mgr:3: malformed N record: bad device 'gpu'");
    EXPECT_EQ(error_of(head + "n 1 2\n"), "t.mgr:3: malformed n record: 3 fields expected, 2 found");
    EXPECT_EQ(error_of(head + "Q 1 2 7f40 64 -1 a001\n"), "t.mgr:3: malformed Q record: bad offset '-1'");
    EXPECT_EQ(error_of(head + "q 1 2 7f40\n"), "t.mgr:3: malformed q record: 4 fields expected, 3 found");
}

TEST(VmmRecords, InconsistentRecordsAreWarningsNotErrors) {
    Report r = parse(kMinor3 +
                     "q 10 1 7f40 64\nn 20 1 a001\nv 30 1 7f40 64\nQ 40 1 7f40 64 0 b00\n"
                     "V 50 1 7f50 64 0 0\nV 60 1 7f50 128 0 0\nN 70 1 a001 64 0 0 0 0\nN 80 1 a001 32 0 0 0 0\n"
                     "Q 90 1 7f40 32 0 a001\nZ 100\n");
    std::string all;
    for (const std::string& w : r.warnings) all += w + "\n";
    EXPECT_TRUE(contains(all, "t.mgr:3: unmap of 7f40, which is not mapped; ignored")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:4: release of handle a001")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:5: address free of 7f40, which is not reserved")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:6: mapping at 7f40 of handle b00, which no N or m record made")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:8: address range reserved at 7f50, which is already reserved")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:10: physical memory created with handle a001, which is not released")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:11: mapping at 7f40, which is already mapped")) << all;
    // The end state: the second range, the second handle (the first taken as released; it was not
    // mapped, so its memory is gone), and the second mapping at 7f40.
    Levels end = after(r, r.events.size());
    EXPECT_EQ(end.reserved_bytes, 128u);
    EXPECT_EQ(end.physical_bytes, 32u);
    EXPECT_EQ(end.mapped_bytes, 32u);
    EXPECT_EQ(end.mappings, 1u);
}

TEST(VmmRecords, AnImportedHandleIsMappedAndReleasedWithoutCountingAsThisProcesssMemory) {
    // NCCL's peer buffers: a handle imported from another rank's file descriptor (m), mapped into
    // this process's range, unmapped, released; beside a handle of its own (N).
    const std::string minor11 = "I format_minor 11\n";
    Report r = parse(minor11 + "M 0 0 ffff 0 - /a\nS 1 10\nV 100 7 7f4000000000 8388608 1 0\n"
                               "N 110 7 a001 2097152 0 1 0 0\nQ 120 7 7f4000000000 2097152 0 a001\n"
                               "m 130 7 b001 1 0\nQ 140 7 7f4000200000 4194304 0 b001\n"
                               "q 150 7 7f4000200000 4194304\nn 160 7 b001\nm 170 7 b002 1 0\nZ 200\n");
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
    ASSERT_EQ(r.imports.size(), 2u);
    EXPECT_EQ(r.imports[0].handle, 0xb001u);
    EXPECT_EQ(r.imports[0].t_import, 130);
    EXPECT_EQ(r.imports[0].stack_id, 1u);
    EXPECT_EQ(r.imports[0].t_release, std::optional<int64_t>(160));
    EXPECT_EQ(r.imports[0].maps, 1u);
    EXPECT_FALSE(r.imports[1].t_release);
    ASSERT_EQ(r.mappings.size(), 2u);
    EXPECT_FALSE(r.mappings[1].handle);
    EXPECT_EQ(r.mappings[1].import, std::optional<size_t>(0));
    // The peer's memory is mapped here, and is not this process's physical or GPU memory.
    Levels mapped = after(r, 4);
    EXPECT_EQ(mapped.mapped_bytes, 6 * MiB);
    EXPECT_EQ(mapped.physical_bytes, 2 * MiB);
    EXPECT_EQ(mapped.gpu_bytes, 2 * MiB);
    Summary s = summarize(r);
    EXPECT_EQ(s.virt.imports, 2u);
    EXPECT_EQ(s.virt.peak_physical_bytes, 2 * MiB);
    // A file of minor 10 has no m: the record is skipped, and the mapping of its handle is unknown.
    Report old = parse("I format_minor 10\nm 130 7 b001 0 0\nQ 140 7 7f40 64 0 b001\nZ 200\n");
    EXPECT_TRUE(old.imports.empty());
    ASSERT_EQ(old.warnings.size(), 1u);
    EXPECT_TRUE(contains(old.warnings[0], "which no N or m record made")) << old.warnings[0];
}

TEST(VmmRecords, AnImportTwiceOrOfACreatedHandleIsAWarning) {
    Report r = parse("I format_minor 11\nN 10 1 a001 64 0 0 0 0\nm 20 1 a001 0 0\nm 30 1 b001 0 0\n"
                     "m 40 1 b001 0 0\nn 50 1 b001\nn 60 1 b001\nZ 100\n");
    std::string all;
    for (const std::string& w : r.warnings) all += w + "\n";
    EXPECT_TRUE(contains(all, "t.mgr:4: import of handle a001, which an unreleased N record created")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:6: import of handle b001, which is imported and not released")) << all;
    EXPECT_TRUE(contains(all, "t.mgr:8: release of handle b001, which no unreleased N or m record created")) << all;
    ASSERT_EQ(r.imports.size(), 2u);
    EXPECT_EQ(r.imports[0].t_release, std::optional<int64_t>(40));
    EXPECT_EQ(r.imports[1].t_release, std::optional<int64_t>(50));
}

TEST(VmmRecords, DriverApiNamesAreKeptAsIs) {
    Report r = parse("A 10 1 7f00 16 device cuMemAlloc 0 - 0\nA 11 1 7f10 16 pinned cuMemHostAlloc -1 - 0\n"
                     "F 20 1 7f00 16 cuMemFree -\nZ 30\n");
    ASSERT_EQ(r.blocks.size(), 2u);
    EXPECT_EQ(r.blocks[0].api, "cuMemAlloc");
    EXPECT_EQ(r.blocks[0].free_api, "cuMemFree");
    EXPECT_EQ(r.blocks[1].kind, Kind::Pinned);
    EXPECT_EQ(summarize(r).live_bytes_at_exit, 0u);
}

// --- LevelWalk ----------------------------------------------------------------------------------

TEST(LevelWalk, ReleaseBeforeUnmapKeepsThePhysicalMemoryUntilTheLastUnmap) {
    Report r = parse(kMinor3 + "N 10 1 a001 4194304 0 0 0 0\nQ 20 1 7f4000000000 4194304 0 a001\n"
                               "Q 30 1 7f8000000000 4194304 0 a001\n"
                               "n 40 1 a001\nq 50 1 7f4000000000 4194304\nq 60 1 7f8000000000 4194304\nZ 100\n");
    EXPECT_EQ(after(r, 3).mapped_bytes, 8 * MiB);    // mapped twice: two mappings,
    EXPECT_EQ(after(r, 3).physical_bytes, 4 * MiB);  // one piece of memory
    EXPECT_EQ(after(r, 4).physical_bytes, 4 * MiB);  // released, still mapped twice
    EXPECT_EQ(after(r, 4).gpu_bytes, 4 * MiB);
    EXPECT_EQ(after(r, 5).physical_bytes, 4 * MiB);  // still mapped once
    EXPECT_EQ(after(r, 5).mapped_bytes, 4 * MiB);
    EXPECT_EQ(after(r, 6).physical_bytes, 0u);  // the last unmap returns it
    EXPECT_EQ(after(r, 6).gpu_bytes, 0u);
    EXPECT_EQ(r.handles[0].t_gone, std::optional<int64_t>(60));
    EXPECT_EQ(live_at(r, {TimePoint::Time, 55}).handles, std::vector<size_t>{0});
    EXPECT_TRUE(live_at(r, {TimePoint::Time, 60}).handles.empty());
}

TEST(LevelWalk, OneUnmapRemovesEveryMappingStartingInItsRange) {
    Report r = parse(kMinor3 + "N 10 1 a1 2097152 0 0 0 0\nQ 10 1 7f4000000000 2097152 0 a1\n"
                               "N 11 1 a2 2097152 0 0 0 0\nQ 11 1 7f4000200000 2097152 0 a2\n"
                               "N 12 1 a3 2097152 0 0 0 0\nQ 12 1 7f4000400000 2097152 0 a3\n"
                               "q 20 1 7f4000000000 4194304\nn 21 1 a1\nn 21 1 a2\nZ 100\n");
    Levels end = after(r, r.events.size());
    EXPECT_EQ(end.mapped_bytes, 2 * MiB);
    EXPECT_EQ(end.physical_bytes, 2 * MiB);
    EXPECT_EQ(end.physical_handles, 1u);
    EXPECT_EQ(r.unmaps, 1u);
}

TEST(LevelWalk, GpuLiveBytesAddBlocksAndPhysicalMemoryOnDevicesOnly) {
    Report r = parse(kMinor3 +
                     "A 10 1 7f00 1048576 device cudaMalloc 1 - 0 0 0\n"
                     "A 11 1 7f80 1048576 pinned cuMemHostAlloc -1 - 0 0 0\n"
                     "N 20 1 a1 2097152 1 0 0 0\nN 30 1 a2 4194304 -1 0 0 0\nV 40 1 7f40 8388608 0 0\nZ 100\n");
    Levels end = after(r, r.events.size());
    EXPECT_EQ(end.gpu_bytes, 3 * MiB);
    EXPECT_EQ(end.device_bytes.at(1), 3 * MiB);
    EXPECT_EQ(end.physical_bytes, 6 * MiB);
    EXPECT_EQ(end.physical_device_bytes, 2 * MiB);
    EXPECT_EQ(end.reserved_bytes, 8 * MiB);  // address space is not memory
    Summary s = summarize(r);
    EXPECT_EQ(s.peak_bytes, 3 * MiB);
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(20));
    EXPECT_EQ(s.by_device.at(1).peak_bytes, 3 * MiB);
    EXPECT_EQ(s.by_device.at(1).live_handles_at_exit, 1u);
    EXPECT_EQ(s.virt.physical_bytes, 6 * MiB);
    EXPECT_EQ(s.virt.creates, 2u);
    EXPECT_TRUE(s.virt.any);
    SiteTable gpu = group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu);
    EXPECT_EQ(gpu.total_bytes, 3 * MiB);
    EXPECT_EQ(gpu.total_handles, 1u);
    SiteTable physical = group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Physical);
    EXPECT_EQ(physical.total_bytes, 6 * MiB);
    EXPECT_EQ(physical.total_blocks, 0u);
    ASSERT_EQ(physical.sites.size(), 1u);
    EXPECT_TRUE(physical.sites[0].physical);
    EXPECT_EQ(physical.sites[0].blocks, 2u);
}

TEST(LevelWalk, HandlesCreatedDuringACaptureBelongToItsPool) {
    Report r = parse(kMinor3 + "C 10 1 1 7fab relaxed -\nN 20 1 a1 2097152 0 3 0 1\nQ 20 1 7f40 2097152 0 a1\n"
                               "c 30 1 1 0 5600\nA 40 1 7f00 1048576 device cudaMalloc 0 - 0 0 0\nZ 100\n");
    std::vector<Pool> pools = group_by_pool(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu);
    ASSERT_EQ(pools.size(), 2u);
    EXPECT_EQ(pools[1].capture_id, 1u);
    EXPECT_EQ(pools[1].table.total_bytes, 2 * MiB);
    EXPECT_EQ(pools[1].table.total_handles, 1u);
    std::vector<CaptureStats> caps = capture_stats(r);
    ASSERT_EQ(caps.size(), 1u);
    EXPECT_EQ(caps[0].owned_bytes, 2 * MiB);
    EXPECT_EQ(caps[0].owned_handles, 1u);
    EXPECT_EQ(caps[0].live_owned_bytes_at_exit, 2 * MiB);
}

TEST(LevelWalk, PeakIncludesPhysicalMemoryAndTopAtThePeakShowsIt) {
    // 3 MiB of blocks, then 4 MiB of physical memory while 1 MiB of blocks is live: the peak is 5 MiB.
    Report r = parse(kMinor3 + "A 10 1 7f00 3145728 device cudaMalloc 0 - 0 0 0\nF 20 1 7f00 0 cudaFree -\n"
                               "A 30 1 7f80 1048576 device cudaMalloc 0 - 0 0 0\nN 40 1 a1 4194304 0 0 0 0\n"
                               "n 50 1 a1\nZ 100\n");
    Summary s = summarize(r);
    EXPECT_EQ(s.peak_bytes, 5 * MiB);
    EXPECT_EQ(s.peak_t, std::optional<int64_t>(40));
    EXPECT_EQ(s.virt.peak_physical_bytes, 4 * MiB);
    EXPECT_EQ(s.virt.physical_bytes, 0u);
    LiveSet peak = live_at(r, {TimePoint::Peak, 0});
    EXPECT_EQ(group_by_site(r, peak, KindFilter::Gpu).total_bytes, 5 * MiB);
}

// --- random valid reports against an independent model -------------------------------------------

struct VmmModel {
    struct Handle {
        uint64_t size = 0;
        int device = 0;
        bool released = false;
        int maps = 0;
        bool exists() const { return !released || maps > 0; }
    };
    std::vector<Handle> handles;
    std::map<uint64_t, std::pair<uint64_t, size_t>> mappings;  // va -> size, handle
    std::map<uint64_t, uint64_t> reserved;                     // va -> size
    std::map<uint64_t, std::pair<uint64_t, int>> blocks;       // addr -> size, device (all GPU kinds)

    Levels levels() const {
        Levels l;
        for (const auto& [addr, b] : blocks) {
            l.gpu_bytes += b.first;
            l.device_bytes[b.second] += b.first;
        }
        for (const Handle& h : handles) {
            if (!h.exists()) continue;
            l.physical_bytes += h.size;
            if (h.device < 0) continue;
            l.gpu_bytes += h.size;
            l.device_bytes[h.device] += h.size;
        }
        for (const auto& [va, m] : mappings) l.mapped_bytes += m.first;
        for (const auto& [va, size] : reserved) l.reserved_bytes += size;
        return l;
    }
};

std::string hex_of(uint64_t v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
    return buf;
}

/// One random record that keeps the report valid and changes exactly one thing (one event).
std::string random_vmm_record(VmmModel& m, std::mt19937& rng, int64_t t, uint64_t& next_va) {
    std::string ts = std::to_string(t) + " 9 ";
    auto pick = [&](auto& container, auto pred) -> decltype(container.begin()) {
        std::vector<decltype(container.begin())> ok;
        for (auto it = container.begin(); it != container.end(); ++it) {
            if (pred(*it)) ok.push_back(it);
        }
        return ok.empty() ? container.end() : ok[rng() % ok.size()];
    };
    switch (rng() % 8) {
    case 0: {  // N
        VmmModel::Handle h;
        h.size = (1 + rng() % 8) * 2097152;
        const int devices[] = {0, 1, -1};
        h.device = devices[rng() % 3];
        m.handles.push_back(h);
        return "N " + ts + hex_of(0xa000 + m.handles.size()) + " " + std::to_string(h.size) + " " +
               std::to_string(h.device) + " 1 0 0\n";
    }
    case 1: {  // n
        auto it = pick(m.handles, [](const VmmModel::Handle& h) { return !h.released; });
        if (it == m.handles.end()) return "";
        it->released = true;
        return "n " + ts + hex_of(0xa000 + 1 + static_cast<size_t>(it - m.handles.begin())) + "\n";
    }
    case 2:
    case 3: {  // Q (a handle may be mapped several times)
        auto it = pick(m.handles, [](const VmmModel::Handle& h) { return !h.released; });
        if (it == m.handles.end()) return "";
        size_t index = static_cast<size_t>(it - m.handles.begin());
        uint64_t va = next_va += 1ull << 30;
        ++it->maps;
        m.mappings[va] = {it->size, index};
        return "Q " + ts + hex_of(va) + " " + std::to_string(it->size) + " 0 " + hex_of(0xa000 + 1 + index) + "\n";
    }
    case 4: {  // q
        if (m.mappings.empty()) return "";
        auto it = m.mappings.begin();
        std::advance(it, static_cast<long>(rng() % m.mappings.size()));
        std::string rec = "q " + ts + hex_of(it->first) + " " + std::to_string(it->second.first) + "\n";
        --m.handles[it->second.second].maps;
        m.mappings.erase(it);
        return rec;
    }
    case 5: {  // V or v
        if (!m.reserved.empty() && rng() % 2 == 0) {
            auto it = m.reserved.begin();
            std::string rec = "v " + ts + hex_of(it->first) + " " + std::to_string(it->second) + "\n";
            m.reserved.erase(it);
            return rec;
        }
        uint64_t va = next_va += 1ull << 30;
        uint64_t size = (1 + rng() % 64) << 21;
        m.reserved[va] = size;
        return "V " + ts + hex_of(va) + " " + std::to_string(size) + " 1 0\n";
    }
    default: {  // A or F
        if (!m.blocks.empty() && rng() % 2 == 0) {
            auto it = m.blocks.begin();
            std::string rec = "F " + ts + hex_of(it->first) + " 0 cuMemFree -\n";
            m.blocks.erase(it);
            return rec;
        }
        uint64_t addr = next_va += 1ull << 30;
        uint64_t size = 1 + rng() % 5000000;
        int device = static_cast<int>(rng() % 2);
        m.blocks[addr] = {size, device};
        return "A " + ts + hex_of(addr) + " " + std::to_string(size) + " device cuMemAlloc " + std::to_string(device) +
               " - 1 0 0\n";
    }
    }
}

TEST(LevelWalk, RandomValidReportsMatchAModel) {
    std::mt19937 rng(20261130u);
    for (int iter = 0; iter < 200; ++iter) {
        VmmModel m;
        std::vector<Levels> expected{Levels{}};
        uint64_t next_va = 0x7f0000000000ull;
        std::string s = kHeader + kMinor3 + "M 0 0 ffff 0 - /a\nS 1 10\n";
        int n = static_cast<int>(rng() % 150);
        for (int i = 0; i < n; ++i) {
            std::string rec = random_vmm_record(m, rng, 100 + i, next_va);
            if (rec.empty()) continue;
            s += rec;
            expected.push_back(m.levels());
        }
        s += "Z 100000\n";
        Report r = parse_report(s, "model.mgr");
        ASSERT_TRUE(r.warnings.empty()) << r.warnings.front() << "\n" << s;
        ASSERT_EQ(r.events.size() + 1, expected.size()) << s;
        LevelWalk walk(r);
        uint64_t peak = 0, peak_physical = 0;
        for (size_t i = 0; i < expected.size(); ++i) {
            const Levels& got = walk.levels();
            const Levels& want = expected[i];
            ASSERT_EQ(got.gpu_bytes, want.gpu_bytes) << "after " << i << " events of\n" << s;
            ASSERT_EQ(got.physical_bytes, want.physical_bytes) << "after " << i << " events of\n" << s;
            ASSERT_EQ(got.mapped_bytes, want.mapped_bytes) << i;
            ASSERT_EQ(got.reserved_bytes, want.reserved_bytes) << i;
            for (const auto& [dev, bytes] : want.device_bytes) {
                uint64_t have = got.device_bytes.count(dev) != 0 ? got.device_bytes.at(dev) : 0;
                ASSERT_EQ(have, bytes) << "device " << dev << " after " << i;
            }
            peak = std::max(peak, want.gpu_bytes);
            peak_physical = std::max(peak_physical, want.physical_bytes);
            walk.step();
        }
        Summary sum = summarize(r);
        EXPECT_EQ(sum.peak_bytes, peak);
        EXPECT_EQ(sum.virt.peak_physical_bytes, peak_physical);
        EXPECT_EQ(sum.live_bytes_at_exit, expected.back().gpu_bytes);
        SiteTable exit = group_by_site(r, live_at(r, {TimePoint::Exit, 0}), KindFilter::Gpu);
        EXPECT_EQ(exit.total_bytes, expected.back().gpu_bytes);
        SiteTable at_peak = group_by_site(r, live_at(r, {TimePoint::Peak, 0}), KindFilter::Gpu);
        EXPECT_EQ(at_peak.total_bytes, peak);
    }
}

}  // namespace
}  // namespace memguard::report
