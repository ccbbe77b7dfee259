// What memguard run and memguard env share: the library to preload, the environment a command
// gets under it, and its text for a shell.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "cli.h"

namespace memguard::cli {

using EnvSettings = std::vector<std::pair<std::string, std::string>>;

/// This program's path (/proc/self/exe). Throws CommandError when it is not known.
std::string self_program();

/// The library to preload, as an absolute path: --library, else libmemguard.so in ../lib next to
/// this program's directory (build/bin and build/lib; the wheel's _native/bin and _native/lib).
/// Throws CommandError when it is not a readable regular file.
std::string find_library(const Args& args);

/// The variables the command gets on top of this process's environment, in order: LD_PRELOAD with
/// the library first (the existing value kept after it; unchanged when it already preloads the
/// library), MEMGUARD_RUN_ID (kept when set, else a fresh id), and the MEMGUARD_* variables of the
/// options. With `inherited`, also this environment's other MEMGUARD_* variables (but
/// MEMGUARD_RUN_MANIFEST, which belongs to one run): the whole set a launcher that scrubs the
/// environment must pass on. Throws CommandError for a MEMGUARD_RUN_ID the library would refuse.
EnvSettings launch_settings(const Args& args, const std::string& library, bool inherited);

/// A fresh run id: the local time and 32 random bits, "20250101-120000-1a2b3c4d".
std::string new_run_id();

/// `s` as one word for a POSIX shell: as it is when it holds only safe characters, else in single
/// quotes.
std::string shell_quote(const std::string& s);

}  // namespace memguard::cli
