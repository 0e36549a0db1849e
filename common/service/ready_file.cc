#include "common/service/ready_file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <toml.hpp>

namespace atl {

Status WriteReadyFile(const std::string& path, const std::map<std::string, std::string>& values) {
  if (path.empty()) return Status::Ok();
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    if (!out) return Unavailable("cannot write ready file " + tmp);
    toml::table table;
    for (const auto& [k, v] : values) table[k] = v;
    out << toml::value(table);
    out << "pid = " << getpid() << "\n";
    if (!out.flush()) return Unavailable("cannot write ready file " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return Unavailable("cannot rename ready file to " + path);
  }
  return Status::Ok();
}

Result<std::map<std::string, std::string>> ReadReadyFile(const std::string& path) {
  try {
    const auto root = toml::parse(path);
    std::map<std::string, std::string> out;
    for (const auto& [k, v] : root.as_table()) {
      out[k] = v.is_string() ? v.as_string().str : toml::format(v);
    }
    return out;
  } catch (const std::exception& e) {
    return NotFound("ready file " + path + ": " + e.what());
  }
}

}  // namespace atl
