// Logging setup: every process logs through spdlog's default logger to stderr, one line
// per record, prefixed with the service name.
#pragma once

#include <string_view>

#include <spdlog/spdlog.h>

namespace atl {

// level: "trace", "debug", "info", "warn", "error", "off". Unknown names mean "info".
void InitLogging(std::string_view service, std::string_view level);

}  // namespace atl
