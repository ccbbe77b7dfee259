#include "common/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_sinks.h>

namespace memguard {

namespace {

spdlog::logger& logger() {
    // Leaked on purpose: hooks may log during process teardown, after static destructors ran.
    static spdlog::logger* instance = [] {
        auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
        auto* l = new spdlog::logger("memguard", std::move(sink));
        l->set_pattern("memguard: %l: %v");
        l->set_level(spdlog::level::warn);
        l->flush_on(spdlog::level::trace);
        return l;
    }();
    return *instance;
}

spdlog::level::level_enum spdlog_level(LogLevel level) {
    switch (level) {
    case LogLevel::Trace: return spdlog::level::trace;
    case LogLevel::Debug: return spdlog::level::debug;
    case LogLevel::Info: return spdlog::level::info;
    case LogLevel::Warn: return spdlog::level::warn;
    case LogLevel::Error: return spdlog::level::err;
    case LogLevel::Critical: return spdlog::level::critical;
    case LogLevel::Off: return spdlog::level::off;
    }
    return spdlog::level::warn;
}

}  // namespace

void set_log_level(LogLevel level) { logger().set_level(spdlog_level(level)); }

bool log_enabled(LogLevel level) { return logger().should_log(spdlog_level(level)); }

void log_text(LogLevel level, std::string_view text) {
    // "{}" and not the text as the format: a message that holds braces is written as it is.
    logger().log(spdlog_level(level), "{}", text);
}

}  // namespace memguard
