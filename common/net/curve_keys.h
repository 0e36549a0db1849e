// CURVE keys on disk: key pairs, public keys and the keys directory `atoll keygen` writes.
// Keys are ZeroMQ's Z85 text (40 characters for 32 bytes). A key file holds one line per
// key, `public = "..."` and, in a key pair's file, `secret = "..."`.
//
// The keys directory:
//   cluster.key          the cluster's key pair: every service (a "member") has it; secret
//   cluster.pub          the cluster's public key: what a client needs to reach the cluster
//   clients/NAME.key     a client's key pair, handed to whoever runs that client; secret
//   allowed/NAME.pub     the client keys the cluster accepts, read again whenever the folder
//                        changes (add or remove a file to allow or refuse a client)
#pragma once

#include <map>
#include <string>
#include <vector>

#include "atoll/status.h"

namespace atl::net {

struct KeyPair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// A fresh key pair from libsodium (through zmq_curve_keypair).
Result<KeyPair> NewKeyPair();

// Writes a key pair readable by its owner only (0600), or a public key (0644), atomically.
Status WriteKeyPair(const std::string& path, const KeyPair& pair);
Status WritePublicKey(const std::string& path, const std::string& public_key);
// InvalidArgument naming the file when a key is missing or not 40 Z85 characters.
Result<KeyPair> ReadKeyPair(const std::string& path);
Result<std::string> ReadPublicKey(const std::string& path);

// Paths inside a keys directory.
std::string ClusterKeyPath(const std::string& dir);
std::string ClusterPublicKeyPath(const std::string& dir);
std::string ClientKeyPath(const std::string& dir, const std::string& name);
std::string AllowedKeyPath(const std::string& dir, const std::string& name);

// Makes the cluster's key pair in `dir` unless it has one already. Returns whether it made it.
Result<bool> EnsureClusterKeys(const std::string& dir);
// Makes client `name`'s key pair and allows it, unless it exists already. Needs the cluster
// keys first (FailedPrecondition otherwise). A name is letters, digits, '-', '_' and '.'.
Result<bool> EnsureClientKey(const std::string& dir, const std::string& name);

// The allowed client keys of `dir`: public key -> name (the file's stem). Files that do not
// hold a key are skipped, each with a warning in `skipped`.
std::map<std::string, std::string> ReadAllowedKeys(const std::string& dir,
                                                   std::vector<std::string>* skipped = nullptr);

}  // namespace atl::net
