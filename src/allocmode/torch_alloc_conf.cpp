#include "allocmode/torch_alloc_conf.h"

#include <cerrno>
#include <cstdlib>

#include "common/config.h"

namespace memguard::allocmode {
namespace {

std::string trim(const std::string& s) {
    size_t a = s.find_first_not_of(" \t");
    size_t b = s.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : s.substr(a, b - a + 1);
}

bool to_size(const std::string& v, unsigned long long* out) {
    if (v.empty()) return false;
    errno = 0;
    char* end = nullptr;
    unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (errno != 0 || *end != '\0' || v[0] == '-') return false;
    *out = n;
    return true;
}

}  // namespace

TorchAllocConf parse_torch_alloc_conf(const char* value) {
    TorchAllocConf c;
    if (!value) return c;
    // Items are separated by commas outside brackets (roundup_power2_divisions:[256:8,>:4]).
    std::vector<std::string> items(1);
    int depth = 0;
    for (const char* p = value; *p; ++p) {
        if (*p == '[') ++depth;
        if (*p == ']' && depth > 0) --depth;
        if (*p == ',' && depth == 0) {
            items.emplace_back();
        } else {
            items.back().push_back(*p);
        }
    }
    for (const std::string& raw : items) {
        std::string item = trim(raw);
        if (item.empty()) continue;
        size_t colon = item.find(':');
        std::string key = trim(item.substr(0, colon));
        std::string val = colon == std::string::npos ? std::string() : trim(item.substr(colon + 1));
        unsigned long long n = 0;
        // The notes become log lines: the item is shown escaped (config.h), on one line.
        const std::string where = "PYTORCH_CUDA_ALLOC_CONF " + echo_value(key + ":" + val);
        if (key == "max_split_size_mb") {
            // PyTorch refuses 20 MB or less (its large-segment size).
            if (to_size(val, &n) && n > 20 && n < (1ull << 40)) {
                c.max_split_size = static_cast<size_t>(n) << 20;
            } else {
                c.notes.push_back(where + ": expected a number of MB above 20; memguard's allocator splits every size");
            }
        } else if (key == "max_non_split_rounding_mb") {
            if (to_size(val, &n) && n < (1ull << 40)) {
                c.max_non_split_rounding = static_cast<size_t>(n) << 20;
                c.max_non_split_rounding_given = true;
            } else {
                c.notes.push_back(where + ": expected a number of MB; keeping 20");
            }
        } else if (key == "roundup_power2_divisions") {
            if (to_size(val, &n) && n > 0 && n <= 1024 && (n & (n - 1)) == 0) {
                c.roundup_power2_divisions = static_cast<unsigned>(n);
            } else {
                c.notes.push_back(where + ": memguard's allocator takes one power of two here (no per-size list); "
                                          "requests are rounded to 512 bytes");
            }
        } else if (key == "expandable_segments") {
            // PyTorch takes exactly True or False (and refuses anything else).
            if (val == "True" || val == "False") {
                c.expandable_segments = val == "True";
            } else {
                c.notes.push_back(where + ": expected True or False, as PyTorch; memguard's allocator keeps "
                                          "expandable segments off");
            }
        } else if (key == "garbage_collection_threshold") {
            // PyTorch takes a fraction strictly between 0 and 1 (and refuses anything else).
            char* end = nullptr;
            errno = 0;
            const double t = val.empty() ? 0.0 : std::strtod(val.c_str(), &end);
            if (!val.empty() && errno == 0 && *end == '\0' && t > 0.0 && t < 1.0) {
                c.garbage_collection_threshold = t;
            } else {
                c.notes.push_back(where + ": expected a number between 0.0 and 1.0 (exclusive), as PyTorch; "
                                          "memguard's allocator collects no cached blocks");
            }
        } else if (key == "backend") {
            if (val != "native") {
                c.notes.push_back(where +
                                  ": ignored, memguard's allocator replaces PyTorch's (set "
                                  "MEMGUARD_ALLOCATOR=native to use " +
                                  val + ")");
            }
        } else {
            c.notes.push_back(where + ": not used by memguard's allocator");
        }
    }
    return c;
}

alloc::AllocatorConfig core_settings(const TorchAllocConf& conf, const alloc::AllocatorConfig& current) {
    alloc::AllocatorConfig c = current;
    c.max_split_size = conf.max_split_size;
    c.roundup_power2_divisions = conf.roundup_power2_divisions;
    c.garbage_collection_threshold = conf.garbage_collection_threshold;
    if (conf.max_non_split_rounding_given) c.max_non_split_rounding_size = conf.max_non_split_rounding;
    // PyTorch keeps expandable_segments unless the text names it, like the non-split rounding.
    if (conf.expandable_segments) c.expandable_segments = *conf.expandable_segments;
    return c;
}

}  // namespace memguard::allocmode
