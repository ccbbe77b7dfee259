#include "track/phases.h"

namespace memguard::track {

std::string_view cut_phase_name(std::string_view name) noexcept {
    if (name.size() <= kMaxPhaseName) return name;
    size_t n = kMaxPhaseName;
    // Back up over continuation bytes (10xxxxxx) so that no character is cut in half.
    while (n > 0 && (static_cast<unsigned char>(name[n]) & 0xC0) == 0x80) --n;
    return name.substr(0, n);
}

uint64_t PhaseTable::open() {
    uint64_t id = last_.fetch_add(1, std::memory_order_relaxed) + 1;
    std::lock_guard<std::mutex> lock(mu_);
    open_.insert(id);
    return id;
}

bool PhaseTable::close(uint64_t id) {
    if (id == 0) return false;
    std::lock_guard<std::mutex> lock(mu_);
    return open_.erase(id) > 0;
}

size_t PhaseTable::open_count() {
    std::lock_guard<std::mutex> lock(mu_);
    return open_.size();
}

void PhaseTable::clear_open() { open_.clear(); }

}  // namespace memguard::track
