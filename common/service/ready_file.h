// Ready files: how a service started with free ports tells its launcher where it listens.
// Once every socket is bound, the service writes "key = value" lines (TOML) to the path
// given by --ready-file, atomically (write then rename), so a reader sees all or nothing.
#pragma once

#include <map>
#include <string>

#include "atoll/status.h"

namespace atl {

Status WriteReadyFile(const std::string& path, const std::map<std::string, std::string>& values);
Result<std::map<std::string, std::string>> ReadReadyFile(const std::string& path);

}  // namespace atl
