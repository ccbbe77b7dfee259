// Runs a helper program (addr2line) with given input and captures its output. Internal to the reader.
#pragma once

#include <string>
#include <vector>

namespace memguard::report {

/// Finds an executable: `name` itself when it contains '/', else the first match on $PATH.
/// Returns an empty string when there is none.
std::string find_program(const std::string& name);

/// Runs argv[0] (a path) with `input` on its stdin, its stdout captured into `output` and its
/// stderr discarded. The child inherits `inherit_fd` (>= 3) at the same number, when given; every
/// other descriptor of the caller is close-on-exec. Returns true when it ran and exited with status 0.
bool run_program(const std::vector<std::string>& argv, const std::string& input, std::string& output,
                 int inherit_fd = -1);

}  // namespace memguard::report
