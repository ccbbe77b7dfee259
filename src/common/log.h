// memguard's logger: spdlog, to stderr, every line prefixed "memguard: <level>: ".
// The logger is private to memguard (never registered in spdlog's global registry), so a host
// program's own spdlog is untouched.
//
// Only log.cpp includes spdlog. A call site formats its message with fmt (the format string checked
// at compile time) and hands the text to log_text(): spdlog is header-only here (the preload library
// needs no libspdlog.so), and compiling its implementation into every file that logs cost about
// 17 s of -O2 -g per file, most of a build.
#pragma once

#include <fmt/format.h>

#include <string_view>
#include <utility>

#include "common/config.h"

namespace memguard {

void set_log_level(LogLevel level);

/// Whether a message of this level is written (the level set_log_level() chose, Warn until then).
bool log_enabled(LogLevel level);

/// Writes one line: the prefix, `text`, a newline; flushed at once.
void log_text(LogLevel level, std::string_view text);

/// Formats and writes one line when its level is enabled. Never throws: a message that cannot be
/// formatted (out of memory) is dropped, as a hook must not throw into its caller.
template <typename... Args>
void log_message(LogLevel level, fmt::format_string<Args...> format, Args&&... args) noexcept {
    if (!log_enabled(level)) return;
    try {
        fmt::memory_buffer text;
        fmt::format_to(fmt::appender(text), format, std::forward<Args>(args)...);
        log_text(level, std::string_view(text.data(), text.size()));
    } catch (...) {
    }
}

}  // namespace memguard

#define MG_LOG_DEBUG(...) ::memguard::log_message(::memguard::LogLevel::Debug, __VA_ARGS__)
#define MG_LOG_INFO(...) ::memguard::log_message(::memguard::LogLevel::Info, __VA_ARGS__)
#define MG_LOG_WARN(...) ::memguard::log_message(::memguard::LogLevel::Warn, __VA_ARGS__)
#define MG_LOG_ERROR(...) ::memguard::log_message(::memguard::LogLevel::Error, __VA_ARGS__)
