// Writing a command's output file (plot, export).
#pragma once

#include <string>

namespace memguard::cli {

/// Writes `content` to `path` (replacing it), through a temporary file in the same directory renamed
/// into place, so a failed write never leaves half a file. Throws report::ReportError naming the file.
void write_output_file(const std::string& path, const std::string& content);

}  // namespace memguard::cli
