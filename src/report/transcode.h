// A report's records in the other encoding (docs/report-format.md): text lines to binary frames
// and back, record by record through the record table, without reading what they mean. What
// `memguard export --text` and `--binary` write; the golden tests read every report both ways.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memguard::report {

enum class Encoding { Text, Binary };

/// Reads the report at `path` (either encoding) and appends it to `out` in `to`: the header line
/// of that encoding, then every record of the table the file has, in order, with the same
/// values. Records this memguard does not know (a later minor's) are left out. A file cut inside
/// a record ends at the last complete one, with a warning in *warnings. Throws ReportError as
/// load_report does for what it cannot read.
void transcode(const std::string& path, Encoding to, std::string& out, std::vector<std::string>* warnings);
/// As above, the output handed to `write` in pieces of about kTranscodeChunk bytes (whole
/// records), as it is made: memory stays bounded whatever the report's size. A ReportError thrown
/// midway leaves what was written before it.
constexpr size_t kTranscodeChunk = size_t{1} << 20;
void transcode(const std::string& path, Encoding to, const std::function<void(std::string_view)>& write,
               std::vector<std::string>* warnings);

/// The header's I records (key -> value) of a report that starts with `bytes` (either encoding),
/// up to the first other record or the end of `bytes`; nullopt when `bytes` does not start like a
/// report. For a look at many files' headers (merge without files).
std::optional<std::map<std::string, std::string>> header_info(std::string_view bytes);

}  // namespace memguard::report
