// A small streaming JSON writer: objects, arrays, strings (escaped, control characters C1 included
// as \u00XX, invalid UTF-8 replaced by U+FFFD, so the output is always valid UTF-8 and safe on a
// terminal), integers, exact decimal numbers, booleans and null. Pretty-printed with two-space
// indentation, or compact: one line, no spaces (a line of JSON lines).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memguard::report {

class JsonWriter {
public:
    JsonWriter() = default;
    /// `compact`: the document on one line (str() still ends it with '\n').
    explicit JsonWriter(bool compact) : compact_(compact) {}

    JsonWriter& begin_object();
    JsonWriter& end_object();
    JsonWriter& begin_array();
    JsonWriter& end_array();
    /// The key of the next member; only inside an object.
    JsonWriter& key(std::string_view k);

    JsonWriter& value(std::string_view s);
    JsonWriter& value(const char* s) { return value(std::string_view(s)); }
    JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
    JsonWriter& value(uint64_t v);
    JsonWriter& value(int64_t v);
    JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
    JsonWriter& value(unsigned v) { return value(static_cast<uint64_t>(v)); }
    JsonWriter& value(bool v);
    JsonWriter& null();
    /// A number already rendered as JSON (e.g. by seconds_exact); must be a valid JSON number.
    JsonWriter& number(std::string_view rendered);

    template <class T>
    JsonWriter& value_or_null(const std::optional<T>& v) {
        return v ? value(*v) : null();
    }

    /// The document so far; complete once every object and array is closed. Ends with '\n' then.
    std::string str() const;

    /// Appends `s` to `out` as a JSON string literal, quotes included.
    static void escape(std::string_view s, std::string& out);

private:
    void before_value();
    void newline();

    struct Level {
        bool is_object;
        size_t members = 0;
    };
    std::string out_;
    std::vector<Level> stack_;
    bool after_key_ = false;
    bool compact_ = false;
};

}  // namespace memguard::report
