// The binary encoding of the report (docs/report-format.md, "Binary encoding"): the writer's side.
// A record is a frame: its letter, the payload's length (a LEB128 varint) and the payload, its
// fields as the record table lists them (format/records.h) in LEB128 varints, zigzag for signed
// values, strings length-prefixed. Plain records (every record but A, F, T and t) are coded on
// their own; the predicted records (kPredicted: those written on every allocation and free) are
// coded against what the file said before (Predictor): a mask of the fields that differ from
// their prediction, then only those, times and addresses as differences. Header-only: the
// library's writer thread encodes with it, the reader decodes with format/binary_decode.h.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "format/records.h"

namespace memguard::format {

/// The binary report's first line; records follow it as frames.
inline constexpr std::string_view kBinaryMagic = "MEMGUARD-REPORT-BINARY";

/// Appends `v` as a LEB128 varint (at most 10 bytes). Returns the number of bytes written.
inline size_t put_varint(char* out, uint64_t v) noexcept {
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = static_cast<char>(static_cast<uint8_t>(v) | 0x80);
        v >>= 7;
    }
    out[n++] = static_cast<char>(v);
    return n;
}

constexpr uint64_t zigzag(int64_t v) noexcept {
    return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}
constexpr int64_t unzigzag(uint64_t v) noexcept { return static_cast<int64_t>(v >> 1) ^ -static_cast<int64_t>(v & 1); }

/// True for the records coded against their predictions (A, F, T and t).
template <class R, class = void>
struct IsPredicted : std::false_type {};
template <class R>
struct IsPredicted<R, std::void_t<decltype(R::kPredicted)>> : std::bool_constant<R::kPredicted> {};
template <class R>
constexpr bool is_predicted() {
    return IsPredicted<R>::value;
}

namespace binary {

/// The most fields a predicted record may have (the mask's bits).
constexpr size_t kMaxPredictedFields = 16;

/// The fields whose prediction is shared by every predicted record: the last value of a field of
/// that name in any of them. Others are predicted from the same field of the previous record of
/// the same letter. t and addr are coded as differences from their predictions.
constexpr std::string_view kSharedNames[] = {"t", "tid", "addr", "size"};
constexpr int kShared = 4;

struct Namer {
    std::array<int8_t, kMaxPredictedFields> map{};
    size_t i = 0;
    template <class T>
    constexpr void operator()(const Field& f, const T&) {
        int8_t slot = static_cast<int8_t>(i);
        for (int k = 0; k < kShared; ++k) {
            if (kSharedNames[k] == std::string_view(f.name)) slot = static_cast<int8_t>(-1 - k);
        }
        if (i < kMaxPredictedFields) map[i] = slot;
        ++i;
    }
    constexpr void key(const Field&, std::string_view) { ++i; }
};

/// Where field i of predicted record R finds its prediction: -1 - k for the shared slot k, else i.
template <class R>
constexpr std::array<int8_t, kMaxPredictedFields> slot_map() {
    Namer n;
    R r{};
    R::fields(n, r);
    return n.map;
}

/// The number of fields of record R.
template <class R>
constexpr size_t field_count() {
    Namer n;
    R r{};
    R::fields(n, r);
    return n.i;
}

/// The index of predicted record R among the table's predicted records.
template <class R>
constexpr int predicted_index() {
    int i = 0, found = -1;
    for_each_record([&](auto type) {
        using T = typename decltype(type)::type;
        if constexpr (is_predicted<T>()) {
            if (std::is_same_v<T, R>) found = i;
            ++i;
        }
    });
    return found;
}
constexpr int predicted_count() {
    int n = 0;
    for_each_record([&](auto type) { n += is_predicted<typename decltype(type)::type>() ? 1 : 0; });
    return n;
}

/// A field's prediction: a number (its bits), whether an optional is present, a string.
struct Slot {
    uint64_t bits = 0;
    bool present = false;  // an optional's
    bool known = false;    // false until a record codes the field: the first value is always coded
    std::string str;
};

/// The predictions both sides keep, in file order: initially none (each slot's first value is coded).
class Predictions {
public:
    /// Room for the strings the writer predicts (an api's name, a pool's "first.second"): coding
    /// one allocates nothing, so an encoding cannot fail halfway through its predictions.
    static constexpr size_t kStringRoom = 64;
    Predictions() {
        for (Slot& s : shared_) s.str.reserve(kStringRoom);
        for (auto& letter : own_) {
            for (Slot& s : letter) s.str.reserve(kStringRoom);
        }
    }
    template <class R>
    Slot& slot(size_t i) {
        static constexpr auto kMap = slot_map<R>();
        const int s = kMap[i];
        return s < 0 ? shared_[static_cast<size_t>(-1 - s)] : own_[predicted_index<R>()][static_cast<size_t>(s)];
    }
    template <class R>
    static constexpr bool is_delta(size_t i) {
        constexpr auto kMap = slot_map<R>();
        return kMap[i] == -1 || kMap[i] == -3;  // t, addr
    }
    void reset() { *this = Predictions(); }

private:
    std::array<Slot, kShared> shared_{};
    std::array<std::array<Slot, kMaxPredictedFields>, predicted_count()> own_{};
};

template <class T>
constexpr uint64_t bits_of(T v) noexcept {
    if constexpr (std::is_enum_v<T>) {
        return static_cast<uint64_t>(static_cast<std::underlying_type_t<T>>(v));
    } else {
        return static_cast<uint64_t>(v);
    }
}

}  // namespace binary

/// A binary frame, built in a fixed buffer: the payload goes after room for its header, which
/// finish() writes just before it. Fields that do not fit are cut, as in a text Line.
class Frame {
public:
    static constexpr size_t kCapacity = 8192;
    static constexpr size_t kHead = 3;  // the letter and a varint of at most 2 bytes (< 2^14)

    void begin(char type) noexcept {
        type_ = type;
        len_ = kHead;
    }
    bool room(size_t n) const noexcept { return len_ + n <= kCapacity; }
    size_t size() const noexcept { return len_ - kHead; }
    void varint(uint64_t v) noexcept {
        if (room(10)) len_ += put_varint(buf_ + len_, v);
    }
    void svarint(int64_t v) noexcept { varint(zigzag(v)); }
    void raw(char c) noexcept {
        if (room(1)) buf_[len_++] = c;
    }
    /// A length-prefixed string, cut to what fits.
    void bytes(std::string_view s) noexcept {
        if (!room(3)) return;
        size_t n = s.size() < kCapacity - len_ - 3 ? s.size() : kCapacity - len_ - 3;
        len_ += put_varint(buf_ + len_, n);
        for (size_t i = 0; i < n; ++i) buf_[len_++] = s[i];
    }
    /// How many more items of at most 10 bytes fit, after their count.
    size_t items_that_fit(size_t n) const noexcept {
        const size_t fit = len_ + 2 + 10 < kCapacity ? (kCapacity - len_ - 12) / 10 : 0;
        return n < fit ? n : fit;
    }
    std::string_view finish() noexcept {
        const size_t payload = len_ - kHead;
        char head[kHead];
        const size_t n = put_varint(head + 1, payload) + 1;
        head[0] = type_;
        char* start = buf_ + kHead - n;
        for (size_t i = 0; i < n; ++i) start[i] = head[i];
        return {start, n + payload};
    }

private:
    char buf_[kCapacity];
    size_t len_ = kHead;
    char type_ = 0;
};

/// The plain encoder: each field as the table lists it, on its own.
class PlainEncoder {
public:
    explicit PlainEncoder(Frame& frame) noexcept : f_(frame) {}

    void operator()(const Field&, int64_t v) noexcept { f_.svarint(v); }
    void operator()(const Field&, int v) noexcept { f_.svarint(v); }
    void operator()(const Field&, uint64_t v) noexcept { f_.varint(v); }
    void operator()(const Field&, uint32_t v) noexcept { f_.varint(v); }
    void operator()(const Field&, bool v) noexcept { f_.varint(v ? 1 : 0); }
    void operator()(const Field&, std::string_view v) noexcept { f_.bytes(v); }
    template <class E, class = decltype(name_of(E{}))>
    void operator()(const Field&, E v) noexcept {
        f_.varint(binary::bits_of(v));
    }
    template <class T>
    void operator()(const Field& f, const std::optional<T>& v) noexcept {
        if (v) {
            f_.varint(1);
            (*this)(f, *v);
        } else {
            f_.varint(0);
        }
    }
    template <class T>
    void operator()(const Field& f, const Tail<T>& v) noexcept {
        const size_t n = f_.items_that_fit(v.size);
        f_.varint(n);
        for (size_t i = 0; i < n; ++i) (*this)(f, v.data[i]);
    }
    void key(const Field&, std::string_view key) noexcept { f_.bytes(key); }

private:
    Frame& f_;
};

/// The predicted encoder of record R: the mask of the fields that differ from their predictions,
/// then those fields, each as the plain encoder writes it, except t and addr: the zigzag of the
/// difference from the prediction. Updates the predictions.
template <class R>
class PredictedEncoder {
public:
    PredictedEncoder(binary::Predictions& p, Frame& values) noexcept : p_(p), values_(values) {}

    template <class T>
    void operator()(const Field& f, const T& v) {
        binary::Slot& s = p_.template slot<R>(i_);
        const uint64_t bits = binary::bits_of(v);
        if (!s.known || bits != s.bits) {
            mask_ |= uint64_t{1} << i_;
            if (binary::Predictions::is_delta<R>(i_)) {
                values_.varint(zigzag(static_cast<int64_t>(bits - s.bits)));
            } else {
                PlainEncoder{values_}(f, v);
            }
            s.bits = bits;
            s.known = true;
        }
        ++i_;
    }
    template <class T>
    void operator()(const Field& f, const std::optional<T>& v) {
        binary::Slot& s = p_.template slot<R>(i_);
        const uint64_t bits = v ? binary::bits_of(*v) : 0;
        if (!s.known || v.has_value() != s.present || bits != s.bits) {
            mask_ |= uint64_t{1} << i_;
            PlainEncoder{values_}(f, v);
            s.bits = bits;
            s.present = v.has_value();
            s.known = true;
        }
        ++i_;
    }
    void operator()(const Field& f, std::string_view v) {
        binary::Slot& s = p_.template slot<R>(i_);
        if (!s.known || v != s.str) {
            mask_ |= uint64_t{1} << i_;
            PlainEncoder{values_}(f, v);
            s.str.assign(v.data(), v.size());
            s.known = true;
        }
        ++i_;
    }
    uint64_t mask() const noexcept { return mask_; }

private:
    binary::Predictions& p_;
    Frame& values_;
    size_t i_ = 0;
    uint64_t mask_ = 0;
};

/// Writes record `r` as a plain frame.
template <class R>
std::string_view encode_plain(const R& r, Frame& frame) noexcept {
    frame.begin(R::kLetter);
    PlainEncoder e(frame);
    R::fields(e, r);
    return frame.finish();
}

/// Writes predicted record `r` as a frame, against and into `p`.
template <class R>
std::string_view encode_predicted(const R& r, binary::Predictions& p, Frame& values, Frame& frame) {
    static_assert(is_predicted<R>() && binary::field_count<R>() <= binary::kMaxPredictedFields);
    values.begin(R::kLetter);
    PredictedEncoder<R> e(p, values);
    R::fields(e, r);
    frame.begin(R::kLetter);
    frame.varint(e.mask());
    std::string_view v = values.finish();
    // The values' frame header (letter, length) is not part of this frame's payload.
    const size_t head = v.size() - values.size();
    for (size_t i = head; i < v.size() && frame.room(1); ++i) frame.raw(v[i]);
    return frame.finish();
}

}  // namespace memguard::format
