// The category breakdown (report/categories.h, docs/categories.md) as the CLI shows it: `top --by
// category` (every part with its largest sites) and the categories section of `summary`.
#pragma once

#include <cstddef>
#include <string>

#include "report/categories.h"
#include "report/json.h"
#include "report/report.h"
#include "sites.h"

namespace memguard::cli {

/// A breakdown with its sites symbolized: made once, printed as text or JSON.
class CategoryView {
public:
    /// The breakdown after `events_applied` events (every device), with up to `max_sites` sites a
    /// part, described by up to `frames` frames of each kind.
    CategoryView(const report::Report& r, size_t events_applied, size_t max_sites, size_t frames);
    /// A breakdown made elsewhere (report::PointBreakdowns, with options(max_sites)).
    CategoryView(const report::Report& r, report::Breakdown b, size_t frames);
    /// The options of a breakdown with up to `max_sites` sites a part (every device).
    static report::BreakdownOptions options(size_t max_sites);

    const report::Breakdown& breakdown() const { return b_; }
    /// "tensors named by step moment 2 (after 2 steps)", or "no moment named tensors".
    std::string moment_text() const;
    /// The bytes an estimating rule decided, over every part.
    uint64_t estimated_bytes() const;

    /// One line per part ("  name  bytes  share  [estimate]"), and with `sites`, its sites under it
    /// (each with its label and frames when `frames_shown`), else its largest site's label.
    void print_text(bool sites, bool frames_shown) const;

    /// The members "total_bytes", "estimated_bytes", "moment" and "categories" (each part with its
    /// sites; `frames`: each site's frames too, as `top` gives them).
    void json(report::JsonWriter& j, bool frames) const;

private:
    void symbolize();
    const report::Report& r_;
    report::Breakdown b_;
    SiteSymbolizer sym_;
    std::vector<std::vector<size_t>> handles_;  // per part, per site: its SiteSymbolizer handle
};

}  // namespace memguard::cli
