// Builds one report record (docs/report-format.md) in a fixed buffer, without allocating.
#pragma once

#include <cstring>
#include <string_view>

#include "common/text.h"

namespace memguard::track {

class Line {
public:
    static constexpr size_t kCapacity = 8192;

    explicit Line(char type) noexcept { buf_[len_++] = type; }

    Line& hex(uint64_t v) noexcept {
        if (room(17)) { buf_[len_++] = ' '; len_ += text::put_hex(buf_ + len_, v); }
        return *this;
    }
    Line& dec(uint64_t v) noexcept {
        if (room(21)) { buf_[len_++] = ' '; len_ += text::put_dec(buf_ + len_, v); }
        return *this;
    }
    Line& sdec(int64_t v) noexcept {
        if (room(22)) { buf_[len_++] = ' '; len_ += text::put_sdec(buf_ + len_, v); }
        return *this;
    }
    /// A token that needs no escaping (api and kind names, "-").
    Line& word(std::string_view w) noexcept {
        if (room(w.size() + 1)) {
            buf_[len_++] = ' ';
            std::memcpy(buf_ + len_, w.data(), w.size());
            len_ += w.size();
        }
        return *this;
    }
    /// A free-form string, percent-encoded. Strings that do not fit are cut.
    Line& str(std::string_view s) noexcept {
        if (!room(2)) return *this;
        buf_[len_++] = ' ';
        if (s.empty()) { buf_[len_++] = '%'; return *this; }
        static constexpr char digits[] = "0123456789ABCDEF";
        for (unsigned char c : s) {
            if (!room(4)) break;
            if (text::needs_escape(c)) {
                buf_[len_++] = '%';
                buf_[len_++] = digits[c >> 4];
                buf_[len_++] = digits[c & 0xf];
            } else {
                buf_[len_++] = static_cast<char>(c);
            }
        }
        return *this;
    }
    std::string_view finish() noexcept {
        buf_[len_++] = '\n';
        return {buf_, len_};
    }

private:
    bool room(size_t n) const noexcept { return len_ + n + 1 < kCapacity; }
    char buf_[kCapacity];
    size_t len_ = 0;
};

}  // namespace memguard::track
