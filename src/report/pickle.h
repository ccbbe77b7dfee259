// A minimal pickle writer (protocol 4 opcodes, no framing) for plain data: dict, list, 2-tuple, str,
// int, float, bool and None, plus memo references. What it writes is what PyTorch's memory_viz
// viewer can unpickle (its unpickler knows no bytes, globals or protocol 5) and what Python's pickle
// loads. Containers are written with MARK ... SETITEMS/APPENDS; nothing is framed.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace memguard::report {

class PickleWriter {
public:
    PickleWriter();

    PickleWriter& begin_dict();  // then key, value, key, value, ...
    PickleWriter& end_dict();
    PickleWriter& begin_list();
    PickleWriter& end_list();
    /// Makes a tuple of the two values written last.
    PickleWriter& tuple2();

    PickleWriter& str(std::string_view s);  // invalid UTF-8 bytes become U+FFFD
    PickleWriter& integer(int64_t v);
    PickleWriter& uinteger(uint64_t v);
    PickleWriter& real(double v);
    PickleWriter& boolean(bool v);
    PickleWriter& none();

    /// Stores the value written last in the memo; returns its index for get().
    uint32_t memoize();
    /// Writes the memoized value `index` again (the same object).
    PickleWriter& get(uint32_t index);

    /// The pickle, ended with STOP. Call once every container is closed.
    std::string finish();

private:
    void long1(const unsigned char* le, size_t n);
    std::string out_;
    uint32_t memo_ = 0;
};

}  // namespace memguard::report
