#include "format/decode.h"

#include <algorithm>
#include <climits>

#include "format/fields.h"

namespace memguard::format {

std::string quoted(std::string_view s) {
    constexpr size_t max_len = 40;
    std::string out = "'";
    for (size_t i = 0; i < s.size() && i < max_len; ++i) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        out.push_back(c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '?');
    }
    if (s.size() > max_len) out += "...";
    return out + "'";
}

void Decoder::start(const std::vector<std::string_view>& fields, int minor, bool head) {
    f_ = &fields;
    minor_ = minor;
    i_ = 1;
    head_ = head;
    done_ = false;
    key_at_ = 0;
    time_.reset();
    strings_used_ = 0;
}

void Decoder::need(size_t n) const {
    if (f_->size() < n + 1) {
        throw Malformed(std::to_string(n) + " fields expected, " + std::to_string(f_->size() - 1) + " found");
    }
}

void Decoder::bad(std::string_view field, const char* label, const char* note) const {
    throw Malformed(std::string("bad ") + label + " " + quoted(field) + note);
}

void Decoder::unknown(const Field& f, std::string_view s) const {
    throw Malformed(std::string("unknown ") + f.label + " " + quoted(s));
}

int64_t Decoder::time_value(const Field& f, std::string_view s) const {
    auto v = parse_sdec(s);
    if (!v) bad(s, f.label);
    if (f.enc != Enc::SDec && (*v < -kMaxTimeNs || *v > kMaxTimeNs)) {
        throw Malformed(std::string(f.label) + " " + quoted(s) + " out of range (2^62 ns or more either way)");
    }
    return *v;
}

uint64_t Decoder::dec_value(const Field& f, std::string_view s) const {
    auto v = parse_dec(s);
    if (!v) bad(s, f.label);
    return *v;
}

uint32_t Decoder::id_value(const Field& f, std::string_view s) const {
    uint64_t v = dec_value(f, s);
    if (v > UINT32_MAX) throw Malformed(std::string(f.label) + " " + quoted(s) + " too large");
    if (v == 0 && f.zero != nullptr) throw Malformed(f.zero);
    return static_cast<uint32_t>(v);
}

uint64_t Decoder::hex_value(const Field& f, std::string_view s) const {
    auto v = parse_hex(s);
    if (!v) bad(s, f.label, " (hex expected)");
    return *v;
}

std::string& Decoder::storage() {
    // A record has a few strings at most; the slots keep their capacity from record to record.
    if (strings_used_ == strings_.size()) strings_.emplace_back();
    std::string& s = strings_[strings_used_++];
    s.clear();
    return s;
}

void Decoder::operator()(const Field& f, int64_t& v) {
    if (skip(f)) return;
    v = time_value(f, next());
    if (f.enc == Enc::Time) time_ = v;
}

void Decoder::operator()(const Field& f, int& v) {
    if (skip(f)) return;
    std::string_view s = next();
    auto parsed = parse_sdec(s);
    if (!parsed || *parsed < INT32_MIN || *parsed > INT32_MAX) bad(s, f.label);
    v = static_cast<int>(*parsed);
    if (f.enc == Enc::Device && (v < -1 || v > kMaxDevice)) {
        throw Malformed("device " + quoted(s) + " out of range (-1 to " + std::to_string(kMaxDevice) + ")");
    }
}

void Decoder::operator()(const Field& f, uint64_t& v) {
    if (skip(f)) return;
    std::string_view s = next();
    v = f.enc == Enc::Hex ? hex_value(f, s) : f.enc == Enc::Id ? id_value(f, s) : dec_value(f, s);
}

void Decoder::operator()(const Field& f, uint32_t& v) {
    if (skip(f)) return;
    v = id_value(f, next());
}

void Decoder::operator()(const Field& f, bool& v) {
    if (skip(f)) return;
    std::string_view s = next();
    if (s != "0" && s != "1") bad(s, f.label, " (0 or 1 expected)");
    v = s == "1";
}

void Decoder::operator()(const Field& f, std::string_view& v) {
    if (skip(f)) return;
    std::string_view s = next();
    std::string& out = storage();
    if (f.enc == Enc::BuildId) {
        if (s == "-") {
            v = {};
            return;
        }
        bool is_hex = std::all_of(s.begin(), s.end(), [](char c) { return format::hex_value(c) >= 0; });
        if (!is_hex || s.empty()) bad(s, f.label, " (hex expected)");
        if (s.size() % 2 != 0) bad(s, f.label, " (odd length)");
        out.assign(s);
        std::transform(out.begin(), out.end(), out.begin(),
                       [](char c) { return static_cast<char>(c >= 'A' && c <= 'F' ? c - 'A' + 'a' : c); });
    } else {
        auto decoded = s.empty() ? std::nullopt : decode(s);
        if (!decoded) bad(s, f.label, " (percent-encoding)");
        out = std::move(*decoded);
    }
    v = out;
}

void Decoder::operator()(const Field& f, Tail<uint64_t>& v) {
    if (skip(f)) return;
    u64_.clear();
    while (i_ < f_->size()) u64_.push_back(f.enc == Enc::Hex ? hex_value(f, next()) : dec_value(f, next()));
    v = Tail<uint64_t>{u64_.data(), u64_.size()};
}

void Decoder::operator()(const Field& f, Tail<uint32_t>& v) {
    if (skip(f)) return;
    u32_.clear();
    while (i_ < f_->size()) u32_.push_back(id_value(f, next()));
    v = Tail<uint32_t>{u32_.data(), u32_.size()};
}

void Decoder::operator()(const Field& f, Tail<int64_t>& v) {
    if (skip(f)) return;
    i64_.clear();
    while (i_ < f_->size()) i64_.push_back(time_value(f, next()));
    v = Tail<int64_t>{i64_.data(), i64_.size()};
}

void Decoder::key(const Field& f, std::string_view) {
    if (skip(f)) return;
    key_at_ = i_++;
    done_ = head_;
}

}  // namespace memguard::format
