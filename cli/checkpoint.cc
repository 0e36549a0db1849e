// `atoll checkpoint ls PATH`: what a checkpoint holds, from its index (index.json) on this
// machine, with no cluster: each tensor's dtype, shape and layout, its blocks, and how many
// of their files are here whole (each host's store writes its own blocks under its own
// root; see README, "Checkpoints"). PATH is a checkpoint directory, or a checkpoint path as
// a client gives it: below <state dir>/checkpoints/<client key>, the root `atoll up` gives
// its stores.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "common/checkpoint/index.h"

namespace atl {

namespace {

namespace fs = std::filesystem;

// The directory PATH names: itself when it holds an index, else the client's path below the
// state dir's checkpoint root.
fs::path CheckpointDirectory(const std::string& path, const GlobalOptions& global) {
  if (fs::exists(fs::path(path) / checkpoint::kIndexFile)) return path;
  const char* key = std::getenv("ATOLL_CLIENT_KEY");
  return fs::path(global.state_dir) / "checkpoints" / (key && *key ? key : "default") / path;
}

void List(const std::string& path, const GlobalOptions& global) {
  const fs::path dir = CheckpointDirectory(path, global);
  std::ifstream in(dir / checkpoint::kIndexFile);
  if (!in) {
    Fail(fmt::format("no complete checkpoint at {}: it has no {}", dir.string(),
                     checkpoint::kIndexFile));
  }
  std::stringstream text;
  text << in.rdbuf();
  auto index = checkpoint::IndexFromJson(text.str());
  if (!index.ok()) Fail(index.status().WithContext(dir.string()));
  std::cout << dir.string() << "\n";
  for (const checkpoint::TensorEntry& t : index->tensors) {
    size_t here = 0;
    uint64_t bytes = 0;
    for (const checkpoint::Block& b : t.blocks) {
      std::error_code ec;
      here += fs::file_size(dir / b.file, ec) == b.bytes && !ec;
      bytes += b.bytes;
    }
    std::string split;
    for (int32_t axis : t.split) split += fmt::format("{}{}", split.empty() ? "" : ",", axis);
    std::cout << fmt::format(
        "  {:<16} {:<16} mesh {:<8} split {:<10} {} blocks, {} bytes, {} here\n", t.name,
        fmt::format("{}{}", DTypeName(t.dtype), ShapeString(t.shape)), ShapeString(t.mesh),
        "[" + split + "]", t.blocks.size(), bytes, here);
  }
}

}  // namespace

void AddCheckpointCommand(CLI::App& app, const GlobalOptions& global) {
  auto* cmd =
      app.add_subcommand("checkpoint", "Look at checkpoints (Client::Save) on this machine");
  cmd->require_subcommand(1);
  auto* ls = cmd->add_subcommand(
      "ls", "A checkpoint's tensors, layouts and blocks, and how many of its files are here");
  auto path = std::make_shared<std::string>();
  ls->add_option("PATH", *path,
                 "a checkpoint directory, or a client's checkpoint path (below "
                 "<state dir>/checkpoints/<client key>)")
      ->required();
  ls->callback([path, &global] { List(*path, global); });
}

}  // namespace atl
