// A minimal reader of ELF64 files for offline symbolization: the GNU build-id, whether DWARF line
// information is present, and function names from .symtab / .dynsym. Every read is bounds-checked,
// so a corrupt or hostile file yields "not found" answers, never a crash.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace memguard::report {

class ElfFile {
public:
    /// Maps `path`. Returns nullptr and sets `error` (e.g. "No such file or directory", "not an ELF64
    /// file") when it cannot be used.
    static std::unique_ptr<ElfFile> open(const std::string& path, std::string& error);
    ~ElfFile();
    ElfFile(const ElfFile&) = delete;
    ElfFile& operator=(const ElfFile&) = delete;

    /// The GNU build-id in lowercase hex; empty when the file has none.
    const std::string& build_id() const { return build_id_; }
    /// True when the file has a .debug_line (or .zdebug_line) section.
    bool has_debug_line() const { return has_debug_line_; }
    bool has_symtab() const { return !symtab_.empty(); }

    /// The raw (mangled) name of the function containing the file address `addr`: from .symtab,
    /// else from .dynsym.
    std::optional<std::string> function_at(uint64_t addr) const;

private:
    struct Symbol {
        uint64_t addr;
        uint64_t size;
        std::string_view name;  // points into the mapping
    };
    struct Section {
        uint32_t type;
        uint64_t offset, size, entsize, addralign;
        uint32_t link;
        uint32_t name_index;    // into the section name table
        std::string_view name;  // points into the mapping
    };

    ElfFile(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    bool parse(std::string& error);
    bool read_sections(std::string& error);
    void read_build_id();
    bool read_notes(uint64_t offset, uint64_t size, uint64_t align);
    std::vector<Symbol> read_symbols(const Section& table) const;
    bool in_bounds(uint64_t offset, uint64_t len) const { return offset <= size_ && len <= size_ - offset; }
    std::string_view string_at(const Section& strtab, uint64_t index) const;
    static std::optional<std::string_view> lookup(const std::vector<Symbol>& table, uint64_t addr);

    const uint8_t* data_;
    size_t size_;
    std::vector<Section> sections_;
    std::string build_id_;
    bool has_debug_line_ = false;
    std::vector<Symbol> symtab_;
    std::vector<Symbol> dynsym_;
};

}  // namespace memguard::report
