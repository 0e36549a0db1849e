#include "bench/common/bench_result.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

namespace atl::bench {

namespace {

// Trims ASCII whitespace at both ends.
std::string Trim(std::string s) {
  const auto not_space = [](unsigned char c) { return !std::isspace(c); };
  s.erase(s.begin(), std::find_if(s.begin(), s.end(), not_space));
  s.erase(std::find_if(s.rbegin(), s.rend(), not_space).base(), s.end());
  return s;
}

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon != std::string::npos) return Trim(line.substr(colon + 1));
  }
  return "unknown";
}

std::string Today() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  std::array<char, 16> buf{};
  std::strftime(buf.data(), buf.size(), "%Y-%m-%d", &local);
  return buf.data();
}

// `git rev-parse --short HEAD` in the source tree; empty on any failure.
std::string GitShortHead() {
  const std::string command =
      "git -C '" ATOLL_BENCH_SOURCE_DIR "' rev-parse --short HEAD 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::array<char, 128> buf{};
  std::string out;
  while (std::fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  const int rc = pclose(pipe);
  return rc == 0 ? Trim(out) : "";
}

}  // namespace

Result<Summary> Summarize(std::vector<double> samples) {
  if (samples.empty()) return InvalidArgument("no samples");
  for (double s : samples) {
    if (!std::isfinite(s)) return InvalidArgument("a sample is not finite");
  }
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  Summary summary;
  summary.runs = n;
  summary.min = samples.front();
  summary.max = samples.back();
  summary.median = n % 2 == 1 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
  return summary;
}

Machine ThisMachine() { return Machine{std::thread::hardware_concurrency(), CpuModel(), Today()}; }

std::string CurrentCommit() {
  if (const char* env = std::getenv("ATOLL_COMMIT"); env != nullptr && *env != '\0') return env;
  std::string head = GitShortHead();
  return head.empty() ? "unknown" : head;
}

BenchResult::BenchResult(std::string bench, bool quick)
    : bench_(std::move(bench)), quick_(quick), commit_(CurrentCommit()), machine_(ThisMachine()) {}

void BenchResult::Remember(Status error) {
  if (first_error_.ok()) first_error_ = std::move(error);
}

void BenchResult::Add(std::string series, Params params, std::string metric, std::string unit,
                      std::vector<double> samples) {
  const std::string where = "row " + series + " " + metric;
  std::set<std::string> names;
  for (const Param& p : params) {
    if (!names.insert(p.name).second) {
      Remember(InvalidArgument(where + ": param " + p.name + " given twice"));
      return;
    }
  }
  auto summary = Summarize(std::move(samples));
  if (!summary.ok()) {
    Remember(summary.status().WithContext(where));
    return;
  }
  rows_.push_back(
      Row{std::move(series), std::move(params), std::move(metric), std::move(unit), *summary});
}

void BenchResult::Derive(std::string name, double value) {
  if (!std::isfinite(value)) {
    Remember(InvalidArgument("derived " + name + " is not finite"));
    return;
  }
  for (auto& [n, v] : derived_) {
    if (n == name) {
      v = value;
      return;
    }
  }
  derived_.emplace_back(std::move(name), value);
}

nlohmann::ordered_json BenchResult::ToJson() const {
  nlohmann::ordered_json out;
  out["bench"] = bench_;
  out["commit"] = commit_;
  out["machine"] = {{"cores", machine_.cores}, {"cpu", machine_.cpu}, {"date", machine_.date}};
  out["quick"] = quick_;
  out["rows"] = nlohmann::ordered_json::array();
  for (const Row& row : rows_) {
    nlohmann::ordered_json params = nlohmann::ordered_json::object();
    for (const Param& p : row.params) params[p.name] = p.value;
    nlohmann::ordered_json r;
    r["series"] = row.series;
    r["params"] = std::move(params);
    r["metric"] = row.metric;
    r["unit"] = row.unit;
    r["runs"] = row.summary.runs;
    r["min"] = row.summary.min;
    r["median"] = row.summary.median;
    r["max"] = row.summary.max;
    out["rows"].push_back(std::move(r));
  }
  out["derived"] = nlohmann::ordered_json::object();
  for (const auto& [name, value] : derived_) out["derived"][name] = value;
  return out;
}

Status BenchResult::Write(const std::string& dir) const {
  if (!first_error_.ok()) return first_error_.WithContext("bench " + bench_);
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Unavailable("cannot create " + dir + ": " + ec.message());
  const fs::path path = fs::path(dir) / (bench_ + ".json");
  const fs::path temp = fs::path(dir) / (bench_ + ".json.tmp." + std::to_string(getpid()));
  {
    std::ofstream out(temp);
    // Invalid UTF-8 in a name is replaced rather than thrown.
    out << ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    out.close();
    if (!out) {
      fs::remove(temp, ec);
      return Unavailable("cannot write " + temp.string());
    }
  }
  fs::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(temp, ignored);
    return Unavailable("cannot write " + path.string() + ": " + ec.message());
  }
  return Status::Ok();
}

double Median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  const size_t n = samples.size();
  return n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

}  // namespace atl::bench
