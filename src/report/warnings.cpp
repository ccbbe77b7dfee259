#include "report/warnings.h"

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

}  // namespace memguard::report
