#include "log_checks.h"

#include <gtest/gtest.h>

#include <map>

namespace preload_test {

namespace report = memguard::report;

namespace {

std::string stream_text(const std::optional<uint64_t>& stream) { return stream ? hex(*stream) : std::string("-"); }

// A raw F record's stream field as an optional value.
std::optional<uint64_t> raw_stream(const std::string& field) {
    if (field == "-") return std::nullopt;
    return std::stoull(field, nullptr, 16);
}

}  // namespace

std::vector<size_t> nonnull_blocks(const report::Report& r) {
    std::vector<size_t> indices;
    for (size_t i = 0; i < r.blocks.size(); ++i) {
        if (r.blocks[i].addr == 0 && r.blocks[i].size == 0) continue;
        indices.push_back(i);
    }
    return indices;
}

void expect_report_matches_log(const report::Report& r, const std::string& report_path, const AppLog& log) {
    std::vector<size_t> blocks = nonnull_blocks(r);
    EXPECT_EQ(blocks.size(), log.allocs.size())
        << "the report has " << blocks.size() << " blocks, the application made " << log.allocs.size()
        << " allocations";

    // Which logged allocations were freed, and by which API.
    std::map<size_t, std::string> freed_by;  // logged alloc index -> free API
    std::map<uint64_t, size_t> live;         // address -> logged alloc index
    for (const LogEvent& event : log.events) {
        if (event.type == LogEvent::Alloc) {
            live[log.allocs[event.index].addr] = event.index;
        } else {
            const LoggedFree& f = log.frees[event.index];
            auto it = live.find(f.addr);
            ASSERT_NE(it, live.end()) << "the application log frees an address it never allocated";
            freed_by[it->second] = f.api;
            live.erase(it);
        }
    }

    for (size_t i = 0; i < std::min(blocks.size(), log.allocs.size()); ++i) {
        const report::Block& block = r.blocks[blocks[i]];
        const LoggedAlloc& want = log.allocs[i];
        SCOPED_TRACE("allocation #" + std::to_string(i) + ": " + want.api + " of " + std::to_string(want.size) +
                     " bytes at " + hex(want.addr) + " in " + want.function);
        EXPECT_EQ(hex(block.addr), hex(want.addr));
        EXPECT_EQ(block.size, want.size);
        EXPECT_EQ(block.api, want.api);
        EXPECT_STREQ(report::kind_name(block.kind), report::kind_name(kind_of_api(want.api)));
        EXPECT_EQ(block.device, want.device);
        EXPECT_EQ(stream_text(block.stream), stream_text(want.stream));
        auto freed = freed_by.find(i);
        if (freed == freed_by.end()) {
            EXPECT_FALSE(block.t_free.has_value()) << "live at exit, but the report frees it with " << block.free_api;
        } else {
            EXPECT_TRUE(block.t_free.has_value()) << "freed by " << freed->second << ", but live in the report";
            EXPECT_EQ(block.free_api, freed->second);
            if (block.t_free) {
                EXPECT_GE(*block.t_free, block.t_alloc);
            }
        }
    }

    // The F records themselves, in file order; an R undoes the F of the same address before it.
    std::vector<std::vector<std::string>> frees;
    for (std::vector<std::string>& record : raw_records(report_path, "FR")) {
        if (record[0] == "F") {
            ASSERT_GE(record.size(), 7u) << "short F record";
            frees.push_back(std::move(record));
            continue;
        }
        ASSERT_GE(record.size(), 5u) << "short R record";
        bool undone = false;
        for (size_t j = frees.size(); j-- > 0;) {
            if (frees[j][3] == record[3]) {
                frees.erase(frees.begin() + static_cast<std::ptrdiff_t>(j));
                undone = true;
                break;
            }
        }
        EXPECT_TRUE(undone) << "R record for " << record[3] << " without an F before it";
    }
    EXPECT_EQ(frees.size(), log.frees.size())
        << "the report has " << frees.size() << " effective F records, the application freed " << log.frees.size()
        << " blocks";
    std::map<uint64_t, uint64_t> size_at;  // address -> size of the block live there (log order)
    size_t next_free = 0;
    for (const LogEvent& event : log.events) {
        if (event.type == LogEvent::Alloc) {
            size_at[log.allocs[event.index].addr] = log.allocs[event.index].size;
            continue;
        }
        size_t i = next_free++;
        if (i >= frees.size()) break;
        const LoggedFree& want = log.frees[event.index];
        const std::vector<std::string>& got = frees[i];
        SCOPED_TRACE("free #" + std::to_string(i) + ": " + want.api + " of " + hex(want.addr));
        EXPECT_EQ("0x" + got[3], hex(want.addr));
        EXPECT_EQ(got[4], std::to_string(size_at[want.addr]));
        EXPECT_EQ(got[5], want.api);
        EXPECT_EQ(stream_text(raw_stream(got[6])), stream_text(want.stream));
    }
}

void expect_stacks_name_functions(const report::Report& r, const AppLog& log, const std::string& module_suffix) {
    std::vector<size_t> blocks = nonnull_blocks(r);
    Symbolizer symbolizer(r);
    for (size_t i = 0; i < std::min(blocks.size(), log.allocs.size()); ++i) {
        const report::Block& block = r.blocks[blocks[i]];
        const LoggedAlloc& want = log.allocs[i];
        EXPECT_NE(block.stack_id, 0u) << want.api << " in " << want.function << ": no stack";
        bool found = module_suffix.empty() ? symbolizer.has_function(block.stack_id, want.function)
                                           : symbolizer.has_function_in(block.stack_id, want.function, module_suffix);
        EXPECT_TRUE(found) << want.api << " of " << want.size << " bytes: the stack does not contain " << want.function
                           << (module_suffix.empty() ? "" : " in a module ending " + module_suffix) << "\n"
                           << symbolizer.describe(block.stack_id);
    }
}

}  // namespace preload_test
