#include "launcher/cluster_info.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <toml.hpp>

namespace atl {

namespace {

// A TOML basic string: quoted, with backslash, quote and control characters escaped.
std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (const char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

// A bare key when it can be one, else a quoted key.
std::string Key(std::string_view k) {
  bool bare = !k.empty();
  for (const char c : k) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') bare = false;
  }
  return bare ? std::string(k) : Quote(k);
}

std::string Serialize(const ClusterInfo& info) {
  std::string out =
      "# Written by atoll when it started this cluster; read by `atoll status`,\n"
      "# `atoll watch`, `atoll submit` and `atoll stop`. Do not edit.\n";
  out += "config = " + Quote(info.config_path) + "\n";
  out += "keys_dir = " + Quote(info.keys_dir) + "\n";
  out += "rm_endpoint = " + Quote(info.rm_endpoint) + "\n";
  out += "events_in = " + Quote(info.events_in) + "\n";
  out += "events_out = " + Quote(info.events_out) + "\n";
  out += "started_at_us = " + std::to_string(info.started_at_us) + "\n";
  if (info.supervisor.pid != 0) {
    out += "\n[supervisor]\n";
    out += "name = " + Quote(info.supervisor.name) + "\n";
    out += "program = " + Quote(info.supervisor.program) + "\n";
    out += "pid = " + std::to_string(info.supervisor.pid) + "\n";
    out += "log = " + Quote(info.supervisor.log) + "\n";
  }
  for (const auto& p : info.processes) {
    out += "\n[[processes]]\n";
    out += "name = " + Quote(p.name) + "\n";
    out += "role = " + Quote(p.role) + "\n";
    out += "target = " + Quote(p.target) + "\n";
    out += "program = " + Quote(p.program) + "\n";
    out += "pid = " + std::to_string(p.pid) + "\n";
    out += "log = " + Quote(p.log) + "\n";
    out += "restarts = " + std::to_string(p.restarts) + "\n";
    out += "endpoints = {";
    bool first = true;
    for (const auto& [k, v] : p.endpoints) {
      out += (first ? " " : ", ") + Key(k) + " = " + Quote(v);
      first = false;
    }
    out += first ? "}\n" : " }\n";
  }
  return out;
}

std::string Str(const toml::value& t, const char* key) {
  return toml::find_or<std::string>(t, key, std::string());
}

}  // namespace

const ProcessInfo* ClusterInfo::Find(std::string_view name) const {
  for (const auto& p : processes) {
    if (p.name == name) return &p;
  }
  return nullptr;
}

std::string ClusterInfoPath(const std::string& state_dir, const std::string& record) {
  return state_dir + "/" + record + ".toml";
}

Status WriteClusterInfo(const ClusterInfo& info) {
  const std::string path = ClusterInfoPath(info.state_dir, info.record);
  const std::string tmp = path + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(tmp);
    out << Serialize(info);
    if (!out.flush()) return Unavailable("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Unavailable("cannot rename " + tmp + " to " + path);
  }
  return Status::Ok();
}

Result<ClusterInfo> ReadClusterInfo(const std::string& state_dir, const std::string& record) {
  const std::string path = ClusterInfoPath(state_dir, record);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("no " + path);
  try {
    const auto root = toml::parse(path);
    ClusterInfo info;
    info.state_dir = state_dir;
    info.record = record;
    info.config_path = Str(root, "config");
    info.keys_dir = Str(root, "keys_dir");
    info.rm_endpoint = Str(root, "rm_endpoint");
    info.events_in = Str(root, "events_in");
    info.events_out = Str(root, "events_out");
    info.started_at_us = toml::find_or<int64_t>(root, "started_at_us", 0);
    if (root.contains("supervisor")) {
      const auto& t = toml::find(root, "supervisor");
      info.supervisor.name = Str(t, "name");
      info.supervisor.program = Str(t, "program");
      info.supervisor.pid = toml::find_or<int64_t>(t, "pid", 0);
      info.supervisor.log = Str(t, "log");
    }
    std::vector<toml::value> processes;
    if (root.contains("processes"))
      processes = toml::find<std::vector<toml::value>>(root, "processes");
    for (const auto& t : processes) {
      ProcessInfo p;
      p.name = Str(t, "name");
      p.role = Str(t, "role");
      p.target = Str(t, "target");
      p.program = Str(t, "program");
      p.pid = toml::find_or<int64_t>(t, "pid", 0);
      p.log = Str(t, "log");
      p.restarts = toml::find_or<int64_t>(t, "restarts", 0);
      if (t.contains("endpoints")) {
        for (const auto& [k, v] : toml::find(t, "endpoints").as_table()) {
          if (v.is_string()) p.endpoints[k] = v.as_string().str;
        }
      }
      info.processes.push_back(std::move(p));
    }
    if (info.rm_endpoint.empty()) return InvalidArgument(path + ": no rm_endpoint");
    return info;
  } catch (const std::exception& e) {
    return InvalidArgument(path + ": " + e.what());
  }
}

Status RemoveClusterInfo(const std::string& state_dir, const std::string& record) {
  const std::string path = ClusterInfoPath(state_dir, record);
  std::error_code ec;
  std::filesystem::remove(path, ec);
  if (ec) return Unavailable("cannot remove " + path + ": " + ec.message());
  return Status::Ok();
}

std::vector<std::string> ClusterRecords(const std::string& state_dir) {
  std::vector<std::string> hosts;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(state_dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with("host-") && name.ends_with(".toml")) {
      hosts.push_back(name.substr(0, name.size() - 5));
    }
  }
  std::sort(hosts.begin(), hosts.end());
  if (std::filesystem::exists(ClusterInfoPath(state_dir), ec)) hosts.push_back(kHeadRecord);
  return hosts;
}

}  // namespace atl
