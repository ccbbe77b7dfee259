// The reader's side of the binary encoding (format/binary.h, docs/report-format.md "Binary
// encoding"): a frame's payload decoded as the record table says, with the text decoder's checks.
// A field that breaks them throws Malformed; the reader adds the file, the offset and the record.
// One decoder reads one file, in order: predicted records depend on the records before them.
#pragma once

#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "format/binary.h"
#include "format/decode.h"

namespace memguard::format {

class BinaryDecoder {
public:
    /// Decodes record R from a frame's payload in a file of format minor `minor`: plain records'
    /// fields added after `minor` keep their defaults, bytes past the known fields are ignored
    /// (a predicted record's fields are those its mask names).
    /// Strings in `r` stay valid until the next call (they may point into `payload`).
    template <class R>
    void read(std::string_view payload, int minor, R& r) {
        // A predicted record's mask says which fields it holds, whatever the file's minor.
        start(payload, is_predicted<R>() ? INT_MAX : minor, false);
        if constexpr (is_predicted<R>()) {
            if (predictions_.version() >= 2) {
                read_ruled(r);
            } else {
                Predicted<R> p{*this, varint()};
                R::fields(p, r);
            }
        } else {
            R::fields(*this, r);
        }
    }
    /// The fields of keyed record R before its key, and the key: which record of that letter it is.
    template <class R>
    std::string_view read_head(std::string_view payload, int minor, R& r) {
        start(payload, minor, true);
        R::fields(*this, r);
        return key_;
    }
    std::optional<int64_t> time() const { return time_; }
    /// Forgets the predictions: the next record starts a file.
    void reset() { predictions_.reset(); }
    /// The binary encoding's version (the header's number, binary::kVersion1 or binary::kVersion):
    /// starts a file of that version.
    void set_version(int version) { predictions_ = binary::Predictions(version); }
    int version() const noexcept { return predictions_.version(); }

    // The plain visitor.
    void operator()(const Field& f, int64_t& v);
    void operator()(const Field& f, int& v);
    void operator()(const Field& f, uint64_t& v);
    void operator()(const Field& f, uint32_t& v);
    void operator()(const Field& f, bool& v);
    void operator()(const Field& f, std::string_view& v);
    void operator()(const Field& f, Kind& v) { name(f, kKindNames, v); }
    void operator()(const Field& f, CaptureMode& v) { name(f, kCaptureModeNames, v); }
    void operator()(const Field& f, PhaseSource& v) { name(f, kPhaseSourceNames, v); }
    void operator()(const Field& f, GcTrigger& v) { name(f, kGcTriggerNames, v); }
    void operator()(const Field& f, CapturePhase& v) { name(f, kCapturePhaseNames, v); }
    void operator()(const Field& f, Rescue& v) { name(f, kRescueNames, v); }
    void operator()(const Field& f, StepSource& v) { name(f, kStepSourceNames, v); }
    void operator()(const Field& f, MomentReason& v) { name(f, kMomentReasonNames, v); }
    void operator()(const Field& f, Category& v) { name(f, kCategoryNames, v); }
    void operator()(const Field& f, BlockState& v) { name(f, kBlockStateNames, v); }
    void operator()(const Field& f, OomSource& v) { name(f, kOomSourceNames, v); }
    void operator()(const Field& f, PathKind& v) { name(f, kPathKindNames, v); }
    void operator()(const Field& f, GarbageKind& v) { name(f, kGarbageKindNames, v); }
    void operator()(const Field& f, HeldHow& v) { name(f, kHeldHowNames, v); }
    template <class T>
    void operator()(const Field& f, std::optional<T>& v) {
        if (skip(f)) return;
        const uint64_t tag = varint(f);
        if (tag > 1) bad_number(f, tag, " (0 or 1 expected before an optional value)");
        if (tag == 0) {
            v.reset();
            return;
        }
        T value{};
        (*this)(f, value);
        v = value;
    }
    void operator()(const Field& f, Tail<uint64_t>& v);
    void operator()(const Field& f, Tail<uint32_t>& v);
    void operator()(const Field& f, Tail<int64_t>& v);
    void key(const Field& f, std::string_view key);

private:
    /// Version 2: the mask, bit 0's rank, the fields (the rule fields' coded values kept in
    /// `coded`), then the rule fields from their predictions (binary::Rules), in their order.
    template <class R>
    void read_ruled(R& r) {
        binary::Coded coded;
        const uint64_t mask = varint();
        if ((mask & 1) != 0) {
            coded.has_rank = true;
            coded.rank = varint(kRank);
        }
        Predicted<R> p{*this, mask, 0, 1, &coded};
        R::fields(p, r);
        int field = 0;
        const binary::RuleError e = binary::Rules<R>::resolve(predictions_, r, coded, &field);
        if (e != binary::RuleError::None) rule_error<R>(e, field, coded.rank);
        binary::Rules<R>::commit(predictions_, r, coded);
    }
    template <class R>
    [[noreturn]] void rule_error(binary::RuleError e, int field, uint64_t rank) const {
        binary::FieldAt at{field};
        R r{};
        R::fields(at, r);
        rule_error(e, at.out, rank);
    }
    [[noreturn]] void rule_error(binary::RuleError e, const Field& f, uint64_t rank) const;
    static const Field kRank;

    /// The predicted records' visitor: the mask says which fields the payload holds.
    template <class R>
    struct Predicted {
        BinaryDecoder& d;
        uint64_t mask;
        size_t i = 0;
        size_t shift = 0;                // version 2: field i's bit is i + 1
        binary::Coded* coded = nullptr;  // version 2: the rule fields' coded values go there

        template <class T>
        void operator()(const Field& f, T& v) {
            if (coded != nullptr && binary::Rules<R>::is_rule(i)) {
                if (present()) {
                    if (std::string_view(f.name) == "addr") {
                        coded->code(i, d.varint(f));  // a zigzag difference
                    } else {
                        T value{};
                        d(f, value);
                        coded->code(i, binary::bits_of(value));
                    }
                }
                ++i;
                return;
            }
            binary::Slot& s = d.predictions_.template slot<R>(i);
            if (present()) {
                if (binary::Predictions::is_delta<R>(i)) {
                    v = from_bits<T>(s.bits + static_cast<uint64_t>(unzigzag(d.varint(f))));
                    if constexpr (std::is_same_v<T, int64_t>) d.check_time(f, v);
                } else {
                    d(f, v);
                }
                s.bits = binary::bits_of(v);
                s.known = true;
            } else {
                if (!s.known) d.unpredicted(f);
                v = from_bits<T>(s.bits);
            }
            if constexpr (std::is_same_v<T, int64_t>) {
                if (f.enc == Enc::Time) d.time_ = v;
            }
            ++i;
        }
        template <class T>
        void operator()(const Field& f, std::optional<T>& v) {
            binary::Slot& s = d.predictions_.template slot<R>(i);
            if (present()) {
                d(f, v);
                s.present = v.has_value();
                s.bits = v ? binary::bits_of(*v) : 0;
                s.known = true;
            } else {
                if (!s.known) d.unpredicted(f);
                if (s.present) {
                    v = from_bits<T>(s.bits);
                } else {
                    v.reset();
                }
            }
            ++i;
        }
        void operator()(const Field& f, std::string_view& v) {
            binary::Slot& s = d.predictions_.template slot<R>(i);
            if (present()) {
                std::string_view in;
                d(f, in);
                s.str.assign(in.data(), in.size());
                s.known = true;
            } else if (!s.known) {
                d.unpredicted(f);
            }
            v = s.str;
            ++i;
        }
        bool present() const { return i + shift < 64 && ((mask >> (i + shift)) & 1) != 0; }
        template <class T>
        static T from_bits(uint64_t bits) {
            if constexpr (std::is_enum_v<T>) {
                return static_cast<T>(static_cast<std::underlying_type_t<T>>(bits));
            } else if constexpr (std::is_same_v<T, bool>) {
                return bits != 0;
            } else {
                return static_cast<T>(bits);
            }
        }
    };

    void start(std::string_view payload, int minor, bool head) {
        p_ = payload.data();
        end_ = p_ + payload.size();
        minor_ = minor;
        head_ = head;
        done_ = false;
        time_.reset();
    }
    bool skip(const Field& f) const { return f.minor > minor_ || done_; }
    /// The next varint; Malformed when the payload ends first or the varint is over 64 bits.
    /// Inline up to nine bytes; the tenth (bit 63) and every error in varint_checked: the varints
    /// are a sixth of the instructions of reading an allocation churn (issue 23).
    uint64_t varint(const Field& f) {
        const auto* p = reinterpret_cast<const unsigned char*>(p_);
        const auto* end = reinterpret_cast<const unsigned char*>(end_);
        uint64_t out = 0;
        for (int shift = 0; shift < 63 && p < end; shift += 7) {
            const unsigned b = *p++;
            out |= static_cast<uint64_t>(b & 0x7f) << shift;
            if (b < 0x80) {
                p_ = reinterpret_cast<const char*>(p);
                return out;
            }
        }
        return varint_checked(f);
    }
    uint64_t varint();
    uint64_t varint_checked(const Field& f);
    std::string_view bytes(const Field& f);
    [[noreturn]] void cut(const Field& f) const;
    [[noreturn]] void bad_number(const Field& f, uint64_t v, const char* note) const;
    [[noreturn]] void unpredicted(const Field& f) const;
    void check_time(const Field& f, int64_t v) const;
    uint32_t id_value(const Field& f, uint64_t v) const;
    template <class E, size_t N>
    void name(const Field& f, const Names<E, N>& names, E& v) {
        if (skip(f)) return;
        const uint64_t i = varint(f);
        if (i >= N) bad_number(f, i, " (unknown)");
        v = static_cast<E>(static_cast<std::underlying_type_t<E>>(i));
    }

    const char* p_ = nullptr;
    const char* end_ = nullptr;
    int minor_ = 0;
    bool head_ = false;
    bool done_ = false;
    std::string_view key_;
    std::optional<int64_t> time_;
    std::vector<uint64_t> u64_;
    std::vector<uint32_t> u32_;
    std::vector<int64_t> i64_;
    std::string build_id_;
    binary::Predictions predictions_;
};

/// Reads the varint at `p` (before `end`) into *v; returns the byte after it, or null when the
/// bytes end first or it is longer than 10 bytes or over 64 bits.
inline const char* get_varint(const char* p, const char* end, uint64_t* v) noexcept {
    uint64_t out = 0;
    for (int shift = 0; shift < 70 && p < end; shift += 7) {
        const auto b = static_cast<uint8_t>(*p++);
        if (shift == 63 && b > 1) return nullptr;
        out |= static_cast<uint64_t>(b & 0x7f) << shift;
        if ((b & 0x80) == 0) {
            *v = out;
            return p;
        }
    }
    return nullptr;
}

}  // namespace memguard::format
