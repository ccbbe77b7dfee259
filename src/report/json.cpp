#include "report/json.h"

#include <cstdio>
#include <stdexcept>

namespace memguard::report {

namespace {

/// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are not valid UTF-8.
size_t utf8_sequence(std::string_view s, size_t i) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = byte(i);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > s.size()) return 0;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
        if ((byte(i + k) & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i + k) & 0x3f);
    }
    static const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return len;
}

}  // namespace

void JsonWriter::escape(std::string_view s, std::string& out) {
    out.push_back('"');
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        size_t len = utf8_sequence(s, i);
        if (len == 0) {
            out += "\xef\xbf\xbd";  // U+FFFD for a byte that is not valid UTF-8
            ++i;
            continue;
        }
        if (len > 1) {
            out.append(s.substr(i, len));
        } else if (c == '"' || c == '\\') {
            out.push_back('\\');
            out.push_back(static_cast<char>(c));
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || c == 0x7f) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
        } else {
            out.push_back(static_cast<char>(c));
        }
        i += len;
    }
    out.push_back('"');
}

void JsonWriter::newline() {
    out_.push_back('\n');
    out_.append(stack_.size() * 2, ' ');
}

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (stack_.empty()) {
        if (!out_.empty()) throw std::logic_error("JsonWriter: a second top-level value");
        return;
    }
    if (stack_.back().is_object) throw std::logic_error("JsonWriter: a value without a key inside an object");
    if (stack_.back().members++ > 0) out_.push_back(',');
    newline();
}

JsonWriter& JsonWriter::key(std::string_view k) {
    if (stack_.empty() || !stack_.back().is_object || after_key_) throw std::logic_error("JsonWriter: misplaced key");
    if (stack_.back().members++ > 0) out_.push_back(',');
    newline();
    escape(k, out_);
    out_ += ": ";
    after_key_ = true;
    return *this;
}

JsonWriter& JsonWriter::begin_object() {
    before_value();
    out_.push_back('{');
    stack_.push_back(Level{true});
    return *this;
}

JsonWriter& JsonWriter::begin_array() {
    before_value();
    out_.push_back('[');
    stack_.push_back(Level{false});
    return *this;
}

JsonWriter& JsonWriter::end_object() {
    if (stack_.empty() || !stack_.back().is_object || after_key_) throw std::logic_error("JsonWriter: misplaced }");
    bool empty = stack_.back().members == 0;
    stack_.pop_back();
    if (!empty) newline();
    out_.push_back('}');
    return *this;
}

JsonWriter& JsonWriter::end_array() {
    if (stack_.empty() || stack_.back().is_object) throw std::logic_error("JsonWriter: misplaced ]");
    bool empty = stack_.back().members == 0;
    stack_.pop_back();
    if (!empty) newline();
    out_.push_back(']');
    return *this;
}

JsonWriter& JsonWriter::value(std::string_view s) {
    before_value();
    escape(s, out_);
    return *this;
}

JsonWriter& JsonWriter::value(uint64_t v) { return number(std::to_string(v)); }

JsonWriter& JsonWriter::value(int64_t v) { return number(std::to_string(v)); }

JsonWriter& JsonWriter::value(bool v) { return number(v ? "true" : "false"); }

JsonWriter& JsonWriter::null() { return number("null"); }

JsonWriter& JsonWriter::number(std::string_view rendered) {
    before_value();
    out_.append(rendered);
    return *this;
}

std::string JsonWriter::str() const { return stack_.empty() && !out_.empty() ? out_ + "\n" : out_; }

}  // namespace memguard::report
