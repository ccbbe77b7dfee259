// The binary report's records (docs/report-format.md, "Binary encoding"): each frame dispatched by
// its letter and the file's minor through the record table, decoded by format/binary_decode.h and
// applied as the text records are. Which records a file has, which it skips and what each means
// are the text format's: only the bytes differ.
#include <array>
#include <string>

#include "format/records.h"
#include "report/parser.h"

namespace memguard::report {

template <class R>
void Parser::read_frame() {
    R r{};
    binary_decoder_->read(payload_, minor_, r);
    if constexpr (format::is_predicted<R>()) {
        if (skip_carried_ > 0) {  // a bounded report's part repeats the blocks live at its start
            --skip_carried_;
            known_carried(r);
            return;
        }
    }
    note_time(binary_decoder_->time());
    apply(r);
}

template <char Letter>
void Parser::read_frame_keyed() {
    std::string_view key;
    bool head = false, matched = false;
    format::for_each_record([&](auto type) {
        using R = typename decltype(type)::type;
        if constexpr (R::kLetter == Letter && format::is_keyed<R>()) {
            if (!head) {
                R r{};
                key = binary_decoder_->read_head(payload_, minor_, r);
                head = true;
            }
            if (!matched && key == R::kKey) {
                matched = true;
                read_frame<R>();
            }
        }
    });
}

void Parser::frame(char letter, std::string_view payload, uint64_t offset) {
    struct Entry {
        int minor = 0;
        void (Parser::*read)() = nullptr;
    };
    static const std::array<Entry, 128> kEntries = [] {
        std::array<Entry, 128> entries{};
        format::for_each_record([&entries](auto type) {
            using R = typename decltype(type)::type;
            Entry& e = entries[static_cast<unsigned char>(R::kLetter)];
            if constexpr (format::is_keyed<R>()) {
                e = Entry{R::kMinor, &Parser::read_frame_keyed<R::kLetter>};
            } else {
                e = Entry{R::kMinor, &Parser::read_frame<R>};
            }
        });
        return entries;
    }();
    offset_ = offset;
    ++line_no_;  // records read, for finish()
    const auto u = static_cast<unsigned char>(letter);
    // Unknown record types are skipped whole (their length says how far), as in text.
    if (u >= kEntries.size()) return;
    const Entry& e = kEntries[u];
    if (e.read == nullptr || minor_ < e.minor) return;
    letter_ = letter;
    payload_ = payload;
    f_.assign(1, std::string_view(&letter_, 1));  // malformed() names the record by f_[0]
    try {
        (this->*e.read)();
    } catch (const format::Malformed& m) {
        malformed(m.what());
    }
}

void Parser::partial_frame(uint64_t offset, uint64_t file_size) {
    warnings_.add_first(source() + ": truncated at byte " + std::to_string(file_size) +
                        " (last record incomplete: disk full?); read up to byte " + std::to_string(offset) +
                        ", the end of the last complete record");
}

void Parser::bad_frame(uint64_t offset, const std::string& what) {
    offset_ = offset;
    fail(what + " (corrupt file?)");
}

}  // namespace memguard::report
