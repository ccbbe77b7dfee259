#include "report/warnings.h"

#include <optional>

namespace memguard::report {

void Warnings::add(const std::string& cls, std::string message) {
    Entry& e = entries_[cls];
    if (e.count++ == 0) {
        e.message = std::move(message);
        order_.push_back(cls);
    }
}

std::vector<std::string> Warnings::finish() const {
    std::vector<std::string> out = first_;
    for (const std::string& cls : order_) {
        const Entry& e = entries_.at(cls);
        std::string line = e.message;
        if (e.count > 1) line += " (and " + std::to_string(e.count - 1) + " more like it)";
        out.push_back(std::move(line));
    }
    return out;
}

namespace {

/// A text as figure values: its length, then its bytes (at most kMaxText).
constexpr size_t kMaxText = 1500;

void put_text(std::vector<int64_t>& v, const std::string& s) {
    const size_t n = s.size() < kMaxText ? s.size() : kMaxText;
    v.push_back(static_cast<int64_t>(n));
    for (size_t i = 0; i < n; ++i) v.push_back(static_cast<unsigned char>(s[i]));
}

std::string text_at(const Fold::Figure& x, size_t& i) {
    const auto n = static_cast<size_t>(fold_value(x, i++));
    if (n > kMaxText) throw BadFold(x.name + ": a text too long");
    std::string s;
    for (size_t k = 0; k < n; ++k) s.push_back(static_cast<char>(fold_value(x, i++, 0)));
    return s;
}

}  // namespace

void Warnings::fold_out(FoldWriter& w) const {
    std::vector<int64_t> v;
    for (const std::string& m : first_) {
        v = {0, 0};
        put_text(v, m);
        w.figure("reader.warning", v);
    }
    for (const std::string& cls : order_) {
        const Entry& e = entries_.at(cls);
        v = {1, static_cast<int64_t>(e.count)};
        put_text(v, cls);
        put_text(v, e.message);
        w.figure("reader.warning", v);
    }
}

void Warnings::fold_in(const Fold& f, const std::string& keep) {
    auto kept = entries_.find(keep);
    const std::optional<Entry> own = kept == entries_.end() ? std::nullopt : std::optional<Entry>(kept->second);
    *this = Warnings{};
    f.each("reader.warning", [&](const Fold::Figure& x) {
        size_t i = 2;
        if (fold_value(x, 0) == 0) {
            first_.push_back(text_at(x, i));
            return;
        }
        std::string cls = text_at(x, i);
        Entry& e = entries_[cls];
        if (e.count != 0) throw BadFold("reader.warning: a class twice");
        e.count = static_cast<size_t>(fold_value(x, 1, 1));
        e.message = text_at(x, i);
        order_.push_back(std::move(cls));
    });
    if (own) {
        Entry& e = entries_[keep];
        if (e.count == 0) {
            e.message = own->message;
            order_.push_back(keep);
        }
        e.count += own->count;
    }
}

}  // namespace memguard::report
