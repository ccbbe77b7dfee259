// The fold room (docs/bounded-reports.md, "The fold's room"): how a bounded report's writer and its
// follower share the limit. The follower's folds count in the limit, and the two processes measure
// the disk at different times, so the writer never counts what it saw of the folds: it counts a
// room it granted, and the follower keeps its fold files (the newest and the one that replaces it,
// both there while it is put in place) within that room. `<report>.fold-room` holds two fixed
// lines: at offset 0 the writer's `granted BYTES PART BYTES PART`, at kLineBytes the follower's
// `wanted BYTES PART BYTES PART` (PART: the fold's, through which part it folds), each written
// whole by one pwrite. A line holds its say twice, and is read as written only when the two copies
// agree: a read that met a write half done sees the first copy new and the second old (or the
// first part of one copy new), and takes the line as not said yet. The writer
// grants a want before the parts it deletes for it are gone, so those parts' `f` records say
// folded: the fold that covers them is made already, in the follower's memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace memguard::format::fold_room {

constexpr std::string_view kSuffix = ".fold-room";
constexpr size_t kLineBytes = 80;
constexpr size_t kFileBytes = 2 * kLineBytes;  // what the file counts in the limit
constexpr size_t kGrantedAt = 0;
constexpr size_t kWantedAt = kLineBytes;
constexpr std::string_view kGranted = "granted";
constexpr std::string_view kWanted = "wanted";

/// What a line says: the fold room's bytes, for the fold through `part`.
struct Room {
    uint64_t bytes = 0;
    uint32_t part = 0;
};

inline std::string path(const std::string& spine) { return spine + std::string(kSuffix); }

/// `word BYTES PART BYTES PART`, padded with spaces to kLineBytes with its '\n'.
inline std::string line(std::string_view word, Room r) {
    char buf[kLineBytes + 1];
    const int len = std::snprintf(buf, sizeof buf, "%.*s %020llu %010u %020llu %010u", static_cast<int>(word.size()),
                                  word.data(), static_cast<unsigned long long>(r.bytes), r.part,
                                  static_cast<unsigned long long>(r.bytes), r.part);
    std::string out(buf, len > 0 ? static_cast<size_t>(len) : 0);
    out.resize(kLineBytes - 1, ' ');
    out.push_back('\n');
    return out;
}

/// What the line `word` at `at` in `file` (what a read of the file gave) says: nothing when the
/// line is not there, not that word's, or its two copies differ.
inline std::optional<Room> parse(std::string_view file, size_t at, std::string_view word) {
    if (file.size() < at + kLineBytes) return std::nullopt;
    const std::string_view l = file.substr(at, kLineBytes);
    if (l.substr(0, word.size()) != word || l[word.size()] != ' ' || l.back() != '\n') return std::nullopt;
    size_t pos = word.size() + 1;
    const auto number = [&](size_t digits) -> std::optional<uint64_t> {
        if (pos + digits > l.size()) return std::nullopt;
        uint64_t n = 0;
        for (size_t i = pos; i < pos + digits; ++i) {
            if (l[i] < '0' || l[i] > '9') return std::nullopt;
            const uint64_t d = static_cast<uint64_t>(l[i] - '0');
            if (n > (UINT64_MAX - d) / 10) return std::nullopt;
            n = n * 10 + d;
        }
        pos += digits + 1;
        return n;
    };
    const std::optional<uint64_t> a = number(20), c = number(10), b = number(20), d = number(10);
    if (!a || !b || !c || !d || *a != *b || *c != *d || *c > UINT32_MAX) return std::nullopt;
    return Room{*a, static_cast<uint32_t>(*c)};
}

}  // namespace memguard::format::fold_room
