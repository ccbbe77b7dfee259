// memguard's logger: spdlog, to stderr, every line prefixed "memguard: <level>: ".
// The logger is private to memguard (never registered in spdlog's global registry), so a host
// program's own spdlog is untouched.
#pragma once

#include <spdlog/logger.h>

#include "common/config.h"

namespace memguard {

/// The process-wide logger; created on first use, never destroyed (usable from destructors).
spdlog::logger& logger();

void set_log_level(LogLevel level);

}  // namespace memguard

#define MG_LOG_DEBUG(...) ::memguard::logger().debug(__VA_ARGS__)
#define MG_LOG_INFO(...) ::memguard::logger().info(__VA_ARGS__)
#define MG_LOG_WARN(...) ::memguard::logger().warn(__VA_ARGS__)
#define MG_LOG_ERROR(...) ::memguard::logger().error(__VA_ARGS__)
