// `atoll onnx run MODEL.onnx --input NAME=FILE.npy ... --out DIR [...]`: ONNX models on the
// cluster. The work is the Python package's (atoll.onnx lowers the model; `python -m
// atoll.onnx` is the command), so this replaces the process (exec) with the interpreter that
// has the package, and its output and exit status are the command's:
//   1. $ATOLL_PYTHON, when set;
//   2. python3 beside this binary: a wheel installed into a venv puts both in <venv>/bin;
//   3. the build tree's interpreter (CMake's ATOLL_PYTHON), with the build's package
//      directory (build/python) first on PYTHONPATH;
//   4. python3 on PATH.
// The cluster is the one `atoll`'s own options name (--state-dir, --rm, --keys), passed on as
// the variables atoll.connect() reads; the command's own --rm, --state-dir and --keys win.
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "cli/commands.h"
#include "launcher/process.h"

namespace atl {

namespace {

bool IsExecutable(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec) && access(path.c_str(), X_OK) == 0;
}

// The interpreter to run, and the directory to put first on PYTHONPATH ("" for none).
std::pair<std::string, std::string> FindPython() {
  if (const char* env = std::getenv("ATOLL_PYTHON"); env != nullptr && *env != '\0') {
    return {env, ""};
  }
  const std::string beside = proc::ExecutableDir() + "/python3";
  if (IsExecutable(beside)) return {beside, ""};
#if defined(ATOLL_BUILD_PYTHON) && defined(ATOLL_BUILD_PYTHON_DIR)
  if (IsExecutable(ATOLL_BUILD_PYTHON)) return {ATOLL_BUILD_PYTHON, ATOLL_BUILD_PYTHON_DIR};
#endif
  return {"python3", ""};
}

[[noreturn]] void RunOnnx(const GlobalOptions& global, std::vector<std::string> args) {
  auto [python, package_dir] = FindPython();
  if (!package_dir.empty()) {
    const char* path = std::getenv("PYTHONPATH");
    const std::string joined =
        path != nullptr && *path != '\0' ? package_dir + ":" + path : package_dir;
    setenv("PYTHONPATH", joined.c_str(), 1);
  }
  // atoll.connect() finds the cluster from these, as this command would.
  if (!global.state_dir.empty()) setenv("ATOLL_HOME", global.state_dir.c_str(), 1);
  if (!global.rm_endpoint.empty()) setenv("ATOLL_RM", global.rm_endpoint.c_str(), 1);
  if (!global.keys_dir.empty()) setenv("ATOLL_KEYS", global.keys_dir.c_str(), 1);
  args.insert(args.begin(), {python, "-m", "atoll.onnx"});
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::cout.flush();
  execvp(python.c_str(), argv.data());
  Fail(
      fmt::format("cannot run the Python interpreter {} (set ATOLL_PYTHON to one that has the "
                  "atoll package and onnx): {}",
                  python, std::strerror(errno)));
}

}  // namespace

void AddOnnxCommand(CLI::App& app, const GlobalOptions& global) {
  CLI::App* cmd = app.add_subcommand(
      "onnx",
      "Run an ONNX model on the cluster: atoll onnx run MODEL.onnx --input NAME=FILE.npy ... "
      "--out DIR (atoll onnx run --help)");
  // Everything after `onnx` is the Python command's (`atoll onnx run --help` is its help).
  cmd->prefix_command();
  cmd->allow_extras();
  cmd->fallthrough(false);
  cmd->set_help_flag();
  cmd->callback([cmd, &global] { RunOnnx(global, cmd->remaining()); });
}

}  // namespace atl
