#include "report/elf_file.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#ifdef SYS_openat2
#include <linux/openat2.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace memguard::report {

namespace {

template <class T>
T read_struct(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

uint64_t align_up(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

std::string to_hex(const uint8_t* p, size_t n) {
    static constexpr char digits[] = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        out.push_back(digits[p[i] >> 4]);
        out.push_back(digits[p[i] & 0xf]);
    }
    return out;
}

/// `path` with "." and ".." resolved lexically, relative to a root it cannot leave ("/../x" is "x").
std::string inside_root(const std::string& path) {
    std::vector<std::string> parts;
    size_t start = 0;
    while (start <= path.size()) {
        size_t slash = path.find('/', start);
        if (slash == std::string::npos) slash = path.size();
        std::string part = path.substr(start, slash - start);
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
        start = slash + 1;
    }
    std::string out;
    for (const std::string& part : parts) out += (out.empty() ? "" : "/") + part;
    return out.empty() ? "." : out;
}

/// Opens `path` with `flags`: as given, or under the directory `root_fd` (>= 0) as if it were "/".
int open_path(int root_fd, const std::string& path, int flags) {
    if (root_fd < 0) return ::open(path.c_str(), flags);
#ifdef SYS_openat2
    open_how how{};
    how.flags = static_cast<uint64_t>(flags);
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, root_fd, path.c_str(), &how, sizeof how);
    // Kernels before 5.6 (ENOSYS) and seccomp filters that refuse the call: resolved lexically.
    if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return static_cast<int>(fd);
#endif
    return ::openat(root_fd, inside_root(path).c_str(), flags);
}

}  // namespace

// First with O_PATH, which opens nothing for reading (a FIFO cannot block, a device's open never
// runs); then, once fstat has seen a regular file, that same inode through /proc/self/fd. Without
// /proc the path is opened again (non-blocking) and must still be the file fstat saw.
int ElfFile::open_regular(const std::string& root, const std::string& path, std::string& error, int& err) {
    auto fail = [&](int fd, int e, const std::string& what) {
        if (fd >= 0) ::close(fd);
        err = e;
        error = what;
        return -1;
    };
    int root_fd = -1;
    if (!root.empty()) {
        root_fd = ::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0) return fail(-1, errno, root + ": " + std::strerror(errno));
    }
    int probe = open_path(root_fd, path, O_PATH | O_CLOEXEC);
    int probe_errno = errno;
    auto close_root = [root_fd] {
        if (root_fd >= 0) ::close(root_fd);
    };
    if (probe < 0) {
        close_root();
        return fail(-1, probe_errno, std::strerror(probe_errno));
    }
    struct stat seen {};
    if (fstat(probe, &seen) != 0 || !S_ISREG(seen.st_mode)) {
        close_root();
        return fail(probe, 0, "not a regular file");
    }
    if (static_cast<uint64_t>(seen.st_size) > kMaxSize) {
        close_root();
        return fail(probe, 0, "larger than 16 GiB");
    }
    const int flags = O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    int fd = ::open(("/proc/self/fd/" + std::to_string(probe)).c_str(), flags);
    if (fd < 0 && errno == ENOENT) fd = open_path(root_fd, path, flags);
    int open_errno = errno;
    close_root();
    ::close(probe);
    if (fd < 0) return fail(-1, open_errno, std::strerror(open_errno));
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_dev != seen.st_dev || st.st_ino != seen.st_ino) {
        return fail(fd, 0, "changed while it was opened");
    }
    return fd;
}

std::unique_ptr<ElfFile> ElfFile::open(const std::string& path, std::string& error) {
    int err = 0;
    int fd = open_regular("", path, error, err);
    return fd < 0 ? nullptr : map(fd, error);
}

std::unique_ptr<ElfFile> ElfFile::map(int fd, std::string& error) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Elf64_Ehdr)) ||
        static_cast<uint64_t>(st.st_size) > kMaxSize) {
        ::close(fd);
        error = "not an ELF64 file";
        return nullptr;
    }
    size_t size = static_cast<size_t>(st.st_size);
    void* data = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (data == MAP_FAILED) {
        error = std::strerror(errno);
        ::close(fd);
        return nullptr;
    }
    std::unique_ptr<ElfFile> elf(new ElfFile(static_cast<const uint8_t*>(data), size, fd));
    elf->file_id_ = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
    if (!elf->parse(error)) return nullptr;
    return elf;
}

ElfFile::~ElfFile() {
    munmap(const_cast<uint8_t*>(data_), size_);
    ::close(fd_);
}

bool ElfFile::parse(std::string& error) {
    auto eh = read_struct<Elf64_Ehdr>(data_);
    if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_ident[EI_DATA] != ELFDATA2LSB) {
        error = "not an ELF64 little-endian file";
        return false;
    }
    if (!read_sections(error)) return false;
    read_build_id();
    for (const Section& s : sections_) {
        if (s.name == ".debug_line" || s.name == ".zdebug_line") has_debug_line_ = true;
        if (s.type == SHT_SYMTAB) symtab_ = read_symbols(s);
        if (s.type == SHT_DYNSYM) dynsym_ = read_symbols(s);
    }
    return true;
}

bool ElfFile::read_sections(std::string& error) {
    auto eh = read_struct<Elf64_Ehdr>(data_);
    if (eh.e_shoff == 0) return true;  // no section headers: no symbols, maybe a build-id note
    if (eh.e_shentsize != sizeof(Elf64_Shdr) || !in_bounds(eh.e_shoff, sizeof(Elf64_Shdr))) {
        error = "corrupt ELF section header table";
        return false;
    }
    auto first = read_struct<Elf64_Shdr>(data_ + eh.e_shoff);
    uint64_t count = eh.e_shnum != 0 ? eh.e_shnum : first.sh_size;  // extended numbering
    uint64_t strndx = eh.e_shstrndx != SHN_XINDEX ? eh.e_shstrndx : first.sh_link;
    if (count > size_ / sizeof(Elf64_Shdr) || !in_bounds(eh.e_shoff, count * sizeof(Elf64_Shdr))) {
        error = "corrupt ELF section header table";
        return false;
    }
    for (uint64_t i = 0; i < count; ++i) {
        auto sh = read_struct<Elf64_Shdr>(data_ + eh.e_shoff + i * sizeof(Elf64_Shdr));
        uint64_t size = sh.sh_type == SHT_NOBITS || !in_bounds(sh.sh_offset, sh.sh_size) ? 0 : sh.sh_size;
        sections_.push_back(
            Section{sh.sh_type, sh.sh_offset, size, sh.sh_entsize, sh.sh_addralign, sh.sh_link, sh.sh_name, {}});
    }
    for (Section& s : sections_) {
        if (strndx < sections_.size()) s.name = string_at(sections_[strndx], s.name_index);
    }
    return true;
}

std::string_view ElfFile::string_at(const Section& strtab, uint64_t index) const {
    if (strtab.type != SHT_STRTAB || index >= strtab.size) return {};
    const char* begin = reinterpret_cast<const char*>(data_ + strtab.offset + index);
    const void* nul = std::memchr(begin, 0, strtab.size - index);
    if (nul == nullptr) return {};
    return std::string_view(begin, static_cast<size_t>(static_cast<const char*>(nul) - begin));
}

bool ElfFile::read_notes(uint64_t offset, uint64_t size, uint64_t align) {
    align = align == 8 ? 8 : 4;
    uint64_t pos = 0;
    while (pos + 12 <= size) {
        const uint8_t* p = data_ + offset + pos;
        uint32_t namesz = read_struct<uint32_t>(p), descsz = read_struct<uint32_t>(p + 4);
        uint32_t type = read_struct<uint32_t>(p + 8);
        uint64_t name_off = pos + 12, desc_off = name_off + align_up(namesz, align);
        uint64_t next = desc_off + align_up(descsz, align);
        if (desc_off > size || descsz > size - desc_off) return false;
        if (type == NT_GNU_BUILD_ID && namesz == 4 && std::memcmp(data_ + offset + name_off, "GNU", 4) == 0) {
            build_id_ = to_hex(data_ + offset + desc_off, descsz);
            return true;
        }
        pos = next;
    }
    return false;
}

void ElfFile::read_build_id() {
    for (const Section& s : sections_) {
        if (s.type == SHT_NOTE && read_notes(s.offset, s.size, s.addralign)) return;
    }
    auto eh = read_struct<Elf64_Ehdr>(data_);
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || !in_bounds(eh.e_phoff, uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr))) {
        return;
    }
    for (uint16_t i = 0; i < eh.e_phnum; ++i) {
        auto ph = read_struct<Elf64_Phdr>(data_ + eh.e_phoff + i * sizeof(Elf64_Phdr));
        if (ph.p_type == PT_NOTE && in_bounds(ph.p_offset, ph.p_filesz) &&
            read_notes(ph.p_offset, ph.p_filesz, ph.p_align)) {
            return;
        }
    }
}

std::vector<ElfFile::Symbol> ElfFile::read_symbols(const Section& table) const {
    std::vector<Symbol> out;
    if (table.link >= sections_.size() || (table.entsize != 0 && table.entsize != sizeof(Elf64_Sym))) return out;
    const Section& strtab = sections_[table.link];
    uint64_t count = table.size / sizeof(Elf64_Sym);
    for (uint64_t i = 0; i < count; ++i) {
        auto sym = read_struct<Elf64_Sym>(data_ + table.offset + i * sizeof(Elf64_Sym));
        int type = ELF64_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF || sym.st_value == 0) continue;
        std::string_view name = string_at(strtab, sym.st_name);
        if (!name.empty()) out.push_back(Symbol{sym.st_value, sym.st_size, name});
    }
    std::sort(out.begin(), out.end(),
              [](const Symbol& a, const Symbol& b) { return a.addr != b.addr ? a.addr < b.addr : a.size > b.size; });
    return out;
}

std::optional<std::string_view> ElfFile::lookup(const std::vector<Symbol>& table, uint64_t addr) {
    auto it = std::upper_bound(table.begin(), table.end(), addr,
                               [](uint64_t a, const Symbol& s) { return a < s.addr; });
    if (it == table.begin()) return std::nullopt;
    uint64_t start = std::prev(it)->addr;
    std::optional<std::string_view> unsized;
    for (auto s = std::prev(it);; --s) {  // the symbols starting at `start`, largest first
        if (s->size > 0 && addr - s->addr < s->size) return s->name;
        if (s->size == 0 && !unsized) unsized = s->name;
        if (s == table.begin() || std::prev(s)->addr != start) break;
    }
    return unsized;
}

std::optional<std::string> ElfFile::function_at(uint64_t addr) const {
    auto name = lookup(symtab_, addr);
    if (!name) name = lookup(dynsym_, addr);
    if (!name) return std::nullopt;
    return std::string(*name);
}

}  // namespace memguard::report
