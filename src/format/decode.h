// The reader's side of the record table: a record's fields, split at spaces, decoded as the table
// says, with the reader's checks. A field that breaks them throws Malformed with the message's
// detail ("bad address 'xyz' (hex expected)"); the reader adds the file, the line and the record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "format/records.h"

namespace memguard::format {

/// A record the reader refuses; what() is the detail after "malformed <letter> record: ".
class Malformed : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

/// A field quoted for a message: at most 40 chars, non-printable bytes as '?'.
std::string quoted(std::string_view s);

class Decoder {
public:
    /// Decodes record R from `fields` (fields[0] is its letter) of a file of format minor `minor`:
    /// fields added after `minor` keep their defaults, fields past the known ones are ignored.
    /// Strings in `r` stay valid until the next call.
    template <class R>
    void read(const std::vector<std::string_view>& fields, int minor, R& r) {
        start(fields, minor, false);
        need(count<R>(minor, false));
        R::fields(*this, r);
    }
    /// Decodes the fields of keyed record R before its key (its other fields keep their defaults)
    /// and returns the key's field: which record of that letter the line is.
    template <class R>
    std::string_view read_head(const std::vector<std::string_view>& fields, int minor, R& r) {
        start(fields, minor, true);
        need(count<R>(minor, true));
        R::fields(*this, r);
        return (*f_)[key_at_];
    }
    /// The record's own time (its Enc::Time field), when it has one.
    std::optional<int64_t> time() const { return time_; }

    // The visitor: one overload per C++ type of the table's values.
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
        if ((*f_)[i_] == "-") {
            ++i_;
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
    /// Counts what a record needs: its fields known at `minor` (up to its key when `head`).
    struct Counter {
        int minor;
        bool head;
        size_t n = 0;
        bool done = false;
        template <class T>
        void operator()(const Field& f, const T&) {
            n += !done && f.minor <= minor ? 1 : 0;
        }
        template <class T>
        void operator()(const Field&, const Tail<T>&) {}
        void key(const Field&, std::string_view) {
            if (!done) ++n;
            done = done || head;
        }
    };
    template <class R>
    static size_t count(int minor, bool head) {
        Counter c{minor, head};
        R r{};
        R::fields(c, r);
        return c.n;
    }

    void start(const std::vector<std::string_view>& fields, int minor, bool head);
    /// "N fields expected, M found" unless the line has `n` fields after its letter.
    void need(size_t n) const;
    /// True when the field is not read: added after the file's minor, or after the key of a head.
    bool skip(const Field& f) const { return f.minor > minor_ || done_; }
    std::string_view next() { return (*f_)[i_++]; }
    [[noreturn]] void bad(std::string_view field, const char* label, const char* note = "") const;
    int64_t time_value(const Field& f, std::string_view s) const;
    uint64_t dec_value(const Field& f, std::string_view s) const;
    uint32_t id_value(const Field& f, std::string_view s) const;
    uint64_t hex_value(const Field& f, std::string_view s) const;
    /// A string kept until the next record.
    std::string& storage();
    template <class E, size_t N>
    void name(const Field& f, const Names<E, N>& names, E& v) {
        if (skip(f)) return;
        std::string_view s = next();
        if (!names.parse(s, &v)) unknown(f, s);
    }
    [[noreturn]] void unknown(const Field& f, std::string_view s) const;

    const std::vector<std::string_view>* f_ = nullptr;
    int minor_ = 0;
    size_t i_ = 1;
    bool head_ = false;
    bool done_ = false;
    size_t key_at_ = 0;
    std::optional<int64_t> time_;
    std::deque<std::string> strings_;  // grows without moving the strings that views point into
    size_t strings_used_ = 0;
    std::vector<uint64_t> u64_;
    std::vector<uint32_t> u32_;
    std::vector<int64_t> i64_;
};

}  // namespace memguard::format
