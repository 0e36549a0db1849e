#include "common/net/security.h"

#include <cstdlib>
#include <filesystem>
#include <map>

#include "common/base/mutex.h"
#include "common/base/state_dir.h"
#include "common/net/secure_blocks.h"

namespace atl::net {

namespace {

Mutex credentials_mu;
std::map<void*, Credentials>& CredentialsByContext() REQUIRES(credentials_mu) {
  static auto* table = new std::map<void*, Credentials>();
  return *table;
}

std::string Environment(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr ? value : "";
}

}  // namespace

void SetCredentials(zmq::context_t& context, Credentials credentials) {
  if (credentials.curve()) KeepSecureBlocks();
  MutexLock lock(credentials_mu);
  CredentialsByContext()[context.handle()] = std::move(credentials);
}

void ForgetCredentials(zmq::context_t& context) {
  MutexLock lock(credentials_mu);
  CredentialsByContext().erase(context.handle());
}

Credentials CredentialsOf(zmq::context_t& context) {
  MutexLock lock(credentials_mu);
  auto it = CredentialsByContext().find(context.handle());
  return it != CredentialsByContext().end() ? it->second : Credentials{};
}

Result<Credentials> ServiceCredentials(const std::string& keys_dir) {
  if (keys_dir.empty()) return Credentials{};
  ATOLL_ASSIGN_OR_RETURN(KeyPair pair, ReadKeyPair(ClusterKeyPath(keys_dir)));
  return Credentials{pair, pair.public_key};
}

Result<Credentials> ClientCredentials(const std::string& keys_dir, const std::string& name) {
  ATOLL_ASSIGN_OR_RETURN(std::string server, ReadPublicKey(ClusterPublicKeyPath(keys_dir)));
  ATOLL_ASSIGN_OR_RETURN(KeyPair pair, ReadKeyPair(ClientKeyPath(keys_dir, name)));
  return Credentials{pair, server};
}

Result<Credentials> FindClientCredentials(std::string keys_dir, std::string key_name) {
  if (key_name.empty()) key_name = Environment("ATOLL_CLIENT_KEY");
  if (key_name.empty()) key_name = "default";
  std::string from = "the client's options";
  if (keys_dir.empty()) {
    keys_dir = Environment("ATOLL_KEYS");
    from = "$ATOLL_KEYS";
  }
  if (keys_dir.empty()) {
    keys_dir = DefaultStateDir() + "/keys";
    if (!std::filesystem::exists(ClusterPublicKeyPath(keys_dir))) return Credentials{};
    from = "the state directory";
  }
  if (keys_dir == "plain") return Credentials{};
  auto found = ClientCredentials(keys_dir, key_name);
  if (!found.ok()) return found.status().WithContext("client keys from " + from);
  return found;
}

}  // namespace atl::net
