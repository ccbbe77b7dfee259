#include "report/json.h"

#include <cstdio>
#include <stdexcept>

#include "common/text.h"

namespace memguard::report {

void JsonWriter::escape(std::string_view s, std::string& out) {
    out.push_back('"');
    for (size_t i = 0; i < s.size();) {
        unsigned char c = static_cast<unsigned char>(s[i]);
        uint32_t cp = 0;
        size_t len = text::utf8_sequence(s, i, &cp);
        if (len == 0) {
            out += "\xef\xbf\xbd";  // U+FFFD for a byte that is not valid UTF-8
            ++i;
            continue;
        }
        if (len > 1 && text::is_control(cp)) {
            // C1: valid JSON raw, but `--json` output read on a terminal must not carry it.
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
            out += buf;
        } else if (len > 1) {
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
    if (compact_) return;
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
    out_ += compact_ ? ":" : ": ";
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
