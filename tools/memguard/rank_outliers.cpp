#include "rank_outliers.h"

#include <algorithm>
#include <unordered_map>

#include "report/saturate.h"
#include "report/units.h"

namespace memguard::cli {

namespace {

/// One figure over the ranks: the ranks that list it and their bytes (the peak: every rank); a rank
/// that does not list it has `absent[rank]` of it (its kind's value for a part left out). Sparse,
/// so that a fleet whose ranks each have sites of their own costs memory for the sites listed, not
/// for sites x ranks; the values are made dense one figure at a time.
struct Figure {
    Divergence::What what = Divergence::Peak;
    std::string name;
    std::vector<std::pair<size_t, uint64_t>> listed;  // (rank, bytes), by rank
    bool high_only = false;
};

/// Adds the figures of named parts (categories or sites): `parts(s)` gives a rank's (key, bytes)
/// pairs. Two parts of one rank with one key are added up (sites whose stacks differ only in
/// frames left out).
template <class Parts>
void add_parts(std::vector<Figure>& out, const std::vector<RankSummary>& ranks, Divergence::What what, bool high_only,
               Parts parts) {
    std::unordered_map<std::string, size_t> index;  // key -> position in out
    for (size_t i = 0; i < ranks.size(); ++i) {
        for (const auto& [key, bytes] : parts(ranks[i])) {
            auto [it, fresh] = index.emplace(key, out.size());
            if (fresh) {
                Figure f;
                f.what = what;
                f.name = key;
                f.high_only = high_only;
                out.push_back(std::move(f));
            }
            std::vector<std::pair<size_t, uint64_t>>& listed = out[it->second].listed;
            if (!listed.empty() && listed.back().first == i) {
                listed.back().second = report::saturating_add(listed.back().second, bytes);
            } else {
                listed.emplace_back(i, bytes);
            }
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
    const std::string figures = report::human_bytes(d.bytes) +
                                (d.pair ? " against " + report::human_bytes(d.stats.median) + " on the other rank"
                                        : " against a median of " + report::human_bytes(d.stats.median));
    switch (d.what) {
    case Divergence::Peak: return "peak " + figures + (d.name == "tensors" ? " (tensor bytes)" : "");
    case Divergence::Category: return d.name + " " + figures;
    case Divergence::Site: return "site " + d.name + " " + figures;
    }
    return figures;
}

OutlierFinding find_outlier_ranks(const std::vector<RankSummary>& ranks, const report::OutlierRule& rule) {
    OutlierFinding out;
    if (ranks.size() < 2) return out;
    out.compared = true;
    out.pair = ranks.size() < kMinRanksForOutliers;
    std::vector<Figure> figures;
    Figure peak;
    peak.what = Divergence::Peak;
    for (size_t i = 0; i < ranks.size(); ++i) peak.listed.emplace_back(i, ranks[i].peak().peak_bytes);
    figures.push_back(std::move(peak));
    const size_t first_category = figures.size();
    add_parts(figures, ranks, Divergence::Category, false, [](const RankSummary& s) {
        std::vector<std::pair<std::string, uint64_t>> v;
        for (const SummaryCategory& c : s.categories) v.emplace_back(c.name, c.bytes);
        return v;
    });
    const size_t first_site = figures.size();
    add_parts(figures, ranks, Divergence::Site, true, [](const RankSummary& s) {
        std::vector<std::pair<std::string, uint64_t>> v;
        for (const SummarySite& site : s.sites) v.emplace_back(site.key(), site.bytes);
        return v;
    });
    // What a rank has of a part it does not list: 0, or, when its list was cut, at most the
    // smallest part it lists (that bound is taken).
    std::vector<uint64_t> absent_category(ranks.size(), 0), absent_site(ranks.size(), 0);
    for (size_t i = 0; i < ranks.size(); ++i) {
        const RankSummary& s = ranks[i];
        if (s.categories.size() >= kSummaryCategories) absent_category[i] = s.categories.back().bytes;
        if (s.site_count > s.sites.size() && !s.sites.empty()) {
            absent_site[i] = UINT64_MAX;
            for (const SummarySite& site : s.sites) absent_site[i] = std::min(absent_site[i], site.bytes);
        }
    }
    out.figures = figures.size();
    std::vector<OutlierRank> by_rank(ranks.size());
    std::vector<uint64_t> values(ranks.size());
    for (size_t k = 0; k < figures.size(); ++k) {
        const Figure& f = figures[k];
        const std::vector<uint64_t>& absent = k >= first_site ? absent_site : absent_category;
        if (k < first_category) {
            values.assign(ranks.size(), 0);
        } else {
            values = absent;
        }
        for (const auto& [i, bytes] : f.listed) values[i] = bytes;
        if (out.pair) {
            // Two ranks: the heavier, where it exceeds the other by more than the floor (the
            // rule's bytes and its share of the smaller value).
            const size_t hi = values[1] > values[0] ? 1 : 0;
            const uint64_t other = values[1 - hi];
            const auto floor = std::max<uint64_t>(rule.min_bytes,
                                                  static_cast<uint64_t>(rule.min_share * static_cast<double>(other)));
            if (values[hi] - other <= floor) continue;
            Divergence d;
            d.what = f.what;
            d.name = f.what == Divergence::Site   ? site_label_in(ranks[hi], f.name)
                     : f.what == Divergence::Peak ? ranks[hi].bytes_of
                                                  : f.name;
            d.bytes = values[hi];
            d.stats = report::FigureStats{other, 0, floor};
            d.pair = true;
            by_rank[hi].divergences.push_back(std::move(d));
            continue;
        }
        const report::FigureStats stats = report::figure_stats(values, rule);
        for (size_t i = 0; i < ranks.size(); ++i) {
            if (!report::is_outlier(values[i], stats, f.high_only)) continue;
            Divergence d;
            d.what = f.what;
            d.name = f.what == Divergence::Site   ? site_label_in(ranks[i], f.name)
                     : f.what == Divergence::Peak ? ranks[i].bytes_of
                                                  : f.name;
            d.bytes = values[i];
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
