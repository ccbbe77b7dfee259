#include "common/path_template.h"

#include <cctype>

namespace memguard {

std::string expand_template(const std::string& tmpl, const NameContext& ctx) {
    std::string out;
    for (size_t i = 0; i < tmpl.size(); ++i) {
        char c = tmpl[i];
        if (c != '%' || i + 1 >= tmpl.size()) {
            out.push_back(c);
            continue;
        }
        char n = tmpl[i + 1];
        switch (n) {
        case 'p': out += std::to_string(ctx.pid); break;
        case 'h': out += ctx.host; break;
        case 'r': out += ctx.rank; break;
        case '%': out.push_back('%'); break;
        default:
            out.push_back('%');
            out.push_back(n);
            break;
        }
        ++i;
    }
    return out;
}

std::string default_report_name(const NameContext& ctx) {
    std::string exe = ctx.exe_name.empty() ? "process" : ctx.exe_name;
    for (char& c : exe) {
        if (c == '/' || std::isspace(static_cast<unsigned char>(c))) c = '_';
    }
    const std::string rank = ctx.ranked ? "rank" + ctx.rank + "." : "";
    return "memguard." + exe + "." + rank + std::to_string(ctx.pid) + ".mgr";
}

static bool all_digits(const char* s) {
    if (!s || !*s) return false;
    for (; *s; ++s) {
        if (!std::isdigit(static_cast<unsigned char>(*s))) return false;
    }
    return true;
}

std::string rank_from_env(const char* rank, const char* local_rank) {
    if (all_digits(rank)) return rank;
    if (all_digits(local_rank)) return local_rank;
    return "0";
}

bool rank_in_env(const char* rank, const char* local_rank) { return all_digits(rank) || all_digits(local_rank); }

}  // namespace memguard
