// The record table: every record of the report (docs/report-format.md), once. Each record is a
// struct with its letter (kLetter), the format minor that introduced it (kMinor), its family
// (kFamily: the writer's track/records_<family>.cpp and the reader's report/read_<family>.cpp) and
// its fields in file order, listed by fields(v, r) for a visitor v: the writer's encoder
// (format/encode.h), the reader's decoder (format/decode.h) and the table's descriptions for
// tests and docs (format/table.h) all walk the same list. fields() is always inlined: the
// encoder's calls then fold into the straight-line code the hooks had before the table. The
// records are defined by family in records_<family>.h; this file lists them all and derives the
// format minor.
//
// Adding a record: its struct in records_<family>.h with the next minor, a line in
// for_each_record, its row in docs/report-format.md (report.FormatDoc checks it), an apply() in
// report/read_<family>.cpp, an emit() where the library records it, and its values in
// tests/report/format_roundtrip_test.cpp (which fails until every field is compared). Adding a
// trailing field: the field with .since(minor) at the end of fields(), the same places. Adding a
// header key (an I record): its line in rec::kInfoKeys with the next minor, and `I key` in the
// docs' section of that minor (report.FormatDoc checks it too).
#pragma once

#include <string_view>
#include <type_traits>

#include "format/field.h"
#include "format/records_blocks.h"
#include "format/records_cycles.h"
#include "format/records_events.h"
#include "format/records_graphs.h"
#include "format/records_insight.h"
#include "format/records_meta.h"
#include "format/records_tensors.h"
#include "format/records_vmm.h"

namespace memguard::format {

namespace detail {
template <class R, class = void>
struct KeyOf {
    static constexpr std::string_view value{};
};
template <class R>
struct KeyOf<R, std::void_t<decltype(R::kKey)>> {
    static constexpr std::string_view value = R::kKey;
};
}  // namespace detail

/// True for the records of a letter that several records share, told apart by a key field (W).
template <class R>
constexpr bool is_keyed() {
    return !detail::KeyOf<R>::value.empty();
}

template <class R>
struct Type {
    using type = R;
};

/// Calls f(Type<R>{}) for every record of the table, in the order of the docs.
template <class F>
constexpr void for_each_record(F&& f) {
    f(Type<rec::Info>{}), f(Type<rec::Module>{}), f(Type<rec::Stack>{}), f(Type<rec::Alloc>{});
    f(Type<rec::Free>{}), f(Type<rec::Restore>{}), f(Type<rec::Failure>{}), f(Type<rec::Heartbeat>{});
    f(Type<rec::End>{});
    f(Type<rec::CaptureBegin>{}), f(Type<rec::CaptureEnd>{}), f(Type<rec::Instantiate>{});
    f(Type<rec::Launch>{}), f(Type<rec::ExecDestroy>{}), f(Type<rec::GraphDestroy>{}), f(Type<rec::UnsafeCall>{});
    f(Type<rec::FreeLiveGraph>{}), f(Type<rec::WarmupRetention>{});
    f(Type<rec::PyFrame>{}), f(Type<rec::PyStack>{}), f(Type<rec::Compile>{}), f(Type<rec::Collection>{});
    f(Type<rec::Reserve>{}), f(Type<rec::AddressFree>{}), f(Type<rec::Create>{}), f(Type<rec::Release>{});
    f(Type<rec::Map>{}), f(Type<rec::Unmap>{});
    f(Type<rec::PhaseBegin>{}), f(Type<rec::PhaseEnd>{}), f(Type<rec::Mark>{});
    f(Type<rec::TensorAlloc>{}), f(Type<rec::TensorFree>{}), f(Type<rec::TensorOom>{}), f(Type<rec::TensorOomSite>{});
    f(Type<rec::Lost>{});
    f(Type<rec::Step>{}), f(Type<rec::MomentBegin>{}), f(Type<rec::TensorTag>{}), f(Type<rec::AllocatorBlock>{});
    f(Type<rec::OomContext>{}), f(Type<rec::MomentEnd>{});
    f(Type<rec::PythonPath>{});
    f(Type<rec::Explanation>{}), f(Type<rec::GarbageGroup>{}), f(Type<rec::GarbageTensor>{}), f(Type<rec::ChainStep>{});
    f(Type<rec::DetailAt>{}), f(Type<rec::DetailDropped>{});
    f(Type<rec::FoldAt>{}), f(Type<rec::Figure>{});
    f(Type<rec::Import>{});
}

namespace detail {
/// Visits a record's fields to find the highest minor among them.
struct MinorOf {
    int minor = 0;
    template <class T>
    constexpr void operator()(const Field& f, const T&) {
        minor = f.minor > minor ? f.minor : minor;
    }
    constexpr void key(const Field&, std::string_view) {}
};
template <class R>
constexpr int record_minor() {
    MinorOf v;
    R r{};
    R::fields(v, r);
    return v.minor > R::kMinor ? v.minor : R::kMinor;
}
constexpr int table_minor() {
    int minor = 0;
    for (const rec::InfoKey& k : rec::kInfoKeys) minor = k.minor > minor ? k.minor : minor;
    for_each_record([&minor](auto type) {
        const int m = record_minor<typename decltype(type)::type>();
        minor = m > minor ? m : minor;
    });
    return minor;
}
}  // namespace detail

/// `I format_minor`: the highest minor of the table, its records, their fields and the header's keys.
constexpr int kFormatMinor = detail::table_minor();

}  // namespace memguard::format
