#include "report/pickle.h"

#include <cstring>

#include "common/text.h"

namespace memguard::report {

namespace {

// Pickle opcodes (Lib/pickletools.py documents them).
constexpr char kProto = '\x80', kStop = '.', kMark = '(', kEmptyDict = '}', kSetItems = 'u', kEmptyList = ']',
               kAppends = 'e', kTuple2 = '\x86', kShortBinUnicode = '\x8c', kBinUnicode = 'X', kBinInt1 = 'K',
               kBinInt2 = 'M', kBinInt = 'J', kLong1 = '\x8a', kBinFloat = 'G', kNone = 'N', kNewTrue = '\x88',
               kNewFalse = '\x89', kMemoize = '\x94', kBinGet = 'h', kLongBinGet = 'j';

void put_le32(std::string& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

}  // namespace

PickleWriter::PickleWriter() {
    out_.push_back(kProto);
    out_.push_back('\x04');
}

PickleWriter& PickleWriter::begin_dict() {
    out_.push_back(kEmptyDict);
    out_.push_back(kMark);
    return *this;
}

PickleWriter& PickleWriter::end_dict() {
    out_.push_back(kSetItems);
    return *this;
}

PickleWriter& PickleWriter::begin_list() {
    out_.push_back(kEmptyList);
    out_.push_back(kMark);
    return *this;
}

PickleWriter& PickleWriter::end_list() {
    out_.push_back(kAppends);
    return *this;
}

PickleWriter& PickleWriter::tuple2() {
    out_.push_back(kTuple2);
    return *this;
}

PickleWriter& PickleWriter::str(std::string_view s) {
    std::string utf8;
    utf8.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        size_t n = text::utf8_sequence(s, i);
        if (n == 0) {
            utf8 += "\xef\xbf\xbd";
            ++i;
        } else {
            utf8.append(s.substr(i, n));
            i += n;
        }
    }
    if (utf8.size() < 256) {
        out_.push_back(kShortBinUnicode);
        out_.push_back(static_cast<char>(utf8.size()));
    } else {
        out_.push_back(kBinUnicode);
        put_le32(out_, static_cast<uint32_t>(utf8.size()));
    }
    out_ += utf8;
    return *this;
}

void PickleWriter::long1(const unsigned char* le, size_t n) {
    out_.push_back(kLong1);
    out_.push_back(static_cast<char>(n));
    out_.append(reinterpret_cast<const char*>(le), n);
}

PickleWriter& PickleWriter::integer(int64_t v) {
    if (v >= 0 && v < 256) {
        out_.push_back(kBinInt1);
        out_.push_back(static_cast<char>(v));
    } else if (v >= 0 && v < 65536) {
        out_.push_back(kBinInt2);
        out_.push_back(static_cast<char>(v & 0xff));
        out_.push_back(static_cast<char>(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        out_.push_back(kBinInt);
        put_le32(out_, static_cast<uint32_t>(static_cast<int32_t>(v)));
    } else {
        // Two's complement, little-endian, the fewest bytes that keep the sign.
        unsigned char le[8];
        uint64_t u = static_cast<uint64_t>(v);
        for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((u >> (8 * i)) & 0xff);
        size_t n = 8;
        while (n > 1) {
            unsigned char top = le[n - 1], next = le[n - 2];
            bool redundant = (v >= 0 && top == 0 && (next & 0x80) == 0) || (v < 0 && top == 0xff && (next & 0x80) != 0);
            if (!redundant) break;
            --n;
        }
        long1(le, n);
    }
    return *this;
}

PickleWriter& PickleWriter::uinteger(uint64_t v) {
    if (v <= static_cast<uint64_t>(INT64_MAX)) return integer(static_cast<int64_t>(v));
    unsigned char le[9];
    for (int i = 0; i < 8; ++i) le[i] = static_cast<unsigned char>((v >> (8 * i)) & 0xff);
    le[8] = 0;  // the sign byte: positive
    long1(le, 9);
    return *this;
}

PickleWriter& PickleWriter::real(double v) {
    out_.push_back(kBinFloat);
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    for (int i = 7; i >= 0; --i) out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));  // big-endian
    return *this;
}

PickleWriter& PickleWriter::boolean(bool v) {
    out_.push_back(v ? kNewTrue : kNewFalse);
    return *this;
}

PickleWriter& PickleWriter::none() {
    out_.push_back(kNone);
    return *this;
}

uint32_t PickleWriter::memoize() {
    out_.push_back(kMemoize);
    return memo_++;
}

PickleWriter& PickleWriter::get(uint32_t index) {
    if (index < 256) {
        out_.push_back(kBinGet);
        out_.push_back(static_cast<char>(index));
    } else {
        out_.push_back(kLongBinGet);
        put_le32(out_, index);
    }
    return *this;
}

std::string PickleWriter::finish() {
    out_.push_back(kStop);
    return std::move(out_);
}

}  // namespace memguard::report
