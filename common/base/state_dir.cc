#include "common/base/state_dir.h"

#include <unistd.h>

#include <cstdlib>

namespace atl {

std::string DefaultStateDir() {
  if (const char* home = std::getenv("ATOLL_HOME"); home != nullptr && *home != '\0') {
    return home;
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return std::string(home) + "/.atoll";
  }
  return "/tmp/atoll-" + std::to_string(getuid());
}

}  // namespace atl
