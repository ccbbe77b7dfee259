// A small reader of 64-bit little-endian ELF files for the tests: the dynamic section (NEEDED,
// SONAME, RUNPATH), the dynamic symbol table with symbol versions, and function symbols for
// symbolizing addresses. Written for the tests so that they do not trust the code under test.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace preload_test {

struct ElfSymbol {
    std::string name;
    uint64_t value = 0;
    uint64_t size = 0;
    unsigned type = 0;     // STT_*
    unsigned binding = 0;  // STB_*
    uint16_t section = 0;  // st_shndx; SHN_UNDEF for undefined symbols
    std::string version;   // version name from .gnu.version, empty when none (local/global)
    bool is_defined() const { return section != 0; }
};

class ElfFile {
public:
    /// Reads `path`; throws std::runtime_error when it is not a readable 64-bit ELF file.
    static ElfFile load(const std::string& path);

    const std::string& path() const { return path_; }
    const std::vector<std::string>& needed() const { return needed_; }
    const std::string& soname() const { return soname_; }
    const std::string& runpath() const { return runpath_; }
    const std::string& rpath() const { return rpath_; }
    const std::vector<ElfSymbol>& dynamic_symbols() const { return dynamic_symbols_; }
    /// Names of the version definitions (.gnu.version_d), the base one included.
    const std::vector<std::string>& version_definitions() const { return version_definitions_; }

    /// The function (from .symtab, else .dynsym) whose [value, value + size) holds the
    /// file-relative address `address`.
    std::optional<ElfSymbol> function_at(uint64_t address) const;
    /// The function symbol named `name` (from .symtab, else .dynsym).
    std::optional<ElfSymbol> function_named(const std::string& name) const;

private:
    std::string path_;
    std::vector<std::string> needed_;
    std::string soname_, runpath_, rpath_;
    std::vector<ElfSymbol> dynamic_symbols_;
    std::vector<ElfSymbol> functions_;  // sorted by value
    std::vector<std::string> version_definitions_;
};

}  // namespace preload_test
