// Report file names: expansion of MEMGUARD_OUTPUT templates and the default name.
#pragma once

#include <string>

namespace memguard {

struct NameContext {
    long pid = 0;
    std::string host;
    std::string rank = "0";  // RANK, else LOCAL_RANK, else "0"
    std::string exe_name;    // base name of the executable
    bool ranked = false;     // RANK or LOCAL_RANK holds a rank: the default name carries it
};

/// Expands %p, %h, %r and %%. Unknown escapes are kept literally (the config parser reports them).
std::string expand_template(const std::string& tmpl, const NameContext& ctx);

/// memguard.<exe>.<pid>.mgr; memguard.<exe>.rank<rank>.<pid>.mgr in a process of a distributed
/// job (ctx.ranked), so that its ranks' reports sort and read by rank.
std::string default_report_name(const NameContext& ctx);

/// Rank of this process from RANK, else LOCAL_RANK, else "0" (only digits are accepted).
std::string rank_from_env(const char* rank, const char* local_rank);

/// Whether RANK or LOCAL_RANK holds a rank (digits only), as torchrun and most launchers set them.
bool rank_in_env(const char* rank, const char* local_rank);

}  // namespace memguard
