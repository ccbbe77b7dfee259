#include "common/log.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace memguard {

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

void set_log_level(LogLevel level) {
    spdlog::level::level_enum l = spdlog::level::warn;
    switch (level) {
    case LogLevel::Trace: l = spdlog::level::trace; break;
    case LogLevel::Debug: l = spdlog::level::debug; break;
    case LogLevel::Info: l = spdlog::level::info; break;
    case LogLevel::Warn: l = spdlog::level::warn; break;
    case LogLevel::Error: l = spdlog::level::err; break;
    case LogLevel::Critical: l = spdlog::level::critical; break;
    case LogLevel::Off: l = spdlog::level::off; break;
    }
    logger().set_level(l);
}

}  // namespace memguard
