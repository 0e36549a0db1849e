#include "common/service/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace atl {

void InitLogging(std::string_view service, std::string_view level) {
  auto logger = spdlog::stderr_color_mt(std::string(service));
  logger->set_pattern("%H:%M:%S.%e %n %^%l%$: %v");
  auto parsed = spdlog::level::from_str(std::string(level));
  if (parsed == spdlog::level::off && level != "off") parsed = spdlog::level::info;
  logger->set_level(parsed);
  spdlog::set_default_logger(std::move(logger));
}

}  // namespace atl
