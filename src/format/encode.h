// The writer's side of the record table: a record's text, built in a fixed buffer without
// allocating. Everything here is inline: the library's hooks encode on every allocation and free.
#pragma once

#include <cstring>
#include <optional>
#include <string_view>

#include "format/fields.h"
#include "format/records.h"

// The encoder is forced inline: the hook path encodes a record per allocation and free, and each
// field's encoding is chosen by the table's constants, which fold away only when it is inlined. What
// is left is a call of Line's hex, dec or word per field, as when records were written by hand
// (whether Line's methods are inlined is the compiler's choice, as it was then).
#define MG_FORMAT_INLINE inline __attribute__((always_inline))

namespace memguard::format {

/// One record's text: its letter, its fields separated by spaces, a newline. Fields that do not fit
/// are cut (a record is a few KiB at most; stacks are bounded by the configured depth).
class Line {
public:
    static constexpr size_t kCapacity = 8192;

    Line() noexcept = default;
    Line(const Line&) = delete;
    Line& operator=(const Line&) = delete;

    void letter(char type) noexcept {
        len_ = 0;
        buf_[len_++] = type;
    }
    void hex(uint64_t v) noexcept {
        if (room(17)) {
            buf_[len_++] = ' ';
            len_ += put_hex(buf_ + len_, v);
        }
    }
    void dec(uint64_t v) noexcept {
        if (room(21)) {
            buf_[len_++] = ' ';
            len_ += put_dec(buf_ + len_, v);
        }
    }
    void sdec(int64_t v) noexcept {
        if (room(22)) {
            buf_[len_++] = ' ';
            len_ += put_sdec(buf_ + len_, v);
        }
    }
    /// A token that needs no escaping (vocabulary names, "-").
    void word(std::string_view w) noexcept {
        if (room(w.size() + 1)) {
            buf_[len_++] = ' ';
            std::memcpy(buf_ + len_, w.data(), w.size());
            len_ += w.size();
        }
    }
    /// A free-form string, percent-encoded. Strings that do not fit are cut.
    void str(std::string_view s) noexcept {
        if (!room(2)) return;
        buf_[len_++] = ' ';
        if (s.empty()) {
            buf_[len_++] = '%';
            return;
        }
        static constexpr char digits[] = "0123456789ABCDEF";
        for (unsigned char c : s) {
            if (!room(4)) break;
            if (needs_escape(c)) {
                buf_[len_++] = '%';
                buf_[len_++] = digits[c >> 4];
                buf_[len_++] = digits[c & 0xf];
            } else {
                buf_[len_++] = static_cast<char>(c);
            }
        }
    }
    /// The record with its newline.
    std::string_view finish() noexcept {
        buf_[len_++] = '\n';
        return {buf_, len_};
    }

private:
    bool room(size_t n) const noexcept { return len_ + n + 1 < kCapacity; }
    char buf_[kCapacity];
    size_t len_ = 0;
};

/// The encoding visitor: writes each field of a record as the table says.
class Encoder {
public:
    explicit Encoder(Line& line) noexcept : line_(line) {}

    MG_FORMAT_INLINE void operator()(const Field&, int64_t v) noexcept { line_.sdec(v); }
    MG_FORMAT_INLINE void operator()(const Field&, int v) noexcept { line_.sdec(v); }
    MG_FORMAT_INLINE void operator()(const Field& f, uint64_t v) noexcept {
        if (f.enc == Enc::Hex) {
            line_.hex(v);
        } else {
            line_.dec(v);
        }
    }
    MG_FORMAT_INLINE void operator()(const Field&, uint32_t v) noexcept { line_.dec(v); }
    MG_FORMAT_INLINE void operator()(const Field&, bool v) noexcept { line_.dec(v ? 1 : 0); }
    MG_FORMAT_INLINE void operator()(const Field& f, std::string_view v) noexcept {
        if (f.enc == Enc::Str) {
            line_.str(v);
        } else if (f.enc == Enc::BuildId && v.empty()) {
            line_.word("-");
        } else {
            line_.word(v);  // Name, BuildId: written as they are
        }
    }
    template <class E, class = decltype(name_of(E{}))>
    MG_FORMAT_INLINE void operator()(const Field&, E v) noexcept {
        line_.word(name_of(v));
    }
    template <class T>
    MG_FORMAT_INLINE void operator()(const Field& f, const std::optional<T>& v) noexcept {
        if (v) {
            (*this)(f, *v);
        } else {
            line_.word("-");
        }
    }
    template <class T>
    MG_FORMAT_INLINE void operator()(const Field& f, const Tail<T>& v) noexcept {
        for (size_t i = 0; i < v.size; ++i) (*this)(f, v.data[i]);
    }
    MG_FORMAT_INLINE void key(const Field&, std::string_view key) noexcept { line_.word(key); }

private:
    Line& line_;
};

/// Writes record `r` into `line` (replacing what it held); line.finish() gives the text.
template <class R>
MG_FORMAT_INLINE void encode(const R& r, Line& line) noexcept {
    line.letter(R::kLetter);
    Encoder e(line);
    R::fields(e, r);
}

}  // namespace memguard::format

#undef MG_FORMAT_INLINE
