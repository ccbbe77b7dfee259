// Collects non-fatal remarks about a report, keeping one line per kind of remark. Internal to the reader.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace memguard::report {

class Warnings {
public:
    /// Records a remark of class `cls`; only the first of each class is kept, the others are counted.
    void add(const std::string& cls, std::string message);
    /// Records a remark that goes before all others.
    void add_first(std::string message) { first_.push_back(std::move(message)); }
    /// The remarks, in order of first appearance: "message" or "message (and N more like it)".
    std::vector<std::string> finish() const;

private:
    struct Entry {
        std::string message;
        size_t count = 0;
    };
    std::vector<std::string> first_;
    std::vector<std::string> order_;
    std::map<std::string, Entry> entries_;
};

}  // namespace memguard::report
