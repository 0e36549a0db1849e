#include "services/scheduler/policy.h"

#include <algorithm>
#include <limits>

namespace atl::scheduler {

namespace {

class Fifo final : public SchedulingPolicy {
 public:
  std::string_view name() const override { return "fifo"; }
  uint64_t Pick(const std::vector<Candidate>& candidates) override {
    return std::min_element(
               candidates.begin(), candidates.end(),
               [](const Candidate& a, const Candidate& b) { return a.arrival < b.arrival; })
        ->client;
  }
  void Charge(uint64_t, double, double) override {}
};

class ProportionalShare final : public SchedulingPolicy {
 public:
  std::string_view name() const override { return "share"; }

  uint64_t Pick(const std::vector<Candidate>& candidates) override {
    // Virtual time: the lowest pass among clients that want to run. Anyone below it was
    // idle and rejoins there.
    double now = std::numeric_limits<double>::max();
    for (const auto& c : candidates) {
      if (auto it = pass_.find(c.client); it != pass_.end()) now = std::min(now, it->second);
    }
    if (now == std::numeric_limits<double>::max()) now = floor_;
    now = std::max(now, floor_);
    const Candidate* best = nullptr;
    for (const auto& c : candidates) {
      double& pass = pass_[c.client];
      pass = std::max(pass, now);
      if (best == nullptr || pass < pass_[best->client] ||
          (pass == pass_[best->client] && c.arrival < best->arrival)) {
        best = &c;
      }
    }
    floor_ = pass_[best->client];
    return best->client;
  }

  void Charge(uint64_t client, double weight, double cost_us) override {
    pass_[client] += std::max(cost_us, 1.0) / std::max(weight, 1e-9);
  }

 private:
  std::map<uint64_t, double> pass_;
  double floor_ = 0;  // the virtual time of the last pick
};

}  // namespace

std::unique_ptr<SchedulingPolicy> MakeFifoPolicy() { return std::make_unique<Fifo>(); }
std::unique_ptr<SchedulingPolicy> MakeProportionalSharePolicy() {
  return std::make_unique<ProportionalShare>();
}

Result<std::unique_ptr<SchedulingPolicy>> MakePolicy(std::string_view name) {
  if (name == "fifo") return MakeFifoPolicy();
  if (name == "share") return MakeProportionalSharePolicy();
  return InvalidArgument("unknown scheduling policy '" + std::string(name) +
                         "' (known: fifo, share)");
}

}  // namespace atl::scheduler
