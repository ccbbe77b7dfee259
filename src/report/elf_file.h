// A minimal reader of ELF64 files for offline symbolization: the GNU build-id, whether DWARF line
// information is present, and function names from .symtab / .dynsym. Every read is bounds-checked,
// so a corrupt or hostile file yields "not found" answers, never a crash.
//
// Module paths come from reports, which anyone can write: only a regular file is opened for
// reading (a FIFO, a device or a directory never is, so opening cannot block or act on a device),
// and the file stays open, so that addr2line reads the very file checked (fd_path()).
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
    /// The largest file mapped: 16 GiB of address space, mapped read-only, of which only the pages
    /// of the headers, notes and symbol tables are read. Eight times the largest module of a CUDA
    /// PyTorch install (libtorch_cuda.so with its device code, 1 to 2 GB), far below any machine's
    /// address space.
    static constexpr uint64_t kMaxSize = uint64_t{16} << 30;

    /// Opens for reading the file `path` names (resolved under the directory `root` as if it were
    /// "/", when `root` is not empty: absolute symbolic links and ".." stay inside it where the
    /// kernel has openat2's RESOLVE_IN_ROOT) when it is a regular file of at most kMaxSize bytes.
    /// Returns the descriptor (close-on-exec), or -1 with `error` set ("No such file or directory",
    /// "not a regular file", ...) and `err` the errno of a failed open (0 for a file refused).
    static int open_regular(const std::string& root, const std::string& path, std::string& error, int& err);
    /// Maps and reads the file open at `fd`, which it takes over. Returns nullptr and sets `error`
    /// (e.g. "not an ELF64 file") when it cannot be used.
    static std::unique_ptr<ElfFile> map(int fd, std::string& error);
    /// open_regular("", path) and map().
    static std::unique_ptr<ElfFile> open(const std::string& path, std::string& error);
    ~ElfFile();
    ElfFile(const ElfFile&) = delete;
    ElfFile& operator=(const ElfFile&) = delete;

    /// The GNU build-id in lowercase hex; empty when the file has none.
    const std::string& build_id() const { return build_id_; }
    /// True when the file has a .debug_line (or .zdebug_line) section.
    bool has_debug_line() const { return has_debug_line_; }
    bool has_symtab() const { return !symtab_.empty(); }
    /// A path naming the open file itself ("/proc/self/fd/N"), for a child that inherits fd().
    std::string fd_path() const { return "/proc/self/fd/" + std::to_string(fd_); }
    int fd() const { return fd_; }
    /// The file's identity (device, inode): two modules naming one file share one ElfFile.
    std::pair<uint64_t, uint64_t> file_id() const { return file_id_; }

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

    ElfFile(const uint8_t* data, size_t size, int fd) : data_(data), size_(size), fd_(fd) {}
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
    int fd_;
    std::pair<uint64_t, uint64_t> file_id_;
    std::vector<Section> sections_;
    std::string build_id_;
    bool has_debug_line_ = false;
    std::vector<Symbol> symtab_;
    std::vector<Symbol> dynsym_;
};

}  // namespace memguard::report
