// `atoll example NAME [ARGS...]`: runs the example program `atoll-example-NAME` that sits
// beside the `atoll` binary, on the running cluster (`--rm` of the one `atoll up` recorded,
// unless ARGS name one) or, with no cluster running, on a local cluster the example starts
// for itself. The example replaces this process (exec), so its output and exit status are
// the command's.
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "launcher/process.h"

namespace atl {

namespace {

constexpr std::string_view kPrefix = "atoll-example-";

// The NAMEs of the example programs in `dir`, sorted.
std::set<std::string> ExamplesIn(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string file = entry.path().filename().string();
    if (file.starts_with(kPrefix)) names.insert(file.substr(kPrefix.size()));
  }
  return names;
}

bool NamesCluster(const std::vector<std::string>& args) {
  return std::any_of(args.begin(), args.end(), [](const std::string& arg) {
    return arg == "--rm" || arg.starts_with("--rm=");
  });
}

[[noreturn]] void RunExample(const GlobalOptions& global, const std::string& name,
                             std::vector<std::string> args) {
  const std::string dir = proc::ExecutableDir();
  const std::string program = dir + "/" + std::string(kPrefix) + name;
  if (access(program.c_str(), X_OK) != 0) {
    Fail(fmt::format("no example '{}' in {} (there: {})", name, dir,
                     fmt::join(ExamplesIn(dir), ", ")));
  }
  if (!NamesCluster(args)) {
    if (auto cluster = ResolveCluster(global); cluster.ok()) {
      args.insert(args.begin(), {"--rm", cluster->rm_endpoint});
    } else {
      std::cerr << "atoll: " << cluster.status().message()
                << "; the example starts a local cluster of its own" << std::endl;
    }
  }
  args.insert(args.begin(), program);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::cout.flush();
  // The example connects as a client of this command's cluster, with this command's keys.
  setenv("ATOLL_KEYS", KeysDir(global).c_str(), 1);
  execv(program.c_str(), argv.data());
  Fail(fmt::format("cannot run {}: {}", program, std::strerror(errno)));
}

}  // namespace

void AddExampleCommand(CLI::App& app, const GlobalOptions& global) {
  auto name = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "example", "Run an example program (mlp, pipeline, moe) on the running cluster");
  cmd->add_option("name", *name, "The example: atoll-example-NAME beside atoll")->required();
  // Everything after NAME is the example's own arguments (`atoll example mlp --help`).
  // Nothing falls through to `atoll`'s own options or help: they are the example's.
  cmd->prefix_command();
  cmd->fallthrough(false);
  cmd->set_help_flag();
  cmd->callback([cmd, name, &global] { RunExample(global, *name, cmd->remaining()); });
}

}  // namespace atl
