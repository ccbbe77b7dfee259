// What the commands write: their text on stdout (print), and the output file of plot and export.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

namespace memguard::cli {

/// printf for the text of the commands: each %s argument is shown as text::printable makes it
/// (control characters and invalid UTF-8 escaped), because most of them carry what the traced
/// program chose (phase and mark names, symbols, file and module paths) or what a report's author
/// wrote. So only the format string, which is ours, starts lines. print() writes to stdout.
void print(const char* format, ...) __attribute__((format(printf, 1, 2)));
void print_to(std::FILE* to, const char* format, ...) __attribute__((format(printf, 2, 3)));

/// Writes `content` to `path`:
/// - "-": to standard output;
/// - the file standard output or standard error is open on (as /dev/stdout names it): to that
///   descriptor;
/// - an existing character device or FIFO of this user or root (/dev/null, a named pipe): written
///   in place, never replaced;
/// - otherwise a regular file (replacing one, or a symbolic link to one, at `path`), through a
///   temporary file with a random name created exclusively next to it (never through a symbolic
///   link, mode 0640 less the umask) and renamed into place, so a failed write never leaves half
///   a file.
/// Refused: a directory, socket or block device, another user's device or FIFO, and a symbolic
/// link to anything else (nothing, a device, a FIFO). Throws report::ReportError naming the file.
/// Returns whether the content went to this process's standard output (then a status line of the
/// command belongs on stderr).
[[nodiscard]] bool write_output_file(const std::string& path, const std::string& content);

/// Output made piece by piece: a Producer calls its ChunkWriter with each piece, in order.
using ChunkWriter = std::function<void(std::string_view)>;
using Producer = std::function<void(const ChunkWriter&)>;
/// write_output_file for output too large to hold in memory: `produce` writes it in pieces, each
/// written out as it comes; *bytes: how many. Should `produce` throw, a regular file at `path` is
/// left as it was (the temporary file removed); a stream, device or FIFO keeps what it got.
[[nodiscard]] bool write_output_stream(const std::string& path, const Producer& produce, uint64_t* bytes);

/// How a command's status line names the output: "standard output" for "-", else the path.
std::string output_name(const std::string& path);

}  // namespace memguard::cli
