// The record table as data, for tests and documentation: each record's letter, minor, family, key
// and fields in order (format/records.h).
#pragma once

#include <string_view>
#include <vector>

#include "format/records.h"

namespace memguard::format {

struct FieldInfo {
    std::string_view name;
    Enc enc;
    int minor = 0;
    bool tail = false;  // a variadic tail (S's ips, P's frames)
    bool key = false;   // the key of a keyed record (W's kind)
};

struct RecordInfo {
    char letter = 0;
    int minor = 0;
    Family family = Family::Meta;
    std::string_view key;  // empty unless keyed
    std::vector<FieldInfo> fields;
};

namespace detail {
struct Describer {
    std::vector<FieldInfo>* out;
    template <class T>
    void operator()(const Field& f, const T&) {
        out->push_back(FieldInfo{f.name, f.enc, f.minor});
    }
    template <class T>
    void operator()(const Field& f, const Tail<T>&) {
        out->push_back(FieldInfo{f.name, f.enc, f.minor, true});
    }
    void key(const Field& f, std::string_view) { out->push_back(FieldInfo{f.name, Enc::Name, f.minor, false, true}); }
};
}  // namespace detail

template <class R>
RecordInfo describe() {
    RecordInfo info{R::kLetter, R::kMinor, R::kFamily, detail::KeyOf<R>::value, {}};
    detail::Describer d{&info.fields};
    const R r{};
    R::fields(d, r);
    return info;
}

/// Every record of the table, in the table's order.
inline std::vector<RecordInfo> describe_table() {
    std::vector<RecordInfo> out;
    for_each_record([&out](auto type) { out.push_back(describe<typename decltype(type)::type>()); });
    return out;
}

}  // namespace memguard::format
