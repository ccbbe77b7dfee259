// What the record table (format/records.h) is made of: a field's description and the names of
// the fields that many records share.
//
// A field is its name in the docs, the name the reader's messages give it, its encoding and the
// minor that added it (trailing fields added later, like A's capture_id). The C++ type of the value
// completes the encoding: std::optional is written `-` when absent, Tail is a variadic tail.
// Strings are views: the writer's into what it records, the reader's into the decoder's storage,
// valid until the next record is decoded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "format/vocabulary.h"

namespace memguard::format {

enum class Enc : uint8_t {
    Time,     // the record's own time: signed decimal ns, within kMaxTimeNs
    Span,     // another time or a duration: signed decimal ns, within kMaxTimeNs
    Dec,      // unsigned decimal (sizes, counts, tids)
    Id,       // unsigned decimal below 2^32 (stack, capture, frame, phase, module ids)
    SDec,     // signed decimal
    Int,      // signed decimal within 32 bits (error codes, line numbers, generations)
    Device,   // a device ordinal: -1 to kMaxDevice
    Hex,      // lowercase hex, no 0x (addresses, handles, streams, instruction pointers)
    Str,      // percent-encoded string
    Name,     // a vocabulary word: an enum's name, or a name (api) written as is, read as a string
    BuildId,  // hex of even length, or `-`
    Flag,     // 0 or 1
};

struct Field {
    const char* name;   // docs/report-format.md's name
    const char* label;  // what the reader's messages call it ("bad <label> '...'")
    Enc enc;
    int minor = 0;               // the format minor that added it (0: with the record)
    const char* zero = nullptr;  // when the value 0 is refused: the reader's message

    constexpr Field since(int m) const { return Field{name, label, enc, m, zero}; }
    constexpr Field nonzero(const char* message) const { return Field{name, label, enc, minor, message}; }
};

/// A variadic tail: the fields from here to the end of the line.
template <class T>
struct Tail {
    const T* data = nullptr;
    size_t size = 0;
};

enum class Family : uint8_t { Meta, Blocks, Graphs, Vmm, Events, Tensors, Insight, Cycles };

namespace field {
constexpr Field t{"t", "time", Enc::Time};
constexpr Field tid{"tid", "tid", Enc::Dec};
constexpr Field addr{"addr", "address", Enc::Hex};
constexpr Field va{"va", "address", Enc::Hex};
constexpr Field size{"size", "size", Enc::Dec};
constexpr Field kind{"kind", "kind", Enc::Name};
constexpr Field api{"api", "api", Enc::Name};
constexpr Field device{"device", "device", Enc::Device};
constexpr Field stream{"stream", "stream", Enc::Hex};
constexpr Field stack_id{"stack_id", "stack id", Enc::Id};
constexpr Field python_stack_id{"python_stack_id", "Python stack id", Enc::Id};
constexpr Field capture_id{"capture_id", "capture id", Enc::Id};
/// A capture id that names a capture (C, c, W): 0 is refused.
constexpr Field capture{capture_id.nonzero("capture id 0 is reserved for \"no capture\"")};
constexpr Field error{"error", "error", Enc::Int};
constexpr Field exec{"exec", "exec", Enc::Hex};
constexpr Field graph{"graph", "graph", Enc::Hex};
constexpr Field handle{"handle", "handle", Enc::Hex};
constexpr Field blocks{"blocks", "blocks", Enc::Dec};
constexpr Field bytes{"bytes", "bytes", Enc::Dec};
constexpr Field source{"source", "source", Enc::Name};
constexpr Field name{"name", "name", Enc::Str};
}  // namespace field

}  // namespace memguard::format
