#include "tests/launcher/cluster_test_util.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "launcher/process.h"

namespace atl::testing {

namespace fs = std::filesystem;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TempDir::TempDir() {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/atoll-test-XXXXXX";
  if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  if (!path_.empty()) fs::remove_all(path_, ec);
}

std::string MakeFakeBinDir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  for (const auto& program : kServicePrograms) {
    fs::create_symlink(ATOLL_FAKE_SERVICE, dir + "/" + program, ec);
  }
  return dir;
}

std::string MissingServices(const std::string& bin_dir) {
  std::string missing;
  for (const auto& program : kServicePrograms) {
    if (access((bin_dir + "/" + program).c_str(), X_OK) != 0) {
      missing += (missing.empty() ? "" : " ") + program;
    }
  }
  return missing;
}

std::vector<pid_t> ProcessesStartedFrom(const std::string& dir) {
  std::vector<pid_t> out;
  std::error_code ec;
  const std::string prefix = dir + "/";
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    std::string argv0;
    if (!std::getline(in, argv0, '\0')) continue;
    const pid_t pid = static_cast<pid_t>(std::stol(name));
    if (argv0.rfind(prefix, 0) == 0 && proc::IsRunning(pid)) out.push_back(pid);
  }
  return out;
}

}  // namespace atl::testing
