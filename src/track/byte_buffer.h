// The report writer's append buffer: bytes in malloc'd memory, appended to in place.
//
// std::string::append is an out-of-line call into libstdc++ (about 100 instructions for a record,
// counted with callgrind) and cannot hand out room to write a record into; this appends with an
// inline capacity check and a memcpy, and extend() gives the room itself, so that a packed record
// is written straight into the buffer. Never throws: a failed growth returns nullptr and leaves
// the contents as they were (the writer counts the record as lost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <utility>

namespace memguard::track {

class ByteBuffer {
public:
    ByteBuffer() = default;
    ~ByteBuffer() { std::free(data_); }
    ByteBuffer(ByteBuffer&& o) noexcept
        : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)), cap_(std::exchange(o.cap_, 0)) {}
    ByteBuffer& operator=(ByteBuffer&& o) noexcept {
        if (this != &o) {
            std::free(data_);
            data_ = std::exchange(o.data_, nullptr);
            size_ = std::exchange(o.size_, 0);
            cap_ = std::exchange(o.cap_, 0);
        }
        return *this;
    }
    ByteBuffer(const ByteBuffer&) = delete;
    ByteBuffer& operator=(const ByteBuffer&) = delete;

    const char* data() const noexcept { return data_; }
    size_t size() const noexcept { return size_; }
    size_t capacity() const noexcept { return cap_; }
    bool empty() const noexcept { return size_ == 0; }
    std::string_view view() const noexcept { return {data_, size_}; }

    /// Room for `n` more bytes at the end, counted in size(); nullptr (nothing changed) when the
    /// memory for it cannot be had.
    char* extend(size_t n) noexcept {
        if (n > cap_ - size_ && !grow(n)) return nullptr;
        char* at = data_ + size_;
        size_ += n;
        return at;
    }
    /// False (nothing appended) when the memory cannot be had.
    bool append(std::string_view bytes) noexcept {
        char* at = extend(bytes.size());
        if (at == nullptr) return false;
        if (!bytes.empty()) std::memcpy(at, bytes.data(), bytes.size());
        return true;
    }
    void clear() noexcept { size_ = 0; }
    /// Empties the buffer and returns its memory.
    void release() noexcept {
        std::free(data_);
        data_ = nullptr;
        size_ = cap_ = 0;
    }
    void swap(ByteBuffer& o) noexcept {
        std::swap(data_, o.data_);
        std::swap(size_, o.size_);
        std::swap(cap_, o.cap_);
    }

private:
    bool grow(size_t n) noexcept {
        if (n > SIZE_MAX / 2 - size_) return false;
        size_t want = cap_ < kMinCapacity ? kMinCapacity : cap_ * 2;
        if (want < size_ + n) want = size_ + n;
        void* p = std::realloc(data_, want);
        if (p == nullptr) return false;
        data_ = static_cast<char*>(p);
        cap_ = want;
        return true;
    }

    static constexpr size_t kMinCapacity = 64 << 10;
    char* data_ = nullptr;
    size_t size_ = 0;
    size_t cap_ = 0;
};

}  // namespace memguard::track
