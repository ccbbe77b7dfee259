#include "format/binary_decode.h"

#include <algorithm>
#include <climits>

#include "format/fields.h"

namespace memguard::format {

namespace {
const Field kMask{"mask", "field mask", Enc::Dec};
}

uint64_t BinaryDecoder::varint_checked(const Field& f) {
    uint64_t v = 0;
    const char* next = get_varint(p_, end_, &v);
    if (next == nullptr) {
        // Ten bytes are the most a 64-bit varint takes: fewer left means the record is cut.
        if (end_ - p_ < 10 && (static_cast<uint8_t>(end_[-1]) & 0x80) != 0) cut(f);
        if (p_ == end_) cut(f);
        throw Malformed(std::string("bad ") + f.label + " (a varint of more than 64 bits)");
    }
    p_ = next;
    return v;
}

uint64_t BinaryDecoder::varint() { return varint(kMask); }

std::string_view BinaryDecoder::bytes(const Field& f) {
    const uint64_t n = varint(f);
    if (n > static_cast<uint64_t>(end_ - p_)) {
        throw Malformed(std::string(f.label) + " of " + std::to_string(n) + " bytes runs past the record's end");
    }
    std::string_view s(p_, static_cast<size_t>(n));
    p_ += n;
    return s;
}

void BinaryDecoder::cut(const Field& f) const {
    throw Malformed(std::string("record ends before its ") + f.label + " (field " + f.name + ")");
}

void BinaryDecoder::bad_number(const Field& f, uint64_t v, const char* note) const {
    throw Malformed(std::string("bad ") + f.label + " " + std::to_string(v) + note);
}

void BinaryDecoder::unpredicted(const Field& f) const {
    throw Malformed(std::string("no ") + f.label + " (field " + f.name + ") and no earlier record to repeat it from");
}

const Field BinaryDecoder::kRank{"rank", "rank", Enc::Dec};

void BinaryDecoder::rule_error(binary::RuleError e, const Field& f, uint64_t rank) const {
    if (e == binary::RuleError::NoPrediction) unpredicted(f);
    const char* among = e == binary::RuleError::NoLiveBlock ? "live blocks" : "blocks of its size freed last";
    throw Malformed(std::string("no ") + f.label + " (field " + f.name + "): rank " + std::to_string(rank) +
                    " is past the " + among + " that earlier records left");
}

void BinaryDecoder::check_time(const Field& f, int64_t v) const {
    if (f.enc != Enc::SDec && (v < -kMaxTimeNs || v > kMaxTimeNs)) {
        throw Malformed(std::string(f.label) + " " + std::to_string(v) + " out of range (2^62 ns or more either way)");
    }
}

uint32_t BinaryDecoder::id_value(const Field& f, uint64_t v) const {
    if (v > UINT32_MAX) throw Malformed(std::string(f.label) + " " + std::to_string(v) + " too large");
    if (v == 0 && f.zero != nullptr) throw Malformed(f.zero);
    return static_cast<uint32_t>(v);
}

void BinaryDecoder::operator()(const Field& f, int64_t& v) {
    if (skip(f)) return;
    v = unzigzag(varint(f));
    check_time(f, v);
    if (f.enc == Enc::Time) time_ = v;
}

void BinaryDecoder::operator()(const Field& f, int& v) {
    if (skip(f)) return;
    const int64_t s = unzigzag(varint(f));
    if (s < INT32_MIN || s > INT32_MAX) throw Malformed(std::string("bad ") + f.label + " " + std::to_string(s));
    v = static_cast<int>(s);
    if (f.enc == Enc::Device && (v < -1 || v > kMaxDevice)) {
        throw Malformed("device '" + std::to_string(v) + "' out of range (-1 to " + std::to_string(kMaxDevice) + ")");
    }
}

void BinaryDecoder::operator()(const Field& f, uint64_t& v) {
    if (skip(f)) return;
    v = varint(f);
    if (f.enc == Enc::Id) v = id_value(f, v);
}

void BinaryDecoder::operator()(const Field& f, uint32_t& v) {
    if (skip(f)) return;
    v = id_value(f, varint(f));
}

void BinaryDecoder::operator()(const Field& f, bool& v) {
    if (skip(f)) return;
    const uint64_t b = varint(f);
    if (b > 1) bad_number(f, b, " (0 or 1 expected)");
    v = b == 1;
}

void BinaryDecoder::operator()(const Field& f, std::string_view& v) {
    if (skip(f)) return;
    std::string_view s = bytes(f);
    if (f.enc == Enc::BuildId && !s.empty()) {
        // Hex text as in the text encoding, lowercase.
        bool is_hex = std::all_of(s.begin(), s.end(), [](char c) { return format::hex_value(c) >= 0; });
        if (!is_hex) throw Malformed(std::string("bad ") + f.label + " " + quoted(s) + " (hex expected)");
        if (s.size() % 2 != 0) throw Malformed(std::string("bad ") + f.label + " " + quoted(s) + " (odd length)");
        if (std::any_of(s.begin(), s.end(), [](char c) { return c >= 'A' && c <= 'F'; })) {
            build_id_.assign(s);
            std::transform(build_id_.begin(), build_id_.end(), build_id_.begin(),
                           [](char c) { return static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c); });
            s = build_id_;
        }
    }
    v = s;
}

void BinaryDecoder::operator()(const Field& f, Tail<uint64_t>& v) {
    if (skip(f)) return;
    const uint64_t n = varint(f);
    // Each item takes a byte at least: a count beyond the record's bytes is corrupt, not a reason
    // to allocate.
    if (n > static_cast<uint64_t>(end_ - p_)) {
        throw Malformed(std::to_string(n) + " " + f.label + "s do not fit in the record's " +
                        std::to_string(end_ - p_) + " remaining bytes");
    }
    u64_.resize(static_cast<size_t>(n));
    for (uint64_t& x : u64_) x = varint(f);
    v = Tail<uint64_t>{u64_.data(), u64_.size()};
}

void BinaryDecoder::operator()(const Field& f, Tail<uint32_t>& v) {
    if (skip(f)) return;
    const uint64_t n = varint(f);
    if (n > static_cast<uint64_t>(end_ - p_)) {
        throw Malformed(std::to_string(n) + " " + f.label + "s do not fit in the record's " +
                        std::to_string(end_ - p_) + " remaining bytes");
    }
    u32_.resize(static_cast<size_t>(n));
    for (uint32_t& x : u32_) x = id_value(f, varint(f));
    v = Tail<uint32_t>{u32_.data(), u32_.size()};
}

void BinaryDecoder::operator()(const Field& f, Tail<int64_t>& v) {
    if (skip(f)) return;
    const uint64_t n = varint(f);
    if (n > static_cast<uint64_t>(end_ - p_)) {
        throw Malformed(std::to_string(n) + " " + f.label + "s do not fit in the record's " +
                        std::to_string(end_ - p_) + " remaining bytes");
    }
    i64_.resize(static_cast<size_t>(n));
    for (int64_t& x : i64_) x = unzigzag(varint(f));
    v = Tail<int64_t>{i64_.data(), i64_.size()};
}

void BinaryDecoder::key(const Field& f, std::string_view) {
    if (skip(f)) return;
    key_ = bytes(f);
    done_ = head_;
}

}  // namespace memguard::format
