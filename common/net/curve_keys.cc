#include "common/net/curve_keys.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <zmq.h>

namespace atl::net {

namespace fs = std::filesystem;

namespace {

constexpr size_t kZ85KeyLength = 40;

bool IsZ85Key(const std::string& key) {
  if (key.size() != kZ85KeyLength) return false;
  uint8_t decoded[32];
  return zmq_z85_decode(decoded, key.c_str()) != nullptr;
}

Status WriteFile(const std::string& path, const std::string& text, fs::perms mode) {
  std::error_code ec;
  fs::create_directories(fs::path(path).parent_path(), ec);
  if (ec) return Unavailable("cannot make the folder of " + path + ": " + ec.message());
  const std::string temporary = path + ".tmp";
  {
    // Created with no permissions for others before the secret is written into it.
    std::ofstream(temporary).close();
    fs::permissions(temporary, mode, ec);
    std::ofstream out(temporary, std::ios::trunc);
    out << text;
    if (!out) return Unavailable("cannot write " + temporary);
  }
  fs::rename(temporary, path, ec);
  if (ec) return Unavailable("cannot write " + path + ": " + ec.message());
  return Status::Ok();
}

// The `name = "value"` lines of a key file.
Result<std::map<std::string, std::string>> ReadKeyFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return NotFound("no key file " + path);
  static const std::regex line_pattern(R"re(^\s*(public|secret)\s*=\s*"([^"]*)"\s*$)re");
  std::map<std::string, std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    std::smatch match;
    if (std::regex_match(line, match, line_pattern)) keys[match[1]] = match[2];
  }
  for (const auto& [name, key] : keys) {
    if (!IsZ85Key(key)) {
      return InvalidArgument(path + ": the " + name + " key is not 40 Z85 characters");
    }
  }
  return keys;
}

Result<std::string> KeyNamed(const std::map<std::string, std::string>& keys,
                             const std::string& name, const std::string& path) {
  auto it = keys.find(name);
  if (it == keys.end()) return InvalidArgument(path + " holds no " + name + " key");
  return it->second;
}

bool IsKeyName(const std::string& name) {
  static const std::regex pattern(R"(^[A-Za-z0-9_.-]+$)");
  return std::regex_match(name, pattern) && name != "." && name != "..";
}

}  // namespace

Result<KeyPair> NewKeyPair() {
  char public_key[kZ85KeyLength + 1];
  char secret_key[kZ85KeyLength + 1];
  if (zmq_curve_keypair(public_key, secret_key) != 0) {
    return Unavailable(std::string("cannot make a CURVE key pair: ") + zmq_strerror(zmq_errno()));
  }
  return KeyPair{public_key, secret_key};
}

Status WriteKeyPair(const std::string& path, const KeyPair& pair) {
  std::ostringstream text;
  text << "# atoll CURVE key pair: keep it secret\n"
       << "public = \"" << pair.public_key << "\"\n"
       << "secret = \"" << pair.secret_key << "\"\n";
  return WriteFile(path, text.str(), fs::perms::owner_read | fs::perms::owner_write);
}

Status WritePublicKey(const std::string& path, const std::string& public_key) {
  return WriteFile(path, "public = \"" + public_key + "\"\n",
                   fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                       fs::perms::others_read);
}

Result<KeyPair> ReadKeyPair(const std::string& path) {
  ATOLL_ASSIGN_OR_RETURN(auto keys, ReadKeyFile(path));
  KeyPair pair;
  ATOLL_ASSIGN_OR_RETURN(pair.public_key, KeyNamed(keys, "public", path));
  ATOLL_ASSIGN_OR_RETURN(pair.secret_key, KeyNamed(keys, "secret", path));
  return pair;
}

Result<std::string> ReadPublicKey(const std::string& path) {
  ATOLL_ASSIGN_OR_RETURN(auto keys, ReadKeyFile(path));
  return KeyNamed(keys, "public", path);
}

std::string ClusterKeyPath(const std::string& dir) { return dir + "/cluster.key"; }
std::string ClusterPublicKeyPath(const std::string& dir) { return dir + "/cluster.pub"; }
std::string ClientKeyPath(const std::string& dir, const std::string& name) {
  return dir + "/clients/" + name + ".key";
}
std::string AllowedKeyPath(const std::string& dir, const std::string& name) {
  return dir + "/allowed/" + name + ".pub";
}

Result<bool> EnsureClusterKeys(const std::string& dir) {
  if (fs::exists(ClusterKeyPath(dir))) {
    ATOLL_RETURN_IF_ERROR(ReadKeyPair(ClusterKeyPath(dir)).status());
    return false;
  }
  ATOLL_ASSIGN_OR_RETURN(KeyPair pair, NewKeyPair());
  ATOLL_RETURN_IF_ERROR(WriteKeyPair(ClusterKeyPath(dir), pair));
  ATOLL_RETURN_IF_ERROR(WritePublicKey(ClusterPublicKeyPath(dir), pair.public_key));
  return true;
}

Result<bool> EnsureClientKey(const std::string& dir, const std::string& name) {
  if (!IsKeyName(name)) {
    return InvalidArgument("client key name '" + name +
                           "' may hold only letters, digits, '-', '_' and '.'");
  }
  if (!fs::exists(ClusterKeyPath(dir))) {
    return FailedPrecondition(dir + " has no cluster keys; make them first");
  }
  if (fs::exists(ClientKeyPath(dir, name))) {
    ATOLL_RETURN_IF_ERROR(ReadKeyPair(ClientKeyPath(dir, name)).status());
    return false;
  }
  ATOLL_ASSIGN_OR_RETURN(KeyPair pair, NewKeyPair());
  ATOLL_RETURN_IF_ERROR(WriteKeyPair(ClientKeyPath(dir, name), pair));
  ATOLL_RETURN_IF_ERROR(WritePublicKey(AllowedKeyPath(dir, name), pair.public_key));
  return true;
}

std::map<std::string, std::string> ReadAllowedKeys(const std::string& dir,
                                                   std::vector<std::string>* skipped) {
  std::map<std::string, std::string> allowed;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir + "/allowed", ec)) {
    if (entry.path().extension() != ".pub") continue;
    auto key = ReadPublicKey(entry.path().string());
    if (key.ok()) {
      allowed[*key] = entry.path().stem().string();
    } else if (skipped != nullptr) {
      skipped->push_back(key.status().message());
    }
  }
  return allowed;
}

}  // namespace atl::net
