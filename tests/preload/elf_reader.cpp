#include "elf_reader.h"

#include <elf.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <stdexcept>

namespace preload_test {
namespace {

class Bytes {
public:
    Bytes(std::string path, std::vector<char> data) : path_(std::move(path)), data_(std::move(data)) {}

    template <typename T>
    T read(uint64_t offset) const {
        if (offset > data_.size() || data_.size() - offset < sizeof(T)) fail("truncated");
        T value;
        std::memcpy(&value, data_.data() + offset, sizeof(T));
        return value;
    }

    std::string string_at(uint64_t table_offset, uint64_t table_size, uint64_t index) const {
        if (index >= table_size || table_offset + table_size > data_.size()) fail("bad string index");
        const char* begin = data_.data() + table_offset + index;
        size_t max = static_cast<size_t>(table_size - index);
        return std::string(begin, strnlen(begin, max));
    }

    [[noreturn]] void fail(const std::string& what) const {
        throw std::runtime_error(path_ + ": not a valid ELF file (" + what + ")");
    }

    size_t size() const { return data_.size(); }

private:
    std::string path_;
    std::vector<char> data_;
};

std::vector<ElfSymbol> read_symbols(const Bytes& bytes, const std::vector<Elf64_Shdr>& sections,
                                    const Elf64_Shdr& table) {
    std::vector<ElfSymbol> symbols;
    if (table.sh_entsize != sizeof(Elf64_Sym) || table.sh_link >= sections.size()) return symbols;
    const Elf64_Shdr& strings = sections[table.sh_link];
    uint64_t count = table.sh_size / sizeof(Elf64_Sym);
    for (uint64_t i = 0; i < count; ++i) {
        auto sym = bytes.read<Elf64_Sym>(table.sh_offset + i * sizeof(Elf64_Sym));
        ElfSymbol symbol;
        symbol.name = bytes.string_at(strings.sh_offset, strings.sh_size, sym.st_name);
        symbol.value = sym.st_value;
        symbol.size = sym.st_size;
        symbol.type = ELF64_ST_TYPE(sym.st_info);
        symbol.binding = ELF64_ST_BIND(sym.st_info);
        symbol.section = sym.st_shndx;
        symbols.push_back(std::move(symbol));
    }
    return symbols;
}

bool is_function(const ElfSymbol& symbol) {
    return (symbol.type == STT_FUNC || symbol.type == STT_GNU_IFUNC) && symbol.is_defined() && symbol.size > 0;
}

}  // namespace

ElfFile ElfFile::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path + ": cannot open");
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Bytes bytes(path, std::move(data));

    auto header = bytes.read<Elf64_Ehdr>(0);
    if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0) bytes.fail("no ELF magic");
    if (header.e_ident[EI_CLASS] != ELFCLASS64) bytes.fail("not 64-bit");
    if (header.e_ident[EI_DATA] != ELFDATA2LSB) bytes.fail("not little-endian");
    if (header.e_shentsize != sizeof(Elf64_Shdr)) bytes.fail("unexpected section header size");

    std::vector<Elf64_Shdr> sections;
    for (uint16_t i = 0; i < header.e_shnum; ++i) {
        sections.push_back(bytes.read<Elf64_Shdr>(header.e_shoff + uint64_t{i} * sizeof(Elf64_Shdr)));
    }

    ElfFile file;
    file.path_ = path;
    std::vector<ElfSymbol> symtab;
    std::vector<uint16_t> versym;
    std::map<uint16_t, std::string> version_names;  // index -> name, from verdef and verneed

    for (const Elf64_Shdr& section : sections) {
        switch (section.sh_type) {
        case SHT_DYNAMIC: {
            if (section.sh_link >= sections.size()) bytes.fail("bad .dynamic link");
            const Elf64_Shdr& strings = sections[section.sh_link];
            for (uint64_t offset = 0; offset + sizeof(Elf64_Dyn) <= section.sh_size; offset += sizeof(Elf64_Dyn)) {
                auto entry = bytes.read<Elf64_Dyn>(section.sh_offset + offset);
                if (entry.d_tag == DT_NULL) break;
                auto text = [&] { return bytes.string_at(strings.sh_offset, strings.sh_size, entry.d_un.d_val); };
                if (entry.d_tag == DT_NEEDED) file.needed_.push_back(text());
                if (entry.d_tag == DT_SONAME) file.soname_ = text();
                if (entry.d_tag == DT_RUNPATH) file.runpath_ = text();
                if (entry.d_tag == DT_RPATH) file.rpath_ = text();
            }
            break;
        }
        case SHT_DYNSYM: file.dynamic_symbols_ = read_symbols(bytes, sections, section); break;
        case SHT_SYMTAB: symtab = read_symbols(bytes, sections, section); break;
        case SHT_GNU_versym:
            for (uint64_t offset = 0; offset + 2 <= section.sh_size; offset += 2) {
                versym.push_back(bytes.read<uint16_t>(section.sh_offset + offset));
            }
            break;
        case SHT_GNU_verdef: {
            const Elf64_Shdr& strings = sections.at(section.sh_link);
            uint64_t offset = section.sh_offset;
            for (uint64_t i = 0; i < section.sh_info; ++i) {
                auto def = bytes.read<Elf64_Verdef>(offset);
                auto aux = bytes.read<Elf64_Verdaux>(offset + def.vd_aux);
                std::string name = bytes.string_at(strings.sh_offset, strings.sh_size, aux.vda_name);
                version_names[def.vd_ndx] = name;
                file.version_definitions_.push_back(name);
                if (def.vd_next == 0) break;
                offset += def.vd_next;
            }
            break;
        }
        case SHT_GNU_verneed: {
            const Elf64_Shdr& strings = sections.at(section.sh_link);
            uint64_t offset = section.sh_offset;
            for (uint64_t i = 0; i < section.sh_info; ++i) {
                auto need = bytes.read<Elf64_Verneed>(offset);
                uint64_t aux_offset = offset + need.vn_aux;
                for (uint16_t j = 0; j < need.vn_cnt; ++j) {
                    auto aux = bytes.read<Elf64_Vernaux>(aux_offset);
                    version_names[aux.vna_other] = bytes.string_at(strings.sh_offset, strings.sh_size, aux.vna_name);
                    if (aux.vna_next == 0) break;
                    aux_offset += aux.vna_next;
                }
                if (need.vn_next == 0) break;
                offset += need.vn_next;
            }
            break;
        }
        default: break;
        }
    }

    for (size_t i = 0; i < file.dynamic_symbols_.size() && i < versym.size(); ++i) {
        uint16_t index = versym[i] & 0x7fff;
        if (index > 1 && version_names.count(index) != 0) {
            file.dynamic_symbols_[i].version = version_names[index];
        }
    }

    const std::vector<ElfSymbol>& source = symtab.empty() ? file.dynamic_symbols_ : symtab;
    std::copy_if(source.begin(), source.end(), std::back_inserter(file.functions_), is_function);
    std::sort(file.functions_.begin(), file.functions_.end(),
              [](const ElfSymbol& a, const ElfSymbol& b) { return a.value < b.value; });
    return file;
}

std::optional<ElfSymbol> ElfFile::function_at(uint64_t address) const {
    // Functions do not nest; the candidate is the last one starting at or before `address`
    // (aliases share a start, so look at all of them).
    auto end = std::upper_bound(functions_.begin(), functions_.end(), address,
                                [](uint64_t a, const ElfSymbol& s) { return a < s.value; });
    for (auto it = end; it != functions_.begin();) {
        --it;
        if (address < it->value + it->size) return *it;
        if (end - it > 16) break;
    }
    return std::nullopt;
}

std::optional<ElfSymbol> ElfFile::function_named(const std::string& name) const {
    for (const ElfSymbol& symbol : functions_) {
        if (symbol.name == name) return symbol;
    }
    return std::nullopt;
}

}  // namespace preload_test
