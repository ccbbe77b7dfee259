// INTERIM (drop at merge): a deliberately simple breakdown_at so that `steps` and `oom` build and
// run before the reader work's categories.cpp is merged. The tags of the last moment at or before
// the point (else the first after), summed by category; the rest of the live GPU bytes is `other`,
// with the largest live sites. Not the rules of docs/categories.md.
#include <algorithm>
#include <map>

#include "report/categories.h"
#include "report/saturate.h"
#include "report/steps.h"

namespace memguard::report {

Breakdown breakdown_at(const Report& r, size_t events_applied, const BreakdownOptions& options) {
    Breakdown b;
    b.device = options.device;
    LiveSet live = live_after(r, events_applied);
    b.events_applied = live.events_applied;
    b.t = live.t;
    SiteTable all = group_by_site(r, live, KindFilter::Gpu);
    SiteTable table;
    if (options.device < 0) {
        table = all;
    } else {
        LiveSet on_device = live;
        on_device.blocks.clear();
        on_device.handles.clear();
        for (size_t i : live.blocks) {
            if (r.blocks[i].device == options.device) on_device.blocks.push_back(i);
        }
        for (size_t i : live.handles) {
            if (r.handles[i].device == options.device) on_device.handles.push_back(i);
        }
        table = group_by_site(r, on_device, KindFilter::Gpu);
    }
    b.total = table.total_bytes;
    for (const Moment& m : r.moments) {
        if (m.events_before <= b.events_applied || b.moment == nullptr) b.moment = &m;
        if (m.events_before > b.events_applied) break;
    }
    std::map<Category, CategoryPart> parts;
    uint64_t tagged = 0;
    if (b.moment != nullptr) {
        for (const TensorTag& g : b.moment->tags) {
            if (options.device >= 0 && g.device != options.device) continue;
            CategoryPart& p = parts[g.category];
            p.category = g.category;
            add_to(p.bytes, g.size);
            ++p.blocks;
            add_to(tagged, g.size);
        }
    }
    if (tagged > b.total) b.total = tagged;
    if (b.total > tagged) {
        CategoryPart& p = parts[Category::Other];
        p.category = Category::Other;
        p.bytes = b.total - tagged;
        p.blocks = table.total_blocks;
        p.estimate = true;
        for (size_t i = 0; i < table.sites.size() && i < options.max_sites; ++i) p.sites.push_back(table.sites[i]);
    }
    for (auto& [c, p] : parts) b.parts.push_back(p);
    std::stable_sort(b.parts.begin(), b.parts.end(),
                     [](const CategoryPart& x, const CategoryPart& y) { return x.bytes > y.bytes; });
    return b;
}

}  // namespace memguard::report
