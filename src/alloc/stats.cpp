#include "alloc/stats.h"

namespace memguard::alloc {

namespace {

template <typename Fn>
void for_each_array(DeviceStats& s, Fn&& fn) {
    for (StatArray* a : {&s.allocation, &s.segment, &s.active, &s.inactive_split, &s.allocated_bytes, &s.reserved_bytes,
                         &s.active_bytes, &s.inactive_split_bytes, &s.requested_bytes})
        for (Stat& st : *a) fn(st);
    fn(s.oversize_allocations);
    fn(s.oversize_segments);
}

void add_stat(std::vector<std::pair<std::string, int64_t>>& out, const std::string& prefix, const Stat& st) {
    out.emplace_back(prefix + ".current", st.current);
    out.emplace_back(prefix + ".peak", st.peak);
    out.emplace_back(prefix + ".allocated", st.allocated);
    out.emplace_back(prefix + ".freed", st.freed);
}

}  // namespace

void DeviceStats::reset_peak() noexcept {
    for_each_array(*this, [](Stat& st) { st.reset_peak(); });
}

void DeviceStats::reset_accumulated() noexcept {
    for_each_array(*this, [](Stat& st) { st.reset_accumulated(); });
    num_alloc_retries = num_ooms = num_sync_all_streams = num_device_alloc = num_device_free = 0;
}

std::vector<std::pair<std::string, int64_t>> memory_stats_items(const DeviceStats& s) {
    static const char* const kPools[kNumStatTypes] = {"all", "small_pool", "large_pool"};
    const std::pair<const char*, const StatArray*> arrays[] = {
        {"allocation", &s.allocation},
        {"segment", &s.segment},
        {"active", &s.active},
        {"inactive_split", &s.inactive_split},
        {"allocated_bytes", &s.allocated_bytes},
        {"reserved_bytes", &s.reserved_bytes},
        {"active_bytes", &s.active_bytes},
        {"inactive_split_bytes", &s.inactive_split_bytes},
        {"requested_bytes", &s.requested_bytes},
    };
    std::vector<std::pair<std::string, int64_t>> out;
    out.reserve(9 * 3 * 4 + 16);
    for (const auto& [name, arr] : arrays)
        for (int p = 0; p < kNumStatTypes; ++p) add_stat(out, std::string(name) + "." + kPools[p], (*arr)[p]);
    add_stat(out, "oversize_allocations", s.oversize_allocations);
    add_stat(out, "oversize_segments", s.oversize_segments);
    out.emplace_back("num_alloc_retries", s.num_alloc_retries);
    out.emplace_back("num_ooms", s.num_ooms);
    out.emplace_back("num_sync_all_streams", s.num_sync_all_streams);
    out.emplace_back("num_device_alloc", s.num_device_alloc);
    out.emplace_back("num_device_free", s.num_device_free);
    out.emplace_back("max_split_size", s.max_split_size);
    return out;
}

}  // namespace memguard::alloc
