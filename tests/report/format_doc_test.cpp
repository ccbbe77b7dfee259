// docs/report-format.md against the record table (src/format/records.h): every record is listed
// under the section of the minor that introduced it, with its fields in order, each trailing field
// added later under its own minor, each hazard kind in the hazard table; and the docs list nothing
// the table does not have.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "format/table.h"

namespace memguard::format {
namespace {

/// One row of a record table of the docs: `letters` | `fields` | meaning.
struct DocRow {
    int minor = -1;
    bool hazard = false;  // a row of the hazard table (W's kinds)
    std::string what;     // the letter, or the hazard kind
    std::vector<std::string> fields;
    bool trailing = false;  // "... fields": fields added to an existing record
    size_t line = 0;
};

std::vector<std::string> words(const std::string& s) {
    std::istringstream in(s);
    std::vector<std::string> out;
    for (std::string w; in >> w;) out.push_back(w);
    return out;
}

std::string strip_ticks(std::string s) {
    std::string out;
    for (char c : s) {
        if (c != '`') out.push_back(c);
    }
    return out;
}

std::vector<std::string> split_cells(const std::string& line) {
    std::vector<std::string> cells;
    size_t start = 1;  // after the leading '|'
    while (true) {
        size_t bar = line.find(" | ", start);
        if (bar == std::string::npos) {
            std::string last = line.substr(start);
            if (!last.empty() && last.back() == '|') last.pop_back();
            cells.push_back(last);
            return cells;
        }
        cells.push_back(line.substr(start, bar - start));
        start = bar + 3;
    }
}

std::vector<DocRow> parse_doc(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    std::vector<DocRow> rows;
    int minor = -1;
    bool hazard_table = false;
    std::string line;
    for (size_t no = 1; std::getline(in, line); ++no) {
        if (line.rfind("## Records", 0) == 0) minor = 0;
        if (line.rfind("### Added in minor ", 0) == 0) minor = std::stoi(line.substr(19));
        if (line.rfind("## ", 0) == 0 && line.rfind("## Records", 0) != 0) minor = -1;  // past the records
        if (minor < 0 || line.rfind("| ", 0) != 0) continue;
        std::vector<std::string> cells = split_cells(line);
        if (cells.size() < 3) continue;
        if (cells[0].find("type") != std::string::npos || cells[0].find("kind") != std::string::npos) {
            hazard_table = cells[0].find("kind") != std::string::npos;  // a table's header row
            continue;
        }
        if (cells[0].find('`') == std::string::npos) continue;  // the |---| row
        std::vector<std::string> fields = words(strip_ticks(cells[1]));
        bool trailing = !fields.empty() && fields[0] == "...";
        if (trailing) fields.erase(fields.begin());
        // "`A`, `E`": one row per letter.
        for (std::string what : words(strip_ticks(cells[0]))) {
            if (!what.empty() && what.back() == ',') what.pop_back();
            rows.push_back(DocRow{minor, hazard_table, what, fields, trailing, no});
        }
    }
    return rows;
}

/// A field as the docs write it: a variadic tail is `name...`.
std::string doc_name(const FieldInfo& f) { return std::string(f.name) + (f.tail ? "..." : ""); }

TEST(FormatDoc, ListsEveryRecordOfTheTableWithItsFieldsUnderItsMinor) {
    const std::vector<DocRow> rows = parse_doc(MEMGUARD_REPORT_FORMAT_DOC);
    ASSERT_FALSE(rows.empty());
    std::vector<bool> matched(rows.size(), false);
    auto find = [&](int minor, bool hazard, const std::string& what, bool trailing) -> const DocRow* {
        for (size_t i = 0; i < rows.size(); ++i) {
            const DocRow& r = rows[i];
            if (r.minor == minor && r.hazard == hazard && r.what == what && r.trailing == trailing) {
                matched[i] = true;
                return &r;
            }
        }
        return nullptr;
    };

    for (const RecordInfo& rec : describe_table()) {
        const std::string letter(1, rec.letter);
        // The fields of the record's own minor, and those added later, by minor.
        std::vector<std::string> own;
        std::map<int, std::vector<std::string>> later;
        size_t key_at = rec.fields.size();
        for (size_t i = 0; i < rec.fields.size(); ++i) {
            const FieldInfo& f = rec.fields[i];
            if (f.key) key_at = i;
            if (f.minor > rec.minor) {
                later[f.minor].push_back(doc_name(f));
            } else {
                own.push_back(doc_name(f));
            }
        }
        if (!rec.key.empty()) {
            // W: the record's row lists the fields up to the key, then "..."; the hazard table the
            // fields after the key.
            std::vector<std::string> head(own.begin(), own.begin() + static_cast<long>(key_at + 1));
            head.push_back("...");
            const DocRow* row = find(rec.minor, false, letter, false);
            ASSERT_NE(row, nullptr) << letter << " is not listed under minor " << rec.minor;
            EXPECT_EQ(row->fields, head) << letter << " (docs line " << row->line << ")";
            const DocRow* kind = find(rec.minor, true, std::string(rec.key), false);
            ASSERT_NE(kind, nullptr) << "hazard " << rec.key << " is not listed under minor " << rec.minor;
            EXPECT_EQ(kind->fields, std::vector<std::string>(own.begin() + static_cast<long>(key_at + 1), own.end()))
                << "hazard " << rec.key << " (docs line " << kind->line << ")";
            continue;
        }
        const DocRow* row = find(rec.minor, false, letter, false);
        ASSERT_NE(row, nullptr) << letter << " is not listed under minor " << rec.minor;
        EXPECT_EQ(row->fields, own) << letter << " (docs line " << row->line << ")";
        for (const auto& [minor, fields] : later) {
            const DocRow* added = find(minor, false, letter, true);
            ASSERT_NE(added, nullptr) << letter << "'s fields of minor " << minor << " are not listed under it";
            EXPECT_EQ(added->fields, fields) << letter << " (docs line " << added->line << ")";
        }
    }
    for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_TRUE(matched[i]) << "docs line " << rows[i].line << " lists " << rows[i].what
                                << ", which the record table does not have there";
    }
}

/// The docs' text from "### Added in minor N:" to the next section ("" when there is none).
std::string minor_section(const std::string& text, int minor) {
    const std::string head = "### Added in minor " + std::to_string(minor) + ":";
    size_t at = text.find(head);
    if (at == std::string::npos) return "";
    size_t end = text.find("\n#", at + head.size());
    return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(FormatDoc, ListsEveryHeaderKeyUnderItsMinor) {
    std::ifstream in(MEMGUARD_REPORT_FORMAT_DOC);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // Minor 0's keys in the I row ("Keys in minor 0: `pid`, ..."); later ones as "`I key ...`"
    // in their minor's section.
    size_t row = text.find("| `I` | `key value` |");
    ASSERT_NE(row, std::string::npos);
    const std::string i_row = text.substr(row, text.find('\n', row) - row);
    for (const rec::InfoKey& k : rec::kInfoKeys) {
        const std::string key(k.key);
        if (k.minor == 0) {
            EXPECT_NE(i_row.find("`" + key + "`"), std::string::npos) << "I " << key << " is not in the I row";
        } else {
            EXPECT_NE(minor_section(text, k.minor).find("`I " + key), std::string::npos)
                << "I " << key << " is not listed under minor " << k.minor;
        }
    }
}

TEST(FormatDoc, TheMinorsItListsEndAtTheTables) {
    // "minor 0: the core records; ...; minor 6: lost records": the last minor the docs name is the
    // one the writer declares (I format_minor).
    std::ifstream in(MEMGUARD_REPORT_FORMAT_DOC);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const std::string last = "### Added in minor " + std::to_string(kFormatMinor) + ":";
    const std::string next = "### Added in minor " + std::to_string(kFormatMinor + 1) + ":";
    EXPECT_NE(text.find(last), std::string::npos);
    EXPECT_EQ(text.find(next), std::string::npos);
}

}  // namespace
}  // namespace memguard::format
