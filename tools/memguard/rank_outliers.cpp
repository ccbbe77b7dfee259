#include "rank_outliers.h"

#include <algorithm>
#include <unordered_map>

#include "report/saturate.h"
#include "report/units.h"

namespace memguard::cli {

namespace {

/// One figure over every rank, and how to name it in a rank that diverges.
struct Figure {
    Divergence::What what = Divergence::Peak;
    std::string name;
    std::vector<uint64_t> values;  // one per rank
    bool high_only = false;
};

/// Adds the figures of named parts (categories or sites): `parts(s)` gives a rank's (key, bytes)
/// pairs, `absent(s)` the value of a part the rank does not list.
template <class Parts, class Absent>
void add_parts(std::vector<Figure>& out, const std::vector<RankSummary>& ranks, Divergence::What what, bool high_only,
               Parts parts, Absent absent) {
    std::unordered_map<std::string, size_t> index;  // key -> position in out
    const size_t first = out.size();
    std::vector<std::vector<char>> listed;  // per part, per rank: whether the rank lists it
    for (size_t i = 0; i < ranks.size(); ++i) {
        for (const auto& [key, bytes] : parts(ranks[i])) {
            auto [it, fresh] = index.emplace(key, out.size());
            if (fresh) {
                Figure f;
                f.what = what;
                f.name = key;
                f.high_only = high_only;
                f.values.assign(ranks.size(), 0);
                out.push_back(std::move(f));
                listed.emplace_back(ranks.size(), 0);
            }
            // Two sites of one rank can share a key (stacks that differ only in frames left out).
            Figure& f = out[it->second];
            f.values[i] = report::saturating_add(f.values[i], bytes);
            listed[it->second - first][i] = 1;
        }
    }
    for (size_t k = first; k < out.size(); ++k) {
        for (size_t i = 0; i < ranks.size(); ++i) {
            if (!listed[k - first][i]) out[k].values[i] = absent(ranks[i]);
        }
    }
}

/// The label a rank gives the site with key `key` (the site's own label where it lists it).
std::string site_label_in(const RankSummary& s, const std::string& key) {
    for (const SummarySite& site : s.sites) {
        if (site.key() == key) return site.label;
    }
    return key;
}

}  // namespace

const char* divergence_kind(Divergence::What w) {
    switch (w) {
    case Divergence::Peak: return "peak";
    case Divergence::Category: return "category";
    case Divergence::Site: return "site";
    }
    return "peak";
}

std::string divergence_text(const Divergence& d) {
    const std::string figures = report::human_bytes(d.bytes) + " against a median of " +
                                report::human_bytes(d.stats.median);
    switch (d.what) {
    case Divergence::Peak: return "peak " + figures + (d.name == "tensors" ? " (tensor bytes)" : "");
    case Divergence::Category: return d.name + " " + figures;
    case Divergence::Site: return "site " + d.name + " " + figures;
    }
    return figures;
}

OutlierFinding find_outlier_ranks(const std::vector<RankSummary>& ranks, const report::OutlierRule& rule) {
    OutlierFinding out;
    if (ranks.size() < kMinRanksForOutliers) return out;
    out.compared = true;
    std::vector<Figure> figures;
    Figure peak;
    peak.what = Divergence::Peak;
    for (const RankSummary& s : ranks) peak.values.push_back(s.peak().peak_bytes);
    figures.push_back(std::move(peak));
    add_parts(
        figures, ranks, Divergence::Category, false,
        [](const RankSummary& s) {
            std::vector<std::pair<std::string, uint64_t>> v;
            for (const SummaryCategory& c : s.categories) v.emplace_back(c.name, c.bytes);
            return v;
        },
        [](const RankSummary& s) {
            // A list cut at kSummaryCategories: a part it left out is at most its smallest.
            return s.categories.size() >= kSummaryCategories ? s.categories.back().bytes : 0;
        });
    add_parts(
        figures, ranks, Divergence::Site, true,
        [](const RankSummary& s) {
            std::vector<std::pair<std::string, uint64_t>> v;
            for (const SummarySite& site : s.sites) v.emplace_back(site.key(), site.bytes);
            return v;
        },
        [](const RankSummary& s) {
            uint64_t smallest = UINT64_MAX;
            for (const SummarySite& site : s.sites) smallest = std::min(smallest, site.bytes);
            return s.site_count > s.sites.size() && !s.sites.empty() ? smallest : 0;
        });
    out.figures = figures.size();
    std::vector<OutlierRank> by_rank(ranks.size());
    for (const Figure& f : figures) {
        const report::FigureStats stats = report::figure_stats(f.values, rule);
        for (size_t i = 0; i < ranks.size(); ++i) {
            if (!report::is_outlier(f.values[i], stats, f.high_only)) continue;
            Divergence d;
            d.what = f.what;
            d.name = f.what == Divergence::Site   ? site_label_in(ranks[i], f.name)
                     : f.what == Divergence::Peak ? ranks[i].bytes_of
                                                  : f.name;
            d.bytes = f.values[i];
            d.stats = stats;
            by_rank[i].divergences.push_back(std::move(d));
        }
    }
    for (size_t i = 0; i < ranks.size(); ++i) {
        if (by_rank[i].divergences.empty()) continue;
        by_rank[i].index = i;
        std::stable_sort(by_rank[i].divergences.begin(), by_rank[i].divergences.end(),
                         [](const Divergence& a, const Divergence& b) {
                             return report::deviation(a.bytes, a.stats) > report::deviation(b.bytes, b.stats);
                         });
        out.ranks.push_back(std::move(by_rank[i]));
    }
    return out;
}

}  // namespace memguard::cli
