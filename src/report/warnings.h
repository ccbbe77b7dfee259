// Collects non-fatal remarks about a report, keeping one line per kind of remark. Internal to the reader.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "report/fold.h"

namespace memguard::report {

class Warnings {
public:
    /// Records a remark of class `cls`; only the first of each class is kept, the others are counted.
    void add(const std::string& cls, std::string message);
    /// Records a remark that goes before all others.
    void add_first(std::string message) { first_.push_back(std::move(message)); }
    /// The remarks, in order of first appearance: "message" or "message (and N more like it)".
    std::vector<std::string> finish() const;
    /// A fold (report/fold.h) holds the remarks so far (figures `reader.warning`): a reader that takes
    /// it has the remarks of the detail it covers, not those of the spine read without that detail.
    void fold_out(FoldWriter& w) const;
    /// Takes back what fold_out wrote, in place of what it holds but its remarks of class `keep`
    /// (the reader's about the folds themselves). Throws BadFold.
    void fold_in(const Fold& f, const std::string& keep);

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
