#include "report/units.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace memguard::report {

std::string human_bytes(uint64_t bytes) {
    static const char* const units[] = {"KiB", "MiB", "GiB"};
    if (bytes < 1024) return std::to_string(bytes) + " B";
    double v = static_cast<double>(bytes);
    size_t unit = 0;
    v /= 1024.0;
    while (unit < 2 && v >= 1024.0) {
        v /= 1024.0;
        ++unit;
    }
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[unit]);
    return buf;
}

std::string human_bytes_signed(int64_t bytes) {
    if (bytes >= 0) return human_bytes(static_cast<uint64_t>(bytes));
    return "-" + human_bytes(uint64_t{0} - static_cast<uint64_t>(bytes));
}

std::string milliseconds_fixed3(int64_t ns) {
    bool neg = ns < 0;
    uint64_t mag = neg ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    uint64_t us = mag / 1000 + (mag % 1000 >= 500 ? 1 : 0);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%llu.%03llu", neg && us != 0 ? "-" : "",
                  static_cast<unsigned long long>(us / 1000), static_cast<unsigned long long>(us % 1000));
    return buf;
}

std::string seconds_fixed3(int64_t ns) {
    bool neg = ns < 0;
    uint64_t mag = neg ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    uint64_t ms = mag / 1000000 + (mag % 1000000 >= 500000 ? 1 : 0);
    char buf[48];
    std::snprintf(buf, sizeof buf, "%s%llu.%03llu", neg && ms != 0 ? "-" : "",
                  static_cast<unsigned long long>(ms / 1000), static_cast<unsigned long long>(ms % 1000));
    return buf;
}

std::string seconds_exact(int64_t ns) {
    bool neg = ns < 0;
    uint64_t mag = neg ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
    std::string out = (neg ? "-" : "") + std::to_string(mag / 1000000000);
    uint64_t frac = mag % 1000000000;
    if (frac == 0) return out;
    char digits[16];
    std::snprintf(digits, sizeof digits, "%09llu", static_cast<unsigned long long>(frac));
    std::string f = digits;
    while (!f.empty() && f.back() == '0') f.pop_back();
    return out + "." + f;
}

std::string percent(uint64_t part, uint64_t total) {
    double p = total == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(total);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f%%", p);
    return buf;
}

bool parse_seconds(const std::string& s, int64_t& ns) {
    if (s.empty() || s[0] == '-' || s[0] == '+' || s.find_first_not_of("0123456789.eE+-") != std::string::npos) {
        return false;
    }
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size() || !std::isfinite(v) || v < 0 || v > 9.2e9) return false;
    ns = std::llround(v * 1e9);
    return true;
}

}  // namespace memguard::report
