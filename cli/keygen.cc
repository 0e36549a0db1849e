// `atoll keygen`: makes CURVE keys. The cluster's key pair (every service holds it) and
// client key pairs, each allowed by a public key in allowed/ (common/net/curve_keys.h).
// Keeps keys that exist: run it again to add a client, or delete allowed/NAME.pub to refuse
// one (services read allowed/ again on the next connection).
#include <iostream>

#include "cli/commands.h"
#include "common/net/curve_keys.h"

namespace atl {

namespace {

void RunKeygen(const std::string& dir, const std::vector<std::string>& clients) {
  auto made_cluster = net::EnsureClusterKeys(dir);
  if (!made_cluster.ok()) Fail(made_cluster.status().WithContext("keygen"));
  std::cout << (*made_cluster ? "made " : "kept ") << net::ClusterKeyPath(dir)
            << " (the cluster's key pair: give it to every service; keep it secret)\n";
  for (const auto& name : clients) {
    auto made = net::EnsureClientKey(dir, name);
    if (!made.ok()) Fail(made.status().WithContext("keygen"));
    std::cout << (*made ? "made " : "kept ") << net::ClientKeyPath(dir, name) << " (allowed by "
              << net::AllowedKeyPath(dir, name) << ")\n";
  }
  std::cout << "clients use them with ATOLL_KEYS=" << dir << " ATOLL_CLIENT_KEY=NAME" << std::endl;
}

}  // namespace

void AddKeygenCommand(CLI::App& app, const GlobalOptions& global) {
  auto* cmd = app.add_subcommand(
      "keygen", "Make the cluster's CURVE key pair and client key pairs (kept when they exist)");
  auto dir = std::make_shared<std::string>();
  auto clients = std::make_shared<std::vector<std::string>>();
  cmd->add_option("--dir", *dir, "the keys directory (default: <state dir>/keys)");
  cmd->add_option("--client", *clients,
                  "make this client's key pair and allow it (repeatable; default: \"default\")");
  cmd->callback([dir, clients, &global] {
    if (clients->empty()) clients->push_back("default");
    RunKeygen(dir->empty() ? global.state_dir + "/keys" : *dir, *clients);
  });
}

}  // namespace atl
