// memguard env [OPTIONS] [--json]: the environment `memguard run` would give a command, for
// launchers that start their workers with an environment of their own (they drop LD_PRELOAD):
// `export NAME=VALUE` lines for a POSIX shell (eval "$(memguard env)"), or one JSON object of
// strings with --json.
#include <iostream>

#include "cli.h"
#include "launch.h"
#include "report/json.h"

namespace memguard::cli {

int run_env(const Args& args) {
    const std::string library = find_library(args);
    const EnvSettings settings = launch_settings(args, library, true);
    if (args.json) {
        report::JsonWriter j;
        j.begin_object();
        for (const auto& [name, value] : settings) j.key(name).value(value);
        j.end_object();
        std::cout << j.str();
        return kExitOk;
    }
    for (const auto& [name, value] : settings) std::cout << "export " << name << "=" << shell_quote(value) << "\n";
    return kExitOk;
}

}  // namespace memguard::cli
